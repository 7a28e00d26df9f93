/* test_frames.c — the frame as a wire format: every single-bit flip, every truncation and an
 * appended byte are rejected; a frame for another element count is rejected before anything
 * is written; forged headers with huge counts fail without allocating; encoding is the same
 * bytes every time, with the scalar and the AVX-512 kernels, and matches golden checksums
 * (the same on every machine); zstd auto/on/off; the ratio of each codec at default params. */
#include "compress_internal.h"
#include "gt_test.h"
#include "cmp_test_data.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static gt_cmp_ctx_t *make_p(gt_cmp_codec_t codec, gt_cmp_codec_t values, int ef, gt_cmp_zstd_t zstd)
{
    gt_cmp_params_t p = GT_CMP_PARAMS_INIT;
    p.codec = codec;
    p.topk_values = values;
    p.topk_fraction = 0.05;
    p.error_feedback = ef;
    p.zstd = zstd;
    gt_cmp_ctx_t *ctx = NULL;
    CHECK_EQ_INT(gt_cmp_create(&p, &ctx), GT_OK);
    return ctx;
}

/* Variants of the codec loops: 0..5 the codecs, 6 topk with int2 values (a value format only). */
#define N_VARIANTS (GT_CMP_TOPK + 2)
static gt_cmp_codec_t v_codec(int v)
{
    return v <= GT_CMP_TOPK ? (gt_cmp_codec_t)v : GT_CMP_TOPK;
}
static gt_cmp_codec_t v_values(int v, gt_cmp_codec_t dflt)
{
    return v <= GT_CMP_TOPK ? dflt : GT_CMP_INT2;
}
static const char *v_name(int v)
{
    return v <= GT_CMP_TOPK ? gt_cmp_codec_name((gt_cmp_codec_t)v) : "topk:int2";
}

static void test_flips_and_lengths(void)
{
    const size_t n = 333;
    float x[333], y[333], y0[333];
    cmp_fill_exact(x, n, 21);
    for (size_t i = 40; i < 80; i++) x[i] = 0.0f;
    for (int codec = 0; codec < N_VARIANTS; codec++) {
        for (int zi = 0; zi < 2; zi++) {
            gt_cmp_zstd_t z = zi ? GT_CMP_ZSTD_ON : GT_CMP_ZSTD_OFF;
            gt_cmp_ctx_t *ctx = make_p(v_codec(codec), v_values(codec, GT_CMP_INT4), 0, z);
            size_t cap = gt_cmp_bound(ctx, n), len;
            uint8_t *frame = malloc(cap + 1), *bad = malloc(cap + 1);
            CHECK_EQ_INT(gt_cmp_encode(ctx, x, n, NULL, frame, cap, &len), GT_OK);
            CHECK_EQ_INT(gt_cmp_decode(ctx, frame, len, y0, n), GT_OK);
            int missed = 0;
            for (size_t bit = 0; bit < len * 8; bit++) {
                memcpy(bad, frame, len);
                bad[bit / 8] ^= (uint8_t)(1u << (bit % 8));
                for (size_t i = 0; i < n; i++) y[i] = 12345.0f;
                gt_status_t st = gt_cmp_decode(ctx, bad, len, y, n);
                if (st == GT_OK)
                    missed++;
                else if (y[0] != 12345.0f || y[n - 1] != 12345.0f)
                    missed++; /* wrote on error */
            }
            CHECK_MSG(missed == 0, "%s zstd=%d: %d of %zu bit flips not detected", v_name(codec),
                      zi, missed, len * 8);
            int trunc = 0;
            for (size_t l = 0; l < len; l++)
                if (gt_cmp_decode(ctx, frame, l, y, n) == GT_OK) trunc++;
            CHECK_EQ_INT(trunc, 0);
            frame[len] = 0;
            CHECK_EQ_INT(gt_cmp_decode(ctx, frame, len + 1, y, n), GT_ERR_CORRUPT);
            CHECK_EQ_INT(gt_cmp_decode(ctx, frame, len, y, n - 1), GT_ERR_CORRUPT);
            CHECK_EQ_INT(gt_cmp_decode(ctx, frame, len, y, n + 1), GT_ERR_CORRUPT);
            CHECK_EQ_INT(gt_cmp_decode(ctx, frame, len, y, n), GT_OK);
            CHECK(memcmp(y, y0, sizeof(y)) == 0);
            free(frame);
            free(bad);
            gt_cmp_destroy(ctx);
        }
    }
}

