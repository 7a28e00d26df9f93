/* carry.c — the work in flight of a removed site, kept for its next life (docs/diloco.md,
 * "What a removed site keeps").
 *
 * A site removed from the run — a zombie past its lease, one the majority evicted, the minority
 * of a partition, one that gave up on a result — leaves with GT_ERR_PEER_LOST and is started
 * again as a joiner. What it trained since its last submit was in no contribution: it was lost
 * (goodput's `trained_not_in_anchor`). Now gt_diloco_close writes it, θ_s − base (base: θ_s at
 * the last submit when that round is still to apply, else θ_a), with its tokens and the round
 * of the anchor it was trained from, to SITE/carry.gtcw ("-rankK" for rank K). The next life,
 * once it has joined (x = the anchor it joined from), reads it, deletes it and adds it to x
 * scaled by 1 / (1 + s), s the rounds between the two anchors — the discount a late
 * contribution folded s rounds late gets — and adds its tokens to its first contribution's
 * weight. So the work reaches the anchor once, through a delta against the current anchor:
 * nothing was sent of it before (it is what came after the last submit), and the file is gone
 * before anything is built on it. Not past outer.carry_max_rounds rounds (0: never), not with
 * streaming fragments or sync-dp, not for a site that starts or resumes the run (a carry left
 * then is stale and is deleted).
 *
 * The file: u32 magic "GTCW", u32 version, u64 length of a JSON header, the header, n floats,
 * the XXH3-128 of every byte before it; written as NAME.tmp.<pid>, fsynced, renamed, the directory
 * fsynced (dl_write_sealed, as checkpoint.c's outer states).
 */
#include "diloco_internal.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#define CW_MAGIC   0x57435447u /* "GTCW" */
#define CW_VERSION 1u

static void carry_path(const gt_diloco_t *d, char *out, size_t cap)
{
    if (d->ranks > 1)
        snprintf(out, cap, "%s/carry-rank%u.gtcw", d->site_dir, d->rank);
    else
        snprintf(out, cap, "%s/carry.gtcw", d->site_dir);
}

/* Whether this run keeps a removed site's work at all. */
static int carry_on(const gt_diloco_t *d)
{
    return d->cfg->outer.carry_max_rounds > 0 && !d->sync_dp && d->F == 1;
}

void dl_carry_discard(gt_diloco_t *d)
{
    char path[2300];
    carry_path(d, path, sizeof path);
    if (unlink(path) == 0)
        GT_INFO("site %s: deleted %s, work kept from a removed life of an earlier start of the "
                "run",
                d->name, path);
}

gt_status_t dl_carry_save(gt_diloco_t *d)
{
    if (!carry_on(d) || !d->training || d->anchor_bad || !d->x || !d->anchor) return GT_OK;
    /* The tokens since the last submit: what no contribution has carried. */
    uint64_t tok = d->round_tokens;
    if (!tok) {
        GT_INFO("site %s: trained nothing since its last submit: no work to keep", d->name);
        return GT_OK;
    }
    /* base: θ_s at the submit when that round is still to apply (x − snap is what came after
     * it, whatever the apply has done to θ_a so far), else the anchor (after an apply, x = θ_a
     * + what came after the submit). A joiner before its rebase submitted nothing: snap holds
     * the anchor it joined from (dl_join), which its rebase may be replacing in θ_a. */
    const float *base = d->fpending[0] >= 0 ? d->snap : d->anchor;
    if (d->p.before_read) {
        gt_status_t hs = d->p.before_read(d->p.hook_ctx);
        if (hs != GT_OK) return hs;
    }
    char path[2300];
    carry_path(d, path, sizeof path);
    float *v = malloc(d->n_sub * sizeof(float)); /* our lanes, laid out as θ_a */
    gt_status_t st = v ? GT_OK : GT_ERR_NOMEM;
    char *head = NULL;
    if (st == GT_OK) {
        for (uint32_t i = 0; i < d->n_own; i++) {
            const gt_topo_lane_t *ln = &d->layout->lanes[d->own_lanes[i]];
            const float *x = d->x + ln->offset, *b = base + d->apos[i];
            float *o = v + d->apos[i];
            for (size_t j = 0; j < ln->count; j++) o[j] = x[j] - b[j];
        }
        json_t *j =
            json_pack("{s:s, s:s, s:I, s:i, s:i, s:I, s:I, s:I, s:I}", "site", d->name, "run_id",
                      d->run_id, "n_params", (json_int_t)d->n, "rank", (int)d->rank, "ranks",
                      (int)d->ranks, "anchor_round", (json_int_t)d->anchor_round, "tokens",
                      (json_int_t)tok, "step", (json_int_t)d->step, "H", (json_int_t)d->H);
        head = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        json_decref(j);
        if (!head) st = GT_ERR_NOMEM;
    }
    if (st == GT_OK) {
        const void *parts[1] = {v};
        const size_t lens[1] = {d->n_sub * sizeof(float)};
        st = dl_write_sealed(path, CW_MAGIC, CW_VERSION, head, parts, lens, 1);
    }
    if (st == GT_OK)
        GT_INFO("site %s: keeps the %llu tokens it trained since its last submit (on the anchor "
                "after round %lld) in %s: its next life adds them to its first contribution",
                d->name, (unsigned long long)tok, (long long)d->anchor_round, path);
    free(v);
    free(head);
    return st;
}

