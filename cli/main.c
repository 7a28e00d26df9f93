/* main.c — `geotrain`: the command-line entry point. Dispatches to the command table. */
#include "cli.h"
#include "gt_base.h"
#include "gt_kernels.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef GT_VERSION_STRING
#define GT_VERSION_STRING "unknown"
#endif

static void usage(FILE *out)
{
    fprintf(out,
            "geotrain — train one language model across several datacenters (DiLoCo over a WAN)\n\n"
            "usage: geotrain COMMAND [options]\n"
            "       geotrain --help | --version\n\n"
            "Commands:\n");
    gt_cli_print_table(gt_cli_commands);
    fprintf(out, "\n`geotrain COMMAND --help` describes a command. Configuration reference: "
                 "docs/config.md.\n"
                 "Logging: GT_LOG_LEVEL=error|warn|info|debug (default info); GT_LOG_TIME=1 starts "
                 "every log line with the UTC time of day (ms), so several sites' logs merge.\n"
                 "CPU kernels: when OpenBLAS falls back to older kernels than the CPU runs and "
                 "OPENBLAS_CORETYPE is unset, geotrain restarts itself with SkylakeX or Haswell; "
                 "GT_BLAS_CORE_AUTO=0 keeps OpenBLAS's pick (docs/kernels.md).\n");
}

/* OpenBLAS picks its kernel set when it loads, from the CPU or OPENBLAS_CORETYPE; Debian's 0.3.21
 * does not know newer CPUs and falls back to its SSE3 kernels, 2-5x slower than the AVX2/AVX-512
 * ones the CPU runs. When OPENBLAS_CORETYPE is unset and there is a better set
 * (gt_kern_blas_core_advice), start this program again at once with it set, so the process and
 * every site or rank it starts run it. GT_BLAS_CORE_AUTO=0 keeps OpenBLAS's own pick; a set
 * OPENBLAS_CORETYPE is always kept. Returns only when nothing is to be done or the exec failed. */
static void blas_core_fixup(char **argv)
{
    const char *set = getenv("OPENBLAS_CORETYPE"), *mark = getenv("GT_BLAS_CORE_AUTO");
    if (mark && strcmp(mark, "0") == 0) return;
    if (mark && strstr(mark, "->")) { /* our own marker: this process was started again */
        if (gt_kern_blas_core_advice())
            GT_WARN("kernels: OpenBLAS runs its %s kernels although OPENBLAS_CORETYPE=%s (%s); "
                    "CPU training runs slower than it could",
                    gt_kern_blas_core(), set ? set : "(unset)", mark);
        return;
    }
    if (set && *set) return;
    const char *advice = gt_kern_blas_core_advice();
    if (!advice) return;
    char note[160];
    snprintf(note, sizeof note, "%s->%s", gt_kern_blas_core(), advice);
    if (setenv("OPENBLAS_CORETYPE", advice, 1) == 0 && setenv("GT_BLAS_CORE_AUTO", note, 1) == 0)
        execv("/proc/self/exe", argv);
    GT_WARN("kernels: cannot start again with OPENBLAS_CORETYPE=%s (%s); OpenBLAS runs its %s "
            "kernels",
            advice, strerror(errno), gt_kern_blas_core());
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv("GT_BLAS_CORE_AUTO");
}

int main(int argc, char **argv)
{
    blas_core_fixup(argv);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("geotrain %s\n", GT_VERSION_STRING);
        return 0;
    }
    for (const gt_cli_cmd_t *c = gt_cli_commands; c->name; c++)
        if (strcmp(c->name, argv[1]) == 0) return c->main(argc - 1, argv + 1);
    fprintf(stderr, "geotrain: unknown command '%s' (see `geotrain --help`)\n", argv[1]);
    return 2;
}
