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
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SETS 64

static void usage(FILE *out)
{
    fprintf(out,
            "usage: geotrain sites add CONFIG NAME [--run-id ID] [--admin-key FILE] [--wait S]\n"
            "                          [--set KEY=VALUE ...]\n"
            "       geotrain sites remove CONFIG NAME [--run-id ID] [--set KEY=VALUE ...]\n"
            "       geotrain sites list CONFIG [--run-id ID] [--set KEY=VALUE ...]\n\n"
            "list: every configured site of the run and whether it is registered now (with the\n"
            "address it published), not registered, or retired; and the sites added to it.\n\n"
            "add: adds site NAME, which was never in the run's sites.yaml, to the run while it\n"
            "runs (docs/diloco.md#adding-a-site). CONFIG is the run's sites.yaml with NAME\n"
            "appended to its sites (its address, ranks, public_key); the run must have been\n"
            "started with outer.site_slots above its sites, and NAME's place in CONFIG is the\n"
            "slot it takes. Checks that CONFIG agrees with the running sites' configuration\n"
            "(every shared key, the sites before NAME), that the slot is free, that NAME has a\n"
            "public key when the run is encrypted and ranks that keep the run's WAN groups;\n"
            "then writes NAME's name, slot, ranks and public key into the run's etcd (over\n"
            "membership.tls), signed with the operator's admin key (security.admin_key names\n"
            "its public half: a site admits no added site without that signature, whoever can\n"
            "write to etcd), and waits until every registered site has pinned it. Then\n"
            "start it: geotrain run --config CONFIG --site NAME --run-id ID. It joins like\n"
            "any site that comes late and aggregates its slot's chunks from its first round.\n"
            "Sites started later (a restart) read the added sites from etcd, with CONFIG or\n"
            "the old file.\n\n"
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
            "  --admin-key FILE add: the operator's signing key (`geotrain keygen --admin`;\n"
            "                   default security.key_dir/admin.key)\n"
            "  --wait S         add: how long to wait for the running sites to pin the new\n"
            "                   site's key (default 30 s; 0: do not wait)\n"
            "  --set KEY=VALUE  override a key of CONFIG (repeatable), e.g. the endpoints and\n"
            "                   certificates of the run's etcd\n"
            "  -h, --help       this text\n"
            "Exit status: 0 done, 1 etcd refused or could not be reached (add: or the run\n"
            "refused the site, or a registered site did not pin it in time), 2 misuse.\n");
}

static double g_wait_s = 30;           /* add: --wait */
static const char *g_admin_key = NULL; /* add: --admin-key */

/* The options and CONFIG of `sites remove|list`: the loaded config (NULL: the exit status is
 * in *rc_p), the run id, and the positional arguments after CONFIG. */
