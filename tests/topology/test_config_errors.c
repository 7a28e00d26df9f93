/* test_config_errors.c — every kind of bad sites.yaml is rejected with a message that starts
 * FILE:LINE:COLUMN: and names the key; good files load with the documented precedence.
 *
 * Each case is a whole small file; `want_pos` is the line:column of the offending token as
 * counted by hand in the text (1-based), `want_key` the key the message must name. */
#include "gt_test.h"
#include "gt_topology.h"

#include <stdlib.h>

#define SITES                       \
    "sites:\n"                      \
    "  - name: a\n"                 \
    "    address: 127.0.0.1:5000\n" \
    "  - name: b\n"                 \
    "    address: 127.0.0.1:5001\n"
#define SITES3 SITES "  - name: c\n    address: 127.0.0.1:5002\n"

typedef struct {
    const char *what;
    const char *yaml;
    const char *want_pos;  /* "LINE:COL" */
    const char *want_key;  /* text the message must contain, e.g. "'outer.lr'" */
    const char *want_also; /* more text it must contain, or NULL */
} bad_case_t;

static const bad_case_t cases[] = {
    {"YAML syntax error", "run:\n  rounds: [1, 2\n" SITES, "3:6", "YAML syntax error", NULL},
    {"tab indentation", "run:\n\trounds: 3\n" SITES, "2:1", "YAML syntax error", NULL},
    {"empty file", "", "1:1", "the file is empty", NULL},
    {"only comments", "# nothing here\n\n", "1:1", "the file is empty", NULL},
    {"top level is a list", "- a\n- b\n", "1:1", "'(top level)'", "a mapping"},
    {"no sites key", "run:\n  rounds: 3\n", "1:1", "'sites'", "no sites"},
    {"empty site list", "run:\n  rounds: 3\nsites: []\n", "3:8", "'sites'", "no sites"},
    {"sites not a list", "sites:\n  name: a\n", "2:3", "'sites'", "wrong type"},
    {"wrong type: text for integer", "run:\n  rounds: abc\n" SITES, "2:11", "'run.rounds'",
     "'abc'"},
    {"wrong type: float for integer", "run:\n  rounds: 1.5\n" SITES, "2:11", "'run.rounds'",
     "an integer in [1, 10000000]"},
    {"negative unsigned", "run:\n  seed: -1\n" SITES, "2:9", "'run.seed'", "'-1'"},
    {"quoted number", "run:\n  seed: \"12\"\n" SITES, "2:9", "'run.seed'", "quoted string"},
    {"integer out of range", "run:\n  rounds: 0\n" SITES, "2:11", "'run.rounds'", "[1, "},
    {"float out of range", "outer:\n  lr: -1\n" SITES, "2:7", "'outer.lr'", "(0, 10]"},
    {"open bound", "outer:\n  momentum: 1\n" SITES, "2:13", "'outer.momentum'", "[0, 1)"},
    {"not a number", "inner:\n  lr: fast\n" SITES, "2:7", "'inner.lr'", "'fast'"},
    {"bad boolean", "codec:\n  error_feedback: maybe\n" SITES, "2:19", "'codec.error_feedback'",
     "true or false"},
    {"unknown enum word", "wan:\n  transport: tcp\n" SITES, "2:14", "'wan.transport'",
     "one of: ucx, libfabric"},
    {"enum typo", "codec:\n  name: int9\n" SITES, "2:9", "'codec.name'", "did you mean 'int8'"},
    {"unknown section", "ouer:\n  lr: 0.5\n" SITES, "1:1", "'ouer'", "did you mean 'outer'"},
    {"unknown key", "outer:\n  lrr: 0.5\n" SITES, "2:3", "'outer.lrr'", "did you mean 'lr'"},
    {"key in the wrong section", "outer:\n  warmup_steps: 5\n" SITES, "2:3", "'outer.warmup_steps'",
     "inner.warmup_steps"},
    {"section is a scalar", "run: 5\n" SITES, "1:6", "'run'", "a mapping"},
    {"key given twice", "run:\n  rounds: 3\n  rounds: 4\n" SITES, "3:3", "'run.rounds'",
     "given twice"},
    {"nested section unknown key", "wan:\n  emulation:\n    latncy_ms: 5\n" SITES, "3:5",
     "'wan.emulation.latncy_ms'", "did you mean 'latency_ms'"},
    {"duplicate site name",
     "sites:\n  - name: a\n    address: 127.0.0.1:1\n  - name: a\n    address: 127.0.0.1:2\n",
     "4:1", "'sites[1].name'", "duplicate site name 'a'"},
    {"site named ..", "sites:\n  - name: ..\n    address: 127.0.0.1:1\n", "2:11", "'sites[0].name'",
     "not starting with '.'"},
    {"site named .", "sites:\n  - name: .\n    address: 127.0.0.1:1\n", "2:11", "'sites[0].name'",
     "not starting with '.'"},
    {"site without address", "sites:\n  - name: a\n", "2:5", "'sites[0].address'", "missing"},
    {"site without name", "sites:\n  - address: 127.0.0.1:1\n", "2:5", "'sites[0].name'",
     "missing"},
    {"site address without port", "sites:\n  - name: a\n    address: localhost\n", "3:14",
     "'sites[0].address'", "host:port"},
    {"site port out of range", "sites:\n  - name: a\n    address: 127.0.0.1:70000\n", "3:14",
     "'sites[0].address'", "'127.0.0.1:70000'"},
    {"site unknown key", "sites:\n  - name: a\n    address: h:1\n    rank: 2\n", "4:5",
     "'sites[0].rank'", "did you mean 'ranks'"},
    {"site name with a space", "sites:\n  - name: a b\n    address: h:1\n", "2:11",
     "'sites[0].name'", "'a b'"},
    {"site bad public key", "sites:\n  - name: a\n    address: h:1\n    public_key: abc\n", "4:17",
     "'sites[0].public_key'", "base64"},
    {"site ranks zero", "sites:\n  - name: a\n    address: h:1\n    ranks: 0\n", "4:12",
     "'sites[0].ranks'", "[1, 65536]"},
    {"same address twice", "sites:\n  - name: a\n    address: h:1\n  - name: b\n    address: h:1\n",
     "4:1", "'sites[1].address'", "also site 'a'"},
    {"link to an unknown site", SITES "links:\n  - between: [a, c]\n", "7:18", "'links[0].between'",
     "unknown site 'c'"},
    {"link to itself", SITES "links:\n  - between: [a, a]\n", "7:18", "'links[0].between'",
     "to itself"},
    {"link with one name", SITES "links:\n  - between: [a]\n", "7:14", "'links[0].between'",
     "two different site names"},
    {"link given twice",
     SITES "links:\n  - between: [a, b]\n  - between: [b, a]\n    latency_ms: 3\n", "8:5",
     "'links[1].between'", "already configured"},
    {"link without between", SITES "links:\n  - latency_ms: 5\n", "7:5", "'links[0].between'",
     "missing"},
    {"link bad loss", SITES "links:\n  - between: [a, b]\n    loss: 1\n", "8:11", "'links[0].loss'",
     "[0, 1)"},
    {"link cut without duration", SITES "links:\n  - between: [a, b]\n    cuts: [{start_s: 1}]\n",
     "8:12", "'links[0].cuts'", "duration_s"},
    {"jitter above latency", "wan:\n  emulation:\n    latency_ms: 5\n    jitter_ms: 10\n" SITES,
     "4:16", "'wan.emulation.jitter_ms'", "at most latency_ms"},
    {"deadline bounds reversed", "outer:\n  deadline_min_ms: 5000\n  deadline_max_ms: 100\n" SITES,
     "2:20", "'outer.deadline_min_ms'", "deadline_max_ms"},
    {"sparseloco without error feedback",
     "outer:\n  optimizer: sparseloco\ncodec:\n  error_feedback: false\n" SITES, "2:14",
     "'outer.optimizer'", "codec.error_feedback"},
    {"catch_up with sync-dp", "outer:\n  mode: sync-dp\n  catch_up: true\n" SITES, "3:13",
     "'outer.catch_up'", "outer.mode: diloco"},
    {"catch_up with fragments",
     "inner:\n  steps: 10\nouter:\n  fragments: 2\n  catch_up: true\n" SITES, "5:13",
     "'outer.catch_up'", "outer.fragments > 1"},
    {"overlap not below H", "inner:\n  steps: 10\nouter:\n  overlap_steps: 10\n" SITES, "4:18",
     "'outer.overlap_steps'", "inner.steps"},
    {"fragments not dividing H", "inner:\n  steps: 10\nouter:\n  fragments: 4\n" SITES, "4:14",
     "'outer.fragments'", "a divisor of inner.steps"},
    {"fragments: overlap past H/F",
     "inner:\n  steps: 20\nwan:\n  lanes: 8\nouter:\n  fragments: 4\n  overlap_steps: 5\n" SITES,
     "6:14", "'outer.fragments'", "below H/F = 5"},
    {"fragments: more than the lanes",
     "inner:\n  steps: 20\nwan:\n  lanes: 2\nouter:\n  fragments: 4\n" SITES, "6:14",
     "'outer.fragments'", "wan.lanes = 2"},
    {"heartbeat too slow for the lease",
     "membership:\n  lease_ttl_s: 2\n  heartbeat_ms: 1500\n" SITES, "3:17",
     "'membership.heartbeat_ms'", "half the lease"},
    {"block size not a power of two", "codec:\n  block_size: 100\n" SITES, "2:15",
     "'codec.block_size'", "power of two"},
    {"bad etcd endpoint", "membership:\n  endpoints: [\"localhost:2379\"]\n" SITES, "2:15",
     "'membership.endpoints'", "http://host:port"},
    {"heads do not divide d_model", "model:\n  d_model: 100\n  n_head: 3\n" SITES, "3:11",
     "'model.n_head'", "divisor"},
    {"text data without a path", "data:\n  kind: text\n" SITES, "2:9", "'data.path'", "missing"},
    {"unknown model preset", "model:\n  preset: gpt3\n" SITES, "2:11", "'model.preset'",
     "tiny, small, gpt2-124m"},
    {"sites' ranks without a small common multiple",
     "wan:\n  lanes: 128\nsites:\n  - name: a\n    address: h:1\n    ranks: 7\n"
     "  - name: b\n    address: h:2\n    ranks: 11\n",
     "7:1", "'sites[1].ranks'", "least common multiple is at most 64"},
    {"fewer lanes than ranks",
     "wan:\n  lanes: 1\nsites:\n  - name: a\n    address: h:1\n    ranks: 2\n"
     "  - name: b\n    address: h:2\n    ranks: 2\n",
     "2:10", "'wan.lanes'", "at least 2 (each group"},
    {"fewer lanes than WAN groups",
     "wan:\n  lanes: 4\nsites:\n  - name: a\n    address: h:1\n    ranks: 2\n"
     "  - name: b\n    address: h:2\n    ranks: 3\n",
     "2:10", "'wan.lanes'", "4 lanes for 6 WAN groups"},
    {"fragments: more than lanes / WAN groups",
     "inner:\n  steps: 20\nwan:\n  lanes: 4\nouter:\n  fragments: 4\nsites:\n  - name: a\n"
     "    address: h:1\n    ranks: 2\n  - name: b\n    address: h:2\n",
     "6:14", "'outer.fragments'", "F x G <= wan.lanes = 4 (G = 2"},
    {"tensor parallel does not divide ranks",
     "local:\n  tensor_parallel: 2\nsites:\n  - name: a\n    address: h:1\n    ranks: 3\n", "4:1",
     "'sites[0].ranks'", "multiple of"},
    {"value missing", "run:\n  rounds:\n" SITES, "2:10", "'run.rounds'", "no value"},
    {"wildcard bind without advertise", "sites:\n  - name: a\n    address: 0.0.0.0:7000\n", "2:1",
     "'sites[0].advertise'", "cannot dial"},
    {"IPv6 wildcard bind without advertise", "sites:\n  - name: a\n    address: \"[::]:7000\"\n",
     "2:1", "'sites[0].advertise'", "every interface"},
    {"wildcard advertised",
     "sites:\n  - name: a\n    address: 10.0.0.1:7000\n    advertise: 0.0.0.0:7000\n", "2:1",
     "'sites[0].advertise'", "wildcard"},
    {"advertised address taken",
     "sites:\n  - name: a\n    address: 0.0.0.0:7000\n    advertise: 192.0.2.1:7000\n"
     "  - name: b\n    address: 0.0.0.0:7000\n    advertise: 192.0.2.1:7000\n",
     "5:1", "'sites[1].advertise'", "also site 'a'"},
    {"etcd CA file missing", "membership:\n  tls:\n    ca: /nonexistent/ca.pem\n" SITES, "3:9",
     "'membership.tls.ca'", "cannot read"},
    {"etcd client key without certificate", "membership:\n  tls:\n    key: /dev/null\n" SITES,
     "3:10", "'membership.tls.key'", "given without membership.tls.cert"},
    {"plain-HTTP etcd not asked for", "membership:\n  endpoints: [http://h:2379]\n" SITES, "2:14",
     "'membership.endpoints'", "membership.plain_http: true"},
    {"etcd TLS over http",
     "membership:\n  endpoints: [http://h:2379]\n  tls:\n    ca: /dev/null\n" SITES, "2:14",
     "'membership.endpoints'", "https://"},
    {"data ports reversed", "wan:\n  data_port_min: 7200\n  data_port_max: 7100\n" SITES, "2:18",
     "'wan.data_port_min'", "data_port_min <= data_port_max"},
    {"fewer site slots than sites",
     "outer:\n  site_slots: 1\nsites:\n  - name: a\n    address: h:1\n  - name: b\n    address: "
     "h:2\n",
     "2:15", "'outer.site_slots'", "1 slots for 2 configured sites"},
    {"metrics without port", "sites:\n  - name: a\n    address: h:1\n    metrics: h\n", "4:14",
     "'sites[0].metrics'", "host:port"},
};

