/* linreg.c — a trainer of its own, built outside the tree against the installed geotrain
 * (pkg-config geotrain): a linear regression on synthetic data, trained across two sites with
 * the C API of gt_diloco.h. What a team with its own training loop writes.
 *
 *   linreg                      starts a local etcd and two sites (this program again), waits,
 *                               and checks the run: both finished, the loss fell, the anchors
 *                               of the two sites are identical after every round, every
 *                               contribution was aggregated
 *   linreg site CONFIG NAME DIR one site (GT_CONFIG / GT_SITE / GT_RUN_DIR also work, as
 *                               `geotrain launch CONFIG -- linreg` sets them)
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include "gt_diloco.h"
#include "etcd_local.h" /* cli/etcd_local.c, compiled in: the self-contained mode's etcd */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define D     64 /* features; the model has D weights and a bias */
#define BATCH 16

static float rnd(unsigned long long *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*s >> 40) / (double)(1ull << 23) - 1.0);
}

/* One SGD step on a batch from this site's stream; returns the batch's mean squared error. */
static float step(float *w, unsigned long long *seed)
{
    float g[D + 1] = {0};
    double loss = 0;
    for (int b = 0; b < BATCH; b++) {
        float x[D], y = 0.5f, p = w[D];
        for (int i = 0; i < D; i++) {
            x[i] = rnd(seed);
            y += (float)(i % 7 - 3) * 0.1f * x[i]; /* the true weights */
            p += w[i] * x[i];
        }
        float e = p - y;
        loss += (double)e * e;
        for (int i = 0; i < D; i++) g[i] += 2 * e * x[i] / BATCH;
        g[D] += 2 * e / BATCH;
    }
    for (int i = 0; i <= D; i++) w[i] -= 0.05f * g[i];
    return (float)(loss / BATCH);
}

static int site(const char *config, const char *name, const char *dir)
{
    float w[D + 1] = {0};
    gt_diloco_params_t p = GT_DILOCO_PARAMS_INIT; /* unset fields: GT_CONFIG, GT_SITE, ... */
    p.config_path = config;
    p.site = name;
    p.run_dir = dir;
    p.params = w;
    p.n_params = D + 1;
    gt_diloco_t *d = NULL;
    if (gt_diloco_create(&p, &d) != GT_OK) {
        fprintf(stderr, "linreg: %s\n", gt_diloco_error_message());
        return 1;
    }
    gt_diloco_status_t s;
    gt_diloco_status(d, &s);
    const char *me = name ? name : getenv("GT_SITE");
    unsigned long long seed = 12345 + s.first_step; /* each site its own data stream */
    for (const char *c = me; *c; c++) seed = seed * 31 + (unsigned char)*c;
    gt_status_t st = GT_OK;
    for (uint64_t k = s.first_step; k < s.total_steps && st == GT_OK; k++)
        st = gt_diloco_step(d, BATCH, step(w, &seed));
    gt_diloco_status(d, &s);
    printf("linreg: site %s: %llu steps, %llu rounds, last loss %.5f\n", me,
           (unsigned long long)s.step, (unsigned long long)s.rounds_applied, s.loss);
    gt_diloco_close(d, st);
    return st == GT_OK ? 0 : 1;
}

/* The anchor hashes of SITE/anchors.jsonl, one line each. */
static int anchors(const char *path, char hash[][40], int max)
{
    FILE *f = fopen(path, "r");
    char line[256];
    int n = 0;
    while (f && fgets(line, sizeof line, f) && n < max) {
        const char *h = strstr(line, "anchor_hash");
        snprintf(hash[n++], 40, "%.39s", h ? h : "");
    }
    if (f) fclose(f);
    return n;
}

