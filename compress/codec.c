/* codec.c — the public codec API: names and params, contexts, the frame header, the zstd
 * stage and the checksum. The payloads themselves are built in quant.c (dense) and topk.c.
 *
 * Shape of encode: build the raw payload (straight into the frame when no zstd stage will
 * be tried, else into the context's scratch), optionally compress it into the frame, then
 * write the header with its checksum. Shape of decode: check every header field against the
 * caller's element count and the sizes they imply, undo zstd into scratch (sizes checked
 * first), verify the checksum, check the payload's own fields, and only then write `out`.
 */
#include "compress_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <xxhash.h>
#include <zstd.h>

#define GT_CMP_CTX_MAGIC 0x43504d43u

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "compress/ assumes a little-endian host (payload floats are stored as in memory)"
#endif

struct gt_cmp_ctx {
    uint32_t magic;
    gt_cmp_params_t p;
    ZSTD_CCtx *cctx;
    ZSTD_DCtx *dctx;
    uint8_t *raw; /* raw payload scratch (zstd stage, topk decode) */
    size_t raw_cap;
    gt_cmp_topk_scratch_t topk;
};

static const char *const codec_names[GT_CMP_N_CODECS] = {"fp32", "bf16", "int8", "int4",
                                                         "fp4",  "topk", "int2"};
static const char *const zstd_names[3] = {"auto", "on", "off"};

gt_status_t gt_cmp_codec_from_name(const char *name, gt_cmp_codec_t *codec_p)
{
    for (int i = 0; name && i < GT_CMP_N_CODECS; i++)
        if (strcmp(name, codec_names[i]) == 0) {
            *codec_p = (gt_cmp_codec_t)i;
            return GT_OK;
        }
    return GT_ERR_INVALID;
}

const char *gt_cmp_codec_name(gt_cmp_codec_t codec)
{
    return (unsigned)codec < GT_CMP_N_CODECS ? codec_names[codec] : "?";
}

gt_status_t gt_cmp_zstd_from_name(const char *name, gt_cmp_zstd_t *zstd_p)
{
    for (int i = 0; name && i < 3; i++)
        if (strcmp(name, zstd_names[i]) == 0) {
            *zstd_p = (gt_cmp_zstd_t)i;
            return GT_OK;
        }
    return GT_ERR_INVALID;
}

const char *gt_cmp_zstd_name(gt_cmp_zstd_t zstd)
{
    return (unsigned)zstd < 3 ? zstd_names[zstd] : "?";
}

gt_status_t gt_cmp_params_check(const gt_cmp_params_t *p, char *why, size_t why_len)
{
    const char *msg = NULL;
    char buf[160];
    if (!p)
        msg = "no parameters";
    else if ((unsigned)p->codec >= GT_CMP_N_CODECS)
        msg = "codec.name must be one of fp32, bf16, int8, int4, fp4, topk";
    else if (p->codec == GT_CMP_INT2)
        msg = "codec.name int2 is a format for top-k values only: use codec.name topk with "
              "codec.topk_values int2";
    else if (p->block_size < GT_CMP_BLOCK_MIN || p->block_size > GT_CMP_BLOCK_MAX ||
             p->block_size % 16 != 0) {
        snprintf(buf, sizeof(buf), "codec.block_size must be a multiple of 16 in [%u, %u] (got %u)",
                 GT_CMP_BLOCK_MIN, GT_CMP_BLOCK_MAX, p->block_size);
        msg = buf;
    } else if (!(p->topk_fraction > 0.0 && p->topk_fraction <= 1.0))
        msg = "codec.topk_fraction must be in (0, 1]";
    else if ((unsigned)p->topk_values >= GT_CMP_N_CODECS || p->topk_values == GT_CMP_TOPK)
        msg = "codec.topk_values must be one of fp32, bf16, int8, int4, fp4, int2";
    else if (p->error_feedback != 0 && p->error_feedback != 1)
        msg = "codec.error_feedback must be true or false";
    else if ((unsigned)p->zstd > GT_CMP_ZSTD_OFF)
        msg = "codec.zstd must be one of auto, on, off";
    else if (p->zstd_level < 1 || p->zstd_level > 19)
        msg = "codec.zstd_level must be an integer in [1, 19]";
    if (!msg) return GT_OK;
    if (why && why_len) snprintf(why, why_len, "%s", msg);
    return GT_ERR_INVALID;
}

