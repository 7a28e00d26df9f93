/* connect.c — a site's links to the run: the outer engine (outer/), the mesh of secure
 * connections to the other sites, membership in etcd, and the background thread that drives
 * them.
 *
 * The thread exists so that a site answers its peers promptly — closes the rounds of chunks it
 * owns, serves state requests, renews its lease — however long the caller's steps take. It
 * holds `lock` while it touches the mesh or the engine; the caller's thread takes the same lock
 * to submit, to take a result, or to read counters. The run has G WAN groups (G = the least
 * common multiple of the sites' ranks; group g carries lanes l mod G = g), each with its own
 * engine per fragment, its own mesh on every site's port + g, its own membership keys and
 * secure-channel run id RUN.rankG; rank k of a site of R ranks runs the groups g mod R = k,
 * so a site sends the bytes a site of one rank would, spread over its ranks, whatever R is.
 */
#include "diloco_internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

gt_status_t dl_allreduce(gt_diloco_t *d, uint64_t *v, size_t n, gt_diloco_op_t op)
{
    if (d->ranks <= 1) return GT_OK;
    return d->p.comm.allreduce_u64(d->p.comm.ctx, v, n, op);
}

gt_status_t dl_agree(gt_diloco_t *d, gt_status_t st)
{
    if (d->ranks <= 1) return st;
    uint64_t v = (uint64_t)(-(int64_t)st); /* 0 for GT_OK, else the error's magnitude */
    gt_status_t e = dl_allreduce(d, &v, 1, GT_DILOCO_OP_MAX);
    if (e != GT_OK) { /* no agreement: a rank is gone or the communicator broke */
        d->agreed = GT_OK;
        return e;
    }
    return d->agreed = (gt_status_t)(-(int64_t)v);
}

/* What reaches a group's mesh besides the outer protocol's messages, which its port gives to
 * the engines (outer/port.c): the state transfer and the probes. */
static void on_other(void *ctx, const gt_wan_msg_t *msg, const void *buf, size_t len)
{
    struct dl_group *gr = ctx;
    if (msg->type == GT_WAN_MSG_STATE_REQ || msg->type == GT_WAN_MSG_STATE_CHUNK)
        dl_on_state(gr, msg, buf, len);
    else if (msg->type == GT_WAN_MSG_PROBE || msg->type == GT_WAN_MSG_PROBE_INFO ||
             msg->type == GT_WAN_MSG_START)
        dl_on_probe(gr, msg, buf, len);
    else
        dl_bad_message(gr->d, msg, "a message type the site does not take");
}

const gt_wan_view_t *dl_view(const gt_diloco_t *d)
{
    static const gt_wan_view_t none;
    return d->grp ? &d->grp[0].view : &none;
}

void dl_mesh_stats(const gt_diloco_t *d, gt_wan_mesh_stats_t *ms)
{
    memset(ms, 0, sizeof *ms);
    for (uint32_t i = 0; d->grp && i < d->n_grp; i++) {
        if (!d->grp[i].mesh) continue;
        gt_wan_mesh_stats_t one;
        gt_wan_mesh_stats(d->grp[i].mesh, &one);
        uint64_t *sum = (uint64_t *)ms; /* every counter up to the gate's two u32 is a u64 */
        const uint64_t *add = (const uint64_t *)&one;
        size_t n64 = offsetof(gt_wan_mesh_stats_t, gate.preauth_now) / sizeof(uint64_t);
        for (size_t k = 0; k < n64; k++) sum[k] += add[k];
        ms->gate.preauth_now += one.gate.preauth_now;
        ms->gate.preauth_peak += one.gate.preauth_peak;
        ms->emu_held_by_cut += one.emu_held_by_cut;
        ms->emu_refused_by_cut += one.emu_refused_by_cut;
    }
}

size_t dl_mesh_pending(const gt_diloco_t *d)
{
    size_t n = 0;
    for (uint32_t i = 0; d->grp && i < d->n_grp; i++)
        if (d->grp[i].mesh) n += gt_wan_mesh_pending(d->grp[i].mesh);
    return n;
}

void dl_outer_stats(const gt_diloco_t *d, gt_outer_stats_t *os)
{
    memset(os, 0, sizeof *os);
    for (uint32_t f = 0; f < d->n_eng; f++) {
        if (!d->outers[f]) continue;
        gt_outer_stats_t one;
        gt_outer_stats(d->outers[f], &one);
        uint64_t *sum = (uint64_t *)os;
        const uint64_t *add = (const uint64_t *)&one;
        for (size_t i = 0; i < sizeof one / sizeof(uint64_t); i++) sum[i] += add[i];
    }
    os->bad_messages += d->bad_messages; /* the STATE, PROBE and START messages' (probe.c) */
    for (uint32_t i = 0; d->grp && i < d->n_grp; i++) /* outer messages of no fragment here */
        os->bad_messages += gt_outer_port_bad(d->grp[i].port);
}

