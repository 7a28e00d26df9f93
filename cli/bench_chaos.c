/* bench_chaos.c — `geotrain bench chaos`: goodput of DiLoCo and of sync-dp under one fault
 * schedule.
 *
 * For each failure rate asked for (--mtbf-rounds, default 20 and 5 rounds per failure per
 * site), runs `geotrain launch CONFIG --chaos SEED --mtbf-rounds M` twice, as DiLoCo and with
 * outer.mode = sync-dp (which restarts the whole run from its last checkpoint when a site
 * fails), and prints one JSON line per run: goodput, hash mismatches, the contributions
 * counted by the owners, and the token ledger (tokens submitted by the sites in submits.jsonl
 * against tokens in applied results): what the faults cost, measured side by side on the
 * same schedule. The schedule depends on the seed, the sites and run.rounds only, so both
 * modes meet the same faults at the same rounds. Run directories are kept.
 */
#include "cli.h"
#include "gt_topology.h"

#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: geotrain bench chaos [--config FILE] [--seed S] [--mtbf-rounds M ...]\n"
        "                            [--run-dir DIR] [--set KEY=VALUE ...] [--slow F]\n"
        "                            [--chaos-round-s S] [--fault-rounds F] [--json]\n\n"
        "Runs FILE (default bench/chaos.yaml) under `geotrain launch --chaos S` (default\n"
        "seed 1) for each failure rate M (mean rounds between failures of one site;\n"
        "repeatable; default 20 and 5), once as DiLoCo and once with outer.mode=sync-dp\n"
        "(a failing site stops every site and the run restarts from its last checkpoint,\n"
        "run.checkpoint_every). Prints one line per run: goodput (summary.json: tokens in\n"
        "the final anchor over what every site could have trained at its measured speed in\n"
        "the run's wall time) and goodput_bound (the most the schedule's faults leave:\n"
        "a kill's rounds down, a SIGSTOP's seconds and a slowdown's lost speed taken\n"
        "out of every site's whole run), hash mismatches, contributions counted by the owners (on\n"
        "time, late, dropped, open at the end), the token ledger (tokens the sites\n"
        "submitted, tokens in applied results, the difference: lost), faults drawn and\n"
        "skipped, sync-dp's whole-run restarts, held-out loss, wall time and where the rest\n"
        "of goodput went (goodput_breakdown, docs/diloco.md#where-goodput-goes). --set applies\n"
        "to every run; --slow F makes every site's steps F times slower (launch --slow:\n"
        "sleeps, so rounds get long against the lease without the sites fighting over this\n"
        "machine's cores; the measured speed is the slowed one). --chaos-round-s S places\n"
        "the schedule's link cuts on the emulation clock (launch --chaos-round-s; default 3,\n"
        "bench/chaos.yaml's rounds with --slow 20; 0: no cuts). --fault-rounds F: the mean\n"
        "length in rounds of a kill's down time and of a slowdown (launch --fault-rounds;\n"
        "default 2: 1, 2 or 3 rounds). Run directories go under\n"
        "DIR (default runs/bench-chaos-TIME) and are kept; --json prints JSON lines only.\n");
}

