/* compress_internal.h — what the files of compress/ share: the frame layout, the block-scale
 * arithmetic, the SIMD kernel table and the CUDA entry points.
 *
 * Frame (all integers little-endian):
 *   0  u32 magic "GTCF"      4 u8 version   5 u8 codec   6 u8 value codec   7 u8 flags
 *   8  u32 block_size       12 u32 reserved (0)
 *  16  u64 n (elements)     24 u64 k (topk: kept; else n)
 *  32  u64 raw payload bytes (before zstd)   40 u64 stored payload bytes (after the header)
 *  48  u64 checksum: h = XXH3(header[0,48)); if zstd, h = XXH3(stored, seed h);
 *      checksum = XXH3(raw payload, seed h)
 *  56  payload
 *
 * Block-scaled payload (int8/int4/fp4), for n elements in nb = ceil(n / B) blocks grouped
 * by GT_CMP_GROUP_BLOCKS into ng groups:
 *   [ng bytes: group exponent code][nb bytes: block scale code][codes]
 * codes: int8 one byte each; int4/fp4 two per byte, element i in byte i/2, low nibble first.
 * Group exponent code g: 0 = every block of the group is zero; else E = g - 128, with
 * g in [GT_CMP_EXP_MIN, GT_CMP_EXP_MAX]. Block scale code c (an unsigned 4.4 float):
 *   s = (16 + (c & 15)) * 2^((c >> 4) - 19 + E)
 * which is exact in float, as is every decoded value q * s (q * (16 + m) < 2^24), so the
 * decoder does no rounding at all and every implementation gets the same bits.
 * The encoder picks the smallest E (then c) with s * qmax >= the group's (block's) absmax,
 * and quantizes q = round_nearest_even(v * (1 / s)), clamped to the format.
 */
#ifndef GT_COMPRESS_INTERNAL_H
#define GT_COMPRESS_INTERNAL_H

#include "gt_compress.h"

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GT_CMP_MAGIC        0x46435447u /* "GTCF" */
#define GT_CMP_VERSION      1u
#define GT_CMP_FLAG_ZSTD    0x01u
#define GT_CMP_FLAG_EF      0x02u
#define GT_CMP_FLAGS_KNOWN  0x03u
#define GT_CMP_GROUP_BLOCKS 32u
#define GT_CMP_EXP_MIN      18u  /* E = -110: the smallest scale is 2^-125, so s/2 is normal */
#define GT_CMP_EXP_MAX      228u /* E = 100 */
#define GT_CMP_ABS_LIMIT    0x71800000u /* bits of 2^100: quantized formats take |v| below */
#define GT_CMP_ABS_INF      0x7f800000u

static inline uint32_t gt_cmp_f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float gt_cmp_u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Largest code magnitude of a block format: 127, 7 or 6. */
static inline int gt_cmp_qmax(gt_cmp_codec_t c)
{
    return c == GT_CMP_INT8 ? 127 : c == GT_CMP_INT4 ? 7 : 6;
}
static inline int gt_cmp_is_block(gt_cmp_codec_t c)
{
    return c == GT_CMP_INT8 || c == GT_CMP_INT4 || c == GT_CMP_FP4;
}

/* The block scale for group exponent code g (nonzero) and block code c (exact). */
float gt_cmp_scale(unsigned g, unsigned c);

/* Bytes of a dense payload (every codec but topk) for n elements. 0 if it overflows. */
size_t gt_cmp_dense_size(gt_cmp_codec_t codec, uint32_t block, size_t n);

/* Encodes x[0, n) (plus e[0, n) in place when e is not NULL: e <- x + e, then e <- e - decoded)
 * into a dense payload of gt_cmp_dense_size bytes. GT_ERR_INVALID on NaN/Inf or out of range. */
gt_status_t gt_cmp_dense_encode(gt_cmp_codec_t codec, uint32_t block, const float *x, float *e,
                                size_t n, uint8_t *payload);
/* Checks a dense payload (group exponents in range; fp32/bf16 values finite). */
gt_status_t gt_cmp_dense_check(gt_cmp_codec_t codec, uint32_t block, const uint8_t *payload,
                               size_t n);
