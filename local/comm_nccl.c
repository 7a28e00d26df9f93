/* comm_nccl.c — the GPU all-reduce of a site's ranks over NCCL (docs/design.md §4).
 *
 * A site of R ranks is one MPI job; its ranks build one NCCL communicator whose unique id rank
 * 0 makes and broadcasts over the in-site communicator (comm.c). The gradients of a CUDA model
 * are summed in place on the device, in fp32 or, on request, in bf16 (half the bytes; the
 * conversions are two tiny kernels in nccl_bf16.cu into a scratch buffer kept here).
 *
 * Never hang (STYLE: every wait has a deadline): the communicator is created non-blocking
 * (ncclConfig_t.blocking = 0), and every wait — for the creation, for an enqueue that answers
 * ncclInProgress, for the stream to drain — polls ncclCommGetAsyncError and cudaStreamQuery,
 * yielding then sleeping between polls (ranks may share cores), until a deadline. On an error
 * or a timeout the NCCL communicator is aborted (ncclCommAbort frees its resources and makes
 * outstanding kernels return) and marked broken: every later call fails fast. The MPI job is
 * left to the caller (gt_local_comm_abort), as losing a rank is the site's failure.
 *
 * The file is compiled in every build; without NCCL (GT_HAVE_NCCL undefined) the functions
 * return GT_ERR_UNSUPPORTED, so callers need no #ifdef.
 */
#include "gt_local.h"

#include <stdlib.h>

#ifdef GT_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
#include <sched.h>
#include <string.h>
#include <time.h>

/* nccl_bf16.cu */
int gt_local_nccl_f32_to_bf16(void *out, const float *in, size_t n, cudaStream_t s);
int gt_local_nccl_bf16_to_f32(float *out, const void *in, size_t n, cudaStream_t s);

#define NCCL_MAGIC 0x6e63636cu /* "nccl" */

struct gt_local_nccl {
    uint32_t magic;
    ncclComm_t comm;
    cudaStream_t stream;
    int device, rank, size;
    int broken; /* aborted after an error or a timeout */
    double timeout_s;
    void *scratch; /* bf16 staging, scratch_n elements */
    size_t scratch_n;
};

/* Polite polling: a few yields, then 20 µs sleeps (as comm.c). */
static void poll_pause(unsigned spin)
{
    if (spin < 64) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
}

static void nccl_fail(gt_local_nccl_t *x)
{
    if (x->comm && !x->broken) ncclCommAbort(x->comm);
    x->broken = 1;
}

/* Waits until the communicator's pending operation (creation, an enqueue, finalize) leaves
 * ncclInProgress, and, when stream_too, until the stream has drained. */
static gt_status_t nccl_wait(gt_local_nccl_t *x, int stream_too, const char *what)
{
    uint64_t t0 = gt_time_ns(), limit = (uint64_t)(x->timeout_s * 1e9);
    for (unsigned spin = 0;; spin++) {
        ncclResult_t r = ncclSuccess;
        if (ncclCommGetAsyncError(x->comm, &r) != ncclSuccess ||
            (r != ncclSuccess && r != ncclInProgress)) {
            GT_ERROR("nccl: %s failed on rank %d of %d: %s (%s)", what, x->rank, x->size,
                     ncclGetErrorString(r), ncclGetLastError(x->comm));
            nccl_fail(x);
            return GT_ERR_PEER_LOST;
        }
        if (r == ncclSuccess) {
            if (!stream_too) return GT_OK;
            cudaError_t e = cudaStreamQuery(x->stream);
            if (e == cudaSuccess) return GT_OK;
            if (e != cudaErrorNotReady) {
                GT_ERROR("nccl: %s: CUDA error on rank %d: %s", what, x->rank,
                         cudaGetErrorString(e));
                nccl_fail(x);
                return GT_ERR_IO;
            }
        }
        if (gt_time_ns() - t0 > limit) {
            GT_ERROR("nccl: %s did not complete in %.0f s on rank %d of %d: a rank of this site "
                     "is gone or stuck; aborting the NCCL communicator",
                     what, x->timeout_s, x->rank, x->size);
            nccl_fail(x);
            return GT_ERR_TIMEOUT;
        }
        poll_pause(spin);
    }
}

int gt_local_nccl_available(void)
{
    return 1;
}

