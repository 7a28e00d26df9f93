/* test_diloco_live.c — the liveness watch's bookkeeping (diloco/outer_step.c, probe.c), without
 * a network: an answer to a liveness probe (a PROBE_INFO of kind PROBE_LIVE) marks its sender
 * heard only while the watch watches it, and nothing else marks it — not an answer of another
 * kind, nor a malformed one (wrong size, magic, kind or status: each rejected and counted, as
 * are malformed PROBE and START payloads); a reachability answer counts only with the id asked;
 * dl_heard_first puts the peers heard from within three heartbeats (or not watched) first, in
 * their order, and returns how many — all of them when none is (a fetch must still go
 * somewhere). The payloads are written here byte by byte from the layout in
 * diloco_internal.h, as a peer would send them. */
#include "diloco_internal.h"
#include "gt_test.h"

#include <stdlib.h>
#include <string.h>

static void deliver(struct dl_group *gr, uint8_t type, uint32_t sender, const uint8_t *b,
                    size_t len)
{
    gt_wan_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = type;
    m.sender = sender;
    dl_on_probe(gr, &m, b, len);
}

/* A PROBE_INFO without a body (a liveness or reachability answer), its fields as given. */
static void answer_as(struct dl_group *gr, uint32_t sender, uint32_t magic, uint32_t kind,
                      uint64_t id, uint32_t status, size_t len)
{
    uint8_t b[PROBE_INFO_HDR + 8] = {0};
    gt_le_put32(b, magic);
    gt_le_put32(b + 4, kind);
    gt_le_put64(b + 8, id);
    gt_le_put32(b + 16, status);
    deliver(gr, GT_WAN_MSG_PROBE_INFO, sender, b, len);
}

static void answer(struct dl_group *gr, uint32_t sender, uint32_t kind)
{
    answer_as(gr, sender, PROBE_INFO_MAGIC, kind, 0, PROBE_TRAINING, PROBE_INFO_HDR);
}

static void check_order(gt_diloco_t *d, const uint32_t *in, uint32_t n, const uint32_t *want,
                        uint32_t want_n)
{
    uint32_t p[8];
    memcpy(p, in, n * sizeof *p);
    CHECK_EQ_INT(dl_heard_first(d, p, n), want_n);
    for (uint32_t k = 0; k < n; k++) CHECK_EQ_INT(p[k], want[k]);
}

