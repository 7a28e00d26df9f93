/* plan_model.c — `geotrain plan`'s round model: a discrete-event simulation of a DiLoCo run
 * under geotrain's own protocol rules (see plan_model.h for the rules, docs/plan.md for the
 * model as a whole and which rule comes from which file).
 *
 * Shape: one event heap ordered by (time, insertion), so every action happens at its own
 * time and every directed link sees its messages in time order (the token bucket depends on
 * it). A site is a small state machine (compute to the next milestone, encode and submit,
 * apply or block on a result); each site's WAN side is one queue of work (decode, sum,
 * encode) that runs beside its training loop, as the WAN thread does. The state is arrays
 * indexed by site, chunk and round, bounded by the simulated window.
 *
 * The round rules themselves (chunk owner, straggler deadline, quorum, close-due, lateness and
 * the once-a-round judge) are outer/'s policy functions (gt_outer.h), called here on the
 * simulated state as the engine calls them on its own: one copy of each rule. What is modelled
 * here is the state they act on and the timing around them.
 */
#include "plan_model.h"

#include "gt_outer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
    EV_RESUME,      /* a: site */
    EV_DELTA,       /* a -> b: a contribution arrives */
    EV_DELTA_DONE,  /* b has decoded it */
    EV_RESULT,      /* a -> b: a result arrives */
    EV_RESULT_DONE, /* b has decoded it */
    EV_CLOSE_DONE,  /* a has summed and encoded a result: send it */
    EV_DUE,         /* a: re-check chunk c's deadlines */
    EV_LEAVE        /* a: finished, leaves the view */
};

typedef struct {
    double t;
    uint64_t seq;
    int type;
    uint32_t a, b;
    size_t c;
    uint64_t q;
} event_t;

enum { PH_COMPUTE, PH_MILESTONE, PH_SUBMIT, PH_APPLIED, PH_BLOCKED, PH_DONE };

typedef struct {
    int phase;
    uint64_t step, target, total;
    int64_t pending, blocked;
    double block_start;
    double compute_s, local_s, wait_s, t_end;
    double bytes;
    /* catch_up: the compute toward `target` began at t0; gen invalidates the EV_RESUME of a
     * milestone a cut replaced; submit_due: a cut round's submit waits for the apply before it */
    double t0, skipped;
    uint64_t gen;
    int submit_due;
    double steady_c0, steady_c1; /* compute_s at the steady window's first and last submit */
} site_t;

typedef struct {
    uint64_t fresh; /* bit per site whose contribution is on time: completeness counts only
                       these (outer/owner.c agg_has), and they are re-sent if the owner leaves */
    uint32_t n, on_time;
    int holder; /* the site aggregating it; -1: none yet */
    int closed;
    double first_t, quorum_t; /* -1: not yet */
} agg_t;

typedef struct {
    const gt_plan_model_t *m;
    uint32_t S;
    size_t C;
    uint64_t Rs, Q; /* rounds simulated; rounds with state (folds can go past Rs) */
    event_t *heap;
    size_t n_ev, cap_ev;
    uint64_t seq;
    site_t site[GT_PLAN_MAX_SITES];
    int alive[GT_PLAN_MAX_SITES];
    uint32_t n_alive;
    double busy[GT_PLAN_MAX_SITES]; /* each site's WAN side is free from this time */
    double drain[GT_PLAN_MAX_SITES][GT_PLAN_MAX_SITES],
        last_arr[GT_PLAN_MAX_SITES][GT_PLAN_MAX_SITES];
    double lateness[GT_PLAN_MAX_SITES]
                   [GT_PLAN_MAX_SITES]; /* [owner][sender]: gt_outer_policy_lateness */
    uint32_t lateness_n[GT_PLAN_MAX_SITES][GT_PLAN_MAX_SITES];
    /* gt_outer_policy_judge's late_share / late_judged: [owner][sender] */
    double late_share[GT_PLAN_MAX_SITES][GT_PLAN_MAX_SITES];
    uint64_t late_judged[GT_PLAN_MAX_SITES][GT_PLAN_MAX_SITES];
    uint8_t heard[GT_PLAN_MAX_SITES][GT_PLAN_MAX_SITES]; /* the engine's heard: [owner][sender] */
    agg_t *agg;                                          /* [c * Q + q] */
    uint64_t *agg_top;    /* per chunk: highest round with an aggregation + 1 */
    int64_t *closed_upto; /* [s * C + c] */
    double *closed_due;   /* [s * C + c]: the engine's closed_due */
    uint8_t *have;        /* [(s * Q + q) * C + c]: result decoded at s */
    uint32_t *have_n;     /* [s * Q + q] */
    double *ready;        /* [s * Q + q]: every chunk of round q decoded at s; -1 not yet */
    uint8_t *applied;     /* [s * Q + q] */
    double *sub_t;        /* [s * Rs + r]: when s submitted round r */
    uint64_t mid;         /* first round of the steady window [mid, Rs - 1) */
    double steady_bytes, steady_link[GT_PLAN_MAX_SITES][GT_PLAN_MAX_SITES];
    double steady_site[GT_PLAN_MAX_SITES];
    double on_time, late;
    double acks, steady_acks;              /* acknowledgement bytes, whole window and steady part */
    uint64_t peer_next[GT_PLAN_MAX_SITES]; /* the engine's peer_next, per site (catch_up) */
    gt_plan_result_t *res;
} sim_t;

