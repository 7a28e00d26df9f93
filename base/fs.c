/* fs.c — file-system helpers shared by the modules: rm -r, mkdir -p, and crash-safe file
 * writing (gt_base.h, "Files").
 *
 * A checkpoint, a key or a summary must never be half-written under its final name, so every
 * such file is written to a temporary name in the same directory, fsynced, renamed over the
 * target (or linked, when an existing file must not be replaced) and the directory fsynced.
 * The temporary name carries the pid, so two processes writing the same file never share one.
 */
#define _XOPEN_SOURCE 700
#include "gt_base.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct gt_afile {
    int fd;
    unsigned flags;
    char *path;
    char *tmp;
};

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

int gt_rmtree(const char *path)
{
    return nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

gt_status_t gt_mkdirs(const char *path)
{
    char buf[PATH_MAX];
    size_t n = path ? strlen(path) : 0;
    if (n == 0 || n >= sizeof buf) {
        GT_ERROR("mkdirs: bad path '%s'", path ? path : "");
        return GT_ERR_INVALID;
    }
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char saved = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
            GT_ERROR("cannot create directory %s: %s", buf, strerror(errno));
            return GT_ERR_IO;
        }
        buf[i] = saved;
    }
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        GT_ERROR("%s exists and is not a directory", path);
        return GT_ERR_IO;
    }
    return GT_OK;
}

gt_status_t gt_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        GT_ERROR("cannot open directory %s: %s", dir, strerror(errno));
        return GT_ERR_IO;
    }
    int rc = fsync(fd);
    int err = errno;
    close(fd);
    if (rc != 0 && err != EINVAL) { /* some file systems cannot sync directories */
        GT_ERROR("fsync %s: %s", dir, strerror(err));
        return GT_ERR_IO;
    }
    return GT_OK;
}

static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

static void afile_free(gt_afile_t *af)
{
    free(af->path);
    free(af->tmp);
    free(af);
}

gt_status_t gt_afile_open(const char *path, unsigned mode, unsigned flags, gt_afile_t **af_p)
{
    if (!path || !*path || !af_p) return GT_ERR_INVALID;
    gt_afile_t *af = calloc(1, sizeof *af);
    if (!af) return GT_ERR_NOMEM;
    af->fd = -1;
    af->flags = flags;
    size_t n = strlen(path) + 32;
    af->path = strdup(path);
    af->tmp = malloc(n);
    if (!af->path || !af->tmp) {
        afile_free(af);
        return GT_ERR_NOMEM;
    }
    snprintf(af->tmp, n, "%s.tmp.%ld", path, (long)getpid());
    af->fd = open(af->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, (mode_t)mode);
    if (af->fd < 0) {
        GT_ERROR("cannot create %s: %s", af->tmp, strerror(errno));
        afile_free(af);
        return GT_ERR_IO;
    }
    if ((flags & GT_AFILE_MODE_EXACT) && fchmod(af->fd, (mode_t)mode) != 0) {
        GT_ERROR("cannot chmod %s: %s", af->tmp, strerror(errno));
        gt_afile_abort(af);
        return GT_ERR_IO;
    }
    *af_p = af;
    return GT_OK;
}

gt_status_t gt_afile_write(gt_afile_t *af, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(af->fd, p, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            GT_ERROR("write %s: %s", af->tmp, strerror(errno));
            return GT_ERR_IO;
        }
        p += w;
        len -= (size_t)w;
    }
    return GT_OK;
}

void gt_afile_abort(gt_afile_t *af)
{
    if (!af) return;
    if (af->fd >= 0) {
        close(af->fd);
        unlink(af->tmp);
    }
    afile_free(af);
}

/* Puts the closed temporary file under its final name: rename over it, or link beside it
 * (GT_AFILE_NO_REPLACE: link fails if the name exists, so nothing is ever replaced). */
static gt_status_t afile_publish(gt_afile_t *af)
{
    if (af->flags & GT_AFILE_NO_REPLACE) {
        int rc = link(af->tmp, af->path);
        int err = errno;
        unlink(af->tmp);
        if (rc == 0) return GT_OK;
        if (err == EEXIST) {
            GT_ERROR("%s already exists; refusing to replace it", af->path);
            return GT_ERR_EXISTS;
        }
        GT_ERROR("cannot create %s: %s", af->path, strerror(err));
        return GT_ERR_IO;
    }
    if (rename(af->tmp, af->path) != 0) {
        GT_ERROR("rename %s -> %s: %s", af->tmp, af->path, strerror(errno));
        unlink(af->tmp);
        return GT_ERR_IO;
    }
    return GT_OK;
}

gt_status_t gt_afile_commit(gt_afile_t *af)
{
    if (!af) return GT_ERR_INVALID;
    gt_status_t st = GT_OK;
    char *dir = NULL;
    int sync = !(af->flags & GT_AFILE_NO_SYNC);
    if (sync && fsync(af->fd) != 0) {
        GT_ERROR("fsync %s: %s", af->tmp, strerror(errno));
        st = GT_ERR_IO;
        goto out;
    }
    int rc = close(af->fd);
    af->fd = -1;
    if (rc != 0) {
        GT_ERROR("close %s: %s", af->tmp, strerror(errno));
        unlink(af->tmp);
        st = GT_ERR_IO;
        goto out;
    }
    st = afile_publish(af);
    if (st != GT_OK || !sync) goto out;
    dir = dir_of(af->path);
    st = dir ? gt_fsync_dir(dir) : GT_ERR_NOMEM;
out:
    free(dir);
    gt_afile_abort(af); /* closes and removes the temporary file if still open */
    return st;
}

gt_status_t gt_write_file_atomic(const char *path, const void *data, size_t len, unsigned flags)
{
    gt_afile_t *af = NULL;
    gt_status_t st = gt_afile_open(path, 0644, flags, &af);
    if (st != GT_OK) return st;
    st = gt_afile_write(af, data, len);
    if (st != GT_OK) {
        gt_afile_abort(af);
        return st;
    }
    return gt_afile_commit(af);
}
