/* gpt_cuda.cu — the GPT model on one CUDA device: the same steps as gpt.c's CPU forward and
 * backward, with the kernels of cuda_ops.cu and cuBLAS bf16 GEMMs (fp32 accumulation).
 *
 * Memory: the four fp32 arenas of gt_gpt_t live on the device (fp32 master weights and
 * optimizer state, fp32 gradients); a bf16 copy of the parameters is what the matmuls read,
 * refreshed by the AdamW kernel and by gt_cuda_params_changed. Activations for backward are
 * kept per layer (llm.c's layout); backward scratch is shared by the layers.
 *
 * Attention runs one of three ways, picked once at creation by GT_CUDA_ATTN (docs/kernels.md):
 * "flash" (the default; cuda_flash2.cu, softmax in mma registers) and "flash1" (cuda_flash.cu,
 * the first wmma version, kept for comparison) keep only a log-sum-exp per query row and never
 * form the scores; "naive" (llm.c's first version) materialises them: cuBLAS scores into fp32
 * scratch, a softmax kernel, and the (B, NH, T, T) bf16 probabilities of every layer kept for
 * backward (2.4 GB at GPT-2 124M, B=8, T=1024). Only the chosen path's buffers are allocated.
 * The LM head multiplies by all Vp rows of wte (aligned GEMM shapes); the padded logits are
 * ignored by the loss and get zero gradient.
 *
 * Host interplay: forward copies the tokens to the device and brings the B*T per-row losses
 * back, summed in double on the host in row order (like the CPU). Every public call returns
 * with the device idle, so host code may read arenas right after it.
 */
#include "cuda_ops.cuh"
#include "kernels_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CU_CHECK(call)                                                                     \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            GT_ERROR("kernels: CUDA %s failed: %s (%s:%d)", #call, cudaGetErrorString(e_), \
                     __FILE__, __LINE__);                                                  \
            return e_ == cudaErrorMemoryAllocation ? GT_ERR_NOMEM : GT_ERR_INTERNAL;       \
        }                                                                                  \
    } while (0)

#define BLAS_CHECK(call)                                                                      \
    do {                                                                                      \
        cublasStatus_t s_ = (call);                                                           \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                    \
            GT_ERROR("kernels: cuBLAS call failed with status %d (%s:%d)", (int)s_, __FILE__, \
                     __LINE__);                                                               \
            return GT_ERR_INTERNAL;                                                           \
        }                                                                                     \
    } while (0)

typedef struct {
    int B, T, C, NH, L, V, Vp, hs;
    int flash; /* attention path: 2 flash (cuda_flash2.cu), 1 flash1, 0 naive (materialised) */
    cudaStream_t stream;
    cublasHandle_t blas;
    bf16 *wbf;         /* bf16 copy of the parameters, same layout */
    gt_gpt_views_t wv; /* views of wbf (as float* holders of bf16 pointers: see W()) */
    gt_gpt_views_t gv; /* views of the fp32 gradients */
    /* activations kept for backward */
    int32_t *tok, *tgt; /* (N) */
    float *encoded;     /* (N, C) */
    bf16 *ln1, *qkv, *att, *atty, *ln2, *fch, *fchg, *lnf, *logits;
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd, *lnf_mean, *lnf_rstd;
    float *res2, *res3;              /* (L, N, C) */
    float *lse;                      /* (L, B*NH, T) flash: log-sum-exp of each query row */
    float *losses, *rowmax, *rowsum; /* (N) */
    /* scratch */
    bf16 *q, *k, *v, *y, *dq, *dk, *dv, *dy, *dpre, *dbuf4, *dres_bf, *dqkv, *datty;
    float *pre, *dln, *dres, *partial; /* pre, dpre (and att): naive path only */
    float *dsum;                       /* (B*NH, T) flash: rowsum(dy * y) */
    double *sumsq;
    int32_t *enc_uniq, *enc_start, *enc_pos; /* device CSR of token positions */
    int32_t *h_uniq, *h_start, *h_pos, *h_count;
    int nuniq;
    float *h_losses;
    double *h_sumsq;
    void *mem; /* one device allocation for activations and scratch */
} cuda_t;

/* The bf16 views reuse gt_gpt_views_t's float* fields to hold bf16 addresses. */
#define W(p) ((const bf16 *)(p))

static gt_status_t cu_alloc(void **p, size_t bytes)
{
    CU_CHECK(cudaMalloc(p, bytes ? bytes : 16));
    return GT_OK;
}

