/* owner.c — the owner's side of a round: taking contributions, closing, aggregating.
 *
 * An owner keeps one open aggregation per (round, chunk) it owns, fed by on_delta: duplicates
 * and re-sends are taken once, late contributions fold into the lowest open round (or are
 * passed on to that round's owner), detours are passed on to the owner they were meant for.
 * gt_outer_progress closes what is due by the round policy (policy.c): complete, or a quorum
 * in and the adaptive deadline past. Closing aggregates in sender order, in double, so the
 * result is the same whatever the arrival order, and broadcasts one RESULT per chunk.
 *
 * Everything here runs on the engine's thread, in the caller's call: no timers; the caller
 * asks gt_outer_next_deadline when to call again.
 */
#include "outer_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void outer_free_agg(gt_outer_t *o, agg_t *a)
{
    for (uint32_t i = 0; i < a->n; i++) gt_mem_free(o->mem, a->c[i].x);
    memset(a, 0, sizeof *a);
}

agg_t *outer_find_agg(gt_outer_t *o, uint64_t round, size_t c, int create)
{
    agg_t *free_slot = NULL;
    for (size_t i = 0; i < o->n_aggs; i++) {
        agg_t *a = &o->aggs[i];
        if (a->used && a->round == round && a->chunk == c) return a;
        if (!a->used && !free_slot) free_slot = a;
    }
    if (!create) return NULL;
    if (!free_slot) {
        agg_t *na = realloc(o->aggs, (o->n_aggs + 8) * sizeof *na);
        if (!na) return NULL;
        memset(na + o->n_aggs, 0, 8 * sizeof *na);
        o->aggs = na;
        free_slot = &o->aggs[o->n_aggs];
        o->n_aggs += 8;
    }
    free_slot->used = 1;
    free_slot->closed = 0;
    free_slot->round = round;
    free_slot->chunk = (uint32_t)c;
    free_slot->n = 0;
    free_slot->first_ns = 0;
    free_slot->quorum_ns = 0;
    return free_slot;
}

static int agg_has(const agg_t *a, uint32_t sender)
{
    for (uint32_t i = 0; i < a->n; i++)
        if (a->c[i].sender == sender && !a->c[i].late) return 1;
    return 0;
}

/* The adaptive deadline (gt_outer_policy_deadline) over the live sites' typical lateness, in
 * ns; 0 while fewer than two sites have history (see close_due). */
static uint64_t deadline_ns(const gt_outer_t *o)
{
    double v[GT_OUTER_MAX_SITES];
    size_t n = 0;
    for (uint32_t i = 0; i < o->p.n_sites; i++)
        if (o->live[i] && o->lateness_n[i] > 0) v[n++] = o->lateness[i];
    double lo = (double)((uint64_t)o->p.deadline_min_ms * 1000000ull);
    double hi = (double)((uint64_t)o->p.deadline_max_ms * 1000000ull);
    return (uint64_t)gt_outer_policy_deadline(v, n, o->p.deadline_mad_k, lo, hi);
}

