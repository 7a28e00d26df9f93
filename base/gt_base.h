/* gt_base.h — what every geotrain module shares: the status type, logging, the check macros
 * and a monotonic clock.
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
    GT_ERR_INTERNAL = -15     /* a bug: an invariant did not hold */
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

/* Removes `path` and everything under it (symbolic links are removed, not followed). 0 on
 * success, -1 with errno set by the first failure; a path that does not exist is -1, ENOENT. */
GT_API int gt_rmtree(const char *path);

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
