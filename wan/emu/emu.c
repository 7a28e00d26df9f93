/* emu.c — the WAN emulator's core: per-link arrival times and a delay queue (docs/emulator.md).
 *
 * The model (latency, jitter, token bucket, loss as retransmission delay, cut windows,
 * in-order delivery) is described in emu_internal.h and docs/emulator.md. Shape: a link is
 * a few numbers — the bucket's drain time E (when all bytes reserved so far have left at the
 * configured rate), the latest arrival, a PRNG — so scheduling a message is O(cuts) and
 * allocation free. Links are allocated on first use, so a large site count costs only a
 * table of pointers. Times are doubles in nanoseconds inside (exact to well below 1 ns for
 * runs of months) and uint64 ns at the API.
 */
#include "emu_internal.h"

#include "gt_topology.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define EMU_MAGIC 0x454d5531u /* "EMU1" */

#define DEFAULT_PACKET_BYTES 1448.0  /* a TCP segment on a 1500-byte MTU */
#define DEFAULT_MIN_BURST    65536.0 /* bytes */
#define DEFAULT_BURST_S      0.010   /* 10 ms worth of the rate */
#define DEFAULT_RTO_MIN_MS   200.0   /* Linux TCP_RTO_MIN */
#define MAX_LOSS_ROUNDS      64      /* caps the retransmission rounds of one message */

typedef struct {
    double a, b; /* [a, b) in absolute ns */
} window_t;

typedef struct {
    gt_wan_emu_link_params_t p; /* as given, with defaults filled in */
    double rate;                /* bytes per ns; 0 = unlimited */
    double tau;                 /* burst / rate: how far ahead of its schedule the bucket runs */
    size_t n_windows;
    window_t windows[GT_WAN_EMU_MAX_CUTS]; /* sorted, merged */
    double drain; /* E, in active time (see active()): when every reserved byte has left */
    uint64_t last_now;
    uint64_t last_arrival;
    uint64_t rng[4]; /* xoshiro256** */
    gt_wan_emu_link_stats_t stats;
} link_t;

struct gt_wan_emu {
    uint32_t magic;
    uint32_t n_sites;
    gt_wan_emu_link_params_t def; /* validated default link */
    uint64_t seed;
    uint64_t start_ns;
    double hold_timeout_ns; /* 0 = hold forever */
    link_t **links;         /* n_sites * n_sites, allocated on first use */
};

/* ---- PRNG: splitmix64 seeds xoshiro256** (Blackman & Vigna) ----------------------------- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t xoshiro_next(uint64_t s[4])
{
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Uniform in [0, 1) with 53 random bits. */
static double uniform(uint64_t s[4])
{
    return (double)(xoshiro_next(s) >> 11) * 0x1.0p-53;
}

static void seed_link(link_t *l, uint64_t seed, uint32_t src, uint32_t dst)
{
    uint64_t x = seed;
    uint64_t mix = splitmix64(&x) ^ (((uint64_t)src << 32) | dst);
    x = mix;
    for (int i = 0; i < 4; i++) l->rng[i] = splitmix64(&x);
}

/* ---- parameters -------------------------------------------------------------------------- */

static int finite_nonneg(double v)
{
    return isfinite(v) && v >= 0.0;
}

static gt_status_t check_link(const gt_wan_emu_link_params_t *p)
{
    if (!finite_nonneg(p->latency_ms) || !finite_nonneg(p->jitter_ms) ||
        !finite_nonneg(p->bandwidth_mbps) || !finite_nonneg(p->burst_bytes) ||
        !finite_nonneg(p->rto_ms) || !finite_nonneg(p->packet_bytes) || !isfinite(p->loss) ||
        p->loss < 0.0 || p->loss >= 1.0 || p->n_cuts > GT_WAN_EMU_MAX_CUTS) {
        GT_ERROR("WAN emulator: invalid link parameters (latency %g ms, jitter %g ms, bandwidth "
                 "%g Mbit/s, loss %g, %u cuts): values must be finite and >= 0, loss in [0, 1), "
                 "at most %u cuts",
                 p->latency_ms, p->jitter_ms, p->bandwidth_mbps, p->loss, p->n_cuts,
                 GT_WAN_EMU_MAX_CUTS);
        return GT_ERR_INVALID;
    }
    for (uint32_t i = 0; i < p->n_cuts; i++)
        if (!finite_nonneg(p->cuts[i].start_s) || !isfinite(p->cuts[i].duration_s) ||
            p->cuts[i].duration_s <= 0.0) {
            GT_ERROR("WAN emulator: cut %u (start_s %g, duration_s %g): start must be >= 0 and "
                     "duration > 0",
                     i, p->cuts[i].start_s, p->cuts[i].duration_s);
            return GT_ERR_INVALID;
        }
    return GT_OK;
}

