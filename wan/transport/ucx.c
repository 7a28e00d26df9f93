/* ucx.c — the UCX backend: UCP active messages between endpoints connected by worker address.
 *
 * Connecting: no UCX listener (sockaddr connection manager) exists. The channel authenticates
 * the peer on its own control connection first; then each side gives the other, sealed, its
 * worker address (network devices only) and a random 64-bit id, and each side creates one UCP
 * endpoint to the other's worker (ucp_ep_create by REMOTE_ADDRESS) for its own sends. Every
 * message carries the receiver's id in front of its AM header; the AM handler routes by it,
 * and drops (and counts) a message whose id names no endpoint: UCX's wire-up lets any worker
 * that reaches our TCP interface send to us, but nothing it sends reaches the channel without
 * the id, and then the frame's AEAD tag. UCX_NET_DEVICES defaults to the interface of the
 * site's configured address, so UCX's own TCP listener is bound there only; UCX_TLS to tcp.
 *
 * UCX's TCP transport cannot run without a listening socket of its own (peers connect to the
 * port in our worker address), and UCX accepts and keeps whatever connects there, with no
 * deadline: a thousand idle connections are a thousand descriptors. So that socket is closed to
 * the network by a socket filter (gt_wan_tp_filter_sources: the kernel drops the SYN, no
 * connection exists) except to the address of a peer that has just authenticated on the control
 * connection, from ep_open until its first message arrives on the data path or
 * UCX_WINDOW_NS passes. The listener is found as the listening socket that appears while the
 * worker is created (under the process-wide listen lock).
 *
 * Data layout: a message whose first buffer is small (the channel's 80-byte frame header)
 * goes as that buffer in the AM header plus one contiguous data buffer, and a one-buffer
 * message as a contiguous buffer. UCX 1.13 moves a contiguous rendezvous zero-copy (TCP
 * put_zcopy straight from our buffer into the receiver's), while an iov datatype makes it
 * pack and unpack the data through bounce buffers on both sides: that alone cost 1.4-2.7x
 * of throughput on loopback. A rendezvous message stays at the sender until we post the buffer
 * it lands in (ucp_am_recv_data_nbx), which is our flow control for large frames.
 *
 * AM callbacks only queue what arrived; matching to posted receives happens in progress()
 * after ucp_worker_progress returns, so no user callback ever runs inside UCX. Endpoints are
 * created with UCP_ERR_HANDLING_MODE_PEER: a dead peer's socket error, or a keepalive miss,
 * calls the error handler, which fails the endpoint and its requests.
 */
#include "transport_internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#define UCX_AM_ID          7u
#define UCX_ID_BYTES       8u            /* the receiver's id, in front of every AM header */
#define UCX_ADDR_MAGIC     0x42785447u   /* "GTxB" as little-endian bytes */
#define UCX_LADDR_BYTES    20u           /* a listener in our address: family, port, 16 */
#define UCX_CLOSE_DEADLINE 2000000000ull /* ns to flush an endpoint at close */
#define UCX_MAX_LISTENERS  4

typedef struct ucx_ctx ucx_ctx_t;
typedef struct ucx_ep ucx_ep_t;

/* One message that arrived before a receive was posted for it. */
typedef struct ucx_item {
    struct ucx_item *next;
    void *data; /* eager: the bytes (held by UCX when `held`, else malloc'd); rndv: desc */
    size_t len; /* data bytes (the AM header not included) */
    int rndv, held;
    size_t hlen; /* the AM header (the message's first bytes) */
    uint8_t hdr[];
} ucx_item_t;

struct ucx_ep {
    ucx_ctx_t *ctx;
    ucp_ep_h ep;                   /* ours, for sending; NULL until ep_connect */
    gt_status_t state;             /* GT_ERR_AGAIN until connected, GT_OK, else the error */
    uint64_t recv_id;              /* what the peer puts in front of messages to us */
    uint8_t send_id[UCX_ID_BYTES]; /* what we put in front of messages to the peer */
    gt_wan_tp_list_t sends;        /* in flight in UCX */
    gt_wan_tp_list_t recvs;        /* posted, no data matched yet */
    gt_wan_tp_list_t rndv;         /* matched to a rendezvous, data in flight */
    ucx_item_t *q_head, *q_tail;
    ucx_ep_t *next; /* ctx->eps */
    /* UCX's listener is open to peer_ip until the first message from the peer arrives
     * (`heard`) or window_until_ns passes. */
    struct sockaddr_storage peer_ip;
    uint64_t window_until_ns;
    int heard;
    /* With the relay: the caller's endpoint (for the relay), and the peer's UCX listeners
     * (from its address), which UCX connects to for this peer. */
    void *owner;
    struct sockaddr_storage peer_l[UCX_MAX_LISTENERS];
    size_t n_peer_l;
};

struct ucx_ctx {
    gt_wan_tp_params_t params;
    ucp_context_h ucp;
    ucp_worker_h worker;
    ucp_address_t *addr; /* our worker's address (network devices only) */
    size_t addr_len;
    ucx_ep_t *eps;
    gt_wan_tp_stats_t stats;
    gt_wan_tp_list_t done;       /* completed inside a post call; reported by progress() */
    size_t max_am_header;        /* the worker's limit on an AM header */
    int lfds[UCX_MAX_LISTENERS]; /* UCX's own listening sockets (not ours to close) */
    size_t n_lfds;
    struct sockaddr_storage laddr[UCX_MAX_LISTENERS];      /* where they listen */
    struct sockaddr_storage open_to[GT_WAN_TP_FILTER_MAX]; /* what the filters let in now */
    size_t n_open;
    uint64_t next_window_ns; /* the earliest window end (UINT64_MAX: none) */
    /* With the relay: the sources of the relay's connections to our listeners (address and
     * port), each let in until its connect is long done. */
    struct {
        struct sockaddr_storage src;
        uint64_t until_ns;
    } relay_src[GT_WAN_TP_FILTER_MAX];
    size_t n_relay_src;
    uint64_t relay_refused; /* connects UCX made to no peer's listener (refused) */
};

