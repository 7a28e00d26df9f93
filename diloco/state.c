/* state.c — moving outer state between sites: the start check, probes, (θ_a, m) transfers, and
 * joining a run in progress (docs/design.md §6).
 *
 * The state rides on two message types of the mesh, STATE_REQ and STATE_CHUNK (formats in
 * diloco_internal.h), between two sites' ends of one WAN group (a rank runs G / R groups; a
 * group's state is (θ_a, m) of its lanes, the same lanes at every site whatever its ranks); the
 * questions around it on START, PROBE and PROBE_INFO (probe.c):
 * - the start check: every site tells every peer (START) its parameter count and the hash of
 *   its initial vector. A count that differs is an error on both sides, at once, naming both
 *   counts (a model that differs between sites would otherwise show up as frames that never
 *   decode and rounds that never close). A differing initial vector is replaced by the one of
 *   the first site in sites.yaml order (STATE_INITIAL), so every site starts from one θ_a.
 * - a joiner's probe (PROBE_JOIN) asks a peer which round it submits next, its parameter count
 *   and its table of first rounds (a joiner plans with it);
 * - a fetch asks for (θ_a, m) of a group's lanes after round r, striped across n peers, each stripe
 *   in parts that fit every site's receive buffer, with the hash of the server's whole state;
 *   peers keep the state after their last two rounds to serve it (the newest in θ_a and m
 *   themselves, the one before in prev: "The kept state" below).
 * Hostile or stale replies are checked before anything is written. The WAN thread serves and
 * receives under the context's lock; a fetch waits outside it.
 */
#include "diloco_internal.h"

#include <jansson.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

static void state_reply(struct dl_group *gr, const gt_wan_msg_t *req, uint32_t status, uint64_t off,
                        uint64_t hash, const void *data, size_t bytes, uint32_t part,
                        uint32_t parts, uint8_t *buf)
{
    gt_diloco_t *d = gr->d;
    gt_wan_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = GT_WAN_MSG_STATE_CHUNK;
    m.round = req->round;
    m.view_epoch = req->view_epoch; /* the fetch id */
    m.lane = part;
    m.chunk = parts;
    gt_le_put32(buf, status);
    gt_le_put32(buf + 4, 0);
    gt_le_put64(buf + 8, off);
    gt_le_put64(buf + 16, hash);
    if (bytes && data) memcpy(buf + STATE_HDR, data, bytes); /* NULL: in buf already */
    if (gt_wan_mesh_send(gr->mesh, req->sender, &m, buf, STATE_HDR + bytes) != GT_OK)
        GT_WARN("site %s: cannot answer site %u's state request", d->name, req->sender);
}

/* The kept state. A peer may ask for (θ_a, m) after a round: a joiner for the newest (or, for
 * its rebase, the one before its first round), a site whose anchor lost the hash vote for the
 * one the others hold. The newest round a fragment applied is served from θ_a and m
 * themselves, the round before from prev; a sweep (the outer step) copies each lane into prev
 * before it rewrites it, so keeping two rounds costs one copy of (θ_a, m), not two. What is
 * being written is served to nobody: a request for it is answered "not yet" and asked again. */
float *dl_sweep_begin(gt_diloco_t *d, uint32_t f, uint64_t r)
{
    pthread_mutex_lock(&d->lock);
    if (f == 0) dl_hold_slot(d, r); /* the round prev holds may be a joiner's rebase's */
    if (!d->prev) d->prev = gt_mem_alloc(&d->mem, 2 * d->n_sub * sizeof(float), 0);
    d->live_round[f] = -1;
    d->prev_round[f] = PREV_WRITING;
    d->sweep_from[f] = d->cur_round[f];
    d->cur_round[f] = (int64_t)r;
    float *prev = d->prev;
    pthread_mutex_unlock(&d->lock);
    return prev;
}

void dl_sweep_end(gt_diloco_t *d, uint32_t f, uint64_t r, int publish)
{
    pthread_mutex_lock(&d->lock);
    d->prev_round[f] = d->sweep_from[f];
    if (publish) d->live_round[f] = (int64_t)r;
    pthread_mutex_unlock(&d->lock);
}

void dl_publish(gt_diloco_t *d, int f, int64_t r)
{
    uint32_t f0 = f < 0 ? 0 : (uint32_t)f, f1 = f < 0 ? d->F : (uint32_t)f + 1;
    pthread_mutex_lock(&d->lock);
    for (uint32_t k = f0; k < f1; k++) d->live_round[k] = d->cur_round[k] = r;
    pthread_mutex_unlock(&d->lock);
}

void dl_unpublish(gt_diloco_t *d, int f, int drop_prev)
{
    uint32_t f0 = f < 0 ? 0 : (uint32_t)f, f1 = f < 0 ? d->F : (uint32_t)f + 1;
    pthread_mutex_lock(&d->lock);
    for (uint32_t k = f0; k < f1; k++) {
        d->live_round[k] = -1;
        if (drop_prev) d->prev_round[k] = -1;
    }
    pthread_mutex_unlock(&d->lock);
}

void dl_keep_state(gt_diloco_t *d, int64_t round)
{
    pthread_mutex_lock(&d->lock);
    if (round >= 0) dl_hold_slot(d, (uint64_t)round);
    for (uint32_t f = 0; f < d->F; f++) {
        d->live_round[f] = d->cur_round[f] = round;
        d->prev_round[f] = -1;
    }
    pthread_mutex_unlock(&d->lock);
    d->own_hash = dl_own_hash(d);
}

void dl_hold_slot(gt_diloco_t *d, uint64_t r)
{
    uint64_t first[GT_OUTER_MAX_SITES];
    gt_outer_first_rounds(d->outers[0], first);
    dl_hold_keep(d, r, first);
}

void dl_hold_keep(gt_diloco_t *d, uint64_t r, const uint64_t *first)
{
    if (d->hold && (d->hold_round < 0 || r > (uint64_t)d->hold_round + 1 + DL_HOLD_ROUNDS)) {
        gt_mem_free(&d->mem, d->hold); /* no joiner needs it any more */
        d->hold = NULL;
        d->hold_round = -1;
    }
    int64_t old = d->prev_round[0];
    if (d->F != 1 || old < 0 || !d->prev || (uint64_t)old + 2 > r) return;
    int joiner = 0;
    for (uint32_t s = 0; s < d->cfg->n_sites && s < GT_OUTER_MAX_SITES; s++)
        joiner |= s != d->site && first[s] == (uint64_t)old + 1;
    if (!joiner) return;
    float *spare = d->hold;
    d->hold = d->prev;
    d->hold_round = old;
    d->prev = spare; /* NULL: the caller allocates it */
    d->prev_round[0] = -1;
    GT_DEBUG("site %s: holds the anchor after round %lld for a joiner whose first round is %lld",
             d->name, (long long)old, (long long)old + 1);
}