static void fill_defaults(gt_wan_emu_link_params_t *p)
{
    double rate_Bps = p->bandwidth_mbps * 1e6 / 8.0;
    if (p->packet_bytes == 0.0) p->packet_bytes = DEFAULT_PACKET_BYTES;
    if (p->rto_ms == 0.0) p->rto_ms = 2.0 * p->latency_ms + DEFAULT_RTO_MIN_MS;
    if (p->burst_bytes == 0.0 && rate_Bps > 0.0)
        p->burst_bytes = fmax(DEFAULT_MIN_BURST, rate_Bps * DEFAULT_BURST_S);
}

static int cmp_window(const void *x, const void *y)
{
    const window_t *a = x, *b = y;
    return a->a < b->a ? -1 : a->a > b->a;
}

/* Applies validated params to a link: derived rate, sorted and merged cut windows. */
static void link_apply(const gt_wan_emu_t *emu, link_t *l, const gt_wan_emu_link_params_t *p)
{
    l->p = *p;
    fill_defaults(&l->p);
    l->rate = l->p.bandwidth_mbps * 1e6 / 8.0 / 1e9;
    l->tau = l->rate > 0.0 ? l->p.burst_bytes / l->rate : 0.0;
    window_t w[GT_WAN_EMU_MAX_CUTS];
    for (uint32_t i = 0; i < l->p.n_cuts; i++) {
        w[i].a = (double)emu->start_ns + l->p.cuts[i].start_s * 1e9;
        w[i].b = w[i].a + l->p.cuts[i].duration_s * 1e9;
    }
    qsort(w, l->p.n_cuts, sizeof w[0], cmp_window);
    l->n_windows = 0;
    for (uint32_t i = 0; i < l->p.n_cuts; i++) {
        if (l->n_windows && w[i].a <= l->windows[l->n_windows - 1].b) {
            window_t *last = &l->windows[l->n_windows - 1];
            if (w[i].b > last->b) last->b = w[i].b;
        } else {
            l->windows[l->n_windows++] = w[i];
        }
    }
}

gt_status_t gt_wan_emu_create(const gt_wan_emu_params_t *params, gt_wan_emu_t **emu_p)
{
    if (!params || !emu_p) return GT_ERR_INVALID;
    if (params->n_sites == 0 || params->n_sites > GT_WAN_EMU_MAX_SITES ||
        !finite_nonneg(params->hold_timeout_ms)) {
        GT_ERROR("WAN emulator: %u sites (allowed 1..%u), hold timeout %g ms (must be >= 0)",
                 params->n_sites, GT_WAN_EMU_MAX_SITES, params->hold_timeout_ms);
        return GT_ERR_INVALID;
    }
    gt_status_t st = check_link(&params->link);
    if (st != GT_OK) return st;
    gt_wan_emu_t *emu = calloc(1, sizeof *emu);
    if (!emu) return GT_ERR_NOMEM;
    emu->links = calloc((size_t)params->n_sites * params->n_sites, sizeof *emu->links);
    if (!emu->links) {
        free(emu);
        return GT_ERR_NOMEM;
    }
    emu->magic = EMU_MAGIC;
    emu->n_sites = params->n_sites;
    emu->def = params->link;
    emu->seed = params->seed;
    emu->start_ns = params->start_ns;
    emu->hold_timeout_ns = params->hold_timeout_ms * 1e6;
    *emu_p = emu;
    return GT_OK;
}

void gt_wan_emu_destroy(gt_wan_emu_t *emu)
{
    if (!emu) return;
    for (size_t i = 0; i < (size_t)emu->n_sites * emu->n_sites; i++) free(emu->links[i]);
    free(emu->links);
    emu->magic = 0;
    free(emu);
}

static int valid_pair(const gt_wan_emu_t *emu, uint32_t src, uint32_t dst)
{
    return emu && emu->magic == EMU_MAGIC && src < emu->n_sites && dst < emu->n_sites;
}

