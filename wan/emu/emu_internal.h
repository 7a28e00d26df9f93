/* emu_internal.h — the WAN emulator's core (docs/emulator.md), transport
 * independent: it computes *when* a message would arrive over an emulated WAN link and keeps
 * a delay queue; it never sleeps and never touches the network. Time is passed in by the
 * caller (nanoseconds on any monotonic clock: gt_time_ns() live, a counter in tests), so the
 * same code runs in virtual time. Implemented in wan/emu/emu.c; docs/emulator.md describes the
 * model.
 *
 * The model of one directed link src -> dst (a message of n bytes sent at time t):
 *   1. Cut: if t falls in a cut window [start, start + duration) the message is held until
 *      the window ends (a reliable transport retransmits after the link heals).
 *   2. Bandwidth: a token bucket per directed link, `bandwidth_mbps` megabits/s with a depth
 *      of `burst_bytes`. The message leaves when the bucket has paid for its bytes (plus the
 *      expected retransmitted bytes under loss): tx_end = t + debt / rate. A transmission
 *      that overlaps a cut window is paused for the window.
 *   3. Propagation: latency_ms + a uniform jitter in [-jitter_ms, +jitter_ms] (the delay is
 *      never below zero).
 *   4. Loss (a reliable transport): the message is cut into `packet_bytes` pieces, each lost
 *      with probability `loss` independently, and each retransmission can be lost again.
 *      Lost pieces are retransmitted in parallel, so the message is late by rto_ms times the
 *      largest number of times any one of its pieces was lost.
 *   5. In flight during a cut: a message whose flight [tx_end, arrival) overlaps a cut window
 *      arrives no earlier than the window's end plus its propagation delay.
 *   6. Order: a message never arrives before an earlier message on the same link (TCP-like
 *      head-of-line blocking): arrival = max(arrival, previous arrival on the link).
 * Randomness (jitter, loss) comes from one xoshiro256** stream per directed link, seeded by
 * splitmix64 from (seed, src, dst): the same seed and the same sequence of
 * gt_wan_emu_schedule calls on a link give the same arrival times, whatever happens on the
 * other links.
 *
 * Partitions: by default a cut holds messages until it heals, however long it is (TCP keeps
 * a connection through a cut shorter than its retry limit, which is minutes). With
 * hold_timeout_ms > 0, a message that would be held longer than that makes
 * gt_wan_emu_schedule fail with GT_ERR_PEER_LOST, and the caller reports the peer as lost.
 *
 * Parameters map 1:1 onto sites.yaml (topology's gt_topo_link_params_t): wan.emulation.
 * {latency_ms, jitter_ms, bandwidth_mbps, loss, seed} and links: [{between: [a, b],
 * latency_ms, jitter_ms, bandwidth_mbps, loss, cuts: [{start_s, duration_s}]}] (a `between`
 * entry is symmetric: set both directions). burst_bytes, rto_ms and packet_bytes are not in
 * sites.yaml; 0 picks the defaults below.
 *
 * Threads: neither the emulator nor a queue locks; one progress thread owns them (or the
 * caller serialises).
 */
#ifndef GT_WAN_EMU_INTERNAL_H
#define GT_WAN_EMU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gt_base.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GT_WAN_EMU_MAX_CUTS  16u /* per link, as topology's GT_TOPO_MAX_CUTS */
#define GT_WAN_EMU_MAX_SITES 1024u

/* A partition of one link: cut from start_s to start_s + duration_s (seconds after the
 * emulator's start_ns). */
typedef struct {
    double start_s;
    double duration_s;
} gt_wan_emu_cut_t;

typedef struct {
    double latency_ms;     /* one-way propagation delay, >= 0 */
    double jitter_ms;      /* uniform ± jitter added to each message, >= 0 */
    double bandwidth_mbps; /* megabits/s (10^6 bits); 0 = unlimited */
    double loss;           /* per-packet loss probability in [0, 1), as retransmission delay */
    uint32_t n_cuts;       /* cut windows on this link (<= GT_WAN_EMU_MAX_CUTS) */
    gt_wan_emu_cut_t cuts[GT_WAN_EMU_MAX_CUTS];
    /* Not in sites.yaml; 0 = default. */
    double burst_bytes;  /* token bucket depth; default max(64 KiB, 10 ms at the rate) */
    double rto_ms;       /* delay per retransmission round; default 2 * latency_ms + 200 ms
                            (Linux: RTO = SRTT + max(200 ms, 4 RTTVAR)) */
    double packet_bytes; /* the piece size loss applies to; default 1448 (a TCP segment) */
} gt_wan_emu_link_params_t;

#define GT_WAN_EMU_LINK_PARAMS_INIT                        \
    {                                                      \
        0.0, 0.0, 0.0, 0.0, 0, {{0.0, 0.0}}, 0.0, 0.0, 0.0 \
    }

typedef struct {
    uint32_t n_sites;              /* site ids are 0 .. n_sites-1 (<= GT_WAN_EMU_MAX_SITES) */
    gt_wan_emu_link_params_t link; /* every link's parameters until gt_wan_emu_link_set */
    uint64_t seed;                 /* wan.emulation.seed */
    uint64_t start_ns;             /* the time cut windows count from (the run's start) */
    double hold_timeout_ms;        /* 0 = hold messages through any cut; else fail a message
                                      held longer (GT_ERR_PEER_LOST) */
} gt_wan_emu_params_t;

#define GT_WAN_EMU_PARAMS_INIT                    \
    {                                             \
        0, GT_WAN_EMU_LINK_PARAMS_INIT, 0, 0, 0.0 \
    }

