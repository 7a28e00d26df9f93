/* tp.c — the tensor-parallel (Megatron) layout: which floats of the full arena a TP rank
 * holds, where they sit in its local arena, and the segment map between the two.
 *
 * Everything derives from one walk (gt_gpt_tp_walk) over the tensors in arena order that
 * emits, per tensor, the pieces this rank holds in increasing local offset: a replicated
 * tensor is one piece, a column-sharded matrix one piece per row (and per q/k/v part), a
 * row-sharded matrix one piece. The public segment list is that walk with adjacent pieces
 * merged; init_weights uses it unmerged (it needs the tensor of each piece); gt_gpt_layout_tp
 * and the local tensor offsets are the same sizes in closed form. Pure arithmetic, no state.
 */
#include "kernels_internal.h"

#include <string.h>

size_t gt_gpt_tp(const gt_gpt_params_t *p)
{
    return p->tp_size > 1 ? p->tp_size : 1;
}

/* The TP conditions alone; logs only when verbose. */
static gt_status_t tp_fields_check(const gt_gpt_params_t *p, int verbose)
{
    size_t t = gt_gpt_tp(p), NH = p->model.NH, C = p->model.C;
    if (t == 1) {
        if (p->tp_rank == 0) return GT_OK;
        if (verbose)
            GT_ERROR("kernels: tp_rank %zu with tp_size %zu (must be 0)", p->tp_rank, p->tp_size);
        return GT_ERR_CONFIG;
    }
    if (p->device == GT_DEVICE_CUDA) {
        if (verbose)
            GT_ERROR("kernels: tensor parallelism (tp_size %zu) is CPU-only; a CUDA model "
                     "supports tp_size 1 only",
                     t);
        return GT_ERR_UNSUPPORTED;
    }
    if (p->tp_rank >= t) {
        if (verbose) GT_ERROR("kernels: tp_rank %zu is not below tp_size %zu", p->tp_rank, t);
        return GT_ERR_CONFIG;
    }
    if (NH % t || (4 * C) % t) {
        if (verbose)
            GT_ERROR("kernels: tensor parallelism needs NH %% tp_size == 0 and 4C %% tp_size "
                     "== 0 (NH=%zu C=%zu tp_size=%zu)",
                     NH, C, t);
        return GT_ERR_CONFIG;
    }
    if (!p->tp_comm.allreduce_sum) {
        if (verbose) GT_ERROR("kernels: tp_size %zu needs tp_comm.allreduce_sum", t);
        return GT_ERR_CONFIG;
    }
    return GT_OK;
}

gt_status_t gt_gpt_tp_check(const gt_gpt_params_t *p)
{
    if (!p) return GT_ERR_INVALID;
    gt_status_t st = gt_gpt_config_check(&p->model, p->B ? p->B : 1, p->T ? p->T : 1);
    if (st != GT_OK) return st;
    return tp_fields_check(p, 1);
}

/* A valid model and TP setup, checked without logging (for the queries). */
static int tp_ok(const gt_gpt_params_t *p)
{
    return p && gt_gpt_arena_len(&p->model) && tp_fields_check(p, 0) == GT_OK;
}

size_t gt_gpt_layer_len_tp(const gt_gpt_config_t *cfg, size_t t)
{
    size_t C = cfg->C;
    return 12 * C * C / t + 7 * C / t + 6 * C;
}

/* Local element count of the j-th tensor of a block (GT_GPT_PER_LAYER order). */
static size_t layer_piece(size_t C, size_t t, int j)
{
    const size_t n[GT_GPT_PER_LAYER] = {C, C, 3 * C * C / t, 3 * C / t, C * C / t,     C,
                                        C, C, 4 * C * C / t, 4 * C / t, 4 * C * C / t, C};
    return n[j];
}