/* A number field of a JSON file written with one field per line. */
static double field(const char *path, const char *key)
{
    char line[512], pat[64];
    double v = -1;
    snprintf(pat, sizeof pat, "\"%s\":", key);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, pat)) v = strtod(strstr(line, pat) + strlen(pat), NULL);
    if (f) fclose(f);
    return v;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "site") == 0) return site(argv[2], argv[3], argv[4]);
    if (argc == 1 && getenv("GT_SITE")) return site(NULL, NULL, NULL); /* under launch -- CMD */
    if (argc != 1) {
        fprintf(stderr, "usage: linreg | linreg site CONFIG NAME DIR\n");
        return 2;
    }
    char tmp[] = "/tmp/gt-linreg-XXXXXX", path[512], cfg[512];
    if (!mkdtemp(tmp)) return 1;
    snprintf(path, sizeof path, "%s/etcd", tmp);
    gt_etcd_local_t etcd;
    if (gt_etcd_local_start(path, 30000, &etcd) != GT_OK) return 1;
    snprintf(cfg, sizeof cfg, "%s/sites.yaml", tmp);
    FILE *f = fopen(cfg, "w");
    fprintf(f,
            "run: {name: linreg, rounds: 8, log_every: 10}\ninner: {steps: 20}\n"
            "outer: {overlap_steps: 5}\ncodec: {name: int8, block_size: 16}\n"
            "wan: {lanes: 1}\nmembership: {endpoints: [\"%s\"], plain_http: true, lease_ttl_s: 3, "
            "heartbeat_ms: 500}\n"
            "security: {mode: none}\nsites:\n  - {name: east, address: \"127.0.0.1:0\"}\n"
            "  - {name: west, address: \"127.0.0.1:0\"}\n",
            etcd.url);
    fclose(f);
    snprintf(path, sizeof path, "%s/run", tmp);
    const char *names[2] = {"east", "west"};
    pid_t pid[2];
    for (int i = 0; i < 2; i++)
        if ((pid[i] = fork()) == 0) {
            execl(argv[0], argv[0], "site", cfg, names[i], path, (char *)NULL);
            _exit(127);
        }
    int ok = 1;
    for (int i = 0; i < 2; i++) {
        int status = 0;
        waitpid(pid[i], &status, 0);
        ok &= WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    gt_etcd_local_stop(&etcd);
    /* Invariant I1: the same anchor at both sites after every round. */
    char h[2][16][40], file[600];
    int n[2];
    for (int i = 0; i < 2; i++) {
        snprintf(file, sizeof file, "%s/%s/anchors.jsonl", path, names[i]);
        n[i] = anchors(file, h[i], 16);
    }
    ok &= n[0] == 8 && n[1] == 8;
    for (int r = 0; r < n[0] && r < n[1]; r++) ok &= strcmp(h[0][r], h[1][r]) == 0;
    printf("linreg: %d and %d rounds logged, anchors %s\n", n[0], n[1],
           ok ? "identical" : "DIFFER");
    /* The loss fell (final_loss against the first metrics line); every contribution (8
     * rounds x 2 chunks x 2 sites) aggregated on time. */
    double on_time = 0;
    for (int i = 0; i < 2; i++) {
        char line[512] = "";
        double first = 0;
        snprintf(file, sizeof file, "%s/%s/metrics.jsonl", path, names[i]);
        FILE *m = fopen(file, "r");
        if (m && fgets(line, sizeof line, m) && strstr(line, "\"loss\":"))
            first = strtod(strstr(line, "\"loss\":") + 7, NULL);
        if (m) fclose(m);
        snprintf(file, sizeof file, "%s/%s/summary.json", path, names[i]);
        double last = field(file, "final_loss");
        on_time += field(file, "on_time");
        ok &= field(file, "dropped") == 0 && field(file, "hash_mismatches") == 0;
        printf("linreg: site %s loss %.4f -> %.5f\n", names[i], first, last);
        ok &= last >= 0 && last < 0.05 * first;
    }
    printf("linreg: %.0f contributions on time (want 32)\n", on_time);
    ok &= on_time == 32;
    char cmd[600];
    if (ok) {
        snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
        if (system(cmd) != 0) return 1;
    } else {
        fprintf(stderr, "linreg: the two-site run failed; kept %s\n", tmp);
    }
    printf("linreg: %s\n", ok ? "two sites trained one model" : "FAILED");
    return ok ? 0 : 1;
}
