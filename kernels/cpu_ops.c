/* cpu_ops.c — the CPU layer operations of the GPT: the specification of the model's math.
 *
 * Matmuls (including attention's per-head products) go to OpenBLAS sgemm, called
 * single-threaded from inside our own OpenMP regions. Work is cut into tasks whose boundaries
 * depend only on the shapes (blocks of output rows, rows of dW, channel slices), never on the
 * thread count, and every output element is computed by exactly one task: results do not
 * depend on timing or on how many threads run. Tasks are handed out dynamically, so a thread
 * that the OS descheduled (a shared machine) does not stall the others at the barrier, and
 * there is one thread pool instead of OpenBLAS's spinning workers competing with ours. The
 * elementwise and row loops (layernorm, softmax, GELU, cross-entropy) are written so GCC
 * vectorises them, compiled for AVX-512, AVX2 and baseline x86-64 (target_clones), with a
 * polynomial exp instead of libm's scalar expf. Gradient reductions over rows (bias, gains,
 * embeddings) are sliced by channel so each sum runs in row order on one thread.
 */
#include "kernels_internal.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define GT_VEC __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GT_VEC
#endif

#define LN_EPS 1e-5f

static int nth(size_t work_items)
{
    int nt = gt_kern_get_threads();
    if ((size_t)nt > work_items) nt = work_items ? (int)work_items : 1;
    return nt;
}

/* Task sizes (shape-only, so results are independent of the thread count). */
#define GEMM_ROWS 128 /* output rows per sgemm task */
#define DW_ROWS   64  /* rows of a weight gradient per task */
#define COLS      64  /* channels per column-reduction task */

static size_t nblocks(size_t n, size_t bs)
{
    return (n + bs - 1) / bs;
}
static size_t blk_lo(size_t n, size_t bs, size_t i)
{
    return i * bs < n ? i * bs : n;
}
static size_t blk_hi(size_t n, size_t bs, size_t i)
{
    return (i + 1) * bs < n ? (i + 1) * bs : n;
}

/* exp(x) for x <= 88.7 to ~2 ulp: round x*log2(e) to n with the 1.5*2^23 trick, a Cephes
 * polynomial for the remainder, and 2^n through the exponent bits. Plain arithmetic, so loops
 * calling it vectorise. Inputs below -87 return exp(-87) ~ 1.6e-38. */
static inline float vexpf(float x)
{
    x = x > 88.3f ? 88.3f : x;
    x = x < -87.0f ? -87.0f : x;
    float k = x * 1.44269504088896341f + 12582912.0f;
    k -= 12582912.0f;
    float r = x - k * 0.693359375f;
    r = r - k * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * r * r + r + 1.0f;
    union {
        float f;
        uint32_t u;
    } u;
    u.f = y;
    u.u += (uint32_t)(int32_t)k << 23; /* unsigned: no signed-shift UB for negative k */
    return u.f;
}

/* ---- embeddings --------------------------------------------------------------------------- */

void gt_cpu_encoder_forward(float *out, const int32_t *inp, const float *wte, const float *wpe,
                            size_t B, size_t T, size_t C)
{
    size_t N = B * T;
#pragma omp parallel for num_threads(nth(N)) schedule(dynamic, 32)
    for (size_t n = 0; n < N; n++) {
        const float *a = wte + (size_t)inp[n] * C, *p = wpe + (n % T) * C;
        float *o = out + n * C;
        for (size_t c = 0; c < C; c++) o[c] = a[c] + p[c];
    }
}

void gt_cpu_encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *inp,
                             size_t B, size_t T, size_t C)
{
    size_t N = B * T, nb = nblocks(C, COLS);
#pragma omp parallel for num_threads(nth(nb)) schedule(dynamic, 1)
    for (size_t blk = 0; blk < nb; blk++) {
        size_t c0 = blk_lo(C, COLS, blk), c1 = blk_hi(C, COLS, blk);
        for (size_t n = 0; n < N; n++) {
            const float *d = dout + n * C;
            float *a = dwte + (size_t)inp[n] * C, *p = dwpe + (n % T) * C;
            for (size_t c = c0; c < c1; c++) {
                a[c] += d[c];
                p[c] += d[c];
            }
        }
    }
}

/* ---- layernorm ---------------------------------------------------------------------------- */

