/* cuda_ops.cu — the CUDA layer kernels of the GPT (see cuda_ops.cuh for shapes and the
 * precision scheme). One warp per row for row operations (layernorm, softmax), one block per
 * row where rows are long (cross-entropy over the vocabulary), grid-stride loops elsewhere.
 * Reductions over rows (bias and LayerNorm gradients) run in two passes: GT_CU_ROW_CHUNKS
 * fixed row chunks write partial sums, then one thread per column adds them in chunk order.
 */
#include "cuda_ops.cuh"

#include <math.h>
#include <stdint.h>

#define WARP 32

static inline unsigned grid_for(size_t n, unsigned block)
{
    size_t g = (n + block - 1) / block;
    return (unsigned)(g > 65535 * 8 ? 65535 * 8 : g);
}

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = WARP / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v)
{
    for (int o = WARP / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* ---- vector access: 8 bf16 in 16 bytes, 4 in 8 ----------------------------------------- */

union gt_bf8 {
    uint4 u;
    __nv_bfloat162 h[4];
};

__device__ __forceinline__ void bf8_get(float *f, uint4 u)
{
    gt_bf8 v;
    v.u = u;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        float2 t = __bfloat1622float2(v.h[j]);
        f[2 * j] = t.x, f[2 * j + 1] = t.y;
    }
}

__device__ __forceinline__ uint4 bf8_put(const float *f)
{
    gt_bf8 v;
#pragma unroll
    for (int j = 0; j < 4; j++) v.h[j] = __floats2bfloat162_rn(f[2 * j], f[2 * j + 1]);
    return v.u;
}

/* 4 bf16 (8 bytes) <-> 4 floats */
union gt_bf4 {
    uint2 u;
    __nv_bfloat162 h[2];
};

__device__ __forceinline__ void bf4_get(float *f, uint2 u)
{
    gt_bf4 v;
    v.u = u;
    float2 a = __bfloat1622float2(v.h[0]), b = __bfloat1622float2(v.h[1]);
    f[0] = a.x, f[1] = a.y, f[2] = b.x, f[3] = b.y;
}

__device__ __forceinline__ uint2 bf4_put(const float *f)
{
    gt_bf4 v;
    v.h[0] = __floats2bfloat162_rn(f[0], f[1]);
    v.h[1] = __floats2bfloat162_rn(f[2], f[3]);
    return v.u;
}

/* 1 when n elements in rows of width w, at the given addresses, can go 8 at a time */
static inline int vec8(size_t n, size_t w, const void *a, const void *b, const void *c)
{
    uintptr_t any = (uintptr_t)a | (uintptr_t)b | (uintptr_t)c;
    return w % 8 == 0 && n % 8 == 0 && n / 8 < 0xffffffffu && any % 16 == 0;
}

/* ---- GEMM -------------------------------------------------------------------------------- */

cublasStatus_t gt_cu_gemm(cublasHandle_t h, int ta, int tb, int M, int N, int K, float alpha,
                          const bf16 *A, int lda, long long sa, const bf16 *B, int ldb,
                          long long sb, float beta, void *C, int c_fp32, int ldc, long long sc,
                          int batch)
{
    /* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands. */
    cublasOperation_t ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N, oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cudaDataType_t ct = c_fp32 ? CUDA_R_32F : CUDA_R_16BF;
    if (batch == 1)
        return cublasGemmEx(h, ob, oa, N, M, K, &alpha, B, CUDA_R_16BF, ldb, A, CUDA_R_16BF, lda,
                            &beta, C, ct, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return cublasGemmStridedBatchedEx(h, ob, oa, N, M, K, &alpha, B, CUDA_R_16BF, ldb, sb, A,
                                      CUDA_R_16BF, lda, sa, &beta, C, ct, ldc, sc, batch,
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

/* ---- elementwise ------------------------------------------------------------------------- */

__global__ void k_f32_to_bf16(bf16 *out, const float *in, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2bfloat16(in[i]);
}

void gt_cu_f32_to_bf16(bf16 *out, const float *in, size_t n, cudaStream_t s)
{
    k_f32_to_bf16<<<grid_for(n, 256), 256, 0, s>>>(out, in, n);
}

__global__ void k_scale(float *x, size_t n, float a)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] *= a;
}

void gt_cu_scale(float *x, size_t n, float a, cudaStream_t s)
{
    k_scale<<<grid_for(n, 256), 256, 0, s>>>(x, n, a);
}

__global__ void k_encoder_forward(float *out, const int32_t *tok, const bf16 *wte, const bf16 *wpe,
                                  int B, int T, int C)
{
    size_t total = (size_t)B * T * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t n = i / C, c = i % C, t = n % T;
        out[i] = __bfloat162float(wte[(size_t)tok[n] * C + c]) + __bfloat162float(wpe[t * C + c]);
    }
}

void gt_cu_encoder_forward(float *out, const int32_t *tok, const bf16 *wte, const bf16 *wpe, int B,
                           int T, int C, cudaStream_t s)
{
    k_encoder_forward<<<grid_for((size_t)B * T * C, 256), 256, 0, s>>>(out, tok, wte, wpe, B, T, C);
}

__global__ void k_encoder_backward_wpe(float *dwpe, const float *dout, int B, int T, int C)
{
    size_t total = (size_t)T * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        float acc = 0;
        for (int b = 0; b < B; b++) acc += dout[(size_t)b * T * C + i];
        dwpe[i] += acc;
    }
}

