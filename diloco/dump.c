/* dump.c — `run.dump: rounds`: what the outer step saw and did, round by round, as raw float32
 * files in SITE/dump/, so an independent implementation of the outer optimizer can replay the
 * run and compare (tests/quality/ref_outer.py; docs/training.md#dumps).
 *
 * Per round r (files named WHAT.rRRRRR.f32, n floats, the full vector in arena order):
 *   delta   Δ = θ_a − θ_s this site submitted (before the codec)
 *   x_pre   θ_s just before the result is applied (with τ > 0: after τ more inner steps)
 *   a_pre   θ_a before the outer step
 *   g       the result applied: the aggregated pseudo-gradient as decoded here
 *   a       θ_a after the outer step
 *   m       the outer momentum after it
 *   x       θ_s after the rebase (the final anchor after the last round)
 * and one line of SITE/dump/rounds.jsonl per submit and per apply (round, step, tokens).
 *
 * Only for a site of one rank with one fragment: then this rank's packed lanes are the full
 * vector in order, and every file is one fwrite. Anything else is refused at create (the
 * reference needs whole vectors). A failed write is logged once and turns the dump off; it
 * never fails the run.
 */
#include "diloco_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int dump_on(const gt_diloco_t *d)
{
    return d->cfg->run.dump == GT_DUMP_ROUNDS && !d->dump_failed;
}

gt_status_t dl_dump_check(gt_diloco_t *d)
{
    if (d->cfg->run.dump != GT_DUMP_ROUNDS) return GT_OK;
    if (d->ranks != 1 || d->F != 1 || d->n_sub != d->n) {
        GT_ERROR("site %s: run.dump: rounds needs one rank a site and outer.fragments: 1 (it "
                 "writes whole vectors; this site has %u ranks, %u fragments)",
                 d->name, d->ranks, d->F);
        return GT_ERR_CONFIG;
    }
    char dir[2300];
    snprintf(dir, sizeof dir, "%s/dump", d->site_dir);
    return gt_mkdirs(dir);
}

static void dump_failed(gt_diloco_t *d, const char *path)
{
    GT_WARN("site %s: run.dump: cannot write %s (%s); no more dumps this run", d->name, path,
            strerror(errno));
    d->dump_failed = 1;
}

void dl_dump_vec(gt_diloco_t *d, const char *what, uint64_t r, const float *v)
{
    if (!dump_on(d)) return;
    char path[2400];
    snprintf(path, sizeof path, "%s/dump/%s.r%06llu.f32", d->site_dir, what, (unsigned long long)r);
    FILE *f = fopen(path, "wb");
    if (!f) {
        dump_failed(d, path);
        return;
    }
    size_t w = fwrite(v, sizeof(float), d->n, f);
    if (fclose(f) != 0 || w != d->n) dump_failed(d, path);
}

void dl_dump_delta(gt_diloco_t *d, uint64_t r)
{
    if (!dump_on(d)) return;
    char path[2400];
    snprintf(path, sizeof path, "%s/dump/delta.r%06llu.f32", d->site_dir, (unsigned long long)r);
    FILE *f = fopen(path, "wb");
    if (!f) {
        dump_failed(d, path);
        return;
    }
    float buf[4096];
    size_t w = 0;
    for (size_t o = 0; o < d->n; o += 4096) { /* one rank, one fragment: packed is full */
        size_t k = d->n - o < 4096 ? d->n - o : 4096;
        for (size_t i = 0; i < k; i++) buf[i] = d->anchor[o + i] - d->snap[o + i];
        w += fwrite(buf, sizeof(float), k, f);
    }
    if (fclose(f) != 0 || w != d->n) dump_failed(d, path);
}

void dl_dump_event(gt_diloco_t *d, const char *event, uint64_t r, double tokens)
{
    if (!dump_on(d)) return;
    char path[2400];
    snprintf(path, sizeof path, "%s/dump/rounds.jsonl", d->site_dir);
    FILE *f = fopen(path, "a");
    if (!f) {
        dump_failed(d, path);
        return;
    }
    fprintf(f, "{\"event\":\"%s\",\"round\":%llu,\"step\":%llu,\"tokens\":%.17g}\n", event,
            (unsigned long long)r, (unsigned long long)d->step, tokens);
    if (fclose(f) != 0) dump_failed(d, path);
}

void dl_dump_apply_pre(gt_diloco_t *d, uint64_t r)
{
    if (!dump_on(d)) return;
    dl_dump_vec(d, "x_pre", r, d->x);
    dl_dump_vec(d, "a_pre", r, d->anchor);
    float *g = gt_mem_alloc(&d->mem, (d->eng_off[1] - d->eng_off[0]) * sizeof(float), 0);
    if (g && dl_g_vector(d, 0, g) == GT_OK) dl_dump_vec(d, "g", r, g); /* decoded for the dump */
    gt_mem_free(&d->mem, g);
}

void dl_dump_apply_post(gt_diloco_t *d, uint64_t r, double tokens)
{
    dl_dump_vec(d, "a", r, d->anchor);
    dl_dump_vec(d, "m", r, d->mom);
    dl_dump_vec(d, "x", r, d->x);
    dl_dump_event(d, "apply", r, tokens);
}
