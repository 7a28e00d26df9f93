/* outer_step.c — the outer step over the parameter vectors (docs/design.md §1): submit, apply,
 * rebase, the hash vote's re-fetch, and the in-site all-gather of the anchor.
 *
 * Shaped to touch the vector as few times as it can, and to count every time it does
 * (`passes`, reported as param_passes_per_round: one pass = one sweep over the n floats of the
 * vector, each array it touches read and/or written once; a sweep over part of it counts its
 * fraction). A round costs, with one rank:
 *   submit  1 pass   snap ← θ_s and Δ ← θ_a − θ_s in one sweep (the engine then encodes Δ)
 *   apply   1 pass   blockwise: the outer step on θ_a and m, the copy of (θ_a, m) kept for
 *                    peers, the hash of θ_a, and the rebase θ_s ← θ_a + (θ_s − snap), each
 *                    block while it is in cache
 * plus the codec's own encode of Δ and one decode of each RESULT chunk (outer/site.c decodes on
 * arrival into the vector this file applies: no copy). With R ranks the outer step runs on the
 * rank's lanes (1/R), the all-gather fills the others' ((R-1)/R), and the rebase is one more
 * pass: 3 in all. The arithmetic is the old one, element for element — gt_kern_nesterov_update
 * (or θ_a − g) and θ_a + (θ_s − snap) — so the anchors are bit-identical to before; compiled
 * without FMA contraction (diloco/CMakeLists.txt).
 */
#include "diloco_internal.h"

#include "gt_kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#define BLOCK ((size_t)1 << 15) /* floats per fused block: the Nesterov kernel's chunk */

gt_status_t dl_layout(gt_diloco_t *d)
{
    const gt_topo_config_t *c = d->cfg;
    uint32_t L = c->wan.lanes, R = d->ranks, F = c->outer.fragments ? c->outer.fragments : 1;
    uint32_t G = gt_topo_wan_groups(c);
    if (d->sync_dp) F = 1;
    if (G == 0 || G % R != 0) { /* the loader refuses such a config */
        GT_ERROR("site %s: the sites' ranks have no common multiple of at most %d (the run's WAN "
                 "groups)",
                 d->name, GT_TOPO_MAX_GROUPS);
        return GT_ERR_CONFIG;
    }
    uint32_t NG = G / R;
    if (F > DL_MAX_FRAGMENTS || (uint64_t)F * NG > DL_MAX_ENGINES || (uint64_t)F * G > L) {
        GT_ERROR("site %s: outer.fragments = %u needs wan.lanes (%u) of at least fragments x WAN "
                 "groups (%u x %u), at most %d fragments and at most %d outer engines a rank "
                 "(fragments x groups / ranks = %u x %u)",
                 d->name, F, L, F, G, DL_MAX_FRAGMENTS, DL_MAX_ENGINES, F, NG);
        return GT_ERR_CONFIG;
    }
    d->F = F;
    d->G = G;
    d->n_grp = NG;
    d->n_eng = F * NG;
    if (L < G) {
        GT_ERROR("site %s: wan.lanes (%u) must be at least the run's WAN groups (%u, the least "
                 "common multiple of the sites' ranks): every group carries its own lanes",
                 d->name, L, G);
        return GT_ERR_CONFIG;
    }
    if (c->outer.optimizer == GT_OUTER_SPARSELOCO && !c->codec.error_feedback) {
        /* without the residual nothing carries what top-k left out, nor stands in for m */
        GT_ERROR("site %s: outer.optimizer sparseloco needs codec.error_feedback: true (its "
                 "decaying residual is what stands in for the outer momentum)",
                 d->name);
        return GT_ERR_CONFIG;
    }
    gt_topo_layout_params_t lp = GT_TOPO_LAYOUT_PARAMS_INIT;
    lp.n_elems = d->n;
    lp.n_lanes = L;
    lp.n_sites = c->n_sites;
    lp.ranks = G * F; /* a lane's "rank" mod G is its group, div G its fragment */
    lp.align = c->codec.block_size ? c->codec.block_size : 1;
    gt_status_t st = gt_topo_layout_create(&lp, &d->layout);
    if (st != GT_OK) {
        GT_ERROR("site %s: %zu parameters cannot be cut into wan.lanes = %u lanes of codec "
                 "blocks of %zu",
                 d->name, d->n, L, lp.align);
        return st;
    }
    d->grp = calloc(NG, sizeof *d->grp);
    d->own_lanes = calloc(L, sizeof *d->own_lanes);
    if (!d->grp || !d->own_lanes) return GT_ERR_NOMEM;
    /* Group g = rank + i·R is ours; its run id (membership keys, secure channel) and port
     * offset are g's at every site. */
    for (uint32_t i = 0; i < NG; i++) {
        struct dl_group *gr = &d->grp[i];
        gr->d = d;
        gr->i = i;
        gr->g = d->rank + i * R;
        if (G > 1)
            snprintf(gr->run_id, sizeof gr->run_id, "%s.rank%u", d->run_id, gr->g);
        else
            snprintf(gr->run_id, sizeof gr->run_id, "%s", d->run_id);
    }
    d->n_sub = 0;
    d->n_own = 0;
    for (uint32_t f = 0; f < F; f++) {
        d->frag_lane[f] = d->n_own;
        d->frag_off[f] = d->n_sub;
        for (uint32_t i = 0; i < NG; i++) {
            uint32_t e = f * NG + i;
            d->eng_lane[e] = d->n_own;
            d->eng_off[e] = d->n_sub;
            for (uint32_t l = 0; l < L; l++)
                if (d->layout->lanes[l].rank == d->grp[i].g + G * f) {
                    d->own_lanes[d->n_own++] = l;
                    d->n_sub += d->layout->lanes[l].count;
                }
        }
    }
    d->frag_lane[F] = d->eng_lane[d->n_eng] = d->n_own;
    d->frag_off[F] = d->eng_off[d->n_eng] = d->n_sub;
    /* θ_a and snap: laid out as x with one rank (the fused apply sweeps them with x), packed
     * as mom with several, where a rank keeps only its lanes */
    d->apos = calloc(d->n_own ? d->n_own : 1, sizeof *d->apos);
    d->owner = calloc(L, sizeof *d->owner);
    if (!d->apos || !d->owner) return GT_ERR_NOMEM;
    for (uint32_t l = 0; l < L; l++) d->owner[l] = UINT32_MAX;
    size_t packed = 0;
    for (uint32_t i = 0; i < d->n_own; i++) {
        const gt_topo_lane_t *ln = &d->layout->lanes[d->own_lanes[i]];
        d->apos[i] = R == 1 ? ln->offset : packed;
        d->owner[d->own_lanes[i]] = i;
        packed += ln->count;
    }
    d->gcounts = calloc(R, sizeof *d->gcounts);
    d->gdispls = calloc(R, sizeof *d->gdispls);
    return d->gcounts && d->gdispls ? GT_OK : GT_ERR_NOMEM;
}

uint64_t dl_frag_offset(const gt_diloco_t *d, uint32_t f)
{
    return gt_topo_fragment_offset(d->H, d->F, f);
}

/* This rank's lanes of a full vector, packed one after another, fragment after fragment (and
 * back). */
void dl_own_to_packed(const gt_diloco_t *d, const float *full, float *packed)
{
    size_t o = 0;
    for (uint32_t i = 0; i < d->n_own; i++) {
        const gt_topo_lane_t *ln = &d->layout->lanes[d->own_lanes[i]];
        memcpy(packed + o, full + ln->offset, ln->count * sizeof(float));
        o += ln->count;
    }
}

void dl_packed_to_own(const gt_diloco_t *d, const float *packed, float *full)
{
    size_t o = 0;
    for (uint32_t i = 0; i < d->n_own; i++) {
        const gt_topo_lane_t *ln = &d->layout->lanes[d->own_lanes[i]];
        memcpy(full + ln->offset, packed + o, ln->count * sizeof(float));
        o += ln->count;
    }
}

void dl_engine_to_full(const gt_diloco_t *d, uint32_t e, const float *src, float *full)
{
    size_t o = 0;
    for (uint32_t i = d->eng_lane[e]; i < d->eng_lane[e + 1]; i++) {
        const gt_topo_lane_t *ln = &d->layout->lanes[d->own_lanes[i]];
        memcpy(full + ln->offset, src + o, ln->count * sizeof(float));
        o += ln->count;
    }
}

void dl_engine_to_anchor(gt_diloco_t *d, uint32_t e, const float *src)
{
    size_t o = 0;
    for (uint32_t i = d->eng_lane[e]; i < d->eng_lane[e + 1]; i++) {
        size_t cnt = d->layout->lanes[d->own_lanes[i]].count;
        memcpy(d->anchor + d->apos[i], src + o, cnt * sizeof(float));
        o += cnt;
    }
}

/* The hash of engine e's lanes of θ_a, as if packed (what its vote compares: the same lanes at
 * every site, whatever its ranks). */
static uint64_t eng_hash(const gt_diloco_t *d, uint32_t e)
{
    XXH3_state_t h;
    XXH3_64bits_reset(&h);
    for (uint32_t i = d->eng_lane[e]; i < d->eng_lane[e + 1]; i++) {
        const gt_topo_lane_t *ln = &d->layout->lanes[d->own_lanes[i]];
        XXH3_64bits_update(&h, d->anchor + d->apos[i], ln->count * sizeof(float));
    }
    return XXH3_64bits_digest(&h);
}

