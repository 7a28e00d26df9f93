/* test_bench_cli.c — `geotrain bench codec`: --help, a bad option, and a small --json run whose
 * every line is a JSON object with the documented fields, covering every codec on both data
 * sets plus the zstd baseline, with the ratio targets (int8 >= 3.9, int4/fp4 >= 7.8,
 * top-1% with int4 values >= 150, with int2 values >= 200) and deterministic frames; and the
 * pseudograd data set read from two safetensors files. Speeds are not checked here (shared
 * machines); they are printed by the benchmark. */
#include "gt_local.h"
#include "gt_test.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    const char *cli = getenv("GT_CLI");
    if (!cli) {
        fprintf(stderr, "GT_CLI is not set (run through ctest)\n");
        return 1;
    }
    char cmd[16384], *out = NULL;
    snprintf(cmd, sizeof(cmd), "%s bench codec --help", cli);
    CHECK_EQ_INT(gt_test_run(cmd, &out), 0);
    CHECK_STR_CONTAINS(out, "--json");
    free(out);
    snprintf(cmd, sizeof(cmd), "%s bench codec --codecs int9 --n 100 2>&1", cli);
    CHECK_EQ_INT(gt_test_run(cmd, &out), 2);
    CHECK_STR_CONTAINS(out, "unknown codec");
    free(out);
    snprintf(cmd, sizeof(cmd), "%s bench codec --codecs int2 --n 100 2>&1", cli); /* topk:int2 */
    CHECK_EQ_INT(gt_test_run(cmd, &out), 2);
    CHECK_STR_CONTAINS(out, "unknown codec");
    free(out);
    snprintf(cmd, sizeof(cmd), "%s bench codec --block-size 100 2>&1", cli);
    CHECK_EQ_INT(gt_test_run(cmd, &out), 2);
    CHECK_STR_CONTAINS(out, "codec.block_size");
    free(out);

    snprintf(cmd, sizeof(cmd), "%s bench codec --json --n 262144 --repeats 2 2>/dev/null", cli);
    CHECK_EQ_INT(gt_test_run(cmd, &out), 0);
    int rows = 0, seen = 0;
    char *save = NULL;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_error_t err;
        json_t *o = json_loads(line, 0, &err);
        CHECK_MSG(o != NULL, "not JSON: %s", line);
        if (!o) continue;
        rows++;
        const char *codec = json_string_value(json_object_get(o, "codec"));
        const char *data = json_string_value(json_object_get(o, "data"));
        const char *values = json_string_value(json_object_get(o, "topk_values"));
        double ratio = json_number_value(json_object_get(o, "ratio"));
        CHECK(codec && data);
        CHECK(json_number_value(json_object_get(o, "encode_gbps")) > 0);
        CHECK(json_number_value(json_object_get(o, "decode_gbps")) > 0);
        CHECK(json_number_value(json_object_get(o, "encode_cpu_gbps")) > 0);
        CHECK(json_number_value(json_object_get(o, "decode_cpu_gbps")) > 0);
        CHECK(json_is_true(json_object_get(o, "deterministic")));
        if (!codec || !data) {
            json_decref(o);
            continue;
        }
        double want = 0;
        int bit = -1;
        const char *names[] = {"fp32", "bf16", "int8", "int4", "fp4", "topk", "zstd"};
        for (int i = 0; i < 7; i++)
            if (strcmp(codec, names[i]) == 0) bit = i;
        if (bit == 5 && values && strcmp(values, "int4") == 0) bit = 7;
        if (bit == 5 && values && strcmp(values, "int2") == 0) bit = 8;
        if (bit == 2) want = 3.9;
        if (bit == 3 || bit == 4) want = 7.8;
        if (bit == 7) want = 150.0;
        if (bit == 8) want = 200.0;
        if (bit == 0) want = 0.99;
        if (bit == 1) want = 1.99;
        CHECK_MSG(bit >= 0, "unexpected codec %s", codec);
        CHECK_MSG(ratio >= want, "%s/%s on %s: ratio %.3f < %.1f", codec, values ? values : "-",
                  data, ratio, want);
        if (bit >= 0) seen |= 1 << (bit + (strcmp(data, "heavy") == 0 ? 9 : 0));
        json_decref(o);
    }
    CHECK_EQ_INT(rows, 18);      /* 9 rows (8 codecs + the baseline) x 2 data sets */
    CHECK_EQ_INT(seen, 0x3ffff); /* each codec, the topk value formats, both data sets */
    free(out);

    /* pseudograd: anchor - params over every tensor, from two safetensors files. */
    char *dir = gt_test_tmpdir(), pa[1024], pb[1024];
    snprintf(pa, sizeof(pa), "%s/a.safetensors", dir);
    snprintf(pb, sizeof(pb), "%s/b.safetensors", dir);
    static float a1[1000], a2[24], b1[1000], b2[24];
    for (int i = 0; i < 1000; i++) {
        a1[i] = 1.0f + (float)i / 1024.0f;
        b1[i] = a1[i] - (float)(i % 7 - 3) / 64.0f;
    }
    for (int i = 0; i < 24; i++) a2[i] = b2[i] = (float)i;
    gt_local_st_entry_t ea[2] = {{"w", a1, 2, {40, 25}}, {"b", a2, 1, {24}}};
    gt_local_st_entry_t eb[2] = {{"b", b2, 1, {24}}, {"w", b1, 2, {40, 25}}};
    CHECK_EQ_INT(gt_local_st_write(pa, ea, 2, NULL, NULL, 0), GT_OK);
    CHECK_EQ_INT(gt_local_st_write(pb, eb, 2, NULL, NULL, 0), GT_OK);
    snprintf(cmd, sizeof(cmd),
             "%s bench codec --json --repeats 1 --codecs fp32,int8 --anchor %s --params %s "
             "--data pseudograd 2>&1",
             cli, pa, pb);
    CHECK_EQ_INT(gt_test_run(cmd, &out), 0);
    CHECK_STR_CONTAINS(out, "\"codec\":\"fp32\",\"data\":\"pseudograd\",\"n\":1024,");
    CHECK_STR_CONTAINS(out, "\"rel_err\":0.0000e+00"); /* fp32 is exact */
    CHECK_STR_CONTAINS(out, "\"codec\":\"int8\",\"data\":\"pseudograd\"");
    free(out);
    snprintf(cmd, sizeof(cmd), "%s bench codec --anchor %s --data pseudograd 2>&1", cli, pa);
    CHECK_EQ_INT(gt_test_run(cmd, &out), 2); /* --anchor without --params */
    free(out);
    gt_test_rmtree(dir);
    free(dir);
    return GT_TEST_DONE();
}
