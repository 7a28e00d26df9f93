/* cmd_launch.c — `geotrain launch [sites.yaml]`: every site of a config on this machine.
 *
 * Starts a one-node etcd when the config names no membership endpoints, generates a key pair
 * for every site that has none pinned (in RUN_DIR/keys, pinned in RUN_DIR/sites.yaml, the
 * config the sites actually run), starts each site as its own `geotrain run` process (its
 * output in RUN_DIR/logs/SITE.log), and shows one live line per site from the status file
 * each site keeps. Scripted events: --kill SITE@ROUND (the site SIGKILLs itself once it has
 * applied ROUND rounds: exact, where polling its status raced a fast run), --slow SITE=FACTOR,
 * --join SITE@ROUND (SITE is started only once another site has applied ROUND rounds; the
 * others start round 0 without waiting for it) and --restart SITE@ROUND (after its --kill,
 * SITE is started again once another site has applied ROUND rounds); a site started late
 * joins the run by itself (diloco/). --chaos SEED draws a fault schedule over the rounds
 * (launch_chaos.c) and fires it from the same polling loop, except its link cuts, which every
 * site gets before it starts (--set links[A,B].cuts=..., on the shared emulation clock).
 * Ctrl-C stops every site cleanly (SIGTERM: each finishes its step, deregisters and exits),
 * then etcd. At the end it writes RUN_DIR/summary.json.
 *
 * `launch CONFIG -- CMD ARGS...` runs a trainer of the user's own instead of `geotrain run`:
 * CMD once per site, told where it stands through the environment (GT_CONFIG and GT_SET: the
 * config and the overrides every site gets, one KEY=VALUE a line; GT_SITE, GT_RUN_DIR,
 * GT_RUN_ID; the chaos events as GT_SLOW, GT_KILL_AT_ROUND, GT_CORRUPT_ANCHOR,
 * GT_EXPECT_SITES), which gt_diloco_create (C) or geotrain.DiLoCo (Python) reads. Everything
 * else is the same: the library writes the status.json, anchors.jsonl and summary.json the
 * live lines, the events and the run summary are made of.
 */
#include "cli.h"
#include "certs.h"
#include "etcd_local.h"
#include "launch_chaos.h"
#include "launch_ranks.h"
#include "gt_local.h"
#include "gt_topology.h"
#include "gt_outer.h"
#include "gt_wan.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_EVENTS 64
#define MAX_SETS   256

/* `-- CMD ARGS...`: the user's trainer, run once per site instead of `geotrain run`. */
static char **g_cmd;

/* --chaos: the schedule, and each site's slowdown windows (GT_SLOW_WINDOWS in its env). */
static gt_chaos_ev_t g_chaos[GT_CHAOS_MAX_EVENTS];
static size_t g_n_chaos;
static const char *const *g_site_names;
static uint32_t g_n_site_names;
/* --set-site SITE:KEY=VALUE: overrides for one site only, after the --set list. */
static const char *g_site_sets[MAX_SETS];
static size_t g_n_site_sets;
/* launch's own etcd over TLS: each site's client certificate, as SITE:KEY=VALUE entries that go
 * before the user's --set-site ones (build_sets). */
static char g_tls_sets[2 * GT_TOPO_MAX_SITES][PATH_MAX + 96];
static size_t g_n_tls_sets;

/* The KEY=VALUE of a --set-site entry when it is for `site`, else NULL. */
static const char *site_set_for(const char *entry, const char *site)
{
    const char *colon = strchr(entry, ':');
    size_t n = strlen(site);
    return colon && (size_t)(colon - entry) == n && strncmp(entry, site, n) == 0 ? colon + 1 : NULL;
}

static volatile sig_atomic_t g_interrupted = 0;
/* Open MPI's session directories for the multi-rank sites: a folder per launch, one per site in
 * it (OMPI_MCA_orte_tmpdir_base; a user's own setting wins). Concurrent mpiruns sharing the
 * default /tmp/ompi.HOST.UID race — one's cleanup removes the folder another is creating, and
 * that one fails at start: "A call to mkdir was unable to create the desired directory ...
 * File exists" (seen with several launches at once in the test suite). */
static char g_mpi_tmp[64];
static void on_interrupt(int sig)
{
    g_interrupted = sig;
}

typedef struct {
    char name[GT_TOPO_NAME_MAX];
    pid_t pid;
    int exited, status;
    int killed;         /* by a --kill event */
    int64_t kill_round; /* -1: none */
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

static void usage(FILE *out)
{
    fprintf(out,
            "usage: geotrain launch [SITES.yaml] [--run-dir DIR] [--kill SITE@ROUND ...]\n"
            "                       [--restart SITE@ROUND ...] [--join SITE@ROUND ...]\n"
            "                       [--slow SITE=FACTOR ...] [--corrupt-anchor SITE@ROUND ...]\n"
            "                       [--etcd-members N] [--etcd-plain] [--kill-etcd M@ROUND ...]\n"
            "                       [--restart-etcd M@ROUND ...] [--set KEY=VALUE ...]\n"
            "                       [--set-site SITE:KEY=VALUE ...] [--reuse-run-id]\n"
            "                       [--resume RUN_DIR] [--chaos SEED [--mtbf-rounds M]\n"
            "                       [--fault-rounds F]]\n"
            "                       [--dry-run] [-- CMD ARGS...]\n"
            "\n"
            "Runs every site of SITES.yaml (default ./sites.yaml) on this machine, each as its\n"
            "own process, exchanging pseudo-gradients over the WAN layer (emulated when\n"
            "wan.emulation.enabled). Starts etcd when membership.endpoints is empty: a Raft\n"
            "cluster of 3 members on loopback (--etcd-members), so membership survives the\n"
            "loss of one, with client and peer TLS: a CA made for the run signs each member's\n"
            "certificate and each site's client certificate (RUN_DIR/etcd/tls; keys 0600), and\n"
            "etcd answers no one without one (--etcd-plain: plain HTTP on loopback instead).\n"
            "Makes a key pair for every site that has no public_key in the file.\n"
            "A site with ranks > 1 is started as an MPI job, `mpirun -np RANKS geotrain run`\n"
            "(GT_MPIRUN names another launcher; --allow-run-as-root when root), with its own\n"
            "Open MPI session folder /tmp/gt-ompi-*/SITE (OMPI_MCA_orte_tmpdir_base, unless\n"
            "set: mpiruns sharing the default one race), removed at the end.\n"
            "\n"
            "With -- CMD ARGS..., runs CMD once per site instead of the built-in trainer: a\n"
            "trainer of your own that uses the C API (gt_diloco.h) or the Python package\n"
            "(geotrain.DiLoCo), e.g. `geotrain launch sites.yaml -- python3 train.py`. CMD\n"
            "gets GT_CONFIG (the config file), GT_SET (the overrides every site gets: --set,\n"
            "the etcd endpoints, generated keys; one KEY=VALUE a line), GT_SITE, GT_RUN_DIR\n"
            "and GT_RUN_ID, and for the events below GT_SLOW, GT_KILL_AT_ROUND,\n"
            "GT_CORRUPT_ANCHOR and GT_EXPECT_SITES; the library reads them all (and\n"
            "GT_LIBRARY, the libgeotrain.so beside this binary, for python/). A site of\n"
            "R ranks runs CMD R times with torchrun's variables (RANK, LOCAL_RANK,\n"
            "WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT: one rendezvous per\n"
            "site, on a free loopback port) and GT_RANKS, so a script written for torchrun\n"
            "runs unchanged (torch.distributed.init_process_group, then geotrain.DiLoCo);\n"
            "a rank killed takes its site's other ranks with it. With GT_MPIRUN set, such a\n"
            "site runs `$GT_MPIRUN -np R CMD` instead (an MPI program). Live lines, events and\n"
            "summary.json are the same: the library writes what they are made of.\n"
            "\n"
            "Shows one line per site: round, step, loss, tokens/s, WAN MB/s, time waiting.\n"
            "Ctrl-C stops every site cleanly (each finishes its step and leaves), then etcd;\n"
            "a launcher killed outright (SIGKILL) takes its sites and etcd with it.\n"
            "\n"
            "Run directory (--run-dir, default run.run_dir/run.name-YYYYmmdd-HHMMSS):\n"
            "  sites.yaml         the config, and (as comments) what launch added with --set\n"
            "  config.yaml        the resolved config\n"
            "  launch.lock        held for the whole launch: a second launch on the same\n"
            "                     directory is refused (exit 2) while this one runs\n"
            "  keys/              generated site keys (secret keys mode 0600)\n"
            "  logs/SITE.log      each site's output\n"
            "  SITE/              metrics.jsonl, status.json, summary.json, checkpoints/\n"
            "  summary.json       per-site loss, tokens, utilization; WAN bytes; the bytes\n"
            "                     synchronous data parallelism would have sent; the saving;\n"
            "                     contributions on time/late/dropped/rejected/open at the\n"
            "                     end/unreceived (sent to a site that had finished: from its\n"
            "                     FIN, or where no FIN could cross, from both sites'\n"
            "                     ledgers: unreceived_by_ledger); hash checks;\n"
            "                     goodput: tokens whose gradients reached the final anchor\n"
            "                     over what every site could have trained at its measured\n"
            "                     speed in the run's wall time (docs/diloco.md#goodput);\n"
            "                     goodput_breakdown: where the rest went (down, starting,\n"
            "                     stopped, slowed, waiting, overhead, after_training,\n"
            "                     trained_not_in_anchor), from every site process's life\n"
            "                     (sites.SITE.lives: start, end, how it ended, its times);\n"
            "                     with --chaos, goodput_bound: the most the schedule's faults\n"
            "                     leave (a kill's rounds down, a SIGSTOP's seconds, a\n"
            "                     slowdown's lost speed), whatever the protocol does\n"
            "\n"
            "Options:\n"
            "  --run-dir DIR        the run directory\n"
            "  --kill SITE@ROUND    SIGKILL SITE once it reaches ROUND (repeatable)\n"
            "  --restart SITE@ROUND start SITE again, after its --kill, once another site has\n"
            "                       applied ROUND rounds: it joins the run in progress (fetches\n"
            "                       the anchor and outer momentum from the running sites)\n"
            "  --join SITE@ROUND    start SITE only once another site has applied ROUND rounds\n"
            "                       (the others start without it); it joins the run then\n"
            "  --slow SITE=FACTOR   make SITE's steps FACTOR times slower (repeatable)\n"
            "  --corrupt-anchor SITE@ROUND\n"
            "                       chaos: flip one bit of SITE's anchor after ROUND; the\n"
            "                       anchor-hash check catches it and SITE re-fetches the anchor\n"
            "  --etcd-members N     members of the etcd cluster it starts (1 to 7, default 3)\n"
            "  --etcd-plain         that cluster over plain HTTP, no certificates (anyone on\n"
            "                       this host can then read and change the run's membership)\n"
            "  --kill-etcd M@ROUND  chaos: SIGKILL etcd member M (0-based) once a site has\n"
            "                       applied ROUND rounds (repeatable)\n"
            "  --restart-etcd M@ROUND\n"
            "                       start etcd member M again (same ports and data) then\n"
            "  --resume RUN_DIR     continue a stopped run in RUN_DIR (with its config and --set\n"
            "                       list from RUN_DIR/launch.json, unless CONFIG is given):\n"
            "                       every site restarts from the newest checkpoint step that\n"
            "                       all of them have intact (run.checkpoint_every), with a\n"
            "                       fresh etcd; a damaged newest checkpoint falls back to the\n"
            "                       previous one. A -- CMD trainer gets GT_RESUME=1\n"
            "  --chaos SEED         a seeded fault schedule over the run's rounds, printed at\n"
            "                       the start and written to RUN_DIR/chaos.json (same SEED, same\n"
            "                       schedule): kill -9 a site and start it again (a joiner)\n"
            "                       1, 2 or 3 rounds later; SIGSTOP it for 0.5-2 leases, then\n"
            "                       SIGCONT (past its lease it is a zombie: exit 3, rejoins);\n"
            "                       its steps 3-10x slower for 1, 2 or 3 rounds of wall time\n"
            "                       at its usual speed (both scale with --fault-rounds);\n"
            "                       kill -9 an etcd member and\n"
            "                       start it again; cut a site's links to every other site, or\n"
            "                       one of them, for 2 s to 2.5 x wan.peer_timeout_ms (a short\n"
            "                       cut delays rounds; a long one makes the cut-off site leave\n"
            "                       as the minority, exit 3, and rejoin). Faults fire when the\n"
            "                       run (its furthest site) reaches their round, except cuts:\n"
            "                       they are handed to every site before it starts (--set\n"
            "                       links[A,B].cuts=...) at round x --chaos-round-s seconds of\n"
            "                       the emulation clock. A kill or stop that would leave fewer\n"
            "                       than a majority training is skipped (chaos_skipped). Once\n"
            "                       a site finished, a site more than a round from the end is\n"
            "                       stopped (nothing more it trains can reach the anchor). With\n"
            "                       --set outer.mode=sync-dp, a site failing stops every site\n"
            "                       and the run restarts from its last checkpoint\n"
            "                       (run.checkpoint_every) after the fault's delay\n"
            "  --mtbf-rounds M      mean rounds between faults of one site (and of etcd),\n"
            "                       default 20\n"
            "  --fault-rounds F     mean length in rounds of a kill's down time, a slowdown\n"
            "                       and an etcd outage (each 1/2, 1 or 3/2 x F; default 2,\n"
            "                       i.e. 1-3 rounds); below 1, restarts and slowdowns end\n"
            "                       inside a round (rounds: the furthest site's step / H)\n"
            "  --chaos-round-s S    the seconds a round is expected to take, which places the\n"
            "                       link cuts on the emulation clock (default 2; 0: no cuts)\n"
            "  --dry-run            print the --chaos schedule as JSON and start nothing\n"
            "  --set KEY=VALUE      override a config key for every site (repeatable)\n"
            "  --set-site SITE:KEY=VALUE\n"
            "                       override a config key for SITE only, after the --set\n"
            "                       list (repeatable; kept for its restarts and --resume):\n"
            "                       a per-site key (`geotrain config reference` marks\n"
            "                       them), or a shared one, to see SITE refused at start\n"
            "                       (docs/diloco.md#what-sites-must-agree-on)\n"
            "  --reuse-run-id       with membership.endpoints (your etcd): a run id whose run\n"
            "                       started under it and has no site registered any more is\n"
            "                       refused at once (finished or abandoned); this clears its\n"
            "                       keys and starts afresh under it (GT_REUSE_RUN_ID=1 to CMD)\n"
            "  -h, --help           this text\n");
}

/* RUN_DIR/launch.lock, held (flock) for the whole launch: a second launch on the same run
 * directory would overwrite launch.json and reuse the etcd data folders of the first. The
 * lock goes with the process however it ends (SIGKILL included); the file keeps the holder's
 * pid for the message. Returns 0, or -1 having said why. */
static int lock_run_dir(const char *run_dir)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/launch.lock", run_dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "geotrain launch: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        char pid[32] = "";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        fprintf(stderr,
                "geotrain launch: %s is in use by another geotrain launch%s%s%s (%s is locked); "
                "wait for it to end, stop it, or give another --run-dir\n",
                run_dir, *pid ? " (pid " : "", pid, *pid ? ")" : "", path);
        close(fd);
        return -1;
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len)
        fprintf(stderr, "geotrain launch: warning: cannot write the pid to %s\n", path);
    return 0; /* fd stays open (and locked) until the process ends */
}