/* The link src -> dst, created with the default parameters on first use. */
static link_t *get_link(gt_wan_emu_t *emu, uint32_t src, uint32_t dst)
{
    link_t **slot = &emu->links[(size_t)src * emu->n_sites + dst];
    if (!*slot) {
        link_t *l = calloc(1, sizeof *l);
        if (!l) return NULL;
        link_apply(emu, l, &emu->def);
        seed_link(l, emu->seed, src, dst);
        *slot = l;
    }
    return *slot;
}

gt_status_t gt_wan_emu_link_set(gt_wan_emu_t *emu, uint32_t src, uint32_t dst,
                                const gt_wan_emu_link_params_t *link)
{
    if (!valid_pair(emu, src, dst) || !link) return GT_ERR_INVALID;
    gt_status_t st = check_link(link);
    if (st != GT_OK) return st;
    link_t *l = get_link(emu, src, dst);
    if (!l) return GT_ERR_NOMEM;
    link_apply(emu, l, link);
    return GT_OK;
}

gt_status_t gt_wan_emu_link_get(const gt_wan_emu_t *emu, uint32_t src, uint32_t dst,
                                gt_wan_emu_link_params_t *link_p)
{
    if (!valid_pair(emu, src, dst) || !link_p) return GT_ERR_INVALID;
    const link_t *l = emu->links[(size_t)src * emu->n_sites + dst];
    if (l) {
        *link_p = l->p;
    } else {
        *link_p = emu->def;
        fill_defaults(link_p);
    }
    return GT_OK;
}

int gt_wan_emu_link_is_cut(const gt_wan_emu_t *emu, uint32_t src, uint32_t dst, uint64_t now_ns)
{
    if (!valid_pair(emu, src, dst)) return 0;
    const link_t *l = emu->links[(size_t)src * emu->n_sites + dst];
    gt_wan_emu_link_params_t def;
    link_t tmp;
    if (!l) { /* not used yet: judge by the default parameters */
        def = emu->def;
        link_apply(emu, &tmp, &def);
        l = &tmp;
    }
    double t = (double)now_ns;
    for (size_t i = 0; i < l->n_windows; i++)
        if (t >= l->windows[i].a && t < l->windows[i].b) return 1;
    return 0;
}

gt_status_t gt_wan_emu_link_stats(const gt_wan_emu_t *emu, uint32_t src, uint32_t dst,
                                  gt_wan_emu_link_stats_t *stats_p)
{
    if (!valid_pair(emu, src, dst) || !stats_p) return GT_ERR_INVALID;
    const link_t *l = emu->links[(size_t)src * emu->n_sites + dst];
    if (l) {
        *stats_p = l->stats;
    } else {
        memset(stats_p, 0, sizeof *stats_p);
    }
    return GT_OK;
}

_Static_assert(GT_TOPO_MAX_CUTS <= GT_WAN_EMU_MAX_CUTS, "every configured cut fits a link");
_Static_assert(GT_TOPO_MAX_SITES <= GT_WAN_EMU_MAX_SITES, "every configured site fits");

static void link_from_topo(const gt_topo_link_params_t *t, gt_wan_emu_link_params_t *l)
{
    gt_wan_emu_link_params_t p = GT_WAN_EMU_LINK_PARAMS_INIT;
    p.latency_ms = t->latency_ms;
    p.jitter_ms = t->jitter_ms;
    p.bandwidth_mbps = t->bandwidth_mbps;
    p.loss = t->loss;
    p.n_cuts = t->n_cuts;
    for (uint32_t i = 0; i < t->n_cuts && i < GT_WAN_EMU_MAX_CUTS; i++) {
        p.cuts[i].start_s = t->cuts[i].start_s;
        p.cuts[i].duration_s = t->cuts[i].duration_s;
    }
    *l = p;
}

gt_status_t gt_wan_emu_create_from_config(const struct gt_topo_config *cfg, uint64_t start_ns,
                                          double hold_timeout_ms, gt_wan_emu_t **emu_p)
{
    if (!cfg || !emu_p) return GT_ERR_INVALID;
    gt_wan_emu_params_t p = GT_WAN_EMU_PARAMS_INIT;
    p.n_sites = cfg->n_sites;
    link_from_topo(&cfg->wan.emulation.link, &p.link);
    p.seed = cfg->wan.emulation.seed;
    p.start_ns = start_ns;
    p.hold_timeout_ms = hold_timeout_ms;
    gt_wan_emu_t *emu = NULL;
    gt_status_t st = gt_wan_emu_create(&p, &emu);
    if (st != GT_OK) return st;
    for (uint32_t a = 0; a < cfg->n_sites && st == GT_OK; a++)
        for (uint32_t b = 0; b < cfg->n_sites && st == GT_OK; b++) {
            gt_topo_link_params_t t;
            gt_wan_emu_link_params_t l;
            if (a == b) continue; /* a site does not cross the WAN to itself */
            gt_topo_link_params(cfg, a, b, &t);
            link_from_topo(&t, &l);
            st = gt_wan_emu_link_set(emu, a, b, &l);
        }
    if (st != GT_OK) {
        gt_wan_emu_destroy(emu);
        return st;
    }
    *emu_p = emu;
    return GT_OK;
}

