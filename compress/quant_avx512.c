/* quant_avx512.c — AVX-512 (F+BW) versions of the per-block kernels of quant.c.
 *
 * They must give exactly the bits of the scalar kernels: the same IEEE operations in the
 * same order (one multiply v * inv, round to nearest even by the MXCSR default, which encode
 * checks; one multiply q * s; one subtract), no fused multiply-add (the target is built with
 * -ffp-contract=off), integer max for absmax. Tails shorter than 16 go to the scalar kernel.
 * Compiled with target attributes, chosen at run time (quant.c), so the library runs on any
 * x86-64.
 */
#include "compress_internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define GT_AVX512 __attribute__((target("avx512f,avx512bw")))

GT_AVX512 static uint32_t absmax_avx512(const float *x, float *e, size_t len)
{
    const __m512i absmask = _mm512_set1_epi32(0x7fffffff);
    __m512i m = _mm512_setzero_si512();
    size_t i = 0;
    if (e) {
        for (; i + 16 <= len; i += 16) {
            __m512 v = _mm512_add_ps(_mm512_loadu_ps(e + i), _mm512_loadu_ps(x + i));
            _mm512_storeu_ps(e + i, v);
            m = _mm512_max_epu32(m, _mm512_and_si512(_mm512_castps_si512(v), absmask));
        }
    } else {
        for (; i + 16 <= len; i += 16)
            m = _mm512_max_epu32(m, _mm512_and_si512(_mm512_loadu_si512(x + i), absmask));
    }
    uint32_t r = _mm512_reduce_max_epu32(m);
    if (i < len) {
        uint32_t t = gt_cmp_kernels_scalar.absmax(x + i, e ? e + i : NULL, len - i);
        r = t > r ? t : r;
    }
    return r;
}

/* 16 codes (low 4 bits used) -> 8 bytes, even element in the low nibble. */
GT_AVX512 static inline void store_nibbles(uint8_t *out, __m512i q)
{
    __m512i n = _mm512_and_si512(q, _mm512_set1_epi32(15));
    __m512i b = _mm512_or_si512(n, _mm512_slli_epi64(_mm512_srli_epi64(n, 32), 4));
    _mm_storel_epi64((__m128i *)out, _mm512_cvtepi64_epi8(b));
}

GT_AVX512 static void quant_avx512(gt_cmp_codec_t codec, const float *v, size_t len, float s,
                                   float inv, uint8_t *out, float *e)
{
    const __m512 vinv = _mm512_set1_ps(inv), vs = _mm512_set1_ps(s);
    size_t i = 0;
    if (codec == GT_CMP_FP4) {
        const __m512 table = _mm512_loadu_ps(gt_cmp_fp4_values);
        const __m512i one = _mm512_set1_epi32(1), eight = _mm512_set1_epi32(8);
        for (; i + 16 <= len; i += 16) {
            __m512 x = _mm512_loadu_ps(v + i);
            __m512 t = _mm512_mul_ps(_mm512_abs_ps(x), vinv);
            __m512i m = _mm512_setzero_si512();
            m = _mm512_mask_add_epi32(m, _mm512_cmp_ps_mask(t, _mm512_set1_ps(0.25f), _CMP_GT_OQ),
                                      m, one);
            m = _mm512_mask_add_epi32(m, _mm512_cmp_ps_mask(t, _mm512_set1_ps(0.75f), _CMP_GE_OQ),
                                      m, one);
            m = _mm512_mask_add_epi32(m, _mm512_cmp_ps_mask(t, _mm512_set1_ps(1.25f), _CMP_GT_OQ),
                                      m, one);
            m = _mm512_mask_add_epi32(m, _mm512_cmp_ps_mask(t, _mm512_set1_ps(1.75f), _CMP_GE_OQ),
                                      m, one);
            m = _mm512_mask_add_epi32(m, _mm512_cmp_ps_mask(t, _mm512_set1_ps(2.5f), _CMP_GT_OQ), m,
                                      one);
            m = _mm512_mask_add_epi32(m, _mm512_cmp_ps_mask(t, _mm512_set1_ps(3.5f), _CMP_GE_OQ), m,
                                      one);
            m = _mm512_mask_add_epi32(m, _mm512_cmp_ps_mask(t, _mm512_set1_ps(5.0f), _CMP_GT_OQ), m,
                                      one);
            __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ) &
                            _mm512_test_epi32_mask(m, m);
            __m512i code = _mm512_mask_or_epi32(m, neg, m, eight);
            store_nibbles(out + i / 2, code);
            if (e) {
                __m512 y = _mm512_mul_ps(_mm512_permutexvar_ps(code, table), vs);
                _mm512_storeu_ps(e + i, _mm512_sub_ps(x, y));
            }
        }
    } else {
        const int qmax = gt_cmp_qmax(codec);
        const __m512i hi = _mm512_set1_epi32(qmax), lo = _mm512_set1_epi32(-qmax);
        for (; i + 16 <= len; i += 16) {
            __m512 x = _mm512_loadu_ps(v + i);
            __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(x, vinv));
            q = _mm512_min_epi32(_mm512_max_epi32(q, lo), hi);
            if (codec == GT_CMP_INT8)
                _mm_storeu_si128((__m128i *)(out + i), _mm512_cvtepi32_epi8(q));
            else
                store_nibbles(out + i / 2, q);
            if (e) {
                __m512 y = _mm512_mul_ps(_mm512_cvtepi32_ps(q), vs);
                _mm512_storeu_ps(e + i, _mm512_sub_ps(x, y));
            }
        }
    }
    if (i < len)
        gt_cmp_kernels_scalar.quant(codec, v + i, len - i, s, inv,
                                    out + (codec == GT_CMP_INT8 ? i : i / 2), e ? e + i : NULL);
}

GT_AVX512 static void dequant_avx512(gt_cmp_codec_t codec, const uint8_t *in, size_t len, float s,
                                     float *out)
{
    const __m512 vs = _mm512_set1_ps(s);
    size_t i = 0;
    if (codec == GT_CMP_INT8) {
        for (; i + 16 <= len; i += 16) {
            __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(in + i)));
            _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_cvtepi32_ps(q), vs));
        }
    } else {
        const __m512 table = _mm512_loadu_ps(gt_cmp_fp4_values);
        const __m512i low4 = _mm512_set1_epi64(15);
        for (; i + 16 <= len; i += 16) {
            __m512i b = _mm512_cvtepu8_epi64(_mm_loadl_epi64((const __m128i *)(in + i / 2)));
            __m512i c = _mm512_or_si512(_mm512_and_si512(b, low4),
                                        _mm512_slli_epi64(_mm512_srli_epi64(b, 4), 32));
            __m512 y;
            if (codec == GT_CMP_FP4)
                y = _mm512_permutexvar_ps(c, table);
            else
                y = _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(c, 28), 28));
            _mm512_storeu_ps(out + i, _mm512_mul_ps(y, vs));
        }
    }
    if (i < len)
        gt_cmp_kernels_scalar.dequant(codec, in + (codec == GT_CMP_INT8 ? i : i / 2), len - i, s,
                                      out + i);
}

static const gt_cmp_kernels_t kernels_avx512 = {"avx512", absmax_avx512, quant_avx512,
                                                dequant_avx512};
const gt_cmp_kernels_t *const gt_cmp_kernels_avx512 = &kernels_avx512;

#else
const gt_cmp_kernels_t *const gt_cmp_kernels_avx512 = NULL;
#endif
