/* outer_step.c — the outer step over the parameter vectors (docs/design.md §1): submit, apply,
 * rebase, the hash vote's re-fetch, the in-site all-gather of θ_s and the anchor's hash. The
 * wait for a round's result before its apply is liveness.c's.
 *
 * Shaped to touch the vector as few times as it can, and to count every time it does
 * (`passes`, reported as param_passes_per_round: one pass = one sweep over the n floats of the
 * vector, each array it touches read and/or written once; a sweep over part of it counts its
 * fraction). A round costs, with one rank:
 *   submit  1 pass   snap ← θ_s on the training thread; Δ = θ_a − snap is computed chunk by
 *                    chunk as the engine encodes it, on the encoder thread (encode_job), while
 *                    the training thread trains on
 *   apply   1 pass   blockwise: the outer step on θ_a and m, the copy of (θ_a, m) kept for
 *                    peers, the hash of θ_a, and the rebase θ_s ← θ_a + (θ_s − snap), each
 *                    block while it is in cache
 * plus the codec's own encode of Δ and one decode of each RESULT chunk (outer/site.c decodes on
 * arrival into the vector this file applies: no copy). With R ranks a rank keeps θ_a and snap
 * for its lanes only: the outer step and the rebase run on its lanes (1/R each) and the
 * all-gather of θ_s fills the others' ((R-1)/R). The arithmetic is the old one, element for element
 * — gt_kern_nesterov_update (or θ_a − g) and θ_a + (θ_s − snap) — so the anchors are bit-identical
 * to before; compiled without FMA contraction (diloco/CMakeLists.txt).
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

/* The encoder's job: Δ = θ_a − snapshot of fragment f's lanes encoded by each of its engines
 * (one per WAN group of ours), chunk by chunk (delta_fill: no vector holds Δ), without d->lock —
 * the WAN thread goes on delivering and aggregating meanwhile, and the training thread training
 * —, then posted under it. A site removed meanwhile posts nothing (what a removed site would
 * send, the fence keeps back). */
static gt_status_t encode_job(gt_diloco_t *d, uint32_t f, uint64_t r, double tok,
                              const uint64_t *hash)
{
    gt_status_t st = GT_OK;
    if (d->cfg->outer.optimizer == GT_OUTER_SPARSELOCO) {
        /* SparseLoCo (arXiv 2508.15706): e <- beta * e before the codec adds Delta and keeps
         * what it did not send, so e = sum_j beta^(r-j) (unsent part of Delta_j) is a momentum
         * over exactly what top-k has not sent yet; no separate m. The residual is the engine's,
         * written only by the encode (here) and read by checkpoints, which wait for it. */
        for (uint32_t i = 0; i < d->n_grp; i++) {
            gt_outer_t *outer = d->outers[f * d->n_grp + i];
            float *e = gt_outer_residual(outer, 0);
            const float beta = (float)d->cfg->outer.momentum;
            size_t len = gt_outer_len(outer);
            for (size_t k = 0; k < len; k++) e[k] *= beta;
            d->passes += (double)len / (double)d->n;
        }
    }
    for (uint32_t i = 0; i < d->n_grp && st == GT_OK; i++) {
        uint32_t e = f * d->n_grp + i;
        struct delta_fill fc = {d, e, d->eng_lane[e], 0};
        st = gt_outer_encode(d->outers[e], r, delta_fill, &fc, tok, hash[e]);
    }
    if (st != GT_OK || d->wan_error) return st;
    pthread_mutex_lock(&d->lock);
    /* Each of the fragment's engines sends its slice, weighted by the site's tokens: a group's
     * average weighs every site by what it trained, whatever share of the site's ranks
     * carries the group. */
    for (uint32_t i = 0; i < d->n_grp && st == GT_OK; i++)
        st = gt_outer_post(d->outers[f * d->n_grp + i], r, gt_time_ns());
    d->fnext[f] = r + 1;
    uint64_t next = d->fnext[0];
    for (uint32_t k = 1; k < d->F; k++)
        if (d->fnext[k] < next) next = d->fnext[k];
    d->next_submit = next; /* a joiner starts after the round every fragment has yet to send */
    pthread_mutex_unlock(&d->lock);
    return st;
}

static gt_status_t update_own(gt_diloco_t *d, uint32_t f, uint64_t r, int publish);
static gt_status_t apply_fused(gt_diloco_t *d, uint64_t r, int rebase, int final);