/* RUN_DIR/launch.json: the config (absolute path) and the --set list of the launch, which
 * `launch --resume RUN_DIR` starts the sites with again. */
static int record_launch(const char *run_dir, const char *config, const char **sets, size_t n)
{
    char path[PATH_MAX + 32], real[PATH_MAX];
    if (!realpath(config, real)) snprintf(real, sizeof real, "%s", config);
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) json_array_append_new(arr, json_string(sets[i]));
    json_t *per = json_array();
    for (size_t i = 0; per && i < g_n_site_sets; i++)
        json_array_append_new(per, json_string(g_site_sets[i]));
    json_t *o = arr && per
                    ? json_pack("{s:s, s:o, s:o}", "config", real, "sets", arr, "site_sets", per)
                    : NULL;
    snprintf(path, sizeof path, "%s/launch.json", run_dir);
    int rc = o && json_dump_file(o, path, JSON_INDENT(2)) == 0 ? 0 : -1;
    json_decref(o);
    if (rc) fprintf(stderr, "geotrain launch: cannot write %s\n", path);
    return rc;
}

/* Prepares RUN_DIR/sites.yaml: the user's file with every site's key pinned (generating the
 * missing ones) and the etcd endpoint. Returns the path in out. */
static int prepare_config(const char *src, const gt_topo_config_t *cfg, const char *run_dir,
                          const char *endpoint, const char *tls_dir, char *out, size_t out_len)
{
    char keydir[PATH_MAX + 16], text[8192];
    snprintf(keydir, sizeof keydir, "%s/keys", run_dir);
    FILE *in = fopen(src, "r");
    if (!in) {
        fprintf(stderr, "geotrain launch: cannot read %s: %s\n", src, strerror(errno));
        return -1;
    }
    snprintf(out, out_len, "%s/sites.yaml", run_dir);
    FILE *f = fopen(out, "w");
    if (!f) {
        fclose(in);
        fprintf(stderr, "geotrain launch: cannot write %s: %s\n", out, strerror(errno));
        return -1;
    }
    /* The user's file first, unchanged, then overrides as a second YAML document would not
     * load: instead the overrides are applied through --set when the sites start, and this
     * file records them as comments. */
    size_t n;
    while ((n = fread(text, 1, sizeof text, in)) > 0) fwrite(text, 1, n, f);
    fclose(in);
    fprintf(f, "\n# --- added by geotrain launch: applied to every site with --set ---\n");
    if (endpoint) fprintf(f, "# membership.endpoints=%s\n", endpoint);
    if (tls_dir)
        fprintf(f,
                "# membership.tls.ca=%s/ca.crt (launch's etcd takes TLS with a client "
                "certificate of this CA: each site's is %s/site-NAME.crt and .key)\n",
                tls_dir, tls_dir);
    for (size_t i = 0; i < g_n_site_sets; i++)
        fprintf(f, "# for site %.*s only (--set-site): %s\n", (int)strcspn(g_site_sets[i], ":"),
                g_site_sets[i], strchr(g_site_sets[i], ':') + 1);
    for (uint32_t i = 0; i < cfg->n_sites; i++) {
        const gt_topo_site_t *s = &cfg->sites[i];
        if (s->has_public_key || cfg->security.mode == GT_SECURITY_NONE) continue;
        gt_wan_keypair_t kp;
        char b64[GT_WAN_KEY_B64_LEN + 1];
        if (gt_wan_keypair_generate(&kp) != GT_OK ||
            gt_wan_keypair_save(&kp, keydir, s->name) != GT_OK) {
            gt_wan_keypair_wipe(&kp);
            fclose(f);
            return -1;
        }
        gt_wan_key_to_base64(kp.public_key, b64);
        gt_wan_keypair_wipe(&kp);
        fprintf(f, "# sites.%s.public_key=%s\n# sites.%s.secret_key=%s/%s.key\n", s->name, b64,
                s->name, keydir, s->name);
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* The --set list every site gets: the user's, then etcd and generated keys. */
static int build_sets(const gt_topo_config_t *cfg, const char *run_dir, const char *endpoint,
                      const char *tls_dir, const char **user, size_t n_user, char ***sets_p,
                      size_t *n_p)
{
    size_t cap = n_user + 3 + 2 * cfg->n_sites, n = 0;
    char **sets = calloc(cap, sizeof *sets);
    if (!sets) return -1;
    for (size_t i = 0; i < n_user; i++) sets[n++] = strdup(user[i]);
    if (endpoint) {
        sets[n] = malloc(strlen(endpoint) + 32);
        sprintf(sets[n++], "membership.endpoints=%s", endpoint);
    }
    g_n_tls_sets = 0;
    if (tls_dir) { /* the CA every site trusts; each site's own client certificate */
        sets[n] = malloc(strlen(tls_dir) + 48);
        sprintf(sets[n++], "membership.tls.ca=%s/ca.crt", tls_dir);
        for (uint32_t i = 0; i < cfg->n_sites; i++) {
            char name[GT_TOPO_NAME_MAX + 8], cn[GT_TOPO_NAME_MAX + 16], crt[PATH_MAX + 64],
                key[PATH_MAX + 64];
            snprintf(name, sizeof name, "site-%s", cfg->sites[i].name);
            snprintf(cn, sizeof cn, "geotrain site %s", cfg->sites[i].name);
            gt_certs_paths(tls_dir, name, crt, key, sizeof crt);
            if (access(key, F_OK) != 0 &&
                gt_certs_issue(tls_dir, name, cn, GT_CERT_CLIENT, NULL, 0, 30) != GT_OK)
                return -1;
            snprintf(g_tls_sets[g_n_tls_sets++], sizeof g_tls_sets[0], "%s:membership.tls.cert=%s",
                     cfg->sites[i].name, crt);
            snprintf(g_tls_sets[g_n_tls_sets++], sizeof g_tls_sets[0], "%s:membership.tls.key=%s",
                     cfg->sites[i].name, key);
        }
    }
    for (uint32_t i = 0; i < cfg->n_sites; i++) {
        const gt_topo_site_t *s = &cfg->sites[i];
        if (s->has_public_key || cfg->security.mode == GT_SECURITY_NONE) continue;
        char path[PATH_MAX + 128];
        snprintf(path, sizeof path, "%s/keys/%s.pub", run_dir, s->name);
        FILE *f = fopen(path, "r");
        char line1[128] = "", line2[128] = "";
        if (!f || !fgets(line1, sizeof line1, f) || !fgets(line2, sizeof line2, f)) {
            if (f) fclose(f);
            fprintf(stderr, "geotrain launch: cannot read %s\n", path);
            return -1;
        }
        fclose(f);
        line2[strcspn(line2, "\n")] = '\0';
        sets[n] = malloc(strlen(s->name) + strlen(line2) + 32);
        sprintf(sets[n++], "sites.%s.public_key=%s", s->name, line2);
        sets[n] = malloc(strlen(s->name) * 2 + strlen(run_dir) + 48);
        sprintf(sets[n++], "sites.%s.secret_key=%s/keys/%s.key", s->name, run_dir, s->name);
    }
    *sets_p = sets;
    *n_p = n;
    return 0;
}

/* --chaos: the drawn link cuts join the --set list (links[A,B].cuts=...), so every site, a
 * restarted one too, starts with the same cut windows on the run's emulation clock. */
static int add_cut_sets(const gt_topo_config_t *cfg, char ***sets_p, size_t *n_p)
{
    char *cut[GT_TOPO_MAX_SITES * 4];
    size_t n_cut = gt_chaos_cut_sets(g_chaos, g_n_chaos, cfg, cut, sizeof cut / sizeof cut[0]);
    if (n_cut == (size_t)-1) {
        fprintf(stderr,
                "geotrain launch: --chaos: a link would have more than %d cuts; "
                "use a larger --mtbf-rounds\n",
                GT_TOPO_MAX_CUTS);
        return -1;
    }
    char **grown = n_cut ? realloc(*sets_p, (*n_p + n_cut) * sizeof *grown) : *sets_p;
    if (!grown) {
        while (n_cut) free(cut[--n_cut]);
        return -1;
    }
    for (size_t i = 0; i < n_cut; i++) grown[(*n_p)++] = cut[i];
    *sets_p = grown;
    return 0;
}

/* The environment a user's CMD reads (gt_diloco.h), set in the child before exec; whatever
 * launch's own environment held for these names is replaced or removed. */
static int cmd_env(const char *self, const char *config, const char *site, const char *run_dir,
                   const char *run_id, double slow, int64_t corrupt, int64_t kill_at,
                   uint32_t expect, char **sets, size_t n_sets, uint32_t ranks)
{
    char num[32], lib[PATH_MAX + 64];
    /* The library beside this binary (build tree: build/cli/geotrain and build/libgeotrain.so;
     * install tree: PREFIX/bin/geotrain and PREFIX/lib*), for a CMD that loads it (python/). */
    const char *const rel[] = {"/../libgeotrain.so", "/../lib/libgeotrain.so",
                               "/../lib64/libgeotrain.so",
                               "/../lib/x86_64-linux-gnu/libgeotrain.so"};
    const char *slash = strrchr(self, '/');
    for (size_t i = 0; slash && !getenv("GT_LIBRARY") && i < sizeof rel / sizeof rel[0]; i++) {
        snprintf(lib, sizeof lib, "%.*s%s", (int)(slash - self), self, rel[i]);
        char real[PATH_MAX];
        if (realpath(lib, real) && access(real, R_OK) == 0) setenv("GT_LIBRARY", real, 1);
    }
    size_t len = 1;
    for (size_t i = 0; i < n_sets; i++) len += strlen(sets[i]) + 1;
    for (size_t i = 0; i < g_n_site_sets; i++) len += strlen(g_site_sets[i]) + 1;
    for (size_t i = 0; i < g_n_tls_sets; i++) len += strlen(g_tls_sets[i]) + 1;
    char *joined = calloc(len, 1);
    if (!joined) return -1;
    for (size_t i = 0; i < n_sets; i++) {
        strcat(joined, sets[i]);
        strcat(joined, "\n");
    }
    for (size_t i = 0; i < g_n_tls_sets; i++) {
        const char *kv = site_set_for(g_tls_sets[i], site);
        if (!kv) continue;
        strcat(joined, kv);
        strcat(joined, "\n");
    }
    for (size_t i = 0; i < g_n_site_sets; i++) {
        const char *kv = site_set_for(g_site_sets[i], site);
        if (!kv) continue;
        strcat(joined, kv);
        strcat(joined, "\n");
    }
    int rc = setenv("GT_CONFIG", config, 1) | setenv("GT_SET", joined, 1) |
             setenv("GT_SITE", site, 1) | setenv("GT_RUN_DIR", run_dir, 1) |
             setenv("GT_RUN_ID", run_id, 1);
    free(joined);
    snprintf(num, sizeof num, "%g", slow);
    rc |= slow > 1.0 ? setenv("GT_SLOW", num, 1) : unsetenv("GT_SLOW");
    snprintf(num, sizeof num, "%lld", (long long)corrupt);
    rc |= corrupt >= 0 ? setenv("GT_CORRUPT_ANCHOR", num, 1) : unsetenv("GT_CORRUPT_ANCHOR");
    snprintf(num, sizeof num, "%lld", (long long)kill_at);
    rc |= kill_at >= 0 ? setenv("GT_KILL_AT_ROUND", num, 1) : unsetenv("GT_KILL_AT_ROUND");
    snprintf(num, sizeof num, "%u", expect);
    rc |= expect > 0 ? setenv("GT_EXPECT_SITES", num, 1) : unsetenv("GT_EXPECT_SITES");
    snprintf(num, sizeof num, "%u", ranks);
    rc |= setenv("GT_RANKS", num, 1);
    return rc ? -1 : 0;
}

/* append_log: 0 a new log; 1 appended to (a restart); 2 appended to, and the site resumes the
 * run from its checkpoints (`run --resume`; a user's CMD gets GT_RESUME=1). */
static pid_t spawn_site(const char *self, const char *config, const char *site, const char *run_dir,
                        const char *run_id, double slow, int64_t corrupt, int64_t kill_at,
                        uint32_t expect, int append_log, char **sets, size_t n_sets, uint32_t ranks)
{
    char log[PATH_MAX + 64], slow_s[32], corrupt_s[32], kill_s[32], np_s[16], expect_s[16];
    snprintf(log, sizeof log, "%s/logs/%s.log", run_dir, site);
    snprintf(slow_s, sizeof slow_s, "%g", slow);
    size_t argc = 0;
    char **argv = calloc(32 + 2 * (n_sets + g_n_site_sets + g_n_tls_sets), sizeof *argv);
    if (!argv) return -1;
    const char *exe = self;
    /* A user's CMD for a site of several ranks: started once per rank with torchrun's
     * variables (launch_ranks.c), unless GT_MPIRUN names an MPI launcher to run it. */
    const char *mpirun_env = getenv("GT_MPIRUN");
    int torch_ranks = g_cmd && ranks > 1 && !(mpirun_env && *mpirun_env);
    int use_mpi = ranks > 1 && !torch_ranks;
    if (use_mpi && !g_mpi_tmp[0] && !getenv("OMPI_MCA_orte_tmpdir_base")) {
        snprintf(g_mpi_tmp, sizeof g_mpi_tmp, "/tmp/gt-ompi-XXXXXX");
        if (!mkdtemp(g_mpi_tmp)) {
            fprintf(stderr, "geotrain launch: cannot create %s for Open MPI: %s\n", g_mpi_tmp,
                    strerror(errno));
            g_mpi_tmp[0] = '\0';
        }
    }
    if (use_mpi) {
        /* A multi-rank site is one MPI job: mpirun (GT_MPIRUN overrides) starts its ranks. */
        exe = mpirun_env && *mpirun_env ? mpirun_env : "mpirun";
        snprintf(np_s, sizeof np_s, "%u", ranks);
        argv[argc++] = (char *)exe;
        if (geteuid() == 0) argv[argc++] = "--allow-run-as-root";
        argv[argc++] = "--oversubscribe"; /* several sites share this machine's cores */
        argv[argc++] = "-np";
        argv[argc++] = np_s;
    }
    if (g_cmd) { /* the user's trainer: told everything through the environment */
        if (!use_mpi) exe = g_cmd[0];
        size_t n_cmd = 0;
        while (g_cmd[n_cmd]) n_cmd++;
        char **full = realloc(argv, (argc + n_cmd + 1) * sizeof *argv);
        if (!full) {
            free(argv);
            return -1;
        }
        argv = full;
        for (size_t i = 0; i < n_cmd; i++) argv[argc++] = g_cmd[i];
        argv[argc] = NULL;
        goto start;
    }
    argv[argc++] = (char *)self;
    argv[argc++] = "run";
    argv[argc++] = "--config";
    argv[argc++] = (char *)config;
    argv[argc++] = "--site";
    argv[argc++] = (char *)site;
    argv[argc++] = "--run-dir";
    argv[argc++] = (char *)run_dir;
    argv[argc++] = "--run-id";
    argv[argc++] = (char *)run_id;
    if (slow > 1.0) {
        argv[argc++] = "--slow";
        argv[argc++] = slow_s;
    }
    if (corrupt >= 0) {
        snprintf(corrupt_s, sizeof corrupt_s, "%lld", (long long)corrupt);
        argv[argc++] = "--corrupt-anchor";
        argv[argc++] = corrupt_s;
    }
    if (kill_at >= 0) { /* the site kills itself at that round: exact, unlike polling it */
        snprintf(kill_s, sizeof kill_s, "%lld", (long long)kill_at);
        argv[argc++] = "--kill-at";
        argv[argc++] = kill_s;
    }
    if (expect > 0) { /* round 0 starts without the sites that join later */
        snprintf(expect_s, sizeof expect_s, "%u", expect);
        argv[argc++] = "--expect";
        argv[argc++] = expect_s;
    }
    for (size_t i = 0; i < n_sets; i++) {
        argv[argc++] = "--set";
        argv[argc++] = sets[i];
    }
    for (size_t i = 0; i < g_n_tls_sets; i++) {
        const char *kv = site_set_for(g_tls_sets[i], site);
        if (!kv) continue;
        argv[argc++] = "--set";
        argv[argc++] = (char *)kv;
    }
    for (size_t i = 0; i < g_n_site_sets; i++) {
        const char *kv = site_set_for(g_site_sets[i], site);
        if (!kv) continue;
        argv[argc++] = "--set";
        argv[argc++] = (char *)kv;
    }
    if (append_log == 2) argv[argc++] = "--resume";
    argv[argc] = NULL;
start:
    fflush(NULL); /* or the child's freopen would write our buffered output a second time */
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0); /* Ctrl-C reaches the launcher, which stops the sites in order */
        /* A launcher killed outright (SIGKILL) takes its sites with it: each gets SIGTERM and
         * leaves as on Ctrl-C, instead of training on alone. */
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent) _exit(125);
        FILE *f = freopen(log, append_log ? "a" : "w", stdout);
        if (!f) _exit(126);
        dup2(1, 2);
        char win[1024] = "";
        for (uint32_t i = 0; i < g_n_site_names; i++)
            if (strcmp(g_site_names[i], site) == 0)
                gt_chaos_slow_windows(g_chaos, g_n_chaos, i, win, sizeof win);
        if ((win[0] ? setenv("GT_SLOW_WINDOWS", win, 1) : unsetenv("GT_SLOW_WINDOWS")) != 0)
            _exit(126);
        if (use_mpi && g_mpi_tmp[0]) {
            char mpi_dir[sizeof g_mpi_tmp + 64];
            snprintf(mpi_dir, sizeof mpi_dir, "%s/%s", g_mpi_tmp, site);
            if ((mkdir(mpi_dir, 0700) != 0 && errno != EEXIST) ||
                setenv("OMPI_MCA_orte_tmpdir_base", mpi_dir, 1) != 0)
                _exit(126);
            printf("geotrain launch: site %s's Open MPI session folder: %s\n", site, mpi_dir);
            fflush(stdout);
        }
        if (g_cmd && (cmd_env(self, config, site, run_dir, run_id, slow, corrupt, kill_at, expect,
                              sets, n_sets, ranks) != 0 ||
                      (append_log == 2 ? setenv("GT_RESUME", "1", 1) : unsetenv("GT_RESUME")) != 0))
            _exit(126);
        if (torch_ranks) gt_launch_ranks(argv, ranks, site); /* does not return */
        if (g_cmd && ranks <= 1 && gt_launch_rank_env(1, site) != 0) _exit(126);
        execvp(exe, argv);
        fprintf(stderr, "cannot execute %s: %s\n", exe, strerror(errno));
        _exit(127);
    }
    free(argv);
    return pid;
}

