/* mem.c — the library's own count of the host memory a context holds in its large buffers.
 *
 * The buffers that grow with the parameter count (diloco/'s vectors, outer/'s residuals,
 * codec frames and decoded results) are allocated through these functions with the context's
 * counter, so summary.json can say what the outer state costs per parameter
 * (outer_state_bytes_per_param) without asking the operating system, whose peak RSS mixes in the
 * caller's own memory. A block's size is what the allocator gave (malloc_usable_size), so the
 * count matches the frees exactly whatever size was asked for; a NULL counter counts nothing.
 * Several threads allocate (the training thread, the WAN thread), so the counts are atomics.
 */
#include "gt_base.h"

#include <malloc.h>
#include <stdlib.h>

static void count_add(gt_mem_count_t *m, size_t bytes)
{
    if (!m || !bytes) return;
    uint64_t now = __atomic_add_fetch(&m->now, (uint64_t)bytes, __ATOMIC_RELAXED);
    uint64_t peak = __atomic_load_n(&m->peak, __ATOMIC_RELAXED);
    while (now > peak && !__atomic_compare_exchange_n(&m->peak, &peak, now, 1, __ATOMIC_RELAXED,
                                                      __ATOMIC_RELAXED)) {
    }
}

static void count_sub(gt_mem_count_t *m, size_t bytes)
{
    if (!m || !bytes) return;
    uint64_t now = __atomic_load_n(&m->now, __ATOMIC_RELAXED), next;
    do /* never below zero: a block counted elsewhere must not wrap the count */
        next = now > bytes ? now - bytes : 0;
    while (
        !__atomic_compare_exchange_n(&m->now, &now, next, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}

void *gt_mem_alloc(gt_mem_count_t *m, size_t bytes, int zero)
{
    void *p = zero ? calloc(bytes ? bytes : 1, 1) : malloc(bytes ? bytes : 1);
    if (p) count_add(m, malloc_usable_size(p));
    return p;
}

void *gt_mem_realloc(gt_mem_count_t *m, void *p, size_t bytes)
{
    size_t was = p ? malloc_usable_size(p) : 0;
    void *q = realloc(p, bytes ? bytes : 1);
    if (!q) return NULL; /* p is still held, still counted */
    count_sub(m, was);
    count_add(m, malloc_usable_size(q));
    return q;
}

void gt_mem_free(gt_mem_count_t *m, void *p)
{
    if (!p) return;
    count_sub(m, malloc_usable_size(p));
    free(p);
}

uint64_t gt_mem_count_now(const gt_mem_count_t *m)
{
    return m ? __atomic_load_n(&m->now, __ATOMIC_RELAXED) : 0;
}

uint64_t gt_mem_count_peak(const gt_mem_count_t *m)
{
    return m ? __atomic_load_n(&m->peak, __ATOMIC_RELAXED) : 0;
}
