/* gt_wan.h — geotrain's cross-site layer: site keys, the secure channel, transports and the
 * WAN emulator (DESIGN.md §4).
 *
 * Site keys: every site has a static X25519 key pair made by `geotrain keygen`. The secret
 * key stays in a file only its owner can read; the public key is pinned in sites.yaml as
 * base64. Key files are text: a magic line with a version, then the key in base64.
 */
#ifndef GT_WAN_H
#define GT_WAN_H

#include <stddef.h>
#include <stdint.h>

#include "gt_base.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GT_WAN_KEY_BYTES   32u
/* Base64 (original alphabet, padded) of a 32-byte key is 44 characters. */
#define GT_WAN_KEY_B64_LEN 44u

typedef struct {
    uint8_t public_key[GT_WAN_KEY_BYTES];
    uint8_t secret_key[GT_WAN_KEY_BYTES];
} gt_wan_keypair_t;

/* Makes a fresh X25519 key pair from the system CSPRNG. */
GT_API gt_status_t gt_wan_keypair_generate(gt_wan_keypair_t *kp_p);

/* Writes DIR/SITE.key (secret, mode 0600) and DIR/SITE.pub (public, mode 0644). Creates DIR
 * (mode 0700) if missing. Refuses with GT_ERR_EXISTS, and writes nothing, when either file
 * exists. */
GT_API gt_status_t gt_wan_keypair_save(const gt_wan_keypair_t *kp, const char *dir,
                                       const char *site);

/* Reads a secret key file written by gt_wan_keypair_save and derives its public key.
 * Rejects (GT_ERR_CORRUPT) a wrong magic, version or length, and warns when the file is
 * readable by group or others. */
GT_API gt_status_t gt_wan_keypair_load(const char *secret_path, gt_wan_keypair_t *kp_p);

/* Encodes a 32-byte key as base64 into out (at least GT_WAN_KEY_B64_LEN + 1 bytes). */
GT_API void gt_wan_key_to_base64(const uint8_t key[GT_WAN_KEY_BYTES], char *out);

/* Decodes a base64 public key; GT_ERR_INVALID unless it is exactly 32 bytes of base64. */
GT_API gt_status_t gt_wan_key_from_base64(const char *b64, uint8_t key_p[GT_WAN_KEY_BYTES]);

/* Wipes a key pair's secret (sodium_memzero). Accepts NULL. */
GT_API void gt_wan_keypair_wipe(gt_wan_keypair_t *kp);

/* ---- transports, the secure channel, the emulator hook ---------------------------------
 *
 * A gt_wan_net_t is one site's (one rank's) view of the WAN: a transport (UCX or libfabric,
 * `wan.transport`), the site's static key and the pinned keys of its peers, and optionally a
 * WAN emulator. It listens and connects; every connection runs a handshake (X25519 static +
 * ephemeral keys, see docs/wan.md) before it is usable, then carries framed messages:
 * a header (type, view epoch, round, lane, chunk; the library adds magic, version, run id,
 * sender, lengths and a sequence number) and a payload of any size up to
 * GT_WAN_MSG_MAX_BYTES, pipelined internally in sealed frames of `frame_bytes`.
 *
 * Nothing blocks: post with gt_wan_ep_send / gt_wan_ep_recv, drive with
 * gt_wan_net_progress, and test the request (or gt_wan_req_wait with a deadline). A peer
 * that dies, closes, or keeps sending frames that fail authentication fails its endpoint:
 * every request on it completes with an error (GT_ERR_PEER_LOST, GT_ERR_AUTH, ...) within a
 * bounded time, and the endpoint then only accepts gt_wan_ep_close.
 *
 * Threads: a net and its endpoints belong to one thread (the progress thread).
 */

/* Wire message types (the frame header's type field). */
typedef enum {
    GT_WAN_MSG_HELLO = 1,       /* handshake (internal to the channel) */
    GT_WAN_MSG_DELTA = 2,       /* a site's compressed pseudo-gradient chunk -> its owner */
    GT_WAN_MSG_RESULT = 3,      /* an owner's aggregated chunk -> every site */
    GT_WAN_MSG_STATE_REQ = 4,   /* a joining site asks for outer state */
    GT_WAN_MSG_STATE_CHUNK = 5, /* a stripe of outer state */
    GT_WAN_MSG_BYE = 6          /* orderly leave */
} gt_wan_msg_type_t;

