/* test_diloco_carry.c — a removed site's kept work (diloco/carry.c), on the library's internals,
 * no network: what is kept is θ_s less θ_s at the submit when that round is still to apply,
 * else less the anchor; the next life adds it to its anchor scaled by 1/(1 + s) and its tokens
 * to its first contribution, and deletes the file first; a file that is corrupt, truncated,
 * of another run, or too many rounds old changes nothing and is deleted; nothing is kept when
 * nothing was trained since the submit, when the anchor was known bad, or with
 * outer.carry_max_rounds 0; a site that starts the run deletes a stale one. */
#include "diloco_internal.h"
#include "gt_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define N 1000

static gt_topo_config_t cfg;
static char dir[64];

/* One rank, one lane: θ_a and snap laid out as x (outer_step.c dl_layout). */
static gt_topo_lane_t lane = {0};
static gt_topo_layout_t layout = {0};
static uint32_t own_lane = 0;
static size_t apos = 0;

static gt_diloco_t *site(float *x, float *anchor, float *snap)
{
    gt_diloco_t *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    lane.offset = 0;
    lane.count = N;
    layout.n_elems = N;
    layout.n_lanes = 1;
    layout.lanes = &lane;
    d->layout = &layout;
    d->own_lanes = &own_lane;
    d->n_own = 1;
    d->apos = &apos;
    d->cfg = &cfg;
    d->name = "c";
    snprintf(d->site_dir, sizeof d->site_dir, "%s", dir);
    snprintf(d->run_id, sizeof d->run_id, "carry-test");
    d->n = d->n_sub = N;
    d->F = 1;
    d->ranks = 1;
    d->H = 10;
    d->training = 1;
    d->join_rebase = -1;
    d->fpending[0] = -1;
    d->x = x;
    d->anchor = anchor;
    d->snap = snap;
    return d;
}

