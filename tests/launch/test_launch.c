/* test_launch.c — `geotrain launch` end to end with real etcd, for one transport (argv[1]):
 * three sites train a tiny model over the emulated, encrypted WAN; then again with site c
 * killed (SIGKILL) mid-run, c joining late, and c killed and restarted (it joins again). Checks:
 * every site that was not killed finishes; after every round the anchors of all sites are
 * bit-identical (invariant I1, from SITE/anchors.jsonl); every contribution is accounted for (I3);
 * the same with streaming fragments (outer.fragments = 2), a kill, a corruption and a join;
 * the survivors did not wait much longer than the time to notice the loss; summary.json has the
 * bandwidth report. */
#include "gt_test.h"

#include <jansson.h>
#include <stdlib.h>
#include <unistd.h>

static const char *g_transport;

static json_t *load(const char *dir, const char *file)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    json_t *j = json_load_file(path, 0, NULL);
    CHECK_MSG(j != NULL, "cannot read %s", path);
    return j;
}

/* Every one of `want` contributions in the run's summary was folded: on time, or late (past
 * the deadline floor on a loaded machine: 6 of 216 once in the parallel suite), none dropped
 * or left open at the end. */
static void check_all_folded(json_t *sum, int64_t want)
{
    json_t *c = json_object_get(sum, "contributions");
    CHECK_EQ_INT(json_integer_value(json_object_get(c, "on_time")) +
                     json_integer_value(json_object_get(c, "late")),
                 want);
    CHECK_EQ_INT(json_integer_value(json_object_get(c, "dropped")), 0);
    CHECK_EQ_INT(json_integer_value(json_object_get(c, "open_at_end")), 0);
}

/* Reads SITE/anchors.jsonl into hashes[round] (as strings); returns the rounds read. */
static int anchors(const char *run, const char *site, char hashes[][24], int max)
{
    char path[2048], line[256];
    snprintf(path, sizeof path, "%s/%s/anchors.jsonl", run, site);
    FILE *f = fopen(path, "r");
    int n = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f) && n < max) {
        json_t *j = json_loads(line, 0, NULL);
        int r = (int)json_integer_value(json_object_get(j, "round"));
        const char *h = json_string_value(json_object_get(j, "anchor_hash"));
        CHECK(r == n && h != NULL);
        if (h) snprintf(hashes[n], 24, "%s", h);
        json_decref(j);
        n++;
    }
    fclose(f);
    return n;
}

/* Reads SITE/anchors.jsonl whatever rounds it holds (a site that joined, or came back, logs
 * from its first round on): hashes[round], have[round] = times logged; returns the lines. */
/* The round of the last anchors.jsonl line carrying "tokens" (an applied result) before the
 * first line without it (an anchor fetched by a joining life); -1: none. */
static int first_life_last(const char *run, const char *site)
{
    char path[2048], line[256];
    snprintf(path, sizeof path, "%s/%s/anchors.jsonl", run, site);
    FILE *f = fopen(path, "r");
    int last = -1;
    while (f && fgets(line, sizeof line, f)) {
        json_t *j = json_loads(line, 0, NULL);
        int applied = json_object_get(j, "tokens") != NULL;
        int r = (int)json_integer_value(json_object_get(j, "round"));
        json_decref(j);
        if (!applied) break;
        last = r;
    }
    if (f) fclose(f);
    return last;
}

static int anchors_any(const char *run, const char *site, char hashes[][24], int *have, int max)
{
    char path[2048], line[256];
    snprintf(path, sizeof path, "%s/%s/anchors.jsonl", run, site);
    FILE *f = fopen(path, "r");
    int n = 0;
    for (int r = 0; r < max; r++) have[r] = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f)) {
        json_t *j = json_loads(line, 0, NULL);
        int r = (int)json_integer_value(json_object_get(j, "round"));
        const char *h = json_string_value(json_object_get(j, "anchor_hash"));
        CHECK(r >= 0 && r < max && h != NULL);
        if (r >= 0 && r < max && h) {
            /* a round logged twice (before a crash and again after the join) must agree */
            if (have[r]) CHECK_MSG(strcmp(hashes[r], h) == 0, "%s logged round %d twice", site, r);
            snprintf(hashes[r], 24, "%s", h);
            have[r]++;
        }
        json_decref(j);
        n++;
    }
    fclose(f);
    return n;
}

static int run_launch_rc(const char *tmp, const char *name, const char *extra, char *run, size_t n,
                         char **out_p);

static void run_launch(const char *tmp, const char *name, const char *extra, char *run, size_t n)
{
    char *out = NULL;
    int rc = run_launch_rc(tmp, name, extra, run, n, &out);
    CHECK_MSG(rc == 0, "launch exited %d:\n%s", rc, out ? out : "");
    free(out);
}

/* `geotrain launch` of three_sites.yaml with `extra`; its exit status, its output in *out_p. */
static int run_launch_rc(const char *tmp, const char *name, const char *extra, char *run, size_t n,
                         char **out_p)
{
    const char *src = getenv("GT_SOURCE_DIR"), *cli = getenv("GT_CLI");
    char cmd[8192], *out = NULL;
    snprintf(run, n, "%s/%s", tmp, name);
    /* steps of at least 6 ms (the rest slept): the runs keep the same timeline on a fast
     * machine, a slow one, or beside other tests, and use a fraction of a core */
    snprintf(cmd, sizeof cmd,
             "%s launch %s/tests/launch/three_sites.yaml --run-dir %s --set wan.transport=%s "
             "--set inner.emulated_step_ms=6 %s",
             cli, src, run, g_transport, extra);
    int rc = gt_test_run(cmd, &out);
    fprintf(stderr, "---- %s\n%s\n", cmd, out ? out : "");
    *out_p = out;
    return rc;
}