/* ---- the event heap ---- */

static int ev_less(const event_t *x, const event_t *y)
{
    return x->t < y->t || (x->t == y->t && x->seq < y->seq);
}

static int push(sim_t *s, double t, int type, uint32_t a, uint32_t b, size_t c, uint64_t q)
{
    if (s->n_ev == s->cap_ev) {
        size_t cap = s->cap_ev ? 2 * s->cap_ev : 1024;
        event_t *h = realloc(s->heap, cap * sizeof *h);
        if (!h) return -1;
        s->heap = h;
        s->cap_ev = cap;
    }
    event_t e = {t, s->seq++, type, a, b, c, q};
    size_t i = s->n_ev++;
    while (i > 0 && ev_less(&e, &s->heap[(i - 1) / 2])) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = e;
    return 0;
}

static event_t pop(sim_t *s)
{
    event_t top = s->heap[0], last = s->heap[--s->n_ev];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, k = i;
        const event_t *best = &last;
        if (l < s->n_ev && ev_less(&s->heap[l], best)) k = l, best = &s->heap[l];
        if (r < s->n_ev && ev_less(&s->heap[r], best)) k = r;
        if (k == i) break;
        s->heap[i] = s->heap[k];
        i = k;
    }
    if (s->n_ev) s->heap[i] = last;
    return top;
}

/* ---- links ---- */

/* Sends `bytes` of payload from a to b at time t (about round q); returns the arrival time.
 * The emulator's model (wan/emu/emu.c): bucket drain E += wire bytes / rate; the message has left
 * at max(t, E - burst / rate); it arrives one latency later, never before the link's previous
 * message. */
static double link_send(sim_t *s, uint32_t a, uint32_t b, double bytes, double t, uint64_t q)
{
    const gt_plan_model_t *m = s->m;
    s->site[a].bytes += bytes;
    s->res->link_bytes[a][b] += bytes;
    if (q >= s->mid && q + 1 < s->Rs) {
        s->steady_bytes += bytes;
        s->steady_link[a][b] += bytes;
        s->steady_site[a] += bytes;
    }
    if (m->ack_bytes > 0) { /* b acknowledges it (a small message; no link time modelled) */
        s->site[b].bytes += m->ack_bytes;
        s->res->link_bytes[b][a] += m->ack_bytes;
        s->acks += m->ack_bytes;
        if (q >= s->mid && q + 1 < s->Rs) {
            s->steady_bytes += m->ack_bytes;
            s->steady_link[b][a] += m->ack_bytes;
            s->steady_site[b] += m->ack_bytes;
            s->steady_acks += m->ack_bytes;
        }
    }
    const gt_plan_link_t *l = &m->links[a][b];
    double tx_end = t;
    if (l->rate_Bps > 0) {
        double frames = ceil(fmax(1.0, bytes) / m->frame_bytes);
        double wire = bytes + frames * m->frame_overhead;
        s->drain[a][b] = fmax(s->drain[a][b], t) + wire / l->rate_Bps;
        tx_end = fmax(t, s->drain[a][b] - l->burst_bytes / l->rate_Bps);
    }
    double at = tx_end + l->latency_s + m->hop_s;
    if (at < s->last_arr[a][b]) at = s->last_arr[a][b];
    s->last_arr[a][b] = at;
    return at;
}

/* ---- owners ---- */

