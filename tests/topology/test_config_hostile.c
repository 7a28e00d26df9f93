/* test_config_hostile.c — the config loader on hostile files (issue 15 item 4): each file is
 * generated here, at run time, under a fresh temporary folder, and loaded through
 * gt_topo_load like `geotrain config check` does.
 *
 * What each case asserts is the error text and its FILE:LINE:COLUMN. The sizes are chosen so
 * that the algorithms this replaced would run for minutes (pairwise duplicate keys over
 * ~260,000 keys: 3.4e10 comparisons; 200,000 levels of nesting), so a regression shows up as
 * the ctest TIMEOUT, not as a timed assertion. */
#include "gt_test.h"
#include "gt_topology.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SITES                       \
    "sites:\n"                      \
    "  - name: a\n"                 \
    "    address: 127.0.0.1:5000\n" \
    "  - name: b\n"                 \
    "    address: 127.0.0.1:5001\n"

static char g_dir[256];

/* Writes `len` bytes of `text` to DIR/name; its path goes to `path`. */
static void write_file(const char *name, const char *text, size_t len, char *path, size_t plen)
{
    snprintf(path, plen, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "wb");
    CHECK_MSG(f != NULL, "cannot create %s", path);
    if (!f) return;
    CHECK(fwrite(text, 1, len, f) == len);
    CHECK(fclose(f) == 0);
}

/* Loads `path`; returns the status, the captured messages in *errs_p (caller frees). */
static gt_status_t load_path(const char *path, char **errs_p)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *err = open_memstream(&buf, &len);
    gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;
    lp.use_env = 0;
    lp.err = err;
    gt_topo_config_t *cfg = NULL;
    gt_status_t st = gt_topo_load(path, &lp, &cfg);
    fclose(err);
    CHECK_MSG(st == GT_OK || cfg == NULL, "a config came back with status %d", st);
    gt_topo_destroy(cfg);
    *errs_p = buf ? buf : strdup("");
    return st;
}

/* Loads `len` bytes of `text` written to DIR/name; *errs_p as above. */
static gt_status_t load_text(const char *name, const char *text, size_t len, char **errs_p)
{
    char path[512];
    write_file(name, text, len, path, sizeof path);
    return load_path(path, errs_p);
}

/* Every line of `errs` is short: no value is repeated in full. */
static void check_lines_short(const char *what, const char *errs, size_t max)
{
    for (const char *l = errs; *l;) {
        size_t n = strcspn(l, "\n");
        CHECK_MSG(n <= max, "[%s] a message line of %zu bytes (at most %zu expected): %.200s…",
                  what, n, max, l);
        l += n + (l[n] == '\n');
    }
}

/* Base-26 name of i, 4 capital letters: AAAA, AAAB, ... (456,976 distinct; no config key has
 * a capital, so every one is unknown). */
static void key4(size_t i, char out[5])
{
    for (int d = 3; d >= 0; d--) {
        out[d] = (char)('A' + i % 26);
        i /= 26;
    }
    out[4] = '\0';
}

/* ~1 MiB of distinct keys in one flow mapping, the first one repeated second. Every key is
 * unknown, so every one is an error: the count of errors not shown proves each key was
 * visited (duplicate check, then the unknown-key check) in a run that finishes. */
static void test_unique_keys(void)
{
    size_t n_keys = (GT_TOPO_FILE_MAX - 16) / 5 - 1; /* "AAAA,": 5 bytes */
    char *text = malloc(GT_TOPO_FILE_MAX);
    size_t o = 0;
    char k[5];
    text[o++] = '{';
    key4(0, k);
    o += (size_t)sprintf(text + o, "%s,", k);
    for (size_t i = 0; i < n_keys; i++) {
        key4(i, k);
        o += (size_t)sprintf(text + o, "%s,", k);
    }
    text[o - 1] = '}';
    text[o++] = '\n';
    CHECK_MSG(o <= GT_TOPO_FILE_MAX, "generated %zu bytes", o);
    char *errs = NULL;
    CHECK_EQ_INT(load_text("keys.yaml", text, o, &errs), GT_ERR_CONFIG);
    CHECK_STR_CONTAINS(errs, "keys.yaml:1:2: key 'AAAA': unknown key");
    CHECK_STR_CONTAINS(errs, "keys.yaml:1:7: key 'AAAA': given twice (first at line 1)");
    char want[128];
    snprintf(want, sizeof want, "keys.yaml: %zu more errors not shown", n_keys + 1 - 50);
    CHECK_MSG(strstr(errs, want) != NULL, "expected '%s' in:\n%.2000s", want, errs);
    fprintf(stderr, "# %zu distinct keys (%zu bytes): rejected\n", n_keys, o);
    free(errs);
    free(text);
}

