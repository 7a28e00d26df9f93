/* checkpoint.c — a trainer's state on disk, and back.
 *
 * One folder per checkpoint, step-NNNNNNNN/: model.safetensors (HF GPT-2 names, usable as
 * is), optimizer.safetensors (AdamW moments) and state.json (counters, data position, config
 * hash). The folder is assembled as step-NNNNNNNN.tmp/ with every file fsynced, then renamed
 * and the parent fsynced. The rename is the commit point: a crash leaves at worst a stray .tmp
 * folder, which is ignored and cleaned up, and "latest" is simply the highest complete step.
 *
 * A rename protects against crashes, not against what happens to a file afterwards (a disk
 * error, a truncating copy, a stray write). So state.json (format version 2) records the size
 * and XXH3-128 checksum of each tensor file; resume checks them before loading anything, and
 * every loaded tensor must be finite. A checkpoint that fails any check is named with the
 * reason and skipped: resume falls back to the next older one (the newest `keep` are kept).
 */
#include "local_internal.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define STATE_FORMAT "geotrain-checkpoint"
#define STATE_VERSION                                                    \
    3 /* 2: "files" holds each tensor file's size and XXH3-128 checksum; \
        3: "state_xxh3" checks state.json itself (state_digest) */

static const char *const TENSOR_FILES[2] = {"model.safetensors", "optimizer.safetensors"};

/* The size and XXH3-128 checksum (32 hex digits) of a file's bytes. */
static gt_status_t file_digest(const char *path, char hex_p[33], uint64_t *bytes_p)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        GT_ERROR("%s: %s", path, strerror(errno));
        return errno == ENOENT ? GT_ERR_CORRUPT : GT_ERR_IO;
    }
    gt_status_t s = GT_OK;
    XXH3_state_t *st = XXH3_createState();
    enum { BUF = 1 << 20 };
    unsigned char *buf = malloc(BUF);
    uint64_t total = 0;
    GT_REQUIRE_GOTO(st && buf, s, GT_ERR_NOMEM, out, "out of memory");
    XXH3_128bits_reset(st);
    size_t got;
    while ((got = fread(buf, 1, BUF, f)) > 0) {
        XXH3_128bits_update(st, buf, got);
        total += got;
    }
    GT_REQUIRE_GOTO(!ferror(f), s, GT_ERR_IO, out, "%s: read error", path);
    XXH128_hash_t h = XXH3_128bits_digest(st);
    snprintf(hex_p, 33, "%016" PRIx64 "%016" PRIx64, (uint64_t)h.high64, (uint64_t)h.low64);
    *bytes_p = total;
out:
    free(buf);
    XXH3_freeState(st);
    fclose(f);
    return s;
}

/* {"model.safetensors": {"bytes": N, "xxh3_128": HEX}, ...} of the files in dir. */
static gt_status_t files_json(const char *dir, json_t **files_p)
{
    json_t *files = json_object();
    if (!files) return GT_ERR_NOMEM;
    for (size_t i = 0; i < sizeof TENSOR_FILES / sizeof *TENSOR_FILES; i++) {
        char path[4200], hex[33];
        uint64_t bytes = 0;
        snprintf(path, sizeof path, "%s/%s", dir, TENSOR_FILES[i]);
        gt_status_t s = file_digest(path, hex, &bytes);
        if (s == GT_OK && json_object_set_new(files, TENSOR_FILES[i],
                                              json_pack("{s:I, s:s}", "bytes", (json_int_t)bytes,
                                                        "xxh3_128", hex)) != 0)
            s = GT_ERR_NOMEM;
        if (s != GT_OK) {
            json_decref(files);
            return s;
        }
    }
    *files_p = files;
    return GT_OK;
}

/* Checks each tensor file of dir against the size and checksum state.json recorded:
 * GT_ERR_CORRUPT, with what differs, on any mismatch. */
