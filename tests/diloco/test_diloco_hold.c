/* test_diloco_hold.c — the anchor held for a joiner's rebase (diloco/state.c, dl_hold_keep),
 * on the library's internals, no network: when the history slot of round R - 1 is about to be
 * overwritten (by round R + 1) and some other site's first round is R, the slot's buffer moves
 * to the hold, served for R - 1 (dl_hold_lookup) until the site applies round R + 1 +
 * DL_HOLD_ROUNDS; without such a joiner, with streaming fragments, or when the slot is
 * rewritten with its own round, nothing is held. Before the hold, a joiner slower than its
 * peers found the anchor gone (test_launch_join_slow: one miss allowed, two seen). */
#include "diloco_internal.h"
#include "gt_test.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    gt_diloco_t *d = calloc(1, sizeof *d);
    gt_topo_config_t *cfg = calloc(1, sizeof *cfg);
    CHECK(d && cfg);
    if (!d || !cfg) return GT_TEST_DONE();
    cfg->n_sites = 3;
    d->cfg = cfg;
    d->name = "a";
    d->site = 0;
    d->F = 1;
    d->n_sub = 4;
    d->hold_round = -1;
    uint64_t first[GT_OUTER_MAX_SITES];
    for (int s = 0; s < GT_OUTER_MAX_SITES; s++) first[s] = UINT64_MAX;
    first[0] = first[1] = 0;
    first[2] = 5; /* c joined: its first round is 5, it rebases onto the anchor after 4 */

    float *s0 = malloc(8 * sizeof(float)), *s1 = malloc(8 * sizeof(float));
    CHECK(s0 && s1);
    if (!s0 || !s1) return GT_TEST_DONE();
    d->hist[0] = s0;
    d->hist[1] = s1;
    d->hist_round[0][0] = 4; /* slot 0: round 4, slot 1: round 5 */
    d->hist_round[0][1] = 5;

    /* round 5 rewritten with itself (a re-fetch): nothing held */
    dl_hold_keep(d, 1, 5, first);
    CHECK(d->hold == NULL);
    /* round 6 overwrites slot 0, which holds 4: c's rebase round, held */
    dl_hold_keep(d, 0, 6, first);
    CHECK(d->hold == s0);
    CHECK_EQ_INT(d->hold_round, 4);
    CHECK(d->hist[0] == NULL); /* the caller allocates a new slot */
    CHECK(dl_hold_lookup(d, 4) == s0);
    CHECK(dl_hold_lookup(d, 3) == NULL);
    CHECK(dl_hold_lookup(d, 5) == NULL);
    d->hist[0] = malloc(8 * sizeof(float));
    d->hist_round[0][0] = 6;
    /* round 7 overwrites slot 1 (round 5): no joiner starts at 6, so it goes; the hold stays
     * while rounds up to 5 + DL_HOLD_ROUNDS are applied */
    for (uint64_t r = 7; r <= 5 + DL_HOLD_ROUNDS; r++) {
        int k = (int)(r % 2);
        dl_hold_keep(d, k, r, first);
        CHECK_EQ_INT(d->hold_round, 4);
        CHECK(dl_hold_lookup(d, 4) == s0);
        d->hist_round[0][k] = (int64_t)r;
    }
    /* past that: released */
    uint64_t r = 6 + DL_HOLD_ROUNDS;
    dl_hold_keep(d, (int)(r % 2), r, first);
    CHECK(d->hold == NULL);
    CHECK(dl_hold_lookup(d, 4) == NULL);

    /* no joiner, or only this site's own first round: nothing held */
    first[2] = 0;
    first[0] = (uint64_t)d->hist_round[0][0] + 1;
    r = (uint64_t)d->hist_round[0][0] + 2;
    dl_hold_keep(d, (int)(r % 2), r, first);
    CHECK(d->hold == NULL);
    /* streaming fragments: nothing held */
    first[2] = first[0];
    d->F = 2;
    dl_hold_keep(d, (int)(r % 2), r, first);
    CHECK(d->hold == NULL);
    CHECK(dl_hold_lookup(d, d->hist_round[0][r % 2]) == NULL);
    d->F = 1;
    dl_hold_keep(d, (int)(r % 2), r, first);
    CHECK(d->hold != NULL); /* the same with one fragment: held */

    free(d->hist[0]);
    free(d->hist[1]);
    free(d->hold);
    free(cfg);
    free(d);
    return GT_TEST_DONE();
}
