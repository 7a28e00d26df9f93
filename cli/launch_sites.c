/* launch_sites.c — `geotrain launch`'s site processes: each started as `geotrain run` (or the
 * user's CMD, or mpirun for a site of several ranks) with its log, environment and --set list;
 * the supervision loop that reaps them, starts the late and restarted ones, fires the scripted
 * and chaos events and shows the live lines; the orderly stop; and the launch's exit status.
 * Signals reach a site's whole process tree (signal_site).
 */
#include "launch_internal.h"

#include "cli.h"
#include "launch_ranks.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The environment a user's CMD reads (gt_diloco.h), set in the child before exec; whatever
 * launch's own environment held for these names is replaced or removed. */
static int cmd_env(const char *self, const char *config, const char *site, const char *run_dir,
                   const char *run_id, uint32_t expect, char **sets, size_t n_sets, uint32_t ranks)
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
        const char *kv = gt_launch_site_set_for(g_tls_sets[i], site);
        if (!kv) continue;
        strcat(joined, kv);
        strcat(joined, "\n");
    }
    for (size_t i = 0; i < g_n_site_sets; i++) {
        const char *kv = gt_launch_site_set_for(g_site_sets[i], site);
        if (!kv) continue;
        strcat(joined, kv);
        strcat(joined, "\n");
    }
    int rc = setenv("GT_CONFIG", config, 1) | setenv("GT_SET", joined, 1) |
             setenv("GT_SITE", site, 1) | setenv("GT_RUN_DIR", run_dir, 1) |
             setenv("GT_RUN_ID", run_id, 1);
    free(joined);
    snprintf(num, sizeof num, "%u", expect);
    rc |= expect > 0 ? setenv("GT_EXPECT_SITES", num, 1) : unsetenv("GT_EXPECT_SITES");
    snprintf(num, sizeof num, "%u", ranks);
    rc |= setenv("GT_RANKS", num, 1);
    return rc ? -1 : 0;
}

/* The injected faults of a site (diloco/gt_faults.h), set in the child before exec for the
 * built-in trainer and a user's CMD alike; whatever launch's own environment held for these
 * names is replaced or removed. A site to be killed at a round stops there and appends a line
 * to RUN_DIR/logs/kill-notices, which the supervision reads (gt_launch_kill_notices). */
static int fault_env(const char *run_dir, double slow, int64_t corrupt, int64_t kill_at)
{
    char num[32], path[PATH_MAX + 32];
    snprintf(num, sizeof num, "%g", slow);
    int rc = slow > 1.0 ? setenv("GT_SLOW", num, 1) : unsetenv("GT_SLOW");
    snprintf(num, sizeof num, "%lld", (long long)corrupt);
    rc |= corrupt >= 0 ? setenv("GT_CORRUPT_ANCHOR", num, 1) : unsetenv("GT_CORRUPT_ANCHOR");
    snprintf(num, sizeof num, "%lld", (long long)kill_at);
    rc |= kill_at >= 0 ? setenv("GT_KILL_AT_ROUND", num, 1) : unsetenv("GT_KILL_AT_ROUND");
    snprintf(path, sizeof path, "%s/logs/kill-notices", run_dir);
    rc |= kill_at >= 0 ? setenv("GT_FAULT_NOTIFY", path, 1) : unsetenv("GT_FAULT_NOTIFY");
    return rc ? -1 : 0;
}

/* append_log: 0 a new log; 1 appended to (a restart); 2 appended to, and the site resumes the
 * run from its checkpoints (`run --resume`; a user's CMD gets GT_RESUME=1). */