/* The parent of process pid (from /proc/PID/stat), or -1. */
static pid_t parent_of(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')'); /* after the command name, which may hold spaces */
    int ppid = -1;
    char state;
    if (!rp || sscanf(rp + 1, " %c %d", &state, &ppid) != 2) return -1;
    return (pid_t)ppid;
}

/* Sends sig to a site: the process launch started for it and every descendant. A site of
 * several ranks is mpirun (or launch's torch supervisor) and its ranks, and Open MPI puts each
 * rank in a process group of its own, so neither kill(pid) nor a group signal reaches them all:
 * a chaos kill of mpirun alone left its ranks running, holding the site's lock and ports, when
 * the site was started again. */
static void signal_site(pid_t pid, int sig)
{
    enum { MAX_TREE = 256 };
    pid_t tree[MAX_TREE];
    size_t n = 0;
    tree[n++] = pid;
    for (size_t i = 0; i < n && n < MAX_TREE; i++) { /* breadth first over /proc */
        DIR *dir = opendir("/proc");
        struct dirent *e;
        while (dir && (e = readdir(dir)) && n < MAX_TREE) {
            char *end = NULL;
            long p = strtol(e->d_name, &end, 10);
            if (*end || p <= 0 || parent_of((pid_t)p) != tree[i]) continue;
            tree[n++] = (pid_t)p;
        }
        if (dir) closedir(dir);
    }
    for (size_t i = 0; i < n; i++) kill(tree[i], sig);
}

static json_t *read_json(const char *path)
{
    return json_load_file(path, 0, NULL);
}

static double jnum(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : 0.0;
}

static void show_lines(site_proc_t *sp, uint32_t n, int tty, int redraw)
{
    if (tty && redraw) printf("\033[%uA", n + 1);
    printf("%-12s %6s %8s %8s %9s %8s %8s  %s%s\n", "site", "round", "step", "loss", "tok/s",
           "WAN MB/s", "wait s", "state", tty ? "\033[K" : "");
    for (uint32_t i = 0; i < n; i++) {
        json_t *s = sp[i].st;
        const char *state =
            sp[i].killed ? "killed" : json_string_value(json_object_get(s, "state"));
        if (sp[i].exited && !sp[i].killed && (!state || strcmp(state, "done") != 0))
            state = "exited";
        if (!sp[i].started) state = "to join";
        if (sp[i].killed && sp[i].restart_round >= 0) state = "killed, to restart";
        printf("%-12s %6.0f %8.0f %8.4f %9.0f %8.2f %8.1f  %s%s\n", sp[i].name, jnum(s, "round"),
               jnum(s, "step"), jnum(s, "loss"), jnum(s, "tokens_per_s"), jnum(s, "wan_mbps"),
               jnum(s, "wait_s"), state ? state : "starting", tty ? "\033[K" : "");
    }
    fflush(stdout);
}

