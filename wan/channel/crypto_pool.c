/* crypto_pool.c — the secure channel's seal/open worker threads (crypto_pool_internal.h).
 *
 * Shape: one FIFO queue under a mutex, workers that sleep on a condition variable while it
 * is empty, and per-job atomic states (idle, queued, running, done) that the owner polls
 * without taking the lock. Workers start lazily on the first submit, so a net that never
 * seals (security: none) never has threads. A job's memory is the caller's; the pool only
 * links it into the queue, and cancel() removes it or waits for it, so nothing outlives
 * an endpoint that fails.
 */
#include "crypto_pool_internal.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum { JOB_IDLE = 0, JOB_QUEUED, JOB_RUNNING, JOB_DONE };

struct gt_wan_cpool {
    pthread_mutex_t lock;
    pthread_cond_t work; /* a job was queued, or stop */
    pthread_cond_t done; /* a job finished */
    gt_wan_cjob_t *head, *tail;
    unsigned threads, started;
    int stop;
    atomic_size_t busy; /* submitted, not yet done */
    pthread_t tid[];
};

unsigned gt_wan_cpool_default_threads(void)
{
    const char *env = getenv("GT_WAN_CRYPTO_THREADS");
    if (env && *env) {
        char *end = NULL;
        long v = strtol(env, &end, 10);
        if (end && *end == '\0' && v >= 0 && v <= 64) return (unsigned)v;
        GT_WARN("wan: ignoring GT_WAN_CRYPTO_THREADS='%s' (0 to 64)", env);
    }
    /* With fewer than 4 CPUs a worker only competes with the progress thread (and, on one
     * machine, with the peer): measured on 2 shared cores it cost 10-15% more CPU per byte
     * than sealing inline, for no overlap. */
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 4) return 0;
    return n / 2 > 8 ? 8u : (unsigned)(n / 2);
}

static void run(gt_wan_cjob_t *j)
{
    size_t n = 0;
    if (j->kind == GT_WAN_CJOB_SEAL)
        j->status = gt_wan_session_seal_reserved(j->sess, j->seq, j->ad, j->ad_len, j->in,
                                                 j->in_len, j->out, j->out_cap, &n);
    else if (j->kind == GT_WAN_CJOB_OPEN)
        j->status = gt_wan_session_open_detached(j->sess, j->seq, j->declared_len, j->ad, j->ad_len,
                                                 j->in, j->in_len, j->out, j->out_cap, &n);
    else
        j->status = GT_ERR_INVALID;
    j->out_len = j->status == GT_OK ? n : 0;
}

static void *worker(void *arg)
{
    gt_wan_cpool_t *p = arg;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->head && !p->stop) pthread_cond_wait(&p->work, &p->lock);
        if (!p->head) break; /* stop, and nothing left */
        gt_wan_cjob_t *j = p->head;
        p->head = j->next_;
        if (!p->head) p->tail = NULL;
        j->next_ = NULL;
        atomic_store_explicit(&j->state_, JOB_RUNNING, memory_order_relaxed);
        pthread_mutex_unlock(&p->lock);
        run(j);
        pthread_mutex_lock(&p->lock);
        /* Release: the results (and the bytes written) are visible to whoever sees DONE. */
        atomic_store_explicit(&j->state_, JOB_DONE, memory_order_release);
        atomic_fetch_sub_explicit(&p->busy, 1, memory_order_relaxed);
        pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

gt_status_t gt_wan_cpool_create(unsigned threads, gt_wan_cpool_t **pool_p)
{
    if (!pool_p || threads == 0 || threads > 64) return GT_ERR_INVALID;
    gt_wan_cpool_t *p = calloc(1, sizeof *p + threads * sizeof(pthread_t));
    if (!p) return GT_ERR_NOMEM;
    if (pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p);
        return GT_ERR_IO;
    }
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    p->threads = threads;
    atomic_init(&p->busy, 0);
    *pool_p = p;
    return GT_OK;
}

