/* secure.c — the secure channel's crypto: the handshake and frame sealing (docs/design.md §5,
 * docs/security.md). All of geotrain's cryptography outside key files lives here (STYLE.md
 * "Crypto").
 *
 * Handshake: a Noise-IK-shaped pattern built from libsodium primitives, with a third
 * key-confirmation message (the API and the message flow are in secure_internal.h; the
 * wire layout and the reasoning are in docs/security.md):
 *   msg1  I -> R   hdr, e, es, s, ss, {site, cipher setting, caps}
 *   msg2  R -> I   hdr, e, ee, se, {site, chosen cipher, caps}
 *   msg3  I -> R   hdr, {}                 (proves the initiator is live: needs ee and se)
 * Symmetric state as in Noise: h (transcript hash, BLAKE2b-256) and ck (chaining key);
 * MixKey(dh) = HKDF(ck, dh) with keyed BLAKE2b as the PRF; {x} = XChaCha20-Poly1305 under
 * the current k with h as associated data, then MixHash(ciphertext). The session keys are
 * HKDF(ck, h) after msg3, so they depend on every DH result and on the whole transcript
 * (run id, both static keys, both ephemerals, every header, the cipher choice).
 *
 * Frames: AES-256-GCM (precomputed key schedule, crypto_aead_aes256gcm_beforenm) or
 * XChaCha20-Poly1305-IETF, nonce = the 64-bit per-direction counter, the caller's header as
 * associated data, tag after the ciphertext.
 *
 * Secrets (static key copy, ephemerals, chaining key, session keys) live in sodium_malloc'd
 * memory (guard pages, mlock, wiped by sodium_free) and are wiped as soon as they are done.
 */
#include "secure_internal.h"

#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEC_MAGIC     0x53454331u /* "SEC1" */
#define HS_MAGIC      0x48534831u /* "HSH1" */
#define SESSION_MAGIC 0x53534e31u /* "SSN1" */

#define HS_PROTOCOL "geotrain-hs-1 Noise_IK+confirm_25519_XChaChaPoly_BLAKE2b"
#define HS_VERSION  1u
#define HS_HDR      16u /* "GTHS", version, type, 2 zero bytes, run id fingerprint (8) */
#define HS_TAG      crypto_aead_xchacha20poly1305_ietf_ABYTES
#define HS_PAYLOAD  8u /* site id (LE32), cipher, caps, 2 zero bytes */
#define HS_MSG1_LEN (HS_HDR + 32u + (32u + HS_TAG) + (HS_PAYLOAD + HS_TAG))
#define HS_MSG2_LEN (HS_HDR + 32u + (HS_PAYLOAD + HS_TAG))
#define HS_MSG3_LEN (HS_HDR + HS_TAG)
#define CAP_AES     0x01u

_Static_assert(HS_MSG1_LEN <= GT_WAN_HS_MSG_MAX, "msg1 must fit GT_WAN_HS_MSG_MAX");
_Static_assert(crypto_aead_aes256gcm_ABYTES == GT_WAN_SEAL_ABYTES, "tag size");
_Static_assert(crypto_aead_xchacha20poly1305_ietf_ABYTES == GT_WAN_SEAL_ABYTES, "tag size");
_Static_assert(crypto_scalarmult_BYTES == GT_WAN_KEY_BYTES, "X25519 sizes");

typedef struct {
    uint32_t site_id;
    char name[GT_WAN_SITE_NAME_MAX];
    uint8_t public_key[GT_WAN_KEY_BYTES];
} peer_t;

/* Lives in sodium_malloc'd memory: it holds the static secret. */
struct gt_wan_sec {
    uint32_t magic;
    gt_wan_keypair_t local;
    uint32_t local_site_id;
    char local_name[GT_WAN_SITE_NAME_MAX];
    size_t n_peers; /* read and grown atomically: gt_wan_sec_pin publishes an entry with it */
    size_t capacity;
    uint8_t run_id[GT_WAN_SEC_RUN_ID_MAX];
    size_t run_id_len;
    uint8_t run_fp[8]; /* BLAKE2b of the run id, sent in clear to diagnose a wrong run */
    gt_wan_cipher_t cipher;
    size_t max_frame;
    peer_t peers[]; /* capacity; inline, so no pointer hides in memory leak checkers skip */
};

enum { HS_I_START, HS_I_WAIT2, HS_R_WAIT1, HS_R_WAIT3, HS_DONE, HS_FAILED, HS_FINISHED };

struct gt_wan_hs {
    uint32_t magic;
    int state;
    gt_wan_hs_info_t info;
    /* copied from the sec context so it may go away */
    gt_wan_keypair_t s;
    uint32_t local_site_id;
    size_t n_peers;
    uint8_t run_id[GT_WAN_SEC_RUN_ID_MAX];
    size_t run_id_len;
    uint8_t run_fp[8];
    gt_wan_cipher_t setting;
    size_t max_frame;
    uint32_t want_peer;
    /* handshake state */
    uint8_t e_pk[32], e_sk[32]; /* our ephemeral */
    uint8_t re[32], rs[32];     /* the peer's ephemeral and static keys */
    uint8_t h[32], ck[32], k[32];
    uint64_t n;
    peer_t peers[]; /* n_peers, copied from the sec context */
};

/* Lives in sodium_malloc'd memory; the AES states come first so they are 16-aligned. */
struct gt_wan_session {
    crypto_aead_aes256gcm_state tx_aes, rx_aes;
    uint8_t tx_key[32], rx_key[32];
    uint32_t magic;
    gt_wan_cipher_t cipher;
    _Atomic uint64_t tx_seq; /* read by seal_reserved on worker threads */
    uint64_t rx_seq;
    size_t max_frame;
    gt_wan_session_stats_t stats;
    gt_wan_reject_t last_reject;
    uint32_t peer_id;
    char peer_name[GT_WAN_SITE_NAME_MAX];
    uint8_t hh[32];
};

/* ---- small helpers ---------------------------------------------------------------------- */

gt_status_t gt_wan_secure_init(void)
{
    if (sodium_init() < 0) {
        GT_ERROR("libsodium failed to initialise");
        return GT_ERR_INTERNAL;
    }
    return GT_OK;
}

/* sodium_malloc rounds nothing: keep sizes multiples of 64 so the (end-aligned) block is
 * aligned for the AES state. */
static void *secure_alloc(size_t size)
{
    void *p = sodium_malloc((size + 63) & ~(size_t)63);
    if (p) memset(p, 0, size);
    return p;
}

static void copy_name(char dst[GT_WAN_SITE_NAME_MAX], const char *src)
{
    dst[0] = '\0';
    if (src) {
        size_t n = strnlen(src, GT_WAN_SITE_NAME_MAX - 1);
        memcpy(dst, src, n);
        dst[n] = '\0';
    }
}

