/* policy.c — the rules that decide when a round closes, as pure functions over plain values.
 *
 * Who owns a chunk, how long an owner waits for stragglers, how many contributions make a
 * quorum, when an open round is due to close, and how a site's lateness is remembered: the
 * engine (owner.c, outer.c) calls these on its own state, and `geotrain plan` (cli/plan_model.c)
 * calls them on its simulated state, so the planner cannot drift from what the sites run. No
 * engine struct, no clock, no units: times are whatever the caller counts in (the engine
 * nanoseconds, the planner seconds), so the same arithmetic gives both their figures.
 */
#include "gt_outer.h"

#include <math.h>

uint32_t gt_outer_policy_owner(uint32_t preferred, uint32_t n_sites, uint64_t active,
                               uint64_t fallback)
{
    /* The next site in cyclic order from the preferred one: a view change moves only the
     * chunks of the site that left, and every site computes the same owner. */
    for (uint32_t k = 0; k < n_sites; k++) {
        uint32_t s = (preferred + k) % n_sites;
        if (s < 64 && (active >> s & 1)) return s;
    }
    for (uint32_t k = 0; k < n_sites; k++) {
        uint32_t s = (preferred + k) % n_sites;
        if (s < 64 && (fallback >> s & 1)) return s;
    }
    return preferred;
}

/* Insertion sort: n <= GT_OUTER_MAX_SITES, and no allocation. */
static void sort_doubles(double *v, size_t n)
{
    for (size_t i = 1; i < n; i++)
        for (size_t k = i; k > 0 && v[k - 1] > v[k]; k--) {
            double t = v[k];
            v[k] = v[k - 1];
            v[k - 1] = t;
        }
}

double gt_outer_policy_deadline(const double *lateness, size_t n, double mad_k, double lo,
                                double hi)
{
    double v[GT_OUTER_MAX_SITES], dev[GT_OUTER_MAX_SITES];
    if (n < 2) return 0;
    if (n > GT_OUTER_MAX_SITES) n = GT_OUTER_MAX_SITES;
    for (size_t i = 0; i < n; i++) v[i] = lateness[i];
    sort_doubles(v, n);
    /* The lower median: with two sites, the faster one, so one straggler of two is not the
     * measure of everyone's wait. */
    double med = v[(n - 1) / 2];
    for (size_t i = 0; i < n; i++) dev[i] = fabs(v[i] - med);
    sort_doubles(dev, n);
    double d = med + mad_k * dev[n / 2];
    return d < lo ? lo : (d > hi ? hi : d);
}

uint32_t gt_outer_policy_quorum(double quorum, uint32_t n_active)
{
    /* (the 1e-9: 0.5 x 4 sites is 2, not 3, whatever the rounding of 0.5 x 4) */
    double q = ceil(quorum * n_active - 1e-9);
    return q < 1 ? 1 : (uint32_t)q;
}

double gt_outer_policy_close_after(double deadline, double quorum_spread, double lo, double hi)
{
    double dl = deadline;
    if (quorum_spread >= 0) {
        /* A site that has become slow only now must not hold rounds up until the statistics
         * catch up: never longer than twice what the quorum took. */
        double q = 2 * quorum_spread;
        if (dl == 0 || q < dl) dl = q;
    } else if (dl == 0) {
        return INFINITY;
    }
    return dl < lo ? lo : (dl > hi ? hi : dl);
}

void gt_outer_policy_judge(double *late_share, uint64_t *late_judged, uint64_t round, int late)
{
    /* Once a round (a site's lateness is the same for every chunk of it), and forgetting old
     * rounds quickly: a site that was a straggler and is punctual again is waited for after
     * two or three rounds. */
    if (round + 1 <= *late_judged) return;
    *late_judged = round + 1;
    *late_share = 0.7 * *late_share + 0.3 * (late ? 1.0 : 0.0);
}

int gt_outer_policy_punctual(double late_share)
{
    return late_share < 0.5;
}

void gt_outer_policy_lateness(double *lateness, uint32_t *samples, double offset)
{
    uint32_t k = *samples;
    *lateness = k == 0 ? offset : 0.8 * *lateness + 0.2 * offset;
    if (k < UINT32_MAX) *samples = k + 1;
}
