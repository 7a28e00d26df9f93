/* liveness.c — waiting for a round's result, and what decides meanwhile that a peer is gone
 * (docs/diloco.md#zombies-and-partitions, #a-site-the-majority-cannot-reach): the
 * minority-partition rule (a site that reaches fewer than half of its view leaves), eviction by
 * the majority (sites that cannot reach a peer whose chunks they wait for accuse it; a majority
 * of accusers removes it from the view), and the liveness watch (probes a peer answers or not,
 * independently of the rounds). outer_step.c calls dl_wait_result before it applies a round.
 */
#include "diloco_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
/* The minority-partition rule (docs/diloco.md#zombies-and-partitions). A site that has waited
 * long for a result and whose WAN reaches fewer than half of its view (itself included; at
 * exactly half, the side without the view's first site) is the cut-off side: it leaves, so the
 * majority moves to a view without it and takes over its chunks, rather than every site
 * waiting on it until the cut heals or the wait gives up. "Reaches" means the peer answered a
 * probe just now (a PROBE_REACH round trip, within wan.peer_timeout_ms): whether a connection is
 * up says little — across a cut that drops traffic, connections come up and fail again — and
 * silence says nothing, as a slower peer may be computing a long round.
 *
 * The probe goes to every member at once and is never waited on: the result wait goes on
 * checking for its result while the answers come in. (Probing one peer after another, each
 * for up to peer_timeout_ms, kept a waiting site of the majority from noticing that its result
 * had arrived for 5 s and more; its peers, not waiting for a site that had missed rounds, got
 * 16 rounds ahead meanwhile and its result was no longer kept.) Not under d->lock. */
static void reach_start(gt_diloco_t *d)
{
    pthread_mutex_lock(&d->lock);
    gt_wan_view_t v = d->grp[0].view; /* every group's view holds the same sites, give or
                                          take a heartbeat; the probe goes over group 0's mesh */
    d->reach_id++;
    d->reach_sent_ns = gt_time_ns();
    d->reach_members = 0;
    d->reach_first = UINT32_MAX;
    memset(d->reach_asked, 0, sizeof d->reach_asked);
    memset(d->reach_got, 0, sizeof d->reach_got);
    for (uint32_t k = 0; k < v.n_members; k++) {
        uint32_t i;
        if (gt_topo_site_index(d->cfg, v.members[k].name, &i) != GT_OK) continue;
        d->reach_members++;
        if (i < d->reach_first) d->reach_first = i;
        if (i == d->site) continue;
        d->reach_asked[i] = 1;
        if (dl_probe_send(d, 0, i, PROBE_REACH, d->reach_id) != GT_OK)
            d->reach_asked[i] = 0; /* unsent */
    }
    pthread_mutex_unlock(&d->lock);
}

/* The verdict of the probe reach_start sent: -1 while answers may still come (within
 * wan.peer_timeout_ms, and not every peer has answered), else 1 when this site is the cut-off
 * side, 0 when not. */
static int reach_verdict(gt_diloco_t *d, uint64_t now)
{
    pthread_mutex_lock(&d->lock);
    uint32_t asked = 0, got = 0;
    for (uint32_t i = 0; i < GT_OUTER_MAX_SITES; i++) {
        asked += d->reach_asked[i];
        got += d->reach_got[i];
    }
    uint32_t n = d->reach_members, reach = got + 1; /* itself */
    int first_reached = d->reach_first == d->site ||
                        (d->reach_first < GT_OUTER_MAX_SITES && d->reach_got[d->reach_first]);
    uint64_t epoch = d->grp[0].view.epoch;
    int pending =
        got < asked && now - d->reach_sent_ns < (uint64_t)d->cfg->wan.peer_timeout_ms * 1000000ull;
    pthread_mutex_unlock(&d->lock);
    if (pending) return -1;
    if (n > 1 && 2 * reach <= n)
        GT_WARN("site %s: %u of the %u sites of view %llu answer (itself included)", d->name, reach,
                n, (unsigned long long)epoch);
    return n > 1 && (2 * reach < n || (2 * reach == n && !first_reached));
}

/* The peers that answered the last probe, as a mask (bit i: site i; sites 0-63). */
static uint64_t reach_mask(gt_diloco_t *d)
{
    uint64_t m = 0;
    pthread_mutex_lock(&d->lock);
    for (uint32_t i = 0; i < GT_OUTER_MAX_SITES && i < 64; i++)
        if (d->reach_got[i]) m |= 1ull << i;
    pthread_mutex_unlock(&d->lock);
    return m;
}

