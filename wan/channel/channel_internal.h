/* channel_internal.h — the secure channel's internals, shared by ctl.c (the control
 * connection: the site's one listening socket, the handshake before anything else, the
 * exchange of data-path addresses), channel.c (the data path: slots, sealing, frame checks)
 * and net.c (the public gt_wan_net_* / gt_wan_ep_* API: create, connect, accept, progress,
 * waits), plus test hooks. */
#ifndef GT_WAN_CHANNEL_INTERNAL_H
#define GT_WAN_CHANNEL_INTERNAL_H

#include <sys/socket.h>
#include <sys/uio.h>

#include "crypto_pool_internal.h"
#include "emu_internal.h"
#include "frame_internal.h"
#include "gt_wan.h"
#include "secure_internal.h"
#include "transport_internal.h"

#define GT_WAN_NET_MAGIC  0x6774776eu
#define GT_WAN_EP_MAGIC   0x67747765u
#define GT_WAN_REQ_FRAMED 0x1u /* gt_wan_req_t.flags_: every frame of the send is made */

/* Control connection frames: a frame header and at most this much payload on the wire (the
 * largest is the sealed data-path address). */
#define GT_WAN_ADDR_MSG_MAX (12u + GT_WAN_TP_ADDR_MAX)
#define GT_WAN_CTL_MAX      (GT_WAN_FRAME_HDR_LEN + GT_WAN_SEAL_BOUND(GT_WAN_ADDR_MSG_MAX))

/* An endpoint's life. An incoming one is "pre-authentication" (counted against the gate's
 * caps, constant memory, no transport state) until its handshake completes. */
typedef enum {
    GT_WAN_PH_DIAL = 0, /* our TCP connect in flight */
    GT_WAN_PH_HELLO,    /* handshake messages on the control connection */
    GT_WAN_PH_ADDR,     /* authenticated; our data-path address sent, the peer's awaited */
    GT_WAN_PH_LINK,     /* the transport connects the data path */
    GT_WAN_PH_READY     /* state GT_OK: frames flow */
} gt_wan_phase_t;

/* Test hook: called on every sealed data frame (header + ciphertext + tag, after sealing,
 * before the emulator and the transport) of an encrypted endpoint. It may change the bytes
 * in place, shorten *len_p, and call gt_wan_ep_send_raw to inject extra frames. Not for
 * production use: it exists so the security tests can tamper with frames on a real
 * transport. */
typedef void (*gt_wan_tamper_fn)(void *arg, gt_wan_ep_t *ep, uint8_t *frame, size_t *len_p);

typedef enum {
    GT_WAN_SLOT_FREE = 0,
    GT_WAN_SLOT_SEALING, /* a crypto worker seals it; launched in counter order once done */
    GT_WAN_SLOT_DELAYED,
    GT_WAN_SLOT_SENDING
} gt_wan_ch_slot_state_t;

typedef struct {
    gt_wan_tp_req_t treq;
    gt_wan_ep_t *ep;
    gt_wan_req_t *owner; /* NULL for HELLO */
    uint8_t hdr[GT_WAN_FRAME_HDR_LEN];
    uint8_t *buf; /* sealed frames and HELLO: the whole frame */
    size_t buf_cap;
    struct iovec iov[2];
    size_t iovcnt;
    gt_wan_ch_slot_state_t state;
    uint64_t seq;      /* SEALING: the frame's counter value */
    gt_wan_cjob_t job; /* SEALING: the seal on the pool */
} gt_wan_ch_tx_slot_t;

typedef struct {
    gt_wan_tp_req_t treq;
    uint8_t *buf;
    int posted;
    int dispatched; /* its open runs (or ran) on the pool, to be committed in order */
    gt_wan_cjob_t job;
    uint8_t *split; /* plaintext split receive: the payload goes straight here */
} gt_wan_ch_rx_slot_t;

typedef struct gt_wan_ch_raw_send {
    gt_wan_tp_req_t treq;
    uint8_t bytes[];
} gt_wan_ch_raw_send_t;