/* The live sites as a mask, for the policy functions (S <= GT_PLAN_MAX_SITES = 64). */
static uint64_t alive_mask(const sim_t *s)
{
    uint64_t mask = 0;
    for (uint32_t i = 0; i < s->S; i++) mask |= (uint64_t)(s->alive[i] != 0) << i;
    return mask;
}

/* gt_outer_policy_owner: the preferred site, else the next live one. (The model has no joins,
 * so the sites taking part are the live ones.) */
static uint32_t owner_of(const sim_t *s, size_t c)
{
    return gt_outer_policy_owner(s->m->chunks[c].owner, s->S, alive_mask(s), 0);
}

static uint32_t quorum_count(const sim_t *s)
{
    return gt_outer_policy_quorum(s->m->quorum, s->n_alive);
}

/* gt_outer_policy_deadline over owner o's view of the live senders' lateness (seconds). */
static double deadline(const sim_t *s, uint32_t o)
{
    double v[GT_PLAN_MAX_SITES];
    size_t n = 0;
    for (uint32_t i = 0; i < s->S; i++)
        if (s->alive[i] && s->lateness_n[o][i] > 0) v[n++] = s->lateness[o][i];
    return gt_outer_policy_deadline(v, n, s->m->deadline_mad_k, s->m->deadline_min_s,
                                    s->m->deadline_max_s);
}

/* When owner o may close `a` at its deadline (gt_outer_policy_close_after); INFINITY: not
 * before it is complete. */
static double close_due(const sim_t *s, uint32_t o, const agg_t *a)
{
    double spread = a->quorum_t >= 0 ? a->quorum_t - a->first_t : -1.0;
    return a->first_t + gt_outer_policy_close_after(deadline(s, o), spread, s->m->deadline_min_s,
                                                    s->m->deadline_max_s);
}

static int complete(const sim_t *s, const agg_t *a)
{
    for (uint32_t i = 0; i < s->S; i++)
        if (s->alive[i] && !((a->fresh >> i) & 1)) return 0;
    return 1;
}

static int close_agg(sim_t *s, uint32_t o, size_t c, uint64_t q, double t)
{
    agg_t *a = &s->agg[c * s->Q + q];
    const gt_plan_site_t *ps = &s->m->sites[o];
    double bytes = 4.0 * (double)s->m->chunks[c].count;
    a->closed = 1;
    if ((int64_t)q > s->closed_upto[o * s->C + c]) s->closed_upto[o * s->C + c] = (int64_t)q;
    s->on_time += a->on_time;
    s->late += a->n - a->on_time;
    double start = fmax(t, s->busy[o]);
    double cost = (ps->agg_Bps > 0 ? bytes * a->n / ps->agg_Bps : 0) +
                  (ps->enc_Bps > 0 ? bytes / ps->enc_Bps : 0);
    s->busy[o] = start + cost;
    return push(s, s->busy[o], EV_CLOSE_DONE, o, o, c, q);
}

/* Round q in owner o's share of sender i's late rounds, once a round (gt_outer_policy_judge). */
static void judge_round(sim_t *s, uint32_t o, uint32_t i, uint64_t q, int late)
{
    gt_outer_policy_judge(&s->late_share[o][i], &s->late_judged[o][i], q, late);
}

/* gt_outer_progress (outer/owner.c) for one chunk at owner o. */
static int progress(sim_t *s, uint32_t o, size_t c, double t)
{
    for (uint64_t q = (uint64_t)(s->closed_upto[o * s->C + c] + 1); q < s->agg_top[c]; q++) {
        agg_t *a = &s->agg[c * s->Q + q];
        if (a->n == 0 || a->closed || a->holder != (int)o) continue;
        if (q > 0 && s->closed_upto[o * s->C + c] < (int64_t)q - 1) {
            const agg_t *p = &s->agg[c * s->Q + q - 1];
            if (p->n > 0 && !p->closed && p->holder == (int)o) continue;
        }
        /* outer/owner.c: a round missing only chronic stragglers closes once its quorum is in;
         * the run's last round waits GT_OUTER_LAST_ROUND_WAIT x deadline_max for a punctual
         * site the owner has heard from */
        int quorate = a->on_time >= quorum_count(s);
        double normal = quorate ? close_due(s, o, a) : INFINITY, due = normal;
        int punctual = 0, seen = 0;
        for (uint32_t i = 0; i < s->S; i++)
            if (s->alive[i] && !((a->fresh >> i) & 1) &&
                gt_outer_policy_punctual(s->late_share[o][i])) {
                punctual = 1;
                seen |= s->heard[o][i];
            }
        if (!punctual && quorate)
            due = t;
        else if (q + 1 == s->m->rounds && isfinite(due) && seen)
            due = a->first_t + GT_OUTER_LAST_ROUND_WAIT * s->m->deadline_max_s;
        if (complete(s, a) || t >= due) {
            s->closed_due[o * s->C + c] = normal;
            if (punctual) /* closed at its deadline: the missing sites were late */
                for (uint32_t i = 0; i < s->S; i++)
                    if (s->alive[i] && !((a->fresh >> i) & 1)) judge_round(s, o, i, q, 1);
            if (close_agg(s, o, c, q, t) != 0) return -1;
        } else if (isfinite(due) && push(s, due, EV_DUE, o, o, c, q) != 0) {
            return -1;
        }
    }
    return 0;
}

