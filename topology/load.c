/* load.c — sites.yaml → gt_topo_config_t: parse, override, validate.
 *
 * libyaml's document API gives every node its line and column, so each error names
 * FILE:LINE:COLUMN, the key, the bad value and what is allowed. The loader does not stop at
 * the first error: it reports all of them, then fails as a whole, so a user fixes a file in
 * one pass. Order: schema defaults, then the file, then GT_* environment variables, then
 * `key=value` flags, then checks that involve several keys, then link inheritance.
 *
 * The file may be hostile, so the work is linear in its size and bounded: at most
 * GT_TOPO_FILE_MAX bytes; a first pass over libyaml's event stream rejects a second document,
 * tags (`!!python/object`), aliases (a `*ref` repeated in a list would multiply the walk) and
 * nesting beyond GT_TOPO_DEPTH_MAX before libyaml builds the document; repeated keys are found
 * with a hash set per mapping (SipHash with a per-load random key, so chosen collisions cannot
 * make it quadratic); and values are cut to 64 bytes in messages.
 */
#include "topology_internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#define MAX_REPORTED_ERRORS 50
#define MSG_VALUE_MAX       64 /* bytes of a value or key shown in a message */

typedef struct {
    const char *name; /* file name for messages */
    FILE *err;
    int n_errors;
    gt_topo_full_t *full;
    yaml_document_t *doc;
    gt_topo_link_params_t *link_raw;               /* per-link values as written; < 0 = inherit */
    uint32_t *site_name_line;                      /* for "first defined at line N" */
    unsigned char hkey[crypto_shorthash_KEYBYTES]; /* keyset hashing, random per load */
} loader_t;

/* ---- messages ---- */

static void report(loader_t *L, const char *where, const char *fmt, ...) GT_PRINTF(3, 4);
static void report(loader_t *L, const char *where, const char *fmt, ...)
{
    L->n_errors++;
    if (L->n_errors > MAX_REPORTED_ERRORS) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(L->err, "%s: ", where);
    vfprintf(L->err, fmt, ap);
    fputc('\n', L->err);
    va_end(ap);
}

/* A value or key as shown in messages: at most MSG_VALUE_MAX bytes, cut on a UTF-8 character
 * boundary and followed by "…" when longer; control characters become '?', so a value cannot
 * flood a log or drive a terminal. */
typedef struct {
    char s[MSG_VALUE_MAX + 8];
} clip_t;

static const char *clip(const char *v, clip_t *c)
{
    size_t n = 0;
    for (; v[n] && n < MSG_VALUE_MAX; n++)
        c->s[n] = ((unsigned char)v[n] < 0x20 || v[n] == 0x7f) ? '?' : v[n];
    if (v[n]) {
        while (n > 0 && ((unsigned char)v[n] & 0xC0) == 0x80) n--; /* not mid-character */
        memcpy(c->s + n, "\xe2\x80\xa6", 4);                       /* … */
    } else {
        c->s[n] = '\0';
    }
    return c->s;
}

static void where_node(const loader_t *L, const yaml_node_t *n, char *buf, size_t len)
{
    snprintf(buf, len, "%s:%lu:%lu", L->name, n ? (unsigned long)n->start_mark.line + 1 : 1ul,
             n ? (unsigned long)n->start_mark.column + 1 : 1ul);
}

static void where_src(const loader_t *L, const gt_src_t *s, const gt_key_t *k, char *buf,
                      size_t len)
{
    char env[128];
    switch (s->kind) {
    case GT_SRC_FILE: snprintf(buf, len, "%s:%u:%u", L->name, s->line, s->col); break;
    case GT_SRC_ENV:
        gt_topo_key_env_name(k, env, sizeof env);
        snprintf(buf, len, "env:%s", env);
        break;
    case GT_SRC_FLAG: snprintf(buf, len, "flag:--set %s", k->path); break;
    default: snprintf(buf, len, "%s:1:1", L->name); break;
    }
}

/* Levenshtein distance, for "did you mean". */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 64;
    size_t row[64];
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t prev = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t cur = row[j];
            size_t sub = prev + (a[i - 1] != b[j - 1]);
            size_t del = row[j] + 1, ins = row[j - 1] + 1;
            row[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
            prev = cur;
        }
    }
    return row[lb];
}

static const char *last_component(const char *path)
{
    const char *dot = strrchr(path, '.');
    return dot ? dot + 1 : path;
}

/* Length of the parent part of a dotted path ("wan.emulation" for "wan.emulation.seed"). */
static size_t parent_len(const char *path)
{
    const char *dot = strrchr(path, '.');
    return dot ? (size_t)(dot - path) : 0;
}

/* Writes " (did you mean 'x'?)" or "" for an unknown key among `rows` under `parent`. */
static void suggest(const gt_key_t *rows, const char *parent, const char *bad, char *buf,
                    size_t len)
{
    size_t plen = strlen(parent), best_d = 1000;
    const char *best = NULL, *elsewhere = NULL;
    for (const gt_key_t *k = rows; k->path; k++) {
        const char *leaf = last_component(k->path);
        if (parent_len(k->path) == plen && strncmp(k->path, parent, plen) == 0) {
            size_t d = edit_distance(bad, leaf);
            if (d < best_d) {
                best_d = d;
                best = k->path;
            }
        } else if (!elsewhere && strcmp(leaf, bad) == 0) {
            elsewhere = k->path;
        }
    }
    size_t limit = strlen(bad) / 3 + 1;
    if (best && (best_d <= 2 || (!elsewhere && best_d <= limit)))
        snprintf(buf, len, " (did you mean '%s'?)", last_component(best));
    else if (elsewhere)
        snprintf(buf, len, " (did you mean '%s'? it belongs in another section)", elsewhere);
    else
        buf[0] = '\0';
}

/* "allowed keys here: a, b, c" */
static void list_siblings(const gt_key_t *rows, const char *parent, char *buf, size_t len)
{
    size_t plen = strlen(parent), o = 0;
    buf[0] = '\0';
    for (const gt_key_t *k = rows; k->path && o + 2 < len; k++) {
        if (parent_len(k->path) != plen || strncmp(k->path, parent, plen) != 0) continue;
        o += (size_t)snprintf(buf + o, len - o, "%s%s", o ? ", " : "", last_component(k->path));
    }
}

/* ---- scalar values ---- */

static const char *node_kind(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_MAPPING_NODE: return "a mapping";
    case YAML_SEQUENCE_NODE: return "a list";
    default: return "a scalar";
    }
}

static int is_null_scalar(const yaml_node_t *n)
{
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return 0;
    const char *v = (const char *)n->data.scalar.value;
    return !*v || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 || strcmp(v, "Null") == 0 ||
           strcmp(v, "NULL") == 0;
}

static int word_index(const char *words, const char *v)
{
    int i = 0;
    size_t n = strlen(v);
    for (const char *w = words; w; i++) {
        size_t wl = strcspn(w, "|");
        if (wl == n && strncmp(w, v, n) == 0) return i;
        w = strchr(w, '|');
        if (w) w++;
    }
    return -1;
}

static void word_suggest(const char *words, const char *v, char *buf, size_t len)
{
    char best[64] = "";
    size_t best_d = 1000;
    for (const char *w = words; w;) {
        size_t wl = strcspn(w, "|");
        char word[64];
        snprintf(word, sizeof word, "%.*s", (int)wl, w);
        size_t d = edit_distance(word, v);
        if (d < best_d) {
            best_d = d;
            snprintf(best, sizeof best, "%s", word);
        }
        w = strchr(w, '|');
        if (w) w++;
    }
    if (best_d <= strlen(v) / 2 + 1)
        snprintf(buf, len, " (did you mean '%s'?)", best);
    else
        buf[0] = '\0';
}

/* A name is a path component of the run directory (SITE/, RUN/): '.', '..' and hidden names
 * would put a site's files beside or above the run's. */
