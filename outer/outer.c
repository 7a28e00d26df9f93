/* outer.c — the outer-round engine: see the outer-round section of gt_wan.h for the protocol.
 *
 * State per site: the fixed layout; for each round in flight, the frames this site sent
 * (kept until the round is applied, for re-sends), the result being assembled, and — for
 * chunks this site owns — the open aggregations. Everything is bounded by the number of
 * rounds in flight (GT_OUTER_SLOTS) and the number of sites.
 *
 * Joins are per round, not per view: each site's first round is part of the engine's state
 * (announced by the joiner), and the owner of a chunk is computed for a given round over the
 * sites taking part in it. That way a join never moves a round already in flight (which would
 * let two sites aggregate the same chunk of the same round), and every site, whatever view it
 * has installed, agrees on who aggregates what once it has heard the announcement.
 *
 * Passes over the vector: a submit encodes every chunk (the NaN/Inf check runs on each chunk
 * just before its encode, while it is in cache) and only then sends, so a bad vector sends
 * nothing; a RESULT chunk is decoded once, on arrival (which also validates it), straight into
 * the round's result vector, which gt_outer_result_swap hands to the caller without a
 * copy. The outer optimizer and the rebase are not here: diloco/ applies them.
 */

#include "gt_outer.h"

#include "gt_topology.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define DELTA_MAGIC   0x444F5447u /* "GTOD" */
#define JOIN_MAGIC    0x4A4F5447u /* "GTOJ": a joining site announces its first round */
#define JOIN_PRE      24u         /* magic, version, first round, reserved */
#define FIRST_UNKNOWN UINT64_MAX  /* a site that has not announced when it contributes */
#define RESULT_MAGIC  0x524F5447u /* "GTOR" */
#define FIN_MAGIC     0x464F5447u /* "GTOF": a site that finished says how many DELTAs it took */
#define FIN_PRE       JOIN_PRE /* magic, version, DELTA frames taken from the receiver, reserved */
#define PULL_MAGIC    0x514F5447u /* "GTOQ": a site asks a peer for a RESULT chunk it lacks */
#define PULL_PRE      16u         /* magic, version, reserved */
#define PROTO_VERSION 1u
#define DELTA_PRE     32u
#define RESULT_PRE    56u
#define FLAG_FORWARDED                                                        \
    1u /* DELTA preamble flags: a late contribution passed on to the owner of \
           the round it folds into; never passed on again */
/* DELTA preamble flags: a contribution sent through a peer (its owner was unreachable from its
 * sender: a cut link); the peer passes it on to the site in bits 16-23 as sent, adding
 * FLAG_PASSED and the contributor in bits 8-15, and the owner takes it as if it had come
 * straight from there. A passed frame is never passed on again. */
#define FLAG_DETOUR  2u
#define FLAG_PASSED  4u
#define RESULT_SLOTS 16 /* rounds of results kept (compressed): how far a slow site may lag */
#define DECODED_MAX  4  /* rounds whose results are held decoded at once (normally 1-2) */
/* An applied round's RESULT frames are kept this many rounds (the round itself included) for
 * relays to a peer whose link to the owner is cut and forwards of a leaver's results; older
 * ones are freed (the slot's record of which chunks it had stays, for result_gone and the
 * duplicate check). Kept for all RESULT_SLOTS rounds they cost a compressed copy of the vector
 * a round: 16 B/param at int8 once a run is 16 rounds in. */
#define RELAY_ROUNDS 3

/* ---- little-endian fields ---- */
static void putf64(uint8_t *p, double d)
{
    uint64_t v;
    memcpy(&v, &d, 8);
    gt_le_put64(p, v);
}
static double getf64(const uint8_t *p)
{
    uint64_t v = gt_le_get64(p);
    double d;
    memcpy(&d, &v, 8);
    return d;
}

typedef struct {
    uint32_t sender;
    double weight; /* already divided by 1 + staleness when folded */
    double tokens; /* the weight as sent: the tokens behind it, for goodput */
    int late;
    uint64_t hash; /* sender's anchor hash for round-1 */
    float *x;      /* chunk length */
} contrib_t;

typedef struct { /* the senders whose DELTA of `round` an owner took, for one chunk */
    uint64_t round, senders;
} took_t;

typedef struct {
    int used, closed;
    uint64_t round;
    uint32_t chunk;     /* global chunk index */
    uint64_t first_ns;  /* arrival of the first on-time contribution (0: none yet); late,
                           folded contributions do not start the clock */
    uint64_t quorum_ns; /* when the on-time contributions reached a quorum (0: not yet) */
    uint32_t n;
    contrib_t c[GT_OUTER_MAX_SITES];
} agg_t;

typedef struct {
    int used, applied;
    uint64_t round;
    double weight;
    uint64_t anchor_hash;
    uint8_t **frame; /* per chunk: DELTA payload (preamble + codec frame) */
    size_t *len;
    uint32_t *sent_to;
} send_slot_t;

typedef struct {
    int used, applied;
    uint64_t round;
    uint8_t *have;
    uint8_t **frame; /* per chunk: the RESULT payload as received (for forwarding) */
    size_t *len;
    size_t n_have;
    float *g;     /* the decoded result (n_params), filled chunk by chunk on arrival; NULL when
                     DECODED_MAX rounds already hold one: then decoded when asked for */
    uint8_t *dec; /* per chunk: already decoded into g */
    int verdict;
    uint64_t own_hash; /* this site's anchor hash for round-1, to compare */
    int own_hash_known;
    double tokens; /* tokens whose gradients this round's result carries (chunk-weighted) */
    uint64_t submit_ns, done_ns; /* this site's submit; the last chunk's result (0: not yet) */
    /* Relays (pull_missing): the first chunk's arrival, the last pull and the peer to ask
     * next; per chunk, the sites this one has relayed it to (bit s), each served once. */
    uint64_t first_ns, pull_ns;
    uint32_t pull_next;
    uint64_t *served;
} result_slot_t;

struct gt_outer {
    gt_outer_params_t p;
    size_t n; /* floats in this engine's vector: n_params, or its rank's share of lanes */
    gt_topo_layout_t *layout;
    float *spare[DECODED_MAX]; /* decoded-result buffers not in use (n floats each) */
    uint32_t n_decoded;        /* result slots holding a decoded buffer */
    gt_cmp_ctx_t *codec;
    float *residual;        /* error feedback of this site's deltas (n) */
    float *result_residual; /* error feedback of results this site aggregated (n) */
    uint64_t epoch;
    uint8_t live[GT_OUTER_MAX_SITES];
    uint32_t n_live;
    /* Joins. first[s]: the first round site s contributes to (0 for the sites that start the
     * run; a joiner's announced round; FIRST_UNKNOWN for a site that left or never announced).
     * joined[s]: s announced while not yet in our view (it already receives results and owns
     * chunks from first[s] on); joined_epoch[s]: the view it announced from, so a later view
     * that lacks it means it is gone. Ownership, completeness and quorum of round r count the
     * sites active for r: (live or joined) and first <= r. */
    uint64_t first[GT_OUTER_MAX_SITES];
    uint8_t joined[GT_OUTER_MAX_SITES];
    uint64_t joined_epoch[GT_OUTER_MAX_SITES];
    /* The view a site announced its first round from (0: the run's start): a restart of the
     * site in a later view (a new incarnation) makes that announcement its previous life's. */
    uint64_t first_epoch[GT_OUTER_MAX_SITES];
    int submitted;       /* a round was submitted (start_at must come before) */
    uint64_t last_round; /* the run's last: closed complete only (UINT64_MAX: not set) */
    send_slot_t send[GT_OUTER_SLOTS];
    result_slot_t res[RESULT_SLOTS];
    agg_t *aggs;
    size_t n_aggs;
    int64_t *closed_upto; /* per chunk: highest round this site closed (-1 none) */
    /* Per chunk: a chunk handed to this site by a view change from a site that left holds its
     * rounds before handover_upto open until handover_ns, for a forward of the leaver's own
     * result (params.handover_ms). */
    uint64_t *handover_ns, *handover_upto;
    uint64_t *closed_due; /* per chunk: when that round would have closed at its deadline, had
                             it not closed early (a contribution to it that comes before was
                             not late by the deadline's measure: see late_share) */
    /* Per site: a moving average of how long after a chunk's first contribution this site's
     * arrives (ns). The deadline is robust across *sites*, so a chronic straggler is an
     * outlier the others do not wait for, rather than a sample that stretches the deadline. */
    double lateness[GT_OUTER_MAX_SITES];
    uint32_t lateness_n[GT_OUTER_MAX_SITES];
    /* Per site: a moving average of how often its rounds came after the deadline (1) or before
     * it (0), judged once a round: late when a round closes at its deadline without the site
     * (known then, not only when its contribution arrives — a 3x slower site's arrive rounds
     * later), on time when its contribution arrives before the round closes or, after an early
     * close, before the deadline the round would have had. A round whose missing sites are all
     * chronic stragglers (over one half) closes as soon as its quorum is in: their
     * contributions would come late and fold into a later round anyway, so waiting for the
     * deadline only stalls the others. The run's last round waits longer only for punctual
     * sites. */
    double late_share[GT_OUTER_MAX_SITES];
    uint64_t late_judged[GT_OUTER_MAX_SITES]; /* 1 + the round last counted in late_share:
                                                     a round counts once, not once a chunk */
    uint8_t heard[GT_OUTER_MAX_SITES];        /* a contribution of the site arrived here */
    uint64_t peer_next; /* 1 + the highest round a peer's DELTA or a RESULT arrived for */
    /* The run's last round, per chunk: the sites whose contribution to it arrived here (bit s),
     * and whether this site closed it (gt_outer_final_missing). */
    uint64_t *final_from;
    uint8_t *final_closed;
    uint64_t seen_round[GT_OUTER_MAX_SITES]; /* 1 + the highest round site s sent us */
    /* Per chunk and round (the last RESULT_SLOTS): the senders whose DELTA this owner took, so
     * a re-send of one it already took (after a reconnect that lost its acknowledgement) is
     * not folded in a second time once its round has closed. */
    took_t *took;
    /* The end-of-run ledger, per site: DELTA frames (contributions, re-sent and forwarded ones
     * included) this engine sent to it and took from it; whether it finished (its FIN arrived)
     * and how many of ours it said it took. A finished engine takes nothing more, so what a
     * sender sent to a finished site beyond its count reached no owner (`unreceived`). A site's
     * new life (its JOIN) starts its counts again; the old life's balance is kept. */
    uint64_t sent_n[GT_OUTER_MAX_SITES], took_n[GT_OUTER_MAX_SITES];
    uint64_t fin_n[GT_OUTER_MAX_SITES];
    uint8_t fin[GT_OUTER_MAX_SITES];
    uint64_t unreceived_before; /* balances of sites' earlier lives */
    int finished;               /* gt_outer_finish was called */
    uint8_t *scratch;           /* frame buffer */
    size_t scratch_cap;
    float *xbuf; /* chunk-sized float buffer */
    size_t max_chunk;
    /* what the buffers that grow with n hold (residuals, frames, decoded results,
     * contributions): params.mem, or the engine's own count */
    gt_mem_count_t *mem, own_mem;
    gt_outer_stats_t st;
};

