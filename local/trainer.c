/* trainer.c — one rank's inner loop: model and data from the resolved config, one AdamW step
 * at a time.
 *
 * The step is llm.c's: batch → forward → backward → clip → AdamW. There is no randomness in a
 * step other than the data order (which lives in the data position), so the checkpointed
 * state — arenas, step, data position — determines every later bit. The config hash covers
 * the resolved settings those bits depend on, so a resume under different settings is caught
 * instead of producing a silently different run.
 */
#include "local_internal.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static const char *data_kind_name(gt_topo_data_kind_t k)
{
    return k == GT_DATA_TEXT ? "text" : k == GT_DATA_SHARDS ? "shards" : "synthetic";
}

gt_status_t gt_local_model_resolve(const gt_topo_config_t *cfg, gt_gpt_params_t *params_p)
{
    gt_gpt_preset_t pr;
    gt_status_t s = gt_gpt_preset_find(cfg->model.preset, &pr);
    if (s != GT_OK) return s;
    const gt_topo_model_t *m = &cfg->model;
    gt_gpt_params_t p = GT_GPT_PARAMS_INIT;
    p.model = pr.model;
    if (m->vocab_size && m->vocab_size != pr.model.V) {
        p.model.V = m->vocab_size;
        p.model.Vp = 0;
    }
    if (m->context_length) p.model.maxT = m->context_length;
    if (m->n_layer) p.model.L = m->n_layer;
    if (m->n_head) p.model.NH = m->n_head;
    if (m->d_model) p.model.C = m->d_model;
    p.B = m->batch_size ? m->batch_size : pr.B;
    p.T = m->seq_len ? m->seq_len : pr.T;
    if (p.T > p.model.maxT && !m->seq_len)
        p.T = p.model.maxT; /* preset T under a shorter context */
    s = gt_gpt_config_check(&p.model, p.B, p.T);
    if (s != GT_OK) return s;
    *params_p = p;
    return GT_OK;
}

/* The settings a run's numbers depend on, as canonical JSON (sorted keys). */
static char *config_json(const gt_topo_config_t *c, const gt_gpt_params_t *gp, uint32_t site,
                         uint32_t rank)
{
    json_t *sites = json_array();
    for (uint32_t i = 0; i < c->n_sites; i++)
        json_array_append_new(sites,
                              json_pack("{s:s, s:i, s:s}", "name", c->sites[i].name, "ranks",
                                        (json_int_t)c->sites[i].ranks, "backend",
                                        c->sites[i].backend == GT_BACKEND_CUDA ? "cuda" : "cpu"));
    json_t *root = json_pack(
        "{s:{s:I, s:I}, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}, s:{s:s, s:s, s:I, s:I},"
        " s:{s:I, s:f, s:f, s:I, s:f, s:f, s:f, s:f, s:f},"
        " s:{s:i, s:i, s:f, s:f, s:I, s:i, s:f, s:f, s:I},"
        " s:{s:s, s:I, s:f, s:s, s:b, s:i, s:i}, s:{s:I, s:I, s:i}, s:o, s:{s:s, s:I}}",
        "run", "seed", (json_int_t)c->run.seed, "rounds", (json_int_t)c->run.rounds, "model", "V",
        (json_int_t)gp->model.V, "Vp", (json_int_t)gp->model.Vp, "maxT", (json_int_t)gp->model.maxT,
        "L", (json_int_t)gp->model.L, "C", (json_int_t)gp->model.C, "NH", (json_int_t)gp->model.NH,
        "B", (json_int_t)gp->B, "T", (json_int_t)gp->T, "data", "kind",
        data_kind_name(c->data.kind), "path", c->data.path, "synthetic_branching",
        (json_int_t)c->data.synthetic_branching, "synthetic_tokens",
        (json_int_t)c->data.synthetic_tokens, "inner", "steps", (json_int_t)c->inner.steps, "lr",
        c->inner.lr, "min_lr_ratio", c->inner.min_lr_ratio, "warmup_steps",
        (json_int_t)c->inner.warmup_steps, "weight_decay", c->inner.weight_decay, "beta1",
        c->inner.beta1, "beta2", c->inner.beta2, "eps", c->inner.eps, "grad_clip",
        c->inner.grad_clip, "outer", "mode", (int)c->outer.mode, "optimizer",
        (int)c->outer.optimizer, "lr", c->outer.lr, "momentum", c->outer.momentum, "overlap_steps",
        (json_int_t)c->outer.overlap_steps, "late", (int)c->outer.late, "quorum", c->outer.quorum,
        "clip_k", c->outer.clip_k, "fragments", (json_int_t)c->outer.fragments, "codec", "name",
        c->codec.name, "block_size", (json_int_t)c->codec.block_size, "topk_fraction",
        c->codec.topk_fraction, "topk_values", c->codec.topk_values, "error_feedback",
        c->codec.error_feedback, "zstd", (int)c->codec.zstd, "zstd_level", c->codec.zstd_level,
        "local", "threads", (json_int_t)c->local.threads, "tensor_parallel",
        (json_int_t)c->local.tensor_parallel, "grad_reduce", (int)c->local.grad_reduce, "sites",
        sites, "worker", "site", c->sites[site].name, "rank", (json_int_t)rank);
    if (!root) return NULL;
    char *s = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    json_decref(root);
    return s;
}

