/* test_kernels_grad.c — finite-difference checks of every CPU layer's backward and of the
 * whole model's gradient.
 *
 * Each layer is checked on a scalar objective J = sum(out * R) with a fixed random R: the
 * backward with dout = R must match central differences (J(x+h) - J(x-h)) / 2h, J summed in
 * double, for every input element. The whole model is checked per tensor along a random
 * direction d: (loss(theta + h d) - loss(theta - h d)) / 2h against <grad, d>.
 */
#include "gt_test.h"
#include "kernels_internal.h"

#include <stdint.h>

static uint64_t rng_state = 42;
static float frand(void) /* uniform in [-1, 1) */
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng_state >> 40) / 8388608.0 - 1.0);
}
static float *randv(size_t n, float scale)
{
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = scale * frand();
    return x;
}
static float *zerov(size_t n)
{
    return calloc(n, sizeof(float));
}

static double dotd(const float *a, const float *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * (double)b[i];
    return s;
}

/* A layer under test: recomputes out from its inputs. */
typedef void (*fwd_fn)(void *ctx);

/* Checks analytic gradient `grad` of J = <out, R> w.r.t. every element of x. */
static void fd_check(const char *what, fwd_fn fwd, void *ctx, float *x, size_t nx,
                     const float *grad, const float *out, const float *R, size_t nout, float h,
                     double atol, double rtol)
{
    int bad = 0;
    for (size_t i = 0; i < nx; i++) {
        float x0 = x[i];
        x[i] = x0 + h;
        fwd(ctx);
        double jp = dotd(out, R, nout);
        x[i] = x0 - h;
        fwd(ctx);
        double jm = dotd(out, R, nout);
        x[i] = x0;
        double num = (jp - jm) / (2.0 * h);
        if (!(fabs(grad[i] - num) <= atol + rtol * fabs(num))) {
            if (bad++ < 5)
                fprintf(stderr, "%s[%zu]: analytic %.6g numeric %.6g\n", what, i, grad[i], num);
        }
    }
    fwd(ctx);
    CHECK_MSG(bad == 0, "%s: %d of %zu gradient elements off", what, bad, nx);
}

/* ---- matmul ---- */
typedef struct {
    float *out, *inp, *w, *b;
    size_t N, IC, OC;
} mm_t;
static void mm_fwd(void *c)
{
    mm_t *m = c;
    gt_cpu_matmul_forward(m->out, m->inp, m->w, m->b, m->N, m->IC, m->OC);
}
static void test_matmul(void)
{
    mm_t m = {NULL, NULL, NULL, NULL, 6, 5, 7};
    m.inp = randv(m.N * m.IC, 1), m.w = randv(m.IC * m.OC, 1), m.b = randv(m.OC, 1);
    m.out = zerov(m.N * m.OC);
    float *R = randv(m.N * m.OC, 1), *dinp = randv(m.N * m.IC, 1);
    float *dw = zerov(m.IC * m.OC), *db = zerov(m.OC);
    mm_fwd(&m);
    gt_cpu_matmul_backward(dinp, dw, db, R, m.inp, m.w, m.N, m.IC, m.OC, 1);
    fd_check("matmul dinp", mm_fwd, &m, m.inp, m.N * m.IC, dinp, m.out, R, m.N * m.OC, 1e-2f, 1e-3,
             1e-3);
    fd_check("matmul dw", mm_fwd, &m, m.w, m.IC * m.OC, dw, m.out, R, m.N * m.OC, 1e-2f, 1e-3,
             1e-3);
    fd_check("matmul db", mm_fwd, &m, m.b, m.OC, db, m.out, R, m.N * m.OC, 1e-2f, 1e-3, 1e-3);
    /* accumulate mode adds to dinp */
    float *dinp2 = zerov(m.N * m.IC);
    for (size_t i = 0; i < m.N * m.IC; i++) dinp2[i] = 1.0f;
    float *dw2 = zerov(m.IC * m.OC);
    gt_cpu_matmul_backward(dinp2, dw2, NULL, R, m.inp, m.w, m.N, m.IC, m.OC, 0);
    CHECK_CLOSE(dinp2[3], dinp[3] + 1.0f, 1e-5, 1e-5);
    CHECK_CLOSE(dw2[4], dw[4], 1e-6, 1e-6);
    free(m.inp), free(m.w), free(m.b), free(m.out), free(R), free(dinp), free(dw), free(db);
    free(dinp2), free(dw2);
}

