/* site.c — one site of a multi-site DiLoCo run, trained by geotrain's own GPT trainer
 * (docs/design.md §1, §4).
 *
 * Everything across sites is diloco/'s (gt_diloco.h): the anchor and outer momentum, the
 * schedule of submits and applies at r·H + τ, the WAN, membership, the hash vote and joining a
 * run in progress. This file is the trainer side of that API, the same as any other trainer's:
 * it hands the model's parameter arena to the library (directly on a CPU model; through a host
 * copy gathered and scattered around the library's reads and writes for tensor-parallel or GPU
 * models), calls gt_diloco_step after every inner step, and keeps what only a trainer knows:
 * the step loop, the data (a joiner skips its data to the step it starts at), evaluation of the
 * final anchor, checkpoints and SITE/metrics.jsonl (with the trainer's lr and gradient norm).
 * The library writes SITE/anchors.jsonl, status.json and summary.json. The in-site collectives
 * the library needs for a site of several ranks come from gt_local_comm (MPI).
 *
 * sync-dp (the baseline) averages every step's gradients across sites from the trainer's
 * gradient hook, through gt_diloco_sync_grads.
 */
#include "gt_local.h"
#include "local_internal.h"

#include "gt_diloco.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const gt_local_site_params_t *p;
    const gt_topo_config_t *cfg;
    const char *name;
    gt_local_trainer_t *tr;
    gt_gpt_t *gpt;
    size_t n;     /* floats in the full parameter vector (HF layout) */
    float *theta; /* host copy of θ_s when the arena is not it (TP shards, GPU); else NULL */
    float *grads; /* sync-dp: the full gradient */
    gt_diloco_t *dl;
    gt_local_comm_t *comm;
    char site_dir[2048];
    FILE *metrics;
    gt_local_dump_t dump; /* run.dump: SITE/dump/ (dump.c) */
    uint64_t t_train, t_last, tok_last;
} site_t;

/* ---- what the library asks of the site ---- */

static gt_status_t comm_allreduce(void *ctx, uint64_t *v, size_t n, gt_diloco_op_t op)
{
    site_t *s = ctx;
    return gt_local_comm_allreduce(s->comm, v, n, GT_COMM_U64,
                                   op == GT_DILOCO_OP_SUM ? GT_COMM_SUM : GT_COMM_MAX);
}

static gt_status_t comm_allgatherv(void *ctx, float *all, const size_t *counts,
                                   const size_t *displs)
{
    site_t *s = ctx;
    return gt_local_comm_allgatherv(s->comm, NULL, all, counts, displs);
}

/* The host copy follows the model before the library reads it, and the model follows the
 * copy after the library wrote it (collective over the TP group, like every step). */
static gt_status_t pull_params(void *ctx)
{
    site_t *s = ctx;
    return gt_local_trainer_gather(s->tr, GT_GPT_PARAMS, s->theta);
}

static gt_status_t push_params(void *ctx)
{
    site_t *s = ctx;
    return gt_local_trainer_scatter(s->tr, GT_GPT_PARAMS, s->theta);
}

/* sync-dp: every step's gradients are averaged across the sites before clipping and AdamW, so
 * every site takes the same step from the same parameters. */
static gt_status_t sync_grad_hook(void *ctx, gt_gpt_t *gpt, uint64_t step)
{
    site_t *s = ctx;
    (void)gpt;
    if (!s->dl) return GT_ERR_INTERNAL;
    gt_status_t st = gt_local_trainer_gather(s->tr, GT_GPT_GRADS, s->grads);
    if (st == GT_OK)
        st = gt_diloco_sync_grads(s->dl, step, s->grads, gt_local_trainer_tokens_per_step(s->tr));
    if (st == GT_OK) st = gt_local_trainer_scatter(s->tr, GT_GPT_GRADS, s->grads);
    return st;
}

/* ---- the site's own files ---- */

