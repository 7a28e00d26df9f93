/* test_outer.c — the outer-round protocol with several sites in one process: messages go
 * through an in-memory network the test controls (delivery order, loss, a dead site), so every
 * property is checked deterministically: identical results at every site, the weighted mean,
 * NaN rejection, norm clipping, late contributions folded or dropped (and counted), owner loss
 * with re-sends, result forwarding, the anchor-hash vote, hostile payloads, and a site that
 * joins (restarts) mid-run with a round already in flight. */
#include "gt_test.h"
#include "gt_outer.h"
#include "gt_wan.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define MAXS     4
#define N_PARAMS 5000

typedef struct {
    uint32_t src, dst;
    gt_wan_msg_t msg;
    uint8_t *buf;
    size_t len;
} qmsg_t;

static qmsg_t *g_q;
static size_t g_qn, g_qcap;
static int g_dead[MAXS];
static int g_block_to[MAXS];  /* drop messages to this site (it is "dying") */
static int g_cut[MAXS][MAXS]; /* drop messages from site i to site j (a cut link) */
static uint64_t g_now = 1000000000ull;

typedef struct {
    uint32_t self;
} io_ctx_t;

static gt_status_t q_send(void *ctx, uint32_t dst, const gt_wan_msg_t *msg, const void *buf,
                          size_t len)
{
    io_ctx_t *io = ctx;
    if (g_dead[io->self]) return GT_ERR_PEER_LOST;
    if (g_qn == g_qcap) {
        g_qcap = g_qcap ? 2 * g_qcap : 64;
        g_q = realloc(g_q, g_qcap * sizeof *g_q);
    }
    qmsg_t *q = &g_q[g_qn++];
    q->src = io->self;
    q->dst = dst;
    q->msg = *msg;
    q->buf = malloc(len);
    memcpy(q->buf, buf, len);
    q->len = len;
    return GT_OK;
}

/* The io's reachable(): a cut link is unreachable (set only where g_reach_known). */
static int g_reach_known;
static int q_reachable(void *ctx, uint32_t site)
{
    io_ctx_t *io = ctx;
    return !g_cut[io->self][site];
}

static gt_outer_t *g_o[MAXS];
static io_ctx_t g_io[MAXS];

/* Delivers the messages queued so far (what they cause is queued for the next pump). */
static void pump(void)
{
    qmsg_t *q = g_q;
    size_t n = g_qn;
    g_q = NULL;
    g_qn = g_qcap = 0;
    for (size_t i = 0; i < n; i++) {
        if (!g_dead[q[i].dst] && !g_dead[q[i].src] && !g_block_to[q[i].dst] &&
            !g_cut[q[i].src][q[i].dst])
            gt_outer_deliver(g_o[q[i].dst], &q[i].msg, q[i].buf, q[i].len, g_now);
        free(q[i].buf);
    }
    free(q);
}

static gt_outer_params_t g_params[MAXS];
static uint32_t g_handover_ms; /* params.handover_ms of the engines setup creates */
static uint32_t g_hold_mask;   /* bit s: site s's engine takes results with gt_outer_result_hold */

static void setup(uint32_t n, gt_cmp_codec_t codec, int ef, double quorum, int late_fold,
                  double clip_k)
{
    memset(g_dead, 0, sizeof g_dead);
    memset(g_block_to, 0, sizeof g_block_to);
    memset(g_cut, 0, sizeof g_cut);
    for (uint32_t s = 0; s < n; s++) {
        gt_outer_params_t p;
        memset(&p, 0, sizeof p);
        p.site_id = s;
        p.n_sites = n;
        p.n_params = N_PARAMS;
        p.n_lanes = 3;
        gt_cmp_params_t cp = GT_CMP_PARAMS_INIT;
        cp.codec = codec;
        cp.error_feedback = ef;
        cp.block_size = 64;
        p.codec = cp;
        p.quorum = quorum;
        p.deadline_min_ms = 100;
        p.deadline_max_ms = 100;
        p.deadline_mad_k = 4;
        p.clip_k = clip_k;
        p.late_fold = late_fold;
        p.handover_ms = g_handover_ms;
        p.hold_results = (int)(g_hold_mask >> s & 1);
        g_io[s].self = s;
        p.io.ctx = &g_io[s];
        p.io.send = q_send;
        p.io.reachable = g_reach_known ? q_reachable : NULL;
        g_params[s] = p;
        CHECK_EQ_INT(gt_outer_create(&p, &g_o[s]), GT_OK);
    }
}

static void teardown(uint32_t n)
{
    pump();
    for (uint32_t s = 0; s < n; s++) {
        gt_outer_destroy(g_o[s]);
        g_o[s] = NULL;
    }
}

static uint64_t rng = 88172645463325252ull;
static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float g_delta[MAXS][N_PARAMS];
static float g_res[MAXS][N_PARAMS];

static void make_deltas(uint32_t n)
{
    for (uint32_t s = 0; s < n; s++)
        for (size_t i = 0; i < N_PARAMS; i++) g_delta[s][i] = 0.01f * frand();
}

/* All live sites hold a complete, bit-identical result for `round`. */
static void check_identical(uint32_t n, uint64_t round)
{
    int first = -1;
    for (uint32_t s = 0; s < n; s++) {
        if (g_dead[s]) continue;
        CHECK_MSG(gt_outer_result(g_o[s], round, g_res[s]) == GT_OK,
                  "site %u has no result for round %llu", s, (unsigned long long)round);
        if (first < 0)
            first = (int)s;
        else
            CHECK(memcmp(g_res[first], g_res[s], sizeof g_res[s]) == 0);
    }
}

static void test_mean_exact(void)
{
    const uint32_t n = 3;
    setup(n, GT_CMP_FP32, 0, 1.0, 1, 0);
    make_deltas(n);
    const double w[3] = {100, 200, 300};
    for (uint32_t s = 0; s < n; s++)
        CHECK_EQ_INT(gt_outer_submit(g_o[s], 0, g_delta[s], w[s], 0, g_now), GT_OK);
    CHECK_EQ_INT(gt_outer_result(g_o[0], 0, g_res[0]), GT_ERR_AGAIN); /* nothing delivered */
    pump();
    pump();
    check_identical(n, 0);
    for (size_t i = 0; i < N_PARAMS; i++) {
        double ref = (w[0] * g_delta[0][i] + w[1] * g_delta[1][i] + w[2] * g_delta[2][i]) / 600.0;
        CHECK_CLOSE(g_res[1][i], ref, 1e-9, 1e-6);
    }
    gt_outer_stats_t st[3];
    uint64_t on_time = 0;
    for (uint32_t s = 0; s < n; s++) {
        gt_outer_stats(g_o[s], &st[s]);
        on_time += st[s].on_time;
    }
    /* 3 lanes x 3 chunks, 3 contributions each. */
    CHECK_EQ_INT(on_time, 27);
    CHECK_EQ_INT(st[0].late + st[0].dropped + st[0].rejected, 0);
    teardown(n);
}

static void test_int8_identical_and_close(void)
{
    const uint32_t n = 3;
    setup(n, GT_CMP_INT8, 1, 1.0, 1, 0);
    for (uint64_t r = 0; r < 5; r++) {
        make_deltas(n);
        for (uint32_t s = 0; s < n; s++)
            CHECK_EQ_INT(gt_outer_submit(g_o[s], r, g_delta[s], 1.0, 1234, g_now), GT_OK);
        pump();
        pump();
        check_identical(n, r);
        double maxerr = 0;
        for (size_t i = 0; i < N_PARAMS; i++) {
            double ref = (g_delta[0][i] + g_delta[1][i] + g_delta[2][i]) / 3.0;
            double e = fabs(g_res[0][i] - ref);
            if (e > maxerr) maxerr = e;
        }
        CHECK_MSG(maxerr < 2e-4, "int8 round %llu: max error %g", (unsigned long long)r, maxerr);
        CHECK_EQ_INT(gt_outer_hash_verdict(g_o[1], r - 1 + (r == 0)), r > 0 ? 1 : 0);
    }
    teardown(n);
}

/* hold_results (diloco/'s engines): a result taken with gt_outer_result_hold and decoded by the
 * caller chunk by chunk is the vector an engine without it hands over, bit for bit; the engine
 * keeps no decoded vector for it (its memory peak is lower by at least one); a round not held,
 * released, or left behind by the hold of a later round is not read. */
static void test_hold_results(void)
{
    const uint32_t n = 3;
    g_hold_mask = 1u << 1;
    setup(n, GT_CMP_INT8, 1, 1.0, 1, 0);
    gt_cmp_ctx_t *cmp = NULL;
    gt_cmp_params_t cp = GT_CMP_PARAMS_INIT;
    CHECK_EQ_INT(gt_cmp_create(&cp, &cmp), GT_OK);
    static float held[N_PARAMS];
    size_t nc = gt_outer_chunk_count(g_o[1]);
    CHECK(nc == 9); /* 3 lanes x 3 sites */
    for (uint64_t r = 0; r < 4 && cmp; r++) {
        make_deltas(n);
        for (uint32_t s = 0; s < n; s++)
            CHECK_EQ_INT(gt_outer_submit(g_o[s], r, g_delta[s], 1.0, 99, g_now), GT_OK);
        CHECK_EQ_INT(gt_outer_result_hold(g_o[1], r), GT_ERR_AGAIN); /* nothing arrived */
        pump();
        pump();
        CHECK_EQ_INT(gt_outer_result(g_o[0], r, g_res[0]), GT_OK);
        CHECK_EQ_INT(gt_outer_result_chunk(g_o[1], r, 0, cmp, held), GT_ERR_INVALID);
        CHECK_EQ_INT(gt_outer_result_hold(g_o[1], r), GT_OK);
        memset(held, 0xff, sizeof held);
        size_t covered = 0;
        for (size_t c = 0; c < nc; c++) {
            size_t off = 0, cnt = 0;
            gt_outer_chunk_span(g_o[1], c, &off, &cnt);
            CHECK(off + cnt <= N_PARAMS);
            CHECK_EQ_INT(gt_outer_result_chunk(g_o[1], r, c, cmp, held + off), GT_OK);
            covered += cnt;
        }
        CHECK_EQ_INT(covered, N_PARAMS);
        CHECK_MSG(memcmp(held, g_res[0], sizeof held) == 0,
                  "round %llu: the held result decoded chunk by chunk differs from the vector",
                  (unsigned long long)r);
        CHECK_EQ_INT(gt_outer_result_chunk(g_o[1], r, nc, cmp, held), GT_ERR_INVALID);
        if (r == 1) { /* left held: the hold of round 2 ends it */
            continue;
        }
        if (r == 2) CHECK_EQ_INT(gt_outer_result_chunk(g_o[1], 1, 0, cmp, held), GT_ERR_INVALID);
        gt_outer_result_release(g_o[1], r);
        CHECK_EQ_INT(gt_outer_result_chunk(g_o[1], r, 0, cmp, held), GT_ERR_INVALID);
        CHECK_EQ_INT(gt_outer_hash_verdict(g_o[1], r - 1 + (r == 0)), r > 0 ? 1 : 0);
    }
    /* site 0 decoded every result into a vector of N_PARAMS floats; site 1 never did */
    uint64_t p0 = gt_mem_count_peak(gt_outer_mem(g_o[0])),
             p1 = gt_mem_count_peak(gt_outer_mem(g_o[1]));
    CHECK_MSG(p1 + N_PARAMS * sizeof(float) <= p0, "memory peak: held %llu, decoded %llu bytes",
              (unsigned long long)p1, (unsigned long long)p0);
    gt_cmp_destroy(cmp);
    teardown(n);
    g_hold_mask = 0;
}

/* An owner keeps the contributions it holds open as their codec frames (decoded again when the
 * chunk closes), not as floats: with int8, site 0's memory grows by its own DELTA frames and
 * the frames of the two contributions to each chunk it owns, about 1.7 bytes a parameter, where
 * floats would take 3.7; the result is the same at every site and within int8's error of the
 * mean. */
