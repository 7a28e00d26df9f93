/* etcd_local.c — a one-node etcd on free loopback ports, for `geotrain launch` when
 * sites.yaml names no membership endpoints, and for tests. It is Debian's etcd-server,
 * started for real; the data folder is the caller's. */
#include "gt_wan.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int gt_wan_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    memset(&a, 0, sizeof a);
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

/* GET /health over a plain socket: 1 when etcd reports itself healthy. */
static int etcd_healthy(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {1, 0};
    if (fd < 0) return 0;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return 0;
    }
    static const char req[] = "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    char buf[2048];
    size_t got = 0;
    ssize_t n;
    if (write(fd, req, sizeof req - 1) != (ssize_t)(sizeof req - 1)) {
        close(fd);
        return 0;
    }
    while (got < sizeof buf - 1 && (n = read(fd, buf + got, sizeof buf - 1 - got)) > 0)
        got += (size_t)n;
    close(fd);
    buf[got] = '\0';
    return strstr(buf, "\"health\":\"true\"") != NULL;
}

gt_status_t gt_wan_etcd_local_start(const char *dir, uint32_t timeout_ms,
                                    gt_wan_etcd_local_t *etcd_p)
{
    gt_wan_etcd_local_t e;
    memset(&e, 0, sizeof e);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        GT_ERROR("etcd: cannot create %s: %s", dir, strerror(errno));
        return GT_ERR_IO;
    }
    e.client_port = gt_wan_free_port();
    e.peer_port = gt_wan_free_port();
    if (e.client_port <= 0 || e.peer_port <= 0 || e.client_port == e.peer_port) {
        GT_ERROR("etcd: no free loopback port");
        return GT_ERR_IO;
    }
    snprintf(e.url, sizeof e.url, "http://127.0.0.1:%d", e.client_port);
    char data[1100], log[1100], peer[64], cluster[96];
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(log, sizeof log, "%s/etcd.log", dir);
    snprintf(peer, sizeof peer, "http://127.0.0.1:%d", e.peer_port);
    snprintf(cluster, sizeof cluster, "geotrain=%s", peer);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        GT_ERROR("etcd: fork failed: %s", strerror(errno));
        return GT_ERR_IO;
    }
    if (pid == 0) {
        setpgid(0, 0); /* a Ctrl-C at the terminal goes to geotrain, which stops us in order */
        /* ... and if geotrain dies without stopping us (SIGKILL), etcd goes with it. */
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent) _exit(125);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execlp("etcd", "etcd", "--name", "geotrain", "--data-dir", data, "--listen-client-urls",
               e.url, "--advertise-client-urls", e.url, "--listen-peer-urls", peer,
               "--initial-advertise-peer-urls", peer, "--initial-cluster", cluster, "--log-level",
               "warn", (char *)NULL);
        _exit(127);
    }
    e.pid = (int)pid;
    uint64_t t0 = gt_time_ns();
    while ((gt_time_ns() - t0) / 1000000u < timeout_ms) {
        if (etcd_healthy(e.client_port)) {
            GT_INFO("etcd: started a one-node etcd at %s (data in %s)", e.url, data);
            *etcd_p = e;
            return GT_OK;
        }
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            GT_ERROR("etcd exited at start (status %d; is Debian's etcd-server installed?); see %s",
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1, log);
            return GT_ERR_IO;
        }
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
    GT_ERROR("etcd did not answer /health within %u ms; see %s", timeout_ms, log);
    gt_wan_etcd_local_stop(&e);
    return GT_ERR_TIMEOUT;
}

void gt_wan_etcd_local_pause(gt_wan_etcd_local_t *e, int paused)
{
    if (e && e->pid > 0) kill((pid_t)e->pid, paused ? SIGSTOP : SIGCONT);
}

void gt_wan_etcd_local_stop(gt_wan_etcd_local_t *e)
{
    if (!e || e->pid <= 0) return;
    pid_t pid = (pid_t)e->pid;
    kill(pid, SIGCONT);
    kill(pid, SIGTERM);
    for (int i = 0; i < 50; i++) {
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            e->pid = 0;
            return;
        }
        struct timespec ts = {0, 100000000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    e->pid = 0;
}