static void metrics_line(site_t *s, const gt_local_step_stats_t *ss)
{
    if (!s->metrics) return;
    gt_diloco_status_t ds;
    gt_diloco_status(s->dl, &ds);
    uint64_t now = gt_time_ns();
    double tps = (double)(ss->tokens - s->tok_last) / ((now - s->t_last) * 1e-9);
    double wall = (now - s->t_train) * 1e-9;
    s->t_last = now;
    s->tok_last = ss->tokens;
    fprintf(s->metrics,
            "{\"step\":%llu,\"round\":%llu,\"loss\":%.6f,\"lr\":%.6g,\"grad_norm\":%.4f,"
            "\"tokens\":%llu,\"tokens_per_s\":%.1f,\"time\":%.3f,\"wan_bytes_sent\":%llu,"
            "\"wan_bytes_received\":%llu,\"wait_s\":%.3f,\"compute_utilization\":%.4f,"
            "\"view_epoch\":%llu}\n",
            (unsigned long long)ss->step, (unsigned long long)(ss->step / s->cfg->inner.steps),
            ss->loss, ss->lr, ss->grad_norm, (unsigned long long)ss->tokens, tps, wall,
            (unsigned long long)ds.wan_bytes_sent, (unsigned long long)ds.wan_bytes_received,
            ds.wait_s, wall > 0 ? ds.compute_s / wall : 0.0, (unsigned long long)ds.view_epoch);
    fflush(s->metrics);
}

/* The final anchor's loss on the next EVAL_BATCHES batches of this site's data stream:
 * data it has not trained on, the same for every mode, so runs compare on equal terms. */
#define EVAL_BATCHES 8
static gt_status_t eval_anchor(site_t *s, double *loss_p)
{
    gt_local_trainer_t *tr = s->tr;
    double acc = 0;
    for (int b = 0; b < EVAL_BATCHES; b++) {
        float loss = 0;
        gt_status_t st = gt_local_data_next(tr->data, tr->inputs, tr->targets);
        if (st == GT_OK) st = gt_gpt_forward(s->gpt, tr->inputs, tr->targets, &loss);
        if (st == GT_OK) st = gt_local_dump_batch(tr, s->dump.eval);
        if (st != GT_OK) return st;
        acc += loss;
    }
    *loss_p = acc / EVAL_BATCHES;
    return GT_OK;
}

/* The trainer and the parameter vector the library works on (*params_p). */
static gt_status_t setup(site_t *s, uint32_t site, float **params_p)
{
    const gt_topo_config_t *cfg = s->cfg;
    int rank = s->comm ? gt_local_comm_rank(s->comm) : 0;
    gt_status_t st;
    gt_local_trainer_params_t tp = GT_LOCAL_TRAINER_PARAMS_INIT;
    tp.cfg = cfg;
    tp.site = site;
    tp.rank = (uint32_t)rank;
    tp.comm = s->comm;
    if (cfg->outer.mode == GT_OUTER_SYNC_DP) {
        tp.grad_hook = sync_grad_hook;
        tp.grad_hook_ctx = s;
    }
    if ((st = gt_local_trainer_create(&tp, &s->tr)) != GT_OK) return st;
    s->gpt = gt_local_trainer_model(s->tr);
    s->n = gt_gpt_arena_len(&gt_gpt_get_params(s->gpt)->model);
    /* A CPU model without tensor parallelism holds θ_s as one host arena: the library works
     * on it in place. Otherwise on a full host copy. */
    float *params = gt_gpt_arena(s->gpt, GT_GPT_PARAMS);
    if (s->tr->tp_size > 1 || s->tr->gp.device != GT_DEVICE_CPU) {
        if (!(s->theta = malloc(s->n * sizeof(float)))) return GT_ERR_NOMEM;
        if ((st = gt_local_trainer_gather(s->tr, GT_GPT_PARAMS, s->theta)) != GT_OK) return st;
        params = s->theta;
    }
    *params_p = params;
    if (cfg->outer.mode == GT_OUTER_SYNC_DP && !(s->grads = malloc(s->n * sizeof(float))))
        return GT_ERR_NOMEM;
    return GT_OK;
}

#define MAX_RESUME 16

/* The library: collective over the site's ranks. `steps`: the trainer checkpoints a resume
 * may use (n_steps of them), or NULL. */