const float *dl_hold_lookup(const gt_diloco_t *d, int64_t want)
{
    return d->hold && d->F == 1 && want >= 0 && d->hold_round == want ? d->hold : NULL;
}

/* A served state: the floats of (θ_a, m) of the lanes asked for, in pieces that lie apart in
 * memory (θ_a's lanes where the anchor keeps them, m and prev packed). */
struct state_src {
    struct {
        const float *p;
        size_t n;
    } * seg;
    size_t n_seg, total;
};

static void src_add(struct state_src *s, const float *p, size_t n)
{
    if (!n) return;
    s->seg[s->n_seg].p = p;
    s->seg[s->n_seg++].n = n;
    s->total += n;
}

/* Copies floats [off, off + cnt) of the state into out. */
static void src_copy(const struct state_src *s, size_t off, size_t cnt, float *out)
{
    for (size_t i = 0, at = 0; i < s->n_seg && cnt; at += s->seg[i].n, i++) {
        if (off >= at + s->seg[i].n) continue;
        size_t in = off - at, k = s->seg[i].n - in < cnt ? s->seg[i].n - in : cnt;
        memcpy(out, s->seg[i].p + in, k * sizeof(float));
        out += k;
        off += k;
        cnt -= k;
    }
}

/* A peer asks for (θ_a, m) of group gr's lanes after req->round (or the initial state) — of
 * every fragment or of one, all of it or stripe k of n: sent in parts that fit every site's
 * receive buffer; or a status when we do not hold that round. */
static void serve_state(struct dl_group *gr, const gt_wan_msg_t *req)
{
    gt_diloco_t *d = gr->d;
    if (req->round > (uint64_t)INT64_MAX && req->round != STATE_INITIAL) {
        dl_bad_message(d, req, "a state request for no round");
        return;
    }
    size_t pf = d->part_floats;
    uint8_t *buf = malloc(STATE_HDR + pf * sizeof(float));
    if (!buf) return;
    int64_t want = req->round == STATE_INITIAL ? HIST_INITIAL : (int64_t)req->round;
    uint32_t n = req->chunk ? req->chunk : 1, k = req->lane;
    int all = req->fragment == STATE_ALL_FRAGMENTS;
    uint32_t f0 = all ? 0 : req->fragment, f1 = all ? d->F : req->fragment + 1u;
    /* Each fragment's round from θ_a and m, from prev, or from the hold (one fragment only);
     * gone: a fragment has moved past it for good. */
    const float *from[DL_MAX_FRAGMENTS]; /* NULL: θ_a and m */
    int held = all || req->fragment < d->F, gone = 0;
    for (uint32_t f = f0; f < f1 && held; f++) {
        from[f] = NULL;
        if (d->live_round[f] == want) continue;
        if (d->prev_round[f] == want && d->prev) {
            from[f] = d->prev;
            continue;
        }
        if ((all || f == 0) && (from[f] = dl_hold_lookup(d, want)) != NULL) continue;
        held = 0;
        int64_t cur = d->cur_round[f];
        gone = req->round != STATE_INITIAL &&
               (want < cur - 1 ||
                (want == cur - 1 && d->prev_round[f] != want && d->prev_round[f] != PREV_WRITING));
    }
    struct state_src src = {0};
    if (held) src.seg = malloc((2 * (size_t)d->n_own + 2 * d->F) * sizeof *src.seg);
    if (held && src.seg) {
        for (uint32_t f = f0; f < f1; f++) { /* the group's engines' θ_a, then their m */
            uint32_t e = f * d->n_grp + gr->i;
            if (from[f]) {
                src_add(&src, from[f] + d->eng_off[e], d->eng_off[e + 1] - d->eng_off[e]);
                continue;
            }
            for (uint32_t i = d->eng_lane[e]; i < d->eng_lane[e + 1]; i++)
                src_add(&src, d->anchor + d->apos[i], d->layout->lanes[d->own_lanes[i]].count);
        }
        for (uint32_t f = f0; f < f1; f++) {
            uint32_t e = f * d->n_grp + gr->i;
            const float *m = from[f] ? from[f] + d->n_sub : d->mom;
            src_add(&src, m + d->eng_off[e], d->eng_off[e + 1] - d->eng_off[e]);
        }
    }
    if (!src.seg || k >= n) {
        state_reply(gr, req, gone ? STATE_GONE : STATE_NOT_YET, 0, 0, NULL, 0, 0, 1, buf);
        if (gone)
            GT_WARN("site %s: site %u asked for the anchor after round %llu, which we no longer "
                    "hold",
                    d->name, req->sender, (unsigned long long)req->round);
        free(buf);
        free(src.seg);
        return;
    }
    XXH3_state_t h; /* of the whole state, as the fetcher checks it */
    XXH3_64bits_reset(&h);
    for (size_t i = 0; i < src.n_seg; i++)
        XXH3_64bits_update(&h, src.seg[i].p, src.seg[i].n * sizeof(float));
    uint64_t hash = XXH3_64bits_digest(&h);
    size_t total = src.total, lo = total * k / n, hi = total * (k + 1) / n;
    size_t parts = hi > lo ? (hi - lo + pf - 1) / pf : 1;
    for (size_t p = 0; p < parts; p++) {
        size_t off = lo + p * pf, cnt = hi - off < pf ? hi - off : pf;
        if (hi == lo) cnt = 0;
        src_copy(&src, off, cnt, (float *)(buf + STATE_HDR));
        state_reply(gr, req, STATE_OK, off, hash, NULL, cnt * sizeof(float), (uint32_t)p,
                    (uint32_t)parts, buf);
    }
    free(buf);
    free(src.seg);
}

/* A reply to our fetch. Hostile input is checked before anything is written. */
static void take_state(struct dl_group *gr, const gt_wan_msg_t *msg, const uint8_t *buf, size_t len)
{
    gt_diloco_t *d = gr->d;
    if (!d->fetching || d->fetch_round == STATE_PROBE || gr->i != d->fetch_grp ||
        msg->view_epoch != d->fetch_id || len < STATE_HDR)
        return;
    uint32_t status = gt_le_get32(buf), k = 0;
    while (k < d->fetch_n && d->fetch_peer[k] != msg->sender) k++;
    if (k == d->fetch_n || d->fetch_round != msg->round) return;
    if (status != STATE_OK) {
        if ((int)status > d->fetch_status) d->fetch_status = (int)status;
        return;
    }
    size_t total = d->fetch_total, lo = total * k / d->fetch_n, hi = total * (k + 1) / d->fetch_n;
    uint64_t off = gt_le_get64(buf + 8), cnt = (len - STATE_HDR) / sizeof(float);
    uint64_t hash = gt_le_get64(buf + 16);
    if ((len - STATE_HDR) % sizeof(float) || off < lo || off > hi || cnt > hi - off ||
        (d->fetch_hash_set && hash != d->fetch_hash)) {
        GT_WARN("site %s: rejected a malformed (or disagreeing) state part from site %u", d->name,
                msg->sender);
        d->fetch_status = STATE_GONE;
        return;
    }
    d->fetch_hash = hash;
    d->fetch_hash_set = 1;
    memcpy(d->fetch + off, buf + STATE_HDR, cnt * sizeof(float));
    d->fetch_floats += cnt;
}

