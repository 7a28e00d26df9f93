/* added.c — sites added while the run goes on (docs/diloco.md#adding-a-site).
 *
 * A run whose config sets outer.site_slots cuts its chunk layout, sizes its per-site tables and
 * numbers its sites for that many slots; the configured sites take the first, and the others
 * wait vacant (d->cfg is a copy with vacant slots: gt_topo_open_slots). `geotrain sites add`
 * writes a site's description into etcd (PREFIX/RUN/added/NAME: its name, slot, ranks and public
 * key, through the authenticated control plane). Every site reads those descriptions: at start
 * (a site started after an add, the added site itself), and then once a heartbeat while a slot
 * is vacant. A description of a vacant slot is taken into the config (gt_topo_take_slot), its
 * key pinned in every WAN group's mesh (so its handshakes succeed), and acknowledged in etcd
 * (PREFIX/RUN/pinned/NAME/SITE) for the operator's command, which waits for every registered
 * site to have pinned it. The added site then registers and joins like any joiner: the outer
 * engine moves it the chunks of its slot from its first round (outer/: the owner of a chunk is
 * computed per round over the sites taking part), so the layout never changes under a round in
 * flight and every site agrees on who aggregates what (I1).
 */
#include "diloco_internal.h"

#include <jansson.h>
#include <xxhash.h>

#include <stdlib.h>
#include <string.h>

uint32_t dl_first_sites(const gt_topo_config_t *c)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < c->n_sites; i++)
        n += !gt_topo_site_vacant(&c->sites[i]) && !c->sites[i].added;
    return n;
}

gt_status_t dl_open_slots(gt_diloco_t *d)
{
    if (!d->cfg->outer.site_slots) return GT_OK;
    gt_status_t st = gt_topo_open_slots(d->cfg, &d->slot_cfg);
    if (st == GT_OK) d->cfg = d->slot_cfg;
    return st;
}

/* Whether the signed value `text` ({"desc", "sig"}: `geotrain sites add`) is admitted: signed by
 * security.admin_key for this run (unsigned only where the config has no admin key, which the
 * loader allows only without encryption). Its description into *desc_p (json_decref it). A
 * refusal is said once per slot it names. */
static int admitted(gt_diloco_t *d, const char *text, json_t **desc_p)
{
    json_t *v = json_loads(text, 0, NULL);
    const char *desc = json_string_value(json_object_get(v, "desc"));
    const char *sig = json_string_value(json_object_get(v, "sig"));
    json_t *j = desc ? json_loads(desc, 0, NULL) : NULL;
    const char *why = NULL;
    uint8_t admin[GT_WAN_KEY_BYTES];
    const char *key = d->cfg->security.admin_key;
    if (!json_is_object(j))
        why = "it is malformed";
    else if (!json_string_value(json_object_get(j, "run")) ||
             strcmp(json_string_value(json_object_get(j, "run")), d->run_id) != 0)
        why = "it names another run";
    else if (key[0] && (gt_wan_key_from_base64(key, admin) != GT_OK ||
                        gt_wan_add_verify(admin, d->run_id, desc, sig ? sig : "") != GT_OK))
        why = "it is not signed by security.admin_key";
    if (why) {
        /* said once per description (a few remembered; past them, said again) */
        uint64_t h = XXH3_64bits(text, strlen(text)) | 1;
        size_t k = 0, n = sizeof d->added_refused / sizeof d->added_refused[0];
        while (k < n && d->added_refused[k] && d->added_refused[k] != h) k++;
        if (k == n || d->added_refused[k] != h)
            GT_WARN("site %s: refuses an added site's description in etcd: %s (%.160s); it is "
                    "not pinned, and nothing it sends is taken",
                    d->name, why, desc ? desc : text);
        if (k < n) d->added_refused[k] = h;
        json_decref(j);
        j = NULL;
    }
    json_decref(v);
    *desc_p = j;
    return j != NULL;
}

/* One admitted description: its fields, or 0 when it is malformed (said once). */
static int parse_added(gt_diloco_t *d, json_t *j, char *name, size_t cap, uint32_t *slot_p,
                       uint32_t *ranks_p, uint8_t key[GT_WAN_KEY_BYTES], int *has_key_p)
{
    const char *n = json_string_value(json_object_get(j, "name"));
    json_t *slot = json_object_get(j, "slot"), *ranks = json_object_get(j, "ranks");
    const char *pk = json_string_value(json_object_get(j, "public_key"));
    int ok = n && *n && strlen(n) < cap && json_is_integer(slot) && json_is_integer(ranks) &&
             json_integer_value(slot) >= 0 && json_integer_value(slot) < GT_TOPO_MAX_SITES &&
             json_integer_value(ranks) >= 1 && json_integer_value(ranks) <= 4096;
    *has_key_p = ok && pk && *pk;
    if (*has_key_p && gt_wan_key_from_base64(pk, key) != GT_OK) ok = 0;
    if (d->cfg->security.mode == GT_SECURITY_ENCRYPTED && !*has_key_p) ok = 0;
    if (ok) {
        snprintf(name, cap, "%s", n);
        *slot_p = (uint32_t)json_integer_value(slot);
        *ranks_p = (uint32_t)json_integer_value(ranks);
    } else if (!d->added_bad_said) {
        GT_WARN("site %s: ignoring a malformed description of an added site in etcd", d->name);
        d->added_bad_said = 1;
    }
    return ok;
}