static int ranges_overlap(const void *a, size_t na, const void *b, size_t nb)
{
    uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
    return na && nb && pa < pb + nb && pb < pa + na;
}

int gt_wan_cipher_available(gt_wan_cipher_t cipher)
{
    if (gt_wan_secure_init() != GT_OK) return 0;
    switch (cipher) {
    case GT_WAN_CIPHER_AUTO:
    case GT_WAN_CIPHER_XCHACHA20POLY1305: return 1;
    case GT_WAN_CIPHER_AES256GCM: return crypto_aead_aes256gcm_is_available() ? 1 : 0;
    }
    return 0;
}

gt_wan_cipher_t gt_wan_cipher_local_choice(gt_wan_cipher_t cipher)
{
    if (cipher != GT_WAN_CIPHER_AUTO) return cipher;
    return gt_wan_cipher_available(GT_WAN_CIPHER_AES256GCM) ? GT_WAN_CIPHER_AES256GCM
                                                            : GT_WAN_CIPHER_XCHACHA20POLY1305;
}

const char *gt_wan_cipher_name(gt_wan_cipher_t cipher)
{
    switch (cipher) {
    case GT_WAN_CIPHER_AUTO: return "auto";
    case GT_WAN_CIPHER_AES256GCM: return "aes256gcm";
    case GT_WAN_CIPHER_XCHACHA20POLY1305: return "xchacha20poly1305";
    }
    return "?";
}

gt_status_t gt_wan_cipher_parse(const char *name, gt_wan_cipher_t *cipher_p)
{
    static const gt_wan_cipher_t all[] = {GT_WAN_CIPHER_AUTO, GT_WAN_CIPHER_AES256GCM,
                                          GT_WAN_CIPHER_XCHACHA20POLY1305};
    if (!name || !cipher_p) return GT_ERR_INVALID;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(name, gt_wan_cipher_name(all[i])) == 0) {
            *cipher_p = all[i];
            return GT_OK;
        }
    return GT_ERR_INVALID;
}

static int cipher_valid(gt_wan_cipher_t c)
{
    return c == GT_WAN_CIPHER_AUTO || c == GT_WAN_CIPHER_AES256GCM ||
           c == GT_WAN_CIPHER_XCHACHA20POLY1305;
}

/* ---- the site's context ---------------------------------------------------------------- */

gt_status_t gt_wan_sec_create(const gt_wan_sec_params_t *params, gt_wan_sec_t **sec_p)
{
    gt_status_t st = gt_wan_secure_init();
    gt_wan_sec_t *sec = NULL;
    if (st != GT_OK) return st;
    if (!params || !sec_p || !params->local || (params->n_peers && !params->peers) ||
        !params->run_id || params->run_id_len == 0 || params->run_id_len > GT_WAN_SEC_RUN_ID_MAX ||
        !cipher_valid(params->cipher) || params->max_frame_bytes > GT_WAN_SEC_MAX_FRAME_LIMIT ||
        params->n_peers > GT_WAN_SEC_MAX_PEERS) {
        GT_ERROR("secure channel: invalid parameters (key pair, run id of 1..%u bytes, "
                 "cipher, max frame <= %zu bytes, at most %u peers)",
                 GT_WAN_SEC_RUN_ID_MAX, (size_t)GT_WAN_SEC_MAX_FRAME_LIMIT, GT_WAN_SEC_MAX_PEERS);
        return GT_ERR_INVALID;
    }
    for (size_t i = 0; i < params->n_peers; i++)
        for (size_t j = i + 1; j < params->n_peers; j++)
            if (params->peers[i].site_id == params->peers[j].site_id ||
                sodium_memcmp(params->peers[i].public_key, params->peers[j].public_key,
                              GT_WAN_KEY_BYTES) == 0) {
                GT_ERROR("secure channel: sites %u and %u share a site id or a public key",
                         params->peers[i].site_id, params->peers[j].site_id);
                return GT_ERR_INVALID;
            }
    if (params->cipher == GT_WAN_CIPHER_AES256GCM &&
        !gt_wan_cipher_available(GT_WAN_CIPHER_AES256GCM)) {
        GT_ERROR("security.cipher is aes256gcm but this CPU has no AES-NI/PCLMUL; use auto or "
                 "xchacha20poly1305");
        return GT_ERR_UNSUPPORTED;
    }

    size_t capacity = params->capacity > params->n_peers ? params->capacity : params->n_peers;
    if (capacity > GT_WAN_SEC_MAX_PEERS) capacity = GT_WAN_SEC_MAX_PEERS;
    sec = secure_alloc(sizeof *sec + capacity * sizeof(peer_t));
    if (!sec) return GT_ERR_NOMEM;
    sec->capacity = capacity;
    sec->magic = SEC_MAGIC;
    memcpy(&sec->local, params->local, sizeof sec->local);
    sec->local_site_id = params->local_site_id;
    copy_name(sec->local_name, params->local_name);
    for (size_t i = 0; i < params->n_peers; i++) {
        sec->peers[i].site_id = params->peers[i].site_id;
        copy_name(sec->peers[i].name, params->peers[i].name);
        memcpy(sec->peers[i].public_key, params->peers[i].public_key, GT_WAN_KEY_BYTES);
    }
    sec->n_peers = params->n_peers;
    memcpy(sec->run_id, params->run_id, params->run_id_len);
    sec->run_id_len = params->run_id_len;
    crypto_generichash(sec->run_fp, sizeof sec->run_fp, sec->run_id, sec->run_id_len, NULL, 0);
    sec->cipher = params->cipher;
    sec->max_frame =
        params->max_frame_bytes ? params->max_frame_bytes : GT_WAN_SEC_MAX_FRAME_DEFAULT;
    *sec_p = sec;
    return GT_OK;
}

gt_status_t gt_wan_sec_pin(gt_wan_sec_t *sec, const gt_wan_peer_key_t *peer)
{
    if (!sec || sec->magic != SEC_MAGIC || !peer) return GT_ERR_INVALID;
    size_t n = __atomic_load_n(&sec->n_peers, __ATOMIC_ACQUIRE);
    for (size_t i = 0; i < n; i++)
        if (sec->peers[i].site_id == peer->site_id ||
            sodium_memcmp(sec->peers[i].public_key, peer->public_key, GT_WAN_KEY_BYTES) == 0) {
            GT_ERROR("secure channel: site %u's key: that site id or key is pinned already",
                     peer->site_id);
            return GT_ERR_INVALID;
        }
    if (n >= sec->capacity) return GT_ERR_OVERFLOW;
    sec->peers[n].site_id = peer->site_id;
    copy_name(sec->peers[n].name, peer->name);
    memcpy(sec->peers[n].public_key, peer->public_key, GT_WAN_KEY_BYTES);
    __atomic_store_n(&sec->n_peers, n + 1, __ATOMIC_RELEASE); /* the entry above first */
    return GT_OK;
}

