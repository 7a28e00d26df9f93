/* faults.c — fault injection (gt_faults.h): the GT_ variables that ask for it, checked in one
 * place, and the hooks the schedule calls: how much longer a step takes, whether to corrupt
 * the anchor after a round, and the kill point. */
#include "diloco_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void gt_faults_init(gt_faults_t *f)
{
    memset(f, 0, sizeof *f);
    f->slow = 1.0;
    f->corrupt_anchor_round = -1;
    f->kill_at_round = -1;
}

/* A whole-string number from variable `name`; 1 when set, 0 unset, -1 malformed (said). */
static int env_number(const char *name, double *out)
{
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    char *end = NULL;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end) {
        GT_ERROR("faults: %s='%s' is not a number", name, v);
        return -1;
    }
    *out = x;
    return 1;
}

/* A path from variable `name` into buf (left as it is when unset or empty); GT_ERR_INVALID,
 * said, when it does not fit. */
static gt_status_t env_path(const char *name, char *buf, size_t cap)
{
    const char *v = getenv(name);
    if (!v || !*v) return GT_OK;
    if (strlen(v) >= cap) {
        GT_ERROR("faults: %s is longer than %zu bytes", name, cap - 1);
        return GT_ERR_INVALID;
    }
    snprintf(buf, cap, "%s", v);
    return GT_OK;
}

/* "FACTOR@FROM-TO,...". */
static gt_status_t parse_windows(const char *v, gt_faults_t *f)
{
    f->n_windows = 0;
    for (const char *p = v; p && *p;) {
        double fa, from, to;
        int used = 0;
        if (sscanf(p, "%lf@%lf-%lf%n", &fa, &from, &to, &used) != 3 ||
            f->n_windows >= GT_FAULTS_MAX_WINDOWS || (p[used] != ',' && p[used] != '\0')) {
            GT_ERROR("faults: GT_SLOW_WINDOWS='%s': expected FACTOR@FROM-TO[,...] with FACTOR in "
                     "[1, 1000], 0 <= FROM < TO (rounds, fractions allowed), at most %d windows",
                     v, GT_FAULTS_MAX_WINDOWS);
            return GT_ERR_INVALID;
        }
        f->windows[f->n_windows++] = (gt_fault_window_t){fa, from, to};
        p += used;
        if (*p == ',') p++;
    }
    return GT_OK;
}

gt_status_t gt_faults_check(const gt_faults_t *f)
{
    if (!f) return GT_ERR_INVALID;
    if (!(f->slow >= 1.0 && f->slow <= 1000.0)) {
        GT_ERROR("faults: the slow factor (GT_SLOW) must be in [1, 1000], not %g", f->slow);
        return GT_ERR_INVALID;
    }
    if (f->corrupt_anchor_round < -1 || f->kill_at_round < -1) {
        GT_ERROR("faults: a round (GT_CORRUPT_ANCHOR, GT_KILL_AT_ROUND) must be >= 0 (-1: never)");
        return GT_ERR_INVALID;
    }
    if (f->kill_at_round >= 0 && !f->notify[0]) {
        GT_ERROR("faults: GT_KILL_AT_ROUND=%lld without GT_FAULT_NOTIFY: the site would stop "
                 "with nobody to kill it (geotrain launch --kill sets both)",
                 (long long)f->kill_at_round);
        return GT_ERR_INVALID;
    }
    if (f->n_windows > GT_FAULTS_MAX_WINDOWS) return GT_ERR_INVALID;
    for (uint32_t w = 0; w < f->n_windows; w++) {
        const gt_fault_window_t *x = &f->windows[w];
        if (!(x->factor >= 1.0 && x->factor <= 1000.0) || !(x->from >= 0 && x->to > x->from)) {
            GT_ERROR("faults: slow window %u (%g@%g-%g): FACTOR must be in [1, 1000] and "
                     "0 <= FROM < TO",
                     w, x->factor, x->from, x->to);
            return GT_ERR_INVALID;
        }
    }
    return GT_OK;
}

gt_status_t gt_faults_from_env(gt_faults_t *f)
{
    if (!f) return GT_ERR_INVALID;
    double x;
    int r;
    if ((r = env_number("GT_SLOW", &x)) < 0) return GT_ERR_INVALID;
    if (r) f->slow = x;
    if ((r = env_number("GT_CORRUPT_ANCHOR", &x)) < 0) return GT_ERR_INVALID;
    if (r) f->corrupt_anchor_round = (int64_t)x;
    if ((r = env_number("GT_KILL_AT_ROUND", &x)) < 0) return GT_ERR_INVALID;
    if (r) f->kill_at_round = (int64_t)x;
    if (env_path("GT_FAULT_NOTIFY", f->notify, sizeof f->notify) != GT_OK ||
        env_path("GT_CHAOS_CUTS", f->cuts, sizeof f->cuts) != GT_OK)
        return GT_ERR_INVALID;
    const char *w = getenv("GT_SLOW_WINDOWS");
    if (w && *w && parse_windows(w, f) != GT_OK) return GT_ERR_INVALID;
    return gt_faults_check(f);
}

gt_status_t gt_diloco_set_faults(gt_diloco_t *d, const gt_faults_t *f)
{
    if (!d || d->magic != GT_DILOCO_MAGIC || gt_faults_check(f) != GT_OK) return GT_ERR_INVALID;
    if (d->stepped) {
        GT_ERROR("site %s: faults are set before the first step", d->name);
        return GT_ERR_INVALID;
    }
    d->faults = *f;
    memset(d->win, 0, sizeof d->win);
    return GT_OK;
}

