/* bench_wan.c — `geotrain bench wan`: WAN transport throughput, plain and encrypted, beside
 * the transports' own tools measured in the same run on the same loopback.
 *
 * Method: a server process (this binary re-executed with --serve, so no transport state is
 * inherited across fork) accepts one connection and sinks messages; the client streams
 * `count` messages of `size` bytes (all posted at once; the channel keeps `window` frames in
 * flight), then asks for an acknowledgement; MB/s = size * count / (time to the ack) / 10^6.
 * Each point is the median of --reps runs. Reference rows: ucx_perftest tag_bw (UCX_TLS=tcp,
 * as our UCX backend), fi_pingpong (tcp provider, msg endpoints, as our libfabric backend),
 * iperf3 (one TCP stream), and one core's AES-256-GCM seal rate on frame-sized buffers
 * (gt_wan_secure_bench_seal_rate). Rows of our transports carry the matching reference and
 * the ratio, so the targets (plain >= 90% of the tool, encrypted >= 80% of one core's
 * AES-GCM) read off one line.
 */
#include "cli.h"
#include "emu_internal.h"
#include "gt_wan.h"
#include "secure_internal.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    gt_wan_transport_t transport;
    gt_wan_security_t security;
    gt_wan_keypair_t keys[2]; /* 0 server, 1 client */
    size_t frame_bytes, window, max_size;
    int relay_off;    /* UCX encrypted without the sealed relay (the row beside it) */
    double link_mbps; /* > 0: the WAN emulator holds the link to this rate (--link-mbps) */
} bw_cfg_t;

typedef struct {
    int json;
    int transports; /* bit 0 ucx, bit 1 libfabric */
    size_t min_size, max_size, frame_bytes, window;
    size_t bytes_per_point;
    int reps;
    int tools;
    int modes;        /* bit 0 plain, bit 1 encrypted */
    double link_mbps; /* --link-mbps; 0 = loopback at full speed */
} bw_opts_t;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: geotrain bench wan [options]\n\n"
            "Throughput of the WAN channel over loopback for each transport, plain and\n"
            "encrypted, for message sizes from --min to --max (x4 steps), beside the\n"
            "transports' own tools (ucx_perftest tag_bw, fi_pingpong, iperf3) and one core's\n"
            "AES-256-GCM seal rate, all measured in the same run. One JSON object per line:\n"
            "  {\"transport\": \"ucx\", \"encrypted\": true, \"size\": 1048576, \"mbps\": 812.3,\n"
            "   \"ref\": \"aes256gcm\", \"ref_mbps\": 1650.0, \"ratio\": 0.49}\n"
            "Row ucx_norelay: encrypted UCX without the sealed relay (wan.ucx_relay: false), its\n"
            "ratio against the encrypted ucx row (with the relay): what the relay costs.\n"
            "mbps is MB/s (10^6 bytes per second), the median of --reps runs; load1 is the\n"
            "machine's 1-minute load average when the row was printed. With --link-mbps, the\n"
            "WAN emulator holds each direction of the link to that rate (a token bucket, as\n"
            "wan.emulation.bandwidth_mbps): what a transport delivers over a WAN link of that\n"
            "speed rather than what two processes on this machine's cores can push.\n\n"
            "Options:\n"
            "  --json               JSON lines only (the default prints them too, plus a table\n"
            "                       on stderr)\n"
            "  --transport T        ucx, libfabric or all (default all)\n"
            "  --min BYTES          smallest message (default 65536; K, M, G suffixes)\n"
            "  --max BYTES          largest message (default 256M)\n"
            "  --bytes BYTES        bytes streamed per measurement (default 256M)\n"
            "  --reps N             runs per point, median reported (default 3)\n"
            "  --frame-bytes BYTES  the channel's frame size (default 1M)\n"
            "  --window N           frames in flight per endpoint (default 8)\n"
            "  --no-tools           skip the reference tools\n"
            "  --mode M             plain, encrypted or all (default all)\n"
            "  --link-mbps R        emulate a link of R megabits/s (default 0: no limit)\n"
            "  -h, --help           this text\n");
}

static double now_s(void)
{
    return (double)gt_time_ns() / 1e9;
}

