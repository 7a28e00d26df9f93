/* test_emu.c — the WAN emulator core (wan/emu/emu.c) in virtual time: latency, jitter bounds
 * and determinism, token-bucket bandwidth and burst, loss as retransmission delay, cuts,
 * the hold timeout, in-order delivery, parameter checks and the delay queue. */
#include "emu_internal.h"
#include "gt_test.h"
#include "gt_topology.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MS  1000000ull
#define SEC 1000000000ull

static gt_wan_emu_t *make_emu(uint32_t n_sites, const gt_wan_emu_link_params_t *link, uint64_t seed)
{
    gt_wan_emu_params_t p = GT_WAN_EMU_PARAMS_INIT;
    p.n_sites = n_sites;
    p.link = *link;
    p.seed = seed;
    gt_wan_emu_t *emu = NULL;
    CHECK_EQ_INT(gt_wan_emu_create(&p, &emu), GT_OK);
    return emu;
}

static uint64_t sched(gt_wan_emu_t *emu, uint32_t src, uint32_t dst, size_t bytes, uint64_t now)
{
    uint64_t at = 0;
    gt_status_t st = gt_wan_emu_schedule(emu, src, dst, bytes, now, &at);
    CHECK_EQ_INT(st, GT_OK);
    return at;
}

static void test_params(void)
{
    gt_wan_emu_params_t p = GT_WAN_EMU_PARAMS_INIT;
    gt_wan_emu_t *emu = NULL;
    CHECK_EQ_INT(gt_wan_emu_create(&p, &emu), GT_ERR_INVALID); /* 0 sites */
    p.n_sites = 2;
    p.link.loss = 1.0;
    CHECK_EQ_INT(gt_wan_emu_create(&p, &emu), GT_ERR_INVALID);
    p.link.loss = 0.0;
    p.link.latency_ms = -1.0;
    CHECK_EQ_INT(gt_wan_emu_create(&p, &emu), GT_ERR_INVALID);
    p.link.latency_ms = NAN;
    CHECK_EQ_INT(gt_wan_emu_create(&p, &emu), GT_ERR_INVALID);
    p.link.latency_ms = 10.0;
    p.link.n_cuts = 1;
    p.link.cuts[0].start_s = 1.0;
    p.link.cuts[0].duration_s = 0.0;
    CHECK_EQ_INT(gt_wan_emu_create(&p, &emu), GT_ERR_INVALID);
    p.link.n_cuts = GT_WAN_EMU_MAX_CUTS + 1;
    CHECK_EQ_INT(gt_wan_emu_create(&p, &emu), GT_ERR_INVALID);
    CHECK(emu == NULL);
    p.link.n_cuts = 0;
    p.link.bandwidth_mbps = 100.0;
    CHECK_EQ_INT(gt_wan_emu_create(&p, &emu), GT_OK);
    uint64_t at = 0;
    CHECK_EQ_INT(gt_wan_emu_schedule(emu, 0, 2, 10, 0, &at), GT_ERR_INVALID);
    CHECK_EQ_INT(gt_wan_emu_link_set(emu, 2, 0, &p.link), GT_ERR_INVALID);
    gt_wan_emu_link_params_t got;
    CHECK_EQ_INT(gt_wan_emu_link_get(emu, 0, 1, &got), GT_OK);
    CHECK_CLOSE(got.latency_ms, 10.0, 0, 0);
    CHECK_CLOSE(got.rto_ms, 220.0, 1e-9, 0);         /* 2 x latency + 200 ms */
    CHECK_CLOSE(got.packet_bytes, 1448.0, 0, 0);     /* a TCP segment */
    CHECK_CLOSE(got.burst_bytes, 125000.0, 1e-6, 0); /* 10 ms at 12.5 MB/s */
    gt_wan_emu_destroy(emu);
    gt_wan_emu_destroy(NULL);
}

/* 50 ms one-way: every message exactly 50 ms; with ±5 ms jitter every message within
 * [45, 55] ms, mean 50 ms, spread like a uniform distribution. */