static double jnum(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* Σ tokens over every site's submits.jsonl. */
static double submitted(const char *run, json_t *sum)
{
    json_t *sites = json_object_get(sum, "sites"), *s;
    const char *name;
    double acc = 0;
    json_object_foreach(sites, name, s)
    {
        (void)s;
        char path[PATH_MAX + 128], line[256];
        snprintf(path, sizeof path, "%s/%s/submits.jsonl", run, name);
        FILE *f = fopen(path, "r");
        while (f && fgets(line, sizeof line, f)) {
            json_t *j = json_loads(line, 0, NULL);
            if (json_is_number(json_object_get(j, "tokens"))) acc += jnum(j, "tokens");
            json_decref(j);
        }
        if (f) fclose(f);
    }
    return acc;
}

int gt_bench_chaos(int argc, char **argv)
{
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"run-dir", required_argument, NULL, 'd'},
                                         {"seed", required_argument, NULL, 'S'},
                                         {"mtbf-rounds", required_argument, NULL, 'M'},
                                         {"set", required_argument, NULL, 's'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"slow", required_argument, NULL, 'w'},
                                         {"chaos-round-s", required_argument, NULL, 'r'},
                                         {"fault-rounds", required_argument, NULL, 'F'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *config = "bench/chaos.yaml", *dir_opt = NULL, *seed = "1", *round_s = "3";
    double mtbf[8];
    size_t n_mtbf = 0;
    const char *sets[256];
    size_t n_sets = 0;
    char *end;
    int c, json = 0;
    double slow = 1.0, fault_rounds = 2.0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': config = optarg; break;
        case 'd': dir_opt = optarg; break;
        case 'S':
            strtoull(optarg, &end, 10);
            if (*end || !*optarg || optarg[0] == '-') {
                fprintf(stderr, "geotrain bench chaos: --seed %s: expected an integer >= 0\n",
                        optarg);
                return 2;
            }
            seed = optarg;
            break;
        case 'M': {
            double m = strtod(optarg, &end);
            if (*end || !(m >= 1 && m <= 1e6) || n_mtbf == 8) {
                fprintf(stderr,
                        "geotrain bench chaos: --mtbf-rounds %s: expected rounds in [1, 1e6] "
                        "(at most 8 rates)\n",
                        optarg);
                return 2;
            }
            mtbf[n_mtbf++] = m;
            break;
        }
        case 's':
            if (n_sets == sizeof sets / sizeof sets[0]) {
                fprintf(stderr, "geotrain bench chaos: too many --set\n");
                return 2;
            }
            sets[n_sets++] = optarg;
            break;
        case 'r':
            if (!(strtod(optarg, &end) >= 0) || *end) {
                fprintf(stderr, "geotrain bench chaos: --chaos-round-s %s: expected seconds\n",
                        optarg);
                return 2;
            }
            round_s = optarg;
            break;
        case 'F':
            fault_rounds = strtod(optarg, &end);
            if (*end || !(fault_rounds >= 0.05 && fault_rounds <= 1000)) {
                fprintf(
                    stderr,
                    "geotrain bench chaos: --fault-rounds %s: expected rounds in [0.05, 1000]\n",
                    optarg);
                return 2;
            }
            break;
        case 'j': json = 1; break;
        case 'w':
            slow = strtod(optarg, &end);
            if (*end || !(slow >= 1 && slow <= 1000)) {
                fprintf(stderr, "geotrain bench chaos: --slow %s: expected a factor in [1, 1000]\n",
                        optarg);
                return 2;
            }
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        usage(stderr);
        return 2;
    }
    /* what every launch gets: the user's --set list, and with --slow every site's steps
     * slower (rounds long against the lease) */
    gt_cli_argv_t common = {{NULL}, 0, 0};
    for (size_t i = 0; i < n_sets; i++) {
        gt_cli_argv_add(&common, "--set");
        gt_cli_argv_add(&common, "%s", sets[i]);
    }
    if (slow > 1.0) {
        gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;
        gt_topo_config_t *cfg = NULL;
        if (gt_topo_load(config, &lp, &cfg) != GT_OK) {
            gt_cli_argv_free(&common);
            return 2;
        }
        for (uint32_t i = 0; i < cfg->n_sites; i++) {
            gt_cli_argv_add(&common, "--slow");
            gt_cli_argv_add(&common, "%s=%g", cfg->sites[i].name, slow);
        }
        gt_topo_destroy(cfg);
    }
    if (!n_mtbf) {
        mtbf[n_mtbf++] = 20;
        mtbf[n_mtbf++] = 5;
    }
    char dir[PATH_MAX];
    if (dir_opt) {
        snprintf(dir, sizeof dir, "%s", dir_opt);
    } else {
        char stamp[32];
        time_t t = time(NULL);
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime(&t));
        snprintf(dir, sizeof dir, "runs/bench-chaos-%s", stamp);
    }
    if (gt_mkdirs(dir) != GT_OK) {
        gt_cli_argv_free(&common);
        return 1;
    }
    static const char *const modes[2] = {"diloco", "sync-dp"};
    int rc = 0;
    for (size_t k = 0; k < n_mtbf; k++) {
        double g[2] = {NAN, NAN}, b0 = NAN;
        for (int m = 0; m < 2; m++) {
            char run[PATH_MAX + 64], path[PATH_MAX + 96];
            snprintf(run, sizeof run, "%s/%s-mtbf%g", dir, modes[m], mtbf[k]);
            gt_cli_argv_t a = {{NULL}, 0, 0};
            gt_cli_argv_add(&a, "launch");
            gt_cli_argv_add(&a, "%s", config);
            gt_cli_argv_add(&a, "--run-dir");
            gt_cli_argv_add(&a, "%s", run);
            gt_cli_argv_add(&a, "--chaos");
            gt_cli_argv_add(&a, "%s", seed);
            gt_cli_argv_add(&a, "--mtbf-rounds");
            gt_cli_argv_add(&a, "%g", mtbf[k]);
            gt_cli_argv_add(&a, "--chaos-round-s");
            gt_cli_argv_add(&a, "%s", round_s);
            gt_cli_argv_add(&a, "--fault-rounds");
            gt_cli_argv_add(&a, "%g", fault_rounds);
            for (int i = 0; i < common.n; i++) gt_cli_argv_add(&a, "%s", common.v[i]);
            if (m)
                gt_cli_argv_words(&a, "--set outer.mode=sync-dp --set outer.overlap_steps=0 "
                                      "--set outer.catch_up=false");
            if (!json)
                fprintf(stderr, "bench chaos: %s, one failure per site per %g rounds ...\n",
                        modes[m], mtbf[k]);
            snprintf(path, sizeof path, "%s.log", run);
            int r = gt_cli_launch_logged(&a, path);
            gt_cli_argv_free(&a);
            snprintf(path, sizeof path, "%s/summary.json", run);
            json_t *sum = json_load_file(path, 0, NULL);
            if (r != 0 || !sum) {
                fprintf(stderr, "bench chaos: the %s run failed (see %s.log)\n", modes[m], run);
                rc = 1;
                if (!sum) continue;
            }
            snprintf(path, sizeof path, "%s/chaos.json", run);
            json_t *plan = json_load_file(path, 0, NULL);
            int n_faults = (int)json_array_size(json_object_get(plan, "events"));
            json_decref(plan);
            json_t *ct = json_object_get(sum, "contributions");
            double sub = submitted(run, sum), in_res = jnum(sum, "tokens_in_anchor");
            g[m] = jnum(sum, "goodput");
            json_t *o = json_pack(
                "{s:s,s:s,s:f,s:o,s:I,s:{s:I,s:I,s:I,s:I,s:I},s:f,s:f,s:f,s:i,s:i,s:I,s:I,s:o,s:f,"
                "s:b}",
                "bench", "chaos", "mode", modes[m], "mtbf_rounds", mtbf[k], "goodput",
                isfinite(g[m]) ? json_real(g[m]) : json_null(), "hash_mismatches",
                (json_int_t)jnum(sum, "hash_mismatches"), "contributions", "on_time",
                (json_int_t)jnum(ct, "on_time"), "late", (json_int_t)jnum(ct, "late"), "dropped",
                (json_int_t)jnum(ct, "dropped"), "open_at_end", (json_int_t)jnum(ct, "open_at_end"),
                "unreceived", (json_int_t)jnum(ct, "unreceived"), "tokens_submitted", sub,
                "tokens_in_results", in_res, "tokens_lost", sub - in_res, "faults", n_faults,
                "faults_skipped", (int)jnum(sum, "chaos_skipped"), "whole_run_restarts",
                (json_int_t)jnum(sum, "whole_run_restarts"), "seed", (json_int_t)atoll(seed),
                "eval_loss",
                isfinite(jnum(sum, "eval_loss")) ? json_real(jnum(sum, "eval_loss")) : json_null(),
                "wall_s", jnum(sum, "wall_s"), "finished", r == 0);
            double bound = jnum(sum, "goodput_bound");
            if (o) {
                json_object_set_new(o, "goodput_bound",
                                    isfinite(bound) ? json_real(bound) : json_null());
                json_object_set_new(o, "fault_rounds", json_real(fault_rounds));
            }
            json_t *bd = json_object_get(sum, "goodput_breakdown");
            if (o && bd) json_object_set(o, "goodput_breakdown", bd);
            if (m == 0) b0 = bound;
            char *text = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(5)) : NULL;
            if (text) printf("%s\n", text);
            fflush(stdout);
            free(text);
            json_decref(o);
            json_decref(sum);
        }
        if (!json)
            printf("# one failure per site per %g rounds: goodput DiLoCo %.3f, sync-dp %.3f "
                   "(the schedule's faults leave at most %.3f)\n",
                   mtbf[k], g[0], g[1], b0);
    }
    gt_cli_argv_free(&common);
    return rc;
}
