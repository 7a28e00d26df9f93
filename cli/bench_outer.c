/* bench_outer.c — `geotrain bench outer`: what DiLoCo buys over an emulated WAN.
 *
 * Runs the same sites.yaml three times with `geotrain launch` — overlapped DiLoCo
 * (outer.overlap_steps = τ), synchronous DiLoCo (τ = 0) and synchronous data parallelism
 * (outer.mode = sync-dp, bf16 gradients every step) — under the file's emulated WAN, and
 * prints one JSON object per mode: mean compute utilization over the training loop, WAN
 * bytes, the bandwidth saving against sync-dp measured in the same invocation, the final
 * anchor's held-out loss and the loss gap to sync-dp, and param_passes_per_round: the sweeps
 * over the parameter vector the outer step made per round, as diloco/ counts them in each
 * site's summary.json (sync-dp has no outer step: 0), and peak_wan_mbps: the highest send rate
 * over any 1 s window of any site. --fragments F instead runs overlapped DiLoCo with one
 * fragment and with F (streaming DiLoCo), side by side. Run directories are kept.
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
        "usage: geotrain bench outer [--config FILE] [--run-dir DIR] [--overlap TAU]\n"
        "                            [--set KEY=VALUE ...] [--dp-set KEY=VALUE ...] [--json]\n"
        "                            [--slow SITE=FACTOR ...] [--split | --fragments F | "
        "--catch-up]\n\n"
        "Runs FILE (default sites.yaml) three times with `geotrain launch`: overlapped\n"
        "DiLoCo (outer.overlap_steps = TAU, default inner.steps / 2), synchronous DiLoCo\n"
        "(TAU = 0) and sync-dp (a bf16 gradient all-reduce every step over the same WAN\n"
        "layer). Prints one line per mode with compute utilization (time in inner steps /\n"
        "training wall time, mean over sites), WAN bytes sent, the bandwidth saving against\n"
        "the sync-dp run of the same invocation, the final anchor's held-out loss and its gap\n"
        "to sync-dp, and param_passes_per_round: full sweeps over the parameter vector the\n"
        "outer step made per round (counted by diloco/; the codec's encode and decode are not\n"
        "included). --set overrides apply to all three runs (e.g. --set model.preset=tiny\n"
        "--set inner.steps=250 --set codec.name=int4); --dp-set ones only to the sync-dp run\n"
        "(its bytes and loss do not depend on the link speed, so a narrow emulated link can\n"
        "be widened for it: --dp-set wan.emulation.bandwidth_mbps=0). Run directories go\n"
        "under DIR\n"
        "(default runs/bench-outer-TIME) and are kept. Every mode also reports exchange_s: the\n"
        "median time from a site's submit of a round to holding all of its result (per site,\n"
        "then the mean over sites).\n\n"
        "--slow SITE=FACTOR (repeatable) is passed to every launch: SITE's steps take FACTOR\n"
        "times as long (a straggler); each line then also gives other_sites_utilization, the\n"
        "mean utilization of the sites not slowed (how long they waited for the straggler).\n\n"
        "--catch-up runs overlapped DiLoCo with outer.catch_up = false, then with = true (a\n"
        "site behind ends its round once a peer has submitted it; try it with --slow), then\n"
        "sync-dp.\n\n"
        "--split instead runs overlapped DiLoCo twice, with outer.chunk_split = bandwidth\n"
        "(chunk ownership follows the sites' link capacity) and = equal (the same share for\n"
        "every site), and prints both exchange times and their ratio (try\n"
        "--config bench/thin_site.yaml, where one site's links are 10x thinner).\n\n"
        "--fragments F instead runs overlapped DiLoCo twice, with outer.fragments = 1 and = F\n"
        "(streaming DiLoCo: F interleaved fragments synced H/F steps apart), TAU defaulting to\n"
        "inner.steps / (2F) for both, and prints both peak WAN rates and their ratio. Every\n"
        "mode reports peak_wan_mbps: the highest payload send rate over any 1 s window of any\n"
        "site (each site samples its bytes sent every 10 ms).\n\n"
        "--params N[,N...] instead measures the outer step at a model's size with a synthetic\n"
        "trainer on the C API (host bytes and training-thread seconds per parameter): see\n"
        "`geotrain bench outer --params 1 --help`.\n");
}

static double jnum(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* A number rounded to `digits` decimals, or null when it is not finite (JSON has no NaN: a run
 * that failed, or a figure with nothing to compare against, such as other_sites_utilization
 * without --slow). */
