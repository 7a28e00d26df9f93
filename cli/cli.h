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
/* An argument list built up for a command the CLI runs itself (the bench commands' launches):
 * each argument a copy, no shell in between, so values need no quoting. */
#define GT_CLI_ARGV_MAX 1024
typedef struct {
    char *v[GT_CLI_ARGV_MAX + 1]; /* NULL-terminated */
    int n;
    int overflow; /* an argument did not fit or could not be copied */
} gt_cli_argv_t;
/* Appends one argument, printf-style. */
void gt_cli_argv_add(gt_cli_argv_t *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends the space-separated words of `words` (a constant list such as "--set a=1 --set b=2"). */
void gt_cli_argv_words(gt_cli_argv_t *a, const char *words);
void gt_cli_argv_free(gt_cli_argv_t *a);
/* Runs `geotrain launch` with the arguments in a (a->v[0] "launch") in a child process of this
 * one, its output to log_path, and waits: launch's exit status, 128 + a signal that ended it,
 * or -1 when it could not be started. The child calls gt_cmd_launch itself (no exec, no shell). */
int gt_cli_launch_logged(gt_cli_argv_t *a, const char *log_path);

/* Commands (one file each: cmd_<name>.c). */
int gt_cmd_config(int argc, char **argv);
int gt_cmd_keygen(int argc, char **argv);
int gt_cmd_certs(int argc, char **argv);
int gt_cmd_sites(int argc, char **argv);
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