/* Decodes a checked dense payload. */
void gt_cmp_dense_decode(gt_cmp_codec_t codec, uint32_t block, const uint8_t *payload, size_t n,
                         float *out);

/* GT_ERR_UNSUPPORTED (logged) unless rounding is to-nearest and flush-to-zero is off:
 * encoding is deterministic only in the default floating-point environment. */
gt_status_t gt_cmp_fpenv_check(void);

/* Per-block kernels, one table per instruction set; every table gives the same bits. */
typedef struct {
    const char *name;
    /* absmax of |v| as float bits (finite floats order like their bits); when e != NULL,
     * first e[i] += x[i] and v = e, else v = x. */
    uint32_t (*absmax)(const float *x, float *e, size_t len);
    /* q[i] = clamp(rint(v[i] * inv)), stored as codec codes at out (int8: out[i]; int4/fp4:
     * nibbles, len even except for the frame's last block); when e != NULL, e[i] = v[i] -
     * q[i] * s (v may be e). */
    void (*quant)(gt_cmp_codec_t codec, const float *v, size_t len, float s, float inv,
                  uint8_t *out, float *e);
    void (*dequant)(gt_cmp_codec_t codec, const uint8_t *in, size_t len, float s, float *out);
} gt_cmp_kernels_t;

extern const gt_cmp_kernels_t gt_cmp_kernels_scalar;
/* NULL when the compiler cannot build them; usable only when the CPU has AVX-512 F+BW
 * (resp. AVX2). */
extern const gt_cmp_kernels_t *const gt_cmp_kernels_avx512;
extern const gt_cmp_kernels_t *const gt_cmp_kernels_avx2;
/* The table in use: the best the CPU runs (avx512, avx2, scalar); GT_CMP_ISA=scalar|avx2
 * caps it (for comparisons). */
const gt_cmp_kernels_t *gt_cmp_kernels(void);
/* Tests: force a table (NULL = back to automatic). */
void gt_cmp_kernels_force(const gt_cmp_kernels_t *k);

/* fp4 (e2m1) values by code: 0 .5 1 1.5 2 3 4 6, then the same negated (code 8 = -0). */
extern const float gt_cmp_fp4_values[16];

/* Top-k (topk.c). Keeps the k largest |v| (ties: lower index) of v = x (+ e in place). */
size_t gt_cmp_topk_count(double fraction, size_t n);
size_t gt_cmp_topk_max_size(gt_cmp_codec_t values, uint32_t block, size_t n, size_t k);

typedef struct {
    uint32_t *keys; /* candidate keys scratch */
    size_t keys_cap;
    float *vals;   /* k values */
    float *vres;   /* k residuals of the value codec */
    uint64_t *idx; /* k indices */
    size_t k_cap;
} gt_cmp_topk_scratch_t;

gt_status_t gt_cmp_topk_encode(gt_cmp_topk_scratch_t *sc, gt_cmp_codec_t values, uint32_t block,
                               const float *x, float *e, size_t n, size_t k, uint8_t *payload,
                               size_t *payload_len_p);
gt_status_t gt_cmp_topk_decode(gt_cmp_topk_scratch_t *sc, gt_cmp_codec_t values, uint32_t block,
                               const uint8_t *payload, size_t payload_len, size_t n, size_t k,
                               float *out);
void gt_cmp_topk_scratch_free(gt_cmp_topk_scratch_t *sc);

/* CUDA path (quant_cuda.cu, or device_none.c without CUDA). Payload in host memory. */
int gt_cmp_cuda_available(void);
gt_status_t gt_cmp_cuda_encode_payload(gt_cmp_codec_t codec, uint32_t block, const float *x,
                                       float *e, size_t n, uint8_t *payload);
gt_status_t gt_cmp_cuda_decode_payload(gt_cmp_codec_t codec, uint32_t block, const uint8_t *payload,
                                       size_t n, float *out);

#ifdef __cplusplus
}
#endif

#endif /* GT_COMPRESS_INTERNAL_H */
