/* views.c — who takes part: views, joins and the end of a run.
 *
 * A view (from membership) says which sites are live; a JOIN says from which round a site
 * contributes; a FIN says a site is done and how many of our contributions it took. Ownership
 * is a function of both (outer_owner_of for a round), so a view change or a join moves chunks:
 * the senders re-send what they kept to the new owner, a new owner holds a leaver's rounds open
 * a while for a forward of the leaver's own result, and results whose owner left are forwarded
 * so every site applies the same bytes. Kept apart from the round's two sides because every
 * rule here is about membership changing under rounds in flight.
 */
#include "outer_internal.h"

#include <stdlib.h>
#include <string.h>

/* Re-sends our kept contributions whose chunk owner changed (a view change or a join), unless
 * the chunk's result is already in. */
static void resend_moved(gt_outer_t *o, uint64_t now_ns)
{
    size_t nc = o->layout->n_chunks;
    for (int i = 0; i < GT_OUTER_SLOTS; i++) {
        send_slot_t *s = &o->send[i];
        if (!s->used || s->applied) continue;
        result_slot_t *rs = outer_result_slot(o, s->round, 0);
        for (size_t c = 0; c < nc; c++) {
            uint32_t owner = outer_owner_of(o, c, s->round);
            if (owner == s->sent_to[c] || !s->frame[c] || (rs && rs->have[c])) continue;
            s->sent_to[c] = owner;
            gt_wan_msg_t m = outer_make_msg(o, GT_WAN_MSG_DELTA, s->round, c);
            o->st.resends++;
            GT_DEBUG("outer: round %llu chunk %zu moved to site %u: re-sent",
                     (unsigned long long)s->round, c, owner);
            outer_send_contribution(o, owner, &m, s->frame[c], s->len[c], now_ns);
        }
    }
}

/* A control message (JOIN, FIN: the message type says which): a 24-byte payload of its magic,
 * the protocol version, one 64-bit value and a reserved word. */
static void send_control(gt_outer_t *o, uint32_t dst, uint32_t magic, uint64_t value,
                         uint64_t round, uint64_t now_ns)
{
    uint8_t b[CONTROL_PRE];
    outer_control_pack(b, magic, value);
    gt_wan_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = magic == JOIN_MAGIC ? GT_WAN_MSG_JOIN : GT_WAN_MSG_FIN;
    m.sender = o->p.site_id;
    m.view_epoch = o->epoch;
    m.round = round;
    outer_send_to(o, dst, &m, b, sizeof b, now_ns);
}

static void send_join(gt_outer_t *o, uint32_t dst, uint64_t now_ns)
{
    send_control(o, dst, JOIN_MAGIC, o->first[o->p.site_id], o->first[o->p.site_id], now_ns);
}

/* Site s announces that it contributes from round r on (it joined, or came back). From round r
 * its preferred chunks are its own: what we gathered here for them is given up (their senders
 * re-send to it, and it counts them; late ones, which no sender keeps, are encoded again and
 * passed on); our kept contributions that now go to it are re-sent; results of rounds >= r that
 * we aggregated before we heard of it are replayed to it. */
