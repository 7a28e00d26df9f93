/* config.c — model presets, config checks, and the parameter arena layout.
 *
 * The arena holds the tensors in Hugging Face GPT-2 state-dict order and layout (Conv1D
 * weights as (in, out)), layer by layer, so a checkpoint tensor is one contiguous copy and an
 * arena byte range maps to whole tensors of one layer. Everything here is pure arithmetic on
 * the config; the kernels (cpu_ops.c, gpt.c, gpt_cuda.cu) get their views from gt_gpt_layout.
 */
#include "kernels_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const gt_gpt_preset_t presets[] = {
    {"tiny", {128, 128, 32, 2, 64, 4}, 4, 32},
    {"small", {256, 256, 128, 4, 256, 4}, 16, 128},
    {"gpt2-124m", {50257, 50304, 1024, 12, 768, 12}, 8, 1024},
};
#define N_PRESETS (sizeof(presets) / sizeof(presets[0]))

const char *gt_gpt_preset_name(size_t i)
{
    return i < N_PRESETS ? presets[i].name : NULL;
}

gt_status_t gt_gpt_preset_find(const char *name, gt_gpt_preset_t *preset_p)
{
    if (!name || !preset_p) return GT_ERR_INVALID;
    for (size_t i = 0; i < N_PRESETS; i++) {
        if (strcmp(presets[i].name, name) == 0) {
            *preset_p = presets[i];
            return GT_OK;
        }
    }
    GT_ERROR("unknown model preset '%s' (known: tiny, small, gpt2-124m)", name);
    return GT_ERR_NOT_FOUND;
}

size_t gt_gpt_vp(const gt_gpt_config_t *cfg)
{
    return cfg->Vp ? cfg->Vp : cfg->V;
}

/* Limits keep every product below in size_t and the int arguments of BLAS in range. */
#define DIM_MAX ((size_t)1 << 24)

gt_status_t gt_gpt_config_check(const gt_gpt_config_t *cfg, size_t B, size_t T)
{
    if (!cfg) return GT_ERR_INVALID;
    if (!cfg->V || !cfg->maxT || !cfg->L || !cfg->C || !cfg->NH || !B || !T) {
        GT_ERROR("model config: V=%zu maxT=%zu L=%zu C=%zu NH=%zu B=%zu T=%zu must all be > 0",
                 cfg->V, cfg->maxT, cfg->L, cfg->C, cfg->NH, B, T);
        return GT_ERR_CONFIG;
    }
    if (cfg->C % cfg->NH) {
        GT_ERROR("model config: C=%zu is not a multiple of NH=%zu", cfg->C, cfg->NH);
        return GT_ERR_CONFIG;
    }
    if (cfg->Vp && cfg->Vp < cfg->V) {
        GT_ERROR("model config: padded vocab Vp=%zu is below V=%zu", cfg->Vp, cfg->V);
        return GT_ERR_CONFIG;
    }
    if (T > cfg->maxT) {
        GT_ERROR("model config: sequence length T=%zu exceeds the context maxT=%zu", T, cfg->maxT);
        return GT_ERR_CONFIG;
    }
    if (gt_gpt_vp(cfg) > DIM_MAX || cfg->maxT > DIM_MAX || cfg->L > 4096 || cfg->C > 65536 ||
        B > DIM_MAX || B * T > DIM_MAX) {
        GT_ERROR("model config: dimensions out of range (V=%zu maxT=%zu L=%zu C=%zu B*T=%zu)",
                 cfg->V, cfg->maxT, cfg->L, cfg->C, B * T);
        return GT_ERR_OVERFLOW;
    }
    return GT_OK;
}

static int config_ok(const gt_gpt_config_t *cfg)
{
    return cfg && cfg->V && cfg->maxT && cfg->L && cfg->C && cfg->NH && cfg->C % cfg->NH == 0 &&
           (!cfg->Vp || cfg->Vp >= cfg->V) && gt_gpt_vp(cfg) <= DIM_MAX && cfg->maxT <= DIM_MAX &&
           cfg->L <= 4096 && cfg->C <= 65536;
}

size_t gt_gpt_tensor_count(const gt_gpt_config_t *cfg)
{
    return config_ok(cfg) ? 4 + GT_GPT_PER_LAYER * cfg->L : 0;
}

size_t gt_gpt_layer_len(const gt_gpt_config_t *cfg)
{
    size_t C = cfg->C;
    return 12 * C * C + 13 * C;
}

size_t gt_gpt_arena_len(const gt_gpt_config_t *cfg)
{
    if (!config_ok(cfg)) return 0;
    return gt_gpt_vp(cfg) * cfg->C + cfg->maxT * cfg->C + cfg->L * gt_gpt_layer_len(cfg) +
           2 * cfg->C;
}

