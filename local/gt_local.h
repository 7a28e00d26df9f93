/* gt_local.h — one site's rank: data loading, safetensors checkpoints, the inner training
 * loop (docs/design.md §1; checkpoints and data: docs/training.md).
 *
 * Parts, each usable alone:
 *   - files:       directory creation and crash-safe file replacement (temporary file, fsync,
 *                  rename, fsync of the directory);
 *   - safetensors: a validating reader (F32, BF16, F16 → float) and an atomic F32 writer;
 *   - data:        byte-level text, llm.c token shards and a synthetic Markov corpus, each
 *                  cut into disjoint deterministic shares per (site, rank);
 *   - trainer:     one rank's model, AdamW state and data position; steps, checkpoints and
 *                  bit-identical resume;
 *   - metrics:     JSON lines.
 * The in-site collectives (MPI, NCCL) are not here yet: a site trains on one rank.
 */
#ifndef GT_LOCAL_H
#define GT_LOCAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gt_base.h"
#include "gt_faults.h"
#include "gt_kernels.h"
#include "gt_topology.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- safetensors ----
 * Format: 8-byte little-endian header length N, N bytes of JSON
 * {"__metadata__": {str: str}, NAME: {"dtype": D, "shape": [...], "data_offsets": [b, e]}},
 * then the data; offsets are relative to the end of the header. */

#define GT_LOCAL_ST_MAX_DIMS   8
/* The reader refuses JSON headers larger than this (hostile input). */
#define GT_LOCAL_ST_MAX_HEADER ((size_t)100 << 20)

typedef enum {
    GT_LOCAL_ST_F32 = 0,
    GT_LOCAL_ST_BF16 = 1,
    GT_LOCAL_ST_F16 = 2,
    GT_LOCAL_ST_OTHER = 3 /* any other dtype: listed, but not readable as float */
} gt_local_st_dtype_t;

typedef struct {
    const char *name; /* owned by the file handle */
    gt_local_st_dtype_t dtype;
    const char *dtype_name; /* as written in the file ("F32", "I64", ...) */
    size_t ndim;
    size_t shape[GT_LOCAL_ST_MAX_DIMS];
    size_t numel;  /* product of shape (1 for a scalar) */
    size_t nbytes; /* data_offsets[1] - data_offsets[0] */
} gt_local_st_info_t;

typedef struct gt_local_st gt_local_st_t;

/* Opens and validates a safetensors file: header length within the file, JSON well formed,
 * every entry with a dtype, a shape and offsets inside the data area whose length matches
 * shape × dtype size, no two tensors overlapping. Errors name the file and the tensor. */
GT_API gt_status_t gt_local_st_open(const char *path, gt_local_st_t **st_p) GT_MUST_USE;
GT_API void gt_local_st_close(gt_local_st_t *st);
GT_API size_t gt_local_st_count(const gt_local_st_t *st);
/* Tensors in file order (sorted by data offset). */
GT_API void gt_local_st_info(const gt_local_st_t *st, size_t index, gt_local_st_info_t *info_p);
/* Index of tensor `name`; GT_ERR_NOT_FOUND when absent. */
GT_API gt_status_t gt_local_st_find(const gt_local_st_t *st, const char *name, size_t *index_p);
/* Reads tensor `index` as float (F32 copied, BF16/F16 widened) into dst[n]; n must equal its
 * element count. */
GT_API gt_status_t gt_local_st_read_f32(const gt_local_st_t *st, size_t index, float *dst,
                                        size_t n) GT_MUST_USE;
/* A `__metadata__` value, or NULL. */
GT_API const char *gt_local_st_metadata(const gt_local_st_t *st, const char *key);

typedef struct {
    const char *name;
    const float *data; /* numel floats, row-major */
    size_t ndim;       /* 0 = scalar */
    size_t shape[GT_LOCAL_ST_MAX_DIMS];
} gt_local_st_entry_t;

/* Writes F32 tensors, in the given order, and optional metadata pairs, atomically. */
GT_API gt_status_t gt_local_st_write(const char *path, const gt_local_st_entry_t *entries,
                                     size_t n_entries, const char *const *meta_keys,
                                     const char *const *meta_values, size_t n_meta) GT_MUST_USE;

/* ---- Data ---- */

