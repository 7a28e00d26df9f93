/* test_shared_config.c — the keys every site of a run must hold alike
 * (gt_topo_shared_text, gt_topo_shared_diff; docs/diloco.md#what-sites-must-agree-on). Two
 * sites' configs loaded from one file with different --set flags: a per-site key (address,
 * paths, timeouts, local compute, plan inputs) that differs leaves the texts equal; every
 * shared key of the table that differs is named, alone, with both values; a value
 * spelt another way (a link override equal to wan.emulation, the default written out, a flag
 * instead of the file) is the same value. */
#include "gt_test.h"
#include "gt_topology.h"

#include <stdlib.h>
#include <string.h>

static const char *k_yaml =
    "run: {name: t, seed: 7, rounds: 6, checkpoint_every: 0}\n"
    "model: {preset: tiny}\n"
    "data: {kind: synthetic, synthetic_tokens: 200000}\n"
    "inner: {steps: 20, lr: 3.0e-3, warmup_steps: 5}\n"
    "outer: {overlap_steps: 2, deadline_min_ms: 500, deadline_max_ms: 5000}\n"
    "codec: {name: int8, block_size: 64}\n"
    "wan:\n"
    "  transport: ucx\n"
    "  lanes: 2\n"
    "  emulation: {enabled: true, latency_ms: 10, jitter_ms: 2, bandwidth_mbps: 1000}\n"
    "membership: {lease_ttl_s: 3, heartbeat_ms: 500}\n"
    "security: {mode: none}\n"
    "sites:\n"
    "  - {name: a, address: '127.0.0.1:0'}\n"
    "  - {name: b, address: '127.0.0.1:0'}\n"
    "  - {name: c, address: '127.0.0.1:0'}\n";

static char *shared(const char *yaml, const char **sets, size_t n_sets)
{
    gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;
    lp.sets = sets;
    lp.n_sets = n_sets;
    lp.use_env = 0;
    gt_topo_config_t *cfg = NULL;
    gt_status_t st = gt_topo_load_string(yaml, strlen(yaml), "t.yaml", &lp, &cfg);
    CHECK_EQ_INT(st, GT_OK);
    if (st != GT_OK) return NULL;
    char *text = NULL;
    CHECK_EQ_INT(gt_topo_shared_text(cfg, &text), GT_OK);
    gt_topo_destroy(cfg);
    return text;
}

struct seen {
    int n;
    char keys[512];
    char ours[128], theirs[128];
};

static void on_diff(void *ctx, const char *key, const char *ours, const char *theirs)
{
    struct seen *s = ctx;
    if (s->n++ == 0) {
        snprintf(s->ours, sizeof s->ours, "%s", ours ? ours : "(absent)");
        snprintf(s->theirs, sizeof s->theirs, "%s", theirs ? theirs : "(absent)");
    }
    size_t o = strlen(s->keys);
    snprintf(s->keys + o, sizeof s->keys - o, "%s%s", o ? " " : "", key);
}

/* The base config against one with `set`: want_key differs alone (NULL: nothing differs), with
 * our value want_ours and theirs want_theirs (when given). */
