/* test_membership.c — membership through a real etcd: registration, views agreed by
 * compare-and-swap, a site killed with SIGKILL leaving the view within two lease TTLs, a
 * graceful leave, duplicate names refused, an unreachable or frozen etcd giving errors within
 * the request timeout instead of hanging, and a 3-member cluster losing one member (nothing
 * changes) and then its quorum (membership frozen, the lease kept, back when quorum is). */
#include "gt_test.h"
#include "gt_wan.h"
#include "etcd_local.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TTL_S 2

static const char *g_endpoint[1];

static gt_wan_member_params_t params(const char *site, const char *addr)
{
    gt_wan_member_params_t p = GT_WAN_MEMBER_PARAMS_INIT;
    p.endpoints = g_endpoint;
    p.n_endpoints = 1;
    p.run_id = "test-run";
    p.site = site;
    p.address = addr;
    p.lease_ttl_s = TTL_S;
    p.heartbeat_ms = 400;
    p.request_timeout_ms = 1000;
    return p;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int has(const gt_wan_view_t *v, const char *name)
{
    for (uint32_t i = 0; i < v->n_members; i++)
        if (strcmp(v->members[i].name, name) == 0) return 1;
    return 0;
}

typedef struct {
    gt_wan_member_t *m;
    gt_wan_view_t view;
    gt_status_t st;
} sync_arg_t;

static void *sync_thread(void *arg)
{
    sync_arg_t *s = arg;
    s->st = gt_wan_member_sync_view(s->m, &s->view, NULL);
    return NULL;
}

/* A 3-member cluster: one member down changes nothing; two down (no quorum) freeze the member
 * — health stays GT_OK, calls fail at once — and when they are back, a new leader extends the
 * lease: the member is unfrozen with its lease, and calls work again. */
static void test_quorum_loss(void)
{
    char *dir = gt_test_tmpdir();
    gt_etcd_cluster_t cl;
    if (!dir || gt_etcd_cluster_start(dir, 3, 30000, &cl) != GT_OK) {
        CHECK_MSG(0, "cannot start a 3-member etcd cluster");
        free(dir);
        return;
    }
    const char *eps[3] = {cl.members[0].url, cl.members[1].url, cl.members[2].url};
    gt_wan_member_params_t p = params("q", "127.0.0.1:7100");
    p.endpoints = eps;
    p.n_endpoints = 3;
    gt_wan_member_t *m = NULL;
    gt_wan_view_t live;
    CHECK_EQ_INT(gt_wan_member_create(&p, &m), GT_OK);
    if (!m) goto out;
    gt_etcd_cluster_kill(&cl, 0); /* the member it talks to */
    sleep_ms(3 * TTL_S * 1000 / 2);
    CHECK_EQ_INT(gt_wan_member_list(m, &live), GT_OK);
    CHECK_EQ_INT(gt_wan_member_frozen(m), 0);
    CHECK_EQ_INT(gt_wan_member_health(m), GT_OK);

    gt_etcd_cluster_kill(&cl, 1); /* quorum lost */
    uint64_t t0 = gt_time_ns();
    while (!gt_wan_member_frozen(m) && (gt_time_ns() - t0) / 1e9 < 4.0 * TTL_S) sleep_ms(100);
    CHECK_EQ_INT(gt_wan_member_frozen(m), 1);
    sleep_ms(2 * TTL_S * 1000); /* well past the TTL */
    CHECK_EQ_INT(gt_wan_member_health(m), GT_OK);
    uint64_t t1 = gt_time_ns();
    CHECK_EQ_INT(gt_wan_member_list(m, &live), GT_ERR_TIMEOUT);
    CHECK((gt_time_ns() - t1) / 1e9 < 0.1);

    CHECK_EQ_INT(gt_etcd_cluster_restart(&cl, 0), GT_OK);
    CHECK_EQ_INT(gt_etcd_cluster_restart(&cl, 1), GT_OK);
    uint64_t t2 = gt_time_ns();
    while (gt_wan_member_frozen(m) && (gt_time_ns() - t2) / 1e9 < 20.0) sleep_ms(100);
    fprintf(stderr, "quorum back: member unfrozen after %.2f s\n", (gt_time_ns() - t2) / 1e9);
    CHECK_EQ_INT(gt_wan_member_frozen(m), 0);
    CHECK_EQ_INT(gt_wan_member_health(m), GT_OK);
    CHECK_EQ_INT(gt_wan_member_list(m, &live), GT_OK);
    CHECK_EQ_INT(live.n_members, 1);
    CHECK(has(&live, "q"));
out:
    gt_wan_member_destroy(m);
    gt_etcd_cluster_stop(&cl);
    gt_test_rmtree(dir);
    free(dir);
}

/* A TCP listener on a free loopback port, its "127.0.0.1:PORT" in addr. */
static int listener(char *addr, size_t n)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sa;
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 4) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    snprintf(addr, n, "127.0.0.1:%u", (unsigned)ntohs(sa.sin_port));
    return fd;
}