/* Loads `yaml` named "t.yaml", capturing the error text. */
static gt_status_t load(const char *yaml, const gt_topo_load_params_t *lp_in, char **errs_p,
                        gt_topo_config_t **cfg_p)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *err = open_memstream(&buf, &len);
    gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;
    if (lp_in) lp = *lp_in;
    lp.err = err;
    gt_topo_config_t *cfg = NULL;
    gt_status_t st = gt_topo_load_string(yaml, strlen(yaml), "t.yaml", &lp, &cfg);
    fclose(err);
    *errs_p = buf ? buf : strdup("");
    if (cfg_p)
        *cfg_p = cfg;
    else
        gt_topo_destroy(cfg);
    return st;
}

static void test_bad_cases(void)
{
    size_t n = sizeof cases / sizeof cases[0];
    CHECK_MSG(n >= 25, "only %zu malformed cases", n);
    for (size_t i = 0; i < n; i++) {
        const bad_case_t *c = &cases[i];
        char *errs = NULL, prefix[64];
        gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;
        lp.use_env = 0;
        gt_topo_config_t *cfg = NULL;
        gt_status_t st = load(c->yaml, &lp, &errs, &cfg);
        snprintf(prefix, sizeof prefix, "t.yaml:%s: ", c->want_pos);
        CHECK_MSG(st == GT_ERR_CONFIG, "[%s] status %d, expected GT_ERR_CONFIG", c->what, st);
        CHECK_MSG(cfg == NULL, "[%s] a config was returned for a bad file", c->what);
        CHECK_MSG(strncmp(errs, prefix, strlen(prefix)) == 0,
                  "[%s] message should start with '%s':\n%s", c->what, prefix, errs);
        CHECK_MSG(strstr(errs, c->want_key), "[%s] message should name %s:\n%s", c->what,
                  c->want_key, errs);
        if (c->want_also)
            CHECK_MSG(strstr(errs, c->want_also), "[%s] message should say '%s':\n%s", c->what,
                      c->want_also, errs);
        CHECK_MSG(strstr(errs, "allowed") != NULL, "[%s] no 'allowed' in:\n%s", c->what, errs);
        free(errs);
    }
}