static void test_latency_jitter(void)
{
    gt_wan_emu_link_params_t l = GT_WAN_EMU_LINK_PARAMS_INIT;
    l.latency_ms = 50.0;
    gt_wan_emu_t *emu = make_emu(2, &l, 1);
    for (int i = 0; i < 100; i++) {
        uint64_t t = (uint64_t)i * 100 * MS;
        CHECK_EQ_INT(sched(emu, 0, 1, 1000, t) - t, 50 * MS);
    }
    gt_wan_emu_destroy(emu);

    l.jitter_ms = 5.0;
    emu = make_emu(2, &l, 7);
    const int n = 10000;
    double sum = 0.0, sum2 = 0.0, lo = 1e30, hi = 0.0;
    int below = 0;
    for (int i = 0; i < n; i++) {
        uint64_t t = (uint64_t)i * 100 * MS; /* far apart: no ordering effects */
        double d = (double)(sched(emu, 0, 1, 1000, t) - t) / 1e6;
        sum += d;
        sum2 += d * d;
        lo = fmin(lo, d);
        hi = fmax(hi, d);
        below += d < 50.0;
    }
    double mean = sum / n, sd = sqrt(sum2 / n - mean * mean);
    fprintf(stderr, "jitter: min %.3f max %.3f mean %.3f sd %.3f ms\n", lo, hi, mean, sd);
    CHECK(lo >= 45.0 - 1e-6 && hi <= 55.0 + 1e-6);
    CHECK(lo < 45.2 && hi > 54.8);            /* it really spreads over the whole range */
    CHECK_CLOSE(mean, 50.0, 0.1, 0);          /* sd of the mean: 2.9/100 = 0.03 ms */
    CHECK_CLOSE(sd, 5.0 / sqrt(3.0), 0.1, 0); /* uniform: jitter / sqrt(3) */
    CHECK(below > n / 2 - 200 && below < n / 2 + 200);
    gt_wan_emu_destroy(emu);

    /* jitter larger than the latency never gives a negative delay */
    l.latency_ms = 1.0;
    l.jitter_ms = 10.0;
    emu = make_emu(2, &l, 3);
    for (int i = 0; i < 1000; i++) {
        uint64_t t = 1 * SEC + (uint64_t)i * 100 * MS;
        CHECK(sched(emu, 0, 1, 10, t) >= t);
    }
    gt_wan_emu_destroy(emu);
}

/* Same seed, same sends: identical schedule; another seed: a different one; traffic on
 * another link changes nothing. */
static void test_determinism(void)
{
    gt_wan_emu_link_params_t l = GT_WAN_EMU_LINK_PARAMS_INIT;
    l.latency_ms = 30.0;
    l.jitter_ms = 10.0;
    l.bandwidth_mbps = 50.0;
    l.loss = 0.01;
    enum { N = 2000 };
    static uint64_t a[N], b[N], c[N];
    uint64_t *runs[3] = {a, b, c};
    uint64_t seeds[3] = {42, 42, 43};
    for (int r = 0; r < 3; r++) {
        gt_wan_emu_t *emu = make_emu(3, &l, seeds[r]);
        for (int i = 0; i < N; i++) {
            uint64_t t = (uint64_t)i * 3 * MS;
            if (r == 1) (void)sched(emu, 1, 0, 5000, t); /* other links' traffic */
            if (r == 1) (void)sched(emu, 0, 2, 5000, t);
            runs[r][i] = sched(emu, 0, 1, (size_t)(1000 + i * 37 % 20000), t);
        }
        gt_wan_emu_destroy(emu);
    }
    CHECK(memcmp(a, b, sizeof a) == 0);
    int differ = 0;
    for (int i = 0; i < N; i++) differ += a[i] != c[i];
    CHECK(differ > N / 2);
    /* directions of one site pair are independent streams too */
    gt_wan_emu_t *emu = make_emu(2, &l, 42);
    int same = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t t = (uint64_t)i * SEC;
        same += sched(emu, 0, 1, 100, t) == sched(emu, 1, 0, 100, t);
    }
    CHECK(same < 10);
    gt_wan_emu_destroy(emu);
}

/* 100 Mbit/s: 100 messages of 1 MiB sent at once arrive over 8.39 s (±1%); sent one after
 * another as fast as the link allows, the same. */