static void test_contrib_frames(void)
{
    const uint32_t n = 3;
    setup(n, GT_CMP_INT8, 0, 1.0, 1, 0); /* quorum 1: every site waited for */
    make_deltas(n);
    uint64_t before = gt_mem_count_now(gt_outer_mem(g_o[0]));
    for (uint32_t s = 0; s < 2; s++)
        CHECK_EQ_INT(gt_outer_submit(g_o[s], 0, g_delta[s], 1.0, 7, g_now), GT_OK);
    pump();
    uint64_t open = gt_mem_count_now(gt_outer_mem(g_o[0])) - before;
    CHECK_MSG(open < 2.5 * N_PARAMS && open > 1.2 * N_PARAMS,
              "site 0 holds %llu bytes for its frames and its open contributions (%d params)",
              (unsigned long long)open, N_PARAMS);
    CHECK_EQ_INT(gt_outer_submit(g_o[2], 0, g_delta[2], 1.0, 7, g_now), GT_OK);
    pump();
    pump();
    check_identical(n, 0);
    double maxerr = 0;
    for (size_t i = 0; i < N_PARAMS; i++) {
        double e = fabs(g_res[0][i] - (g_delta[0][i] + g_delta[1][i] + g_delta[2][i]) / 3.0);
        if (e > maxerr) maxerr = e;
    }
    CHECK_MSG(maxerr < 2e-4, "max error %g", maxerr);
    teardown(n);
}

static void test_nan_and_clip(void)
{
    const uint32_t n = 4;
    setup(n, GT_CMP_FP32, 0, 1.0, 1, 3.0);
    make_deltas(n);
    float poisoned[N_PARAMS];
    memcpy(poisoned, g_delta[3], sizeof poisoned);
    poisoned[10] = NAN; /* a site never sends a non-finite delta */
    CHECK_EQ_INT(gt_outer_submit(g_o[3], 0, poisoned, 1.0, 0, g_now), GT_ERR_INVALID);
    for (size_t i = 0; i < N_PARAMS; i++) g_delta[2][i] *= 100; /* an outlier everywhere */
    for (uint32_t s = 0; s < n; s++)
        CHECK_EQ_INT(gt_outer_submit(g_o[s], 0, g_delta[s], 1.0, 0, g_now), GT_OK);
    pump();
    pump();
    check_identical(n, 0);
    uint64_t rejected = 0, clipped = 0;
    for (uint32_t s = 0; s < n; s++) {
        gt_outer_stats_t st;
        gt_outer_stats(g_o[s], &st);
        rejected += st.rejected;
        clipped += st.clipped;
    }
    CHECK_EQ_INT(rejected, 0);
    CHECK_EQ_INT(clipped, 12); /* the outlier is clipped in every one of 12 chunks */
    /* Clipped to 3 x the median norm, site 2 weighs at most ~3x a normal site. */
    double ref_unclipped = 0, ref_others = 0;
    for (size_t i = 0; i < N_PARAMS; i++) {
        double others = (g_delta[0][i] + g_delta[1][i] + g_delta[3][i]) / 4.0;
        ref_unclipped += pow(others + g_delta[2][i] / 4.0, 2);
        ref_others += pow(g_res[0][i] - others, 2);
    }
    CHECK(ref_others < 0.05 * ref_unclipped);
    teardown(n);
}

static void test_late(int fold)
{
    const uint32_t n = 3;
    setup(n, GT_CMP_FP32, 0, 0.6, fold, 0);
    make_deltas(n);
    float late0[N_PARAMS];
    memcpy(late0, g_delta[2], sizeof late0);
    /* Round 0: sites 0 and 1 only; the owners close at the deadline with a quorum of 2. */
    for (uint32_t s = 0; s < 2; s++)
        CHECK_EQ_INT(gt_outer_submit(g_o[s], 0, g_delta[s], 1.0, 0, g_now), GT_OK);
    pump();
    g_now += 200000000ull; /* 200 ms > the 100 ms deadline */
    for (uint32_t s = 0; s < n; s++) CHECK_EQ_INT(gt_outer_progress(g_o[s], g_now), GT_OK);
    pump();
    check_identical(n, 0);
    for (size_t i = 0; i < N_PARAMS; i++)
        CHECK_CLOSE(g_res[0][i], (g_delta[0][i] + g_delta[1][i]) / 2.0, 1e-9, 1e-6);
    /* Site 2's round-0 contribution arrives late; then round 1 from everyone. */
    CHECK_EQ_INT(gt_outer_submit(g_o[2], 0, late0, 1.0, 0, g_now), GT_OK);
    pump();
    make_deltas(n);
    for (uint32_t s = 0; s < n; s++)
        CHECK_EQ_INT(gt_outer_submit(g_o[s], 1, g_delta[s], 1.0, 0, g_now), GT_OK);
    pump();
    pump();
    check_identical(n, 1);
    uint64_t late = 0, dropped = 0, on_time = 0;
    for (uint32_t s = 0; s < n; s++) {
        gt_outer_stats_t st;
        gt_outer_stats(g_o[s], &st);
        late += st.late;
        dropped += st.dropped;
        on_time += st.on_time;
    }
    /* 9 chunks: round 0 had 2 on time each, round 1 has 3; the 9 late ones are folded or
     * dropped — every contribution is accounted for (I3). */
    CHECK_EQ_INT(on_time, 9 * 2 + 9 * 3);
    CHECK_EQ_INT(fold ? late : dropped, 9);
    CHECK_EQ_INT(fold ? dropped : late, 0);
    for (size_t i = 0; i < N_PARAMS; i += 97) {
        double ref = fold ? (g_delta[0][i] + g_delta[1][i] + g_delta[2][i] + 0.5 * late0[i]) / 3.5
                          : (g_delta[0][i] + g_delta[1][i] + g_delta[2][i]) / 3.0;
        CHECK_CLOSE(g_res[0][i], ref, 1e-9, 1e-5);
    }
    teardown(n);
}

/* A chronic straggler is not waited for: once most of site 2's recent rounds came after the
 * deadline, a round that lacks only site 2 closes as soon as its quorum is in (no deadline
 * wait). When site 2 is punctual again — its contribution arrives before the deadline the round
 * would have had, though the round closed without it — the rounds wait for it again. */
static void test_chronic_straggler(void)
{
    const uint32_t n = 3;
    setup(n, GT_CMP_FP32, 0, 0.6, 1, 0);
    uint64_t r = 0;
    /* Rounds 0 and 1: site 2 misses the deadline (200 ms > 100 ms) both times: its share of
     * late rounds is 0.3, then 0.51. */
    for (; r < 2; r++) {
        make_deltas(n);
        for (uint32_t s = 0; s < 2; s++)
            CHECK_EQ_INT(gt_outer_submit(g_o[s], r, g_delta[s], 1.0, 0, g_now), GT_OK);
        pump();
        CHECK_EQ_INT(gt_outer_result(g_o[0], r, g_res[0]), GT_ERR_AGAIN); /* it waits */
        g_now += 200000000ull;
        for (uint32_t s = 0; s < n; s++) CHECK_EQ_INT(gt_outer_progress(g_o[s], g_now), GT_OK);
        pump();
        CHECK_EQ_INT(gt_outer_submit(g_o[2], r, g_delta[2], 1.0, 0, g_now), GT_OK);
        pump();
        check_identical(n, r);
    }
    /* Round 2: closed the moment sites 0 and 1 are in, at the same instant. */
    make_deltas(n);
    for (uint32_t s = 0; s < 2; s++)
        CHECK_EQ_INT(gt_outer_submit(g_o[s], r, g_delta[s], 1.0, 0, g_now), GT_OK);
    pump();
    pump();
    CHECK_EQ_INT(gt_outer_result(g_o[0], r, g_res[0]), GT_OK);
    /* Site 2's round 2 comes 10 ms later: late (the round is closed), folded into round 3, but
     * within the 100 ms deadline the round would have had: its share falls to 0.36. */
    g_now += 10000000ull;
    CHECK_EQ_INT(gt_outer_submit(g_o[2], r, g_delta[2], 1.0, 0, g_now), GT_OK);
    pump();
    check_identical(n, r);
    /* Round 3 waits for site 2 again. */
    r++;
    make_deltas(n);
    for (uint32_t s = 0; s < 2; s++)
        CHECK_EQ_INT(gt_outer_submit(g_o[s], r, g_delta[s], 1.0, 0, g_now), GT_OK);
    pump();
    pump();
    CHECK_EQ_INT(gt_outer_result(g_o[0], r, g_res[0]), GT_ERR_AGAIN);
    g_now += 10000000ull;
    CHECK_EQ_INT(gt_outer_submit(g_o[2], r, g_delta[2], 1.0, 0, g_now), GT_OK);
    pump();
    pump();
    check_identical(n, r);
    uint64_t late = 0, on_time = 0;
    for (uint32_t s = 0; s < n; s++) {
        gt_outer_stats_t st;
        gt_outer_stats(g_o[s], &st);
        late += st.late;
        on_time += st.on_time;
    }
    /* Rounds 0-2 two on time each, site 2's three folded late; round 3 all three on time. */
    CHECK_EQ_INT(on_time, 9 * 2 * 3 + 9 * 3);
    CHECK_EQ_INT(late, 9 * 3);
    teardown(n);
}

/* A site that has fallen gt_outer_rounds_kept() rounds behind: the result of the round it
 * waits for is no longer kept (its slot holds a later round's), which the engine says, so the
 * site can leave and rejoin instead of waiting for a result that cannot come; before that, what
 * it waits for is listed chunk by chunk. */
static void test_lagging_gone(void)
{
    const uint32_t n = 2;
    setup(n, GT_CMP_FP32, 0, 0.5, 1, 0); /* site 0 alone is a quorum */
    const uint32_t kept = gt_outer_rounds_kept();
    CHECK(kept >= 2);
    char what[256];
    /* Site 1 has heard nothing yet: every chunk of round 0 is missing, each named. */
    size_t chunks = gt_outer_missing(g_o[1], 0, what, sizeof what);
    CHECK(chunks >= 2);
    CHECK_MSG(strstr(what, "0 (site ") != NULL, "missing list: %s", what);
    CHECK_EQ_INT(gt_outer_missing(g_o[1], 0, what, 8), chunks); /* a short buffer: cut short */
    CHECK(strlen(what) < 8);
    for (uint64_t r = 0; r <= kept; r++) {
        make_deltas(n);
        CHECK_EQ_INT(gt_outer_submit(g_o[0], r, g_delta[0], 1.0, 0, g_now), GT_OK);
        pump();
        g_now += 200000000ull; /* past the deadline: site 0 closes its chunks alone */
        for (uint32_t s = 0; s < n; s++) CHECK_EQ_INT(gt_outer_progress(g_o[s], g_now), GT_OK);
        pump();
        pump();
        CHECK_EQ_INT(gt_outer_result(g_o[0], r, g_res[0]), GT_OK);
        if (r == 0) CHECK_EQ_INT(gt_outer_missing(g_o[1], 0, what, sizeof what), 0);
        /* Site 1 applies nothing: round 0's result is there until round `kept`'s takes its slot. */
        CHECK_EQ_INT(gt_outer_result_gone(g_o[1], 0), r == kept);
        CHECK_EQ_INT(gt_outer_result_gone(g_o[1], 1), 0);
    }
    CHECK_EQ_INT(gt_outer_result(g_o[1], 0, g_res[1]), GT_ERR_AGAIN);
    CHECK_EQ_INT(gt_outer_result(g_o[1], 1, g_res[1]), GT_OK); /* the rounds after: kept */
    teardown(n);
}

/* The run's last round waits longer (4 x deadline_max) only for a punctual site its owner has
 * heard from: one never heard from (the owner joined after its last contribution) is not
 * known to be catching up, and waiting for it stalled a chaos run's end for 10 s. */
/* Sites 0 .. n-2 submit round r; the last sends nothing, so the round closes at its deadline
 * (100 ms) without it, and site 0 then holds the result. */
static void close_without_last(uint32_t n, uint64_t r)
{
    make_deltas(n);
    for (uint32_t s = 0; s + 1 < n; s++)
        CHECK_EQ_INT(gt_outer_submit(g_o[s], r, g_delta[s], 1.0, 0, g_now), GT_OK);
    pump();
    CHECK_EQ_INT(gt_outer_result(g_o[0], r, g_res[0]), GT_ERR_AGAIN);
    g_now += 150000000ull;
    for (uint32_t s = 0; s < n; s++) CHECK_EQ_INT(gt_outer_progress(g_o[s], g_now), GT_OK);
    pump();
    pump();
    CHECK_EQ_INT(gt_outer_result(g_o[0], r, g_res[0]), GT_OK);
}