static gt_status_t verify_files(const char *dir, json_t *recorded)
{
    for (size_t i = 0; i < sizeof TENSOR_FILES / sizeof *TENSOR_FILES; i++) {
        char path[4200], hex[33];
        uint64_t bytes = 0;
        json_int_t want_bytes = -1;
        const char *want_hex = NULL;
        snprintf(path, sizeof path, "%s/%s", dir, TENSOR_FILES[i]);
        if (json_unpack(json_object_get(recorded, TENSOR_FILES[i]), "{s:I, s:s}", "bytes",
                        &want_bytes, "xxh3_128", &want_hex) != 0) {
            GT_ERROR("%s/state.json: no size and checksum recorded for %s", dir, TENSOR_FILES[i]);
            return GT_ERR_CORRUPT;
        }
        gt_status_t s = file_digest(path, hex, &bytes);
        if (s != GT_OK) return s;
        if ((json_int_t)bytes != want_bytes) {
            GT_ERROR("%s: %" PRIu64 " bytes, but %lld when written (truncated or overwritten)",
                     path, bytes, (long long)want_bytes);
            return GT_ERR_CORRUPT;
        }
        if (strcmp(hex, want_hex) != 0) {
            GT_ERROR("%s: checksum %s, but %s when written (the file changed on disk)", path, hex,
                     want_hex);
            return GT_ERR_CORRUPT;
        }
    }
    return GT_OK;
}

/* The XXH3-128 of state.json's content without its own "state_xxh3" field, as hex: the JSON
 * dumped compact with sorted keys (a loaded state dumps to the same text), so an edited
 * counter, data position or generator state is caught as a changed tensor file is. */
static int state_digest(json_t *state, char out[33])
{
    json_t *c = json_deep_copy(state);
    if (!c) return -1;
    json_object_del(c, "state_xxh3");
    char *text = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    json_decref(c);
    if (!text) return -1;
    XXH128_hash_t h = XXH3_128bits(text, strlen(text));
    free(text);
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
    return 0;
}

/* Parses "step-NNNNNNNN" (complete folders only). */
static int parse_step(const char *name, uint64_t *step_p)
{
    if (strncmp(name, "step-", 5) != 0) return 0;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(name + 5, &end, 10);
    if (errno || end == name + 5 || *end != '\0') return 0;
    *step_p = v;
    return 1;
}

static int cmp_u64_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The complete checkpoint steps under root, newest first. */
static gt_status_t list_steps(const char *root, uint64_t **steps_p, size_t *n_p)
{
    DIR *d = opendir(root);
    if (!d) {
        *steps_p = NULL;
        *n_p = 0;
        return errno == ENOENT ? GT_OK : GT_ERR_IO;
    }
    size_t n = 0, cap = 16;
    uint64_t *v = malloc(cap * sizeof *v);
    struct dirent *de;
    while (v && (de = readdir(d))) {
        uint64_t s;
        if (!parse_step(de->d_name, &s)) continue;
        if (n == cap) {
            uint64_t *nv = realloc(v, 2 * cap * sizeof *v);
            if (!nv) {
                free(v);
                v = NULL;
                break;
            }
            v = nv;
            cap *= 2;
        }
        v[n++] = s;
    }
    closedir(d);
    if (!v) return GT_ERR_NOMEM;
    qsort(v, n, sizeof *v, cmp_u64_desc);
    *steps_p = v;
    *n_p = n;
    return GT_OK;
}

gt_status_t gt_local_ckpt_latest(const char *root, char *path_p, size_t n)
{
    uint64_t *steps = NULL;
    size_t count = 0;
    gt_status_t s = list_steps(root, &steps, &count);
    if (s != GT_OK) {
        GT_ERROR("cannot list checkpoints in %s: %s", root, strerror(errno));
        return s;
    }
    if (count == 0) {
        free(steps);
        return GT_ERR_NOT_FOUND;
    }
    snprintf(path_p, n, "%s/step-%08" PRIu64, root, steps[0]);
    free(steps);
    return GT_OK;
}

static json_t *pos_json(const gt_local_data_pos_t *pos)
{
    char rng[4][17];
    for (int i = 0; i < 4; i++) snprintf(rng[i], sizeof rng[i], "%016" PRIx64, pos->rng[i]);
    return json_pack("{s:I, s:I, s:[s,s,s,s]}", "epoch", (json_int_t)pos->epoch, "index",
                     (json_int_t)pos->index, "rng", rng[0], rng[1], rng[2], rng[3]);
}