static double g_bytes_one_rank; /* WAN bytes of the one-rank run, for the multi-rank one */

static void test_three_sites(const char *tmp)
{
    char run[1024];
    run_launch(tmp, "all", "", run, sizeof run);
    json_t *sum = load(run, "summary.json");
    if (!sum) return;
    const char *sites[] = {"a", "b", "c"};
    char h[3][16][24];
    int rounds[3];
    for (int i = 0; i < 3; i++) {
        json_t *s = json_object_get(json_object_get(sum, "sites"), sites[i]);
        CHECK_STR_CONTAINS(json_string_value(json_object_get(s, "status")), "finished");
        CHECK_EQ_INT(json_integer_value(json_object_get(s, "rounds_applied")), 6);
        rounds[i] = anchors(run, sites[i], h[i], 16);
        CHECK_EQ_INT(rounds[i], 6);
        double loss = json_real_value(json_object_get(s, "final_loss"));
        fprintf(stderr, "site %s: final loss %.4f\n", sites[i], loss);
        CHECK(loss > 0 && loss < 4.0); /* ln 64 = 4.16 for an untrained tiny model */
    }
    for (int r = 0; r < 6; r++)
        CHECK_MSG(strcmp(h[0][r], h[1][r]) == 0 && strcmp(h[0][r], h[2][r]) == 0,
                  "round %d anchors differ: %s %s %s", r, h[0][r], h[1][r], h[2][r]);
    json_t *c = json_object_get(sum, "contributions");
    /* 6 rounds x (2 lanes x 3 chunks) x 3 contributions, all on time, none lost. */
    CHECK_EQ_INT(json_integer_value(json_object_get(c, "on_time")), 6 * 6 * 3);
    CHECK_EQ_INT(json_integer_value(json_object_get(c, "late")), 0);
    CHECK_EQ_INT(json_integer_value(json_object_get(c, "dropped")), 0);
    CHECK_EQ_INT(json_integer_value(json_object_get(sum, "hash_mismatches")), 0);
    CHECK(json_integer_value(json_object_get(sum, "hash_checks")) >= 3 * 5);
    double saving = json_real_value(json_object_get(sum, "bandwidth_saving"));
    fprintf(stderr, "bandwidth saving against sync-dp: %.1fx\n", saving);
    CHECK(saving > 5.0); /* int8 both ways every 10 steps vs bf16 every step: ~20x */
    g_bytes_one_rank = json_number_value(json_object_get(sum, "wan_bytes_sent"));
    json_decref(sum);

    /* geotrain report draws the run. */
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s report %s", getenv("GT_CLI"), run);
    CHECK_EQ_INT(gt_test_run(cmd, &out), 0);
    free(out);
    const char *pngs[] = {"loss.png", "wan_bytes.png", "utilization.png"};
    for (int i = 0; i < 3; i++) {
        char path[2048];
        unsigned char sig[8] = {0};
        snprintf(path, sizeof path, "%s/plots/%s", run, pngs[i]);
        FILE *f = fopen(path, "rb");
        CHECK_MSG(f != NULL, "no %s", path);
        if (!f) continue;
        CHECK(fread(sig, 1, 8, f) == 8 && memcmp(sig, "\x89PNG\r\n\x1a\n", 8) == 0);
        fseek(f, 0, SEEK_END);
        CHECK(ftell(f) > 5000); /* axes, curves and a legend, not an empty image */
        fclose(f);
    }
}

/* Site a (the lowest index: b and c dial it) is killed at round 2 and not started again: b and
 * c go on. The first of them whose redial a's port refuses while it waits for a's chunks evicts
 * a at once; before, both waited for a's lease (3 s) to run out (4.3 s of waiting each, 0.8 s
 * with the eviction). */
static void test_kill(const char *tmp)
{
    char run[1024];
    run_launch(tmp, "kill", "--kill a@2", run, sizeof run);
    json_t *sum = load(run, "summary.json");
    if (!sum) return;
    char h[2][16][24];
    const char *sites[] = {"b", "c"};
    int evicted = 0;
    for (int i = 0; i < 2; i++) {
        json_t *s = json_object_get(json_object_get(sum, "sites"), sites[i]);
        CHECK_STR_CONTAINS(json_string_value(json_object_get(s, "status")), "finished");
        CHECK_EQ_INT(anchors(run, sites[i], h[i], 16), 6);
        double wait = json_real_value(json_object_get(s, "wait_s"));
        fprintf(stderr, "site %s waited %.2f s in total\n", sites[i], wait);
        CHECK_MSG(wait < 2.5, "site %s waited %.2f s (a's lease is 3 s)", sites[i], wait);
        char path[1200], line[1024];
        snprintf(path, sizeof path, "%s/logs/%s.log", run, sites[i]);
        FILE *f = fopen(path, "r");
        while (f && fgets(line, sizeof line, f))
            evicted |= strstr(line, "site a is gone (its address") != NULL;
        if (f) fclose(f);
    }
    CHECK_MSG(evicted, "neither b nor c evicted the killed a");
    for (int r = 0; r < 6; r++) CHECK(strcmp(h[0][r], h[1][r]) == 0);
    json_t *a = json_object_get(json_object_get(sum, "sites"), "a");
    CHECK(json_is_true(json_object_get(a, "killed")));
    json_decref(sum);
}

