/* site.c — every site's side of a round: its contributions out, the results in.
 *
 * A site sends each chunk of its pseudo-gradient to the chunk's owner (through a peer when the
 * owner is unreachable), keeps the frames until the round is applied (for re-sends when an
 * owner changes), and assembles the round's result from the owners' RESULT chunks: each
 * decoded once on arrival, kept as received so it can be relayed byte for byte (to a peer
 * whose link to the owner is cut, or for an owner that left), and checked against this site's
 * anchor hash (the owners' majority vote). The result slots are a ring of RESULT_SLOTS rounds:
 * how far a slow site may lag.
 */
#include "outer_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sends our contribution frame (len bytes, flags word 0) for chunk c of `round` to its owner,
 * or — when the io says the owner is unreachable and a peer that is not is in the view —
 * through that peer, flagged FLAG_DETOUR (the lowest such site, so every sender picks the same
 * one). The frame is sent once either way: never both, so it is counted once wherever it ends. */
void outer_send_contribution(gt_outer_t *o, uint32_t owner, const gt_wan_msg_t *m,
                             const uint8_t *frame, size_t len, uint64_t now_ns)
{
    uint32_t via = owner;
    if (owner != o->p.site_id && o->p.io.reachable && !o->p.io.reachable(o->p.io.ctx, owner))
        for (uint32_t s = 0; s < o->p.n_sites && s < GT_OUTER_MAX_SITES; s++)
            if (s != o->p.site_id && s != owner && outer_receiver(o, s) &&
                o->p.io.reachable(o->p.io.ctx, s)) {
                via = s;
                break;
            }
    uint8_t *copy = via != owner ? malloc(len) : NULL;
    if (!copy) {
        outer_send_to(o, owner, m, frame, len, now_ns);
        return;
    }
    memcpy(copy, frame, len);
    outer_delta_set_flags(copy, FLAGS(FLAG_DETOUR, 0, owner));
    o->st.detours++;
    GT_DEBUG("outer: round %llu: site %u unreachable; contribution sent through site %u",
             (unsigned long long)m->round, owner, via);
    outer_send_to(o, via, m, copy, len, now_ns);
    free(copy);
}

static send_slot_t *send_slot(gt_outer_t *o, uint64_t round)
{
    send_slot_t *s = &o->send[round % GT_OUTER_SLOTS];
    return s->used && s->round == round ? s : NULL;
}

/* Gives a slot's decoded buffer back to the spares. */
static void release_decoded(gt_outer_t *o, result_slot_t *r)
{
    if (!r->g) return;
    for (int i = 0; i < DECODED_MAX; i++)
        if (!o->spare[i]) {
            o->spare[i] = r->g;
            r->g = NULL;
            break;
        }
    gt_mem_free(o->mem, r->g); /* NULL if it went to the spares */
    r->g = NULL;
    o->n_decoded--;
    memset(r->dec, 0, o->layout->n_chunks);
}

/* A decoded buffer for slot r, while fewer than DECODED_MAX slots hold one (else NULL: its
 * chunks are checked on arrival and decoded again when the round is asked for). */
static float *take_decoded(gt_outer_t *o, result_slot_t *r)
{
    if (r->g || o->n_decoded >= DECODED_MAX || o->p.hold_results) return r->g;
    for (int i = 0; i < DECODED_MAX && !r->g; i++)
        if (o->spare[i]) {
            r->g = o->spare[i];
            o->spare[i] = NULL;
        }
    if (!r->g) r->g = gt_mem_alloc(o->mem, o->n * sizeof(float), 0);
    if (r->g) o->n_decoded++;
    return r->g;
}