static int valid_name(const char *v)
{
    if (!*v || *v == '.') return 0;
    for (const char *p = v; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-' && *p != '.') return 0;
    return 1;
}

static int valid_addr(const char *v)
{
    const char *colon = strrchr(v, ':');
    if (!colon || colon == v) return 0;
    if (v[0] == '[' && colon[-1] != ']') return 0;
    const char *port = colon + 1;
    if (!*port || strlen(port) > 5) return 0;
    for (const char *p = port; *p; p++)
        if (!isdigit((unsigned char)*p)) return 0;
    if (atol(port) > 65535) return 0;
    for (const char *p = v; p < colon; p++)
        if (isspace((unsigned char)*p)) return 0;
    return 1;
}

static int valid_url(const char *v)
{
    const char *rest = NULL;
    if (strncmp(v, "http://", 7) == 0)
        rest = v + 7;
    else if (strncmp(v, "https://", 8) == 0)
        rest = v + 8;
    if (!rest) return 0;
    char hostport[GT_TOPO_ADDR_MAX];
    snprintf(hostport, sizeof hostport, "%s", rest);
    size_t n = strlen(hostport);
    if (n && hostport[n - 1] == '/') hostport[n - 1] = '\0';
    return valid_addr(hostport);
}

/* Parses `v` for row `k` into base + k->offset. quoted: the YAML value was quoted (a string,
 * so wrong for numbers and booleans). Reports and returns -1 on error. */
static int set_value(loader_t *L, const char *where, const char *keyname, const gt_key_t *k,
                     void *base, const char *v, int quoted)
{
    char allowed[512], hint[128] = "";
    char *p = (char *)base + k->offset;
    char *end = NULL;
    clip_t cv;
    gt_topo_key_allowed(k, allowed, sizeof allowed);
    int numeric = k->type == GT_KEY_U32 || k->type == GT_KEY_U64 || k->type == GT_KEY_INT ||
                  k->type == GT_KEY_F64 || k->type == GT_KEY_BOOL;
    if (numeric && quoted) {
        report(L, where, "key '%s': value \"%s\" is a quoted string; allowed: %s", keyname,
               clip(v, &cv), allowed);
        return -1;
    }
    switch (k->type) {
    case GT_KEY_U32:
    case GT_KEY_U64:
    case GT_KEY_INT: {
        errno = 0;
        int neg = v[0] == '-';
        if (!*v || isspace((unsigned char)v[0]) || (neg && k->type != GT_KEY_INT)) goto bad;
        long double x =
            neg ? (long double)strtoll(v, &end, 10) : (long double)strtoull(v, &end, 10);
        if (errno || *end || x < (long double)k->min || x > (long double)k->max) goto bad;
        if (k->type == GT_KEY_U32)
            *(uint32_t *)p = (uint32_t)x;
        else if (k->type == GT_KEY_U64)
            *(uint64_t *)p = strtoull(v, NULL, 10);
        else
            *(int *)p = (int)x;
        return 0;
    }
    case GT_KEY_F64: {
        errno = 0;
        if (!*v || isspace((unsigned char)v[0])) goto bad;
        double x = strtod(v, &end);
        if (errno || *end || !isfinite(x)) goto bad;
        if (x < k->min || x > k->max || (k->min_open && x == k->min) ||
            (k->max_open && x == k->max))
            goto bad;
        *(double *)p = x;
        return 0;
    }
    case GT_KEY_BOOL:
        if (!strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on")) {
            *(int *)p = 1;
            return 0;
        }
        if (!strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off")) {
            *(int *)p = 0;
            return 0;
        }
        goto bad;
    case GT_KEY_ENUM:
    case GT_KEY_WORD: {
        int i = word_index(k->words, v);
        if (i < 0) {
            word_suggest(k->words, v, hint, sizeof hint);
            goto bad;
        }
        if (k->type == GT_KEY_ENUM)
            *(int *)p = i;
        else
            snprintf(p, k->size, "%s", v);
        return 0;
    }
    case GT_KEY_NAME:
        if (!valid_name(v) || strlen(v) >= k->size) goto bad;
        snprintf(p, k->size, "%s", v);
        return 0;
    case GT_KEY_ADDR:
        if (!*v && k->def && strcmp(k->def, "\"\"") == 0) { /* optional: "" = not set */
            *p = '\0';
            return 0;
        }
        if (!valid_addr(v) || strlen(v) >= k->size) goto bad;
        snprintf(p, k->size, "%s", v);
        return 0;
    case GT_KEY_STR:
    case GT_KEY_PATH:
        if (strlen(v) >= k->size) {
            snprintf(hint, sizeof hint, " (longer than %zu characters)", k->size - 1);
            goto bad;
        }
        snprintf(p, k->size, "%s", v);
        return 0;
    case GT_KEY_B64KEY: {
        gt_topo_site_t *site = (gt_topo_site_t *)base;
        size_t len = 0;
        const char *b64end = NULL;
        if (!*v) {
            site->has_public_key = 0;
            return 0;
        }
        if (strlen(v) != 44 ||
            sodium_base642bin(site->public_key, sizeof site->public_key, v, 44, NULL, &len, &b64end,
                              sodium_base64_VARIANT_ORIGINAL) != 0 ||
            len != 32 || *b64end)
            goto bad;
        site->has_public_key = 1;
        return 0;
    }
    default: break;
    }
bad:
    report(L, where, "key '%s': invalid value '%s'%s; allowed: %s", keyname, clip(v, &cv), hint,
           allowed);
    return -1;
}

/* Applies row k from a YAML node. */
static int set_from_node(loader_t *L, const char *keyname, const gt_key_t *k, void *base,
                         yaml_node_t *n)
{
    char where[GT_TOPO_PATH_MAX + 32], allowed[512];
    where_node(L, n, where, sizeof where);
    if (n->type != YAML_SCALAR_NODE) {
        gt_topo_key_allowed(k, allowed, sizeof allowed);
        report(L, where, "key '%s': wrong type, got %s; allowed: %s", keyname, node_kind(n),
               allowed);
        return -1;
    }
    if (is_null_scalar(n) && k->type != GT_KEY_STR && k->type != GT_KEY_PATH) {
        gt_topo_key_allowed(k, allowed, sizeof allowed);
        report(L, where, "key '%s': has no value; allowed: %s", keyname, allowed);
        return -1;
    }
    const char *v = is_null_scalar(n) ? "" : (const char *)n->data.scalar.value;
    return set_value(L, where, keyname, k, base, v,
                     n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE);
}

static void apply_defaults(loader_t *L, const gt_key_t *rows, void *base)
{
    for (const gt_key_t *k = rows; k->path; k++) {
        if (!k->def || k->type == GT_KEY_SECTION || k->type == GT_KEY_URLLIST ||
            k->type == GT_KEY_LINKS || k->type == GT_KEY_CUTS)
            continue;
        const char *d = k->def;
        int quoted = d[0] == '"';
        char buf[256];
        if (quoted) {
            snprintf(buf, sizeof buf, "%.*s", (int)(strlen(d) - 2), d + 1);
            d = buf;
        }
        if (set_value(L, "schema", k->path, k, base, d, quoted) != 0)
            report(L, "schema", "internal: bad default for '%s'", k->path); /* a bug */
    }
}

/* ---- the walk over the document ---- */

static const gt_key_t *find_row(const gt_key_t *rows, const char *path)
{
    for (const gt_key_t *k = rows; k->path; k++)
        if (strcmp(k->path, path) == 0) return k;
    return NULL;
}

/* Reports a key given twice in a mapping (libyaml accepts duplicates silently). `first` is
 * the earlier key node for_each_pair found, or NULL. */
static int duplicate_key(loader_t *L, const yaml_node_t *first, const yaml_node_t *key,
                         const char *keyname)
{
    if (!first) return 0;
    char where[GT_TOPO_PATH_MAX + 32];
    where_node(L, key, where, sizeof where);
    report(L, where, "key '%s': given twice (first at line %lu); allowed: once", keyname,
           (unsigned long)first->start_mark.line + 1);
    return 1;
}

/* For each pair of a mapping, the earlier pair with the same scalar key, if any: an open-
 * addressing set of pair indices (twice as many slots as pairs, linear probing), hashed with
 * SipHash-2-4 under the loader's random key. Linear in the mapping's size whatever the keys;
 * the old pairwise comparison took minutes on a file of a few hundred thousand keys. Returns
 * first_p[i] = index of the first equal key, or SIZE_MAX; NULL when out of memory. */
static size_t *find_duplicates(loader_t *L, yaml_node_t *map, size_t n)
{
    size_t *first = malloc((n ? n : 1) * sizeof *first);
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    size_t *slots = malloc(cap * sizeof *slots); /* pair index + 1; 0 = empty */
    if (!first || !slots) {
        free(first);
        free(slots);
        return NULL;
    }
    memset(slots, 0, cap * sizeof *slots);
    yaml_node_pair_t *pairs = map->data.mapping.pairs.start;
    for (size_t i = 0; i < n; i++) {
        first[i] = SIZE_MAX;
        yaml_node_t *k = yaml_document_get_node(L->doc, pairs[i].key);
        if (!k || k->type != YAML_SCALAR_NODE) continue;
        unsigned char h[crypto_shorthash_BYTES];
        crypto_shorthash(h, k->data.scalar.value, k->data.scalar.length, L->hkey);
        uint64_t hv;
        memcpy(&hv, h, sizeof hv);
        for (size_t at = (size_t)hv & (cap - 1);; at = (at + 1) & (cap - 1)) {
            if (!slots[at]) {
                slots[at] = i + 1;
                break;
            }
            yaml_node_t *o = yaml_document_get_node(L->doc, pairs[slots[at] - 1].key);
            if (o->data.scalar.length == k->data.scalar.length &&
                memcmp(o->data.scalar.value, k->data.scalar.value, k->data.scalar.length) == 0) {
                first[i] = slots[at] - 1;
                break;
            }
        }
    }
    free(slots);
    return first;
}

/* Iterates a mapping node: for each pair with a scalar key, calls fn(L, key, value, first,
 * ctx), where `first` is the key node of an earlier pair with the same key (or NULL). */
typedef void (*pair_fn)(loader_t *L, yaml_node_t *key, yaml_node_t *val, const yaml_node_t *first,
                        void *ctx);

static void for_each_pair(loader_t *L, yaml_node_t *map, const char *what, pair_fn fn, void *ctx)
{
    char where[GT_TOPO_PATH_MAX + 32];
    yaml_node_pair_t *pairs = map->data.mapping.pairs.start;
    size_t n = (size_t)(map->data.mapping.pairs.top - pairs);
    size_t *first = find_duplicates(L, map, n);
    if (!first) {
        where_node(L, map, where, sizeof where);
        report(L, where, "out of memory checking %zu keys of '%s'", n, what);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *k = yaml_document_get_node(L->doc, pairs[i].key);
        yaml_node_t *v = yaml_document_get_node(L->doc, pairs[i].value);
        if (!k || !v) continue;
        if (k->type != YAML_SCALAR_NODE) {
            where_node(L, k, where, sizeof where);
            report(L, where, "key in '%s': a key must be a plain word, got %s; allowed: %s keys",
                   what, node_kind(k), what);
            continue;
        }
        fn(L, k, v,
           first[i] == SIZE_MAX ? NULL : yaml_document_get_node(L->doc, pairs[first[i]].key), ctx);
    }
    free(first);
}

static void walk_section(loader_t *L, yaml_node_t *map, const char *prefix);

static int expect_mapping(loader_t *L, yaml_node_t *n, const char *keyname, const char *what)
{
    if (n->type == YAML_MAPPING_NODE) return 1;
    if (is_null_scalar(n)) return 0; /* an empty section */
    char where[GT_TOPO_PATH_MAX + 32];
    where_node(L, n, where, sizeof where);
    report(L, where, "key '%s': wrong type, got %s; allowed: %s", keyname, node_kind(n), what);
    return 0;
}

static int expect_sequence(loader_t *L, yaml_node_t *n, const char *keyname, const char *what)
{
    if (n->type == YAML_SEQUENCE_NODE) return 1;
    char where[GT_TOPO_PATH_MAX + 32];
    where_node(L, n, where, sizeof where);
    report(L, where, "key '%s': wrong type, got %s; allowed: %s", keyname, node_kind(n), what);
    return 0;
}

static void walk_urls(loader_t *L, yaml_node_t *seq)
{
    char where[GT_TOPO_PATH_MAX + 32];
    gt_topo_membership_t *m = &L->full->cfg.membership;
    m->n_endpoints = 0;
    if (!expect_sequence(L, seq, "membership.endpoints",
                         "a list of https://host:port (or http://) URLs"))
        return;
    for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top;
         it++) {
        yaml_node_t *n = yaml_document_get_node(L->doc, *it);
        where_node(L, n, where, sizeof where);
        if (n->type != YAML_SCALAR_NODE || !valid_url((char *)n->data.scalar.value) ||
            strlen((char *)n->data.scalar.value) >= GT_TOPO_ADDR_MAX) {
            clip_t cv;
            report(L, where,
                   "key 'membership.endpoints': invalid value '%s'; allowed: https://host:port or "
                   "http://host:port",
                   n->type == YAML_SCALAR_NODE ? clip((char *)n->data.scalar.value, &cv)
                                               : node_kind(n));
            continue;
        }
        if (m->n_endpoints == GT_TOPO_MAX_ENDPOINTS) {
            report(L, where,
                   "key 'membership.endpoints': more than %d endpoints; allowed: at "
                   "most %d",
                   GT_TOPO_MAX_ENDPOINTS, GT_TOPO_MAX_ENDPOINTS);
            return;
        }
        snprintf(m->endpoints[m->n_endpoints++], GT_TOPO_ADDR_MAX, "%s",
                 (char *)n->data.scalar.value);
    }
}

