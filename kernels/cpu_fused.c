/* cpu_fused.c — the CPU model passes gpt.c runs: the layer operations of cpu_ops.c regrouped
 * per block of rows (see kernels_internal.h).
 *
 * Why: on 2 cores the non-matmul work is memory traffic and every parallel region ends in a
 * barrier where a descheduled thread (a shared machine) stalls the other. Running the
 * row-local chain of a block (layernorm -> matmul rows -> bias -> GELU -> matmul rows ->
 * residual) on one 256-row slab keeps it in L2 and cuts the regions from ~10 to 3 per block
 * forward and from ~12 to 4 backward. Weight gradients need all rows, so they are separate
 * tasks (rows of dW, channel slices of biases and gains) in their own regions. Each output
 * element is still computed by one task whose bounds depend only on the shapes, so results do
 * not depend on the thread count.
 */
#include "cpu_rows.h"

#include <omp.h>

void gt_cpu_block_forward(const gt_cpu_block_t *k)
{
    size_t N = k->B * k->T, C = k->C, nr = nblk(N, ROWS), nbh = k->B * k->NH;
    const gt_gpt_layer_views_t *w = k->w;
#pragma omp parallel num_threads(nth(nr > nbh ? nr : nbh))
    {
#pragma omp for schedule(dynamic, 1)
        for (size_t t = 0; t < nr; t++) {
            size_t r0 = lo_of(N, ROWS, t), r1 = hi_of(N, ROWS, t);
            for (size_t n = r0; n < r1; n++)
                gt_cpu_ln_row(k->ln1 + n * C, k->ln1_mean + n, k->ln1_rstd + n, k->res + n * C,
                              w->ln1w, w->ln1b, C);
            mm_rows(k->qkv, k->ln1, w->qkvw, w->qkvb, r0, r1, C, 3 * C);
        }
#pragma omp for schedule(dynamic, 1)
        for (size_t bh = 0; bh < nbh; bh++)
            gt_cpu_attention_bh_forward(k->atty, k->att, k->qkv, bh, k->T, C, k->NH);
#pragma omp for schedule(dynamic, 1)
        for (size_t t = 0; t < nr; t++) {
            size_t r0 = lo_of(N, ROWS, t), r1 = hi_of(N, ROWS, t), m = (r1 - r0) * C;
            mm_rows(k->res2, k->atty, w->attprojw, w->attprojb, r0, r1, C, C);
            gt_cpu_add_rows(k->res2 + r0 * C, k->res2 + r0 * C, k->res + r0 * C, m);
            for (size_t n = r0; n < r1; n++)
                gt_cpu_ln_row(k->ln2 + n * C, k->ln2_mean + n, k->ln2_rstd + n, k->res2 + n * C,
                              w->ln2w, w->ln2b, C);
            mm_rows(k->fch, k->ln2, w->fcw, w->fcb, r0, r1, C, 4 * C);
            gt_cpu_gelu_rows(k->fchg + r0 * 4 * C, k->fch + r0 * 4 * C, 4 * m);
            mm_rows(k->res3, k->fchg, w->fcprojw, w->fcprojb, r0, r1, 4 * C, C);
            gt_cpu_add_rows(k->res3 + r0 * C, k->res3 + r0 * C, k->res2 + r0 * C, m);
        }
    }
}

void gt_cpu_block_backward(const gt_cpu_block_t *k, const gt_cpu_block_scratch_t *s)
{
    size_t N = k->B * k->T, C = k->C, nr = nblk(N, ROWS);
    const gt_gpt_layer_views_t *w = k->w;
    /* regions B and D (the weight gradients): cpu_rows.h, at full width */
    gt_cpu_region_b_t nb = gt_cpu_region_b(k, C, k->NH);
    size_t nD = gt_cpu_region_d_count(C, C);
#pragma omp parallel num_threads(nth(nb.total))
    {
        /* A: MLP and ln_2 input gradients, attention-projection input gradient, per rows */
#pragma omp for schedule(dynamic, 1)
        for (size_t t = 0; t < nr; t++) {
            size_t r0 = lo_of(N, ROWS, t), r1 = hi_of(N, ROWS, t);
            mm_back_rows(s->dbuf4, s->dres, w->fcprojw, r0, r1, 4 * C, C);
            gt_cpu_gelu_back_rows(s->dbuf4 + r0 * 4 * C, k->fch + r0 * 4 * C, s->dbuf4 + r0 * 4 * C,
                                  (r1 - r0) * 4 * C);
            mm_back_rows(s->dln2, s->dbuf4, w->fcw, r0, r1, C, 4 * C);
            memcpy(s->dres2 + r0 * C, s->dres + r0 * C, (r1 - r0) * C * sizeof(float));
            for (size_t n = r0; n < r1; n++)
                gt_cpu_ln_back_row(s->dres2 + n * C, s->dln2 + n * C, k->res2 + n * C, w->ln2w,
                                   k->ln2_mean[n], k->ln2_rstd[n], C);
            mm_back_rows(s->datty, s->dres2, w->attprojw, r0, r1, C, C);
        }
        /* B: the MLP/projection weight gradients, then attention backward per (b, h), then
         * the column sums: largest tasks first, so the many small ones at the end fill in
         * behind them and no thread waits long at the barrier */
#pragma omp for schedule(dynamic, 1)
        for (size_t t = 0; t < nb.total; t++) gt_cpu_region_b_task(k, s, &nb, t, C, k->NH);
            /* C: qkv and ln_1 input gradients per rows; dres becomes d(block input) */
#pragma omp for schedule(dynamic, 1)
        for (size_t t = 0; t < nr; t++) {
            size_t r0 = lo_of(N, ROWS, t), r1 = hi_of(N, ROWS, t);
            mm_back_rows(s->dln1, s->dqkv, w->qkvw, r0, r1, C, 3 * C);
            memcpy(s->dres + r0 * C, s->dres2 + r0 * C, (r1 - r0) * C * sizeof(float));
            for (size_t n = r0; n < r1; n++)
                gt_cpu_ln_back_row(s->dres + n * C, s->dln1 + n * C, k->res + n * C, w->ln1w,
                                   k->ln1_mean[n], k->ln1_rstd[n], C);
        }
        /* D: qkv weight and bias gradients, ln_1 gains */
#pragma omp for schedule(dynamic, 1)
        for (size_t t = 0; t < nD; t++) gt_cpu_region_d_task(k, s, t, C);
    }
}

