/* metrics.c — training metrics as JSON lines (one object per logged step).
 *
 * A resumed run repeats the steps after its checkpoint, so on open the file is cut back to the
 * checkpoint's step (rewritten atomically) and the repeated steps are logged once.
 */
#include "gt_local.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct gt_local_metrics {
    FILE *f;
    char *path;
};

/* Keeps the lines of `path` whose "step" is <= keep; missing file is fine. */
static gt_status_t truncate_after(const char *path, uint64_t keep)
{
    FILE *in = fopen(path, "r");
    if (!in) return errno == ENOENT ? GT_OK : GT_ERR_IO;
    char *line = NULL, *out = NULL;
    size_t cap = 0, out_len = 0;
    ssize_t n;
    FILE *mem = open_memstream(&out, &out_len);
    if (!mem) {
        fclose(in);
        return GT_ERR_NOMEM;
    }
    while ((n = getline(&line, &cap, in)) > 0) {
        json_t *o = json_loadb(line, (size_t)n, 0, NULL);
        json_t *st = o ? json_object_get(o, "step") : NULL;
        if (json_is_integer(st) && (uint64_t)json_integer_value(st) <= keep) fputs(line, mem);
        json_decref(o);
    }
    free(line);
    fclose(in);
    if (fclose(mem) != 0) {
        free(out);
        return GT_ERR_NOMEM;
    }
    gt_status_t s = gt_write_file_atomic(path, out, out_len, 0);
    free(out);
    return s;
}

gt_status_t gt_local_metrics_open(const char *path, uint64_t keep_through_step,
                                  gt_local_metrics_t **m_p)
{
    gt_status_t s = keep_through_step ? truncate_after(path, keep_through_step)
                                      : gt_write_file_atomic(path, "", 0, 0);
    if (s != GT_OK) {
        GT_ERROR("cannot prepare metrics file %s", path);
        return s;
    }
    gt_local_metrics_t *m = calloc(1, sizeof *m);
    if (!m) return GT_ERR_NOMEM;
    m->path = strdup(path);
    m->f = fopen(path, "a");
    if (!m->f || !m->path) {
        GT_ERROR("cannot open %s: %s", path, strerror(errno));
        gt_local_metrics_close(m);
        return GT_ERR_IO;
    }
    *m_p = m;
    return GT_OK;
}

/* NaN and Inf are not JSON numbers: a diverged loss is written as null. */
static json_t *num(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

gt_status_t gt_local_metrics_write(gt_local_metrics_t *m, const gt_local_step_stats_t *s,
                                   double tokens_per_s)
{
    json_t *o = json_pack("{s:I, s:o, s:o, s:o, s:I, s:o, s:o}", "step", (json_int_t)s->step,
                          "loss", num(s->loss), "lr", num(s->lr), "grad_norm", num(s->grad_norm),
                          "tokens", (json_int_t)s->tokens, "tokens_per_s", num(tokens_per_s),
                          "time", num(s->elapsed_s));
    if (!o) return GT_ERR_NOMEM;
    int rc = json_dumpf(o, m->f, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    json_decref(o);
    if (rc != 0 || fputc('\n', m->f) == EOF || fflush(m->f) != 0) {
        GT_ERROR("write %s: %s", m->path, strerror(errno));
        return GT_ERR_IO;
    }
    return GT_OK;
}

void gt_local_metrics_close(gt_local_metrics_t *m)
{
    if (!m) return;
    if (m->f) fclose(m->f);
    free(m->path);
    free(m);
}
