/* gt_kernels.h — the model geotrain trains: a GPT-2 (forward, backward, AdamW) on the CPU
 * (OpenBLAS + OpenMP) and on CUDA (cuBLAS, bf16 compute, fp32 master weights), plus the
 * optimizer math of the outer loop as plain functions over float arenas.
 *
 * Shape of the model (llm.c's GPT-2): token + learned position embeddings; L pre-LayerNorm
 * blocks (eps 1e-5) of causal multi-head attention (scale 1/sqrt(C/NH)) and a GELU MLP (tanh
 * approximation, 4C wide); a final LayerNorm; an LM head tied to the token embedding; mean
 * next-token cross-entropy over the B*T targets.
 *
 * Memory (DESIGN §2): parameters, gradients, AdamW m and AdamW v are each ONE contiguous float
 * arena of gt_gpt_arena_len() floats; tensors are views at the offsets gt_gpt_tensor_get()
 * reports. Inside the arena every tensor is stored in exactly the Hugging Face GPT-2 layout
 * (Conv1D weights as (in, out), row-major), in the order of the HF state dict, so checkpoint
 * I/O is one plain copy per tensor. The only gap: for presets with a padded vocabulary
 * (Vp > V) the Vp - V rows after wte's V*C elements are padding, kept at zero and never
 * written to a checkpoint.
 *
 * Determinism: the same inputs give bit-identical losses, gradients and parameters on every
 * run on the same machine. All reductions run in a fixed order; work is split into tasks
 * whose boundaries depend only on the shapes, so nothing depends on thread timing or on the
 * thread count (gt_kern_set_threads); tests check 1, 2 and 3 threads. Another CPU or
 * OPENBLAS_CORETYPE (other vector kernels) may differ in low-order bits: what sites must agree
 * on bit for bit goes through gt_kern_nesterov_update, which is exact everywhere.
 *
 * Tensor parallelism (CPU only): t ranks may split one model Megatron-style, each holding a
 * local arena of its heads' and hidden units' slices; communication comes in through a
 * callback (gt_gpt_tp_comm_t), so this module needs no MPI. See "Tensor parallelism" below.
 *
 * Device: a model lives on the CPU or on one CUDA GPU (gt_gpt_params_t.device). Both run the
 * same functions with the same arguments. The build defines GT_HAVE_CUDA (a PUBLIC compile
 * definition of the gt_kernels target) when the CUDA parts are compiled in; without it,
 * creating a CUDA model returns GT_ERR_UNSUPPORTED. Arena pointers of a CUDA model are device
 * pointers; gt_gpt_arena_read/_write copy to and from host memory for either device.
 */
#ifndef GT_KERNELS_H
#define GT_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "gt_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Model shape and presets ------------------------------------------------------------ */

typedef struct {
    size_t V;    /* vocabulary: logits and the rows of wte.weight in checkpoints */
    size_t Vp;   /* rows of wte in the arena, >= V (0 means V); padded rows stay zero */
    size_t maxT; /* context length: rows of wpe.weight */
    size_t L;    /* transformer blocks */
    size_t C;    /* channels (d_model) */
    size_t NH;   /* attention heads; C % NH == 0 */
} gt_gpt_config_t;

/* A named model with its default run settings (batch B, sequence T <= maxT). Presets:
 *   "tiny"      V=128, maxT=32, L=2, C=64, NH=4;           B=4,  T=32  (tests; fast on 1 core)
 *   "small"     V=256, maxT=128, L=4, C=256, NH=4;         B=16, T=128 (the CPU reference)
 *   "gpt2-124m" V=50257 (Vp=50304), maxT=1024, L=12, C=768, NH=12; B=8, T=1024 (GPUs) */
typedef struct {
    const char *name;
    gt_gpt_config_t model;
    size_t B;
    size_t T;
} gt_gpt_preset_t;

/* Looks a preset up by name. GT_ERR_NOT_FOUND (and a log line listing the names) if unknown. */
GT_API gt_status_t gt_gpt_preset_find(const char *name, gt_gpt_preset_t *preset_p);
/* The i-th preset's name, NULL past the end (for --help and error messages). */
GT_API const char *gt_gpt_preset_name(size_t i);

