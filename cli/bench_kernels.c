/* bench_kernels.c — `geotrain bench kernels`: training-step throughput of the GPT kernels.
 *
 * Times full training steps (forward + backward + grad-norm clipping + AdamW) on a fixed
 * random batch after warmup steps, and reports the median step as tokens/s, GFLOP/s (model
 * FLOPs by gt_gpt_train_flops_per_token) and, on CUDA, MFU against the H100's 989 TFLOP/s
 * dense bf16 peak. Beside wall time it reports the process CPU time per step (all threads),
 * whose tokens per CPU-second stay comparable when other jobs share the cores. A correctness
 * column rides along (STYLE: nccl-tests' #wrong): the loss must
 * stay finite and fall over the timed steps, or the exit code is 1. The attention path the
 * model ran ("attn": cpu, or flash / naive as GT_CUDA_ATTN picked) is reported, so the two
 * CUDA paths can be timed side by side.
 */
#include "cli.h"
#include "gt_kernels.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define H100_BF16_DENSE_FLOPS 989e12

static void usage(FILE *out)
{
    fprintf(out, "usage: geotrain bench kernels [options]\n\n"
                 "Times GPT training steps (forward + backward + clipping + AdamW) after warmup\n"
                 "and prints tokens/s, GFLOP/s and (CUDA) MFU vs 989 TFLOP/s bf16 dense.\n\n"
                 "Options:\n"
                 "  --preset NAME    tiny | small | gpt2-124m (default small)\n"
                 "  --device DEV     cpu | cuda (default cpu)\n"
                 "  --threads N      CPU threads (default 2; 0 = all online CPUs)\n"
                 "  --batch B        sequences per step (default: the preset's)\n"
                 "  --seq T          tokens per sequence (default: the preset's)\n"
                 "  --warmup N       untimed steps first (default 3)\n"
                 "  --steps N        timed steps; the median is reported (default 10)\n"
                 "  --seed N         weight initialisation seed (default 1)\n"
                 "  --json           one JSON object on stdout instead of a text line\n"
                 "  -h, --help       this text\n\n"
                 "On a machine shared with other jobs, set OMP_WAIT_POLICY=passive: OpenMP\n"
                 "threads that spin at barriers take the cores the working threads need.\n"
                 "On CUDA, GT_CUDA_ATTN=flash (default) or naive picks the attention kernels.\n"
                 "The line names OpenBLAS's kernel set (blas_core): geotrain picks SkylakeX or\n"
                 "Haswell itself when OPENBLAS_CORETYPE is unset and OpenBLAS fell back to older\n"
                 "ones; GT_BLAS_CORE_AUTO=0 keeps OpenBLAS's pick (docs/kernels.md).\n");
}

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int gt_bench_kernels(int argc, char **argv)
{
    static const struct option opts[] = {{"preset", required_argument, NULL, 'p'},
                                         {"device", required_argument, NULL, 'd'},
                                         {"threads", required_argument, NULL, 't'},
                                         {"batch", required_argument, NULL, 'B'},
                                         {"seq", required_argument, NULL, 'T'},
                                         {"warmup", required_argument, NULL, 'w'},
                                         {"steps", required_argument, NULL, 'n'},
                                         {"seed", required_argument, NULL, 's'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *preset = "small", *device = "cpu";
    size_t threads = 2, B = 0, T = 0, warmup = 3, steps = 10, seed = 1;
    int json = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'p': preset = optarg; break;
        case 'd': device = optarg; break;
        case 't': bad = gt_cli_parse_size(optarg, &threads); break;
        case 'B': bad = gt_cli_parse_size(optarg, &B); break;
        case 'T': bad = gt_cli_parse_size(optarg, &T); break;
        case 'w': bad = gt_cli_parse_size(optarg, &warmup); break;
        case 'n': bad = gt_cli_parse_size(optarg, &steps); break;
        case 's': bad = gt_cli_parse_size(optarg, &seed); break;
        case 'j': json = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (bad) {
            fprintf(stderr, "geotrain bench kernels: bad number '%s'\n", optarg);
            return 2;
        }
    }
    if (optind != argc || steps == 0 || steps > 100000 || threads > 1024) {
        usage(stderr);
        return 2;
    }
    gt_gpt_preset_t pr;
    if (gt_gpt_preset_find(preset, &pr) != GT_OK) return 2;
    gt_gpt_params_t p = GT_GPT_PARAMS_INIT;
    p.model = pr.model;
    p.B = B ? B : pr.B;
    p.T = T ? T : pr.T;
    if (strcmp(device, "cpu") == 0) {
        p.device = GT_DEVICE_CPU;
    } else if (strcmp(device, "cuda") == 0) {
        p.device = GT_DEVICE_CUDA;
    } else {
        fprintf(stderr, "geotrain bench kernels: unknown device '%s' (cpu or cuda)\n", device);
        return 2;
    }
    if (gt_kern_set_threads((int)threads) != GT_OK) return 2;

    gt_gpt_t *gpt = NULL;
    gt_status_t st = gt_gpt_create(&p, &gpt);
    if (st != GT_OK) {
        fprintf(stderr, "geotrain bench kernels: cannot create the model: %s\n", gt_status_str(st));
        return 1;
    }
    size_t N = p.B * p.T;
    int32_t *tok = malloc((N + 1) * sizeof(int32_t));
    double *ms = malloc(steps * sizeof(double)), *cpu_ms = malloc(steps * sizeof(double));
    int rc = 1;
    if (!tok || !ms || !cpu_ms) goto out;
    uint64_t s = 0x2545F4914F6CDD1Dull;
    for (size_t i = 0; i < N + 1; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (int32_t)((s >> 33) % p.model.V);
    }
    if ((st = gt_gpt_init_weights(gpt, seed)) != GT_OK) goto out;
    gt_adamw_params_t ap = GT_ADAMW_PARAMS_INIT;
    ap.lr = 1e-4f;
    float loss_first = 0, loss_last = 0, norm = 0;
    int wrong = 0;
    for (size_t i = 0; i < warmup + steps; i++) {
        float loss;
        uint64_t t0 = gt_time_ns();
        double c0 = cpu_seconds();
        if ((st = gt_gpt_forward(gpt, tok, tok + 1, &loss)) != GT_OK ||
            (st = gt_gpt_grad_zero(gpt)) != GT_OK || (st = gt_gpt_backward(gpt, 1.0f)) != GT_OK ||
            (st = gt_gpt_grad_clip(gpt, 1.0f, &norm)) != GT_OK ||
            (st = gt_gpt_adamw_step(gpt, &ap, i + 1)) != GT_OK)
            goto out;
        uint64_t t1 = gt_time_ns(); /* losses and norms are host values: the step has ended */
        double c1 = cpu_seconds();
        if (!isfinite(loss) || !isfinite(norm)) wrong++;
        if (i == warmup) loss_first = loss;
        loss_last = loss;
        if (i >= warmup) {
            ms[i - warmup] = (double)(t1 - t0) / 1e6;
            cpu_ms[i - warmup] = (c1 - c0) * 1e3;
        }
    }
    if (steps > 1 && !(loss_last < loss_first)) wrong++;
    double med = gt_cli_median(ms, steps), cpu_med = gt_cli_median(cpu_ms, steps);
    double tps = (double)N / (med / 1e3);
    double fpt = gt_gpt_train_flops_per_token(&p.model, p.T);
    double gflops = tps * fpt / 1e9;
    const char *core = getenv("OPENBLAS_CORETYPE");
    const char *attn = gt_gpt_attn_name(gpt);
    if (json) {
        printf(
            "{\"bench\":\"kernels\",\"preset\":\"%s\",\"device\":\"%s\",\"attn\":\"%s\","
            "\"threads\":%d,"
            "\"openblas_coretype\":%s%s%s,\"blas_core\":\"%s\",\"B\":%zu,\"T\":%zu,\"params\":%zu,"
            "\"tokens_per_step\":%zu,\"steps\":%zu,\"step_ms_median\":%.3f,"
            "\"step_ms_min\":%.3f,\"step_ms_max\":%.3f,\"tokens_per_s\":%.1f,"
            "\"cpu_ms_median\":%.3f,\"tokens_per_cpu_s\":%.1f,"
            "\"flops_per_token\":%.0f,\"gflops\":%.2f",
            pr.name, device, attn, gt_kern_get_threads(), core ? "\"" : "", core ? core : "null",
            core ? "\"" : "", gt_kern_blas_core(), p.B, p.T, gt_gpt_param_count(&p.model), N, steps,
            med, ms[0], ms[steps - 1], tps, cpu_med, (double)N / (cpu_med / 1e3), fpt, gflops);
        if (p.device == GT_DEVICE_CUDA)
            printf(",\"mfu\":%.4f,\"peak_tflops\":989", gflops * 1e9 / H100_BF16_DENSE_FLOPS);
        printf(",\"loss_first\":%.5f,\"loss_last\":%.5f,\"wrong\":%d}\n", loss_first, loss_last,
               wrong);
    } else {
        printf("kernels %s on %s (attention %s, %d threads, OpenBLAS %s kernels): B=%zu T=%zu "
               "params=%zu  step %.2f ms (median of %zu)  %.0f tokens/s  %.1f GFLOP/s",
               pr.name, device, attn, gt_kern_get_threads(), gt_kern_blas_core(), p.B, p.T,
               gt_gpt_param_count(&p.model), med, steps, tps, gflops);
        if (p.device == GT_DEVICE_CUDA)
            printf("  MFU %.1f%%", 100.0 * gflops * 1e9 / H100_BF16_DENSE_FLOPS);
        printf("  loss %.4f -> %.4f  wrong %d\n", loss_first, loss_last, wrong);
    }
    rc = wrong ? 1 : 0;
out:
    if (st != GT_OK) fprintf(stderr, "geotrain bench kernels: %s\n", gt_status_str(st));
    free(tok);
    free(ms);
    free(cpu_ms);
    gt_gpt_destroy(gpt);
    return rc;
}