extern "C" gt_status_t gt_cuda_device_count(int *count_p)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) {
        (void)cudaGetLastError();
        *count_p = 0;
        return GT_OK;
    }
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        *count_p = 0;
        return GT_OK;
    }
    *count_p = n;
    return GT_OK;
}

/* bf16 views: the fp32 layout's element offsets applied to the bf16 copy. */
static void bf16_views(const gt_gpt_config_t *cfg, float *f32_base, bf16 *base, gt_gpt_views_t *v)
{
    gt_gpt_layout(cfg, f32_base, v);
#define FIX(f) f = (float *)(base + ((f)-f32_base))
    FIX(v->wte);
    FIX(v->wpe);
    for (size_t l = 0; l < cfg->L; l++) {
        gt_gpt_layer_views_t *y = &v->layer[l];
        FIX(y->ln1w), FIX(y->ln1b), FIX(y->qkvw), FIX(y->qkvb), FIX(y->attprojw);
        FIX(y->attprojb), FIX(y->ln2w), FIX(y->ln2b), FIX(y->fcw), FIX(y->fcb);
        FIX(y->fcprojw), FIX(y->fcprojb);
    }
    FIX(v->lnfw);
    FIX(v->lnfb);
#undef FIX
}

/* GT_CUDA_ATTN: unset or empty = flash where the head size allows it, else naive. *flash_p:
 * 2 flash, 1 flash1, 0 naive. */
static gt_status_t attn_choose(int hs, int *flash_p)
{
    const char *e = getenv("GT_CUDA_ATTN");
    int ok = gt_cu_flash_supported(hs);
    if (!e || !*e) {
        if (!ok)
            GT_INFO("kernels: head size %d is not a multiple of 8 up to %d: naive attention", hs,
                    GT_CU_FLASH_MAX_HS);
        *flash_p = ok ? 2 : 0;
        return GT_OK;
    }
    if (strcmp(e, "naive") == 0) {
        *flash_p = 0;
        return GT_OK;
    }
    if (strcmp(e, "flash") == 0 || strcmp(e, "flash1") == 0) {
        if (!ok) {
            GT_ERROR("kernels: GT_CUDA_ATTN=%s needs a head size C/NH that is a multiple of 8 "
                     "and at most %d (it is %d); use GT_CUDA_ATTN=naive",
                     e, GT_CU_FLASH_MAX_HS, hs);
            return GT_ERR_UNSUPPORTED;
        }
        *flash_p = strcmp(e, "flash") == 0 ? 2 : 1;
        return GT_OK;
    }
    GT_ERROR("kernels: GT_CUDA_ATTN='%s': expected 'flash' (the default), 'flash1' (the first "
             "flash kernels) or 'naive'",
             e);
    return GT_ERR_INVALID;
}

extern "C" const char *gt_cuda_attn_name(const gt_gpt_t *gpt)
{
    const cuda_t *c = (const cuda_t *)gpt->cuda;
    if (!c || !c->flash) return "naive";
    return c->flash == 2 ? "flash" : "flash1";
}

