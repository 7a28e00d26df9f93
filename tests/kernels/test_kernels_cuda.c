/* test_kernels_cuda.c — the CUDA model against the CPU reference (label gpu; exit 77 when
 * this build has no CUDA or the machine has no GPU).
 *
 * Both models start from the same weights and see the same tokens. The CUDA side computes in
 * bf16 with fp32 accumulation and fp32 master weights, so comparisons use bf16-sized
 * tolerances, |a - b| <= atol + rtol * |ref|: the loss, every gradient tensor (elementwise,
 * with the tensor's RMS as the atol scale, and as a relative L2 error), the parameters after
 * an AdamW step, the gradient norm, and a few training steps.
 *
 * Every attention path (GT_CUDA_ATTN=naive, flash and flash1) runs the full case; both flash
 * versions (64-row tiles) also run with T past one tile and not a multiple of it, odd B*NH,
 * and head sizes 64 and 40 (padded to 48 inside the kernel), and must give bit-identical
 * gradients on a repeated backward (no atomics). GT_TEST_ATTN=naive|flash|flash1 runs one
 * path's cases only (for a compute-sanitizer run that fits a short GPU lease). */
#include "gt_kernels.h"
#include "gt_test.h"

#include <stdint.h>

static double rms(const float *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return sqrt(s / (double)(n ? n : 1));
}

static void compare_tensors(const gt_gpt_config_t *cfg, const float *gpu, const float *cpu,
                            double rel_l2, double rtol, const char *what)
{
    size_t nt = gt_gpt_tensor_count(cfg);
    for (size_t k = 0; k < nt; k++) {
        gt_gpt_tensor_t t;
        CHECK_EQ_INT(gt_gpt_tensor_get(cfg, k, &t), GT_OK);
        const float *a = gpu + t.offset, *b = cpu + t.offset;
        double scale = rms(b, t.numel), diff = 0;
        size_t bad = 0;
        for (size_t i = 0; i < t.numel; i++) {
            double d = (double)a[i] - b[i];
            diff += d * d;
            if (!(fabs(d) <= 0.1 * scale + rtol * fabs(b[i]))) bad++;
        }
        diff = sqrt(diff / (double)t.numel);
        CHECK_MSG(diff <= rel_l2 * scale + 1e-12, "%s %s: relative L2 error %.3g (rms %.3g)", what,
                  t.name, diff / scale, scale);
        CHECK_MSG(bad <= t.numel / 1000, "%s %s: %zu of %zu elements outside tolerance", what,
                  t.name, bad, t.numel);
    }
}

