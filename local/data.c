/* data.c — the training data of one rank: text bytes, llm.c token shards, or the synthetic
 * Markov corpus, cut into disjoint shares.
 *
 * Every source becomes a list of segments (one per file; one for the synthetic corpus) of
 * 8- or 16-bit tokens, mapped read-only. A segment of n tokens holds (n − 1) / (B·T) windows;
 * window k is tokens [k·B·T, (k+1)·B·T] (B·T + 1 tokens, so the targets of the last input
 * come from the same segment). Windows are numbered across segments; worker w of W owns
 * windows w, w + W, ... (the same count per worker), which makes the shares disjoint,
 * deterministic and spread over the whole corpus. Each epoch walks a worker's windows in an
 * order drawn by a per-worker xoshiro generator; the generator's state at the start of the
 * epoch and the batch index are the whole data position, so resume is exact.
 */
#include "gt_local.h"
#include "local_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    const uint8_t *tokens; /* esize bytes per token */
    size_t n;              /* tokens */
    int esize;             /* 1 (text bytes) or 2 (uint16 tokens) */
    void *map;             /* the mapping to unmap, or NULL */
    size_t map_len;
    char *name; /* for messages */
} segment_t;

struct gt_local_data {
    gt_local_data_params_t p;
    segment_t *segs;
    size_t n_segs;
    size_t *first_window; /* n_segs + 1 cumulative window counts */
    size_t per_worker;    /* windows per worker per epoch */
    uint32_t *order;      /* this epoch's window order, per_worker entries */
    gt_local_data_pos_t pos;
    uint64_t rng[4]; /* after drawing this epoch's order */
    uint16_t *synthetic;
    size_t total_tokens;
};

double gt_local_synthetic_entropy_rate(uint32_t branching)
{
    return log((double)branching);
}

gt_status_t gt_local_synthetic_generate(uint32_t vocab, uint32_t branching, uint64_t seed, size_t n,
                                        uint16_t *out)
{
    if (vocab == 0 || vocab > 65536 || branching == 0 || branching > vocab) {
        GT_ERROR("synthetic corpus: need 1 <= branching (%u) <= vocab (%u) <= 65536", branching,
                 vocab);
        return GT_ERR_INVALID;
    }
    uint16_t *succ = malloc((size_t)vocab * branching * sizeof *succ);
    uint16_t *perm = malloc((size_t)vocab * sizeof *perm);
    if (!succ || !perm) {
        free(succ);
        free(perm);
        return GT_ERR_NOMEM;
    }
    uint64_t rng[4];
    gt_local_rng_seed(rng, seed);
    for (uint32_t a = 0; a < vocab; a++) {
        for (uint32_t i = 0; i < vocab; i++) perm[i] = (uint16_t)i;
        for (uint32_t j = 0; j < branching; j++) { /* partial Fisher–Yates */
            uint32_t r = j + (uint32_t)gt_local_rng_below(rng, vocab - j);
            uint16_t t = perm[j];
            perm[j] = perm[r];
            perm[r] = t;
            succ[(size_t)a * branching + j] = perm[j];
        }
    }
    uint32_t x = (uint32_t)gt_local_rng_below(rng, vocab);
    for (size_t t = 0; t < n; t++) {
        out[t] = (uint16_t)x;
        x = succ[(size_t)x * branching + gt_local_rng_below(rng, branching)];
    }
    free(succ);
    free(perm);
    return GT_OK;
}

gt_status_t gt_local_shard_write(const char *path, const uint16_t *tokens, size_t n)
{
    if (n > INT32_MAX) return GT_ERR_OVERFLOW;
    int32_t hdr[GT_LOCAL_SHARD_HEADER] = {0};
    hdr[0] = GT_LOCAL_SHARD_MAGIC;
    hdr[1] = GT_LOCAL_SHARD_VERSION;
    hdr[2] = (int32_t)n;
    gt_afile_t *af = NULL;
    gt_status_t st = gt_afile_open(path, 0644, 0, &af);
    if (st != GT_OK) return st;
    st = gt_afile_write(af, hdr, sizeof hdr);
    if (st == GT_OK) st = gt_afile_write(af, tokens, n * sizeof *tokens);
    if (st != GT_OK) {
        gt_afile_abort(af);
        return st;
    }
    return gt_afile_commit(af);
}

