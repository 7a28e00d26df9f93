/* gt_diloco.h — one site's side of DiLoCo, as a library any trainer can call (docs/design.md
 * §1–§4).
 *
 * The caller trains; this library does everything across sites. It owns the anchor θ_a, the
 * outer momentum, the error-feedback residuals (in wan/'s outer engine), the snapshot taken at
 * each submit, the lanes a rank carries, membership in etcd, the WAN (transport, secure
 * channel, emulation) and the join / state-transfer protocol. The caller hands in its
 * parameters once, as one flat float vector it owns (θ_s), and calls gt_diloco_step after
 * every inner step. At step r·H the library submits Δ = θ_a − θ_s for round r and returns at
 * once; at step r·H + H + τ (τ = outer.overlap_steps) it applies round r's agreed result to
 * θ_a (outer Nesterov, or plain averaging) and rebases the caller's vector in place:
 * θ_s ← θ_a + (θ_s − θ_s at send). It waits only when that result is not there yet.
 *
 *     gt_diloco_params_t p = GT_DILOCO_PARAMS_INIT;
 *     p.config_path = "sites.yaml";  p.site = "eu-west";
 *     p.params = theta;  p.n_params = n;             // the model's flat parameter vector
 *     gt_diloco_t *d;  if (gt_diloco_create(&p, &d) != GT_OK) ...
 *     gt_diloco_status_t s;  gt_diloco_status(d, &s);
 *     for (uint64_t k = s.first_step; k < s.total_steps; k++) {
 *         train_one_step(theta);                      // the caller's optimizer, its own data
 *         if (gt_diloco_step(d, tokens, loss) != GT_OK) break;
 *     }
 *     gt_diloco_close(d, GT_OK);                      // theta now holds the final anchor
 *
 * Every site of a run must hand in vectors of the same length, the same parameters in the same
 * order; a difference is an error at create on every site, never a hang. The initial anchor is
 * the parameters of the first site (in sites.yaml order) that starts the run: a site whose
 * initial parameters differ takes that site's (its vector is overwritten at create), so every
 * site starts from the same θ_a whatever seed its framework used.
 *
 * Ownership. The caller owns params[] and must keep it alive and at the same address until
 * gt_diloco_close; the library reads it in gt_diloco_step at a submit, writes it at an apply
 * (and at create, for a joining site or a differing initial vector), and never touches it
 * otherwise. When the training memory is elsewhere (a GPU, another dtype, shards), params[]
 * is a host copy and the before_read / after_write hooks move it: before_read is called at
 * each submit and, with outer.overlap_steps > 0, again at the apply before the rebase (so the
 * steps trained during the overlap are kept); after_write after each apply.
 *
 * Threads. A context is driven by one thread at a time (the training loop). The library runs
 * one background thread of its own per context, which drives the WAN (answers peers, closes
 * rounds this site aggregates, renews the etcd lease) and never touches params[]. Callbacks
 * (comm, hooks) are called only from the thread calling the API. Different contexts are
 * independent.
 *
 * Files (rank 0 writes them under RUN_DIR/SITE/): anchors.jsonl (the anchor's hash after
 * every round, for invariant I1), status.json (the live state `geotrain launch` shows),
 * summary.json (written by gt_diloco_close; the fields are in docs/api.md) and, unless
 * turned off, metrics.jsonl (step, loss, tokens, WAN bytes, waits every run.log_every steps),
 * and carry.gtcw (what a site removed from the run trained since its last submit, written by
 * gt_diloco_close, read and deleted when it joins again: outer.carry_max_rounds).
 *
 * Errors: gt_status_t; the message of a failed call is logged (stderr) and, for the calling
 * thread, available from gt_diloco_error_message().
 */
#ifndef GT_DILOCO_H
#define GT_DILOCO_H

#include "gt_base.h"
#include "gt_topology.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gt_diloco gt_diloco_t;

typedef enum { GT_DILOCO_OP_MAX = 0, GT_DILOCO_OP_SUM = 1 } gt_diloco_op_t;

