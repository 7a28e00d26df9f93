/* checkpoint.c — the outer state on disk, and a whole run resumed from it (docs/design.md §7;
 * docs/diloco.md, "Stopping and resuming a whole run").
 *
 * A trainer checkpoints its own state (parameters, optimizer, data position); this file adds
 * what only the library knows, so that every site of a run can be stopped and the run
 * continued: the anchor θ_a, the outer momentum (this rank's lanes), both error-feedback
 * residuals of the outer engine, the round, the view epoch, the contribution counters and the
 * site's token and step counts. It is saved only at a round boundary — right after a round was
 * applied, with nothing in flight (step r·H + τ) — so no half-done round needs saving.
 *
 * One file per checkpoint and rank, DIR/outer-SSSSSSSS.gtos (…-rankK.gtos for rank K of a
 * multi-rank site): u32 magic "GTOS", u32 version, u64 length of a JSON header, the header,
 * then the floats (anchor n, momentum n_sub, residual and result residual len each — with
 * several engines, a rank of a site with fewer ranks than the run's WAN groups, each of the two
 * is every engine's in engine order, len the sum), then the
 * XXH3-128 of every byte before it. Written as NAME.tmp.<pid>, fsynced, renamed, the directory
 * fsynced; the newest `keep` are kept. A file that is truncated, fails its checksum or does
 * not match the run is skipped, with the reason, for the previous one.
 *
 * Resume agrees on one round across the sites without a coordinator: each site offers the
 * steps it can resume (its intact outer states that the caller can also restore) in its etcd
 * member value; once every expected site has registered, each reads all offers and takes the
 * newest step that every registered site offers — the same answer everywhere, since they read
 * the same values. No common step: the run starts from the beginning, and says why.
 */
#include "diloco_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#define OS_MAGIC   0x534F5447u /* "GTOS" */
#define OS_VERSION 1u
#define OS_MAX     64 /* checkpoint files considered per directory */

static void file_name(const gt_diloco_t *d, const char *dir, uint64_t step, char *out, size_t n)
{
    if (d->ranks > 1)
        snprintf(out, n, "%s/outer-%08" PRIu64 "-rank%u.gtos", dir, step, d->rank);
    else
        snprintf(out, n, "%s/outer-%08" PRIu64 ".gtos", dir, step);
}

/* The step of a file name of this rank ("outer-SSSSSSSS.gtos" or "…-rankK.gtos"). */
static int parse_name(const gt_diloco_t *d, const char *name, uint64_t *step_p)
{
    unsigned long long s;
    unsigned rank = 0;
    int used = 0;
    if (d->ranks > 1) {
        if (sscanf(name, "outer-%llu-rank%u.gtos%n", &s, &rank, &used) != 2 || rank != d->rank)
            return 0;
    } else if (sscanf(name, "outer-%llu.gtos%n", &s, &used) != 1) {
        return 0;
    }
    if (name[used] != '\0' || strncmp(name, "outer-", 6) != 0) return 0;
    *step_p = s;
    return 1;
}

static int cmp_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* This rank's checkpoint steps in dir, newest first (at most OS_MAX). */
static size_t list_steps(const gt_diloco_t *d, const char *dir, uint64_t *steps)
{
    DIR *dp = opendir(dir);
    if (!dp) return 0;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(dp)) && n < OS_MAX)
        if (parse_name(d, de->d_name, &steps[n])) n++;
    closedir(dp);
    qsort(steps, n, sizeof *steps, cmp_desc);
    return n;
}

static size_t engine_len(const gt_diloco_t *d)
{
    if (!d->outer) return d->n_sub;
    size_t len = 0;
    for (uint32_t e = 0; e < d->n_eng; e++) len += gt_outer_len(d->outers[e]);
    return len;
}

/* Every engine's residual (of_results 0: of its deltas, 1: of its results), one after another,
 * into `v` (engine_len floats), or back from it. Under the lock. */
static void residuals_save(gt_diloco_t *d, int of_results, float *v)
{
    for (uint32_t e = 0; e < d->n_eng; e++) {
        size_t len = gt_outer_len(d->outers[e]);
        memcpy(v, gt_outer_residual(d->outers[e], of_results), len * sizeof(float));
        v += len;
    }
}

