/* gpt.c — the GPT model object: arenas, initialisation, and the CPU forward/backward
 * (llm.c's gpt2_forward / gpt2_backward) over the fused block passes of cpu_fused.c. A CUDA
 * model keeps the same object and dispatches to gpt_cuda.cu.
 *
 * Activations for (B, T) are one allocation (acts_t views). Backward reuses five scratch
 * buffers across layers; the logits buffer turns into probabilities and then into dlogits in
 * place.
 *
 * A tensor-parallel rank (tp > 1, layout in tp.c) is the same object over its local arenas:
 * the per-head and hidden-unit activations are Cl = C/tp wide, blocks run cpu_tp.c's passes,
 * and the gradient norm sums the sharded squares over the group. With tp = 1 every path is
 * the original one.
 */
#include "kernels_internal.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    float *encoded;                   /* (N, C) */
    float *ln1, *ln1_mean, *ln1_rstd; /* (L, N, C), (L, N) */
    float *qkv;                       /* (L, N, 3C) */
    float *att;                       /* (L, B, NH, T, T) */
    float *atty;                      /* (L, N, C) */
    float *res2;                      /* (L, N, C) residual after attention */
    float *ln2, *ln2_mean, *ln2_rstd; /* (L, N, C), (L, N) */
    float *fch, *fch_gelu;            /* (L, N, 4C) */
    float *res3;                      /* (L, N, C) residual after the MLP */
    float *lnf, *lnf_mean, *lnf_rstd; /* (N, C), (N) */
    float *probs;                     /* (N, V) logits -> probs -> dlogits */
    float *losses;                    /* (N) */
    float *dres, *dres2, *dbuf4, *dqkv, *dln, *dln1, *datty; /* backward scratch */
    int32_t *inputs, *targets; /* (N) copies of the last forward's tokens */
    float *mem;
    float *att_scratch;
    size_t att_scratch_len;
    gt_gpt_views_t pv, gv; /* views of params and grads */
} acts_t;

static gt_status_t cpu_acts_create(gt_gpt_t *gpt)
{
    const gt_gpt_config_t *m = &gpt->p.model;
    size_t B = gpt->p.B, T = gpt->p.T, N = B * T, C = m->C, L = m->L, V = m->V;
    size_t Cl = C / gpt->tp, NH = m->NH / gpt->tp; /* this rank's channels and heads */
    acts_t *a = calloc(1, sizeof(*a));
    if (!a) return GT_ERR_NOMEM;
    gpt->cpu = a;
    struct {
        float **p;
        size_t n;
    } sz[] = {
        {&a->encoded, N * C},
        {&a->ln1, L * N * C},
        {&a->ln1_mean, L * N},
        {&a->ln1_rstd, L * N},
        {&a->qkv, L * N * 3 * Cl},
        {&a->att, L * B * NH * T * T},
        {&a->atty, L * N * Cl},
        {&a->res2, L * N * C},
        {&a->ln2, L * N * C},
        {&a->ln2_mean, L * N},
        {&a->ln2_rstd, L * N},
        {&a->fch, L * N * 4 * Cl},
        {&a->fch_gelu, L * N * 4 * Cl},
        {&a->res3, L * N * C},
        {&a->lnf, N * C},
        {&a->lnf_mean, N},
        {&a->lnf_rstd, N},
        {&a->probs, N * V},
        {&a->losses, N},
        {&a->dres, N * C},
        {&a->dbuf4, N * 4 * Cl},
        {&a->dqkv, N * 3 * Cl},
        {&a->dln, N * C},
        {&a->datty, N * Cl},
        {&a->dres2, N * C},
        {&a->dln1, N * C},
    };
    size_t total = 0;
    for (size_t i = 0; i < sizeof(sz) / sizeof(sz[0]); i++) total += (sz[i].n + 15) & ~(size_t)15;
    a->mem = aligned_alloc(64, total * sizeof(float));
    a->inputs = calloc(2 * N, sizeof(int32_t));
    a->pv.layer = calloc(L, sizeof(gt_gpt_layer_views_t));
    a->gv.layer = calloc(L, sizeof(gt_gpt_layer_views_t));
    if (!a->mem || !a->inputs || !a->pv.layer || !a->gv.layer) return GT_ERR_NOMEM;
    memset(a->mem, 0, total * sizeof(float));
    a->targets = a->inputs + N;
    float *p = a->mem;
    for (size_t i = 0; i < sizeof(sz) / sizeof(sz[0]); i++) {
        *sz[i].p = p;
        p += (sz[i].n + 15) & ~(size_t)15;
    }
    gt_gpt_layout_tp(m, gpt->tp, gpt->arena[GT_GPT_PARAMS], &a->pv);
    gt_gpt_layout_tp(m, gpt->tp, gpt->arena[GT_GPT_GRADS], &a->gv);
    return GT_OK;
}