/* In-site collectives over the site's ranks, for a site of several ranks (DESIGN §3: rank k of
 * every site carries lanes {l : l mod R = k}, and the outer state is sharded). Every rank calls
 * the same API functions in the same order, so the library calls these collectively. With
 * size 0 or 1 none is called. */
typedef struct {
    void *ctx;
    uint32_t rank; /* this rank, 0 .. size-1 */
    uint32_t size; /* the site's ranks (must equal sites.SITE.ranks) */
    /* In place, elementwise over v[0, n): the maximum or the sum over the ranks. */
    gt_status_t (*allreduce_u64)(void *ctx, uint64_t *v, size_t n, gt_diloco_op_t op);
    /* In place: rank k's counts[k] floats are at all + displs[k] on rank k; afterwards every
     * rank has every rank's. */
    gt_status_t (*allgatherv)(void *ctx, float *all, const size_t *counts, const size_t *displs);
} gt_diloco_comm_t;

typedef struct {
    /* The configuration, one of: a resolved config (borrowed: it must outlive the context);
     * a sites.yaml path, loaded with the KEY=VALUE overrides sets[0, n_sets) as `--set` does;
     * or, both NULL, the file $GT_CONFIG with the overrides in $GT_SET (one KEY=VALUE per
     * line) — what `geotrain launch CONFIG -- CMD` gives every CMD it starts. */
    const gt_topo_config_t *cfg;
    const char *config_path;
    const char *const *sets;
    size_t n_sets;
    const char *site;    /* this site's name (NULL: $GT_SITE) */
    const char *run_dir; /* NULL: $GT_RUN_DIR, else run.run_dir/run.name */
    const char *run_id;  /* names the run in etcd and the secure channel (every site of the
                            run the same); NULL: $GT_RUN_ID, else run.name */
    float *params;       /* θ_s: n_params floats of host memory, owned by the caller */
    size_t n_params;
    gt_diloco_comm_t comm;
    /* Optional: called before the library reads params[] (pull the training memory into it)
     * and after it wrote params[] (push it back). NULL when params[] is the training memory. */
    gt_status_t (*before_read)(void *ctx);
    gt_status_t (*after_write)(void *ctx);
    void *hook_ctx;
    const volatile int *stop; /* polled at every step; non-zero: leave the run (may be NULL) */
    int metrics;              /* 1: write SITE/metrics.jsonl (0: the caller writes its own) */
    /* 1: what is left unset here comes from the environment a launcher sets (GT_SITE,
     * GT_RUN_DIR, GT_RUN_ID, GT_EXPECT_SITES; docs/api.md#environment), and so do the injected
     * faults (gt_faults.h: GT_SLOW, GT_SLOW_WINDOWS, GT_CORRUPT_ANCHOR, GT_KILL_AT_ROUND). */
    int env;
    uint32_t expect_sites; /* round 0 starts once this many sites registered (0: all) */
    /* Resume a stopped run (gt_diloco_save wrote the outer state into this directory; NULL:
     * start or join). Every site that registers before round 0 offers the steps it can resume
     * at; the run continues from the newest step every one of them offers (none in common:
     * from the beginning). status.resumed_step says which; the caller then restores its own
     * state (parameters, optimizer, data position) saved at that step. A run already in
     * progress is joined instead. */
    const char *resume_dir;
    /* The steps at which the caller can restore its own state (its intact checkpoints); NULL:
     * any step the library has an intact outer state for. */
    const uint64_t *resume_steps;
    size_t n_resume_steps;
    /* How this site's ranks hold the vector, as text (e.g. "2 shards [0:288, 288:577] of 577"
     * for ranks that each hand in a shard through the hooks); NULL or "": every rank holds all
     * of it. Every site of a run must pass the same: a site whose layout differs from a
     * registered site's fails at create (a joiner at its join), naming both. */
    const char *layout;
} gt_diloco_params_t;