static void residuals_load(gt_diloco_t *d, int of_results, const float *v)
{
    for (uint32_t e = 0; e < d->n_eng; e++) {
        size_t len = gt_outer_len(d->outers[e]);
        memcpy(gt_outer_residual(d->outers[e], of_results), v, len * sizeof(float));
        v += len;
    }
}

/* Writes and hashes (h, when not NULL) one piece of a sealed file. */
static gt_status_t put(gt_afile_t *af, XXH3_state_t *h, const void *p, size_t len)
{
    if (h) XXH3_128bits_update(h, p, len);
    return gt_afile_write(af, p, len);
}

gt_status_t dl_write_sealed(const char *path, uint32_t magic, uint32_t version, const char *head,
                            const void *const *parts, const size_t *lens, size_t n_parts)
{
    XXH3_state_t *h = XXH3_createState();
    if (!h) return GT_ERR_NOMEM;
    gt_afile_t *af = NULL;
    gt_status_t st = gt_afile_open(path, 0644, 0, &af);
    if (st == GT_OK) {
        uint8_t pre[16];
        uint64_t hl = strlen(head);
        gt_le_put32(pre, magic);
        gt_le_put32(pre + 4, version);
        gt_le_put64(pre + 8, hl);
        XXH3_128bits_reset(h);
        st = put(af, h, pre, sizeof pre);
        if (st == GT_OK) st = put(af, h, head, hl);
        for (size_t i = 0; i < n_parts && st == GT_OK; i++) st = put(af, h, parts[i], lens[i]);
        if (st == GT_OK) {
            XXH128_canonical_t c;
            XXH128_canonicalFromHash(&c, XXH3_128bits_digest(h));
            st = put(af, NULL, &c, sizeof c);
        }
        if (st == GT_OK) {
            st = gt_afile_commit(af);
        } else {
            gt_afile_abort(af);
        }
    }
    XXH3_freeState(h); /* gt_afile_* logged any error, naming the file */
    return st;
}