static void test_all_errors_reported(void)
{
    char *errs = NULL;
    gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;
    lp.use_env = 0;
    load("run:\n  rounds: 0\nouter:\n  lr: 99\n" SITES, &lp, &errs, NULL);
    CHECK_STR_CONTAINS(errs, "t.yaml:2:11: key 'run.rounds'");
    CHECK_STR_CONTAINS(errs, "t.yaml:4:7: key 'outer.lr'");
    free(errs);
}

/* Sites with different ranks load (the run gets lcm(ranks) WAN groups). */
static void test_unequal_ranks(void)
{
    char *errs = NULL;
    gt_topo_config_t *cfg = NULL;
    gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;
    lp.use_env = 0;
    CHECK_EQ_INT(
        load("wan:\n  lanes: 4\nsites:\n  - name: a\n    address: h:1\n    ranks: 2\n"
             "  - name: b\n    address: h:2\n  - name: c\n    address: h:3\n    ranks: 4\n",
             &lp, &errs, &cfg),
        GT_OK);
    CHECK_MSG(cfg != NULL, "2 + 1 + 4 ranks refused:\n%s", errs ? errs : "");
    if (cfg) {
        CHECK_EQ_INT(cfg->sites[0].ranks, 2);
        CHECK_EQ_INT(cfg->sites[1].ranks, 1);
        CHECK_EQ_INT(gt_topo_wan_groups(cfg), 4);
        gt_topo_destroy(cfg);
    }
    free(errs);
}

