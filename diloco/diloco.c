/* diloco.c — the context: configuration, create / close, and the schedule of a site's outer
 * rounds (docs/design.md §1).
 *
 * The caller calls gt_diloco_step after every inner step; the schedule is the library's: at
 * step r·H it submits round r (applying first the round still pending, if τ reaches that far);
 * at step r·H + H + τ it applies round r; at the run's last step it applies the last round at
 * once and leaves the anchor in the caller's vector. Between steps nothing happens in the
 * caller's thread: the WAN thread (connect.c) answers peers. A stop request or a lost lease is
 * agreed across the site's ranks at every step, so they leave together.
 *
 * What a launcher passes to a trainer it did not write comes through the environment
 * (params.env): GT_CONFIG, GT_SET, GT_SITE, GT_RUN_DIR, GT_RUN_ID, GT_EXPECT_SITES, and the
 * injected faults, whose variables faults.c reads (gt_faults.h has their table).
 */
#include "diloco_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *gt_diloco_error_message(void)
{
    return gt_log_first_error();
}

void gt_diloco_params_init(gt_diloco_params_t *params)
{
    gt_diloco_params_t p = GT_DILOCO_PARAMS_INIT;
    if (params) *params = p;
}

size_t gt_diloco_params_size(void)
{
    return sizeof(gt_diloco_params_t);
}

size_t gt_diloco_status_size(void)
{
    return sizeof(gt_diloco_status_t);
}

/* The config from params: borrowed, or loaded (from config_path or $GT_CONFIG, with sets or
 * $GT_SET). The loader's messages are logged as errors, so a caller in another language gets
 * them back with gt_diloco_error_message. */
static gt_status_t load_config(gt_diloco_t *d)
{
    if (d->p.cfg) {
        d->cfg = d->p.cfg;
        return GT_OK;
    }
    const char *path = d->p.config_path;
    const char *env_sets = NULL;
    if (!path && d->p.env) {
        path = getenv("GT_CONFIG");
        env_sets = getenv("GT_SET");
    }
    if (!path || !*path) {
        GT_ERROR("diloco: no configuration: give a config path (or a resolved config), or set "
                 "GT_CONFIG (`geotrain launch CONFIG -- CMD` does)");
        return GT_ERR_CONFIG;
    }
    const char **sets = NULL;
    size_t n_sets = 0;
    char *copy = NULL;
    if (env_sets && !d->p.sets) { /* one KEY=VALUE per line */
        copy = strdup(env_sets);
        size_t lines = 1;
        for (const char *c = env_sets; *c; c++) lines += *c == '\n';
        sets = calloc(lines, sizeof *sets);
        if (!copy || !sets) {
            free(copy);
            free(sets);
            return GT_ERR_NOMEM;
        }
        for (char *save = NULL, *t = strtok_r(copy, "\n", &save); t;
             t = strtok_r(NULL, "\n", &save))
            if (*t) sets[n_sets++] = t;
    }
    char *msg = NULL;
    size_t msg_len = 0;
    FILE *err = open_memstream(&msg, &msg_len);
    gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;
    lp.sets = sets ? sets : d->p.sets;
    lp.n_sets = sets ? n_sets : d->p.n_sets;
    lp.err = err;
    gt_status_t st = gt_topo_load(path, &lp, &d->own_cfg);
    if (err) fclose(err);
    if (st != GT_OK) {
        while (msg_len && (msg[msg_len - 1] == '\n')) msg[--msg_len] = '\0';
        GT_ERROR("%s", msg && *msg ? msg : "cannot load the configuration");
    }
    free(msg);
    free(sets);
    free(copy);
    d->cfg = d->own_cfg;
    return st;
}

static double env_double(const char *name, double dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtod(v, NULL) : dflt;
}

/* Fills what params left to the environment. */

/* SITE/site.lock, held (flock) by rank 0 for the process's life: a second process of the same
 * site in the same run directory (an operator's mistake, a stale supervisor) stops here, before
 * it truncates or overwrites any of the live site's files (metrics, anchors, status, summary).
 * The lock goes with the process however it ends, but not at once: a site restarted right after
 * its previous life was killed can find that life's rank still on its way out (mpirun killed
 * before its ranks), so the lock is waited for SITE_LOCK_WAIT_MS before the refusal. */
#define SITE_LOCK_WAIT_MS 5000
static gt_status_t lock_site_dir(gt_diloco_t *d)
{
    char path[2400];
    snprintf(path, sizeof path, "%s/site.lock", d->site_dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        GT_ERROR("site %s: cannot open %s: %s", d->name, path, strerror(errno));
        return GT_ERR_IO;
    }
    int locked = flock(fd, LOCK_EX | LOCK_NB) == 0;
    for (int waited = 0; !locked && waited < SITE_LOCK_WAIT_MS; waited += 50) {
        if (waited == 0)
            GT_INFO("site %s: %s is held by another process; waiting up to %d ms for it to end",
                    d->name, path, SITE_LOCK_WAIT_MS);
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
        locked = flock(fd, LOCK_EX | LOCK_NB) == 0;
    }
    if (!locked) {
        char pid[32] = "";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        GT_ERROR("site %s: another process of site %s (pid %s) is running in %s (%s is "
                 "locked): this one stops without touching its files",
                 d->name, d->name, *pid ? pid : "?", d->site_dir, path);
        close(fd);
        return GT_ERR_EXISTS;
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len)
        GT_WARN("site %s: cannot write the pid to %s", d->name, path);
    d->site_lock = fd;
    return GT_OK;
}

