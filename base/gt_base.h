/* gt_base.h — what every geotrain module shares: the status type, logging, the check macros,
 * clocks, memory counting and the file helpers (mkdir -p, crash-safe writes).
 *
 * Every fallible function returns gt_status_t: GT_OK (0) or a negative code. Callers
 * propagate with GT_CHECK_GOTO and undo in one cleanup block; the error is logged once, where
 * it is first found, with the context a user needs (file, site, peer, round).
 */
#ifndef GT_BASE_H
#define GT_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define GT_API               __attribute__((visibility("default")))
#define GT_MUST_USE          __attribute__((warn_unused_result))
#define GT_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define GT_API
#define GT_MUST_USE
#define GT_PRINTF(fmt, args)
#endif

/* Status codes. Keep gt_status_str() in base/status.c in step with this list. */
typedef enum {
    GT_OK = 0,
    GT_ERR_INVALID = -1,      /* a bad argument or value */
    GT_ERR_NOMEM = -2,        /* an allocation failed */
    GT_ERR_IO = -3,           /* a read, write or system call failed */
    GT_ERR_CONFIG = -4,       /* the configuration is invalid (message already printed) */
    GT_ERR_NOT_FOUND = -5,    /* a file, key or peer does not exist */
    GT_ERR_EXISTS = -6,       /* refusing to overwrite something that exists */
    GT_ERR_TIMEOUT = -7,      /* a deadline passed */
    GT_ERR_AGAIN = -8,        /* not ready yet: progress and try again */
    GT_ERR_CORRUPT = -9,      /* data failed a checksum, bound or format check */
    GT_ERR_AUTH = -10,        /* authentication failed (bad tag, unknown key, replay) */
    GT_ERR_PEER_LOST = -11,   /* a peer closed or died */
    GT_ERR_UNSUPPORTED = -12, /* not available in this build or on this machine */
    GT_ERR_OVERFLOW = -13,    /* a size or count is out of range */
    GT_ERR_CLOSED = -14,      /* the object was shut down */
    GT_ERR_INTERNAL = -15,    /* a bug: an invariant did not hold */
    GT_ERR_RETIRED = -16 /* the site was retired from the run for good (geotrain sites remove) */
} gt_status_t;

/* A short, static, human-readable name for a status ("invalid argument"). Never NULL. */
GT_API const char *gt_status_str(gt_status_t status);

typedef enum {
    GT_LOG_ERROR = 0,
    GT_LOG_WARN = 1,
    GT_LOG_INFO = 2,
    GT_LOG_DEBUG = 3
} gt_log_level_t;

/* Messages above this level are discarded. Default GT_LOG_INFO, or GT_LOG_LEVEL from the
 * environment (error|warn|info|debug) when set. GT_LOG_TIME set (not "0") starts every line
 * with the UTC time of day to the millisecond. */
GT_API void gt_log_set_level(gt_log_level_t level);
GT_API gt_log_level_t gt_log_get_level(void);
/* Parses "error", "warn", "info" or "debug". Returns GT_ERR_INVALID for anything else. */
GT_API gt_status_t gt_log_level_parse(const char *name, gt_log_level_t *level_p);
/* A short tag printed in every line of this process (the site name, "launch", ...). The
 * string is copied; NULL clears it. */
GT_API void gt_log_set_tag(const char *tag);
/* Writes one line to stderr: "[geotrain LEVEL tag] message". Thread safe. */
GT_API void gt_log(gt_log_level_t level, const char *fmt, ...) GT_PRINTF(2, 3);
GT_API void gt_vlog(gt_log_level_t level, const char *fmt, va_list ap);
/* The first and the last error-level message this thread logged since it last called
 * gt_log_errors_reset ("" if none; the text after the "[geotrain error] " prefix). For APIs
 * that hand a failure to another language as a message (python/: exceptions). */
GT_API void gt_log_errors_reset(void);
GT_API const char *gt_log_first_error(void);
GT_API const char *gt_log_last_error(void);

#define GT_ERROR(...) gt_log(GT_LOG_ERROR, __VA_ARGS__)
#define GT_WARN(...)  gt_log(GT_LOG_WARN, __VA_ARGS__)
#define GT_INFO(...)  gt_log(GT_LOG_INFO, __VA_ARGS__)
#define GT_DEBUG(...) gt_log(GT_LOG_DEBUG, __VA_ARGS__)

/* Little-endian fields of file formats and wire messages (every geotrain format is
 * little-endian, whatever the host). */
static inline void gt_le_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void gt_le_put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void gt_le_put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t gt_le_get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t gt_le_get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static inline uint64_t gt_le_get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* Monotonic time in nanoseconds (CLOCK_MONOTONIC), for deadlines and rates. */
GT_API uint64_t gt_time_ns(void);

