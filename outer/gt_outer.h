/* gt_outer.h — the outer-round protocol, the one public header of outer/ (map: outer/README.md).
 *
 * A sans-IO engine: it takes messages in (gt_outer_deliver), hands messages out through the
 * io callback it was given, and closes rounds when the caller drives it (gt_outer_progress)
 * with the time. It uses wan/'s message header (gt_wan_msg_t) and nothing else of the pipe, so
 * the same code runs over the mesh and in deterministic in-process tests. The round policy
 * (chunk owner, adaptive deadline, quorum, close-due, lateness) is also exposed as pure
 * functions over plain values, so a planner or simulator calls the same rules the sites run.
 */
#ifndef GT_OUTER_H
#define GT_OUTER_H

#include <stddef.h>
#include <stdint.h>

#include "gt_base.h"
#include "gt_compress.h"
#include "gt_wan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the outer-round protocol (docs/design.md §1, §4): DELTA to chunk owners,
 * robust weighted aggregation, RESULT to every site.
 *
 * Transport-independent: the engine sends through an io callback and is fed incoming
 * messages with gt_outer_deliver, so the same code runs over the secure channel and in
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
 *
 * Joins. Every configured site contributes from round 0 unless it announces a later first round:
 * a site that starts late or comes back after dying calls gt_outer_start_at(R) before its
 * first submit, which sends a JOIN announcement (a DELTA message with its own payload magic) to
 * every site of its view, again to sites that enter its view later. Site s takes part in round r
 * when it is in the view (or announced before the view has it) and its first round is <= r;
 * ownership, completeness and quorum of round r count exactly those sites. So a joiner owns its
 * preferred chunks from round R on and never for a round already in flight; the previous owner
 * gives up what it gathered for (round >= R, those chunks) — the senders re-send to the joiner,
 * which counts them — and replays the results of rounds >= R it closed before it heard of the
 * joiner. A late contribution that folds into a round the joiner owns is passed on to it once.
 * A site that leaves the view forgets its first round: coming back means announcing again.
 */

#define GT_OUTER_MAX_SITES     64
#define GT_OUTER_MAX_FRAGMENTS 64 /* engines a port multiplexes (outer.fragments) */
#define GT_OUTER_SLOTS         4  /* rounds an owner or sender keeps at once */

typedef struct {
    void *ctx;
    /* Sends a message to site `dst` (never to this site: the engine delivers to itself).
     * buf may be reused after the call returns (the callee copies or completes it). A failure
     * is counted and otherwise ignored: the view change that follows a lost peer re-sends. */
    gt_status_t (*send)(void *ctx, uint32_t dst, const gt_wan_msg_t *msg, const void *buf,
                        size_t len);
    /* Optional (NULL: not known): 0 when this site has no working connection to `site` now
     * (gt_wan_mesh_peer_ready). A result chunk whose owner is unreachable is asked of another
     * peer at once rather than after a straggler deadline (see gt_outer_progress). */
    int (*reachable)(void *ctx, uint32_t site);
} gt_outer_io_t;

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
    /* After a view change hands this site the chunks of a site that left, how long it holds
     * their rounds in flight open before closing them without it (ms; 0: no hold). A peer that
     * received the leaver's own RESULT for such a chunk forwards it when its view changes, at
     * most about a membership heartbeat later; closed at once, the new owner's result could
     * differ from the one that peer applies (I1). A joiner holds the chunks of its first round
     * as long from their first contribution, for a result of a peer that aggregated them before
     * it heard of the join. */
    uint32_t handover_ms;
    gt_outer_io_t io;
    /* A site of several ranks (docs/design.md §4): n_params and n_lanes describe the whole vector,
     * cut by topology/layout.c, and this engine carries rank `rank`'s lanes of `ranks`, packed one
     * after another (its vectors are gt_outer_len floats). 0 or 1 ranks: every lane. */
    uint32_t ranks, rank;
    /* Each site's share of the chunks it aggregates (n_sites entries, from
     * gt_topo_chunk_shares: outer.chunk_split), or NULL for equal shares. Every site must pass
     * the same. Read by create only. */
    const double *shares;
    /* Where the engine counts the bytes its buffers that grow with the vector hold (residuals,
     * the frames kept for re-sends and relays, decoded results, open contributions): a counter
     * the caller shares with its own buffers (diloco/: the site's outer_state_bytes), or NULL
     * for the engine's own (gt_outer_mem). */
    gt_mem_count_t *mem;
    /* 1: the caller takes results with gt_outer_result_hold and decodes them itself, chunk by
     * chunk, as it uses them (gt_outer_result_chunk): no decoded vector of the result is kept
     * (4 bytes a float less); RESULT frames are still checked (decoded into a chunk's scratch)
     * on arrival. 0: gt_outer_result / gt_outer_result_swap hand over a decoded vector. */
    int hold_results;
} gt_outer_params_t;