/* One block per unique token; threads over channels; positions in increasing order. */
__global__ void k_encoder_backward_wte(float *dwte, const float *dout, const int32_t *uniq,
                                       const int32_t *start, const int32_t *pos, int C)
{
    int u = blockIdx.x;
    int tok = uniq[u], p0 = start[u], p1 = start[u + 1];
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float acc = 0;
        for (int p = p0; p < p1; p++) acc += dout[(size_t)pos[p] * C + c];
        dwte[(size_t)tok * C + c] += acc;
    }
}

void gt_cu_encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *uniq,
                            const int32_t *start, const int32_t *pos, int nuniq, int B, int T,
                            int C, cudaStream_t s)
{
    k_encoder_backward_wpe<<<grid_for((size_t)T * C, 256), 256, 0, s>>>(dwpe, dout, B, T, C);
    if (nuniq > 0) k_encoder_backward_wte<<<nuniq, 256, 0, s>>>(dwte, dout, uniq, start, pos, C);
}

/* ---- layernorm --------------------------------------------------------------------------- */

__global__ void k_layernorm_forward(bf16 *out, float *mean, float *rstd, const float *inp,
                                    const bf16 *w, const bf16 *b, int N, int C)
{
    int row = blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP, lane = threadIdx.x % WARP;
    if (row >= N) return;
    const float *x = inp + (size_t)row * C;
    float s = 0;
    for (int c = lane; c < C; c += WARP) s += x[c];
    float m = warp_sum(s) / C;
    float v = 0;
    for (int c = lane; c < C; c += WARP) {
        float d = x[c] - m;
        v += d * d;
    }
    float rs = rsqrtf(warp_sum(v) / C + 1e-5f);
    bf16 *o = out + (size_t)row * C;
    for (int c = lane; c < C; c += WARP)
        o[c] = __float2bfloat16((x[c] - m) * rs * __bfloat162float(w[c]) + __bfloat162float(b[c]));
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = rs;
    }
}

void gt_cu_layernorm_forward(bf16 *out, float *mean, float *rstd, const float *inp, const bf16 *w,
                             const bf16 *b, int N, int C, cudaStream_t s)
{
    k_layernorm_forward<<<(N + 7) / 8, 256, 0, s>>>(out, mean, rstd, inp, w, b, N, C);
}

__global__ void k_layernorm_backward_dinp(float *dinp, bf16 *dinp_bf, const float *dout,
                                          const float *inp, const bf16 *w, const float *mean,
                                          const float *rstd, int N, int C)
{
    int row = blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP, lane = threadIdx.x % WARP;
    if (row >= N) return;
    const float *x = inp + (size_t)row * C, *d = dout + (size_t)row * C;
    float m = mean[row], rs = rstd[row], a = 0, bm = 0;
    for (int c = lane; c < C; c += WARP) {
        float dn = __bfloat162float(w[c]) * d[c];
        a += dn;
        bm += dn * (x[c] - m) * rs;
    }
    a = warp_sum(a) / C;
    bm = warp_sum(bm) / C;
    float *di = dinp + (size_t)row * C;
    bf16 *db = dinp_bf + (size_t)row * C;
    for (int c = lane; c < C; c += WARP) {
        float norm = (x[c] - m) * rs;
        float v = di[c] + (__bfloat162float(w[c]) * d[c] - a - norm * bm) * rs;
        di[c] = v;
        db[c] = __float2bfloat16(v);
    }
}

/* The same, 4 columns a lane (16-byte fp32 loads, 8-byte bf16 ones) when C % 4 == 0 and the
 * pointers allow: each row's two sums are added in another order than above (deterministic). */
