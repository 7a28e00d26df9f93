/* prom.c — what an operator scrapes: a site's counters as Prometheus' text exposition format
 * (version 0.0.4) at GET /metrics, on the address gt_topo_metrics_address gives this rank
 * (sites[].metrics, metrics.listen; none: no server). libmicrohttpd parses HTTP and runs the
 * server on a thread of its own, with a cap on connections (per source too) and a timeout, so a
 * scraper that stalls or a flood of connections costs the site a few descriptors, not a step.
 *
 * Two kinds of values, read two ways, so a scrape never reads a field another thread writes:
 * the training thread's (step, loss, tokens, waits, its state) are copied into a snapshot by
 * dl_prom_update, called from the status writer (at most five times a second, and at every
 * forced status), under the server's own mutex; the WAN's (bytes per peer, contributions by
 * outcome, hash votes, rejected frames, handshakes, the view) are read at the scrape under
 * d->lock, as the summary reads them, so a scrape during a long wait for a round still shows
 * the WAN moving. geotrain_status_age_seconds says how old the snapshot is: a training thread
 * that stopped coming back into geotrain shows as that age growing.
 *
 * Every rank with an address serves its own counters (its WAN groups' traffic); the site's
 * totals are the sum over its ranks (PromQL: sum by (site)). The names are in docs/deploy.md.
 */
#include "diloco_internal.h"

#include <math.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define PROM_UPDATE_NS    200000000ull /* the snapshot's refresh: at most 5 times a second */
#define PROM_MAX_CONNS    16u
#define PROM_MAX_PER_IP   4u
#define PROM_TIMEOUT_S    10u
#define PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define PROM_STATE_COUNT  7

/* The training thread's values, as of the last dl_prom_update. */
struct prom_snap {
    gt_diloco_state_t state;
    uint64_t step, total, round, rounds_applied, tokens, steps_trained, refetches, evictions;
    uint64_t joined_round, steps_skipped;
    double loss, step_s, compute_s, wait_s, wait_max_s, train_s, paused_s;
    double train_start_unix;
    uint64_t taken_ns;
};

struct dl_prom {
    struct MHD_Daemon *mhd;
    gt_diloco_t *d;
    pthread_mutex_t lock; /* snap */
    struct prom_snap snap;
    uint64_t scrapes; /* under lock */
    char address[GT_TOPO_ADDR_MAX];
};

/* ---- the text ---- */

typedef struct {
    char *p;
    size_t n, cap;
    int failed;
} buf_t;

static void put(buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf_t *b, const char *fmt, ...)
{
    for (int tries = 0; !b->failed && tries < 2; tries++) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = 1;
            return;
        }
        if (b->p && b->n + (size_t)n < b->cap) {
            b->n += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap : 8192;
        while (cap <= b->n + (size_t)n) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->failed = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
}