GT_VEC void gt_cpu_ln_row(float *o, float *mean_p, float *rstd_p, const float *x, const float *w,
                          const float *b, size_t C)
{
    float s = 0;
    for (size_t c = 0; c < C; c++) s += x[c];
    float m = s / (float)C;
    float v = 0;
    for (size_t c = 0; c < C; c++) {
        float d = x[c] - m;
        v += d * d;
    }
    float rs = 1.0f / sqrtf(v / (float)C + LN_EPS);
    for (size_t c = 0; c < C; c++) o[c] = (x[c] - m) * rs * w[c] + b[c];
    *mean_p = m;
    *rstd_p = rs;
}

void gt_cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                              const float *w, const float *b, size_t N, size_t C)
{
#pragma omp parallel for num_threads(nth(N)) schedule(dynamic, 32)
    for (size_t n = 0; n < N; n++)
        gt_cpu_ln_row(out + n * C, mean + n, rstd + n, inp + n * C, w, b, C);
}

GT_VEC void gt_cpu_ln_back_row(float *dx, const float *dout, const float *x, const float *w,
                               float m, float rs, size_t C)
{
    float a = 0, bm = 0;
    for (size_t c = 0; c < C; c++) {
        float dn = w[c] * dout[c];
        a += dn;
        bm += dn * (x[c] - m) * rs;
    }
    a /= (float)C;
    bm /= (float)C;
    for (size_t c = 0; c < C; c++) {
        float norm = (x[c] - m) * rs;
        dx[c] += (w[c] * dout[c] - a - norm * bm) * rs;
    }
}

GT_VEC void gt_cpu_ln_back_params(float *dw, float *db, const float *dout, const float *x,
                                  const float *mean, const float *rstd, size_t N, size_t C,
                                  size_t c0, size_t c1)
{
    for (size_t n = 0; n < N; n++) {
        const float *d = dout + n * C, *xr = x + n * C;
        float m = mean[n], rs = rstd[n];
        for (size_t c = c0; c < c1; c++) {
            dw[c] += d[c] * (xr[c] - m) * rs;
            db[c] += d[c];
        }
    }
}

void gt_cpu_layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                               const float *inp, const float *w, const float *mean,
                               const float *rstd, size_t N, size_t C)
{
    /* tasks: row blocks for dinp, then channel slices for dw and db */
    size_t nr = nblocks(N, GEMM_ROWS), nc = nblocks(C, COLS);
#pragma omp parallel for num_threads(nth(nr + nc)) schedule(dynamic, 1)
    for (size_t task = 0; task < nr + nc; task++) {
        if (task < nr) {
            for (size_t n = blk_lo(N, GEMM_ROWS, task); n < blk_hi(N, GEMM_ROWS, task); n++)
                gt_cpu_ln_back_row(dinp + n * C, dout + n * C, inp + n * C, w, mean[n], rstd[n], C);
        } else {
            size_t b = task - nr;
            gt_cpu_ln_back_params(dw, db, dout, inp, mean, rstd, N, C, blk_lo(C, COLS, b),
                                  blk_hi(C, COLS, b));
        }
    }
}

/* ---- matmul ------------------------------------------------------------------------------- */

void gt_cpu_matmul_forward(float *out, const float *inp, const float *w, const float *b, size_t N,
                           size_t IC, size_t OC)
{
    size_t nb = nblocks(N, GEMM_ROWS);
#pragma omp parallel for num_threads(nth(nb)) schedule(dynamic, 1)
    for (size_t blk = 0; blk < nb; blk++) {
        size_t r0 = blk_lo(N, GEMM_ROWS, blk), r1 = blk_hi(N, GEMM_ROWS, blk);
        {
            float beta = 0;
            if (b) {
                for (size_t n = r0; n < r1; n++) memcpy(out + n * OC, b, OC * sizeof(float));
                beta = 1;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(r1 - r0), (int)OC, (int)IC,
                        1.0f, inp + r0 * IC, (int)IC, w, (int)OC, beta, out + r0 * OC, (int)OC);
        }
    }
}

GT_VEC void gt_cpu_colsum_add(float *db, const float *dout, size_t N, size_t OC, size_t o0,
                              size_t o1)
{
    for (size_t n = 0; n < N; n++) {
        const float *d = dout + n * OC;
        for (size_t o = o0; o < o1; o++) db[o] += d[o];
    }
}