__global__ void k_layernorm_backward_dinp_v4(float *dinp, bf16 *dinp_bf, const float *dout,
                                             const float *inp, const bf16 *w, const float *mean,
                                             const float *rstd, int N, int C)
{
    int row = blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP, lane = threadIdx.x % WARP;
    if (row >= N) return;
    int C4 = C / 4;
    const float4 *x = (const float4 *)(inp + (size_t)row * C);
    const float4 *d = (const float4 *)(dout + (size_t)row * C);
    const uint2 *w4 = (const uint2 *)w;
    float m = mean[row], rs = rstd[row], a = 0, bm = 0;
    for (int c = lane; c < C4; c += WARP) {
        float4 xv = x[c], dv = d[c];
        float wv[4], xs[4] = {xv.x, xv.y, xv.z, xv.w}, ds[4] = {dv.x, dv.y, dv.z, dv.w};
        bf4_get(wv, w4[c]);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            float dn = wv[k] * ds[k];
            a += dn;
            bm += dn * (xs[k] - m) * rs;
        }
    }
    a = warp_sum(a) / C;
    bm = warp_sum(bm) / C;
    float4 *di = (float4 *)(dinp + (size_t)row * C);
    uint2 *db = (uint2 *)(dinp_bf + (size_t)row * C);
    for (int c = lane; c < C4; c += WARP) {
        float4 xv = x[c], dv = d[c], iv = di[c];
        float wv[4], xs[4] = {xv.x, xv.y, xv.z, xv.w}, ds[4] = {dv.x, dv.y, dv.z, dv.w};
        float v[4] = {iv.x, iv.y, iv.z, iv.w};
        bf4_get(wv, w4[c]);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            float norm = (xs[k] - m) * rs;
            v[k] = v[k] + (wv[k] * ds[k] - a - norm * bm) * rs;
        }
        di[c] = make_float4(v[0], v[1], v[2], v[3]);
        db[c] = bf4_put(v);
    }
}

void gt_cu_layernorm_backward_dinp(float *dinp, bf16 *dinp_bf, const float *dout, const float *inp,
                                   const bf16 *w, const float *mean, const float *rstd, int N,
                                   int C, cudaStream_t s)
{
    uintptr_t any = (uintptr_t)dinp | (uintptr_t)dout | (uintptr_t)inp;
    if (C % 4 == 0 && any % 16 == 0 && ((uintptr_t)dinp_bf | (uintptr_t)w) % 8 == 0)
        k_layernorm_backward_dinp_v4<<<(N + 7) / 8, 256, 0, s>>>(dinp, dinp_bf, dout, inp, w, mean,
                                                                 rstd, N, C);
    else
        k_layernorm_backward_dinp<<<(N + 7) / 8, 256, 0, s>>>(dinp, dinp_bf, dout, inp, w, mean,
                                                              rstd, N, C);
}

/* Pass 1: block (column tile, chunk) sums its rows; pass 2: columns add chunks in order. */
__global__ void k_ln_params_partial(float *partial, const float *dout, const float *inp,
                                    const float *mean, const float *rstd, int N, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x, chunk = blockIdx.y;
    if (c >= C) return;
    int r0 = (int)((long long)N * chunk / GT_CU_ROW_CHUNKS);
    int r1 = (int)((long long)N * (chunk + 1) / GT_CU_ROW_CHUNKS);
    float sw = 0, sb = 0;
    for (int r = r0; r < r1; r++) {
        float d = dout[(size_t)r * C + c];
        sw += d * (inp[(size_t)r * C + c] - mean[r]) * rstd[r];
        sb += d;
    }
    partial[(size_t)chunk * C + c] = sw;
    partial[(size_t)(GT_CU_ROW_CHUNKS + chunk) * C + c] = sb;
}

__global__ void k_sum_partials(float *dst, const float *partial, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float s = 0;
    for (int k = 0; k < GT_CU_ROW_CHUNKS; k++) s += partial[(size_t)k * C + c];
    dst[c] += s;
}

void gt_cu_layernorm_backward_params(float *dw, float *db, float *partial, const float *dout,
                                     const float *inp, const float *mean, const float *rstd, int N,
                                     int C, cudaStream_t s)
{
    dim3 grid((C + 127) / 128, GT_CU_ROW_CHUNKS);
    k_ln_params_partial<<<grid, 128, 0, s>>>(partial, dout, inp, mean, rstd, N, C);
    k_sum_partials<<<(C + 127) / 128, 128, 0, s>>>(dw, partial, C);
    k_sum_partials<<<(C + 127) / 128, 128, 0, s>>>(db, partial + (size_t)GT_CU_ROW_CHUNKS * C, C);
}

