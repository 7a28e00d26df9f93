/* test_bench_local.c — `geotrain bench local` (issue 7): --help, a bad option, then
 * `mpirun -n 2 geotrain bench local --quick` whose every row must parse as JSON with the
 * documented fields: all-reduce rows for each size with wrong == 0 (geotrain's path and the
 * MPI reference) and positive bandwidths; training rows for 1 and 2 ranks with positive
 * tokens/s, wrong == 0 (finite losses, replicas with identical parameters), an all-reduce
 * share in [0, 1]; a GPU row either measured or "skipped". Then the re-launch path (started
 * without mpirun, --ranks 2) with the all-reduce part only. Speeds are not compared
 * (shared cores); the benchmark prints them. Argument: the mpirun to use. */
#include "gt_test.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int ar_rows, ar_sizes, train1, train2, gpu_rows, bad_lines;
} seen_t;

static double num(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    CHECK_MSG(json_is_number(v), "field %s missing or not a number", k);
    return json_is_number(v) ? json_number_value(v) : -1;
}

static void check_row(json_t *o, seen_t *s)
{
    const char *kind = json_string_value(json_object_get(o, "kind"));
    const char *backend = json_string_value(json_object_get(o, "backend"));
    const char *skipped = json_string_value(json_object_get(o, "skipped"));
    CHECK(kind != NULL);
    if (!kind) return;
    if (skipped) {
        /* only the GPU parts may be skipped, and only for the documented reasons */
        CHECK_MSG(backend && strcmp(backend, "gt_nccl") == 0, "unexpected skip of %s: %s",
                  backend ? backend : "?", skipped);
        CHECK_MSG(strstr(skipped, "CUDA") != NULL, "skip reason: %s", skipped);
        s->gpu_rows++;
        return;
    }
    if (strcmp(kind, "allreduce") == 0) {
        CHECK(backend != NULL);
        CHECK_EQ_INT(num(o, "ranks"), 2);
        CHECK_EQ_INT(num(o, "wrong"), 0);
        CHECK_EQ_INT(num(o, "ref_wrong"), 0);
        CHECK(num(o, "time_us") > 0);
        CHECK(num(o, "busbw_gbps") > 0);
        CHECK(num(o, "ref_busbw_gbps") > 0);
        CHECK(num(o, "ratio") > 0);
        double bytes = num(o, "bytes");
        if (backend && strcmp(backend, "gt_mpi") == 0) {
            CHECK(num(o, "iallreduce_wait_busbw_gbps") > 0);
            /* 64K, 256K, 1M */
            CHECK_MSG(bytes == 65536 || bytes == 262144 || bytes == 1048576, "size %.0f", bytes);
            s->ar_sizes |= bytes == 65536 ? 1 : bytes == 262144 ? 2 : bytes == 1048576 ? 4 : 0;
            s->ar_rows++;
        } else {
            s->gpu_rows++;
        }
        return;
    }
    if (strcmp(kind, "train") == 0) {
        const char *device = json_string_value(json_object_get(o, "device"));
        CHECK(device != NULL);
        CHECK_EQ_INT(num(o, "wrong"), 0);
        CHECK(num(o, "tokens_per_s") > 0);
        CHECK(num(o, "step_ms_median") > 0);
        double loss = num(o, "loss_last");
        CHECK(loss > 0 && loss < 20);
        if (device && strcmp(device, "cuda") == 0) {
            s->gpu_rows++;
            return;
        }
        int ranks = (int)num(o, "ranks");
        CHECK_EQ_INT(num(o, "tokens_per_step"), ranks * num(o, "B") * num(o, "T"));
        if (ranks == 1) s->train1++;
        if (ranks == 2) {
            s->train2++;
            double share = num(o, "allreduce_share");
            CHECK_MSG(share > 0 && share <= 1, "allreduce_share %g", share);
            CHECK(num(o, "speedup") > 0);
        }
        return;
    }
    CHECK_MSG(0, "unknown row kind %s", kind);
}

static void parse(char *out, seen_t *s)
{
    char *save = NULL;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "{", 1) != 0) continue;
        json_error_t err;
        json_t *o = json_loads(line, 0, &err);
        CHECK_MSG(o != NULL, "not JSON: %s", line);
        if (!o) {
            s->bad_lines++;
            continue;
        }
        CHECK_MSG(strcmp(json_string_value(json_object_get(o, "bench")), "local") == 0,
                  "bench field: %s", line);
        check_row(o, s);
        json_decref(o);
    }
}

int main(int argc, char **argv)
{
    const char *cli = getenv("GT_CLI");
    if (!cli || argc < 2) {
        fprintf(stderr, "usage (through ctest): test_bench_local MPIRUN\n");
        return 1;
    }
    const char *mpirun = argv[1];
    char cmd[8192], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s bench local --help", cli);
    CHECK_EQ_INT(gt_test_run(cmd, &out), 0);
    CHECK_STR_CONTAINS(out, "busbw");
    CHECK_STR_CONTAINS(out, "--ranks");
    free(out);
    snprintf(cmd, sizeof cmd, "%s bench local --reps 0", cli);
    CHECK_EQ_INT(gt_test_run(cmd, &out), 2);
    free(out);

    char *dir = gt_test_tmpdir();
    /* stderr to a file, so the JSON lines on stdout stay whole */
    snprintf(cmd, sizeof cmd,
             "(%s --allow-run-as-root --oversubscribe -n 2 %s bench local --quick 2>%s/err)",
             mpirun, cli, dir);
    int rc = gt_test_run(cmd, &out);
    CHECK_EQ_INT(rc, 0);
    fprintf(stderr, "%s", out);
    seen_t s = {0};
    parse(out, &s);
    free(out);
    CHECK_EQ_INT(s.bad_lines, 0);
    CHECK_EQ_INT(s.ar_rows, 3);
    CHECK_EQ_INT(s.ar_sizes, 7);
    CHECK_EQ_INT(s.train1, 1);
    CHECK_EQ_INT(s.train2, 1);
    CHECK(s.gpu_rows >= 2); /* the GPU all-reduce and training parts: measured or skipped */

    /* started without mpirun: it re-runs itself under mpirun -np 2 */
    snprintf(cmd, sizeof cmd,
             "(env -u OMPI_COMM_WORLD_SIZE -u PMIX_RANK -u PMI_SIZE %s bench local --quick "
             "--no-train --no-gpu --max 64K --ranks 2 2>%s/err2)",
             cli, dir);
    rc = gt_test_run(cmd, &out);
    CHECK_EQ_INT(rc, 0);
    memset(&s, 0, sizeof s);
    parse(out, &s);
    CHECK_EQ_INT(s.ar_rows, 1);
    CHECK_EQ_INT(s.train1 + s.train2 + s.gpu_rows, 0);
    free(out);
    if (gt_test_failures) {
        snprintf(cmd, sizeof cmd, "cat %s/err %s/err2", dir, dir);
        if (gt_test_run(cmd, &out) >= 0) fprintf(stderr, "stderr of the runs:\n%s", out);
        free(out);
    }
    gt_test_rmtree(dir);
    return GT_TEST_DONE();
}
