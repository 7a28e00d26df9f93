/* gt_wan.h — geotrain's cross-site layer, the one public header of wan/ (map: wan/README.md):
 *   - site keys (below) and the secure channel over a transport, UCX or libfabric, with an
 *     optional WAN emulator: gt_wan_net_* / gt_wan_ep_* (wan/channel/, wan/transport/,
 *     wan/emu/);
 *   - site membership through etcd: gt_wan_member_* (wan/membership/);
 *   - the codec parameters from the config: gt_wan_codec_params (wan/codec.c);
 *   - the mesh, one site's reliable connections to every other site: gt_wan_mesh_*
 *     (wan/mesh/).
 * It knows no rounds: the outer-round protocol that rides on it is outer/ (gt_outer.h), a
 * layer above, which wan/ never includes.
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
#include "gt_compress.h"
#include "gt_topology.h"

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

/* The operator's signing key (Ed25519) that admits sites added mid-run
 * (docs/diloco.md#adding-a-site): `geotrain keygen --admin` writes DIR/admin.key (the 32-byte
 * seed, mode 0600; keep it on the operator's machine) and DIR/admin.pub, and returns the public
 * key for security.admin_key. Never overwrites (GT_ERR_EXISTS). */
GT_API gt_status_t gt_wan_admin_keygen(const char *dir,
                                       uint8_t public_key[GT_WAN_KEY_BYTES]) GT_MUST_USE;
#define GT_WAN_SIG_B64_LEN 88 /* an Ed25519 signature in base64 */
/* Signs site description `desc` for run `run_id` with the admin key file (what `geotrain sites
 * add` writes into etcd beside it): base64 into sig_b64. The signature covers a context string,
 * the run id and the description, so it admits that site to that run only. */
GT_API gt_status_t gt_wan_add_sign(const char *secret_path, const char *run_id, const char *desc,
                                   char sig_b64[GT_WAN_SIG_B64_LEN + 1]) GT_MUST_USE;
/* GT_OK when sig_b64 is public_key's signature of `desc` for `run_id`; GT_ERR_AUTH otherwise
 * (malformed included). */
GT_API gt_status_t gt_wan_add_verify(const uint8_t public_key[GT_WAN_KEY_BYTES], const char *run_id,
                                     const char *desc, const char *sig_b64) GT_MUST_USE;

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
 * a header (type, view epoch, round, lane, fragment, chunk; the library adds magic, version,
 * run id, sender, lengths and a sequence number) and a payload of any size up to
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
    GT_WAN_MSG_STATE_REQ = 4,   /* a site asks a peer for outer state (a join, a re-fetch) */
    GT_WAN_MSG_STATE_CHUNK = 5, /* a stripe of outer state */
    GT_WAN_MSG_BYE = 6,         /* orderly leave */
    GT_WAN_MSG_ACK = 7,         /* the mesh's acknowledgements (internal to the mesh) */
    GT_WAN_MSG_JOIN = 8,        /* a site announces the first round it contributes to */
    GT_WAN_MSG_FIN = 9,         /* a site that finished says how many DELTAs it took */
    GT_WAN_MSG_PULL = 10,       /* a site asks a peer to relay a RESULT chunk it lacks */
    GT_WAN_MSG_PROBE = 11,      /* a site asks a peer for an answer (where it is, or only
                                   that it answers: a joiner's plan, liveness, reachability) */
    GT_WAN_MSG_PROBE_INFO = 12, /* the answer to a PROBE */
    GT_WAN_MSG_START = 13       /* a site's start check: its parameter count and initial hash */
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

