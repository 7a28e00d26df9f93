/* quant_cuda.cu — the dense payloads (fp32, bf16, int8, int4, fp4) built and read on the GPU,
 * byte-identical to quant.c, which is the specification.
 *
 * Identity comes from doing the same IEEE operations, each explicitly rounded to nearest:
 * v = e + x (__fadd_rn), inv = 1/s (__frcp_rn, correctly rounded like the CPU's 1.0f / s),
 * t = v * inv (__fmul_rn), q = round-half-even (__float2int_rn), e = v - q * s (__fmul_rn,
 * __fsub_rn), never a fused multiply-add (also built with --fmad=false). Absmax is an
 * integer max over float bits, so the order of the reduction does not matter. The group
 * exponent and block codes are defined by exact predicates (smallest code whose scale covers
 * the absmax), so any correct search finds the same code.
 *
 * Kernels: (1) one CUDA block per scale block: e += x, absmax; (2) one thread per group of
 * 32 blocks: exponent and block codes; (3) one thread per code byte: quantize, residual.
 * The payload is assembled in device memory in its frame layout and copied to the host in
 * one transfer; the host adds the header, zstd and the checksum (codec.c).
 */
#include "compress_internal.h"

#include <cuda_runtime.h>

#define CUDA_TRY(call, st, label)                                               \
    do {                                                                        \
        cudaError_t err_ = (call);                                              \
        if (err_ != cudaSuccess) {                                              \
            GT_ERROR("compress: CUDA %s: %s", #call, cudaGetErrorString(err_)); \
            (st) = GT_ERR_INTERNAL;                                             \
            goto label;                                                         \
        }                                                                       \
    } while (0)

__constant__ float d_fp4_values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                       -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

__device__ static inline float d_scale(unsigned g, unsigned c)
{
    return __uint_as_float(((uint32_t)((c >> 4) + g - 16u) << 23) | ((uint32_t)(c & 15u) << 19));
}

__device__ static int d_group_exponent(float a, int qmax)
{
    const float top = __fmul_rn(1.9375f, (float)qmax);
    int E = ilogbf(a) - ilogbf(top);
    if (E < -110) E = -110;
    while (ldexpf(top, E) < a) E++;
    while (E > -110 && ldexpf(top, E - 1) >= a) E--;
    return E;
}

__device__ static unsigned d_block_code(unsigned g, float a, int qmax)
{
    uint32_t b = (__float_as_uint(__fdiv_rn(a, (float)qmax)) + 0x7ffffu) & ~0x7ffffu;
    int ex = (int)(b >> 23) - (int)(g - 16u);
    int c = ex < 0 ? 0 : ex > 15 ? 255 : (ex << 4) | (int)((b >> 19) & 15u);
    while (c < 255 && __fmul_rn(d_scale(g, (unsigned)c), (float)qmax) < a) c++;
    while (c > 0 && __fmul_rn(d_scale(g, (unsigned)c - 1), (float)qmax) >= a) c--;
    return (unsigned)c;
}

/* (1) one CUDA block per scale block. */
__global__ static void k_absmax(const float *x, float *e, size_t n, uint32_t block, uint32_t *amax)
{
    __shared__ uint32_t m;
    size_t j = blockIdx.x, off = j * block, len = n - off < block ? n - off : block;
    if (threadIdx.x == 0) m = 0;
    __syncthreads();
    uint32_t local = 0;
    for (size_t i = threadIdx.x; i < len; i += blockDim.x) {
        float v = x[off + i];
        if (e) {
            v = __fadd_rn(e[off + i], v);
            e[off + i] = v;
        }
        uint32_t k = __float_as_uint(v) & 0x7fffffffu;
        local = k > local ? k : local;
    }
    atomicMax(&m, local);
    __syncthreads();
    if (threadIdx.x == 0) amax[j] = m;
}

/* (2) one thread per group: exponent code, block codes; *bad = 1 on NaN/Inf/out of range. */
__global__ static void k_scales(const uint32_t *amax, size_t nb, size_t ng, int qmax, uint8_t *gexp,
                                uint8_t *bcode, int *bad)
{
    size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= ng) return;
    size_t j0 = g * GT_CMP_GROUP_BLOCKS,
           j1 = j0 + GT_CMP_GROUP_BLOCKS < nb ? j0 + GT_CMP_GROUP_BLOCKS : nb;
    uint32_t gmax = 0;
    for (size_t j = j0; j < j1; j++) gmax = amax[j] > gmax ? amax[j] : gmax;
    if (gmax >= GT_CMP_ABS_LIMIT) {
        atomicExch(bad, 1);
        return;
    }
    if (gmax == 0) {
        gexp[g] = 0;
        for (size_t j = j0; j < j1; j++) bcode[j] = 0;
        return;
    }
    unsigned gc = (unsigned)(d_group_exponent(__uint_as_float(gmax), qmax) + 128);
    gexp[g] = (uint8_t)gc;
    for (size_t j = j0; j < j1; j++)
        bcode[j] = (uint8_t)d_block_code(gc, __uint_as_float(amax[j]), qmax);
}

