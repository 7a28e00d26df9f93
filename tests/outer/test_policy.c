/* test_policy.c — the round policy (outer/policy.c) on hand-worked values: the owner's cyclic
 * rotation past sites that are out, the adaptive deadline from a known set of latenesses
 * (median + k·MAD, the lower median, bounds, fewer than two sites), quorum counts (the rounding
 * guard), close-after bounds (twice the quorum's spread, no history, no quorum), the
 * once-a-round judge and the lateness average. The engine (test_outer) and the planner
 * (test_plan_model) call these functions; here each rule is pinned down alone. */
#include "gt_outer.h"
#include "gt_test.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static void test_owner(void)
{
    /* Every site active: each chunk stays with its preferred site. */
    for (uint32_t pref = 0; pref < 4; pref++)
        CHECK_EQ_INT(gt_outer_policy_owner(pref, 4, 0xF, 0xF), pref);
    /* Site 1 of 4 out: only its chunks move, to the next site in cyclic order. */
    CHECK_EQ_INT(gt_outer_policy_owner(0, 4, 0xD, 0xF), 0);
    CHECK_EQ_INT(gt_outer_policy_owner(1, 4, 0xD, 0xF), 2);
    CHECK_EQ_INT(gt_outer_policy_owner(2, 4, 0xD, 0xF), 2);
    CHECK_EQ_INT(gt_outer_policy_owner(3, 4, 0xD, 0xF), 3);
    /* Sites 1 and 2 out: site 1's chunks skip over 2 to 3. */
    CHECK_EQ_INT(gt_outer_policy_owner(1, 4, 0x9, 0xF), 3);
    /* The rotation wraps: only site 0 active, the last site's chunks go to 0. */
    CHECK_EQ_INT(gt_outer_policy_owner(3, 4, 0x1, 0xF), 0);
    /* No site active for the round: the next site of the fallback (the view), in cyclic order
     * from the preferred one. */
    CHECK_EQ_INT(gt_outer_policy_owner(2, 4, 0, 0x2), 1);
    CHECK_EQ_INT(gt_outer_policy_owner(2, 4, 0, 0xA), 3);
    /* Neither: the preferred site; no sites at all: the same, without dividing by zero. */
    CHECK_EQ_INT(gt_outer_policy_owner(2, 4, 0, 0), 2);
    CHECK_EQ_INT(gt_outer_policy_owner(5, 0, 0, 0), 5);
    /* Sites above 63 cannot be in a mask: skipped, not shifted out of range. */
    CHECK_EQ_INT(gt_outer_policy_owner(63, 66, 1ull << 0, 0), 0);
    CHECK_EQ_INT(gt_outer_policy_owner(63, 64, 1ull << 63, 0), 63);
}

static void test_deadline(void)
{
    /* {100, 10, 30, 20}: sorted 10 20 30 100, the lower median 20; deviations 10 0 10 80,
     * sorted 0 10 10 80, MAD (the element at n/2) 10; k = 2: 20 + 2 x 10 = 40. */
    double late[4] = {100, 10, 30, 20};
    double copy[4];
    memcpy(copy, late, sizeof late);
    CHECK_CLOSE(gt_outer_policy_deadline(late, 4, 2, 0, 1000), 40, 0, 0);
    CHECK(memcmp(copy, late, sizeof late) == 0); /* the input is not sorted in place */
    /* Within [lo, hi]. */
    CHECK_CLOSE(gt_outer_policy_deadline(late, 4, 2, 50, 1000), 50, 0, 0);
    CHECK_CLOSE(gt_outer_policy_deadline(late, 4, 2, 0, 30), 30, 0, 0);
    /* A chronic straggler is an outlier, not a sample that stretches everyone's deadline:
     * {10, 11, 12, 13, 1000}: median 12, MAD 1, k = 3: 15. */
    double strag[5] = {1000, 12, 10, 13, 11};
    CHECK_CLOSE(gt_outer_policy_deadline(strag, 5, 3, 0, 1e9), 15, 0, 0);
    /* Two sites: the lower median is the faster one; MAD is the other's deviation. {1, 9}:
     * median 1, deviations 0 8, MAD 8, k = 4: 33. */
    double two[2] = {9, 1};
    CHECK_CLOSE(gt_outer_policy_deadline(two, 2, 4, 0, 1e9), 33, 0, 0);
    /* Fewer than two sites with history: 0 (no deadline yet), whatever the bounds. */
    CHECK_CLOSE(gt_outer_policy_deadline(two, 1, 4, 5, 1e9), 0, 0, 0);
    CHECK_CLOSE(gt_outer_policy_deadline(NULL, 0, 4, 5, 1e9), 0, 0, 0);
    /* Nanoseconds as the engine counts them: integral values come back integral. */
    double ns[3] = {2e8, 3e8, 5e8}; /* median 3e8, deviations 0 1e8 2e8: MAD 1e8 */
    CHECK_CLOSE(gt_outer_policy_deadline(ns, 3, 4, 1e8, 5e9), 7e8, 0, 0);
}