struct gt_wan_emu; /* the WAN emulator (wan/emu/emu_internal.h), optional */

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
    uint32_t max_rejects;        /* replayed frames before the peer is disconnected; 0 = 3
                                    (any other rejected frame ends the connection at once) */
    struct gt_wan_emu *emu;      /* emulate the WAN on our outgoing links; NULL = off. Links
                                    are (site_id -> peer site id). Not owned. */
    const char *local_host;      /* the site's address: the transports bind to and use only
                                    its interface; NULL = the address given to listen (or
                                    any, for a net that only connects) */
    uint32_t preauth_timeout_ms; /* an incoming connection must authenticate this fast; 0 = 2000 */
    uint32_t preauth_max;        /* incoming connections authenticating at once; 0 = 64 */
    uint32_t preauth_max_per_source; /* of them from one source address; 0 = 8 */
    int ucx_relay_off; /* 1: UCX's TCP connections go out as they are, not through the sealed
                          relay (wan.ucx_relay: false); the relay needs security */
    /* wan.data_port_min/max: libfabric's passive endpoints (one per incoming connection) take
     * a port in [min, max] instead of an ephemeral one, so a firewall can name them; 0, 0:
     * any free port */
    uint16_t data_port_min, data_port_max;
    /* Site ids below this may be pinned later (gt_wan_net_pin: sites added mid-run, up to
     * outer.site_slots); 0: only the ids of `peers` and our own. */
    uint32_t n_site_ids;
} gt_wan_net_params_t;

#define GT_WAN_NET_PARAMS_INIT                                                                     \
    {                                                                                              \
        GT_WAN_TRANSPORT_UCX, GT_WAN_SECURITY_ENCRYPTED, NULL, 0, NULL, NULL, NULL, NULL, 0, 0, 0, \
            0, 0, 0, NULL, NULL, 0, 0, 0, 0, 0, 0, 0                                               \
    }

typedef struct gt_wan_net gt_wan_net_t;
typedef struct gt_wan_ep gt_wan_ep_t;

/* The routing header of a message (the wire frame carries more; see docs/wan.md). */
typedef struct {
    uint8_t type;      /* gt_wan_msg_type_t, not HELLO */
    uint16_t fragment; /* a sub-stream of the lane, for the caller (streaming DiLoCo's fragment);
                          0 when unused */
    uint32_t sender;   /* on receive: the peer's site id (set by the library on send) */
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
    /* frames opened by a crypto worker ahead of their turn (then committed in order), of
     * frames_received: 0 when opens run inline (no workers, or plaintext) */
    uint64_t frames_opened_ahead;
} gt_wan_ep_stats_t;

/* Counters of a net's listening socket and handshakes (the pre-authentication gate). */
typedef struct {
    uint64_t accepted;                  /* connections accepted on the listening socket */
    uint64_t handshakes_ok;             /* connections authenticated, both directions */
    uint64_t handshakes_refused;        /* incoming connections that failed before authentication:
                                           bytes that are no handshake, an unpinned or wrong key,
                                           another run, a close half-way */
    uint64_t handshakes_timed_out;      /* incoming connections not authenticated within
                                           preauth_timeout_ms */
    uint64_t connections_capped;        /* closed at once: their source address already had
                                           preauth_max_per_source connections authenticating */
    uint64_t accept_pauses;             /* times the listener stopped accepting at preauth_max */
    uint64_t dials_refused;             /* our connections the peer refused (it closed after our
                                           first handshake message, or answered falsely) */
    uint64_t data_stray;                /* data-path messages or connect requests that named no
                                           connection of ours (dropped) */
    uint32_t preauth_now, preauth_peak; /* incoming connections authenticating */
    uint64_t tunnels;                   /* sealed relay tunnels opened (UCX's TCP connections,
                                           both directions; docs/security.md) */
    uint64_t tunnels_closed;            /* of them, closed again (a reset, a bad frame, or
                                           UCX closing its connection) */
} gt_wan_gate_stats_t;

/* Creates the net. Nothing is opened until listen or connect. With security NONE, warns that
 * traffic is plaintext.
 *
 * Connections: a site listens on ONE plain TCP socket of its own (gt_wan_net_listen, bound to
 * the given address only). Every connection runs the handshake there first, under a
 * pre-authentication deadline and caps (preauth_*); only an authenticated peer learns where
 * the transport's data path is, over that connection, sealed, and the transport connects to
 * it (UCX by worker address, libfabric to a passive endpoint opened for that one connection).
 * The control connection stays open as the connection's liveness signal. */