void gt_local_trainer_destroy(gt_local_trainer_t *tr)
{
    if (!tr) return;
    gt_gpt_destroy(tr->gpt);
    gt_local_data_destroy(tr->data);
    free(tr->inputs);
    free(tr->targets);
    free(tr->config_json);
    gt_gpt_destroy(tr->io);
    gt_local_nccl_destroy(tr->nccl);
    for (size_t i = 0; i < tr->n_reqs; i++)
        if (gt_local_comm_wait(&tr->reqs[i]) != GT_OK) break; /* a failed step's leftovers */
    free(tr->reqs);
    gt_local_comm_destroy(tr->tp_comm);
    gt_local_comm_destroy(tr->dp_comm);
    free(tr);
}

/* A range of the gradients is final: start its all-reduce, and push the earlier ones along
 * (MPI progresses non-blocking collectives only inside MPI calls). */
static void on_grad_ready(void *ctx, size_t offset, size_t n)
{
    gt_local_trainer_t *tr = ctx;
    if (tr->req_error != GT_OK || tr->n_reqs == tr->cap_reqs) return;
    float *g = gt_gpt_arena(tr->gpt, GT_GPT_GRADS);
    gt_status_t s = gt_local_comm_iallreduce_sum(tr->dp_comm, g + offset, n, &tr->reqs[tr->n_reqs]);
    if (s != GT_OK) {
        tr->req_error = s;
        return;
    }
    tr->n_reqs++;
    for (size_t i = 0; i + 1 < tr->n_reqs; i++) {
        int done = 0;
        if ((s = gt_local_comm_test(&tr->reqs[i], &done)) != GT_OK) tr->req_error = s;
    }
}

/* Tensor parallelism's all-reduce over the TP group: bit-identical on every rank. */
static gt_status_t tp_allreduce(void *ctx, float *buf, size_t n)
{
    gt_local_trainer_t *tr = ctx;
    return gt_local_comm_allreduce_uniform(tr->tp_comm, buf, n);
}

gt_status_t gt_local_trainer_gather(gt_local_trainer_t *tr, gt_gpt_arena_t which, float *full)
{
    size_t n_full = gt_gpt_arena_len(&tr->gp.model);
    if (tr->tp_size <= 1) return gt_gpt_arena_read(tr->gpt, which, 0, n_full, full);
    size_t t = tr->tp_size, total = 0;
    size_t *counts = calloc(t, sizeof *counts), *displs = calloc(t, sizeof *displs);
    float *all = NULL;
    gt_status_t s = GT_ERR_NOMEM;
    if (!counts || !displs) goto out;
    for (size_t j = 0; j < t; j++) {
        gt_gpt_params_t pj = tr->gp;
        pj.tp_rank = j;
        counts[j] = gt_gpt_local_len(&pj);
        displs[j] = total;
        total += counts[j];
    }
    if (!(all = malloc(total * sizeof *all))) goto out;
    s = gt_gpt_arena_read(tr->gpt, which, 0, tr->n_local, all + displs[tr->tp_rank]);
    if (s == GT_OK) s = gt_local_comm_allgatherv(tr->tp_comm, NULL, all, counts, displs);
    for (size_t j = 0; j < t && s == GT_OK; j++) {
        gt_gpt_params_t pj = tr->gp;
        pj.tp_rank = j;
        s = gt_gpt_tp_gather(&pj, all + displs[j], full);
    }
out:
    free(all);
    free(counts);
    free(displs);
    return s;
}

