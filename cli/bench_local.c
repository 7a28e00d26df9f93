/* bench_local.c — `geotrain bench local`: the in-site (one MPI job) paths of a site.
 *
 * Three parts, each printing JSON lines on rank 0:
 *   - all-reduce bus bandwidth of geotrain's in-site path — gt_local_comm_allreduce (MPI,
 *     CPU) and, on GPU, gt_local_nccl_allreduce_sum in fp32 and bf16 — beside the library's
 *     own rate for the same buffer, measured in the same run, interleaved sample by sample:
 *     the MPI library's plain blocking MPI_Allreduce, and NCCL's own ncclAllReduce enqueued
 *     back to back (as nccl-tests times it). busbw = bytes / time × 2(R−1)/R (nccl-tests'
 *     convention); a time is the slowest rank's, the median of --reps samples. A `wrong`
 *     column counts result elements that differ from the exact sum (small integers, exact in
 *     fp32 and bf16), checked on one separate run per size and path, as nccl-tests does;
 *   - training tokens/s of a preset (default small, CPU) with 1 rank and with the job's R
 *     ranks through the data-parallel trainer: the site's tokens/s (all replicas), the
 *     speed-up, and the gradient all-reduce's time share (the all-reduce of the gradient
 *     arena timed alone, on the same communicator, right after the training steps — the
 *     trainer does not export its own timer). `wrong` counts non-finite losses and replicas
 *     whose parameters differ after the steps (data parallelism must keep them identical);
 *   - on a CUDA device: one rank training gpt2-124m with the NCCL all-reduce of the gradients
 *     in the step (fp32, one rank), tokens/s and MFU against the device's dense bf16 peak
 *     (a table by device name, or --peak-tflops). Without a device: a "skipped" row.
 *
 * It runs as an MPI job (`mpirun -np 2 geotrain bench local`). Started without a launcher
 * with --ranks N > 1 (default 2), it re-executes itself under mpirun -np N and says so on
 * stderr; --ranks 1 runs here, one rank (training row for 1 rank only).
 */
#include "cli.h"
#include "gt_kernels.h"
#include "gt_local.h"
#include "gt_topology.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef GT_HAVE_MPI
#include <mpi.h>
#endif
#ifdef GT_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
#endif

#ifndef GT_MPIEXEC
#define GT_MPIEXEC "mpirun"
#endif

#define MAX_REPS   64
#define ITER_BYTES ((size_t)16 << 20) /* per timed sample, small sizes repeat up to 20 times */

typedef struct {
    int ranks, quick, reps, skip_train, skip_gpu;
    size_t min_bytes, max_bytes;
    const char *preset, *gpu_preset;
    size_t batch, steps, warmup, threads;
    double peak_tflops;
} bl_opts_t;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: mpirun -np R geotrain bench local [options]\n"
            "       geotrain bench local [--ranks R] [options]   (re-runs itself under mpirun)\n\n"
            "Benchmarks a site's in-site paths and prints one JSON object per line:\n"
            "  all-reduce   geotrain's in-site all-reduce (MPI on CPU: gt_mpi; NCCL on GPU:\n"
            "               gt_nccl, gt_nccl_bf16) beside the library's own rate for the same\n"
            "               buffer in the same run (MPI_Allreduce; ncclAllReduce). busbw_gbps =\n"
            "               bytes/time x 2(R-1)/R in GB/s as nccl-tests reports it (bf16 rows\n"
            "               count the fp32 buffer's bytes); time = slowest rank, median of\n"
            "               --reps; wrong = elements that differ from the exact sum.\n"
            "  train        tokens/s of --preset on the CPU with 1 rank and with R ranks\n"
            "               (data parallel, the whole site's tokens), speed-up, and the share\n"
            "               of a step the gradient all-reduce takes (timed alone, same size).\n"
            "  train cuda   with a CUDA device: one rank training --gpu-preset with the NCCL\n"
            "               gradient all-reduce in the step: tokens/s and MFU. Else a\n"
            "               \"skipped\" row.\n\n"
            "Options:\n"
            "  --ranks N          without mpirun: re-run under `mpirun -np N` (default 2;\n"
            "                     1 = run here with one rank). Ignored under mpirun.\n"
            "  --quick            small sizes and few steps (a few seconds: tests)\n"
            "  --min BYTES        smallest all-reduce buffer (default 64K; K, M, G suffixes)\n"
            "  --max BYTES        largest (default 256M; --quick 1M); sizes step x4\n"
            "  --reps N           timed samples per size, median reported (default 5)\n"
            "  --preset NAME      CPU training preset (default small)\n"
            "  --batch B          sequences per rank per step (default: the preset's; --quick 2)\n"
            "  --steps N          timed training steps (default 8; --quick 2)\n"
            "  --warmup N         untimed steps first (default 2; --quick 1)\n"
            "  --threads N        CPU threads per rank (default 1)\n"
            "  --gpu-preset NAME  CUDA training preset (default gpt2-124m)\n"
            "  --peak-tflops X    the GPU's dense bf16 peak for MFU (default: by device name)\n"
            "  --no-train         all-reduce rows only\n"
            "  --no-gpu           leave the CUDA parts out\n"
            "  -h, --help         this text\n\n"
            "Exit code 1 when a row has wrong > 0 or a part fails.\n");
}

