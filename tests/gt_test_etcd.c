/* gt_test_etcd.c — start and stop a real etcd for tests. */
#include "gt_test_etcd.h"

#include "gt_test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int gt_test_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    socklen_t len = sizeof a;
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

/* GET /health over a plain socket; 1 when etcd says it is healthy. */
static int healthy(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return 0;
    }
    const char *req = "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    char buf[2048] = {0};
    size_t got = 0;
    ssize_t n;
    if (write(fd, req, strlen(req)) != (ssize_t)strlen(req)) {
        close(fd);
        return 0;
    }
    while (got < sizeof buf - 1 && (n = read(fd, buf + got, sizeof buf - 1 - got)) > 0)
        got += (size_t)n;
    close(fd);
    return strstr(buf, "\"health\":\"true\"") != NULL;
}

int gt_test_etcd_start(gt_test_etcd_t *e)
{
    memset(e, 0, sizeof *e);
    char *tmp = gt_test_tmpdir();
    snprintf(e->dir, sizeof e->dir, "%s", tmp);
    free(tmp);
    e->client_port = gt_test_free_port();
    e->peer_port = gt_test_free_port();
    if (e->client_port <= 0 || e->peer_port <= 0 || e->client_port == e->peer_port) return -1;
    snprintf(e->url, sizeof e->url, "http://127.0.0.1:%d", e->client_port);
    char data[300], log[300], client[64], peer[64], cluster[96];
    snprintf(data, sizeof data, "%s/data", e->dir);
    snprintf(log, sizeof log, "%s/etcd.log", e->dir);
    snprintf(client, sizeof client, "http://127.0.0.1:%d", e->client_port);
    snprintf(peer, sizeof peer, "http://127.0.0.1:%d", e->peer_port);
    snprintf(cluster, sizeof cluster, "t=%s", peer);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        FILE *f = freopen(log, "w", stderr);
        (void)f;
        dup2(2, 1);
        execlp("etcd", "etcd", "--name", "t", "--data-dir", data, "--listen-client-urls", client,
               "--advertise-client-urls", client, "--listen-peer-urls", peer,
               "--initial-advertise-peer-urls", peer, "--initial-cluster", cluster, "--log-level",
               "warn", (char *)NULL);
        _exit(127);
    }
    e->pid = pid;
    for (int i = 0; i < 200; i++) {
        if (healthy(e->client_port)) return 0;
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            fprintf(stderr, "etcd exited early (is etcd-server installed?); log in %s\n", log);
            e->pid = 0;
            return -1;
        }
        struct timespec ts = {0, 100000000};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "etcd did not become healthy in 20 s; log in %s\n", log);
    gt_test_etcd_stop(e);
    return -1;
}

void gt_test_etcd_pause(gt_test_etcd_t *e, int paused)
{
    if (e->pid > 0) kill(e->pid, paused ? SIGSTOP : SIGCONT);
}

void gt_test_etcd_stop(gt_test_etcd_t *e)
{
    if (e->pid > 0) {
        kill(e->pid, SIGCONT);
        kill(e->pid, SIGKILL);
        waitpid(e->pid, NULL, 0);
        e->pid = 0;
    }
    if (e->dir[0]) {
        gt_test_rmtree(e->dir);
        e->dir[0] = '\0';
    }
}
