/* etcd_local.c — etcd on free loopback ports, for `geotrain launch` when sites.yaml names no
 * membership endpoints, and for tests: one node, or a cluster of several members (Raft: with 3
 * members, one can die and membership goes on). It is Debian's etcd-server, started for real;
 * the data folders are the caller's. Members die with the process that started them. */
#include "etcd_local.h"

#include "certs.h"

#include <curl/curl.h>

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

#define START_TRIES 3 /* starts on fresh ports when a member exits at start */

int gt_etcd_free_port(void)
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

/* GET URL/health (with the admin certificate where tls_dir is set): 1 when etcd reports
 * itself healthy. libcurl, as the sites' membership client talks to etcd. */
static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    char *buf = ud;
    size_t have = strlen(buf), add = size * n;
    if (have + add >= 512) add = 511 - have;
    memcpy(buf + have, p, add);
    buf[have + add] = '\0';
    return size * n;
}

static int etcd_healthy(const char *url, const char *tls_dir)
{
    CURL *h = curl_easy_init();
    if (!h) return 0;
    char full[128], buf[512] = "", ca[1100], crt[1100], key[1100];
    snprintf(full, sizeof full, "%s/health", url);
    curl_easy_setopt(h, CURLOPT_URL, full);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, buf);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 1000L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (tls_dir && *tls_dir) {
        gt_certs_paths(tls_dir, "ca", ca, key, sizeof ca);
        curl_easy_setopt(h, CURLOPT_CAINFO, ca);
        gt_certs_paths(tls_dir, GT_ETCD_TLS_ADMIN, crt, key, sizeof crt);
        curl_easy_setopt(h, CURLOPT_SSLCERT, crt);
        curl_easy_setopt(h, CURLOPT_SSLKEY, key);
    }
    int ok = curl_easy_perform(h) == CURLE_OK && strstr(buf, "\"health\":\"true\"") != NULL;
    curl_easy_cleanup(h);
    return ok;
}

/* Forks and execs one etcd member; the caller waits for health. */
static gt_status_t spawn_member(const char *dir, const char *name, int client_port, int peer_port,
                                const char *initial_cluster, const char *tls_dir, pid_t *pid_p)
{
    int tls = tls_dir && *tls_dir;
    const char *scheme = tls ? "https" : "http";
    char ca[1100], crt[1100], key[1100];
    if (tls) {
        gt_certs_paths(tls_dir, "ca", ca, key, sizeof ca);
        gt_certs_paths(tls_dir, name, crt, key, sizeof crt);
    }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        GT_ERROR("etcd: cannot create %s: %s", dir, strerror(errno));
        return GT_ERR_IO;
    }
    char data[1100], log[1100], url[64], peer[64];
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(log, sizeof log, "%s/etcd.log", dir);
    snprintf(url, sizeof url, "%s://127.0.0.1:%d", scheme, client_port);
    snprintf(peer, sizeof peer, "%s://127.0.0.1:%d", scheme, peer_port);
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
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644); /* a restart appends */
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        /* A restarted member finds its data folder and ignores the initial-cluster flags. */
        if (tls) /* a certificate of the run's CA from every client and every peer */
            execlp("etcd", "etcd", "--name", name, "--data-dir", data, "--listen-client-urls", url,
                   "--advertise-client-urls", url, "--listen-peer-urls", peer,
                   "--initial-advertise-peer-urls", peer, "--initial-cluster", initial_cluster,
                   "--initial-cluster-state", "new", "--log-level", "warn", "--cert-file", crt,
                   "--key-file", key, "--trusted-ca-file", ca, "--client-cert-auth",
                   "--peer-cert-file", crt, "--peer-key-file", key, "--peer-trusted-ca-file", ca,
                   "--peer-client-cert-auth", (char *)NULL);
        else
            execlp("etcd", "etcd", "--name", name, "--data-dir", data, "--listen-client-urls", url,
                   "--advertise-client-urls", url, "--listen-peer-urls", peer,
                   "--initial-advertise-peer-urls", peer, "--initial-cluster", initial_cluster,
                   "--initial-cluster-state", "new", "--log-level", "warn", (char *)NULL);
        _exit(127);
    }
    *pid_p = pid;
    return GT_OK;
}