template <typename T> __device__ __forceinline__ float to_f(T x);
template <> __device__ __forceinline__ float to_f<float>(float x)
{
    return x;
}
template <> __device__ __forceinline__ float to_f<bf16>(bf16 x)
{
    return __bfloat162float(x);
}

template <typename T> __global__ void k_colsum_partial(float *partial, const T *dout, int N, int OC)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x, chunk = blockIdx.y;
    if (c >= OC) return;
    int r0 = (int)((long long)N * chunk / GT_CU_ROW_CHUNKS);
    int r1 = (int)((long long)N * (chunk + 1) / GT_CU_ROW_CHUNKS);
    float s = 0;
    for (int r = r0; r < r1; r++) s += to_f(dout[(size_t)r * OC + c]);
    partial[(size_t)chunk * OC + c] = s;
}

void gt_cu_bias_backward_f32(float *db, float *partial, const float *dout, int N, int OC,
                             cudaStream_t s)
{
    dim3 grid((OC + 127) / 128, GT_CU_ROW_CHUNKS);
    k_colsum_partial<float><<<grid, 128, 0, s>>>(partial, dout, N, OC);
    k_sum_partials<<<(OC + 127) / 128, 128, 0, s>>>(db, partial, OC);
}

void gt_cu_bias_backward_bf16(float *db, float *partial, const bf16 *dout, int N, int OC,
                              cudaStream_t s)
{
    dim3 grid((OC + 127) / 128, GT_CU_ROW_CHUNKS);
    k_colsum_partial<bf16><<<grid, 128, 0, s>>>(partial, dout, N, OC);
    k_sum_partials<<<(OC + 127) / 128, 128, 0, s>>>(db, partial, OC);
}

/* ---- bias, residual, GELU ---------------------------------------------------------------- */

/* The four kernels below run 8 elements a thread (16-byte loads and stores of bf16, two of
 * fp32) when the row width is a multiple of 8 and the element count fits 32-bit chunk indices;
 * each element gets the scalar version's arithmetic (the same operations in the same order).
 * The scalar loops remain for other shapes and unaligned pointers. (Measured on an H100, GPT-2
 * 124M: the scalar loops with their 64-bit `i % OC` ran at about 40% of the memory bandwidth.) */
__global__ void k_add_bias_bf16(bf16 *x, const bf16 *b, int N, int OC)
{
    size_t total = (size_t)N * OC;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] = __float2bfloat16(__bfloat162float(x[i]) + __bfloat162float(b[i % OC]));
}

__global__ void k_add_bias_bf16_v8(uint4 *x, const uint4 *b, unsigned chunks, unsigned oc8)
{
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < chunks;
         i += gridDim.x * blockDim.x) {
        float v[8], c[8];
        bf8_get(v, x[i]);
        bf8_get(c, b[i % oc8]);
#pragma unroll
        for (int j = 0; j < 8; j++) v[j] += c[j];
        x[i] = bf8_put(v);
    }
}

void gt_cu_add_bias_bf16(bf16 *x, const bf16 *b, int N, int OC, cudaStream_t s)
{
    size_t n = (size_t)N * OC;
    if (vec8(n, OC, x, b, NULL))
        k_add_bias_bf16_v8<<<grid_for(n / 8, 256), 256, 0, s>>>((uint4 *)x, (const uint4 *)b,
                                                                (unsigned)(n / 8), OC / 8);
    else
        k_add_bias_bf16<<<grid_for(n, 256), 256, 0, s>>>(x, b, N, OC);
}

__global__ void k_residual_bias(float *x, const bf16 *b, const float *res, int N, int C)
{
    size_t total = (size_t)N * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] = res[i] + (x[i] + __bfloat162float(b[i % C]));
}

__global__ void k_residual_bias_v8(float4 *x, const uint4 *b, const float4 *res, unsigned chunks,
                                   unsigned c8)
{
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < chunks;
         i += gridDim.x * blockDim.x) {
        float c[8];
        bf8_get(c, b[i % c8]);
        float4 x0 = x[2 * i], x1 = x[2 * i + 1], r0 = res[2 * i], r1 = res[2 * i + 1];
        x0.x = r0.x + (x0.x + c[0]), x0.y = r0.y + (x0.y + c[1]);
        x0.z = r0.z + (x0.z + c[2]), x0.w = r0.w + (x0.w + c[3]);
        x1.x = r1.x + (x1.x + c[4]), x1.y = r1.y + (x1.y + c[5]);
        x1.z = r1.z + (x1.z + c[6]), x1.w = r1.w + (x1.w + c[7]);
        x[2 * i] = x0, x[2 * i + 1] = x1;
    }
}

