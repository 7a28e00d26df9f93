/* test_codecs.c — numerics of every codec: names and params, per-codec error bounds (int8/int4
 * within half a quantum of their block, fp4 onto the nearest point of its scaled grid, bf16
 * round to nearest, int2 top-k values on the two magnitudes a 1-bit Lloyd-Max fit of their
 * block gives, against a reference written here), error feedback over 1,000 rounds, top-k selection
 * with ties, and the rejection of NaN/Inf, out-of-range values and a non-default
 * floating-point environment. "Variant" 6 below is topk with int2 values (int2 is a value
 * format only). */
#include "compress_internal.h"
#include "gt_test.h"
#include "cmp_test_data.h"

#include <fenv.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

static gt_cmp_ctx_t *make(gt_cmp_codec_t codec, uint32_t block, int ef, gt_cmp_zstd_t zstd)
{
    gt_cmp_params_t p = GT_CMP_PARAMS_INIT;
    p.codec = codec;
    p.block_size = block;
    p.error_feedback = ef;
    p.zstd = zstd;
    gt_cmp_ctx_t *ctx = NULL;
    CHECK_EQ_INT(gt_cmp_create(&p, &ctx), GT_OK);
    return ctx;
}

/* Variants of the codec loops: 0..5 the codecs with their default values, 6 topk:int2. */
#define N_VARIANTS (GT_CMP_TOPK + 2)
static void variant(int v, gt_cmp_params_t *p, gt_cmp_codec_t topk_values)
{
    p->codec = v <= GT_CMP_TOPK ? (gt_cmp_codec_t)v : GT_CMP_TOPK;
    p->topk_values = v <= GT_CMP_TOPK ? topk_values : GT_CMP_INT2;
}

static void test_names_params(void)
{
    const char *names[] = {"fp32", "bf16", "int8", "int4", "fp4", "topk", "int2"};
    for (int i = 0; i < 7; i++) {
        gt_cmp_codec_t c;
        CHECK_EQ_INT(gt_cmp_codec_from_name(names[i], &c), GT_OK);
        CHECK_EQ_INT(c, i);
        CHECK(strcmp(gt_cmp_codec_name(c), names[i]) == 0);
    }
    gt_cmp_codec_t c;
    CHECK_EQ_INT(gt_cmp_codec_from_name("int3", &c), GT_ERR_INVALID);
    CHECK_EQ_INT(gt_cmp_codec_from_name(NULL, &c), GT_ERR_INVALID);
    gt_cmp_zstd_t z;
    CHECK_EQ_INT(gt_cmp_zstd_from_name("off", &z), GT_OK);
    CHECK_EQ_INT(z, GT_CMP_ZSTD_OFF);
    CHECK(strcmp(gt_cmp_zstd_name(GT_CMP_ZSTD_AUTO), "auto") == 0);
    CHECK_EQ_INT(gt_cmp_zstd_from_name("yes", &z), GT_ERR_INVALID);

    gt_cmp_params_t p = GT_CMP_PARAMS_INIT;
    char why[160];
    CHECK_EQ_INT(gt_cmp_params_check(&p, why, sizeof(why)), GT_OK);
    CHECK_EQ_INT(p.block_size, 128);
    CHECK_EQ_INT(p.zstd_level, 3);
    p.block_size = 100;
    CHECK_EQ_INT(gt_cmp_params_check(&p, why, sizeof(why)), GT_ERR_INVALID);
    CHECK_STR_CONTAINS(why, "codec.block_size");
    p = (gt_cmp_params_t)GT_CMP_PARAMS_INIT;
    p.topk_fraction = 0.0;
    CHECK_EQ_INT(gt_cmp_params_check(&p, why, sizeof(why)), GT_ERR_INVALID);
    CHECK_STR_CONTAINS(why, "codec.topk_fraction");
    p = (gt_cmp_params_t)GT_CMP_PARAMS_INIT;
    p.topk_values = GT_CMP_TOPK;
    CHECK_EQ_INT(gt_cmp_params_check(&p, why, sizeof(why)), GT_ERR_INVALID);
    CHECK_STR_CONTAINS(why, "codec.topk_values");
    p = (gt_cmp_params_t)GT_CMP_PARAMS_INIT;
    p.topk_values = GT_CMP_INT2; /* int2: for top-k values only */
    CHECK_EQ_INT(gt_cmp_params_check(&p, why, sizeof(why)), GT_OK);
    p.codec = GT_CMP_INT2;
    CHECK_EQ_INT(gt_cmp_params_check(&p, why, sizeof(why)), GT_ERR_INVALID);
    CHECK_STR_CONTAINS(why, "codec.topk_values int2");
    p = (gt_cmp_params_t)GT_CMP_PARAMS_INIT;
    p.zstd_level = 20;
    CHECK_EQ_INT(gt_cmp_params_check(&p, why, sizeof(why)), GT_ERR_INVALID);
    CHECK_STR_CONTAINS(why, "codec.zstd_level");
    gt_cmp_ctx_t *ctx = NULL;
    CHECK_EQ_INT(gt_cmp_create(&p, &ctx), GT_ERR_INVALID);
    CHECK(ctx == NULL);
    gt_cmp_destroy(NULL);
}