GT_API GT_MUST_USE gt_status_t gt_wan_net_create(const gt_wan_net_params_t *params,
                                                 gt_wan_net_t **net_p);
/* Closes every endpoint (their requests complete with GT_ERR_CLOSED) and frees. Accepts NULL. */
GT_API void gt_wan_net_destroy(gt_wan_net_t *net);
/* Pins one more peer (encrypted mode: a site added mid-run, whose key came through the
 * authenticated control plane): its handshakes succeed from now on. Its id must be below
 * params.n_site_ids. Safe beside the net's own threads; calls must not overlap. GT_ERR_INVALID
 * for an id out of range, or an id or key pinned already; GT_OK without effect in plaintext
 * mode. */
GT_API GT_MUST_USE gt_status_t gt_wan_net_pin(gt_wan_net_t *net, const gt_wan_pinned_key_t *peer);

/* Listens on host:port (this address only; port 0 picks a free port, returned in *port_p). */
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
/* Closes an endpoint without flushing what it sent (the transport cancels what is pending and
 * closes at once, whether or not the peer still answers): for a site that leaves and must send
 * nothing more. Accepts NULL. */
GT_API void gt_wan_ep_abort(gt_wan_ep_t *ep);
/* The listening socket's and the handshakes' counters. */
GT_API void gt_wan_net_gate_stats(const gt_wan_net_t *net, gt_wan_gate_stats_t *stats_p);

/* ---- site membership through etcd's v3 JSON gateway (docs/design.md §6).
 *
 * Each site holds a lease (TTL lease_ttl_s, renewed every heartbeat_ms by a background
 * thread) on its member key PREFIX/RUN/members/SITE, whose value is JSON {name, address}.
 * A site that dies stops renewing; etcd deletes its key when the lease runs out. The view —
 * {epoch, sorted member list} at PREFIX/RUN/view — changes only by compare-and-swap on the
 * key's mod_revision, so when several sites notice the same change at once exactly one
 * proposal wins and everyone reads the same epoch. etcd is a Raft cluster: with members in
 * three sites the control plane survives the loss of one site; the client tries every
 * endpoint in turn, and every request has a timeout, so a dead endpoint never hangs a site.
 */

#define GT_WAN_MEMBER_NAME_MAX 64
#define GT_WAN_MEMBER_ADDR_MAX 256
#define GT_WAN_MAX_MEMBERS     64

typedef struct {
    const char *const *endpoints; /* etcd client URLs, http(s)://host:port */
    size_t n_endpoints;
    const char *prefix;  /* key prefix, starts with '/' */
    const char *run_id;  /* scopes all keys of one run */
    const char *site;    /* this site's name */
    const char *address; /* what peers should connect to */
    uint32_t lease_ttl_s;
    uint32_t heartbeat_ms;
    uint32_t request_timeout_ms; /* per HTTP request, connect included */
    /* Optional: a JSON object whose fields are added to this site's member value (e.g. the
     * checkpoints it could resume from); gt_wan_member_values returns them. */
    const char *note;
    /* 1: when the site's name is still held by a previous process's lease, and that process
     * is provably gone — nobody listens at the address it published (the connection is
     * refused: it died and its host's kernel says so), or it published `address`, which this
     * process now listens on — revoke that lease and register at once, instead of failing with
     * GT_ERR_EXISTS until it runs out. A frozen or unreachable holder is never taken for gone.
     * 0 (the default): GT_ERR_EXISTS. */
    int replace_gone;
    /* https:// endpoints (membership.tls): the CA file (PEM) that signed the members'
     * certificates (NULL: the system's), and this site's client certificate and its key (PEM;
     * both or neither), for members that require one (etcd --client-cert-auth). */
    const char *tls_ca, *tls_cert, *tls_key;
} gt_wan_member_params_t;

