/* gt_compress.h — codecs for float vectors (pseudo-gradients): a float range becomes a
 * self-describing, checksummed frame and back. No I/O; docs/compress.md.
 *
 * Codecs (names as in sites.yaml `codec.name`):
 *   fp32  the floats as they are (a lossless baseline)
 *   bf16  round to nearest even bfloat16
 *   int8  block-scaled integers in [-127, 127]  } one scale per block of `block_size`
 *   int4  block-scaled integers in [-7, 7]      } elements (an 8-bit float relative to
 *   fp4   block-scaled e2m1 (OCP FP4)           } a shared exponent per 32 blocks)
 *   topk  the k = ceil(fraction * n) largest magnitudes (ties: the lower index wins), their
 *         indices delta-coded, their values in one of the five formats above or in
 *   int2  (topk values only) 2 bits a value: sign and one of two magnitudes, lo and hi,
 *         fitted per block of kept values (1-bit Lloyd-Max) and sent as two scale bytes
 *         (SparseLoCo-style: the kept values of a top-k bunch above its threshold and are
 *         never near zero, so no code is spent on zero)
 * Any codec can run with error feedback (docs/design.md §1): the caller owns a residual vector e
 * of n floats, zeroed before the first round; encode quantizes v = x + e and leaves
 * e = v - decode(frame) behind. An optional zstd stage follows (`auto` uses it for topk only,
 * where it pays; `on` keeps it wherever it makes the frame smaller).
 *
 * Frames are deterministic: the same input, residual and parameters give the same bytes on
 * every machine (scalar, AVX2 and AVX-512 kernels, and the CUDA path), provided the
 * floating-point environment is the C default (round to nearest, no flush-to-zero; encode
 * checks this) and, for frames that use the zstd stage, the same libzstd version.
 * Decoding treats the frame as hostile: every length and count is checked against the
 * element count the caller expects before anything is allocated or written, and a checksum
 * (XXH3-64 over the header, the stored payload and the uncompressed payload, from which the
 * decoded values follow) must match, so a flipped bit anywhere in a frame is an error, never
 * a crash. Decode logs its reason at debug level only; the caller logs the error with its
 * context (peer, round).
 *
 * A context is not thread safe; use one per thread. Contexts hold scratch buffers only, so
 * any context can decode any valid frame, whatever its codec.
 */
#ifndef GT_COMPRESS_H
#define GT_COMPRESS_H

#include "gt_base.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    GT_CMP_FP32 = 0,
    GT_CMP_BF16 = 1,
    GT_CMP_INT8 = 2,
    GT_CMP_INT4 = 3,
    GT_CMP_FP4 = 4,
    GT_CMP_TOPK = 5,
    GT_CMP_INT2 = 6 /* a value format of topk only: 2 bits a value, see below */
} gt_cmp_codec_t;
#define GT_CMP_N_CODECS 7

typedef enum {
    GT_CMP_ZSTD_AUTO = 0, /* zstd on the topk payload (indices compress well), not on dense */
    GT_CMP_ZSTD_ON = 1,   /* try zstd on every payload, keep it when the frame gets smaller */
    GT_CMP_ZSTD_OFF = 2
} gt_cmp_zstd_t;

/* Maps 1:1 onto the `codec.*` keys of sites.yaml. */
typedef struct {
    gt_cmp_codec_t codec;       /* codec.name */
    uint32_t block_size;        /* codec.block_size: multiple of 16 in [16, 4096] */
    double topk_fraction;       /* codec.topk_fraction: in (0, 1] */
    gt_cmp_codec_t topk_values; /* codec.topk_values: any codec but topk (int2 only here) */
    int error_feedback;         /* codec.error_feedback: encode needs a residual when set */
    gt_cmp_zstd_t zstd;         /* codec.zstd */
    int zstd_level;             /* codec.zstd_level: 1..19 */
} gt_cmp_params_t;

#define GT_CMP_PARAMS_INIT                                          \
    {                                                               \
        GT_CMP_INT8, 128, 0.01, GT_CMP_INT8, 1, GT_CMP_ZSTD_AUTO, 3 \
    }

#define GT_CMP_BLOCK_MIN   16u
#define GT_CMP_BLOCK_MAX   4096u
#define GT_CMP_HEADER_SIZE 56u /* bytes of frame header before the payload */

typedef struct gt_cmp_ctx gt_cmp_ctx_t;

/* What a frame's header says (after its own checks; the checksum is verified by decode). */
typedef struct {
    gt_cmp_codec_t codec;
    gt_cmp_codec_t values; /* topk: the values' format; otherwise == codec */
    uint32_t block_size;   /* elements per scale block */
    size_t n;              /* decoded element count */
    size_t k;              /* topk: kept elements; otherwise n */
    size_t payload_bytes;  /* payload size before the zstd stage */
    size_t frame_bytes;    /* the whole frame */
    int zstd;              /* 1 when the payload is zstd-compressed */
    int error_feedback;    /* 1 when the encoder used error feedback (informational) */
} gt_cmp_frame_info_t;