/* ---- eviction by the majority (docs/diloco.md, "A site the majority cannot reach") ----
 *
 * The rule above lets a cut-off site remove itself; this one lets the others remove it, and
 * sooner. A site that renews its lease but that its peers cannot reach (cut off from them,
 * not from etcd; or its WAN thread stuck) keeps its chunks, and every site waits for their
 * results until the cut heals. So a site waiting for a result whose missing chunks' owner has
 * answered none of its probes for membership.evict_after_ms (default: the lease TTL — the
 * time a site that loses etcd keeps its place), while the probe's answers show this site on
 * the majority side, accuses that owner in etcd (gt_wan_member_accuse). When the accusers of
 * the same incarnation are more than half of the view (never one site of two, nor half of an
 * even split: the minority rule above settles those), the owner is evicted (gt_wan_member_evict:
 * its key deleted, its lease revoked): the view drops it, its chunks move, the senders re-send
 * their kept contributions, and the evicted site, hearing its lease is gone, leaves with exit 3 and
 * rejoins as a joiner once it reaches the others. A site one accuser cannot reach but another
 * can (one cut link: relays bridge it) is never evicted, nor is a slow one (it answers). */

/* membership.evict_after_ms in ns (0: the lease TTL). */
static uint64_t evict_after_ns(const gt_topo_config_t *c)
{
    return (c->membership.evict_after_ms ? (uint64_t)c->membership.evict_after_ms
                                         : c->membership.lease_ttl_s * 1000ull) *
           1000000ull;
}

/* The owners (bit s: site s) of round r's chunks of fragment f still missing here, over the
 * groups whose result is not taken yet (bit i of `got`: group i's is). */
static uint64_t missing_owners(gt_diloco_t *d, uint32_t f, uint64_t r, uint64_t got)
{
    uint64_t owners = 0;
    pthread_mutex_lock(&d->lock);
    for (uint32_t i = 0; i < d->n_grp; i++)
        if (!(got >> i & 1)) owners |= gt_outer_missing_owners(d->outers[f * d->n_grp + i], r);
    pthread_mutex_unlock(&d->lock);
    return owners;
}

/* Site `name`'s entry in group g's view (copied under the lock); 0 when it is not there. */
static int view_member(gt_diloco_t *d, uint32_t g, const char *name, gt_wan_member_info_t *who)
{
    int found = 0;
    pthread_mutex_lock(&d->lock);
    const gt_wan_view_t *v = &d->grp[g].view;
    for (uint32_t j = 0; j < v->n_members && !found; j++)
        if (strcmp(v->members[j].name, name) == 0) {
            *who = v->members[j];
            found = 1;
        }
    pthread_mutex_unlock(&d->lock);
    return found;
}

/* Whether the sites in `mask` (bit i: site i) are a majority of view v: more than half, or
 * (`tie`) exactly half with the view's first site among them. */
static int majority_of(const gt_diloco_t *d, const gt_wan_view_t *v, uint64_t mask, int tie)
{
    uint32_t n = 0, k = 0, first = UINT32_MAX;
    for (uint32_t j = 0; j < v->n_members; j++) {
        uint32_t i;
        if (gt_topo_site_index(d->cfg, v->members[j].name, &i) != GT_OK) continue;
        n++;
        if (i < first) first = i;
        k += i < 64 && (mask >> i & 1);
    }
    return n > 1 && (2 * k > n || (tie && 2 * k == n && first < 64 && (mask >> first & 1)));
}

/* Accuses the sites in `silent` in every WAN group this rank runs (each group has its own
 * membership keys), and evicts those whose accusers are a majority of the group's view. Not
 * under d->lock; etcd requests, each bounded by the request timeout. */