result_slot_t *outer_result_slot(gt_outer_t *o, uint64_t round, int create)
{
    result_slot_t *r = &o->res[round % RESULT_SLOTS];
    if (r->used && r->round == round) return r;
    if (!create) return NULL;
    if (r->used && !r->applied && r->round > round) return NULL; /* a newer round is pending */
    if (r->used && r->held) return NULL; /* its frames are being read (gt_outer_result_hold) */
    size_t nc = o->layout->n_chunks;
    if (r->used && !r->applied && r->n_have > 0)
        GT_WARN("outer: round %llu's result (%zu of %zu chunks here) was never applied; its slot "
                "now holds round %llu",
                (unsigned long long)r->round, r->n_have, nc, (unsigned long long)round);
    for (size_t c = 0; c < nc; c++) {
        gt_mem_free(o->mem, r->frame[c]);
        r->frame[c] = NULL;
        r->len[c] = 0;
    }
    memset(r->have, 0, nc);
    memset(r->served, 0, nc * sizeof *r->served);
    r->first_ns = r->pull_ns = 0;
    r->pull_next = 0;
    release_decoded(o, r);
    r->used = 1;
    r->applied = 0;
    r->round = round;
    r->n_have = 0;
    r->verdict = 0;
    r->own_hash_known = 0;
    r->tokens = 0;
    r->submit_ns = r->done_ns = 0;
    return r;
}

/* Anchor check: the owners' majority hash (in the RESULT preamble res of round r->round) against
 * ours, once per round — when the result comes, or, for a site behind whose results arrive
 * before it submits, at its submit. */
void outer_judge_hash(gt_outer_t *o, result_slot_t *r, const outer_result_t *res)
{
    uint32_t votes = res->best_votes;
    uint32_t voters = (uint32_t)__builtin_popcountll(res->mask); /* on time */
    if (!r->own_hash_known || votes == 0 || r->verdict != 0) return;
    o->st.hash_checks++;
    if (votes < voters && 2 * votes <= voters) {
        /* The anchors differ and no hash has a majority (two live sites, one each): nobody can
         * tell which is right, and re-fetching the lower hash's would spread a corruption half
         * the time. Every site stops applying instead (diloco/ fails the round). */
        r->verdict = -2;
        o->st.hash_mismatches++;
        GT_ERROR("outer: the sites' anchors after round %llu differ and no anchor has a "
                 "majority (%u of %u votes at most): site %u stops applying rather than diverge",
                 (unsigned long long)r->round - 1, votes, voters, o->p.site_id);
        return;
    }
    if (res->best_hash == r->own_hash) {
        r->verdict = 1;
        return;
    }
    r->verdict = -1;
    o->st.hash_mismatches++;
    GT_ERROR("outer: site %u's anchor after round %llu differs from the majority of sites (%u "
             "votes): it must re-fetch the anchor",
             o->p.site_id, (unsigned long long)r->round - 1, votes);
}