/* ---- scheduling ------------------------------------------------------------------------ */

/* Retransmission rounds of a message of n_pieces pieces, each lost with probability p per
 * try: K = max over pieces of the tries lost, P(K >= j) = 1 - (1 - p^j)^n_pieces. */
static int loss_rounds(link_t *l, double n_pieces)
{
    double p = l->p.loss;
    if (p <= 0.0) return 0;
    double u = uniform(l->rng);
    int k = 0;
    double pj = p;
    while (k < MAX_LOSS_ROUNDS) {
        double tail = -expm1(n_pieces * log1p(-pj)); /* P(K >= k+1) */
        if (!(u < tail)) break;
        k++;
        pj *= p;
    }
    return k;
}

/* Cut windows stop the bucket: it drains only in "active" time, wall time minus the cut
 * windows before it. active() maps wall -> active time (a moment inside a cut maps to the
 * cut's start); wall() maps back, to the first moment after any cut. */
static double active(const link_t *l, double x)
{
    double y = x;
    for (size_t i = 0; i < l->n_windows && l->windows[i].a < x; i++)
        y -= fmin(x, l->windows[i].b) - l->windows[i].a;
    return y;
}

static double wall(const link_t *l, double y)
{
    double x = y, cut = 0.0;
    for (size_t i = 0; i < l->n_windows; i++) {
        if (l->windows[i].a - cut >= y) break; /* active(a_i) >= y: ends before this cut */
        x += l->windows[i].b - l->windows[i].a;
        cut += l->windows[i].b - l->windows[i].a;
    }
    return x;
}

gt_status_t gt_wan_emu_schedule(gt_wan_emu_t *emu, uint32_t src, uint32_t dst, size_t bytes,
                                uint64_t now_ns, uint64_t *deliver_at_ns_p)
{
    if (!valid_pair(emu, src, dst) || !deliver_at_ns_p) return GT_ERR_INVALID;
    link_t *l = get_link(emu, src, dst);
    if (!l) return GT_ERR_NOMEM;
    if (now_ns < l->last_now) now_ns = l->last_now;
    const double t = (double)now_ns;

    /* 1. a message sent into a cut waits for the link to heal */
    double t_out = t;
    for (size_t i = 0; i < l->n_windows; i++)
        if (t_out >= l->windows[i].a && t_out < l->windows[i].b) t_out = l->windows[i].b;

    /* 2. the token bucket, in active time: it has paid for this message's bytes (plus the
     * retransmitted bytes loss costs on average) at tx_end */
    double wire_bytes = (double)bytes;
    if (l->p.loss > 0.0) wire_bytes += (double)bytes * l->p.loss / (1.0 - l->p.loss);
    double drain = l->drain, tx_end = t_out;
    if (l->rate > 0.0) {
        double t_act = active(l, t);
        drain = fmax(drain, t_act) + wire_bytes / l->rate;
        tx_end = fmax(t_out, wall(l, fmax(t_act, drain - l->tau)));
    }

    /* 3. propagation with jitter; 4. loss as retransmission rounds */
    uint64_t jitter_bits = xoshiro_next(l->rng); /* drawn always: streams stay aligned */
    double prop = l->p.latency_ms * 1e6;
    if (l->p.jitter_ms > 0.0) {
        double u = (double)(jitter_bits >> 11) * 0x1.0p-53;
        prop = fmax(0.0, prop + (2.0 * u - 1.0) * l->p.jitter_ms * 1e6);
    }
    double pieces = ceil(fmax(1.0, (double)bytes) / l->p.packet_bytes);
    int rounds = loss_rounds(l, pieces);
    double arrival = tx_end + prop + (double)rounds * l->p.rto_ms * 1e6;

    /* 5. bytes in flight when a cut starts are resent after it heals */
    for (size_t i = 0; i < l->n_windows; i++)
        if (l->windows[i].a < arrival && l->windows[i].b > tx_end)
            arrival = fmax(arrival, l->windows[i].b + prop);

    /* How much later than without cuts: what the hold timeout limits. */
    double uncut_tx = l->rate > 0.0 ? t + (fmax(active(l, t), drain - l->tau) - active(l, t)) : t;
    double held = arrival - (uncut_tx + prop + (double)rounds * l->p.rto_ms * 1e6);
    if (emu->hold_timeout_ns > 0.0 && held > emu->hold_timeout_ns) {
        l->stats.failed++;
        GT_WARN("WAN emulator: link %u -> %u is cut; a message would be held %.0f ms "
                "(timeout %.0f ms): peer lost",
                src, dst, held / 1e6, emu->hold_timeout_ns / 1e6);
        return GT_ERR_PEER_LOST;
    }

    /* 6. in order: never before an earlier message on the same link */
    uint64_t at = (uint64_t)ceil(arrival);
    if (at < now_ns) at = now_ns;
    if (at < l->last_arrival) at = l->last_arrival;

    l->drain = drain;
    l->last_now = now_ns;
    l->last_arrival = at;
    l->stats.messages++;
    l->stats.bytes += bytes;
    if (rounds > 0) l->stats.retransmitted++;
    if (held > 0.5) l->stats.held_by_cut++;
    l->stats.total_delay_ns += at - now_ns;
    if (at - now_ns > l->stats.max_delay_ns) l->stats.max_delay_ns = at - now_ns;
    l->stats.last_arrival_ns = at;
    *deliver_at_ns_p = at;
    return GT_OK;
}

