/* cmd_config.c — `geotrain config check FILE [--deploy [--site NAME]]` and `geotrain config
 * reference`. The loader refuses what cannot be loaded; --deploy adds what loads but cannot work
 * across hosts (docs/deploy.md), before anything starts. */
#include "cli.h"
#include "gt_topology.h"
#include "gt_wan.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* One finding of --deploy: an error (cannot work across hosts) or a warning (works, but
 * fragile or exposed). */
static void finding(int *errors, int is_error, const char *src, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void finding(int *errors, int is_error, const char *src, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: deploy %s: ", src, is_error ? "error" : "warning");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    *errors += is_error;
}

/* 1 when host:port's host is this host only (a loopback address or name). */
static int loopback_host(const char *addr)
{
    const char *h = addr[0] == '[' ? addr + 1 : addr;
    return strncmp(h, "127.", 4) == 0 || strncmp(h, "::1]", 4) == 0 ||
           strncmp(h, "localhost:", 10) == 0;
}

/* What loads but cannot work with the sites on separate hosts. `site`: this host's site (its
 * secret key is checked), or NULL. Returns the errors found. */
static int deploy_check(const gt_topo_config_t *cfg, const char *site)
{
    int errors = 0;
    const char *src = cfg->source;
    int secure = cfg->security.mode == GT_SECURITY_ENCRYPTED;
    if (!secure)
        finding(&errors, 1, src,
                "security.mode is none: across hosts every WAN byte would go unauthenticated "
                "and in the clear; allowed: encrypted");
    if (cfg->membership.n_endpoints == 0)
        finding(&errors, 1, src,
                "membership.endpoints is empty: only `geotrain launch` starts an etcd of its "
                "own, on this host; name the etcd members every site reaches");
    else if (cfg->membership.n_endpoints == 1)
        finding(&errors, 0, src,
                "membership.endpoints names one etcd member: the run stops when it does; run "
                "three (one per site where possible)");
    for (uint32_t i = 0; i < cfg->membership.n_endpoints; i++) {
        const char *u = cfg->membership.endpoints[i];
        if (strncmp(u, "http://", 7) == 0) {
            finding(&errors, 0, src,
                    "membership.endpoints: %s is plain HTTP: whoever reaches it can read and "
                    "change the run's membership; use https:// with membership.tls "
                    "(docs/deploy.md#3-etcd)",
                    u);
            break;
        }
        if (!cfg->membership.tls_cert[0]) {
            finding(&errors, 0, src,
                    "membership.endpoints: %s without a client certificate (membership.tls.cert): "
                    "members that let this site in without one let anyone in",
                    u);
            break;
        }
    }
    for (uint32_t i = 0; i < cfg->n_sites; i++) {
        const gt_topo_site_t *s = &cfg->sites[i];
        const char *dial = gt_topo_site_advertised(s);
        if (secure && !s->has_public_key)
            finding(&errors, 1, src,
                    "sites[%u] (%s): no public_key: with security.mode encrypted no peer "
                    "would authenticate it; make one with `geotrain keygen --site %s` and pin it",
                    i, s->name, s->name);
        if (loopback_host(dial))
            finding(&errors, 1, src,
                    "sites[%u] (%s): peers would dial %s, this host's loopback; set address "
                    "(or advertise) to an address the other sites reach",
                    i, s->name, dial);
        const char *port = strrchr(s->address, ':');
        if (port && strcmp(port, ":0") == 0)
            finding(&errors, 0, src,
                    "sites[%u] (%s): address port 0 is a new free port at each start: no "
                    "firewall rule can be written for it",
                    i, s->name);
        if (s->advertise[0] && strcmp(s->advertise, s->address) != 0) {
            if (cfg->wan.transport == GT_TRANSPORT_UCX && !cfg->wan.ucx_relay)
                finding(&errors, 1, src,
                        "sites[%u] (%s): advertised behind a NAT, but wan.ucx_relay is false: "
                        "UCX would dial the host's own addresses; allowed: the relay on",
                        i, s->name);
            if (cfg->wan.transport == GT_TRANSPORT_LIBFABRIC && !cfg->wan.data_port_min)
                finding(&errors, 0, src,
                        "sites[%u] (%s): advertised as %s with libfabric: its passive endpoints "
                        "take ephemeral ports, so the NAT must forward every port (1:1 NAT), or "
                        "set wan.data_port_min/max and forward that range",
                        i, s->name, s->advertise);
        }
    }
    /* Slots for sites added later (docs/diloco.md#adding-a-site): what they cost until taken,
     * and where the key that admits them is. */
    uint32_t slots = gt_topo_site_slots(cfg);
    if (slots > cfg->n_sites)
        finding(&errors, 0, src,
                "outer.site_slots = %u for %u sites: %u slot(s) wait for a site added mid-run; "
                "until one is taken its chunks are aggregated by the next site (%s owns %u of "
                "every %u chunks meanwhile), and `geotrain sites add` needs the admin key whose "
                "public half security.admin_key names (keep it on the operator's machine)",
                slots, cfg->n_sites, slots - cfg->n_sites, cfg->sites[0].name,
                1 + slots - cfg->n_sites, slots);
    if (site) {
        uint32_t i;
        if (gt_topo_site_index(cfg, site, &i) != GT_OK) {
            finding(&errors, 1, src, "--site %s: no such site in the file", site);
            return errors;
        }
        const gt_topo_site_t *s = &cfg->sites[i];
        struct stat stt;
        gt_wan_keypair_t kp;
        if (!secure) return errors;
        if (stat(s->secret_key, &stt) != 0) {
            finding(&errors, 1, src, "site %s: its secret key %s does not exist", site,
                    s->secret_key);
        } else if (stt.st_mode & 077) {
            finding(&errors, 1, src,
                    "site %s: its secret key %s is readable by others (mode %03o); allowed: "
                    "0600",
                    site, s->secret_key, (unsigned)(stt.st_mode & 0777));
        } else if (gt_wan_keypair_load(s->secret_key, &kp) != GT_OK) {
            finding(&errors, 1, src, "site %s: cannot read its secret key %s", site, s->secret_key);
        } else {
            if (s->has_public_key && memcmp(kp.public_key, s->public_key, GT_WAN_KEY_BYTES) != 0)
                finding(&errors, 1, src,
                        "site %s: its secret key %s is not the key pair of the public_key the "
                        "file pins for it",
                        site, s->secret_key);
            gt_wan_keypair_wipe(&kp);
        }
    }
    return errors;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: geotrain config check FILE [--set KEY=VALUE ...] [--quiet] [--deploy [--site "
            "NAME]]\n"
            "       geotrain config reference\n\n"
            "check      validate FILE (a sites.yaml), apply GT_* environment variables and\n"
            "           --set overrides (in that order of precedence), and print the resolved\n"
            "           configuration with where each value came from. Exits 0 when valid;\n"
            "           otherwise prints every error as FILE:LINE:COLUMN: key '...': ... and\n"
            "           exits 1.\n"
            "           --deploy also reports what cannot work with the sites on separate\n"
            "           hosts (docs/deploy.md): no security, no etcd endpoints, unpinned keys,\n"
            "           loopback addresses, a NAT the transport cannot cross; and warns of a\n"
            "           single etcd member, plain-HTTP etcd, port 0, slots waiting for an\n"
            "           added site (outer.site_slots). With --site NAME, also\n"
            "           that site's secret key (present, mode 0600, the pinned key's pair).\n"
            "           Exits 1 on an error.\n"
            "reference  print every config key with its type, default, allowed values, GT_*\n"
            "           environment variable and meaning, as Markdown (docs/config.md).\n\n"
            "Options:\n"
            "  --set KEY=VALUE  override one key (repeatable), e.g. --set outer.lr=0.5,\n"
            "                   --set sites.eu.ranks=2\n"
            "  --no-env         ignore GT_* environment variables\n"
            "  --deploy         check for a deployment across hosts (see check)\n"
            "  --site NAME      with --deploy: the site this host runs\n"
            "  -q, --quiet      print nothing when the file is valid\n"
            "  -h, --help       this text\n");
}

int gt_cmd_config(int argc, char **argv)
{
    static const struct option opts[] = {{"set", required_argument, NULL, 's'},
                                         {"no-env", no_argument, NULL, 'E'},
                                         {"quiet", no_argument, NULL, 'q'},
                                         {"deploy", no_argument, NULL, 'D'},
                                         {"site", required_argument, NULL, 'S'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *sets[256];
    size_t n_sets = 0;
    int quiet = 0, use_env = 1, deploy = 0, c;
    const char *site = NULL;
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0) {
        usage(stdout);
        return 0;
    }
    optind = 1;
    while ((c = getopt_long(argc - 1, argv + 1, "qh", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            if (n_sets == sizeof sets / sizeof sets[0]) {
                fprintf(stderr, "geotrain config: too many --set options\n");
                return 2;
            }
            sets[n_sets++] = optarg;
            break;
        case 'E': use_env = 0; break;
        case 'D': deploy = 1; break;
        case 'S': site = optarg; break;
        case 'q': quiet = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    int nargs = argc - 1 - optind;
    char **args = argv + 1 + optind;
    if (strcmp(sub, "reference") == 0 && nargs == 0) {
        gt_topo_print_reference(stdout);
        return 0;
    }
    if (strcmp(sub, "check") != 0 || nargs != 1) {
        fprintf(stderr, "geotrain config: expected `check FILE` or `reference`\n");
        usage(stderr);
        return 2;
    }
    gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;
    lp.sets = sets;
    lp.n_sets = n_sets;
    lp.use_env = use_env;
    gt_topo_config_t *cfg = NULL;
    gt_status_t st = gt_topo_load(args[0], &lp, &cfg);
    if (st != GT_OK) {
        fprintf(stderr, "geotrain config: %s is not valid (%s)\n", args[0], gt_status_str(st));
        return 1;
    }
    if (!quiet) gt_topo_print(cfg, stdout);
    if (cfg->security.mode == GT_SECURITY_NONE && !deploy)
        fprintf(stderr, "warning: security.mode is none: WAN traffic will be neither "
                        "authenticated nor encrypted\n");
    int errors = deploy ? deploy_check(cfg, site) : 0;
    if (deploy) fprintf(stderr, "geotrain config: %s: %d deploy error(s)\n", args[0], errors);
    gt_topo_destroy(cfg);
    return errors ? 1 : 0;
}
