/* cmd_run.c — `geotrain run`: train one site (one rank) of a sites.yaml.
 *
 * Today it runs a config with a single site of one rank: the inner loop alone, no WAN. It
 * owns what a library must not: the run directory, the progress line, signals. SIGINT or
 * SIGTERM finish the current step, write a checkpoint and exit 128 + signal number, so
 * `geotrain run --resume` continues the run exactly where it stopped.
 */
#include "cli.h"
#include "gt_local.h"
#include "gt_topology.h"

#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_SETS     256
#define KEEP_CKPTS   3
#define TTY_PERIOD_S 0.25

static volatile sig_atomic_t stop_signal = 0;

static void on_signal(int sig)
{
    stop_signal = sig;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: geotrain run --config FILE --site NAME [--run-dir DIR] [--resume]\n"
            "                    [--init MODEL.safetensors] [--set KEY=VALUE ...]\n"
            "                    [--reuse-run-id]\n\n"
            "Trains one site of a sites.yaml: the inner AdamW loop on the site's share of the\n"
            "data. With one site in the config, that is all (no WAN). With several, this\n"
            "process is one site of a DiLoCo run: every inner.steps steps it exchanges its\n"
            "pseudo-gradient with the other sites over the WAN (membership through etcd at\n"
            "membership.endpoints) -- `geotrain launch` starts every site this way. A site of\n"
            "several ranks runs under mpirun/srun. Total steps = run.rounds x inner.steps.\n"
            "A site started after the run began (or again after it died) joins it: it fetches\n"
            "the agreed anchor and outer momentum from the running sites and trains the rest.\n\n"
            "Prints the resolved config, then a progress line (step, loss, tokens/s, ETA):\n"
            "updated in place on a terminal, one line every run.log_every steps otherwise.\n\n"
            "Run directory (--run-dir, default run.run_dir/run.name):\n"
            "  config.yaml                     the resolved config\n"
            "  SITE/metrics.jsonl              every run.log_every steps: step, loss, lr,\n"
            "                                  grad_norm, tokens, tokens_per_s, time\n"
            "  SITE/checkpoints/step-N/        model.safetensors (HF GPT-2 names),\n"
            "                                  optimizer.safetensors, state.json; every\n"
            "                                  run.checkpoint_every rounds and at the end; the\n"
            "                                  newest %d are kept\n"
            "  SITE/summary.json               steps, tokens, final loss, tokens/s, time\n"
            "  SITE/site.lock                  held by the site's process (DiLoCo runs): a\n"
            "                                  second process of the same site in the same\n"
            "                                  run directory stops at once, touching nothing\n\n"
            "Ctrl-C (SIGINT) or SIGTERM: the step in progress finishes, a checkpoint is\n"
            "written, and the exit status is 128 + the signal number. --resume continues from\n"
            "the newest checkpoint bit for bit (refused if the settings changed; see the\n"
            "config hash in state.json). A second Ctrl-C ends the process at once; the newest\n"
            "complete checkpoint stays valid. A checkpoint damaged later (its files' size or\n"
            "checksum differ from state.json's, or a tensor holds NaN/Inf) is named and\n"
            "skipped: --resume falls back to the previous one.\n\n"
            "Exit status of a site of several: 0 done, 3 removed from the run (stopped or cut\n"
            "off past its lease: start it again and it rejoins as a joiner; launch does),\n"
            "4 retired from the run for good (geotrain sites remove: it does not rejoin),\n"
            "128 + N stopped by signal N, 1 failed.\n\n"
            "Several sites: every run.checkpoint_every rounds, right after a round is applied\n"
            "(step r*H + outer.overlap_steps), each site saves its trainer checkpoint and the\n"
            "outer state (anchor, outer momentum, error-feedback residuals, round, counters) in\n"
            "SITE/checkpoints/outer/ (the newest 2). With --resume, the sites that start the\n"
            "run agree through etcd on the newest step all of them have intact, and continue\n"
            "from it (`geotrain launch --resume RUN_DIR` restarts every site this way); none in\n"
            "common: the run starts over. If the run is still going, the site joins it.\n\n"
            "Options:\n"
            "  --config FILE     the sites.yaml\n"
            "  --site NAME       which site this process is\n"
            "  --run-dir DIR     the run directory\n"
            "  --resume          continue from the newest checkpoint in the run directory\n"
            "  --init FILE       start from these GPT-2 parameters (safetensors with HF names,\n"
            "                    e.g. a Hugging Face model.safetensors) instead of run.seed's\n"
            "                    random initialisation; shapes must match the model\n"
            "  --run-id ID       multi-site: the run's name in etcd and in the secure channel\n"
            "                    (all sites of a run use the same; default run.name).\n"
            "                    An id whose run started but has no site registered any\n"
            "                    more (finished, or every site of it killed: its keys stay\n"
            "                    in a user's etcd) is refused at once\n"
            "  --reuse-run-id    multi-site: clear such a finished or abandoned run's keys\n"
            "                    under the run id before registering, and start afresh\n"
            "                    (nothing is cleared while any site is registered under it)\n"
            "  --slow FACTOR     multi-site: make every step FACTOR times slower (emulates a\n"
            "                    slow site)\n"
            "  --corrupt-anchor ROUND\n"
            "                    multi-site chaos: flip one bit of this site's anchor after\n"
            "                    ROUND; the anchor-hash check must catch it and re-fetch\n"
            "  --expect N        multi-site: start round 0 once N sites (not all) registered;\n"
            "                    the others join later\n"
            "  --set KEY=VALUE   override a config key (repeatable); precedence: file <\n"
            "                    GT_* environment < --set\n"
            "  -h, --help        this text\n\n"
            "Injected faults also come from the environment (GT_SLOW, GT_SLOW_WINDOWS,\n"
            "GT_CORRUPT_ANCHOR, GT_KILL_AT_ROUND with GT_FAULT_NOTIFY: what `geotrain launch\n"
            "--slow/--chaos/--corrupt-anchor/--kill` sets; docs/api.md#environment); --slow and\n"
            "--corrupt-anchor override theirs. A site asked to be killed at a round stops\n"
            "there and waits for its launcher to kill it.\n",
            KEEP_CKPTS);
}

