/* agree.c — the settings every site of a run must hold alike, as canonical text.
 *
 * On separate hosts each site loads its own copy of sites.yaml, with its own --set flags and
 * GT_* variables, so two sites may resolve one key differently. Most such differences do not
 * fail loudly: another H or another outer learning rate trains on with anchors that agree, a
 * codec or lane count that differs makes frames that never decode and rounds that time out.
 * So each site publishes the values of every key that must be equal (one "key=value" line
 * each, in schema order, formatted as the printer formats them) and compares them with every
 * other site's before it takes part (diloco/agree.c): a difference is named key by key.
 *
 * The keys that may differ are the per-site ones: where a site listens, its own paths, its
 * local compute and tolerances, and the planner's inputs (gt_topo_key_per_site). The schema's
 * reference marks them.
 */
#include "topology_internal.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Top-level keys that are a site's own (the "plan." section is the planner's, whole). */
static const char *const per_site_keys[] = {
    "run.name",               /* the label of a site's run directory (the run id is shared) */
    "run.run_dir",            /* where its files go */
    "run.log_every",          /* its metrics lines */
    "run.dump",               /* its debugging dumps */
    "data.path",              /* its own copy of (or share of) the data */
    "inner.emulated_step_ms", /* emulation: how fast its accelerator is */
    "wan.connect_timeout_ms", /* its own patience */
    "wan.peer_timeout_ms",    /* " */
    "wan.preauth_timeout_ms", /* its listener's gate */
    "wan.preauth_max",        /* " */
    "wan.preauth_max_per_source",
    "wan.max_link_failures",
    "wan.data_port_min", /* its firewall's port range */
    "wan.data_port_max",
    "membership.endpoints",     /* the etcd members it reaches (the nearest, through its NAT) */
    "membership.stuck_after_s", /* its own watch */
    "membership.prefix",        /* sites that differ here never meet: nothing to compare */
    "membership.tls.ca",        /* its own TLS files toward etcd */
    "membership.tls.cert",
    "membership.tls.key",
    "membership.plain_http", /* how it reaches its etcd */
    "security.cipher",       /* negotiated per connection */
    "security.key_dir",      /* its own secret key's folder */
    "local.threads",         /* inside the site */
    "local.grad_reduce",
    "local.overlap_grad_reduce",
    "metrics.listen", /* where its own /metrics is served */
    NULL,
};

/* Per-site keys (sites[].*) that are the site's own: the others hold its name, ranks and
 * public key alike. */
static const char *const per_site_site_keys[] = {
    "address",      /* where it listens (the others may see it through a NAT) */
    "advertise",    /* where its peers dial it: they agree on who it is, not on its route */
    "metrics",      /* where its /metrics is served */
    "backend",      /* its compute */
    "secret_key",   /* its own path */
    "tokens_per_s", /* planner inputs */
    "accelerators", NULL,
};

int gt_topo_key_per_site(const gt_key_t *rows, const gt_key_t *k)
{
    const char *const *list = rows == gt_topo_keys        ? per_site_keys
                              : rows == gt_topo_site_keys ? per_site_site_keys
                                                          : NULL;
    if (!list) return 0; /* links: the emulated WAN is one for the run */
    if (rows == gt_topo_keys && strncmp(k->path, "plan.", 5) == 0) return 1;
    for (; *list; list++)
        if (strcmp(*list, k->path) == 0) return 1;
    return 0;
}

/* One line per link: its key is the pair, so a link set at one site only is one difference. */
static void put_link(FILE *f, const char *a, const char *b, const gt_topo_link_params_t *p)
{
    const char *names[] = {"latency_ms", "jitter_ms", "bandwidth_mbps", "loss"};
    const double vals[] = {p->latency_ms, p->jitter_ms, p->bandwidth_mbps, p->loss};
    char num[64], num2[64];
    fprintf(f, "links[%s,%s]=", a, b);
    for (int i = 0; i < 4; i++) {
        gt_topo_format_double(vals[i], num, sizeof num);
        fprintf(f, "%s: %s, ", names[i], num);
    }
    fprintf(f, "cuts: ");
    for (uint32_t i = 0; i < p->n_cuts; i++) {
        gt_topo_format_double(p->cuts[i].start_s, num, sizeof num);
        gt_topo_format_double(p->cuts[i].duration_s, num2, sizeof num2);
        fprintf(f, "%s%s+%s", i ? "," : "", num, num2);
    }
    fprintf(f, "%s\n", p->n_cuts ? "" : "none");
}

static int same_link(const gt_topo_link_params_t *x, const gt_topo_link_params_t *y)
{
    if (x->latency_ms != y->latency_ms || x->jitter_ms != y->jitter_ms ||
        x->bandwidth_mbps != y->bandwidth_mbps || x->loss != y->loss || x->n_cuts != y->n_cuts)
        return 0;
    for (uint32_t i = 0; i < x->n_cuts; i++)
        if (x->cuts[i].start_s != y->cuts[i].start_s ||
            x->cuts[i].duration_s != y->cuts[i].duration_s)
            return 0;
    return 1;
}

/* Whether site i was in the run's first sites.yaml: not a vacant slot, not added mid-run. */
static int first_file_site(const gt_topo_config_t *cfg, uint32_t i)
{
    return !gt_topo_site_vacant(&cfg->sites[i]) && !cfg->sites[i].added;
}

