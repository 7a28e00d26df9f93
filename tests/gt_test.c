/* gt_test.c — helpers behind gt_test.h. */
#include "gt_test.h"

#include "gt_base.h"

#include <stdlib.h>
#include <unistd.h>

int gt_test_failures = 0;
int gt_test_checks = 0;

void gt_test_skip(const char *why)
{
    fprintf(stderr, "SKIP: %s\n", why);
    exit(77);
}

char *gt_test_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/geotrain-test-XXXXXX", base ? base : "/tmp");
    char *dir = mkdtemp(tmpl);
    if (!dir) {
        perror("mkdtemp");
        exit(1);
    }
    return strdup(dir);
}

int gt_test_rmtree(const char *path)
{
    return gt_rmtree(path);
}

int gt_test_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    size_t n = strlen(text);
    int ok = fwrite(text, 1, n, f) == n;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

int gt_test_run(const char *cmd, char **out_p)
{
    char full[8192];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p) return -1;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += n;
        if (cap - len < 1024) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) break;
            buf = nb;
            cap *= 2;
        }
    }
    if (buf) buf[len] = '\0';
    int st = pclose(p);
    if (out_p)
        *out_p = buf;
    else
        free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}