/* A forged header claiming 2^40 elements, with a matching "expected" count: rejected on the
 * sizes alone (the caller's buffer here is tiny; nothing may be written or allocated). */
static void test_forged_sizes(void)
{
    gt_cmp_ctx_t *ctx = make_p(GT_CMP_INT8, GT_CMP_INT8, 0, GT_CMP_ZSTD_OFF);
    float x[64] = {1.0f}, y[64];
    uint8_t frame[512];
    size_t len;
    CHECK_EQ_INT(gt_cmp_encode(ctx, x, 64, NULL, frame, sizeof(frame), &len), GT_OK);
    const uint64_t huge = 1ull << 40;
    for (int field = 16; field <= 40; field += 8) {
        uint8_t f[512];
        memcpy(f, frame, len);
        for (int i = 0; i < 8; i++) f[field + i] = (uint8_t)(huge >> (8 * i));
        CHECK_EQ_INT(gt_cmp_decode(ctx, f, len, y, (size_t)huge), GT_ERR_CORRUPT);
        gt_cmp_frame_info_t info;
        CHECK(gt_cmp_frame_info(f, len, &info) != GT_OK);
    }
    /* topk: k > n, and a topk frame whose index bytes run past n. */
    gt_cmp_ctx_t *tk = make_p(GT_CMP_TOPK, GT_CMP_FP32, 0, GT_CMP_ZSTD_OFF);
    for (int i = 0; i < 64; i++) x[i] = (float)i;
    CHECK_EQ_INT(gt_cmp_encode(tk, x, 64, NULL, frame, sizeof(frame), &len), GT_OK);
    gt_cmp_frame_info_t info;
    CHECK_EQ_INT(gt_cmp_frame_info(frame, len, &info), GT_OK);
    CHECK_EQ_INT(info.k, 4); /* ceil(0.05 * 64) */
    CHECK_EQ_INT(gt_cmp_decode(tk, frame, len, y, 64), GT_OK);
    CHECK(y[63] == 63.0f && y[60] == 60.0f && y[59] == 0.0f);
    frame[24] = 65; /* k = 65 > n */
    CHECK_EQ_INT(gt_cmp_decode(tk, frame, len, y, 64), GT_ERR_CORRUPT);
    gt_cmp_destroy(tk);
    gt_cmp_destroy(ctx);
    uint8_t junk[GT_CMP_HEADER_SIZE] = {0};
    CHECK_EQ_INT(gt_cmp_decode(NULL, junk, sizeof(junk), y, 1), GT_ERR_INVALID);
    CHECK_EQ_INT(gt_cmp_frame_info(NULL, 0, &info), GT_ERR_CORRUPT);
}

/* The hostile payload fields behind a valid checksum (what a fuzzer with the checksum
 * recomputed would send): a bad group exponent, a NaN in fp32, indices out of order. */
static void reseal(uint8_t *f, size_t len)
{
    XXH64_hash_t h = XXH3_64bits(f, 48);
    uint64_t c = XXH3_64bits_withSeed(f + GT_CMP_HEADER_SIZE, len - GT_CMP_HEADER_SIZE, h);
    for (int i = 0; i < 8; i++) f[48 + i] = (uint8_t)(c >> (8 * i));
}