static void cpu_acts_destroy(acts_t *a)
{
    if (!a) return;
    free(a->mem);
    free(a->inputs);
    free(a->pv.layer);
    free(a->gv.layer);
    free(a->att_scratch);
    free(a);
}

/* Local runs alternating replicated / sharded (merging by local contiguity alone). */
typedef struct {
    gt_gpt_segment_t *r;
    size_t n, cap;
    int nomem;
} runs_t;

static void runs_emit(void *ctx, size_t k, size_t full, size_t local, size_t n, int repl)
{
    (void)k, (void)full;
    runs_t *r = ctx;
    if (r->n && r->r[r->n - 1].replicated == repl) {
        r->r[r->n - 1].n += n;
        return;
    }
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 64;
        gt_gpt_segment_t *g = realloc(r->r, cap * sizeof(*g));
        if (!g) {
            r->nomem = 1;
            return;
        }
        r->r = g, r->cap = cap;
    }
    r->r[r->n++] = (gt_gpt_segment_t){0, local, n, repl};
}

gt_status_t gt_gpt_create(const gt_gpt_params_t *params, gt_gpt_t **gpt_p)
{
    if (!params || !gpt_p) return GT_ERR_INVALID;
    gt_status_t st = gt_gpt_config_check(&params->model, params->B, params->T);
    if (st != GT_OK) return st;
    st = gt_gpt_tp_check(params);
    if (st != GT_OK) return st;
    if (params->device != GT_DEVICE_CPU && params->device != GT_DEVICE_CUDA) {
        GT_ERROR("kernels: unknown device %d", (int)params->device);
        return GT_ERR_INVALID;
    }
#ifndef GT_HAVE_CUDA
    if (params->device == GT_DEVICE_CUDA) {
        GT_ERROR("kernels: this build has no CUDA support (configure with a CUDA toolkit)");
        return GT_ERR_UNSUPPORTED;
    }
#endif
    gt_gpt_t *g = calloc(1, sizeof(*g));
    if (!g) return GT_ERR_NOMEM;
    g->magic = GT_GPT_MAGIC;
    g->p = *params;
    g->tp = gt_gpt_tp(params);
    g->n = gt_gpt_local_len(params);
    if (g->tp > 1) {
        runs_t r = {NULL, 0, 0, 0};
        gt_gpt_tp_walk(&params->model, g->tp, params->tp_rank, runs_emit, &r);
        g->runs = r.r, g->nruns = r.n;
        if (r.nomem) {
            st = GT_ERR_NOMEM;
            goto fail;
        }
    }
    if (params->device == GT_DEVICE_CPU) {
        for (int i = 0; i < 4; i++) {
            size_t bytes = ((g->n * sizeof(float) + 63) / 64) * 64;
            g->arena[i] = aligned_alloc(64, bytes);
            if (!g->arena[i]) {
                st = GT_ERR_NOMEM;
                goto fail;
            }
            memset(g->arena[i], 0, bytes);
        }
        st = cpu_acts_create(g);
    } else {
#ifdef GT_HAVE_CUDA
        st = gt_cuda_gpt_create(g);
#endif
    }
    if (st != GT_OK) goto fail;
    *gpt_p = g;
    return GT_OK;
fail:
    if (st == GT_ERR_NOMEM)
        GT_ERROR("kernels: out of memory for a model of %zu (local) parameters at B=%zu T=%zu",
                 g->n, params->B, params->T);
    gt_gpt_destroy(g);
    return st;
}