/* The encoder thread's second job: round r's outer step on θ_a and m (our lanes), its kept
 * state for joiners and θ_a's hash, in one sweep — the apply's without the rebase. The kept
 * state is not served (its round stays unpublished) until the apply has passed its fence: a
 * site removed meanwhile never hands out an anchor the others may not hold. */
static gt_status_t pre_apply_job(gt_diloco_t *d, uint64_t r)
{
    gt_status_t st =
        d->ranks == 1 && d->n_eng == 1 ? apply_fused(d, r, 0, 0) : update_own(d, 0, r, 0);
    if (st == GT_OK)
        d->pre_done = (int64_t)r; /* read by the training thread after dl_encode_wait */
    return st;
}

void dl_pre_apply(gt_diloco_t *d, uint64_t r)
{
    if (d->pre_taken == (int64_t)r || d->F != 1 || d->sync_dp || !d->enc_running ||
        d->cfg->run.dump == GT_DUMP_ROUNDS || dl_fault_corrupts(d, r) || d->wan_error)
        return;
    pthread_mutex_lock(&d->enc_mu);
    int busy = d->enc_busy;
    pthread_mutex_unlock(&d->enc_mu);
    if (busy) return; /* the submit's encode is still on it (it reads θ_a): a later step */
    /* every engine's result (one a WAN group of this rank) whole, or none taken */
    pthread_mutex_lock(&d->lock);
    int whole = 1, verdict = 1;
    for (uint32_t e = 0; e < d->n_eng; e++) whole &= gt_outer_result_whole(d->outers[e], r);
    gt_status_t st = GT_OK;
    for (uint32_t e = 0; whole && e < d->n_eng && st == GT_OK; e++) {
        st = dl_take_result(d, e, r);
        int v = r > 0 ? gt_outer_hash_verdict(d->outers[e], r - 1) : 1;
        if (v < verdict) verdict = v;
    }
    pthread_mutex_unlock(&d->lock);
    if (!whole) return;
    /* taken (a failed decode, past the engine's checks, is the apply's error) */
    d->pre_taken = (int64_t)r;
    d->pre_status = st;
    if (st != GT_OK) return;
    /* A hash vote that disagrees (a repair) or is not settled is the apply's to handle, with
     * the outer step then as before. */
    if (verdict != 1 && r > 0) return;
    pthread_mutex_lock(&d->enc_mu);
    d->enc_outer = 1;
    d->enc_r = r;
    d->enc_busy = 1;
    pthread_cond_broadcast(&d->enc_cv);
    pthread_mutex_unlock(&d->enc_mu);
}

static void *enc_main(void *arg)
{
    gt_diloco_t *d = arg;
    pthread_mutex_lock(&d->enc_mu);
    for (;;) {
        while (!d->enc_busy && !d->enc_stop) pthread_cond_wait(&d->enc_cv, &d->enc_mu);
        if (!d->enc_busy) break; /* stopped, nothing left to do */
        uint32_t f = d->enc_f;
        uint64_t r = d->enc_r, hash[DL_MAX_ENGINES];
        double tok = d->enc_tok;
        int outer = d->enc_outer;
        memcpy(hash, d->enc_hash, sizeof hash);
        pthread_mutex_unlock(&d->enc_mu);
        gt_status_t st = outer ? pre_apply_job(d, r) : encode_job(d, f, r, tok, hash);
        pthread_mutex_lock(&d->enc_mu);
        if (d->enc_status == GT_OK) d->enc_status = st;
        d->enc_busy = 0;
        pthread_cond_broadcast(&d->enc_cv);
    }
    pthread_mutex_unlock(&d->enc_mu);
    return NULL;
}

gt_status_t dl_encode_wait(gt_diloco_t *d)
{
    if (!d->enc_running) return GT_OK;
    pthread_mutex_lock(&d->enc_mu);
    if (d->enc_busy) {
        uint64_t t0 = gt_time_ns();
        while (d->enc_busy) pthread_cond_wait(&d->enc_cv, &d->enc_mu);
        d->enc_wait_s += (gt_time_ns() - t0) * 1e-9;
    }
    gt_status_t st = d->enc_status;
    d->enc_status = GT_OK;
    pthread_mutex_unlock(&d->enc_mu);
    return st;
}