static void test_hostile_payloads(void)
{
    float x[64], y[64];
    for (int i = 0; i < 64; i++) x[i] = (float)(i - 20);
    uint8_t frame[1024];
    size_t len;
    gt_cmp_ctx_t *ctx = make_p(GT_CMP_INT8, GT_CMP_INT8, 0, GT_CMP_ZSTD_OFF);
    CHECK_EQ_INT(gt_cmp_encode(ctx, x, 64, NULL, frame, sizeof(frame), &len), GT_OK);
    frame[GT_CMP_HEADER_SIZE] = 255; /* group exponent beyond the largest */
    reseal(frame, len);
    CHECK_EQ_INT(gt_cmp_decode(ctx, frame, len, y, 64), GT_ERR_CORRUPT);
    frame[GT_CMP_HEADER_SIZE] = 0; /* zero group: valid, decodes to zeros */
    reseal(frame, len);
    CHECK_EQ_INT(gt_cmp_decode(ctx, frame, len, y, 64), GT_OK);
    CHECK(y[5] == 0.0f && y[63] == 0.0f);
    gt_cmp_destroy(ctx);

    ctx = make_p(GT_CMP_FP32, GT_CMP_FP32, 0, GT_CMP_ZSTD_OFF);
    CHECK_EQ_INT(gt_cmp_encode(ctx, x, 64, NULL, frame, sizeof(frame), &len), GT_OK);
    uint32_t nan = 0x7fc00000u;
    memcpy(frame + GT_CMP_HEADER_SIZE + 8, &nan, 4);
    reseal(frame, len);
    CHECK_EQ_INT(gt_cmp_decode(ctx, frame, len, y, 64), GT_ERR_CORRUPT);
    gt_cmp_destroy(ctx);

    ctx = make_p(GT_CMP_BF16, GT_CMP_BF16, 0, GT_CMP_ZSTD_OFF);
    CHECK_EQ_INT(gt_cmp_encode(ctx, x, 64, NULL, frame, sizeof(frame), &len), GT_OK);
    frame[GT_CMP_HEADER_SIZE + 10] = 0x80; /* element 5 becomes +Inf (0x7f80) */
    frame[GT_CMP_HEADER_SIZE + 11] = 0x7f;
    reseal(frame, len);
    CHECK_EQ_INT(gt_cmp_decode(ctx, frame, len, y, 64), GT_ERR_CORRUPT);
    frame[GT_CMP_HEADER_SIZE + 10] = 0x7f; /* 0x7f7f: the largest finite bf16 is fine */
    reseal(frame, len);
    CHECK_EQ_INT(gt_cmp_decode(ctx, frame, len, y, 64), GT_OK);
    CHECK(y[5] == gt_cmp_u2f(0x7f7f0000u));
    gt_cmp_destroy(ctx);

    ctx = make_p(GT_CMP_TOPK, GT_CMP_FP32, 0, GT_CMP_ZSTD_OFF);
    CHECK_EQ_INT(gt_cmp_encode(ctx, x, 64, NULL, frame, sizeof(frame), &len), GT_OK);
    /* 4 kept (indices 60..63): first varint 60, then 0, 0, 0. Make the last gap run past n. */
    CHECK_EQ_INT(frame[GT_CMP_HEADER_SIZE], 60);
    frame[GT_CMP_HEADER_SIZE + 3] = 1;
    reseal(frame, len);
    CHECK_EQ_INT(gt_cmp_decode(ctx, frame, len, y, 64), GT_ERR_CORRUPT);
    frame[GT_CMP_HEADER_SIZE + 3] = 0x80; /* a varint that does not end */
    reseal(frame, len);
    CHECK_EQ_INT(gt_cmp_decode(ctx, frame, len, y, 64), GT_ERR_CORRUPT);
    gt_cmp_destroy(ctx);

    /* topk:int2, 4 kept: 4 index bytes, then the values' group exponent, lo code, hi code and
     * one byte of 2-bit codes. A group exponent outside its range is refused, and nothing is
     * written; the largest exponent with the largest codes decodes finite (the levels are
     * scales, at most 1.9375 x 2^100); a lo code above the hi code is only an odd frame. */
    ctx = make_p(GT_CMP_TOPK, GT_CMP_INT2, 0, GT_CMP_ZSTD_OFF);
    CHECK_EQ_INT(gt_cmp_encode(ctx, x, 64, NULL, frame, sizeof(frame), &len), GT_OK);
    CHECK_EQ_INT(len, GT_CMP_HEADER_SIZE + 4 + 1 + 2 + 1);
    uint8_t *vals = frame + GT_CMP_HEADER_SIZE + 4;
    vals[0] = GT_CMP_EXP_MAX + 1;
    reseal(frame, len);
    for (int i = 0; i < 64; i++) y[i] = 7.0f;
    CHECK_EQ_INT(gt_cmp_decode(ctx, frame, len, y, 64), GT_ERR_CORRUPT);
    CHECK(y[0] == 7.0f && y[63] == 7.0f); /* nothing written on error */
    vals[0] = GT_CMP_EXP_MIN - 1;
    reseal(frame, len);
    CHECK_EQ_INT(gt_cmp_decode(ctx, frame, len, y, 64), GT_ERR_CORRUPT);
    vals[0] = GT_CMP_EXP_MAX;
    vals[1] = 255;
    vals[2] = 0;
    vals[3] = 0xff; /* every value -hi */
    reseal(frame, len);
    CHECK_EQ_INT(gt_cmp_decode(ctx, frame, len, y, 64), GT_OK);
    CHECK(isfinite(y[60]) && y[60] == -gt_cmp_scale(GT_CMP_EXP_MAX, 0) && y[0] == 0.0f);
    vals[3] = 0x00; /* every value +lo, the largest scale there is */
    reseal(frame, len);
    CHECK_EQ_INT(gt_cmp_decode(ctx, frame, len, y, 64), GT_OK);
    CHECK(isfinite(y[63]) && y[63] == gt_cmp_scale(GT_CMP_EXP_MAX, 255));
    gt_cmp_destroy(ctx);
}