gt_status_t gt_cmp_create(const gt_cmp_params_t *params, gt_cmp_ctx_t **ctx_p)
{
    char why[160];
    if (!ctx_p) return GT_ERR_INVALID;
    if (gt_cmp_params_check(params, why, sizeof(why)) != GT_OK) {
        GT_ERROR("compress: %s", why);
        return GT_ERR_INVALID;
    }
    gt_cmp_ctx_t *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) return GT_ERR_NOMEM;
    ctx->magic = GT_CMP_CTX_MAGIC;
    ctx->p = *params;
    ctx->cctx = ZSTD_createCCtx();
    ctx->dctx = ZSTD_createDCtx();
    if (!ctx->cctx || !ctx->dctx ||
        ZSTD_isError(
            ZSTD_CCtx_setParameter(ctx->cctx, ZSTD_c_compressionLevel, params->zstd_level)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(ctx->cctx, ZSTD_c_contentSizeFlag, 1)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(ctx->cctx, ZSTD_c_checksumFlag, 0))) {
        GT_ERROR("compress: cannot set up zstd");
        gt_cmp_destroy(ctx);
        return GT_ERR_NOMEM;
    }
    *ctx_p = ctx;
    return GT_OK;
}

void gt_cmp_destroy(gt_cmp_ctx_t *ctx)
{
    if (!ctx) return;
    ctx->magic = 0;
    ZSTD_freeCCtx(ctx->cctx);
    ZSTD_freeDCtx(ctx->dctx);
    free(ctx->raw);
    gt_cmp_topk_scratch_free(&ctx->topk);
    free(ctx);
}

const gt_cmp_params_t *gt_cmp_params(const gt_cmp_ctx_t *ctx)
{
    return ctx ? &ctx->p : NULL;
}

/* The largest raw payload for n elements (0: overflow; n == 0 gives 0 too, which is fine). */
static size_t raw_max(const gt_cmp_params_t *p, size_t n)
{
    if (p->codec != GT_CMP_TOPK) return gt_cmp_dense_size(p->codec, p->block_size, n);
    return gt_cmp_topk_max_size(p->topk_values, p->block_size, n,
                                gt_cmp_topk_count(p->topk_fraction, n));
}

size_t gt_cmp_bound(const gt_cmp_ctx_t *ctx, size_t n)
{
    if (!ctx) return 0;
    size_t r = raw_max(&ctx->p, n);
    if (n > 0 && r == 0) return 0;
    if (r > SIZE_MAX - GT_CMP_HEADER_SIZE) return 0;
    return GT_CMP_HEADER_SIZE + r;
}

static int grow_raw(gt_cmp_ctx_t *ctx, size_t want)
{
    if (want == 0) want = 1; /* never a NULL payload pointer, even for n = 0 */
    if (want <= ctx->raw_cap) return 0;
    uint8_t *q = realloc(ctx->raw, want);
    if (!q) return -1;
    ctx->raw = q;
    ctx->raw_cap = want;
    return 0;
}

static uint64_t frame_checksum(const uint8_t *header, const uint8_t *stored, size_t stored_len,
                               int zstd, const uint8_t *raw, size_t raw_len)
{
    XXH64_hash_t h = XXH3_64bits(header, 48);
    if (zstd) h = XXH3_64bits_withSeed(stored, stored_len, h);
    return XXH3_64bits_withSeed(raw, raw_len, h);
}

/* Writes the header after the payload has been built at raw (which is frame + header unless a
 * zstd stage is tried, then it is the scratch and the stored bytes go to the frame). */