static void test_bandwidth(void)
{
    gt_wan_emu_link_params_t l = GT_WAN_EMU_LINK_PARAMS_INIT;
    l.latency_ms = 20.0;
    l.bandwidth_mbps = 100.0;
    const size_t msg = 1 << 20;
    const double expect_s = 100.0 * (double)msg * 8.0 / 100e6; /* 8.388608 s */
    gt_wan_emu_t *emu = make_emu(2, &l, 1);
    uint64_t last = 0, prev = 0;
    for (int i = 0; i < 100; i++) {
        last = sched(emu, 0, 1, msg, 0);
        CHECK(last >= prev);
        prev = last;
    }
    double took = (double)(last - 20 * MS) / 1e9;
    fprintf(stderr, "100 x 1 MiB at 100 Mbit/s: %.4f s (ideal %.4f s)\n", took, expect_s);
    CHECK_CLOSE(took, expect_s, 0, 0.01);
    gt_wan_emu_link_stats_t st;
    CHECK_EQ_INT(gt_wan_emu_link_stats(emu, 0, 1, &st), GT_OK);
    CHECK_EQ_INT(st.messages, 100);
    CHECK_EQ_INT(st.bytes, 100 * msg);
    gt_wan_emu_destroy(emu);

    /* A sender that sends each message when the previous one arrived (stop and wait)
     * gets far less: 1 MiB per (tx time + 20 ms). */
    emu = make_emu(2, &l, 1);
    uint64_t t = 0;
    for (int i = 0; i < 10; i++) t = sched(emu, 0, 1, msg, t);
    double per = (double)t / 10 / 1e9, ideal = (double)msg * 8 / 100e6 - 125000.0 * 8 / 100e6;
    CHECK_CLOSE(per, ideal + 0.020, 0, 0.01);
    gt_wan_emu_destroy(emu);

    /* Unlimited: size does not matter. */
    l.bandwidth_mbps = 0.0;
    emu = make_emu(2, &l, 1);
    CHECK_EQ_INT(sched(emu, 0, 1, (size_t)1 << 30, 0), 20 * MS);
    gt_wan_emu_destroy(emu);
}

/* The token bucket: a burst of burst_bytes goes at once, then the rate; idle time refills
 * it, up to the burst and no further. */
static void test_burst(void)
{
    gt_wan_emu_link_params_t l = GT_WAN_EMU_LINK_PARAMS_INIT;
    l.bandwidth_mbps = 80.0; /* 10 MB/s: 1 byte = 100 ns */
    l.burst_bytes = 1e6;
    gt_wan_emu_t *emu = make_emu(2, &l, 1);
    /* 1 MB leaves at once (the bucket is full), the next 1 MB takes 100 ms */
    CHECK_EQ_INT(sched(emu, 0, 1, 1000000, 0), 0);
    CHECK_EQ_INT(sched(emu, 0, 1, 1000000, 0), 100 * MS);
    /* 50 ms later the bucket has refilled half: 0.5 MB goes at once, 0.6 MB would not */
    CHECK_EQ_INT(sched(emu, 0, 1, 500000, 150 * MS), 150 * MS);
    CHECK_EQ_INT(sched(emu, 0, 1, 100000, 150 * MS), 160 * MS);
    /* after a long idle time, still only one burst */
    CHECK_EQ_INT(sched(emu, 0, 1, 1000000, 10 * SEC), 10 * SEC);
    CHECK_EQ_INT(sched(emu, 0, 1, 1000000, 10 * SEC), 10 * SEC + 100 * MS);
    gt_wan_emu_destroy(emu);
}

/* With jitter much larger than the spacing, messages would overtake each other; the
 * emulator keeps each link in order (and the other direction independent). */
static void test_in_order(void)
{
    gt_wan_emu_link_params_t l = GT_WAN_EMU_LINK_PARAMS_INIT;
    l.latency_ms = 50.0;
    l.jitter_ms = 40.0;
    gt_wan_emu_t *emu = make_emu(2, &l, 9);
    uint64_t prev = 0;
    int monotone = 1, held_back = 0;
    for (int i = 0; i < 5000; i++) {
        uint64_t t = (uint64_t)i * MS;
        uint64_t at = sched(emu, 0, 1, 100, t);
        monotone &= at >= prev;
        held_back += at == prev; /* only happens when it would have overtaken */
        prev = at;
    }
    CHECK(monotone);
    CHECK(held_back > 100);
    gt_wan_emu_destroy(emu);
}

