/* bench_scale.c — `geotrain bench outer --params N`: the cross-site layer at a model's size.
 *
 * Runs S sites (processes of this program, one per site) of R ranks each (threads, with an
 * in-process communicator) on one machine, each with a synthetic trainer: a flat float vector
 * of N parameters handed to gt_diloco through the C API, every step touching 1/4096 of it, the
 * step's compute slept (--step-ms) and passed to gt_diloco_step_timed. For every N (and R) it
 * prints what the library costs a trainer, per site:
 *   - host bytes per parameter: peak RSS (VmHWM) less the RSS before gt_diloco_create (the
 *     caller's vectors, already touched), and the library's own count of what it allocated
 *     (summary.json: outer_state_bytes_per_param, base/mem.c);
 *   - the training thread's seconds per round in the submit and in the apply, waits for results
 *     excluded: as the library times them (summary.json) and as measured around the
 *     gt_diloco_step calls here (less the status's wait_s), and both as a ratio to one memcpy
 *     of the vector timed in the same process;
 *   - the exchange: the median time from a submit to the whole result (exchange_s_median)
 *     against what the emulated link's capacity allows for the bytes this site sent;
 *   - the outer step's passes over the vector per round (param_passes_per_round).
 * Before each N the parent checks that S sites fit in the memory available (from the bytes per
 * parameter measured at the previous N) and stops there when they do not, saying so. etcd is
 * Debian's, started for real; the WAN is the real UCX stack on loopback with the emulator.
 */
#include "cli.h"
#include "etcd_local.h"
#include "gt_diloco.h"
#include "gt_wan.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SCALE_MAX_SITES 8
#define SCALE_MAX_RANKS 8
#define SCALE_MAX_N     16

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: geotrain bench outer --params N[,N...] [--ranks R[,R...]] [--sites S]\n"
        "                            [--rounds K] [--inner-steps H] [--overlap TAU]\n"
        "                            [--step-ms MS] [--codec NAME] [--link-mbps MBPS]\n"
        "                            [--lanes L] [--security encrypted|none]\n"
        "                            [--set KEY=VALUE ...] [--run-dir DIR] [--json]\n\n"
        "The outer step at a model's size: S sites (default 2) on this machine, each a process\n"
        "of R ranks (threads; default 1; a list runs each) with a synthetic trainer on a flat\n"
        "vector of N floats (K/M/G suffixes, powers of 1000 here: 10M = 10,000,000; a list\n"
        "runs each), every step touching 1/4096 of it and sleeping MS (default 50) as its\n"
        "compute; K rounds (default 6) of H steps (default 20), TAU (default 5) overlapped,\n"
        "codec NAME (default int8), encrypted UCX through an emulated link of MBPS (default\n"
        "10000) per site pair and direction, wan.lanes L (default 16). Per N and R it prints,\n"
        "per site (the mean over the sites, and the largest):\n"
        "  rss_bytes_per_param   peak RSS less the RSS before gt_diloco_create (the caller's\n"
        "                        vectors), per parameter\n"
        "  lib_bytes_per_param   the library's own count of its buffers at their peak\n"
        "                        (summary.json outer_state_bytes_per_param)\n"
        "  submit_s, apply_s     the training thread's seconds per round in the submit and the\n"
        "                        apply, waits for results excluded: the median over the rounds\n"
        "                        as the library times them (*_mean: the mean, which the first\n"
        "                        rounds' first touch of the outer state's pages raises;\n"
        "                        *_outside: around the gt_diloco_step calls, less wait_s)\n"
        "  submit_memcpy, apply_memcpy  the same over one memcpy of the vector timed here\n"
        "  exchange_s, link_s    median submit-to-result time, and the bytes this site sent\n"
        "                        per round at the link's rate; link_fraction = link_s/exchange_s\n"
        "  passes                the outer step's sweeps over the vector per round\n"
        "  outer_steps_early     the share of rounds whose outer step ran on the library's\n"
        "                        thread before the apply step (the result was whole in\n"
        "                        time): their apply was the rebase alone\n"
        "Before each N it checks that S sites fit in 80%% of MemAvailable (from the bytes per\n"
        "parameter measured at the N before) and stops there, printing where and why. --set "
        "KEY=VALUE\n"
        "overrides the generated sites.yaml. Run directories under DIR (default\n"
        "runs/bench-scale-TIME) are kept.\n");
}