/* The hash of engine 0's lanes of θ_a (with one engine: all of this rank's lanes); every
 * engine's own hash is refreshed too. */
uint64_t dl_own_hash(const gt_diloco_t *d)
{
    gt_diloco_t *w = (gt_diloco_t *)d;
    for (uint32_t e = 0; e < d->n_eng; e++) w->ehash[e] = eng_hash(d, e);
    return d->ehash[0];
}

/* Keeps (θ_a, m) of our lanes after `round` for peers that may need them (the slot of round
 * r is r mod 2), and the hash of our lanes for the next submit. */
void dl_keep_state(gt_diloco_t *d, int64_t round)
{
    int k = (int)((uint64_t)round % 2);
    pthread_mutex_lock(&d->lock);
    if (round >= 0) dl_hold_slot(d, k, (uint64_t)round);
    if (!d->hist[k]) d->hist[k] = gt_mem_alloc(&d->mem, 2 * d->n_sub * sizeof(float), 0);
    if (d->hist[k]) {
        for (uint32_t i = 0, o = 0; i < d->n_own; i++) { /* θ_a's lanes, packed */
            uint32_t cnt = (uint32_t)d->layout->lanes[d->own_lanes[i]].count;
            memcpy(d->hist[k] + o, d->anchor + d->apos[i], cnt * sizeof(float));
            o += cnt;
        }
        memcpy(d->hist[k] + d->n_sub, d->mom, d->n_sub * sizeof(float));
        for (uint32_t f = 0; f < d->F; f++) d->hist_round[f][k] = round;
    }
    pthread_mutex_unlock(&d->lock);
    d->own_hash = dl_own_hash(d);
    d->passes += 2.0 * (double)d->n_sub / (double)d->n;
}

/* The full vector `full` on every rank from each rank's lanes of it (the in-site all-gather;
 * lanes l·R .. l·R + R - 1 are contiguous and one per rank, so each window is one call). */
static gt_status_t gather_frag(gt_diloco_t *d, float *full, int frag)
{
    if (d->ranks <= 1) return GT_OK;
    uint32_t L = d->layout->n_lanes, R = d->ranks;
    gt_status_t st = GT_OK;
    for (uint32_t l0 = 0; l0 < L && st == GT_OK; l0 += R) {
        /* R divides G, so the R lanes from l0 lie in one fragment, lane l0 + k on rank k */
        if (frag >= 0 && gt_topo_lane_fragment(l0, d->G, d->F) != (uint32_t)frag) continue;
        for (uint32_t k = 0; k < R; k++) {
            const gt_topo_lane_t *ln = l0 + k < L ? &d->layout->lanes[l0 + k] : NULL;
            d->gcounts[k] = ln ? ln->count : 0;
            d->gdispls[k] = ln ? ln->offset : 0;
        }
        st = d->p.comm.allgatherv(d->p.comm.ctx, full, d->gcounts, d->gdispls);
    }
    d->passes += (double)(d->n - d->n_sub) / (double)d->n / (frag >= 0 ? d->F : 1);
    return st;
}

static gt_status_t gather_full(gt_diloco_t *d, float *full)
{
    return gather_frag(d, full, -1);
}

gt_status_t dl_gather_x(gt_diloco_t *d)
{
    return gather_full(d, d->x);
}

gt_status_t dl_anchor_to_x(gt_diloco_t *d)
{
    for (uint32_t i = 0; i < d->n_own; i++) {
        const gt_topo_lane_t *ln = &d->layout->lanes[d->own_lanes[i]];
        memcpy(d->x + ln->offset, d->anchor + d->apos[i], ln->count * sizeof(float));
    }
    return gather_full(d, d->x);
}

/* The rank that holds lane l: its group (layout "rank" mod G) mod R. */
static uint32_t lane_rank(const gt_diloco_t *d, uint32_t l)
{
    return (d->layout->lanes[l].rank % d->G) % d->ranks;
}

/* XXH3 of the whole θ_a in lane order. With several ranks no rank holds it all: the hash's
 * streaming state goes from rank to rank in lane order (an all-gather of its bytes from the
 * rank that hashed the lanes before), so the hash is the one a site of one rank computes over
 * its whole vector, whatever the site's ranks. Collective. */
gt_status_t dl_anchor_hash(gt_diloco_t *d, uint64_t *hash_p)
{
    if (d->ranks == 1) {
        *hash_p = gt_outer_hash(d->anchor, d->n);
        return GT_OK;
    }
    _Static_assert(sizeof(XXH3_state_t) % sizeof(float) == 0, "a whole number of floats");
    enum { S = sizeof(XXH3_state_t) / sizeof(float) };
    XXH3_state_t h;
    float buf[S];
    XXH3_64bits_reset(&h);
    gt_status_t st = GT_OK;
    for (uint32_t l = 0, L = d->layout->n_lanes; l < L && st == GT_OK;) {
        uint32_t k = lane_rank(d, l), l1 = l;
        for (; l1 < L && (lane_rank(d, l1) == k || !d->layout->lanes[l1].count); l1++)
            if (k == d->rank && d->owner[l1] != UINT32_MAX)
                XXH3_64bits_update(&h, d->anchor + d->apos[d->owner[l1]],
                                   d->layout->lanes[l1].count * sizeof(float));
        if (k == d->rank) memcpy(buf, &h, sizeof h);
        for (uint32_t j = 0; j < d->ranks; j++) {
            d->gcounts[j] = j == k ? S : 0;
            d->gdispls[j] = 0;
        }
        st = d->p.comm.allgatherv(d->p.comm.ctx, buf, d->gcounts, d->gdispls);
        if (k != d->rank) {
            /* the state is plain bytes but for its pointer to the (default) secret, which
             * is an address in the sender's process: ours stands in for it */
            const unsigned char *secret = h.extSecret;
            memcpy(&h, buf, sizeof h);
            h.extSecret = secret;
        }
        l = l1;
    }
    *hash_p = XXH3_64bits_digest(&h);
    return st;
}

/* Engine e's Δ = θ_a − snap, chunk by chunk as the engine encodes it (gt_outer_submit_fill):
 * packed position `off` of the engine's lanes (own_lanes[eng_lane[e] ..), in order) is found
 * from a cursor, as the engine asks for its chunks in order. θ_a does not change between a
 * submit and its apply, and snap holds θ_s at the submit, so this is the Δ of the submit
 * without a vector of it. */
struct delta_fill {
    const gt_diloco_t *d;
    uint32_t e;
    uint32_t i; /* the lane own_lanes[i] the cursor is at */
    size_t at;  /* its packed position in the engine's slice */
};

static void delta_fill(void *ctx, size_t off, size_t count, float *dst)
{
    struct delta_fill *fc = ctx;
    const gt_diloco_t *d = fc->d;
    if (off < fc->at) { /* back to the engine's first lane */
        fc->i = d->eng_lane[fc->e];
        fc->at = 0;
    }
    while (count > 0 && fc->i < d->eng_lane[fc->e + 1]) {
        const gt_topo_lane_t *ln = &d->layout->lanes[d->own_lanes[fc->i]];
        if (off >= fc->at + ln->count) {
            fc->at += ln->count;
            fc->i++;
            continue;
        }
        size_t in = off - fc->at, k = ln->count - in < count ? ln->count - in : count;
        const float *restrict a = d->anchor + d->apos[fc->i] + in, *restrict s = d->snap +
                                                                                 d->apos[fc->i] +
                                                                                 in;
        for (size_t j = 0; j < k; j++) dst[j] = a[j] - s[j];
        dst += k;
        off += k;
        count -= k;
    }
}

/* θ_s of fragment f's lanes kept for the rebase (one sweep over the fragment), and Δ = θ_a − θ_s
 * on our lanes of it submitted for its round r: computed from θ_a and that snapshot chunk by
 * chunk while the engine encodes (delta_fill), so no vector holds it. */
