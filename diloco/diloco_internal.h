/* diloco_internal.h — the state of one site's DiLoCo context, shared by the files of diloco/.
 *
 *   diloco.c   create / close, configuration, the step schedule (submit at r·H, apply at
 *              r·H + H + τ), status, sync-dp
 *   outer_step.c  the outer step over the vectors: submit, apply + rebase, the hash vote and
 *              re-fetch, the in-site all-gather of θ_s, the anchor's hash; counts passes
 *   liveness.c the wait for a round's result, and the rules that decide meanwhile that a peer
 *              is gone (minority partition, eviction by the majority, the liveness watch)
 *   faults.c   fault injection (gt_faults.h): slow steps, a corrupted anchor, a kill point
 *   state.c    the STATE protocol between sites: the start check, serving and fetching (θ_a, m),
 *              joining a run in progress
 *   probe.c    the START, PROBE and PROBE_INFO messages: their payloads, serving and taking them
 *   connect.c  the outer engines (outer/, gt_outer.h), mesh and membership; the background WAN
 *              thread; views
 *   files.c    anchors.jsonl, status.json, metrics.jsonl, summary.json
 *   prom.c     GET /metrics for Prometheus (sites[].metrics, metrics.listen)
 *   checkpoint.c  the outer state saved at a round boundary, and a whole run resumed from it
 *
 * Vectors (n = the full parameter vector, n_sub = this rank's lanes; n_sub = n with one rank):
 *   x       (n)      θ_s, the caller's; after an apply every rank's lanes of it are all-gathered
 *   anchor  (n_sub)  θ_a, this rank's lanes only (a site's outer state is split over its ranks)
 *   snap    (n_sub)  θ_s at the last submit, for the rebase, this rank's lanes only
 *                    (anchor and snap: own lane i at apos[i] — its full-vector offset with one
 *                    rank, so they are laid out as x; packed as mom with several)
 *   mom     (n_sub)  outer momentum, this rank's lanes
 *   delta   (n_sub)  sync-dp only: the step's gradient, packed (DiLoCo's Δ = θ_a − snap is
 *                    computed chunk by chunk as the engine encodes it: no vector)
 *   g       (n_sub)  sync-dp: the step's averaged gradient (swapped with the engine); DiLoCo
 *                    keeps no vector of a result: the apply decodes its frames chunk by chunk
 *   prev    (2n_sub) (θ_a, m) of this rank's lanes, packed, after the round before the one
 *                    θ_a and m hold (the newest round is served from θ_a and m themselves)
 * WAN groups (docs/diloco.md#lanes-across-ranks): the run has G = lcm(sites' ranks) groups;
 * this rank runs n_grp = G / R of them, grp[i] being group rank + i·R. Streaming fragments
 * (outer.fragments = F, docs/diloco.md#streaming-fragments): fragment f is the lanes l with
 * (l div G) mod F = f (layout.c cuts with G·F "ranks": a lane's "rank" is l mod G·F, its group
 * that mod G, its fragment that div G; its rank in the site is l mod R). This rank's lanes are
 * packed fragment after fragment, and inside a fragment group after group, so fragment f is
 * [frag_off[f], frag_off[f+1]) of every packed vector and engine e = f·n_grp + i (fragment f
 * of grp[i]) is [eng_off[e], eng_off[e+1]) of it, with its own outer engine over exactly that
 * slice (outers[e]; outer = outers[0]). With one group per rank engine e is fragment e.
 * Fragment f's round r is submitted at step r·H + off_f, off_f = H − (F − 1 − f)·H/F, and
 * applied τ steps later; θ_a and m hold each fragment's slice after its newest round, prev
 * after the round before (state.c, "The kept state").
 * Locking: `lock` guards the meshes, the outer engines, the views, the history and the fetch
 * state, which the WAN thread touches; everything else belongs to the caller's thread.
 */
#ifndef GT_DILOCO_INTERNAL_H
#define GT_DILOCO_INTERNAL_H

#include "gt_diloco.h"
#include "gt_faults.h"
#include "gt_outer.h"
#include "gt_wan.h"

#include <pthread.h>
#include <stdio.h>
#include <xxhash.h>

#define GT_DILOCO_MAGIC  0x444C4F43u /* "DLOC" */
#define DL_MAX_RESULTS   16
#define DL_MAX_FRAGMENTS 64
#define DL_MAX_ENGINES   64 /* outer engines of one rank: its WAN groups x fragments */

/* One WAN group this rank runs (docs/diloco.md#lanes-across-ranks): group g of the run carries
 * lanes {l : l mod G = g} and rank k of a site of R ranks runs the groups g mod R = k. A group
 * has, at every site, the same mesh port (the site's port + g) and run id (RUN.rankG when
 * G > 1), so its peers find it whatever their ranks; its engines are one per fragment. */
struct dl_group {
    struct gt_diloco *d;
    uint32_t g;       /* the run's group index */
    uint32_t i;       /* its index among this rank's groups */
    char run_id[640]; /* membership keys and secure-channel id */
    gt_wan_member_t *member;
    gt_wan_mesh_t *mesh;
    gt_outer_port_t *port; /* the group's engines (one a fragment) on its mesh (outer/port.c) */
    gt_wan_view_t view;
    uint64_t last_view_ns;
    int refresh_soon; /* set (atomically) by a thread that changed the membership (an eviction):
                         the WAN thread reads the view at its next turn, not a heartbeat later */
    uint64_t view_fail_ns; /* since when reading the view fails (0: it does not) */
    int view_fail_said;    /* that failure was logged */
};