/* ---- the in-process communicator of a site's rank threads ---- */

typedef struct {
    pthread_barrier_t bar;
    uint32_t size;
    uint64_t *u64[SCALE_MAX_RANKS]; /* each rank's posted vector */
    float *all[SCALE_MAX_RANKS];
} tcomm_t;

typedef struct {
    tcomm_t *c;
    uint32_t rank;
} tcomm_rank_t;

static gt_status_t tc_allreduce(void *ctx, uint64_t *v, size_t n, gt_diloco_op_t op)
{
    tcomm_rank_t *r = ctx;
    tcomm_t *c = r->c;
    c->u64[r->rank] = v;
    pthread_barrier_wait(&c->bar);
    uint64_t *acc = malloc(n * sizeof *acc);
    if (acc) { /* every rank computes the same result from the posted vectors */
        for (size_t i = 0; i < n; i++) {
            uint64_t a = c->u64[0][i];
            for (uint32_t k = 1; k < c->size; k++)
                a = op == GT_DILOCO_OP_SUM ? a + c->u64[k][i]
                                           : (c->u64[k][i] > a ? c->u64[k][i] : a);
            acc[i] = a;
        }
    }
    pthread_barrier_wait(&c->bar); /* all have read the inputs */
    if (acc) memcpy(v, acc, n * sizeof *v);
    free(acc);
    pthread_barrier_wait(&c->bar);
    return acc ? GT_OK : GT_ERR_NOMEM;
}

static gt_status_t tc_allgatherv(void *ctx, float *all, const size_t *counts, const size_t *displs)
{
    tcomm_rank_t *r = ctx;
    tcomm_t *c = r->c;
    c->all[r->rank] = all;
    pthread_barrier_wait(&c->bar);
    for (uint32_t k = 0; k < c->size; k++)
        if (k != r->rank && counts[k])
            memcpy(all + displs[k], c->all[k] + displs[k], counts[k] * sizeof(float));
    pthread_barrier_wait(&c->bar);
    return GT_OK;
}

/* ---- a site: this program as a child ---- */

typedef struct {
    const char *config, *site, *run_dir;
    size_t n;
    uint32_t rank, ranks;
    tcomm_rank_t cr;
    float *x;
    gt_status_t st;
    char *summary;        /* rank 0: gt_diloco_summary's JSON */
    double out_s[2][256]; /* each submit's and apply's time around gt_diloco_step, less waits */
    uint64_t submits, applies;
    double step_ms;
} rank_t;

static double now_s(void)
{
    return gt_time_ns() * 1e-9;
}

/* The synthetic trainer's step: 1/4096 of the vector, the same on every rank of a site. */
static void train_step(float *x, size_t n, uint64_t step)
{
    for (size_t i = (size_t)(step * 2654435761u % 4096); i < n; i += 4096)
        x[i] -= 1e-4f * (float)((int)(i % 7) - 3);
}