/* How long a relay connection's source stays let in (a local connect takes microseconds). */
#define UCX_RELAY_SRC_NS 5000000000ull

/* How long UCX's listener stays open to a peer that authenticated, at most. */
#define UCX_WINDOW_NS 10000000000ull

/* Re-computes who may connect to UCX's listener and updates the filters when that changed:
 * without the relay, the address of each peer that authenticated, for a while; with it, only
 * the relay's own connections, each from its one source port. */
static void ucx_windows_update(ucx_ctx_t *c)
{
    if (!c->n_lfds) return;
    uint64_t now = gt_time_ns();
    struct sockaddr_storage want[GT_WAN_TP_FILTER_MAX];
    size_t n = 0;
    c->next_window_ns = UINT64_MAX;
    for (ucx_ep_t *e = c->eps; e; e = e->next) {
        if (e->heard || !e->peer_ip.ss_family || now >= e->window_until_ns) continue;
        if (e->window_until_ns < c->next_window_ns) c->next_window_ns = e->window_until_ns;
        int dup = 0;
        for (size_t i = 0; i < n && !dup; i++) dup = gt_wan_tp_same_ip(&want[i], &e->peer_ip);
        if (!dup && n < GT_WAN_TP_FILTER_MAX) want[n++] = e->peer_ip;
    }
    size_t keep = 0;
    for (size_t i = 0; i < c->n_relay_src; i++) {
        if (now >= c->relay_src[i].until_ns) continue;
        c->relay_src[keep++] = c->relay_src[i];
        if (c->relay_src[i].until_ns < c->next_window_ns)
            c->next_window_ns = c->relay_src[i].until_ns;
        if (n < GT_WAN_TP_FILTER_MAX) want[n++] = c->relay_src[i].src;
    }
    c->n_relay_src = keep;
    int same = n == c->n_open;
    for (size_t i = 0; i < n && same; i++) same = gt_wan_tp_same_addr(&want[i], &c->open_to[i]);
    if (same) return;
    for (size_t i = 0; i < c->n_lfds; i++)
        if (gt_wan_tp_filter_sources(c->lfds[i], want, n) != GT_OK) return;
    memcpy(c->open_to, want, n * sizeof *want);
    c->n_open = n;
}

/* ---- The relay's hook on UCX's connect() ----
 *
 * UCX's tcp transport makes its connections inside libucs (ucs_socket_connect), on the thread
 * that calls into UCX. With the relay, libucs's connect() is ours (gt_wan_tp_hook_got): a
 * connect to a listener that a peer published in its (authenticated) address goes to the
 * relay of the context whose UCX call runs on this thread, which carries it sealed to the
 * peer's relay; a connect to anything else is refused. Contexts without the relay, and
 * connects outside our calls into UCX, pass through to the system's connect(). */
static __thread ucx_ctx_t *ucx_current;
static int (*ucx_next_connect)(int, const struct sockaddr *, socklen_t);
static pthread_once_t ucx_hook_once = PTHREAD_ONCE_INIT;
static gt_status_t ucx_hook_status = GT_ERR_NOT_FOUND;

static void ucx_sockaddr_str(const struct sockaddr *sa, char *buf, size_t cap)
{
    char host[64] = "?", serv[16] = "?";
    getnameinfo(
        sa, sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in),
        host, sizeof host, serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV);
    snprintf(buf, cap, "%s:%s", host, serv);
}

static int ucx_connect_hook(int fd, const struct sockaddr *sa, socklen_t len)
{
    ucx_ctx_t *c = ucx_current;
    if (!c || !c->params.relay || !sa || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6))
        return ucx_next_connect ? ucx_next_connect(fd, sa, len)
                                : (int)syscall(SYS_connect, fd, sa, len);
    struct sockaddr_storage dst = {0};
    memcpy(&dst, sa, len < sizeof dst ? len : sizeof dst);
    for (ucx_ep_t *e = c->eps; e; e = e->next)
        for (size_t i = 0; i < e->n_peer_l; i++)
            if (gt_wan_tp_same_addr(&e->peer_l[i], &dst))
                return c->params.relay->redirect(c->params.relay->arg, e->owner, fd, sa, len);
    char where[96];
    ucx_sockaddr_str(sa, where, sizeof where);
    c->relay_refused++;
    GT_WARN("ucx: UCX connects to %s, which no authenticated peer published; refused", where);
    errno = ECONNREFUSED;
    return -1;
}

static void ucx_hook_install(void)
{
    ucx_next_connect =
        (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_DEFAULT, "connect");
    size_t n = 0;
    ucx_hook_status = gt_wan_tp_hook_got("libucs.so", "connect", (void *)ucx_connect_hook, &n);
    if (ucx_hook_status == GT_OK)
        GT_DEBUG("ucx: the relay sees UCX's connects (%zu slot(s) of libucs)", n);
}

/* A send's (or a rendezvous receive's) private state, and the user_data UCX calls back
 * with. It outlives the caller's request: a close detaches it (req = NULL), so a callback
 * UCX delivers late (a forced close purges requests lazily, even at worker destroy) only
 * frees it. */
typedef struct {
    ucp_dt_iov_t iov[GT_WAN_TP_MAX_IOV];
    size_t total;
    gt_wan_tp_req_t *req;
    uint8_t hdr[UCX_ID_BYTES + 256]; /* the AM header: the receiver's id, then a small buffer */
} ucx_send_bk_t;

/* A first buffer up to this size travels as the AM header (with the rendezvous request),
 * so the rest is one contiguous buffer: UCX moves a contiguous rendezvous with zero-copy
 * put over TCP, whereas an iov datatype falls back to copying through bounce buffers on
 * both sides. */
#define UCX_HDR_SPLIT_MAX 256u

