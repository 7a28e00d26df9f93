/* secure_internal.h — the secure channel's crypto core (docs/design.md §5, docs/security.md),
 * transport independent: it turns bytes into bytes and never does I/O. Implemented in
 * wan/channel/secure.c; docs/security.md describes the protocol and the threat model.
 *
 * Three objects:
 *   gt_wan_sec_t      one per site: our static X25519 key pair, the pinned peers (site id,
 *                     name, public key), the run id, the cipher policy, the frame size limit.
 *   gt_wan_hs_t       one handshake (one connection attempt), a message-based state machine:
 *
 *       initiator (connects)                          responder (accepts)
 *       gt_wan_hs_create(sec, INITIATOR, peer)       gt_wan_hs_create(sec, RESPONDER, any)
 *       gt_wan_hs_initiator_start   -> msg1  ----->
 *                                                     gt_wan_hs_responder_read(msg1) -> msg2
 *       gt_wan_hs_initiator_read(msg2) -> msg3 <----
 *                                            ----->   gt_wan_hs_responder_confirm(msg3)
 *       gt_wan_hs_finish -> session                   gt_wan_hs_finish -> session
 *
 *                     A Noise-IK-like pattern (X25519, BLAKE2b, XChaCha20-Poly1305) with a
 *                     third key-confirmation message: msg1 = e, es, s, ss; msg2 = e, ee, se;
 *                     msg3 = confirmation. Fresh ephemeral keys on both sides give forward
 *                     secrecy; the static keys authenticate; the transcript hash binds the
 *                     protocol name, the run id, both static keys, both ephemerals, every
 *                     message header and the negotiated cipher. The initiator must know which
 *                     site it calls (IK: it encrypts to the responder's pinned key); the
 *                     responder learns who called from msg1 and rejects a key it has not
 *                     pinned (GT_ERR_AUTH; gt_wan_hs_info() then names the key).
 *   gt_wan_session_t  the result: one key per direction, the cipher, a send counter and a
 *                     receive counter, rejection counters. Seal/open frames with it.
 *
 * Frames: ciphertext = AEAD(key_dir, nonce = seq, ad = the caller's frame header, payload),
 * laid out as payload ciphertext followed by the 16-byte tag (GT_WAN_SEAL_BOUND). seq is a
 * per-direction 64-bit counter that starts at 0 and must increase by exactly one per frame:
 * the sender asks gt_wan_session_send_seq() for it, writes it into its frame header, and
 * passes it to seal (which refuses any other value, so a nonce is never reused); the
 * receiver reads it from the header and passes it to open, which accepts only the next
 * expected value (the transports are reliable and ordered, so anything else is a replay, a
 * reorder or a deletion). Large messages: cut them into chunks (1-4 MiB is a good size) and
 * seal each as its own frame with its own seq and a header naming the chunk (index, offset),
 * so every chunk is authenticated in its place; seal/open work on caller-owned buffers,
 * in place (ct == pt) or not, without allocating.
 *
 * Threads: a gt_wan_sec_t is read-only after create (handshakes on different threads may
 * share it). One handshake or session is used by one thread at a time, except that one
 * thread may seal while another opens on the same session (the two directions share no
 * mutable state); seal_reserved and open_detached (below) may run on any number of threads
 * at once, beside the owner thread's calls.
 */
#ifndef GT_WAN_SECURE_INTERNAL_H
#define GT_WAN_SECURE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gt_base.h"
#include "gt_wan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ciphers --------------------------------------------------------------------------- */

/* Same values as topology's gt_topo_cipher_t (security.cipher), so a cast converts. */
typedef enum {
    GT_WAN_CIPHER_AUTO = 0,             /* AES-256-GCM when both ends have AES-NI, else XChaCha */
    GT_WAN_CIPHER_AES256GCM = 1,        /* crypto_aead_aes256gcm (needs AES-NI + PCLMUL) */
    GT_WAN_CIPHER_XCHACHA20POLY1305 = 2 /* crypto_aead_xchacha20poly1305_ietf */
} gt_wan_cipher_t;