/* A metric's HELP and TYPE lines (once per name). */
static void head(buf_t *b, const char *name, const char *type, const char *help)
{
    put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Prometheus reads NaN and +Inf as such; %.17g would write "nan". */
static void num(char *s, size_t len, double v)
{
    if (isnan(v))
        snprintf(s, len, "NaN");
    else if (isinf(v))
        snprintf(s, len, v > 0 ? "+Inf" : "-Inf");
    else
        snprintf(s, len, "%.17g", v);
}

/* One sample: name{site,rank[,extra]} value. */
static void sample(buf_t *b, const gt_diloco_t *d, const char *name, const char *extra, double v)
{
    char s[40];
    num(s, sizeof s, v);
    put(b, "%s{site=\"%s\",rank=\"%u\"%s%s} %s\n", name, d->name, (unsigned)d->rank,
        extra ? "," : "", extra ? extra : "", s);
}

static void one(buf_t *b, const gt_diloco_t *d, const char *name, const char *type,
                const char *help, double v)
{
    head(b, name, type, help);
    sample(b, d, name, NULL, v);
}

/* The WAN's counters, read under d->lock. */
struct prom_wan {
    gt_wan_mesh_stats_t ms;
    gt_outer_stats_t os;
    uint64_t epoch;
    uint32_t live, n_sites;
    double gap_max_s, peak_bps;
    uint64_t *peer_sent, *peer_recv; /* [n_sites] */
};

static void read_wan(gt_diloco_t *d, struct prom_wan *w)
{
    pthread_mutex_lock(&d->lock);
    dl_mesh_stats(d, &w->ms);
    dl_outer_stats(d, &w->os);
    const gt_wan_view_t *v = dl_view(d);
    w->epoch = v->epoch;
    w->live = v->n_members;
    w->gap_max_s = d->wan_gap_max_s;
    w->peak_bps = d->peak_wan_bps;
    for (uint32_t i = 0; i < d->n_grp && w->peer_sent; i++) {
        for (uint32_t s = 0; s < w->n_sites; s++) {
            uint64_t a = 0, r = 0;
            if (d->grp[i].mesh) gt_wan_mesh_peer_bytes(d->grp[i].mesh, s, &a, &r);
            w->peer_sent[s] += a;
            w->peer_recv[s] += r;
        }
    }
    pthread_mutex_unlock(&d->lock);
}

static char *render(struct dl_prom *pr, size_t *len_p)
{
    gt_diloco_t *d = pr->d;
    struct prom_snap s;
    pthread_mutex_lock(&pr->lock);
    s = pr->snap;
    uint64_t scrapes = ++pr->scrapes;
    pthread_mutex_unlock(&pr->lock);
    struct prom_wan w;
    memset(&w, 0, sizeof w);
    w.n_sites = d->cfg->n_sites;
    w.peer_sent = calloc(w.n_sites, sizeof *w.peer_sent);
    w.peer_recv = calloc(w.n_sites, sizeof *w.peer_recv);
    if (!w.peer_sent || !w.peer_recv) {
        free(w.peer_sent);
        free(w.peer_recv);
        return NULL;
    }
    read_wan(d, &w);
    uint64_t now = gt_time_ns();
    buf_t b = {0};
    char extra[160];

    head(&b, "geotrain_state", "gauge", "1 for the site's state, 0 for the others");
    for (int k = 0; k < PROM_STATE_COUNT; k++) {
        snprintf(extra, sizeof extra, "state=\"%s\"", dl_state_name((gt_diloco_state_t)k));
        sample(&b, d, "geotrain_state", extra, s.state == (gt_diloco_state_t)k);
    }
    one(&b, d, "geotrain_step", "gauge", "the inner step the site trains next", (double)s.step);
    one(&b, d, "geotrain_total_steps", "gauge", "inner steps of the whole run", (double)s.total);
    one(&b, d, "geotrain_round", "gauge", "the outer round the site trains (step / inner.steps)",
        (double)s.round);
    one(&b, d, "geotrain_rounds_applied_total", "counter", "outer rounds applied to the anchor",
        (double)s.rounds_applied);
    one(&b, d, "geotrain_joined_round", "gauge", "the first round this process took part in",
        (double)s.joined_round);
    one(&b, d, "geotrain_tokens_total", "counter", "tokens the site trained (a resume restores it)",
        (double)s.tokens);
    one(&b, d, "geotrain_steps_trained_total", "counter", "inner steps this process trained",
        (double)s.steps_trained);
    one(&b, d, "geotrain_steps_skipped_total", "counter",
        "inner steps skipped by rounds ended early (outer.catch_up)", (double)s.steps_skipped);
    one(&b, d, "geotrain_loss", "gauge", "training loss of the last step (NaN: none yet)", s.loss);
    one(&b, d, "geotrain_step_seconds", "gauge",
        "an inner step's time at the site's usual speed (moving average)", s.step_s);
    one(&b, d, "geotrain_compute_seconds_total", "counter", "time in inner steps", s.compute_s);
    one(&b, d, "geotrain_wait_seconds_total", "counter",
        "time the training thread waited for round results", s.wait_s);
    one(&b, d, "geotrain_wait_max_seconds", "gauge", "the longest single wait for a round's result",
        s.wait_max_s);
    one(&b, d, "geotrain_paused_seconds_total", "counter",
        "time the process did not run (stopped, frozen), counted as no compute", s.paused_s);
    one(&b, d, "geotrain_train_seconds", "gauge", "wall time since this process began training",
        s.train_s);
    one(&b, d, "geotrain_compute_utilization", "gauge",
        "goodput so far: time in inner steps over wall time since training began",
        s.train_s > 0 ? s.compute_s / s.train_s : 0.0);
    one(&b, d, "geotrain_tokens_per_second", "gauge", "tokens over wall time since training began",
        s.train_s > 0 ? (double)s.tokens / s.train_s : 0.0);
    one(&b, d, "geotrain_train_start_seconds", "gauge",
        "Unix time at which this process began training (0: not yet)", s.train_start_unix);
    one(&b, d, "geotrain_status_age_seconds", "gauge",
        "age of the training thread's values above (grows while it is stuck outside geotrain)",
        s.taken_ns && now > s.taken_ns ? (now - s.taken_ns) * 1e-9 : 0.0);
    one(&b, d, "geotrain_anchor_refetches_total", "counter",
        "anchors re-fetched after a hash mismatch", (double)s.refetches);
    one(&b, d, "geotrain_evictions_total", "counter",
        "sites this site evicted as one of a majority that could not reach them",
        (double)s.evictions);
    one(&b, d, "geotrain_lease_ok", "gauge",
        "1 while the site's membership lease holds, 0 once it was lost (the site leaves)",
        d->wan_error == 0);

    one(&b, d, "geotrain_view_epoch", "gauge", "epoch of the membership view", (double)w.epoch);
    one(&b, d, "geotrain_live_sites", "gauge", "sites in the membership view, this one included",
        (double)w.live);
    one(&b, d, "geotrain_wan_thread_gap_max_seconds", "gauge",
        "the longest time between two turns of the WAN thread", w.gap_max_s);
    one(&b, d, "geotrain_wan_bytes_sent_total", "counter",
        "payload bytes this rank sent over the WAN", (double)w.ms.bytes_sent);
    one(&b, d, "geotrain_wan_bytes_received_total", "counter",
        "payload bytes this rank received over the WAN", (double)w.ms.bytes_received);
    one(&b, d, "geotrain_wan_peak_send_bits_per_second", "gauge",
        "the highest send rate over any 1 s window", w.peak_bps);
    const char *dirs[2] = {"geotrain_wan_peer_bytes_sent_total",
                           "geotrain_wan_peer_bytes_received_total"};
    for (int dir = 0; dir < 2; dir++) {
        head(&b, dirs[dir], "counter",
             dir ? "payload bytes received from a peer site" : "payload bytes sent to a peer site");
        for (uint32_t p = 0; p < w.n_sites; p++) {
            if (p == d->site || gt_topo_site_vacant(&d->cfg->sites[p])) continue;
            snprintf(extra, sizeof extra, "peer=\"%s\"", d->cfg->sites[p].name);
            sample(&b, d, dirs[dir], extra, (double)(dir ? w.peer_recv[p] : w.peer_sent[p]));
        }
    }
    /* What sync-dp (a bf16 ring all-reduce of the gradients across the S sites every step)
     * would have sent from these lanes for the steps trained so far: the bytes DiLoCo saves
     * are this minus geotrain_wan_bytes_sent_total. */
    uint32_t S = 0; /* the run's sites (vacant slots of outer.site_slots are none) */
    for (uint32_t p = 0; p < d->cfg->n_sites; p++) S += !gt_topo_site_vacant(&d->cfg->sites[p]);
    double dp = S > 1 ? (double)s.steps_trained * 2.0 * (S - 1) / S * (double)d->n_sub * 2.0 : 0.0;
    one(&b, d, "geotrain_sync_dp_bytes_equivalent_total", "counter",
        "bytes a sync-dp run would have sent from this rank's lanes for the steps trained", dp);
    head(&b, "geotrain_contributions_total", "counter",
         "contributions this site received as a chunk's owner, by outcome");
    const char *outcomes[5] = {"on_time", "late", "dropped", "rejected", "clipped"};
    uint64_t counts[5] = {w.os.on_time, w.os.late, w.os.dropped, w.os.rejected, w.os.clipped};
    for (int k = 0; k < 5; k++) {
        snprintf(extra, sizeof extra, "outcome=\"%s\"", outcomes[k]);
        sample(&b, d, "geotrain_contributions_total", extra, (double)counts[k]);
    }
    one(&b, d, "geotrain_contributions_open", "gauge",
        "contributions received and not aggregated yet (rounds still open)", (double)w.os.open);
    one(&b, d, "geotrain_contributions_unreceived_total", "counter",
        "own contributions a peer finished without taking (from its FIN)", (double)w.os.unreceived);
    one(&b, d, "geotrain_deltas_sent_total", "counter", "contribution frames sent (re-sends too)",
        (double)w.os.deltas_sent);
    one(&b, d, "geotrain_hash_checks_total", "counter",
        "anchor hashes compared with the majority's (invariant I1)", (double)w.os.hash_checks);
    one(&b, d, "geotrain_hash_mismatches_total", "counter",
        "anchor hashes that differed from the majority's", (double)w.os.hash_mismatches);
    one(&b, d, "geotrain_frames_rejected_total", "counter",
        "frames the secure channel rejected (authentication, replay, size, format)",
        (double)w.ms.rejected);
    one(&b, d, "geotrain_handshakes_refused_total", "counter",
        "incoming handshakes refused (unknown key, bad run id, failed authentication)",
        (double)w.ms.gate.handshakes_refused);
    one(&b, d, "geotrain_handshakes_timed_out_total", "counter",
        "incoming connections closed for not finishing the handshake in time",
        (double)w.ms.gate.handshakes_timed_out);
    one(&b, d, "geotrain_connections_capped_total", "counter",
        "incoming connections closed at the pre-authentication caps",
        (double)w.ms.gate.connections_capped);
    one(&b, d, "geotrain_reconnects_total", "counter",
        "connections re-made to a peer that had one before", (double)w.ms.reconnects);
    one(&b, d, "geotrain_resent_total", "counter", "messages sent again on a new connection",
        (double)w.ms.resent);
    one(&b, d, "geotrain_peers_cut_total", "counter",
        "times a peer was cut off for failing too often (wan.max_link_failures)",
        (double)w.ms.peers_cut);
    one(&b, d, "geotrain_scrapes_total", "counter", "scrapes of this endpoint, this one included",
        (double)scrapes);
    free(w.peer_sent);
    free(w.peer_recv);
    if (b.failed) {
        free(b.p);
        return NULL;
    }
    *len_p = b.n;
    return b.p;
}

/* ---- the server ---- */

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *text)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_len, void **state)
{
    struct dl_prom *pr = cls;
    (void)version;
    (void)upload;
    if (!*state) { /* the headers: nothing to do until the (empty) body is in */
        *state = pr;
        return MHD_YES;
    }
    if (*upload_len) { /* a body we do not read */
        *upload_len = 0;
        return MHD_YES;
    }
    int get = strcmp(method, MHD_HTTP_METHOD_GET) == 0, hd = strcmp(method, "HEAD") == 0;
    if (!get && !hd) return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET /metrics\n");
    if (strcmp(url, "/metrics") != 0) return reply(c, MHD_HTTP_NOT_FOUND, "GET /metrics\n");
    size_t len = 0;
    char *text = render(pr, &len);
    if (!text) return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    struct MHD_Response *r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, PROM_CONTENT_TYPE);
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