/* Silent corruption of one site's anchor (chaos): the hash vote catches it, the site re-fetches
 * the anchor from a peer, and from the next round on every anchor is identical again (I1). */
static void test_corrupt(const char *tmp)
{
    char run[1024];
    run_launch(tmp, "corrupt", "--corrupt-anchor b@2", run, sizeof run);
    json_t *sum = load(run, "summary.json");
    if (!sum) return;
    char h[3][16][24];
    const char *sites[] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++) CHECK_EQ_INT(anchors(run, sites[i], h[i], 16), 6);
    for (int r = 0; r < 6; r++) {
        CHECK(strcmp(h[0][r], h[2][r]) == 0);
        if (r == 2)
            CHECK_MSG(strcmp(h[0][r], h[1][r]) != 0, "the corruption did not happen");
        else
            CHECK_MSG(strcmp(h[0][r], h[1][r]) == 0, "round %d: b's anchor %s, a's %s", r, h[1][r],
                      h[0][r]);
    }
    json_t *b = json_object_get(json_object_get(sum, "sites"), "b");
    CHECK_EQ_INT(json_integer_value(json_object_get(b, "anchor_refetches")), 1);
    CHECK_EQ_INT(json_integer_value(json_object_get(sum, "hash_mismatches")), 1);
    json_decref(sum);
}

/* Silent corruption where only two sites are live (c killed after round 1, b's anchor flipped
 * after round 3): the two anchors differ and neither has a majority, so neither is repaired
 * from the other (that would spread the corruption half the time); both stop before applying
 * round 4, named in their logs, and the hash vote counts what anchors.jsonl shows. b has two
 * ranks, which stop together and still write the site's summary (a site of one rank, a, is
 * the other). */
static void test_corrupt_two(const char *tmp)
{
    char run[1024], *out = NULL;
    int rc =
        run_launch_rc(tmp, "corrupt_two", "--kill c@1 --corrupt-anchor b@3 --set sites.b.ranks=2",
                      run, sizeof run, &out);
    CHECK_MSG(rc != 0, "launch finished a run whose two live sites' anchors differ:\n%s",
              out ? out : "");
    free(out);
    json_t *sum = load(run, "summary.json");
    if (!sum) return;
    char h[2][16][24];
    int n[2] = {anchors(run, "a", h[0], 16), anchors(run, "b", h[1], 16)};
    CHECK_MSG(n[0] == 4 && n[1] == 4, "a applied %d rounds, b %d: both should stop after round 3",
              n[0], n[1]);
    int differ = 0;
    for (int r = 0; r < n[0] && r < n[1]; r++) differ += strcmp(h[0][r], h[1][r]) != 0;
    CHECK_MSG(differ == 1 && n[0] >= 4 && strcmp(h[0][3], h[1][3]) != 0,
              "%d rounds differ (the corruption after round 3 only, expected)", differ);
    CHECK_MSG(json_integer_value(json_object_get(sum, "hash_mismatches")) >= 1,
              "anchors.jsonl differ at round 3 but summary.json counts no hash mismatch");
    const char *sites[] = {"a", "b"};
    for (int i = 0; i < 2; i++) {
        char path[1200], line[1024];
        int named = 0;
        snprintf(path, sizeof path, "%s/logs/%s.log", run, sites[i]);
        FILE *f = fopen(path, "r");
        while (f && fgets(line, sizeof line, f))
            named |= strstr(line, "none has a majority") != NULL;
        if (f) fclose(f);
        CHECK_MSG(named, "site %s's log does not say why it stopped", sites[i]);
        snprintf(path, sizeof path, "%s/%s/summary.json", run, sites[i]);
        json_t *own = json_load_file(path, 0, NULL);
        CHECK_MSG(own != NULL, "site %s (%d rank%s) wrote no summary.json", sites[i], i + 1,
                  i ? "s" : "");
        if (own) {
            CHECK_STR_CONTAINS(json_string_value(json_object_get(own, "status")), "failed");
            CHECK_MSG(json_integer_value(json_object_get(own, "hash_mismatches")) >= 1,
                      "site %s's summary counts no hash mismatch", sites[i]);
        }
        json_decref(own);
    }
    json_decref(sum);
}

/* Checks a run in which site c came in late (joined, or restarted after a kill): every site
 * finished; a and b logged all `rounds` identical anchors and c's equal theirs for every round
 * it logged, from the one it joined after to the end; c trained fewer steps, from its join
 * on; nothing was dropped; no anchor disagreed. Returns c's first round. */