static gt_status_t ucx_st(ucs_status_t s)
{
    switch (s) {
    case UCS_OK: return GT_OK;
    case UCS_ERR_NO_MEMORY: return GT_ERR_NOMEM;
    case UCS_ERR_CANCELED: return GT_ERR_CLOSED;
    case UCS_ERR_TIMED_OUT: return GT_ERR_TIMEOUT;
    case UCS_ERR_UNREACHABLE: return GT_ERR_NOT_FOUND;
    default: return GT_ERR_PEER_LOST;
    }
}

static uint64_t ucx_get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static void ucx_put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Opened (receives may be posted, messages queue) or connected. */
static int ucx_alive(const ucx_ep_t *e)
{
    return e->state == GT_OK || e->state == GT_ERR_AGAIN;
}

static ucx_ep_t *ucx_find(ucx_ctx_t *c, uint64_t id)
{
    for (ucx_ep_t *e = c->eps; e; e = e->next)
        if (e->recv_id == id) return e;
    return NULL;
}

static void ucx_item_drop(ucx_ctx_t *c, ucx_item_t *it)
{
    if (it->held || it->rndv)
        ucp_am_data_release(c->worker, it->data);
    else
        free(it->data);
    free(it);
}

/* Records a completion; it is reported (status set, callback run) from progress(), never
 * inside UCX. The status stays GT_ERR_AGAIN until then: the owner may reuse a request the
 * moment it looks complete, so it must not look complete while still on our list. */
static void ucx_defer(ucx_ctx_t *c, gt_wan_tp_req_t *r, gt_status_t st, size_t len)
{
    r->bk = NULL;
    r->length = len;
    r->bk_status = st;
    gt_wan_tp_list_push(&c->done, r);
}

static void ucx_fail_reqs(ucx_ep_t *e, gt_status_t st)
{
    gt_wan_tp_req_t *r;
    while ((r = gt_wan_tp_list_pop(&e->recvs))) ucx_defer(e->ctx, r, st, 0);
    ucx_item_t *it;
    while ((it = e->q_head)) {
        e->q_head = it->next;
        ucx_item_drop(e->ctx, it);
    }
    e->q_tail = NULL;
}

static void ucx_ep_err_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    ucx_ep_t *e = arg;
    (void)ep;
    GT_DEBUG("ucx: endpoint error: %s", ucs_status_string(status));
    if (e->state == GT_OK || e->state == GT_ERR_AGAIN) e->state = GT_ERR_PEER_LOST;
    /* Sends and rendezvous receives complete through their own callbacks with an error. */
    ucx_fail_reqs(e, GT_ERR_PEER_LOST);
}

static ucs_status_t ucx_am_cb(void *arg, const void *header, size_t header_length, void *data,
                              size_t length, const ucp_am_recv_param_t *param)
{
    ucx_ctx_t *c = arg;
    ucx_ep_t *e = header_length >= UCX_ID_BYTES ? ucx_find(c, ucx_get64(header)) : NULL;
    if (!e || (e->state != GT_OK && e->state != GT_ERR_AGAIN)) {
        if (!e) c->stats.stray++;
        GT_DEBUG("ucx: dropping a message for an unknown or failed endpoint");
        return UCS_OK; /* a rendezvous desc not kept is released by UCX */
    }
    if (!e->heard) {
        e->heard = 1; /* the peer's data path is up: its window can close */
        c->next_window_ns = 0;
    }
    header = (const uint8_t *)header + UCX_ID_BYTES;
    header_length -= UCX_ID_BYTES;
    ucx_item_t *it = calloc(1, sizeof *it + header_length);
    if (!it) goto nomem;
    it->len = length;
    it->hlen = header_length;
    if (header_length) memcpy(it->hdr, header, header_length);
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
        it->rndv = 1;
        it->data = data;
    } else if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA) {
        it->held = 1;
        it->data = data;
    } else {
        it->data = malloc(length ? length : 1);
        if (!it->data) {
            free(it);
            goto nomem;
        }
        memcpy(it->data, data, length);
    }
    if (e->q_tail)
        e->q_tail->next = it;
    else
        e->q_head = it;
    e->q_tail = it;
    return (it->rndv || it->held) ? UCS_INPROGRESS : UCS_OK;
nomem:
    GT_ERROR("ucx: out of memory queueing a message; failing the endpoint");
    e->state = GT_ERR_NOMEM;
    return UCS_OK;
}