static gt_status_t codec_params(const gt_topo_config_t *cfg, int sync_dp, gt_cmp_params_t *cp)
{
    gt_cmp_params_t p;
    gt_status_t st = gt_wan_codec_params(cfg, NULL, &p);
    if (st != GT_OK) return st;
    if (sync_dp) { /* the baseline: bf16 gradients, as a bf16 all-reduce would send */
        p.codec = GT_CMP_BF16;
        p.error_feedback = 0;
        p.zstd = GT_CMP_ZSTD_OFF;
    }
    *cp = p;
    return GT_OK;
}

gt_wan_member_params_t dl_member_params(gt_diloco_t *d, const struct dl_group *gr, const char **eps)
{
    const gt_topo_config_t *cfg = d->cfg;
    for (uint32_t k = 0; k < cfg->membership.n_endpoints; k++)
        eps[k] = cfg->membership.endpoints[k];
    gt_wan_member_params_t mbp = GT_WAN_MEMBER_PARAMS_INIT;
    mbp.endpoints = eps;
    mbp.n_endpoints = cfg->membership.n_endpoints;
    mbp.prefix = cfg->membership.prefix;
    mbp.run_id = gr->run_id;
    mbp.lease_ttl_s = cfg->membership.lease_ttl_s;
    mbp.heartbeat_ms = cfg->membership.heartbeat_ms;
    mbp.tls_ca = cfg->membership.tls_ca;
    mbp.tls_cert = cfg->membership.tls_cert;
    mbp.tls_key = cfg->membership.tls_key;
    return mbp;
}