#define POS_WORDS 6 /* epoch, index, rng[4] */

/* Every rank's data position, gathered on every rank: ranks * POS_WORDS words. */
static gt_status_t gather_positions(const gt_local_trainer_t *tr, uint64_t *all)
{
    int R = gt_local_comm_size(tr->comm), me = gt_local_comm_rank(tr->comm);
    gt_local_data_pos_t pos;
    gt_local_data_get_pos(tr->data, &pos);
    memset(all, 0, (size_t)R * POS_WORDS * sizeof *all);
    uint64_t *w = all + (size_t)me * POS_WORDS;
    w[0] = pos.epoch;
    w[1] = pos.index;
    memcpy(w + 2, pos.rng, sizeof pos.rng);
    return gt_local_comm_allreduce(tr->comm, all, (size_t)R * POS_WORDS, GT_COMM_U64, GT_COMM_SUM);
}

static json_t *state_json(const gt_local_trainer_t *tr, const uint64_t *rank_pos)
{
    gt_local_data_pos_t pos;
    gt_local_data_get_pos(tr->data, &pos);
    char rng[4][17];
    for (int i = 0; i < 4; i++) snprintf(rng[i], sizeof rng[i], "%016" PRIx64, pos.rng[i]);
    json_t *cfg = json_loads(tr->config_json, 0, NULL);
    json_t *ranks = json_array();
    for (int r = 0; rank_pos && r < gt_local_comm_size(tr->comm); r++) {
        const uint64_t *w = rank_pos + (size_t)r * POS_WORDS;
        gt_local_data_pos_t p = {w[0], w[1], {w[2], w[3], w[4], w[5]}};
        json_array_append_new(ranks, pos_json(&p));
    }
    json_t *o = json_pack(
        "{s:s, s:i, s:I, s:I, s:I, s:I, s:f, s:o, s:s, s:i,"
        " s:{s:I, s:I, s:[s,s,s,s]}, s:s, s:o}",
        "format", STATE_FORMAT, "version", STATE_VERSION, "step", (json_int_t)tr->step, "round",
        (json_int_t)(tr->step / tr->cfg->inner.steps), "total_steps", (json_int_t)tr->total_steps,
        "tokens", (json_int_t)tr->tokens, "elapsed_s", tr->elapsed_s, "loss",
        isfinite(tr->last_loss) ? json_real(tr->last_loss) : json_null(), "site",
        tr->cfg->sites[tr->site].name, "rank", (int)tr->rank, "data", "epoch",
        (json_int_t)pos.epoch, "index", (json_int_t)pos.index, "rng", rng[0], rng[1], rng[2],
        rng[3], "config_hash", tr->hash, "config", cfg ? cfg : json_null());
    /* A multi-rank site: every rank's data position, by rank (the "data" above is rank 0's). */
    if (o && json_array_size(ranks)) json_object_set(o, "rank_data", ranks);
    /* where the AdamW moments started (a joiner's, or moved by outer.catch_up's skipped steps) */
    if (o && tr->adam_from)
        json_object_set_new(o, "adam_from", json_integer((json_int_t)tr->adam_from));
    json_decref(ranks);
    return o;
}

static gt_status_t save_files(gt_local_trainer_t *tr, const char *root, unsigned keep,
                              const uint64_t *rank_pos);

/* Tensor parallel: the full arenas assembled in the I/O model (collective over the TP group). */
static gt_status_t gather_io(gt_local_trainer_t *tr)
{
    gt_gpt_t *io = NULL;
    gt_status_t s = gt_local_trainer_io_model(tr, &io);
    static const gt_gpt_arena_t which[3] = {GT_GPT_PARAMS, GT_GPT_ADAM_M, GT_GPT_ADAM_V};
    for (int a = 0; a < 3 && s == GT_OK && io != tr->gpt; a++)
        s = gt_local_trainer_gather(tr, which[a], gt_gpt_arena(io, which[a]));
    return s;
}

