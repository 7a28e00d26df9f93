/* agree.c — the sites of a run check that they hold one configuration
 * (docs/diloco.md#what-sites-must-agree-on).
 *
 * Each site loads its own copy of the config, so another H, codec, lane count or outer learning
 * rate at one site is an operator's ordinary mistake; left alone it trains on silently (another
 * H, another learning rate: anchors that agree, work that does not mean what the run says) or
 * ends in frames that never decode and rounds that time out a minute later. So a site puts the
 * canonical text of every key that must be equal (gt_topo_shared_text) and its digest into its
 * member value in etcd, beside the checkpoints it offers, before it registers, and compares it
 * with every registered site's as they come up (dl_await_sites), and a joiner with the running
 * sites' before it joins: a difference is an error on every site, naming each key and both
 * values. etcd rather than the mesh carries it because a mismatch may keep the mesh from ever
 * connecting (another transport, another security mode, another sites list).
 */
#include "diloco_internal.h"

#include <jansson.h>
#include <xxhash.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

gt_status_t dl_note_config(gt_diloco_t *d)
{
    char *text = NULL;
    gt_status_t st = gt_topo_shared_text(d->cfg, &text);
    if (st != GT_OK) return st;
    size_t keys = 0;
    for (const char *c = text; *c; c++) keys += *c == '\n';
    char digest[17];
    snprintf(digest, sizeof digest, "%016llx", (unsigned long long)XXH3_64bits(text, strlen(text)));
    json_t *note = d->resume_note ? json_loads(d->resume_note, 0, NULL) : json_object();
    if (!json_is_object(note) || json_object_set_new(note, "config", json_string(text)) ||
        json_object_set_new(note, "config_digest", json_string(digest))) {
        json_decref(note);
        free(text);
        return GT_ERR_NOMEM;
    }
    free(text);
    char *out = json_dumps(note, JSON_COMPACT);
    json_decref(note);
    if (!out) return GT_ERR_NOMEM;
    free(d->resume_note);
    d->resume_note = out;
    GT_INFO("site %s: the run's shared configuration: %zu keys, digest %s", d->name, keys, digest);
    return GT_OK;
}

struct diff_ctx {
    gt_diloco_t *d;
    const char *peer;
    size_t shown;
};

#define DIFF_SHOWN_MAX 24 /* keys named per peer; the rest counted */

static void on_diff(void *ctx, const char *key, const char *ours, const char *theirs)
{
    struct diff_ctx *c = ctx;
    if (c->shown++ >= DIFF_SHOWN_MAX) return;
    GT_ERROR("site %s:   %s: %s here, %s at site %s", c->d->name, key, ours ? ours : "(absent)",
             theirs ? theirs : "(absent)", c->peer);
}

gt_status_t dl_check_config(gt_diloco_t *d)
{
    if (!d->grp || !d->n_grp || !d->grp[0].member) return GT_OK;
    char *mine = NULL, *text = NULL;
    gt_status_t st = gt_topo_shared_text(d->cfg, &mine);
    if (st != GT_OK) return st;
    if ((st = gt_wan_member_values(d->grp[0].member, &text)) != GT_OK) {
        GT_ERROR("site %s: cannot read the other sites' configurations from etcd: %s", d->name,
                 gt_status_str(st));
        free(mine);
        return st;
    }
    json_t *all = json_loads(text, 0, NULL);
    free(text);
    size_t i;
    json_t *m;
    uint32_t differing = 0;
    json_array_foreach(all, i, m)
    {
        const char *name = json_string_value(json_object_get(m, "name"));
        if (!name || strcmp(name, d->name) == 0) continue;
        const char *theirs = json_string_value(json_object_get(m, "config"));
        if (!theirs) {
            GT_ERROR("site %s: site %s does not publish its configuration (another geotrain "
                     "version?): every site of a run must run one version, whose sites compare "
                     "their configurations",
                     d->name, name);
            differing++;
            continue;
        }
        size_t n = gt_topo_shared_diff(mine, theirs, NULL, NULL);
        if (!n) continue;
        const char *digest = json_string_value(json_object_get(m, "config_digest"));
        GT_ERROR("site %s: its configuration differs from site %s's (digest %s) in %zu key%s "
                 "that every site of a run must hold alike (docs/diloco.md#what-sites-must-agree-"
                 "on); fix the config, --set or GT_* value at the site that is wrong:",
                 d->name, name, digest ? digest : "?", n, n == 1 ? "" : "s");
        struct diff_ctx c = {d, name, 0};
        (void)gt_topo_shared_diff(mine, theirs, on_diff, &c);
        if (n > DIFF_SHOWN_MAX)
            GT_ERROR("site %s:   ... and %zu more", d->name, n - DIFF_SHOWN_MAX);
        differing++;
    }
    json_decref(all);
    free(mine);
    if (!differing) return GT_OK;
    GT_ERROR("site %s: it does not take part in a run whose sites' configurations differ", d->name);
    /* Registered a while longer, so that every other site reads ours and says so too: until
     * every expected site has registered (the ones still starting), at most the connect
     * timeout, and a second more for the last to read it. */
    const gt_topo_config_t *c = d->cfg;
    uint32_t want = d->p.expect_sites ? d->p.expect_sites : dl_first_sites(c);
    for (uint64_t t0 = gt_time_ns();
         gt_time_ns() - t0 < (uint64_t)c->wan.connect_timeout_ms * 1000000ull &&
         !(d->p.stop && *d->p.stop);) {
        gt_wan_view_t live;
        if (gt_wan_member_list(d->grp[0].member, &live) == GT_OK && live.n_members >= want) break;
        struct timespec ts = {0, 100000000};
        nanosleep(&ts, NULL);
    }
    struct timespec ts = {1, 0};
    nanosleep(&ts, NULL);
    return GT_ERR_CONFIG;
}

gt_status_t dl_claim_run(gt_diloco_t *d)
{
    uint64_t live = 0;
    for (uint32_t i = 0; i < d->n_grp && !live; i++) {
        int one = 1; /* cannot tell: join as before, bounded by the join's own timeouts */
        if (gt_wan_member_run_live(d->grp[i].member, &one) != GT_OK) one = 1;
        live |= (uint64_t)one;
    }
    gt_status_t st = dl_allreduce(d, &live, 1, GT_DILOCO_OP_MAX);
    if (st != GT_OK || live) return st;
    GT_ERROR("site %s: run id '%s' is taken: etcd (%s/%s) holds the keys of a run under it that "
             "started and has no site left that took part in it -- it finished, or every site of "
             "it was stopped or killed -- so there is nothing to join. Start a new run under "
             "another id (--run-id ID, or run.name), or clear the old run's keys with "
             "--reuse-run-id (GT_REUSE_RUN_ID=1) and start afresh under this one",
             d->name, d->run_id, d->cfg->membership.prefix, d->grp[0].run_id);
    return GT_ERR_EXISTS;
}
