/* test_gpu.c — the CUDA path gives frames byte-identical to the CPU path, the same residuals,
 * and decodes to the same floats. Exit 77 (skipped) without a GPU; in a build without CUDA
 * it checks that every GPU entry point reports GT_ERR_UNSUPPORTED, then skips. */
#include "compress_internal.h"
#include "gt_test.h"
#include "cmp_test_data.h"

#include <stdlib.h>
#include <string.h>

#ifdef GT_TEST_HAVE_CUDA
#include <cuda_runtime.h>

static float *to_dev(const float *h, size_t n)
{
    float *d = NULL;
    if (cudaMalloc((void **)&d, n * sizeof(float) + 4) != cudaSuccess) return NULL;
    if (cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess) return NULL;
    return d;
}

static void compare(gt_cmp_codec_t codec, uint32_t block, int ef, gt_cmp_zstd_t z, size_t n)
{
    gt_cmp_params_t p = GT_CMP_PARAMS_INIT;
    p.codec = codec;
    p.block_size = block;
    p.error_feedback = ef;
    p.zstd = z;
    gt_cmp_ctx_t *ctx = NULL;
    CHECK_EQ_INT(gt_cmp_create(&p, &ctx), GT_OK);
    size_t cap = gt_cmp_bound(ctx, n), lc = 0, lg = 0;
    float *x = malloc(n * sizeof(float) + 4), *ec = calloc(n + 1, sizeof(float));
    float *eg = malloc(n * sizeof(float) + 4), *yc = malloc(n * sizeof(float) + 4);
    float *yg = malloc(n * sizeof(float) + 4);
    uint8_t *fc = malloc(cap), *fg = malloc(cap);
    float *dx = NULL, *de = NULL, *dy = NULL;
    CHECK(cudaMalloc((void **)&dy, n * sizeof(float) + 4) == cudaSuccess);
    de = to_dev(ec, n);
    for (int r = 0; r < 3; r++) {
        cmp_fill_gauss(x, n, 40 + r, 0.01f);
        for (size_t i = 0; i < n; i += 101) x[i] *= 30.0f;
        for (size_t i = n / 3; i < n / 3 + 5000 && i < n; i++) x[i] = 0.0f;
        dx = to_dev(x, n);
        CHECK(dx && de);
        CHECK_EQ_INT(gt_cmp_encode(ctx, x, n, ef ? ec : NULL, fc, cap, &lc), GT_OK);
        CHECK_EQ_INT(gt_cmp_encode_device(ctx, dx, n, ef ? de : NULL, fg, cap, &lg), GT_OK);
        CHECK_MSG(lc == lg && memcmp(fc, fg, lc) == 0,
                  "%s block %u ef %d n %zu round %d: GPU "
                  "frame differs from CPU",
                  gt_cmp_codec_name(codec), block, ef, n, r);
        cudaFree(dx);
    }
    CHECK(cudaMemcpy(eg, de, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
    if (ef) CHECK(memcmp(ec, eg, n * sizeof(float)) == 0);
    CHECK_EQ_INT(gt_cmp_decode(ctx, fc, lc, yc, n), GT_OK);
    CHECK_EQ_INT(gt_cmp_decode_device(ctx, fc, lc, dy, n), GT_OK);
    CHECK(cudaMemcpy(yg, dy, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK_MSG(memcmp(yc, yg, n * sizeof(float)) == 0, "%s: GPU decode differs",
              gt_cmp_codec_name(codec));
    /* A corrupted frame is rejected before the GPU is touched. */
    fc[lc / 2] ^= 4;
    CHECK_EQ_INT(gt_cmp_decode_device(ctx, fc, lc, dy, n), GT_ERR_CORRUPT);
    cudaFree(de);
    cudaFree(dy);
    free(x);
    free(ec);
    free(eg);
    free(yc);
    free(yg);
    free(fc);
    free(fg);
    gt_cmp_destroy(ctx);
}
#endif

int main(void)
{
    if (!gt_cmp_device_available()) {
        gt_cmp_params_t p = GT_CMP_PARAMS_INIT;
        p.error_feedback = 0;
        gt_cmp_ctx_t *ctx = NULL;
        CHECK_EQ_INT(gt_cmp_create(&p, &ctx), GT_OK);
        float x[4] = {1, 2, 3, 4}, y[4];
        uint8_t frame[256];
        size_t len;
        CHECK_EQ_INT(gt_cmp_encode_device(ctx, x, 4, NULL, frame, sizeof(frame), &len),
                     GT_ERR_UNSUPPORTED);
        CHECK_EQ_INT(gt_cmp_encode(ctx, x, 4, NULL, frame, sizeof(frame), &len), GT_OK);
        CHECK_EQ_INT(gt_cmp_decode_device(ctx, frame, len, y, 4), GT_ERR_UNSUPPORTED);
        gt_cmp_destroy(ctx);
        if (gt_test_failures) return GT_TEST_DONE();
        gt_test_skip("no GPU (or a build without CUDA): GPU entry points report unsupported");
    }
#ifdef GT_TEST_HAVE_CUDA
    const size_t sizes[] = {1, 17, 4096 * 33 + 5, 1000003};
    for (int codec = GT_CMP_FP32; codec <= GT_CMP_FP4; codec++)
        for (int s = 0; s < 4; s++)
            for (int ef = 0; ef < 2; ef++)
                compare((gt_cmp_codec_t)codec, s == 2 ? 4096 : 128, ef,
                        s == 3 ? GT_CMP_ZSTD_ON : GT_CMP_ZSTD_OFF, sizes[s]);
    compare(GT_CMP_INT4, 16, 1, GT_CMP_ZSTD_OFF, 100000);
#endif
    return GT_TEST_DONE();
}