void gt_wan_sec_destroy(gt_wan_sec_t *sec)
{
    if (!sec) return;
    sec->magic = 0;
    sodium_free(sec); /* wipes the static secret */
}

/* ---- Noise-style symmetric state ------------------------------------------------------- */

/* HKDF with keyed BLAKE2b-256 as the PRF: temp = PRF(ck, ikm); out1 = PRF(temp, 0x01);
 * out2 = PRF(temp, out1 || 0x02). */
static void hkdf2(const uint8_t ck[32], const uint8_t *ikm, size_t ikm_len, uint8_t out1[32],
                  uint8_t out2[32])
{
    uint8_t temp[32], buf[33];
    crypto_generichash(temp, 32, ikm, ikm_len, ck, 32);
    buf[0] = 0x01;
    crypto_generichash(out1, 32, buf, 1, temp, 32);
    memcpy(buf, out1, 32);
    buf[32] = 0x02;
    crypto_generichash(out2, 32, buf, 33, temp, 32);
    sodium_memzero(temp, sizeof temp);
    sodium_memzero(buf, sizeof buf);
}

static void mix_hash(gt_wan_hs_t *hs, const void *data, size_t len)
{
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, 32);
    crypto_generichash_update(&st, hs->h, 32);
    crypto_generichash_update(&st, data, len);
    crypto_generichash_final(&st, hs->h, 32);
}

static void mix_key(gt_wan_hs_t *hs, const uint8_t dh[32])
{
    uint8_t ck[32];
    hkdf2(hs->ck, dh, 32, ck, hs->k);
    memcpy(hs->ck, ck, 32);
    sodium_memzero(ck, sizeof ck);
    hs->n = 0;
}

/* X25519; fails on a low-order point (an all-zero shared secret). */
static gt_status_t mix_dh(gt_wan_hs_t *hs, const uint8_t sk[32], const uint8_t pk[32])
{
    uint8_t dh[32];
    if (crypto_scalarmult(dh, sk, pk) != 0) {
        sodium_memzero(dh, sizeof dh);
        hs->info.reason = GT_WAN_HS_BAD_KEY;
        return GT_ERR_AUTH;
    }
    mix_key(hs, dh);
    sodium_memzero(dh, sizeof dh);
    return GT_OK;
}

static void hs_nonce(const gt_wan_hs_t *hs,
                     uint8_t nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES])
{
    memset(nonce, 0, crypto_aead_xchacha20poly1305_ietf_NPUBBYTES);
    for (int i = 0; i < 8; i++) nonce[i] = (uint8_t)(hs->n >> (8 * i));
}

static void encrypt_and_hash(gt_wan_hs_t *hs, const uint8_t *pt, size_t len, uint8_t *out)
{
    uint8_t nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES];
    hs_nonce(hs, nonce);
    crypto_aead_xchacha20poly1305_ietf_encrypt(out, NULL, pt, len, hs->h, 32, NULL, nonce, hs->k);
    hs->n++;
    mix_hash(hs, out, len + HS_TAG);
}

static gt_status_t decrypt_and_hash(gt_wan_hs_t *hs, const uint8_t *ct, size_t len, uint8_t *out)
{
    uint8_t nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES];
    hs_nonce(hs, nonce);
    if (crypto_aead_xchacha20poly1305_ietf_decrypt(out, NULL, NULL, ct, len + HS_TAG, hs->h, 32,
                                                   nonce, hs->k) != 0) {
        hs->info.reason = GT_WAN_HS_BAD_TAG;
        return GT_ERR_AUTH;
    }
    hs->n++;
    mix_hash(hs, ct, len + HS_TAG);
    return GT_OK;
}

/* h = HASH(protocol name); ck = h; MixHash(run id); MixHash(responder's static key). */
static void hs_init_symmetric(gt_wan_hs_t *hs, const uint8_t responder_static[32])
{
    crypto_generichash(hs->h, 32, (const uint8_t *)HS_PROTOCOL, strlen(HS_PROTOCOL), NULL, 0);
    memcpy(hs->ck, hs->h, 32);
    mix_hash(hs, hs->run_id, hs->run_id_len);
    mix_hash(hs, responder_static, 32);
}

static void hs_write_header(const gt_wan_hs_t *hs, uint8_t type, uint8_t *out)
{
    memcpy(out, "GTHS", 4);
    out[4] = HS_VERSION;
    out[5] = type;
    out[6] = out[7] = 0;
    memcpy(out + 8, hs->run_fp, 8);
}

static gt_status_t hs_check_header(gt_wan_hs_t *hs, uint8_t type, const uint8_t *msg, size_t len,
                                   size_t want_len)
{
    if (!msg || len != want_len || memcmp(msg, "GTHS", 4) != 0 || msg[4] != HS_VERSION ||
        msg[5] != type || msg[6] != 0 || msg[7] != 0) {
        hs->info.reason = GT_WAN_HS_MALFORMED;
        return GT_ERR_CORRUPT;
    }
    if (memcmp(msg + 8, hs->run_fp, 8) != 0) {
        hs->info.reason = GT_WAN_HS_RUN_ID;
        return GT_ERR_AUTH;
    }
    return GT_OK;
}

static void hs_payload(const gt_wan_hs_t *hs, gt_wan_cipher_t cipher, uint8_t out[HS_PAYLOAD])
{
    memset(out, 0, HS_PAYLOAD);
    gt_le_put32(out, hs->local_site_id);
    out[4] = (uint8_t)cipher;
    out[5] = gt_wan_cipher_available(GT_WAN_CIPHER_AES256GCM) ? CAP_AES : 0;
}

static const peer_t *find_peer_by_key(const gt_wan_hs_t *hs, const uint8_t key[32])
{
    for (size_t i = 0; i < hs->n_peers; i++)
        if (sodium_memcmp(hs->peers[i].public_key, key, 32) == 0) return &hs->peers[i];
    return NULL;
}

static const peer_t *find_peer_by_id(const gt_wan_hs_t *hs, uint32_t id)
{
    for (size_t i = 0; i < hs->n_peers; i++)
        if (hs->peers[i].site_id == id) return &hs->peers[i];
    return NULL;
}

/* The cipher both settings allow, or -1. `mine`/`theirs` are settings (auto or concrete),
 * `*_aes` whether each end can run AES-256-GCM. */
static int negotiate(gt_wan_cipher_t mine, int mine_aes, gt_wan_cipher_t theirs, int theirs_aes)
{
    if (mine != GT_WAN_CIPHER_AUTO && theirs != GT_WAN_CIPHER_AUTO && mine != theirs) return -1;
    gt_wan_cipher_t want = mine != GT_WAN_CIPHER_AUTO ? mine : theirs;
    if (want == GT_WAN_CIPHER_AUTO)
        return (mine_aes && theirs_aes) ? GT_WAN_CIPHER_AES256GCM : GT_WAN_CIPHER_XCHACHA20POLY1305;
    if (want == GT_WAN_CIPHER_AES256GCM && !(mine_aes && theirs_aes)) return -1;
    return (int)want;
}