static double now_s(void)
{
    return (double)gt_time_ns() * 1e-9;
}

/* The slowest rank's value (a collective's time is its last rank's). */
static double max_over(gt_local_comm_t *w, double v)
{
    if (gt_local_comm_allreduce(w, &v, 1, GT_COMM_DOUBLE, GT_COMM_MAX) != GT_OK)
        gt_local_comm_abort(w, 1);
    return v;
}

static uint64_t sum_over(gt_local_comm_t *w, uint64_t v)
{
    if (gt_local_comm_allreduce(w, &v, 1, GT_COMM_U64, GT_COMM_SUM) != GT_OK)
        gt_local_comm_abort(w, 1);
    return v;
}

/* Rank r's contribution: small integers whose sum over up to 32 ranks is exact in bf16. */
static float pattern(size_t i, int r)
{
    return (float)((i + (size_t)r) % 8 + 1);
}

static void fill(float *h, size_t n, int rank)
{
    for (size_t i = 0; i < n; i++) h[i] = pattern(i, rank);
}

static uint64_t count_wrong(const float *h, size_t n, int R)
{
    float want[8];
    for (size_t k = 0; k < 8; k++) {
        want[k] = 0;
        for (int r = 0; r < R; r++) want[k] += pattern(k, r);
    }
    uint64_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += h[i] != want[i % 8];
    return bad;
}

static size_t iters_for(size_t bytes)
{
    size_t it = ITER_BYTES / bytes;
    return it < 1 ? 1 : it > 20 ? 20 : it;
}

static double busbw(size_t bytes, double t, int R)
{
    return t > 0 ? (double)bytes / t * 2.0 * (R - 1) / R / 1e9 : 0;
}

static void print_ar_row(const char *backend, const char *ref, int R, size_t bytes, size_t iters,
                         int reps, double t, double tref, uint64_t wrong, uint64_t ref_wrong,
                         double tnb)
{
    printf("{\"bench\":\"local\",\"kind\":\"allreduce\",\"backend\":\"%s\",\"ref\":\"%s\","
           "\"ranks\":%d,\"bytes\":%zu,\"iters\":%zu,\"reps\":%d,\"time_us\":%.2f,"
           "\"algbw_gbps\":%.4f,\"busbw_gbps\":%.4f,\"ref_time_us\":%.2f,"
           "\"ref_busbw_gbps\":%.4f,\"ratio\":%.3f,\"wrong\":%llu,\"ref_wrong\":%llu",
           backend, ref, R, bytes, iters, reps, t * 1e6, (double)bytes / t / 1e9,
           busbw(bytes, t, R), tref * 1e6, busbw(bytes, tref, R), t > 0 ? tref / t : 0.0,
           (unsigned long long)wrong, (unsigned long long)ref_wrong);
    if (tnb > 0)
        printf(",\"iallreduce_wait_time_us\":%.2f,\"iallreduce_wait_busbw_gbps\":%.4f", tnb * 1e6,
               busbw(bytes, tnb, R));
    printf("}\n");
    fflush(stdout);
}

static void print_skip(const char *kind, const char *backend, const char *why)
{
    printf("{\"bench\":\"local\",\"kind\":\"%s\",\"backend\":\"%s\",\"skipped\":\"%s\"}\n", kind,
           backend, why);
    fflush(stdout);
}

/* ---- all-reduce over MPI (CPU) ---------------------------------------------------------- */

static int bench_ar_mpi(gt_local_comm_t *w, const bl_opts_t *o)
{
    int R = gt_local_comm_size(w), me = gt_local_comm_rank(w);
    if (R < 2 || !gt_local_comm_is_mpi(w)) {
        if (me == 0)
            print_skip("allreduce", "gt_mpi",
                       "one rank: run it as `mpirun -np 2 geotrain bench local`");
        return 0;
    }
#ifdef GT_HAVE_MPI
    float *buf = malloc(o->max_bytes);
    if (!buf) {
        fprintf(stderr, "geotrain bench local: out of memory\n");
        gt_local_comm_abort(w, 1);
        return 1;
    }
    int bad = 0;
    for (size_t bytes = o->min_bytes; bytes <= o->max_bytes; bytes *= 4) {
        size_t n = bytes / 4, iters = iters_for(bytes);
        double t[MAX_REPS], tr[MAX_REPS], tn[MAX_REPS];
        /* one checked run of each */
        fill(buf, n, me);
        if (gt_local_comm_allreduce(w, buf, n, GT_COMM_FLOAT, GT_COMM_SUM) != GT_OK)
            gt_local_comm_abort(w, 1);
        uint64_t wrong = sum_over(w, count_wrong(buf, n, R));
        fill(buf, n, me);
        if (MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) !=
            MPI_SUCCESS)
            gt_local_comm_abort(w, 1);
        uint64_t ref_wrong = sum_over(w, count_wrong(buf, n, R));
        for (int rep = 0; rep < o->reps; rep++) {
            fill(buf, n, me);
            if (gt_local_comm_barrier(w) != GT_OK) gt_local_comm_abort(w, 1);
            double t0 = now_s();
            for (size_t it = 0; it < iters; it++)
                if (gt_local_comm_allreduce(w, buf, n, GT_COMM_FLOAT, GT_COMM_SUM) != GT_OK)
                    gt_local_comm_abort(w, 1);
            t[rep] = max_over(w, (now_s() - t0) / (double)iters);
            fill(buf, n, me);
            if (gt_local_comm_barrier(w) != GT_OK) gt_local_comm_abort(w, 1);
            t0 = now_s();
            for (size_t it = 0; it < iters; it++)
                MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            tr[rep] = max_over(w, (now_s() - t0) / (double)iters);
            /* what gt_mpi is built on (MPI_Iallreduce) with MPI's own spinning wait: tells
             * the cost of the non-blocking algorithm from the cost of the polite wait */
            fill(buf, n, me);
            if (gt_local_comm_barrier(w) != GT_OK) gt_local_comm_abort(w, 1);
            t0 = now_s();
            for (size_t it = 0; it < iters; it++) {
                MPI_Request rq;
                MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq);
                MPI_Wait(&rq, MPI_STATUS_IGNORE);
            }
            tn[rep] = max_over(w, (now_s() - t0) / (double)iters);
        }
        if (me == 0)
            print_ar_row("gt_mpi", "MPI_Allreduce", R, bytes, iters, o->reps,
                         gt_cli_median(t, (size_t)o->reps), gt_cli_median(tr, (size_t)o->reps),
                         wrong, ref_wrong, gt_cli_median(tn, (size_t)o->reps));
        bad |= wrong != 0 || ref_wrong != 0;
    }
    free(buf);
    return bad;
