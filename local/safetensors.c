/* safetensors.c — reading and writing the safetensors format (Hugging Face).
 *
 * Layout: u64 little-endian N, then N bytes of JSON, then the data area. The JSON maps each
 * tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (relative to the data area)
 * and may hold "__metadata__" (string → string). The reader treats the file as hostile: the
 * header length, every offset and every shape product are checked against the file before
 * anything is allocated from them, and tensor data is read with pread only when asked for, so
 * a 500 MB GPT-2 file costs its header until then. JSON goes through jansson. The host is
 * assumed little-endian, like the format (x86-64 and aarch64).
 */
#include "gt_local.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    gt_local_st_info_t info;
    uint64_t begin; /* absolute file offset */
} st_tensor_t;

struct gt_local_st {
    int fd;
    char *path;
    json_t *meta;
    size_t n;
    st_tensor_t *t;
};

static const struct {
    const char *name;
    size_t size;
    gt_local_st_dtype_t dtype;
} dtypes[] = {
    {"F32", 4, GT_LOCAL_ST_F32},       {"BF16", 2, GT_LOCAL_ST_BF16},
    {"F16", 2, GT_LOCAL_ST_F16},       {"F64", 8, GT_LOCAL_ST_OTHER},
    {"I64", 8, GT_LOCAL_ST_OTHER},     {"I32", 4, GT_LOCAL_ST_OTHER},
    {"I16", 2, GT_LOCAL_ST_OTHER},     {"I8", 1, GT_LOCAL_ST_OTHER},
    {"U8", 1, GT_LOCAL_ST_OTHER},      {"U16", 2, GT_LOCAL_ST_OTHER},
    {"U32", 4, GT_LOCAL_ST_OTHER},     {"U64", 8, GT_LOCAL_ST_OTHER},
    {"BOOL", 1, GT_LOCAL_ST_OTHER},    {"F8_E4M3", 1, GT_LOCAL_ST_OTHER},
    {"F8_E5M2", 1, GT_LOCAL_ST_OTHER},
};