static gt_status_t ucx_create(const gt_wan_tp_params_t *params, void **ctx_p)
{
    ucx_ctx_t *c = calloc(1, sizeof *c);
    ucp_config_t *cfg = NULL;
    gt_status_t st = GT_ERR_IO;
    if (!c) return GT_ERR_NOMEM;
    c->params = *params;
    if (params->relay) {
        pthread_once(&ucx_hook_once, ucx_hook_install);
        if (ucx_hook_status != GT_OK) {
            GT_ERROR("ucx: cannot put the sealed relay in front of UCX's connections (no "
                     "connect() slot in a loaded libucs); set wan.ucx_relay: false to run "
                     "without it");
            free(c);
            return GT_ERR_UNSUPPORTED;
        }
    }
    /* UCX's TCP transport connects with a blocking connect() by default, also when it
     * reconnects an endpoint on its own after a socket error — inside ucp_worker_progress, on
     * our WAN thread. A peer's listener that the filter above has closed again drops the SYN,
     * and that connect() then blocks for the kernel's SYN retries (minutes), the whole site
     * with it. Non-blocking, the attempt goes on beside our progress, and the channel's own
     * liveness checks reconnect through a fresh handshake. A setting of the TCP transport,
     * which UCX reads from the environment only (ucp_config_modify does not reach it), before
     * ucp_config_read; a user's own setting wins. (UCX_TCP_SYN_CNT would shorten the attempt,
     * but UCX 1.13 fails to create a worker with it set.) */
    setenv("UCX_TCP_CONN_NB", "y", 0);
    ucs_status_t s = ucp_config_read(NULL, NULL, &cfg);
    if (s != UCS_OK) goto fail;
    if (!getenv("UCX_TLS")) ucp_config_modify(cfg, "TLS", "tcp");
    /* UCX's TCP transport listens on every device it uses: only the site's interface. */
    char ifname[64];
    if (!getenv("UCX_NET_DEVICES") && params->local_host &&
        gt_wan_tp_host_ifname(params->local_host, ifname, sizeof ifname) == GT_OK)
        ucp_config_modify(cfg, "NET_DEVICES", ifname);
    else if (!getenv("UCX_NET_DEVICES"))
        GT_INFO("ucx: no single interface holds '%s'; UCX may use every network device",
                params->local_host ? params->local_host : "(any)");
    if (!getenv("UCX_KEEPALIVE_INTERVAL")) ucp_config_modify(cfg, "KEEPALIVE_INTERVAL", "1s");
    ucp_params_t up = {
        .field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED,
        .features = UCP_FEATURE_AM,
        .mt_workers_shared = 0,
    };
    s = ucp_init(&up, cfg, &c->ucp);
    ucp_config_release(cfg);
    if (s != UCS_OK) goto fail;
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    int before[256], after[256];
    gt_wan_tp_listen_lock();
    size_t n_before = gt_wan_tp_listeners(before, 256);
    s = ucp_worker_create(c->ucp, &wp, &c->worker);
    size_t n_after = s == UCS_OK ? gt_wan_tp_listeners(after, 256) : 0;
    gt_wan_tp_listen_unlock();
    if (s != UCS_OK) goto fail;
    if (n_before > 256 || n_after > 256) {
        GT_ERROR("ucx: this process has over 256 listening sockets; cannot tell which is UCX's");
        st = GT_ERR_INTERNAL;
        s = UCS_ERR_EXCEEDS_LIMIT;
        goto fail;
    }
    for (size_t i = 0; i < n_after; i++) {
        int old = 0;
        for (size_t j = 0; j < n_before && !old; j++) old = before[j] == after[i];
        if (old) continue;
        if (c->n_lfds == UCX_MAX_LISTENERS) {
            GT_ERROR("ucx: UCX opened more than %u listening sockets (UCX_NET_DEVICES?)",
                     UCX_MAX_LISTENERS);
            st = GT_ERR_UNSUPPORTED;
            s = UCS_ERR_EXCEEDS_LIMIT;
            goto fail;
        }
        socklen_t sl = sizeof c->laddr[c->n_lfds];
        if (getsockname(after[i], (struct sockaddr *)&c->laddr[c->n_lfds], &sl) != 0)
            memset(&c->laddr[c->n_lfds], 0, sizeof c->laddr[c->n_lfds]);
        c->lfds[c->n_lfds++] = after[i];
        /* Closed to everyone until a peer authenticates. */
        if (gt_wan_tp_filter_sources(after[i], NULL, 0) != GT_OK) {
            s = UCS_ERR_IO_ERROR;
            goto fail;
        }
    }
    if (!c->n_lfds) GT_DEBUG("ucx: the worker opened no listening socket (UCX_TLS without tcp?)");
    ucp_am_handler_param_t hp = {
        .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                      UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG,
        .id = UCX_AM_ID,
        .flags = UCP_AM_FLAG_WHOLE_MSG | UCP_AM_FLAG_PERSISTENT_DATA,
        .cb = ucx_am_cb,
        .arg = c,
    };
    s = ucp_worker_set_am_recv_handler(c->worker, &hp);
    if (s != UCS_OK) goto fail;
    ucp_worker_attr_t wa = {.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER |
                                          UCP_WORKER_ATTR_FIELD_ADDRESS |
                                          UCP_WORKER_ATTR_FIELD_ADDRESS_FLAGS,
                            .address_flags = UCP_WORKER_ADDRESS_FLAG_NET_ONLY};
    s = ucp_worker_query(c->worker, &wa);
    if (s != UCS_OK) goto fail;
    c->max_am_header = wa.max_am_header;
    c->addr = wa.address;
    c->addr_len = wa.address_length;
    if (c->addr_len + 16 > GT_WAN_TP_ADDR_MAX) {
        GT_ERROR("ucx: the worker address is %zu bytes (UCX_NET_DEVICES lists too many devices?)",
                 c->addr_len);
        s = UCS_ERR_EXCEEDS_LIMIT;
        goto fail;
    }
    *ctx_p = c;
    return GT_OK;
fail:
    GT_ERROR("ucx: initialisation failed: %s", ucs_status_string(s));
    if (c->addr) ucp_worker_release_address(c->worker, c->addr);
    if (c->worker) ucp_worker_destroy(c->worker);
    if (c->ucp) ucp_cleanup(c->ucp);
    free(c);
    return st;
}

static void ucx_close(void *ep, int force);

/* One turn of UCX's progress, and of the relay's tunnels (a wait of ours inside a close must
 * move the bytes UCX waits on). */
static unsigned ucx_progress_once(ucx_ctx_t *c)
{
    unsigned n = ucp_worker_progress(c->worker);
    if (c->params.relay) c->params.relay->pump(c->params.relay->arg);
    return n;
}

static void ucx_report_done(ucx_ctx_t *c)
{
    gt_wan_tp_req_t *r;
    while ((r = gt_wan_tp_list_pop(&c->done))) gt_wan_tp_req_complete(r, r->bk_status, r->length);
}