static gt_status_t take_join(gt_outer_t *o, uint32_t s, uint64_t r, uint64_t epoch, const char *how,
                             uint64_t now_ns)
{
    if (o->first[s] == r && outer_receiver(o, s)) return GT_OK; /* a repeat */
    /* A new life of s (its first announcement since it left or restarted, which set first[s]
     * unknown): the ledger with it starts again, as its own counts do. Not at a re-plan of the
     * same life (a later round: the anchor it planned from was gone): its process kept counting
     * what it took from us, and ours restarting made its FIN say it took more than we sent (the
     * soak's seed 1697282378: 90 taken of 8 sent). */
    if (o->first[s] == FIRST_UNKNOWN || !outer_receiver(o, s)) {
        if (o->fin[s] && o->sent_n[s] > o->fin_n[s])
            o->unreceived_before += o->sent_n[s] - o->fin_n[s];
        o->sent_n[s] = o->took_n[s] = o->fin_n[s] = 0;
        o->fin[s] = 0;
    }
    o->first[s] = r;
    o->first_epoch[s] = epoch;
    if (!o->live[s]) {
        o->joined[s] = 1;
        o->joined_epoch[s] = epoch;
    }
    o->st.joins++;
    GT_INFO("outer: site %u joins: it contributes from round %llu on%s", s, (unsigned long long)r,
            how);
    for (size_t i = 0; i < o->n_aggs; i++) {
        agg_t *a = &o->aggs[i];
        if (!a->used || a->closed || a->round < r || outer_owner_of(o, a->chunk, a->round) != s)
            continue;
        for (uint32_t k = 0; k < a->n; k++) {
            if (!a->c[k].late) continue; /* on-time ones are re-sent to the new owner */
            /* A late one (no sender keeps it any more): its frame passed on as it came. */
            size_t flen = a->c[k].xlen;
            uint8_t *fb = o->scratch;
            if (flen > o->scratch_cap - DELTA_PRE) {
                o->st.dropped++;
                GT_WARN("outer: dropped site %u's late contribution to round %llu chunk %u: it "
                        "cannot be passed on to joining site %u",
                        a->c[k].sender, (unsigned long long)a->round, a->chunk, s);
                continue;
            }
            memcpy(fb + DELTA_PRE, a->c[k].x, flen);
            uint64_t fr = a->c[k].from,
                     back = fr < a->round && a->round - fr <= 0xFFu ? a->round - fr : 0;
            outer_delta_pack(fb, &(outer_delta_t){a->c[k].weight, a->c[k].hash, o->p.n_sites,
                                                  FLAGS(FLAG_FORWARDED, a->c[k].sender, back)});
            gt_wan_msg_t fm = outer_make_msg(o, GT_WAN_MSG_DELTA, a->round, a->chunk);
            o->st.forwards++;
            outer_send_to(o, s, &fm, fb, DELTA_PRE + flen, now_ns);
        }
        outer_free_agg(o, a);
    }
    resend_moved(o, now_ns);
    size_t nc = o->layout->n_chunks;
    for (int i = 0; i < RESULT_SLOTS; i++) {
        result_slot_t *rs = &o->res[i];
        if (!rs->used || rs->round < r) continue;
        for (size_t c = 0; c < nc; c++) {
            if (!rs->have[c] || !rs->frame[c] || outer_result_owner(rs->frame[c]) != o->p.site_id)
                continue;
            gt_wan_msg_t rm = outer_make_msg(o, GT_WAN_MSG_RESULT, rs->round, c);
            o->st.forwards++;
            outer_send_to(o, s, &rm, rs->frame[c], rs->len[c], now_ns);
        }
    }
    return gt_outer_progress(o, now_ns);
}

gt_status_t outer_on_join(gt_outer_t *o, const gt_wan_msg_t *m, const uint8_t *b, size_t len,
                          uint64_t now_ns)
{
    uint64_t r;
    if (!outer_control_unpack(b, len, JOIN_MAGIC, &r))
        return outer_bad(o, m, "not a JOIN announcement");
    uint32_t s = m->sender;
    if (s == o->p.site_id || r == FIRST_UNKNOWN) return outer_bad(o, m, "a JOIN from ourselves");
    return take_join(o, s, r, m->view_epoch, "", now_ns);
}

gt_status_t gt_outer_learn_join(gt_outer_t *o, uint32_t site, uint64_t round, uint64_t now_ns)
{
    if (site >= o->p.n_sites || site == o->p.site_id || round == 0 || round == FIRST_UNKNOWN)
        return GT_ERR_INVALID;
    if (!o->live[site]) return GT_OK; /* not in our view (yet): its JOIN or a later view */
    /* Its JOIN came first, or a later one (a re-plan moves on; etcd said the earlier) */
    if (o->first[site] != FIRST_UNKNOWN && o->first[site] >= round) return GT_OK;
    return take_join(o, site, round, o->epoch, " (announced in etcd)", now_ns);
}