/* llm.c token shard header: 256 int32 values, then `count` uint16 tokens. */
#define GT_LOCAL_SHARD_MAGIC   20240520
#define GT_LOCAL_SHARD_VERSION 1
#define GT_LOCAL_SHARD_HEADER  256

/* The synthetic corpus: a first-order Markov chain over V tokens. For each token a its K
 * successors are K distinct tokens drawn without replacement (a seeded partial Fisher–Yates
 * shuffle of 0..V-1); the next token is one of them chosen uniformly. Whatever the stationary
 * distribution, H(x_{t+1} | x_t) = ln K exactly, so the entropy rate — the lowest expected
 * next-token loss any model can reach — is ln K nats per token. x_0 is uniform. */
GT_API double gt_local_synthetic_entropy_rate(uint32_t branching);
/* Generates `n` tokens of that chain into out[n] (1 ≤ K ≤ V ≤ 65536). Same arguments, same
 * tokens. */
GT_API gt_status_t gt_local_synthetic_generate(uint32_t vocab, uint32_t branching, uint64_t seed,
                                               size_t n, uint16_t *out) GT_MUST_USE;

/* Writes an llm.c token shard (used by tests and tools). */
GT_API gt_status_t gt_local_shard_write(const char *path, const uint16_t *tokens,
                                        size_t n) GT_MUST_USE;

/* Sharding. The token stream (text bytes, each shard file, or the synthetic corpus) is cut
 * into windows of B·T tokens; a batch is one window plus the next token (inputs are the
 * window, targets the same tokens shifted by one). Windows never cross a file boundary. The
 * W = Σ ranks workers of the run (every rank of every site; worker w = ranks of the sites
 * before this one + rank) take windows round-robin: worker w owns windows w, w + W, w + 2W,
 * ... up to the same count per worker, so shares are disjoint and equal, and each covers the
 * whole corpus evenly. Each epoch visits a worker's windows in a fresh seeded order. */
typedef struct {
    gt_topo_data_kind_t kind;
    const char *path; /* text: a file or a glob (GNU braces allowed); shards: a glob */
    uint32_t vocab_size;
    uint32_t synthetic_branching;
    uint64_t synthetic_tokens;
    uint64_t seed;     /* corpus generation and epoch order */
    size_t batch_size; /* B */
    size_t seq_len;    /* T */
    uint32_t worker;   /* this rank's index among all workers */
    uint32_t workers;  /* W */
} gt_local_data_params_t;

#define GT_LOCAL_DATA_PARAMS_INIT                    \
    {                                                \
        GT_DATA_TEXT, NULL, 256, 4, 0, 0, 1, 1, 0, 1 \
    }

/* Where a worker is in its share; part of the checkpoint state. */
typedef struct {
    uint64_t epoch;  /* completed passes over the share */
    uint64_t index;  /* batches taken in this epoch */
    uint64_t rng[4]; /* xoshiro256** state that draws each epoch's order */
} gt_local_data_pos_t;

typedef struct gt_local_data gt_local_data_t;

/* Opens (or generates) the corpus and validates it: shard headers (magic, version, token
 * count against the file size), tokens below vocab_size, at least one window per worker. */
GT_API gt_status_t gt_local_data_create(const gt_local_data_params_t *params,
                                        gt_local_data_t **data_p) GT_MUST_USE;
GT_API void gt_local_data_destroy(gt_local_data_t *data);
/* Fills inputs[B·T] and targets[B·T] with the next batch of this worker's share. */
GT_API gt_status_t gt_local_data_next(gt_local_data_t *data, int32_t *inputs,
                                      int32_t *targets) GT_MUST_USE;
GT_API void gt_local_data_get_pos(const gt_local_data_t *data, gt_local_data_pos_t *pos_p);
/* Restores a position saved by get_pos (same params). */
GT_API gt_status_t gt_local_data_set_pos(gt_local_data_t *data,
                                         const gt_local_data_pos_t *pos) GT_MUST_USE;
/* Corpus size in tokens, and this worker's batches per epoch. */
GT_API size_t gt_local_data_tokens(const gt_local_data_t *data);
GT_API size_t gt_local_data_batches_per_epoch(const gt_local_data_t *data);

/* Reads the first n tokens of an llm.c shard (validated) into out[n]. */
GT_API gt_status_t gt_local_shard_read_prefix(const char *path, size_t n, int32_t *out) GT_MUST_USE;

