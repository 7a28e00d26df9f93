/* cpu_rows.h — the task-splitting arithmetic and the row-block GEMM helpers that the fused CPU
 * passes (cpu_fused.c) and their tensor-parallel twins (cpu_tp.c) share. Internal; static
 * inline so each pass compiles them in place as before. Task sizes are constants, so task
 * boundaries depend only on the shapes (determinism, kernels_internal.h).
 */
#ifndef GT_CPU_ROWS_H
#define GT_CPU_ROWS_H

#include "kernels_internal.h"

#include <cblas.h>
#include <omp.h>
#include <string.h>

#define ROWS    256 /* rows per row-local task */
#define DW_ROWS 128 /* rows of a weight gradient per task */
#define COLS    64  /* channels per column-reduction task */

static inline size_t nblk(size_t n, size_t bs)
{
    return (n + bs - 1) / bs;
}
static inline size_t lo_of(size_t n, size_t bs, size_t i)
{
    return i * bs < n ? i * bs : n;
}
static inline size_t hi_of(size_t n, size_t bs, size_t i)
{
    return (i + 1) * bs < n ? (i + 1) * bs : n;
}

static inline int nth(size_t tasks)
{
    int nt = gt_kern_get_threads();
    return (size_t)nt > tasks ? (int)(tasks ? tasks : 1) : nt;
}

/* out rows [r0, r1) of (N, OC) = b + inp rows (IC) x W (IC, OC); b NULL: no bias */
static inline void mm_rows(float *out, const float *inp, const float *w, const float *b, size_t r0,
                           size_t r1, size_t IC, size_t OC)
{
    float beta = 0.0f;
    if (b) {
        for (size_t n = r0; n < r1; n++) memcpy(out + n * OC, b, OC * sizeof(float));
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(r1 - r0), (int)OC, (int)IC, 1.0f,
                inp + r0 * IC, (int)IC, w, (int)OC, beta, out + r0 * OC, (int)OC);
}

/* dinp rows [r0, r1) (IC) = dout rows (OC) x W(IC, OC)^T, overwritten */
static inline void mm_back_rows(float *dinp, const float *dout, const float *w, size_t r0,
                                size_t r1, size_t IC, size_t OC)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)(r1 - r0), (int)IC, (int)OC, 1.0f,
                dout + r0 * OC, (int)OC, w, (int)OC, 0.0f, dinp + r0 * IC, (int)IC);
}

/* dW rows [i0, i1) of (IC, OC) += inp(N, IC)[:, i0:i1]^T dout(N, OC) */
static inline void mm_dw_rows(float *dw, const float *inp, const float *dout, size_t i0, size_t i1,
                              size_t N, size_t IC, size_t OC)
{
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)(i1 - i0), (int)OC, (int)N, 1.0f,
                inp + i0, (int)IC, dout, (int)OC, 1.0f, dw + i0 * OC, (int)OC);
}

/* The weight-gradient regions of a block's backward, shared by cpu_fused.c and cpu_tp.c.
 * Cl = C / tp and NHl = NH / tp are the rank's hidden width and heads (C and NH without tensor
 * parallelism); the other dimensions are whole. */

/* Region B: task counts, in task order — largest first (MLP and projection weight rows, the
 * attention (b, h) pairs), then the column sums, so the many small tasks fill in behind. */
typedef struct {
    size_t fc, fp, ap, bh, fpb, fcb, ln2, apb, total;
} gt_cpu_region_b_t;

static inline gt_cpu_region_b_t gt_cpu_region_b(const gt_cpu_block_t *k, size_t Cl, size_t NHl)
{
    size_t C = k->C;
    gt_cpu_region_b_t n = {nblk(C, DW_ROWS), nblk(4 * Cl, DW_ROWS), nblk(Cl, DW_ROWS),
                           k->B * NHl,       nblk(C, COLS),         nblk(4 * Cl, COLS),
                           nblk(C, COLS),    nblk(C, COLS),         0};
    n.total = n.fc + n.fp + n.ap + n.bh + n.fpb + n.fcb + n.ln2 + n.apb;
    return n;
}