/* STATE_REQ / STATE_CHUNK (between the same rank of two sites). A request names a round — or
 * STATE_INITIAL (the initial anchor) —, a fragment (the header's fragment field;
 * STATE_ALL_FRAGMENTS: the group's whole state) and a stripe (lane = k of chunk = n servers; 0
 * of 0 = the whole state), and carries a fetch id in its view_epoch field, which every reply
 * echoes. A reply: u32 status, u32 reserved, u64 offset (in floats, into the 2 n_sub floats θ_a
 * then m), u64 hash of the server's whole state, then the floats. */
#define STATE_HDR           24u
#define STATE_INITIAL       (UINT64_MAX - 2)
#define STATE_ALL_FRAGMENTS UINT16_MAX
/* dl_fetch_state's round that asks a PROBE_JOIN instead of state (never on the wire). */
#define STATE_PROBE         UINT64_MAX
#define HIST_INITIAL        (-2) /* the kept state's round of the initial state */
#define PREV_WRITING        (-3) /* prev_round[f] while a sweep fills prev */
/* A reply's status, and a fetch's outcome (STATE_BUSY: the peer a join probed does not train) */
enum { STATE_OK = 0, STATE_NOT_YET = 1, STATE_GONE = 3, STATE_BUSY = 4 };

/* PROBE / PROBE_INFO and START (probe.c): the small messages between the same rank of two sites
 * outside the outer rounds, each payload starting with its magic, all little-endian.
 * PROBE (PROBE_BYTES): u32 PROBE_MAGIC, u32 kind, u64 id. The kind says what the question is
 * for: a joiner's plan (PROBE_JOIN, the id its fetch id), the liveness watch (PROBE_LIVE, id 0:
 * any answer counts) or the partition rule (PROBE_REACH, the id reach_id).
 * PROBE_INFO, the answer: u32 PROBE_INFO_MAGIC, u32 kind, u64 id (both the probe's), u32 status
 * (PROBE_TRAINING, or PROBE_BUSY: the peer does not train yet, a joiner), u32 reserved; then,
 * for PROBE_JOIN only: u64 the round the peer submits next, u64 its n_params, u32 sites n, n x
 * u64 every site's first round as its outer engine knows it, u64 the step it is at.
 * START (START_BYTES, no answer): u32 START_MAGIC, u32 reserved, u64 n_params, u64 hash of the
 * initial vector. */
#define PROBE_MAGIC        0x51505447u /* "GTPQ" */
#define PROBE_INFO_MAGIC   0x49505447u /* "GTPI" */
#define START_MAGIC        0x53535447u /* "GTSS" */
#define PROBE_BYTES        16u
#define PROBE_INFO_HDR     24u
#define PROBE_JOIN_BODY(n) (28u + 8u * (size_t)(n))
#define START_BYTES        24u
enum { PROBE_JOIN = 1, PROBE_LIVE = 2, PROBE_REACH = 3 };
enum { PROBE_TRAINING = 0, PROBE_BUSY = 1 };