/* Checks a config and run shape: every field > 0, C % NH == 0, Vp == 0 or Vp >= V,
 * 0 < T <= maxT, B > 0, sizes that fit in memory arithmetic. Logs what is wrong.
 * Pass B = T = 1 to check the model alone. */
GT_API gt_status_t gt_gpt_config_check(const gt_gpt_config_t *cfg, size_t B, size_t T);

/* ---- Parameter tensors (Hugging Face GPT-2 names and layouts) ----------------------------- */

#define GT_GPT_TENSOR_NAME_MAX 48

typedef struct {
    char name[GT_GPT_TENSOR_NAME_MAX]; /* "wte.weight", "h.3.attn.c_attn.weight", ... */
    size_t offset;                     /* first element, in floats from the arena start */
    size_t numel;                      /* shape[0] * shape[1] (shape[1] = 1 when ndim == 1) */
    int ndim;                          /* 1 or 2 */
    size_t shape[2];                   /* HF shape, row-major */
    int decay;                         /* 1: AdamW weight decay applies (2-D tensors) */
} gt_gpt_tensor_t;

/* Number of parameter tensors: 2 + 12*L + 2. Order (= arena order):
 *   wte.weight (V, C)            wpe.weight (maxT, C)
 *   for i in 0..L-1:
 *     h.i.ln_1.weight (C)        h.i.ln_1.bias (C)
 *     h.i.attn.c_attn.weight (C, 3C)   h.i.attn.c_attn.bias (3C)    [q | k | v along 3C]
 *     h.i.attn.c_proj.weight (C, C)    h.i.attn.c_proj.bias (C)
 *     h.i.ln_2.weight (C)        h.i.ln_2.bias (C)
 *     h.i.mlp.c_fc.weight (C, 4C)      h.i.mlp.c_fc.bias (4C)
 *     h.i.mlp.c_proj.weight (4C, C)    h.i.mlp.c_proj.bias (C)
 *   ln_f.weight (C)              ln_f.bias (C)
 * Conv1D weights are (in, out): y = x W + b, exactly as stored in HF checkpoints. */
GT_API size_t gt_gpt_tensor_count(const gt_gpt_config_t *cfg);
/* Tensor `index` (< gt_gpt_tensor_count). GT_ERR_INVALID for a bad index or config. */
GT_API gt_status_t gt_gpt_tensor_get(const gt_gpt_config_t *cfg, size_t index,
                                     gt_gpt_tensor_t *tensor_p);
/* Finds a tensor by HF name; a leading "transformer." is ignored. GT_ERR_NOT_FOUND if none. */
GT_API gt_status_t gt_gpt_tensor_find(const gt_gpt_config_t *cfg, const char *name,
                                      gt_gpt_tensor_t *tensor_p);
/* Floats in each arena of the full model (includes the wte padding rows when Vp > V). 0 for a
 * bad config. A tensor-parallel rank's arenas are gt_gpt_local_len long. */
GT_API size_t gt_gpt_arena_len(const gt_gpt_config_t *cfg);
/* Number of real parameters (sum of the tensors' numel; excludes padding). */
GT_API size_t gt_gpt_param_count(const gt_gpt_config_t *cfg);
/* FLOPs of one training step (forward + backward) per token at sequence length T, counting
 * a multiply-add as 2: 6 * (matmul parameters incl. the LM head) + 12 * L * T * C (attention
 * scores and mixing, causal mask not discounted, as in the PaLM MFU convention). */
GT_API double gt_gpt_train_flops_per_token(const gt_gpt_config_t *cfg, size_t T);

/* ---- Threads and devices ---------------------------------------------------------------- */

/* Sets the CPU thread count of every CPU kernel (OpenMP parallel regions; OpenBLAS is called
 * single-threaded inside them, via openblas_set_num_threads(1), so there is one pool and no
 * spinning competition). Process-wide. n <= 0 picks the number of online CPUs. Results are
 * bit-identical run to run and for any n. Default before any call: 1. */
GT_API gt_status_t gt_kern_set_threads(int n);
GT_API int gt_kern_get_threads(void);
/* The OpenBLAS kernel set this process runs ("Prescott", "Haswell", "SkylakeX", ...: what
 * openblas_get_corename() says; OpenBLAS picks it when the library loads, from the CPU or from
 * OPENBLAS_CORETYPE). */