extern "C" gt_status_t gt_cuda_gpt_create(gt_gpt_t *gpt)
{
    const gt_gpt_config_t *m = &gpt->p.model;
    cuda_t *c = (cuda_t *)calloc(1, sizeof(cuda_t));
    if (!c) return GT_ERR_NOMEM;
    gpt->cuda = c;
    CU_CHECK(cudaSetDevice(gpt->p.cuda_device));
    c->B = (int)gpt->p.B, c->T = (int)gpt->p.T, c->C = (int)m->C, c->NH = (int)m->NH;
    c->L = (int)m->L, c->V = (int)m->V, c->Vp = (int)gt_gpt_vp(m), c->hs = c->C / c->NH;
    size_t N = (size_t)c->B * c->T, C = c->C, L = c->L, n = gpt->n;
    size_t BHT = (size_t)c->B * c->NH * c->T;
    gt_status_t ast = attn_choose(c->hs, &c->flash);
    if (ast != GT_OK) return ast;
    if (c->flash) CU_CHECK(c->flash == 2 ? gt_cu_flash2_init(c->hs) : gt_cu_flash_init(c->hs));
    /* (B, NH, T, T) buffers exist only on the naive path; lse and dsum only on the flash one */
    size_t att = c->flash ? 0 : BHT * c->T, rows = c->flash ? BHT : 0;
    /* per-head copies of q, k, v, y and their gradients: not on flash (it reads and writes the
     * (B, T, 3C) and (B, T, C) tensors in place) */
    size_t heads = c->flash == 2 ? 0 : N * C * 2;
    CU_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    BLAS_CHECK(cublasCreate(&c->blas));
    BLAS_CHECK(cublasSetStream(c->blas, c->stream));
    for (int i = 0; i < 4; i++) {
        gt_status_t st = cu_alloc((void **)&gpt->arena[i], n * sizeof(float));
        if (st != GT_OK) return st;
        CU_CHECK(cudaMemset(gpt->arena[i], 0, n * sizeof(float)));
    }
    /* One allocation for everything else, carved in 256-byte aligned pieces. */
    struct piece {
        void **p;
        size_t bytes;
    } pieces[] = {
        {(void **)&c->wbf, n * 2},
        {(void **)&c->tok, N * 4},
        {(void **)&c->tgt, N * 4},
        {(void **)&c->encoded, N * C * 4},
        {(void **)&c->ln1, L * N * C * 2},
        {(void **)&c->qkv, L * N * 3 * C * 2},
        {(void **)&c->att, L * att * 2},
        {(void **)&c->atty, L * N * C * 2},
        {(void **)&c->ln2, L * N * C * 2},
        {(void **)&c->fch, L * N * 4 * C * 2},
        {(void **)&c->fchg, L * N * 4 * C * 2},
        {(void **)&c->lnf, N * C * 2},
        {(void **)&c->logits, N * (size_t)c->Vp * 2},
        {(void **)&c->ln1_mean, L * N * 4},
        {(void **)&c->ln1_rstd, L * N * 4},
        {(void **)&c->ln2_mean, L * N * 4},
        {(void **)&c->ln2_rstd, L * N * 4},
        {(void **)&c->lnf_mean, N * 4},
        {(void **)&c->lnf_rstd, N * 4},
        {(void **)&c->res2, L * N * C * 4},
        {(void **)&c->res3, L * N * C * 4},
        {(void **)&c->lse, L * rows * 4},
        {(void **)&c->dsum, rows * 4},
        {(void **)&c->losses, N * 4},
        {(void **)&c->rowmax, N * 4},
        {(void **)&c->rowsum, N * 4},
        {(void **)&c->q, heads},
        {(void **)&c->k, heads},
        {(void **)&c->v, heads},
        {(void **)&c->y, heads},
        {(void **)&c->dq, heads},
        {(void **)&c->dk, heads},
        {(void **)&c->dv, heads},
        {(void **)&c->dy, heads},
        {(void **)&c->dpre, att * 2},
        {(void **)&c->dbuf4, N * 4 * C * 2},
        {(void **)&c->dres_bf, N * C * 2},
        {(void **)&c->dqkv, N * 3 * C * 2},
        {(void **)&c->datty, N * C * 2},
        {(void **)&c->pre, att * 4},
        {(void **)&c->dln, N * C * 4},
        {(void **)&c->dres, N * C * 4},
        {(void **)&c->partial, 2 * GT_CU_ROW_CHUNKS * 4 * C * 4 + (size_t)c->Vp * 4},
        {(void **)&c->sumsq, ((n + GT_CU_SUMSQ_CHUNK - 1) / GT_CU_SUMSQ_CHUNK + 1) * 8},
        {(void **)&c->enc_uniq, N * 4},
        {(void **)&c->enc_start, (N + 1) * 4},
        {(void **)&c->enc_pos, N * 4},
    };
    size_t total = 0;
    for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++)
        total += (pieces[i].bytes + 255) & ~(size_t)255;
    gt_status_t st = cu_alloc(&c->mem, total);
    if (st != GT_OK) return st;
    CU_CHECK(cudaMemset(c->mem, 0, total));
    char *p = (char *)c->mem;
    for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++) {
        *pieces[i].p = pieces[i].bytes ? p : NULL; /* the other attention path's buffers */
        p += (pieces[i].bytes + 255) & ~(size_t)255;
    }
    c->wv.layer = (gt_gpt_layer_views_t *)calloc(L, sizeof(gt_gpt_layer_views_t));
    c->gv.layer = (gt_gpt_layer_views_t *)calloc(L, sizeof(gt_gpt_layer_views_t));
    c->h_uniq = (int32_t *)malloc((3 * N + 1 + m->V) * sizeof(int32_t));
    c->h_losses = (float *)malloc(N * sizeof(float));
    c->h_sumsq = (double *)malloc(((n + GT_CU_SUMSQ_CHUNK - 1) / GT_CU_SUMSQ_CHUNK + 1) * 8);
    if (!c->wv.layer || !c->gv.layer || !c->h_uniq || !c->h_losses || !c->h_sumsq)
        return GT_ERR_NOMEM;
    c->h_start = c->h_uniq + N;
    c->h_pos = c->h_start + N + 1;
    c->h_count = c->h_pos + N; /* V counters */
    bf16_views(m, gpt->arena[GT_GPT_PARAMS], c->wbf, &c->wv);
    gt_gpt_layout(m, gpt->arena[GT_GPT_GRADS], &c->gv);
    /* the memsets above ran on the legacy stream, which c->stream does not wait for */
    CU_CHECK(cudaDeviceSynchronize());
    return GT_OK;
}