/* Reports `keyname` (leaf `name`, under `parent` in `rows`) as unknown, with a did-you-mean
 * and the keys allowed there. */
static void report_unknown(loader_t *L, const yaml_node_t *key, const gt_key_t *rows,
                           const char *parent, const char *name, const char *keyname)
{
    char where[GT_TOPO_PATH_MAX + 32], hint[160], allowed[512];
    if (L->n_errors >= MAX_REPORTED_ERRORS) { /* counted, not shown: skip the suggestion work */
        L->n_errors++;
        return;
    }
    where_node(L, key, where, sizeof where);
    suggest(rows, parent, name, hint, sizeof hint);
    list_siblings(rows, parent, allowed, sizeof allowed);
    report(L, where, "key '%s': unknown key%s; allowed: %s", keyname, hint, allowed);
}

/* --- sites --- */

typedef struct {
    gt_topo_site_t *site;
    uint32_t index;
    int seen_name, seen_addr;
} site_ctx_t;

static void site_pair(loader_t *L, yaml_node_t *key, yaml_node_t *val, const yaml_node_t *first,
                      void *vctx)
{
    site_ctx_t *c = vctx;
    clip_t cn; /* a name longer than MSG_VALUE_MAX is no key, so the clipped one serves */
    const char *name = clip((const char *)key->data.scalar.value, &cn);
    char keyname[128];
    snprintf(keyname, sizeof keyname, "sites[%u].%s", c->index, name);
    if (duplicate_key(L, first, key, keyname)) return;
    const gt_key_t *k = find_row(gt_topo_site_keys, name);
    if (!k) {
        report_unknown(L, key, gt_topo_site_keys, "", name, keyname);
        return;
    }
    if (set_from_node(L, keyname, k, c->site, val) != 0) return;
    if (strcmp(name, "name") == 0) {
        c->seen_name = 1;
        L->site_name_line[c->index] = (uint32_t)val->start_mark.line + 1;
    }
    if (strcmp(name, "address") == 0) c->seen_addr = 1;
}

static void walk_sites(loader_t *L, yaml_node_t *seq)
{
    char where[GT_TOPO_PATH_MAX + 32];
    gt_topo_config_t *cfg = &L->full->cfg;
    where_node(L, seq, where, sizeof where);
    if (!expect_sequence(L, seq, "sites", "a list of site mappings (- name: ..., address: ...)"))
        return;
    size_t n = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
    if (n == 0) {
        report(L, where, "key 'sites': no sites defined; allowed: a list of at least one site");
        return;
    }
    if (n > GT_TOPO_MAX_SITES) {
        report(L, where, "key 'sites': %zu sites; allowed: at most %d", n, GT_TOPO_MAX_SITES);
        return;
    }
    free(cfg->sites);
    cfg->sites = calloc(n, sizeof *cfg->sites);
    L->site_name_line = calloc(n, sizeof *L->site_name_line);
    if (!cfg->sites || !L->site_name_line) {
        report(L, where, "out of memory");
        return;
    }
    cfg->n_sites = (uint32_t)n;
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *item = yaml_document_get_node(L->doc, seq->data.sequence.items.start[i]);
        gt_topo_site_t *site = &cfg->sites[i];
        char keyname[64];
        snprintf(keyname, sizeof keyname, "sites[%zu]", i);
        apply_defaults(L, gt_topo_site_keys, site);
        site->line = (uint32_t)item->start_mark.line + 1;
        if (!expect_mapping(L, item, keyname, "a mapping with name, address, ...")) {
            if (item->type == YAML_SCALAR_NODE) {
                where_node(L, item, where, sizeof where);
                report(L, where, "key '%s': empty site; allowed: a mapping with name and address",
                       keyname);
            }
            continue;
        }
        site_ctx_t c = {site, (uint32_t)i, 0, 0};
        for_each_pair(L, item, "site", site_pair, &c);
        where_node(L, item, where, sizeof where);
        if (!c.seen_name)
            report(L, where, "key '%s.name': missing; allowed: a unique site name", keyname);
        if (!c.seen_addr)
            report(L, where, "key '%s.address': missing; allowed: host:port", keyname);
    }
}

/* --- links --- */

typedef struct {
    uint32_t index;
    gt_topo_link_t *link;
    gt_topo_link_params_t *raw;
    int seen_between, valid_between;
} link_ctx_t;

static void walk_pair(loader_t *L, yaml_node_t *seq, const char *keyname, link_ctx_t *c)
{
    char where[GT_TOPO_PATH_MAX + 32];
    c->seen_between = 1; /* present: whatever is wrong with it is reported here */
    where_node(L, seq, where, sizeof where);
    if (!expect_sequence(L, seq, keyname, "a list of two different site names")) return;
    size_t n = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
    if (n != 2) {
        report(L, where, "key '%s': %zu names; allowed: a list of two different site names",
               keyname, n);
        return;
    }
    uint32_t idx[2];
    for (int i = 0; i < 2; i++) {
        yaml_node_t *nm = yaml_document_get_node(L->doc, seq->data.sequence.items.start[i]);
        where_node(L, nm, where, sizeof where);
        const char *v = nm->type == YAML_SCALAR_NODE ? (char *)nm->data.scalar.value : "";
        if (gt_topo_site_index(&L->full->cfg, v, &idx[i]) != GT_OK) {
            clip_t cv;
            report(L, where, "key '%s': unknown site '%s'; allowed: a name from sites", keyname,
                   clip(v, &cv));
            return;
        }
    }
    if (idx[0] == idx[1]) {
        report(L, where, "key '%s': a link from site '%s' to itself; allowed: two different sites",
               keyname, L->full->cfg.sites[idx[0]].name);
        return;
    }
    c->link->a = idx[0] < idx[1] ? idx[0] : idx[1];
    c->link->b = idx[0] < idx[1] ? idx[1] : idx[0];
    c->valid_between = 1;
}

static const gt_key_t cut_keys[] = {
    {"start_s", GT_KEY_F64, offsetof(gt_topo_cut_t, start_s), 0, 0, 1e7, 0, 0, NULL, NULL, ""},
    {"duration_s", GT_KEY_F64, offsetof(gt_topo_cut_t, duration_s), 0, 0, 1e7, 1, 0, NULL, NULL,
     ""},
    {NULL, GT_KEY_SECTION, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};

typedef struct {
    const char *keyname; /* links[i].cuts */
    gt_topo_cut_t *cut;
} cut_ctx_t;

static void cut_pair(loader_t *L, yaml_node_t *key, yaml_node_t *val, const yaml_node_t *first,
                     void *vctx)
{
    cut_ctx_t *c = vctx;
    char where[GT_TOPO_PATH_MAX + 32], kn[160];
    clip_t cn;
    const char *name = clip((char *)key->data.scalar.value, &cn);
    snprintf(kn, sizeof kn, "%s.%s", c->keyname, name);
    if (duplicate_key(L, first, key, kn)) return;
    const gt_key_t *row = find_row(cut_keys, name);
    if (!row) {
        where_node(L, key, where, sizeof where);
        report(L, where, "key '%s': unknown key; allowed: start_s, duration_s", kn);
        return;
    }
    set_from_node(L, kn, row, c->cut, val);
}

static void walk_cuts(loader_t *L, yaml_node_t *seq, const char *keyname, link_ctx_t *c)
{
    char where[GT_TOPO_PATH_MAX + 32];
    if (!expect_sequence(L, seq, keyname, "a list of {start_s, duration_s} mappings")) return;
    c->raw->n_cuts = 0;
    for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top;
         it++) {
        yaml_node_t *m = yaml_document_get_node(L->doc, *it);
        where_node(L, m, where, sizeof where);
        if (c->raw->n_cuts == GT_TOPO_MAX_CUTS) {
            report(L, where, "key '%s': more than %d cuts; allowed: at most %d", keyname,
                   GT_TOPO_MAX_CUTS, GT_TOPO_MAX_CUTS);
            return;
        }
        if (!expect_mapping(L, m, keyname, "a mapping {start_s: S, duration_s: D}")) continue;
        gt_topo_cut_t cut = {-1, -1};
        cut_ctx_t cc = {keyname, &cut};
        for_each_pair(L, m, "cut", cut_pair, &cc);
        if (cut.start_s < 0 || cut.duration_s < 0) {
            report(L, where,
                   "key '%s': a cut needs start_s and duration_s; allowed: "
                   "{start_s: S, duration_s: D}",
                   keyname);
            continue;
        }
        c->raw->cuts[c->raw->n_cuts++] = cut;
    }
}