void dl_encode_stop(gt_diloco_t *d)
{
    if (!d->enc_running) return;
    pthread_mutex_lock(&d->enc_mu);
    d->enc_stop = 1;
    pthread_cond_broadcast(&d->enc_cv);
    pthread_mutex_unlock(&d->enc_mu);
    pthread_join(d->enc_thread, NULL);
    d->enc_running = 0;
}

/* θ_s of fragment f's lanes kept for the rebase (one sweep over the fragment) on the training
 * thread; Δ = θ_a − θ_s on our lanes of it, submitted for its round r, encoded and sent by the
 * encoder thread (encode_job) while the training thread goes on. */
gt_status_t dl_submit(gt_diloco_t *d, uint32_t f, uint64_t r)
{
    /* the last submit's frames are out (or failed: the ranks stop together) */
    gt_status_t st = dl_agree(d, dl_encode_wait(d));
    if (st == GT_OK) st = dl_fence(d, "submit", r, 0); /* nothing leaves a removed site */
    if (st == GT_OK && d->p.before_read) st = d->p.before_read(d->p.hook_ctx);
    if (st != GT_OK) return st;
    if (!d->enc_running) {
        d->enc_stop = d->enc_busy = 0;
        if (pthread_create(&d->enc_thread, NULL, enc_main, d) != 0) {
            GT_ERROR("site %s: cannot start the encoder thread", d->name);
            return GT_ERR_INTERNAL;
        }
        d->enc_running = 1;
    }
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
    /* logged before the frames can leave: a site killed in between is then in the ledger with
     * a contribution that may not have gone out (counted lost), never the other way round */
    uint64_t tok = d->F > 1 ? d->ftokens[f] : d->round_tokens;
    /* the ledger counts a fragment's tokens by its share of the vector, as results do */
    dl_log_submit(
        d, r,
        d->F > 1 ? (uint64_t)llround((double)tok * (double)(d->frag_off[f + 1] - d->frag_off[f]) /
                                     (double)d->n_sub)
                 : tok);
    pthread_mutex_lock(&d->enc_mu);
    d->enc_outer = 0;
    d->enc_f = f;
    d->enc_r = r;
    d->enc_tok = (double)tok;
    memcpy(d->enc_hash, d->ehash, sizeof d->enc_hash);
    d->enc_busy = 1;
    pthread_cond_broadcast(&d->enc_cv);
    pthread_mutex_unlock(&d->enc_mu);
    d->ftokens[f] = 0;
    if (f == d->F - 1) d->round_tokens = 0;
    return GT_OK;
}

gt_status_t dl_take_result(gt_diloco_t *d, uint32_t e, uint64_t r)
{
    if (d->sync_dp) return gt_outer_result_swap(d->outers[e], r, &d->g[e]);
    gt_status_t st = gt_outer_result_hold(d->outers[e], r);
    if (st == GT_OK) {
        d->held[e] = (int64_t)r;
        if (d->gbuf_e == (int)e) d->gbuf_e = -1; /* what gbuf holds is another round's */
    }
    return st;
}

void dl_release_results(gt_diloco_t *d, uint32_t e0, uint32_t e1)
{
    pthread_mutex_lock(&d->lock);
    for (uint32_t e = e0; e < e1; e++) {
        if (d->held[e] >= 0) gt_outer_result_release(d->outers[e], (uint64_t)d->held[e]);
        d->held[e] = -1;
        if (d->gbuf_e == (int)e) d->gbuf_e = -1;
    }
    pthread_mutex_unlock(&d->lock);
}

const float *dl_g_at(gt_diloco_t *d, uint32_t e, size_t pos, size_t *avail, gt_status_t *st)
{
    if (d->sync_dp) { /* a decoded vector */
        *avail = d->eng_off[e + 1] - d->eng_off[e] - pos;
        return d->g[e] + pos;
    }
    if (d->held[e] < 0) {
        *st = GT_ERR_INTERNAL;
        return NULL;
    }
    uint64_t r = (uint64_t)d->held[e];
    if (d->gbuf_e != (int)e || d->gbuf_r != r || pos < d->gbuf_lo || pos >= d->gbuf_hi) {
        const gt_outer_t *o = d->outers[e];
        size_t nc = gt_outer_chunk_count(o), c = 0, off = 0, cnt = 0;
        for (; c < nc; c++) {
            gt_outer_chunk_span(o, c, &off, &cnt);
            if (pos >= off && pos - off < cnt) break;
        }
        d->gbuf_e = -1;
        if (c == nc) {
            *st = GT_ERR_INTERNAL;
            return NULL;
        }
        if (!d->gbuf) d->gbuf = gt_mem_alloc(&d->mem, d->gbuf_floats * sizeof(float), 0);
        if (!d->gbuf || cnt > d->gbuf_floats) {
            *st = d->gbuf ? GT_ERR_INTERNAL : GT_ERR_NOMEM;
            return NULL;
        }
        if ((*st = gt_outer_result_chunk(o, r, c, d->gcmp, d->gbuf)) != GT_OK) {
            GT_ERROR("site %s: round %llu's result chunk %zu no longer decodes: %s", d->name,
                     (unsigned long long)r, c, gt_status_str(*st));
            return NULL;
        }
        d->gbuf_e = (int)e;
        d->gbuf_r = r;
        d->gbuf_lo = off;
        d->gbuf_hi = off + cnt;
    }
    *avail = d->gbuf_hi - pos;
    return d->gbuf + (pos - d->gbuf_lo);
}