/* outer_on_delta (outer/owner.c) at owner o, after decoding, at time t. */
static int maybe_cut(sim_t *s, uint32_t i, double t);

static int on_delta(sim_t *s, uint32_t from, uint32_t o, size_t c, uint64_t q, double t)
{
    if (!s->alive[o]) return 0; /* sent to a site that has left: re-sent on the view change */
    if (from != o && q + 1 > s->peer_next[o]) { /* the engine's peer_next (catch_up's signal) */
        s->peer_next[o] = q + 1;
        if (maybe_cut(s, o, t) != 0) return -1;
    }
    int64_t done = s->closed_upto[o * s->C + c];
    int late = (int64_t)q <= done;
    int after_deadline = late && !((int64_t)q == done && t <= s->closed_due[o * s->C + c]);
    s->heard[o][from] = 1;
    judge_round(s, o, from, q, after_deadline);
    if (late) {
        if (!s->m->late_fold) return 0;
        q = (uint64_t)(done + 1);
    }
    if (q >= s->Q) return 0; /* folded past the window: open at the end */
    agg_t *a = &s->agg[c * s->Q + q];
    if (a->holder < 0) a->holder = (int)o;
    if (!late && ((a->fresh >> from) & 1)) return 0; /* a re-send: keep the first */
    a->n++;
    if (!late) {
        a->on_time++;
        a->fresh |= 1ull << from;
        if (a->first_t < 0) a->first_t = t;
        gt_outer_policy_lateness(&s->lateness[o][from], &s->lateness_n[o][from], t - a->first_t);
        if (a->quorum_t < 0 && a->on_time >= quorum_count(s)) a->quorum_t = t;
    }
    if (q + 1 > s->agg_top[c]) s->agg_top[c] = q + 1;
    return progress(s, o, c, t);
}

/* ---- sites ---- */

static int site_step(sim_t *s, uint32_t i, double t);

/* The site's next step of its state machine at time t (a cut bumps gen: older ones are void). */
static int resume(sim_t *s, uint32_t i, double t)
{
    return push(s, t, EV_RESUME, i, i, 0, s->site[i].gen);
}

/* Compute seconds of steps [0, k): the replayed trace where it reaches, t_step past it. */
static double compute_upto(const gt_plan_site_t *ps, uint64_t k)
{
    double x = (double)k;
    if (ps->trace_n == 0 || x <= 0) return x * ps->t_step;
    const double *S = ps->trace_step, *C = ps->trace_compute;
    size_t n = ps->trace_n;
    if (x <= S[0]) return S[0] > 0 ? C[0] * x / S[0] : x * ps->t_step;
    if (x >= S[n - 1]) return C[n - 1] + (x - S[n - 1]) * ps->t_step;
    size_t lo = 0, hi = n - 1; /* S[lo] < x <= S[hi] */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (S[mid] < x)
            lo = mid;
        else
            hi = mid;
    }
    return C[lo] + (C[hi] - C[lo]) * (x - S[lo]) / (S[hi] - S[lo]);
}

static int send_deltas(sim_t *s, uint32_t i, uint64_t r, double t)
{
    for (size_t c = 0; c < s->C; c++) {
        uint32_t o = owner_of(s, c);
        double at = o == i ? t : link_send(s, i, o, s->m->chunks[c].delta_bytes, t, r);
        if (push(s, at, EV_DELTA, i, o, c, r) != 0) return -1;
    }
    return 0;
}