extern "C" void gt_cuda_gpt_destroy(gt_gpt_t *gpt)
{
    cuda_t *c = (cuda_t *)gpt->cuda;
    for (int i = 0; i < 4; i++) cudaFree(gpt->arena[i]);
    if (!c) return;
    if (c->blas) cublasDestroy(c->blas);
    if (c->stream) cudaStreamDestroy(c->stream);
    cudaFree(c->mem);
    free(c->wv.layer);
    free(c->gv.layer);
    free(c->h_uniq);
    free(c->h_losses);
    free(c->h_sumsq);
    free(c);
    gpt->cuda = NULL;
}

extern "C" gt_status_t gt_cuda_params_changed(gt_gpt_t *gpt)
{
    cuda_t *c = (cuda_t *)gpt->cuda;
    gt_cu_f32_to_bf16(c->wbf, gpt->arena[GT_GPT_PARAMS], gpt->n, c->stream);
    CU_CHECK(cudaGetLastError());
    CU_CHECK(cudaStreamSynchronize(c->stream));
    return GT_OK;
}

extern "C" gt_status_t gt_cuda_arena_copy(gt_gpt_t *gpt, int which, size_t offset, size_t n,
                                          float *host, int to_device)
{
    cuda_t *c = (cuda_t *)gpt->cuda;
    float *d = gpt->arena[which] + offset;
    if (to_device)
        CU_CHECK(cudaMemcpyAsync(d, host, n * sizeof(float), cudaMemcpyHostToDevice, c->stream));
    else
        CU_CHECK(cudaMemcpyAsync(host, d, n * sizeof(float), cudaMemcpyDeviceToHost, c->stream));
    CU_CHECK(cudaStreamSynchronize(c->stream));
    if (to_device && which == GT_GPT_PARAMS) return gt_cuda_params_changed(gpt);
    return GT_OK;
}

extern "C" gt_status_t gt_cuda_arena_zero(gt_gpt_t *gpt, int which)
{
    cuda_t *c = (cuda_t *)gpt->cuda;
    CU_CHECK(cudaMemsetAsync(gpt->arena[which], 0, gpt->n * sizeof(float), c->stream));
    CU_CHECK(cudaStreamSynchronize(c->stream));
    return GT_OK;
}

/* Positions of each token, grouped by token, in increasing position order (counting sort):
 * the deterministic schedule of the wte gradient. */
static void build_token_csr(cuda_t *c, const int32_t *tok, int N)
{
    int32_t *count = c->h_count;
    memset(count, 0, (size_t)c->V * sizeof(int32_t));
    for (int i = 0; i < N; i++) count[tok[i]]++;
    int nu = 0, acc = 0;
    for (int t = 0; t < c->V; t++) {
        if (!count[t]) continue;
        c->h_uniq[nu] = t;
        c->h_start[nu] = acc;
        int k = count[t];
        count[t] = acc; /* becomes the fill cursor */
        acc += k;
        nu++;
    }
    c->h_start[nu] = acc;
    for (int i = 0; i < N; i++) c->h_pos[count[tok[i]]++] = i;
    c->nuniq = nu;
}

