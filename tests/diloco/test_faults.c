/* test_faults.c — fault injection (diloco/faults.c, gt_faults.h), no network: the GT_ variables
 * read and checked in one place (each malformed value refused by name, a kill without a
 * supervisor's notice file refused), the faults set on a site only before its first step, the
 * corrupt-anchor round, a slow window's time, and the kill point: the site appends its notice
 * and stops itself (SIGSTOP) instead of killing itself; the supervisor kills it. */
#include "diloco_internal.h"
#include "gt_test.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const VARS[] = {"GT_SLOW", "GT_SLOW_WINDOWS", "GT_CORRUPT_ANCHOR",
                                   "GT_KILL_AT_ROUND", "GT_FAULT_NOTIFY"};

static void clear_env(void)
{
    for (size_t i = 0; i < sizeof VARS / sizeof VARS[0]; i++) unsetenv(VARS[i]);
}

/* gt_faults_from_env with one variable set to value (the others unset). */
static gt_status_t read_one(const char *name, const char *value, gt_faults_t *f)
{
    clear_env();
    setenv(name, value, 1);
    gt_faults_init(f);
    return gt_faults_from_env(f);
}

static void test_env(void)
{
    gt_faults_t f;
    clear_env();
    gt_faults_init(&f);
    CHECK_EQ_INT(gt_faults_from_env(&f), GT_OK);
    CHECK(f.slow == 1.0 && f.corrupt_anchor_round == -1 && f.kill_at_round == -1);
    CHECK_EQ_INT(f.n_windows, 0);

    CHECK_EQ_INT(read_one("GT_SLOW", "2.5", &f), GT_OK);
    CHECK(f.slow == 2.5);
    CHECK_EQ_INT(read_one("GT_SLOW", "abc", &f), GT_ERR_INVALID);
    CHECK_STR_CONTAINS(gt_log_last_error(), "GT_SLOW='abc'");
    CHECK_EQ_INT(read_one("GT_SLOW", "2x", &f), GT_ERR_INVALID);
    CHECK_EQ_INT(read_one("GT_SLOW", "0.5", &f), GT_ERR_INVALID);
    CHECK_STR_CONTAINS(gt_log_last_error(), "[1, 1000]");
    CHECK_EQ_INT(read_one("GT_SLOW", "1001", &f), GT_ERR_INVALID);

    CHECK_EQ_INT(read_one("GT_CORRUPT_ANCHOR", "3", &f), GT_OK);
    CHECK_EQ_INT(f.corrupt_anchor_round, 3);
    CHECK_EQ_INT(read_one("GT_CORRUPT_ANCHOR", "-2", &f), GT_ERR_INVALID);

    CHECK_EQ_INT(read_one("GT_SLOW_WINDOWS", "3@1-2,2@4-5.5", &f), GT_OK);
    CHECK_EQ_INT(f.n_windows, 2);
    CHECK(f.windows[1].factor == 2.0 && f.windows[1].from == 4.0 && f.windows[1].to == 5.5);
    CHECK_EQ_INT(read_one("GT_SLOW_WINDOWS", "3@2-1", &f), GT_ERR_INVALID);
    CHECK_EQ_INT(read_one("GT_SLOW_WINDOWS", "0.5@1-2", &f), GT_ERR_INVALID);
    CHECK_EQ_INT(read_one("GT_SLOW_WINDOWS", "3@1-2;", &f), GT_ERR_INVALID);
    CHECK_STR_CONTAINS(gt_log_last_error(), "GT_SLOW_WINDOWS");
    char many[1024] = "";
    for (int i = 0; i < GT_FAULTS_MAX_WINDOWS + 1; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%s2@%d-%d", i ? "," : "", i,
                 i + 1);
    CHECK_EQ_INT(read_one("GT_SLOW_WINDOWS", many, &f), GT_ERR_INVALID);

    /* a kill needs the supervisor that does it */
    CHECK_EQ_INT(read_one("GT_KILL_AT_ROUND", "2", &f), GT_ERR_INVALID);
    CHECK_STR_CONTAINS(gt_log_last_error(), "GT_FAULT_NOTIFY");
    setenv("GT_FAULT_NOTIFY", "/tmp/notices", 1);
    gt_faults_init(&f);
    CHECK_EQ_INT(gt_faults_from_env(&f), GT_OK);
    CHECK_EQ_INT(f.kill_at_round, 2);
    CHECK(strcmp(f.notify, "/tmp/notices") == 0);
    clear_env();
    CHECK_EQ_INT(gt_faults_check(NULL), GT_ERR_INVALID);
}