/* CPU seconds this process has used (all threads). */
static double cpu_s(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The net of one side; with --link-mbps also its emulator (*emu_p; NULL otherwise), which
 * outlives the net. */
static gt_status_t bw_net(const bw_cfg_t *cfg, uint32_t site, gt_wan_net_t **net_p,
                          gt_wan_emu_t **emu_p)
{
    *emu_p = NULL;
    if (cfg->link_mbps > 0) {
        gt_wan_emu_params_t ep = GT_WAN_EMU_PARAMS_INIT;
        ep.n_sites = 2;
        ep.link.bandwidth_mbps = cfg->link_mbps;
        gt_status_t st = gt_wan_emu_create(&ep, emu_p);
        if (st != GT_OK) return st;
    }
    gt_wan_pinned_key_t peers[2];
    memset(peers, 0, sizeof peers);
    for (uint32_t i = 0; i < 2; i++) {
        peers[i].site_id = i;
        peers[i].name = i == 0 ? "bench-server" : "bench-client";
        memcpy(peers[i].public_key, cfg->keys[i].public_key, GT_WAN_KEY_BYTES);
    }
    gt_wan_net_params_t p = GT_WAN_NET_PARAMS_INIT;
    p.transport = cfg->transport;
    p.security = cfg->security;
    p.site_id = site;
    p.site_name = peers[site].name;
    p.run_id = "bench-wan";
    p.keypair = &cfg->keys[site];
    p.peers = peers;
    p.n_peers = 2;
    p.frame_bytes = cfg->frame_bytes;
    p.window = cfg->window;
    p.ucx_relay_off = cfg->relay_off;
    p.emu = *emu_p;
    gt_status_t st = gt_wan_net_create(&p, net_p);
    if (st != GT_OK) {
        gt_wan_emu_destroy(*emu_p);
        *emu_p = NULL;
    }
    return st;
}

/* ---- the server (a fresh process) -------------------------------------------------- */

static int bw_serve(void)
{
    bw_cfg_t cfg;
    if (read(3, &cfg, sizeof cfg) != (ssize_t)sizeof cfg) return 90;
    close(3);
    gt_log_set_tag("bench-server");
    gt_wan_net_t *net = NULL;
    gt_wan_emu_t *emu = NULL;
    uint16_t port = 0;
    if (bw_net(&cfg, 0, &net, &emu) != GT_OK) return 91;
    if (gt_wan_net_listen(net, "127.0.0.1", 0, &port) != GT_OK) return 92;
    if (write(4, &port, sizeof port) != (ssize_t)sizeof port) return 93;
    close(4);
    gt_wan_ep_t *ep = NULL;
    double end = now_s() + 20;
    while (gt_wan_net_accept(net, &ep) != GT_OK && now_s() < end) gt_wan_net_progress(net);
    if (!ep) return 94;
    /* `window` receives stay posted (as many messages as the sender keeps frames in flight,
     * like ucx_perftest, which posts all its receives into one buffer); they rotate over two
     * buffers, since a sink never reads what lands. */
    size_t nr = cfg.window < 2 ? 2 : cfg.window;
    uint8_t *buf[2] = {malloc(cfg.max_size), malloc(cfg.max_size)};
    gt_wan_req_t *r = calloc(nr, sizeof *r);
    int rc = 0;
    if (!buf[0] || !buf[1] || !r) rc = 95;
    for (int i = 0; i < 2 && rc == 0; i++) /* fault the pages in before anything is timed */
        memset(buf[i], 0, cfg.max_size);
    for (size_t i = 0; i < nr && rc == 0; i++)
        if (gt_wan_ep_recv(ep, buf[i % 2], cfg.max_size, &r[i]) != GT_OK) rc = 96;
    for (size_t k = 0; rc == 0; k = (k + 1) % nr) {
        gt_status_t st = gt_wan_req_wait(&r[k], 60000);
        if (st != GT_OK) {
            rc = 97;
            break;
        }
        uint8_t type = r[k].msg.type;
        if (type == GT_WAN_MSG_BYE) break;
        if (gt_wan_ep_recv(ep, buf[k % 2], cfg.max_size, &r[k]) != GT_OK) {
            rc = 98;
            break;
        }
        if (type == GT_WAN_MSG_STATE_REQ) { /* the client's "ack please": our CPU time */
            gt_wan_req_t ack;
            gt_wan_msg_t m = {.type = GT_WAN_MSG_RESULT};
            double cpu = cpu_s();
            if (gt_wan_ep_send(ep, &m, &cpu, sizeof cpu, &ack) != GT_OK ||
                gt_wan_req_wait(&ack, 60000) != GT_OK)
                rc = 99;
        }
    }
    gt_wan_ep_close(ep);
    gt_wan_net_destroy(net);
    gt_wan_emu_destroy(emu);
    free(buf[0]);
    free(buf[1]);
    free(r);
    return rc;
}

static pid_t bw_spawn(const bw_cfg_t *cfg, uint16_t *port_p)
{
    int cfd[2], pfd[2];
    if (pipe(cfd) || pipe(pfd)) return -1;
    if (write(cfd[1], cfg, sizeof *cfg) != (ssize_t)sizeof *cfg) return -1;
    close(cfd[1]);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        close(pfd[0]);
        if (dup2(cfd[0], 3) < 0 || dup2(pfd[1], 4) < 0) _exit(80);
        char *args[] = {"geotrain", "bench", "wan", "--serve", NULL};
        execv("/proc/self/exe", args);
        _exit(81);
    }
    close(cfd[0]);
    close(pfd[1]);
    struct pollfd p = {.fd = pfd[0], .events = POLLIN};
    uint16_t port = 0;
    int ok = poll(&p, 1, 20000) == 1 && read(pfd[0], &port, sizeof port) == (ssize_t)sizeof port;
    close(pfd[0]);
    if (!ok) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    *port_p = port;
    return pid;
}