static void *rank_main(void *arg)
{
    rank_t *rk = arg;
    gt_diloco_params_t p = GT_DILOCO_PARAMS_INIT;
    p.config_path = NULL; /* $GT_CONFIG with the overrides in $GT_SET */
    p.site = rk->site;
    p.run_dir = rk->run_dir;
    const char *base = strrchr(rk->run_dir, '/');
    p.run_id = base ? base + 1 : rk->run_dir;
    p.params = rk->x;
    p.n_params = rk->n;
    p.env = 1; /* the config from $GT_CONFIG and $GT_SET (no chaos knobs are set) */
    p.metrics = 0;
    if (rk->ranks > 1) {
        p.comm.ctx = &rk->cr;
        p.comm.rank = rk->rank;
        p.comm.size = rk->ranks;
        p.comm.allreduce_u64 = tc_allreduce;
        p.comm.allgatherv = tc_allgatherv;
    }
    gt_diloco_t *d = NULL;
    rk->st = gt_diloco_create(&p, &d);
    if (rk->st != GT_OK) {
        fprintf(stderr, "bench outer: site %s rank %u: create failed: %s\n", rk->site, rk->rank,
                gt_diloco_error_message());
        return NULL;
    }
    gt_diloco_status_t s;
    gt_diloco_status(d, &s);
    uint64_t H = s.inner_steps, tau = 0;
    const char *t = getenv("GT_SCALE_TAU");
    if (t) tau = strtoull(t, NULL, 10);
    gt_status_t st = GT_OK;
    while (s.step < s.total_steps && st == GT_OK) {
        double c0 = now_s();
        train_step(rk->x, rk->n, s.step);
        struct timespec ts = {0, (long)(rk->step_ms * 1e6)};
        nanosleep(&ts, NULL);
        double compute = now_s() - c0, w0 = s.wait_s, t0 = now_s();
        uint64_t next = s.step + 1;
        st = gt_diloco_step_timed(d, 1000, 1.0, compute);
        double held = now_s() - t0;
        gt_diloco_status(d, &s);
        held -= s.wait_s - w0;
        if (next % H == 0 && next < s.total_steps) { /* a submit (the last: and its apply) */
            if (rk->submits < 256) rk->out_s[0][rk->submits++] = held;
        } else if (next % H == tau && next > H) {
            if (rk->applies < 256) rk->out_s[1][rk->applies++] = held;
        }
    }
    if (st != GT_OK)
        fprintf(stderr, "bench outer: site %s rank %u: step failed: %s\n", rk->site, rk->rank,
                gt_status_str(st));
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    gt_status_t sst = buf ? gt_diloco_summary(d, buf, cap, &len) : GT_ERR_NOMEM;
    if (sst == GT_OK && rk->rank == 0)
        rk->summary = buf;
    else
        free(buf);
    gt_diloco_close(d, st);
    rk->st = st;
    return NULL;
}

/* A field of /proc/self/status in bytes (VmRSS, VmHWM); 0 when not there. */
static uint64_t proc_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    uint64_t v = 0;
    size_t kl = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0 && line[kl] == ':') v = strtoull(line + kl + 1, NULL, 10);
    if (f) fclose(f);
    return v * 1024;
}

