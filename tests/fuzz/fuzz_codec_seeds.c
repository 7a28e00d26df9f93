/* fuzz_codec_seeds.c — writes a seed corpus for fuzz_codec: valid frames of every codec
 * (mode bytes 0 and 1: decode as is / with the checksum recomputed) and round-trip inputs
 * (mode byte 2). Usage: fuzz_codec_seeds DIR */
#include "gt_compress.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int write_seed(const char *dir, const char *name, uint8_t mode, const void *p, size_t len)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/seed-%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(&mode, 1, 1, f) == 1 && fwrite(p, 1, len, f) == len;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_codec_seeds DIR\n");
        return 2;
    }
    enum { N = 300 };
    float x[N];
    for (int i = 0; i < N; i++) x[i] = sinf((float)i * 0.37f) * ldexpf(1.0f, (i % 13) - 8);
    for (int i = 100; i < 140; i++) x[i] = 0.0f;
    int failed = 0;
    for (int c = 0; c <= GT_CMP_TOPK + 1; c++) { /* the last: topk with int2 values */
        for (int z = 0; z < 2; z++) {
            gt_cmp_params_t p = GT_CMP_PARAMS_INIT;
            p.codec = c <= GT_CMP_TOPK ? (gt_cmp_codec_t)c : GT_CMP_TOPK;
            p.topk_values = (gt_cmp_codec_t)(z ? GT_CMP_INT4 : GT_CMP_FP32);
            if (c > GT_CMP_TOPK) p.topk_values = GT_CMP_INT2;
            p.topk_fraction = 0.1;
            p.error_feedback = 0;
            p.zstd = z ? GT_CMP_ZSTD_ON : GT_CMP_ZSTD_OFF;
            gt_cmp_ctx_t *ctx = NULL;
            if (gt_cmp_create(&p, &ctx) != GT_OK) return 1;
            size_t cap = gt_cmp_bound(ctx, N), len;
            uint8_t *f = malloc(cap);
            char name[64];
            if (gt_cmp_encode(ctx, x, N, NULL, f, cap, &len) != GT_OK) failed = 1;
            const char *cn = c <= GT_CMP_TOPK ? gt_cmp_codec_name(p.codec) : "topk-int2";
            snprintf(name, sizeof(name), "%s-z%d-plain", cn, z);
            failed |= write_seed(argv[1], name, 0, f, len) != 0;
            snprintf(name, sizeof(name), "%s-z%d-reseal", cn, z);
            failed |= write_seed(argv[1], name, 1, f, len) != 0;
            uint8_t rt[8 + sizeof(x)] = {(uint8_t)(c <= GT_CMP_TOPK ? c : GT_CMP_TOPK),
                                         (uint8_t)(c > GT_CMP_TOPK ? GT_CMP_TOPK
                                                   : z             ? 3
                                                                   : 0), /* 5: int2 values */
                                         7,
                                         (uint8_t)(z * 3),
                                         25,
                                         1,
                                         0,
                                         0};
            memcpy(rt + 8, x, sizeof(x));
            snprintf(name, sizeof(name), "%s-z%d-roundtrip", cn, z);
            failed |= write_seed(argv[1], name, 2, rt, sizeof(rt)) != 0;
            free(f);
            gt_cmp_destroy(ctx);
        }
    }
    if (failed) fprintf(stderr, "fuzz_codec_seeds: could not write every seed to %s\n", argv[1]);
    return failed;
}