/* Asks the server for an acknowledgement (after everything sent before) and waits for it;
 * the server's CPU seconds so far in *cpu_p. */
static gt_status_t bw_ack(gt_wan_ep_t *ep, double *cpu_p)
{
    gt_wan_msg_t q = {.type = GT_WAN_MSG_STATE_REQ};
    gt_wan_req_t sr, ack;
    double cpu = 0;
    gt_status_t st = gt_wan_ep_send(ep, &q, NULL, 0, &sr);
    if (st == GT_OK) st = gt_wan_ep_recv(ep, &cpu, sizeof cpu, &ack);
    if (st == GT_OK) st = gt_wan_req_wait(&ack, 120000);
    if (st == GT_OK) st = gt_wan_req_wait(&sr, 10000);
    if (st == GT_OK && ack.length != sizeof cpu) st = GT_ERR_CORRUPT;
    *cpu_p = cpu;
    return st;
}

/* Streams count messages of size bytes and waits for the server's ack: seconds taken, and
 * the CPU seconds both processes used meanwhile in *cpu_p. */
static double bw_stream(gt_wan_ep_t *ep, const uint8_t *buf, size_t size, size_t count,
                        double *cpu_p)
{
    gt_wan_req_t *r = calloc(count, sizeof *r);
    if (!r) return -1;
    double srv0 = 0, srv1 = 0, dt = -1;
    if (bw_ack(ep, &srv0) != GT_OK) goto out; /* untimed: the server's CPU at the start */
    double t0 = now_s(), cpu0 = cpu_s();
    gt_wan_msg_t m = {.type = GT_WAN_MSG_DELTA};
    for (size_t i = 0; i < count; i++)
        if (gt_wan_ep_send(ep, &m, buf, size, &r[i]) != GT_OK) goto out;
    if (bw_ack(ep, &srv1) != GT_OK) goto out;
    dt = now_s() - t0;
    *cpu_p = cpu_s() - cpu0 + (srv1 - srv0);
    for (size_t i = 0; i < count; i++)
        if (gt_wan_req_wait(&r[i], 10000) != GT_OK) dt = -1;
out:
    free(r);
    return dt;
}

/* One live connection to a sink server: a transport in one mode. */
typedef struct {
    bw_cfg_t cfg;
    pid_t pid;
    gt_wan_net_t *net;
    gt_wan_emu_t *emu;
    gt_wan_ep_t *ep;
} bw_conn_t;

static void bw_close(bw_conn_t *c)
{
    if (c->ep) {
        gt_wan_req_t bye;
        gt_wan_msg_t m = {.type = GT_WAN_MSG_BYE};
        if (gt_wan_ep_send(c->ep, &m, NULL, 0, &bye) == GT_OK &&
            gt_wan_req_wait(&bye, 5000) != GT_OK)
            fprintf(stderr, "bench wan: the server did not take the last message\n");
    }
    gt_wan_ep_close(c->ep);
    gt_wan_net_destroy(c->net);
    gt_wan_emu_destroy(c->emu);
    c->ep = NULL;
    c->net = NULL;
    c->emu = NULL;
    if (c->pid > 0) {
        double end = now_s() + 10;
        int status = 0;
        while (waitpid(c->pid, &status, WNOHANG) == 0) {
            if (now_s() > end) {
                kill(c->pid, SIGKILL);
                waitpid(c->pid, &status, 0);
                break;
            }
            usleep(10000);
        }
    }
    c->pid = -1;
    gt_wan_keypair_wipe(&c->cfg.keys[0]);
    gt_wan_keypair_wipe(&c->cfg.keys[1]);
}

