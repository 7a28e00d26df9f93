/* launch_chaos.c — the seeded fault schedule of `geotrain launch --chaos SEED`, and goodput.
 *
 * The schedule is drawn once, before any site starts, from the seed alone (splitmix64), so
 * the same seed gives the same faults at the same rounds whatever the machine does; launch
 * then fires each fault when the run reaches its round (the most rounds any site reached),
 * which is what makes a DiLoCo run and a sync-dp run comparable under one schedule. Rounds
 * rather than seconds: a fault "at round 7" hits both modes at the same point of the training.
 *
 * Link cuts too: a cut is drawn at a round plus up to a round (`from`) and lasts seconds (a network
 * outage); launch fires it when the run reaches that round, appending it to RUN_DIR/chaos_cuts,
 * which every site's WAN thread reads (GT_CHAOS_CUTS) and adds to its emulated links on the run's
 * clock (GT_EMU_START_NS); a site started later reads the file whole. Until 2026-12-07 the cuts
 * were handed to the sites as --set links[A,B].cuts=... before the run, at round x round_s seconds:
 * where rounds were shorter than guessed a cut fell rounds later than drawn, past the run's end or
 * onto a kill the run-time majority check could not see.
 *
 * Goodput is measured from what the sites wrote, not from the schedule: the tokens each
 * applied round's result carried (anchors.jsonl, counted by the chunk owners as they folded
 * contributions in), over what every configured site would have trained at its own measured
 * speed during the run's training wall time. See docs/diloco.md#goodput.
 */
