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
    size_t N = k->B * k->T, C = k->C, T = k->T, tp = k->tp, Cl = C / tp, NHl = k->NH / tp;
    size_t nr = nblk(N, ROWS), nbh = k->B * NHl;
    const gt_gpt_layer_views_t *w = k->w, *g = k->g;
    const gt_gpt_tp_comm_t *cm = k->comm;
    gt_status_t st;
    /* B's tasks: local weight gradients, attention pairs, column sums */
    size_t b_fc = nblk(C, DW_ROWS), b_fp = nblk(4 * Cl, DW_ROWS), b_ap = nblk(Cl, DW_ROWS);
    size_t b_fpb = nblk(C, COLS), b_fcb = nblk(4 * Cl, COLS), b_ln2 = nblk(C, COLS);
    size_t b_apb = nblk(C, COLS);
    size_t nB = nbh + b_fp + b_fpb + b_fc + b_fcb + b_ln2 + b_ap + b_apb;
    size_t d_qkv = nblk(C, DW_ROWS), d_qkvb = nblk(3 * Cl, COLS), d_ln1 = nblk(C, COLS);
    size_t nD = d_qkv + d_qkvb + d_ln1;

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
#pragma omp parallel num_threads(nth(nB))
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
        for (size_t t = 0; t < nB; t++) {
            size_t i = t;
            if (i < b_fc) {
                mm_dw_rows(g->fcw, k->ln2, s->dbuf4, lo_of(C, DW_ROWS, i), hi_of(C, DW_ROWS, i), N,
                           C, 4 * Cl);
                continue;
            }
            i -= b_fc;
            if (i < b_fp) {
                mm_dw_rows(g->fcprojw, k->fchg, s->dres, lo_of(4 * Cl, DW_ROWS, i),
                           hi_of(4 * Cl, DW_ROWS, i), N, 4 * Cl, C);
                continue;
            }
            i -= b_fp;
            if (i < b_ap) {
                mm_dw_rows(g->attprojw, k->atty, s->dres2, lo_of(Cl, DW_ROWS, i),
                           hi_of(Cl, DW_ROWS, i), N, Cl, C);
                continue;
            }
            i -= b_ap;
            if (i < nbh) {
                gt_cpu_attention_bh_backward(s->dqkv, s->datty, k->qkv, k->att,
                                             s->att_scratch + (size_t)omp_get_thread_num() * T * T,
                                             i, T, Cl, NHl);
                continue;
            }
            i -= nbh;
            if (i < b_fpb) {
                gt_cpu_colsum_add(g->fcprojb, s->dres, N, C, lo_of(C, COLS, i), hi_of(C, COLS, i));
                continue;
            }
            i -= b_fpb;
            if (i < b_fcb) {
                gt_cpu_colsum_add(g->fcb, s->dbuf4, N, 4 * Cl, lo_of(4 * Cl, COLS, i),
                                  hi_of(4 * Cl, COLS, i));
                continue;
            }
            i -= b_fcb;
            if (i < b_ln2) {
                gt_cpu_ln_back_params(g->ln2w, g->ln2b, s->dln2, k->res2, k->ln2_mean, k->ln2_rstd,
                                      N, C, lo_of(C, COLS, i), hi_of(C, COLS, i));
                continue;
            }
            i -= b_ln2;
            gt_cpu_colsum_add(g->attprojb, s->dres2, N, C, lo_of(C, COLS, i), hi_of(C, COLS, i));
        }
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
        for (size_t t = 0; t < nD; t++) {
            size_t i = t;
            if (i < d_qkv) {
                mm_dw_rows(g->qkvw, k->ln1, s->dqkv, lo_of(C, DW_ROWS, i), hi_of(C, DW_ROWS, i), N,
                           C, 3 * Cl);
                continue;
            }
            i -= d_qkv;
            if (i < d_qkvb) {
                gt_cpu_colsum_add(g->qkvb, s->dqkv, N, 3 * Cl, lo_of(3 * Cl, COLS, i),
                                  hi_of(3 * Cl, COLS, i));
                continue;
            }
            i -= d_qkvb;
            gt_cpu_ln_back_params(g->ln1w, g->ln1b, s->dln1, k->res, k->ln1_mean, k->ln1_rstd, N, C,
                                  lo_of(C, COLS, i), hi_of(C, COLS, i));
        }
    }
    return GT_OK;
}
