/* dump.c — `run.dump: data|rounds`, the trainer's half: what an independent implementation of
 * the whole experiment needs to train the same model on the same tokens (tests/quality/
 * ref_diloco.py; docs/training.md#dumps). In SITE/dump/:
 *   meta.json    the resolved settings the numbers depend on (the trainer's config JSON), the
 *                vector length n, total steps, and the tensor table (name, offset, shape,
 *                decay) of the arena
 *   init.f32     the initial parameters (n float32, arena order: Hugging Face GPT-2 layout)
 *   train.i32    every inner step's batch as trained: inputs (B, T) then targets (B, T), int32
 *   eval.i32     the held-out batches the final anchor is evaluated on, the same way
 * diloco/dump.c adds the outer step's vectors (`rounds`). One rank a site only: the batches are
 * the rank's and the parameters the full vector.
 */
#include "local_internal.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static gt_status_t write_meta(gt_local_trainer_t *tr, const char *dir, size_t n)
{
    gt_status_t st = GT_ERR_NOMEM;
    char path[2400];
    json_error_t err;
    json_t *cfg = json_loads(tr->config_json, 0, &err), *tensors = json_array(), *root = NULL;
    if (!cfg || !tensors) goto out;
    const gt_gpt_config_t *m = &tr->gp.model;
    for (size_t k = 0; k < gt_gpt_tensor_count(m); k++) {
        gt_gpt_tensor_t t;
        if ((st = gt_gpt_tensor_get(m, k, &t)) != GT_OK) goto out;
        st = GT_ERR_NOMEM;
        json_t *shape = t.ndim == 2
                            ? json_pack("[I, I]", (json_int_t)t.shape[0], (json_int_t)t.shape[1])
                            : json_pack("[I]", (json_int_t)t.shape[0]);
        if (!shape ||
            json_array_append_new(tensors, json_pack("{s:s, s:I, s:o, s:b}", "name", t.name,
                                                     "offset", (json_int_t)t.offset, "shape", shape,
                                                     "decay", t.decay)))
            goto out;
    }
    root = json_pack("{s:i, s:O, s:I, s:I, s:I, s:O}", "version", 1, "config", cfg, "n",
                     (json_int_t)n, "total_steps", (json_int_t)tr->total_steps, "tokens_per_step",
                     (json_int_t)gt_local_trainer_tokens_per_step(tr), "tensors", tensors);
    if (!root) goto out;
    snprintf(path, sizeof path, "%s/meta.json", dir);
    st = json_dump_file(root, path, JSON_INDENT(1) | JSON_SORT_KEYS | JSON_REAL_PRECISION(17))
             ? GT_ERR_IO
             : GT_OK;
    if (st != GT_OK) GT_ERROR("run.dump: cannot write %s", path);
out:
    json_decref(root);
    json_decref(tensors);
    json_decref(cfg);
    return st;
}

static FILE *open_in(const char *dir, const char *name)
{
    char path[2400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) GT_ERROR("run.dump: cannot create %s: %s", path, strerror(errno));
    return f;
}

gt_status_t gt_local_dump_start(gt_local_trainer_t *tr, const char *site_dir, const float *params,
                                size_t n, gt_local_dump_t *dump_p)
{
    gt_local_dump_t dp = {NULL, NULL};
    gt_status_t st = GT_OK;
    *dump_p = dp;
    if (tr->cfg->run.dump == GT_DUMP_NONE) return GT_OK;
    if ((tr->comm && gt_local_comm_size(tr->comm) > 1) || tr->tp_size > 1 || tr->dp_size > 1) {
        GT_ERROR("run.dump needs one rank a site (it writes the rank's batches and the full "
                 "parameter vector)");
        return GT_ERR_CONFIG;
    }
    char dir[2300];
    snprintf(dir, sizeof dir, "%s/dump", site_dir);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        GT_ERROR("run.dump: cannot create %s: %s", dir, strerror(errno));
        return GT_ERR_IO;
    }
    GT_CHECK_GOTO(write_meta(tr, dir, n), st, out);
    FILE *f = open_in(dir, "init.f32");
    GT_REQUIRE_GOTO(f, st, GT_ERR_IO, out, "run.dump: init.f32");
    size_t w = fwrite(params, sizeof(float), n, f);
    GT_REQUIRE_GOTO(fclose(f) == 0 && w == n, st, GT_ERR_IO, out, "run.dump: writing init.f32");
    dp.train = open_in(dir, "train.i32");
    dp.eval = open_in(dir, "eval.i32");
    GT_REQUIRE_GOTO(dp.train && dp.eval, st, GT_ERR_IO, out, "run.dump: train.i32, eval.i32");
out:
    if (st != GT_OK) {
        gt_local_dump_stop(&dp);
        return st;
    }
    *dump_p = dp;
    return GT_OK;
}

gt_status_t gt_local_dump_batch(const gt_local_trainer_t *tr, FILE *f)
{
    if (!f) return GT_OK;
    size_t bt = tr->gp.B * tr->gp.T;
    if (fwrite(tr->inputs, sizeof(int32_t), bt, f) != bt ||
        fwrite(tr->targets, sizeof(int32_t), bt, f) != bt) {
        GT_ERROR("run.dump: cannot write a batch: %s", strerror(errno));
        return GT_ERR_IO;
    }
    return GT_OK;
}

gt_status_t gt_local_dump_stop(gt_local_dump_t *dump)
{
    gt_status_t st = GT_OK;
    if (dump->train && fclose(dump->train) != 0) st = GT_ERR_IO;
    if (dump->eval && fclose(dump->eval) != 0) st = GT_ERR_IO;
    dump->train = dump->eval = NULL;
    if (st != GT_OK) GT_ERROR("run.dump: cannot finish train.i32 or eval.i32");
    return st;
}