/* Reads and checks the carry file into v (n floats); *round_p, *tok_p from its header. 1: a
 * usable file, 0: none, -1: unusable (the reason logged). */
static int carry_read(gt_diloco_t *d, const char *path, float *v, int64_t *round_p, uint64_t *tok_p)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    const char *why = NULL;
    uint8_t *buf = NULL;
    json_t *head = NULL;
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (size < 32 || fseek(f, 0, SEEK_SET) != 0) {
        why = "shorter than a header (truncated)";
    } else if (!(buf = malloc((size_t)size))) {
        why = "out of memory";
    } else if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
        why = "read error";
    } else if (gt_le_get32(buf) != CW_MAGIC || gt_le_get32(buf + 4) != CW_VERSION) {
        why = "not a geotrain carry file (magic or version)";
    } else {
        uint64_t hl = gt_le_get64(buf + 8);
        XXH128_canonical_t c;
        memcpy(&c, buf + size - 16, sizeof c);
        json_int_t n = -1, rank = -1, ranks = -1, round = -2, tok = -1;
        const char *run_id = NULL;
        if (hl > (uint64_t)size || 16 + hl + d->n_sub * sizeof(float) + 16 != (uint64_t)size)
            why = "its size does not match this run's vector (truncated, or another model)";
        else if (!XXH128_isEqual(XXH128_hashFromCanonical(&c),
                                 XXH3_128bits(buf, (size_t)size - 16)))
            why = "checksum mismatch (the file changed on disk)";
        else if (!(head = json_loadb((const char *)buf + 16, hl, 0, NULL)) ||
                 json_unpack(head, "{s:s, s:I, s:I, s:I, s:I, s:I}", "run_id", &run_id, "n_params",
                             &n, "rank", &rank, "ranks", &ranks, "anchor_round", &round, "tokens",
                             &tok) != 0 ||
                 round < -1 || tok < 0)
            why = "bad header";
        else if (strcmp(run_id, d->run_id) != 0 || (size_t)n != d->n || (uint32_t)rank != d->rank ||
                 (uint32_t)ranks != d->ranks)
            why = "written by another run, model or rank";
        else {
            memcpy(v, buf + 16 + hl, d->n_sub * sizeof(float));
            *round_p = round;
            *tok_p = (uint64_t)tok;
        }
    }
    fclose(f);
    free(buf);
    json_decref(head);
    if (why) GT_WARN("site %s: %s is unusable (%s): the work it kept is lost", d->name, path, why);
    return why ? -1 : 1;
}

gt_status_t dl_carry_take(gt_diloco_t *d, int64_t from)
{
    if (!carry_on(d)) return GT_OK;
    char path[2300];
    carry_path(d, path, sizeof path);
    float *v = malloc(d->n_sub * sizeof(float));
    if (!v) return GT_ERR_NOMEM;
    int64_t round = -1;
    uint64_t tok = 0;
    int got = carry_read(d, path, v, &round, &tok);
    /* Deleted before anything is built on it: a life that dies after this has lost it (as a
     * killed site loses its round), never counted it twice. */
    if (got != 0 && unlink(path) != 0 && errno != ENOENT) {
        GT_WARN("site %s: cannot delete %s (%s): its work is not used", d->name, path,
                strerror(errno));
        got = -1;
    }
    /* Best effort: the deletion stands either way (gt_fsync_dir logs a failure). */
    gt_status_t synced = got != 0 ? gt_fsync_dir(d->site_dir) : GT_OK;
    (void)synced;
    int64_t s = from - round; /* rounds between the anchor it was trained on and ours */
    uint32_t max = d->cfg->outer.carry_max_rounds;
    if (got == 1 && (s < 0 || s > (int64_t)max)) {
        GT_INFO("site %s: the %llu tokens its last life kept were trained on the anchor after "
                "round %lld, %s the one after round %lld it joins with "
                "(outer.carry_max_rounds: %u): not used",
                d->name, (unsigned long long)tok, (long long)round,
                s < 0 ? "later than" : "too many rounds before", (long long)from, max);
        got = 0;
    }
    /* every rank uses its file, or none does */
    uint64_t bad = got != 1;
    gt_status_t st = dl_allreduce(d, &bad, 1, GT_DILOCO_OP_MAX);
    if (st == GT_OK && !bad) {
        const float k = 1.0f / (float)(1 + s);
        for (uint32_t i = 0; i < d->n_own; i++) { /* our lanes, then every rank's gathered */
            const gt_topo_lane_t *ln = &d->layout->lanes[d->own_lanes[i]];
            float *x = d->x + ln->offset;
            const float *w = v + d->apos[i];
            for (size_t j = 0; j < ln->count; j++) x[j] += k * w[j];
        }
        st = dl_gather_x(d);
        d->round_tokens += tok;
        d->carried_tokens += tok;
        GT_INFO("site %s: adds the work its last life kept (%llu tokens, trained on the anchor "
                "after round %lld) to the anchor after round %lld, scaled by 1/%lld; its first "
                "contribution carries it",
                d->name, (unsigned long long)tok, (long long)round, (long long)from,
                (long long)(1 + s));
    }
    free(v);
    return st;
}
