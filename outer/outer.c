/* outer.c — the outer-round engine's life and its doors: create/destroy, submit, the dispatch
 * of delivered messages, the helpers every role shares (who takes part in a round, who owns a
 * chunk, sending), and the accessors. See gt_outer.h for the protocol.
 *
 * The engine is sans-IO: it sends through the io callback it was given and is fed messages
 * with gt_outer_deliver and the time with every call, so the same code runs over the mesh and
 * in deterministic in-process tests. What an owner does with a contribution is owner.c, what
 * every site does with a result is site.c, views and joins are views.c, the byte layout of the
 * payloads is wire.c, and the rules are policy.c.
 *
 * Passes over the vector: a submit encodes every chunk (the NaN/Inf check runs on each chunk
 * just before its encode, while it is in cache) and only then sends, so a bad vector sends
 * nothing; a RESULT chunk is decoded once, on arrival (which also validates it), straight into
 * the round's result vector, which gt_outer_result_swap hands to the caller without a copy.
 * The outer optimizer and the rebase are not here: diloco/ applies them.
 */
#include "outer_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

uint64_t gt_outer_hash(const float *x, size_t n)
{
    return XXH3_64bits(x, n * sizeof *x);
}

const gt_topo_chunk_t *outer_chunk_at(const gt_outer_t *o, uint32_t lane, uint32_t j)
{
    const gt_topo_lane_t *l = &o->layout->lanes[lane];
    return j < l->n_chunks ? &o->layout->chunks[l->first_chunk + j] : NULL;
}

/* Lane and in-lane index of a global chunk index. */
static void chunk_coords(const gt_outer_t *o, size_t c, uint32_t *lane_p, uint32_t *j_p)
{
    uint32_t l = 0;
    while (l + 1 < o->layout->n_lanes && o->layout->lanes[l + 1].first_chunk <= c) l++;
    *lane_p = l;
    *j_p = (uint32_t)(c - o->layout->lanes[l].first_chunk);
}

/* Site s takes part in round r: it is in our view (or announced its join to us) and its first
 * round is r or earlier. */
int outer_active(const gt_outer_t *o, uint32_t s, uint64_t r)
{
    return (o->live[s] || o->joined[s]) && o->first[s] != FIRST_UNKNOWN && o->first[s] <= r;
}

/* Sites that receive results: the view, and joiners that announced before the view has them. */
int outer_receiver(const gt_outer_t *o, uint32_t s)
{
    return o->live[s] || o->joined[s];
}

uint32_t outer_n_active(const gt_outer_t *o, uint64_t r)
{
    uint32_t n = 0;
    for (uint32_t s = 0; s < o->p.n_sites; s++) n += (uint32_t)outer_active(o, s, r);
    return n;
}

/* The owner of chunk c in round r: its preferred site, else the next site active for r. A
 * joiner takes its chunks over from its first round on, so a round already in flight when it
 * announces keeps the owner its contributors sent to. */
uint32_t outer_owner_of(const gt_outer_t *o, size_t c, uint64_t r)
{
    uint64_t act = 0, live = 0;
    for (uint32_t s = 0; s < o->p.n_sites; s++) {
        act |= (uint64_t)(outer_active(o, s, r) != 0) << s;
        live |= (uint64_t)(o->live[s] != 0) << s;
    }
    return gt_outer_policy_owner(o->layout->chunks[c].owner, o->p.n_sites, act, live);
}

uint32_t gt_outer_owner(const gt_outer_t *o, uint32_t lane, uint32_t chunk)
{
    return gt_outer_owner_at(o, lane, chunk, UINT64_MAX - 1);
}

uint32_t gt_outer_owner_at(const gt_outer_t *o, uint32_t lane, uint32_t chunk, uint64_t round)
{
    const gt_topo_chunk_t *ch = outer_chunk_at(o, lane, chunk);
    return ch ? outer_owner_of(o, (size_t)(ch - o->layout->chunks), round) : UINT32_MAX;
}