static void fmt_duration(double s, char *buf, size_t n)
{
    if (!isfinite(s) || s < 0) {
        snprintf(buf, n, "?");
    } else if (s < 60) {
        snprintf(buf, n, "%.0fs", s);
    } else if (s < 3600) {
        snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    } else {
        snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
    }
}

static gt_status_t write_config_copy(const gt_topo_config_t *cfg, const char *path)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem) return GT_ERR_NOMEM;
    gt_status_t s = gt_topo_print(cfg, mem);
    if (fclose(mem) != 0 && s == GT_OK) s = GT_ERR_IO;
    if (s == GT_OK) s = gt_write_file_atomic(path, buf, len, 0);
    free(buf);
    return s;
}

static gt_status_t write_summary(const char *path, const char *site, uint64_t steps,
                                 uint64_t tokens, double elapsed, double final_loss,
                                 int interrupted)
{
    json_t *o = json_pack("{s:s, s:I, s:I, s:o, s:f, s:f, s:b}", "site", site, "steps",
                          (json_int_t)steps, "tokens", (json_int_t)tokens, "final_loss",
                          isfinite(final_loss) ? json_real(final_loss) : json_null(), "elapsed_s",
                          elapsed, "tokens_per_s", elapsed > 0 ? (double)tokens / elapsed : 0.0,
                          "interrupted", interrupted);
    char *text = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
    gt_status_t s = text ? gt_write_file_atomic(path, text, strlen(text), 0) : GT_ERR_NOMEM;
    free(text);
    json_decref(o);
    return s;
}

