/* test_etcd_port_taken.c — a local etcd (one member, and a 3-member cluster) starts although
 * a port picked for it was taken before etcd could bind it: the member exits at start
 * ("address already in use"), and the start is made again on other ports. Run with
 * port_taken_shim.so preloaded (ctest does), which hands out a port it holds; without it the
 * test fails (it would prove nothing). */
#include "gt_test.h"
#include "etcd_local.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* 1 when `path` (an etcd.log) says a listen failed on `port`. */
static int log_says_taken(const char *path, int port)
{
    char line[4096], want[64];
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    snprintf(want, sizeof want, ":%d: bind: address already in use", port);
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) found = strstr(line, want) != NULL;
    fclose(f);
    return found;
}

int main(void)
{
    int (*arm)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "shim_arm");
    if (!arm) {
        fprintf(stderr, "port_taken_shim.so is not preloaded (run it with ctest)\n");
        return 1;
    }
    char *tmp = gt_test_tmpdir(), dir[1024], log[1100];

    snprintf(dir, sizeof dir, "%s/one", tmp);
    CHECK_EQ_INT(mkdir(dir, 0700), 0);
    int port = arm();
    CHECK(port > 0);
    gt_etcd_local_t one;
    CHECK_EQ_INT(gt_etcd_local_start(dir, 30000, &one), GT_OK);
    snprintf(log, sizeof log, "%s/etcd.log", dir);
    CHECK_MSG(log_says_taken(log, port), "the first start did not meet the taken port %d", port);
    CHECK(one.client_port != port && one.peer_port != port);
    gt_etcd_local_stop(&one);

    snprintf(dir, sizeof dir, "%s/cluster", tmp);
    port = arm();
    gt_etcd_cluster_t c;
    CHECK_EQ_INT(gt_etcd_cluster_start(dir, 3, 30000, &c), GT_OK);
    snprintf(log, sizeof log, "%s/m0/etcd.log", dir);
    CHECK_MSG(log_says_taken(log, port), "the first start did not meet the taken port %d", port);
    for (size_t i = 0; i < c.n_members; i++)
        CHECK(c.members[i].client_port != port && c.members[i].peer_port != port);
    gt_etcd_cluster_stop(&c);

    gt_test_rmtree(tmp);
    free(tmp);
    return GT_TEST_DONE();
}