gt_status_t dl_connect(gt_diloco_t *d)
{
    const gt_topo_config_t *cfg = d->cfg;
    gt_status_t st;
    gt_wan_keypair_t kp;
    int have_kp = 0;
    if (cfg->membership.n_endpoints == 0) {
        GT_ERROR("site %s: membership.endpoints is empty; multi-site runs need etcd (`geotrain "
                 "launch` starts one and passes it on)",
                 d->name);
        return GT_ERR_CONFIG;
    }
    if (cfg->security.mode == GT_SECURITY_ENCRYPTED) {
        if ((st = gt_wan_keypair_load(cfg->sites[d->site].secret_key, &kp)) != GT_OK) return st;
        have_kp = 1;
    }
    gt_cmp_params_t cp;
    if ((st = codec_params(cfg, d->sync_dp, &cp)) != GT_OK) goto out;

    gt_outer_params_t op;
    memset(&op, 0, sizeof op);
    op.site_id = d->site;
    op.n_sites = cfg->n_sites;
    op.n_params = d->n;
    op.mem = &d->mem; /* the engines' buffers count with the site's */
    op.n_lanes = cfg->wan.lanes;
    op.ranks = d->G * d->F; /* engine (fragment f, group g): the lanes of "rank" g + G·f */
    op.codec = cp;
    op.quorum = cfg->outer.quorum;
    op.deadline_min_ms = cfg->outer.deadline_min_ms;
    op.deadline_max_ms = cfg->outer.deadline_max_ms;
    op.deadline_mad_k = cfg->outer.deadline_mad_k;
    op.clip_k = cfg->outer.clip_k;
    op.late_fold = cfg->outer.late == GT_LATE_FOLD;
    /* a peer's view follows ours within about a heartbeat (it reads etcd that often, sooner
     * when our messages carry a later epoch): its forward of a leaver's result comes by then */
    op.handover_ms = cfg->membership.heartbeat_ms;
    op.hold_results = !d->sync_dp; /* the apply decodes a result as it sweeps (dl_g_at) */
    double shares[GT_OUTER_MAX_SITES];
    if (cfg->n_sites <= GT_OUTER_MAX_SITES && gt_topo_chunk_shares(cfg, shares) == GT_OK)
        op.shares = shares;
    /* A group's fragments share its mesh through its port: an engine's messages carry its
     * fragment in the header's fragment field and reach fragment f's engine of the same group at
     * the peer (its own lane index, which is per engine, rides in the lane field). */
    for (uint32_t i = 0; i < d->n_grp; i++)
        if ((st = gt_outer_port_create(d->F, on_other, &d->grp[i], &d->grp[i].port)) != GT_OK)
            goto out;
    size_t max_chunk = 0;
    for (uint32_t e = 0; e < d->n_eng; e++) {
        uint32_t f = e / d->n_grp, i = e % d->n_grp;
        op.io = gt_outer_port_io(d->grp[i].port, f);
        op.rank = d->grp[i].g + d->G * f;
        if ((st = gt_outer_create(&op, &d->outers[e])) != GT_OK) goto out;
        if ((st = gt_outer_port_attach(d->grp[i].port, f, d->outers[e])) != GT_OK) goto out;
        /* The run's last round waits longer for every site. sync-dp is synchronous: every
         * round does (every site waits for the slowest, as an all-reduce does; a site left
         * behind by deadline closes would fall out of the kept results and time out). */
        gt_outer_set_last_round(d->outers[e], d->sync_dp ? 0 : (uint64_t)cfg->run.rounds - 1);
        if (gt_outer_len(d->outers[e]) != d->eng_off[e + 1] - d->eng_off[e]) {
            GT_ERROR("site %s: the outer engine's lanes (%zu floats) are not this rank's (%zu)",
                     d->name, gt_outer_len(d->outers[e]), d->eng_off[e + 1] - d->eng_off[e]);
            st = GT_ERR_INTERNAL;
            goto out;
        }
        if (gt_outer_max_chunk(d->outers[e]) > max_chunk)
            max_chunk = gt_outer_max_chunk(d->outers[e]);
    }
    d->outer = d->outers[0];
    d->gbuf_floats = max_chunk; /* our engines' largest chunk: a result decoded a chunk at once */
    if (!d->sync_dp && (st = gt_cmp_create(&cp, &d->gcmp)) != GT_OK) goto out;
    int unequal = 0;
    for (uint32_t k = 0; k < cfg->n_sites; k++)
        unequal |= !gt_topo_site_vacant(&cfg->sites[k]) && cfg->sites[k].ranks != d->ranks;
    if (unequal) {
        /* Sites of other rank counts run other groups: the largest chunk of any group, as the
         * engines cut them, so that every site sizes its messages (and its receive buffers) to
         * the same bound. */
        gt_topo_layout_t *all = NULL;
        gt_topo_layout_params_t lp = GT_TOPO_LAYOUT_PARAMS_INIT;
        lp.n_elems = d->n;
        lp.n_lanes = cfg->wan.lanes;
        lp.n_sites = cfg->n_sites;
        lp.ranks = op.ranks;
        lp.align = cp.block_size ? cp.block_size : 1;
        lp.shares = op.shares;
        if ((st = gt_topo_layout_create(&lp, &all)) != GT_OK) goto out;
        for (size_t k = 0; k < all->n_chunks; k++)
            if (all->chunks[k].count > max_chunk) max_chunk = all->chunks[k].count;
        gt_topo_layout_destroy(all);
    }

    /* The largest message: a chunk's frame (every lane is cut into one chunk per site; with
     * bandwidth-aware shares the largest chunk is bigger than an equal one). Every site must
     * size its receive buffers alike: the bound is the whole run's, not this rank's. */
    gt_cmp_ctx_t *probe = NULL;
    if ((st = gt_cmp_create(&cp, &probe)) != GT_OK) goto out;
    size_t chunk_max = d->n / cfg->n_sites / cfg->wan.lanes;
    if (max_chunk > chunk_max) chunk_max = max_chunk;
    size_t max_msg = 64 + gt_cmp_bound(probe, chunk_max + 2 * cp.block_size + 1024);
    gt_cmp_destroy(probe);
    d->part_floats = (max_msg - STATE_HDR) / sizeof(float);
    /* Emulated cut windows count from the run's start: GT_EMU_START_NS (CLOCK_MONOTONIC, set
     * by `geotrain launch` for every site it starts, restarts included), else now. */
    const char *es = getenv("GT_EMU_START_NS");
    char *end = NULL;
    unsigned long long emu0 = es ? strtoull(es, &end, 10) : 0;
    uint64_t start_ns =
        es && end && *end == 0 && emu0 > 0 && emu0 <= gt_time_ns() ? emu0 : gt_time_ns();
    const char *eps[GT_TOPO_MAX_ENDPOINTS];
    for (uint32_t i = 0; i < d->n_grp; i++) {
        struct dl_group *gr = &d->grp[i];
        gt_wan_mesh_params_t mp;
        memset(&mp, 0, sizeof mp);
        mp.cfg = cfg;
        mp.site = d->site;
        mp.run_id = gr->run_id;
        mp.port_offset = gr->g; /* the same at every site, whatever its ranks */
        mp.keypair = have_kp ? &kp : NULL;
        mp.max_message = max_msg;
        mp.start_ns = start_ns;
        mp.on_message = gt_outer_port_on_message;
        mp.ctx = gr->port;
        if ((st = gt_wan_mesh_create(&mp, &gr->mesh)) != GT_OK) goto out;
        gt_outer_port_set_mesh(gr->port, gr->mesh);

        gt_wan_member_params_t mbp = dl_member_params(d, gr, eps);
        mbp.site = d->name;
        mbp.address = gt_wan_mesh_address(gr->mesh);
        mbp.note = d->resume_note; /* the checkpoints it can resume from (checkpoint.c) */
        /* A site that comes back after a crash may find its old member key still held by the
         * lease of the process that died: revoked at once when that process is provably gone
         * (nobody listens at its address), else waited for until it runs out. */
        mbp.replace_gone = 1;
        /* --reuse-run-id: a finished or abandoned run's keys under this id are deleted before
         * anyone registers (once a site is registered nothing is: agree.c). */
        const char *reuse = getenv("GT_REUSE_RUN_ID");
        int cleared = 0;
        if (reuse && strcmp(reuse, "1") == 0) {
            gt_status_t cs = gt_wan_member_clear_run(&mbp, &cleared);
            if (cs == GT_OK && cleared)
                GT_WARN("site %s: run id '%s' held the keys of a finished or abandoned run in "
                        "etcd (%s/%s): cleared (GT_REUSE_RUN_ID, --reuse-run-id); the run starts "
                        "afresh under it",
                        d->name, d->run_id, mbp.prefix, gr->run_id);
            else if (cs != GT_OK && cs != GT_ERR_EXISTS)
                GT_WARN("site %s: cannot clear run id '%s' in etcd: %s", d->name, d->run_id,
                        gt_status_str(cs));
        }
        uint64_t t_reg = gt_time_ns(),
                 wait_ns = (2ull * cfg->membership.lease_ttl_s + 2) * 1000000000ull;
        while ((st = gt_wan_member_create(&mbp, &gr->member)) == GT_ERR_EXISTS &&
               gt_time_ns() - t_reg < wait_ns && !(d->p.stop && *d->p.stop)) {
            GT_WARN("site %s: its name is still registered (a previous run of it that died?); "
                    "retrying until that lease expires",
                    d->name);
            struct timespec ts = {0, 500000000};
            nanosleep(&ts, NULL);
        }
        if (st != GT_OK) goto out;
        int retired = 0;
        if ((st = gt_wan_member_retired(gr->member, &retired)) != GT_OK) goto out;
        if (retired) {
            GT_ERROR("site %s was retired from run '%s' (geotrain sites remove): it does not take "
                     "part in it any more; a run under another id (--run-id, run.name) can have "
                     "it, or --reuse-run-id once this run is over",
                     d->name, d->run_id);
            st = GT_ERR_RETIRED;
            goto out;
        }
    }
out:
    if (have_kp) gt_wan_keypair_wipe(&kp);
    return st;
}