static int bw_open(bw_conn_t *c, const bw_opts_t *o, gt_wan_transport_t tp, int enc, int relay_off)
{
    memset(c, 0, sizeof *c);
    c->pid = -1;
    c->cfg.relay_off = relay_off;
    c->cfg.link_mbps = o->link_mbps;
    c->cfg.transport = tp;
    c->cfg.security = enc ? GT_WAN_SECURITY_ENCRYPTED : GT_WAN_SECURITY_NONE;
    c->cfg.frame_bytes = o->frame_bytes;
    c->cfg.window = o->window;
    c->cfg.max_size = o->max_size;
    if (gt_wan_keypair_generate(&c->cfg.keys[0]) != GT_OK ||
        gt_wan_keypair_generate(&c->cfg.keys[1]) != GT_OK)
        return -1;
    uint16_t port = 0;
    c->pid = bw_spawn(&c->cfg, &port);
    if (c->pid < 0 || bw_net(&c->cfg, 1, &c->net, &c->emu) != GT_OK ||
        gt_wan_net_connect(c->net, "127.0.0.1", port, 0, &c->ep) != GT_OK ||
        gt_wan_ep_wait_ready(c->ep, 10000) != GT_OK) {
        fprintf(stderr, "bench wan: could not connect to a %s server\n", gt_wan_transport_name(tp));
        bw_close(c);
        return -1;
    }
    return 0;
}

/* MB/s of one streamed point, or -1; the cores both ends kept busy meanwhile (CPU seconds
 * of client and server over wall seconds) in *cores_p. */
static double bw_point(bw_conn_t *c, const bw_opts_t *o, const uint8_t *buf, size_t size,
                       double *cores_p)
{
    size_t count = o->bytes_per_point / size;
    if (count < 4) count = 4; /* as many messages as ucx_perftest gets (-n) */
    double cpu = 0;
    double dt = bw_stream(c->ep, buf, size, count, &cpu);
    if (dt > 0) *cores_p = cpu / dt;
    return dt > 0 ? (double)size * (double)count / dt / 1e6 : -1;
}

/* ---- reference tools --------------------------------------------------------------- */

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

/* Runs `server` in the background and `client` in the foreground (both through sh), returns
 * the client's output (malloc'd) or NULL. The server is killed if still running. */
