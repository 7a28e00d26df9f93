/* test_quality.c — what DiLoCo buys, measured with `geotrain launch` and real etcd (transport
 * argv[1]), three sites on the synthetic corpus, no emulated delay:
 *  - DiLoCo's final loss (outer Nesterov, tau 2, int8) is below synchronous data parallelism's
 *    on the same tokens by 0.3% to 3% (both run by geotrain: outer.mode diloco vs sync-dp);
 *  - the outer Nesterov step beats plain averaging of the sites' parameters by 0.08 nats or
 *    more;
 *  - streaming DiLoCo with 4 fragments ends within 1% of one fragment's loss;
 *  - a site slowed 3x slows the others by less than 10%.
 * The losses are the final anchor's mean cross-entropy on held-out batches (summary.json
 * eval_loss), printed so a reader sees the numbers behind each verdict. The bounds follow the
 * spread over seeds 7-13 of the same setup, where geotrain equals an independent PyTorch
 * implementation seed by seed (test_ref_quality; docs/diloco.md, "The outer step against a
 * reference"): DiLoCo below sync-dp by 0.5-1.8% on every seed, averaging above Nesterov by
 * 0.12-0.14 nats; a Nesterov step worth 0.01 nats less than the textbook one fails the first. */
#include "gt_test.h"

#include <jansson.h>
#include <stdlib.h>

static const char *g_transport;
static char *g_tmp;

static json_t *launch(const char *name, const char *extra)
{
    const char *src = getenv("GT_SOURCE_DIR"), *cli = getenv("GT_CLI");
    char cmd[8192], run[2048], path[2100], *out = NULL;
    snprintf(run, sizeof run, "%s/%s", g_tmp, name);
    snprintf(cmd, sizeof cmd,
             "%s launch %s/tests/launch/three_sites.yaml --run-dir %s --set wan.transport=%s "
             "--set run.rounds=15 --set inner.steps=20 --set wan.emulation.enabled=false "
             "--set wan.lanes=4 %s",
             cli, src, run, g_transport, extra);
    int rc = gt_test_run(cmd, &out);
    CHECK_MSG(rc == 0, "%s exited %d:\n%s", cmd, rc, out ? out : "");
    free(out);
    snprintf(path, sizeof path, "%s/summary.json", run);
    json_t *j = json_load_file(path, 0, NULL);
    CHECK_MSG(j != NULL, "no %s", path);
    return j;
}