/* Block b's scale, read from an uncompressed block-scaled frame. */
static float frame_scale(const uint8_t *frame, size_t n, uint32_t block, size_t b)
{
    size_t nb = (n + block - 1) / block, ng = (nb + GT_CMP_GROUP_BLOCKS - 1) / GT_CMP_GROUP_BLOCKS;
    const uint8_t *pl = frame + GT_CMP_HEADER_SIZE;
    unsigned g = pl[b / GT_CMP_GROUP_BLOCKS];
    return g ? gt_cmp_scale(g, pl[ng + b]) : 0.0f;
}

/* Encodes x (with the given data) and checks each element against its block's grid. */
static void check_block_codec(gt_cmp_codec_t codec, uint32_t block, const float *x, size_t n)
{
    gt_cmp_ctx_t *ctx = make(codec, block, 0, GT_CMP_ZSTD_OFF);
    size_t cap = gt_cmp_bound(ctx, n), len = 0;
    uint8_t *frame = malloc(cap);
    float *y = malloc(n * sizeof(float));
    CHECK_EQ_INT(gt_cmp_encode(ctx, x, n, NULL, frame, cap, &len), GT_OK);
    CHECK_EQ_INT(gt_cmp_decode(ctx, frame, len, y, n), GT_OK);
    const int qmax = gt_cmp_qmax(codec);
    int bad = 0;
    for (size_t b = 0; b * block < n; b++) {
        float s = frame_scale(frame, n, block, b);
        float amax = 0;
        size_t end = (b + 1) * block < n ? (b + 1) * block : n;
        for (size_t i = b * block; i < end; i++) amax = fmaxf(amax, fabsf(x[i]));
        /* The scale covers the block and is at most 1/16 (scale code rounding) above ideal,
         * unless the group's exponent floor forces it up (tiny blocks next to big ones). */
        if (amax > 0 && !(s * qmax >= amax)) bad++;
        for (size_t i = b * block; i < end; i++) {
            double err = fabs((double)x[i] - y[i]);
            if (codec == GT_CMP_FP4) {
                /* y/s is on the e2m1 grid and no grid point is nearer to x/s. */
                double t = y[i] / s, best = 1e30;
                int on = 0;
                for (int c = 0; c < 16; c++) {
                    if (t == gt_cmp_fp4_values[c]) on = 1;
                    best = fmin(best, fabs((double)x[i] - gt_cmp_fp4_values[c] * (double)s));
                }
                if (!on || err > best * (1 + 1e-6) + 1e-30) bad++;
            } else {
                double q = y[i] / s;
                if (q != rint(q) || fabs(q) > qmax) bad++;
                if (err > 0.5 * s * (1 + 1e-6)) bad++; /* half a quantum of its block */
            }
        }
    }
    CHECK_MSG(bad == 0, "%s block %u: %d elements off their grid", gt_cmp_codec_name(codec), block,
              bad);
    free(frame);
    free(y);
    gt_cmp_destroy(ctx);
}