struct gt_diloco {
    uint32_t magic;
    gt_diloco_params_t p;
    gt_topo_config_t *own_cfg; /* loaded here (NULL: borrowed) */
    const gt_topo_config_t *cfg;
    /* outer.site_slots set: cfg is this copy of the loaded one with a slot for every site that
     * may be added mid-run (added.c takes them); NULL otherwise */
    gt_topo_config_t *slot_cfg;
    int added_bad_said;         /* a malformed added-site description in etcd was logged */
    uint64_t added_refused[16]; /* hashes of the added-site descriptions refused (logged once) */
    uint32_t site;
    const char *name;
    char run_dir[2048], site_dir[2200], run_id[600];
    uint64_t H, tau, total;
    int sync_dp;
    gt_status_t agreed; /* what the last dl_agree gave every rank (GT_OK: none) */
    int site_lock;      /* rank 0: SITE/site.lock's descriptor, held (flock) for the life; -1 */
    int in_step;        /* the training thread is inside gt_diloco_step or sync_grads (atomic) */
    uint64_t t_out;     /* when it last came out of gt_diloco_step (0: not yet; atomic) */
    /* Ranks and lanes (DESIGN §3): rank k carries the lanes l mod R = k, in G / R WAN groups. */
    uint32_t rank, ranks;
    uint32_t G;     /* the run's WAN groups (gt_topo_wan_groups) */
    uint32_t n_grp; /* this rank's: G / R */
    struct dl_group *grp;
    gt_topo_layout_t *layout; /* the full vector's, from topology/layout.c */
    size_t n, n_sub;
    size_t *gcounts, *gdispls; /* [ranks]: one all-gather's counts and displacements */
    float *x, *anchor, *snap, *mom, *delta;
    float *g[DL_MAX_ENGINES]; /* sync-dp: engine e's last result (its slice's length) */
    /* DiLoCo: a round's result stays in its engines' RESULT frames (gt_outer_result_hold) and
     * the sweep that applies it decodes them chunk by chunk into gbuf (max_chunk floats) with
     * gcmp (outer_step.c, dl_g_at): no vector of the result is kept. held[e]: the round engine
     * e holds (-1: none), released after the apply. */
    gt_cmp_ctx_t *gcmp;
    float *gbuf;
    size_t gbuf_floats; /* the largest chunk of any engine */
    int64_t held[DL_MAX_ENGINES];
    int gbuf_e; /* gbuf holds [gbuf_lo, gbuf_hi) of engine gbuf_e's round gbuf_r (-1: nothing) */
    uint64_t gbuf_r;
    size_t gbuf_lo, gbuf_hi;
    /* The kept state, served to peers under `lock` (state.c): fragment f's slice of θ_a and m
     * after round live_round[f] (-1: being rewritten, or its round not published yet: the
     * apply publishes an early outer step once past its fence), and of prev after round
     * prev_round[f] (-1: none; PREV_WRITING: a sweep is filling it). cur_round[f]: the round θ_a
     * and m hold or are being given, published or not (-1: none). */
    float *prev;
    int64_t live_round[DL_MAX_FRAGMENTS], prev_round[DL_MAX_FRAGMENTS];
    int64_t cur_round[DL_MAX_FRAGMENTS];
    int64_t sweep_from[DL_MAX_FRAGMENTS]; /* during a sweep: the round prev will hold */
    /* The anchor (and m) after round hold_round, moved out of prev when a sweep was about to
     * overwrite it while a joiner whose first round is hold_round + 1 may still fetch it for
     * its rebase (dl_hold_slot): served like prev for DL_HOLD_ROUNDS more rounds (-1: none). */
    float *hold;
    int64_t hold_round;
    uint64_t own_hash; /* hash of engine 0's lanes of θ_a after the last applied round */
    /* Streaming fragments, and engines (a fragment of a group) */
    uint32_t F, n_eng;          /* n_eng = F·n_grp */
    uint32_t *own_lanes, n_own; /* this rank's lanes, fragment after fragment */
    size_t *apos;               /* [n_own]: where own lane i lies in anchor and snap */
    uint32_t *owner; /* [lanes]: own_lanes index of lane l, or UINT32_MAX (another rank's) */
    uint32_t frag_lane[DL_MAX_FRAGMENTS + 1]; /* fragment f: own_lanes[frag_lane[f] ..) */
    size_t frag_off[DL_MAX_FRAGMENTS + 1];    /* fragment f: packed [frag_off[f] ..) */
    uint32_t eng_lane[DL_MAX_ENGINES + 1];    /* engine e: own_lanes[eng_lane[e] ..) */
    size_t eng_off[DL_MAX_ENGINES + 1];       /* engine e: packed [eng_off[e] ..) */
    gt_outer_t *outers[DL_MAX_ENGINES];
    int64_t fpending[DL_MAX_FRAGMENTS]; /* fragment f's round still to apply (-1: none) */
    uint64_t fnext[DL_MAX_FRAGMENTS];   /* the next round fragment f submits */
    uint64_t ehash[DL_MAX_ENGINES];     /* hash of engine e's lanes of θ_a (its vote) */
    uint64_t ftokens[DL_MAX_FRAGMENTS]; /* tokens since fragment f's last submit */
    double tok_acc; /* tokens of the round being applied, fragment by fragment */
    double passes;  /* full sweeps over the vector by the outer step (fractions for parts) */
    /* The bytes this rank's buffers that grow with n hold, its engines' included (base/mem.c):
     * outer_state_bytes_per_param in summary.json. */
    gt_mem_count_t mem;
    /* The training thread's time in the submits and the applies (dl_submit, dl_apply less
     * their waits for results), summed and the longest, and how many (summary.json). */
    double submit_s, submit_max_s, apply_s, apply_max_s;
    uint64_t submits_timed, applies_timed;
    double *t_calls[2]; /* each submit's [0] and apply's [1] time, for the medians */
    size_t t_cap[2];
    int dump_failed; /* run.dump: a write failed, dumping stopped (dump.c) */
    /* The encoder (outer_step.c): a submit's Δ encoded and posted off the training thread,
     * one job at a time (fragment enc_f's round enc_r, weighed enc_tok, voting enc_hash). The
     * training thread waits for it (dl_encode_wait) before anything that reads or writes what
     * it reads — θ_a, the snapshot, the engines' residuals: the next submit, an apply, a
     * joiner's rebase, a checkpoint, the end. */
    pthread_mutex_t enc_mu;
    pthread_cond_t enc_cv;
    pthread_t enc_thread;
    int enc_running, enc_stop, enc_busy;
    uint32_t enc_f;
    uint64_t enc_r;
    double enc_tok;
    uint64_t enc_hash[DL_MAX_ENGINES];
    gt_status_t enc_status;
    double enc_wait_s; /* the training thread's waits for it (summary.json encode_wait_s) */
    /* The same thread's second job (outer_step.c dl_pre_apply): a round's outer step taken as
     * soon as its result is whole, during the τ steps before its apply, so that the apply on
     * the training thread is the rebase alone. enc_outer: the job posted is that one (round
     * enc_r). pre_taken: the round whose result the training thread took early (-1: none),
     * pre_done: the round whose outer step is in θ_a and m (its kept state written but not
     * served before the apply publishes it; θ_a's hashes in own_hash and ehash). */
    int enc_outer;
    int64_t pre_taken, pre_done;
    gt_status_t pre_status; /* taking round pre_taken's result: its error, if any */
    uint64_t pre_applies;   /* applies whose outer step ran early (summary.json) */
    /* WAN (connect.c): the groups' meshes, members and views are in grp[] */
    gt_outer_t *outer;
    size_t part_floats; /* floats per STATE_CHUNK: what every site's receive buffer holds */
    pthread_mutex_t lock;
    pthread_t thread;      /* the WAN thread: meshes, outer engines, liveness watch */
    pthread_t view_thread; /* the membership view's reads (etcd requests: up to seconds) */
    int thread_running;
    volatile int thread_stop;
    volatile int wan_error; /* gt_status_t: the lease was lost */
    /* State transfer (state.c), under `lock`: one fetch at a time, over one group's mesh. */
    float *fetch;       /* 2 n_sub floats */
    uint32_t fetch_grp; /* the group (index into grp) whose state is fetched */
    uint64_t fetch_round;
    int fetching;
    uint64_t fetch_id;
    uint32_t fetch_n;
    int fetch_frag;     /* the fragment fetched, -1: the whole state (of the group) */
    size_t fetch_total; /* floats the fetch fills */
    uint32_t fetch_peer[GT_WAN_MAX_MEMBERS];
    size_t fetch_floats;
    uint64_t fetch_hash;
    int fetch_hash_set;
    int fetch_status;
    int probe_got;
    uint64_t fetch_limit_ns; /* a fetch's or probe's wait when not 0 (else wan.peer_timeout_ms) */
    uint64_t probe_next, probe_params;
    uint64_t probe_step; /* the step the peer was at (UINT64_MAX: it did not say) */
    uint64_t probe_first[GT_OUTER_MAX_SITES];
    /* The partition rule's probe (outer_step.c): a PROBE_REACH sent to every member at once and
     * never waited on; reach_id (0: none sent yet) tells its answers apart. */
    uint64_t reach_id, reach_sent_ns;
    uint8_t reach_asked[GT_OUTER_MAX_SITES], reach_got[GT_OUTER_MAX_SITES];
    uint32_t reach_members, reach_first; /* the view's members when sent; its first site */
    /* Eviction by the majority (outer_step.c): bit s: this site accuses site s (in every group
     * it runs) in etcd now; withdrawn when its wait ends. */
    uint64_t accused;
    uint64_t evictions; /* sites this site evicted (their lease revoked), for the summary */
    /* The liveness watch (outer_step.c, dl_live_tick): a liveness probe to every member of
     * group 0's view once a heartbeat, sent by the WAN thread. heard_ns[s]: when site s last
     * answered one; live_from_ns[s]: since when this incarnation of s (lease live_lease[s]) has
     * been asked (0: not in the view). Under d->lock. fsubmit_ns[f]: when fragment f's pending
     * round was submitted (the overlap before its wait is watched from then on). */
    uint64_t live_next_ns, live_judge_ns, live_accuse_ns;
    uint64_t heard_ns[GT_OUTER_MAX_SITES], live_from_ns[GT_OUTER_MAX_SITES];
    int64_t live_lease[GT_OUTER_MAX_SITES];
    uint64_t fsubmit_ns[DL_MAX_FRAGMENTS];
    uint8_t hello_got[GT_OUTER_MAX_SITES]; /* the peers' START messages (probe.c) */
    uint64_t hello_params[GT_OUTER_MAX_SITES], hello_hash[GT_OUTER_MAX_SITES];
    uint64_t bad_messages; /* malformed STATE, PROBE and START messages (dl_bad_message) */
    /* The schedule (diloco.c) */
    uint64_t step, first_step, steps_trained;
    uint64_t steps_skipped, rounds_cut; /* outer.catch_up: steps a round ended early skipped */
    uint64_t applied_upto, next_submit, joined_round, rounds_applied, refetches;
    /* A joiner that started training before its first round (dl_join): the round whose anchor
     * it fetches and rebases onto at that round's apply step (-1: none pending). */
    int64_t join_rebase;
    uint64_t join_trainers; /* bit s: site s trained when the join planned */
    uint64_t join_quiet;    /* bit s: site s did not answer the join's probe */
    int training, started_run;
    uint64_t round_tokens, tokens;
    /* the round of the anchor θ_a holds (-1: the initial one; set by dl_log_anchor and at a
     * resume), and the tokens a removed life kept that this one added (carry.c) */
    int64_t anchor_round;
    /* The newest round whose anchor this life knows the others hold too: the hash vote agreed
     * with it, or it was taken from a peer (a join, a re-fetch); -1 none. A life that ends
     * removed says so in void.jsonl (dl_log_void): the rounds it applied after this one the
     * others may have redone without it. */
    int64_t confirmed_round;
    uint64_t anchor_line0, anchor_lines; /* anchors.jsonl lines before this life, and now */
    uint64_t carried_tokens;
    int anchor_bad; /* it leaves for an anchor that differs from the majority's: keep nothing */
    double loss, loss_acc;
    uint32_t loss_n;
    double compute_s, wait_s;
    double *exch; /* per applied round: submit to the last result chunk (s), for the median */
    size_t exch_n, exch_cap;
    /* Fault injection (faults.c): what was asked for, and each slow window's progress: when
     * it began and how long it lasts (fixed when it begins), or that it is over. The time a
     * window added is kept apart (chaos_slow_s) so goodput can use the site's own speed. */
    gt_faults_t faults;
    int stepped;           /* gt_diloco_step was called in this process (faults are set before) */
    long cuts_off;         /* bytes of the cuts file read (dl_fault_cuts_poll) */
    uint64_t cuts_next_ns; /* when to read it again */
    struct dl_win {
        uint64_t start_ns; /* 0: not begun */
        double len_s;
        int over;
    } win[GT_FAULTS_MAX_WINDOWS];
    double chaos_slow_s;
    double base_ema; /* a step's time at the site's usual speed (no chaos slowdown), moving avg */
    /* the trainer's step time (a moving average, pauses left out), and the pauses: steps or
     * emulated sleeps far longer than the steps before (SIGSTOP), counted as no compute */
    double step_ema, paused_s;
    /* The longest a step was held inside gt_diloco_step beyond its waits for results (the
     * round schedule, the outer step, the status line — and the WAN thread's lock, which it
     * takes): a view change that blocked under that lock shows here. */
    double held_max_s;
    /* the longest single wait for a round's result (dl_wait_result; not the run's last round,
     * whose close waits for stragglers by design), and that round */
    double wait_max_s;
    uint64_t wait_max_round;
    /* the longest between two turns of the WAN thread (it answers probes and state requests,
     * moves messages, keeps the deadlines): what held it up — its lock, the machine, a pause
     * of the process (SIGSTOP) — showed as peers that answer nothing. Written by that thread,
     * under `lock`. */
    double wan_gap_max_s;
    /* The membership fence (connect.c, dl_fence): alive_ns, the WAN thread's last turn; away_ns,
     * the longest gap between two turns seen since the fence last looked (0: none past the
     * fence's bound). A gap that long means this process was stopped, so the others may have
     * removed it; atomics, written by the WAN thread, read and cleared by the training thread. */
    uint64_t alive_ns, away_ns;
    uint64_t fence_confirms; /* membership confirmations the fence asked for, for the summary */
    uint64_t held_max_step;
    /* tokens trained by this process, and its compute time without chaos slowdowns: the
     * site's speed for goodput (tokens and compute_s are restored on resume) */
    uint64_t life_tokens;
    double life_compute_s;
    double train_start_unix; /* CLOCK_REALTIME when this process started training */
    double start_unix;       /* ... when this process created its site (launch's life records) */
    double life_wait0;       /* wait_s when this process started training (resume restores it) */
    uint64_t t_start, t_train, t_train_end, t_last; /* t_last: the previous step call returned */
    uint64_t metrics_t, metrics_tok;
    gt_diloco_state_t state;
    int closed;
    /* Files (files.c); rank 0 only */
    FILE *metrics, *anchors, *submits;
    uint64_t status_ns, status_bytes;
    double wan_mbps;
    /* The highest send rate over any 1 s (peak_wan_mbps in summary.json): the WAN thread samples
     * the mesh's bytes sent every 10 ms into a ring of 1 s (under `lock`). */
    uint64_t rate_t[100], rate_b[100];
    uint32_t rate_i, rate_n;
    uint64_t rate_next_ns;
    double peak_wan_bps;
    char result_key[16][48];
    double result_val[16];
    int n_results;
    struct dl_prom *prom; /* the /metrics server (prom.c); NULL: none */
    /* Resume (checkpoint.c) */
    char *resume_note;    /* {"resume_steps": [...]}: this site's offer, in its member value */
    int64_t resumed_step; /* the step the run resumed at (-1: none) */
};