gt_status_t outer_on_result(gt_outer_t *o, const gt_wan_msg_t *m, const uint8_t *b, size_t len,
                            uint64_t now_ns, size_t c)
{
    outer_result_t res;
    if (!outer_result_unpack(b, len, &res)) return outer_bad(o, m, "not a RESULT payload");
    result_slot_t *r = outer_result_slot(o, m->round, 1);
    if (!r || r->applied) {
        o->st.stale_results++;
        GT_DEBUG("outer: stale result of round %llu chunk %zu from site %u",
                 (unsigned long long)m->round, c, m->sender);
        return GT_OK;
    }
    if (r->have[c]) return GT_OK; /* a forwarded copy of what we have */
    GT_DEBUG("outer: result of round %llu chunk %zu from site %u (owner %u)",
             (unsigned long long)m->round, c, m->sender, res.owner);
    const gt_topo_chunk_t *ch = &o->layout->chunks[c];
    /* Decoded once, here (which also validates it), into the round's result vector. */
    float *g = take_decoded(o, r);
    size_t at = outer_result_frame_at(b);
    gt_status_t st =
        gt_cmp_decode(o->codec, b + at, len - at, g ? g + ch->offset : o->xbuf, ch->count);
    if (st != GT_OK) return outer_bad(o, m, "the result frame does not decode to this chunk");
    if (m->round + 1 > o->peer_next && m->round <= o->last_round)
        o->peer_next = m->round + 1; /* the round closed */
    r->dec[c] = g != NULL;
    uint8_t *keep = gt_mem_alloc(o->mem, len, 0);
    if (!keep) return GT_ERR_NOMEM;
    memcpy(keep, b, len);
    r->frame[c] = keep;
    r->len[c] = len;
    r->have[c] = 1;
    if (r->n_have++ == 0) r->first_ns = now_ns;
    if (r->n_have == o->layout->n_chunks) r->done_ns = now_ns;
    double t = res.tokens;
    if (isfinite(t) && t > 0) r->tokens += t * (double)ch->count / (double)o->n;
    if ((int64_t)m->round > o->closed_upto[c]) o->closed_upto[c] = (int64_t)m->round;
    /* The senders whose contribution to this round and chunk the result holds are taken here
     * too: one of theirs that reaches this site later (a re-send after an ownership change, to
     * an owner that lost the race to close it) is a duplicate, not a late one to fold into the
     * next round, where it would count twice. */
    took_t *tk = &o->took[c * RESULT_SLOTS + m->round % RESULT_SLOTS];
    if (tk->round != m->round) *tk = (took_t){m->round, 0};
    tk->senders |= res.mask;
    /* So are the late ones folded into it, in the rounds they were sent for: a sender whose
     * contribution came late to an owner that then left re-sends it to the new owner when it
     * lacks the result of its own round (it cannot know the old owner took it); taken twice,
     * it counted twice. A slot that holds a later round already is left alone. */
    for (uint32_t i = 0; i < res.folded; i++) {
        uint32_t from, back;
        outer_result_fold_get(b, i, &from, &back);
        if (back == 0 || back > m->round || back >= RESULT_SLOTS || from >= 64) continue;
        uint64_t q = m->round - back;
        took_t *tq = &o->took[c * RESULT_SLOTS + q % RESULT_SLOTS];
        if (tq->round > q && tq->senders) continue;
        if (tq->round != q) *tq = (took_t){q, 0};
        tq->senders |= 1ull << from;
    }
    /* We were aggregating this chunk too (its owner changed): the first result is final; what
     * we collected is accounted as aggregated (in the result's mask) or as late. */
    agg_t *mine = outer_find_agg(o, m->round, c, 0);
    if (mine && mine->used && !mine->closed) {
        uint64_t mask = res.mask;
        agg_t copy = *mine;
        mine->used = 0;
        mine->n = 0;
        for (uint32_t i = 0; i < copy.n; i++) {
            if (!copy.c[i].late && copy.c[i].sender < 64 && (mask >> copy.c[i].sender) & 1) {
                o->st.on_time++;
                gt_mem_free(o->mem, copy.c[i].x);
            } else if (o->p.late_fold && outer_owner_of(o, c, m->round + 1) == o->p.site_id) {
                agg_t *next = outer_find_agg(o, m->round + 1, c, 1);
                if (next && next->n < GT_OUTER_MAX_SITES) {
                    contrib_t k = copy.c[i];
                    k.weight /= 2.0; /* staleness 1 */
                    k.late = 1;
                    next->c[next->n++] = k;
                } else {
                    o->st.dropped++;
                    gt_mem_free(o->mem, copy.c[i].x);
                }
            } else {
                o->st.dropped++;
                gt_mem_free(o->mem, copy.c[i].x);
            }
        }
    }
    outer_judge_hash(o, r, &res);
    return GT_OK;
}

/* One link cut while both of its ends reach the others: each end lacks the chunks the other
 * owns, and the owner's RESULT cannot reach it. When a round's result has some chunks here and
 * lacks others (not ours) for longer than a straggler deadline plus deadline_min_ms after the
 * first arrived — every owner closes within a deadline of the same contributions — this site
 * asks one peer (not the chunk's owner) for them, another peer each time after that, and the
 * peer relays the owner's RESULT frame as it received it: the same bytes, so the anchors stay
 * identical (I1). When the io says an owner of a missing chunk is unreachable, it asks after
 * deadline_min_ms / 2 (at most 250 ms) instead, and asks again as often: a peer that had no
 * copy yet ignored the request. A result merely slow on its way costs a duplicate chunk, dropped on
 * arrival. */