/* Largest message gt_wan_ep_send accepts. */
#define GT_WAN_MSG_MAX_BYTES ((size_t)1 << 40)

typedef enum { GT_WAN_TRANSPORT_UCX = 0, GT_WAN_TRANSPORT_LIBFABRIC = 1 } gt_wan_transport_t;

/* "ucx" or "libfabric" (also "ofi") -> transport; GT_ERR_INVALID otherwise. */
GT_API gt_status_t gt_wan_transport_parse(const char *name, gt_wan_transport_t *transport_p);
GT_API const char *gt_wan_transport_name(gt_wan_transport_t transport);

typedef enum {
    GT_WAN_SECURITY_ENCRYPTED = 0, /* the default: handshake + AEAD on every frame */
    GT_WAN_SECURITY_NONE = 1       /* plaintext; must be asked for, and warns */
} gt_wan_security_t;

/* One pinned peer: its site id (index in sites.yaml), name, and X25519 public key. */
typedef struct {
    uint32_t site_id;
    const char *name; /* for messages; may be NULL */
    uint8_t public_key[GT_WAN_KEY_BYTES];
} gt_wan_pinned_key_t;

struct gt_wan_emu; /* the WAN emulator (wan/emu_internal.h), optional */

typedef struct {
    gt_wan_transport_t transport;     /* wan.transport */
    gt_wan_security_t security;       /* security.mode */
    const char *cipher;               /* security.cipher: "auto" (NULL), "aes256gcm",
                                         "xchacha20poly1305" */
    uint32_t site_id;                 /* our site index (the frames' sender) */
    const char *site_name;            /* for messages; may be NULL */
    const char *run_id;               /* names the run; both ends must agree; NULL = "geotrain" */
    const gt_wan_keypair_t *keypair;  /* our static key (encrypted mode); copied */
    const gt_wan_pinned_key_t *peers; /* pinned peers (encrypted mode); copied */
    size_t n_peers;
    size_t frame_bytes;          /* pipelining unit; 0 = 1 MiB; at most 64 MiB */
    size_t window;               /* frames in flight per direction per endpoint; 0 = 8 */
    uint32_t connect_timeout_ms; /* connect + handshake deadline; 0 = 10000 */
    uint32_t io_timeout_ms;      /* a send that makes no progress this long fails the
                                    endpoint (GT_ERR_TIMEOUT); 0 = 15000 */
    uint32_t max_rejects;        /* rejected frames before the peer is disconnected; 0 = 3 */
    struct gt_wan_emu *emu;      /* emulate the WAN on our outgoing links; NULL = off. Links
                                    are (site_id -> peer site id). Not owned. */
} gt_wan_net_params_t;

#define GT_WAN_NET_PARAMS_INIT                                                                     \
    {                                                                                              \
        GT_WAN_TRANSPORT_UCX, GT_WAN_SECURITY_ENCRYPTED, NULL, 0, NULL, NULL, NULL, NULL, 0, 0, 0, \
            0, 0, 0, NULL                                                                          \
    }

typedef struct gt_wan_net gt_wan_net_t;
typedef struct gt_wan_ep gt_wan_ep_t;

/* The routing header of a message (the wire frame carries more; see docs/wan.md). */
typedef struct {
    uint8_t type;    /* gt_wan_msg_type_t, not HELLO */
    uint32_t sender; /* on receive: the peer's site id (set by the library on send) */
    uint64_t view_epoch;
    uint64_t round;
    uint32_t lane;
    uint32_t chunk;
} gt_wan_msg_t;

/* A caller-owned request. `status` is GT_ERR_AGAIN while in flight. On a completed receive,
 * `msg` is the header and `length` the payload bytes. The fields after `length` are the
 * library's; do not touch or copy a request in flight. */
typedef struct gt_wan_req {
    gt_status_t status;
    gt_wan_msg_t msg;
    size_t length;
    /* private */
    void *buf_;
    size_t cap_, off_, inflight_;
    unsigned flags_;
    struct gt_wan_req *next_;
    gt_wan_ep_t *ep_;
} gt_wan_req_t;

