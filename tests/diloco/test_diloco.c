/* test_diloco.c — the C API of diloco/ against an independent reference, with real processes,
 * a real etcd and the real WAN stack on loopback.
 *
 * Each site is this program run as `test_diloco site ...`: a linear regression of its own
 * (N weights, plain SGD on synthetic data drawn from the site's and the step's seed) handed to
 * gt_diloco as a flat vector, with gt_diloco_step after every step. The parent starts etcd,
 * runs the sites and then recomputes the whole run in memory, with no library code: every
 * site's inner steps, Δ = θ_a − θ_s, the weighted mean as the owners compute it (in double, in
 * site order), the outer Nesterov step written out from its formula, the overlap (apply at
 * r·H + H + τ) and the rebase θ_s ← θ_a + (θ_s − θ_s at send). With the lossless fp32 codec
 * the anchor each site logged after every round must equal the reference bit for bit — the
 * outer step's bytes are pinned down, not just their agreement across sites. Site b starts
 * from different initial weights, so the reference also checks that every site adopts the
 * first site's initial vector. Then: a site whose vector has one float more makes both sites
 * fail at start with a message naming both counts (not a hang), and an unknown site name is
 * refused with the list of sites.
 */
#include "gt_test.h"
#include "gt_diloco.h"
#include "gt_faults.h"
#include "gt_outer.h"
#include "gt_wan.h"
#include "etcd_local.h"

#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define N      129 /* weights: 128 features and a bias */
#define BATCH  8
#define H      8
#define TAU    2
#define ROUNDS 8
#define LR     0.03f

/* ---- the model: y = w·x + b, squared loss, SGD ---- */

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static float unit(uint64_t *s) /* in [-1, 1) */
{
    *s = mix(*s);
    return (float)((double)(*s >> 40) / (double)(1ull << 23) - 1.0);
}

/* The true weights every site's data comes from. */
static float w_true(size_t i)
{
    uint64_t s = 1000 + i;
    return unit(&s);
}

/* One SGD step of site `site` at step `step` (its batch depends on both only). Returns the
 * batch's mean squared error before the step. */
static float sgd_step(float *w, uint32_t site, uint64_t step)
{
    static float g[N];
    memset(g, 0, sizeof g);
    double loss = 0;
    uint64_t seed = mix(((uint64_t)site << 40) ^ step);
    for (int b = 0; b < BATCH; b++) {
        float x[N], y = w_true(N - 1), p = w[N - 1];
        x[N - 1] = 1.0f;
        for (size_t i = 0; i + 1 < N; i++) {
            x[i] = unit(&seed);
            y += w_true(i) * x[i];
            p += w[i] * x[i];
        }
        y += 0.01f * unit(&seed);
        float e = p - y;
        loss += (double)e * e;
        for (size_t i = 0; i < N; i++) g[i] += 2.0f * e * x[i] / BATCH;
    }
    for (size_t i = 0; i < N; i++) w[i] -= LR * g[i];
    return (float)(loss / BATCH);
}

static void init_weights(float *w, uint32_t site)
{
    uint64_t s = 77 + site; /* differs per site: the library must make them agree */
    for (size_t i = 0; i < N; i++) w[i] = 0.1f * unit(&s);
}

/* ---- a site: this program as a child ---- */

static int run_site(const char *config, const char *site, const char *run_dir, size_t n)
{
    float *w = calloc(n, sizeof *w);
    uint32_t index = (uint32_t)(site[0] - 'a'); /* a, b, c: each its own data */
    init_weights(w, index);
    gt_diloco_params_t p = GT_DILOCO_PARAMS_INIT;
    p.config_path = config;
    p.site = site;
    p.run_dir = run_dir;
    const char *base = strrchr(run_dir, '/');
    p.run_id = base ? base + 1 : run_dir; /* each run of the test its own name in etcd */
    p.params = w;
    p.n_params = n;
    p.env = 0;
    const char *slow = getenv("GT_TEST_SLOW_B"); /* site b's steps this many times longer */
    gt_diloco_t *d = NULL;
    gt_status_t st = gt_diloco_create(&p, &d);
    if (st == GT_OK) { /* env = 0: the faults the test asks for are handed in */
        gt_faults_t faults;
        gt_faults_init(&faults);
        st = gt_faults_from_env(&faults); /* GT_SLOW_WINDOWS (test_slow_window) */
        if (slow && index == 1) faults.slow = atof(slow);
        if (st == GT_OK) st = gt_diloco_set_faults(d, &faults);
    }
    if (st != GT_OK) {
        fprintf(stderr, "site %s: create failed: %s: %s\n", site, gt_status_str(st),
                gt_diloco_error_message());
        free(w);
        return 3;
    }
    gt_diloco_status_t s;
    /* The run's step counter from the library: with outer.catch_up it jumps to a round's end
     * when the round ends early (without it, it is the loop's k). */
    /* GT_TEST_TRACE_STEPS: each step as the caller sees it ("at STEP"), and each step it
     * trained ("trained ROUND"), for test_catch_up_checkpoint */
    int trace = getenv("GT_TEST_TRACE_STEPS") != NULL;
    for (gt_diloco_status(d, &s); s.step < s.total_steps && st == GT_OK; gt_diloco_status(d, &s)) {
        float loss = sgd_step(w, index, s.step);
        if (trace) fprintf(stderr, "trained %llu\n", (unsigned long long)(s.step / H));
        st = gt_diloco_step(d, BATCH, loss);
        gt_diloco_status(d, &s);
        if (trace) fprintf(stderr, "at %llu\n", (unsigned long long)s.step);
    }
    gt_diloco_status(d, &s);
    fprintf(stderr, "site %s: %llu steps, %llu rounds, %.2f passes per round\n", site,
            (unsigned long long)s.step, (unsigned long long)s.rounds_applied,
            s.rounds_applied ? s.param_passes / (double)s.rounds_applied : 0.0);
    gt_diloco_close(d, st);
    free(w);
    return st == GT_OK ? 0 : 4;
}

