/* channel.c — the secure channel: endpoints that carry framed, sealed, pipelined messages
 * over a transport backend (docs/design.md §5).
 *
 * Shape: an endpoint owns `window` transmit slots and `window` receive slots. A message is
 * cut into frames of at most frame_bytes; each frame is sealed into its slot's buffer with
 * the 80-byte header as associated data (or sent as header + the caller's bytes, zero copy,
 * with `security: none`) and handed to the transport, or first to the emulator's delay queue.
 * Receive slots stay posted; a completed slot is processed in order: header checks, then the
 * session's open() decrypts straight into the caller's buffer at the frame's offset. A frame
 * that fails is counted and dropped, never delivered; after max_rejects the peer is cut off.
 *
 * With crypto workers (crypto_pool.c; 4+ CPUs or GT_WAN_CRYPTO_THREADS), a frame's counter
 * is reserved when it is framed and its seal queued; tx_launch_ready() hands sealed frames
 * to the transport in counter order. Received frames are dispatched to the workers ahead
 * of their turn (rx_dispatch: every pre-decryption check done against the state the frames
 * ahead will leave, `ep->d`), then committed one by one in arrival order by rx_frame with
 * exactly the inline checks; an open whose prediction did not hold is wiped and redone
 * inline. Plaintext over a transport with peek (UCX) posts each receive after looking at the
 * frame's header, with the payload going straight into the caller's buffer (rx_post_ahead).
 *
 * Handshake: on the control connection, before any transport state exists (ctl.c). A frame
 * that fails a check here ends the connection at once (its counter sequence is broken, so
 * nothing after it could open): the frame is counted and dropped, and the layer above (the
 * mesh) reconnects with a fresh handshake and re-sends what was not acknowledged. Only a replay
 * of a frame already accepted (an older counter) is dropped without ending the connection, up
 * to max_rejects of them. Nothing here sleeps: progress() does a bounded amount of work and
 * returns. The public API (create, connect, accept, progress, waits) is in net.c.
 */
#include "channel_internal.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------------------ */

static int sealed(const gt_wan_net_t *net)
{
    return net->sec != NULL;
}

void gt_wan_ch_stats_add(gt_wan_ep_stats_t *a, const gt_wan_ep_stats_t *b)
{
    a->msgs_sent += b->msgs_sent;
    a->msgs_received += b->msgs_received;
    a->bytes_sent += b->bytes_sent;
    a->bytes_received += b->bytes_received;
    a->frames_sent += b->frames_sent;
    a->frames_received += b->frames_received;
    a->frames_opened_ahead += b->frames_opened_ahead;
    a->rejected_auth += b->rejected_auth;
    a->rejected_replay += b->rejected_replay;
    a->rejected_truncated += b->rejected_truncated;
    a->rejected_oversized += b->rejected_oversized;
    a->rejected_malformed += b->rejected_malformed;
}

const char *gt_wan_ch_peer_label(const gt_wan_ep_t *ep, char *buf, size_t cap)
{
    if (ep->sess && gt_wan_session_peer_name(ep->sess)[0])
        snprintf(buf, cap, "site %s (%u)", gt_wan_session_peer_name(ep->sess), ep->peer);
    else if (ep->peer != UINT32_MAX)
        snprintf(buf, cap, "site %u", ep->peer);
    else
        snprintf(buf, cap, "an incoming peer");
    return buf;
}

static void req_done(gt_wan_req_t *r, gt_status_t st)
{
    r->next_ = NULL;
    r->status = st;
}

/* An open that ran ahead of its commit and is not used: wait for it (or unqueue it) and
 * wipe what it wrote, so no undelivered plaintext stays in a receive buffer. */
static void rx_job_drop(gt_wan_ep_t *ep, gt_wan_ch_rx_slot_t *s)
{
    gt_wan_cjob_t *j = &s->job;
    gt_wan_cpool_cancel(ep->net->pool, j);
    if (j->status == GT_OK && j->out_len) sodium_memzero(j->out, j->out_len);
    j->status = GT_ERR_CLOSED;
    j->out_len = 0;
    s->dispatched = 0;
    if (ep->d.inflight) ep->d.inflight--;
}

/* Ends an endpoint: the transport endpoint is closed (so nothing it holds can still touch
 * our buffers), every request completes with `st`. */
static gt_status_t rx_frame(gt_wan_ep_t *ep, uint8_t *buf, size_t len, gt_wan_ch_rx_slot_t *js,
                            gt_wan_ch_rx_slot_t *slot);

/* Frames that had arrived whole before the connection failed are the peer's messages as much as
 * any: those whose opens run on the crypto workers are committed first, in order (a peer's
 * last message before it closes — a BYE, a FIN — must not be lost because its open was still
 * running when the close was seen). */
static void rx_flush_dispatched(gt_wan_ep_t *ep)
{
    ep->flushing = 1;
    while (ep->rx && ep->net->pool && (ep->state == GT_OK || ep->state == GT_ERR_AGAIN)) {
        gt_wan_ch_rx_slot_t *s = &ep->rx[ep->rx_head];
        if (!s->posted || s->treq.status != GT_OK || !s->dispatched) break;
        while (!gt_wan_cpool_done(&s->job)) gt_wan_cpool_wait(ep->net->pool, 1000);
        gt_wan_cpool_consume(ep->net->pool, &s->job);
        gt_status_t fst = rx_frame(ep, s->buf, s->treq.length, s, s);
        if (s->dispatched) { /* not taken: the rest goes with the connection */
            rx_job_drop(ep, s);
            break;
        }
        if (fst != GT_OK) break;
        s->posted = 0;
        ep->rx_head = (ep->rx_head + 1) % ep->nslots;
    }
    ep->flushing = 0;
}