static gt_status_t finish_frame(gt_cmp_ctx_t *ctx, gt_cmp_codec_t codec, gt_cmp_codec_t values,
                                size_t n, size_t k, const uint8_t *raw, size_t raw_len,
                                int try_zstd, int ef, uint8_t *frame, size_t *frame_len_p)
{
    uint8_t *stored = frame + GT_CMP_HEADER_SIZE;
    size_t stored_len = raw_len;
    int zstd = 0;
    if (try_zstd) {
        size_t c = raw_len > 1 ? ZSTD_compress2(ctx->cctx, stored, raw_len - 1, raw, raw_len) : 0;
        if (raw_len > 1 && !ZSTD_isError(c) && c < raw_len) {
            zstd = 1;
            stored_len = c;
        } else {
            memcpy(stored, raw, raw_len);
        }
    }
    gt_le_put32(frame, GT_CMP_MAGIC);
    frame[4] = GT_CMP_VERSION;
    frame[5] = (uint8_t)codec;
    frame[6] = (uint8_t)values;
    frame[7] = (uint8_t)((zstd ? GT_CMP_FLAG_ZSTD : 0) | (ef ? GT_CMP_FLAG_EF : 0));
    gt_le_put32(frame + 8, ctx->p.block_size);
    gt_le_put32(frame + 12, 0);
    gt_le_put64(frame + 16, n);
    gt_le_put64(frame + 24, k);
    gt_le_put64(frame + 32, raw_len);
    gt_le_put64(frame + 40, stored_len);
    gt_le_put64(frame + 48, frame_checksum(frame, stored, stored_len, zstd, raw, raw_len));
    *frame_len_p = GT_CMP_HEADER_SIZE + stored_len;
    return GT_OK;
}

/* Common argument checks of both encode paths; sets *try_zstd_p and *raw_p. */
static gt_status_t encode_prepare(gt_cmp_ctx_t *ctx, const float *x, size_t n, float *residual,
                                  void *frame, size_t frame_cap, size_t *frame_len_p,
                                  int *try_zstd_p, uint8_t **raw_p)
{
    if (!ctx || ctx->magic != GT_CMP_CTX_MAGIC || (!x && n) || !frame || !frame_len_p) {
        GT_ERROR("compress: encode: bad argument (NULL or destroyed context)");
        return GT_ERR_INVALID;
    }
    if (ctx->p.error_feedback ? (!residual && n) : residual != NULL) {
        GT_ERROR("compress: encode: error feedback is %s, so the residual must %s",
                 ctx->p.error_feedback ? "on" : "off",
                 ctx->p.error_feedback ? "be given" : "be NULL");
        return GT_ERR_INVALID;
    }
    size_t bound = gt_cmp_bound(ctx, n);
    if (bound == 0 || frame_cap < bound) {
        GT_ERROR("compress: encode: frame capacity %zu < gt_cmp_bound() = %zu for %zu elements",
                 frame_cap, bound, n);
        return GT_ERR_OVERFLOW;
    }
    const gt_cmp_params_t *p = &ctx->p;
    int try_zstd =
        p->zstd == GT_CMP_ZSTD_ON || (p->zstd == GT_CMP_ZSTD_AUTO && p->codec == GT_CMP_TOPK);
    uint8_t *raw = (uint8_t *)frame + GT_CMP_HEADER_SIZE;
    if (try_zstd) {
        if (grow_raw(ctx, bound - GT_CMP_HEADER_SIZE)) return GT_ERR_NOMEM;
        raw = ctx->raw;
    }
    *try_zstd_p = try_zstd;
    *raw_p = raw;
    return GT_OK;
}

gt_status_t gt_cmp_encode(gt_cmp_ctx_t *ctx, const float *x, size_t n, float *residual, void *frame,
                          size_t frame_cap, size_t *frame_len_p)
{
    int try_zstd;
    uint8_t *raw;
    gt_status_t st = gt_cmp_fpenv_check(); /* first: even the bound's k = ceil(f * n) rounds */
    if (st != GT_OK) return st;
    st = encode_prepare(ctx, x, n, residual, frame, frame_cap, frame_len_p, &try_zstd, &raw);
    if (st != GT_OK) return st;
    const gt_cmp_params_t *p = &ctx->p;
    float *e = p->error_feedback ? residual : NULL;
    size_t raw_len, k = n;
    gt_cmp_codec_t values = p->codec;
    if (p->codec == GT_CMP_TOPK) {
        values = p->topk_values;
        k = gt_cmp_topk_count(p->topk_fraction, n);
        st = gt_cmp_topk_encode(&ctx->topk, values, p->block_size, x, e, n, k, raw, &raw_len);
    } else {
        raw_len = gt_cmp_dense_size(p->codec, p->block_size, n);
        st = gt_cmp_dense_encode(p->codec, p->block_size, x, e, n, raw);
    }
    if (st != GT_OK) return st;
    return finish_frame(ctx, p->codec, values, n, k, raw, raw_len, try_zstd, e != NULL, frame,
                        frame_len_p);
}