static int check_late_site(const char *run, int rounds, int restarted)
{
    json_t *sum = load(run, "summary.json");
    if (!sum) return -1;
    const char *sites[] = {"a", "b", "c"};
    char h[3][32][24];
    int have[3][32];
    json_t *s[3];
    for (int i = 0; i < 3; i++) {
        s[i] = json_object_get(json_object_get(sum, "sites"), sites[i]);
        CHECK_STR_CONTAINS(json_string_value(json_object_get(s[i], "status")), "finished");
        anchors_any(run, sites[i], h[i], have[i], 32);
    }
    int R = (int)json_integer_value(json_object_get(s[2], "joined_round"));
    long long trained_a = json_integer_value(json_object_get(s[0], "steps_trained"));
    long long trained_c = json_integer_value(json_object_get(s[2], "steps_trained"));
    long long steps_c = json_integer_value(json_object_get(s[2], "steps"));
    fprintf(stderr, "site c joined for round %d; trained %lld steps (a: %lld)\n", R, trained_c,
            trained_a);
    CHECK_MSG(R >= 1 && R < rounds, "c's first round %d", R);
    CHECK(json_is_true(json_object_get(s[2], restarted ? "restarted" : "started_late")));
    CHECK_EQ_INT(steps_c, trained_a); /* both reached the end of the run */
    /* From its start to the end, none repeated: a joiner starts where its peers are in round
     * R - 1 (from the anchor after R - 2, at (R - 1)·H + τ at the earliest, or, when they had
     * not applied R - 2 yet, from the one after R - 3, at (R - 1)·H at the earliest; H = 10,
     * τ = 2) and takes the anchor after R - 1 when they apply it, at R·H + τ; a joiner whose
     * peers did not say their step starts there. */
    CHECK_MSG(trained_c <= trained_a - (R - 1) * 10 && trained_c >= trained_a - (R * 10 + 2),
              "c trained %lld steps, a %lld, c's first round %d", trained_c, trained_a, R);
    CHECK_EQ_INT(json_integer_value(json_object_get(s[2], "rounds_applied")), rounds - R);
    /* A restarted c's first life may differ in the last round it applied before SIGKILL: it
     * applies its own chunks' results the moment it has every chunk, and if it dies before
     * those leave it (they wait in its send queue and the emulated link), a and b redo the
     * chunks without its contribution (docs/diloco.md, "Kills"). Every other round must agree. */
    /* The first life's last applied round: the last line with "tokens" (an applied result)
     * before the first line without (the second life's fetched anchor). Counting every round
     * logged below R - 1 took the second life's fast-join anchor (after R - 2 or R - 3) for it
     * and failed a run where the first life's last round (1) differed, as allowed (R = 5). */
    int last_first_life = restarted ? first_life_last(run, "c") : -1;
    for (int r = 0; r < rounds; r++) {
        CHECK_MSG(have[0][r] == 1 && have[1][r] == 1 && strcmp(h[0][r], h[1][r]) == 0,
                  "round %d: a and b anchors differ", r);
        if (r >= R - 1) CHECK_MSG(have[2][r] >= 1, "c did not log round %d", r);
        if (have[2][r] && r == last_first_life && strcmp(h[0][r], h[2][r]) != 0)
            fprintf(stderr,
                    "round %d (the last c applied before it was killed): c's anchor %s, "
                    "a's %s — its own results had not left it\n",
                    r, h[2][r], h[0][r]);
        else if (have[2][r])
            CHECK_MSG(strcmp(h[0][r], h[2][r]) == 0, "round %d: c's anchor %s, a's %s", r, h[2][r],
                      h[0][r]);
    }
    json_t *c = json_object_get(sum, "contributions");
    long long on_time = json_integer_value(json_object_get(c, "on_time"));
    /* a late one for the last round folds into a round that never closes: counted as open; one
     * still on its way to an owner that finished is counted by its sender as unreceived */
    long long unreceived = json_integer_value(json_object_get(c, "unreceived"));
    long long late = json_integer_value(json_object_get(c, "late")) +
                     json_integer_value(json_object_get(c, "open_at_end")) + unreceived;
    fprintf(stderr,
            "contributions: %lld on time, %lld late, open at the end or unreceived (%lld "
            "unreceived)\n",
            on_time, late, unreceived);
    /* Dropped: late contributions folded into one of the joiner's chunks before its
     * announcement arrived (a peer ahead of those probed); rare, and counted. */
    long long dropped = json_integer_value(json_object_get(c, "dropped"));
    if (dropped) fprintf(stderr, "contributions: %lld dropped\n", dropped);
    CHECK(dropped <= 6);
    late += dropped;
    CHECK_EQ_INT(json_integer_value(json_object_get(sum, "hash_mismatches")), 0);
    /* 6 chunks a round: a and b every round, c from round R on (every one of its
     * contributions aggregated, on time or folded late, or counted as dropped). A restarted c also
     * took part before it died; what it counted as an owner then is not in its (second) summary. */
    long long want = 6 * (2 * rounds + (rounds - R));
    if (restarted) /* less what c sent of the round it died in, and what its first life counted */
        CHECK_MSG(on_time + late >= want - 6, "%lld contributions, want at least %lld",
                  on_time + late, want - 6);
    else
        CHECK_EQ_INT(on_time + late, want);
    CHECK(json_integer_value(json_object_get(s[0], "joins_seen")) >= 1);
    json_decref(sum);
    return R;
}

/* Site c starts only once the others have applied 2 rounds: it joins for a later round with
 * the anchor the others agreed. (Every site is slowed alike, and the run has 30 rounds, so it
 * outlasts c's start-up — with 10 the tiny run was over on the CI machine before c had
 * registered — and no site is systematically late: a late contribution to the last round can reach
 * an owner that has already finished, and would then be counted nowhere.) */
static void test_join(const char *tmp)
{
    char run[1024];
    run_launch(tmp, "join", "--join c@2 --set run.rounds=30 --slow a=5 --slow b=5 --slow c=5", run,
               sizeof run);
    int R = check_late_site(run, 30, 0);
    CHECK(R >= 3);
}

/* Site c is killed after 2 rounds and started again once the others have applied 3: it comes
 * back as a joiner (after its old lease expired), with every anchor it logs — before the crash
 * and after — equal to the others'. */