void gt_wan_ch_ep_fail(gt_wan_ep_t *ep, gt_status_t st)
{
    if ((ep->state != GT_OK && ep->state != GT_ERR_AGAIN) || ep->flushing) return;
    if (st != GT_ERR_CLOSED) rx_flush_dispatched(ep);
    if (ep->state != GT_OK && ep->state != GT_ERR_AGAIN) return; /* a frame there failed it */
    ep->net->activity++;
    char who[96];
    if (st == GT_ERR_CLOSED || (ep->incoming && ep->phase <= GT_WAN_PH_HELLO))
        GT_DEBUG("wan: connection to %s ended: %s", gt_wan_ch_peer_label(ep, who, sizeof who),
                 gt_status_str(st)); /* pre-authentication: the gate counts and warns */
    else
        GT_WARN("wan: connection to %s ended: %s", gt_wan_ch_peer_label(ep, who, sizeof who),
                gt_status_str(st));
    ep->state = st;
    /* No worker may touch our buffers or the caller's once the requests complete: wait
     * for (or unqueue) every seal and open, and wipe the plaintext of opens that were never
     * committed (authentic, but not delivered). */
    for (size_t i = 0; ep->tx && ep->rx && i < ep->nslots; i++) {
        if (ep->tx[i].state == GT_WAN_SLOT_SEALING)
            gt_wan_cpool_cancel(ep->net->pool, &ep->tx[i].job);
        if (ep->rx[i].dispatched) rx_job_drop(ep, &ep->rx[i]);
    }
    memset(&ep->d, 0, sizeof ep->d);
    if (ep->tp) ep->net->ops->close(ep->tp, st != GT_ERR_CLOSED);
    ep->tp = NULL;
    gt_wan_ctl_close(ep);
    for (size_t i = 0; ep->tx && ep->rx && i < ep->nslots; i++) {
        ep->tx[i].state = GT_WAN_SLOT_FREE;
        ep->rx[i].posted = 0;
        ep->rx[i].split = NULL;
    }
    void *item;
    while (ep->delay && gt_wan_emu_queue_pop(ep->delay, UINT64_MAX, NULL, &item) == GT_OK) {
    }
    gt_wan_req_t *r;
    while ((r = ep->sq_head)) {
        ep->sq_head = r->next_;
        req_done(r, st);
    }
    while ((r = ep->rq_head)) {
        ep->rq_head = r->next_;
        req_done(r, st);
    }
    ep->sq_tail = ep->sq_frame = ep->rq_tail = NULL;
    gt_wan_hs_destroy(ep->hs);
    ep->hs = NULL;
}

typedef enum { REJ_AUTH, REJ_REPLAY, REJ_TRUNCATED, REJ_OVERSIZED, REJ_MALFORMED } rej_t;

/* Counts a rejected frame. A replay of a frame already accepted (`stale`) is only dropped, up
 * to max_rejects of them; anything else ends the connection now: the frame's counter value is
 * lost, so no later frame could open, and a fresh handshake (the mesh redials and re-sends)
 * costs one frame's re-send instead of the link. */
static void reject(gt_wan_ep_t *ep, rej_t kind, const char *why, int stale)
{
    static const char *names[] = {"bad tag", "replay", "truncated", "oversized", "malformed"};
    switch (kind) {
    case REJ_AUTH: ep->stats.rejected_auth++; break;
    case REJ_REPLAY: ep->stats.rejected_replay++; break;
    case REJ_TRUNCATED: ep->stats.rejected_truncated++; break;
    case REJ_OVERSIZED: ep->stats.rejected_oversized++; break;
    case REJ_MALFORMED: ep->stats.rejected_malformed++; break;
    }
    char who[96];
    gt_wan_ch_peer_label(ep, who, sizeof who);
    if (stale && ++ep->rejects < ep->net->p.max_rejects) {
        GT_WARN("wan: dropped a replayed frame from %s; %u of %u allowed", who, ep->rejects,
                ep->net->p.max_rejects);
        return;
    }
    GT_WARN("wan: rejected a frame from %s (%s%s%s); dropping the connection", who, names[kind],
            why ? ": " : "", why ? why : "");
    gt_wan_ch_ep_fail(ep, kind == REJ_MALFORMED || kind == REJ_TRUNCATED ? GT_ERR_CORRUPT
                                                                         : GT_ERR_AUTH);
}

/* ---- transmit ----------------------------------------------------------------------- */

static gt_wan_ch_tx_slot_t *tx_free_slot(gt_wan_ep_t *ep)
{
    for (size_t i = 0; i < ep->nslots; i++)
        if (ep->tx[i].state == GT_WAN_SLOT_FREE) return &ep->tx[i];
    return NULL;
}

/* Slots the transport (or the emulator) holds: what the io timeout watches. */
static size_t tx_busy(const gt_wan_ep_t *ep)
{
    size_t n = 0;
    for (size_t i = 0; i < ep->nslots; i++)
        n += ep->tx[i].state == GT_WAN_SLOT_DELAYED || ep->tx[i].state == GT_WAN_SLOT_SENDING;
    return n;
}

static void tx_to_transport(gt_wan_ep_t *ep, gt_wan_ch_tx_slot_t *s)
{
    s->treq.cb = NULL;
    s->treq.user = s;
    if (s->state == GT_WAN_SLOT_DELAYED) ep->tx_idle_since_ns = gt_time_ns(); /* held, not stuck */
    s->state = GT_WAN_SLOT_SENDING;
    gt_status_t st = ep->net->ops->send(ep->tp, s->iov, s->iovcnt, &s->treq);
    if (st != GT_OK) {
        s->state = GT_WAN_SLOT_FREE;
        gt_wan_ch_ep_fail(ep, st);
    }
}