/* replace_gone: a site started again while its previous process's lease still holds its name
 * takes the name at once when that process is provably gone — nobody listens at the address
 * it published, or it published the address the new one listens on — and never while
 * something listens there (a frozen process keeps its listener). */
static void test_take_over(void)
{
    char addr[64], addr2[64];
    int fd = listener(addr, sizeof addr);
    int fd2 = listener(addr2, sizeof addr2);
    CHECK(fd >= 0 && fd2 >= 0);
    gt_wan_member_params_t p1 = params("d", addr);
    gt_wan_member_t *old = NULL, *new = NULL;
    CHECK_EQ_INT(gt_wan_member_create(&p1, &old), GT_OK);
    /* Alive (its listener answers): refused, replace_gone or not. */
    gt_wan_member_params_t p2 = params("d", addr2);
    p2.replace_gone = 1;
    CHECK_EQ_INT(gt_wan_member_create(&p2, &new), GT_ERR_EXISTS);
    CHECK_EQ_INT(gt_wan_member_health(old), GT_OK);
    /* Its listener closed (the process died; here its lease lives on in this process): the
     * new one registers at once, well within the old lease's TTL, and the old lease is gone. */
    close(fd);
    uint64_t t0 = gt_time_ns();
    CHECK_EQ_INT(gt_wan_member_create(&p2, &new), GT_OK);
    double took = (gt_time_ns() - t0) / 1e9;
    fprintf(stderr, "took over a gone process's name in %.3f s (TTL %d s)\n", took, TTL_S);
    CHECK_MSG(took < 0.5 * TTL_S, "took %.2f s", took);
    while (gt_wan_member_health(old) == GT_OK && (gt_time_ns() - t0) / 1e9 < 2.0 * TTL_S)
        sleep_ms(50);
    CHECK_EQ_INT(gt_wan_member_health(old), GT_ERR_PEER_LOST);
    gt_wan_view_t live;
    CHECK_EQ_INT(gt_wan_member_list(new, &live), GT_OK);
    for (uint32_t i = 0; i < live.n_members; i++)
        if (strcmp(live.members[i].name, "d") == 0)
            CHECK(strcmp(live.members[i].address, addr2) == 0);
    /* The same address as its own (it listens there now): taken over though it answers. */
    gt_wan_member_t *again = NULL;
    gt_wan_member_abandon(new); /* a crash: the lease stays until its TTL */
    CHECK_EQ_INT(gt_wan_member_create(&p2, &again), GT_OK);
    gt_wan_member_destroy(again);
    gt_wan_member_destroy(new);
    gt_wan_member_destroy(old);
    close(fd2);
}

static int64_t lease_of(gt_wan_member_t *m, const char *name)
{
    gt_wan_view_t live;
    if (gt_wan_member_list(m, &live) != GT_OK) return 0;
    for (uint32_t i = 0; i < live.n_members; i++)
        if (strcmp(live.members[i].name, name) == 0) return live.members[i].lease;
    return 0;
}