GT_API const char *gt_kern_blas_core(void);
/* A better OPENBLAS_CORETYPE for this CPU than the kernel set OpenBLAS picked, or NULL when
 * there is none. A Debian-packaged OpenBLAS (0.3.21 in Debian 12) that does not know a newer
 * CPU falls back to its SSE3 kernels ("Prescott"), 2-5x slower at sgemm than the AVX2
 * ("Haswell") or AVX-512 ("SkylakeX") ones the CPU can run; this names the best of those two
 * that the CPU (and the OS, for the AVX-512 state) supports, when the picked set is older.
 * Only a kernel set OpenBLAS is known to fall back to counts as older: a set this code does
 * not know is kept. OPENBLAS_CORETYPE must be set before OpenBLAS loads, so acting on the
 * advice means starting the program again (the geotrain CLI does so, see docs/kernels.md). */
GT_API const char *gt_kern_blas_core_advice(void);
/* Number of usable CUDA devices into *count_p (0 when the driver finds none).
 * GT_ERR_UNSUPPORTED when this build has no CUDA (GT_HAVE_CUDA undefined). */
GT_API gt_status_t gt_kern_cuda_device_count(int *count_p);

/* ---- The model --------------------------------------------------------------------------- */

typedef enum { GT_DEVICE_CPU = 0, GT_DEVICE_CUDA = 1 } gt_device_t;

/* Tensor parallelism (Megatron): how t ranks of one TP group talk. allreduce_sum replaces
 * buf[0..n) on every rank by the elementwise sum over the t ranks' buffers; it blocks, every
 * rank of the group calls it in the same order with the same n, and it must give
 * BIT-IDENTICAL results on all ranks (a fixed summation order, e.g. reduce to one rank then
 * broadcast): the replicated parameters stay equal across ranks only because every rank
 * computes them from the same bits. A non-OK status aborts the pass and is returned as is. */
typedef struct {
    void *ctx;
    gt_status_t (*allreduce_sum)(void *ctx, float *buf, size_t n);
} gt_gpt_tp_comm_t;

typedef struct {
    gt_gpt_config_t model;
    size_t B;           /* sequences per forward */
    size_t T;           /* tokens per sequence, <= model.maxT */
    gt_device_t device; /* GT_DEVICE_CPU or GT_DEVICE_CUDA */
    int cuda_device;    /* CUDA ordinal when device == GT_DEVICE_CUDA */
    /* Tensor parallelism (see "Tensor parallelism" below). tp_size 0 or 1: none. Otherwise
     * NH % tp_size == 0 and (4C) % tp_size == 0, tp_rank < tp_size, tp_comm.allreduce_sum set;
     * CPU only (a CUDA model with tp_size > 1 is GT_ERR_UNSUPPORTED). */
    size_t tp_size;
    size_t tp_rank;
    gt_gpt_tp_comm_t tp_comm;
    /* Optional (NULL: no calls): told during gt_gpt_backward each time the local gradient
     * range [offset, offset + n) is final for this backward, so a data-parallel all-reduce of
     * it can start while backward goes on. Order on the CPU: ln_f (the last 2C floats), then
     * block L-1, L-2, ..., 0 (each block's whole local range), then wte + wpe together (the
     * first (Vp + maxT) * C floats) last; the ranges of one backward cover the local arena
     * exactly once. On CUDA: one call with the whole arena after backward. Called on the
     * calling thread; it must not call back into this model. */
    void (*grad_ready)(void *ctx, size_t offset, size_t n);
    void *grad_ready_ctx;
} gt_gpt_params_t;

#define GT_GPT_PARAMS_INIT                                                         \
    {                                                                              \
        {0, 0, 0, 0, 0, 0}, 0, 0, GT_DEVICE_CPU, 0, 0, 0, {NULL, NULL}, NULL, NULL \
    }

typedef struct gt_gpt gt_gpt_t;

/* Allocates the four arenas (all zero; gt_gpt_local_len floats each) and the activations for
 * (B, T). Weights are zero until gt_gpt_init_weights or gt_gpt_arena_write fills them.
 * Checks the tensor-parallel fields (gt_gpt_tp_check). */