void gt_cpu_matmul_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                            const float *w, size_t N, size_t IC, size_t OC, int overwrite_dinp)
{
    /* tasks: row blocks of dinp, row blocks of dw, column slices of db */
    size_t nr = dinp ? nblocks(N, GEMM_ROWS) : 0, nw = nblocks(IC, DW_ROWS);
    size_t nc = db ? nblocks(OC, COLS) : 0, nt = nr + nw + nc;
#pragma omp parallel for num_threads(nth(nt)) schedule(dynamic, 1)
    for (size_t task = 0; task < nt; task++) {
        if (task < nr) {
            size_t r0 = blk_lo(N, GEMM_ROWS, task), r1 = blk_hi(N, GEMM_ROWS, task);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)(r1 - r0), (int)IC, (int)OC,
                        1.0f, dout + r0 * OC, (int)OC, w, (int)OC, overwrite_dinp ? 0.0f : 1.0f,
                        dinp + r0 * IC, (int)IC);
        } else if (task < nr + nw) {
            size_t i0 = blk_lo(IC, DW_ROWS, task - nr), i1 = blk_hi(IC, DW_ROWS, task - nr);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)(i1 - i0), (int)OC, (int)N,
                        1.0f, inp + i0, (int)IC, dout, (int)OC, 1.0f, dw + i0 * OC, (int)OC);
        } else {
            size_t b = task - nr - nw;
            gt_cpu_colsum_add(db, dout, N, OC, blk_lo(OC, COLS, b), blk_hi(OC, COLS, b));
        }
    }
}

/* ---- attention ---------------------------------------------------------------------------- */

/* Causal softmax of row t of scores in place: entries 0..t, the rest set to 0. */
GT_VEC static void softmax_causal_row(float *s, size_t t, size_t T)
{
    float mx = -INFINITY;
    for (size_t j = 0; j <= t; j++) mx = s[j] > mx ? s[j] : mx;
    float sum = 0;
    for (size_t j = 0; j <= t; j++) {
        float e = vexpf(s[j] - mx);
        s[j] = e;
        sum += e;
    }
    float inv = 1.0f / sum;
    for (size_t j = 0; j <= t; j++) s[j] *= inv;
    for (size_t j = t + 1; j < T; j++) s[j] = 0;
}

void gt_cpu_attention_bh_forward(float *out, float *att, const float *qkv, size_t bh, size_t T,
                                 size_t C, size_t NH)
{
    size_t hs = C / NH, C3 = 3 * C, b = bh / NH, h = bh % NH;
    float scale = 1.0f / sqrtf((float)hs);
    const float *q = qkv + b * T * C3 + h * hs, *k = q + C, *v = q + 2 * C;
    float *S = att + bh * T * T;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)T, (int)hs, scale, q, (int)C3,
                k, (int)C3, 0.0f, S, (int)T);
    for (size_t t = 0; t < T; t++) softmax_causal_row(S + t * T, t, T);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)hs, (int)T, 1.0f, S, (int)T,
                v, (int)C3, 0.0f, out + b * T * C + h * hs, (int)C);
}

void gt_cpu_attention_forward(float *out, float *att, const float *qkv, size_t B, size_t T,
                              size_t C, size_t NH)
{
#pragma omp parallel for num_threads(nth(B *NH)) schedule(dynamic, 1)
    for (size_t bh = 0; bh < B * NH; bh++) gt_cpu_attention_bh_forward(out, att, qkv, bh, T, C, NH);
}

size_t gt_cpu_attention_scratch_len(size_t T, size_t C, size_t NH)
{
    (void)C, (void)NH;
    return T * T * (size_t)gt_kern_get_threads();
}

/* dS = P * (dP - rowsum(P * dP)) on the causal part of one row (dP in place). */
GT_VEC static void softmax_back_row(float *dp, const float *p, size_t t, size_t T)
{
    float dot = 0;
    for (size_t j = 0; j <= t; j++) dot += p[j] * dp[j];
    for (size_t j = 0; j <= t; j++) dp[j] = p[j] * (dp[j] - dot);
    for (size_t j = t + 1; j < T; j++) dp[j] = 0;
}