gt_status_t gt_diloco_save(gt_diloco_t *d, const char *dir, unsigned keep)
{
    gt_log_errors_reset();
    if (!d || d->magic != GT_DILOCO_MAGIC || !dir || !*dir) return GT_ERR_INVALID;
    /* the residuals and θ_a as the encoder leaves them (it is idle at a round boundary) */
    gt_status_t st = dl_agree(d, dl_encode_wait(d));
    if (st != GT_OK) return st;
    if (d->F > 1) {
        GT_ERROR("site %s: gt_diloco_save: outer-state checkpoints of streaming fragments "
                 "(outer.fragments = %u) are not built yet",
                 d->name, d->F);
        return GT_ERR_INVALID;
    }
    /* A round boundary: the last round applied, the next not submitted (sync-dp: any step,
     * every step's exchange is done inside it). */
    if (!d->sync_dp && (d->fpending[0] >= 0 || d->step != d->applied_upto * d->H + d->tau)) {
        GT_ERROR("site %s: gt_diloco_save at step %llu: the outer state is saved only right after "
                 "a round was applied (step r*H + %llu, r >= 1, with H = %llu)",
                 d->name, (unsigned long long)d->step, (unsigned long long)d->tau,
                 (unsigned long long)d->H);
        st = GT_ERR_INVALID;
    }
    char path[4200];
    file_name(d, dir, d->step, path, sizeof path);
    size_t len = engine_len(d);
    float *res = st == GT_OK ? malloc(2 * len * sizeof(float)) : NULL;
    char *head = NULL;
    if (st == GT_OK && !res) st = GT_ERR_NOMEM;
    if (st == GT_OK) st = gt_mkdirs(dir);
    if (st == GT_OK) {
        /* The residuals and counters belong to the WAN thread too: a copy under the lock, the
         * writing without it. */
        gt_outer_stats_t os;
        pthread_mutex_lock(&d->lock);
        residuals_save(d, 0, res);
        residuals_save(d, 1, res + len);
        dl_outer_stats(d, &os);
        uint64_t epoch = dl_view(d)->epoch;
        pthread_mutex_unlock(&d->lock);
        json_t *j = json_pack(
            "{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:i, s:i, s:I, s:I, s:b, s:I, s:I, s:I, s:f, "
            "s:f, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I}, s:s}",
            "site", d->name, "step", (json_int_t)d->step, "rounds_applied",
            (json_int_t)d->applied_upto, "n_params", (json_int_t)d->n, "n_sub",
            (json_int_t)d->n_sub, "engine_len", (json_int_t)len, "H", (json_int_t)d->H, "rank",
            (int)d->rank, "ranks", (int)d->ranks, "tau", (json_int_t)d->tau, "view_epoch",
            (json_int_t)epoch, "sync_dp", d->sync_dp, "tokens", (json_int_t)d->tokens,
            "steps_trained", (json_int_t)d->steps_trained, "own_rounds_applied",
            (json_int_t)d->rounds_applied, "compute_s", d->compute_s, "wait_s", d->wait_s,
            "contributions", "on_time", (json_int_t)os.on_time, "late", (json_int_t)os.late,
            "dropped", (json_int_t)os.dropped, "rejected", (json_int_t)os.rejected, "clipped",
            (json_int_t)os.clipped, "hash_checks", (json_int_t)os.hash_checks, "hash_mismatches",
            (json_int_t)os.hash_mismatches, "run_id", d->run_id);
        /* the tokens of the round in flight trained before this step (τ of them): the
         * round's weight, and goodput's count, are the whole round's after a resume too */
        if (j) json_object_set_new(j, "round_tokens", json_integer((json_int_t)d->round_tokens));
        /* θ_a's floats: this rank's lanes (a file without it holds the whole vector) */
        if (j) json_object_set_new(j, "anchor_floats", json_integer((json_int_t)d->n_sub));
        if (j) json_object_set_new(j, "steps_skipped", json_integer((json_int_t)d->steps_skipped));
        if (j) json_object_set_new(j, "rounds_cut", json_integer((json_int_t)d->rounds_cut));
        head = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17)) : NULL;
        json_decref(j);
        if (!head) st = GT_ERR_NOMEM;
    }
    if (st == GT_OK) {
        const void *parts[3] = {d->anchor, d->mom, res}; /* θ_a: our lanes (n_sub floats) */
        const size_t lens[3] = {d->n_sub * sizeof(float), d->n_sub * sizeof(float),
                                2 * len * sizeof(float)};
        st = dl_write_sealed(path, OS_MAGIC, OS_VERSION, head, parts, lens, 3);
    }
    if (st == GT_OK) { /* keep the newest `keep` */
        uint64_t steps[OS_MAX];
        size_t n = list_steps(d, dir, steps);
        for (size_t i = keep ? keep : 1; i < n; i++) {
            char old[4200];
            file_name(d, dir, steps[i], old, sizeof old);
            if (unlink(old) != 0) GT_WARN("site %s: cannot remove %s", d->name, old);
        }
    }
    free(res);
    free(head);
    return dl_agree(d, st);
}

/* Reads and checks one checkpoint file: the whole of it into *buf_p, its header parsed into
 * *head_p, *floats_p where the floats start. GT_ERR_CORRUPT (the reason logged) when it is
 * truncated, fails its checksum, or was written by another layout of the run. */
