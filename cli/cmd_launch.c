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
 * gt_cmd_launch is a sequence of named steps over one launch_t (launch_internal.h): this file
 * parses the options, loads the config, plans the events and prepares the run directory, etcd
 * and keys; launch_sites.c starts and supervises the site processes and sets the exit status;
 * launch_summary.c records their lives and writes the run's summary.json.
 *
 * `launch CONFIG -- CMD ARGS...` runs a trainer of the user's own instead of `geotrain run`:
 * CMD once per site, told where it stands through the environment (GT_CONFIG and GT_SET: the
 * config and the overrides every site gets, one KEY=VALUE a line; GT_SITE, GT_RUN_DIR,
 * GT_RUN_ID, GT_EXPECT_SITES; the chaos events as the fault-injection variables of
 * diloco/gt_faults.h), which gt_diloco_create (C) or geotrain.DiLoCo (Python) reads. Everything
 * else is the same: the library writes the status.json, anchors.jsonl and summary.json the
 * live lines, the events and the run summary are made of.
 */
#include "launch_internal.h"

#include "cli.h"
#include "certs.h"
#include "etcd_local.h"
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

/* `-- CMD ARGS...`: the user's trainer, run once per site instead of `geotrain run`. */
char **g_cmd;

/* --chaos: the schedule, and each site's slowdown windows (GT_SLOW_WINDOWS in its env). */
gt_chaos_ev_t g_chaos[GT_CHAOS_MAX_EVENTS];
size_t g_n_chaos;
const char *const *g_site_names;
uint32_t g_n_site_names;
/* --set-site SITE:KEY=VALUE: overrides for one site only, after the --set list. */
const char *g_site_sets[MAX_SETS];
size_t g_n_site_sets;
/* launch's own etcd over TLS: each site's client certificate, as SITE:KEY=VALUE entries that go
 * before the user's --set-site ones (build_sets). */
char g_tls_sets[2 * GT_TOPO_MAX_SITES][PATH_MAX + 96];
size_t g_n_tls_sets;

/* The KEY=VALUE of a --set-site entry when it is for `site`, else NULL. */
const char *gt_launch_site_set_for(const char *entry, const char *site)
{
    const char *colon = strchr(entry, ':');
    size_t n = strlen(site);
    return colon && (size_t)(colon - entry) == n && strncmp(entry, site, n) == 0 ? colon + 1 : NULL;
}

volatile sig_atomic_t g_interrupted = 0;
/* Open MPI's session directories for the multi-rank sites: a folder per launch, one per site in
 * it (OMPI_MCA_orte_tmpdir_base; a user's own setting wins). Concurrent mpiruns sharing the
 * default /tmp/ompi.HOST.UID race — one's cleanup removes the folder another is creating, and
 * that one fails at start: "A call to mkdir was unable to create the desired directory ...
 * File exists" (seen with several launches at once in the test suite). */
char g_mpi_tmp[64];
static void on_interrupt(int sig)
{
    g_interrupted = sig;
}

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
            "and GT_RUN_ID, and for the events below GT_EXPECT_SITES, GT_SLOW,\n"
            "GT_SLOW_WINDOWS, GT_CORRUPT_ANCHOR, GT_KILL_AT_ROUND and GT_FAULT_NOTIFY; the\n"
            "library reads them all (and GT_LIBRARY, the libgeotrain.so beside this binary,\n"
            "for python/). A site to --kill stops itself at its round and launch kills it\n"
            "(the library never kills its own process). A site of\n"
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
            "                       run (its furthest site) reaches their round; a cut reaches\n"
            "                       the sites through RUN_DIR/chaos_cuts (GT_CHAOS_CUTS). A\n"
            "                       kill or stop that would leave fewer than a majority\n"
            "                       training, or a kill, stop or cut that (with the cuts due\n"
            "                       while it lasts) would leave fewer than a majority reaching\n"
            "                       a majority, is skipped (chaos_skipped). Once\n"
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
            "  --chaos-round-s S    the seconds a round is expected to take before the run has\n"
            "                       done one (the run-time checks' guess; default 2); 0: no\n"
            "                       link cuts\n"
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
int gt_launch_build_sets(const gt_topo_config_t *cfg, const char *run_dir, const char *endpoint,
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
    if (endpoint && !tls_dir) { /* --etcd-plain: said explicitly, so the sites accept it */
        sets[n] = strdup("membership.plain_http=true");
        if (sets[n]) n++;
    }
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
    if (gt_launch_build_sets(L->cfg, L->run_dir, L->endpoint, L->tls_dir, L->user_sets, L->n_user,
                             &L->sets, &L->n_sets) != 0)
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
    /* --chaos: the link cuts, fired at their rounds (launch_sites.c), reach every site through
     * this file, which a site started later reads whole (the cuts on its clock). */
    int cuts = 0;
    for (size_t e = 0; e < g_n_chaos; e++) cuts |= g_chaos[e].kind == GT_CHAOS_CUT;
    if (cuts) {
        snprintf(L->cuts_path, sizeof L->cuts_path, "%s/chaos_cuts", L->run_dir);
        FILE *cf = fopen(L->cuts_path, "w");
        if (!cf || fclose(cf) != 0 || setenv("GT_CHAOS_CUTS", L->cuts_path, 1) != 0) {
            fprintf(stderr, "geotrain launch: cannot write %s\n", L->cuts_path);
            return 1;
        }
    }
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
        if (gt_launch_start_sites(L) == 0) gt_launch_supervise(L);
        gt_launch_stop_sites(L);
        rc = gt_launch_report(L);
    }
    cleanup(L);
    free(L);
    return rc;
}
