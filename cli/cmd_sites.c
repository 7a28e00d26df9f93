/* cmd_sites.c — `geotrain sites remove`: an operator retires a site from a running run for
 * good, through the run's control plane (etcd, with the config's TLS client certificate). The
 * site is marked retired under the run id and, if it is registered, evicted (its member key
 * deleted, its lease revoked): it leaves at its next heartbeat and exits 4, its chunks move to
 * the others at once, nobody waits for it, and started again it is refused. */
#include "cli.h"
#include "gt_topology.h"
#include "gt_wan.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#define MAX_SETS 64

static void usage(FILE *out)
{
    fprintf(out,
            "usage: geotrain sites remove CONFIG NAME [--run-id ID] [--set KEY=VALUE ...]\n\n"
            "Retires site NAME from the run for good, while it runs (docs/diloco.md#retiring-a-"
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
            "Exit status: 0 retired, 1 etcd refused or could not be reached, 2 misuse.\n");
}

static int sites_remove(int argc, char **argv)
{
    static const struct option opts[] = {{"run-id", required_argument, NULL, 'I'},
                                         {"set", required_argument, NULL, 'S'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *run_id = NULL, *sets[MAX_SETS];
    size_t n_sets = 0;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'I': run_id = optarg; break;
        case 'S':
            if (n_sets == MAX_SETS) {
                fprintf(stderr, "geotrain sites: more than %d --set options\n", MAX_SETS);
                return 2;
            }
            sets[n_sets++] = optarg;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (argc - optind != 2) {
        usage(stderr);
        return 2;
    }
    const char *config = argv[optind], *name = argv[optind + 1];
    gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;
    lp.sets = sets;
    lp.n_sets = n_sets;
    gt_topo_config_t *cfg = NULL;
    gt_status_t st = gt_topo_load(config, &lp, &cfg);
    if (st != GT_OK) {
        fprintf(stderr, "geotrain sites: %s: %s\n", config, gt_status_str(st));
        return 2;
    }
    int rc = 1;
    uint32_t index;
    if (gt_topo_site_index(cfg, name, &index) != GT_OK) {
        fprintf(stderr, "geotrain sites: %s has no site named '%s'\n", config, name);
        rc = 2;
    } else if (cfg->membership.n_endpoints == 0) {
        fprintf(stderr,
                "geotrain sites: %s names no membership.endpoints: give the run's etcd with "
                "--set membership.endpoints=URL[,URL...] (and its membership.tls.* files)\n",
                config);
        rc = 2;
    } else {
        const char *eps[GT_TOPO_MAX_ENDPOINTS];
        for (uint32_t k = 0; k < cfg->membership.n_endpoints; k++)
            eps[k] = cfg->membership.endpoints[k];
        const char *base = run_id ? run_id : cfg->run.name;
        uint32_t groups = gt_topo_wan_groups(cfg);
        int live = 0;
        st = GT_OK;
        /* every WAN group's membership: a site of several ranks is registered in each (as
         * diloco/ names them: ID, or ID.rankG with more than one group) */
        for (uint32_t g = 0; g < groups && st == GT_OK; g++) {
            char group_id[640];
            if (groups > 1)
                snprintf(group_id, sizeof group_id, "%s.rank%u", base, g);
            else
                snprintf(group_id, sizeof group_id, "%s", base);
            gt_wan_member_params_t mp = GT_WAN_MEMBER_PARAMS_INIT;
            mp.endpoints = eps;
            mp.n_endpoints = cfg->membership.n_endpoints;
            mp.prefix = cfg->membership.prefix;
            mp.run_id = group_id;
            mp.tls_ca = cfg->membership.tls_ca;
            mp.tls_cert = cfg->membership.tls_cert;
            mp.tls_key = cfg->membership.tls_key;
            int was = 0;
            st = gt_wan_run_retire(&mp, name, &was);
            live |= was;
        }
        if (st != GT_OK) {
            fprintf(stderr, "geotrain sites: cannot retire %s from run '%s' in etcd (%s): %s\n",
                    name, base, cfg->membership.endpoints[0], gt_status_str(st));
        } else {
            printf("geotrain sites: %s retired from run '%s': %s\n", name, base,
                   live ? "it was registered; its lease is revoked and it leaves at its next "
                          "heartbeat (exit 4)"
                        : "it is not registered now; started, it is refused");
            rc = 0;
        }
    }
    gt_topo_destroy(cfg);
    return rc;
}

int gt_cmd_sites(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "remove") == 0) return sites_remove(argc - 1, argv + 1);
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    usage(stderr);
    return 2;
}
