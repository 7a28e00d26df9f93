/* test_wan_bench_cli.c — `geotrain bench wan` runs end to end (both transports, plain and
 * encrypted, without the reference tools to keep it short) and prints one well-formed JSON
 * row per column with a positive rate, encrypted rows carrying their AES-GCM ratio, our rows
 * the CPU cores both ends used. With --link-mbps the emulated link holds our rows to its
 * rate (and the rows say so). */
#include "gt_test.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(void)
{
    const char *cli = getenv("GT_CLI");
    if (!cli) {
        fprintf(stderr, "GT_CLI is not set (run through ctest)\n");
        return 1;
    }
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "%s bench wan --json --no-tools --min 256K --max 256K --bytes 8M --reps 1", cli);
    int rc = gt_test_run(cmd, &out);
    CHECK_EQ_INT(rc, 0);
    int rows = 0, aes = 0, aes_open = 0, ours = 0, with_ratio = 0, norelay = 0;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    for (char *line = out ? strtok(out, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        if (line[0] != '{') continue; /* log lines (stderr is captured too) */
        json_error_t err;
        json_t *j = json_loads(line, 0, &err);
        CHECK_MSG(j != NULL, "not JSON: %s", line);
        if (!j) continue;
        rows++;
        const char *tp = json_string_value(json_object_get(j, "transport"));
        double mbps = json_number_value(json_object_get(j, "mbps"));
        CHECK(tp != NULL);
        CHECK(json_is_boolean(json_object_get(j, "encrypted")));
        CHECK_EQ_INT(json_integer_value(json_object_get(j, "size")), 256 * 1024);
        CHECK(mbps > 0);
        if (tp && strcmp(tp, "aes256gcm") == 0) aes++;
        if (tp && strcmp(tp, "aes256gcm_open") == 0) aes_open++;
        if (tp && strcmp(tp, "ucx_norelay") == 0) {
            /* encrypted UCX without the sealed relay, against the ucx row with it */
            norelay++;
            const char *ref = json_string_value(json_object_get(j, "ref"));
            CHECK(ref && strcmp(ref, "ucx") == 0);
        }
        if (tp && (strcmp(tp, "ucx") == 0 || strcmp(tp, "libfabric") == 0 ||
                   strcmp(tp, "ucx_norelay") == 0)) {
            ours++;
            /* Both processes' CPU over wall time: something, and not more than the machine
             * has (a little slack for clock granularity). */
            double cores = json_number_value(json_object_get(j, "cores"));
            CHECK_MSG(cores > 0 && cores <= (double)ncpu + 0.25, "cores %.2f of %ld", cores, ncpu);
        }
        if (json_object_get(j, "ratio")) with_ratio++;
        json_decref(j);
    }
    CHECK_EQ_INT(aes, 1);
    CHECK_EQ_INT(aes_open, 1);
    CHECK_EQ_INT(norelay, 1);
    CHECK_EQ_INT(ours, 5);       /* ucx, libfabric x plain, encrypted; ucx_norelay */
    CHECK_EQ_INT(with_ratio, 3); /* encrypted rows vs aes256gcm (no tools: no plain ratio), and
                                    ucx_norelay vs ucx */
    CHECK_EQ_INT(rows, 7);
    free(out);
    out = NULL;

    /* 400 Mb/s is 50 MB/s: both UCX rows (with and without the relay) are held to it; the
     * token bucket's depth (64 KiB, or 10 ms at the rate) allows a little over it. */
    snprintf(cmd, sizeof cmd,
             "%s bench wan --json --no-tools --transport ucx --mode encrypted --min 1M --max 1M "
             "--bytes 8M --reps 1 --link-mbps 400",
             cli);
    rc = gt_test_run(cmd, &out);
    CHECK_EQ_INT(rc, 0);
    int limited = 0;
    for (char *line = out ? strtok(out, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        if (line[0] != '{') continue;
        json_t *j = json_loads(line, 0, NULL);
        CHECK_MSG(j != NULL, "not JSON: %s", line);
        if (!j) continue;
        const char *tp = json_string_value(json_object_get(j, "transport"));
        CHECK_MSG(json_number_value(json_object_get(j, "link_mbps")) == 400.0, "%s", line);
        if (tp && (strcmp(tp, "ucx") == 0 || strcmp(tp, "ucx_norelay") == 0)) {
            double mbps = json_number_value(json_object_get(j, "mbps"));
            CHECK_MSG(mbps > 10 && mbps < 55, "%s at %.1f MB/s over a 50 MB/s link", tp, mbps);
            limited++;
        }
        json_decref(j);
    }
    CHECK_EQ_INT(limited, 2);
    free(out);
    return GT_TEST_DONE();
}