typedef struct {
    uint64_t deltas_sent, results_sent, resends, forwards; /* messages */
    uint64_t bytes_sent, bytes_received;                   /* payload bytes */
    /* As an owner, every contribution received ends in exactly one of these. */
    uint64_t on_time, late, dropped, rejected, clipped;
    uint64_t hash_checks, hash_mismatches; /* this site's anchor against the majority */
    uint64_t bad_messages;                 /* malformed payloads, rejected and logged */
    uint64_t stale_results;                /* RESULTs for a round already applied */
    uint64_t joins;                        /* JOIN announcements from other sites */
    uint64_t duplicate_deltas; /* a DELTA this owner had taken already (a re-send): not counted */
    uint64_t stale_deltas;     /* a DELTA for a round before this engine's first (sent to an
                                  earlier life of this site, re-sent to this one): not taken */
    /* Contributions received and not aggregated yet (in rounds still open): at the end of a
     * run, those folded into a round after the last one, or sent for a round that never closed. */
    uint64_t open;
    /* As a sender: contributions (DELTA frames, re-sends and forwards included) sent to a site
     * that then finished without taking them: in flight when it finished, or sent after. Known
     * from the count in the site's FIN (gt_outer_finish); a site that dies sends none. */
    uint64_t unreceived;
    /* Result chunks this site asked a peer to relay (their owner's RESULT had not come: a cut
     * link), and result chunks it relayed to a peer that asked. */
    uint64_t pulls, relays;
    /* This site's contributions sent through a peer because their owner was unreachable (a cut
     * link: they reach it on time instead of after the cut, or never), and contributions this
     * site passed on for a peer so. */
    uint64_t detours, detours_passed;
} gt_outer_stats_t;

typedef struct gt_outer gt_outer_t;

GT_API gt_status_t gt_outer_create(const gt_outer_params_t *params,
                                   gt_outer_t **outer_p) GT_MUST_USE;
GT_API void gt_outer_destroy(gt_outer_t *o);

/* Installs view `epoch` with the live sites (any order; this site must be among them).
 * Re-sends kept contributions whose chunk owner changed and forwards results whose owner
 * left. Views older than the current one are ignored. */
GT_API gt_status_t gt_outer_set_view(gt_outer_t *o, uint64_t epoch, const uint32_t *live,
                                     uint32_t n_live, uint64_t now_ns) GT_MUST_USE;
/* The same, where the sites of bit mask `restarted` (bit s: site s) are in the view again as a
 * new incarnation (the membership lease they registered with changed): a site that crashed and
 * was started again before its old lease ran out never leaves the view, yet what its previous
 * life announced and owned is gone — it is treated as a site that left and came back (its
 * chunks move to the others until it announces its first round; the results it aggregated are
 * forwarded), unless that announcement already came from the new incarnation. */
GT_API gt_status_t gt_outer_set_view_restarts(gt_outer_t *o, uint64_t epoch, const uint32_t *live,
                                              uint32_t n_live, uint64_t restarted,
                                              uint64_t now_ns) GT_MUST_USE;