#else
    (void)o;
    return 0;
#endif
}

/* ---- all-reduce over NCCL (GPU) --------------------------------------------------------- */

#ifdef GT_HAVE_NCCL
/* 1 when every rank of w has a CUDA device of its own (local rank < devices on its node). */
static int all_ranks_have_gpu(gt_local_comm_t *w, int *ndev_p)
{
    int ndev = 0;
    if (gt_kern_cuda_device_count(&ndev) != GT_OK) ndev = 0;
    float ok = ndev > gt_local_comm_local_rank(w) ? 1.0f : 0.0f;
    if (gt_local_comm_allreduce(w, &ok, 1, GT_COMM_FLOAT, GT_COMM_MIN) != GT_OK)
        gt_local_comm_abort(w, 1);
    *ndev_p = ndev;
    return ok > 0;
}

static void cuda_or_abort(gt_local_comm_t *w, cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return;
    fprintf(stderr, "geotrain bench local: %s: %s\n", what, cudaGetErrorString(e));
    gt_local_comm_abort(w, 1);
    exit(1);
}

static void nccl_or_abort(gt_local_comm_t *w, ncclResult_t r, const char *what)
{
    if (r == ncclSuccess) return;
    fprintf(stderr, "geotrain bench local: %s: %s\n", what, ncclGetErrorString(r));
    gt_local_comm_abort(w, 1);
    exit(1);
}

/* bf16 bits of small integers: the top half of the float (exact for these values). */
static void to_bf16(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &src[i], 4);
        dst[i] = (uint16_t)(u >> 16);
    }
}

static void from_bf16(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)src[i] << 16;
        memcpy(&dst[i], &u, 4);
    }
}