static int cmp_sender(const void *a, const void *b)
{
    const contrib_t *x = a, *y = b;
    if (x->sender != y->sender) return x->sender < y->sender ? -1 : 1;
    return x->late - y->late;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The majority anchor hash among a's on-time contributions (their anchors after round - 1) and
 * its votes; ties go to the lower hash, so every owner picks the same one. */
static void majority_hash(const agg_t *a, uint64_t *best_p, uint32_t *votes_p)
{
    uint64_t best = 0;
    uint32_t best_votes = 0;
    for (uint32_t i = 0; i < a->n; i++) {
        if (a->c[i].late) continue;
        uint32_t votes = 0;
        for (uint32_t k = 0; k < a->n; k++)
            if (!a->c[k].late && a->c[k].hash == a->c[i].hash) votes++;
        if (votes > best_votes || (votes == best_votes && a->c[i].hash < best)) {
            best = a->c[i].hash;
            best_votes = votes;
        }
    }
    *best_p = best;
    *votes_p = best_votes;
}

/* Aggregates and broadcasts the result of `a`, then frees its contributions. */
static void close_agg(gt_outer_t *o, agg_t *a, uint64_t now_ns)
{
    const gt_topo_chunk_t *ch = &o->layout->chunks[a->chunk];
    size_t n = ch->count;
    double norms[GT_OUTER_MAX_SITES], sorted[GT_OUTER_MAX_SITES];
    int ok[GT_OUTER_MAX_SITES];
    uint32_t n_ok = 0;
    qsort(a->c, a->n, sizeof a->c[0], cmp_sender); /* arrival order must not matter */
    if (a->round == o->last_round) o->final_closed[a->chunk] = 1;
    for (uint32_t i = 0; i < a->n; i++) {
        ok[i] = a->c[i].finite; /* taken when it arrived */
        norms[i] = a->c[i].norm;
        if (ok[i])
            sorted[n_ok++] = norms[i];
        else {
            o->st.rejected++;
            GT_WARN("outer: rejected site %u's contribution to round %llu chunk %u: NaN or Inf",
                    a->c[i].sender, (unsigned long long)a->round, a->chunk);
        }
    }
    qsort(sorted, n_ok, sizeof sorted[0], cmp_double);
    double median = n_ok ? sorted[n_ok / 2] : 0, limit = o->p.clip_k * median;
    float *g = o->xbuf;
    memset(g, 0, n * sizeof *g);
    double wsum = 0, tsum = 0;
    uint64_t mask = 0;
    uint32_t folded = 0;
    uint32_t fold_from[GT_OUTER_MAX_SITES], fold_back[GT_OUTER_MAX_SITES];
    double scale[GT_OUTER_MAX_SITES];
    for (uint32_t i = 0; i < a->n; i++) {
        scale[i] = 1.0;
        if (!ok[i]) continue;
        if (o->p.clip_k > 0 && n_ok >= 3 && norms[i] > limit && norms[i] > 0) {
            scale[i] = limit / norms[i];
            o->st.clipped++;
            GT_WARN("outer: clipped site %u's contribution to round %llu chunk %u: norm %.3g > "
                    "%g x median %.3g",
                    a->c[i].sender, (unsigned long long)a->round, a->chunk, norms[i], o->p.clip_k,
                    median);
        }
        wsum += a->c[i].weight;
        tsum += a->c[i].tokens;
        if (a->c[i].late) {
            fold_from[folded] = a->c[i].sender;
            fold_back[folded] = a->c[i].from < a->round ? (uint32_t)(a->round - a->c[i].from) : 0;
            folded++;
            o->st.late++;
        } else {
            mask |= 1ull << a->c[i].sender;
            o->st.on_time++;
        }
    }
    /* g = sum_i w_i * scale_i * x_i / sum_i w_i, summed in sender order, in double: each
     * contribution decoded in turn into g and added to acc (every element's sum takes its
     * terms in the same order as one loop over the senders per element would). */
    gt_status_t st = GT_OK;
    if (wsum > 0) {
        double *acc = o->acc;
        memset(acc, 0, n * sizeof *acc);
        for (uint32_t i = 0; i < a->n && st == GT_OK; i++) {
            if (!ok[i]) continue;
            st = gt_cmp_decode(o->codec, a->c[i].x, a->c[i].xlen, g, n);
            const double ws = a->c[i].weight * scale[i];
            for (size_t k = 0; k < n && st == GT_OK; k++) acc[k] += ws * (double)g[k];
        }
        for (size_t k = 0; k < n; k++) g[k] = (float)(acc[k] / wsum);
    }
    uint64_t best = 0;
    uint32_t best_votes = 0;
    if (a->round > 0) majority_hash(a, &best, &best_votes);
    /* Encode and broadcast. */
    size_t flen = 0, at = RESULT_PRE + (size_t)folded * RESULT_FOLD_BYTES;
    int ef = o->p.codec.error_feedback;
    if (st == GT_OK) /* (a frame checked on arrival that no longer decodes: memory corruption) */
        st = gt_cmp_encode(o->codec, g, n, ef ? o->result_residual + ch->offset : NULL,
                           o->scratch + at, o->scratch_cap - at, &flen);
    a->closed = 1;
    if ((int64_t)a->round > o->closed_upto[a->chunk]) o->closed_upto[a->chunk] = (int64_t)a->round;
    for (uint32_t i = 0; i < a->n; i++) {
        gt_mem_free(o->mem, a->c[i].x);
        a->c[i].x = NULL;
    }
    a->n = 0;
    if (st != GT_OK) {
        GT_ERROR("outer: cannot encode the result of round %llu chunk %u: %s",
                 (unsigned long long)a->round, a->chunk, gt_status_str(st));
        return;
    }
    GT_DEBUG("outer: closed round %llu chunk %u: %u on time (mask %#llx), %u folded late",
             (unsigned long long)a->round, a->chunk, (uint32_t)__builtin_popcountll(mask),
             (unsigned long long)mask, folded);
    uint8_t *b = o->scratch;
    outer_result_pack(b,
                      &(outer_result_t){o->p.site_id, (uint32_t)__builtin_popcountll(mask) + folded,
                                        mask, best, best_votes, folded, wsum, tsum});
    for (uint32_t i = 0; i < folded; i++) outer_result_fold_put(b, i, fold_from[i], fold_back[i]);
    size_t len = at + flen;
    gt_wan_msg_t m = outer_make_msg(o, GT_WAN_MSG_RESULT, a->round, a->chunk);
    uint64_t round = a->round;
    a->used = 0; /* before sending: delivering to ourselves may open new aggregations */
    /* The scratch buffer is reused by deliveries; send a private copy. */
    uint8_t *copy = malloc(len);
    if (!copy) return;
    memcpy(copy, b, len);
    for (uint32_t s = 0; s < o->p.n_sites; s++) {
        if (!outer_receiver(o, s)) continue;
        if (s != o->p.site_id) o->st.results_sent++;
        outer_send_to(o, s, &m, copy, len, now_ns);
    }
    free(copy);
    (void)round;
}

static int agg_complete(const gt_outer_t *o, const agg_t *a)
{
    for (uint32_t s = 0; s < o->p.n_sites; s++)
        if (outer_active(o, s, a->round) && !agg_has(a, s)) return 0;
    return 1;
}

static uint32_t agg_on_time(const agg_t *a)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < a->n; i++) n += !a->c[i].late;
    return n;
}

