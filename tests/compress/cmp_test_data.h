/* cmp_test_data.h — deterministic test vectors for the compress tests (and the fuzzer's
 * seeds). Integer arithmetic only where a test needs the same floats on every machine. */
#ifndef GT_CMP_TEST_DATA_H
#define GT_CMP_TEST_DATA_H

#include <math.h>
#include <stdint.h>
#include <stddef.h>

static inline uint64_t cmp_rng(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in (-1, 1), exact on every machine. */
static inline float cmp_uniform(uint64_t *s)
{
    return (float)((int32_t)(cmp_rng(s) >> 32)) * (1.0f / 2147483648.0f);
}

static inline float cmp_gauss(uint64_t *s)
{
    double u1 = ((double)(cmp_rng(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    double u2 = (double)(cmp_rng(s) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* Machine-independent data of mixed magnitudes: uniform times 2^(-20..4). */
static inline void cmp_fill_exact(float *x, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        float u = cmp_uniform(&seed);
        int ex = (int)(cmp_rng(&seed) % 25) - 20;
        x[i] = ldexpf(u, ex);
    }
}

static inline void cmp_fill_gauss(float *x, size_t n, uint64_t seed, float sigma)
{
    for (size_t i = 0; i < n; i++) x[i] = sigma * cmp_gauss(&seed);
}

#endif