static pid_t spawn_site(const char *self, const char *config, const char *site, const char *run_dir,
                        const char *run_id, double slow, int64_t corrupt, int64_t kill_at,
                        uint32_t expect, int append_log, char **sets, size_t n_sets, uint32_t ranks)
{
    char log[PATH_MAX + 64], np_s[16], expect_s[16];
    snprintf(log, sizeof log, "%s/logs/%s.log", run_dir, site);
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
        const char *kv = gt_launch_site_set_for(g_tls_sets[i], site);
        if (!kv) continue;
        argv[argc++] = "--set";
        argv[argc++] = (char *)kv;
    }
    for (size_t i = 0; i < g_n_site_sets; i++) {
        const char *kv = gt_launch_site_set_for(g_site_sets[i], site);
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
        if (fault_env(run_dir, slow, corrupt, kill_at) != 0) _exit(126);
        if (g_cmd &&
            (cmd_env(self, config, site, run_dir, run_id, expect, sets, n_sets, ranks) != 0 ||
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
/* Whether pid is Open MPI's launcher (its command name). */
static int is_mpirun(pid_t pid)
{
    char path[64], comm[32] = "";
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int ok = fgets(comm, sizeof comm, f) != NULL;
    fclose(f);
    comm[strcspn(comm, "\n")] = 0;
    return ok && (strcmp(comm, "mpirun") == 0 || strcmp(comm, "mpiexec") == 0 ||
                  strcmp(comm, "orterun") == 0 || strcmp(comm, "prterun") == 0);
}

/* A chaos SIGSTOP or SIGCONT of an MPI site goes to its ranks only: mpirun passes a SIGCONT it
 * receives on to the job, and Debian's Open MPI 4.1 died of SIGSEGV in PMIx_Finalize when that
 * forwarding met the abort it starts as the ranks exit non-zero (a removed site: both ranks
 * exit 3 on waking) — 5 of 224 soak runs. mpirun itself holds nothing a frozen site holds. */
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
    size_t first = (sig == SIGSTOP || sig == SIGCONT) && n > 1 && is_mpirun(pid) ? 1 : 0;
    for (size_t i = first; i < n; i++) kill(tree[i], sig);
}

/* Asks a site to stop (SIGTERM). mpirun forwards a SIGTERM to its job, and Debian's Open MPI
 * 4.1 died of SIGSEGV in PMIx_Finalize when one reached it during the abort it runs as a
 * failing site's ranks call MPI_Abort (the soak's seed 139081561: a restarted 2-rank site found
 * the run over as launch stopped it for being behind). So an MPI site's ranks get it directly,
 * mpirun nothing: it sees them exit. Any other site (one process, or launch's torch supervisor,
 * which passes it on) gets it as before. */
static void terminate_site(pid_t pid)
{
    if (!is_mpirun(pid)) {
        kill(pid, SIGTERM);
        return;
    }
    DIR *dir = opendir("/proc");
    struct dirent *e;
    while (dir && (e = readdir(dir))) {
        char *end = NULL;
        long p = strtol(e->d_name, &end, 10);
        if (!*end && p > 0 && parent_of((pid_t)p) == pid) kill((pid_t)p, SIGTERM);
    }
    if (dir) closedir(dir);
}

json_t *gt_launch_read_json(const char *path)
{
    return json_load_file(path, 0, NULL);
}

double gt_launch_jnum(json_t *o, const char *k)
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
        const char *state = sp[i].killed    ? "killed"
                            : sp[i].retired ? "retired"
                                            : json_string_value(json_object_get(s, "state"));
        if (sp[i].exited && !sp[i].killed && (!state || strcmp(state, "done") != 0))
            state = "exited";
        if (!sp[i].started) state = "to join";
        if (sp[i].killed && sp[i].restart_round >= 0) state = "killed, to restart";
        printf("%-12s %6.0f %8.0f %8.4f %9.0f %8.2f %8.1f  %s%s\n", sp[i].name,
               gt_launch_jnum(s, "round"), gt_launch_jnum(s, "step"), gt_launch_jnum(s, "loss"),
               gt_launch_jnum(s, "tokens_per_s"), gt_launch_jnum(s, "wan_mbps"),
               gt_launch_jnum(s, "wait_s"), state ? state : "starting", tty ? "\033[K" : "");
    }
    fflush(stdout);
}

/* Every site that starts the run (not --join). 0, or -1 when one cannot be started. */
int gt_launch_start_sites(launch_t *L)
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
                if (WIFEXITED(status) && WEXITSTATUS(status) == 4) {
                    L->sp[i].retired = 1;
                    fprintf(L->tty ? stdout : stderr,
                            "-- %s was retired from the run (geotrain sites remove, exit 4): it "
                            "is not started again\n",
                            L->sp[i].name);
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
        json_t *st = gt_launch_read_json(sub);
        if (st) {
            json_decref(L->sp[i].st);
            L->sp[i].st = st;
        }
    }
    return 0;
}