#define GT_WAN_MEMBER_PARAMS_INIT                                                       \
    {                                                                                   \
        NULL, 0, "/geotrain", "run", NULL, "", 5, 1000, 2000, NULL, 0, NULL, NULL, NULL \
    }

typedef struct {
    char name[GT_WAN_MEMBER_NAME_MAX];
    char address[GT_WAN_MEMBER_ADDR_MAX];
    int64_t lease;        /* the etcd lease it registered with: a new one each time the site starts
                             (0: not known) — a changed lease is a restart */
    uint64_t first_round; /* a joiner's first round as it announced it in etcd (its note's
                             "first_round", gt_wan_member_set_note), so that a site its JOIN
                             cannot reach (a cut link) learns it too; 0: none announced.
                             gt_wan_member_list fills it; gt_wan_member_sync_view copies it
                             into the view's entry of the same incarnation (name and lease) */
} gt_wan_member_info_t;

typedef struct {
    uint64_t epoch; /* 0: no view yet */
    uint32_t n_members;
    gt_wan_member_info_t members[GT_WAN_MAX_MEMBERS]; /* sorted by name */
} gt_wan_view_t;

typedef struct gt_wan_member gt_wan_member_t;

/* Before registering (params as for create; site and lease unused): when no site is
 * registered under params' run id, deletes what an earlier run under it left — its "started"
 * mark, its view and its accusations — so that a new run starts afresh under the id
 * (`--reuse-run-id`); *cleared_p: 1 when there was such a run, 0 when the id was free.
 * GT_ERR_EXISTS, deleting nothing, when a site is registered (a run in progress, or the leases
 * of a run's processes that died, until they run out). */
GT_API gt_status_t gt_wan_member_clear_run(const gt_wan_member_params_t *params,
                                           int *cleared_p) GT_MUST_USE;

/* Retires site `name` from the run for good (`geotrain sites remove`; params as for
 * gt_wan_member_clear_run): marks it retired under the run id (PREFIX/RUN/retired/NAME), then,
 * when it is registered, deletes its member key and revokes its lease as an eviction does
 * (*was_live_p: 1). The site sees its lease go, finds the mark and leaves for good
 * (GT_ERR_RETIRED); started again it is refused after it registers. --reuse-run-id clears the
 * marks with the rest of a finished run's keys. */
GT_API gt_status_t gt_wan_run_retire(const gt_wan_member_params_t *params, const char *name,
                                     int *was_live_p) GT_MUST_USE;
/* The sites registered under params' run id now (*registered_p, as gt_wan_member_list), and the
 * names of those retired from it (*retired_p: n_retired_p strings; free each and the array),
 * without registering (`geotrain sites list`). */
GT_API gt_status_t gt_wan_run_sites(const gt_wan_member_params_t *params,
                                    gt_wan_view_t *registered_p, char ***retired_p,
                                    size_t *n_retired_p) GT_MUST_USE;
/* Adds site `name` to the run (`geotrain sites add`; params as for gt_wan_member_clear_run):
 * creates PREFIX/RUN/added/NAME holding `value` (the site's description, JSON, as the CLI
 * writes it: docs/diloco.md#adding-a-site) and PREFIX/RUN/slots/SLOT holding the name, both in
 * one transaction and only when neither exists (GT_ERR_EXISTS otherwise: the name was added
 * already, or another site took the slot). */
GT_API gt_status_t gt_wan_run_add(const gt_wan_member_params_t *params, const char *name,
                                  uint32_t slot, const char *value) GT_MUST_USE;
/* The values gt_wan_run_add wrote under the run id, as a JSON array of strings (*json_p,
 * malloc'd): through a registered member (its WAN thread's view reads), or a client that does
 * not register (a site before it registers, the CLI). */
GT_API gt_status_t gt_wan_member_added(gt_wan_member_t *m, char **json_p) GT_MUST_USE;
GT_API gt_status_t gt_wan_run_added(const gt_wan_member_params_t *params,
                                    char **json_p) GT_MUST_USE;