void gt_gpt_layout_tp(const gt_gpt_config_t *cfg, size_t t, float *base, gt_gpt_views_t *v)
{
    size_t C = cfg->C;
    float *p = base;
    v->wte = p;
    p += gt_gpt_vp(cfg) * C;
    v->wpe = p;
    p += cfg->maxT * C;
    for (size_t l = 0; l < cfg->L; l++) {
        gt_gpt_layer_views_t *y = &v->layer[l];
        float **slot[GT_GPT_PER_LAYER] = {&y->ln1w,     &y->ln1b,     &y->qkvw,    &y->qkvb,
                                          &y->attprojw, &y->attprojb, &y->ln2w,    &y->ln2b,
                                          &y->fcw,      &y->fcb,      &y->fcprojw, &y->fcprojb};
        for (int j = 0; j < GT_GPT_PER_LAYER; j++) {
            *slot[j] = p;
            p += layer_piece(C, t, j);
        }
    }
    v->lnfw = p, p += C;
    v->lnfb = p;
}

size_t gt_gpt_tensor_local_offset(const gt_gpt_config_t *cfg, size_t t, size_t k)
{
    size_t C = cfg->C, emb = (gt_gpt_vp(cfg) + cfg->maxT) * C, nl = GT_GPT_PER_LAYER * cfg->L;
    if (k == 0) return 0;
    if (k == 1) return gt_gpt_vp(cfg) * C;
    if (k >= 2 + nl) return emb + cfg->L * gt_gpt_layer_len_tp(cfg, t) + (k - 2 - nl) * C;
    size_t l = (k - 2) / GT_GPT_PER_LAYER, off = emb + l * gt_gpt_layer_len_tp(cfg, t);
    for (int j = 0; j < (int)((k - 2) % GT_GPT_PER_LAYER); j++) off += layer_piece(C, t, j);
    return off;
}

void gt_gpt_tp_walk(const gt_gpt_config_t *cfg, size_t t, size_t rank, gt_gpt_tp_emit_fn fn,
                    void *ctx)
{
    size_t C = cfg->C, Cl = C / t, nt = gt_gpt_tensor_count(cfg), lo = 0;
    int rep1 = t == 1; /* with one rank everything counts as replicated (one segment) */
    for (size_t k = 0; k < nt; k++) {
        gt_gpt_tensor_t ts;
        if (gt_gpt_tensor_get(cfg, k, &ts) != GT_OK) return;
        size_t off = ts.offset, len = k == 0 ? gt_gpt_vp(cfg) * C : ts.numel;
        int j = k < 2 || k >= nt - 2 ? -1 : (int)((k - 2) % GT_GPT_PER_LAYER);
        switch (j) {
        case 2: /* c_attn.weight (C, 3C): per row, the q, k and v columns of our heads */
            for (size_t r = 0; r < C; r++)
                for (size_t part = 0; part < 3; part++, lo += Cl)
                    fn(ctx, k, off + r * 3 * C + part * C + rank * Cl, lo, Cl, rep1);
            break;
        case 3: /* c_attn.bias (3C) */
            for (size_t part = 0; part < 3; part++, lo += Cl)
                fn(ctx, k, off + part * C + rank * Cl, lo, Cl, rep1);
            break;
        case 4: /* attn.c_proj.weight (C, C): rows of our heads' channels */
            fn(ctx, k, off + rank * Cl * C, lo, Cl * C, rep1);
            lo += Cl * C;
            break;
        case 8: /* c_fc.weight (C, 4C): per row, our 4Cl columns */
            for (size_t r = 0; r < C; r++, lo += 4 * Cl)
                fn(ctx, k, off + r * 4 * C + rank * 4 * Cl, lo, 4 * Cl, rep1);
            break;
        case 9: /* c_fc.bias (4C) */
            fn(ctx, k, off + rank * 4 * Cl, lo, 4 * Cl, rep1);
            lo += 4 * Cl;
            break;
        case 10: /* mlp.c_proj.weight (4C, C): our 4Cl rows */
            fn(ctx, k, off + rank * 4 * Cl * C, lo, 4 * Cl * C, rep1);
            lo += 4 * Cl * C;
            break;
        default: /* replicated: embeddings (wte with its padding rows), LayerNorms, c_proj
                  * biases */
            fn(ctx, k, off, lo, len, 1);
            lo += len;
        }
    }
}