/* Applies round q at time t if its result is in, else blocks. */
static int try_apply(sim_t *s, uint32_t i, uint64_t q, double t)
{
    site_t *st = &s->site[i];
    double r = s->ready[i * s->Q + q];
    if (r >= 0 && r <= t) {
        const gt_plan_site_t *ps = &s->m->sites[i];
        st->local_s += ps->t_apply;
        s->applied[i * s->Q + q] = 1;
        st->pending = -1;
        st->phase = PH_APPLIED;
        return resume(s, i, t + ps->t_apply);
    }
    st->phase = PH_BLOCKED;
    st->blocked = (int64_t)q;
    st->block_start = t;
    return 0;
}

/* diloco.c catch_up: site i, computing toward its milestone, ends its round at the first step
 * boundary after t when a peer has submitted that round or a later one (peer_next) and more
 * than τ/2 of its steps are left (any, with τ = 0, or a whole round behind): the compute stops
 * there, the steps to the round's end are skipped, and the submit follows (after the apply of
 * the previous round when its τ-th step had not come yet). Checkpoints are not modelled. */
static int maybe_cut(sim_t *s, uint32_t i, double t)
{
    site_t *st = &s->site[i];
    const gt_plan_site_t *ps = &s->m->sites[i];
    const uint64_t H = s->m->H, tau = s->m->tau;
    if (!s->m->catch_up || st->phase != PH_MILESTONE) return 0;
    double base = compute_upto(ps, st->step), el = t - st->t0;
    uint64_t lo = st->step + 1, hi = st->target; /* the first x with compute(x) >= el */
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (compute_upto(ps, mid) - base >= el)
            hi = mid;
        else
            lo = mid + 1;
    }
    uint64_t x = lo;
    /* past the milestone, or the round's end anyway: nothing to cut (at an apply milestone
     * itself diloco.c cuts: the apply then comes with the submit) */
    if (x > st->target || x % H == 0) return 0;
    uint64_t r = x / H, left = (r + 1) * H - x, seen = s->peer_next[i], slack = tau / 2;
    double fit = ps->t_step > 0 ? s->m->deadline_min_s / 2 / ps->t_step : (double)slack;
    if (fit < (double)slack) slack = (uint64_t)fit; /* half the deadline floor, in steps */
    if (!(seen > r + 1 || (seen == r + 1 && (tau == 0 || left > slack)))) return 0;
    double t_cut = st->t0 + (compute_upto(ps, x) - base);
    st->compute_s -= compute_upto(ps, st->target) - compute_upto(ps, x);
    st->skipped += (double)((r + 1) * H - x);
    st->target = (r + 1) * H;
    st->gen++;
    return resume(s, i, t_cut);
}

static int site_step(sim_t *s, uint32_t i, double t)
{
    site_t *st = &s->site[i];
    const gt_plan_site_t *ps = &s->m->sites[i];
    const uint64_t H = s->m->H, tau = s->m->tau;
    switch (st->phase) {
    case PH_BLOCKED: {
        uint64_t q = (uint64_t)st->blocked;
        if (s->ready[i * s->Q + q] < 0) return 0; /* not for us yet */
        st->wait_s += t - st->block_start;
        st->blocked = -1;
        return try_apply(s, i, q, t);
    }
    case PH_APPLIED:
    case PH_COMPUTE: {
        if (st->submit_due) { /* a round cut short: its submit, after the apply it waited for */
            st->submit_due = 0;
            st->local_s += ps->t_enc;
            st->phase = PH_SUBMIT;
            return resume(s, i, t + ps->t_enc);
        }
        if (st->step >= st->total) {
            st->phase = PH_DONE;
            st->t_end = t;
            return push(s, t, EV_LEAVE, i, i, 0, 0);
        }
        uint64_t m = (st->step / H + 1) * H;
        if (st->pending >= 0) {
            uint64_t ma = ((uint64_t)st->pending + 1) * H + tau;
            if (ma < m) m = ma;
        }
        double dt = compute_upto(ps, m) - compute_upto(ps, st->step);
        st->compute_s += dt;
        st->target = m;
        st->t0 = t;
        st->phase = PH_MILESTONE;
        if (resume(s, i, t + dt) != 0) return -1;
        return maybe_cut(s, i, t); /* a peer may be ahead already */
    }
    case PH_MILESTONE:
        st->step = st->target;
        if (st->step % H == 0 && st->pending >= 0 && (uint64_t)st->pending + 1 < st->step / H) {
            /* a cut round ended before its τ-th step: the last round first (diloco.c) */
            st->submit_due = 1;
            return try_apply(s, i, (uint64_t)st->pending, t);
        }
        if (st->step % H == 0) {
            st->local_s += ps->t_enc;
            st->phase = PH_SUBMIT;
            return resume(s, i, t + ps->t_enc);
        }
        return try_apply(s, i, (uint64_t)st->pending, t);
    case PH_SUBMIT: {
        uint64_t r = st->step / H - 1;
        if (r < s->Rs) s->sub_t[i * s->Rs + r] = t;
        if (r == s->mid) st->steady_c0 = st->compute_s;
        if (s->Rs >= 2 && r == s->Rs - 2) st->steady_c1 = st->compute_s;
        if (send_deltas(s, i, r, t) != 0) return -1;
        st->pending = (int64_t)r;
        if (tau == 0 || st->step == st->total) return try_apply(s, i, r, t);
        st->phase = PH_COMPUTE;
        return site_step(s, i, t);
    }
    default: return 0;
    }
}