/* ---- handshake ------------------------------------------------------------------------- */

const char *gt_wan_hs_reason_str(gt_wan_hs_reason_t reason)
{
    switch (reason) {
    case GT_WAN_HS_OK: return "no failure";
    case GT_WAN_HS_MALFORMED: return "malformed handshake message";
    case GT_WAN_HS_RUN_ID: return "the peer belongs to a different run (run id mismatch)";
    case GT_WAN_HS_UNKNOWN_KEY: return "unknown static key (not pinned in sites.yaml)";
    case GT_WAN_HS_WRONG_PEER: return "the key belongs to a different site than expected";
    case GT_WAN_HS_BAD_TAG:
        return "authentication failed (tampered message, or the peer lacks the key it claims)";
    case GT_WAN_HS_BAD_KEY: return "invalid X25519 public key (low order point)";
    case GT_WAN_HS_CIPHER_MISMATCH: return "the two sites' security.cipher settings disagree";
    case GT_WAN_HS_STATE: return "handshake step called out of order";
    }
    return "?";
}

gt_status_t gt_wan_hs_create(const gt_wan_sec_t *sec, gt_wan_hs_role_t role, uint32_t peer_site_id,
                             gt_wan_hs_t **hs_p)
{
    if (!sec || sec->magic != SEC_MAGIC || !hs_p ||
        (role != GT_WAN_HS_INITIATOR && role != GT_WAN_HS_RESPONDER))
        return GT_ERR_INVALID;
    size_t n_peers = __atomic_load_n(&sec->n_peers, __ATOMIC_ACQUIRE); /* gt_wan_sec_pin */
    gt_wan_hs_t *hs = secure_alloc(sizeof *hs + n_peers * sizeof(peer_t));
    if (!hs) return GT_ERR_NOMEM;
    if (n_peers) memcpy(hs->peers, sec->peers, n_peers * sizeof(peer_t));
    hs->n_peers = n_peers;
    hs->magic = HS_MAGIC;
    hs->info.role = role;
    hs->info.peer_site_id = GT_WAN_HS_ANY_PEER;
    hs->info.cipher = GT_WAN_CIPHER_AUTO;
    memcpy(&hs->s, &sec->local, sizeof hs->s);
    hs->local_site_id = sec->local_site_id;
    memcpy(hs->run_id, sec->run_id, sec->run_id_len);
    hs->run_id_len = sec->run_id_len;
    memcpy(hs->run_fp, sec->run_fp, 8);
    hs->setting = sec->cipher;
    hs->max_frame = sec->max_frame;
    hs->want_peer = peer_site_id;
    if (role == GT_WAN_HS_INITIATOR) {
        const peer_t *p = find_peer_by_id(hs, peer_site_id);
        if (!p) {
            GT_ERROR("secure channel: no pinned public key for site %u", peer_site_id);
            gt_wan_hs_destroy(hs);
            return GT_ERR_NOT_FOUND;
        }
        memcpy(hs->rs, p->public_key, 32);
        hs->info.have_peer_key = 1;
        memcpy(hs->info.peer_key, p->public_key, 32);
        hs->info.peer_site_id = p->site_id;
        copy_name(hs->info.peer_name, p->name);
        hs->state = HS_I_START;
    } else {
        hs->state = HS_R_WAIT1;
    }
    crypto_box_keypair(hs->e_pk, hs->e_sk); /* fresh X25519 ephemeral */
    *hs_p = hs;
    return GT_OK;
}

void gt_wan_hs_destroy(gt_wan_hs_t *hs)
{
    if (!hs) return;
    hs->magic = 0;
    sodium_free(hs); /* wipes e_sk, s, ck, k */
}

void gt_wan_hs_info(const gt_wan_hs_t *hs, gt_wan_hs_info_t *info_p)
{
    if (!hs || !info_p) return;
    *info_p = hs->info;
}

/* Enters the failed state: wipes the secrets, logs once. Returns st. */
static gt_status_t hs_fail_detail(gt_wan_hs_t *hs, gt_status_t st, const char *step,
                                  const char *detail)
{
    char b64[GT_WAN_KEY_B64_LEN + 1] = "(unknown)";
    if (hs->info.reason == GT_WAN_HS_OK) hs->info.reason = GT_WAN_HS_STATE;
    if (hs->info.have_peer_key) gt_wan_key_to_base64(hs->info.peer_key, b64);
    GT_ERROR("secure handshake (%s, %s): %s%s%s; peer site %s, static key %s",
             hs->info.role == GT_WAN_HS_INITIATOR ? "initiator" : "responder", step,
             gt_wan_hs_reason_str(hs->info.reason), detail ? ": " : "", detail ? detail : "",
             hs->info.peer_name[0] ? hs->info.peer_name : "(unknown)", b64);
    hs->state = HS_FAILED;
    sodium_memzero(hs->e_sk, sizeof hs->e_sk);
    sodium_memzero(&hs->s, sizeof hs->s);
    sodium_memzero(hs->ck, sizeof hs->ck);
    sodium_memzero(hs->k, sizeof hs->k);
    return st;
}

static gt_status_t hs_fail(gt_wan_hs_t *hs, gt_status_t st, const char *step)
{
    return hs_fail_detail(hs, st, step, NULL);
}

/* A step called in the wrong state: a dead handshake stays dead with its first reason. */
static gt_status_t hs_wrong_state(gt_wan_hs_t *hs, const char *step)
{
    if (hs->state == HS_FAILED) return GT_ERR_INVALID;
    hs->info.reason = GT_WAN_HS_STATE;
    return hs_fail(hs, GT_ERR_INVALID, step);
}

gt_status_t gt_wan_hs_initiator_start(gt_wan_hs_t *hs, void *out, size_t out_cap, size_t *out_len_p)
{
    uint8_t msg[HS_MSG1_LEN], payload[HS_PAYLOAD];
    gt_status_t st;
    if (!hs || hs->magic != HS_MAGIC || !out || !out_len_p) return GT_ERR_INVALID;
    if (hs->state != HS_I_START) return hs_wrong_state(hs, "msg1");
    if (out_cap < HS_MSG1_LEN) return GT_ERR_OVERFLOW;

    hs_init_symmetric(hs, hs->rs);
    hs_write_header(hs, 1, msg);
    mix_hash(hs, msg, HS_HDR);
    memcpy(msg + HS_HDR, hs->e_pk, 32); /* e */
    mix_hash(hs, hs->e_pk, 32);
    st = mix_dh(hs, hs->e_sk, hs->rs); /* es */
    if (st != GT_OK) return hs_fail(hs, st, "msg1");
    encrypt_and_hash(hs, hs->s.public_key, 32, msg + HS_HDR + 32); /* s */
    st = mix_dh(hs, hs->s.secret_key, hs->rs);                     /* ss */
    if (st != GT_OK) return hs_fail(hs, st, "msg1");
    hs_payload(hs, hs->setting, payload);
    encrypt_and_hash(hs, payload, HS_PAYLOAD, msg + HS_HDR + 32 + 32 + HS_TAG);

    memcpy(out, msg, HS_MSG1_LEN);
    *out_len_p = HS_MSG1_LEN;
    hs->state = HS_I_WAIT2;
    return GT_OK;
}