#include "launch_chaos.h"
#include "gt_topology.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double uniform(uint64_t *s) /* [0, 1) */
{
    return (double)(splitmix64(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* An exponential gap of mean m rounds, at least 1. */
static uint32_t gap(uint64_t *s, double m)
{
    double g = -m * log(1.0 - uniform(s));
    return g < 1.0 ? 1u : g > 1e6 ? 1000000u : (uint32_t)g;
}

/* The mean length of a fault in rounds (--fault-rounds; 0: the default, 2). */
static double fault_rounds(const gt_chaos_params_t *p)
{
    return p->fault_rounds > 0 ? p->fault_rounds : 2.0;
}

static int by_round(const void *a, const void *b)
{
    const gt_chaos_ev_t *x = a, *y = b;
    if (x->at != y->at) return x->at < y->at ? -1 : 1;
    if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
    return x->target < y->target ? -1 : x->target > y->target;
}

size_t gt_chaos_draw(const gt_chaos_params_t *p, gt_chaos_ev_t *ev, size_t cap)
{
    size_t n = 0;
    if (p->rounds < 5 || !(p->mtbf_rounds > 0)) return 0;
    uint32_t last = p->rounds - 3; /* faults end by then */
    double fr = fault_rounds(p);
    /* One stream per site (and one for etcd): adding a site does not move the others' faults. */
    for (uint32_t s = 0; s <= p->n_sites; s++) {
        int etcd = s == p->n_sites;
        if (etcd && p->etcd_members < 3) break;
        uint64_t st = p->seed * 0x100000001B3ull + s + 1;
        splitmix64(&st);
        uint32_t r = gap(&st, p->mtbf_rounds);
        while (r < last && n < cap) {
            gt_chaos_ev_t e;
            memset(&e, 0, sizeof e);
            e.at = r;
            /* 1/2, 1 or 3/2 x fault_rounds: 1, 2 or 3 rounds by default */
            double dur = 0.5 * fr * (double)(1 + (uint32_t)(uniform(&st) * 3));
            if (etcd) {
                e.kind = GT_CHAOS_ETCD;
                e.target = (uint32_t)(uniform(&st) * p->etcd_members);
                e.until = r + 1 + dur;
            } else {
                e.kind = (gt_chaos_kind_t)(uniform(&st) * 3);
                e.target = s;
                e.until = r + dur;
                e.factor = 3.0 + 7.0 * uniform(&st);
                e.stop_s = p->lease_ttl_s * (0.5 + 1.5 * uniform(&st));
                if (e.kind == GT_CHAOS_STOP) e.until = r + 1;
            }
            if (e.until > last) e.until = last;
            if (e.until <= e.at) break;
            ev[n++] = e;
            r = (uint32_t)ceil(e.until) + gap(&st, p->mtbf_rounds);
        }
    }
    /* Link cuts: a stream of their own per site (the other faults of a seed stay put). */
    for (uint32_t s = 0; p->round_s > 0 && p->n_sites >= 2 && s < p->n_sites; s++) {
        uint64_t st = (p->seed ^ 0xC0FFEE0C07ull) * 0x100000001B3ull + s + 1;
        splitmix64(&st);
        double longest = fmax(2.0, 2.5 * p->peer_timeout_s);
        for (uint32_t r = gap(&st, 3 * p->mtbf_rounds); r < last && n < cap;) {
            gt_chaos_ev_t e;
            memset(&e, 0, sizeof e);
            e.kind = GT_CHAOS_CUT;
            e.target = s;
            e.at = r;
            e.from = (double)r + uniform(&st);
            e.start_s = e.from * p->round_s;
            e.duration_s = 2.0 + (longest - 2.0) * uniform(&st);
            e.peer = GT_CHAOS_ALL_PEERS;
            if (uniform(&st) >= 0.5) {
                uint32_t k = (uint32_t)(uniform(&st) * (p->n_sites - 1));
                e.peer = k >= s ? k + 1 : k;
            }
            e.until = r + 1 + ceil(e.duration_s / p->round_s);
            ev[n++] = e;
            r = (uint32_t)e.until + gap(&st, 3 * p->mtbf_rounds);
        }
    }
    qsort(ev, n, sizeof *ev, by_round);
    /* A majority of the sites keeps training at every moment: a KILL or STOP that would take
     * more than (S - 1) / 2 sites away at once is dropped (a restarted site counts as away
     * until two rounds after its restart, the time it takes to rejoin). */
    uint32_t max_down = (p->n_sites - 1) / 2, busy_until[256] = {0};
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        gt_chaos_ev_t e = ev[i];
        /* a site cut off from every other one is away too (a long cut: it leaves as the
         * minority and rejoins once the link is back) */
        int away = e.kind == GT_CHAOS_KILL || e.kind == GT_CHAOS_STOP ||
                   (e.kind == GT_CHAOS_CUT && e.peer == GT_CHAOS_ALL_PEERS);
        if (away) {
            uint32_t down = 0;
            for (uint32_t s = 0; s < p->n_sites && s < 256; s++)
                down += s != e.target && busy_until[s] > e.at;
            if (down + 1 > max_down) continue;
            if (e.target < 256)
                busy_until[e.target] =
                    e.kind == GT_CHAOS_STOP ? e.at + 3 : (uint32_t)ceil(e.until) + 2;
        }
        ev[kept++] = e;
    }
    return kept;
}

static const char *kind_name(gt_chaos_kind_t k)
{
    static const char *const names[] = {"kill", "stop", "slow", "etcd-kill", "cut"};
    return names[k];
}

json_t *gt_chaos_json(const gt_chaos_params_t *p, const gt_chaos_ev_t *ev, size_t n,
                      const char *const *names)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) {
        const gt_chaos_ev_t *e = &ev[i];
        json_t *o = json_pack("{s:s,s:i,s:f}", "kind", kind_name(e->kind), "at_round", (int)e->at,
                              "until_round", e->until);
        if (!o) continue;
        if (e->kind == GT_CHAOS_ETCD)
            json_object_set_new(o, "etcd_member", json_integer(e->target));
        else
            json_object_set_new(o, "site", json_string(names[e->target]));
        if (e->kind == GT_CHAOS_STOP) json_object_set_new(o, "stop_s", json_real(e->stop_s));
        if (e->kind == GT_CHAOS_SLOW) json_object_set_new(o, "factor", json_real(e->factor));
        if (e->kind == GT_CHAOS_CUT) {
            json_object_set_new(
                o, "peer", json_string(e->peer == GT_CHAOS_ALL_PEERS ? "all" : names[e->peer]));
            json_object_set_new(o, "from_round", json_real(e->from));
            json_object_set_new(o, "duration_s", json_real(e->duration_s));
        }
        json_array_append_new(arr, o);
    }
    return json_pack("{s:I,s:f,s:f,s:i,s:o}", "seed", (json_int_t)p->seed, "mtbf_rounds",
                     p->mtbf_rounds, "fault_rounds", fault_rounds(p), "rounds", (int)p->rounds,
                     "events", arr);
}

