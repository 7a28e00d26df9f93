/* test_wan_groups.c — sites with different rank counts (docs/diloco.md#lanes-across-ranks). The
 * run has G = lcm(sites' ranks) WAN groups (gt_topo_wan_groups; 0 past GT_TOPO_MAX_GROUPS);
 * group g carries lanes l mod G = g, and rank k of a site of R ranks runs the groups
 * g mod R = k. Checked for many shapes, with the layout diloco/ and the outer engines cut
 * (G x F "ranks", gt_topo_layout_rank of "rank" g + G x f): the engines of a rank carry exactly
 * the lanes l mod R = k, each once, so a site's ranks cover the vector once whatever R is (the
 * reason every site sends the same bytes); a group's lanes do not depend on the site; and the
 * in-site all-gather's windows (R lanes from a multiple of R) hold lane l0 + j on rank j and
 * one fragment. */
#include "gt_test.h"
#include "gt_topology.h"

#include <stdlib.h>
#include <string.h>

static uint32_t groups_of(const uint32_t *ranks, uint32_t n)
{
    gt_topo_config_t c;
    gt_topo_site_t s[8];
    memset(&c, 0, sizeof c);
    memset(s, 0, sizeof s);
    c.n_sites = n;
    c.sites = s;
    for (uint32_t i = 0; i < n; i++) s[i].ranks = ranks[i];
    return gt_topo_wan_groups(&c);
}

/* One site of R ranks in a run of G groups, F fragments, `lanes` lanes. */
static void check_site(size_t n, uint32_t lanes, uint32_t sites, uint32_t G, uint32_t R, uint32_t F)
{
    gt_topo_layout_params_t p = GT_TOPO_LAYOUT_PARAMS_INIT;
    p.n_elems = n;
    p.n_lanes = lanes;
    p.n_sites = sites;
    p.ranks = G * F;
    p.align = 64;
    gt_topo_layout_t *lay = NULL;
    CHECK_EQ_INT(gt_topo_layout_create(&p, &lay), GT_OK);
    if (!lay) return;
    int *seen = calloc(lanes, sizeof *seen);
    size_t covered = 0;
    for (uint32_t k = 0; k < R; k++) {
        size_t rank_floats = 0, want = 0;
        for (uint32_t g = k; g < G; g += R) /* the groups rank k runs */
            for (uint32_t f = 0; f < F; f++) {
                gt_topo_layout_t *sub = NULL;
                CHECK_EQ_INT(gt_topo_layout_rank(lay, g + G * f, &sub), GT_OK);
                if (!sub) continue;
                rank_floats += sub->n_elems;
                gt_topo_layout_destroy(sub);
                for (uint32_t l = 0; l < lanes; l++)
                    if (lay->lanes[l].rank == g + G * f) {
                        CHECK_MSG(l % R == k, "G=%u R=%u: lane %u is on rank %u's group %u", G, R,
                                  l, k, g);
                        CHECK_EQ_INT(l % G, g);
                        CHECK_EQ_INT(gt_topo_lane_fragment(l, G, F), f);
                        seen[l]++;
                    }
            }
        for (uint32_t l = 0; l < lanes; l++)
            if (l % R == k) want += lay->lanes[l].count;
        CHECK_MSG(rank_floats == want,
                  "G=%u R=%u F=%u rank %u: engines hold %zu floats, its lanes %zu", G, R, F, k,
                  rank_floats, want);
        covered += rank_floats;
    }
    CHECK_EQ_INT(covered, n); /* the site's ranks carry the whole vector once */
    for (uint32_t l = 0; l < lanes; l++)
        CHECK_MSG(seen[l] == 1, "lane %u carried %d times", l, seen[l]);
    /* the all-gather's windows: R lanes from a multiple of R, one per rank, one fragment */
    for (uint32_t l0 = 0; l0 < lanes; l0 += R)
        for (uint32_t j = 0; j < R && l0 + j < lanes; j++) {
            CHECK_EQ_INT((lay->lanes[l0 + j].rank % G) % R, j);
            CHECK_EQ_INT(gt_topo_lane_fragment(l0 + j, G, F), gt_topo_lane_fragment(l0, G, F));
        }
    free(seen);
    gt_topo_layout_destroy(lay);
}

int main(void)
{
    const uint32_t r21[] = {2, 1}, r22[] = {2, 2}, r11[] = {1, 1, 1}, r23[] = {2, 3},
                   r421[] = {4, 2, 1}, r816[] = {8, 16}, r643[] = {64, 3}, r7_11[] = {7, 11};
    CHECK_EQ_INT(groups_of(r21, 2), 2);
    CHECK_EQ_INT(groups_of(r22, 2), 2); /* equal ranks: a group is a rank, as before */
    CHECK_EQ_INT(groups_of(r11, 3), 1);
    CHECK_EQ_INT(groups_of(r23, 2), 6);
    CHECK_EQ_INT(groups_of(r421, 3), 4);
    CHECK_EQ_INT(groups_of(r816, 2), 16);
    CHECK_EQ_INT(groups_of(r643, 2), 0); /* 192 > GT_TOPO_MAX_GROUPS */
    CHECK_EQ_INT(groups_of(r7_11, 2), 0);
    CHECK_EQ_INT(groups_of(NULL, 0), 1);

    /* 2 + 1 ranks (the configs/unequal-ranks.yaml shape), with and without fragments */
    check_site(100000, 2, 2, 2, 2, 1);
    check_site(100000, 2, 2, 2, 1, 1);
    check_site(100000, 4, 2, 2, 1, 2);
    check_site(100000, 4, 2, 2, 2, 2);
    /* 2 + 3 ranks: G = 6 */
    for (uint32_t R = 1; R <= 6; R++)
        if (6 % R == 0) check_site(123457, 12, 3, 6, R, 1);
    /* 4 + 2 + 1 ranks, fragments */
    check_site(99999, 16, 3, 4, 4, 2);
    check_site(99999, 16, 3, 4, 2, 2);
    check_site(99999, 16, 3, 4, 1, 4);
    /* lanes not a multiple of G */
    check_site(100000, 7, 2, 2, 1, 1);
    check_site(100000, 7, 2, 2, 2, 1);
    return GT_TEST_DONE();
}