extern "C" gt_status_t gt_cuda_gpt_forward(gt_gpt_t *gpt, const int32_t *inputs,
                                           const int32_t *targets, float *loss_p)
{
    cuda_t *c = (cuda_t *)gpt->cuda;
    cudaStream_t s = c->stream;
    int B = c->B, T = c->T, C = c->C, NH = c->NH, hs = c->hs, N = B * T;
    size_t NC = (size_t)N * C, att = c->flash ? 0 : (size_t)B * NH * T * T;
    size_t BHT = (size_t)B * NH * T;
    CU_CHECK(cudaMemcpyAsync(c->tok, inputs, N * 4, cudaMemcpyHostToDevice, s));
    CU_CHECK(cudaMemcpyAsync(c->tgt, targets, N * 4, cudaMemcpyHostToDevice, s));
    build_token_csr(c, inputs, N);
    CU_CHECK(
        cudaMemcpyAsync(c->enc_uniq, c->h_uniq, (size_t)c->nuniq * 4, cudaMemcpyHostToDevice, s));
    CU_CHECK(cudaMemcpyAsync(c->enc_start, c->h_start, ((size_t)c->nuniq + 1) * 4,
                             cudaMemcpyHostToDevice, s));
    CU_CHECK(cudaMemcpyAsync(c->enc_pos, c->h_pos, (size_t)N * 4, cudaMemcpyHostToDevice, s));

    const gt_gpt_views_t *w = &c->wv;
    gt_cu_encoder_forward(c->encoded, c->tok, W(w->wte), W(w->wpe), B, T, C, s);
    float scale = 1.0f / sqrtf((float)hs);
    for (int l = 0; l < c->L; l++) {
        const gt_gpt_layer_views_t *lw = &w->layer[l];
        const float *res = l == 0 ? c->encoded : c->res3 + (size_t)(l - 1) * NC;
        bf16 *ln1 = c->ln1 + l * NC, *qkv = c->qkv + l * 3 * NC;
        bf16 *atty = c->atty + l * NC, *ln2 = c->ln2 + l * NC;
        bf16 *fch = c->fch + l * 4 * NC, *fchg = c->fchg + l * 4 * NC;
        float *res2 = c->res2 + l * NC, *res3 = c->res3 + l * NC;
        gt_cu_layernorm_forward(ln1, c->ln1_mean + (size_t)l * N, c->ln1_rstd + (size_t)l * N, res,
                                W(lw->ln1w), W(lw->ln1b), N, C, s);
        BLAS_CHECK(gt_cu_gemm(c->blas, 0, 0, N, 3 * C, C, 1.0f, ln1, C, 0, W(lw->qkvw), 3 * C, 0,
                              0.0f, qkv, 0, 3 * C, 0, 1));
        gt_cu_add_bias_bf16(qkv, W(lw->qkvb), N, 3 * C, s);
        if (c->flash == 2) {
            /* reads q, k, v out of qkv and writes y into atty: no head split or merge */
            gt_cu_flash2_forward(atty, c->lse + l * BHT, qkv, qkv + C, qkv + 2 * C, B * NH, T, hs,
                                 scale, gt_cu_heads_rows(NH, T, hs, 3 * C),
                                 gt_cu_heads_rows(NH, T, hs, C), s);
            CU_CHECK(cudaGetLastError());
        } else if (c->flash) {
            gt_cu_split_heads(c->q, c->k, c->v, qkv, B, T, NH, hs, s);
            gt_cu_flash_forward(c->y, c->lse + l * BHT, c->q, c->k, c->v, B * NH, T, hs, scale, s);
            CU_CHECK(cudaGetLastError());
        } else {
            gt_cu_split_heads(c->q, c->k, c->v, qkv, B, T, NH, hs, s);
            /* pre = scale * q k^T per (b, h); att = causal softmax; y = att v */
            bf16 *at = c->att + l * att;
            BLAS_CHECK(gt_cu_gemm(c->blas, 0, 1, T, T, hs, scale, c->q, hs, (long long)T * hs, c->k,
                                  hs, (long long)T * hs, 0.0f, c->pre, 1, T, (long long)T * T,
                                  B * NH));
            gt_cu_softmax_causal(at, c->pre, B * NH * T, T, s);
            BLAS_CHECK(gt_cu_gemm(c->blas, 0, 0, T, hs, T, 1.0f, at, T, (long long)T * T, c->v, hs,
                                  (long long)T * hs, 0.0f, c->y, 0, hs, (long long)T * hs, B * NH));
        }
        if (c->flash != 2) gt_cu_merge_heads(atty, c->y, B, T, NH, hs, s);
        BLAS_CHECK(gt_cu_gemm(c->blas, 0, 0, N, C, C, 1.0f, atty, C, 0, W(lw->attprojw), C, 0, 0.0f,
                              res2, 1, C, 0, 1));
        gt_cu_residual_bias(res2, W(lw->attprojb), res, N, C, s);
        gt_cu_layernorm_forward(ln2, c->ln2_mean + (size_t)l * N, c->ln2_rstd + (size_t)l * N, res2,
                                W(lw->ln2w), W(lw->ln2b), N, C, s);
        BLAS_CHECK(gt_cu_gemm(c->blas, 0, 0, N, 4 * C, C, 1.0f, ln2, C, 0, W(lw->fcw), 4 * C, 0,
                              0.0f, fch, 0, 4 * C, 0, 1));
        gt_cu_bias_gelu_forward(fchg, fch, W(lw->fcb), N, 4 * C, s);
        BLAS_CHECK(gt_cu_gemm(c->blas, 0, 0, N, C, 4 * C, 1.0f, fchg, 4 * C, 0, W(lw->fcprojw), C,
                              0, 0.0f, res3, 1, C, 0, 1));
        gt_cu_residual_bias(res3, W(lw->fcprojb), res2, N, C, s);
    }
    const float *last = c->res3 + (size_t)(c->L - 1) * NC;
    gt_cu_layernorm_forward(c->lnf, c->lnf_mean, c->lnf_rstd, last, W(w->lnfw), W(w->lnfb), N, C,
                            s);
    /* logits (N, Vp) = lnf (N, C) wte (Vp, C)^T */
    BLAS_CHECK(gt_cu_gemm(c->blas, 0, 1, N, c->Vp, C, 1.0f, c->lnf, C, 0, W(w->wte), C, 0, 0.0f,
                          c->logits, 0, c->Vp, 0, 1));
    gt_cu_crossentropy_forward(c->losses, c->rowmax, c->rowsum, c->logits, c->tgt, N, c->V, c->Vp,
                               s);
    CU_CHECK(cudaGetLastError());
    CU_CHECK(cudaMemcpyAsync(c->h_losses, c->losses, (size_t)N * 4, cudaMemcpyDeviceToHost, s));
    CU_CHECK(cudaStreamSynchronize(s));
    double sum = 0;
    for (int i = 0; i < N; i++) sum += c->h_losses[i];
    *loss_p = (float)(sum / N);
    return GT_OK;
}