static gt_status_t read_checked(gt_diloco_t *d, const char *path, uint64_t step, uint8_t **buf_p,
                                json_t **head_p, const float **floats_p)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        GT_WARN("site %s: cannot open %s: %s", d->name, path, strerror(errno));
        return GT_ERR_CORRUPT;
    }
    uint8_t *buf = NULL;
    json_t *head = NULL;
    gt_status_t st = GT_ERR_CORRUPT;
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    size_t len = engine_len(d);
    /* θ_a: this rank's lanes, or (files from before sites split it over their ranks) the whole
     * vector; the header says which */
    size_t floats = d->n_sub + d->n_sub + 2 * len, floats_full = d->n + d->n_sub + 2 * len;
    const char *why = NULL;
    if (size < 32 || fseek(f, 0, SEEK_SET) != 0) {
        why = "shorter than a header (truncated)";
        goto out;
    }
    if (!(buf = malloc((size_t)size))) {
        st = GT_ERR_NOMEM;
        goto out;
    }
    if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
        why = "read error";
        goto out;
    }
    uint64_t hl = gt_le_get64(buf + 8);
    if (gt_le_get32(buf) != OS_MAGIC || gt_le_get32(buf + 4) != OS_VERSION) {
        why = "not a geotrain outer-state file (magic or version)";
        goto out;
    }
    if (hl > (uint64_t)size || (16 + hl + floats * sizeof(float) + 16 != (uint64_t)size &&
                                16 + hl + floats_full * sizeof(float) + 16 != (uint64_t)size)) {
        why = "its size does not match this run's vectors (truncated, or another model)";
        goto out;
    }
    XXH128_canonical_t c;
    memcpy(&c, buf + size - 16, sizeof c);
    if (!XXH128_isEqual(XXH128_hashFromCanonical(&c), XXH3_128bits(buf, (size_t)size - 16))) {
        why = "checksum mismatch (the file changed on disk)";
        goto out;
    }
    json_error_t je;
    head = json_loadb((const char *)buf + 16, hl, 0, &je);
    json_int_t n = -1, n_sub = -1, H = -1, tau = -1, ranks = -1, rank = -1;
    int sync = -1;
    if (!head ||
        json_unpack(head, "{s:I, s:I, s:I, s:I, s:I, s:I, s:b}", "n_params", &n, "n_sub", &n_sub,
                    "H", &H, "tau", &tau, "ranks", &ranks, "rank", &rank, "sync_dp", &sync) != 0) {
        why = "bad header";
        goto out;
    }
    json_t *afj = json_object_get(head, "anchor_floats");
    size_t af = json_is_integer(afj) ? (size_t)json_integer_value(afj) : d->n;
    if ((af != d->n_sub && af != d->n) ||
        16 + hl + (af + d->n_sub + 2 * len) * sizeof(float) + 16 != (uint64_t)size) {
        why = "its size does not match its header (truncated, or another model)";
        goto out;
    }
    if ((size_t)n != d->n || (size_t)n_sub != d->n_sub || (uint64_t)H != d->H ||
        (uint64_t)tau != d->tau || (uint32_t)ranks != d->ranks || (uint32_t)rank != d->rank ||
        sync != d->sync_dp) {
        why = "written under other settings (parameters, H, overlap, ranks or outer.mode)";
        goto out;
    }
    /* A file copied from another site or run, or renamed over another step, passes the
     * checksum (it is whole) but is not this site's state at this step. */
    const char *site = json_string_value(json_object_get(head, "site"));
    const char *run_id = json_string_value(json_object_get(head, "run_id"));
    json_t *js = json_object_get(head, "step");
    if (!site || strcmp(site, d->name) != 0) {
        why = "written by another site";
        GT_WARN("site %s: %s holds site %s's outer state", d->name, path, site ? site : "?");
        goto out;
    }
    if (run_id && strcmp(run_id, d->run_id) != 0) {
        why = "written by another run";
        GT_WARN("site %s: %s belongs to run '%s', not '%s'", d->name, path, run_id, d->run_id);
        goto out;
    }
    if (!json_is_integer(js) || (uint64_t)json_integer_value(js) != step) {
        why = "its header's step is not the step in its name (renamed?)";
        goto out;
    }
    if (step > d->total) {
        why = "its step is beyond the run's last step";
        goto out;
    }
    *buf_p = buf;
    *head_p = head;
    *floats_p = (const float *)(buf + 16 + hl);
    buf = NULL;
    head = NULL;
    st = GT_OK;
out:
    if (why) GT_WARN("site %s: outer-state checkpoint %s is unusable: %s", d->name, path, why);
    fclose(f);
    free(buf);
    json_decref(head);
    return st;
}

