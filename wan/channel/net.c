/* net.c — the public face of the WAN channel (gt_wan.h): a net (transport context, keys,
 * optional emulator) that listens, connects and accepts, the endpoints' post/test/wait
 * calls, and the progress loop that drives the control connections (ctl.c) and the data
 * path (channel.c). Waits never pass their deadline; between progress calls they yield or nap
 * so that peers polling on a shared core both get to run. */
#include "channel_internal.h"

#include <sched.h>
#include <sodium.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- public API --------------------------------------------------------------------- */

gt_status_t gt_wan_net_create(const gt_wan_net_params_t *params, gt_wan_net_t **net_p)
{
    gt_status_t st = GT_ERR_INVALID;
    if (!params || !net_p) return GT_ERR_INVALID;
    gt_wan_net_t *net = calloc(1, sizeof *net);
    gt_wan_peer_key_t *peers = NULL;
    if (!net) return GT_ERR_NOMEM;
    net->magic = GT_WAN_NET_MAGIC;
    net->p = *params;
    net->lfd = -1;
    gt_wan_relay_init(net);
    net->epfd = epoll_create1(EPOLL_CLOEXEC);
    GT_REQUIRE_GOTO(net->epfd >= 0, st, GT_ERR_IO, fail, "wan: epoll_create1 failed");
    if (!net->p.preauth_timeout_ms) net->p.preauth_timeout_ms = 2000;
    if (!net->p.preauth_max) net->p.preauth_max = 64;
    if (!net->p.preauth_max_per_source) net->p.preauth_max_per_source = 8;
    if (!net->p.frame_bytes) net->p.frame_bytes = (size_t)1 << 20;
    if (!net->p.window) net->p.window = 8;
    if (!net->p.connect_timeout_ms) net->p.connect_timeout_ms = 10000;
    if (!net->p.io_timeout_ms) net->p.io_timeout_ms = 15000;
    if (!net->p.max_rejects) net->p.max_rejects = 3;
    GT_REQUIRE_GOTO(net->p.frame_bytes <= GT_WAN_FRAME_MAX_PAYLOAD && net->p.window <= 1024, st,
                    GT_ERR_INVALID, fail, "wan: frame_bytes above 64 MiB or window above 1024");
    net->site_name = strdup(params->site_name ? params->site_name : "");
    net->run_id = strdup(params->run_id ? params->run_id : "geotrain");
    GT_REQUIRE_GOTO(net->site_name && net->run_id, st, GT_ERR_NOMEM, fail, "wan: out of memory");
    net->p.site_name = net->site_name;
    net->p.run_id = net->run_id;
    net->p.keypair = NULL;
    net->p.peers = NULL;
    if (params->local_host) {
        net->local_host = strdup(params->local_host);
        GT_REQUIRE_GOTO(net->local_host, st, GT_ERR_NOMEM, fail, "wan: out of memory");
    }
    net->p.local_host = net->local_host;
    net->n_ids = params->site_id + 1;
    for (size_t i = 0; i < params->n_peers; i++)
        if (params->peers[i].site_id + 1 > net->n_ids) net->n_ids = params->peers[i].site_id + 1;
    if (params->n_site_ids > net->n_ids) net->n_ids = params->n_site_ids;
    if (net->n_ids > GT_WAN_SEC_MAX_PEERS + 1) net->n_ids = GT_WAN_SEC_MAX_PEERS + 1;
    net->auth_ok_ns = calloc(net->n_ids, sizeof *net->auth_ok_ns);
    net->refused_since_ns = calloc(net->n_ids, sizeof *net->refused_since_ns);
    net->peer_src = calloc(net->n_ids, sizeof *net->peer_src);
    GT_REQUIRE_GOTO(net->auth_ok_ns && net->refused_since_ns && net->peer_src, st, GT_ERR_NOMEM,
                    fail, "wan: out of memory");
    uint8_t h8[8];
    crypto_generichash(h8, sizeof h8, (const uint8_t *)net->run_id, strlen(net->run_id), NULL, 0);
    for (int i = 7; i >= 0; i--) net->run_hash = (net->run_hash << 8) | h8[i];
    net->ops = gt_wan_tp_ops(params->transport);
    GT_REQUIRE_GOTO(net->ops, st, GT_ERR_UNSUPPORTED, fail, "wan: unknown transport %d",
                    (int)params->transport);
    if (params->security == GT_WAN_SECURITY_NONE) {
        GT_WARN("wan: security: none — WAN traffic of site %u is NOT encrypted or "
                "authenticated",
                params->site_id);
    } else {
        GT_REQUIRE_GOTO(params->security == GT_WAN_SECURITY_ENCRYPTED, st, GT_ERR_INVALID, fail,
                        "wan: unknown security mode %d", (int)params->security);
        GT_REQUIRE_GOTO(params->keypair, st, GT_ERR_INVALID, fail,
                        "wan: encrypted mode needs the site's key pair (geotrain keygen)");
        gt_wan_cipher_t cipher = GT_WAN_CIPHER_AUTO;
        if (params->cipher && gt_wan_cipher_parse(params->cipher, &cipher) != GT_OK) {
            GT_ERROR("wan: unknown cipher '%s' (auto, aes256gcm, xchacha20poly1305)",
                     params->cipher);
            goto fail;
        }
        peers = calloc(params->n_peers ? params->n_peers : 1, sizeof *peers);
        GT_REQUIRE_GOTO(peers, st, GT_ERR_NOMEM, fail, "wan: out of memory");
        for (size_t i = 0; i < params->n_peers; i++) {
            peers[i].site_id = params->peers[i].site_id;
            peers[i].name = params->peers[i].name;
            memcpy(peers[i].public_key, params->peers[i].public_key, GT_WAN_KEY_BYTES);
        }
        gt_wan_sec_params_t sp = GT_WAN_SEC_PARAMS_INIT;
        sp.local = params->keypair;
        sp.local_site_id = params->site_id;
        sp.local_name = params->site_name;
        sp.peers = peers;
        sp.n_peers = params->n_peers;
        sp.run_id = net->run_id;
        sp.run_id_len = strlen(net->run_id);
        sp.cipher = cipher;
        sp.max_frame_bytes = net->p.frame_bytes;
        sp.capacity = net->n_ids; /* room for the sites pinned later (gt_wan_net_pin) */
        GT_CHECK_GOTO(gt_wan_sec_create(&sp, &net->sec), st, fail);
        free(peers);
        peers = NULL;
        unsigned threads = gt_wan_cpool_default_threads();
        if (threads) GT_CHECK_GOTO(gt_wan_cpool_create(threads, &net->pool), st, fail);
    }
    *net_p = net;
    return GT_OK;
fail:
    free(peers);
    gt_wan_cpool_destroy(net->pool);
    gt_wan_sec_destroy(net->sec);
    if (net->epfd >= 0) close(net->epfd);
    free(net->auth_ok_ns);
    free(net->refused_since_ns);
    free(net->peer_src);
    free(net->site_name);
    free(net->run_id);
    free(net->local_host);
    free(net);
    return st;
}