/* Loss p per packet as retransmission delay: the expected fraction of messages is late by
 * exactly one (or more) RTOs, and the bytes resent cost bandwidth. */
static void test_loss(void)
{
    gt_wan_emu_link_params_t l = GT_WAN_EMU_LINK_PARAMS_INIT;
    l.latency_ms = 10.0;
    l.loss = 0.1;
    l.rto_ms = 200.0;
    l.packet_bytes = 1e6; /* one piece per message: P(late) = p, P(two rounds) = p^2 */
    gt_wan_emu_t *emu = make_emu(2, &l, 5);
    const int n = 20000;
    int late = 0, late2 = 0, odd = 0;
    for (int i = 0; i < n; i++) {
        uint64_t t = (uint64_t)i * 10 * SEC;
        uint64_t d = sched(emu, 0, 1, 1000, t) - t;
        uint64_t k = (d - 10 * MS) / (200 * MS);
        odd += (d - 10 * MS) % (200 * MS) != 0;
        late += k >= 1;
        late2 += k >= 2;
    }
    fprintf(stderr, "loss 0.1: %d/%d late, %d twice\n", late, n, late2);
    CHECK_EQ_INT(odd, 0);
    /* binomial sd: sqrt(0.09 * n) = 42; allow 5 sd */
    CHECK(abs(late - n / 10) < 5 * 43);
    CHECK(abs(late2 - n / 100) < 5 * 15);
    gt_wan_emu_link_stats_t st;
    CHECK_EQ_INT(gt_wan_emu_link_stats(emu, 0, 1, &st), GT_OK);
    CHECK_EQ_INT(st.retransmitted, late);
    gt_wan_emu_destroy(emu);

    /* ten packets per message at p = 0.01: P(late) = 1 - 0.99^10 = 0.0956 */
    l.loss = 0.01;
    l.packet_bytes = 1448;
    emu = make_emu(2, &l, 6);
    late = 0;
    for (int i = 0; i < n; i++) {
        uint64_t t = (uint64_t)i * 10 * SEC;
        late += sched(emu, 0, 1, 14480, t) - t > 10 * MS;
    }
    double want = (1.0 - pow(0.99, 10)) * n;
    CHECK(fabs(late - want) < 5 * sqrt(want * 0.9044));
    gt_wan_emu_destroy(emu);

    /* 100 Mbit/s at loss 0.1: the resent tenth costs throughput (rate x 0.9) */
    l.bandwidth_mbps = 100.0;
    l.loss = 0.1;
    l.latency_ms = 0.0;
    emu = make_emu(2, &l, 7);
    uint64_t last = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t at = sched(emu, 0, 1, 1 << 20, 0);
        if (at > last) last = at;
    }
    gt_wan_emu_link_stats_t s2;
    CHECK_EQ_INT(gt_wan_emu_link_stats(emu, 0, 1, &s2), GT_OK);
    /* the last arrival minus its own retransmission delay is the transmission time */
    double tx = (100.0 * (1 << 20) / 0.9 - 125000.0) * 8.0 / 100e6;
    CHECK((double)last / 1e9 >= tx * 0.99);
    gt_wan_emu_destroy(emu);
}

/* A cut [1 s, 3 s): messages sent into it wait for the end; a message in flight when it
 * starts is resent after it; a transmission it interrupts pauses; later ones are normal. */