GT_API gt_status_t gt_gpt_create(const gt_gpt_params_t *params, gt_gpt_t **gpt_p);
GT_API void gt_gpt_destroy(gt_gpt_t *gpt); /* accepts NULL */
GT_API const gt_gpt_params_t *gt_gpt_get_params(const gt_gpt_t *gpt);
/* The attention a model runs: "cpu" (a CPU model), or on CUDA "flash" (the default: scores
 * never stored), "flash1" (the first flash kernels, kept for comparison) or "naive" (the
 * (B, NH, T, T) probabilities kept per layer). The environment variable
 * GT_CUDA_ATTN=flash|flash1|naive, read by gt_gpt_create, picks the CUDA one; both flash
 * versions need C/NH to be a multiple of 8 and at most 128 (unset: naive otherwise). NULL for
 * a bad model. */
GT_API const char *gt_gpt_attn_name(const gt_gpt_t *gpt);

/* GPT-2 initialisation, deterministic in `seed` and identical on CPU and CUDA: weights
 * normal(0, 0.02) (a counter-based generator: element i of tensor k depends only on seed, k
 * and i), the residual projections (attn.c_proj.weight, mlp.c_proj.weight) with std
 * 0.02/sqrt(2L), biases 0, LayerNorm gains 1, padding rows 0. Does not touch grads or m, v.
 * A tensor-parallel rank gets exactly the full model's values at its positions. */
GT_API gt_status_t gt_gpt_init_weights(gt_gpt_t *gpt, uint64_t seed);

typedef enum {
    GT_GPT_PARAMS = 0, /* the parameters (fp32 master weights on CUDA) */
    GT_GPT_GRADS = 1,  /* the gradients */
    GT_GPT_ADAM_M = 2, /* AdamW first moment */
    GT_GPT_ADAM_V = 3  /* AdamW second moment */
} gt_gpt_arena_t;

/* The arena's base pointer: host memory for a CPU model, device memory for a CUDA model.
 * Valid until gt_gpt_destroy. NULL for a bad argument. */
GT_API float *gt_gpt_arena(gt_gpt_t *gpt, gt_gpt_arena_t which);
/* Copies floats [offset, offset+n) of an arena to / from host memory (either device). After
 * writing GT_GPT_PARAMS of a CUDA model the bf16 working copy is refreshed automatically. */
GT_API gt_status_t gt_gpt_arena_read(gt_gpt_t *gpt, gt_gpt_arena_t which, size_t offset, size_t n,
                                     float *dst);
GT_API gt_status_t gt_gpt_arena_write(gt_gpt_t *gpt, gt_gpt_arena_t which, size_t offset, size_t n,
                                      const float *src);
/* On CPU pointers returned by gt_gpt_arena may be written directly. On CUDA, call this after
 * writing GT_GPT_PARAMS through the device pointer (e.g. after an NCCL broadcast) so the bf16
 * working copy follows. A no-op on CPU. */
GT_API gt_status_t gt_gpt_params_changed(gt_gpt_t *gpt);

/* Forward pass over B*T tokens (host arrays, row-major (B, T), each in [0, V)); targets[b,t]
 * is the token after inputs[b,t]. Writes the mean cross-entropy in nats to *loss_p and keeps
 * the activations for gt_gpt_backward. GT_ERR_INVALID for an out-of-range token (nothing
 * computed). */
GT_API gt_status_t gt_gpt_forward(gt_gpt_t *gpt, const int32_t *inputs, const int32_t *targets,
                                  float *loss_p);

/* Backward pass of the last gt_gpt_forward. ACCUMULATES: adds scale * d(mean loss)/d(params)
 * to the gradient arena (scale 1 for one batch; 1/k for each of k micro-batches). Call
 * gt_gpt_grad_zero before the first micro-batch of a step. One backward per forward (the
 * logits buffer becomes the logits' gradient in place): GT_ERR_INVALID without a preceding
 * forward. The weights must not change between the forward and its backward. */
GT_API gt_status_t gt_gpt_backward(gt_gpt_t *gpt, float scale);
/* Sets the gradient arena to zero. */
GT_API gt_status_t gt_gpt_grad_zero(gt_gpt_t *gpt);

/* Global L2 norm of the gradient arena, accumulated in double in a fixed order (independent
 * of the thread count). With tensor parallelism: the norm of the FULL model's gradient
 * (sharded squares summed over the TP group, replicated ones counted once), the same on
 * every rank; every rank of the group must call it (and gt_gpt_grad_clip) together. */