static uint32_t quorum_count(const gt_outer_t *o, uint64_t round)
{
    return gt_outer_policy_quorum(o->p.quorum, outer_n_active(o, round));
}

/* When `a` may close at the deadline: after the adaptive deadline (dl; 0 = no history yet),
 * but no later than twice the time its quorum took to arrive, within [min, max]. The second
 * bound keeps a site that has become slow only now from holding up rounds until the
 * statistics catch up. */
static uint64_t close_due(const gt_outer_t *o, const agg_t *a, uint64_t dl)
{
    double lo = (double)((uint64_t)o->p.deadline_min_ms * 1000000ull);
    double hi = (double)((uint64_t)o->p.deadline_max_ms * 1000000ull);
    double spread = a->quorum_ns ? (double)(a->quorum_ns - a->first_ns) : -1.0;
    double after = gt_outer_policy_close_after((double)dl, spread, lo, hi);
    return isinf(after) ? UINT64_MAX : a->first_ns + (uint64_t)after;
}

/* Whether an active site missing from `a` is one that usually contributes on time. With
 * `seen`, only a site this engine has heard from: the last round's longer wait is for a
 * punctual site catching up, and a site never heard from (this engine joined or came back
 * after it last contributed) is not known to be one — a joiner that waited for a straggler it
 * had not met yet stalled the run's end for 10 s (docs/diloco.md, goodput). */
static int awaits_punctual(const gt_outer_t *o, const agg_t *a, int seen)
{
    for (uint32_t s = 0; s < o->p.n_sites; s++)
        if (outer_active(o, s, a->round) && !agg_has(a, s) &&
            gt_outer_policy_punctual(o->late_share[s]) && (!seen || o->heard[s]))
            return 1;
    return 0;
}