static void test_block_codecs(void)
{
    const size_t n = 10000 + 7; /* a partial last block and an odd length */
    float *x = malloc(n * sizeof(float));
    gt_cmp_codec_t codecs[] = {GT_CMP_INT8, GT_CMP_INT4, GT_CMP_FP4};
    uint32_t blocks[] = {16, 128, 4096};
    for (int c = 0; c < 3; c++)
        for (int b = 0; b < 3; b++) {
            cmp_fill_gauss(x, n, 11 + c, 0.01f);
            check_block_codec(codecs[c], blocks[b], x, n);
            cmp_fill_exact(x, n, 7 + b); /* magnitudes over 2^24: tiny blocks beside big ones */
            for (size_t i = 300; i < 700; i++) x[i] = 0.0f; /* zero blocks and a zero group */
            check_block_codec(codecs[c], blocks[b], x, n);
        }
    free(x);
}

static void test_fp32_bf16(void)
{
    const size_t n = 4099;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    cmp_fill_exact(x, n, 3);
    x[0] = 3.4e38f; /* rounds up past the largest bf16: must stay finite */
    x[1] = -0.0f;
    x[2] = 1.0e-40f; /* subnormal */
    gt_cmp_ctx_t *ctx = make(GT_CMP_FP32, 128, 0, GT_CMP_ZSTD_OFF);
    size_t cap = gt_cmp_bound(ctx, n), len;
    uint8_t *frame = malloc(cap);
    CHECK_EQ_INT(cap, GT_CMP_HEADER_SIZE + 4 * n);
    CHECK_EQ_INT(gt_cmp_encode(ctx, x, n, NULL, frame, cap, &len), GT_OK);
    CHECK_EQ_INT(gt_cmp_decode(ctx, frame, len, y, n), GT_OK);
    CHECK(memcmp(x, y, n * sizeof(float)) == 0);
    gt_cmp_destroy(ctx);

    ctx = make(GT_CMP_BF16, 128, 0, GT_CMP_ZSTD_OFF);
    CHECK_EQ_INT(gt_cmp_encode(ctx, x, n, NULL, frame, cap, &len), GT_OK);
    CHECK_EQ_INT(len, GT_CMP_HEADER_SIZE + 2 * n);
    CHECK_EQ_INT(gt_cmp_decode(ctx, frame, len, y, n), GT_OK);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t b = gt_cmp_f2u(y[i]);
        if (b & 0xffffu || !isfinite(y[i])) bad++;
        if (i == 0) continue;
        /* Round to nearest: no other bf16 value is nearer (ties: even mantissa). */
        float up = gt_cmp_u2f(b + 0x10000u), dn = gt_cmp_u2f(b - 0x10000u);
        double e = fabs((double)x[i] - y[i]);
        if (y[i] != 0 && (e > fabs((double)x[i] - up) || e > fabs((double)x[i] - dn))) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(y[0] == gt_cmp_u2f(0x7f7f0000u));
    free(frame);
    free(x);
    free(y);
    gt_cmp_destroy(ctx);
}

/* Error feedback: after R rounds, sum(decoded) = sum(inputs) - residual; for the dense codecs
 * the residual is at most half a quantum, so the running sums stay within one quantum. */