/* A frame is ready in slot s: tamper (tests), then delay (emulator) or send. */
static void tx_launch(gt_wan_ep_t *ep, gt_wan_ch_tx_slot_t *s)
{
    gt_wan_net_t *net = ep->net;
    if (tx_busy(ep) == 0) ep->tx_idle_since_ns = gt_time_ns();
    if (ep->tamper && s->owner && s->iovcnt == 1) {
        size_t len = s->iov[0].iov_len;
        ep->tamper(ep->tamper_arg, ep, s->buf, &len);
        if (len < s->iov[0].iov_len) s->iov[0].iov_len = len;
        if (ep->state != GT_OK) return;
    }
    ep->stats.frames_sent++;
    if (!net->p.emu) {
        tx_to_transport(ep, s);
        return;
    }
    size_t bytes = 0;
    for (size_t i = 0; i < s->iovcnt; i++) bytes += s->iov[i].iov_len;
    uint64_t due = 0;
    gt_status_t st =
        gt_wan_emu_schedule(net->p.emu, net->p.site_id, ep->peer, bytes, gt_time_ns(), &due);
    if (st == GT_OK) st = gt_wan_emu_queue_push(ep->delay, due, s);
    if (st != GT_OK) {
        gt_wan_ch_ep_fail(ep, st);
        return;
    }
    s->state = GT_WAN_SLOT_DELAYED;
}

/* Hands sealed frames to the transport in counter order (the receiver accepts nothing
 * else), as soon as the next one's seal is done. */
/* Frame slot s now carries the next n bytes of send r (len in all): once every byte is framed,
 * the queue moves on to the next send. */
static void tx_claim(gt_wan_ep_t *ep, gt_wan_ch_tx_slot_t *s, gt_wan_req_t *r, size_t n, size_t len)
{
    s->owner = r;
    r->off_ += n;
    r->inflight_++;
    if (r->off_ == len) {
        r->flags_ |= GT_WAN_REQ_FRAMED;
        ep->sq_frame = r->next_;
    }
}

static void tx_launch_ready(gt_wan_ep_t *ep)
{
    for (int found = 1; found && ep->state == GT_OK;) {
        found = 0;
        for (size_t i = 0; i < ep->nslots; i++) {
            gt_wan_ch_tx_slot_t *s = &ep->tx[i];
            if (s->state != GT_WAN_SLOT_SEALING || s->seq != ep->tx_launch_seq) continue;
            if (!gt_wan_cpool_done(&s->job)) return;
            gt_wan_cpool_consume(ep->net->pool, &s->job);
            if (s->job.status != GT_OK) {
                s->state = GT_WAN_SLOT_FREE;
                gt_wan_ch_ep_fail(ep, s->job.status);
                return;
            }
            s->iov[0].iov_base = s->buf;
            s->iov[0].iov_len = GT_WAN_FRAME_HDR_LEN + s->job.out_len;
            s->iovcnt = 1;
            s->state = GT_WAN_SLOT_FREE; /* tx_launch moves it on */
            ep->tx_launch_seq++;
            ep->net->activity++;
            tx_launch(ep, s);
            found = 1;
            break;
        }
    }
}

/* Frames as much of the send queue as free slots allow. */
void gt_wan_ch_tx_pump(gt_wan_ep_t *ep)
{
    gt_wan_net_t *net = ep->net;
    gt_wan_ch_tx_slot_t *s;
    while (ep->state == GT_OK && ep->sq_frame && (s = tx_free_slot(ep))) {
        gt_wan_req_t *r = ep->sq_frame;
        size_t len = r->cap_, off = r->off_;
        size_t n = len - off < net->p.frame_bytes ? len - off : net->p.frame_bytes;
        gt_wan_frame_hdr_t h = {.type = r->msg.type,
                                .sender = net->p.site_id,
                                .lane = r->msg.lane,
                                .fragment = r->msg.fragment,
                                .chunk = r->msg.chunk,
                                .run_id = net->run_hash,
                                .view_epoch = r->msg.view_epoch,
                                .round = r->msg.round,
                                .payload_len = (uint32_t)n,
                                .msg_len = len,
                                .msg_off = off};
        const uint8_t *src = (const uint8_t *)r->buf_ + off;
        if (sealed(net) && net->pool) {
            /* The counter value is taken now, in submission order; the seal runs on a
             * worker and tx_launch_ready() sends frames in counter order. */
            gt_status_t st = gt_wan_session_seal_reserve(ep->sess, n, &h.seq);
            if (st == GT_OK) {
                gt_wan_frame_encode(&h, s->buf);
                s->seq = h.seq;
                s->job.kind = GT_WAN_CJOB_SEAL;
                s->job.sess = ep->sess;
                s->job.seq = h.seq;
                s->job.ad = s->buf;
                s->job.ad_len = GT_WAN_FRAME_HDR_LEN;
                s->job.in = src;
                s->job.in_len = n;
                s->job.out = s->buf + GT_WAN_FRAME_HDR_LEN;
                s->job.out_cap = s->buf_cap - GT_WAN_FRAME_HDR_LEN;
                st = gt_wan_cpool_submit(net->pool, &s->job);
            }
            if (st != GT_OK) {
                gt_wan_ch_ep_fail(ep, st);
                return;
            }
            s->state = GT_WAN_SLOT_SEALING;
            tx_claim(ep, s, r, n, len);
            continue;
        }
        if (sealed(net)) {
            h.seq = gt_wan_session_send_seq(ep->sess);
            gt_wan_frame_encode(&h, s->buf);
            size_t ct_len = 0;
            gt_status_t st = gt_wan_session_seal(ep->sess, h.seq, s->buf, GT_WAN_FRAME_HDR_LEN, src,
                                                 n, s->buf + GT_WAN_FRAME_HDR_LEN,
                                                 s->buf_cap - GT_WAN_FRAME_HDR_LEN, &ct_len);
            if (st != GT_OK) {
                gt_wan_ch_ep_fail(ep, st);
                return;
            }
            s->iov[0].iov_base = s->buf;
            s->iov[0].iov_len = GT_WAN_FRAME_HDR_LEN + ct_len;
            s->iovcnt = 1;
        } else {
            h.flags = GT_WAN_FRAME_FLAG_PLAIN;
            h.seq = ep->plain_tx++;
            gt_wan_frame_encode(&h, s->hdr);
            s->iov[0].iov_base = s->hdr;
            s->iov[0].iov_len = GT_WAN_FRAME_HDR_LEN;
            s->iov[1].iov_base = (void *)src;
            s->iov[1].iov_len = n;
            s->iovcnt = n ? 2 : 1;
        }
        tx_claim(ep, s, r, n, len);
        tx_launch(ep, s);
        /* Sealing a frame takes a while; let the transport move what is already posted
         * (a rendezvous waits on both ends) before sealing the next. */
        if (sealed(net) && ep->tp) net->ops->progress(net->tp);
    }
    tx_launch_ready(ep);
}