/* connect.c */
gt_status_t dl_connect(gt_diloco_t *d);
/* The membership parameters of group gr (etcd endpoints into eps, GT_TOPO_MAX_ENDPOINTS
 * entries; prefix, run id, lease, TLS), without site or address: for a client that does not
 * register, or for the member dl_connect registers. */
gt_wan_member_params_t dl_member_params(gt_diloco_t *d, const struct dl_group *gr,
                                        const char **eps);

/* added.c: sites added mid-run (outer.site_slots, `geotrain sites add`). The sites that were in
 * the run's first sites.yaml (not vacant slots, not added): those a start waits for. */
uint32_t dl_first_sites(const gt_topo_config_t *c);
/* With outer.site_slots set: d->cfg becomes a copy with the slots (after the config is loaded,
 * before anything reads its sites). */
gt_status_t dl_open_slots(gt_diloco_t *d);
/* Before the config note and the mesh: the sites the run added so far, from etcd — vacant slots
 * taken, sites of our file that were added marked so; GT_ERR_CONFIG when our file disagrees. */
gt_status_t dl_added_at_start(gt_diloco_t *d);
/* Once a heartbeat from the view thread while a slot is vacant: sites added since, taken,
 * pinned in every group's mesh and acknowledged in etcd. */
void dl_added_poll(gt_diloco_t *d);
gt_status_t dl_start_thread(gt_diloco_t *d);
void dl_stop_thread(gt_diloco_t *d);
gt_status_t dl_refresh_view(gt_diloco_t *d, int force);
/* This site was removed from the run: every group's mesh closes its connections at once and
 * sends nothing more (takes the lock). */
