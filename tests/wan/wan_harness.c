/* wan_harness.c — see wan_harness.h. */
#include "wan_harness.h"

#include "emu_internal.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static gt_wan_emu_t *g_emu;
static double g_emu_start_s;

double wt_emu_start_s(void)
{
    return g_emu_start_s;
}

void wt_cfg_init(wt_cfg_t *cfg, gt_wan_transport_t transport, gt_wan_security_t security)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->transport = transport;
    cfg->security = security;
    for (int i = 0; i < 3; i++)
        if (gt_wan_keypair_generate(&cfg->keys[i]) != GT_OK) abort();
    cfg->frame_bytes = 1u << 20;
    cfg->window = 8;
    cfg->max_rejects = 3;
    cfg->io_timeout_ms = 5000;
}

gt_status_t wt_net(const wt_cfg_t *cfg, uint32_t site, gt_wan_net_t **net_p)
{
    gt_wan_pinned_key_t peers[2];
    memset(peers, 0, sizeof peers);
    peers[0].site_id = SITE_SERVER;
    peers[0].name = "server";
    memcpy(peers[0].public_key, cfg->keys[SITE_SERVER].public_key, GT_WAN_KEY_BYTES);
    peers[1].site_id = SITE_CLIENT;
    peers[1].name = "client";
    memcpy(peers[1].public_key, cfg->keys[SITE_CLIENT].public_key, GT_WAN_KEY_BYTES);
    gt_wan_net_params_t p = GT_WAN_NET_PARAMS_INIT;
    p.transport = cfg->transport;
    p.security = cfg->security;
    p.site_id = site;
    p.site_name = site == SITE_SERVER ? "server" : site == SITE_CLIENT ? "client" : "intruder";
    p.run_id = "wan-test";
    p.keypair = &cfg->keys[site];
    p.peers = peers;
    p.n_peers = 2;
    p.frame_bytes = cfg->frame_bytes;
    p.window = cfg->window;
    p.connect_timeout_ms = 5000;
    p.io_timeout_ms = cfg->io_timeout_ms;
    p.max_rejects = cfg->max_rejects;
    /* On loopback every net uses only lo (the server's listen address says so for it). */
    if (!cfg->server_netns[0]) p.local_host = "127.0.0.1";
    if ((cfg->emu_latency_ms > 0 || cfg->emu_mbps > 0 || cfg->emu_cut_s > 0) && !g_emu) {
        gt_wan_emu_params_t ep = GT_WAN_EMU_PARAMS_INIT;
        ep.n_sites = 3;
        ep.seed = 1;
        ep.start_ns = gt_time_ns();
        ep.link.latency_ms = cfg->emu_latency_ms;
        ep.link.bandwidth_mbps = cfg->emu_mbps;
        ep.hold_timeout_ms = cfg->emu_hold_timeout_ms;
        gt_status_t st = gt_wan_emu_create(&ep, &g_emu);
        if (st != GT_OK) return st;
        g_emu_start_s = wt_now_s();
        if (cfg->emu_cut_s > 0) {
            gt_wan_emu_link_params_t cut = ep.link;
            cut.n_cuts = 1;
            cut.cuts[0].start_s = cfg->emu_cut_start_s;
            cut.cuts[0].duration_s = cfg->emu_cut_s;
            st = gt_wan_emu_link_set(g_emu, SITE_CLIENT, SITE_SERVER, &cut);
            if (st != GT_OK) return st;
        }
    }
    p.emu = g_emu;
    return gt_wan_net_create(&p, net_p);
}

void wt_cleanup(void)
{
    gt_wan_emu_destroy(g_emu);
    g_emu = NULL;
}