/* A finished site leaves: its open aggregations are lost, the senders re-send what they
 * contributed to the chunks' new owners (outer/views.c resend_moved), and every owner re-checks
 * its rounds against the smaller view. */
static int on_leave(sim_t *s, uint32_t d, double t)
{
    s->alive[d] = 0;
    s->n_alive--;
    for (size_t c = 0; c < s->C; c++) {
        for (uint64_t q = 0; q < s->agg_top[c]; q++) {
            agg_t *a = &s->agg[c * s->Q + q];
            if (a->holder != (int)d || a->closed || a->n == 0) continue;
            uint64_t senders = a->fresh; /* folded ones were for rounds already closed */
            memset(a, 0, sizeof *a);
            a->holder = -1;
            a->first_t = a->quorum_t = -1;
            uint32_t o = owner_of(s, c);
            for (uint32_t i = 0; i < s->S; i++) {
                if (!s->alive[i] || !((senders >> i) & 1) || q >= s->Rs) continue;
                if (s->have[(i * s->Q + q) * s->C + c]) continue;
                double at = o == i ? t : link_send(s, i, o, s->m->chunks[c].delta_bytes, t, q);
                if (push(s, at, EV_DELTA, i, o, c, q) != 0) return -1;
            }
        }
    }
    for (size_t c = 0; c < s->C; c++)
        if (s->n_alive && progress(s, owner_of(s, c), c, t) != 0) return -1;
    return 0;
}

static int handle(sim_t *s, const event_t *e)
{
    const gt_plan_model_t *m = s->m;
    double t = e->t, bytes = 4.0 * (double)(e->c < s->C ? m->chunks[e->c].count : 0);
    switch (e->type) {
    case EV_RESUME: return e->q == s->site[e->a].gen ? site_step(s, e->a, t) : 0;
    case EV_DELTA:
    case EV_RESULT: {
        if (!s->alive[e->b]) return 0;
        double rate = m->sites[e->b].dec_Bps;
        s->busy[e->b] = fmax(t, s->busy[e->b]) + (rate > 0 ? bytes / rate : 0);
        return push(s, s->busy[e->b], e->type == EV_DELTA ? EV_DELTA_DONE : EV_RESULT_DONE, e->a,
                    e->b, e->c, e->q);
    }
    case EV_DELTA_DONE: return on_delta(s, e->a, e->b, e->c, e->q, t);
    case EV_RESULT_DONE: {
        uint32_t x = e->b;
        if (!s->alive[x] || e->q >= s->Q || s->applied[x * s->Q + e->q]) return 0;
        uint8_t *h = &s->have[(x * s->Q + e->q) * s->C + e->c];
        if (*h) return 0;
        *h = 1;
        if ((int64_t)e->q > s->closed_upto[x * s->C + e->c])
            s->closed_upto[x * s->C + e->c] = (int64_t)e->q;
        if (e->q + 1 > s->peer_next[x]) { /* the round closed: catch_up's signal too */
            s->peer_next[x] = e->q + 1;
            if (maybe_cut(s, x, t) != 0) return -1;
        }
        if (++s->have_n[x * s->Q + e->q] == s->C) {
            s->ready[x * s->Q + e->q] = t;
            if (s->site[x].phase == PH_BLOCKED && s->site[x].blocked == (int64_t)e->q)
                return resume(s, x, t);
        }
        return 0;
    }
    case EV_CLOSE_DONE:
        for (uint32_t x = 0; x < s->S; x++) {
            if (!s->alive[x]) continue;
            double at =
                x == e->a ? t : link_send(s, e->a, x, m->chunks[e->c].result_bytes, t, e->q);
            if (push(s, at, EV_RESULT, e->a, x, e->c, e->q) != 0) return -1;
        }
        return 0;
    case EV_DUE: return s->alive[e->a] ? progress(s, e->a, e->c, t) : 0;
    case EV_LEAVE: return on_leave(s, e->a, t);
    default: return -1;
    }
}

