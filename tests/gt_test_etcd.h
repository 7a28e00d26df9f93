/* gt_test_etcd.h — a real etcd server (Debian's etcd-server) for tests, on free loopback
 * ports, with its data in a temporary folder; stopped and removed by gt_test_etcd_stop. */
#ifndef GT_TEST_ETCD_H
#define GT_TEST_ETCD_H

#include <sys/types.h>

typedef struct {
    pid_t pid;
    int client_port, peer_port;
    char url[64];  /* http://127.0.0.1:PORT */
    char dir[256]; /* data folder */
} gt_test_etcd_t;

/* Starts etcd and waits (up to 20 s) until it answers /health. Returns 0 on success. */
int gt_test_etcd_start(gt_test_etcd_t *e);
/* SIGSTOP/SIGCONT: a frozen server accepts connections but never answers. */
void gt_test_etcd_pause(gt_test_etcd_t *e, int paused);
/* Kills it and removes its data. Accepts a never-started or stopped handle. */
void gt_test_etcd_stop(gt_test_etcd_t *e);
/* A TCP port on 127.0.0.1 that was free a moment ago. */
int gt_test_free_port(void);

#endif /* GT_TEST_ETCD_H */