static void test_last_round_unseen(void)
{
    const uint32_t n = 3;
    setup(n, GT_CMP_FP32, 0, 0.6, 1, 0);
    for (uint32_t s = 0; s < n; s++) gt_outer_set_last_round(g_o[s], 1);
    /* Site 2 sends nothing; rounds 0 and 1 (the last) close at their deadline (100 ms): no
     * owner has heard from site 2. */
    for (uint64_t r = 0; r < 2; r++) close_without_last(n, r);
    /* The last round closed without site 2, still live. Not heard from at all, it is not
     * expected (a site rounds behind is not waited for); once its round before the last has
     * arrived, every owner expects its last (one per chunk it closed; site 2, an owner too,
     * lacks its own), and stops expecting it when it arrives (folded late: open at the end,
     * counted). */
    for (uint32_t s = 0; s < n; s++) CHECK_EQ_INT(gt_outer_final_missing(g_o[s]), 0);
    CHECK_EQ_INT(gt_outer_submit(g_o[2], 0, g_delta[2], 1.0, 0, g_now), GT_OK);
    pump();
    for (uint32_t s = 0; s < n; s++)
        CHECK_MSG(gt_outer_final_missing(g_o[s]) > 0, "site %u expects nothing", s);
    CHECK_EQ_INT(gt_outer_submit(g_o[2], 1, g_delta[2], 1.0, 0, g_now), GT_OK);
    pump();
    for (uint32_t s = 0; s < n; s++) CHECK_EQ_INT(gt_outer_final_missing(g_o[s]), 0);
    uint64_t open = 0;
    for (uint32_t s = 0; s < n; s++) {
        gt_outer_stats_t st;
        gt_outer_stats(g_o[s], &st);
        open += st.open;
    }
    CHECK_EQ_INT(open, 18); /* site 2's 9 chunks twice, folded into a round that never closes */
    teardown(n);
    /* Site 2 was heard from (on time in round 0): the last round, 1, waits for it. */
    setup(n, GT_CMP_FP32, 0, 0.6, 1, 0);
    for (uint32_t s = 0; s < n; s++) gt_outer_set_last_round(g_o[s], 1);
    make_deltas(n);
    for (uint32_t s = 0; s < n; s++)
        CHECK_EQ_INT(gt_outer_submit(g_o[s], 0, g_delta[s], 1.0, 0, g_now), GT_OK);
    pump();
    pump();
    check_identical(n, 0);
    make_deltas(n);
    for (uint32_t s = 0; s < 2; s++)
        CHECK_EQ_INT(gt_outer_submit(g_o[s], 1, g_delta[s], 1.0, 0, g_now), GT_OK);
    pump();
    g_now += 150000000ull;
    for (uint32_t s = 0; s < n; s++) CHECK_EQ_INT(gt_outer_progress(g_o[s], g_now), GT_OK);
    pump();
    CHECK_EQ_INT(gt_outer_result(g_o[0], 1, g_res[0]), GT_ERR_AGAIN);
    g_now += 300000000ull; /* 450 ms: past 4 x 100 ms */
    for (uint32_t s = 0; s < n; s++) CHECK_EQ_INT(gt_outer_progress(g_o[s], g_now), GT_OK);
    pump();
    pump();
    CHECK_EQ_INT(gt_outer_result(g_o[0], 1, g_res[0]), GT_OK);
    teardown(n);
}

static void test_owner_loss_resend(void)
{
    const uint32_t n = 3;
    setup(n, GT_CMP_INT4, 1, 1.0, 1, 0);
    make_deltas(n);
    g_dead[2] = 1; /* site 2 dies before round 0: its chunks have no owner */
    for (uint32_t s = 0; s < 2; s++)
        CHECK_EQ_INT(gt_outer_submit(g_o[s], 0, g_delta[s], 1.0, 0, g_now), GT_OK);
    pump();
    pump();
    CHECK_EQ_INT(gt_outer_result(g_o[0], 0, g_res[0]), GT_ERR_AGAIN);
    const uint32_t live[] = {0, 1};
    for (uint32_t s = 0; s < 2; s++)
        CHECK_EQ_INT(gt_outer_set_view(g_o[s], 2, live, 2, g_now), GT_OK);
    pump();
    pump();
    check_identical(n, 0);
    gt_outer_stats_t st;
    gt_outer_stats(g_o[0], &st);
    CHECK(st.resends > 0);
    CHECK_EQ_INT(gt_outer_owner(g_o[0], 0, 2), 0); /* site 2's chunk moved to site 0 */
    teardown(n);
}

/* Site 2 crashes and is started again before its lease runs out: the view keeps the same three
 * sites (only its lease differs). Installed as an ordinary view, nothing moves: the round
 * waits for the chunks the dead incarnation owned. Installed with site 2 marked restarted, its
 * chunks move to the others until it announces again, and the round completes. */
static void test_restart_in_view(void)
{
    const uint32_t n = 3;
    setup(n, GT_CMP_FP32, 0, 1.0, 1, 0);
    make_deltas(n);
    g_dead[2] = 1; /* the old incarnation: gone before round 0's deltas reach it */
    for (uint32_t s = 0; s < 2; s++)
        CHECK_EQ_INT(gt_outer_submit(g_o[s], 0, g_delta[s], 1.0, 0, g_now), GT_OK);
    pump();
    pump();
    const uint32_t all[] = {0, 1, 2};
    for (uint32_t s = 0; s < 2; s++)
        CHECK_EQ_INT(gt_outer_set_view(g_o[s], 2, all, 3, g_now), GT_OK);
    g_now += 500000000ull;
    for (uint32_t s = 0; s < 2; s++) CHECK_EQ_INT(gt_outer_progress(g_o[s], g_now), GT_OK);
    pump();
    pump();
    CHECK_EQ_INT(gt_outer_result(g_o[0], 0, g_res[0]), GT_ERR_AGAIN);
    CHECK_EQ_INT(gt_outer_owner(g_o[0], 0, 2), 2);
    for (uint32_t s = 0; s < 2; s++)
        CHECK_EQ_INT(gt_outer_set_view_restarts(g_o[s], 3, all, 3, 1ull << 2, g_now), GT_OK);
    pump();
    pump();
    check_identical(n, 0);
    CHECK_EQ_INT(gt_outer_owner(g_o[0], 0, 2), 0); /* until site 2 announces again */
    for (size_t i = 0; i < N_PARAMS; i += 101)
        CHECK_CLOSE(g_res[1][i], (g_delta[0][i] + g_delta[1][i]) / 2.0, 1e-9, 1e-6);
    teardown(n);
}

/* Three sites of fp32, every one submitting round 0 (the messages queued, not delivered). */
static void three_submit_round0(void)
{
    setup(3, GT_CMP_FP32, 0, 1.0, 1, 0);
    make_deltas(3);
    for (uint32_t s = 0; s < 3; s++)
        CHECK_EQ_INT(gt_outer_submit(g_o[s], 0, g_delta[s], 1.0, 0, g_now), GT_OK);
}

/* With the deltas of a round at their owners and the results queued: site 2's results reach
 * site 0 only, then site 2 dies and sites 0 and 1 move to a view without it (nothing pumped). */
static void owner2_dies_mid_broadcast(void)
{
    for (size_t i = 0; i < g_qn; i++)
        if (g_q[i].src == 2 && g_q[i].dst == 1) g_q[i].dst = 2; /* lost with site 2 */
    g_block_to[2] = 1;
    pump();
    g_dead[2] = 1;
    const uint32_t live[] = {0, 1};
    for (uint32_t s = 0; s < 2; s++)
        CHECK_EQ_INT(gt_outer_set_view(g_o[s], 2, live, 2, g_now), GT_OK);
}

static void test_result_forwarding(void)
{
    const uint32_t n = 3;
    three_submit_round0();
    pump(); /* deltas reach every owner; results are now queued */
    owner2_dies_mid_broadcast();
    CHECK_EQ_INT(gt_outer_result(g_o[1], 0, g_res[1]), GT_ERR_AGAIN); /* not forwarded yet */
    pump();
    pump();
    check_identical(n, 0); /* site 1 applies the very bytes site 2 aggregated */
    gt_outer_stats_t st;
    gt_outer_stats(g_o[0], &st);
    CHECK(st.forwards > 0);
    for (size_t i = 0; i < N_PARAMS; i += 101)
        CHECK_CLOSE(g_res[1][i], (g_delta[0][i] + g_delta[1][i] + g_delta[2][i]) / 3.0, 1e-9, 1e-6);
    teardown(n);
}

/* A chunk handed over from a site that left while a peer still holds the leaver's own result
 * (the chaos runs' eviction of a frozen owner): site 2 dies after its results of round 0
 * reached site 1 only; site 0 moves to the view without it first and owns site 2's chunks; its
 * own contribution is a quorum (0.5 of 2) and the deadline passes before site 1's view changes
 * too. Closed then, site 0's result would lack site 2's contribution while site 1 applies site
 * 2's: two anchors. With the hold (params.handover_ms), site 1's forward comes first, site 0
 * takes it, and both apply site 2's bytes. `hold` 0: the same without it, which must differ. */
static void handover(uint32_t hold_ms, int *identical_p)
{
    g_handover_ms = hold_ms;
    setup(3, GT_CMP_FP32, 0, 0.5, 1, 0);
    g_handover_ms = 0;
    make_deltas(3);
    for (uint32_t s = 0; s < 3; s++)
        CHECK_EQ_INT(gt_outer_submit(g_o[s], 0, g_delta[s], 1.0, 0, g_now), GT_OK);
    pump(); /* deltas at their owners, results queued */
    for (size_t i = 0; i < g_qn; i++)
        if (g_q[i].src == 2 && g_q[i].dst == 0) g_q[i].dst = 2; /* lost with site 2 */
    g_block_to[2] = 1;
    pump();
    g_dead[2] = 1;
    const uint32_t live[] = {0, 1};
    CHECK_EQ_INT(gt_outer_set_view(g_o[0], 2, live, 2, g_now), GT_OK);
    for (int k = 0; k < 5; k++) { /* 500 ms: past the 100 ms deadline */
        g_now += 100000000ull;
        CHECK_EQ_INT(gt_outer_progress(g_o[0], g_now), GT_OK);
        pump();
    }
    CHECK_EQ_INT(gt_outer_set_view(g_o[1], 2, live, 2, g_now), GT_OK); /* forwards */
    for (int k = 0; k < 12; k++) {                                     /* past the hold */
        pump();
        g_now += 100000000ull;
        for (uint32_t s = 0; s < 2; s++) CHECK_EQ_INT(gt_outer_progress(g_o[s], g_now), GT_OK);
    }
    pump();
    int ok = 1;
    for (uint32_t s = 0; s < 2; s++) ok &= gt_outer_result(g_o[s], 0, g_res[s]) == GT_OK;
    CHECK_MSG(ok, "round 0's result is not complete at both sites");
    *identical_p = ok && memcmp(g_res[0], g_res[1], sizeof g_res[0]) == 0;
    teardown(3);
}

static void test_handover_hold(void)
{
    int same = 0;
    handover(0, &same);
    CHECK_MSG(!same, "without the hold the results should differ: the case tests nothing");
    handover(1000, &same);
    CHECK_MSG(same, "with the hold site 1 closed site 2's chunk itself instead of taking the "
                    "forward of site 2's result: two anchors for round 0");
}

static void test_hash_vote(void)
{
    const uint32_t n = 3;
    setup(n, GT_CMP_FP32, 0, 1.0, 1, 0);
    for (uint64_t r = 0; r < 2; r++) {
        make_deltas(n);
        for (uint32_t s = 0; s < n; s++)
            CHECK_EQ_INT(gt_outer_submit(g_o[s], r, g_delta[s], 1.0, s == 1 ? 666 : 42, g_now),
                         GT_OK);
        pump();
        pump();
        check_identical(n, r);
    }
    CHECK_EQ_INT(gt_outer_hash_verdict(g_o[0], 0), 1);
    CHECK_EQ_INT(gt_outer_hash_verdict(g_o[1], 0), -1);
    gt_outer_stats_t st;
    gt_outer_stats(g_o[1], &st);
    CHECK_EQ_INT(st.hash_mismatches, 1);
    CHECK_EQ_INT(st.hash_checks, 1);
    teardown(n);
}

