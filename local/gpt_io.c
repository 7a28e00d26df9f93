/* gpt_io.c — GPT-2 arenas to and from safetensors under Hugging Face names.
 *
 * The kernels keep every tensor in HF layout inside the arena, so each tensor is one copy.
 * Loading is strict, because a silently half-loaded initialisation trains garbage: every
 * parameter must be present once, with the model's shape; anything unknown is reported by
 * name. The buffers HF files carry that are not parameters (the causal-mask buffers and the
 * tied lm_head) are recognised and skipped.
 */
#include "gt_local.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *strip_transformer(const char *name)
{
    return strncmp(name, "transformer.", 12) == 0 ? name + 12 : name;
}

/* HF entries that are not parameters of the model. */
static int is_hf_buffer(const char *name, const gt_local_st_info_t *info)
{
    const char *n = strip_transformer(name);
    if (strcmp(n, "lm_head.weight") == 0) return 1; /* tied to wte.weight */
    if (strncmp(n, "h.", 2) != 0) return 0;
    const char *dot = strchr(n + 2, '.');
    if (!dot) return 0;
    return strcmp(dot, ".attn.masked_bias") == 0 ||
           (strcmp(dot, ".attn.bias") == 0 && info->ndim == 4);
}

gt_status_t gt_local_gpt_config_from_st(const gt_local_st_t *st, size_t n_head,
                                        gt_gpt_config_t *cfg_p)
{
    gt_gpt_config_t cfg = {0, 0, 0, 0, 0, 0};
    int have_wte = 0, have_wpe = 0;
    for (size_t i = 0; i < gt_local_st_count(st); i++) {
        gt_local_st_info_t info;
        gt_local_st_info(st, i, &info);
        const char *n = strip_transformer(info.name);
        if (strcmp(n, "wte.weight") == 0 && info.ndim == 2) {
            cfg.V = info.shape[0];
            cfg.C = info.shape[1];
            have_wte = 1;
        } else if (strcmp(n, "wpe.weight") == 0 && info.ndim == 2) {
            cfg.maxT = info.shape[0];
            have_wpe = 1;
        } else if (strncmp(n, "h.", 2) == 0) {
            char *end = NULL;
            unsigned long l = strtoul(n + 2, &end, 10);
            if (end != n + 2 && *end == '.' && l < 4096 && l + 1 > cfg.L) cfg.L = l + 1;
        }
    }
    if (!have_wte || !have_wpe || cfg.L == 0) {
        GT_ERROR("not a GPT-2 checkpoint: needs 2-D wte.weight and wpe.weight and h.0.* tensors");
        return GT_ERR_INVALID;
    }
    cfg.NH = n_head;
    gt_status_t s = gt_gpt_config_check(&cfg, 1, 1);
    if (s != GT_OK) return s;
    *cfg_p = cfg;
    return GT_OK;
}

/* Appends `name` to a bounded, comma-separated list for an error message. */
static void note(char *list, size_t cap, size_t *count, const char *name)
{
    if (*count < 12) {
        size_t len = strlen(list);
        snprintf(list + len, cap - len, "%s%s", len ? ", " : "", name);
    }
    (*count)++;
}

