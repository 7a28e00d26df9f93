/* test_chaos_cuts.c — launch's run-time check of a kill or SIGSTOP against the schedule's link
 * cuts (cli/launch_chaos.c, gt_chaos_cuts_break_majority), no processes: a SIGSTOP of one of
 * three sites while the link between the other two is cut leaves no site able to reach a
 * majority (the run every site left, soak seed 1505616293); the same cut well before or after
 * the fault, a cut of a link to the stopped site itself, or five sites leave a majority. */
#include "launch_chaos.h"
#include "gt_test.h"

#include <string.h>

static gt_chaos_ev_t cut(uint32_t a, uint32_t b, double start_s, double duration_s)
{
    gt_chaos_ev_t e;
    memset(&e, 0, sizeof e);
    e.kind = GT_CHAOS_CUT;
    e.target = a;
    e.peer = b;
    e.start_s = start_s;
    e.duration_s = duration_s;
    return e;
}

int main(void)
{
    const double lease = 5.0;
    /* a (0) stopped over [2, 6] s; the link c-b cut over [3, 8.9] s */
    gt_chaos_ev_t ev[4] = {cut(2, 1, 3.0, 5.9)};
    CHECK(gt_chaos_cuts_break_majority(ev, 1, 3, 1u << 0, 2.0, 6.0, lease) == 1);
    /* the same cut long after the stop (and its margin): a majority stays */
    ev[0] = cut(2, 1, 30.0, 5.9);
    CHECK(gt_chaos_cuts_break_majority(ev, 1, 3, 1u << 0, 2.0, 6.0, lease) == 0);
    /* ... or long before it */
    ev[0] = cut(2, 1, 1.0, 2.0);
    CHECK(gt_chaos_cuts_break_majority(ev, 1, 3, 1u << 0, 20.0, 24.0, lease) == 0);
    /* within the margin after it (a stopped site rejoins meanwhile): counted */
    ev[0] = cut(2, 1, 10.0, 2.0);
    CHECK(gt_chaos_cuts_break_majority(ev, 1, 3, 1u << 0, 2.0, 6.0, lease) == 1);
    /* a cut of a link to the stopped site: b and c still reach each other */
    ev[0] = cut(0, 1, 3.0, 5.9);
    CHECK(gt_chaos_cuts_break_majority(ev, 1, 3, 1u << 0, 2.0, 6.0, lease) == 0);
    /* c cut off from every site while a is stopped: only b trains, alone */
    ev[0] = cut(2, GT_CHAOS_ALL_PEERS, 3.0, 5.9);
    CHECK(gt_chaos_cuts_break_majority(ev, 1, 3, 1u << 0, 2.0, 6.0, lease) == 1);
    /* no cut at all: one of three down leaves a majority; two do not */
    CHECK(gt_chaos_cuts_break_majority(ev, 0, 3, 1u << 0, 2.0, 6.0, lease) == 0);
    CHECK(gt_chaos_cuts_break_majority(ev, 0, 3, 3u, 2.0, 6.0, lease) == 1);
    /* five sites, a down, the link c-b cut: b reaches b, d and e, three of five, and so does
     * c: every live site reaches a majority */
    ev[0] = cut(2, 1, 3.0, 5.9);
    CHECK(gt_chaos_cuts_break_majority(ev, 1, 5, 1u << 0, 2.0, 6.0, lease) == 0);
    /* ... but with d and e cut off as well, fewer than three sites reach three */
    ev[1] = cut(3, GT_CHAOS_ALL_PEERS, 4.0, 3.0);
    ev[2] = cut(4, GT_CHAOS_ALL_PEERS, 5.0, 3.0);
    CHECK(gt_chaos_cuts_break_majority(ev, 3, 5, 1u << 0, 2.0, 6.0, lease) == 1);
    /* other kinds of events are not cuts */
    ev[0].kind = GT_CHAOS_KILL;
    ev[1].kind = ev[2].kind = GT_CHAOS_SLOW;
    CHECK(gt_chaos_cuts_break_majority(ev, 3, 5, 1u << 0, 2.0, 6.0, lease) == 0);
    return GT_TEST_DONE();
}