static void link_pair(loader_t *L, yaml_node_t *key, yaml_node_t *val, const yaml_node_t *first,
                      void *vctx)
{
    link_ctx_t *c = vctx;
    clip_t cn;
    const char *name = clip((const char *)key->data.scalar.value, &cn);
    char keyname[128];
    snprintf(keyname, sizeof keyname, "links[%u].%s", c->index, name);
    if (duplicate_key(L, first, key, keyname)) return;
    const gt_key_t *k = find_row(gt_topo_link_keys, name);
    if (!k) {
        report_unknown(L, key, gt_topo_link_keys, "", name, keyname);
        return;
    }
    if (k->type == GT_KEY_PAIR)
        walk_pair(L, val, keyname, c);
    else if (k->type == GT_KEY_CUTS)
        walk_cuts(L, val, keyname, c);
    else
        set_from_node(L, keyname, k, c->raw, val);
}

static void walk_links(loader_t *L, yaml_node_t *seq)
{
    char where[GT_TOPO_PATH_MAX + 32];
    gt_topo_config_t *cfg = &L->full->cfg;
    if (!expect_sequence(L, seq, "links", "a list of link mappings (- between: [a, b], ...)"))
        return;
    size_t n = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
    if (n == 0) return;
    cfg->links = calloc(n, sizeof *cfg->links);
    L->link_raw = calloc(n, sizeof *L->link_raw);
    /* seen[a * MAX_SITES + b] = 1 + the link already configured for sites a < b: one look-up
     * per entry, however many entries a file repeats. */
    uint32_t *seen = calloc((size_t)GT_TOPO_MAX_SITES * GT_TOPO_MAX_SITES, sizeof *seen);
    if (!cfg->links || !L->link_raw || !seen) {
        free(seen);
        where_node(L, seq, where, sizeof where);
        report(L, where, "out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *item = yaml_document_get_node(L->doc, seq->data.sequence.items.start[i]);
        char keyname[64];
        snprintf(keyname, sizeof keyname, "links[%zu]", i);
        gt_topo_link_params_t *raw = &L->link_raw[cfg->n_links];
        raw->latency_ms = raw->jitter_ms = raw->bandwidth_mbps = raw->loss = -1;
        link_ctx_t c = {(uint32_t)i, &cfg->links[cfg->n_links], raw, 0, 0};
        if (!expect_mapping(L, item, keyname, "a mapping with between: [a, b] and link settings"))
            continue;
        for_each_pair(L, item, "link", link_pair, &c);
        where_node(L, item, where, sizeof where);
        if (!c.seen_between) {
            report(L, where, "key '%s.between': missing; allowed: a list of two site names",
                   keyname);
            continue;
        }
        if (!c.valid_between) continue;
        uint32_t *slot = &seen[(size_t)c.link->a * GT_TOPO_MAX_SITES + c.link->b];
        if (*slot) {
            report(L, where,
                   "key '%s.between': the link %s-%s is already configured (links[%u]); "
                   "allowed: one entry per site pair",
                   keyname, cfg->sites[c.link->a].name, cfg->sites[c.link->b].name, *slot - 1);
            continue;
        }
        *slot = ++cfg->n_links;
    }
    free(seen);
}

/* --- top-level sections --- */

typedef struct {
    const char *prefix;
} section_ctx_t;

static void section_pair(loader_t *L, yaml_node_t *key, yaml_node_t *val, const yaml_node_t *first,
                         void *vctx)
{
    const char *prefix = ((section_ctx_t *)vctx)->prefix;
    clip_t cn;
    const char *name = clip((const char *)key->data.scalar.value, &cn);
    char path[160];
    snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", name);
    if (duplicate_key(L, first, key, path)) return;
    const gt_key_t *k = find_row(gt_topo_keys, path);
    if (!k) {
        report_unknown(L, key, gt_topo_keys, prefix, name, path);
        return;
    }
    size_t row = (size_t)(k - gt_topo_keys);
    L->full->src[row] = (gt_src_t){GT_SRC_FILE, (uint32_t)val->start_mark.line + 1,
                                   (uint32_t)val->start_mark.column + 1};
    switch (k->type) {
    case GT_KEY_SECTION:
        if (expect_mapping(L, val, path, "a mapping of keys")) walk_section(L, val, path);
        break;
    case GT_KEY_SITES: walk_sites(L, val); break;
    case GT_KEY_LINKS: break; /* after all sites are known: see walk_top */
    case GT_KEY_URLLIST: walk_urls(L, val); break;
    default: set_from_node(L, path, k, &L->full->cfg, val); break;
    }
}

static void walk_section(loader_t *L, yaml_node_t *map, const char *prefix)
{
    section_ctx_t c = {prefix};
    for_each_pair(L, map, *prefix ? prefix : "top-level", section_pair, &c);
}

static void walk_top(loader_t *L, yaml_node_t *root)
{
    char where[GT_TOPO_PATH_MAX + 32];
    where_node(L, root, where, sizeof where);
    if (root->type != YAML_MAPPING_NODE) {
        report(L, where,
               "key '(top level)': wrong type, got %s; allowed: a mapping with "
               "sections run, model, ..., sites",
               node_kind(root));
        return;
    }
    walk_section(L, root, "");
    /* links refer to sites by name, so they are read once every site is known. */
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(L->doc, p->key);
        if (k && k->type == YAML_SCALAR_NODE &&
            strcmp((char *)k->data.scalar.value, "links") == 0) {
            walk_links(L, yaml_document_get_node(L->doc, p->value));
            break;
        }
    }
}

/* ---- environment and flags ---- */

static int is_scalar_row(const gt_key_t *k)
{
    return k->type != GT_KEY_SECTION && k->type != GT_KEY_SITES && k->type != GT_KEY_LINKS &&
           k->type != GT_KEY_URLLIST;
}

/* "a,b,c" → membership.endpoints */
static void set_url_list(loader_t *L, const char *where, const char *v)
{
    gt_topo_membership_t *m = &L->full->cfg.membership;
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", v);
    m->n_endpoints = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ') t++;
        if (!valid_url(t) || m->n_endpoints == GT_TOPO_MAX_ENDPOINTS) {
            clip_t cv;
            report(L, where,
                   "key 'membership.endpoints': invalid value '%s'; allowed: a "
                   "comma-separated list of at most %d https:// (or http://) URLs",
                   clip(t, &cv), GT_TOPO_MAX_ENDPOINTS);
            return;
        }
        snprintf(m->endpoints[m->n_endpoints++], GT_TOPO_ADDR_MAX, "%s", t);
    }
}

static void apply_env(loader_t *L)
{
    char env[160], where[200];
    for (const gt_key_t *k = gt_topo_keys; k->path; k++) {
        if (!is_scalar_row(k) && k->type != GT_KEY_URLLIST) continue;
        gt_topo_key_env_name(k, env, sizeof env);
        const char *v = getenv(env);
        if (!v) continue;
        snprintf(where, sizeof where, "env:%s", env);
        if (k->type == GT_KEY_URLLIST)
            set_url_list(L, where, v);
        else if (set_value(L, where, k->path, k, &L->full->cfg, v, 0) != 0)
            continue;
        L->full->src[k - gt_topo_keys] = (gt_src_t){GT_SRC_ENV, 0, 0};
    }
}

/* --set links[A,B].cuts=START+DURATION,... : the cut windows (seconds on the emulation clock)
 * of the link between sites A and B, replacing the file's; an empty value clears them. The link
 * entry is created when the file has none (its other settings inherit wan.emulation). */