gt_status_t gt_outer_create(const gt_outer_params_t *p, gt_outer_t **outer_p)
{
    gt_status_t st = GT_OK;
    if (!p || p->n_sites == 0 || p->n_sites > GT_OUTER_MAX_SITES || p->site_id >= p->n_sites ||
        p->n_params == 0 || p->n_lanes == 0 || !p->io.send || p->quorum <= 0 || p->quorum > 1) {
        GT_ERROR("outer: invalid parameters");
        return GT_ERR_INVALID;
    }
    uint32_t ranks = p->ranks ? p->ranks : 1;
    if (p->rank >= ranks || ranks > p->n_lanes) {
        GT_ERROR("outer: rank %u of %u ranks with %u lanes (every rank needs a lane)", p->rank,
                 ranks, p->n_lanes);
        return GT_ERR_INVALID;
    }
    gt_outer_t *o = calloc(1, sizeof *o);
    if (!o) return GT_ERR_NOMEM;
    o->p = *p;
    o->last_round = UINT64_MAX;
    /* The one lane/chunk layout (topology/layout.c) over the whole vector; this engine works
     * on its rank's share, packed. */
    gt_topo_layout_t *full = NULL;
    gt_topo_layout_params_t lp = GT_TOPO_LAYOUT_PARAMS_INIT;
    lp.n_elems = p->n_params;
    lp.n_lanes = p->n_lanes;
    lp.n_sites = p->n_sites;
    lp.ranks = ranks;
    lp.align = p->codec.block_size ? p->codec.block_size : 1;
    lp.shares = p->shares;
    GT_CHECK_GOTO(gt_topo_layout_create(&lp, &full), st, fail);
    st = gt_topo_layout_rank(full, p->rank, &o->layout);
    gt_topo_layout_destroy(full);
    if (st != GT_OK) goto fail;
    o->n = o->layout->n_elems;
    GT_CHECK_GOTO(gt_cmp_create(&p->codec, &o->codec), st, fail);
    size_t nc = o->layout->n_chunks;
    for (size_t c = 0; c < nc; c++)
        if (o->layout->chunks[c].count > o->max_chunk) o->max_chunk = o->layout->chunks[c].count;
    o->mem = p->mem ? p->mem : &o->own_mem;
    o->residual = gt_mem_alloc(o->mem, o->n * sizeof(float), 1);
    o->result_residual = gt_mem_alloc(o->mem, o->n * sizeof(float), 1);
    o->closed_upto = malloc(nc * sizeof *o->closed_upto);
    o->handover_ns = calloc(nc ? nc : 1, sizeof *o->handover_ns);
    o->handover_upto = calloc(nc ? nc : 1, sizeof *o->handover_upto);
    o->closed_due = calloc(nc, sizeof *o->closed_due);
    o->final_from = calloc(nc, sizeof *o->final_from);
    o->final_closed = calloc(nc, sizeof *o->final_closed);
    o->took = calloc(nc * RESULT_SLOTS, sizeof *o->took);
    o->scratch_cap =
        RESULT_PRE + GT_OUTER_MAX_SITES * RESULT_FOLD_BYTES + gt_cmp_bound(o->codec, o->max_chunk);
    o->scratch = malloc(o->scratch_cap);
    o->xbuf = gt_mem_alloc(o->mem, o->max_chunk * sizeof(float), 0);
    o->acc = gt_mem_alloc(o->mem, (o->max_chunk ? o->max_chunk : 1) * sizeof(double), 0);
    GT_CHECK_GOTO(gt_cmp_create(&p->codec, &o->enc_codec), st, fail);
    o->enc_xbuf = gt_mem_alloc(o->mem, o->max_chunk * sizeof(float), 0);
    o->stage_frame = calloc(nc ? nc : 1, sizeof *o->stage_frame);
    o->stage_len = calloc(nc ? nc : 1, sizeof *o->stage_len);
    GT_REQUIRE_GOTO(o->residual && o->result_residual && o->closed_upto && o->handover_ns &&
                        o->handover_upto && o->closed_due && o->final_from && o->final_closed &&
                        o->took && o->scratch && o->xbuf && o->acc && o->enc_xbuf &&
                        o->stage_frame && o->stage_len,
                    st, GT_ERR_NOMEM, fail, "outer: out of memory");
    for (size_t c = 0; c < nc; c++) o->closed_upto[c] = -1;
    for (size_t i = 0; i < nc * RESULT_SLOTS; i++) o->took[i].round = UINT64_MAX;
    for (int i = 0; i < GT_OUTER_SLOTS; i++) {
        send_slot_t *s = &o->send[i];
        s->frame = calloc(nc, sizeof *s->frame);
        s->len = calloc(nc, sizeof *s->len);
        s->sent_to = calloc(nc, sizeof *s->sent_to);
        GT_REQUIRE_GOTO(s->frame && s->len && s->sent_to, st, GT_ERR_NOMEM, fail,
                        "outer: out of memory");
    }
    for (int i = 0; i < RESULT_SLOTS; i++) {
        result_slot_t *r = &o->res[i];
        r->have = calloc(nc, 1);
        r->frame = calloc(nc, sizeof *r->frame);
        r->len = calloc(nc, sizeof *r->len);
        r->dec = calloc(nc, 1);
        r->served = calloc(nc, sizeof *r->served);
        GT_REQUIRE_GOTO(r->have && r->frame && r->len && r->dec && r->served, st, GT_ERR_NOMEM,
                        fail, "outer: out of memory");
    }
    /* Until the first view, every configured site counts as live. */
    for (uint32_t s = 0; s < p->n_sites; s++) o->live[s] = 1;
    o->n_live = p->n_sites;
    /* Every configured site starts at round 0 unless it announces a later first round. */
    memset(o->first, 0, sizeof o->first);
    *outer_p = o;
    return GT_OK;
fail:
    gt_outer_destroy(o);
    return st;
}