static char *run_pair(const char *server, const char *client)
{
    pid_t pid = fork();
    if (pid < 0) return NULL;
    if (pid == 0) {
        setpgid(0, 0);
        execl("/bin/sh", "sh", "-c", server, (char *)NULL);
        _exit(127);
    }
    usleep(500000);
    FILE *p = popen(client, "r");
    char *out = NULL;
    if (p) {
        size_t cap = 1 << 16, len = 0;
        out = malloc(cap);
        size_t n;
        while (out && (n = fread(out + len, 1, cap - 1 - len, p)) > 0) len += n;
        if (out) out[len] = '\0';
        if (pclose(p) != 0) {
            free(out);
            out = NULL;
        }
    }
    double end = now_s() + 5;
    int status;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (now_s() > end) {
            kill(-pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
        usleep(10000);
    }
    return out;
}

/* ucx_perftest tag_bw over tcp: MB/s (10^6), or -1. Its own column is MiB/s. */
static double tool_ucx_perftest(size_t size, size_t iters)
{
    int port = free_port();
    if (port < 0) return -1;
    char srv[256], cli[256];
    snprintf(srv, sizeof srv, "UCX_TLS=tcp exec ucx_perftest -p %d >/dev/null 2>&1", port);
    snprintf(cli, sizeof cli,
             "UCX_TLS=tcp timeout 60 ucx_perftest 127.0.0.1 -p %d -t tag_bw -s %zu -n %zu 2>&1",
             port, size, iters);
    char *out = run_pair(srv, cli);
    double mbps = -1;
    const char *f = out ? strstr(out, "Final:") : NULL;
    double v[8];
    if (f &&
        sscanf(f, "Final: %lf %lf %lf %lf %lf %lf", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) == 6)
        mbps = v[5] * 1048576.0 / 1e6;
    free(out);
    return mbps;
}

/* fi_pingpong, tcp provider, msg endpoints: its MB/sec (10^6, both directions counted). */
static double tool_fi_pingpong(size_t size, size_t iters)
{
    int port = free_port();
    if (port < 0) return -1;
    char srv[256], cli[256];
    snprintf(srv, sizeof srv, "exec fi_pingpong -p tcp -e msg -S %zu -I %zu -B %d >/dev/null 2>&1",
             size, iters, port);
    snprintf(cli, sizeof cli,
             "timeout 60 fi_pingpong -p tcp -e msg -S %zu -I %zu -P %d 127.0.0.1 2>&1", size, iters,
             port);
    char *out = run_pair(srv, cli);
    double mbps = -1;
    const char *line = out ? strstr(out, "Mxfers/sec") : NULL;
    if (line) {
        line = strchr(line, '\n');
        char b[32], s[32], a[32], t[32], tm[32];
        double v;
        if (line && sscanf(line + 1, "%31s %31s %31s %31s %31s %lf", b, s, a, t, tm, &v) == 6)
            mbps = v;
    }
    free(out);
    return mbps;
}

/* iperf3, one TCP stream for 2 s with `size`-byte writes: MB/s. */
static double tool_iperf3(size_t size)
{
    int port = free_port();
    if (port < 0) return -1;
    char srv[256], cli[256];
    snprintf(srv, sizeof srv, "exec iperf3 -s -1 -B 127.0.0.1 -p %d >/dev/null 2>&1", port);
    snprintf(cli, sizeof cli, "timeout 30 iperf3 -c 127.0.0.1 -p %d -t 2 -l %zu -f m 2>&1", port,
             size);
    char *out = run_pair(srv, cli);
    double mbps = -1;
    const char *r = out ? strstr(out, "receiver") : NULL;
    if (r) { /* "... 12.3 GBytes  10567 Mbits/sec  receiver" */
        const char *e = r;
        while (e > out && *(e - 1) != '\n') e--;
        const char *m = strstr(e, "Mbits/sec");
        if (m && m < r) {
            const char *n = m;
            while (n > e && *(n - 1) == ' ') n--;
            while (n > e && *(n - 1) != ' ') n--;
            mbps = atof(n) / 8.0;
        }
    }
    free(out);
    return mbps;
}

/* The 1-minute load average: on a shared machine it says how far to trust a row. */
static double load1(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = -1;
        fclose(f);
    }
    return l;
}

/* One JSON line. cores >= 0: the CPU cores both processes kept busy (CPU seconds over wall
 * seconds, median of the repetitions). */
static void row(const bw_opts_t *o, const char *tp, int enc, size_t size, double mbps,
                const char *ref, double ref_mbps, double cores)
{
    if (mbps < 0) return;
    printf("{\"transport\": \"%s\", \"encrypted\": %s, \"size\": %zu, \"mbps\": %.1f", tp,
           enc ? "true" : "false", size, mbps);
    double l = load1();
    if (l >= 0) printf(", \"load1\": %.2f", l);
    if (o->link_mbps > 0) printf(", \"link_mbps\": %g", o->link_mbps);
    if (cores >= 0) printf(", \"cores\": %.2f", cores);
    if (ref && ref_mbps > 0)
        printf(", \"ref\": \"%s\", \"ref_mbps\": %.1f, \"ratio\": %.3f", ref, ref_mbps,
               mbps / ref_mbps);
    printf("}\n");
    fflush(stdout);
    if (!o->json)
        fprintf(stderr, "  %-14s %-5s %10zu %9.1f MB/s%s%s\n", tp, enc ? "enc" : "plain", size,
                mbps, ref && ref_mbps > 0 ? "   vs " : "", ref && ref_mbps > 0 ? ref : "");
}