pid_t wt_spawn_server(const wt_cfg_t *cfg, const char *name, const char *arg, uint16_t *port_p)
{
    int cfg_fds[2], port_fds[2];
    if (pipe(cfg_fds) != 0) return -1;
    if (pipe(port_fds) != 0) {
        close(cfg_fds[0]);
        close(cfg_fds[1]);
        return -1;
    }
    /* The config fits a pipe buffer; the child reads it after exec. */
    if (write(cfg_fds[1], cfg, sizeof *cfg) != (ssize_t)sizeof *cfg) return -1;
    close(cfg_fds[1]);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        close(port_fds[0]);
        if (dup2(cfg_fds[0], 3) < 0 || dup2(port_fds[1], 4) < 0) _exit(94);
        if (cfg->server_ucx_dev[0]) setenv("UCX_NET_DEVICES", cfg->server_ucx_dev, 1);
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0) _exit(95);
        self[n] = '\0';
        if (cfg->server_netns[0]) {
            /* `ip netns exec` also remounts /sys for the namespace, which UCX reads to find
             * its network devices (a bare setns would leave it looking at ours). */
            char *args[] = {"ip", "netns",   "exec",       (char *)cfg->server_netns,
                            self, "--serve", (char *)name, (char *)(arg ? arg : ""),
                            NULL};
            execvp("ip", args);
        } else {
            char *args[] = {self, "--serve", (char *)name, (char *)(arg ? arg : ""), NULL};
            execv(self, args);
        }
        _exit(95);
    }
    close(cfg_fds[0]);
    close(port_fds[1]);
    struct pollfd pfd = {.fd = port_fds[0], .events = POLLIN};
    uint16_t port = 0;
    if (poll(&pfd, 1, 10000) != 1 ||
        read(port_fds[0], &port, sizeof port) != (ssize_t)sizeof port) {
        close(port_fds[0]);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    close(port_fds[0]);
    *port_p = port;
    return pid;
}

void wt_serve_main(int argc, char **argv, const wt_server_t *table)
{
    if (argc < 4 || strcmp(argv[1], "--serve") != 0) return;
    wt_cfg_t cfg;
    if (read(3, &cfg, sizeof cfg) != (ssize_t)sizeof cfg) _exit(90);
    close(3);
    const wt_server_t *s = table;
    while (s->name && strcmp(s->name, argv[2]) != 0) s++;
    if (!s->name) _exit(96);
    gt_wan_net_t *net = NULL;
    uint16_t port = 0;
    if (wt_net(&cfg, SITE_SERVER, &net) != GT_OK) _exit(91);
    const char *host = cfg.listen_host[0] ? cfg.listen_host : "127.0.0.1";
    if (gt_wan_net_listen(net, host, 0, &port) != GT_OK) _exit(92);
    if (write(4, &port, sizeof port) != (ssize_t)sizeof port) _exit(93);
    close(4);
    int rc = s->fn(&cfg, net, argv[3]);
    gt_wan_net_destroy(net);
    wt_cleanup();
    exit(rc);
}

int wt_wait(pid_t pid, unsigned timeout_ms)
{
    double end = wt_now_s() + timeout_ms / 1000.0;
    int status = 0;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) break;
        if (r < 0 && errno != EINTR) return -1;
        if (wt_now_s() > end) {
            fprintf(stderr, "server %d did not finish in %u ms; killing it\n", (int)pid,
                    timeout_ms);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        usleep(2000);
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

gt_wan_ep_t *wt_accept(gt_wan_net_t *net, unsigned timeout_ms)
{
    double end = wt_now_s() + timeout_ms / 1000.0;
    gt_wan_ep_t *ep = NULL;
    while (wt_now_s() < end) {
        gt_wan_net_progress(net);
        if (gt_wan_net_accept(net, &ep) == GT_OK) return ep;
    }
    return NULL;
}

gt_wan_ep_t *wt_connect(gt_wan_net_t *net, uint16_t port, unsigned timeout_ms)
{
    return wt_connect_host(net, "127.0.0.1", port, timeout_ms);
}

gt_wan_ep_t *wt_connect_host(gt_wan_net_t *net, const char *host, uint16_t port,
                             unsigned timeout_ms)
{
    gt_wan_ep_t *ep = NULL;
    if (gt_wan_net_connect(net, host, port, SITE_SERVER, &ep) != GT_OK) return NULL;
    if (gt_wan_ep_wait_ready(ep, timeout_ms) != GT_OK) {
        gt_wan_ep_close(ep);
        return NULL;
    }
    return ep;
}

/* splitmix64 words: cheap, deterministic, and position-dependent. */
static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void wt_fill(void *buf, size_t len, uint64_t seed)
{
    uint8_t *p = buf;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t v = mix(seed + i);
        memcpy(p + i, &v, 8);
    }
    uint64_t v = mix(seed + i);
    for (; i < len; i++) p[i] = (uint8_t)(v >> (8 * (i % 8)));
}

int wt_check(const void *buf, size_t len, uint64_t seed)
{
    const uint8_t *p = buf;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t v = mix(seed + i);
        if (memcmp(p + i, &v, 8) != 0) return 0;
    }
    uint64_t v = mix(seed + i);
    for (; i < len; i++)
        if (p[i] != (uint8_t)(v >> (8 * (i % 8)))) return 0;
    return 1;
}

double wt_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}