#define GT_DILOCO_PARAMS_INIT                                                                 \
    {                                                                                         \
        NULL, NULL, NULL, 0, NULL, NULL, NULL, NULL, 0, {NULL, 0, 1, NULL, NULL}, NULL, NULL, \
            NULL, NULL, 1, 1, 0, NULL, NULL, 0, NULL                                          \
    }

/* The same defaults for callers that cannot use the macro (language bindings), and the
 * sizes of the structs they lay out themselves, to check that they match this build. */
GT_API void gt_diloco_params_init(gt_diloco_params_t *params);
GT_API size_t gt_diloco_params_size(void);
GT_API size_t gt_diloco_status_size(void);

typedef enum {
    GT_DILOCO_STARTING = 0,
    GT_DILOCO_JOINING = 1, /* fetching the anchor of a run in progress */
    GT_DILOCO_TRAINING = 2,
    GT_DILOCO_WAITING = 3, /* for a round's result */
    GT_DILOCO_DONE = 4,    /* the last step is trained and the last round applied */
    GT_DILOCO_STOPPED = 5, /* left on request */
    GT_DILOCO_FAILED = 6
} gt_diloco_state_t;

typedef struct {
    gt_diloco_state_t state;
    uint32_t site_index;  /* this site's index in the config's sites (its data share) */
    uint32_t n_sites;     /* sites in the config (outer.site_slots: the slots, vacant ones too) */
    uint64_t step;        /* the run's step counter (jumps ahead when a round ends early) */
    uint64_t first_step;  /* where this site began: 0, or R·H + τ for a site that joined */
    uint64_t total_steps; /* run.rounds × inner.steps */
    uint64_t inner_steps; /* H */
    uint64_t round;       /* the round being trained: step / H */
    uint64_t rounds_applied; /* by this site */
    uint64_t joined_round;   /* 0, or the first round of a site that joined a run in progress */
    uint64_t steps_trained;  /* gt_diloco_step calls */
    uint64_t tokens;         /* sum of the tokens passed to gt_diloco_step */
    double loss;             /* the last loss passed */
    double compute_s;        /* time in the caller's steps */
    double wait_s;           /* time waiting for results and state transfers */
    uint64_t wan_bytes_sent, wan_bytes_received;
    uint64_t view_epoch;
    uint32_t live_sites;
    uint64_t hash_checks, hash_mismatches, anchor_refetches;
    double param_passes;  /* full sweeps over the parameter vector by the outer step */
    int64_t resumed_step; /* the step this site resumed the run at (params.resume_dir); -1 none */
    /* outer.catch_up: the steps this site skipped by ending rounds early (a peer had submitted
     * them), and how many rounds it ended so. step = first_step + steps_trained + steps_skipped. */
    uint64_t steps_skipped, rounds_cut;
} gt_diloco_status_t;

/* Joins the run as the site params->site: loads the config, connects to the other sites,
 * registers in etcd, checks that every site has the same number of parameters, and either
 * starts the run (waits for the other sites, agrees on the initial anchor) or — when the run
 * is already in progress — joins it: fetches the agreed anchor and momentum, writes the anchor
 * into params[], and continues from step R·H + τ (gt_diloco_status: first_step; skip the
 * caller's data to it). Blocks until then (bounded by wan.connect_timeout_ms and the round
 * deadlines). */
GT_API gt_status_t gt_diloco_create(const gt_diloco_params_t *params,
                                    gt_diloco_t **diloco_p) GT_MUST_USE;

/* Call after each inner step, once the caller's parameters hold that step's update: `tokens`
 * trained in it (the weight of this site's contribution) and its loss (for the live line,
 * metrics and summary). At the end of a round it submits; at the apply step it applies and
 * rebases params[] in place (waiting for the result only if it is late); at the run's last
 * step it applies the last round and leaves the final anchor in params[]. The time since the
 * previous call counts as compute time; with inner.emulated_step_ms set, a step shorter than
 * that sleeps the rest (then --slow's factor applies). GT_ERR_CLOSED: a stop was requested
 * (leave the loop and close). Another error: the site has failed (the other sites go on
 * without it). */