uint64_t gt_outer_hash(const float *x, size_t n)
{
    return XXH3_64bits(x, n * sizeof *x);
}

static const gt_topo_chunk_t *chunk_at(const gt_outer_t *o, uint32_t lane, uint32_t j)
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
static int active(const gt_outer_t *o, uint32_t s, uint64_t r)
{
    return (o->live[s] || o->joined[s]) && o->first[s] != FIRST_UNKNOWN && o->first[s] <= r;
}

/* Sites that receive results: the view, and joiners that announced before the view has them. */
static int receiver(const gt_outer_t *o, uint32_t s)
{
    return o->live[s] || o->joined[s];
}

static uint32_t n_active(const gt_outer_t *o, uint64_t r)
{
    uint32_t n = 0;
    for (uint32_t s = 0; s < o->p.n_sites; s++) n += (uint32_t)active(o, s, r);
    return n;
}

/* The owner of chunk c in round r: its preferred site, else the next site active for r. A
 * joiner takes its chunks over from its first round on, so a round already in flight when it
 * announces keeps the owner its contributors sent to. */
static uint32_t owner_of(const gt_outer_t *o, size_t c, uint64_t r)
{
    uint32_t pref = o->layout->chunks[c].owner;
    for (uint32_t k = 0; k < o->p.n_sites; k++) {
        uint32_t s = (pref + k) % o->p.n_sites;
        if (active(o, s, r)) return s;
    }
    for (uint32_t k = 0; k < o->p.n_sites; k++) {
        uint32_t s = (pref + k) % o->p.n_sites;
        if (o->live[s]) return s;
    }
    return pref;
}

uint32_t gt_outer_owner(const gt_outer_t *o, uint32_t lane, uint32_t chunk)
{
    return gt_outer_owner_at(o, lane, chunk, UINT64_MAX - 1);
}