static void test_restart(const char *tmp)
{
    char run[1024];
    /* A shorter lease, so the old one runs out sooner; 12 rounds, so c has rounds left after
     * it (the others go on while it restarts). */
    run_launch(tmp, "restart",
               "--kill c@2 --restart c@3 --set run.rounds=12 --set membership.lease_ttl_s=2 "
               "--slow a=5 --slow b=5 --slow c=5",
               run, sizeof run);
    int R = check_late_site(run, 12, 1);
    CHECK(R >= 4);
    char h[32][24];
    int have[32];
    anchors_any(run, "c", h, have, 32);
    CHECK_MSG(have[0] && have[1], "c's rounds before the crash are not in its anchors.jsonl");
}

/* Multi-rank sites (issue 7): every site an MPI job of 2 ranks, each rank carrying its own
 * lanes. The anchors still agree after every round, every contribution is accounted for, and
 * the WAN carries the bytes the one-rank run sent (split over the ranks). Then 2-rank sites
 * with tensor parallelism, one of which loses a rank: its MPI job goes down, the others go
 * on without the site. */
static void test_ranks(const char *tmp)
{
    char run[1024];
    const char *two = "--set sites.a.ranks=2 --set sites.b.ranks=2 --set sites.c.ranks=2";
    run_launch(tmp, "ranks", two, run, sizeof run);
    json_t *sum = load(run, "summary.json");
    if (!sum) return;
    const char *sites[] = {"a", "b", "c"};
    char h[3][16][24];
    for (int i = 0; i < 3; i++) {
        json_t *s = json_object_get(json_object_get(sum, "sites"), sites[i]);
        CHECK_STR_CONTAINS(json_string_value(json_object_get(s, "status")), "finished");
        CHECK_EQ_INT(anchors(run, sites[i], h[i], 16), 6);
    }
    for (int r = 0; r < 6; r++)
        CHECK_MSG(strcmp(h[0][r], h[1][r]) == 0 && strcmp(h[0][r], h[2][r]) == 0,
                  "round %d anchors differ: %s %s %s", r, h[0][r], h[1][r], h[2][r]);
    json_t *c = json_object_get(sum, "contributions");
    CHECK_EQ_INT(json_integer_value(json_object_get(c, "on_time")), 6 * 6 * 3);
    double bytes = json_number_value(json_object_get(sum, "wan_bytes_sent"));
    fprintf(stderr, "WAN bytes: 2 ranks per site %.0f, 1 rank %.0f\n", bytes, g_bytes_one_rank);
    if (g_bytes_one_rank > 0) CHECK_CLOSE(bytes, g_bytes_one_rank, 0, 0.10);
    json_decref(sum);
    /* Each rank's share, from the sites' summaries: both ranks carried traffic. */
    char path[2048];
    snprintf(path, sizeof path, "%s/logs/a.log", run);
    FILE *f = fopen(path, "r");
    int r0 = 0, r1 = 0;
    char line[1024];
    while (f && fgets(line, sizeof line, f)) {
        r0 += strstr(line, "a/r0]") != NULL;
        r1 += strstr(line, "a/r1]") != NULL;
    }
    if (f) fclose(f);
    CHECK_MSG(r0 > 0 && r1 > 0, "site a's log has no lines from both ranks (%d, %d)", r0, r1);
    /* Each site's mpirun had an Open MPI session folder of its own (concurrent mpiruns sharing
     * /tmp/ompi.HOST.UID raced: "unable to create the desired directory"), removed at the end. */
    char folder[3][512];
    for (int i = 0; i < 3; i++) {
        folder[i][0] = '\0';
        snprintf(path, sizeof path, "%s/logs/%s.log", run, sites[i]);
        f = fopen(path, "r");
        while (f && fgets(line, sizeof line, f)) {
            const char *p = strstr(line, "Open MPI session folder: ");
            if (p && sscanf(p + 25, "%511s", folder[i]) != 1) folder[i][0] = '\0';
        }
        if (f) fclose(f);
        char want[64];
        snprintf(want, sizeof want, "/%s", sites[i]);
        CHECK_MSG(strncmp(folder[i], "/tmp/gt-ompi-", 13) == 0 && strstr(folder[i], want),
                  "site %s: session folder '%s'", sites[i], folder[i]);
        CHECK_MSG(access(folder[i], F_OK) != 0, "%s outlived the launch", folder[i]);
    }
    CHECK(strcmp(folder[0], folder[1]) != 0 && strcmp(folder[1], folder[2]) != 0);

    /* A 2-rank site joins: its ranks agree on the round and fetch their own lanes' state. */
    char extra[512];
    snprintf(extra, sizeof extra,
             "%s --join c@2 --set run.rounds=30 --slow a=5 --slow b=5 --slow c=5", two);
    run_launch(tmp, "ranks_join", extra, run, sizeof run);
    check_late_site(run, 30, 0);

    snprintf(extra, sizeof extra, "%s --set local.tensor_parallel=2 --kill c@2", two);
    run_launch(tmp, "ranks_kill", extra, run, sizeof run);
    sum = load(run, "summary.json");
    if (!sum) return;
    for (int i = 0; i < 2; i++) {
        json_t *s = json_object_get(json_object_get(sum, "sites"), sites[i]);
        CHECK_STR_CONTAINS(json_string_value(json_object_get(s, "status")), "finished");
        CHECK_EQ_INT(anchors(run, sites[i], h[i], 16), 6);
    }
    for (int r = 0; r < 6; r++) CHECK(strcmp(h[0][r], h[1][r]) == 0);
    CHECK(json_is_true(
        json_object_get(json_object_get(json_object_get(sum, "sites"), "c"), "killed")));
    json_decref(sum);
}