static void ucx_destroy(void *ctx)
{
    ucx_ctx_t *c = ctx;
    if (!c) return;
    ucx_current = c;
    while (c->eps) ucx_close(c->eps, 1);
    /* UCX 1.13 aborts in ucp_worker_destroy (an assertion in ucp_request_send_state_ff, removed
     * upstream by openucx/ucx#8175) when a wireup reply is still pending on one of the worker's
     * internal endpoints — a peer setting up its connection to us as we leave (seen under
     * chaos: a joiner frozen past its lease, then leaving). Progress until the worker is idle
     * for 20 ms (at most 300 ms) so such a message goes out or fails first. */
    uint64_t now = gt_time_ns(), end = now + 300000000ull, idle_from = now;
    while (now < end && now - idle_from < 20000000ull) {
        if (ucx_progress_once(c))
            idle_from = gt_time_ns();
        else
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        now = gt_time_ns();
    }
    ucx_report_done(c);
    if (c->addr) ucp_worker_release_address(c->worker, c->addr);
    ucp_worker_destroy(c->worker);
    ucp_cleanup(c->ucp);
    ucx_current = NULL;
    free(c);
}

/* A listener in an address: family (u16), port (u16, network order), 16 address bytes. */
static void ucx_put_laddr(uint8_t *p, const struct sockaddr_storage *sa)
{
    memset(p, 0, UCX_LADDR_BYTES);
    p[0] = (uint8_t)sa->ss_family;
    p[1] = (uint8_t)(sa->ss_family >> 8);
    if (sa->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
        memcpy(p + 2, &a->sin_port, 2);
        memcpy(p + 4, &a->sin_addr, 4);
    } else if (sa->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
        memcpy(p + 2, &a->sin6_port, 2);
        memcpy(p + 4, &a->sin6_addr, 16);
    }
}

static int ucx_get_laddr(const uint8_t *p, struct sockaddr_storage *sa)
{
    memset(sa, 0, sizeof *sa);
    unsigned fam = (unsigned)p[0] | (unsigned)p[1] << 8;
    if (fam == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)sa;
        a->sin_family = AF_INET;
        memcpy(&a->sin_port, p + 2, 2);
        memcpy(&a->sin_addr, p + 4, 4);
        return 1;
    }
    if (fam == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)sa;
        a->sin6_family = AF_INET6;
        memcpy(&a->sin6_port, p + 2, 2);
        memcpy(&a->sin6_addr, p + 4, 16);
        return 1;
    }
    return 0;
}

/* Our address for the peer: magic, our id, the number of our listeners (u8, then 7 zero
 * bytes), each listener (UCX_LADDR_BYTES), our worker address. */
static gt_status_t ucx_ep_open(void *ctx, int responder, const char *peer_host, void *owner,
                               void **ep_p, void *addr, size_t cap, size_t *len_p)
{
    ucx_ctx_t *c = ctx;
    (void)responder;
    size_t head = 24 + c->n_lfds * UCX_LADDR_BYTES;
    if (cap < head + c->addr_len) return GT_ERR_OVERFLOW;
    ucx_ep_t *e = calloc(1, sizeof *e);
    if (!e) return GT_ERR_NOMEM;
    e->ctx = c;
    e->owner = owner;
    e->state = GT_ERR_AGAIN;
    do { /* unique among ours, and never 0 */
        uint8_t b[8];
        if (gt_wan_tp_random(b, sizeof b) != GT_OK) {
            free(e);
            return GT_ERR_IO;
        }
        e->recv_id = ucx_get64(b);
    } while (e->recv_id == 0 || ucx_find(c, e->recv_id));
    uint8_t *p = addr;
    ucx_put64(p, UCX_ADDR_MAGIC);
    ucx_put64(p + 8, e->recv_id);
    ucx_put64(p + 16, c->n_lfds);
    for (size_t i = 0; i < c->n_lfds; i++)
        ucx_put_laddr(p + 24 + i * UCX_LADDR_BYTES, &c->laddr[i]);
    memcpy(p + head, c->addr, c->addr_len);
    *len_p = head + c->addr_len;
    e->next = c->eps;
    c->eps = e;
    *ep_p = e;
    if (c->params.relay) return GT_OK; /* only the relay ever connects to our listener */
    /* The peer authenticated: let its address reach UCX's listener for a while. */
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    if (peer_host && getaddrinfo(peer_host, NULL, &hints, &res) == 0 && res &&
        res->ai_addrlen <= sizeof e->peer_ip) {
        memcpy(&e->peer_ip, res->ai_addr, res->ai_addrlen);
        e->window_until_ns = gt_time_ns() + UCX_WINDOW_NS;
    } else if (c->n_lfds) {
        GT_WARN("ucx: cannot resolve the peer's host '%s'; its connection may be refused",
                peer_host ? peer_host : "");
    }
    if (res) freeaddrinfo(res);
    ucx_windows_update(c);
    return GT_OK;
}

static gt_status_t ucx_ep_connect(void *ep, const char *peer_host, const void *addr, size_t len)
{
    ucx_ep_t *e = ep;
    ucx_ctx_t *c = e->ctx;
    const uint8_t *p = addr;
    (void)peer_host;
    if (e->ep || e->state != GT_ERR_AGAIN) return GT_ERR_INVALID;
    uint64_t n_l = len >= 24 ? ucx_get64(p + 16) : 0;
    size_t head = 24 + (size_t)(n_l <= UCX_MAX_LISTENERS ? n_l : 0) * UCX_LADDR_BYTES;
    if (len <= 24 || len > GT_WAN_TP_ADDR_MAX || ucx_get64(p) != UCX_ADDR_MAGIC ||
        n_l > UCX_MAX_LISTENERS || len <= head) {
        GT_ERROR("ucx: the peer's data-path address is not a UCX one of this version (%zu bytes)",
                 len);
        e->state = GT_ERR_CORRUPT;
        return GT_ERR_CORRUPT;
    }
    e->n_peer_l = 0;
    for (size_t i = 0; i < n_l; i++)
        if (ucx_get_laddr(p + 24 + i * UCX_LADDR_BYTES, &e->peer_l[e->n_peer_l])) e->n_peer_l++;
    if (c->params.relay && !e->n_peer_l) {
        GT_ERROR("ucx: the peer published no TCP listener; the relay cannot reach it");
        e->state = GT_ERR_UNSUPPORTED;
        return GT_ERR_UNSUPPORTED;
    }
    memcpy(e->send_id, p + 8, UCX_ID_BYTES);
    ucp_ep_params_t prm = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .address = (const ucp_address_t *)(p + head),
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = {.cb = ucx_ep_err_cb, .arg = e},
    };
    ucx_current = c;
    ucs_status_t s = ucp_ep_create(c->worker, &prm, &e->ep);
    if (s != UCS_OK) {
        GT_ERROR("ucx: cannot connect to the peer's worker: %s", ucs_status_string(s));
        e->ep = NULL;
        e->state = ucx_st(s);
        return e->state;
    }
    /* UCX wires the connection up lazily; a dead address errors the endpoint through its
     * handler. The channel's deadlines bound the wait. */
    e->state = GT_OK;
    return GT_OK;
}