static void test_error_feedback(void)
{
    const size_t n = 1000;
    const int rounds = 1000;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    float *e = malloc(n * sizeof(float));
    double *sin_ = malloc(n * sizeof(double)), *sdec = malloc(n * sizeof(double));
    for (int codec = 0; codec < N_VARIANTS; codec++) {
        gt_cmp_params_t p = GT_CMP_PARAMS_INIT;
        variant(codec, &p, GT_CMP_INT4);
        p.topk_fraction = 0.05;
        p.zstd = GT_CMP_ZSTD_OFF;
        gt_cmp_ctx_t *ctx = NULL;
        CHECK_EQ_INT(gt_cmp_create(&p, &ctx), GT_OK);
        size_t cap = gt_cmp_bound(ctx, n), len;
        uint8_t *frame = malloc(cap);
        memset(e, 0, n * sizeof(float));
        memset(sin_, 0, n * sizeof(double));
        memset(sdec, 0, n * sizeof(double));
        uint64_t seed = 99;
        double worst = 0, worst_q = 0, worst_drift = 0;
        for (int r = 0; r < rounds; r++) {
            cmp_fill_gauss(x, n, seed++, 1e-3f);
            for (size_t i = 0; i < 16; i++) x[i] = 1e-3f * 0.3f; /* a steady small push */
            if (gt_cmp_encode(ctx, x, n, e, frame, cap, &len) != GT_OK ||
                gt_cmp_decode(ctx, frame, len, y, n) != GT_OK) {
                CHECK_MSG(0, "%s round %d failed", gt_cmp_codec_name(p.codec), r);
                break;
            }
            for (size_t i = 0; i < n; i++) {
                sin_[i] += x[i];
                sdec[i] += y[i];
            }
            if (r != rounds - 1) continue;
            for (size_t i = 0; i < n; i++) {
                double d = fabs(sin_[i] - sdec[i]);
                /* The identity sum_in - sum_dec = e holds up to float rounding of v = x + e. */
                worst_drift = fmax(worst_drift, fabs(sin_[i] - sdec[i] - e[i]));
                double q;
                if (gt_cmp_is_block(p.codec))
                    q = frame_scale(frame, n, p.block_size, i / p.block_size);
                else if (p.codec == GT_CMP_BF16)
                    q = ldexp(1.0, ilogbf(y[i] != 0 ? y[i] : x[i]) - 7);
                else
                    q = p.codec == GT_CMP_FP32 ? 0.0 : INFINITY;
                worst = fmax(worst, d - q);
                worst_q = fmax(worst_q, q);
            }
        }
        CHECK_MSG(worst_drift <= 1e-5, "%s: sum_in - sum_dec - residual = %g",
                  gt_cmp_codec_name(p.codec), worst_drift);
        CHECK_MSG(worst <= 1e-5, "%s: running sums differ by %g more than a quantum",
                  gt_cmp_codec_name(p.codec), worst);
        free(frame);
        gt_cmp_destroy(ctx);
    }
    free(x);
    free(y);
    free(e);
    free(sin_);
    free(sdec);
}

/* The int2 levels of one block of kept magnitudes, computed here independently of quant.c:
 * a 1-bit Lloyd-Max fit (4 rounds from a split at the mean), each level then moved to the
 * nearest representable scale of group code g by a scan over all 256 block codes (ties: the
 * larger), the split being the midpoint of the two scales. Returns the codes. */
static void int2_reference(const float *v, size_t len, unsigned g, unsigned *cl_p, unsigned *ch_p,
                           float *hi_p)
{
    double t = 0;
    for (size_t i = 0; i < len; i++) t += fabs((double)v[i]);
    t /= (double)len;
    double lv[2] = {t, t};
    for (int it = 0; it < 4; it++) {
        double s[2] = {0, 0};
        size_t c[2] = {0, 0};
        for (size_t i = 0; i < len; i++) {
            int h = fabs((double)v[i]) >= t;
            s[h] += fabs((double)v[i]);
            c[h]++;
        }
        for (int h = 0; h < 2; h++) lv[h] = c[h] ? s[h] / (double)c[h] : t;
        t = 0.5 * (lv[0] + lv[1]);
    }
    unsigned code[2];
    for (int h = 0; h < 2; h++) {
        float want = (float)lv[h];
        unsigned best = 0;
        for (unsigned c = 0; c < 256; c++) {
            double dc = fabs((double)gt_cmp_scale(g, c) - want),
                   db = fabs((double)gt_cmp_scale(g, best) - want);
            /* the smallest scale at or above, or the one below when strictly closer */
            if (dc < db || (dc == db && gt_cmp_scale(g, c) >= want)) best = c;
        }
        code[h] = best;
    }
    *cl_p = code[0];
    *ch_p = code[1];
    *hi_p = (float)lv[1];
}

/* topk:int2 without error feedback: every kept value is ±lo or ±hi of its block (the
 * reference above, given the frame's group exponent), with the input's sign, hi exactly when
 * 2|x| >= lo + hi; the group exponent is the smallest that holds the group's largest hi; the
 * unkept elements decode to 0; the frame is at most index bytes + k/4 + scales; and on
 * Gaussian data the kept values come back within 7-15% (relative L2; the more kept, the wider
 * their range) of the input: the point
 * of fitting the levels (a {1, 3} x scale grid through zero gives about 43% there). */