static void expect(const char *set, const char *want_key, const char *want_ours,
                   const char *want_theirs)
{
    char *base = shared(k_yaml, NULL, 0);
    const char *sets[1] = {set};
    char *other = shared(k_yaml, sets, 1);
    if (!base || !other) goto out;
    struct seen s;
    memset(&s, 0, sizeof s);
    size_t n = gt_topo_shared_diff(base, other, on_diff, &s);
    CHECK_EQ_INT(n, (size_t)s.n);
    if (!want_key) {
        CHECK_MSG(n == 0 && strcmp(base, other) == 0, "--set %s: %zu keys differ (%s)", set, n,
                  s.keys);
        goto out;
    }
    CHECK_MSG(n == 1 && strcmp(s.keys, want_key) == 0, "--set %s: want only %s to differ, got %s",
              set, want_key, s.keys);
    if (want_ours)
        CHECK_MSG(strcmp(s.ours, want_ours) == 0, "--set %s: ours '%s', want '%s'", set, s.ours,
                  want_ours);
    if (want_theirs)
        CHECK_MSG(strcmp(s.theirs, want_theirs) == 0, "--set %s: theirs '%s', want '%s'", set,
                  s.theirs, want_theirs);
    /* And the other way round: the same key, the values swapped. */
    memset(&s, 0, sizeof s);
    CHECK_EQ_INT(gt_topo_shared_diff(other, base, on_diff, &s), 1);
    if (want_ours) CHECK_MSG(strcmp(s.theirs, want_ours) == 0, "swapped: theirs '%s'", s.theirs);
out:
    free(base);
    free(other);
}

/* Sites added mid-run (outer.site_slots): the running sites' copy with a vacant slot and the
 * added site's own file (the site appended) give the same text before and after the slot is
 * taken; a vacant slot has no name (not found) and is taken once; a site's own slot copy
 * holds every configured site as it was. */
static void test_slots(void)
{
    const char *sets[1] = {"outer.site_slots=4"};
    gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;
    lp.sets = sets;
    lp.n_sets = 1;
    lp.use_env = 0;
    gt_topo_config_t *cfg = NULL, *slots = NULL, *full = NULL;
    char yaml4[4096];
    snprintf(yaml4, sizeof yaml4, "%s  - {name: d, address: '127.0.0.1:0', ranks: 1}\n", k_yaml);
    CHECK_EQ_INT(gt_topo_load_string(k_yaml, strlen(k_yaml), "t.yaml", &lp, &cfg), GT_OK);
    CHECK_EQ_INT(gt_topo_load_string(yaml4, strlen(yaml4), "t4.yaml", &lp, &full), GT_OK);
    if (!cfg || !full) goto out;
    CHECK_EQ_INT(gt_topo_site_slots(cfg), 4);
    CHECK_EQ_INT(gt_topo_site_slots(full), 4);
    CHECK_EQ_INT(gt_topo_open_slots(cfg, &slots), GT_OK);
    if (!slots) goto out;
    CHECK_EQ_INT(slots->n_sites, 4);
    CHECK(!gt_topo_site_vacant(&slots->sites[2]) && gt_topo_site_vacant(&slots->sites[3]));
    CHECK(strcmp(slots->sites[1].name, "b") == 0 && slots->sites[1].ranks == 1);
    uint32_t at = 99;
    CHECK_EQ_INT(gt_topo_site_index(slots, "", &at), GT_ERR_NOT_FOUND);
    CHECK_EQ_INT(gt_topo_site_index(slots, "d", &at), GT_ERR_NOT_FOUND);
    char *t_cfg = NULL, *t_slots = NULL, *t_full = NULL, *t_taken = NULL;
    CHECK_EQ_INT(gt_topo_shared_text(cfg, &t_cfg), GT_OK);
    CHECK_EQ_INT(gt_topo_shared_text(slots, &t_slots), GT_OK);
    full->sites[3].added = 1; /* as the added site marks itself from the run's etcd */
    CHECK_EQ_INT(gt_topo_shared_text(full, &t_full), GT_OK);
    uint8_t key[32];
    memset(key, 7, sizeof key);
    CHECK_EQ_INT(gt_topo_take_slot(slots, 2, "d", 1, key), GT_ERR_INVALID); /* not vacant */
    CHECK_EQ_INT(gt_topo_take_slot(slots, 3, "a", 1, key), GT_ERR_INVALID); /* a's name */
    CHECK_EQ_INT(gt_topo_take_slot(slots, 3, "d", 1, key), GT_OK);
    CHECK_EQ_INT(gt_topo_take_slot(slots, 3, "e", 1, key), GT_ERR_INVALID); /* taken */
    CHECK_EQ_INT(gt_topo_site_index(slots, "d", &at), GT_OK);
    CHECK_EQ_INT(at, 3);
    CHECK(slots->sites[3].added && slots->sites[3].has_public_key &&
          slots->sites[3].public_key[0] == 7);
    CHECK_EQ_INT(gt_topo_shared_text(slots, &t_taken), GT_OK);
    if (t_cfg && t_slots && t_full && t_taken) {
        CHECK_MSG(strcmp(t_cfg, t_slots) == 0, "a vacant slot changed the shared text");
        CHECK_MSG(gt_topo_shared_diff(t_slots, t_full, NULL, NULL) == 0,
                  "the added site's file does not agree with the running sites'");
        CHECK_MSG(strcmp(t_slots, t_taken) == 0, "taking the slot changed the shared text");
        CHECK(strstr(t_full, "sites=a,b,c\n") != NULL);
    }
    /* Without the mark, the added site's file lists d: it would not agree. */
    full->sites[3].added = 0;
    char *t_unmarked = NULL;
    CHECK_EQ_INT(gt_topo_shared_text(full, &t_unmarked), GT_OK);
    if (t_unmarked && t_slots) CHECK(gt_topo_shared_diff(t_slots, t_unmarked, NULL, NULL) > 0);
    free(t_unmarked);
    free(t_cfg);
    free(t_slots);
    free(t_full);
    free(t_taken);
out:
    gt_topo_destroy(cfg);
    gt_topo_destroy(slots);
    gt_topo_destroy(full);
}