static void sq_remove(gt_wan_ep_t *ep, gt_wan_req_t *r)
{
    gt_wan_req_t *prev = NULL;
    for (gt_wan_req_t *q = ep->sq_head; q; prev = q, q = q->next_)
        if (q == r) {
            if (prev)
                prev->next_ = r->next_;
            else
                ep->sq_head = r->next_;
            if (ep->sq_tail == r) ep->sq_tail = prev;
            if (ep->sq_frame == r) ep->sq_frame = r->next_;
            return;
        }
}

void gt_wan_ch_tx_progress(gt_wan_ep_t *ep)
{
    uint64_t now = gt_time_ns();
    /* Frames whose emulated arrival time has come go to the transport, in order. */
    void *item;
    while ((ep->state == GT_OK || ep->state == GT_ERR_AGAIN) &&
           gt_wan_emu_queue_pop(ep->delay, now, NULL, &item) == GT_OK)
        tx_to_transport(ep, item);
    for (size_t i = 0; i < ep->nslots && (ep->state == GT_OK || ep->state == GT_ERR_AGAIN); i++) {
        gt_wan_ch_tx_slot_t *s = &ep->tx[i];
        if (s->state != GT_WAN_SLOT_SENDING || s->treq.status == GT_ERR_AGAIN) continue;
        gt_status_t st = s->treq.status;
        s->state = GT_WAN_SLOT_FREE;
        ep->tx_idle_since_ns = now;
        ep->net->activity++;
        if (st != GT_OK) {
            gt_wan_ch_ep_fail(ep, st);
            return;
        }
        gt_wan_req_t *r = s->owner;
        if (!r) continue;
        if (--r->inflight_ == 0 && (r->flags_ & GT_WAN_REQ_FRAMED)) {
            sq_remove(ep, r);
            ep->stats.msgs_sent++;
            ep->stats.bytes_sent += r->cap_;
            r->length = r->cap_;
            req_done(r, GT_OK);
        }
    }
    gt_wan_ch_tx_pump(ep);
    /* A transport that accepts nothing for io_timeout means the peer is gone. */
    size_t busy = tx_busy(ep);
    now = gt_time_ns();
    if (ep->state == GT_OK && busy && gt_wan_emu_queue_len(ep->delay) < busy &&
        now > ep->tx_idle_since_ns &&
        now - ep->tx_idle_since_ns > (uint64_t)ep->net->p.io_timeout_ms * 1000000ull) {
        char who[96];
        GT_ERROR("wan: no send progress to %s for %u ms", gt_wan_ch_peer_label(ep, who, sizeof who),
                 ep->net->p.io_timeout_ms);
        gt_wan_ch_ep_fail(ep, GT_ERR_TIMEOUT);
    }
}

static gt_status_t rx_post(gt_wan_ep_t *ep, gt_wan_ch_rx_slot_t *s);
static int rx_splits(const gt_wan_net_t *net);

/* ---- readiness ---------------------------------------------------------------------- */

void gt_wan_ch_ep_ready(gt_wan_ep_t *ep)
{
    ep->state = GT_OK;
    ep->phase = GT_WAN_PH_READY;
    ep->net->activity++;
    /* The address frames took the session's counter 0 each way; data frames follow. */
    if (ep->sess) ep->tx_launch_seq = gt_wan_session_send_seq(ep->sess);
    /* Receives are posted in slot order once, so the transport fills them in ring order (a
     * plaintext channel over a transport with peek posts them as frames come instead). */
    for (size_t i = 0; i < ep->nslots && !rx_splits(ep->net); i++)
        if (rx_post(ep, &ep->rx[i]) != GT_OK) {
            gt_wan_ch_ep_fail(ep, GT_ERR_IO);
            return;
        }
    char who[96];
    GT_DEBUG("wan: connection to %s ready (%s)", gt_wan_ch_peer_label(ep, who, sizeof who),
             ep->sess ? gt_wan_cipher_name(gt_wan_session_cipher(ep->sess)) : "plaintext");
    gt_wan_ch_tx_pump(ep);
}

/* ---- receive ------------------------------------------------------------------------ */

static gt_status_t rx_post(gt_wan_ep_t *ep, gt_wan_ch_rx_slot_t *s)
{
    s->treq.cb = NULL;
    s->treq.user = s;
    gt_status_t st = ep->net->ops->recv(
        ep->tp, s->buf, GT_WAN_FRAME_HDR_LEN + GT_WAN_SEAL_BOUND(ep->net->p.frame_bytes), &s->treq);
    s->posted = st == GT_OK;
    return st == GT_ERR_AGAIN ? GT_OK : st;
}

static int same_message(const gt_wan_frame_hdr_t *a, const gt_wan_frame_hdr_t *b)
{
    return a->type == b->type && a->view_epoch == b->view_epoch && a->round == b->round &&
           a->lane == b->lane && a->fragment == b->fragment && a->chunk == b->chunk &&
           a->msg_len == b->msg_len && a->sender == b->sender;
}

/* One received frame, committed in arrival order. GT_ERR_AGAIN: it starts a message and no
 * receive is posted; keep it. `job`: its open already ran on the pool (NULL: open inline); it
 * is used only if it wrote where this frame's plaintext belongs, else it is wiped and the
 * frame opened here, so the outcome is always exactly the inline one. */