void gt_cu_residual_bias(float *x, const bf16 *b, const float *res, int N, int C, cudaStream_t s)
{
    size_t n = (size_t)N * C;
    if (vec8(n, C, x, b, res))
        k_residual_bias_v8<<<grid_for(n / 8, 256), 256, 0, s>>>(
            (float4 *)x, (const uint4 *)b, (const float4 *)res, (unsigned)(n / 8), C / 8);
    else
        k_residual_bias<<<grid_for(n, 256), 256, 0, s>>>(x, b, res, N, C);
}

#define GELU_K 0.7978845608028654f

__device__ __forceinline__ float gelu_of(float x)
{
    return 0.5f * x * (1.0f + tanhf(GELU_K * (x + 0.044715f * x * x * x)));
}

/* d GELU(x) / dx */
__device__ __forceinline__ float gelu_grad(float x)
{
    float th = tanhf(GELU_K * (x + 0.044715f * x * x * x));
    return 0.5f * (1.0f + th) +
           0.5f * x * (1.0f - th * th) * GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
}

__global__ void k_bias_gelu_forward(bf16 *out, bf16 *pre, const bf16 *b, int N, int OC)
{
    size_t total = (size_t)N * OC;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        bf16 pb = __float2bfloat16(__bfloat162float(pre[i]) + __bfloat162float(b[i % OC]));
        float x = __bfloat162float(pb);
        pre[i] = pb;
        out[i] = __float2bfloat16(gelu_of(x));
    }
}

__global__ void k_bias_gelu_forward_v8(uint4 *out, uint4 *pre, const uint4 *b, unsigned chunks,
                                       unsigned oc8)
{
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < chunks;
         i += gridDim.x * blockDim.x) {
        float v[8], c[8], y[8];
        bf8_get(v, pre[i]);
        bf8_get(c, b[i % oc8]);
#pragma unroll
        for (int j = 0; j < 8; j++) v[j] += c[j];
        uint4 pb = bf8_put(v); /* the biased pre-activation, rounded to bf16 as kept */
        bf8_get(v, pb);
#pragma unroll
        for (int j = 0; j < 8; j++) y[j] = gelu_of(v[j]);
        pre[i] = pb;
        out[i] = bf8_put(y);
    }
}

void gt_cu_bias_gelu_forward(bf16 *out, bf16 *pre, const bf16 *b, int N, int OC, cudaStream_t s)
{
    size_t n = (size_t)N * OC;
    if (vec8(n, OC, out, pre, b))
        k_bias_gelu_forward_v8<<<grid_for(n / 8, 256), 256, 0, s>>>(
            (uint4 *)out, (uint4 *)pre, (const uint4 *)b, (unsigned)(n / 8), OC / 8);
    else
        k_bias_gelu_forward<<<grid_for(n, 256), 256, 0, s>>>(out, pre, b, N, OC);
}

__global__ void k_gelu_backward(bf16 *d, const bf16 *pre, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        d[i] = __float2bfloat16(gelu_grad(__bfloat162float(pre[i])) * __bfloat162float(d[i]));
}

__global__ void k_gelu_backward_v8(uint4 *d, const uint4 *pre, unsigned chunks)
{
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < chunks;
         i += gridDim.x * blockDim.x) {
        float x[8], g[8];
        bf8_get(x, pre[i]);
        bf8_get(g, d[i]);
#pragma unroll
        for (int j = 0; j < 8; j++) g[j] = gelu_grad(x[j]) * g[j];
        d[i] = bf8_put(g);
    }
}

void gt_cu_gelu_backward(bf16 *d, const bf16 *pre, size_t n, cudaStream_t s)
{
    if (vec8(n, 8, d, pre, NULL))
        k_gelu_backward_v8<<<grid_for(n / 8, 256), 256, 0, s>>>((uint4 *)d, (const uint4 *)pre,
                                                                (unsigned)(n / 8));
    else
        k_gelu_backward<<<grid_for(n, 256), 256, 0, s>>>(d, pre, n);
}

/* ---- attention layout -------------------------------------------------------------------- */

/* Element i of (B, NH, T, hs) <-> (b, t, h, d). */
__global__ void k_split_heads(bf16 *q, bf16 *k, bf16 *v, const bf16 *qkv, int B, int T, int NH,
                              int hs)
{
    size_t total = (size_t)B * NH * T * hs;
    int C = NH * hs;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        int d = (int)(i % hs);
        size_t r = i / hs;
        int t = (int)(r % T);
        r /= T;
        int h = (int)(r % NH), b = (int)(r / NH);
        size_t src = ((size_t)b * T + t) * 3 * C + (size_t)h * hs + d;
        q[i] = qkv[src];
        k[i] = qkv[src + C];
        v[i] = qkv[src + 2 * C];
    }
}