void gt_gpt_destroy(gt_gpt_t *gpt)
{
    if (!gpt) return;
    if (gpt->p.device == GT_DEVICE_CPU) {
        cpu_acts_destroy(gpt->cpu);
        for (int i = 0; i < 4; i++) free(gpt->arena[i]);
    } else {
#ifdef GT_HAVE_CUDA
        gt_cuda_gpt_destroy(gpt);
#endif
    }
    free(gpt->runs);
    gpt->magic = 0;
    free(gpt);
}

static int valid(const gt_gpt_t *gpt)
{
    return gpt && gpt->magic == GT_GPT_MAGIC;
}
static int is_cuda(const gt_gpt_t *gpt)
{
    return gpt->p.device == GT_DEVICE_CUDA;
}

const gt_gpt_params_t *gt_gpt_get_params(const gt_gpt_t *gpt)
{
    return valid(gpt) ? &gpt->p : NULL;
}

const char *gt_gpt_attn_name(const gt_gpt_t *gpt)
{
    if (!valid(gpt)) return NULL;
#ifdef GT_HAVE_CUDA
    if (gpt->p.device == GT_DEVICE_CUDA) return gt_cuda_attn_name(gpt);
#endif
    return "cpu";
}

float *gt_gpt_arena(gt_gpt_t *gpt, gt_gpt_arena_t which)
{
    if (!valid(gpt) || (int)which < 0 || (int)which > 3) return NULL;
    return gpt->arena[which];
}

static gt_status_t arena_copy(gt_gpt_t *gpt, gt_gpt_arena_t which, size_t offset, size_t n,
                              float *host, int to_arena)
{
    if (!valid(gpt) || (int)which < 0 || (int)which > 3 || (n && !host)) return GT_ERR_INVALID;
    if (offset > gpt->n || n > gpt->n - offset) {
        GT_ERROR("kernels: arena range [%zu, %zu) is outside the %zu floats", offset, offset + n,
                 gpt->n);
        return GT_ERR_INVALID;
    }
    if (!is_cuda(gpt)) {
        if (to_arena)
            memcpy(gpt->arena[which] + offset, host, n * sizeof(float));
        else
            memcpy(host, gpt->arena[which] + offset, n * sizeof(float));
        return GT_OK;
    }
#ifdef GT_HAVE_CUDA
    return gt_cuda_arena_copy(gpt, (int)which, offset, n, host, to_arena);
#else
    return GT_ERR_UNSUPPORTED;
#endif
}

gt_status_t gt_gpt_arena_read(gt_gpt_t *gpt, gt_gpt_arena_t which, size_t offset, size_t n,
                              float *dst)
{
    return arena_copy(gpt, which, offset, n, dst, 0);
}

gt_status_t gt_gpt_arena_write(gt_gpt_t *gpt, gt_gpt_arena_t which, size_t offset, size_t n,
                               const float *src)
{
    return arena_copy(gpt, which, offset, n, (float *)src, 1);
}

gt_status_t gt_gpt_params_changed(gt_gpt_t *gpt)
{
    if (!valid(gpt)) return GT_ERR_INVALID;
#ifdef GT_HAVE_CUDA
    if (is_cuda(gpt)) return gt_cuda_params_changed(gpt);
#endif
    return GT_OK;
}

