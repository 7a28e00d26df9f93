/* print.c — the resolved configuration as YAML (loadable again), and the key reference.
 *
 * `geotrain config check` prints the first so a user sees exactly what a run will use and
 * where each value came from; `geotrain config reference` prints the second, from which
 * docs/config.md is generated.
 */
#include "topology_internal.h"

#include <sodium.h>
#include <string.h>

static const char *src_comment(const gt_src_t *s, const gt_key_t *k, char *buf, size_t len)
{
    char env[128];
    switch (s->kind) {
    case GT_SRC_FILE: snprintf(buf, len, "line %u", s->line); break;
    case GT_SRC_ENV:
        gt_topo_key_env_name(k, env, sizeof env);
        snprintf(buf, len, "from %s", env);
        break;
    case GT_SRC_FLAG: snprintf(buf, len, "from --set"); break;
    default: snprintf(buf, len, "default"); break;
    }
    return buf;
}

static void print_link_params(FILE *out, const char *indent, const gt_topo_link_params_t *p)
{
    const char *names[] = {"latency_ms", "jitter_ms", "bandwidth_mbps", "loss"};
    const double vals[] = {p->latency_ms, p->jitter_ms, p->bandwidth_mbps, p->loss};
    char num[64];
    for (int i = 0; i < 4; i++) {
        gt_topo_format_double(vals[i], num, sizeof num);
        fprintf(out, "%s%s: %s\n", indent, names[i], num);
    }
}

gt_status_t gt_topo_print(const gt_topo_config_t *cfg, FILE *out)
{
    const gt_topo_full_t *full = (const gt_topo_full_t *)cfg;
    char val[GT_TOPO_PATH_MAX + 8], why[160];
    fprintf(out, "# resolved configuration of %s (sites.yaml < GT_* environment < flags)\n",
            cfg->source);
    for (const gt_key_t *k = gt_topo_keys; k->path; k++) {
        const gt_src_t *s = &full->src[k - gt_topo_keys];
        int depth = 0;
        for (const char *p = k->path; *p; p++) depth += *p == '.';
        const char *leaf = strrchr(k->path, '.');
        leaf = leaf ? leaf + 1 : k->path;
        switch (k->type) {
        case GT_KEY_SECTION: fprintf(out, "%*s%s:\n", depth * 2, "", leaf); break;
        case GT_KEY_URLLIST:
            fprintf(out, "%*s%s: [", depth * 2, "", leaf);
            for (uint32_t i = 0; i < cfg->membership.n_endpoints; i++)
                fprintf(out, "%s\"%s\"", i ? ", " : "", cfg->membership.endpoints[i]);
            fprintf(out, "]  # %s\n", src_comment(s, k, why, sizeof why));
            break;
        case GT_KEY_SITES:
            fprintf(out, "sites:\n");
            for (uint32_t i = 0; i < cfg->n_sites; i++) {
                const gt_topo_site_t *site = &cfg->sites[i];
                for (const gt_key_t *sk = gt_topo_site_keys; sk->path; sk++) {
                    if (sk->type == GT_KEY_B64KEY) {
                        char b64[64] = "";
                        if (site->has_public_key)
                            sodium_bin2base64(b64, sizeof b64, site->public_key, 32,
                                              sodium_base64_VARIANT_ORIGINAL);
                        fprintf(out, "    public_key: \"%s\"\n", b64);
                        continue;
                    }
                    gt_topo_key_format(sk, site, val, sizeof val);
                    fprintf(out, "  %s %s: %s\n", sk == gt_topo_site_keys ? "-" : " ", sk->path,
                            val);
                }
            }
            break;
        case GT_KEY_LINKS:
            fprintf(out, "links:%s\n", cfg->n_links ? "" : " []");
            for (uint32_t i = 0; i < cfg->n_links; i++) {
                const gt_topo_link_t *l = &cfg->links[i];
                fprintf(out, "  - between: [\"%s\", \"%s\"]\n", cfg->sites[l->a].name,
                        cfg->sites[l->b].name);
                print_link_params(out, "    ", &l->params);
                fprintf(out, "    cuts: [");
                for (uint32_t c = 0; c < l->params.n_cuts; c++) {
                    char s0[64], s1[64];
                    gt_topo_format_double(l->params.cuts[c].start_s, s0, sizeof s0);
                    gt_topo_format_double(l->params.cuts[c].duration_s, s1, sizeof s1);
                    fprintf(out, "%s{start_s: %s, duration_s: %s}", c ? ", " : "", s0, s1);
                }
                fprintf(out, "]\n");
            }
            break;
        default:
            gt_topo_key_format(k, cfg, val, sizeof val);
            fprintf(out, "%*s%s: %s  # %s\n", depth * 2, "", leaf, val,
                    src_comment(s, k, why, sizeof why));
            break;
        }
    }
    return ferror(out) ? GT_ERR_IO : GT_OK;
}