/* Scalar, AVX2 and AVX-512 kernels give the same frames, residuals and decoded values. */
static void compare_isa(const gt_cmp_kernels_t *K)
{
    const size_t n = 50000 + 13;
    float *x = malloc(n * sizeof(float));
    float *e[2], *y[2];
    uint8_t *f[2];
    for (int codec = GT_CMP_INT8; codec <= GT_CMP_TOPK; codec++) {
        for (uint32_t block = 16; block <= 4096; block *= 16) {
            gt_cmp_params_t p = GT_CMP_PARAMS_INIT;
            p.codec = (gt_cmp_codec_t)codec;
            p.block_size = block;
            p.topk_values = GT_CMP_FP4;
            gt_cmp_ctx_t *ctx = NULL;
            CHECK_EQ_INT(gt_cmp_create(&p, &ctx), GT_OK);
            size_t cap = gt_cmp_bound(ctx, n), len[2];
            for (int k = 0; k < 2; k++) {
                gt_cmp_kernels_force(k ? K : &gt_cmp_kernels_scalar);
                e[k] = calloc(n, sizeof(float));
                y[k] = malloc(n * sizeof(float));
                f[k] = malloc(cap);
                for (int r = 0; r < 3; r++) { /* three rounds, so the residual matters */
                    cmp_fill_gauss(x, n, 100 + r, 0.02f);
                    for (size_t i = 0; i < n; i += 97) x[i] *= 50.0f; /* outliers */
                    for (size_t i = 5; i < n; i += 89) x[i] = -0.0f;
                    CHECK_EQ_INT(gt_cmp_encode(ctx, x, n, e[k], f[k], cap, &len[k]), GT_OK);
                }
                CHECK_EQ_INT(gt_cmp_decode(ctx, f[k], len[k], y[k], n), GT_OK);
            }
            gt_cmp_kernels_force(NULL);
            CHECK_MSG(len[0] == len[1] && memcmp(f[0], f[1], len[0]) == 0,
                      "%s block %u: scalar and %s frames differ", gt_cmp_codec_name(p.codec), block,
                      K->name);
            CHECK(memcmp(e[0], e[1], n * sizeof(float)) == 0);
            CHECK(memcmp(y[0], y[1], n * sizeof(float)) == 0);
            for (int k = 0; k < 2; k++) {
                free(e[k]);
                free(y[k]);
                free(f[k]);
            }
            gt_cmp_destroy(ctx);
        }
    }
    free(x);
}

static void test_isa_identical(void)
{
    int ran = 0;
#if defined(__x86_64__)
    if (gt_cmp_kernels_avx2 && __builtin_cpu_supports("avx2")) {
        compare_isa(gt_cmp_kernels_avx2);
        ran++;
    }
    if (gt_cmp_kernels_avx512 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw")) {
        compare_isa(gt_cmp_kernels_avx512);
        ran++;
    }
#endif
    if (!ran) fprintf(stderr, "no AVX2/AVX-512 here: only the scalar kernels exist\n");
}

