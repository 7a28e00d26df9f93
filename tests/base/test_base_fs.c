/* test_base_fs.c — base/fs.c: gt_mkdirs, gt_fsync_dir and the crash-safe writes (gt_afile_t,
 * gt_write_file_atomic) with each flag: a replaced file reads whole, an aborted or refused
 * write leaves the old one and no temporary behind, NO_REPLACE never overwrites, MODE_EXACT
 * ignores the umask. */
#include "gt_test.h"

#include "gt_base.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The file's contents (malloc'd, NUL-terminated) or NULL. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = calloc(1, 4096);
    size_t n = buf ? fread(buf, 1, 4095, f) : 0;
    (void)n;
    fclose(f);
    return buf;
}

static int same_text(const char *path, const char *want)
{
    char *got = slurp(path);
    int same = got && strcmp(got, want) == 0;
    free(got);
    return same;
}

/* How many entries of dir hold ".tmp." (temporaries left behind). */
static int temporaries(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL)
        if (strstr(de->d_name, ".tmp.")) n++;
    if (d) closedir(d);
    return n;
}

static void test_mkdirs(const char *tmp)
{
    char p[1024], f[1024];
    snprintf(p, sizeof p, "%s/a/b/c", tmp);
    CHECK_EQ_INT(gt_mkdirs(p), GT_OK);
    CHECK_EQ_INT(gt_mkdirs(p), GT_OK); /* it exists: fine */
    struct stat sb;
    CHECK(stat(p, &sb) == 0 && S_ISDIR(sb.st_mode));
    snprintf(p, sizeof p, "%s/a/b/c/", tmp); /* a trailing slash */
    CHECK_EQ_INT(gt_mkdirs(p), GT_OK);
    snprintf(f, sizeof f, "%s/file", tmp);
    CHECK_EQ_INT(gt_test_write_file(f, "x"), 0);
    CHECK_EQ_INT(gt_mkdirs(f), GT_ERR_IO); /* a file in the way */
    snprintf(p, sizeof p, "%s/file/sub", tmp);
    CHECK_EQ_INT(gt_mkdirs(p), GT_ERR_IO);
    CHECK_EQ_INT(gt_mkdirs(""), GT_ERR_INVALID);
    CHECK_EQ_INT(gt_fsync_dir(tmp), GT_OK);
    snprintf(p, sizeof p, "%s/missing", tmp);
    CHECK_EQ_INT(gt_fsync_dir(p), GT_ERR_IO);
}

static void test_replace(const char *tmp)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/replace.txt", tmp);
    CHECK_EQ_INT(gt_write_file_atomic(p, "hello", 5, 0), GT_OK);
    CHECK(same_text(p, "hello"));
    CHECK_EQ_INT(gt_write_file_atomic(p, "bye", 3, 0), GT_OK); /* replaces, whole */
    CHECK(same_text(p, "bye"));
    CHECK_EQ_INT(gt_write_file_atomic(p, "status", 6, GT_AFILE_NO_SYNC), GT_OK);
    CHECK(same_text(p, "status"));
    CHECK_EQ_INT(gt_write_file_atomic(p, "", 0, 0), GT_OK); /* an empty file */
    CHECK(same_text(p, ""));

    /* Written in pieces; nothing under the name until the commit. */
    gt_afile_t *af = NULL;
    snprintf(p, sizeof p, "%s/pieces.bin", tmp);
    CHECK_EQ_INT(gt_afile_open(p, 0644, 0, &af), GT_OK);
    CHECK_EQ_INT(gt_afile_write(af, "one ", 4), GT_OK);
    CHECK_EQ_INT(gt_afile_write(af, "two", 3), GT_OK);
    struct stat sb;
    CHECK(stat(p, &sb) != 0);
    CHECK_EQ_INT(gt_afile_commit(af), GT_OK);
    CHECK(same_text(p, "one two"));

    /* An aborted write leaves the old file and no temporary. */
    CHECK_EQ_INT(gt_afile_open(p, 0644, 0, &af), GT_OK);
    CHECK_EQ_INT(gt_afile_write(af, "partial", 7), GT_OK);
    gt_afile_abort(af);
    gt_afile_abort(NULL);
    CHECK(same_text(p, "one two"));
    CHECK_EQ_INT(temporaries(tmp), 0);

    /* A directory that does not exist: refused at open. */
    snprintf(p, sizeof p, "%s/nodir/x", tmp);
    CHECK_EQ_INT(gt_afile_open(p, 0644, 0, &af), GT_ERR_IO);
    CHECK_EQ_INT(gt_afile_open("", 0644, 0, &af), GT_ERR_INVALID);
}

static void test_no_replace(const char *tmp)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/key", tmp);
    CHECK_EQ_INT(gt_write_file_atomic(p, "first", 5, GT_AFILE_NO_REPLACE), GT_OK);
    CHECK_EQ_INT(gt_write_file_atomic(p, "second", 6, GT_AFILE_NO_REPLACE), GT_ERR_EXISTS);
    CHECK(same_text(p, "first"));
    CHECK_EQ_INT(temporaries(tmp), 0);

    /* MODE_EXACT: the mode whatever the umask. */
    mode_t old = umask(0077);
    gt_afile_t *af = NULL;
    snprintf(p, sizeof p, "%s/public", tmp);
    CHECK_EQ_INT(gt_afile_open(p, 0644, GT_AFILE_NO_REPLACE | GT_AFILE_MODE_EXACT, &af), GT_OK);
    CHECK_EQ_INT(gt_afile_write(af, "pub", 3), GT_OK);
    CHECK_EQ_INT(gt_afile_commit(af), GT_OK);
    struct stat sb;
    CHECK(stat(p, &sb) == 0 && (sb.st_mode & 0777) == 0644);
    snprintf(p, sizeof p, "%s/masked", tmp);
    CHECK_EQ_INT(gt_write_file_atomic(p, "m", 1, 0), GT_OK); /* without: the umask applies */
    CHECK(stat(p, &sb) == 0 && (sb.st_mode & 0777) == 0600);
    umask(old);
}

int main(void)
{
    char *tmp = gt_test_tmpdir();
    CHECK(tmp != NULL);
    if (tmp) {
        test_mkdirs(tmp);
        test_replace(tmp);
        test_no_replace(tmp);
        gt_test_rmtree(tmp);
        free(tmp);
    }
    return GT_TEST_DONE();
}