static void test_cut(void)
{
    gt_wan_emu_link_params_t l = GT_WAN_EMU_LINK_PARAMS_INIT;
    l.latency_ms = 50.0;
    l.n_cuts = 1;
    l.cuts[0].start_s = 1.0;
    l.cuts[0].duration_s = 2.0;
    gt_wan_emu_params_t p = GT_WAN_EMU_PARAMS_INIT;
    p.n_sites = 2;
    p.link = l;
    p.start_ns = 5 * SEC; /* cut windows count from the emulator's start */
    gt_wan_emu_t *emu = NULL;
    CHECK_EQ_INT(gt_wan_emu_create(&p, &emu), GT_OK);
    const uint64_t t0 = 5 * SEC;
    CHECK_EQ_INT(sched(emu, 0, 1, 100, t0 + 500 * MS), t0 + 550 * MS);
    CHECK_EQ_INT(sched(emu, 0, 1, 100, t0 + 980 * MS), t0 + 3 * SEC + 50 * MS); /* in flight */
    CHECK_EQ_INT(sched(emu, 0, 1, 100, t0 + 1500 * MS), t0 + 3 * SEC + 50 * MS);
    CHECK_EQ_INT(sched(emu, 0, 1, 100, t0 + 2999 * MS), t0 + 3 * SEC + 50 * MS);
    CHECK_EQ_INT(sched(emu, 0, 1, 100, t0 + 3500 * MS), t0 + 3550 * MS);
    CHECK(gt_wan_emu_link_is_cut(emu, 0, 1, t0 + 2 * SEC));
    CHECK(!gt_wan_emu_link_is_cut(emu, 0, 1, t0 + 3 * SEC));
    CHECK(gt_wan_emu_link_is_cut(emu, 1, 0, t0 + 2 * SEC)); /* default applies both ways */
    gt_wan_emu_link_stats_t st;
    CHECK_EQ_INT(gt_wan_emu_link_stats(emu, 0, 1, &st), GT_OK);
    CHECK_EQ_INT(st.held_by_cut, 3);
    /* only this direction cut: the other direction is untouched after link_set */
    gt_wan_emu_link_params_t open_link = GT_WAN_EMU_LINK_PARAMS_INIT;
    open_link.latency_ms = 50.0;
    CHECK_EQ_INT(gt_wan_emu_link_set(emu, 1, 0, &open_link), GT_OK);
    CHECK_EQ_INT(sched(emu, 1, 0, 100, t0 + 1500 * MS), t0 + 1550 * MS);
    gt_wan_emu_destroy(emu);

    /* Bandwidth and a cut: 80 Mbit/s (10 MB/s), small burst. Two 10 MB messages at t=0
     * (1 s of transmission each), cut [0.5 s, 1.5 s): the link is idle during the cut, so
     * they finish at 2 s and 3 s (not 4 s: a cut pauses the link once). */
    gt_wan_emu_link_params_t bw = GT_WAN_EMU_LINK_PARAMS_INIT;
    bw.bandwidth_mbps = 80.0;
    bw.burst_bytes = 1.0;
    bw.n_cuts = 1;
    bw.cuts[0].start_s = 0.5;
    bw.cuts[0].duration_s = 1.0;
    emu = make_emu(2, &bw, 1);
    CHECK_CLOSE((double)sched(emu, 0, 1, 10000000, 0), 2e9, 1000, 0);
    CHECK_CLOSE((double)sched(emu, 0, 1, 10000000, 0), 3e9, 1000, 0);
    /* sent during the cut with the backlog still draining after it */
    CHECK_CLOSE((double)sched(emu, 0, 1, 10000000, 1 * SEC), 4e9, 1000, 0);
    gt_wan_emu_destroy(emu);

    /* Two overlapping cuts merge into one window. */
    bw.bandwidth_mbps = 0.0;
    bw.n_cuts = 2;
    bw.cuts[0].start_s = 1.0;
    bw.cuts[0].duration_s = 1.0;
    bw.cuts[1].start_s = 1.5;
    bw.cuts[1].duration_s = 1.0;
    emu = make_emu(2, &bw, 1);
    CHECK_EQ_INT(sched(emu, 0, 1, 10, 1200 * MS), 2500 * MS);
    gt_wan_emu_destroy(emu);
}