static int bench_ar_nccl(gt_local_comm_t *w, const bl_opts_t *o)
{
    int R = gt_local_comm_size(w), me = gt_local_comm_rank(w), ndev = 0;
    if (!all_ranks_have_gpu(w, &ndev)) {
        if (me == 0)
            print_skip("allreduce", "gt_nccl",
                       ndev == 0 ? "no CUDA device"
                                 : "fewer CUDA devices than ranks on a node (NCCL needs one "
                                   "device per rank)");
        return 0;
    }
    int dev = gt_local_comm_local_rank(w);
    gt_local_nccl_t *g = NULL;
    if (gt_local_nccl_create(w, dev, &g) != GT_OK) {
        gt_local_comm_abort(w, 1);
        return 1;
    }
    /* NCCL's own communicator for the reference rows */
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (me == 0) nccl_or_abort(w, ncclGetUniqueId(&id), "ncclGetUniqueId");
    if (gt_local_comm_bcast(w, &id, sizeof id, 0) != GT_OK) gt_local_comm_abort(w, 1);
    ncclComm_t rc;
    cudaStream_t s;
    cuda_or_abort(w, cudaSetDevice(dev), "cudaSetDevice");
    nccl_or_abort(w, ncclCommInitRank(&rc, R, id, me), "ncclCommInitRank");
    cuda_or_abort(w, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    size_t nmax = o->max_bytes / 4;
    float *d = NULL, *h = malloc(nmax * 4);
    uint16_t *hb = malloc(nmax * 2);
    void *db = NULL;
    if (!h || !hb) {
        fprintf(stderr, "geotrain bench local: out of memory\n");
        gt_local_comm_abort(w, 1);
        return 1;
    }
    cuda_or_abort(w, cudaMalloc((void **)&d, nmax * 4), "cudaMalloc");
    cuda_or_abort(w, cudaMalloc(&db, nmax * 2), "cudaMalloc");
    int bad = 0;
    for (int bf16 = 0; bf16 < 2; bf16++) {
        for (size_t bytes = o->min_bytes; bytes <= o->max_bytes; bytes *= 4) {
            size_t n = bytes / 4, iters = iters_for(bytes);
            double t[MAX_REPS], tr[MAX_REPS];
            fill(h, n, me);
            to_bf16(hb, h, n);
            /* checked runs: ours, then NCCL's own */
            cuda_or_abort(w, cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice), "upload");
            if (gt_local_nccl_allreduce_sum(g, d, n, bf16) != GT_OK) gt_local_comm_abort(w, 1);
            cuda_or_abort(w, cudaMemcpy(h, d, n * 4, cudaMemcpyDeviceToHost), "download");
            uint64_t wrong = sum_over(w, count_wrong(h, n, R));
            fill(h, n, me);
            void *rbuf = bf16 ? db : (void *)d;
            cuda_or_abort(w,
                          bf16 ? cudaMemcpy(db, hb, n * 2, cudaMemcpyHostToDevice)
                               : cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice),
                          "upload");
            nccl_or_abort(
                w, ncclAllReduce(rbuf, rbuf, n, bf16 ? ncclBfloat16 : ncclFloat, ncclSum, rc, s),
                "ncclAllReduce");
            cuda_or_abort(w, cudaStreamSynchronize(s), "cudaStreamSynchronize");
            if (bf16) {
                cuda_or_abort(w, cudaMemcpy(hb, db, n * 2, cudaMemcpyDeviceToHost), "download");
                from_bf16(h, hb, n);
            } else {
                cuda_or_abort(w, cudaMemcpy(h, d, n * 4, cudaMemcpyDeviceToHost), "download");
            }
            uint64_t ref_wrong = sum_over(w, count_wrong(h, n, R));
            fill(h, n, me);
            for (int rep = 0; rep < o->reps; rep++) {
                cuda_or_abort(w, cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice), "upload");
                if (gt_local_comm_barrier(w) != GT_OK) gt_local_comm_abort(w, 1);
                double t0 = now_s();
                for (size_t it = 0; it < iters; it++)
                    if (gt_local_nccl_allreduce_sum(g, d, n, bf16) != GT_OK)
                        gt_local_comm_abort(w, 1);
                t[rep] = max_over(w, (now_s() - t0) / (double)iters);
                cuda_or_abort(w, cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice), "upload");
                if (gt_local_comm_barrier(w) != GT_OK) gt_local_comm_abort(w, 1);
                t0 = now_s();
                for (size_t it = 0; it < iters; it++)
                    nccl_or_abort(w,
                                  ncclAllReduce(rbuf, rbuf, n, bf16 ? ncclBfloat16 : ncclFloat,
                                                ncclSum, rc, s),
                                  "ncclAllReduce");
                cuda_or_abort(w, cudaStreamSynchronize(s), "cudaStreamSynchronize");
                tr[rep] = max_over(w, (now_s() - t0) / (double)iters);
            }
            if (me == 0)
                print_ar_row(bf16 ? "gt_nccl_bf16" : "gt_nccl",
                             bf16 ? "ncclAllReduce_bf16" : "ncclAllReduce", R, bytes, iters,
                             o->reps, gt_cli_median(t, (size_t)o->reps),
                             gt_cli_median(tr, (size_t)o->reps), wrong, ref_wrong, 0);
            bad |= wrong != 0 || ref_wrong != 0;
        }
    }
    cudaFree(d);
    cudaFree(db);
    free(h);
    free(hb);
    cudaStreamDestroy(s);
    ncclCommDestroy(rc);
    gt_local_nccl_destroy(g);
    return bad;
}
#endif

/* ---- training tokens/s ------------------------------------------------------------------ */

static gt_topo_config_t *make_cfg(const char *preset, size_t B, size_t threads, int ranks,
                                  const char *backend, size_t tokens)
{
    char text[1024], bs[64] = "";
    if (B) snprintf(bs, sizeof bs, ", batch_size: %zu", B);
    snprintf(text, sizeof text,
             "run: {name: bench-local, seed: 1, rounds: 1}\n"
             "model: {preset: %s%s}\n"
             "data: {kind: synthetic, synthetic_branching: 4, synthetic_tokens: %zu}\n"
             "inner: {steps: 100000, lr: 0.0006, warmup_steps: 1, grad_clip: 1.0}\n"
             "local: {threads: %zu}\n"
             "sites: [{name: s, address: \"127.0.0.1:0\", ranks: %d, backend: %s}]\n",
             preset, bs, tokens, threads, ranks, backend);
    gt_topo_config_t *cfg = NULL;
    gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;
    lp.use_env = 1;
    if (gt_topo_load_string(text, strlen(text), "bench-local.yaml", &lp, &cfg) != GT_OK)
        return NULL;
    return cfg;
}

typedef struct {
    double step_s; /* median step time */
    float loss_first, loss_last;
    uint64_t wrong;
    size_t tokens_per_step; /* the site's: every replica's batch */
    size_t params, arena;
    size_t B, T;
    double hook_s;    /* median time in the grad hook (the GPU run's NCCL all-reduce) */
    double exposed_s; /* per step: the trainer's wait for its gradient all-reduce */
} train_result_t;

typedef struct {
    gt_local_nccl_t *nccl;
    double t[MAX_REPS];
    size_t n;
} nccl_hook_t;