static gt_status_t rx_frame(gt_wan_ep_t *ep, uint8_t *buf, size_t len, gt_wan_ch_rx_slot_t *js,
                            gt_wan_ch_rx_slot_t *ss)
{
    gt_wan_net_t *net = ep->net;
    gt_wan_frame_hdr_t h;
    gt_status_t st = gt_wan_frame_decode(buf, len, &h);
    if (st != GT_OK) {
        reject(ep, st == GT_ERR_OVERFLOW ? REJ_OVERSIZED : REJ_MALFORMED, "frame header", 0);
        return GT_OK;
    }
    if (h.run_id != net->run_hash) {
        reject(ep, REJ_MALFORMED, "another run id", 0);
        return GT_OK;
    }
    const uint8_t *payload = buf + GT_WAN_FRAME_HDR_LEN;
    size_t wire = len - GT_WAN_FRAME_HDR_LEN;
    if (h.type == GT_WAN_MSG_HELLO) {
        reject(ep, REJ_MALFORMED, "handshake frame on the data path", 0);
        return GT_OK;
    }
    if (ep->state != GT_OK) {
        reject(ep, REJ_MALFORMED, "data before the connection is ready", 0);
        return GT_OK;
    }
    if (!!(h.flags & GT_WAN_FRAME_FLAG_PLAIN) != !sealed(net)) {
        reject(ep, REJ_MALFORMED, "security mode flag", 0);
        return GT_OK;
    }
    /* A frame whose counter was already accepted: a duplicate or a replay, harmless to drop. */
    uint64_t expect = sealed(net) ? gt_wan_session_recv_seq(ep->sess) : ep->plain_rx;
    if (h.seq < expect) {
        if (js) {
            rx_job_drop(ep, js);
            ep->d.poisoned = 1;
        }
        reject(ep, REJ_REPLAY, NULL, 1);
        return GT_OK;
    }
    if (!sealed(net)) {
        if (wire != h.payload_len) {
            reject(ep, REJ_TRUNCATED, NULL, 0);
            return GT_OK;
        }
        if (h.payload_len > net->p.frame_bytes) {
            reject(ep, REJ_OVERSIZED, NULL, 0);
            return GT_OK;
        }
        if (h.seq != ep->plain_rx) {
            reject(ep, REJ_REPLAY, "a frame is missing", 0);
            return GT_OK;
        }
    }
    gt_wan_req_t *r = ep->rq_head;
    int starting = !ep->asm_active;
    if (starting) {
        if (h.msg_off != 0) {
            reject(ep, REJ_MALFORMED, "frame out of place", 0);
            return GT_OK;
        }
        if (!r) return GT_ERR_AGAIN;
    } else if (!same_message(&h, &ep->asm_hdr) || h.msg_off != ep->asm_got) {
        reject(ep, REJ_MALFORMED, "frame out of place", 0);
        return GT_OK;
    }
    int discard = starting ? h.msg_len > r->cap_ : ep->asm_discard;
    uint8_t *dst = discard ? buf + GT_WAN_FRAME_HDR_LEN : (uint8_t *)r->buf_ + h.msg_off;
    size_t cap = discard ? wire : r->cap_ - h.msg_off;
    if (sealed(net)) {
        size_t n = 0;
        gt_wan_cjob_t *job = js ? &js->job : NULL;
        if (job && job->out == dst && job->out_cap == cap && job->seq == h.seq &&
            job->declared_len == h.payload_len) {
            js->dispatched = 0;
            ep->d.inflight--;
            st = gt_wan_session_open_commit(ep->sess, h.seq, h.payload_len, wire, job->status);
            if (st == GT_OK) n = job->out_len;
            if (st == GT_OK) ep->stats.frames_opened_ahead++;
            if (st != GT_OK && job->status == GT_OK && job->out_len)
                sodium_memzero(job->out, job->out_len); /* authentic, but refused: a replay */
            if (st != GT_OK) ep->d.poisoned = 1;
        } else {
            if (js) {
                rx_job_drop(ep, js);
                ep->d.poisoned = 1;
            }
            st = gt_wan_session_open(ep->sess, h.seq, h.payload_len, buf, GT_WAN_FRAME_HDR_LEN,
                                     payload, wire, dst, cap, &n);
        }
        if (st != GT_OK) {
            gt_wan_reject_t why = gt_wan_session_last_reject(ep->sess);
            rej_t k = why == GT_WAN_REJECT_REPLAY      ? REJ_REPLAY
                      : why == GT_WAN_REJECT_TRUNCATED ? REJ_TRUNCATED
                      : why == GT_WAN_REJECT_OVERSIZED ? REJ_OVERSIZED
                                                       : REJ_AUTH;
            reject(ep, k, k == REJ_REPLAY ? "a frame is missing" : NULL, 0);
            return GT_OK;
        }
    } else if (ss && ss->split) { /* the payload is already in place */
        if (ss->split != dst) {
            GT_ERROR("wan: a frame received ahead did not land where it belongs");
            gt_wan_ch_ep_fail(ep, GT_ERR_INTERNAL);
            return GT_OK;
        }
        ss->split = NULL;
        ep->d.inflight--;
        ep->plain_rx++;
    } else {
        memcpy(dst, payload, h.payload_len);
        ep->plain_rx++;
    }
    ep->stats.frames_received++;
    net->activity++;
    if (starting) {
        ep->asm_active = 1;
        ep->asm_hdr = h;
        ep->asm_got = 0;
        ep->asm_discard = discard;
        if (discard) { /* too long for the posted buffer: fail that receive now */
            GT_WARN("wan: a %llu-byte message does not fit a %zu-byte receive; discarded",
                    (unsigned long long)h.msg_len, r->cap_);
            ep->rq_head = r->next_;
            if (!ep->rq_head) ep->rq_tail = NULL;
            if (ep->d.last == r) ep->d.last = NULL;
            req_done(r, GT_ERR_OVERFLOW);
        }
    }
    ep->asm_got += h.payload_len;
    if (ep->asm_got == h.msg_len) {
        ep->asm_active = 0;
        if (!ep->asm_discard) {
            ep->rq_head = r->next_;
            if (!ep->rq_head) ep->rq_tail = NULL;
            r->msg.type = h.type;
            r->msg.sender = ep->peer;
            r->msg.view_epoch = h.view_epoch;
            r->msg.round = h.round;
            r->msg.lane = h.lane;
            r->msg.fragment = h.fragment;
            r->msg.chunk = h.chunk;
            r->length = h.msg_len;
            ep->stats.msgs_received++;
            ep->stats.bytes_received += h.msg_len;
            if (ep->d.last == r) ep->d.last = NULL;
            req_done(r, GT_OK);
        }
    }
    return GT_OK;
}