static int exists(const char *name)
{
    char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

/* x[i] == base[i] + k * p[i] for every i, within rounding */
static int close_to(const float *x, const float *base, const float *p, float k)
{
    for (int i = 0; i < N; i++)
        if (x[i] < base[i] + k * p[i] - 1e-5f || x[i] > base[i] + k * p[i] + 1e-5f) return 0;
    return 1;
}

static void flip(long at)
{
    char p[128];
    snprintf(p, sizeof p, "%s/carry.gtcw", dir);
    FILE *f = fopen(p, "r+b");
    CHECK(f != NULL);
    if (!f) return;
    if (at < 0) {
        fseek(f, 0, SEEK_END);
        long size = ftell(f);
        fclose(f);
        CHECK(truncate(p, size + at) == 0);
        return;
    }
    fseek(f, at, SEEK_SET);
    int c = fgetc(f);
    fseek(f, at, SEEK_SET);
    fputc(c ^ 0x10, f);
    fclose(f);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/gt-carry-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    cfg.outer.carry_max_rounds = 4;
    static float a[N], snap[N], x[N], p[N], b[N], y[N];
    for (int i = 0; i < N; i++) {
        a[i] = 0.01f * (float)(i % 97);
        p[i] = 0.001f * (float)((i * 7) % 13) - 0.006f;
        snap[i] = a[i] + 0.5f;
        b[i] = a[i] - 0.02f;
    }

    /* 1. No submit pending: kept = x − θ_a. Joined 2 rounds later: added at 1/3. */
    gt_diloco_t *d = site(x, a, snap), *e = site(y, b, snap);
    CHECK(d && e);
    if (!d || !e) return GT_TEST_DONE();
    for (int i = 0; i < N; i++) x[i] = a[i] + p[i];
    d->anchor_round = 5;
    d->round_tokens = 640;
    CHECK_EQ_INT(dl_carry_save(d), GT_OK);
    CHECK(exists("carry.gtcw"));
    memcpy(y, b, sizeof y);
    e->round_tokens = 0;
    CHECK_EQ_INT(dl_carry_take(e, 7), GT_OK);
    CHECK(close_to(y, b, p, 1.0f / 3.0f));
    CHECK_EQ_INT(e->round_tokens, 640);
    CHECK_EQ_INT(e->carried_tokens, 640);
    CHECK(!exists("carry.gtcw")); /* used once */
    /* taken again: nothing there, nothing changes */
    memcpy(y, b, sizeof y);
    CHECK_EQ_INT(dl_carry_take(e, 7), GT_OK);
    CHECK(close_to(y, b, p, 0.0f));
    CHECK_EQ_INT(e->round_tokens, 640);

    /* 2. A submit pending (its round not applied yet): kept = x − θ_s at the submit. */
    for (int i = 0; i < N; i++) x[i] = snap[i] + p[i];
    d->fpending[0] = 6;
    d->round_tokens = 128;
    CHECK_EQ_INT(dl_carry_save(d), GT_OK);
    memcpy(y, b, sizeof y);
    e->round_tokens = e->carried_tokens = 0;
    CHECK_EQ_INT(dl_carry_take(e, 5), GT_OK); /* the same round: s = 0, added whole */
    CHECK(close_to(y, b, p, 1.0f));
    CHECK_EQ_INT(e->round_tokens, 128);
    /* a joiner before its rebase (fpending = its rebase round) submitted nothing: the anchor
     * it joined from, in snap since the join, is the base, though its rebase may already have
     * put the next one into θ_a */
    d->join_rebase = 7;
    for (int i = 0; i < N; i++) x[i] = snap[i] + p[i];
    CHECK_EQ_INT(dl_carry_save(d), GT_OK);
    memcpy(y, b, sizeof y);
    CHECK_EQ_INT(dl_carry_take(e, 5), GT_OK);
    CHECK(close_to(y, b, p, 1.0f));
    d->join_rebase = -1;
    d->fpending[0] = -1;
    for (int i = 0; i < N; i++) x[i] = a[i] + p[i];

    /* 3. Too old (5 rounds > 4), or from the future (a later anchor than the join's): not
     * used, and deleted. */
    e->round_tokens = 0;
    CHECK_EQ_INT(dl_carry_save(d), GT_OK);
    memcpy(y, b, sizeof y);
    CHECK_EQ_INT(dl_carry_take(e, 10), GT_OK);
    CHECK(close_to(y, b, p, 0.0f));
    CHECK_EQ_INT(e->round_tokens, 0);
    CHECK(!exists("carry.gtcw"));
    CHECK_EQ_INT(dl_carry_save(d), GT_OK);
    CHECK_EQ_INT(dl_carry_take(e, 4), GT_OK);
    CHECK(close_to(y, b, p, 0.0f));
    CHECK(!exists("carry.gtcw"));

    /* 4. A flipped byte in the floats, in the header, or a truncated file: unusable, deleted,
     * nothing added. */
    const long at[] = {200, 20, -7};
    for (int k = 0; k < 3; k++) {
        CHECK_EQ_INT(dl_carry_save(d), GT_OK);
        flip(at[k]);
        memcpy(y, b, sizeof y);
        CHECK_EQ_INT(dl_carry_take(e, 6), GT_OK);
        CHECK_MSG(close_to(y, b, p, 0.0f), "damage at %ld was used", at[k]);
        CHECK_EQ_INT(e->round_tokens, 0);
        CHECK(!exists("carry.gtcw"));
    }

    /* 5. Another run's, or another model's: not used. */
    CHECK_EQ_INT(dl_carry_save(d), GT_OK);
    snprintf(e->run_id, sizeof e->run_id, "another-run");
    CHECK_EQ_INT(dl_carry_take(e, 6), GT_OK);
    CHECK(close_to(y, b, p, 0.0f));
    snprintf(e->run_id, sizeof e->run_id, "carry-test");
    CHECK_EQ_INT(dl_carry_save(d), GT_OK);
    e->n = N - 1;
    CHECK_EQ_INT(dl_carry_take(e, 6), GT_OK);
    CHECK(close_to(y, b, p, 0.0f));
    CHECK_EQ_INT(e->round_tokens, 0);
    e->n = N;

    /* 6. Nothing kept: nothing trained since the submit, an anchor known bad, carrying off,
     * streaming fragments, sync-dp. */
    d->round_tokens = 0;
    CHECK_EQ_INT(dl_carry_save(d), GT_OK);
    CHECK(!exists("carry.gtcw"));
    d->round_tokens = 64;
    d->anchor_bad = 1;
    CHECK_EQ_INT(dl_carry_save(d), GT_OK);
    CHECK(!exists("carry.gtcw"));
    d->anchor_bad = 0;
    d->F = 2;
    CHECK_EQ_INT(dl_carry_save(d), GT_OK);
    CHECK(!exists("carry.gtcw"));
    d->F = 1;
    d->sync_dp = 1;
    CHECK_EQ_INT(dl_carry_save(d), GT_OK);
    CHECK(!exists("carry.gtcw"));
    d->sync_dp = 0;
    cfg.outer.carry_max_rounds = 0;
    CHECK_EQ_INT(dl_carry_save(d), GT_OK);
    CHECK(!exists("carry.gtcw"));
    cfg.outer.carry_max_rounds = 4;

    /* 7. A site that starts (or resumes) the run deletes one left from an earlier start. */
    CHECK_EQ_INT(dl_carry_save(d), GT_OK);
    CHECK(exists("carry.gtcw"));
    dl_carry_discard(e);
    CHECK(!exists("carry.gtcw"));

    free(d);
    free(e);
    rmdir(dir);
    return GT_TEST_DONE();
}