static void accuse(gt_diloco_t *d, uint64_t silent, uint64_t r, double waited_s)
{
    gt_wan_view_t v, acc;
    for (uint32_t s = 0; s < 64 && s < d->cfg->n_sites; s++) {
        if (!(silent >> s & 1) || s == d->site) continue;
        const char *name = d->cfg->sites[s].name;
        int put = (d->accused >> s & 1) != 0; /* its accusation is in etcd */
        for (uint32_t g = 0; g < d->n_grp; g++) {
            gt_wan_member_info_t entry;
            pthread_mutex_lock(&d->lock);
            v = d->grp[g].view; /* whole: the majority is counted over it */
            pthread_mutex_unlock(&d->lock);
            int64_t lease = view_member(d, g, name, &entry) ? entry.lease : 0;
            if (!lease) continue; /* out of this view already, or its lease not known */
            if (!(d->accused >> s & 1)) {
                if (gt_wan_member_accuse(d->grp[g].member, name, lease) != GT_OK)
                    continue; /* etcd away: nobody can be evicted meanwhile; the next probe
                                 tries again */
                put = 1;
            }
            if (gt_wan_member_accusers(d->grp[g].member, name, lease, &acc) != GT_OK) continue;
            uint64_t mask = 0;
            char who[256] = "";
            size_t o = 0;
            for (uint32_t j = 0; j < acc.n_members; j++) {
                uint32_t i;
                if (gt_topo_site_index(d->cfg, acc.members[j].name, &i) != GT_OK || i >= 64)
                    continue;
                mask |= 1ull << i;
                if (o < sizeof who)
                    o += (size_t)snprintf(who + o, sizeof who - o, "%s%s", o ? ", " : "",
                                          acc.members[j].name);
            }
            if (!(d->accused >> s & 1) && g == 0)
                GT_WARN("site %s: site %s has answered no probe for %.1f s while round %llu's "
                        "result waits for chunks it owns: %s accuses it of being unreachable "
                        "(accusers now: %s)",
                        d->name, name, evict_after_ns(d->cfg) * 1e-9, (unsigned long long)r,
                        d->name, who);
            /* More than half of the view: a single site never evicts another (two sites: the
             * one that cannot reach the other may be the one cut off), nor does half of it. */
            if (majority_of(d, &v, mask & ~(1ull << s), 0) &&
                gt_wan_member_evict(d->grp[g].member, name, lease) == GT_OK) {
                d->evictions++;
                /* the WAN thread moves to the view without it at once, not a heartbeat later
                 * (the others wait for the chunks that move to us: 0.4 s seen) */
                __atomic_store_n(&d->grp[g].refresh_soon, 1, __ATOMIC_RELEASE);
                GT_WARN("site %s: the majority cannot reach site %s (accusers: %s; %.1f s into "
                        "the wait for round %llu's result%s): evicted it; its chunks move to the "
                        "others, and it rejoins as a joiner once it reaches them",
                        d->name, name, who, waited_s, (unsigned long long)r,
                        waited_s > 0 ? "" : ", before it was needed");
            }
        }
        if (put) d->accused |= 1ull << s;
    }
}

/* A missing chunk's owner that is provably gone — our mesh's dial to it was refused
 * (ECONNREFUSED: its host's kernel answers for a process that died) and no connection is up —
 * is evicted by this site alone, at once, as a restarted site takes over its dead
 * predecessor's name (replace_gone): the survivors of a kill -9 need not wait for its lease to
 * run out. Only the sites that dial it can tell (a site dials the lower-indexed ones), so a
 * killed highest-indexed site still goes with its lease. A frozen or cut-off site keeps its
 * listener: never taken for gone. tried[s]: the lease of s already tried in this wait. Not
 * under d->lock. */
static void evict_refused(gt_diloco_t *d, uint64_t owners, uint64_t r, double waited_s,
                          int64_t *tried)
{
    gt_wan_member_info_t who;
    for (uint32_t s = 0; s < 64 && s < d->cfg->n_sites; s++) {
        if (!(owners >> s & 1) || s == d->site) continue;
        for (uint32_t g = 0; g < d->n_grp; g++) {
            int found = view_member(d, g, d->cfg->sites[s].name, &who);
            pthread_mutex_lock(&d->lock);
            int refused = gt_wan_mesh_peer_refused(d->grp[g].mesh, s);
            pthread_mutex_unlock(&d->lock);
            if (!found || !refused || !who.lease || (g == 0 && tried[s] == who.lease)) continue;
            if (g == 0) tried[s] = who.lease;
            if (gt_wan_member_evict(d->grp[g].member, who.name, who.lease) == GT_OK) {
                d->evictions++;
                __atomic_store_n(&d->grp[g].refresh_soon, 1, __ATOMIC_RELEASE);
                GT_WARN("site %s: site %s is gone (its address %s refuses connections; %.1f s "
                        "into round %llu's wait): evicted it at once instead of waiting for its "
                        "lease to run out",
                        d->name, who.name, who.address, waited_s, (unsigned long long)r);
            }
        }
    }
}