/* ---- GPT-2 tensors in safetensors ----
 * Names and shapes are Hugging Face GPT-2's (gt_kernels.h lists them). On reading, a leading
 * "transformer." is accepted, and the non-parameter entries HF files carry are skipped: the
 * attention mask buffers (h.N.attn.bias of 4 dims, h.N.attn.masked_bias) and lm_head.weight
 * (tied to wte.weight). Anything else that is not a parameter of the model, a shape that
 * differs from the model's, or a parameter that is missing is an error naming every offender. */

/* The model dimensions of a GPT-2 safetensors file: V and C from wte.weight, maxT from
 * wpe.weight, L from the highest h.N present; NH is not recorded in the file and is given. */
GT_API gt_status_t gt_local_gpt_config_from_st(const gt_local_st_t *st, size_t n_head,
                                               gt_gpt_config_t *cfg_p) GT_MUST_USE;
/* Fills one arena of `gpt` from the tensors named `prefix` + HF name (prefix "" for the
 * parameters). Every tensor must be present with the model's shape. */
GT_API gt_status_t gt_local_gpt_load(gt_gpt_t *gpt, gt_gpt_arena_t which, const gt_local_st_t *st,
                                     const char *prefix) GT_MUST_USE;

typedef struct {
    gt_gpt_arena_t arena;
    const char *prefix; /* prepended to every HF name; "" for none */
} gt_local_arena_ref_t;

/* Writes the given arenas of `gpt` (F32, HF names with each arena's prefix, in arena order)
 * plus `extra` tensors first, atomically. */
GT_API gt_status_t gt_local_gpt_save(gt_gpt_t *gpt, const gt_local_arena_ref_t *arenas,
                                     size_t n_arenas, const gt_local_st_entry_t *extra,
                                     size_t n_extra, const char *path) GT_MUST_USE;

/* ---- The in-site communicator (comm.c): the ranks of one site (docs/design.md §4) ----
 * A site of R ranks is one MPI job (`mpirun -np R geotrain run ...`, or srun); a one-rank site
 * needs no MPI: gt_local_comm_world gives MPI_COMM_WORLD when an MPI launcher started the
 * process (OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_SIZE in the environment) and a one-rank
 * communicator otherwise, without initialising MPI. Collectives are blocking for the caller
 * but wait politely (test, yield, sleep), so oversubscribed ranks do not spin each other out,
 * and each has a deadline. Builds without MPI (GT_HAVE_MPI undefined) support one rank only. */
typedef struct gt_local_comm gt_local_comm_t;
typedef enum { GT_COMM_FLOAT = 0, GT_COMM_DOUBLE = 1, GT_COMM_U64 = 2 } gt_local_comm_dtype_t;
typedef enum { GT_COMM_SUM = 0, GT_COMM_MAX = 1, GT_COMM_MIN = 2 } gt_local_comm_op_t;
typedef struct {
    void *impl; /* NULL: complete */
} gt_local_comm_req_t;

/* 1 when an MPI launcher started this process. */
GT_API int gt_local_comm_launched(void);
/* 1 when this build has MPI. */
GT_API int gt_local_comm_have_mpi(void);
/* The process's world: every rank of the job (MPI_Init_thread on first use, finalised at
 * exit), or one rank. GT_ERR_UNSUPPORTED under a launcher in a build without MPI. */
GT_API gt_status_t gt_local_comm_world(gt_local_comm_t **comm_p) GT_MUST_USE;
/* MPI_Comm_split: the ranks with the same color, ordered by key. Collective. */
GT_API gt_status_t gt_local_comm_split(gt_local_comm_t *c, int color, int key,
                                       gt_local_comm_t **sub_p) GT_MUST_USE;
GT_API void gt_local_comm_destroy(gt_local_comm_t *c); /* accepts NULL */
GT_API int gt_local_comm_rank(const gt_local_comm_t *c);
GT_API int gt_local_comm_size(const gt_local_comm_t *c);
/* This rank's index among the job's ranks on this machine (GPU selection). */
GT_API int gt_local_comm_local_rank(const gt_local_comm_t *c);
GT_API int gt_local_comm_is_mpi(const gt_local_comm_t *c);
/* In-place all-reduce of n elements (any n). */
GT_API gt_status_t gt_local_comm_allreduce(gt_local_comm_t *c, void *buf, size_t n,
                                           gt_local_comm_dtype_t dtype,
                                           gt_local_comm_op_t op) GT_MUST_USE;