static void check_int2(const float *x, size_t n, double fraction, uint32_t block, double max_err)
{
    gt_cmp_params_t p = GT_CMP_PARAMS_INIT;
    p.codec = GT_CMP_TOPK;
    p.topk_values = GT_CMP_INT2;
    p.topk_fraction = fraction;
    p.block_size = block;
    p.error_feedback = 0;
    p.zstd = GT_CMP_ZSTD_OFF;
    gt_cmp_ctx_t *ctx = NULL;
    CHECK_EQ_INT(gt_cmp_create(&p, &ctx), GT_OK);
    size_t cap = gt_cmp_bound(ctx, n), len;
    uint8_t *frame = malloc(cap);
    float *y = malloc(n * sizeof(float)), *kx = malloc(n * sizeof(float));
    float *ky = malloc(n * sizeof(float));
    CHECK_EQ_INT(gt_cmp_encode(ctx, x, n, NULL, frame, cap, &len), GT_OK);
    CHECK_EQ_INT(gt_cmp_decode(ctx, frame, len, y, n), GT_OK);
    gt_cmp_frame_info_t info;
    CHECK_EQ_INT(gt_cmp_frame_info(frame, len, &info), GT_OK);
    CHECK_EQ_INT(info.values, GT_CMP_INT2);
    size_t k = info.k, nb = (k + block - 1) / block;
    CHECK_EQ_INT(k, gt_cmp_topk_count(fraction, n));
    /* The kept elements, in index order: y != 0 marks them (int2 never decodes to 0 unless its
     * whole group is 0, which these inputs do not have). */
    size_t j = 0;
    for (size_t i = 0; i < n; i++)
        if (y[i] != 0.0f && j < k) {
            kx[j] = x[i];
            ky[j++] = y[i];
        }
    CHECK_EQ_INT(j, k);
    /* The values' payload is the last part of the raw payload: exps, lo codes, hi codes,
     * codes. */
    size_t ng = (nb + GT_CMP_GROUP_BLOCKS - 1) / GT_CMP_GROUP_BLOCKS;
    size_t vlen = ng + 2 * nb + (k + 3) / 4;
    CHECK(len <= GT_CMP_HEADER_SIZE + k * 3 + vlen);
    const uint8_t *vp = frame + len - vlen;
    int bad = 0;
    double err2 = 0, ref2 = 0;
    float *hmax = calloc(ng, sizeof(float)); /* the largest fitted hi level of each group */
    for (size_t b = 0; b < nb; b++) {
        size_t lo = b * block, hi = lo + block < k ? lo + block : k;
        unsigned g = vp[b / GT_CMP_GROUP_BLOCKS], cl, ch;
        float fitted;
        CHECK(g != 0);
        int2_reference(kx + lo, hi - lo, g, &cl, &ch, &fitted);
        hmax[b / GT_CMP_GROUP_BLOCKS] = fmaxf(hmax[b / GT_CMP_GROUP_BLOCKS], fitted);
        if (vp[ng + b] != cl || vp[ng + nb + b] != ch) bad++;
        float sl = gt_cmp_scale(g, cl), sh = gt_cmp_scale(g, ch);
        for (size_t i = lo; i < hi; i++) {
            float want = 2.0 * fabs((double)kx[i]) >= (double)sl + sh ? sh : sl;
            if (kx[i] < 0.0f) want = -want;
            if (ky[i] != want) bad++;
            err2 += ((double)ky[i] - kx[i]) * ((double)ky[i] - kx[i]);
            ref2 += (double)kx[i] * kx[i];
        }
    }
    /* The group exponent: the smallest whose largest scale (1.9375 x 2^E) holds its largest
     * fitted hi level, i.e. one less would not. */
    for (size_t g = 0; g < ng; g++) {
        int E = (int)vp[g] - 128;
        if (!(ldexp(1.9375, E) >= hmax[g]) || (E > -110 && ldexp(1.9375, E - 1) >= hmax[g])) bad++;
    }
    free(hmax);
    CHECK_MSG(bad == 0, "int2 (n %zu, fraction %g, block %u): %d values or codes off", n, fraction,
              block, bad);
    double rel = sqrt(err2 / ref2);
    fprintf(stderr, "int2 n %zu fraction %g block %u: kept values' relative L2 error %.4f\n", n,
            fraction, block, rel);
    if (max_err > 0)
        CHECK_MSG(rel <= max_err, "int2 (fraction %g, block %u): relative error %.3f > %.3f",
                  fraction, block, rel, max_err);
    /* Error feedback: decoded + residual = input, to the rounding of the residual v - y. */
    gt_cmp_destroy(ctx);
    p.error_feedback = 1;
    CHECK_EQ_INT(gt_cmp_create(&p, &ctx), GT_OK);
    float *e = calloc(n, sizeof(float));
    CHECK_EQ_INT(gt_cmp_encode(ctx, x, n, e, frame, cap, &len), GT_OK);
    CHECK_EQ_INT(gt_cmp_decode(ctx, frame, len, y, n), GT_OK);
    double worst = 0;
    for (size_t i = 0; i < n; i++)
        worst = fmax(worst, fabs((double)y[i] + e[i] - x[i]) /
                                (fabs((double)x[i]) + fabs((double)y[i]) + 1e-30));
    CHECK_MSG(worst <= 1e-6, "int2: decoded + residual differs from the input by %g", worst);
    free(e);
    free(frame);
    free(y);
    free(kx);
    free(ky);
    gt_cmp_destroy(ctx);
}