/* Every registered site's member value, as gt_wan_member_values, without registering (the
 * CLI: `geotrain sites add` compares the run's shared configuration with the added site's). */
GT_API gt_status_t gt_wan_run_values(const gt_wan_member_params_t *params,
                                     char **json_p) GT_MUST_USE;
/* This site has pinned added site `name`'s key and takes its connections: says so under
 * PREFIX/RUN/pinned/NAME/SITE, with its lease (the mark goes with the site). */
GT_API gt_status_t gt_wan_member_ack_added(gt_wan_member_t *m, const char *name) GT_MUST_USE;
/* The sites that said so for `name`, as a JSON array of their names (*json_p, malloc'd). */
GT_API gt_status_t gt_wan_run_pinned(const gt_wan_member_params_t *params, const char *name,
                                     char **json_p) GT_MUST_USE;
/* Whether this site is marked retired under its run id (gt_wan_run_retire). */
GT_API gt_status_t gt_wan_member_retired(gt_wan_member_t *m, int *retired_p) GT_MUST_USE;

/* Registers this site: grants a lease and creates its member key with it. Fails with
 * GT_ERR_EXISTS when a live site already holds the name, GT_ERR_TIMEOUT / GT_ERR_IO when no
 * endpoint answers. Starts the heartbeat thread. */
GT_API gt_status_t gt_wan_member_create(const gt_wan_member_params_t *params,
                                        gt_wan_member_t **member_p) GT_MUST_USE;

/* Leaves: stops the heartbeat and revokes the lease, so the others see the site go at once
 * rather than after the TTL. Accepts NULL. */
GT_API void gt_wan_member_destroy(gt_wan_member_t *m);

/* Stops heartbeats without revoking the lease: what a crash looks like to the others (for
 * tests and chaos runs). The member must still be destroyed. */
GT_API void gt_wan_member_abandon(gt_wan_member_t *m);

/* GT_OK while the lease is held; GT_ERR_PEER_LOST once etcd said it expired (this site has
 * been removed by the others and must rejoin). When no etcd member answers for a TTL (no
 * quorum), the lease is neither renewed nor expired, so health stays GT_OK and the member is
 * "frozen" (below) until etcd answers again. */
GT_API gt_status_t gt_wan_member_health(const gt_wan_member_t *m);
/* Keepalive attempts the heartbeat thread has finished (answered or not): a caller that was
 * stopped (SIGSTOP, a long pause) waits for this to move before it trusts
 * gt_wan_member_health again. */
GT_API uint64_t gt_wan_member_heartbeats(const gt_wan_member_t *m);
/* Keepalives etcd answered (saying the lease is alive or gone; counted before
 * gt_wan_member_heartbeats moves): two more than before a pause mean one was sent after it, so
 * gt_wan_member_health then tells what etcd holds now, not what it held before the pause. */
GT_API uint64_t gt_wan_member_answers(const gt_wan_member_t *m);
/* 1 while etcd has not answered this site's heartbeats for a TTL: the view cannot change, so
 * the last agreed one holds; joins and removals wait. Accepts NULL (0). */
GT_API int gt_wan_member_frozen(const gt_wan_member_t *m);

/* The sites whose member keys exist now (sorted by name). */
GT_API gt_status_t gt_wan_member_list(gt_wan_member_t *m, gt_wan_view_t *live_p) GT_MUST_USE;

/* The current view; epoch 0 and no members when none was agreed yet. */
GT_API gt_status_t gt_wan_member_view(gt_wan_member_t *m, gt_wan_view_t *view_p) GT_MUST_USE;

/* Moves the view to the live member set when they differ: proposes epoch + 1 by compare-and-
 * swap and, whether this proposal or another site's won, returns the view now agreed.
 * *changed_p is 1 when the returned epoch is newer than the one read first. */
GT_API gt_status_t gt_wan_member_sync_view(gt_wan_member_t *m, gt_wan_view_t *view_p,
                                           int *changed_p) GT_MUST_USE;