/* Plaintext over a transport that can peek: receives are posted one message at a time,
 * each payload straight into the caller's buffer (no copy out of a frame buffer). */
static int rx_splits(const gt_wan_net_t *net)
{
    return !sealed(net) && net->ops->peek && net->ops->recv_split;
}

static gt_wan_req_t *d_next_req(const gt_wan_ep_t *ep);

/* A peeked frame header that rx_frame will accept as the next data frame: where its payload
 * goes (the state advanced as if it were committed), or NULL. */
static uint8_t *rx_plan_split(gt_wan_ep_t *ep, const uint8_t *hdr, size_t total, int *wait_p)
{
    gt_wan_net_t *net = ep->net;
    gt_wan_frame_hdr_t h;
    if (ep->state != GT_OK || total < GT_WAN_FRAME_HDR_LEN ||
        gt_wan_frame_decode(hdr, GT_WAN_FRAME_HDR_LEN, &h) != GT_OK || h.run_id != net->run_hash ||
        h.type == GT_WAN_MSG_HELLO || !(h.flags & GT_WAN_FRAME_FLAG_PLAIN) ||
        total - GT_WAN_FRAME_HDR_LEN != h.payload_len || h.payload_len > net->p.frame_bytes ||
        h.payload_len == 0 || h.seq != ep->d.seq)
        return NULL;
    gt_wan_req_t *r;
    if (!ep->d.asm_active) {
        if (h.msg_off != 0) return NULL;
        if (!(r = d_next_req(ep))) { /* a good frame, no receive yet: leave it queued */
            *wait_p = 1;
            return NULL;
        }
        if (h.msg_len > r->cap_) return NULL;
    } else {
        if (ep->d.asm_discard || !same_message(&h, &ep->d.asm_hdr) || h.msg_off != ep->d.asm_got)
            return NULL;
        r = ep->d.cur;
    }
    if (!r || r->cap_ - h.msg_off < h.payload_len) return NULL;
    ep->d.seq++;
    if (!ep->d.asm_active) {
        ep->d.asm_active = 1;
        ep->d.asm_hdr = h;
        ep->d.asm_got = 0;
        ep->d.asm_discard = 0;
        ep->d.cur = r;
    }
    ep->d.asm_got += h.payload_len;
    if (ep->d.asm_got == h.msg_len) {
        ep->d.asm_active = 0;
        ep->d.last = r;
        ep->d.cur = NULL;
    }
    return (uint8_t *)r->buf_ + h.msg_off;
}

/* Posts receives on the free slots, in order: a data frame that passes every check on its
 * peeked header goes split (header to the slot, payload in place); anything else (handshake,
 * a frame that will be refused, a message with no receive yet) goes whole into the slot, as
 * without peek, once nothing is posted ahead of it. */
static void rx_post_ahead(gt_wan_ep_t *ep)
{
    if (ep->d.inflight == 0) {
        ep->d.asm_active = ep->asm_active;
        ep->d.asm_discard = ep->asm_discard;
        ep->d.asm_hdr = ep->asm_hdr;
        ep->d.asm_got = ep->asm_got;
        ep->d.cur = ep->asm_active && !ep->asm_discard ? ep->rq_head : NULL;
        ep->d.last = NULL;
        ep->d.seq = ep->plain_rx;
    }
    for (size_t k = 0; k < ep->nslots && (ep->state == GT_OK || ep->state == GT_ERR_AGAIN); k++) {
        gt_wan_ch_rx_slot_t *s = &ep->rx[(ep->rx_head + k) % ep->nslots];
        if (s->posted) {
            if (s->split) continue;
            return; /* a whole-frame receive ahead: its commit decides what follows */
        }
        uint8_t hdr[GT_WAN_FRAME_HDR_LEN];
        size_t head = 0, total = 0;
        gt_status_t st = ep->net->ops->peek(ep->tp, hdr, sizeof hdr, &head, &total);
        if (st == GT_ERR_AGAIN) return;
        if (st != GT_OK) {
            gt_wan_ch_ep_fail(ep, st);
            return;
        }
        int wait = 0;
        uint8_t *dst = head == GT_WAN_FRAME_HDR_LEN ? rx_plan_split(ep, hdr, total, &wait) : NULL;
        if (wait) return;
        if (dst) {
            s->treq.cb = NULL;
            s->treq.user = s;
            st = ep->net->ops->recv_split(ep->tp, s->buf, GT_WAN_FRAME_HDR_LEN, dst,
                                          total - GT_WAN_FRAME_HDR_LEN, &s->treq);
            if (st != GT_OK) {
                gt_wan_ch_ep_fail(ep, st);
                return;
            }
            s->posted = 1;
            s->split = dst;
            ep->d.inflight++;
            continue;
        }
        if (ep->d.inflight) return; /* wait until the frames ahead are committed */
        if (rx_post(ep, s) != GT_OK) gt_wan_ch_ep_fail(ep, GT_ERR_IO);
        return;
    }
}