/* sync-dp's bytes for the same run: every step, a bf16 ring all-reduce of the gradients
 * across the S sites, where each site sends 2 (S - 1) / S of the vector. */
static double sync_dp_bytes(double params, double steps, uint32_t S)
{
    return S > 1 ? steps * S * 2.0 * (S - 1) / S * params * 2.0 : 0.0;
}

/* Closes the contribution ledger where a FIN did not come (docs/diloco.md, "The end of a run"):
 * for each site A and peer B whose FIN none of A's engines had, the frames A sent B that B's
 * finished last life did not take are unreceived too (both counters run since the later of the
 * two sites' joins). Pairs that cannot be closed so (B did not finish, or only some of A's
 * engines had B's FIN) are listed in *unclosed as "A->B". Returns the frames added. */
static json_int_t close_ledgers(json_t *sites, json_t *unclosed)
{
    json_int_t added = 0;
    const char *a, *b;
    json_t *sa, *e;
    json_object_foreach(sites, a, sa)
    {
        json_object_foreach(json_object_get(sa, "ledger"), b, e)
        {
            double sent = jnum(e, "sent"), fins = jnum(e, "fins"), engines = jnum(e, "engines");
            if (!(fins < engines) || sent <= 0) continue; /* closed by the FINs, or nothing */
            json_t *sb = json_object_get(sites, b);
            json_t *back = json_object_get(json_object_get(sb, "ledger"), a);
            const char *status = json_string_value(json_object_get(sb, "status"));
            if (fins > 0 || !back || !status || strcmp(status, "finished") != 0) {
                json_array_append_new(unclosed, json_sprintf("%s->%s", a, b));
                continue;
            }
            double took = jnum(back, "took");
            if (sent > took) added += (json_int_t)(sent - took);
        }
    }
    return added;
}

/* The record of the life of site p's process that ended at `now` (unix seconds): when it
 * started and ended, and — from its last status.json, if that file is this life's — when it
 * trained and how its training time went (compute at its own speed, chaos slowdown, waits).
 * A process killed (-9) leaves the status of up to half a second before; a process killed
 * before its first status leaves none: its whole life counts as starting up. */
static void life_end(site_proc_t *p, const char *run_dir, double now)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s/status.json", run_dir, p->name);
    json_t *st = read_json(path);
    double ps = jnum(st, "process_start_unix");
    int mine = ps > p->last_pstart + 1e-6 && ps <= now;
    json_t *rec = json_pack("{s:f,s:f,s:f}", "start_unix", mine ? ps : p->life_start, "end_unix",
                            now, "stopped_s", p->life_stopped_s);
    if (rec && mine) {
        static const char *const keys[] = {"train_start_unix", "train_end_unix", "life_compute_s",
                                           "life_tokens",      "chaos_slow_s",   "life_wait_s",
                                           "time_unix"};
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            if (json_is_number(json_object_get(st, keys[k])))
                json_object_set_new(rec, keys[k], json_real(jnum(st, keys[k])));
        p->last_pstart = ps;
    }
    if (rec) {
        /* ended: exited, or replaced by a new process in the same pass (a removed site's
         * restart), whose predecessor's status is still the one launch reaped */
        int ended = p->exited || p->pid != p->life_pid;
        char how[32] = "running";
        if (ended && WIFEXITED(p->status))
            snprintf(how, sizeof how, "exit %d", WEXITSTATUS(p->status));
        else if (ended && WIFSIGNALED(p->status))
            snprintf(how, sizeof how, "signal %d", WTERMSIG(p->status));
        json_object_set_new(rec, "end", json_string(how));
        if (!p->lives) p->lives = json_array();
        if (p->lives) json_array_append(p->lives, rec);
        json_decref(rec);
    }
    json_decref(st);
    p->life_pid = 0;
    p->life_stopped_s = 0;
    p->stop_since = 0;
}

/* Follows every site's process lives, once per pass of launch's loop (so to a quarter of a
 * second): a new pid begins a life, an exit (or a new pid) ends one, and SIGSTOPs add up.
 * final: the run is over, every life still followed ends now. */
static void track_lives(site_proc_t *sp, uint32_t n, const char *run_dir, int final)
{
    double now = gt_unix_time();
    for (uint32_t i = 0; i < n; i++) {
        site_proc_t *p = &sp[i];
        int cur = p->started && !p->exited && p->pid > 0;
        if (p->life_pid && p->chaos_stopped && !p->stop_since) p->stop_since = now;
        if (p->stop_since && (!p->chaos_stopped || !cur || p->pid != p->life_pid || final)) {
            p->life_stopped_s += now - p->stop_since;
            p->stop_since = 0;
        }
        if (p->life_pid && (!cur || p->pid != p->life_pid || final)) life_end(p, run_dir, now);
        if (cur && !final && p->pid != p->life_pid) {
            p->life_pid = p->pid;
            p->life_start = now;
        }
    }
}

static int write_run_summary(const char *run_dir, const gt_topo_config_t *cfg, site_proc_t *sp,
                             double wall_s, double t_first_unix, uint32_t whole_restarts,
                             uint32_t chaos_skipped)
{
    json_t *sites = json_object(), *out = NULL;
    double sent = 0, recv = 0, params = 0, max_steps = 0, eval_sum = 0;
    int eval_n = 0;
    json_int_t on_time = 0, late = 0, dropped = 0, rejected = 0, checks = 0, mism = 0, open = 0,
               unreceived = 0;
    /* The sites' WAN security counters (wan/channel/ctl.c, wan/mesh/mesh.c), summed. */
    static const char *const wan_keys[] = {"frames_rejected",      "handshakes_refused",
                                           "handshakes_timed_out", "connections_capped",
                                           "reconnects",           "resent",
                                           "duplicates",           "peers_cut"};
    json_int_t wan_sum[sizeof wan_keys / sizeof wan_keys[0]] = {0};
    for (uint32_t i = 0; i < cfg->n_sites; i++) {
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/%s/summary.json", run_dir, sp[i].name);
        json_t *s = read_json(path);
        if (!s) {
            json_object_set_new(
                sites, sp[i].name,
                json_pack("{s:s,s:b}", "status", "no summary (killed?)", "killed", sp[i].killed));
            continue;
        }
        if (sp[i].lives) json_object_set(s, "lives", sp[i].lives);
        json_object_set_new(s, "killed", json_boolean(sp[i].killed || sp[i].restarted));
        json_object_set_new(s, "restarted", json_boolean(sp[i].restarted));
        json_object_set_new(s, "started_late", json_boolean(sp[i].join_round >= 0));
        if (json_is_number(json_object_get(s, "eval_loss"))) {
            eval_sum += jnum(s, "eval_loss");
            eval_n++;
        }
        sent += jnum(s, "wan_bytes_sent");
        recv += jnum(s, "wan_bytes_received");
        if (jnum(s, "params") > params) params = jnum(s, "params");
        if (jnum(s, "steps") > max_steps) max_steps = jnum(s, "steps");
        json_t *c = json_object_get(s, "contributions");
        on_time += (json_int_t)jnum(c, "on_time");
        late += (json_int_t)jnum(c, "late");
        dropped += (json_int_t)jnum(c, "dropped");
        rejected += (json_int_t)jnum(c, "rejected");
        open += (json_int_t)jnum(c, "open_at_end");
        unreceived += (json_int_t)jnum(c, "unreceived");
        checks += (json_int_t)jnum(s, "hash_checks");
        mism += (json_int_t)jnum(s, "hash_mismatches");
        for (size_t k = 0; k < sizeof wan_keys / sizeof wan_keys[0]; k++)
            wan_sum[k] += (json_int_t)jnum(json_object_get(s, "wan"), wan_keys[k]);
        json_object_set_new(sites, sp[i].name, s);
    }
    json_t *unclosed = json_array();
    json_int_t closed = unclosed ? close_ledgers(sites, unclosed) : 0;
    unreceived += closed;
    double dp = sync_dp_bytes(params, max_steps, cfg->n_sites);
    out = json_pack("{s:o,s:o,s:f,s:f,s:f,s:o,s:{s:I,s:I,s:I,s:I,s:I,s:I},s:I,s:I,s:f,s:i,s:s,s:s}",
                    "eval_loss", eval_n ? json_real(eval_sum / eval_n) : json_null(), "sites",
                    sites, "wan_bytes_sent", sent, "wan_bytes_received", recv, "sync_dp_bytes", dp,
                    "bandwidth_saving", sent > 0 ? json_real(dp / sent) : json_null(),
                    "contributions", "on_time", on_time, "late", late, "dropped", dropped,
                    "rejected", rejected, "open_at_end", open, "unreceived", unreceived,
                    "hash_checks", checks, "hash_mismatches", mism, "wall_s", wall_s, "n_sites",
                    (int)cfg->n_sites, "codec", cfg->codec.name, "mode",
                    cfg->outer.mode == GT_OUTER_SYNC_DP ? "sync-dp" : "diloco");
    for (size_t k = 0; k < sizeof wan_keys / sizeof wan_keys[0] && out; k++)
        json_object_set_new(out, wan_keys[k], json_integer(wan_sum[k]));
    json_t *contrib = out ? json_object_get(out, "contributions") : NULL;
    if (contrib) {
        json_object_set_new(contrib, "unreceived_by_ledger", json_integer(closed));
        json_object_set_new(contrib, "ledger_unclosed",
                            unclosed ? json_incref(unclosed) : json_array());
    }
    const char *names[GT_OUTER_MAX_SITES];
    json_t *lives[GT_OUTER_MAX_SITES];
    for (uint32_t i = 0; i < cfg->n_sites && i < GT_OUTER_MAX_SITES; i++) {
        names[i] = sp[i].name;
        lives[i] = sp[i].lives;
    }
    int sync = cfg->outer.mode == GT_OUTER_SYNC_DP;
    if (out) {
        gt_chaos_goodput(run_dir, names, cfg->n_sites,
                         (uint64_t)cfg->run.rounds * (sync ? cfg->inner.steps : 1), lives,
                         t_first_unix, out);
        double gw = jnum(out, "goodput_wall_s");
        if (g_n_chaos && isfinite(gw) && gw > 0)
            json_object_set_new(out, "goodput_bound",
                                json_real(gt_chaos_bound(g_chaos, g_n_chaos, cfg->n_sites,
                                                         cfg->run.rounds, gw / cfg->run.rounds)));
        json_object_set_new(out, "whole_run_restarts", json_integer(whole_restarts));
        json_object_set_new(out, "chaos_skipped", json_integer(chaos_skipped));
    }
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/summary.json", run_dir);
    int rc = out && json_dump_file(out, path, JSON_INDENT(2)) == 0 ? 0 : -1;
    if (rc == 0) {
        printf("\nsummary: %s\n", path);
        if (eval_n)
            printf("  final anchor's loss on held-out batches: %.4f (mean over %d sites)\n",
                   eval_sum / eval_n, eval_n);
        printf("  WAN bytes sent %.3g, sync-dp would have sent %.3g: saving %.0fx\n", sent, dp,
               sent > 0 ? dp / sent : 0.0);
        printf("  contributions: %lld on time, %lld late, %lld dropped, %lld rejected, %lld "
               "open at the end, %lld unreceived (sent to a site that had finished); hash "
               "checks %lld, mismatches %lld\n",
               (long long)on_time, (long long)late, (long long)dropped, (long long)rejected,
               (long long)open, (long long)unreceived, (long long)checks, (long long)mism);
        if (closed)
            printf("  (%lld of the unreceived counted from the sites' ledgers: their FIN did not "
                   "cross, e.g. a link cut that outlasted the run)\n",
                   (long long)closed);
        char *open_pairs = json_array_size(unclosed) ? json_dumps(unclosed, 0) : NULL;
        if (open_pairs)
            printf("  ledgers not closed (a site did not finish, or FINs came on some lanes "
                   "only): %s\n",
                   open_pairs);
        free(open_pairs);
        printf("  WAN: %lld frames rejected, %lld handshakes refused, %lld timed out; %lld "
               "reconnects, %lld messages re-sent\n",
               (long long)wan_sum[0], (long long)wan_sum[1], (long long)wan_sum[2],
               (long long)wan_sum[4], (long long)wan_sum[5]);
        json_t *g = json_object_get(out, "goodput");
        if (json_is_number(g))
            printf("  goodput %.4f: %.4g tokens reached the final anchor of %.4g the sites could "
                   "have trained in %.1f s\n",
                   json_number_value(g), jnum(out, "tokens_in_anchor"),
                   jnum(out, "tokens_possible"), jnum(out, "goodput_wall_s"));
        json_t *bd = json_object_get(out, "goodput_breakdown");
        if (json_is_object(bd)) {
            printf("  where the rest went (share of what the sites could have trained):");
            const char *k;
            json_t *v;
            json_object_foreach(bd, k, v)
            {
                if (strcmp(k, "in_anchor") != 0) printf(" %s %.3f", k, json_number_value(v));
            }
            printf("\n");
        }
        if (json_is_number(json_object_get(out, "goodput_bound")))
            printf("  goodput_bound %.4f: the most the chaos schedule's faults leave, whatever "
                   "the protocol does\n",
                   jnum(out, "goodput_bound"));
    }
    json_decref(unclosed);
    json_decref(out);
    return rc;
}

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
    /* the supervision: the live lines; --chaos: the run's furthest round, when training
     * began, and (sync-dp) the whole run's stop and restart from its checkpoints */
    int tty, drawn, sync_chaos, whole_down;
    uint32_t running, whole_restarts, chaos_skipped;
    double progress, t_first_unix, down_rounds, down_s;
    uint64_t whole_restart_ns, t_first_done, last_print;
} launch_t;