gt_status_t gt_local_trainer_scatter(gt_local_trainer_t *tr, gt_gpt_arena_t which,
                                     const float *full)
{
    if (tr->tp_size <= 1)
        return gt_gpt_arena_write(tr->gpt, which, 0, gt_gpt_arena_len(&tr->gp.model), full);
    float *local = malloc(tr->n_local * sizeof *local);
    if (!local) return GT_ERR_NOMEM;
    gt_status_t s = gt_gpt_tp_scatter(&tr->gp, full, local);
    if (s == GT_OK) s = gt_gpt_arena_write(tr->gpt, which, 0, tr->n_local, local);
    free(local);
    return s;
}

gt_status_t gt_local_trainer_io_model(gt_local_trainer_t *tr, gt_gpt_t **io_p)
{
    if (tr->tp_size <= 1) {
        *io_p = tr->gpt;
        return GT_OK;
    }
    if (!tr->io) {
        gt_gpt_params_t p = GT_GPT_PARAMS_INIT;
        p.model = tr->gp.model;
        p.B = 1;
        p.T = 1;
        gt_status_t s = gt_gpt_create(&p, &tr->io);
        if (s != GT_OK) return s;
    }
    *io_p = tr->io;
    return GT_OK;
}

/* The site's rank layout: rank = dp_rank * tp_size + tp_rank; the two sub-communicators. */
static gt_status_t setup_ranks(gt_local_trainer_t *tr, gt_local_comm_t *comm)
{
    const gt_topo_config_t *c = tr->cfg;
    uint32_t R = c->sites[tr->site].ranks,
             t = c->local.tensor_parallel ? c->local.tensor_parallel : 1;
    tr->tp_size = 1;
    tr->dp_size = 1;
    if (!comm || gt_local_comm_size(comm) == 1) return GT_OK;
    int size = gt_local_comm_size(comm), rank = gt_local_comm_rank(comm);
    if ((uint32_t)size != R || (uint32_t)rank != tr->rank) {
        GT_ERROR("site %s: sites.%s.ranks is %u, but this job has %d ranks (this is rank %d, "
                 "the trainer was told %u): start it with mpirun -np %u",
                 c->sites[tr->site].name, c->sites[tr->site].name, R, size, rank, tr->rank, R);
        return GT_ERR_CONFIG;
    }
    if (R % t != 0) {
        GT_ERROR("site %s: local.tensor_parallel %u does not divide the site's %u ranks",
                 c->sites[tr->site].name, t, R);
        return GT_ERR_CONFIG;
    }
    tr->comm = comm;
    tr->tp_size = t;
    tr->tp_rank = (uint32_t)rank % t;
    tr->dp_size = R / t;
    tr->dp_rank = (uint32_t)rank / t;
    gt_status_t s = gt_local_comm_split(comm, (int)tr->dp_rank, rank, &tr->tp_comm);
    if (s == GT_OK) s = gt_local_comm_split(comm, (int)tr->tp_rank, rank, &tr->dp_comm);
    return s;
}