static void test_set_and_hooks(void)
{
    gt_diloco_t d;
    memset(&d, 0, sizeof d);
    gt_faults_t f;
    gt_faults_init(&f);
    f.corrupt_anchor_round = 4;
    CHECK_EQ_INT(gt_diloco_set_faults(&d, &f), GT_ERR_INVALID); /* not a site */
    d.magic = GT_DILOCO_MAGIC;
    d.name = "a";
    d.H = 10;
    CHECK_EQ_INT(gt_diloco_set_faults(&d, &f), GT_OK);
    CHECK(!dl_fault_corrupts(&d, 3) && dl_fault_corrupts(&d, 4) && !dl_fault_corrupts(&d, 5));
    f.slow = 0.9;
    CHECK_EQ_INT(gt_diloco_set_faults(&d, &f), GT_ERR_INVALID);
    /* a window of 2x from round 1 for 0.5 rounds of 10 steps of 2 ms: 10 ms long */
    gt_faults_init(&f);
    f.n_windows = 1;
    f.windows[0] = (gt_fault_window_t){2.0, 1.0, 1.5};
    CHECK_EQ_INT(gt_diloco_set_faults(&d, &f), GT_OK);
    d.base_ema = 0.002;
    d.step = 9; /* round 0.9: before it */
    CHECK(dl_fault_windows(&d, 0.002) == 0.0);
    d.step = 10;
    double extra = dl_fault_windows(&d, 0.002);
    CHECK_MSG(extra >= 0.002 && extra < 0.1, "slept %g s for a 2 ms step at 2x", extra);
    CHECK(d.chaos_slow_s == extra);
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL); /* past the window's 10 ms */
    CHECK(dl_fault_windows(&d, 0.002) == 0.0);
    CHECK(d.win[0].over);
    d.stepped = 1; /* after the first step: too late to change */
    CHECK_EQ_INT(gt_diloco_set_faults(&d, &f), GT_ERR_INVALID);
}

/* The kill point: below the round nothing happens; at it, the site writes its notice and stops
 * (it does not die), and only the supervisor's SIGKILL ends it. */
static void test_kill_point(void)
{
    char notice[] = "/tmp/gt-faults-XXXXXX";
    int fd = mkstemp(notice);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    pid_t pid = fork();
    if (pid == 0) {
        gt_diloco_t d;
        memset(&d, 0, sizeof d);
        d.magic = GT_DILOCO_MAGIC;
        d.name = "b";
        d.rank = 0; /* of 2: the last rank stops, whose death takes the other down */
        d.ranks = 2;
        gt_faults_init(&d.faults);
        d.faults.kill_at_round = 3;
        snprintf(d.faults.notify, sizeof d.faults.notify, "%s", notice);
        d.applied_upto = 3;
        dl_fault_kill_point(&d); /* not the last rank */
        d.rank = 1;              /* no status file either */
        d.applied_upto = 2;
        dl_fault_kill_point(&d); /* not yet */
        d.applied_upto = 3;
        dl_fault_kill_point(&d);
        _exit(7); /* only after a SIGCONT */
    }
    int status = 0;
    CHECK_EQ_INT(waitpid(pid, &status, WUNTRACED), pid);
    CHECK_MSG(WIFSTOPPED(status) && WSTOPSIG(status) == SIGSTOP, "status 0x%x", status);
    FILE *f = fopen(notice, "r");
    char line[256] = "";
    CHECK(f && fgets(line, sizeof line, f));
    if (f) fclose(f);
    char want[128];
    snprintf(want, sizeof want, "kill b %ld 3\n", (long)pid);
    CHECK_MSG(strcmp(line, want) == 0, "notice '%s', expected '%s'", line, want);
    kill(pid, SIGKILL);
    CHECK_EQ_INT(waitpid(pid, &status, 0), pid);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    unlink(notice);
}

int main(void)
{
    test_env();
    test_set_and_hooks();
    test_kill_point();
    return GT_TEST_DONE();
}