static double jnum(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* A JSON number, or null for one that is not finite (JSON has no NaN). */
static json_t *jreal(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static int site_main(int argc, char **argv)
{
    /* --scale-site CONFIG SITE RUN_DIR N RANKS STEP_MS OUT */
    if (argc != 9) {
        fprintf(stderr,
                "bench outer: --scale-site takes CONFIG SITE RUN_DIR N RANKS STEP_MS OUT\n");
        return 2;
    }
    const char *config = argv[2], *site = argv[3], *run_dir = argv[4], *out = argv[8];
    size_t n = strtoull(argv[5], NULL, 10);
    uint32_t R = (uint32_t)atoi(argv[6]);
    double step_ms = atof(argv[7]);
    if (n == 0 || R == 0 || R > SCALE_MAX_RANKS) return 2;
    setenv("GT_CONFIG", config, 1);
    rank_t rk[SCALE_MAX_RANKS];
    pthread_t th[SCALE_MAX_RANKS];
    tcomm_t comm;
    memset(rk, 0, sizeof rk);
    memset(&comm, 0, sizeof comm);
    comm.size = R;
    pthread_barrier_init(&comm.bar, NULL, R);
    for (uint32_t k = 0; k < R; k++) {
        rk[k].x = malloc(n * sizeof(float));
        if (!rk[k].x) {
            fprintf(stderr, "bench outer: site %s: no memory for %zu parameters\n", site, n);
            return 3;
        }
        for (size_t i = 0; i < n; i++) rk[k].x[i] = (float)((i * 2654435761u) % 1000) * 1e-3f;
        rk[k].config = config;
        rk[k].site = site;
        rk[k].run_dir = run_dir;
        rk[k].n = n;
        rk[k].rank = k;
        rk[k].ranks = R;
        rk[k].cr.c = &comm;
        rk[k].cr.rank = k;
        rk[k].step_ms = step_ms;
    }
    uint64_t rss0 = proc_kb("VmRSS");
    double t0 = now_s();
    for (uint32_t k = 0; k < R; k++) pthread_create(&th[k], NULL, rank_main, &rk[k]);
    for (uint32_t k = 0; k < R; k++) pthread_join(th[k], NULL);
    double wall = now_s() - t0;
    uint64_t hwm = proc_kb("VmHWM");
    /* One memcpy of the vector, in this process (the destination touched by a first copy). */
    double mc = NAN;
    float *tmp = malloc(n * sizeof(float));
    if (tmp) {
        for (int i = 0; i < 3; i++) {
            double c0 = now_s();
            memcpy(tmp, rk[0].x, n * sizeof(float));
            double c = now_s() - c0;
            if (i > 0 && !(c >= mc)) mc = c;
        }
        volatile float sink = tmp[n / 2];
        (void)sink;
        free(tmp);
    }
    int ok = 1;
    for (uint32_t k = 0; k < R; k++) ok &= rk[k].st == GT_OK;
    json_t *sum = rk[0].summary ? json_loads(rk[0].summary, 0, NULL) : NULL;
    double rounds = sum ? jnum(sum, "rounds_applied") : NAN;
    double so = 0, ao = 0; /* the medians, of the slowest rank, as the library reports */
    uint64_t sn = 0, an = 0;
    for (uint32_t k = 0; k < R; k++) {
        double s1 = gt_cli_median(rk[k].out_s[0], rk[k].submits);
        double a1 = gt_cli_median(rk[k].out_s[1], rk[k].applies);
        if (s1 > so) so = s1;
        if (a1 > ao) ao = a1;
        sn = rk[k].submits;
        an = rk[k].applies;
    }
    json_t *o = json_object();
    json_object_set_new(o, "site", json_string(site));
    json_object_set_new(o, "ok", json_boolean(ok && sum));
    json_object_set_new(o, "params", json_integer((json_int_t)n));
    json_object_set_new(o, "ranks", json_integer((json_int_t)R));
    json_object_set_new(o, "rss_before", json_integer((json_int_t)rss0));
    json_object_set_new(o, "rss_peak", json_integer((json_int_t)hwm));
    json_object_set_new(o, "rss_bytes_per_param",
                        jreal(hwm > rss0 ? (double)(hwm - rss0) / (double)n : 0.0));
    json_object_set_new(o, "memcpy_s", jreal(mc));
    json_object_set_new(o, "submit_s_outside", jreal(sn ? so : NAN));
    json_object_set_new(o, "apply_s_outside", jreal(an ? ao : NAN));
    json_object_set_new(o, "wall_s", jreal(wall));
    json_object_set_new(o, "rounds", jreal(rounds));
    if (sum) json_object_set(o, "summary", sum);
    json_decref(sum);
    int rc = json_dump_file(o, out, JSON_COMPACT) == 0 && ok ? 0 : 4;
    json_decref(o);
    for (uint32_t k = 0; k < R; k++) {
        free(rk[k].x);
        free(rk[k].summary);
    }
    pthread_barrier_destroy(&comm.bar);
    return rc;
}

/* ---- the parent ---- */

/* N with an optional K, M or G suffix (powers of 1000); 0 if malformed. */
static size_t parse_count(const char *s)
{
    char *end = NULL;
    double v = strtod(s, &end);
    if (!end || end == s || !(v > 0)) return 0;
    if (*end == 'K' || *end == 'k')
        v *= 1e3, end++;
    else if (*end == 'M' || *end == 'm')
        v *= 1e6, end++;
    else if (*end == 'G' || *end == 'g')
        v *= 1e9, end++;
    return *end ? 0 : (size_t)llround(v);
}

static int parse_list(const char *s, size_t *v, int max, int counts)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    int n = 0;
    for (char *tok = strtok(buf, ","); tok && n < max; tok = strtok(NULL, ",")) {
        size_t x = counts ? parse_count(tok) : (size_t)strtoull(tok, NULL, 10);
        if (x == 0) return -1;
        v[n++] = x;
    }
    return n;
}

static uint64_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    uint64_t v = 0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "MemAvailable:", 13) == 0) v = strtoull(line + 13, NULL, 10) * 1024;
    if (f) fclose(f);
    return v;
}