/* One element: its code and, with error feedback, its residual. */
__device__ static inline int d_quant_one(gt_cmp_codec_t codec, int qmax, float *vp, float s,
                                         float inv, int ef)
{
    float v = *vp, y;
    int code;
    if (codec == GT_CMP_FP4) {
        float t = __fmul_rn(fabsf(v), inv);
        int m = (t > 0.25f) + (t >= 0.75f) + (t > 1.25f) + (t >= 1.75f) + (t > 2.5f) + (t >= 3.5f) +
                (t > 5.0f);
        code = m | ((v < 0.0f && m) ? 8 : 0);
        y = __fmul_rn(d_fp4_values[code], s);
    } else {
        int q = __float2int_rn(__fmul_rn(v, inv));
        q = q > qmax ? qmax : q < -qmax ? -qmax : q;
        y = __fmul_rn((float)q, s);
        code = q;
    }
    if (ef) *vp = __fsub_rn(v, y);
    return code;
}

/* (3) one thread per code byte (int8: one element; int4/fp4: two). v = e when ef, else x. */
__global__ static void k_quant(gt_cmp_codec_t codec, const float *x, float *e, size_t n,
                               uint32_t block, const uint8_t *gexp, const uint8_t *bcode,
                               uint8_t *codes, size_t nbytes)
{
    const int qmax = codec == GT_CMP_INT8 ? 127 : codec == GT_CMP_INT4 ? 7 : 6;
    const int per = codec == GT_CMP_INT8 ? 1 : 2;
    for (size_t b = (size_t)blockIdx.x * blockDim.x + threadIdx.x; b < nbytes;
         b += (size_t)gridDim.x * blockDim.x) {
        size_t i0 = b * per, j = i0 / block;
        unsigned g = gexp[j / GT_CMP_GROUP_BLOCKS];
        if (g == 0) { /* a zero group: codes 0, residual already v */
            codes[b] = 0;
            continue;
        }
        float s = d_scale(g, bcode[j]), inv = __frcp_rn(s);
        unsigned byte = 0;
        for (int k = 0; k < per && i0 + k < n; k++) {
            float v = e ? e[i0 + k] : x[i0 + k];
            int code = d_quant_one(codec, qmax, e ? &e[i0 + k] : &v, s, inv, e != NULL);
            byte |= (unsigned)(code & (per == 1 ? 255 : 15)) << (4 * k);
        }
        codes[b] = (uint8_t)byte;
    }
}

/* fp32 and bf16: v = x (+ e), payload, residual. */
__global__ static void k_plain(gt_cmp_codec_t codec, const float *x, float *e, size_t n,
                               uint8_t *payload, int *bad)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = e ? __fadd_rn(e[i], x[i]) : x[i];
        uint32_t b = __float_as_uint(v);
        if ((b & 0x7fffffffu) >= GT_CMP_ABS_INF) atomicExch(bad, 1);
        if (codec == GT_CMP_FP32) {
            ((float *)payload)[i] = v;
            if (e) e[i] = 0.0f;
        } else {
            uint32_t r = (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
            r -= (r & 0x7fffu) == 0x7f80u;
            payload[2 * i] = (uint8_t)r;
            payload[2 * i + 1] = (uint8_t)(r >> 8);
            if (e) e[i] = __fsub_rn(v, __uint_as_float(r << 16));
        }
    }
}

__global__ static void k_dequant(gt_cmp_codec_t codec, const uint8_t *payload, size_t n,
                                 uint32_t block, size_t ng, size_t nb, float *out)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        if (codec == GT_CMP_BF16) {
            out[i] = __uint_as_float((uint32_t)(payload[2 * i] | (payload[2 * i + 1] << 8)) << 16);
            continue;
        }
        const uint8_t *gexp = payload, *bcode = payload + ng, *codes = payload + ng + nb;
        size_t j = i / block;
        unsigned g = gexp[j / GT_CMP_GROUP_BLOCKS];
        if (g == 0) {
            out[i] = 0.0f;
            continue;
        }
        float s = d_scale(g, bcode[j]), y;
        if (codec == GT_CMP_INT8) {
            y = (float)(int8_t)codes[i];
        } else {
            unsigned nib = (i % 2 == 0) ? (codes[i / 2] & 15u) : (codes[i / 2] >> 4);
            y = codec == GT_CMP_FP4 ? d_fp4_values[nib] : (float)((int)nib - ((nib & 8u) ? 16 : 0));
        }
        out[i] = __fmul_rn(y, s);
    }
}

