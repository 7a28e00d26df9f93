/* cpu_rows.h — the task-splitting arithmetic and the row-block GEMM helpers that the fused CPU
 * passes (cpu_fused.c) and their tensor-parallel twins (cpu_tp.c) share. Internal; static
 * inline so each pass compiles them in place as before. Task sizes are constants, so task
 * boundaries depend only on the shapes (determinism, kernels_internal.h).
 */
#ifndef GT_CPU_ROWS_H
#define GT_CPU_ROWS_H

#include "kernels_internal.h"

#include <cblas.h>
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

#endif /* GT_CPU_ROWS_H */
