/* local_internal.h — helpers shared inside local/: the seeded random generator.
 *
 * xoshiro256** (Blackman & Vigna) seeded through splitmix64: small, fast, and its whole state
 * is four words, so it goes into a checkpoint as is.
 */
#ifndef GT_LOCAL_INTERNAL_H
#define GT_LOCAL_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

static inline uint64_t gt_local_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline void gt_local_rng_seed(uint64_t s[4], uint64_t seed)
{
    for (int i = 0; i < 4; i++) s[i] = gt_local_splitmix64(&seed);
}

static inline uint64_t gt_local_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static inline uint64_t gt_local_rng_next(uint64_t s[4])
{
    uint64_t result = gt_local_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = gt_local_rotl(s[3], 45);
    return result;
}

/* Uniform in [0, n), n > 0, without modulo bias (rejection). */
static inline uint64_t gt_local_rng_below(uint64_t s[4], uint64_t n)
{
    uint64_t limit = UINT64_MAX - UINT64_MAX % n, r;
    do {
        r = gt_local_rng_next(s);
    } while (r >= limit);
    return r % n;
}

/* The trainer's state, shared by trainer.c and checkpoint.c. */
#include "gt_local.h"

struct gt_local_trainer {
    const gt_topo_config_t *cfg;
    uint32_t site, rank;
    gt_status_t (*grad_hook)(void *ctx, gt_gpt_t *gpt, uint64_t step);
    void *grad_hook_ctx;
    gt_gpt_params_t gp;
    gt_gpt_t *gpt;
    gt_local_data_t *data;
    int32_t *inputs, *targets; /* (B, T) */
    gt_lr_schedule_t sched;
    gt_adamw_params_t adamw;
    float grad_clip;
    uint64_t step, total_steps, tokens;
    uint64_t adam_from; /* step at which the AdamW moments started (a joiner's, see skip_to) */
    double elapsed_s;
    float last_loss;
    char *config_json; /* canonical JSON of the settings the numbers depend on */
    char hash[17];     /* XXH64 of config_json, hex */
    /* The site's ranks (DESIGN §3): rank = dp_rank * tp_size + tp_rank. tp_comm joins the
     * tp_size ranks that split one model; dp_comm the ranks holding the same shard, whose
     * gradients are averaged every step. Both NULL for a one-rank site. */
    gt_local_comm_t *comm; /* borrowed: the site's world */
    gt_local_comm_t *tp_comm, *dp_comm;
    uint32_t tp_size, tp_rank, dp_size, dp_rank;
    uint64_t allreduce_ns; /* time spent waiting for the gradient all-reduce */
    size_t n_local;        /* floats in each of this rank's arenas (its TP shard) */
    gt_gpt_t *io;          /* tensor parallel: a full-size CPU model for checkpoint I/O */
    gt_local_nccl_t *nccl; /* GPU sites of several replicas: the gradient all-reduce */
    /* CPU data parallelism overlapped with backward: one non-blocking all-reduce per range
     * the model reports final (a block's gradients), completed after backward. */
    gt_local_comm_req_t *reqs;
    size_t n_reqs, cap_reqs;
    gt_status_t req_error;
};

/* Tensor parallelism: the full (HF layout) arena `which` assembled from the TP group's
 * shards into full[gt_gpt_arena_len] (collective over the TP group). */
gt_status_t gt_local_trainer_gather(gt_local_trainer_t *tr, gt_gpt_arena_t which, float *full);
/* This rank's shard of a full arena written into the model. */
gt_status_t gt_local_trainer_scatter(gt_local_trainer_t *tr, gt_gpt_arena_t which,
                                     const float *full);
/* The full-size I/O model (created on first use): TP checkpoints go through it. */
gt_status_t gt_local_trainer_io_model(gt_local_trainer_t *tr, gt_gpt_t **io_p);

/* run.dump (dump.c): SITE/dump/meta.json, init.f32 (params, n floats) and the batch files
 * opened (both NULL when the dump is off); each trained or evaluated batch appended; closed. */
typedef struct {
    FILE *train, *eval;
} gt_local_dump_t;
gt_status_t gt_local_dump_start(gt_local_trainer_t *tr, const char *site_dir, const float *params,
                                size_t n, gt_local_dump_t *dump_p);
gt_status_t gt_local_dump_batch(const gt_local_trainer_t *tr, FILE *f);
gt_status_t gt_local_dump_stop(gt_local_dump_t *dump);

#endif /* GT_LOCAL_INTERNAL_H */