void dl_disconnect(gt_diloco_t *d)
{
    for (uint32_t i = 0; d->grp && i < d->n_grp; i++) {
        gt_wan_member_destroy(d->grp[i].member); /* deregisters: the others see us leave */
        gt_wan_mesh_destroy(d->grp[i].mesh);
        gt_outer_port_destroy(d->grp[i].port);
        d->grp[i].member = NULL;
        d->grp[i].mesh = NULL;
        d->grp[i].port = NULL;
    }
    for (uint32_t e = 0; e < DL_MAX_ENGINES; e++) {
        gt_outer_destroy(d->outers[e]);
        d->outers[e] = NULL;
    }
    d->outer = NULL;
}

static gt_status_t apply_view(struct dl_group *gr, const gt_wan_view_t *v)
{
    gt_diloco_t *d = gr->d;
    uint32_t live[GT_WAN_MAX_MEMBERS], n = 0;
    uint64_t restarted = 0; /* in the last view and this one, under another lease */
    for (uint32_t k = 0; k < v->n_members; k++) {
        uint32_t i;
        if (gt_topo_site_index(d->cfg, v->members[k].name, &i) != GT_OK) continue;
        live[n++] = i;
        for (uint32_t j = 0; j < gr->view.n_members; j++)
            if (strcmp(gr->view.members[j].name, v->members[k].name) == 0 &&
                gr->view.members[j].lease && v->members[k].lease &&
                gr->view.members[j].lease != v->members[k].lease && i < 64) {
                restarted |= 1ull << i;
                GT_INFO("site %s: site %s was started again (a new lease): what it owned and "
                        "announced before is its previous life's",
                        d->name, v->members[k].name);
            }
    }
    gt_status_t st = gt_wan_mesh_set_view(gr->mesh, v);
    for (uint32_t f = 0; f < d->F && st == GT_OK; f++)
        st = gt_outer_set_view_restarts(d->outers[f * d->n_grp + gr->i], v->epoch, live, n,
                                        restarted, gt_time_ns());
    if (st == GT_OK) {
        if (gr->view.epoch && v->epoch != gr->view.epoch) {
            if (d->n_grp > 1)
                GT_INFO("site %s: WAN group %u: view %llu -> %llu, %u live sites", d->name, gr->g,
                        (unsigned long long)gr->view.epoch, (unsigned long long)v->epoch, n);
            else
                GT_INFO("site %s: view %llu -> %llu, %u live sites", d->name,
                        (unsigned long long)gr->view.epoch, (unsigned long long)v->epoch, n);
        }
        gr->view = *v;
    }
    return st;
}

/* The first rounds that joiners of view v announced in etcd (their member notes: a joiner
 * that could not reach every peer when it planned its join), given to group gr's engines as
 * their JOINs would be: a peer across a cut link learns it with its next view read instead of
 * when the link heals — by then it would have closed rounds the joiner owns (dl_join). */
static void learn_joins(struct dl_group *gr, const gt_wan_view_t *v)
{
    gt_diloco_t *d = gr->d;
    uint64_t now = gt_time_ns();
    for (uint32_t k = 0; k < v->n_members; k++) {
        uint32_t s;
        if (!v->members[k].first_round ||
            gt_topo_site_index(d->cfg, v->members[k].name, &s) != GT_OK || s == d->site)
            continue;
        pthread_mutex_lock(&d->lock);
        for (uint32_t f = 0; f < d->F; f++) {
            gt_outer_t *o = d->outers[f * d->n_grp + gr->i];
            gt_status_t st = !o ? GT_OK : gt_outer_learn_join(o, s, v->members[k].first_round, now);
            if (st != GT_OK)
                GT_WARN("site %s: cannot take site %s's first round %llu from etcd: %s", d->name,
                        v->members[k].name, (unsigned long long)v->members[k].first_round,
                        gt_status_str(st));
        }
        pthread_mutex_unlock(&d->lock);
    }
}

