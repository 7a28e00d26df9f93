/* test_nccl.c — the NCCL all-reduce of a site's ranks (gt_local_nccl_*, issue 7).
 *
 * Run as an MPI job (or alone). Ranks split by whether they have a CUDA device of their own
 * (local rank < device count):
 *   - without one, gt_local_nccl_create must fail with GT_ERR_IO on every rank of the group,
 *     promptly, leaving the output pointer alone (and GT_ERR_UNSUPPORTED in a build without
 *     NCCL);
 *   - with one: fp32 sums exact on small integers and within 1e-6 relative on fractions, an
 *     odd length, n = 0, the bf16 reduction within bf16 rounding of the fp32 sum, a bad
 *     argument, and the deadline: with a 1 ns timeout a large all-reduce returns
 *     GT_ERR_TIMEOUT (or the NCCL error a peer's abort caused) and later calls
 *     GT_ERR_PEER_LOST, without hanging.
 * Exit 77 when no rank has a device.
 */
#include "gt_kernels.h"
#include "gt_local.h"
#include "gt_test.h"

#ifdef GT_TEST_CUDA
#include <cuda_runtime.h>
#endif

static void check_create_fails(gt_local_comm_t *c, int ndev)
{
    gt_local_nccl_t *sentinel = (gt_local_nccl_t *)&sentinel, *x = sentinel;
    uint64_t t0 = gt_time_ns();
    gt_status_t st = gt_local_nccl_create(c, ndev, &x);
    CHECK_EQ_INT(st, gt_local_nccl_available() ? GT_ERR_IO : GT_ERR_UNSUPPORTED);
    CHECK(x == sentinel);
    CHECK((gt_time_ns() - t0) < 30ull * 1000000000ull);
    gt_local_nccl_destroy(NULL);
}

#ifdef GT_TEST_CUDA
static int gpu_ok(cudaError_t e, const char *what)
{
    CHECK_MSG(e == cudaSuccess, "%s: %s", what, cudaGetErrorString(e));
    return e == cudaSuccess;
}

static float bf16_round(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1); /* round to nearest even (finite values) */
    u &= 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}