void gt_outer_destroy(gt_outer_t *o)
{
    if (!o) return;
    size_t nc = o->layout ? o->layout->n_chunks : 0;
    for (int i = 0; i < GT_OUTER_SLOTS; i++) {
        for (size_t c = 0; c < nc && o->send[i].frame; c++)
            gt_mem_free(o->mem, o->send[i].frame[c]);
        free(o->send[i].frame);
        free(o->send[i].len);
        free(o->send[i].sent_to);
    }
    for (int i = 0; i < RESULT_SLOTS; i++) {
        for (size_t c = 0; c < nc && o->res[i].frame; c++) gt_mem_free(o->mem, o->res[i].frame[c]);
        free(o->res[i].have);
        free(o->res[i].frame);
        free(o->res[i].len);
        free(o->res[i].dec);
        free(o->res[i].served);
        gt_mem_free(o->mem, o->res[i].g);
    }
    for (int i = 0; i < DECODED_MAX; i++) gt_mem_free(o->mem, o->spare[i]);
    for (size_t i = 0; i < o->n_aggs; i++) outer_free_agg(o, &o->aggs[i]);
    free(o->aggs);
    gt_mem_free(o->mem, o->residual);
    gt_mem_free(o->mem, o->result_residual);
    free(o->closed_upto);
    free(o->handover_ns);
    free(o->handover_upto);
    free(o->closed_due);
    free(o->final_from);
    free(o->final_closed);
    free(o->took);
    free(o->scratch);
    gt_mem_free(o->mem, o->xbuf);
    gt_mem_free(o->mem, o->acc);
    for (size_t c = 0; c < nc && o->stage_frame; c++) gt_mem_free(o->mem, o->stage_frame[c]);
    free(o->stage_frame);
    free(o->stage_len);
    gt_mem_free(o->mem, o->enc_xbuf);
    gt_cmp_destroy(o->enc_codec);
    gt_cmp_destroy(o->codec);
    gt_topo_layout_destroy(o->layout);
    free(o);
}

static gt_status_t deliver_local(gt_outer_t *o, const gt_wan_msg_t *msg, const void *buf,
                                 size_t len, uint64_t now_ns);

void outer_send_to(gt_outer_t *o, uint32_t dst, const gt_wan_msg_t *msg, const void *buf,
                   size_t len, uint64_t now_ns)
{
    if (msg->type == GT_WAN_MSG_DELTA && outer_wire_magic(buf, len) == DELTA_MAGIC &&
        dst < GT_OUTER_MAX_SITES)
        o->sent_n[dst]++;
    if (dst == o->p.site_id) {
        deliver_local(o, msg, buf, len, now_ns);
        return;
    }
    o->st.bytes_sent += len;
    gt_status_t st = o->p.io.send(o->p.io.ctx, dst, msg, buf, len);
    if (st != GT_OK)
        GT_WARN("outer: sending round %llu to site %u failed (%s); a view change will re-send",
                (unsigned long long)msg->round, dst, gt_status_str(st));
}

gt_wan_msg_t outer_make_msg(const gt_outer_t *o, uint8_t type, uint64_t round, size_t c)
{
    gt_wan_msg_t m;
    uint32_t lane, j;
    chunk_coords(o, c, &lane, &j);
    memset(&m, 0, sizeof m);
    m.type = type;
    m.sender = o->p.site_id;
    m.view_epoch = o->epoch;
    m.round = round;
    m.lane = lane;
    m.chunk = j;
    return m;
}