/* Whether this site was retired (`geotrain sites remove`): then says so, once per cause. */
static int say_retired(gt_diloco_t *d, struct dl_group *gr)
{
    int retired = 0;
    if (gt_wan_member_retired(gr->member, &retired) != GT_OK || !retired) return 0;
    GT_ERROR("site %s: retired from the run for good (geotrain sites remove): it leaves without "
             "sending or applying anything more, and does not rejoin",
             d->name);
    return 1;
}

/* Re-reads group gr's membership view when a heartbeat period has passed (or `force`). The
 * etcd requests run without the lock; the new view is installed under it. */
static gt_status_t refresh_group(struct dl_group *gr, int force)
{
    gt_diloco_t *d = gr->d;
    uint64_t now = gt_time_ns();
    /* Asked to read it soon (an eviction here, a peer's later view): at most every eighth of a
     * heartbeat, whatever a peer's messages claim. */
    /* A peer's DELTA or RESULT from a later view: it has moved on (a site removed, or one
     * added), so this site reads the view now rather than at its next heartbeat, and the chunks
     * that moved close sooner. */
    if (gt_outer_port_epoch_seen(gr->port) > gr->view.epoch)
        __atomic_store_n(&gr->refresh_soon, 1, __ATOMIC_RELEASE);
    if (__atomic_load_n(&gr->refresh_soon, __ATOMIC_ACQUIRE) &&
        now - gr->last_view_ns >= (uint64_t)d->cfg->membership.heartbeat_ms * 125000ull &&
        __atomic_exchange_n(&gr->refresh_soon, 0, __ATOMIC_ACQ_REL))
        force = 1;
    if (!force && now - gr->last_view_ns < (uint64_t)d->cfg->membership.heartbeat_ms * 1000000ull)
        return GT_OK;
    gr->last_view_ns = now;
    if (gr->i == 0) dl_added_poll(d); /* sites added mid-run: before the view that has them */
    if (gt_wan_member_health(gr->member) != GT_OK) {
        if (say_retired(d, gr)) return GT_ERR_RETIRED;
        GT_ERROR("site %s: lost its membership lease; the others have removed it (it leaves "
                 "without sending or applying anything more, and rejoins as a joiner when "
                 "started again)",
                 d->name);
        return GT_ERR_PEER_LOST;
    }
    gt_wan_view_t v;
    int changed = 0;
    gt_status_t st = gt_wan_member_sync_view(gr->member, &v, &changed);
    if (st != GT_OK) {
        /* One failed read is an etcd leader election (a member killed: about a second, seen
         * in test_launch_etcd), not news; a failure that lasts half a lease is. While
         * membership is frozen (etcd without quorum) the member has said so once. */
        if (!gr->view_fail_ns) gr->view_fail_ns = now;
        uint64_t half_lease = (uint64_t)d->cfg->membership.lease_ttl_s * 500000000ull;
        if (!gt_wan_member_frozen(gr->member) && !gr->view_fail_said &&
            now - gr->view_fail_ns >= half_lease) {
            GT_WARN("site %s: cannot read the view for %.1f s (%s); retrying", d->name,
                    (now - gr->view_fail_ns) * 1e-9, gt_status_str(st));
            gr->view_fail_said = 1;
        } else {
            GT_DEBUG("site %s: cannot read the view (%s); retrying", d->name, gt_status_str(st));
        }
        return GT_OK; /* etcd hiccup: the lease tells us when it is serious */
    }
    if (gr->view_fail_said)
        GT_INFO("site %s: reads the view again after %.1f s", d->name,
                (now - gr->view_fail_ns) * 1e-9);
    gr->view_fail_ns = 0;
    gr->view_fail_said = 0;
    if (v.epoch == gr->view.epoch) {
        learn_joins(gr, &v);
        return GT_OK;
    }
    int self_in = 0;
    for (uint32_t k = 0; k < v.n_members; k++) self_in |= strcmp(v.members[k].name, d->name) == 0;
    if (!self_in) {
        /* The others moved on without us: we were stopped or cut off past our lease, or
         * retired (`geotrain sites remove` evicts: the view can show it before the heartbeat
         * finds the lease gone; seen in test_launch_retire under the parallel suite). Nothing
         * we hold is current: leave, and come back as a joiner unless retired. */
        if (say_retired(d, gr)) return GT_ERR_RETIRED;
        GT_ERROR("site %s: view %llu no longer includes it: it was removed from the run (frozen "
                 "or cut off for longer than its lease); it leaves without sending or applying "
                 "anything more, and rejoins as a joiner when started again",
                 d->name, (unsigned long long)v.epoch);
        return GT_ERR_PEER_LOST;
    }
    pthread_mutex_lock(&d->lock);
    st = apply_view(gr, &v);
    pthread_mutex_unlock(&d->lock);
    if (st == GT_OK) learn_joins(gr, &v);
    return st;
}

/* Every group's view (each group has its own membership keys, so its own view and epoch). */
gt_status_t dl_refresh_view(gt_diloco_t *d, int force)
{
    gt_status_t st = GT_OK;
    for (uint32_t i = 0; i < d->n_grp && st == GT_OK; i++) st = refresh_group(&d->grp[i], force);
    return st;
}

/* One sample of the bytes sent, every 10 ms: the rate over the last second (or more, when the
 * thread was held up) raises the peak. Under the lock. */