static void test_defaults_and_precedence(void)
{
    const char *yaml = "outer:\n  lr: 0.5\n  momentum: 0.8\n" SITES
                       "links:\n  - between: [b, a]\n    latency_ms: 30\n";
    char *errs = NULL;
    gt_topo_config_t *cfg = NULL;
    gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;

    /* File values, defaults, link inheritance. */
    lp.use_env = 0;
    CHECK_EQ_INT(load(yaml, &lp, &errs, &cfg), GT_OK);
    free(errs);
    if (!cfg) return;
    CHECK_CLOSE(cfg->outer.lr, 0.5, 0, 0);
    CHECK_CLOSE(cfg->outer.momentum, 0.8, 0, 0);
    CHECK_EQ_INT(cfg->inner.steps, 50); /* documented default */
    CHECK_EQ_INT(cfg->wan.transport, GT_TRANSPORT_UCX);
    CHECK_EQ_INT(cfg->security.mode, GT_SECURITY_ENCRYPTED);
    CHECK_EQ_INT(cfg->n_sites, 2);
    CHECK(strcmp(cfg->sites[1].secret_key, "keys/b.key") == 0);
    CHECK_EQ_INT(cfg->n_links, 1);
    gt_topo_link_params_t lk;
    gt_topo_link_params(cfg, 0, 1, &lk);
    CHECK_CLOSE(lk.latency_ms, 30, 0, 0);
    CHECK_CLOSE(lk.bandwidth_mbps, cfg->wan.emulation.link.bandwidth_mbps, 0, 0);
    gt_topo_destroy(cfg);

    /* Environment beats the file; a flag beats the environment. */
    setenv("GT_OUTER_LR", "0.25", 1);
    setenv("GT_OUTER_MOMENTUM", "0.5", 1);
    setenv("GT_WAN_EMULATION_LATENCY_MS", "12", 1);
    const char *sets[] = {"outer.momentum=0.3", "sites.a.ranks=4", "sites.b.ranks=4"};
    lp.use_env = 1;
    lp.sets = sets;
    lp.n_sets = 3;
    CHECK_EQ_INT(load(yaml, &lp, &errs, &cfg), GT_OK);
    free(errs);
    if (cfg) {
        CHECK_CLOSE(cfg->outer.lr, 0.25, 0, 0);
        CHECK_CLOSE(cfg->outer.momentum, 0.3, 0, 0);
        CHECK_EQ_INT(cfg->sites[1].ranks, 4);
        gt_topo_link_params(cfg, 0, 1, &lk);
        CHECK_CLOSE(lk.latency_ms, 30, 0, 0); /* the explicit link value stays */
        CHECK_CLOSE(cfg->wan.emulation.link.latency_ms, 12, 0, 0);
        gt_topo_destroy(cfg);
    }

    /* A bad environment value names the variable; a bad flag names the flag. */
    setenv("GT_OUTER_LR", "abc", 1);
    lp.n_sets = 0;
    CHECK_EQ_INT(load(yaml, &lp, &errs, NULL), GT_ERR_CONFIG);
    CHECK_STR_CONTAINS(errs, "env:GT_OUTER_LR: key 'outer.lr': invalid value 'abc'");
    free(errs);
    unsetenv("GT_OUTER_LR");
    unsetenv("GT_OUTER_MOMENTUM");
    unsetenv("GT_WAN_EMULATION_LATENCY_MS");

    const char *bad_sets[] = {"outer.lr=5000", "outer.lrr=1", "sites.zz.ranks=2", "novalue"};
    lp.sets = bad_sets;
    lp.n_sets = 4;
    CHECK_EQ_INT(load(yaml, &lp, &errs, NULL), GT_ERR_CONFIG);
    CHECK_STR_CONTAINS(errs, "flag:--set outer.lr=5000: key 'outer.lr'");
    CHECK_STR_CONTAINS(errs,
                       "flag:--set outer.lrr=1: key 'outer.lrr': unknown key (did you mean 'lr'?)");
    CHECK_STR_CONTAINS(errs, "flag:--set sites.zz.ranks=2: key 'sites.zz.ranks': no such site");
    CHECK_STR_CONTAINS(errs, "flag:--set novalue: expected key=value");
    free(errs);
}

