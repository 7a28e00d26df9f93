/* cmd_bench.c — `geotrain bench TARGET`: dispatch to the benchmark of one subsystem.
 * Benchmarks print JSON lines so scripts in bench/ can compare runs side by side. */
#include "cli.h"

#include <stdio.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
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

void gt_cli_argv_add(gt_cli_argv_t *a, const char *fmt, ...)
{
    char buf[8192];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char *copy = n >= 0 && (size_t)n < sizeof buf ? strdup(buf) : NULL;
    if (!copy || a->n == GT_CLI_ARGV_MAX) {
        free(copy);
        a->overflow = 1;
        return;
    }
    a->v[a->n++] = copy;
    a->v[a->n] = NULL;
}

void gt_cli_argv_words(gt_cli_argv_t *a, const char *words)
{
    for (const char *p = words; p && *p;) {
        p += strspn(p, " ");
        size_t len = strcspn(p, " ");
        if (len) gt_cli_argv_add(a, "%.*s", (int)len, p);
        p += len;
    }
}

void gt_cli_argv_free(gt_cli_argv_t *a)
{
    for (int i = 0; i < a->n; i++) free(a->v[i]);
    a->n = 0;
    a->v[0] = NULL;
}

int gt_cli_launch_logged(gt_cli_argv_t *a, const char *log_path)
{
    if (a->overflow || a->n == 0) return -1;
    fflush(NULL); /* or the child would write this process's buffered output a second time */
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0) _exit(126);
        close(fd);
        exit(gt_cmd_launch(a->n, a->v));
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
