/* launch_summary.c — what `geotrain launch` records of a run: each site's process lives (for
 * goodput's breakdown: when each began and ended, stopped and trained) and RUN_DIR/summary.json,
 * the sites' own summaries gathered with the run's totals, the WAN bytes against sync-dp's, the
 * contribution ledgers and goodput.
 */
#include "launch_internal.h"

#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* sync-dp's bytes for the same run: every step, a bf16 ring all-reduce of the gradients
 * across the S sites, where each site sends 2 (S - 1) / S of the vector. */
static double sync_dp_bytes(double params, double steps, uint32_t S)
{
    return S > 1 ? steps * S * 2.0 * (S - 1) / S * params * 2.0 : 0.0;
}

/* Closes the contribution ledger where a FIN did not come (docs/diloco.md, "The end of a run"):
 * for each site A and peer B whose FIN none of A's engines had, the frames A sent B that B's
 * finished last life did not take are unreceived too (both counters run since the later of the
 * two sites' joins). Pairs that cannot be closed so (B did not finish, or only some of A's
 * engines had B's FIN) are listed in *unclosed as "A->B". Returns the frames added. */
static json_int_t close_ledgers(json_t *sites, json_t *unclosed)
{
    json_int_t added = 0;
    const char *a, *b;
    json_t *sa, *e;
    json_object_foreach(sites, a, sa)
    {
        json_object_foreach(json_object_get(sa, "ledger"), b, e)
        {
            double sent = gt_launch_jnum(e, "sent"), fins = gt_launch_jnum(e, "fins"),
                   engines = gt_launch_jnum(e, "engines");
            if (!(fins < engines) || sent <= 0) continue; /* closed by the FINs, or nothing */
            json_t *sb = json_object_get(sites, b);
            json_t *back = json_object_get(json_object_get(sb, "ledger"), a);
            const char *status = json_string_value(json_object_get(sb, "status"));
            if (fins > 0 || !back || !status || strcmp(status, "finished") != 0) {
                json_array_append_new(unclosed, json_sprintf("%s->%s", a, b));
                continue;
            }
            double took = gt_launch_jnum(back, "took");
            if (sent > took) added += (json_int_t)(sent - took);
        }
    }
    return added;
}

/* The record of the life of site p's process that ended at `now` (unix seconds): when it
 * started and ended, and — from its last status.json, if that file is this life's — when it
 * trained and how its training time went (compute at its own speed, chaos slowdown, waits).
 * A process killed (-9) leaves the status of up to half a second before; a process killed
 * before its first status leaves none: its whole life counts as starting up. */
static void life_end(site_proc_t *p, const char *run_dir, double now)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s/status.json", run_dir, p->name);
    json_t *st = gt_launch_read_json(path);
    double ps = gt_launch_jnum(st, "process_start_unix");
    int mine = ps > p->last_pstart + 1e-6 && ps <= now;
    json_t *rec = json_pack("{s:f,s:f,s:f}", "start_unix", mine ? ps : p->life_start, "end_unix",
                            now, "stopped_s", p->life_stopped_s);
    if (rec && mine) {
        static const char *const keys[] = {"train_start_unix", "train_end_unix", "life_compute_s",
                                           "life_tokens",      "chaos_slow_s",   "life_wait_s",
                                           "time_unix"};
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            if (json_is_number(json_object_get(st, keys[k])))
                json_object_set_new(rec, keys[k], json_real(gt_launch_jnum(st, keys[k])));
        p->last_pstart = ps;
    }
    if (rec) {
        /* ended: exited, or replaced by a new process in the same pass (a removed site's
         * restart), whose predecessor's status is still the one launch reaped */
        int ended = p->exited || p->pid != p->life_pid;
        char how[32] = "running";
        if (ended && WIFEXITED(p->status))
            snprintf(how, sizeof how, "exit %d", WEXITSTATUS(p->status));
        else if (ended && WIFSIGNALED(p->status))
            snprintf(how, sizeof how, "signal %d", WTERMSIG(p->status));
        json_object_set_new(rec, "end", json_string(how));
        if (!p->lives) p->lives = json_array();
        if (p->lives) json_array_append(p->lives, rec);
        json_decref(rec);
    }
    json_decref(st);
    p->life_pid = 0;
    p->life_stopped_s = 0;
    p->stop_since = 0;
}

/* Follows every site's process lives, once per pass of launch's loop (so to a quarter of a
 * second): a new pid begins a life, an exit (or a new pid) ends one, and SIGSTOPs add up.
 * final: the run is over, every life still followed ends now. */