void outer_pull_missing(gt_outer_t *o, uint64_t dl, uint64_t now_ns)
{
    size_t nc = o->layout->n_chunks;
    uint64_t slow = (dl ? dl : (uint64_t)o->p.deadline_max_ms * 1000000ull) +
                    (uint64_t)o->p.deadline_min_ms * 1000000ull;
    uint64_t quick = (uint64_t)o->p.deadline_min_ms * 500000ull;
    if (quick > 250000000ull) quick = 250000000ull;
    for (int i = 0; i < RESULT_SLOTS; i++) {
        result_slot_t *r = &o->res[i];
        if (!r->used || r->applied || r->n_have == 0 || r->n_have == nc ||
            now_ns - r->first_ns < quick || (r->pull_ns && now_ns - r->pull_ns < quick))
            continue;
        uint64_t after = slow;
        for (size_t c = 0; c < nc && after == slow && o->p.io.reachable; c++) {
            uint32_t owner = outer_owner_of(o, c, r->round);
            if (!r->have[c] && owner != o->p.site_id && !o->p.io.reachable(o->p.io.ctx, owner))
                after = quick;
        }
        if (now_ns - r->first_ns < after || (r->pull_ns && now_ns - r->pull_ns < after)) continue;
        for (uint32_t k = 0; k < o->p.n_sites; k++) {
            uint32_t s = (r->pull_next + k) % o->p.n_sites;
            if (s == o->p.site_id || !outer_receiver(o, s)) continue;
            size_t asked = 0;
            for (size_t c = 0; c < nc; c++) {
                uint32_t owner = outer_owner_of(o, c, r->round);
                if (r->have[c] || owner == o->p.site_id || owner == s) continue;
                uint8_t b[PULL_PRE];
                outer_pull_pack(b);
                gt_wan_msg_t m = outer_make_msg(o, GT_WAN_MSG_PULL, r->round, c);
                outer_send_to(o, s, &m, b, sizeof b, now_ns);
                asked++;
            }
            if (!asked) continue;
            o->st.pulls += asked;
            if (!r->pull_ns)
                GT_INFO("outer: round %llu: %zu of %zu chunks here %.1f s after the first, the "
                        "rest not; asking site %u to relay %zu (a cut between us and their "
                        "owner?)",
                        (unsigned long long)r->round, r->n_have, nc, (now_ns - r->first_ns) * 1e-9,
                        s, asked);
            r->pull_next = s + 1;
            r->pull_ns = now_ns;
            break;
        }
    }
}

/* Site m->sender asks for chunk c of m->round's result: relayed as received, once per site. */
gt_status_t outer_on_pull(gt_outer_t *o, const gt_wan_msg_t *m, const uint8_t *b, size_t len,
                          size_t c, uint64_t now_ns)
{
    uint32_t s = m->sender;
    if (!outer_pull_unpack(b, len) || s == o->p.site_id) return outer_bad(o, m, "not a PULL");
    result_slot_t *r = outer_result_slot(o, m->round, 0);
    if (!r || !r->have[c] || !r->frame[c] || s >= 64 || (r->served[c] >> s & 1)) {
        GT_DEBUG("outer: site %u asks for round %llu chunk %zu: %s", s,
                 (unsigned long long)m->round, c,
                 r && r->have[c] ? "relayed to it already" : "not here");
        return GT_OK;
    }
    r->served[c] |= 1ull << s;
    o->st.relays++;
    gt_wan_msg_t rm = outer_make_msg(o, GT_WAN_MSG_RESULT, m->round, c);
    outer_send_to(o, s, &rm, r->frame[c], r->len[c], now_ns);
    return GT_OK;
}