void dl_on_state(struct dl_group *gr, const gt_wan_msg_t *msg, const void *buf, size_t len)
{
    if (msg->type == GT_WAN_MSG_STATE_REQ)
        serve_state(gr, msg);
    else
        take_state(gr, msg, buf, len);
}

/* Asks peers[0..n) of group i for stripe k of n of the group's lanes' (θ_a, m) after `round`
 * (or, with STATE_PROBE, the first of them where it is: a PROBE_JOIN) and waits for the answer,
 * at most wan.peer_timeout_ms. GT_OK: d->fetch holds the state, its hash checked against the one
 * every server sent (a probe: d->probe_* hold its answer); GT_ERR_AGAIN: a server does not hold
 * the round yet (a probe: the peer does not train); GT_ERR_NOT_FOUND: a server no longer holds
 * it; GT_ERR_TIMEOUT / GT_ERR_CORRUPT otherwise. Not under the lock. */
gt_status_t dl_fetch_state(gt_diloco_t *d, uint32_t i, uint64_t round, const uint32_t *peers,
                           uint32_t n)
{
    return dl_fetch_frag(d, i, round, -1, peers, n);
}

gt_status_t dl_fetch_frag(gt_diloco_t *d, uint32_t i, uint64_t round, int frag,
                          const uint32_t *peers, uint32_t n)
{
    size_t want = 0; /* floats of θ_a (and as many of m) asked for */
    for (uint32_t f = 0; f < d->F; f++) {
        uint32_t e = f * d->n_grp + i;
        if (frag < 0 || (uint32_t)frag == f) want += d->eng_off[e + 1] - d->eng_off[e];
    }
    if (!d->fetch) d->fetch = gt_mem_alloc(&d->mem, 2 * d->n_sub * sizeof(float), 0);
    if (!d->fetch || n == 0 || n > GT_WAN_MAX_MEMBERS)
        return d->fetch ? GT_ERR_INVALID : GT_ERR_NOMEM;
    pthread_mutex_lock(&d->lock);
    d->fetch_round = round;
    d->fetching = 1;
    d->fetch_id++;
    d->fetch_n = round == STATE_PROBE ? 1 : n;
    memcpy(d->fetch_peer, peers, n * sizeof *peers);
    d->fetch_floats = 0;
    d->fetch_frag = frag;
    d->fetch_grp = i;
    d->fetch_total = 2 * want;
    d->fetch_hash_set = 0;
    d->fetch_status = 0;
    d->probe_got = 0;
    gt_status_t st = GT_OK;
    if (round == STATE_PROBE) st = dl_probe_send(d, i, peers[0], PROBE_JOIN, d->fetch_id);
    for (uint32_t k = 0; round != STATE_PROBE && k < d->fetch_n && st == GT_OK; k++) {
        gt_wan_msg_t m;
        memset(&m, 0, sizeof m);
        m.type = GT_WAN_MSG_STATE_REQ;
        m.round = round;
        m.view_epoch = d->fetch_id;
        m.lane = k;
        m.fragment = frag >= 0 ? (uint16_t)frag : STATE_ALL_FRAGMENTS;
        m.chunk = d->fetch_n;
        st = gt_wan_mesh_send(d->grp[i].mesh, peers[k], &m, "", 0);
    }
    pthread_mutex_unlock(&d->lock);
    uint64_t t0 = gt_time_ns();
    uint64_t limit =
        d->fetch_limit_ns ? d->fetch_limit_ns : (uint64_t)d->cfg->wan.peer_timeout_ms * 1000000ull;
    int done = 0, status = 0;
    /* A site removed (or failed) meanwhile stops asking at once: its peers dropped its
     * connections and answer nothing more, and its caller leaves on d->wan_error anyway (a
     * removed joiner waited out this limit once per peer before, 15 s of a chaos run). */
    while (st == GT_OK && !done && !status && !d->wan_error && gt_time_ns() - t0 < limit) {
        struct timespec ts = {0, 500000};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&d->lock);
        done = round == STATE_PROBE ? d->probe_got : d->fetch_floats == d->fetch_total;
        status = d->fetch_status;
        pthread_mutex_unlock(&d->lock);
    }
    pthread_mutex_lock(&d->lock);
    d->fetching = 0;
    pthread_mutex_unlock(&d->lock);
    if (st != GT_OK) return st;
    if (!done && !status && d->wan_error) return (gt_status_t)d->wan_error;
    if (status == STATE_NOT_YET || status == STATE_BUSY) return GT_ERR_AGAIN;
    if (status == STATE_GONE) return GT_ERR_NOT_FOUND;
    if (!done) return GT_ERR_TIMEOUT;
    if (round != STATE_PROBE && gt_outer_hash(d->fetch, d->fetch_total) != d->fetch_hash) {
        GT_WARN("site %s: the state after round %llu does not match its hash", d->name,
                (unsigned long long)round);
        return GT_ERR_CORRUPT;
    }
    return GT_OK;
}

/* The fetched state of group i (its engines' θ_a, fragment after fragment, then their m)
 * becomes ours. */
static void take_fetched(gt_diloco_t *d, uint32_t i)
{
    size_t half = d->fetch_total / 2, p = 0;
    dl_unpublish(d, -1, 1); /* the caller publishes it (dl_keep_state) */
    for (uint32_t f = 0; f < d->F; f++) {
        uint32_t e = f * d->n_grp + i;
        size_t el = d->eng_off[e + 1] - d->eng_off[e];
        dl_engine_to_anchor(d, e, d->fetch + p);
        memcpy(d->mom + d->eng_off[e], d->fetch + half + p, el * sizeof(float));
        p += el;
    }
}

/* A fetched fragment f of group i (its θ_a then its m) becomes ours (served once the caller
 * publishes it; the round before, ours, differed: not served). */
