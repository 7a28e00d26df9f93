/* cmd_sites.c — `geotrain sites list|remove`: what a run's etcd says of its sites, and an operator
 * retires a site from a running run for good, through the run's control plane (etcd, with the
 * config's TLS client certificate). The site is marked retired under the run id and, if it is
 * registered, evicted (its member key deleted, its lease revoked): it leaves at its next heartbeat
 * and exits 4, its chunks move to the others at once, nobody waits for it, and started again it is
 * refused. */
#include "cli.h"
#include "gt_topology.h"
#include "gt_wan.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SETS 64

static void usage(FILE *out)
{
    fprintf(out,
            "usage: geotrain sites remove CONFIG NAME [--run-id ID] [--set KEY=VALUE ...]\n"
            "       geotrain sites list CONFIG [--run-id ID] [--set KEY=VALUE ...]\n\n"
            "list: every configured site of the run and whether it is registered now (with the\n"
            "address it published), not registered, or retired.\n\n"
            "remove: "
            "retires site NAME from the run for good, while it runs (docs/diloco.md#retiring-a-"
            "site):\n"
            "marks it retired under the run id in etcd (membership.endpoints of CONFIG, over\n"
            "membership.tls) and, when it is registered, evicts it: its member key deleted and\n"
            "its lease revoked. The site sees its lease go at its next heartbeat, finds the mark\n"
            "and leaves without sending or applying anything more (exit 4, summary status\n"
            "\"retired\"); the others move its chunks at once and never wait for it; `geotrain\n"
            "launch` does not start it again; started by hand it is refused after it registers.\n"
            "The anchors of the others go on unchanged (invariant I1). A new run under another\n"
            "id, or this id after --reuse-run-id once the run is over, can have it again.\n\n"
            "Options:\n"
            "  --run-id ID      the run (default: run.name of CONFIG; launch uses its run\n"
            "                   directory's name)\n"
            "  --set KEY=VALUE  override a key of CONFIG (repeatable), e.g. the endpoints and\n"
            "                   certificates of the run's etcd\n"
            "  -h, --help       this text\n"
            "Exit status: 0 done, 1 etcd refused or could not be reached, 2 misuse.\n");
}

/* The options and CONFIG of `sites remove|list`: the loaded config (NULL: the exit status is
 * in *rc_p), the run id, and the positional arguments after CONFIG. */
static gt_topo_config_t *load(int argc, char **argv, int n_pos, const char **run_id_p,
                              const char **pos, int *rc_p)
{
    static const struct option opts[] = {{"run-id", required_argument, NULL, 'I'},
                                         {"set", required_argument, NULL, 'S'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *sets[MAX_SETS];
    size_t n_sets = 0;
    int c;
    *run_id_p = NULL;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'I': *run_id_p = optarg; break;
        case 'S':
            if (n_sets == MAX_SETS) {
                fprintf(stderr, "geotrain sites: more than %d --set options\n", MAX_SETS);
                *rc_p = 2;
                return NULL;
            }
            sets[n_sets++] = optarg;
            break;
        case 'h':
            usage(stdout);
            *rc_p = 0;
            return NULL;
        default:
            usage(stderr);
            *rc_p = 2;
            return NULL;
        }
    }
    if (argc - optind != 1 + n_pos) {
        usage(stderr);
        *rc_p = 2;
        return NULL;
    }
    const char *config = argv[optind];
    for (int k = 0; k < n_pos; k++) pos[k] = argv[optind + 1 + k];
    gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;
    lp.sets = sets;
    lp.n_sets = n_sets;
    gt_topo_config_t *cfg = NULL;
    gt_status_t st = gt_topo_load(config, &lp, &cfg);
    if (st != GT_OK) {
        fprintf(stderr, "geotrain sites: %s: %s\n", config, gt_status_str(st));
        *rc_p = 2;
        return NULL;
    }
    if (cfg->membership.n_endpoints == 0) {
        fprintf(stderr,
                "geotrain sites: %s names no membership.endpoints: give the run's etcd with "
                "--set membership.endpoints=URL[,URL...] (and its membership.tls.* files)\n",
                config);
        gt_topo_destroy(cfg);
        *rc_p = 2;
        return NULL;
    }
    if (!*run_id_p) *run_id_p = cfg->run.name;
    return cfg;
}

/* The membership parameters of WAN group g's run id (as diloco/ names them: ID, or ID.rankG
 * with more than one group: a site of several ranks is registered in each). */
