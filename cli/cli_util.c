/* cli_util.c — small helpers shared by the commands. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

int gt_cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) return 0;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) return 1;
    }
    return 0;
}

void gt_cli_print_table(const gt_cli_cmd_t *table)
{
    for (const gt_cli_cmd_t *c = table; c->name; c++) printf("  %-10s %s\n", c->name, c->summary);
}