void dl_leave(gt_diloco_t *d);
/* The views, meshes' counters and queued bytes of all of this rank's groups. */
const gt_wan_view_t *dl_view(const gt_diloco_t *d); /* group 0's (under `lock`) */
void dl_mesh_stats(const gt_diloco_t *d, gt_wan_mesh_stats_t *ms);
size_t dl_mesh_pending(const gt_diloco_t *d);
/* After a pause longer than the lease: waits for a fresh heartbeat; GT_ERR_PEER_LOST when the
 * lease is gone (the site was removed). */
gt_status_t dl_confirm_member(gt_diloco_t *d);
uint64_t dl_fence_ns(const gt_diloco_t *d);
gt_status_t dl_fence(gt_diloco_t *d, const char *what, uint64_t r, int away);
gt_status_t dl_await_sites(gt_diloco_t *d);
/* The live peers (site indices) of group i's view, not us. */
uint32_t dl_view_peers(gt_diloco_t *d, uint32_t i, uint32_t *peers, int *self_in_p);
void dl_disconnect(gt_diloco_t *d);
/* The worst status of the site's ranks (collective); st itself with one rank. */
gt_status_t dl_agree(gt_diloco_t *d, gt_status_t st);
gt_status_t dl_allreduce(gt_diloco_t *d, uint64_t *v, size_t n, gt_diloco_op_t op);