static gt_status_t join_run(site_t *s, float *params, const uint64_t *steps, size_t n_steps)
{
    const gt_local_site_params_t *p = s->p;
    int ranks = s->comm ? gt_local_comm_size(s->comm) : 1;
    int rank = s->comm ? gt_local_comm_rank(s->comm) : 0;
    gt_diloco_params_t dp = GT_DILOCO_PARAMS_INIT;
    dp.cfg = s->cfg;
    dp.site = p->site;
    dp.run_dir = p->run_dir;
    dp.run_id = p->run_id;
    dp.params = params;
    dp.n_params = s->n;
    if (ranks > 1) {
        dp.comm.ctx = s;
        dp.comm.rank = (uint32_t)rank;
        dp.comm.size = (uint32_t)ranks;
        dp.comm.allreduce_u64 = comm_allreduce;
        dp.comm.allgatherv = comm_allgatherv;
    }
    if (s->theta) {
        dp.before_read = pull_params;
        dp.after_write = push_params;
        dp.hook_ctx = s;
    }
    dp.stop = p->stop;
    dp.metrics = 0; /* ours below has the trainer's lr and gradient norm */
    dp.env = 0;
    dp.expect_sites = p->expect_sites;
    char outer_dir[2200];
    snprintf(outer_dir, sizeof outer_dir, "%s/checkpoints/outer", s->site_dir);
    if (p->resume) {
        dp.resume_dir = outer_dir;
        dp.resume_steps = steps;
        dp.n_resume_steps = n_steps;
    }
    gt_status_t st = gt_diloco_create(&dp, &s->dl);
    if (st == GT_OK && p->faults) st = gt_diloco_set_faults(s->dl, p->faults);
    return st;
}

