/* gt_test.h — assertions for geotrain's C tests.
 *
 * Each failed check prints file:line and the values, and counts a failure; GT_TEST_DONE()
 * returns the exit code (1 when anything failed), so no test can end in "ok" by accident.
 * Floats compare as |a - b| <= atol + rtol * |ref| (STYLE.md).
 */
#ifndef GT_TEST_H
#define GT_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern int gt_test_failures;
extern int gt_test_checks;

/* Exit 77 (skipped) with a reason. Only for absent hardware or OS permissions. */
void gt_test_skip(const char *why);
/* A fresh temporary directory (removed by gt_test_rmtree); path in a static-free buffer. */
char *gt_test_tmpdir(void);
int gt_test_rmtree(const char *path);
/* Writes `text` to `path`; returns 0 on success. */
int gt_test_write_file(const char *path, const char *text);
/* Runs a shell command, captures stdout+stderr into *out_p (malloc'd), returns exit code. */
int gt_test_run(const char *cmd, char **out_p);

#define GT_TEST_FAIL_(...)                                    \
    do {                                                      \
        gt_test_failures++;                                   \
        fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                         \
        fputc('\n', stderr);                                  \
    } while (0)

#define CHECK(cond)                              \
    do {                                         \
        gt_test_checks++;                        \
        if (!(cond)) GT_TEST_FAIL_("%s", #cond); \
    } while (0)

#define CHECK_MSG(cond, ...)                     \
    do {                                         \
        gt_test_checks++;                        \
        if (!(cond)) GT_TEST_FAIL_(__VA_ARGS__); \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                      \
    do {                                                                        \
        long long a_ = (long long)(a), b_ = (long long)(b);                     \
        gt_test_checks++;                                                       \
        if (a_ != b_) GT_TEST_FAIL_("%s == %s (%lld != %lld)", #a, #b, a_, b_); \
    } while (0)

#define CHECK_STR_CONTAINS(hay, needle)                                       \
    do {                                                                      \
        const char *h_ = (hay), *n_ = (needle);                               \
        gt_test_checks++;                                                     \
        if (!h_ || !strstr(h_, n_))                                           \
            GT_TEST_FAIL_("expected \"%s\" in:\n%s", n_, h_ ? h_ : "(null)"); \
    } while (0)

#define CHECK_CLOSE(a, ref, atol, rtol)                                \
    do {                                                               \
        double a_ = (double)(a), r_ = (double)(ref);                   \
        gt_test_checks++;                                              \
        if (!(fabs(a_ - r_) <= (atol) + (rtol)*fabs(r_)))              \
            GT_TEST_FAIL_("%s ~ %s (%.9g vs %.9g)", #a, #ref, a_, r_); \
    } while (0)

#define GT_TEST_DONE()                                                            \
    (fprintf(stderr, "%d checks, %d failed\n", gt_test_checks, gt_test_failures), \
     (gt_test_failures == 0 && gt_test_checks > 0) ? 0 : 1)

#endif /* GT_TEST_H */