/* Keys that repeat a block mapping's keys many times: each repeat is reported against the
 * first occurrence. */
static void test_repeated_keys_block(void)
{
    size_t reps = 20000;
    char *text = malloc(reps * 24 + 512);
    size_t o = (size_t)sprintf(text, SITES "outer:\n");
    for (size_t i = 0; i < reps; i++) o += (size_t)sprintf(text + o, "  lr: 0.5\n");
    char *errs = NULL;
    CHECK_EQ_INT(load_text("repeat.yaml", text, o, &errs), GT_ERR_CONFIG);
    CHECK_STR_CONTAINS(errs, "repeat.yaml:8:3: key 'outer.lr': given twice (first at line 7)");
    char want[128];
    snprintf(want, sizeof want, "repeat.yaml: %zu more errors not shown", reps - 1 - 50);
    CHECK_MSG(strstr(errs, want) != NULL, "expected '%s' in:\n%.2000s", want, errs);
    free(errs);
    free(text);
}

/* 200,000 levels of flow lists (400 KB) and 100,000 of flow mappings: refused at level
 * GT_TOPO_DEPTH_MAX + 1 without scanning the rest. */
static void test_deep_nesting(void)
{
    size_t depth = 200000;
    char *text = malloc(2 * depth + 64);
    size_t o = (size_t)sprintf(text, "run: ");
    memset(text + o, '[', depth);
    o += depth;
    memset(text + o, ']', depth);
    o += depth;
    text[o++] = '\n';
    char *errs = NULL, want[160];
    CHECK_EQ_INT(load_text("deep.yaml", text, o, &errs), GT_ERR_CONFIG);
    snprintf(want, sizeof want,
             "deep.yaml:1:%d: lists and mappings nested too deep; allowed: at most %d levels",
             5 + GT_TOPO_DEPTH_MAX, GT_TOPO_DEPTH_MAX);
    CHECK_MSG(strstr(errs, want) != NULL, "expected '%s' in:\n%s", want, errs);
    free(errs);

    depth = 100000;
    text = realloc(text, 5 * depth + 64);
    o = 0;
    for (size_t i = 0; i < depth; i++) o += (size_t)sprintf(text + o, "{a: ");
    text[o++] = '1';
    memset(text + o, '}', depth);
    o += depth;
    text[o++] = '\n';
    CHECK_EQ_INT(load_text("deepmap.yaml", text, o, &errs), GT_ERR_CONFIG);
    snprintf(want, sizeof want, "deepmap.yaml:1:%d: lists and mappings nested too deep",
             1 + 4 * GT_TOPO_DEPTH_MAX);
    CHECK_MSG(strstr(errs, want) != NULL, "expected '%s' in:\n%s", want, errs);
    free(errs);

    /* At the limit it is only the schema that objects. */
    o = (size_t)sprintf(text, SITES "run: ");
    for (int i = 1; i < GT_TOPO_DEPTH_MAX; i++) text[o++] = '[';
    for (int i = 1; i < GT_TOPO_DEPTH_MAX; i++) text[o++] = ']';
    text[o++] = '\n';
    CHECK_EQ_INT(load_text("limit.yaml", text, o, &errs), GT_ERR_CONFIG);
    CHECK_STR_CONTAINS(errs, "limit.yaml:6:6: key 'run': wrong type, got a list");
    free(errs);
    free(text);
}

/* Over the size limit: a 50 MB (sparse) file is refused by its size before it is read; one
 * byte over the limit is refused; exactly at the limit, a valid file loads. */