extern "C" gt_status_t gt_cuda_gpt_backward(gt_gpt_t *gpt, float lscale)
{
    cuda_t *c = (cuda_t *)gpt->cuda;
    cudaStream_t s = c->stream;
    int B = c->B, T = c->T, C = c->C, NH = c->NH, hs = c->hs, N = B * T;
    size_t NC = (size_t)N * C, att = c->flash ? 0 : (size_t)B * NH * T * T;
    size_t BHT = (size_t)B * NH * T;
    const gt_gpt_views_t *w = &c->wv, *g = &c->gv;
    float ascale = 1.0f / sqrtf((float)hs);

    gt_cu_crossentropy_backward(c->logits, c->rowmax, c->rowsum, c->tgt, N, c->V, c->Vp, lscale, s);
    /* dlnf = dlogits wte ; dwte += dlogits^T lnf (all Vp rows; padded ones get zeros) */
    BLAS_CHECK(gt_cu_gemm(c->blas, 0, 0, N, C, c->Vp, 1.0f, c->logits, c->Vp, 0, W(w->wte), C, 0,
                          0.0f, c->dln, 1, C, 0, 1));
    BLAS_CHECK(gt_cu_gemm(c->blas, 1, 0, c->Vp, C, N, 1.0f, c->logits, c->Vp, 0, c->lnf, C, 0, 1.0f,
                          g->wte, 1, C, 0, 1));
    CU_CHECK(cudaMemsetAsync(c->dres, 0, NC * 4, s));
    const float *last = c->res3 + (size_t)(c->L - 1) * NC;
    gt_cu_layernorm_backward_dinp(c->dres, c->dres_bf, c->dln, last, W(w->lnfw), c->lnf_mean,
                                  c->lnf_rstd, N, C, s);
    gt_cu_layernorm_backward_params(g->lnfw, g->lnfb, c->partial, c->dln, last, c->lnf_mean,
                                    c->lnf_rstd, N, C, s);
    for (int l = c->L - 1; l >= 0; l--) {
        const gt_gpt_layer_views_t *lw = &w->layer[l], *lg = &g->layer[l];
        const float *res = l == 0 ? c->encoded : c->res3 + (size_t)(l - 1) * NC;
        const bf16 *ln1 = c->ln1 + l * NC, *atty = c->atty + l * NC;
        const bf16 *ln2 = c->ln2 + l * NC, *fch = c->fch + l * 4 * NC;
        const bf16 *fchg = c->fchg + l * 4 * NC;
        const float *res2 = c->res2 + l * NC;
        const float *m1 = c->ln1_mean + (size_t)l * N, *r1 = c->ln1_rstd + (size_t)l * N;
        const float *m2 = c->ln2_mean + (size_t)l * N, *r2 = c->ln2_rstd + (size_t)l * N;

        /* MLP: fcproj, GELU, fc */
        BLAS_CHECK(gt_cu_gemm(c->blas, 0, 1, N, 4 * C, C, 1.0f, c->dres_bf, C, 0, W(lw->fcprojw), C,
                              0, 0.0f, c->dbuf4, 0, 4 * C, 0, 1));
        BLAS_CHECK(gt_cu_gemm(c->blas, 1, 0, 4 * C, C, N, 1.0f, fchg, 4 * C, 0, c->dres_bf, C, 0,
                              1.0f, lg->fcprojw, 1, C, 0, 1));
        gt_cu_bias_backward_f32(lg->fcprojb, c->partial, c->dres, N, C, s);
        gt_cu_gelu_backward(c->dbuf4, fch, 4 * NC, s);
        BLAS_CHECK(gt_cu_gemm(c->blas, 0, 1, N, C, 4 * C, 1.0f, c->dbuf4, 4 * C, 0, W(lw->fcw),
                              4 * C, 0, 0.0f, c->dln, 1, C, 0, 1));
        BLAS_CHECK(gt_cu_gemm(c->blas, 1, 0, C, 4 * C, N, 1.0f, ln2, C, 0, c->dbuf4, 4 * C, 0, 1.0f,
                              lg->fcw, 1, 4 * C, 0, 1));
        gt_cu_bias_backward_bf16(lg->fcb, c->partial, c->dbuf4, N, 4 * C, s);
        gt_cu_layernorm_backward_params(lg->ln2w, lg->ln2b, c->partial, c->dln, res2, m2, r2, N, C,
                                        s);
        gt_cu_layernorm_backward_dinp(c->dres, c->dres_bf, c->dln, res2, W(lw->ln2w), m2, r2, N, C,
                                      s);
        /* attention projection */
        BLAS_CHECK(gt_cu_gemm(c->blas, 0, 1, N, C, C, 1.0f, c->dres_bf, C, 0, W(lw->attprojw), C, 0,
                              0.0f, c->datty, 0, C, 0, 1));
        BLAS_CHECK(gt_cu_gemm(c->blas, 1, 0, C, C, N, 1.0f, atty, C, 0, c->dres_bf, C, 0, 1.0f,
                              lg->attprojw, 1, C, 0, 1));
        gt_cu_bias_backward_f32(lg->attprojb, c->partial, c->dres, N, C, s);
        const bf16 *qkv = c->qkv + l * 3 * NC;
        if (c->flash == 2) {
            /* D = rowsum(dy * y) from the kept output, then dq, dk and dv by recomputation,
             * read from qkv and datty and written into dqkv as they lie (no split or merge) */
            gt_cu_flash_dsum(c->dsum, c->datty, atty, B, T, NH, hs, s);
            gt_cu_flash2_backward(c->dqkv, c->dqkv + C, c->dqkv + 2 * C, qkv, qkv + C, qkv + 2 * C,
                                  c->datty, c->lse + l * BHT, c->dsum, B * NH, T, hs, ascale,
                                  gt_cu_heads_rows(NH, T, hs, 3 * C),
                                  gt_cu_heads_rows(NH, T, hs, C), s);
            CU_CHECK(cudaGetLastError());
        } else if (c->flash) {
            /* recompute the head split of q, k, v from the kept qkv */
            gt_cu_split_heads(c->q, c->k, c->v, qkv, B, T, NH, hs, s);
            gt_cu_split_heads_one(c->dy, c->datty, B, T, NH, hs, s);
            gt_cu_flash_dsum(c->dsum, c->datty, atty, B, T, NH, hs, s);
            gt_cu_flash_backward(c->dq, c->dk, c->dv, c->q, c->k, c->v, c->dy, c->lse + l * BHT,
                                 c->dsum, B * NH, T, hs, ascale, s);
            CU_CHECK(cudaGetLastError());
        } else {
            gt_cu_split_heads(c->q, c->k, c->v, qkv, B, T, NH, hs, s);
            gt_cu_split_heads_one(c->dy, c->datty, B, T, NH, hs, s);
            const bf16 *at = c->att + l * att;
            long long sT = (long long)T * T, sH = (long long)T * hs;
            BLAS_CHECK(gt_cu_gemm(c->blas, 0, 1, T, T, hs, 1.0f, c->dy, hs, sH, c->v, hs, sH, 0.0f,
                                  c->pre, 1, T, sT, B * NH)); /* datt = dy v^T */
            BLAS_CHECK(gt_cu_gemm(c->blas, 1, 0, T, hs, T, 1.0f, at, T, sT, c->dy, hs, sH, 0.0f,
                                  c->dv, 0, hs, sH, B * NH)); /* dv = att^T dy */
            gt_cu_softmax_causal_backward(c->dpre, c->pre, at, B * NH * T, T, s);
            BLAS_CHECK(gt_cu_gemm(c->blas, 0, 0, T, hs, T, ascale, c->dpre, T, sT, c->k, hs, sH,
                                  0.0f, c->dq, 0, hs, sH, B * NH)); /* dq = s dpre k */
            BLAS_CHECK(gt_cu_gemm(c->blas, 1, 0, T, hs, T, ascale, c->dpre, T, sT, c->q, hs, sH,
                                  0.0f, c->dk, 0, hs, sH, B * NH)); /* dk = s dpre^T q */
        }
        if (c->flash != 2) gt_cu_merge_qkv_grads(c->dqkv, c->dq, c->dk, c->dv, B, T, NH, hs, s);
        /* qkv projection */
        BLAS_CHECK(gt_cu_gemm(c->blas, 0, 1, N, C, 3 * C, 1.0f, c->dqkv, 3 * C, 0, W(lw->qkvw),
                              3 * C, 0, 0.0f, c->dln, 1, C, 0, 1));
        BLAS_CHECK(gt_cu_gemm(c->blas, 1, 0, C, 3 * C, N, 1.0f, ln1, C, 0, c->dqkv, 3 * C, 0, 1.0f,
                              lg->qkvw, 1, 3 * C, 0, 1));
        gt_cu_bias_backward_bf16(lg->qkvb, c->partial, c->dqkv, N, 3 * C, s);
        gt_cu_layernorm_backward_params(lg->ln1w, lg->ln1b, c->partial, c->dln, res, m1, r1, N, C,
                                        s);
        gt_cu_layernorm_backward_dinp(c->dres, c->dres_bf, c->dln, res, W(lw->ln1w), m1, r1, N, C,
                                      s);
    }
    gt_cu_encoder_backward(g->wte, g->wpe, c->dres, c->enc_uniq, c->enc_start, c->enc_pos, c->nuniq,
                           B, T, C, s);
    CU_CHECK(cudaGetLastError());
    CU_CHECK(cudaStreamSynchronize(s));
    return GT_OK;
}

