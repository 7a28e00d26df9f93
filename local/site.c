/* site.c — one site of a multi-site DiLoCo run (DESIGN.md §1, §3, §4).
 *
 * The loop: inner AdamW steps on this site's data; every inner.steps (H) steps the site
 * submits its pseudo-gradient Δ = θ_a − θ_s for the round and keeps going; at step r·H + H + τ
 * (τ = outer.overlap_steps) it needs the agreed g of round r, waits for it only if it has not
 * arrived (the wait is measured), applies the outer step to its anchor (Nesterov, or plain
 * averaging) and rebases: θ_s ← θ_a + (θ_s − θ_s_at_send), keeping the progress made while the
 * round was in flight. Between steps it drives the WAN (mesh + outer engine) and, every
 * heartbeat, re-reads the membership view. A site that dies is removed by its lease; the
 * others re-send to new chunk owners and go on. A site that starts after the run began (etcd
 * holds the run's started mark) joins it instead (join_run): it probes the training peers for
 * the round they submit next, announces its first round R to the outer engines, fetches
 * (θ_a, m) after R − 1 striped across the peers (STATE_REQ/STATE_CHUNK, hash-checked), and
 * starts at step R·H + τ with its data skipped to match.
 *
 * It writes SITE/metrics.jsonl, SITE/anchors.jsonl (the anchor's hash after every round, so
 * invariant I1 can be checked across sites), SITE/status.json (for `geotrain launch`'s live
 * lines) and SITE/summary.json.
 */
#include "gt_local.h"
#include "local_internal.h"

#include "gt_wan.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const gt_local_site_params_t *p;
    const gt_topo_config_t *cfg;
    uint32_t site;
    gt_local_trainer_t *tr;
    gt_gpt_t *gpt;
    size_t n;      /* floats in the full parameter vector (HF layout) */
    float *theta;  /* θ_s, full (host copy; assembled from the shards under TP) */
    float *anchor; /* θ_a, full: rebuilt from every rank's lanes after each round */
    float *snap;   /* θ_s at the last send, full */
    /* This rank's lanes (DESIGN §3): rank k of R carries lanes {l : l mod R = k} of the
     * wan.lanes equal cuts of the vector, packed one after another into a sub-vector of n_sub
     * floats. Its outer engine, mesh and membership see only that sub-vector (rank k of every
     * site forms one WAN group), so a site of R ranks sends the bytes a site of one rank would,
     * spread over its ranks. With one rank, the sub-vector is the whole vector. */
    gt_local_comm_t *comm; /* the site's ranks (NULL: one) */
    int rank, ranks;
    size_t n_sub;
    size_t n_own;      /* lanes of this rank */
    size_t *own_off;   /* [n_own] start of each in the full vector */
    size_t *own_len;   /* [n_own] */
    size_t *sub_count; /* [ranks] n_sub of every rank (the all-gather's counts) */
    size_t *sub_displ; /* [ranks] offsets into the packed buffer */
    float *packed;     /* every rank's sub-vector one after another (ranks > 1) */
    float *anchor_sub; /* θ_a on this rank's lanes (the outer state; = anchor if R = 1) */
    float *mom;        /* outer momentum on this rank's lanes */
    float *delta;      /* Δ / g on this rank's lanes */
    gt_wan_member_t *member;
    gt_wan_mesh_t *mesh;
    gt_wan_outer_t *outer;
    gt_wan_view_t view;
    uint64_t last_view_ns;
    double wait_s, step_s, slow_s;
    uint64_t rounds_applied;
    uint64_t round_tokens;
    char site_dir[2048];
    FILE *metrics;
    FILE *anchors; /* SITE/anchors.jsonl: the anchor's hash after every round (invariant I1) */
    uint64_t status_ns, status_bytes;
    double wan_mbps;
    const char *state;
    float last_loss;
    double loss_acc;
    uint32_t loss_n;
    uint64_t t_start;
    uint64_t t_train, t_train_end; /* the training loop (utilization is measured over it) */
    uint64_t total;                /* steps of the run */
    /* Anchor repair (invariant I1): the (θ_a, m) after the last two applied rounds, served to a
     * peer whose anchor hash disagreed with the majority; and, on our side, the state being
     * fetched. Both under `lock` (the WAN thread serves and receives). */
    float *snap_state[2]; /* 2n floats each: θ_a then m */
    int64_t snap_round[2];
    float *fetch;         /* 2 n_sub floats */
    uint64_t fetch_round; /* the round asked for (STATE_PROBE: a probe) */
    int fetching;         /* a fetch is in progress */
    uint64_t fetch_id;    /* echoed by the servers (view_epoch field): stale replies are ignored */
    uint32_t fetch_n;     /* servers, each sending one stripe of the state */
    uint32_t fetch_peer[GT_WAN_MAX_MEMBERS];
    size_t fetch_floats; /* received so far */
    uint64_t fetch_hash; /* the servers' hash of the whole state (they must agree) */
    int fetch_hash_set;
    int fetch_status;    /* worst status a server answered (STATE_* below); 0 all good */
    int probe_got;       /* a probe's answer arrived: */
    uint64_t probe_next; /* the round the server submits next */
    uint64_t probe_first[GT_WAN_OUTER_MAX_SITES]; /* its engine's first rounds */
    uint64_t refetches;
    /* Joins (a site that starts late or comes back, DESIGN §4): the round this site's first
     * contribution is for (0: it started the run), the steps it trained itself, and the rounds
     * of the run applied so far (last applied + 1), for --kill-at. Served to joiners: the
     * round this site submits next, once it trains. */
    uint64_t joined_round;
    uint64_t steps_trained;
    uint64_t applied_upto;
    uint64_t next_submit;
    int training;
    uint64_t corrupt_round; /* chaos: flip a bit of the anchor after this round (0 = never) */
    size_t part_floats;     /* floats per STATE_CHUNK: what every site's receive buffer holds */
    /* The WAN thread drives mesh, outer engine and membership, so this site answers its
     * peers (as a chunk owner) promptly however long its own steps take. `lock` guards the
     * mesh and the outer engine. */
    pthread_mutex_t lock;
    pthread_t wan_thread;
    int wan_running;
    volatile int wan_stop;
    volatile int wan_error; /* gt_status_t: the lease was lost */
    double eval_loss;       /* the final anchor on held-out batches (NaN until computed) */
    int sync_dp;
    char run_id[512]; /* this rank's WAN group (see setup) */
} site_t;

/* STATE_REQ / STATE_CHUNK. A request names a round (or STATE_PROBE: "what round are you at")
 * and a stripe (lane = k of chunk = n servers; 0 of 0 = the whole state), and carries a fetch
 * id in its view_epoch field, which every reply echoes. A reply: u32 status, u32 reserved,
 * u64 offset (in floats, into the 2 n_sub floats θ_a then m), u64 hash of the server's whole
 * state, then the floats. A probe's answer (STATE_INFO): u64 the round the server submits
 * next, u32 sites, then every site's first round as its outer engine knows it. */
#define STATE_HDR   24u
#define STATE_PROBE UINT64_MAX
enum { STATE_OK = 0, STATE_NOT_YET = 1, STATE_INFO = 2, STATE_GONE = 3, STATE_BUSY = 4 };

/* Lane l of L is [l·n/L, (l+1)·n/L). Rank k owns lanes k, k + R, k + 2R, ... */
static gt_status_t setup_lanes(site_t *s)
{
    const gt_topo_config_t *c = s->cfg;
    size_t L = c->wan.lanes, R = (size_t)s->ranks;
    if (L < R) {
        GT_ERROR("site %s: wan.lanes (%zu) must be at least the site's ranks (%zu): every rank "
                 "carries its own lanes",
                 c->sites[s->site].name, L, R);
        return GT_ERR_CONFIG;
    }
    for (uint32_t i = 0; i < c->n_sites; i++)
        if (c->sites[i].ranks != (uint32_t)R) {
            GT_ERROR("site %s has %zu ranks but site %s has %u: every site of a run needs the same "
                     "number of ranks (rank k of each site carries lanes l mod R = k)",
                     c->sites[s->site].name, R, c->sites[i].name, c->sites[i].ranks);
            return GT_ERR_CONFIG;
        }
    s->n_own = (L - (size_t)s->rank + R - 1) / R;
    s->own_off = calloc(s->n_own, sizeof *s->own_off);
    s->own_len = calloc(s->n_own, sizeof *s->own_len);
    s->sub_count = calloc(R, sizeof *s->sub_count);
    s->sub_displ = calloc(R, sizeof *s->sub_displ);
    if (!s->own_off || !s->own_len || !s->sub_count || !s->sub_displ) return GT_ERR_NOMEM;
    for (size_t l = 0; l < L; l++) {
        size_t a = l * s->n / L, b = (l + 1) * s->n / L, k = l % R;
        s->sub_count[k] += b - a;
        if (k == (size_t)s->rank) {
            s->own_off[l / R] = a;
            s->own_len[l / R] = b - a;
        }
    }
    for (size_t k = 1; k < R; k++) s->sub_displ[k] = s->sub_displ[k - 1] + s->sub_count[k - 1];
    s->n_sub = s->sub_count[s->rank];
    return GT_OK;
}