void gt_cpu_attention_bh_backward(float *dqkv, const float *dout, const float *qkv,
                                  const float *att, float *dS, size_t bh, size_t T, size_t C,
                                  size_t NH)
{
    size_t hs = C / NH, C3 = 3 * C, b = bh / NH, h = bh % NH;
    float scale = 1.0f / sqrtf((float)hs);
    const float *q = qkv + b * T * C3 + h * hs, *k = q + C, *v = q + 2 * C;
    const float *P = att + bh * T * T, *dy = dout + b * T * C + h * hs;
    float *dq = dqkv + b * T * C3 + h * hs, *dk = dq + C, *dv = dq + 2 * C;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)T, (int)hs, 1.0f, dy, (int)C,
                v, (int)C3, 0.0f, dS, (int)T);
    for (size_t t = 0; t < T; t++) softmax_back_row(dS + t * T, P + t * T, t, T);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)hs, (int)T, scale, dS,
                (int)T, k, (int)C3, 0.0f, dq, (int)C3);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)T, (int)hs, (int)T, scale, dS, (int)T,
                q, (int)C3, 0.0f, dk, (int)C3);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)T, (int)hs, (int)T, 1.0f, P, (int)T,
                dy, (int)C, 0.0f, dv, (int)C3);
}

void gt_cpu_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att,
                               float *scratch, size_t B, size_t T, size_t C, size_t NH)
{
#pragma omp parallel for num_threads(nth(B *NH)) schedule(dynamic, 1)
    for (size_t bh = 0; bh < B * NH; bh++)
        gt_cpu_attention_bh_backward(dqkv, dout, qkv, att,
                                     scratch + (size_t)omp_get_thread_num() * T * T, bh, T, C, NH);
}

/* ---- GELU, residual ------------------------------------------------------------------------ */

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */

static inline float vtanhf(float u)
{
    u = u > 15.0f ? 15.0f : (u < -15.0f ? -15.0f : u);
    return 1.0f - 2.0f / (vexpf(2.0f * u) + 1.0f);
}

GT_VEC void gt_cpu_gelu_rows(float *out, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        float u = GELU_K * (v + 0.044715f * v * v * v);
        out[i] = 0.5f * v * (1.0f + vtanhf(u));
    }
}

GT_VEC void gt_cpu_gelu_back_rows(float *dx, const float *x, const float *dout, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        float u = GELU_K * (v + 0.044715f * v * v * v);
        float th = vtanhf(u);
        float g = 0.5f * (1.0f + th) +
                  0.5f * v * (1.0f - th * th) * GELU_K * (1.0f + 3.0f * 0.044715f * v * v);
        dx[i] = g * dout[i];
    }
}

#define CHUNK ((size_t)1 << 14)

void gt_cpu_gelu_forward(float *out, const float *inp, size_t n)
{
    size_t nc = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for num_threads(nth(nc)) schedule(dynamic, 1)
    for (size_t c = 0; c < nc; c++) {
        size_t lo = c * CHUNK, len = n - lo < CHUNK ? n - lo : CHUNK;
        gt_cpu_gelu_rows(out + lo, inp + lo, len);
    }
}

void gt_cpu_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n)
{
    size_t nc = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for num_threads(nth(nc)) schedule(dynamic, 1)
    for (size_t c = 0; c < nc; c++) {
        size_t lo = c * CHUNK, len = n - lo < CHUNK ? n - lo : CHUNK;
        gt_cpu_gelu_back_rows(dinp + lo, inp + lo, dout + lo, len);
    }
}

