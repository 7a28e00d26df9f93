/* kernels_internal.h — what the files of kernels/ share: tensor views into the arenas, the
 * model struct, the CPU layer operations (the specification every CUDA kernel is checked
 * against) and the entry points of the CUDA half.
 *
 * Layer operations follow llm.c: forward functions write their outputs; backward functions
 * ACCUMULATE (+=) into parameter gradients and into dinp unless the name says otherwise.
 * Shapes in comments: N = B*T rows.
 */
#ifndef GT_KERNELS_INTERNAL_H
#define GT_KERNELS_INTERNAL_H

#include "gt_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GT_GPT_PER_LAYER 12

/* Views of one block's tensors in an arena (HF layout). */
typedef struct {
    float *ln1w, *ln1b;         /* (C) */
    float *qkvw, *qkvb;         /* (C, 3C), (3C) */
    float *attprojw, *attprojb; /* (C, C), (C) */
    float *ln2w, *ln2b;         /* (C) */
    float *fcw, *fcb;           /* (C, 4C), (4C) */
    float *fcprojw, *fcprojb;   /* (4C, C), (C) */
} gt_gpt_layer_views_t;

typedef struct {
    float *wte;                  /* (Vp, C) */
    float *wpe;                  /* (maxT, C) */
    gt_gpt_layer_views_t *layer; /* [L], caller-allocated */
    float *lnfw, *lnfb;          /* (C) */
} gt_gpt_views_t;

size_t gt_gpt_vp(const gt_gpt_config_t *cfg);
size_t gt_gpt_layer_len(const gt_gpt_config_t *cfg);
/* Fills v (whose layer array has L entries) with views into an arena starting at base. */
void gt_gpt_layout(const gt_gpt_config_t *cfg, float *base, gt_gpt_views_t *v);

/* ---- CPU layer operations (cpu_ops.c) ---------------------------------------------------- */

/* out(N,C) = wte[inp] + wpe[t]. */
void gt_cpu_encoder_forward(float *out, const int32_t *inp, const float *wte, const float *wpe,
                            size_t B, size_t T, size_t C);
/* dwte[inp] += dout ; dwpe[t] += dout (deterministic: channel-sliced across threads). */
void gt_cpu_encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *inp,
                             size_t B, size_t T, size_t C);
/* out = (x - mean) * rstd * w + b, eps 1e-5; mean and rstd (N) kept for backward. */
void gt_cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                              const float *w, const float *b, size_t N, size_t C);
void gt_cpu_layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                               const float *inp, const float *w, const float *mean,
                               const float *rstd, size_t N, size_t C);
/* out(N,OC) = inp(N,IC) W(IC,OC) + b (b may be NULL). */
void gt_cpu_matmul_forward(float *out, const float *inp, const float *w, const float *b, size_t N,
                           size_t IC, size_t OC);
/* dinp = dout W^T (overwritten when overwrite_dinp, else added); dw += inp^T dout;
 * db += colsum(dout) (db may be NULL). */
void gt_cpu_matmul_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                            const float *w, size_t N, size_t IC, size_t OC, int overwrite_dinp);
/* Causal self-attention. qkv (N,3C) as [q|k|v], head h uses columns h*hs..(h+1)*hs of each.
 * att (B,NH,T,T) keeps the softmax probabilities (upper triangle zero). out (N,C). */
void gt_cpu_attention_forward(float *out, float *att, const float *qkv, size_t B, size_t T,
                              size_t C, size_t NH);
/* dqkv (N,3C) is OVERWRITTEN. scratch: gt_cpu_attention_scratch_len floats. */
void gt_cpu_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att,
                               float *scratch, size_t B, size_t T, size_t C, size_t NH);
size_t gt_cpu_attention_scratch_len(size_t T, size_t C, size_t NH);
/* GELU, tanh approximation, elementwise over n. */
void gt_cpu_gelu_forward(float *out, const float *inp, size_t n);
/* dinp = gelu'(inp) * dout (OVERWRITES dinp; dinp may alias dout). */
void gt_cpu_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n);
/* out = a + b over n. */
void gt_cpu_residual_forward(float *out, const float *a, const float *b, size_t n);
/* Softmax over the first V of each row of logits (N, V) into probs (may alias), and
 * per-row losses -log p[target]. Returns the mean loss, summed in double in row order. */
double gt_cpu_crossentropy_forward(float *probs, float *losses, const float *logits,
                                   const int32_t *targets, size_t N, size_t V);
/* dlogits = scale / N * (probs - onehot(target)) (OVERWRITES; may alias probs). */
void gt_cpu_crossentropy_backward(float *dlogits, const float *probs, const int32_t *targets,
                                  size_t N, size_t V, float scale);
/* Tied LM head: logits(N, V) = x(N, C) wte(V, C)^T. */
void gt_cpu_lmhead_forward(float *logits, const float *x, const float *wte, size_t N, size_t C,
                           size_t V);
/* dx = dlogits wte (OVERWRITTEN); dwte += dlogits^T x. */
void gt_cpu_lmhead_backward(float *dx, float *dwte, const float *dlogits, const float *x,
                            const float *wte, size_t N, size_t C, size_t V);
/* Sum of squares of x in double, fixed chunking (independent of the thread count). */
double gt_cpu_sumsq(const float *x, size_t n);
void gt_cpu_scale(float *x, size_t n, float s);

/* ---- The model object -------------------------------------------------------------------- */

#define GT_GPT_MAGIC 0x47505432u /* "GPT2" */

struct gt_gpt {
    uint32_t magic;
    gt_gpt_params_t p;
    size_t n;        /* arena length in floats */
    float *arena[4]; /* params, grads, m, v (device pointers on CUDA) */
    int have_fwd;    /* a forward ran since the last parameter change of shape */
    void *cpu;       /* CPU activations (gpt.c) */
    void *cuda;      /* CUDA state (gpt_cuda.cu) */
};

/* ---- CUDA half (gpt_cuda.cu); only linked when GT_HAVE_CUDA ------------------------------- */
#ifdef GT_HAVE_CUDA
gt_status_t gt_cuda_device_count(int *count_p);
gt_status_t gt_cuda_gpt_create(gt_gpt_t *gpt);
void gt_cuda_gpt_destroy(gt_gpt_t *gpt);
gt_status_t gt_cuda_arena_copy(gt_gpt_t *gpt, int which, size_t offset, size_t n, float *host,
                               int to_device);
gt_status_t gt_cuda_arena_zero(gt_gpt_t *gpt, int which);
gt_status_t gt_cuda_params_changed(gt_gpt_t *gpt);
gt_status_t gt_cuda_gpt_forward(gt_gpt_t *gpt, const int32_t *inputs, const int32_t *targets,
                                float *loss_p);
gt_status_t gt_cuda_gpt_backward(gt_gpt_t *gpt, float scale);
gt_status_t gt_cuda_grad_sumsq(gt_gpt_t *gpt, double *sumsq_p);
gt_status_t gt_cuda_grad_scale(gt_gpt_t *gpt, float s);
gt_status_t gt_cuda_adamw_step(gt_gpt_t *gpt, const gt_adamw_params_t *p, uint64_t step);
#endif

#ifdef __cplusplus
}
#endif

#endif /* GT_KERNELS_INTERNAL_H */