/* A site of a multi-site run: DiLoCo over the WAN (local/site.c). */
static int run_site(const gt_topo_config_t *cfg, const char *site, const char *run_dir_opt,
                    const char *run_id, const gt_faults_t *faults, long long expect, int resume,
                    gt_local_comm_t *world)
{
    char run_dir[GT_TOPO_PATH_MAX * 2 + 8], path[sizeof run_dir + 32];
    if (run_dir_opt)
        snprintf(run_dir, sizeof run_dir, "%s", run_dir_opt);
    else
        snprintf(run_dir, sizeof run_dir, "%s/%s", cfg->run.run_dir, cfg->run.name);
    if (gt_mkdirs(run_dir) != GT_OK) return 1;
    snprintf(path, sizeof path, "%s/config.yaml", run_dir);
    if (gt_local_comm_rank(world) == 0 && access(path, F_OK) != 0 &&
        write_config_copy(cfg, path) != GT_OK)
        return 1;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    gt_local_site_params_t sp = GT_LOCAL_SITE_PARAMS_INIT;
    sp.cfg = cfg;
    sp.site = site;
    sp.run_dir = run_dir;
    sp.run_id = run_id ? run_id : cfg->run.name;
    sp.faults = faults;
    sp.stop = (const volatile int *)&stop_signal;
    sp.expect_sites = expect > 0 ? (uint32_t)expect : 0;
    sp.comm = world;
    sp.resume = resume;
    gt_status_t s = gt_local_site_run(&sp);
    if (s == GT_ERR_CLOSED) {
        fprintf(stderr, "geotrain run: site %s stopped by signal %d; it left the run\n", site,
                (int)stop_signal);
        return 128 + (int)stop_signal;
    }
    if (s == GT_ERR_RETIRED) {
        fprintf(stderr,
                "geotrain run: site %s was retired from the run for good (geotrain sites "
                "remove); it does not rejoin (exit 4)\n",
                site);
        return 4;
    }
    if (s == GT_ERR_PEER_LOST) {
        fprintf(stderr,
                "geotrain run: site %s was removed from the run (it was stopped or cut "
                "off past its lease, or fell too far behind); start it again to rejoin as a "
                "joiner (exit 3)\n",
                site);
        return 3;
    }
    if (s != GT_OK) {
        fprintf(stderr, "geotrain run: site %s failed: %s\n", site, gt_status_str(s));
        return 1;
    }
    return 0;
}

/* The site's ranks: MPI_COMM_WORLD under mpirun/srun, else one rank; either way as many as
 * sites.SITE.ranks says. */
static gt_status_t open_world(const gt_topo_config_t *cfg, uint32_t si, gt_local_comm_t **world_p)
{
    const char *name = cfg->sites[si].name;
    uint32_t R = cfg->sites[si].ranks;
    gt_status_t s = gt_local_comm_world(world_p);
    if (s != GT_OK) return s;
    int size = gt_local_comm_size(*world_p), me = gt_local_comm_rank(*world_p);
    if ((uint32_t)size == R) {
        if (size > 1) {
            static char tag[96];
            snprintf(tag, sizeof tag, "%s/r%d", name, me);
            gt_log_set_tag(tag);
        } else {
            gt_log_set_tag(name);
        }
        return GT_OK;
    }
    if (size == 1)
        fprintf(stderr,
                "geotrain run: site '%s' has %u ranks (sites.%s.ranks): start it as an MPI job, "
                "`mpirun -np %u geotrain run --config FILE --site %s` (or srun; `geotrain "
                "launch` does this), or set sites.%s.ranks=1\n",
                name, R, name, R, name, name);
    else if (me == 0)
        fprintf(stderr,
                "geotrain run: this MPI job has %d ranks but site '%s' has %u (sites.%s.ranks): "
                "start it with -np %u\n",
                size, name, R, name, R);
    gt_local_comm_destroy(*world_p);
    *world_p = NULL;
    return GT_ERR_CONFIG;
}