gt_status_t gt_outer_start_at(gt_outer_t *o, uint64_t round, const uint64_t *first, uint64_t now_ns)
{
    uint32_t self = o->p.site_id;
    if (o->submitted || round == FIRST_UNKNOWN || round < o->first[self]) {
        GT_ERROR("outer: start_at(%llu) after a submit, or earlier than round %llu",
                 (unsigned long long)round, (unsigned long long)o->first[self]);
        return GT_ERR_INVALID;
    }
    int replan = o->started_at;
    o->first[self] = round;
    if (!o->started_at) o->first_life = round;
    o->started_at = 1;
    /* Aggregations of rounds before it go: this site takes no part in those rounds, and their
     * senders re-send to those rounds' owners (outer_on_delta). Opened before the first
     * start_at, by DELTAs meant for this site's previous life (re-sent to this one by the
     * mesh), they are not counted as taken either: the peers restarted their count of what
     * they send us at our JOIN. Opened under a plan this re-plan replaces, they were sent to
     * this life and stay counted. */
    for (size_t i = 0; i < o->n_aggs; i++) {
        agg_t *a = &o->aggs[i];
        if (!a->used || a->closed || a->round >= round) continue;
        for (uint32_t k = 0; k < a->n; k++) {
            if (!replan && a->c[k].via < GT_OUTER_MAX_SITES && o->took_n[a->c[k].via] > 0)
                o->took_n[a->c[k].via]--;
            o->st.stale_deltas++;
        }
        GT_DEBUG("outer: round %llu chunk %u: %u contribution(s) taken before this site's first "
                 "round (%llu) dropped",
                 (unsigned long long)a->round, a->chunk, a->n, (unsigned long long)round);
        outer_free_agg(o, a);
    }
    for (uint32_t s = 0; first && s < o->p.n_sites; s++)
        if (s != self) o->first[s] = o->live[s] ? first[s] : FIRST_UNKNOWN;
    for (uint32_t s = 0; s < o->p.n_sites; s++)
        if (s != self && o->live[s]) send_join(o, s, now_ns);
    return gt_outer_progress(o, now_ns);
}

void gt_outer_first_rounds(const gt_outer_t *o, uint64_t *first)
{
    for (uint32_t s = 0; s < o->p.n_sites; s++)
        first[s] = outer_receiver(o, s) ? o->first[s] : FIRST_UNKNOWN;
}

/* Site m->sender finished: it took b's count of the DELTA frames we sent it, and takes no more. */
gt_status_t outer_on_fin(gt_outer_t *o, const gt_wan_msg_t *m, const uint8_t *b, size_t len)
{
    uint32_t s = m->sender;
    uint64_t took;
    if (!outer_control_unpack(b, len, FIN_MAGIC, &took) || s == o->p.site_id)
        return outer_bad(o, m, "not a FIN");
    if (took > o->sent_n[s]) /* a count from before our own restart, or a faulty peer */
        GT_WARN("outer: site %u finished and says it took %llu contributions from this site, "
                "which sent it %llu",
                s, (unsigned long long)took, (unsigned long long)o->sent_n[s]);
    o->fin[s] = 1;
    o->fin_n[s] = took;
    GT_DEBUG("outer: site %u finished; it took %llu of the %llu contributions sent to it so far", s,
             (unsigned long long)took, (unsigned long long)o->sent_n[s]);
    return GT_OK;
}

void gt_outer_finish(gt_outer_t *o, uint64_t now_ns)
{
    if (!o || o->finished) return;
    o->finished = 1;
    for (uint32_t s = 0; s < o->p.n_sites && s < GT_OUTER_MAX_SITES; s++) {
        if (s == o->p.site_id || !outer_receiver(o, s)) continue;
        send_control(o, s, FIN_MAGIC, o->took_n[s], o->last_round == UINT64_MAX ? 0 : o->last_round,
                     now_ns);
    }
}