/* Waits until every running member answers /health (which needs a leader: quorum). A member
 * that exits first: GT_ERR_AGAIN when a start on other ports may succeed (it ran, and most
 * likely found a port taken: the ports are picked free, then bound by etcd, and another
 * process can take one in between), logged as an error otherwise (etcd not installed). */
static gt_status_t wait_healthy(gt_etcd_local_t *const *members, size_t n, const char *dir,
                                const char *tls_dir, uint32_t timeout_ms, int last_try)
{
    uint64_t t0 = gt_time_ns();
    while ((gt_time_ns() - t0) / 1000000u < timeout_ms) {
        size_t healthy = 0;
        for (size_t i = 0; i < n; i++) {
            int status;
            if (waitpid((pid_t)members[i]->pid, &status, WNOHANG) == (pid_t)members[i]->pid) {
                members[i]->pid = 0;
                int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
                if (!last_try && code != 127 && code != 125) {
                    GT_WARN("etcd member %zu exited at start (status %d; a port picked for it "
                            "taken meanwhile?); starting again on other ports",
                            i, code);
                    return GT_ERR_AGAIN;
                }
                GT_ERROR("etcd member %zu exited at start (status %d%s); see its etcd.log under %s",
                         i, code,
                         code == 127 ? ": no etcd on PATH; install Debian's etcd-server" : "", dir);
                return GT_ERR_IO;
            }
            healthy += etcd_healthy(members[i]->url, tls_dir);
        }
        if (healthy == n) return GT_OK;
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
    GT_ERROR("etcd did not answer /health within %u ms; see %s", timeout_ms, dir);
    return GT_ERR_TIMEOUT;
}

gt_status_t gt_etcd_local_start(const char *dir, uint32_t timeout_ms, gt_etcd_local_t *etcd_p)
{
    gt_etcd_local_t e;
    gt_status_t s = GT_ERR_AGAIN;
    for (int attempt = 0; s == GT_ERR_AGAIN; attempt++) {
        memset(&e, 0, sizeof e);
        e.client_port = gt_etcd_free_port();
        e.peer_port = gt_etcd_free_port();
        if (e.client_port <= 0 || e.peer_port <= 0 || e.client_port == e.peer_port) {
            GT_ERROR("etcd: no free loopback port");
            return GT_ERR_IO;
        }
        snprintf(e.url, sizeof e.url, "http://127.0.0.1:%d", e.client_port);
        char cluster[96], data[1100];
        snprintf(cluster, sizeof cluster, "geotrain=http://127.0.0.1:%d", e.peer_port);
        snprintf(data, sizeof data, "%s/data", dir);
        if (attempt) gt_rmtree(data); /* what the failed start may have written */
        pid_t pid = 0;
        if ((s = spawn_member(dir, "geotrain", e.client_port, e.peer_port, cluster, NULL, &pid)) !=
            GT_OK)
            return s;
        e.pid = (int)pid;
        gt_etcd_local_t *one = &e;
        if ((s = wait_healthy(&one, 1, dir, NULL, timeout_ms, attempt == START_TRIES - 1)) != GT_OK)
            gt_etcd_local_stop(&e);
    }
    if (s != GT_OK) return s;
    GT_INFO("etcd: started a one-node etcd at %s (data in %s/data)", e.url, dir);
    *etcd_p = e;
    return GT_OK;
}

/* One start of an n-member cluster on fresh ports (see wait_healthy for GT_ERR_AGAIN). */
static gt_status_t cluster_try(gt_etcd_cluster_t *c, const char *dir, size_t n, const char *tls_dir,
                               uint32_t timeout_ms, int attempt)
{
    const char *scheme = tls_dir && *tls_dir ? "https" : "http";
    snprintf(c->dir, sizeof c->dir, "%s", dir);
    snprintf(c->tls_dir, sizeof c->tls_dir, "%s", tls_dir ? tls_dir : "");
    c->n_members = n;
    /* Distinct free ports for every member's client and peer URLs. */
    for (size_t i = 0; i < 2 * n; i++) {
        int port = 0;
        for (int tries = 0; tries < 20 && port <= 0; tries++) {
            port = gt_etcd_free_port();
            for (size_t j = 0; port > 0 && j < i; j++)
                if ((j % 2 ? c->members[j / 2].peer_port : c->members[j / 2].client_port) == port)
                    port = 0;
        }
        if (port <= 0) {
            GT_ERROR("etcd: no free loopback port");
            return GT_ERR_IO;
        }
        if (i % 2)
            c->members[i / 2].peer_port = port;
        else
            c->members[i / 2].client_port = port;
    }
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        gt_etcd_local_t *m = &c->members[i];
        snprintf(m->url, sizeof m->url, "%s://127.0.0.1:%d", scheme, m->client_port);
        off += (size_t)snprintf(c->initial_cluster + off, sizeof c->initial_cluster - off,
                                "%sm%zu=%s://127.0.0.1:%d", i ? "," : "", i, scheme, m->peer_port);
        snprintf(c->endpoints + strlen(c->endpoints), sizeof c->endpoints - strlen(c->endpoints),
                 "%s%s", i ? "," : "", m->url);
    }
    gt_etcd_local_t *all[GT_ETCD_MAX_MEMBERS];
    gt_status_t s = GT_OK;
    for (size_t i = 0; i < n && s == GT_OK; i++) {
        char sub[1100], name[16];
        pid_t pid = 0;
        snprintf(sub, sizeof sub, "%s/m%zu", dir, i);
        snprintf(name, sizeof name, "m%zu", i);
        if (attempt) { /* what the failed start may have written */
            char data[1200];
            snprintf(data, sizeof data, "%s/data", sub);
            gt_rmtree(data);
        }
        s = spawn_member(sub, name, c->members[i].client_port, c->members[i].peer_port,
                         c->initial_cluster, c->tls_dir, &pid);
        c->members[i].pid = (int)pid;
        all[i] = &c->members[i];
    }
    if (s == GT_OK)
        s = wait_healthy(all, n, dir, c->tls_dir, timeout_ms, attempt == START_TRIES - 1);
    if (s != GT_OK) gt_etcd_cluster_stop(c);
    return s;
}