gt_status_t gt_wan_hs_responder_read(gt_wan_hs_t *hs, const void *msg1, size_t msg1_len, void *out,
                                     size_t out_cap, size_t *out_len_p)
{
    const uint8_t *in = msg1;
    uint8_t payload[HS_PAYLOAD], msg[HS_MSG2_LEN];
    gt_status_t st;
    if (!hs || hs->magic != HS_MAGIC || !out || !out_len_p) return GT_ERR_INVALID;
    if (hs->state != HS_R_WAIT1) return hs_wrong_state(hs, "msg1");
    if (out_cap < HS_MSG2_LEN) return GT_ERR_OVERFLOW;

    st = hs_check_header(hs, 1, in, msg1_len, HS_MSG1_LEN);
    if (st != GT_OK) return hs_fail(hs, st, "msg1");
    hs_init_symmetric(hs, hs->s.public_key);
    mix_hash(hs, in, HS_HDR);
    memcpy(hs->re, in + HS_HDR, 32); /* e */
    mix_hash(hs, hs->re, 32);
    st = mix_dh(hs, hs->s.secret_key, hs->re); /* es */
    if (st != GT_OK) return hs_fail(hs, st, "msg1");
    st = decrypt_and_hash(hs, in + HS_HDR + 32, 32, hs->rs); /* s */
    if (st != GT_OK) return hs_fail(hs, st, "msg1");
    hs->info.have_peer_key = 1;
    memcpy(hs->info.peer_key, hs->rs, 32);
    st = mix_dh(hs, hs->s.secret_key, hs->rs); /* ss */
    if (st != GT_OK) return hs_fail(hs, st, "msg1");
    /* The payload decrypts only if the initiator holds the secret of the key it sent, so an
     * "unknown key" below names a key the caller really has. */
    st = decrypt_and_hash(hs, in + HS_HDR + 64 + HS_TAG, HS_PAYLOAD, payload);
    if (st != GT_OK) return hs_fail(hs, st, "msg1");

    const peer_t *p = find_peer_by_key(hs, hs->rs);
    if (!p) {
        hs->info.reason = GT_WAN_HS_UNKNOWN_KEY;
        return hs_fail(hs, GT_ERR_AUTH, "msg1");
    }
    hs->info.peer_site_id = p->site_id;
    copy_name(hs->info.peer_name, p->name);
    if (gt_le_get32(payload) != p->site_id ||
        (hs->want_peer != GT_WAN_HS_ANY_PEER && hs->want_peer != p->site_id)) {
        hs->info.reason = GT_WAN_HS_WRONG_PEER;
        return hs_fail(hs, GT_ERR_AUTH, "msg1");
    }
    int chosen = negotiate(hs->setting, gt_wan_cipher_available(GT_WAN_CIPHER_AES256GCM),
                           (gt_wan_cipher_t)payload[4], (payload[5] & CAP_AES) != 0);
    if (payload[4] > GT_WAN_CIPHER_XCHACHA20POLY1305 || chosen < 0) {
        char detail[160];
        snprintf(detail, sizeof detail, "ours %s (AES-NI %s), theirs %s (AES-NI %s)",
                 gt_wan_cipher_name(hs->setting),
                 gt_wan_cipher_available(GT_WAN_CIPHER_AES256GCM) ? "yes" : "no",
                 gt_wan_cipher_name((gt_wan_cipher_t)payload[4]),
                 (payload[5] & CAP_AES) ? "yes" : "no");
        hs->info.reason = GT_WAN_HS_CIPHER_MISMATCH;
        return hs_fail_detail(hs, GT_ERR_UNSUPPORTED, "msg1", detail);
    }
    hs->info.cipher = (gt_wan_cipher_t)chosen;

    hs_write_header(hs, 2, msg);
    mix_hash(hs, msg, HS_HDR);
    memcpy(msg + HS_HDR, hs->e_pk, 32); /* e */
    mix_hash(hs, hs->e_pk, 32);
    st = mix_dh(hs, hs->e_sk, hs->re); /* ee */
    if (st != GT_OK) return hs_fail(hs, st, "msg2");
    st = mix_dh(hs, hs->e_sk, hs->rs); /* se */
    if (st != GT_OK) return hs_fail(hs, st, "msg2");
    hs_payload(hs, hs->info.cipher, payload);
    encrypt_and_hash(hs, payload, HS_PAYLOAD, msg + HS_HDR + 32);

    memcpy(out, msg, HS_MSG2_LEN);
    *out_len_p = HS_MSG2_LEN;
    hs->state = HS_R_WAIT3;
    return GT_OK;
}

gt_status_t gt_wan_hs_initiator_read(gt_wan_hs_t *hs, const void *msg2, size_t msg2_len, void *out,
                                     size_t out_cap, size_t *out_len_p)
{
    const uint8_t *in = msg2;
    uint8_t payload[HS_PAYLOAD], msg[HS_MSG3_LEN];
    gt_status_t st;
    if (!hs || hs->magic != HS_MAGIC || !out || !out_len_p) return GT_ERR_INVALID;
    if (hs->state != HS_I_WAIT2) return hs_wrong_state(hs, "msg2");
    if (out_cap < HS_MSG3_LEN) return GT_ERR_OVERFLOW;

    st = hs_check_header(hs, 2, in, msg2_len, HS_MSG2_LEN);
    if (st != GT_OK) return hs_fail(hs, st, "msg2");
    mix_hash(hs, in, HS_HDR);
    memcpy(hs->re, in + HS_HDR, 32); /* e */
    mix_hash(hs, hs->re, 32);
    st = mix_dh(hs, hs->e_sk, hs->re); /* ee */
    if (st != GT_OK) return hs_fail(hs, st, "msg2");
    st = mix_dh(hs, hs->s.secret_key, hs->re); /* se */
    if (st != GT_OK) return hs_fail(hs, st, "msg2");
    st = decrypt_and_hash(hs, in + HS_HDR + 32, HS_PAYLOAD, payload);
    if (st != GT_OK) return hs_fail(hs, st, "msg2");
    if (gt_le_get32(payload) != hs->info.peer_site_id) {
        hs->info.reason = GT_WAN_HS_WRONG_PEER;
        return hs_fail(hs, GT_ERR_AUTH, "msg2");
    }
    /* The responder chose; accept only what our own setting and machine allow. */
    gt_wan_cipher_t c = (gt_wan_cipher_t)payload[4];
    int expect = negotiate(hs->setting, gt_wan_cipher_available(GT_WAN_CIPHER_AES256GCM),
                           c == GT_WAN_CIPHER_AUTO ? GT_WAN_CIPHER_XCHACHA20POLY1305 : c,
                           (payload[5] & CAP_AES) != 0);
    if (c == GT_WAN_CIPHER_AUTO || payload[4] > GT_WAN_CIPHER_XCHACHA20POLY1305 ||
        expect != (int)c) {
        hs->info.reason = GT_WAN_HS_CIPHER_MISMATCH;
        return hs_fail(hs, GT_ERR_UNSUPPORTED, "msg2");
    }
    hs->info.cipher = c;

    hs_write_header(hs, 3, msg);
    mix_hash(hs, msg, HS_HDR);
    encrypt_and_hash(hs, NULL, 0, msg + HS_HDR);

    memcpy(out, msg, HS_MSG3_LEN);
    *out_len_p = HS_MSG3_LEN;
    hs->state = HS_DONE;
    hs->info.done = 1;
    return GT_OK;
}