gt_status_t dl_submit(gt_diloco_t *d, uint32_t f, uint64_t r)
{
    gt_status_t st = dl_fence(d, "submit", r, 0); /* nothing leaves a removed site */
    if (st == GT_OK && d->p.before_read) st = d->p.before_read(d->p.hook_ctx);
    if (st != GT_OK) return st;
    if (d->F == 1 && d->ranks == 1) {
        memcpy(d->snap, d->x, d->n * sizeof(float));
    } else { /* our lanes of fragment f */
        for (uint32_t i = d->frag_lane[f]; i < d->frag_lane[f + 1]; i++) {
            const gt_topo_lane_t *ln = &d->layout->lanes[d->own_lanes[i]];
            memcpy(d->snap + d->apos[i], d->x + ln->offset, ln->count * sizeof(float));
        }
    }
    d->passes += (double)(d->frag_off[f + 1] - d->frag_off[f]) / (double)d->n;
    dl_dump_delta(d, r); /* run.dump: rounds (dump.c; one rank, fragments 1) */
    dl_dump_event(d, "submit", r, (double)d->round_tokens);
    d->fsubmit_ns[f] = gt_time_ns(); /* its result is due from now (dl_live_watch) */
    pthread_mutex_lock(&d->lock);
    if (d->cfg->outer.optimizer == GT_OUTER_SPARSELOCO) {
        /* SparseLoCo (arXiv 2508.15706): e <- beta * e before the codec adds Delta and keeps
         * what it did not send, so e = sum_j beta^(r-j) (unsent part of Delta_j) is a momentum
         * over exactly what top-k has not sent yet; no separate m. The residual is the WAN
         * engine's, written only by submit (here, under the lock) and read by checkpoints. */
        for (uint32_t i = 0; i < d->n_grp; i++) {
            gt_outer_t *outer = d->outers[f * d->n_grp + i];
            float *e = gt_outer_residual(outer, 0);
            const float beta = (float)d->cfg->outer.momentum;
            size_t len = gt_outer_len(outer);
            for (size_t k = 0; k < len; k++) e[k] *= beta;
            d->passes += (double)len / (double)d->n;
        }
    }
    /* logged before the frames can leave: a site killed in between is then in the ledger with
     * a contribution that may not have gone out (counted lost), never the other way round */
    uint64_t tok = d->F > 1 ? d->ftokens[f] : d->round_tokens;
    /* the ledger counts a fragment's tokens by its share of the vector, as results do */
    dl_log_submit(
        d, r,
        d->F > 1 ? (uint64_t)llround((double)tok * (double)(d->frag_off[f + 1] - d->frag_off[f]) /
                                     (double)d->n_sub)
                 : tok);
    /* Each of the fragment's engines (one per WAN group of ours) sends its slice, weighted by
     * the site's tokens: a group's average weighs every site by what it trained, whatever
     * share of the site's ranks carries the group. */
    for (uint32_t i = 0; i < d->n_grp && st == GT_OK; i++) {
        uint32_t e = f * d->n_grp + i;
        struct delta_fill fc = {d, e, d->eng_lane[e], 0};
        st = gt_outer_submit_fill(d->outers[e], r, delta_fill, &fc, (double)tok, d->ehash[e],
                                  gt_time_ns());
    }
    d->fnext[f] = r + 1;
    uint64_t next = d->fnext[0];
    for (uint32_t k = 1; k < d->F; k++)
        if (d->fnext[k] < next) next = d->fnext[k];
    d->next_submit = next; /* a joiner starts after the round every fragment has yet to send */
    pthread_mutex_unlock(&d->lock);
    d->ftokens[f] = 0;
    if (f == d->F - 1) d->round_tokens = 0;
    return st;
}

/* The minority-partition rule (docs/diloco.md#zombies-and-partitions). A site that has waited
 * long for a result and whose WAN reaches fewer than half of its view (itself included; at
 * exactly half, the side without the view's first site) is the cut-off side: it leaves, so the
 * majority moves to a view without it and takes over its chunks, rather than every site
 * waiting on it until the cut heals or the wait gives up. "Reaches" means the peer answered a
 * probe just now (a PROBE_REACH round trip, within wan.peer_timeout_ms): whether a connection is
 * up says little — across a cut that drops traffic, connections come up and fail again — and
 * silence says nothing, as a slower peer may be computing a long round.
 *
 * The probe goes to every member at once and is never waited on: the result wait goes on
 * checking for its result while the answers come in. (Probing one peer after another, each
 * for up to peer_timeout_ms, kept a waiting site of the majority from noticing that its result
 * had arrived for 5 s and more; its peers, not waiting for a site that had missed rounds, got
 * 16 rounds ahead meanwhile and its result was no longer kept.) Not under d->lock. */
static void reach_start(gt_diloco_t *d)
{
    pthread_mutex_lock(&d->lock);
    gt_wan_view_t v = d->grp[0].view; /* every group's view holds the same sites, give or
                                          take a heartbeat; the probe goes over group 0's mesh */
    d->reach_id++;
    d->reach_sent_ns = gt_time_ns();
    d->reach_members = 0;
    d->reach_first = UINT32_MAX;
    memset(d->reach_asked, 0, sizeof d->reach_asked);
    memset(d->reach_got, 0, sizeof d->reach_got);
    for (uint32_t k = 0; k < v.n_members; k++) {
        uint32_t i;
        if (gt_topo_site_index(d->cfg, v.members[k].name, &i) != GT_OK) continue;
        d->reach_members++;
        if (i < d->reach_first) d->reach_first = i;
        if (i == d->site) continue;
        d->reach_asked[i] = 1;
        if (dl_probe_send(d, 0, i, PROBE_REACH, d->reach_id) != GT_OK)
            d->reach_asked[i] = 0; /* unsent */
    }
    pthread_mutex_unlock(&d->lock);
}

/* The verdict of the probe reach_start sent: -1 while answers may still come (within
 * wan.peer_timeout_ms, and not every peer has answered), else 1 when this site is the cut-off
 * side, 0 when not. */
static int reach_verdict(gt_diloco_t *d, uint64_t now)
{
    pthread_mutex_lock(&d->lock);
    uint32_t asked = 0, got = 0;
    for (uint32_t i = 0; i < GT_OUTER_MAX_SITES; i++) {
        asked += d->reach_asked[i];
        got += d->reach_got[i];
    }
    uint32_t n = d->reach_members, reach = got + 1; /* itself */
    int first_reached = d->reach_first == d->site ||
                        (d->reach_first < GT_OUTER_MAX_SITES && d->reach_got[d->reach_first]);
    uint64_t epoch = d->grp[0].view.epoch;
    int pending =
        got < asked && now - d->reach_sent_ns < (uint64_t)d->cfg->wan.peer_timeout_ms * 1000000ull;
    pthread_mutex_unlock(&d->lock);
    if (pending) return -1;
    if (n > 1 && 2 * reach <= n)
        GT_WARN("site %s: %u of the %u sites of view %llu answer (itself included)", d->name, reach,
                n, (unsigned long long)epoch);
    return n > 1 && (2 * reach < n || (2 * reach == n && !first_reached));
}

/* The peers that answered the last probe, as a mask (bit i: site i; sites 0-63). */
static uint64_t reach_mask(gt_diloco_t *d)
{
    uint64_t m = 0;
    pthread_mutex_lock(&d->lock);
    for (uint32_t i = 0; i < GT_OUTER_MAX_SITES && i < 64; i++)
        if (d->reach_got[i]) m |= 1ull << i;
    pthread_mutex_unlock(&d->lock);
    return m;
}

/* ---- eviction by the majority (docs/diloco.md, "A site the majority cannot reach") ----
 *
 * The rule above lets a cut-off site remove itself; this one lets the others remove it, and
 * sooner. A site that renews its lease but that its peers cannot reach (cut off from them,
 * not from etcd; or its WAN thread stuck) keeps its chunks, and every site waits for their
 * results until the cut heals. So a site waiting for a result whose missing chunks' owner has
 * answered none of its probes for membership.evict_after_ms (default: the lease TTL — the
 * time a site that loses etcd keeps its place), while the probe's answers show this site on
 * the majority side, accuses that owner in etcd (gt_wan_member_accuse). When the accusers of
 * the same incarnation are more than half of the view (never one site of two, nor half of an
 * even split: the minority rule above settles those), the owner is evicted (gt_wan_member_evict:
 * its key deleted, its lease revoked): the view drops it, its chunks move, the senders re-send
 * their kept contributions, and the evicted site, hearing its lease is gone, leaves with exit 3 and
 * rejoins as a joiner once it reaches the others. A site one accuser cannot reach but another
 * can (one cut link: relays bridge it) is never evicted, nor is a slow one (it answers). */

/* membership.evict_after_ms in ns (0: the lease TTL). */
static uint64_t evict_after_ns(const gt_topo_config_t *c)
{
    return (c->membership.evict_after_ms ? (uint64_t)c->membership.evict_after_ms
                                         : c->membership.lease_ttl_s * 1000ull) *
           1000000ull;
}

/* The owners (bit s: site s) of round r's chunks of fragment f still missing here, over the
 * groups whose result is not taken yet (bit i of `got`: group i's is). */
static uint64_t missing_owners(gt_diloco_t *d, uint32_t f, uint64_t r, uint64_t got)
{
    uint64_t owners = 0;
    pthread_mutex_lock(&d->lock);
    for (uint32_t i = 0; i < d->n_grp; i++)
        if (!(got >> i & 1)) owners |= gt_outer_missing_owners(d->outers[f * d->n_grp + i], r);
    pthread_mutex_unlock(&d->lock);
    return owners;
}

/* Site `name`'s entry in group g's view (copied under the lock); 0 when it is not there. */
static int view_member(gt_diloco_t *d, uint32_t g, const char *name, gt_wan_member_info_t *who)
{
    int found = 0;
    pthread_mutex_lock(&d->lock);
    const gt_wan_view_t *v = &d->grp[g].view;
    for (uint32_t j = 0; j < v->n_members && !found; j++)
        if (strcmp(v->members[j].name, name) == 0) {
            *who = v->members[j];
            found = 1;
        }
    pthread_mutex_unlock(&d->lock);
    return found;
}

/* Whether the sites in `mask` (bit i: site i) are a majority of view v: more than half, or
 * (`tie`) exactly half with the view's first site among them. */
static int majority_of(const gt_diloco_t *d, const gt_wan_view_t *v, uint64_t mask, int tie)
{
    uint32_t n = 0, k = 0, first = UINT32_MAX;
    for (uint32_t j = 0; j < v->n_members; j++) {
        uint32_t i;
        if (gt_topo_site_index(d->cfg, v->members[j].name, &i) != GT_OK) continue;
        n++;
        if (i < first) first = i;
        k += i < 64 && (mask >> i & 1);
    }
    return n > 1 && (2 * k > n || (tie && 2 * k == n && first < 64 && (mask >> first & 1)));
}

