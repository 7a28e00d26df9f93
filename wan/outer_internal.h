/* outer_internal.h — the outer-round protocol (DESIGN.md §1, §3): DELTA to chunk owners,
 * robust weighted aggregation, RESULT to every site.
 *
 * Transport-independent: the engine sends through an io callback and is fed incoming
 * messages with gt_wan_outer_deliver, so the same code runs over the secure channel and in
 * deterministic in-process tests. It owns no model state: the caller (local/) submits its
 * pseudo-gradient Δ = θ_a − θ_s for a round, later reads the agreed g for that round, and
 * applies the outer optimizer itself.
 *
 * Chunks. The layout is fixed for the whole run: L lanes, each cut into one chunk per
 * *configured* site, so chunk boundaries never move when sites come and go. Chunk j of lane l
 * is preferably owned by site (l + j) mod S_cfg; when that site is not live, by the next live
 * site in cyclic order. So a view change moves only the dead site's chunks, and senders re-send
 * the frames they kept to the new owner.
 *
 * Rounds. An owner closes (round, chunk) when every live site has contributed, or when the
 * adaptive deadline has passed since the first contribution and a quorum has contributed. The
 * deadline is median + k·MAD, within [min, max], of the live sites' typical lateness (a moving
 * average per site of how long after a chunk's first contribution theirs arrives): robust
 * across sites, so a chronic straggler is an outlier the others stop waiting for rather than
 * a sample that stretches everyone's deadline. It is never longer than twice the time the
 * quorum took to arrive (which is also the deadline before two sites have history). A contribution
 * for a closed round is folded into the lowest open round of the same chunk with weight w/(1 +
 * staleness), or dropped (outer.late). NaN/Inf contributions are rejected; norms above clip_k ×
 * median are scaled down. Results are final: a site that holds a RESULT whose owner died forwards
 * it, so the others apply the same bytes.
 */
#ifndef GT_WAN_OUTER_INTERNAL_H
#define GT_WAN_OUTER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gt_base.h"
#include "gt_compress.h"
#include "gt_wan.h"

#define GT_WAN_OUTER_MAX_SITES 64
#define GT_WAN_OUTER_SLOTS     4 /* rounds an owner or sender keeps at once */

typedef struct {
    void *ctx;
    /* Sends a message to site `dst` (never to this site: the engine delivers to itself).
     * buf may be reused after the call returns (the callee copies or completes it). A failure
     * is counted and otherwise ignored: the view change that follows a lost peer re-sends. */
    gt_status_t (*send)(void *ctx, uint32_t dst, const gt_wan_msg_t *msg, const void *buf,
                        size_t len);
} gt_wan_outer_io_t;

typedef struct {
    uint32_t site_id;         /* this site, 0 .. n_sites-1 */
    uint32_t n_sites;         /* configured sites (fixes the chunk layout) */
    size_t n_params;          /* length of the flat vector */
    uint32_t n_lanes;         /* wan.lanes */
    gt_cmp_params_t codec;    /* for DELTA and RESULT payloads */
    double quorum;            /* outer.quorum: (0, 1] of live sites */
    uint32_t deadline_min_ms; /* outer.deadline_min_ms */
    uint32_t deadline_max_ms; /* outer.deadline_max_ms */
    double deadline_mad_k;    /* outer.deadline_mad_k */
    double clip_k;            /* outer.clip_k; 0 = no clipping */
    int late_fold;            /* outer.late: 1 fold, 0 drop */
    gt_wan_outer_io_t io;
} gt_wan_outer_params_t;

typedef struct {
    uint64_t deltas_sent, results_sent, resends, forwards; /* messages */
    uint64_t bytes_sent, bytes_received;                   /* payload bytes */
    /* As an owner, every contribution received ends in exactly one of these. */
    uint64_t on_time, late, dropped, rejected, clipped;
    uint64_t hash_checks, hash_mismatches; /* this site's anchor against the majority */
    uint64_t bad_messages;                 /* malformed payloads, rejected and logged */
    uint64_t stale_results;                /* RESULTs for a round already applied */
} gt_wan_outer_stats_t;

typedef struct gt_wan_outer gt_wan_outer_t;

gt_status_t gt_wan_outer_create(const gt_wan_outer_params_t *params,
                                gt_wan_outer_t **outer_p) GT_MUST_USE;
void gt_wan_outer_destroy(gt_wan_outer_t *o);

/* Installs view `epoch` with the live sites (any order; this site must be among them).
 * Re-sends kept contributions whose chunk owner changed and forwards results whose owner
 * left. Views older than the current one are ignored. */
gt_status_t gt_wan_outer_set_view(gt_wan_outer_t *o, uint64_t epoch, const uint32_t *live,
                                  uint32_t n_live, uint64_t now_ns) GT_MUST_USE;

/* Submits this site's pseudo-gradient for `round` (rounds start at 0 and increase by one):
 * delta[0, n_params), weighted by `weight` (tokens). `anchor_hash` is the hash of this site's
 * anchor after applying round-1 (ignored for round 0). Encodes with error feedback against the
 * engine's residual and sends every chunk to its owner. */
gt_status_t gt_wan_outer_submit(gt_wan_outer_t *o, uint64_t round, const float *delta,
                                double weight, uint64_t anchor_hash, uint64_t now_ns) GT_MUST_USE;

/* Feeds one received message (DELTA or RESULT). Hostile input is rejected, counted in
 * bad_messages and logged; it never changes state. */
gt_status_t gt_wan_outer_deliver(gt_wan_outer_t *o, const gt_wan_msg_t *msg, const void *buf,
                                 size_t len, uint64_t now_ns);

/* Closes the rounds that are due and sends their results. Call often. */
gt_status_t gt_wan_outer_progress(gt_wan_outer_t *o, uint64_t now_ns);

/* GT_OK and g[0, n_params) when every chunk of `round` has arrived; GT_ERR_AGAIN before.
 * After it returns GT_OK the round counts as applied here. */
gt_status_t gt_wan_outer_result(gt_wan_outer_t *o, uint64_t round, float *g) GT_MUST_USE;

/* The earliest time a pending close is due (for the caller's wait), or UINT64_MAX. */
uint64_t gt_wan_outer_next_deadline(const gt_wan_outer_t *o);

/* The hash verdict for this site's anchor after `round`: 1 agreed with the majority of the
 * contributions seen by owners, -1 disagreed (re-fetch the anchor), 0 not known yet. */
int gt_wan_outer_hash_verdict(const gt_wan_outer_t *o, uint64_t round);

void gt_wan_outer_stats(const gt_wan_outer_t *o, gt_wan_outer_stats_t *stats_p);

/* The site that owns (lane, chunk) under the current view. */
uint32_t gt_wan_outer_owner(const gt_wan_outer_t *o, uint32_t lane, uint32_t chunk);

/* 64-bit hash of a float vector's bytes (xxh3), for the anchor check. */
uint64_t gt_wan_outer_hash(const float *x, size_t n);

#endif /* GT_WAN_OUTER_INTERNAL_H */