/* The options into L. -1 to go on, else the exit status (help: 0, misuse: 2). */
static int parse_options(launch_t *L, int argc, char **argv)
{
    static const struct option opts[] = {{"run-dir", required_argument, NULL, 'd'},
                                         {"kill", required_argument, NULL, 'k'},
                                         {"slow", required_argument, NULL, 'w'},
                                         {"set", required_argument, NULL, 's'},
                                         {"set-site", required_argument, NULL, 'P'},
                                         {"reuse-run-id", no_argument, NULL, 'u'},
                                         {"help", no_argument, NULL, 'h'},
                                         {"corrupt-anchor", required_argument, NULL, 'x'},
                                         {"join", required_argument, NULL, 'j'},
                                         {"restart", required_argument, NULL, 'R'},
                                         {"etcd-members", required_argument, NULL, 'E'},
                                         {"kill-etcd", required_argument, NULL, 'K'},
                                         {"restart-etcd", required_argument, NULL, 'T'},
                                         {"resume", required_argument, NULL, 'U'},
                                         {"chaos", required_argument, NULL, 'C'},
                                         {"mtbf-rounds", required_argument, NULL, 'M'},
                                         {"dry-run", no_argument, NULL, 'N'},
                                         {"chaos-round-s", required_argument, NULL, 'r'},
                                         {"fault-rounds", required_argument, NULL, 'F'},
                                         {"etcd-plain", no_argument, NULL, 'H'},
                                         {NULL, 0, NULL, 0}};
    char *end = NULL;
    int c;
    /* `-- CMD ARGS...`: everything after the first "--" is the user's trainer. */
    g_cmd = NULL;
    g_n_site_sets = 0;
    g_n_tls_sets = 0;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--") == 0) {
            if (i + 1 == argc) {
                fprintf(stderr, "geotrain launch: nothing after --: give the command to run per "
                                "site (-- CMD ARGS...)\n");
                return 2;
            }
            g_cmd = &argv[i + 1];
            argc = i;
            break;
        }
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': L->run_dir_opt = optarg; break;
        case 'U':
            L->run_dir_opt = optarg;
            L->resume = 1;
            break;
        case 'k':
            if (L->n_kills < MAX_EVENTS) L->kills[L->n_kills++] = optarg;
            break;
        case 'w':
            if (L->n_slows < MAX_EVENTS) L->slows[L->n_slows++] = optarg;
            break;
        case 's':
            if (L->n_user < MAX_SETS) L->user_sets[L->n_user++] = optarg;
            break;
        case 'u': /* every site's process reads it (diloco/connect.c) */
            if (setenv("GT_REUSE_RUN_ID", "1", 1) != 0) return 1;
            break;
        case 'P': {
            const char *colon = strchr(optarg, ':');
            if (!colon || colon == optarg || !strchr(colon, '=') || colon[1] == '=' ||
                g_n_site_sets == MAX_SETS) {
                fprintf(stderr, "geotrain launch: --set-site %s: expected SITE:KEY=VALUE\n",
                        optarg);
                return 2;
            }
            g_site_sets[g_n_site_sets++] = optarg;
            break;
        }
        case 'x':
            if (L->n_corrupts < MAX_EVENTS) L->corrupts[L->n_corrupts++] = optarg;
            break;
        case 'j':
            if (L->n_joins < MAX_EVENTS) L->joins[L->n_joins++] = optarg;
            break;
        case 'R':
            if (L->n_restarts < MAX_EVENTS) L->restarts[L->n_restarts++] = optarg;
            break;
        case 'E':
            L->etcd_members = strtol(optarg, &end, 10);
            if (*end || L->etcd_members < 1 || L->etcd_members > GT_ETCD_MAX_MEMBERS) {
                fprintf(stderr, "geotrain launch: --etcd-members %s: expected 1 to %d\n", optarg,
                        GT_ETCD_MAX_MEMBERS);
                return 2;
            }
            break;
        case 'K':
        case 'T': {
            int which = c == 'T';
            long member = strtol(optarg, &end, 10), round = -1;
            if (*end == '@') round = strtol(end + 1, &end, 10);
            if (*end || member < 0 || round < 0 || L->n_etcd_ev[which] == MAX_EVENTS) {
                fprintf(stderr, "geotrain launch: --%s %s: expected MEMBER@ROUND\n",
                        which ? "restart-etcd" : "kill-etcd", optarg);
                return 2;
            }
            L->etcd_ev[which][L->n_etcd_ev[which]][0] = member;
            L->etcd_ev[which][L->n_etcd_ev[which]++][1] = round;
            break;
        }
        case 'C':
            errno = 0;
            L->chaos_seed = strtoull(optarg, &end, 10);
            if (*end || errno || optarg[0] == '-') {
                fprintf(stderr, "geotrain launch: --chaos %s: expected a seed (an integer >= 0)\n",
                        optarg);
                return 2;
            }
            L->chaos = 1;
            break;
        case 'M':
            L->mtbf = strtod(optarg, &end);
            if (*end || !(L->mtbf >= 1.0 && L->mtbf <= 1e6)) {
                fprintf(stderr, "geotrain launch: --mtbf-rounds %s: expected rounds in [1, 1e6]\n",
                        optarg);
                return 2;
            }
            break;
        case 'r':
            L->round_s = strtod(optarg, &end);
            if (*end || !(L->round_s == 0 || (L->round_s >= 0.01 && L->round_s <= 1e5))) {
                fprintf(stderr,
                        "geotrain launch: --chaos-round-s %s: expected seconds in "
                        "[0.01, 1e5], or 0 (no link cuts)\n",
                        optarg);
                return 2;
            }
            break;
        case 'F':
            L->fault_rounds = strtod(optarg, &end);
            if (*end || !(L->fault_rounds >= 0.05 && L->fault_rounds <= 1000)) {
                fprintf(stderr,
                        "geotrain launch: --fault-rounds %s: expected rounds in [0.05, 1000]\n",
                        optarg);
                return 2;
            }
            break;
        case 'N': L->dry_run = 1; break;
        case 'H': L->etcd_plain = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (argc - optind > 1) {
        usage(stderr);
        return 2;
    }
    L->config = optind < argc ? argv[optind] : "sites.yaml";
    L->config_given = optind < argc;
    return -1;
}

/* The config, after the --set list of the run being resumed (its launch.json) when --resume
 * names no config. -1 to go on, else the exit status. */
static int load_config(launch_t *L)
{
    if (L->resume && !L->config_given) {
        /* The config and --set list the run was launched with (launch.json), then ours. */
        char rec[PATH_MAX + 32];
        snprintf(rec, sizeof rec, "%s/launch.json", L->run_dir_opt);
        json_error_t je;
        L->launch_rec = json_load_file(rec, 0, &je);
        json_t *prev = json_object_get(L->launch_rec, "sets");
        if (!json_is_string(json_object_get(L->launch_rec, "config")) || !json_is_array(prev)) {
            fprintf(stderr,
                    "geotrain launch: --resume %s: cannot read %s (%s); give the config "
                    "as well: geotrain launch CONFIG --resume RUN_DIR\n",
                    L->run_dir_opt, rec, L->launch_rec ? "no config or sets in it" : je.text);
            return 2;
        }
        L->config = json_string_value(json_object_get(L->launch_rec, "config"));
        size_t np = json_array_size(prev);
        if (np + L->n_user > MAX_SETS) np = MAX_SETS - L->n_user;
        memmove(L->user_sets + np, L->user_sets, L->n_user * sizeof *L->user_sets);
        for (size_t i = 0; i < np; i++) {
            const char *v = json_string_value(json_array_get(prev, i));
            L->user_sets[i] = v ? v : "";
        }
        L->n_user += np;
        json_t *per = json_object_get(L->launch_rec, "site_sets"); /* --set-site, before ours */
        size_t ns = json_array_size(per);
        if (ns + g_n_site_sets > MAX_SETS) ns = MAX_SETS - g_n_site_sets;
        memmove(g_site_sets + ns, g_site_sets, g_n_site_sets * sizeof *g_site_sets);
        for (size_t i = 0; i < ns; i++) {
            const char *v = json_string_value(json_array_get(per, i));
            g_site_sets[i] = v ? v : "";
        }
        g_n_site_sets += ns;
    }
    gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;
    lp.sets = L->user_sets;
    lp.n_sets = L->n_user;
    if (gt_topo_load(L->config, &lp, &L->cfg) != GT_OK) {
        fprintf(stderr, "geotrain launch: %s is not valid\n", L->config);
        return 2;
    }
    return -1;
}

/* Each site's scripted events (--kill, --slow, --join, ...) and the chaos schedule, checked
 * against the config; --dry-run prints the schedule and stops there. -1 to go on, else the
 * exit status. */