/* ---- layernorm ---- */
typedef struct {
    float *out, *mean, *rstd, *inp, *w, *b;
    size_t N, C;
} ln_t;
static void ln_fwd(void *c)
{
    ln_t *l = c;
    gt_cpu_layernorm_forward(l->out, l->mean, l->rstd, l->inp, l->w, l->b, l->N, l->C);
}
static void test_layernorm(void)
{
    ln_t l = {NULL, NULL, NULL, NULL, NULL, NULL, 4, 24};
    l.inp = randv(l.N * l.C, 2), l.w = randv(l.C, 1), l.b = randv(l.C, 1);
    l.out = zerov(l.N * l.C), l.mean = zerov(l.N), l.rstd = zerov(l.N);
    float *R = randv(l.N * l.C, 1), *dinp = zerov(l.N * l.C), *dw = zerov(l.C), *db = zerov(l.C);
    ln_fwd(&l);
    /* forward: each row normalised before the affine map */
    double s = 0;
    for (size_t c = 0; c < l.C; c++) s += (l.inp[c] - l.mean[0]) * l.rstd[0];
    CHECK_CLOSE(s, 0.0, 1e-4, 0);
    gt_cpu_layernorm_backward(dinp, dw, db, R, l.inp, l.w, l.mean, l.rstd, l.N, l.C);
    fd_check("layernorm dinp", ln_fwd, &l, l.inp, l.N * l.C, dinp, l.out, R, l.N * l.C, 1e-2f, 2e-3,
             1e-2);
    fd_check("layernorm dw", ln_fwd, &l, l.w, l.C, dw, l.out, R, l.N * l.C, 1e-2f, 1e-3, 1e-3);
    fd_check("layernorm db", ln_fwd, &l, l.b, l.C, db, l.out, R, l.N * l.C, 1e-2f, 1e-3, 1e-3);
    free(l.inp), free(l.w), free(l.b), free(l.out), free(l.mean), free(l.rstd), free(R);
    free(dinp), free(dw), free(db);
}

/* ---- gelu ---- */
typedef struct {
    float *out, *inp;
    size_t n;
} gelu_t;
static void gelu_fwd(void *c)
{
    gelu_t *g = c;
    gt_cpu_gelu_forward(g->out, g->inp, g->n);
}
static void test_gelu(void)
{
    gelu_t g = {NULL, NULL, 200};
    g.inp = randv(g.n, 5), g.out = zerov(g.n);
    float *R = randv(g.n, 1), *d = zerov(g.n);
    gelu_fwd(&g);
    for (size_t i = 0; i < g.n; i++) {
        double x = g.inp[i];
        double ref = 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
        CHECK_CLOSE(g.out[i], ref, 1e-6, 1e-5);
    }
    gt_cpu_gelu_backward(d, g.inp, R, g.n);
    fd_check("gelu", gelu_fwd, &g, g.inp, g.n, d, g.out, R, g.n, 1e-3f, 1e-3, 1e-2);
    free(g.inp), free(g.out), free(R), free(d);
}

/* ---- residual ---- */
typedef struct {
    float *out, *a, *b;
    size_t n;
} res_t;
static void res_fwd(void *c)
{
    res_t *r = c;
    gt_cpu_residual_forward(r->out, r->a, r->b, r->n);
}
static void test_residual(void)
{
    res_t r = {NULL, NULL, NULL, 37};
    r.a = randv(r.n, 1), r.b = randv(r.n, 1), r.out = zerov(r.n);
    float *R = randv(r.n, 1);
    res_fwd(&r);
    CHECK_CLOSE(r.out[5], r.a[5] + r.b[5], 0, 1e-7);
    /* The backward of a residual passes dout to both branches (the model adds R to both). */
    fd_check("residual da", res_fwd, &r, r.a, r.n, R, r.out, R, r.n, 1e-2f, 1e-4, 1e-3);
    fd_check("residual db", res_fwd, &r, r.b, r.n, R, r.out, R, r.n, 1e-2f, 1e-4, 1e-3);
    free(r.a), free(r.b), free(r.out), free(R);
}

