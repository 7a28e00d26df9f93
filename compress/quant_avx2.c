/* quant_avx2.c — AVX2 versions of the per-block kernels of quant.c, for x86-64 machines
 * without AVX-512 (chosen at run time; quant.c).
 *
 * Same rules as quant_avx512.c: the scalar kernels' IEEE operations in the same order, one
 * rounding each, round to nearest even by the MXCSR default (encode checks it), no fused
 * multiply-add, integer max for absmax; tails go to the scalar kernel. A negated fp4 value
 * is built as -(m * s), which equals (-m) * s exactly.
 */
#include "compress_internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define GT_AVX2 __attribute__((target("avx2")))

GT_AVX2 static uint32_t absmax_avx2(const float *x, float *e, size_t len)
{
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff);
    __m256i m = _mm256_setzero_si256();
    size_t i = 0;
    if (e) {
        for (; i + 8 <= len; i += 8) {
            __m256 v = _mm256_add_ps(_mm256_loadu_ps(e + i), _mm256_loadu_ps(x + i));
            _mm256_storeu_ps(e + i, v);
            m = _mm256_max_epu32(m, _mm256_and_si256(_mm256_castps_si256(v), absmask));
        }
    } else {
        for (; i + 8 <= len; i += 8)
            m = _mm256_max_epu32(
                m, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i)), absmask));
    }
    uint32_t lanes[8], r = 0;
    _mm256_storeu_si256((__m256i *)lanes, m);
    for (int k = 0; k < 8; k++) r = lanes[k] > r ? lanes[k] : r;
    if (i < len) {
        uint32_t t = gt_cmp_kernels_scalar.absmax(x + i, e ? e + i : NULL, len - i);
        r = t > r ? t : r;
    }
    return r;
}

/* 16 codes in two vectors of 8 x i32 (each 0..15 after masking, or -128..127) -> 16 bytes in
 * element order. */
GT_AVX2 static inline __m128i pack16(__m256i a, __m256i b)
{
    __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xD8);
    return _mm_packs_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
}

/* 16 nibbles (two vectors of 8 codes) -> 8 bytes, even element in the low nibble. */
GT_AVX2 static inline void store_nibbles(uint8_t *out, __m256i a, __m256i b)
{
    const __m256i low4 = _mm256_set1_epi32(15);
    __m128i c = pack16(_mm256_and_si256(a, low4), _mm256_and_si256(b, low4)); /* 0..15 */
    __m128i r = _mm_or_si128(_mm_and_si128(c, _mm_set1_epi16(0x0f)),
                             _mm_and_si128(_mm_srli_epi16(c, 4), _mm_set1_epi16(0xf0)));
    _mm_storel_epi64((__m128i *)out, _mm_packus_epi16(r, r));
}

GT_AVX2 static inline __m256i fp4_step(__m256i m, __m256 c)
{
    return _mm256_sub_epi32(m, _mm256_castps_si256(c)); /* a true compare is -1 */
}

/* Nearest e2m1 magnitude code of t >= 0, ties to the even code (as fp4_code in quant.c). */
GT_AVX2 static inline __m256i fp4_mag(__m256 t)
{
    __m256i m = _mm256_setzero_si256();
    m = fp4_step(m, _mm256_cmp_ps(t, _mm256_set1_ps(0.25f), _CMP_GT_OQ));
    m = fp4_step(m, _mm256_cmp_ps(t, _mm256_set1_ps(0.75f), _CMP_GE_OQ));
    m = fp4_step(m, _mm256_cmp_ps(t, _mm256_set1_ps(1.25f), _CMP_GT_OQ));
    m = fp4_step(m, _mm256_cmp_ps(t, _mm256_set1_ps(1.75f), _CMP_GE_OQ));
    m = fp4_step(m, _mm256_cmp_ps(t, _mm256_set1_ps(2.5f), _CMP_GT_OQ));
    m = fp4_step(m, _mm256_cmp_ps(t, _mm256_set1_ps(3.5f), _CMP_GE_OQ));
    m = fp4_step(m, _mm256_cmp_ps(t, _mm256_set1_ps(5.0f), _CMP_GT_OQ));
    return m;
}

