/* cli.h — the geotrain command-line front end (internal to cli/).
 *
 * Each command is a function `int main(int argc, char **argv)` where argv[0] is the command
 * name; it returns a process exit code. The tables in commands.c and cmd_bench.c list them;
 * `--help` prints only what is listed, so a command appears there once it works.
 */
#ifndef GT_CLI_H
#define GT_CLI_H

#include <stddef.h>

typedef int (*gt_cli_main_fn)(int argc, char **argv);

typedef struct {
    const char *name;
    const char *summary; /* one line for `geotrain --help` */
    gt_cli_main_fn main;
} gt_cli_cmd_t;

extern const gt_cli_cmd_t gt_cli_commands[];      /* NULL-name terminated */
extern const gt_cli_cmd_t gt_cli_bench_targets[]; /* NULL-name terminated */

/* Appends ` --set 'KV'` to the shell command line cmd[cap] (bench commands pass their --set
 * flags on to the launches they run). 0, or -1 with a message naming `who` and `flag` when kv
 * holds a quote (it could not be passed on safely). */
int gt_cli_append_set(char *cmd, size_t cap, const char *kv, const char *who, const char *flag);

/* Commands (one file each: cmd_<name>.c). */
int gt_cmd_config(int argc, char **argv);
int gt_cmd_keygen(int argc, char **argv);
int gt_cmd_certs(int argc, char **argv);
int gt_cmd_bench(int argc, char **argv);
int gt_cmd_launch(int argc, char **argv);
int gt_cmd_report(int argc, char **argv);
int gt_cmd_run(int argc, char **argv);
int gt_cmd_grad(int argc, char **argv);
int gt_cmd_plan(int argc, char **argv);

/* Benchmarks, `geotrain bench <target>` (one file each: bench_<target>.c). */
int gt_bench_outer(int argc, char **argv);
int gt_bench_outer_scale(int argc, char **argv); /* bench_scale.c: `bench outer --params N` */
int gt_bench_chaos(int argc, char **argv);
int gt_bench_wan(int argc, char **argv);
int gt_bench_kernels(int argc, char **argv);
int gt_bench_codec(int argc, char **argv);
int gt_bench_local(int argc, char **argv);

/* Shared helpers (cli_util.c). */
/* True when argv has -h or --help before any "--". */
int gt_cli_wants_help(int argc, char **argv);
/* The median of v[0..n) (sorts v in place; 0 for n = 0): benchmarks report medians. */
double gt_cli_median(double *v, size_t n);
/* A non-negative count with an optional K, M or G suffix (powers of 1024); -1 if malformed. */
int gt_cli_parse_size(const char *s, size_t *out);
/* Prints a command table as "  name   summary" lines. */
void gt_cli_print_table(const gt_cli_cmd_t *table);

#endif /* GT_CLI_H */