/* Accuses the sites in `silent` in every WAN group this rank runs (each group has its own
 * membership keys), and evicts those whose accusers are a majority of the group's view. Not
 * under d->lock; etcd requests, each bounded by the request timeout. */
static void accuse(gt_diloco_t *d, uint64_t silent, uint64_t r, double waited_s)
{
    gt_wan_view_t v, acc;
    for (uint32_t s = 0; s < 64 && s < d->cfg->n_sites; s++) {
        if (!(silent >> s & 1) || s == d->site) continue;
        const char *name = d->cfg->sites[s].name;
        int put = (d->accused >> s & 1) != 0; /* its accusation is in etcd */
        for (uint32_t g = 0; g < d->n_grp; g++) {
            gt_wan_member_info_t entry;
            pthread_mutex_lock(&d->lock);
            v = d->grp[g].view; /* whole: the majority is counted over it */
            pthread_mutex_unlock(&d->lock);
            int64_t lease = view_member(d, g, name, &entry) ? entry.lease : 0;
            if (!lease) continue; /* out of this view already, or its lease not known */
            if (!(d->accused >> s & 1)) {
                if (gt_wan_member_accuse(d->grp[g].member, name, lease) != GT_OK)
                    continue; /* etcd away: nobody can be evicted meanwhile; the next probe
                                 tries again */
                put = 1;
            }
            if (gt_wan_member_accusers(d->grp[g].member, name, lease, &acc) != GT_OK) continue;
            uint64_t mask = 0;
            char who[256] = "";
            size_t o = 0;
            for (uint32_t j = 0; j < acc.n_members; j++) {
                uint32_t i;
                if (gt_topo_site_index(d->cfg, acc.members[j].name, &i) != GT_OK || i >= 64)
                    continue;
                mask |= 1ull << i;
                if (o < sizeof who)
                    o += (size_t)snprintf(who + o, sizeof who - o, "%s%s", o ? ", " : "",
                                          acc.members[j].name);
            }
            if (!(d->accused >> s & 1) && g == 0)
                GT_WARN("site %s: site %s has answered no probe for %.1f s while round %llu's "
                        "result waits for chunks it owns: %s accuses it of being unreachable "
                        "(accusers now: %s)",
                        d->name, name, evict_after_ns(d->cfg) * 1e-9, (unsigned long long)r,
                        d->name, who);
            /* More than half of the view: a single site never evicts another (two sites: the
             * one that cannot reach the other may be the one cut off), nor does half of it. */
            if (majority_of(d, &v, mask & ~(1ull << s), 0) &&
                gt_wan_member_evict(d->grp[g].member, name, lease) == GT_OK) {
                d->evictions++;
                /* the WAN thread moves to the view without it at once, not a heartbeat later
                 * (the others wait for the chunks that move to us: 0.4 s seen) */
                __atomic_store_n(&d->grp[g].refresh_soon, 1, __ATOMIC_RELEASE);
                GT_WARN("site %s: the majority cannot reach site %s (accusers: %s; %.1f s into "
                        "the wait for round %llu's result%s): evicted it; its chunks move to the "
                        "others, and it rejoins as a joiner once it reaches them",
                        d->name, name, who, waited_s, (unsigned long long)r,
                        waited_s > 0 ? "" : ", before it was needed");
            }
        }
        if (put) d->accused |= 1ull << s;
    }
}

/* A missing chunk's owner that is provably gone — our mesh's dial to it was refused
 * (ECONNREFUSED: its host's kernel answers for a process that died) and no connection is up —
 * is evicted by this site alone, at once, as a restarted site takes over its dead
 * predecessor's name (replace_gone): the survivors of a kill -9 need not wait for its lease to
 * run out. Only the sites that dial it can tell (a site dials the lower-indexed ones), so a
 * killed highest-indexed site still goes with its lease. A frozen or cut-off site keeps its
 * listener: never taken for gone. tried[s]: the lease of s already tried in this wait. Not
 * under d->lock. */
static void evict_refused(gt_diloco_t *d, uint64_t owners, uint64_t r, double waited_s,
                          int64_t *tried)
{
    gt_wan_member_info_t who;
    for (uint32_t s = 0; s < 64 && s < d->cfg->n_sites; s++) {
        if (!(owners >> s & 1) || s == d->site) continue;
        for (uint32_t g = 0; g < d->n_grp; g++) {
            int found = view_member(d, g, d->cfg->sites[s].name, &who);
            pthread_mutex_lock(&d->lock);
            int refused = gt_wan_mesh_peer_refused(d->grp[g].mesh, s);
            pthread_mutex_unlock(&d->lock);
            if (!found || !refused || !who.lease || (g == 0 && tried[s] == who.lease)) continue;
            if (g == 0) tried[s] = who.lease;
            if (gt_wan_member_evict(d->grp[g].member, who.name, who.lease) == GT_OK) {
                d->evictions++;
                __atomic_store_n(&d->grp[g].refresh_soon, 1, __ATOMIC_RELEASE);
                GT_WARN("site %s: site %s is gone (its address %s refuses connections; %.1f s "
                        "into round %llu's wait): evicted it at once instead of waiting for its "
                        "lease to run out",
                        d->name, who.name, who.address, waited_s, (unsigned long long)r);
            }
        }
    }
}

/* Withdraws this site's accusations of the sites in `mask` (all: ~0). */
static void withdraw(gt_diloco_t *d, uint64_t mask)
{
    for (uint32_t s = 0; s < 64 && s < d->cfg->n_sites; s++) {
        if (!((d->accused & mask) >> s & 1)) continue;
        for (uint32_t g = 0; g < d->n_grp; g++)
            if (gt_wan_member_withdraw(d->grp[g].member, d->cfg->sites[s].name) != GT_OK)
                GT_DEBUG("site %s: could not withdraw its accusation of %s (it dies with this "
                         "site's lease)",
                         d->name, d->cfg->sites[s].name);
        d->accused &= ~(1ull << s);
    }
}

/* The probe in flight, judged for eviction: the sites of `candidates` that have not answered it
 * are accused when the peers that did put this site on the majority side. 1: it accused. */
static int judge_probe(gt_diloco_t *d, uint64_t candidates, uint64_t r, double waited_s)
{
    uint64_t ans = reach_mask(d) | (d->site < 64 ? 1ull << d->site : 0);
    gt_wan_view_t v0;
    pthread_mutex_lock(&d->lock);
    v0 = d->grp[0].view;
    pthread_mutex_unlock(&d->lock);
    uint64_t silent = candidates & ~ans;
    if (!silent || !majority_of(d, &v0, ans, 1)) return 0;
    accuse(d, silent, r, waited_s);
    return 1;
}

/* ---- the liveness watch ----
 *
 * The probe above goes out once a wait has begun, and its silence is judged evict_after_ms
 * later: a whole-site cut cost each waiting site that lease of waiting and more (bench chaos:
 * 3 s of two sites a cut), although the cut-off site had been silent since the cut began. So
 * the WAN thread also asks every member of the view, once a heartbeat, a bare liveness probe
 * (dl_live_tick; its answer is a header), and notes when each last answered. The owner of a
 * missing chunk that the sites of this side have not heard from for evict_after_ms is then
 * accused as soon as its result is due — from the shortest straggler deadline after the
 * submission, during the overlap before the wait as in the wait — rather than a probe's
 * evict_after_ms after the wait began. The rule is the same (silence for evict_after_ms, this
 * site on the majority side, a majority of accusers); only the clock starts when the silence
 * does. Only with three sites or more (two never evict). */

/* Under d->lock, from the WAN thread: a liveness probe to every member of group 0's view once a
 * heartbeat; a member that is new, or a new incarnation (lease), is watched from now. */
void dl_live_tick(gt_diloco_t *d, uint64_t now)
{
    const gt_wan_view_t *v = &d->grp[0].view;
    if (d->sync_dp || v->n_members < 3 || now < d->live_next_ns) return;
    d->live_next_ns = now + (uint64_t)d->cfg->membership.heartbeat_ms * 1000000ull;
    uint64_t in_view = 0;
    for (uint32_t k = 0; k < v->n_members; k++) {
        uint32_t i;
        if (gt_topo_site_index(d->cfg, v->members[k].name, &i) != GT_OK || i == d->site ||
            i >= GT_OUTER_MAX_SITES)
            continue;
        if (i < 64) in_view |= 1ull << i;
        if (!d->live_from_ns[i] || d->live_lease[i] != v->members[k].lease) {
            d->live_from_ns[i] = now;
            d->live_lease[i] = v->members[k].lease;
            d->heard_ns[i] = 0;
        }
        if (dl_probe_send(d, 0, i, PROBE_LIVE, 0) != GT_OK) {
            /* unsent (no connection up): counts as silence, as a lost probe does */
        }
    }
    for (uint32_t i = 0; i < 64 && i < GT_OUTER_MAX_SITES; i++)
        if (!(in_view >> i & 1)) d->live_from_ns[i] = 0; /* out of the view: watched anew */
}

/* The sites the liveness watch has heard from within evict_after_ms (`heard`), and those it has
 * not heard from for that long while watching them (returned). Bit s: site s. */