/* The worst status of all the ranks (the largest error code; GT_OK only if every rank has
 * GT_OK): one collective that lets the ranks of a site leave a step, a round or a run together.
 * An error of the all-reduce itself is returned instead. */
GT_API gt_status_t gt_local_comm_agree(gt_local_comm_t *c, gt_status_t st) GT_MUST_USE;
/* In-place float sum whose result is bit-identical on every rank (reduced at rank 0, then
 * broadcast): what tensor parallelism needs to keep replicated weights equal. */
GT_API gt_status_t gt_local_comm_allreduce_uniform(gt_local_comm_t *c, float *buf,
                                                   size_t n) GT_MUST_USE;
/* Starts an in-place float sum; complete it with gt_local_comm_test or _wait before touching
 * buf. Requests must be completed in the order they were started on every rank. */
GT_API gt_status_t gt_local_comm_iallreduce_sum(gt_local_comm_t *c, float *buf, size_t n,
                                                gt_local_comm_req_t *req_p) GT_MUST_USE;
GT_API gt_status_t gt_local_comm_test(gt_local_comm_req_t *req, int *done_p) GT_MUST_USE;
GT_API gt_status_t gt_local_comm_wait(gt_local_comm_req_t *req) GT_MUST_USE;
/* Every rank's counts[rank] floats (from `mine`, or already in place at all + displs[rank]
 * when mine is NULL) gathered into all[] at displs[] on every rank. */
GT_API gt_status_t gt_local_comm_allgatherv(gt_local_comm_t *c, const float *mine, float *all,
                                            const size_t *counts, const size_t *displs) GT_MUST_USE;
GT_API gt_status_t gt_local_comm_bcast(gt_local_comm_t *c, void *buf, size_t bytes,
                                       int root) GT_MUST_USE;
GT_API gt_status_t gt_local_comm_barrier(gt_local_comm_t *c) GT_MUST_USE;
/* Takes the whole job down (MPI_Abort): a rank's failure is its site's failure. No-op for a
 * one-rank communicator. */
GT_API void gt_local_comm_abort(gt_local_comm_t *c, int code);

/* ---- NCCL inside a site (comm_nccl.c): the GPU all-reduce of a site's ranks ----
 * One NCCL communicator over the ranks of a gt_local_comm (usually the data-parallel
 * sub-communicator), one CUDA device per rank, with its own CUDA stream. Rank 0 makes the
 * ncclUniqueId and broadcasts it over the gt_local_comm (MPI). Nothing here waits without a
 * deadline: the communicator is created non-blocking and every wait polls
 * ncclCommGetAsyncError and the stream; on an error or when the deadline passes the NCCL
 * communicator is aborted (ncclCommAbort), the call returns an error, and every later call on
 * it returns GT_ERR_PEER_LOST: a rank that stops answering is its site's failure, never a hang.
 * Builds without CUDA/NCCL (GT_HAVE_NCCL undefined) keep these functions, which then return
 * GT_ERR_UNSUPPORTED. */
typedef struct gt_local_nccl gt_local_nccl_t;

/* Default deadline of one NCCL wait (creation, one all-reduce), seconds. */
#define GT_LOCAL_NCCL_TIMEOUT_S 600.0

/* 1 when this build has NCCL. */
GT_API int gt_local_nccl_available(void);
/* Collective over `comm`: every rank calls it, with the CUDA ordinal it will use (two ranks of
 * one communicator on the same device are refused by NCCL). A one-rank comm gives a one-rank
 * NCCL communicator (no MPI needed). GT_ERR_UNSUPPORTED without NCCL; GT_ERR_IO when CUDA or
 * NCCL fails (no device, ...); GT_ERR_TIMEOUT when the other ranks do not join in time. */
GT_API gt_status_t gt_local_nccl_create(gt_local_comm_t *comm, int cuda_device,
                                        gt_local_nccl_t **nccl_p) GT_MUST_USE;