static void take_fetched_frag(gt_diloco_t *d, uint32_t i, uint32_t f)
{
    uint32_t e = f * d->n_grp + i;
    size_t o = d->eng_off[e], fl = d->eng_off[e + 1] - o;
    dl_unpublish(d, (int)f, 1);
    dl_engine_to_anchor(d, e, d->fetch);
    memcpy(d->mom + o, d->fetch + fl, fl * sizeof(float));
}

static gt_status_t params_mismatch(gt_diloco_t *d, uint32_t peer, uint64_t theirs)
{
    GT_ERROR("site %s has %zu parameters but site %s has %llu: every site must train the same "
             "model (the same parameters, in the same order)",
             d->name, d->n, d->cfg->sites[peer].name, (unsigned long long)theirs);
    return GT_ERR_CONFIG;
}

/* The start of a run (collective over the site's ranks): tell every peer of the view our
 * parameter count and initial hash, wait for theirs (at most wan.connect_timeout_ms, and no
 * longer once a peer has said hello and the others train: a cut at the start), refuse a
 * count that differs, and take the initial state of the first site in config order when ours
 * differs from it. */
gt_status_t dl_start_check(gt_diloco_t *d)
{
    const gt_topo_config_t *c = d->cfg;
    uint64_t mine = gt_outer_hash(d->x, d->n);
    uint32_t peers[GT_WAN_MAX_MEMBERS];
    int self_in = 0;
    uint32_t n = dl_view_peers(d, 0, peers, &self_in);
    gt_status_t st = GT_OK;
    /* over every group's mesh: each of a peer's ranks waits for it on its own groups */
    for (uint32_t i = 0; i < d->n_grp && st == GT_OK; i++) {
        uint32_t gp[GT_WAN_MAX_MEMBERS];
        uint32_t gn = dl_view_peers(d, i, gp, &self_in);
        pthread_mutex_lock(&d->lock);
        for (uint32_t k = 0; k < gn && st == GT_OK; k++) st = dl_start_send(d, i, gp[k], mine);
        pthread_mutex_unlock(&d->lock);
    }
    uint64_t t0 = gt_time_ns();
    uint32_t got = 0;
    uint32_t first = d->site; /* the first of the view in config order */
    for (uint32_t k = 0; k < n; k++)
        if (peers[k] < first) first = peers[k];
    int started = 0; /* the others train already: the wait ended early */
    int marked = 0;  /* etcd holds the run's started mark */
    uint64_t polled = 0;
    while (st == GT_OK && gt_time_ns() - t0 < (uint64_t)c->wan.connect_timeout_ms * 1000000ull) {
        got = 0;
        pthread_mutex_lock(&d->lock);
        for (uint32_t k = 0; k < n; k++) got += d->hello_got[peers[k]];
        pthread_mutex_unlock(&d->lock);
        if (got == n || (d->p.stop && *d->p.stop) || d->wan_error) break;
        /* The others train already: the missing hellos are from sites we cannot reach (a cut
         * at the start), and waiting longer only puts this site behind. Seen in the soak (seed
         * 414778740, a cut between a and c from 0.9 s): both waited the whole connect timeout
         * (5 s; the wait for our own hellos to go out, since moved below, held them most of it)
         * while b and d trained, started at round 0 six rounds behind and, with catch-up off,
         * stayed six behind for the run, every contribution folded late at a seventh of its
         * weight. So the wait ends once a peer has said hello (or this site is the first) and
         * the run is marked started in etcd (a site that heard every hello set it) or a peer's
         * round came here. It costs the check of the silent peers' parameter count, as the
         * timeout does; the initial state is the first heard from's, as after the timeout, and
         * should it differ from the first site's (the first's hello is what is missing), round
         * 0's hash vote finds this site's anchor in the minority and it re-fetches (I1). */
        uint64_t now = gt_time_ns();
        int heard = got > 0 || first == d->site;
        if (heard && !marked && now - polled > 50000000ull) {
            int m = 0;
            polled = now;
            marked = gt_wan_member_started(d->grp[0].member, &m) == GT_OK && m;
        }
        if (heard && (marked || dl_peers_next(d) > 0)) {
            started = 1;
            break;
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    if (st == GT_OK && got < n)
        GT_WARN("site %s: %u of %u peers said hello %s; starting without checking the others",
                d->name, got, n,
                started ? "before the others started training" : "in wan.connect_timeout_ms");
    uint32_t src = d->site;
    pthread_mutex_lock(&d->lock);
    for (uint32_t k = 0; k < n && st == GT_OK; k++) {
        uint32_t p = peers[k];
        if (!d->hello_got[p]) continue;
        if (d->hello_params[p] != d->n) st = params_mismatch(d, p, d->hello_params[p]);
        if (p < src) src = p;
    }
    int fetch = st == GT_OK && src != d->site && d->hello_hash[src] != mine;
    pthread_mutex_unlock(&d->lock);
    /* Before we leave, our hello out: a peer must learn of the mismatch too (at most 5 s). This
     * waited before the hellos were awaited, at every start: a hello held by a link cut at the
     * start (the soak's seed 414778740, a cut between a and c from 0.9 s) kept both of its ends
     * there for the 5 s while the others trained, and they started six rounds behind. */
    uint64_t tq = gt_time_ns();
    for (size_t queued = st != GT_OK; queued && gt_time_ns() - tq < 5000000000ull;) {
        pthread_mutex_lock(&d->lock);
        queued = dl_mesh_pending(d);
        pthread_mutex_unlock(&d->lock);
        struct timespec ts = {0, 1000000};
        if (queued) nanosleep(&ts, NULL);
    }
    if (st != GT_OK) {
        struct timespec ts = {0, 300000000};
        nanosleep(&ts, NULL);
    }
    if (fetch) {
        GT_INFO("site %s: its initial parameters differ from site %s's; starting from those",
                d->name, c->sites[src].name);
        uint64_t tf = gt_time_ns();
        for (uint32_t i = 0; i < d->n_grp && st == GT_OK; i++) { /* each group's lanes */
            do {
                st = dl_fetch_state(d, i, STATE_INITIAL, &src, 1);
            } while (st == GT_ERR_AGAIN &&
                     gt_time_ns() - tf < (uint64_t)c->wan.connect_timeout_ms * 1000000ull);
            if (st == GT_OK) take_fetched(d, i);
        }
        d->wait_s += (gt_time_ns() - tf) * 1e-9;
        if (st != GT_OK)
            GT_ERROR("site %s: cannot fetch the initial parameters from site %s: %s", d->name,
                     c->sites[src].name, gt_status_str(st));
    }
    uint64_t any = (uint64_t)fetch;
    if ((st = dl_agree(d, st)) != GT_OK) return st;
    if ((st = dl_allreduce(d, &any, 1, GT_DILOCO_OP_MAX)) != GT_OK || !any) return st;
    if ((st = dl_anchor_to_x(d)) != GT_OK) return st;
    dl_keep_state(d, HIST_INITIAL);
    return d->p.after_write ? d->p.after_write(d->p.hook_ctx) : GT_OK;
}

/* Our anchor disagreed with the majority (invariant I1): fetch (θ_a, m) of the lanes of each
 * group in `bad` (of fragment f with fragments) after round r from a live peer of the group and
 * replace ours (θ_s is rebased onto it right after). Peers that do not hold round r any more
 * are skipped; if none can serve it, GT_ERR_PEER_LOST: the site leaves (and rejoins). */
gt_status_t dl_refetch(gt_diloco_t *d, uint32_t f, uint64_t r, uint64_t bad)
{
    const gt_topo_config_t *c = d->cfg;
    if (d->F > 1)
        GT_ERROR("site %s: our anchor (fragment %u) after round %llu differs from the majority's; "
                 "re-fetching the fragment",
                 d->name, f, (unsigned long long)r - 1);
    else
        GT_ERROR("site %s: our anchor after round %llu differs from the majority's; re-fetching it",
                 d->name, (unsigned long long)r - 1);
    int fixed = 0;
    for (uint32_t i = 0; i < d->n_grp; i++) {
        if (!(bad >> i & 1)) continue;
        pthread_mutex_lock(&d->lock);
        gt_wan_view_t view = d->grp[i].view;
        pthread_mutex_unlock(&d->lock);
        int done = 0, again = 1;
        /* A peer that has not published round r yet (it applies it at this same step) is
         * asked again, up to a peer timeout from the first try. */
        uint64_t t_end = gt_time_ns() + (uint64_t)c->wan.peer_timeout_ms * 1000000ull;
        for (uint32_t k = 0; !done && again; k++) {
            if (k == view.n_members) { /* every peer asked: again, if one said "not yet" */
                struct timespec ts = {0, 5000000};
                if (again < 2 || gt_time_ns() >= t_end) break;
                nanosleep(&ts, NULL);
                k = 0;
            }
            if (k == 0) again = 1; /* 1 + the peers that said "not yet" this pass */
            uint32_t peer;
            if (gt_topo_site_index(c, view.members[k].name, &peer) != GT_OK || peer == d->site)
                continue;
            uint64_t t0 = gt_time_ns();
            gt_status_t st = dl_fetch_frag(d, i, r, d->F > 1 ? (int)f : -1, &peer, 1);
            d->wait_s += (gt_time_ns() - t0) * 1e-9;
            dl_write_status(d, 0);
            if (st == GT_ERR_NOMEM) return st;
            again += st == GT_ERR_AGAIN;
            if (st != GT_OK) continue;
            if (d->F > 1) {
                uint32_t e = f * d->n_grp + i;
                take_fetched_frag(d, i, f);
                d->ehash[e] = gt_outer_hash(d->fetch, d->eng_off[e + 1] - d->eng_off[e]);
            } else {
                take_fetched(d, i);
            }
            done = 1;
            if ((int64_t)r > d->confirmed_round) d->confirmed_round = (int64_t)r;
            GT_WARN("site %s: re-fetched the anchor after round %llu from site %s", d->name,
                    (unsigned long long)r, c->sites[peer].name);
        }
        if (!done) {
            /* Going on with an anchor known to differ would make every later round differ too
             * (seen: a site two rounds behind, whose peers keep two, diverged for 28 rounds).
             * It leaves instead, and rejoins from the others' anchor when started again. */
            GT_ERROR("site %s: no peer could serve the anchor after round %llu (they keep their "
                     "last two); it leaves, and rejoins as a joiner when started again",
                     d->name, (unsigned long long)r);
            d->anchor_bad = 1; /* nothing trained on it is kept (carry.c) */
            return GT_ERR_PEER_LOST;
        }
        fixed = 1;
    }
    if (fixed) {
        if (d->F == 1)
            dl_keep_state(d, (int64_t)r);
        else
            dl_publish(d, (int)f, (int64_t)r);
        d->refetches++;
    }
    return GT_OK;
}

/* Joins the run in progress (collective over the site's ranks): waits to be in the view, asks
 * every training peer which round it submits next (the one furthest ahead fixes N), announces
 * that this site contributes from R = N + 1 on — a round no site has submitted yet, so no round
 * in flight changes owner — then fetches (θ_a, m) after round R − 1, striped across every live
 * peer and checked against the hash they all send, as soon as they have applied it. It starts
 * from there as a site that has just applied round R − 1 would: θ_s = θ_a, step R·H + τ (the
 * caller skips its data to it and starts its optimizer afresh). If the peers have moved past
 * R − 1 meanwhile (they keep two rounds), it plans again with a later R. *start_p is the step
 * it starts at; the run's total steps when the run ends before it could take part. */
/* Puts "first_round": R into this rank's member value in every group (beside the checkpoints
 * it offers), before the JOINs go out: a peer they cannot reach learns it from etcd at its next
 * view read (gt_outer_learn_join). */
static gt_status_t announce_first(gt_diloco_t *d, uint64_t R)
{
    json_t *note = d->resume_note ? json_loads(d->resume_note, 0, NULL) : NULL;
    if (!json_is_object(note)) {
        json_decref(note);
        note = json_object();
    }
    json_object_set_new(note, "first_round", json_integer((json_int_t)R));
    char *text = json_dumps(note, JSON_COMPACT);
    json_decref(note);
    if (!text) return GT_ERR_NOMEM;
    gt_status_t st = GT_OK;
    for (uint32_t i = 0; i < d->n_grp && st == GT_OK; i++)
        st = gt_wan_member_set_note(d->grp[i].member, text);
    free(text);
    return st;
}

gt_status_t dl_join(gt_diloco_t *d, uint64_t *start_p)
{
    const gt_topo_config_t *c = d->cfg;
    const char *name = d->name;
    uint64_t t0 = gt_time_ns(), R = 0;
    /* A peer needs up to two rounds to apply the round we wait for: bound the whole join by
     * the time that generously takes, and the result timeout. */
    uint64_t limit = (uint64_t)c->wan.connect_timeout_ms * 1000000ull +
                     (uint64_t)c->outer.deadline_max_ms * 4000000ull + 600000000000ull;
    uint32_t peers[GT_WAN_MAX_MEMBERS];
    int have = 0, planned = 0;
    uint64_t have_grp = 0; /* bit i: group i's state fetched for the planned round */
    uint64_t planned_at = 0;
    int fast = 0;           /* start before round R (from the anchor after R - 2) */
    int early = 0;          /* fast, and the peers have not applied R - 2 yet: from R - 3 */
    uint64_t fast_step = 0; /* the furthest step a trainer reported */
    uint64_t trainers = 0;  /* bit s: site s answered the plan's probe as a training site */
    uint64_t quiet = 0;     /* bit s: site s of the view did not answer it */
    int quiet_peers = 0;    /* said once: some peers did not answer the probe */
    int note_failed = 0;    /* said once: etcd did not take the first round */
    uint64_t replan_ns = (uint64_t)c->outer.deadline_max_ms * 4000000ull +
                         (uint64_t)c->wan.peer_timeout_ms * 1000000ull +
                         (uint64_t)c->wan.connect_timeout_ms * 1000000ull;
    *start_p = d->total;
    if (d->sync_dp) {
        GT_ERROR("site %s: a sync-dp run cannot take a joining site (every step is a round)", name);
        return GT_ERR_INVALID;
    }
    uint64_t alone_since = 0;
    for (;;) {
        /* The ranks act on the worst of: 0 done, 1 retry, 2 plan again, 3 give up, 4 the
         * models differ. */
        int64_t fail = 0;
        const char *why = NULL;
        int self_in = 0;
        uint32_t n = dl_view_peers(d, 0, peers, &self_in); /* the probes go over group 0's */
        uint64_t now = gt_time_ns();
        /* Alone: not in the view, no peer in it, or (below) only peers that answer and do not
         * train — a view of joiners has nobody to join from. */
        if ((!self_in || n == 0) && !alone_since) alone_since = now;
        if (d->p.stop && *d->p.stop) why = "stopped";
        if (d->wan_error) why = "lost its membership lease";
        if (now - t0 > limit) why = "timed out";
        if (alone_since && now - alone_since > (uint64_t)c->wan.connect_timeout_ms * 1000000ull)
            why = "no running site to join (the run is over, or every site is down)";
        if (why) fail = 3;
        uint64_t fv = (uint64_t)fail;
        gt_status_t st = dl_allreduce(d, &fv, 1, GT_DILOCO_OP_MAX);
        if (st != GT_OK) return st;
        if (fv) {
            GT_ERROR("site %s: cannot join the run: %s (after %.0f s)", name,
                     why ? why : "another rank failed", (now - t0) * 1e-9);
            if (d->p.stop && *d->p.stop) return GT_ERR_CLOSED;
            return d->wan_error ? (gt_status_t)d->wan_error : GT_ERR_TIMEOUT;
        }
        int64_t code = 1;
        if (!planned) { /* every rank comes here together (planned is agreed) */
            uint64_t next = 0, first[GT_OUTER_MAX_SITES];
            uint64_t differ = 0;
            uint64_t pstep = 0, step_unknown = 0; /* the trainers' furthest step */
            uint32_t busy = 0;                    /* peers that answered "not training" (joiners) */
            trainers = 0;
            /* A peer that does not answer holds the loop up for wan.peer_timeout_ms, and the
             * answers before it are that old by its end (rounds of a second: several behind,
             * and the anchor planned from is gone before the fetch). So when one was silent,
             * the ones that answered are asked again (they answer at once). */
            uint32_t silent = 0;
            quiet = 0;
            uint64_t peer_ns = (uint64_t)c->wan.peer_timeout_ms * 1000000ull;
            d->fetch_limit_ns = peer_ns < 2000000000ull ? peer_ns : 2000000000ull;
            int answered_once = 0;
            for (int pass = 0; pass < 2 && self_in; pass++) {
                uint64_t asked = trainers;
                if (pass == 1) {
                    if (!silent || code != 0 || differ) break;
                    next = pstep = step_unknown = 0;
                    code = 1;
                }
                for (uint32_t k = 0; k < n; k++) {
                    if (pass == 1 && !(peers[k] < 64 && (asked >> peers[k] & 1))) continue;
                    uint64_t asked_at = gt_time_ns();
                    st = dl_fetch_state(d, 0, STATE_PROBE, &peers[k], 1);
                    /* A probe waits 2 s at most (a peer's WAN thread answers at once), and
                     * once one has answered, 8 times its round trip (1 s at least): a silent
                     * peer costs a second or two, not wan.peer_timeout_ms, and the join goes
                     * ahead without it when the answers are a majority. */
                    if (st == GT_OK && !answered_once) {
                        answered_once = 1;
                        uint64_t rtt8 = 8 * (gt_time_ns() - asked_at);
                        d->fetch_limit_ns = rtt8 < 1000000000ull ? 1000000000ull
                                            : rtt8 > peer_ns     ? peer_ns
                                                                 : rtt8;
                    }
                    if (pass == 0) {
                        busy += st == GT_ERR_AGAIN;
                        silent += st != GT_OK && st != GT_ERR_AGAIN;
                        if (st != GT_OK && st != GT_ERR_AGAIN && peers[k] < 64)
                            quiet |= 1ull << peers[k];
                    }
                    if (st != GT_OK) continue;
                    if (peers[k] < 64) trainers |= 1ull << peers[k];
                    if (d->probe_params != d->n) {
                        (void)params_mismatch(d, peers[k], d->probe_params);
                        differ = 1;
                        break;
                    }
                    if (d->probe_step == UINT64_MAX)
                        step_unknown = 1;
                    else if (d->probe_step > pstep)
                        pstep = d->probe_step;
                    if (code != 0 || d->probe_next > next) {
                        next = d->probe_next;
                        memcpy(first, d->probe_first, sizeof first);
                        code = 0;
                    }
                }
            }
            d->fetch_limit_ns = 0;
            /* Nobody to join from only when every peer answered and none trains; a peer that
             * does not answer may be across a cut that heals (the whole join is bounded). */
            if (self_in && n > 0 && (code == 0 || busy < n))
                alone_since = 0;
            else if (!alone_since)
                alone_since = now;
            /* A peer that did not answer (a link cut, a site just gone whose lease runs on)
             * would hear our JOIN late, after it has closed rounds we own, and the sites would
             * then apply different results (seen before the etcd announcement: a site rejoining
             * across a cut diverged from the others for the rest of the run). So the first round
             * also goes into etcd (announce_first), which every site reads at every heartbeat
             * whatever its links do, and the join goes ahead when the peers that answered and
             * this site are a majority of the view; with fewer it waits for the others (or for
             * the view to drop them). Seen: a site restarted during a cut of one of its links
             * waited 7.2 s for the heal (bench/chaos.yaml, seed 3 at 1/5). */
            uint32_t answered = (uint32_t)__builtin_popcountll(trainers) + busy;
            if (code == 0 && answered < n) {
                int majority = 2 * (answered + 1) > n + 1;
                if (!quiet_peers)
                    GT_INFO("site %s: %u of the %u peers of the view answered; %s", name, answered,
                            n,
                            majority ? "joining with them (the others learn its first round from "
                                       "etcd)"
                                     : "the join waits for the others (or for the view to drop "
                                       "them)");
                quiet_peers = 1;
                if (!majority) code = 1;
            }
            if ((st = dl_allreduce(d, &differ, 1, GT_DILOCO_OP_MAX)) != GT_OK) return st;
            if (differ) return GT_ERR_CONFIG;
            if (code == 0) memcpy(d->probe_first, first, sizeof first);
            /* Every rank agrees on the latest R any of them found (collective). */
            uint64_t v[4] = {code == 0 ? next + 1 : 0, code == 0 ? 0 : 1, pstep, step_unknown};
            if ((st = dl_allreduce(d, v, 4, GT_DILOCO_OP_MAX)) != GT_OK) return st;
            if (v[1] == 0) {
                uint64_t R_before = R;
                R = v[0] > R ? v[0] : R + 1; /* a re-plan always moves on */
                if (R < 1) R = 1;
                uint64_t nf = announce_first(d, R) != GT_OK;
                if ((st = dl_allreduce(d, &nf, 1, GT_DILOCO_OP_MAX)) != GT_OK) return st;
                if (nf) {
                    /* Not announced: a peer across a cut would not learn it, and a re-plan's
                     * note would contradict its JOINs. Views (joins included) wait while etcd
                     * cannot take writes. */
                    if (!note_failed)
                        GT_WARN("site %s: cannot announce its first round (%llu) in etcd; "
                                "trying again until it can",
                                name, (unsigned long long)R);
                    note_failed = 1;
                    R = R_before;
                    dl_write_status(d, 0);
                    struct timespec ts = {0, 200000000};
                    nanosleep(&ts, NULL);
                    continue;
                }
                /* Start at once from the anchor after R - 2 (the peers, in round R - 1, hold it),
                 * at the step they are at; the anchor after R - 1 is fetched and rebased onto
                 * when they apply it (dl_join_rebase). Not with fragments, without an overlap,
                 * or when a peer did not say its step (an older version). */
                fast = d->F == 1 && d->tau > 0 && R >= 2 && !v[3] && v[2] < R * d->H;
                fast_step = v[2];
                /* The peers in the first τ steps of round R - 1 have not applied R - 2 yet:
                 * waiting for it cost a rejoining site up to τ steps (1.5 s of its 1.0-1.7 s
                 * restarts in bench/chaos.yaml). It starts from the anchor after R - 3, which
                 * they hold, at their step; the rebase at R·H + τ moves what it trained onto
                 * R - 1 all the same. */
                /* When (R - 1)·H + τ is a checkpoint step (run.checkpoint_every), the site
                 * passes it without having applied a round: `geotrain run` skips that save
                 * (gt_diloco_save refuses it; a caller of its own saves when a step applied a
                 * round, which this one did not). */
                early = fast && R >= 3 && fast_step < (R - 1) * d->H + d->tau;
                planned = 1;
                planned_at = now;
                have = 0;
                have_grp = 0;
                if (R >= c->run.rounds) {
                    GT_WARN("site %s: the run ends (round %llu of %u) before this site could take "
                            "part",
                            name, (unsigned long long)R, c->run.rounds);
                    return GT_OK;
                }
                pthread_mutex_lock(&d->lock);
                for (uint32_t e = 0; e < d->n_eng && st == GT_OK; e++)
                    st = gt_outer_start_at(d->outers[e], R, d->probe_first, gt_time_ns());
                pthread_mutex_unlock(&d->lock);
                if (st != GT_OK) return st;
                GT_INFO("site %s: joining the run: first contribution to round %llu, from the "
                        "anchor after round %llu (%u peers)",
                        name, (unsigned long long)R, (unsigned long long)R - 1, n);
            }
            code = 1;
        }
        if (planned) {
            code = 0;
            if (!have) {
                /* Each of our groups' state from its own peers (their ranks that run it). */
                st = GT_OK;
                for (uint32_t i = 0; i < d->n_grp && st == GT_OK; i++) {
                    if (have_grp >> i & 1) continue;
                    uint32_t gp[GT_WAN_MAX_MEMBERS];
                    int gin = 0;
                    uint32_t gn = dl_view_peers(d, i, gp, &gin);
                    /* Only the sites that train hold R - 1: other joiners never do, and asking
                     * them held every try up by a peer timeout (5 s) until the trainers had
                     * moved past R - 1 and the join had to plan again (seen in a link-cut run
                     * where both ends of the cut rejoined at once). */
                    uint32_t tn = 0;
                    for (uint32_t k = 0; k < gn; k++)
                        if (gp[k] < 64 && (trainers >> gp[k] & 1)) gp[tn++] = gp[k];
                    if (tn) gn = tn; /* none known (a probe lost): every peer, as before */
                    gn = dl_heard_first(d, gp, gn); /* a peer across a cut holds it up */
                    uint64_t from = early ? R - 3 : fast ? R - 2 : R - 1;
                    st = gn ? dl_fetch_state(d, i, from, gp, gn) : GT_ERR_AGAIN;
                    if (st != GT_OK && st != GT_ERR_NOMEM && gn > 1) {
                        /* Striped failed (a peer does not hold the round: it lags, or is ahead
                         * by two rounds): the whole from one peer after another. Plan again
                         * only when every peer is past it. */
                        uint32_t gone = 0;
                        for (uint32_t k = 0; k < gn && st != GT_OK; k++) {
                            gt_status_t one = dl_fetch_state(d, i, from, &gp[k], 1);
                            if (one == GT_OK) st = GT_OK;
                            gone += one == GT_ERR_NOT_FOUND;
                        }
                        if (st != GT_OK) st = gone == gn ? GT_ERR_NOT_FOUND : GT_ERR_AGAIN;
                    }
                    if (st == GT_OK) {
                        have_grp |= 1ull << i;
                        take_fetched(d, i);
                    }
                }
                if (st == GT_OK) have = 1;
                code = st == GT_OK ? 0 : st == GT_ERR_NOT_FOUND ? 2 : 1;
            }
        }
        /* The peer that fixed R may have stopped (the run ended, it failed) and only joiners,
         * which never hold R - 1, remain: past the time a training peer needs to apply two
         * rounds, plan again, and the probe finds out whether anyone still trains. */
        if (planned && code == 1 && now - planned_at > replan_ns) code = 2;
        uint64_t worst = (uint64_t)code;
        if ((st = dl_allreduce(d, &worst, 1, GT_DILOCO_OP_MAX)) != GT_OK) return st;
        if (planned && worst == 0) break;
        if (worst == 2) {
            GT_WARN("site %s: the peers no longer hold the anchor after round %llu, or have not "
                    "applied it in time; planning again",
                    name, (unsigned long long)R - 1);
            planned = 0;
        }
        dl_write_status(d, 0);
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
    /* Start as a site that has just applied round R - 1, or (fast) as one that applied R - 2
     * and is where the peers are in round R - 1, without taking part in it. */
    uint64_t from = early ? R - 3 : fast ? R - 2 : R - 1;
    dl_keep_state(d, (int64_t)from);
    gt_status_t st = dl_anchor_to_x(d);
    if (st != GT_OK) return st;
    /* what a removed earlier life of this site trained and kept (carry.c) */
    if ((st = dl_carry_take(d, (int64_t)from)) != GT_OK) return st;
    if (d->p.after_write && (st = d->p.after_write(d->p.hook_ctx)) != GT_OK) return st;
    d->joined_round = R;
    d->applied_upto = R;
    d->join_trainers = trainers;
    d->join_quiet = quiet;
    uint64_t hash = 0;
    if ((st = dl_anchor_hash(d, &hash)) != GT_OK) return st;
    dl_log_anchor(d, from, hash, -1.0);
    d->confirmed_round = (int64_t)from; /* the peers' own state */
    *start_p = R * d->H + d->tau;
    if (fast) {
        uint64_t lo = (R - 1) * d->H + (early ? 0 : d->tau), hi = R * d->H + d->tau - 1;
        *start_p = fast_step < lo ? lo : fast_step > hi ? hi : fast_step;
        d->join_rebase = (int64_t)R - 1;
        d->fpending[0] = (int64_t)R - 1; /* "applied" at R·H + τ: the rebase */
        memcpy(d->snap, d->anchor, d->n_sub * sizeof(float)); /* what it trains on, until then */
    }
    GT_INFO("site %s: joined at step %llu with the anchor after round %llu (%.1f s to join)%s",
            name, (unsigned long long)*start_p, (unsigned long long)from,
            (gt_time_ns() - t0) * 1e-9,
            fast ? "; its first round follows the next anchor, which it takes when the peers "
                   "apply it"
                 : "");
    return GT_OK;
}

/* A joiner that started before its first round (dl_join, fast): at round R - 1's apply step,
 * the anchor (and momentum) after R - 1 from the training peers, and θ_s rebased onto it as an
 * apply would: θ_s ← θ_a' + (θ_s − θ_a). Collective over the site's ranks. Waits while the
 * peers have not applied it yet (they apply it at this same step), up to the join's bound. */
gt_status_t dl_join_rebase(gt_diloco_t *d)
{
    const gt_topo_config_t *c = d->cfg;
    uint64_t r = (uint64_t)d->join_rebase, t0 = gt_time_ns();
    uint64_t limit = (uint64_t)c->outer.deadline_max_ms * 4000000ull +
                     (uint64_t)c->wan.peer_timeout_ms * 2000000ull + 60000000000ull;
    gt_status_t st = dl_agree(d, dl_encode_wait(d)); /* it rewrites the snapshot and θ_a */
    if (st != GT_OK) return st;
    memcpy(d->snap, d->anchor, d->n_sub * sizeof(float)); /* laid out alike */
    uint64_t have_grp = 0;
    struct dl_watch watch = {0, 0};
    for (;;) {
        int64_t code = 0; /* 0 done, 1 retry, 3 give up */
        int gone = 0;     /* a peer answered that it no longer holds round r */
        for (uint32_t i = 0; i < d->n_grp; i++) {
            if (have_grp >> i & 1) continue;
            uint32_t gp[GT_WAN_MAX_MEMBERS];
            int gin = 0;
            uint32_t gn = dl_view_peers(d, i, gp, &gin), tn = 0;
            for (uint32_t k = 0; k < gn; k++)
                if (gp[k] < 64 && (d->join_trainers >> gp[k] & 1)) gp[tn++] = gp[k];
            if (tn) gn = tn;
            gn = dl_heard_first(d, gp, gn); /* not striped across a peer it cannot reach */
            st = gn ? dl_fetch_state(d, i, r, gp, gn) : GT_ERR_AGAIN;
            for (uint32_t k = 0; k < gn && st != GT_OK && st != GT_ERR_NOMEM && gn > 1; k++)
                st = dl_fetch_state(d, i, r, &gp[k], 1);
            if (st == GT_OK) {
                take_fetched(d, i);
                have_grp |= 1ull << i;
            } else {
                gone |= st == GT_ERR_NOT_FOUND;
                code = st == GT_ERR_NOT_FOUND || st == GT_ERR_NOMEM ? 3 : code > 1 ? code : 1;
            }
        }
        uint64_t now = gt_time_ns();
        /* The peers it may wait on: those that trained, and those that did not answer (the
         * join went ahead without them; one cut off from every site holds the others up). */
        if (code == 1) dl_watch_step(d, &watch, now - t0, d->join_trainers | d->join_quiet, r);
        if (code == 1 && (now - t0 > limit || d->wan_error || (d->p.stop && *d->p.stop))) code = 3;
        uint64_t worst = (uint64_t)code;
        if ((st = dl_allreduce(d, &worst, 1, GT_DILOCO_OP_MAX)) != GT_OK) {
            dl_watch_end(d);
            return st;
        }
        if (worst == 0) break;
        if (worst == 3) {
            dl_watch_end(d);
            GT_ERROR("site %s: cannot fetch the anchor after round %llu, which its first round "
                     "follows (%s); it leaves, and rejoins when started again",
                     d->name, (unsigned long long)r,
                     gone ? "the peers no longer hold it: they have applied two rounds since"
                          : "the peers have not applied it in time");
            return d->wan_error ? (gt_status_t)d->wan_error : GT_ERR_PEER_LOST;
        }
        dl_write_status(d, 0);
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    dl_watch_end(d);
    double waited = (gt_time_ns() - t0) * 1e-9;
    d->wait_s += waited;
    if ((st = dl_rebase_own(d, -1, 0)) != GT_OK) return st;
    dl_keep_state(d, (int64_t)r);
    uint64_t hash = 0;
    if ((st = dl_anchor_hash(d, &hash)) != GT_OK) return st;
    dl_log_anchor(d, r, hash, -1.0);
    d->confirmed_round = (int64_t)r; /* the peers' own state */
    d->join_rebase = -1;
    if (d->p.after_write && (st = d->p.after_write(d->p.hook_ctx)) != GT_OK) return st;
    GT_INFO("site %s: took the anchor after round %llu (%.2f s waiting); its first round is %llu",
            d->name, (unsigned long long)r, waited, (unsigned long long)r + 1);
    return GT_OK;
}