/* Streaming fragments (outer.fragments = 2, docs/diloco.md#streaming-fragments): each of the
 * two lanes is a fragment with its own outer engine, synced 5 steps after the other. A round's
 * anchor (logged once its last fragment is applied) is identical at every site, every
 * contribution of every fragment is counted, and a kill, a silent corruption (re-fetched per
 * fragment) and a join behave as with one fragment. */
static void test_fragments(const char *tmp)
{
    char run[1024];
    const char *sites[] = {"a", "b", "c"};
    char h[3][16][24];
    run_launch(tmp, "frag", "--set outer.fragments=2", run, sizeof run);
    json_t *sum = load(run, "summary.json");
    if (sum) {
        for (int i = 0; i < 3; i++) {
            json_t *s = json_object_get(json_object_get(sum, "sites"), sites[i]);
            CHECK_STR_CONTAINS(json_string_value(json_object_get(s, "status")), "finished");
            CHECK_EQ_INT(json_integer_value(json_object_get(s, "rounds_applied")), 6);
            CHECK_EQ_INT(anchors(run, sites[i], h[i], 16), 6);
        }
        for (int r = 0; r < 6; r++)
            CHECK_MSG(strcmp(h[0][r], h[1][r]) == 0 && strcmp(h[0][r], h[2][r]) == 0,
                      "fragments: round %d anchors differ: %s %s %s", r, h[0][r], h[1][r], h[2][r]);
        json_t *c = json_object_get(sum, "contributions");
        /* 6 rounds x 2 fragments x (1 lane x 3 chunks) x 3 sites, all on time */
        CHECK_EQ_INT(json_integer_value(json_object_get(c, "on_time")), 6 * 6 * 3);
        CHECK_EQ_INT(json_integer_value(json_object_get(c, "late")), 0);
        CHECK_EQ_INT(json_integer_value(json_object_get(c, "dropped")), 0);
        CHECK_EQ_INT(json_integer_value(json_object_get(sum, "hash_mismatches")), 0);
        /* a hash per fragment: twice the checks of one fragment */
        CHECK(json_integer_value(json_object_get(sum, "hash_checks")) >= 2 * 3 * 5);
        json_decref(sum);
    }

    /* 2 ranks per site, 4 lanes: each rank carries a lane of each fragment (4 engines a site) */
    run_launch(tmp, "frag_ranks",
               "--set outer.fragments=2 --set wan.lanes=4 --set sites.a.ranks=2 "
               "--set sites.b.ranks=2 --set sites.c.ranks=2",
               run, sizeof run);
    if ((sum = load(run, "summary.json"))) {
        for (int i = 0; i < 3; i++) CHECK_EQ_INT(anchors(run, sites[i], h[i], 16), 6);
        for (int r = 0; r < 6; r++)
            CHECK_MSG(strcmp(h[0][r], h[1][r]) == 0 && strcmp(h[0][r], h[2][r]) == 0,
                      "fragments, 2 ranks: round %d anchors differ", r);
        check_all_folded(sum, 6 * 12 * 3); /* 6 rounds x 4 lanes x 3 chunks x 3 sites */
        json_decref(sum);
    }

    run_launch(tmp, "frag_kill", "--set outer.fragments=2 --kill c@2", run, sizeof run);
    if ((sum = load(run, "summary.json"))) {
        for (int i = 0; i < 2; i++) {
            json_t *s = json_object_get(json_object_get(sum, "sites"), sites[i]);
            CHECK_STR_CONTAINS(json_string_value(json_object_get(s, "status")), "finished");
            CHECK_EQ_INT(anchors(run, sites[i], h[i], 16), 6);
        }
        for (int r = 0; r < 6; r++)
            CHECK_MSG(strcmp(h[0][r], h[1][r]) == 0, "fragments, kill: round %d differs", r);
        CHECK(json_is_true(
            json_object_get(json_object_get(json_object_get(sum, "sites"), "c"), "killed")));
        json_decref(sum);
    }

    run_launch(tmp, "frag_corrupt", "--set outer.fragments=2 --corrupt-anchor b@2", run,
               sizeof run);
    if ((sum = load(run, "summary.json"))) {
        for (int i = 0; i < 3; i++) CHECK_EQ_INT(anchors(run, sites[i], h[i], 16), 6);
        for (int r = 0; r < 6; r++) {
            CHECK(strcmp(h[0][r], h[2][r]) == 0);
            if (r == 2)
                CHECK_MSG(strcmp(h[0][r], h[1][r]) != 0, "the corruption did not happen");
            else
                CHECK_MSG(strcmp(h[0][r], h[1][r]) == 0,
                          "fragments: round %d: b's anchor %s, a's %s", r, h[1][r], h[0][r]);
        }
        json_t *b = json_object_get(json_object_get(sum, "sites"), "b");
        CHECK_EQ_INT(json_integer_value(json_object_get(b, "anchor_refetches")), 1);
        CHECK_EQ_INT(json_integer_value(json_object_get(sum, "hash_mismatches")), 1);
        json_decref(sum);
    }

    run_launch(tmp, "frag_join",
               "--set outer.fragments=2 --join c@2 --set run.rounds=30 --slow a=5 --slow b=5 "
               "--slow c=5",
               run, sizeof run);
    CHECK(check_late_site(run, 30, 0) >= 3);
}