static void print_rows(FILE *out, const gt_key_t *rows, const char *prefix, int with_env)
{
    char allowed[512], env[128];
    fprintf(out, "| key | default | allowed | meaning |%s\n|---|---|---|---|%s\n",
            with_env ? " environment |" : "", with_env ? "---|" : "");
    for (const gt_key_t *k = rows; k->path; k++) {
        if (k->type == GT_KEY_SECTION) continue;
        gt_topo_key_allowed(k, allowed, sizeof allowed);
        fprintf(out, "| `%s%s` | %s%s%s | %s | %s%s |", prefix, k->path, k->def ? "`" : "",
                k->def ? k->def : (rows == gt_topo_link_keys ? "inherits" : "**required**"),
                k->def ? "`" : "", allowed, k->doc,
                gt_topo_key_per_site(rows, k) ? " *(per site)*" : "");
        if (with_env) {
            gt_topo_key_env_name(k, env, sizeof env);
            if (k->type == GT_KEY_SITES || k->type == GT_KEY_LINKS)
                fprintf(out, " — |");
            else
                fprintf(out, " `%s` |", env);
        }
        fprintf(out, "\n");
    }
}

void gt_topo_print_reference(FILE *out)
{
    fprintf(out,
            "# sites.yaml reference\n\n"
            "Generated by `geotrain config reference` from the schema the loader checks against,\n"
            "so it cannot drift from the code. Precedence: sites.yaml < `GT_*` environment <\n"
            "`--set key=value` flags (per site: `--set sites.NAME.KEY=VALUE`). Every invalid\n"
            "value is reported as `FILE:LINE:COLUMN: key 'a.b': ...; allowed: ...`.\n\n"
            "Limits (a config file may come from anyone; the loader's work is linear in its\n"
            "size): at most %u bytes (%u KiB) of YAML, one document, lists and mappings nested\n"
            "at most %d deep, no tags (`!!str`, `!!python/object`, ...), no aliases (`*name`),\n"
            "each key at most once per mapping. Values and keys are cut to 64 bytes in\n"
            "messages.\n\n"
            "Keys marked *(per site)* are a site's own and may differ between the sites of a\n"
            "run. Every other key must resolve to the same value at every site: each site\n"
            "compares them with the others' when the run starts and when it joins, and a\n"
            "difference stops it, naming each key and both values\n"
            "([diloco.md](diloco.md#what-sites-must-agree-on)).\n\n",
            GT_TOPO_FILE_MAX, GT_TOPO_FILE_MAX >> 10, GT_TOPO_DEPTH_MAX);
    for (const gt_key_t *k = gt_topo_keys; k->path; k++)
        if (k->type == GT_KEY_SECTION && !strchr(k->path, '.'))
            fprintf(out, "- `%s`: %s\n", k->path, k->doc);
    fprintf(out, "\n## Top-level keys\n\n");
    print_rows(out, gt_topo_keys, "", 1);
    fprintf(out, "\n## Per-site keys (`sites: [ {...}, ... ]`)\n\n");
    print_rows(out, gt_topo_site_keys, "sites[].", 0);
    fprintf(out, "\n## Per-link keys (`links: [ {...}, ... ]`)\n\n"
                 "A link is symmetric; settings it leaves out inherit `wan.emulation`. Its cut\n"
                 "windows can also be set by flag, replacing the file's (the entry is created if\n"
                 "the file has none): `--set links[A,B].cuts=START_S+DURATION_S,...`, e.g.\n"
                 "`--set links[us,asia].cuts=60+30,200+5`; an empty value clears them.\n"
                 "(`geotrain launch --chaos` adds its drawn cuts while the run goes on instead,\n"
                 "at their rounds, through `GT_CHAOS_CUTS`: diloco.md, \"Chaos runs\".)\n\n");
    print_rows(out, gt_topo_link_keys, "links[].", 0);
}
