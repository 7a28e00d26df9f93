/* test_kernels_optim.c — presets, the arena layout, AdamW against a hand-computed step, the
 * learning-rate schedule, gradient norm and clipping, and the outer Nesterov step. */
#include "gt_kernels.h"
#include "gt_test.h"

#include <stdint.h>

static void test_presets_and_layout(void)
{
    gt_gpt_preset_t pr;
    CHECK_EQ_INT(gt_gpt_preset_find("small", &pr), GT_OK);
    CHECK_EQ_INT(pr.model.V, 256);
    CHECK_EQ_INT(pr.model.maxT, 128);
    CHECK_EQ_INT(pr.model.L, 4);
    CHECK_EQ_INT(pr.model.C, 256);
    CHECK_EQ_INT(pr.model.NH, 4);
    CHECK_EQ_INT(pr.B, 16);
    CHECK_EQ_INT(pr.T, 128);
    CHECK_EQ_INT(gt_gpt_preset_find("nope", &pr), GT_ERR_NOT_FOUND);
    CHECK(gt_gpt_preset_name(0) != NULL);
    CHECK(gt_gpt_preset_name(3) == NULL);

    CHECK_EQ_INT(gt_gpt_preset_find("gpt2-124m", &pr), GT_OK);
    /* GPT-2 small has 124,439,808 parameters (wte 50257x768 tied) */
    CHECK_EQ_INT(gt_gpt_param_count(&pr.model), 124439808);
    CHECK_EQ_INT(gt_gpt_arena_len(&pr.model), 124439808 + (50304 - 50257) * 768);
    CHECK_EQ_INT(gt_gpt_tensor_count(&pr.model), 4 + 12 * 12);
    gt_gpt_tensor_t t;
    CHECK_EQ_INT(gt_gpt_tensor_get(&pr.model, 0, &t), GT_OK);
    CHECK(strcmp(t.name, "wte.weight") == 0);
    CHECK_EQ_INT(t.shape[0], 50257);
    CHECK_EQ_INT(t.shape[1], 768);
    CHECK_EQ_INT(t.offset, 0);
    CHECK_EQ_INT(gt_gpt_tensor_find(&pr.model, "transformer.wpe.weight", &t), GT_OK);
    CHECK_EQ_INT(t.offset, 50304 * 768);
    CHECK_EQ_INT(t.shape[0], 1024);
    CHECK_EQ_INT(gt_gpt_tensor_find(&pr.model, "h.0.attn.c_attn.weight", &t), GT_OK);
    CHECK_EQ_INT(t.shape[0], 768);
    CHECK_EQ_INT(t.shape[1], 3 * 768);
    CHECK_EQ_INT(t.decay, 1);
    CHECK_EQ_INT(t.offset, 50304 * 768 + 1024 * 768 + 2 * 768);
    CHECK_EQ_INT(gt_gpt_tensor_find(&pr.model, "h.11.mlp.c_proj.weight", &t), GT_OK);
    CHECK_EQ_INT(t.shape[0], 4 * 768);
    CHECK_EQ_INT(t.shape[1], 768);
    CHECK_EQ_INT(gt_gpt_tensor_find(&pr.model, "h.5.ln_2.bias", &t), GT_OK);
    CHECK_EQ_INT(t.ndim, 1);
    CHECK_EQ_INT(t.decay, 0);
    CHECK_EQ_INT(gt_gpt_tensor_find(&pr.model, "h.12.ln_2.bias", &t), GT_ERR_NOT_FOUND);
    /* tensors tile the arena in order, with only the wte padding as a gap */
    size_t n = gt_gpt_tensor_count(&pr.model), end = 0, named = 0;
    for (size_t k = 0; k < n; k++) {
        CHECK_EQ_INT(gt_gpt_tensor_get(&pr.model, k, &t), GT_OK);
        if (k == 1) end += (50304 - 50257) * 768;
        CHECK_EQ_INT(t.offset, end);
        end = t.offset + t.numel;
        named += t.numel;
    }
    CHECK_EQ_INT(end, gt_gpt_arena_len(&pr.model));
    CHECK_EQ_INT(named, gt_gpt_param_count(&pr.model));
    CHECK(strcmp(t.name, "ln_f.bias") == 0);
    /* FLOPs: 6N + attention, per token */
    double f = gt_gpt_train_flops_per_token(&pr.model, 1024);
    CHECK_CLOSE(f, 6.0 * (12.0 * 12 * 768 * 768 + 50257.0 * 768) + 12.0 * 12 * 1024 * 768, 0,
                1e-12);

    gt_gpt_config_t bad = {256, 0, 128, 4, 256, 3};
    CHECK_EQ_INT(gt_gpt_config_check(&bad, 1, 1), GT_ERR_CONFIG); /* 256 % 3 */
    bad.NH = 4;
    CHECK_EQ_INT(gt_gpt_config_check(&bad, 1, 129), GT_ERR_CONFIG); /* T > maxT */
    CHECK_EQ_INT(gt_gpt_config_check(&bad, 16, 128), GT_OK);
    bad.Vp = 100;
    CHECK_EQ_INT(gt_gpt_config_check(&bad, 1, 1), GT_ERR_CONFIG);
    CHECK_EQ_INT(gt_gpt_tensor_count(&bad), 0);
}

