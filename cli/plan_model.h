/* plan_model.h — the round model behind `geotrain plan` (internal to cli/; docs/plan.md).
 *
 * A run is simulated in virtual time, event by event, with the rules geotrain itself follows
 * (local/site.c and outer/, whose policy functions it calls): each site computes H inner steps,
 * encodes its pseudo- gradient and sends every chunk to the chunk's owner (topology/layout.c: one
 * chunk per site in each lane, owners rotating); an owner decodes contributions as they arrive,
 * closes a chunk's round when every live site contributed, or at the straggler deadline once a
 * quorum did (median + k·MAD of the senders' lateness, at most twice the quorum's spread, within
 * [deadline_min, deadline_max]; the run's last round after 4 x deadline_max); a contribution that
 * misses its round is folded into the owner's next open round (which then needs no deadline for
 * that site); the owner encodes the result and sends it to every site; a site applies round r's
 * result τ steps into round r + 1 and waits only if it is not there yet (the last round is never
 * overlapped). Every directed link is the WAN emulator's model (docs/emulator.md): a token bucket
 * of the link's rate with a burst allowance, then the one-way latency, in order; each message also
 * pays `hop` (the processing the link model leaves out). With catch_up a site ends its round
 * at the first step after a peer's DELTA or RESULT of it (or a later round) arrived, when more
 * steps are left than fit in τ/2 and in half the deadline floor (diloco.c). A site that finishes
 * leaves, and its chunks move to the next live site. Nothing here is a fitted constant: every time
 * comes from a rate or a size the caller passes in (cmd_plan.c says where each comes from).
 *
 * Long runs are simulated for a window of rounds and extrapolated from the window's steady
 * state (the period between submits over its second half; bytes per round likewise).
 */
#ifndef GT_CLI_PLAN_MODEL_H
#define GT_CLI_PLAN_MODEL_H

#include <stddef.h>
#include <stdint.h>

#define GT_PLAN_MAX_SITES 64

typedef struct {
    double t_step;  /* seconds per inner step (compute) */
    double t_enc;   /* seconds per round on the training path: encoding the whole vector */
    double t_apply; /* seconds per round on the training path: the rest (outer step, rebase) */
    double enc_Bps; /* bytes of fp32 per second the site's WAN side encodes (results) */
    double dec_Bps; /* bytes of fp32 per second it decodes (contributions and results) */
    double agg_Bps; /* bytes of fp32 per second it sums contributions (0 = free) */
    /* Optional replay of a measured run: the site's compute seconds after trace_step[i] inner
     * steps is trace_compute[i] (both increasing, linear in between); steps outside the trace
     * take t_step each. NULL/0: every step takes t_step. */
    const double *trace_step, *trace_compute;
    size_t trace_n;
} gt_plan_site_t;

typedef struct {
    double latency_s;   /* one-way */
    double rate_Bps;    /* bytes per second; 0 = unlimited */
    double burst_bytes; /* token bucket depth */
} gt_plan_link_t;

typedef struct {
    size_t count;       /* elements */
    uint32_t owner;     /* preferred owner (the layout's) */
    double delta_bytes; /* a DELTA message's payload (preamble + codec frame) */
    double result_bytes;
} gt_plan_chunk_t;

typedef struct {
    uint32_t n_sites;
    gt_plan_site_t sites[GT_PLAN_MAX_SITES];
    gt_plan_link_t links[GT_PLAN_MAX_SITES][GT_PLAN_MAX_SITES]; /* [src][dst] */
    size_t n_chunks;
    const gt_plan_chunk_t *chunks;
    uint64_t H, tau, rounds;
    double quorum;                         /* fraction of live sites */
    double deadline_min_s, deadline_max_s; /* bounds of the straggler deadline */
    double deadline_mad_k;
    int late_fold;         /* 1: fold late contributions, 0: drop them */
    double hop_s;          /* per message, besides the link */
    double frame_bytes;    /* the channel's framing unit */
    double frame_overhead; /* wire bytes per frame besides the payload (header, AEAD tag) */
    double hello_bytes;    /* payload each site sends each other site once, before training */
    double ack_bytes;      /* the receiver's acknowledgement of each message, counted as sent
                              by it (at most one per message: the mesh batches them) */
    double live_period_s;  /* the liveness watch (docs/diloco.md, Membership): every site asks
                              every peer once a period (membership.heartbeat_ms; 0: none — two
                              sites, sync-dp) and is answered */
    double live_probe_bytes, live_answer_bytes; /* a probe's and an answer's message bytes */
    uint64_t window; /* rounds simulated at most (the rest extrapolated) */
    int catch_up;    /* outer.catch_up: a site behind ends its round once a peer's
                        DELTA or RESULT of it arrived and more than tau/2 steps are left */
} gt_plan_model_t;

typedef struct {
    double compute_s, local_s, wait_s, train_s; /* the training loop's time, as summary.json */
    double utilization;                         /* compute_s / train_s */
    double bytes_sent;                          /* message payload bytes, as geotrain counts */
    double steps_skipped;                       /* catch_up: steps its rounds ended early skipped */
} gt_plan_site_result_t;

typedef struct {
    gt_plan_site_result_t sites[GT_PLAN_MAX_SITES];
    double link_bytes[GT_PLAN_MAX_SITES][GT_PLAN_MAX_SITES]; /* whole run, [src][dst] */
    double utilization_mean;                                 /* over sites */
    double utilization_min;
    double wall_s;                /* the slowest site's training time */
    double bytes_total;           /* all sites */
    double ack_bytes_total;       /* of which acknowledgements, one per message (an upper bound) */
    double live_bytes_per_period; /* all sites' liveness probes and answers in one period (also
                                     in bytes_total: one period per live_period_s of wall_s) */
    double round_period_s;        /* steady-state time between a fast site's submits */
    double max_link_round_bytes;  /* bytes per round on the busiest link, steady state */
    double on_time, late;         /* contributions (whole run) */
    uint64_t rounds_simulated;
} gt_plan_result_t;

/* Runs the model. Returns 0, or -1 when out of memory or the model is inconsistent. */
int gt_plan_simulate(const gt_plan_model_t *m, gt_plan_result_t *res_p);

#endif /* GT_CLI_PLAN_MODEL_H */
