/* outer_internal.h — the outer-round engine's state and the functions its files share.
 *
 * One engine is one struct (struct gt_outer) that every file of outer/ works on: outer.c
 * (create, submit, the dispatch of deliveries, accessors), wire.c (the preambles), owner.c
 * (the owner's side), site.c (every site's side), views.c (views, joins, FIN); policy.c holds
 * the rules as pure functions and sees none of this. The split follows the roles of a site, not
 * layers: each file reads and writes the fields of its role, and shares the few helpers below.
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
 */
#ifndef GT_OUTER_INTERNAL_H
#define GT_OUTER_INTERNAL_H

#include "gt_outer.h"
#include "gt_topology.h"

#include <stddef.h>
#include <stdint.h>

/* ---- the wire (wire.c): every payload starts with a magic and the protocol version ----
 *
 * JOIN, FIN and PULL are message types of their own; each payload starts with its magic too. */
#define DELTA_MAGIC           0x444F5447u /* "GTOD" */
#define RESULT_MAGIC          0x524F5447u /* "GTOR" */
#define JOIN_MAGIC            0x4A4F5447u /* "GTOJ": a joining site announces its first round */
#define FIN_MAGIC             0x464F5447u /* "GTOF": a site that finished says how many DELTAs it took */
#define PULL_MAGIC            0x514F5447u /* "GTOQ": a site asks a peer for a RESULT chunk it lacks */
#define PROTO_VERSION         2u  /* 2: a RESULT lists the late contributions folded into it */
#define DELTA_PRE             32u /* magic, version, weight, anchor hash, n_sites, flags */
#define RESULT_PRE            56u /* magic, version, owner, count, mask, hash, votes, folded, sums */
/* A RESULT's preamble is followed by one entry per late contribution folded into it (`folded`
 * of them: contributor u8, 0 u8, rounds back u16 — its own round is the result's round minus
 * that; 0: not known), then the codec frame. A site that holds the result so knows those
 * contributions are taken: one re-sent later to another owner (its first owner left before the
 * sender had the result of the contribution's own round) is a duplicate, not a late one to fold
 * again (issue 31's soak, seed 58031987: 640 tokens counted twice). */
#define RESULT_FOLD_BYTES     4u
#define CONTROL_PRE           24u /* JOIN and FIN: magic, version, one 64-bit value, reserved */
#define JOIN_PRE              CONTROL_PRE /* the value: the first round */
#define FIN_PRE               CONTROL_PRE /* the value: DELTA frames taken from the receiver */
#define PULL_PRE              16u         /* magic, version, reserved */
/* DELTA preamble flags: a late contribution passed on to the owner of the round it folds into
 * (contributor in bits 8-15, the rounds between its own round and that one in bits 16-23, 0
 * when not known); never passed on again. */
#define FLAG_FORWARDED        1u
/* DELTA preamble flags: a contribution sent through a peer (its owner was unreachable from its
 * sender: a cut link); the peer passes it on to the site in bits 16-23 as sent, adding
 * FLAG_PASSED and the contributor in bits 8-15, and the owner takes it as if it had come
 * straight from there. A passed frame is never passed on again. */
#define FLAG_DETOUR           2u
#define FLAG_PASSED           4u
#define FLAGS(bits, from, to) ((uint32_t)(bits) | (uint32_t)(from) << 8 | (uint32_t)(to) << 16)
#define FLAGS_FROM(f)         (((f) >> 8) & 0xFFu)
#define FLAGS_TO(f)           (((f) >> 16) & 0xFFu)

/* A DELTA preamble. */
typedef struct {
    double weight;        /* tokens, divided by 1 + staleness when folded and passed on */
    uint64_t anchor_hash; /* the sender's anchor after round - 1 */
    uint32_t n_sites;     /* the sender's configured sites: the layouts must agree */
    uint32_t flags;       /* FLAG_*, contributor and destination */
} outer_delta_t;

/* A RESULT preamble. */
typedef struct {
    uint32_t owner;      /* the site that aggregated it */
    uint32_t n_contrib;  /* on time + folded */
    uint64_t mask;       /* the on-time contributors (bit s) */
    uint64_t best_hash;  /* the majority anchor hash of the on-time contributors */
    uint32_t best_votes; /* its votes */
    uint32_t folded;     /* late contributions folded in */
    double wsum;         /* the weights summed */
    double tokens;       /* the tokens behind the contributions, as sent */
} outer_result_t;

/* The magic a payload starts with (0 when shorter than 4 bytes). */
uint32_t outer_wire_magic(const void *buf, size_t len);
void outer_delta_pack(uint8_t b[DELTA_PRE], const outer_delta_t *d);
/* 1 and *d_p when b is a DELTA payload of this version (len, magic, version), else 0. */
int outer_delta_unpack(const uint8_t *b, size_t len, outer_delta_t *d_p);
/* Rewrites the flags, or the weight, of a packed DELTA (a copy passed on). */
void outer_delta_set_flags(uint8_t *b, uint32_t flags);
void outer_delta_set_weight(uint8_t *b, double weight);
void outer_result_pack(uint8_t b[RESULT_PRE], const outer_result_t *r);
/* 1 and *r_p when b is a RESULT payload of this version, else 0. */
int outer_result_unpack(const uint8_t *b, size_t len, outer_result_t *r_p);
/* The owner of a RESULT frame already checked (a kept one). */
uint32_t outer_result_owner(const uint8_t *b);
/* Where the codec frame of a RESULT frame already checked begins (after its folded list). */
size_t outer_result_frame_at(const uint8_t *b);
/* Entry i of a RESULT's folded list: write (b: the frame) and read. */
void outer_result_fold_put(uint8_t *b, uint32_t i, uint32_t sender, uint32_t back);
void outer_result_fold_get(const uint8_t *b, uint32_t i, uint32_t *sender_p, uint32_t *back_p);
void outer_control_pack(uint8_t b[CONTROL_PRE], uint32_t magic, uint64_t value);
/* 1 and *value_p when b is a JOIN or FIN of this version and size (the magic is the caller's
 * dispatch), else 0. */