gt_status_t gt_wan_hs_responder_confirm(gt_wan_hs_t *hs, const void *msg3, size_t msg3_len)
{
    const uint8_t *in = msg3;
    gt_status_t st;
    if (!hs || hs->magic != HS_MAGIC) return GT_ERR_INVALID;
    if (hs->state != HS_R_WAIT3) return hs_wrong_state(hs, "msg3");
    st = hs_check_header(hs, 3, in, msg3_len, HS_MSG3_LEN);
    if (st != GT_OK) return hs_fail(hs, st, "msg3");
    mix_hash(hs, in, HS_HDR);
    st = decrypt_and_hash(hs, in + HS_HDR, 0, NULL);
    if (st != GT_OK) return hs_fail(hs, st, "msg3");
    hs->state = HS_DONE;
    hs->info.done = 1;
    return GT_OK;
}

static gt_status_t session_new(gt_wan_cipher_t cipher, const uint8_t tx_key[32],
                               const uint8_t rx_key[32], size_t max_frame, gt_wan_session_t **s_p)
{
    gt_wan_session_t *s = secure_alloc(sizeof *s);
    if (!s) return GT_ERR_NOMEM;
    s->magic = SESSION_MAGIC;
    s->cipher = cipher;
    memcpy(s->tx_key, tx_key, 32);
    memcpy(s->rx_key, rx_key, 32);
    if (cipher == GT_WAN_CIPHER_AES256GCM) {
        crypto_aead_aes256gcm_beforenm(&s->tx_aes, s->tx_key);
        crypto_aead_aes256gcm_beforenm(&s->rx_aes, s->rx_key);
    }
    s->max_frame = max_frame;
    s->peer_id = GT_WAN_HS_ANY_PEER;
    *s_p = s;
    return GT_OK;
}

gt_status_t gt_wan_hs_finish(gt_wan_hs_t *hs, gt_wan_session_t **session_p)
{
    uint8_t k_i2r[32], k_r2i[32];
    gt_wan_session_t *s = NULL;
    if (!hs || hs->magic != HS_MAGIC || !session_p) return GT_ERR_INVALID;
    if (hs->state != HS_DONE) return hs_wrong_state(hs, "finish");
    hkdf2(hs->ck, hs->h, 32, k_i2r, k_r2i);
    int init = hs->info.role == GT_WAN_HS_INITIATOR;
    gt_status_t st =
        session_new(hs->info.cipher, init ? k_i2r : k_r2i, init ? k_r2i : k_i2r, hs->max_frame, &s);
    sodium_memzero(k_i2r, sizeof k_i2r);
    sodium_memzero(k_r2i, sizeof k_r2i);
    if (st != GT_OK) return st;
    s->peer_id = hs->info.peer_site_id;
    memcpy(s->peer_name, hs->info.peer_name, sizeof s->peer_name);
    memcpy(s->hh, hs->h, 32);
    hs->state = HS_FINISHED;
    sodium_memzero(hs->e_sk, sizeof hs->e_sk);
    sodium_memzero(&hs->s, sizeof hs->s);
    sodium_memzero(hs->ck, sizeof hs->ck);
    sodium_memzero(hs->k, sizeof hs->k);
    *session_p = s;
    return GT_OK;
}

/* ---- sessions: frames ------------------------------------------------------------------ */

void gt_wan_session_destroy(gt_wan_session_t *s)
{
    if (!s) return;
    s->magic = 0;
    sodium_free(s); /* wipes both keys and AES key schedules */
}

uint64_t gt_wan_session_send_seq(const gt_wan_session_t *s)
{
    return s ? s->tx_seq : 0;
}
uint64_t gt_wan_session_recv_seq(const gt_wan_session_t *s)
{
    return s ? s->rx_seq : 0;
}

/* AES-GCM: 96-bit nonce = 4 zero bytes then the counter, little endian (as Noise does).
 * XChaCha20: 192-bit nonce = the counter, little endian, then zeros. */
static void frame_nonce(uint64_t seq, uint8_t nonce[24])
{
    memset(nonce, 0, 24);
    for (int i = 0; i < 8; i++) nonce[i] = (uint8_t)(seq >> (8 * i));
}

/* The AEAD itself, with the nonce of `seq`: reads only the session's keys (set once at
 * creation), so any number of threads may run it on one session at once. */
static void seal_core(const gt_wan_session_t *s, uint64_t seq, const void *ad, size_t ad_len,
                      const void *pt, size_t pt_len, uint8_t *c)
{
    uint8_t nonce[24];
    frame_nonce(seq, nonce);
    if (s->cipher == GT_WAN_CIPHER_AES256GCM) {
        uint8_t n12[crypto_aead_aes256gcm_NPUBBYTES] = {0};
        memcpy(n12 + 4, nonce, 8);
        crypto_aead_aes256gcm_encrypt_detached_afternm(c, c + pt_len, NULL, pt, pt_len, ad, ad_len,
                                                       NULL, n12, &s->tx_aes);
    } else {
        crypto_aead_xchacha20poly1305_ietf_encrypt_detached(c, c + pt_len, NULL, pt, pt_len, ad,
                                                            ad_len, NULL, nonce, s->tx_key);
    }
}

/* Argument checks shared by seal and seal_reserved (the counter is checked by each). */
static gt_status_t seal_args(const gt_wan_session_t *s, const void *ad, size_t ad_len,
                             const void *pt, size_t pt_len, const void *ct, size_t ct_cap,
                             const size_t *ct_len_p)
{
    if (!s || s->magic != SESSION_MAGIC || !ct || !ct_len_p || (pt_len && !pt) || (ad_len && !ad))
        return GT_ERR_INVALID;
    if (pt_len > s->max_frame || ct_cap < GT_WAN_SEAL_BOUND(pt_len)) return GT_ERR_OVERFLOW;
    if (ct != pt && ranges_overlap(ct, GT_WAN_SEAL_BOUND(pt_len), pt, pt_len))
        return GT_ERR_INVALID;
    return GT_OK;
}