/* Two sites whose anchors differ: neither hash has a majority (1 of 2 votes each), so neither
 * site is told to re-fetch the other's (the lower hash won before: a corruption spread half
 * the time); both get -2, stop applying, and each counts the mismatch. With three sites, 2 of
 * 3 is a majority: test_hash_vote. */
static void test_hash_vote_no_majority(void)
{
    const uint32_t n = 2;
    setup(n, GT_CMP_FP32, 0, 1.0, 1, 0);
    for (uint64_t r = 0; r < 2; r++) {
        make_deltas(n);
        for (uint32_t s = 0; s < n; s++)
            CHECK_EQ_INT(gt_outer_submit(g_o[s], r, g_delta[s], 1.0, s == 1 ? 7 : 42, g_now),
                         GT_OK);
        pump();
        pump();
    }
    for (uint32_t s = 0; s < n; s++) {
        CHECK_EQ_INT(gt_outer_hash_verdict(g_o[s], 0), -2);
        gt_outer_stats_t st;
        gt_outer_stats(g_o[s], &st);
        CHECK_EQ_INT(st.hash_mismatches, 1);
        CHECK_EQ_INT(st.hash_checks, 1);
    }
    teardown(n);
}

/* A straggler's anchor is judged too: round 1 closes at the deadline without site 2, whose
 * anchor hash (666) differs from the others' (42), so site 2 holds round 1's whole result
 * before it submits. Judged only when a result arrives, its anchor went unchecked (a rejoiner
 * diverged for 28 rounds with one hash check); judged at its submit, it is a mismatch. */
static void test_hash_vote_straggler(void)
{
    const uint32_t n = 3;
    setup(n, GT_CMP_FP32, 0, 0.6, 1, 0);
    make_deltas(n);
    for (uint32_t s = 0; s < n; s++)
        CHECK_EQ_INT(gt_outer_submit(g_o[s], 0, g_delta[s], 1.0, 0, g_now), GT_OK);
    pump();
    pump();
    check_identical(n, 0);
    make_deltas(n);
    for (uint32_t s = 0; s < 2; s++)
        CHECK_EQ_INT(gt_outer_submit(g_o[s], 1, g_delta[s], 1.0, 42, g_now), GT_OK);
    pump();
    g_now += 200000000ull; /* past the 100 ms deadline: closed with sites 0 and 1 */
    for (uint32_t s = 0; s < n; s++) CHECK_EQ_INT(gt_outer_progress(g_o[s], g_now), GT_OK);
    pump();
    CHECK_EQ_INT(gt_outer_result(g_o[2], 1, g_res[2]), GT_OK); /* before its submit */
    CHECK_EQ_INT(gt_outer_hash_verdict(g_o[2], 0), 0);         /* not judged yet */
    CHECK_EQ_INT(gt_outer_submit(g_o[2], 1, g_delta[2], 1.0, 666, g_now), GT_OK);
    CHECK_EQ_INT(gt_outer_hash_verdict(g_o[2], 0), -1);
    CHECK_EQ_INT(gt_outer_hash_verdict(g_o[0], 0), 1);
    gt_outer_stats_t st;
    gt_outer_stats(g_o[2], &st);
    CHECK_EQ_INT(st.hash_mismatches, 1);
    CHECK_EQ_INT(st.hash_checks, 1);
    teardown(n);
}

static void test_hostile(void)
{
    const uint32_t n = 2;
    setup(n, GT_CMP_INT8, 1, 1.0, 1, 0);
    gt_wan_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = GT_WAN_MSG_DELTA;
    m.sender = 1;
    uint8_t junk[300];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)(i * 7);
    CHECK_EQ_INT(gt_outer_deliver(g_o[0], &m, junk, sizeof junk, g_now), GT_ERR_CORRUPT);
    m.lane = 99;
    CHECK_EQ_INT(gt_outer_deliver(g_o[0], &m, junk, sizeof junk, g_now), GT_ERR_CORRUPT);
    m.lane = 0;
    m.type = GT_WAN_MSG_RESULT;
    CHECK_EQ_INT(gt_outer_deliver(g_o[0], &m, junk, 10, g_now), GT_ERR_CORRUPT);
    m.sender = 77;
    CHECK_EQ_INT(gt_outer_deliver(g_o[0], &m, junk, sizeof junk, g_now), GT_ERR_CORRUPT);
    gt_outer_stats_t st;
    gt_outer_stats(g_o[0], &st);
    CHECK_EQ_INT(st.bad_messages, 4);
    CHECK_EQ_INT(st.on_time, 0);
    /* A real round still works afterwards. */
    make_deltas(n);
    for (uint32_t s = 0; s < n; s++)
        CHECK_EQ_INT(gt_outer_submit(g_o[s], 0, g_delta[s], 1.0, 0, g_now), GT_OK);
    pump();
    pump();
    check_identical(n, 0);
    teardown(n);
}

static uint64_t sum_stat(uint32_t n, size_t offset)
{
    uint64_t v = 0;
    for (uint32_t s = 0; s < n; s++) {
        gt_outer_stats_t st;
        gt_outer_stats(g_o[s], &st);
        v += *(const uint64_t *)((const char *)&st + offset);
    }
    return v;
}

/* Site 2 is down from the start (view {0, 1}); after round 1 it comes back with a fresh engine
 * and joins at round 3. Round 2 is in flight when it announces (site 0 has even submitted
 * round 3 to the old owners): round 2 completes with sites 0 and 1 alone, round 3 — whose
 * contributions to site 2's chunks are given up by the old owners and re-sent — with all
 * three; the sites hold bit-identical results, site 2 owns its chunks from round 3 only, and
 * every contribution is counted once. */
static void test_join(void)
{
    const uint32_t n = 3;
    setup(n, GT_CMP_INT8, 1, 1.0, 1, 0);
    g_dead[2] = 1;
    const uint32_t two[] = {0, 1}, three[] = {0, 1, 2};
    for (uint32_t s = 0; s < 2; s++)
        CHECK_EQ_INT(gt_outer_set_view(g_o[s], 1, two, 2, g_now), GT_OK);
    for (uint64_t r = 0; r < 2; r++) {
        make_deltas(n);
        for (uint32_t s = 0; s < 2; s++)
            CHECK_EQ_INT(gt_outer_submit(g_o[s], r, g_delta[s], 1.0, 7, g_now), GT_OK);
        pump();
        pump();
        check_identical(n, r);
    }
    /* Site 2 restarts: a new engine, a view that has it (the others' views do not yet). */
    gt_outer_destroy(g_o[2]);
    CHECK_EQ_INT(gt_outer_create(&g_params[2], &g_o[2]), GT_OK);
    g_dead[2] = 0;
    CHECK_EQ_INT(gt_outer_set_view(g_o[2], 2, three, 3, g_now), GT_OK);
    make_deltas(n);
    float d3[2][N_PARAMS];
    for (uint32_t s = 0; s < 2; s++)
        for (size_t i = 0; i < N_PARAMS; i++) d3[s][i] = 0.01f * frand();
    CHECK_EQ_INT(gt_outer_submit(g_o[0], 2, g_delta[0], 1.0, 7, g_now), GT_OK);
    CHECK_EQ_INT(gt_outer_submit(g_o[0], 3, d3[0], 1.0, 7, g_now), GT_OK);
    CHECK_EQ_INT(gt_outer_submit(g_o[1], 2, g_delta[1], 1.0, 7, g_now), GT_OK);
    uint64_t first[MAXS];
    gt_outer_first_rounds(g_o[0], first);
    CHECK_EQ_INT(first[0], 0);
    CHECK(first[2] == UINT64_MAX); /* not taking part */
    CHECK_EQ_INT(gt_outer_start_at(g_o[2], 3, first, g_now), GT_OK);
    CHECK_EQ_INT(gt_outer_submit(g_o[2], 2, g_delta[2], 1.0, 7, g_now), GT_ERR_INVALID);
    pump();
    pump();
    pump();
    /* Round 2 closed without waiting for site 2 (which starts from the anchor after it). */
    g_dead[2] = 1;
    check_identical(n, 2);
    g_dead[2] = 0;
    for (size_t i = 0; i < N_PARAMS; i += 113)
        CHECK_CLOSE(g_res[0][i], (g_delta[0][i] + g_delta[1][i]) / 2.0, 3e-4, 0);
    for (uint32_t s = 0; s < 2; s++)
        CHECK_EQ_INT(gt_outer_set_view(g_o[s], 2, three, 3, g_now), GT_OK);
    for (uint32_t s = 0; s < n; s++)
        for (uint32_t l = 0; l < 3; l++)
            for (uint32_t j = 0; j < n; j++) {
                uint32_t pref = (l + j) % n;
                CHECK_EQ_INT(gt_outer_owner_at(g_o[s], l, j, 3), pref);
                if (pref == 2) CHECK(gt_outer_owner_at(g_o[s], l, j, 2) != 2);
            }
    CHECK_EQ_INT(gt_outer_submit(g_o[2], 3, g_delta[2], 1.0, 7, g_now), GT_OK);
    pump();
    CHECK_EQ_INT(gt_outer_submit(g_o[1], 3, d3[1], 1.0, 7, g_now), GT_OK);
    pump();
    pump();
    check_identical(n, 3);
    for (size_t i = 0; i < N_PARAMS; i += 113)
        CHECK_CLOSE(g_res[0][i], (d3[0][i] + d3[1][i] + g_delta[2][i]) / 3.0, 3e-4, 0);
    /* 9 chunks: rounds 0-2 with two contributions, round 3 with three; nothing late or lost. */
    CHECK_EQ_INT(sum_stat(n, offsetof(gt_outer_stats_t, on_time)), 9 * 2 * 3 + 9 * 3);
    CHECK_EQ_INT(sum_stat(n, offsetof(gt_outer_stats_t, late)), 0);
    CHECK_EQ_INT(sum_stat(n, offsetof(gt_outer_stats_t, dropped)), 0);
    CHECK_EQ_INT(sum_stat(n, offsetof(gt_outer_stats_t, joins)), 2);
    gt_outer_stats_t st;
    gt_outer_stats(g_o[0], &st);
    CHECK(st.resends > 0); /* its round-3 chunks for site 2 went to the old owners first */
    /* Site 2 dies again: the others forget it and round 4 completes without it. */
    g_dead[2] = 1;
    for (uint32_t s = 0; s < 2; s++)
        CHECK_EQ_INT(gt_outer_set_view(g_o[s], 3, two, 2, g_now), GT_OK);
    make_deltas(n);
    for (uint32_t s = 0; s < 2; s++)
        CHECK_EQ_INT(gt_outer_submit(g_o[s], 4, g_delta[s], 1.0, 7, g_now), GT_OK);
    pump();
    pump();
    check_identical(n, 4);
    teardown(n);
}

/* Views change at each site at its own time (its next view read). Site 1 dies; site 0 moves to
 * the view without it first and re-sends its contributions for site 1's chunks to their new
 * owners, site 2 among them, which still has the old view. Site 2 takes the new view only a
 * deadline later: the chunks that became its own must still close with its own contribution
 * (re-sent in the same step), not at once at the deadline that ran from site 0's arrival. */
static void test_moved_deadline(void)
{
    const uint32_t n = 3;
    setup(n, GT_CMP_FP32, 0, 0.5, 1, 0);
    make_deltas(n);
    g_dead[1] = 1;
    for (uint32_t s = 0; s < n; s += 2)
        CHECK_EQ_INT(gt_outer_submit(g_o[s], 0, g_delta[s], 1.0, 0, g_now), GT_OK);
    pump();
    pump();
    const uint32_t live[] = {0, 2};
    CHECK_EQ_INT(gt_outer_set_view(g_o[0], 2, live, 2, g_now), GT_OK);
    pump();                /* site 0's re-sends reach site 2, whose view still has site 1 */
    g_now += 250000000ull; /* past the 100 ms deadline */
    CHECK_EQ_INT(gt_outer_progress(g_o[2], g_now), GT_OK);
    CHECK_EQ_INT(gt_outer_set_view(g_o[2], 2, live, 2, g_now), GT_OK);
    for (int k = 0; k < 3; k++) {
        pump();
        for (uint32_t s = 0; s < n; s += 2) CHECK_EQ_INT(gt_outer_progress(g_o[s], g_now), GT_OK);
    }
    check_identical(n, 0);
    /* every chunk the average of both: nobody's contribution left out of round 0 */
    for (size_t i = 0; i < N_PARAMS; i++)
        CHECK_CLOSE(g_res[0][i], (g_delta[0][i] + g_delta[2][i]) / 2.0, 1e-6, 0);
    CHECK_EQ_INT(sum_stat(n, offsetof(gt_outer_stats_t, late)), 0);
    teardown(n);
}

