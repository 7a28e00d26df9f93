/* test_diloco_hold.c — the anchor held for a joiner's rebase (diloco/state.c, dl_hold_keep),
 * on the library's internals, no network: when prev, holding round R - 1, is about to be
 * overwritten (by the sweep to round R + 1) and some other site's first round is R, its buffer
 * moves to the hold, served for R - 1 (dl_hold_lookup) until the site applies round R + 1 +
 * DL_HOLD_ROUNDS; without such a joiner, or with streaming fragments, nothing is held. Before the
 * hold, a joiner slower than its peers found the anchor gone (test_launch_join_slow: one miss
 * allowed, two seen). */
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

    float *s0 = malloc(8 * sizeof(float));
    CHECK(s0 != NULL);
    if (!s0) return GT_TEST_DONE();
    d->prev = s0;
    d->prev_round[0] = 4; /* θ_a and m hold round 5, prev round 4 */

    /* no site's first round is 5: the sweep to round 6 overwrites prev, nothing held */
    first[2] = 0;
    dl_hold_keep(d, 6, first);
    CHECK(d->hold == NULL);
    CHECK(d->prev == s0);
    /* c's first round is 5, so it rebases onto round 4: held, not overwritten */
    first[2] = 5;
    dl_hold_keep(d, 6, first);
    CHECK(d->hold == s0);
    CHECK_EQ_INT(d->hold_round, 4);
    CHECK(d->prev == NULL); /* the caller allocates a new one */
    CHECK_EQ_INT(d->prev_round[0], -1);
    CHECK(dl_hold_lookup(d, 4) == s0);
    CHECK(dl_hold_lookup(d, 3) == NULL);
    CHECK(dl_hold_lookup(d, 5) == NULL);
    d->prev = malloc(8 * sizeof(float));
    /* rounds 7 on overwrite prev (rounds 5 on): no joiner starts at 6, so they go; the hold
     * stays while rounds up to 5 + DL_HOLD_ROUNDS are applied */
    for (uint64_t r = 7; r <= 5 + DL_HOLD_ROUNDS; r++) {
        d->prev_round[0] = (int64_t)r - 2;
        dl_hold_keep(d, r, first);
        CHECK_EQ_INT(d->hold_round, 4);
        CHECK(dl_hold_lookup(d, 4) == s0);
    }
    /* past that: released */
    uint64_t r = 6 + DL_HOLD_ROUNDS;
    d->prev_round[0] = (int64_t)r - 2;
    dl_hold_keep(d, r, first);
    CHECK(d->hold == NULL);
    CHECK(dl_hold_lookup(d, 4) == NULL);

    /* no joiner, or only this site's own first round: nothing held */
    first[2] = 0;
    first[0] = (uint64_t)d->prev_round[0] + 1;
    dl_hold_keep(d, r, first);
    CHECK(d->hold == NULL);
    /* streaming fragments: nothing held */
    first[2] = first[0];
    d->F = 2;
    dl_hold_keep(d, r, first);
    CHECK(d->hold == NULL);
    CHECK(dl_hold_lookup(d, d->prev_round[0]) == NULL);
    d->F = 1;
    dl_hold_keep(d, r, first);
    CHECK(d->hold != NULL); /* the same with one fragment: held */

    free(d->prev);
    free(d->hold);
    free(cfg);
    free(d);
    return GT_TEST_DONE();
}