/* Maps a whole file read-only. */
static gt_status_t map_file(const char *path, void **map_p, size_t *len_p)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        GT_ERROR("cannot open %s: %s", path, strerror(errno));
        return errno == ENOENT ? GT_ERR_NOT_FOUND : GT_ERR_IO;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        GT_ERROR("%s: not a regular file", path);
        close(fd);
        return GT_ERR_IO;
    }
    void *map = NULL;
    if (sb.st_size > 0) {
        map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            GT_ERROR("cannot map %s: %s", path, strerror(errno));
            close(fd);
            return GT_ERR_IO;
        }
    }
    close(fd);
    *map_p = map;
    *len_p = (size_t)sb.st_size;
    return GT_OK;
}

/* Validates an llm.c shard header against the file size. */
static gt_status_t check_shard(const char *path, const void *map, size_t len, size_t *count_p)
{
    const size_t hbytes = GT_LOCAL_SHARD_HEADER * sizeof(int32_t);
    if (len < hbytes) {
        GT_ERROR("%s: truncated token shard: %zu bytes, shorter than the %zu-byte header", path,
                 len, hbytes);
        return GT_ERR_CORRUPT;
    }
    int32_t h[3];
    memcpy(h, map, sizeof h);
    if (h[0] != GT_LOCAL_SHARD_MAGIC) {
        GT_ERROR("%s: not an llm.c token shard: magic %d, expected %d", path, h[0],
                 GT_LOCAL_SHARD_MAGIC);
        return GT_ERR_CORRUPT;
    }
    if (h[1] != GT_LOCAL_SHARD_VERSION) {
        GT_ERROR("%s: token shard version %d; only version %d (uint16 tokens) is supported", path,
                 h[1], GT_LOCAL_SHARD_VERSION);
        return GT_ERR_CORRUPT;
    }
    if (h[2] < 0 || (size_t)h[2] != (len - hbytes) / 2 || (len - hbytes) % 2 != 0) {
        GT_ERROR("%s: header says %d tokens (%zu bytes) but the file holds %zu bytes after the "
                 "header",
                 path, h[2], h[2] < 0 ? 0 : 2 * (size_t)h[2], len - hbytes);
        return GT_ERR_CORRUPT;
    }
    *count_p = (size_t)h[2];
    return GT_OK;
}

gt_status_t gt_local_shard_read_prefix(const char *path, size_t n, int32_t *out)
{
    void *map = NULL;
    size_t len = 0, count = 0;
    gt_status_t st = map_file(path, &map, &len);
    if (st != GT_OK) return st;
    st = check_shard(path, map, len, &count);
    if (st == GT_OK && count < n) {
        GT_ERROR("%s: %zu tokens, %zu needed", path, count, n);
        st = GT_ERR_INVALID;
    }
    if (st == GT_OK) {
        const uint16_t *tok = (const uint16_t *)((const int32_t *)map + GT_LOCAL_SHARD_HEADER);
        for (size_t i = 0; i < n; i++) out[i] = tok[i];
    }
    if (map) munmap(map, len);
    return st;
}

void gt_local_data_destroy(gt_local_data_t *d)
{
    if (!d) return;
    for (size_t i = 0; i < d->n_segs; i++) {
        if (d->segs[i].map) munmap(d->segs[i].map, d->segs[i].map_len);
        free(d->segs[i].name);
    }
    free(d->segs);
    free(d->first_window);
    free(d->order);
    free(d->synthetic);
    free((char *)d->p.path);
    free(d);
}