int gt_bench_wan(int argc, char **argv)
{
    static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                         {"transport", required_argument, NULL, 't'},
                                         {"min", required_argument, NULL, 'm'},
                                         {"max", required_argument, NULL, 'M'},
                                         {"bytes", required_argument, NULL, 'b'},
                                         {"reps", required_argument, NULL, 'r'},
                                         {"frame-bytes", required_argument, NULL, 'f'},
                                         {"window", required_argument, NULL, 'w'},
                                         {"no-tools", no_argument, NULL, 'n'},
                                         {"mode", required_argument, NULL, 'o'},
                                         {"link-mbps", required_argument, NULL, 'L'},
                                         {"serve", no_argument, NULL, 'S'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    bw_opts_t o = {.transports = 3,
                   .min_size = 64u << 10,
                   .max_size = 256u << 20,
                   .frame_bytes = 1u << 20,
                   .window = 8,
                   .bytes_per_point = 256u << 20,
                   .reps = 3,
                   .tools = 1,
                   .modes = 3};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'j': o.json = 1; break;
        case 't':
            if (strcmp(optarg, "all") == 0)
                o.transports = 3;
            else if (strcmp(optarg, "ucx") == 0)
                o.transports = 1;
            else if (strcmp(optarg, "libfabric") == 0)
                o.transports = 2;
            else {
                fprintf(stderr, "geotrain bench wan: unknown transport '%s'\n", optarg);
                return 2;
            }
            break;
        case 'm':
        case 'M':
        case 'b':
        case 'f': {
            size_t v = 0;
            if (gt_cli_parse_size(optarg, &v) || v == 0) {
                fprintf(stderr, "geotrain bench wan: bad size '%s'\n", optarg);
                return 2;
            }
            if (c == 'm') o.min_size = v;
            if (c == 'M') o.max_size = v;
            if (c == 'b') o.bytes_per_point = v;
            if (c == 'f') o.frame_bytes = v;
            break;
        }
        case 'r': o.reps = atoi(optarg); break;
        case 'w': o.window = (size_t)atoi(optarg); break;
        case 'n': o.tools = 0; break;
        case 'o':
            if (strcmp(optarg, "all") == 0)
                o.modes = 3;
            else if (strcmp(optarg, "plain") == 0)
                o.modes = 1;
            else if (strcmp(optarg, "encrypted") == 0)
                o.modes = 2;
            else {
                fprintf(stderr, "geotrain bench wan: unknown mode '%s'\n", optarg);
                return 2;
            }
            break;
        case 'L': {
            char *end = NULL;
            o.link_mbps = strtod(optarg, &end);
            if (!end || *end || !(o.link_mbps >= 0) || o.link_mbps > 1e7) {
                fprintf(stderr, "geotrain bench wan: bad --link-mbps '%s'\n", optarg);
                return 2;
            }
            break;
        }
        case 'S': return bw_serve();
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc || o.min_size > o.max_size || o.reps < 1 || o.reps > 64 || !o.window) {
        usage(stderr);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    size_t sizes[32], n = 0;
    for (size_t s = o.min_size; s <= o.max_size && n < 32; s *= 4) sizes[n++] = s;
    uint8_t *buf = malloc(o.max_size);
    if (!buf) return 1;
    for (size_t i = 0; i < o.max_size; i++) buf[i] = (uint8_t)(i * 131u + 7u);

    /* Columns, measured interleaved per size and repetition so that the load of a shared
     * machine hits every column alike; medians are reported. */
    enum {
        C_AES,
        C_AES_OPEN,
        C_UCX_TOOL,
        C_UCX,
        C_UCX_ENC,
        C_OFI_TOOL,
        C_OFI,
        C_OFI_ENC,
        C_UCX_ENC_RAW, /* encrypted UCX without the sealed relay: what the relay costs */
        C_N
    };
    bw_conn_t conn[C_N];
    memset(conn, 0, sizeof conn);
    for (int col = 0; col < C_N; col++) conn[col].pid = -1;
    int have[C_N] = {0};
    have[C_AES] = 1;
    have[C_AES_OPEN] = (o.modes & 2) != 0;
    gt_log_level_t lvl = gt_log_get_level();
    gt_log_set_level(GT_LOG_ERROR); /* the `security: none` warning, once per plain server */
    for (int t = 0; t < 2; t++) {
        if (!(o.transports & (1 << t))) continue;
        gt_wan_transport_t tp = t == 0 ? GT_WAN_TRANSPORT_UCX : GT_WAN_TRANSPORT_LIBFABRIC;
        int base = t == 0 ? C_UCX_TOOL : C_OFI_TOOL;
        have[base] = o.tools;
        if (o.modes & 1) have[base + 1] = bw_open(&conn[base + 1], &o, tp, 0, 0) == 0;
        if (o.modes & 2) have[base + 2] = bw_open(&conn[base + 2], &o, tp, 1, 0) == 0;
        if (t == 0 && (o.modes & 2))
            have[C_UCX_ENC_RAW] = bw_open(&conn[C_UCX_ENC_RAW], &o, tp, 1, 1) == 0;
    }
    gt_log_set_level(lvl);
    if (!o.json)
        fprintf(stderr,
                "geotrain bench wan: %d rep(s) per point, %zu MB per point, frame %zu, "
                "window %zu\n",
                o.reps, o.bytes_per_point >> 20, o.frame_bytes, o.window);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        double v[C_N][64], cores[C_N][64];
        int nv[C_N] = {0};
        size_t iters = o.bytes_per_point / sizes[i];
        if (iters < 4) iters = 4;
        size_t chunk = sizes[i] < o.frame_bytes ? sizes[i] : o.frame_bytes;
        for (int k = 0; k < o.reps; k++)
            for (int col = 0; col < C_N; col++) {
                if (!have[col]) continue;
                double x = -1;
                if (col == C_AES) {
                    if (gt_wan_secure_bench_seal_rate(GT_WAN_CIPHER_AES256GCM, chunk, 0.25, &x) !=
                        GT_OK)
                        x = -1;
                } else if (col == C_AES_OPEN) {
                    if (gt_wan_secure_bench_open_rate(GT_WAN_CIPHER_AES256GCM, chunk, 0.25, &x) !=
                        GT_OK)
                        x = -1;
                } else if (col == C_UCX_TOOL) {
                    x = tool_ucx_perftest(sizes[i], iters);
                } else if (col == C_OFI_TOOL) {
                    x = tool_fi_pingpong(sizes[i], iters / 2 ? iters / 2 : 2);
                } else {
                    x = bw_point(&conn[col], &o, buf, sizes[i], &cores[col][nv[col]]);
                    if (x < 0) {
                        fprintf(stderr, "bench wan: a transfer failed\n");
                        have[col] = 0;
                        rc = 1;
                    }
                }
                if (x > 0) v[col][nv[col]++] = x;
            }
        double med[C_N], mc[C_N];
        for (int col = 0; col < C_N; col++) {
            int ours = col == C_UCX || col == C_UCX_ENC || col == C_OFI || col == C_OFI_ENC ||
                       col == C_UCX_ENC_RAW;
            mc[col] = ours && nv[col] ? gt_cli_median(cores[col], nv[col]) : -1;
            med[col] = nv[col] ? gt_cli_median(v[col], nv[col]) : -1;
        }
        row(&o, "aes256gcm", 1, sizes[i], med[C_AES], NULL, 0, -1);
        row(&o, "aes256gcm_open", 1, sizes[i], med[C_AES_OPEN], NULL, 0, -1);
        row(&o, "ucx_perftest", 0, sizes[i], med[C_UCX_TOOL], NULL, 0, -1);
        row(&o, "fi_pingpong", 0, sizes[i], med[C_OFI_TOOL], NULL, 0, -1);
        row(&o, "ucx", 0, sizes[i], med[C_UCX], "ucx_perftest", med[C_UCX_TOOL], mc[C_UCX]);
        row(&o, "ucx", 1, sizes[i], med[C_UCX_ENC], "aes256gcm", med[C_AES], mc[C_UCX_ENC]);
        row(&o, "ucx_norelay", 1, sizes[i], med[C_UCX_ENC_RAW], "ucx", med[C_UCX_ENC],
            mc[C_UCX_ENC_RAW]);
        row(&o, "libfabric", 0, sizes[i], med[C_OFI], "fi_pingpong", med[C_OFI_TOOL], mc[C_OFI]);
        row(&o, "libfabric", 1, sizes[i], med[C_OFI_ENC], "aes256gcm", med[C_AES], mc[C_OFI_ENC]);
    }
    if (o.tools) row(&o, "iperf3", 0, 131072, tool_iperf3(131072), NULL, 0, -1);
    for (int col = 0; col < C_N; col++)
        if (col == C_UCX || col == C_UCX_ENC || col == C_OFI || col == C_OFI_ENC ||
            col == C_UCX_ENC_RAW)
            if (conn[col].net || conn[col].pid > 0) bw_close(&conn[col]);
    free(buf);
    return rc;
}
