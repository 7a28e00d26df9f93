/* fuzz_secure.c — libFuzzer target for the secure channel's parsers of hostile bytes
 * (wan/channel/secure.c): handshake messages at both roles and sealed frames. Built only with
 * -DGT_FUZZ=ON and clang; run (docs/security.md):
 *   CC=clang cmake -S . -B build-fuzz -G Ninja -DGT_FUZZ=ON -DGT_SANITIZE=ON -DGT_CUDA=OFF
 *   ninja -C build-fuzz fuzz_secure
 *   build-fuzz/tests/wan_secure/fuzz_secure -max_total_time=60 -close_fd_mask=2
 *
 * The first input byte picks the target:
 *   0  responder reads the rest as msg1            must be refused, nothing written
 *   1  initiator (after msg1) reads the rest as msg2   must be refused
 *   2  a genuine handshake, then the responder reads the rest as msg3   must be refused
 *   3  open: seq (8 bytes), declared length (4), header length (1), header, ciphertext
 *      must be refused with exactly one counter up and nothing delivered
 *   4  round trip: seal the rest (header = its first byte's worth) and open it: equal
 * Any broken invariant aborts, which libFuzzer reports as a crash.
 */
#include "gt_wan.h"
#include "secure_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(cond)                                                                    \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                     \
        }                                                                                \
    } while (0)

static gt_wan_sec_t *sec_a, *sec_b;
static gt_wan_session_t *tx, *rx;
static uint8_t *scratch;

static gt_wan_sec_t *make(const gt_wan_keypair_t *me, uint32_t id, const gt_wan_keypair_t kp[2])
{
    gt_wan_peer_key_t peers[2] = {{0, "a", {0}}, {1, "b", {0}}};
    memcpy(peers[0].public_key, kp[0].public_key, GT_WAN_KEY_BYTES);
    memcpy(peers[1].public_key, kp[1].public_key, GT_WAN_KEY_BYTES);
    gt_wan_sec_params_t p = GT_WAN_SEC_PARAMS_INIT;
    p.local = me;
    p.local_site_id = id;
    p.peers = peers;
    p.n_peers = 2;
    p.run_id = "fuzz";
    p.run_id_len = 4;
    p.max_frame_bytes = 1 << 16;
    gt_wan_sec_t *sec = NULL;
    REQUIRE(gt_wan_sec_create(&p, &sec) == GT_OK);
    return sec;
}

/* A full handshake a -> b; returns the responder's handshake before msg3 when `stop3`. */
static void handshake(gt_wan_hs_t **hi_p, gt_wan_hs_t **hr_p, int stop3)
{
    uint8_t m1[GT_WAN_HS_MSG_MAX], m2[GT_WAN_HS_MSG_MAX], m3[GT_WAN_HS_MSG_MAX];
    size_t n1, n2, n3;
    REQUIRE(gt_wan_hs_create(sec_a, GT_WAN_HS_INITIATOR, 1, hi_p) == GT_OK);
    REQUIRE(gt_wan_hs_create(sec_b, GT_WAN_HS_RESPONDER, GT_WAN_HS_ANY_PEER, hr_p) == GT_OK);
    REQUIRE(gt_wan_hs_initiator_start(*hi_p, m1, sizeof m1, &n1) == GT_OK);
    REQUIRE(gt_wan_hs_responder_read(*hr_p, m1, n1, m2, sizeof m2, &n2) == GT_OK);
    REQUIRE(gt_wan_hs_initiator_read(*hi_p, m2, n2, m3, sizeof m3, &n3) == GT_OK);
    if (!stop3) REQUIRE(gt_wan_hs_responder_confirm(*hr_p, m3, n3) == GT_OK);
}

static void init_once(void)
{
    static gt_wan_keypair_t kp[2];
    gt_log_set_level(GT_LOG_ERROR); /* refusals still log; run with -close_fd_mask=2 */
    REQUIRE(gt_wan_secure_init() == GT_OK);
    REQUIRE(gt_wan_keypair_generate(&kp[0]) == GT_OK);
    REQUIRE(gt_wan_keypair_generate(&kp[1]) == GT_OK);
    sec_a = make(&kp[0], 0, kp);
    sec_b = make(&kp[1], 1, kp);
    gt_wan_hs_t *hi, *hr;
    handshake(&hi, &hr, 0);
    REQUIRE(gt_wan_hs_finish(hi, &tx) == GT_OK);
    REQUIRE(gt_wan_hs_finish(hr, &rx) == GT_OK);
    gt_wan_hs_destroy(hi);
    gt_wan_hs_destroy(hr);
    scratch = malloc(GT_WAN_SEAL_BOUND(1 << 16));
    REQUIRE(scratch);
}