/* One line of the cuts file: its windows added to every group's emulated links. */
static void cut_line(gt_diloco_t *d, const char *line)
{
    char a[256], b[256];
    double start, dur;
    uint32_t ia, ib;
    const gt_topo_config_t *c = d->cfg;
    if (sscanf(line, "cut %255s %255s %lf %lf", a, b, &start, &dur) != 4 ||
        gt_topo_site_index(c, a, &ia) != GT_OK ||
        (strcmp(b, "*") != 0 && gt_topo_site_index(c, b, &ib) != GT_OK)) {
        GT_WARN("site %s: GT_CHAOS_CUTS: ignored the line '%s' (expected \"cut A B START_S "
                "DURATION_S\" with sites of the run, B \"*\" for all)",
                d->name, line);
        return;
    }
    gt_status_t st = GT_OK;
    for (uint32_t s = 0; s < c->n_sites && st == GT_OK; s++) {
        if (s == ia || (strcmp(b, "*") != 0 && s != ib)) continue;
        for (uint32_t i = 0; i < d->n_grp && st == GT_OK; i++)
            st = gt_wan_mesh_cut(d->grp[i].mesh, ia, s, start, dur);
    }
    if (st != GT_OK)
        GT_WARN("site %s: GT_CHAOS_CUTS: cannot add the cut '%s': %s", d->name, line,
                gt_status_str(st));
    else
        GT_INFO("site %s: chaos: link cut %s-%s from %.2f s for %.2f s on the emulation clock",
                d->name, a, b, start, dur);
}

void dl_fault_cuts_poll(gt_diloco_t *d, uint64_t now_ns)
{
    if (!d->faults.cuts[0] || now_ns < d->cuts_next_ns) return;
    d->cuts_next_ns = now_ns + 100000000ull;
    FILE *f = fopen(d->faults.cuts, "r");
    if (!f) return; /* not written yet */
    char line[1024];
    if (fseek(f, d->cuts_off, SEEK_SET) == 0)
        while (fgets(line, sizeof line, f)) {
            size_t len = strlen(line);
            if (len == 0 || line[len - 1] != '\n') break; /* being written: the next poll */
            d->cuts_off += (long)len;
            line[len - 1] = '\0';
            if (line[0]) cut_line(d, line);
        }
    fclose(f);
}

double dl_fault_slow(gt_diloco_t *d, double compute_s)
{
    return d->faults.slow > 1.0 ? dl_emu_sleep(d, compute_s * (d->faults.slow - 1.0)) : 0.0;
}

/* From the step where the site reaches round `from`, for (to - from) rounds of wall time at its
 * usual speed: a straggler is slow for a while, not for a number of its own steps, which a site
 * slowed 8x would take 8x as long to get through (its slowdowns cost 1.8x what the schedule's
 * bound takes them to). One window at a time. */
double dl_fault_windows(gt_diloco_t *d, double compute_s)
{
    for (uint32_t w = 0; w < d->faults.n_windows; w++) {
        const gt_fault_window_t *x = &d->faults.windows[w];
        struct dl_win *s = &d->win[w];
        if (s->over) continue;
        if (!s->start_ns) {
            double round = (double)d->step / (double)d->H; /* where in the rounds this step is */
            if (round < x->from) continue;
            if (round >= x->to) { /* started past it (a process started again later) */
                s->over = 1;
                continue;
            }
            s->start_ns = gt_time_ns();
            s->len_s = (x->to - x->from) * (double)d->H * d->base_ema;
        }
        if ((gt_time_ns() - s->start_ns) * 1e-9 >= s->len_s) {
            s->over = 1;
            continue;
        }
        double extra = dl_emu_sleep(d, compute_s * (x->factor - 1.0));
        d->chaos_slow_s += extra;
        return extra;
    }
    return 0.0;
}

int dl_fault_corrupts(const gt_diloco_t *d, uint64_t round)
{
    return d->faults.corrupt_anchor_round >= 0 && round == (uint64_t)d->faults.corrupt_anchor_round;
}

void dl_fault_kill_point(gt_diloco_t *d)
{
    /* the last rank: its death takes the site's others down (mpirun, launch's supervisor) */
    if (d->faults.kill_at_round < 0 || d->applied_upto < (uint64_t)d->faults.kill_at_round ||
        d->rank != d->ranks - 1)
        return;
    dl_write_status(d, 1);
    GT_WARN("site %s: chaos: stopping after %llu rounds for the launcher to kill it", d->name,
            (unsigned long long)d->rounds_applied);
    char line[256];
    int len = snprintf(line, sizeof line, "kill %s %ld %llu\n", d->name, (long)getpid(),
                       (unsigned long long)d->applied_upto);
    int fd = open(d->faults.notify, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, line, (size_t)len) != len)
        GT_ERROR("site %s: cannot write the kill notice to %s: %s", d->name, d->faults.notify,
                 strerror(errno));
    if (fd >= 0) close(fd);
    /* Every thread stops at once, as a crashed machine goes silent; the launcher's SIGKILL
     * ends it. A SIGCONT (an operator's) lets it go on: then it stops again at the next step. */
    raise(SIGSTOP);
}