GT_API gt_status_t gt_diloco_step(gt_diloco_t *d, uint64_t tokens, double loss) GT_MUST_USE;
/* The same with the step's compute time given (seconds; < 0: measured as above), for a caller
 * that does other work (evaluation, checkpoints) between steps. A given time is capped at the
 * wall time since the previous call, so the speeds and the goodput computed from it stay
 * within what the clock allows (goodput in [0, 1]). */
GT_API gt_status_t gt_diloco_step_timed(gt_diloco_t *d, uint64_t tokens, double loss,
                                        double compute_s) GT_MUST_USE;

/* Synchronous data parallelism across sites (outer.mode: sync-dp, the baseline): averages the
 * gradient grads[0, n_params) of the step about to be taken (`step`, from 0; `tokens` in its
 * batch, the weight) with every site's, in place (bf16 on the wire). Call it every step
 * between backward and the optimizer, and gt_diloco_step after the optimizer as usual.
 * params[] must hold the parameters the gradient was computed at (they are hashed for the
 * anchor check). */
GT_API gt_status_t gt_diloco_sync_grads(gt_diloco_t *d, uint64_t step, float *grads,
                                        uint64_t tokens) GT_MUST_USE;

GT_API void gt_diloco_status(gt_diloco_t *d, gt_diloco_status_t *status_p);

/* The summary so far as JSON (the fields of SITE/summary.json) into buf[cap] with its length
 * in *len_p (without the terminating NUL). GT_ERR_OVERFLOW, with *len_p the size needed, when
 * cap is too small. Collective over the site's ranks (it sums their WAN counters). */
GT_API gt_status_t gt_diloco_summary(gt_diloco_t *d, char *buf, size_t cap,
                                     size_t *len_p) GT_MUST_USE;

/* Saves the outer state — θ_a, the outer momentum, the error-feedback residuals, the round, the
 * view epoch, the contribution counters, the site's token and step counts — as
 * DIR/outer-SSSSSSSS.gtos (S = the step; "-rankK" for rank K of a multi-rank site), crash-safe
 * (temporary file, fsync, rename, fsync of DIR) with an XXH3-128 checksum, and keeps the newest
 * `keep` (0: 1). Only at a round boundary: right after gt_diloco_step applied a round, i.e. when
 * the step is r·H + τ (r >= 1); sync-dp: after any step. Save the caller's own state (its
 * parameters, optimizer and data position) at the same step. Collective over the site's ranks.
 * To resume, pass DIR as params.resume_dir (see there). */
GT_API gt_status_t gt_diloco_save(gt_diloco_t *d, const char *dir, unsigned keep) GT_MUST_USE;

/* Adds a number to summary.json (e.g. "eval_loss" of the final anchor); at most 16 keys. */
GT_API gt_status_t gt_diloco_set_result(gt_diloco_t *d, const char *key, double value) GT_MUST_USE;

/* The resolved configuration the context runs (valid until gt_diloco_close). */
GT_API const gt_topo_config_t *gt_diloco_config(const gt_diloco_t *d);

/* Leaves the run and frees the context: lets this site's last messages reach the others (at
 * most 5 s), writes SITE/summary.json with `result` (GT_OK: finished; GT_ERR_CLOSED: stopped;
 * else failed), deregisters from etcd (the others see the site leave at once) and stops the
 * background thread. With GT_ERR_PEER_LOST — what gt_diloco_step returned when the site was
 * removed from the run — it first keeps what the site trained since its last submit in
 * SITE/carry.gtcw (outer.carry_max_rounds; single-rank sites, or sites without a before_read
 * hook); started again, the site joins and adds it to its first contribution. Collective over
 * the site's ranks. Accepts NULL. */
GT_API void gt_diloco_close(gt_diloco_t *d, gt_status_t result);

/* The first error message the calling thread logged during its last call into this API ("" if
 * none). */
GT_API const char *gt_diloco_error_message(void);

#ifdef __cplusplus
}
#endif

#endif /* GT_DILOCO_H */
