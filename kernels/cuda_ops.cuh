/* cuda_ops.cuh — the CUDA layer kernels of the GPT (internal to kernels/), shared by
 * cuda_ops.cu (their definitions) and gpt_cuda.cu (the model that chains them).
 *
 * Precision: matmul operands and most activations are bf16; every kernel computes in fp32;
 * the residual stream, its gradient, LayerNorm statistics, losses and all parameter
 * gradients are fp32. Every reduction runs in a fixed order (warp shuffles in a fixed tree,
 * per-chunk partial sums added in chunk order), never with atomics, so a run is bit-identical
 * to the previous one on the same GPU.
 */
#ifndef GT_CUDA_OPS_CUH
#define GT_CUDA_OPS_CUH

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

typedef __nv_bfloat16 bf16;

/* Row-major GEMM through cuBLAS: C[M,N] (ldc) = alpha * op(A)[M,K] op(B)[K,N] + beta * C,
 * op(X) = X^T when the flag is set (X then stored as [K,M] or [N,K]). A and B are bf16; C is
 * bf16 or fp32 (c_fp32). Batched over `batch` matrices with the given element strides. */
cublasStatus_t gt_cu_gemm(cublasHandle_t h, int ta, int tb, int M, int N, int K, float alpha,
                          const bf16 *A, int lda, long long sa, const bf16 *B, int ldb,
                          long long sb, float beta, void *C, int c_fp32, int ldc, long long sc,
                          int batch);

void gt_cu_f32_to_bf16(bf16 *out, const float *in, size_t n, cudaStream_t s);
void gt_cu_encoder_forward(float *out, const int32_t *tok, const bf16 *wte, const bf16 *wpe, int B,
                           int T, int C, cudaStream_t s);
/* dwte: rows listed by (uniq, start, pos) — for unique token u, positions
 * pos[start[u]..start[u+1]) in increasing order; dwpe: per (t, c) over b. */
void gt_cu_encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *uniq,
                            const int32_t *start, const int32_t *pos, int nuniq, int B, int T,
                            int C, cudaStream_t s);
void gt_cu_layernorm_forward(bf16 *out, float *mean, float *rstd, const float *inp, const bf16 *w,
                             const bf16 *b, int N, int C, cudaStream_t s);
/* dinp += ..., and dinp_bf = bf16(dinp) after the update (the next matmul's operand). */
void gt_cu_layernorm_backward_dinp(float *dinp, bf16 *dinp_bf, const float *dout, const float *inp,
                                   const bf16 *w, const float *mean, const float *rstd, int N,
                                   int C, cudaStream_t s);
/* dw += sum_n dout * norm, db += sum_n dout; `partial` holds 2 * C * GT_CU_ROW_CHUNKS floats. */
void gt_cu_layernorm_backward_params(float *dw, float *db, float *partial, const float *dout,
                                     const float *inp, const float *mean, const float *rstd, int N,
                                     int C, cudaStream_t s);
/* db += column sums of dout (N, OC); `partial` holds OC * GT_CU_ROW_CHUNKS floats. */
void gt_cu_bias_backward_f32(float *db, float *partial, const float *dout, int N, int OC,
                             cudaStream_t s);
void gt_cu_bias_backward_bf16(float *db, float *partial, const bf16 *dout, int N, int OC,
                              cudaStream_t s);
void gt_cu_add_bias_bf16(bf16 *x, const bf16 *b, int N, int OC, cudaStream_t s);
/* x(N, C) = x + b + res (fp32 residual stream after a projection). */
void gt_cu_residual_bias(float *x, const bf16 *b, const float *res, int N, int C, cudaStream_t s);
/* pre = pre + b (kept for backward), out = gelu(pre). */
void gt_cu_bias_gelu_forward(bf16 *out, bf16 *pre, const bf16 *b, int N, int OC, cudaStream_t s);
/* d = gelu'(pre) * d, in place. */
void gt_cu_gelu_backward(bf16 *d, const bf16 *pre, size_t n, cudaStream_t s);
/* qkv (B, T, 3C) -> q, k, v (B, NH, T, hs); and back for the gradients. */
void gt_cu_split_heads(bf16 *q, bf16 *k, bf16 *v, const bf16 *qkv, int B, int T, int NH, int hs,
                       cudaStream_t s);
void gt_cu_merge_qkv_grads(bf16 *dqkv, const bf16 *dq, const bf16 *dk, const bf16 *dv, int B, int T,
                           int NH, int hs, cudaStream_t s);
/* y (B, NH, T, hs) -> out (B, T, C), and its transpose for the gradient. */
void gt_cu_merge_heads(bf16 *out, const bf16 *y, int B, int T, int NH, int hs, cudaStream_t s);
void gt_cu_split_heads_one(bf16 *y, const bf16 *in, int B, int T, int NH, int hs, cudaStream_t s);
/* Causal softmax of pre (rows of T, fp32 scaled scores) into att (bf16). */
void gt_cu_softmax_causal(bf16 *att, const float *pre, int rows, int T, cudaStream_t s);
/* dpre = att * (datt - rowsum(att * datt)) on the causal part, 0 above (bf16 out). */
void gt_cu_softmax_causal_backward(bf16 *dpre, const float *datt, const bf16 *att, int rows, int T,
                                   cudaStream_t s);