static gt_status_t nccl_hook(void *ctx, gt_gpt_t *gpt, uint64_t step)
{
    nccl_hook_t *h = ctx;
    (void)step;
    const gt_gpt_params_t *gp = gt_gpt_get_params(gpt);
    double t0 = now_s();
    gt_status_t s = gt_local_nccl_allreduce_sum(h->nccl, gt_gpt_arena(gpt, GT_GPT_GRADS),
                                                gt_gpt_local_len(gp), 0);
    if (h->n < sizeof h->t / sizeof h->t[0]) h->t[h->n++] = now_s() - t0;
    return s;
}

static uint64_t fnv1a(const void *p, size_t len)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* One trainer being timed: open, step (warmup steps untimed), close into a result. */
typedef struct {
    gt_local_trainer_t *tr;
    gt_local_comm_t *comm;
    nccl_hook_t *hook;
    size_t done, warmup, timed;
    double t[MAX_REPS];
    train_result_t res;
} train_run_t;

static gt_status_t train_open(const gt_topo_config_t *cfg, gt_local_comm_t *comm, int rank,
                              const bl_opts_t *o, nccl_hook_t *hook, train_run_t *run)
{
    memset(run, 0, sizeof *run);
    run->comm = comm;
    run->hook = hook;
    run->warmup = o->warmup;
    gt_local_trainer_params_t p = GT_LOCAL_TRAINER_PARAMS_INIT;
    p.cfg = cfg;
    p.rank = (uint32_t)rank;
    p.comm = comm;
    if (hook) {
        p.grad_hook = nccl_hook;
        p.grad_hook_ctx = hook;
    }
    return gt_local_trainer_create(&p, &run->tr);
}

static gt_status_t train_step(train_run_t *run)
{
    gt_local_step_stats_t ss;
    if (run->hook && run->done == run->warmup) run->hook->n = 0;
    double t0 = now_s();
    gt_status_t s = gt_local_trainer_step(run->tr, &ss);
    if (s != GT_OK) return s;
    if (run->done >= run->warmup && run->timed < MAX_REPS) run->t[run->timed++] = now_s() - t0;
    if (!isfinite(ss.loss)) run->res.wrong++;
    if (run->done == 0) run->res.loss_first = ss.loss;
    run->res.loss_last = ss.loss;
    run->done++;
    return GT_OK;
}

/* Fills run->res (collective over run->comm when it has several ranks) and frees the trainer. */
static void train_close(train_run_t *run)
{
    train_result_t *res = &run->res;
    if (run->tr && run->timed) {
        gt_gpt_t *gpt = gt_local_trainer_model(run->tr);
        const gt_gpt_params_t *gp = gt_gpt_get_params(gpt);
        res->step_s = gt_cli_median(run->t, run->timed);
        uint64_t done = gt_local_trainer_steps_done(run->tr);
        res->exposed_s = done ? gt_local_trainer_allreduce_s(run->tr) / (double)done : 0.0;
        res->tokens_per_step = gt_local_trainer_tokens_per_step(run->tr);
        res->params = gt_gpt_param_count(&gp->model);
        res->arena = gt_gpt_local_len(gp);
        res->B = gp->B;
        res->T = gp->T;
        if (run->hook && run->hook->n) res->hook_s = gt_cli_median(run->hook->t, run->hook->n);
        /* data-parallel replicas must hold identical parameters */
        gt_local_comm_t *c = run->comm;
        if (c && gt_local_comm_size(c) > 1 && gp->device == GT_DEVICE_CPU) {
            uint64_t h = fnv1a(gt_gpt_arena(gpt, GT_GPT_PARAMS), res->arena * sizeof(float));
            uint64_t lo = h, hi = h;
            if (gt_local_comm_allreduce(c, &lo, 1, GT_COMM_U64, GT_COMM_MIN) != GT_OK ||
                gt_local_comm_allreduce(c, &hi, 1, GT_COMM_U64, GT_COMM_MAX) != GT_OK)
                gt_local_comm_abort(c, 1);
            if (lo != hi) res->wrong++;
        }
    }
    gt_local_trainer_destroy(run->tr);
    run->tr = NULL;
}

static size_t corpus_tokens(size_t B, size_t T, int ranks, const bl_opts_t *o)
{
    size_t need = B * T * (size_t)ranks * (o->warmup + o->steps + 2) + 1;
    return need < 100000 ? 100000 : need;
}

static void print_train_row(const char *device, const char *preset, int ranks, const bl_opts_t *o,
                            const train_result_t *r, double tps, double base, double ar_s,
                            uint64_t wrong)
{
    printf("{\"bench\":\"local\",\"kind\":\"train\",\"device\":\"%s\",\"preset\":\"%s\","
           "\"ranks\":%d,\"threads_per_rank\":%zu,\"B\":%zu,\"T\":%zu,\"params\":%zu,"
           "\"tokens_per_step\":%zu,\"steps\":%zu,\"step_ms_median\":%.3f,"
           "\"tokens_per_s\":%.1f",
           device, preset, ranks, o->threads, r->B, r->T, r->params, r->tokens_per_step, o->steps,
           r->step_s * 1e3, tps);
    if (base > 0) printf(",\"speedup\":%.3f,\"efficiency\":%.3f", tps / base, tps / base / ranks);
    if (ranks > 1)
        printf(",\"allreduce_ms\":%.3f,\"allreduce_share\":%.4f,\"allreduce_exposed_ms\":%.3f",
               ar_s * 1e3, r->step_s > 0 ? ar_s / r->step_s : 0.0, r->exposed_s * 1e3);
    printf(",\"loss_first\":%.4f,\"loss_last\":%.4f,\"wrong\":%llu}\n", r->loss_first, r->loss_last,
           (unsigned long long)wrong);
    fflush(stdout);
}