gt_status_t dl_resume_prepare(gt_diloco_t *d)
{
    if (!d->p.resume_dir) return GT_OK;
    if (d->F > 1) { /* its outer state is never saved (gt_diloco_save refuses) */
        GT_ERROR("site %s: a run with streaming fragments (outer.fragments = %u) cannot be "
                 "resumed from a checkpoint yet",
                 d->name, d->F);
        return GT_ERR_CONFIG;
    }
    uint64_t steps[OS_MAX];
    size_t n = list_steps(d, d->p.resume_dir, steps);
    json_t *offer = json_array();
    if (!offer) return GT_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        int wanted = !d->p.resume_steps;
        for (size_t k = 0; d->p.resume_steps && k < d->p.n_resume_steps; k++)
            wanted |= d->p.resume_steps[k] == steps[i];
        if (!wanted) {
            GT_INFO("site %s: outer state at step %" PRIu64 " has no matching trainer checkpoint",
                    d->name, steps[i]);
            continue;
        }
        char path[4200];
        file_name(d, d->p.resume_dir, steps[i], path, sizeof path);
        uint8_t *buf = NULL;
        json_t *head = NULL;
        const float *fl = NULL;
        gt_status_t st = read_checked(d, path, steps[i], &buf, &head, &fl);
        free(buf);
        json_decref(head);
        if (st == GT_ERR_NOMEM) {
            json_decref(offer);
            return st;
        }
        if (st == GT_OK)
            json_array_append_new(offer, json_integer((json_int_t)steps[i]));
        else if (i + 1 < n)
            GT_WARN("site %s: falling back to the previous checkpoint (step %" PRIu64 ")", d->name,
                    steps[i + 1]);
    }
    /* A site of several ranks offers only the steps every one of its ranks has intact (each
     * rank keeps its own lanes' files: one rank's damaged file makes the step unusable for the
     * whole site). Collective: rank 0's offers go to every rank (a MAX over slots the others
     * leave 0), then each rank marks the ones it lacks. */
    if (d->ranks > 1) {
        uint64_t cand[OS_MAX] = {0}, lack[OS_MAX] = {0};
        size_t nc = json_array_size(offer);
        for (size_t i = 0; d->rank == 0 && i < nc && i < OS_MAX; i++)
            cand[i] = (uint64_t)json_integer_value(json_array_get(offer, i)) + 1;
        gt_status_t st = dl_allreduce(d, cand, OS_MAX, GT_DILOCO_OP_MAX);
        for (size_t i = 0; st == GT_OK && i < OS_MAX && cand[i]; i++) {
            int have = 0;
            for (size_t k = 0; k < nc; k++)
                have |= (uint64_t)json_integer_value(json_array_get(offer, k)) + 1 == cand[i];
            lack[i] = !have;
        }
        if (st == GT_OK) st = dl_allreduce(d, lack, OS_MAX, GT_DILOCO_OP_MAX);
        if (st != GT_OK) {
            json_decref(offer);
            return st;
        }
        json_array_clear(offer);
        for (size_t i = 0; i < OS_MAX && cand[i]; i++) {
            if (lack[i])
                GT_WARN("site %s: another rank of this site cannot resume at step %" PRIu64,
                        d->name, cand[i] - 1);
            else
                json_array_append_new(offer, json_integer((json_int_t)(cand[i] - 1)));
        }
    }
    json_t *note = json_pack("{s:o}", "resume_steps", offer);
    d->resume_note = note ? json_dumps(note, JSON_COMPACT) : NULL;
    json_decref(note);
    GT_INFO("site %s: can resume at steps %s", d->name, d->resume_note ? d->resume_note : "?");
    return d->resume_note ? GT_OK : GT_ERR_NOMEM;
}