/* Region B, task i (< n->total); attention scratch is per OpenMP thread. */
static inline void gt_cpu_region_b_task(const gt_cpu_block_t *k, const gt_cpu_block_scratch_t *s,
                                        const gt_cpu_region_b_t *n, size_t i, size_t Cl, size_t NHl)
{
    size_t N = k->B * k->T, C = k->C, T = k->T;
    const gt_gpt_layer_views_t *g = k->g;
    if (i < n->fc) {
        mm_dw_rows(g->fcw, k->ln2, s->dbuf4, lo_of(C, DW_ROWS, i), hi_of(C, DW_ROWS, i), N, C,
                   4 * Cl);
        return;
    }
    i -= n->fc;
    if (i < n->fp) {
        mm_dw_rows(g->fcprojw, k->fchg, s->dres, lo_of(4 * Cl, DW_ROWS, i),
                   hi_of(4 * Cl, DW_ROWS, i), N, 4 * Cl, C);
        return;
    }
    i -= n->fp;
    if (i < n->ap) {
        mm_dw_rows(g->attprojw, k->atty, s->dres2, lo_of(Cl, DW_ROWS, i), hi_of(Cl, DW_ROWS, i), N,
                   Cl, C);
        return;
    }
    i -= n->ap;
    if (i < n->bh) {
        gt_cpu_attention_bh_backward(s->dqkv, s->datty, k->qkv, k->att,
                                     s->att_scratch + (size_t)omp_get_thread_num() * T * T, i, T,
                                     Cl, NHl);
        return;
    }
    i -= n->bh;
    if (i < n->fpb) {
        gt_cpu_colsum_add(g->fcprojb, s->dres, N, C, lo_of(C, COLS, i), hi_of(C, COLS, i));
        return;
    }
    i -= n->fpb;
    if (i < n->fcb) {
        gt_cpu_colsum_add(g->fcb, s->dbuf4, N, 4 * Cl, lo_of(4 * Cl, COLS, i),
                          hi_of(4 * Cl, COLS, i));
        return;
    }
    i -= n->fcb;
    if (i < n->ln2) {
        gt_cpu_ln_back_params(g->ln2w, g->ln2b, s->dln2, k->res2, k->ln2_mean, k->ln2_rstd, N, C,
                              lo_of(C, COLS, i), hi_of(C, COLS, i));
        return;
    }
    i -= n->ln2;
    gt_cpu_colsum_add(g->attprojb, s->dres2, N, C, lo_of(C, COLS, i), hi_of(C, COLS, i));
}

/* Region D: qkv weight rows, qkv bias columns, ln_1 gains. */
static inline size_t gt_cpu_region_d_count(size_t C, size_t Cl)
{
    return nblk(C, DW_ROWS) + nblk(3 * Cl, COLS) + nblk(C, COLS);
}

static inline void gt_cpu_region_d_task(const gt_cpu_block_t *k, const gt_cpu_block_scratch_t *s,
                                        size_t i, size_t Cl)
{
    size_t N = k->B * k->T, C = k->C, d_qkv = nblk(C, DW_ROWS), d_qkvb = nblk(3 * Cl, COLS);
    const gt_gpt_layer_views_t *g = k->g;
    if (i < d_qkv) {
        mm_dw_rows(g->qkvw, k->ln1, s->dqkv, lo_of(C, DW_ROWS, i), hi_of(C, DW_ROWS, i), N, C,
                   3 * Cl);
        return;
    }
    i -= d_qkv;
    if (i < d_qkvb) {
        gt_cpu_colsum_add(g->qkvb, s->dqkv, N, 3 * Cl, lo_of(3 * Cl, COLS, i),
                          hi_of(3 * Cl, COLS, i));
        return;
    }
    i -= d_qkvb;
    gt_cpu_ln_back_params(g->ln1w, g->ln1b, s->dln1, k->res, k->ln1_mean, k->ln1_rstd, N, C,
                          lo_of(C, COLS, i), hi_of(C, COLS, i));
}

#endif /* GT_CPU_ROWS_H */