static void train_fail(gt_local_comm_t *w, const char *what, gt_status_t s)
{
    fprintf(stderr, "geotrain bench local: %s failed on rank %d: %s\n", what, gt_local_comm_rank(w),
            gt_status_str(s));
    gt_local_comm_abort(w, 1);
    exit(1);
}

/* 1 rank and R ranks, step for step in turn (a 1-rank step on rank 0 while the others wait
 * politely at a barrier, then an R-rank step, then the gradient-sized all-reduce alone), so
 * that load from other jobs on shared cores weighs on both alike. */
static int bench_train_cpu(gt_local_comm_t *w, const bl_opts_t *o)
{
    int R = gt_local_comm_size(w), me = gt_local_comm_rank(w);
    gt_gpt_preset_t pr;
    if (gt_gpt_preset_find(o->preset, &pr) != GT_OK) {
        fprintf(stderr, "geotrain bench local: unknown preset '%s'\n", o->preset);
        return 1;
    }
    size_t B = o->batch ? o->batch : pr.B;
    gt_topo_config_t *cfg1 = NULL, *cfgR = NULL;
    train_run_t one, all;
    memset(&one, 0, sizeof one);
    memset(&all, 0, sizeof all);
    gt_status_t s;
    if (me == 0) {
        cfg1 = make_cfg(o->preset, B, o->threads, 1, "cpu", corpus_tokens(B, pr.T, 1, o));
        if ((s = cfg1 ? train_open(cfg1, NULL, 0, o, NULL, &one) : GT_ERR_CONFIG) != GT_OK)
            train_fail(w, "1-rank trainer", s);
    }
    if (R > 1) {
        cfgR = make_cfg(o->preset, B, o->threads, R, "cpu", corpus_tokens(B, pr.T, R, o));
        if ((s = cfgR ? train_open(cfgR, w, me, o, NULL, &all) : GT_ERR_CONFIG) != GT_OK)
            train_fail(w, "R-rank trainer", s);
    }
    size_t n_ar = one.tr ? gt_gpt_local_len(gt_gpt_get_params(gt_local_trainer_model(one.tr))) : 0;
    if (all.tr) n_ar = gt_gpt_local_len(gt_gpt_get_params(gt_local_trainer_model(all.tr)));
    float *g = R > 1 ? calloc(n_ar ? n_ar : 1, sizeof *g) : NULL;
    double ts[MAX_REPS];
    size_t n_ts = 0;
    if (R > 1 && !g) train_fail(w, "allocation", GT_ERR_NOMEM);
    for (size_t i = 0; i < o->warmup + o->steps; i++) {
        if (me == 0 && (s = train_step(&one)) != GT_OK) train_fail(w, "1-rank step", s);
        if (R < 2) continue;
        if (gt_local_comm_barrier(w) != GT_OK) gt_local_comm_abort(w, 1);
        if ((s = train_step(&all)) != GT_OK) train_fail(w, "R-rank step", s);
        /* the gradient all-reduce alone: same size, same communicator, same polite wait */
        if (gt_local_comm_barrier(w) != GT_OK) gt_local_comm_abort(w, 1);
        double t0 = now_s();
        if (gt_local_comm_allreduce(w, g, n_ar, GT_COMM_FLOAT, GT_COMM_SUM) != GT_OK)
            gt_local_comm_abort(w, 1);
        double t = max_over(w, now_s() - t0);
        if (i >= o->warmup && n_ts < MAX_REPS) ts[n_ts++] = t;
    }
    free(g);
    int bad = 0;
    double base_tps = 0;
    if (me == 0) {
        train_close(&one);
        base_tps = (double)one.res.tokens_per_step / one.res.step_s;
        print_train_row("cpu", o->preset, 1, o, &one.res, base_tps, 0, 0, one.res.wrong);
        bad |= one.res.wrong != 0;
    }
    if (R > 1) {
        train_close(&all);
        double step = max_over(w, all.res.step_s);
        uint64_t wrong = sum_over(w, all.res.wrong);
        all.res.step_s = step;
        if (me == 0)
            print_train_row("cpu", o->preset, R, o, &all.res,
                            (double)all.res.tokens_per_step / step, base_tps,
                            gt_cli_median(ts, n_ts), wrong);
        bad |= wrong != 0;
    }
    gt_topo_destroy(cfg1);
    gt_topo_destroy(cfgR);
    return bad;
}

/* Dense bf16 tensor-core peak (TFLOP/s, no sparsity) by device name; 0 when unknown. */
#ifdef GT_HAVE_NCCL
static double peak_by_name(const char *name)
{
    static const struct {
        const char *key;
        double tflops;
    } table[] = {{"GH200", 989},    {"H200", 989}, {"H100 PCIe", 756}, {"H100 NVL", 835},
                 {"H100", 989},     {"H800", 989}, {"B200", 2250},     {"B100", 1750},
                 {"A100", 312},     {"A800", 312}, {"L40S", 362},      {"L40", 181},
                 {"RTX 4090", 165}, {"A10", 125},  {"L4", 121}};
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strstr(name, table[i].key)) return table[i].tflops;
    return 0;
}
#endif