/* Eviction by the majority: accusations name one incarnation of the target, die with their
 * accuser and can be withdrawn; an eviction deletes the target's key only while the accused
 * lease holds it, and the target finds its lease lost. */
static void test_evict(void)
{
    gt_wan_member_params_t pe = params("e", "127.0.0.1:7201"), pf = params("f", "127.0.0.1:7202"),
                           pg = params("g", "127.0.0.1:7203");
    pe.run_id = pf.run_id = pg.run_id = "evict-run";
    gt_wan_member_t *e = NULL, *f = NULL, *g = NULL;
    CHECK_EQ_INT(gt_wan_member_create(&pe, &e), GT_OK);
    CHECK_EQ_INT(gt_wan_member_create(&pf, &f), GT_OK);
    CHECK_EQ_INT(gt_wan_member_create(&pg, &g), GT_OK);
    if (!e || !f || !g) goto out;
    int64_t lg = lease_of(e, "g");
    CHECK(lg != 0);
    gt_wan_view_t acc;
    CHECK_EQ_INT(gt_wan_member_accusers(e, "g", lg, &acc), GT_OK);
    CHECK_EQ_INT(acc.n_members, 0);
    CHECK_EQ_INT(gt_wan_member_accuse(f, "g", lg), GT_OK);
    CHECK_EQ_INT(gt_wan_member_accuse(e, "g", lg), GT_OK);
    CHECK_EQ_INT(gt_wan_member_accuse(e, "g", lg), GT_OK); /* idempotent */
    CHECK_EQ_INT(gt_wan_member_accusers(g, "g", lg, &acc), GT_OK);
    CHECK_EQ_INT(acc.n_members, 2);
    CHECK(strcmp(acc.members[0].name, "e") == 0 && strcmp(acc.members[1].name, "f") == 0);
    /* another incarnation of g is not accused by them */
    CHECK_EQ_INT(gt_wan_member_accusers(e, "g", lg + 1, &acc), GT_OK);
    CHECK_EQ_INT(acc.n_members, 0);
    /* withdrawn: only f's stays */
    CHECK_EQ_INT(gt_wan_member_withdraw(e, "g"), GT_OK);
    CHECK_EQ_INT(gt_wan_member_withdraw(e, "g"), GT_OK); /* none left: fine */
    CHECK_EQ_INT(gt_wan_member_accusers(e, "g", lg, &acc), GT_OK);
    CHECK_EQ_INT(acc.n_members, 1);
    CHECK(strcmp(acc.members[0].name, "f") == 0);
    /* an accusation dies with its accuser's lease */
    CHECK_EQ_INT(gt_wan_member_accuse(g, "e", lease_of(e, "e")), GT_OK);
    CHECK_EQ_INT(gt_wan_member_accusers(e, "e", lease_of(e, "e"), &acc), GT_OK);
    CHECK_EQ_INT(acc.n_members, 1);
    /* names with '/' cannot forge another key */
    CHECK_EQ_INT(gt_wan_member_accuse(e, "g/x", lg), GT_ERR_INVALID);
    CHECK_EQ_INT(gt_wan_member_evict(e, "g/x", lg), GT_ERR_INVALID);
    /* the wrong lease evicts nobody */
    CHECK_EQ_INT(gt_wan_member_evict(e, "g", lg + 1), GT_ERR_NOT_FOUND);
    CHECK(lease_of(e, "g") == lg);
    /* evicted: g's key is gone at once, the view drops it, and g hears its lease is lost */
    uint64_t t0 = gt_time_ns();
    CHECK_EQ_INT(gt_wan_member_evict(e, "g", lg), GT_OK);
    CHECK(lease_of(e, "g") == 0);
    CHECK_EQ_INT(gt_wan_member_evict(f, "g", lg), GT_ERR_NOT_FOUND); /* the second accuser */
    gt_wan_view_t v;
    CHECK_EQ_INT(gt_wan_member_sync_view(f, &v, NULL), GT_OK);
    CHECK(has(&v, "e") && has(&v, "f") && !has(&v, "g"));
    while (gt_wan_member_health(g) == GT_OK && (gt_time_ns() - t0) / 1e9 < 2.0 * TTL_S)
        sleep_ms(50);
    double lost_s = (gt_time_ns() - t0) / 1e9;
    fprintf(stderr, "an evicted site heard its lease was lost after %.2f s\n", lost_s);
    CHECK_EQ_INT(gt_wan_member_health(g), GT_ERR_PEER_LOST);
    CHECK_MSG(lost_s < 1.0, "heard after %.2f s (heartbeat 0.4 s)", lost_s);
    /* g's accusation of e went with g's lease */
    CHECK_EQ_INT(gt_wan_member_accusers(e, "e", lease_of(e, "e"), &acc), GT_OK);
    CHECK_EQ_INT(acc.n_members, 0);
out:
    gt_wan_member_destroy(e);
    gt_wan_member_destroy(f);
    gt_wan_member_destroy(g);
}