extern "C" gt_status_t gt_cuda_grad_sumsq(gt_gpt_t *gpt, double *sumsq_p)
{
    cuda_t *c = (cuda_t *)gpt->cuda;
    size_t chunks = (gpt->n + GT_CU_SUMSQ_CHUNK - 1) / GT_CU_SUMSQ_CHUNK;
    gt_cu_sumsq_partials(c->sumsq, gpt->arena[GT_GPT_GRADS], gpt->n, c->stream);
    CU_CHECK(cudaGetLastError());
    CU_CHECK(cudaMemcpyAsync(c->h_sumsq, c->sumsq, chunks * 8, cudaMemcpyDeviceToHost, c->stream));
    CU_CHECK(cudaStreamSynchronize(c->stream));
    double s = 0;
    for (size_t i = 0; i < chunks; i++) s += c->h_sumsq[i];
    *sumsq_p = s;
    return GT_OK;
}

extern "C" gt_status_t gt_cuda_grad_scale(gt_gpt_t *gpt, float a)
{
    cuda_t *c = (cuda_t *)gpt->cuda;
    gt_cu_scale(gpt->arena[GT_GPT_GRADS], gpt->n, a, c->stream);
    CU_CHECK(cudaGetLastError());
    CU_CHECK(cudaStreamSynchronize(c->stream));
    return GT_OK;
}