static gt_status_t resolve(gt_diloco_t *d)
{
    gt_diloco_params_t *p = &d->p;
    if (p->env) {
        if (!p->site) p->site = getenv("GT_SITE");
        if (!p->run_dir) p->run_dir = getenv("GT_RUN_DIR");
        if (!p->run_id) p->run_id = getenv("GT_RUN_ID");
        if (!p->expect_sites) p->expect_sites = (uint32_t)env_double("GT_EXPECT_SITES", 0);
    }
    gt_faults_init(&d->faults);
    if (p->env && gt_faults_from_env(&d->faults) != GT_OK) return GT_ERR_INVALID;
    gt_status_t st = load_config(d);
    if (st == GT_OK) st = dl_open_slots(d);
    if (st != GT_OK) return st;
    const gt_topo_config_t *c = d->cfg;
    if (!p->site || gt_topo_site_index(c, p->site, &d->site) != GT_OK) {
        char names[1024] = "";
        for (uint32_t i = 0; i < c->n_sites; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                     c->sites[i].name);
        GT_ERROR("diloco: '%s' is not a site of the config (its sites: %s)%s",
                 p->site ? p->site : "", names,
                 p->site ? "" : "; give the site name, or set GT_SITE");
        return GT_ERR_CONFIG;
    }
    d->name = c->sites[d->site].name;
    if (c->n_sites < 2) {
        GT_ERROR("diloco: the config has one site (%s): there is nobody to exchange with", d->name);
        return GT_ERR_CONFIG;
    }
    if (!p->params || p->n_params == 0) {
        GT_ERROR("diloco: site %s: no parameter vector (params %p, %zu floats)", d->name,
                 (void *)p->params, p->n_params);
        return GT_ERR_INVALID;
    }
    d->ranks = p->comm.size ? p->comm.size : 1;
    d->rank = p->comm.rank;
    if (d->rank >= d->ranks || c->sites[d->site].ranks != d->ranks ||
        (d->ranks > 1 && (!p->comm.allreduce_u64 || !p->comm.allgatherv))) {
        GT_ERROR("diloco: site %s has %u ranks (sites.%s.ranks), but this process brings rank %u "
                 "of %u%s",
                 d->name, c->sites[d->site].ranks, d->name, d->rank, d->ranks,
                 d->ranks > 1 && (!p->comm.allreduce_u64 || !p->comm.allgatherv)
                     ? " without the in-site collectives"
                     : "");
        return GT_ERR_CONFIG;
    }
    d->n = p->n_params;
    d->x = p->params;
    d->H = c->inner.steps;
    d->tau = c->outer.overlap_steps;
    d->total = (uint64_t)c->run.rounds * c->inner.steps;
    d->sync_dp = c->outer.mode == GT_OUTER_SYNC_DP;
    if (p->run_dir && *p->run_dir)
        snprintf(d->run_dir, sizeof d->run_dir, "%s", p->run_dir);
    else
        snprintf(d->run_dir, sizeof d->run_dir, "%s/%s", c->run.run_dir, c->run.name);
    snprintf(d->site_dir, sizeof d->site_dir, "%s/%s", d->run_dir, d->name);
    /* The run's id; each WAN group (dl_layout) adds its own suffix, RUN.rankG, for its
     * membership keys and secure channel (the same at every site, whatever its ranks). */
    const char *id = p->run_id && *p->run_id ? p->run_id : c->run.name;
    snprintf(d->run_id, sizeof d->run_id, "%s", id);
    st = gt_mkdirs(d->site_dir);
    return st == GT_OK && d->rank == 0 ? lock_site_dir(d) : st;
}

static gt_status_t alloc_vectors(gt_diloco_t *d)
{
    /* θ_a and snap hold this rank's lanes (n_sub = n with one rank; outer_step.c dl_layout) */
    d->anchor = gt_mem_alloc(&d->mem, d->n_sub * sizeof(float), 0);
    d->snap = gt_mem_alloc(&d->mem, d->n_sub * sizeof(float), 0);
    d->mom = gt_mem_alloc(&d->mem, d->n_sub * sizeof(float), 1);
    if (!d->anchor || !d->snap || !d->mom) {
        GT_ERROR("site %s: out of memory for %zu parameters", d->name, d->n);
        return GT_ERR_NOMEM;
    }
    /* The anchor starts as the caller's parameters (every site agrees on them at start). */
    gt_status_t st = d->p.before_read ? d->p.before_read(d->p.hook_ctx) : GT_OK;
    if (st != GT_OK) return st;
    for (uint32_t i = 0; i < d->n_own; i++) {
        const gt_topo_lane_t *ln = &d->layout->lanes[d->own_lanes[i]];
        memcpy(d->anchor + d->apos[i], d->x + ln->offset, ln->count * sizeof(float));
    }
    d->own_hash = dl_own_hash(d);
    return GT_OK;
}

/* params.layout goes into the site's member note in etcd (beside the steps it can resume at),
 * where every site compares it with the others' (check_layouts). */
static gt_status_t note_layout(gt_diloco_t *d)
{
    if (!d->p.layout || !*d->p.layout) return GT_OK;
    json_t *note = d->resume_note ? json_loads(d->resume_note, 0, NULL) : json_object();
    if (!json_is_object(note) || json_object_set_new(note, "layout", json_string(d->p.layout))) {
        json_decref(note);
        return GT_ERR_NOMEM;
    }
    char *text = json_dumps(note, JSON_COMPACT);
    json_decref(note);
    if (!text) return GT_ERR_NOMEM;
    free(d->resume_note);
    d->resume_note = text;
    return GT_OK;
}

/* Every registered site holds its parameters as this one does (params.layout), or an error
 * naming both layouts. */
static gt_status_t check_layouts(gt_diloco_t *d)
{
    char *text = NULL;
    gt_status_t st = gt_wan_member_values(d->grp[0].member, &text);
    if (st != GT_OK) return st;
    json_t *all = json_loads(text, 0, NULL);
    free(text);
    const char *mine = d->p.layout ? d->p.layout : "";
    size_t i;
    json_t *m;
    json_array_foreach(all, i, m)
    {
        const char *name = json_string_value(json_object_get(m, "name"));
        const char *theirs = json_string_value(json_object_get(m, "layout"));
        if (!theirs) theirs = "";
        if (!name || strcmp(name, d->name) == 0 || strcmp(theirs, mine) == 0) continue;
        GT_ERROR("site %s holds its parameters as %s, but site %s as %s: every site must shard "
                 "its parameters alike (the same ranks, the same shard boundaries)",
                 d->name, *mine ? mine : "unsharded (every rank all of them)", name,
                 *theirs ? theirs : "unsharded (every rank all of them)");
        st = GT_ERR_CONFIG;
        break;
    }
    json_decref(all);
    if (st == GT_ERR_CONFIG) { /* registered a while longer, so the other site reads ours too */
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
    }
    return st;
}