/* This site joins a run in progress: its first submitted round will be `round` (> 0), not 0.
 * Call before any submit, after installing a view that includes this site; it may be called
 * again with a later round (the joiner re-planned) until the first submit. `first` (NULL: keep
 * the engine's) gives every site's first round as a running peer knows it
 * (gt_outer_first_rounds; UINT64_MAX for a site that takes no part), so that the joiner
 * agrees with the others about who owns what. Announces the round to every site of the view. */
GT_API gt_status_t gt_outer_start_at(gt_outer_t *o, uint64_t round, const uint64_t *first,
                                     uint64_t now_ns) GT_MUST_USE;

/* Site `site` of our view announced in etcd (gt_wan_member_info_t.first_round) that it
 * contributes from `round` on: taken as its JOIN would be (a no-op when the JOIN came first).
 * A joiner that cannot reach every peer (a cut link) announces there, and the peers learn it
 * with their next view read. GT_OK without effect for a site not in our view. */
GT_API gt_status_t gt_outer_learn_join(gt_outer_t *o, uint32_t site, uint64_t round,
                                       uint64_t now_ns) GT_MUST_USE;

/* Every configured site's first round as this engine knows it, UINT64_MAX for a site that is
 * not taking part (first[n_sites]). */
GT_API void gt_outer_first_rounds(const gt_outer_t *o, uint64_t *first);

/* Submits this site's pseudo-gradient for `round` (rounds start at 0 — or at the round given to
 * gt_outer_start_at — and increase by one):
 * delta[0, gt_outer_len), weighted by `weight` (tokens). `anchor_hash` is the hash of this
 * site's anchor after applying round-1 (ignored for round 0). Encodes every chunk with error
 * feedback against the engine's residual, then sends each to its owner. A NaN or Inf anywhere
 * is GT_ERR_INVALID and nothing is sent (the residual may have absorbed the chunks encoded
 * before it: a site whose pseudo-gradient is not finite has diverged). */
GT_API gt_status_t gt_outer_submit(gt_outer_t *o, uint64_t round, const float *delta, double weight,
                                   uint64_t anchor_hash, uint64_t now_ns) GT_MUST_USE;
/* The same with the pseudo-gradient produced chunk by chunk instead of held whole: fill(ctx, off,
 * count, dst) writes delta[off, off + count) into dst (a chunk-sized buffer of the engine's),
 * just before that chunk is encoded. A caller that can compute Δ from what it keeps anyway (θ_a
 * and the snapshot) so needs no vector for it; the frames and the residual are the same. */
typedef void (*gt_outer_fill_fn)(void *ctx, size_t off, size_t count, float *dst);
GT_API gt_status_t gt_outer_submit_fill(gt_outer_t *o, uint64_t round, gt_outer_fill_fn fill,
                                        void *fill_ctx, double weight, uint64_t anchor_hash,
                                        uint64_t now_ns) GT_MUST_USE;

/* gt_outer_submit_fill in two halves, so that the encode can run off the caller's lock:
 * gt_outer_encode encodes every chunk (the residual updated) into frames the engine stages,
 * touching nothing that gt_outer_deliver, gt_outer_progress or the other entry points use, so
 * it may run on another thread beside them (never beside another encode, nor beside a reader of
 * gt_outer_residual: checkpoints); gt_outer_post then sends the staged frames of that round to
 * the chunks' owners, under the same serialisation as every other call. The frames and the
 * residual are those gt_outer_submit_fill makes. A round posted that was not the last encoded
 * is GT_ERR_INVALID. */
GT_API gt_status_t gt_outer_encode(gt_outer_t *o, uint64_t round, gt_outer_fill_fn fill,
                                   void *fill_ctx, double weight, uint64_t anchor_hash) GT_MUST_USE;
GT_API gt_status_t gt_outer_post(gt_outer_t *o, uint64_t round, uint64_t now_ns) GT_MUST_USE;