gt_status_t gt_wan_session_seal(gt_wan_session_t *s, uint64_t seq, const void *ad, size_t ad_len,
                                const void *pt, size_t pt_len, void *ct, size_t ct_cap,
                                size_t *ct_len_p)
{
    if (!s || s->magic != SESSION_MAGIC) return GT_ERR_INVALID;
    if (seq != s->tx_seq) {
        GT_ERROR("secure channel to %s: seal with seq %llu, expected %llu (a nonce is never "
                 "reused)",
                 s->peer_name, (unsigned long long)seq, (unsigned long long)s->tx_seq);
        return GT_ERR_INVALID;
    }
    if (seq == UINT64_MAX) {
        GT_ERROR("secure channel to %s: send counter exhausted; reconnect", s->peer_name);
        return GT_ERR_OVERFLOW;
    }
    gt_status_t st = seal_args(s, ad, ad_len, pt, pt_len, ct, ct_cap, ct_len_p);
    if (st != GT_OK) return st;
    seal_core(s, seq, ad, ad_len, pt, pt_len, ct);
    s->tx_seq++;
    s->stats.sealed_frames++;
    s->stats.sealed_bytes += pt_len;
    *ct_len_p = GT_WAN_SEAL_BOUND(pt_len);
    return GT_OK;
}

gt_status_t gt_wan_session_seal_reserve(gt_wan_session_t *s, size_t pt_len, uint64_t *seq_p)
{
    if (!s || s->magic != SESSION_MAGIC || !seq_p) return GT_ERR_INVALID;
    if (s->tx_seq == UINT64_MAX) {
        GT_ERROR("secure channel to %s: send counter exhausted; reconnect", s->peer_name);
        return GT_ERR_OVERFLOW;
    }
    if (pt_len > s->max_frame) return GT_ERR_OVERFLOW;
    *seq_p = s->tx_seq++;
    s->stats.sealed_frames++;
    s->stats.sealed_bytes += pt_len;
    return GT_OK;
}

gt_status_t gt_wan_session_seal_reserved(const gt_wan_session_t *s, uint64_t seq, const void *ad,
                                         size_t ad_len, const void *pt, size_t pt_len, void *ct,
                                         size_t ct_cap, size_t *ct_len_p)
{
    gt_status_t st = seal_args(s, ad, ad_len, pt, pt_len, ct, ct_cap, ct_len_p);
    if (st != GT_OK) return st;
    /* Only a counter value already handed out by seal_reserve: never one a later seal or
     * reservation could also use. */
    if (seq >= s->tx_seq) {
        GT_ERROR("secure channel to %s: seal with seq %llu that was not reserved", s->peer_name,
                 (unsigned long long)seq);
        return GT_ERR_INVALID;
    }
    seal_core(s, seq, ad, ad_len, pt, pt_len, ct);
    *ct_len_p = GT_WAN_SEAL_BOUND(pt_len);
    return GT_OK;
}

static gt_status_t reject(gt_wan_session_t *s, gt_wan_reject_t why, gt_status_t st, uint64_t seq)
{
    uint64_t *counter = why == GT_WAN_REJECT_AUTH        ? &s->stats.rejected_auth
                        : why == GT_WAN_REJECT_REPLAY    ? &s->stats.rejected_replay
                        : why == GT_WAN_REJECT_TRUNCATED ? &s->stats.rejected_truncated
                                                         : &s->stats.rejected_oversized;
    /* Log the first few of each kind, then every 1000th: a hostile peer must not be able
     * to flood the log. */
    if (*counter < 3 || *counter % 1000 == 0)
        GT_WARN("secure channel from %s: frame seq %llu rejected: %s (%llu so far)",
                s->peer_name[0] ? s->peer_name : "?", (unsigned long long)seq,
                gt_wan_reject_str(why), (unsigned long long)*counter + 1);
    (*counter)++;
    s->last_reject = why;
    return st;
}

/* The AEAD check and decryption with the nonce of `seq`; reads only the keys. 0 when the
 * tag verifies; otherwise libsodium leaves pt[0..n) zeroed. */
static int open_core(const gt_wan_session_t *s, uint64_t seq, const void *ad, size_t ad_len,
                     const uint8_t *c, size_t n, void *pt)
{
    uint8_t nonce[24];
    frame_nonce(seq, nonce);
    if (s->cipher == GT_WAN_CIPHER_AES256GCM) {
        uint8_t n12[crypto_aead_aes256gcm_NPUBBYTES] = {0};
        memcpy(n12 + 4, nonce, 8);
        return crypto_aead_aes256gcm_decrypt_detached_afternm(pt, NULL, c, n, c + n, ad, ad_len,
                                                              n12, &s->rx_aes);
    }
    return crypto_aead_xchacha20poly1305_ietf_decrypt_detached(pt, NULL, c, n, c + n, ad, ad_len,
                                                               nonce, s->rx_key);
}

gt_status_t gt_wan_session_open(gt_wan_session_t *s, uint64_t seq, uint64_t declared_len,
                                const void *ad, size_t ad_len, const void *ct, size_t ct_len,
                                void *pt, size_t pt_cap, size_t *pt_len_p)
{
    if (!s || s->magic != SESSION_MAGIC || !pt_len_p || (ct_len && !ct) || (ad_len && !ad))
        return GT_ERR_INVALID;
    if (declared_len > s->max_frame)
        return reject(s, GT_WAN_REJECT_OVERSIZED, GT_ERR_OVERFLOW, seq);
    if (ct_len != GT_WAN_SEAL_BOUND(declared_len))
        return reject(s, GT_WAN_REJECT_TRUNCATED, GT_ERR_CORRUPT, seq);
    if (seq != s->rx_seq) return reject(s, GT_WAN_REJECT_REPLAY, GT_ERR_AUTH, seq);
    size_t n = (size_t)declared_len;
    if (pt_cap < n || (n && !pt)) return GT_ERR_OVERFLOW;
    if (pt != ct && ranges_overlap(pt, n, ct, ct_len)) return GT_ERR_INVALID;
    if (open_core(s, seq, ad, ad_len, ct, n, pt) != 0)
        return reject(s, GT_WAN_REJECT_AUTH, GT_ERR_AUTH, seq);
    s->rx_seq++;
    s->stats.opened_frames++;
    s->stats.opened_bytes += n;
    *pt_len_p = n;
    return GT_OK;
}