/* The newest step every registered site offers, into *step_p; GT_ERR_NOT_FOUND when none. */
static gt_status_t common_step(gt_diloco_t *d, uint64_t *step_p)
{
    char *text = NULL;
    gt_status_t st = gt_wan_member_values(d->grp[0].member, &text);
    if (st != GT_OK) {
        GT_ERROR("site %s: cannot read the other sites' checkpoints from etcd: %s", d->name,
                 gt_status_str(st));
        return st;
    }
    json_t *all = json_loads(text, 0, NULL);
    free(text);
    json_t *mine = json_loads(d->resume_note, 0, NULL);
    json_t *own = json_object_get(mine, "resume_steps");
    st = GT_ERR_NOT_FOUND;
    size_t i, k;
    json_t *s, *m;
    /* Our own offers, newest first: the first that every member offers too. */
    json_array_foreach(own, i, s)
    {
        int everyone = 1;
        json_array_foreach(all, k, m)
        {
            json_t *theirs = json_object_get(m, "resume_steps");
            int has = 0;
            size_t q;
            json_t *t;
            json_array_foreach(theirs, q, t) has |= json_integer_value(t) == json_integer_value(s);
            if (!has) {
                everyone = 0;
                if (i == 0)
                    GT_WARN("site %s: site %s cannot resume at step %lld (it offers %s)", d->name,
                            json_string_value(json_object_get(m, "name")),
                            (long long)json_integer_value(s),
                            theirs ? "other steps" : "no checkpoint at all");
            }
        }
        if (everyone) {
            *step_p = (uint64_t)json_integer_value(s);
            st = GT_OK;
            break;
        }
    }
    json_decref(all);
    json_decref(mine);
    return st;
}

/* Drops the lines of anchors.jsonl for rounds >= `rounds`: the resumed run writes them again. */
static void trim_anchors(gt_diloco_t *d, uint64_t rounds)
{
    if (!d->anchors) return;
    char path[2300];
    snprintf(path, sizeof path, "%s/anchors.jsonl", d->site_dir);
    FILE *in = fopen(path, "r");
    char *keep = NULL, line[256];
    size_t keep_len = 0;
    FILE *mem = open_memstream(&keep, &keep_len);
    while (in && mem && fgets(line, sizeof line, in)) {
        unsigned long long r;
        if (sscanf(line, "{\"round\":%llu", &r) == 1 && r < rounds) fputs(line, mem);
    }
    if (in) fclose(in);
    if (mem) fclose(mem);
    if (keep && ftruncate(fileno(d->anchors), 0) == 0) {
        fseek(d->anchors, 0, SEEK_SET);
        fwrite(keep, 1, keep_len, d->anchors);
        fflush(d->anchors);
    }
    free(keep);
}