/* One CUDA model against the CPU reference for `steps` steps with attention path `attn`. */
static void run_case(const char *attn, gt_gpt_config_t cfg, size_t B, size_t T, int steps)
{
    /* GT_TEST_ATTN=PATH runs that path's cases only (a compute-sanitizer run of one path) */
    const char *only = getenv("GT_TEST_ATTN");
    if (only && *only && strcmp(only, attn) != 0) return;
    fprintf(stderr, "case %s: V=%zu C=%zu NH=%zu L=%zu B=%zu T=%zu\n", attn, cfg.V, cfg.C, cfg.NH,
            cfg.L, B, T);
    CHECK(setenv("GT_CUDA_ATTN", attn, 1) == 0);
    gt_gpt_params_t p = GT_GPT_PARAMS_INIT;
    p.model = cfg, p.B = B, p.T = T;
    gt_gpt_t *cpu = NULL, *gpu = NULL;
    CHECK_EQ_INT(gt_gpt_create(&p, &cpu), GT_OK);
    p.device = GT_DEVICE_CUDA;
    CHECK_EQ_INT(gt_gpt_create(&p, &gpu), GT_OK);
    if (!cpu || !gpu) {
        gt_gpt_destroy(cpu);
        gt_gpt_destroy(gpu);
        return;
    }
    CHECK(strcmp(gt_gpt_attn_name(gpu), attn) == 0);
    CHECK(strcmp(gt_gpt_attn_name(cpu), "cpu") == 0);
    CHECK_EQ_INT(gt_gpt_init_weights(cpu, 3), GT_OK);
    CHECK_EQ_INT(gt_gpt_init_weights(gpu, 3), GT_OK);
    size_t n = gt_gpt_arena_len(&cfg), N = p.B * p.T;
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    int32_t *tok = malloc((N + 1) * sizeof(int32_t));
    if (!a || !b || !tok) {
        CHECK(!"out of memory");
        goto out;
    }
    CHECK_EQ_INT(gt_gpt_arena_read(gpu, GT_GPT_PARAMS, 0, n, a), GT_OK);
    CHECK(memcmp(a, gt_gpt_arena(cpu, GT_GPT_PARAMS), n * sizeof(float)) == 0);

    uint64_t s = 99;
    for (size_t i = 0; i < N + 1; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (int32_t)((s >> 33) % cfg.V);
    }
    gt_adamw_params_t ap = GT_ADAMW_PARAMS_INIT;
    ap.lr = 1e-3f;
    for (int step = 1; step <= steps; step++) {
        float lc, lg, nc, ng;
        CHECK_EQ_INT(gt_gpt_forward(cpu, tok, tok + 1, &lc), GT_OK);
        CHECK_EQ_INT(gt_gpt_forward(gpu, tok, tok + 1, &lg), GT_OK);
        fprintf(stderr, "step %d: loss cpu %.6f cuda %.6f\n", step, lc, lg);
        CHECK_CLOSE(lg, lc, 1e-3, 1e-2);
        CHECK_EQ_INT(gt_gpt_grad_zero(cpu), GT_OK);
        CHECK_EQ_INT(gt_gpt_grad_zero(gpu), GT_OK);
        CHECK_EQ_INT(gt_gpt_backward(cpu, 1.0f), GT_OK);
        CHECK_EQ_INT(gt_gpt_backward(gpu, 1.0f), GT_OK);
        CHECK_EQ_INT(gt_gpt_arena_read(gpu, GT_GPT_GRADS, 0, n, a), GT_OK);
        compare_tensors(&cfg, a, gt_gpt_arena(cpu, GT_GPT_GRADS), 0.05, 0.1, "grad");
        for (size_t i = cfg.V * cfg.C; i < cfg.Vp * cfg.C; i++)
            if (a[i] != 0) {
                CHECK_MSG(0, "padding gradient %zu = %g", i, a[i]);
                break;
            }
        CHECK_EQ_INT(gt_gpt_grad_clip(cpu, 1.0f, &nc), GT_OK);
        CHECK_EQ_INT(gt_gpt_grad_clip(gpu, 1.0f, &ng), GT_OK);
        CHECK_CLOSE(ng, nc, 1e-6, 2e-2);
        /* the optimizer alone, on identical inputs: copy the CPU gradients to the GPU */
        CHECK_EQ_INT(gt_gpt_arena_write(gpu, GT_GPT_GRADS, 0, n, gt_gpt_arena(cpu, GT_GPT_GRADS)),
                     GT_OK);
        CHECK_EQ_INT(gt_gpt_adamw_step(cpu, &ap, (uint64_t)step), GT_OK);
        CHECK_EQ_INT(gt_gpt_adamw_step(gpu, &ap, (uint64_t)step), GT_OK);
        for (int w = 0; w < 3; w++) {
            gt_gpt_arena_t which =
                w == 0 ? GT_GPT_PARAMS : (w == 1 ? GT_GPT_ADAM_M : GT_GPT_ADAM_V);
            CHECK_EQ_INT(gt_gpt_arena_read(gpu, which, 0, n, a), GT_OK);
            const float *ref = gt_gpt_arena(cpu, which);
            size_t bad = 0;
            for (size_t i = 0; i < n; i++)
                if (!(fabs((double)a[i] - ref[i]) <= 1e-6 + 1e-4 * fabs(ref[i]))) bad++;
            CHECK_MSG(bad == 0, "adamw step %d arena %d: %zu elements differ", step, w, bad);
        }
        /* keep both models on exactly the same weights for the next step */
        CHECK_EQ_INT(gt_gpt_arena_read(gpu, GT_GPT_PARAMS, 0, n, b), GT_OK);
        memcpy(gt_gpt_arena(cpu, GT_GPT_PARAMS), b, n * sizeof(float));
    }
    /* a CUDA model is deterministic too: the same forward twice gives the same bits, and so
     * do two backward passes (each after its forward) */
    float l1, l2;
    CHECK_EQ_INT(gt_gpt_forward(gpu, tok, tok + 1, &l1), GT_OK);
    CHECK_EQ_INT(gt_gpt_grad_zero(gpu), GT_OK);
    CHECK_EQ_INT(gt_gpt_backward(gpu, 1.0f), GT_OK);
    CHECK_EQ_INT(gt_gpt_arena_read(gpu, GT_GPT_GRADS, 0, n, a), GT_OK);
    CHECK_EQ_INT(gt_gpt_forward(gpu, tok, tok + 1, &l2), GT_OK);
    CHECK_EQ_INT(gt_gpt_grad_zero(gpu), GT_OK);
    CHECK_EQ_INT(gt_gpt_backward(gpu, 1.0f), GT_OK);
    CHECK_EQ_INT(gt_gpt_arena_read(gpu, GT_GPT_GRADS, 0, n, b), GT_OK);
    CHECK(memcmp(&l1, &l2, sizeof(float)) == 0);
    CHECK_MSG(memcmp(a, b, n * sizeof(float)) == 0, "%s: two backward passes differ", attn);
out:
    free(a), free(b), free(tok);
    gt_gpt_destroy(cpu);
    gt_gpt_destroy(gpu);
}