/* ---- initialisation ---------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Standard normal for (seed, tensor k, element i): Box-Muller on one 64-bit hash. */
static float normal_at(uint64_t seed, size_t k, size_t i)
{
    uint64_t h = splitmix64(splitmix64(seed ^ splitmix64((uint64_t)k + 1)) + (uint64_t)i);
    double u1 = ((double)(h >> 40) + 1.0) / 16777217.0; /* (0, 1] from 24 bits */
    double u2 = (double)(h & 0xFFFFFF) / 16777216.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

/* A TP rank's init: each piece of the walk gets the full model's values at its full indices. */
typedef struct {
    float *host;
    uint64_t seed;
    const gt_gpt_config_t *m;
    float resid_std;
    size_t k;
    gt_gpt_tensor_t t;
    int bad;
} init_t;

static void init_emit(void *ctx, size_t k, size_t full, size_t local, size_t n, int repl)
{
    (void)repl;
    init_t *c = ctx;
    if (k != c->k) {
        if (gt_gpt_tensor_get(c->m, k, &c->t) != GT_OK) {
            c->bad = 1;
            return;
        }
        c->k = k;
    }
    const gt_gpt_tensor_t *t = &c->t;
    float *p = c->host + local;
    size_t i0 = full - t->offset, len = strlen(t->name);
    if (t->ndim == 1) {
        float v = (len > 7 && strcmp(t->name + len - 7, ".weight") == 0) ? 1.0f : 0.0f;
        for (size_t i = 0; i < n; i++) p[i] = v;
        return;
    }
    float std = strstr(t->name, "c_proj.weight") ? c->resid_std : 0.02f;
    size_t real = i0 < t->numel ? (n < t->numel - i0 ? n : t->numel - i0) : 0; /* wte padding */
    uint64_t seed = c->seed;
#pragma omp parallel for num_threads(gt_kern_get_threads()) schedule(static) if (real > 65536)
    for (size_t i = 0; i < real; i++) p[i] = std * normal_at(seed, k, i0 + i);
}

gt_status_t gt_gpt_init_weights(gt_gpt_t *gpt, uint64_t seed)
{
    if (!valid(gpt)) return GT_ERR_INVALID;
    if (gpt->tp > 1) { /* CPU only (gt_gpt_tp_check) */
        const gt_gpt_config_t *m = &gpt->p.model;
        memset(gpt->arena[GT_GPT_PARAMS], 0, gpt->n * sizeof(float));
        init_t c = {
            gpt->arena[GT_GPT_PARAMS], seed, m, 0.02f / sqrtf(2.0f * (float)m->L), (size_t)-1,
            {{0}, 0, 0, 0, {0, 0}, 0}, 0};
        gt_gpt_tp_walk(m, gpt->tp, gpt->p.tp_rank, init_emit, &c);
        return c.bad ? GT_ERR_INTERNAL : GT_OK;
    }
    const gt_gpt_config_t *m = &gpt->p.model;
    float *host = is_cuda(gpt) ? malloc(gpt->n * sizeof(float)) : gpt->arena[GT_GPT_PARAMS];
    if (!host) return GT_ERR_NOMEM;
    memset(host, 0, gpt->n * sizeof(float));
    size_t nt = gt_gpt_tensor_count(m);
    float resid_std = 0.02f / sqrtf(2.0f * (float)m->L);
    for (size_t k = 0; k < nt; k++) {
        gt_gpt_tensor_t t;
        if (gt_gpt_tensor_get(m, k, &t) != GT_OK) {
            if (is_cuda(gpt)) free(host);
            return GT_ERR_INTERNAL;
        }
        float *p = host + t.offset;
        size_t len = strlen(t.name);
        if (t.ndim == 1) {
            float v = (len > 7 && strcmp(t.name + len - 7, ".weight") == 0) ? 1.0f : 0.0f;
            for (size_t i = 0; i < t.numel; i++) p[i] = v;
            continue;
        }
        float std = strstr(t.name, "c_proj.weight") ? resid_std : 0.02f;
#pragma omp parallel for num_threads(gt_kern_get_threads()) schedule(static)
        for (size_t i = 0; i < t.numel; i++) p[i] = std * normal_at(seed, k, i);
    }
    gt_status_t st = GT_OK;
#ifdef GT_HAVE_CUDA
    if (is_cuda(gpt)) {
        st = gt_cuda_arena_copy(gpt, GT_GPT_PARAMS, 0, gpt->n, host, 1);
        free(host);
    }
#endif
    return st;
}

/* ---- forward / backward (CPU) -------------------------------------------------------------- */

static gt_status_t check_tokens(const gt_gpt_t *gpt, const int32_t *tok, const char *what)
{
    size_t N = gpt->p.B * gpt->p.T;
    for (size_t i = 0; i < N; i++) {
        if (tok[i] < 0 || (size_t)tok[i] >= gpt->p.model.V) {
            GT_ERROR("kernels: %s token %d at position %zu is outside the vocabulary [0, %zu)",
                     what, tok[i], i, gpt->p.model.V);
            return GT_ERR_INVALID;
        }
    }
    return GT_OK;
}

/* The activations and views of block l. */
static void block_views(gt_gpt_t *gpt, size_t l, gt_cpu_block_t *k)
{
    const gt_gpt_config_t *m = &gpt->p.model;
    acts_t *a = gpt->cpu;
    size_t B = gpt->p.B, T = gpt->p.T, N = B * T, C = m->C, NH = m->NH;
    size_t Cl = C / gpt->tp, NHl = NH / gpt->tp; /* this rank's widths (tp.c) */
    k->B = B, k->T = T, k->C = C, k->NH = NH;
    k->tp = gpt->tp;
    k->comm = &gpt->p.tp_comm;
    k->w = &a->pv.layer[l];
    k->g = &a->gv.layer[l];
    k->res = l == 0 ? a->encoded : a->res3 + (l - 1) * N * C;
    k->ln1 = a->ln1 + l * N * C;
    k->ln1_mean = a->ln1_mean + l * N;
    k->ln1_rstd = a->ln1_rstd + l * N;
    k->qkv = a->qkv + l * N * 3 * Cl;
    k->att = a->att + l * B * NHl * T * T;
    k->atty = a->atty + l * N * Cl;
    k->res2 = a->res2 + l * N * C;
    k->ln2 = a->ln2 + l * N * C;
    k->ln2_mean = a->ln2_mean + l * N;
    k->ln2_rstd = a->ln2_rstd + l * N;
    k->fch = a->fch + l * N * 4 * Cl;
    k->fchg = a->fch_gelu + l * N * 4 * Cl;
    k->res3 = a->res3 + l * N * C;
}

gt_status_t gt_gpt_forward(gt_gpt_t *gpt, const int32_t *inputs, const int32_t *targets,
                           float *loss_p)
{
    if (!valid(gpt) || !inputs || !targets || !loss_p) return GT_ERR_INVALID;
    gt_status_t st = check_tokens(gpt, inputs, "input");
    if (st == GT_OK) st = check_tokens(gpt, targets, "target");
    if (st != GT_OK) return st;
#ifdef GT_HAVE_CUDA
    if (is_cuda(gpt)) {
        st = gt_cuda_gpt_forward(gpt, inputs, targets, loss_p);
        gpt->have_fwd = st == GT_OK;
        return st;
    }
#endif
    const gt_gpt_config_t *m = &gpt->p.model;
    size_t B = gpt->p.B, T = gpt->p.T, N = B * T, C = m->C, V = m->V;
    acts_t *a = gpt->cpu;
    const gt_gpt_views_t *w = &a->pv;
    memcpy(a->inputs, inputs, N * sizeof(int32_t));
    memcpy(a->targets, targets, N * sizeof(int32_t));

    gpt->have_fwd = 0;
    gt_cpu_encoder_forward(a->encoded, inputs, w->wte, w->wpe, B, T, C);
    for (size_t l = 0; l < m->L; l++) {
        gt_cpu_block_t k;
        block_views(gpt, l, &k);
        if (gpt->tp == 1)
            gt_cpu_block_forward(&k);
        else if ((st = gt_cpu_block_forward_tp(&k)) != GT_OK)
            return st;
    }
    const float *last = a->res3 + (m->L - 1) * N * C;
    double loss = gt_cpu_head_forward(a->lnf, a->lnf_mean, a->lnf_rstd, a->probs, a->losses, last,
                                      w->lnfw, w->lnfb, w->wte, targets, N, C, V);
    gpt->have_fwd = 1;
    *loss_p = (float)loss;
    return GT_OK;
}

static gt_status_t ensure_att_scratch(acts_t *a, size_t T, size_t C, size_t NH)
{
    size_t need = gt_cpu_attention_scratch_len(T, C, NH);
    if (a->att_scratch_len >= need) return GT_OK;
    float *s = realloc(a->att_scratch, need * sizeof(float));
    if (!s) return GT_ERR_NOMEM;
    a->att_scratch = s;
    a->att_scratch_len = need;
    return GT_OK;
}

gt_status_t gt_gpt_backward(gt_gpt_t *gpt, float scale)
{
    if (!valid(gpt)) return GT_ERR_INVALID;
    if (!gpt->have_fwd) {
        GT_ERROR("kernels: gt_gpt_backward without a preceding gt_gpt_forward");
        return GT_ERR_INVALID;
    }
    gpt->have_fwd = 0; /* probs become dlogits in place: one backward per forward */
    void (*ready)(void *, size_t, size_t) = gpt->p.grad_ready;
    void *rctx = gpt->p.grad_ready_ctx;
#ifdef GT_HAVE_CUDA
    if (is_cuda(gpt)) {
        gt_status_t cst = gt_cuda_gpt_backward(gpt, scale);
        if (cst == GT_OK && ready) ready(rctx, 0, gpt->n);
        return cst;
    }
#endif
    const gt_gpt_config_t *m = &gpt->p.model;
    size_t B = gpt->p.B, T = gpt->p.T, N = B * T, C = m->C, NH = m->NH, V = m->V;
    acts_t *a = gpt->cpu;
    if (ensure_att_scratch(a, T, C, NH) != GT_OK) return GT_ERR_NOMEM;
    const gt_gpt_views_t *w = &a->pv, *g = &a->gv;

    const float *last = a->res3 + (m->L - 1) * N * C;
    gt_cpu_head_backward(a->dres, a->dln, g->wte, g->lnfw, g->lnfb, a->probs, a->lnf, last, w->lnfw,
                         a->lnf_mean, a->lnf_rstd, w->wte, a->targets, N, C, V, scale);
    /* local offsets for grad_ready: blocks after the embeddings, ln_f at the end */
    size_t emb = (gt_gpt_vp(m) + m->maxT) * C, lay = gt_gpt_layer_len_tp(m, gpt->tp);
    if (ready) ready(rctx, gpt->n - 2 * C, 2 * C);
    gt_cpu_block_scratch_t sc = {a->dres, a->dres2, a->dln,  a->datty,
                                 a->dln1, a->dbuf4, a->dqkv, a->att_scratch};
    for (size_t l = m->L; l-- > 0;) {
        gt_cpu_block_t k;
        block_views(gpt, l, &k);
        if (gpt->tp == 1)
            gt_cpu_block_backward(&k, &sc);
        else {
            gt_status_t st = gt_cpu_block_backward_tp(&k, &sc);
            if (st != GT_OK) return st;
        }
        if (ready) ready(rctx, emb + l * lay, lay);
    }
    gt_cpu_encoder_backward(g->wte, g->wpe, a->dres, a->inputs, B, T, C);
    if (ready) ready(rctx, 0, emb);
    return GT_OK;
}

gt_status_t gt_gpt_grad_zero(gt_gpt_t *gpt)
{
    if (!valid(gpt)) return GT_ERR_INVALID;
#ifdef GT_HAVE_CUDA
    if (is_cuda(gpt)) return gt_cuda_arena_zero(gpt, GT_GPT_GRADS);
#endif
    memset(gpt->arena[GT_GPT_GRADS], 0, gpt->n * sizeof(float));
    return GT_OK;
}

gt_status_t gt_gpt_grad_norm(gt_gpt_t *gpt, float *norm_p)
{
    if (!valid(gpt) || !norm_p) return GT_ERR_INVALID;
    double ss;
#ifdef GT_HAVE_CUDA
    if (is_cuda(gpt)) {
        gt_status_t st = gt_cuda_grad_sumsq(gpt, &ss);
        if (st != GT_OK) return st;
        *norm_p = (float)sqrt(ss);
        return GT_OK;
    }
#endif
    if (gpt->tp == 1) {
        ss = gt_cpu_sumsq(gpt->arena[GT_GPT_GRADS], gpt->n);
        *norm_p = (float)sqrt(ss);
        return GT_OK;
    }
    /* replicated runs once (every rank has the same bits), sharded runs summed over the group;
     * the sum travels as one float (relative rounding ~6e-8 on the norm's square) */
    double rep = 0, shard = 0;
    for (size_t i = 0; i < gpt->nruns; i++) {
        const gt_gpt_segment_t *r = &gpt->runs[i];
        double v = gt_cpu_sumsq(gpt->arena[GT_GPT_GRADS] + r->local_offset, r->n);
        if (r->replicated)
            rep += v;
        else
            shard += v;
    }
    float sh = (float)shard;
    const gt_gpt_tp_comm_t *cm = &gpt->p.tp_comm;
    gt_status_t st = cm->allreduce_sum(cm->ctx, &sh, 1);
    if (st != GT_OK) return st;
    *norm_p = (float)sqrt(rep + (double)sh);
    return GT_OK;
}

gt_status_t gt_gpt_grad_scale(gt_gpt_t *gpt, float s)
{
    if (!valid(gpt)) return GT_ERR_INVALID;
#ifdef GT_HAVE_CUDA
    if (is_cuda(gpt)) return gt_cuda_grad_scale(gpt, s);
#endif
    gt_cpu_scale(gpt->arena[GT_GPT_GRADS], gpt->n, s);
    return GT_OK;
}

gt_status_t gt_gpt_grad_clip(gt_gpt_t *gpt, float max_norm, float *norm_p)
{
    float norm;
    gt_status_t st = gt_gpt_grad_norm(gpt, &norm);
    if (st != GT_OK) return st;
    if (max_norm > 0 && norm > max_norm) st = gt_gpt_grad_scale(gpt, max_norm / (norm + 1e-6f));
    if (st == GT_OK && norm_p) *norm_p = norm;
    return st;
}

gt_status_t gt_gpt_adamw_step(gt_gpt_t *gpt, const gt_adamw_params_t *p, uint64_t step)
{
    if (!valid(gpt) || !p || step == 0) return GT_ERR_INVALID;
#ifdef GT_HAVE_CUDA
    if (is_cuda(gpt)) return gt_cuda_adamw_step(gpt, p, step);
#endif
    const gt_gpt_config_t *m = &gpt->p.model;
    size_t nt = gt_gpt_tensor_count(m);
    float **ar = gpt->arena;
    /* Runs of consecutive tensors with the same decay flag go in one call (fewer forks). */
    size_t start = 0;
    int decay = 1;
    for (size_t k = 0; k <= nt; k++) {
        gt_gpt_tensor_t t;
        size_t off = gpt->n;
        int d = -1;
        if (k < nt) {
            if (gt_gpt_tensor_get(m, k, &t) != GT_OK) return GT_ERR_INTERNAL;
            off = gpt->tp == 1 ? t.offset : gt_gpt_tensor_local_offset(m, gpt->tp, k);
            d = t.decay;
        }
        if (k == 0) {
            decay = d;
            continue;
        }
        if (d != decay) {
            gt_status_t st = gt_kern_adamw_update(ar[0] + start, ar[1] + start, ar[2] + start,
                                                  ar[3] + start, off - start, p, step, decay);
            if (st != GT_OK) return st;
            start = off;
            decay = d;
        }
    }
    return GT_OK;
}
