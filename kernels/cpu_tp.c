/* cpu_tp.c — the fused block passes of cpu_fused.c for one rank of a tensor-parallel group
 * (Megatron-LM's split of a transformer block; the layout is in tp.c and gt_kernels.h).
 *
 * The rank holds NH/t heads (their q, k, v columns of c_attn and their rows of attn.c_proj)
 * and 4C/t of the MLP's hidden units (columns of c_fc, rows of mlp.c_proj). The residual
 * stream, the LayerNorms and the c_proj biases are replicated. Forward: attn.c_proj and
 * mlp.c_proj produce partial sums that one all-reduce each completes (the bias and the
 * residual are added after it). Backward: the input gradients of c_fc and c_attn are partial
 * sums over the rank's slice, completed by one all-reduce each before the LayerNorm backward
 * that needs the whole row. Everything else is what cpu_fused.c does on narrower matrices.
 *
 * Why a separate file rather than flags in cpu_fused.c: a collective cannot run inside the
 * row-slab regions (it needs the whole (N, C) buffer), so the regions are cut differently
 * here, and the tp = 1 passes stay exactly as they were (same bits, same speed).
 */
#include "cpu_rows.h"

#include <omp.h>

/* out = (out + b) + res over rows [r0, r1) of (N, C): the bias and residual after a sum */
static void bias_residual_rows(float *out, const float *b, const float *res, size_t r0, size_t r1,
                               size_t C)
{
    for (size_t n = r0; n < r1; n++) {
        float *o = out + n * C;
        const float *x = res + n * C;
        for (size_t c = 0; c < C; c++) o[c] = (o[c] + b[c]) + x[c];
    }
}

gt_status_t gt_cpu_block_forward_tp(const gt_cpu_block_t *k)
{
    size_t N = k->B * k->T, C = k->C, tp = k->tp, Cl = C / tp, NHl = k->NH / tp;
    size_t nr = nblk(N, ROWS), nbh = k->B * NHl;
    const gt_gpt_layer_views_t *w = k->w;
    const gt_gpt_tp_comm_t *cm = k->comm;
    gt_status_t st;
#pragma omp parallel num_threads(nth(nr > nbh ? nr : nbh))
    {
#pragma omp for schedule(dynamic, 1)
        for (size_t t = 0; t < nr; t++) {
            size_t r0 = lo_of(N, ROWS, t), r1 = hi_of(N, ROWS, t);
            for (size_t n = r0; n < r1; n++)
                gt_cpu_ln_row(k->ln1 + n * C, k->ln1_mean + n, k->ln1_rstd + n, k->res + n * C,
                              w->ln1w, w->ln1b, C);
            mm_rows(k->qkv, k->ln1, w->qkvw, w->qkvb, r0, r1, C, 3 * Cl);
        }
#pragma omp for schedule(dynamic, 1)
        for (size_t bh = 0; bh < nbh; bh++)
            gt_cpu_attention_bh_forward(k->atty, k->att, k->qkv, bh, k->T, Cl, NHl);
#pragma omp for schedule(dynamic, 1)
        for (size_t t = 0; t < nr; t++)
            mm_rows(k->res2, k->atty, w->attprojw, NULL, lo_of(N, ROWS, t), hi_of(N, ROWS, t), Cl,
                    C);
    }
    if ((st = cm->allreduce_sum(cm->ctx, k->res2, N * C)) != GT_OK) return st;
#pragma omp parallel for num_threads(nth(nr)) schedule(dynamic, 1)
    for (size_t t = 0; t < nr; t++) {
        size_t r0 = lo_of(N, ROWS, t), r1 = hi_of(N, ROWS, t);
        bias_residual_rows(k->res2, w->attprojb, k->res, r0, r1, C);
        for (size_t n = r0; n < r1; n++)
            gt_cpu_ln_row(k->ln2 + n * C, k->ln2_mean + n, k->ln2_rstd + n, k->res2 + n * C,
                          w->ln2w, w->ln2b, C);
        mm_rows(k->fch, k->ln2, w->fcw, w->fcb, r0, r1, C, 4 * Cl);
        gt_cpu_gelu_rows(k->fchg + r0 * 4 * Cl, k->fch + r0 * 4 * Cl, (r1 - r0) * 4 * Cl);
        mm_rows(k->res3, k->fchg, w->fcprojw, NULL, r0, r1, 4 * Cl, C);
    }
    if ((st = cm->allreduce_sum(cm->ctx, k->res3, N * C)) != GT_OK) return st;
#pragma omp parallel for num_threads(nth(nr)) schedule(dynamic, 1)
    for (size_t t = 0; t < nr; t++)
        bias_residual_rows(k->res3, w->fcprojb, k->res2, lo_of(N, ROWS, t), hi_of(N, ROWS, t), C);
    return GT_OK;
}