gt_status_t gt_local_trainer_save(gt_local_trainer_t *tr, const char *root, unsigned keep)
{
    if (gt_local_comm_size(tr->comm) <= 1) return save_files(tr, root, keep, NULL);
    /* A multi-rank site: the replicas hold the same model, so rank 0 writes it, with every
     * rank's data position; the others learn the outcome from it. */
    int R = gt_local_comm_size(tr->comm);
    uint64_t *all = malloc((size_t)R * POS_WORDS * sizeof *all);
    if (!all) return GT_ERR_NOMEM;
    gt_status_t s = gather_positions(tr, all);
    if (s == GT_OK && tr->dp_rank == 0) s = gather_io(tr); /* replica 0 holds what rank 0 writes */
    if (s != GT_OK) {
        free(all);
        return s;
    }
    int32_t result = 0;
    if (gt_local_comm_rank(tr->comm) == 0) result = (int32_t)save_files(tr, root, keep, all);
    free(all);
    s = gt_local_comm_bcast(tr->comm, &result, sizeof result, 0);
    return s != GT_OK ? s : (gt_status_t)result;
}

static gt_status_t save_files(gt_local_trainer_t *tr, const char *root, unsigned keep,
                              const uint64_t *rank_pos)
{
    gt_status_t s = GT_OK;
    char *dir = NULL, *tmp = NULL, *file = NULL, *text = NULL;
    json_t *state = NULL;
    uint64_t *steps = NULL;
    size_t count = 0, plen = strlen(root) + 64;
    dir = malloc(plen);
    tmp = malloc(plen);
    file = malloc(plen + 32);
    GT_REQUIRE_GOTO(dir && tmp && file, s, GT_ERR_NOMEM, out, "out of memory");
    snprintf(dir, plen, "%s/step-%08" PRIu64, root, tr->step);
    snprintf(tmp, plen, "%s.tmp", dir);
    GT_CHECK_GOTO(gt_mkdirs(root), s, out);
    struct stat sb;
    if (stat(dir, &sb) == 0) { /* this step is saved already (e.g. stopped right after resume) */
        GT_DEBUG("checkpoint %s exists; not rewriting it", dir);
        goto out;
    }
    gt_rmtree(tmp); /* a leftover of a crash */
    GT_CHECK_GOTO(gt_mkdirs(tmp), s, out);

    snprintf(file, plen + 32, "%s/model.safetensors", tmp);
    gt_local_arena_ref_t params = {GT_GPT_PARAMS, ""};
    gt_gpt_t *io = NULL; /* the model, or its full-size assembly under tensor parallelism */
    GT_CHECK_GOTO(gt_local_trainer_io_model(tr, &io), s, out);
    GT_CHECK_GOTO(gt_local_gpt_save(io, &params, 1, NULL, 0, file), s, out);
    snprintf(file, plen + 32, "%s/optimizer.safetensors", tmp);
    gt_local_arena_ref_t moments[2] = {{GT_GPT_ADAM_M, "m."}, {GT_GPT_ADAM_V, "v."}};
    GT_CHECK_GOTO(gt_local_gpt_save(io, moments, 2, NULL, 0, file), s, out);
    state = state_json(tr, rank_pos);
    GT_REQUIRE_GOTO(state, s, GT_ERR_NOMEM, out, "out of memory");
    json_t *files = NULL; /* read back from disk: what resume will find, not what we meant */
    GT_CHECK_GOTO(files_json(tmp, &files), s, out);
    GT_REQUIRE_GOTO(json_object_set_new(state, "files", files) == 0, s, GT_ERR_NOMEM, out,
                    "out of memory");
    char digest[33];
    GT_REQUIRE_GOTO(state_digest(state, digest) == 0 &&
                        json_object_set_new(state, "state_xxh3", json_string(digest)) == 0,
                    s, GT_ERR_NOMEM, out, "out of memory");
    text = json_dumps(state, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    GT_REQUIRE_GOTO(text, s, GT_ERR_NOMEM, out, "out of memory");
    snprintf(file, plen + 32, "%s/state.json", tmp);
    GT_CHECK_GOTO(gt_write_file_atomic(file, text, strlen(text), 0), s, out);
    GT_CHECK_GOTO(gt_fsync_dir(tmp), s, out);
    GT_REQUIRE_GOTO(rename(tmp, dir) == 0, s, GT_ERR_IO, out, "rename %s -> %s: %s", tmp, dir,
                    strerror(errno));
    GT_CHECK_GOTO(gt_fsync_dir(root), s, out);

    /* Keep the newest `keep` checkpoints. */
    GT_CHECK_GOTO(list_steps(root, &steps, &count), s, out);
    for (size_t i = keep ? keep : 1; i < count; i++) {
        snprintf(file, plen + 32, "%s/step-%08" PRIu64, root, steps[i]);
        gt_rmtree(file);
    }
out:
    if (s != GT_OK && tmp) gt_rmtree(tmp);
    free(steps);
    free(text);
    json_decref(state);
    free(dir);
    free(tmp);
    free(file);
    return s;
}

/* Lists the settings that differ between two config objects, for the resume error. */
static void explain_diff(json_t *was, json_t *now)
{
    const char *sec;
    json_t *a;
    json_object_foreach(now, sec, a)
    {
        json_t *b = json_object_get(was, sec);
        if (json_equal(a, b)) continue;
        if (!json_is_object(a) || !json_is_object(b)) {
            GT_ERROR("  %s differs", sec);
            continue;
        }
        const char *key;
        json_t *v;
        json_object_foreach(a, key, v)
        {
            json_t *w = json_object_get(b, key);
            if (json_equal(v, w)) continue;
            char *x = w ? json_dumps(w, JSON_ENCODE_ANY) : NULL,
                 *y = json_dumps(v, JSON_ENCODE_ANY);
            GT_ERROR("  %s.%s: checkpoint %s, now %s", sec, key, x ? x : "(absent)", y ? y : "?");
            free(x);
            free(y);
        }
    }
}

static gt_status_t parse_hex64(const char *s, uint64_t *v_p)
{
    char *end = NULL;
    if (!s || strlen(s) != 16) return GT_ERR_CORRUPT;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 16);
    if (errno || *end) return GT_ERR_CORRUPT;
    *v_p = v;
    return GT_OK;
}