static void set_link_cuts(loader_t *L, const char *where, const char *key, const char *v)
{
    gt_topo_config_t *cfg = &L->full->cfg;
    char a[GT_TOPO_NAME_MAX], b[GT_TOPO_NAME_MAX];
    const char *comma = strchr(key, ','), *close = comma ? strchr(comma, ']') : NULL;
    uint32_t ia, ib;
    if (!comma || !close || strcmp(close, "].cuts") != 0 || (size_t)(comma - key - 6) >= sizeof a ||
        (size_t)(close - comma - 1) >= sizeof b) {
        report(L, where,
               "key '%s': allowed: links[A,B].cuts=START_S+DURATION_S,... with A and B "
               "site names",
               key);
        return;
    }
    snprintf(a, sizeof a, "%.*s", (int)(comma - key - 6), key + 6);
    snprintf(b, sizeof b, "%.*s", (int)(close - comma - 1), comma + 1);
    if (gt_topo_site_index(cfg, a, &ia) != GT_OK || gt_topo_site_index(cfg, b, &ib) != GT_OK ||
        ia == ib) {
        report(L, where,
               "key '%s': allowed: links[A,B].cuts with two different site names from "
               "sites",
               key);
        return;
    }
    gt_topo_cut_t cuts[GT_TOPO_MAX_CUTS];
    uint32_t n = 0;
    for (const char *p = v; *p;) {
        char *e1 = NULL, *e2 = NULL;
        double s = strtod(p, &e1), d = e1 && *e1 == '+' ? strtod(e1 + 1, &e2) : -1;
        if (!e2 || e2 == e1 + 1 || (*e2 && *e2 != ',') || !(s >= 0 && s <= 1e7) ||
            !(d > 0 && d <= 1e7) || n == GT_TOPO_MAX_CUTS) {
            clip_t cv;
            report(L, where,
                   "key '%s': invalid value '%s'; allowed: at most %d windows START_S+DURATION_S "
                   "separated by commas, START_S in [0, 1e7], DURATION_S in (0, 1e7]",
                   key, clip(v, &cv), GT_TOPO_MAX_CUTS);
            return;
        }
        cuts[n++] = (gt_topo_cut_t){s, d};
        p = *e2 ? e2 + 1 : e2;
    }
    uint32_t lo = ia < ib ? ia : ib, hi = ia < ib ? ib : ia, i;
    for (i = 0; i < cfg->n_links; i++)
        if (cfg->links[i].a == lo && cfg->links[i].b == hi) break;
    if (i == cfg->n_links) { /* a new entry, inheriting everything else */
        gt_topo_link_t *nl = realloc(cfg->links, (i + 1) * sizeof *nl);
        if (nl) cfg->links = nl;
        gt_topo_link_params_t *nr = nl ? realloc(L->link_raw, (i + 1) * sizeof *nr) : NULL;
        if (!nr) {
            report(L, where, "out of memory");
            return;
        }
        L->link_raw = nr;
        memset(&cfg->links[i], 0, sizeof cfg->links[i]);
        memset(&nr[i], 0, sizeof nr[i]);
        cfg->links[i].a = lo;
        cfg->links[i].b = hi;
        nr[i].latency_ms = nr[i].jitter_ms = nr[i].bandwidth_mbps = nr[i].loss = -1;
        cfg->n_links++;
    }
    L->link_raw[i].n_cuts = n;
    memcpy(L->link_raw[i].cuts, cuts, n * sizeof *cuts);
}

static void apply_flag(loader_t *L, const char *set)
{
    char key[200], where[300], hint[160], allowed[512];
    const char *eq = strchr(set, '=');
    clip_t cs;
    snprintf(where, sizeof where, "flag:--set %s", clip(set, &cs));
    if (!eq || eq == set || (size_t)(eq - set) >= sizeof key) {
        report(L, where, "expected key=value; allowed: a config key such as outer.lr=0.5");
        return;
    }
    snprintf(key, sizeof key, "%.*s", (int)(eq - set), set);
    const char *v = eq + 1;
    if (strncmp(key, "links[", 6) == 0) {
        set_link_cuts(L, where, key, v);
        return;
    }
    if (strncmp(key, "sites.", 6) == 0) {
        /* sites.NAME.key=value */
        const char *dot = strrchr(key, '.');
        char site[GT_TOPO_NAME_MAX];
        uint32_t idx;
        snprintf(site, sizeof site, "%.*s", (int)(dot - key - 6), key + 6);
        const gt_key_t *k = find_row(gt_topo_site_keys, dot + 1);
        if (dot <= key + 6 || gt_topo_site_index(&L->full->cfg, site, &idx) != GT_OK) {
            report(L, where,
                   "key '%s': no such site; allowed: sites.NAME.KEY with NAME from "
                   "sites",
                   key);
            return;
        }
        if (!k || k->type == GT_KEY_NAME) {
            list_siblings(gt_topo_site_keys, "", allowed, sizeof allowed);
            report(L, where, "key '%s': not a settable site key; allowed: %s (not name)", key,
                   allowed);
            return;
        }
        set_value(L, where, key, k, &L->full->cfg.sites[idx], v, 0);
        return;
    }
    const gt_key_t *k = find_row(gt_topo_keys, key);
    if (!k || !(is_scalar_row(k) || k->type == GT_KEY_URLLIST)) {
        char parent[200];
        snprintf(parent, sizeof parent, "%.*s", (int)parent_len(key), key);
        suggest(gt_topo_keys, parent, last_component(key), hint, sizeof hint);
        report(L, where,
               "key '%s': unknown key%s; allowed: a key listed by `geotrain config "
               "reference`",
               key, hint);
        return;
    }
    if (k->type == GT_KEY_URLLIST)
        set_url_list(L, where, v);
    else if (set_value(L, where, k->path, k, &L->full->cfg, v, 0) != 0)
        return;
    L->full->src[k - gt_topo_keys] = (gt_src_t){GT_SRC_FLAG, 0, 0};
}

/* ---- checks across keys ---- */

static const gt_key_t *row_of(const char *path)
{
    return find_row(gt_topo_keys, path);
}

/* The position to blame for a check on `a` (and `b`): the first that is not a default. */
static void blame(loader_t *L, const char *a, const char *b, char *buf, size_t len)
{
    const gt_key_t *ka = row_of(a), *kb = b ? row_of(b) : NULL;
    const gt_src_t *sa = &L->full->src[ka - gt_topo_keys];
    if (sa->kind != GT_SRC_DEFAULT || !kb) {
        where_src(L, sa, ka, buf, len);
        return;
    }
    where_src(L, &L->full->src[kb - gt_topo_keys], kb, buf, len);
}

/* 1 when host:port's host is a wildcard: it binds every interface, and no peer can dial it. */
static int wildcard_host(const char *addr)
{
    const char *colon = strrchr(addr, ':');
    size_t n = colon ? (size_t)(colon - addr) : strlen(addr);
    return (n == 7 && strncmp(addr, "0.0.0.0", 7) == 0) ||
           (n == 4 && strncmp(addr, "[::]", 4) == 0) || (n == 2 && strncmp(addr, "::", 2) == 0) ||
           (n == 1 && addr[0] == '*');
}

/* A site's listener, what its peers dial, and where it serves metrics. */
static void check_site_addresses(loader_t *L, uint32_t i, char *where, size_t len)
{
    const gt_topo_site_t *s = &L->full->cfg.sites[i];
    snprintf(where, len, "%s:%u:%u", L->name, s->line, 1u);
    if (s->address[0] && wildcard_host(s->address) && !s->advertise[0])
        report(L, where,
               "key 'sites[%u].advertise': missing: site '%s' binds '%s' (every interface), "
               "which its peers cannot dial; allowed: the host:port its peers reach it at",
               i, s->name, s->address);
    if (s->advertise[0] && wildcard_host(s->advertise))
        report(L, where,
               "key 'sites[%u].advertise': '%s' is a wildcard, which its peers cannot dial; "
               "allowed: the host:port its peers reach site '%s' at",
               i, s->advertise, s->name);
}

/* membership.tls: the files are there and readable, a certificate comes with its key, and the
 * endpoints they are for speak TLS. */
static void check_tls(loader_t *L, char *where, size_t len)
{
    const gt_topo_membership_t *m = &L->full->cfg.membership;
    const char *paths[3] = {m->tls_ca, m->tls_cert, m->tls_key};
    const char *keys[3] = {"membership.tls.ca", "membership.tls.cert", "membership.tls.key"};
    int any = 0;
    for (int i = 0; i < 3; i++) {
        if (!paths[i][0]) continue;
        any = 1;
        if (access(paths[i], R_OK) != 0) {
            blame(L, keys[i], NULL, where, len);
            report(L, where, "key '%s': cannot read '%s': %s; allowed: a readable PEM file",
                   keys[i], paths[i], strerror(errno));
        }
    }
    if (!m->tls_cert[0] != !m->tls_key[0]) {
        const char *given = m->tls_cert[0] ? keys[1] : keys[2];
        blame(L, given, NULL, where, len);
        report(L, where, "key '%s': given without %s; allowed: a client certificate with its key",
               given, m->tls_cert[0] ? keys[2] : keys[1]);
    }
    for (uint32_t i = 0; !any && !m->plain_http && i < m->n_endpoints; i++) {
        if (strncmp(m->endpoints[i], "http://", 7) != 0) continue;
        blame(L, "membership.endpoints", NULL, where, len);
        report(L, where,
               "key 'membership.endpoints': '%s' is plain HTTP: the run's membership would "
               "travel in the clear, readable and writable by any host on the way; allowed: "
               "https:// endpoints with membership.tls (docs/deploy.md), or "
               "membership.plain_http: true to accept plain HTTP on a network you trust",
               m->endpoints[i]);
        break;
    }
    for (uint32_t i = 0; any && i < m->n_endpoints; i++) {
        if (strncmp(m->endpoints[i], "https://", 8) == 0) continue;
        blame(L, "membership.endpoints", NULL, where, len);
        report(L, where,
               "key 'membership.endpoints': '%s' is plain HTTP, and membership.tls is set; "
               "allowed: https:// endpoints",
               m->endpoints[i]);
        break;
    }
}