/* ---- the reference: the same run, in memory ---- */

static void reference(uint64_t hashes[ROUNDS])
{
    static float th[2][N], snap[2][N], a[N], m[N], g[N];
    init_weights(th[0], 0);
    memcpy(th[1], th[0], sizeof th[0]); /* every site starts from site a's vector */
    memcpy(a, th[0], sizeof a);
    memset(m, 0, sizeof m);
    const float lr = 0.7f, mu = 0.9f; /* outer.lr, outer.momentum */
    int64_t pending = -1;
    for (uint64_t step = 1; step <= (uint64_t)ROUNDS * H; step++) {
        for (int s = 0; s < 2; s++) (void)sgd_step(th[s], (uint32_t)s, step - 1);
        int apply = 0, final = step == (uint64_t)ROUNDS * H;
        if (step % H == 0) {
            /* submit round r: Δ_s = θ_a − θ_s; the owners' weighted mean, site by site */
            for (int s = 0; s < 2; s++) memcpy(snap[s], th[s], sizeof th[s]);
            for (size_t i = 0; i < N; i++) {
                double acc = 0, w = (double)(H * BATCH);
                for (int s = 0; s < 2; s++) acc += w * 1.0 * (double)(a[i] - th[s][i]);
                g[i] = (float)(acc / (2 * w));
            }
            pending = (int64_t)(step / H - 1);
            apply = TAU == 0 || final;
        } else if (pending >= 0 && step == ((uint64_t)pending + 1) * H + TAU) {
            apply = 1;
        }
        if (!apply) continue;
        for (size_t i = 0; i < N; i++) { /* m ← μm + g ; θ_a ← θ_a − η(g + μm) */
            float mi = mu * m[i] + g[i];
            m[i] = mi;
            float upd = g[i] + mu * mi;
            a[i] = a[i] - lr * upd;
        }
        for (int s = 0; s < 2; s++)
            for (size_t i = 0; i < N; i++) th[s][i] = final ? a[i] : a[i] + (th[s][i] - snap[s][i]);
        hashes[pending] = gt_outer_hash(a, N);
        pending = -1;
    }
}

/* ---- the parent ---- */

static const char *g_self;