size_t gt_gpt_param_count(const gt_gpt_config_t *cfg)
{
    if (!config_ok(cfg)) return 0;
    return gt_gpt_arena_len(cfg) - (gt_gpt_vp(cfg) - cfg->V) * cfg->C;
}

double gt_gpt_train_flops_per_token(const gt_gpt_config_t *cfg, size_t T)
{
    if (!config_ok(cfg)) return 0;
    double C = (double)cfg->C, L = (double)cfg->L;
    double matmul_params = L * 12.0 * C * C + (double)cfg->V * C; /* blocks + LM head */
    return 6.0 * matmul_params + 12.0 * L * (double)T * C;
}

/* Per-layer tensor table: name suffix, rows, cols (cols 0 = 1-D), decay. */
static void layer_shape(size_t C, int j, const char **suffix_p, size_t *r_p, size_t *c_p)
{
    static const char *const names[GT_GPT_PER_LAYER] = {
        "ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
        "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
        "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
    const size_t rows[GT_GPT_PER_LAYER] = {C, C, C, 3 * C, C, C, C, C, C, 4 * C, 4 * C, C};
    const size_t cols[GT_GPT_PER_LAYER] = {0, 0, 3 * C, 0, C, 0, 0, 0, 4 * C, 0, C, 0};
    *suffix_p = names[j];
    *r_p = rows[j];
    *c_p = cols[j];
}

static void set_tensor(gt_gpt_tensor_t *t, size_t offset, size_t rows, size_t cols)
{
    t->offset = offset;
    t->ndim = cols ? 2 : 1;
    t->shape[0] = rows;
    t->shape[1] = cols ? cols : 1;
    t->numel = rows * t->shape[1];
    t->decay = cols ? 1 : 0;
}

gt_status_t gt_gpt_tensor_get(const gt_gpt_config_t *cfg, size_t index, gt_gpt_tensor_t *tensor_p)
{
    if (!tensor_p || index >= gt_gpt_tensor_count(cfg)) return GT_ERR_INVALID;
    gt_gpt_tensor_t t;
    memset(&t, 0, sizeof(t));
    size_t C = cfg->C, Vp = gt_gpt_vp(cfg);
    size_t blocks = Vp * C + cfg->maxT * C;
    size_t nl = GT_GPT_PER_LAYER * cfg->L;
    if (index == 0) {
        snprintf(t.name, sizeof(t.name), "wte.weight");
        set_tensor(&t, 0, cfg->V, C);
    } else if (index == 1) {
        snprintf(t.name, sizeof(t.name), "wpe.weight");
        set_tensor(&t, Vp * C, cfg->maxT, C);
    } else if (index < 2 + nl) {
        size_t l = (index - 2) / GT_GPT_PER_LAYER;
        int j = (int)((index - 2) % GT_GPT_PER_LAYER);
        size_t off = blocks + l * gt_gpt_layer_len(cfg);
        const char *suffix;
        size_t r, c;
        for (int k = 0; k < j; k++) {
            layer_shape(C, k, &suffix, &r, &c);
            off += r * (c ? c : 1);
        }
        layer_shape(C, j, &suffix, &r, &c);
        snprintf(t.name, sizeof(t.name), "h.%zu.%s", l, suffix);
        set_tensor(&t, off, r, c);
    } else {
        size_t off = blocks + cfg->L * gt_gpt_layer_len(cfg) + (index - 2 - nl) * C;
        snprintf(t.name, sizeof(t.name), index == 2 + nl ? "ln_f.weight" : "ln_f.bias");
        set_tensor(&t, off, C, 0);
    }
    *tensor_p = t;
    return GT_OK;
}

gt_status_t gt_gpt_tensor_find(const gt_gpt_config_t *cfg, const char *name,
                               gt_gpt_tensor_t *tensor_p)
{
    if (!name || !tensor_p || !config_ok(cfg)) return GT_ERR_INVALID;
    if (strncmp(name, "transformer.", 12) == 0) name += 12;
    size_t n = gt_gpt_tensor_count(cfg);
    for (size_t i = 0; i < n; i++) {
        gt_gpt_tensor_t t;
        if (gt_gpt_tensor_get(cfg, i, &t) != GT_OK) return GT_ERR_INTERNAL;
        if (strcmp(t.name, name) == 0) {
            *tensor_p = t;
            return GT_OK;
        }
    }
    return GT_ERR_NOT_FOUND;
}

void gt_gpt_layout(const gt_gpt_config_t *cfg, float *base, gt_gpt_views_t *v)
{
    gt_gpt_layout_tp(cfg, 1, base, v);
}