/* A quorum that a view change brings (a site left, so fewer must contribute) starts the
 * deadline as an arrival's does. Fresh engines (no deadline history, as a joiner's): with a
 * quorum of half of 3 sites, site 0's contribution alone is not one; site 1 (stuck before its
 * submit) and site 2 (gone) send nothing. Once the view drops site 2, one of 2 is a quorum, and
 * every chunk closes at its deadline with site 0's contribution — site 1's own chunks too,
 * whose close had no deadline at all before (seen in a chaos run: the whole run waited for a
 * joiner's first contribution that could not come). */
static void test_quorum_by_view(void)
{
    const uint32_t n = 3;
    setup(n, GT_CMP_FP32, 0, 0.5, 1, 0);
    make_deltas(n);
    g_dead[2] = 1;
    CHECK_EQ_INT(gt_outer_submit(g_o[0], 0, g_delta[0], 1.0, 0, g_now), GT_OK);
    pump();
    g_now += 250000000ull; /* past the 100 ms deadline: without a quorum nothing closes */
    for (uint32_t s = 0; s < 2; s++) CHECK_EQ_INT(gt_outer_progress(g_o[s], g_now), GT_OK);
    pump();
    CHECK(gt_outer_result(g_o[0], 0, g_res[0]) != GT_OK);
    const uint32_t live[] = {0, 1};
    for (uint32_t s = 0; s < 2; s++)
        CHECK_EQ_INT(gt_outer_set_view(g_o[s], 2, live, 2, g_now), GT_OK);
    for (int k = 0; k < 4; k++) {
        pump();
        g_now += 60000000ull;
        for (uint32_t s = 0; s < 2; s++) CHECK_EQ_INT(gt_outer_progress(g_o[s], g_now), GT_OK);
    }
    pump();
    check_identical(2, 0);
    for (size_t i = 0; i < N_PARAMS; i++) CHECK_CLOSE(g_res[0][i], g_delta[0][i], 1e-6, 0);
    teardown(n);
}

/* A joiner whose JOIN cannot reach one peer (the link 1-2 is cut) announces its first round in
 * etcd too; the peer learns it there (gt_outer_learn_join, diloco's view read). Before it
 * does, the two disagree about who owns round 3's chunks; after, every site agrees, the JOIN
 * arriving later changes nothing, an earlier round or a site not in the view is ignored, and
 * nonsense is refused. */
static void test_join_etcd(void)
{
    const uint32_t n = 3;
    setup(n, GT_CMP_INT8, 1, 1.0, 1, 0);
    const uint32_t three[] = {0, 1, 2}, two[] = {0, 1};
    for (uint32_t s = 0; s < 2; s++)
        CHECK_EQ_INT(gt_outer_set_view(g_o[s], 1, two, 2, g_now), GT_OK);
    /* site 2 not in site 1's view yet: nothing to learn */
    CHECK_EQ_INT(gt_outer_learn_join(g_o[1], 2, 3, g_now), GT_OK);
    gt_outer_stats_t st;
    gt_outer_stats(g_o[1], &st);
    CHECK_EQ_INT(st.joins, 0);
    for (uint32_t s = 0; s < n; s++)
        CHECK_EQ_INT(gt_outer_set_view(g_o[s], 2, three, 3, g_now), GT_OK);
    g_cut[2][1] = g_cut[1][2] = 1;
    uint64_t first[MAXS];
    gt_outer_first_rounds(g_o[0], first);
    first[2] = UINT64_MAX;
    CHECK_EQ_INT(gt_outer_start_at(g_o[2], 3, first, g_now), GT_OK);
    pump(); /* the JOIN reaches site 0 only */
    int differ = 0;
    for (uint32_t l = 0; l < 3; l++)
        for (uint32_t j = 0; j < n; j++) {
            uint32_t pref = (l + j) % n;
            CHECK_EQ_INT(gt_outer_owner_at(g_o[0], l, j, 3), pref);
            CHECK_EQ_INT(gt_outer_owner_at(g_o[2], l, j, 3), pref);
            differ += gt_outer_owner_at(g_o[1], l, j, 3) != pref;
        }
    CHECK(differ > 0); /* site 1 has not heard: it would close site 2's chunks itself */
    CHECK_EQ_INT(gt_outer_learn_join(g_o[1], 2, 3, g_now), GT_OK);
    for (uint32_t l = 0; l < 3; l++)
        for (uint32_t j = 0; j < n; j++)
            CHECK_EQ_INT(gt_outer_owner_at(g_o[1], l, j, 3), (l + j) % n);
    gt_outer_stats(g_o[1], &st);
    CHECK_EQ_INT(st.joins, 1);
    /* again, an earlier round, the JOIN itself once the cut heals: no change */
    CHECK_EQ_INT(gt_outer_learn_join(g_o[1], 2, 3, g_now), GT_OK);
    CHECK_EQ_INT(gt_outer_learn_join(g_o[1], 2, 2, g_now), GT_OK);
    g_cut[2][1] = g_cut[1][2] = 0;
    CHECK_EQ_INT(gt_outer_start_at(g_o[2], 3, NULL, g_now), GT_OK);
    pump();
    gt_outer_stats(g_o[1], &st);
    CHECK_EQ_INT(st.joins, 1);
    gt_outer_first_rounds(g_o[1], first);
    CHECK_EQ_INT(first[2], 3);
    CHECK_EQ_INT(gt_outer_learn_join(g_o[1], 1, 3, g_now), GT_ERR_INVALID); /* itself */
    CHECK_EQ_INT(gt_outer_learn_join(g_o[1], 2, 0, g_now), GT_ERR_INVALID);
    CHECK_EQ_INT(gt_outer_learn_join(g_o[1], 7, 3, g_now), GT_ERR_INVALID);
    /* round 3 with all three: identical results */
    make_deltas(n);
    for (uint64_t r = 0; r < 3; r++)
        for (uint32_t s = 0; s < 2; s++)
            CHECK_EQ_INT(gt_outer_submit(g_o[s], r, g_delta[s], 1.0, 7, g_now), GT_OK);
    pump();
    pump();
    for (uint32_t s = 0; s < n; s++)
        CHECK_EQ_INT(gt_outer_submit(g_o[s], 3, g_delta[s], 1.0, 7, g_now), GT_OK);
    pump();
    pump();
    check_identical(n, 3);
    teardown(n);
}

/* A late contribution already folded into a round that a joiner then takes over: the old owner
 * passes it on (encoded again), the joiner folds it in, nothing is dropped. */
static void test_join_late(void)
{
    const uint32_t n = 3;
    setup(n, GT_CMP_FP32, 0, 0.5, 1, 0);
    g_dead[2] = 1;
    const uint32_t two[] = {0, 1}, three[] = {0, 1, 2};
    for (uint32_t s = 0; s < 2; s++)
        CHECK_EQ_INT(gt_outer_set_view(g_o[s], 1, two, 2, g_now), GT_OK);
    make_deltas(n);
    for (uint32_t s = 0; s < 2; s++)
        CHECK_EQ_INT(gt_outer_submit(g_o[s], 0, g_delta[s], 1.0, 7, g_now), GT_OK);
    pump();
    pump();
    check_identical(n, 0);
    /* Round 1 closes at the deadline with site 0 alone; site 1's arrives late, folded into 2. */
    make_deltas(n);
    CHECK_EQ_INT(gt_outer_submit(g_o[0], 1, g_delta[0], 1.0, 7, g_now), GT_OK);
    pump();
    g_now += 200000000ull;
    for (uint32_t s = 0; s < n; s++) CHECK_EQ_INT(gt_outer_progress(g_o[s], g_now), GT_OK);
    pump();
    check_identical(n, 1);
    float late1[N_PARAMS];
    memcpy(late1, g_delta[1], sizeof late1);
    CHECK_EQ_INT(gt_outer_submit(g_o[1], 1, late1, 1.0, 7, g_now), GT_OK);
    pump();
    /* Site 2 comes back and joins at round 2. */
    gt_outer_destroy(g_o[2]);
    CHECK_EQ_INT(gt_outer_create(&g_params[2], &g_o[2]), GT_OK);
    g_dead[2] = 0;
    CHECK_EQ_INT(gt_outer_set_view(g_o[2], 2, three, 3, g_now), GT_OK);
    uint64_t first[MAXS];
    gt_outer_first_rounds(g_o[0], first);
    CHECK_EQ_INT(gt_outer_start_at(g_o[2], 2, first, g_now), GT_OK);
    pump();
    pump();
    for (uint32_t s = 0; s < 2; s++)
        CHECK_EQ_INT(gt_outer_set_view(g_o[s], 2, three, 3, g_now), GT_OK);
    make_deltas(n);
    for (uint32_t s = 0; s < n; s++)
        CHECK_EQ_INT(gt_outer_submit(g_o[s], 2, g_delta[s], 1.0, 7, g_now), GT_OK);
    pump();
    pump();
    pump();
    check_identical(n, 2);
    for (size_t i = 0; i < N_PARAMS; i += 97)
        CHECK_CLOSE(g_res[2][i],
                    (g_delta[0][i] + g_delta[1][i] + g_delta[2][i] + 0.5 * late1[i]) / 3.5, 1e-9,
                    1e-5);
    CHECK_EQ_INT(sum_stat(n, offsetof(gt_outer_stats_t, on_time)), 9 * 2 + 9 + 9 * 3);
    CHECK_EQ_INT(sum_stat(n, offsetof(gt_outer_stats_t, late)), 9);
    CHECK_EQ_INT(sum_stat(n, offsetof(gt_outer_stats_t, dropped)), 0);
    CHECK_EQ_INT(sum_stat(n, offsetof(gt_outer_stats_t, open)), 0);
    gt_outer_stats_t st;
    gt_outer_stats(g_o[0], &st);
    CHECK(st.forwards > 0);
    teardown(n);
}

/* gt_outer_peer_next (outer.catch_up's signal): 1 + the highest round another site was seen
 * to submit — its own DELTA, not this site's, and a RESULT means its round closed. */
static void test_peer_next(void)
{
    const uint32_t n = 3;
    setup(n, GT_CMP_FP32, 0, 1.0, 1, 0);
    make_deltas(n);
    for (uint32_t s = 0; s < n; s++) CHECK_EQ_INT(gt_outer_peer_next(g_o[s]), 0);
    CHECK_EQ_INT(gt_outer_submit(g_o[0], 0, g_delta[0], 10, 0, g_now), GT_OK);
    pump(); /* site 0's deltas reach the owners of its chunks, itself included */
    CHECK_EQ_INT(gt_outer_peer_next(g_o[0]), 0); /* its own submit is not a peer's */
    CHECK_EQ_INT(gt_outer_peer_next(g_o[1]), 1);
    CHECK_EQ_INT(gt_outer_peer_next(g_o[2]), 1);
    for (uint32_t s = 1; s < n; s++)
        CHECK_EQ_INT(gt_outer_submit(g_o[s], 0, g_delta[s], 10, 0, g_now), GT_OK);
    pump();
    pump();
    check_identical(n, 0);
    for (uint32_t s = 0; s < n; s++) CHECK_EQ_INT(gt_outer_peer_next(g_o[s]), 1);
    /* site 1 goes on to round 1 alone: the others see a peer one round ahead */
    CHECK_EQ_INT(gt_outer_submit(g_o[1], 1, g_delta[1], 10, 0, g_now), GT_OK);
    pump();
    CHECK_EQ_INT(gt_outer_peer_next(g_o[0]), 2);
    CHECK_EQ_INT(gt_outer_peer_next(g_o[1]), 1);
    CHECK_EQ_INT(gt_outer_peer_next(g_o[2]), 2);
    teardown(n);
}

/* A DELTA delivered again after its round closed (a re-send after a reconnect whose
 * acknowledgement was lost) is taken once: not folded into the next round as a late one. */