int main(void)
{
    int count = 0;
    gt_status_t st = gt_kern_cuda_device_count(&count);
    if (st == GT_ERR_UNSUPPORTED) gt_test_skip("this build has no CUDA support");
    if (st != GT_OK || count == 0) gt_test_skip("no CUDA device");
    CHECK_EQ_INT(gt_kern_set_threads(0), GT_OK);

    /* tiny-like but wide enough for tensor-core tiles; Vp > V exercises the padding; hs 32 */
    gt_gpt_config_t cfg = {250, 256, 64, 2, 128, 4};
    run_case("naive", cfg, 4, 64, 3);
    /* flash (cuda_flash2.cu, the default) and flash1 (cuda_flash.cu) on the same shapes */
    static const char *const flash[] = {"flash", "flash1"};
    for (int f = 0; f < 2; f++) {
        run_case(flash[f], cfg, 4, 64, 3);
        /* T = 150 is two full 64-row tiles and a partial one; T = 50 a single partial */
        gt_gpt_config_t longer = {250, 256, 160, 2, 128, 4};
        run_case(flash[f], longer, 2, 150, 2);
        run_case(flash[f], cfg, 4, 50, 2);
        /* head size 64 (GPT-2's) with B*NH = 9, and head size 40 (zero-padded to 48) */
        gt_gpt_config_t hs64 = {250, 256, 160, 2, 192, 3};
        run_case(flash[f], hs64, 3, 100, 2);
        gt_gpt_config_t hs40 = {250, 256, 160, 2, 120, 3};
        run_case(flash[f], hs40, 2, 130, 2);
    }
    /* unset: flash where the head size allows it */
    CHECK(unsetenv("GT_CUDA_ATTN") == 0);
    {
        gt_gpt_params_t d = GT_GPT_PARAMS_INIT;
        d.model = cfg, d.B = 4, d.T = 64, d.device = GT_DEVICE_CUDA;
        gt_gpt_t *g = NULL;
        CHECK_EQ_INT(gt_gpt_create(&d, &g), GT_OK);
        CHECK(g && strcmp(gt_gpt_attn_name(g), "flash") == 0);
        gt_gpt_destroy(g);
    }
    /* a bad GT_CUDA_ATTN value is refused */
    CHECK(setenv("GT_CUDA_ATTN", "fast", 1) == 0);
    gt_gpt_params_t p = GT_GPT_PARAMS_INIT;
    p.model = cfg, p.B = 4, p.T = 64, p.device = GT_DEVICE_CUDA;
    gt_gpt_t *bad = NULL;
    CHECK_EQ_INT(gt_gpt_create(&p, &bad), GT_ERR_INVALID);
    CHECK(bad == NULL);
    return GT_TEST_DONE();
}
