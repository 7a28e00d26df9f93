/* test_fragments.c — the streaming-DiLoCo split and schedule (outer.fragments = F,
 * docs/diloco.md#streaming-fragments). The split: a layout cut for ranks x F "ranks" gives every
 * lane the rank l mod ranks and the fragment (l div ranks) mod F; every (rank, fragment) pair
 * carries the same number of lanes, fragments interleave along the vector (no fragment is one
 * end of the model), the fragments' sizes are within a lane of N/F, and gt_topo_layout_rank of
 * "rank" k + ranks x f packs exactly rank k's lanes of fragment f. The schedule: fragment f
 * syncs at r x H + offset_f, the offsets are H/F apart and end at H (one fragment: H, as
 * before), every step of a round has at most one fragment between its submit and its apply when
 * overlap_steps < H/F, so at most one fragment is on the wire at a time. */
#include "gt_test.h"
#include "gt_topology.h"

#include <stdlib.h>

static void check_split(size_t n, uint32_t lanes, uint32_t sites, uint32_t R, uint32_t F)
{
    gt_topo_layout_params_t p = GT_TOPO_LAYOUT_PARAMS_INIT;
    p.n_elems = n;
    p.n_lanes = lanes;
    p.n_sites = sites;
    p.ranks = R * F;
    p.align = 64;
    gt_topo_layout_t *lay = NULL;
    CHECK_EQ_INT(gt_topo_layout_create(&p, &lay), GT_OK);
    if (!lay) return;
    size_t size[64] = {0}, count[64][8] = {{0}};
    uint32_t prev = UINT32_MAX, switches = 0;
    for (uint32_t l = 0; l < lanes; l++) {
        uint32_t f = gt_topo_lane_fragment(l, R, F);
        CHECK(f < F);
        CHECK_EQ_INT(lay->lanes[l].rank % R, l % R);
        CHECK_EQ_INT(lay->lanes[l].rank / R, f);
        size[f] += lay->lanes[l].count;
        count[f][l % R]++;
        if (prev != UINT32_MAX && f != prev) switches++;
        prev = f;
    }
    size_t lane_max = 0;
    for (uint32_t l = 0; l < lanes; l++)
        if (lay->lanes[l].count > lane_max) lane_max = lay->lanes[l].count;
    for (uint32_t f = 0; f < F; f++) {
        for (uint32_t k = 0; k < R; k++)
            CHECK_MSG(count[f][k] == count[0][0] || lanes % (R * F) != 0,
                      "fragment %u rank %u has %zu lanes, fragment 0 rank 0 %zu", f, k, count[f][k],
                      count[0][0]);
        double ideal = (double)n / F;
        CHECK_MSG((double)size[f] <= ideal + lane_max * (double)(lanes / (R * F) + 1) &&
                      (double)size[f] + (double)lane_max >= ideal - lane_max,
                  "fragment %u holds %zu of %zu floats (F = %u)", f, size[f], n, F);
        /* rank k's engine for fragment f: exactly its lanes of the fragment, packed */
        for (uint32_t k = 0; k < R; k++) {
            gt_topo_layout_t *sub = NULL;
            CHECK_EQ_INT(gt_topo_layout_rank(lay, k + R * f, &sub), GT_OK);
            if (!sub) continue;
            CHECK_EQ_INT(sub->n_lanes, count[f][k]);
            size_t want = 0;
            for (uint32_t l = 0; l < lanes; l++)
                if (l % R == k && gt_topo_lane_fragment(l, R, F) == f) want += lay->lanes[l].count;
            CHECK_EQ_INT(sub->n_elems, want);
            gt_topo_layout_destroy(sub);
        }
    }
    /* interleaved: with L = R x F x m lanes, the fragment changes every R lanes */
    if (F > 1 && lanes % (R * F) == 0) CHECK_EQ_INT(switches, lanes / R - 1);
    gt_topo_layout_destroy(lay);
}

static void check_schedule(uint64_t H, uint32_t F, uint64_t tau)
{
    CHECK_EQ_INT(gt_topo_fragment_offset(H, F, F - 1), H);
    for (uint32_t f = 1; f < F; f++)
        CHECK_EQ_INT(gt_topo_fragment_offset(H, F, f) - gt_topo_fragment_offset(H, F, f - 1),
                     H / F);
    /* Over 4 rounds: which fragments are in flight (submitted, not yet applied) at each step,
     * and every fragment submits each round exactly once. */
    uint64_t steps = 4 * H;
    int submits[64] = {0};
    for (uint64_t s = 1; s <= steps; s++) {
        int in_flight = 0;
        for (uint32_t f = 0; f < F; f++) {
            uint64_t off = gt_topo_fragment_offset(H, F, f);
            if (s >= off && (s - off) % H == 0) submits[f]++;
            /* in flight during [submit, submit + tau) */
            if (s >= off && (s - off) % H < tau) in_flight++;
        }
        CHECK_MSG(in_flight <= 1, "H=%llu F=%u tau=%llu: %d fragments in flight at step %llu",
                  (unsigned long long)H, F, (unsigned long long)tau, in_flight,
                  (unsigned long long)s);
    }
    for (uint32_t f = 0; f < F; f++) CHECK_EQ_INT(submits[f], 4);
}

int main(void)
{
    check_split(100000, 8, 3, 1, 1);
    check_split(100000, 8, 3, 1, 2);
    check_split(100000, 8, 3, 1, 4);
    check_split(100000, 8, 3, 2, 4);
    check_split(123457, 16, 5, 2, 2);
    check_split(100000, 12, 3, 1, 4); /* lanes not a multiple of F: still every fragment */
    CHECK_EQ_INT(gt_topo_lane_fragment(5, 2, 2), 0);
    CHECK_EQ_INT(gt_topo_lane_fragment(3, 1, 2), 1);
    check_schedule(10, 1, 2);
    check_schedule(10, 2, 2);
    check_schedule(20, 4, 4);
    check_schedule(270, 3, 25);
    check_schedule(64, 64, 0);
    return GT_TEST_DONE();
}