static void check_cross(loader_t *L)
{
    gt_topo_config_t *c = &L->full->cfg;
    char where[GT_TOPO_PATH_MAX + 64];
    if (c->n_sites == 0 && L->n_errors == 0) {
        report(L, (snprintf(where, sizeof where, "%s:1:1", L->name), where),
               "key 'sites': no sites defined; allowed: a list of at least one site "
               "(- name: ..., address: host:port)");
    }
    uint64_t lcm = 1; /* of the sites' ranks so far: the run's WAN groups */
    int groups_reported = 0;
    for (uint32_t i = 0; i < c->n_sites; i++) {
        for (uint32_t j = 0; j < i; j++) {
            if (c->sites[i].name[0] && strcmp(c->sites[i].name, c->sites[j].name) == 0) {
                snprintf(where, sizeof where, "%s:%u:%u", L->name, L->site_name_line[i], 1u);
                report(L, where,
                       "key 'sites[%u].name': duplicate site name '%s' (first at line "
                       "%u); allowed: a unique name",
                       i, c->sites[i].name, L->site_name_line[j]);
            }
            /* What peers dial must differ (two sites may bind 0.0.0.0:7000 on two hosts). */
            const char *ai = gt_topo_site_advertised(&c->sites[i]);
            const char *aj = gt_topo_site_advertised(&c->sites[j]);
            const char *port = strrchr(ai, ':');
            if (ai[0] && port && strcmp(port, ":0") != 0 && strcmp(ai, aj) == 0) {
                snprintf(where, sizeof where, "%s:%u:%u", L->name, c->sites[i].line, 1u);
                report(L, where,
                       "key 'sites[%u].%s': '%s' is also site '%s''s address; "
                       "allowed: a distinct host:port per site (or port 0)",
                       i, c->sites[i].advertise[0] ? "advertise" : "address", ai, c->sites[j].name);
            }
        }
        check_site_addresses(L, i, where, sizeof where);
        /* Sites may have different ranks: the run has G = lcm of them WAN groups (group g:
         * lanes l mod G = g), and rank k of a site of R ranks runs the groups g mod R = k. */
        uint64_t a = lcm, b = c->sites[i].ranks ? c->sites[i].ranks : 1;
        while (b) { /* gcd */
            uint64_t t = a % b;
            a = b;
            b = t;
        }
        if (lcm <= GT_TOPO_MAX_GROUPS) lcm = lcm / a * (c->sites[i].ranks ? c->sites[i].ranks : 1);
        if (c->n_sites > 1 && lcm > GT_TOPO_MAX_GROUPS && !groups_reported) {
            snprintf(where, sizeof where, "%s:%u:%u", L->name, c->sites[i].line, 1u);
            report(L, where,
                   "key 'sites[%u].ranks': %u ranks makes the run's WAN groups (the least "
                   "common multiple of every site's ranks) exceed %d; allowed: rank counts "
                   "whose least common multiple is at most %d (e.g. powers of two)",
                   i, c->sites[i].ranks, GT_TOPO_MAX_GROUPS, GT_TOPO_MAX_GROUPS);
            groups_reported = 1;
        }
        if (c->sites[i].ranks % c->local.tensor_parallel != 0) {
            snprintf(where, sizeof where, "%s:%u:%u", L->name, c->sites[i].line, 1u);
            report(L, where,
                   "key 'sites[%u].ranks': %u ranks is not a multiple of "
                   "local.tensor_parallel = %u; allowed: a multiple of it",
                   i, c->sites[i].ranks, c->local.tensor_parallel);
        }
    }
    if (c->security.admin_key[0]) {
        unsigned char k[32];
        size_t len = 0;
        const char *end = NULL;
        if (strlen(c->security.admin_key) != 44 ||
            sodium_base642bin(k, sizeof k, c->security.admin_key, 44, NULL, &len, &end,
                              sodium_base64_VARIANT_ORIGINAL) != 0 ||
            len != 32 || *end) {
            blame(L, "security.admin_key", NULL, where, sizeof where);
            report(L, where,
                   "key 'security.admin_key': not a key; allowed: 44 characters of base64 (the "
                   "32-byte Ed25519 public key `geotrain keygen --admin` prints)");
        }
    } else if (c->outer.site_slots > c->n_sites && c->security.mode == GT_SECURITY_ENCRYPTED) {
        /* An added site's key comes through etcd: without the operator's signature, anyone who
         * can write there could admit a site of its own (docs/security.md). */
        blame(L, "outer.site_slots", NULL, where, sizeof where);
        report(L, where,
               "key 'outer.site_slots': %u slots for %u sites need security.admin_key (the key "
               "that signs the sites added into them; `geotrain keygen --admin`); allowed: "
               "0, or an admin key with the slots",
               c->outer.site_slots, c->n_sites);
    }
    if (c->outer.site_slots && c->outer.site_slots < c->n_sites) {
        blame(L, "outer.site_slots", NULL, where, sizeof where);
        report(L, where,
               "key 'outer.site_slots': %u slots for %u configured sites; allowed: 0, or %u to %d "
               "(the configured sites and those that may be added)",
               c->outer.site_slots, c->n_sites, c->n_sites, GT_TOPO_MAX_SITES);
    }
    check_tls(L, where, sizeof where);
    if (!c->wan.data_port_min != !c->wan.data_port_max ||
        c->wan.data_port_min > c->wan.data_port_max) {
        blame(L, "wan.data_port_min", "wan.data_port_max", where, sizeof where);
        report(L, where,
               "key 'wan.data_port_min': %u with wan.data_port_max = %u; allowed: both 0, or "
               "1 <= data_port_min <= data_port_max",
               c->wan.data_port_min, c->wan.data_port_max);
    }
    uint32_t G = gt_topo_wan_groups(c);
    if (c->n_sites > 1 && G && c->wan.lanes < G) {
        blame(L, "wan.lanes", NULL, where, sizeof where);
        report(L, where,
               "key 'wan.lanes': %u lanes for %u WAN groups (the least common multiple of the "
               "sites' ranks); allowed: at least %u (each group carries its own lanes)",
               c->wan.lanes, G, G);
    }
    if (c->outer.deadline_min_ms > c->outer.deadline_max_ms) {
        blame(L, "outer.deadline_min_ms", "outer.deadline_max_ms", where, sizeof where);
        report(L, where,
               "key 'outer.deadline_min_ms': %u is above outer.deadline_max_ms = %u; "
               "allowed: at most deadline_max_ms",
               c->outer.deadline_min_ms, c->outer.deadline_max_ms);
    }
    if (c->outer.optimizer == GT_OUTER_SPARSELOCO && !c->codec.error_feedback) {
        /* SparseLoCo's decayed residual stands in for outer momentum: without error feedback
         * there is no residual, and what top-k leaves out is lost every round. */
        blame(L, "outer.optimizer", "codec.error_feedback", where, sizeof where);
        report(L, where,
               "key 'outer.optimizer': sparseloco needs codec.error_feedback: true (its decayed "
               "residual stands in for outer momentum); allowed: error_feedback true, or "
               "optimizer nesterov or average");
    }
    if (c->outer.overlap_steps >= c->inner.steps) {
        blame(L, "outer.overlap_steps", "inner.steps", where, sizeof where);
        report(L, where,
               "key 'outer.overlap_steps': %u is not below inner.steps = %u; allowed: "
               "0 to inner.steps - 1",
               c->outer.overlap_steps, c->inner.steps);
    }
    if (c->outer.catch_up && (c->outer.mode == GT_OUTER_SYNC_DP || c->outer.fragments > 1)) {
        /* A round that ends early jumps the step counter to the round's end; with staggered
         * fragments a round has no one end, and sync-dp has no rounds to end. */
        blame(L, "outer.catch_up",
              c->outer.mode == GT_OUTER_SYNC_DP ? "outer.mode" : "outer.fragments", where,
              sizeof where);
        report(L, where,
               "key 'outer.catch_up': true with %s; allowed: false, or outer.mode: diloco with "
               "outer.fragments: 1",
               c->outer.mode == GT_OUTER_SYNC_DP ? "outer.mode: sync-dp" : "outer.fragments > 1");
    }
    if (c->outer.fragments > 1) {
        /* Streaming DiLoCo (docs/diloco.md#streaming-fragments): fragment f syncs at steps
         * (r + 1)·H − (F − 1 − f)·H/F, so H/F must be whole, τ must end before the next
         * fragment's sync, and every rank needs a lane of every fragment. */
        uint32_t F = c->outer.fragments, Rmin = UINT32_MAX, Gf = G ? G : 1;
        for (uint32_t i = 0; i < c->n_sites; i++)
            if (c->sites[i].ranks && c->sites[i].ranks < Rmin) Rmin = c->sites[i].ranks;
        if (Rmin == UINT32_MAX) Rmin = 1;
        const char *why = NULL;
        char buf[160];
        if (F > 64)
            why = "at most 64 fragments";
        else if (c->inner.steps % F != 0) {
            snprintf(buf, sizeof buf,
                     "a divisor of inner.steps = %u (each fragment syncs H/F "
                     "steps after the previous one)",
                     c->inner.steps);
            why = buf;
        } else if ((uint64_t)c->outer.overlap_steps * F >= c->inner.steps) {
            snprintf(buf, sizeof buf,
                     "F with outer.overlap_steps x F < inner.steps (tau = %u "
                     "must be below H/F = %u)",
                     c->outer.overlap_steps, c->inner.steps / F);
            why = buf;
        } else if ((uint64_t)F * Gf > c->wan.lanes) {
            snprintf(buf, sizeof buf,
                     "F with F x G <= wan.lanes = %u (G = %u WAN groups; every group "
                     "carries a lane of every fragment)",
                     c->wan.lanes, Gf);
            why = buf;
        } else if ((uint64_t)F * (Gf / Rmin) > 64) {
            snprintf(buf, sizeof buf,
                     "F with F x G / ranks <= 64 (outer engines per rank; G = %u, a site "
                     "has %u ranks)",
                     Gf, Rmin);
            why = buf;
        } else if (c->outer.mode == GT_OUTER_SYNC_DP)
            why = "1 with outer.mode: sync-dp (every step is a round)";
        else if (c->run.checkpoint_every)
            why = "1 with run.checkpoint_every (outer-state checkpoints of staggered fragments "
                  "are not built yet)";
        if (why) {
            blame(L, "outer.fragments", NULL, where, sizeof where);
            report(L, where, "key 'outer.fragments': %u fragments; allowed: %s", F, why);
        }
    }
    if ((uint64_t)c->membership.heartbeat_ms * 2 > (uint64_t)c->membership.lease_ttl_s * 1000) {
        blame(L, "membership.heartbeat_ms", "membership.lease_ttl_s", where, sizeof where);
        report(L, where,
               "key 'membership.heartbeat_ms': %u ms is more than half the lease TTL "
               "(%u s); allowed: at most lease_ttl_s x 500",
               c->membership.heartbeat_ms, c->membership.lease_ttl_s);
    }
    if (c->membership.prefix[0] != '/') {
        blame(L, "membership.prefix", NULL, where, sizeof where);
        report(L, where,
               "key 'membership.prefix': invalid value '%s'; allowed: a path that "
               "starts with /",
               c->membership.prefix);
    }
    uint32_t bs = c->codec.block_size;
    if (bs & (bs - 1)) {
        blame(L, "codec.block_size", NULL, where, sizeof where);
        report(L, where,
               "key 'codec.block_size': invalid value '%u'; allowed: a power of two "
               "in [8, 65536]",
               bs);
    }
    const gt_topo_link_params_t *e = &c->wan.emulation.link;
    if (e->jitter_ms > e->latency_ms) {
        blame(L, "wan.emulation.jitter_ms", "wan.emulation.latency_ms", where, sizeof where);
        report(L, where,
               "key 'wan.emulation.jitter_ms': %g ms is more than latency_ms = %g; "
               "allowed: at most latency_ms",
               e->jitter_ms, e->latency_ms);
    }
    const gt_topo_model_t *m = &c->model;
    if (m->d_model && m->n_head && m->d_model % m->n_head != 0) {
        blame(L, "model.n_head", "model.d_model", where, sizeof where);
        report(L, where,
               "key 'model.n_head': %u does not divide model.d_model = %u; allowed: a "
               "divisor of d_model",
               m->n_head, m->d_model);
    }
    if (m->seq_len && m->context_length && m->seq_len > m->context_length) {
        blame(L, "model.seq_len", "model.context_length", where, sizeof where);
        report(L, where,
               "key 'model.seq_len': %u is longer than model.context_length = %u; "
               "allowed: at most context_length",
               m->seq_len, m->context_length);
    }
    if ((c->data.kind == GT_DATA_TEXT || c->data.kind == GT_DATA_SHARDS) && !c->data.path[0]) {
        blame(L, "data.path", "data.kind", where, sizeof where);
        report(L, where, "key 'data.path': missing for data.kind %s; allowed: a path",
               c->data.kind == GT_DATA_TEXT ? "text" : "shards");
    }
}