gt_status_t gt_cmp_encode_device(gt_cmp_ctx_t *ctx, const float *x, size_t n, float *residual,
                                 void *frame, size_t frame_cap, size_t *frame_len_p)
{
    int try_zstd;
    uint8_t *raw;
    gt_status_t st =
        encode_prepare(ctx, x, n, residual, frame, frame_cap, frame_len_p, &try_zstd, &raw);
    if (st != GT_OK) return st;
    const gt_cmp_params_t *p = &ctx->p;
    if (p->codec == GT_CMP_TOPK || !gt_cmp_cuda_available()) return GT_ERR_UNSUPPORTED;
    float *e = p->error_feedback ? residual : NULL;
    st = gt_cmp_cuda_encode_payload(p->codec, p->block_size, x, e, n, raw);
    if (st != GT_OK) return st;
    return finish_frame(ctx, p->codec, p->codec, n, n, raw,
                        gt_cmp_dense_size(p->codec, p->block_size, n), try_zstd, e != NULL, frame,
                        frame_len_p);
}

gt_status_t gt_cmp_frame_info(const void *frame, size_t frame_len, gt_cmp_frame_info_t *info_p)
{
#define BAD(...)                                       \
    do {                                               \
        GT_DEBUG("compress: bad frame: " __VA_ARGS__); \
        return GT_ERR_CORRUPT;                         \
    } while (0)
    const uint8_t *f = frame;
    if (!f || !info_p || frame_len < GT_CMP_HEADER_SIZE) BAD("shorter than a header");
    if (gt_le_get32(f) != GT_CMP_MAGIC) BAD("bad magic");
    if (f[4] != GT_CMP_VERSION) {
        GT_DEBUG("compress: frame version %u, this build reads %u", f[4], GT_CMP_VERSION);
        return GT_ERR_UNSUPPORTED;
    }
    gt_cmp_frame_info_t in;
    in.codec = (gt_cmp_codec_t)f[5];
    in.values = (gt_cmp_codec_t)f[6];
    if (f[5] >= GT_CMP_N_CODECS || f[5] == GT_CMP_INT2) BAD("codec %u", f[5]);
    if (in.codec == GT_CMP_TOPK ? f[6] >= GT_CMP_N_CODECS || f[6] == GT_CMP_TOPK : f[6] != f[5])
        BAD("value codec %u", f[6]);
    if (f[7] & ~GT_CMP_FLAGS_KNOWN) BAD("flags 0x%x", f[7]);
    in.zstd = (f[7] & GT_CMP_FLAG_ZSTD) != 0;
    in.error_feedback = (f[7] & GT_CMP_FLAG_EF) != 0;
    in.block_size = gt_le_get32(f + 8);
    if (in.block_size < GT_CMP_BLOCK_MIN || in.block_size > GT_CMP_BLOCK_MAX || in.block_size % 16)
        BAD("block size %u", in.block_size);
    if (gt_le_get32(f + 12) != 0) BAD("reserved field set");
    uint64_t n = gt_le_get64(f + 16), k = gt_le_get64(f + 24), raw = gt_le_get64(f + 32),
             stored = gt_le_get64(f + 40);
    if (n > SIZE_MAX / 8) BAD("element count %llu", (unsigned long long)n);
    if (stored != frame_len - GT_CMP_HEADER_SIZE)
        BAD("payload of %llu bytes in a frame of %zu", (unsigned long long)stored, frame_len);
    if (in.codec == GT_CMP_TOPK) {
        if (k > n || (n > 0 && k == 0))
            BAD("topk keeps %llu of %llu", (unsigned long long)k, (unsigned long long)n);
        size_t vlen = gt_cmp_dense_size(in.values, in.block_size, (size_t)k);
        size_t max = gt_cmp_topk_max_size(in.values, in.block_size, (size_t)n, (size_t)k);
        if ((k > 0 && (vlen == 0 || max == 0)) || raw < vlen + k || raw > max)
            BAD("topk payload of %llu bytes", (unsigned long long)raw);
    } else {
        if (k != n) BAD("k %llu != n %llu", (unsigned long long)k, (unsigned long long)n);
        if (raw != gt_cmp_dense_size(in.codec, in.block_size, (size_t)n))
            BAD("payload of %llu bytes for %llu elements", (unsigned long long)raw,
                (unsigned long long)n);
    }
    if (in.zstd ? (stored == 0 || stored >= raw) : stored != raw)
        BAD("stored payload %llu bytes, raw %llu", (unsigned long long)stored,
            (unsigned long long)raw);
    in.n = (size_t)n;
    in.k = (size_t)k;
    in.payload_bytes = (size_t)raw;
    in.frame_bytes = frame_len;
    *info_p = in;
    return GT_OK;
#undef BAD
}