static gt_wan_member_params_t member_params(const gt_topo_config_t *cfg, const char *run_id,
                                            uint32_t g, const char **eps, char *group_id,
                                            size_t cap)
{
    for (uint32_t k = 0; k < cfg->membership.n_endpoints; k++)
        eps[k] = cfg->membership.endpoints[k];
    if (gt_topo_wan_groups(cfg) > 1)
        snprintf(group_id, cap, "%s.rank%u", run_id, g);
    else
        snprintf(group_id, cap, "%s", run_id);
    gt_wan_member_params_t mp = GT_WAN_MEMBER_PARAMS_INIT;
    mp.endpoints = eps;
    mp.n_endpoints = cfg->membership.n_endpoints;
    mp.prefix = cfg->membership.prefix;
    mp.run_id = group_id;
    mp.tls_ca = cfg->membership.tls_ca;
    mp.tls_cert = cfg->membership.tls_cert;
    mp.tls_key = cfg->membership.tls_key;
    return mp;
}

static int sites_remove(int argc, char **argv)
{
    const char *run_id, *name;
    int rc = 1;
    gt_topo_config_t *cfg = load(argc, argv, 1, &run_id, &name, &rc);
    if (!cfg) return rc;
    uint32_t index;
    if (gt_topo_site_index(cfg, name, &index) != GT_OK) {
        fprintf(stderr, "geotrain sites: %s has no site named '%s'\n", cfg->source, name);
        gt_topo_destroy(cfg);
        return 2;
    }
    const char *eps[GT_TOPO_MAX_ENDPOINTS];
    char group_id[640];
    int live = 0;
    gt_status_t st = GT_OK;
    for (uint32_t g = 0; g < gt_topo_wan_groups(cfg) && st == GT_OK; g++) {
        gt_wan_member_params_t mp = member_params(cfg, run_id, g, eps, group_id, sizeof group_id);
        int was = 0;
        st = gt_wan_run_retire(&mp, name, &was);
        live |= was;
    }
    if (st != GT_OK) {
        fprintf(stderr, "geotrain sites: cannot retire %s from run '%s' in etcd (%s): %s\n", name,
                run_id, cfg->membership.endpoints[0], gt_status_str(st));
    } else {
        printf("geotrain sites: %s retired from run '%s': %s\n", name, run_id,
               live ? "it was registered; its lease is revoked and it leaves at its next "
                      "heartbeat (exit 4)"
                    : "it is not registered now; started, it is refused");
        rc = 0;
    }
    gt_topo_destroy(cfg);
    return rc;
}

static int sites_list(int argc, char **argv)
{
    const char *run_id;
    int rc = 1;
    gt_topo_config_t *cfg = load(argc, argv, 0, &run_id, NULL, &rc);
    if (!cfg) return rc;
    const char *eps[GT_TOPO_MAX_ENDPOINTS];
    char group_id[640];
    gt_wan_member_params_t mp = member_params(cfg, run_id, 0, eps, group_id, sizeof group_id);
    gt_wan_view_t reg;
    char **retired = NULL;
    size_t n_retired = 0;
    gt_status_t st = gt_wan_run_sites(&mp, &reg, &retired, &n_retired);
    if (st != GT_OK) {
        fprintf(stderr, "geotrain sites: cannot read run '%s' in etcd (%s): %s\n", run_id,
                cfg->membership.endpoints[0], gt_status_str(st));
    } else {
        printf("run '%s': %u of %u configured sites registered\n", run_id, reg.n_members,
               cfg->n_sites);
        for (uint32_t i = 0; i < cfg->n_sites; i++) {
            const char *name = cfg->sites[i].name, *state = "not registered", *addr = "";
            for (uint32_t k = 0; k < reg.n_members; k++)
                if (strcmp(reg.members[k].name, name) == 0) {
                    state = "registered";
                    addr = reg.members[k].address;
                }
            for (size_t k = 0; k < n_retired; k++)
                if (retired[k] && strcmp(retired[k], name) == 0) state = "retired";
            printf("  %-16s %-15s %s\n", name, state, addr);
        }
        rc = 0;
    }
    for (size_t k = 0; k < n_retired; k++) free(retired[k]);
    free(retired);
    gt_topo_destroy(cfg);
    return rc;
}

int gt_cmd_sites(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "remove") == 0) return sites_remove(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "list") == 0) return sites_list(argc - 1, argv + 1);
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    usage(stderr);
    return 2;
}