void gt_chaos_print(FILE *out, const gt_chaos_ev_t *ev, size_t n, const char *const *names)
{
    fprintf(out, "  chaos: %zu faults\n", n);
    for (size_t i = 0; i < n; i++) {
        const gt_chaos_ev_t *e = &ev[i];
        switch (e->kind) {
        case GT_CHAOS_KILL:
            fprintf(out, "    round %3u  kill -9 %s, restarted at round %g\n", e->at,
                    names[e->target], e->until);
            break;
        case GT_CHAOS_STOP:
            fprintf(out, "    round %3u  SIGSTOP %s for %.1f s, then SIGCONT\n", e->at,
                    names[e->target], e->stop_s);
            break;
        case GT_CHAOS_SLOW:
            fprintf(out, "    round %3u  %s %.1fx slower until round %g\n", e->at, names[e->target],
                    e->factor, e->until);
            break;
        case GT_CHAOS_ETCD:
            fprintf(out, "    round %3u  kill -9 etcd member %u, restarted at round %g\n", e->at,
                    e->target, e->until);
            break;
        case GT_CHAOS_CUT:
            if (e->peer == GT_CHAOS_ALL_PEERS)
                fprintf(out, "    round %.2f  cut %s off from every other site for %.1f s\n",
                        e->from, names[e->target], e->duration_s);
            else
                fprintf(out, "    round %.2f  cut the link %s-%s for %.1f s\n", e->from,
                        names[e->target], names[e->peer], e->duration_s);
            break;
        }
    }
}

void gt_chaos_slow_windows(const gt_chaos_ev_t *ev, size_t n, uint32_t site, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && o < len; i++)
        if (ev[i].kind == GT_CHAOS_SLOW && ev[i].target == site)
            o += (size_t)snprintf(buf + o, len - o, "%s%.3f@%u-%g", o ? "," : "", ev[i].factor,
                                  ev[i].at, ev[i].until);
}

static double jnum(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : 0.0;
}

/* Where one site's time in the goodput window [t0, t1] went, in seconds, from its process
 * lives (launch's records: docs/diloco.md#where-goodput-goes). */
enum {
    BD_DOWN,
    BD_STARTING,
    BD_STOPPED,
    BD_SLOWED,
    BD_WAITING,
    BD_OVERHEAD,
    BD_AFTER,
    BD_COMPUTE,
    BD_N
};
static const char *const bd_names[BD_N] = {"down",    "starting", "stopped",        "slowed",
                                           "waiting", "overhead", "after_training", "compute"};

static double overlap(double a, double b, double t0, double t1)
{
    double lo = a > t0 ? a : t0, hi = b < t1 ? b : t1;
    return hi > lo ? hi - lo : 0.0;
}