int main(void)
{
    gt_diloco_t *d = calloc(1, sizeof *d);
    gt_topo_config_t *cfg = calloc(1, sizeof *cfg);
    CHECK(d && cfg);
    if (!d || !cfg) return GT_TEST_DONE();
    cfg->membership.heartbeat_ms = 100; /* "lately": within 300 ms */
    cfg->n_sites = 5;
    d->cfg = cfg;
    d->name = "test";
    pthread_mutex_init(&d->lock, NULL);
    struct dl_group gr;
    memset(&gr, 0, sizeof gr);
    gr.d = d;

    uint64_t now = gt_time_ns(), sec = 1000000000ull;
    for (uint32_t i = 1; i < 5; i++) d->live_from_ns[i] = now - 2 * sec; /* site 0: unwatched */
    /* answers: from a watched site (heard), an unwatched one (ignored), another kind (ignored) */
    answer(&gr, 1, PROBE_LIVE);
    answer(&gr, 0, PROBE_LIVE);
    answer(&gr, 2, PROBE_REACH);
    CHECK(d->heard_ns[1] >= now);
    CHECK_EQ_INT(d->heard_ns[0], 0);
    CHECK_EQ_INT(d->heard_ns[2], 0);
    CHECK_EQ_INT(d->bad_messages, 0);
    /* malformed liveness answers from a watched site: rejected, counted, and not heard */
    answer_as(&gr, 2, PROBE_INFO_MAGIC, PROBE_LIVE, 0, PROBE_TRAINING, PROBE_INFO_HDR - 1);
    answer_as(&gr, 2, PROBE_INFO_MAGIC, PROBE_LIVE, 0, PROBE_TRAINING, PROBE_INFO_HDR + 8);
    answer_as(&gr, 2, PROBE_MAGIC, PROBE_LIVE, 0, PROBE_TRAINING, PROBE_INFO_HDR);
    answer_as(&gr, 2, PROBE_INFO_MAGIC, 0, 0, PROBE_TRAINING, PROBE_INFO_HDR);
    answer_as(&gr, 2, PROBE_INFO_MAGIC, 7, 0, PROBE_TRAINING, PROBE_INFO_HDR);
    answer_as(&gr, 2, PROBE_INFO_MAGIC, PROBE_LIVE, 0, 9, PROBE_INFO_HDR);
    answer_as(&gr, 2, PROBE_INFO_MAGIC, PROBE_JOIN, 0, PROBE_TRAINING,
              PROBE_INFO_HDR); /* no body */
    CHECK_EQ_INT(d->heard_ns[2], 0);
    CHECK_EQ_INT(d->bad_messages, 7);
    /* the partition rule's answers count with the id of the probe sent, from a site asked */
    d->reach_id = 5;
    d->reach_asked[3] = d->reach_asked[4] = 1;
    answer_as(&gr, 3, PROBE_INFO_MAGIC, PROBE_REACH, 4, PROBE_TRAINING, PROBE_INFO_HDR);
    CHECK_EQ_INT(d->reach_got[3], 0);
    answer_as(&gr, 3, PROBE_INFO_MAGIC, PROBE_REACH, 5, PROBE_BUSY, PROBE_INFO_HDR);
    answer_as(&gr, 1, PROBE_INFO_MAGIC, PROBE_REACH, 5, PROBE_TRAINING, PROBE_INFO_HDR);
    CHECK_EQ_INT(d->reach_got[3], 1); /* even "busy": it answers */
    CHECK_EQ_INT(d->reach_got[1], 0); /* not asked */
    CHECK_EQ_INT(d->reach_got[4], 0);
    CHECK_EQ_INT(d->bad_messages, 7);
    /* malformed probes and START payloads: rejected and counted (nothing is answered) */
    uint8_t p[START_BYTES + 8] = {0};
    gt_le_put32(p, PROBE_MAGIC);
    gt_le_put32(p + 4, PROBE_LIVE);
    deliver(&gr, GT_WAN_MSG_PROBE, 1, p, PROBE_BYTES + 1);
    gt_le_put32(p + 4, 0);
    deliver(&gr, GT_WAN_MSG_PROBE, 1, p, PROBE_BYTES);
    gt_le_put32(p, PROBE_INFO_MAGIC);
    gt_le_put32(p + 4, PROBE_LIVE);
    deliver(&gr, GT_WAN_MSG_PROBE, 1, p, PROBE_BYTES);
    CHECK_EQ_INT(d->bad_messages, 10);
    memset(p, 0, sizeof p);
    gt_le_put32(p, START_MAGIC);
    gt_le_put64(p + 8, 1234);
    gt_le_put64(p + 16, 0xABCDull);
    deliver(&gr, GT_WAN_MSG_START, 1, p, START_BYTES - 8); /* version 2's 16-byte hello */
    deliver(&gr, GT_WAN_MSG_START, 0, p, START_BYTES);     /* from ourselves */
    deliver(&gr, GT_WAN_MSG_START, 9, p, START_BYTES);     /* from no site */
    CHECK_EQ_INT(d->bad_messages, 13);
    CHECK_EQ_INT(d->hello_got[1], 0);
    deliver(&gr, GT_WAN_MSG_START, 1, p, START_BYTES);
    CHECK_EQ_INT(d->hello_got[1], 1);
    CHECK_EQ_INT(d->hello_params[1], 1234);
    CHECK_EQ_INT(d->hello_hash[1], 0xABCD);
    gt_le_put32(p, START_MAGIC ^ 1);
    deliver(&gr, GT_WAN_MSG_START, 2, p, START_BYTES);
    CHECK_EQ_INT(d->hello_got[2], 0);
    CHECK_EQ_INT(d->bad_messages, 14);
    d->heard_ns[3] = now - sec; /* heard, but not lately */

    /* heard lately (1) or unwatched (0) first, in the order given; then the rest in theirs */
    const uint32_t a[] = {4, 3, 1, 2, 0}, a_want[] = {1, 0, 4, 3, 2};
    check_order(d, a, 5, a_want, 2);
    const uint32_t b[] = {0, 1}, b_want[] = {0, 1};
    check_order(d, b, 2, b_want, 2);
    /* none heard lately: all of them, as given */
    const uint32_t c[] = {3, 2, 4}, c_want[] = {3, 2, 4};
    check_order(d, c, 3, c_want, 3);
    /* 2 answers now: it comes first */
    answer(&gr, 2, PROBE_LIVE);
    const uint32_t e[] = {3, 2, 4}, e_want[] = {2, 3, 4};
    check_order(d, e, 3, e_want, 1);
    /* out of range senders are ignored, not written */
    answer(&gr, GT_OUTER_MAX_SITES + 3, PROBE_LIVE);
    CHECK_EQ_INT(d->bad_messages, 14);

    pthread_mutex_destroy(&d->lock);
    free(cfg);
    free(d);
    return GT_TEST_DONE();
}