/* Tag bytes a sealed frame adds; the same for both ciphers. */
#define GT_WAN_SEAL_ABYTES           16u
/* Ciphertext bytes for a payload of n bytes. */
#define GT_WAN_SEAL_BOUND(n)         ((size_t)(n) + (size_t)GT_WAN_SEAL_ABYTES)
/* Default and hard limits on one frame's payload (plaintext) bytes. */
#define GT_WAN_SEC_MAX_FRAME_DEFAULT ((size_t)64 << 20) /* 64 MiB */
#define GT_WAN_SEC_MAX_FRAME_LIMIT   ((size_t)1 << 36)  /* 64 GiB: AES-GCM's own bound */
/* Longest run id mixed into the handshake. */
#define GT_WAN_SEC_RUN_ID_MAX        256u
/* Most pinned peers one context holds. */
#define GT_WAN_SEC_MAX_PEERS         4096u
/* Largest handshake message (msg1); buffers of this size hold any of the three. */
#define GT_WAN_HS_MSG_MAX            128u

/* Initialises libsodium once (thread safe, idempotent). Every function below calls it;
 * call it yourself only to fail early. */
GT_API GT_MUST_USE gt_status_t gt_wan_secure_init(void);

/* "auto", "aes256gcm" or "xchacha20poly1305" -> cipher; GT_ERR_INVALID otherwise. */
GT_API GT_MUST_USE gt_status_t gt_wan_cipher_parse(const char *name, gt_wan_cipher_t *cipher_p);
/* The name as parse accepts it; "?" for an unknown value. */
GT_API const char *gt_wan_cipher_name(gt_wan_cipher_t cipher);
/* 1 when this machine can run the cipher (AES-256-GCM needs AES-NI and PCLMUL; XChaCha and
 * auto always), else 0. */
GT_API int gt_wan_cipher_available(gt_wan_cipher_t cipher);
/* What `auto` means on this machine alone: AES-256-GCM when available, else XChaCha. A
 * concrete cipher maps to itself. (A session's cipher also depends on the peer.) */
GT_API gt_wan_cipher_t gt_wan_cipher_local_choice(gt_wan_cipher_t cipher);

/* Seals `size`-byte buffers in a loop on this thread for about `seconds` (at least one
 * frame) and reports the rate in MB/s (10^6 bytes of plaintext per second). Used by
 * `geotrain bench wan` for its `aes256gcm` row. GT_ERR_UNSUPPORTED when the cipher is not
 * available here; `auto` measures gt_wan_cipher_local_choice(auto). */
GT_API GT_MUST_USE gt_status_t gt_wan_secure_bench_seal_rate(gt_wan_cipher_t cipher, size_t size,
                                                             double seconds, double *mbps_p);
/* The same for open (decrypt + verify), for completeness of the benchmark. */
GT_API GT_MUST_USE gt_status_t gt_wan_secure_bench_open_rate(gt_wan_cipher_t cipher, size_t size,
                                                             double seconds, double *mbps_p);

/* ---- the site's security context ----------------------------------------------------- */

#define GT_WAN_SITE_NAME_MAX 64u /* including the NUL, as topology's GT_TOPO_NAME_MAX */

/* One pinned peer: sites.yaml's sites[i] (index i = site_id) with its public_key. */
typedef struct {
    uint32_t site_id;                     /* the site index used everywhere in wan/ */
    const char *name;                     /* site name, for messages; copied; may be NULL */
    uint8_t public_key[GT_WAN_KEY_BYTES]; /* pinned X25519 public key */
} gt_wan_peer_key_t;

typedef struct {
    const gt_wan_keypair_t *local;  /* our static key pair; copied (the caller may wipe its
                                       copy right after create) */
    uint32_t local_site_id;         /* our site index */
    const char *local_name;         /* our site name; copied; may be NULL */
    const gt_wan_peer_key_t *peers; /* the pinned peers; copied; may include ourselves */
    size_t n_peers;
    const void *run_id;     /* bytes that name this run; both ends must use the same bytes, or */
    size_t run_id_len;      /* the handshake fails (GT_ERR_AUTH, reason RUN_ID). 1..256 bytes */
    gt_wan_cipher_t cipher; /* security.cipher; see gt_wan_hs_responder_read for negotiation */
    size_t max_frame_bytes; /* largest payload open accepts; 0 = GT_WAN_SEC_MAX_FRAME_DEFAULT */
    size_t capacity;        /* peers it can hold, those pinned later (gt_wan_sec_pin) included;
                               0 (or below n_peers) = n_peers */
} gt_wan_sec_params_t;