/* Time between submits over the window's second half (the steady state). */
static double period(const sim_t *s, uint32_t i)
{
    uint64_t a = s->mid, b = s->Rs >= 2 ? s->Rs - 2 : 0;
    if (b <= a) return NAN;
    return (s->sub_t[i * s->Rs + b] - s->sub_t[i * s->Rs + a]) / (double)(b - a);
}

int gt_plan_simulate(const gt_plan_model_t *m, gt_plan_result_t *res_p)
{
    if (!m || !res_p || m->n_sites == 0 || m->n_sites > GT_PLAN_MAX_SITES || m->n_chunks == 0 ||
        m->H == 0 || m->tau >= m->H || m->rounds == 0 || m->frame_bytes <= 0)
        return -1;
    sim_t *s = calloc(1, sizeof *s);
    gt_plan_result_t *res = calloc(1, sizeof *res);
    int rc = -1;
    if (!s || !res) goto out;
    s->m = m;
    s->res = res;
    s->S = m->n_sites;
    s->C = m->n_chunks;
    s->Rs = m->rounds < m->window || m->window == 0 ? m->rounds : m->window;
    s->Q = s->Rs + 32;
    s->mid = s->Rs / 2;
    size_t SQ = (size_t)s->S * s->Q;
    s->agg = calloc(s->C * s->Q, sizeof *s->agg);
    s->agg_top = calloc(s->C, sizeof *s->agg_top);
    s->closed_upto = malloc(s->S * s->C * sizeof *s->closed_upto);
    s->closed_due = calloc(s->S * s->C, sizeof *s->closed_due);
    s->have = calloc(SQ * s->C, 1);
    s->have_n = calloc(SQ, sizeof *s->have_n);
    s->ready = malloc(SQ * sizeof *s->ready);
    s->applied = calloc(SQ, 1);
    s->sub_t = calloc((size_t)s->S * s->Rs, sizeof *s->sub_t);
    if (!s->agg || !s->agg_top || !s->closed_upto || !s->closed_due || !s->have || !s->have_n ||
        !s->ready || !s->applied || !s->sub_t)
        goto out;
    for (size_t i = 0; i < s->C * s->Q; i++) {
        s->agg[i].holder = -1;
        s->agg[i].first_t = s->agg[i].quorum_t = -1;
    }
    for (size_t i = 0; i < s->S * s->C; i++) s->closed_upto[i] = -1;
    for (size_t i = 0; i < SQ; i++) s->ready[i] = -1;
    s->n_alive = s->S;
    for (uint32_t i = 0; i < s->S; i++) {
        s->alive[i] = 1;
        /* The start check (diloco/state.c): one hello to every peer before the first step. */
        double hello = (m->hello_bytes + m->ack_bytes) * (s->S - 1);
        s->site[i] = (site_t){.phase = PH_COMPUTE,
                              .total = s->Rs * m->H,
                              .pending = -1,
                              .blocked = -1,
                              .bytes = hello};
        for (uint32_t b = 0; b < s->S; b++)
            if (b != i) res->link_bytes[i][b] += m->hello_bytes + m->ack_bytes;
        if (resume(s, i, 0.0) != 0) goto out;
    }
    while (s->n_ev) {
        event_t e = pop(s);
        if (handle(s, &e) != 0) goto out;
    }
    for (uint32_t i = 0; i < s->S; i++)
        if (s->site[i].phase != PH_DONE) goto out; /* a site never got a result: inconsistent */

    /* The window as simulated, then the rounds past it at the steady state. */
    double extra = (double)(m->rounds - s->Rs);
    double steady_rounds = s->Rs >= 2 && s->Rs - 1 > s->mid ? (double)(s->Rs - 1 - s->mid) : 0;
    res->rounds_simulated = s->Rs;
    res->utilization_min = 1;
    res->round_period_s = INFINITY;
    for (uint32_t i = 0; i < s->S; i++) {
        const site_t *st = &s->site[i];
        const gt_plan_site_t *ps = &m->sites[i];
        gt_plan_site_result_t *r = &res->sites[i];
        double p = period(s, i);
        r->compute_s = st->compute_s;
        r->local_s = st->local_s;
        r->wait_s = st->wait_s;
        r->bytes_sent = st->bytes;
        r->steps_skipped = st->skipped * (double)m->rounds / (double)s->Rs;
        if (extra > 0 && isfinite(p)) {
            /* compute per round: H steps, or with catch_up what the steady window measured */
            double per = (double)m->H * ps->t_step;
            if (m->catch_up && s->Rs >= 2 && s->Rs - 2 > s->mid)
                per = (st->steady_c1 - st->steady_c0) / (double)(s->Rs - 2 - s->mid);
            double round_work = per + ps->t_enc + ps->t_apply;
            r->compute_s += extra * per;
            r->local_s += extra * (ps->t_enc + ps->t_apply);
            r->wait_s += extra * fmax(0.0, p - round_work);
            if (steady_rounds > 0) r->bytes_sent += extra * s->steady_site[i] / steady_rounds;
        }
        r->train_s = r->compute_s + r->local_s + r->wait_s;
        r->utilization = r->train_s > 0 ? r->compute_s / r->train_s : 0;
        res->utilization_mean += r->utilization / s->S;
        if (r->utilization < res->utilization_min) res->utilization_min = r->utilization;
        if (r->train_s > res->wall_s) res->wall_s = r->train_s;
        res->bytes_total += r->bytes_sent;
        if (isfinite(p) && p < res->round_period_s) res->round_period_s = p;
    }
    if (!isfinite(res->round_period_s)) res->round_period_s = res->wall_s / (double)m->rounds;
    for (uint32_t a = 0; a < s->S; a++) {
        for (uint32_t b = 0; b < s->S; b++) {
            if (extra > 0 && steady_rounds > 0)
                res->link_bytes[a][b] += extra * s->steady_link[a][b] / steady_rounds;
            double per_round = steady_rounds > 0 ? s->steady_link[a][b] / steady_rounds
                                                 : res->link_bytes[a][b] / (double)m->rounds;
            if (per_round > res->max_link_round_bytes) res->max_link_round_bytes = per_round;
        }
    }
    double per_round_contrib = s->Rs ? (s->on_time + s->late) / (double)s->Rs : 0;
    res->on_time = s->on_time + (extra > 0 ? extra * per_round_contrib : 0);
    res->ack_bytes_total =
        s->acks + m->ack_bytes * s->S * (s->S - 1) /* the hellos' */ +
        (extra > 0 && steady_rounds > 0 ? extra * s->steady_acks / steady_rounds : 0);
    /* The liveness watch: a probe and its answer each way between every two sites once a
     * period, from the first period to the last of the training time (the process runs a little
     * longer: the start check, the end). */
    if (m->live_period_s > 0) {
        double beats = floor(res->wall_s / m->live_period_s) + 1.0;
        /* a sends b a probe and b's probe's answer, and acknowledges b's two messages */
        double pair = m->live_probe_bytes + m->live_answer_bytes + 2.0 * m->ack_bytes;
        res->live_bytes_per_period = pair * s->S * (s->S - 1);
        for (uint32_t a = 0; a < s->S; a++) {
            res->sites[a].bytes_sent += beats * pair * (s->S - 1);
            res->bytes_total += beats * pair * (s->S - 1);
            for (uint32_t b = 0; b < s->S; b++)
                if (b != a) res->link_bytes[a][b] += beats * pair;
        }
        res->ack_bytes_total += beats * 2.0 * m->ack_bytes * s->S * (s->S - 1);
    }
    res->late = s->late;
    *res_p = *res;
    rc = 0;
out:
    if (s) {
        free(s->heap);
        free(s->agg);
        free(s->agg_top);
        free(s->closed_upto);
        free(s->closed_due);
        free(s->have);
        free(s->have_n);
        free(s->ready);
        free(s->applied);
        free(s->sub_t);
    }
    free(s);
    free(res);
    return rc;
}