gt_status_t gt_outer_set_view(gt_outer_t *o, uint64_t epoch, const uint32_t *live, uint32_t n_live,
                              uint64_t now_ns)
{
    return gt_outer_set_view_restarts(o, epoch, live, n_live, 0, now_ns);
}

gt_status_t gt_outer_set_view_restarts(gt_outer_t *o, uint64_t epoch, const uint32_t *live,
                                       uint32_t n_live, uint64_t restarted, uint64_t now_ns)
{
    if (epoch <= o->epoch && o->epoch != 0) return GT_OK;
    /* The open rounds of chunks that are ours before the change (see the end). */
    uint8_t *was_mine = o->n_aggs ? calloc(o->n_aggs, 1) : NULL;
    for (size_t i = 0; was_mine && i < o->n_aggs; i++)
        was_mine[i] = o->aggs[i].used && !o->aggs[i].closed &&
                      outer_owner_of(o, o->aggs[i].chunk, o->aggs[i].round) == o->p.site_id;
    /* Each chunk's owner for the newest round in flight, before the change (see the end). */
    size_t nchunks = o->layout->n_chunks;
    uint64_t flight = o->peer_next ? o->peer_next - 1 : 0;
    uint32_t *owner_was = o->p.handover_ms ? malloc(nchunks * sizeof *owner_was) : NULL;
    for (size_t c = 0; owner_was && c < nchunks; c++) owner_was[c] = outer_owner_of(o, c, flight);
    uint8_t old_live[GT_OUTER_MAX_SITES];
    memcpy(old_live, o->live, sizeof old_live);
    memset(o->live, 0, sizeof o->live);
    int self = 0;
    for (uint32_t i = 0; i < n_live; i++) {
        if (live[i] >= o->p.n_sites) {
            GT_ERROR("outer: view %llu names site %u of %u", (unsigned long long)epoch, live[i],
                     o->p.n_sites);
            return GT_ERR_INVALID;
        }
        o->live[live[i]] = 1;
        self |= live[i] == o->p.site_id;
    }
    if (!self) {
        memcpy(o->live, old_live, sizeof old_live);
        free(was_mine);
        free(owner_was);
        GT_ERROR("outer: view %llu does not include this site (%u)", (unsigned long long)epoch,
                 o->p.site_id);
        return GT_ERR_INVALID;
    }
    o->epoch = epoch;
    o->n_live = n_live;
    GT_DEBUG("outer: view %llu: %u live sites", (unsigned long long)epoch, n_live);
    for (uint32_t s = 0; s < o->p.n_sites; s++) {
        if (s == o->p.site_id) continue;
        /* Restarted (a new incarnation, in this view for the first time): what it announced
         * before, and the chunks it owned, were its previous life's — unless the new one has
         * announced already (from this view or a later one). */
        int reborn = ((restarted >> s) & 1) && old_live[s] && o->live[s] &&
                     !(o->first[s] != FIRST_UNKNOWN && o->first_epoch[s] >= epoch);
        if (reborn) old_live[s] = 2; /* its results are forwarded below, as a leaver's */
        int gone = (old_live[s] && !o->live[s]) || reborn ||
                   (o->joined[s] && !o->live[s] && epoch >= o->joined_epoch[s]);
        if (gone) { /* it left (or announced from a view this one replaces, or restarted): a
                       comeback announces its first round again */
            o->first[s] = FIRST_UNKNOWN;
            o->joined[s] = 0;
            o->seen_round[s] = 0; /* what a comeback has applied is not known */
        } else if (o->live[s]) {
            o->joined[s] = 0;
            /* A joiner announces itself to the sites that enter its view after it started. */
            if (!old_live[s] && o->first[o->p.site_id] > 0) send_join(o, s, now_ns);
        }
    }
    size_t nc = o->layout->n_chunks;
    /* Results whose owner left: forward them, so every site applies the same bytes. Only its
     * last two rounds: an owner that died in the middle of a broadcast did so in its latest
     * closes; everything before went to every site when it closed. */
    uint64_t newest[GT_OUTER_MAX_SITES] = {0};
    for (int i = 0; i < RESULT_SLOTS; i++)
        for (size_t c = 0; o->res[i].used && c < nc; c++) {
            if (!o->res[i].have[c] || !o->res[i].frame[c]) continue;
            uint32_t owner = outer_result_owner(o->res[i].frame[c]);
            if (owner < o->p.n_sites && o->res[i].round > newest[owner])
                newest[owner] = o->res[i].round;
        }
    for (int i = 0; i < RESULT_SLOTS; i++) {
        result_slot_t *r = &o->res[i];
        for (size_t c = 0; r->used && c < nc; c++) {
            if (!r->have[c] || !r->frame[c]) continue;
            uint32_t owner = outer_result_owner(r->frame[c]);
            if (owner < o->p.n_sites && old_live[owner] &&
                (!o->live[owner] || old_live[owner] == 2) && r->round + 1 >= newest[owner]) {
                gt_wan_msg_t m = outer_make_msg(o, GT_WAN_MSG_RESULT, r->round, c);
                for (uint32_t s = 0; s < o->p.n_sites; s++) {
                    if (!outer_receiver(o, s) || s == o->p.site_id) continue;
                    /* A site that sent us a contribution to round q had applied round q - 1
                     * (a site submits a round only after applying the one before; a joiner
                     * fetched that anchor): it holds this result, and on a WAN a result chunk
                     * can be hundreds of MB. */
                    if (o->seen_round[s] >= r->round + 2) continue;
                    o->st.forwards++;
                    GT_DEBUG("outer: forwarded round %llu chunk %zu's result (owner %u left) to "
                             "site %u",
                             (unsigned long long)r->round, c, owner, s);
                    outer_send_to(o, s, &m, r->frame[c], r->len[c], now_ns);
                }
            }
        }
    }
    /* A round of a chunk that has just become ours may hold contributions that came before our
     * view did (a peer whose view changed first re-sent them here): its deadline runs from now,
     * not from their arrival. Else the first close below — one of our own re-sends completing
     * another chunk — found it past its deadline, and closed it without our contribution, which
     * was still to be re-sent in the same loop (seen: "closing round 15 chunk 3 at the deadline
     * with 1 of 2 sites" 0.4 s after the owner's eviction; ours then folded late). */
    for (size_t i = 0; was_mine && i < o->n_aggs; i++) {
        agg_t *a = &o->aggs[i];
        if (a->used && !a->closed && a->first_ns && !was_mine[i] &&
            outer_owner_of(o, a->chunk, a->round) == o->p.site_id) {
            a->first_ns = now_ns;
            if (a->quorum_ns) a->quorum_ns = now_ns;
        }
    }
    free(was_mine);
    /* Chunks that came to us from a site that left (or restarted: its old life's chunks are a
     * leaver's): a peer may hold the leaver's own result of
     * a round in flight (it closed and sent it to some sites before it went) and forwards it
     * when its view changes (above, at that peer). Closed at once here, our result could differ
     * from the one that peer applies; held for params.handover_ms, the forward arrives first and
     * is the result everyone applies (on_result takes it over our open aggregation). */
    for (size_t c = 0; owner_was && c < nchunks; c++) {
        uint32_t was = owner_was[c];
        if (was != o->p.site_id && was < o->p.n_sites && (!o->live[was] || old_live[was] == 2) &&
            outer_owner_of(o, c, flight) == o->p.site_id) {
            o->handover_ns[c] = now_ns + (uint64_t)o->p.handover_ms * 1000000ull;
            o->handover_upto[c] = flight + 1;
        }
    }
    free(owner_was);
    /* Our contributions whose owner changed: re-send the kept frames. */
    resend_moved(o, now_ns);
    return gt_outer_progress(o, now_ns);
}