/* Proposes `next` (its epoch must be the current epoch + 1) against the view read at
 * `expected_revision`; GT_ERR_AGAIN when another proposal won first. Used by sync_view;
 * exposed for tests of the compare-and-swap. */
GT_API gt_status_t gt_wan_member_propose(gt_wan_member_t *m, const gt_wan_view_t *next,
                                         int64_t expected_revision) GT_MUST_USE;

/* Marks the run as started: PREFIX/RUN/started, with no lease, so it outlives every site. The
 * sites that start a run set it when they begin training; a site that registers later and finds
 * it set joins the run in progress (fetches the state, announces its first round) instead of
 * starting at round 0. */
GT_API gt_status_t gt_wan_member_mark_started(gt_wan_member_t *m) GT_MUST_USE;
/* *started_p = 1 when the run's started mark is set. */
GT_API gt_status_t gt_wan_member_started(gt_wan_member_t *m, int *started_p) GT_MUST_USE;

/* Whether the run this member registered in is in progress: 1 when another site registered
 * before the run's last "started" mark (every site puts it once it trains, a joiner once it has
 * joined), so that someone who trained is still there; 0 when no mark exists, or every other
 * registered site came after it — the fresh sites of a new run under the id of one that
 * finished or was abandoned. */
GT_API gt_status_t gt_wan_member_run_live(gt_wan_member_t *m, int *live_p) GT_MUST_USE;
/* Every registered site's member value as a JSON array (malloc'd text): {name, address} and the
 * fields of its note. */
GT_API gt_status_t gt_wan_member_values(gt_wan_member_t *m, char **json_p) GT_MUST_USE;
/* Replaces this site's note (a JSON object's text; NULL: none) in its member value. A joiner's
 * note carries "first_round" (see gt_wan_member_info_t). */
GT_API gt_status_t gt_wan_member_set_note(gt_wan_member_t *m, const char *note) GT_MUST_USE;
/* The mod_revision of the view key as last read by gt_wan_member_view (0: no view key). */
GT_API int64_t gt_wan_member_view_revision(const gt_wan_member_t *m);

/* Eviction by the majority (docs/diloco.md, "A site the majority cannot reach"). A site that
 * still renews its lease but that the others cannot reach keeps its place in the view, and its
 * chunks, until its peers agree to remove it. Each accuser puts
 * PREFIX/RUN/suspects/TARGET/ACCUSER (value: the target's lease, as a decimal string) under its
 * own lease, so an accusation dies with its accuser and names one incarnation of the target.
 *
 * gt_wan_member_accuse puts this site's accusation of `target` (registered with
 * `target_lease`); gt_wan_member_withdraw deletes it (GT_OK when there was none). */
GT_API gt_status_t gt_wan_member_accuse(gt_wan_member_t *m, const char *target,
                                        int64_t target_lease) GT_MUST_USE;
GT_API gt_status_t gt_wan_member_withdraw(gt_wan_member_t *m, const char *target) GT_MUST_USE;
/* The sites that accuse `target`'s incarnation `target_lease` now, as names (sorted) in
 * accusers_p->members[].name; accusers_p->epoch is 0. */
GT_API gt_status_t gt_wan_member_accusers(gt_wan_member_t *m, const char *target,
                                          int64_t target_lease,
                                          gt_wan_view_t *accusers_p) GT_MUST_USE;
/* Removes `target` from the run: revokes its lease `target_lease`, which deletes its member key
 * as if the lease had run out (the next view leaves it out; the target finds its lease lost and
 * leaves). GT_ERR_NOT_FOUND when that lease is gone already. The caller decides that the
 * accusers are a majority: this function does not check. */
GT_API gt_status_t gt_wan_member_evict(gt_wan_member_t *m, const char *target,
                                       int64_t target_lease) GT_MUST_USE;

/* ---- the codec from the config (codec.c) ---- */

/* The codec parameters of sites.yaml's `codec:` section, with codec `name` (NULL:
 * codec.name). GT_ERR_INVALID for an unknown codec name (codec.name or codec.topk_values). */
