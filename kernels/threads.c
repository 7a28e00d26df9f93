/* threads.c — the process-wide CPU thread count of the kernels, and the CUDA device query.
 *
 * One pool: our OpenMP regions use gt_kern_get_threads() threads and call OpenBLAS with one
 * thread each (openblas_set_num_threads(1)), so OpenBLAS's own workers never spin against
 * ours and the slice of the output each thread computes is fixed — hence determinism.
 */
#include "kernels_internal.h"

#include <cblas.h>
#include <stdatomic.h>
#include <strings.h>
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

const char *gt_kern_blas_core(void)
{
    return openblas_get_corename();
}

/* OpenBLAS's x86-64 kernel sets by the widest vector unit they use: 1 = SSE only, 2 = AVX
 * (no FMA), 3 = AVX2 + FMA, 4 = AVX-512. A name not here ranks 0: left alone. */
static int blas_core_rank(const char *core)
{
    static const struct {
        const char *name;
        int rank;
    } table[] = {
        {"Prescott", 1},       {"Core2", 1},      {"Penryn", 1},      {"Dunnington", 1},
        {"Nehalem", 1},        {"Atom", 1},       {"Opteron", 1},     {"Opteron_SSE3", 1},
        {"Barcelona", 1},      {"Nano", 1},       {"Katmai", 1},      {"Coppermine", 1},
        {"Northwood", 1},      {"Banias", 1},     {"Athlon", 1},      {"Sandybridge", 2},
        {"Bulldozer", 2},      {"Piledriver", 2}, {"Steamroller", 3}, {"Excavator", 3},
        {"Haswell", 3},        {"Zen", 3},        {"SkylakeX", 4},    {"Cooperlake", 4},
        {"SapphireRapids", 4},
    };
    for (size_t i = 0; core && i < sizeof table / sizeof table[0]; i++)
        if (strcasecmp(core, table[i].name) == 0) return table[i].rank;
    return 0;
}

const char *gt_kern_blas_core_advice(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    int have = 0;
    const char *best = NULL;
    /* libgcc's checks include the OS's XSAVE support for the AVX and AVX-512 register state */
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        have = 4, best = "SkylakeX";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        have = 3, best = "Haswell";
    int picked = blas_core_rank(gt_kern_blas_core());
    return picked > 0 && picked < have ? best : NULL;
#else
    return NULL;
#endif
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