/* The sealed relay (relay.c). A tunnel carries one TCP connection of the transport's library
 * (UCX) between its local side (the library's socket, or ours to the library's listener) and
 * the peer's relay: chunks of at most GT_WAN_TUNNEL_CHUNK bytes, each one frame (u32 length,
 * the bytes, a 16-byte tag over both) authenticated under the tunnel's own handshake. The
 * bytes are not encrypted again: all of ours in them are frames the channel has sealed. */
#define GT_WAN_TUNNEL_CHUNK  (256u << 10)
#define GT_WAN_TUNNEL_MAGIC  0x6774746eu
#define GT_WAN_RELAY_PENDING 16u /* at most GT_WAN_TP_FILTER_MAX */
typedef struct gt_wan_tunnel gt_wan_tunnel_t;
typedef struct {
    uint32_t magic; /* GT_WAN_TUNNEL_MAGIC: tells an epoll tag from an endpoint */
    gt_wan_tunnel_t *t;
    int remote; /* 1: the connection to the peer's relay; 0: the local one */
} gt_wan_tunnel_tag_t;

struct gt_wan_tunnel {
    gt_wan_net_t *net;
    gt_wan_tunnel_t *next;
    uint32_t peer;
    int rfd, lfd; /* to the peer's relay; to the library (local) */
    uint32_t rfd_events, lfd_events;
    gt_wan_tunnel_tag_t rtag, ltag;
    int lconnecting; /* our local connect to the library's listener is in flight */
    gt_wan_session_t *sess;
    uint8_t *out; /* a tunnel frame for rfd */
    size_t out_off, out_len;
    uint8_t *in; /* one tunnel frame from rfd; once verified, its bytes go to lfd */
    size_t in_len;
    size_t plain_off, plain_len; /* of the verified bytes at in + 4 */
};

/* A connect of the library that the relay took and has not accepted yet. */
typedef struct {
    struct sockaddr_storage local; /* the library socket's own address (it connects from) */
    struct sockaddr_storage dst;   /* what the library meant to reach */
    uint32_t peer;
    char host[256];
    uint16_t port; /* the peer's control port */
    uint64_t deadline_ns;
} gt_wan_relay_pending_t;

struct gt_wan_net {
    uint32_t magic;
    gt_wan_net_params_t p;
    char *site_name, *run_id, *local_host;
    uint64_t run_hash;
    const gt_wan_tp_ops_t *ops;
    void *tp; /* made at the first listen or connect (it needs the site's address) */
    int lfd;  /* the listening socket; -1 */
    int epfd; /* epoll over lfd and every control connection */
    int accept_paused;
    uint32_t n_preauth; /* incoming connections not authenticated yet */
    gt_wan_gate_stats_t gate;
    uint64_t warn_ns, warn_quiet; /* rate limit of pre-authentication warnings */
    /* Per pinned site id (n_ids of them): when a handshake with it last succeeded, and since
     * when it has refused ours without one succeeding (0: not refusing). */
    uint32_t n_ids;
    uint64_t *auth_ok_ns, *refused_since_ns;
    struct sockaddr_storage *peer_src; /* the address each site published (family 0: unknown) */
    gt_wan_sec_t *sec;                 /* NULL with security: none */
    gt_wan_cpool_t *pool;              /* crypto workers; NULL: seal and open inline */
    gt_wan_ep_t *eps;
    gt_wan_ep_stats_t closed_stats; /* endpoints already gone (and the relay's rejects) */
    uint64_t activity;              /* bumped by every completed frame or state change */
    uint16_t ctl_port;              /* our listening port (0: none) */
    /* The sealed relay (relay.c; UCX with security on, unless wan.ucx_relay is false). */
    gt_wan_tp_relay_t relay;
    int relay_on;
    int relay_lfd[2]; /* local listeners for the library's connects: IPv4, IPv6; -1 */
    gt_wan_relay_pending_t pending[GT_WAN_RELAY_PENDING];
    size_t n_pending;
    gt_wan_tunnel_t *tunnels;
};