/* With a hold timeout, a cut longer than it makes the peer lost instead of holding. */
static void test_hold_timeout(void)
{
    gt_wan_emu_params_t p = GT_WAN_EMU_PARAMS_INIT;
    p.n_sites = 2;
    p.link.latency_ms = 10.0;
    p.link.n_cuts = 1;
    p.link.cuts[0].start_s = 1.0;
    p.link.cuts[0].duration_s = 2.0;
    p.hold_timeout_ms = 500.0;
    gt_wan_emu_t *emu = NULL;
    CHECK_EQ_INT(gt_wan_emu_create(&p, &emu), GT_OK);
    uint64_t at = 12345;
    CHECK_EQ_INT(gt_wan_emu_schedule(emu, 0, 1, 100, 1500 * MS, &at), GT_ERR_PEER_LOST);
    CHECK_EQ_INT(at, 12345);
    CHECK_EQ_INT(sched(emu, 0, 1, 100, 2700 * MS), 3010 * MS); /* held 300 ms: fine */
    gt_wan_emu_link_stats_t st;
    CHECK_EQ_INT(gt_wan_emu_link_stats(emu, 0, 1, &st), GT_OK);
    CHECK_EQ_INT(st.failed, 1);
    CHECK_EQ_INT(st.messages, 1);
    gt_wan_emu_destroy(emu);
}

static void test_queue(void)
{
    gt_wan_emu_queue_t *q = NULL;
    CHECK_EQ_INT(gt_wan_emu_queue_create(&q), GT_OK);
    void *item = NULL;
    uint64_t due = 0;
    CHECK_EQ_INT(gt_wan_emu_queue_pop(q, UINT64_MAX, &due, &item), GT_ERR_AGAIN);
    CHECK(gt_wan_emu_queue_next_due(q) == UINT64_MAX);
    enum { N = 3000 };
    static int ids[N];
    uint64_t x = 12345;
    uint64_t mindue = UINT64_MAX;
    for (int i = 0; i < N; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t d = (x >> 33) % 500; /* many equal due times */
        ids[i] = i;
        CHECK_EQ_INT(gt_wan_emu_queue_push(q, d, &ids[i]), GT_OK);
        if (d < mindue) mindue = d;
    }
    CHECK_EQ_INT(gt_wan_emu_queue_len(q), N);
    CHECK_EQ_INT(gt_wan_emu_queue_next_due(q), mindue);
    /* nothing before its time */
    uint64_t now = 250, last_due = 0;
    int last_id = -1, popped = 0, ordered = 1;
    while (gt_wan_emu_queue_pop(q, now, &due, &item) == GT_OK) {
        int id = *(int *)item;
        ordered &= due <= now && (due > last_due || (due == last_due && id > last_id));
        last_due = due;
        last_id = id;
        popped++;
    }
    CHECK(ordered);
    CHECK(gt_wan_emu_queue_next_due(q) > now);
    while (gt_wan_emu_queue_pop(q, UINT64_MAX, &due, &item) == GT_OK) {
        int id = *(int *)item;
        ordered &= due > last_due || (due == last_due && id > last_id);
        last_due = due;
        last_id = id;
        popped++;
    }
    CHECK(ordered);
    CHECK_EQ_INT(popped, N);
    CHECK_EQ_INT(gt_wan_emu_queue_len(q), 0);
    gt_wan_emu_queue_destroy(q);
    gt_wan_emu_queue_destroy(NULL);
}

/* The emulator and the queue together, as the transport drives them: messages scheduled
 * on two links leave the queue in arrival order and each link in send order. */
static void test_emu_with_queue(void)
{
    gt_wan_emu_link_params_t l = GT_WAN_EMU_LINK_PARAMS_INIT;
    l.latency_ms = 5.0;
    l.jitter_ms = 4.0;
    l.bandwidth_mbps = 1000.0;
    gt_wan_emu_t *emu = make_emu(3, &l, 11);
    gt_wan_emu_queue_t *q = NULL;
    CHECK_EQ_INT(gt_wan_emu_queue_create(&q), GT_OK);
    enum { N = 1000 };
    static int seq[N];
    for (int i = 0; i < N; i++) {
        seq[i] = i;
        uint32_t dst = 1 + (uint32_t)(i % 2);
        uint64_t at = sched(emu, 0, dst, 10000, (uint64_t)i * 100000);
        CHECK_EQ_INT(gt_wan_emu_queue_push(q, at, &seq[i]), GT_OK);
    }
    int last[3] = {-1, -1, -1}, ok = 1;
    uint64_t now = 0, prev_due = 0;
    void *item;
    uint64_t due;
    while (gt_wan_emu_queue_len(q)) {
        now = gt_wan_emu_queue_next_due(q); /* the progress loop's deadline */
        while (gt_wan_emu_queue_pop(q, now, &due, &item) == GT_OK) {
            int i = *(int *)item;
            int dst = 1 + i % 2;
            ok &= i > last[dst] && due >= prev_due;
            last[dst] = i;
            prev_due = due;
        }
    }
    CHECK(ok);
    gt_wan_emu_queue_destroy(q);
    gt_wan_emu_destroy(emu);
}