static int plan_events(launch_t *L)
{
    L->sp = calloc(L->cfg->n_sites, sizeof *L->sp);
    if (!L->sp) return 1;
    for (uint32_t i = 0; i < L->cfg->n_sites; i++) {
        snprintf(L->sp[i].name, sizeof L->sp[i].name, "%s", L->cfg->sites[i].name);
        L->sp[i].kill_round = -1;
        L->sp[i].corrupt_round = -1;
        L->sp[i].join_round = -1;
        L->sp[i].restart_round = -1;
        L->sp[i].slow = 1.0;
    }
    /* --kill SITE@ROUND, --corrupt-anchor SITE@ROUND, --slow SITE=FACTOR, --join SITE@ROUND,
     * --restart SITE@ROUND */
    const char **lists[] = {L->kills, L->corrupts, L->slows, L->joins, L->restarts};
    const size_t counts[] = {L->n_kills, L->n_corrupts, L->n_slows, L->n_joins, L->n_restarts};
    static const char *const flag[] = {"--kill", "--corrupt-anchor", "--slow", "--join",
                                       "--restart"};
    for (int kind = 0; kind < 5; kind++) {
        for (size_t e = 0; e < counts[kind]; e++) {
            const char *arg = lists[kind][e];
            const char *sep = strchr(arg, kind == 2 ? '=' : '@');
            char name[GT_TOPO_NAME_MAX];
            uint32_t i;
            snprintf(name, sizeof name, "%.*s", sep ? (int)(sep - arg) : 0, arg);
            double v = sep ? strtod(sep + 1, NULL) : -1;
            int ok = sep && gt_topo_site_index(L->cfg, name, &i) == GT_OK &&
                     (kind == 2 ? (v >= 1.0 && v <= 1000) : (sep[1] >= '0' && sep[1] <= '9'));
            if (!ok) {
                fprintf(stderr, "geotrain launch: %s %s: expected %s with a site of %s%s\n",
                        flag[kind], arg, kind == 2 ? "SITE=FACTOR" : "SITE@ROUND", L->config,
                        kind == 2 ? " and a factor in [1, 1000]" : "");
                return 2;
            }
            int64_t round = kind == 2 ? 0 : strtoll(sep + 1, NULL, 10);
            if (kind == 0)
                L->sp[i].kill_round = round;
            else if (kind == 1)
                L->sp[i].corrupt_round = round;
            else if (kind == 2)
                L->sp[i].slow = v;
            else if (kind == 3)
                L->sp[i].join_round = round;
            else
                L->sp[i].restart_round = round;
        }
    }
    for (size_t e = 0; e < g_n_site_sets; e++) {
        char name[GT_TOPO_NAME_MAX];
        uint32_t i;
        snprintf(name, sizeof name, "%.*s", (int)strcspn(g_site_sets[e], ":"), g_site_sets[e]);
        if (gt_topo_site_index(L->cfg, name, &i) != GT_OK) {
            fprintf(stderr, "geotrain launch: --set-site %s: %s has no site '%s'\n", g_site_sets[e],
                    L->config, name);
            return 2;
        }
    }
    L->n_late = 0;
    for (uint32_t i = 0; i < L->cfg->n_sites; i++) {
        const char *why = NULL;
        if (L->sp[i].join_round >= 0 || L->sp[i].restart_round >= 0) {
            int64_t r = L->sp[i].join_round >= 0 ? L->sp[i].join_round : L->sp[i].restart_round;
            if (r < 1 || r >= (int64_t)L->cfg->run.rounds) why = "ROUND must be in [1, run.rounds)";
        }
        if (L->sp[i].join_round >= 0 && (L->sp[i].restart_round >= 0 || L->sp[i].kill_round >= 0))
            why = "a site that joins late cannot also be killed or restarted";
        if (L->sp[i].restart_round >= 0 &&
            (L->sp[i].kill_round < 0 || L->sp[i].restart_round < L->sp[i].kill_round))
            why = "--restart needs a --kill of the same site at the same or an earlier round";
        if (why) {
            fprintf(stderr, "geotrain launch: site %s: %s\n", L->sp[i].name, why);
            return 2;
        }
        L->n_late += L->sp[i].join_round >= 0;
    }
    if (L->n_late >= L->cfg->n_sites) {
        fprintf(stderr, "geotrain launch: at least one site must start the run (not --join)\n");
        return 2;
    }
    if (L->cfg->n_sites < 2) {
        fprintf(stderr, "geotrain launch: %s has one site; train it with `geotrain run`\n",
                L->config);
        return 2;
    }
    for (uint32_t i = 0; i < L->cfg->n_sites && i < GT_OUTER_MAX_SITES; i++)
        L->names[i] = L->sp[i].name;
    g_site_names = L->names;
    g_n_site_names = L->cfg->n_sites;
    g_n_chaos = 0;
    L->chp = (gt_chaos_params_t){L->chaos_seed,
                                 L->mtbf,
                                 L->cfg->n_sites,
                                 L->cfg->run.rounds,
                                 L->cfg->membership.n_endpoints ? 0u : (uint32_t)L->etcd_members,
                                 (double)L->cfg->membership.lease_ttl_s,
                                 L->cfg->wan.emulation.enabled ? L->round_s : 0.0,
                                 L->cfg->wan.peer_timeout_ms * 1e-3,
                                 L->fault_rounds};
    if (L->chaos) {
        if (L->resume || L->n_kills || L->n_joins || L->n_restarts) {
            fprintf(stderr, "geotrain launch: --chaos draws its own faults: it does not go with "
                            "--resume, --kill, --join or --restart\n");
            return 2;
        }
        g_n_chaos = gt_chaos_draw(&L->chp, g_chaos, GT_CHAOS_MAX_EVENTS);
    }
    if (L->dry_run) { /* the schedule only: nothing is started or written */
        if (L->chaos) {
            json_t *cj = gt_chaos_json(&L->chp, g_chaos, g_n_chaos, L->names);
            char *text = cj ? json_dumps(cj, JSON_INDENT(2)) : NULL;
            printf("%s\n", text ? text : "{}");
            free(text);
            json_decref(cj);
        } else {
            printf("geotrain launch: %u sites of %s; nothing to show without --chaos\n",
                   L->cfg->n_sites, L->config);
        }
        return 0;
    }
    return -1;
}

/* The run directory (locked), the local etcd, the keys, the --set list every site gets, and
 * the header lines. -1 to go on, else the exit status. */
static int prepare_run(launch_t *L)
{
    char sub[PATH_MAX + 32], site_cfg[PATH_MAX + 32];
    /* The run directory. */
    if (L->run_dir_opt) {
        snprintf(L->run_dir, sizeof L->run_dir, "%s", L->run_dir_opt);
    } else {
        char stamp[32];
        time_t t = time(NULL);
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime(&t));
        snprintf(L->run_dir, sizeof L->run_dir, "%s/%s-%s", L->cfg->run.run_dir, L->cfg->run.name,
                 stamp);
    }
    snprintf(sub, sizeof sub, "%s/logs", L->run_dir);
    if (gt_mkdirs(sub) != GT_OK) return 1;
    if (lock_run_dir(L->run_dir) != 0) {
        return 2;
    }
    ssize_t sl = readlink("/proc/self/exe", L->self, sizeof L->self - 1);
    if (sl <= 0) return 1;
    L->self[sl] = '\0';

    signal(SIGINT, on_interrupt);
    signal(SIGTERM, on_interrupt);
    for (int which = 0; which < 2; which++)
        for (size_t e = 0; e < L->n_etcd_ev[which]; e++)
            if (L->etcd_ev[which][e][0] >= L->etcd_members || L->cfg->membership.n_endpoints) {
                fprintf(stderr, "geotrain launch: --%s %ld: launch's etcd has members 0..%ld%s\n",
                        which ? "restart-etcd" : "kill-etcd", L->etcd_ev[which][e][0],
                        L->etcd_members - 1,
                        L->cfg->membership.n_endpoints ? " (and none runs: the config names its "
                                                         "own membership.endpoints)"
                                                       : "");
                return 2;
            }
    if (record_launch(L->run_dir, L->config, L->user_sets, L->n_user) != 0) return 1;
    if (L->cfg->membership.n_endpoints == 0) {
        /* A Raft cluster (3 members by default): membership survives the loss of one. Client
         * and peer TLS with certificates of a CA made for this run, unless --etcd-plain: any
         * process on the host could otherwise read and rewrite the run's membership. */
        snprintf(sub, sizeof sub, "%s/etcd", L->run_dir);
        snprintf(L->tls_path, sizeof L->tls_path, "%s/etcd/tls", L->run_dir);
        if (!L->etcd_plain) L->tls_dir = L->tls_path;
        /* A resumed run starts from its checkpoints with a fresh control plane: the old
         * members' leases and view belong to processes that are gone. */
        if (L->resume) gt_rmtree(sub);
        if (gt_etcd_cluster_start_tls(sub, (size_t)L->etcd_members, 30000, L->tls_dir, &L->etcd) !=
            GT_OK)
            return 1;
        L->endpoint = L->etcd.endpoints;
    }
    if (L->resume) { /* new key pairs for the restarted sites (every one of them restarts) */
        snprintf(sub, sizeof sub, "%s/keys", L->run_dir);
        gt_rmtree(sub);
    }
    if (prepare_config(L->config, L->cfg, L->run_dir, L->endpoint, L->tls_dir, site_cfg,
                       sizeof site_cfg) != 0)
        return 1;
    if (build_sets(L->cfg, L->run_dir, L->endpoint, L->tls_dir, L->user_sets, L->n_user, &L->sets,
                   &L->n_sets) != 0 ||
        add_cut_sets(L->cfg, &L->sets, &L->n_sets) != 0)
        return 1;
    if (g_cmd) {
        /* `geotrain run` writes RUN_DIR/config.yaml; for the user's CMD, launch does: the
         * config as every site resolves it (with the etcd endpoints and the keys). */
        gt_topo_load_params_t rp = GT_TOPO_LOAD_PARAMS_INIT;
        rp.sets = (const char *const *)L->sets;
        rp.n_sets = L->n_sets;
        gt_topo_config_t *resolved = NULL;
        snprintf(sub, sizeof sub, "%s/config.yaml", L->run_dir);
        FILE *f = NULL;
        if (gt_topo_load(L->config, &rp, &resolved) != GT_OK || !(f = fopen(sub, "w")) ||
            gt_topo_print(resolved, f) != GT_OK)
            fprintf(stderr, "geotrain launch: cannot write %s\n", sub);
        if (f) fclose(f);
        gt_topo_destroy(resolved);
    }
    const char *base = strrchr(L->run_dir, '/');
    snprintf(L->run_id, sizeof L->run_id, "%s", base ? base + 1 : L->run_dir);

    /* The emulated WAN's clock (links[].cuts count from it): the launch's start, for every
     * site process, so that a site started again later (a restart, a joiner) sees the same
     * cut windows as the others instead of windows counted from its own start. */
    char emu_start[32];
    L->emu_start_ns = gt_time_ns();
    snprintf(emu_start, sizeof emu_start, "%llu", (unsigned long long)L->emu_start_ns);
    if (setenv("GT_EMU_START_NS", emu_start, 1) != 0) return 1;
    printf("geotrain launch: %u sites of %s, run directory %s\n", L->cfg->n_sites, L->config,
           L->run_dir);
    printf("  WAN: %s, %s, emulation %s; codec %s; H = %u, overlap %u; %u rounds\n",
           L->cfg->wan.transport == GT_TRANSPORT_UCX ? "ucx" : "libfabric",
           L->cfg->security.mode == GT_SECURITY_NONE ? "NOT encrypted" : "encrypted",
           L->cfg->wan.emulation.enabled ? "on" : "off", L->cfg->codec.name, L->cfg->inner.steps,
           L->cfg->outer.overlap_steps, L->cfg->run.rounds);
    if (L->chaos) {
        printf("  chaos: seed %llu, one fault per site per %g rounds (written to "
               "%s/chaos.json)\n",
               L->chaos_seed, L->mtbf, L->run_dir);
        gt_chaos_print(stdout, g_chaos, g_n_chaos, L->names);
        json_t *cj = gt_chaos_json(&L->chp, g_chaos, g_n_chaos, L->names);
        snprintf(sub, sizeof sub, "%s/chaos.json", L->run_dir);
        if (!cj || json_dump_file(cj, sub, JSON_INDENT(2)) != 0)
            fprintf(stderr, "geotrain launch: cannot write %s\n", sub);
        json_decref(cj);
    }
    if (g_cmd) {
        printf("  trainer:");
        for (char **a = g_cmd; *a; a++) printf("%s%s", *a, a[1] ? " " : "\n");
    }
    return -1;
}

/* Every site that starts the run (not --join). 0, or -1 when one cannot be started. */
static int start_sites(launch_t *L)
{
    L->expect = L->n_late ? L->cfg->n_sites - L->n_late : 0;
    for (uint32_t i = 0; i < L->cfg->n_sites; i++) {
        if (L->sp[i].join_round >= 0) continue; /* started later, in the loop below */
        L->sp[i].pid =
            spawn_site(L->self, L->config, L->sp[i].name, L->run_dir, L->run_id, L->sp[i].slow,
                       L->sp[i].corrupt_round, L->sp[i].kill_round, L->expect, L->resume ? 2 : 0,
                       L->sets, L->n_sets, L->cfg->sites[i].ranks);
        if (L->sp[i].pid < 0) return -1;
        L->sp[i].started = 1;
    }
    return 0;
}

/* Reaps the site processes that ended (a removed site is started again as a joiner; under
 * sync-dp chaos a failure stops the whole run for its restart) and reads every status.json;
 * counts the running ones in L->running. 0, or -1 when a site cannot be started again. */