GT_VEC void gt_cpu_add_rows(float *out, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void gt_cpu_residual_forward(float *out, const float *a, const float *b, size_t n)
{
    size_t nc = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for num_threads(nth(nc)) schedule(dynamic, 1)
    for (size_t c = 0; c < nc; c++) {
        size_t lo = c * CHUNK, len = n - lo < CHUNK ? n - lo : CHUNK;
        gt_cpu_add_rows(out + lo, a + lo, b + lo, len);
    }
}

/* ---- softmax + cross-entropy ---------------------------------------------------------------- */

GT_VEC float gt_cpu_ce_row(float *p, const float *logits, int32_t target, size_t V)
{
    float mx = -INFINITY;
    for (size_t j = 0; j < V; j++) mx = logits[j] > mx ? logits[j] : mx;
    float lt = logits[target] - mx; /* before p (which may alias logits) is written */
    float sum = 0;
    for (size_t j = 0; j < V; j++) {
        float e = vexpf(logits[j] - mx);
        p[j] = e;
        sum += e;
    }
    float inv = 1.0f / sum;
    for (size_t j = 0; j < V; j++) p[j] *= inv;
    return logf(sum) - lt;
}

double gt_cpu_crossentropy_forward(float *probs, float *losses, const float *logits,
                                   const int32_t *targets, size_t N, size_t V)
{
#pragma omp parallel for num_threads(nth(N)) schedule(dynamic, 32)
    for (size_t n = 0; n < N; n++) {
        losses[n] = gt_cpu_ce_row(probs + n * V, logits + n * V, targets[n], V);
    }
    double s = 0;
    for (size_t n = 0; n < N; n++) s += losses[n];
    return s / (double)N;
}

void gt_cpu_crossentropy_backward(float *dlogits, const float *probs, const int32_t *targets,
                                  size_t N, size_t V, float scale)
{
    float f = scale / (float)N;
#pragma omp parallel for num_threads(nth(N)) schedule(dynamic, 32)
    for (size_t n = 0; n < N; n++) {
        float *d = dlogits + n * V;
        const float *p = probs + n * V;
        for (size_t j = 0; j < V; j++) d[j] = p[j] * f;
        d[targets[n]] -= f;
    }
}

/* ---- reductions ------------------------------------------------------------------------------ */

GT_VEC static double sumsq_chunk(const float *x, size_t n)
{
    double acc[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += (double)x[i + j] * (double)x[i + j];
    double s = 0;
    for (; i < n; i++) s += (double)x[i] * (double)x[i];
    for (int j = 0; j < 8; j++) s += acc[j];
    return s;
}

#define SUMSQ_CHUNK ((size_t)1 << 16)
#define SUMSQ_STACK 256

double gt_cpu_sumsq(const float *x, size_t n)
{
    size_t nc = (n + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK;
    double total = 0;
    /* Chunks of a fixed size, summed in chunk order: the result does not depend on threads. */
    for (size_t base = 0; base < nc; base += SUMSQ_STACK) {
        double part[SUMSQ_STACK];
        size_t m = nc - base < SUMSQ_STACK ? nc - base : SUMSQ_STACK;
#pragma omp parallel for num_threads(nth(m)) schedule(dynamic, 1)
        for (size_t c = 0; c < m; c++) {
            size_t lo = (base + c) * SUMSQ_CHUNK;
            part[c] = sumsq_chunk(x + lo, n - lo < SUMSQ_CHUNK ? n - lo : SUMSQ_CHUNK);
        }
        for (size_t c = 0; c < m; c++) total += part[c];
    }
    return total;
}

GT_VEC static void scale_chunk(float *x, size_t n, float s)
{
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

void gt_cpu_scale(float *x, size_t n, float s)
{
    size_t nc = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for num_threads(nth(nc)) schedule(dynamic, 1)
    for (size_t c = 0; c < nc; c++) {
        size_t lo = c * CHUNK;
        scale_chunk(x + lo, n - lo < CHUNK ? n - lo : CHUNK, s);
    }
}

/* ---- tied LM head -------------------------------------------------------------------------- */

void gt_cpu_lmhead_forward(float *logits, const float *x, const float *wte, size_t N, size_t C,
                           size_t V)
{
    size_t nb = nblocks(N, GEMM_ROWS);
#pragma omp parallel for num_threads(nth(nb)) schedule(dynamic, 1)
    for (size_t blk = 0; blk < nb; blk++) {
        size_t r0 = blk_lo(N, GEMM_ROWS, blk), r1 = blk_hi(N, GEMM_ROWS, blk);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)(r1 - r0), (int)V, (int)C, 1.0f,
                    x + r0 * C, (int)C, wte, (int)C, 0.0f, logits + r0 * V, (int)V);
    }
}

void gt_cpu_lmhead_backward(float *dx, float *dwte, const float *dlogits, const float *x,
                            const float *wte, size_t N, size_t C, size_t V)
{
    size_t nr = nblocks(N, GEMM_ROWS), nw = nblocks(V, DW_ROWS);
#pragma omp parallel for num_threads(nth(nr + nw)) schedule(dynamic, 1)
    for (size_t task = 0; task < nr + nw; task++) {
        if (task < nr) {
            size_t r0 = blk_lo(N, GEMM_ROWS, task), r1 = blk_hi(N, GEMM_ROWS, task);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(r1 - r0), (int)C, (int)V,
                        1.0f, dlogits + r0 * V, (int)V, wte, (int)C, 0.0f, dx + r0 * C, (int)C);
        } else {
            size_t v0 = blk_lo(V, DW_ROWS, task - nr), v1 = blk_hi(V, DW_ROWS, task - nr);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)(v1 - v0), (int)C, (int)N,
                        1.0f, dlogits + v0, (int)V, x, (int)C, 1.0f, dwte + v0 * C, (int)C);
        }
    }
}
