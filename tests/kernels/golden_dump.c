/* golden_dump.c — writes a small GPT's parameters (HF layout), tokens, loss and gradients for
 * golden_torch.py, which recomputes them with an independent float64 PyTorch implementation.
 * usage: golden_dump DIR   (writes DIR/params.bin, grads.bin, tok.bin, meta.txt) */
#include "gt_kernels.h"

#include <stdio.h>
#include <stdlib.h>

static int write_file(const char *dir, const char *name, const void *p, size_t size, size_t n)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(p, size, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: golden_dump DIR\n");
        return 2;
    }
    if (gt_kern_set_threads(2) != GT_OK) return 1;
    gt_gpt_config_t cfg = {50, 64, 16, 2, 32, 4}; /* Vp > V: padding must stay invisible */
    gt_gpt_params_t p = GT_GPT_PARAMS_INIT;
    p.model = cfg, p.B = 20, p.T = 16; /* 320 rows: two row blocks of the fused passes */
    gt_gpt_t *g = NULL;
    if (gt_gpt_create(&p, &g) != GT_OK || gt_gpt_init_weights(g, 11) != GT_OK) return 1;
    size_t n = gt_gpt_arena_len(&cfg), N = p.B * p.T;
    float *w = gt_gpt_arena(g, GT_GPT_PARAMS);
    /* non-trivial biases and gains, padding left at zero */
    for (size_t k = 0; k < gt_gpt_tensor_count(&cfg); k++) {
        gt_gpt_tensor_t t;
        if (gt_gpt_tensor_get(&cfg, k, &t) != GT_OK) return 1;
        for (size_t i = 0; i < t.numel; i++)
            w[t.offset + i] +=
                0.05f * (float)((int)((t.offset + i) * 2654435761u % 2001) - 1000) / 1000.0f;
    }
    int32_t tok[321];
    for (size_t i = 0; i < N + 1; i++) tok[i] = (int32_t)((i * 17 + 5) % cfg.V);
    float loss;
    if (gt_gpt_forward(g, tok, tok + 1, &loss) != GT_OK || gt_gpt_grad_zero(g) != GT_OK ||
        gt_gpt_backward(g, 1.0f) != GT_OK)
        return 1;
    if (write_file(argv[1], "params.bin", w, sizeof(float), n) ||
        write_file(argv[1], "grads.bin", gt_gpt_arena(g, GT_GPT_GRADS), sizeof(float), n) ||
        write_file(argv[1], "tok.bin", tok, sizeof(int32_t), N + 1))
        return 1;
    char path[4096];
    snprintf(path, sizeof(path), "%s/meta.txt", argv[1]);
    FILE *f = fopen(path, "w");
    if (!f) return 1;
    fprintf(f, "config %zu %zu %zu %zu %zu %zu %zu\nloss %.9g\n", cfg.V, cfg.maxT, cfg.L, cfg.C,
            cfg.NH, p.B, p.T, loss);
    for (size_t k = 0; k < gt_gpt_tensor_count(&cfg); k++) {
        gt_gpt_tensor_t t;
        if (gt_gpt_tensor_get(&cfg, k, &t) != GT_OK) return 1;
        fprintf(f, "tensor %s %zu %zu %zu\n", t.name, t.offset, t.shape[0], t.shape[1]);
    }
    fclose(f);
    gt_gpt_destroy(g);
    return 0;
}