static void test_adamw(void)
{
    gt_adamw_params_t p = GT_ADAMW_PARAMS_INIT;
    p.lr = 0.1f;
    p.beta1 = 0.9f;
    p.beta2 = 0.99f;
    p.eps = 1e-8f;
    p.weight_decay = 0.5f;
    float th[2] = {1.0f, -2.0f}, g[2] = {0.5f, 0.25f}, m[2] = {0, 0}, v[2] = {0, 0};
    CHECK_EQ_INT(gt_kern_adamw_update(th, g, m, v, 2, &p, 1, 1), GT_OK);
    /* step 1: m = 0.05, v = 0.0025, m_hat = 0.5, v_hat = 0.25 -> update = 1 + wd*theta */
    CHECK_CLOSE(m[0], 0.05, 0, 1e-6);
    CHECK_CLOSE(v[0], 0.0025, 0, 1e-6);
    CHECK_CLOSE(th[0], 1.0 - 0.1 * (0.5 / (0.5 + 1e-8) + 0.5 * 1.0), 1e-7, 1e-6);
    CHECK_CLOSE(th[1], -2.0 - 0.1 * (0.25 / (0.25 + 1e-8) + 0.5 * -2.0), 1e-7, 1e-6);
    /* step 2 with a new gradient, no decay */
    float g2[2] = {-1.0f, 0.0f};
    double m0 = 0.9 * 0.05 + 0.1 * -1.0, v0 = 0.99 * 0.0025 + 0.01 * 1.0;
    double mh = m0 / (1 - 0.81), vh = v0 / (1 - 0.99 * 0.99);
    double th0 = th[0] - 0.1 * (mh / (sqrt(vh) + 1e-8));
    CHECK_EQ_INT(gt_kern_adamw_update(th, g2, m, v, 2, &p, 2, 0), GT_OK);
    CHECK_CLOSE(th[0], th0, 1e-7, 1e-6);
    CHECK_EQ_INT(gt_kern_adamw_update(th, g2, m, v, 2, &p, 0, 0), GT_ERR_INVALID);

    /* model step: no decay on biases and gains; gradient zero -> only decay moves weights */
    gt_gpt_params_t mp = GT_GPT_PARAMS_INIT;
    CHECK_EQ_INT(gt_gpt_preset_find("tiny", &(gt_gpt_preset_t){0}), GT_OK);
    gt_gpt_config_t cfg = {16, 0, 4, 1, 8, 2};
    mp.model = cfg;
    mp.B = 1;
    mp.T = 4;
    gt_gpt_t *gpt = NULL;
    CHECK_EQ_INT(gt_gpt_create(&mp, &gpt), GT_OK);
    if (!gpt) return;
    CHECK_EQ_INT(gt_gpt_init_weights(gpt, 1), GT_OK);
    float *w = gt_gpt_arena(gpt, GT_GPT_PARAMS);
    gt_gpt_tensor_t wt, ln;
    CHECK_EQ_INT(gt_gpt_tensor_find(&cfg, "h.0.mlp.c_fc.weight", &wt), GT_OK);
    CHECK_EQ_INT(gt_gpt_tensor_find(&cfg, "h.0.ln_1.weight", &ln), GT_OK);
    float w0 = w[wt.offset + 3];
    CHECK_EQ_INT(w[ln.offset], 1.0f);
    CHECK_EQ_INT(gt_gpt_adamw_step(gpt, &p, 1), GT_OK);
    CHECK_CLOSE(w[wt.offset + 3], w0 * (1.0f - 0.1f * 0.5f), 1e-9, 1e-6);
    CHECK_EQ_INT(w[ln.offset], 1.0f);
    gt_gpt_destroy(gpt);
}