/* Reads SITE/submits.jsonl: tokens[round] of every delta the site submitted; returns the lines. */
static int submits(const char *run, const char *site, double *tokens, int max)
{
    char path[2048], line[256];
    snprintf(path, sizeof path, "%s/%s/submits.jsonl", run, site);
    FILE *f = fopen(path, "r");
    int n = 0;
    for (int r = 0; r < max; r++) tokens[r] = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f)) {
        json_t *j = json_loads(line, 0, NULL);
        int r = (int)json_integer_value(json_object_get(j, "round"));
        if (r >= 0 && r < max) tokens[r] += json_number_value(json_object_get(j, "tokens"));
        json_decref(j);
        n++;
    }
    fclose(f);
    return n;
}

/* Reads the tokens of each round's result from SITE/anchors.jsonl (what the outer average
 * weighed: the sum of the contributions' tokens). */
static void result_tokens(const char *run, const char *site, double *tokens, int max)
{
    char path[2048], line[256];
    snprintf(path, sizeof path, "%s/%s/anchors.jsonl", run, site);
    FILE *f = fopen(path, "r");
    for (int r = 0; r < max; r++) tokens[r] = -1;
    while (f && fgets(line, sizeof line, f)) {
        json_t *j = json_loads(line, 0, NULL);
        int r = (int)json_integer_value(json_object_get(j, "round"));
        json_t *t = json_object_get(j, "tokens");
        if (r >= 0 && r < max && t) tokens[r] = json_number_value(t);
        json_decref(j);
    }
    if (f) fclose(f);
}

/* Sites with different rank counts (issue 12; docs/diloco.md#lanes-across-ranks): site a is an
 * MPI job of 2 ranks, b and c single processes, so the run has G = 2 WAN groups, a's rank k
 * running group k and b's and c's one rank both. The anchors agree after every round (I1),
 * every contribution is counted (6 chunks a round, as with equal ranks), every site sends the
 * same bytes within 10% whatever its ranks, and the contributions are weighted by tokens: a
 * trains 2x the tokens of b a step (B per rank), its ledger says so, and each round's result
 * carries the sum of the three sites' tokens. Then the same with streaming fragments, with a
 * 1-rank site's anchor corrupted (re-fetched per group), a 2-rank site joining a run of 1-rank
 * sites, and the 2-rank site killed: the others go on with anchors that agree. */