static int reap_sites(launch_t *L)
{
    char sub[PATH_MAX + 32];
    L->running = 0;
    for (uint32_t i = 0; i < L->cfg->n_sites; i++) {
        if (L->sp[i].started && !L->sp[i].exited) {
            int status;
            pid_t r = waitpid(L->sp[i].pid, &status, WNOHANG);
            if (r == L->sp[i].pid) {
                L->sp[i].exited = 1;
                L->sp[i].status = status;
                /* A site restarted by --chaos or after exit 3 (a zombie, a partition's
                 * minority) that fails after the run ended found nobody to rejoin (its lost
                 * tokens are in goodput): reported, not a failure of the run */
                if (!L->sync_chaos && (L->chaos || L->sp[i].rejoins) && L->sp[i].restarted &&
                    L->t_first_done && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
                    L->sp[i].ended_joining = 1;
                    fprintf(L->tty ? stdout : stderr,
                            "-- %s (restarted) ended without rejoining: the run was over\n",
                            L->sp[i].name);
                    L->drawn = 0;
                }
                /* Killed: SIGKILL itself, or (a multi-rank site) mpirun reporting that its
                 * rank died of it. */
                int sigkill = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
                if (L->cfg->sites[i].ranks > 1 && WIFEXITED(status) && WEXITSTATUS(status) != 0)
                    sigkill = 1;
                if (L->sp[i].chaos_down) L->sp[i].killed = 1;
                int failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
                if (L->sync_chaos && failed && !g_interrupted && !L->whole_down &&
                    L->whole_restarts >= 20) {
                    fprintf(stderr,
                            "geotrain launch: sync-dp: %s failed after 20 restarts of "
                            "the whole run; giving up\n",
                            L->sp[i].name);
                    g_interrupted = SIGTERM; /* stops every site below */
                } else if (L->sync_chaos && failed && !g_interrupted && !L->whole_down) {
                    /* sync-dp cannot go on without a site: the whole job stops and restarts
                     * from its last checkpoint, as a synchronous job does */
                    L->whole_down = 1;
                    for (uint32_t k = 0; k < L->cfg->n_sites; k++) {
                        if (k == i || !L->sp[k].started || L->sp[k].exited || L->sp[k].pid <= 0)
                            continue;
                        signal_site(L->sp[k].pid, SIGKILL);
                        waitpid(L->sp[k].pid, &L->sp[k].status, 0);
                        L->sp[k].exited = 1;
                        L->sp[k].chaos_stopped = 0;
                    }
                    /* the run's mean round so far (training time, not start-up) */
                    struct timespec rt;
                    clock_gettime(CLOCK_REALTIME, &rt);
                    double now_unix = (double)rt.tv_sec + rt.tv_nsec * 1e-9;
                    double per_round = L->progress > 0 && L->t_first_unix > 0
                                           ? (now_unix - L->t_first_unix) / L->progress
                                           : 1.0;
                    double down = L->down_s >= 0 ? L->down_s : L->down_rounds * per_round;
                    L->down_s = -1;
                    L->whole_restart_ns = gt_time_ns() + (uint64_t)(down * 1e9);
                    fprintf(L->tty ? stdout : stderr,
                            "-- sync-dp: %s failed; every site stopped, restarting from the "
                            "last checkpoint in %.1f s\n",
                            L->sp[i].name, down);
                    L->drawn = 0;
                }
                if (!L->sync_chaos && WIFEXITED(status) && WEXITSTATUS(status) == 3 &&
                    !g_interrupted && L->sp[i].rejoins < (L->chaos ? 50 : 5) && !L->t_first_done) {
                    /* Removed from the run (a zombie, a partition past its lease): it
                     * comes back as a joiner, fetching the current anchor. */
                    L->sp[i].rejoins++;
                    fprintf(L->tty ? stdout : stderr,
                            "-- %s was removed from the run (exit 3): started again, it "
                            "rejoins\n",
                            L->sp[i].name);
                    L->drawn = 0;
                    L->sp[i].pid = spawn_site(L->self, L->config, L->sp[i].name, L->run_dir,
                                              L->run_id, L->sp[i].slow, -1, -1, 0, 1, L->sets,
                                              L->n_sets, L->cfg->sites[i].ranks);
                    if (L->sp[i].pid < 0) return -1;
                    L->sp[i].exited = 0;
                    L->sp[i].restarted = 1;
                }
                if (L->sp[i].kill_round >= 0 && sigkill) {
                    L->sp[i].killed = 1;
                    fprintf(L->tty ? stdout : stderr, "-- killed %s (SIGKILL) at round %lld\n",
                            L->sp[i].name, (long long)L->sp[i].kill_round);
                    L->drawn = 0;
                }
            }
        }
        L->running += L->sp[i].started && !L->sp[i].exited;
        snprintf(sub, sizeof sub, "%s/%s/status.json", L->run_dir, L->sp[i].name);
        json_t *st = read_json(sub);
        if (st) {
            json_decref(L->sp[i].st);
            L->sp[i].st = st;
        }
    }
    return 0;
}

/* --join and --restart: a site started once another has applied that many rounds. */
static int scripted_starts(launch_t *L)
{
    /* --join / --restart: start a site once another one has applied that many rounds. */
    for (uint32_t i = 0; i < L->cfg->n_sites; i++) {
        int join = !L->sp[i].started, restart = L->sp[i].killed && L->sp[i].restart_round >= 0;
        if (!join && !restart) continue;
        int64_t when = join ? L->sp[i].join_round : L->sp[i].restart_round;
        double most = 0;
        for (uint32_t k = 0; k < L->cfg->n_sites; k++)
            if (k != i && L->sp[k].started && jnum(L->sp[k].st, "rounds_applied") > most)
                most = jnum(L->sp[k].st, "rounds_applied");
        if (most < (double)when) continue;
        L->sp[i].pid =
            spawn_site(L->self, L->config, L->sp[i].name, L->run_dir, L->run_id, L->sp[i].slow, -1,
                       -1, 0, restart, L->sets, L->n_sets, L->cfg->sites[i].ranks);
        if (L->sp[i].pid < 0) return -1;
        fprintf(L->tty ? stdout : stderr, "-- %s %s at round %lld\n",
                restart ? "restarted" : "started", L->sp[i].name, (long long)when);
        L->drawn = 0;
        L->sp[i].started = 1;
        L->sp[i].exited = 0;
        L->sp[i].status = 0;
        if (restart) {
            L->sp[i].killed = 0;
            L->sp[i].kill_round = -1;
            L->sp[i].restart_round = -1;
            L->sp[i].restarted = 1;
        }
        L->running++;
    }
    return 0;
}

/* --kill-etcd and --restart-etcd, once any site has applied that many rounds. */
static int etcd_events(launch_t *L)
{
    /* --kill-etcd / --restart-etcd: once any site has applied that many rounds. */
    double most_applied = 0;
    for (uint32_t k = 0; k < L->cfg->n_sites; k++)
        if (L->sp[k].started && jnum(L->sp[k].st, "rounds_applied") > most_applied)
            most_applied = jnum(L->sp[k].st, "rounds_applied");
    for (int which = 0; which < 2; which++)
        for (size_t e = 0; e < L->n_etcd_ev[which]; e++) {
            long *ev = L->etcd_ev[which][e];
            if (ev[1] < 0 || most_applied < (double)ev[1]) continue;
            if (which == 0) {
                gt_etcd_cluster_kill(&L->etcd, (size_t)ev[0]);
            } else if (gt_etcd_cluster_restart(&L->etcd, (size_t)ev[0]) != GT_OK) {
                return -1;
            }
            fprintf(L->tty ? stdout : stderr, "-- %s etcd member %ld at round %ld\n",
                    which ? "restarted" : "killed", ev[0], ev[1]);
            L->drawn = 0;
            ev[1] = -1; /* done */
        }
    return 0;
}

/* --chaos: the run's progress, and the faults whose round it has reached. */
static int chaos_events(launch_t *L)
{
    /* --chaos: fire the faults whose round the run has reached. */
    for (uint32_t k = 0; k < L->cfg->n_sites; k++) {
        /* in rounds, fractional (the furthest site's step over H): --fault-rounds below 1
         * restarts a site or ends a slowdown inside a round */
        double at = jnum(L->sp[k].st, "step") / (double)L->cfg->inner.steps;
        if (L->sp[k].started && at > L->progress) L->progress = at;
        double ts = jnum(L->sp[k].st, "train_start_unix");
        if (ts > 0 && (L->t_first_unix <= 0 || ts < L->t_first_unix)) L->t_first_unix = ts;
    }
    for (size_t e = 0; e < g_n_chaos && !L->whole_down; e++) {
        gt_chaos_ev_t *ev = &g_chaos[e];
        site_proc_t *v = ev->kind == GT_CHAOS_ETCD ? NULL : &L->sp[ev->target];
        int alive = v && v->started && !v->exited && v->pid > 0;
        uint64_t tnow = gt_time_ns();
        const char *did = NULL;
        if (ev->kind == GT_CHAOS_CUT) { /* the sites' emulators do it: only reported */
            double t_emu = (double)(tnow - L->emu_start_ns) * 1e-9;
            if (ev->state == 2 || t_emu < ev->start_s + (ev->state ? ev->duration_s : 0)) continue;
            fprintf(L->tty ? stdout : stderr,
                    "-- chaos: link cut %s: %s%s%s for %.1f s at round "
                    "%.1f (%.1f s on the emulation clock)\n",
                    ev->state ? "healed" : "begins", L->sp[ev->target].name,
                    ev->peer == GT_CHAOS_ALL_PEERS ? " off from every other site" : "-",
                    ev->peer == GT_CHAOS_ALL_PEERS ? "" : L->sp[ev->peer].name, ev->duration_s,
                    L->progress, t_emu);
            ev->state++;
            L->drawn = 0;
            continue;
        }
        if (ev->state == 0 && L->progress >= ev->at && !L->sync_chaos &&
            (ev->kind == GT_CHAOS_KILL || ev->kind == GT_CHAOS_STOP)) {
            /* A majority keeps training: a fault that would leave fewer is skipped (a
             * site away at run time for longer than the schedule guessed, e.g. a zombie
             * still rejoining). */
            uint32_t up = 0;
            for (uint32_t k = 0; k < L->cfg->n_sites; k++) {
                const char *stt = json_string_value(json_object_get(L->sp[k].st, "state"));
                up += k != ev->target && L->sp[k].started && !L->sp[k].exited &&
                      !L->sp[k].chaos_stopped && stt &&
                      (!strcmp(stt, "training") || !strcmp(stt, "waiting"));
            }
            if (up < L->cfg->n_sites / 2 + 1) {
                ev->state = 3;
                L->chaos_skipped++;
                fprintf(L->tty ? stdout : stderr,
                        "-- chaos: skipped the %s of %s at round %.1f: only %u other sites "
                        "are training\n",
                        ev->kind == GT_CHAOS_KILL ? "kill" : "stop", v->name, L->progress, up);
                L->drawn = 0;
                continue;
            }
        }
        if (ev->state == 0 && L->progress >= ev->at) {
            ev->state = 2;
            if (ev->kind == GT_CHAOS_KILL && alive) {
                if (v->chaos_stopped) signal_site(v->pid, SIGCONT);
                signal_site(v->pid, SIGKILL);
                v->chaos_down = 1;
                v->chaos_stopped = 0;
                ev->state = 1;
                L->down_rounds = ev->until - ev->at;
                did = "kill -9";
            } else if (ev->kind == GT_CHAOS_STOP && alive && L->sync_chaos &&
                       ev->stop_s >= L->cfg->membership.lease_ttl_s) {
                /* sync-dp: a worker away past its lease is a lost worker; the job fails
                 * (rather than going on elastically without it) and restarts after the
                 * outage */
                signal_site(v->pid, SIGKILL);
                v->chaos_down = 1;
                ev->state = 1;
                L->down_s = ev->stop_s;
                did = "SIGSTOP past the lease (sync-dp: lost)";
            } else if (ev->kind == GT_CHAOS_STOP && alive && !v->chaos_stopped) {
                signal_site(v->pid, SIGSTOP);
                v->chaos_stopped = 1;
                ev->state = 1;
                did = "SIGSTOP";
            } else if (ev->kind == GT_CHAOS_SLOW) {
                did = "slowed down";
            } else if (ev->kind == GT_CHAOS_ETCD && L->etcd.n_members > 0) {
                gt_etcd_cluster_kill(&L->etcd, ev->target);
                ev->state = 1;
                did = "kill -9 etcd member";
            }
            ev->begun_ns = tnow;
        } else if (ev->state == 1 && ev->kind == GT_CHAOS_STOP &&
                   tnow - ev->begun_ns >= (uint64_t)(ev->stop_s * 1e9)) {
            ev->state = 2;
            if (alive && v->chaos_stopped) signal_site(v->pid, SIGCONT);
            v->chaos_stopped = 0;
            did = "SIGCONT";
        } else if (ev->state == 1 && ev->kind == GT_CHAOS_ETCD && L->progress >= ev->until) {
            ev->state = 2;
            if (gt_etcd_cluster_restart(&L->etcd, ev->target) != GT_OK) return -1;
            did = "restarted etcd member";
        } else if (ev->state == 1 && ev->kind == GT_CHAOS_KILL && L->progress >= ev->until &&
                   !L->sync_chaos && v->exited && v->chaos_down) {
            ev->state = 2;
            v->pid = spawn_site(L->self, L->config, v->name, L->run_dir, L->run_id, v->slow, -1, -1,
                                0, 1, L->sets, L->n_sets, L->cfg->sites[ev->target].ranks);
            if (v->pid < 0) return -1;
            v->exited = 0;
            v->status = 0;
            v->killed = 0;
            v->chaos_down = 0;
            v->restarted = 1;
            did = "restarted";
        } else if (ev->state == 1 && ev->kind == GT_CHAOS_KILL && L->sync_chaos) {
            ev->state = 2; /* the whole run restarts instead */
        }
        if (did) {
            if (ev->kind == GT_CHAOS_ETCD)
                fprintf(L->tty ? stdout : stderr, "-- chaos: %s %u at round %.1f\n", did,
                        ev->target, L->progress);
            else
                fprintf(L->tty ? stdout : stderr, "-- chaos: %s %s at round %.1f\n", did, v->name,
                        L->progress);
            L->drawn = 0;
        }
    }
    return 0;
}

