/* wan_harness.h — a client/server harness for the WAN tests (fabtests style): the server
 * is a fresh process (fork + exec of the test binary with --serve, because UCX does not
 * survive a fork after it is initialised) that reads the test config from a pipe, creates
 * its net, listens on a free loopback port and reports it through another pipe; the parent
 * connects and asserts. */
#ifndef GT_WAN_HARNESS_H
#define GT_WAN_HARNESS_H

#include <sys/types.h>

#include "gt_wan.h"

#define SITE_SERVER   0u
#define SITE_CLIENT   1u
#define SITE_INTRUDER 2u

typedef struct {
    gt_wan_transport_t transport;
    gt_wan_security_t security;
    gt_wan_keypair_t keys[3]; /* server, client, intruder (never pinned) */
    double emu_latency_ms;    /* > 0 or emu_mbps > 0: every net of the test emulates the WAN */
    double emu_mbps;
    double emu_cut_start_s, emu_cut_s; /* emu_cut_s > 0: a cut of the client -> server link */
    double emu_hold_timeout_ms;        /* the emulator's hold_timeout_ms */
    size_t frame_bytes, window;
    uint32_t max_rejects, io_timeout_ms;
    char listen_host[64];    /* the server's listen address; "" = 127.0.0.1 */
    char server_netns[64];   /* "": the server runs in our network namespace */
    char server_ucx_dev[32]; /* UCX_NET_DEVICES for the server; "" = unset */
} wt_cfg_t;

/* Fresh keys, the given transport and mode, small defaults. */
void wt_cfg_init(wt_cfg_t *cfg, gt_wan_transport_t transport, gt_wan_security_t security);
/* A net for site `site` (its own key; pins server and client). */
gt_status_t wt_net(const wt_cfg_t *cfg, uint32_t site, gt_wan_net_t **net_p);

typedef int (*wt_server_fn)(const wt_cfg_t *cfg, gt_wan_net_t *net, const char *arg);
typedef struct {
    const char *name;
    wt_server_fn fn;
} wt_server_t;

/* Starts the server `name` (looked up in the table given to wt_serve_main) with `arg`: it
 * makes its net, listens on 127.0.0.1:0, sends the port, runs, and exits with the server
 * function's return value (setup failures exit 90+). */
pid_t wt_spawn_server(const wt_cfg_t *cfg, const char *name, const char *arg, uint16_t *port_p);
/* In main: when argv is "--serve NAME ARG", runs that server and never returns. */
void wt_serve_main(int argc, char **argv, const wt_server_t *table);
/* When wt_net made the emulator of this process (wt_now_s() clock; cut windows count
 * from it). */
double wt_emu_start_s(void);
/* Frees the emulator wt_net made, if any. */
void wt_cleanup(void);
/* The server's exit status (waits up to timeout_ms, then SIGKILLs it and returns -1). */
int wt_wait(pid_t pid, unsigned timeout_ms);
/* Accepts one ready endpoint within timeout_ms (NULL on failure). */
gt_wan_ep_t *wt_accept(gt_wan_net_t *net, unsigned timeout_ms);
/* Connects to the server site at 127.0.0.1 and waits for the handshake (NULL on failure). */
gt_wan_ep_t *wt_connect(gt_wan_net_t *net, uint16_t port, unsigned timeout_ms);
gt_wan_ep_t *wt_connect_host(gt_wan_net_t *net, const char *host, uint16_t port,
                             unsigned timeout_ms);

/* A deterministic byte pattern and its check. */
void wt_fill(void *buf, size_t len, uint64_t seed);
int wt_check(const void *buf, size_t len, uint64_t seed);
double wt_now_s(void);

#endif
