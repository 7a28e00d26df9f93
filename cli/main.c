/* main.c — `geotrain`: the command-line entry point. Dispatches to the command table. */
#include "cli.h"
#include "gt_base.h"

#include <stdio.h>
#include <string.h>

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
                 "every log line with the UTC time of day (ms), so several sites' logs merge.\n");
}

int main(int argc, char **argv)
{
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