static int bench_train_gpu(gt_local_comm_t *w, const bl_opts_t *o)
{
    int me = gt_local_comm_rank(w), ndev = 0;
    if (gt_kern_cuda_device_count(&ndev) != GT_OK) ndev = 0;
    /* one rank, its own one-rank communicator (every rank splits; only rank 0 trains) */
    gt_local_comm_t *solo = NULL;
    if (gt_local_comm_split(w, me, 0, &solo) != GT_OK) gt_local_comm_abort(w, 1);
    int bad = 0;
    if (me == 0) {
        if (ndev == 0 || !gt_local_nccl_available()) {
            print_skip("train", "gt_nccl",
                       gt_local_nccl_available() ? "no CUDA device" : "built without CUDA/NCCL");
        } else {
#ifdef GT_HAVE_NCCL
            gt_gpt_preset_t pr;
            gt_topo_config_t *cfg = NULL;
            nccl_hook_t hook;
            memset(&hook, 0, sizeof hook);
            gt_status_t s = gt_gpt_preset_find(o->gpu_preset, &pr);
            if (s == GT_OK)
                cfg = make_cfg(o->gpu_preset, 0, o->threads, 1, "cuda",
                               corpus_tokens(pr.B, pr.T, 1, o));
            if (s == GT_OK && !cfg) s = GT_ERR_CONFIG;
            if (s == GT_OK) s = gt_local_nccl_create(solo, 0, &hook.nccl);
            train_run_t run;
            memset(&run, 0, sizeof run);
            if (s == GT_OK) s = train_open(cfg, NULL, 0, o, &hook, &run);
            for (size_t i = 0; s == GT_OK && i < o->warmup + o->steps; i++) s = train_step(&run);
            train_close(&run);
            const train_result_t r = run.res;
            gt_local_nccl_destroy(hook.nccl);
            gt_topo_destroy(cfg);
            if (s != GT_OK) {
                fprintf(stderr, "geotrain bench local: CUDA training failed: %s\n",
                        gt_status_str(s));
                bad = 1;
            } else {
                struct cudaDeviceProp prop;
                memset(&prop, 0, sizeof prop);
                cudaGetDeviceProperties(&prop, 0);
                double peak = o->peak_tflops > 0 ? o->peak_tflops : peak_by_name(prop.name);
                double tps = (double)r.tokens_per_step / r.step_s;
                gt_gpt_config_t mc = pr.model;
                double fpt = gt_gpt_train_flops_per_token(&mc, r.T);
                printf("{\"bench\":\"local\",\"kind\":\"train\",\"device\":\"cuda\","
                       "\"gpu\":\"%s\",\"backend\":\"gt_nccl\",\"preset\":\"%s\",\"ranks\":1,"
                       "\"B\":%zu,\"T\":%zu,\"params\":%zu,\"tokens_per_step\":%zu,"
                       "\"steps\":%zu,\"step_ms_median\":%.3f,\"tokens_per_s\":%.1f,"
                       "\"flops_per_token\":%.0f,\"tflops\":%.2f,",
                       prop.name, o->gpu_preset, r.B, r.T, r.params, r.tokens_per_step, o->steps,
                       r.step_s * 1e3, tps, fpt, tps * fpt / 1e12);
                if (peak > 0)
                    printf("\"peak_tflops\":%.0f,\"mfu\":%.4f,", peak, tps * fpt / (peak * 1e12));
                else
                    printf("\"peak_tflops\":null,\"mfu\":null,");
                printf("\"allreduce_ms\":%.3f,\"allreduce_share\":%.4f,\"loss_first\":%.4f,"
                       "\"loss_last\":%.4f,\"wrong\":%llu}\n",
                       r.hook_s * 1e3, r.hook_s / r.step_s, r.loss_first, r.loss_last,
                       (unsigned long long)r.wrong);
                fflush(stdout);
                bad = r.wrong != 0;
            }
#endif
        }
    }
    gt_local_comm_destroy(solo);
    if (gt_local_comm_barrier(w) != GT_OK) gt_local_comm_abort(w, 1);
    return bad;
}

/* ---- launching ---------------------------------------------------------------------------- */

/* Re-executes this command under mpirun -np N (does not return on success). */
static int relaunch(int argc, char **argv, int ranks)
{
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) {
        fprintf(stderr, "geotrain bench local: cannot find my own executable\n");
        return 2;
    }
    exe[len] = '\0';
    char np[16];
    snprintf(np, sizeof np, "%d", ranks);
    char **av = calloc((size_t)argc + 10, sizeof *av);
    if (!av) return 1;
    int k = 0;
    av[k++] = (char *)GT_MPIEXEC;
    if (geteuid() == 0) av[k++] = (char *)"--allow-run-as-root";
    av[k++] = (char *)"--oversubscribe";
    av[k++] = (char *)"--bind-to"; /* cores shared with other jobs: let the kernel place ranks */
    av[k++] = (char *)"none";
    av[k++] = (char *)"-np";
    av[k++] = np;
    av[k++] = exe;
    av[k++] = (char *)"bench";
    for (int i = 0; i < argc; i++) av[k++] = argv[i]; /* argv[0] is "local" */
    fprintf(stderr, "geotrain bench local: not started by mpirun; running:");
    for (int i = 0; i < k; i++) fprintf(stderr, " %s", av[i]);
    fprintf(stderr, "\n");
    fflush(NULL);
    execvp(av[0], av);
    fprintf(stderr,
            "geotrain bench local: cannot run %s (%s); run it yourself as\n"
            "  mpirun -np %d geotrain bench local ...   (or --ranks 1 for one rank)\n",
            av[0], strerror(errno), ranks);
    free(av);
    return 2;
}

