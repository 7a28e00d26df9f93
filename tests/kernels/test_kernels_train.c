/* test_kernels_train.c — determinism (same seed: identical loss bits and parameter bytes,
 * whatever the thread count) and a short training of `tiny` on a fixed random batch that must bring
 * the loss well down (memorisation), with warmup + cosine, clipping and AdamW. */
#include "gt_kernels.h"
#include "gt_test.h"

#include <stdint.h>

typedef struct {
    float losses[64];
    float *params;
} run_t;

/* Trains `steps` steps of the tiny preset (or, wide = 1, a wider model whose matmuls split
 * into several tasks) on one fixed batch; keeps losses and parameters. */
static int train_cfg(uint64_t seed, int steps, int threads, int wide, run_t *r)
{
    CHECK_EQ_INT(gt_kern_set_threads(threads), GT_OK);
    gt_gpt_preset_t pr;
    CHECK_EQ_INT(gt_gpt_preset_find("tiny", &pr), GT_OK);
    if (wide) {
        gt_gpt_config_t w = {128, 0, 32, 2, 128, 4};
        pr.model = w, pr.B = 10, pr.T = 30; /* N = 300: 2 row blocks, one partial */
    }
    gt_gpt_params_t p = GT_GPT_PARAMS_INIT;
    p.model = pr.model, p.B = pr.B, p.T = pr.T;
    gt_gpt_t *g = NULL;
    if (gt_gpt_create(&p, &g) != GT_OK) return -1;
    CHECK_EQ_INT(gt_gpt_init_weights(g, seed), GT_OK);
    size_t N = p.B * p.T;
    int32_t *tok = malloc((N + 1) * sizeof(int32_t));
    uint64_t s = 12345;
    for (size_t i = 0; i < N + 1; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (int32_t)((s >> 33) % pr.model.V);
    }
    gt_lr_schedule_t sched = {3e-3f, 0.1f, 5, (uint64_t)steps};
    gt_adamw_params_t ap = GT_ADAMW_PARAMS_INIT;
    for (int step = 0; step < steps; step++) {
        float norm;
        CHECK_EQ_INT(gt_gpt_forward(g, tok, tok + 1, &r->losses[step]), GT_OK);
        CHECK_EQ_INT(gt_gpt_grad_zero(g), GT_OK);
        CHECK_EQ_INT(gt_gpt_backward(g, 1.0f), GT_OK);
        CHECK_EQ_INT(gt_gpt_grad_clip(g, 1.0f, &norm), GT_OK);
        CHECK(isfinite(norm) && norm > 0);
        ap.lr = gt_kern_lr_at(&sched, (uint64_t)step);
        CHECK_EQ_INT(gt_gpt_adamw_step(g, &ap, (uint64_t)step + 1), GT_OK);
    }
    size_t n = gt_gpt_arena_len(&pr.model);
    r->params = malloc(n * sizeof(float));
    CHECK_EQ_INT(gt_gpt_arena_read(g, GT_GPT_PARAMS, 0, n, r->params), GT_OK);
    free(tok);
    gt_gpt_destroy(g);
    return (int)n;
}

static int train(uint64_t seed, int steps, int threads, run_t *r)
{
    return train_cfg(seed, steps, threads, 0, r);
}

int main(void)
{
    run_t a, b, c, d;
    int steps = 60;
    int n = train(1, steps, 2, &a);
    CHECK(n > 0);
    if (n <= 0) return GT_TEST_DONE();
    fprintf(stderr, "tiny: loss %.4f -> %.4f over %d steps\n", a.losses[0], a.losses[steps - 1],
            steps);
    CHECK_CLOSE(a.losses[0], log(128.0), 0.1, 0); /* uniform prediction at init */
    CHECK(a.losses[steps - 1] < a.losses[0] - 2.0f);
    /* the same seed and thread count: identical bits */
    train(1, 6, 2, &b);
    CHECK(memcmp(a.losses, b.losses, 6 * sizeof(float)) == 0);
    train(1, steps, 2, &c);
    CHECK(memcmp(a.losses, c.losses, (size_t)steps * sizeof(float)) == 0);
    CHECK(memcmp(a.params, c.params, (size_t)n * sizeof(float)) == 0);
    /* another seed: another model */
    train(2, 6, 2, &d);
    CHECK(memcmp(a.losses, d.losses, 6 * sizeof(float)) != 0);
    /* task boundaries depend only on shapes: 1, 2 or 3 threads give the same bits */
    run_t e, w1, w2, w3;
    train(1, 6, 1, &e);
    CHECK(memcmp(e.losses, b.losses, 6 * sizeof(float)) == 0);
    CHECK(memcmp(e.params, b.params, (size_t)n * sizeof(float)) == 0);
    int nw = train_cfg(5, 4, 1, 1, &w1);
    train_cfg(5, 4, 2, 1, &w2);
    train_cfg(5, 4, 3, 1, &w3);
    CHECK(memcmp(w1.losses, w2.losses, 4 * sizeof(float)) == 0);
    CHECK(memcmp(w1.losses, w3.losses, 4 * sizeof(float)) == 0);
    CHECK(nw > 0 && memcmp(w1.params, w2.params, (size_t)nw * sizeof(float)) == 0);
    CHECK(nw > 0 && memcmp(w1.params, w3.params, (size_t)nw * sizeof(float)) == 0);
    free(w1.params), free(w2.params), free(w3.params);
    free(a.params), free(b.params), free(c.params), free(d.params), free(e.params);
    return GT_TEST_DONE();
}