/* Copies of the queued DELTAs from site src to site dst (at most cap), to deliver again. */
static size_t keep_deltas(uint32_t src, uint32_t dst, qmsg_t *dup, size_t cap)
{
    size_t nd = 0;
    for (size_t i = 0; i < g_qn && nd < cap; i++)
        if (g_q[i].src == src && g_q[i].dst == dst && g_q[i].msg.type == GT_WAN_MSG_DELTA) {
            dup[nd] = g_q[i];
            dup[nd].buf = malloc(g_q[i].len);
            memcpy(dup[nd].buf, g_q[i].buf, g_q[i].len);
            nd++;
        }
    return nd;
}

static void test_duplicate_delta(void)
{
    const uint32_t n = 3;
    three_submit_round0();
    /* keep copies of site 1's DELTAs to site 0 */
    qmsg_t dup[16];
    size_t nd = keep_deltas(1, 0, dup, 16);
    CHECK(nd > 0);
    pump();
    pump();
    check_identical(n, 0);
    gt_outer_stats_t before, after;
    gt_outer_stats(g_o[0], &before);
    for (size_t i = 0; i < nd; i++) {
        CHECK_EQ_INT(gt_outer_deliver(g_o[0], &dup[i].msg, dup[i].buf, dup[i].len, g_now), GT_OK);
        free(dup[i].buf);
    }
    gt_outer_stats(g_o[0], &after);
    CHECK_EQ_INT(after.duplicate_deltas - before.duplicate_deltas, nd);
    CHECK_EQ_INT(after.late, before.late);
    CHECK_EQ_INT(after.open, 0); /* nothing folded into round 1 */
    teardown(n);
}

/* A contribution that reaches a site after that site took the chunk's RESULT, which already
 * holds it: the chaos soak's run of seed 1547232613 (4 sites; owner c killed, d took c's chunks
 * over and was sent every round-17 contribution again; c restarted, took them back and closed
 * them first; a contribution re-sent to d arrived after c's result). Folded into the next round
 * as late, it counted twice: round 18's result carried 962 tokens more than were submitted
 * (I3). Here: round 0 closes everywhere, site 2 leaves, and site 1's round-0 DELTAs to site 2
 * arrive at site 0 as re-sends would; each is in the RESULT site 0 took, so it is taken once:
 * nothing folded into round 1 or passed on, and round 1's result carries round 1's tokens. */
static void test_resend_after_result(void)
{
    const uint32_t n = 3;
    three_submit_round0();
    qmsg_t dup[16];
    size_t nd = keep_deltas(1, 2, dup, 16);
    CHECK(nd > 0);
    pump();
    pump();
    check_identical(n, 0);
    g_dead[2] = 1;
    const uint32_t live[] = {0, 1};
    for (uint32_t s = 0; s < 2; s++)
        CHECK_EQ_INT(gt_outer_set_view(g_o[s], 2, live, 2, g_now), GT_OK);
    pump();
    gt_outer_stats_t before, after;
    gt_outer_stats(g_o[0], &before);
    for (size_t i = 0; i < nd; i++) {
        CHECK_EQ_INT(gt_outer_deliver(g_o[0], &dup[i].msg, dup[i].buf, dup[i].len, g_now), GT_OK);
        free(dup[i].buf);
    }
    gt_outer_stats(g_o[0], &after);
    CHECK_EQ_INT(after.duplicate_deltas - before.duplicate_deltas, nd);
    CHECK_EQ_INT(after.forwards, before.forwards);
    CHECK_EQ_INT(after.open, 0);
    pump();
    make_deltas(2);
    for (uint32_t s = 0; s < 2; s++)
        CHECK_EQ_INT(gt_outer_submit(g_o[s], 1, g_delta[s], 1.0, 0, g_now), GT_OK);
    for (int k = 0; k < 3; k++) pump();
    check_identical(2, 1);
    for (uint32_t s = 0; s < 2; s++)
        CHECK_CLOSE(gt_outer_result_tokens(g_o[s], 1), 2.0, 1e-9, 1e-9); /* sites 0 and 1 only */
    teardown(n);
}

static uint64_t ledger(uint32_t n, uint64_t *unreceived_p)
{
    uint64_t sum = 0, unreceived = 0;
    for (uint32_t s = 0; s < n; s++) {
        gt_outer_stats_t st;
        gt_outer_stats(g_o[s], &st);
        sum += st.on_time + st.late + st.dropped + st.open + st.unreceived;
        unreceived += st.unreceived;
    }
    *unreceived_p = unreceived;
    return sum;
}

/* The end of a run: owners that finish (gt_outer_finish) take nothing more and say, in a
 * FIN, how many contributions they took from each site; what a straggler sent them beyond that
 * is counted by the straggler as unreceived, so every contribution ends in one counter. */
static void test_fin_ledger(void)
{
    const uint32_t n = 3;
    setup(n, GT_CMP_FP32, 0, 0.6, 1, 0);
    close_without_last(n, 0); /* round 0 closes at its deadline without site 2 */
    /* Site 2's round 0 arrives before site 0 finishes: taken (late, folded into round 1). */
    CHECK_EQ_INT(gt_outer_submit(g_o[2], 0, g_delta[2], 1.0, 0, g_now), GT_OK);
    pump();
    /* every site sent each peer contributions, and no FIN has come yet: none is waited for
     * before round 0 is the run's last (a peer rounds behind is not), each after */
    for (uint32_t s = 0; s < n; s++) CHECK_EQ_INT(gt_outer_fins_missing(g_o[s]), 0);
    for (uint32_t s = 0; s < n; s++) gt_outer_set_last_round(g_o[s], 0);
    for (uint32_t s = 0; s < n; s++) CHECK_EQ_INT(gt_outer_fins_missing(g_o[s]), 2);
    gt_outer_finish(g_o[0], g_now);
    gt_outer_finish(g_o[0], g_now);
    size_t fins = 0;
    for (size_t i = 0; i < g_qn; i++) fins += g_q[i].src == 0;
    CHECK_EQ_INT(fins, 2); /* one FIN to each peer, however often it is called */
    pump();
    uint64_t unreceived;
    CHECK_EQ_INT(ledger(n, &unreceived), 27);
    CHECK_EQ_INT(unreceived, 0);
    /* site 0's FIN reached 1 and 2; site 0 still waits for theirs */
    CHECK_EQ_INT(gt_outer_fins_missing(g_o[0]), 2);
    CHECK_EQ_INT(gt_outer_fins_missing(g_o[1]), 1);
    CHECK_EQ_INT(gt_outer_fins_missing(g_o[2]), 1);
    /* Its round 1 is on its way when site 1 finishes (site 0 finished before it was sent):
     * neither takes any of it. */
    gt_outer_stats_t before[2], after[2];
    for (uint32_t s = 0; s < 2; s++) gt_outer_stats(g_o[s], &before[s]);
    make_deltas(n);
    CHECK_EQ_INT(gt_outer_submit(g_o[2], 1, g_delta[2], 1.0, 0, g_now), GT_OK);
    gt_outer_finish(g_o[1], g_now);
    pump();
    pump();
    for (uint32_t s = 0; s < 2; s++) {
        gt_outer_stats(g_o[s], &after[s]);
        CHECK_EQ_INT(after[s].late + after[s].open + after[s].on_time + after[s].dropped,
                     before[s].late + before[s].open + before[s].on_time + before[s].dropped);
    }
    /* 27 + site 2's 9 of round 1: 3 its own (open), 6 sent to the finished owners */
    CHECK_EQ_INT(ledger(n, &unreceived), 36);
    CHECK_EQ_INT(unreceived, 6);
    CHECK_EQ_INT(gt_outer_fins_missing(g_o[0]), 1); /* site 2's */
    CHECK_EQ_INT(gt_outer_fins_missing(g_o[1]), 1);
    CHECK_EQ_INT(gt_outer_fins_missing(g_o[2]), 0);
    /* a peer that leaves the view is not waited for */
    const uint32_t without2[] = {0, 1};
    CHECK_EQ_INT(gt_outer_set_view(g_o[1], 1000, without2, 2, g_now), GT_OK);
    CHECK_EQ_INT(gt_outer_fins_missing(g_o[1]), 0);
    gt_outer_finish(g_o[2], g_now);
    pump();
    for (uint32_t s = 0; s < n; s++) CHECK_EQ_INT(gt_outer_fins_missing(g_o[s]), 0);
    teardown(n);
}

/* One link cut (0 <-> 2) while both ends reach site 1: each end's chunks close without the
 * other's contribution, and their RESULTs do not reach the other end. Once a straggler deadline
 * plus deadline_min has passed since its first chunk arrived, each end asks site 1 to relay the
 * chunks it lacks; site 1 sends the owners' frames as received, once per asker: every site
 * ends with the same result. */
static void test_relay(void)
{
    const uint32_t n = 3;
    setup(n, GT_CMP_FP32, 0, 0.6, 1, 0);
    g_cut[0][2] = g_cut[2][0] = 1;
    make_deltas(n);
    for (uint32_t s = 0; s < n; s++)
        CHECK_EQ_INT(gt_outer_submit(g_o[s], 0, g_delta[s], 1.0, 0, g_now), GT_OK);
    pump();
    pump();
    g_now += 150000000ull; /* past the deadline (100 ms): 0's and 2's chunks close */
    for (uint32_t s = 0; s < n; s++) CHECK_EQ_INT(gt_outer_progress(g_o[s], g_now), GT_OK);
    pump();
    pump();
    CHECK_EQ_INT(gt_outer_result(g_o[1], 0, g_res[1]), GT_OK);
    CHECK_EQ_INT(gt_outer_result(g_o[0], 0, g_res[0]), GT_ERR_AGAIN);
    CHECK_EQ_INT(gt_outer_result(g_o[2], 0, g_res[2]), GT_ERR_AGAIN);
    /* Site 1's chunks came at once (nothing of theirs crosses the cut): 150 ms ago, less than
     * the straggler deadline plus deadline_min (200 ms): nobody has asked yet. */
    gt_outer_stats_t st[3];
    gt_outer_stats(g_o[0], &st[0]);
    CHECK_EQ_INT(st[0].pulls, 0);
    g_now += 100000000ull;
    for (uint32_t s = 0; s < n; s++) CHECK_EQ_INT(gt_outer_progress(g_o[s], g_now), GT_OK);
    pump(); /* the pulls reach site 1 */
    pump(); /* its relays reach 0 and 2 */
    check_identical(n, 0);
    for (uint32_t s = 0; s < n; s++) gt_outer_stats(g_o[s], &st[s]);
    CHECK_EQ_INT(st[0].pulls, 3); /* 3 lanes x site 2's one chunk each */
    CHECK_EQ_INT(st[2].pulls, 3);
    CHECK_EQ_INT(st[1].pulls, 0);
    CHECK_EQ_INT(st[1].relays, 6);
    /* Asked again (a pull repeated), site 1 does not send the chunks a second time. */
    uint64_t relays = st[1].relays;
    g_now += 300000000ull;
    for (uint32_t s = 0; s < n; s++) CHECK_EQ_INT(gt_outer_progress(g_o[s], g_now), GT_OK);
    pump();
    gt_outer_stats(g_o[1], &st[1]);
    CHECK_EQ_INT(st[1].relays, relays); /* and 0 and 2 asked nothing more: complete */
    gt_outer_stats(g_o[0], &st[0]);
    CHECK_EQ_INT(st[0].pulls, 3);
    teardown(n);
}

/* Three sites, the link 0 <-> 2 cut and the io saying so (reachable()), every site's round 0
 * submitted: what test_relay_unreachable and test_detour start from. */
static void known_cut_submit(double quorum)
{
    g_reach_known = 1;
    setup(3, GT_CMP_FP32, 0, quorum, 1, 0);
    g_reach_known = 0;
    g_cut[0][2] = g_cut[2][0] = 1;
    make_deltas(3);
    for (uint32_t s = 0; s < 3; s++)
        CHECK_EQ_INT(gt_outer_submit(g_o[s], 0, g_delta[s], 1.0, 0, g_now), GT_OK);
}

/* The same cut, with the io saying which sites are unreachable: each end asks for the chunks
 * of the owner it cannot reach after deadline_min / 2 (50 ms), not a straggler deadline
 * later: the round is complete everywhere within 60 ms of its chunks' close, where the test
 * without reachable() needed 250. */