static int pread_all(int fd, void *buf, size_t len, uint64_t off)
{
    char *p = buf;
    while (len > 0) {
        ssize_t r = pread(fd, p, len, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r;
        len -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

static int cmp_begin(const void *a, const void *b)
{
    const st_tensor_t *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : strcmp(x->info.name, y->info.name);
}

void gt_local_st_close(gt_local_st_t *st)
{
    if (!st) return;
    if (st->fd >= 0) close(st->fd);
    for (size_t i = 0; i < st->n; i++) free((char *)st->t[i].info.name);
    free(st->t);
    json_decref(st->meta);
    free(st->path);
    free(st);
}

/* Parses one tensor entry; on error logs and returns GT_ERR_CORRUPT. */
static gt_status_t parse_entry(const char *path, const char *name, json_t *v, uint64_t data_len,
                               uint64_t data_start, st_tensor_t *t)
{
    json_t *jd = json_object_get(v, "dtype"), *js = json_object_get(v, "shape"),
           *jo = json_object_get(v, "data_offsets");
    if (!json_is_object(v) || !json_is_string(jd) || !json_is_array(js) || !json_is_array(jo) ||
        json_array_size(jo) != 2) {
        GT_ERROR("%s: tensor '%s': needs dtype, shape and data_offsets [begin, end]", path, name);
        return GT_ERR_CORRUPT;
    }
    size_t esize = 0;
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
        if (strcmp(json_string_value(jd), dtypes[i].name) == 0) {
            esize = dtypes[i].size;
            t->info.dtype = dtypes[i].dtype;
            t->info.dtype_name = dtypes[i].name;
        }
    }
    if (esize == 0) {
        GT_ERROR("%s: tensor '%s': unknown dtype '%s'", path, name, json_string_value(jd));
        return GT_ERR_CORRUPT;
    }
    t->info.ndim = json_array_size(js);
    if (t->info.ndim > GT_LOCAL_ST_MAX_DIMS) {
        GT_ERROR("%s: tensor '%s': %zu dimensions (at most %d)", path, name, t->info.ndim,
                 GT_LOCAL_ST_MAX_DIMS);
        return GT_ERR_CORRUPT;
    }
    uint64_t numel = 1;
    for (size_t d = 0; d < t->info.ndim; d++) {
        json_t *e = json_array_get(js, d);
        if (!json_is_integer(e) || json_integer_value(e) < 0) {
            GT_ERROR("%s: tensor '%s': shape[%zu] is not a non-negative integer", path, name, d);
            return GT_ERR_CORRUPT;
        }
        uint64_t s = (uint64_t)json_integer_value(e);
        if (s != 0 && numel > UINT64_MAX / s) {
            GT_ERROR("%s: tensor '%s': shape product overflows", path, name);
            return GT_ERR_CORRUPT;
        }
        numel *= s;
        t->info.shape[d] = (size_t)s;
    }
    json_t *b = json_array_get(jo, 0), *e = json_array_get(jo, 1);
    if (!json_is_integer(b) || !json_is_integer(e) || json_integer_value(b) < 0 ||
        json_integer_value(e) < json_integer_value(b) ||
        (uint64_t)json_integer_value(e) > data_len) {
        GT_ERROR("%s: tensor '%s': data_offsets outside the data area (%llu bytes)", path, name,
                 (unsigned long long)data_len);
        return GT_ERR_CORRUPT;
    }
    uint64_t nbytes = (uint64_t)(json_integer_value(e) - json_integer_value(b));
    if (numel > UINT64_MAX / esize || numel * esize != nbytes) {
        GT_ERROR("%s: tensor '%s': %llu bytes of data for %llu elements of %s", path, name,
                 (unsigned long long)nbytes, (unsigned long long)numel, json_string_value(jd));
        return GT_ERR_CORRUPT;
    }
    t->info.numel = (size_t)numel;
    t->info.nbytes = (size_t)nbytes;
    t->begin = data_start + (uint64_t)json_integer_value(b);
    t->info.name = strdup(name);
    return t->info.name ? GT_OK : GT_ERR_NOMEM;
}

gt_status_t gt_local_st_open(const char *path, gt_local_st_t **st_p)
{
    gt_status_t st = GT_OK;
    char *hdr = NULL;
    json_t *root = NULL;
    gt_local_st_t *f = calloc(1, sizeof *f);
    if (!f) return GT_ERR_NOMEM;
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    f->path = strdup(path);
    GT_REQUIRE_GOTO(f->fd >= 0, st, errno == ENOENT ? GT_ERR_NOT_FOUND : GT_ERR_IO, out,
                    "cannot open %s: %s", path, strerror(errno));
    GT_REQUIRE_GOTO(f->path, st, GT_ERR_NOMEM, out, "out of memory");
    struct stat sb;
    GT_REQUIRE_GOTO(fstat(f->fd, &sb) == 0 && S_ISREG(sb.st_mode), st, GT_ERR_IO, out,
                    "%s: not a regular file", path);
    uint64_t fsize = (uint64_t)sb.st_size;
    uint8_t lenb[8];
    GT_REQUIRE_GOTO(fsize >= 8 && pread_all(f->fd, lenb, 8, 0) == 0, st, GT_ERR_CORRUPT, out,
                    "%s: not a safetensors file (shorter than its 8-byte header length)", path);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | lenb[i];
    GT_REQUIRE_GOTO(
        hlen >= 2 && hlen <= GT_LOCAL_ST_MAX_HEADER && hlen <= fsize - 8, st, GT_ERR_CORRUPT, out,
        "%s: header length %llu does not fit the file (%llu bytes) or the %zu-byte "
        "limit",
        path, (unsigned long long)hlen, (unsigned long long)fsize, GT_LOCAL_ST_MAX_HEADER);
    hdr = malloc(hlen);
    GT_REQUIRE_GOTO(hdr, st, GT_ERR_NOMEM, out, "out of memory");
    GT_REQUIRE_GOTO(pread_all(f->fd, hdr, hlen, 8) == 0, st, GT_ERR_IO, out, "%s: read failed",
                    path);
    json_error_t jerr;
    root = json_loadb(hdr, hlen, JSON_REJECT_DUPLICATES, &jerr);
    GT_REQUIRE_GOTO(root, st, GT_ERR_CORRUPT, out, "%s: header is not valid JSON: %s (column %d)",
                    path, jerr.text, jerr.column);
    GT_REQUIRE_GOTO(json_is_object(root), st, GT_ERR_CORRUPT, out,
                    "%s: header is not a JSON object", path);
    uint64_t data_start = 8 + hlen, data_len = fsize - data_start;
    size_t cap = json_object_size(root);
    f->t = calloc(cap ? cap : 1, sizeof *f->t);
    GT_REQUIRE_GOTO(f->t, st, GT_ERR_NOMEM, out, "out of memory");
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        if (strcmp(key, "__metadata__") == 0) {
            GT_REQUIRE_GOTO(json_is_object(v), st, GT_ERR_CORRUPT, out,
                            "%s: __metadata__ is not an object", path);
            const char *mk;
            json_t *mv;
            json_object_foreach(v, mk, mv)
            {
                GT_REQUIRE_GOTO(json_is_string(mv), st, GT_ERR_CORRUPT, out,
                                "%s: __metadata__['%s'] is not a string", path, mk);
            }
            f->meta = json_incref(v);
            continue;
        }
        GT_CHECK_GOTO(parse_entry(path, key, v, data_len, data_start, &f->t[f->n]), st, out);
        f->n++;
    }
    qsort(f->t, f->n, sizeof *f->t, cmp_begin);
    for (size_t i = 1; i < f->n; i++) {
        const st_tensor_t *a = &f->t[i - 1], *b = &f->t[i];
        GT_REQUIRE_GOTO(a->begin + a->info.nbytes <= b->begin, st, GT_ERR_CORRUPT, out,
                        "%s: tensors '%s' and '%s' overlap", path, a->info.name, b->info.name);
    }
out:
    json_decref(root);
    free(hdr);
    if (st != GT_OK) {
        gt_local_st_close(f);
        return st;
    }
    *st_p = f;
    return GT_OK;
}

size_t gt_local_st_count(const gt_local_st_t *st)
{
    return st->n;
}

void gt_local_st_info(const gt_local_st_t *st, size_t index, gt_local_st_info_t *info_p)
{
    *info_p = st->t[index].info;
}

gt_status_t gt_local_st_find(const gt_local_st_t *st, const char *name, size_t *index_p)
{
    for (size_t i = 0; i < st->n; i++) {
        if (strcmp(st->t[i].info.name, name) == 0) {
            *index_p = i;
            return GT_OK;
        }
    }
    return GT_ERR_NOT_FOUND;
}

const char *gt_local_st_metadata(const gt_local_st_t *st, const char *key)
{
    return st->meta ? json_string_value(json_object_get(st->meta, key)) : NULL;
}

static float bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0x1f) {
        u = sign | 0x7f800000u | (man << 13); /* inf / nan */
    } else if (exp != 0) {
        u = sign | ((exp + 112) << 23) | (man << 13);
    } else if (man == 0) {
        u = sign;
    } else { /* subnormal: normalise */
        int e = -1;
        do {
            e++;
            man <<= 1;
        } while (!(man & 0x400));
        u = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ff) << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

