/* nccl_bf16.cu — the two conversions of the bf16 NCCL all-reduce (comm_nccl.c): fp32 → bf16
 * into the communicator's scratch buffer before the reduction, bf16 → fp32 back into the
 * caller's buffer after it. Round to nearest even (__float2bfloat16), as the model's own bf16
 * copies are made. Grid-stride loops, so any n fits one launch. Compiled only with CUDA. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>

static unsigned grid_for(size_t n)
{
    size_t g = (n + 255) / 256;
    return g == 0 ? 1u : g > 65535 ? 65535u : (unsigned)g;
}

__global__ static void k_f32_to_bf16(__nv_bfloat16 *out, const float *in, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2bfloat16(in[i]);
}

__global__ static void k_bf16_to_f32(float *out, const __nv_bfloat16 *in, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = __bfloat162float(in[i]);
}

/* Both return the launch status (cudaSuccess or the error), never stop the process. */
extern "C" int gt_local_nccl_f32_to_bf16(void *out, const float *in, size_t n, cudaStream_t s)
{
    if (n == 0) return 0;
    k_f32_to_bf16<<<grid_for(n), 256, 0, s>>>((__nv_bfloat16 *)out, in, n);
    return (int)cudaGetLastError();
}

extern "C" int gt_local_nccl_bf16_to_f32(float *out, const void *in, size_t n, cudaStream_t s)
{
    if (n == 0) return 0;
    k_bf16_to_f32<<<grid_for(n), 256, 0, s>>>(out, (const __nv_bfloat16 *)in, n);
    return (int)cudaGetLastError();
}