uint32_t gt_outer_owner_at(const gt_outer_t *o, uint32_t lane, uint32_t chunk, uint64_t round)
{
    const gt_topo_chunk_t *ch = chunk_at(o, lane, chunk);
    return ch ? owner_of(o, (size_t)(ch - o->layout->chunks), round) : UINT32_MAX;
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
    o->scratch_cap = RESULT_PRE + gt_cmp_bound(o->codec, o->max_chunk);
    o->scratch = malloc(o->scratch_cap);
    o->xbuf = gt_mem_alloc(o->mem, o->max_chunk * sizeof(float), 0);
    GT_REQUIRE_GOTO(o->residual && o->result_residual && o->closed_upto && o->handover_ns &&
                        o->handover_upto && o->closed_due && o->final_from && o->final_closed &&
                        o->took && o->scratch && o->xbuf,
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

static void free_agg(gt_outer_t *o, agg_t *a)
{
    for (uint32_t i = 0; i < a->n; i++) gt_mem_free(o->mem, a->c[i].x);
    memset(a, 0, sizeof *a);
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
    for (size_t i = 0; i < o->n_aggs; i++) free_agg(o, &o->aggs[i]);
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
    gt_cmp_destroy(o->codec);
    gt_topo_layout_destroy(o->layout);
    free(o);
}

/* ---- sending ---- */

static gt_status_t deliver_local(gt_outer_t *o, const gt_wan_msg_t *msg, const void *buf,
                                 size_t len, uint64_t now_ns);

static void send_to(gt_outer_t *o, uint32_t dst, const gt_wan_msg_t *msg, const void *buf,
                    size_t len, uint64_t now_ns)
{
    if (msg->type == GT_WAN_MSG_DELTA && len >= 4 && gt_le_get32(buf) == DELTA_MAGIC &&
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

/* Sends our contribution frame (len bytes, flags word 0) for chunk c of `round` to its owner,
 * or — when the io says the owner is unreachable and a peer that is not is in the view —
 * through that peer, flagged FLAG_DETOUR (the lowest such site, so every sender picks the same
 * one). The frame is sent once either way: never both, so it is counted once wherever it ends. */
static void send_contribution(gt_outer_t *o, uint32_t owner, const gt_wan_msg_t *m,
                              const uint8_t *frame, size_t len, uint64_t now_ns)
{
    uint32_t via = owner;
    if (owner != o->p.site_id && o->p.io.reachable && !o->p.io.reachable(o->p.io.ctx, owner))
        for (uint32_t s = 0; s < o->p.n_sites && s < GT_OUTER_MAX_SITES; s++)
            if (s != o->p.site_id && s != owner && receiver(o, s) &&
                o->p.io.reachable(o->p.io.ctx, s)) {
                via = s;
                break;
            }
    uint8_t *copy = via != owner ? malloc(len) : NULL;
    if (!copy) {
        send_to(o, owner, m, frame, len, now_ns);
        return;
    }
    memcpy(copy, frame, len);
    gt_le_put32(copy + 28, FLAG_DETOUR | owner << 16);
    o->st.detours++;
    GT_DEBUG("outer: round %llu: site %u unreachable; contribution sent through site %u",
             (unsigned long long)m->round, owner, via);
    send_to(o, via, m, copy, len, now_ns);
    free(copy);
}

static gt_wan_msg_t make_msg(const gt_outer_t *o, uint8_t type, uint64_t round, size_t c)
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

static send_slot_t *send_slot(gt_outer_t *o, uint64_t round)
{
    send_slot_t *s = &o->send[round % GT_OUTER_SLOTS];
    return s->used && s->round == round ? s : NULL;
}

/* Gives a slot's decoded buffer back to the spares. */
static void release_decoded(gt_outer_t *o, result_slot_t *r)
{
    if (!r->g) return;
    for (int i = 0; i < DECODED_MAX; i++)
        if (!o->spare[i]) {
            o->spare[i] = r->g;
            r->g = NULL;
            break;
        }
    gt_mem_free(o->mem, r->g); /* NULL if it went to the spares */
    r->g = NULL;
    o->n_decoded--;
    memset(r->dec, 0, o->layout->n_chunks);
}

/* A decoded buffer for slot r, while fewer than DECODED_MAX slots hold one (else NULL: its
 * chunks are checked on arrival and decoded again when the round is asked for). */
static float *take_decoded(gt_outer_t *o, result_slot_t *r)
{
    if (r->g || o->n_decoded >= DECODED_MAX) return r->g;
    for (int i = 0; i < DECODED_MAX && !r->g; i++)
        if (o->spare[i]) {
            r->g = o->spare[i];
            o->spare[i] = NULL;
        }
    if (!r->g) r->g = gt_mem_alloc(o->mem, o->n * sizeof(float), 0);
    if (r->g) o->n_decoded++;
    return r->g;
}

static result_slot_t *result_slot(gt_outer_t *o, uint64_t round, int create)
{
    result_slot_t *r = &o->res[round % RESULT_SLOTS];
    if (r->used && r->round == round) return r;
    if (!create) return NULL;
    if (r->used && !r->applied && r->round > round) return NULL; /* a newer round is pending */
    size_t nc = o->layout->n_chunks;
    if (r->used && !r->applied && r->n_have > 0)
        GT_WARN("outer: round %llu's result (%zu of %zu chunks here) was never applied; its slot "
                "now holds round %llu",
                (unsigned long long)r->round, r->n_have, nc, (unsigned long long)round);
    for (size_t c = 0; c < nc; c++) {
        gt_mem_free(o->mem, r->frame[c]);
        r->frame[c] = NULL;
        r->len[c] = 0;
    }
    memset(r->have, 0, nc);
    memset(r->served, 0, nc * sizeof *r->served);
    r->first_ns = r->pull_ns = 0;
    r->pull_next = 0;
    release_decoded(o, r);
    r->used = 1;
    r->applied = 0;
    r->round = round;
    r->n_have = 0;
    r->verdict = 0;
    r->own_hash_known = 0;
    r->tokens = 0;
    r->submit_ns = r->done_ns = 0;
    return r;
}

static void judge_hash(gt_outer_t *o, result_slot_t *r, const uint8_t *b);

/* delta: the whole vector, or NULL and fill(fill_ctx, ...) gives each chunk into xbuf. */
static gt_status_t submit(gt_outer_t *o, uint64_t round, const float *delta, gt_outer_fill_fn fill,
                          void *fill_ctx, double weight, uint64_t anchor_hash, uint64_t now_ns)
{
    send_slot_t *s = &o->send[round % GT_OUTER_SLOTS];
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
    if (!(weight > 0) || !isfinite(weight)) {
        GT_ERROR("outer: round %llu has weight %g; it must be positive", (unsigned long long)round,
                 weight);
        return GT_ERR_INVALID;
    }
    size_t nc = o->layout->n_chunks;
    o->submitted = 1;
    s->used = 1;
    s->applied = 0;
    s->round = round;
    s->weight = weight;
    s->anchor_hash = anchor_hash;
    /* The result slot remembers our hash so the owners' majority can be compared. */
    result_slot_t *r = result_slot(o, round, 1);
    if (r) {
        r->own_hash = anchor_hash;
        r->own_hash_known = round > 0;
        r->submit_ns = now_ns;
        /* A site behind (its contributions folded late) may hold the round's result already:
         * judged only on arrival, its anchor was never checked (seen: a rejoiner that diverged
         * for 28 rounds with 1 hash check). */
        for (size_t c = 0; c < o->layout->n_chunks && r->verdict == 0; c++)
            if (r->have[c] && r->frame[c]) judge_hash(o, r, r->frame[c]);
    }
    int ef = o->p.codec.error_feedback;
    /* Encode every chunk first (the NaN/Inf check just before each encode, on data in cache),
     * then send: a bad vector sends nothing. */
    for (size_t c = 0; c < nc; c++) {
        const gt_topo_chunk_t *ch = &o->layout->chunks[c];
        const float *x = delta ? delta + ch->offset : o->xbuf;
        if (!delta) fill(fill_ctx, ch->offset, ch->count, o->xbuf);
        for (size_t i = 0; i < ch->count; i++) {
            if (!isfinite(x[i])) {
                s->used = 0;
                GT_ERROR("outer: round %llu: this site's pseudo-gradient has a NaN or Inf at %zu; "
                         "not sending it",
                         (unsigned long long)round, ch->offset + i);
                return GT_ERR_INVALID;
            }
        }
        size_t cap = DELTA_PRE + gt_cmp_bound(o->codec, ch->count), flen = 0;
        uint8_t *buf = gt_mem_realloc(o->mem, s->frame[c], cap);
        if (!buf) return GT_ERR_NOMEM;
        s->frame[c] = buf;
        gt_status_t st = gt_cmp_encode(o->codec, x, ch->count, ef ? o->residual + ch->offset : NULL,
                                       buf + DELTA_PRE, cap - DELTA_PRE, &flen);
        if (st != GT_OK) return st;
        gt_le_put32(buf, DELTA_MAGIC);
        gt_le_put32(buf + 4, PROTO_VERSION);
        putf64(buf + 8, weight);
        gt_le_put64(buf + 16, anchor_hash);
        gt_le_put32(buf + 24, o->p.n_sites);
        gt_le_put32(buf + 28, 0);
        s->len[c] = DELTA_PRE + flen;
    }
    /* The peers' chunks first, then our own: folding our own contribution can close a chunk
     * and queue its RESULT on the links, and a RESULT queued ahead of a DELTA holds the DELTA
     * (and the owner's RESULT that waits for it) behind it on a bandwidth-bound link: in a
     * synchronous 2-site run at 3 Mbit/s the round took 40% longer (test_plan_validate). */
    for (int own = 0; own < 2; own++)
        for (size_t c = 0; c < nc; c++) {
            uint32_t to = owner_of(o, c, round);
            if ((to == o->p.site_id) != own) continue;
            s->sent_to[c] = to;
            gt_wan_msg_t m = make_msg(o, GT_WAN_MSG_DELTA, round, c);
            o->st.deltas_sent++;
            send_contribution(o, to, &m, s->frame[c], s->len[c], now_ns);
            GT_DEBUG("outer: submitted round %llu chunk %zu to site %u", (unsigned long long)round,
                     c, to);
        }
    return GT_OK;
}

gt_status_t gt_outer_submit(gt_outer_t *o, uint64_t round, const float *delta, double weight,
                            uint64_t anchor_hash, uint64_t now_ns)
{
    return submit(o, round, delta, NULL, NULL, weight, anchor_hash, now_ns);
}

gt_status_t gt_outer_submit_fill(gt_outer_t *o, uint64_t round, gt_outer_fill_fn fill,
                                 void *fill_ctx, double weight, uint64_t anchor_hash,
                                 uint64_t now_ns)
{
    if (!fill) return GT_ERR_INVALID;
    return submit(o, round, NULL, fill, fill_ctx, weight, anchor_hash, now_ns);
}

/* ---- owner side ---- */

static agg_t *find_agg(gt_outer_t *o, uint64_t round, size_t c, int create)
{
    agg_t *free_slot = NULL;
    for (size_t i = 0; i < o->n_aggs; i++) {
        agg_t *a = &o->aggs[i];
        if (a->used && a->round == round && a->chunk == c) return a;
        if (!a->used && !free_slot) free_slot = a;
    }
    if (!create) return NULL;
    if (!free_slot) {
        agg_t *na = realloc(o->aggs, (o->n_aggs + 8) * sizeof *na);
        if (!na) return NULL;
        memset(na + o->n_aggs, 0, 8 * sizeof *na);
        o->aggs = na;
        free_slot = &o->aggs[o->n_aggs];
        o->n_aggs += 8;
    }
    free_slot->used = 1;
    free_slot->closed = 0;
    free_slot->round = round;
    free_slot->chunk = (uint32_t)c;
    free_slot->n = 0;
    free_slot->first_ns = 0;
    free_slot->quorum_ns = 0;
    return free_slot;
}

static int agg_has(const agg_t *a, uint32_t sender)
{
    for (uint32_t i = 0; i < a->n; i++)
        if (a->c[i].sender == sender && !a->c[i].late) return 1;
    return 0;
}

static void sort_doubles(double *v, size_t n)
{
    for (size_t i = 1; i < n; i++) /* insertion sort: n <= 64 */
        for (size_t k = i; k > 0 && v[k - 1] > v[k]; k--) {
            double t = v[k];
            v[k] = v[k - 1];
            v[k - 1] = t;
        }
}

/* median + k·MAD of the live sites' typical lateness, within [min, max]; 0 while fewer than
 * two sites have history (see close_due). */
static uint64_t deadline_ns(const gt_outer_t *o)
{
    uint64_t lo = (uint64_t)o->p.deadline_min_ms * 1000000ull;
    uint64_t hi = (uint64_t)o->p.deadline_max_ms * 1000000ull;
    double v[GT_OUTER_MAX_SITES], dev[GT_OUTER_MAX_SITES];
    size_t n = 0;
    for (uint32_t i = 0; i < o->p.n_sites; i++)
        if (o->live[i] && o->lateness_n[i] > 0) v[n++] = o->lateness[i];
    if (n < 2) return 0;
    sort_doubles(v, n);
    double med = v[(n - 1) / 2]; /* the lower median: with two sites, the faster one */
    for (size_t i = 0; i < n; i++) dev[i] = fabs(v[i] - med);
    sort_doubles(dev, n);
    double mad = dev[n / 2];
    double d = med + o->p.deadline_mad_k * mad;
    uint64_t dl = (uint64_t)d;
    return dl < lo ? lo : (dl > hi ? hi : dl);
}

static int cmp_sender(const void *a, const void *b)
{
    const contrib_t *x = a, *y = b;
    if (x->sender != y->sender) return x->sender < y->sender ? -1 : 1;
    return x->late - y->late;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Aggregates and broadcasts the result of `a`, then frees its contributions. */
static void close_agg(gt_outer_t *o, agg_t *a, uint64_t now_ns)
{
    const gt_topo_chunk_t *ch = &o->layout->chunks[a->chunk];
    size_t n = ch->count;
    double norms[GT_OUTER_MAX_SITES], sorted[GT_OUTER_MAX_SITES];
    int ok[GT_OUTER_MAX_SITES];
    uint32_t n_ok = 0;
    qsort(a->c, a->n, sizeof a->c[0], cmp_sender); /* arrival order must not matter */
    if (a->round == o->last_round) o->final_closed[a->chunk] = 1;
    for (uint32_t i = 0; i < a->n; i++) {
        double s = 0;
        ok[i] = 1;
        for (size_t k = 0; k < n; k++) {
            float v = a->c[i].x[k];
            if (!isfinite(v)) {
                ok[i] = 0;
                break;
            }
            s += (double)v * v;
        }
        norms[i] = sqrt(s);
        if (ok[i])
            sorted[n_ok++] = norms[i];
        else {
            o->st.rejected++;
            GT_WARN("outer: rejected site %u's contribution to round %llu chunk %u: NaN or Inf",
                    a->c[i].sender, (unsigned long long)a->round, a->chunk);
        }
    }
    qsort(sorted, n_ok, sizeof sorted[0], cmp_double);
    double median = n_ok ? sorted[n_ok / 2] : 0, limit = o->p.clip_k * median;
    float *g = o->xbuf;
    memset(g, 0, n * sizeof *g);
    double wsum = 0, tsum = 0;
    uint64_t mask = 0;
    uint32_t folded = 0;
    double scale[GT_OUTER_MAX_SITES];
    for (uint32_t i = 0; i < a->n; i++) {
        scale[i] = 1.0;
        if (!ok[i]) continue;
        if (o->p.clip_k > 0 && n_ok >= 3 && norms[i] > limit && norms[i] > 0) {
            scale[i] = limit / norms[i];
            o->st.clipped++;
            GT_WARN("outer: clipped site %u's contribution to round %llu chunk %u: norm %.3g > "
                    "%g x median %.3g",
                    a->c[i].sender, (unsigned long long)a->round, a->chunk, norms[i], o->p.clip_k,
                    median);
        }
        wsum += a->c[i].weight;
        tsum += a->c[i].tokens;
        if (a->c[i].late) {
            folded++;
            o->st.late++;
        } else {
            mask |= 1ull << a->c[i].sender;
            o->st.on_time++;
        }
    }
    /* g = sum_i w_i * scale_i * x_i / sum_i w_i, summed in sender order, in double. */
    if (wsum > 0) {
        for (size_t k = 0; k < n; k++) {
            double acc = 0;
            for (uint32_t i = 0; i < a->n; i++)
                if (ok[i]) acc += a->c[i].weight * scale[i] * (double)a->c[i].x[k];
            g[k] = (float)(acc / wsum);
        }
    }
    /* Majority anchor hash among on-time contributions (for round-1). */
    uint64_t best = 0;
    uint32_t best_votes = 0;
    for (uint32_t i = 0; i < a->n && a->round > 0; i++) {
        if (a->c[i].late) continue;
        uint32_t votes = 0;
        for (uint32_t k = 0; k < a->n; k++)
            if (!a->c[k].late && a->c[k].hash == a->c[i].hash) votes++;
        if (votes > best_votes || (votes == best_votes && a->c[i].hash < best)) {
            best = a->c[i].hash;
            best_votes = votes;
        }
    }
    /* Encode and broadcast. */
    size_t flen = 0;
    int ef = o->p.codec.error_feedback;
    gt_status_t st = gt_cmp_encode(o->codec, g, n, ef ? o->result_residual + ch->offset : NULL,
                                   o->scratch + RESULT_PRE, o->scratch_cap - RESULT_PRE, &flen);
    a->closed = 1;
    if ((int64_t)a->round > o->closed_upto[a->chunk]) o->closed_upto[a->chunk] = (int64_t)a->round;
    for (uint32_t i = 0; i < a->n; i++) {
        gt_mem_free(o->mem, a->c[i].x);
        a->c[i].x = NULL;
    }
    a->n = 0;
    if (st != GT_OK) {
        GT_ERROR("outer: cannot encode the result of round %llu chunk %u: %s",
                 (unsigned long long)a->round, a->chunk, gt_status_str(st));
        return;
    }
    GT_DEBUG("outer: closed round %llu chunk %u: %u on time (mask %#llx), %u folded late",
             (unsigned long long)a->round, a->chunk, (uint32_t)__builtin_popcountll(mask),
             (unsigned long long)mask, folded);
    uint8_t *b = o->scratch;
    gt_le_put32(b, RESULT_MAGIC);
    gt_le_put32(b + 4, PROTO_VERSION);
    gt_le_put32(b + 8, o->p.site_id);
    gt_le_put32(b + 12, (uint32_t)__builtin_popcountll(mask) + folded);
    gt_le_put64(b + 16, mask);
    gt_le_put64(b + 24, best);
    gt_le_put32(b + 32, best_votes);
    gt_le_put32(b + 36, folded);
    putf64(b + 40, wsum);
    putf64(b + 48, tsum);
    size_t len = RESULT_PRE + flen;
    gt_wan_msg_t m = make_msg(o, GT_WAN_MSG_RESULT, a->round, a->chunk);
    uint64_t round = a->round;
    a->used = 0; /* before sending: delivering to ourselves may open new aggregations */
    /* The scratch buffer is reused by deliveries; send a private copy. */
    uint8_t *copy = malloc(len);
    if (!copy) return;
    memcpy(copy, b, len);
    for (uint32_t s = 0; s < o->p.n_sites; s++) {
        if (!receiver(o, s)) continue;
        if (s != o->p.site_id) o->st.results_sent++;
        send_to(o, s, &m, copy, len, now_ns);
    }
    free(copy);
    (void)round;
}

static int agg_complete(const gt_outer_t *o, const agg_t *a)
{
    for (uint32_t s = 0; s < o->p.n_sites; s++)
        if (active(o, s, a->round) && !agg_has(a, s)) return 0;
    return 1;
}

static uint32_t agg_on_time(const agg_t *a)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < a->n; i++) n += !a->c[i].late;
    return n;
}

static uint32_t quorum_count(const gt_outer_t *o, uint64_t round)
{
    uint32_t q = (uint32_t)ceil(o->p.quorum * n_active(o, round) - 1e-9);
    return q < 1 ? 1 : q;
}

/* When `a` may close at the deadline: after the adaptive deadline (dl; 0 = no history yet),
 * but no later than twice the time its quorum took to arrive, within [min, max]. The second
 * bound keeps a site that has become slow only now from holding up rounds until the
 * statistics catch up. */
static uint64_t close_due(const gt_outer_t *o, const agg_t *a, uint64_t dl)
{
    uint64_t lo = (uint64_t)o->p.deadline_min_ms * 1000000ull;
    uint64_t hi = (uint64_t)o->p.deadline_max_ms * 1000000ull;
    if (a->quorum_ns) {
        uint64_t q = 2 * (a->quorum_ns - a->first_ns);
        if (dl == 0 || q < dl) dl = q;
    } else if (dl == 0) {
        return UINT64_MAX;
    }
    dl = dl < lo ? lo : (dl > hi ? hi : dl);
    return a->first_ns + dl;
}

/* Counts round r in site s's share of late rounds, once a round. */
static void judge_round(gt_outer_t *o, uint32_t s, uint64_t r, int late)
{
    if (r + 1 <= o->late_judged[s]) return;
    o->late_judged[s] = r + 1;
    o->late_share[s] = 0.7 * o->late_share[s] + 0.3 * (late ? 1.0 : 0.0);
}

/* Whether an active site missing from `a` is one that usually contributes on time. With
 * `seen`, only a site this engine has heard from: the last round's longer wait is for a
 * punctual site catching up, and a site never heard from (this engine joined or came back
 * after it last contributed) is not known to be one — a joiner that waited for a straggler it
 * had not met yet stalled the run's end for 10 s (docs/diloco.md, goodput). */
static int awaits_punctual(const gt_outer_t *o, const agg_t *a, int seen)
{
    for (uint32_t s = 0; s < o->p.n_sites; s++)
        if (active(o, s, a->round) && !agg_has(a, s) && o->late_share[s] < 0.5 &&
            (!seen || o->heard[s]))
            return 1;
    return 0;
}

static gt_status_t bad(gt_outer_t *o, const gt_wan_msg_t *m, const char *why);

/* One link cut while both of its ends reach the others: each end lacks the chunks the other
 * owns, and the owner's RESULT cannot reach it. When a round's result has some chunks here and
 * lacks others (not ours) for longer than a straggler deadline plus deadline_min_ms after the
 * first arrived — every owner closes within a deadline of the same contributions — this site
 * asks one peer (not the chunk's owner) for them, another peer each time after that, and the
 * peer relays the owner's RESULT frame as it received it: the same bytes, so the anchors stay
 * identical (I1). When the io says an owner of a missing chunk is unreachable, it asks after
 * deadline_min_ms / 2 (at most 250 ms) instead, and asks again as often: a peer that had no
 * copy yet ignored the request. A result merely slow on its way costs a duplicate chunk, dropped on
 * arrival. */
static void pull_missing(gt_outer_t *o, uint64_t dl, uint64_t now_ns)
{
    size_t nc = o->layout->n_chunks;
    uint64_t slow = (dl ? dl : (uint64_t)o->p.deadline_max_ms * 1000000ull) +
                    (uint64_t)o->p.deadline_min_ms * 1000000ull;
    uint64_t quick = (uint64_t)o->p.deadline_min_ms * 500000ull;
    if (quick > 250000000ull) quick = 250000000ull;
    for (int i = 0; i < RESULT_SLOTS; i++) {
        result_slot_t *r = &o->res[i];
        if (!r->used || r->applied || r->n_have == 0 || r->n_have == nc ||
            now_ns - r->first_ns < quick || (r->pull_ns && now_ns - r->pull_ns < quick))
            continue;
        uint64_t after = slow;
        for (size_t c = 0; c < nc && after == slow && o->p.io.reachable; c++) {
            uint32_t owner = owner_of(o, c, r->round);
            if (!r->have[c] && owner != o->p.site_id && !o->p.io.reachable(o->p.io.ctx, owner))
                after = quick;
        }
        if (now_ns - r->first_ns < after || (r->pull_ns && now_ns - r->pull_ns < after)) continue;
        for (uint32_t k = 0; k < o->p.n_sites; k++) {
            uint32_t s = (r->pull_next + k) % o->p.n_sites;
            if (s == o->p.site_id || !receiver(o, s)) continue;
            size_t asked = 0;
            for (size_t c = 0; c < nc; c++) {
                uint32_t owner = owner_of(o, c, r->round);
                if (r->have[c] || owner == o->p.site_id || owner == s) continue;
                uint8_t b[PULL_PRE];
                memset(b, 0, sizeof b);
                gt_le_put32(b, PULL_MAGIC);
                gt_le_put32(b + 4, PROTO_VERSION);
                gt_wan_msg_t m = make_msg(o, GT_WAN_MSG_DELTA, r->round, c);
                send_to(o, s, &m, b, sizeof b, now_ns);
                asked++;
            }
            if (!asked) continue;
            o->st.pulls += asked;
            if (!r->pull_ns)
                GT_INFO("outer: round %llu: %zu of %zu chunks here %.1f s after the first, the "
                        "rest not; asking site %u to relay %zu (a cut between us and their "
                        "owner?)",
                        (unsigned long long)r->round, r->n_have, nc, (now_ns - r->first_ns) * 1e-9,
                        s, asked);
            r->pull_next = s + 1;
            r->pull_ns = now_ns;
            break;
        }
    }
}

/* Site m->sender asks for chunk c of m->round's result: relayed as received, once per site. */
static gt_status_t on_pull(gt_outer_t *o, const gt_wan_msg_t *m, const uint8_t *b, size_t len,
                           size_t c, uint64_t now_ns)
{
    uint32_t s = m->sender;
    if (len != PULL_PRE || gt_le_get32(b + 4) != PROTO_VERSION || s == o->p.site_id)
        return bad(o, m, "not a PULL");
    result_slot_t *r = result_slot(o, m->round, 0);
    if (!r || !r->have[c] || !r->frame[c] || s >= 64 || (r->served[c] >> s & 1)) {
        GT_DEBUG("outer: site %u asks for round %llu chunk %zu: %s", s,
                 (unsigned long long)m->round, c,
                 r && r->have[c] ? "relayed to it already" : "not here");
        return GT_OK;
    }
    r->served[c] |= 1ull << s;
    o->st.relays++;
    gt_wan_msg_t rm = make_msg(o, GT_WAN_MSG_RESULT, m->round, c);
    send_to(o, s, &rm, r->frame[c], r->len[c], now_ns);
    return GT_OK;
}

gt_status_t gt_outer_progress(gt_outer_t *o, uint64_t now_ns)
{
    uint64_t dl = deadline_ns(o);
    for (size_t i = 0; i < o->n_aggs; i++) {
        agg_t *a = &o->aggs[i];
        if (!a->used || a->closed || a->n == 0) continue;
        uint32_t quorum = quorum_count(o, a->round);
        /* A quorum reached by a view change (a site left: fewer must contribute) starts the
         * deadline as one reached by an arrival does. Without it, an engine with no deadline
         * history yet (a joiner's) had no deadline for the chunk at all and waited for every
         * site: in a chaos run a joiner that owned two chunks of its first round, stuck itself
         * before its first submit, held the round — and every site behind it — for good. */
        if (!a->quorum_ns && agg_on_time(a) >= quorum) a->quorum_ns = now_ns;
        /* A round closes only after the previous round of the chunk has closed. */
        if (a->round > 0 && o->closed_upto[a->chunk] < (int64_t)a->round - 1 &&
            find_agg(o, a->round - 1, a->chunk, 0))
            continue;
        /* The run's last round waits longer (4 x deadline_max_ms from its first contribution)
         * for a punctual site it has heard from: its contribution to it, come after a deadline
         * close, could fold nowhere, and its owner may have finished. Bounded all the same: a site
         * that never sends (it died and its lease has not run out yet) cannot hold it forever. A
         * round that lacks only chronic stragglers does not wait for them (see late_share).
         * sync-dp (last round 0: every round is one) waits for every punctual site, heard from
         * or not: a site restarted a moment later than the others must not be left behind. */
        uint64_t normal = close_due(o, a, dl), due = normal;
        int punctual = awaits_punctual(o, a, 0);
        if (!punctual)
            due = now_ns;
        else if (a->round >= o->last_round && due != UINT64_MAX &&
                 awaits_punctual(o, a, o->last_round > 0))
            due = a->first_ns + 4ull * o->p.deadline_max_ms * 1000000ull;
        if (now_ns < o->handover_ns[a->chunk] && a->round < o->handover_upto[a->chunk])
            continue; /* handed over from a site that left: a forward of its result may come */
        /* A joiner's first round: a peer that had not heard of the join yet aggregated this
         * chunk itself (it was its owner then) and forwards its result when it hears (take_join);
         * that result is the one the others apply, so the joiner waits for it a while rather than
         * close a second one. */
        if (o->first[o->p.site_id] > 0 && a->round == o->first[o->p.site_id] && a->first_ns &&
            now_ns < a->first_ns + (uint64_t)o->p.handover_ms * 1000000ull)
            continue;
        if (agg_complete(o, a) || (agg_on_time(a) >= quorum && now_ns >= due)) {
            if (!agg_complete(o, a) && punctual)
                GT_WARN("outer: closing round %llu chunk %u at the deadline with %u of %u sites",
                        (unsigned long long)a->round, a->chunk, agg_on_time(a),
                        n_active(o, a->round));
            else if (!agg_complete(o, a))
                GT_INFO("outer: closing round %llu chunk %u with %u of %u sites: the others are "
                        "stragglers, folded late",
                        (unsigned long long)a->round, a->chunk, agg_on_time(a),
                        n_active(o, a->round));
            o->closed_due[a->chunk] = normal;
            /* Closed at (or past) its deadline: whoever is missing was late for this round. */
            if (punctual)
                for (uint32_t s = 0; s < o->p.n_sites; s++)
                    if (active(o, s, a->round) && !agg_has(a, s)) judge_round(o, s, a->round, 1);
            close_agg(o, a, now_ns);
        }
    }
    pull_missing(o, dl, now_ns);
    return GT_OK;
}

uint64_t gt_outer_next_deadline(const gt_outer_t *o)
{
    uint64_t best = UINT64_MAX, dl = deadline_ns(o);
    for (size_t i = 0; i < o->n_aggs; i++) {
        const agg_t *a = &o->aggs[i];
        if (a->used && !a->closed && a->first_ns && close_due(o, a, dl) < best)
            best = close_due(o, a, dl);
    }
    return best;
}

static gt_status_t bad(gt_outer_t *o, const gt_wan_msg_t *m, const char *why)
{
    o->st.bad_messages++;
    GT_WARN("outer: rejected a message from site %u (round %llu lane %u chunk %u): %s", m->sender,
            (unsigned long long)m->round, m->lane, m->chunk, why);
    return GT_ERR_CORRUPT;
}

static gt_status_t on_delta(gt_outer_t *o, const gt_wan_msg_t *m, const uint8_t *b, size_t len,
                            size_t c, uint64_t now_ns)
{
    if (len < DELTA_PRE || gt_le_get32(b) != DELTA_MAGIC || gt_le_get32(b + 4) != PROTO_VERSION)
        return bad(o, m, "not a DELTA payload");
    if (o->finished) { /* its sender counts it, against our FIN */
        GT_DEBUG("outer: finished: site %u's contribution to round %llu chunk %zu not taken",
                 m->sender, (unsigned long long)m->round, c);
        return GT_OK;
    }
    o->took_n[m->sender]++;
    double w = getf64(b + 8), tokens = w;
    if (!(w > 0) || !isfinite(w) || gt_le_get32(b + 24) != o->p.n_sites)
        return bad(o, m, "bad weight or layout");
    const gt_topo_chunk_t *ch = &o->layout->chunks[c];
    float *x = gt_mem_alloc(o->mem, ch->count * sizeof *x, 0);
    if (!x) return GT_ERR_NOMEM;
    gt_status_t st = gt_cmp_decode(o->codec, b + DELTA_PRE, len - DELTA_PRE, x, ch->count);
    if (st != GT_OK) {
        gt_mem_free(o->mem, x);
        return bad(o, m, "the codec frame does not decode to this chunk");
    }
    uint64_t round = m->round;
    uint32_t flags = gt_le_get32(b + 28), sender = m->sender;
    int forwarded = (flags & FLAG_FORWARDED) != 0;
    if (forwarded) sender = (flags >> 8) & 0xFFu; /* the site that contributed it */
    if (flags & FLAG_DETOUR) {
        uint32_t to = (flags >> 16) & 0xFFu, passed = (flags & FLAG_PASSED) != 0;
        if (forwarded || to >= o->p.n_sites || (passed && to != o->p.site_id) ||
            (!passed && to == o->p.site_id)) {
            gt_mem_free(o->mem, x);
            return bad(o, m, "a detour to an unknown site, or passed on twice");
        }
        if (!passed) { /* pass it on as it came, naming its contributor */
            gt_mem_free(o->mem, x);
            uint8_t *fw = malloc(len);
            if (!fw) return GT_ERR_NOMEM;
            memcpy(fw, b, len);
            gt_le_put32(fw + 28, FLAG_DETOUR | FLAG_PASSED | m->sender << 8 | to << 16);
            gt_wan_msg_t fm = make_msg(o, GT_WAN_MSG_DELTA, m->round, c);
            o->st.detours_passed++;
            send_to(o, to, &fm, fw, len, now_ns);
            free(fw);
            return GT_OK;
        }
        sender = (flags >> 8) & 0xFFu; /* taken as if it had come straight from its contributor */
    }
    if (sender >= o->p.n_sites) {
        gt_mem_free(o->mem, x);
        return bad(o, m, "forwarded from an unknown site");
    }
    if (!forwarded) { /* a DELTA already taken: a re-send whose acknowledgement was lost */
        took_t *t = &o->took[c * RESULT_SLOTS + m->round % RESULT_SLOTS];
        if (t->round == m->round && (t->senders >> sender & 1)) {
            o->st.duplicate_deltas++;
            GT_INFO("outer: site %u's contribution to round %llu chunk %zu arrived again (a "
                    "re-send); taken once",
                    sender, (unsigned long long)m->round, c);
            gt_mem_free(o->mem, x);
            return GT_OK;
        }
        if (t->round != m->round) *t = (took_t){m->round, 0};
        t->senders |= 1ull << sender;
    }
    if (m->round == o->last_round && sender < 64) o->final_from[c] |= 1ull << sender;
    if (!forwarded && m->round + 1 > o->seen_round[sender]) o->seen_round[sender] = m->round + 1;
    /* A forwarded contribution is late by construction: its round is the one it folds into. */
    int late = forwarded || (int64_t)round <= o->closed_upto[c];
    if (late) {
        if (!o->p.late_fold) {
            o->st.dropped++;
            GT_INFO("outer: dropped site %u's late contribution to round %llu chunk %zu", sender,
                    (unsigned long long)round, c);
            gt_mem_free(o->mem, x);
            return GT_OK;
        }
        uint64_t target =
            (int64_t)round > o->closed_upto[c] ? round : (uint64_t)(o->closed_upto[c] + 1);
        w /= (double)(1 + (target - round));
        round = target;
        /* The round it folds into belongs to another site (a joiner took the chunk over from
         * that round): pass it on, once, rather than open a second aggregation of the round. */
        uint32_t to = owner_of(o, c, round);
        if (!forwarded && to != o->p.site_id && o->live[to]) {
            uint8_t *fw = malloc(len);
            if (!fw) {
                gt_mem_free(o->mem, x);
                return GT_ERR_NOMEM;
            }
            memcpy(fw, b, len);
            putf64(fw + 8, w);
            gt_le_put32(fw + 28, FLAG_FORWARDED | (sender << 8));
            gt_wan_msg_t fm = make_msg(o, GT_WAN_MSG_DELTA, round, c);
            o->st.forwards++;
            send_to(o, to, &fm, fw, len, now_ns);
            free(fw);
            gt_mem_free(o->mem, x);
            return GT_OK;
        }
    }
    agg_t *a = find_agg(o, round, c, 1);
    if (!a) {
        gt_mem_free(o->mem, x);
        return GT_ERR_NOMEM;
    }
    if (!late && agg_has(a, sender)) { /* a re-send of what we have: keep the first */
        gt_mem_free(o->mem, x);
        return GT_OK;
    }
    if (a->n == GT_OUTER_MAX_SITES) {
        gt_mem_free(o->mem, x);
        o->st.dropped++;
        return bad(o, m, "too many contributions to one chunk");
    }
    if (!late && a->first_ns == 0) a->first_ns = now_ns;
    int after_deadline = late && !(!forwarded && (int64_t)m->round == o->closed_upto[c] &&
                                   now_ns <= o->closed_due[c]);
    /* (no further than the run's last round: a faulty peer's round number cannot make this
     * site cut every round short) */
    if (!forwarded && sender != o->p.site_id && m->round + 1 > o->peer_next &&
        m->round <= o->last_round)
        o->peer_next = m->round + 1;
    if (!forwarded) {
        o->heard[sender] = 1;
        judge_round(o, sender, m->round, after_deadline);
    }
    if (!late) {
        double off = (double)(now_ns - a->first_ns);
        uint32_t k = o->lateness_n[sender];
        o->lateness[sender] = k == 0 ? off : 0.8 * o->lateness[sender] + 0.2 * off;
        if (k < UINT32_MAX) o->lateness_n[sender] = k + 1;
    }
    a->c[a->n++] = (contrib_t){sender, w, tokens, late, gt_le_get64(b + 16), x};
    if (!a->quorum_ns && agg_on_time(a) >= quorum_count(o, a->round)) a->quorum_ns = now_ns;
    return gt_outer_progress(o, now_ns);
}

/* Anchor check: the owners' majority hash (in a RESULT preamble b of round r->round) against
 * ours, once per round — when the result comes, or, for a site behind whose results arrive
 * before it submits, at its submit. */
static void judge_hash(gt_outer_t *o, result_slot_t *r, const uint8_t *b)
{
    uint32_t votes = gt_le_get32(b + 32);
    uint32_t voters = (uint32_t)__builtin_popcountll(gt_le_get64(b + 16)); /* on time */
    if (!r->own_hash_known || votes == 0 || r->verdict != 0) return;
    o->st.hash_checks++;
    if (votes < voters && 2 * votes <= voters) {
        /* The anchors differ and no hash has a majority (two live sites, one each): nobody can
         * tell which is right, and re-fetching the lower hash's would spread a corruption half
         * the time. Every site stops applying instead (diloco/ fails the round). */
        r->verdict = -2;
        o->st.hash_mismatches++;
        GT_ERROR("outer: the sites' anchors after round %llu differ and no anchor has a "
                 "majority (%u of %u votes at most): site %u stops applying rather than diverge",
                 (unsigned long long)r->round - 1, votes, voters, o->p.site_id);
        return;
    }
    if (gt_le_get64(b + 24) == r->own_hash) {
        r->verdict = 1;
        return;
    }
    r->verdict = -1;
    o->st.hash_mismatches++;
    GT_ERROR("outer: site %u's anchor after round %llu differs from the majority of sites (%u "
             "votes): it must re-fetch the anchor",
             o->p.site_id, (unsigned long long)r->round - 1, votes);
}

static gt_status_t on_result(gt_outer_t *o, const gt_wan_msg_t *m, const uint8_t *b, size_t len,
                             uint64_t now_ns, size_t c)
{
    if (len < RESULT_PRE || gt_le_get32(b) != RESULT_MAGIC || gt_le_get32(b + 4) != PROTO_VERSION)
        return bad(o, m, "not a RESULT payload");
    result_slot_t *r = result_slot(o, m->round, 1);
    if (!r || r->applied) {
        o->st.stale_results++;
        GT_DEBUG("outer: stale result of round %llu chunk %zu from site %u",
                 (unsigned long long)m->round, c, m->sender);
        return GT_OK;
    }
    if (r->have[c]) return GT_OK; /* a forwarded copy of what we have */
    GT_DEBUG("outer: result of round %llu chunk %zu from site %u (owner %u)",
             (unsigned long long)m->round, c, m->sender, gt_le_get32(b + 8));
    const gt_topo_chunk_t *ch = &o->layout->chunks[c];
    /* Decoded once, here (which also validates it), into the round's result vector. */
    float *g = take_decoded(o, r);
    gt_status_t st = gt_cmp_decode(o->codec, b + RESULT_PRE, len - RESULT_PRE,
                                   g ? g + ch->offset : o->xbuf, ch->count);
    if (st != GT_OK) return bad(o, m, "the result frame does not decode to this chunk");
    if (m->round + 1 > o->peer_next && m->round <= o->last_round)
        o->peer_next = m->round + 1; /* the round closed */
    r->dec[c] = g != NULL;
    uint8_t *keep = gt_mem_alloc(o->mem, len, 0);
    if (!keep) return GT_ERR_NOMEM;
    memcpy(keep, b, len);
    r->frame[c] = keep;
    r->len[c] = len;
    r->have[c] = 1;
    if (r->n_have++ == 0) r->first_ns = now_ns;
    if (r->n_have == o->layout->n_chunks) r->done_ns = now_ns;
    double t = getf64(b + 48);
    if (isfinite(t) && t > 0) r->tokens += t * (double)ch->count / (double)o->n;
    if ((int64_t)m->round > o->closed_upto[c]) o->closed_upto[c] = (int64_t)m->round;
    /* We were aggregating this chunk too (its owner changed): the first result is final; what
     * we collected is accounted as aggregated (in the result's mask) or as late. */
    agg_t *mine = find_agg(o, m->round, c, 0);
    if (mine && mine->used && !mine->closed) {
        uint64_t mask = gt_le_get64(b + 16);
        agg_t copy = *mine;
        mine->used = 0;
        mine->n = 0;
        for (uint32_t i = 0; i < copy.n; i++) {
            if (!copy.c[i].late && copy.c[i].sender < 64 && (mask >> copy.c[i].sender) & 1) {
                o->st.on_time++;
                gt_mem_free(o->mem, copy.c[i].x);
            } else if (o->p.late_fold && owner_of(o, c, m->round + 1) == o->p.site_id) {
                agg_t *next = find_agg(o, m->round + 1, c, 1);
                if (next && next->n < GT_OUTER_MAX_SITES) {
                    contrib_t k = copy.c[i];
                    k.weight /= 2.0; /* staleness 1 */
                    k.late = 1;
                    next->c[next->n++] = k;
                } else {
                    o->st.dropped++;
                    gt_mem_free(o->mem, copy.c[i].x);
                }
            } else {
                o->st.dropped++;
                gt_mem_free(o->mem, copy.c[i].x);
            }
        }
    }
    judge_hash(o, r, b);
    return GT_OK;
}

/* Re-sends our kept contributions whose chunk owner changed (a view change or a join), unless
 * the chunk's result is already in. */
static void resend_moved(gt_outer_t *o, uint64_t now_ns)
{
    size_t nc = o->layout->n_chunks;
    for (int i = 0; i < GT_OUTER_SLOTS; i++) {
        send_slot_t *s = &o->send[i];
        if (!s->used || s->applied) continue;
        result_slot_t *rs = result_slot(o, s->round, 0);
        for (size_t c = 0; c < nc; c++) {
            uint32_t owner = owner_of(o, c, s->round);
            if (owner == s->sent_to[c] || !s->frame[c] || (rs && rs->have[c])) continue;
            s->sent_to[c] = owner;
            gt_wan_msg_t m = make_msg(o, GT_WAN_MSG_DELTA, s->round, c);
            o->st.resends++;
            GT_DEBUG("outer: round %llu chunk %zu moved to site %u: re-sent",
                     (unsigned long long)s->round, c, owner);
            send_contribution(o, owner, &m, s->frame[c], s->len[c], now_ns);
        }
    }
}

/* A control frame (JOIN, FIN): a DELTA message whose 24-byte payload is the magic, the
 * protocol version, one 64-bit value and a reserved word. */
static void send_control(gt_outer_t *o, uint32_t dst, uint32_t magic, uint64_t value,
                         uint64_t round, uint64_t now_ns)
{
    uint8_t b[JOIN_PRE];
    gt_le_put32(b, magic);
    gt_le_put32(b + 4, PROTO_VERSION);
    gt_le_put64(b + 8, value);
    gt_le_put64(b + 16, 0);
    gt_wan_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = GT_WAN_MSG_DELTA;
    m.sender = o->p.site_id;
    m.view_epoch = o->epoch;
    m.round = round;
    send_to(o, dst, &m, b, sizeof b, now_ns);
}

static void send_join(gt_outer_t *o, uint32_t dst, uint64_t now_ns)
{
    send_control(o, dst, JOIN_MAGIC, o->first[o->p.site_id], o->first[o->p.site_id], now_ns);
}

/* Site m->sender announces that it contributes from round R on (it joined, or came back). From
 * round R its preferred chunks are its own: what we gathered here for them is given up (their
 * senders re-send to it, and it counts them; late ones, which no sender keeps, are encoded
 * again and passed on); our kept contributions that now go to it are re-sent; results of rounds >=
 * R that we aggregated before we heard of it are replayed to it. */
static gt_status_t take_join(gt_outer_t *o, uint32_t s, uint64_t r, uint64_t epoch, const char *how,
                             uint64_t now_ns);

static gt_status_t on_join(gt_outer_t *o, const gt_wan_msg_t *m, const uint8_t *b, size_t len,
                           uint64_t now_ns)
{
    if (len != JOIN_PRE || gt_le_get32(b + 4) != PROTO_VERSION)
        return bad(o, m, "not a JOIN announcement");
    uint64_t r = gt_le_get64(b + 8);
    uint32_t s = m->sender;
    if (s == o->p.site_id || r == FIRST_UNKNOWN) return bad(o, m, "a JOIN from ourselves");
    return take_join(o, s, r, m->view_epoch, "", now_ns);
}

gt_status_t gt_outer_learn_join(gt_outer_t *o, uint32_t site, uint64_t round, uint64_t now_ns)
{
    if (site >= o->p.n_sites || site == o->p.site_id || round == 0 || round == FIRST_UNKNOWN)
        return GT_ERR_INVALID;
    if (!o->live[site]) return GT_OK; /* not in our view (yet): its JOIN or a later view */
    /* Its JOIN came first, or a later one (a re-plan moves on; etcd said the earlier) */
    if (o->first[site] != FIRST_UNKNOWN && o->first[site] >= round) return GT_OK;
    return take_join(o, site, round, o->epoch, " (announced in etcd)", now_ns);
}

static gt_status_t take_join(gt_outer_t *o, uint32_t s, uint64_t r, uint64_t epoch, const char *how,
                             uint64_t now_ns)
{
    if (o->first[s] == r && receiver(o, s)) return GT_OK; /* a repeat */
    /* A new life of s (or its first announcement): the ledger with it starts again. */
    if (o->fin[s] && o->sent_n[s] > o->fin_n[s]) o->unreceived_before += o->sent_n[s] - o->fin_n[s];
    o->sent_n[s] = o->took_n[s] = o->fin_n[s] = 0;
    o->fin[s] = 0;
    o->first[s] = r;
    o->first_epoch[s] = epoch;
    if (!o->live[s]) {
        o->joined[s] = 1;
        o->joined_epoch[s] = epoch;
    }
    o->st.joins++;
    GT_INFO("outer: site %u joins: it contributes from round %llu on%s", s, (unsigned long long)r,
            how);
    for (size_t i = 0; i < o->n_aggs; i++) {
        agg_t *a = &o->aggs[i];
        if (!a->used || a->closed || a->round < r || owner_of(o, a->chunk, a->round) != s) continue;
        for (uint32_t k = 0; k < a->n; k++) {
            if (!a->c[k].late) continue; /* on-time ones are re-sent to the new owner */
            /* A late one (no sender keeps it any more): encoded again and passed on. */
            const gt_topo_chunk_t *ch = &o->layout->chunks[a->chunk];
            size_t flen = 0;
            uint8_t *fb = o->scratch;
            if (gt_cmp_encode(o->codec, a->c[k].x, ch->count, NULL, fb + DELTA_PRE,
                              o->scratch_cap - DELTA_PRE, &flen) != GT_OK) {
                o->st.dropped++;
                GT_WARN("outer: dropped site %u's late contribution to round %llu chunk %u: it "
                        "cannot be passed on to joining site %u",
                        a->c[k].sender, (unsigned long long)a->round, a->chunk, s);
                continue;
            }
            gt_le_put32(fb, DELTA_MAGIC);
            gt_le_put32(fb + 4, PROTO_VERSION);
            putf64(fb + 8, a->c[k].weight);
            gt_le_put64(fb + 16, a->c[k].hash);
            gt_le_put32(fb + 24, o->p.n_sites);
            gt_le_put32(fb + 28, FLAG_FORWARDED | (a->c[k].sender << 8));
            gt_wan_msg_t fm = make_msg(o, GT_WAN_MSG_DELTA, a->round, a->chunk);
            o->st.forwards++;
            send_to(o, s, &fm, fb, DELTA_PRE + flen, now_ns);
        }
        free_agg(o, a);
    }
    resend_moved(o, now_ns);
    size_t nc = o->layout->n_chunks;
    for (int i = 0; i < RESULT_SLOTS; i++) {
        result_slot_t *rs = &o->res[i];
        if (!rs->used || rs->round < r) continue;
        for (size_t c = 0; c < nc; c++) {
            if (!rs->have[c] || !rs->frame[c] || gt_le_get32(rs->frame[c] + 8) != o->p.site_id)
                continue;
            gt_wan_msg_t rm = make_msg(o, GT_WAN_MSG_RESULT, rs->round, c);
            o->st.forwards++;
            send_to(o, s, &rm, rs->frame[c], rs->len[c], now_ns);
        }
    }
    return gt_outer_progress(o, now_ns);
}

gt_status_t gt_outer_start_at(gt_outer_t *o, uint64_t round, const uint64_t *first, uint64_t now_ns)
{
    uint32_t self = o->p.site_id;
    if (o->submitted || round == FIRST_UNKNOWN || round < o->first[self]) {
        GT_ERROR("outer: start_at(%llu) after a submit, or earlier than round %llu",
                 (unsigned long long)round, (unsigned long long)o->first[self]);
        return GT_ERR_INVALID;
    }
    o->first[self] = round;
    for (uint32_t s = 0; first && s < o->p.n_sites; s++)
        if (s != self) o->first[s] = o->live[s] ? first[s] : FIRST_UNKNOWN;
    for (uint32_t s = 0; s < o->p.n_sites; s++)
        if (s != self && o->live[s]) send_join(o, s, now_ns);
    return gt_outer_progress(o, now_ns);
}

void gt_outer_first_rounds(const gt_outer_t *o, uint64_t *first)
{
    for (uint32_t s = 0; s < o->p.n_sites; s++)
        first[s] = receiver(o, s) ? o->first[s] : FIRST_UNKNOWN;
}

/* Site m->sender finished: it took b's count of the DELTA frames we sent it, and takes no more. */
static gt_status_t on_fin(gt_outer_t *o, const gt_wan_msg_t *m, const uint8_t *b, size_t len)
{
    uint32_t s = m->sender;
    if (len != FIN_PRE || gt_le_get32(b + 4) != PROTO_VERSION || s == o->p.site_id)
        return bad(o, m, "not a FIN");
    uint64_t took = gt_le_get64(b + 8);
    if (took > o->sent_n[s]) /* a count from before our own restart, or a faulty peer */
        GT_WARN("outer: site %u finished and says it took %llu contributions from this site, "
                "which sent it %llu",
                s, (unsigned long long)took, (unsigned long long)o->sent_n[s]);
    o->fin[s] = 1;
    o->fin_n[s] = took;
    GT_DEBUG("outer: site %u finished; it took %llu of the %llu contributions sent to it so far", s,
             (unsigned long long)took, (unsigned long long)o->sent_n[s]);
    return GT_OK;
}

void gt_outer_finish(gt_outer_t *o, uint64_t now_ns)
{
    if (!o || o->finished) return;
    o->finished = 1;
    for (uint32_t s = 0; s < o->p.n_sites && s < GT_OUTER_MAX_SITES; s++) {
        if (s == o->p.site_id || !receiver(o, s)) continue;
        send_control(o, s, FIN_MAGIC, o->took_n[s], o->last_round == UINT64_MAX ? 0 : o->last_round,
                     now_ns);
    }
}

static gt_status_t deliver_local(gt_outer_t *o, const gt_wan_msg_t *msg, const void *buf,
                                 size_t len, uint64_t now_ns)
{
    if (msg->lane >= o->layout->n_lanes || msg->sender >= o->p.n_sites)
        return bad(o, msg, "lane or sender out of range");
    if (msg->type == GT_WAN_MSG_DELTA && len >= 4 && gt_le_get32(buf) == JOIN_MAGIC)
        return on_join(o, msg, buf, len, now_ns);
    if (msg->type == GT_WAN_MSG_DELTA && len >= 4 && gt_le_get32(buf) == FIN_MAGIC)
        return on_fin(o, msg, buf, len);
    const gt_topo_chunk_t *ch = chunk_at(o, msg->lane, msg->chunk);
    if (!ch) return bad(o, msg, "chunk out of range");
    size_t c = (size_t)(ch - o->layout->chunks);
    if (msg->type == GT_WAN_MSG_DELTA && len >= 4 && gt_le_get32(buf) == PULL_MAGIC)
        return on_pull(o, msg, buf, len, c, now_ns);
    if (msg->type == GT_WAN_MSG_DELTA) return on_delta(o, msg, buf, len, c, now_ns);
    if (msg->type == GT_WAN_MSG_RESULT) return on_result(o, msg, buf, len, now_ns, c);
    return bad(o, msg, "unexpected message type");
}

gt_status_t gt_outer_deliver(gt_outer_t *o, const gt_wan_msg_t *msg, const void *buf, size_t len,
                             uint64_t now_ns)
{
    o->st.bytes_received += len;
    return deliver_local(o, msg, buf, len, now_ns);
}

/* Completes slot r's decoded vector: chunks that arrived while no buffer was free are decoded
 * now (they decoded on arrival, so a failure here is memory corruption). */
static gt_status_t finish_decoded(gt_outer_t *o, result_slot_t *r)
{
    if (!take_decoded(o, r)) {
        /* every buffer is held by rounds not applied yet: make one more */
        r->g = gt_mem_alloc(o->mem, o->n * sizeof(float), 0);
        if (!r->g) return GT_ERR_NOMEM;
        o->n_decoded++;
    }
    for (size_t c = 0; c < o->layout->n_chunks; c++) {
        if (r->dec[c]) continue;
        const gt_topo_chunk_t *ch = &o->layout->chunks[c];
        gt_status_t st = gt_cmp_decode(o->codec, r->frame[c] + RESULT_PRE, r->len[c] - RESULT_PRE,
                                       r->g + ch->offset, ch->count);
        if (st != GT_OK) return st;
        r->dec[c] = 1;
    }
    return GT_OK;
}

static void mark_applied(gt_outer_t *o, result_slot_t *r, uint64_t round)
{
    r->applied = 1;
    send_slot_t *s = send_slot(o, round);
    if (!s) return;
    s->applied = 1;
    /* Its frames were kept for re-sends to a chunk's new owner (resend_moved), which end with
     * the round: an applied round's are never sent again, so they go now rather than when the
     * slot is reused GT_OUTER_SLOTS rounds later. */
    for (size_t c = 0; c < o->layout->n_chunks; c++) {
        gt_mem_free(o->mem, s->frame[c]);
        s->frame[c] = NULL;
        s->len[c] = 0;
    }
}

/* The RESULT frames of applied rounds RELAY_ROUNDS or more before `round` (just applied). */
static void drop_old_frames(gt_outer_t *o, uint64_t round)
{
    for (int i = 0; i < RESULT_SLOTS; i++) {
        result_slot_t *r = &o->res[i];
        if (!r->used || !r->applied || r->round + RELAY_ROUNDS > round) continue;
        for (size_t c = 0; c < o->layout->n_chunks; c++) {
            gt_mem_free(o->mem, r->frame[c]);
            r->frame[c] = NULL;
            r->len[c] = 0;
        }
    }
}

gt_status_t gt_outer_result(gt_outer_t *o, uint64_t round, float *g)
{
    result_slot_t *r = result_slot(o, round, 0);
    if (!r || r->n_have < o->layout->n_chunks) return GT_ERR_AGAIN;
    gt_status_t st = finish_decoded(o, r);
    if (st != GT_OK) return st;
    memcpy(g, r->g, o->n * sizeof *g);
    release_decoded(o, r);
    mark_applied(o, r, round);
    drop_old_frames(o, round);
    return GT_OK;
}

gt_status_t gt_outer_result_swap(gt_outer_t *o, uint64_t round, float **g_io)
{
    result_slot_t *r = result_slot(o, round, 0);
    if (!r || r->n_have < o->layout->n_chunks) return GT_ERR_AGAIN;
    gt_status_t st = finish_decoded(o, r);
    if (st != GT_OK) return st;
    float *mine = *g_io;
    *g_io = r->g;
    r->g = mine; /* the caller's buffer becomes a spare */
    if (r->g)
        release_decoded(o, r);
    else
        o->n_decoded--;
    memset(r->dec, 0, o->layout->n_chunks);
    mark_applied(o, r, round);
    drop_old_frames(o, round);
    return GT_OK;
}

int gt_outer_result_gone(const gt_outer_t *o, uint64_t round)
{
    const result_slot_t *r = &o->res[round % RESULT_SLOTS];
    return r->used && r->round > round;
}

uint32_t gt_outer_rounds_kept(void)
{
    return RESULT_SLOTS;
}

size_t gt_outer_missing(const gt_outer_t *o, uint64_t round, char *buf, size_t cap)
{
    const result_slot_t *r = &o->res[round % RESULT_SLOTS];
    int held = r->used && r->round == round;
    size_t nc = o->layout->n_chunks, missing = 0, at = 0;
    if (cap) buf[0] = '\0';
    for (size_t c = 0; c < nc; c++) {
        if (held && r->have[c]) continue;
        missing++;
        if (at + 1 < cap) {
            int k = snprintf(buf + at, cap - at, "%s%zu (site %u)", at ? ", " : "", c,
                             owner_of(o, c, round));
            at = k < 0 ? cap : at + (size_t)k;
        }
    }
    return missing;
}

uint64_t gt_outer_missing_owners(const gt_outer_t *o, uint64_t round)
{
    const result_slot_t *r = &o->res[round % RESULT_SLOTS];
    int held = r->used && r->round == round;
    uint64_t mask = 0;
    for (size_t c = 0; c < o->layout->n_chunks; c++) {
        uint32_t owner = owner_of(o, c, round);
        if (!(held && r->have[c]) && owner < 64) mask |= 1ull << owner;
    }
    return mask;
}

double gt_outer_exchange_s(const gt_outer_t *o, uint64_t round)
{
    const result_slot_t *r = &o->res[round % RESULT_SLOTS];
    if (!r->used || r->round != round || !r->submit_ns || !r->done_ns) return NAN;
    return r->done_ns > r->submit_ns ? (double)(r->done_ns - r->submit_ns) * 1e-9 : 0.0;
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

int gt_outer_hash_verdict(const gt_outer_t *o, uint64_t round)
{
    const result_slot_t *r = &o->res[(round + 1) % RESULT_SLOTS];
    return r->used && r->round == round + 1 ? r->verdict : 0;
}

gt_status_t gt_outer_set_view(gt_outer_t *o, uint64_t epoch, const uint32_t *live, uint32_t n_live,
                              uint64_t now_ns)
{
    return gt_outer_set_view_restarts(o, epoch, live, n_live, 0, now_ns);
}

gt_status_t gt_outer_set_view_restarts(gt_outer_t *o, uint64_t epoch, const uint32_t *live,
                                       uint32_t n_live, uint64_t restarted, uint64_t now_ns)
{
    if (epoch <= o->epoch && o->epoch != 0) return GT_OK;
    /* The open rounds of chunks that are ours before the change (see the end). */
    uint8_t *was_mine = o->n_aggs ? calloc(o->n_aggs, 1) : NULL;
    for (size_t i = 0; was_mine && i < o->n_aggs; i++)
        was_mine[i] = o->aggs[i].used && !o->aggs[i].closed &&
                      owner_of(o, o->aggs[i].chunk, o->aggs[i].round) == o->p.site_id;
    /* Each chunk's owner for the newest round in flight, before the change (see the end). */
    size_t nchunks = o->layout->n_chunks;
    uint64_t flight = o->peer_next ? o->peer_next - 1 : 0;
    uint32_t *owner_was = o->p.handover_ms ? malloc(nchunks * sizeof *owner_was) : NULL;
    for (size_t c = 0; owner_was && c < nchunks; c++) owner_was[c] = owner_of(o, c, flight);
    uint8_t old_live[GT_OUTER_MAX_SITES];
    memcpy(old_live, o->live, sizeof old_live);
    memset(o->live, 0, sizeof o->live);
    int self = 0;
    for (uint32_t i = 0; i < n_live; i++) {
        if (live[i] >= o->p.n_sites) {
            GT_ERROR("outer: view %llu names site %u of %u", (unsigned long long)epoch, live[i],
                     o->p.n_sites);
            return GT_ERR_INVALID;
        }
        o->live[live[i]] = 1;
        self |= live[i] == o->p.site_id;
    }
    if (!self) {
        memcpy(o->live, old_live, sizeof old_live);
        free(was_mine);
        free(owner_was);
        GT_ERROR("outer: view %llu does not include this site (%u)", (unsigned long long)epoch,
                 o->p.site_id);
        return GT_ERR_INVALID;
    }
    o->epoch = epoch;
    o->n_live = n_live;
    GT_DEBUG("outer: view %llu: %u live sites", (unsigned long long)epoch, n_live);
    for (uint32_t s = 0; s < o->p.n_sites; s++) {
        if (s == o->p.site_id) continue;
        /* Restarted (a new incarnation, in this view for the first time): what it announced
         * before, and the chunks it owned, were its previous life's — unless the new one has
         * announced already (from this view or a later one). */
        int reborn = ((restarted >> s) & 1) && old_live[s] && o->live[s] &&
                     !(o->first[s] != FIRST_UNKNOWN && o->first_epoch[s] >= epoch);
        if (reborn) old_live[s] = 2; /* its results are forwarded below, as a leaver's */
        int gone = (old_live[s] && !o->live[s]) || reborn ||
                   (o->joined[s] && !o->live[s] && epoch >= o->joined_epoch[s]);
        if (gone) { /* it left (or announced from a view this one replaces, or restarted): a
                       comeback announces its first round again */
            o->first[s] = FIRST_UNKNOWN;
            o->joined[s] = 0;
            o->seen_round[s] = 0; /* what a comeback has applied is not known */
        } else if (o->live[s]) {
            o->joined[s] = 0;
            /* A joiner announces itself to the sites that enter its view after it started. */
            if (!old_live[s] && o->first[o->p.site_id] > 0) send_join(o, s, now_ns);
        }
    }
    size_t nc = o->layout->n_chunks;
    /* Results whose owner left: forward them, so every site applies the same bytes. Only its
     * last two rounds: an owner that died in the middle of a broadcast did so in its latest
     * closes; everything before went to every site when it closed. */
    uint64_t newest[GT_OUTER_MAX_SITES] = {0};
    for (int i = 0; i < RESULT_SLOTS; i++)
        for (size_t c = 0; o->res[i].used && c < nc; c++) {
            if (!o->res[i].have[c] || !o->res[i].frame[c]) continue;
            uint32_t owner = gt_le_get32(o->res[i].frame[c] + 8);
            if (owner < o->p.n_sites && o->res[i].round > newest[owner])
                newest[owner] = o->res[i].round;
        }
    for (int i = 0; i < RESULT_SLOTS; i++) {
        result_slot_t *r = &o->res[i];
        for (size_t c = 0; r->used && c < nc; c++) {
            if (!r->have[c] || !r->frame[c]) continue;
            uint32_t owner = gt_le_get32(r->frame[c] + 8);
            if (owner < o->p.n_sites && old_live[owner] &&
                (!o->live[owner] || old_live[owner] == 2) && r->round + 1 >= newest[owner]) {
                gt_wan_msg_t m = make_msg(o, GT_WAN_MSG_RESULT, r->round, c);
                for (uint32_t s = 0; s < o->p.n_sites; s++) {
                    if (!receiver(o, s) || s == o->p.site_id) continue;
                    /* A site that sent us a contribution to round q had applied round q - 1
                     * (a site submits a round only after applying the one before; a joiner
                     * fetched that anchor): it holds this result, and on a WAN a result chunk
                     * can be hundreds of MB. */
                    if (o->seen_round[s] >= r->round + 2) continue;
                    o->st.forwards++;
                    GT_DEBUG("outer: forwarded round %llu chunk %zu's result (owner %u left) to "
                             "site %u",
                             (unsigned long long)r->round, c, owner, s);
                    send_to(o, s, &m, r->frame[c], r->len[c], now_ns);
                }
            }
        }
    }
    /* A round of a chunk that has just become ours may hold contributions that came before our
     * view did (a peer whose view changed first re-sent them here): its deadline runs from now,
     * not from their arrival. Else the first close below — one of our own re-sends completing
     * another chunk — found it past its deadline, and closed it without our contribution, which
     * was still to be re-sent in the same loop (seen: "closing round 15 chunk 3 at the deadline
     * with 1 of 2 sites" 0.4 s after the owner's eviction; ours then folded late). */
    for (size_t i = 0; was_mine && i < o->n_aggs; i++) {
        agg_t *a = &o->aggs[i];
        if (a->used && !a->closed && a->first_ns && !was_mine[i] &&
            owner_of(o, a->chunk, a->round) == o->p.site_id) {
            a->first_ns = now_ns;
            if (a->quorum_ns) a->quorum_ns = now_ns;
        }
    }
    free(was_mine);
    /* Chunks that came to us from a site that left (or restarted: its old life's chunks are a
     * leaver's): a peer may hold the leaver's own result of
     * a round in flight (it closed and sent it to some sites before it went) and forwards it
     * when its view changes (above, at that peer). Closed at once here, our result could differ
     * from the one that peer applies; held for params.handover_ms, the forward arrives first and
     * is the result everyone applies (on_result takes it over our open aggregation). */
    for (size_t c = 0; owner_was && c < nchunks; c++) {
        uint32_t was = owner_was[c];
        if (was != o->p.site_id && was < o->p.n_sites && (!o->live[was] || old_live[was] == 2) &&
            owner_of(o, c, flight) == o->p.site_id) {
            o->handover_ns[c] = now_ns + (uint64_t)o->p.handover_ms * 1000000ull;
            o->handover_upto[c] = flight + 1;
        }
    }
    free(owner_was);
    /* Our contributions whose owner changed: re-send the kept frames. */
    resend_moved(o, now_ns);
    return gt_outer_progress(o, now_ns);
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
            if (active(o, s, o->last_round) && !(o->final_from[c] >> s & 1) &&
                o->seen_round[s] >= o->last_round) /* it sent round last - 1: the last is next */
                n++;
    }
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