/* ---- delay queue: a binary min-heap on (due, push order) ------------------------------- */

typedef struct {
    uint64_t due;
    uint64_t order;
    void *item;
} qent_t;

struct gt_wan_emu_queue {
    qent_t *heap;
    size_t len, cap;
    uint64_t pushed;
};

static int qless(const qent_t *a, const qent_t *b)
{
    return a->due < b->due || (a->due == b->due && a->order < b->order);
}

gt_status_t gt_wan_emu_queue_create(gt_wan_emu_queue_t **queue_p)
{
    if (!queue_p) return GT_ERR_INVALID;
    gt_wan_emu_queue_t *q = calloc(1, sizeof *q);
    if (!q) return GT_ERR_NOMEM;
    *queue_p = q;
    return GT_OK;
}

void gt_wan_emu_queue_destroy(gt_wan_emu_queue_t *q)
{
    if (!q) return;
    free(q->heap);
    free(q);
}

gt_status_t gt_wan_emu_queue_push(gt_wan_emu_queue_t *q, uint64_t due_ns, void *item)
{
    if (!q) return GT_ERR_INVALID;
    if (q->len == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 64;
        qent_t *h = realloc(q->heap, cap * sizeof *h);
        if (!h) return GT_ERR_NOMEM;
        q->heap = h;
        q->cap = cap;
    }
    qent_t e = {due_ns, q->pushed++, item};
    size_t i = q->len++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!qless(&e, &q->heap[parent])) break;
        q->heap[i] = q->heap[parent];
        i = parent;
    }
    q->heap[i] = e;
    return GT_OK;
}

gt_status_t gt_wan_emu_queue_pop(gt_wan_emu_queue_t *q, uint64_t now_ns, uint64_t *due_ns_p,
                                 void **item_p)
{
    if (!q || !item_p) return GT_ERR_INVALID;
    if (q->len == 0 || q->heap[0].due > now_ns) return GT_ERR_AGAIN;
    qent_t top = q->heap[0], last = q->heap[--q->len];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= q->len) break;
        if (c + 1 < q->len && qless(&q->heap[c + 1], &q->heap[c])) c++;
        if (!qless(&q->heap[c], &last)) break;
        q->heap[i] = q->heap[c];
        i = c;
    }
    if (q->len) q->heap[i] = last;
    if (due_ns_p) *due_ns_p = top.due;
    *item_p = top.item;
    return GT_OK;
}

uint64_t gt_wan_emu_queue_next_due(const gt_wan_emu_queue_t *q)
{
    return (q && q->len) ? q->heap[0].due : UINT64_MAX;
}

size_t gt_wan_emu_queue_len(const gt_wan_emu_queue_t *q)
{
    return q ? q->len : 0;
}