/* --set links[A,B].cuts=S+D,...: replaces the link's cuts (the file's link keeps its other
 * values), creates a link entry that inherits wan.emulation, clears with an empty value; bad
 * names and windows are refused with the flag named (launch --chaos hands its cuts this way). */
static void test_set_link_cuts(void)
{
    const char *yaml = "wan:\n  emulation:\n    latency_ms: 7\n" SITES3
                       "links:\n  - between: [a, b]\n    latency_ms: 30\n"
                       "    cuts: [{start_s: 1, duration_s: 2}]\n";
    char *errs = NULL;
    gt_topo_config_t *cfg = NULL;
    gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;
    lp.use_env = 0;
    const char *sets[] = {"links[b,a].cuts=4.5+3,20+0.25", "links[a,c].cuts=9+1"};
    lp.sets = sets;
    lp.n_sets = 2;
    CHECK_EQ_INT(load(yaml, &lp, &errs, &cfg), GT_OK);
    free(errs);
    if (cfg) {
        gt_topo_link_params_t lk;
        gt_topo_link_params(cfg, 0, 1, &lk);
        CHECK_CLOSE(lk.latency_ms, 30, 0, 0);
        CHECK_EQ_INT(lk.n_cuts, 2);
        CHECK_CLOSE(lk.cuts[0].start_s, 4.5, 0, 0);
        CHECK_CLOSE(lk.cuts[0].duration_s, 3, 0, 0);
        CHECK_CLOSE(lk.cuts[1].start_s, 20, 0, 0);
        CHECK_CLOSE(lk.cuts[1].duration_s, 0.25, 0, 0);
        gt_topo_link_params(cfg, 0, 2, &lk);
        CHECK_CLOSE(lk.latency_ms, 7, 0, 0); /* a new entry inherits wan.emulation */
        CHECK_EQ_INT(lk.n_cuts, 1);
        CHECK_CLOSE(lk.cuts[0].start_s, 9, 0, 0);
        gt_topo_link_params(cfg, 1, 2, &lk);
        CHECK_EQ_INT(lk.n_cuts, 0);
        gt_topo_destroy(cfg);
        cfg = NULL;
    }
    const char *clear[] = {"links[a,b].cuts="};
    lp.sets = clear;
    lp.n_sets = 1;
    CHECK_EQ_INT(load(yaml, &lp, &errs, &cfg), GT_OK);
    free(errs);
    if (cfg) {
        gt_topo_link_params_t lk;
        gt_topo_link_params(cfg, 0, 1, &lk);
        CHECK_EQ_INT(lk.n_cuts, 0);
        gt_topo_destroy(cfg);
    }
    const char *bad[] = {"links[a,zz].cuts=1+1", "links[a,a].cuts=1+1",  "links[a,b].cuts=1",
                         "links[a,b].cuts=1+0",  "links[a,b].cuts=-1+2", "links[a,b].latency_ms=3"};
    lp.sets = bad;
    lp.n_sets = 6;
    CHECK_EQ_INT(load(yaml, &lp, &errs, NULL), GT_ERR_CONFIG);
    CHECK_STR_CONTAINS(errs, "flag:--set links[a,zz].cuts=1+1: key 'links[a,zz].cuts'");
    CHECK_STR_CONTAINS(errs, "flag:--set links[a,a].cuts=1+1: key 'links[a,a].cuts'");
    CHECK_STR_CONTAINS(errs, "flag:--set links[a,b].cuts=1: key 'links[a,b].cuts': invalid value");
    CHECK_STR_CONTAINS(errs, "flag:--set links[a,b].cuts=1+0: key 'links[a,b].cuts': invalid");
    CHECK_STR_CONTAINS(errs, "flag:--set links[a,b].cuts=-1+2: key 'links[a,b].cuts': invalid");
    CHECK_STR_CONTAINS(errs, "flag:--set links[a,b].latency_ms=3: key 'links[a,b].latency_ms'");
    free(errs);
}

