/* device_none.c — the CUDA entry points of a build without CUDA: every GPU call reports
 * GT_ERR_UNSUPPORTED, so the public API is the same in every build. */
#include "compress_internal.h"

int gt_cmp_cuda_available(void)
{
    return 0;
}

gt_status_t gt_cmp_cuda_encode_payload(gt_cmp_codec_t codec, uint32_t block, const float *x,
                                       float *e, size_t n, uint8_t *payload)
{
    return GT_ERR_UNSUPPORTED;
}

gt_status_t gt_cmp_cuda_decode_payload(gt_cmp_codec_t codec, uint32_t block, const uint8_t *payload,
                                       size_t n, float *out)
{
    return GT_ERR_UNSUPPORTED;
}