/* Replaces dev_buf[0..n) (device memory on this rank's device, fp32) by the elementwise sum
 * over the ranks, in place, and returns when it is complete. bf16 != 0 reduces in bf16 (half
 * the bytes on the wire; the values are rounded to bf16 before the sum and the sum is rounded
 * again): converted into a scratch buffer kept by the communicator, reduced, widened back.
 * The caller's writes to dev_buf must be complete (every gt_gpt_* call returns with its work
 * done). Every rank calls it in the same order with the same n and bf16. Errors:
 * GT_ERR_TIMEOUT (deadline), GT_ERR_PEER_LOST (NCCL reported an error, or an earlier call
 * aborted this communicator), GT_ERR_IO (CUDA). */
GT_API gt_status_t gt_local_nccl_allreduce_sum(gt_local_nccl_t *nccl, float *dev_buf, size_t n,
                                               int bf16) GT_MUST_USE;
/* Sets the deadline of later waits (seconds > 0). */
GT_API void gt_local_nccl_set_timeout(gt_local_nccl_t *nccl, double seconds);
GT_API int gt_local_nccl_rank(const gt_local_nccl_t *nccl);
GT_API int gt_local_nccl_size(const gt_local_nccl_t *nccl);
/* Frees the communicator (ncclCommFinalize + destroy when healthy, abort otherwise), its
 * stream and scratch buffer. Accepts NULL. */
GT_API void gt_local_nccl_destroy(gt_local_nccl_t *nccl);

/* ---- The trainer: one rank's inner loop (docs/design.md §1) ----
 * Each step: the next batch of this rank's data share, forward, backward, global-norm
 * clipping (inner.grad_clip), AdamW at the learning rate of the warmup + cosine schedule over
 * run.rounds × inner.steps steps. The model is initialised from run.seed, the same at every
 * site. Everything a step depends on — parameters, AdamW moments, step count, data position
 * — is in a checkpoint, so a resumed run repeats a straight run bit for bit (same thread
 * count). */

typedef struct {
    const gt_topo_config_t *cfg; /* borrowed; must outlive the trainer */
    uint32_t site;               /* index into cfg->sites */
    uint32_t rank;               /* rank inside the site (< sites[site].ranks) */
    /* Called every step between backward and clipping, with the gradients in the model's
     * GT_GPT_GRADS arena; may replace them (sync-dp all-reduces them here). NULL: none. */
    gt_status_t (*grad_hook)(void *ctx, gt_gpt_t *gpt, uint64_t step);
    void *grad_hook_ctx;
    /* The site's ranks (borrowed; NULL or one rank: a one-rank site). With R ranks and
     * t = local.tensor_parallel, rank = d * t + j: ranks d*t .. d*t+t-1 split one model
     * (tensor parallel), and the R/t model replicas average their gradients every step
     * (data parallel, MPI on CPU). Each replica reads its own share of the data; `rank` above
     * must be this rank's index in comm. */
    gt_local_comm_t *comm;
} gt_local_trainer_params_t;

#define GT_LOCAL_TRAINER_PARAMS_INIT \
    {                                \
        NULL, 0, 0, NULL, NULL, NULL \
    }

typedef struct {
    uint64_t step;    /* steps done, this one included */
    float loss;       /* mean cross-entropy of this step's batch, nats */
    float lr;         /* learning rate used */
    float grad_norm;  /* global gradient norm before clipping */
    uint64_t tokens;  /* tokens the site (all its replicas) has trained on since the run began */
    double elapsed_s; /* seconds spent in steps since the run began (across resumes) */
} gt_local_step_stats_t;

typedef struct gt_local_trainer gt_local_trainer_t;

/* The model, B and T a config asks for: the preset with every non-zero model.* field of the
 * config overriding it (a changed vocab_size drops the preset's padding). */
GT_API gt_status_t gt_local_model_resolve(const gt_topo_config_t *cfg,
                                          gt_gpt_params_t *params_p) GT_MUST_USE;

GT_API gt_status_t gt_local_trainer_create(const gt_local_trainer_params_t *params,
                                           gt_local_trainer_t **tr_p) GT_MUST_USE;
GT_API void gt_local_trainer_destroy(gt_local_trainer_t *tr);
/* One inner step on the next batch of this rank's data share. Collective over the site's
 * ranks when it has several (every rank calls it the same number of times). stats_p->loss is
 * the mean over the model replicas. */
GT_API gt_status_t gt_local_trainer_step(gt_local_trainer_t *tr,
                                         gt_local_step_stats_t *stats_p) GT_MUST_USE;
