/* quant.c — the dense payloads: fp32, bf16 and the block-scaled int8/int4/fp4, with the scalar
 * kernels that specify them (quant_avx512.c must give the same bits) and the kernel choice.
 *
 * Why the scale is a byte relative to a shared exponent: the ratio targets (>= 3.9x for int8,
 * >= 7.8x for int4/fp4 at 128-element blocks) leave no room for an f32 or even a bf16 scale
 * per 4-bit block, while a plain power-of-two scale (MX's E8M0) wastes up to half the code
 * range. A 4.4 float per block under an exponent per 32 blocks costs 1 + 1/32 bytes a block
 * and rounds the scale up by at most 1/16. Every scale and every decoded value is exact in
 * float (compress_internal.h), and the scale search compares exact products, so no rounding
 * choice is left to a compiler or an instruction set.
 */
#include "compress_internal.h"

#include <fenv.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

const float gt_cmp_fp4_values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                     -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

float gt_cmp_scale(unsigned g, unsigned c)
{
    /* (16 + m) * 2^((c >> 4) - 19 + g - 128) = 1.m * 2^((c >> 4) + g - 143): biased exponent
     * (c >> 4) + g - 16, which is in [2, 227] for g in [EXP_MIN, EXP_MAX]. */
    return gt_cmp_u2f(((uint32_t)((c >> 4) + g - 16u) << 23) | ((uint32_t)(c & 15u) << 19));
}

/* ---- scalar kernels (the specification) ---- */

static uint32_t absmax_scalar(const float *x, float *e, size_t len)
{
    uint32_t m = 0;
    if (e) {
        for (size_t i = 0; i < len; i++) {
            float v = e[i] + x[i];
            e[i] = v;
            uint32_t b = gt_cmp_f2u(v) & 0x7fffffffu;
            m = b > m ? b : m;
        }
    } else {
        for (size_t i = 0; i < len; i++) {
            uint32_t b = gt_cmp_f2u(x[i]) & 0x7fffffffu;
            m = b > m ? b : m;
        }
    }
    return m;
}

static inline int fp4_code(float v, float inv)
{
    float t = fabsf(v) * inv;
    /* Nearest e2m1 magnitude, ties to the even code (OCP MX rounding). */
    int m = (t > 0.25f) + (t >= 0.75f) + (t > 1.25f) + (t >= 1.75f) + (t > 2.5f) + (t >= 3.5f) +
            (t > 5.0f);
    return m | ((v < 0.0f && m) ? 8 : 0);
}

static void quant_scalar(gt_cmp_codec_t codec, const float *v, size_t len, float s, float inv,
                         uint8_t *out, float *e)
{
    const int qmax = gt_cmp_qmax(codec);
    for (size_t i = 0; i < len; i++) {
        float vi = v[i], y;
        int code;
        if (codec == GT_CMP_FP4) {
            code = fp4_code(vi, inv);
            y = gt_cmp_fp4_values[code] * s;
        } else {
            int q = (int)rintf(vi * inv);
            q = q > qmax ? qmax : q < -qmax ? -qmax : q;
            y = (float)q * s;
            code = q;
        }
        if (codec == GT_CMP_INT8) {
            out[i] = (uint8_t)code;
        } else if (i % 2 == 0) {
            out[i / 2] = (uint8_t)(code & 15);
        } else {
            out[i / 2] = (uint8_t)(out[i / 2] | ((code & 15) << 4));
        }
        if (e) e[i] = vi - y;
    }
}

static void dequant_scalar(gt_cmp_codec_t codec, const uint8_t *in, size_t len, float s, float *out)
{
    for (size_t i = 0; i < len; i++) {
        if (codec == GT_CMP_INT8) {
            out[i] = (float)(int8_t)in[i] * s;
        } else {
            unsigned nib = (i % 2 == 0) ? (in[i / 2] & 15u) : (in[i / 2] >> 4);
            if (codec == GT_CMP_FP4)
                out[i] = gt_cmp_fp4_values[nib] * s;
            else
                out[i] = (float)((int)nib - ((nib & 8u) ? 16 : 0)) * s;
        }
    }
}