/* The CA (made when absent), every member's certificate and the admin's, in tls_dir. */
static gt_status_t make_certs(const char *tls_dir, size_t n)
{
    char crt[1200], key[1200];
    gt_certs_paths(tls_dir, "ca", crt, key, sizeof crt);
    gt_status_t st =
        access(crt, F_OK) == 0 ? GT_OK : gt_certs_make_ca(tls_dir, "geotrain etcd CA", 30);
    static const char *const sans[] = {"127.0.0.1", "localhost"};
    for (size_t i = 0; i <= n && st == GT_OK; i++) {
        char name[32];
        if (i < n)
            snprintf(name, sizeof name, "m%zu", i);
        else
            snprintf(name, sizeof name, "%s", GT_ETCD_TLS_ADMIN);
        gt_certs_paths(tls_dir, name, crt, key, sizeof crt);
        if (access(key, F_OK) == 0) continue; /* a restart of the cluster: kept */
        st = gt_certs_issue(tls_dir, name, name, i < n ? GT_CERT_MEMBER : GT_CERT_CLIENT, sans,
                            i < n ? 2 : 0, 30);
    }
    return st;
}

gt_status_t gt_etcd_cluster_start(const char *dir, size_t n, uint32_t timeout_ms,
                                  gt_etcd_cluster_t *cl_p)
{
    return gt_etcd_cluster_start_tls(dir, n, timeout_ms, NULL, cl_p);
}

