/* test_plan_model.c — the round model of `geotrain plan` (cli/plan_model.c) against timelines
 * worked out by hand from the rules it states (docs/plan.md): synchronous and overlapped
 * rounds over a latency-only link, a bandwidth-limited link with the emulator's token bucket,
 * a straggler cut off by the deadline, and the window extrapolation. Each expected number
 * below is derived in the comment above it. */
#include "gt_test.h"
#include "plan_model.h"

#include <math.h>
#include <string.h>

static gt_plan_chunk_t g_chunks[2] = {{1000, 0, 1000.0, 1100.0}, {1000, 1, 1000.0, 1100.0}};

/* Two sites, two chunks (one owned by each), free local work, no hop. */
static void base(gt_plan_model_t *m, double t_step, uint64_t H, uint64_t tau, uint64_t rounds)
{
    memset(m, 0, sizeof *m);
    m->n_sites = 2;
    for (int s = 0; s < 2; s++) m->sites[s].t_step = t_step;
    m->n_chunks = 2;
    m->chunks = g_chunks;
    m->H = H;
    m->tau = tau;
    m->rounds = rounds;
    m->quorum = 0.5;
    m->deadline_min_s = 10;
    m->deadline_max_s = 60;
    m->deadline_mad_k = 4;
    m->late_fold = 1;
    m->frame_bytes = 1048576;
    m->frame_overhead = 88;
    m->window = 64;
}

static void latency(gt_plan_model_t *m, double lat)
{
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) m->links[a][b].latency_s = lat;
}

static void test_synchronous(void)
{
    /* H = 10 steps of 10 ms, tau = 0, one-way latency 50 ms: each round computes 0.1 s, sends
     * (arrives 50 ms later, the chunk is complete and closes), the result comes back 50 ms
     * later: 0.1 s of wait per round. 3 rounds: train 0.6 s, utilization 0.5. Bytes: per round
     * each site sends one DELTA (1000) and one RESULT (1100) to the other. */
    gt_plan_model_t m;
    gt_plan_result_t r;
    base(&m, 0.01, 10, 0, 3);
    latency(&m, 0.05);
    CHECK_EQ_INT(gt_plan_simulate(&m, &r), 0);
    for (int s = 0; s < 2; s++) {
        CHECK_CLOSE(r.sites[s].compute_s, 0.3, 1e-12, 1e-9);
        CHECK_CLOSE(r.sites[s].wait_s, 0.3, 1e-12, 1e-9);
        CHECK_CLOSE(r.sites[s].utilization, 0.5, 1e-12, 1e-9);
        CHECK_CLOSE(r.sites[s].bytes_sent, 3 * 2100.0, 0, 1e-12);
    }
    CHECK_CLOSE(r.bytes_total, 12600.0, 0, 1e-12);
    CHECK_CLOSE(r.link_bytes[0][1], 6300.0, 0, 1e-12);
    CHECK_CLOSE(r.on_time, 3 * 2 * 2, 0, 0);

    /* The same with hop = 5 ms and 2 ms of encode + 3 ms of apply per round on the training
     * path: a round is 0.1 + 0.002 (encode) + 0.11 (two messages of 55 ms) + 0.003 (apply). */
    m.hop_s = 0.005;
    for (int s = 0; s < 2; s++) {
        m.sites[s].t_enc = 0.002;
        m.sites[s].t_apply = 0.003;
    }
    CHECK_EQ_INT(gt_plan_simulate(&m, &r), 0);
    CHECK_CLOSE(r.sites[0].wait_s, 3 * 0.11, 1e-12, 1e-9);
    CHECK_CLOSE(r.sites[0].local_s, 3 * 0.005, 1e-12, 1e-9);
    CHECK_CLOSE(r.sites[0].train_s, 3 * 0.215, 1e-12, 1e-9);
}

static void test_overlap(void)
{
    /* tau = 5: round r's result is applied at step (r+1)H + 5, 50 ms after the submit; the
     * exchange takes 100 ms, so rounds 0 and 1 wait 50 ms each and the last round (never
     * overlapped) waits the full 100 ms: wait 0.2 s, compute 0.3 s, utilization 0.6. */
    gt_plan_model_t m;
    gt_plan_result_t r;
    base(&m, 0.01, 10, 5, 3);
    latency(&m, 0.05);
    CHECK_EQ_INT(gt_plan_simulate(&m, &r), 0);
    CHECK_CLOSE(r.sites[0].wait_s, 0.2, 1e-12, 1e-9);
    CHECK_CLOSE(r.utilization_mean, 0.6, 1e-12, 1e-9);
    /* A window long enough (15 steps = 150 ms > 100 ms): only the last round waits. */
    m.tau = 15;
    m.H = 20;
    CHECK_EQ_INT(gt_plan_simulate(&m, &r), 0);
    CHECK_CLOSE(r.sites[0].wait_s, 0.1, 1e-12, 1e-9);
}