static void test_print_round_trip(void)
{
    const char *yaml = "run:\n  name: x\n  seed: 99\ninner:\n  lr: 0.000123\n" SITES
                       "links:\n  - between: [a, b]\n    jitter_ms: 0\n    cuts: [{start_s: 1.5, "
                       "duration_s: 2}]\n";
    char *errs = NULL, *out1 = NULL, *out2 = NULL;
    size_t len1 = 0, len2 = 0;
    gt_topo_config_t *cfg = NULL, *cfg2 = NULL;
    gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;
    lp.use_env = 0;
    CHECK_EQ_INT(load(yaml, &lp, &errs, &cfg), GT_OK);
    free(errs);
    if (!cfg) return;
    FILE *f = open_memstream(&out1, &len1);
    CHECK_EQ_INT(gt_topo_print(cfg, f), GT_OK);
    fclose(f);
    CHECK_EQ_INT(load(out1, &lp, &errs, &cfg2), GT_OK);
    free(errs);
    if (cfg2) {
        CHECK(cfg2->run.seed == 99);
        CHECK_CLOSE(cfg2->inner.lr, 0.000123, 0, 0);
        CHECK_EQ_INT(cfg2->links[0].params.n_cuts, 1);
        CHECK_CLOSE(cfg2->links[0].params.cuts[0].start_s, 1.5, 0, 0);
        /* Everything but the source comments is identical the second time. */
        f = open_memstream(&out2, &len2);
        gt_topo_print(cfg2, f);
        fclose(f);
        CHECK(strstr(out2, "seed: 99") != NULL);
        CHECK(strstr(out1, "lr: 0.000123") != NULL && strstr(out2, "lr: 0.000123") != NULL);
        free(out2);
        gt_topo_destroy(cfg2);
    }
    free(out1);
    gt_topo_destroy(cfg);
}