/* Feeds one received message (DELTA or RESULT). Hostile input is rejected, counted in
 * bad_messages and logged; it never changes state. */
GT_API gt_status_t gt_outer_deliver(gt_outer_t *o, const gt_wan_msg_t *msg, const void *buf,
                                    size_t len, uint64_t now_ns);

/* Closes the rounds that are due and sends their results. Call often. */
GT_API gt_status_t gt_outer_progress(gt_outer_t *o, uint64_t now_ns);

/* GT_OK and g[0, gt_outer_len) when every chunk of `round` has arrived; GT_ERR_AGAIN
 * before. After it returns GT_OK the round counts as applied here. (A copy of the decoded
 * result; gt_outer_result_swap hands it over without one.) */
GT_API gt_status_t gt_outer_result(gt_outer_t *o, uint64_t round, float *g) GT_MUST_USE;
/* The same without a copy: every RESULT chunk is decoded once, on arrival, into a vector of
 * gt_outer_len floats; on GT_OK *g_io points to that vector for `round` and the engine
 * keeps the buffer *g_io pointed to before (NULL, or a vector a previous swap returned: the
 * engine reuses or frees it). The caller owns the returned vector until it swaps it back or
 * frees it with free(). */
GT_API gt_status_t gt_outer_result_swap(gt_outer_t *o, uint64_t round, float **g_io) GT_MUST_USE;
/* With hold_results: GT_OK when every chunk of `round` has arrived (GT_ERR_AGAIN before); the
 * round then counts as applied here, as after gt_outer_result_swap, and its RESULT frames stay
 * here, undecoded, until gt_outer_result_release (or the hold of a later round) — relayed to
 * peers as before. A round held is read by gt_outer_result_chunk, on any thread: nothing else
 * changes its frames while it is held. */
GT_API gt_status_t gt_outer_result_hold(gt_outer_t *o, uint64_t round) GT_MUST_USE;
/* Decodes chunk c of held `round` into out (its count floats, gt_outer_chunk_span) with the
 * caller's codec context (one per thread; any context decodes any frame). GT_ERR_INVALID when
 * the round is not held or c is out of range; GT_ERR_CORRUPT (the frame was checked on arrival:
 * memory corruption) when it does not decode. */
GT_API gt_status_t gt_outer_result_chunk(const gt_outer_t *o, uint64_t round, size_t c,
                                         gt_cmp_ctx_t *cmp, float *out) GT_MUST_USE;
GT_API void gt_outer_result_release(gt_outer_t *o, uint64_t round);
/* The chunks of this engine's vector: how many, and where chunk c lies in it. */
GT_API size_t gt_outer_chunk_count(const gt_outer_t *o);
GT_API void gt_outer_chunk_span(const gt_outer_t *o, size_t c, size_t *offset, size_t *count);
/* 1 when `round`'s result can no longer arrive here: its slot holds a later round's (the
 * other sites are gt_outer_rounds_kept() rounds ahead of this one). */
GT_API int gt_outer_result_gone(const gt_outer_t *o, uint64_t round);
/* 1 when every chunk of `round`'s result has arrived (gt_outer_result_swap would return GT_OK),
 * without taking it. */
GT_API int gt_outer_result_whole(const gt_outer_t *o, uint64_t round);
/* How many rounds of results an engine keeps (a site may lag the others by fewer). */
GT_API uint32_t gt_outer_rounds_kept(void);
/* How many chunks of `round`'s result have not arrived here; buf (cap bytes, may be 0) gets
 * them as "chunk (site owner), ..." under the current view, cut short when it is full: for a
 * message that says what a site is waiting for. */
GT_API size_t gt_outer_missing(const gt_outer_t *o, uint64_t round, char *buf, size_t cap);
/* The owners of round `round`'s chunks not held here, as a mask: bit i is site i (sites 0-63). */
GT_API uint64_t gt_outer_missing_owners(const gt_outer_t *o, uint64_t round);
/* 1 + the highest round another site has been seen to submit: a DELTA of that round sent by
 * its site (not forwarded) or a RESULT chunk of it arrived here; 0 when none has. A site that
 * has not submitted that round yet is behind the first of its peers (outer.catch_up). */