/* Loads one checkpoint folder. GT_ERR_CONFIG: made under other settings; GT_ERR_CORRUPT: the
 * folder fails a check (the reason is logged); anything else is this machine's trouble. */
static gt_status_t resume_from(gt_local_trainer_t *tr, const char *dir, int load)
{
    char file[4200];
    gt_status_t s = GT_OK;
    json_t *state = NULL, *now = NULL;
    gt_local_st_t *st = NULL;
    json_error_t jerr;
    snprintf(file, sizeof file, "%s/state.json", dir);
    state = json_load_file(file, JSON_REJECT_DUPLICATES, &jerr);
    GT_REQUIRE_GOTO(state, s, GT_ERR_CORRUPT, out, "%s: %s (line %d)", file, jerr.text, jerr.line);
    json_int_t step = 0, tokens = 0, epoch = 0, index = 0, version = 0;
    double elapsed = 0;
    json_t *loss = NULL; /* a number, or null when the loss was not finite */
    const char *hash = NULL, *fmt = NULL, *r[4] = {NULL, NULL, NULL, NULL};
    json_t *cfg = NULL;
    int bad = json_unpack_ex(
        state, &jerr, 0, "{s:s, s:I, s:I, s:I, s:F, s:o, s:{s:I, s:I, s:[ssss]}, s:s, s:o}",
        "format", &fmt, "version", &version, "step", &step, "tokens", &tokens, "elapsed_s",
        &elapsed, "loss", &loss, "data", "epoch", &epoch, "index", &index, "rng", &r[0], &r[1],
        &r[2], &r[3], "config_hash", &hash, "config", &cfg);
    GT_REQUIRE_GOTO(!bad && strcmp(fmt, STATE_FORMAT) == 0 && version >= 1 &&
                        version <= STATE_VERSION && step >= 0 && tokens >= 0 && epoch >= 0 &&
                        index >= 0,
                    s, GT_ERR_CORRUPT, out, "%s: not a geotrain checkpoint state (%s)", file,
                    bad ? jerr.text : "wrong format, version or a negative counter");
    if (version >= 3) {
        char digest[33];
        const char *want = json_string_value(json_object_get(state, "state_xxh3"));
        GT_REQUIRE_GOTO(state_digest(state, digest) == 0, s, GT_ERR_NOMEM, out, "out of memory");
        GT_REQUIRE_GOTO(want && strcmp(want, digest) == 0, s, GT_ERR_CORRUPT, out,
                        "%s: checksum mismatch (the file changed after it was written: its "
                        "state_xxh3 %s, its content %s)",
                        file, want ? want : "missing", digest);
    }
    /* The folder's name is the step it holds, and the step is within the run: a folder
     * copied or renamed to a larger step would otherwise be taken as the newest. */
    const char *base = strrchr(dir, '/');
    uint64_t named = 0;
    GT_REQUIRE_GOTO(parse_step(base ? base + 1 : dir, &named) && named == (uint64_t)step, s,
                    GT_ERR_CORRUPT, out, "%s: holds step %lld, not the step its folder names", file,
                    (long long)step);
    GT_REQUIRE_GOTO(!tr->total_steps || (uint64_t)step <= tr->total_steps, s, GT_ERR_CORRUPT, out,
                    "%s: step %lld is beyond the run's last step (%llu)", file, (long long)step,
                    (unsigned long long)tr->total_steps);
    if (strcmp(hash, tr->hash) != 0) {
        GT_ERROR("%s: the checkpoint was made under different settings (config hash %s, now %s):",
                 dir, hash, tr->hash);
        now = json_loads(tr->config_json, 0, NULL);
        if (now) explain_diff(cfg, now);
        s = GT_ERR_CONFIG;
        goto out;
    }
    if (version >= 2)
        GT_CHECK_GOTO(verify_files(dir, json_object_get(state, "files")), s, out);
    else
        GT_WARN("%s: a version-1 checkpoint has no checksums; its files are loaded unchecked", dir);
    if (!load) goto out; /* checked only */
    json_t *rank_data = json_object_get(state, "rank_data");
    int R = gt_local_comm_size(tr->comm);
    size_t saved_ranks = rank_data ? json_array_size(rank_data) : 1;
    GT_REQUIRE_GOTO(saved_ranks == (size_t)R, s, GT_ERR_CONFIG, out,
                    "%s: the checkpoint was written by a site of %zu rank(s); resume it with the "
                    "same number (this job has %d)",
                    file, saved_ranks, R);
    if (rank_data) {
        json_int_t e = -1, ix = -1;
        bad = json_unpack_ex(json_array_get(rank_data, (size_t)gt_local_comm_rank(tr->comm)), &jerr,
                             0, "{s:I, s:I, s:[ssss]}", "epoch", &e, "index", &ix, "rng", &r[0],
                             &r[1], &r[2], &r[3]);
        GT_REQUIRE_GOTO(!bad && e >= 0 && ix >= 0, s, GT_ERR_CORRUPT, out,
                        "%s: bad rank_data entry for rank %d", file, gt_local_comm_rank(tr->comm));
        epoch = e;
        index = ix;
    }
    gt_local_data_pos_t pos = {(uint64_t)epoch, (uint64_t)index, {0, 0, 0, 0}};
    for (int i = 0; i < 4; i++)
        GT_REQUIRE_GOTO(parse_hex64(r[i], &pos.rng[i]) == GT_OK, s, GT_ERR_CORRUPT, out,
                        "%s: bad generator state '%s'", file, r[i]);
    GT_CHECK_GOTO(gt_local_data_set_pos(tr->data, &pos), s, out);

    gt_gpt_t *io = NULL; /* the model, or a full-size one whose shard we take (TP) */
    GT_CHECK_GOTO(gt_local_trainer_io_model(tr, &io), s, out);
    snprintf(file, sizeof file, "%s/model.safetensors", dir);
    GT_CHECK_GOTO(gt_local_st_open(file, &st), s, out);
    GT_CHECK_GOTO(gt_local_gpt_load(io, GT_GPT_PARAMS, st, ""), s, out);
    gt_local_st_close(st);
    st = NULL;
    snprintf(file, sizeof file, "%s/optimizer.safetensors", dir);
    GT_CHECK_GOTO(gt_local_st_open(file, &st), s, out);
    GT_CHECK_GOTO(gt_local_gpt_load(io, GT_GPT_ADAM_M, st, "m."), s, out);
    GT_CHECK_GOTO(gt_local_gpt_load(io, GT_GPT_ADAM_V, st, "v."), s, out);
    if (io != tr->gpt) {
        static const gt_gpt_arena_t which[3] = {GT_GPT_PARAMS, GT_GPT_ADAM_M, GT_GPT_ADAM_V};
        for (int a = 0; a < 3; a++)
            GT_CHECK_GOTO(gt_local_trainer_scatter(tr, which[a], gt_gpt_arena(io, which[a])), s,
                          out);
    }
    tr->step = (uint64_t)step;
    json_t *af = json_object_get(state, "adam_from"); /* absent: the moments began at step 0 */
    tr->adam_from = json_is_integer(af) && json_integer_value(af) > 0 &&
                            (uint64_t)json_integer_value(af) <= tr->step
                        ? (uint64_t)json_integer_value(af)
                        : 0;
    tr->tokens = (uint64_t)tokens;
    tr->elapsed_s = elapsed;
    tr->last_loss = json_is_number(loss) ? (float)json_number_value(loss) : NAN;
    GT_INFO("resumed from %s (step %llu)", dir, (unsigned long long)step);
out:
    gt_local_st_close(st);
    json_decref(now);
    json_decref(state);
    return s;
}