static uint64_t live_silent(gt_diloco_t *d, uint64_t now, uint64_t *heard)
{
    uint64_t evict_ns = evict_after_ns(d->cfg), silent = 0;
    *heard = 0;
    pthread_mutex_lock(&d->lock);
    for (uint32_t i = 0; i < 64 && i < GT_OUTER_MAX_SITES; i++) {
        if (!d->live_from_ns[i]) continue;
        uint64_t last = d->heard_ns[i] > d->live_from_ns[i] ? d->heard_ns[i] : d->live_from_ns[i];
        if (now - last >= evict_ns)
            silent |= 1ull << i;
        else if (d->heard_ns[i])
            *heard |= 1ull << i;
    }
    pthread_mutex_unlock(&d->lock);
    return silent;
}

/* Puts the peers of peers[0..n) that the liveness watch has heard from within three heartbeats
 * (or does not watch) first, in their order, and returns how many they are — n when none is.
 * A fetch striped across peers waits for its slowest stripe: one across a cut never comes, and
 * the fetch waits its whole limit before it asks the peers one by one (seen: a joiner's rebase
 * took 4.4 s, its anchor striped across a peer it was cut off from). */
uint32_t dl_heard_first(gt_diloco_t *d, uint32_t *peers, uint32_t n)
{
    uint32_t heard[GT_WAN_MAX_MEMBERS], rest[GT_WAN_MAX_MEMBERS], h = 0, o = 0;
    uint64_t now = gt_time_ns(), fresh = 3ull * d->cfg->membership.heartbeat_ms * 1000000ull;
    if (n > GT_WAN_MAX_MEMBERS) return n;
    pthread_mutex_lock(&d->lock);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t p = peers[k];
        if (p >= GT_OUTER_MAX_SITES || !d->live_from_ns[p] ||
            (d->heard_ns[p] && now - d->heard_ns[p] < fresh))
            heard[h++] = p;
        else
            rest[o++] = p;
    }
    pthread_mutex_unlock(&d->lock);
    memcpy(peers, heard, h * sizeof *peers);
    memcpy(peers + h, rest, o * sizeof *peers);
    return h ? h : n;
}

/* Whether the liveness watch judges now (every 50 ms; the caller's loop turns far faster): the
 * owners' mask it needs is computed only then. */
static int live_judge_due(gt_diloco_t *d, uint64_t now)
{
    if (now < d->live_judge_ns) return 0;
    d->live_judge_ns = now + 50000000ull;
    return 1;
}

/* The liveness watch's judgement of the owners in `owners` of what round r still misses:
 * withdraws the accusations of sites heard from again, and accuses those not heard from for
 * evict_after_ms when the sites heard from put this site on the majority side. 1: it accused
 * (the caller asks again, once a heartbeat, whether the accusers are a majority yet). */
static int judge_live(gt_diloco_t *d, uint64_t owners, uint64_t r, double waited_s)
{
    uint64_t now = gt_time_ns(), heard = 0, self = d->site < 64 ? 1ull << d->site : 0;
    uint64_t silent = live_silent(d, now, &heard) & owners & ~self & ~d->accused;
    if (d->accused & heard) withdraw(d, d->accused & heard); /* it answers again */
    if (!silent) return 0;
    gt_wan_view_t v0;
    pthread_mutex_lock(&d->lock);
    v0 = d->grp[0].view;
    pthread_mutex_unlock(&d->lock);
    if (!majority_of(d, &v0, heard | self, 1)) return 0;
    accuse(d, silent, r, waited_s);
    return 1;
}

/* The overlap between a submission and its apply step (training thread, after each step): the
 * owners of chunks of a pending round still missing once the shortest straggler deadline has
 * passed since the submission are judged by the liveness watch. Its accusations stand until
 * the wait for that result ends (dl_watch_end). */
void dl_live_watch(gt_diloco_t *d)
{
    if (d->sync_dp || d->join_rebase >= 0) return;
    uint64_t now = gt_time_ns(), due = (uint64_t)d->cfg->outer.deadline_min_ms * 1000000ull;
    uint64_t hb = (uint64_t)d->cfg->membership.heartbeat_ms * 1000000ull;
    for (uint32_t f = 0; f < d->F; f++) {
        if (d->fpending[f] < 0 || now - d->fsubmit_ns[f] < due || !live_judge_due(d, now)) continue;
        uint64_t r = (uint64_t)d->fpending[f], owners = missing_owners(d, f, r, 0);
        if (owners && judge_live(d, owners, r, 0.0)) {
            d->live_accuse_ns = now + hb;
        } else if (owners && d->accused && now >= d->live_accuse_ns) {
            accuse(d, d->accused, r, 0.0); /* the other accusers may come later */
            d->live_accuse_ns = now + hb;
        }
    }
}

/* A joiner waiting for its peers to apply the round whose anchor it takes (dl_join_rebase)
 * waits on the run as a trainer's result wait does, so it takes part in the eviction too: it
 * probes its view, and accuses the training peers (`suspects`) that answer none of a probe for
 * membership.evict_after_ms. Seen: a whole-site cut while a site was joining left one accuser
 * of the cut-off site (a majority needs two of three), and the joiner waited 5.1 s. Call
 * dl_watch_end when the wait ends. */
void dl_watch_step(gt_diloco_t *d, struct dl_watch *w, uint64_t waited, uint64_t suspects,
                   uint64_t r)
{
    const gt_topo_config_t *c = d->cfg;
    uint64_t now = gt_time_ns(), evict_ns = evict_after_ns(c);
    if (waited < (uint64_t)c->outer.deadline_min_ms * 1000000ull) return;
    if (!w->probing) {
        reach_start(d);
        w->probing = 1;
    } else if (now - d->reach_sent_ns >= evict_ns) {
        w->probing = 0; /* judged; the next call probes again */
        uint64_t ans = reach_mask(d);
        if (d->accused & ans) withdraw(d, ans); /* it answers again */
        if (judge_probe(d, suspects & ~(d->site < 64 ? 1ull << d->site : 0), r, waited * 1e-9))
            w->next_accuse = now + (uint64_t)c->membership.heartbeat_ms * 1000000ull;
    }
    if (live_judge_due(d, now) && judge_live(d, suspects, r, waited * 1e-9))
        w->next_accuse = now + (uint64_t)c->membership.heartbeat_ms * 1000000ull;
    if (d->accused && now >= w->next_accuse) {
        accuse(d, d->accused, r, waited * 1e-9);
        w->next_accuse = now + (uint64_t)c->membership.heartbeat_ms * 1000000ull;
    }
}

void dl_watch_end(gt_diloco_t *d)
{
    if (d->accused) withdraw(d, ~0ull);
}

static gt_status_t wait_result(gt_diloco_t *d, uint32_t f, uint64_t r);

/* Drives nothing itself (the WAN thread does): waits until round r's g of every engine of
 * fragment f (one per WAN group of ours) is in d->g. Bounded: a result cannot be missing
 * longer than the straggler deadline plus the time to notice a dead site. An accusation made
 * during the wait is withdrawn at its end: accusations are of sites that hold a wait up now. */
gt_status_t dl_wait_result(gt_diloco_t *d, uint32_t f, uint64_t r)
{
    uint64_t t0 = gt_time_ns();
    gt_status_t st = wait_result(d, f, r);
    dl_watch_end(d);
    double waited = (gt_time_ns() - t0) * 1e-9;
    /* the run's last round aside: its owners wait longer for stragglers by design
     * (gt_outer_set_last_round), so its wait says nothing of the rounds before */
    if (r + 1 < d->cfg->run.rounds && waited > d->wait_max_s) {
        d->wait_max_s = waited;
        d->wait_max_round = r;
    }
    return st;
}