static gt_status_t add_file(gt_local_data_t *d, const char *path)
{
    void *map = NULL;
    size_t len = 0;
    gt_status_t st = map_file(path, &map, &len);
    if (st != GT_OK) return st;
    segment_t s = {map, len, 1, map, len, strdup(path)};
    if (d->p.kind == GT_DATA_SHARDS) {
        st = check_shard(path, map, len, &s.n);
        if (st == GT_OK) s.tokens = (const uint8_t *)map + GT_LOCAL_SHARD_HEADER * sizeof(int32_t);
        s.esize = 2;
    }
    segment_t *ns = realloc(d->segs, (d->n_segs + 1) * sizeof *ns);
    if (st == GT_OK && (!ns || !s.name)) st = GT_ERR_NOMEM;
    if (ns) d->segs = ns;
    if (st != GT_OK) {
        if (map) munmap(map, len);
        free(s.name);
        return st;
    }
    d->segs[d->n_segs++] = s;
    return GT_OK;
}

/* Draws the order of the current epoch from d->pos.rng. */
static void draw_order(gt_local_data_t *d)
{
    memcpy(d->rng, d->pos.rng, sizeof d->rng);
    for (size_t i = 0; i < d->per_worker; i++) d->order[i] = (uint32_t)i;
    for (size_t i = d->per_worker; i > 1; i--) {
        size_t j = (size_t)gt_local_rng_below(d->rng, i);
        uint32_t t = d->order[i - 1];
        d->order[i - 1] = d->order[j];
        d->order[j] = t;
    }
}

gt_status_t gt_local_data_create(const gt_local_data_params_t *params, gt_local_data_t **data_p)
{
    gt_status_t st = GT_OK;
    glob_t g = {0};
    int globbed = 0;
    gt_local_data_t *d = calloc(1, sizeof *d);
    if (!d) return GT_ERR_NOMEM;
    d->p = *params;
    d->p.path = params->path ? strdup(params->path) : NULL;
    const size_t BT = params->batch_size * params->seq_len;
    GT_REQUIRE_GOTO(BT > 0 && params->workers > 0 && params->worker < params->workers &&
                        params->vocab_size > 0 && params->vocab_size <= 65536,
                    st, GT_ERR_INVALID, out,
                    "data: bad parameters (B·T %zu, worker %u of %u, vocab %u)", BT, params->worker,
                    params->workers, params->vocab_size);
    if (params->kind == GT_DATA_SYNTHETIC) {
        size_t n = (size_t)params->synthetic_tokens;
        GT_REQUIRE_GOTO(n > 0 && params->synthetic_branching > 0 &&
                            params->synthetic_branching <= params->vocab_size,
                        st, GT_ERR_INVALID, out,
                        "data: synthetic corpus needs tokens > 0 and 1 <= branching (%u) <= "
                        "vocab_size (%u)",
                        params->synthetic_branching, params->vocab_size);
        d->synthetic = malloc(n * sizeof *d->synthetic);
        d->segs = calloc(1, sizeof *d->segs);
        GT_REQUIRE_GOTO(d->synthetic && d->segs, st, GT_ERR_NOMEM, out,
                        "data: out of memory for %zu synthetic tokens", n);
        uint64_t s = params->seed ^ 0x53594e5448455449ull; /* "SYNTHETI" */
        GT_CHECK_GOTO(gt_local_synthetic_generate(params->vocab_size, params->synthetic_branching,
                                                  gt_local_splitmix64(&s), n, d->synthetic),
                      st, out);
        d->segs[0] = (segment_t){(const uint8_t *)d->synthetic, n, 2, NULL, 0, strdup("synthetic")};
        d->n_segs = 1;
    } else {
        GT_REQUIRE_GOTO(d->p.path && d->p.path[0], st, GT_ERR_INVALID, out,
                        "data: data.path is empty");
        GT_REQUIRE_GOTO(
            params->kind == GT_DATA_SHARDS || params->vocab_size >= 256, st, GT_ERR_INVALID, out,
            "data: byte-level text needs vocab_size >= 256 (it is %u)", params->vocab_size);
        int rc = glob(d->p.path, GLOB_BRACE | GLOB_ERR, NULL, &g);
        globbed = 1;
        GT_REQUIRE_GOTO(rc == 0 && g.gl_pathc > 0, st, GT_ERR_NOT_FOUND, out,
                        "data: no file matches data.path '%s'", d->p.path);
        for (size_t i = 0; i < g.gl_pathc; i++) GT_CHECK_GOTO(add_file(d, g.gl_pathv[i]), st, out);
    }
    d->first_window = calloc(d->n_segs + 1, sizeof *d->first_window);
    GT_REQUIRE_GOTO(d->first_window, st, GT_ERR_NOMEM, out, "out of memory");
    for (size_t i = 0; i < d->n_segs; i++) {
        size_t n = d->segs[i].n;
        d->first_window[i + 1] = d->first_window[i] + (n > 0 ? (n - 1) / BT : 0);
        d->total_tokens += n;
    }
    d->per_worker = d->first_window[d->n_segs] / params->workers;
    GT_REQUIRE_GOTO(d->per_worker > 0 && d->per_worker <= UINT32_MAX, st, GT_ERR_INVALID, out,
                    "data: the corpus (%zu tokens in %zu files) holds %zu windows of B·T+1 = %zu "
                    "tokens; %u workers need at least one each",
                    d->total_tokens, d->n_segs, d->first_window[d->n_segs], BT + 1,
                    params->workers);
    d->order = malloc(d->per_worker * sizeof *d->order);
    GT_REQUIRE_GOTO(d->order, st, GT_ERR_NOMEM, out, "out of memory");
    uint64_t s = params->seed ^ (0x4f52444552ull << 20) ^ params->worker; /* "ORDER" */
    gt_local_rng_seed(d->pos.rng, gt_local_splitmix64(&s));
    draw_order(d);
out:
    if (globbed) globfree(&g);
    if (st != GT_OK) {
        gt_local_data_destroy(d);
        return st;
    }
    *data_p = d;
    return GT_OK;
}