static void sample_rate(gt_diloco_t *d)
{
    uint64_t now = gt_time_ns();
    if (now < d->rate_next_ns) return;
    d->rate_next_ns = now + 10000000ull;
    gt_wan_mesh_stats_t ms;
    dl_mesh_stats(d, &ms);
    uint32_t n = sizeof d->rate_t / sizeof d->rate_t[0];
    if (d->rate_n) { /* against the oldest sample, about 1 s ago (per second, at least 1 s) */
        uint32_t o = d->rate_n == n ? d->rate_i : 0;
        uint64_t dt = now - d->rate_t[o], db = ms.bytes_sent - d->rate_b[o];
        double bps = (double)db * 8.0 / ((dt > 1000000000ull ? dt : 1000000000ull) * 1e-9);
        if (bps > d->peak_wan_bps) d->peak_wan_bps = bps;
    }
    if (d->rate_n < n) d->rate_n++;
    d->rate_t[d->rate_i] = now;
    d->rate_b[d->rate_i] = ms.bytes_sent;
    d->rate_i = (d->rate_i + 1) % n;
}

void dl_leave(gt_diloco_t *d)
{
    pthread_mutex_lock(&d->lock);
    for (uint32_t i = 0; i < d->n_grp; i++) gt_wan_mesh_leave(d->grp[i].mesh);
    pthread_mutex_unlock(&d->lock);
}

/* The membership view, re-read every heartbeat (sooner when asked), in a thread of its own:
 * an etcd request can take its whole timeout (2 s, per endpoint) while a member is down or the
 * cluster elects a leader, and in the WAN thread that held up the meshes and the engines —
 * probes went unanswered (peers were accused of being unreachable), state fetches timed out
 * and deadlines were not kept, all for as long as etcd was slow (seen in chaos runs with etcd
 * members killed). */
/* The stuck-site watch (membership.stuck_after_s), in the membership thread, which does not
 * depend on the training thread: a training thread that has not come back into the library
 * for that long since its last step (a trainer blocked for good, a library spinning on a failed
 * allocation) would keep this site in the view as a straggler for ever, since the heartbeat
 * thread keeps its lease alive. The site leaves (its lease revoked, if the lock is free) and the
 * process ends at once with status 3, as a removed site's does: no exit handler runs (one may
 * wait on the stuck thread). Before the first step and after the last, nothing is watched. */
static void watch_stuck(gt_diloco_t *d)
{
    uint64_t limit = (uint64_t)d->cfg->membership.stuck_after_s * 1000000000ull;
    uint64_t last = __atomic_load_n(&d->t_out, __ATOMIC_SEQ_CST);
    if (!limit || !last || __atomic_load_n(&d->in_step, __ATOMIC_SEQ_CST) ||
        d->state == GT_DILOCO_DONE || d->step >= d->total)
        return;
    uint64_t now = gt_time_ns();
    if (now < last || now - last <= limit) return;
    GT_ERROR("site %s: its training thread has not come back into geotrain for %.0f s since "
             "step %llu (membership.stuck_after_s = %u): the site leaves the run and this process "
             "exits (status 3)",
             d->name, (double)(now - last) * 1e-9, (unsigned long long)d->step,
             d->cfg->membership.stuck_after_s);
    if (pthread_mutex_trylock(&d->lock) == 0) { /* held until the exit: the WAN thread waits */
        for (uint32_t i = 0; i < d->n_grp; i++) {
            gt_wan_mesh_leave(d->grp[i].mesh);
            gt_wan_member_destroy(d->grp[i].member); /* the lease revoked: gone at once */
        }
    }
    fflush(NULL);
    _exit(3);
}