/* The receive the next message goes to, as the dispatched frames will leave things. */
static gt_wan_req_t *d_next_req(const gt_wan_ep_t *ep)
{
    return ep->d.last ? ep->d.last->next_ : ep->rq_head;
}

/* Starts the open of a received frame on the pool ahead of its commit, predicting where its
 * plaintext goes from the dispatched frames before it. Only a frame that every check before
 * decryption would pass (with the counter the frames before it leave) is dispatched: 1 when
 * it was, 0 when it must wait for its turn to be handled inline. */
static int rx_dispatch_one(gt_wan_ep_t *ep, gt_wan_ch_rx_slot_t *s)
{
    gt_wan_net_t *net = ep->net;
    uint8_t *buf = s->buf;
    size_t len = s->treq.length;
    gt_wan_frame_hdr_t h;
    if (gt_wan_frame_decode(buf, len, &h) != GT_OK || h.run_id != net->run_hash ||
        h.type == GT_WAN_MSG_HELLO || (h.flags & GT_WAN_FRAME_FLAG_PLAIN))
        return 0;
    size_t wire = len - GT_WAN_FRAME_HDR_LEN;
    if (h.payload_len > net->p.frame_bytes || wire != GT_WAN_SEAL_BOUND(h.payload_len) ||
        h.seq != ep->d.seq)
        return 0;
    gt_wan_req_t *r;
    int discard;
    if (!ep->d.asm_active) {
        if (h.msg_off != 0 || !(r = d_next_req(ep))) return 0;
        discard = h.msg_len > r->cap_;
    } else {
        if (!same_message(&h, &ep->d.asm_hdr) || h.msg_off != ep->d.asm_got) return 0;
        r = ep->d.cur;
        discard = ep->d.asm_discard;
    }
    /* A message too long for its receive is opened inline, in place (rare, and an open in
     * place cannot be redone if the prediction was wrong). */
    if (discard || !r) return 0;
    uint8_t *dst = (uint8_t *)r->buf_ + h.msg_off;
    size_t cap = r->cap_ - h.msg_off;
    if (cap < h.payload_len) return 0;
    gt_wan_cjob_t *j = &s->job;
    j->kind = GT_WAN_CJOB_OPEN;
    j->sess = ep->sess;
    j->seq = h.seq;
    j->declared_len = h.payload_len;
    j->ad = buf;
    j->ad_len = GT_WAN_FRAME_HDR_LEN;
    j->in = buf + GT_WAN_FRAME_HDR_LEN;
    j->in_len = wire;
    j->out = dst;
    j->out_cap = cap;
    if (gt_wan_cpool_submit(net->pool, j) != GT_OK) return 0; /* inline then */
    s->dispatched = 1;
    ep->d.inflight++;
    ep->d.seq++;
    if (!ep->d.asm_active) {
        ep->d.asm_active = 1;
        ep->d.asm_hdr = h;
        ep->d.asm_got = 0;
        ep->d.asm_discard = discard;
        ep->d.cur = discard ? NULL : r;
        if (discard) ep->d.last = r; /* that receive fails at the first frame */
    }
    ep->d.asm_got += h.payload_len;
    if (ep->d.asm_got == h.msg_len) {
        ep->d.asm_active = 0;
        if (!ep->d.asm_discard) ep->d.last = r;
        ep->d.cur = NULL;
    }
    return 1;
}

/* Dispatches the received frames after the ones in flight, in order, while each can be. */
static void rx_dispatch(gt_wan_ep_t *ep)
{
    if (!ep->net->pool || !ep->sess || ep->state != GT_OK) return;
    if (ep->d.inflight == 0) { /* nothing ahead: predict from the real state */
        ep->d.poisoned = 0;
        ep->d.asm_active = ep->asm_active;
        ep->d.asm_discard = ep->asm_discard;
        ep->d.asm_hdr = ep->asm_hdr;
        ep->d.asm_got = ep->asm_got;
        ep->d.cur = ep->asm_active && !ep->asm_discard ? ep->rq_head : NULL;
        ep->d.last = NULL;
        ep->d.seq = gt_wan_session_recv_seq(ep->sess);
    }
    if (ep->d.poisoned) return;
    for (size_t k = 0; k < ep->nslots; k++) {
        gt_wan_ch_rx_slot_t *s = &ep->rx[(ep->rx_head + k) % ep->nslots];
        if (!s->posted || s->treq.status != GT_OK) return; /* frames arrive in order */
        if (s->dispatched) continue;
        if (!rx_dispatch_one(ep, s)) return;
    }
}

void gt_wan_ch_rx_progress(gt_wan_ep_t *ep)
{
    int splits = rx_splits(ep->net);
    while (ep->state == GT_OK || ep->state == GT_ERR_AGAIN) {
        gt_wan_ch_rx_slot_t *s = &ep->rx[ep->rx_head];
        if (splits) rx_post_ahead(ep);
        if (!s->posted && !splits) {
            if (rx_post(ep, s) != GT_OK) gt_wan_ch_ep_fail(ep, GT_ERR_IO);
        }
        if (!s->posted) return;
        if (s->treq.status == GT_ERR_AGAIN) break;
        /* Hand every frame that has arrived to the crypto workers before committing the first:
         * dispatched only once this loop had run dry, they never were while frames kept coming
         * (each was opened inline here, one at a time: the receiver's opens never ran on the
         * pool, measured on 16 cores as encrypted throughput flat at ~0.4 of one core's AES-GCM
         * rate whatever the worker count). */
        if (!s->dispatched) rx_dispatch(ep);
        if (s->treq.status != GT_OK) {
            if (s->treq.status == GT_ERR_OVERFLOW) { /* a transport message above any frame */
                ep->stats.rejected_oversized++;
                char who[96];
                GT_ERROR("wan: %s sent a message larger than any frame; disconnecting",
                         gt_wan_ch_peer_label(ep, who, sizeof who));
            }
            gt_wan_ch_ep_fail(ep, s->treq.status);
            return;
        }
        if (s->dispatched && !gt_wan_cpool_done(&s->job)) break; /* its open still runs */
        if (s->dispatched) gt_wan_cpool_consume(ep->net->pool, &s->job);
        int was_split = s->split != NULL;
        gt_status_t fst = rx_frame(ep, s->buf, s->treq.length, s->dispatched ? s : NULL, s);
        if (was_split && s->split && (ep->state == GT_OK || ep->state == GT_ERR_AGAIN)) {
            GT_ERROR("wan: a frame received ahead was not taken");
            gt_wan_ch_ep_fail(ep, GT_ERR_INTERNAL);
        }
        if (s->dispatched && (ep->state == GT_OK || ep->state == GT_ERR_AGAIN)) {
            rx_job_drop(ep, s); /* not used (kept for a receive, or a rejected header) */
            ep->d.poisoned = 1;
        }
        if (fst == GT_ERR_AGAIN) return;
        if (ep->state != GT_OK && ep->state != GT_ERR_AGAIN) return;
        s->posted = 0;
        gt_status_t st = splits ? GT_OK : rx_post(ep, s);
        if (st != GT_OK) {
            gt_wan_ch_ep_fail(ep, st);
            return;
        }
        ep->rx_head = (ep->rx_head + 1) % ep->nslots;
        /* The same on receive: opening a frame takes a while. */
        if (sealed(ep->net) && ep->tp && !ep->net->pool) ep->net->ops->progress(ep->net->tp);
    }
    rx_dispatch(ep);
}