static void test_relay_unreachable(void)
{
    const uint32_t n = 3;
    known_cut_submit(0.6);
    pump();
    pump();
    g_now += 150000000ull; /* the deadline closes; site 1's chunks came 150 ms ago */
    for (uint32_t s = 0; s < n; s++) CHECK_EQ_INT(gt_outer_progress(g_o[s], g_now), GT_OK);
    pump();
    pump();
    /* Site 0 asked before site 2 had closed (site 1 had no copy yet): it asks again 50 ms on. */
    g_now += 60000000ull;
    for (uint32_t s = 0; s < n; s++) CHECK_EQ_INT(gt_outer_progress(g_o[s], g_now), GT_OK);
    pump();
    pump();
    check_identical(n, 0);
    gt_outer_stats_t st;
    gt_outer_stats(g_o[1], &st);
    CHECK_EQ_INT(st.relays, 6);
    teardown(n);
}

/* One link cut (0 <-> 2), known to the io: each end sends its contributions to the other's
 * chunks through site 1 (a detour), which passes them on; the owners take them on time, as
 * their contributor's, and close every chunk with all three before any deadline (quorum 1: on
 * the direct path they would not arrive at all). A detour frame that claims to have been passed
 * on already, arriving anywhere but at its destination, is rejected. */
static void test_detour(void)
{
    const uint32_t n = 3;
    known_cut_submit(1.0);
    /* site 0's detour frames to site 1, kept to forge a hostile copy below */
    qmsg_t forged = {0};
    for (size_t i = 0; i < g_qn && !forged.buf; i++)
        if (g_q[i].src == 0 && g_q[i].dst == 1 && g_q[i].len > 32 &&
            (gt_le_get32(g_q[i].buf + 28) & 2u)) {
            forged = g_q[i];
            forged.buf = malloc(g_q[i].len);
            memcpy(forged.buf, g_q[i].buf, g_q[i].len);
        }
    CHECK(forged.buf != NULL);
    pump(); /* contributions: straight, or to site 1 */
    pump(); /* site 1 passes the detours on */
    gt_outer_stats_t st[3];
    uint64_t on_time = 0, late = 0;
    for (uint32_t s = 0; s < n; s++) {
        gt_outer_stats(g_o[s], &st[s]);
        on_time += st[s].on_time;
        late += st[s].late;
    }
    CHECK_EQ_INT(on_time, 27); /* every chunk closed on time with all three: no deadline passed */
    CHECK_EQ_INT(late, 0);
    CHECK_EQ_INT(st[0].detours, 3);
    CHECK_EQ_INT(st[2].detours, 3);
    CHECK_EQ_INT(st[1].detours, 0);
    CHECK_EQ_INT(st[1].detours_passed, 6);
    /* the results still need relays across the cut (test_relay_unreachable) */
    g_now += 150000000ull;
    for (int k = 0; k < 2; k++) {
        for (uint32_t s = 0; s < n; s++) CHECK_EQ_INT(gt_outer_progress(g_o[s], g_now), GT_OK);
        pump();
        pump();
        g_now += 60000000ull;
    }
    check_identical(n, 0);
    /* passed on once already, yet not at its destination (site 2): rejected, not passed on */
    uint32_t flags = gt_le_get32(forged.buf + 28);
    gt_le_put32(forged.buf + 28, flags | 4u);
    uint64_t bad = st[1].bad_messages;
    CHECK(gt_outer_deliver(g_o[1], &forged.msg, forged.buf, forged.len, g_now) != GT_OK);
    gt_outer_stats(g_o[1], &st[1]);
    CHECK_EQ_INT(st[1].bad_messages, bad + 1);
    CHECK_EQ_INT(g_qn, 0);
    free(forged.buf);
    teardown(n);
}

/* A site that submits when its own chunks' other contributions are already in closes them at
 * once: their RESULTs must go out after its DELTAs, not between them (a RESULT queued ahead of
 * a DELTA on a bandwidth-bound link holds the DELTA and the owner's RESULT that waits for it:
 * test_plan_validate's synchronous 3 Mbit/s run waited 40% longer). */
static void test_submit_order(void)
{
    const uint32_t n = 2;
    setup(n, GT_CMP_FP32, 0, 1.0, 1, 0);
    make_deltas(n);
    CHECK_EQ_INT(gt_outer_submit(g_o[1], 0, g_delta[1], 1.0, 0, g_now), GT_OK);
    pump(); /* site 0 holds site 1's contributions to its chunks */
    CHECK_EQ_INT(g_qn, 0);
    CHECK_EQ_INT(gt_outer_submit(g_o[0], 0, g_delta[0], 1.0, 0, g_now), GT_OK);
    size_t deltas = 0, results = 0, delta_after_result = 0;
    for (size_t i = 0; i < g_qn; i++) {
        if (g_q[i].src != 0) continue;
        if (g_q[i].msg.type == GT_WAN_MSG_DELTA) {
            deltas++;
            delta_after_result += results > 0;
        } else if (g_q[i].msg.type == GT_WAN_MSG_RESULT) {
            results++;
        }
    }
    CHECK(deltas > 0 && results > 0); /* both kinds were sent at submit */
    CHECK_MSG(delta_after_result == 0, "%zu DELTAs queued after a RESULT", delta_after_result);
    pump();
    pump();
    check_identical(n, 0);
    teardown(n);
}

/* An owner dies while broadcasting round 1: its round-1 results are forwarded to the site that
 * missed them, but its round-0 results are not forwarded to a site that has already sent round
 * 1 (it applied round 0 before it could submit round 1): on a WAN a result chunk can be
 * hundreds of MB. */
static void test_forward_only_missing(void)
{
    const uint32_t n = 3;
    three_submit_round0();
    pump();
    pump();
    check_identical(n, 0);
    for (uint32_t s = 0; s < n; s++)
        CHECK_EQ_INT(gt_outer_submit(g_o[s], 1, g_delta[s], 1.0, 0, g_now), GT_OK);
    pump(); /* round 1's deltas reach every owner; results are now queued */
    owner2_dies_mid_broadcast();
    size_t fwd0 = 0, fwd1 = 0;
    for (size_t i = 0; i < g_qn; i++)
        if (g_q[i].src == 0 && g_q[i].dst == 1 && g_q[i].msg.type == GT_WAN_MSG_RESULT) {
            fwd0 += g_q[i].msg.round == 0;
            fwd1 += g_q[i].msg.round == 1;
        }
    CHECK(fwd1 > 0);       /* what site 1 lacks */
    CHECK_EQ_INT(fwd0, 0); /* what it applied already */
    pump();
    pump();
    check_identical(n, 1); /* site 1 applies the very bytes site 2 aggregated */
    teardown(n);
}

/* Tokens in results over rounds 0..upto at site s (its own view of every chunk's result). */
static double result_tokens_upto(uint32_t s, uint64_t upto)
{
    double t = 0;
    for (uint64_t r = 0; r <= upto; r++) t += gt_outer_result_tokens(g_o[s], r);
    return t;
}

/* A late contribution folded by its owner, which is then removed (issue 31's soak, seed
 * 58031987: 640 tokens counted twice, on 2 of 12 chunks, around a cut and two removals). Three
 * sites. Round 1 closes at the deadline without site 0, and site 1's results do not reach site
 * 0 (a cut 1 -> 0). Site 0's round-1 contribution then arrives late at sites 1 and 2, which
 * fold it into round 2 and close round 2 without site 0 (still waiting for round 1's result).
 * Site 1 is removed: site 0, which holds no result of round 1 for site 1's chunks, re-sends its
 * round-1 contribution to their new owner, site 2, which holds site 1's round-2 results — the
 * fold included. Before RESULTs listed their folds, site 2 took the re-send as a late one and
 * folded it into round 3 as well: counted twice. Now every token submitted is counted at most
 * once, and the sites' results agree. */
static void test_late_fold_then_owner_lost(void)
{
    const uint32_t n = 3;
    setup(n, GT_CMP_FP32, 0, 0.5, 1, 0);
    const uint32_t after[] = {0, 2};
    double submitted = 0;
    make_deltas(n);
    for (uint32_t s = 0; s < n; s++) {
        CHECK_EQ_INT(gt_outer_submit(g_o[s], 0, g_delta[s], 100.0, 7, g_now), GT_OK);
        submitted += 100.0;
    }
    pump();
    pump();
    check_identical(n, 0);
    g_cut[1][0] = 1;
    make_deltas(n);
    for (uint32_t s = 1; s < n; s++) {
        CHECK_EQ_INT(gt_outer_submit(g_o[s], 1, g_delta[s], 100.0, 7, g_now), GT_OK);
        submitted += 100.0;
    }
    pump();
    g_now += 300000000ull;
    for (uint32_t s = 0; s < n; s++) CHECK_EQ_INT(gt_outer_progress(g_o[s], g_now), GT_OK);
    pump();
    CHECK_EQ_INT(gt_outer_submit(g_o[0], 1, g_delta[0], 100.0, 7, g_now), GT_OK);
    submitted += 100.0;
    pump(); /* late at sites 1 and 2: folded into round 2 */
    make_deltas(n);
    for (uint32_t s = 1; s < n; s++) {
        CHECK_EQ_INT(gt_outer_submit(g_o[s], 2, g_delta[s], 100.0, 7, g_now), GT_OK);
        submitted += 100.0;
    }
    pump();
    g_now += 300000000ull;
    for (uint32_t s = 1; s < n; s++) CHECK_EQ_INT(gt_outer_progress(g_o[s], g_now), GT_OK);
    pump();
    CHECK(gt_outer_result(g_o[0], 1, g_res[0]) == GT_ERR_AGAIN); /* site 1's chunks missing */
    g_dead[1] = 1;
    for (uint32_t k = 0; k < 2; k++)
        CHECK_EQ_INT(gt_outer_set_view(g_o[after[k]], 2, after, 2, g_now), GT_OK);
    for (int i = 0; i < 4; i++) {
        pump();
        g_now += 300000000ull;
        for (uint32_t k = 0; k < 2; k++) (void)gt_outer_progress(g_o[after[k]], g_now);
    }
    gt_outer_stats_t st;
    gt_outer_stats(g_o[0], &st);
    CHECK(st.resends > 0); /* its round-1 chunks of site 1's went to site 2 */
    gt_outer_stats(g_o[2], &st);
    uint64_t folded_before = st.late;
    /* and were known there as taken (site 1 owned 3 of the 9 chunks), not folded again */
    CHECK_EQ_INT(st.duplicate_deltas, 3);
    /* site 0 has rounds 1 and 2 now (site 2 forwarded the leaver's results); round 3 */
    make_deltas(n);
    for (uint32_t k = 0; k < 2; k++) {
        CHECK_EQ_INT(gt_outer_submit(g_o[after[k]], 3, g_delta[after[k]], 100.0, 7, g_now), GT_OK);
        submitted += 100.0;
    }
    for (int i = 0; i < 4; i++) {
        pump();
        g_now += 300000000ull;
        for (uint32_t k = 0; k < 2; k++) (void)gt_outer_progress(g_o[after[k]], g_now);
    }
    for (uint64_t r = 1; r <= 3; r++) check_identical(n, r);
    gt_outer_stats(g_o[2], &st);
    CHECK_EQ_INT(st.late, folded_before); /* round 3 folded nothing of round 1's */
    double t = result_tokens_upto(0, 3);
    CHECK_MSG(t <= submitted + 1e-6, "%.3f tokens in results of rounds 0-3, %.3f submitted", t,
              submitted);
    teardown(n);
}

/* A joiner that plans again (the anchor it planned from was gone) announces a later first round
 * from the same process: the ledger with it goes on. Before, each announcement restarted the
 * others' count of what they sent it while its own count of what it took went on, so its FIN
 * said it took more than they sent (the soak's seed 1697282378: 90 taken of 8 sent). A new life
 * (it left the view and came back) still starts the ledger again. */