static void destroy(gt_diloco_t *d)
{
    dl_encode_stop(d); /* first: it reads θ_a, the snapshot and the engines freed below */
    dl_prom_stop(d);
    dl_stop_thread(d);
    dl_close_files(d);
    if (d->site_lock >= 0) close(d->site_lock); /* the site's files are closed: let go */
    dl_disconnect(d);
    gt_topo_layout_destroy(d->layout);
    free(d->gcounts);
    free(d->gdispls);
    gt_mem_free(&d->mem, d->anchor);
    gt_mem_free(&d->mem, d->snap);
    free(d->exch);
    free(d->t_calls[0]);
    free(d->t_calls[1]);
    gt_mem_free(&d->mem, d->mom);
    gt_mem_free(&d->mem, d->delta);
    for (uint32_t e = 0; e < DL_MAX_ENGINES; e++) gt_mem_free(&d->mem, d->g[e]);
    gt_mem_free(&d->mem, d->gbuf);
    gt_cmp_destroy(d->gcmp);
    free(d->own_lanes);
    free(d->apos);
    free(d->owner);
    free(d->grp);
    gt_mem_free(&d->mem, d->prev);
    gt_mem_free(&d->mem, d->hold);
    gt_mem_free(&d->mem, d->fetch);
    free(d->resume_note);
    gt_topo_destroy(d->own_cfg);
    gt_topo_destroy(d->slot_cfg);
    pthread_cond_destroy(&d->enc_cv);
    pthread_mutex_destroy(&d->enc_mu);
    pthread_mutex_destroy(&d->lock);
    d->magic = 0;
    free(d);
}