/* Withdraws this site's accusations of the sites in `mask` (all: ~0). */
static void withdraw(gt_diloco_t *d, uint64_t mask)
{
    for (uint32_t s = 0; s < 64 && s < d->cfg->n_sites; s++) {
        if (!((d->accused & mask) >> s & 1)) continue;
        for (uint32_t g = 0; g < d->n_grp; g++)
            if (gt_wan_member_withdraw(d->grp[g].member, d->cfg->sites[s].name) != GT_OK)
                GT_DEBUG("site %s: could not withdraw its accusation of %s (it dies with this "
                         "site's lease)",
                         d->name, d->cfg->sites[s].name);
        d->accused &= ~(1ull << s);
    }
}

/* The probe in flight, judged for eviction: the sites of `candidates` that have not answered it
 * are accused when the peers that did put this site on the majority side. 1: it accused. */
static int judge_probe(gt_diloco_t *d, uint64_t candidates, uint64_t r, double waited_s)
{
    uint64_t ans = reach_mask(d) | (d->site < 64 ? 1ull << d->site : 0);
    gt_wan_view_t v0;
    pthread_mutex_lock(&d->lock);
    v0 = d->grp[0].view;
    pthread_mutex_unlock(&d->lock);
    uint64_t silent = candidates & ~ans;
    if (!silent || !majority_of(d, &v0, ans, 1)) return 0;
    accuse(d, silent, r, waited_s);
    return 1;
}

/* ---- the liveness watch ----
 *
 * The probe above goes out once a wait has begun, and its silence is judged evict_after_ms
 * later: a whole-site cut cost each waiting site that lease of waiting and more (bench chaos:
 * 3 s of two sites a cut), although the cut-off site had been silent since the cut began. So
 * the WAN thread also asks every member of the view, once a heartbeat, a bare liveness probe
 * (dl_live_tick; its answer is a header), and notes when each last answered. The owner of a
 * missing chunk that the sites of this side have not heard from for evict_after_ms is then
 * accused as soon as its result is due — from the shortest straggler deadline after the
 * submission, during the overlap before the wait as in the wait — rather than a probe's
 * evict_after_ms after the wait began. The rule is the same (silence for evict_after_ms, this
 * site on the majority side, a majority of accusers); only the clock starts when the silence
 * does. Only with three sites or more (two never evict). */

/* Under d->lock, from the WAN thread: a liveness probe to every member of group 0's view once a
 * heartbeat; a member that is new, or a new incarnation (lease), is watched from now. */
void dl_live_tick(gt_diloco_t *d, uint64_t now)
{
    const gt_wan_view_t *v = &d->grp[0].view;
    if (d->sync_dp || v->n_members < 3 || now < d->live_next_ns) return;
    d->live_next_ns = now + (uint64_t)d->cfg->membership.heartbeat_ms * 1000000ull;
    uint64_t in_view = 0;
    for (uint32_t k = 0; k < v->n_members; k++) {
        uint32_t i;
        if (gt_topo_site_index(d->cfg, v->members[k].name, &i) != GT_OK || i == d->site ||
            i >= GT_OUTER_MAX_SITES)
            continue;
        if (i < 64) in_view |= 1ull << i;
        if (!d->live_from_ns[i] || d->live_lease[i] != v->members[k].lease) {
            d->live_from_ns[i] = now;
            d->live_lease[i] = v->members[k].lease;
            d->heard_ns[i] = 0;
        }
        if (dl_probe_send(d, 0, i, PROBE_LIVE, 0) != GT_OK) {
            /* unsent (no connection up): counts as silence, as a lost probe does */
        }
    }
    for (uint32_t i = 0; i < 64 && i < GT_OUTER_MAX_SITES; i++)
        if (!(in_view >> i & 1)) d->live_from_ns[i] = 0; /* out of the view: watched anew */
}

/* The sites the liveness watch has heard from within evict_after_ms (`heard`), and those it has
 * not heard from for that long while watching them (returned). Bit s: site s. */
static uint64_t live_silent(gt_diloco_t *d, uint64_t now, uint64_t *heard)
{
    uint64_t evict_ns = evict_after_ns(d->cfg), silent = 0;
    *heard = 0;
    pthread_mutex_lock(&d->lock);
    for (uint32_t i = 0; i < 64 && i < GT_OUTER_MAX_SITES; i++) {
        if (!d->live_from_ns[i]) continue;
        uint64_t last = d->heard_ns[i] > d->live_from_ns[i] ? d->heard_ns[i] : d->live_from_ns[i];
        if (now - last >= evict_ns)
            silent |= 1ull << i;
        else if (d->heard_ns[i])
            *heard |= 1ull << i;
    }
    pthread_mutex_unlock(&d->lock);
    return silent;
}