gt_status_t dl_g_vector(gt_diloco_t *d, uint32_t e, float *out)
{
    gt_status_t st = GT_OK;
    size_t n = d->eng_off[e + 1] - d->eng_off[e];
    for (size_t p = 0, avail = 0; p < n; p += avail) {
        const float *g = dl_g_at(d, e, p, &avail, &st);
        if (!g) return st;
        if (avail > n - p) avail = n - p;
        memcpy(out + p, g, avail * sizeof(float));
    }
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
 * the same sweep; the kept state is served from then on when `publish` (else the apply
 * publishes it, once past its fence: dl_pre_apply). */
static gt_status_t update_own(gt_diloco_t *d, uint32_t f, uint64_t r, int publish)
{
    float *prev = dl_sweep_begin(d, f, r);
    if (!prev) return GT_ERR_NOMEM;
    gt_status_t st = GT_OK;
    for (uint32_t e = f * d->n_grp; e < (f + 1) * d->n_grp && st == GT_OK; e++) {
        XXH3_state_t h;
        XXH3_64bits_reset(&h);
        size_t o = d->eng_off[e], o0 = o; /* packed position o is the result's o - o0 */
        for (uint32_t i = d->eng_lane[e]; i < d->eng_lane[e + 1] && st == GT_OK; i++) {
            const gt_topo_lane_t *ln = &d->layout->lanes[d->own_lanes[i]];
            float *a = d->anchor + d->apos[i];
            memcpy(prev + o, a, ln->count * sizeof(float)); /* the round before, kept */
            memcpy(prev + d->n_sub + o, d->mom + o, ln->count * sizeof(float));
            for (size_t j = 0, avail = 0; j < ln->count && st == GT_OK; j += avail) {
                const float *g = dl_g_at(d, e, o - o0 + j, &avail, &st); /* chunk by chunk */
                if (!g) break;
                if (avail > ln->count - j) avail = ln->count - j;
                st = outer_update(d, a + j, d->mom + o + j, g, avail);
            }
            XXH3_64bits_update(&h, a, ln->count * sizeof(float));
            o += ln->count;
        }
        d->ehash[e] = XXH3_64bits_digest(&h);
    }
    if (f == 0) d->own_hash = d->ehash[0];
    d->passes += (double)(d->frag_off[f + 1] - d->frag_off[f]) / (double)d->n;
    dl_sweep_end(d, f, r, publish && st == GT_OK);
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

/* One rank: the outer step, the kept state, the hash and (`rebase`) the rebase, block by
 * block; the kept state is served from then on when rebasing (else the apply publishes it once
 * past its fence: pre_apply_job). */
static gt_status_t apply_fused(gt_diloco_t *d, uint64_t r, int rebase, int final)
{
    float *prev = dl_sweep_begin(d, 0, r);
    if (!prev) return GT_ERR_NOMEM;
    float *x = d->x, *a = d->anchor, *m = d->mom;
    const float *snap = d->snap;
    XXH3_state_t h;
    XXH3_64bits_reset(&h);
    gt_status_t st = GT_OK;
    size_t bl = BLOCK * (size_t)(gt_kern_get_threads() > 0 ? gt_kern_get_threads() : 1);
    for (size_t o = 0, cnt = 0; o < d->n && st == GT_OK; o += cnt) {
        const float *g = dl_g_at(d, 0, o, &cnt, &st); /* the result, chunk by chunk */
        if (!g) break;
        if (cnt > bl) cnt = bl;
        if (cnt > d->n - o) cnt = d->n - o;
        memcpy(prev + o, a + o, cnt * sizeof(float)); /* the round before, kept */
        memcpy(prev + d->n + o, m + o, cnt * sizeof(float));
        st = outer_update(d, a + o, m + o, g, cnt);
        XXH3_64bits_update(&h, a + o, cnt * sizeof(float));
        if (!rebase) continue;
        if (final)
            memcpy(x + o, a + o, cnt * sizeof(float));
        else
            for (size_t i = o; i < o + cnt; i++) x[i] = a[i] + (x[i] - snap[i]);
    }
    d->own_hash = d->ehash[0] = XXH3_64bits_digest(&h);
    d->passes += 1.0;
    dl_sweep_end(d, 0, r, rebase && st == GT_OK);
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
    /* θ_a changes below: the encode has read it (the ranks stop together on its error) */
    gt_status_t est = dl_agree(d, dl_encode_wait(d));
    if (est != GT_OK) return est;
    uint32_t e0 = f * d->n_grp, e1 = e0 + d->n_grp; /* the fragment's engines, one a group */
    /* taken already when its outer step ran early (dl_pre_apply) */
    gt_status_t st = d->pre_taken == (int64_t)r ? d->pre_status : dl_wait_result(d, f, r);
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
    /* its outer step ran early (pre_apply_job): the rebase below is all that is left */
    int early = st == GT_OK && d->pre_done == (int64_t)r;
    int fused = st == GT_OK && d->ranks == 1 && d->n_eng == 1 && verdict >= 0 && !chaos && !early;
    if (fused) {
        st = apply_fused(d, r, 1, final);
        hash = d->own_hash;
    } else if (d->F > 1) {
        if (st == GT_OK) st = update_own(d, f, r, !chaos);
        if (st == GT_OK && chaos) {
            /* Chaos (--corrupt-anchor): one bit of fragment 0's part of the anchor. */
            size_t at = anchor_index(d, (d->frag_off[0] + d->frag_off[1]) / 2);
            uint32_t bits;
            memcpy(&bits, &d->anchor[at], 4);
            bits ^= 1u << 20;
            memcpy(&d->anchor[at], &bits, 4);
            for (uint32_t e = e0; e < e1; e++) d->ehash[e] = eng_hash(d, e);
            dl_publish(d, (int)f, (int64_t)r); /* served as it is now, as real corruption is */
            GT_WARN("site %s: chaos: flipped a bit of the anchor (fragment 0) after round %llu",
                    d->name, (unsigned long long)r);
        }
        if (st == GT_OK && verdict < 0) st = dl_refetch(d, f, r, bad);
        if ((st = dl_agree(d, st)) != GT_OK) return st;
        /* after the run's last round the final model is the whole anchor, every fragment */
        if ((st = dl_rebase_own(d, final ? -1 : (int)f, final)) != GT_OK) return st;
        if (f == d->F - 1 && (st = dl_anchor_hash(d, &hash)) != GT_OK) return st;
    } else {
        if (early)
            d->pre_applies++; /* its θ_a and m, served from now on (below) */
        else if (st == GT_OK)
            st = update_own(d, 0, r, 0);
        if (st == GT_OK && chaos) {
            /* Chaos (--corrupt-anchor): silent data corruption of one bit of the anchor. */
            size_t at = anchor_index(d, d->n_sub / 2);
            uint32_t bits;
            memcpy(&bits, &d->anchor[at], 4);
            bits ^= 1u << 20;
            memcpy(&d->anchor[at], &bits, 4);
            d->own_hash = dl_own_hash(d);
            GT_WARN("site %s: chaos: flipped a bit of the anchor after round %llu", d->name,
                    (unsigned long long)r);
        }
        if (st == GT_OK) dl_publish(d, 0, (int64_t)r); /* flipped or not, as real corruption */
        if (st == GT_OK && verdict < 0) st = dl_refetch(d, 0, r, bad);
        if ((st = dl_agree(d, st)) != GT_OK) return st;
        if (d->ranks == 1) {
            hash = rebase(d, final);
        } else {
            if ((st = dl_rebase_own(d, -1, final)) != GT_OK) return st;
            if ((st = dl_anchor_hash(d, &hash)) != GT_OK) return st;
        }
    }
    /* The results are in θ_a and m now: their frames are the engines' again (relays) */
    dl_release_results(d, e0, e1);
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
