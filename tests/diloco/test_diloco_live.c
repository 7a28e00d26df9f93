/* test_diloco_live.c — the liveness watch's bookkeeping (diloco/outer_step.c, state.c), without
 * a network: an answer to a liveness probe (a STATE_CHUNK echoing STATE_LIVE_ID) marks its
 * sender heard only while the watch watches it, and nothing else marks it; dl_heard_first puts
 * the peers heard from within three heartbeats (or not watched) first, in their order, and
 * returns how many — all of them when none is (a fetch must still go somewhere). */
#include "diloco_internal.h"
#include "gt_test.h"

#include <stdlib.h>
#include <string.h>

static void answer(struct dl_group *gr, uint32_t sender, uint64_t id)
{
    gt_wan_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = GT_WAN_MSG_STATE_CHUNK;
    m.round = STATE_PROBE;
    m.view_epoch = id;
    m.sender = sender;
    uint8_t hdr[STATE_HDR] = {0};
    dl_on_state(gr, &m, hdr, sizeof hdr);
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
    d->cfg = cfg;
    pthread_mutex_init(&d->lock, NULL);
    struct dl_group gr;
    memset(&gr, 0, sizeof gr);
    gr.d = d;

    uint64_t now = gt_time_ns(), sec = 1000000000ull;
    for (uint32_t i = 1; i < 5; i++) d->live_from_ns[i] = now - 2 * sec; /* site 0: unwatched */
    /* answers: from a watched site (heard), an unwatched one (ignored), another id (ignored) */
    answer(&gr, 1, STATE_LIVE_ID);
    answer(&gr, 0, STATE_LIVE_ID);
    answer(&gr, 2, STATE_LIVE_ID ^ 1);
    CHECK(d->heard_ns[1] >= now);
    CHECK_EQ_INT(d->heard_ns[0], 0);
    CHECK_EQ_INT(d->heard_ns[2], 0);
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
    answer(&gr, 2, STATE_LIVE_ID);
    const uint32_t e[] = {3, 2, 4}, e_want[] = {2, 3, 4};
    check_order(d, e, 3, e_want, 1);
    /* out of range senders are ignored, not written */
    answer(&gr, GT_OUTER_MAX_SITES + 3, STATE_LIVE_ID);

    pthread_mutex_destroy(&d->lock);
    free(cfg);
    free(d);
    return GT_TEST_DONE();
}