static void put_num(json_t *o, const char *k, double v, int digits)
{
    if (!isfinite(v)) {
        json_object_set_new(o, k, json_null());
        return;
    }
    double p = pow(10.0, digits);
    json_object_set_new(
        o, k, digits == 0 ? json_integer((json_int_t)llround(v)) : json_real(round(v * p) / p));
}

static void print_json(json_t *o)
{
    char *text = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(12));
    if (text) printf("%s\n", text);
    free(text);
    json_decref(o);
}

/* Largest per-site number. */
static double site_max(json_t *sum, const char *k)
{
    json_t *sites = json_object_get(sum, "sites"), *s;
    const char *name;
    double m = NAN;
    json_object_foreach(sites, name, s)
    {
        (void)name;
        if (isfinite(jnum(s, k)) && !(jnum(s, k) <= m)) m = jnum(s, k);
    }
    return m;
}

/* Mean of a per-site number over the sites that finished. */
static double site_mean(json_t *sum, const char *k)
{
    json_t *sites = json_object_get(sum, "sites"), *s;
    const char *name;
    double acc = 0;
    int n = 0;
    json_object_foreach(sites, name, s)
    {
        (void)name;
        if (isfinite(jnum(s, k))) {
            acc += jnum(s, k);
            n++;
        }
    }
    return n ? acc / n : NAN;
}