/* "fp32" ... "topk", "int2" <-> gt_cmp_codec_t. from_name returns GT_ERR_INVALID for other names.
 */
GT_API GT_MUST_USE gt_status_t gt_cmp_codec_from_name(const char *name, gt_cmp_codec_t *codec_p);
GT_API const char *gt_cmp_codec_name(gt_cmp_codec_t codec); /* "?" when out of range */
/* "auto" | "on" | "off" <-> gt_cmp_zstd_t. */
GT_API GT_MUST_USE gt_status_t gt_cmp_zstd_from_name(const char *name, gt_cmp_zstd_t *zstd_p);
GT_API const char *gt_cmp_zstd_name(gt_cmp_zstd_t zstd);

/* Checks every field. On failure returns GT_ERR_INVALID and, when `why` is not NULL, writes a
 * one-line reason naming the sites.yaml key and what is allowed (NUL-terminated, truncated to
 * why_len). Logs nothing, so a config loader can report file, line and column itself. */
GT_API GT_MUST_USE gt_status_t gt_cmp_params_check(const gt_cmp_params_t *params, char *why,
                                                   size_t why_len);

/* Makes a context (validates params; GT_ERR_INVALID when they are bad). */
GT_API GT_MUST_USE gt_status_t gt_cmp_create(const gt_cmp_params_t *params, gt_cmp_ctx_t **ctx_p);
/* Frees a context; NULL is fine. */
GT_API void gt_cmp_destroy(gt_cmp_ctx_t *ctx);
GT_API const gt_cmp_params_t *gt_cmp_params(const gt_cmp_ctx_t *ctx);

/* The largest frame `ctx` can make from n floats: a safe capacity for gt_cmp_encode. Returns
 * 0 when n is too large to bound in a size_t. */
GT_API size_t gt_cmp_bound(const gt_cmp_ctx_t *ctx, size_t n);

/* Encodes x[0, n) into frame[0, *frame_len_p); frame_cap must be >= gt_cmp_bound(ctx, n).
 * `residual` (n floats, caller-owned, zero before the first round) is required when error
 * feedback is on and must be NULL when it is off; it is updated in place and must not overlap
 * x. Errors: GT_ERR_INVALID (a bad argument, or a NaN/Inf input or, for int8/int4/fp4 values,
 * a magnitude >= 2^100: such a vector must not leave the site; the residual's contents are
 * then unspecified, zero it), GT_ERR_OVERFLOW (frame_cap too small; nothing changed),
 * GT_ERR_UNSUPPORTED (the rounding mode is not to-nearest or flush-to-zero is on). */
GT_API GT_MUST_USE gt_status_t gt_cmp_encode(gt_cmp_ctx_t *ctx, const float *x, size_t n,
                                             float *residual, void *frame, size_t frame_cap,
                                             size_t *frame_len_p);

/* Reads and checks a frame's header (not its checksum). GT_ERR_CORRUPT when malformed. */
GT_API GT_MUST_USE gt_status_t gt_cmp_frame_info(const void *frame, size_t frame_len,
                                                 gt_cmp_frame_info_t *info_p);

/* Decodes a frame of any codec into out[0, n); n is the element count the caller expects
 * (a frame for any other count is GT_ERR_CORRUPT). All outputs are finite. On error (GT_ERR_
 * CORRUPT: malformed, truncated, oversized, checksum mismatch) out is left untouched. */
GT_API GT_MUST_USE gt_status_t gt_cmp_decode(gt_cmp_ctx_t *ctx, const void *frame, size_t frame_len,
                                             float *out, size_t n);

/* The CPU kernels in use: "avx512" or "scalar" (GT_CMP_ISA=scalar forces the portable ones;
 * both give the same bytes). */
GT_API const char *gt_cmp_isa(void);

/* GPU path: the same frames, with quantize/dequantize on the GPU. x, residual and out are
 * device pointers; the frame is in host memory (it goes to the WAN next). Synchronous on the
 * default stream. Codecs fp32, bf16, int8, int4, fp4; topk returns GT_ERR_UNSUPPORTED, and so
 * does every call in a build without CUDA or on a machine without a GPU. */
GT_API GT_MUST_USE gt_status_t gt_cmp_encode_device(gt_cmp_ctx_t *ctx, const float *x, size_t n,
                                                    float *residual, void *frame, size_t frame_cap,
                                                    size_t *frame_len_p);
GT_API GT_MUST_USE gt_status_t gt_cmp_decode_device(gt_cmp_ctx_t *ctx, const void *frame,
                                                    size_t frame_len, float *out, size_t n);
/* 1 when this build has the CUDA path and a GPU is visible, else 0. */
GT_API int gt_cmp_device_available(void);

#ifdef __cplusplus
}
#endif

#endif /* GT_COMPRESS_H */
