/* cmd_bench.c — `geotrain bench TARGET`: dispatch to the benchmark of one subsystem.
 * Benchmarks print JSON lines so scripts in bench/ can compare runs side by side. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

const gt_cli_cmd_t gt_cli_bench_targets[] = {
    {"outer", "overlapped vs synchronous DiLoCo vs sync-dp over the emulated WAN (JSON)",
     gt_bench_outer},
    {"chaos", "goodput of DiLoCo and sync-dp under one seeded fault schedule (JSON lines)",
     gt_bench_chaos},
    {"wan",
     "WAN transport throughput, plain and encrypted, vs ucx_perftest/fi_pingpong/iperf3 (JSON "
     "lines)",
     gt_bench_wan},
    {"kernels", "GPT forward+backward+AdamW tokens/s and GFLOP/s (JSON)", gt_bench_kernels},
    {"codec", "codec throughput and compression ratio (JSON lines)", gt_bench_codec},
    {"local", "in-site all-reduce busbw vs MPI/NCCL, tokens/s for 1 and R ranks (JSON lines)",
     gt_bench_local},
    {NULL, NULL, NULL},
};

static void bench_usage(FILE *out)
{
    fprintf(out, "usage: geotrain bench TARGET [options]\n\n"
                 "Benchmarks print one JSON object per line. Targets:\n");
    if (!gt_cli_bench_targets[0].name) fprintf(out, "  (none built yet)\n");
    gt_cli_print_table(gt_cli_bench_targets);
    fprintf(out, "\n`geotrain bench TARGET --help` describes a target's options.\n");
}

int gt_cmd_bench(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        bench_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (const gt_cli_cmd_t *t = gt_cli_bench_targets; t->name; t++)
        if (strcmp(t->name, argv[1]) == 0) return t->main(argc - 1, argv + 1);
    fprintf(stderr, "geotrain bench: unknown target '%s'\n", argv[1]);
    bench_usage(stderr);
    return 2;
}

int gt_cli_append_set(char *cmd, size_t cap, const char *kv, const char *who, const char *flag)
{
    if (strchr(kv, '\'')) {
        fprintf(stderr, "geotrain %s: quotes are not allowed in %s\n", who, flag);
        return -1;
    }
    size_t n = strlen(cmd);
    snprintf(cmd + n, cap - n, " --set '%s'", kv);
    return 0;
}