/* ---- attention ---- */
typedef struct {
    float *out, *att, *qkv;
    size_t B, T, C, NH;
} att_t;
static void att_fwd(void *c)
{
    att_t *a = c;
    gt_cpu_attention_forward(a->out, a->att, a->qkv, a->B, a->T, a->C, a->NH);
}
static void test_attention(void)
{
    att_t a = {NULL, NULL, NULL, 2, 5, 8, 2};
    size_t N = a.B * a.T;
    a.qkv = randv(N * 3 * a.C, 1.5f), a.out = zerov(N * a.C);
    a.att = zerov(a.B * a.NH * a.T * a.T);
    float *R = randv(N * a.C, 1), *dqkv = randv(N * 3 * a.C, 1);
    float *scratch = zerov(gt_cpu_attention_scratch_len(a.T, a.C, a.NH));
    att_fwd(&a);
    /* causal: row 0 attends only to itself, probabilities sum to one */
    CHECK_CLOSE(a.att[0], 1.0, 1e-6, 0);
    CHECK_CLOSE(a.att[1], 0.0, 0, 0);
    double rs = 0;
    for (size_t j = 0; j < a.T; j++) rs += a.att[3 * a.T + j];
    CHECK_CLOSE(rs, 1.0, 1e-5, 0);
    /* first position's output is v of position 0 (head 0, channel 0) */
    CHECK_CLOSE(a.out[0], a.qkv[2 * a.C], 1e-6, 1e-6);
    gt_cpu_attention_backward(dqkv, R, a.qkv, a.att, scratch, a.B, a.T, a.C, a.NH);
    fd_check("attention dqkv", att_fwd, &a, a.qkv, N * 3 * a.C, dqkv, a.out, R, N * a.C, 1e-2f,
             1e-3, 1e-2);
    free(a.qkv), free(a.out), free(a.att), free(R), free(dqkv), free(scratch);
}

/* ---- softmax + cross-entropy ---- */
typedef struct {
    float *logits, *probs, *losses;
    int32_t *targets;
    size_t N, V;
    double loss;
} ce_t;
static void ce_fwd(void *c)
{
    ce_t *e = c;
    e->loss = gt_cpu_crossentropy_forward(e->probs, e->losses, e->logits, e->targets, e->N, e->V);
}
static void test_crossentropy(void)
{
    int32_t targets[4] = {0, 6, 3, 3};
    ce_t e = {NULL, NULL, NULL, targets, 4, 7, 0};
    e.logits = randv(e.N * e.V, 3), e.probs = zerov(e.N * e.V), e.losses = zerov(e.N);
    ce_fwd(&e);
    double ref = 0;
    for (size_t n = 0; n < e.N; n++) {
        double mx = -1e30, s = 0;
        for (size_t j = 0; j < e.V; j++) mx = fmax(mx, e.logits[n * e.V + j]);
        for (size_t j = 0; j < e.V; j++) s += exp(e.logits[n * e.V + j] - mx);
        ref += log(s) + mx - e.logits[n * e.V + targets[n]];
    }
    CHECK_CLOSE(e.loss, ref / e.N, 1e-6, 1e-6);
    float *dl = zerov(e.N * e.V);
    gt_cpu_crossentropy_backward(dl, e.probs, targets, e.N, e.V, 1.0f);
    /* J = mean loss: an objective with a single "output" of weight 1 */
    float one = 1.0f, lossf;
    int bad = 0;
    for (size_t i = 0; i < e.N * e.V; i++) {
        float x0 = e.logits[i], h = 1e-2f;
        e.logits[i] = x0 + h;
        ce_fwd(&e);
        double jp = e.loss;
        e.logits[i] = x0 - h;
        ce_fwd(&e);
        double jm = e.loss;
        e.logits[i] = x0;
        double num = (jp - jm) / (2 * h);
        if (!(fabs(dl[i] - num) <= 1e-4 + 1e-2 * fabs(num))) bad++;
    }
    (void)one, (void)lossf;
    CHECK_MSG(bad == 0, "crossentropy: %d gradient elements off", bad);
    /* scale multiplies the gradient; probs may alias dlogits */
    ce_fwd(&e);
    gt_cpu_crossentropy_backward(e.probs, e.probs, targets, e.N, e.V, 0.5f);
    CHECK_CLOSE(e.probs[9], 0.5f * dl[9], 1e-7, 1e-5);
    free(e.logits), free(e.probs), free(e.losses), free(dl);
}