GT_AVX2 static void quant_avx2(gt_cmp_codec_t codec, const float *v, size_t len, float s, float inv,
                               uint8_t *out, float *e)
{
    const __m256 vinv = _mm256_set1_ps(inv), vs = _mm256_set1_ps(s);
    const __m256 signbit = _mm256_set1_ps(-0.0f);
    size_t i = 0;
    if (codec == GT_CMP_FP4) {
        const __m256 table = _mm256_loadu_ps(gt_cmp_fp4_values); /* magnitudes 0..7 */
        const __m256i eight = _mm256_set1_epi32(8);
        for (; i + 16 <= len; i += 16) {
            __m256i code[2];
            for (int h = 0; h < 2; h++) {
                __m256 x = _mm256_loadu_ps(v + i + 8 * h);
                __m256i m = fp4_mag(_mm256_mul_ps(_mm256_andnot_ps(signbit, x), vinv));
                __m256i nz = _mm256_xor_si256(_mm256_cmpeq_epi32(m, _mm256_setzero_si256()),
                                              _mm256_set1_epi32(-1));
                __m256i neg = _mm256_and_si256(
                    _mm256_castps_si256(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ)), nz);
                code[h] = _mm256_or_si256(m, _mm256_and_si256(neg, eight));
                if (e) {
                    __m256 y = _mm256_mul_ps(_mm256_permutevar8x32_ps(table, m), vs);
                    y = _mm256_xor_ps(y, _mm256_and_ps(_mm256_castsi256_ps(neg), signbit));
                    _mm256_storeu_ps(e + i + 8 * h, _mm256_sub_ps(x, y));
                }
            }
            store_nibbles(out + i / 2, code[0], code[1]);
        }
    } else {
        const int qmax = gt_cmp_qmax(codec);
        const __m256i hi = _mm256_set1_epi32(qmax), lo = _mm256_set1_epi32(-qmax);
        for (; i + 16 <= len; i += 16) {
            __m256i q[2];
            for (int h = 0; h < 2; h++) {
                __m256 x = _mm256_loadu_ps(v + i + 8 * h);
                q[h] = _mm256_cvtps_epi32(_mm256_mul_ps(x, vinv));
                q[h] = _mm256_min_epi32(_mm256_max_epi32(q[h], lo), hi);
                if (e) {
                    __m256 y = _mm256_mul_ps(_mm256_cvtepi32_ps(q[h]), vs);
                    _mm256_storeu_ps(e + i + 8 * h, _mm256_sub_ps(x, y));
                }
            }
            if (codec == GT_CMP_INT8)
                _mm_storeu_si128((__m128i *)(out + i), pack16(q[0], q[1]));
            else
                store_nibbles(out + i / 2, q[0], q[1]);
        }
    }
    if (i < len)
        gt_cmp_kernels_scalar.quant(codec, v + i, len - i, s, inv,
                                    out + (codec == GT_CMP_INT8 ? i : i / 2), e ? e + i : NULL);
}

GT_AVX2 static void dequant_avx2(gt_cmp_codec_t codec, const uint8_t *in, size_t len, float s,
                                 float *out)
{
    const __m256 vs = _mm256_set1_ps(s);
    size_t i = 0;
    if (codec == GT_CMP_INT8) {
        for (; i + 8 <= len; i += 8) {
            __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(in + i)));
            _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_cvtepi32_ps(q), vs));
        }
    } else {
        const __m256 table = _mm256_loadu_ps(gt_cmp_fp4_values);
        const __m256i low4 = _mm256_set1_epi64x(15);
        const __m256 signbit = _mm256_set1_ps(-0.0f);
        for (; i + 8 <= len; i += 8) {
            uint32_t four;
            memcpy(&four, in + i / 2, 4);
            __m256i b = _mm256_cvtepu8_epi64(_mm_cvtsi32_si128((int)four));
            __m256i c = _mm256_or_si256(_mm256_and_si256(b, low4),
                                        _mm256_slli_epi64(_mm256_srli_epi64(b, 4), 32));
            __m256 y;
            if (codec == GT_CMP_FP4) {
                __m256 mag = _mm256_mul_ps(_mm256_permutevar8x32_ps(table, c), vs);
                __m256i neg = _mm256_slli_epi32(_mm256_srli_epi32(c, 3), 31);
                y = _mm256_xor_ps(mag, _mm256_and_ps(_mm256_castsi256_ps(neg), signbit));
            } else {
                y = _mm256_mul_ps(
                    _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(c, 28), 28)), vs);
            }
            _mm256_storeu_ps(out + i, y);
        }
    }
    if (i < len)
        gt_cmp_kernels_scalar.dequant(codec, in + (codec == GT_CMP_INT8 ? i : i / 2), len - i, s,
                                      out + i);
}

static const gt_cmp_kernels_t kernels_avx2 = {"avx2", absmax_avx2, quant_avx2, dequant_avx2};
const gt_cmp_kernels_t *const gt_cmp_kernels_avx2 = &kernels_avx2;

#else
const gt_cmp_kernels_t *const gt_cmp_kernels_avx2 = NULL;
#endif
