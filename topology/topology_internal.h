/* topology_internal.h — the sites.yaml schema table shared by the loader, the printer and
 * the reference generator (internal to topology/).
 *
 * Every key is one row: its dotted path, its type, where it lives in the config structs, its
 * range or allowed words, its default (as YAML text, parsed by the same code as the file, so
 * the documented default is the real one) and its meaning. Three row sets exist: top-level
 * keys (relative to gt_topo_config_t), per-site keys (gt_topo_site_t) and per-link keys
 * (gt_topo_link_params_t).
 */
#ifndef GT_TOPOLOGY_INTERNAL_H
#define GT_TOPOLOGY_INTERNAL_H

#include "gt_topology.h"

typedef enum {
    GT_KEY_SECTION, /* a mapping of further keys */
    GT_KEY_STR,     /* free text (bounded) */
    GT_KEY_NAME,    /* [A-Za-z0-9_.-]+ */
    GT_KEY_PATH,    /* a file or folder path */
    GT_KEY_ADDR,    /* host:port */
    GT_KEY_U32,
    GT_KEY_U64,
    GT_KEY_INT,
    GT_KEY_F64,
    GT_KEY_BOOL,
    GT_KEY_ENUM,    /* one of `words`, stored as its index (int) */
    GT_KEY_WORD,    /* one of `words`, stored as the text */
    GT_KEY_B64KEY,  /* a base64 X25519 public key */
    GT_KEY_URLLIST, /* a sequence of etcd endpoint URLs */
    GT_KEY_SITES,   /* the sequence of site mappings */
    GT_KEY_LINKS,   /* the sequence of link mappings */
    GT_KEY_PAIR,    /* links[].between: a sequence of two site names */
    GT_KEY_CUTS     /* links[].cuts: a sequence of {start_s, duration_s} */
} gt_key_type_t;

typedef struct {
    const char *path; /* "outer.lr"; per-site/per-link rows: "name", "latency_ms" */
    gt_key_type_t type;
    size_t offset;     /* into the row set's struct */
    size_t size;       /* for text fields: buffer size */
    double min, max;   /* numeric range */
    int min_open;      /* 1: min itself not allowed */
    int max_open;      /* 1: max itself not allowed */
    const char *words; /* ENUM/WORD: "a|b|c" */
    const char *def;   /* default as YAML text; NULL = required (or inherit for links) */
    const char *doc;   /* one line for the reference */
} gt_key_t;

extern const gt_key_t gt_topo_keys[];      /* NULL-path terminated */
extern const gt_key_t gt_topo_site_keys[]; /* NULL-path terminated */
extern const gt_key_t gt_topo_link_keys[]; /* NULL-path terminated */

/* Where a value came from, for messages and for gt_topo_print. */
typedef enum { GT_SRC_DEFAULT = 0, GT_SRC_FILE, GT_SRC_ENV, GT_SRC_FLAG } gt_src_kind_t;

typedef struct {
    gt_src_kind_t kind;
    uint32_t line, col; /* 1-based, for GT_SRC_FILE */
} gt_src_t;

/* The config plus where each top-level key came from (gt_topo_config_t is the first member,
 * so a gt_topo_config_t * from gt_topo_load points at one of these). */
typedef struct {
    gt_topo_config_t cfg;
    gt_src_t *src; /* one per row of gt_topo_keys */
} gt_topo_full_t;

/* Number of rows in a row set. */
size_t gt_topo_key_count(const gt_key_t *rows);
/* Describes what a row allows ("an integer in [1, 1000]", "one of: ucx, libfabric"). */
void gt_topo_key_allowed(const gt_key_t *k, char *buf, size_t len);
/* The env variable for a top-level row: GT_ + upper(path), '.' -> '_'. */
void gt_topo_key_env_name(const gt_key_t *k, char *buf, size_t len);
/* Shortest decimal text that reads back as exactly v. */
void gt_topo_format_double(double v, char *buf, size_t len);
/* Formats a row's current value from its struct as YAML text. */
void gt_topo_key_format(const gt_key_t *k, const void *base, char *buf, size_t len);

/* 1 when row k of `rows` (gt_topo_keys or gt_topo_site_keys) is a site's own: it may differ
 * between the sites of a run and stays out of gt_topo_shared_text (agree.c). */
int gt_topo_key_per_site(const gt_key_t *rows, const gt_key_t *k);

#endif /* GT_TOPOLOGY_INTERNAL_H */
