/* threads.c — the process-wide CPU thread count of the kernels, and the CUDA device query.
 *
 * One pool: our OpenMP regions use gt_kern_get_threads() threads and call OpenBLAS with one
 * thread each (openblas_set_num_threads(1)), so OpenBLAS's own workers never spin against
 * ours and the slice of the output each thread computes is fixed — hence determinism.
 */
#include "kernels_internal.h"

#include <cblas.h>
#include <stdatomic.h>
#include <unistd.h>

#define MAX_THREADS 1024

static atomic_int g_threads = 1;
static atomic_int g_blas_set = 0;

static void blas_single(void)
{
    if (!atomic_exchange(&g_blas_set, 1)) openblas_set_num_threads(1);
}

gt_status_t gt_kern_set_threads(int n)
{
    if (n <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c > 0 ? (int)c : 1;
    }
    if (n > MAX_THREADS) {
        GT_ERROR("kernels: %d threads is more than the %d supported", n, MAX_THREADS);
        return GT_ERR_INVALID;
    }
    blas_single();
    atomic_store(&g_threads, n);
    return GT_OK;
}

int gt_kern_get_threads(void)
{
    blas_single();
    return atomic_load(&g_threads);
}

gt_status_t gt_kern_cuda_device_count(int *count_p)
{
    if (!count_p) return GT_ERR_INVALID;
#ifdef GT_HAVE_CUDA
    return gt_cuda_device_count(count_p);
#else
    *count_p = 0;
    return GT_ERR_UNSUPPORTED;
#endif
}