#define GT_WAN_SEC_PARAMS_INIT                                    \
    {                                                             \
        NULL, 0, NULL, NULL, 0, NULL, 0, GT_WAN_CIPHER_AUTO, 0, 0 \
    }

typedef struct gt_wan_sec gt_wan_sec_t;
typedef struct gt_wan_session gt_wan_session_t;

/* Validates and copies the params: GT_ERR_INVALID for a missing key pair, no run id, a run
 * id over 256 bytes, more than GT_WAN_SEC_MAX_PEERS peers, duplicate peer ids or keys, or a
 * max_frame_bytes above the limit;
 * GT_ERR_UNSUPPORTED when `cipher` is AES-256-GCM and this CPU lacks AES-NI. The static
 * secret lives in guarded memory (sodium_malloc) and is wiped on destroy. */
GT_API GT_MUST_USE gt_status_t gt_wan_sec_create(const gt_wan_sec_params_t *params,
                                                 gt_wan_sec_t **sec_p);
/* Wipes and frees. Accepts NULL. Handshakes and sessions made from it stay valid (they
 * copy what they need). */
GT_API void gt_wan_sec_destroy(gt_wan_sec_t *sec);
/* Pins one more peer (a site added mid-run): handshakes created after it returns know it.
 * Safe beside gt_wan_hs_create on another thread; two pins must not run at once (the caller
 * serialises them). GT_ERR_INVALID when its id or key is pinned already, GT_ERR_OVERFLOW past
 * the capacity. */
GT_API GT_MUST_USE gt_status_t gt_wan_sec_pin(gt_wan_sec_t *sec, const gt_wan_peer_key_t *peer);

/* ---- handshake ------------------------------------------------------------------------- */

typedef enum { GT_WAN_HS_INITIATOR = 0, GT_WAN_HS_RESPONDER = 1 } gt_wan_hs_role_t;

/* Why a handshake failed (gt_wan_hs_info().reason). */
typedef enum {
    GT_WAN_HS_OK = 0,          /* no failure (yet) */
    GT_WAN_HS_MALFORMED,       /* wrong magic, version, type or length (GT_ERR_CORRUPT) */
    GT_WAN_HS_RUN_ID,          /* the peer belongs to another run (GT_ERR_AUTH) */
    GT_WAN_HS_UNKNOWN_KEY,     /* the initiator's static key is not pinned (GT_ERR_AUTH);
                                  info.peer_key holds it */
    GT_WAN_HS_WRONG_PEER,      /* a pinned key, but not the site we called or the site the
                                  peer claims to be (GT_ERR_AUTH) */
    GT_WAN_HS_BAD_TAG,         /* a message failed authentication: tampered, or the peer
                                  does not hold the key it claims (GT_ERR_AUTH) */
    GT_WAN_HS_BAD_KEY,         /* a low-order / all-zero X25519 point (GT_ERR_AUTH) */
    GT_WAN_HS_CIPHER_MISMATCH, /* the two ends' cipher settings cannot agree
                                  (GT_ERR_UNSUPPORTED) */
    GT_WAN_HS_STATE            /* a call out of order for this role/state (GT_ERR_INVALID) */
} gt_wan_hs_reason_t;

/* A short static description of a reason ("unknown static key"). */
GT_API const char *gt_wan_hs_reason_str(gt_wan_hs_reason_t reason);