static void site_breakdown(json_t *lives, double t0, double t1, double out[BD_N])
{
    double covered = 0;
    memset(out, 0, BD_N * sizeof *out);
    size_t i;
    json_t *l;
    json_array_foreach(lives, i, l)
    {
        double start = jnum(l, "start_unix"), end = jnum(l, "end_unix");
        double life = overlap(start, end, t0, t1);
        if (!(life > 0)) continue;
        covered += life;
        double ts = jnum(l, "train_start_unix"), te = jnum(l, "train_end_unix");
        if (!(ts > 0)) { /* never trained: it was starting (registering, joining) all along */
            out[BD_STARTING] += life;
            continue;
        }
        double compute = jnum(l, "life_compute_s");
        if (!(te > 0)) { /* killed or stopped while training: it trained until the end */
            te = end;
            double since = jnum(l, "time_unix");
            if (since > 0 && end > since) compute += end - since; /* after its last status */
        }
        out[BD_STARTING] += overlap(start, ts, t0, t1);
        out[BD_AFTER] += overlap(te, end, t0, t1);
        double span = overlap(ts, te, t0, t1);
        double part[4] = {compute, jnum(l, "chaos_slow_s"), jnum(l, "life_wait_s"),
                          jnum(l, "stopped_s")};
        double sum = part[0] + part[1] + part[2] + part[3];
        /* the parts are measured apart and can overrun the span a little (or a span clipped
         * by the window): scaled to fit; what is left is the overhead (outer steps, status and
         * checkpoint writes, catch-up jumps) */
        double scale = sum > span && sum > 0 ? span / sum : 1.0;
        out[BD_COMPUTE] += part[0] * scale;
        out[BD_SLOWED] += part[1] * scale;
        out[BD_WAITING] += part[2] * scale;
        out[BD_STOPPED] += part[3] * scale;
        out[BD_OVERHEAD] += span - sum * scale;
    }
    out[BD_DOWN] = t1 - t0 > covered ? t1 - t0 - covered : 0.0;
}

void gt_chaos_goodput(const char *run_dir, const char *const *names, uint32_t n_sites,
                      uint64_t rounds, json_t *const *lives, double t_first_unix, json_t *summary)
{
    double *tok = calloc(rounds ? rounds : 1, sizeof *tok);
    double speed_sum = 0, t_first = t_first_unix, t_last = 0;
    uint32_t n_speed = 0;
    json_t *speeds = json_object();
    if (!tok || !speeds) goto out;
    for (uint32_t i = 0; i < n_sites; i++) {
        char path[PATH_MAX + 64], line[512];
        snprintf(path, sizeof path, "%s/%s/anchors.jsonl", run_dir, names[i]);
        FILE *f = fopen(path, "r");
        while (f && fgets(line, sizeof line, f)) {
            json_t *o = json_loads(line, 0, NULL);
            json_t *r = json_object_get(o, "round"), *t = json_object_get(o, "tokens");
            /* every site applies the same results, so any site's count of a round serves; the
             * largest guards against a line a killed site left unfinished */
            if (json_is_integer(r) && json_is_number(t) &&
                (uint64_t)json_integer_value(r) < rounds &&
                json_number_value(t) > tok[json_integer_value(r)])
                tok[json_integer_value(r)] = json_number_value(t);
            json_decref(o);
        }
        if (f) fclose(f);
        snprintf(path, sizeof path, "%s/%s/summary.json", run_dir, names[i]);
        json_t *s = json_load_file(path, 0, NULL);
        double start = jnum(s, "train_start_unix"), end = jnum(s, "train_end_unix");
        if (start > 0 && (t_first <= 0 || start < t_first)) t_first = start;
        if (end > t_last) t_last = end;
        /* its speed: over every life launch recorded (a short last life, or one whose steps
         * were paused, says little alone), else its last life's */
        double lt = 0, lc = 0;
        size_t k;
        json_t *l;
        json_array_foreach(lives ? lives[i] : NULL, k, l)
        {
            if (jnum(l, "life_tokens") > 0 && jnum(l, "life_compute_s") > 0) {
                lt += jnum(l, "life_tokens");
                lc += jnum(l, "life_compute_s");
            }
        }
        if (!(lt > 0 && lc > 0)) {
            lt = jnum(s, "life_tokens");
            lc = jnum(s, "life_compute_s");
        }
        if (lt > 0 && lc > 0) {
            json_object_set_new(speeds, names[i], json_real(lt / lc));
            speed_sum += lt / lc;
            n_speed++;
        }
        json_decref(s);
    }
    double in_anchor = 0;
    for (uint64_t r = 0; r < rounds; r++) in_anchor += tok[r];
    double wall = t_last > t_first && t_first > 0 ? t_last - t_first : 0;
    /* a site with no summary (killed, never back) trained at the others' mean speed */
    double possible =
        n_speed ? (speed_sum + (double)(n_sites - n_speed) * speed_sum / n_speed) * wall : 0;
    json_object_set_new(summary, "goodput",
                        possible > 0 ? json_real(in_anchor / possible) : json_null());
    json_object_set_new(summary, "tokens_in_anchor", json_real(in_anchor));
    json_object_set_new(summary, "tokens_possible", json_real(possible));
    json_object_set_new(summary, "goodput_wall_s", json_real(wall));
    /* goodput's breakdown: each site's time over the window, weighted by its speed, as shares
     * of tokens_possible; "compute" less goodput is what was trained and did not reach the
     * anchor (a removed site's round in flight, a killed site's, dropped contributions) */
    if (possible > 0 && lives) {
        double tot[BD_N] = {0}, part[BD_N];
        int any = 0;
        for (uint32_t i = 0; i < n_sites; i++) {
            if (!json_is_array(lives[i])) continue;
            json_t *sv = json_object_get(speeds, names[i]);
            double v = json_is_number(sv) ? json_number_value(sv) : speed_sum / n_speed;
            site_breakdown(lives[i], t_first, t_last, part);
            for (int k = 0; k < BD_N; k++) tot[k] += v * part[k];
            any = 1;
        }
        json_t *bd = any ? json_object() : NULL;
        if (bd) {
            json_object_set_new(bd, "in_anchor", json_real(in_anchor / possible));
            json_object_set_new(bd, "trained_not_in_anchor",
                                json_real((tot[BD_COMPUTE] - in_anchor) / possible));
            for (int k = 0; k < BD_COMPUTE; k++)
                json_object_set_new(bd, bd_names[k], json_real(tot[k] / possible));
            json_object_set_new(summary, "goodput_breakdown", bd);
        }
    }
    json_object_set_new(summary, "tokens_per_s_measured", speeds);
    speeds = NULL;
out:
    json_decref(speeds);
    free(tok);
}