/* All fragments' engine counters, summed. */
void dl_outer_stats(const gt_diloco_t *d, gt_outer_stats_t *os);

/* outer_step.c; f is the fragment (0 with F = 1) */
gt_status_t dl_layout(gt_diloco_t *d);
/* The step at which fragment f submits round r: r·H + off_f. */
uint64_t dl_frag_offset(const gt_diloco_t *d, uint32_t f);
gt_status_t dl_submit(gt_diloco_t *d, uint32_t f, uint64_t r);
/* Waits until the encoder has posted the last submit; its status (an encode's error once). */
gt_status_t dl_encode_wait(gt_diloco_t *d);
/* Between a submit and its apply (the τ steps), once a step: when round r's result is whole,
 * its hash vote agrees and nothing else is in the way, takes it and gives its outer step to
 * the encoder thread (with several ranks or WAN groups: this rank's lanes, every engine's result
 * whole first). One fragment, no dump or injected corruption; else nothing. */
void dl_pre_apply(gt_diloco_t *d, uint64_t r);
/* Waits for the encoder and stops its thread (idempotent). */
void dl_encode_stop(gt_diloco_t *d);
gt_status_t dl_wait_result(gt_diloco_t *d, uint32_t f, uint64_t r);
/* Takes round r's result of engine e when every chunk is here (GT_ERR_AGAIN before): DiLoCo
 * holds its frames (dl_g_at reads them), sync-dp swaps its decoded vector into g[e]. Under
 * `lock`. */
gt_status_t dl_take_result(gt_diloco_t *d, uint32_t e, uint64_t r);
/* Lets go of the frames of the rounds engines e0 .. e1 - 1 hold. */
void dl_release_results(gt_diloco_t *d, uint32_t e0, uint32_t e1);
/* The result engine e holds, read at position pos of its slice (positions asked for in
 * increasing order, as a sweep does): the chunk around it decoded into gbuf; *avail floats
 * from the returned pointer on are that chunk's. NULL with *st set on an error. */
const float *dl_g_at(gt_diloco_t *d, uint32_t e, size_t pos, size_t *avail, gt_status_t *st);
/* The whole of the result engine e holds, decoded into out (its slice's length; run.dump). */
gt_status_t dl_g_vector(gt_diloco_t *d, uint32_t e, float *out);
/* A wait on the run outside dl_wait_result (a joiner's rebase) takes part in the eviction by
 * the majority: dl_watch_step at every turn of the wait (`waited`: ns so far; `suspects`: bit s,
 * the sites it waits on), dl_watch_end when it ends (withdraws its accusations). */
struct dl_watch {
    int probing;
    uint64_t next_accuse;
};
void dl_watch_step(gt_diloco_t *d, struct dl_watch *w, uint64_t waited, uint64_t suspects,
                   uint64_t r);
void dl_watch_end(gt_diloco_t *d);
/* The liveness watch: dl_live_tick (WAN thread, under d->lock) sends its probes; dl_live_watch
 * (training thread, between a submission and its apply) accuses a missing chunk's owner the
 * majority has not heard from for membership.evict_after_ms. */
void dl_live_tick(gt_diloco_t *d, uint64_t now);
void dl_live_watch(gt_diloco_t *d);
uint32_t dl_heard_first(gt_diloco_t *d, uint32_t *peers, uint32_t n);
gt_status_t dl_apply(gt_diloco_t *d, uint32_t f, uint64_t r, int final);
/* θ_s ← θ_a + (θ_s − snap) on our lanes of fragment f (all: f < 0), or θ_s ← θ_a (final),
 * then every rank's lanes of x all-gathered. Collective. */
gt_status_t dl_rebase_own(gt_diloco_t *d, int f, int final);
/* θ_a and m now hold `round` on every fragment, written outside a sweep (a join, a re-fetch, a
 * resume, the start): served from now on; prev, from before they were written, is dropped
 * (held aside first for a joiner that needs it). The hash of our lanes for the next submit. */
void dl_keep_state(gt_diloco_t *d, int64_t round);
uint64_t dl_own_hash(const gt_diloco_t *d);
void dl_own_to_packed(const gt_diloco_t *d, const float *full, float *packed);
void dl_packed_to_own(const gt_diloco_t *d, const float *packed, float *full);
/* Engine e's lanes of a full vector from its packed slice `src` (eng_off[e + 1] - eng_off[e]
 * floats). */