void gt_cu_split_heads(bf16 *q, bf16 *k, bf16 *v, const bf16 *qkv, int B, int T, int NH, int hs,
                       cudaStream_t s)
{
    k_split_heads<<<grid_for((size_t)B * NH * T * hs, 256), 256, 0, s>>>(q, k, v, qkv, B, T, NH,
                                                                         hs);
}

__global__ void k_merge_qkv_grads(bf16 *dqkv, const bf16 *dq, const bf16 *dk, const bf16 *dv, int B,
                                  int T, int NH, int hs)
{
    size_t total = (size_t)B * NH * T * hs;
    int C = NH * hs;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        int d = (int)(i % hs);
        size_t r = i / hs;
        int t = (int)(r % T);
        r /= T;
        int h = (int)(r % NH), b = (int)(r / NH);
        size_t dst = ((size_t)b * T + t) * 3 * C + (size_t)h * hs + d;
        dqkv[dst] = dq[i];
        dqkv[dst + C] = dk[i];
        dqkv[dst + 2 * C] = dv[i];
    }
}

void gt_cu_merge_qkv_grads(bf16 *dqkv, const bf16 *dq, const bf16 *dk, const bf16 *dv, int B, int T,
                           int NH, int hs, cudaStream_t s)
{
    k_merge_qkv_grads<<<grid_for((size_t)B * NH * T * hs, 256), 256, 0, s>>>(dqkv, dq, dk, dv, B, T,
                                                                             NH, hs);
}

__global__ void k_heads(bf16 *dst, const bf16 *src, int B, int T, int NH, int hs, int to_btc)
{
    size_t total = (size_t)B * NH * T * hs;
    int C = NH * hs;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        int d = (int)(i % hs);
        size_t r = i / hs;
        int t = (int)(r % T);
        r /= T;
        int h = (int)(r % NH), b = (int)(r / NH);
        size_t btc = ((size_t)b * T + t) * C + (size_t)h * hs + d;
        if (to_btc)
            dst[btc] = src[i];
        else
            dst[i] = src[btc];
    }
}

void gt_cu_merge_heads(bf16 *out, const bf16 *y, int B, int T, int NH, int hs, cudaStream_t s)
{
    k_heads<<<grid_for((size_t)B * NH * T * hs, 256), 256, 0, s>>>(out, y, B, T, NH, hs, 1);
}

void gt_cu_split_heads_one(bf16 *y, const bf16 *in, int B, int T, int NH, int hs, cudaStream_t s)
{
    k_heads<<<grid_for((size_t)B * NH * T * hs, 256), 256, 0, s>>>(y, in, B, T, NH, hs, 0);
}

/* ---- softmax (attention) ----------------------------------------------------------------- */

/* One warp per row; row r is query t = r % T of its (b, h). */
__global__ void k_softmax_causal(bf16 *att, const float *pre, int rows, int T)
{
    int row = blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP, lane = threadIdx.x % WARP;
    if (row >= rows) return;
    int t = row % T;
    const float *x = pre + (size_t)row * T;
    bf16 *o = att + (size_t)row * T;
    float mx = -INFINITY;
    for (int j = lane; j <= t; j += WARP) mx = fmaxf(mx, x[j]);
    mx = warp_max(mx);
    float s = 0;
    for (int j = lane; j <= t; j += WARP) s += expf(x[j] - mx);
    float inv = 1.0f / warp_sum(s);
    for (int j = lane; j < T; j += WARP)
        o[j] = __float2bfloat16(j <= t ? expf(x[j] - mx) * inv : 0.0f);
}

void gt_cu_softmax_causal(bf16 *att, const float *pre, int rows, int T, cudaStream_t s)
{
    k_softmax_causal<<<(rows + 7) / 8, 256, 0, s>>>(att, pre, rows, T);
}

__global__ void k_softmax_causal_backward(bf16 *dpre, const float *datt, const bf16 *att, int rows,
                                          int T)
{
    int row = blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP, lane = threadIdx.x % WARP;
    if (row >= rows) return;
    int t = row % T;
    const float *d = datt + (size_t)row * T;
    const bf16 *p = att + (size_t)row * T;
    float dot = 0;
    for (int j = lane; j <= t; j += WARP) dot += __bfloat162float(p[j]) * d[j];
    dot = warp_sum(dot);
    bf16 *o = dpre + (size_t)row * T;
    for (int j = lane; j < T; j += WARP)
        o[j] = __float2bfloat16(j <= t ? __bfloat162float(p[j]) * (d[j] - dot) : 0.0f);
}