/* Counters of one endpoint. Every rejected frame is counted once, in one bucket. */
typedef struct {
    uint64_t msgs_sent, msgs_received;
    uint64_t bytes_sent, bytes_received; /* payload bytes of whole messages */
    uint64_t frames_sent, frames_received;
    uint64_t rejected_auth;      /* bad tag, or a handshake that failed authentication */
    uint64_t rejected_replay;    /* sequence number not the next expected one */
    uint64_t rejected_truncated; /* fewer/more bytes than the header says */
    uint64_t rejected_oversized; /* a length above the limits */
    uint64_t rejected_malformed; /* bad magic/version/type/run id, a frame out of place */
} gt_wan_ep_stats_t;

/* Creates the transport context. With security NONE, warns that traffic is plaintext. */
GT_API GT_MUST_USE gt_status_t gt_wan_net_create(const gt_wan_net_params_t *params,
                                                 gt_wan_net_t **net_p);
/* Closes every endpoint (their requests complete with GT_ERR_CLOSED) and frees. Accepts NULL. */
GT_API void gt_wan_net_destroy(gt_wan_net_t *net);

/* Listens on host:port; port 0 picks a free port, returned in *port_p. */
GT_API GT_MUST_USE gt_status_t gt_wan_net_listen(gt_wan_net_t *net, const char *host, uint16_t port,
                                                 uint16_t *port_p);
/* Takes one incoming endpoint whose handshake has completed; GT_ERR_AGAIN when none. */
GT_API GT_MUST_USE gt_status_t gt_wan_net_accept(gt_wan_net_t *net, gt_wan_ep_t **ep_p);
/* Starts a connection to site `peer_site_id` at host:port. Returns at once; the endpoint
 * becomes ready when the handshake completes (gt_wan_ep_state). Sends may be posted at once. */
GT_API GT_MUST_USE gt_status_t gt_wan_net_connect(gt_wan_net_t *net, const char *host,
                                                  uint16_t port, uint32_t peer_site_id,
                                                  gt_wan_ep_t **ep_p);
/* Does all pending work without blocking: transport progress, handshakes, sealing and
 * opening frames, emulated delays, deadlines. */
GT_API gt_status_t gt_wan_net_progress(gt_wan_net_t *net);

/* GT_OK ready, GT_ERR_AGAIN handshaking, else the error that ended the endpoint. */
GT_API gt_status_t gt_wan_ep_state(const gt_wan_ep_t *ep);
/* Progresses until the endpoint is ready or failed, or timeout_ms passes (GT_ERR_TIMEOUT). */
GT_API GT_MUST_USE gt_status_t gt_wan_ep_wait_ready(gt_wan_ep_t *ep, uint32_t timeout_ms);
/* The peer's site id (known once ready). */
GT_API uint32_t gt_wan_ep_peer(const gt_wan_ep_t *ep);
GT_API void gt_wan_ep_stats(const gt_wan_ep_t *ep, gt_wan_ep_stats_t *stats_p);

/* Posts a message. `msg->sender` is ignored. buf[0..len) must stay unchanged until the
 * request completes (it is sealed frame by frame as the window allows). */
GT_API GT_MUST_USE gt_status_t gt_wan_ep_send(gt_wan_ep_t *ep, const gt_wan_msg_t *msg,
                                              const void *buf, size_t len, gt_wan_req_t *req);
/* Posts a receive of the next message into buf[0..cap). Receives complete in order. A
 * message longer than cap completes the receive with GT_ERR_OVERFLOW (and is discarded). */
GT_API GT_MUST_USE gt_status_t gt_wan_ep_recv(gt_wan_ep_t *ep, void *buf, size_t cap,
                                              gt_wan_req_t *req);
/* The request's status (GT_ERR_AGAIN while in flight). */
GT_API gt_status_t gt_wan_req_test(const gt_wan_req_t *req);
/* Progresses the request's net until it completes or timeout_ms passes (GT_ERR_TIMEOUT; the
 * request stays posted). Returns the request's status. */
GT_API GT_MUST_USE gt_status_t gt_wan_req_wait(gt_wan_req_t *req, uint32_t timeout_ms);
/* Totals over every endpoint the net has had, closed or failed ones and incoming
 * connections that never passed the handshake included. */
GT_API void gt_wan_net_stats(const gt_wan_net_t *net, gt_wan_ep_stats_t *stats_p);
/* Closes an endpoint: requests still in flight complete with GT_ERR_CLOSED. Accepts NULL. */
GT_API void gt_wan_ep_close(gt_wan_ep_t *ep);

#ifdef __cplusplus
}
#endif

#endif /* GT_WAN_H */