/* sites.yaml -> emulator: wan.emulation for every link, `links:` overrides both ways,
 * cuts counted from the start time, the seed. */
static void test_from_config(void)
{
    static const char yaml[] = "wan:\n"
                               "  emulation:\n"
                               "    enabled: true\n"
                               "    latency_ms: 40\n"
                               "    jitter_ms: 5\n"
                               "    bandwidth_mbps: 200\n"
                               "    loss: 0.01\n"
                               "    seed: 7\n"
                               "sites:\n"
                               "  - {name: us, address: 127.0.0.1:47001}\n"
                               "  - {name: eu, address: 127.0.0.1:47002}\n"
                               "  - {name: ap, address: 127.0.0.1:47003}\n"
                               "links:\n"
                               "  - between: [us, ap]\n"
                               "    latency_ms: 110\n"
                               "    bandwidth_mbps: 100\n"
                               "    cuts: [{start_s: 10, duration_s: 5}]\n";
    gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;
    lp.use_env = 0;
    gt_topo_config_t *cfg = NULL;
    gt_status_t st = gt_topo_load_string(yaml, strlen(yaml), "emu.yaml", &lp, &cfg);
    CHECK_EQ_INT(st, GT_OK);
    if (st != GT_OK) return;
    gt_wan_emu_t *emu = NULL;
    CHECK_EQ_INT(gt_wan_emu_create_from_config(cfg, 100 * SEC, 0.0, &emu), GT_OK);
    gt_wan_emu_link_params_t l;
    CHECK_EQ_INT(gt_wan_emu_link_get(emu, 0, 1, &l), GT_OK); /* us -> eu: defaults */
    CHECK_CLOSE(l.latency_ms, 40.0, 0, 0);
    CHECK_CLOSE(l.jitter_ms, 5.0, 0, 0);
    CHECK_CLOSE(l.bandwidth_mbps, 200.0, 0, 0);
    CHECK_CLOSE(l.loss, 0.01, 0, 0);
    CHECK_EQ_INT(l.n_cuts, 0);
    for (int dir = 0; dir < 2; dir++) { /* us <-> ap: the override, both ways */
        CHECK_EQ_INT(gt_wan_emu_link_get(emu, dir ? 2 : 0, dir ? 0 : 2, &l), GT_OK);
        CHECK_CLOSE(l.latency_ms, 110.0, 0, 0);
        CHECK_CLOSE(l.jitter_ms, 5.0, 0, 0); /* inherited */
        CHECK_CLOSE(l.bandwidth_mbps, 100.0, 0, 0);
        CHECK_EQ_INT(l.n_cuts, 1);
        CHECK(gt_wan_emu_link_is_cut(emu, dir ? 2 : 0, dir ? 0 : 2, 112 * SEC));
    }
    CHECK(!gt_wan_emu_link_is_cut(emu, 0, 1, 112 * SEC));
    /* a message into the cut arrives after it heals */
    CHECK(sched(emu, 0, 2, 100, 111 * SEC) >= 115 * SEC + 105 * MS);
    gt_wan_emu_destroy(emu);
    gt_topo_destroy(cfg);
}

int main(void)
{
    test_params();
    test_latency_jitter();
    test_determinism();
    test_bandwidth();
    test_burst();
    test_in_order();
    test_loss();
    test_cut();
    test_hold_timeout();
    test_queue();
    test_emu_with_queue();
    test_from_config();
    return GT_TEST_DONE();
}
