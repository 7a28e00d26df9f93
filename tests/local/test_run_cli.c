/* test_run_cli.c — `geotrain run` end to end: a straight run; the same run stopped by SIGINT
 * (checkpoint written, exit 130) and continued with --resume ends with byte-identical
 * parameters and AdamW moments and the same logged losses; a second start without --resume
 * and a resume under changed settings are refused. (Several sites in the config take
 * another path — DiLoCo over the WAN — tested with it.) */
#include "gt_test.h"

#include <stdint.h>
#include <unistd.h>

static const char *cli;
static char dir[512];

static const char *yaml = "run: {name: cli, seed: 9, rounds: 60, checkpoint_every: 20, log_every: "
                          "50}\n"
                          "model: {preset: tiny, vocab_size: 64, d_model: 32, n_layer: 1,"
                          " seq_len: 16}\n"
                          "data: {kind: synthetic, synthetic_branching: 4,"
                          " synthetic_tokens: 50000}\n"
                          "inner: {steps: 50, lr: 2.0e-3, warmup_steps: 10}\n"
                          "sites: [{name: solo, address: \"127.0.0.1:47001\"}]\n";

static int run(const char *args, char **out_p)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s run %s", cli, args);
    return gt_test_run(cmd, out_p);
}

static char *slurp(const char *path, size_t *len_p)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf) buf[n] = '\0';
    fclose(f);
    if (len_p) *len_p = (size_t)n;
    return buf;
}

static int same_file(const char *a, const char *b)
{
    size_t na = 0, nb = 0;
    char *x = slurp(a, &na), *y = slurp(b, &nb);
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

/* Every metrics line with tokens_per_s and time cut off: what must repeat exactly. */
static void strip_timing(char *text)
{
    char *w = text;
    for (char *line = text; *line;) {
        char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        char *cut = strstr(line, ",\"tokens_per_s\"");
        size_t keep = (cut && cut < line + len) ? (size_t)(cut - line) : len;
        memmove(w, line, keep);
        w += keep;
        *w++ = '\n';
        line += len + (nl ? 1 : 0);
    }
    *w = '\0';
}

int main(void)
{
    cli = getenv("GT_CLI");
    if (!cli) {
        fprintf(stderr, "GT_CLI is not set (run through ctest)\n");
        return 1;
    }
    char *t = gt_test_tmpdir();
    snprintf(dir, sizeof dir, "%s", t);
    char cfg[600], args[2048], a[700], b[700];
    snprintf(cfg, sizeof cfg, "%s/one.yaml", dir);
    CHECK_EQ_INT(gt_test_write_file(cfg, yaml), 0);
    snprintf(a, sizeof a, "%s/A", dir);
    snprintf(b, sizeof b, "%s/B", dir);
    char *out = NULL;

    CHECK_EQ_INT(run("--help", &out), 0);
    CHECK_STR_CONTAINS(out, "--resume");
    free(out);

    /* A: straight through. */
    snprintf(args, sizeof args, "--config %s --site solo --run-dir %s", cfg, a);
    CHECK_EQ_INT(run(args, &out), 0);
    CHECK_STR_CONTAINS(out, "step 3000/3000");
    CHECK_STR_CONTAINS(out, "data:"); /* the resolved config is printed */
    free(out);
    char p[800], q[800];
    snprintf(p, sizeof p, "%s/config.yaml", a);
    CHECK(access(p, F_OK) == 0);
    snprintf(p, sizeof p, "%s/solo/summary.json", a);
    char *summary = slurp(p, NULL);
    CHECK_STR_CONTAINS(summary, "\"interrupted\": false");
    free(summary);

    /* Starting again into A without --resume is refused. */
    CHECK_EQ_INT(run(args, &out), 2);
    CHECK_STR_CONTAINS(out, "--resume");
    free(out);

    /* B: stopped by SIGINT once the first metrics line is out, then resumed. */
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "%s run --config %s --site solo --run-dir %s >/dev/null 2>%s/B.err & pid=$!; "
             "for i in $(seq 1 600); do [ -s %s/solo/metrics.jsonl ] && break; sleep 0.05; done; "
             "kill -INT $pid; wait $pid; echo \"exit=$?\"",
             cli, cfg, b, dir, b);
    CHECK_EQ_INT(gt_test_run(cmd, &out), 0);
    CHECK_STR_CONTAINS(out, "exit=130");
    free(out);
    snprintf(p, sizeof p, "%s/B.err", dir);
    char *err = slurp(p, NULL);
    CHECK_STR_CONTAINS(err, "stopped by signal 2");
    free(err);
    snprintf(p, sizeof p, "%s/solo/summary.json", b);
    summary = slurp(p, NULL);
    CHECK_STR_CONTAINS(summary, "\"interrupted\": true");
    free(summary);

    /* Resuming under different settings is refused and says what changed. */
    snprintf(args, sizeof args, "--config %s --site solo --run-dir %s --resume --set inner.lr=1e-3",
             cfg, b);
    CHECK(run(args, &out) != 0);
    CHECK_STR_CONTAINS(out, "inner.lr");
    free(out);

    snprintf(args, sizeof args, "--config %s --site solo --run-dir %s --resume", cfg, b);
    CHECK_EQ_INT(run(args, &out), 0);
    CHECK_STR_CONTAINS(out, "resumed from");
    free(out);
    const char *files[] = {"model.safetensors", "optimizer.safetensors"};
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/solo/checkpoints/step-00003000/%s", a, files[i]);
        snprintf(q, sizeof q, "%s/solo/checkpoints/step-00003000/%s", b, files[i]);
        CHECK_MSG(same_file(p, q), "%s differs between the straight and the resumed run", files[i]);
    }
    snprintf(p, sizeof p, "%s/solo/metrics.jsonl", a);
    snprintf(q, sizeof q, "%s/solo/metrics.jsonl", b);
    char *ma = slurp(p, NULL), *mb = slurp(q, NULL);
    CHECK(ma && mb);
    if (ma && mb) {
        strip_timing(ma);
        strip_timing(mb);
        CHECK_MSG(strcmp(ma, mb) == 0, "metrics differ:\n%s\n---\n%s", ma, mb);
        CHECK_STR_CONTAINS(ma, "\"step\":3000,");
    }
    free(ma);
    free(mb);

    /* --resume with nothing to resume. */
    snprintf(args, sizeof args, "--config %s --site solo --run-dir %s/none --resume", cfg, dir);
    CHECK_EQ_INT(run(args, &out), 2);
    CHECK_STR_CONTAINS(out, "no checkpoint");
    free(out);

    gt_test_rmtree(t);
    free(t);
    return GT_TEST_DONE();
}