int outer_control_unpack(const uint8_t *b, size_t len, uint32_t magic, uint64_t *value_p);
void outer_pull_pack(uint8_t b[PULL_PRE]);
int outer_pull_unpack(const uint8_t *b, size_t len);

/* ---- engine limits ---- */
#define FIRST_UNKNOWN UINT64_MAX /* a site that has not announced when it contributes */
#define RESULT_SLOTS  16 /* rounds of results kept (compressed): how far a slow site may lag */
#define DECODED_MAX   4  /* rounds whose results are held decoded at once (normally 1-2) */
/* An applied round's RESULT frames are kept this many rounds (the round itself included) for
 * relays to a peer whose link to the owner is cut and forwards of a leaver's results; older
 * ones are freed (the slot's record of which chunks it had stays, for result_gone and the
 * duplicate check). Kept for all RESULT_SLOTS rounds they cost a compressed copy of the vector
 * a round: 16 B/param at int8 once a run is 16 rounds in. */
#define RELAY_ROUNDS  3

typedef struct {
    uint32_t sender;
    uint32_t via;  /* the site it came from (the sender, or the site that passed a detour on) */
    double weight; /* already divided by 1 + staleness when folded */
    double tokens; /* the weight as sent: the tokens behind it, for goodput */
    int late;
    uint64_t from; /* the round it was sent for (UINT64_MAX: not known, a forward of old) */
    uint64_t hash; /* sender's anchor hash for round-1 */
    uint8_t *x;    /* its codec frame (xlen bytes), decoded when the chunk closes */
    size_t xlen;
    double norm; /* of the decoded values, taken on arrival (the clip's median) */
    int finite;  /* no NaN or Inf among them (else rejected at the close) */
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
    int held;     /* taken with gt_outer_result_hold: its frames stay until released */
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
    int started_at;      /* gt_outer_start_at was called: first_life is set */
    uint64_t first_life; /* this life's first round at its first start_at (re-plans move
                            first[self] on, not this): DELTAs of rounds before it were sent to
                            an earlier life of this site, under a ledger its peers restarted */
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
    double *acc; /* max_chunk: close_agg's sums */
    size_t max_chunk;
    /* gt_outer_encode's own (it runs beside the WAN thread's decodes and aggregations, which
     * use codec and xbuf): a codec, a chunk of Δ, and the DELTA frames it staged for
     * stage_round until gt_outer_post moves them into the round's send slot. */
    gt_cmp_ctx_t *enc_codec;
    float *enc_xbuf;
    uint8_t **stage_frame;
    size_t *stage_len;
    uint64_t stage_round, stage_hash;
    double stage_weight;
    int staged;
    /* what the buffers that grow with n hold (residuals, frames, decoded results,
     * contributions): params.mem, or the engine's own count */
    gt_mem_count_t *mem, own_mem;
    gt_outer_stats_t st;
};

/* ---- shared helpers ---- */

/* outer.c */
const gt_topo_chunk_t *outer_chunk_at(const gt_outer_t *o, uint32_t lane, uint32_t j);
int outer_active(const gt_outer_t *o, uint32_t s, uint64_t r);
int outer_receiver(const gt_outer_t *o, uint32_t s);
uint32_t outer_n_active(const gt_outer_t *o, uint64_t r);
uint32_t outer_owner_of(const gt_outer_t *o, size_t c, uint64_t r);
void outer_send_to(gt_outer_t *o, uint32_t dst, const gt_wan_msg_t *msg, const void *buf,
                   size_t len, uint64_t now_ns);
gt_wan_msg_t outer_make_msg(const gt_outer_t *o, uint8_t type, uint64_t round, size_t c);
gt_status_t outer_bad(gt_outer_t *o, const gt_wan_msg_t *m, const char *why);

/* owner.c */
void outer_free_agg(gt_outer_t *o, agg_t *a);
agg_t *outer_find_agg(gt_outer_t *o, uint64_t round, size_t c, int create);
gt_status_t outer_on_delta(gt_outer_t *o, const gt_wan_msg_t *m, const uint8_t *b, size_t len,
                           size_t c, uint64_t now_ns);

/* site.c */
void outer_send_contribution(gt_outer_t *o, uint32_t owner, const gt_wan_msg_t *m,
                             const uint8_t *frame, size_t len, uint64_t now_ns);
result_slot_t *outer_result_slot(gt_outer_t *o, uint64_t round, int create);
void outer_judge_hash(gt_outer_t *o, result_slot_t *r, const outer_result_t *res);
gt_status_t outer_on_result(gt_outer_t *o, const gt_wan_msg_t *m, const uint8_t *b, size_t len,
                            uint64_t now_ns, size_t c);
void outer_pull_missing(gt_outer_t *o, uint64_t dl, uint64_t now_ns);
gt_status_t outer_on_pull(gt_outer_t *o, const gt_wan_msg_t *m, const uint8_t *b, size_t len,
                          size_t c, uint64_t now_ns);

/* views.c */
gt_status_t outer_on_join(gt_outer_t *o, const gt_wan_msg_t *m, const uint8_t *b, size_t len,
                          uint64_t now_ns);
gt_status_t outer_on_fin(gt_outer_t *o, const gt_wan_msg_t *m, const uint8_t *b, size_t len);

#endif /* GT_OUTER_INTERNAL_H */