int main(void)
{
    gt_etcd_local_t etcd;
    char *dir = gt_test_tmpdir();
    if (gt_etcd_local_start(dir, 20000, &etcd) != GT_OK) {
        fprintf(stderr, "cannot start etcd\n");
        return 1;
    }
    g_endpoint[0] = etcd.url;

    /* Site c lives in its own process, so it can die for real. */
    int ready[2];
    CHECK(pipe(ready) == 0);
    pid_t child = fork();
    if (child == 0) {
        gt_wan_member_params_t p = params("c", "127.0.0.1:7003");
        gt_wan_member_t *m = NULL;
        char ok = gt_wan_member_create(&p, &m) == GT_OK ? 'y' : 'n';
        if (write(ready[1], &ok, 1) != 1) _exit(1);
        for (;;) pause();
    }
    char ok = 'n';
    CHECK(read(ready[0], &ok, 1) == 1 && ok == 'y');

    gt_wan_member_t *a = NULL, *b = NULL, *dup = NULL;
    gt_wan_member_params_t pa = params("a", "127.0.0.1:7001");
    gt_wan_member_params_t pb = params("b", "127.0.0.1:7002");
    CHECK_EQ_INT(gt_wan_member_create(&pa, &a), GT_OK);
    CHECK_EQ_INT(gt_wan_member_create(&pb, &b), GT_OK);
    if (!a || !b) goto out;

    /* A second live "a" is refused. */
    gt_wan_member_params_t pdup = params("a", "127.0.0.1:7999");
    CHECK_EQ_INT(gt_wan_member_create(&pdup, &dup), GT_ERR_EXISTS);
    CHECK(dup == NULL);

    /* Everyone agrees on view 1 = {a, b, c}. */
    gt_wan_view_t live, va, vb;
    CHECK_EQ_INT(gt_wan_member_list(a, &live), GT_OK);
    CHECK_EQ_INT(live.n_members, 3);
    CHECK(strcmp(live.members[0].name, "a") == 0 && strcmp(live.members[2].name, "c") == 0);
    CHECK(strcmp(live.members[2].address, "127.0.0.1:7003") == 0);
    int changed = 0;
    CHECK_EQ_INT(gt_wan_member_sync_view(a, &va, &changed), GT_OK);
    CHECK_EQ_INT(va.epoch, 1);
    CHECK_EQ_INT(changed, 1);
    CHECK_EQ_INT(gt_wan_member_sync_view(b, &vb, &changed), GT_OK);
    CHECK_EQ_INT(vb.epoch, 1);
    CHECK_EQ_INT(changed, 0);
    CHECK_EQ_INT(vb.n_members, 3);
    CHECK(vb.members[1].first_round == 0);

    /* A joiner's first round in its note reaches every site's view read (not the view key),
     * without a view change, and the rest of its note stays readable. */
    CHECK_EQ_INT(gt_wan_member_set_note(b, "{\"resume_steps\":[40],\"first_round\":17}"), GT_OK);
    CHECK_EQ_INT(gt_wan_member_sync_view(a, &va, &changed), GT_OK);
    CHECK_EQ_INT(changed, 0);
    CHECK_EQ_INT(va.epoch, 1);
    CHECK(strcmp(va.members[1].name, "b") == 0 && va.members[1].first_round == 17);
    CHECK(va.members[0].first_round == 0 && va.members[2].first_round == 0);
    char *values = NULL;
    CHECK_EQ_INT(gt_wan_member_values(a, &values), GT_OK);
    CHECK(values && strstr(values, "\"resume_steps\":[40]") != NULL);
    free(values);
    CHECK_EQ_INT(gt_wan_member_set_note(b, "{\"first_round\":-3}"), GT_OK); /* nonsense: none */
    CHECK_EQ_INT(gt_wan_member_sync_view(a, &va, &changed), GT_OK);
    CHECK(va.members[1].first_round == 0);

    /* Compare-and-swap: two proposals against the same revision, one wins. */
    CHECK_EQ_INT(gt_wan_member_view(a, &va), GT_OK);
    CHECK_EQ_INT(gt_wan_member_view(b, &vb), GT_OK);
    int64_t rev = gt_wan_member_view_revision(a);
    CHECK(rev > 0 && rev == gt_wan_member_view_revision(b));
    gt_wan_view_t next = va;
    next.epoch = va.epoch + 1;
    CHECK_EQ_INT(gt_wan_member_propose(a, &next, rev), GT_OK);
    CHECK_EQ_INT(gt_wan_member_propose(b, &next, rev), GT_ERR_AGAIN);

    /* kill -9 c: its key expires with its lease; the survivors move to a view without it. */
    uint64_t t0 = gt_time_ns();
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    child = 0;
    double gone_s = -1;
    while ((gt_time_ns() - t0) / 1e9 < 4.0 * TTL_S) {
        if (gt_wan_member_list(a, &live) == GT_OK && !has(&live, "c")) {
            gone_s = (gt_time_ns() - t0) / 1e9;
            break;
        }
        sleep_ms(100);
    }
    fprintf(stderr, "killed site left the member list after %.2f s (TTL %d s)\n", gone_s, TTL_S);
    CHECK_MSG(gone_s > 0 && gone_s <= 2.0 * TTL_S, "gone after %.2f s", gone_s);
    CHECK(has(&live, "a") && has(&live, "b"));

    /* Both survivors notice at once; they end on the same epoch with {a, b}. */
    sync_arg_t sa = {a, {0}, GT_ERR_INTERNAL}, sb = {b, {0}, GT_ERR_INTERNAL};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, sync_thread, &sa);
    pthread_create(&tb, NULL, sync_thread, &sb);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK_EQ_INT(sa.st, GT_OK);
    CHECK_EQ_INT(sb.st, GT_OK);
    CHECK_EQ_INT(sa.view.epoch, 3);
    CHECK_EQ_INT(sb.view.epoch, 3);
    CHECK_EQ_INT(sa.view.n_members, 2);
    CHECK(!has(&sa.view, "c") && !has(&sb.view, "c"));
    CHECK_EQ_INT(gt_wan_member_health(a), GT_OK);

    /* c comes back (a new process would, with a new address): the view grows to include it,
     * and it finds the run marked as started, so it joins rather than starts. */
    int started = -1;
    CHECK_EQ_INT(gt_wan_member_started(a, &started), GT_OK);
    CHECK_EQ_INT(started, 0);
    CHECK_EQ_INT(gt_wan_member_mark_started(a), GT_OK);
    CHECK_EQ_INT(gt_wan_member_mark_started(b), GT_OK); /* idempotent */
    gt_wan_member_params_t pc = params("c", "127.0.0.1:7013");
    gt_wan_member_t *c2 = NULL;
    CHECK_EQ_INT(gt_wan_member_create(&pc, &c2), GT_OK);
    if (c2) {
        CHECK_EQ_INT(gt_wan_member_started(c2, &started), GT_OK);
        CHECK_EQ_INT(started, 1);
        gt_wan_view_t vc;
        CHECK_EQ_INT(gt_wan_member_sync_view(c2, &vc, &changed), GT_OK);
        CHECK_EQ_INT(vc.epoch, 4);
        CHECK_EQ_INT(vc.n_members, 3);
        CHECK(has(&vc, "c") && strcmp(vc.members[2].address, "127.0.0.1:7013") == 0);
        CHECK_EQ_INT(gt_wan_member_sync_view(a, &va, &changed), GT_OK);
        CHECK_EQ_INT(va.epoch, 4);
        CHECK_EQ_INT(changed, 0);
        gt_wan_member_destroy(c2);
    }

    /* A graceful leave is seen at once, not after the TTL. */
    gt_wan_member_destroy(b);
    b = NULL;
    CHECK_EQ_INT(gt_wan_member_list(a, &live), GT_OK);
    CHECK_EQ_INT(live.n_members, 1);

    test_take_over();
    test_evict();

    /* A frozen etcd (what a lost quorum looks like): calls time out, never hang; after a TTL
     * without an answer the member is "frozen", not lost — etcd can neither renew nor expire
     * the lease, so the last view holds — and calls fail at once instead of blocking the
     * caller for a timeout each. When etcd answers again the lease is still there. */
    CHECK_EQ_INT(gt_wan_member_frozen(a), 0);
    gt_etcd_local_pause(&etcd, 1);
    uint64_t t1 = gt_time_ns();
    CHECK_EQ_INT(gt_wan_member_list(a, &live), GT_ERR_TIMEOUT);
    double waited = (gt_time_ns() - t1) / 1e9;
    CHECK_MSG(waited < 3.0, "a call against a frozen etcd took %.2f s", waited);
    while (!gt_wan_member_frozen(a) && (gt_time_ns() - t1) / 1e9 < 3.0 * TTL_S) sleep_ms(100);
    CHECK_EQ_INT(gt_wan_member_frozen(a), 1);
    CHECK_EQ_INT(gt_wan_member_health(a), GT_OK);
    uint64_t t3 = gt_time_ns();
    CHECK_EQ_INT(gt_wan_member_list(a, &live), GT_ERR_TIMEOUT);
    CHECK_MSG((gt_time_ns() - t3) / 1e9 < 0.1, "a call while frozen blocked for %.2f s",
              (gt_time_ns() - t3) / 1e9);
    /* Thawed, this one node is still the leader and its clock ran on, so it answers that the
     * lease expired: the member is out (a real answer), no longer frozen. */
    gt_etcd_local_pause(&etcd, 0);
    uint64_t t4 = gt_time_ns();
    while (gt_wan_member_frozen(a) && (gt_time_ns() - t4) / 1e9 < 3.0 * TTL_S) sleep_ms(100);
    CHECK_EQ_INT(gt_wan_member_frozen(a), 0);
    CHECK_EQ_INT(gt_wan_member_health(a), GT_ERR_PEER_LOST);

out:
    gt_wan_member_destroy(a);
    gt_wan_member_destroy(b);
    if (child > 0) {
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
    }
    gt_etcd_local_stop(&etcd);
    gt_test_rmtree(dir);
    free(dir);

    test_quorum_loss();

    /* No etcd at all: an error, quickly. */
    static const char *nowhere[] = {"http://127.0.0.1:1"};
    gt_wan_member_params_t pn = params("x", "h:1");
    pn.endpoints = nowhere;
    gt_wan_member_t *mx = NULL;
    uint64_t t2 = gt_time_ns();
    CHECK(gt_wan_member_create(&pn, &mx) != GT_OK);
    CHECK(mx == NULL);
    CHECK((gt_time_ns() - t2) / 1e9 < 3.0);
    return GT_TEST_DONE();
}