static gt_status_t ucx_ep_state(void *ep)
{
    return ((ucx_ep_t *)ep)->state;
}

static void ucx_send_cb(void *request, ucs_status_t status, void *user_data)
{
    ucx_send_bk_t *bk = user_data;
    gt_wan_tp_req_t *r = bk->req;
    ucp_request_free(request);
    if (r) {
        ucx_ep_t *e = r->ep;
        gt_wan_tp_list_remove(&e->sends, r);
        if (status != UCS_OK && e->state == GT_OK) e->state = ucx_st(status);
        ucx_defer(e->ctx, r, status == UCS_OK ? GT_OK : ucx_st(status),
                  status == UCS_OK ? bk->total : 0);
    }
    free(bk);
}

static gt_status_t ucx_send(void *ep, const struct iovec *iov, size_t iovcnt, gt_wan_tp_req_t *req)
{
    ucx_ep_t *e = ep;
    if (iovcnt == 0 || iovcnt > GT_WAN_TP_MAX_IOV) return GT_ERR_INVALID;
    if (e->state != GT_OK) return e->state == GT_ERR_AGAIN ? GT_ERR_INVALID : e->state;
    ucx_send_bk_t *bk = calloc(1, sizeof *bk);
    if (!bk) return GT_ERR_NOMEM;
    for (size_t i = 0; i < iovcnt; i++) {
        bk->iov[i].buffer = iov[i].iov_base;
        bk->iov[i].length = iov[i].iov_len;
        bk->total += iov[i].iov_len;
    }
    if (bk->total > GT_WAN_TP_MAX_MSG) {
        free(bk);
        return GT_ERR_OVERFLOW;
    }
    req->status = GT_ERR_AGAIN;
    req->ep = e;
    req->bk = bk;
    req->length = 0;
    bk->req = req;
    ucp_request_param_t p = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                        UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_DATATYPE,
        .cb = {.send = ucx_send_cb},
        .user_data = bk,
        .flags = 0,
        .datatype = ucp_dt_make_contig(1),
    };
    /* Contiguous data whenever possible: one buffer as is, or a small first buffer as the
     * AM header (after the receiver's id) and one buffer of data; an iov datatype only for
     * anything else. */
    memcpy(bk->hdr, e->send_id, UCX_ID_BYTES);
    const void *data = bk->iov[0].buffer;
    size_t hlen = UCX_ID_BYTES, count = bk->iov[0].length;
    if (iovcnt == 2 && bk->iov[0].length <= UCX_HDR_SPLIT_MAX &&
        UCX_ID_BYTES + bk->iov[0].length <= e->ctx->max_am_header) {
        memcpy(bk->hdr + UCX_ID_BYTES, bk->iov[0].buffer, bk->iov[0].length);
        hlen += bk->iov[0].length;
        data = bk->iov[1].buffer;
        count = bk->iov[1].length;
    } else if (iovcnt > 1) {
        p.datatype = ucp_dt_make_iov();
        data = bk->iov;
        count = iovcnt;
    }
    gt_wan_tp_list_push(&e->sends, req);
    ucx_current = e->ctx;
    ucs_status_ptr_t sp = ucp_am_send_nbx(e->ep, UCX_AM_ID, bk->hdr, hlen, data, count, &p);
    if (sp == NULL) { /* done at once: report from progress() */
        gt_wan_tp_list_remove(&e->sends, req);
        size_t total = bk->total;
        free(bk);
        ucx_defer(e->ctx, req, GT_OK, total);
        return GT_OK;
    }
    if (UCS_PTR_IS_ERR(sp)) {
        gt_wan_tp_list_remove(&e->sends, req);
        free(bk);
        req->bk = NULL;
        return ucx_st(UCS_PTR_STATUS(sp));
    }
    return GT_OK;
}

static void ucx_match(ucx_ep_t *e);

static gt_status_t ucx_recv(void *ep, void *buf, size_t cap, gt_wan_tp_req_t *req)
{
    ucx_ep_t *e = ep;
    if (!ucx_alive(e)) return e->state;
    req->status = GT_ERR_AGAIN;
    req->ep = e;
    req->bk = buf;
    req->length = cap; /* until matched: the capacity */
    req->rest = NULL;
    req->head_len = 0;
    gt_wan_tp_list_push(&e->recvs, req);
    return GT_OK;
}

/* Posts a receive and takes a queued message for it at once (see recv_split). */
static gt_status_t ucx_recv_now(void *ep, void *buf, size_t cap, gt_wan_tp_req_t *req)
{
    gt_status_t st = ucx_recv(ep, buf, cap, req);
    if (st == GT_OK && ((ucx_ep_t *)ep)->q_head) ucx_match(ep);
    return st;
}

static gt_status_t ucx_recv_split(void *ep, void *head, size_t head_len, void *rest,
                                  size_t rest_cap, gt_wan_tp_req_t *req)
{
    ucx_ep_t *e = ep;
    if (!ucx_alive(e)) return e->state;
    if (!head || !head_len || (!rest && rest_cap)) return GT_ERR_INVALID;
    gt_status_t st = ucx_recv(ep, head, head_len + rest_cap, req);
    req->rest = rest ? rest : (uint8_t *)head + head_len;
    req->head_len = head_len;
    /* The message was peeked, so it is queued: take it now (an eager one completes at once,
     * a rendezvous starts at once) rather than at the next progress, where an error on the
     * endpoint in the same UCX progress would drop it before it was matched. */
    if (st == GT_OK) ucx_match(e);
    return st;
}