/* full → this rank's packed lanes. */
static void pack_own(const site_t *s, const float *full, float *sub)
{
    for (size_t i = 0, o = 0; i < s->n_own; o += s->own_len[i], i++)
        memcpy(sub + o, full + s->own_off[i], s->own_len[i] * sizeof(float));
}

/* Every rank's packed lanes (s->packed, rank after rank) → full. */
static void unpack_all(const site_t *s, float *full)
{
    size_t L = s->cfg->wan.lanes, R = (size_t)s->ranks;
    for (size_t k = 0; k < R; k++) {
        size_t o = s->sub_displ[k];
        for (size_t l = k; l < L; l += R) {
            size_t a = l * s->n / L, b = (l + 1) * s->n / L;
            memcpy(full + a, s->packed + o, (b - a) * sizeof(float));
            o += b - a;
        }
    }
}

/* Every rank's sub-vector `sub` → the full vector on every rank (the in-site all-gather). */
static gt_status_t gather_lanes(site_t *s, const float *sub, float *full)
{
    if (s->ranks == 1) {
        if (sub != full) memcpy(full, sub, s->n * sizeof(float));
        return GT_OK;
    }
    memcpy(s->packed + s->sub_displ[s->rank], sub, s->n_sub * sizeof(float));
    gt_status_t st = gt_local_comm_allgatherv(s->comm, NULL, s->packed, s->sub_count, s->sub_displ);
    if (st == GT_OK) unpack_all(s, full);
    return st;
}

static void state_reply(site_t *s, const gt_wan_msg_t *req, uint32_t status, uint64_t off,
                        uint64_t hash, const void *data, size_t bytes, uint32_t part,
                        uint32_t parts, uint8_t *buf)
{
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
    if (bytes) memcpy(buf + STATE_HDR, data, bytes);
    if (gt_wan_mesh_send(s->mesh, req->sender, &m, buf, STATE_HDR + bytes) != GT_OK)
        GT_WARN("site %s: cannot answer site %u's state request", s->cfg->sites[s->site].name,
                req->sender);
}

/* A peer asks where we are (a probe), or for (θ_a, m) of our lanes after round req->round —
 * all of it, or stripe k of n: sent in parts that fit every site's receive buffer; or a status
 * when we do not hold that round (not yet, or no longer). Called in the WAN thread, under the
 * lock. */
static void serve_state(site_t *s, const gt_wan_msg_t *req)
{
    size_t total = 2 * s->n_sub, pf = s->part_floats;
    uint8_t *buf = malloc(STATE_HDR + pf * sizeof(float));
    if (!buf) return;
    if (req->round == STATE_PROBE) {
        uint64_t first[GT_WAN_OUTER_MAX_SITES];
        uint8_t info[8 + 4 + 8 * GT_WAN_OUTER_MAX_SITES];
        uint32_t n = s->cfg->n_sites;
        gt_wan_outer_first_rounds(s->outer, first);
        gt_le_put64(info, s->next_submit);
        gt_le_put32(info + 8, n);
        for (uint32_t i = 0; i < n; i++) gt_le_put64(info + 12 + 8 * i, first[i]);
        state_reply(s, req, s->training ? STATE_INFO : STATE_BUSY, 0, 0, info, 12 + 8 * n, 0, 1,
                    buf);
        free(buf);
        return;
    }
    const float *src = NULL;
    int64_t newest = -1;
    for (int k = 0; k < 2; k++) {
        if (s->snap_round[k] > newest) newest = s->snap_round[k];
        if (s->snap_state[k] && s->snap_round[k] == (int64_t)req->round) src = s->snap_state[k];
    }
    uint32_t n = req->chunk ? req->chunk : 1, k = req->lane;
    if (!src || k >= n) {
        state_reply(s, req, (int64_t)req->round > newest ? STATE_NOT_YET : STATE_GONE, 0, 0, NULL,
                    0, 0, 1, buf);
        if ((int64_t)req->round <= newest)
            GT_WARN("site %s: site %u asked for the anchor after round %llu, which we no longer "
                    "hold",
                    s->cfg->sites[s->site].name, req->sender, (unsigned long long)req->round);
        free(buf);
        return;
    }
    uint64_t hash = gt_wan_outer_hash(src, total);
    size_t lo = total * k / n, hi = total * (k + 1) / n;
    size_t parts = hi > lo ? (hi - lo + pf - 1) / pf : 1;
    for (size_t p = 0; p < parts; p++) {
        size_t off = lo + p * pf, cnt = hi - off < pf ? hi - off : pf;
        if (hi == lo) cnt = 0;
        state_reply(s, req, STATE_OK, off, hash, src + off, cnt * sizeof(float), (uint32_t)p,
                    (uint32_t)parts, buf);
    }
    free(buf);
}

/* A reply to our probe or fetch. Hostile input is checked before anything is written. */
static void take_state(site_t *s, const gt_wan_msg_t *msg, const uint8_t *buf, size_t len)
{
    if (!s->fetching || msg->view_epoch != s->fetch_id || len < STATE_HDR) return;
    uint32_t status = gt_le_get32(buf), k = 0;
    while (k < s->fetch_n && s->fetch_peer[k] != msg->sender) k++;
    if (k == s->fetch_n || s->fetch_round != msg->round) return;
    const char *name = s->cfg->sites[s->site].name;
    if (msg->round == STATE_PROBE) {
        uint32_t n = len >= STATE_HDR + 12 ? gt_le_get32(buf + STATE_HDR + 8) : 0;
        if (status == STATE_BUSY) {
            s->fetch_status = STATE_BUSY;
        } else if (status != STATE_INFO || n != s->cfg->n_sites ||
                   len != STATE_HDR + 12 + 8 * (size_t)n) {
            GT_WARN("site %s: rejected a malformed probe answer from site %u", name, msg->sender);
            s->fetch_status = STATE_GONE;
        } else {
            s->probe_next = gt_le_get64(buf + STATE_HDR);
            for (uint32_t i = 0; i < n; i++)
                s->probe_first[i] = gt_le_get64(buf + STATE_HDR + 12 + 8 * i);
            s->probe_got = 1;
        }
        return;
    }
    if (status != STATE_OK) {
        if ((int)status > s->fetch_status) s->fetch_status = (int)status;
        return;
    }
    size_t total = 2 * s->n_sub, lo = total * k / s->fetch_n, hi = total * (k + 1) / s->fetch_n;
    uint64_t off = gt_le_get64(buf + 8), cnt = (len - STATE_HDR) / sizeof(float);
    uint64_t hash = gt_le_get64(buf + 16);
    if ((len - STATE_HDR) % sizeof(float) || off < lo || off > hi || cnt > hi - off ||
        (s->fetch_hash_set && hash != s->fetch_hash)) {
        GT_WARN("site %s: rejected a malformed (or disagreeing) state part from site %u", name,
                msg->sender);
        s->fetch_status = STATE_GONE;
        return;
    }
    s->fetch_hash = hash;
    s->fetch_hash_set = 1;
    memcpy(s->fetch + off, buf + STATE_HDR, cnt * sizeof(float));
    s->fetch_floats += cnt;
}

/* Asks peers[0..n) for stripe k of n of our lanes' (θ_a, m) after `round` (or, with
 * STATE_PROBE, the first of them that trains where it is) and waits for the answer, at most
 * wan.peer_timeout_ms. GT_OK: s->fetch holds the state, its hash checked against the one every
 * server sent; GT_ERR_AGAIN: a server does not hold the round yet; GT_ERR_NOT_FOUND: a server
 * no longer holds it; GT_ERR_TIMEOUT / GT_ERR_CORRUPT otherwise. Not under the lock. */