gt_status_t gt_wan_net_tp_ensure(gt_wan_net_t *net, const char *host)
{
    if (net->tp) return GT_OK;
    gt_wan_tp_params_t tpp = {
        .connect_timeout_ns = (uint64_t)net->p.connect_timeout_ms * 1000000ull,
        .local_host = net->local_host ? net->local_host : host,
        .data_port_min = net->p.data_port_min,
        .data_port_max = net->p.data_port_max,
    };
    /* The sealed relay (relay.c) carries UCX's TCP connections: it needs the channel's keys,
     * and only a backend that makes connections of its own takes it. */
    net->relay_on = net->sec && net->ops->relay_dial && !net->p.ucx_relay_off;
    if (net->relay_on) tpp.relay = gt_wan_relay_cb(net);
    return net->ops->create(&tpp, &net->tp);
}

gt_status_t gt_wan_net_pin(gt_wan_net_t *net, const gt_wan_pinned_key_t *peer)
{
    if (!net || !peer || peer->site_id >= net->n_ids || peer->site_id == net->p.site_id)
        return GT_ERR_INVALID;
    if (!net->sec) return GT_OK; /* plaintext: nobody is authenticated */
    gt_wan_peer_key_t k;
    memset(&k, 0, sizeof k);
    k.site_id = peer->site_id;
    k.name = peer->name;
    memcpy(k.public_key, peer->public_key, GT_WAN_KEY_BYTES);
    return gt_wan_sec_pin(net->sec, &k);
}