/* Wall-clock time in seconds since the epoch (CLOCK_REALTIME), for times that other processes
 * compare (status files, summaries). */
GT_API double gt_unix_time(void);

/* The library's count of the host memory a context holds in its large buffers (base/mem.c):
 * bytes held now and the most held at once. Zero-initialise it; the functions below are
 * thread-safe and count nothing with a NULL counter. A block from gt_mem_alloc or
 * gt_mem_realloc must be freed with gt_mem_free on the same counter. */
typedef struct {
    uint64_t now, peak;
} gt_mem_count_t;
GT_API void *gt_mem_alloc(gt_mem_count_t *m, size_t bytes, int zero);
GT_API void *gt_mem_realloc(gt_mem_count_t *m, void *p, size_t bytes);
GT_API void gt_mem_free(gt_mem_count_t *m, void *p);
GT_API uint64_t gt_mem_count_now(const gt_mem_count_t *m);
GT_API uint64_t gt_mem_count_peak(const gt_mem_count_t *m);

/* ---- Files (base/fs.c) ----------------------------------------------------------------
 *
 * The one implementation of directory creation and crash-safe file writing that every module
 * uses. A file that must never be seen half-written goes through a gt_afile_t: the bytes go to
 * `path.tmp.<pid>` in the same directory; commit fsyncs it, renames it over `path` (atomic
 * within one file system) and fsyncs the directory, so that the rename itself survives a
 * crash: a reader finds the old file or the new one, never a torn one. */

/* Removes `path` and everything under it (symbolic links are removed, not followed). 0 on
 * success, -1 with errno set by the first failure; a path that does not exist is -1, ENOENT. */
GT_API int gt_rmtree(const char *path);

/* Creates `path` and its missing parents (mode 0755, as umask allows), as `mkdir -p` does.
 * Directories that exist are fine; GT_ERR_IO when a part of it exists and is not a directory,
 * GT_ERR_INVALID for an empty path or one of PATH_MAX bytes or more. */
GT_API gt_status_t gt_mkdirs(const char *path) GT_MUST_USE;

/* fsyncs a directory, so that a rename or a new name in it is durable. A file system that
 * cannot sync directories (EINVAL) counts as done. */
GT_API gt_status_t gt_fsync_dir(const char *dir) GT_MUST_USE;

typedef struct gt_afile gt_afile_t;

/* gt_afile_open flags.
 * NO_REPLACE: commit refuses (GT_ERR_EXISTS, nothing replaced) when `path` exists: link(2)
 *   instead of rename(2).
 * NO_SYNC: atomic but not durable, no fsync of the file or the directory (for a file rewritten
 *   often, such as a status that a crash may lose).
 * MODE_EXACT: the file gets exactly `mode` (fchmod: the umask does not apply). */
#define GT_AFILE_NO_REPLACE 0x1u
#define GT_AFILE_NO_SYNC    0x2u
#define GT_AFILE_MODE_EXACT 0x4u

/* Starts a file that replaces `path` when committed, created with `mode` (as open(2) takes
 * it; 0644 for an ordinary file). */
GT_API gt_status_t gt_afile_open(const char *path, unsigned mode, unsigned flags,
                                 gt_afile_t **af_p) GT_MUST_USE;
GT_API gt_status_t gt_afile_write(gt_afile_t *af, const void *data, size_t len) GT_MUST_USE;
/* Makes the file visible under its name (see above). Frees `af` whatever the result; on an
 * error the temporary file is gone and `path` is as it was. */
GT_API gt_status_t gt_afile_commit(gt_afile_t *af) GT_MUST_USE;
/* Throws the temporary file away. Accepts NULL. */
GT_API void gt_afile_abort(gt_afile_t *af);

/* The whole of a gt_afile_t in one call: `len` bytes of `data` to `path`, mode 0644. */
GT_API gt_status_t gt_write_file_atomic(const char *path, const void *data, size_t len,
                                        unsigned flags) GT_MUST_USE;

/* Propagate an error: evaluate expr into the gt_status_t variable `st`; on failure jump to
 * `label`. The callee has already logged. */
#define GT_CHECK_GOTO(expr, st, label) \
    do {                               \
        (st) = (expr);                 \
        if ((st) != GT_OK) goto label; \
    } while (0)

/* Fail with `code` and a logged message when `cond` does not hold. */
#define GT_REQUIRE_GOTO(cond, st, code, label, ...) \
    do {                                            \
        if (!(cond)) {                              \
            GT_ERROR(__VA_ARGS__);                  \
            (st) = (code);                          \
            goto label;                             \
        }                                           \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif /* GT_BASE_H */