gt_status_t gt_local_trainer_create(const gt_local_trainer_params_t *params,
                                    gt_local_trainer_t **tr_p)
{
    gt_status_t s = GT_OK;
    const gt_topo_config_t *c = params->cfg;
    gt_local_trainer_t *tr = calloc(1, sizeof *tr);
    if (!tr) return GT_ERR_NOMEM;
    tr->cfg = c;
    tr->site = params->site;
    tr->grad_hook = params->grad_hook;
    tr->grad_hook_ctx = params->grad_hook_ctx;
    tr->rank = params->rank;
    GT_REQUIRE_GOTO(c && params->site < c->n_sites && params->rank < c->sites[params->site].ranks,
                    s, GT_ERR_INVALID, out, "trainer: site %u / rank %u not in the config",
                    params->site, params->rank);
    GT_CHECK_GOTO(gt_local_model_resolve(c, &tr->gp), s, out);
    tr->gp.device =
        c->sites[params->site].backend == GT_BACKEND_CUDA ? GT_DEVICE_CUDA : GT_DEVICE_CPU;
    tr->gp.cuda_device = 0;
    if (tr->gp.device == GT_DEVICE_CUDA && params->comm) {
        /* One GPU per rank: the ranks of this machine take its devices in turn. */
        int count = 0;
        if (gt_kern_cuda_device_count(&count) == GT_OK && count > 0)
            tr->gp.cuda_device = gt_local_comm_local_rank(params->comm) % count;
    }
    tr->total_steps = (uint64_t)c->run.rounds * c->inner.steps;
    GT_REQUIRE_GOTO(tr->total_steps > 0, s, GT_ERR_INVALID, out,
                    "trainer: run.rounds × inner.steps is 0: nothing to train");
    GT_CHECK_GOTO(gt_kern_set_threads(c->local.threads ? (int)c->local.threads : 1), s, out);
    GT_CHECK_GOTO(setup_ranks(tr, params->comm), s, out);

    gt_local_data_params_t dp = GT_LOCAL_DATA_PARAMS_INIT;
    dp.kind = c->data.kind;
    dp.path = c->data.path;
    dp.vocab_size = (uint32_t)tr->gp.model.V;
    dp.synthetic_branching = c->data.synthetic_branching;
    dp.synthetic_tokens = c->data.synthetic_tokens;
    dp.seed = c->run.seed;
    dp.batch_size = tr->gp.B;
    dp.seq_len = tr->gp.T;
    /* One share of the data per model replica: the tp_size ranks of a replica read the same
     * batches (every site uses the same tensor-parallel degree). */
    uint32_t t = c->local.tensor_parallel ? c->local.tensor_parallel : 1;
    /* With outer.site_slots, a slot no site holds yet has its share too (as many replicas as
     * the first site: `geotrain sites add` takes equal ranks where the sites' are equal), so a
     * site added into it later reads data nobody else reads, from a file that lists it. */
    dp.workers = 0;
    for (uint32_t i = 0; i < gt_topo_site_slots(c); i++) {
        uint32_t r = i < c->n_sites && !gt_topo_site_vacant(&c->sites[i]) ? c->sites[i].ranks
                                                                          : c->sites[0].ranks;
        uint32_t replicas = r / t ? r / t : 1;
        if (i == params->site) dp.worker = dp.workers + params->rank / t;
        dp.workers += replicas;
    }
    GT_CHECK_GOTO(gt_local_data_create(&dp, &tr->data), s, out);

    const size_t BT = tr->gp.B * tr->gp.T;
    tr->inputs = malloc(BT * sizeof *tr->inputs);
    tr->targets = malloc(BT * sizeof *tr->targets);
    GT_REQUIRE_GOTO(tr->inputs && tr->targets, s, GT_ERR_NOMEM, out, "out of memory");
    if (tr->dp_size > 1 && tr->gp.device == GT_DEVICE_CPU && c->local.overlap_grad_reduce) {
        tr->cap_reqs = 4 + 2 * tr->gp.model.L; /* ln_f, each block, the embeddings */
        tr->reqs = calloc(tr->cap_reqs, sizeof *tr->reqs);
        GT_REQUIRE_GOTO(tr->reqs, s, GT_ERR_NOMEM, out, "out of memory");
        tr->gp.grad_ready = on_grad_ready;
        tr->gp.grad_ready_ctx = tr;
    }
    if (tr->tp_size > 1) {
        tr->gp.tp_size = tr->tp_size;
        tr->gp.tp_rank = tr->tp_rank;
        tr->gp.tp_comm.ctx = tr;
        tr->gp.tp_comm.allreduce_sum = tp_allreduce;
    }
    GT_CHECK_GOTO(gt_gpt_create(&tr->gp, &tr->gpt), s, out);
    tr->n_local = gt_gpt_local_len(&tr->gp);
    if (tr->gp.device == GT_DEVICE_CUDA && tr->dp_size > 1)
        GT_CHECK_GOTO(gt_local_nccl_create(tr->dp_comm, tr->gp.cuda_device, &tr->nccl), s, out);
    GT_CHECK_GOTO(gt_gpt_init_weights(tr->gpt, c->run.seed), s, out);

    tr->sched.lr_max = (float)c->inner.lr;
    tr->sched.min_frac = (float)c->inner.min_lr_ratio;
    tr->sched.warmup_steps = c->inner.warmup_steps;
    tr->sched.total_steps = tr->total_steps;
    tr->adamw.beta1 = (float)c->inner.beta1;
    tr->adamw.beta2 = (float)c->inner.beta2;
    tr->adamw.eps = (float)c->inner.eps;
    tr->adamw.weight_decay = (float)c->inner.weight_decay;
    tr->grad_clip = (float)c->inner.grad_clip;

    /* A multi-rank site shares one checkpoint: its hash names the site, not the rank. */
    tr->config_json = config_json(c, &tr->gp, params->site, tr->comm ? 0 : params->rank);
    GT_REQUIRE_GOTO(tr->config_json, s, GT_ERR_NOMEM, out, "out of memory");
    snprintf(tr->hash, sizeof tr->hash, "%016llx",
             (unsigned long long)XXH64(tr->config_json, strlen(tr->config_json), 0));
out:
    if (s != GT_OK) {
        gt_local_trainer_destroy(tr);
        return s;
    }
    *tr_p = tr;
    return GT_OK;
}