gt_status_t gt_local_trainer_resume(gt_local_trainer_t *tr, const char *root)
{
    uint64_t *steps = NULL;
    size_t count = 0;
    gt_status_t s = list_steps(root, &steps, &count);
    if (s != GT_OK) {
        GT_ERROR("cannot list checkpoints in %s: %s", root, strerror(errno));
        return s;
    }
    if (count == 0) s = GT_ERR_NOT_FOUND;
    /* Newest first; a corrupt one is skipped. Every rank of a site reads the same folders and
     * reaches the same verdicts, so the ranks resume from the same step. */
    for (size_t i = 0; i < count; i++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/step-%08" PRIu64, root, steps[i]);
        s = resume_from(tr, dir, 1);
        if (s != GT_ERR_CORRUPT) break;
        if (i + 1 < count)
            GT_WARN("checkpoint %s is unusable (above); falling back to the previous one, "
                    "step %" PRIu64,
                    dir, steps[i + 1]);
        else
            GT_ERROR("no intact checkpoint under %s (%zu tried)", root, count);
    }
    free(steps);
    return s;
}

gt_status_t gt_local_trainer_resume_step(gt_local_trainer_t *tr, const char *root, uint64_t step)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/step-%08" PRIu64, root, step);
    return resume_from(tr, dir, 1);
}

gt_status_t gt_local_trainer_ckpt_steps(gt_local_trainer_t *tr, const char *root, uint64_t *steps_p,
                                        size_t cap, size_t *n_p)
{
    uint64_t *steps = NULL;
    size_t count = 0, n = 0;
    gt_status_t s = list_steps(root, &steps, &count);
    if (s != GT_OK) {
        GT_ERROR("cannot list checkpoints in %s: %s", root, strerror(errno));
        return s;
    }
    for (size_t i = 0; i < count && n < cap; i++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/step-%08" PRIu64, root, steps[i]);
        s = resume_from(tr, dir, 0);
        if (s == GT_OK)
            steps_p[n++] = steps[i];
        else if (s == GT_ERR_CORRUPT || s == GT_ERR_CONFIG)
            GT_WARN("checkpoint %s is unusable (above)%s", dir,
                    i + 1 < count ? "; the previous one is tried" : "");
        else
            break;
    }
    free(steps);
    if (s != GT_OK && s != GT_ERR_CORRUPT && s != GT_ERR_CONFIG) return s;
    *n_p = n;
    return GT_OK;
}