void gt_wan_cpool_destroy(gt_wan_cpool_t *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 0; i < p->started; i++) pthread_join(p->tid[i], NULL);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

gt_status_t gt_wan_cpool_submit(gt_wan_cpool_t *p, gt_wan_cjob_t *j)
{
    if (!p || !j) return GT_ERR_INVALID;
    pthread_mutex_lock(&p->lock);
    if (p->started < p->threads) { /* start one worker per submit until all run */
        int rc = pthread_create(&p->tid[p->started], NULL, worker, p);
        if (rc != 0 && p->started == 0) {
            pthread_mutex_unlock(&p->lock);
            GT_ERROR("wan: cannot start a crypto thread: %s", strerror(rc));
            return rc == EAGAIN ? GT_ERR_NOMEM : GT_ERR_IO;
        }
        if (rc == 0)
            p->started++;
        else
            p->threads = p->started; /* run with what we have */
    }
    j->next_ = NULL;
    j->status = GT_ERR_AGAIN;
    j->out_len = 0;
    atomic_store_explicit(&j->state_, JOB_QUEUED, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->busy, 1, memory_order_relaxed);
    if (p->tail)
        p->tail->next_ = j;
    else
        p->head = j;
    p->tail = j;
    pthread_cond_signal(&p->work);
    pthread_mutex_unlock(&p->lock);
    return GT_OK;
}

int gt_wan_cpool_done(gt_wan_cjob_t *j)
{
    return atomic_load_explicit(&j->state_, memory_order_acquire) == JOB_DONE;
}

int gt_wan_cpool_pending(const gt_wan_cjob_t *j)
{
    return atomic_load_explicit((atomic_int *)&j->state_, memory_order_acquire) != JOB_IDLE;
}

void gt_wan_cpool_consume(gt_wan_cpool_t *p, gt_wan_cjob_t *j)
{
    (void)p;
    if (gt_wan_cpool_done(j)) atomic_store_explicit(&j->state_, JOB_IDLE, memory_order_relaxed);
}

void gt_wan_cpool_cancel(gt_wan_cpool_t *p, gt_wan_cjob_t *j)
{
    if (!p || !j || !gt_wan_cpool_pending(j)) return;
    pthread_mutex_lock(&p->lock);
    if (atomic_load_explicit(&j->state_, memory_order_relaxed) == JOB_QUEUED) {
        gt_wan_cjob_t *prev = NULL;
        for (gt_wan_cjob_t *q = p->head; q; prev = q, q = q->next_)
            if (q == j) {
                if (prev)
                    prev->next_ = j->next_;
                else
                    p->head = j->next_;
                if (p->tail == j) p->tail = prev;
                break;
            }
        j->next_ = NULL;
        j->status = GT_ERR_CLOSED;
        j->out_len = 0;
        atomic_fetch_sub_explicit(&p->busy, 1, memory_order_relaxed);
    } else {
        while (atomic_load_explicit(&j->state_, memory_order_acquire) != JOB_DONE)
            pthread_cond_wait(&p->done, &p->lock);
    }
    atomic_store_explicit(&j->state_, JOB_IDLE, memory_order_relaxed);
    pthread_mutex_unlock(&p->lock);
}

size_t gt_wan_cpool_busy(gt_wan_cpool_t *p)
{
    return p ? atomic_load_explicit(&p->busy, memory_order_relaxed) : 0;
}

void gt_wan_cpool_wait(gt_wan_cpool_t *p, uint64_t timeout_ns)
{
    if (!p || gt_wan_cpool_busy(p) == 0) return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + timeout_ns;
    ts.tv_sec += (time_t)(ns / 1000000000ull);
    ts.tv_nsec = (long)(ns % 1000000000ull);
    pthread_mutex_lock(&p->lock);
    if (gt_wan_cpool_busy(p) != 0) pthread_cond_timedwait(&p->done, &p->lock, &ts);
    pthread_mutex_unlock(&p->lock);
}