/* Completes slot r's decoded vector: chunks that arrived while no buffer was free are decoded
 * now (they decoded on arrival, so a failure here is memory corruption). */
static gt_status_t finish_decoded(gt_outer_t *o, result_slot_t *r)
{
    if (!take_decoded(o, r)) {
        /* every buffer is held by rounds not applied yet: make one more */
        r->g = gt_mem_alloc(o->mem, o->n * sizeof(float), 0);
        if (!r->g) return GT_ERR_NOMEM;
        o->n_decoded++;
    }
    for (size_t c = 0; c < o->layout->n_chunks; c++) {
        if (r->dec[c]) continue;
        const gt_topo_chunk_t *ch = &o->layout->chunks[c];
        size_t at = outer_result_frame_at(r->frame[c]);
        gt_status_t st =
            gt_cmp_decode(o->codec, r->frame[c] + at, r->len[c] - at, r->g + ch->offset, ch->count);
        if (st != GT_OK) return st;
        r->dec[c] = 1;
    }
    return GT_OK;
}

static void mark_applied(gt_outer_t *o, result_slot_t *r, uint64_t round)
{
    r->applied = 1;
    send_slot_t *s = send_slot(o, round);
    if (!s) return;
    s->applied = 1;
    /* Its frames were kept for re-sends to a chunk's new owner (resend_moved), which end with
     * the round: an applied round's are never sent again, so they go now rather than when the
     * slot is reused GT_OUTER_SLOTS rounds later. */
    for (size_t c = 0; c < o->layout->n_chunks; c++) {
        gt_mem_free(o->mem, s->frame[c]);
        s->frame[c] = NULL;
        s->len[c] = 0;
    }
}

/* The RESULT frames of applied rounds RELAY_ROUNDS or more before `round` (just applied). */
static void drop_old_frames(gt_outer_t *o, uint64_t round)
{
    for (int i = 0; i < RESULT_SLOTS; i++) {
        result_slot_t *r = &o->res[i];
        if (!r->used || !r->applied || r->held || r->round + RELAY_ROUNDS > round) continue;
        for (size_t c = 0; c < o->layout->n_chunks; c++) {
            gt_mem_free(o->mem, r->frame[c]);
            r->frame[c] = NULL;
            r->len[c] = 0;
        }
    }
}

gt_status_t gt_outer_result(gt_outer_t *o, uint64_t round, float *g)
{
    result_slot_t *r = outer_result_slot(o, round, 0);
    if (!r || r->n_have < o->layout->n_chunks) return GT_ERR_AGAIN;
    gt_status_t st = finish_decoded(o, r);
    if (st != GT_OK) return st;
    memcpy(g, r->g, o->n * sizeof *g);
    release_decoded(o, r);
    mark_applied(o, r, round);
    drop_old_frames(o, round);
    return GT_OK;
}

gt_status_t gt_outer_result_swap(gt_outer_t *o, uint64_t round, float **g_io)
{
    result_slot_t *r = outer_result_slot(o, round, 0);
    if (!r || r->n_have < o->layout->n_chunks) return GT_ERR_AGAIN;
    gt_status_t st = finish_decoded(o, r);
    if (st != GT_OK) return st;
    float *mine = *g_io;
    *g_io = r->g;
    r->g = mine; /* the caller's buffer becomes a spare */
    if (r->g)
        release_decoded(o, r);
    else
        o->n_decoded--;
    memset(r->dec, 0, o->layout->n_chunks);
    mark_applied(o, r, round);
    drop_old_frames(o, round);
    return GT_OK;
}

gt_status_t gt_outer_result_hold(gt_outer_t *o, uint64_t round)
{
    result_slot_t *r = outer_result_slot(o, round, 0);
    if (!r || r->n_have < o->layout->n_chunks) return GT_ERR_AGAIN;
    for (int i = 0; i < RESULT_SLOTS; i++) /* an earlier hold left unreleased ends here */
        if (o->res[i].held && o->res[i].round < round) o->res[i].held = 0;
    r->held = 1;
    mark_applied(o, r, round);
    drop_old_frames(o, round);
    return GT_OK;
}