static gt_status_t fetch_state(site_t *s, uint64_t round, const uint32_t *peers, uint32_t n)
{
    const gt_topo_config_t *c = s->cfg;
    if (!s->fetch) s->fetch = malloc(2 * s->n_sub * sizeof(float));
    if (!s->fetch || n == 0 || n > GT_WAN_MAX_MEMBERS)
        return s->fetch ? GT_ERR_INVALID : GT_ERR_NOMEM;
    pthread_mutex_lock(&s->lock);
    s->fetch_round = round;
    s->fetching = 1;
    s->fetch_id++;
    s->fetch_n = round == STATE_PROBE ? 1 : n;
    memcpy(s->fetch_peer, peers, n * sizeof *peers);
    s->fetch_floats = 0;
    s->fetch_hash_set = 0;
    s->fetch_status = 0;
    s->probe_got = 0;
    gt_status_t st = GT_OK;
    for (uint32_t k = 0; k < s->fetch_n && st == GT_OK; k++) {
        gt_wan_msg_t m;
        memset(&m, 0, sizeof m);
        m.type = GT_WAN_MSG_STATE_REQ;
        m.round = round;
        m.view_epoch = s->fetch_id;
        m.lane = k;
        m.chunk = s->fetch_n;
        st = gt_wan_mesh_send(s->mesh, peers[k], &m, "", 0);
    }
    pthread_mutex_unlock(&s->lock);
    uint64_t t0 = gt_time_ns();
    int done = 0, status = 0;
    while (st == GT_OK && !done && !status &&
           gt_time_ns() - t0 < (uint64_t)c->wan.peer_timeout_ms * 1000000ull) {
        struct timespec ts = {0, 500000};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&s->lock);
        done = round == STATE_PROBE ? s->probe_got : s->fetch_floats == 2 * s->n_sub;
        status = s->fetch_status;
        pthread_mutex_unlock(&s->lock);
    }
    pthread_mutex_lock(&s->lock);
    s->fetching = 0;
    pthread_mutex_unlock(&s->lock);
    if (st != GT_OK) return st;
    if (status == STATE_NOT_YET || status == STATE_BUSY) return GT_ERR_AGAIN;
    if (status == STATE_GONE) return GT_ERR_NOT_FOUND;
    if (!done) return GT_ERR_TIMEOUT;
    if (round != STATE_PROBE && gt_wan_outer_hash(s->fetch, 2 * s->n_sub) != s->fetch_hash) {
        GT_WARN("site %s: the state after round %llu does not match its hash",
                c->sites[s->site].name, (unsigned long long)round);
        return GT_ERR_CORRUPT;
    }
    return GT_OK;
}

static void on_message(void *ctx, const gt_wan_msg_t *msg, const void *buf, size_t len)
{
    site_t *s = ctx;
    if (msg->type == GT_WAN_MSG_STATE_REQ)
        serve_state(s, msg);
    else if (msg->type == GT_WAN_MSG_STATE_CHUNK)
        take_state(s, msg, buf, len);
    else
        gt_wan_outer_deliver(s->outer, msg, buf, len, gt_time_ns());
}

static gt_status_t io_send(void *ctx, uint32_t dst, const gt_wan_msg_t *msg, const void *buf,
                           size_t len)
{
    site_t *s = ctx;
    return gt_wan_mesh_send(s->mesh, dst, msg, buf, len);
}

static gt_status_t apply_view(site_t *s, const gt_wan_view_t *v)
{
    uint32_t live[GT_WAN_MAX_MEMBERS], n = 0;
    for (uint32_t k = 0; k < v->n_members; k++) {
        uint32_t i;
        if (gt_topo_site_index(s->cfg, v->members[k].name, &i) == GT_OK) live[n++] = i;
    }
    gt_status_t st = gt_wan_mesh_set_view(s->mesh, v);
    if (st == GT_OK) st = gt_wan_outer_set_view(s->outer, v->epoch, live, n, gt_time_ns());
    if (st == GT_OK) {
        if (s->view.epoch && v->epoch != s->view.epoch)
            GT_INFO("site %s: view %llu -> %llu, %u live sites", s->cfg->sites[s->site].name,
                    (unsigned long long)s->view.epoch, (unsigned long long)v->epoch, n);
        s->view = *v;
    }
    return st;
}

/* Re-reads the membership view when a heartbeat period has passed (or `force`). The etcd
 * requests run without the lock; the new view is installed under it. */
static gt_status_t refresh_view(site_t *s, int force)
{
    uint64_t now = gt_time_ns();
    if (!force && now - s->last_view_ns < (uint64_t)s->cfg->membership.heartbeat_ms * 1000000ull)
        return GT_OK;
    s->last_view_ns = now;
    if (gt_wan_member_health(s->member) != GT_OK) {
        GT_ERROR("site %s: lost its membership lease; the others have removed it",
                 s->cfg->sites[s->site].name);
        return GT_ERR_PEER_LOST;
    }
    gt_wan_view_t v;
    int changed = 0;
    gt_status_t st = gt_wan_member_sync_view(s->member, &v, &changed);
    if (st != GT_OK) {
        GT_WARN("site %s: cannot read the view (%s); retrying", s->cfg->sites[s->site].name,
                gt_status_str(st));
        return GT_OK; /* etcd hiccup: the lease tells us when it is serious */
    }
    if (v.epoch == s->view.epoch) return GT_OK;
    pthread_mutex_lock(&s->lock);
    st = apply_view(s, &v);
    pthread_mutex_unlock(&s->lock);
    return st;
}