void gt_wan_net_destroy(gt_wan_net_t *net)
{
    if (!net || net->magic != GT_WAN_NET_MAGIC) return;
    gt_wan_relay_destroy(net);
    while (net->eps) gt_wan_ep_close(net->eps);
    if (net->tp) net->ops->destroy(net->tp);
    gt_wan_cpool_destroy(net->pool); /* every endpoint, and so every job, is gone */
    gt_wan_sec_destroy(net->sec);
    if (net->lfd >= 0) close(net->lfd);
    if (net->epfd >= 0) close(net->epfd);
    free(net->auth_ok_ns);
    free(net->refused_since_ns);
    free(net->peer_src);
    free(net->site_name);
    free(net->run_id);
    free(net->local_host);
    net->magic = 0;
    free(net);
}

gt_status_t gt_wan_net_listen(gt_wan_net_t *net, const char *host, uint16_t port, uint16_t *port_p)
{
    if (!net || !port_p) return GT_ERR_INVALID;
    if (!host || !*host || strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0)
        GT_WARN("wan: site %s listens on every interface ('%s'); name one address to listen on "
                "it alone",
                net->site_name, host ? host : "");
    gt_status_t st = gt_wan_net_tp_ensure(net, host);
    if (st != GT_OK) return st;
    return gt_wan_ctl_listen(net, host ? host : "0.0.0.0", port, port_p);
}

gt_status_t gt_wan_net_connect(gt_wan_net_t *net, const char *host, uint16_t port,
                               uint32_t peer_site_id, gt_wan_ep_t **ep_p)
{
    if (!net || !host || !ep_p) return GT_ERR_INVALID;
    gt_status_t st = gt_wan_net_tp_ensure(net, NULL);
    if (st != GT_OK) return st;
    return gt_wan_ctl_dial(net, host, port, peer_site_id, ep_p);
}

gt_status_t gt_wan_net_accept(gt_wan_net_t *net, gt_wan_ep_t **ep_p)
{
    if (!net || !ep_p) return GT_ERR_INVALID;
    for (gt_wan_ep_t *ep = net->eps; ep; ep = ep->next)
        if (ep->incoming && !ep->accepted && ep->state == GT_OK) {
            ep->accepted = 1;
            *ep_p = ep;
            return GT_OK;
        }
    return GT_ERR_AGAIN;
}

/* A ready endpoint whose control connection ended gets this long to take in what the peer
 * sent before it closed (the transport usually reports the loss itself first). */
#define CTL_GRACE_NS 100000000ull