/* ---- embeddings and the tied head ---- */
typedef struct {
    float *out, *wte, *wpe;
    int32_t *inp;
    size_t B, T, C;
} enc_t;
static void enc_fwd(void *c)
{
    enc_t *e = c;
    gt_cpu_encoder_forward(e->out, e->inp, e->wte, e->wpe, e->B, e->T, e->C);
}
typedef struct {
    float *logits, *x, *wte;
    size_t N, C, V;
} head_t;
static void head_fwd(void *c)
{
    head_t *h = c;
    gt_cpu_lmhead_forward(h->logits, h->x, h->wte, h->N, h->C, h->V);
}
static void test_embedding_and_head(void)
{
    int32_t inp[6] = {1, 3, 1, 0, 2, 1}; /* repeated token 1: accumulation must add */
    enc_t e = {NULL, NULL, NULL, inp, 2, 3, 5};
    size_t V = 4, N = 6;
    e.wte = randv(V * e.C, 1), e.wpe = randv(e.T * e.C, 1), e.out = zerov(N * e.C);
    float *R = randv(N * e.C, 1), *dwte = zerov(V * e.C), *dwpe = zerov(e.T * e.C);
    enc_fwd(&e);
    gt_cpu_encoder_backward(dwte, dwpe, R, inp, e.B, e.T, e.C);
    fd_check("embedding dwte", enc_fwd, &e, e.wte, V * e.C, dwte, e.out, R, N * e.C, 1e-2f, 1e-4,
             1e-3);
    fd_check("embedding dwpe", enc_fwd, &e, e.wpe, e.T * e.C, dwpe, e.out, R, N * e.C, 1e-2f, 1e-4,
             1e-3);
    head_t h = {NULL, NULL, NULL, 6, 5, 9};
    h.x = randv(h.N * h.C, 1), h.wte = randv(h.V * h.C, 1), h.logits = zerov(h.N * h.V);
    float *R2 = randv(h.N * h.V, 1), *dx = randv(h.N * h.C, 1), *dw = zerov(h.V * h.C);
    head_fwd(&h);
    gt_cpu_lmhead_backward(dx, dw, R2, h.x, h.wte, h.N, h.C, h.V);
    fd_check("lm head dx", head_fwd, &h, h.x, h.N * h.C, dx, h.logits, R2, h.N * h.V, 1e-2f, 1e-3,
             1e-3);
    fd_check("lm head dwte", head_fwd, &h, h.wte, h.V * h.C, dw, h.logits, R2, h.N * h.V, 1e-2f,
             1e-3, 1e-3);
    free(e.wte), free(e.wpe), free(e.out), free(R), free(dwte), free(dwpe);
    free(h.x), free(h.wte), free(h.logits), free(R2), free(dx), free(dw);
}