typedef struct {
    gt_wan_hs_role_t role;
    gt_wan_hs_reason_t reason;            /* why it failed; GT_WAN_HS_OK while healthy */
    int have_peer_key;                    /* 1 once the peer's static key is known */
    uint8_t peer_key[GT_WAN_KEY_BYTES];   /* the peer's static key (also when unknown) */
    uint32_t peer_site_id;                /* valid once the key is known and pinned */
    char peer_name[GT_WAN_SITE_NAME_MAX]; /* "" when unknown */
    gt_wan_cipher_t cipher;               /* negotiated cipher, once msg2 is written/read */
    int done;                             /* 1 when gt_wan_hs_finish may be called */
} gt_wan_hs_info_t;

typedef struct gt_wan_hs gt_wan_hs_t;

/* Starts a handshake. An initiator names the site it calls (peer_site_id must be pinned,
 * else GT_ERR_NOT_FOUND); a responder passes GT_WAN_HS_ANY_PEER (or a site id to accept
 * only that site). Fresh ephemeral keys are made here. */
#define GT_WAN_HS_ANY_PEER UINT32_MAX
GT_API GT_MUST_USE gt_status_t gt_wan_hs_create(const gt_wan_sec_t *sec, gt_wan_hs_role_t role,
                                                uint32_t peer_site_id, gt_wan_hs_t **hs_p);
/* Wipes every secret (ephemeral keys, chaining key) and frees. Accepts NULL. */
GT_API void gt_wan_hs_destroy(gt_wan_hs_t *hs);

/* Every step below: on failure the handshake is dead (every later step returns
 * GT_ERR_INVALID), the reason is logged once with the peer's key in base64 where known and
 * kept in gt_wan_hs_info(), and no output parameter or output buffer is written. `out`
 * needs GT_WAN_HS_MSG_MAX bytes: a smaller out_cap returns GT_ERR_OVERFLOW, and NULL
 * arguments GT_ERR_INVALID, without changing the handshake (a caller bug, not a peer's). */

/* Initiator: writes msg1. */
GT_API GT_MUST_USE gt_status_t gt_wan_hs_initiator_start(gt_wan_hs_t *hs, void *out, size_t out_cap,
                                                         size_t *out_len_p);
/* Responder: reads msg1 (authenticates the initiator's static key against the pinned list)
 * and writes msg2. Cipher negotiation happens here: each side sends its setting and whether
 * it can run AES-256-GCM; two different concrete settings, or a concrete AES-256-GCM on one
 * side that the other cannot run, fail with GT_ERR_UNSUPPORTED (CIPHER_MISMATCH); auto on
 * both sides picks AES-256-GCM when both can run it, else XChaCha20-Poly1305. */
GT_API GT_MUST_USE gt_status_t gt_wan_hs_responder_read(gt_wan_hs_t *hs, const void *msg1,
                                                        size_t msg1_len, void *out, size_t out_cap,
                                                        size_t *out_len_p);
/* Initiator: reads msg2 (authenticates the responder, checks the chosen cipher is one our
 * setting allows) and writes msg3. After success the initiator is done. */
GT_API GT_MUST_USE gt_status_t gt_wan_hs_initiator_read(gt_wan_hs_t *hs, const void *msg2,
                                                        size_t msg2_len, void *out, size_t out_cap,
                                                        size_t *out_len_p);
/* Responder: reads msg3 (the initiator proves it holds its ephemeral and static secrets).
 * After success the responder is done. */
GT_API GT_MUST_USE gt_status_t gt_wan_hs_responder_confirm(gt_wan_hs_t *hs, const void *msg3,
                                                           size_t msg3_len);
/* Copies the handshake's state (peer identity, reason of failure, cipher). */
GT_API void gt_wan_hs_info(const gt_wan_hs_t *hs, gt_wan_hs_info_t *info_p);
/* Once done: derives the session (one key per direction) and wipes the handshake's secrets.
 * GT_ERR_INVALID before the handshake is done or after it failed. Call once. */
GT_API GT_MUST_USE gt_status_t gt_wan_hs_finish(gt_wan_hs_t *hs, gt_wan_session_t **session_p);

/* ---- session: sealing and opening frames ---------------------------------------------- */

/* Why open rejected a frame (gt_wan_session_last_reject). Every rejection increments the
 * matching counter; nothing is delivered. */