/* Links inherit what they do not set from wan.emulation (after env and flags). */
static void resolve_links(loader_t *L)
{
    gt_topo_config_t *c = &L->full->cfg;
    const gt_topo_link_params_t *e = &c->wan.emulation.link;
    for (uint32_t i = 0; i < c->n_links; i++) {
        const gt_topo_link_params_t *r = &L->link_raw[i];
        gt_topo_link_params_t *p = &c->links[i].params;
        p->latency_ms = r->latency_ms >= 0 ? r->latency_ms : e->latency_ms;
        p->jitter_ms = r->jitter_ms >= 0 ? r->jitter_ms : e->jitter_ms;
        p->bandwidth_mbps = r->bandwidth_mbps >= 0 ? r->bandwidth_mbps : e->bandwidth_mbps;
        p->loss = r->loss >= 0 ? r->loss : e->loss;
        p->n_cuts = r->n_cuts;
        memcpy(p->cuts, r->cuts, sizeof p->cuts);
        if (p->jitter_ms > p->latency_ms) {
            char where[GT_TOPO_PATH_MAX + 32];
            snprintf(where, sizeof where, "%s:1:1", L->name);
            report(L, where,
                   "key 'links[%u].jitter_ms': %g ms is more than its latency %g ms; "
                   "allowed: at most latency_ms",
                   i, p->jitter_ms, p->latency_ms);
        }
    }
}

/* Sites without an explicit secret_key use security.key_dir/NAME.key. */
static void resolve_sites(loader_t *L)
{
    gt_topo_config_t *c = &L->full->cfg;
    for (uint32_t i = 0; i < c->n_sites; i++) {
        gt_topo_site_t *s = &c->sites[i];
        if (!s->secret_key[0] &&
            snprintf(s->secret_key, sizeof s->secret_key, "%s/%s.key", c->security.key_dir,
                     s->name) >= (int)sizeof s->secret_key) {
            char where[GT_TOPO_PATH_MAX + 32];
            snprintf(where, sizeof where, "%s:%u:1", L->name, s->line);
            report(L, where,
                   "key 'sites[%u].secret_key': the default path is too long; allowed: "
                   "a shorter security.key_dir",
                   i);
        }
    }
}

/* ---- the first pass: what the document may contain ---- */

/* "!!python/object" for "tag:yaml.org,2002:python/object", as the user wrote it. */
static const char *short_tag(const char *tag, clip_t *c)
{
    static const char core[] = "tag:yaml.org,2002:";
    char buf[MSG_VALUE_MAX + 8];
    if (strncmp(tag, core, sizeof core - 1) != 0) return clip(tag, c);
    snprintf(buf, sizeof buf, "!!%s", tag + sizeof core - 1);
    return clip(buf, c);
}

static void report_event(loader_t *L, const yaml_mark_t *m, const char *fmt, const char *arg)
{
    char where[GT_TOPO_PATH_MAX + 32];
    snprintf(where, sizeof where, "%s:%lu:%lu", L->name, (unsigned long)m->line + 1,
             (unsigned long)m->column + 1);
    report(L, where, fmt, arg);
}

/* One pass over libyaml's event stream, in constant memory, before the document is built:
 * one document only, no tags, no aliases, nesting at most GT_TOPO_DEPTH_MAX. A syntax error,
 * a second document or too deep a nesting ends the pass at once (the rest of the file is never
 * scanned); tags and aliases are each reported and the pass goes on. Returns 0 when the file
 * may be loaded. */
static int precheck(loader_t *L, const char *text, size_t len)
{
    yaml_parser_t p;
    yaml_event_t ev;
    int depth = 0, docs = 0, done = 0, errors_before = L->n_errors;
    if (!yaml_parser_initialize(&p)) {
        report(L, L->name, "out of memory starting the YAML parser");
        return -1;
    }
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    while (!done) {
        if (!yaml_parser_parse(&p, &ev)) {
            report_event(L, &p.problem_mark, "YAML syntax error: %s; allowed: valid YAML",
                         p.problem ? p.problem : "unknown problem");
            break;
        }
        const unsigned char *tag = NULL;
        clip_t ct;
        switch (ev.type) {
        case YAML_DOCUMENT_START_EVENT:
            if (++docs > 1) {
                report_event(L, &ev.start_mark,
                             "a second YAML document%s; allowed: one document per file",
                             ev.data.document_start.implicit ? "" : " (after '---')");
                done = 1;
            }
            break;
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            tag = ev.type == YAML_MAPPING_START_EVENT ? ev.data.mapping_start.tag
                                                      : ev.data.sequence_start.tag;
            if (++depth > GT_TOPO_DEPTH_MAX) {
                char lim[32];
                snprintf(lim, sizeof lim, "%d", GT_TOPO_DEPTH_MAX);
                report_event(L, &ev.start_mark,
                             "lists and mappings nested too deep; allowed: at most %s levels", lim);
                done = 1;
            }
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT: depth--; break;
        case YAML_SCALAR_EVENT: tag = ev.data.scalar.tag; break;
        case YAML_ALIAS_EVENT:
            report_event(L, &ev.start_mark,
                         "alias '*%s': aliases are not supported; allowed: the value written out",
                         clip((const char *)ev.data.alias.anchor, &ct));
            break;
        case YAML_STREAM_END_EVENT: done = 1; break;
        default: break;
        }
        if (tag && ev.type != YAML_DOCUMENT_START_EVENT)
            report_event(L, &ev.start_mark,
                         "tag '%s' is not supported; allowed: plain YAML values without tags",
                         short_tag((const char *)tag, &ct));
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    return L->n_errors == errors_before && done ? 0 : -1;
}

/* ---- entry points ---- */

static void report_size(FILE *err, const char *name, unsigned long long size)
{
    fprintf(err,
            "%s: %llu bytes, over the limit of %u bytes; allowed: a config file of at most "
            "%u KiB\n",
            name, size, GT_TOPO_FILE_MAX, GT_TOPO_FILE_MAX >> 10);
}

gt_status_t gt_topo_load_string(const char *text, size_t len, const char *name,
                                const gt_topo_load_params_t *params, gt_topo_config_t **cfg_p)
{
    gt_topo_load_params_t dp = GT_TOPO_LOAD_PARAMS_INIT;
    if (!params) params = &dp;
    if (sodium_init() < 0) return GT_ERR_INTERNAL;
    loader_t L = {name ? name : "(config)",
                  params->err ? params->err : stderr,
                  0,
                  NULL,
                  NULL,
                  NULL,
                  NULL,
                  {0}};
    if (len > GT_TOPO_FILE_MAX) {
        report_size(L.err, L.name, (unsigned long long)len);
        return GT_ERR_CONFIG;
    }
    yaml_parser_t parser;
    yaml_document_t doc;
    int have_doc = 0;
    char where[GT_TOPO_PATH_MAX + 32];
    gt_status_t st = GT_ERR_CONFIG;

    L.full = calloc(1, sizeof *L.full);
    if (!L.full || !(L.full->src = calloc(gt_topo_key_count(gt_topo_keys), sizeof(gt_src_t)))) {
        if (L.full) free(L.full);
        return GT_ERR_NOMEM;
    }
    snprintf(L.full->cfg.source, sizeof L.full->cfg.source, "%s", L.name);
    crypto_shorthash_keygen(L.hkey);
    apply_defaults(&L, gt_topo_keys, &L.full->cfg);
    if (precheck(&L, text, len) != 0) goto out;

    if (!yaml_parser_initialize(&parser)) {
        st = GT_ERR_NOMEM;
        goto out;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        snprintf(where, sizeof where, "%s:%lu:%lu", L.name,
                 (unsigned long)parser.problem_mark.line + 1,
                 (unsigned long)parser.problem_mark.column + 1);
        report(&L, where, "YAML syntax error: %s%s%s; allowed: valid YAML",
               parser.problem ? parser.problem : "unknown problem", parser.context ? " " : "",
               parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        goto out;
    }
    have_doc = 1;
    L.doc = &doc;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root || is_null_scalar(root)) {
        snprintf(where, sizeof where, "%s:1:1", L.name);
        report(&L, where,
               "key '(top level)': the file is empty; allowed: a mapping with at least "
               "a 'sites:' list");
    } else {
        walk_top(&L, root);
    }
    yaml_parser_delete(&parser);

    if (params->use_env) apply_env(&L);
    for (size_t i = 0; i < params->n_sets; i++) apply_flag(&L, params->sets[i]);
    if (L.n_errors == 0) check_cross(&L);
    if (L.n_errors == 0) resolve_links(&L);
    if (L.n_errors == 0) resolve_sites(&L);
    if (L.n_errors == 0) st = GT_OK;

out:
    if (have_doc) yaml_document_delete(&doc);
    free(L.link_raw);
    free(L.site_name_line);
    if (st != GT_OK) {
        if (L.n_errors > MAX_REPORTED_ERRORS)
            fprintf(L.err, "%s: %d more errors not shown\n", L.name,
                    L.n_errors - MAX_REPORTED_ERRORS);
        gt_topo_destroy(&L.full->cfg);
        return st;
    }
    *cfg_p = &L.full->cfg;
    return GT_OK;
}

gt_status_t gt_topo_load(const char *path, const gt_topo_load_params_t *params,
                         gt_topo_config_t **cfg_p)
{
    FILE *err = params && params->err ? params->err : stderr;
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(err, "%s:1:1: cannot open the config file: %s\n", path, strerror(errno));
        return errno == ENOENT ? GT_ERR_NOT_FOUND : GT_ERR_IO;
    }
    /* A regular file is refused by its size before anything is read; a pipe or a file that
     * grows is read to one byte past the limit at most. */
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) &&
        (unsigned long long)sb.st_size > GT_TOPO_FILE_MAX) {
        report_size(err, path, (unsigned long long)sb.st_size);
        fclose(f);
        return GT_ERR_CONFIG;
    }
    char *buf = malloc((size_t)GT_TOPO_FILE_MAX + 1);
    if (!buf) {
        fclose(f);
        return GT_ERR_NOMEM;
    }
    size_t len = 0, n;
    while (len <= GT_TOPO_FILE_MAX &&
           (n = fread(buf + len, 1, (size_t)GT_TOPO_FILE_MAX + 1 - len, f)) > 0)
        len += n;
    int rerr = ferror(f);
    fclose(f);
    if (rerr) {
        fprintf(err, "%s:1:1: cannot read the config file\n", path);
        free(buf);
        return GT_ERR_IO;
    }
    if (len > GT_TOPO_FILE_MAX) {
        fprintf(err,
                "%s: more than %u bytes, over the limit of %u bytes; allowed: a config "
                "file of at most %u KiB\n",
                path, GT_TOPO_FILE_MAX, GT_TOPO_FILE_MAX, GT_TOPO_FILE_MAX >> 10);
        free(buf);
        return GT_ERR_CONFIG;
    }
    gt_status_t st = gt_topo_load_string(buf, len, path, params, cfg_p);
    free(buf);
    return st;
}