gt_status_t gt_etcd_cluster_start_tls(const char *dir, size_t n, uint32_t timeout_ms,
                                      const char *tls_dir, gt_etcd_cluster_t *cl_p)
{
    gt_etcd_cluster_t c;
    memset(&c, 0, sizeof c);
    if (n < 1 || n > GT_ETCD_MAX_MEMBERS) {
        GT_ERROR("etcd: a local cluster has 1 to %d members, not %zu", GT_ETCD_MAX_MEMBERS, n);
        return GT_ERR_INVALID;
    }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        GT_ERROR("etcd: cannot create %s: %s", dir, strerror(errno));
        return GT_ERR_IO;
    }
    gt_status_t s = tls_dir && *tls_dir ? make_certs(tls_dir, n) : GT_OK;
    if (s != GT_OK) return s;
    s = GT_ERR_AGAIN;
    for (int attempt = 0; s == GT_ERR_AGAIN; attempt++) {
        memset(&c, 0, sizeof c);
        s = cluster_try(&c, dir, n, tls_dir, timeout_ms, attempt);
    }
    if (s != GT_OK) return s;
    GT_INFO("etcd: started a %zu-member etcd cluster at %s (data in %s/m*/data%s%s)", n,
            c.endpoints, dir, c.tls_dir[0] ? "; TLS, client certificates of the CA in " : "",
            c.tls_dir);
    *cl_p = c;
    return GT_OK;
}

void gt_etcd_cluster_kill(gt_etcd_cluster_t *c, size_t i)
{
    if (!c || i >= c->n_members || c->members[i].pid <= 0) return;
    kill((pid_t)c->members[i].pid, SIGKILL);
    waitpid((pid_t)c->members[i].pid, NULL, 0);
    c->members[i].pid = 0;
    GT_INFO("etcd: member m%zu (%s) killed", i, c->members[i].url);
}

gt_status_t gt_etcd_cluster_restart(gt_etcd_cluster_t *c, size_t i)
{
    if (!c || i >= c->n_members) return GT_ERR_INVALID;
    if (c->members[i].pid > 0) return GT_OK;
    char sub[1100], name[16];
    pid_t pid = 0;
    snprintf(sub, sizeof sub, "%s/m%zu", c->dir, i);
    snprintf(name, sizeof name, "m%zu", i);
    gt_status_t s = spawn_member(sub, name, c->members[i].client_port, c->members[i].peer_port,
                                 c->initial_cluster, c->tls_dir, &pid);
    if (s == GT_OK) {
        c->members[i].pid = (int)pid;
        GT_INFO("etcd: member m%zu restarted at %s", i, c->members[i].url);
    }
    return s;
}

void gt_etcd_cluster_stop(gt_etcd_cluster_t *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->n_members; i++) gt_etcd_local_stop(&c->members[i]);
}

/* kill() only queues SIGSTOP: etcd's threads stop when the kernel next gets to them, and on a
 * loaded machine a request sent right after kill() could still be answered. So a pause waits
 * (at most 2 s) until the whole process is stopped, as waitpid(WUNTRACED) reports it. */
void gt_etcd_local_pause(gt_etcd_local_t *e, int paused)
{
    if (!e || e->pid <= 0) return;
    pid_t pid = (pid_t)e->pid;
    if (kill(pid, paused ? SIGSTOP : SIGCONT) != 0 || !paused) return;
    for (int i = 0; i < 2000; i++) {
        int wst = 0;
        pid_t r = waitpid(pid, &wst, WUNTRACED | WNOHANG);
        if (r == pid && WIFSTOPPED(wst)) return;
        if (r < 0) return; /* not our child (or gone): nothing to wait on */
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    GT_WARN("etcd: pid %d did not stop within 2 s of SIGSTOP", (int)pid);
}

void gt_etcd_local_stop(gt_etcd_local_t *e)
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