int gt_cmd_run(int argc, char **argv)
{
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"site", required_argument, NULL, 's'},
                                         {"run-dir", required_argument, NULL, 'd'},
                                         {"resume", no_argument, NULL, 'r'},
                                         {"init", required_argument, NULL, 'i'},
                                         {"set", required_argument, NULL, 'S'},
                                         {"help", no_argument, NULL, 'h'},
                                         {"run-id", required_argument, NULL, 'I'},
                                         {"slow", required_argument, NULL, 'W'},
                                         {"corrupt-anchor", required_argument, NULL, 'X'},
                                         {"expect", required_argument, NULL, 'E'},
                                         {"reuse-run-id", no_argument, NULL, 'U'},
                                         {NULL, 0, NULL, 0}};
    long long corrupt = -1, expect = 0;
    const char *run_id = NULL;
    double slow = 1.0;
    const char *config = NULL, *site = NULL, *run_dir_opt = NULL, *init = NULL;
    const char *sets[MAX_SETS];
    size_t n_sets = 0;
    int resume = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': config = optarg; break;
        case 's': site = optarg; break;
        case 'd': run_dir_opt = optarg; break;
        case 'r': resume = 1; break;
        case 'i': init = optarg; break;
        case 'I': run_id = optarg; break;
        case 'U': /* read by the library when it registers (diloco/connect.c) */
            if (setenv("GT_REUSE_RUN_ID", "1", 1) != 0) return 1;
            break;
        case 'X': corrupt = strtoll(optarg, NULL, 10); break;
        case 'E':
            expect = strtoll(optarg, NULL, 10);
            if (expect < 1) {
                fprintf(stderr, "geotrain run: --expect wants a number of sites, got '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 'W':
            slow = strtod(optarg, NULL);
            if (!(slow >= 1.0 && slow <= 1000.0)) {
                fprintf(stderr, "geotrain run: --slow wants a factor in [1, 1000], got '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 'S':
            if (n_sets == MAX_SETS) {
                fprintf(stderr, "geotrain run: more than %d --set options\n", MAX_SETS);
                return 2;
            }
            sets[n_sets++] = optarg;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!config || !site || optind != argc) {
        fprintf(stderr, "geotrain run: --config and --site are required\n");
        usage(stderr);
        return 2;
    }
    if (resume && init) {
        fprintf(stderr, "geotrain run: --init starts a run; it cannot be combined with --resume\n");
        return 2;
    }

    int rc = 1;
    gt_local_comm_t *world = NULL;
    gt_topo_config_t *cfg = NULL;
    gt_local_trainer_t *tr = NULL;
    gt_local_metrics_t *metrics = NULL;
    char run_dir[GT_TOPO_PATH_MAX * 2 + 8], site_dir[sizeof run_dir + 80],
        ckpt_dir[sizeof site_dir + 16], path[sizeof site_dir + 32];
    gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;
    lp.sets = sets;
    lp.n_sets = n_sets;
    gt_status_t s = gt_topo_load(config, &lp, &cfg);
    if (s != GT_OK) {
        fprintf(stderr, "geotrain run: %s: %s\n", config, gt_status_str(s));
        return 2;
    }
    uint32_t si = 0;
    if (gt_topo_site_index(cfg, site, &si) != GT_OK) {
        fprintf(stderr, "geotrain run: %s has no site named '%s'\n", config, site);
        rc = 2;
        goto out;
    }
    if ((s = open_world(cfg, si, &world)) != GT_OK) {
        rc = 2;
        goto out;
    }
    const int lead = gt_local_comm_rank(world) == 0; /* writes the site's files */
    if (cfg->n_sites != 1) {
        gt_faults_t faults;
        gt_faults_init(&faults);
        if (gt_faults_from_env(&faults) != GT_OK) {
            rc = 2;
            goto out;
        }
        if (slow > 1.0) faults.slow = slow;
        if (corrupt >= 0) faults.corrupt_anchor_round = corrupt;
        rc = run_site(cfg, site, run_dir_opt, run_id, &faults, expect, resume, world);
        goto out;
    }
    if (lead) {
        printf("# resolved configuration\n");
        if (gt_topo_print(cfg, stdout) != GT_OK) goto out;
        fflush(stdout);
    }

    if (run_dir_opt)
        snprintf(run_dir, sizeof run_dir, "%s", run_dir_opt);
    else
        snprintf(run_dir, sizeof run_dir, "%s/%s", cfg->run.run_dir, cfg->run.name);
    snprintf(site_dir, sizeof site_dir, "%s/%s", run_dir, site);
    snprintf(ckpt_dir, sizeof ckpt_dir, "%s/checkpoints", site_dir);
    char latest[sizeof ckpt_dir + 32];
    gt_status_t have = gt_local_ckpt_latest(ckpt_dir, latest, sizeof latest);
    if (!resume && have == GT_OK) {
        fprintf(stderr,
                "geotrain run: %s already holds checkpoints (newest %s); continue it with "
                "--resume, or choose another --run-dir\n",
                run_dir, latest);
        rc = 2;
        goto out;
    }
    if (resume && have != GT_OK) {
        fprintf(stderr, "geotrain run: --resume: no checkpoint under %s\n", ckpt_dir);
        rc = 2;
        goto out;
    }
    if (gt_mkdirs(site_dir) != GT_OK) goto out;
    snprintf(path, sizeof path, "%s/config.yaml", run_dir);
    if (lead && write_config_copy(cfg, path) != GT_OK) goto out;

    gt_local_trainer_params_t tp = GT_LOCAL_TRAINER_PARAMS_INIT;
    tp.cfg = cfg;
    tp.site = si;
    tp.rank = (uint32_t)gt_local_comm_rank(world);
    tp.comm = world;
    if ((s = gt_local_trainer_create(&tp, &tr)) != GT_OK) goto fail;
    if (resume && (s = gt_local_trainer_resume(tr, ckpt_dir)) != GT_OK) goto fail;
    if (init && (s = gt_local_trainer_init_from(tr, init)) != GT_OK) goto fail;
    const uint64_t total = gt_local_trainer_total_steps(tr), H = cfg->inner.steps;
    const uint64_t ckpt_every = (uint64_t)cfg->run.checkpoint_every * H;
    const uint64_t log_every = cfg->run.log_every ? cfg->run.log_every : 1;
    uint64_t start = gt_local_trainer_steps_done(tr);
    snprintf(path, sizeof path, "%s/metrics.jsonl", site_dir);
    if (lead && (s = gt_local_metrics_open(path, start, &metrics)) != GT_OK) goto fail;

    const gt_gpt_params_t *gp = gt_gpt_get_params(gt_local_trainer_model(tr));
    if (lead)
        fprintf(stderr,
                "geotrain run: site %s (%d rank(s)), model V=%zu maxT=%zu L=%zu C=%zu NH=%zu (%zu "
                "parameters), "
                "B=%zu T=%zu, %u thread(s); steps %" PRIu64 "..%" PRIu64 "; run dir %s; config "
                "hash %s\n",
                site, gt_local_comm_size(world), gp->model.V, gp->model.maxT, gp->model.L,
                gp->model.C, gp->model.NH, gt_gpt_param_count(&gp->model), gp->B, gp->T,
                cfg->local.threads, start, total, run_dir, gt_local_trainer_config_hash(tr));

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND; /* a second Ctrl-C stops at once */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    const int tty = lead && isatty(STDERR_FILENO);
    gt_local_step_stats_t st = {0, NAN, 0, 0, 0, 0};
    uint64_t win_t0 = gt_time_ns(), win_steps = 0, last_draw = 0;
    double win_loss = 0, tps = 0, final_loss = NAN;
    int stopping = 0;
    while (gt_local_trainer_steps_done(tr) < total && !stopping) {
        if ((s = gt_local_trainer_step(tr, &st)) != GT_OK) goto fail;
        /* The ranks stop at the same step, whichever of them saw the signal. */
        s = gt_local_comm_agree(world, stop_signal ? GT_ERR_CLOSED : GT_OK);
        if (s == GT_ERR_CLOSED)
            stopping = 1;
        else if (s != GT_OK)
            goto fail;
        win_steps++;
        win_loss += st.loss;
        uint64_t now = gt_time_ns();
        double win_s = (double)(now - win_t0) * 1e-9;
        int log_now = st.step % log_every == 0 || st.step == total;
        if (lead && (log_now || (tty && (double)(now - last_draw) * 1e-9 >= TTY_PERIOD_S))) {
            double cur_tps =
                win_s > 0 ? (double)(win_steps * gt_local_trainer_tokens_per_step(tr)) / win_s : 0;
            char eta[32];
            fmt_duration(win_steps ? (double)(total - st.step) * win_s / (double)win_steps : NAN,
                         eta, sizeof eta);
            fprintf(stderr,
                    "%sstep %" PRIu64 "/%" PRIu64 " (round %" PRIu64 ") | loss %.4f | lr %.2e | "
                    "%.0f tok/s | ETA %s%s",
                    tty ? "\r\033[K" : "", st.step, total, (st.step + H - 1) / H, st.loss, st.lr,
                    cur_tps, eta, tty ? "" : "\n");
            last_draw = now;
            if (log_now) {
                tps = cur_tps;
                final_loss = win_loss / (double)win_steps;
                if ((s = gt_local_metrics_write(metrics, &st, tps)) != GT_OK) goto fail;
                win_t0 = gt_time_ns();
                win_steps = 0;
                win_loss = 0;
            }
        }
        if (ckpt_every && st.step % ckpt_every == 0 && st.step < total) {
            if ((s = gt_local_trainer_save(tr, ckpt_dir, KEEP_CKPTS)) != GT_OK) goto fail;
        }
    }
    if (tty) fputc('\n', stderr);
    if ((s = gt_local_trainer_save(tr, ckpt_dir, KEEP_CKPTS)) != GT_OK) goto fail;
    uint64_t done = gt_local_trainer_steps_done(tr);
    uint64_t tokens = (uint64_t)done * gt_local_trainer_tokens_per_step(tr);
    double elapsed = gt_local_trainer_elapsed_s(tr);
    snprintf(path, sizeof path, "%s/summary.json", site_dir);
    if (lead &&
        (s = write_summary(path, site, done, tokens, elapsed, final_loss, stopping)) != GT_OK)
        goto fail;
    if (!lead) {
        rc = stopping ? 128 + (stop_signal ? stop_signal : SIGTERM) : 0;
    } else if (stopping) {
        fprintf(stderr,
                "geotrain run: stopped by signal %d at step %" PRIu64 "; checkpoint written. "
                "Continue with --resume.\n",
                (int)(stop_signal ? stop_signal : SIGTERM), done);
        rc = 128 + (stop_signal ? stop_signal : SIGTERM);
    } else {
        fprintf(stderr,
                "geotrain run: done: %" PRIu64 " steps, final loss %.4f (mean of the last log "
                "window), %.0f tokens/s overall, %.1f s in steps\n",
                done, final_loss, elapsed > 0 ? (double)tokens / elapsed : 0.0, elapsed);
        rc = 0;
    }
    goto out;
fail:
    fprintf(stderr, "geotrain run: failed: %s\n", gt_status_str(s));
    rc = 1;
out:
    gt_local_metrics_close(metrics);
    gt_local_trainer_destroy(tr);
    gt_topo_destroy(cfg);
    if (rc == 1 && gt_local_comm_size(world) > 1) {
        /* A rank that failed takes its site down at once rather than leave the others
         * waiting in a collective. Rank 0 first: the ranks of a site mostly fail together
         * (an agreed error), and Debian's mpirun (Open MPI 4.1) can crash in its own
         * finalize when two ranks abort at the same moment (seen once in 50 soak runs:
         * mpirun died of SIGSEGV in PMIx_Finalize after "Data unpack would read past end of
         * buffer" in show_help); a second rank gives rank 0's abort 2 s to reach it. */
        int me = gt_local_comm_rank(world);
        if (me != 0) {
            struct timespec ts = {2, 0};
            nanosleep(&ts, NULL);
        }
        fprintf(stderr, "geotrain run: rank %d failed: stopping the site's MPI job\n", me);
        gt_local_comm_abort(world, 1);
    }
    gt_local_comm_destroy(world);
    return rc;
}
