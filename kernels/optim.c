/* optim.c — AdamW, the learning-rate schedule and the outer Nesterov step over float arenas.
 *
 * These are elementwise: each output element depends only on the same index of the inputs,
 * so threads (fixed slices) cannot change a bit. This file is compiled with
 * -ffp-contract=off (kernels/CMakeLists.txt): the outer Nesterov step must give the same bits
 * on every site's machine (DESIGN I1), whatever FMA units or vector width it has.
 */
#include "kernels_internal.h"

#include <math.h>
#include <omp.h>

#define CHUNK ((size_t)1 << 15)

static int nth(size_t items)
{
    int nt = gt_kern_get_threads();
    return (size_t)nt > items ? (int)(items ? items : 1) : nt;
}

static void adamw_chunk(float *restrict theta, const float *restrict g, float *restrict m,
                        float *restrict v, size_t n, float lr, float b1, float b2, float eps,
                        float wd, float bc1, float bc2)
{
    for (size_t i = 0; i < n; i++) {
        float gi = g[i];
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        float mh = mi / bc1, vh = vi / bc2;
        theta[i] -= lr * (mh / (sqrtf(vh) + eps) + wd * theta[i]);
    }
}

gt_status_t gt_kern_adamw_update(float *theta, const float *g, float *m, float *v, size_t n,
                                 const gt_adamw_params_t *p, uint64_t step, int decay)
{
    if (!p || step == 0 || (n && (!theta || !g || !m || !v))) return GT_ERR_INVALID;
    float bc1 = 1.0f - (float)pow((double)p->beta1, (double)step);
    float bc2 = 1.0f - (float)pow((double)p->beta2, (double)step);
    float wd = decay ? p->weight_decay : 0.0f;
    size_t nc = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for num_threads(nth(nc)) schedule(dynamic, 1)
    for (size_t c = 0; c < nc; c++) {
        size_t lo = c * CHUNK, len = n - lo < CHUNK ? n - lo : CHUNK;
        adamw_chunk(theta + lo, g + lo, m + lo, v + lo, len, p->lr, p->beta1, p->beta2, p->eps, wd,
                    bc1, bc2);
    }
    return GT_OK;
}

float gt_kern_lr_at(const gt_lr_schedule_t *s, uint64_t step)
{
    if (!s) return 0.0f;
    double max = s->lr_max, min = (double)s->min_frac * s->lr_max;
    if (step < s->warmup_steps) return (float)(max * (double)(step + 1) / (double)s->warmup_steps);
    if (step >= s->total_steps || s->total_steps <= s->warmup_steps) return (float)min;
    double ratio = (double)(step - s->warmup_steps) / (double)(s->total_steps - s->warmup_steps);
    return (float)(min + 0.5 * (1.0 + cos(M_PI * ratio)) * (max - min));
}

static void nesterov_chunk(float *restrict theta, float *restrict m, const float *restrict g,
                           size_t n, float lr, float mu)
{
    for (size_t i = 0; i < n; i++) {
        float mi = mu * m[i] + g[i];
        m[i] = mi;
        float upd = g[i] + mu * mi;
        theta[i] = theta[i] - lr * upd;
    }
}

gt_status_t gt_kern_nesterov_update(float *theta, float *m, const float *g, size_t n, float lr,
                                    float mu)
{
    if (n && (!theta || !m || !g)) return GT_ERR_INVALID;
    size_t nc = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for num_threads(nth(nc)) schedule(dynamic, 1)
    for (size_t c = 0; c < nc; c++) {
        size_t lo = c * CHUNK;
        nesterov_chunk(theta + lo, m + lo, g + lo, n - lo < CHUNK ? n - lo : CHUNK, lr, mu);
    }
    return GT_OK;
}
