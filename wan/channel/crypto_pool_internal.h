/* crypto_pool_internal.h — worker threads that seal and open frames for the secure channel.
 *
 * Why: one core seals AES-256-GCM at ~1.5 GB/s and opens at ~1 GB/s here, below what a
 * site's network (and loopback) moves, and sealing inline on the progress thread also stops
 * the transport while it runs. The channel therefore hands each frame's seal or open to a
 * small pool, keeps several in flight, and still launches and accepts frames strictly in
 * counter order on its own thread (channel.c; the nonce counter is reserved at submission,
 * frames are committed in arrival order, see secure_internal.h).
 *
 * A job is caller-owned memory; the pool only runs it and flags it done. Nothing calls back
 * across threads: the owner polls gt_wan_cpool_done(). gt_wan_cpool_cancel() guarantees the
 * pool no longer touches a job (or the buffers it names) when it returns, so an endpoint
 * that fails can complete its requests safely. One pool per net; the net's thread submits,
 * polls and cancels.
 */
#ifndef GT_WAN_CRYPTO_POOL_INTERNAL_H
#define GT_WAN_CRYPTO_POOL_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "secure_internal.h"

typedef enum { GT_WAN_CJOB_SEAL = 1, GT_WAN_CJOB_OPEN } gt_wan_cjob_kind_t;

typedef struct gt_wan_cjob {
    /* Set by the submitter. SEAL: in = plaintext, out = ciphertext + tag, seq reserved with
     * gt_wan_session_seal_reserve. OPEN: in = ciphertext + tag, declared_len from the header;
     * nothing is checked against the receive counter (gt_wan_session_open_detached). */
    gt_wan_cjob_kind_t kind;
    const gt_wan_session_t *sess;
    uint64_t seq, declared_len;
    const uint8_t *ad;
    size_t ad_len;
    const uint8_t *in;
    size_t in_len;
    uint8_t *out;
    size_t out_cap;
    /* Results, valid once done. */
    gt_status_t status;
    size_t out_len;
    /* Pool private. */
    atomic_int state_;
    struct gt_wan_cjob *next_;
} gt_wan_cjob_t;

typedef struct gt_wan_cpool gt_wan_cpool_t;

/* The thread count to use: GT_WAN_CRYPTO_THREADS when set (0 = seal and open inline on the
 * progress thread), else half the online CPUs, at most 8, and none (inline) below 4 CPUs. */
unsigned gt_wan_cpool_default_threads(void);

/* A pool of `threads` workers (started on the first submit). */
gt_status_t gt_wan_cpool_create(unsigned threads, gt_wan_cpool_t **pool_p);
/* Stops and joins the workers. No job may still be submitted. Accepts NULL. */
void gt_wan_cpool_destroy(gt_wan_cpool_t *pool);

/* Queues a job (its input fields set). GT_ERR_NOMEM/GT_ERR_IO when a worker cannot start. */
gt_status_t gt_wan_cpool_submit(gt_wan_cpool_t *pool, gt_wan_cjob_t *job);
/* 1 once the job has run (its results readable), else 0. */
int gt_wan_cpool_done(gt_wan_cjob_t *job);
/* Makes sure the pool no longer touches the job: unqueues it if no worker took it yet
 * (status GT_ERR_CLOSED), else waits for the worker to finish it. Then the job is idle. */
void gt_wan_cpool_cancel(gt_wan_cpool_t *pool, gt_wan_cjob_t *job);
/* 1 while the job is submitted and not yet cancelled or consumed (see gt_wan_cpool_consume). */
int gt_wan_cpool_pending(const gt_wan_cjob_t *job);
/* Marks a done job idle again (its results stay readable). */
void gt_wan_cpool_consume(gt_wan_cpool_t *pool, gt_wan_cjob_t *job);
/* Jobs submitted and not yet done. */
size_t gt_wan_cpool_busy(gt_wan_cpool_t *pool);
/* Sleeps until some job completes or timeout_ns passes (for an owner with nothing else to
 * do; returns at once when no job is running). */
void gt_wan_cpool_wait(gt_wan_cpool_t *pool, uint64_t timeout_ns);

#endif /* GT_WAN_CRYPTO_POOL_INTERNAL_H */