void gt_launch_track_lives(site_proc_t *sp, uint32_t n, const char *run_dir, int final)
{
    double now = gt_unix_time();
    for (uint32_t i = 0; i < n; i++) {
        site_proc_t *p = &sp[i];
        int cur = p->started && !p->exited && p->pid > 0;
        if (p->life_pid && p->chaos_stopped && !p->stop_since) p->stop_since = now;
        if (p->stop_since && (!p->chaos_stopped || !cur || p->pid != p->life_pid || final)) {
            p->life_stopped_s += now - p->stop_since;
            p->stop_since = 0;
        }
        if (p->life_pid && (!cur || p->pid != p->life_pid || final)) life_end(p, run_dir, now);
        if (cur && !final && p->pid != p->life_pid) {
            p->life_pid = p->pid;
            p->life_start = now;
        }
    }
}

int gt_launch_write_summary(const char *run_dir, const gt_topo_config_t *cfg, site_proc_t *sp,
                            double wall_s, double t_first_unix, uint32_t whole_restarts,
                            uint32_t chaos_skipped)
{
    json_t *sites = json_object(), *out = NULL;
    double sent = 0, recv = 0, params = 0, max_steps = 0, eval_sum = 0;
    int eval_n = 0;
    json_int_t on_time = 0, late = 0, dropped = 0, rejected = 0, checks = 0, mism = 0, open = 0,
               unreceived = 0;
    /* The sites' WAN security counters (wan/channel/ctl.c, wan/mesh/mesh.c), summed. */
    static const char *const wan_keys[] = {"frames_rejected",      "handshakes_refused",
                                           "handshakes_timed_out", "connections_capped",
                                           "reconnects",           "resent",
                                           "duplicates",           "peers_cut"};
    json_int_t wan_sum[sizeof wan_keys / sizeof wan_keys[0]] = {0};
    for (uint32_t i = 0; i < cfg->n_sites; i++) {
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/%s/summary.json", run_dir, sp[i].name);
        json_t *s = gt_launch_read_json(path);
        if (!s) {
            json_object_set_new(
                sites, sp[i].name,
                json_pack("{s:s,s:b}", "status", "no summary (killed?)", "killed", sp[i].killed));
            continue;
        }
        if (sp[i].lives) json_object_set(s, "lives", sp[i].lives);
        json_object_set_new(s, "killed", json_boolean(sp[i].killed || sp[i].restarted));
        json_object_set_new(s, "restarted", json_boolean(sp[i].restarted));
        json_object_set_new(s, "started_late", json_boolean(sp[i].join_round >= 0));
        if (json_is_number(json_object_get(s, "eval_loss"))) {
            eval_sum += gt_launch_jnum(s, "eval_loss");
            eval_n++;
        }
        sent += gt_launch_jnum(s, "wan_bytes_sent");
        recv += gt_launch_jnum(s, "wan_bytes_received");
        if (gt_launch_jnum(s, "params") > params) params = gt_launch_jnum(s, "params");
        if (gt_launch_jnum(s, "steps") > max_steps) max_steps = gt_launch_jnum(s, "steps");
        json_t *c = json_object_get(s, "contributions");
        on_time += (json_int_t)gt_launch_jnum(c, "on_time");
        late += (json_int_t)gt_launch_jnum(c, "late");
        dropped += (json_int_t)gt_launch_jnum(c, "dropped");
        rejected += (json_int_t)gt_launch_jnum(c, "rejected");
        open += (json_int_t)gt_launch_jnum(c, "open_at_end");
        unreceived += (json_int_t)gt_launch_jnum(c, "unreceived");
        checks += (json_int_t)gt_launch_jnum(s, "hash_checks");
        mism += (json_int_t)gt_launch_jnum(s, "hash_mismatches");
        for (size_t k = 0; k < sizeof wan_keys / sizeof wan_keys[0]; k++)
            wan_sum[k] += (json_int_t)gt_launch_jnum(json_object_get(s, "wan"), wan_keys[k]);
        json_object_set_new(sites, sp[i].name, s);
    }
    json_t *unclosed = json_array();
    json_int_t closed = unclosed ? close_ledgers(sites, unclosed) : 0;
    unreceived += closed;
    double dp = sync_dp_bytes(params, max_steps, cfg->n_sites);
    out = json_pack("{s:o,s:o,s:f,s:f,s:f,s:o,s:{s:I,s:I,s:I,s:I,s:I,s:I},s:I,s:I,s:f,s:i,s:s,s:s}",
                    "eval_loss", eval_n ? json_real(eval_sum / eval_n) : json_null(), "sites",
                    sites, "wan_bytes_sent", sent, "wan_bytes_received", recv, "sync_dp_bytes", dp,
                    "bandwidth_saving", sent > 0 ? json_real(dp / sent) : json_null(),
                    "contributions", "on_time", on_time, "late", late, "dropped", dropped,
                    "rejected", rejected, "open_at_end", open, "unreceived", unreceived,
                    "hash_checks", checks, "hash_mismatches", mism, "wall_s", wall_s, "n_sites",
                    (int)cfg->n_sites, "codec", cfg->codec.name, "mode",
                    cfg->outer.mode == GT_OUTER_SYNC_DP ? "sync-dp" : "diloco");
    for (size_t k = 0; k < sizeof wan_keys / sizeof wan_keys[0] && out; k++)
        json_object_set_new(out, wan_keys[k], json_integer(wan_sum[k]));
    json_t *contrib = out ? json_object_get(out, "contributions") : NULL;
    if (contrib) {
        json_object_set_new(contrib, "unreceived_by_ledger", json_integer(closed));
        json_object_set_new(contrib, "ledger_unclosed",
                            unclosed ? json_incref(unclosed) : json_array());
    }
    const char *names[GT_OUTER_MAX_SITES];
    json_t *lives[GT_OUTER_MAX_SITES];
    for (uint32_t i = 0; i < cfg->n_sites && i < GT_OUTER_MAX_SITES; i++) {
        names[i] = sp[i].name;
        lives[i] = sp[i].lives;
    }
    int sync = cfg->outer.mode == GT_OUTER_SYNC_DP;
    if (out) {
        gt_chaos_goodput(run_dir, names, cfg->n_sites,
                         (uint64_t)cfg->run.rounds * (sync ? cfg->inner.steps : 1), lives,
                         t_first_unix, out);
        double gw = gt_launch_jnum(out, "goodput_wall_s");
        if (g_n_chaos && isfinite(gw) && gw > 0)
            json_object_set_new(out, "goodput_bound",
                                json_real(gt_chaos_bound(g_chaos, g_n_chaos, cfg->n_sites,
                                                         cfg->run.rounds, gw / cfg->run.rounds)));
        json_object_set_new(out, "whole_run_restarts", json_integer(whole_restarts));
        json_object_set_new(out, "chaos_skipped", json_integer(chaos_skipped));
    }
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/summary.json", run_dir);
    int rc = out && json_dump_file(out, path, JSON_INDENT(2)) == 0 ? 0 : -1;
    if (rc == 0) {
        printf("\nsummary: %s\n", path);
        if (eval_n)
            printf("  final anchor's loss on held-out batches: %.4f (mean over %d sites)\n",
                   eval_sum / eval_n, eval_n);
        printf("  WAN bytes sent %.3g, sync-dp would have sent %.3g: saving %.0fx\n", sent, dp,
               sent > 0 ? dp / sent : 0.0);
        printf("  contributions: %lld on time, %lld late, %lld dropped, %lld rejected, %lld "
               "open at the end, %lld unreceived (sent to a site that had finished); hash "
               "checks %lld, mismatches %lld\n",
               (long long)on_time, (long long)late, (long long)dropped, (long long)rejected,
               (long long)open, (long long)unreceived, (long long)checks, (long long)mism);
        if (closed)
            printf("  (%lld of the unreceived counted from the sites' ledgers: their FIN did not "
                   "cross, e.g. a link cut that outlasted the run)\n",
                   (long long)closed);
        char *open_pairs = json_array_size(unclosed) ? json_dumps(unclosed, 0) : NULL;
        if (open_pairs)
            printf("  ledgers not closed (a site did not finish, or FINs came on some lanes "
                   "only): %s\n",
                   open_pairs);
        free(open_pairs);
        printf("  WAN: %lld frames rejected, %lld handshakes refused, %lld timed out; %lld "
               "reconnects, %lld messages re-sent\n",
               (long long)wan_sum[0], (long long)wan_sum[1], (long long)wan_sum[2],
               (long long)wan_sum[4], (long long)wan_sum[5]);
        json_t *g = json_object_get(out, "goodput");
        if (json_is_number(g))
            printf("  goodput %.4f: %.4g tokens reached the final anchor of %.4g the sites could "
                   "have trained in %.1f s\n",
                   json_number_value(g), gt_launch_jnum(out, "tokens_in_anchor"),
                   gt_launch_jnum(out, "tokens_possible"), gt_launch_jnum(out, "goodput_wall_s"));
        json_t *bd = json_object_get(out, "goodput_breakdown");
        if (json_is_object(bd)) {
            printf("  where the rest went (share of what the sites could have trained):");
            const char *k;
            json_t *v;
            json_object_foreach(bd, k, v)
            {
                if (strcmp(k, "in_anchor") != 0) printf(" %s %.3f", k, json_number_value(v));
            }
            printf("\n");
        }
        if (json_is_number(json_object_get(out, "goodput_bound")))
            printf("  goodput_bound %.4f: the most the chaos schedule's faults leave, whatever "
                   "the protocol does\n",
                   gt_launch_jnum(out, "goodput_bound"));
    }
    json_decref(unclosed);
    json_decref(out);
    return rc;
}