static double num(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static double site_num(json_t *sum, const char *site, const char *k)
{
    return num(json_object_get(json_object_get(sum, "sites"), site), k);
}

int main(int argc, char **argv)
{
    g_transport = argc > 1 ? argv[1] : "ucx";
    g_tmp = gt_test_tmpdir();
    json_t *diloco = launch("diloco", "");
    json_t *syncdp = launch("syncdp", "--set outer.mode=sync-dp");
    json_t *avg = launch("average", "--set outer.optimizer=average");
    /* Streaming DiLoCo: 4 fragments, each synced H/4 steps after the previous. */
    json_t *frag = launch("fragments", "--set outer.fragments=4");
    /* Straggler runs: a deadline floor short against a round (20 steps), so the adaptive
     * deadline decides; the same settings with and without the slow site. */
    json_t *fast = launch("fast", "--set outer.deadline_min_ms=20 --set run.rounds=20");
    json_t *slow = launch("slow", "--set outer.deadline_min_ms=20 --set run.rounds=20 --slow c=3");
    /* The same slow site with outer.catch_up: it ends each round once a peer's contribution
     * to it has arrived (fewer steps, its tokens as weight), so it stays in step. */
    json_t *catchup = launch("catchup", "--set outer.deadline_min_ms=20 --set run.rounds=20 "
                                        "--slow c=3 --set outer.catch_up=true");
    if (!diloco || !syncdp || !avg || !frag || !fast || !slow || !catchup) return GT_TEST_DONE();

    double l_diloco = num(diloco, "eval_loss"), l_sync = num(syncdp, "eval_loss");
    double l_avg = num(avg, "eval_loss");
    fprintf(stderr,
            "held-out loss: DiLoCo (Nesterov) %.4f, sync-dp %.4f, DiLoCo (averaging) %.4f "
            "(entropy floor ln 4 = 1.3863)\n",
            l_diloco, l_sync, l_avg);
    fprintf(stderr, "WAN bytes sent: DiLoCo %.3g, sync-dp %.3g\n", num(diloco, "wan_bytes_sent"),
            num(syncdp, "wan_bytes_sent"));
    CHECK_MSG(l_diloco <= (1 - 0.003) * l_sync && l_diloco >= (1 - 0.03) * l_sync,
              "DiLoCo %.4f vs sync-dp %.4f: gap %+.2f%% (allowed -3%% to -0.3%%)", l_diloco, l_sync,
              100 * (l_diloco - l_sync) / l_sync);
    CHECK_MSG(l_diloco <= l_avg - 0.08, "Nesterov %.4f does not beat averaging %.4f by 0.08",
              l_diloco, l_avg);
    double l_frag = num(frag, "eval_loss");
    fprintf(stderr, "held-out loss with 4 streaming fragments %.4f (1 fragment %.4f: %+.2f%%)\n",
            l_frag, l_diloco, 100 * (l_frag - l_diloco) / l_diloco);
    CHECK_MSG(fabs(l_frag - l_diloco) <= 0.01 * l_diloco, "4 fragments %.4f vs 1 %.4f: gap %.2f%%",
              l_frag, l_diloco, 100 * fabs(l_frag - l_diloco) / l_diloco);
    json_decref(frag);
    CHECK(num(syncdp, "wan_bytes_sent") > 10 * num(diloco, "wan_bytes_sent"));
    json_t *dc = json_object_get(diloco, "contributions");
    fprintf(stderr, "DiLoCo contributions: %.0f on time, %.0f late\n", num(dc, "on_time"),
            num(dc, "late"));

    /* The slowed site's peers: how much longer they waited for results beside it than in the
     * same run without it (wait_s: the protocol's doing), against the wall time of their
     * training loops alone (train_s; start-up is not the protocol's doing), summed over both
     * peers so one noisy process does not decide. Their compute time is left out: on two
     * shared cores it moves by 10% between identical runs, while a protocol that waits for a
     * straggler adds seconds (the first version of the last-round rule: +74%). */
    const char *peers[] = {"a", "b"};
    double base = 0, extra = 0;
    for (int i = 0; i < 2; i++) {
        double b0 = site_num(fast, peers[i], "train_s"), w0 = site_num(slow, peers[i], "train_s");
        double q0 = site_num(fast, peers[i], "wait_s"), q1 = site_num(slow, peers[i], "wait_s");
        fprintf(stderr,
                "site %s: %.2f s alone, %.2f s beside a 3x slower site (%+.1f%%); waited %.2f s, "
                "%.2f s beside it\n",
                peers[i], b0, w0, 100 * (w0 - b0) / b0, q0, q1);
        base += b0;
        extra += q1 - q0;
    }
    CHECK_MSG(extra < 0.10 * base,
              "the peers waited %.2f s more beside the slow site (%.1f%% of "
              "their training time)",
              extra, 100 * extra / base);
    json_t *c = json_object_get(slow, "contributions");
    fprintf(stderr, "with the slow site: %.0f on time, %.0f late (folded), %.0f dropped\n",
            num(c, "on_time"), num(c, "late"), num(c, "dropped"));
    CHECK(num(c, "late") > 0); /* the slow site's work is folded in, not lost */
    CHECK_EQ_INT((long long)num(c, "dropped"), 0);
    CHECK(strcmp(json_string_value(json_object_get(
                     json_object_get(json_object_get(slow, "sites"), "c"), "status")),
                 "finished") == 0);

    /* Catch-up: c skipped steps (it ends rounds early), its peers do not wait for it, and its
     * work reaches the anchors on time instead of late: fewer late folds than without. */
    json_t *cs = json_object_get(json_object_get(catchup, "sites"), "c");
    json_t *cc = json_object_get(catchup, "contributions");
    double extra_cu = 0;
    for (int i = 0; i < 2; i++)
        extra_cu += site_num(catchup, peers[i], "wait_s") - site_num(fast, peers[i], "wait_s");
    fprintf(stderr,
            "catch-up: c skipped %.0f steps in %.0f rounds cut short (trained %.0f); the peers "
            "waited %+.2f s against the run without the slow site (%+.2f s without catch-up); "
            "%.0f on time, %.0f late, %.0f open at the end (without: %.0f, %.0f, %.0f); goodput "
            "%.3f (without %.3f); held-out loss %.4f (no slow site %.4f, slow without catch-up "
            "%.4f)\n",
            num(cs, "steps_skipped"), num(cs, "rounds_cut"), num(cs, "steps_trained"), extra_cu,
            extra, num(cc, "on_time"), num(cc, "late"), num(cc, "open_at_end"), num(c, "on_time"),
            num(c, "late"), num(c, "open_at_end"), num(catchup, "goodput"), num(slow, "goodput"),
            num(catchup, "eval_loss"), num(fast, "eval_loss"), num(slow, "eval_loss"));
    CHECK_MSG(num(cs, "steps_skipped") > 0 && num(cs, "rounds_cut") > 0,
              "c skipped %.0f steps, cut %.0f rounds", num(cs, "steps_skipped"),
              num(cs, "rounds_cut"));
    CHECK_MSG(extra_cu < 0.10 * base, "the peers waited %.2f s more beside the slow site",
              extra_cu);
    /* c's work reaches the anchors instead of being stranded at the end (open_at_end: c's
     * rounds the others had finished), so goodput rises. With a 20 ms deadline floor c's
     * contributions, a slow step behind the first, are often late (folded) either way. */
    CHECK_MSG(num(cc, "open_at_end") < num(c, "open_at_end"),
              "contributions open at the end: %.0f with catch-up, %.0f without",
              num(cc, "open_at_end"), num(c, "open_at_end"));
    CHECK_MSG(num(catchup, "goodput") > num(slow, "goodput"),
              "goodput %.3f with catch-up, %.3f "
              "without",
              num(catchup, "goodput"), num(slow, "goodput"));
    CHECK_EQ_INT((long long)num(cc, "dropped"), 0);
    CHECK_MSG(num(catchup, "eval_loss") < 1.05 * num(fast, "eval_loss"),
              "held-out loss %.4f with catch-up beside the slow site, %.4f without a slow site",
              num(catchup, "eval_loss"), num(fast, "eval_loss"));
    json_decref(catchup);
    json_decref(diloco);
    json_decref(syncdp);
    json_decref(avg);
    json_decref(slow);
    json_decref(fast);
    if (gt_test_failures == 0)
        gt_test_rmtree(g_tmp);
    else
        fprintf(stderr, "run directories kept in %s\n", g_tmp);
    free(g_tmp);
    return GT_TEST_DONE();
}