static int write_config(const char *path, const char *dir, const char *etcd, uint32_t S, uint32_t R,
                        unsigned rounds, unsigned H, unsigned tau, const char *codec, double mbps,
                        unsigned lanes, int encrypted)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "bench outer: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(f,
            "# generated by geotrain bench outer --params\n"
            "run: {name: bench-scale, rounds: %u, log_every: 1000, checkpoint_every: 0}\n"
            "inner: {steps: %u}\n"
            "outer: {overlap_steps: %u, deadline_min_ms: 60000, deadline_max_ms: 120000}\n"
            "codec: {name: %s}\n"
            "wan: {transport: ucx, lanes: %u, connect_timeout_ms: 60000, peer_timeout_ms: 30000,\n"
            "      emulation: {enabled: true, bandwidth_mbps: %g}}\n"
            "membership: {endpoints: [\"%s\"], plain_http: true, lease_ttl_s: 10, "
            "heartbeat_ms: 500}\n"
            "security: {mode: %s}\n"
            "sites:\n",
            rounds, H, tau, codec, lanes, mbps, etcd, encrypted ? "encrypted" : "none");
    for (uint32_t s = 0; s < S; s++) {
        char name[8];
        snprintf(name, sizeof name, "%c", 'a' + s);
        fprintf(f, "  - {name: %s, address: \"127.0.0.1:0\", ranks: %u", name, R);
        if (encrypted) {
            gt_wan_keypair_t kp;
            char b64[GT_WAN_KEY_B64_LEN + 1], keys[PATH_MAX];
            snprintf(keys, sizeof keys, "%s/keys", dir);
            if (gt_wan_keypair_generate(&kp) != GT_OK ||
                gt_wan_keypair_save(&kp, keys, name) != GT_OK) {
                gt_wan_keypair_wipe(&kp);
                fclose(f);
                return -1;
            }
            gt_wan_key_to_base64(kp.public_key, b64);
            gt_wan_keypair_wipe(&kp);
            fprintf(f, ", public_key: \"%s\", secret_key: \"%s/%s.key\"", b64, keys, name);
        }
        fprintf(f, "}\n");
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* The --set overrides, one KEY=VALUE a line: passed to the sites in $GT_SET, which the library
 * applies over $GT_CONFIG (the generated file). */
static char g_sets[8192];

static void print_row(int json, size_t n, uint32_t R, json_t **site, uint32_t S, double mbps)
{
    /* mean and max over the sites of each figure */
    static const char *const keys[] = {"rss_bytes_per_param",
                                       "lib_bytes_per_param",
                                       "submit_s",
                                       "apply_s",
                                       "submit_s_mean",
                                       "apply_s_mean",
                                       "submit_s_outside",
                                       "apply_s_outside",
                                       "memcpy_s",
                                       "submit_memcpy",
                                       "apply_memcpy",
                                       "submit_call_max_s",
                                       "apply_call_max_s",
                                       "exchange_s",
                                       "link_s",
                                       "link_fraction",
                                       "passes",
                                       "outer_steps_early"};
    enum { NK = sizeof keys / sizeof keys[0] };
    double mean[NK], max[NK];
    for (int k = 0; k < NK; k++) mean[k] = 0, max[k] = NAN;
    uint32_t ok = 0;
    for (uint32_t s = 0; s < S; s++) {
        json_t *o = site[s];
        if (!o || !json_is_true(json_object_get(o, "ok"))) continue;
        json_t *sum = json_object_get(o, "summary");
        double rounds = jnum(o, "rounds"), mc = jnum(o, "memcpy_s");
        double sent = jnum(sum, "wan_bytes_sent");
        double link = S > 1 && mbps > 0 ? sent / rounds / (S - 1) * 8 / (mbps * 1e6) : NAN;
        double ex = jnum(sum, "exchange_s_median");
        double v[NK] = {jnum(o, "rss_bytes_per_param"),
                        jnum(sum, "outer_state_bytes_per_param"),
                        jnum(sum, "submit_s_median"),
                        jnum(sum, "apply_s_median"),
                        jnum(sum, "submit_s_per_round"),
                        jnum(sum, "apply_s_per_round"),
                        jnum(o, "submit_s_outside"),
                        jnum(o, "apply_s_outside"),
                        mc,
                        jnum(sum, "submit_s_median") / mc,
                        jnum(sum, "apply_s_median") / mc,
                        jnum(sum, "submit_s_max"),
                        jnum(sum, "apply_s_max"),
                        ex,
                        link,
                        link / ex,
                        jnum(sum, "param_passes_per_round"),
                        jnum(sum, "outer_steps_early") / rounds};
        for (int k = 0; k < NK; k++) {
            mean[k] += v[k];
            if (!(v[k] <= max[k])) max[k] = v[k];
        }
        ok++;
    }
    for (int k = 0; k < NK; k++) mean[k] = ok ? mean[k] / ok : NAN;
    if (json) {
        json_t *o = json_object();
        json_object_set_new(o, "mode", json_string("scale"));
        json_object_set_new(o, "params", json_integer((json_int_t)n));
        json_object_set_new(o, "ranks", json_integer((json_int_t)R));
        json_object_set_new(o, "sites", json_integer((json_int_t)S));
        json_object_set_new(o, "sites_ok", json_integer((json_int_t)ok));
        for (int k = 0; k < NK; k++) {
            char mk[64];
            json_object_set_new(o, keys[k], jreal(mean[k]));
            snprintf(mk, sizeof mk, "%s_max", keys[k]);
            if (strcmp(keys[k] + strlen(keys[k]) - 4, "_max") != 0 &&
                strcmp(keys[k] + strlen(keys[k]) - 6, "_max_s") != 0)
                json_object_set_new(o, mk, jreal(max[k]));
        }
        char *text = json_dumps(o, JSON_COMPACT);
        if (text) printf("%s\n", text);
        free(text);
        json_decref(o);
    } else {
        printf("N %zu ranks %u (%u of %u sites ok): host %.1f B/param (library %.1f), submit "
               "%.3f s (%.1fx memcpy), apply %.3f s (%.1fx memcpy), outside %.3f / %.3f s, "
               "memcpy %.4f s, exchange %.3f s vs link %.3f s (%.2f), passes %.2f, outer steps "
               "early %.2f\n",
               n, R, ok, S, mean[0], mean[1], mean[2], mean[9], mean[3], mean[10], mean[6], mean[7],
               mean[8], mean[13], mean[14], mean[15], mean[16], mean[17]);
    }
    fflush(stdout);
}

int gt_bench_outer_scale(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--scale-site") == 0) return site_main(argc, argv);
    static const struct option opts[] = {{"params", required_argument, NULL, 'n'},
                                         {"ranks", required_argument, NULL, 'r'},
                                         {"sites", required_argument, NULL, 'S'},
                                         {"rounds", required_argument, NULL, 'k'},
                                         {"inner-steps", required_argument, NULL, 'H'},
                                         {"overlap", required_argument, NULL, 'o'},
                                         {"step-ms", required_argument, NULL, 'm'},
                                         {"codec", required_argument, NULL, 'c'},
                                         {"link-mbps", required_argument, NULL, 'b'},
                                         {"lanes", required_argument, NULL, 'l'},
                                         {"security", required_argument, NULL, 'e'},
                                         {"set", required_argument, NULL, 's'},
                                         {"run-dir", required_argument, NULL, 'd'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    size_t ns[SCALE_MAX_N], rs[SCALE_MAX_N];
    int n_n = 0, n_r = 1, c, json = 0, encrypted = 1;
    rs[0] = 1;
    unsigned S = 2, rounds = 6, H = 20, tau = 5, lanes = 16;
    double step_ms = 50, mbps = 10000;
    const char *codec = "int8", *dir_opt = NULL;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'n':
            if ((n_n = parse_list(optarg, ns, SCALE_MAX_N, 1)) <= 0) {
                fprintf(stderr, "bench outer: --params takes N[,N...] (e.g. 10M,100M)\n");
                return 2;
            }
            break;
        case 'r':
            if ((n_r = parse_list(optarg, rs, SCALE_MAX_N, 0)) <= 0) {
                fprintf(stderr, "bench outer: --ranks takes R[,R...] in [1, %d]\n",
                        SCALE_MAX_RANKS);
                return 2;
            }
            for (int i = 0; i < n_r; i++)
                if (rs[i] > SCALE_MAX_RANKS) {
                    fprintf(stderr, "bench outer: --ranks: at most %d\n", SCALE_MAX_RANKS);
                    return 2;
                }
            break;
        case 'S':
            S = (unsigned)atoi(optarg);
            if (S < 1 || S > SCALE_MAX_SITES) {
                fprintf(stderr, "bench outer: --sites takes S in [1, %d]\n", SCALE_MAX_SITES);
                return 2;
            }
            break;
        case 'k': rounds = (unsigned)atoi(optarg); break;
        case 'H': H = (unsigned)atoi(optarg); break;
        case 'o': tau = (unsigned)atoi(optarg); break;
        case 'm': step_ms = atof(optarg); break;
        case 'c': codec = optarg; break;
        case 'b': mbps = atof(optarg); break;
        case 'l': lanes = (unsigned)atoi(optarg); break;
        case 'e':
            if (strcmp(optarg, "encrypted") && strcmp(optarg, "none")) {
                fprintf(stderr, "bench outer: --security takes encrypted or none\n");
                return 2;
            }
            encrypted = strcmp(optarg, "encrypted") == 0;
            break;
        case 's':
            if (!strchr(optarg, '=') || strchr(optarg, '\n')) {
                fprintf(stderr, "bench outer: --set takes KEY=VALUE\n");
                return 2;
            }
            strncat(g_sets, optarg, sizeof g_sets - strlen(g_sets) - 2);
            strcat(g_sets, "\n");
            break;
        case 'd': dir_opt = optarg; break;
        case 'j': json = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (n_n == 0 || rounds < 2 || H < 2 || tau >= H || !(step_ms >= 0)) {
        if (n_n == 0)
            fprintf(stderr, "bench outer: --params N is required here\n");
        else
            fprintf(stderr, "bench outer: needs rounds >= 2, H >= 2, TAU < H, MS >= 0\n");
        return 2;
    }
    char self[PATH_MAX], dir[PATH_MAX];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0) return 1;
    self[sl] = '\0';
    if (dir_opt) {
        snprintf(dir, sizeof dir, "%s", dir_opt);
    } else {
        char stamp[32];
        time_t t = time(NULL);
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime(&t));
        snprintf(dir, sizeof dir, "runs/bench-scale-%s", stamp);
    }
    if (gt_mkdirs(dir) != GT_OK) {
        fprintf(stderr, "bench outer: cannot make %s\n", dir);
        return 1;
    }
    char etcd_dir[PATH_MAX + 16];
    snprintf(etcd_dir, sizeof etcd_dir, "%s/etcd", dir);
    gt_etcd_local_t etcd;
    memset(&etcd, 0, sizeof etcd);
    if (gt_etcd_local_start(etcd_dir, 30000, &etcd) != GT_OK) {
        fprintf(stderr, "bench outer: cannot start etcd (etcd-server) in %s\n", etcd_dir);
        return 1;
    }
    if (g_sets[0]) setenv("GT_SET", g_sets, 1);
    char tau_s[32];
    snprintf(tau_s, sizeof tau_s, "%u", tau);
    setenv("GT_SCALE_TAU", tau_s, 1);
    fprintf(stderr,
            "bench outer: %u sites, %u rounds of H = %u (tau = %u), %s, %s UCX, link %g Mbit/s, "
            "%u lanes, %g ms a step; run directories in %s\n",
            S, rounds, H, tau, codec, encrypted ? "encrypted" : "plain", mbps, lanes, step_ms, dir);
    double per_param = 70; /* host bytes a site needs per parameter, beside its vectors */
    int rc = 0;
    for (int ri = 0; ri < n_r && rc == 0; ri++) {
        uint32_t R = (uint32_t)rs[ri];
        for (int ni = 0; ni < n_n; ni++) {
            size_t n = ns[ni];
            double need = (double)S * (double)n * (per_param + 4.0 * R) * 1.1;
            uint64_t avail = mem_available();
            if (need > 0.8 * (double)avail) { /* the rest for whatever else runs here */
                fprintf(stderr,
                        "bench outer: stops before N = %zu with %u ranks: %u sites need about "
                        "%.1f GiB (%.0f B/param each, the vectors included), more than 80%% of "
                        "the %.1f GiB available\n",
                        n, R, S, need / 1073741824.0, per_param + 4.0 * R, avail / 1073741824.0);
                if (json)
                    printf("{\"mode\":\"scale-stop\",\"params\":%zu,\"ranks\":%u,"
                           "\"need_bytes\":%.0f,\"available_bytes\":%llu}\n",
                           n, R, need, (unsigned long long)avail);
                break;
            }
            char run[PATH_MAX + 64], config[PATH_MAX + 96];
            snprintf(run, sizeof run, "%s/n%zu-r%u", dir, n, R);
            snprintf(config, sizeof config, "%s/sites.yaml", run);
            if (gt_mkdirs(run) != GT_OK || write_config(config, run, etcd.url, S, R, rounds, H, tau,
                                                        codec, mbps, lanes, encrypted) != 0) {
                rc = 1;
                break;
            }
            fprintf(stderr, "bench outer: N = %zu, %u ranks ...\n", n, R);
            pid_t pid[SCALE_MAX_SITES];
            char out[SCALE_MAX_SITES][PATH_MAX + 128];
            for (uint32_t s = 0; s < S; s++) {
                char site[8], nb[32], rb[16], mb[32], log[PATH_MAX + 128];
                snprintf(site, sizeof site, "%c", 'a' + s);
                snprintf(nb, sizeof nb, "%zu", n);
                snprintf(rb, sizeof rb, "%u", R);
                snprintf(mb, sizeof mb, "%g", step_ms);
                snprintf(out[s], sizeof out[s], "%s/%s.result.json", run, site);
                snprintf(log, sizeof log, "%s/%s.log", run, site);
                pid[s] = fork();
                if (pid[s] == 0) {
                    if (!freopen(log, "w", stderr)) _exit(126);
                    execl(self, self, "bench", "outer", "--scale-site", config, site, run, nb, rb,
                          mb, out[s], (char *)NULL);
                    _exit(127);
                }
            }
            json_t *res[SCALE_MAX_SITES] = {NULL};
            for (uint32_t s = 0; s < S; s++) {
                int status = 0;
                if (pid[s] > 0) waitpid(pid[s], &status, 0);
                res[s] = json_load_file(out[s], 0, NULL);
                if (pid[s] <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || !res[s]) {
                    fprintf(stderr, "bench outer: site %c of N = %zu failed (see %s/%c.log)\n",
                            'a' + s, n, run, 'a' + s);
                    rc = 1;
                }
            }
            print_row(json, n, R, res, S, mbps);
            for (uint32_t s = 0; s < S; s++) {
                double b = res[s] ? jnum(res[s], "rss_bytes_per_param") : NAN;
                if (isfinite(b) && b > 0 && (s == 0 || b > per_param)) per_param = b;
                json_decref(res[s]);
            }
        }
    }
    gt_etcd_local_stop(&etcd);
    return rc;
}