GT_API gt_status_t gt_gpt_grad_norm(gt_gpt_t *gpt, float *norm_p);
/* Multiplies the gradient arena by s (averaging across ranks, manual clipping). */
GT_API gt_status_t gt_gpt_grad_scale(gt_gpt_t *gpt, float s);
/* Global-norm clipping: computes the norm; when norm > max_norm, multiplies the gradients
 * by max_norm / (norm + 1e-6). Writes the norm before clipping to *norm_p (may be NULL).
 * max_norm <= 0 disables clipping (norm still computed). */
GT_API gt_status_t gt_gpt_grad_clip(gt_gpt_t *gpt, float max_norm, float *norm_p);

/* ---- Tensor parallelism (Megatron) -------------------------------------------------------
 *
 * With t = tp_size > 1, t ranks (threads or processes, one gt_gpt_t each) split every block
 * as in Megatron-LM. Rank j owns heads [j*NH/t, (j+1)*NH/t) and, with Cl = C/t:
 *   attn.c_attn.weight  the columns of its heads in q, k and v: local (C, 3Cl) = [q_j|k_j|v_j]
 *   attn.c_attn.bias    the same three pieces: (3Cl)
 *   attn.c_proj.weight  the rows of its heads' channels: rows [j*Cl, (j+1)*Cl): (Cl, C)
 *   mlp.c_fc.weight     columns [j*4Cl, (j+1)*4Cl): (C, 4Cl); mlp.c_fc.bias (4Cl)
 *   mlp.c_proj.weight   rows [j*4Cl, (j+1)*4Cl): (4Cl, C)
 * and replicates wte (all Vp rows), wpe, ln_1, ln_2, ln_f and both c_proj biases. The local
 * arena holds the same tensors in the same order as the full one, each reduced to this rank's
 * part (row-major in its local shape). Every rank runs the embeddings, LayerNorms, residuals
 * and the head on the whole (N, C) stream, so every rank gets the same loss.
 *
 * Communication per block: forward, one allreduce_sum of N*C floats after attn.c_proj (the
 * partial products; its bias is added after the sum) and one after mlp.c_proj; backward, one
 * of d(ln_2 out) after the c_fc backward and one of d(ln_1 out) after the c_attn backward
 * (Megatron's f/g). Gradients of replicated parameters come out identical on every rank with
 * no further traffic; sharded ones are this rank's part of the full gradient.
 * gt_gpt_grad_norm / _clip add one allreduce_sum of 1 float (the sharded sum of squares);
 * AdamW is elementwise and needs none. Results equal tp_size 1 up to float rounding (the
 * sums run in another order), not bit for bit.
 *
 * gt_gpt_tensor_get/_find and gt_gpt_arena_len keep describing the FULL model (checkpoints);
 * gt_gpt_arena, _read, _write and the grad_ready offsets use LOCAL offsets in
 * [0, gt_gpt_local_len). The segment map translates. */

/* One run of floats that is contiguous in both arenas: local [local_offset, +n) of this rank
 * is full [full_offset, +n). replicated: every rank holds the same values there. */
typedef struct {
    size_t full_offset;
    size_t local_offset;
    size_t n;
    int replicated;
} gt_gpt_segment_t;

/* Checks the TP fields of p (tp_size, tp_rank, divisibility, the callback, CPU only) and the
 * model config. Logs what is wrong; GT_ERR_CONFIG, or GT_ERR_UNSUPPORTED for CUDA with
 * tp_size > 1. gt_gpt_create runs it. */
GT_API gt_status_t gt_gpt_tp_check(const gt_gpt_params_t *p);
/* Floats in each of this rank's arenas (= gt_gpt_arena_len(&p->model) when tp_size <= 1);
 * per block 12C^2/t + 7C/t + 6C. 0 when gt_gpt_tp_check fails (nothing logged). */
GT_API size_t gt_gpt_local_len(const gt_gpt_params_t *p);
/* Number of segments of this rank's map: 1 for tp_size <= 1, otherwise at most
 * L*(4C + 8) + 1 (one per row piece of c_attn.weight and c_fc.weight: 36,961 for gpt2-124m;
 * a middle rank of an odd t may merge a few more). 0 when gt_gpt_tp_check fails. */