static uint64_t rejected(const gt_wan_session_stats_t *s)
{
    return s->rejected_auth + s->rejected_replay + s->rejected_truncated + s->rejected_oversized;
}

static void fuzz_open(const uint8_t *d, size_t n)
{
    if (n < 13) return;
    uint64_t seq;
    uint32_t declared;
    memcpy(&seq, d, 8);
    memcpy(&declared, d + 8, 4);
    size_t ad_len = d[12];
    d += 13;
    n -= 13;
    if (ad_len > n) ad_len = n;
    /* sometimes ask for exactly the next counter so the tag check is reached */
    if (seq & 1) seq = gt_wan_session_recv_seq(rx);
    gt_wan_session_stats_t before, after;
    gt_wan_session_stats(rx, &before);
    uint64_t rseq = gt_wan_session_recv_seq(rx);
    size_t out_len = 0xdeadbeef;
    gt_status_t st = gt_wan_session_open(rx, seq, declared, d, ad_len, d + ad_len, n - ad_len,
                                         scratch, GT_WAN_SEAL_BOUND(1 << 16), &out_len);
    gt_wan_session_stats(rx, &after);
    REQUIRE(st != GT_OK); /* forging a tag is not something a fuzzer does */
    REQUIRE(out_len == 0xdeadbeef);
    REQUIRE(gt_wan_session_recv_seq(rx) == rseq);
    REQUIRE(rejected(&after) == rejected(&before) + 1);
    REQUIRE(after.opened_frames == before.opened_frames);
}

static void fuzz_round_trip(const uint8_t *d, size_t n)
{
    if (n < 1 || n > (1 << 16)) return;
    size_t ad_len = d[0] < n - 1 ? d[0] : n - 1;
    const uint8_t *ad = d + 1, *pt = d + 1 + ad_len;
    size_t pt_len = n - 1 - ad_len, ct_len = 0, out_len = 0;
    uint64_t seq = gt_wan_session_send_seq(tx);
    /* keep the receiver in step: skip it to the sender's counter */
    REQUIRE(gt_wan_session_skip_to(rx, gt_wan_session_send_seq(rx), seq) == GT_OK);
    REQUIRE(gt_wan_session_seal(tx, seq, ad, ad_len, pt, pt_len, scratch,
                                GT_WAN_SEAL_BOUND(1 << 16), &ct_len) == GT_OK);
    REQUIRE(ct_len == GT_WAN_SEAL_BOUND(pt_len));
    REQUIRE(gt_wan_session_open(rx, seq, pt_len, ad, ad_len, scratch, ct_len, scratch,
                                GT_WAN_SEAL_BOUND(1 << 16), &out_len) == GT_OK);
    REQUIRE(out_len == pt_len);
    REQUIRE(pt_len == 0 || memcmp(scratch, pt, pt_len) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        init_once();
        ready = 1;
    }
    if (size < 1) return 0;
    uint8_t out[GT_WAN_HS_MSG_MAX];
    size_t out_len = 0;
    gt_wan_hs_t *hi = NULL, *hr = NULL;
    const uint8_t *d = data + 1;
    size_t n = size - 1;
    switch (data[0] % 5) {
    case 0:
        REQUIRE(gt_wan_hs_create(sec_b, GT_WAN_HS_RESPONDER, GT_WAN_HS_ANY_PEER, &hr) == GT_OK);
        REQUIRE(gt_wan_hs_responder_read(hr, d, n, out, sizeof out, &out_len) != GT_OK);
        REQUIRE(out_len == 0);
        break;
    case 1: {
        uint8_t m1[GT_WAN_HS_MSG_MAX];
        size_t n1;
        REQUIRE(gt_wan_hs_create(sec_a, GT_WAN_HS_INITIATOR, 1, &hi) == GT_OK);
        REQUIRE(gt_wan_hs_initiator_start(hi, m1, sizeof m1, &n1) == GT_OK);
        REQUIRE(gt_wan_hs_initiator_read(hi, d, n, out, sizeof out, &out_len) != GT_OK);
        REQUIRE(out_len == 0);
        break;
    }
    case 2:
        handshake(&hi, &hr, 1);
        REQUIRE(gt_wan_hs_responder_confirm(hr, d, n) != GT_OK);
        break;
    case 3: fuzz_open(d, n); break;
    case 4: fuzz_round_trip(d, n); break;
    }
    gt_wan_hs_destroy(hi);
    gt_wan_hs_destroy(hr);
    return 0;
}