static void test_size_limit(void)
{
    char path[512], *errs = NULL, want[200];
    snprintf(path, sizeof path, "%s/big.yaml", g_dir);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    CHECK(ftruncate(fileno(f), 50000000) == 0);
    fclose(f);
    CHECK_EQ_INT(load_path(path, &errs), GT_ERR_CONFIG);
    snprintf(want, sizeof want, "%s: 50000000 bytes, over the limit of %u bytes", path,
             GT_TOPO_FILE_MAX);
    CHECK_MSG(strstr(errs, want) != NULL, "expected '%s' in:\n%s", want, errs);
    free(errs);

    /* A valid file padded with a comment to exactly the limit, then one byte more. */
    char *text = malloc(GT_TOPO_FILE_MAX + 2);
    size_t o = (size_t)sprintf(text, SITES "# ");
    memset(text + o, 'x', GT_TOPO_FILE_MAX - o - 1);
    text[GT_TOPO_FILE_MAX - 1] = '\n';
    CHECK_EQ_INT(load_text("exact.yaml", text, GT_TOPO_FILE_MAX, &errs), GT_OK);
    free(errs);
    text[GT_TOPO_FILE_MAX - 1] = 'x';
    text[GT_TOPO_FILE_MAX] = '\n';
    CHECK_EQ_INT(load_text("over.yaml", text, GT_TOPO_FILE_MAX + 1, &errs), GT_ERR_CONFIG);
    snprintf(want, sizeof want, "over.yaml: %u bytes, over the limit of %u bytes",
             GT_TOPO_FILE_MAX + 1, GT_TOPO_FILE_MAX);
    CHECK_MSG(strstr(errs, want) != NULL, "expected '%s' in:\n%s", want, errs);
    free(errs);

    /* The in-memory entry point holds to the same limit. */
    FILE *err = open_memstream(&errs, &o);
    gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;
    lp.use_env = 0;
    lp.err = err;
    gt_topo_config_t *cfg = NULL;
    CHECK_EQ_INT(gt_topo_load_string(text, GT_TOPO_FILE_MAX + 1, "mem.yaml", &lp, &cfg),
                 GT_ERR_CONFIG);
    CHECK(cfg == NULL);
    fclose(err);
    snprintf(want, sizeof want, "mem.yaml: %u bytes, over the limit", GT_TOPO_FILE_MAX + 1);
    CHECK_STR_CONTAINS(errs, want);
    free(errs);
    free(text);
}

typedef struct {
    const char *what, *yaml, *want; /* `want`: text the messages must contain */
} struct_case_t;

