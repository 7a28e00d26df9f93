/* files.c — directory creation and crash-safe file replacement.
 *
 * A checkpoint must never be half-written under its final name. Every file goes to a
 * temporary name in the same directory, is fsynced, renamed over the target (rename is atomic
 * within one file system) and the directory is fsynced so the rename itself is durable.
 */
#include "gt_local.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct gt_local_afile {
    int fd;
    char *path;
    char *tmp;
};

gt_status_t gt_local_mkdirs(const char *path)
{
    char buf[PATH_MAX];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) {
        GT_ERROR("mkdirs: bad path '%s'", path);
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

gt_status_t gt_local_fsync_dir(const char *dir)
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

gt_status_t gt_local_afile_open(const char *path, gt_local_afile_t **af_p)
{
    gt_local_afile_t *af = calloc(1, sizeof *af);
    if (!af) return GT_ERR_NOMEM;
    af->fd = -1;
    size_t n = strlen(path) + 32;
    af->path = strdup(path);
    af->tmp = malloc(n);
    if (!af->path || !af->tmp) {
        gt_local_afile_abort(af);
        return GT_ERR_NOMEM;
    }
    snprintf(af->tmp, n, "%s.tmp.%ld", path, (long)getpid());
    af->fd = open(af->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (af->fd < 0) {
        GT_ERROR("cannot create %s: %s", af->tmp, strerror(errno));
        free(af->path);
        free(af->tmp);
        free(af);
        return GT_ERR_IO;
    }
    *af_p = af;
    return GT_OK;
}

gt_status_t gt_local_afile_write(gt_local_afile_t *af, const void *data, size_t len)
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

void gt_local_afile_abort(gt_local_afile_t *af)
{
    if (!af) return;
    if (af->fd >= 0) {
        close(af->fd);
        unlink(af->tmp);
    }
    free(af->path);
    free(af->tmp);
    free(af);
}

gt_status_t gt_local_afile_commit(gt_local_afile_t *af)
{
    gt_status_t st = GT_OK;
    char *dir = NULL;
    if (fsync(af->fd) != 0) {
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
    if (rename(af->tmp, af->path) != 0) {
        GT_ERROR("rename %s -> %s: %s", af->tmp, af->path, strerror(errno));
        unlink(af->tmp);
        st = GT_ERR_IO;
        goto out;
    }
    dir = dir_of(af->path);
    st = dir ? gt_local_fsync_dir(dir) : GT_ERR_NOMEM;
out:
    free(dir);
    if (af->fd >= 0) {
        close(af->fd);
        unlink(af->tmp);
        af->fd = -1;
    }
    free(af->path);
    free(af->tmp);
    free(af);
    return st;
}

gt_status_t gt_local_write_file_atomic(const char *path, const void *data, size_t len)
{
    gt_local_afile_t *af = NULL;
    gt_status_t st = gt_local_afile_open(path, &af);
    if (st != GT_OK) return st;
    st = gt_local_afile_write(af, data, len);
    if (st != GT_OK) {
        gt_local_afile_abort(af);
        return st;
    }
    return gt_local_afile_commit(af);
}