/* Encodes every chunk of this site's Δ for `round` into the staging frames (the NaN/Inf check
 * just before each encode, on data in cache): delta is the whole vector, or NULL and
 * fill(fill_ctx, ...) gives each chunk into enc_xbuf. Touches only what no other entry point
 * uses — the residual, enc_codec, enc_xbuf and the staging frames — so it may run on a thread
 * of its own beside gt_outer_deliver / gt_outer_progress (docs/api.md#threads). */
static gt_status_t encode(gt_outer_t *o, uint64_t round, const float *delta, gt_outer_fill_fn fill,
                          void *fill_ctx, double weight, uint64_t anchor_hash)
{
    if (!(weight > 0) || !isfinite(weight)) {
        GT_ERROR("outer: round %llu has weight %g; it must be positive", (unsigned long long)round,
                 weight);
        return GT_ERR_INVALID;
    }
    size_t nc = o->layout->n_chunks;
    int ef = o->p.codec.error_feedback;
    o->staged = 0;
    for (size_t c = 0; c < nc; c++) {
        const gt_topo_chunk_t *ch = &o->layout->chunks[c];
        const float *x = delta ? delta + ch->offset : o->enc_xbuf;
        if (!delta) fill(fill_ctx, ch->offset, ch->count, o->enc_xbuf);
        for (size_t i = 0; i < ch->count; i++) {
            if (!isfinite(x[i])) {
                GT_ERROR("outer: round %llu: this site's pseudo-gradient has a NaN or Inf at %zu; "
                         "not sending it",
                         (unsigned long long)round, ch->offset + i);
                return GT_ERR_INVALID;
            }
        }
        size_t cap = DELTA_PRE + gt_cmp_bound(o->enc_codec, ch->count), flen = 0;
        uint8_t *buf = gt_mem_realloc(o->mem, o->stage_frame[c], cap);
        if (!buf) return GT_ERR_NOMEM;
        o->stage_frame[c] = buf;
        gt_status_t st =
            gt_cmp_encode(o->enc_codec, x, ch->count, ef ? o->residual + ch->offset : NULL,
                          buf + DELTA_PRE, cap - DELTA_PRE, &flen);
        if (st != GT_OK) return st;
        outer_delta_pack(buf, &(outer_delta_t){weight, anchor_hash, o->p.n_sites, 0});
        o->stage_len[c] = DELTA_PRE + flen;
    }
    o->stage_round = round;
    o->stage_weight = weight;
    o->stage_hash = anchor_hash;
    o->staged = 1;
    return GT_OK;
}

/* The staged frames of `round` become its send slot's and go to the chunks' owners. */
static gt_status_t post(gt_outer_t *o, uint64_t round, uint64_t now_ns)
{
    send_slot_t *s = &o->send[round % GT_OUTER_SLOTS];
    if (!o->staged || o->stage_round != round) {
        GT_ERROR("outer: round %llu posted, but it was not encoded", (unsigned long long)round);
        return GT_ERR_INVALID;
    }
    if (round < o->first[o->p.site_id]) {
        GT_ERROR("outer: round %llu submitted, but this site joined at round %llu",
                 (unsigned long long)round, (unsigned long long)o->first[o->p.site_id]);
        return GT_ERR_INVALID;
    }
    if (s->used && !s->applied && s->round != round) {
        GT_ERROR("outer: round %llu submitted while round %llu is still in flight",
                 (unsigned long long)round, (unsigned long long)s->round);
        return GT_ERR_INVALID;
    }
    o->staged = 0;
    size_t nc = o->layout->n_chunks;
    double weight = o->stage_weight;
    uint64_t anchor_hash = o->stage_hash;
    /* The staged frames swap in; the slot's old ones (freed at its round's apply, so normally
     * none) are the next encode's buffers. */
    for (size_t c = 0; c < nc; c++) {
        uint8_t *f = s->frame[c];
        s->frame[c] = o->stage_frame[c];
        s->len[c] = o->stage_len[c];
        o->stage_frame[c] = f;
        o->stage_len[c] = 0;
    }
    o->submitted = 1;
    s->used = 1;
    s->applied = 0;
    s->round = round;
    s->weight = weight;
    s->anchor_hash = anchor_hash;
    /* The result slot remembers our hash so the owners' majority can be compared. */
    result_slot_t *r = outer_result_slot(o, round, 1);
    if (r) {
        outer_result_t res;
        r->own_hash = anchor_hash;
        r->own_hash_known = round > 0;
        r->submit_ns = now_ns;
        /* A site behind (its contributions folded late) may hold the round's result already:
         * judged only on arrival, its anchor was never checked (seen: a rejoiner that diverged
         * for 28 rounds with 1 hash check). */
        for (size_t c = 0; c < o->layout->n_chunks && r->verdict == 0; c++)
            if (r->have[c] && r->frame[c] && outer_result_unpack(r->frame[c], r->len[c], &res))
                outer_judge_hash(o, r, &res);
    }
    /* The peers' chunks first, then our own: folding our own contribution can close a chunk
     * and queue its RESULT on the links, and a RESULT queued ahead of a DELTA holds the DELTA
     * (and the owner's RESULT that waits for it) behind it on a bandwidth-bound link: in a
     * synchronous 2-site run at 3 Mbit/s the round took 40% longer (test_plan_validate). */
    for (int own = 0; own < 2; own++)
        for (size_t c = 0; c < nc; c++) {
            uint32_t to = outer_owner_of(o, c, round);
            if ((to == o->p.site_id) != own) continue;
            s->sent_to[c] = to;
            gt_wan_msg_t m = outer_make_msg(o, GT_WAN_MSG_DELTA, round, c);
            o->st.deltas_sent++;
            outer_send_contribution(o, to, &m, s->frame[c], s->len[c], now_ns);
            GT_DEBUG("outer: submitted round %llu chunk %zu to site %u", (unsigned long long)round,
                     c, to);
        }
    return GT_OK;
}