static void *wan_main(void *arg)
{
    site_t *s = arg;
    while (!s->wan_stop) {
        gt_status_t st = refresh_view(s, 0);
        if (st != GT_OK) s->wan_error = (int)st;
        pthread_mutex_lock(&s->lock);
        gt_wan_mesh_progress(s->mesh);
        gt_wan_outer_progress(s->outer, gt_time_ns());
        pthread_mutex_unlock(&s->lock);
        struct timespec ts = {0, 200000}; /* 0.2 ms: the transports are polled */
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static gt_status_t start_wan_thread(site_t *s)
{
    if (pthread_create(&s->wan_thread, NULL, wan_main, s) != 0) {
        GT_ERROR("site %s: cannot start the WAN thread", s->cfg->sites[s->site].name);
        return GT_ERR_INTERNAL;
    }
    s->wan_running = 1;
    return GT_OK;
}

static void stop_wan_thread(site_t *s)
{
    if (!s->wan_running) return;
    s->wan_stop = 1;
    pthread_join(s->wan_thread, NULL);
    s->wan_running = 0;
}

/* status.json is a live view, rewritten twice a second: replaced by rename so a reader never
 * sees half a file, but not fsynced (a crash loses nothing that matters, and an fsync per
 * write would show up as lost compute time). */
static int write_status_file(const char *path, const char *text)
{
    char tmp[2200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return -1;
    int ok = fputs(text, f) >= 0;
    ok &= fclose(f) == 0;
    return ok && rename(tmp, path) == 0 ? 0 : -1;
}

static void write_status(site_t *s, uint64_t step, uint64_t total, int force)
{
    uint64_t now = gt_time_ns();
    if (s->rank != 0) return; /* the site's live line: rank 0's view of it */
    if (!force && now - s->status_ns < 500000000ull) return;
    gt_wan_mesh_stats_t ms;
    pthread_mutex_lock(&s->lock);
    gt_wan_mesh_stats(s->mesh, &ms);
    pthread_mutex_unlock(&s->lock);
    uint64_t bytes = ms.bytes_sent + ms.bytes_received;
    if (s->status_ns)
        s->wan_mbps = (double)(bytes - s->status_bytes) / ((now - s->status_ns) * 1e-3);
    s->status_ns = now;
    s->status_bytes = bytes;
    double wall = (now - (s->t_train ? s->t_train : s->t_start)) * 1e-9;
    json_t *o = json_pack(
        "{s:s,s:s,s:I,s:I,s:I,s:I,s:f,s:f,s:f,s:f,s:I,s:i}", "site", s->cfg->sites[s->site].name,
        "state", s->state, "round", (json_int_t)(step / s->cfg->inner.steps), "step",
        (json_int_t)step, "total_steps", (json_int_t)total, "rounds_applied",
        (json_int_t)s->rounds_applied, "loss", (double)s->last_loss, "tokens_per_s",
        s->step_s > 0 ? step * gt_local_trainer_tokens_per_step(s->tr) / wall : 0.0, "wan_mbps",
        s->wan_mbps, "wait_s", s->wait_s, "view_epoch", (json_int_t)s->view.epoch, "live_sites",
        (int)s->view.n_members);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    char path[2100];
    snprintf(path, sizeof path, "%s/status.json", s->site_dir);
    if (text && write_status_file(path, text) != 0)
        GT_WARN("site %s: cannot write %s", s->cfg->sites[s->site].name, path);
    free(text);
    json_decref(o);
}

/* Drives the WAN until round r's result is in s->delta. Bounded: a result cannot be missing
 * longer than the straggler deadline plus the time to notice a dead site. */
static gt_status_t wait_result(site_t *s, uint64_t r, uint64_t step, uint64_t total)
{
    const gt_topo_config_t *c = s->cfg;
    uint64_t t0 = gt_time_ns();
    uint64_t limit = (uint64_t)c->outer.deadline_max_ms * 1000000ull +
                     (uint64_t)c->membership.lease_ttl_s * 3000000000ull +
                     (uint64_t)c->wan.peer_timeout_ms * 1000000ull + 10000000000ull;
    gt_status_t st;
    const char *prev = s->state;
    s->state = "waiting";
    for (;;) {
        pthread_mutex_lock(&s->lock);
        st = gt_wan_outer_result(s->outer, r, s->delta);
        pthread_mutex_unlock(&s->lock);
        if (st != GT_ERR_AGAIN) break;
        if (s->p->stop && *s->p->stop) return GT_ERR_CLOSED;
        if (s->wan_error) return (gt_status_t)s->wan_error;
        write_status(s, step, total, 0);
        if (gt_time_ns() - t0 > limit) {
            GT_ERROR("site %s: round %llu's result has not arrived in %.0f s; giving up",
                     c->sites[s->site].name, (unsigned long long)r, (gt_time_ns() - t0) * 1e-9);
            return GT_ERR_TIMEOUT;
        }
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    if (st != GT_OK) return st;
    s->wait_s += (gt_time_ns() - t0) * 1e-9;
    s->state = prev;
    return GT_OK;
}

static void log_anchor(site_t *s, uint64_t r, const float *x)
{
    if (!s->anchors) return;
    fprintf(s->anchors, "{\"round\":%llu,\"anchor_hash\":\"%016llx\"}\n", (unsigned long long)r,
            (unsigned long long)gt_wan_outer_hash(x, s->n));
    fflush(s->anchors);
}

/* Keeps (θ_a, m) after round r for peers that may need to repair theirs. */
static void snapshot_state(site_t *s, uint64_t r)
{
    int k = (int)(r % 2);
    pthread_mutex_lock(&s->lock);
    if (!s->snap_state[k]) s->snap_state[k] = malloc(2 * s->n_sub * sizeof(float));
    if (s->snap_state[k]) {
        memcpy(s->snap_state[k], s->anchor_sub, s->n_sub * sizeof(float));
        memcpy(s->snap_state[k] + s->n_sub, s->mom, s->n_sub * sizeof(float));
        s->snap_round[k] = (int64_t)r;
    }
    pthread_mutex_unlock(&s->lock);
}

/* Our anchor disagreed with the majority (invariant I1): fetch (θ_a, m) of our lanes after
 * round r from a live peer and replace ours (θ_s is rebased onto it right after). Peers that do not
 * hold round r any more are skipped; if none can serve it, the run goes on and the event stays
 * logged. */
static gt_status_t refetch_anchor(site_t *s, uint64_t r, uint64_t step, uint64_t total)
{
    const gt_topo_config_t *c = s->cfg;
    GT_ERROR("site %s: our anchor after round %llu differs from the majority's; re-fetching it",
             c->sites[s->site].name, (unsigned long long)r - 1);
    gt_wan_view_t view = s->view;
    for (uint32_t k = 0; k < view.n_members; k++) {
        uint32_t peer;
        if (gt_topo_site_index(c, view.members[k].name, &peer) != GT_OK || peer == s->site)
            continue;
        uint64_t t0 = gt_time_ns();
        gt_status_t st = fetch_state(s, r, &peer, 1);
        s->wait_s += (gt_time_ns() - t0) * 1e-9;
        write_status(s, step, total, 0);
        if (st == GT_ERR_NOMEM) return st;
        if (st != GT_OK) continue;
        memcpy(s->anchor_sub, s->fetch, s->n_sub * sizeof(float));
        memcpy(s->mom, s->fetch + s->n_sub, s->n_sub * sizeof(float));
        snapshot_state(s, r);
        s->refetches++;
        GT_WARN("site %s: re-fetched the anchor after round %llu from site %s",
                c->sites[s->site].name, (unsigned long long)r, c->sites[peer].name);
        return GT_OK;
    }
    GT_ERROR("site %s: no peer could serve the anchor after round %llu; going on with ours",
             c->sites[s->site].name, (unsigned long long)r);
    return GT_OK;
}

/* Waits for round r's g on our lanes, applies the outer step to our part of the anchor,
 * repairs it if the hash vote says so, rebuilds the full anchor from every rank's lanes and
 * rebases θ_s onto it: θ_s ← θ_a + (θ_s − θ_s at send). Collective over the site's ranks. */
static gt_status_t wait_and_apply(site_t *s, uint64_t r, uint64_t step, uint64_t total)
{
    const gt_topo_config_t *c = s->cfg;
    gt_status_t st = wait_result(s, r, step, total);
    if (st == GT_OK && c->outer.optimizer == GT_OUTER_NESTEROV) {
        st = gt_kern_nesterov_update(s->anchor_sub, s->mom, s->delta, s->n_sub, (float)c->outer.lr,
                                     (float)c->outer.momentum);
    } else if (st == GT_OK) {
        for (size_t i = 0; i < s->n_sub; i++) s->anchor_sub[i] -= s->delta[i];
    }
    if (st == GT_OK && s->corrupt_round && r + 1 == s->corrupt_round && s->rank == 0) {
        /* Chaos (--corrupt-anchor): silent data corruption of one bit of the anchor. */
        uint32_t bits;
        memcpy(&bits, &s->anchor_sub[s->n_sub / 2], 4);
        bits ^= 1u << 20;
        memcpy(&s->anchor_sub[s->n_sub / 2], &bits, 4);
        GT_WARN("site %s: chaos: flipped a bit of the anchor after round %llu",
                c->sites[s->site].name, (unsigned long long)r);
    }
    if (st == GT_OK) {
        snapshot_state(s, r);
        int verdict = r > 0 ? gt_wan_outer_hash_verdict(s->outer, r - 1) : 0;
        if (verdict < 0) st = refetch_anchor(s, r, step, total);
    }
    if ((st = gt_local_comm_agree(s->comm, st)) != GT_OK) return st;
    if ((st = gather_lanes(s, s->anchor_sub, s->anchor)) != GT_OK) return st;
    if ((st = gt_local_trainer_gather(s->tr, GT_GPT_PARAMS, s->theta)) != GT_OK) return st;
    for (size_t i = 0; i < s->n; i++) s->theta[i] = s->anchor[i] + (s->theta[i] - s->snap[i]);
    if ((st = gt_local_trainer_scatter(s->tr, GT_GPT_PARAMS, s->theta)) != GT_OK) return st;
    s->rounds_applied++;
    s->applied_upto = r + 1;
    log_anchor(s, r, s->anchor);
    return GT_OK;
}

/* sync-dp: every step's gradients are averaged across the sites (bf16 both ways) before
 * clipping and AdamW, so every site takes the same step from the same parameters. Each rank
 * carries its lanes of the gradient; s->snap holds the full gradient (unused otherwise). */
static gt_status_t sync_grad_hook(void *ctx, gt_gpt_t *gpt, uint64_t step)
{
    site_t *s = ctx;
    (void)gpt;
    gt_status_t st = gt_local_trainer_gather(s->tr, GT_GPT_GRADS, s->snap);
    if (st == GT_OK) st = gt_local_trainer_gather(s->tr, GT_GPT_PARAMS, s->theta);
    if (st != GT_OK) return st;
    pack_own(s, s->snap, s->delta);
    pack_own(s, s->theta, s->anchor_sub); /* our lanes of the parameters, for the hash vote */
    uint64_t hash = gt_wan_outer_hash(s->anchor_sub, s->n_sub);
    if (step > 0) log_anchor(s, step - 1, s->theta); /* the parameters after step - 1 */
    double w = (double)gt_local_trainer_tokens_per_step(s->tr);
    pthread_mutex_lock(&s->lock);
    st = gt_wan_outer_submit(s->outer, step, s->delta, w, hash, gt_time_ns());
    pthread_mutex_unlock(&s->lock);
    if (st == GT_OK) st = wait_result(s, step, step, s->total);
    if ((st = gt_local_comm_agree(s->comm, st)) != GT_OK) return st;
    s->rounds_applied++;
    if ((st = gather_lanes(s, s->delta, s->snap)) != GT_OK) return st;
    return gt_local_trainer_scatter(s->tr, GT_GPT_GRADS, s->snap);
}

/* Δ = θ_a − θ_s on our lanes, submitted for round r; θ_s kept for the rebase. */
static gt_status_t submit_round(site_t *s, uint64_t r)
{
    gt_status_t st = gt_local_trainer_gather(s->tr, GT_GPT_PARAMS, s->theta);
    if (st != GT_OK) return st;
    memcpy(s->snap, s->theta, s->n * sizeof *s->snap);
    pack_own(s, s->theta, s->delta);
    for (size_t i = 0; i < s->n_sub; i++) s->delta[i] = s->anchor_sub[i] - s->delta[i];
    uint64_t hash = gt_wan_outer_hash(s->anchor_sub, s->n_sub);
    pthread_mutex_lock(&s->lock);
    st = gt_wan_outer_submit(s->outer, r, s->delta, (double)s->round_tokens, hash, gt_time_ns());
    s->next_submit = r + 1;
    pthread_mutex_unlock(&s->lock);
    s->round_tokens = 0;
    return st;
}

static void metrics_line(site_t *s, const gt_local_step_stats_t *ss, double tps)
{
    if (!s->metrics) return;
    gt_wan_mesh_stats_t ms;
    pthread_mutex_lock(&s->lock);
    gt_wan_mesh_stats(s->mesh, &ms);
    pthread_mutex_unlock(&s->lock);
    double wall = (gt_time_ns() - s->t_train) * 1e-9;
    fprintf(s->metrics,
            "{\"step\":%llu,\"round\":%llu,\"loss\":%.6f,\"lr\":%.6g,\"grad_norm\":%.4f,"
            "\"tokens\":%llu,\"tokens_per_s\":%.1f,\"time\":%.3f,\"wan_bytes_sent\":%llu,"
            "\"wan_bytes_received\":%llu,\"wait_s\":%.3f,\"compute_utilization\":%.4f,"
            "\"view_epoch\":%llu}\n",
            (unsigned long long)ss->step, (unsigned long long)(ss->step / s->cfg->inner.steps),
            ss->loss, ss->lr, ss->grad_norm, (unsigned long long)ss->tokens, tps, wall,
            (unsigned long long)ms.bytes_sent, (unsigned long long)ms.bytes_received, s->wait_s,
            wall > 0 ? s->step_s / wall : 0.0, (unsigned long long)s->view.epoch);
    fflush(s->metrics);
}

/* The final anchor's loss on the next EVAL_BATCHES batches of this site's data stream:
 * data it has not trained on, the same for every mode, so runs compare on equal terms. */
#define EVAL_BATCHES 8
static gt_status_t eval_anchor(site_t *s, double *loss_p)
{
    gt_local_trainer_t *tr = s->tr;
    double acc = 0;
    for (int b = 0; b < EVAL_BATCHES; b++) {
        float loss = 0;
        gt_status_t st = gt_local_data_next(tr->data, tr->inputs, tr->targets);
        if (st == GT_OK) st = gt_gpt_forward(s->gpt, tr->inputs, tr->targets, &loss);
        if (st != GT_OK) return st;
        acc += loss;
    }
    *loss_p = acc / EVAL_BATCHES;
    return GT_OK;
}

static gt_status_t write_summary(site_t *s, uint64_t steps, gt_status_t result)
{
    gt_wan_mesh_stats_t ms;
    gt_wan_outer_stats_t os;
    gt_wan_mesh_stats(s->mesh, &ms);
    gt_wan_outer_stats(s->outer, &os);
    if (s->ranks > 1) { /* the site's WAN traffic is every rank's */
        uint64_t *f[] = {
            &ms.bytes_sent,  &ms.bytes_received, &ms.rejected, &os.on_time,     &os.late,
            &os.dropped,     &os.rejected,       &os.clipped,  &os.hash_checks, &os.hash_mismatches,
            &os.deltas_sent, &s->refetches,      &os.open,     &os.joins};
        uint64_t v[sizeof f / sizeof f[0]];
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) v[i] = *f[i];
        gt_status_t st =
            gt_local_comm_allreduce(s->comm, v, sizeof v / sizeof v[0], GT_COMM_U64, GT_COMM_SUM);
        if (st != GT_OK) return st;
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) *f[i] = v[i];
        if (s->rank != 0) return GT_OK;
    }
    double wall = (gt_time_ns() - s->t_start) * 1e-9;
    uint64_t t_end = s->t_train_end ? s->t_train_end : gt_time_ns();
    double train = s->t_train ? (t_end - s->t_train) * 1e-9 : 0.0;
    double final_loss = s->loss_n ? s->loss_acc / s->loss_n : NAN;
    json_t *o = json_pack(
        "{s:I,s:f,s:o,s:s,s:s,s:I,s:I,s:I,s:o,s:f,s:f,s:f,s:f,s:I,s:I,s:I,s:I,s:{s:I,s:I,s:I,s:I,s:"
        "I},"
        "s:I,s:I,s:I,s:I,s:s,s:i}",
        "anchor_refetches", (json_int_t)s->refetches, "train_s", train, "eval_loss",
        isfinite(s->eval_loss) ? json_real(s->eval_loss) : json_null(), "site",
        s->cfg->sites[s->site].name, "status", result == GT_OK ? "finished" : "failed", "steps",
        (json_int_t)steps, "rounds_applied", (json_int_t)s->rounds_applied, "tokens",
        (json_int_t)(s->steps_trained * gt_local_trainer_tokens_per_step(s->tr)), "final_loss",
        isfinite(final_loss) ? json_real(final_loss) : json_null(), "elapsed_s", wall, "compute_s",
        s->step_s, "wait_s", s->wait_s, "compute_utilization", train > 0 ? s->step_s / train : 0.0,
        "wan_bytes_sent", (json_int_t)ms.bytes_sent, "wan_bytes_received",
        (json_int_t)ms.bytes_received, "params", (json_int_t)s->n, "view_epoch",
        (json_int_t)s->view.epoch, "contributions", "on_time", (json_int_t)os.on_time, "late",
        (json_int_t)os.late, "dropped", (json_int_t)os.dropped, "rejected", (json_int_t)os.rejected,
        "clipped", (json_int_t)os.clipped, "hash_checks", (json_int_t)os.hash_checks,
        "hash_mismatches", (json_int_t)os.hash_mismatches, "frames_rejected",
        (json_int_t)ms.rejected, "deltas_sent", (json_int_t)os.deltas_sent, "error",
        result == GT_OK ? "" : gt_status_str(result), "ranks", s->ranks);
    if (o) {
        json_object_set_new(json_object_get(o, "contributions"), "open_at_end",
                            json_integer((json_int_t)os.open));
        json_object_set_new(o, "joined_round", json_integer((json_int_t)s->joined_round));
        json_object_set_new(o, "steps_trained", json_integer((json_int_t)s->steps_trained));
        json_object_set_new(o, "joins_seen", json_integer((json_int_t)os.joins));
    }
    char *text = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
    char path[2100];
    snprintf(path, sizeof path, "%s/summary.json", s->site_dir);
    gt_status_t st = text ? gt_local_write_file_atomic(path, text, strlen(text)) : GT_ERR_NOMEM;
    free(text);
    json_decref(o);
    return st;
}

/* SITE/metrics.jsonl and SITE/anchors.jsonl, written by rank 0: new files for a site that
 * starts the run; appended to by a site that joins (a restarted site keeps what it logged
 * before it died). */
static gt_status_t open_files(site_t *s, int append)
{
    static const char *const files[2] = {"metrics.jsonl", "anchors.jsonl"};
    char path[2200];
    for (int f = 0; f < 2 && s->rank == 0; f++) {
        snprintf(path, sizeof path, "%s/%s", s->site_dir, files[f]);
        FILE *fp = fopen(path, append ? "a" : "w");
        if (!fp) {
            GT_ERROR("site %s: cannot create %s: %s", s->cfg->sites[s->site].name, path,
                     strerror(errno));
            return GT_ERR_IO;
        }
        *(f == 0 ? &s->metrics : &s->anchors) = fp;
    }
    return GT_OK;
}

static gt_status_t setup(site_t *s, const gt_local_site_params_t *p)
{
    const gt_topo_config_t *cfg = p->cfg;
    gt_status_t st;
    gt_wan_keypair_t kp;
    int have_kp = 0;
    snprintf(s->site_dir, sizeof s->site_dir, "%s/%s", p->run_dir, cfg->sites[s->site].name);
    if ((st = gt_local_mkdirs(s->site_dir)) != GT_OK) return st;
    gt_local_trainer_params_t tp = GT_LOCAL_TRAINER_PARAMS_INIT;
    tp.cfg = cfg;
    tp.site = s->site;
    tp.rank = (uint32_t)s->rank;
    tp.comm = s->comm;
    s->sync_dp = cfg->outer.mode == GT_OUTER_SYNC_DP;
    if (s->sync_dp) {
        tp.grad_hook = sync_grad_hook;
        tp.grad_hook_ctx = s;
    }
    if ((st = gt_local_trainer_create(&tp, &s->tr)) != GT_OK) return st;
    s->total = gt_local_trainer_total_steps(s->tr);
    s->gpt = gt_local_trainer_model(s->tr);
    s->n = gt_gpt_arena_len(&gt_gpt_get_params(s->gpt)->model);
    if ((st = setup_lanes(s)) != GT_OK) return st;
    s->theta = malloc(s->n * sizeof(float));
    s->anchor = malloc(s->n * sizeof(float));
    s->snap = malloc(s->n * sizeof(float));
    s->mom = calloc(s->n_sub, sizeof(float));
    s->delta = malloc(s->n_sub * sizeof(float));
    s->anchor_sub = s->ranks > 1 ? malloc(s->n_sub * sizeof(float)) : s->anchor;
    s->packed = s->ranks > 1 ? malloc(s->n * sizeof(float)) : NULL;
    if (!s->theta || !s->anchor || !s->mom || !s->snap || !s->delta || !s->anchor_sub ||
        (s->ranks > 1 && !s->packed))
        return GT_ERR_NOMEM;
    /* Every site initialises from run.seed, so the anchors start identical. */
    if ((st = gt_local_trainer_gather(s->tr, GT_GPT_PARAMS, s->anchor)) != GT_OK) return st;
    if (s->ranks > 1) pack_own(s, s->anchor, s->anchor_sub);
    /* Rank k of every site forms one WAN group for lanes l mod R = k: its own membership
     * keys, secure-channel run id and listening port (the site's port + k). */
    if (s->ranks > 1)
        snprintf(s->run_id, sizeof s->run_id, "%s.rank%d", p->run_id, s->rank);
    else
        snprintf(s->run_id, sizeof s->run_id, "%s", p->run_id);

    if (cfg->security.mode == GT_SECURITY_ENCRYPTED) {
        if ((st = gt_wan_keypair_load(cfg->sites[s->site].secret_key, &kp)) != GT_OK) return st;
        have_kp = 1;
    }
    gt_cmp_params_t cp = GT_CMP_PARAMS_INIT;
    if ((st = gt_cmp_codec_from_name(cfg->codec.name, &cp.codec)) != GT_OK ||
        (st = gt_cmp_codec_from_name(cfg->codec.topk_values, &cp.topk_values)) != GT_OK)
        return st;
    cp.block_size = cfg->codec.block_size;
    cp.topk_fraction = cfg->codec.topk_fraction;
    cp.error_feedback = cfg->codec.error_feedback;
    cp.zstd = cfg->codec.zstd == GT_ZSTD_ON    ? GT_CMP_ZSTD_ON
              : cfg->codec.zstd == GT_ZSTD_OFF ? GT_CMP_ZSTD_OFF
                                               : GT_CMP_ZSTD_AUTO;
    cp.zstd_level = cfg->codec.zstd_level;
    if (s->sync_dp) { /* the baseline: bf16 gradients, as a bf16 all-reduce would send */
        cp.codec = GT_CMP_BF16;
        cp.error_feedback = 0;
        cp.zstd = GT_CMP_ZSTD_OFF;
    }

    gt_wan_outer_params_t op;
    memset(&op, 0, sizeof op);
    op.site_id = s->site;
    op.n_sites = cfg->n_sites;
    op.n_params = s->n_sub;
    op.n_lanes = (uint32_t)s->n_own;
    op.codec = cp;
    op.quorum = cfg->outer.quorum;
    op.deadline_min_ms = cfg->outer.deadline_min_ms;
    op.deadline_max_ms = cfg->outer.deadline_max_ms;
    op.deadline_mad_k = cfg->outer.deadline_mad_k;
    op.clip_k = cfg->outer.clip_k;
    op.late_fold = cfg->outer.late == GT_LATE_FOLD;
    op.io.ctx = s;
    op.io.send = io_send;
    if ((st = gt_wan_outer_create(&op, &s->outer)) != GT_OK) goto out;

    gt_cmp_ctx_t *probe = NULL;
    if ((st = gt_cmp_create(&cp, &probe)) != GT_OK) goto out;
    size_t max_msg =
        64 + gt_cmp_bound(probe, s->n_sub / cfg->n_sites / s->n_own + 2 * cp.block_size + 1024);
    gt_cmp_destroy(probe);
    gt_wan_mesh_params_t mp;
    memset(&mp, 0, sizeof mp);
    mp.cfg = cfg;
    mp.site = s->site;
    mp.run_id = s->run_id;
    mp.port_offset = (uint32_t)s->rank;
    mp.keypair = have_kp ? &kp : NULL;
    mp.max_message = max_msg;
    s->part_floats = (max_msg - STATE_HDR) / sizeof(float);
    mp.start_ns = gt_time_ns();
    mp.on_message = on_message;
    mp.ctx = s;
    if ((st = gt_wan_mesh_create(&mp, &s->mesh)) != GT_OK) goto out;

    const char *eps[GT_TOPO_MAX_ENDPOINTS];
    for (uint32_t i = 0; i < cfg->membership.n_endpoints; i++)
        eps[i] = cfg->membership.endpoints[i];
    gt_wan_member_params_t mbp = GT_WAN_MEMBER_PARAMS_INIT;
    mbp.endpoints = eps;
    mbp.n_endpoints = cfg->membership.n_endpoints;
    mbp.prefix = cfg->membership.prefix;
    mbp.run_id = s->run_id;
    mbp.site = cfg->sites[s->site].name;
    mbp.address = gt_wan_mesh_address(s->mesh);
    mbp.lease_ttl_s = cfg->membership.lease_ttl_s;
    mbp.heartbeat_ms = cfg->membership.heartbeat_ms;
    if (cfg->membership.n_endpoints == 0) {
        GT_ERROR("site %s: membership.endpoints is empty; multi-site runs need etcd (`geotrain "
                 "launch` starts one and passes it on)",
                 cfg->sites[s->site].name);
        st = GT_ERR_CONFIG;
        goto out;
    }
    /* A site that comes back after a crash may find its old member key still held by the
     * lease of the process that died: wait for that lease to run out. */
    uint64_t t_reg = gt_time_ns(),
             wait_ns = (2ull * cfg->membership.lease_ttl_s + 2) * 1000000000ull;
    while ((st = gt_wan_member_create(&mbp, &s->member)) == GT_ERR_EXISTS &&
           gt_time_ns() - t_reg < wait_ns && !(p->stop && *p->stop)) {
        GT_WARN("site %s: its name is still registered (a previous run of it that died?); "
                "retrying until that lease expires",
                cfg->sites[s->site].name);
        struct timespec ts = {0, 500000000};
        nanosleep(&ts, NULL);
    }
out:
    if (have_kp) gt_wan_keypair_wipe(&kp);
    return st;
}

/* Waits until every configured site has registered (or the connect timeout passes), so that
 * round 0 starts with everyone rather than with whoever came up first. */
static gt_status_t await_sites(site_t *s)
{
    const gt_topo_config_t *cfg = s->cfg;
    uint64_t t0 = gt_time_ns();
    for (;;) {
        gt_wan_view_t live;
        gt_status_t st = gt_wan_member_list(s->member, &live);
        uint32_t want = s->p->expect_sites ? s->p->expect_sites : cfg->n_sites;
        if (st == GT_OK && live.n_members >= want) break;
        if (s->p->stop && *s->p->stop) return GT_ERR_CLOSED;
        if ((gt_time_ns() - t0) / 1000000u > cfg->wan.connect_timeout_ms) {
            GT_WARN("site %s: starting with %u of %u sites after %u ms", cfg->sites[s->site].name,
                    st == GT_OK ? live.n_members : 0, cfg->n_sites, cfg->wan.connect_timeout_ms);
            break;
        }
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
    gt_status_t st = refresh_view(s, 1);
    /* Let the connections come up before round 0's messages. */
    uint64_t t1 = gt_time_ns();
    while (st == GT_OK && (gt_time_ns() - t1) / 1000000u < cfg->wan.connect_timeout_ms) {
        gt_wan_mesh_progress(s->mesh);
        uint32_t ready = 1;
        for (uint32_t k = 0; k < s->view.n_members; k++) {
            uint32_t i;
            if (gt_topo_site_index(cfg, s->view.members[k].name, &i) == GT_OK && i != s->site)
                ready += (uint32_t)gt_wan_mesh_peer_ready(s->mesh, i);
        }
        if (ready >= s->view.n_members) break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return st;
}

/* The live peers of the current view (site indices), not us. */
static uint32_t view_peers(site_t *s, uint32_t *peers, int *self_in_p)
{
    uint32_t n = 0;
    *self_in_p = 0;
    pthread_mutex_lock(&s->lock);
    for (uint32_t k = 0; k < s->view.n_members; k++) {
        uint32_t i;
        if (gt_topo_site_index(s->cfg, s->view.members[k].name, &i) != GT_OK) continue;
        if (i == s->site)
            *self_in_p = 1;
        else
            peers[n++] = i;
    }
    pthread_mutex_unlock(&s->lock);
    return n;
}

/* Joins the run in progress (collective over the site's ranks): waits to be in the view, asks
 * a running peer which round it submits next (N), announces that this site contributes from
 * R = N + 1 on — a round no site has submitted yet, so no round in flight changes owner — then
 * fetches (θ_a, m) after round R − 1, striped across every live peer and checked against the
 * hash they all send, as soon as they have applied it. It starts from there as a site that has
 * just applied round R − 1 would: θ_s = θ_a, step R·H + τ, its data R·H + τ batches on (it does
 * not see data it would have trained on), fresh AdamW moments. If the peers have moved past
 * R − 1 meanwhile (they keep two rounds), it plans again with a later R. *start_p is the step
 * it starts at; R >= run.rounds means the run ends before it could take part (*start_p = 0). */
static gt_status_t join_run(site_t *s, uint64_t *start_p)
{
    const gt_topo_config_t *c = s->cfg;
    const char *name = c->sites[s->site].name;
    const uint64_t H = c->inner.steps, tau = c->outer.overlap_steps;
    uint64_t t0 = gt_time_ns(), R = 0;
    /* A peer needs up to two rounds to apply the round we wait for: bound the whole join by
     * the time that generously takes, and the result timeout. */
    uint64_t limit = (uint64_t)c->wan.connect_timeout_ms * 1000000ull +
                     (uint64_t)c->outer.deadline_max_ms * 4000000ull + 600000000000ull;
    uint32_t peers[GT_WAN_MAX_MEMBERS];
    int have = 0, planned = 0;
    *start_p = 0;
    if (s->sync_dp) {
        GT_ERROR("site %s: a sync-dp run cannot take a joining site (every step is a round)", name);
        return GT_ERR_INVALID;
    }
    uint64_t alone_since = 0;
    for (;;) {
        /* The ranks act on the worst of: 0 done, 1 retry, 2 plan again, 3 give up. */
        int64_t fail = 0;
        const char *why = NULL;
        int self_in = 0;
        uint32_t n = view_peers(s, peers, &self_in);
        uint64_t now = gt_time_ns();
        if (self_in && n > 0)
            alone_since = 0;
        else if (!alone_since)
            alone_since = now;
        if (s->p->stop && *s->p->stop) why = "stopped";
        if (s->wan_error) why = "lost its membership lease";
        if (now - t0 > limit) why = "timed out";
        if (alone_since && now - alone_since > (uint64_t)c->wan.connect_timeout_ms * 1000000ull)
            why = "no running site to join (the run is over, or every site is down)";
        if (why) fail = 3;
        uint64_t fv = (uint64_t)fail;
        if (s->ranks > 1) {
            gt_status_t st = gt_local_comm_allreduce(s->comm, &fv, 1, GT_COMM_U64, GT_COMM_MAX);
            if (st != GT_OK) return st;
        }
        if (fv) {
            GT_ERROR("site %s: cannot join the run: %s (after %.0f s)", name,
                     why ? why : "another rank failed", (now - t0) * 1e-9);
            if (s->p->stop && *s->p->stop) return GT_ERR_CLOSED;
            return s->wan_error ? (gt_status_t)s->wan_error : GT_ERR_TIMEOUT;
        }
        int64_t code = 1;
        if (!planned) { /* every rank comes here together (planned is agreed) */
            /* Every training peer: the one furthest ahead fixes R (the others can lag when
             * rounds close at the deadline without them), and its first-round table. */
            uint64_t next = 0, first[GT_WAN_OUTER_MAX_SITES];
            for (uint32_t k = 0; self_in && k < n; k++) {
                gt_status_t st = fetch_state(s, STATE_PROBE, &peers[k], 1);
                if (st == GT_OK && (code != 0 || s->probe_next > next)) {
                    next = s->probe_next;
                    memcpy(first, s->probe_first, sizeof first);
                    code = 0;
                }
            }
            if (code == 0) memcpy(s->probe_first, first, sizeof first);
            /* Every rank agrees on the latest R any of them found (collective). */
            uint64_t v[2] = {code == 0 ? next + 1 : 0, code == 0 ? 0 : 1};
            if (s->ranks > 1) {
                gt_status_t st = gt_local_comm_allreduce(s->comm, v, 2, GT_COMM_U64, GT_COMM_MAX);
                if (st != GT_OK) return st;
            }
            if (v[1] == 0) {
                R = v[0] > R ? v[0] : R + 1; /* a re-plan always moves on */
                if (R < 1) R = 1;
                planned = 1;
                have = 0;
                if (R >= c->run.rounds) {
                    GT_WARN("site %s: the run ends (round %llu of %u) before this site could take "
                            "part",
                            name, (unsigned long long)R, c->run.rounds);
                    return GT_OK;
                }
                pthread_mutex_lock(&s->lock);
                gt_status_t st = gt_wan_outer_start_at(s->outer, R, s->probe_first, gt_time_ns());
                pthread_mutex_unlock(&s->lock);
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
                gt_status_t st = n ? fetch_state(s, R - 1, peers, n) : GT_ERR_AGAIN;
                if (st != GT_OK && st != GT_ERR_NOMEM && n > 1) {
                    /* Striped failed (a peer does not hold R - 1: it lags, or is ahead by two
                     * rounds): the whole from one peer after another. Plan again only when
                     * every peer is past it. */
                    uint32_t gone = 0;
                    for (uint32_t k = 0; k < n && st != GT_OK; k++) {
                        gt_status_t one = fetch_state(s, R - 1, &peers[k], 1);
                        if (one == GT_OK) st = GT_OK;
                        gone += one == GT_ERR_NOT_FOUND;
                    }
                    if (st != GT_OK) st = gone == n ? GT_ERR_NOT_FOUND : GT_ERR_AGAIN;
                }
                if (st == GT_OK) {
                    have = 1;
                    memcpy(s->anchor_sub, s->fetch, s->n_sub * sizeof(float));
                    memcpy(s->mom, s->fetch + s->n_sub, s->n_sub * sizeof(float));
                }
                code = st == GT_OK ? 0 : st == GT_ERR_NOT_FOUND ? 2 : 1;
            }
        }
        uint64_t worst = (uint64_t)code;
        if (s->ranks > 1) {
            gt_status_t st = gt_local_comm_allreduce(s->comm, &worst, 1, GT_COMM_U64, GT_COMM_MAX);
            if (st != GT_OK) return st;
        }
        if (planned && worst == 0) break;
        if (worst == 2) {
            GT_WARN("site %s: the peers no longer hold the anchor after round %llu; planning again",
                    name, (unsigned long long)R - 1);
            planned = 0;
        }
        write_status(s, 0, gt_local_trainer_total_steps(s->tr), 0);
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
    /* Start as a site that has just applied round R - 1. */
    snapshot_state(s, R - 1);
    gt_status_t st = gather_lanes(s, s->anchor_sub, s->anchor);
    if (st == GT_OK) st = gt_local_trainer_scatter(s->tr, GT_GPT_PARAMS, s->anchor);
    if (st == GT_OK) st = gt_local_trainer_skip_to(s->tr, R * H + tau);
    if (st != GT_OK) return st;
    s->joined_round = R;
    s->applied_upto = R;
    log_anchor(s, R - 1, s->anchor);
    *start_p = R * H + tau;
    GT_INFO("site %s: joined at step %llu with the anchor after round %llu (%.1f s to join)", name,
            (unsigned long long)*start_p, (unsigned long long)R - 1, (gt_time_ns() - t0) * 1e-9);
    return GT_OK;
}

gt_status_t gt_local_site_run(const gt_local_site_params_t *p)
{
    site_t s;
    memset(&s, 0, sizeof s);
    s.p = p;
    s.cfg = p->cfg;
    s.state = "starting";
    s.t_start = gt_time_ns();
    s.eval_loss = NAN;
    s.snap_round[0] = s.snap_round[1] = -1;
    s.corrupt_round = p->corrupt_anchor_round;
    pthread_mutex_init(&s.lock, NULL);
    s.comm = p->comm;
    s.ranks = p->comm ? gt_local_comm_size(p->comm) : 1;
    s.rank = p->comm ? gt_local_comm_rank(p->comm) : 0;
    gt_status_t st = GT_ERR_INVALID;
    uint64_t step = 0, total = 0;
    if (!p->cfg || gt_topo_site_index(p->cfg, p->site, &s.site) != GT_OK) {
        GT_ERROR("site: '%s' is not a site of the config", p->site ? p->site : "");
        return GT_ERR_INVALID;
    }
    const gt_topo_config_t *cfg = p->cfg;
    const uint64_t H = cfg->inner.steps, tau = cfg->outer.overlap_steps;
    if ((st = gt_local_comm_agree(s.comm, setup(&s, p))) != GT_OK) goto out;
    /* A run already marked as started is joined, not started: this site comes late, or back. */
    int started = 0;
    if (s.rank == 0 && gt_wan_member_started(s.member, &started) != GT_OK) started = 0;
    if (s.ranks > 1) {
        uint64_t v = (uint64_t)started;
        if ((st = gt_local_comm_allreduce(s.comm, &v, 1, GT_COMM_U64, GT_COMM_MAX)) != GT_OK)
            goto out;
        started = v != 0;
    }
    if ((st = gt_local_comm_agree(s.comm, open_files(&s, started))) != GT_OK) goto out;
    if (started) {
        s.state = "joining";
        if ((st = gt_local_comm_agree(s.comm, start_wan_thread(&s))) != GT_OK) goto out;
        if ((st = gt_local_comm_agree(s.comm, join_run(&s, &step))) != GT_OK) goto out;
    } else {
        if ((st = gt_local_comm_agree(s.comm, await_sites(&s))) != GT_OK) goto out;
        if ((st = gt_local_comm_agree(s.comm, start_wan_thread(&s))) != GT_OK) goto out;
    }
    if (gt_wan_member_mark_started(s.member) != GT_OK)
        GT_WARN("site %s: cannot mark the run as started in etcd", cfg->sites[s.site].name);
    total = gt_local_trainer_total_steps(s.tr);
    if (started && step == 0) step = total; /* the run ends before we could take part */
    s.state = "training";
    s.t_train = gt_time_ns();
    pthread_mutex_lock(&s.lock);
    s.training = 1;
    s.next_submit = step / H;
    pthread_mutex_unlock(&s.lock);
    GT_INFO("site %s: training %llu steps in %llu rounds of %llu, overlap %llu, %u sites live",
            cfg->sites[s.site].name, (unsigned long long)(total - step),
            (unsigned long long)((total - step) / H), (unsigned long long)H,
            (unsigned long long)tau, s.view.n_members);
    int64_t pending = -1; /* the submitted round whose result is still to apply */
    uint64_t t_last = gt_time_ns(), tok_last = 0;
    while (step < total) {
        /* A stop request or a lost lease on any rank is the whole site's (one collective). */
        st = s.wan_error ? (gt_status_t)s.wan_error : p->stop && *p->stop ? GT_ERR_CLOSED : GT_OK;
        if ((st = gt_local_comm_agree(s.comm, st)) == GT_ERR_CLOSED) break;
        if (st != GT_OK) goto out;
        uint64_t t0 = gt_time_ns();
        double wait0 = s.wait_s;
        gt_local_step_stats_t ss;
        if ((st = gt_local_trainer_step(s.tr, &ss)) != GT_OK) goto out;
        /* Compute time only: sync-dp waits for the all-reduce inside the step. */
        double dt = (gt_time_ns() - t0) * 1e-9 - (s.wait_s - wait0);
        s.step_s += dt;
        step = ss.step;
        s.steps_trained++;
        s.last_loss = ss.loss;
        s.round_tokens += gt_local_trainer_tokens_per_step(s.tr);
        if (step + cfg->run.log_every > total) {
            s.loss_acc += ss.loss;
            s.loss_n++;
        }
        if (p->slow_factor > 1.0) { /* an emulated slow site: its steps take longer */
            double extra = dt * (p->slow_factor - 1.0);
            struct timespec ts = {(time_t)extra, (long)((extra - floor(extra)) * 1e9)};
            nanosleep(&ts, NULL);
            s.step_s += extra;
        }
        /* The end of a round: submit; with tau = 0 apply at once. */
        if (s.sync_dp) {
            /* every step was a round, in the gradient hook */
        } else if (step % H == 0) {
            uint64_t r = step / H - 1;
            if (pending >= 0 && (st = wait_and_apply(&s, (uint64_t)pending, step, total)) != GT_OK)
                goto out;
            if ((st = submit_round(&s, r)) != GT_OK) goto out;
            pending = (int64_t)r;
            if (tau == 0 || step == total) {
                if ((st = wait_and_apply(&s, r, step, total)) != GT_OK) goto out;
                pending = -1;
            }
        } else if (pending >= 0 && step == ((uint64_t)pending + 1) * H + tau) {
            if ((st = wait_and_apply(&s, (uint64_t)pending, step, total)) != GT_OK) goto out;
            pending = -1;
        }
        if (step % cfg->run.log_every == 0 || step == total) {
            uint64_t now = gt_time_ns();
            double tps = (double)(ss.tokens - tok_last) / ((now - t_last) * 1e-9);
            t_last = now;
            tok_last = ss.tokens;
            metrics_line(&s, &ss, tps);
        }
        if (p->kill_at_round >= 0 && s.applied_upto >= (uint64_t)p->kill_at_round &&
            s.rank == s.ranks - 1) { /* the last rank: its MPI job must go down with it */
            /* Chaos (--kill): die abruptly, as a crashed machine would. */
            write_status(&s, step, total, 1);
            GT_WARN("site %s: chaos: SIGKILL after %llu rounds", cfg->sites[s.site].name,
                    (unsigned long long)s.rounds_applied);
            raise(SIGKILL);
        }
        write_status(&s, step, total, 0);
        if (cfg->run.checkpoint_every && step % (H * cfg->run.checkpoint_every) == 0 &&
            step < total) {
            char root[2100];
            snprintf(root, sizeof root, "%s/checkpoints", s.site_dir);
            if ((st = gt_local_trainer_save(s.tr, root, 3)) != GT_OK) goto out;
        }
    }
    s.t_train_end = gt_time_ns();
    if (st == GT_OK && s.sync_dp) {
        st = gt_local_trainer_gather(s.tr, GT_GPT_PARAMS, s.anchor);
        if (st == GT_OK) log_anchor(&s, total - 1, s.anchor);
    }
    if (st == GT_OK) {
        /* The final model is the agreed anchor (sync-dp: the common parameters); a joiner that
         * came too late to take part has none. */
        int took_part = !started || s.joined_round > 0;
        st = gt_local_trainer_scatter(s.tr, GT_GPT_PARAMS, s.anchor);
        if (st == GT_OK && took_part) st = eval_anchor(&s, &s.eval_loss);
        char root[2100];
        snprintf(root, sizeof root, "%s/checkpoints", s.site_dir);
        if (st == GT_OK && took_part) st = gt_local_trainer_save(s.tr, root, 3);
        /* Let our last messages (results we own) reach the others before leaving. */
        uint64_t t0 = gt_time_ns();
        for (;;) {
            pthread_mutex_lock(&s.lock);
            size_t queued = gt_wan_mesh_pending(s.mesh);
            pthread_mutex_unlock(&s.lock);
            if (!queued || gt_time_ns() - t0 > 5000000000ull) break;
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
        s.state = "done";
    }
out:
    stop_wan_thread(&s);
    if (st != GT_OK && st != GT_ERR_CLOSED) s.state = "failed";
    if (st == GT_ERR_CLOSED) s.state = "stopped";
    /* The summary sums the ranks' WAN counters, a collective: a multi-rank site that failed
     * skips it, since its ranks may have failed in different places (the job is aborted). */
    if (s.mesh && s.outer && (s.ranks == 1 || st == GT_OK || st == GT_ERR_CLOSED)) {
        write_status(&s, step, total, 1);
        write_summary(&s, step, st);
    }
    if (s.metrics) fclose(s.metrics);
    if (s.anchors) fclose(s.anchors);
    gt_wan_member_destroy(s.member); /* deregisters: the others see us leave at once */
    gt_wan_mesh_destroy(s.mesh);
    gt_wan_outer_destroy(s.outer);
    gt_local_trainer_destroy(s.tr);
    if (s.anchor_sub != s.anchor) free(s.anchor_sub);
    free(s.theta);
    free(s.anchor);
    free(s.mom);
    free(s.snap);
    free(s.delta);
    free(s.snap_state[0]);
    free(s.snap_state[1]);
    free(s.fetch);
    free(s.packed);
    free(s.own_off);
    free(s.own_len);
    free(s.sub_count);
    free(s.sub_displ);
    pthread_mutex_destroy(&s.lock);
    return st;
}