static void gpu_tests(gt_local_comm_t *c, int dev)
{
    int R = gt_local_comm_size(c), me = gt_local_comm_rank(c);
    gt_local_nccl_t *x = NULL;
    CHECK_EQ_INT(gt_local_nccl_create(c, dev, &x), GT_OK);
    if (!x) return;
    CHECK_EQ_INT(gt_local_nccl_rank(x), me);
    CHECK_EQ_INT(gt_local_nccl_size(x), R);
    const size_t n = ((size_t)1 << 20) + 3, big = (size_t)16 << 20;
    float *h = malloc(big * sizeof *h), *d = NULL;
    CHECK(h != NULL);
    if (!h || !gpu_ok(cudaMalloc((void **)&d, big * sizeof *d), "cudaMalloc")) goto out;

    /* fp32, small integers: exact */
    for (size_t i = 0; i < n; i++) h[i] = (float)((i + (size_t)me) % 8 + 1);
    gpu_ok(cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice), "upload");
    CHECK_EQ_INT(gt_local_nccl_allreduce_sum(x, d, n, 0), GT_OK);
    gpu_ok(cudaMemcpy(h, d, n * 4, cudaMemcpyDeviceToHost), "download");
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        float want = 0;
        for (int r = 0; r < R; r++) want += (float)((i + (size_t)r) % 8 + 1);
        bad += h[i] != want;
    }
    CHECK_EQ_INT(bad, 0);

    /* fp32 fractions, and bf16: against the sum in double */
    for (int bf16 = 0; bf16 < 2; bf16++) {
        for (size_t i = 0; i < n; i++)
            h[i] = 0.001f * (float)((i * 7919 + (size_t)me) % 1000) - 0.37f;
        gpu_ok(cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice), "upload");
        CHECK_EQ_INT(gt_local_nccl_allreduce_sum(x, d, n, bf16), GT_OK);
        gpu_ok(cudaMemcpy(h, d, n * 4, cudaMemcpyDeviceToHost), "download");
        bad = 0;
        for (size_t i = 0; i < n; i++) {
            double want = 0, mag = 0;
            for (int r = 0; r < R; r++) {
                float v = 0.001f * (float)((i * 7919 + (size_t)r) % 1000) - 0.37f;
                want += bf16 ? bf16_round(v) : v;
                mag += fabs(v);
            }
            /* fp32: reduction order; bf16: each partial sum rounded to 8 bits */
            double tol = bf16 ? mag * (double)R * 0.0079 : 1e-6 * mag + 1e-7;
            if (!(fabs(h[i] - want) <= tol)) bad++;
            if (bf16 && h[i] != bf16_round(h[i])) bad++; /* the result came back from bf16 */
        }
        CHECK_MSG(bad == 0, "%s: %zu elements off", bf16 ? "bf16" : "fp32", bad);
    }

    CHECK_EQ_INT(gt_local_nccl_allreduce_sum(x, d, 0, 0), GT_OK);
    CHECK_EQ_INT(gt_local_nccl_allreduce_sum(x, NULL, 5, 0), GT_ERR_INVALID);

    /* the deadline: never wait past it; after it the communicator is aborted. With several
     * ranks a 64 MiB all-reduce cannot finish in 1 ns (a peer's abort may surface first, as
     * an NCCL error); one rank's bf16 path (two conversion kernels) most likely cannot. */
    gt_local_nccl_set_timeout(x, 1e-9);
    uint64_t t0 = gt_time_ns();
    gt_status_t st = gt_local_nccl_allreduce_sum(x, d, big, R == 1);
    if (R > 1)
        CHECK_MSG(st == GT_ERR_TIMEOUT || st == GT_ERR_PEER_LOST, "status %d", st);
    else
        CHECK_MSG(st == GT_ERR_TIMEOUT || st == GT_OK, "status %d", st);
    if (st != GT_OK) CHECK_EQ_INT(gt_local_nccl_allreduce_sum(x, d, 16, 0), GT_ERR_PEER_LOST);
    CHECK((gt_time_ns() - t0) < 30ull * 1000000000ull);
out:
    cudaFree(d);
    free(h);
    gt_local_nccl_destroy(x);
}
#endif

int main(void)
{
    gt_local_comm_t *world = NULL;
    CHECK_EQ_INT(gt_local_comm_world(&world), GT_OK);
    if (!world) return GT_TEST_DONE();
    int ndev = 0;
    if (gt_kern_cuda_device_count(&ndev) != GT_OK) ndev = 0;
    int have = gt_local_nccl_available() && ndev > gt_local_comm_local_rank(world);
    gt_local_comm_t *group = NULL;
    CHECK_EQ_INT(gt_local_comm_split(world, have, gt_local_comm_rank(world), &group), GT_OK);
    if (!group) return GT_TEST_DONE();
    if (!have) check_create_fails(group, ndev);
#ifdef GT_TEST_CUDA
    else
        gpu_tests(group, gt_local_comm_local_rank(world));
#endif
    gt_local_comm_destroy(group);
    float any = (float)have, fails = (float)gt_test_failures;
    CHECK_EQ_INT(gt_local_comm_allreduce(world, &any, 1, GT_COMM_FLOAT, GT_COMM_MAX), GT_OK);
    CHECK_EQ_INT(gt_local_comm_allreduce(world, &fails, 1, GT_COMM_FLOAT, GT_COMM_MAX), GT_OK);
    gt_local_comm_destroy(world);
    if (fails == 0 && any == 0) {
        fprintf(stderr, "%d checks passed\n", gt_test_checks);
        gt_test_skip(gt_local_nccl_available() ? "no CUDA device" : "built without NCCL");
    }
    return fails > 0 ? 1 : GT_TEST_DONE();
}