GT_API uint64_t gt_outer_peer_next(const gt_outer_t *o);
/* Contributions to the run's last round (gt_outer_set_last_round) that this site, having
 * closed that round's chunk without them, still expects: one per (chunk it closed, site taking
 * part in the round whose contribution has not arrived, and whose round before the last has
 * arrived here: a site further behind is not waited for). A site that finished waits (bounded)
 * for them before it leaves, so a straggler's last contribution is counted, not lost unread. */
GT_API uint32_t gt_outer_final_missing(const gt_outer_t *o);
/* This site is done with the run: from now on the engine takes no contribution (they are not
 * counted here), and it tells every site in its view, in a FIN, how many contribution frames it
 * took from that site, so each sender counts the rest as `unreceived` (gt_outer_stats) and
 * every contribution of the run ends in exactly one counter. Call it after the last wait for
 * stragglers (gt_outer_final_missing) and before the last messages are flushed. Idempotent. */
GT_API void gt_outer_finish(gt_outer_t *o, uint64_t now_ns);
/* Sites in this engine's view that it sent contributions to, that have sent it their
 * contribution to the run's last round (gt_outer_set_last_round: they are finishing too), and
 * whose FIN has not arrived yet. A site that finished waits (bounded) for them after its own
 * FINs went out, so that every engine of a multi-rank site sees each such peer's FIN before it
 * stops receiving: otherwise a rank that leaves early leaves that peer's ledger open (the count
 * is still right, in the peer's `unreceived`, but not checked). A peer still training rounds
 * behind, or that leaves the view, is not waited for. */
GT_API uint32_t gt_outer_fins_missing(const gt_outer_t *o);
/* Floats in this engine's vectors (submit's delta, a result): n_params, or with several ranks
 * the rank's share of the lanes. */
GT_API size_t gt_outer_len(const gt_outer_t *o);
/* Elements of the largest chunk of this engine's layout (for sizing receive buffers). */
GT_API size_t gt_outer_max_chunk(const gt_outer_t *o);
/* Seconds from this site's submit of `round` to the arrival of the last chunk of its result
 * (its exchange time, whatever overlap hid of it); NAN when either is unknown or the round is
 * no longer kept (the last few rounds are). 0 when the result was complete before the submit. */
GT_API double gt_outer_exchange_s(const gt_outer_t *o, uint64_t round);

/* The earliest time a pending close is due (for the caller's wait), or UINT64_MAX. */
GT_API uint64_t gt_outer_next_deadline(const gt_outer_t *o);

/* The hash verdict for this site's anchor after `round`: 1 agreed with the majority of the
 * contributions seen by owners, -1 disagreed (re-fetch the anchor), -2 the anchors differ and
 * none has a strict majority of the on-time votes (two live sites, one each: stop applying),
 * 0 not known yet. */
GT_API int gt_outer_hash_verdict(const gt_outer_t *o, uint64_t round);

GT_API void gt_outer_stats(const gt_outer_t *o, gt_outer_stats_t *stats_p);

/* One peer's side of the contribution ledger, since that peer's (or this site's) latest join:
 * the contribution frames this engine sent it (re-sends and forwards included), the frames it
 * took from it, and whether that peer's FIN arrived (fin_taken: the count the FIN carried).
 * Where the FIN came, `unreceived` already holds sent - fin_taken; where it did not (the peer
 * finished behind a cut that outlasted the run, or after this site), whoever holds both sites'
 * ledgers (`geotrain launch`, from the summaries) closes the account with the peer's `took`. */
typedef struct {
    uint64_t sent, took, fin_taken;
    int fin;
} gt_outer_ledger_t;
/* GT_ERR_INVALID for a site outside the run. */
GT_API gt_status_t gt_outer_ledger(const gt_outer_t *o, uint32_t site, gt_outer_ledger_t *l);