/* The same step on a batch the caller brings (B·T inputs and targets of this replica, host
 * memory): for trainers with their own data pipeline. The data position does not move. */
GT_API gt_status_t gt_local_trainer_step_batch(gt_local_trainer_t *tr, const int32_t *inputs,
                                               const int32_t *targets,
                                               gt_local_step_stats_t *stats_p) GT_MUST_USE;
GT_API gt_gpt_t *gt_local_trainer_model(gt_local_trainer_t *tr);
GT_API uint64_t gt_local_trainer_steps_done(const gt_local_trainer_t *tr);
/* run.rounds × inner.steps. */
GT_API uint64_t gt_local_trainer_total_steps(const gt_local_trainer_t *tr);
/* Tokens one step trains on across the site: B·T times the model replicas. */
GT_API size_t gt_local_trainer_tokens_per_step(const gt_local_trainer_t *tr);
/* Seconds this trainer's steps spent waiting for the data-parallel gradient all-reduce after
 * backward (with local.overlap_grad_reduce, only the part backward did not hide); 0 for one
 * replica. Since the trainer was created. */
GT_API double gt_local_trainer_allreduce_s(const gt_local_trainer_t *tr);
/* Seconds spent in steps since the run began, across resumes. */
GT_API double gt_local_trainer_elapsed_s(const gt_local_trainer_t *tr);
/* The hash (XXH64, hex) of the resolved settings a run's numbers depend on (run.seed and
 * rounds, model.*, data.*, inner.*, outer.*, codec.*, local.threads, the sites' names, ranks
 * and backends). A resume with a different hash is refused. */
GT_API const char *gt_local_trainer_config_hash(const gt_local_trainer_t *tr);
/* A site joining a run in progress: moves a fresh trainer (no step taken) to `step` — the
 * learning-rate schedule and the steps left follow it — and skips the `step` batches of this
 * rank's data it would have trained on, so it does not repeat them. The AdamW moments start
 * from zero with their own bias correction from here. Tokens count only steps trained. */
GT_API gt_status_t gt_local_trainer_skip_to(gt_local_trainer_t *tr, uint64_t step) GT_MUST_USE;
/* outer.catch_up: the round the trainer was in ended early (gt_diloco_step moved the run's step
 * counter to its end): moves the step counter — the learning-rate schedule and the steps left —
 * ahead to `step` without training or reading data (the next batch is the next one of the
 * data, not a skipped one) and without touching the AdamW moments or their bias correction. */
GT_API gt_status_t gt_local_trainer_advance(gt_local_trainer_t *tr, uint64_t step) GT_MUST_USE;
/* Replaces the parameters by those of a GPT-2 safetensors file (an initialisation; shapes
 * must match the configured model) and zeroes the AdamW moments. Only before the first step. */
GT_API gt_status_t gt_local_trainer_init_from(gt_local_trainer_t *tr, const char *path) GT_MUST_USE;

/* Checkpoints. `root` holds one folder per checkpoint, step-NNNNNNNN/, with
 * model.safetensors (parameters, HF GPT-2 names: loads in Hugging Face as is),
 * optimizer.safetensors (AdamW m and v as "m.<name>" and "v.<name>") and state.json (step,
 * round, tokens, data position and generator state, config hash and settings). A folder is
 * written as step-NNNNNNNN.tmp, every file fsynced, then renamed: the rename is the commit,
 * so the latest complete folder is always whole. The newest `keep` folders are kept. */
GT_API gt_status_t gt_local_trainer_save(gt_local_trainer_t *tr, const char *root,
                                         unsigned keep) GT_MUST_USE;
/* Loads the newest intact checkpoint under `root` (GT_ERR_NOT_FOUND when there is none) after
 * checking its config hash against this trainer's; a mismatch is GT_ERR_CONFIG and names
 * the settings that differ. A checkpoint whose files fail their recorded size or checksum,
 * whose state.json does not parse, or that holds a non-finite value is logged and skipped for
 * the next older one; GT_ERR_CORRUPT when none is intact. After an error the trainer may
 * hold part of a checkpoint: destroy it. */
GT_API gt_status_t gt_local_trainer_resume(gt_local_trainer_t *tr, const char *root) GT_MUST_USE;
/* Loads the checkpoint of exactly `step` under `root` (the step a whole run resumes at), with
 * the same checks; GT_ERR_CORRUPT or GT_ERR_CONFIG when it fails one. */