/* Checks the header against n, undoes zstd and verifies the checksum: *raw_p is the raw
 * payload (in the frame or the context's scratch). */
static gt_status_t open_frame(gt_cmp_ctx_t *ctx, const void *frame, size_t frame_len, size_t n,
                              gt_cmp_frame_info_t *info, const uint8_t **raw_p)
{
    if (!ctx || ctx->magic != GT_CMP_CTX_MAGIC) return GT_ERR_INVALID;
    gt_status_t st = gt_cmp_frame_info(frame, frame_len, info);
    if (st != GT_OK) return st;
    if (info->n != n) {
        GT_DEBUG("compress: frame holds %zu elements, expected %zu", info->n, n);
        return GT_ERR_CORRUPT;
    }
    const uint8_t *f = frame, *stored = f + GT_CMP_HEADER_SIZE, *raw = stored;
    size_t stored_len = frame_len - GT_CMP_HEADER_SIZE;
    if (info->zstd) {
        if (ZSTD_getFrameContentSize(stored, stored_len) != info->payload_bytes ||
            ZSTD_findFrameCompressedSize(stored, stored_len) != stored_len) {
            GT_DEBUG("compress: zstd stage does not match the header");
            return GT_ERR_CORRUPT;
        }
        if (grow_raw(ctx, info->payload_bytes)) return GT_ERR_NOMEM;
        size_t got =
            ZSTD_decompressDCtx(ctx->dctx, ctx->raw, info->payload_bytes, stored, stored_len);
        if (ZSTD_isError(got) || got != info->payload_bytes) {
            GT_DEBUG("compress: zstd stage: %s",
                     ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short");
            return GT_ERR_CORRUPT;
        }
        raw = ctx->raw;
    }
    if (frame_checksum(f, stored, stored_len, info->zstd, raw, info->payload_bytes) !=
        gt_le_get64(f + 48)) {
        GT_DEBUG("compress: frame checksum mismatch");
        return GT_ERR_CORRUPT;
    }
    *raw_p = raw;
    return GT_OK;
}

gt_status_t gt_cmp_decode(gt_cmp_ctx_t *ctx, const void *frame, size_t frame_len, float *out,
                          size_t n)
{
    gt_cmp_frame_info_t info;
    const uint8_t *raw;
    if (!out && n) return GT_ERR_INVALID;
    gt_status_t st = open_frame(ctx, frame, frame_len, n, &info, &raw);
    if (st != GT_OK) return st;
    if (info.codec == GT_CMP_TOPK)
        return gt_cmp_topk_decode(&ctx->topk, info.values, info.block_size, raw, info.payload_bytes,
                                  n, info.k, out);
    st = gt_cmp_dense_check(info.codec, info.block_size, raw, n);
    if (st != GT_OK) return st;
    gt_cmp_dense_decode(info.codec, info.block_size, raw, n, out);
    return GT_OK;
}

gt_status_t gt_cmp_decode_device(gt_cmp_ctx_t *ctx, const void *frame, size_t frame_len, float *out,
                                 size_t n)
{
    gt_cmp_frame_info_t info;
    const uint8_t *raw;
    if (!out && n) return GT_ERR_INVALID;
    if (!gt_cmp_cuda_available()) return GT_ERR_UNSUPPORTED;
    gt_status_t st = open_frame(ctx, frame, frame_len, n, &info, &raw);
    if (st != GT_OK) return st;
    if (info.codec == GT_CMP_TOPK) return GT_ERR_UNSUPPORTED;
    st = gt_cmp_dense_check(info.codec, info.block_size, raw, n);
    if (st != GT_OK) return st;
    return gt_cmp_cuda_decode_payload(info.codec, info.block_size, raw, n, out);
}

int gt_cmp_device_available(void)
{
    return gt_cmp_cuda_available();
}

const char *gt_cmp_isa(void)
{
    return gt_cmp_kernels()->name;
}