gt_status_t gt_local_st_read_f32(const gt_local_st_t *st, size_t index, float *dst, size_t n)
{
    const st_tensor_t *t = &st->t[index];
    if (n != t->info.numel) {
        GT_ERROR("%s: tensor '%s' has %zu elements, %zu requested", st->path, t->info.name,
                 t->info.numel, n);
        return GT_ERR_INVALID;
    }
    if (t->info.dtype == GT_LOCAL_ST_F32) {
        if (pread_all(st->fd, dst, t->info.nbytes, t->begin) != 0) goto short_read;
        return GT_OK;
    }
    if (t->info.dtype != GT_LOCAL_ST_BF16 && t->info.dtype != GT_LOCAL_ST_F16) {
        GT_ERROR("%s: tensor '%s' is %s; only F32, BF16 and F16 read as float", st->path,
                 t->info.name, t->info.dtype_name);
        return GT_ERR_UNSUPPORTED;
    }
    /* Widen in place from the back half of dst: 2-byte values occupy the first half. */
    uint16_t *half = (uint16_t *)(void *)dst;
    if (pread_all(st->fd, half, t->info.nbytes, t->begin) != 0) goto short_read;
    for (size_t i = n; i-- > 0;) {
        uint16_t h = half[i];
        dst[i] = t->info.dtype == GT_LOCAL_ST_BF16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
    return GT_OK;
short_read:
    GT_ERROR("%s: tensor '%s': file ends before its data", st->path, t->info.name);
    return GT_ERR_CORRUPT;
}

gt_status_t gt_local_st_write(const char *path, const gt_local_st_entry_t *entries,
                              size_t n_entries, const char *const *meta_keys,
                              const char *const *meta_values, size_t n_meta)
{
    gt_status_t st = GT_OK;
    gt_afile_t *af = NULL;
    char *hdr = NULL;
    json_t *root = json_object(), *meta = NULL;
    GT_REQUIRE_GOTO(root, st, GT_ERR_NOMEM, out, "out of memory");
    if (n_meta > 0) {
        meta = json_object();
        GT_REQUIRE_GOTO(meta, st, GT_ERR_NOMEM, out, "out of memory");
        for (size_t i = 0; i < n_meta; i++)
            json_object_set_new(meta, meta_keys[i], json_string(meta_values[i]));
        json_object_set_new(root, "__metadata__", meta);
    }
    uint64_t off = 0;
    for (size_t i = 0; i < n_entries; i++) {
        const gt_local_st_entry_t *e = &entries[i];
        GT_REQUIRE_GOTO(e->ndim <= GT_LOCAL_ST_MAX_DIMS && e->name &&
                            strcmp(e->name, "__metadata__") != 0 && !json_object_get(root, e->name),
                        st, GT_ERR_INVALID, out, "%s: bad or duplicate tensor '%s'", path,
                        e->name ? e->name : "(null)");
        json_t *shape = json_array();
        size_t numel = 1;
        for (size_t d = 0; d < e->ndim; d++) {
            json_array_append_new(shape, json_integer((json_int_t)e->shape[d]));
            numel *= e->shape[d];
        }
        json_t *t = json_pack("{s:s, s:o, s:[I,I]}", "dtype", "F32", "shape", shape, "data_offsets",
                              (json_int_t)off, (json_int_t)(off + 4 * numel));
        GT_REQUIRE_GOTO(t, st, GT_ERR_NOMEM, out, "out of memory");
        json_object_set_new(root, e->name, t);
        off += 4 * (uint64_t)numel;
    }
    hdr = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    GT_REQUIRE_GOTO(hdr, st, GT_ERR_NOMEM, out, "out of memory");
    size_t hlen = strlen(hdr), padded = (hlen + 7) & ~(size_t)7;
    uint8_t lenb[8];
    for (int i = 0; i < 8; i++) lenb[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    GT_CHECK_GOTO(gt_afile_open(path, 0644, 0, &af), st, out);
    GT_CHECK_GOTO(gt_afile_write(af, lenb, 8), st, out);
    GT_CHECK_GOTO(gt_afile_write(af, hdr, hlen), st, out);
    GT_CHECK_GOTO(gt_afile_write(af, "        ", padded - hlen), st, out);
    for (size_t i = 0; i < n_entries; i++) {
        size_t numel = 1;
        for (size_t d = 0; d < entries[i].ndim; d++) numel *= entries[i].shape[d];
        GT_CHECK_GOTO(gt_afile_write(af, entries[i].data, 4 * numel), st, out);
    }
    st = gt_afile_commit(af);
    af = NULL;
out:
    gt_afile_abort(af);
    free(hdr);
    json_decref(root);
    return st;
}
