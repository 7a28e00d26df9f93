/* files.c — what a site writes under RUN_DIR/SITE/, whatever trains it: anchors.jsonl (the
 * anchor's hash after every round: invariant I1 is checked across sites from these),
 * status.json (the live line `geotrain launch` shows), metrics.jsonl (unless the caller keeps
 * its own), submits.jsonl (the round and tokens of every delta it submitted: with anchors.jsonl's
 * per-round result tokens, the ledger that shows no token counted twice) and summary.json.
 *
 * status.json is rewritten at most twice a second, replaced by rename so a reader never sees
 * half a file, but not fsynced (a crash loses nothing that matters, and an fsync per write
 * would show up as lost compute time: GT_AFILE_NO_SYNC). summary.json is written once, crash-safe
 * (gt_write_file_atomic: fsynced, renamed, the directory fsynced).
 * Only rank 0 of a site writes.
 */
#include "diloco_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *dl_state_name(gt_diloco_state_t s)
{
    static const char *const names[] = {"starting", "joining", "training", "waiting",
                                        "done",     "stopped", "failed"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "?";
}

gt_status_t dl_open_files(gt_diloco_t *d, int append)
{
    static const char *const files[3] = {"metrics.jsonl", "anchors.jsonl", "submits.jsonl"};
    FILE **fps[3] = {&d->metrics, &d->anchors, &d->submits};
    char path[2300];
    for (int f = 0; f < 3 && d->rank == 0; f++) {
        if (f == 0 && !d->p.metrics) continue;
        snprintf(path, sizeof path, "%s/%s", d->site_dir, files[f]);
        FILE *fp = fopen(path, append ? "a" : "w");
        if (!fp) {
            GT_ERROR("site %s: cannot create %s: %s", d->name, path, strerror(errno));
            return GT_ERR_IO;
        }
        *fps[f] = fp;
    }
    /* the lines earlier lives wrote: this life's anchors are the lines after them (dl_log_void) */
    d->anchor_line0 = d->anchor_lines = 0;
    if (append && d->anchors) {
        snprintf(path, sizeof path, "%s/anchors.jsonl", d->site_dir);
        FILE *fp = fopen(path, "r");
        for (int ch; fp && (ch = fgetc(fp)) != EOF;) d->anchor_line0 += ch == '\n';
        if (fp) fclose(fp);
        d->anchor_lines = d->anchor_line0;
    }
    return GT_OK;
}

void dl_close_files(gt_diloco_t *d)
{
    if (d->metrics) fclose(d->metrics);
    if (d->anchors) fclose(d->anchors);
    if (d->submits) fclose(d->submits);
    d->metrics = d->anchors = d->submits = NULL;
}

void dl_log_anchor(gt_diloco_t *d, uint64_t r, uint64_t hash, double tokens)
{
    d->anchor_round = (int64_t)r;
    if (!d->anchors) return;
    d->anchor_lines++;
    if (tokens >= 0) /* to 3 decimals: the sum's rounding depends on the chunks' arrival order */
        fprintf(d->anchors, "{\"round\":%llu,\"anchor_hash\":\"%016llx\",\"tokens\":%.3f}\n",
                (unsigned long long)r, (unsigned long long)hash, tokens);
    else
        fprintf(d->anchors, "{\"round\":%llu,\"anchor_hash\":\"%016llx\"}\n", (unsigned long long)r,
                (unsigned long long)hash);
    fflush(d->anchors);
}

/* A life that ends removed from the run (a zombie, evicted, the minority of a partition): the
 * rounds it applied after the last one the others confirmed (confirmed_round) may have been
 * redone without it once they removed it — its own chunks of a round in flight closed here with
 * what had arrived, and there by their new owners without it. Those anchors were never used
 * by anyone (its contributions from them go to no view) and its next life takes the run's
 * anchor from the others, so they are void. SITE/void.jsonl says which: {"void_after": R,
 * "lines": [L0, L1]} — the anchors.jsonl lines L0 .. L1-1 (this life's, counted from 0) whose
 * round is after R. Readers that compare anchors across sites (the chaos test, bench/soak.py)
 * leave them out; anchors.jsonl itself keeps every line as it was written. */
void dl_log_void(gt_diloco_t *d)
{
    if (!d->anchors || d->anchor_round <= d->confirmed_round) return;
    char path[2300];
    snprintf(path, sizeof path, "%s/void.jsonl", d->site_dir);
    FILE *fp = fopen(path, "a");
    if (!fp) {
        GT_WARN("site %s: cannot write %s: %s", d->name, path, strerror(errno));
        return;
    }
    fprintf(fp, "{\"void_after\":%lld,\"lines\":[%llu,%llu],\"reason\":\"removed\"}\n",
            (long long)d->confirmed_round, (unsigned long long)d->anchor_line0,
            (unsigned long long)d->anchor_lines);
    fclose(fp);
    GT_INFO("site %s: the anchors it applied after round %lld were not confirmed by the others "
            "before its removal: void (%s)",
            d->name, (long long)d->confirmed_round, path);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void dl_log_submit(gt_diloco_t *d, uint64_t r, uint64_t tokens)
{
    if (!d->submits) return;
    fprintf(d->submits, "{\"round\":%llu,\"tokens\":%llu}\n", (unsigned long long)r,
            (unsigned long long)tokens);
    fflush(d->submits);
}

static void wan_bytes(gt_diloco_t *d, uint64_t *sent_p, uint64_t *recv_p)
{
    gt_wan_mesh_stats_t ms;
    memset(&ms, 0, sizeof ms);
    pthread_mutex_lock(&d->lock);
    dl_mesh_stats(d, &ms);
    pthread_mutex_unlock(&d->lock);
    *sent_p = ms.bytes_sent;
    *recv_p = ms.bytes_received;
}

void dl_write_status(gt_diloco_t *d, int force)
{
    uint64_t now = gt_time_ns();
    dl_prom_update(d, force); /* every rank's /metrics */
    if (d->rank != 0) return; /* the site's live line: rank 0's view of it */
    if (!force && now - d->status_ns < 500000000ull) return;
    uint64_t sent, recv;
    wan_bytes(d, &sent, &recv);
    uint64_t bytes = sent + recv;
    if (d->status_ns)
        d->wan_mbps = (double)(bytes - d->status_bytes) / ((now - d->status_ns) * 1e-3);
    d->status_ns = now;
    d->status_bytes = bytes;
    double wall = (now - (d->t_train ? d->t_train : d->t_start)) * 1e-9;
    json_t *o = json_pack("{s:s,s:s,s:I,s:I,s:I,s:I,s:f,s:f,s:f,s:f,s:I,s:i}", "site", d->name,
                          "state", dl_state_name(d->state), "round", (json_int_t)(d->step / d->H),
                          "step", (json_int_t)d->step, "total_steps", (json_int_t)d->total,
                          "rounds_applied", (json_int_t)d->rounds_applied, "loss", d->loss,
                          "tokens_per_s", wall > 0 ? (double)d->tokens / wall : 0.0, "wan_mbps",
                          d->wan_mbps, "wait_s", d->wait_s, "view_epoch",
                          (json_int_t)dl_view(d)->epoch, "live_sites", (int)dl_view(d)->n_members);
    if (o && d->train_start_unix > 0)
        json_object_set_new(o, "train_start_unix", json_real(d->train_start_unix));
    if (o) { /* this process's life so far: launch's goodput breakdown (docs/diloco.md) */
        double now_unix = gt_unix_time();
        json_object_set_new(o, "time_unix", json_real(now_unix));
        json_object_set_new(o, "process_start_unix", json_real(d->start_unix));
        json_object_set_new(o, "life_compute_s", json_real(d->life_compute_s));
        json_object_set_new(o, "life_tokens", json_integer((json_int_t)d->life_tokens));
        json_object_set_new(o, "chaos_slow_s", json_real(d->chaos_slow_s));
        json_object_set_new(o, "life_wait_s", json_real(d->wait_s - d->life_wait0));
        if (d->t_train_end && d->train_start_unix > 0)
            json_object_set_new(o, "train_end_unix",
                                json_real(now_unix - (now - d->t_train_end) * 1e-9));
    }
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    char path[2300];
    snprintf(path, sizeof path, "%s/status.json", d->site_dir);
    if (text && gt_write_file_atomic(path, text, strlen(text), GT_AFILE_NO_SYNC) != GT_OK)
        GT_WARN("site %s: cannot write %s", d->name, path);
    free(text);
    json_decref(o);
}

void dl_metrics_line(gt_diloco_t *d)
{
    if (!d->metrics) return;
    uint64_t sent, recv, now = gt_time_ns();
    wan_bytes(d, &sent, &recv);
    double wall = (now - d->t_train) * 1e-9;
    double tps = now > d->metrics_t
                     ? (double)(d->tokens - d->metrics_tok) / ((now - d->metrics_t) * 1e-9)
                     : 0.0;
    d->metrics_t = now;
    d->metrics_tok = d->tokens;
    fprintf(d->metrics,
            "{\"step\":%llu,\"round\":%llu,\"loss\":%.6f,\"tokens\":%llu,\"tokens_per_s\":%.1f,"
            "\"time\":%.3f,\"wan_bytes_sent\":%llu,\"wan_bytes_received\":%llu,\"wait_s\":%.3f,"
            "\"compute_utilization\":%.4f,\"view_epoch\":%llu}\n",
            (unsigned long long)d->step, (unsigned long long)(d->step / d->H), d->loss,
            (unsigned long long)d->tokens, tps, wall, (unsigned long long)sent,
            (unsigned long long)recv, d->wait_s, wall > 0 ? d->compute_s / wall : 0.0,
            (unsigned long long)dl_view(d)->epoch);
    fflush(d->metrics);
}

/* {"peer": {"sent", "took", "fins", "engines"}} for every other site of the run: contribution
 * frames sent to it and taken from it since the later of its and this site's joins, and how
 * many of this site's outer engines (lanes, fragments; every rank's) had its FIN out of how
 * many (gt_outer_ledger). Collective over the site's ranks. */
static gt_status_t dl_ledger_json(gt_diloco_t *d, json_t **out)
{
    uint32_t n = d->cfg->n_sites;
    uint64_t *v = calloc((size_t)n * 4 + 1, sizeof *v);
    if (!v) return GT_ERR_NOMEM;
    pthread_mutex_lock(&d->lock);
    for (uint32_t f = 0; f < d->n_eng; f++) {
        if (!d->outers[f]) continue;
        for (uint32_t s = 0; s < n; s++) {
            gt_outer_ledger_t l;
            if (s == d->site || gt_outer_ledger(d->outers[f], s, &l) != GT_OK) continue;
            v[4 * s] += l.sent, v[4 * s + 1] += l.took, v[4 * s + 2] += l.fin != 0;
            v[4 * s + 3]++;
        }
    }
    pthread_mutex_unlock(&d->lock);
    gt_status_t st = d->ranks > 1 ? dl_allreduce(d, v, (size_t)n * 4, GT_DILOCO_OP_SUM) : GT_OK;
    json_t *o = st == GT_OK ? json_object() : NULL;
    for (uint32_t s = 0; o && s < n; s++) {
        if (s == d->site || !v[4 * s + 3] || gt_topo_site_vacant(&d->cfg->sites[s])) continue;
        json_t *e = json_pack("{s:I,s:I,s:I,s:I}", "sent", (json_int_t)v[4 * s], "took",
                              (json_int_t)v[4 * s + 1], "fins", (json_int_t)v[4 * s + 2], "engines",
                              (json_int_t)v[4 * s + 3]);
        if (!e || json_object_set_new(o, d->cfg->sites[s].name, e) != 0) {
            json_decref(o);
            o = NULL;
        }
    }
    free(v);
    if (st != GT_OK) return st;
    if (!o) return GT_ERR_NOMEM;
    *out = o;
    return GT_OK;
}

/* The summary as JSON text (malloc'd). Collective over the site's ranks: the WAN counters are
 * the sum of every rank's. */
gt_status_t dl_summary_text(gt_diloco_t *d, gt_status_t result, int final, char **text_p)
{
    gt_wan_mesh_stats_t ms;
    gt_outer_stats_t os;
    memset(&ms, 0, sizeof ms);
    memset(&os, 0, sizeof os);
    pthread_mutex_lock(&d->lock);
    dl_mesh_stats(d, &ms);
    if (d->outer) dl_outer_stats(d, &os);
    pthread_mutex_unlock(&d->lock);
    uint64_t refetches = d->refetches;
    if (d->ranks > 1) { /* the site's WAN traffic is every rank's */
        uint64_t *f[] = {&ms.bytes_sent, &ms.bytes_received, &ms.rejected, &os.on_time, &os.late,
                         &os.dropped, &os.rejected, &os.clipped, &os.hash_checks,
                         &os.hash_mismatches, &os.deltas_sent, &refetches, &os.open, &os.joins,
                         &os.unreceived, &os.pulls, &os.relays, &os.detours, &os.detours_passed,
                         /* listening socket, re-sends (wan/channel/ctl.c, wan/mesh/mesh.c) */
                         &ms.gate.handshakes_refused, &ms.gate.handshakes_timed_out,
                         &ms.gate.connections_capped, &ms.reconnects, &ms.resent, &ms.duplicates,
                         &ms.peers_cut, &ms.gate.data_stray, &ms.emu_held_by_cut,
                         &ms.emu_refused_by_cut, &ms.gate.tunnels};
        uint64_t v[sizeof f / sizeof f[0]];
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) v[i] = *f[i];
        gt_status_t st = dl_allreduce(d, v, sizeof v / sizeof v[0], GT_DILOCO_OP_SUM);
        if (st != GT_OK) return st;
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) *f[i] = v[i];
    }
    /* The outer state's host memory (every rank's, summed) and the training thread's time in
     * the submits and applies (the slowest rank's): what the outer step costs a trainer. */
    uint64_t mem_peak = gt_mem_count_peak(&d->mem), mem_now = gt_mem_count_now(&d->mem);
    double tmed[2] = {0, 0}; /* a call's median, times F: a round's */
    for (int w = 0; w < 2; w++) {
        size_t n = w ? d->applies_timed : d->submits_timed;
        double *v = n && n <= d->t_cap[w] ? malloc(n * sizeof *v) : NULL;
        if (!v) continue;
        memcpy(v, d->t_calls[w], n * sizeof *v);
        qsort(v, n, sizeof *v, cmp_double);
        tmed[w] = (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2])) * d->F;
        free(v);
    }
    uint64_t tt[7] = {
        (uint64_t)llround(d->submit_s * 1e9),     (uint64_t)llround(d->apply_s * 1e9),
        (uint64_t)llround(d->submit_max_s * 1e9), (uint64_t)llround(d->apply_max_s * 1e9),
        (uint64_t)llround(tmed[0] * 1e9),         (uint64_t)llround(tmed[1] * 1e9),
        (uint64_t)llround(d->enc_wait_s * 1e9)};
    /* each rank's peak, in its slot (the outer state is split over the ranks: each holds its
     * lanes' share) */
    uint64_t *by_rank = calloc(d->ranks, sizeof *by_rank);
    if (!by_rank) return GT_ERR_NOMEM;
    by_rank[d->rank] = mem_peak;
    if (d->ranks > 1) {
        uint64_t mv[2] = {mem_peak, mem_now};
        gt_status_t st = dl_allreduce(d, mv, 2, GT_DILOCO_OP_SUM);
        if (st == GT_OK) st = dl_allreduce(d, tt, 7, GT_DILOCO_OP_MAX);
        if (st == GT_OK) st = dl_allreduce(d, by_rank, d->ranks, GT_DILOCO_OP_SUM);
        if (st != GT_OK) {
            free(by_rank);
            return st;
        }
        mem_peak = mv[0];
        mem_now = mv[1];
    }
    uint64_t now = gt_time_ns();
    double wall = (now - d->t_start) * 1e-9;
    uint64_t t_end = d->t_train_end ? d->t_train_end : now;
    double train = d->t_train ? (t_end - d->t_train) * 1e-9 : 0.0;
    double final_loss = d->loss_n ? d->loss_acc / d->loss_n : NAN;
    double per_round = d->rounds_applied ? d->passes / (double)d->rounds_applied : 0.0;
    const char *status = !final                     ? dl_state_name(d->state)
                         : result == GT_OK          ? "finished"
                         : result == GT_ERR_CLOSED  ? "stopped"
                         : result == GT_ERR_RETIRED ? "retired"
                                                    : "failed";
    json_t *o = json_pack(
        "{s:I,s:f,s:s,s:s,s:I,s:I,s:I,s:o,s:f,s:f,s:f,s:f,s:I,s:I,s:I,s:I,s:{s:I,s:I,s:I,s:I,s:"
        "I,s:I,s:I},s:I,s:I,s:I,s:I,s:s,s:i,s:I,s:I,s:I,s:f,s:f}",
        "anchor_refetches", (json_int_t)refetches, "train_s", train, "site", d->name, "status",
        status, "steps", (json_int_t)d->step, "rounds_applied", (json_int_t)d->rounds_applied,
        "tokens", (json_int_t)d->tokens, "final_loss",
        isfinite(final_loss) ? json_real(final_loss) : json_null(), "elapsed_s", wall, "compute_s",
        d->compute_s, "wait_s", d->wait_s, "compute_utilization",
        train > 0 ? d->compute_s / train : 0.0, "wan_bytes_sent", (json_int_t)ms.bytes_sent,
        "wan_bytes_received", (json_int_t)ms.bytes_received, "params", (json_int_t)d->n,
        "view_epoch", (json_int_t)dl_view(d)->epoch, "contributions", "on_time",
        (json_int_t)os.on_time, "late", (json_int_t)os.late, "dropped", (json_int_t)os.dropped,
        "rejected", (json_int_t)os.rejected, "clipped", (json_int_t)os.clipped, "open_at_end",
        (json_int_t)os.open, "unreceived", (json_int_t)os.unreceived, "hash_checks",
        (json_int_t)os.hash_checks, "hash_mismatches", (json_int_t)os.hash_mismatches,
        "frames_rejected", (json_int_t)ms.rejected, "deltas_sent", (json_int_t)os.deltas_sent,
        "error", result == GT_OK || result == GT_ERR_CLOSED ? "" : gt_status_str(result), "ranks",
        (int)d->ranks, "joined_round", (json_int_t)d->joined_round, "steps_trained",
        (json_int_t)d->steps_trained, "joins_seen", (json_int_t)os.joins, "param_passes", d->passes,
        "param_passes_per_round", per_round);
    if (!o) {
        free(by_rank);
        return GT_ERR_NOMEM;
    }
    /* goodput (launch): this life's speed without chaos slowdowns, and when it trained */
    double now_unix = gt_unix_time();
    double end_unix = now_unix - (d->t_train_end ? (now - d->t_train_end) * 1e-9 : 0.0);
    json_object_set_new(o, "steps_skipped", json_integer((json_int_t)d->steps_skipped));
    json_object_set_new(o, "outer_state_bytes_peak", json_integer((json_int_t)mem_peak));
    json_object_set_new(o, "outer_state_bytes_now", json_integer((json_int_t)mem_now));
    json_object_set_new(o, "outer_state_bytes_per_param",
                        json_real(d->n ? (double)mem_peak / (double)d->n : 0.0));
    json_t *per_rank = json_array();
    for (uint32_t k = 0; per_rank && k < d->ranks; k++)
        json_array_append_new(per_rank, json_real(d->n ? (double)by_rank[k] / (double)d->n : 0.0));
    free(by_rank);
    json_object_set_new(o, "outer_state_bytes_per_param_by_rank",
                        per_rank ? per_rank : json_null());
    /* per round: a round is F submits and F applies (streaming fragments) */
    double rounds_s = d->submits_timed ? (double)d->submits_timed / d->F : 0.0;
    double rounds_a = d->applies_timed ? (double)d->applies_timed / d->F : 0.0;
    json_object_set_new(o, "submit_s_per_round",
                        json_real(rounds_s > 0 ? tt[0] * 1e-9 / rounds_s : 0.0));
    json_object_set_new(o, "apply_s_per_round",
                        json_real(rounds_a > 0 ? tt[1] * 1e-9 / rounds_a : 0.0));
    json_object_set_new(o, "submit_s_max", json_real(tt[2] * 1e-9));
    json_object_set_new(o, "apply_s_max", json_real(tt[3] * 1e-9));
    json_object_set_new(o, "submit_s_median", json_real(tt[4] * 1e-9));
    json_object_set_new(o, "apply_s_median", json_real(tt[5] * 1e-9));
    /* the training thread's waits for the encoder (part of the submit and apply seconds) */
    json_object_set_new(o, "encode_wait_s", json_real(tt[6] * 1e-9));
    /* applies whose outer step the encoder thread ran before the apply step (dl_pre_apply) */
    json_object_set_new(o, "outer_steps_early", json_integer((json_int_t)d->pre_applies));
    /* this life's contribution ledger with each peer (launch closes it where no FIN came) */
    json_t *ledger = NULL;
    gt_status_t lst = dl_ledger_json(d, &ledger);
    if (lst != GT_OK) {
        json_decref(o);
        return lst;
    }
    json_object_set_new(o, "ledger", ledger);
    /* result chunks asked of a peer (their owner's RESULT had not come), and relayed to one */
    json_object_set_new(o, "result_pulls", json_integer((json_int_t)os.pulls));
    json_object_set_new(o, "result_relays", json_integer((json_int_t)os.relays));
    /* own contributions sent through a peer (their owner unreachable), and peers' passed on */
    json_object_set_new(o, "contribution_detours", json_integer((json_int_t)os.detours));
    json_object_set_new(o, "contribution_detours_passed",
                        json_integer((json_int_t)os.detours_passed));
    json_object_set_new(o, "rounds_cut", json_integer((json_int_t)d->rounds_cut));
    /* sites this process evicted as one of the majority that could not reach them */
    json_object_set_new(o, "evictions", json_integer((json_int_t)d->evictions));
    json_object_set_new(o, "chaos_slow_s", json_real(d->chaos_slow_s));
    json_object_set_new(o, "paused_s", json_real(d->paused_s));
    json_object_set_new(o, "step_held_max_s", json_real(d->held_max_s));
    json_object_set_new(o, "step_held_max_at", json_integer((json_int_t)d->held_max_step));
    json_object_set_new(o, "carried_tokens", json_integer((json_int_t)d->carried_tokens));
    json_object_set_new(o, "wait_max_s", json_real(d->wait_max_s));
    json_object_set_new(o, "wait_max_round", json_integer((json_int_t)d->wait_max_round));
    json_object_set_new(o, "wan_thread_gap_max_s", json_real(d->wan_gap_max_s));
    json_object_set_new(o, "fence_confirms", json_integer((json_int_t)d->fence_confirms));
    json_object_set_new(o, "life_tokens", json_integer((json_int_t)d->life_tokens));
    json_object_set_new(o, "life_compute_s", json_real(d->life_compute_s));
    /* a field that does not apply (never trained, not resumed) is left out, not null */
    if (d->train_start_unix > 0) {
        json_object_set_new(o, "train_start_unix", json_real(d->train_start_unix));
        json_object_set_new(o, "train_end_unix", json_real(end_unix));
    }
    if (d->resumed_step >= 0)
        json_object_set_new(o, "resumed_step", json_integer((json_int_t)d->resumed_step));
    json_object_set_new(o, "handshakes_refused",
                        json_integer((json_int_t)ms.gate.handshakes_refused));
    json_object_set_new(
        o, "wan",
        json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "handshakes_refused",
                  (json_int_t)ms.gate.handshakes_refused, "handshakes_timed_out",
                  (json_int_t)ms.gate.handshakes_timed_out, "connections_capped",
                  (json_int_t)ms.gate.connections_capped, "reconnects", (json_int_t)ms.reconnects,
                  "resent", (json_int_t)ms.resent, "duplicates", (json_int_t)ms.duplicates,
                  "peers_cut", (json_int_t)ms.peers_cut, "data_stray",
                  (json_int_t)ms.gate.data_stray, "frames_rejected", (json_int_t)ms.rejected));
    /* UCX's TCP connections carried by the sealed relay (wan/channel/relay.c) */
    json_object_set_new(json_object_get(o, "wan"), "relay_tunnels",
                        json_integer((json_int_t)ms.gate.tunnels));
    if (d->cfg->wan.emulation.enabled) {
        json_t *w = json_object_get(o, "wan");
        json_object_set_new(w, "emu_held_by_cut", json_integer((json_int_t)ms.emu_held_by_cut));
        json_object_set_new(w, "emu_refused_by_cut",
                            json_integer((json_int_t)ms.emu_refused_by_cut));
    }
    json_object_set_new(o, "eval_loss", json_null());
    /* Median seconds from submitting a round to holding all of its result (bench outer). */
    double *ex = d->exch_n ? malloc(d->exch_n * sizeof *ex) : NULL;
    if (ex) {
        memcpy(ex, d->exch, d->exch_n * sizeof *ex);
        qsort(ex, d->exch_n, sizeof *ex, cmp_double);
        size_t h = d->exch_n / 2;
        double med = d->exch_n % 2 ? ex[h] : 0.5 * (ex[h - 1] + ex[h]);
        free(ex);
        json_object_set_new(o, "exchange_s_median", json_real(med));
    } else {
        json_object_set_new(o, "exchange_s_median", json_null());
    }
    /* The highest send rate over any 1 s window (streaming fragments lower it; bench outer
     * --fragments), in Mbit/s of payload handed over by the mesh. */
    pthread_mutex_lock(&d->lock);
    double peak = d->peak_wan_bps;
    pthread_mutex_unlock(&d->lock);
    json_object_set_new(o, "peak_wan_mbps", json_real(peak / 1e6));
    for (int i = 0; i < d->n_results; i++)
        json_object_set_new(o, d->result_key[i],
                            isfinite(d->result_val[i]) ? json_real(d->result_val[i]) : json_null());
    char *text = json_dumps(o, JSON_INDENT(2));
    json_decref(o);
    if (!text) return GT_ERR_NOMEM;
    *text_p = text;
    return GT_OK;
}

gt_status_t dl_write_summary(gt_diloco_t *d, gt_status_t result)
{
    char *text = NULL;
    gt_status_t st = dl_summary_text(d, result, 1, &text);
    if (st != GT_OK || d->rank != 0) {
        free(text);
        return st;
    }
    char path[2300];
    snprintf(path, sizeof path, "%s/summary.json", d->site_dir);
    st = gt_write_file_atomic(path, text, strlen(text), 0);
    free(text);
    return st;
}