/* The first queued message that no posted receive will take (they match in order). */
static gt_status_t ucx_peek(void *ep, void *head, size_t cap, size_t *head_len_p, size_t *len_p)
{
    ucx_ep_t *e = ep;
    if (!ucx_alive(e)) return e->state;
    ucx_item_t *it = e->q_head;
    for (size_t k = e->recvs.count; it && k; k--) it = it->next;
    if (!it) return GT_ERR_AGAIN;
    memcpy(head, it->hdr, it->hlen < cap ? it->hlen : cap);
    *head_len_p = it->hlen;
    *len_p = it->hlen + it->len;
    return GT_OK;
}

static void ucx_rndv_cb(void *request, ucs_status_t status, size_t length, void *user_data)
{
    ucx_send_bk_t *tok = user_data;
    gt_wan_tp_req_t *r = tok->req;
    ucp_request_free(request);
    if (r) {
        ucx_ep_t *e = r->ep;
        gt_wan_tp_list_remove(&e->rndv, r);
        if (status != UCS_OK && e->state == GT_OK) e->state = ucx_st(status);
        ucx_defer(e->ctx, r, status == UCS_OK ? GT_OK : ucx_st(status),
                  status == UCS_OK ? tok->total + length : 0);
    }
    free(tok);
}

/* Matches queued messages to posted receives, in order. */
static void ucx_match(ucx_ep_t *e)
{
    ucx_ctx_t *c = e->ctx;
    while (ucx_alive(e) && e->q_head && e->recvs.head) {
        ucx_item_t *it = e->q_head;
        gt_wan_tp_req_t *r = gt_wan_tp_list_pop(&e->recvs);
        e->q_head = it->next;
        if (!e->q_head) e->q_tail = NULL;
        size_t cap = r->length;
        uint8_t *buf = r->bk;
        if (it->len > cap || it->hlen > cap - it->len) {
            GT_WARN("ucx: a %zu-byte message does not fit a %zu-byte receive", it->hlen + it->len,
                    cap);
            ucx_item_drop(c, it);
            r->bk = NULL;
            gt_wan_tp_req_complete(r, GT_ERR_OVERFLOW, 0);
            continue;
        }
        size_t hlen = it->hlen;
        uint8_t *data = buf + hlen;
        if (r->rest) { /* split: the AM header to the head, the data to `rest` */
            if (hlen != r->head_len) {
                GT_ERROR("ucx: a split receive for a %zu-byte head met a %zu-byte one", r->head_len,
                         hlen);
                ucx_item_drop(c, it);
                r->bk = NULL;
                gt_wan_tp_req_complete(r, GT_ERR_INTERNAL, 0);
                continue;
            }
            data = r->rest;
        }
        if (hlen) memcpy(buf, it->hdr, hlen);
        if (!it->rndv) {
            if (it->len) memcpy(data, it->data, it->len);
            size_t len = hlen + it->len;
            ucx_item_drop(c, it);
            r->bk = NULL;
            gt_wan_tp_req_complete(r, GT_OK, len);
            continue;
        }
        ucx_send_bk_t *tok = calloc(1, sizeof *tok);
        if (!tok) {
            ucx_item_drop(c, it);
            r->bk = NULL;
            e->state = GT_ERR_NOMEM;
            gt_wan_tp_req_complete(r, GT_ERR_NOMEM, 0);
            break;
        }
        tok->req = r;
        tok->total = hlen; /* the callback adds the data's length */
        ucp_request_param_t p = {
            .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
            .cb = {.recv_am = ucx_rndv_cb},
            .user_data = tok,
        };
        size_t len = it->len;
        void *desc = it->data;
        free(it);
        r->bk = tok;
        gt_wan_tp_list_push(&e->rndv, r);
        ucx_current = c;
        ucs_status_ptr_t sp = ucp_am_recv_data_nbx(c->worker, desc, data, len, &p);
        if (sp == NULL || UCS_PTR_IS_ERR(sp)) { /* no callback will come */
            gt_wan_tp_list_remove(&e->rndv, r);
            free(tok);
            r->bk = NULL;
            if (sp != NULL) e->state = ucx_st(UCS_PTR_STATUS(sp));
            gt_wan_tp_req_complete(r, sp == NULL ? GT_OK : e->state, sp == NULL ? hlen + len : 0);
        }
    }
    if (!ucx_alive(e)) ucx_fail_reqs(e, e->state);
}

static gt_status_t ucx_progress(void *ctx)
{
    ucx_ctx_t *c = ctx;
    ucx_current = c;
    for (int i = 0; i < 64 && ucp_worker_progress(c->worker); i++) {
    }
    ucx_report_done(c);
    for (ucx_ep_t *e = c->eps; e; e = e->next) ucx_match(e);
    if (gt_time_ns() >= c->next_window_ns) ucx_windows_update(c);
    return GT_OK;
}

/* Progresses until a UCX request completes or the deadline passes, then releases it either
 * way (a request still in flight is given back to UCX, which finishes it alone: one never
 * released makes ucp_worker_destroy abort). Returns 1 when it completed. */
static int ucx_wait_req(ucx_ctx_t *c, void *req, uint64_t deadline)
{
    if (!UCS_PTR_IS_PTR(req)) return 1;
    ucx_current = c;
    while (ucp_request_check_status(req) == UCS_INPROGRESS && gt_time_ns() < deadline)
        ucx_progress_once(c);
    int done = ucp_request_check_status(req) != UCS_INPROGRESS;
    ucp_request_free(req);
    return done;
}