struct gt_wan_ep {
    uint32_t magic;
    gt_wan_net_t *net;
    gt_wan_ep_t *next;
    void *tp; /* the transport endpoint, from authentication on */
    int incoming, accepted;
    int flushing;      /* gt_wan_ch_ep_fail is committing the frames that had arrived */
    gt_status_t state; /* GT_ERR_AGAIN handshaking, GT_OK ready, else the error */
    gt_wan_phase_t phase;
    int preauth; /* counted in net->n_preauth */
    uint32_t peer;
    gt_wan_hs_t *hs;
    int hs_step;
    gt_wan_session_t *sess;
    uint64_t hs_deadline_ns; /* pre-authentication (incoming) or connect deadline */
    uint64_t hello_tx, hello_rx, plain_tx, plain_rx;
    /* The control connection: one TCP socket, frames as on the data path. */
    int fd;
    uint32_t fd_events;
    uint64_t ctl_lost_ns;        /* ready, and the control connection ended: fail after a grace */
    char host[256];              /* the peer's host (dialled, or the address it came from) */
    struct sockaddr_storage src; /* incoming: where it came from (per-source cap) */
    socklen_t src_len;
    uint8_t crx[GT_WAN_CTL_MAX];
    size_t crx_len;
    uint8_t ctx[2 * GT_WAN_CTL_MAX];
    size_t ctx_off, ctx_len;
    gt_wan_ch_tx_slot_t *tx;
    gt_wan_ch_rx_slot_t *rx;
    size_t nslots, rx_head;
    gt_wan_req_t *sq_head, *sq_tail, *sq_frame; /* sends in order; first not yet framed */
    gt_wan_req_t *rq_head, *rq_tail;            /* receives in order */
    int asm_active, asm_discard;                /* a message being assembled */
    gt_wan_frame_hdr_t asm_hdr;
    uint64_t asm_got;
    uint64_t tx_launch_seq; /* with the pool: the next sealed frame to hand to the transport */
    /* With the pool, frames are opened ahead of their commit: the assembly state as it will
     * be once every dispatched open is committed (a prediction; each commit checks that its
     * frame went where the real state says, else wipes and opens it again inline). Plaintext
     * channels over a transport with peek use it the same way for receives posted ahead,
     * each straight into its place in the caller's buffer (every check is done on the
     * peeked header before posting, so the prediction cannot be wrong). */
    struct {
        size_t inflight; /* dispatched (or split-posted), not yet committed */
        int poisoned;    /* a prediction failed: dispatch nothing until inflight is 0 */
        int asm_active, asm_discard;
        gt_wan_frame_hdr_t asm_hdr;
        uint64_t asm_got, seq;
        gt_wan_req_t *cur;  /* the receive the current message goes to */
        gt_wan_req_t *last; /* the last receive a dispatched frame completes (NULL: none) */
    } d;
    uint64_t tx_idle_since_ns; /* last transmit progress while frames are outstanding */
    gt_wan_emu_queue_t *delay; /* frames held by the emulator */
    gt_wan_ep_stats_t stats;
    uint32_t rejects;
    gt_wan_tamper_fn tamper;
    void *tamper_arg;
    /* A relay tunnel being dialled (tunnel_lfd >= 0): the library's connection it will carry,
     * and where that connection meant to go. Never handed to anyone: relay.c owns it. */
    int relay_dial;
    int tunnel_lfd;
    struct sockaddr_storage tunnel_dst;
    uint16_t peer_ctl_port; /* the peer's listening port, from its address message */
};

/* Control connection (ctl.c). */
gt_status_t gt_wan_ctl_listen(gt_wan_net_t *net, const char *host, uint16_t port, uint16_t *port_p);
gt_status_t gt_wan_ctl_dial(gt_wan_net_t *net, const char *host, uint16_t port, uint32_t peer,
                            gt_wan_ep_t **ep_p);
/* Accepts, reads and writes control connections, runs handshakes, enforces the
 * pre-authentication deadline. */
