/* transport_internal.h — the transport backend table (docs/wan.md).
 *
 * A backend moves reliable, ordered messages (up to GT_WAN_TP_MAX_MSG bytes each) between
 * connected endpoints. Everything is non-blocking: calls post work and return; the owner
 * calls progress() and tests the caller-owned request. A request's `status` is GT_ERR_AGAIN
 * while in flight and is written exactly once when it completes. An endpoint whose peer
 * dies or closes moves to an error state: its pending requests complete with
 * GT_ERR_PEER_LOST and later calls on it fail the same way. The backend never waits without
 * a deadline; the layer above (channel.c) adds an idle deadline on every endpoint too.
 *
 * Connecting (version 3): a backend never listens for strangers on a well-known port. The
 * channel authenticates the peer first, on its own control connection (ctl.c), and only then
 * asks the backend for this side's data-path address (ep_open), sends it to the peer sealed,
 * and hands the peer's address to ep_connect. What an address holds is the backend's business
 * (UCX: a worker address and the id our messages must carry; libfabric: the port of a passive
 * endpoint opened for this one connection and the token the connect request must carry); it
 * is at most GT_WAN_TP_ADDR_MAX bytes. The backend binds to `local_host` only.
 *
 * The table is versioned like NCCL's net plugins: a caller checks `version` before use.
 */
#ifndef GT_WAN_TRANSPORT_INTERNAL_H
#define GT_WAN_TRANSPORT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "gt_wan.h"

#define GT_WAN_TP_OPS_VERSION 4u
#define GT_WAN_TP_MAX_MSG     (128u << 20) /* one transport message, header included */
#define GT_WAN_TP_MAX_IOV     4u
#define GT_WAN_TP_ADDR_MAX    1024u /* a data-path address (ep_open / ep_connect) */

typedef struct gt_wan_tp_req gt_wan_tp_req_t;
typedef void (*gt_wan_tp_cb_t)(gt_wan_tp_req_t *req);

/* Caller-owned request. The caller fills `cb`/`user` (optional) before posting. */
struct gt_wan_tp_req {
    gt_status_t status;    /* GT_ERR_AGAIN while in flight */
    size_t length;         /* bytes sent / received once complete */
    gt_wan_tp_cb_t cb;     /* called once on completion, from progress() or close() */
    void *user;            /* for the caller */
    void *ep;              /* backend endpoint (set by the backend) */
    void *bk;              /* backend private */
    gt_status_t bk_status; /* backend private: a completion recorded, not yet reported */
    gt_wan_tp_req_t *next; /* backend private list link */
    gt_wan_tp_req_t *prev;
    uint8_t *rest;   /* recv_split: where the bytes after the head go (else NULL) */
    size_t head_len; /* recv_split: bytes that go to the posted buffer */
};

/* The sealed relay (relay.c): a backend whose library makes TCP connections of its own on the
 * data path (UCX's tcp transport) hands each of them to the relay, which carries the bytes to
 * the peer's relay sealed (and opens them there before the peer's library reads them). */
typedef struct {
    void *arg;
    /* fd: the library's socket, about to connect to dst, a listener of the peer whose control
     * endpoint is `owner` (given to ep_open). Connects fd to the relay instead and returns what
     * connect(2) would: 0, or -1 with errno (EINPROGRESS while the connect goes on). */
    int (*redirect)(void *arg, void *owner, int fd, const struct sockaddr *dst, socklen_t len);
    /* Moves what the relay's open tunnels can move now; for a backend that waits on its own
     * connections (a flush at close) outside the caller's progress. */
    void (*pump)(void *arg);
} gt_wan_tp_relay_t;

typedef struct {
    uint64_t connect_timeout_ns;           /* a connect not established by then fails */
    const gt_wan_tp_relay_t *relay;        /* NULL: the backend's connections go out as they are */
    const char *local_host;                /* the site's address: bind and use only its interface;
                                              NULL or a wildcard = any */
    uint16_t data_port_min, data_port_max; /* listeners a backend opens per connection take
                                              a port in this range (0, 0: any free one) */
} gt_wan_tp_params_t;

/* Counters of a backend context (gt_wan_tp_ops_t.stats). */
typedef struct {
    uint64_t stray; /* data-path traffic that named no endpoint of ours (a wrong id or token) */
} gt_wan_tp_stats_t;