/* Sites that bind every interface on their own hosts and advertise where they are reached;
 * where each serves its metrics. */
static void test_addresses(void)
{
    char *errs = NULL;
    gt_topo_config_t *cfg = NULL;
    gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;
    lp.use_env = 0;
    CHECK_EQ_INT(load("metrics:\n  listen: 127.0.0.1:9400\nsites:\n"
                      "  - name: a\n    address: 0.0.0.0:7000\n    advertise: 192.0.2.1:7000\n"
                      "    ranks: 2\n"
                      "  - name: b\n    address: 0.0.0.0:7000\n    advertise: \"[2001:db8::2]:0\"\n"
                      "  - name: c\n    address: 10.0.0.3:7000\n    metrics: \"[::1]:9500\"\n",
                      &lp, &errs, &cfg),
                 GT_OK);
    CHECK_MSG(cfg != NULL, "two wildcard binds advertised apart refused:\n%s", errs ? errs : "");
    if (cfg) {
        CHECK_MSG(strcmp(gt_topo_site_advertised(&cfg->sites[0]), "192.0.2.1:7000") == 0, "%s",
                  gt_topo_site_advertised(&cfg->sites[0]));
        CHECK_MSG(strcmp(gt_topo_site_advertised(&cfg->sites[1]), "[2001:db8::2]:0") == 0, "%s",
                  gt_topo_site_advertised(&cfg->sites[1]));
        CHECK_MSG(strcmp(gt_topo_site_advertised(&cfg->sites[2]), "10.0.0.3:7000") == 0, "%s",
                  gt_topo_site_advertised(&cfg->sites[2]));
        char m[64];
        /* metrics.listen: port + site x R + rank, R = 2 (site a's ranks) */
        CHECK_EQ_INT(gt_topo_metrics_address(cfg, 0, 1, m, sizeof m), GT_OK);
        CHECK_MSG(strcmp(m, "127.0.0.1:9401") == 0, "%s", m);
        CHECK_EQ_INT(gt_topo_metrics_address(cfg, 1, 0, m, sizeof m), GT_OK);
        CHECK_MSG(strcmp(m, "127.0.0.1:9402") == 0, "%s", m);
        /* the site's own: port + rank */
        CHECK_EQ_INT(gt_topo_metrics_address(cfg, 2, 0, m, sizeof m), GT_OK);
        CHECK_MSG(strcmp(m, "[::1]:9500") == 0, "%s", m);
        gt_topo_destroy(cfg);
    }
    free(errs);
    errs = NULL;
    CHECK_EQ_INT(load(SITES, &lp, &errs, &cfg), GT_OK);
    if (cfg) { /* neither key: no metrics */
        char m[64] = "x";
        CHECK_EQ_INT(gt_topo_metrics_address(cfg, 0, 0, m, sizeof m), GT_OK);
        CHECK_MSG(strcmp(m, "") == 0, "%s", m);
        gt_topo_destroy(cfg);
    }
    free(errs);
}

static void test_repo_sites_yaml(void)
{
    const char *src = getenv("GT_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/sites.yaml", src ? src : ".");
    gt_topo_config_t *cfg = NULL;
    gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;
    lp.use_env = 0;
    CHECK_EQ_INT(gt_topo_load(path, &lp, &cfg), GT_OK);
    if (cfg) {
        CHECK(cfg->n_sites >= 3);
        CHECK(cfg->wan.emulation.enabled);
        gt_topo_destroy(cfg);
    }
}

int main(void)
{
    test_bad_cases();
    test_all_errors_reported();
    test_unequal_ranks();
    test_defaults_and_precedence();
    test_set_link_cuts();
    test_print_round_trip();
    test_addresses();
    test_repo_sites_yaml();
    return GT_TEST_DONE();
}