const gt_cmp_kernels_t gt_cmp_kernels_scalar = {"scalar", absmax_scalar, quant_scalar,
                                                dequant_scalar};

/* ---- kernel choice ---- */

static const gt_cmp_kernels_t *kernels_auto;
static const gt_cmp_kernels_t *kernels_forced;
static pthread_once_t kernels_once = PTHREAD_ONCE_INIT;

static void kernels_init(void)
{
    const char *isa = getenv("GT_CMP_ISA");
    int cap = 2; /* 0 scalar, 1 avx2, 2 avx512 */
    if (isa && strcmp(isa, "scalar") == 0) cap = 0;
    if (isa && strcmp(isa, "avx2") == 0) cap = 1;
    kernels_auto = &gt_cmp_kernels_scalar;
#if defined(__x86_64__)
    if (cap >= 1 && gt_cmp_kernels_avx2 && __builtin_cpu_supports("avx2"))
        kernels_auto = gt_cmp_kernels_avx2;
    if (cap >= 2 && gt_cmp_kernels_avx512 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw"))
        kernels_auto = gt_cmp_kernels_avx512;
#else
    (void)cap;
#endif
}

const gt_cmp_kernels_t *gt_cmp_kernels(void)
{
    pthread_once(&kernels_once, kernels_init);
    return kernels_forced ? kernels_forced : kernels_auto;
}

void gt_cmp_kernels_force(const gt_cmp_kernels_t *k)
{
    kernels_forced = k;
}

/* ---- dense payloads ---- */

size_t gt_cmp_dense_size(gt_cmp_codec_t codec, uint32_t block, size_t n)
{
    if (n > SIZE_MAX / 8) return 0;
    switch (codec) {
    case GT_CMP_FP32: return n * 4;
    case GT_CMP_BF16: return n * 2;
    case GT_CMP_INT8:
    case GT_CMP_INT4:
    case GT_CMP_FP4: {
        size_t nb = (n + block - 1) / block,
               ng = (nb + GT_CMP_GROUP_BLOCKS - 1) / GT_CMP_GROUP_BLOCKS;
        return ng + nb + (codec == GT_CMP_INT8 ? n : (n + 1) / 2);
    }
    case GT_CMP_INT2: {
        size_t nb = (n + block - 1) / block,
               ng = (nb + GT_CMP_GROUP_BLOCKS - 1) / GT_CMP_GROUP_BLOCKS;
        return ng + 2 * nb + (n + 3) / 4; /* two scale codes a block: lo and hi */
    }
    case GT_CMP_TOPK: break;
    }
    return 0;
}

/* Smallest E >= -110 with 1.9375 * qmax * 2^E >= a (a > 0 finite, < 2^100): E <= 97. */
static int group_exponent(float a, int qmax)
{
    const float top = 1.9375f * (float)qmax;
    int E = ilogbf(a) - ilogbf(top);
    if (E < -110) E = -110;
    while (ldexpf(top, E) < a) E++;
    while (E > -110 && ldexpf(top, E - 1) >= a) E--;
    return E;
}

/* Smallest block code c with scale(g, c) * qmax >= a; exists because the group's E covers
 * its largest block, and the products are exact. The scales are exactly the floats with a
 * 4-bit mantissa in 16 binades, so a / qmax rounded up to 4 mantissa bits is a guess at most
 * one code off; the exact comparisons then settle it (the same answer as a binary search). */
static unsigned block_code(unsigned g, float a, int qmax)
{
    uint32_t b = (gt_cmp_f2u(a / (float)qmax) + 0x7ffffu) & ~0x7ffffu;
    int ex = (int)(b >> 23) - (int)(g - 16u);
    int c = ex < 0 ? 0 : ex > 15 ? 255 : (ex << 4) | (int)((b >> 19) & 15u);
    while (c < 255 && gt_cmp_scale(g, (unsigned)c) * (float)qmax < a) c++;
    while (c > 0 && gt_cmp_scale(g, (unsigned)c - 1) * (float)qmax >= a) c--;
    return (unsigned)c;
}

static gt_status_t encode_blocks(gt_cmp_codec_t codec, uint32_t block, const float *x, float *e,
                                 size_t n, uint8_t *payload)
{
    const gt_cmp_kernels_t *K = gt_cmp_kernels();
    const int qmax = gt_cmp_qmax(codec);
    const size_t nb = (n + block - 1) / block;
    const size_t ng = (nb + GT_CMP_GROUP_BLOCKS - 1) / GT_CMP_GROUP_BLOCKS;
    uint8_t *gexp = payload, *bcode = payload + ng, *codes = payload + ng + nb;
    uint32_t amax[GT_CMP_GROUP_BLOCKS];

    for (size_t g = 0; g < ng; g++) {
        size_t j0 = g * GT_CMP_GROUP_BLOCKS;
        size_t j1 = j0 + GT_CMP_GROUP_BLOCKS < nb ? j0 + GT_CMP_GROUP_BLOCKS : nb;
        uint32_t gmax = 0;
        for (size_t j = j0; j < j1; j++) {
            size_t off = j * block, len = n - off < block ? n - off : block;
            amax[j - j0] = K->absmax(x + off, e ? e + off : NULL, len);
            gmax = amax[j - j0] > gmax ? amax[j - j0] : gmax;
        }
        if (gmax >= GT_CMP_ABS_LIMIT) {
            GT_ERROR("compress: %s input has a %s value near element %zu", gt_cmp_codec_name(codec),
                     gmax >= GT_CMP_ABS_INF ? "NaN/Inf" : ">= 2^100", j0 * block);
            return GT_ERR_INVALID;
        }
        if (gmax == 0) {
            gexp[g] = 0;
            for (size_t j = j0; j < j1; j++) bcode[j] = 0;
            size_t c0 = j0 * block, c1 = j1 * block < n ? j1 * block : n;
            if (codec == GT_CMP_INT8)
                memset(codes + c0, 0, c1 - c0);
            else
                memset(codes + c0 / 2, 0, (c1 + 1) / 2 - c0 / 2);
            continue; /* v - 0 = v: the residual already holds it */
        }
        unsigned gc = (unsigned)(group_exponent(gt_cmp_u2f(gmax), qmax) + 128);
        gexp[g] = (uint8_t)gc;
        for (size_t j = j0; j < j1; j++) {
            size_t off = j * block, len = n - off < block ? n - off : block;
            unsigned c = block_code(gc, gt_cmp_u2f(amax[j - j0]), qmax);
            float s = gt_cmp_scale(gc, c), inv = 1.0f / s;
            bcode[j] = (uint8_t)c;
            uint8_t *out = codes + (codec == GT_CMP_INT8 ? off : off / 2);
            K->quant(codec, e ? e + off : x + off, len, s, inv, out, e ? e + off : NULL);
        }
    }
    return GT_OK;
}

/* int2 (the values of a top-k): sign and one of two magnitudes per block, lo and hi, each a
 * 4.4 block code under the group's exponent (so int2 spends 2 bytes a block on scales where
 * int8/int4/fp4 spend 1). Why two free levels rather than a grid {1, 3} x one scale: a top-k
 * keeps magnitudes from its threshold up, bunched just above it (Gaussian data at 1%: between
 * 2.6 and 3.5 sigma), so a grid through zero puts its levels far from every value (43% relative
 * error on such data, worse than sign x mean); two levels fitted to the block (Lloyd-Max for
 * one bit of magnitude) leave about 6%. The fit: split at the mean magnitude, lo and hi the
 * means of the two sides, split again at their midpoint, INT2_LLOYD times; then each level is
 * rounded to the nearest representable scale (at or above the smallest), and a value takes hi
 * when 2|v| >= lo + hi (exact in double, so no rounding choice is left). Code of element i:
 * 2 bits at bit 2(i mod 4) of byte i/4; bit 1 the sign, bit 0 the magnitude (0 lo, 1 hi).
 * Zero has no code (kept values are not near zero): it becomes +lo. Scalar only: the kept
 * values are a few percent of a vector, and one implementation is its own reference. */
#define INT2_LLOYD 4

/* Nearest scale of group code g to a (a >= 0, below the group's largest scale): the smallest
 * at or above a, or the one below it when that is closer (exact differences in double). */
static unsigned int2_code(unsigned g, float a)
{
    unsigned c = block_code(g, a, 1);
    if (c > 0 &&
        (double)a - (double)gt_cmp_scale(g, c - 1) < (double)gt_cmp_scale(g, c) - (double)a)
        c--;
    return c;
}

/* lo and hi of one block's magnitudes |v[0, len)| (see above). */
static void int2_fit(const float *v, size_t len, float *lo_p, float *hi_p)
{
    double sum = 0.0;
    for (size_t i = 0; i < len; i++) sum += fabs((double)v[i]);
    double t = sum / (double)len, lo = t, hi = t;
    for (int it = 0; it < INT2_LLOYD; it++) {
        double sl = 0.0, sh = 0.0;
        size_t nl = 0;
        for (size_t i = 0; i < len; i++) {
            double a = fabs((double)v[i]);
            if (a < t) {
                sl += a;
                nl++;
            } else {
                sh += a;
            }
        }
        lo = nl ? sl / (double)nl : t;
        hi = nl < len ? sh / (double)(len - nl) : t;
        t = 0.5 * (lo + hi);
    }
    *lo_p = (float)lo;
    *hi_p = (float)hi;
}

static gt_status_t encode_int2(uint32_t block, const float *x, float *e, size_t n, uint8_t *payload)
{
    const size_t nb = (n + block - 1) / block;
    const size_t ng = (nb + GT_CMP_GROUP_BLOCKS - 1) / GT_CMP_GROUP_BLOCKS;
    uint8_t *gexp = payload, *lcode = payload + ng, *hcode = payload + ng + nb;
    uint8_t *codes = payload + ng + 2 * nb;
    float lo[GT_CMP_GROUP_BLOCKS], hi[GT_CMP_GROUP_BLOCKS];
    memset(codes, 0, (n + 3) / 4);
    for (size_t g = 0; g < ng; g++) {
        size_t j0 = g * GT_CMP_GROUP_BLOCKS;
        size_t j1 = j0 + GT_CMP_GROUP_BLOCKS < nb ? j0 + GT_CMP_GROUP_BLOCKS : nb;
        float hmax = 0.0f;
        for (size_t j = j0; j < j1; j++) {
            size_t off = j * block, len = n - off < block ? n - off : block;
            uint32_t amax = 0;
            if (e) {
                for (size_t i = off; i < off + len; i++) {
                    e[i] += x[i];
                    uint32_t b = gt_cmp_f2u(e[i]) & 0x7fffffffu;
                    amax = b > amax ? b : amax;
                }
            } else {
                for (size_t i = off; i < off + len; i++) {
                    uint32_t b = gt_cmp_f2u(x[i]) & 0x7fffffffu;
                    amax = b > amax ? b : amax;
                }
            }
            if (amax >= GT_CMP_ABS_LIMIT) {
                GT_ERROR("compress: int2 input has a %s value near element %zu",
                         amax >= GT_CMP_ABS_INF ? "NaN/Inf" : ">= 2^100", off);
                return GT_ERR_INVALID;
            }
            int2_fit(e ? e + off : x + off, len, &lo[j - j0], &hi[j - j0]);
            hmax = hi[j - j0] > hmax ? hi[j - j0] : hmax;
        }
        if (hmax == 0.0f) { /* every value of the group is zero: sent as zeros, nothing lost */
            gexp[g] = 0;
            for (size_t j = j0; j < j1; j++) lcode[j] = hcode[j] = 0;
            continue;
        }
        unsigned gc = (unsigned)(group_exponent(hmax, 1) + 128);
        gexp[g] = (uint8_t)gc;
        for (size_t j = j0; j < j1; j++) {
            size_t off = j * block, len = n - off < block ? n - off : block;
            unsigned cl = int2_code(gc, lo[j - j0]), ch = int2_code(gc, hi[j - j0]);
            float sl = gt_cmp_scale(gc, cl), sh = gt_cmp_scale(gc, ch);
            double split = (double)sl + (double)sh;
            lcode[j] = (uint8_t)cl;
            hcode[j] = (uint8_t)ch;
            const float *v = e ? e + off : x + off;
            for (size_t i = 0; i < len; i++) {
                float vi = v[i];
                unsigned mag = 2.0 * fabs((double)vi) >= split, neg = vi < 0.0f;
                size_t at = off + i;
                codes[at / 4] = (uint8_t)(codes[at / 4] | ((neg << 1 | mag) << (2 * (at % 4))));
                if (e) {
                    float y = mag ? sh : sl;
                    e[at] = vi - (neg ? -y : y);
                }
            }
        }
    }
    return GT_OK;
}

static void decode_int2(uint32_t block, const uint8_t *payload, size_t n, float *out)
{
    const size_t nb = (n + block - 1) / block;
    const size_t ng = (nb + GT_CMP_GROUP_BLOCKS - 1) / GT_CMP_GROUP_BLOCKS;
    const uint8_t *gexp = payload, *lcode = payload + ng, *hcode = payload + ng + nb;
    const uint8_t *codes = payload + ng + 2 * nb;
    for (size_t j = 0; j < nb; j++) {
        size_t off = j * block, len = n - off < block ? n - off : block;
        unsigned g = gexp[j / GT_CMP_GROUP_BLOCKS];
        if (g == 0) {
            memset(out + off, 0, len * sizeof(float));
            continue;
        }
        float sl = gt_cmp_scale(g, lcode[j]), sh = gt_cmp_scale(g, hcode[j]);
        const float lv[4] = {sl, sh, -sl, -sh};
        for (size_t i = off; i < off + len; i++) out[i] = lv[(codes[i / 4] >> (2 * (i % 4))) & 3u];
    }
}

gt_status_t gt_cmp_dense_encode(gt_cmp_codec_t codec, uint32_t block, const float *x, float *e,
                                size_t n, uint8_t *payload)
{
    if (n == 0) return GT_OK;
    if (gt_cmp_is_block(codec)) return encode_blocks(codec, block, x, e, n, payload);
    if (codec == GT_CMP_INT2) return encode_int2(block, x, e, n, payload);
    uint32_t bad = 0;
    if (codec == GT_CMP_FP32) { /* v = x (+ e), sent as is: the residual becomes 0 */
        bad = gt_cmp_kernels()->absmax(x, e, n) >= GT_CMP_ABS_INF;
        memcpy(payload, e ? e : x, n * sizeof(float));
        if (e) memset(e, 0, n * sizeof(float));
    } else { /* bf16, round to nearest even; the largest finite values stay finite. Two
              * loops without branches inside, so the compiler vectorizes them. */
        if (e) {
            for (size_t i = 0; i < n; i++) {
                float v = e[i] + x[i];
                uint32_t b = gt_cmp_f2u(v);
                bad |= (b & 0x7fffffffu) >= GT_CMP_ABS_INF;
                uint32_t r = (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
                r -= (r & 0x7fffu) == 0x7f80u;
                uint16_t h = (uint16_t)r;
                memcpy(payload + 2 * i, &h, 2);
                e[i] = v - gt_cmp_u2f(r << 16);
            }
        } else {
            for (size_t i = 0; i < n; i++) {
                uint32_t b = gt_cmp_f2u(x[i]);
                bad |= (b & 0x7fffffffu) >= GT_CMP_ABS_INF;
                uint32_t r = (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
                r -= (r & 0x7fffu) == 0x7f80u;
                uint16_t h = (uint16_t)r;
                memcpy(payload + 2 * i, &h, 2);
            }
        }
    }
    if (bad) {
        GT_ERROR("compress: %s input has a NaN/Inf value", gt_cmp_codec_name(codec));
        return GT_ERR_INVALID;
    }
    return GT_OK;
}

gt_status_t gt_cmp_dense_check(gt_cmp_codec_t codec, uint32_t block, const uint8_t *payload,
                               size_t n)
{
    if (codec == GT_CMP_FP32 || codec == GT_CMP_BF16) {
        uint32_t bad = 0;
        if (codec == GT_CMP_FP32) {
            for (size_t i = 0; i < n; i++) {
                uint32_t b;
                memcpy(&b, payload + 4 * i, 4);
                bad |= (b & 0x7fffffffu) >= GT_CMP_ABS_INF;
            }
        } else {
            for (size_t i = 0; i < n; i++) {
                uint16_t h;
                memcpy(&h, payload + 2 * i, 2);
                bad |= (h & 0x7f80u) == 0x7f80u;
            }
        }
        return bad ? GT_ERR_CORRUPT : GT_OK;
    }
    size_t nb = (n + block - 1) / block, ng = (nb + GT_CMP_GROUP_BLOCKS - 1) / GT_CMP_GROUP_BLOCKS;
    for (size_t g = 0; g < ng; g++)
        if (payload[g] != 0 && (payload[g] < GT_CMP_EXP_MIN || payload[g] > GT_CMP_EXP_MAX))
            return GT_ERR_CORRUPT;
    return GT_OK;
}

void gt_cmp_dense_decode(gt_cmp_codec_t codec, uint32_t block, const uint8_t *payload, size_t n,
                         float *out)
{
    if (n == 0) return;
    if (codec == GT_CMP_FP32) {
        memcpy(out, payload, n * 4);
        return;
    }
    if (codec == GT_CMP_BF16) {
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, payload + 2 * i, 2);
            out[i] = gt_cmp_u2f((uint32_t)h << 16);
        }
        return;
    }
    if (codec == GT_CMP_INT2) {
        decode_int2(block, payload, n, out);
        return;
    }
    const gt_cmp_kernels_t *K = gt_cmp_kernels();
    const size_t nb = (n + block - 1) / block;
    const size_t ng = (nb + GT_CMP_GROUP_BLOCKS - 1) / GT_CMP_GROUP_BLOCKS;
    const uint8_t *gexp = payload, *bcode = payload + ng, *codes = payload + ng + nb;
    for (size_t j = 0; j < nb; j++) {
        size_t off = j * block, len = n - off < block ? n - off : block;
        unsigned g = gexp[j / GT_CMP_GROUP_BLOCKS];
        if (g == 0) {
            memset(out + off, 0, len * sizeof(float));
            continue;
        }
        K->dequant(codec, codes + (codec == GT_CMP_INT8 ? off : off / 2), len,
                   gt_cmp_scale(g, bcode[j]), out + off);
    }
}

gt_status_t gt_cmp_fpenv_check(void)
{
    if (fegetround() != FE_TONEAREST) {
        GT_ERROR("compress: the rounding mode is not round-to-nearest; frames would differ");
        return GT_ERR_UNSUPPORTED;
    }
#if defined(__x86_64__) && defined(__SSE__)
    unsigned csr = __builtin_ia32_stmxcsr();
    if (csr & ((1u << 15) | (1u << 6))) {
        GT_ERROR("compress: flush-to-zero/denormals-are-zero is on (MXCSR 0x%x); frames would "
                 "differ",
                 csr);
        return GT_ERR_UNSUPPORTED;
    }
#endif
    return GT_OK;
}