typedef struct {
    uint32_t version; /* GT_WAN_TP_OPS_VERSION */
    const char *name;
    gt_status_t (*create)(const gt_wan_tp_params_t *params, void **ctx_p);
    void (*destroy)(void *ctx); /* closes every endpoint still open */
    /* Makes an endpoint that is not connected yet and writes, to addr[0..cap), what the peer
     * needs to reach it (*len_p bytes, at most GT_WAN_TP_ADDR_MAX). `responder`: this side
     * accepted the control connection (for a backend with connection roles). `peer_host`: the
     * authenticated peer's address (where its control connection came from, or went to), for
     * a backend that lets only it through to a listener of its own. `owner`: the caller's
     * endpoint, handed back to the relay's redirect. */
    gt_status_t (*ep_open)(void *ctx, int responder, const char *peer_host, void *owner,
                           void **ep_p, void *addr, size_t cap, size_t *len_p);
    /* Connects an endpoint from ep_open to the peer, given the peer's address (from its
     * ep_open; authenticated by the channel) and the host its control connection used.
     * Returns at once; ep_state says when the data path is up. Sends may be posted at once. */
    gt_status_t (*ep_connect)(void *ep, const char *peer_host, const void *addr, size_t len);
    /* GT_OK connected, GT_ERR_AGAIN still connecting, or the error that ended it. */
    gt_status_t (*ep_state)(void *ep);
    /* Sends the concatenation of iov[0..iovcnt) as one message. The buffers stay the
     * caller's and must not change until the request completes. */
    gt_status_t (*send)(void *ep, const struct iovec *iov, size_t iovcnt, gt_wan_tp_req_t *req);
    /* Posts a receive of one message of at most cap bytes. Receives complete in order; one
     * may complete before recv returns when its message is already there. */
    gt_status_t (*recv)(void *ep, void *buf, size_t cap, gt_wan_tp_req_t *req);
    gt_status_t (*progress)(void *ctx);
    /* Optional (NULL when the backend cannot; version 2). peek: the next message that no
     * posted receive will take, without taking it: its total length in *len_p, and the
     * bytes of its first send buffer that arrived ahead of the rest (UCX: the AM header;
     * *head_len_p of them, at most cap copied to head). GT_ERR_AGAIN when none is there.
     * recv_split: like recv, but the message's first head_len bytes go to head and the rest
     * to rest (rest_cap bytes at most); for a message peeked with *head_len_p == head_len,
     * so a payload lands where it belongs without a copy. It may complete the request before
     * it returns (the message is there already). */
    gt_status_t (*peek)(void *ep, void *head, size_t cap, size_t *head_len_p, size_t *len_p);
    gt_status_t (*recv_split)(void *ep, void *head, size_t head_len, void *rest, size_t rest_cap,
                              gt_wan_tp_req_t *req);
    /* Closes the endpoint; pending requests complete with GT_ERR_CLOSED before it returns,
     * within a bounded time. Without `force`, what was sent is first flushed to the peer
     * (bounded by a deadline); with it (a failed or hostile peer) nothing is waited for.
     * The pointer is invalid afterwards. */
    void (*close)(void *ep, int force);
    void (*stats)(void *ctx, gt_wan_tp_stats_t *stats_p);
    /* Optional (NULL: the backend needs no relay; version 4). For the peer's relay: connects
     * a new non-blocking TCP socket to dst, which must be one of this backend's own
     * listeners (else GT_ERR_NOT_FOUND), from a source its listener's filter lets in. *fd_p:
     * the socket, its connect in flight; the caller owns it. */
    gt_status_t (*relay_dial)(void *ctx, const struct sockaddr_storage *dst, int *fd_p);
} gt_wan_tp_ops_t;

extern const gt_wan_tp_ops_t gt_wan_tp_ucx_ops;
extern const gt_wan_tp_ops_t gt_wan_tp_ofi_ops;

/* The table for a transport, checked for a matching version; NULL when not built. */
const gt_wan_tp_ops_t *gt_wan_tp_ops(gt_wan_transport_t transport);

/* Completes a request: sets status/length, calls its callback. */
void gt_wan_tp_req_complete(gt_wan_tp_req_t *req, gt_status_t status, size_t length);

/* Doubly linked request lists used by the backends. */
typedef struct {
    gt_wan_tp_req_t *head, *tail;
    size_t count;
} gt_wan_tp_list_t;
void gt_wan_tp_list_push(gt_wan_tp_list_t *l, gt_wan_tp_req_t *r);
void gt_wan_tp_list_remove(gt_wan_tp_list_t *l, gt_wan_tp_req_t *r);
gt_wan_tp_req_t *gt_wan_tp_list_pop(gt_wan_tp_list_t *l);

/* The name of the network interface that holds `host`'s address (resolved numerically or by
 * name), for a backend that must use only that interface: GT_ERR_NOT_FOUND when no local
 * interface has it, GT_ERR_INVALID for NULL, "" or a wildcard address. */
gt_status_t gt_wan_tp_host_ifname(const char *host, char *name, size_t cap);

/* A library that opens its own listening socket (UCX's TCP transport does, for its data path)
 * is found by the sockets that appear while it starts: this process-wide lock is held around
 * that start and around every listen of ours, so no other listener appears meanwhile. */
void gt_wan_tp_listen_lock(void);
void gt_wan_tp_listen_unlock(void);
/* The listening TCP sockets of this process (fds[0..min(n, cap)); returns n). */
size_t gt_wan_tp_listeners(int *fds, size_t cap);

#define GT_WAN_TP_FILTER_MAX 16u
/* Makes the kernel drop, before any TCP handshake, every segment that reaches socket fd from a
 * source not in allow[0..n) (at most GT_WAN_TP_FILTER_MAX; n = 0: everything). An entry whose
 * port is 0 matches its address from any port; one with a port, only that source port.
 * Replaces any earlier filter (sockets already accepted keep the one they were born with). */
gt_status_t gt_wan_tp_filter_sources(int fd, const struct sockaddr_storage *allow, size_t n);
/* 1 when a and b hold the same IPv4 or IPv6 address (ports ignored), else 0. */
int gt_wan_tp_same_ip(const struct sockaddr_storage *a, const struct sockaddr_storage *b);
/* 1 when a and b hold the same address and port, else 0. */
int gt_wan_tp_same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b);

/* Makes the loaded shared library whose file name contains `lib` call `fn` wherever it calls
 * the dynamic symbol `sym` (its GOT slots for `sym` are rewritten; no other library is
 * touched). GT_ERR_NOT_FOUND when no such library or slot is loaded; *patched_p: slots
 * rewritten. For the sealed relay (relay.c), which must see every connect() of UCX's TCP
 * transport (libucs makes them), and has no other way to: UCX offers no socket hook. */
gt_status_t gt_wan_tp_hook_got(const char *lib, const char *sym, void *fn, size_t *patched_p);

/* 8 bytes from the system CSPRNG (ids and tokens of the data path). */
gt_status_t gt_wan_tp_random(void *buf, size_t len);

#endif /* GT_WAN_TRANSPORT_INTERNAL_H */