gt_status_t gt_cpu_block_backward_tp(const gt_cpu_block_t *k, const gt_cpu_block_scratch_t *s)
{
    size_t N = k->B * k->T, C = k->C, tp = k->tp, Cl = C / tp, NHl = k->NH / tp;
    size_t nr = nblk(N, ROWS);
    const gt_gpt_layer_views_t *w = k->w;
    const gt_gpt_tp_comm_t *cm = k->comm;
    gt_status_t st;
    /* regions B and D (the weight gradients): cpu_rows.h, at this rank's width */
    gt_cpu_region_b_t nb = gt_cpu_region_b(k, Cl, NHl);
    size_t nD = gt_cpu_region_d_count(C, Cl);

    /* A1: the MLP's hidden gradient (local 4Cl) and d(ln_2 out) as this rank's partial sum */
#pragma omp parallel for num_threads(nth(nr)) schedule(dynamic, 1)
    for (size_t t = 0; t < nr; t++) {
        size_t r0 = lo_of(N, ROWS, t), r1 = hi_of(N, ROWS, t);
        mm_back_rows(s->dbuf4, s->dres, w->fcprojw, r0, r1, 4 * Cl, C);
        gt_cpu_gelu_back_rows(s->dbuf4 + r0 * 4 * Cl, k->fch + r0 * 4 * Cl, s->dbuf4 + r0 * 4 * Cl,
                              (r1 - r0) * 4 * Cl);
        mm_back_rows(s->dln2, s->dbuf4, w->fcw, r0, r1, C, 4 * Cl);
    }
    if ((st = cm->allreduce_sum(cm->ctx, s->dln2, N * C)) != GT_OK) return st;
#pragma omp parallel num_threads(nth(nb.total))
    {
        /* A2: ln_2 backward on whole rows; the attention output's gradient (local Cl) */
#pragma omp for schedule(dynamic, 1)
        for (size_t t = 0; t < nr; t++) {
            size_t r0 = lo_of(N, ROWS, t), r1 = hi_of(N, ROWS, t);
            memcpy(s->dres2 + r0 * C, s->dres + r0 * C, (r1 - r0) * C * sizeof(float));
            for (size_t n = r0; n < r1; n++)
                gt_cpu_ln_back_row(s->dres2 + n * C, s->dln2 + n * C, k->res2 + n * C, w->ln2w,
                                   k->ln2_mean[n], k->ln2_rstd[n], C);
            mm_back_rows(s->datty, s->dres2, w->attprojw, r0, r1, Cl, C);
        }
        /* B: as in cpu_fused.c, largest tasks first */
#pragma omp for schedule(dynamic, 1)
        for (size_t t = 0; t < nb.total; t++) gt_cpu_region_b_task(k, s, &nb, t, Cl, NHl);
            /* C1: d(ln_1 out) as this rank's partial sum over its q, k, v columns */
#pragma omp for schedule(dynamic, 1)
        for (size_t t = 0; t < nr; t++)
            mm_back_rows(s->dln1, s->dqkv, w->qkvw, lo_of(N, ROWS, t), hi_of(N, ROWS, t), C,
                         3 * Cl);
    }
    if ((st = cm->allreduce_sum(cm->ctx, s->dln1, N * C)) != GT_OK) return st;
#pragma omp parallel num_threads(nth(nr > nD ? nr : nD))
    {
        /* C2: dres becomes d(block input) */
#pragma omp for schedule(dynamic, 1)
        for (size_t t = 0; t < nr; t++) {
            size_t r0 = lo_of(N, ROWS, t), r1 = hi_of(N, ROWS, t);
            memcpy(s->dres + r0 * C, s->dres2 + r0 * C, (r1 - r0) * C * sizeof(float));
            for (size_t n = r0; n < r1; n++)
                gt_cpu_ln_back_row(s->dres + n * C, s->dln1 + n * C, k->res + n * C, w->ln1w,
                                   k->ln1_mean[n], k->ln1_rstd[n], C);
        }
        /* D: qkv weight and bias gradients (local), ln_1 gains */
#pragma omp for schedule(dynamic, 1)
        for (size_t t = 0; t < nD; t++) gt_cpu_region_d_task(k, s, t, Cl);
    }
    return GT_OK;
}