gt_status_t gt_outer_progress(gt_outer_t *o, uint64_t now_ns)
{
    uint64_t dl = deadline_ns(o);
    for (size_t i = 0; i < o->n_aggs; i++) {
        agg_t *a = &o->aggs[i];
        if (!a->used || a->closed || a->n == 0) continue;
        uint32_t quorum = quorum_count(o, a->round);
        /* A quorum reached by a view change (a site left: fewer must contribute) starts the
         * deadline as one reached by an arrival does. Without it, an engine with no deadline
         * history yet (a joiner's) had no deadline for the chunk at all and waited for every
         * site: in a chaos run a joiner that owned two chunks of its first round, stuck itself
         * before its first submit, held the round — and every site behind it — for good. */
        if (!a->quorum_ns && agg_on_time(a) >= quorum) a->quorum_ns = now_ns;
        /* A round closes only after the previous round of the chunk has closed. */
        if (a->round > 0 && o->closed_upto[a->chunk] < (int64_t)a->round - 1 &&
            outer_find_agg(o, a->round - 1, a->chunk, 0))
            continue;
        /* The run's last round waits longer (4 x deadline_max_ms from its first contribution)
         * for a punctual site it has heard from: its contribution to it, come after a deadline
         * close, could fold nowhere, and its owner may have finished. Bounded all the same: a site
         * that never sends (it died and its lease has not run out yet) cannot hold it forever. A
         * round that lacks only chronic stragglers does not wait for them (see late_share).
         * sync-dp (last round 0: every round is one) waits for every punctual site, heard from
         * or not: a site restarted a moment later than the others must not be left behind. */
        uint64_t normal = close_due(o, a, dl), due = normal;
        int punctual = awaits_punctual(o, a, 0);
        if (!punctual)
            due = now_ns;
        else if (a->round >= o->last_round && due != UINT64_MAX &&
                 awaits_punctual(o, a, o->last_round > 0))
            due = a->first_ns +
                  (uint64_t)GT_OUTER_LAST_ROUND_WAIT * o->p.deadline_max_ms * 1000000ull;
        if (now_ns < o->handover_ns[a->chunk] && a->round < o->handover_upto[a->chunk])
            continue; /* handed over from a site that left: a forward of its result may come */
        /* A joiner's first round: a peer that had not heard of the join yet aggregated this
         * chunk itself (it was its owner then) and forwards its result when it hears (take_join);
         * that result is the one the others apply, so the joiner waits for it a while rather than
         * close a second one. */
        if (o->first[o->p.site_id] > 0 && a->round == o->first[o->p.site_id] && a->first_ns &&
            now_ns < a->first_ns + (uint64_t)o->p.handover_ms * 1000000ull)
            continue;
        if (agg_complete(o, a) || (agg_on_time(a) >= quorum && now_ns >= due)) {
            if (!agg_complete(o, a) && punctual)
                GT_WARN("outer: closing round %llu chunk %u at the deadline with %u of %u sites",
                        (unsigned long long)a->round, a->chunk, agg_on_time(a),
                        outer_n_active(o, a->round));
            else if (!agg_complete(o, a))
                GT_INFO("outer: closing round %llu chunk %u with %u of %u sites: the others are "
                        "stragglers, folded late",
                        (unsigned long long)a->round, a->chunk, agg_on_time(a),
                        outer_n_active(o, a->round));
            o->closed_due[a->chunk] = normal;
            /* Closed at (or past) its deadline: whoever is missing was late for this round. */
            if (punctual)
                for (uint32_t s = 0; s < o->p.n_sites; s++)
                    if (outer_active(o, s, a->round) && !agg_has(a, s))
                        gt_outer_policy_judge(&o->late_share[s], &o->late_judged[s], a->round, 1);
            close_agg(o, a, now_ns);
        }
    }
    outer_pull_missing(o, dl, now_ns);
    return GT_OK;
}

uint64_t gt_outer_next_deadline(const gt_outer_t *o)
{
    uint64_t best = UINT64_MAX, dl = deadline_ns(o);
    for (size_t i = 0; i < o->n_aggs; i++) {
        const agg_t *a = &o->aggs[i];
        if (a->used && !a->closed && a->first_ns && close_due(o, a, dl) < best)
            best = close_due(o, a, dl);
    }
    return best;
}