/* Takes the descriptions in `json` (a JSON array of strings, gt_wan_member_added). At start
 * (`running` 0): a site of our file that the run added is marked added, and one that disagrees
 * with the run (another slot, another key) is an error. Running: a vacant slot's site is taken,
 * pinned and acknowledged. */
static gt_status_t take_added(gt_diloco_t *d, const char *json, int running)
{
    json_t *arr = json_loads(json, 0, NULL);
    gt_topo_config_t *c = d->slot_cfg;
    gt_status_t st = GT_OK;
    size_t k;
    json_t *e;
    json_array_foreach(arr, k, e)
    {
        char name[GT_TOPO_NAME_MAX];
        uint32_t slot, ranks, have;
        int has_key;
        uint8_t key[GT_WAN_KEY_BYTES];
        json_t *desc = NULL;
        int ok = json_is_string(e) && admitted(d, json_string_value(e), &desc) &&
                 parse_added(d, desc, name, sizeof name, &slot, &ranks, key, &has_key);
        json_decref(desc);
        if (!ok) continue;
        if (gt_topo_site_index(c, name, &have) == GT_OK) {
            int same_key = !has_key || (c->sites[have].has_public_key &&
                                        memcmp(c->sites[have].public_key, key, sizeof key) == 0);
            if (have == slot && same_key && c->sites[have].ranks == ranks) {
                if (!running) c->sites[have].added = 1;
                continue;
            }
            if (running) continue; /* taken at start, or said then */
            GT_ERROR("site %s: the run added site %s at slot %u with %u ranks and %s key, but %s "
                     "has it at slot %u with %u ranks and %s key: give every site the file the "
                     "add was made from (`geotrain sites add` prints it), or leave %s out of it",
                     d->name, name, slot, ranks, has_key ? "its" : "no", c->source, have,
                     c->sites[have].ranks, same_key ? "the same" : "another", name);
            st = GT_ERR_CONFIG;
            break;
        }
        if (slot >= c->n_sites || !gt_topo_site_vacant(&c->sites[slot])) {
            if (!running) {
                GT_ERROR("site %s: the run added site %s at slot %u, which %s holds %s: this "
                         "file is not the run's (outer.site_slots, the sites and their order "
                         "must be the run's)",
                         d->name, name, slot, c->source,
                         slot < c->n_sites ? c->sites[slot].name : "(no such slot)");
                st = GT_ERR_CONFIG;
                break;
            }
            continue;
        }
        if ((st = gt_topo_take_slot(c, slot, name, ranks, has_key ? key : NULL)) != GT_OK) break;
        for (uint32_t i = 0; running && i < d->n_grp && st == GT_OK; i++) {
            pthread_mutex_lock(&d->lock);
            st = gt_wan_mesh_pin(d->grp[i].mesh, slot);
            pthread_mutex_unlock(&d->lock);
        }
        if (st != GT_OK) {
            GT_ERROR("site %s: cannot pin added site %s's key: %s", d->name, name,
                     gt_status_str(st));
            break;
        }
        GT_INFO("site %s: site %s was added to the run (slot %u, %u rank%s%s); it takes part from "
                "the round it announces when it joins",
                d->name, name, slot, ranks, ranks == 1 ? "" : "s", has_key ? ", key pinned" : "");
        for (uint32_t i = 0; running && i < d->n_grp; i++)
            if (gt_wan_member_ack_added(d->grp[i].member, name) != GT_OK)
                GT_WARN("site %s: cannot say in etcd that it pinned site %s (the operator's "
                        "`sites add` waits for it)",
                        d->name, name);
    }
    json_decref(arr);
    return st;
}

gt_status_t dl_added_at_start(gt_diloco_t *d)
{
    if (!d->slot_cfg) return GT_OK;
    const char *eps[GT_TOPO_MAX_ENDPOINTS];
    gt_wan_member_params_t mp = dl_member_params(d, &d->grp[0], eps);
    char *json = NULL;
    gt_status_t st = gt_wan_run_added(&mp, &json);
    if (st != GT_OK) {
        GT_ERROR("site %s: cannot read the run's added sites from etcd: %s", d->name,
                 gt_status_str(st));
        return st;
    }
    st = take_added(d, json, 0);
    free(json);
    return st;
}

void dl_added_poll(gt_diloco_t *d)
{
    if (!d->slot_cfg || !d->grp[0].member) return;
    uint32_t vacant = 0;
    for (uint32_t i = 0; i < d->slot_cfg->n_sites; i++)
        vacant += gt_topo_site_vacant(&d->slot_cfg->sites[i]);
    if (!vacant) return;
    char *json = NULL;
    if (gt_wan_member_added(d->grp[0].member, &json) != GT_OK) return; /* next heartbeat */
    (void)take_added(d, json, 1); /* what failed is said there */
    free(json);
}