int gt_bench_outer(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) /* the outer step at a model's size: another benchmark */
        if (strcmp(argv[i], "--params") == 0 || strncmp(argv[i], "--params=", 9) == 0 ||
            strcmp(argv[i], "--scale-site") == 0)
            return gt_bench_outer_scale(argc, argv);
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"run-dir", required_argument, NULL, 'd'},
                                         {"overlap", required_argument, NULL, 'o'},
                                         {"set", required_argument, NULL, 's'},
                                         {"dp-set", required_argument, NULL, 'p'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"split", no_argument, NULL, 'S'},
                                         {"slow", required_argument, NULL, 'w'},
                                         {"fragments", required_argument, NULL, 'F'},
                                         {"catch-up", no_argument, NULL, 'C'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *config = "sites.yaml", *dir_opt = NULL, *overlap = NULL, *set_list[128];
    size_t n_sets = 0;
    const char *dp_list[64];
    size_t n_dp = 0;
    const char *slow_names[32];
    size_t n_slow = 0;
    int c, json = 0, split = 0, catch_up = 0;
    unsigned frags = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': config = optarg; break;
        case 'd': dir_opt = optarg; break;
        case 'o': overlap = optarg; break;
        case 's':
            if (n_sets == sizeof set_list / sizeof set_list[0]) {
                fprintf(stderr, "geotrain bench outer: too many --set\n");
                return 2;
            }
            set_list[n_sets++] = optarg;
            break;
        case 'p':
            if (n_dp == sizeof dp_list / sizeof dp_list[0]) {
                fprintf(stderr, "geotrain bench outer: too many --dp-set\n");
                return 2;
            }
            dp_list[n_dp++] = optarg;
            break;
        case 'j': json = 1; break;
        case 'S': split = 1; break;
        case 'C': catch_up = 1; break;
        case 'F':
            if (sscanf(optarg, "%u", &frags) != 1 || frags < 2 || frags > 64) {
                fprintf(stderr, "geotrain bench outer: --fragments takes F in [2, 64]\n");
                return 2;
            }
            split = 1; /* two overlapped runs, as --split */
            break;
        case 'w':
            if (!strchr(optarg, '=') || n_slow == 32) {
                fprintf(stderr, "geotrain bench outer: --slow takes SITE=FACTOR (at most 32)\n");
                return 2;
            }
            slow_names[n_slow++] = optarg;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    char dir[PATH_MAX];
    if (dir_opt) {
        snprintf(dir, sizeof dir, "%s", dir_opt);
    } else {
        char stamp[32];
        time_t t = time(NULL);
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime(&t));
        snprintf(dir, sizeof dir, "runs/bench-outer-%s", stamp);
    }
    struct {
        const char *mode, *extra;
        json_t *sum;
    } runs[3] = {{"diloco-overlapped", NULL, NULL},
                 {"diloco-synchronous", "--set outer.overlap_steps=0", NULL},
                 {"sync-dp",
                  "--set outer.mode=sync-dp --set outer.overlap_steps=0 --set outer.catch_up=false",
                  NULL}};
    int n_runs = 3;
    static char frag_extra[64], frag_mode[32];
    if (frags) { /* the same overlapped run with one fragment and with F */
        snprintf(frag_extra, sizeof frag_extra, "--set outer.fragments=%u", frags);
        snprintf(frag_mode, sizeof frag_mode, "fragments-%u", frags);
        runs[0].mode = "fragments-1";
        runs[0].extra = "--set outer.fragments=1";
        runs[1].mode = frag_mode;
        runs[1].extra = frag_extra;
        n_runs = 2;
    } else if (catch_up) { /* overlapped without and with outer.catch_up, then sync-dp */
        runs[0].extra = "--set outer.catch_up=false";
        runs[1].mode = "diloco-catch-up";
        runs[1].extra = "--set outer.catch_up=true";
    } else if (split) { /* the same overlapped run with each chunk ownership rule */
        runs[0].mode = "split-bandwidth";
        runs[0].extra = "--set outer.chunk_split=bandwidth";
        runs[1].mode = "split-equal";
        runs[1].extra = "--set outer.chunk_split=equal";
        n_runs = 2;
    }
    /* Overlapped: TAU if given, else half a round. */
    gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;
    lp.sets = set_list;
    lp.n_sets = n_sets;
    gt_topo_config_t *cfg = NULL;
    if (gt_topo_load(config, &lp, &cfg) != GT_OK) return 2;
    char tau[64];
    snprintf(tau, sizeof tau, "--set outer.overlap_steps=%s", overlap ? overlap : "");
    if (!overlap)
        snprintf(tau, sizeof tau, "--set outer.overlap_steps=%u",
                 frags ? cfg->inner.steps / (2 * frags) : cfg->inner.steps / 2);
    gt_topo_destroy(cfg);
    int rc = 0;
    for (int i = 0; i < n_runs; i++) {
        char run[PATH_MAX + 64], path[PATH_MAX + 96];
        snprintf(run, sizeof run, "%s/%s", dir, runs[i].mode);
        gt_cli_argv_t a = {{NULL}, 0, 0};
        gt_cli_argv_add(&a, "launch");
        gt_cli_argv_add(&a, "%s", config);
        gt_cli_argv_add(&a, "--run-dir");
        gt_cli_argv_add(&a, "%s", run);
        for (size_t k = 0; k < n_slow; k++) {
            gt_cli_argv_add(&a, "--slow");
            gt_cli_argv_add(&a, "%s", slow_names[k]);
        }
        for (size_t k = 0; k < n_sets; k++) {
            gt_cli_argv_add(&a, "--set");
            gt_cli_argv_add(&a, "%s", set_list[k]);
        }
        if (i == 0 || split || (catch_up && i == 1)) gt_cli_argv_words(&a, tau);
        gt_cli_argv_words(&a, runs[i].extra);
        for (size_t k = 0; i == 2 && k < n_dp; k++) {
            gt_cli_argv_add(&a, "--set");
            gt_cli_argv_add(&a, "%s", dp_list[k]);
        }
        if (gt_mkdirs(dir) != GT_OK) {
            gt_cli_argv_free(&a);
            return 1;
        }
        fprintf(stderr, "bench outer: %s ...\n", runs[i].mode);
        snprintf(path, sizeof path, "%s.log", run);
        int r = gt_cli_launch_logged(&a, path);
        gt_cli_argv_free(&a);
        snprintf(path, sizeof path, "%s/summary.json", run);
        runs[i].sum = json_load_file(path, 0, NULL);
        if (r != 0 || !runs[i].sum) {
            fprintf(stderr, "bench outer: the %s run failed (see %s.log)\n", runs[i].mode, run);
            rc = 1;
        }
    }
    double dp_bytes = !split && runs[2].sum ? jnum(runs[2].sum, "wan_bytes_sent") : NAN;
    double dp_loss = !split && runs[2].sum ? jnum(runs[2].sum, "eval_loss") : NAN;
    double exch[3] = {NAN, NAN, NAN}, peak[3] = {NAN, NAN, NAN};
    for (int i = 0; i < n_runs; i++) {
        if (!runs[i].sum) continue;
        double util = site_mean(runs[i].sum, "compute_utilization");
        double sent = jnum(runs[i].sum, "wan_bytes_sent");
        double loss = jnum(runs[i].sum, "eval_loss");
        double est = jnum(runs[i].sum, "sync_dp_bytes");
        double passes = site_mean(runs[i].sum, "param_passes_per_round");
        exch[i] = site_mean(runs[i].sum, "exchange_s_median");
        peak[i] = site_max(runs[i].sum, "peak_wan_mbps");
        /* The sites not slowed: how much the stragglers cost them. */
        double others = NAN;
        if (n_slow) {
            json_t *sites = json_object_get(runs[i].sum, "sites"), *so;
            const char *name;
            double acc = 0;
            int n = 0;
            json_object_foreach(sites, name, so)
            {
                int slowed = 0;
                for (size_t k = 0; k < n_slow; k++)
                    if (strncmp(slow_names[k], name, strlen(name)) == 0 &&
                        slow_names[k][strlen(name)] == '=')
                        slowed = 1;
                if (!slowed && isfinite(jnum(so, "compute_utilization"))) {
                    acc += jnum(so, "compute_utilization");
                    n++;
                }
            }
            others = n ? acc / n : NAN;
        }
        if (json) {
            const char *codec = json_string_value(json_object_get(runs[i].sum, "codec"));
            json_t *o = json_object();
            json_object_set_new(o, "mode", json_string(runs[i].mode));
            put_num(o, "compute_utilization", util, 4);
            put_num(o, "wan_bytes_sent", sent, 0);
            put_num(o, "sync_dp_bytes_measured", dp_bytes, 0);
            put_num(o, "sync_dp_bytes_estimated", est, 0);
            put_num(o, "bandwidth_saving", dp_bytes / sent, 1);
            put_num(o, "eval_loss", loss, 4);
            put_num(o, "loss_gap_vs_sync_dp", (loss - dp_loss) / dp_loss, 4);
            put_num(o, "wall_s", jnum(runs[i].sum, "wall_s"), 1);
            json_object_set_new(o, "codec", codec ? json_string(codec) : json_null());
            put_num(o, "param_passes_per_round", passes, 2);
            put_num(o, "exchange_s", exch[i], 4);
            put_num(o, "other_sites_utilization", others, 4);
            put_num(o, "peak_wan_mbps", peak[i], 3);
            print_json(o);
        } else {
            printf("%-20s utilization %5.1f%%  WAN sent %10.3g B  saving %8.1fx  loss %.4f "
                   "(%+.2f%% vs sync-dp)  param_passes_per_round %.2f  exchange_s %.3f  "
                   "peak_wan_mbps %.3f\n",
                   runs[i].mode, 100 * util, sent, dp_bytes / sent, loss,
                   100 * (loss - dp_loss) / dp_loss, passes, exch[i], peak[i]);
            if (n_slow)
                printf("%-20s utilization of the sites not slowed %5.1f%%\n", "", 100 * others);
        }
        json_decref(runs[i].sum);
    }
    if (frags) {
        if (json) {
            char k[64];
            json_t *o = json_object();
            json_object_set_new(o, "mode", json_string("fragments-ratio"));
            snprintf(k, sizeof k, "peak_wan_mbps_1_over_%u", frags);
            put_num(o, k, peak[0] / peak[1], 3);
            print_json(o);
        } else
            printf("peak WAN send rate (any site, any 1 s): 1 fragment %.3f Mbit/s, %u fragments "
                   "%.3f Mbit/s: %.2fx lower\n",
                   peak[0], frags, peak[1], peak[0] / peak[1]);
    } else if (split) {
        if (json) {
            json_t *o = json_object();
            json_object_set_new(o, "mode", json_string("split-ratio"));
            put_num(o, "exchange_s_equal_over_bandwidth", exch[1] / exch[0], 3);
            print_json(o);
        } else
            printf("exchange time per round (median): bandwidth-aware %.3f s, equal split %.3f s: "
                   "%.2fx shorter\n",
                   exch[0], exch[1], exch[1] / exch[0]);
    }
    fprintf(stderr, "bench outer: run directories in %s\n", dir);
    return rc;
}
