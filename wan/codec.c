/* codec.c — the codec parameters that sites.yaml's `codec:` section gives (gt_wan.h,
 * gt_wan_codec_params). Here because it is the one place that knows both the config
 * (topology/) and the codecs (compress/), neither of which may know the other; the sites'
 * outer rounds (diloco/) and `geotrain plan` read the codec through it. */
#include "gt_wan.h"

gt_status_t gt_wan_codec_params(const gt_topo_config_t *cfg, const char *name,
                                gt_cmp_params_t *cp_p)
{
    if (!cfg || !cp_p) return GT_ERR_INVALID;
    gt_cmp_params_t p = GT_CMP_PARAMS_INIT;
    gt_status_t st;
    if ((st = gt_cmp_codec_from_name(name ? name : cfg->codec.name, &p.codec)) != GT_OK ||
        (st = gt_cmp_codec_from_name(cfg->codec.topk_values, &p.topk_values)) != GT_OK)
        return st;
    p.block_size = cfg->codec.block_size;
    p.topk_fraction = cfg->codec.topk_fraction;
    p.error_feedback = cfg->codec.error_feedback;
    p.zstd = cfg->codec.zstd == GT_ZSTD_ON    ? GT_CMP_ZSTD_ON
             : cfg->codec.zstd == GT_ZSTD_OFF ? GT_CMP_ZSTD_OFF
                                              : GT_CMP_ZSTD_AUTO;
    p.zstd_level = cfg->codec.zstd_level;
    *cp_p = p;
    return GT_OK;
}