static gt_topo_config_t *load(int argc, char **argv, int n_pos, const char **run_id_p,
                              const char **pos, int *rc_p)
{
    static const struct option opts[] = {
        {"run-id", required_argument, NULL, 'I'}, {"set", required_argument, NULL, 'S'},
        {"wait", required_argument, NULL, 'W'},   {"admin-key", required_argument, NULL, 'K'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
    const char *sets[MAX_SETS];
    size_t n_sets = 0;
    int c;
    *run_id_p = NULL;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'I': *run_id_p = optarg; break;
        case 'K': g_admin_key = optarg; break;
        case 'W': {
            char *end = NULL;
            g_wait_s = strtod(optarg, &end);
            if (!end || *end || !(g_wait_s >= 0) || g_wait_s > 86400) {
                fprintf(stderr, "geotrain sites: --wait %s: allowed: seconds, 0 to 86400\n",
                        optarg);
                *rc_p = 2;
                return NULL;
            }
            break;
        }
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

/* The run's added sites (gt_wan_run_added) as a JSON array of their descriptions (the objects
 * `sites add` signed; the signature is the sites' to check); NULL on failure. */
static json_t *read_added(const gt_wan_member_params_t *mp, const gt_topo_config_t *cfg,
                          const char *run_id, gt_status_t *st_p)
{
    uint8_t admin[GT_WAN_KEY_BYTES];
    int check = cfg->security.admin_key[0] &&
                gt_wan_key_from_base64(cfg->security.admin_key, admin) == GT_OK;
    char *text = NULL;
    *st_p = gt_wan_run_added(mp, &text);
    if (*st_p != GT_OK) return NULL;
    json_t *arr = json_loads(text, 0, NULL), *out = json_array();
    free(text);
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e)
    {
        json_t *v = json_is_string(e) ? json_loads(json_string_value(e), 0, NULL) : NULL;
        const char *desc = json_string_value(json_object_get(v, "desc"));
        const char *sig = json_string_value(json_object_get(v, "sig"));
        json_t *o = desc ? json_loads(desc, 0, NULL) : NULL;
        if (o && check && gt_wan_add_verify(admin, run_id, desc, sig ? sig : "") != GT_OK) {
            fprintf(stderr,
                    "geotrain sites: ignoring a description in the run's etcd that "
                    "security.admin_key did not sign (the sites refuse it too): %.160s\n",
                    desc);
            json_decref(o);
            o = NULL;
        }
        json_decref(v);
        if (json_is_object(o))
            json_array_append_new(out, o);
        else
            json_decref(o);
    }
    json_decref(arr);
    return out;
}

static int sites_remove(int argc, char **argv)
{
    const char *run_id, *name;
    int rc = 1;
    gt_topo_config_t *cfg = load(argc, argv, 1, &run_id, &name, &rc);
    if (!cfg) return rc;
    uint32_t index;
    const char *eps[GT_TOPO_MAX_ENDPOINTS];
    char group_id[640];
    int live = 0;
    gt_status_t st = GT_OK;
    if (gt_topo_site_index(cfg, name, &index) != GT_OK) {
        /* a site added mid-run need not be in the operator's file */
        gt_wan_member_params_t mp = member_params(cfg, run_id, 0, eps, group_id, sizeof group_id);
        json_t *added = read_added(&mp, cfg, run_id, &st);
        int found = 0;
        size_t i;
        json_t *e;
        json_array_foreach(added, i, e)
        {
            const char *n = json_string_value(json_object_get(e, "name"));
            found |= n && strcmp(n, name) == 0;
        }
        json_decref(added);
        if (!found) {
            fprintf(stderr, "geotrain sites: %s has no site named '%s', and run '%s' added none\n",
                    cfg->source, name, run_id);
            gt_topo_destroy(cfg);
            return 2;
        }
    }
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

/* A registered site's shared configuration text (its member value's "config"), and its
 * name; NULL when none is registered or none published one. */
static char *running_config(const gt_wan_member_params_t *mp, const char *skip, char *who,
                            size_t cap, gt_status_t *st_p)
{
    char *text = NULL, *out = NULL;
    *st_p = gt_wan_run_values(mp, &text);
    if (*st_p != GT_OK) return NULL;
    json_t *arr = json_loads(text, 0, NULL);
    free(text);
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v)
    {
        const char *name = json_string_value(json_object_get(v, "name"));
        const char *cfg = json_string_value(json_object_get(v, "config"));
        if (!name || !cfg || (skip && strcmp(name, skip) == 0)) continue;
        out = strdup(cfg);
        snprintf(who, cap, "%s", name);
        break;
    }
    json_decref(arr);
    return out;
}

static void print_diff(void *ctx, const char *key, const char *ours, const char *theirs)
{
    fprintf(stderr, "  %s: %s here, %s at %s\n", key, ours ? ours : "(missing)",
            theirs ? theirs : "(missing)", (const char *)ctx);
}

/* Whether every site added to the run (and NAME) keeps the WAN groups and rank layout of the
 * sites of the run's first file: the least common multiple of the ranks, and equal ranks when
 * those all have the same. */
static int ranks_fit(const gt_topo_config_t *cfg, uint32_t index, char *why, size_t cap)
{
    uint64_t lcm_first = 1, lcm_all = 1;
    uint32_t first_r = 0, same = 1;
    for (uint32_t i = 0; i < cfg->n_sites; i++) {
        uint64_t r = cfg->sites[i].ranks ? cfg->sites[i].ranks : 1;
        for (int k = 0; k < 2; k++) {
            uint64_t *l = k ? &lcm_all : &lcm_first;
            if (k == 0 && (cfg->sites[i].added || i == index)) continue;
            uint64_t a = *l, b = r;
            while (b) {
                uint64_t t = a % b;
                a = b;
                b = t;
            }
            *l = *l / a * r;
        }
        if (cfg->sites[i].added || i == index) continue;
        if (!first_r) first_r = (uint32_t)r;
        same &= first_r == r;
    }
    if (lcm_all != lcm_first) {
        snprintf(why, cap,
                 "its %u ranks change the run's WAN groups (the least common multiple of the "
                 "sites' ranks, %llu) to %llu; give it ranks that divide %llu",
                 cfg->sites[index].ranks, (unsigned long long)lcm_first,
                 (unsigned long long)lcm_all, (unsigned long long)lcm_first);
        return 0;
    }
    if (same && first_r && cfg->sites[index].ranks != first_r) {
        snprintf(why, cap,
                 "the run's sites all have %u ranks and it has %u: the sites size their "
                 "messages for equal ranks; give it %u",
                 first_r, cfg->sites[index].ranks, first_r);
        return 0;
    }
    return 1;
}

static int sites_add(int argc, char **argv)
{
    const char *run_id, *name;
    int rc = 1;
    gt_topo_config_t *cfg = load(argc, argv, 1, &run_id, &name, &rc);
    if (!cfg) return rc;
    uint32_t index;
    const char *eps[GT_TOPO_MAX_ENDPOINTS];
    char group_id[640], who[GT_TOPO_NAME_MAX] = "", why[256];
    gt_status_t st = GT_OK;
    json_t *added = NULL;
    char *theirs = NULL, *ours = NULL, *value = NULL;
    if (gt_topo_site_index(cfg, name, &index) != GT_OK) {
        fprintf(stderr,
                "geotrain sites: %s has no site named '%s': add it to the file's sites (its "
                "name, address, ranks and public_key) after the run's own\n",
                cfg->source, name);
        rc = 2;
        goto out;
    }
    if (!cfg->outer.site_slots) {
        fprintf(stderr,
                "geotrain sites: %s sets no outer.site_slots: a run can take added sites only "
                "when it was started with slots for them (outer.site_slots above its sites)\n",
                cfg->source);
        rc = 2;
        goto out;
    }
    if (cfg->security.mode == GT_SECURITY_ENCRYPTED && !cfg->security.admin_key[0]) {
        fprintf(stderr,
                "geotrain sites: %s has no security.admin_key: the running sites admit an added "
                "site only with the signature of the key it names (`geotrain keygen --admin`)\n",
                cfg->source);
        rc = 2;
        goto out;
    }
    if (cfg->security.mode == GT_SECURITY_ENCRYPTED && !cfg->sites[index].has_public_key) {
        fprintf(stderr,
                "geotrain sites: site %s has no public_key in %s and the run is encrypted: make "
                "its key pair with `geotrain keygen` on its host and put the public key here\n",
                name, cfg->source);
        rc = 2;
        goto out;
    }
    gt_wan_member_params_t mp = member_params(cfg, run_id, 0, eps, group_id, sizeof group_id);
    /* What the run says: the sites added so far, a registered site's configuration. */
    if (!(added = read_added(&mp, cfg, run_id, &st))) goto etcd;
    size_t i;
    json_t *e;
    json_array_foreach(added, i, e)
    {
        const char *n = json_string_value(json_object_get(e, "name"));
        json_int_t slot = json_integer_value(json_object_get(e, "slot"));
        uint32_t at;
        if (n && strcmp(n, name) == 0) {
            fprintf(stderr, "geotrain sites: %s was added to run '%s' already (slot %lld)\n", name,
                    run_id, (long long)slot);
            goto out;
        }
        if (n && gt_topo_site_index(cfg, n, &at) == GT_OK) cfg->sites[at].added = 1;
        if (slot == (json_int_t)index) {
            fprintf(stderr,
                    "geotrain sites: slot %u (%s's place in %s) was taken by site %s: put %s "
                    "after it in the file\n",
                    index, name, cfg->source, n ? n : "?", name);
            goto out;
        }
    }
    cfg->sites[index].added = 1;
    if (!(theirs = running_config(&mp, name, who, sizeof who, &st))) {
        if (st != GT_OK) goto etcd;
        fprintf(stderr,
                "geotrain sites: no site of run '%s' is registered (or none published its "
                "configuration): a site is added to a running run\n",
                run_id);
        goto out;
    }
    if ((st = gt_topo_shared_text(cfg, &ours)) != GT_OK) goto etcd;
    if (gt_topo_shared_diff(ours, theirs, NULL, NULL)) {
        fprintf(stderr,
                "geotrain sites: %s does not agree with run '%s' (site %s's configuration); "
                "the keys that differ:\n",
                cfg->source, run_id, who);
        gt_topo_shared_diff(ours, theirs, print_diff, who);
        goto out;
    }
    /* Its slot comes after the run's own sites and before outer.site_slots. */
    uint32_t first = 0;
    for (uint32_t k = 0; k < cfg->n_sites; k++) first += !cfg->sites[k].added;
    if (index < first || index >= gt_topo_site_slots(cfg)) {
        fprintf(stderr,
                "geotrain sites: %s is site %u of %s; the run has %u sites of its own and %u "
                "slots (outer.site_slots): an added site comes after the run's sites, within "
                "the slots\n",
                name, index, cfg->source, first, gt_topo_site_slots(cfg));
        goto out;
    }
    if (!ranks_fit(cfg, index, why, sizeof why)) {
        fprintf(stderr, "geotrain sites: %s cannot be added: %s\n", name, why);
        goto out;
    }
    char b64[GT_WAN_KEY_B64_LEN + 1] = "";
    if (cfg->sites[index].has_public_key) gt_wan_key_to_base64(cfg->sites[index].public_key, b64);
    json_t *desc = json_pack("{s:s,s:s,s:i,s:i,s:s,s:f}", "run", run_id, "name", name, "slot",
                             (int)index, "ranks", (int)cfg->sites[index].ranks, "public_key", b64,
                             "added_unix", (double)time(NULL));
    char *desc_text = desc ? json_dumps(desc, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(desc);
    char sig[GT_WAN_SIG_B64_LEN + 1] = "", key_path[GT_TOPO_PATH_MAX + 16];
    if (desc_text && cfg->security.admin_key[0]) {
        /* signed, and checked against the key the sites hold before anything is written */
        uint8_t admin[GT_WAN_KEY_BYTES];
        snprintf(key_path, sizeof key_path, "%s/admin.key", cfg->security.key_dir);
        const char *kp = g_admin_key ? g_admin_key : key_path;
        if (gt_wan_add_sign(kp, run_id, desc_text, sig) != GT_OK ||
            gt_wan_key_from_base64(cfg->security.admin_key, admin) != GT_OK ||
            gt_wan_add_verify(admin, run_id, desc_text, sig) != GT_OK) {
            fprintf(stderr,
                    "geotrain sites: cannot sign %s's description with %s as the key "
                    "security.admin_key names (%s): give that key's file with --admin-key\n",
                    name, kp, cfg->security.admin_key);
            free(desc_text);
            goto out;
        }
    }
    json_t *signed_value = desc_text ? json_pack("{s:s,s:s}", "desc", desc_text, "sig", sig) : NULL;
    free(desc_text);
    value = signed_value ? json_dumps(signed_value, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(signed_value);
    if (!value) {
        st = GT_ERR_NOMEM;
        goto etcd;
    }
    for (uint32_t g = 0; g < gt_topo_wan_groups(cfg) && st == GT_OK; g++) {
        gt_wan_member_params_t gp = member_params(cfg, run_id, g, eps, group_id, sizeof group_id);
        st = gt_wan_run_add(&gp, name, index, value);
    }
    if (st == GT_ERR_EXISTS) {
        fprintf(stderr,
                "geotrain sites: another add took name %s or slot %u of run '%s' meanwhile\n", name,
                index, run_id);
        goto out;
    }
    if (st != GT_OK) goto etcd;
    printf("geotrain sites: %s added to run '%s' at slot %u (%u rank%s%s)\n", name, run_id, index,
           cfg->sites[index].ranks, cfg->sites[index].ranks == 1 ? "" : "s",
           b64[0] ? ", its key pinned through etcd" : "");
    fflush(stdout);
    /* Until every registered site has pinned it: then its first handshakes succeed. */
    mp = member_params(cfg, run_id, 0, eps, group_id, sizeof group_id);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char missing[1024] = "";
    for (;;) {
        gt_wan_view_t reg;
        char **retired = NULL, *pinned = NULL;
        size_t n_retired = 0;
        st = gt_wan_run_sites(&mp, &reg, &retired, &n_retired);
        for (size_t k = 0; k < n_retired; k++) free(retired[k]);
        free(retired);
        if (st == GT_OK) st = gt_wan_run_pinned(&mp, name, &pinned);
        if (st != GT_OK) goto etcd;
        json_t *got = json_loads(pinned, 0, NULL);
        free(pinned);
        missing[0] = '\0';
        for (uint32_t k = 0; k < reg.n_members; k++) {
            if (strcmp(reg.members[k].name, name) == 0) continue;
            int has = 0;
            json_t *p;
            json_array_foreach(got, i, p) has |=
                strcmp(json_string_value(p) ? json_string_value(p) : "", reg.members[k].name) == 0;
            if (!has)
                snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%s",
                         missing[0] ? ", " : "", reg.members[k].name);
        }
        json_decref(got);
        struct timespec t1;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double waited = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        if (!missing[0] || waited >= g_wait_s) break;
        struct timespec ts = {0, 200000000};
        nanosleep(&ts, NULL);
    }
    if (missing[0] && g_wait_s > 0) {
        fprintf(stderr,
                "geotrain sites: after %.0f s, %s had not pinned %s's key (each running site reads "
                "the added sites once a membership heartbeat); %s may be refused by them until "
                "they do\n",
                g_wait_s, missing, name, name);
        goto out;
    }
    printf("geotrain sites: %s; start it with: geotrain run --config %s --site %s --run-id %s\n",
           g_wait_s > 0 ? "every registered site has pinned it" : "not waited for the sites",
           cfg->source, name, run_id);
    rc = 0;
    goto out;
etcd:
    fprintf(stderr, "geotrain sites: cannot add %s to run '%s' in etcd (%s): %s\n", name, run_id,
            cfg->membership.endpoints[0], gt_status_str(st));
out:
    json_decref(added);
    free(theirs);
    free(ours);
    free(value);
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
        /* The sites added to the run (`sites add`) are listed after the run's own, whether
         * CONFIG names them or not. */
        json_t *added = read_added(&mp, cfg, run_id, &st);
        size_t i;
        json_t *e;
        json_array_foreach(added, i, e)
        {
            uint32_t at;
            const char *name = json_string_value(json_object_get(e, "name"));
            if (name && gt_topo_site_index(cfg, name, &at) == GT_OK) cfg->sites[at].added = 1;
        }
        uint32_t n_reg = 0, n_own = 0, at;
        for (uint32_t k = 0; k < cfg->n_sites; k++) n_own += !cfg->sites[k].added;
        for (uint32_t k = 0; k < reg.n_members; k++)
            n_reg +=
                gt_topo_site_index(cfg, reg.members[k].name, &at) == GT_OK && !cfg->sites[at].added;
        printf("run '%s': %u of %u configured sites registered\n", run_id, n_reg, n_own);
        for (uint32_t j = 0; j < cfg->n_sites; j++) {
            if (cfg->sites[j].added) continue;
            const char *name = cfg->sites[j].name, *state = "not registered", *addr = "";
            for (uint32_t k = 0; k < reg.n_members; k++)
                if (strcmp(reg.members[k].name, name) == 0) {
                    state = "registered";
                    addr = reg.members[k].address;
                }
            for (size_t k = 0; k < n_retired; k++)
                if (retired[k] && strcmp(retired[k], name) == 0) state = "retired";
            printf("  %-16s %-15s %s\n", name, state, addr);
        }
        json_array_foreach(added, i, e)
        {
            const char *name = json_string_value(json_object_get(e, "name")), *addr = "";
            if (!name) continue;
            const char *state = "not registered";
            for (uint32_t k = 0; k < reg.n_members; k++)
                if (strcmp(reg.members[k].name, name) == 0) {
                    state = "registered";
                    addr = reg.members[k].address;
                }
            for (size_t k = 0; k < n_retired; k++)
                if (retired[k] && strcmp(retired[k], name) == 0) state = "retired";
            printf("  %-16s %-15s %s (added mid-run, slot %lld)\n", name, state, addr,
                   (long long)json_integer_value(json_object_get(e, "slot")));
        }
        json_decref(added);
        if (st != GT_OK)
            fprintf(stderr, "geotrain sites: cannot read the sites added to run '%s': %s\n", run_id,
                    gt_status_str(st));
        rc = st == GT_OK ? 0 : 1;
    }
    for (size_t k = 0; k < n_retired; k++) free(retired[k]);
    free(retired);
    gt_topo_destroy(cfg);
    return rc;
}

int gt_cmd_sites(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "add") == 0) return sites_add(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "remove") == 0) return sites_remove(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "list") == 0) return sites_list(argc - 1, argv + 1);
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    usage(stderr);
    return 2;
}