/* Golden checksums of frames made from machine-independent data: if these change, frames
 * from this build no longer match other builds (or the format changed: bump the version). */
static void test_golden_and_ratios(void)
{
    const size_t n = 65536 + 100;
    float *x = malloc(n * sizeof(float)), *e = calloc(n, sizeof(float));
    cmp_fill_exact(x, n, 2024);
    static const uint64_t golden[N_VARIANTS] = {
        0xd496c80f5249e946ull, 0xe2a15c9880349aafull, 0xe47a151192f70194ull, 0x227d1bbea8f96358ull,
        0xc4f39b84325fee1cull, 0xbd578b1fe21b93f1ull, 0xa5d7775fa3888f0aull};
    int print = getenv("GT_CMP_PRINT_GOLDEN") != NULL;
    for (int codec = 0; codec < N_VARIANTS; codec++) {
        /* int8 values (int2 for the last), EF on; zstd off for the golden hash, since zstd's
         * bytes may change between libzstd versions (its output, decoded, does not). */
        gt_cmp_params_t p = GT_CMP_PARAMS_INIT;
        p.codec = v_codec(codec);
        p.topk_values = v_values(codec, p.topk_values);
        p.zstd = GT_CMP_ZSTD_OFF;
        gt_cmp_ctx_t *ctx = NULL;
        CHECK_EQ_INT(gt_cmp_create(&p, &ctx), GT_OK);
        size_t cap = gt_cmp_bound(ctx, n), len = 0, len2 = 0;
        uint8_t *f = malloc(cap), *f2 = malloc(cap);
        memset(e, 0, n * sizeof(float));
        CHECK_EQ_INT(gt_cmp_encode(ctx, x, n, e, f, cap, &len), GT_OK);
        memset(e, 0, n * sizeof(float));
        CHECK_EQ_INT(gt_cmp_encode(ctx, x, n, e, f2, cap, &len2), GT_OK);
        CHECK(len == len2 && memcmp(f, f2, len) == 0);
        uint64_t h = XXH3_64bits(f, len);
        if (print)
            fprintf(stderr, "golden %s: 0x%016llxull (%zu bytes)\n", v_name(codec),
                    (unsigned long long)h, len);
        CHECK_MSG(h == golden[codec], "%s: frame hash 0x%016llx, golden 0x%016llx", v_name(codec),
                  (unsigned long long)h, (unsigned long long)golden[codec]);
        double ratio = (double)(n * 4) / (double)len;
        static const double min_ratio[N_VARIANTS] = {0.99, 1.99, 3.9, 7.8, 7.8, 80, 200};
        CHECK_MSG(ratio >= min_ratio[codec], "%s ratio %.3f < %.3f", v_name(codec), ratio,
                  min_ratio[codec]);
        gt_cmp_frame_info_t info;
        CHECK_EQ_INT(gt_cmp_frame_info(f, len, &info), GT_OK);
        CHECK_EQ_INT(info.zstd, 0);
        CHECK_EQ_INT(info.error_feedback, 1);
        gt_cmp_destroy(ctx);
        p.zstd = GT_CMP_ZSTD_AUTO; /* auto: zstd only where it pays (topk) */
        CHECK_EQ_INT(gt_cmp_create(&p, &ctx), GT_OK);
        memset(e, 0, n * sizeof(float));
        CHECK_EQ_INT(gt_cmp_encode(ctx, x, n, e, f2, cap, &len2), GT_OK);
        CHECK_EQ_INT(gt_cmp_frame_info(f2, len2, &info), GT_OK);
        CHECK_EQ_INT(info.zstd, codec >= GT_CMP_TOPK);
        if (codec >= GT_CMP_TOPK) CHECK(len2 < len);
        free(f);
        free(f2);
        gt_cmp_destroy(ctx);
    }
    free(x);
    free(e);
}

int main(void)
{
    test_flips_and_lengths();
    test_forged_sizes();
    test_hostile_payloads();
    test_isa_identical();
    test_golden_and_ratios();
    return GT_TEST_DONE();
}
