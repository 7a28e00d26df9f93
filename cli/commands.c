/* commands.c — the table of `geotrain` commands. A command is listed here once it works. */
#include "cli.h"

#include <stddef.h>

const gt_cli_cmd_t gt_cli_commands[] = {
    {"launch", "run every site of a sites.yaml on this machine over the (emulated) WAN",
     gt_cmd_launch},
    {"report", "draw a run's loss, WAN bytes and utilization as PNG files", gt_cmd_report},
    {"config", "validate a sites.yaml and print the resolved configuration", gt_cmd_config},
    {"keygen", "make a site's X25519 key pair for the secure WAN channel", gt_cmd_keygen},
    {"certs", "make a CA and the certificates etcd's client and peer TLS take", gt_cmd_certs},
    {"sites", "retire a site from a running run for good (sites remove)", gt_cmd_sites},
    {"bench", "benchmarks (see `geotrain bench --help`)", gt_cmd_bench},
    {"plan", "size a multi-site run: H, codec, utilization and WAN bytes on the links it has",
     gt_cmd_plan},
    {"run", "train one site (one rank) from a sites.yaml; --resume continues a run", gt_cmd_run},
    {"grad", "one forward+backward of a safetensors GPT-2 on a token file (for checking the math)",
     gt_cmd_grad},
    {NULL, NULL, NULL},
};