GT_API gt_status_t gt_wan_codec_params(const gt_topo_config_t *cfg, const char *name,
                                       gt_cmp_params_t *cp_p) GT_MUST_USE;

/* ---- one site's connections to every other site, built from sites.yaml.
 *
 * The mesh owns the site's gt_wan_net (transport, secure channel, optional emulator from
 * wan.emulation/links), listens on the site's address (that address only), and keeps one
 * endpoint per live peer: the site with the higher index connects, the lower one accepts, so
 * each pair has exactly one connection. Messages are copied on send (callers may reuse their
 * buffers), queued while a peer is still connecting, and every received message is handed to
 * the on_message callback exactly once.
 *
 * A connection is disposable, a message is not (docs/design.md §5). Every message carries the
 * sender's incarnation (random per mesh) and a per-peer id; the receiver acknowledges the last
 * id it delivered (cumulative ACK messages, batched) and drops anything at or below it, so a
 * re-sent message is delivered once. The sender keeps every message until it is acknowledged.
 * A connection that fails — a frame that failed authentication, a reset, a dead peer — is
 * closed and, while the view still lists the peer, dialled again; on the new connection each
 * side first sends its ACK, and the sender then re-sends, in order, what was not acknowledged.
 * Only messages to a site that leaves the view are given up (counted in send_failures). A
 * peer whose connection fails wan.max_link_failures times within a minute is cut off (no dial,
 * its connections refused) until the rate falls below that, as a lost peer.
 */

typedef struct {
    const gt_topo_config_t *cfg;
    uint32_t site;                   /* this site's index in cfg->sites */
    const char *run_id;              /* both ends must agree */
    const gt_wan_keypair_t *keypair; /* required unless security.mode is none */
    size_t max_message;              /* largest payload a peer may send us */
    uint64_t start_ns;               /* origin of emulated link cuts */
    void (*on_message)(void *ctx, const gt_wan_msg_t *msg, const void *buf, size_t len);
    void *ctx;
    /* Added to the site's configured port when that is not 0: WAN group g of a run listens on
     * port + g at every site (docs/diloco.md#lanes-across-ranks; with equal ranks group g is
     * rank g of each site, each rank carrying its own lanes, DESIGN §3). 0 for group 0. */
    uint32_t port_offset;
} gt_wan_mesh_params_t;

typedef struct {
    uint64_t bytes_sent, bytes_received; /* payload bytes, all endpoints, closed ones too */
    uint64_t msgs_sent, msgs_received;   /* messages acknowledged by / delivered from peers */
    uint64_t rejected;        /* frames rejected by the secure channel (after authentication) */
    uint64_t send_failures;   /* messages given up: their site left the view */
    uint64_t peers_lost;      /* ready connections that failed */
    uint64_t reconnects;      /* connections that became ready to a peer that had one before */
    uint64_t resent;          /* messages sent again on a new connection */
    uint64_t duplicates;      /* received messages dropped as already delivered */
    uint64_t malformed;       /* received messages without a valid mesh header (dropped) */
    uint64_t peers_cut;       /* times a peer was cut off for failing too often */
    gt_wan_gate_stats_t gate; /* the listening socket and the handshakes */
    /* With wan.emulation: messages this site sent that a link cut (links[].cuts) held until
     * it healed, and that it refused as lost (held past wan.peer_timeout_ms). */
    uint64_t emu_held_by_cut, emu_refused_by_cut;
} gt_wan_mesh_stats_t;

typedef struct gt_wan_mesh gt_wan_mesh_t;

GT_API gt_status_t gt_wan_mesh_create(const gt_wan_mesh_params_t *params,
                                      gt_wan_mesh_t **mesh_p) GT_MUST_USE;
GT_API void gt_wan_mesh_destroy(gt_wan_mesh_t *mesh);

/* host:port peers should dial: sites[].advertise where set, else the bound address; the
 * actual port where the port is 0. */
const char *gt_wan_mesh_address(const gt_wan_mesh_t *mesh);