gt_status_t gt_topo_shared_text(const gt_topo_config_t *cfg, char **text_p)
{
    if (!cfg || !text_p) return GT_ERR_INVALID;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return GT_ERR_NOMEM;
    char val[GT_TOPO_PATH_MAX + 8];
    for (const gt_key_t *k = gt_topo_keys; k->path; k++) {
        if (k->type == GT_KEY_SECTION || gt_topo_key_per_site(gt_topo_keys, k)) continue;
        if (k->type == GT_KEY_SITES) {
            /* The list in order: a site's index is its id on the wire. */
            /* Sites added mid-run are not in it: the running sites' texts, published before
             * the add, must still match the added site's (`geotrain sites add` checks its own). */
            fprintf(f, "sites=");
            for (uint32_t i = 0, n = 0; i < cfg->n_sites; i++)
                if (first_file_site(cfg, i)) fprintf(f, "%s%s", n++ ? "," : "", cfg->sites[i].name);
            fprintf(f, "\n");
            for (uint32_t i = 0; i < cfg->n_sites; i++) {
                const gt_topo_site_t *s = &cfg->sites[i];
                if (!first_file_site(cfg, i)) continue;
                for (const gt_key_t *r = gt_topo_site_keys; r->path; r++) {
                    if (strcmp(r->path, "name") == 0 || gt_topo_key_per_site(gt_topo_site_keys, r))
                        continue;
                    if (r->type == GT_KEY_B64KEY) {
                        char b64[64] = "";
                        if (s->has_public_key)
                            sodium_bin2base64(b64, sizeof b64, s->public_key, 32,
                                              sodium_base64_VARIANT_ORIGINAL);
                        snprintf(val, sizeof val, "\"%s\"", b64);
                    } else {
                        gt_topo_key_format(r, s, val, sizeof val);
                    }
                    fprintf(f, "sites.%s.%s=%s\n", s->name, r->path, val);
                }
            }
            continue;
        }
        if (k->type == GT_KEY_LINKS) {
            /* Resolved, for the pairs whose link is not wan.emulation's: the same WAN however
             * a file spells it. */
            for (uint32_t a = 0; a < cfg->n_sites; a++)
                for (uint32_t b = a + 1; b < cfg->n_sites; b++) {
                    if (!first_file_site(cfg, a) || !first_file_site(cfg, b)) continue;
                    gt_topo_link_params_t lp;
                    gt_topo_link_params(cfg, a, b, &lp);
                    if (!same_link(&lp, &cfg->wan.emulation.link))
                        put_link(f, cfg->sites[a].name, cfg->sites[b].name, &lp);
                }
            continue;
        }
        gt_topo_key_format(k, cfg, val, sizeof val);
        fprintf(f, "%s=%s\n", k->path, val);
    }
    if (fclose(f) != 0 || !text) {
        free(text);
        return GT_ERR_NOMEM;
    }
    *text_p = text;
    return GT_OK;
}

/* Line `key` of a canonical text: its value (up to the line's end) into *val_p and *len_p,
 * or 0 when the text has no such key. */
static int find_key(const char *text, const char *key, size_t klen, const char **val_p,
                    size_t *len_p)
{
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        if (n > klen && line[klen] == '=' && memcmp(line, key, klen) == 0) {
            *val_p = line + klen + 1;
            *len_p = n - klen - 1;
            return 1;
        }
        line = end ? end + 1 : NULL;
    }
    return 0;
}

/* Calls `each` for every key of `a` whose value in `b` differs or is missing (b's value NULL),
 * a and b swapped when `swapped`; returns how many. */
static size_t diff_one_way(const char *a, const char *b, int swapped, gt_topo_shared_diff_fn each,
                           void *ctx)
{
    size_t n = 0;
    char key[256], va[GT_TOPO_PATH_MAX + 8], vb[GT_TOPO_PATH_MAX + 8];
    for (const char *line = a; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *eq = memchr(line, '=', len);
        const char *next = end ? end + 1 : NULL;
        if (eq && eq > line && (size_t)(eq - line) < sizeof key) {
            size_t klen = (size_t)(eq - line), alen = len - klen - 1;
            memcpy(key, line, klen);
            key[klen] = '\0';
            const char *bv = NULL;
            size_t blen = 0;
            int in_b = find_key(b, key, klen, &bv, &blen);
            if (!in_b || blen != alen || memcmp(bv, eq + 1, alen) != 0) {
                /* Keys only in b are found from b's side; here only a's keys count. */
                if (!swapped || !in_b) {
                    snprintf(va, sizeof va, "%.*s", (int)alen, eq + 1);
                    if (in_b) snprintf(vb, sizeof vb, "%.*s", (int)blen, bv);
                    if (each) {
                        if (swapped)
                            each(ctx, key, in_b ? vb : NULL, va);
                        else
                            each(ctx, key, va, in_b ? vb : NULL);
                    }
                    n++;
                }
            }
        }
        line = next;
    }
    return n;
}

size_t gt_topo_shared_diff(const char *ours, const char *theirs, gt_topo_shared_diff_fn each,
                           void *ctx)
{
    if (!ours) ours = "";
    if (!theirs) theirs = "";
    return diff_one_way(ours, theirs, 0, each, ctx) + diff_one_way(theirs, ours, 1, each, ctx);
}