/* Puts the peers of peers[0..n) that the liveness watch has heard from within three heartbeats
 * (or does not watch) first, in their order, and returns how many they are — n when none is.
 * A fetch striped across peers waits for its slowest stripe: one across a cut never comes, and
 * the fetch waits its whole limit before it asks the peers one by one (seen: a joiner's rebase
 * took 4.4 s, its anchor striped across a peer it was cut off from). */
uint32_t dl_heard_first(gt_diloco_t *d, uint32_t *peers, uint32_t n)
{
    uint32_t heard[GT_WAN_MAX_MEMBERS], rest[GT_WAN_MAX_MEMBERS], h = 0, o = 0;
    uint64_t now = gt_time_ns(), fresh = 3ull * d->cfg->membership.heartbeat_ms * 1000000ull;
    if (n > GT_WAN_MAX_MEMBERS) return n;
    pthread_mutex_lock(&d->lock);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t p = peers[k];
        if (p >= GT_OUTER_MAX_SITES || !d->live_from_ns[p] ||
            (d->heard_ns[p] && now - d->heard_ns[p] < fresh))
            heard[h++] = p;
        else
            rest[o++] = p;
    }
    pthread_mutex_unlock(&d->lock);
    memcpy(peers, heard, h * sizeof *peers);
    memcpy(peers + h, rest, o * sizeof *peers);
    return h ? h : n;
}

/* Whether the liveness watch judges now (every 50 ms; the caller's loop turns far faster): the
 * owners' mask it needs is computed only then. */
static int live_judge_due(gt_diloco_t *d, uint64_t now)
{
    if (now < d->live_judge_ns) return 0;
    d->live_judge_ns = now + 50000000ull;
    return 1;
}

/* The liveness watch's judgement of the owners in `owners` of what round r still misses:
 * withdraws the accusations of sites heard from again, and accuses those not heard from for
 * evict_after_ms when the sites heard from put this site on the majority side. 1: it accused
 * (the caller asks again, once a heartbeat, whether the accusers are a majority yet). */
static int judge_live(gt_diloco_t *d, uint64_t owners, uint64_t r, double waited_s)
{
    uint64_t now = gt_time_ns(), heard = 0, self = d->site < 64 ? 1ull << d->site : 0;
    uint64_t silent = live_silent(d, now, &heard) & owners & ~self & ~d->accused;
    if (d->accused & heard) withdraw(d, d->accused & heard); /* it answers again */
    if (!silent) return 0;
    gt_wan_view_t v0;
    pthread_mutex_lock(&d->lock);
    v0 = d->grp[0].view;
    pthread_mutex_unlock(&d->lock);
    if (!majority_of(d, &v0, heard | self, 1)) return 0;
    accuse(d, silent, r, waited_s);
    return 1;
}

/* The overlap between a submission and its apply step (training thread, after each step): the
 * owners of chunks of a pending round still missing once the shortest straggler deadline has
 * passed since the submission are judged by the liveness watch. Its accusations stand until
 * the wait for that result ends (dl_watch_end). */
void dl_live_watch(gt_diloco_t *d)
{
    if (d->sync_dp || d->join_rebase >= 0) return;
    uint64_t now = gt_time_ns(), due = (uint64_t)d->cfg->outer.deadline_min_ms * 1000000ull;
    uint64_t hb = (uint64_t)d->cfg->membership.heartbeat_ms * 1000000ull;
    for (uint32_t f = 0; f < d->F; f++) {
        if (d->fpending[f] < 0 || now - d->fsubmit_ns[f] < due || !live_judge_due(d, now)) continue;
        uint64_t r = (uint64_t)d->fpending[f], owners = missing_owners(d, f, r, 0);
        if (owners && judge_live(d, owners, r, 0.0)) {
            d->live_accuse_ns = now + hb;
        } else if (owners && d->accused && now >= d->live_accuse_ns) {
            accuse(d, d->accused, r, 0.0); /* the other accusers may come later */
            d->live_accuse_ns = now + hb;
        }
    }
}

/* A joiner waiting for its peers to apply the round whose anchor it takes (dl_join_rebase)
 * waits on the run as a trainer's result wait does, so it takes part in the eviction too: it
 * probes its view, and accuses the training peers (`suspects`) that answer none of a probe for
 * membership.evict_after_ms. Seen: a whole-site cut while a site was joining left one accuser
 * of the cut-off site (a majority needs two of three), and the joiner waited 5.1 s. Call
 * dl_watch_end when the wait ends. */