gt_status_t gt_local_site_run(const gt_local_site_params_t *p)
{
    site_t s;
    memset(&s, 0, sizeof s);
    s.p = p;
    s.cfg = p->cfg;
    s.comm = p->comm;
    uint32_t site = 0;
    if (!p->cfg || !p->site || gt_topo_site_index(p->cfg, p->site, &site) != GT_OK) {
        GT_ERROR("site: '%s' is not a site of the config", p->site ? p->site : "");
        return GT_ERR_INVALID;
    }
    const gt_topo_config_t *cfg = p->cfg;
    s.name = cfg->sites[site].name;
    snprintf(s.site_dir, sizeof s.site_dir, "%s/%s", p->run_dir, s.name);
    int lead = !s.comm || gt_local_comm_rank(s.comm) == 0; /* writes the site's files */
    float *params = NULL;
    char root[2100], outer_root[2200];
    snprintf(root, sizeof root, "%s/checkpoints", s.site_dir);
    snprintf(outer_root, sizeof outer_root, "%s/outer", root);
    uint64_t ck_steps[MAX_RESUME];
    size_t n_ck = 0;
    gt_status_t st = gt_local_comm_agree(s.comm, setup(&s, site, &params));
    /* Resume: the trainer checkpoints that pass their checks are what this site can offer. */
    if (st == GT_OK && p->resume)
        st = gt_local_comm_agree(
            s.comm, gt_local_trainer_ckpt_steps(s.tr, root, ck_steps, MAX_RESUME, &n_ck));
    if (st == GT_OK) st = join_run(&s, params, ck_steps, n_ck); /* agrees across ranks itself */
    if (st != GT_OK) goto out;
    gt_diloco_status_t ds;
    gt_diloco_status(s.dl, &ds);
    const uint64_t total = ds.total_steps, H = cfg->inner.steps;
    uint64_t step = ds.first_step;
    int took_part = step < total; /* a joiner can come too late to take part */
    if (ds.resumed_step >= 0) {
        /* The whole run resumed at this step: the trainer's own state from the same step. */
        st = gt_local_comm_agree(
            s.comm, gt_local_trainer_resume_step(s.tr, root, (uint64_t)ds.resumed_step));
        if (st != GT_OK) {
            GT_ERROR("site %s: cannot load its checkpoint of step %lld, which the run resumes at",
                     s.name, (long long)ds.resumed_step);
            goto out;
        }
    } else if (step > 0 && took_part && (st = gt_local_trainer_skip_to(s.tr, step)) != GT_OK) {
        /* A site that joins starts at R·H + τ: its data skipped to match, fresh AdamW moments. */
        goto out;
    }
    if (lead) {
        char path[2100];
        snprintf(path, sizeof path, "%s/metrics.jsonl", s.site_dir);
        /* a site that joins (or comes back) appends: it keeps what it logged before */
        if (!(s.metrics = fopen(path, step > 0 ? "a" : "w"))) {
            GT_ERROR("site %s: cannot create %s: %s", s.name, path, strerror(errno));
            st = GT_ERR_IO;
        }
    }
    if ((st = gt_local_comm_agree(s.comm, st)) != GT_OK) goto out;
    /* run.dump: from the start of a fresh run only (a joiner's or resumed run's start state is
     * not the initialisation a reference could train from) */
    if (cfg->run.dump != GT_DUMP_NONE && (step > 0 || ds.resumed_step >= 0))
        GT_WARN("site %s: run.dump writes nothing: this site joins or resumes the run", s.name);
    else if ((st = gt_local_dump_start(s.tr, s.site_dir, params, s.n, &s.dump)) != GT_OK)
        goto out;
    s.t_train = s.t_last = gt_time_ns();
    /* A test hook: GT_TEST_HANG=SITE@STEP blocks this site's training thread for good before
     * that step (the stuck-site watch's test, test_launch_stuck; nothing else reads it). */
    const char *hang = getenv("GT_TEST_HANG"), *hang_at = hang ? strchr(hang, '@') : NULL;
    uint64_t hang_step = UINT64_MAX;
    if (hang_at && (size_t)(hang_at - hang) == strlen(s.name) &&
        strncmp(hang, s.name, strlen(s.name)) == 0)
        hang_step = strtoull(hang_at + 1, NULL, 10);
    while (step < total) {
        while (step == hang_step) pause();
        uint64_t t0 = gt_time_ns();
        double wait0 = ds.wait_s;
        gt_local_step_stats_t ss;
        if ((st = gt_local_trainer_step(s.tr, &ss)) != GT_OK) goto out;
        if ((st = gt_local_dump_batch(s.tr, s.dump.train)) != GT_OK) goto out;
        gt_diloco_status(s.dl, &ds);
        /* Compute time only: sync-dp waits for the exchange inside the step. */
        double dt = (gt_time_ns() - t0) * 1e-9 - (ds.wait_s - wait0);
        st = gt_diloco_step_timed(s.dl, gt_local_trainer_tokens_per_step(s.tr), ss.loss, dt);
        if (st == GT_ERR_CLOSED) break;
        if (st != GT_OK) goto out;
        step = ss.step;
        gt_diloco_status(s.dl, &ds); /* also the next step's wait0 */
        if (ds.step > step) {
            /* outer.catch_up: the round ended early; the run's step counter is at its end */
            if ((st = gt_local_trainer_advance(s.tr, ds.step)) != GT_OK) goto out;
            step = ds.step;
        }
        if (step % cfg->run.log_every == 0 || step == total) metrics_line(&s, &ss);
        /* At a round boundary (right after a round was applied, step r·H + τ; sync-dp: every
         * step is one): the trainer's state, then the library's outer state of the same step. */
        uint64_t tau = cfg->outer.mode == GT_OUTER_SYNC_DP ? 0 : cfg->outer.overlap_steps;
        /* A joiner before its first round (it started in round R - 1, ahead of the anchor it
         * rebases onto at R·H + τ) has applied no round here: it has no outer state to save
         * and skips this checkpoint; a resume takes the newest step every site has. */
        int before_first = ds.joined_round > 0 && step < ds.joined_round * H + tau;
        if (cfg->run.checkpoint_every && step > tau && !before_first &&
            (step - tau) % (H * cfg->run.checkpoint_every) == 0 && step < total) {
            if ((st = gt_local_trainer_save(s.tr, root, 3)) != GT_OK) goto out;
            if ((st = gt_diloco_save(s.dl, outer_root, 2)) != GT_OK) goto out;
        }
    }
    if (st == GT_OK && took_part) {
        /* The library left the final anchor (sync-dp: the common parameters) in the model. */
        double eval = NAN;
        st = eval_anchor(&s, &eval);
        if (st == GT_OK) st = gt_diloco_set_result(s.dl, "eval_loss", eval);
        if (st == GT_OK) st = gt_local_trainer_save(s.tr, root, 3);
    }
out:
    if (gt_local_dump_stop(&s.dump) != GT_OK && st == GT_OK) st = GT_ERR_IO;
    if (s.dl) gt_diloco_close(s.dl, st); /* summary.json, deregistration */
    if (s.metrics) fclose(s.metrics);
    gt_local_trainer_destroy(s.tr);
    free(s.theta);
    free(s.grads);
    return st;
}