static void take_snapshot(gt_diloco_t *d, struct prom_snap *s, uint64_t now)
{
    s->state = d->state;
    s->step = d->step;
    s->total = d->total;
    s->round = d->H ? d->step / d->H : 0;
    s->rounds_applied = d->rounds_applied;
    s->tokens = d->tokens;
    s->steps_trained = d->steps_trained;
    s->steps_skipped = d->steps_skipped;
    s->refetches = d->refetches;
    s->evictions = d->evictions;
    s->joined_round = d->joined_round;
    s->loss = d->steps_trained ? d->loss : NAN;
    s->step_s = d->base_ema;
    s->compute_s = d->compute_s;
    s->wait_s = d->wait_s;
    s->wait_max_s = d->wait_max_s;
    s->paused_s = d->paused_s;
    uint64_t end = d->t_train_end ? d->t_train_end : now;
    s->train_s = d->t_train && end > d->t_train ? (end - d->t_train) * 1e-9 : 0.0;
    s->train_start_unix = d->train_start_unix;
    s->taken_ns = now;
}

void dl_prom_update(gt_diloco_t *d, int force)
{
    struct dl_prom *pr = d->prom;
    if (!pr) return;
    uint64_t now = gt_time_ns();
    if (!force && now - pr->snap.taken_ns < PROM_UPDATE_NS) return; /* only this thread writes */
    struct prom_snap s;
    take_snapshot(d, &s, now);
    pthread_mutex_lock(&pr->lock);
    pr->snap = s;
    pthread_mutex_unlock(&pr->lock);
}