/* Documents, tags and aliases: each refused at its position. */
static void test_structure(void)
{
    static const struct_case_t cases[] = {
        {"second document", SITES "---\nrun:\n  rounds: 3\n",
         "t.yaml:6:1: a second YAML document (after '---'); allowed: one document per file"},
        {"second document after an explicit first", "---\n" SITES "...\n---\n{}\n",
         "t.yaml:8:1: a second YAML document"},
        {"python object tag", SITES "run:\n  name: !!python/object/apply:os.system [\"ls\"]\n",
         "t.yaml:7:9: tag '!!python/object/apply:os.system' is not supported; allowed: plain "
         "YAML values without tags"},
        {"python object tag on a mapping", SITES "run: !!python/object:os.system {a: 1}\n",
         "t.yaml:6:6: tag '!!python/object:os.system' is not supported"},
        {"local tag", SITES "run:\n  rounds: !big 3\n", "t.yaml:7:11: tag '!big' is not supported"},
        {"core tag", SITES "run:\n  rounds: !!str 3\n",
         "t.yaml:7:11: tag '!!str' is not supported"},
        {"alias", "x: &r {rounds: 3}\n" SITES "run: *r\n",
         "t.yaml:7:6: alias '*r': aliases are not supported"},
        {"key given twice in a cut",
         SITES "links:\n  - between: [a, b]\n    cuts: [{start_s: 1, start_s: 2, duration_s: 1}]\n",
         "t.yaml:8:25: key 'links[0].cuts.start_s': given twice (first at line 8)"},
        {"key given twice in a site",
         "sites:\n  - name: a\n    address: 127.0.0.1:5000\n    name: b\n",
         "t.yaml:4:5: key 'sites[0].name': given twice (first at line 2)"},
        {"key given twice in a link",
         SITES "links:\n  - between: [a, b]\n    loss: 0\n    loss: 0\n",
         "t.yaml:9:5: key 'links[0].loss': given twice (first at line 8)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *errs = NULL;
        gt_status_t st = load_text("t.yaml", cases[i].yaml, strlen(cases[i].yaml), &errs);
        CHECK_MSG(st == GT_ERR_CONFIG, "[%s] status %d", cases[i].what, st);
        CHECK_MSG(strstr(errs, cases[i].want) != NULL, "[%s] expected '%s' in:\n%s", cases[i].what,
                  cases[i].want, errs);
        free(errs);
    }
    /* One document with explicit markers is fine. */
    const char *one = "---\n" SITES "...\n";
    char *errs = NULL;
    CHECK_EQ_INT(load_text("one.yaml", one, strlen(one), &errs), GT_OK);
    free(errs);
}

/* A value or key of 900 KB appears in the message as its first 64 bytes and "…"; a cut never
 * splits a UTF-8 character; control characters are not echoed. */
static void test_values_truncated(void)
{
    size_t big = 900000;
    char *text = malloc(big + 512), *errs = NULL, want[256];
    char a64[65];
    memset(a64, 'A', 64);
    a64[64] = '\0';

    size_t o = (size_t)sprintf(text, SITES "run:\n  name: ");
    memset(text + o, 'A', big);
    o += big;
    text[o++] = '\n';
    CHECK_EQ_INT(load_text("value.yaml", text, o, &errs), GT_ERR_CONFIG);
    snprintf(want, sizeof want, "value.yaml:7:9: key 'run.name': invalid value '%s\xe2\x80\xa6'",
             a64);
    CHECK_MSG(strstr(errs, want) != NULL, "expected '%s' in:\n%.600s", want, errs);
    check_lines_short("long value", errs, 600);
    free(errs);

    /* A key that long must be an explicit one (`? key`): a plain key ends within 1024. */
    o = (size_t)sprintf(text, SITES "run:\n  ? ");
    memset(text + o, 'A', big);
    o += big;
    o += (size_t)sprintf(text + o, "\n  : 1\n");
    CHECK_EQ_INT(load_text("key.yaml", text, o, &errs), GT_ERR_CONFIG);
    snprintf(want, sizeof want, "key.yaml:7:5: key 'run.%s\xe2\x80\xa6': unknown key", a64);
    CHECK_MSG(strstr(errs, want) != NULL, "expected '%s' in:\n%.600s", want, errs);
    check_lines_short("long key", errs, 600);
    free(errs);

    /* "x" then 2-byte characters: byte 64 would split one, so the cut is at 63. */
    o = (size_t)sprintf(text, SITES "run:\n  name: x");
    for (int i = 0; i < 100; i++) o += (size_t)sprintf(text + o, "\xc3\xa9"); /* é */
    text[o++] = '\n';
    CHECK_EQ_INT(load_text("utf8.yaml", text, o, &errs), GT_ERR_CONFIG);
    char e31[128] = "x";
    for (int i = 0; i < 31; i++) strcat(e31, "\xc3\xa9");
    snprintf(want, sizeof want, "invalid value '%s\xe2\x80\xa6'", e31);
    CHECK_MSG(strstr(errs, want) != NULL, "expected '%s' in:\n%s", want, errs);
    free(errs);

    /* An escape sequence in a value is not passed to the terminal. */
    const char *esc = SITES "run:\n  name: \"a\\e[31mb\"\n";
    CHECK_EQ_INT(load_text("esc.yaml", esc, strlen(esc), &errs), GT_ERR_CONFIG);
    CHECK_STR_CONTAINS(errs, "invalid value 'a?[31mb'");
    CHECK(strchr(errs, '\x1b') == NULL);
    free(errs);

    /* Flags and environment values are cut the same way. */
    memset(text, 'B', big);
    memcpy(text, "run.name=", 9);
    text[big] = '\0';
    const char *sets[] = {text};
    char *buf = NULL;
    size_t blen = 0;
    FILE *err = open_memstream(&buf, &blen);
    gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;
    lp.use_env = 0;
    lp.err = err;
    lp.sets = sets;
    lp.n_sets = 1;
    gt_topo_config_t *cfg = NULL;
    CHECK_EQ_INT(gt_topo_load_string(SITES, strlen(SITES), "f.yaml", &lp, &cfg), GT_ERR_CONFIG);
    fclose(err);
    CHECK_STR_CONTAINS(buf, "key 'run.name': invalid value 'BBBB");
    check_lines_short("long flag", buf, 600);
    free(buf);
    free(text);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/gt-hostile-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_unique_keys();
    test_repeated_keys_block();
    test_deep_nesting();
    test_size_limit();
    test_structure();
    test_values_truncated();
    static const char *names[] = {"keys.yaml",  "repeat.yaml", "deep.yaml",  "deepmap.yaml",
                                  "limit.yaml", "big.yaml",    "exact.yaml", "over.yaml",
                                  "t.yaml",     "one.yaml",    "value.yaml", "key.yaml",
                                  "utf8.yaml",  "esc.yaml"};
    char path[512];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", g_dir, names[i]);
        unlink(path);
    }
    CHECK_MSG(rmdir(g_dir) == 0, "temporary folder %s not empty", g_dir);
    return GT_TEST_DONE();
}