gt_status_t gt_outer_result_chunk(const gt_outer_t *o, uint64_t round, size_t c, gt_cmp_ctx_t *cmp,
                                  float *out)
{
    const result_slot_t *r = &o->res[round % RESULT_SLOTS];
    if (!r->used || r->round != round || !r->held || c >= o->layout->n_chunks || !r->frame[c])
        return GT_ERR_INVALID;
    const gt_topo_chunk_t *ch = &o->layout->chunks[c];
    size_t at = outer_result_frame_at(r->frame[c]);
    gt_status_t st = gt_cmp_decode(cmp, r->frame[c] + at, r->len[c] - at, out, ch->count);
    return st == GT_OK ? GT_OK : GT_ERR_CORRUPT;
}

void gt_outer_result_release(gt_outer_t *o, uint64_t round)
{
    result_slot_t *r = &o->res[round % RESULT_SLOTS];
    if (r->used && r->round == round) r->held = 0;
}

size_t gt_outer_chunk_count(const gt_outer_t *o)
{
    return o->layout->n_chunks;
}

void gt_outer_chunk_span(const gt_outer_t *o, size_t c, size_t *offset, size_t *count)
{
    const gt_topo_chunk_t *ch = &o->layout->chunks[c];
    *offset = ch->offset;
    *count = ch->count;
}

int gt_outer_result_whole(const gt_outer_t *o, uint64_t round)
{
    const result_slot_t *r = &o->res[round % RESULT_SLOTS];
    return r->used && r->round == round && r->n_have >= o->layout->n_chunks;
}

int gt_outer_result_gone(const gt_outer_t *o, uint64_t round)
{
    const result_slot_t *r = &o->res[round % RESULT_SLOTS];
    return r->used && r->round > round;
}

uint32_t gt_outer_rounds_kept(void)
{
    return RESULT_SLOTS;
}

size_t gt_outer_missing(const gt_outer_t *o, uint64_t round, char *buf, size_t cap)
{
    const result_slot_t *r = &o->res[round % RESULT_SLOTS];
    int held = r->used && r->round == round;
    size_t nc = o->layout->n_chunks, missing = 0, at = 0;
    if (cap) buf[0] = '\0';
    for (size_t c = 0; c < nc; c++) {
        if (held && r->have[c]) continue;
        missing++;
        if (at + 1 < cap) {
            int k = snprintf(buf + at, cap - at, "%s%zu (site %u)", at ? ", " : "", c,
                             outer_owner_of(o, c, round));
            at = k < 0 ? cap : at + (size_t)k;
        }
    }
    return missing;
}

uint64_t gt_outer_missing_owners(const gt_outer_t *o, uint64_t round)
{
    const result_slot_t *r = &o->res[round % RESULT_SLOTS];
    int held = r->used && r->round == round;
    uint64_t mask = 0;
    for (size_t c = 0; c < o->layout->n_chunks; c++) {
        uint32_t owner = outer_owner_of(o, c, round);
        if (!(held && r->have[c]) && owner < 64) mask |= 1ull << owner;
    }
    return mask;
}

double gt_outer_exchange_s(const gt_outer_t *o, uint64_t round)
{
    const result_slot_t *r = &o->res[round % RESULT_SLOTS];
    if (!r->used || r->round != round || !r->submit_ns || !r->done_ns) return NAN;
    return r->done_ns > r->submit_ns ? (double)(r->done_ns - r->submit_ns) * 1e-9 : 0.0;
}

int gt_outer_hash_verdict(const gt_outer_t *o, uint64_t round)
{
    const result_slot_t *r = &o->res[(round + 1) % RESULT_SLOTS];
    return r->used && r->round == round + 1 ? r->verdict : 0;
}