gt_status_t gt_local_nccl_create(gt_local_comm_t *comm, int cuda_device, gt_local_nccl_t **nccl_p)
{
    if (!comm || !nccl_p || cuda_device < 0) return GT_ERR_INVALID;
    gt_status_t s = GT_OK;
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    int ok = e == cudaSuccess && cuda_device < ndev;
    gt_local_nccl_t *x = calloc(1, sizeof *x);
    if (!x) return GT_ERR_NOMEM;
    x->magic = NCCL_MAGIC;
    x->device = cuda_device;
    x->rank = gt_local_comm_rank(comm);
    x->size = gt_local_comm_size(comm);
    x->timeout_s = GT_LOCAL_NCCL_TIMEOUT_S;
    /* Every rank learns whether every rank has its device, so none waits in NCCL for a rank
     * that has already given up. */
    float flag = ok ? 1.0f : 0.0f;
    GT_CHECK_GOTO(gt_local_comm_allreduce(comm, &flag, 1, GT_COMM_FLOAT, GT_COMM_MIN), s, out);
    if (!ok) {
        GT_ERROR("nccl: rank %d: CUDA device %d is not available (%d device(s)%s%s)", x->rank,
                 cuda_device, ndev, e == cudaSuccess ? "" : ": ",
                 e == cudaSuccess ? "" : cudaGetErrorString(e));
        s = GT_ERR_IO;
        goto out;
    }
    if (flag < 1.0f) {
        GT_ERROR("nccl: rank %d: another rank of this site has no usable CUDA device", x->rank);
        s = GT_ERR_IO;
        goto out;
    }
    GT_REQUIRE_GOTO(cudaSetDevice(cuda_device) == cudaSuccess &&
                        cudaStreamCreateWithFlags(&x->stream, cudaStreamNonBlocking) == cudaSuccess,
                    s, GT_ERR_IO, out, "nccl: rank %d: cannot use CUDA device %d", x->rank,
                    cuda_device);

    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    int id_ok = 1;
    if (x->rank == 0 && ncclGetUniqueId(&id) != ncclSuccess) id_ok = 0;
    /* The id travels with a flag, so a failure on rank 0 does not leave the others waiting in
     * ncclCommInitRank for a rank that never comes. */
    unsigned char msg[sizeof id + 1];
    memcpy(msg, &id, sizeof id);
    msg[sizeof id] = (unsigned char)id_ok;
    GT_CHECK_GOTO(gt_local_comm_bcast(comm, msg, sizeof msg, 0), s, out);
    memcpy(&id, msg, sizeof id);
    GT_REQUIRE_GOTO(msg[sizeof id], s, GT_ERR_IO, out,
                    "nccl: rank 0 could not make the NCCL unique id");

    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&x->comm, x->size, id, x->rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) {
        GT_ERROR("nccl: ncclCommInitRank failed on rank %d of %d: %s", x->rank, x->size,
                 ncclGetErrorString(r));
        if (x->comm) ncclCommAbort(x->comm);
        x->comm = NULL;
        s = GT_ERR_IO;
        goto out;
    }
    GT_CHECK_GOTO(nccl_wait(x, 0, "communicator creation"), s, out);
out:
    if (s != GT_OK) {
        gt_local_nccl_destroy(x);
        return s;
    }
    *nccl_p = x;
    return GT_OK;
}

static gt_status_t cuda_ok(gt_local_nccl_t *x, int e, const char *what)
{
    if (e == cudaSuccess) return GT_OK;
    GT_ERROR("nccl: rank %d: %s: %s", x->rank, what, cudaGetErrorString((cudaError_t)e));
    return GT_ERR_IO;
}

