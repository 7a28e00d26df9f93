/* cmd_grad.c — `geotrain grad`: one forward and backward pass of a GPT-2 given as safetensors,
 * on the first B·T+1 tokens of an llm.c token file; writes the loss and every gradient.
 *
 * It exists so the model math can be checked against an independent implementation
 * (tests/golden/ compares it with PyTorch, on the CPU model or, with --device cuda, the GPU
 * one): everything it needs comes from files, nothing from a config.
 */
#include "cli.h"
#include "gt_kernels.h"
#include "gt_local.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: geotrain grad --params IN.safetensors --tokens IN.bin --batch B --seq T\n"
            "                     --heads NH --out OUT.safetensors [--threads N]\n"
            "                     [--device cpu|cuda]\n\n"
            "One forward and backward pass of a GPT-2, for checking the math against another\n"
            "implementation. The model's dimensions come from the tensor shapes (V and C from\n"
            "wte.weight, the context from wpe.weight, the layers from h.N.*); the head count is\n"
            "not in the file and is given with --heads. The parameters use Hugging Face GPT-2\n"
            "names and shapes (Conv1D weights as (in, out)), with or without a `transformer.`\n"
            "prefix; F32, BF16 and F16 are read. The batch is the first B*T+1 tokens of an llm.c\n"
            "token shard (256 int32 header: magic 20240520, version 1, count; uint16 tokens):\n"
            "inputs are tokens [0, B*T) as (B, T), targets tokens [1, B*T].\n\n"
            "OUT.safetensors holds `loss` (F32 scalar, mean cross-entropy in nats) and the\n"
            "gradient of the loss with respect to every parameter, F32, under the parameter's\n"
            "name and shape.\n\n"
            "Options:\n"
            "  --params FILE   GPT-2 parameters (safetensors)\n"
            "  --tokens FILE   llm.c token shard\n"
            "  --batch B       sequences (> 0)\n"
            "  --seq T         tokens per sequence (1 <= T <= context length)\n"
            "  --heads NH      attention heads (divides C)\n"
            "  --out FILE      where to write loss and gradients (replaced atomically)\n"
            "  --threads N     CPU threads (default 1)\n"
            "  --device DEV    cpu (default: float32) or cuda (the GPU model: bf16 matrix\n"
            "                  products with fp32 accumulation, fp32 master weights; GT_CUDA_ATTN\n"
            "                  picks its attention kernels, docs/kernels.md)\n"
            "  -h, --help      this text\n");
}

static int parse_size(const char *s, size_t *v)
{
    char *end = NULL;
    unsigned long long x = strtoull(s, &end, 10);
    if (!*s || *end || x == 0 || s[0] == '-') return -1;
    *v = (size_t)x;
    return 0;
}

int gt_cmd_grad(int argc, char **argv)
{
    static const struct option opts[] = {
        {"params", required_argument, NULL, 'p'},  {"tokens", required_argument, NULL, 't'},
        {"batch", required_argument, NULL, 'B'},   {"seq", required_argument, NULL, 'T'},
        {"heads", required_argument, NULL, 'H'},   {"out", required_argument, NULL, 'o'},
        {"threads", required_argument, NULL, 'j'}, {"device", required_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
    const char *params = NULL, *tokens = NULL, *out = NULL, *device = "cpu";
    size_t B = 0, T = 0, NH = 0, threads = 1;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'p': params = optarg; break;
        case 't': tokens = optarg; break;
        case 'o': out = optarg; break;
        case 'B': bad = parse_size(optarg, &B); break;
        case 'T': bad = parse_size(optarg, &T); break;
        case 'H': bad = parse_size(optarg, &NH); break;
        case 'j': bad = parse_size(optarg, &threads); break;
        case 'd': device = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (bad) {
            fprintf(stderr, "geotrain grad: '%s' is not a positive integer\n", optarg);
            return 2;
        }
    }
    if (!params || !tokens || !out || !B || !T || !NH || optind != argc) {
        fprintf(stderr, "geotrain grad: --params, --tokens, --batch, --seq, --heads and --out are "
                        "required\n");
        usage(stderr);
        return 2;
    }

    gt_gpt_params_t gp = GT_GPT_PARAMS_INIT;
    if (strcmp(device, "cuda") == 0) {
        gp.device = GT_DEVICE_CUDA;
    } else if (strcmp(device, "cpu") != 0) {
        fprintf(stderr, "geotrain grad: unknown device '%s' (cpu or cuda)\n", device);
        return 2;
    }
    gt_local_st_t *st = NULL;
    gt_gpt_t *gpt = NULL;
    int32_t *tok = NULL;
    gt_status_t s = gt_local_st_open(params, &st);
    float loss = 0;
    if (s == GT_OK) s = gt_local_gpt_config_from_st(st, NH, &gp.model);
    gp.B = B;
    gp.T = T;
    if (s == GT_OK) s = gt_gpt_config_check(&gp.model, B, T);
    if (s == GT_OK) s = gt_kern_set_threads((int)threads);
    if (s == GT_OK) s = gt_gpt_create(&gp, &gpt);
    if (s == GT_OK) s = gt_local_gpt_load(gpt, GT_GPT_PARAMS, st, "");
    if (s == GT_OK) {
        tok = malloc((B * T + 1) * sizeof *tok);
        if (!tok) s = GT_ERR_NOMEM;
    }
    if (s == GT_OK) s = gt_local_shard_read_prefix(tokens, B * T + 1, tok);
    if (s == GT_OK) s = gt_gpt_forward(gpt, tok, tok + 1, &loss);
    if (s == GT_OK) s = gt_gpt_grad_zero(gpt);
    if (s == GT_OK) s = gt_gpt_backward(gpt, 1.0f);
    if (s == GT_OK) {
        gt_local_st_entry_t e = {"loss", &loss, 0, {0}};
        gt_local_arena_ref_t grads = {GT_GPT_GRADS, ""};
        s = gt_local_gpt_save(gpt, &grads, 1, &e, 1, out);
    }
    if (s == GT_OK)
        fprintf(stderr,
                "geotrain grad: V=%zu maxT=%zu L=%zu C=%zu NH=%zu, B=%zu T=%zu on %s%s%s: loss "
                "%.6f; wrote %s\n",
                gp.model.V, gp.model.maxT, gp.model.L, gp.model.C, gp.model.NH, B, T, device,
                gp.device == GT_DEVICE_CUDA ? ", attention " : "",
                gp.device == GT_DEVICE_CUDA ? gt_gpt_attn_name(gpt) : "", loss, out);
    else
        fprintf(stderr, "geotrain grad: failed: %s\n", gt_status_str(s));
    free(tok);
    gt_gpt_destroy(gpt);
    gt_local_st_close(st);
    return s == GT_OK ? 0 : 1;
}