/* ---- endpoints ---------------------------------------------------------------------- */

void gt_wan_ch_ep_free(gt_wan_ep_t *ep)
{
    if (!ep) return;
    gt_wan_net_t *net = ep->net;
    for (gt_wan_ep_t **pp = &net->eps; *pp; pp = &(*pp)->next)
        if (*pp == ep) {
            *pp = ep->next;
            break;
        }
    gt_wan_ch_stats_add(&net->closed_stats, &ep->stats);
    gt_wan_ctl_close(ep);
    if (ep->preauth) {
        ep->preauth = 0;
        net->n_preauth--;
        net->gate.preauth_now = net->n_preauth;
    }
    for (size_t i = 0; ep->tx && ep->rx && i < ep->nslots; i++) { /* normally done by fail */
        if (ep->tx[i].state == GT_WAN_SLOT_SEALING) gt_wan_cpool_cancel(net->pool, &ep->tx[i].job);
        if (ep->rx[i].dispatched) rx_job_drop(ep, &ep->rx[i]);
    }
    if (ep->tx)
        for (size_t i = 0; i < ep->nslots; i++) free(ep->tx[i].buf);
    if (ep->rx)
        for (size_t i = 0; i < ep->nslots; i++) free(ep->rx[i].buf);
    free(ep->tx);
    free(ep->rx);
    gt_wan_emu_queue_destroy(ep->delay);
    gt_wan_hs_destroy(ep->hs);
    gt_wan_session_destroy(ep->sess);
    ep->magic = 0;
    free(ep);
}

gt_status_t gt_wan_ch_ep_alloc(gt_wan_net_t *net, int fd, int incoming, uint32_t peer,
                               gt_wan_ep_t **ep_p)
{
    gt_wan_ep_t *ep = calloc(1, sizeof *ep);
    if (!ep) {
        close(fd);
        return GT_ERR_NOMEM;
    }
    ep->magic = GT_WAN_EP_MAGIC;
    ep->net = net;
    ep->fd = fd;
    ep->incoming = incoming;
    ep->peer = peer;
    ep->state = GT_ERR_AGAIN;
    ep->nslots = net->p.window;
    ep->tunnel_lfd = -1;
    ep->next = net->eps;
    net->eps = ep;
    *ep_p = ep;
    return GT_OK;
}

gt_status_t gt_wan_ch_ep_activate(gt_wan_ep_t *ep)
{
    gt_wan_net_t *net = ep->net;
    gt_status_t st;
    ep->tx = calloc(ep->nslots, sizeof *ep->tx);
    ep->rx = calloc(ep->nslots, sizeof *ep->rx);
    if (!ep->tx || !ep->rx) return GT_ERR_NOMEM;
    size_t rx_cap = GT_WAN_FRAME_HDR_LEN + GT_WAN_SEAL_BOUND(net->p.frame_bytes);
    size_t tx_cap = sealed(net) ? rx_cap : GT_WAN_FRAME_HDR_LEN;
    for (size_t i = 0; i < ep->nslots; i++) {
        ep->tx[i].ep = ep;
        ep->tx[i].buf_cap = tx_cap;
        if (!(ep->tx[i].buf = malloc(tx_cap))) return GT_ERR_NOMEM;
        if (!(ep->rx[i].buf = malloc(rx_cap))) return GT_ERR_NOMEM;
    }
    if ((st = gt_wan_emu_queue_create(&ep->delay)) != GT_OK) return st;
    return GT_OK;
}

void gt_wan_ep_set_tamper(gt_wan_ep_t *ep, gt_wan_tamper_fn fn, void *arg)
{
    ep->tamper = fn;
    ep->tamper_arg = arg;
}

static void raw_done(gt_wan_tp_req_t *r)
{
    free(r->user);
}

gt_status_t gt_wan_ep_send_raw(gt_wan_ep_t *ep, const void *bytes, size_t len)
{
    if (!ep || !ep->tp) return GT_ERR_CLOSED;
    gt_wan_ch_raw_send_t *rs = malloc(sizeof *rs + len);
    if (!rs) return GT_ERR_NOMEM;
    memset(&rs->treq, 0, sizeof rs->treq);
    memcpy(rs->bytes, bytes, len);
    rs->treq.cb = raw_done;
    rs->treq.user = rs;
    struct iovec iov = {rs->bytes, len};
    gt_status_t st = ep->net->ops->send(ep->tp, &iov, 1, &rs->treq);
    if (st != GT_OK) free(rs);
    return st;
}