double gt_cpu_head_forward(float *lnf, float *mean, float *rstd, float *probs, float *losses,
                           const float *x, const float *lnfw, const float *lnfb, const float *wte,
                           const int32_t *targets, size_t N, size_t C, size_t V)
{
    size_t nr = nblk(N, ROWS);
#pragma omp parallel for num_threads(nth(nr)) schedule(dynamic, 1)
    for (size_t t = 0; t < nr; t++) {
        size_t r0 = lo_of(N, ROWS, t), r1 = hi_of(N, ROWS, t);
        for (size_t n = r0; n < r1; n++)
            gt_cpu_ln_row(lnf + n * C, mean + n, rstd + n, x + n * C, lnfw, lnfb, C);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)(r1 - r0), (int)V, (int)C, 1.0f,
                    lnf + r0 * C, (int)C, wte, (int)C, 0.0f, probs + r0 * V, (int)V);
        for (size_t n = r0; n < r1; n++)
            losses[n] = gt_cpu_ce_row(probs + n * V, probs + n * V, targets[n], V);
    }
    double sum = 0;
    for (size_t n = 0; n < N; n++) sum += losses[n];
    return sum / (double)N;
}

void gt_cpu_head_backward(float *dres, float *dlnf, float *dwte, float *dlnfw, float *dlnfb,
                          float *probs, const float *lnf, const float *x, const float *lnfw,
                          const float *mean, const float *rstd, const float *wte,
                          const int32_t *targets, size_t N, size_t C, size_t V, float scale)
{
    size_t nr = nblk(N, ROWS), nw = nblk(V, DW_ROWS), nc = nblk(C, COLS);
    float f = scale / (float)N;
#pragma omp parallel num_threads(nth(nr + nw + nc))
    {
#pragma omp for schedule(dynamic, 1)
        for (size_t t = 0; t < nr; t++) {
            size_t r0 = lo_of(N, ROWS, t), r1 = hi_of(N, ROWS, t);
            for (size_t n = r0; n < r1; n++) {
                float *d = probs + n * V;
                for (size_t j = 0; j < V; j++) d[j] *= f;
                d[targets[n]] -= f;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(r1 - r0), (int)C, (int)V,
                        1.0f, probs + r0 * V, (int)V, wte, (int)C, 0.0f, dlnf + r0 * C, (int)C);
            memset(dres + r0 * C, 0, (r1 - r0) * C * sizeof(float));
            for (size_t n = r0; n < r1; n++)
                gt_cpu_ln_back_row(dres + n * C, dlnf + n * C, x + n * C, lnfw, mean[n], rstd[n],
                                   C);
        }
#pragma omp for schedule(dynamic, 1)
        for (size_t t = 0; t < nw + nc; t++) {
            if (t < nw) {
                size_t v0 = lo_of(V, DW_ROWS, t), v1 = hi_of(V, DW_ROWS, t);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)(v1 - v0), (int)C, (int)N,
                            1.0f, probs + v0, (int)V, lnf, (int)C, 1.0f, dwte + v0 * C, (int)C);
            } else {
                size_t i = t - nw;
                gt_cpu_ln_back_params(dlnfw, dlnfb, dlnf, x, mean, rstd, N, C, lo_of(C, COLS, i),
                                      hi_of(C, COLS, i));
            }
        }
    }
}