/* Dials the view's members that this site should dial and forgets endpoints of sites that
 * left the view. Members are matched to sites.yaml by name. */
GT_API gt_status_t gt_wan_mesh_set_view(gt_wan_mesh_t *mesh, const gt_wan_view_t *view) GT_MUST_USE;
/* Site `site`, a slot of the mesh's config just taken by a site added mid-run
 * (gt_topo_take_slot), is pinned with the key the slot holds: its handshakes succeed from now
 * on. The slot must be taken first (GT_ERR_INVALID); GT_ERR_CONFIG when encrypted and it has no
 * key. Safe beside the WAN thread's calls; not beside another pin. */
GT_API gt_status_t gt_wan_mesh_pin(gt_wan_mesh_t *mesh, uint32_t site) GT_MUST_USE;
/* Adds a cut window to the emulated link between sites a and b, both ways: from start_s for
 * duration_s seconds of the emulator's clock (the run's GT_EMU_START_NS), as a links[].cuts
 * entry of the config would (`geotrain launch --chaos` fires its link cuts this way, at their
 * round). Messages already in flight keep their arrival time; the link's windows that ended
 * more than a second ago are dropped to make room. GT_ERR_INVALID without the WAN
 * emulator, for an unknown site or a bad window; GT_ERR_OVERFLOW when the link has its
 * GT_WAN_EMU_MAX_CUTS windows. Under the caller's serialisation of the mesh (as a send). */
GT_API gt_status_t gt_wan_mesh_cut(gt_wan_mesh_t *mesh, uint32_t a, uint32_t b, double start_s,
                                   double duration_s) GT_MUST_USE;
/* This site was removed from the run: closes every connection at once (nothing queued is
 * flushed or sent again) and dials nobody until the next gt_wan_mesh_set_view. */
GT_API void gt_wan_mesh_leave(gt_wan_mesh_t *mesh);

/* Queues a copy of buf for site `dst`. */
GT_API gt_status_t gt_wan_mesh_send(gt_wan_mesh_t *mesh, uint32_t dst, const gt_wan_msg_t *msg,
                                    const void *buf, size_t len) GT_MUST_USE;

/* Non-blocking: transport progress, accepts, completions, deliveries, re-dials. */
GT_API gt_status_t gt_wan_mesh_progress(gt_wan_mesh_t *mesh);

/* 1 while `site` has a ready endpoint. */
GT_API int gt_wan_mesh_peer_ready(const gt_wan_mesh_t *mesh, uint32_t site);
/* 1 while our last dial to `site` was refused (ECONNREFUSED: its host's kernel says nobody
 * listens at its address — the process died) and no connection to it is up since. A site
 * dials the lower-indexed sites of the view only, so this says nothing about higher ones. */
GT_API int gt_wan_mesh_peer_refused(const gt_wan_mesh_t *mesh, uint32_t site);

/* Messages queued or in flight (0 when every send has completed). */
GT_API size_t gt_wan_mesh_pending(const gt_wan_mesh_t *mesh);

GT_API void gt_wan_mesh_stats(const gt_wan_mesh_t *mesh, gt_wan_mesh_stats_t *stats_p);
/* Payload bytes sent to and received from `site` over all of its connections so far (the
 * closed ones included); 0 for ourselves. */
GT_API void gt_wan_mesh_peer_bytes(const gt_wan_mesh_t *mesh, uint32_t site, uint64_t *sent_p,
                                   uint64_t *received_p);

/* GT_OK, or GT_ERR_AUTH when no peer of the view will authenticate this site: every peer has
 * refused its handshakes (closed after our first message, or sent us one sealed to a key we
 * do not hold) for 2 x wan.peer_timeout_ms, and no connection is up. The site then cannot take
 * part and should leave the view (an error naming its public key is logged once) rather than
 * hold up the others' rounds. */
GT_API gt_status_t gt_wan_mesh_health(gt_wan_mesh_t *mesh);

#ifdef __cplusplus
}
#endif

#endif /* GT_WAN_H */