/* Waits (at most bound_ns) until the meshes have sent everything queued. */
static void drain_mesh(gt_diloco_t *d, uint64_t bound_ns)
{
    for (uint64_t t0 = gt_time_ns();;) {
        pthread_mutex_lock(&d->lock);
        size_t queued = dl_mesh_pending(d);
        pthread_mutex_unlock(&d->lock);
        if (!queued || gt_time_ns() - t0 > bound_ns) return;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* Waits, bounded, until every peer still in the view that this site's engines sent
 * contributions to, and that sent its contribution to the last round (it is finishing too), has
 * said it finished (its FIN), so each engine's ledger with it is closed before the thread stops
 * receiving: the ranks of one site leave at different moments, and a rank that stopped first
 * would miss the FINs its peers send to its lanes. A peer still training rounds behind is not
 * waited for (gt_outer_fins_missing); one that dies or is stopped leaves the view within a
 * lease; the wait is at most deadline_max_ms + the lease. */
static void wait_fins(gt_diloco_t *d)
{
    uint64_t bound = ((uint64_t)d->cfg->outer.deadline_max_ms +
                      (uint64_t)d->cfg->membership.lease_ttl_s * 1000ull) *
                     1000000ull,
             t0 = gt_time_ns();
    for (int said = 0; !d->sync_dp && !d->wan_error;) {
        uint32_t missing = 0;
        pthread_mutex_lock(&d->lock);
        for (uint32_t e = 0; e < d->n_eng; e++) missing += gt_outer_fins_missing(d->outers[e]);
        pthread_mutex_unlock(&d->lock);
        uint64_t waited = gt_time_ns() - t0;
        if (!missing) return;
        if (waited > bound) {
            GT_INFO("site %s: leaving without %u peer FIN(s) after %.1f s; those contribution "
                    "ledgers stay open",
                    d->name, missing, waited * 1e-9);
            return;
        }
        if (!said && waited > 1000000000ull) {
            GT_INFO("site %s: finished; waiting up to %.0f s for %u peer(s) to say they finished",
                    d->name, bound * 1e-9, missing);
            said = 1;
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
}

/* Leaves: the last messages out, the thread stopped, the summary written, deregistered. */
static void leave(gt_diloco_t *d, gt_status_t result)
{
    /* The last submit's frames posted (a removed site's are not), and the encoder stopped:
     * nothing below races it for θ_a, the snapshot or the residuals. */
    gt_status_t est = dl_encode_wait(d);
    if (est != GT_OK && result == GT_OK) result = est;
    dl_encode_stop(d);
    if (result == GT_OK && d->grp && d->grp[0].mesh) {
        /* Let our last messages (results we own) reach the others before leaving. */
        drain_mesh(d, 5000000000ull);
        /* A straggler's contribution to the last round, which this site closed without it, may
         * be on its way: read it (it is counted, late or open at the end) rather than leave it
         * unread in a socket buffer. Bounded by deadline_max_ms; a site that leaves the view
         * is no longer waited for. */
        uint64_t bound = (uint64_t)d->cfg->outer.deadline_max_ms * 1000000ull, t1 = gt_time_ns();
        for (int said = 0; !d->sync_dp && !d->wan_error;) {
            uint32_t missing = 0;
            pthread_mutex_lock(&d->lock);
            for (uint32_t e = 0; e < d->n_eng; e++) missing += gt_outer_final_missing(d->outers[e]);
            pthread_mutex_unlock(&d->lock);
            if (!missing || gt_time_ns() - t1 > bound) break;
            if (!said && gt_time_ns() - t1 > 1000000000ull) {
                GT_INFO(
                    "site %s: finished; waiting up to %.0f s for %u contribution(s) to the last "
                    "round still on their way",
                    d->name, bound * 1e-9, missing);
                said = 1;
            }
            struct timespec ts = {0, 2000000};
            nanosleep(&ts, NULL);
        }
        /* Done: take nothing more, and tell each peer how many of its contributions we took
         * (a FIN), so what is still on its way here is counted by its sender (`unreceived`)
         * rather than by nobody. The FINs go out before the thread stops. */
        pthread_mutex_lock(&d->lock);
        for (uint32_t e = 0; e < d->n_eng; e++) gt_outer_finish(d->outers[e], gt_time_ns());
        uint32_t live = dl_view(d)->n_members;
        pthread_mutex_unlock(&d->lock);
        /* A peer cut off from a chunk's owner asks another site to relay the chunk (see
         * gt_outer_progress), and for the last round it may ask right after we applied it
         * (within 250 ms of its first chunk): with 3 sites or more, serve such requests for
         * up to a second before stopping (deadline_min_ms if shorter). */
        uint32_t linger_ms =
            d->cfg->outer.deadline_min_ms < 1000 ? d->cfg->outer.deadline_min_ms : 1000;
        if (live >= 3) {
            struct timespec ts = {0, (long)linger_ms * 1000000L};
            nanosleep(&ts, NULL);
        }
        wait_fins(d);
        drain_mesh(d, 2000000000ull);
    }
    dl_stop_thread(d);
    /* Removed from the run: what it trained since its last submit is kept for its next life
     * (carry.c). Not by a multi-rank site whose hook gathers the parameters (a collective,
     * and its ranks may have failed in different places). */
    if (result == GT_ERR_PEER_LOST && d->rank == 0) dl_log_void(d);
    if (result == GT_ERR_PEER_LOST && (d->ranks == 1 || !d->p.before_read) &&
        dl_carry_save(d) != GT_OK)
        GT_WARN("site %s: cannot keep the work of its last round for its next life", d->name);
    if (!d->t_train_end && d->t_train) d->t_train_end = gt_time_ns();
    d->state = result == GT_OK           ? GT_DILOCO_DONE
               : result == GT_ERR_CLOSED ? GT_DILOCO_STOPPED
                                         : GT_DILOCO_FAILED;
    /* The summary sums the ranks' WAN counters, a collective: a multi-rank site that failed
     * skips it, since its ranks may have failed in different places — unless they failed
     * together, out of one agreement (the hash vote's no-majority stop, a removal they
     * decided on together), whose error is the one this finish reports, so all come here. */
    if (d->grp && d->grp[0].mesh && d->outer &&
        (d->ranks == 1 || result == GT_OK || result == GT_ERR_CLOSED || result == d->agreed)) {
        dl_write_status(d, 1);
        if (dl_write_summary(d, result) != GT_OK)
            GT_WARN("site %s: cannot write its summary", d->name);
    }
    destroy(d);
}

gt_status_t gt_diloco_create(const gt_diloco_params_t *params, gt_diloco_t **diloco_p)
{
    gt_log_errors_reset();
    if (!params || !diloco_p) return GT_ERR_INVALID;
    gt_diloco_t *d = calloc(1, sizeof *d);
    if (!d) return GT_ERR_NOMEM;
    d->magic = GT_DILOCO_MAGIC;
    d->site_lock = -1;
    d->p = *params;
    for (uint32_t f = 0; f < DL_MAX_FRAGMENTS; f++) {
        d->fpending[f] = -1;
        d->live_round[f] = d->prev_round[f] = d->cur_round[f] = -1;
    }
    for (uint32_t e = 0; e < DL_MAX_ENGINES; e++) d->held[e] = -1;
    d->gbuf_e = -1;
    d->resumed_step = -1;
    d->join_rebase = -1;
    d->anchor_round = -1;
    d->confirmed_round = -1;
    d->hold_round = -1;
    d->pre_taken = d->pre_done = -1;
    d->state = GT_DILOCO_STARTING;
    d->t_start = gt_time_ns();
    d->start_unix = gt_unix_time();
    pthread_mutex_init(&d->lock, NULL);
    pthread_mutex_init(&d->enc_mu, NULL);
    pthread_cond_init(&d->enc_cv, NULL);
    gt_status_t st = resolve(d);
    if (st == GT_OK) st = dl_layout(d);
    if (st == GT_OK) st = alloc_vectors(d);
    if (st == GT_OK) st = dl_dump_check(d);
    if (st == GT_OK) st = dl_resume_prepare(d);
    if (st == GT_OK) st = note_layout(d);
    if (st == GT_OK) st = dl_added_at_start(d);
    if (st == GT_OK) st = dl_note_config(d);
    if ((st = dl_agree(d, st)) != GT_OK) goto fail;
    if ((st = dl_agree(d, dl_connect(d))) != GT_OK) goto fail;
    if ((st = dl_agree(d, dl_prom_start(d))) != GT_OK) goto fail;
    /* A run already marked as started is joined, not started: this site comes late, or back. */
    int started = 0;
    if (d->rank == 0 && gt_wan_member_started(d->grp[0].member, &started) != GT_OK) started = 0;
    uint64_t v = (uint64_t)started;
    if ((st = dl_allreduce(d, &v, 1, GT_DILOCO_OP_MAX)) != GT_OK) goto fail;
    started = v != 0;
    if (started && (st = dl_agree(d, dl_claim_run(d))) != GT_OK) goto fail;
    if (started && d->p.resume_dir)
        GT_INFO("site %s: the run is in progress: joining it rather than resuming from a "
                "checkpoint",
                d->name);
    int resume = !started && d->p.resume_dir;
    if ((st = dl_agree(d, dl_open_files(d, started || resume))) != GT_OK) goto fail;
    if (started) {
        if ((st = dl_agree(d, dl_check_config(d))) != GT_OK) goto fail;
        if ((st = dl_agree(d, check_layouts(d))) != GT_OK) goto fail;
        d->state = GT_DILOCO_JOINING;
        dl_write_status(d, 1);
        if ((st = dl_agree(d, dl_start_thread(d))) != GT_OK) goto fail;
        if ((st = dl_agree(d, dl_join(d, &d->first_step))) != GT_OK) goto fail;
    } else {
        dl_carry_discard(d);            /* kept by a removed life of an earlier start: stale now */
        dl_keep_state(d, HIST_INITIAL); /* served to a site whose initial vector differs */
        if ((st = dl_agree(d, dl_await_sites(d))) != GT_OK) goto fail;
        if ((st = dl_agree(d, check_layouts(d))) != GT_OK) goto fail;
        if (resume && (st = dl_resume(d)) != GT_OK) goto fail;
        if ((st = dl_agree(d, dl_start_thread(d))) != GT_OK) goto fail;
        /* Resumed sites hold the anchor of the same round: the first round's hash vote checks
         * it (invariant I1), and the caller restores its own parameters. */
        if (d->resumed_step < 0 && (st = dl_agree(d, dl_start_check(d))) != GT_OK) goto fail;
    }
    d->started_run = !started;
    for (uint32_t i = 0; i < d->n_grp; i++)
        if (gt_wan_member_mark_started(d->grp[i].member) != GT_OK)
            GT_WARN("site %s: cannot mark the run as started in etcd", d->name);
    d->step = d->first_step;
    d->state = d->step >= d->total ? GT_DILOCO_DONE : GT_DILOCO_TRAINING;
    d->t_train = d->t_last = d->metrics_t = gt_time_ns();
    if (d->state == GT_DILOCO_TRAINING)
        d->train_start_unix = gt_unix_time();
    else /* a joiner too late to take part: it never trains (no span for goodput's window) */
        d->t_train_end = d->t_train;
    d->life_wait0 = d->wait_s;
    pthread_mutex_lock(&d->lock);
    d->training = 1;
    d->next_submit = d->step / d->H;
    for (uint32_t f = 0; f < d->F; f++) { /* the first round with r·H + off_f past this step */
        uint64_t off = dl_frag_offset(d, f);
        d->fnext[f] = d->step < off ? 0 : (d->step - off) / d->H + 1;
    }
    if (d->join_rebase >= 0) /* a joiner before its first round submits nothing until then */
        d->next_submit = d->fnext[0] = d->joined_round;
    pthread_mutex_unlock(&d->lock);
    d->passes = 0; /* per round: the start's sweeps are not a round's */
    GT_INFO("site %s: training %llu steps in %llu rounds of %llu, overlap %llu, %u sites live",
            d->name, (unsigned long long)(d->total - d->step),
            (unsigned long long)((d->total - d->step) / d->H), (unsigned long long)d->H,
            (unsigned long long)d->tau, dl_view(d)->n_members);
    dl_write_status(d, 1);
    *diloco_p = d;
    return GT_OK;
fail:
    if (d->grp && d->grp[0].member && st != GT_ERR_CLOSED)
        GT_ERROR("site %s: cannot take part in the run: %s", d->name, gt_status_str(st));
    leave(d, st);
    return st;
}

/* The highest round a peer has submitted, plus one (0: none seen), over the engines. */
uint64_t dl_peers_next(gt_diloco_t *d)
{
    uint64_t seen = 0;
    pthread_mutex_lock(&d->lock);
    for (uint32_t e = 0; e < d->n_eng; e++) {
        uint64_t v = gt_outer_peer_next(d->outers[e]);
        if (v > seen) seen = v;
    }
    pthread_mutex_unlock(&d->lock);
    return seen;
}

/* A joiner that started at once (dl_join, fast) trains toward round R - 1's apply step, where
 * it takes the anchor after R - 1 from its peers; they keep it only until they apply R + 1. A
 * joiner that is slow (a slowdown, a busy machine) could get there too late — seen in a chaos
 * run: slowed 3x right after joining, it found the anchor gone and had to leave and rejoin. So
 * once a peer has submitted round R (its first), the joiner is a round behind: it skips to the
 * apply step and takes the anchor now, while the peers still hold it; round R then catches up
 * as any site's would. The site's ranks decide together. */
static gt_status_t catch_up_joiner(gt_diloco_t *d)
{
    uint64_t to = d->joined_round * d->H + d->tau;
    if (d->F != 1 || d->step >= to) return GT_OK;
    uint64_t end = dl_peers_next(d) > d->joined_round;
    if (d->ranks > 1) {
        gt_status_t st = dl_allreduce(d, &end, 1, GT_DILOCO_OP_MAX);
        if (st != GT_OK) return st;
    }
    if (!end) return GT_OK;
    GT_INFO("site %s: a peer has submitted round %llu, this joiner's first, while it was %llu "
            "steps short of taking the anchor after round %llu: it takes it now",
            d->name, (unsigned long long)d->joined_round, (unsigned long long)(to - d->step),
            (unsigned long long)d->joined_round - 1);
    d->steps_skipped += to - d->step;
    d->step = to;
    return GT_OK;
}

/* outer.catch_up (docs/diloco.md#catching-up): the round this step trains for ends now when a
 * peer has already submitted it (or a later one), or its result has begun to arrive — this site
 * is behind the first of its peers — and more of it is left than half the overlap would hide.
 * The step counter jumps to the round's end, so the submit happens at once, its weight the
 * tokens trained; the schedule (r·H + τ) stays as it is, and the skipped steps are counted.
 * The site's ranks decide together. */
static gt_status_t catch_up(gt_diloco_t *d)
{
    uint64_t H = d->H, step = d->step;
    if (d->join_rebase >= 0) return catch_up_joiner(d);
    if (step % H == 0 || step >= d->total) return GT_OK; /* the round ends here anyway */
    uint64_t r = step / H, seen = 0, K = d->cfg->run.checkpoint_every;
    /* A round whose step r·H + τ is a checkpoint's (run.checkpoint_every: r a multiple of it)
     * is cut in two: first to that step (its apply happens there, and the caller saves its
     * checkpoint), then, from the next step on, to the round's end — so every site saves every
     * checkpoint step (a resume needs a step all sites have) at the price of one more step,
     * not the τ steps up to it (a site slowed 8x trained them all at 8x and held up its
     * peers: the slowdowns of bench/chaos.yaml cost 1.7x what they should). */
    int ckpt = K && r > 0 && r % K == 0;
    if (ckpt && step == r * H + d->tau) return GT_OK; /* the caller saves it now */
    seen = dl_peers_next(d);
    /* The first peer to submit round r trains τ more steps before it needs r's result: steps
     * of ours that fit in half of that (the other half for the exchange) cost it nothing, so a
     * site a step or two behind an equal peer finishes its round — unless they take longer
     * than half the deadline floor, which is all an owner may wait for them (a chronic
     * straggler's, nothing). One round or more behind, or with τ = 0 (the peer waits at
     * once), it ends now. */
    uint64_t left = (r + 1) * H - step, slack = d->tau / 2;
    if (d->steps_trained > 0 && d->compute_s > 0) {
        double per = d->compute_s / (double)d->steps_trained; /* s a step, as measured */
        double fit = d->cfg->outer.deadline_min_ms * 1e-3 / 2 / per;
        if (fit < (double)slack) slack = (uint64_t)fit;
    }
    uint64_t end = seen > r + 1 || (seen == r + 1 && (d->tau == 0 || left > slack));
    if (d->ranks > 1) {
        gt_status_t st = dl_allreduce(d, &end, 1, GT_DILOCO_OP_MAX);
        if (st != GT_OK) return st;
    }
    if (!end) return GT_OK;
    uint64_t to = ckpt && step < r * H + d->tau ? r * H + d->tau : (r + 1) * H;
    GT_DEBUG(
        "site %s: catch-up: round %llu %s after %llu of its %llu steps (a peer submitted "
        "round %llu)",
        d->name, (unsigned long long)r, to == (r + 1) * H ? "ends" : "skips to its checkpoint step",
        (unsigned long long)(step - r * H), (unsigned long long)H, (unsigned long long)(seen - 1));
    d->steps_skipped += to - step;
    d->rounds_cut += to == (r + 1) * H;
    d->step = to;
    return GT_OK;
}

/* dl_submit and dl_apply, timed on the training thread less their waits for results (the
 * submit and apply seconds of summary.json). Every call's time is kept for the medians (the
 * first rounds also pay for the first touch of the outer state's pages). */
static void keep_time(gt_diloco_t *d, int which, uint64_t n, double s)
{
    if (n > d->t_cap[which]) {
        size_t cap = d->t_cap[which] ? 2 * d->t_cap[which] : 64;
        double *q = realloc(d->t_calls[which], cap * sizeof *q);
        if (!q) return;
        d->t_calls[which] = q;
        d->t_cap[which] = cap;
    }
    d->t_calls[which][n - 1] = s;
}

static gt_status_t timed_submit(gt_diloco_t *d, uint32_t f, uint64_t r)
{
    uint64_t t0 = gt_time_ns();
    gt_status_t st = dl_submit(d, f, r);
    double s = (gt_time_ns() - t0) * 1e-9;
    d->submit_s += s;
    d->submits_timed++;
    keep_time(d, 0, d->submits_timed, s);
    if (s > d->submit_max_s) d->submit_max_s = s;
    return st;
}

static gt_status_t timed_apply(gt_diloco_t *d, uint32_t f, uint64_t r, int final)
{
    uint64_t t0 = gt_time_ns();
    double w0 = d->wait_s;
    gt_status_t st = dl_apply(d, f, r, final);
    double s = (gt_time_ns() - t0) * 1e-9 - (d->wait_s - w0);
    if (s < 0) s = 0;
    d->apply_s += s;
    d->applies_timed++;
    keep_time(d, 1, d->applies_timed, s);
    if (s > d->apply_max_s) d->apply_max_s = s;
    return st;
}

/* The round schedule of one step (the step counter already moved). */
static gt_status_t schedule(gt_diloco_t *d)
{
    uint64_t step = d->step;
    gt_status_t st = GT_OK;
    if (d->sync_dp) {
        /* every step was a round, in gt_diloco_sync_grads; the final parameters logged */
        if (step == d->total) {
            pthread_mutex_lock(&d->lock);
            double tok = gt_outer_result_tokens(d->outers[0], step - 1);
            pthread_mutex_unlock(&d->lock);
            dl_log_anchor(d, step - 1, gt_outer_hash(d->x, d->n), tok);
        }
    } else {
        /* Fragment f's round r: submitted at r·H + off_f, applied τ steps later (with F = 1,
         * off_0 = H: submit at (r + 1)·H, apply at (r + 1)·H + τ). Fragments in order, so a
         * round's last fragment is applied after the others. */
        for (uint32_t f = 0; f < d->F && st == GT_OK; f++) {
            uint64_t off = dl_frag_offset(d, f);
            int64_t *pend = &d->fpending[f];
            /* between a submit and its apply: the outer step early, once the result is whole */
            if (*pend >= 0 && d->join_rebase != *pend &&
                step < (uint64_t)*pend * d->H + off + d->tau)
                dl_pre_apply(d, (uint64_t)*pend);
            if (step >= off && (step - off) % d->H == 0 && d->join_rebase >= 0 &&
                (step - off) / d->H < d->joined_round) {
                /* A joiner's steps before its first round (dl_join): nothing to submit; it
                 * takes the round's anchor at the apply step (now, without an overlap). */
                if (d->tau == 0 && (st = dl_join_rebase(d)) == GT_OK) *pend = -1;
            } else if (step >= off && (step - off) % d->H == 0) {
                uint64_t r = (step - off) / d->H;
                if (*pend >= 0 && (st = timed_apply(d, f, (uint64_t)*pend, 0)) != GT_OK) return st;
                *pend = -1;
                if ((st = timed_submit(d, f, r)) != GT_OK) return st;
                *pend = (int64_t)r;
                if (d->tau == 0 || step == d->total) {
                    if ((st = timed_apply(d, f, r, step == d->total)) != GT_OK) return st;
                    *pend = -1;
                }
            } else if (*pend >= 0 && step == (uint64_t)*pend * d->H + off + d->tau) {
                st = d->join_rebase == *pend ? dl_join_rebase(d)
                                             : timed_apply(d, f, (uint64_t)*pend, 0);
                if (st != GT_OK) return st;
                *pend = -1;
            }
        }
    }
    return st;
}

/* Sleeps `s` seconds for an emulated step time and returns the time that counts as compute:
 * as slept, since on a busy machine a sleep overruns and that overrun is neither compute nor a
 * wait for the WAN; but a sleep that overran by more than itself and a quarter second was
 * paused (SIGSTOP): then `s`, and the pause goes to paused_s. */
double dl_emu_sleep(gt_diloco_t *d, double s)
{
    if (!(s > 0)) return 0.0;
    struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
    uint64_t s0 = gt_time_ns();
    nanosleep(&ts, NULL);
    double slept = (gt_time_ns() - s0) * 1e-9;
    if (slept <= 2.0 * s + 0.25) return slept;
    d->paused_s += slept - s;
    return s;
}

static gt_status_t step_timed(gt_diloco_t *d, uint64_t tokens, double loss, double compute_s);

gt_status_t gt_diloco_step_timed(gt_diloco_t *d, uint64_t tokens, double loss, double compute_s)
{
    gt_log_errors_reset();
    if (!d || d->magic != GT_DILOCO_MAGIC) return GT_ERR_INVALID;
    if (d->state == GT_DILOCO_FAILED || d->state == GT_DILOCO_STOPPED) return GT_ERR_CLOSED;
    __atomic_store_n(&d->in_step, 1, __ATOMIC_SEQ_CST); /* for the stuck-site watch */
    d->stepped = 1;
    gt_status_t st = step_timed(d, tokens, loss, compute_s);
    __atomic_store_n(&d->t_out, gt_time_ns(), __ATOMIC_SEQ_CST); /* arms the watch */
    __atomic_store_n(&d->in_step, 0, __ATOMIC_SEQ_CST);
    return st;
}

static gt_status_t step_timed(gt_diloco_t *d, uint64_t tokens, double loss, double compute_s)
{
    if (d->step >= d->total) {
        GT_ERROR("site %s: a step after the run's last (%llu): nothing left to train", d->name,
                 (unsigned long long)d->total);
        return GT_ERR_INVALID;
    }
    uint64_t now = gt_time_ns();
    if (!d->sync_dp && now - d->t_last > (uint64_t)d->cfg->membership.lease_ttl_s * 1000000000ull) {
        /* This process (or thread) was away longer than its lease (SIGSTOP, a long pause): the
         * others may have removed it. Before it submits or applies anything, a heartbeat made
         * after the pause says whether its lease is still held (or the view left it out). */
        gt_status_t live = dl_confirm_member(d);
        if (live != GT_OK) {
            if (live == GT_ERR_PEER_LOST) dl_leave(d);
            d->state = GT_DILOCO_FAILED;
            d->wan_error = (int)live;
            return dl_agree(d, live);
        }
        now = gt_time_ns();
    }
    if (d->wan_error == GT_ERR_PEER_LOST || d->wan_error == GT_ERR_RETIRED) {
        d->state = GT_DILOCO_FAILED; /* removed: nothing more goes out or gets applied */
        return dl_agree(d, (gt_status_t)d->wan_error);
    }
    /* A step's compute time is at most the wall time since the previous call (a caller that
     * reports more would make the site look slower than it is, and goodput exceed 1). */
    double since = (now - d->t_last) * 1e-9;
    if (!(compute_s >= 0 && compute_s <= since)) compute_s = since; /* < 0, NaN: measured */
    /* A step far longer than the ones before it was paused (SIGSTOP, a frozen host), not
     * computing: the pause is neither compute nor something to multiply below (a site stopped
     * for 3 s inside a step, then slowed 20x, slept a minute and held a chaos run to its end). */
    if (d->step_ema > 0 && compute_s > 4.0 * d->step_ema + 0.25) {
        GT_DEBUG("site %s: step %llu took %.2f s against %.3f s before: paused", d->name,
                 (unsigned long long)d->step, compute_s, d->step_ema);
        d->paused_s += compute_s - d->step_ema;
        compute_s = d->step_ema;
    } else {
        d->step_ema = d->step_ema > 0 ? 0.9 * d->step_ema + 0.1 * compute_s : compute_s;
    }
    double pace = d->cfg->inner.emulated_step_ms * 1e-3;
    if (compute_s < pace) /* an emulated accelerator: the step takes at least `pace` */
        compute_s += dl_emu_sleep(d, pace - compute_s);
    compute_s += dl_fault_slow(d, compute_s); /* injected: a slow site (its usual speed) */
    double slow0 = d->chaos_slow_s;
    d->base_ema = d->base_ema > 0 ? 0.9 * d->base_ema + 0.1 * compute_s : compute_s;
    compute_s += dl_fault_windows(d, compute_s); /* injected: chaos slowdowns, for a while */
    d->life_compute_s += compute_s - (d->chaos_slow_s - slow0);
    d->compute_s += compute_s;
    d->step++;
    d->steps_trained++;
    d->tokens += tokens;
    d->life_tokens += tokens;
    d->round_tokens += tokens;
    for (uint32_t f = 0; f < d->F; f++) d->ftokens[f] += tokens;
    d->loss = loss;
    uint32_t log_every = d->cfg->run.log_every ? d->cfg->run.log_every : 1;
    if (d->step + log_every > d->total) {
        d->loss_acc += loss;
        d->loss_n++;
    }
    uint64_t held0 = gt_time_ns();
    double wait0 = d->wait_s;
    gt_status_t st = d->cfg->outer.catch_up && !d->sync_dp ? catch_up(d) : GT_OK;
    if (st == GT_OK) st = schedule(d);
    if (st == GT_OK) dl_live_watch(d);
    if (st == GT_OK && d->step == d->total) {
        d->state = GT_DILOCO_DONE;
        d->t_train_end = gt_time_ns();
    }
    if (st == GT_OK && (d->step % log_every == 0 || d->step == d->total)) dl_metrics_line(d);
    if (st == GT_OK) dl_fault_kill_point(d); /* injected: a site killed at a round */
    dl_write_status(d, 0);
    double held = (gt_time_ns() - held0) * 1e-9 - (d->wait_s - wait0);
    if (held > d->held_max_s) {
        d->held_max_s = held;
        d->held_max_step = d->step;
    }
    /* A stop request or a lost lease on any rank is the whole site's (one collective). */
    if (st == GT_OK)
        st = d->wan_error              ? (gt_status_t)d->wan_error
             : d->p.stop && *d->p.stop ? GT_ERR_CLOSED
                                       : GT_OK;
    st = dl_agree(d, st);
    if (st != GT_OK && d->state != GT_DILOCO_DONE)
        d->state = st == GT_ERR_CLOSED ? GT_DILOCO_STOPPED : GT_DILOCO_FAILED;
    if (st == GT_ERR_CLOSED && d->state == GT_DILOCO_DONE) st = GT_OK; /* finished anyway */
    d->t_last = gt_time_ns();
    return st;
}

gt_status_t gt_diloco_step(gt_diloco_t *d, uint64_t tokens, double loss)
{
    return gt_diloco_step_timed(d, tokens, loss, -1.0);
}

gt_status_t gt_diloco_sync_grads(gt_diloco_t *d, uint64_t step, float *grads, uint64_t tokens)
{
    gt_log_errors_reset();
    if (!d || d->magic != GT_DILOCO_MAGIC || !grads) return GT_ERR_INVALID;
    if (!d->sync_dp) {
        GT_ERROR("site %s: gradients are averaged across sites only with outer.mode: sync-dp",
                 d->name);
        return GT_ERR_INVALID;
    }
    uint64_t t0 = gt_time_ns();
    __atomic_store_n(&d->in_step, 1, __ATOMIC_SEQ_CST); /* a wait of the library's, not stuck */
    gt_status_t st = dl_sync_grads(d, step, grads, tokens ? tokens : 1);
    if (__atomic_load_n(&d->t_out, __ATOMIC_SEQ_CST))
        __atomic_store_n(&d->t_out, gt_time_ns(), __ATOMIC_SEQ_CST);
    __atomic_store_n(&d->in_step, 0, __ATOMIC_SEQ_CST);
    /* sync-dp waits for the exchange inside the step: not compute time */
    d->t_last += gt_time_ns() - t0;
    return st;
}

void gt_diloco_status(gt_diloco_t *d, gt_diloco_status_t *s)
{
    memset(s, 0, sizeof *s);
    if (!d || d->magic != GT_DILOCO_MAGIC) return;
    gt_wan_mesh_stats_t ms;
    gt_outer_stats_t os;
    memset(&ms, 0, sizeof ms);
    memset(&os, 0, sizeof os);
    pthread_mutex_lock(&d->lock);
    dl_mesh_stats(d, &ms);
    if (d->outer) dl_outer_stats(d, &os);
    s->view_epoch = dl_view(d)->epoch;
    s->live_sites = dl_view(d)->n_members;
    pthread_mutex_unlock(&d->lock);
    s->state = d->state;
    s->site_index = d->site;
    s->n_sites = d->cfg->n_sites;
    s->step = d->step;
    s->first_step = d->first_step;
    s->total_steps = d->total;
    s->inner_steps = d->H;
    s->round = d->H ? d->step / d->H : 0;
    s->rounds_applied = d->rounds_applied;
    s->joined_round = d->joined_round;
    s->steps_trained = d->steps_trained;
    s->tokens = d->tokens;
    s->loss = d->loss;
    s->compute_s = d->compute_s;
    s->wait_s = d->wait_s;
    s->wan_bytes_sent = ms.bytes_sent;
    s->wan_bytes_received = ms.bytes_received;
    s->hash_checks = os.hash_checks;
    s->hash_mismatches = os.hash_mismatches;
    s->anchor_refetches = d->refetches;
    s->param_passes = d->passes;
    s->resumed_step = d->resumed_step;
    s->steps_skipped = d->steps_skipped;
    s->rounds_cut = d->rounds_cut;
}

gt_status_t gt_diloco_summary(gt_diloco_t *d, char *buf, size_t cap, size_t *len_p)
{
    gt_log_errors_reset();
    if (!d || d->magic != GT_DILOCO_MAGIC || !len_p || (cap && !buf)) return GT_ERR_INVALID;
    char *text = NULL;
    gt_status_t st = dl_summary_text(d, GT_OK, 0, &text);
    if (st != GT_OK) return st;
    size_t n = strlen(text);
    *len_p = n;
    if (n + 1 > cap)
        st = GT_ERR_OVERFLOW;
    else
        memcpy(buf, text, n + 1);
    free(text);
    return st;
}

gt_status_t gt_diloco_set_result(gt_diloco_t *d, const char *key, double value)
{
    if (!d || d->magic != GT_DILOCO_MAGIC || !key || !*key || strlen(key) >= 48)
        return GT_ERR_INVALID;
    for (int i = 0; i < d->n_results; i++)
        if (strcmp(d->result_key[i], key) == 0) {
            d->result_val[i] = value;
            return GT_OK;
        }
    if (d->n_results == 16) {
        GT_ERROR("site %s: more than 16 results for the summary", d->name);
        return GT_ERR_OVERFLOW;
    }
    snprintf(d->result_key[d->n_results], sizeof d->result_key[0], "%s", key);
    d->result_val[d->n_results++] = value;
    return GT_OK;
}

const gt_topo_config_t *gt_diloco_config(const gt_diloco_t *d)
{
    return d && d->magic == GT_DILOCO_MAGIC ? d->cfg : NULL;
}

void gt_diloco_close(gt_diloco_t *d, gt_status_t result)
{
    gt_log_errors_reset();
    if (!d || d->magic != GT_DILOCO_MAGIC) return;
    leave(d, result);
}