static void test_lr(void)
{
    gt_lr_schedule_t s = {1e-3f, 0.1f, 10, 110};
    CHECK_CLOSE(gt_kern_lr_at(&s, 0), 1e-4, 1e-12, 1e-6);
    CHECK_CLOSE(gt_kern_lr_at(&s, 4), 5e-4, 1e-12, 1e-6);
    CHECK_CLOSE(gt_kern_lr_at(&s, 9), 1e-3, 1e-12, 1e-6);
    CHECK_CLOSE(gt_kern_lr_at(&s, 10), 1e-3, 1e-12, 1e-6);
    CHECK_CLOSE(gt_kern_lr_at(&s, 60), 1e-4 + 0.5 * 9e-4, 1e-12, 1e-6); /* halfway: cos = 0 */
    CHECK_CLOSE(gt_kern_lr_at(&s, 35), 1e-4 + 0.5 * (1 + cos(M_PI * 0.25)) * 9e-4, 1e-12, 1e-6);
    CHECK_CLOSE(gt_kern_lr_at(&s, 110), 1e-4, 1e-12, 1e-6);
    CHECK_CLOSE(gt_kern_lr_at(&s, 100000), 1e-4, 1e-12, 1e-6);
    gt_lr_schedule_t nw = {2e-3f, 0.0f, 0, 100};
    CHECK_CLOSE(gt_kern_lr_at(&nw, 0), 2e-3, 1e-12, 1e-6);
    CHECK_CLOSE(gt_kern_lr_at(&nw, 100), 0.0, 1e-12, 0);
}

static void test_nesterov(void)
{
    size_t n = 100003; /* not a multiple of any chunk */
    float *th = malloc(n * 4), *m = malloc(n * 4), *g = malloc(n * 4);
    float *th2 = malloc(n * 4), *m2 = malloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        th[i] = (float)sin((double)i), m[i] = (float)cos((double)i * 0.3), g[i] = 1.0f / (1 + i);
    }
    memcpy(th2, th, n * 4), memcpy(m2, m, n * 4);
    float lr = 0.7f, mu = 0.9f;
    CHECK_EQ_INT(gt_kern_set_threads(2), GT_OK);
    CHECK_EQ_INT(gt_kern_nesterov_update(th, m, g, n, lr, mu), GT_OK);
    /* reference: the same float operations, one at a time, in a volatile-forced order */
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        volatile float a = mu * m2[i];
        volatile float mi = a + g[i];
        volatile float b = mu * mi;
        volatile float u = g[i] + b;
        volatile float c = lr * u;
        volatile float t = th2[i] - c;
        if (memcmp((const void *)&mi, &m[i], 4) || memcmp((const void *)&t, &th[i], 4)) bad++;
    }
    CHECK_MSG(bad == 0, "nesterov: %d elements differ in their bits from the reference", bad);
    CHECK_CLOSE(m[5], 0.9 * cos(1.5) + 1.0 / 6, 1e-6, 1e-6);
    free(th), free(m), free(g), free(th2), free(m2);
}