size_t gt_gpt_local_len(const gt_gpt_params_t *p)
{
    if (!tp_ok(p)) return 0;
    const gt_gpt_config_t *m = &p->model;
    return (gt_gpt_vp(m) + m->maxT) * m->C + m->L * gt_gpt_layer_len_tp(m, gt_gpt_tp(p)) + 2 * m->C;
}

/* Merges adjacent pieces; counts every segment even past cap. */
typedef struct {
    gt_gpt_segment_t *segs;
    size_t cap, n;
    gt_gpt_segment_t cur;
    int have;
} merge_t;

static void merge_flush(merge_t *m)
{
    if (!m->have) return;
    if (m->n < m->cap) m->segs[m->n] = m->cur;
    m->n++;
    m->have = 0;
}

static void merge_emit(void *ctx, size_t k, size_t full, size_t local, size_t n, int repl)
{
    (void)k;
    merge_t *m = ctx;
    gt_gpt_segment_t *c = &m->cur;
    if (m->have && c->replicated == repl && c->full_offset + c->n == full &&
        c->local_offset + c->n == local) {
        c->n += n;
        return;
    }
    merge_flush(m);
    *c = (gt_gpt_segment_t){full, local, n, repl};
    m->have = 1;
}

static size_t merged_walk(const gt_gpt_params_t *p, gt_gpt_segment_t *segs, size_t cap)
{
    merge_t m = {segs, cap, 0, {0, 0, 0, 0}, 0};
    gt_gpt_tp_walk(&p->model, gt_gpt_tp(p), gt_gpt_tp(p) > 1 ? p->tp_rank : 0, merge_emit, &m);
    merge_flush(&m);
    return m.n;
}

size_t gt_gpt_tp_segment_count(const gt_gpt_params_t *p)
{
    return tp_ok(p) ? merged_walk(p, NULL, 0) : 0;
}

gt_status_t gt_gpt_tp_segments(const gt_gpt_params_t *p, gt_gpt_segment_t *segs, size_t cap,
                               size_t *n_p)
{
    if (!p || !n_p || (cap && !segs)) return GT_ERR_INVALID;
    if (gt_gpt_tp_check(p) != GT_OK) return GT_ERR_CONFIG;
    size_t n = merged_walk(p, NULL, 0);
    if (cap < n) return GT_ERR_OVERFLOW;
    merged_walk(p, segs, cap);
    *n_p = n;
    return GT_OK;
}

typedef struct {
    const float *src;
    float *dst;
    int to_full;
} copy_t;

static void copy_emit(void *ctx, size_t k, size_t full, size_t local, size_t n, int repl)
{
    (void)k, (void)repl;
    copy_t *c = ctx;
    if (c->to_full)
        memcpy(c->dst + full, c->src + local, n * sizeof(float));
    else
        memcpy(c->dst + local, c->src + full, n * sizeof(float));
}

static gt_status_t tp_copy(const gt_gpt_params_t *p, const float *src, float *dst, int to_full)
{
    if (!p || !src || !dst) return GT_ERR_INVALID;
    if (gt_gpt_tp_check(p) != GT_OK) return GT_ERR_CONFIG;
    copy_t c = {src, dst, to_full};
    gt_gpt_tp_walk(&p->model, gt_gpt_tp(p), gt_gpt_tp(p) > 1 ? p->tp_rank : 0, copy_emit, &c);
    return GT_OK;
}

gt_status_t gt_gpt_tp_gather(const gt_gpt_params_t *p, const float *local, float *full)
{
    return tp_copy(p, local, full, 1);
}

gt_status_t gt_gpt_tp_scatter(const gt_gpt_params_t *p, const float *full, float *local)
{
    return tp_copy(p, full, local, 0);
}