/* What happened on one directed link so far. */
typedef struct {
    uint64_t messages;       /* scheduled successfully */
    uint64_t bytes;          /* their payload bytes */
    uint64_t retransmitted;  /* messages delayed by at least one loss */
    uint64_t held_by_cut;    /* messages delayed by a cut window */
    uint64_t failed;         /* messages refused with GT_ERR_PEER_LOST */
    uint64_t total_delay_ns; /* sum of (arrival - send time) */
    uint64_t max_delay_ns;
    uint64_t last_arrival_ns; /* arrival time of the latest message (0 if none) */
} gt_wan_emu_link_stats_t;

typedef struct gt_wan_emu gt_wan_emu_t;

/* Checks the params (GT_ERR_INVALID for n_sites 0 or too many, a negative or non-finite
 * value, loss outside [0, 1), a cut with duration <= 0 or start < 0) and sets every directed
 * link to params->link. */
GT_API GT_MUST_USE gt_status_t gt_wan_emu_create(const gt_wan_emu_params_t *params,
                                                 gt_wan_emu_t **emu_p);
/* Accepts NULL. */
GT_API void gt_wan_emu_destroy(gt_wan_emu_t *emu);

/* Replaces the parameters of the directed link src -> dst (call twice for a symmetric
 * `between`). The link's bucket, order and random stream are kept, so calling it mid-run
 * changes only later messages. GT_ERR_INVALID as in create, or for an unknown site id. */
GT_API GT_MUST_USE gt_status_t gt_wan_emu_link_set(gt_wan_emu_t *emu, uint32_t src, uint32_t dst,
                                                   const gt_wan_emu_link_params_t *link);
/* The link's current parameters, with defaults (burst, rto, packet) filled in. */
GT_API GT_MUST_USE gt_status_t gt_wan_emu_link_get(const gt_wan_emu_t *emu, uint32_t src,
                                                   uint32_t dst, gt_wan_emu_link_params_t *link_p);

/* A message of `bytes` bytes enters the link src -> dst at now_ns: reserves its bandwidth
 * and returns when it arrives (>= now_ns, and >= every earlier arrival on the link). Calls
 * on one link must come in send order; now_ns should not go backwards on a link (an earlier
 * now_ns is treated as the latest one seen). GT_ERR_PEER_LOST when a cut would hold it for
 * longer than hold_timeout_ms (nothing is reserved then); GT_ERR_INVALID for an unknown
 * site id. */
GT_API GT_MUST_USE gt_status_t gt_wan_emu_schedule(gt_wan_emu_t *emu, uint32_t src, uint32_t dst,
                                                   size_t bytes, uint64_t now_ns,
                                                   uint64_t *deliver_at_ns_p);
/* 1 when the link src -> dst is inside a cut window at now_ns, else 0 (also for bad ids). */
GT_API int gt_wan_emu_link_is_cut(const gt_wan_emu_t *emu, uint32_t src, uint32_t dst,
                                  uint64_t now_ns);
GT_API GT_MUST_USE gt_status_t gt_wan_emu_link_stats(const gt_wan_emu_t *emu, uint32_t src,
                                                     uint32_t dst,
                                                     gt_wan_emu_link_stats_t *stats_p);

/* Builds the emulator sites.yaml describes (topology's resolved config): one site per
 * sites[] entry (site id = index), every directed link a -> b from gt_topo_link_params(cfg,
 * a, b) (so `links:` overrides apply to both directions, the rest inherit wan.emulation),
 * wan.emulation.seed, cut windows counted from start_ns. It does not look at
 * wan.emulation.enabled: whether to emulate at all is the caller's choice. */
struct gt_topo_config;
GT_API GT_MUST_USE gt_status_t gt_wan_emu_create_from_config(const struct gt_topo_config *cfg,
                                                             uint64_t start_ns,
                                                             double hold_timeout_ms,
                                                             gt_wan_emu_t **emu_p);

/* ---- delay queue ----------------------------------------------------------------------
 * A min-heap of (due time, opaque item). Items with equal due times come out in the order
 * they were pushed, so messages scheduled in order on a link leave in order. The queue does
 * not own the items. */

typedef struct gt_wan_emu_queue gt_wan_emu_queue_t;

GT_API GT_MUST_USE gt_status_t gt_wan_emu_queue_create(gt_wan_emu_queue_t **queue_p);
/* Frees the queue, not the items (pop them first with now_ns = UINT64_MAX). Accepts NULL. */
GT_API void gt_wan_emu_queue_destroy(gt_wan_emu_queue_t *q);
/* GT_ERR_NOMEM when growing fails (the item is not queued then). */
GT_API GT_MUST_USE gt_status_t gt_wan_emu_queue_push(gt_wan_emu_queue_t *q, uint64_t due_ns,
                                                     void *item);
/* Takes the earliest item whose due time is <= now_ns: GT_OK and *item_p (and *due_ns_p
 * when not NULL), or GT_ERR_AGAIN when nothing is due (outputs untouched). */
GT_API GT_MUST_USE gt_status_t gt_wan_emu_queue_pop(gt_wan_emu_queue_t *q, uint64_t now_ns,
                                                    uint64_t *due_ns_p, void **item_p);
/* The earliest due time, or UINT64_MAX when the queue is empty: the progress loop's next
 * deadline. */
GT_API uint64_t gt_wan_emu_queue_next_due(const gt_wan_emu_queue_t *q);
GT_API size_t gt_wan_emu_queue_len(const gt_wan_emu_queue_t *q);

#ifdef __cplusplus
}
#endif

#endif /* GT_WAN_EMU_INTERNAL_H */
