/* cmd_report.c — `geotrain report RUN_DIR`: PNG plots of a run from its metrics.
 *
 * Reads SITE/metrics.jsonl of every site (the sites of RUN_DIR/summary.json, or every folder
 * that has a metrics.jsonl), writes the series as plain data files under RUN_DIR/plots/ and
 * draws them with gnuplot (Debian's gnuplot-nox, pngcairo terminal):
 *   loss.png         training loss per site against step
 *   wan_bytes.png    WAN bytes each site sent per outer round
 *   utilization.png  compute utilization (time in inner steps / wall time) per site over time
 * The data files and report.gp stay next to the PNGs, so a plot can be redrawn or restyled.
 */
#include "cli.h"
#include "gt_base.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_SITES 64

static void usage(FILE *out)
{
    fprintf(out,
            "usage: geotrain report RUN_DIR\n\n"
            "Draws a run's metrics as PNG files in RUN_DIR/plots/ with gnuplot:\n"
            "  loss.png         training loss per site against step\n"
            "  wan_bytes.png    WAN bytes each site sent per outer round\n"
            "  utilization.png  compute utilization per site over time\n"
            "The data files (*.dat) and the gnuplot script (report.gp) are kept beside\n"
            "them. Needs gnuplot (Debian package gnuplot-nox; scripts/setup.sh installs it).\n");
}

static int is_site_dir(const char *run, const char *name)
{
    char path[PATH_MAX];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s/metrics.jsonl", run, name);
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* The sites of the run, sorted by name. */
static int list_sites(const char *run, char names[][64], int max)
{
    int n = 0;
    DIR *d = opendir(run);
    if (!d) return -1;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        if (e->d_name[0] == '.' || strlen(e->d_name) >= 64) continue;
        if (is_site_dir(run, e->d_name)) snprintf(names[n++], 64, "%s", e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, 64, (int (*)(const void *, const void *))strcmp);
    return n;
}

/* Writes SITE's series; returns the number of metric lines read, -1 on error. */
static int write_series(const char *run, const char *site, FILE *loss, FILE *wan, FILE *util)
{
    char path[PATH_MAX], line[4096];
    snprintf(path, sizeof path, "%s/%s/metrics.jsonl", run, site);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0;
    long long last_round = -1;
    double sent_at_round_start = 0, sent = 0;
    fprintf(loss, "# %s: step loss\n", site);
    fprintf(wan, "# %s: round bytes_sent\n", site);
    fprintf(util, "# %s: time_s compute_utilization\n", site);
    while (fgets(line, sizeof line, f)) {
        json_t *j = json_loads(line, 0, NULL);
        if (!j) continue;
        json_t *step = json_object_get(j, "step"), *l = json_object_get(j, "loss");
        if (json_is_number(step) && json_is_number(l))
            fprintf(loss, "%lld %.6f\n", (long long)json_number_value(step), json_number_value(l));
        json_t *r = json_object_get(j, "round"), *b = json_object_get(j, "wan_bytes_sent");
        if (json_is_integer(r) && json_is_number(b)) {
            long long round = json_integer_value(r);
            if (round != last_round) {
                if (last_round >= 0)
                    fprintf(wan, "%lld %.0f\n", last_round, sent - sent_at_round_start);
                sent_at_round_start = sent;
                last_round = round;
            }
            sent = json_number_value(b);
        }
        json_t *t = json_object_get(j, "time"), *u = json_object_get(j, "compute_utilization");
        if (json_is_number(t) && json_is_number(u))
            fprintf(util, "%.3f %.4f\n", json_number_value(t), json_number_value(u));
        json_decref(j);
        n++;
    }
    if (last_round >= 0) fprintf(wan, "%lld %.0f\n", last_round, sent - sent_at_round_start);
    fprintf(loss, "\n\n");
    fprintf(wan, "\n\n");
    fprintf(util, "\n\n");
    fclose(f);
    return n;
}

static void plot(FILE *gp, const char *file, const char *title, const char *xl, const char *yl,
                 const char *dat, char names[][64], int n, const char *style)
{
    fprintf(gp, "set output '%s'\nset title '%s'\nset xlabel '%s'\nset ylabel '%s'\nplot ", file,
            title, xl, yl);
    for (int i = 0; i < n; i++)
        fprintf(gp, "%s'%s' index %d using 1:2 with %s title '%s'", i ? ", " : "", dat, i, style,
                names[i]);
    fprintf(gp, "\n");
}

int gt_cmd_report(int argc, char **argv)
{
    if (argc != 2 || gt_cli_wants_help(argc, argv)) {
        usage(argc == 2 ? stdout : stderr);
        return argc == 2 ? 0 : 2;
    }
    const char *run = argv[1];
    char names[MAX_SITES][64], dir[PATH_MAX], path[PATH_MAX + 32];
    int n = list_sites(run, names, MAX_SITES);
    if (n <= 0) {
        fprintf(stderr, "geotrain report: %s has no SITE/metrics.jsonl (%s)\n", run,
                n < 0 ? strerror(errno) : "is it a run directory?");
        return 1;
    }
    snprintf(dir, sizeof dir, "%s/plots", run);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "geotrain report: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    FILE *fl, *fw, *fu;
    snprintf(path, sizeof path, "%s/loss.dat", dir);
    fl = fopen(path, "w");
    snprintf(path, sizeof path, "%s/wan_bytes.dat", dir);
    fw = fopen(path, "w");
    snprintf(path, sizeof path, "%s/utilization.dat", dir);
    fu = fopen(path, "w");
    if (!fl || !fw || !fu) {
        fprintf(stderr, "geotrain report: cannot write data files in %s\n", dir);
        if (fl) fclose(fl);
        if (fw) fclose(fw);
        if (fu) fclose(fu);
        return 1;
    }
    for (int i = 0; i < n; i++) write_series(run, names[i], fl, fw, fu);
    fclose(fl);
    fclose(fw);
    fclose(fu);

    snprintf(path, sizeof path, "%s/report.gp", dir);
    FILE *gp = fopen(path, "w");
    if (!gp) {
        fprintf(stderr, "geotrain report: cannot write %s\n", path);
        return 1;
    }
    fprintf(gp, "# geotrain report: run `gnuplot report.gp` in this folder to redraw\n"
                "set terminal pngcairo size 900,540 font 'sans,10'\nset grid\nset key outside\n");
    plot(gp, "loss.png", "training loss per site", "step", "loss (nats)", "loss.dat", names, n,
         "lines lw 1.5");
    plot(gp, "wan_bytes.png", "WAN bytes sent per outer round", "round", "bytes", "wan_bytes.dat",
         names, n, "linespoints lw 1.5");
    fprintf(gp, "set yrange [0:1.05]\n");
    plot(gp, "utilization.png", "compute utilization (time in inner steps / wall time)", "time (s)",
         "utilization", "utilization.dat", names, n, "lines lw 1.5");
    fclose(gp);

    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "cd '%s' && gnuplot report.gp", dir);
    int rc = system(cmd);
    if (rc != 0) {
        fprintf(stderr,
                "geotrain report: gnuplot failed (exit %d); is it installed (Debian package "
                "gnuplot-nox)? The data files are in %s\n",
                WIFEXITED(rc) ? WEXITSTATUS(rc) : rc, dir);
        return 1;
    }
    printf("wrote %s/loss.png, %s/wan_bytes.png, %s/utilization.png (%d sites)\n", dir, dir, dir,
           n);
    return 0;
}