static void test_quorum(void)
{
    CHECK_EQ_INT(gt_outer_policy_quorum(0.5, 4), 2);
    CHECK_EQ_INT(gt_outer_policy_quorum(0.5, 3), 2);
    CHECK_EQ_INT(gt_outer_policy_quorum(1.0, 3), 3);
    CHECK_EQ_INT(gt_outer_policy_quorum(0.1, 3), 1);
    /* At least one, even with nobody active. */
    CHECK_EQ_INT(gt_outer_policy_quorum(0.5, 0), 1);
    /* The rounding guard: 0.28 x 25 is 7.000000000000001 in binary; the quorum is 7, not 8. */
    CHECK_EQ_INT(gt_outer_policy_quorum(0.28, 25), 7);
    CHECK_EQ_INT(gt_outer_policy_quorum(0.56, 25), 14);
    CHECK_EQ_INT(gt_outer_policy_quorum(2.0 / 3.0, 3), 2);
    CHECK_EQ_INT(gt_outer_policy_quorum(0.51, 2), 2);
}

static void test_close_after(void)
{
    /* No history and no quorum: never at the deadline (only when complete). */
    CHECK(isinf(gt_outer_policy_close_after(0, -1, 1, 100)));
    /* No history yet: twice the quorum's spread. */
    CHECK_CLOSE(gt_outer_policy_close_after(0, 3, 1, 100), 6, 0, 0);
    /* History: the deadline, unless twice the spread is shorter. */
    CHECK_CLOSE(gt_outer_policy_close_after(40, 30, 1, 100), 40, 0, 0);
    CHECK_CLOSE(gt_outer_policy_close_after(40, 10, 1, 100), 20, 0, 0);
    CHECK_CLOSE(gt_outer_policy_close_after(40, -1, 1, 100), 40, 0, 0);
    /* Within [lo, hi]: a quorum at once is still lo; a long deadline is cut at hi. */
    CHECK_CLOSE(gt_outer_policy_close_after(40, 0, 1, 100), 1, 0, 0);
    CHECK_CLOSE(gt_outer_policy_close_after(500, -1, 1, 100), 100, 0, 0);
    CHECK_CLOSE(gt_outer_policy_close_after(0, 80, 1, 100), 100, 0, 0);
    CHECK_CLOSE(gt_outer_policy_close_after(0.5, -1, 1, 100), 1, 0, 0);
}

static void test_judge(void)
{
    double share = 0;
    uint64_t judged = 0;
    gt_outer_policy_judge(&share, &judged, 0, 1);
    CHECK_CLOSE(share, 0.3, 1e-12, 0);
    CHECK_EQ_INT(judged, 1);
    /* Once a round: a second chunk of round 0 does not count again, late or not. */
    gt_outer_policy_judge(&share, &judged, 0, 1);
    gt_outer_policy_judge(&share, &judged, 0, 0);
    CHECK_CLOSE(share, 0.3, 1e-12, 0);
    CHECK(gt_outer_policy_punctual(share));
    /* Late again in round 1: 0.7 x 0.3 + 0.3 = 0.51, a chronic straggler now. */
    gt_outer_policy_judge(&share, &judged, 1, 1);
    CHECK_CLOSE(share, 0.51, 1e-12, 0);
    CHECK(!gt_outer_policy_punctual(share));
    /* On time in round 5 (rounds skipped count nothing): 0.7 x 0.51 = 0.357, punctual again. */
    gt_outer_policy_judge(&share, &judged, 5, 0);
    CHECK_CLOSE(share, 0.357, 1e-12, 0);
    CHECK_EQ_INT(judged, 6);
    CHECK(gt_outer_policy_punctual(share));
    /* An older round arriving now is not judged. */
    gt_outer_policy_judge(&share, &judged, 3, 1);
    CHECK_CLOSE(share, 0.357, 1e-12, 0);
    CHECK(gt_outer_policy_punctual(0.4999));
    CHECK(!gt_outer_policy_punctual(0.5));
}

static void test_lateness(void)
{
    double avg = 123; /* whatever was there: the first sample replaces it */
    uint32_t n = 0;
    gt_outer_policy_lateness(&avg, &n, 10);
    CHECK_CLOSE(avg, 10, 0, 0);
    CHECK_EQ_INT(n, 1);
    gt_outer_policy_lateness(&avg, &n, 20);
    CHECK_CLOSE(avg, 12, 1e-12, 0); /* 0.8 x 10 + 0.2 x 20 */
    CHECK_EQ_INT(n, 2);
    n = UINT32_MAX; /* the count saturates */
    gt_outer_policy_lateness(&avg, &n, 2);
    CHECK_CLOSE(avg, 10, 1e-12, 0); /* 0.8 x 12 + 0.2 x 2 */
    CHECK_EQ_INT(n, UINT32_MAX);
}

int main(void)
{
    test_owner();
    test_deadline();
    test_quorum();
    test_close_after();
    test_judge();
    test_lateness();
    return GT_TEST_DONE();
}
