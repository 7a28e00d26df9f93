/* launch_internal.h — `geotrain launch`'s parts, shared by its files (not installed):
 * cmd_launch.c (options, config, scripted and chaos events, the run directory and etcd, the
 * --set list; the step sequence), launch_sites.c (the site processes: spawning, supervision,
 * signals, the live lines, the exit status) and launch_summary.c (each site's process lives and
 * the run's summary.json).
 */
#ifndef GT_CLI_LAUNCH_INTERNAL_H
#define GT_CLI_LAUNCH_INTERNAL_H

#include "etcd_local.h"
#include "gt_outer.h"
#include "gt_topology.h"
#include "launch_chaos.h"

#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MAX_EVENTS 64
#define MAX_SETS   256

typedef struct {
    char name[GT_TOPO_NAME_MAX];
    pid_t pid;
    int exited, status;
    int killed;            /* by a --kill event */
    int retired;           /* exit 4: retired for good (geotrain sites remove), not restarted */
    uint64_t kill_sent_ns; /* --kill: when its stopped rank was SIGKILLed (0: not yet) */
    int64_t kill_round;    /* -1: none */
    double slow;
    int64_t corrupt_round; /* --corrupt-anchor: -1 none */
    int64_t join_round;    /* --join: start once another site applied this many rounds; -1 */
    int64_t restart_round; /* --restart: start again after the kill, likewise; -1 */
    int started;           /* a process was started for it */
    int restarted;         /* it was killed and started again */
    int rejoins;           /* started again after it was removed from the run (exit 3) */
    int chaos_down;        /* --chaos: SIGKILLed, waiting for its restart round */
    int chaos_stopped;     /* --chaos: SIGSTOPped */
    int ended_joining;     /* --chaos: stopped while still joining, after the run had ended */
    int ended_behind;      /* --chaos: stopped more than a round from the end when another
                              site had finished: nothing it trained could reach the anchor */
    json_t *st;            /* last status.json */
    /* Its process lives, for goodput's breakdown (track_lives): the one being followed, since
     * when, its SIGSTOPped seconds, and the records of the lives that ended. */
    pid_t life_pid;
    double life_start, stop_since, life_stopped_s, last_pstart;
    json_t *lives;
} site_proc_t;

/* One launch: its options, the run it starts, and what the supervision keeps track of. The
 * steps of gt_cmd_launch below each take and fill it. */
typedef struct {
    /* the options */
    const char *run_dir_opt, *config;
    int config_given; /* a config on the command line (else --resume reads launch.json's) */
    const char *kills[MAX_EVENTS], *slows[MAX_EVENTS], *user_sets[MAX_SETS];
    const char *corrupts[MAX_EVENTS], *joins[MAX_EVENTS], *restarts[MAX_EVENTS];
    size_t n_kills, n_slows, n_user, n_corrupts, n_joins, n_restarts;
    /* etcd members killed / restarted at a round: member index and round, -1 once done */
    long etcd_members, etcd_ev[2][MAX_EVENTS][2];
    size_t n_etcd_ev[2];
    int resume, chaos, dry_run, etcd_plain;
    unsigned long long chaos_seed;
    double mtbf, round_s, fault_rounds;
    json_t *launch_rec; /* RUN_DIR/launch.json of the run being resumed */
    /* the run */
    gt_topo_config_t *cfg;
    site_proc_t *sp; /* cfg->n_sites */
    const char *names[GT_OUTER_MAX_SITES];
    gt_chaos_params_t chp;
    uint32_t n_late, expect; /* sites that --join later; sites the run starts with (0: all) */
    char run_dir[PATH_MAX], self[PATH_MAX], run_id[PATH_MAX], tls_path[PATH_MAX + 32];
    const char *endpoint, *tls_dir; /* the local etcd's, when launch starts one */
    char **sets;                    /* the --set list every site gets */
    size_t n_sets;
    gt_etcd_cluster_t etcd;
    uint64_t t0, emu_start_ns;
    /* --chaos: RUN_DIR/chaos_cuts, the link cuts fired so far (GT_CHAOS_CUTS of every site) */
    char cuts_path[PATH_MAX + 16];
    /* the supervision: the live lines; --chaos: the run's furthest round, when training
     * began, and (sync-dp) the whole run's stop and restart from its checkpoints */
    int tty, drawn, sync_chaos, whole_down;
    uint32_t running, whole_restarts, chaos_skipped;
    double progress, t_first_unix, down_rounds, down_s;
    uint64_t whole_restart_ns, t_first_done, last_print;
    long notices_read; /* bytes of RUN_DIR/logs/kill-notices acted on */
} launch_t;

/* `-- CMD ARGS...`: the user's trainer, run once per site instead of `geotrain run`. */
extern char **g_cmd;
/* --chaos: the schedule, and each site's slowdown windows (GT_SLOW_WINDOWS in its env). */
extern gt_chaos_ev_t g_chaos[GT_CHAOS_MAX_EVENTS];
extern size_t g_n_chaos;
extern const char *const *g_site_names;
extern uint32_t g_n_site_names;
/* --set-site SITE:KEY=VALUE: overrides for one site only, after the --set list. */
extern const char *g_site_sets[MAX_SETS];
extern size_t g_n_site_sets;
/* launch's own etcd over TLS: each site's client certificate, as SITE:KEY=VALUE entries. */
extern char g_tls_sets[2 * GT_TOPO_MAX_SITES][PATH_MAX + 96];
extern size_t g_n_tls_sets;
/* The signal that asked launch to stop (0: none). */
extern volatile sig_atomic_t g_interrupted;
/* Open MPI's session folders of this launch (cmd_launch.c says why). */
extern char g_mpi_tmp[64];

/* cmd_launch.c */
/* The KEY=VALUE of a --set-site entry when it is for `site`, else NULL. */
const char *gt_launch_site_set_for(const char *entry, const char *site);
/* The --set list every site gets: the user's, then etcd (and its TLS) and generated keys. */
int gt_launch_build_sets(const gt_topo_config_t *cfg, const char *run_dir, const char *endpoint,
                         const char *tls_dir, const char **user, size_t n_user, char ***sets_p,
                         size_t *n_p);

/* launch_sites.c */
json_t *gt_launch_read_json(const char *path);
double gt_launch_jnum(json_t *o, const char *k);
int gt_launch_start_sites(launch_t *L);
void gt_launch_supervise(launch_t *L);
void gt_launch_stop_sites(launch_t *L);
int gt_launch_report(launch_t *L);

/* launch_summary.c */
void gt_launch_track_lives(site_proc_t *sp, uint32_t n, const char *run_dir, int final);
int gt_launch_write_summary(const char *run_dir, const gt_topo_config_t *cfg, site_proc_t *sp,
                            double wall_s, double t_first_unix, uint32_t whole_restarts,
                            uint32_t chaos_skipped);

#endif /* GT_CLI_LAUNCH_INTERNAL_H */