void gt_topo_destroy(gt_topo_config_t *cfg)
{
    if (!cfg) return;
    gt_topo_full_t *full = (gt_topo_full_t *)cfg;
    free(cfg->sites);
    free(cfg->links);
    free(full->src);
    free(full);
}

uint32_t gt_topo_site_slots(const gt_topo_config_t *cfg)
{
    return cfg->outer.site_slots > cfg->n_sites ? cfg->outer.site_slots : cfg->n_sites;
}

gt_status_t gt_topo_open_slots(const gt_topo_config_t *cfg, gt_topo_config_t **copy_p)
{
    if (!cfg || !copy_p) return GT_ERR_INVALID;
    const gt_topo_full_t *from = (const gt_topo_full_t *)cfg;
    uint32_t slots = gt_topo_site_slots(cfg);
    size_t n_keys = 0;
    while (gt_topo_keys[n_keys].path) n_keys++;
    gt_topo_full_t *full = calloc(1, sizeof *full);
    gt_topo_site_t *sites = calloc(slots, sizeof *sites);
    gt_topo_link_t *links = calloc(cfg->n_links ? cfg->n_links : 1, sizeof *links);
    gt_src_t *src = calloc(n_keys ? n_keys : 1, sizeof *src);
    if (!full || !sites || !links || !src) {
        free(full);
        free(sites);
        free(links);
        free(src);
        return GT_ERR_NOMEM;
    }
    full->cfg = *cfg;
    memcpy(sites, cfg->sites, cfg->n_sites * sizeof *sites);
    for (uint32_t i = cfg->n_sites; i < slots; i++) sites[i].vacant = 1;
    if (cfg->n_links) memcpy(links, cfg->links, cfg->n_links * sizeof *links);
    if (from->src) memcpy(src, from->src, n_keys * sizeof *src);
    full->cfg.sites = sites;
    full->cfg.n_sites = slots;
    full->cfg.links = links;
    full->src = src;
    *copy_p = &full->cfg;
    return GT_OK;
}

int gt_topo_site_vacant(const gt_topo_site_t *s)
{
    return __atomic_load_n(&s->vacant, __ATOMIC_ACQUIRE);
}

gt_status_t gt_topo_take_slot(gt_topo_config_t *cfg, uint32_t index, const char *name,
                              uint32_t ranks, const uint8_t *public_key)
{
    uint32_t other;
    if (!cfg || index >= cfg->n_sites || !gt_topo_site_vacant(&cfg->sites[index]) || !name ||
        !*name || strlen(name) >= GT_TOPO_NAME_MAX ||
        gt_topo_site_index(cfg, name, &other) == GT_OK)
        return GT_ERR_INVALID;
    gt_topo_site_t *s = &cfg->sites[index];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->ranks = ranks;
    s->has_public_key = public_key != NULL;
    if (public_key) memcpy(s->public_key, public_key, sizeof s->public_key);
    s->added = 1;
    __atomic_store_n(&s->vacant, 0, __ATOMIC_RELEASE); /* the fields above first */
    return GT_OK;
}

gt_status_t gt_topo_site_index(const gt_topo_config_t *cfg, const char *name, uint32_t *index_p)
{
    for (uint32_t i = 0; i < cfg->n_sites; i++) {
        if (gt_topo_site_vacant(&cfg->sites[i])) continue;
        if (strcmp(cfg->sites[i].name, name) == 0) {
            *index_p = i;
            return GT_OK;
        }
    }
    return GT_ERR_NOT_FOUND;
}

const char *gt_topo_site_advertised(const gt_topo_site_t *site)
{
    return site->advertise[0] ? site->advertise : site->address;
}

gt_status_t gt_topo_addr_split(const char *addr, char *host, size_t host_cap, uint16_t *port_p)
{
    if (!addr || !host || !port_p) return GT_ERR_INVALID;
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr) return GT_ERR_INVALID;
    size_t hl = (size_t)(colon - addr);
    const char *h = addr;
    if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') { /* [v6]:port */
        h++;
        hl -= 2;
    }
    if (hl == 0) return GT_ERR_INVALID;
    if (hl + 1 > host_cap) return GT_ERR_OVERFLOW;
    const char *p = colon + 1;
    unsigned long port = 0;
    if (!*p) return GT_ERR_INVALID;
    for (; *p; p++) { /* digits only: strtoul would take a sign or leading blanks */
        if (*p < '0' || *p > '9') return GT_ERR_INVALID;
        port = port * 10 + (unsigned long)(*p - '0');
        if (port > 65535) return GT_ERR_INVALID;
    }
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port_p = (uint16_t)port;
    return GT_OK;
}

gt_status_t gt_topo_metrics_address(const gt_topo_config_t *cfg, uint32_t site, uint32_t rank,
                                    char *buf, size_t len)
{
    if (!cfg || site >= cfg->n_sites || !buf || len == 0) return GT_ERR_INVALID;
    const char *own = cfg->sites[site].metrics;
    const char *addr = own[0] ? own : cfg->metrics.listen;
    buf[0] = '\0';
    const char *colon = strrchr(addr, ':');
    if (!addr[0] || !colon) return GT_OK;
    unsigned long port = strtoul(colon + 1, NULL, 10);
    if (port == 0) return GT_OK;
    uint32_t rmax = 1;
    for (uint32_t i = 0; i < cfg->n_sites; i++)
        if (cfg->sites[i].ranks > rmax) rmax = cfg->sites[i].ranks;
    unsigned long p = port + rank + (own[0] ? 0ul : (unsigned long)site * rmax);
    if (p > 65535) {
        GT_ERROR("site %s: its metrics port %lu (%s%s, rank %u) is past 65535",
                 cfg->sites[site].name, p, own[0] ? "sites[].metrics " : "metrics.listen ", addr,
                 rank);
        return GT_ERR_CONFIG;
    }
    int n = snprintf(buf, len, "%.*s:%lu", (int)(colon - addr), addr, p);
    if (n < 0 || (size_t)n >= len) return GT_ERR_OVERFLOW;
    return GT_OK;
}

void gt_topo_link_params(const gt_topo_config_t *cfg, uint32_t a, uint32_t b,
                         gt_topo_link_params_t *params_p)
{
    uint32_t lo = a < b ? a : b, hi = a < b ? b : a;
    for (uint32_t i = 0; i < cfg->n_links; i++) {
        if (cfg->links[i].a == lo && cfg->links[i].b == hi) {
            *params_p = cfg->links[i].params;
            return;
        }
    }
    *params_p = cfg->wan.emulation.link;
}