void gt_cu_softmax_causal_backward(bf16 *dpre, const float *datt, const bf16 *att, int rows, int T,
                                   cudaStream_t s)
{
    k_softmax_causal_backward<<<(rows + 7) / 8, 256, 0, s>>>(dpre, datt, att, rows, T);
}

/* ---- cross-entropy ----------------------------------------------------------------------- */

#define CE_BLOCK 256

/* Block-wide reduction in a fixed tree (deterministic). */
__device__ float block_reduce(float v, float *sh, int is_max)
{
    int lane = threadIdx.x % WARP, wid = threadIdx.x / WARP;
    v = is_max ? warp_max(v) : warp_sum(v);
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    float r = lane < CE_BLOCK / WARP ? sh[lane] : (is_max ? -INFINITY : 0.0f);
    r = is_max ? warp_max(r) : warp_sum(r);
    __syncthreads();
    return r;
}

__global__ void k_crossentropy_forward(float *loss, float *rowmax, float *rowsum,
                                       const bf16 *logits, const int32_t *targets, int V, int Vp)
{
    __shared__ float sh[CE_BLOCK / WARP];
    int n = blockIdx.x;
    const bf16 *x = logits + (size_t)n * Vp;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < V; j += CE_BLOCK) mx = fmaxf(mx, __bfloat162float(x[j]));
    mx = block_reduce(mx, sh, 1);
    float s = 0;
    for (int j = threadIdx.x; j < V; j += CE_BLOCK) s += expf(__bfloat162float(x[j]) - mx);
    s = block_reduce(s, sh, 0);
    if (threadIdx.x == 0) {
        rowmax[n] = mx;
        rowsum[n] = s;
        loss[n] = logf(s) + mx - __bfloat162float(x[targets[n]]);
    }
}

/* The same, 8 logits a thread (16-byte loads) when Vp % 8 == 0 and logits are aligned; each
 * thread's partial max and sum run over other columns than above (deterministic). */
__global__ void k_crossentropy_forward_v8(float *loss, float *rowmax, float *rowsum,
                                          const bf16 *logits, const int32_t *targets, int V, int Vp)
{
    __shared__ float sh[CE_BLOCK / WARP];
    int n = blockIdx.x, n8 = (V + 7) / 8;
    const bf16 *x = logits + (size_t)n * Vp;
    const uint4 *x8 = (const uint4 *)x;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < n8; j += CE_BLOCK) {
        float v[8];
        bf8_get(v, x8[j]);
#pragma unroll
        for (int k = 0; k < 8; k++)
            if (8 * j + k < V) mx = fmaxf(mx, v[k]);
    }
    mx = block_reduce(mx, sh, 1);
    float s = 0;
    for (int j = threadIdx.x; j < n8; j += CE_BLOCK) {
        float v[8];
        bf8_get(v, x8[j]);
#pragma unroll
        for (int k = 0; k < 8; k++)
            if (8 * j + k < V) s += expf(v[k] - mx);
    }
    s = block_reduce(s, sh, 0);
    if (threadIdx.x == 0) {
        rowmax[n] = mx;
        rowsum[n] = s;
        loss[n] = logf(s) + mx - __bfloat162float(x[targets[n]]);
    }
}

static int ce_vec8(const bf16 *logits, int Vp)
{
    return Vp % 8 == 0 && (uintptr_t)logits % 16 == 0;
}

void gt_cu_crossentropy_forward(float *loss, float *rowmax, float *rowsum, const bf16 *logits,
                                const int32_t *targets, int N, int V, int Vp, cudaStream_t s)
{
    if (ce_vec8(logits, Vp))
        k_crossentropy_forward_v8<<<N, CE_BLOCK, 0, s>>>(loss, rowmax, rowsum, logits, targets, V,
                                                         Vp);
    else
        k_crossentropy_forward<<<N, CE_BLOCK, 0, s>>>(loss, rowmax, rowsum, logits, targets, V, Vp);
}