static gt_status_t wait_result(gt_diloco_t *d, uint32_t f, uint64_t r)
{
    const gt_topo_config_t *c = d->cfg;
    uint64_t t0 = gt_time_ns();
    uint64_t limit = (uint64_t)c->outer.deadline_max_ms * 1000000ull +
                     (uint64_t)c->membership.lease_ttl_s * 3000000000ull +
                     (uint64_t)c->wan.peer_timeout_ms * 1000000ull + 10000000000ull;
    gt_status_t st;
    /* past the straggler deadline and a lease: not a slow round any more */
    uint64_t partition_ns = (uint64_t)c->outer.deadline_max_ms * 1000000ull +
                            (uint64_t)c->membership.lease_ttl_s * 1000000000ull;
    /* the lower end of a cut link waits this much longer than `limit` (below) */
    uint64_t grace = (uint64_t)c->membership.lease_ttl_s * 1000000000ull +
                     2ull * c->membership.heartbeat_ms * 1000000ull +
                     (uint64_t)c->wan.peer_timeout_ms * 1000000ull + 5000000000ull;
    /* After a view change that moves chunks (a site left), the round gets this long again:
     * the new owners need the senders' re-sends (or a survivor's forward of the leaver's
     * results) and, for a chunk re-opened, its deadline. */
    uint64_t settle = (uint64_t)c->outer.deadline_max_ms * 1000000ull +
                      (uint64_t)c->wan.peer_timeout_ms * 1000000ull +
                      2ull * c->membership.heartbeat_ms * 1000000ull;
    /* eviction by the majority (above): silence that long, judged from the first probe sent
     * once the wait is past the shortest straggler deadline */
    uint64_t evict_ns = evict_after_ns(c);
    uint64_t probe_from = (uint64_t)c->outer.deadline_min_ms * 1000000ull;
    if (probe_from > partition_ns) probe_from = partition_ns;
    uint64_t next_probe = 0, view_ns = 0, epoch0 = 0, next_accuse = 0;
    uint64_t reached = 0, reached_ns = 0; /* the last probe's answers, and when */
    int probing = 0, waited_longer = 0, limit_passed = 0, settling = 0, owners_up = 0;
    int judged = 0;          /* the probe in flight was judged for silent owners */
    int64_t tried[64] = {0}; /* evict_refused: the lease of each site tried in this wait */
    uint64_t next_refused = 0;
    gt_diloco_state_t prev = d->state;
    d->state = GT_DILOCO_WAITING;
    uint64_t got = 0; /* bit i: group i's result taken */
    /* wait_s grows as the wait goes on: the status written meanwhile, and a wait that ends in
     * leaving (a removed site's last status is what goodput's breakdown reads), count it */
    uint64_t tick = t0;
    for (;;) {
        uint64_t t_now = gt_time_ns();
        d->wait_s += (t_now - tick) * 1e-9;
        tick = t_now;
        st = GT_OK;
        pthread_mutex_lock(&d->lock);
        for (uint32_t i = 0; i < d->n_grp && st == GT_OK; i++) {
            if (got >> i & 1) continue;
            uint32_t e = f * d->n_grp + i;
            gt_status_t one = gt_outer_result_swap(d->outers[e], r, &d->g[e]);
            if (one == GT_OK)
                got |= 1ull << i;
            else
                st = one;
        }
        int gone = 0; /* a group's result for r is no longer kept */
        for (uint32_t i = 0; i < d->n_grp && st == GT_ERR_AGAIN; i++)
            if (!(got >> i & 1) && gt_outer_result_gone(d->outers[f * d->n_grp + i], r)) gone = 1;
        uint64_t epoch = dl_view(d)->epoch;
        pthread_mutex_unlock(&d->lock);
        if (st != GT_ERR_AGAIN) break;
        if (d->p.stop && *d->p.stop) return GT_ERR_CLOSED;
        if (d->wan_error) return (gt_status_t)d->wan_error;
        if (gone) {
            GT_ERROR("site %s: the other sites are more than %u rounds ahead: round %llu's result "
                     "is no longer kept here; it leaves, and rejoins as a joiner (from their "
                     "anchor) when started again",
                     d->name, gt_outer_rounds_kept(), (unsigned long long)r);
            return GT_ERR_PEER_LOST;
        }
        uint64_t now = gt_time_ns(), waited = now - t0;
        if (epoch != epoch0) { /* the first pass, or the view changed while we wait */
            if (epoch0) view_ns = now;
            epoch0 = epoch;
        }
        /* Every owner of what is missing answered our last probe: the link at fault is not
         * ours — the owners wait on each other across a cut, and one of them leaves (the rule
         * below), moving its chunks. A site that reaches everyone then waits up to twice the
         * grace longer. Seen: the middle site of an a-c cut gave up first and left, then both
         * ends did, and the run ended with three rejoins. */
        uint64_t owners_missing = 0;
        if (waited > limit) {
            owners_missing = missing_owners(d, f, r, got);
            if (d->site < 64) owners_missing &= ~(1ull << d->site);
        }
        int owners_reached = waited > limit && reached_ns &&
                             now - reached_ns < 2ull * c->wan.peer_timeout_ms * 1000000ull &&
                             owners_missing && (owners_missing & ~reached) == 0;
        if (owners_reached && waited <= limit + 2 * grace) {
            if (!owners_up)
                GT_WARN("site %s: round %llu's result has not arrived in %.0f s, but every owner "
                        "of what is missing answers: they wait on each other (a cut between "
                        "them?); waiting up to %.0f s more",
                        d->name, (unsigned long long)r, waited * 1e-9,
                        (limit + 2 * grace - waited) * 1e-9);
            owners_up = 1;
        } else if (waited > limit && view_ns && now - view_ns < settle) {
            /* Seen: the far end of a cut link left, the view dropped it, and this site gave up
             * 50 ms later on the chunks that had just moved to itself — the survivor's forward
             * of the leaver's results was on its way. */
            if (!settling)
                GT_WARN("site %s: round %llu's result has not arrived in %.0f s, but the view "
                        "changed %.1f s ago: waiting up to %.0f s more for the chunks it moved",
                        d->name, (unsigned long long)r, waited * 1e-9, (now - view_ns) * 1e-9,
                        settle * 1e-9);
            settling = 1;
        } else if (waited > limit && waited <= limit + grace) {
            /* One link cut while both of its ends reach the rest: each end waits for chunks
             * the other owns, and were both to give up, both would leave. The end with the
             * higher index leaves first; the other waits `grace` longer, by when the view has
             * dropped the leaver and its chunks have moved to sites it reaches. */
            if (d->site < 63 && owners_missing >> (d->site + 1)) { /* above us: it leaves */
                if (!waited_longer)
                    GT_WARN("site %s: round %llu's result has not arrived in %.0f s; a site "
                            "with a higher index owns some of what is missing, and leaves first "
                            "if it is stuck too: waiting up to %.0f s more",
                            d->name, (unsigned long long)r, waited * 1e-9, grace * 1e-9);
                waited_longer = 1;
                limit_passed = 0;
            } else {
                limit_passed = 1;
            }
        } else if (waited > limit) {
            limit_passed = 1;
        }
        if (limit_passed) {
            char missing[256];
            uint32_t i = 0; /* the first group whose result is missing */
            while (i + 1 < d->n_grp && (got >> i & 1)) i++;
            pthread_mutex_lock(&d->lock);
            size_t n = gt_outer_missing(d->outers[f * d->n_grp + i], r, missing, sizeof missing);
            pthread_mutex_unlock(&d->lock);
            /* It leaves (exit 3) rather than fails: the others may well go on without it — a
             * link cut between it and a chunk's owner while both reach the rest (neither is a
             * minority) ended both ends of the link here — and, started again, it rejoins as a
             * joiner from whoever it reaches. */
            GT_ERROR("site %s: round %llu's result has not arrived in %.0f s (%zu chunks missing: "
                     "%s); giving up: it leaves, and rejoins as a joiner when started again",
                     d->name, (unsigned long long)r, waited * 1e-9, n, missing);
            return GT_ERR_PEER_LOST;
        }
        if (waited > probe_from && !probing && now >= next_probe) {
            reach_start(d);
            probing = 1;
            judged = 0;
        } else if (probing) {
            if (!judged && now - d->reach_sent_ns >= evict_ns) {
                /* The owners of what is missing that have not answered this probe. */
                judged = 1;
                if (judge_probe(d, missing_owners(d, f, r, got), r, waited * 1e-9))
                    next_accuse = now + (uint64_t)c->membership.heartbeat_ms * 1000000ull;
            }
            int cut = reach_verdict(d, now);
            if (cut >= 0) {
                probing = 0;
                next_probe = now + (evict_ns < (uint64_t)c->wan.peer_timeout_ms * 1000000ull
                                        ? evict_ns
                                        : (uint64_t)c->wan.peer_timeout_ms * 1000000ull);
                reached = reach_mask(d);
                reached_ns = now;
                if (d->accused & reached) withdraw(d, reached); /* it answers again */
            }
            if (cut > 0 && waited <= partition_ns) cut = 0; /* not a partition yet */
            if (cut > 0) {
                GT_ERROR("site %s: round %llu's result has not arrived in %.0f s and its WAN "
                         "reaches less than a majority of the view (a partition): it leaves, so "
                         "the others go on without it, and rejoins as a joiner when started "
                         "again",
                         d->name, (unsigned long long)r, waited * 1e-9);
                return GT_ERR_PEER_LOST;
            }
        }
        if ((now - d->fsubmit_ns[f] > probe_from || waited > probe_from) &&
            live_judge_due(d, now) && judge_live(d, missing_owners(d, f, r, got), r, waited * 1e-9))
            next_accuse = now + (uint64_t)c->membership.heartbeat_ms * 1000000ull;
        if (waited > probe_from && now >= next_refused) {
            next_refused = now + 50000000ull; /* every 50 ms: a redial takes 300 ms */
            evict_refused(d, missing_owners(d, f, r, got), r, waited * 1e-9, tried);
        }
        /* The other accusers may come later: look again while this site accuses. */
        if (d->accused && now >= next_accuse) {
            accuse(d, d->accused, r, waited * 1e-9);
            next_accuse = now + (uint64_t)c->membership.heartbeat_ms * 1000000ull;
        }
        dl_write_status(d, 0);
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    if (st != GT_OK) return st;
    GT_DEBUG("site %s: round %llu's result after %.2f s", d->name, (unsigned long long)r,
             (gt_time_ns() - t0) * 1e-9);
    d->state = prev;
    return GT_OK;
}

/* θ_a ← outer step(θ_a, m, g) on [a, a + n) of the anchor with [m, g) at the packed offset. */
static gt_status_t outer_update(gt_diloco_t *d, float *a, float *m, const float *g, size_t n)
{
    const gt_topo_config_t *c = d->cfg;
    if (c->outer.optimizer == GT_OUTER_NESTEROV)
        return gt_kern_nesterov_update(a, m, g, n, (float)c->outer.lr, (float)c->outer.momentum);
    if (c->outer.optimizer == GT_OUTER_SPARSELOCO) { /* m stays 0: the residual stands in */
        const float lr = (float)c->outer.lr;
        for (size_t i = 0; i < n; i++) a[i] -= lr * g[i];
        return GT_OK;
    }
    for (size_t i = 0; i < n; i++) a[i] -= g[i];
    return GT_OK;
}

/* The outer step on our lanes of fragment f, with the kept state and its engines' hashes in
 * the same sweep. */
static gt_status_t update_own(gt_diloco_t *d, uint32_t f, uint64_t r)
{
    int k = (int)(r % 2);
    pthread_mutex_lock(&d->lock);
    if (f == 0) dl_hold_slot(d, k, r); /* the round it holds may be a joiner's rebase's */
    d->hist_round[f][k] = -1;          /* being rewritten: served to nobody meanwhile */
    if (!d->hist[k]) d->hist[k] = gt_mem_alloc(&d->mem, 2 * d->n_sub * sizeof(float), 0);
    float *hist = d->hist[k];
    pthread_mutex_unlock(&d->lock);
    if (!hist) return GT_ERR_NOMEM;
    gt_status_t st = GT_OK;
    for (uint32_t e = f * d->n_grp; e < (f + 1) * d->n_grp && st == GT_OK; e++) {
        XXH3_state_t h;
        XXH3_64bits_reset(&h);
        size_t o = d->eng_off[e], o0 = o;
        const float *g = d->g[e]; /* the engine's result: g[o - o0] is packed position o */
        for (uint32_t i = d->eng_lane[e]; i < d->eng_lane[e + 1] && st == GT_OK; i++) {
            const gt_topo_lane_t *ln = &d->layout->lanes[d->own_lanes[i]];
            float *a = d->anchor + d->apos[i];
            st = outer_update(d, a, d->mom + o, g + (o - o0), ln->count);
            memcpy(hist + o, a, ln->count * sizeof(float));
            memcpy(hist + d->n_sub + o, d->mom + o, ln->count * sizeof(float));
            XXH3_64bits_update(&h, a, ln->count * sizeof(float));
            o += ln->count;
        }
        d->ehash[e] = XXH3_64bits_digest(&h);
    }
    if (f == 0) d->own_hash = d->ehash[0];
    d->passes += (double)(d->frag_off[f + 1] - d->frag_off[f]) / (double)d->n;
    pthread_mutex_lock(&d->lock);
    d->hist_round[f][k] = (int64_t)r;
    pthread_mutex_unlock(&d->lock);
    return st;
}

/* Our lanes of fragment f (every fragment: f < 0) rebased, θ_s ← θ_a + (θ_s − snap), or θ_s ←
 * θ_a after the run's last round (the final model is the anchor); then every rank's lanes of x
 * all-gathered (the replicas of a site hold the same θ_s, so each rank's lanes of it are
 * everybody's). Collective. */
gt_status_t dl_rebase_own(gt_diloco_t *d, int f, int final)
{
    uint32_t i0 = f < 0 ? 0 : d->frag_lane[f], i1 = f < 0 ? d->n_own : d->frag_lane[f + 1];
    for (uint32_t i = i0; i < i1; i++) {
        const gt_topo_lane_t *ln = &d->layout->lanes[d->own_lanes[i]];
        float *restrict x = d->x + ln->offset;
        const float *restrict a = d->anchor + d->apos[i], *restrict snap = d->snap + d->apos[i];
        if (final)
            memcpy(x, a, ln->count * sizeof(float));
        else
            for (size_t j = 0; j < ln->count; j++) x[j] = a[j] + (x[j] - snap[j]);
    }
    d->passes += (double)(f < 0 ? d->n_sub : d->frag_off[f + 1] - d->frag_off[f]) / (double)d->n;
    return gather_frag(d, d->x, f);
}

/* One rank: θ_s ← θ_a + (θ_s − snap) over the whole vector (θ_s ← θ_a after the run's last
 * round), with the hash of θ_a in the same sweep. */
static uint64_t rebase(gt_diloco_t *d, int final)
{
    float *x = d->x;
    const float *a = d->anchor, *snap = d->snap;
    XXH3_state_t h;
    XXH3_64bits_reset(&h);
    for (size_t o = 0; o < d->n; o += BLOCK) {
        size_t cnt = d->n - o < BLOCK ? d->n - o : BLOCK;
        if (final)
            memcpy(x + o, a + o, cnt * sizeof(float));
        else
            for (size_t i = o; i < o + cnt; i++) x[i] = a[i] + (x[i] - snap[i]);
        XXH3_64bits_update(&h, a + o, cnt * sizeof(float));
    }
    d->passes += 1.0;
    return XXH3_64bits_digest(&h);
}

/* One rank: the outer step, the kept state, the hash and the rebase, block by block. */
static gt_status_t apply_fused(gt_diloco_t *d, uint64_t r, int final)
{
    int k = (int)(r % 2);
    pthread_mutex_lock(&d->lock);
    dl_hold_slot(d, k, r); /* the round it holds may be a joiner's rebase's */
    d->hist_round[0][k] = -1;
    if (!d->hist[k]) d->hist[k] = gt_mem_alloc(&d->mem, 2 * d->n * sizeof(float), 0);
    float *hist = d->hist[k];
    pthread_mutex_unlock(&d->lock);
    if (!hist) return GT_ERR_NOMEM;
    float *x = d->x, *a = d->anchor, *m = d->mom;
    const float *snap = d->snap;
    XXH3_state_t h;
    XXH3_64bits_reset(&h);
    gt_status_t st = GT_OK;
    size_t bl = BLOCK * (size_t)(gt_kern_get_threads() > 0 ? gt_kern_get_threads() : 1);
    for (size_t o = 0; o < d->n && st == GT_OK; o += bl) {
        size_t cnt = d->n - o < bl ? d->n - o : bl;
        st = outer_update(d, a + o, m + o, d->g[0] + o, cnt);
        memcpy(hist + o, a + o, cnt * sizeof(float));
        memcpy(hist + d->n + o, m + o, cnt * sizeof(float));
        XXH3_64bits_update(&h, a + o, cnt * sizeof(float));
        if (final)
            memcpy(x + o, a + o, cnt * sizeof(float));
        else
            for (size_t i = o; i < o + cnt; i++) x[i] = a[i] + (x[i] - snap[i]);
    }
    d->own_hash = d->ehash[0] = XXH3_64bits_digest(&h);
    d->passes += 1.0;
    pthread_mutex_lock(&d->lock);
    d->hist_round[0][k] = (int64_t)r;
    pthread_mutex_unlock(&d->lock);
    return st;
}

/* Where the packed position p of our lanes lies in θ_a. */
static size_t anchor_index(const gt_diloco_t *d, size_t p)
{
    for (uint32_t i = 0; i < d->n_own; i++) {
        const gt_topo_lane_t *ln = &d->layout->lanes[d->own_lanes[i]];
        if (p < ln->count) return d->apos[i] + p;
        p -= ln->count;
    }
    return 0;
}

/* The tokens of fragment f's round-r result: each group's (every site's tokens that its
 * average weighed) by the group's share of the fragment's lanes — exactly the common count
 * when every group closed with the same contributions (integers, products exact). The groups
 * may differ (one closed a chunk with a contribution another's owner never had), so a site of
 * several ranks, each holding its own groups, sums over all of them (a rank's part in fixed
 * point, 2^-16 of a token: exact for the integer counts), and reports what a site of one rank
 * holding every group reports. Collective over the ranks. */
static gt_status_t result_tokens(gt_diloco_t *d, uint32_t f, uint64_t r, double *out)
{
    uint32_t e0 = f * d->n_grp, e1 = e0 + d->n_grp;
    double tl = 0;
    pthread_mutex_lock(&d->lock);
    for (uint32_t e = e0; e < e1; e++)
        tl += gt_outer_result_tokens(d->outers[e], r) * (double)(d->eng_off[e + 1] - d->eng_off[e]);
    pthread_mutex_unlock(&d->lock);
    double cnt = (double)(d->frag_off[f + 1] - d->frag_off[f]), all = (double)d->n_sub;
    if (d->ranks > 1) {
        uint64_t v[3] = {(uint64_t)llround(tl * 65536.0), (uint64_t)cnt, (uint64_t)d->n_sub};
        gt_status_t st = dl_allreduce(d, v, 3, GT_DILOCO_OP_SUM);
        if (st != GT_OK) return st;
        tl = (double)v[0] / 65536.0;
        cnt = (double)v[1];
        all = (double)v[2];
    }
    double tokens = cnt > 0 ? tl / cnt : 0.0;
    if (d->F > 1) { /* the fragment's tokens count by its share of the vector */
        d->tok_acc += tokens * cnt / all;
        tokens = d->tok_acc;
    }
    *out = tokens;
    return GT_OK;
}

/* Waits for fragment f's round r's g on our lanes, applies the outer step to our part of the
 * anchor, repairs it if the hash vote says so, rebuilds the full anchor from every rank's
 * lanes and rebases θ_s onto it. Collective over the site's ranks. With fragments, only
 * fragment f's lanes; the round counts as applied (anchors.jsonl, the full anchor's hash) when
 * its last fragment is: every fragment then holds round r and none r + 1 yet (τ < H/F). */
gt_status_t dl_apply(gt_diloco_t *d, uint32_t f, uint64_t r, int final)
{
    uint32_t e0 = f * d->n_grp, e1 = e0 + d->n_grp; /* the fragment's engines, one a group */
    gt_status_t st = dl_wait_result(d, f, r);
    /* The wait outlasted a lease — or this process was stopped inside it (SIGSTOP): the others
     * may have removed this site and redone its chunks of round r without it, so the result it
     * holds may not be theirs. A heartbeat made now says whether it is still a member before it
     * applies anything (as gt_diloco_step does after a pause); the ranks decide together. */
    int away = st == GT_OK && !d->sync_dp &&
               gt_time_ns() - d->t_last > (uint64_t)d->cfg->membership.lease_ttl_s * 1000000000ull;
    gt_status_t fst = dl_fence(d, "apply", r, away);
    if (fst != GT_OK) return fst;
    /* The caller's vector behind hooks (another device, another dtype, a shard) was last read
     * at the submit: pull it again, with the τ steps trained since, or the rebase would throw
     * them away. At the submit's own step (τ = 0, the run's last) it was just read. Every rank
     * calls it (a hook may be collective); its error counts after the agreement below. */
    gt_status_t hst = GT_OK;
    if (d->p.before_read && d->tau > 0 && !final) hst = d->p.before_read(d->p.hook_ctx);
    if (st == GT_OK) st = hst;
    double tokens = 0;
    int verdict = 0;
    if (st == GT_OK) {   /* the exchange time, for exchange_s_median in the summary */
        double ex = NAN; /* the slowest group's */
        pthread_mutex_lock(&d->lock);
        for (uint32_t e = e0; e < e1; e++) {
            double one = gt_outer_exchange_s(d->outers[e], r);
            if (isfinite(one) && !(ex >= one)) ex = one;
        }
        pthread_mutex_unlock(&d->lock);
        if (d->exch_n == d->exch_cap) {
            size_t cap = d->exch_cap ? 2 * d->exch_cap : 64;
            double *q = realloc(d->exch, cap * sizeof *q);
            if (q) {
                d->exch = q;
                d->exch_cap = cap;
            }
        }
        if (isfinite(ex) && d->exch_n < d->exch_cap) d->exch[d->exch_n++] = ex;
    }
    uint64_t bad = 0; /* bit i: group i's lanes disagreed with its majority */
    if (st == GT_OK && r > 0) {
        verdict = 1;
        pthread_mutex_lock(&d->lock);
        for (uint32_t e = e0; e < e1; e++) {
            int v = gt_outer_hash_verdict(d->outers[e], r - 1);
            if (v < 0) bad |= 1ull << (e - e0);
            if (v < verdict) verdict = v;
        }
        pthread_mutex_unlock(&d->lock);
        if (verdict == 1) d->confirmed_round = (int64_t)r - 1;
        if (verdict == -2) {
            /* No majority to repair from (outer/site.c judge_hash): applying more rounds on
             * either anchor would carry the divergence on. The run stops here, with the
             * checkpoints before it intact; nothing of round r is applied. */
            GT_ERROR("site %s: the anchors after round %llu differ between the live sites and "
                     "none has a majority: it stops before applying round %llu (resume the run "
                     "from its last checkpoint)",
                     d->name, (unsigned long long)r - 1, (unsigned long long)r);
            st = GT_ERR_CORRUPT;
        }
    }
    if (st == GT_OK) dl_dump_apply_pre(d, r); /* run.dump: rounds (dump.c) */
    /* an injected fault (faults.c): one bit of the anchor flipped after this round */
    int chaos = dl_fault_corrupts(d, r) && d->rank == 0 && f == 0;
    uint64_t hash = 0;
    int fused = st == GT_OK && d->ranks == 1 && d->n_eng == 1 && verdict >= 0 && !chaos;
    if (fused) {
        st = apply_fused(d, r, final);
        hash = d->own_hash;
    } else if (d->F > 1) {
        if (st == GT_OK) st = update_own(d, f, r);
        if (st == GT_OK && chaos) {
            /* Chaos (--corrupt-anchor): one bit of fragment 0's part of the anchor. */
            size_t at = anchor_index(d, (d->frag_off[0] + d->frag_off[1]) / 2);
            uint32_t bits;
            memcpy(&bits, &d->anchor[at], 4);
            bits ^= 1u << 20;
            memcpy(&d->anchor[at], &bits, 4);
            for (uint32_t e = e0; e < e1; e++) d->ehash[e] = eng_hash(d, e);
            GT_WARN("site %s: chaos: flipped a bit of the anchor (fragment 0) after round %llu",
                    d->name, (unsigned long long)r);
        }
        if (st == GT_OK && verdict < 0) st = dl_refetch(d, f, r, bad);
        if ((st = dl_agree(d, st)) != GT_OK) return st;
        /* after the run's last round the final model is the whole anchor, every fragment */
        if ((st = dl_rebase_own(d, final ? -1 : (int)f, final)) != GT_OK) return st;
        if (f == d->F - 1 && (st = dl_anchor_hash(d, &hash)) != GT_OK) return st;
    } else {
        if (st == GT_OK) st = update_own(d, 0, r);
        if (st == GT_OK && chaos) {
            /* Chaos (--corrupt-anchor): silent data corruption of one bit of the anchor. */
            size_t at = anchor_index(d, d->n_sub / 2);
            uint32_t bits;
            memcpy(&bits, &d->anchor[at], 4);
            bits ^= 1u << 20;
            memcpy(&d->anchor[at], &bits, 4);
            dl_keep_state(d, (int64_t)r);
            GT_WARN("site %s: chaos: flipped a bit of the anchor after round %llu", d->name,
                    (unsigned long long)r);
        }
        if (st == GT_OK && verdict < 0) st = dl_refetch(d, 0, r, bad);
        if ((st = dl_agree(d, st)) != GT_OK) return st;
        if (d->ranks == 1) {
            hash = rebase(d, final);
        } else {
            if ((st = dl_rebase_own(d, -1, final)) != GT_OK) return st;
            if ((st = dl_anchor_hash(d, &hash)) != GT_OK) return st;
        }
    }
    /* The results are in θ_a and m now: their buffers go (the next round's result is decoded
     * into a fresh one as it arrives), rather than stay as the engine's spares, so a round holds
     * one decoded result at a time, not three. */
    for (uint32_t e = e0; e < e1; e++) {
        gt_mem_free(&d->mem, d->g[e]);
        d->g[e] = NULL;
    }
    if (fused && (st = dl_agree(d, st)) != GT_OK) return st;
    if (st != GT_OK) return st;
    if ((st = result_tokens(d, f, r, &tokens)) != GT_OK) return st;
    if (d->p.after_write && (st = d->p.after_write(d->p.hook_ctx)) != GT_OK) return st;
    if (f != d->F - 1) return GT_OK; /* the round is applied with its last fragment */
    d->tok_acc = 0;
    d->rounds_applied++;
    d->applied_upto = r + 1;
    dl_dump_apply_post(d, r, tokens);
    dl_log_anchor(d, r, hash, tokens);
    return GT_OK;
}

/* sync-dp: the step's gradients averaged across the sites. Each rank carries its lanes of the
 * gradient; the parameters' hash on our lanes goes with it for the anchor check. */
gt_status_t dl_sync_grads(gt_diloco_t *d, uint64_t step, float *grads, uint64_t tokens)
{
    gt_status_t st = d->p.before_read ? d->p.before_read(d->p.hook_ctx) : GT_OK;
    if (st != GT_OK) return st;
    if (!d->delta) d->delta = gt_mem_alloc(&d->mem, d->n_sub * sizeof(float), 0); /* sync-dp's */
    if (!d->delta) return GT_ERR_NOMEM;
    dl_own_to_packed(d, grads, d->delta);
    uint64_t hash[DL_MAX_ENGINES]; /* each engine's (group's) lanes of the parameters */
    for (uint32_t e = 0; e < d->n_eng; e++) {
        XXH3_state_t h;
        XXH3_64bits_reset(&h);
        for (uint32_t i = d->eng_lane[e]; i < d->eng_lane[e + 1]; i++) {
            const gt_topo_lane_t *ln = &d->layout->lanes[d->own_lanes[i]];
            XXH3_64bits_update(&h, d->x + ln->offset, ln->count * sizeof(float));
        }
        hash[e] = XXH3_64bits_digest(&h);
    }
    pthread_mutex_lock(&d->lock);
    double prev_tokens = step > 0 ? gt_outer_result_tokens(d->outers[0], step - 1) : 0.0;
    pthread_mutex_unlock(&d->lock);
    if (step > 0) dl_log_anchor(d, step - 1, gt_outer_hash(d->x, d->n), prev_tokens);
    pthread_mutex_lock(&d->lock);
    dl_log_submit(d, step, tokens); /* before the frames can leave, as in dl_submit */
    for (uint32_t e = 0; e < d->n_eng && st == GT_OK; e++)
        st = gt_outer_submit(d->outers[e], step, d->delta + d->eng_off[e], (double)tokens, hash[e],
                             gt_time_ns());
    pthread_mutex_unlock(&d->lock);
    if (st == GT_OK) st = dl_wait_result(d, 0, step);
    if ((st = dl_agree(d, st)) != GT_OK) return st;
    d->rounds_applied++;
    for (uint32_t e = 0; e < d->n_eng; e++) dl_engine_to_full(d, e, d->g[e], grads);
    return gather_full(d, grads);
}