/* The site that owns (lane, chunk) under the current view (for rounds every announced joiner
 * takes part in). */
GT_API uint32_t gt_outer_owner(const gt_outer_t *o, uint32_t lane, uint32_t chunk);
/* The same for one round: a joiner owns its chunks only from its first round on. */
GT_API uint32_t gt_outer_owner_at(const gt_outer_t *o, uint32_t lane, uint32_t chunk,
                                  uint64_t round);

/* The tokens whose gradients `round`'s result carries: for each chunk, the tokens behind the
 * contributions its owner aggregated (on time or folded late, at their full count), weighted by
 * the chunk's share of this engine's vector; 0 when the round is not held (16 rounds are). */
GT_API double gt_outer_result_tokens(const gt_outer_t *o, uint64_t round);

/* The error-feedback residual (gt_outer_len floats) of this site's deltas (of_results 0) or
 * of the results it aggregated (1): read to checkpoint it, written to resume it. */
GT_API float *gt_outer_residual(gt_outer_t *o, int of_results);

/* The counter of the bytes the engine's buffers hold (params.mem, or the engine's own). */
GT_API const gt_mem_count_t *gt_outer_mem(const gt_outer_t *o);

/* Resumes a run from a checkpoint taken after `rounds` rounds, before the first submit: the
 * rounds before are closed (anything still arriving for them is late), and the contribution
 * counters continue from `counters` (NULL: from zero; the byte, message and `open` counts
 * always start afresh). The residuals are restored through gt_outer_residual. */
GT_API gt_status_t gt_outer_resume(gt_outer_t *o, uint64_t rounds,
                                   const gt_outer_stats_t *counters) GT_MUST_USE;

/* The run's last round. An owner waits longer for it before closing it at the straggler
 * deadline: 4 x deadline_max_ms from its first contribution, so that a contribution to it
 * (which has no next round to fold into, and whose owner may have finished and exited when it
 * arrives late) is almost always aggregated — for a site usually punctual that this engine has
 * heard from (one never heard from, e.g. by an engine that joined late, is not known to be
 * catching up). Rounds after it are treated alike (sync-dp passes 0: every step waits that long
 * for every site, heard from or not). Not set (UINT64_MAX): the usual deadline. */
GT_API void gt_outer_set_last_round(gt_outer_t *o, uint64_t round);

/* 64-bit hash of a float vector's bytes (xxh3), for the anchor check. */
GT_API uint64_t gt_outer_hash(const float *x, size_t n);

/* ---- the round policy (policy.c): pure functions over plain values.
 *
 * The rules the engine closes rounds by, for a planner or simulator to call rather than copy
 * (cli/plan_model.c does). Times and durations are in whatever unit the caller counts in,
 * the same for every argument (the engine: nanoseconds; the planner: seconds). Site sets are
 * bit masks (bit s: site s), so at most 64 sites.
 */

/* The run's last round waits this many deadline_max for a punctual site it has heard from:
 * its contribution to it has no later round to fold into. */
#define GT_OUTER_LAST_ROUND_WAIT 4

/* The owner of a chunk whose preferred site is `preferred` (topology's layout): the first site
 * of `active` from `preferred` on in cyclic order over n_sites; when none is, the first of
 * `fallback` so; else `preferred`. The engine passes the sites taking part in the round, then
 * its view. */
GT_API uint32_t gt_outer_policy_owner(uint32_t preferred, uint32_t n_sites, uint64_t active,
                                      uint64_t fallback);

/* The adaptive straggler deadline: median + mad_k x MAD (the median absolute deviation) of the
 * sites' typical lateness (lateness[0, n): one value per live site with history), within
 * [lo, hi]. 0 when fewer than two sites have history (then close_after decides alone). The
 * median is the lower one: with two sites, the faster. */
GT_API double gt_outer_policy_deadline(const double *lateness, size_t n, double mad_k, double lo,
                                       double hi);