gt_status_t gt_local_gpt_load(gt_gpt_t *gpt, gt_gpt_arena_t which, const gt_local_st_t *st,
                              const char *prefix)
{
    const gt_gpt_params_t *gp = gt_gpt_get_params(gpt);
    const gt_gpt_config_t *cfg = &gp->model;
    const size_t nt = gt_gpt_tensor_count(cfg), plen = strlen(prefix);
    gt_status_t s = GT_OK;
    size_t *src = malloc(nt * sizeof *src); /* file index of each model tensor, or SIZE_MAX */
    char extra[1024] = "", bad[2048] = "", missing[1024] = "";
    size_t n_extra = 0, n_bad = 0, n_missing = 0;
    float *buf = NULL;
    if (!src) return GT_ERR_NOMEM;
    for (size_t k = 0; k < nt; k++) src[k] = SIZE_MAX;
    for (size_t i = 0; i < gt_local_st_count(st); i++) {
        gt_local_st_info_t info;
        gt_local_st_info(st, i, &info);
        if (plen && strncmp(info.name, prefix, plen) != 0) continue; /* another arena's */
        const char *n = info.name + plen;
        if (is_hf_buffer(n, &info)) continue;
        gt_gpt_tensor_t t;
        size_t k = 0;
        if (gt_gpt_tensor_find(cfg, n, &t) != GT_OK) {
            note(extra, sizeof extra, &n_extra, info.name);
            continue;
        }
        while (k < nt) { /* its index, to detect a tensor given twice (with and without
                            "transformer.") */
            gt_gpt_tensor_t u;
            if (gt_gpt_tensor_get(cfg, k, &u) == GT_OK && u.offset == t.offset) break;
            k++;
        }
        int shape_ok = info.ndim == (size_t)t.ndim && info.shape[0] == t.shape[0] &&
                       (t.ndim == 1 || info.shape[1] == t.shape[1]);
        if (!shape_ok) {
            char what[256];
            if (t.ndim == 1)
                snprintf(what, sizeof what, "%s (model (%zu), file has %zu dims)", info.name,
                         t.shape[0], info.ndim);
            else
                snprintf(what, sizeof what, "%s (model (%zu, %zu), file (%zu, %zu)%s)", info.name,
                         t.shape[0], t.shape[1], info.shape[0], info.ndim > 1 ? info.shape[1] : 0,
                         info.ndim == 2 ? "" : ", wrong rank");
            note(bad, sizeof bad, &n_bad, what);
        } else if (k < nt && src[k] != SIZE_MAX) {
            char what[256];
            snprintf(what, sizeof what, "%s (given twice)", info.name);
            note(bad, sizeof bad, &n_bad, what);
        } else if (k < nt) {
            src[k] = i;
        }
    }
    for (size_t k = 0; k < nt; k++) {
        gt_gpt_tensor_t t;
        if (gt_gpt_tensor_get(cfg, k, &t) == GT_OK && src[k] == SIZE_MAX) {
            char full[GT_GPT_TENSOR_NAME_MAX + 64];
            snprintf(full, sizeof full, "%s%s", prefix, t.name);
            note(missing, sizeof missing, &n_missing, full);
        }
    }
    if (n_extra || n_bad || n_missing) {
        GT_ERROR(
            "safetensors file does not match the model (V=%zu maxT=%zu L=%zu C=%zu):%s%s%s%s%s%s"
            "%s",
            cfg->V, cfg->maxT, cfg->L, cfg->C, n_missing ? "\n  missing: " : "", missing,
            n_bad ? "\n  wrong shape or duplicate: " : "", bad,
            n_extra ? "\n  not parameters of this model: " : "", extra,
            (n_missing > 12 || n_bad > 12 || n_extra > 12) ? "\n  (lists cut at 12 names)" : "");
        s = GT_ERR_INVALID;
        goto out;
    }
    float *arena = gp->device == GT_DEVICE_CPU ? gt_gpt_arena(gpt, which) : NULL;
    for (size_t k = 0; k < nt && s == GT_OK; k++) {
        gt_gpt_tensor_t t;
        GT_CHECK_GOTO(gt_gpt_tensor_get(cfg, k, &t), s, out);
        float *dst = arena ? arena + t.offset : NULL;
        if (!dst) {
            float *nb = realloc(buf, t.numel * sizeof *buf);
            if (!nb) {
                s = GT_ERR_NOMEM;
                break;
            }
            dst = buf = nb;
        }
        s = gt_local_st_read_f32(st, src[k], dst, t.numel);
        /* A NaN or Inf in a parameter or moment is never a state to train from. */
        for (size_t i = 0; s == GT_OK && i < t.numel; i++)
            if (!isfinite(dst[i])) {
                gt_local_st_info_t info;
                gt_local_st_info(st, src[k], &info);
                GT_ERROR("safetensors tensor %s holds %g at element %zu: corrupt or diverged",
                         info.name, (double)dst[i], i);
                s = GT_ERR_CORRUPT;
            }
        if (s == GT_OK && !arena) s = gt_gpt_arena_write(gpt, which, t.offset, t.numel, buf);
    }
    if (s == GT_OK && arena && which == GT_GPT_PARAMS) s = gt_gpt_params_changed(gpt);
out:
    free(buf);
    free(src);
    return s;
}

gt_status_t gt_local_gpt_save(gt_gpt_t *gpt, const gt_local_arena_ref_t *arenas, size_t n_arenas,
                              const gt_local_st_entry_t *extra, size_t n_extra, const char *path)
{
    const gt_gpt_params_t *gp = gt_gpt_get_params(gpt);
    const gt_gpt_config_t *cfg = &gp->model;
    const size_t nt = gt_gpt_tensor_count(cfg), alen = gt_gpt_arena_len(cfg);
    const size_t n = n_extra + n_arenas * nt;
    gt_status_t s = GT_OK;
    gt_local_st_entry_t *e = calloc(n ? n : 1, sizeof *e);
    char(*names)[GT_GPT_TENSOR_NAME_MAX + 32] = calloc(n ? n : 1, sizeof *names);
    float **host = calloc(n_arenas ? n_arenas : 1, sizeof *host);
    int copied = gp->device != GT_DEVICE_CPU;
    if (!e || !names || !host) {
        s = GT_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < n_extra; i++) e[i] = extra[i];
    for (size_t a = 0; a < n_arenas; a++) {
        if (copied) {
            host[a] = malloc(alen * sizeof(float));
            if (!host[a]) {
                s = GT_ERR_NOMEM;
                goto out;
            }
            GT_CHECK_GOTO(gt_gpt_arena_read(gpt, arenas[a].arena, 0, alen, host[a]), s, out);
        } else {
            host[a] = gt_gpt_arena(gpt, arenas[a].arena);
        }
        for (size_t k = 0; k < nt; k++) {
            gt_gpt_tensor_t t;
            GT_CHECK_GOTO(gt_gpt_tensor_get(cfg, k, &t), s, out);
            size_t j = n_extra + a * nt + k;
            snprintf(names[j], sizeof names[j], "%s%s", arenas[a].prefix, t.name);
            e[j].name = names[j];
            e[j].data = host[a] + t.offset;
            e[j].ndim = (size_t)t.ndim;
            e[j].shape[0] = t.shape[0];
            e[j].shape[1] = t.shape[1];
        }
    }
    {
        const char *mk[] = {"format"}, *mv[] = {"pt"};
        s = gt_local_st_write(path, e, n, mk, mv, 1);
    }
out:
    if (copied && host)
        for (size_t a = 0; a < n_arenas; a++) free(host[a]);
    free(host);
    free(names);
    free(e);
    return s;
}