/* Data parallelism: the replicas' gradients (and losses, for the record) averaged. */
static gt_status_t average_grads(gt_local_trainer_t *tr, float *loss_p)
{
    uint64_t t0 = gt_time_ns();
    float *g = gt_gpt_arena(tr->gpt, GT_GPT_GRADS); /* device memory on a GPU site */
    size_t n = tr->n_local;
    gt_status_t s = GT_OK;
    if (tr->nccl) {
        s = gt_local_nccl_allreduce_sum(tr->nccl, g, n,
                                        tr->cfg->local.grad_reduce == GT_REDUCE_BF16);
    } else if (tr->reqs) { /* started during backward, block by block */
        for (size_t i = 0; i < tr->n_reqs; i++) {
            gt_status_t w = gt_local_comm_wait(&tr->reqs[i]);
            if (s == GT_OK) s = w;
        }
        tr->n_reqs = 0;
        if (s == GT_OK) s = tr->req_error;
        tr->req_error = GT_OK;
    } else {
        s = gt_local_comm_allreduce(tr->dp_comm, g, n, GT_COMM_FLOAT, GT_COMM_SUM);
    }
    if (s == GT_OK) s = gt_gpt_grad_scale(tr->gpt, 1.0f / (float)tr->dp_size);
    float loss = *loss_p;
    if (s == GT_OK) s = gt_local_comm_allreduce(tr->dp_comm, &loss, 1, GT_COMM_FLOAT, GT_COMM_SUM);
    if (s == GT_OK) *loss_p = loss / (float)tr->dp_size;
    tr->allreduce_ns += gt_time_ns() - t0;
    return s;
}

gt_status_t gt_local_trainer_step(gt_local_trainer_t *tr, gt_local_step_stats_t *stats_p)
{
    gt_status_t s = gt_local_data_next(tr->data, tr->inputs, tr->targets);
    if (s != GT_OK) return s;
    return gt_local_trainer_step_batch(tr, tr->inputs, tr->targets, stats_p);
}

gt_status_t gt_local_trainer_step_batch(gt_local_trainer_t *tr, const int32_t *inputs,
                                        const int32_t *targets, gt_local_step_stats_t *stats_p)
{
    gt_status_t s;
    uint64_t t0 = gt_time_ns();
    float loss = 0, norm = 0;
    gt_adamw_params_t ap = tr->adamw;
    ap.lr = gt_kern_lr_at(&tr->sched, tr->step);
    if ((s = gt_gpt_forward(tr->gpt, inputs, targets, &loss)) != GT_OK) return s;
    if ((s = gt_gpt_grad_zero(tr->gpt)) != GT_OK) return s;
    if ((s = gt_gpt_backward(tr->gpt, 1.0f)) != GT_OK) return s;
    if (tr->dp_size > 1 && (s = average_grads(tr, &loss)) != GT_OK) return s;
    if (tr->grad_hook && (s = tr->grad_hook(tr->grad_hook_ctx, tr->gpt, tr->step)) != GT_OK)
        return s;
    if ((s = gt_gpt_grad_clip(tr->gpt, tr->grad_clip, &norm)) != GT_OK) return s;
    if ((s = gt_gpt_adamw_step(tr->gpt, &ap, tr->step + 1 - tr->adam_from)) != GT_OK) return s;
    tr->step++;
    tr->tokens += tr->gp.B * tr->gp.T * tr->dp_size;
    tr->elapsed_s += (double)(gt_time_ns() - t0) * 1e-9;
    tr->last_loss = loss;
    if (stats_p) {
        stats_p->step = tr->step;
        stats_p->loss = loss;
        stats_p->lr = ap.lr;
        stats_p->grad_norm = norm;
        stats_p->tokens = tr->tokens;
        stats_p->elapsed_s = tr->elapsed_s;
    }
    return GT_OK;
}