GT_API gt_status_t gt_local_trainer_resume_step(gt_local_trainer_t *tr, const char *root,
                                                uint64_t step) GT_MUST_USE;
/* The steps of the checkpoints under `root` that pass every check but the finiteness of the
 * values (config hash, sizes, checksums), newest first, at most `cap`; nothing is loaded. A
 * checkpoint that fails is logged and left out. */
GT_API gt_status_t gt_local_trainer_ckpt_steps(gt_local_trainer_t *tr, const char *root,
                                               uint64_t *steps_p, size_t cap,
                                               size_t *n_p) GT_MUST_USE;
/* The newest complete checkpoint folder under `root` into path_p[n]; GT_ERR_NOT_FOUND if
 * none. */
GT_API gt_status_t gt_local_ckpt_latest(const char *root, char *path_p, size_t n) GT_MUST_USE;

/* ---- Metrics: one JSON object per line ---- */
typedef struct gt_local_metrics gt_local_metrics_t;
/* Opens `path` for appending. Lines with a step above `keep_through_step` are dropped first
 * (a resumed run rewrites the steps after its checkpoint); 0 starts the file afresh. */
GT_API gt_status_t gt_local_metrics_open(const char *path, uint64_t keep_through_step,
                                         gt_local_metrics_t **m_p) GT_MUST_USE;
/* {"step", "loss", "lr", "grad_norm", "tokens", "tokens_per_s", "time"} */
GT_API gt_status_t gt_local_metrics_write(gt_local_metrics_t *m, const gt_local_step_stats_t *s,
                                          double tokens_per_s) GT_MUST_USE;
GT_API void gt_local_metrics_close(gt_local_metrics_t *m);

/* ---- A site of a multi-site DiLoCo run (site.c) ----
 * gt_local_site_run trains one site (one rank) of a config with several sites: the inner
 * loop, outer rounds over the WAN (wan.transport, security, emulation), membership in etcd
 * (membership.endpoints must name at least one), the outer optimizer on the anchor, and the
 * files SITE/metrics.jsonl, SITE/status.json, SITE/summary.json and SITE/checkpoints/ under
 * run_dir. It returns when the run is done, when *stop becomes non-zero (GT_ERR_CLOSED: the
 * site deregisters and leaves), or on an error (the others go on without it).
 *
 * Joining: when etcd marks the run as started (a site that starts late, or comes back after
 * dying), the site joins instead of starting: it fetches the anchor and outer momentum from the
 * running sites, announces its first round, moves its step counter and data position to match
 * (gt_local_trainer_skip_to; AdamW moments start fresh) and trains the rest of the run. Its
 * SITE/summary.json has joined_round and steps_trained. */
typedef struct {
    const gt_topo_config_t *cfg; /* borrowed */
    const char *site;            /* this site's name */
    const char *run_dir;         /* the run directory (shared by all sites of the run) */
    const char *run_id;          /* names the run in etcd and in the secure channel */
    /* Injected faults (gt_faults.h: a slow site, chaos slowdowns, a corrupted anchor, a kill
     * at a round), copied; NULL: none. */
    const gt_faults_t *faults;
    const volatile int *stop; /* polled; may be NULL */
    /* The site's ranks (borrowed; NULL: one rank). Every rank of the site calls
     * gt_local_site_run; rank k carries the WAN traffic and outer state of lanes
     * {l : l mod R = k} (DESIGN §3) and rank 0 writes the site's files. */
    gt_local_comm_t *comm;
    /* How many sites (this one included) must have registered before round 0 starts; 0 = all
     * configured sites. Fewer when some are to join later (`geotrain launch --join`). */
    uint32_t expect_sites;
    /* 1: resume the run from the site's checkpoints (SITE/checkpoints/: the trainer's and the
     * outer state's in outer/), at the newest step every site that starts the run has; a run
     * in progress is joined instead. */
    int resume;
} gt_local_site_params_t;

#define GT_LOCAL_SITE_PARAMS_INIT                            \
    {                                                        \
        NULL, NULL, NULL, "geotrain", NULL, NULL, NULL, 0, 0 \
    }

GT_API gt_status_t gt_local_site_run(const gt_local_site_params_t *params) GT_MUST_USE;

#ifdef __cplusplus
}
#endif

#endif /* GT_LOCAL_H */