static pid_t spawn(const char *config, const char *site, const char *run_dir, size_t n,
                   const char *log)
{
    char nbuf[32];
    snprintf(nbuf, sizeof nbuf, "%zu", n);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(log, "w", stderr)) _exit(126);
        execl(g_self, g_self, "site", config, site, run_dir, nbuf, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static int wait_exit(pid_t pid)
{
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static char *slurp(const char *path)
{
    char *out = NULL;
    FILE *f = fopen(path, "r");
    if (!f) return strdup("");
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    out = calloc((size_t)len + 1, 1);
    if (fread(out, 1, (size_t)len, f) != (size_t)len) out[0] = '\0';
    fclose(f);
    return out;
}

/* The two sites' config: `ROUNDS` rounds of h steps with overlap tau, steps of step_ms;
 * extra_run / extra_outer are appended to the run: and outer: maps (", key: value"). */
static void write_config_with(const char *path, const char *endpoint, const char *extra_run,
                              const char *extra_outer, int h, int tau, int step_ms)
{
    char text[2048];
    snprintf(text, sizeof text,
             "run: {name: test-diloco, rounds: %d, log_every: 3%s}\n"
             "inner: {steps: %d, emulated_step_ms: %d}\n"
             "outer: {overlap_steps: %d, lr: 0.7, momentum: 0.9, clip_k: 0, deadline_min_ms: 5000,"
             " deadline_max_ms: 20000%s}\n"
             "codec: {name: fp32, error_feedback: false, block_size: 16}\n"
             "wan: {transport: ucx, lanes: 2, connect_timeout_ms: 20000, peer_timeout_ms: 5000}\n"
             "membership: {endpoints: [\"%s\"], plain_http: true, lease_ttl_s: 3, "
             "heartbeat_ms: 500}\n"
             "security: {mode: none}\n"
             "sites:\n  - {name: a, address: \"127.0.0.1:0\"}\n"
             "  - {name: b, address: \"127.0.0.1:0\"}\n",
             ROUNDS, extra_run, h, step_ms, tau, extra_outer, endpoint);
    CHECK_EQ_INT(gt_test_write_file(path, text), 0);
}

static void write_config(const char *path, const char *endpoint, const char *extra_outer,
                         int step_ms)
{
    write_config_with(path, endpoint, "", extra_outer, H, TAU, step_ms);
}

/* The run `name` (its own run id) against the reference; at least min_early of its rounds had
 * their outer step run early, on the encoder thread as soon as the result was whole
 * (summary.json outer_steps_early), at each site. */
static void test_against_reference(const char *tmp, const char *config, const char *name,
                                   int min_early)
{
    char run[1024], log[2][1100];
    snprintf(run, sizeof run, "%s/%s", tmp, name);
    pid_t pid[2];
    for (int s = 0; s < 2; s++) {
        snprintf(log[s], sizeof log[s], "%s/%s-%c.log", tmp, name, 'a' + s);
        pid[s] = spawn(config, s ? "b" : "a", run, N, log[s]);
    }
    for (int s = 0; s < 2; s++) {
        int rc = wait_exit(pid[s]);
        char *text = slurp(log[s]);
        CHECK_MSG(rc == 0, "site %c exited %d:\n%s", 'a' + s, rc, text);
        free(text);
    }
    uint64_t want[ROUNDS];
    reference(want);
    for (int s = 0; s < 2; s++) {
        char path[1200], line[256];
        snprintf(path, sizeof path, "%s/%c/anchors.jsonl", run, 'a' + s);
        FILE *f = fopen(path, "r");
        CHECK_MSG(f != NULL, "no %s", path);
        int r = 0;
        while (f && fgets(line, sizeof line, f) && r < ROUNDS) {
            char hex[24];
            snprintf(hex, sizeof hex, "%016llx", (unsigned long long)want[r]);
            CHECK_MSG(strstr(line, hex) != NULL, "site %c round %d: %s (reference %s)", 'a' + s, r,
                      line, hex);
            r++;
        }
        if (f) fclose(f);
        CHECK_EQ_INT(r, ROUNDS);
        snprintf(path, sizeof path, "%s/%c/summary.json", run, 'a' + s);
        json_t *sum = json_load_file(path, 0, NULL);
        CHECK_MSG(sum != NULL, "no %s", path);
        if (!sum) continue;
        CHECK_STR_CONTAINS(json_string_value(json_object_get(sum, "status")), "finished");
        CHECK_EQ_INT(json_integer_value(json_object_get(sum, "rounds_applied")), ROUNDS);
        CHECK_EQ_INT(json_integer_value(json_object_get(sum, "tokens")), ROUNDS * H * BATCH);
        json_t *c = json_object_get(sum, "contributions");
        /* each site owns one of the two chunks of each of 2 lanes: 2 x 2 contributions a round */
        CHECK_EQ_INT(json_integer_value(json_object_get(c, "on_time")), ROUNDS * 2 * 2);
        CHECK_EQ_INT(json_integer_value(json_object_get(c, "late")), 0);
        CHECK_EQ_INT(json_integer_value(json_object_get(c, "dropped")), 0);
        CHECK(json_integer_value(json_object_get(sum, "hash_checks")) >= ROUNDS - 1);
        CHECK_EQ_INT(json_integer_value(json_object_get(sum, "hash_mismatches")), 0);
        double passes = json_real_value(json_object_get(sum, "param_passes_per_round"));
        fprintf(stderr, "site %c: param_passes_per_round %.2f\n", 'a' + s, passes);
        CHECK_MSG(passes > 0 && passes <= 3.0, "%.2f passes per round", passes);
        int64_t early = json_integer_value(json_object_get(sum, "outer_steps_early"));
        fprintf(stderr, "site %c: %lld of %d outer steps early\n", 'a' + s, (long long)early,
                ROUNDS);
        CHECK_MSG(early >= min_early && early < ROUNDS,
                  "%s: %lld outer steps early, want %d or more", name, (long long)early, min_early);
        double first = 0, last = json_real_value(json_object_get(sum, "final_loss"));
        snprintf(path, sizeof path, "%s/%c/metrics.jsonl", run, 'a' + s);
        FILE *mf = fopen(path, "r");
        if (mf && fgets(line, sizeof line, mf)) {
            json_t *j = json_loads(line, 0, NULL);
            first = json_real_value(json_object_get(j, "loss"));
            json_decref(j);
        }
        if (mf) fclose(mf);
        fprintf(stderr, "site %c: loss %.4f -> %.4f\n", 'a' + s, first, last);
        CHECK_MSG(last < 0.5 * first, "loss %.4f -> %.4f", first, last);
        json_decref(sum);
    }
}

/* A site whose model has one parameter more: both fail at start, saying so. */
static void test_count_mismatch(const char *tmp, const char *config)
{
    char run[1024], log[2][1100];
    snprintf(run, sizeof run, "%s/mismatch", tmp);
    pid_t pid[2];
    uint64_t t0 = gt_time_ns();
    for (int s = 0; s < 2; s++) {
        snprintf(log[s], sizeof log[s], "%s/mismatch-%c.log", tmp, 'a' + s);
        pid[s] = spawn(config, s ? "b" : "a", run, N + (size_t)s, log[s]);
    }
    for (int s = 0; s < 2; s++) {
        int rc = wait_exit(pid[s]);
        char *text = slurp(log[s]);
        CHECK_MSG(rc == 3, "site %c exited %d (want a failed create):\n%s", 'a' + s, rc, text);
        CHECK_STR_CONTAINS(text, "parameters but site");
        CHECK_STR_CONTAINS(text, "130");
        free(text);
    }
    double took = (gt_time_ns() - t0) * 1e-9;
    fprintf(stderr, "parameter-count mismatch refused in %.1f s\n", took);
    CHECK_MSG(took < 15.0, "refusing a mismatch took %.1f s", took);
}

static void test_unknown_site(const char *tmp, const char *config)
{
    char log[1100], run[1024];
    snprintf(log, sizeof log, "%s/unknown.log", tmp);
    snprintf(run, sizeof run, "%s/unknown", tmp);
    int rc = wait_exit(spawn(config, "nowhere", run, N, log));
    char *text = slurp(log);
    CHECK_EQ_INT(rc, 3);
    CHECK_STR_CONTAINS(text, "'nowhere' is not a site of the config (its sites: a, b)");
    free(text);
}

/* One run of a and b with b SLOW times slower (steps paced to STEP_MS); its summaries. */
#define STEP_MS 20
#define SLOW    "4"
static void run_slow(const char *tmp, const char *name, const char *config, json_t *sum[2])
{
    char run[1024], log[2][1100], path[1200];
    snprintf(run, sizeof run, "%s/%s", tmp, name);
    setenv("GT_TEST_SLOW_B", SLOW, 1);
    pid_t pid[2];
    for (int s = 0; s < 2; s++) {
        snprintf(log[s], sizeof log[s], "%s/%s-%c.log", tmp, name, 'a' + s);
        pid[s] = spawn(config, s ? "b" : "a", run, N, log[s]);
    }
    unsetenv("GT_TEST_SLOW_B");
    for (int s = 0; s < 2; s++) {
        int rc = wait_exit(pid[s]);
        char *text = slurp(log[s]);
        CHECK_MSG(rc == 0, "%s: site %c exited %d:\n%s", name, 'a' + s, rc, text);
        free(text);
        snprintf(path, sizeof path, "%s/%c/summary.json", run, 'a' + s);
        sum[s] = json_load_file(path, 0, NULL);
        CHECK_MSG(sum[s] != NULL, "no %s", path);
    }
    /* every round's anchor the same at both sites */
    char *text[2];
    for (int s = 0; s < 2; s++) {
        snprintf(path, sizeof path, "%s/%c/anchors.jsonl", run, 'a' + s);
        text[s] = slurp(path);
    }
    CHECK_MSG(strcmp(text[0], text[1]) == 0 && text[0][0], "%s: anchors differ:\n%s\n--\n%s", name,
              text[0], text[1]);
    int lines = 0;
    for (const char *c = text[0]; *c; c++) lines += *c == '\n';
    CHECK_EQ_INT(lines, ROUNDS);
    free(text[0]);
    free(text[1]);
}

static double num(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : -1.0;
}

/* outer.catch_up: b, 4x slower, ends each round once a's contribution to it has arrived, so a
 * does not wait for b's whole round. The same run without it, side by side: a's wait. */
static void test_catch_up(const char *tmp, const char *endpoint)
{
    char cfg[2][1100];
    snprintf(cfg[0], sizeof cfg[0], "%s/fixed.yaml", tmp);
    snprintf(cfg[1], sizeof cfg[1], "%s/catch_up.yaml", tmp);
    write_config(cfg[0], endpoint, "", STEP_MS);
    write_config(cfg[1], endpoint, ", catch_up: true", STEP_MS);
    json_t *fixed[2] = {NULL, NULL}, *cu[2] = {NULL, NULL};
    run_slow(tmp, "fixed", cfg[0], fixed);
    run_slow(tmp, "catchup", cfg[1], cu);
    if (!fixed[0] || !fixed[1] || !cu[0] || !cu[1]) goto out;
    const double total = (double)ROUNDS * H;
    for (int s = 0; s < 2; s++) {
        /* every step of the run is trained or skipped, tokens are the steps trained */
        CHECK_EQ_INT((int64_t)num(cu[s], "steps"), (int64_t)total);
        CHECK_EQ_INT((int64_t)num(cu[s], "rounds_applied"), ROUNDS);
        CHECK_EQ_INT((int64_t)(num(cu[s], "steps_trained") + num(cu[s], "steps_skipped")),
                     (int64_t)total);
        CHECK_EQ_INT((int64_t)num(cu[s], "tokens"), (int64_t)num(cu[s], "steps_trained") * BATCH);
        CHECK_EQ_INT((int64_t)num(fixed[s], "steps_skipped"), 0);
        CHECK_EQ_INT((int64_t)num(fixed[s], "steps_trained"), (int64_t)total);
        CHECK_EQ_INT((int64_t)num(cu[s], "hash_mismatches"), 0);
    }
    double skipped = num(cu[1], "steps_skipped"), cut = num(cu[1], "rounds_cut");
    double wait_fixed = num(fixed[0], "wait_s"), wait_cu = num(cu[0], "wait_s");
    fprintf(stderr,
            "catch-up: b (%sx slower) cut %.0f of %d rounds, skipped %.0f of %.0f steps; a waited "
            "%.2f s (without catch-up %.2f s), a's utilization %.2f (without %.2f); final loss a "
            "%.4f / %.4f\n",
            SLOW, cut, ROUNDS, skipped, total, wait_cu, wait_fixed,
            num(cu[0], "compute_utilization"), num(fixed[0], "compute_utilization"),
            num(cu[0], "final_loss"), num(fixed[0], "final_loss"));
    /* b trains about a quarter of each round: most rounds end early */
    CHECK_MSG(cut >= ROUNDS / 2 && skipped >= total / 4, "b cut %.0f rounds, skipped %.0f steps",
              cut, skipped);
    CHECK_MSG(num(cu[0], "rounds_cut") < cut, "a, the fast site, cut %.0f rounds",
              num(cu[0], "rounds_cut"));
    CHECK_MSG(wait_cu < 0.5 * wait_fixed, "a waited %.2f s with catch-up, %.2f s without", wait_cu,
              wait_fixed);
    /* the loss still falls as far (b's shorter rounds weigh less; a trains every step) */
    CHECK_MSG(num(cu[0], "final_loss") >= 0 &&
                  num(cu[0], "final_loss") < 2.0 * num(fixed[0], "final_loss") + 1e-3,
              "final loss %.4f with catch-up, %.4f without", num(cu[0], "final_loss"),
              num(fixed[0], "final_loss"));
out:
    for (int s = 0; s < 2; s++) {
        json_decref(fixed[s]);
        json_decref(cu[s]);
    }
}

/* outer.catch_up with run.checkpoint_every: a site behind cuts a checkpoint round in two — to
 * the checkpoint step r·H + τ (where the caller saves), then to the round's end one step later —
 * so it reaches every checkpoint step and trains about as little of those rounds as of the
 * others. Before, it trained every step up to r·H + τ first: at 8x slower, τ steps at 8x. */
static void test_catch_up_checkpoint(const char *tmp, const char *endpoint)
{
    enum { CH = 8, CTAU = 4, CK = 2 };
    char cfg[1100], extra[64], run[1100], log[2][1100], path[1200];
    snprintf(cfg, sizeof cfg, "%s/ckpt.yaml", tmp);
    snprintf(extra, sizeof extra, ", checkpoint_every: %d", CK);
    write_config_with(cfg, endpoint, extra, ", catch_up: true", CH, CTAU, STEP_MS);
    snprintf(run, sizeof run, "%s/ckpt", tmp);
    setenv("GT_TEST_SLOW_B", SLOW, 1);
    setenv("GT_TEST_TRACE_STEPS", "1", 1);
    pid_t pid[2];
    for (int s = 0; s < 2; s++) {
        snprintf(log[s], sizeof log[s], "%s/ckpt-%c.log", tmp, 'a' + s);
        pid[s] = spawn(cfg, s ? "b" : "a", run, N, log[s]);
    }
    unsetenv("GT_TEST_SLOW_B");
    unsetenv("GT_TEST_TRACE_STEPS");
    char *out[2];
    for (int s = 0; s < 2; s++) {
        int rc = wait_exit(pid[s]);
        out[s] = slurp(log[s]);
        CHECK_MSG(rc == 0, "ckpt: site %c exited %d:\n%s", 'a' + s, rc, out[s]);
    }
    /* b, the slow one: every checkpoint step seen, and how many steps it trained per round */
    int seen[ROUNDS] = {0}, trained[ROUNDS] = {0};
    for (const char *c = out[1]; c && *c;) {
        unsigned long long v;
        if (sscanf(c, "at %llu", &v) == 1 && v >= CTAU && (v - CTAU) % CH == 0 &&
            (v - CTAU) / CH < ROUNDS)
            seen[(v - CTAU) / CH] = 1;
        else if (sscanf(c, "trained %llu", &v) == 1 && v < ROUNDS)
            trained[v]++;
        const char *nl = strchr(c, '\n');
        c = nl ? nl + 1 : NULL;
    }
    int in_ckpt = 0, n_ckpt = 0, in_other = 0, n_other = 0;
    for (int r = 1; r < ROUNDS - 1; r++) {
        if (r % CK == 0) {
            CHECK_MSG(seen[r], "b never stood at checkpoint step %d (round %d)", r * CH + CTAU, r);
            in_ckpt += trained[r];
            n_ckpt++;
        } else {
            in_other += trained[r];
            n_other++;
        }
    }
    snprintf(path, sizeof path, "%s/b/summary.json", run);
    json_t *sb = json_load_file(path, 0, NULL);
    fprintf(stderr,
            "catch-up with checkpoints: b (%sx slower) trained %.1f steps a checkpoint round, "
            "%.1f a other round (H %d, tau %d); cut %.0f rounds\n",
            SLOW, (double)in_ckpt / n_ckpt, (double)in_other / n_other, CH, CTAU,
            num(sb, "rounds_cut"));
    /* it trains up to one step more in a checkpoint round (the step after r·H + τ), not τ */
    CHECK_MSG((double)in_ckpt / n_ckpt < CTAU,
              "b trained %.1f steps a checkpoint round (tau %d): it trained up to the "
              "checkpoint step instead of skipping to it",
              (double)in_ckpt / n_ckpt, CTAU);
    CHECK_MSG(num(sb, "rounds_cut") >= ROUNDS / 2, "b cut %.0f rounds", num(sb, "rounds_cut"));
    json_decref(sb);
    free(out[0]);
    free(out[1]);
}

/* A site stopped (SIGSTOP) for 2 s — under its 3 s lease — in the middle of its steps: the stop
 * is a pause, not compute (paused_s), and nothing multiplies it. Before, a stop inside the
 * trainer's step was multiplied by the emulated slowdown (--slow 20: a 3 s stop slept a minute)
 * and a stop inside the emulated sleep counted as compute. */
static void test_pause(const char *tmp, const char *config)
{
    char run[1024], log[2][1100], path[1200];
    snprintf(run, sizeof run, "%s/pause", tmp);
    setenv("GT_TEST_SLOW_B", SLOW, 1);
    pid_t pid[2];
    for (int s = 0; s < 2; s++) {
        snprintf(log[s], sizeof log[s], "%s/pause-%c.log", tmp, 'a' + s);
        pid[s] = spawn(config, s ? "b" : "a", run, N, log[s]);
    }
    unsetenv("GT_TEST_SLOW_B");
    /* once b trains (its status says so), stop it for 2 s */
    snprintf(path, sizeof path, "%s/b/status.json", run);
    for (int i = 0; i < 400; i++) {
        json_t *st = json_load_file(path, 0, NULL);
        double step = num(st, "step");
        json_decref(st);
        if (step >= 4) break;
        usleep(25000);
    }
    kill(pid[1], SIGSTOP);
    usleep(2000000);
    kill(pid[1], SIGCONT);
    json_t *sum[2] = {NULL, NULL};
    for (int s = 0; s < 2; s++) {
        int rc = wait_exit(pid[s]);
        char *text = slurp(log[s]);
        CHECK_MSG(rc == 0, "pause: site %c exited %d:\n%s", 'a' + s, rc, text);
        free(text);
        snprintf(path, sizeof path, "%s/%c/summary.json", run, 'a' + s);
        sum[s] = json_load_file(path, 0, NULL);
    }
    double paused = num(sum[1], "paused_s"), compute = num(sum[1], "compute_s"),
           train = num(sum[1], "train_s");
    fprintf(stderr, "pause: b stopped 2 s: paused_s %.2f, compute %.2f s of %.2f s training\n",
            paused, compute, train);
    CHECK_MSG(paused >= 1.5 && paused <= 2.6, "b's paused_s %.2f after a 2 s SIGSTOP", paused);
    CHECK_MSG(compute >= 0 && compute <= train - 1.5,
              "b counted the stop as compute: %.2f s of %.2f s", compute, train);
    json_decref(sum[0]);
    json_decref(sum[1]);
}

/* The rounds each site logged in anchors.jsonl: hashes[site][round] (0: not applied). */
static void read_anchors(const char *run, int n_sites, uint64_t hashes[][16])
{
    char path[1200], line[512];
    for (int s = 0; s < n_sites; s++) {
        memset(hashes[s], 0, 16 * sizeof hashes[s][0]);
        snprintf(path, sizeof path, "%s/%c/anchors.jsonl", run, 'a' + s);
        FILE *f = fopen(path, "r");
        while (f && fgets(line, sizeof line, f)) {
            json_t *j = json_loads(line, 0, NULL);
            json_int_t r = json_integer_value(json_object_get(j, "round"));
            const char *h = json_string_value(json_object_get(j, "anchor_hash"));
            if (h && r >= 0 && r < 16) hashes[s][r] = strtoull(h, NULL, 16);
            json_decref(j);
        }
        if (f) fclose(f);
    }
}

/* A zombie stopped inside the step that submits (I1, the membership fence). Three sites, steps
 * of 200 ms (slept inside gt_diloco_step: inner.emulated_step_ms). b is stopped 50 ms into the
 * step that ends round 2, after that call's own check for a pause; a and c submit round 2,
 * close their chunks at the deadline with 2 of 3 (sent to b, still in their view), accuse b
 * and evict it, and close b's chunks again without it. b continues while etcd is paused (its
 * view thread and heartbeats cannot tell it of its removal), and must not submit round 2
 * or apply it: were it to, it would close its own chunks with all three contributions and
 * apply them with a's and c's results — an anchor for round 2 that nobody else has. The check:
 * every round has one anchor across the sites that applied it, b leaves (removed), a and c
 * finish. */
static void test_zombie_in_step(const char *tmp, gt_etcd_local_t *etcd)
{
    char run[1024], config[1100], log[3][1100], text[2048];
    snprintf(run, sizeof run, "%s/zombie", tmp);
    snprintf(config, sizeof config, "%s/zombie.yaml", tmp);
    snprintf(
        text, sizeof text,
        "run: {name: test-zombie, rounds: 6, log_every: 1}\n"
        "inner: {steps: 8, emulated_step_ms: 200}\n"
        "outer: {overlap_steps: 2, lr: 0.7, momentum: 0.9, clip_k: 0, deadline_min_ms: 300,"
        " deadline_max_ms: 1000}\n"
        "codec: {name: fp32, error_feedback: false, block_size: 16}\n"
        "wan: {transport: ucx, lanes: 2, connect_timeout_ms: 20000, peer_timeout_ms: 20000}\n"
        "membership: {endpoints: [\"%s\"], plain_http: true, lease_ttl_s: 3, heartbeat_ms: 500,"
        " evict_after_ms: 1500}\n"
        "security: {mode: none}\n"
        "sites:\n  - {name: a, address: \"127.0.0.1:0\"}\n"
        "  - {name: b, address: \"127.0.0.1:0\"}\n"
        "  - {name: c, address: \"127.0.0.1:0\"}\n",
        etcd->url);
    CHECK_EQ_INT(gt_test_write_file(config, text), 0);
    pid_t pid[3];
    for (int s = 0; s < 3; s++) {
        snprintf(log[s], sizeof log[s], "%s/zombie-%c.log", tmp, 'a' + s);
        char name[2] = {(char)('a' + s), 0};
        if (s == 1) setenv("GT_TEST_TRACE_STEPS", "1", 1); /* b says "at STEP" after each */
        pid[s] = spawn(config, name, run, N, log[s]);
        unsetenv("GT_TEST_TRACE_STEPS");
    }
    /* "at 3H - 1" once the call that made it returns: the next call sleeps 200 ms and then
     * submits round 2 */
    char want[32];
    snprintf(want, sizeof want, "\nat %d\n", 3 * H - 1);
    int seen = 0;
    for (int i = 0; i < 6000 && !seen; i++) {
        char *t = slurp(log[1]);
        seen = strstr(t, want) != NULL;
        free(t);
        if (!seen) usleep(5000);
    }
    CHECK_MSG(seen, "zombie: b never reached step %d", 3 * H - 1);
    usleep(50000);
    kill(pid[1], SIGSTOP);
    /* until a and c have moved to a view without b (evicted, or its lease run out) */
    char *before = slurp(log[0]);
    size_t from = strlen(before);
    free(before);
    int gone = 0;
    for (int i = 0; i < 1500 && !gone; i++) {
        char *t = slurp(log[0]);
        gone = strlen(t) > from && strstr(t + from, ", 2 live sites") != NULL;
        free(t);
        if (!gone) usleep(10000);
    }
    CHECK_MSG(gone, "zombie: a never moved to a view without b");
    /* b continues while etcd does not answer (as in a chaos run whose etcd member was killed
     * then): what its view thread and heartbeats would tell it comes only after its next
     * round has applied, so only a check that waits for etcd keeps it out */
    gt_etcd_local_pause(etcd, 1);
    kill(pid[1], SIGCONT);
    usleep(1500000);
    gt_etcd_local_pause(etcd, 0);
    int rc[3];
    for (int s = 0; s < 3; s++) rc[s] = wait_exit(pid[s]);
    char *blog = slurp(log[1]);
    for (int s = 0; s < 3; s += 2) {
        char *t = slurp(log[s]);
        CHECK_MSG(rc[s] == 0, "zombie: site %c exited %d:\n%s", 'a' + s, rc[s], t);
        free(t);
    }
    CHECK_MSG(rc[1] != 0, "zombie: b, stopped past its lease and evicted, finished:\n%s", blog);
    CHECK_MSG(strstr(blog, "before the submit of round 2") != NULL,
              "zombie: b did not check its membership before submitting round 2:\n%s", blog);
    uint64_t h[3][16];
    read_anchors(run, 3, h);
    int applied_b = 0;
    for (int r = 0; r < 6; r++) {
        CHECK_MSG(h[0][r] && h[0][r] == h[2][r], "zombie: round %d: a %016llx, c %016llx", r,
                  (unsigned long long)h[0][r], (unsigned long long)h[2][r]);
        if (h[1][r]) {
            applied_b = r;
            CHECK_MSG(h[1][r] == h[0][r],
                      "zombie: b applied round %d as %016llx, a and c as %016llx (I1)", r,
                      (unsigned long long)h[1][r], (unsigned long long)h[0][r]);
        }
    }
    fprintf(stderr,
            "zombie: b stopped inside the step that submits round 2 and evicted, continued "
            "while etcd was paused: its last applied round %d; a and c agree on rounds 0-5\n",
            applied_b);
    CHECK_MSG(applied_b < 2, "zombie: b applied round %d after its removal", applied_b);
    free(blog);
}

/* A chaos slowdown (GT_SLOW_WINDOWS, launch --chaos) lasts its rounds in wall time at the
 * site's usual speed, not its rounds of steps: b, 5x slower from round 2 for 2 rounds of
 * 20 ms steps (H 8: 0.32 s), sleeps about (1 - 1/5) x 0.32 = 0.26 s more. Counted in its own
 * steps, the window held 16 steps of 4 x 20 ms extra: 1.28 s. */
static void test_slow_window(const char *tmp, const char *config)
{
    char run[1024], log[2][1100], path[1200];
    snprintf(run, sizeof run, "%s/slowwin", tmp);
    pid_t pid[2];
    for (int s = 0; s < 2; s++) {
        snprintf(log[s], sizeof log[s], "%s/slowwin-%c.log", tmp, 'a' + s);
        if (s) setenv("GT_SLOW_WINDOWS", "5@2-4", 1);
        pid[s] = spawn(config, s ? "b" : "a", run, N, log[s]);
        unsetenv("GT_SLOW_WINDOWS");
    }
    json_t *sum = NULL;
    for (int s = 0; s < 2; s++) {
        int rc = wait_exit(pid[s]);
        char *text = slurp(log[s]);
        CHECK_MSG(rc == 0, "slow window: site %c exited %d:\n%s", 'a' + s, rc, text);
        free(text);
    }
    snprintf(path, sizeof path, "%s/b/summary.json", run);
    sum = json_load_file(path, 0, NULL);
    double slow = num(sum, "chaos_slow_s");
    fprintf(stderr,
            "slow window: b 5x slower for 2 rounds of 0.16 s: %.3f s slower (0.26 s "
            "expected; 1.28 s if the window were its own steps)\n",
            slow);
    CHECK_MSG(slow >= 0.12 && slow <= 0.6, "b's chaos_slow_s %.3f", slow);
    json_decref(sum);
}

int main(int argc, char **argv)
{
    g_self = argv[0];
    if (argc == 6 && strcmp(argv[1], "site") == 0)
        return run_site(argv[2], argv[3], argv[4], (size_t)strtoull(argv[5], NULL, 10));
    char *tmp = gt_test_tmpdir();
    char dir[1100], config[1100];
    snprintf(dir, sizeof dir, "%s/etcd", tmp);
    gt_etcd_local_t etcd;
    memset(&etcd, 0, sizeof etcd);
    if (gt_etcd_local_start(dir, 30000, &etcd) != GT_OK) {
        fprintf(stderr, "cannot start etcd\n");
        return 1;
    }
    snprintf(config, sizeof config, "%s/sites.yaml", tmp);
    write_config(config, etcd.url, "", 0);
    test_against_reference(tmp, config, "run", 0);
    /* Steps of 30 ms: the result is whole well inside the τ = 2 steps before the apply, so the
     * outer step runs on the encoder thread and the apply is the rebase alone; the anchors are
     * the reference's all the same (the last round's apply follows its submit at once). */
    char early_cfg[1100];
    snprintf(early_cfg, sizeof early_cfg, "%s/early.yaml", tmp);
    write_config(early_cfg, etcd.url, "", 30);
    test_against_reference(tmp, early_cfg, "early", ROUNDS / 2);
    test_count_mismatch(tmp, config);
    test_unknown_site(tmp, config);
    test_catch_up(tmp, etcd.url);
    test_catch_up_checkpoint(tmp, etcd.url);
    snprintf(config, sizeof config, "%s/fixed.yaml", tmp); /* test_catch_up's: steps of 20 ms */
    test_pause(tmp, config);
    test_slow_window(tmp, config);
    test_zombie_in_step(tmp, &etcd);
    gt_etcd_local_stop(&etcd);
    if (gt_test_failures == 0)
        gt_test_rmtree(tmp);
    else
        fprintf(stderr, "kept %s\n", tmp);
    free(tmp);
    return GT_TEST_DONE();
}
