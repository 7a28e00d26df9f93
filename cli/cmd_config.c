/* cmd_config.c — `geotrain config check FILE` and `geotrain config reference`. */
#include "cli.h"
#include "gt_topology.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: geotrain config check FILE [--set KEY=VALUE ...] [--quiet]\n"
            "       geotrain config reference\n\n"
            "check      validate FILE (a sites.yaml), apply GT_* environment variables and\n"
            "           --set overrides (in that order of precedence), and print the resolved\n"
            "           configuration with where each value came from. Exits 0 when valid;\n"
            "           otherwise prints every error as FILE:LINE:COLUMN: key '...': ... and\n"
            "           exits 1.\n"
            "reference  print every config key with its type, default, allowed values, GT_*\n"
            "           environment variable and meaning, as Markdown (docs/config.md).\n\n"
            "Options:\n"
            "  --set KEY=VALUE  override one key (repeatable), e.g. --set outer.lr=0.5,\n"
            "                   --set sites.eu.ranks=2\n"
            "  --no-env         ignore GT_* environment variables\n"
            "  -q, --quiet      print nothing when the file is valid\n"
            "  -h, --help       this text\n");
}

int gt_cmd_config(int argc, char **argv)
{
    static const struct option opts[] = {{"set", required_argument, NULL, 's'},
                                         {"no-env", no_argument, NULL, 'E'},
                                         {"quiet", no_argument, NULL, 'q'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *sets[256];
    size_t n_sets = 0;
    int quiet = 0, use_env = 1, c;
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0) {
        usage(stdout);
        return 0;
    }
    optind = 1;
    while ((c = getopt_long(argc - 1, argv + 1, "qh", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            if (n_sets == sizeof sets / sizeof sets[0]) {
                fprintf(stderr, "geotrain config: too many --set options\n");
                return 2;
            }
            sets[n_sets++] = optarg;
            break;
        case 'E': use_env = 0; break;
        case 'q': quiet = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    int nargs = argc - 1 - optind;
    char **args = argv + 1 + optind;
    if (strcmp(sub, "reference") == 0 && nargs == 0) {
        gt_topo_print_reference(stdout);
        return 0;
    }
    if (strcmp(sub, "check") != 0 || nargs != 1) {
        fprintf(stderr, "geotrain config: expected `check FILE` or `reference`\n");
        usage(stderr);
        return 2;
    }
    gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;
    lp.sets = sets;
    lp.n_sets = n_sets;
    lp.use_env = use_env;
    gt_topo_config_t *cfg = NULL;
    gt_status_t st = gt_topo_load(args[0], &lp, &cfg);
    if (st != GT_OK) {
        fprintf(stderr, "geotrain config: %s is not valid (%s)\n", args[0], gt_status_str(st));
        return 1;
    }
    if (!quiet) gt_topo_print(cfg, stdout);
    if (cfg->security.mode == GT_SECURITY_NONE)
        fprintf(stderr, "warning: security.mode is none: WAN traffic will be neither "
                        "authenticated nor encrypted\n");
    gt_topo_destroy(cfg);
    return 0;
}