gt_status_t gt_wan_net_progress(gt_wan_net_t *net)
{
    if (!net || net->magic != GT_WAN_NET_MAGIC) return GT_ERR_INVALID;
    if (net->tp) net->ops->progress(net->tp);
    gt_wan_ctl_progress(net);
    gt_wan_relay_progress(net);
    uint64_t now = gt_time_ns();
    gt_wan_ep_t *next;
    for (gt_wan_ep_t *ep = net->eps; ep; ep = next) {
        next = ep->next;
        if (ep->tp && (ep->state == GT_OK || ep->state == GT_ERR_AGAIN) &&
            ep->phase >= GT_WAN_PH_LINK) {
            gt_status_t ts = net->ops->ep_state(ep->tp);
            if (ts == GT_OK && ep->phase == GT_WAN_PH_LINK) gt_wan_ch_ep_ready(ep);
            if (ts != GT_OK && ts != GT_ERR_AGAIN) {
                /* What the transport completed before it reported the loss (a send the peer
                 * received before it closed, frames that arrived) is reported as done first. */
                if (ep->phase == GT_WAN_PH_READY) {
                    gt_wan_ch_rx_progress(ep);
                    if (ep->state == GT_OK) gt_wan_ch_tx_progress(ep);
                }
                if (ep->state == GT_OK || ep->state == GT_ERR_AGAIN) gt_wan_ch_ep_fail(ep, ts);
            }
        }
        if (ep->phase == GT_WAN_PH_READY) {
            gt_wan_ch_rx_progress(ep);
            if (ep->state == GT_OK) gt_wan_ch_tx_progress(ep);
            if (ep->state == GT_OK && ep->ctl_lost_ns && now - ep->ctl_lost_ns > CTL_GRACE_NS) {
                char who[96];
                GT_WARN("wan: %s closed its connection", gt_wan_ch_peer_label(ep, who, sizeof who));
                gt_wan_ch_ep_fail(ep, GT_ERR_PEER_LOST);
            }
        }
        /* An incoming connection that failed before anyone accepted it is ours to drop. */
        if (ep->incoming && !ep->accepted && ep->state != GT_OK && ep->state != GT_ERR_AGAIN)
            gt_wan_ch_ep_free(ep);
    }
    return GT_OK;
}

void gt_wan_net_gate_stats(const gt_wan_net_t *net, gt_wan_gate_stats_t *stats_p)
{
    if (!net || !stats_p) return;
    *stats_p = net->gate;
    if (net->tp && net->ops->stats) {
        gt_wan_tp_stats_t ts = {0};
        net->ops->stats(net->tp, &ts);
        stats_p->data_stray = ts.stray;
    }
}

gt_status_t gt_wan_ep_state(const gt_wan_ep_t *ep)
{
    return ep ? ep->state : GT_ERR_INVALID;
}

uint32_t gt_wan_ep_peer(const gt_wan_ep_t *ep)
{
    return ep ? ep->peer : UINT32_MAX;
}

void gt_wan_ep_stats(const gt_wan_ep_t *ep, gt_wan_ep_stats_t *stats_p)
{
    if (ep && stats_p) *stats_p = ep->stats;
}

void gt_wan_net_stats(const gt_wan_net_t *net, gt_wan_ep_stats_t *stats_p)
{
    if (!net || !stats_p) return;
    gt_wan_ep_stats_t s = net->closed_stats;
    for (const gt_wan_ep_t *ep = net->eps; ep; ep = ep->next) gt_wan_ch_stats_add(&s, &ep->stats);
    *stats_p = s;
}

/* Between progress calls of a wait. Spinning gives the lowest latency but steals the core
 * from the peer on a shared machine, so: spin while things happen; after 1 ms without any
 * activity, sleep in 100 us naps (or until the emulator's next frame is due, if sooner);
 * yield otherwise. */
typedef struct {
    uint64_t activity, quiet_since_ns;
} idle_t;

static void net_idle(gt_wan_net_t *net, idle_t *idle)
{
    uint64_t now = gt_time_ns();
    if (net->activity != idle->activity || idle->quiet_since_ns == 0) {
        idle->activity = net->activity;
        idle->quiet_since_ns = now;
        return;
    }
    uint64_t due = UINT64_MAX;
    for (gt_wan_ep_t *ep = net->eps; ep; ep = ep->next) {
        uint64_t d = ep->delay ? gt_wan_emu_queue_next_due(ep->delay) : UINT64_MAX;
        if (d < due) due = d;
    }
    if (gt_wan_cpool_busy(net->pool)) { /* crypto workers run: give them the core */
        gt_wan_cpool_wait(net->pool, 50000);
        return;
    }
    uint64_t nap = 0;
    if (now - idle->quiet_since_ns > 1000000ull) nap = 100000;
    if (due != UINT64_MAX && due > now + 300000) {
        uint64_t until = due - now - 200000;
        nap = until < 1000000 ? until : 1000000;
    }
    if (nap) {
        struct timespec ts = {0, (long)nap};
        nanosleep(&ts, NULL);
    } else {
        sched_yield();
    }
}

