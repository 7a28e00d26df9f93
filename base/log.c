/* log.c — one-line logging to stderr, and the monotonic clock.
 *
 * Each line is formatted into a local buffer and written with one fwrite, so lines from
 * threads (and from sites sharing a terminal) do not interleave mid-line.
 */
#include "gt_base.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static int g_level = -1; /* -1: not yet read from GT_LOG_LEVEL */
static int g_time = -1;  /* GT_LOG_TIME set (not "0"): each line starts with the time of day */
/* This thread's first and last error messages since gt_log_errors_reset. */
static _Thread_local char t_first_error[512], t_last_error[512];
static char g_tag[64];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

gt_status_t gt_log_level_parse(const char *name, gt_log_level_t *level_p)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++) {
        if (name && strcasecmp(name, names[i]) == 0) {
            *level_p = (gt_log_level_t)i;
            return GT_OK;
        }
    }
    return GT_ERR_INVALID;
}

gt_log_level_t gt_log_get_level(void)
{
    if (g_level < 0) {
        gt_log_level_t level = GT_LOG_INFO;
        const char *env = getenv("GT_LOG_LEVEL");
        if (env && gt_log_level_parse(env, &level) != GT_OK) level = GT_LOG_INFO;
        g_level = (int)level;
    }
    return (gt_log_level_t)g_level;
}

void gt_log_set_level(gt_log_level_t level)
{
    g_level = (int)level;
}

void gt_log_set_tag(const char *tag)
{
    pthread_mutex_lock(&g_lock);
    snprintf(g_tag, sizeof g_tag, "%s", tag ? tag : "");
    pthread_mutex_unlock(&g_lock);
}

void gt_vlog(gt_log_level_t level, const char *fmt, va_list ap)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    if ((int)level > (int)gt_log_get_level()) return;
    char line[2048];
    int n, t = 0;
    pthread_mutex_lock(&g_lock);
    if (g_time < 0) {
        const char *env = getenv("GT_LOG_TIME");
        g_time = env && *env && strcmp(env, "0") != 0;
    }
    if (g_time) { /* UTC, to the millisecond: lines of several sites' logs can be merged */
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        t = snprintf(line, sizeof line, "%02d:%02d:%02d.%03ld ", tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000000);
    }
    if (g_tag[0])
        n = snprintf(line + t, sizeof line - t, "[geotrain %s %s] ", names[level], g_tag);
    else
        n = snprintf(line + t, sizeof line - t, "[geotrain %s] ", names[level]);
    pthread_mutex_unlock(&g_lock);
    if (n < 0) return;
    n += t;
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    if (level == GT_LOG_ERROR && m >= 0) {
        snprintf(t_last_error, sizeof t_last_error, "%s", line + n);
        if (!t_first_error[0]) snprintf(t_first_error, sizeof t_first_error, "%s", line + n);
    }
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2) len = sizeof line - 2;
    line[len++] = '\n';
    fwrite(line, 1, len, stderr);
}

void gt_log_errors_reset(void)
{
    t_first_error[0] = t_last_error[0] = '\0';
}

const char *gt_log_first_error(void)
{
    return t_first_error;
}

const char *gt_log_last_error(void)
{
    return t_last_error;
}

void gt_log(gt_log_level_t level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gt_vlog(level, fmt, ap);
    va_end(ap);
}

uint64_t gt_time_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double gt_unix_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