static void test_int2(void)
{
    const size_t n = 50000 + 3;
    float *x = malloc(n * sizeof(float));
    cmp_fill_gauss(x, n, 41, 0.01f);
    check_int2(x, n, 0.01, 128, 0.07);
    check_int2(x, n, 0.03, 16, 0.08);
    check_int2(x, n, 0.2, 4096, 0.15); /* kept values from 1.3 sigma up: wider */
    cmp_fill_exact(x, n, 5);           /* magnitudes over 2^24 apart: tiny blocks beside big ones */
    for (size_t i = 0; i < n; i++)
        if (x[i] == 0.0f) x[i] = 1.0f;
    check_int2(x, n, 0.05, 16, 0); /* no error bound: not Gaussian */
    free(x);
}

typedef struct {
    uint32_t key;
    size_t i;
} kv_t;

static int kv_cmp(const void *a, const void *b)
{
    const kv_t *x = a, *y = b;
    if (x->key != y->key) return x->key > y->key ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static void test_topk_selection(void)
{
    const size_t n = 20000;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    kv_t *ref = malloc(n * sizeof(kv_t));
    for (int trial = 0; trial < 4; trial++) {
        uint64_t seed = 5 + trial;
        for (size_t i = 0; i < n; i++) {
            /* Heavy ties: magnitudes from a few values, both signs, plus zeros. */
            float mags[] = {0.0f, 0.5f, 1.0f, 1.0f, 2.0f, 0.25f};
            uint64_t r = cmp_rng(&seed);
            x[i] = trial == 0 ? cmp_gauss(&seed) : mags[r % (trial == 3 ? 2 : 6)];
            if (r & 64) x[i] = -x[i];
        }
        double fracs[] = {0.01, 0.013, 0.2, 1.0};
        gt_cmp_params_t p = GT_CMP_PARAMS_INIT;
        p.codec = GT_CMP_TOPK;
        p.topk_values = GT_CMP_FP32;
        p.topk_fraction = fracs[trial];
        p.error_feedback = 0;
        gt_cmp_ctx_t *ctx = NULL;
        CHECK_EQ_INT(gt_cmp_create(&p, &ctx), GT_OK);
        size_t cap = gt_cmp_bound(ctx, n), len;
        uint8_t *frame = malloc(cap);
        CHECK_EQ_INT(gt_cmp_encode(ctx, x, n, NULL, frame, cap, &len), GT_OK);
        CHECK_EQ_INT(gt_cmp_decode(ctx, frame, len, y, n), GT_OK);
        gt_cmp_frame_info_t info;
        CHECK_EQ_INT(gt_cmp_frame_info(frame, len, &info), GT_OK);
        size_t k = (size_t)ceil(fracs[trial] * n);
        CHECK_EQ_INT(info.k, k);
        for (size_t i = 0; i < n; i++) ref[i] = (kv_t){gt_cmp_f2u(x[i]) & 0x7fffffffu, i};
        qsort(ref, n, sizeof(kv_t), kv_cmp);
        char *want = calloc(n, 1);
        for (size_t j = 0; j < k; j++) want[ref[j].i] = 1;
        int bad = 0;
        for (size_t i = 0; i < n; i++)
            if (want[i] ? gt_cmp_f2u(y[i]) != gt_cmp_f2u(x[i]) : y[i] != 0.0f) bad++;
        CHECK_MSG(bad == 0, "topk trial %d: %d elements differ from the reference", trial, bad);
        free(want);
        free(frame);
        gt_cmp_destroy(ctx);
    }
    free(x);
    free(y);
    free(ref);
}

static void test_rejects(void)
{
    const size_t n = 300;
    float x[300], e[300];
    cmp_fill_exact(x, n, 1);
    for (int codec = 0; codec < N_VARIANTS; codec++) {
        gt_cmp_params_t vp = GT_CMP_PARAMS_INIT;
        variant(codec, &vp, GT_CMP_INT8);
        vp.error_feedback = 0;
        gt_cmp_ctx_t *ctx = NULL;
        CHECK_EQ_INT(gt_cmp_create(&vp, &ctx), GT_OK);
        size_t cap = gt_cmp_bound(ctx, n), len;
        uint8_t *frame = malloc(cap);
        float keep = x[200];
        x[200] = NAN;
        CHECK_EQ_INT(gt_cmp_encode(ctx, x, n, NULL, frame, cap, &len), GT_ERR_INVALID);
        x[200] = -INFINITY;
        CHECK_EQ_INT(gt_cmp_encode(ctx, x, n, NULL, frame, cap, &len), GT_ERR_INVALID);
        x[200] = 0x1p101f;
        gt_status_t want = gt_cmp_is_block((gt_cmp_codec_t)codec) ? GT_ERR_INVALID : GT_OK;
        if (codec >= GT_CMP_TOPK) want = GT_ERR_INVALID; /* int8 / int2 values */
        CHECK_EQ_INT(gt_cmp_encode(ctx, x, n, NULL, frame, cap, &len), want);
        x[200] = keep;
        CHECK_EQ_INT(gt_cmp_encode(ctx, x, n, NULL, frame, cap - 1, &len), GT_ERR_OVERFLOW);
        CHECK_EQ_INT(gt_cmp_encode(ctx, x, n, e, frame, cap, &len), GT_ERR_INVALID); /* EF off */
        CHECK_EQ_INT(gt_cmp_encode_device(ctx, x, n, NULL, frame, cap, &len), GT_ERR_UNSUPPORTED);
        /* Deterministic only under round-to-nearest without flush-to-zero: refuse otherwise. */
        fesetround(FE_UPWARD);
        CHECK_EQ_INT(gt_cmp_encode(ctx, x, n, NULL, frame, cap, &len), GT_ERR_UNSUPPORTED);
        fesetround(FE_TONEAREST);
#if defined(__x86_64__)
        unsigned csr = _mm_getcsr();
        _mm_setcsr(csr | 0x8000u);
        CHECK_EQ_INT(gt_cmp_encode(ctx, x, n, NULL, frame, cap, &len), GT_ERR_UNSUPPORTED);
        _mm_setcsr(csr);
#endif
        CHECK_EQ_INT(gt_cmp_encode(ctx, x, n, NULL, frame, cap, &len), GT_OK);
        free(frame);
        gt_cmp_destroy(ctx);
    }
    /* EF on: the residual is required. */
    gt_cmp_ctx_t *ctx = make(GT_CMP_INT8, 128, 1, GT_CMP_ZSTD_OFF);
    uint8_t frame[1024];
    size_t len;
    CHECK_EQ_INT(gt_cmp_encode(ctx, x, n, NULL, frame, sizeof(frame), &len), GT_ERR_INVALID);
    /* n = 0 is a valid, empty frame. */
    memset(e, 0, sizeof(e));
    CHECK_EQ_INT(gt_cmp_encode(ctx, NULL, 0, NULL, frame, sizeof(frame), &len), GT_OK);
    CHECK_EQ_INT(len, GT_CMP_HEADER_SIZE);
    CHECK_EQ_INT(gt_cmp_decode(ctx, frame, len, NULL, 0), GT_OK);
    gt_cmp_destroy(ctx);
}

int main(void)
{
    test_names_params();
    test_block_codecs();
    test_fp32_bf16();
    test_error_feedback();
    test_topk_selection();
    test_int2();
    test_rejects();
    return GT_TEST_DONE();
}