gt_status_t gt_wan_ep_wait_ready(gt_wan_ep_t *ep, uint32_t timeout_ms)
{
    if (!ep) return GT_ERR_INVALID;
    uint64_t deadline = gt_time_ns() + (uint64_t)timeout_ms * 1000000ull;
    idle_t idle = {0, 0};
    while (ep->state == GT_ERR_AGAIN) {
        if (gt_time_ns() > deadline) return GT_ERR_TIMEOUT;
        gt_wan_net_progress(ep->net);
        if (ep->state == GT_ERR_AGAIN) net_idle(ep->net, &idle);
    }
    return ep->state;
}

gt_status_t gt_wan_ep_send(gt_wan_ep_t *ep, const gt_wan_msg_t *msg, const void *buf, size_t len,
                           gt_wan_req_t *req)
{
    if (!ep || !msg || !req || (!buf && len) || ep->magic != GT_WAN_EP_MAGIC) return GT_ERR_INVALID;
    if (msg->type == GT_WAN_MSG_HELLO || !gt_wan_msg_type_valid(msg->type)) return GT_ERR_INVALID;
    if (len > GT_WAN_MSG_MAX_BYTES) return GT_ERR_OVERFLOW;
    if (ep->state != GT_OK && ep->state != GT_ERR_AGAIN) return ep->state;
    if (ep->incoming && !ep->accepted) return GT_ERR_INVALID;
    memset(req, 0, sizeof *req);
    req->status = GT_ERR_AGAIN;
    req->msg = *msg;
    req->buf_ = (void *)buf;
    req->cap_ = len;
    req->ep_ = ep;
    if (ep->sq_tail)
        ep->sq_tail->next_ = req;
    else
        ep->sq_head = req;
    ep->sq_tail = req;
    if (!ep->sq_frame) ep->sq_frame = req;
    if (ep->state == GT_OK) gt_wan_ch_tx_pump(ep);
    return GT_OK;
}

gt_status_t gt_wan_ep_recv(gt_wan_ep_t *ep, void *buf, size_t cap, gt_wan_req_t *req)
{
    if (!ep || !req || (!buf && cap) || ep->magic != GT_WAN_EP_MAGIC) return GT_ERR_INVALID;
    if (ep->state != GT_OK && ep->state != GT_ERR_AGAIN) return ep->state;
    memset(req, 0, sizeof *req);
    req->status = GT_ERR_AGAIN;
    req->buf_ = buf;
    req->cap_ = cap;
    req->ep_ = ep;
    if (ep->rq_tail)
        ep->rq_tail->next_ = req;
    else
        ep->rq_head = req;
    ep->rq_tail = req;
    return GT_OK;
}

gt_status_t gt_wan_req_test(const gt_wan_req_t *req)
{
    return req ? req->status : GT_ERR_INVALID;
}

gt_status_t gt_wan_req_wait(gt_wan_req_t *req, uint32_t timeout_ms)
{
    if (!req || !req->ep_) return GT_ERR_INVALID;
    uint64_t deadline = gt_time_ns() + (uint64_t)timeout_ms * 1000000ull;
    gt_wan_net_t *net = req->ep_->net;
    idle_t idle = {0, 0};
    while (req->status == GT_ERR_AGAIN) {
        if (gt_time_ns() > deadline) return GT_ERR_TIMEOUT;
        gt_wan_net_progress(net);
        if (req->status == GT_ERR_AGAIN) net_idle(net, &idle);
    }
    return req->status;
}

void gt_wan_ep_close(gt_wan_ep_t *ep)
{
    if (!ep || ep->magic != GT_WAN_EP_MAGIC) return;
    gt_wan_ch_ep_fail(ep, GT_ERR_CLOSED);
    gt_wan_ch_ep_free(ep);
}

void gt_wan_ep_abort(gt_wan_ep_t *ep)
{
    if (!ep || ep->magic != GT_WAN_EP_MAGIC) return;
    gt_wan_ch_ep_fail(ep, GT_ERR_PEER_LOST); /* any status but CLOSED: a forced close */
    gt_wan_ch_ep_free(ep);
}