static void test_grad_norm_clip(void)
{
    gt_gpt_params_t mp = GT_GPT_PARAMS_INIT;
    gt_gpt_config_t cfg = {16, 0, 4, 1, 8, 2};
    mp.model = cfg;
    mp.B = 1;
    mp.T = 4;
    gt_gpt_t *gpt = NULL;
    CHECK_EQ_INT(gt_gpt_create(&mp, &gpt), GT_OK);
    if (!gpt) return;
    size_t n = gt_gpt_arena_len(&cfg);
    float *g = gt_gpt_arena(gpt, GT_GPT_GRADS);
    double ss = 0;
    for (size_t i = 0; i < n; i++) g[i] = (float)((i % 7) - 3) * 0.5f, ss += g[i] * (double)g[i];
    float norm = 0;
    CHECK_EQ_INT(gt_gpt_grad_norm(gpt, &norm), GT_OK);
    CHECK_CLOSE(norm, sqrt(ss), 0, 1e-6);
    CHECK_EQ_INT(gt_gpt_grad_clip(gpt, 1.0f, &norm), GT_OK);
    CHECK_CLOSE(norm, sqrt(ss), 0, 1e-6);
    float after;
    CHECK_EQ_INT(gt_gpt_grad_norm(gpt, &after), GT_OK);
    CHECK_CLOSE(after, 1.0, 1e-5, 1e-5);
    CHECK_EQ_INT(gt_gpt_grad_clip(gpt, 10.0f, &norm), GT_OK); /* below the limit: unchanged */
    CHECK_EQ_INT(gt_gpt_grad_norm(gpt, &after), GT_OK);
    CHECK_CLOSE(after, 1.0, 1e-5, 1e-5);
    CHECK_EQ_INT(gt_gpt_grad_zero(gpt), GT_OK);
    CHECK_EQ_INT(gt_gpt_grad_norm(gpt, &after), GT_OK);
    CHECK_EQ_INT(after, 0);
    /* arena copies: bounds are checked */
    float buf[4] = {1, 2, 3, 4}, out[4];
    CHECK_EQ_INT(gt_gpt_arena_write(gpt, GT_GPT_ADAM_V, n - 4, 4, buf), GT_OK);
    CHECK_EQ_INT(gt_gpt_arena_read(gpt, GT_GPT_ADAM_V, n - 4, 4, out), GT_OK);
    CHECK(memcmp(buf, out, sizeof(buf)) == 0);
    CHECK_EQ_INT(gt_gpt_arena_read(gpt, GT_GPT_ADAM_V, n - 3, 4, out), GT_ERR_INVALID);
    CHECK_EQ_INT(gt_gpt_backward(gpt, 1.0f), GT_ERR_INVALID); /* no forward yet */
    gt_gpt_destroy(gpt);
    gt_gpt_destroy(NULL);
}

int main(void)
{
    test_presets_and_layout();
    test_adamw();
    test_lr();
    test_nesterov();
    test_grad_norm_clip();
    int count = -1;
    gt_status_t st = gt_kern_cuda_device_count(&count);
#ifdef GT_HAVE_CUDA
    CHECK(st == GT_OK || count == 0);
#else
    CHECK_EQ_INT(st, GT_ERR_UNSUPPORTED);
    CHECK_EQ_INT(count, 0);
    gt_gpt_params_t cp = GT_GPT_PARAMS_INIT;
    gt_gpt_config_t cfg = {16, 0, 4, 1, 8, 2};
    cp.model = cfg, cp.B = 1, cp.T = 4, cp.device = GT_DEVICE_CUDA;
    gt_gpt_t *g = NULL;
    CHECK_EQ_INT(gt_gpt_create(&cp, &g), GT_ERR_UNSUPPORTED);
#endif
    return GT_TEST_DONE();
}