gt_status_t gt_local_data_next(gt_local_data_t *d, int32_t *inputs, int32_t *targets)
{
    if (d->pos.index == d->per_worker) { /* next epoch, from where the generator stands */
        d->pos.epoch++;
        d->pos.index = 0;
        memcpy(d->pos.rng, d->rng, sizeof d->rng);
        draw_order(d);
    }
    size_t w = d->p.worker + (size_t)d->order[d->pos.index] * d->p.workers;
    size_t lo = 0, hi = d->n_segs; /* segment s with first_window[s] <= w < first_window[s+1] */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (d->first_window[mid] <= w)
            lo = mid;
        else
            hi = mid;
    }
    const segment_t *s = &d->segs[lo];
    const size_t BT = d->p.batch_size * d->p.seq_len, start = (w - d->first_window[lo]) * BT;
    for (size_t i = 0; i <= BT; i++) {
        size_t k = start + i;
        unsigned tok;
        if (s->esize == 1) {
            tok = s->tokens[k];
        } else {
            uint16_t v;
            memcpy(&v, s->tokens + 2 * k, 2);
            tok = v;
        }
        if (tok >= d->p.vocab_size) {
            GT_ERROR("%s: token %u at position %zu is outside the vocabulary (%u)", s->name, tok, k,
                     d->p.vocab_size);
            return GT_ERR_CORRUPT;
        }
        if (i < BT) inputs[i] = (int32_t)tok;
        if (i > 0) targets[i - 1] = (int32_t)tok;
    }
    d->pos.index++;
    return GT_OK;
}

void gt_local_data_get_pos(const gt_local_data_t *d, gt_local_data_pos_t *pos_p)
{
    *pos_p = d->pos;
}

gt_status_t gt_local_data_set_pos(gt_local_data_t *d, const gt_local_data_pos_t *pos)
{
    if (pos->index > d->per_worker) {
        GT_ERROR("data: position %llu is beyond the %zu batches of an epoch",
                 (unsigned long long)pos->index, d->per_worker);
        return GT_ERR_INVALID;
    }
    d->pos = *pos;
    draw_order(d);
    return GT_OK;
}

size_t gt_local_data_tokens(const gt_local_data_t *d)
{
    return d->total_tokens;
}

size_t gt_local_data_batches_per_epoch(const gt_local_data_t *d)
{
    return d->per_worker;
}