/* Flash attention (cuda_flash.cu): causal, on q, k, v (B*NH, T, hs) bf16, never forming the
 * (T, T) scores. hs must pass gt_cu_flash_supported (a multiple of 8, at most
 * GT_CU_FLASH_MAX_HS); call gt_cu_flash_init(hs) once before the first launch (it raises the
 * kernels' dynamic shared-memory limit). Forward writes out (B*NH, T, hs) and the per-row
 * log-sum-exp of the scaled scores, lse (B*NH, T) fp32, which backward needs. */
#define GT_CU_FLASH_MAX_HS 128
int gt_cu_flash_supported(int hs);
cudaError_t gt_cu_flash_init(int hs);
void gt_cu_flash_forward(bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v, int BH,
                         int T, int hs, float scale, cudaStream_t s);
/* dsum (B*NH, T) = per-head rowsum(dout * out), both read in the (B, T, C) layout. */
void gt_cu_flash_dsum(float *dsum, const bf16 *dout, const bf16 *out, int B, int T, int NH, int hs,
                      cudaStream_t s);
/* dq, dk, dv (B*NH, T, hs) are OVERWRITTEN; dout (B*NH, T, hs); deterministic (no atomics). */
void gt_cu_flash_backward(bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *q, const bf16 *k, const bf16 *v,
                          const bf16 *dout, const float *lse, const float *dsum, int BH, int T,
                          int hs, float scale, cudaStream_t s);
/* Where each head's (T, hs) matrix lies in a bf16 tensor: element (t, d) of head bh = b*NH + h
 * is at p[(bh / nh) * bstride + (bh % nh) * hstride + t * ld + d]. gt_cu_heads_split: the
 * (B*NH, T, hs) layout of gt_cu_split_heads; gt_cu_heads_rows: heads side by side in the rows
 * of a (B, T, width) tensor (the model's qkv with width 3C and p offset by 0, C or 2C; its
 * attention output with width C). */
typedef struct {
    int nh;
    long long bstride;
    int hstride, ld;
} gt_cu_heads_t;
static inline gt_cu_heads_t gt_cu_heads_split(int T, int hs)
{
    gt_cu_heads_t l = {1, (long long)T * hs, 0, hs};
    return l;
}
static inline gt_cu_heads_t gt_cu_heads_rows(int NH, int T, int hs, int width)
{
    gt_cu_heads_t l = {NH, (long long)T * width, hs, width};
    return l;
}

/* The same computation, second version (cuda_flash2.cu: softmax in mma.sync registers,
 * ldmatrix, cp.async double buffering); gt_cu_flash_supported and gt_cu_flash_dsum serve both.
 * q, k, v (and dq, dk, dv, written in place of nothing else) are laid out as lin says, out and
 * dout as lout says (hstride and ld multiples of 8); lse and dsum are (B*NH, T). */
cudaError_t gt_cu_flash2_init(int hs);
void gt_cu_flash2_forward(bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v,
                          int BH, int T, int hs, float scale, gt_cu_heads_t lin, gt_cu_heads_t lout,
                          cudaStream_t s);
void gt_cu_flash2_backward(bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *q, const bf16 *k,
                           const bf16 *v, const bf16 *dout, const float *lse, const float *dsum,
                           int BH, int T, int hs, float scale, gt_cu_heads_t lin,
                           gt_cu_heads_t lout, cudaStream_t s);
/* Per row of logits (N, Vp), over the first V: max, sum of exp, loss[n]. */
void gt_cu_crossentropy_forward(float *loss, float *rowmax, float *rowsum, const bf16 *logits,
                                const int32_t *targets, int N, int V, int Vp, cudaStream_t s);
/* logits := scale / N * (softmax - onehot) in place; padded columns 0. */
void gt_cu_crossentropy_backward(bf16 *logits, const float *rowmax, const float *rowsum,
                                 const int32_t *targets, int N, int V, int Vp, float scale,
                                 cudaStream_t s);
/* partial[i] = sum of squares (double) of chunk i of GT_CU_SUMSQ_CHUNK elements. */
void gt_cu_sumsq_partials(double *partial, const float *x, size_t n, cudaStream_t s);
void gt_cu_scale(float *x, size_t n, float a, cudaStream_t s);
/* AdamW over n elements (the CPU formula, bias corrections precomputed on the host), also
 * writing the bf16 working copy of the updated parameters. */
void gt_cu_adamw(float *theta, bf16 *theta_bf, const float *g, float *m, float *v, size_t n,
                 float lr, float b1, float b2, float eps, float wd, float bc1, float bc2,
                 cudaStream_t s);

#define GT_CU_ROW_CHUNKS  64
#define GT_CU_SUMSQ_CHUNK ((size_t)1 << 16)

#endif /* GT_CUDA_OPS_CUH */