extern "C" gt_status_t gt_cuda_adamw_step(gt_gpt_t *gpt, const gt_adamw_params_t *p, uint64_t step)
{
    cuda_t *c = (cuda_t *)gpt->cuda;
    const gt_gpt_config_t *m = &gpt->p.model;
    /* bias corrections exactly as the CPU computes them */
    float bc1 = 1.0f - (float)pow((double)p->beta1, (double)step);
    float bc2 = 1.0f - (float)pow((double)p->beta2, (double)step);
    size_t nt = gt_gpt_tensor_count(m), start = 0;
    int decay = -1;
    for (size_t k = 0; k <= nt; k++) {
        gt_gpt_tensor_t t;
        size_t off = gpt->n;
        int d = -1;
        if (k < nt) {
            if (gt_gpt_tensor_get(m, k, &t) != GT_OK) return GT_ERR_INTERNAL;
            off = t.offset;
            d = t.decay;
        }
        if (k == 0) {
            decay = d;
            continue;
        }
        if (d != decay) {
            float **a = gpt->arena;
            gt_cu_adamw(a[0] + start, c->wbf + start, a[1] + start, a[2] + start, a[3] + start,
                        off - start, p->lr, p->beta1, p->beta2, p->eps,
                        decay ? p->weight_decay : 0.0f, bc1, bc2, c->stream);
            start = off;
            decay = d;
        }
    }
    CU_CHECK(cudaGetLastError());
    CU_CHECK(cudaStreamSynchronize(c->stream));
    return GT_OK;
}
