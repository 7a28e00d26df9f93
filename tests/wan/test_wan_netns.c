/* test_wan_netns.c — the channel over a real bandwidth-limited network: two network
 * namespaces joined by a veth pair, `tc qdisc ... tbf rate 100mbit` on both ends (this
 * kernel has no netem), the server in one namespace and this process in the other.
 *   test_wan_netns ucx|libfabric
 * Asserts the transfer arrives and the goodput is that of a 100 Mbit/s link (TCP over a
 * 1500-byte MTU carries at most 1448/1514 of the line rate: 95.6 Mbit/s), within 10%.
 * Skips (77) where network namespaces cannot be made (not root, no CAP_NET_ADMIN, no tc).
 * The namespaces are always removed, also when a check fails. */
#include "gt_test.h"
#include "wan_harness.h"

#include <signal.h>
#include <unistd.h>

static char ns_a[32], ns_b[32];

static void cleanup(void)
{
    char cmd[160];
    snprintf(cmd, sizeof cmd, "ip netns del %s 2>/dev/null; ip netns del %s 2>/dev/null", ns_a,
             ns_b);
    if (system(cmd) != 0) { /* nothing more to do: they may not exist */
    }
}

static void on_signal(int sig)
{
    cleanup();
    signal(sig, SIG_DFL);
    raise(sig);
}

#define MSG   ((size_t)1 << 20)
#define COUNT 24

static gt_status_t recv_one(gt_wan_ep_t *ep, void *buf, size_t cap, gt_wan_req_t *r,
                            unsigned timeout_ms)
{
    gt_status_t st = gt_wan_ep_recv(ep, buf, cap, r);
    return st != GT_OK ? st : gt_wan_req_wait(r, timeout_ms);
}

static int srv_sink(const wt_cfg_t *cfg, gt_wan_net_t *net, const char *arg)
{
    (void)cfg;
    (void)arg;
    gt_wan_ep_t *ep = wt_accept(net, 10000);
    if (!ep) return 10;
    uint8_t *buf = malloc(MSG);
    int ok = 0;
    for (int i = 0; i < COUNT; i++) {
        gt_wan_req_t r;
        if (recv_one(ep, buf, MSG, &r, 20000) != GT_OK) return 11;
        ok += r.length == MSG && wt_check(buf, MSG, (uint64_t)i);
    }
    gt_wan_req_t s;
    gt_wan_msg_t m = {.type = GT_WAN_MSG_RESULT};
    if (gt_wan_ep_send(ep, &m, &ok, sizeof ok, &s) != GT_OK || gt_wan_req_wait(&s, 10000) != GT_OK)
        return 12;
    gt_wan_req_t bye;
    gt_status_t st = recv_one(ep, buf, MSG, &bye, 10000);
    free(buf);
    gt_wan_ep_close(ep);
    return st == GT_OK && bye.msg.type == GT_WAN_MSG_BYE ? 0 : 13;
}

static const wt_server_t servers[] = {{"srv_sink", srv_sink}, {NULL, NULL}};