gt_status_t gt_local_nccl_allreduce_sum(gt_local_nccl_t *x, float *dev_buf, size_t n, int bf16)
{
    if (!x || x->magic != NCCL_MAGIC || (!dev_buf && n)) return GT_ERR_INVALID;
    if (x->broken) {
        GT_ERROR("nccl: rank %d: the communicator was aborted after an earlier failure", x->rank);
        return GT_ERR_PEER_LOST;
    }
    if (n == 0) return GT_OK;
    gt_status_t s = cuda_ok(x, cudaSetDevice(x->device), "cudaSetDevice");
    if (s != GT_OK) return s;
    void *buf = dev_buf;
    if (bf16) {
        if (x->scratch_n < n) {
            cudaFree(x->scratch);
            x->scratch = NULL;
            x->scratch_n = 0;
            s = cuda_ok(x, cudaMalloc(&x->scratch, n * 2), "scratch allocation");
            if (s == GT_OK) x->scratch_n = n;
        }
        buf = x->scratch;
        if (s == GT_OK)
            s = cuda_ok(x, gt_local_nccl_f32_to_bf16(buf, dev_buf, n, x->stream), "fp32 -> bf16");
        if (s != GT_OK) {
            nccl_fail(x); /* the other ranks are entering this all-reduce: out of step now */
            return s;
        }
    }
    ncclResult_t r =
        ncclAllReduce(buf, buf, n, bf16 ? ncclBfloat16 : ncclFloat, ncclSum, x->comm, x->stream);
    if (r != ncclSuccess && r != ncclInProgress) {
        GT_ERROR("nccl: ncclAllReduce of %zu elements failed on rank %d: %s (%s)", n, x->rank,
                 ncclGetErrorString(r), ncclGetLastError(x->comm));
        nccl_fail(x);
        return GT_ERR_PEER_LOST;
    }
    /* In non-blocking mode the enqueue itself may still be in progress: wait for it before
     * queueing the conversion behind it. */
    if (r == ncclInProgress && (s = nccl_wait(x, 0, "all-reduce enqueue")) != GT_OK) return s;
    if (bf16) {
        s = cuda_ok(x, gt_local_nccl_bf16_to_f32(dev_buf, buf, n, x->stream), "bf16 -> fp32");
        if (s != GT_OK) {
            nccl_fail(x); /* the ranks are now out of step */
            return s;
        }
    }
    return nccl_wait(x, 1, "all-reduce");
}

void gt_local_nccl_set_timeout(gt_local_nccl_t *x, double seconds)
{
    if (x && seconds > 0) x->timeout_s = seconds;
}

int gt_local_nccl_rank(const gt_local_nccl_t *x)
{
    return x ? x->rank : 0;
}

int gt_local_nccl_size(const gt_local_nccl_t *x)
{
    return x ? x->size : 1;
}

void gt_local_nccl_destroy(gt_local_nccl_t *x)
{
    if (!x) return;
    cudaSetDevice(x->device);
    /* A healthy communicator is finalised (its pending work flushed, within the deadline)
     * then destroyed; one that fails to finalise is aborted. A broken one was aborted (and
     * freed) by nccl_fail already. */
    if (x->comm && !x->broken) {
        ncclResult_t r = ncclCommFinalize(x->comm);
        if ((r == ncclSuccess || r == ncclInProgress) &&
            nccl_wait(x, 0, "communicator finalisation") == GT_OK)
            ncclCommDestroy(x->comm);
        else
            nccl_fail(x);
    }
    if (x->stream) cudaStreamDestroy(x->stream);
    cudaFree(x->scratch);
    x->magic = 0;
    free(x);
}

#else /* no NCCL in this build */

int gt_local_nccl_available(void)
{
    return 0;
}

gt_status_t gt_local_nccl_create(gt_local_comm_t *comm, int cuda_device, gt_local_nccl_t **nccl_p)
{
    (void)comm;
    (void)cuda_device;
    (void)nccl_p;
    GT_ERROR("nccl: this geotrain was built without CUDA/NCCL");
    return GT_ERR_UNSUPPORTED;
}

gt_status_t gt_local_nccl_allreduce_sum(gt_local_nccl_t *nccl, float *dev_buf, size_t n, int bf16)
{
    (void)nccl;
    (void)dev_buf;
    (void)n;
    (void)bf16;
    return GT_ERR_UNSUPPORTED;
}

void gt_local_nccl_set_timeout(gt_local_nccl_t *nccl, double seconds)
{
    (void)nccl;
    (void)seconds;
}

int gt_local_nccl_rank(const gt_local_nccl_t *nccl)
{
    (void)nccl;
    return 0;
}

int gt_local_nccl_size(const gt_local_nccl_t *nccl)
{
    (void)nccl;
    return 1;
}

void gt_local_nccl_destroy(gt_local_nccl_t *nccl)
{
    (void)nccl;
}

#endif