gt_status_t gt_wan_session_open_detached(const gt_wan_session_t *s, uint64_t seq,
                                         uint64_t declared_len, const void *ad, size_t ad_len,
                                         const void *ct, size_t ct_len, void *pt, size_t pt_cap,
                                         size_t *pt_len_p)
{
    if (!s || s->magic != SESSION_MAGIC || !pt_len_p || (ct_len && !ct) || (ad_len && !ad))
        return GT_ERR_INVALID;
    if (declared_len > s->max_frame) return GT_ERR_OVERFLOW;
    if (ct_len != GT_WAN_SEAL_BOUND(declared_len)) return GT_ERR_CORRUPT;
    size_t n = (size_t)declared_len;
    if (pt_cap < n || (n && !pt)) return GT_ERR_OVERFLOW;
    if (pt != ct && ranges_overlap(pt, n, ct, ct_len)) return GT_ERR_INVALID;
    if (open_core(s, seq, ad, ad_len, ct, n, pt) != 0) return GT_ERR_AUTH;
    *pt_len_p = n;
    return GT_OK;
}

gt_status_t gt_wan_session_open_commit(gt_wan_session_t *s, uint64_t seq, uint64_t declared_len,
                                       size_t ct_len, gt_status_t verified)
{
    if (!s || s->magic != SESSION_MAGIC) return GT_ERR_INVALID;
    if (declared_len > s->max_frame)
        return reject(s, GT_WAN_REJECT_OVERSIZED, GT_ERR_OVERFLOW, seq);
    if (ct_len != GT_WAN_SEAL_BOUND(declared_len))
        return reject(s, GT_WAN_REJECT_TRUNCATED, GT_ERR_CORRUPT, seq);
    if (seq != s->rx_seq) return reject(s, GT_WAN_REJECT_REPLAY, GT_ERR_AUTH, seq);
    if (verified == GT_ERR_AUTH) return reject(s, GT_WAN_REJECT_AUTH, GT_ERR_AUTH, seq);
    if (verified != GT_OK) return verified;
    s->rx_seq++;
    s->stats.opened_frames++;
    s->stats.opened_bytes += declared_len;
    return GT_OK;
}

void gt_wan_session_stats(const gt_wan_session_t *s, gt_wan_session_stats_t *stats_p)
{
    if (s && stats_p) *stats_p = s->stats;
}

gt_wan_reject_t gt_wan_session_last_reject(const gt_wan_session_t *s)
{
    return s ? s->last_reject : GT_WAN_REJECT_NONE;
}

const char *gt_wan_reject_str(gt_wan_reject_t reject)
{
    switch (reject) {
    case GT_WAN_REJECT_NONE: return "none";
    case GT_WAN_REJECT_AUTH: return "bad tag (altered payload, tag or header)";
    case GT_WAN_REJECT_REPLAY: return "replayed or out-of-order counter";
    case GT_WAN_REJECT_TRUNCATED: return "truncated frame (length does not match the header)";
    case GT_WAN_REJECT_OVERSIZED: return "oversized length";
    }
    return "?";
}

gt_wan_cipher_t gt_wan_session_cipher(const gt_wan_session_t *s)
{
    return s ? s->cipher : GT_WAN_CIPHER_AUTO;
}

uint32_t gt_wan_session_peer_id(const gt_wan_session_t *s)
{
    return s ? s->peer_id : GT_WAN_HS_ANY_PEER;
}

const char *gt_wan_session_peer_name(const gt_wan_session_t *s)
{
    return s ? s->peer_name : "";
}

void gt_wan_session_handshake_hash(const gt_wan_session_t *s, uint8_t hash_p[32])
{
    if (s && hash_p) memcpy(hash_p, s->hh, 32);
}

gt_status_t gt_wan_session_skip_to(gt_wan_session_t *s, uint64_t tx_seq, uint64_t rx_seq)
{
    if (!s || s->magic != SESSION_MAGIC || tx_seq < s->tx_seq || rx_seq < s->rx_seq)
        return GT_ERR_INVALID;
    s->tx_seq = tx_seq;
    s->rx_seq = rx_seq;
    return GT_OK;
}

/* ---- one-core seal/open rates ---------------------------------------------------------- */

static gt_status_t bench_rate(gt_wan_cipher_t cipher, size_t size, double seconds, int open,
                              double *mbps_p)
{
    uint8_t key[32];
    uint8_t *pt = NULL, *ct = NULL;
    gt_wan_session_t *tx = NULL, *rx = NULL;
    gt_status_t st = gt_wan_secure_init();
    if (st != GT_OK) return st;
    if (!mbps_p || size == 0 || size > GT_WAN_SEC_MAX_FRAME_LIMIT || !(seconds >= 0.0) ||
        !cipher_valid(cipher))
        return GT_ERR_INVALID;
    cipher = gt_wan_cipher_local_choice(cipher);
    if (!gt_wan_cipher_available(cipher)) return GT_ERR_UNSUPPORTED;
    randombytes_buf(key, sizeof key);
    st = session_new(cipher, key, key, size, &tx);
    if (st == GT_OK) st = session_new(cipher, key, key, size, &rx);
    sodium_memzero(key, sizeof key);
    pt = malloc(size);
    ct = malloc(GT_WAN_SEAL_BOUND(size));
    if (st == GT_OK && (!pt || !ct)) st = GT_ERR_NOMEM;
    if (st != GT_OK) goto out;
    randombytes_buf(pt, size);

    const uint8_t ad[64] = {0};
    uint64_t t0 = gt_time_ns(), t = t0, bytes = 0;
    uint64_t budget = (uint64_t)(seconds * 1e9);
    size_t n = 0;
    do {
        if (!open || bytes == 0) { /* open needs a fresh sealed frame per seq */
            st = gt_wan_session_seal(tx, tx->tx_seq, ad, sizeof ad, pt, size, ct,
                                     GT_WAN_SEAL_BOUND(size), &n);
            if (st != GT_OK) goto out;
        }
        if (open) {
            /* Open the one sealed frame again and again: rewind the receive counter (only
             * this benchmark may touch it). */
            rx->rx_seq = tx->tx_seq - 1;
            st = gt_wan_session_open(rx, rx->rx_seq, size, ad, sizeof ad, ct, n, pt, size, &n);
            if (st != GT_OK) goto out;
            n = GT_WAN_SEAL_BOUND(size);
        }
        bytes += size;
        t = gt_time_ns();
    } while (t - t0 < budget);
    *mbps_p = (double)bytes / ((double)(t - t0) * 1e-9) / 1e6;
out:
    free(pt);
    free(ct);
    gt_wan_session_destroy(tx);
    gt_wan_session_destroy(rx);
    return st;
}

gt_status_t gt_wan_secure_bench_seal_rate(gt_wan_cipher_t cipher, size_t size, double seconds,
                                          double *mbps_p)
{
    return bench_rate(cipher, size, seconds, 0, mbps_p);
}

gt_status_t gt_wan_secure_bench_open_rate(gt_wan_cipher_t cipher, size_t size, double seconds,
                                          double *mbps_p)
{
    return bench_rate(cipher, size, seconds, 1, mbps_p);
}