static void test_bandwidth(void)
{
    /* One round, rate 10,000 B/s, burst 500 B, no latency. At t0 = 0.1 each site sends a
     * DELTA of 1000 + 88 wire bytes: the bucket drains to E = t0 + 0.1088, the message has left
     * at E - 0.05 = t0 + 0.0588 and arrives then; the chunk closes and its RESULT (1100 + 88)
     * goes on the same link: E' = E + 0.1188, it leaves at E' - 0.05 = t0 + 0.1776. So each
     * site waits 0.1776 s. */
    gt_plan_model_t m;
    gt_plan_result_t r;
    base(&m, 0.01, 10, 0, 1);
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) {
            m.links[a][b].rate_Bps = 10000;
            m.links[a][b].burst_bytes = 500;
        }
    CHECK_EQ_INT(gt_plan_simulate(&m, &r), 0);
    CHECK_CLOSE(r.sites[0].wait_s, 0.1776, 1e-12, 1e-9);
    CHECK_CLOSE(r.sites[1].wait_s, 0.1776, 1e-12, 1e-9);
    CHECK_CLOSE(r.max_link_round_bytes, 2100.0, 0, 1e-12);
}

static void test_straggler(void)
{
    /* Site 1 is 1000x slower. Site 0 submits round r at T; both chunks get its contribution
     * first (quorum 1 of 2 at once, so the deadline is deadline_min = 50 ms) and close at
     * T + 50 ms: site 0 waits 50 ms in rounds 0 and 1. The run's last round waits 4 x deadline_max
     * (240 s) for a punctual site only (outer/, gt_outer_set_last_round). Rounds 0 and 1
     * closed at their deadlines without site 1: its share of late rounds is 0.3, then 0.51 — a
     * chronic straggler, not waited for — so round 2 closes as soon as site 0's contribution is
     * in, at 0.4 s: site 0 waited 0.1 s in all (utilization 0.3/0.4). Site 1 never waits.
     * Bytes: site 0 sent 3 DELTAs and the 3 RESULTs of its chunk; site 1 the 3 RESULTs and no
     * DELTA — site 0 had finished and left before site 1 submitted round 0 at 10 s. */
    gt_plan_model_t m;
    gt_plan_result_t r;
    base(&m, 0.01, 10, 0, 3);
    m.sites[1].t_step = 10.0 / 10 / 1; /* 1 s per step */
    m.deadline_min_s = 0.05;
    CHECK_EQ_INT(gt_plan_simulate(&m, &r), 0);
    CHECK_CLOSE(r.sites[0].wait_s, 0.1, 1e-12, 1e-9);
    CHECK_CLOSE(r.sites[0].utilization, 0.3 / 0.4, 1e-12, 1e-9);
    CHECK_CLOSE(r.sites[1].wait_s, 0, 1e-12, 0);
    CHECK_CLOSE(r.sites[0].bytes_sent, 3 * 2100.0, 0, 1e-12);
    CHECK_CLOSE(r.sites[1].bytes_sent, 3 * 1100.0, 0, 1e-12);
    /* Without the deadline bound (min 10 s) site 0 waits for site 1 instead. */
    m.deadline_min_s = 10;
    CHECK_EQ_INT(gt_plan_simulate(&m, &r), 0);
    CHECK_MSG(r.sites[0].wait_s > 5, "site 0 waited %g s for a site 100x slower",
              r.sites[0].wait_s);
}

static void test_folded_not_complete(void)
{
    /* A folded (late) contribution does not make a round complete: only on-time ones do
     * (outer/owner.c agg_has). Site 0 takes 0.1 s a round, site 1 0.35 s; no latency, quorum 1 of
     * 2, deadline 50 ms, 4 rounds. Site 0 submits rounds 0, 1, 2 at 0.10, 0.25, 0.40; each
     * closes 50 ms later at the deadline (site 1 has no on-time history). Site 1's round-0
     * contribution arrives at 0.35, after rounds 0 and 1 closed: it is folded into round 2,
     * which still waits for its deadline when site 0's contribution arrives at 0.40 (counted
     * as complete, it would wait for its deadline) — but rounds 0 and 1 closed at their
     * deadlines without site 1, so its share of late rounds is 0.51 by then: a chronic
     * straggler, and rounds 2 and 3 (the last) close as soon as site 0's contribution is in.
     * Wait: 2 x 0.05. */
    gt_plan_model_t m;
    gt_plan_result_t r;
    base(&m, 0.01, 10, 0, 4);
    m.sites[1].t_step = 0.035;
    m.deadline_min_s = 0.05;
    CHECK_EQ_INT(gt_plan_simulate(&m, &r), 0);
    CHECK_CLOSE(r.sites[0].wait_s, 0.1, 1e-12, 1e-9);
    CHECK_CLOSE(r.sites[0].train_s, 0.5, 1e-12, 1e-9);
    CHECK_MSG(r.late >= 2, "%g late contributions (site 1's round 0, both chunks)", r.late);
}