__global__ void k_crossentropy_backward(bf16 *logits, const float *rowmax, const float *rowsum,
                                        const int32_t *targets, int N, int V, int Vp, float scale)
{
    int n = blockIdx.x;
    bf16 *x = logits + (size_t)n * Vp;
    float mx = rowmax[n], inv = 1.0f / rowsum[n], f = scale / (float)N;
    int tg = targets[n];
    for (int j = threadIdx.x; j < Vp; j += CE_BLOCK) {
        float g = 0.0f;
        if (j < V) g = f * (expf(__bfloat162float(x[j]) - mx) * inv - (j == tg ? 1.0f : 0.0f));
        x[j] = __float2bfloat16(g);
    }
}

/* The same, 8 logits a thread: each element's arithmetic as above. */
__global__ void k_crossentropy_backward_v8(bf16 *logits, const float *rowmax, const float *rowsum,
                                           const int32_t *targets, int N, int V, int Vp,
                                           float scale)
{
    int n = blockIdx.x;
    uint4 *x8 = (uint4 *)(logits + (size_t)n * Vp);
    float mx = rowmax[n], inv = 1.0f / rowsum[n], f = scale / (float)N;
    int tg = targets[n];
    for (int j = threadIdx.x; j < Vp / 8; j += CE_BLOCK) {
        float v[8];
        bf8_get(v, x8[j]);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            int c = 8 * j + k;
            float g = 0.0f;
            if (c < V) g = f * (expf(v[k] - mx) * inv - (c == tg ? 1.0f : 0.0f));
            v[k] = g;
        }
        x8[j] = bf8_put(v);
    }
}

void gt_cu_crossentropy_backward(bf16 *logits, const float *rowmax, const float *rowsum,
                                 const int32_t *targets, int N, int V, int Vp, float scale,
                                 cudaStream_t s)
{
    if (ce_vec8(logits, Vp))
        k_crossentropy_backward_v8<<<N, CE_BLOCK, 0, s>>>(logits, rowmax, rowsum, targets, N, V, Vp,
                                                          scale);
    else
        k_crossentropy_backward<<<N, CE_BLOCK, 0, s>>>(logits, rowmax, rowsum, targets, N, V, Vp,
                                                       scale);
}

/* ---- reductions and the optimizer -------------------------------------------------------- */

/* One block of 256 threads per chunk; fixed strided order, fixed shared-memory tree. */
__global__ void k_sumsq_partials(double *partial, const float *x, size_t n)
{
    __shared__ double sh[256];
    size_t lo = (size_t)blockIdx.x * GT_CU_SUMSQ_CHUNK;
    size_t hi = lo + GT_CU_SUMSQ_CHUNK < n ? lo + GT_CU_SUMSQ_CHUNK : n;
    double s = 0;
    for (size_t i = lo + threadIdx.x; i < hi; i += 256) s += (double)x[i] * (double)x[i];
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int o = 128; o > 0; o /= 2) {
        if ((int)threadIdx.x < o) sh[threadIdx.x] += sh[threadIdx.x + o];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = sh[0];
}

void gt_cu_sumsq_partials(double *partial, const float *x, size_t n, cudaStream_t s)
{
    size_t chunks = (n + GT_CU_SUMSQ_CHUNK - 1) / GT_CU_SUMSQ_CHUNK;
    if (chunks) k_sumsq_partials<<<(unsigned)chunks, 256, 0, s>>>(partial, x, n);
}

__global__ void k_adamw(float *theta, bf16 *theta_bf, const float *g, float *m, float *v, size_t n,
                        float lr, float b1, float b2, float eps, float wd, float bc1, float bc2)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float gi = g[i];
        float mi = __fadd_rn(__fmul_rn(b1, m[i]), __fmul_rn(1.0f - b1, gi));
        float vi = __fadd_rn(__fmul_rn(b2, v[i]), __fmul_rn(__fmul_rn(1.0f - b2, gi), gi));
        m[i] = mi;
        v[i] = vi;
        float mh = __fdiv_rn(mi, bc1), vh = __fdiv_rn(vi, bc2);
        float upd =
            __fadd_rn(__fdiv_rn(mh, __fadd_rn(__fsqrt_rn(vh), eps)), __fmul_rn(wd, theta[i]));
        float t = __fsub_rn(theta[i], __fmul_rn(lr, upd));
        theta[i] = t;
        theta_bf[i] = __float2bfloat16(t);
    }
}

void gt_cu_adamw(float *theta, bf16 *theta_bf, const float *g, float *m, float *v, size_t n,
                 float lr, float b1, float b2, float eps, float wd, float bc1, float bc2,
                 cudaStream_t s)
{
    if (n)
        k_adamw<<<grid_for(n, 256), 256, 0, s>>>(theta, theta_bf, g, m, v, n, lr, b1, b2, eps, wd,
                                                 bc1, bc2);
}
