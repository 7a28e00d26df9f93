/* launch_chaos.h — `geotrain launch --chaos SEED`: the seeded fault schedule, and the run's
 * goodput (internal to cli/; cmd_launch.c and bench_chaos.c use it).
 */
#ifndef GT_CLI_LAUNCH_CHAOS_H
#define GT_CLI_LAUNCH_CHAOS_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

typedef enum {
    GT_CHAOS_KILL = 0, /* SIGKILL the site at `at`, start it again (a joiner) at `until` */
    GT_CHAOS_STOP = 1, /* SIGSTOP the site at `at` for stop_s seconds, then SIGCONT */
    GT_CHAOS_SLOW = 2, /* the site's steps `factor` times slower for rounds [at, until) */
    GT_CHAOS_ETCD = 3, /* SIGKILL etcd member `target` at `at`, start it again at `until` */
    GT_CHAOS_CUT = 4,  /* cut the links of site `target` (to `peer` only, or to every other
                        * site) for [start_s, start_s + duration_s) of the emulation clock */
} gt_chaos_kind_t;

#define GT_CHAOS_ALL_PEERS UINT32_MAX

typedef struct {
    gt_chaos_kind_t kind;
    uint32_t target;   /* a site index (etcd: a member index) */
    uint32_t at;       /* the run's round (the most any site reached) that triggers it */
    double until;      /* KILL/ETCD: round of the restart; SLOW: back at full speed (rounds,
                        * fractional with --fault-rounds: the run's steps over H) */
    double stop_s;     /* STOP: seconds stopped */
    double factor;     /* SLOW: 3 to 10 */
    uint32_t peer;     /* CUT: the other end, or GT_CHAOS_ALL_PEERS */
    double from;       /* CUT: the run's round it fires at (the drawn round plus up to one) */
    double start_s;    /* CUT: once fired, its start on the run's emulation clock (before:
                        * from x round_s, the guess the run-time checks use until then) */
    double duration_s; /* CUT: 2 s to 2.5 x wan.peer_timeout_ms */
    int state;         /* the launcher's: 0 pending, 1 begun, 2 over (or skipped) */
    uint64_t begun_ns; /* the launcher's: when it began */
} gt_chaos_ev_t;

typedef struct {
    uint64_t seed;
    double mtbf_rounds;    /* mean rounds between faults of one site (and of etcd) */
    uint32_t n_sites;      /* the configured sites */
    uint32_t rounds;       /* run.rounds */
    uint32_t etcd_members; /* launch's own etcd cluster (0: none, no etcd faults) */
    double lease_ttl_s;    /* a STOP lasts 0.5 to 2 leases: some sites become zombies */
    double round_s;        /* CUT: the seconds a round is expected to take (0: no cuts) */
    double peer_timeout_s; /* CUT: wan.peer_timeout_ms; the longest cuts last 2.5 of it */
    double fault_rounds;   /* the mean length in rounds of a kill's down time, a slowdown and an
                            * etcd member's outage (0: 2, the default) */
} gt_chaos_params_t;

#define GT_CHAOS_MAX_EVENTS 256

/* Draws the schedule (same params, same schedule): per site a renewal process over the rounds
 * with exponential gaps of mean mtbf_rounds (faults of one site never overlap), each fault a
 * KILL, STOP or SLOW with equal odds; etcd members (with >= 3) one at a time at the same rate.
 * A KILL's down time and a SLOW's length are 1/2, 1 or 3/2 x fault_rounds (equal odds: 1, 2 or
 * 3 rounds by default), an etcd member's outage one round longer.
 * Link cuts (round_s > 0) come from a stream of their own per site, with gaps of mean
 * 3 x mtbf_rounds (so about a quarter of a site's faults, and the other faults of a seed stay
 * where they were): the site's links to every other site or to one (equal odds), for 2 s to
 * 2.5 x peer_timeout_s, from round `from` (the drawn round plus up to one; launch fires it
 * when the run reaches that round, for duration_s seconds).
 * No fault starts before round 1 or ends after rounds - 3 (a restarted site has rounds left to
 * rejoin); a KILL or STOP that would take more than (S - 1) / 2 sites away at once is
 * dropped, so a majority always trains. Sorted by `at`. Returns the number of events written to ev
 * (at most cap). */
size_t gt_chaos_draw(const gt_chaos_params_t *p, gt_chaos_ev_t *ev, size_t cap);

/* The schedule as JSON (for RUN_DIR/chaos.json) and as lines on out; names[] the site names. */
json_t *gt_chaos_json(const gt_chaos_params_t *p, const gt_chaos_ev_t *ev, size_t n,
                      const char *const *names);
void gt_chaos_print(FILE *out, const gt_chaos_ev_t *ev, size_t n, const char *const *names);

/* GT_SLOW_WINDOWS for site i: its SLOW events as "FACTOR@FROM-TO,..." ("" if none). */
void gt_chaos_slow_windows(const gt_chaos_ev_t *ev, size_t n, uint32_t site, char *buf, size_t len);

/* 1 when taking the sites in `down` (bit k: site k; the fault about to fire included) away
 * over [t0_s, t1_s] of the emulation clock, together with every link cut of the schedule whose
 * window comes within margin_s of that (a cut-off site needs a while to rejoin after it heals,
 * a restarted or stopped one after it is back), would leave fewer than a majority of the
 * n_sites sites able to reach a majority of them (themselves included): the cuts are set in
 * every site's config before the run, in seconds, so launch's run-time check before a kill or
 * a SIGSTOP must take them into account there (two cut sites and a stopped third of three is
 * a run with no majority anywhere: every site leaves). Cuts that overlap the window are taken
 * as if they were all in effect at once (conservative). */
int gt_chaos_cuts_break_majority(const gt_chaos_ev_t *ev, size_t n, uint32_t n_sites, uint64_t down,
                                 double t0_s, double t1_s, double margin_s);

/* The most goodput the schedule allows whatever the protocol does: 1 − (site-rounds the faults
 * take themselves: a kill's rounds until its restart, a SIGSTOP's seconds over round_s, a
 * slowdown's (1 − 1/factor) of its rounds) / (n_sites × rounds). Cuts and etcd faults take
 * nothing by themselves. Skipped events (state 2 without begun_ns) are left out. */
double gt_chaos_bound(const gt_chaos_ev_t *ev, size_t n, uint32_t n_sites, uint32_t rounds,
                      double round_s);
/* Goodput of the run in run_dir (docs/diloco.md#goodput): adds goodput, tokens_in_anchor,
 * tokens_possible, goodput_wall_s and speeds to `summary`, and with lives (per site, launch's
 * records of its process lives: start_unix, end_unix, train_start_unix, train_end_unix,
 * life_compute_s, chaos_slow_s, life_wait_s, stopped_s, time_unix; NULL or a NULL entry: none)
 * goodput_breakdown, the shares of tokens_possible that went where (they and in_anchor, which is
 * goodput, add up to 1). rounds: the rounds of the run's anchors.jsonl (sync-dp: steps);
 * t_first_unix: the earliest training start the launcher saw (0: take it from the sites'
 * summaries). */
void gt_chaos_goodput(const char *run_dir, const char *const *names, uint32_t n_sites,
                      uint64_t rounds, json_t *const *lives, double t_first_unix, json_t *summary);

#endif /* GT_CLI_LAUNCH_CHAOS_H */