void dl_watch_step(gt_diloco_t *d, struct dl_watch *w, uint64_t waited, uint64_t suspects,
                   uint64_t r)
{
    const gt_topo_config_t *c = d->cfg;
    uint64_t now = gt_time_ns(), evict_ns = evict_after_ns(c);
    if (waited < (uint64_t)c->outer.deadline_min_ms * 1000000ull) return;
    if (!w->probing) {
        reach_start(d);
        w->probing = 1;
    } else if (now - d->reach_sent_ns >= evict_ns) {
        w->probing = 0; /* judged; the next call probes again */
        uint64_t ans = reach_mask(d);
        if (d->accused & ans) withdraw(d, ans); /* it answers again */
        if (judge_probe(d, suspects & ~(d->site < 64 ? 1ull << d->site : 0), r, waited * 1e-9))
            w->next_accuse = now + (uint64_t)c->membership.heartbeat_ms * 1000000ull;
    }
    if (live_judge_due(d, now) && judge_live(d, suspects, r, waited * 1e-9))
        w->next_accuse = now + (uint64_t)c->membership.heartbeat_ms * 1000000ull;
    if (d->accused && now >= w->next_accuse) {
        accuse(d, d->accused, r, waited * 1e-9);
        w->next_accuse = now + (uint64_t)c->membership.heartbeat_ms * 1000000ull;
    }
}

void dl_watch_end(gt_diloco_t *d)
{
    if (d->accused) withdraw(d, ~0ull);
}

static gt_status_t wait_result(gt_diloco_t *d, uint32_t f, uint64_t r);

/* Drives nothing itself (the WAN thread does): waits until round r's g of every engine of
 * fragment f (one per WAN group of ours) is in d->g. Bounded: a result cannot be missing
 * longer than the straggler deadline plus the time to notice a dead site. An accusation made
 * during the wait is withdrawn at its end: accusations are of sites that hold a wait up now. */
gt_status_t dl_wait_result(gt_diloco_t *d, uint32_t f, uint64_t r)
{
    uint64_t t0 = gt_time_ns();
    gt_status_t st = wait_result(d, f, r);
    dl_watch_end(d);
    double waited = (gt_time_ns() - t0) * 1e-9;
    /* the run's last round aside: its owners wait longer for stragglers by design
     * (gt_outer_set_last_round), so its wait says nothing of the rounds before */
    if (r + 1 < d->cfg->run.rounds && waited > d->wait_max_s) {
        d->wait_max_s = waited;
        d->wait_max_round = r;
    }
    return st;
}

