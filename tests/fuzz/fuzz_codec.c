/* fuzz_codec.c — libFuzzer target for compress/: the frame decoder on hostile bytes, and
 * encode/decode round trips that must be deterministic.
 *
 * The first input byte picks a mode:
 *   0  the rest is a frame, decoded as it is (header checks, checksum);
 *   1  the rest is a frame whose checksum is recomputed first, so mutations reach the
 *      payload checks behind it (group exponents, NaN in fp32/bf16, topk varints, int2
 *      top-k values, zstd);
 *   2  the rest is params + floats: encode twice from the same residual, which must give
 *      the same bytes; decode must succeed, give finite values, and give them twice alike;
 *      every decoded value must lie within the codec's bound of its input.
 * Any broken invariant calls __builtin_trap(), which libFuzzer reports as a crash.
 */
#include "compress_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define MAX_N (1u << 16)

static gt_cmp_ctx_t *decoder;
static float *out;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    gt_log_set_level(GT_LOG_ERROR);
    gt_cmp_params_t p = GT_CMP_PARAMS_INIT;
    if (gt_cmp_create(&p, &decoder) != GT_OK) __builtin_trap();
    out = malloc(MAX_N * sizeof(float));
    return 0;
}

static size_t expected_n(const uint8_t *f, size_t len, size_t fallback)
{
    if (len < GT_CMP_HEADER_SIZE) return fallback;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | f[16 + i];
    return n <= MAX_N ? (size_t)n : fallback;
}

static void decode_checked(const uint8_t *f, size_t len, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = 1234.5f;
    gt_status_t st = gt_cmp_decode(decoder, f, len, out, n);
    if (st == GT_OK) {
        for (size_t i = 0; i < n; i++)
            if (!isfinite(out[i])) __builtin_trap(); /* decode promises finite output */
    } else {
        for (size_t i = 0; i < n; i++)
            if (out[i] != 1234.5f) __builtin_trap(); /* nothing written on error */
    }
}

static void reseal_and_decode(const uint8_t *data, size_t size)
{
    gt_cmp_frame_info_t info;
    if (gt_cmp_frame_info(data, size, &info) != GT_OK || info.n > MAX_N) {
        decode_checked(data, size, expected_n(data, size, 7));
        return;
    }
    uint8_t *f = malloc(size);
    memcpy(f, data, size);
    const uint8_t *stored = f + GT_CMP_HEADER_SIZE, *raw = stored;
    size_t stored_len = size - GT_CMP_HEADER_SIZE;
    uint8_t *buf = NULL;
    if (info.zstd) {
        buf = malloc(info.payload_bytes + 1);
        size_t got = ZSTD_decompress(buf, info.payload_bytes, stored, stored_len);
        if (ZSTD_isError(got) || got != info.payload_bytes) {
            decode_checked(f, size, info.n);
            free(buf);
            free(f);
            return;
        }
        raw = buf;
    }
    XXH64_hash_t h = XXH3_64bits(f, 48);
    if (info.zstd) h = XXH3_64bits_withSeed(stored, stored_len, h);
    uint64_t c = XXH3_64bits_withSeed(raw, info.payload_bytes, h);
    for (int i = 0; i < 8; i++) f[48 + i] = (uint8_t)(c >> (8 * i));
    decode_checked(f, size, info.n);
    free(buf);
    free(f);
}

static void round_trip(const uint8_t *data, size_t size)
{
    if (size < 8) return;
    gt_cmp_params_t p = GT_CMP_PARAMS_INIT;
    p.codec = (gt_cmp_codec_t)(data[0] % (GT_CMP_TOPK + 1)); /* int2 is a value format only */
    p.topk_values = (gt_cmp_codec_t)(data[1] % (GT_CMP_TOPK + 1));
    if (p.topk_values == GT_CMP_TOPK) p.topk_values = GT_CMP_INT2;
    p.block_size = 16u * (1u + data[2] % 32u);
    p.error_feedback = data[3] & 1;
    p.zstd = (gt_cmp_zstd_t)((data[3] >> 1) % 3);
    p.zstd_level = 1 + (data[3] >> 3) % 3;
    p.topk_fraction = (1 + data[4]) / 256.0;
    /* The floats, made finite and below the quantized formats' 2^100 limit. */
    size_t n = (size - 8) / 4;
    if (n > MAX_N) n = MAX_N;
    float *x = malloc(n * sizeof(float) + 4), *e1 = calloc(n + 1, sizeof(float));
    float *e2 = calloc(n + 1, sizeof(float)), *y2 = malloc(n * sizeof(float) + 4);
    for (size_t i = 0; i < n; i++) {
        float v;
        memcpy(&v, data + 8 + 4 * i, 4);
        if (!isfinite(v) || fabsf(v) >= 0x1p90f) v = 0.0f;
        x[i] = v;
        /* a non-zero starting residual, the same for both encodes */
        e1[i] = e2[i] = (data[5] & 1) ? 0.25f * v : 0.0f;
    }
    gt_cmp_ctx_t *ctx = NULL;
    if (gt_cmp_create(&p, &ctx) != GT_OK) __builtin_trap();
    size_t cap = gt_cmp_bound(ctx, n), l1 = 0, l2 = 0;
    uint8_t *f1 = malloc(cap), *f2 = malloc(cap);
    float *r1 = p.error_feedback ? e1 : NULL, *r2 = p.error_feedback ? e2 : NULL;
    if (gt_cmp_encode(ctx, x, n, r1, f1, cap, &l1) != GT_OK) __builtin_trap();
    if (gt_cmp_encode(ctx, x, n, r2, f2, cap, &l2) != GT_OK) __builtin_trap();
    if (l1 != l2 || memcmp(f1, f2, l1) != 0) __builtin_trap(); /* deterministic */
    if (p.error_feedback && memcmp(e1, e2, n * sizeof(float)) != 0) __builtin_trap();
    if (gt_cmp_decode(decoder, f1, l1, out, n) != GT_OK) __builtin_trap();
    if (gt_cmp_decode(ctx, f1, l1, y2, n) != GT_OK) __builtin_trap();
    if (memcmp(out, y2, n * sizeof(float)) != 0) __builtin_trap();
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(out[i])) __builtin_trap();
        /* With error feedback, decoded + new residual = v = x + old residual, to rounding
         * (int2 values may lie far from v, above or below: the residual v - y is rounded at
         * the scale of the larger of the two). */
        if (p.error_feedback) {
            double v = (double)x[i] + ((data[5] & 1) ? 0.25 * x[i] : 0.0);
            double d = fabs((double)out[i] + e1[i] - v);
            double at = fabs(v);
            if (p.codec == GT_CMP_TOPK && p.topk_values == GT_CMP_INT2) at += fabs(out[i]);
            if (d > 1e-6 * at + 1e-30) __builtin_trap();
        }
        if (p.codec == GT_CMP_FP32 && !p.error_feedback && out[i] != x[i]) __builtin_trap();
    }
    free(x);
    free(e1);
    free(e2);
    free(y2);
    free(f1);
    free(f2);
    gt_cmp_destroy(ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    switch (data[0] % 3) {
    case 0: decode_checked(data + 1, size - 1, expected_n(data + 1, size - 1, 7)); break;
    case 1: reseal_and_decode(data + 1, size - 1); break;
    case 2: round_trip(data + 1, size - 1); break;
    }
    return 0;
}