static void test_hello(void)
{
    /* The start check's hello: hello_bytes to every peer, once (2 sites: one peer each). */
    gt_plan_model_t m;
    gt_plan_result_t r, h;
    base(&m, 0.01, 10, 0, 2);
    CHECK_EQ_INT(gt_plan_simulate(&m, &r), 0);
    m.hello_bytes = 16;
    CHECK_EQ_INT(gt_plan_simulate(&m, &h), 0);
    CHECK_CLOSE(h.bytes_total - r.bytes_total, 2 * 16.0, 0, 0);
    CHECK_CLOSE(h.link_bytes[0][1] - r.link_bytes[0][1], 16.0, 0, 0);
    CHECK_CLOSE(h.sites[1].wait_s, r.sites[1].wait_s, 0, 0);
}

static void test_extrapolation(void)
{
    /* 1000 rounds simulated in a window of 16: the steady state is exact here (every round is
     * alike), so the extrapolated totals equal the whole run's: wait 0.1 s per round. */
    gt_plan_model_t m;
    gt_plan_result_t r, full;
    base(&m, 0.01, 10, 0, 1000);
    latency(&m, 0.05);
    m.window = 16;
    CHECK_EQ_INT(gt_plan_simulate(&m, &r), 0);
    CHECK_EQ_INT((int)r.rounds_simulated, 16);
    m.window = 0; /* 0: the whole run */
    CHECK_EQ_INT(gt_plan_simulate(&m, &full), 0);
    CHECK_EQ_INT((int)full.rounds_simulated, 1000);
    CHECK_CLOSE(r.sites[0].train_s, full.sites[0].train_s, 1e-9, 1e-9);
    CHECK_CLOSE(r.bytes_total, full.bytes_total, 0, 1e-12);
    CHECK_CLOSE(r.round_period_s, 0.2, 1e-12, 1e-9);
    /* Inconsistent models are refused. */
    m.tau = m.H;
    CHECK_EQ_INT(gt_plan_simulate(&m, &r), -1);
}

static void test_catch_up(void)
{
    /* outer.catch_up (diloco.c): site 1 is 3x slower (0.03 s a step, H = 10, τ = 4) and every
     * round waits for both (deadline 10 s). Without catch-up site 0 waits for site 1's whole
     * round every round. With it, site 1 ends each round at the first step after site 0's DELTA
     * arrives (no latency), or at its apply step if that comes first: both sites compute for
     * the whole run (site 1 about a third of the steps: 200 - skipped, each 0.03 s), and site 0
     * waits only at the last round (never overlapped), for site 1's step in progress. */
    gt_plan_model_t m;
    gt_plan_result_t fixed, cu;
    base(&m, 0.01, 10, 4, 20);
    m.sites[1].t_step = 0.03;
    CHECK_EQ_INT(gt_plan_simulate(&m, &fixed), 0);
    m.catch_up = 1;
    CHECK_EQ_INT(gt_plan_simulate(&m, &cu), 0);
    fprintf(stderr,
            "catch-up: site 0's utilization %.3f (fixed rounds %.3f), site 1 skipped %.0f of 200 "
            "steps (fixed %.0f), wait %.3f s\n",
            cu.sites[0].utilization, fixed.sites[0].utilization, cu.sites[1].steps_skipped,
            fixed.sites[1].steps_skipped, cu.sites[0].wait_s);
    CHECK_CLOSE(fixed.sites[1].steps_skipped, 0, 0, 0);
    CHECK_CLOSE(cu.sites[0].steps_skipped, 0, 0, 0);
    CHECK_CLOSE(cu.sites[1].compute_s, (200 - cu.sites[1].steps_skipped) * 0.03, 1e-9, 1e-9);
    CHECK_MSG(fabs(cu.sites[1].compute_s - cu.sites[0].compute_s) <= 2 * 0.03 + 1e-9,
              "catch-up: site 1 computed %.3f s, site 0 %.3f s", cu.sites[1].compute_s,
              cu.sites[0].compute_s);
    CHECK_MSG(fixed.sites[0].utilization < 0.5, "fixed rounds: site 0 busy %.3f",
              fixed.sites[0].utilization);
    CHECK_MSG(cu.sites[0].utilization > 0.95, "catch-up: site 0 busy %.3f",
              cu.sites[0].utilization);
    CHECK_MSG(cu.sites[0].wait_s <= 0.03 + 1e-9, "catch-up: site 0 waited %.3f s",
              cu.sites[0].wait_s);
}

int main(void)
{
    test_catch_up();
    test_synchronous();
    test_overlap();
    test_bandwidth();
    test_straggler();
    test_folded_not_complete();
    test_hello();
    test_extrapolation();
    return GT_TEST_DONE();
}