gt_status_t dl_resume(gt_diloco_t *d)
{
    d->resumed_step = -1;
    uint64_t step = 0;
    gt_status_t st = GT_OK;
    st = common_step(d, &step); /* each rank: its lanes' group of sites, the same offers */
    uint64_t v[2] = {st == GT_OK ? step + 1 : 0, st == GT_OK ? UINT64_MAX - step : UINT64_MAX};
    if (st != GT_OK && st != GT_ERR_NOT_FOUND) return dl_agree(d, st);
    if ((st = dl_allreduce(d, v, 2, GT_DILOCO_OP_MAX)) != GT_OK) return st;
    if (v[0] == 0) {
        GT_WARN("site %s: no checkpoint step that every site has: starting the run from the "
                "beginning",
                d->name);
        return GT_OK;
    }
    if (v[0] - 1 != UINT64_MAX - v[1]) {
        GT_ERROR("site %s: its ranks found different common checkpoint steps (%llu and %llu)",
                 d->name, (unsigned long long)(UINT64_MAX - v[1]), (unsigned long long)v[0] - 1);
        return GT_ERR_CORRUPT;
    }
    step = v[0] - 1;
    char path[4200];
    file_name(d, d->p.resume_dir, step, path, sizeof path);
    uint8_t *buf = NULL;
    json_t *head = NULL;
    const float *fl = NULL;
    st = read_checked(d, path, step, &buf, &head, &fl);
    json_int_t rounds = 0, tokens = 0, trained = 0, own_rounds = 0, epoch = 0, round_tokens = 0;
    json_int_t skipped = 0, cut = 0;
    double compute_s = 0, wait_s = 0;
    gt_outer_stats_t os;
    memset(&os, 0, sizeof os);
    json_int_t c[7] = {0};
    if (st == GT_OK &&
        json_unpack(head,
                    "{s:I, s:I, s:I, s:I, s:I, s:F, s:F, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I}}",
                    "rounds_applied", &rounds, "tokens", &tokens, "steps_trained", &trained,
                    "own_rounds_applied", &own_rounds, "view_epoch", &epoch, "compute_s",
                    &compute_s, "wait_s", &wait_s, "contributions", "on_time", &c[0], "late", &c[1],
                    "dropped", &c[2], "rejected", &c[3], "clipped", &c[4], "hash_checks", &c[5],
                    "hash_mismatches", &c[6]) != 0) {
        GT_ERROR("site %s: %s: bad counters in the header", d->name, path);
        st = GT_ERR_CORRUPT;
    }
    if (st == GT_OK) { /* absent from checkpoints written before it was kept: 0 */
        json_t *rt = json_object_get(head, "round_tokens");
        round_tokens =
            json_is_integer(rt) && json_integer_value(rt) > 0 ? json_integer_value(rt) : 0;
        json_t *sk = json_object_get(head, "steps_skipped"),
               *rc = json_object_get(head, "rounds_cut");
        skipped = json_is_integer(sk) && json_integer_value(sk) > 0 ? json_integer_value(sk) : 0;
        cut = json_is_integer(rc) && json_integer_value(rc) > 0 ? json_integer_value(rc) : 0;
    }
    if (st == GT_OK) {
        os.on_time = (uint64_t)c[0];
        os.late = (uint64_t)c[1];
        os.dropped = (uint64_t)c[2];
        os.rejected = (uint64_t)c[3];
        os.clipped = (uint64_t)c[4];
        os.hash_checks = (uint64_t)c[5];
        os.hash_mismatches = (uint64_t)c[6];
        size_t len = engine_len(d);
        json_t *afj = json_object_get(head, "anchor_floats");
        size_t af = json_is_integer(afj) ? (size_t)json_integer_value(afj) : d->n;
        /* θ_a as saved (our lanes, laid out as in memory) or, from an older file of a rank of
         * several, the whole vector: our lanes of it */
        int whole = d->ranks > 1 && !json_is_integer(afj);
        dl_unpublish(d, -1, 1); /* served again once loaded (dl_keep_state below) */
        for (uint32_t i = 0; i < d->n_own; i++) {
            const gt_topo_lane_t *ln = &d->layout->lanes[d->own_lanes[i]];
            const float *src = fl + (whole ? ln->offset : d->apos[i]);
            memcpy(d->anchor + d->apos[i], src, ln->count * sizeof(float));
        }
        memcpy(d->mom, fl + af, d->n_sub * sizeof(float));
        pthread_mutex_lock(&d->lock);
        residuals_load(d, 0, fl + af + d->n_sub);
        residuals_load(d, 1, fl + af + d->n_sub + len);
        /* the counters were the engines' sum: they continue on engine 0 */
        for (uint32_t e = 0; e < d->n_eng && st == GT_OK; e++)
            st = gt_outer_resume(d->outers[e], d->sync_dp ? step : (uint64_t)rounds,
                                 e == 0 ? &os : NULL);
        pthread_mutex_unlock(&d->lock);
    }
    free(buf);
    json_decref(head);
    if ((st = dl_agree(d, st)) != GT_OK) return st;
    d->first_step = step;
    d->resumed_step = (int64_t)step;
    d->applied_upto = (uint64_t)rounds;
    d->anchor_round = (int64_t)rounds - 1;
    d->rounds_applied = (uint64_t)own_rounds;
    d->tokens = (uint64_t)tokens;
    d->round_tokens = (uint64_t)round_tokens;
    d->steps_trained = (uint64_t)trained;
    d->steps_skipped = (uint64_t)skipped;
    d->rounds_cut = (uint64_t)cut;
    d->compute_s = compute_s;
    d->wait_s = wait_s;
    /* Served to a site that joins before our first round closes. */
    dl_keep_state(d, d->sync_dp ? HIST_INITIAL : (int64_t)rounds - 1);
    trim_anchors(d, d->sync_dp ? (step ? step - 1 : 0) : (uint64_t)rounds);
    GT_INFO("site %s: resumed the run at step %llu (after round %lld; it was in view %lld) from %s",
            d->name, (unsigned long long)step, (long long)rounds - 1, (long long)epoch, path);
    return GT_OK;
}