static void test_join_replan_ledger(void)
{
    const uint32_t n = 3;
    setup(n, GT_CMP_FP32, 0, 1.0, 1, 0);
    g_dead[2] = 1;
    const uint32_t two[] = {0, 1}, three[] = {0, 1, 2};
    for (uint32_t s = 0; s < 2; s++)
        CHECK_EQ_INT(gt_outer_set_view(g_o[s], 1, two, 2, g_now), GT_OK);
    gt_outer_destroy(g_o[2]);
    CHECK_EQ_INT(gt_outer_create(&g_params[2], &g_o[2]), GT_OK);
    g_dead[2] = 0;
    for (uint32_t s = 0; s < n; s++)
        CHECK_EQ_INT(gt_outer_set_view(g_o[s], 2, three, 3, g_now), GT_OK);
    uint64_t first[MAXS];
    gt_outer_first_rounds(g_o[0], first);
    first[2] = UINT64_MAX;
    CHECK_EQ_INT(gt_outer_start_at(g_o[2], 1, first, g_now), GT_OK);
    pump();
    make_deltas(n);
    for (uint32_t s = 0; s < 2; s++) /* round 1's chunks of site 2 go to it */
        CHECK_EQ_INT(gt_outer_submit(g_o[s], 1, g_delta[s], 1.0, 7, g_now), GT_OK);
    pump();
    gt_outer_ledger_t sent, took;
    CHECK_EQ_INT(gt_outer_ledger(g_o[0], 2, &sent), GT_OK);
    CHECK(sent.sent > 0);
    CHECK_EQ_INT(gt_outer_start_at(g_o[2], 4, NULL, g_now), GT_OK); /* planned again */
    pump();
    gt_outer_first_rounds(g_o[0], first);
    CHECK_EQ_INT(first[2], 4);
    for (uint32_t s = 0; s < 2; s++) {
        CHECK_EQ_INT(gt_outer_ledger(g_o[s], 2, &sent), GT_OK);
        CHECK_EQ_INT(gt_outer_ledger(g_o[2], s, &took), GT_OK);
        CHECK_MSG(sent.sent == took.took, "site %u sent site 2 %llu DELTAs, site 2 took %llu", s,
                  (unsigned long long)sent.sent, (unsigned long long)took.took);
    }
    /* round 1 closes once, at the owners before the join (the senders re-sent to them) */
    for (int i = 0; i < 4; i++) {
        pump();
        g_now += 300000000ull;
        for (uint32_t s = 0; s < n; s++) (void)gt_outer_progress(g_o[s], g_now);
    }
    check_identical(n, 1);
    for (uint32_t s = 0; s < n; s++) CHECK_CLOSE(gt_outer_result_tokens(g_o[s], 1), 2.0, 1e-9, 0);
    /* a new life: site 2 leaves the view and comes back, announcing again */
    for (uint32_t s = 0; s < 2; s++)
        CHECK_EQ_INT(gt_outer_set_view(g_o[s], 3, two, 2, g_now), GT_OK);
    gt_outer_destroy(g_o[2]);
    CHECK_EQ_INT(gt_outer_create(&g_params[2], &g_o[2]), GT_OK);
    for (uint32_t s = 0; s < n; s++)
        CHECK_EQ_INT(gt_outer_set_view(g_o[s], 4, three, 3, g_now), GT_OK);
    gt_outer_first_rounds(g_o[0], first);
    first[2] = UINT64_MAX;
    CHECK_EQ_INT(gt_outer_start_at(g_o[2], 6, first, g_now), GT_OK);
    pump();
    CHECK_EQ_INT(gt_outer_ledger(g_o[0], 2, &sent), GT_OK);
    CHECK_EQ_INT(sent.sent, 0);
    teardown(n);
}

/* The queued DELTAs to `dst`, taken out of the queue (a link that holds them, as a mesh does
 * for a peer that restarts: it delivers them to the new life). */
static size_t hold_for(uint32_t dst, qmsg_t *out, size_t cap)
{
    size_t k = 0, w = 0;
    for (size_t i = 0; i < g_qn; i++) {
        if (g_q[i].dst == dst && g_q[i].msg.type == GT_WAN_MSG_DELTA && k < cap)
            out[k++] = g_q[i];
        else
            g_q[w++] = g_q[i];
    }
    g_qn = w;
    return k;
}

/* A restarted site gets DELTAs its previous life was sent (the mesh re-sends what was not
 * acknowledged to the peer's new life): contributions to rounds before its first round, which
 * their senders re-sent to those rounds' owners. The new life takes none of them — neither
 * before its start_at (the aggregation they opened is dropped) nor after it (not aggregated,
 * not folded late into a round of its own) — and does not count them as taken. Before, it
 * aggregated them and closed rounds it took no part in, or folded them late into its first
 * rounds: a contribution counted twice (bench/chaos.yaml seed 24466328). */
static void test_stale_life_delta(void)
{
    const uint32_t n = 3;
    setup(n, GT_CMP_FP32, 0, 1.0, 1, 0);
    qmsg_t held[64];
    size_t nh = 0;
    make_deltas(n);
    for (uint64_t r = 0; r < 2; r++) {
        for (uint32_t s = 0; s < n; s++)
            CHECK_EQ_INT(gt_outer_submit(g_o[s], r, g_delta[s], 1.0, 7, g_now), GT_OK);
        if (r == 1) nh = hold_for(0, held, 64); /* site 0 dies with these on the way */
        pump();
        pump();
        if (r == 0) check_identical(n, 0);
    }
    CHECK(nh >= 4); /* sites 1 and 2, each to site 0's chunks of round 1 */
    const uint32_t two[] = {1, 2}, three[] = {0, 1, 2};
    g_dead[0] = 1;
    for (uint32_t s = 1; s < n; s++)
        CHECK_EQ_INT(gt_outer_set_view(g_o[s], 1, two, 2, g_now), GT_OK);
    for (int i = 0; i < 4; i++) { /* round 1 closes at the new owners, without site 0 */
        pump();
        g_now += 300000000ull;
        for (uint32_t s = 1; s < n; s++) (void)gt_outer_progress(g_o[s], g_now);
    }
    for (uint32_t s = 1; s < n; s++) CHECK_EQ_INT(gt_outer_result(g_o[s], 1, g_res[s]), GT_OK);
    gt_outer_destroy(g_o[0]);
    CHECK_EQ_INT(gt_outer_create(&g_params[0], &g_o[0]), GT_OK);
    g_dead[0] = 0;
    for (uint32_t s = 0; s < n; s++)
        CHECK_EQ_INT(gt_outer_set_view(g_o[s], 2, three, 3, g_now), GT_OK);
    /* half of them before its start_at, half after */
    for (size_t i = 0; i < nh / 2; i++)
        gt_outer_deliver(g_o[0], &held[i].msg, held[i].buf, held[i].len, g_now);
    uint64_t first[MAXS];
    gt_outer_first_rounds(g_o[1], first);
    first[0] = UINT64_MAX;
    CHECK_EQ_INT(gt_outer_start_at(g_o[0], 3, first, g_now), GT_OK);
    for (size_t i = nh / 2; i < nh; i++)
        gt_outer_deliver(g_o[0], &held[i].msg, held[i].buf, held[i].len, g_now);
    for (size_t i = 0; i < nh; i++) free(held[i].buf);
    pump();
    gt_outer_stats_t st;
    gt_outer_stats(g_o[0], &st);
    CHECK_EQ_INT(st.stale_deltas, nh);
    CHECK_EQ_INT(st.on_time + st.late + st.open, 0);
    for (uint32_t s = 1; s < n; s++) {
        gt_outer_ledger_t sent, took;
        CHECK_EQ_INT(gt_outer_ledger(g_o[s], 0, &sent), GT_OK);
        CHECK_EQ_INT(gt_outer_ledger(g_o[0], s, &took), GT_OK);
        CHECK_MSG(sent.sent == took.took, "site %u sent site 0 %llu DELTAs, site 0 took %llu", s,
                  (unsigned long long)sent.sent, (unsigned long long)took.took);
    }
    /* its rounds from 3 on take the others' contributions, and nothing of round 1 in them */
    make_deltas(n);
    for (uint64_t r = 2; r < 4; r++) {
        for (uint32_t s = 0; s < n; s++) {
            if (s == 0 && r < 3) continue;
            CHECK_EQ_INT(gt_outer_submit(g_o[s], r, g_delta[s], 1.0, 7, g_now), GT_OK);
        }
        for (int i = 0; i < 4; i++) {
            pump();
            g_now += 300000000ull;
            for (uint32_t s = 0; s < n; s++) (void)gt_outer_progress(g_o[s], g_now);
        }
        if (r == 3) check_identical(n, r);
        for (uint32_t s = 1; r == 2 && s < n; s++)
            CHECK_EQ_INT(gt_outer_result(g_o[s], r, g_res[s]), GT_OK);
    }
    for (uint32_t s = 0; s < n; s++) CHECK_CLOSE(gt_outer_result_tokens(g_o[s], 3), 3.0, 1e-9, 0);
    gt_outer_stats(g_o[0], &st);
    CHECK_EQ_INT(st.late, 0);
    teardown(n);
}

static void fill_from(void *ctx, size_t off, size_t count, float *dst)
{
    memcpy(dst, (const float *)ctx + off, count * sizeof(float));
}

/* gt_outer_encode then gt_outer_post (diloco's encoder thread encodes while the WAN thread
 * delivers) makes the same frames and residual as gt_outer_submit: site 0 encodes each round,
 * the others' contributions are delivered to it before it posts, and every round's result equals
 * the one of a run where site 0 submitted at once. A post of a round that was not encoded, or
 * posted twice, is refused. */
static void test_encode_post(void)
{
    const uint32_t n = 3, rounds = 4;
    static float ref[4][N_PARAMS];
    static float deltas[4][MAXS][N_PARAMS];
    for (uint64_t r = 0; r < rounds; r++) {
        make_deltas(n);
        memcpy(deltas[r], g_delta, sizeof deltas[r]);
    }
    setup(n, GT_CMP_INT8, 1, 1.0, 1, 0);
    for (uint64_t r = 0; r < rounds; r++) {
        for (uint32_t s = 0; s < n; s++)
            CHECK_EQ_INT(gt_outer_submit(g_o[s], r, deltas[r][s], 1.0 + s, 77, g_now), GT_OK);
        pump();
        pump();
        check_identical(n, r);
        memcpy(ref[r], g_res[0], sizeof ref[r]);
    }
    teardown(n);
    setup(n, GT_CMP_INT8, 1, 1.0, 1, 0);
    CHECK_EQ_INT(gt_outer_post(g_o[0], 0, g_now), GT_ERR_INVALID); /* nothing encoded */
    for (uint64_t r = 0; r < rounds; r++) {
        CHECK_EQ_INT(gt_outer_encode(g_o[0], r, fill_from, deltas[r][0], 1.0, 77), GT_OK);
        for (uint32_t s = 1; s < n; s++)
            CHECK_EQ_INT(gt_outer_submit(g_o[s], r, deltas[r][s], 1.0 + s, 77, g_now), GT_OK);
        pump(); /* the others' DELTAs reach site 0 between its encode and its post */
        CHECK_EQ_INT(gt_outer_post(g_o[0], r + 1, g_now), GT_ERR_INVALID); /* not this round */
        CHECK_EQ_INT(gt_outer_post(g_o[0], r, g_now), GT_OK);
        CHECK_EQ_INT(gt_outer_post(g_o[0], r, g_now), GT_ERR_INVALID); /* already posted */
        pump();
        pump();
        check_identical(n, r);
        CHECK_MSG(memcmp(ref[r], g_res[0], sizeof ref[r]) == 0,
                  "round %llu: encode + post gave another result than submit",
                  (unsigned long long)r);
    }
    teardown(n);
}

int main(void)
{
    test_hold_results();
    test_contrib_frames();
    test_stale_life_delta();
    test_encode_post();
    test_join_replan_ledger();
    test_late_fold_then_owner_lost();
    test_forward_only_missing();
    test_fin_ledger();
    test_relay();
    test_relay_unreachable();
    test_detour();
    test_submit_order();
    test_duplicate_delta();
    test_resend_after_result();
    test_peer_next();
    test_mean_exact();
    test_int8_identical_and_close();
    test_nan_and_clip();
    test_late(1);
    test_late(0);
    test_chronic_straggler();
    test_lagging_gone();
    test_restart_in_view();
    test_last_round_unseen();
    test_owner_loss_resend();
    test_result_forwarding();
    test_handover_hold();
    test_hash_vote();
    test_hash_vote_no_majority();
    test_hash_vote_straggler();
    test_hostile();
    test_join();
    test_join_late();
    test_join_etcd();
    test_moved_deadline();
    test_quorum_by_view();
    free(g_q);
    return GT_TEST_DONE();
}