gt_status_t dl_prom_start(gt_diloco_t *d)
{
    char addr[GT_TOPO_ADDR_MAX], host[GT_TOPO_ADDR_MAX], service[8];
    gt_status_t st = gt_topo_metrics_address(d->cfg, d->site, d->rank, addr, sizeof addr);
    if (st != GT_OK || !addr[0]) return st;
    uint16_t port = 0;
    if (gt_topo_addr_split(addr, host, sizeof host, &port) != GT_OK || port == 0) {
        GT_ERROR("site %s: bad metrics address '%s'", d->name, addr);
        return GT_ERR_CONFIG;
    }
    snprintf(service, sizeof service, "%u", (unsigned)port);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
    int rc = getaddrinfo(strcmp(host, "*") == 0 ? NULL : host, service, &hints, &res);
    if (rc != 0 || !res) {
        GT_ERROR("site %s: cannot serve metrics on %s: %s", d->name, addr, gai_strerror(rc));
        return GT_ERR_CONFIG;
    }
    struct dl_prom *pr = calloc(1, sizeof *pr);
    if (!pr) {
        freeaddrinfo(res);
        return GT_ERR_NOMEM;
    }
    pr->d = d;
    snprintf(pr->address, sizeof pr->address, "%s", addr);
    pthread_mutex_init(&pr->lock, NULL);
    take_snapshot(d, &pr->snap, gt_time_ns());
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL;
    if (res->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    pr->mhd = MHD_start_daemon(flags, port, NULL, NULL, on_request, pr, MHD_OPTION_SOCK_ADDR,
                               res->ai_addr, MHD_OPTION_CONNECTION_LIMIT, PROM_MAX_CONNS,
                               MHD_OPTION_PER_IP_CONNECTION_LIMIT, PROM_MAX_PER_IP,
                               MHD_OPTION_CONNECTION_TIMEOUT, PROM_TIMEOUT_S, MHD_OPTION_END);
    freeaddrinfo(res);
    if (!pr->mhd) {
        GT_ERROR("site %s: cannot serve metrics on %s (sites[].metrics / metrics.listen): the "
                 "address is in use or not this host's",
                 d->name, addr);
        pthread_mutex_destroy(&pr->lock);
        free(pr);
        return GT_ERR_IO;
    }
    GT_INFO("site %s: rank %u serves Prometheus metrics at http://%s/metrics", d->name,
            (unsigned)d->rank, addr);
    d->prom = pr;
    return GT_OK;
}

void dl_prom_stop(gt_diloco_t *d)
{
    struct dl_prom *pr = d ? d->prom : NULL;
    if (!pr) return;
    MHD_stop_daemon(pr->mhd); /* waits for a scrape in progress */
    pthread_mutex_destroy(&pr->lock);
    free(pr);
    d->prom = NULL;
}