gt_status_t gt_outer_submit(gt_outer_t *o, uint64_t round, const float *delta, double weight,
                            uint64_t anchor_hash, uint64_t now_ns)
{
    gt_status_t st = encode(o, round, delta, NULL, NULL, weight, anchor_hash);
    return st == GT_OK ? post(o, round, now_ns) : st;
}

gt_status_t gt_outer_submit_fill(gt_outer_t *o, uint64_t round, gt_outer_fill_fn fill,
                                 void *fill_ctx, double weight, uint64_t anchor_hash,
                                 uint64_t now_ns)
{
    if (!fill) return GT_ERR_INVALID;
    gt_status_t st = encode(o, round, NULL, fill, fill_ctx, weight, anchor_hash);
    return st == GT_OK ? post(o, round, now_ns) : st;
}

gt_status_t gt_outer_encode(gt_outer_t *o, uint64_t round, gt_outer_fill_fn fill, void *fill_ctx,
                            double weight, uint64_t anchor_hash)
{
    if (!o || !fill) return GT_ERR_INVALID;
    return encode(o, round, NULL, fill, fill_ctx, weight, anchor_hash);
}

gt_status_t gt_outer_post(gt_outer_t *o, uint64_t round, uint64_t now_ns)
{
    if (!o) return GT_ERR_INVALID;
    return post(o, round, now_ns);
}

static gt_status_t deliver_local(gt_outer_t *o, const gt_wan_msg_t *msg, const void *buf,
                                 size_t len, uint64_t now_ns)
{
    if (msg->lane >= o->layout->n_lanes || msg->sender >= o->p.n_sites)
        return outer_bad(o, msg, "lane or sender out of range");
    /* Each kind by its own message type; the payload's magic must agree (wire.c checks it). */
    if (msg->type == GT_WAN_MSG_JOIN) return outer_on_join(o, msg, buf, len, now_ns);
    if (msg->type == GT_WAN_MSG_FIN) return outer_on_fin(o, msg, buf, len);
    const gt_topo_chunk_t *ch = outer_chunk_at(o, msg->lane, msg->chunk);
    if (!ch) return outer_bad(o, msg, "chunk out of range");
    size_t c = (size_t)(ch - o->layout->chunks);
    if (msg->type == GT_WAN_MSG_PULL) return outer_on_pull(o, msg, buf, len, c, now_ns);
    if (msg->type == GT_WAN_MSG_DELTA) return outer_on_delta(o, msg, buf, len, c, now_ns);
    if (msg->type == GT_WAN_MSG_RESULT) return outer_on_result(o, msg, buf, len, now_ns, c);
    return outer_bad(o, msg, "unexpected message type");
}