typedef enum {
    GT_WAN_REJECT_NONE = 0,
    GT_WAN_REJECT_AUTH,      /* bad tag: payload, tag, header or seq altered (GT_ERR_AUTH) */
    GT_WAN_REJECT_REPLAY,    /* seq is not the next expected one: a replay, a reorder or a
                                deleted frame (GT_ERR_AUTH, per gt_base.h) */
    GT_WAN_REJECT_TRUNCATED, /* fewer (or more) ciphertext bytes than the header's length
                                + tag, or less than a tag (GT_ERR_CORRUPT) */
    GT_WAN_REJECT_OVERSIZED  /* the header's length is above max_frame_bytes
                                (GT_ERR_OVERFLOW) */
} gt_wan_reject_t;

typedef struct {
    uint64_t sealed_frames, sealed_bytes; /* payload bytes */
    uint64_t opened_frames, opened_bytes; /* accepted only */
    uint64_t rejected_auth;
    uint64_t rejected_replay;
    uint64_t rejected_truncated;
    uint64_t rejected_oversized;
} gt_wan_session_stats_t;

/* Wipes both keys (sodium_memzero; the session lives in sodium_malloc'd memory) and frees.
 * Accepts NULL. */
GT_API void gt_wan_session_destroy(gt_wan_session_t *s);

/* The seq the next seal must use (starts at 0). */
GT_API uint64_t gt_wan_session_send_seq(const gt_wan_session_t *s);
/* The seq the next open will accept (starts at 0). */
GT_API uint64_t gt_wan_session_recv_seq(const gt_wan_session_t *s);

/* Seals pt[0..pt_len) into ct (ciphertext then tag, GT_WAN_SEAL_BOUND(pt_len) bytes, written
 * to *ct_len_p), authenticating ad[0..ad_len) (the frame header; may be empty) and `seq`.
 * ct may equal pt (in place); other overlaps are not allowed. Errors, with nothing written
 * and the counter unchanged: GT_ERR_INVALID when seq != gt_wan_session_send_seq(s) (a nonce
 * is never reused); GT_ERR_OVERFLOW when ct_cap is too small, pt_len is above the session's
 * max_frame_bytes, or the counter is exhausted (2^64 - 1 frames: reconnect). */
GT_API GT_MUST_USE gt_status_t gt_wan_session_seal(gt_wan_session_t *s, uint64_t seq,
                                                   const void *ad, size_t ad_len, const void *pt,
                                                   size_t pt_len, void *ct, size_t ct_cap,
                                                   size_t *ct_len_p);

/* Sealing on several threads (the channel's crypto pool). seal_reserve hands out the next
 * counter value (and counts the frame in the stats): each value exactly once, so a nonce is
 * never reused; GT_ERR_OVERFLOW when the counter is exhausted or pt_len is above the
 * session's max_frame_bytes. seal_reserved then seals with a reserved value, on any thread,
 * concurrently with other seals and opens of the session (it reads only the keys); it
 * refuses a value not yet handed out (GT_ERR_INVALID), and the caller seals each reserved
 * value once. Frames must reach the peer in counter order (the channel launches them so). */
GT_API GT_MUST_USE gt_status_t gt_wan_session_seal_reserve(gt_wan_session_t *s, size_t pt_len,
                                                           uint64_t *seq_p);
GT_API GT_MUST_USE gt_status_t gt_wan_session_seal_reserved(const gt_wan_session_t *s, uint64_t seq,
                                                            const void *ad, size_t ad_len,
                                                            const void *pt, size_t pt_len, void *ct,
                                                            size_t ct_cap, size_t *ct_len_p);