void gt_wan_ctl_progress(gt_wan_net_t *net);
/* Closes the control connection of an endpoint (idempotent). */
void gt_wan_ctl_close(gt_wan_ep_t *ep);
/* Makes the transport context if there is none (host: the site's address, may be NULL). */
gt_status_t gt_wan_net_tp_ensure(gt_wan_net_t *net, const char *host);
/* The handshake history with pinned site `id`, for the mesh (see gt_wan_net_t). */
/* Where pinned site `id` connects from (its published host, resolved): an incoming handshake
 * that names `id` and fails counts as `id` refusing our key only from there. */
void gt_wan_net_set_peer_host(gt_wan_net_t *net, uint32_t id, const char *host);
void gt_wan_net_peer_auth(const gt_wan_net_t *net, uint32_t id, uint64_t *ok_ns_p,
                          uint64_t *refused_since_ns_p);

/* The sealed relay (relay.c). */
void gt_wan_relay_init(gt_wan_net_t *net);
void gt_wan_relay_destroy(gt_wan_net_t *net);
/* An epoll event of the relay (a listener's or a tunnel's): handled, 1; not the relay's, 0. */
int gt_wan_relay_event(gt_wan_net_t *net, void *ptr, uint32_t events);
/* Deadlines, and tunnel-dialling endpoints that failed. */
void gt_wan_relay_progress(gt_wan_net_t *net);
/* The relay's hooks for the transport (gt_wan_tp_params_t.relay). */
const gt_wan_tp_relay_t *gt_wan_relay_cb(gt_wan_net_t *net);
/* The tunnel request a dialled tunnel sends (sealed) once authenticated: 24 bytes. */
/* "GtTA" as little-endian bytes (v2: tunnel frames authenticated, not encrypted again) */
#define GT_WAN_TUNNEL_REQ_MAGIC 0x41547447u
gt_status_t gt_wan_relay_request(const gt_wan_ep_t *ep, uint8_t out[24], size_t *len_p);
/* The request is queued on a tunnel we dialled: it becomes a tunnel (the endpoint is left
 * closed, for relay_progress to free). */
gt_status_t gt_wan_relay_dialled(gt_wan_ep_t *ep);
/* An authenticated incoming connection asked for a tunnel (req: the whole sealed request):
 * connect to our library's listener and become a tunnel (the endpoint is left closed). */
gt_status_t gt_wan_relay_accepted(gt_wan_ep_t *ep, const uint8_t *req, size_t len);

/* Engine entry points (channel.c) used by net.c and ctl.c. */
void gt_wan_ch_stats_add(gt_wan_ep_stats_t *a, const gt_wan_ep_stats_t *b);
const char *gt_wan_ch_peer_label(const gt_wan_ep_t *ep, char *buf, size_t cap);
/* Ends an endpoint: closes its transport endpoint, completes every request with st. */
void gt_wan_ch_ep_fail(gt_wan_ep_t *ep, gt_status_t st);
/* Unlinks and frees an endpoint (its stats go to the net's closed totals). */
void gt_wan_ch_ep_free(gt_wan_ep_t *ep);
/* Makes an endpoint without transport state or buffers (what a connection needs before it is
 * authenticated) and links it into the net. fd: its control connection (taken over). */
gt_status_t gt_wan_ch_ep_alloc(gt_wan_net_t *net, int fd, int incoming, uint32_t peer,
                               gt_wan_ep_t **ep_p);
/* After authentication: the frame slots and the emulator queue. */
gt_status_t gt_wan_ch_ep_activate(gt_wan_ep_t *ep);
/* The data path is up: state GT_OK. */
void gt_wan_ch_ep_ready(gt_wan_ep_t *ep);
void gt_wan_ch_rx_progress(gt_wan_ep_t *ep);
void gt_wan_ch_tx_progress(gt_wan_ep_t *ep);
void gt_wan_ch_tx_pump(gt_wan_ep_t *ep);

void gt_wan_ep_set_tamper(gt_wan_ep_t *ep, gt_wan_tamper_fn fn, void *arg);

/* Sends len raw bytes as one transport message, now (no sealing, no emulation). */
gt_status_t gt_wan_ep_send_raw(gt_wan_ep_t *ep, const void *bytes, size_t len);

#endif /* GT_WAN_CHANNEL_INTERNAL_H */