/* ---- the whole model ---- */
static void test_model(void)
{
    gt_gpt_params_t p = GT_GPT_PARAMS_INIT;
    gt_gpt_config_t cfg = {32, 40, 8, 2, 16, 2}; /* Vp > V: padding rows must stay inert */
    p.model = cfg;
    p.B = 2;
    p.T = 8;
    gt_gpt_t *g = NULL;
    CHECK_EQ_INT(gt_gpt_create(&p, &g), GT_OK);
    if (!g) return;
    CHECK_EQ_INT(gt_gpt_init_weights(g, 7), GT_OK);
    float *theta = gt_gpt_arena(g, GT_GPT_PARAMS), *grad = gt_gpt_arena(g, GT_GPT_GRADS);
    size_t n = gt_gpt_arena_len(&cfg);
    /* Larger matrices than the 0.02 init (std 0.1, gains 1) so every gradient is well above
     * float noise while the loss stays smooth at the step size h. */
    size_t ntens = gt_gpt_tensor_count(&cfg);
    for (size_t k = 0; k < ntens; k++) {
        gt_gpt_tensor_t t;
        CHECK_EQ_INT(gt_gpt_tensor_get(&cfg, k, &t), GT_OK);
        for (size_t i = 0; t.ndim == 2 && i < t.numel; i++) theta[t.offset + i] *= 5.0f;
        for (size_t i = 0; t.ndim == 1 && i < t.numel; i++) theta[t.offset + i] += 0.1f * frand();
    }
    int32_t inp[16], tgt[16];
    for (int i = 0; i < 16; i++) inp[i] = (i * 7 + 3) % 32, tgt[i] = (i * 5 + 1) % 32;
    float loss;
    CHECK_EQ_INT(gt_gpt_forward(g, inp, tgt, &loss), GT_OK);
    CHECK(loss > 0 && isfinite(loss));
    CHECK_EQ_INT(gt_gpt_grad_zero(g), GT_OK);
    CHECK_EQ_INT(gt_gpt_backward(g, 1.0f), GT_OK);
    CHECK_EQ_INT(gt_gpt_backward(g, 1.0f), GT_ERR_INVALID); /* one backward per forward */
    for (size_t i = cfg.V * cfg.C; i < cfg.Vp * cfg.C; i++)
        if (grad[i] != 0) {
            CHECK_MSG(0, "padding row gradient %zu is %g", i, grad[i]);
            break;
        }
    size_t nt = gt_gpt_tensor_count(&cfg);
    for (size_t k = 0; k < nt; k++) {
        gt_gpt_tensor_t t;
        CHECK_EQ_INT(gt_gpt_tensor_get(&cfg, k, &t), GT_OK);
        float *d = randv(t.numel, 1);
        double an = dotd(grad + t.offset, d, t.numel);
        double h = 2e-3;
        float *save = malloc(t.numel * sizeof(float));
        memcpy(save, theta + t.offset, t.numel * sizeof(float));
        float lp, lm;
        for (size_t i = 0; i < t.numel; i++) theta[t.offset + i] = save[i] + (float)h * d[i];
        CHECK_EQ_INT(gt_gpt_forward(g, inp, tgt, &lp), GT_OK);
        for (size_t i = 0; i < t.numel; i++) theta[t.offset + i] = save[i] - (float)h * d[i];
        CHECK_EQ_INT(gt_gpt_forward(g, inp, tgt, &lm), GT_OK);
        memcpy(theta + t.offset, save, t.numel * sizeof(float));
        double num = ((double)lp - (double)lm) / (2 * h);
        CHECK_MSG(fabs(an - num) <= 2e-3 + 3e-2 * fabs(num),
                  "model gradient of %s along a random direction: analytic %.6g numeric %.6g",
                  t.name, an, num);
        free(d), free(save);
    }
    /* scale and accumulation: a second forward/backward with scale 0.5 adds half again */
    float *g1 = malloc(n * sizeof(float));
    memcpy(g1, grad, n * sizeof(float));
    CHECK_EQ_INT(gt_gpt_forward(g, inp, tgt, &loss), GT_OK);
    CHECK_EQ_INT(gt_gpt_backward(g, 0.5f), GT_OK);
    CHECK_CLOSE(grad[n / 2], 1.5 * g1[n / 2], 1e-7, 1e-4);
    CHECK_CLOSE(grad[3], 1.5 * g1[3], 1e-7, 1e-4);
    /* out-of-range tokens are rejected */
    inp[4] = 32;
    CHECK_EQ_INT(gt_gpt_forward(g, inp, tgt, &loss), GT_ERR_INVALID);
    free(g1);
    gt_gpt_destroy(g);
}

int main(void)
{
    CHECK_EQ_INT(gt_kern_set_threads(2), GT_OK);
    test_matmul();
    test_layernorm();
    test_gelu();
    test_residual();
    test_attention();
    test_crossentropy();
    test_embedding_and_head();
    test_model();
    CHECK_EQ_INT(gt_kern_set_threads(1), GT_OK);
    test_model(); /* same checks single-threaded */
    return GT_TEST_DONE();
}