/* The end of a chaos run: when the first site finished; a site too far behind to reach the
 * final anchor, or a restarted one still joining after a grace period, is stopped. */
static int chaos_endgame(launch_t *L)
{
    for (uint32_t k = 0; k < L->cfg->n_sites && !L->t_first_done; k++)
        if (L->sp[k].exited && WIFEXITED(L->sp[k].status) && !WEXITSTATUS(L->sp[k].status))
            L->t_first_done = gt_time_ns();
    if (L->chaos && !L->sync_chaos) {
        /* A site the chaos restarted that is still joining when the others have finished
         * the run has nobody left to join from: once the first site finished, the restarted
         * ones get 20 s and two leases to finish too; then they are stopped, and that is
         * not counted a failure (their lost tokens are in goodput). */
        uint32_t done = 0, other = 0;
        for (uint32_t k = 0; k < L->cfg->n_sites; k++) {
            int ok = L->sp[k].exited && WIFEXITED(L->sp[k].status) && !WEXITSTATUS(L->sp[k].status);
            done += ok;
            other += L->sp[k].started && !L->sp[k].exited && !L->sp[k].restarted;
        }
        if (done && !L->t_first_done) L->t_first_done = gt_time_ns();
        /* Once a site has finished, the last round's result is final everywhere (a chunk's
         * first result is final): a site still more than a round from the end (it fell
         * behind: slowed, stopped under its lease) trains rounds whose contributions fold
         * into rounds after the last, i.e. nowhere. It is stopped now instead of keeping the
         * run going while the others idle; not a failure (docs/diloco.md#goodput). */
        for (uint32_t k = 0; k < L->cfg->n_sites && done; k++) {
            double step = jnum(L->sp[k].st, "step"), total = jnum(L->sp[k].st, "total_steps");
            if (!L->sp[k].started || L->sp[k].exited || L->sp[k].ended_joining ||
                L->sp[k].ended_behind || L->sp[k].chaos_stopped || L->sp[k].chaos_down ||
                !(total > 0) || step + L->cfg->inner.steps >= total)
                continue;
            L->sp[k].ended_behind = 1;
            kill(L->sp[k].pid, SIGTERM);
            fprintf(L->tty ? stdout : stderr,
                    "-- chaos: %s stopped at step %.0f of %.0f: another site finished the run, "
                    "so nothing more it trains can reach the final anchor\n",
                    L->sp[k].name, step, total);
            L->drawn = 0;
        }
        double grace = 20.0 + 2.0 * L->cfg->membership.lease_ttl_s;
        if (done && !other && (gt_time_ns() - L->t_first_done) * 1e-9 > grace)
            for (uint32_t k = 0; k < L->cfg->n_sites; k++)
                if (L->sp[k].started && !L->sp[k].exited && !L->sp[k].ended_joining) {
                    L->sp[k].ended_joining = 1;
                    kill(L->sp[k].pid, SIGTERM);
                    fprintf(L->tty ? stdout : stderr,
                            "-- chaos: %s (restarted) had not finished %.0f s after the run "
                            "ended: stopped\n",
                            L->sp[k].name, grace);
                    L->drawn = 0;
                }
    }
    return 0;
}

/* sync-dp under chaos: once the whole run's down time is over, every site restarts from its
 * last checkpoint, with a fresh control plane. */
static int sync_dp_restart(launch_t *L)
{
    char sub[PATH_MAX + 32];
    if (L->whole_down && gt_time_ns() >= L->whole_restart_ns && !g_interrupted) {
        /* sync-dp: a fresh control plane (the old leases are the dead processes'), every
         * site resumed from the newest checkpoint all of them hold */
        if (L->cfg->membership.n_endpoints == 0) {
            gt_etcd_cluster_stop(&L->etcd);
            snprintf(sub, sizeof sub, "%s/etcd", L->run_dir);
            gt_rmtree(sub);
            if (gt_etcd_cluster_start_tls(sub, (size_t)L->etcd_members, 30000, L->tls_dir,
                                          &L->etcd) != GT_OK)
                return -1;
            for (size_t k = 0; k < L->n_sets; k++) free(L->sets[k]);
            free(L->sets);
            L->sets = NULL;
            if (build_sets(L->cfg, L->run_dir, L->etcd.endpoints, L->tls_dir, L->user_sets,
                           L->n_user, &L->sets, &L->n_sets) != 0 ||
                add_cut_sets(L->cfg, &L->sets, &L->n_sets) != 0)
                return -1;
        }
        for (uint32_t k = 0; k < L->cfg->n_sites; k++) {
            L->sp[k].pid =
                spawn_site(L->self, L->config, L->sp[k].name, L->run_dir, L->run_id, L->sp[k].slow,
                           -1, -1, 0, 2, L->sets, L->n_sets, L->cfg->sites[k].ranks);
            if (L->sp[k].pid < 0) return -1;
            L->sp[k].started = 1;
            L->sp[k].exited = 0;
            L->sp[k].status = 0;
            L->sp[k].killed = 0;
            L->sp[k].chaos_down = 0;
            L->sp[k].restarted = 1;
        }
        for (size_t e = 0; e < g_n_chaos; e++) /* the fresh cluster has every member */
            if (g_chaos[e].kind == GT_CHAOS_ETCD && g_chaos[e].state == 1) g_chaos[e].state = 2;
        L->whole_down = 0;
        L->whole_restarts++;
        L->down_rounds = 1;
        fprintf(L->tty ? stdout : stderr,
                "-- sync-dp: every site restarted from its last checkpoint (restart %u)\n",
                L->whole_restarts);
        L->drawn = 0;
        L->running = L->cfg->n_sites;
    }
    return 0;
}

/* The launch's supervision: reap, start, fire events, show the live lines, until every site
 * has ended or a signal came. */
static void supervise(launch_t *L)
{
    L->tty = isatty(STDOUT_FILENO);
    L->sync_chaos = L->chaos && L->cfg->outer.mode == GT_OUTER_SYNC_DP;
    for (;;) {
        if (reap_sites(L) != 0 || scripted_starts(L) != 0 || etcd_events(L) != 0 ||
            chaos_events(L) != 0 || chaos_endgame(L) != 0 || sync_dp_restart(L) != 0)
            return;
        uint64_t now = gt_time_ns();
        if (L->tty || now - L->last_print > 5000000000ull || L->running == 0) {
            show_lines(L->sp, L->cfg->n_sites, L->tty, L->drawn);
            L->drawn = L->tty;
            L->last_print = now;
        }
        if (L->running == 0 && !L->whole_down) return;
        if (g_interrupted) {
            printf("\ngeotrain launch: stopping every site (signal %d)\n", (int)g_interrupted);
            return;
        }
        track_lives(L->sp, L->cfg->n_sites, L->run_dir, 0);
        struct timespec ts = {0, 250000000};
        nanosleep(&ts, NULL);
    }
}

/* Orderly stop of whatever still runs: SIGTERM, then SIGKILL after 30 s. */
static void stop_sites(launch_t *L)
{
    for (uint32_t i = 0; i < L->cfg->n_sites; i++)
        if (L->sp[i].pid > 0 && !L->sp[i].exited) {
            if (L->sp[i].chaos_stopped) signal_site(L->sp[i].pid, SIGCONT);
            kill(L->sp[i].pid, SIGTERM);
        }
    for (int w = 0; w < 300; w++) {
        uint32_t running = 0;
        for (uint32_t i = 0; i < L->cfg->n_sites; i++) {
            if (L->sp[i].pid <= 0 || L->sp[i].exited) continue;
            int status;
            if (waitpid(L->sp[i].pid, &status, WNOHANG) == L->sp[i].pid) {
                L->sp[i].exited = 1;
                L->sp[i].status = status;
            } else {
                running++;
            }
        }
        if (!running) break;
        struct timespec ts = {0, 100000000};
        nanosleep(&ts, NULL);
    }
    for (uint32_t i = 0; i < L->cfg->n_sites; i++)
        if (L->sp[i].pid > 0 && !L->sp[i].exited) {
            signal_site(L->sp[i].pid, SIGKILL);
            waitpid(L->sp[i].pid, &L->sp[i].status, 0);
            L->sp[i].exited = 1;
        }
}

/* The run's summary.json and the exit status: 0 when every site finished, 1 when one did
 * not (or was never started again), 130 after a signal. */
static int report(launch_t *L)
{
    track_lives(L->sp, L->cfg->n_sites, L->run_dir, 1);
    write_run_summary(L->run_dir, L->cfg, L->sp, (gt_time_ns() - L->t0) * 1e-9, L->t_first_unix,
                      L->whole_restarts, L->chaos_skipped);
    int rc = g_interrupted ? 130 : 0;
    for (uint32_t i = 0; i < L->cfg->n_sites; i++) {
        /* --chaos killed it and the run ended before its restart, or before it rejoined */
        if (L->sp[i].chaos_down || L->sp[i].ended_joining || L->sp[i].ended_behind) continue;
        if (!L->sp[i].started || (L->sp[i].killed && L->sp[i].restart_round >= 0)) {
            fprintf(stderr,
                    "geotrain launch: site %s was never started again: the others ended first\n",
                    L->sp[i].name);
            if (rc == 0) rc = 1;
            continue;
        }
        int ok = WIFEXITED(L->sp[i].status) && WEXITSTATUS(L->sp[i].status) == 0;
        if (!ok && !L->sp[i].killed) {
            fprintf(stderr, "geotrain launch: site %s did not finish (see %s/logs/%s.log)\n",
                    L->sp[i].name, L->run_dir, L->sp[i].name);
            if (rc == 0) rc = 1;
        }
    }
    return rc;
}

/* What the launch holds: etcd, the Open MPI session folders, the --set list, the sites'
 * status, the config. */
static void cleanup(launch_t *L)
{
    gt_etcd_cluster_stop(&L->etcd);
    if (g_mpi_tmp[0]) gt_rmtree(g_mpi_tmp);
    g_mpi_tmp[0] = '\0';
    for (size_t i = 0; L->sets && i < L->n_sets; i++) free(L->sets[i]);
    free(L->sets);
    for (uint32_t i = 0; L->sp && i < L->cfg->n_sites; i++) {
        json_decref(L->sp[i].st);
        json_decref(L->sp[i].lives);
    }
    free(L->sp);
    gt_topo_destroy(L->cfg);
    json_decref(L->launch_rec);
}

int gt_cmd_launch(int argc, char **argv)
{
    launch_t *L = calloc(1, sizeof *L);
    if (!L) return 1;
    L->etcd_members = 3;
    L->mtbf = 20.0;
    L->round_s = 2.0;
    L->fault_rounds = 2.0;
    L->down_rounds = 1;
    L->down_s = -1;
    L->t0 = gt_time_ns();
    int rc = parse_options(L, argc, argv);
    if (rc < 0) rc = load_config(L);
    if (rc < 0) rc = plan_events(L);
    if (rc < 0) rc = prepare_run(L);
    if (rc < 0) {
        if (start_sites(L) == 0) supervise(L);
        stop_sites(L);
        rc = report(L);
    }
    cleanup(L);
    free(L);
    return rc;
}