static int run_client(int argc, char **argv)
{
    /* argv: --client TRANSPORT NS_A IP_A VETH_A VETH_B (we are in the other namespace) */
    gt_wan_transport_t tp;
    if (argc < 7 || gt_wan_transport_parse(argv[2], &tp) != GT_OK) return 2;
    const char *ns_srv = argv[3], *ip_a = argv[4], *va = argv[5], *vb = argv[6];
    wt_cfg_t cfg;
    wt_cfg_init(&cfg, tp, GT_WAN_SECURITY_ENCRYPTED);
    snprintf(cfg.listen_host, sizeof cfg.listen_host, "%s", ip_a);
    snprintf(cfg.server_netns, sizeof cfg.server_netns, "%s", ns_srv);
    snprintf(cfg.server_ucx_dev, sizeof cfg.server_ucx_dev, "%s", va);
    uint16_t port = 0;
    pid_t pid = wt_spawn_server(&cfg, "srv_sink", "", &port);
    CHECK(pid > 0);
    setenv("UCX_NET_DEVICES", vb, 1);
    gt_wan_net_t *net = NULL;
    CHECK_EQ_INT(wt_net(&cfg, SITE_CLIENT, &net), GT_OK);
    gt_wan_ep_t *ep = pid > 0 && net ? wt_connect_host(net, ip_a, port, 10000) : NULL;
    CHECK(ep != NULL);
    if (ep) {
        uint8_t *buf = malloc(MSG * COUNT);
        gt_wan_req_t r[COUNT], rr;
        for (int i = 0; i < COUNT; i++) wt_fill(buf + (size_t)i * MSG, MSG, (uint64_t)i);
        double t0 = wt_now_s();
        for (int i = 0; i < COUNT; i++) {
            gt_wan_msg_t m = {.type = GT_WAN_MSG_DELTA, .round = (uint64_t)i};
            CHECK_EQ_INT(gt_wan_ep_send(ep, &m, buf + (size_t)i * MSG, MSG, &r[i]), GT_OK);
        }
        int ok = 0;
        CHECK_EQ_INT(recv_one(ep, &ok, sizeof ok, &rr, 30000), GT_OK);
        double dt = wt_now_s() - t0;
        CHECK_EQ_INT(ok, COUNT);
        double mbit = (double)MSG * COUNT * 8 / dt / 1e6;
        fprintf(stderr, "%s over veth + tbf 100mbit: %.2f Mbit/s goodput in %.2f s\n", argv[2],
                mbit, dt);
        CHECK_CLOSE(mbit, 100.0 * 1448 / 1514, 0.0, 0.10);
        gt_wan_msg_t m = {.type = GT_WAN_MSG_BYE};
        gt_wan_req_t bye;
        CHECK_EQ_INT(gt_wan_ep_send(ep, &m, NULL, 0, &bye), GT_OK);
        /* The server closes as soon as the BYE is in, so the send may learn of that close
         * before its own completion (seen with libfabric): GT_ERR_PEER_LOST is as good as
         * GT_OK here; the server's exit code (13 without the BYE) says whether it got it. */
        gt_status_t st = gt_wan_req_wait(&bye, 5000);
        CHECK_MSG(st == GT_OK || st == GT_ERR_PEER_LOST, "BYE: %s", gt_status_str(st));
        free(buf);
        gt_wan_ep_close(ep);
    }
    if (pid > 0) CHECK_EQ_INT(wt_wait(pid, 15000), 0);
    gt_wan_net_destroy(net);
    return GT_TEST_DONE();
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    wt_serve_main(argc, argv, servers);
    if (argc > 1 && strcmp(argv[1], "--client") == 0) return run_client(argc, argv);
    gt_wan_transport_t tp;
    if (argc < 2 || gt_wan_transport_parse(argv[1], &tp) != GT_OK) return 2;
    if (geteuid() != 0) gt_test_skip("network namespaces need root");
    int id = (int)getpid();
    snprintf(ns_a, sizeof ns_a, "gtA%d", id);
    snprintf(ns_b, sizeof ns_b, "gtB%d", id);
    char va[16], vb[16], ip_a[32], ip_b[32];
    snprintf(va, sizeof va, "gva%d", id % 100000);
    snprintf(vb, sizeof vb, "gvb%d", id % 100000);
    snprintf(ip_a, sizeof ip_a, "10.231.%d.1", id % 250);
    snprintf(ip_b, sizeof ip_b, "10.231.%d.2", id % 250);
    char probe[96];
    snprintf(probe, sizeof probe, "ip netns add %s 2>/dev/null", ns_a);
    if (system(probe) != 0) gt_test_skip("ip netns add is not permitted here");
    atexit(cleanup);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    char cmd[8192];
    int fails = 0;
    snprintf(cmd, sizeof cmd, "ip netns add %s && ip link add %s type veth peer name %s", ns_b, va,
             vb);
    fails += system(cmd) != 0;
    snprintf(cmd, sizeof cmd, "ip link set %s netns %s", va, ns_a);
    fails += system(cmd) != 0;
    snprintf(cmd, sizeof cmd, "ip link set %s netns %s", vb, ns_b);
    fails += system(cmd) != 0;
    snprintf(cmd, sizeof cmd,
             "ip -n %s addr add %s/24 dev %s && ip -n %s link set %s up && ip -n %s link set lo up",
             ns_a, ip_a, va, ns_a, va, ns_a);
    fails += system(cmd) != 0;
    snprintf(cmd, sizeof cmd,
             "ip -n %s addr add %s/24 dev %s && ip -n %s link set %s up && ip -n %s link set lo up",
             ns_b, ip_b, vb, ns_b, vb, ns_b);
    fails += system(cmd) != 0;
    snprintf(cmd, sizeof cmd,
             "tc -n %s qdisc add dev %s root tbf rate 100mbit burst 64kb latency 50ms", ns_a, va);
    fails += system(cmd) != 0;
    snprintf(cmd, sizeof cmd,
             "tc -n %s qdisc add dev %s root tbf rate 100mbit burst 64kb latency 50ms", ns_b, vb);
    fails += system(cmd) != 0;
    if (fails) gt_test_skip("could not set up veth + tc tbf in the namespaces");

    /* The client runs in the other namespace, through `ip netns exec` as the server does. */
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0);
    self[n > 0 ? n : 0] = '\0';
    snprintf(cmd, sizeof cmd, "ip netns exec %s %s --client %s %s %s %s %s", ns_b, self, argv[1],
             ns_a, ip_a, va, vb);
    CHECK_EQ_INT(system(cmd), 0);
    return GT_TEST_DONE();
}