static void test_unequal(const char *tmp)
{
    char run[1024];
    const char *sites[] = {"a", "b", "c"};
    char h[3][16][24];
    /* a's 2 ranks are the slowest site on a loaded machine (CI runs 6 tests on 2 cores): a
     * 30-s straggler deadline keeps its contributions on time, so each round's result must
     * weigh exactly the three sites' tokens (the deadline itself is tested elsewhere) */
    run_launch(tmp, "unequal",
               "--set sites.a.ranks=2 --set outer.deadline_min_ms=30000 "
               "--set outer.deadline_max_ms=30000",
               run, sizeof run);
    json_t *sum = load(run, "summary.json");
    if (!sum) return;
    double bytes[3], lo = 0, hi = 0;
    for (int i = 0; i < 3; i++) {
        json_t *s = json_object_get(json_object_get(sum, "sites"), sites[i]);
        CHECK_STR_CONTAINS(json_string_value(json_object_get(s, "status")), "finished");
        CHECK_EQ_INT(json_integer_value(json_object_get(s, "rounds_applied")), 6);
        CHECK_EQ_INT(anchors(run, sites[i], h[i], 16), 6);
        bytes[i] = json_number_value(json_object_get(s, "wan_bytes_sent"));
        if (i == 0 || bytes[i] < lo) lo = bytes[i];
        if (i == 0 || bytes[i] > hi) hi = bytes[i];
    }
    fprintf(stderr, "WAN bytes sent: a (2 ranks) %.0f, b (1) %.0f, c (1) %.0f\n", bytes[0],
            bytes[1], bytes[2]);
    CHECK_MSG(lo > 0 && hi <= 1.10 * lo, "bytes per site differ by more than 10%%: %.0f .. %.0f",
              lo, hi);
    for (int r = 0; r < 6; r++)
        CHECK_MSG(strcmp(h[0][r], h[1][r]) == 0 && strcmp(h[0][r], h[2][r]) == 0,
                  "2+1+1 ranks: round %d anchors differ: %s %s %s", r, h[0][r], h[1][r], h[2][r]);
    json_t *c = json_object_get(sum, "contributions");
    /* 6 rounds x (2 lanes x 3 chunks) x 3 contributions, all on time, none lost */
    CHECK_EQ_INT(json_integer_value(json_object_get(c, "on_time")), 6 * 6 * 3);
    CHECK_EQ_INT(json_integer_value(json_object_get(c, "late")), 0);
    CHECK_EQ_INT(json_integer_value(json_object_get(c, "dropped")), 0);
    CHECK_EQ_INT(json_integer_value(json_object_get(sum, "hash_mismatches")), 0);
    /* tokens: B x T per rank per step, H = 10 steps a round */
    double ta[16], tb[16], tc[16], res[16];
    CHECK_EQ_INT(submits(run, "a", ta, 16), 6);
    CHECK_EQ_INT(submits(run, "b", tb, 16), 6);
    CHECK_EQ_INT(submits(run, "c", tc, 16), 6);
    result_tokens(run, "b", res, 16);
    for (int r = 0; r < 6; r++) {
        CHECK_MSG(tb[r] > 0 && ta[r] == 2 * tb[r] && tc[r] == tb[r],
                  "round %d: a submitted %.0f tokens, b %.0f, c %.0f (want a = 2 b = 2 c)", r,
                  ta[r], tb[r], tc[r]);
        CHECK_MSG(res[r] == ta[r] + tb[r] + tc[r],
                  "round %d: the result weighed %.0f tokens, the sites submitted %.0f", r, res[r],
                  ta[r] + tb[r] + tc[r]);
    }
    fprintf(stderr, "tokens a round: a %.0f, b %.0f, c %.0f; the result weighed %.0f\n", ta[0],
            tb[0], tc[0], res[0]);
    double tok_a = json_number_value(
        json_object_get(json_object_get(json_object_get(sum, "sites"), "a"), "tokens"));
    double tok_b = json_number_value(
        json_object_get(json_object_get(json_object_get(sum, "sites"), "b"), "tokens"));
    CHECK_MSG(tok_a == 2 * tok_b, "summary tokens: a %.0f, b %.0f", tok_a, tok_b);
    json_decref(sum);

    /* Streaming fragments over unequal ranks: 4 lanes, F = 2, so each of a's ranks runs one
     * group's 2 engines and b's and c's one rank 4 engines. */
    run_launch(tmp, "unequal_frag",
               "--set sites.a.ranks=2 --set outer.fragments=2 --set wan.lanes=4", run, sizeof run);
    if ((sum = load(run, "summary.json"))) {
        for (int i = 0; i < 3; i++) CHECK_EQ_INT(anchors(run, sites[i], h[i], 16), 6);
        for (int r = 0; r < 6; r++)
            CHECK_MSG(strcmp(h[0][r], h[1][r]) == 0 && strcmp(h[0][r], h[2][r]) == 0,
                      "2+1+1 ranks, fragments: round %d anchors differ", r);
        check_all_folded(sum, 6 * 12 * 3); /* 6 rounds x 4 lanes x 3 chunks x 3 sites */
        CHECK_EQ_INT(json_integer_value(json_object_get(sum, "hash_mismatches")), 0);
        json_decref(sum);
    }

    /* A 1-rank site's anchor silently corrupted: the vote of the group that holds the flipped
     * bit catches it, and b re-fetches that group's lanes from the group's peers. */
    run_launch(tmp, "unequal_corrupt", "--set sites.a.ranks=2 --corrupt-anchor b@2", run,
               sizeof run);
    if ((sum = load(run, "summary.json"))) {
        for (int i = 0; i < 3; i++) CHECK_EQ_INT(anchors(run, sites[i], h[i], 16), 6);
        for (int r = 0; r < 6; r++) {
            CHECK(strcmp(h[0][r], h[2][r]) == 0);
            if (r == 2)
                CHECK_MSG(strcmp(h[0][r], h[1][r]) != 0, "the corruption did not happen");
            else
                CHECK_MSG(strcmp(h[0][r], h[1][r]) == 0, "2+1+1: round %d: b's anchor %s, a's %s",
                          r, h[1][r], h[0][r]);
        }
        json_t *b = json_object_get(json_object_get(sum, "sites"), "b");
        CHECK_EQ_INT(json_integer_value(json_object_get(b, "anchor_refetches")), 1);
        CHECK_EQ_INT(json_integer_value(json_object_get(sum, "hash_mismatches")), 1);
        json_decref(sum);
    }

    /* A 2-rank site joins a run of 1-rank sites: its ranks fetch their groups' state. */
    run_launch(tmp, "unequal_join",
               "--set sites.c.ranks=2 --join c@2 --set run.rounds=30 --slow a=5 --slow b=5 "
               "--slow c=5",
               run, sizeof run);
    CHECK(check_late_site(run, 30, 0) >= 3);

    /* The 2-rank site dies: the 1-rank sites go on, their anchors agree. */
    run_launch(tmp, "unequal_kill", "--set sites.a.ranks=2 --kill a@2", run, sizeof run);
    if ((sum = load(run, "summary.json"))) {
        for (int i = 1; i < 3; i++) {
            json_t *s = json_object_get(json_object_get(sum, "sites"), sites[i]);
            CHECK_STR_CONTAINS(json_string_value(json_object_get(s, "status")), "finished");
            CHECK_EQ_INT(anchors(run, sites[i], h[i], 16), 6);
        }
        for (int r = 0; r < 6; r++)
            CHECK_MSG(strcmp(h[1][r], h[2][r]) == 0, "2+1+1, a killed: round %d differs", r);
        CHECK(json_is_true(
            json_object_get(json_object_get(json_object_get(sum, "sites"), "a"), "killed")));
        json_decref(sum);
    }
}

int main(int argc, char **argv)
{
    g_transport = argc > 1 ? argv[1] : "ucx";
    char *tmp = gt_test_tmpdir();
    /* argv[2] or GT_LAUNCH_ONLY=join,restart runs only those (ctest runs `unequal` as its own
     * test, test_launch_unequal_TRANSPORT, and the others as test_launch_TRANSPORT). */
    const char *only = argc > 2 ? argv[2] : getenv("GT_LAUNCH_ONLY");
#define RUN(name) \
    if (!only || strstr(only, #name)) test_##name(tmp)
#define RUN_NAMED(name) \
    if (only && strstr(only, #name)) test_##name(tmp)
    RUN(three_sites);
    RUN(kill);
    RUN(corrupt);
    RUN(corrupt_two);
    RUN(join);
    RUN(restart);
    RUN(ranks);
    RUN(fragments);
    RUN_NAMED(unequal);
#undef RUN
#undef RUN_NAMED
    if (gt_test_failures == 0)
        gt_test_rmtree(tmp);
    else
        fprintf(stderr, "run directories kept in %s\n", tmp);
    free(tmp);
    return GT_TEST_DONE();
}
