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

/* ---- Tensor-parallel layout (tp.c) --------------------------------------------------------
 * t = the TP size (>= 1); the local tensors of a block in a rank's arena (gt_gpt_tp_walk). */

size_t gt_gpt_tp(const gt_gpt_params_t *p); /* tp_size, with 0 read as 1 */
size_t gt_gpt_layer_len_tp(const gt_gpt_config_t *cfg, size_t t);
/* Views of a rank's local arena (t = 1: the full layout). */
void gt_gpt_layout_tp(const gt_gpt_config_t *cfg, size_t t, float *base, gt_gpt_views_t *v);
/* Local offset of tensor k (gt_gpt_tensor_get order) in a rank's arena. */
size_t gt_gpt_tensor_local_offset(const gt_gpt_config_t *cfg, size_t t, size_t k);
/* Calls fn for every piece rank holds: tensor k, full offset, local offset, n floats,
 * replicated (1 for everything when t == 1). In increasing local offset; the pieces tile the
 * local arena; wte is one piece of Vp*C (padding rows included). */
typedef void (*gt_gpt_tp_emit_fn)(void *ctx, size_t k, size_t full, size_t local, size_t n,
                                  int replicated);
void gt_gpt_tp_walk(const gt_gpt_config_t *cfg, size_t t, size_t rank, gt_gpt_tp_emit_fn fn,
                    void *ctx);

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

/* ---- Single-threaded row primitives (cpu_ops.c), the pieces of the fused block passes ---- */

void gt_cpu_ln_row(float *o, float *mean_p, float *rstd_p, const float *x, const float *w,
                   const float *b, size_t C);
/* dx += layernorm input gradient of one row */
void gt_cpu_ln_back_row(float *dx, const float *dout, const float *x, const float *w, float m,
                        float rs, size_t C);
/* dw, db += over all N rows, channels [c0, c1) */
void gt_cpu_ln_back_params(float *dw, float *db, const float *dout, const float *x,
                           const float *mean, const float *rstd, size_t N, size_t C, size_t c0,
                           size_t c1);
/* db[o] += sum_n dout[n, o] for o in [o0, o1) */
void gt_cpu_colsum_add(float *db, const float *dout, size_t N, size_t OC, size_t o0, size_t o1);
void gt_cpu_gelu_rows(float *out, const float *x, size_t n);
void gt_cpu_gelu_back_rows(float *dx, const float *x, const float *dout, size_t n);
void gt_cpu_add_rows(float *out, const float *a, const float *b, size_t n);
/* softmax of one row of logits into p (may alias); returns -log p[target] */
float gt_cpu_ce_row(float *p, const float *logits, int32_t target, size_t V);
/* attention of one (b, h) pair (bh = b * NH + h); dS: T*T floats of scratch */
void gt_cpu_attention_bh_forward(float *out, float *att, const float *qkv, size_t bh, size_t T,
                                 size_t C, size_t NH);
void gt_cpu_attention_bh_backward(float *dqkv, const float *dout, const float *qkv,
                                  const float *att, float *dS, size_t bh, size_t T, size_t C,
                                  size_t NH);

/* ---- Fused CPU passes (cpu_fused.c): what gpt.c runs ------------------------------------
 *
 * The same math as chaining the layer operations above, regrouped so that everything
 * row-local (layernorm, the matmuls' rows, bias, GELU, residual, cross-entropy) runs per block
 * of rows while it is in cache, with one parallel region per group instead of one per op:
 * forward 3 regions per block, backward 4. Task boundaries depend only on the shapes. */

typedef struct {
    size_t B, T, C, NH;
    const gt_gpt_layer_views_t *w; /* weights */
    const gt_gpt_layer_views_t *g; /* gradients (backward) */
    const float *res;              /* (N, C) block input */
    float *ln1, *ln1_mean, *ln1_rstd, *qkv, *att, *atty, *res2;
    float *ln2, *ln2_mean, *ln2_rstd, *fch, *fchg, *res3;
    /* tensor parallelism (cpu_tp.c): tp ranks; with tp > 1 the weights and qkv, att, atty,
     * fch, fchg are this rank's slices (Cl = C/tp channels, NH/tp heads) */
    size_t tp;
    const gt_gpt_tp_comm_t *comm;
} gt_cpu_block_t;

typedef struct {
    float *dres;                        /* (N, C): d(block output) in, d(block input) out */
    float *dres2, *dln2, *datty, *dln1; /* (N, C) */
    float *dbuf4;                       /* (N, 4C) */
    float *dqkv;                        /* (N, 3C) */
    float *att_scratch;                 /* T*T per thread */
} gt_cpu_block_scratch_t;

void gt_cpu_block_forward(const gt_cpu_block_t *k);
void gt_cpu_block_backward(const gt_cpu_block_t *k, const gt_cpu_block_scratch_t *s);
/* The same for a tensor-parallel rank (k->tp > 1; cpu_tp.c): the Megatron split with two
 * k->comm all-reduces of (N, C) each way. Scratch dqkv, dbuf4, datty hold local widths.
 * Returns the first failing all-reduce's status. */
gt_status_t gt_cpu_block_forward_tp(const gt_cpu_block_t *k);
gt_status_t gt_cpu_block_backward_tp(const gt_cpu_block_t *k, const gt_cpu_block_scratch_t *s);
/* Final layernorm, tied LM head and cross-entropy; returns the mean loss (double, row order).
 * probs (N, V) keeps the softmax for backward. */
double gt_cpu_head_forward(float *lnf, float *mean, float *rstd, float *probs, float *losses,
                           const float *x, const float *lnfw, const float *lnfb, const float *wte,
                           const int32_t *targets, size_t N, size_t C, size_t V);
/* probs becomes dlogits = scale/N (probs - onehot); dres (N, C) is OVERWRITTEN with the
 * gradient of x; dwte, dlnfw, dlnfb accumulate. dlnf: (N, C) scratch. */
void gt_cpu_head_backward(float *dres, float *dlnf, float *dwte, float *dlnfw, float *dlnfb,
                          float *probs, const float *lnf, const float *x, const float *lnfw,
                          const float *mean, const float *rstd, const float *wte,
                          const int32_t *targets, size_t N, size_t C, size_t V, float scale);

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
    size_t tp;       /* tensor-parallel ranks (1: none); n is then the local length */
    /* tp > 1: the local arena as alternating runs, replicated or sharded (for the norm) */
    gt_gpt_segment_t *runs;
    size_t nruns;
};

/* ---- CUDA half (gpt_cuda.cu); only linked when GT_HAVE_CUDA ------------------------------- */
#ifdef GT_HAVE_CUDA
gt_status_t gt_cuda_device_count(int *count_p);
gt_status_t gt_cuda_gpt_create(gt_gpt_t *gpt);
const char *gt_cuda_attn_name(const gt_gpt_t *gpt); /* "flash", "flash1" or "naive" */
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