gt_gpt_t *gt_local_trainer_model(gt_local_trainer_t *tr)
{
    return tr->gpt;
}
uint64_t gt_local_trainer_steps_done(const gt_local_trainer_t *tr)
{
    return tr->step;
}
uint64_t gt_local_trainer_total_steps(const gt_local_trainer_t *tr)
{
    return tr->total_steps;
}
size_t gt_local_trainer_tokens_per_step(const gt_local_trainer_t *tr)
{
    return tr->gp.B * tr->gp.T * tr->dp_size;
}
const char *gt_local_trainer_config_hash(const gt_local_trainer_t *tr)
{
    return tr->hash;
}
double gt_local_trainer_allreduce_s(const gt_local_trainer_t *tr)
{
    return (double)tr->allreduce_ns * 1e-9;
}
double gt_local_trainer_elapsed_s(const gt_local_trainer_t *tr)
{
    return tr->elapsed_s;
}

gt_status_t gt_local_trainer_skip_to(gt_local_trainer_t *tr, uint64_t step)
{
    if (tr->step != 0 || step > tr->total_steps) {
        GT_ERROR("trainer: skip_to(%llu) needs a fresh trainer and a step within the run's %llu",
                 (unsigned long long)step, (unsigned long long)tr->total_steps);
        return GT_ERR_INVALID;
    }
    for (uint64_t k = 0; k < step; k++) {
        gt_status_t s = gt_local_data_next(tr->data, tr->inputs, tr->targets);
        if (s != GT_OK) return s;
    }
    tr->step = step;
    tr->adam_from = step;
    return GT_OK;
}

gt_status_t gt_local_trainer_advance(gt_local_trainer_t *tr, uint64_t step)
{
    if (step < tr->step || step > tr->total_steps) {
        GT_ERROR("trainer: advance(%llu) from step %llu: only ahead, within the run's %llu",
                 (unsigned long long)step, (unsigned long long)tr->step,
                 (unsigned long long)tr->total_steps);
        return GT_ERR_INVALID;
    }
    tr->adam_from += step - tr->step; /* AdamW counts the updates it made */
    tr->step = step;
    return GT_OK;
}

gt_status_t gt_local_trainer_init_from(gt_local_trainer_t *tr, const char *path)
{
    if (tr->step != 0) {
        GT_ERROR("trainer: an initialisation can only be loaded before the first step");
        return GT_ERR_INVALID;
    }
    gt_local_st_t *st = NULL;
    gt_status_t s = gt_local_st_open(path, &st);
    if (s != GT_OK) return s;
    gt_gpt_t *io = NULL;
    s = gt_local_trainer_io_model(tr, &io);
    if (s == GT_OK) s = gt_local_gpt_load(io, GT_GPT_PARAMS, st, "");
    if (s == GT_OK && io != tr->gpt)
        s = gt_local_trainer_scatter(tr, GT_GPT_PARAMS, gt_gpt_arena(io, GT_GPT_PARAMS));
    gt_local_st_close(st);
    if (s != GT_OK) {
        GT_ERROR("%s: cannot initialise the model from it", path);
        return s;
    }
    size_t n = tr->n_local;
    float *zero = calloc(n, sizeof *zero);
    if (!zero) return GT_ERR_NOMEM;
    s = gt_gpt_arena_write(tr->gpt, GT_GPT_ADAM_M, 0, n, zero);
    if (s == GT_OK) s = gt_gpt_arena_write(tr->gpt, GT_GPT_ADAM_V, 0, n, zero);
    free(zero);
    return s;
}