/* Contributions that make a quorum: ceil(quorum x n_active), at least 1. */
GT_API uint32_t gt_outer_policy_quorum(double quorum, uint32_t n_active);

/* How long after a chunk's first on-time contribution the owner may close it at the deadline:
 * the adaptive `deadline` (0: no history yet), but no longer than twice `quorum_spread` (the
 * time from the first contribution until a quorum was in; negative: no quorum yet), within
 * [lo, hi]. INFINITY when there is neither history nor a quorum. */
GT_API double gt_outer_policy_close_after(double deadline, double quorum_spread, double lo,
                                          double hi);

/* Counts `round` in a site's share of late rounds (a moving average, 0.7 old + 0.3 new), once
 * a round: *late_judged is 1 + the round last counted. `late`: the site's contribution came
 * after the deadline (or the round closed at its deadline without it). */
GT_API void gt_outer_policy_judge(double *late_share, uint64_t *late_judged, uint64_t round,
                                  int late);

/* 1 when a site with that share of late rounds is waited for (a punctual site), 0 for a chronic
 * straggler: a round missing only stragglers closes once its quorum is in. */
GT_API int gt_outer_policy_punctual(double late_share);

/* Adds one sample to a site's typical lateness (how long after a chunk's first contribution
 * the site's arrives): the first sample as is, then a moving average (0.8 old + 0.2 new).
 * *samples counts them (saturating). */
GT_API void gt_outer_policy_lateness(double *lateness, uint32_t *samples, double offset);

/* ---- the port: a WAN group's engines on one mesh ----
 *
 * A site runs, per WAN group, one engine per streaming fragment (outer.fragments), and they
 * share the group's mesh. The port multiplexes them: the io it gives fragment f's engine sends
 * through the mesh with f in the header's fragment field, and the mesh hands every incoming
 * message to the port (gt_outer_port_on_message as its on_message, the port as its ctx), which
 * gives the outer protocol's messages (DELTA, RESULT, JOIN, FIN, PULL) to the engine of their
 * fragment and any other to `other` (diloco/'s state transfer and probes). An outer message for
 * a fragment the port does not run is rejected, counted (gt_outer_port_bad) and logged. Called
 * from the thread that drives the mesh, as the engines are. */
typedef struct gt_outer_port gt_outer_port_t;
typedef void (*gt_outer_other_fn)(void *ctx, const gt_wan_msg_t *msg, const void *buf, size_t len);

GT_API gt_status_t gt_outer_port_create(uint32_t n_fragments, gt_outer_other_fn other,
                                        void *other_ctx, gt_outer_port_t **port_p) GT_MUST_USE;
GT_API void gt_outer_port_destroy(gt_outer_port_t *port);
/* The io for fragment f's engine (gt_outer_params_t.io): sends through the port's mesh once it
 * has one (gt_outer_port_set_mesh; before: GT_ERR_CLOSED). */
GT_API gt_outer_io_t gt_outer_port_io(gt_outer_port_t *port, uint32_t fragment);
/* The engine that takes fragment f's messages (NULL: none yet; its messages are rejected). */
GT_API gt_status_t gt_outer_port_attach(gt_outer_port_t *port, uint32_t fragment,
                                        gt_outer_t *engine);
GT_API void gt_outer_port_set_mesh(gt_outer_port_t *port, gt_wan_mesh_t *mesh);
/* The mesh's on_message, with the port as its ctx. */
GT_API void gt_outer_port_on_message(void *port, const gt_wan_msg_t *msg, const void *buf,
                                     size_t len);
/* The latest view epoch a DELTA or RESULT carried: a peer that has moved to a later view (the
 * caller reads the view sooner). */
GT_API uint64_t gt_outer_port_epoch_seen(const gt_outer_port_t *port);
/* Outer messages rejected for their fragment. */
GT_API uint64_t gt_outer_port_bad(const gt_outer_port_t *port);

#ifdef __cplusplus
}
#endif

#endif /* GT_OUTER_H */