int main(void)
{
    test_slots();
    /* The rows of the table, and more of the shared keys. */
    expect("codec.name=fp32", "codec.name", "\"int8\"", "\"fp32\"");
    expect("codec.name=bf16", "codec.name", "\"int8\"", "\"bf16\"");
    expect("wan.lanes=4", "wan.lanes", "2", "4");
    expect("codec.block_size=128", "codec.block_size", "64", "128");
    expect("inner.steps=10", "inner.steps", "20", "10");
    expect("run.rounds=8", "run.rounds", "6", "8");
    expect("outer.overlap_steps=0", "outer.overlap_steps", "2", "0");
    expect("outer.lr=0.3", "outer.lr", "0.7", "0.3");
    expect("outer.optimizer=average", "outer.optimizer", "nesterov", "average");
    expect("run.seed=8", "run.seed", "7", "8");
    expect("model.preset=small", "model.preset", NULL, NULL);
    expect("outer.fragments=2", "outer.fragments", "1", "2");
    expect("outer.mode=sync-dp", "outer.mode", "diloco", "sync-dp");
    expect("wan.transport=libfabric", "wan.transport", "ucx", "libfabric");
    expect("security.mode=encrypted", "security.mode", "none", "encrypted");
    expect("sites.c.ranks=2", "sites.c.ranks", "1", "2");
    expect("inner.lr=0.001", "inner.lr", "0.003", "0.001");
    expect("data.synthetic_branching=8", "data.synthetic_branching", "4", "8");
    expect("wan.emulation.latency_ms=20", "wan.emulation.latency_ms", "10", "20");
    /* A link that is not wan.emulation's is named by its pair. */
    expect("links[a,c].cuts=5+2", "links[a,c]", "(absent)",
           "latency_ms: 10, jitter_ms: 2, bandwidth_mbps: 1000, loss: 0, cuts: 5+2");

    /* Per-site keys may differ. */
    expect("sites.c.address=10.0.0.3:7000", NULL, NULL, NULL);
    expect("sites.c.backend=cuda", NULL, NULL, NULL);
    expect("sites.c.secret_key=/elsewhere/c.key", NULL, NULL, NULL);
    expect("data.path=/data/site-c.txt", NULL, NULL, NULL);
    expect("run.run_dir=/scratch/runs", NULL, NULL, NULL);
    expect("run.name=other-label", NULL, NULL, NULL);
    expect("run.log_every=1", NULL, NULL, NULL);
    expect("inner.emulated_step_ms=30", NULL, NULL, NULL);
    expect("wan.connect_timeout_ms=60000", NULL, NULL, NULL);
    expect("wan.peer_timeout_ms=9000", NULL, NULL, NULL);
    expect("membership.endpoints=https://10.0.0.9:2379", NULL, NULL, NULL);
    expect("membership.plain_http=true", NULL, NULL, NULL);
    expect("membership.stuck_after_s=30", NULL, NULL, NULL);
    expect("security.cipher=xchacha20poly1305", NULL, NULL, NULL);
    expect("local.threads=4", NULL, NULL, NULL);
    expect("plan.mfu=0.4", NULL, NULL, NULL);
    /* The same value spelt otherwise. */
    expect("inner.steps=20", NULL, NULL, NULL);
    expect("outer.lr=0.70", NULL, NULL, NULL);
    { /* a link written out with wan.emulation's own values, or cut by the file instead of a
       * flag, is the same link */
        char *base = shared(k_yaml, NULL, 0), *y = malloc(strlen(k_yaml) + 256);
        sprintf(y, "%slinks:\n  - {between: [a, b], latency_ms: 10, jitter_ms: 2}\n", k_yaml);
        char *other = shared(y, NULL, 0);
        CHECK(base && other && strcmp(base, other) == 0);
        const char *cut[1] = {"links[b,c].cuts=5+2"};
        char *flag = shared(k_yaml, cut, 1);
        sprintf(y, "%slinks:\n  - {between: [c, b], cuts: [{start_s: 5, duration_s: 2}]}\n",
                k_yaml);
        char *file = shared(y, NULL, 0);
        CHECK(flag && file && strcmp(flag, file) == 0);
        CHECK_STR_CONTAINS(flag, "links[b,c]=");
        free(base);
        free(other);
        free(flag);
        free(file);
        free(y);
    }

    /* The sites' order is their ids on the wire. */
    {
        char *base = shared(k_yaml, NULL, 0);
        char *swapped = strdup(k_yaml);
        char *pa = strstr(swapped, "{name: a"), *pb = strstr(swapped, "{name: b");
        pa[7] = 'b';
        pb[7] = 'a';
        char *other = shared(swapped, NULL, 0);
        struct seen s;
        memset(&s, 0, sizeof s);
        CHECK(base && other && gt_topo_shared_diff(base, other, on_diff, &s) >= 1);
        CHECK_STR_CONTAINS(s.keys, "sites");
        CHECK_EQ_INT(strcmp(s.ours, "a,b,c"), 0);
        CHECK_EQ_INT(strcmp(s.theirs, "b,a,c"), 0);
        free(base);
        free(other);
        free(swapped);
    }
    /* A key missing from one side (another version's text) is named too; empty texts agree. */
    {
        struct seen s;
        memset(&s, 0, sizeof s);
        CHECK_EQ_INT(gt_topo_shared_diff("a=1\nb=2\n", "b=2\nc=3\n", on_diff, &s), 2);
        CHECK_EQ_INT(strcmp(s.keys, "a c"), 0);
        CHECK_EQ_INT(gt_topo_shared_diff(NULL, "", NULL, NULL), 0);
    }
    /* Every shared key has a line: far more than the handful above. */
    {
        char *base = shared(k_yaml, NULL, 0);
        size_t lines = 0;
        for (const char *c = base; c && *c; c++) lines += *c == '\n';
        CHECK_MSG(lines > 60, "only %zu shared keys", lines);
        CHECK_STR_CONTAINS(base, "\ninner.steps=20\n");
        CHECK_STR_CONTAINS(base, "\nsites=a,b,c\n");
        CHECK(!strstr(base, "address"));
        CHECK(!strstr(base, "plan."));
        free(base);
    }
    return GT_TEST_DONE();
}