gt_status_t gt_outer_deliver(gt_outer_t *o, const gt_wan_msg_t *msg, const void *buf, size_t len,
                             uint64_t now_ns)
{
    o->st.bytes_received += len;
    return deliver_local(o, msg, buf, len, now_ns);
}

gt_status_t outer_bad(gt_outer_t *o, const gt_wan_msg_t *m, const char *why)
{
    o->st.bad_messages++;
    GT_WARN("outer: rejected a message from site %u (round %llu lane %u chunk %u): %s", m->sender,
            (unsigned long long)m->round, m->lane, m->chunk, why);
    return GT_ERR_CORRUPT;
}

void gt_outer_stats(const gt_outer_t *o, gt_outer_stats_t *stats_p)
{
    *stats_p = o->st;
    stats_p->open = 0;
    for (size_t i = 0; i < o->n_aggs; i++)
        if (o->aggs[i].used && !o->aggs[i].closed) stats_p->open += o->aggs[i].n;
    stats_p->unreceived = o->unreceived_before;
    for (uint32_t s = 0; s < o->p.n_sites && s < GT_OUTER_MAX_SITES; s++)
        if (o->fin[s] && o->sent_n[s] > o->fin_n[s])
            stats_p->unreceived += o->sent_n[s] - o->fin_n[s];
}

gt_status_t gt_outer_ledger(const gt_outer_t *o, uint32_t site, gt_outer_ledger_t *l)
{
    if (!o || !l || site >= o->p.n_sites || site >= GT_OUTER_MAX_SITES) return GT_ERR_INVALID;
    l->sent = o->sent_n[site];
    l->took = o->took_n[site];
    l->fin = o->fin[site];
    l->fin_taken = o->fin_n[site];
    return GT_OK;
}

uint32_t gt_outer_final_missing(const gt_outer_t *o)
{
    uint32_t n = 0;
    if (o->last_round == UINT64_MAX) return 0;
    for (size_t c = 0; c < o->layout->n_chunks; c++) {
        if (!o->final_closed[c]) continue;
        for (uint32_t s = 0; s < o->p.n_sites && s < 64; s++)
            if (outer_active(o, s, o->last_round) && !(o->final_from[c] >> s & 1) &&
                o->seen_round[s] >= o->last_round) /* it sent round last - 1: the last is next */
                n++;
    }
    return n;
}

uint32_t gt_outer_fins_missing(const gt_outer_t *o)
{
    uint32_t n = 0;
    for (uint32_t s = 0; o && s < o->p.n_sites && s < GT_OUTER_MAX_SITES; s++)
        n += s != o->p.site_id && o->live[s] && o->sent_n[s] > 0 && !o->fin[s] &&
             o->last_round != UINT64_MAX && o->seen_round[s] > o->last_round;
    return n;
}

void gt_outer_set_last_round(gt_outer_t *o, uint64_t round)
{
    if (o) o->last_round = round;
}

double gt_outer_result_tokens(const gt_outer_t *o, uint64_t round)
{
    const result_slot_t *r = &o->res[round % RESULT_SLOTS];
    return r->used && r->round == round ? r->tokens : 0.0;
}

const gt_mem_count_t *gt_outer_mem(const gt_outer_t *o)
{
    return o ? o->mem : NULL;
}

float *gt_outer_residual(gt_outer_t *o, int of_results)
{
    return of_results ? o->result_residual : o->residual;
}

gt_status_t gt_outer_resume(gt_outer_t *o, uint64_t rounds, const gt_outer_stats_t *counters)
{
    if (o->submitted) {
        GT_ERROR("outer: resume(%llu) after a submit", (unsigned long long)rounds);
        return GT_ERR_INVALID;
    }
    for (size_t c = 0; c < o->layout->n_chunks; c++) o->closed_upto[c] = (int64_t)rounds - 1;
    if (counters) {
        o->st.on_time = counters->on_time;
        o->st.late = counters->late;
        o->st.dropped = counters->dropped;
        o->st.rejected = counters->rejected;
        o->st.clipped = counters->clipped;
        o->st.hash_checks = counters->hash_checks;
        o->st.hash_mismatches = counters->hash_mismatches;
    }
    return GT_OK;
}

uint64_t gt_outer_peer_next(const gt_outer_t *o)
{
    return o->peer_next;
}

size_t gt_outer_max_chunk(const gt_outer_t *o)
{
    return o->max_chunk;
}

size_t gt_outer_len(const gt_outer_t *o)
{
    return o->n;
}