void dl_engine_to_full(const gt_diloco_t *d, uint32_t e, const float *src, float *full);
/* Engine e's lanes of θ_a from its packed slice `src`. */
void dl_engine_to_anchor(gt_diloco_t *d, uint32_t e, const float *src);
gt_status_t dl_sync_grads(gt_diloco_t *d, uint64_t step, float *grads, uint64_t tokens);

/* state.c */
/* A STATE message on group gr's mesh (the WAN thread, under `lock`). */
void dl_on_state(struct dl_group *gr, const gt_wan_msg_t *msg, const void *buf, size_t len);
/* probe.c: a PROBE, PROBE_INFO or START on group gr's mesh (the WAN thread, under `lock`). */
void dl_on_probe(struct dl_group *gr, const gt_wan_msg_t *msg, const void *buf, size_t len);
/* Under `lock`: a PROBE of `kind` and `id` to site `peer` over group i's mesh. */
gt_status_t dl_probe_send(gt_diloco_t *d, uint32_t i, uint32_t peer, uint32_t kind, uint64_t id);
/* Under `lock`: our START (n_params, hash of the initial vector) to `peer` over group i's mesh. */
gt_status_t dl_start_send(gt_diloco_t *d, uint32_t i, uint32_t peer, uint64_t hash);
/* Under `lock`: a malformed message from a peer, rejected: counted (bad_messages, reported with
 * the outer engines' count) and logged; it changes nothing. */
void dl_bad_message(gt_diloco_t *d, const gt_wan_msg_t *m, const char *why);
/* Over group i's mesh: (θ_a, m) of the group's lanes (fetch_state), or of fragment frag's
 * engine of the group only (fetch_frag; frag -1: the whole group's). */
gt_status_t dl_fetch_state(gt_diloco_t *d, uint32_t i, uint64_t round, const uint32_t *peers,
                           uint32_t n);
gt_status_t dl_fetch_frag(gt_diloco_t *d, uint32_t i, uint64_t round, int frag,
                          const uint32_t *peers, uint32_t n);
gt_status_t dl_start_check(gt_diloco_t *d);
/* The highest round a peer has submitted (a DELTA of it came here, or a RESULT chunk), plus one;
 * 0 when none has been seen. Over the engines, under d->lock (takes it). */
uint64_t dl_peers_next(gt_diloco_t *d);
gt_status_t dl_join(gt_diloco_t *d, uint64_t *start_p);
gt_status_t dl_join_rebase(gt_diloco_t *d);
/* Under `lock`, before prev is overwritten by a sweep that gives θ_a round r (or dropped by
 * dl_keep_state): when the round it holds is the one a joiner (a site whose first round is
 * that plus one) rebases onto, the buffer moves to d->hold instead of being lost; a hold older
 * than DL_HOLD_ROUNDS rounds before r is released. Streaming fragments: nothing held (their
 * joiners do not rebase). */
#define DL_HOLD_ROUNDS 3
void dl_hold_slot(gt_diloco_t *d, uint64_t r);
/* The same with every site's first round given (first[n_sites], UINT64_MAX: not taking part). */
void dl_hold_keep(gt_diloco_t *d, uint64_t r, const uint64_t *first);
/* A sweep of fragment f's θ_a and m to round r (outer_step.c) begins: what they hold moves to
 * prev, which the sweep fills lane by lane (returned: 2 n_sub floats, packed; NULL: no
 * memory), nothing of fragment f is served meanwhile. It ends with dl_sweep_end: prev holds
 * the round θ_a held, and θ_a round r, served from then on when `publish` (else dl_publish). */
float *dl_sweep_begin(gt_diloco_t *d, uint32_t f, uint64_t r);
void dl_sweep_end(gt_diloco_t *d, uint32_t f, uint64_t r, int publish);
/* Fragment f's θ_a and m (every fragment: f < 0) hold round r: served from now on. */
void dl_publish(gt_diloco_t *d, int f, int64_t r);
/* θ_a and m of fragment f (every fragment: f < 0) are about to be written outside a sweep (a
 * fetched state, a checkpoint, a fault): served to nobody until published again; prev, which
 * then no longer follows from them, is dropped too when `drop_prev`. */
void dl_unpublish(gt_diloco_t *d, int f, int drop_prev);
const float *dl_hold_lookup(const gt_diloco_t *d, int64_t want);
/* Re-fetches fragment f's lanes of the groups whose bit is set in `bad` (bit i: grp[i]). */
gt_status_t dl_refetch(gt_diloco_t *d, uint32_t f, uint64_t r, uint64_t bad);

/* agree.c: the canonical text of the keys every site must hold alike, and its digest, into
 * resume_note (before dl_connect, so it is in the member value from registration on); then a
 * comparison with every other registered site's: GT_ERR_CONFIG, each differing key named with
 * both values, after staying registered until the expected sites have read it. */
gt_status_t dl_note_config(gt_diloco_t *d);
gt_status_t dl_check_config(gt_diloco_t *d);
/* A run id whose run started (its "started" mark in etcd) but has no other site registered
 * before that mark is a finished or abandoned run's: GT_ERR_EXISTS, saying how to pick another
 * id or clear it; else GT_OK (join it). Collective over the site's ranks. */