GT_API size_t gt_gpt_tp_segment_count(const gt_gpt_params_t *p);
/* Writes this rank's segments to segs[0..count), in increasing local (and full) offset, with
 * adjacent runs merged; they tile the local arena exactly. Copying every rank's sharded
 * segments and any one rank's replicated segments into a full arena rebuilds it exactly
 * (padding rows included). *n_p = count. GT_ERR_OVERFLOW when cap < count (query the count
 * first), GT_ERR_CONFIG when gt_gpt_tp_check fails. */
GT_API gt_status_t gt_gpt_tp_segments(const gt_gpt_params_t *p, gt_gpt_segment_t *segs, size_t cap,
                                      size_t *n_p);
/* Host-memory conveniences over the segment map. gather: writes this rank's part of local (a
 * gt_gpt_local_len array) into full (a gt_gpt_arena_len array); call it for every rank
 * (replicated parts are written each time, with equal values) to rebuild the full vector.
 * scatter: copies this rank's part out of a full vector into local. */
GT_API gt_status_t gt_gpt_tp_gather(const gt_gpt_params_t *p, const float *local, float *full);
GT_API gt_status_t gt_gpt_tp_scatter(const gt_gpt_params_t *p, const float *full, float *local);

/* ---- Optimizers ----------------------------------------------------------------------------- */

typedef struct {
    float lr;           /* learning rate of this step (see gt_kern_lr_at) */
    float beta1;        /* first-moment decay */
    float beta2;        /* second-moment decay */
    float eps;          /* added to sqrt(v_hat) */
    float weight_decay; /* decoupled: theta -= lr * wd * theta, on 2-D tensors only */
} gt_adamw_params_t;

#define GT_ADAMW_PARAMS_INIT            \
    {                                   \
        6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f \
    }

/* One AdamW update over n elements (CPU, host pointers):
 *   m = b1*m + (1-b1)*g ; v = b2*v + (1-b2)*g*g
 *   m_hat = m / (1 - b1^step) ; v_hat = v / (1 - b2^step)
 *   theta -= lr * (m_hat / (sqrt(v_hat) + eps) + (decay ? wd * theta : 0))
 * `step` is 1-based: the number of updates including this one. Elementwise, deterministic. */
GT_API gt_status_t gt_kern_adamw_update(float *theta, const float *g, float *m, float *v, size_t n,
                                        const gt_adamw_params_t *p, uint64_t step, int decay);
/* The same update applied to the whole model: decay on the tensors with decay = 1 (matrices
 * and embeddings), none on biases and LayerNorm gains. On CUDA it also refreshes the bf16
 * weights. */
GT_API gt_status_t gt_gpt_adamw_step(gt_gpt_t *gpt, const gt_adamw_params_t *p, uint64_t step);

typedef struct {
    float lr_max;          /* peak learning rate */
    float min_frac;        /* final lr = min_frac * lr_max */
    uint64_t warmup_steps; /* linear warmup length (0: none) */
    uint64_t total_steps;  /* end of the cosine decay; later steps stay at the minimum */
} gt_lr_schedule_t;

#define GT_LR_SCHEDULE_INIT     \
    {                           \
        6e-4f, 0.1f, 100, 10000 \
    }

/* Learning rate at 0-based step s:
 *   s < warmup:            lr_max * (s + 1) / warmup
 *   warmup <= s < total:   min + 0.5 * (1 + cos(pi * (s - warmup) / (total - warmup))) * (max -
 * min) s >= total:            min = min_frac * lr_max */
GT_API float gt_kern_lr_at(const gt_lr_schedule_t *sched, uint64_t step);

/* The outer (DiLoCo) Nesterov step over n floats, in index order, host memory:
 *   m[i] = mu * m[i] + g[i] ; theta[i] = theta[i] - lr * (g[i] + mu * m[i])
 * Compiled without floating-point contraction (no FMA), elementwise with no reduction, so the
 * same inputs give bit-identical outputs on every machine and thread count (DESIGN I1). */
GT_API gt_status_t gt_kern_nesterov_update(float *theta, float *m, const float *g, size_t n,
                                           float lr, float mu);

#ifdef __cplusplus
}
#endif

#endif /* GT_KERNELS_H */