static void *view_main(void *arg)
{
    gt_diloco_t *d = arg;
    while (!d->thread_stop) {
        watch_stuck(d);
        if (d->wan_error != (int)GT_ERR_PEER_LOST && d->wan_error != (int)GT_ERR_RETIRED) {
            gt_status_t st = dl_refresh_view(d, 0);
            if (st == GT_ERR_PEER_LOST || st == GT_ERR_RETIRED) dl_leave(d);
            if (st != GT_OK) d->wan_error = (int)st;
        }
        struct timespec ts = {0, 2000000}; /* refresh_group itself keeps to its period */
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void *wan_main(void *arg)
{
    gt_diloco_t *d = arg;
    uint64_t last = gt_time_ns();
    while (!d->thread_stop) {
        pthread_mutex_lock(&d->lock);
        uint64_t now = gt_time_ns();
        if ((now - last) * 1e-9 > d->wan_gap_max_s) d->wan_gap_max_s = (now - last) * 1e-9;
        if (now - last > dl_fence_ns(d) &&
            now - last > __atomic_load_n(&d->away_ns, __ATOMIC_SEQ_CST))
            __atomic_store_n(&d->away_ns, now - last, __ATOMIC_SEQ_CST);
        __atomic_store_n(&d->alive_ns, now, __ATOMIC_SEQ_CST);
        last = now;
        for (uint32_t i = 0; i < d->n_grp; i++) (void)gt_wan_mesh_progress(d->grp[i].mesh);
        for (uint32_t e = 0; e < d->n_eng; e++) (void)gt_outer_progress(d->outers[e], gt_time_ns());
        sample_rate(d);
        dl_live_tick(d, gt_time_ns());
        dl_fault_cuts_poll(d, gt_time_ns());
        for (uint32_t i = 0; i < d->n_grp; i++)
            if (!d->wan_error && gt_wan_mesh_health(d->grp[i].mesh) != GT_OK) /* no peer */
                d->wan_error = (int)GT_ERR_AUTH;                              /* accepts us */
        pthread_mutex_unlock(&d->lock);
        struct timespec ts = {0, 200000}; /* 0.2 ms: the transports are polled */
        nanosleep(&ts, NULL);
    }
    return NULL;
}

gt_status_t dl_start_thread(gt_diloco_t *d)
{
    d->thread_stop = 0;
    if (pthread_create(&d->thread, NULL, wan_main, d) != 0) {
        GT_ERROR("site %s: cannot start the WAN thread", d->name);
        return GT_ERR_INTERNAL;
    }
    if (pthread_create(&d->view_thread, NULL, view_main, d) != 0) {
        GT_ERROR("site %s: cannot start the membership thread", d->name);
        d->thread_stop = 1;
        pthread_join(d->thread, NULL);
        return GT_ERR_INTERNAL;
    }
    d->thread_running = 1;
    return GT_OK;
}

void dl_stop_thread(gt_diloco_t *d)
{
    if (!d->thread_running) return;
    d->thread_stop = 1;
    pthread_join(d->view_thread, NULL);
    pthread_join(d->thread, NULL);
    d->thread_running = 0;
}

/* Waits until every expected site has registered in every group of ours (or the connect
 * timeout passes), so that round 0 starts with everyone rather than with whoever came up
 * first; then lets the connections come up. */
gt_status_t dl_await_sites(gt_diloco_t *d)
{
    const gt_topo_config_t *cfg = d->cfg;
    uint64_t t0 = gt_time_ns();
    uint32_t want = d->p.expect_sites ? d->p.expect_sites : dl_first_sites(cfg);
    uint32_t checked = 1; /* sites whose configurations were compared with ours (agree.c) */
    for (;;) {
        uint32_t fewest = UINT32_MAX, first = 0;
        for (uint32_t i = 0; i < d->n_grp; i++) {
            gt_wan_view_t live;
            gt_status_t st = gt_wan_member_list(d->grp[i].member, &live);
            uint32_t n = st == GT_OK ? live.n_members : 0;
            if (n < fewest) fewest = n;
            if (i == 0) first = n;
        }
        /* Each site that registers is compared as it comes, so that a mismatch stops every
         * site at once rather than after the others have waited for a site that never comes. */
        if (first != checked && first > 1) {
            gt_status_t st = dl_check_config(d);
            if (st != GT_OK) return st;
            checked = first;
        }
        if (fewest >= want) break;
        if (d->p.stop && *d->p.stop) return GT_ERR_CLOSED;
        if ((gt_time_ns() - t0) / 1000000u > cfg->wan.connect_timeout_ms) {
            GT_WARN("site %s: starting with %u of %u sites after %u ms", d->name, fewest,
                    cfg->n_sites, cfg->wan.connect_timeout_ms);
            break;
        }
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
    gt_status_t st = dl_refresh_view(d, 1);
    uint64_t t1 = gt_time_ns();
    while (st == GT_OK && (gt_time_ns() - t1) / 1000000u < cfg->wan.connect_timeout_ms) {
        int all = 1;
        for (uint32_t i = 0; i < d->n_grp; i++) {
            struct dl_group *gr = &d->grp[i];
            (void)gt_wan_mesh_progress(gr->mesh);
            if (gt_wan_mesh_health(gr->mesh) != GT_OK) return GT_ERR_AUTH; /* no peer accepts */
            uint32_t ready = 1;
            for (uint32_t k = 0; k < gr->view.n_members; k++) {
                uint32_t s;
                if (gt_topo_site_index(cfg, gr->view.members[k].name, &s) == GT_OK && s != d->site)
                    ready += (uint32_t)gt_wan_mesh_peer_ready(gr->mesh, s);
            }
            all &= ready >= gr->view.n_members;
        }
        if (all) break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return st;
}

gt_status_t dl_confirm_member(gt_diloco_t *d)
{
    const gt_topo_config_t *c = d->cfg;
    /* Two keepalives answered after now: the second was sent after the pause, so the health it
     * leaves says what etcd holds now. etcd may be electing a leader or have a member down (a
     * keepalive then times out and the next endpoint is asked): a lease and two heartbeats. */
    uint64_t limit =
        (3ull * c->membership.heartbeat_ms + c->membership.lease_ttl_s * 1000ull) * 1000000ull;
    uint64_t a0[GT_TOPO_MAX_GROUPS], t0 = gt_time_ns();
    for (uint32_t i = 0; i < d->n_grp; i++) a0[i] = gt_wan_member_answers(d->grp[i].member);
    int answered = 1;
    for (uint32_t i = 0; i < d->n_grp; i++) {
        while (gt_wan_member_answers(d->grp[i].member) < a0[i] + 2 &&
               gt_wan_member_health(d->grp[i].member) == GT_OK && gt_time_ns() - t0 < limit) {
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
        }
        answered &= gt_wan_member_answers(d->grp[i].member) >= a0[i] + 2;
    }
    if (d->wan_error) return (gt_status_t)d->wan_error;
    for (uint32_t i = 0; i < d->n_grp; i++)
        if (gt_wan_member_health(d->grp[i].member) != GT_OK) {
            GT_ERROR("site %s: was away longer than its lease and lost it: the others have "
                     "removed it; it leaves without sending or applying anything more, and "
                     "rejoins as a joiner when started again",
                     d->name);
            return GT_ERR_PEER_LOST;
        }
    if (!answered) {
        /* Whether the others removed it while it was away only etcd can say, and etcd did not
         * answer: going on could apply a round the others redid without it. Leaving costs a
         * rejoin; guessing wrong would cost a silent divergence. */
        GT_ERROR("site %s: was away and etcd has not answered for %.1f s since: it cannot tell "
                 "whether the others removed it, so it leaves without sending or applying "
                 "anything more, and rejoins as a joiner when started again",
                 d->name, (gt_time_ns() - t0) * 1e-9);
        return GT_ERR_PEER_LOST;
    }
    /* A member now; the view thread reads the view at once, so a removal that etcd already
     * holds but the lease does not show (a view without us) is seen before the next round. */
    for (uint32_t i = 0; i < d->n_grp; i++)
        __atomic_store_n(&d->grp[i].refresh_soon, 1, __ATOMIC_RELEASE);
    return GT_OK;
}

/* Half the time after which the others may remove a silent site (its lease, or the majority's
 * eviction): a gap of the WAN thread this long, or a pause of the trainer, is worth a question
 * to etcd before anything more goes out or is applied. */
uint64_t dl_fence_ns(const gt_diloco_t *d)
{
    const gt_topo_config_t *c = d->cfg;
    uint64_t lease = (uint64_t)c->membership.lease_ttl_s * 1000000000ull;
    uint64_t evict =
        c->membership.evict_after_ms ? (uint64_t)c->membership.evict_after_ms * 1000000ull : lease;
    return (evict < lease ? evict : lease) / 2;
}

/* The membership fence, before a submit or an apply of round r (`what`), collective over the
 * site's ranks: a process that was stopped (SIGSTOP, a frozen host) anywhere — between steps,
 * inside one, inside the library's own sleeps or waits — may have been removed by the others,
 * who then redo the chunks it owned without it. Its WAN thread stops with it, so the gap
 * between two of its turns, or a WAN thread that has not turned for that long (it has not run
 * since the pause either), is the sign, wherever the pause fell; `away` adds the caller's own
 * sign (a wait longer than a lease). Then a keepalive answered after the pause says whether it
 * is still a member, before anything more leaves or is applied. */
gt_status_t dl_fence(gt_diloco_t *d, const char *what, uint64_t r, int away)
{
    if (d->sync_dp || !d->grp || !d->n_grp || !d->grp[0].member) return GT_OK;
    uint64_t now = gt_time_ns(), bound = dl_fence_ns(d);
    uint64_t gap = __atomic_exchange_n(&d->away_ns, 0, __ATOMIC_SEQ_CST);
    uint64_t alive = __atomic_load_n(&d->alive_ns, __ATOMIC_SEQ_CST);
    if (alive && now > alive && now - alive > bound && now - alive > gap) gap = now - alive;
    uint64_t v = gap || away ? 1 : 0;
    gt_status_t st = dl_allreduce(d, &v, 1, GT_DILOCO_OP_MAX);
    if (st != GT_OK || !v) return st;
    uint64_t t0 = gt_time_ns();
    gt_status_t live = dl_confirm_member(d);
    d->fence_confirms++;
    d->wait_s += (gt_time_ns() - t0) * 1e-9; /* a wait, on the membership service */
    char why[96];
    if (gap)
        snprintf(why, sizeof why, "this process was stopped for %.1f s", gap * 1e-9);
    else
        snprintf(why, sizeof why, "it waited longer than its lease");
    GT_INFO("site %s: before the %s of round %llu (%s): membership %s in %.2f s", d->name, what,
            (unsigned long long)r, why, live == GT_OK ? "confirmed" : gt_status_str(live),
            (gt_time_ns() - t0) * 1e-9);
    if ((live = dl_agree(d, live)) != GT_OK) {
        if (live == GT_ERR_PEER_LOST) dl_leave(d);
        d->wan_error = (int)live;
        d->state = GT_DILOCO_FAILED;
    }
    return live;
}

/* The live peers of group i's current view (site indices), not us. */
uint32_t dl_view_peers(gt_diloco_t *d, uint32_t i, uint32_t *peers, int *self_in_p)
{
    uint32_t n = 0;
    *self_in_p = 0;
    pthread_mutex_lock(&d->lock);
    const gt_wan_view_t *v = &d->grp[i].view;
    for (uint32_t k = 0; k < v->n_members; k++) {
        uint32_t s;
        if (gt_topo_site_index(d->cfg, v->members[k].name, &s) != GT_OK) continue;
        if (s == d->site)
            *self_in_p = 1;
        else
            peers[n++] = s;
    }
    pthread_mutex_unlock(&d->lock);
    return n;
}