static void ucx_close(void *ep, int force)
{
    ucx_ep_t *e = ep;
    if (!e) return;
    ucx_ctx_t *c = e->ctx;
    ucx_current = c;
    for (ucx_ep_t **pp = &c->eps; *pp; pp = &(*pp)->next)
        if (*pp == e) {
            *pp = e->next;
            break;
        }
    int healthy = e->state == GT_OK;
    if (ucx_alive(e)) e->state = GT_ERR_CLOSED;
    ucx_fail_reqs(e, GT_ERR_CLOSED);
    uint64_t deadline = gt_time_ns() + UCX_CLOSE_DEADLINE;
    /* An orderly close flushes what was sent, then closes in flush mode so the peer learns
     * of it at once; both bounded. A failed or frozen peer (or a flush that does not finish
     * in time) gets a forced close, which cancels whatever is pending and completes locally
     * even when the peer never answers. */
    int forced = 1;
    if (healthy && !force) {
        ucp_request_param_t fp = {.op_attr_mask = 0};
        void *fr = ucp_ep_flush_nbx(e->ep, &fp);
        if (ucx_wait_req(c, fr, deadline)) {
            ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = 0};
            void *cr = ucp_ep_close_nbx(e->ep, &p);
            if (!ucx_wait_req(c, cr, gt_time_ns() + UCX_CLOSE_DEADLINE))
                GT_WARN("ucx: an endpoint did not close within %.1f s; leaving it to UCX",
                        UCX_CLOSE_DEADLINE / 1e9);
            forced = 0;
        } else {
            GT_WARN("ucx: could not flush an endpoint within %.1f s; closing it by force",
                    UCX_CLOSE_DEADLINE / 1e9);
            /* The flush request went back to UCX; the forced close purges it. */
            ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                     .flags = UCP_EP_CLOSE_FLAG_FORCE};
            void *cr = ucp_ep_close_nbx(e->ep, &p);
            (void)ucx_wait_req(c, cr, gt_time_ns() + UCX_CLOSE_DEADLINE);
            forced = 0;
        }
    }
    if (forced && e->ep) {
        ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                 .flags = UCP_EP_CLOSE_FLAG_FORCE};
        void *cr = ucp_ep_close_nbx(e->ep, &p);
        (void)ucx_wait_req(c, cr, deadline);
    }
    /* A forced close cancels every send and rendezvous receive; UCX reports them through
     * their callbacks, possibly later than this. Give it a moment, then detach the rest so a
     * late callback touches only its own token. */
    uint64_t purge_end = gt_time_ns() + 100000000ull;
    while ((e->sends.count || e->rndv.count) && gt_time_ns() < purge_end) ucx_progress_once(c);
    gt_wan_tp_req_t *r;
    while ((r = gt_wan_tp_list_pop(&e->sends)) || (r = gt_wan_tp_list_pop(&e->rndv))) {
        ((ucx_send_bk_t *)r->bk)->req = NULL;
        r->bk = NULL;
        gt_wan_tp_req_complete(r, GT_ERR_CLOSED, 0);
    }
    ucx_report_done(c);
    free(e);
    c->next_window_ns = 0; /* re-computed at the next progress */
}

static gt_status_t ucx_relay_dial(void *ctx, const struct sockaddr_storage *dst, int *fd_p)
{
    ucx_ctx_t *c = ctx;
    size_t li = 0;
    while (li < c->n_lfds && !gt_wan_tp_same_addr(&c->laddr[li], dst)) li++;
    if (li == c->n_lfds) return GT_ERR_NOT_FOUND;
    /* From the listener's own address, so the source is ours alone; the port is known before
     * the connect, so the filter can let exactly this connection in. */
    struct sockaddr_storage src = c->laddr[li];
    if (src.ss_family == AF_INET)
        ((struct sockaddr_in *)&src)->sin_port = 0;
    else
        ((struct sockaddr_in6 *)&src)->sin6_port = 0;
    socklen_t sl =
        src.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    int fd = socket(src.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return GT_ERR_IO;
    int one = 1; /* the relay writes what it opened at once; Nagle would hold it back */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&src, sl) != 0 ||
        getsockname(fd, (struct sockaddr *)&src, &sl) != 0) {
        close(fd);
        return GT_ERR_IO;
    }
    if (c->n_relay_src == GT_WAN_TP_FILTER_MAX) { /* the oldest is long connected */
        memmove(&c->relay_src[0], &c->relay_src[1],
                (GT_WAN_TP_FILTER_MAX - 1) * sizeof c->relay_src[0]);
        c->n_relay_src--;
    }
    c->relay_src[c->n_relay_src].src = src;
    c->relay_src[c->n_relay_src].until_ns = gt_time_ns() + UCX_RELAY_SRC_NS;
    c->n_relay_src++;
    ucx_windows_update(c);
    /* The system call itself: a connect() interposed in this process (a test's proxy shim)
     * must not see the relay's local leg. */
    if (syscall(SYS_connect, fd, (const struct sockaddr *)dst, sl) != 0 && errno != EINPROGRESS) {
        close(fd);
        return GT_ERR_IO;
    }
    *fd_p = fd;
    return GT_OK;
}

static void ucx_stats(void *ctx, gt_wan_tp_stats_t *stats_p)
{
    *stats_p = ((ucx_ctx_t *)ctx)->stats;
}

const gt_wan_tp_ops_t gt_wan_tp_ucx_ops = {
    .version = GT_WAN_TP_OPS_VERSION,
    .name = "ucx",
    .create = ucx_create,
    .destroy = ucx_destroy,
    .ep_open = ucx_ep_open,
    .ep_connect = ucx_ep_connect,
    .ep_state = ucx_ep_state,
    .send = ucx_send,
    .recv = ucx_recv_now,
    .progress = ucx_progress,
    .close = ucx_close,
    .peek = ucx_peek,
    .recv_split = ucx_recv_split,
    .stats = ucx_stats,
    .relay_dial = ucx_relay_dial,
};