gt_status_t dl_claim_run(gt_diloco_t *d);

/* checkpoint.c: the steps this site can resume at, into resume_note (before dl_connect); then,
 * once every site registered, the common step agreed and the outer state loaded. */
gt_status_t dl_resume_prepare(gt_diloco_t *d);
gt_status_t dl_resume(gt_diloco_t *d);
/* A file written crash-safe (gt_afile_t: temporary, fsync, rename, directory fsync; errors
 * logged): u32 magic, u32 version, u64 length of `head`, head, parts[0, n_parts) of lens[]
 * bytes, then the XXH3-128 of every byte before it. */
gt_status_t dl_write_sealed(const char *path, uint32_t magic, uint32_t version, const char *head,
                            const void *const *parts, const size_t *lens, size_t n_parts);

/* carry.c: a removed site's work since its last submit, kept for its next life. Save: at
 * close, when it leaves removed (GT_ERR_PEER_LOST). Take: once a joiner has the anchor after
 * round `from` in x, adds the kept work to x (scaled by 1/(1 + rounds between)) and its tokens
 * to the first contribution; collective over the site's ranks. Discard: a site that starts or
 * resumes the run deletes a carry left from an earlier start. */
gt_status_t dl_carry_save(gt_diloco_t *d);
gt_status_t dl_carry_take(gt_diloco_t *d, int64_t from);
void dl_carry_discard(gt_diloco_t *d);

/* prom.c: GET /metrics on this rank's metrics address (none: nothing starts); the training
 * thread's values are copied for it by dl_prom_update (rate-limited unless forced), called by
 * dl_write_status on every rank. Start after dl_connect, stop before dl_disconnect. */
gt_status_t dl_prom_start(gt_diloco_t *d);
void dl_prom_update(gt_diloco_t *d, int force);
void dl_prom_stop(gt_diloco_t *d);

/* files.c */
gt_status_t dl_open_files(gt_diloco_t *d, int append);
void dl_close_files(gt_diloco_t *d);
/* One line of anchors.jsonl; tokens >= 0: the tokens whose gradients round r's result carried
 * (goodput), < 0: not known here (a joiner's fetched anchor). */
void dl_log_anchor(gt_diloco_t *d, uint64_t r, uint64_t hash, double tokens);
void dl_log_void(gt_diloco_t *d);
/* One line of submits.jsonl: this site submitted round r's delta, weighted by `tokens`. */
void dl_log_submit(gt_diloco_t *d, uint64_t r, uint64_t tokens);
void dl_write_status(gt_diloco_t *d, int force);
/* outer_step.c: the XXH3 of the whole anchor, as one rank holding all of it would compute it
 * (anchors.jsonl); collective over the site's ranks. x ← θ_a on every rank (the run's end, a
 * join); collective. */
gt_status_t dl_anchor_hash(gt_diloco_t *d, uint64_t *hash_p);
gt_status_t dl_anchor_to_x(gt_diloco_t *d);
/* Every rank's lanes of x, all-gathered. Collective. */
gt_status_t dl_gather_x(gt_diloco_t *d);
/* faults.c: the injected faults' hooks. The time a slow site's step takes longer, and the time
 * a chaos window adds to it (both slept); whether to flip a bit of the anchor after `round`;
 * the kill point (at a step, after its applies). */
double dl_fault_slow(gt_diloco_t *d, double compute_s);
double dl_fault_windows(gt_diloco_t *d, double compute_s);
int dl_fault_corrupts(const gt_diloco_t *d, uint64_t round);
void dl_fault_kill_point(gt_diloco_t *d);
/* Under `lock`, on the WAN thread: the cuts file's new lines (GT_CHAOS_CUTS), every 100 ms. */
void dl_fault_cuts_poll(gt_diloco_t *d, uint64_t now_ns);
/* diloco.c: sleeps an emulated step time; the seconds that count as compute */
double dl_emu_sleep(gt_diloco_t *d, double s);
void dl_metrics_line(gt_diloco_t *d);
gt_status_t dl_summary_text(gt_diloco_t *d, gt_status_t result, int final, char **text_p);
gt_status_t dl_write_summary(gt_diloco_t *d, gt_status_t result);
const char *dl_state_name(gt_diloco_state_t s);

/* dump.c (run.dump: rounds): the check at create (one rank, one fragment; makes SITE/dump),
 * one full vector as SITE/dump/WHAT.rRRRRR.f32, one line of SITE/dump/rounds.jsonl. No-ops
 * unless the dump is on; a failed write is logged and turns it off. */
gt_status_t dl_dump_check(gt_diloco_t *d);
void dl_dump_vec(gt_diloco_t *d, const char *what, uint64_t r, const float *v);
/* Δ = θ_a − snap of the submit of round r, as delta.rRRRRR.f32 (computed as it is written). */
void dl_dump_delta(gt_diloco_t *d, uint64_t r);
void dl_dump_event(gt_diloco_t *d, const char *event, uint64_t r, double tokens);
/* Around dl_apply's outer step: x_pre, a_pre, g before it; a, m, x and the event after. */
void dl_dump_apply_pre(gt_diloco_t *d, uint64_t r);
void dl_dump_apply_post(gt_diloco_t *d, uint64_t r, double tokens);

#endif /* GT_DILOCO_INTERNAL_H */