static gt_status_t wait_result(gt_diloco_t *d, uint32_t f, uint64_t r)
{
    const gt_topo_config_t *c = d->cfg;
    uint64_t t0 = gt_time_ns();
    uint64_t limit = (uint64_t)c->outer.deadline_max_ms * 1000000ull +
                     (uint64_t)c->membership.lease_ttl_s * 3000000000ull +
                     (uint64_t)c->wan.peer_timeout_ms * 1000000ull + 10000000000ull;
    gt_status_t st;
    /* past the straggler deadline and a lease: not a slow round any more */
    uint64_t partition_ns = (uint64_t)c->outer.deadline_max_ms * 1000000ull +
                            (uint64_t)c->membership.lease_ttl_s * 1000000000ull;
    /* the lower end of a cut link waits this much longer than `limit` (below) */
    uint64_t grace = (uint64_t)c->membership.lease_ttl_s * 1000000000ull +
                     2ull * c->membership.heartbeat_ms * 1000000ull +
                     (uint64_t)c->wan.peer_timeout_ms * 1000000ull + 5000000000ull;
    /* After a view change that moves chunks (a site left), the round gets this long again:
     * the new owners need the senders' re-sends (or a survivor's forward of the leaver's
     * results) and, for a chunk re-opened, its deadline. */
    uint64_t settle = (uint64_t)c->outer.deadline_max_ms * 1000000ull +
                      (uint64_t)c->wan.peer_timeout_ms * 1000000ull +
                      2ull * c->membership.heartbeat_ms * 1000000ull;
    /* eviction by the majority (above): silence that long, judged from the first probe sent
     * once the wait is past the shortest straggler deadline */
    uint64_t evict_ns = evict_after_ns(c);
    uint64_t probe_from = (uint64_t)c->outer.deadline_min_ms * 1000000ull;
    if (probe_from > partition_ns) probe_from = partition_ns;
    uint64_t next_probe = 0, view_ns = 0, epoch0 = 0, next_accuse = 0;
    uint64_t reached = 0, reached_ns = 0; /* the last probe's answers, and when */
    int probing = 0, waited_longer = 0, limit_passed = 0, settling = 0, owners_up = 0;
    int judged = 0;          /* the probe in flight was judged for silent owners */
    int64_t tried[64] = {0}; /* evict_refused: the lease of each site tried in this wait */
    uint64_t next_refused = 0;
    gt_diloco_state_t prev = d->state;
    d->state = GT_DILOCO_WAITING;
    uint64_t got = 0; /* bit i: group i's result taken */
    /* wait_s grows as the wait goes on: the status written meanwhile, and a wait that ends in
     * leaving (a removed site's last status is what goodput's breakdown reads), count it */
    uint64_t tick = t0;
    for (;;) {
        uint64_t t_now = gt_time_ns();
        d->wait_s += (t_now - tick) * 1e-9;
        tick = t_now;
        st = GT_OK;
        pthread_mutex_lock(&d->lock);
        for (uint32_t i = 0; i < d->n_grp && st == GT_OK; i++) {
            if (got >> i & 1) continue;
            uint32_t e = f * d->n_grp + i;
            gt_status_t one = dl_take_result(d, e, r);
            if (one == GT_OK)
                got |= 1ull << i;
            else
                st = one;
        }
        int gone = 0; /* a group's result for r is no longer kept */
        for (uint32_t i = 0; i < d->n_grp && st == GT_ERR_AGAIN; i++)
            if (!(got >> i & 1) && gt_outer_result_gone(d->outers[f * d->n_grp + i], r)) gone = 1;
        uint64_t epoch = dl_view(d)->epoch;
        pthread_mutex_unlock(&d->lock);
        if (st != GT_ERR_AGAIN) break;
        if (d->p.stop && *d->p.stop) return GT_ERR_CLOSED;
        if (d->wan_error) return (gt_status_t)d->wan_error;
        if (gone) {
            GT_ERROR("site %s: the other sites are more than %u rounds ahead: round %llu's result "
                     "is no longer kept here; it leaves, and rejoins as a joiner (from their "
                     "anchor) when started again",
                     d->name, gt_outer_rounds_kept(), (unsigned long long)r);
            return GT_ERR_PEER_LOST;
        }
        uint64_t now = gt_time_ns(), waited = now - t0;
        if (epoch != epoch0) { /* the first pass, or the view changed while we wait */
            if (epoch0) view_ns = now;
            epoch0 = epoch;
        }
        /* Every owner of what is missing answered our last probe: the link at fault is not
         * ours — the owners wait on each other across a cut, and one of them leaves (the rule
         * below), moving its chunks. A site that reaches everyone then waits up to twice the
         * grace longer. Seen: the middle site of an a-c cut gave up first and left, then both
         * ends did, and the run ended with three rejoins. */
        uint64_t owners_missing = 0;
        if (waited > limit) {
            owners_missing = missing_owners(d, f, r, got);
            if (d->site < 64) owners_missing &= ~(1ull << d->site);
        }
        int owners_reached = waited > limit && reached_ns &&
                             now - reached_ns < 2ull * c->wan.peer_timeout_ms * 1000000ull &&
                             owners_missing && (owners_missing & ~reached) == 0;
        if (owners_reached && waited <= limit + 2 * grace) {
            if (!owners_up)
                GT_WARN("site %s: round %llu's result has not arrived in %.0f s, but every owner "
                        "of what is missing answers: they wait on each other (a cut between "
                        "them?); waiting up to %.0f s more",
                        d->name, (unsigned long long)r, waited * 1e-9,
                        (limit + 2 * grace - waited) * 1e-9);
            owners_up = 1;
        } else if (waited > limit && view_ns && now - view_ns < settle) {
            /* Seen: the far end of a cut link left, the view dropped it, and this site gave up
             * 50 ms later on the chunks that had just moved to itself — the survivor's forward
             * of the leaver's results was on its way. */
            if (!settling)
                GT_WARN("site %s: round %llu's result has not arrived in %.0f s, but the view "
                        "changed %.1f s ago: waiting up to %.0f s more for the chunks it moved",
                        d->name, (unsigned long long)r, waited * 1e-9, (now - view_ns) * 1e-9,
                        settle * 1e-9);
            settling = 1;
        } else if (waited > limit && waited <= limit + grace) {
            /* One link cut while both of its ends reach the rest: each end waits for chunks
             * the other owns, and were both to give up, both would leave. The end with the
             * higher index leaves first; the other waits `grace` longer, by when the view has
             * dropped the leaver and its chunks have moved to sites it reaches. */
            if (d->site < 63 && owners_missing >> (d->site + 1)) { /* above us: it leaves */
                if (!waited_longer)
                    GT_WARN("site %s: round %llu's result has not arrived in %.0f s; a site "
                            "with a higher index owns some of what is missing, and leaves first "
                            "if it is stuck too: waiting up to %.0f s more",
                            d->name, (unsigned long long)r, waited * 1e-9, grace * 1e-9);
                waited_longer = 1;
                limit_passed = 0;
            } else {
                limit_passed = 1;
            }
        } else if (waited > limit) {
            limit_passed = 1;
        }
        if (limit_passed) {
            char missing[256];
            uint32_t i = 0; /* the first group whose result is missing */
            while (i + 1 < d->n_grp && (got >> i & 1)) i++;
            pthread_mutex_lock(&d->lock);
            size_t n = gt_outer_missing(d->outers[f * d->n_grp + i], r, missing, sizeof missing);
            pthread_mutex_unlock(&d->lock);
            /* It leaves (exit 3) rather than fails: the others may well go on without it — a
             * link cut between it and a chunk's owner while both reach the rest (neither is a
             * minority) ended both ends of the link here — and, started again, it rejoins as a
             * joiner from whoever it reaches. */
            GT_ERROR("site %s: round %llu's result has not arrived in %.0f s (%zu chunks missing: "
                     "%s); giving up: it leaves, and rejoins as a joiner when started again",
                     d->name, (unsigned long long)r, waited * 1e-9, n, missing);
            return GT_ERR_PEER_LOST;
        }
        if (waited > probe_from && !probing && now >= next_probe) {
            reach_start(d);
            probing = 1;
            judged = 0;
        } else if (probing) {
            if (!judged && now - d->reach_sent_ns >= evict_ns) {
                /* The owners of what is missing that have not answered this probe. */
                judged = 1;
                if (judge_probe(d, missing_owners(d, f, r, got), r, waited * 1e-9))
                    next_accuse = now + (uint64_t)c->membership.heartbeat_ms * 1000000ull;
            }
            int cut = reach_verdict(d, now);
            if (cut >= 0) {
                probing = 0;
                next_probe = now + (evict_ns < (uint64_t)c->wan.peer_timeout_ms * 1000000ull
                                        ? evict_ns
                                        : (uint64_t)c->wan.peer_timeout_ms * 1000000ull);
                reached = reach_mask(d);
                reached_ns = now;
                if (d->accused & reached) withdraw(d, reached); /* it answers again */
            }
            if (cut > 0 && waited <= partition_ns) cut = 0; /* not a partition yet */
            if (cut > 0) {
                GT_ERROR("site %s: round %llu's result has not arrived in %.0f s and its WAN "
                         "reaches less than a majority of the view (a partition): it leaves, so "
                         "the others go on without it, and rejoins as a joiner when started "
                         "again",
                         d->name, (unsigned long long)r, waited * 1e-9);
                return GT_ERR_PEER_LOST;
            }
        }
        if ((now - d->fsubmit_ns[f] > probe_from || waited > probe_from) &&
            live_judge_due(d, now) && judge_live(d, missing_owners(d, f, r, got), r, waited * 1e-9))
            next_accuse = now + (uint64_t)c->membership.heartbeat_ms * 1000000ull;
        if (waited > probe_from && now >= next_refused) {
            next_refused = now + 50000000ull; /* every 50 ms: a redial takes 300 ms */
            evict_refused(d, missing_owners(d, f, r, got), r, waited * 1e-9, tried);
        }
        /* The other accusers may come later: look again while this site accuses. */
        if (d->accused && now >= next_accuse) {
            accuse(d, d->accused, r, waited * 1e-9);
            next_accuse = now + (uint64_t)c->membership.heartbeat_ms * 1000000ull;
        }
        dl_write_status(d, 0);
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    if (st != GT_OK) return st;
    GT_DEBUG("site %s: round %llu's result after %.2f s", d->name, (unsigned long long)r,
             (gt_time_ns() - t0) * 1e-9);
    d->state = prev;
    return GT_OK;
}