gt_status_t outer_on_delta(gt_outer_t *o, const gt_wan_msg_t *m, const uint8_t *b, size_t len,
                           size_t c, uint64_t now_ns)
{
    outer_delta_t d;
    if (!outer_delta_unpack(b, len, &d)) return outer_bad(o, m, "not a DELTA payload");
    if (o->finished) { /* its sender counts it, against our FIN */
        GT_DEBUG("outer: finished: site %u's contribution to round %llu chunk %zu not taken",
                 m->sender, (unsigned long long)m->round, c);
        return GT_OK;
    }
    o->took_n[m->sender]++;
    double w = d.weight, tokens = w;
    if (!(w > 0) || !isfinite(w) || d.n_sites != o->p.n_sites)
        return outer_bad(o, m, "bad weight or layout");
    /* Decoded here to check it (and to take its norm, for the clip), into the chunk scratch;
     * kept as its frame, which close_agg decodes again: a quarter of the floats' bytes at int8
     * for every contribution an owner holds open. */
    const gt_topo_chunk_t *ch = &o->layout->chunks[c];
    gt_status_t st = gt_cmp_decode(o->codec, b + DELTA_PRE, len - DELTA_PRE, o->xbuf, ch->count);
    if (st != GT_OK) return outer_bad(o, m, "the codec frame does not decode to this chunk");
    double norm = 0;
    int finite = 1;
    for (size_t k = 0; k < ch->count; k++) {
        float v = o->xbuf[k];
        if (!isfinite(v)) {
            finite = 0;
            break;
        }
        norm += (double)v * v;
    }
    norm = sqrt(norm);
    size_t flen = len - DELTA_PRE;
    uint8_t *x = gt_mem_alloc(o->mem, flen ? flen : 1, 0); /* the frame, kept */
    if (!x) return GT_ERR_NOMEM;
    memcpy(x, b + DELTA_PRE, flen);
    uint64_t round = m->round;
    uint32_t flags = d.flags, sender = m->sender;
    int forwarded = (flags & FLAG_FORWARDED) != 0;
    uint64_t from = m->round; /* the round it was sent for */
    if (forwarded) {
        sender = FLAGS_FROM(flags); /* the site that contributed it, rounds back */
        from = FLAGS_TO(flags) && FLAGS_TO(flags) <= m->round ? m->round - FLAGS_TO(flags)
                                                              : UINT64_MAX;
    }
    if (flags & FLAG_DETOUR) {
        uint32_t to = FLAGS_TO(flags), passed = (flags & FLAG_PASSED) != 0;
        if (forwarded || to >= o->p.n_sites || (passed && to != o->p.site_id) ||
            (!passed && to == o->p.site_id)) {
            gt_mem_free(o->mem, x);
            return outer_bad(o, m, "a detour to an unknown site, or passed on twice");
        }
        if (!passed) { /* pass it on as it came, naming its contributor */
            gt_mem_free(o->mem, x);
            uint8_t *fw = malloc(len);
            if (!fw) return GT_ERR_NOMEM;
            memcpy(fw, b, len);
            outer_delta_set_flags(fw, FLAGS(FLAG_DETOUR | FLAG_PASSED, m->sender, to));
            gt_wan_msg_t fm = outer_make_msg(o, GT_WAN_MSG_DELTA, m->round, c);
            o->st.detours_passed++;
            outer_send_to(o, to, &fm, fw, len, now_ns);
            free(fw);
            return GT_OK;
        }
        sender = FLAGS_FROM(flags); /* taken as if it had come straight from its contributor */
    }
    if (sender >= o->p.n_sites) {
        gt_mem_free(o->mem, x);
        return outer_bad(o, m, "forwarded from an unknown site");
    }
    if (!forwarded && m->round < o->first[o->p.site_id]) {
        /* A round before this engine's first: this site takes no part in it. Sent to its
         * previous life (the chunk's owner then) and re-sent by the mesh to this one, or to
         * this life under a plan a re-plan replaced; either way its sender re-sends it to the
         * round's owner. Folding it here as well counted it twice (bench/chaos.yaml seed
         * 24466328: a restarted site, first round 18, folded a's round-15 contribution, detoured
         * to its previous life, into its round 19, and closed round 15 of a chunk it owned before
         * its kill). One meant for a previous life is not counted as taken: its sender restarted
         * its count of what it sends us at our JOIN. */
        if (m->round < o->first_life) o->took_n[m->sender]--;
        o->st.stale_deltas++;
        GT_DEBUG("outer: site %u's contribution to round %llu chunk %zu is for a round before "
                 "this site's first (%llu): not taken",
                 sender, (unsigned long long)m->round, c,
                 (unsigned long long)o->first[o->p.site_id]);
        gt_mem_free(o->mem, x);
        return GT_OK;
    }
    if (!forwarded) { /* a DELTA already taken: a re-send whose acknowledgement was lost */
        took_t *t = &o->took[c * RESULT_SLOTS + m->round % RESULT_SLOTS];
        if (t->round == m->round && (t->senders >> sender & 1)) {
            o->st.duplicate_deltas++;
            GT_INFO("outer: site %u's contribution to round %llu chunk %zu arrived again (a "
                    "re-send); taken once",
                    sender, (unsigned long long)m->round, c);
            gt_mem_free(o->mem, x);
            return GT_OK;
        }
        if (t->round != m->round) *t = (took_t){m->round, 0};
        t->senders |= 1ull << sender;
    }
    if (m->round == o->last_round && sender < 64) o->final_from[c] |= 1ull << sender;
    if (!forwarded && m->round + 1 > o->seen_round[sender]) o->seen_round[sender] = m->round + 1;
    /* A forwarded contribution is late by construction: its round is the one it folds into. */
    int late = forwarded || (int64_t)round <= o->closed_upto[c];
    if (late) {
        if (!o->p.late_fold) {
            o->st.dropped++;
            GT_INFO("outer: dropped site %u's late contribution to round %llu chunk %zu", sender,
                    (unsigned long long)round, c);
            gt_mem_free(o->mem, x);
            return GT_OK;
        }
        uint64_t target =
            (int64_t)round > o->closed_upto[c] ? round : (uint64_t)(o->closed_upto[c] + 1);
        w /= (double)(1 + (target - round));
        round = target;
        /* The round it folds into belongs to another site (a joiner took the chunk over from
         * that round): pass it on, once, rather than open a second aggregation of the round. */
        uint32_t to = outer_owner_of(o, c, round);
        if (!forwarded && to != o->p.site_id && o->live[to]) {
            uint8_t *fw = malloc(len);
            if (!fw) {
                gt_mem_free(o->mem, x);
                return GT_ERR_NOMEM;
            }
            memcpy(fw, b, len);
            outer_delta_set_weight(fw, w);
            uint64_t back = from < round && round - from <= 0xFFu ? round - from : 0;
            outer_delta_set_flags(fw, FLAGS(FLAG_FORWARDED, sender, back));
            gt_wan_msg_t fm = outer_make_msg(o, GT_WAN_MSG_DELTA, round, c);
            o->st.forwards++;
            outer_send_to(o, to, &fm, fw, len, now_ns);
            free(fw);
            gt_mem_free(o->mem, x);
            return GT_OK;
        }
    }
    agg_t *a = outer_find_agg(o, round, c, 1);
    if (!a) {
        gt_mem_free(o->mem, x);
        return GT_ERR_NOMEM;
    }
    if (!late && agg_has(a, sender)) { /* a re-send of what we have: keep the first */
        gt_mem_free(o->mem, x);
        return GT_OK;
    }
    if (a->n == GT_OUTER_MAX_SITES) {
        gt_mem_free(o->mem, x);
        o->st.dropped++;
        return outer_bad(o, m, "too many contributions to one chunk");
    }
    if (!late && a->first_ns == 0) a->first_ns = now_ns;
    int after_deadline = late && !(!forwarded && (int64_t)m->round == o->closed_upto[c] &&
                                   now_ns <= o->closed_due[c]);
    /* (no further than the run's last round: a faulty peer's round number cannot make this
     * site cut every round short) */
    if (!forwarded && sender != o->p.site_id && m->round + 1 > o->peer_next &&
        m->round <= o->last_round)
        o->peer_next = m->round + 1;
    if (!forwarded) {
        o->heard[sender] = 1;
        gt_outer_policy_judge(&o->late_share[sender], &o->late_judged[sender], m->round,
                              after_deadline);
    }
    if (!late) {
        gt_outer_policy_lateness(&o->lateness[sender], &o->lateness_n[sender],
                                 (double)(now_ns - a->first_ns));
    }
    GT_DEBUG("outer: took site %u's contribution to round %llu chunk %zu (from site %u, flags "
             "%#x, %s round %llu)",
             sender, (unsigned long long)m->round, c, m->sender, flags, late ? "late into" : "in",
             (unsigned long long)round);
    a->c[a->n++] =
        (contrib_t){sender, m->sender, w, tokens, late, from, d.anchor_hash, x, flen, norm, finite};
    if (!a->quorum_ns && agg_on_time(a) >= quorum_count(o, a->round)) a->quorum_ns = now_ns;
    return gt_outer_progress(o, now_ns);
}