/* Opens a frame: `seq` and `declared_len` (payload bytes) come from the frame header, ad is
 * the header, ct[0..ct_len) what arrived. Checks, in this order, each counted in the stats
 * and remembered as the last reject:
 *   declared_len > max_frame_bytes                -> GT_ERR_OVERFLOW (OVERSIZED)
 *   ct_len != GT_WAN_SEAL_BOUND(declared_len)     -> GT_ERR_CORRUPT  (TRUNCATED)
 *   seq != gt_wan_session_recv_seq(s)             -> GT_ERR_AUTH     (REPLAY)
 *   the tag does not verify                       -> GT_ERR_AUTH     (AUTH)
 * GT_ERR_OVERFLOW (not counted) when pt_cap < declared_len. On success writes declared_len
 * bytes of plaintext to pt (pt may equal ct), sets *pt_len_p and advances the receive
 * counter. On any failure *pt_len_p is not set and the receive counter does not move; for
 * the checks before decryption pt is not touched at all, and for a bad tag libsodium
 * overwrites pt[0..declared_len) with zeros (it never leaves unauthenticated plaintext
 * behind). */
GT_API GT_MUST_USE gt_status_t gt_wan_session_open(gt_wan_session_t *s, uint64_t seq,
                                                   uint64_t declared_len, const void *ad,
                                                   size_t ad_len, const void *ct, size_t ct_len,
                                                   void *pt, size_t pt_cap, size_t *pt_len_p);

/* Opening on several threads, committed in order. open_detached verifies and decrypts a
 * frame with the nonce of `seq` on any thread (it reads only the keys and changes nothing in
 * the session): GT_OK, GT_ERR_AUTH for a bad tag (pt[0..declared_len) left zeroed), or,
 * uncounted, the length errors of open (GT_ERR_OVERFLOW, GT_ERR_CORRUPT, GT_ERR_INVALID). It
 * does NOT check the counter: the plaintext it wrote may not be delivered before
 * open_commit accepted the frame, and must be wiped when it does not. open_commit, on the
 * session's owner thread and in arrival order, runs open's checks in open's order with the
 * verification result from open_detached (oversized, truncated, replay against the receive
 * counter, then `verified`: GT_ERR_AUTH counts as a bad tag), counts a rejection exactly as
 * open does, and on success advances the receive counter. open_detached + open_commit
 * accept exactly the frames open accepts. */
GT_API GT_MUST_USE gt_status_t gt_wan_session_open_detached(const gt_wan_session_t *s, uint64_t seq,
                                                            uint64_t declared_len, const void *ad,
                                                            size_t ad_len, const void *ct,
                                                            size_t ct_len, void *pt, size_t pt_cap,
                                                            size_t *pt_len_p);
GT_API GT_MUST_USE gt_status_t gt_wan_session_open_commit(gt_wan_session_t *s, uint64_t seq,
                                                          uint64_t declared_len, size_t ct_len,
                                                          gt_status_t verified);

/* Counters (a copy). */
GT_API void gt_wan_session_stats(const gt_wan_session_t *s, gt_wan_session_stats_t *stats_p);
/* The reason of the most recent rejected open (GT_WAN_REJECT_NONE if none yet). */
GT_API gt_wan_reject_t gt_wan_session_last_reject(const gt_wan_session_t *s);
GT_API const char *gt_wan_reject_str(gt_wan_reject_t reject);
/* The negotiated cipher (never AUTO). */
GT_API gt_wan_cipher_t gt_wan_session_cipher(const gt_wan_session_t *s);
/* The peer's site id and name (the name is "" when the params gave none). */
GT_API uint32_t gt_wan_session_peer_id(const gt_wan_session_t *s);
GT_API const char *gt_wan_session_peer_name(const gt_wan_session_t *s);
/* The handshake hash: 32 bytes equal at both ends of one session and different for every
 * handshake (channel binding; also how tests see that keys are fresh). Not secret. */
GT_API void gt_wan_session_handshake_hash(const gt_wan_session_t *s, uint8_t hash_p[32]);

/* Moves the send and receive counters forward to tx_seq and rx_seq (for tests of counter
 * exhaustion and for resuming numbering; skipping never reuses a nonce). GT_ERR_INVALID if
 * either would move backwards. */
GT_API GT_MUST_USE gt_status_t gt_wan_session_skip_to(gt_wan_session_t *s, uint64_t tx_seq,
                                                      uint64_t rx_seq);

#ifdef __cplusplus
}
#endif

#endif /* GT_WAN_SECURE_INTERNAL_H */