static unsigned grid_for(size_t work)
{
    size_t g = (work + 255) / 256;
    return g == 0 ? 1 : g > 65535 ? 65535 : (unsigned)g;
}

extern "C" int gt_cmp_cuda_available(void)
{
    static int cached = -1;
    if (cached < 0) {
        int count = 0;
        cached = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
    }
    return cached;
}

extern "C" gt_status_t gt_cmp_cuda_encode_payload(gt_cmp_codec_t codec, uint32_t block,
                                                  const float *x, float *e, size_t n,
                                                  uint8_t *payload)
{
    gt_status_t st = GT_OK;
    size_t size = gt_cmp_dense_size(codec, block, n);
    uint8_t *dp = NULL;
    uint32_t *amax = NULL;
    int *dbad = NULL, bad = 0;
    if (n == 0) return GT_OK;
    CUDA_TRY(cudaMalloc((void **)&dp, size), st, out);
    CUDA_TRY(cudaMalloc((void **)&dbad, sizeof(int)), st, out);
    CUDA_TRY(cudaMemset(dbad, 0, sizeof(int)), st, out);
    if (!gt_cmp_is_block(codec)) {
        k_plain<<<grid_for(n), 256>>>(codec, x, e, n, dp, dbad);
    } else {
        size_t nb = (n + block - 1) / block,
               ng = (nb + GT_CMP_GROUP_BLOCKS - 1) / GT_CMP_GROUP_BLOCKS;
        size_t nbytes = codec == GT_CMP_INT8 ? n : (n + 1) / 2;
        if (nb > 0x7fffffffu) {
            st = GT_ERR_OVERFLOW;
            goto out;
        }
        CUDA_TRY(cudaMalloc((void **)&amax, nb * sizeof(uint32_t)), st, out);
        k_absmax<<<(unsigned)nb, 256>>>(x, e, n, block, amax);
        k_scales<<<(unsigned)((ng + 127) / 128), 128>>>(amax, nb, ng, gt_cmp_qmax(codec), dp,
                                                        dp + ng, dbad);
        CUDA_TRY(cudaGetLastError(), st, out);
        CUDA_TRY(cudaMemcpy(&bad, dbad, sizeof(int), cudaMemcpyDeviceToHost), st, out);
        if (bad) goto bad_input; /* the residual holds x + e: unspecified, as on the CPU */
        k_quant<<<grid_for(nbytes), 256>>>(codec, x, e, n, block, dp, dp + ng, dp + ng + nb,
                                           nbytes);
    }
    CUDA_TRY(cudaGetLastError(), st, out);
    CUDA_TRY(cudaMemcpy(&bad, dbad, sizeof(int), cudaMemcpyDeviceToHost), st, out);
    if (bad) goto bad_input;
    CUDA_TRY(cudaMemcpy(payload, dp, size, cudaMemcpyDeviceToHost), st, out);
    goto out;
bad_input:
    GT_ERROR("compress: %s input (GPU) has a NaN/Inf%s value", gt_cmp_codec_name(codec),
             gt_cmp_is_block(codec) ? " or >= 2^100" : "");
    st = GT_ERR_INVALID;
out:
    cudaFree(dp);
    cudaFree(amax);
    cudaFree(dbad);
    return st;
}

extern "C" gt_status_t gt_cmp_cuda_decode_payload(gt_cmp_codec_t codec, uint32_t block,
                                                  const uint8_t *payload, size_t n, float *out)
{
    gt_status_t st = GT_OK;
    size_t size = gt_cmp_dense_size(codec, block, n);
    uint8_t *dp = NULL;
    if (n == 0) return GT_OK;
    if (codec == GT_CMP_FP32) {
        CUDA_TRY(cudaMemcpy(out, payload, size, cudaMemcpyHostToDevice), st, done);
        return GT_OK;
    }
    {
        size_t nb = (n + block - 1) / block,
               ng = (nb + GT_CMP_GROUP_BLOCKS - 1) / GT_CMP_GROUP_BLOCKS;
        CUDA_TRY(cudaMalloc((void **)&dp, size), st, done);
        CUDA_TRY(cudaMemcpy(dp, payload, size, cudaMemcpyHostToDevice), st, done);
        k_dequant<<<grid_for(n), 256>>>(codec, dp, n, block, ng, nb, out);
        CUDA_TRY(cudaGetLastError(), st, done);
        CUDA_TRY(cudaDeviceSynchronize(), st, done);
    }
done:
    cudaFree(dp);
    return st;
}