int gt_bench_local(int argc, char **argv)
{
    static const struct option opts[] = {{"ranks", required_argument, NULL, 'r'},
                                         {"quick", no_argument, NULL, 'q'},
                                         {"min", required_argument, NULL, 'm'},
                                         {"max", required_argument, NULL, 'M'},
                                         {"reps", required_argument, NULL, 'n'},
                                         {"preset", required_argument, NULL, 'p'},
                                         {"batch", required_argument, NULL, 'B'},
                                         {"steps", required_argument, NULL, 's'},
                                         {"warmup", required_argument, NULL, 'w'},
                                         {"threads", required_argument, NULL, 't'},
                                         {"gpu-preset", required_argument, NULL, 'g'},
                                         {"peak-tflops", required_argument, NULL, 'P'},
                                         {"no-train", no_argument, NULL, 'T'},
                                         {"no-gpu", no_argument, NULL, 'G'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    bl_opts_t o = {2, 0, 5, 0, 0, 64 << 10, 0, "small", "gpt2-124m", 0, 0, 0, 1, 0};
    size_t v = 0, steps = 0, warmup = 0, reps = 0;
    int set_steps = 0, set_warmup = 0, set_reps = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'r':
            bad = gt_cli_parse_size(optarg, &v) || v < 1 || v > 4096;
            o.ranks = (int)v;
            break;
        case 'q': o.quick = 1; break;
        case 'm': bad = gt_cli_parse_size(optarg, &o.min_bytes); break;
        case 'M': bad = gt_cli_parse_size(optarg, &o.max_bytes); break;
        case 'n':
            bad = gt_cli_parse_size(optarg, &reps) || reps < 1 || reps > MAX_REPS;
            set_reps = 1;
            break;
        case 'p': o.preset = optarg; break;
        case 'B': bad = gt_cli_parse_size(optarg, &o.batch); break;
        case 's':
            bad = gt_cli_parse_size(optarg, &steps) || steps < 1 || steps > MAX_REPS;
            set_steps = 1;
            break;
        case 'w':
            bad = gt_cli_parse_size(optarg, &warmup);
            set_warmup = 1;
            break;
        case 't': bad = gt_cli_parse_size(optarg, &o.threads) || o.threads > 1024; break;
        case 'g': o.gpu_preset = optarg; break;
        case 'P':
            o.peak_tflops = strtod(optarg, NULL);
            bad = !(o.peak_tflops > 0);
            break;
        case 'T': o.skip_train = 1; break;
        case 'G': o.skip_gpu = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (bad) {
            fprintf(stderr, "geotrain bench local: bad value '%s'\n", optarg);
            return 2;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 2;
    }
    if (!o.max_bytes) o.max_bytes = o.quick ? (size_t)1 << 20 : (size_t)256 << 20;
    o.reps = set_reps ? (int)reps : o.quick ? 3 : 5;
    o.steps = set_steps ? steps : o.quick ? 2 : 8;
    o.warmup = set_warmup ? warmup : o.quick ? 1 : 2;
    if (!o.batch && o.quick) o.batch = 2;
    if (o.min_bytes < 4 || o.min_bytes > o.max_bytes || o.max_bytes > ((size_t)4 << 30)) {
        fprintf(stderr, "geotrain bench local: need 4 <= --min <= --max <= 4G\n");
        return 2;
    }
    o.min_bytes &= ~(size_t)3;

    if (!gt_local_comm_launched() && o.ranks > 1) {
        if (!gt_local_comm_have_mpi()) {
            fprintf(stderr, "geotrain bench local: this geotrain was built without MPI; "
                            "running one rank (--ranks 1)\n");
        } else {
            return relaunch(argc, argv, o.ranks);
        }
    }
    gt_local_comm_t *w = NULL;
    if (gt_local_comm_world(&w) != GT_OK) return 1;
    int bad = 0;
    bad |= bench_ar_mpi(w, &o);
    if (!o.skip_gpu) {
#ifdef GT_HAVE_NCCL
        bad |= bench_ar_nccl(w, &o);
#else
        if (gt_local_comm_rank(w) == 0)
            print_skip("allreduce", "gt_nccl", "built without CUDA/NCCL");
#endif
    }
    if (!o.skip_train) bad |= bench_train_cpu(w, &o);
    if (!o.skip_train && !o.skip_gpu) bad |= bench_train_gpu(w, &o);
    /* every rank's verdict */
    float any = (float)bad;
    if (gt_local_comm_allreduce(w, &any, 1, GT_COMM_FLOAT, GT_COMM_MAX) != GT_OK) any = 1;
    gt_local_comm_destroy(w);
    return any > 0 ? 1 : 0;
}