int gt_chaos_cuts_break_majority(const gt_chaos_ev_t *ev, size_t n, uint32_t n_sites, uint64_t down,
                                 double t0_s, double t1_s, double margin_s)
{
    if (n_sites == 0 || n_sites > 64) return 0;
    uint64_t cut[64] = {0}; /* cut[u] bit v: the link u-v is cut in the window */
    for (size_t e = 0; e < n; e++) {
        const gt_chaos_ev_t *c = &ev[e];
        if (c->kind != GT_CHAOS_CUT || c->target >= n_sites) continue;
        if (c->start_s > t1_s + margin_s || c->start_s + c->duration_s + margin_s < t0_s) continue;
        for (uint32_t v = 0; v < n_sites; v++) {
            if (v == c->target || (c->peer != GT_CHAOS_ALL_PEERS && c->peer != v)) continue;
            cut[c->target] |= 1ull << v;
            cut[v] |= 1ull << c->target;
        }
    }
    uint32_t need = n_sites / 2 + 1, training = 0;
    for (uint32_t u = 0; u < n_sites; u++) {
        if (down >> u & 1) continue;
        uint32_t reach = 0;
        for (uint32_t v = 0; v < n_sites; v++)
            reach += !(down >> v & 1) && (v == u || !(cut[u] >> v & 1));
        training += reach >= need;
    }
    return training < need;
}

double gt_chaos_bound(const gt_chaos_ev_t *ev, size_t n, uint32_t n_sites, uint32_t rounds,
                      double round_s)
{
    if (!n_sites || !rounds) return 1.0;
    double lost = 0; /* site-rounds */
    for (size_t i = 0; i < n; i++) {
        const gt_chaos_ev_t *e = &ev[i];
        if (!e->begun_ns) continue; /* never fired, or skipped */
        if (e->kind == GT_CHAOS_KILL)
            lost += (double)(e->until - e->at);
        else if (e->kind == GT_CHAOS_STOP && round_s > 0)
            lost += e->stop_s / round_s;
        else if (e->kind == GT_CHAOS_SLOW && e->factor > 1)
            lost += (double)(e->until - e->at) * (1.0 - 1.0 / e->factor);
    }
    double b = 1.0 - lost / ((double)n_sites * rounds);
    return b < 0 ? 0 : b;
}