/* Whether pid is root or one of its descendants. */
static int in_tree(pid_t root, pid_t pid)
{
    for (int depth = 0; pid > 1 && depth < 64; depth++, pid = parent_of(pid))
        if (pid == root) return 1;
    return 0;
}

/* --kill SITE@ROUND: the site's last rank stops at that round (every thread at once) and
 * appends "kill SITE PID ROUND" to RUN_DIR/logs/kill-notices (diloco/faults.c); that rank is
 * SIGKILLed here — as if it had crashed: mpirun or launch's torch supervisor take its other
 * ranks down as they do for any rank that dies — and reap_sites reports the site killed. Were
 * the site still up 5 s later, its whole process tree is. 1 while a kill is still to come (the
 * supervision then looks more often), else 0. */
static int kill_notices(launch_t *L)
{
    int pending = 0;
    uint64_t now = gt_time_ns();
    for (uint32_t i = 0; i < L->cfg->n_sites; i++) {
        site_proc_t *p = &L->sp[i];
        if (p->kill_round < 0 || !p->started || p->exited || p->killed) continue;
        pending = 1;
        if (p->kill_sent_ns && now - p->kill_sent_ns > 5000000000ull) {
            signal_site(p->pid, SIGKILL);
            p->kill_sent_ns = now;
        }
    }
    if (!pending) return 0;
    char path[PATH_MAX + 32], line[512];
    snprintf(path, sizeof path, "%s/logs/kill-notices", L->run_dir);
    FILE *f = fopen(path, "r");
    if (!f) return 1;
    if (fseek(f, L->notices_read, SEEK_SET) != 0) {
        fclose(f);
        return 1;
    }
    while (fgets(line, sizeof line, f) && strchr(line, '\n')) {
        L->notices_read += (long)strlen(line);
        char name[256];
        long pid;
        unsigned long long round;
        if (sscanf(line, "kill %255s %ld %llu", name, &pid, &round) != 3 || pid <= 1) {
            fprintf(stderr, "geotrain launch: %s: ignoring a malformed line: %s", path, line);
            continue;
        }
        for (uint32_t i = 0; i < L->cfg->n_sites; i++) {
            site_proc_t *p = &L->sp[i];
            if (strcmp(p->name, name) != 0 || p->kill_round < 0 || !p->started || p->exited)
                continue;
            if (!in_tree(p->pid, (pid_t)pid)) { /* a stale notice: never an unrelated process */
                fprintf(stderr, "geotrain launch: %s: process %ld is not site %s's\n", path, pid,
                        name);
                continue;
            }
            kill((pid_t)pid, SIGKILL);
            if (!p->kill_sent_ns) p->kill_sent_ns = gt_time_ns();
        }
    }
    fclose(f);
    return 1;
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
            if (k != i && L->sp[k].started && gt_launch_jnum(L->sp[k].st, "rounds_applied") > most)
                most = gt_launch_jnum(L->sp[k].st, "rounds_applied");
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
        if (L->sp[k].started && gt_launch_jnum(L->sp[k].st, "rounds_applied") > most_applied)
            most_applied = gt_launch_jnum(L->sp[k].st, "rounds_applied");
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

/* --chaos: the sites not training now (bit k: site k). */
static uint64_t chaos_down(const launch_t *L)
{
    uint64_t down = 0;
    for (uint32_t k = 0; k < L->cfg->n_sites && k < 64; k++) {
        const char *stt = json_string_value(json_object_get(L->sp[k].st, "state"));
        int training = L->sp[k].started && !L->sp[k].exited && !L->sp[k].chaos_stopped && stt &&
                       (!strcmp(stt, "training") || !strcmp(stt, "waiting"));
        /* a life started again (a restart, a rejoin) trains before its first round as a joiner
         * (fast join) and may still fail to fetch the anchor: up once it has applied one */
        if ((L->sp[k].restarted || L->sp[k].rejoins) &&
            !(gt_launch_jnum(L->sp[k].st, "rounds_applied") >= 1))
            training = 0;
        if (!training) down |= 1ull << k;
    }
    return down;
}

/* Seconds a round takes at the run's pace so far (--chaos-round-s before a round is done). */
static double chaos_round_s(const launch_t *L)
{
    if (L->t_first_unix > 0 && L->progress >= 1.0)
        return (gt_unix_time() - L->t_first_unix) / L->progress;
    return L->round_s > 0 ? L->round_s : 2.0;
}

/* 1 when the sites in `down`, away over [t0, t1] of the emulation clock, and the schedule's
 * link cuts — those fired where they are, the others where the run's pace puts their round —
 * would leave fewer than a majority of the sites reaching a majority (launch_chaos.c). */
static int chaos_cuts_break(const launch_t *L, uint64_t down, double t0, double t1)
{
    static gt_chaos_ev_t ev[GT_CHAOS_MAX_EVENTS];
    double now = (double)(gt_time_ns() - L->emu_start_ns) * 1e-9, s_round = chaos_round_s(L);
    size_t n = 0;
    for (size_t e = 0; e < g_n_chaos; e++) {
        if (g_chaos[e].kind != GT_CHAOS_CUT || g_chaos[e].state >= 3) continue; /* skipped */
        ev[n] = g_chaos[e];
        if (!ev[n].begun_ns) ev[n].start_s = now + fmax(0.0, ev[n].from - L->progress) * s_round;
        n++;
    }
    return gt_chaos_cuts_break_majority(ev, n, L->cfg->n_sites, down, t0, t1,
                                        (double)L->cfg->membership.lease_ttl_s);
}

/* Fires cut ev at the emulation clock's t_emu: appended to RUN_DIR/chaos_cuts (from a moment
 * later, so that every site's WAN thread, which reads the file every 100 ms, has it before it
 * begins), or skipped when, with the sites away now, it would leave fewer than a majority of
 * the sites reaching a majority. */
static int chaos_fire_cut(launch_t *L, gt_chaos_ev_t *ev, double t_emu)
{
    const double lead_s = 0.3;
    ev->start_s = t_emu + lead_s;
    ev->begun_ns = 1; /* placed: chaos_cuts_break takes it where it is */
    int breaks = chaos_cuts_break(L, chaos_down(L), t_emu, t_emu + lead_s + ev->duration_s);
    ev->begun_ns = 0;
    const char *a = L->sp[ev->target].name;
    const char *b = ev->peer == GT_CHAOS_ALL_PEERS ? "*" : L->sp[ev->peer].name;
    if (breaks) {
        ev->state = 3;
        L->chaos_skipped++;
        fprintf(L->tty ? stdout : stderr,
                "-- chaos: skipped the link cut %s-%s at round %.1f: with the sites away now, "
                "fewer than a majority of the sites would reach a majority\n",
                a, b, L->progress);
        return 0;
    }
    FILE *f = fopen(L->cuts_path, "a");
    int bad = !f || fprintf(f, "cut %s %s %.3f %.3f\n", a, b, ev->start_s, ev->duration_s) < 0;
    if ((f && fclose(f) != 0) || bad) {
        fprintf(stderr, "geotrain launch: cannot append to %s\n", L->cuts_path);
        return -1;
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
        double at = gt_launch_jnum(L->sp[k].st, "step") / (double)L->cfg->inner.steps;
        if (L->sp[k].started && at > L->progress) L->progress = at;
        double ts = gt_launch_jnum(L->sp[k].st, "train_start_unix");
        if (ts > 0 && (L->t_first_unix <= 0 || ts < L->t_first_unix)) L->t_first_unix = ts;
    }
    for (size_t e = 0; e < g_n_chaos && !L->whole_down; e++) {
        gt_chaos_ev_t *ev = &g_chaos[e];
        site_proc_t *v = ev->kind == GT_CHAOS_ETCD ? NULL : &L->sp[ev->target];
        int alive = v && v->started && !v->exited && v->pid > 0;
        uint64_t tnow = gt_time_ns();
        const char *did = NULL;
        if (ev->kind == GT_CHAOS_CUT) {
            double t_emu = (double)(tnow - L->emu_start_ns) * 1e-9;
            if (ev->state >= 2) continue;
            if (!ev->begun_ns) { /* fired at its round: written where every site reads it */
                if (L->progress < ev->from) continue;
                if (chaos_fire_cut(L, ev, t_emu) != 0) return -1;
                if (ev->state < 3) ev->begun_ns = tnow;
                L->drawn = 0;
                continue;
            }
            if (t_emu < ev->start_s + (ev->state ? ev->duration_s : 0)) continue;
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
             * still rejoining) ... */
            uint64_t down = chaos_down(L) | 1ull << ev->target;
            uint32_t up = L->cfg->n_sites - (uint32_t)__builtin_popcountll(down);
            /* ... nor together with the link cuts due while it lasts: its length in seconds,
             * a kill's at the run's pace so far */
            double t_emu = (double)(tnow - L->emu_start_ns) * 1e-9;
            double len =
                ev->kind == GT_CHAOS_STOP ? ev->stop_s : (ev->until - ev->at) * chaos_round_s(L);
            int cuts =
                up >= L->cfg->n_sites / 2 + 1 && chaos_cuts_break(L, down, t_emu, t_emu + len);
            if (up < L->cfg->n_sites / 2 + 1 || cuts) {
                ev->state = 3;
                L->chaos_skipped++;
                if (cuts)
                    fprintf(L->tty ? stdout : stderr,
                            "-- chaos: skipped the %s of %s at round %.1f: with the link cuts "
                            "due while it lasts, fewer than a majority of the sites would "
                            "reach a majority\n",
                            ev->kind == GT_CHAOS_KILL ? "kill" : "stop", v->name, L->progress);
                else
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
            double step = gt_launch_jnum(L->sp[k].st, "step"),
                   total = gt_launch_jnum(L->sp[k].st, "total_steps");
            if (!L->sp[k].started || L->sp[k].exited || L->sp[k].ended_joining ||
                L->sp[k].ended_behind || L->sp[k].chaos_stopped || L->sp[k].chaos_down ||
                !(total > 0) || step + L->cfg->inner.steps >= total)
                continue;
            L->sp[k].ended_behind = 1;
            terminate_site(L->sp[k].pid);
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
                    terminate_site(L->sp[k].pid);
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
            if (gt_launch_build_sets(L->cfg, L->run_dir, L->etcd.endpoints, L->tls_dir,
                                     L->user_sets, L->n_user, &L->sets, &L->n_sets) != 0)
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
void gt_launch_supervise(launch_t *L)
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
        gt_launch_track_lives(L->sp, L->cfg->n_sites, L->run_dir, 0);
        /* while a --kill is to come, look for its notice every 20 ms: a site stopped for its
         * kill dies within 20 ms, not a whole tick later */
        struct timespec tick = {0, 250000000}, often = {0, 20000000};
        if (!kill_notices(L)) nanosleep(&tick, NULL);
        for (int t = 0; t < 12 && kill_notices(L); t++) nanosleep(&often, NULL);
    }
}

/* Orderly stop of whatever still runs: SIGTERM, then SIGKILL after 30 s. */
void gt_launch_stop_sites(launch_t *L)
{
    for (uint32_t i = 0; i < L->cfg->n_sites; i++)
        if (L->sp[i].pid > 0 && !L->sp[i].exited) {
            if (L->sp[i].chaos_stopped) signal_site(L->sp[i].pid, SIGCONT);
            terminate_site(L->sp[i].pid);
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

/* The run's summary.json and the exit status: 0 when every site finished (or was retired),
 * 1 when one did not (or was never started again), 130 after a signal. */
int gt_launch_report(launch_t *L)
{
    gt_launch_track_lives(L->sp, L->cfg->n_sites, L->run_dir, 1);
    gt_launch_write_summary(L->run_dir, L->cfg, L->sp, (gt_time_ns() - L->t0) * 1e-9,
                            L->t_first_unix, L->whole_restarts, L->chaos_skipped);
    int rc = g_interrupted ? 130 : 0;
    for (uint32_t i = 0; i < L->cfg->n_sites; i++) {
        /* --chaos killed it and the run ended before its restart, or before it rejoined */
        if (L->sp[i].chaos_down || L->sp[i].ended_joining || L->sp[i].ended_behind ||
            L->sp[i].retired)
            continue;
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
