/* cmd_plan.c — `geotrain plan`: size a multi-datacenter run before buying the links.
 *
 * Reads an ordinary sites.yaml (its sites, links, model, codec and outer settings, plus the
 * optional `plan:` section and per-site `tokens_per_s`/`accelerators`), resolves every input
 * of the round model (plan_model.h) from a config value or a rate measured here, and runs the
 * model for each candidate (H, codec, τ): compute utilization per site, WAN bytes per round and
 * per link, the link rate that would hide a round's exchange, wall time, total WAN bytes, the
 * saving against synchronous data parallelism (simulated with the same model: a bf16 gradient
 * exchange through the same owners every step) and the binding limit. The binding limit is
 * found by re-running the model with one cause removed at a time (no bandwidth limit, no
 * latency, every site as fast as the fastest) and by the share of the loop the local round
 * work takes. `--calibrate RUN_DIR` turns a finished run into the measured inputs.
 * docs/plan.md describes the model and where every input comes from.
 */
#include "cli.h"
#include "gt_compress.h"
#include "gt_kernels.h"
#include "gt_local.h"
#include "gt_topology.h"
#include "gt_wan.h"
#include "plan_model.h"

#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Wire facts of geotrain's WAN layer (docs/wan.md, outer/wire.c, wan/channel/frame_internal.h):
 * each message is sent in sealed frames of at most FRAME_BYTES, each with an 80-byte header and a
 * 16-byte AEAD tag on the wire; a DELTA's payload is a 32-byte preamble and the codec frame, a
 * RESULT's a 56-byte preamble (outer/wire.c: DELTA_PRE, RESULT_PRE) and the codec frame;
 * summary.json counts payload bytes. test_plan_validate checks these against measured bytes. */
#define FRAME_BYTES     1048576.0
#define FRAME_HEADER    80.0
#define FRAME_TAG       16.0
#define DELTA_PREAMBLE  32.0
#define RESULT_PREAMBLE 56.0
/* The mesh (wan/mesh/mesh.c: reliability across connections) puts a 24-byte header in front of
 * every message's payload (HDR_BYTES) and acknowledges what it received with 32-byte ACK
 * messages (ACK_BYTES), cumulative and at most one in flight per peer, so there is at most one
 * per message; summary.json counts both. */
#define MESH_HEADER     24.0
#define MESH_ACK        32.0
/* diloco/state.c dl_start_check: before the first step every site sends each peer a START
 * message, its parameter count and initial hash (diloco_internal.h: START_BYTES). The liveness
 * watch's probe and its answer (diloco/probe.c: PROBE_BYTES, PROBE_INFO_HDR). */
#define START_HELLO     24.0
#define LIVE_PROBE      16.0
#define LIVE_ANSWER     24.0
/* The WAN emulator's token-bucket depth (wan/emu/emu_internal.h): max(64 KiB, 10 ms at the
 * rate). */
#define EMU_MIN_BURST   65536.0
#define EMU_BURST_S     0.010
#define MAX_CANDIDATES  512
#define MAX_MODEL_LANES 32      /* lanes the model keeps (bytes are unchanged; see the doc) */
#define SAMPLE_MAX      1048576 /* elements encoded to size a chunk's frame; larger scale */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: geotrain plan CONFIG [--set KEY=VALUE ...] [--json] [--h LIST]\n"
            "                     [--codecs LIST] [--overlap LIST] [--window N] [--replay DIR]\n"
            "       geotrain plan CONFIG --calibrate RUN_DIR [--json]\n\n"
            "Sizes a multi-site run on the WAN that CONFIG (an ordinary sites.yaml) describes:\n"
            "its sites, `links:` (bandwidth_mbps, latency_ms) or wan.emulation, the model, the\n"
            "codec, the outer settings and the optional `plan:` section (model size, total\n"
            "tokens, per-site accelerators and FLOP/s x MFU or measured tokens/s, codec rates;\n"
            "`geotrain config reference` lists the keys). For every candidate (H, codec,\n"
            "overlap tau) it simulates the run round by round with geotrain's own protocol\n"
            "(chunk owners, overlap, deadlines, stragglers; docs/plan.md) and prints compute\n"
            "utilization per site, WAN bytes per round and per link, the link rate that would\n"
            "hide a round's exchange, wall time, total WAN bytes, the saving against sync-dp\n"
            "and the binding limit; then the recommended candidate and why: the smallest H,\n"
            "then the most precise codec, then the smallest tau that reaches\n"
            "plan.target_utilization (else the best utilization).\n\n"
            "Options:\n"
            "  --set KEY=VALUE   override a config key (repeatable), e.g. --set plan.tokens=1e12\n"
            "  --h LIST          candidate inner steps, e.g. 50,100,250 (default: inner.steps\n"
            "                    and 25,50,100,250,500,1000 up to the run's total steps)\n"
            "  --codecs LIST     candidate codecs among fp32,bf16,int8,int4,fp4,topk (default:\n"
            "                    codec.name and int8,int4,fp4)\n"
            "  --overlap LIST    candidate tau as fractions of H in [0, 1), e.g. 0,0.5 (default\n"
            "                    0,0.5; tau = floor(fraction x H))\n"
            "  --window N        rounds simulated before extrapolating (default 64)\n"
            "  --calibrate DIR   read a finished run (DIR/summary.json, DIR/config.yaml) and\n"
            "                    print the measured inputs as --set flags: each site's\n"
            "                    tokens_per_s, plan.apply_gbps and plan.hop_ms (the delay\n"
            "                    per message that makes the model's mean wait the run's)\n"
            "  --replay DIR      model the run in DIR as it ran: each site's compute time\n"
            "                    step by step from DIR/SITE/metrics.jsonl instead of a\n"
            "                    constant rate (checks the WAN model against a measured run\n"
            "                    on a machine whose speed varies; test_plan_validate)\n"
            "  --json            one JSON object instead of tables\n"
            "  -h, --help        this text\n");
}

/* ---- inputs ---- */

typedef struct {
    gt_cmp_params_t cp;
    char name[32];
    double enc_gbps, dec_gbps; /* per encoder, in bytes/s despite the name: GB/s x 1e9 */
    int precision;             /* lower = more precise (the recommendation's tie-break) */
    size_t cache_n[16];        /* frame sizes already computed, by chunk length (0 = free) */
    double cache_f[16];
    unsigned cache_next;
} codec_t;

typedef struct {
    gt_topo_config_t *cfg;
    uint32_t S, encoders;
    double P, batch_tokens, total_steps, tokens;
    double tokens_per_s[GT_PLAN_MAX_SITES], t_step[GT_PLAN_MAX_SITES];
    double apply_Bps; /* per encoder; 0 = free */
    gt_plan_link_t links[GT_PLAN_MAX_SITES][GT_PLAN_MAX_SITES];
    double link_mbps[GT_PLAN_MAX_SITES][GT_PLAN_MAX_SITES];
    gt_topo_layout_t *layout;
    uint64_t window;
    /* --replay / --calibrate: each site's measured compute seconds after trace_step[i] steps */
    double *trace_step[GT_PLAN_MAX_SITES], *trace_compute[GT_PLAN_MAX_SITES];
    size_t trace_n[GT_PLAN_MAX_SITES];
} inputs_t;

static void inputs_free(inputs_t *in)
{
    gt_topo_layout_destroy(in->layout);
    for (uint32_t s = 0; s < GT_PLAN_MAX_SITES; s++) {
        free(in->trace_step[s]);
        free(in->trace_compute[s]);
    }
    memset(in, 0, sizeof *in);
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A pseudo-gradient stand-in: N(0, 1e-3^2), as `bench codec`'s gaussian rows. */
static void fill_gauss(float *x, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        double u1 = ((double)(rng_next(&seed) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
        double u2 = (double)(rng_next(&seed) >> 11) * (1.0 / 9007199254740992.0);
        x[i] = (float)(1e-3 * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    }
}

static int codec_precision(gt_cmp_codec_t c)
{
    switch (c) {
    case GT_CMP_FP32: return 0;
    case GT_CMP_BF16: return 1;
    case GT_CMP_INT8: return 2;
    case GT_CMP_INT4: return 3;
    case GT_CMP_FP4: return 4;
    default: return 5;
    }
}

/* Frame bytes of a chunk of n elements: encoded for real up to SAMPLE_MAX elements (exact for
 * the dense codecs, whose size does not depend on the values), else the payload scaled from a
 * SAMPLE_MAX sample. Returns < 0 on error. */
static double frame_bytes(const gt_cmp_params_t *cp, size_t n)
{
    size_t k = n < SAMPLE_MAX ? n : SAMPLE_MAX; /* codec_frame_bytes asks for k == n */
    gt_cmp_ctx_t *ctx = NULL;
    double out = -1;
    float *x = malloc(k * sizeof *x), *res = calloc(k, sizeof *res);
    if (!x || !res || gt_cmp_create(cp, &ctx) != GT_OK) goto done;
    size_t cap = gt_cmp_bound(ctx, k), len = 0;
    void *f = malloc(cap);
    if (!f) goto done;
    fill_gauss(x, k, 42);
    if (gt_cmp_encode(ctx, x, k, cp->error_feedback ? res : NULL, f, cap, &len) == GT_OK)
        out = k == n ? (double)len
                     : GT_CMP_HEADER_SIZE + ((double)len - GT_CMP_HEADER_SIZE) * (double)n / k;
    free(f);
done:
    gt_cmp_destroy(ctx);
    free(x);
    free(res);
    return out;
}

/* frame_bytes, remembered: a layout has few distinct chunk lengths, and every candidate with
 * this codec asks for the same ones. A sample larger than the chunk is encoded once: lengths
 * past SAMPLE_MAX all scale the same SAMPLE_MAX-element frame. */
static double codec_frame_bytes(codec_t *c, size_t n)
{
    size_t key = n < SAMPLE_MAX ? n : SAMPLE_MAX;
    double f = -1;
    for (unsigned i = 0; i < 16 && f < 0; i++)
        if (c->cache_n[i] == key) f = c->cache_f[i];
    if (f < 0) {
        if ((f = frame_bytes(&c->cp, key)) < 0) return -1;
        c->cache_n[c->cache_next] = key;
        c->cache_f[c->cache_next] = f;
        c->cache_next = (c->cache_next + 1) % 16;
    }
    return key == n ? f : GT_CMP_HEADER_SIZE + (f - GT_CMP_HEADER_SIZE) * (double)n / key;
}

/* Encode and decode GB/s of one thread on this machine (the method of `bench codec`: the
 * median of 5 runs on 2^20 gaussian elements). */
static int measure_codec(codec_t *c)
{
    const size_t n = SAMPLE_MAX;
    gt_cmp_ctx_t *ctx = NULL;
    float *x = malloc(n * sizeof *x), *res = calloc(n, sizeof *res), *y = malloc(n * sizeof *y);
    void *f = NULL;
    int rc = -1;
    if (!x || !res || !y || gt_cmp_create(&c->cp, &ctx) != GT_OK) goto done;
    size_t cap = gt_cmp_bound(ctx, n), len = 0;
    if (!(f = malloc(cap))) goto done;
    fill_gauss(x, n, 7);
    double te[5], td[5];
    for (int r = 0; r < 5; r++) {
        memset(res, 0, n * sizeof *res);
        uint64_t t0 = gt_time_ns();
        if (gt_cmp_encode(ctx, x, n, c->cp.error_feedback ? res : NULL, f, cap, &len) != GT_OK)
            goto done;
        uint64_t t1 = gt_time_ns();
        if (gt_cmp_decode(ctx, f, len, y, n) != GT_OK) goto done;
        uint64_t t2 = gt_time_ns();
        te[r] = (double)(t1 - t0);
        td[r] = (double)(t2 - t1);
    }
    if (c->enc_gbps <= 0) c->enc_gbps = 4.0 * n / gt_cli_median(te, 5) * 1e9;
    if (c->dec_gbps <= 0) c->dec_gbps = 4.0 * n / gt_cli_median(td, 5) * 1e9;
    rc = 0;
done:
    gt_cmp_destroy(ctx);
    free(x);
    free(res);
    free(y);
    free(f);
    return rc;
}

static int codec_setup(const gt_topo_config_t *cfg, const char *name, codec_t *c)
{
    memset(c, 0, sizeof *c);
    gt_cmp_params_t p;
    if (gt_wan_codec_params(cfg, name, &p) != GT_OK) {
        fprintf(stderr,
                "geotrain plan: unknown codec '%s'; allowed: fp32, bf16, int8, int4, "
                "fp4, topk\n",
                name);
        return -1;
    }
    c->cp = p;
    snprintf(c->name, sizeof c->name, "%s", name);
    if (p.codec == GT_CMP_TOPK)
        snprintf(c->name, sizeof c->name, "topk:%s@%g", cfg->codec.topk_values,
                 cfg->codec.topk_fraction);
    c->precision = codec_precision(p.codec);
    c->enc_gbps = cfg->plan.encode_gbps * 1e9;
    c->dec_gbps = cfg->plan.decode_gbps * 1e9;
    if (c->enc_gbps <= 0 || c->dec_gbps <= 0) return measure_codec(c);
    return 0;
}

/* Everything but the candidates: model size, steps, rates, links, layout. The links are the
 * figures of `links:` and wan.emulation (what the WAN is planned to be), whether or not the
 * emulator is enabled; as_run (--calibrate, which models a run that happened): links only
 * when the run had the emulator on, else none (loopback). */
static int resolve(gt_topo_config_t *cfg, int as_run, inputs_t *in)
{
    memset(in, 0, sizeof *in);
    in->cfg = cfg;
    in->S = cfg->n_sites;
    if (in->S > GT_PLAN_MAX_SITES) {
        fprintf(stderr, "geotrain plan: %u sites; the model handles at most %d\n", in->S,
                GT_PLAN_MAX_SITES);
        return -1;
    }
    gt_gpt_params_t gp;
    int have_model = gt_local_model_resolve(cfg, &gp) == GT_OK;
    in->P = cfg->plan.params ? (double)cfg->plan.params
            : have_model     ? (double)gt_gpt_param_count(&gp.model)
                             : 0;
    if (in->P <= 0) {
        fprintf(stderr, "geotrain plan: no model size: set plan.params or model.*\n");
        return -1;
    }
    uint32_t ranks = cfg->sites[0].ranks, tp = cfg->local.tensor_parallel;
    if (cfg->plan.batch_tokens <= 0 && !have_model) {
        fprintf(stderr, "geotrain plan: no batch size: set plan.batch_tokens or model.*\n");
        return -1;
    }
    in->batch_tokens = cfg->plan.batch_tokens > 0 ? cfg->plan.batch_tokens
                                                  : (double)gp.B * gp.T * (ranks / (tp ? tp : 1));
    in->total_steps = cfg->plan.tokens > 0 ? ceil(cfg->plan.tokens / (in->batch_tokens * in->S))
                                           : (double)cfg->run.rounds * cfg->inner.steps;
    in->tokens = in->total_steps * in->batch_tokens * in->S;
    double fpt = cfg->plan.flops_per_token > 0 ? cfg->plan.flops_per_token : 6.0 * in->P;
    for (uint32_t s = 0; s < in->S; s++) {
        const gt_topo_site_t *site = &cfg->sites[s];
        double acc = site->accelerators       ? site->accelerators
                     : cfg->plan.accelerators ? cfg->plan.accelerators
                                              : site->ranks;
        double tps = site->tokens_per_s > 0 ? site->tokens_per_s : cfg->plan.tokens_per_s;
        if (tps <= 0 && cfg->plan.accelerator_flops > 0 && cfg->plan.mfu > 0)
            tps = acc * cfg->plan.accelerator_flops * cfg->plan.mfu / fpt;
        if (tps <= 0) {
            fprintf(stderr,
                    "geotrain plan: site %s has no compute rate; allowed: sites[].tokens_per_s or "
                    "plan.tokens_per_s (measured: a run's summary.json, `geotrain plan "
                    "--calibrate`), or plan.accelerator_flops with plan.mfu\n",
                    site->name);
            return -1;
        }
        in->tokens_per_s[s] = tps;
        in->t_step[s] = in->batch_tokens / tps;
    }
    uint32_t L = cfg->wan.lanes;
    in->encoders = cfg->plan.encoders ? cfg->plan.encoders : (ranks < L ? ranks : L);
    in->apply_Bps = cfg->plan.apply_gbps * 1e9;
    for (uint32_t a = 0; a < in->S; a++)
        for (uint32_t b = 0; b < in->S; b++) {
            gt_topo_link_params_t lp;
            gt_topo_link_params(cfg, a, b, &lp);
            if (as_run && !cfg->wan.emulation.enabled) lp.bandwidth_mbps = lp.latency_ms = 0;
            double rate = lp.bandwidth_mbps * 1e6 / 8.0;
            in->link_mbps[a][b] = lp.bandwidth_mbps;
            in->links[a][b].latency_s = lp.latency_ms * 1e-3;
            in->links[a][b].rate_Bps = rate;
            in->links[a][b].burst_bytes = rate > 0 ? fmax(EMU_MIN_BURST, rate * EMU_BURST_S) : 0;
        }
    gt_topo_layout_params_t lp = GT_TOPO_LAYOUT_PARAMS_INIT;
    lp.n_elems = (size_t)in->P;
    lp.n_lanes = L < MAX_MODEL_LANES ? L : MAX_MODEL_LANES;
    lp.n_sites = in->S;
    lp.ranks = 1;
    lp.align = cfg->codec.block_size;
    /* The chunk sizes the sites will use (outer.chunk_split: bandwidth gives a site a share of
     * the aggregation from its links' capacity, diloco/connect.c), from the same config. */
    double shares[GT_PLAN_MAX_SITES];
    if (gt_topo_chunk_shares(cfg, shares) == GT_OK) lp.shares = shares;
    if (gt_topo_layout_create(&lp, &in->layout) != GT_OK) {
        fprintf(stderr, "geotrain plan: cannot lay %.0f parameters out in %u lanes\n", in->P,
                lp.n_lanes);
        return -1;
    }
    in->window = 64;
    return 0;
}

/* The model of one candidate. chunks: n_chunks entries, filled here. */
static int build(const inputs_t *in, codec_t *c, uint64_t H, uint64_t tau, gt_plan_chunk_t *chunks,
                 gt_plan_model_t *m)
{
    const gt_topo_config_t *cfg = in->cfg;
    memset(m, 0, sizeof *m);
    m->n_sites = in->S;
    double E = in->encoders, bytes = 4.0 * in->P;
    for (uint32_t s = 0; s < in->S; s++) {
        gt_plan_site_t *ps = &m->sites[s];
        ps->t_step = in->t_step[s];
        ps->t_enc = bytes / (c->enc_gbps * E);
        ps->t_apply = in->apply_Bps > 0 ? bytes / (in->apply_Bps * E) : 0;
        ps->enc_Bps = c->enc_gbps * E;
        ps->dec_Bps = c->dec_gbps * E;
        ps->agg_Bps = in->apply_Bps * E;
        ps->trace_step = in->trace_step[s];
        ps->trace_compute = in->trace_compute[s];
        ps->trace_n = in->trace_n[s];
    }
    memcpy(m->links, in->links, sizeof m->links);
    /* Frame sizes, computed once per distinct chunk length. */
    size_t last_n = 0;
    double last_f = 0;
    for (size_t i = 0; i < in->layout->n_chunks; i++) {
        size_t n = in->layout->chunks[i].count;
        if (n != last_n) {
            last_f = codec_frame_bytes(c, n);
            last_n = n;
            if (last_f < 0) return -1;
        }
        chunks[i] =
            (gt_plan_chunk_t){n, in->layout->chunks[i].owner, MESH_HEADER + DELTA_PREAMBLE + last_f,
                              MESH_HEADER + RESULT_PREAMBLE + last_f};
    }
    m->n_chunks = in->layout->n_chunks;
    m->chunks = chunks;
    m->H = H;
    m->tau = tau;
    m->rounds = (uint64_t)ceil(in->total_steps / (double)H); /* at least the token budget */
    m->quorum = cfg->outer.quorum;
    m->deadline_min_s = cfg->outer.deadline_min_ms * 1e-3;
    m->deadline_max_s = cfg->outer.deadline_max_ms * 1e-3;
    m->deadline_mad_k = cfg->outer.deadline_mad_k;
    m->late_fold = cfg->outer.late == GT_LATE_FOLD;
    m->catch_up = cfg->outer.catch_up;
    m->hop_s = cfg->plan.hop_ms * 1e-3;
    m->frame_bytes = FRAME_BYTES;
    m->frame_overhead =
        FRAME_HEADER + (cfg->security.mode == GT_SECURITY_ENCRYPTED ? FRAME_TAG : 0);
    m->hello_bytes = MESH_HEADER + START_HELLO;
    m->ack_bytes = MESH_ACK;
    /* the liveness watch (diloco/outer_step.c): DiLoCo with three sites or more; a PROBE and
     * its PROBE_INFO, both without a body */
    m->live_period_s = H > 1 && in->S >= 3 ? cfg->membership.heartbeat_ms * 1e-3 : 0;
    m->live_probe_bytes = MESH_HEADER + LIVE_PROBE;
    m->live_answer_bytes = MESH_HEADER + LIVE_ANSWER;
    m->window = in->trace_n[0] ? 0 : in->window; /* a replay is simulated whole */
    return 0;
}

/* ---- candidates ---- */

typedef struct {
    uint64_t H, tau;
    codec_t *codec;
    gt_plan_result_t r;
    double hide_gbps; /* link rate that fits a round's bytes in the overlap */
    double share_local, gain_bw, gain_lat, gain_strag;
    int gains; /* the gain_* were computed (only below the target: else the limit is compute) */
    const char *limit;
    double total_compute_s;
    int is_config; /* the config's own (inner.steps, codec.name, outer.overlap_steps) */
} cand_t;

/* Table order: H, then the codec's precision, then tau. */
static int cand_cmp(const void *x, const void *y)
{
    const cand_t *a = x, *b = y;
    if (a->H != b->H) return a->H < b->H ? -1 : 1;
    if (a->codec->precision != b->codec->precision)
        return a->codec->precision < b->codec->precision ? -1 : 1;
    return (a->tau > b->tau) - (a->tau < b->tau);
}

/* Appends (H, tau, codec) unless it is there already; returns the candidate or NULL. */
static cand_t *cand_add(cand_t *cands, size_t *n_p, uint64_t H, uint64_t tau, codec_t *c)
{
    for (size_t j = 0; j < *n_p; j++)
        if (cands[j].H == H && cands[j].tau == tau && cands[j].codec == c) return &cands[j];
    if (*n_p == MAX_CANDIDATES) return NULL;
    cand_t *x = &cands[(*n_p)++];
    x->H = H;
    x->tau = tau;
    x->codec = c;
    return x;
}

static int parse_list(const char *s, double *v, int max)
{
    int n = 0;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *end = NULL;
        double x = strtod(t, &end);
        if (end == t || *end || n == max) return -1;
        v[n++] = x;
    }
    return n;
}

static int evaluate(const inputs_t *in, cand_t *k, gt_plan_chunk_t *chunks, double target)
{
    gt_plan_model_t m;
    if (build(in, k->codec, k->H, k->tau, chunks, &m) != 0) return -1;
    if (gt_plan_simulate(&m, &k->r) != 0) return -1;
    double tmin = INFINITY;
    for (uint32_t s = 0; s < in->S; s++) tmin = fmin(tmin, in->t_step[s]);
    double window = (double)(k->tau ? k->tau : k->H) * tmin;
    k->hide_gbps = k->r.max_link_round_bytes * 8.0 / window / 1e9;
    double local = 0, train = 0, comp = 0;
    for (uint32_t s = 0; s < in->S; s++) {
        local += k->r.sites[s].local_s;
        train += k->r.sites[s].train_s;
        comp += k->r.sites[s].compute_s;
    }
    k->total_compute_s = comp;
    k->share_local = train > 0 ? local / train : 0;
    k->gains = 0;
    if (k->r.utilization_mean >= target) {
        k->limit = "compute";
        return 0;
    }
    /* Below the target: which cause, removed alone, gives back the most utilization. */
    gt_plan_result_t v;
    gt_plan_model_t x = m;
    for (uint32_t a = 0; a < in->S; a++)
        for (uint32_t b = 0; b < in->S; b++) x.links[a][b].rate_Bps = 0;
    if (gt_plan_simulate(&x, &v) != 0) return -1;
    k->gain_bw = v.utilization_mean - k->r.utilization_mean;
    x = m;
    x.hop_s = 0;
    for (uint32_t a = 0; a < in->S; a++)
        for (uint32_t b = 0; b < in->S; b++) x.links[a][b].latency_s = 0;
    if (gt_plan_simulate(&x, &v) != 0) return -1;
    k->gain_lat = v.utilization_mean - k->r.utilization_mean;
    k->gain_strag = 0;
    x = m;
    int uneven = 0;
    for (uint32_t s = 0; s < in->S; s++) {
        uneven |= x.sites[s].t_step != tmin || x.sites[s].trace_n;
        x.sites[s].t_step = tmin;
        x.sites[s].trace_n = 0;
    }
    if (uneven) {
        if (gt_plan_simulate(&x, &v) != 0) return -1;
        k->gain_strag = v.utilization_mean - k->r.utilization_mean;
    }
    k->gains = 1;
    {
        k->limit = "local work (encode/apply)";
        double best = k->share_local;
        if (k->gain_bw > best) best = k->gain_bw, k->limit = "WAN bandwidth";
        if (k->gain_lat > best) best = k->gain_lat, k->limit = "WAN latency";
        if (k->gain_strag > best) k->limit = "straggler";
    }
    return 0;
}

/* Smallest H, then the most precise codec, then the smallest tau, among those that reach the
 * target; else the best utilization. */
static int better(const cand_t *a, const cand_t *b, double target)
{
    int ra = a->r.utilization_mean >= target, rb = b->r.utilization_mean >= target;
    if (ra != rb) return ra;
    if (!ra && fabs(a->r.utilization_mean - b->r.utilization_mean) > 1e-9)
        return a->r.utilization_mean > b->r.utilization_mean;
    if (a->H != b->H) return a->H < b->H;
    if (a->codec->precision != b->codec->precision)
        return a->codec->precision < b->codec->precision;
    return a->tau < b->tau;
}

static const char *human_time(double s, char *buf, size_t len)
{
    if (s < 0.1)
        snprintf(buf, len, "%.3g ms", s * 1e3);
    else if (s < 120)
        snprintf(buf, len, "%.1f s", s);
    else if (s < 7200)
        snprintf(buf, len, "%.1f min", s / 60);
    else if (s < 172800)
        snprintf(buf, len, "%.1f h", s / 3600);
    else
        snprintf(buf, len, "%.1f d", s / 86400);
    return buf;
}

static json_t *cand_json(const inputs_t *in, const cand_t *k, double dp_bytes)
{
    json_t *sites = json_object(), *links = json_array();
    for (uint32_t s = 0; s < in->S; s++) {
        const gt_plan_site_result_t *r = &k->r.sites[s];
        json_object_set_new(sites, in->cfg->sites[s].name,
                            json_pack("{s:f,s:f,s:f,s:f,s:f,s:f}", "compute_utilization",
                                      r->utilization, "compute_s", r->compute_s, "local_s",
                                      r->local_s, "wait_s", r->wait_s, "train_s", r->train_s,
                                      "wan_bytes_sent", r->bytes_sent));
    }
    double rounds = ceil(in->total_steps / (double)k->H);
    for (uint32_t a = 0; a < in->S; a++)
        for (uint32_t b = 0; b < in->S; b++)
            if (a != b && k->r.link_bytes[a][b] > 0)
                json_array_append_new(
                    links, json_pack("{s:s,s:s,s:f,s:f}", "from", in->cfg->sites[a].name, "to",
                                     in->cfg->sites[b].name, "bytes", k->r.link_bytes[a][b],
                                     "bytes_per_round", k->r.link_bytes[a][b] / rounds));
    json_t *o = json_pack("{s:I,s:I,s:s,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:s,s:o,s:o,s:f}", "H",
                          (json_int_t)k->H, "tau", (json_int_t)k->tau, "codec", k->codec->name,
                          "compute_utilization", k->r.utilization_mean, "compute_utilization_min",
                          k->r.utilization_min, "wall_s", k->r.wall_s, "wan_bytes",
                          k->r.bytes_total, "max_link_bytes_per_round", k->r.max_link_round_bytes,
                          "hide_link_gbps", k->hide_gbps, "saving_vs_sync_dp",
                          dp_bytes / k->r.bytes_total, "rounds", rounds, "binding_limit", k->limit,
                          "sites", sites, "links", links, "local_work_share", k->share_local);
    /* Computed below the target only (docs/plan.md, "binding limit"). */
    json_object_set_new(o, "utilization_gain_if_removed",
                        k->gains ? json_pack("{s:f,s:f,s:f}", "bandwidth", k->gain_bw, "latency",
                                             k->gain_lat, "straggler", k->gain_strag)
                                 : json_null());
    json_object_set_new(o, "rounds_simulated", json_integer((json_int_t)k->r.rounds_simulated));
    json_object_set_new(o, "config", json_boolean(k->is_config));
    json_object_set_new(
        o, "contributions",
        json_pack("{s:f,s:f}", "on_time", k->r.on_time, "late_in_window", k->r.late));
    json_object_set_new(o, "round_period_s", json_real(k->r.round_period_s));
    json_object_set_new(o, "wan_ack_bytes", json_real(k->r.ack_bytes_total));
    json_object_set_new(o, "wan_liveness_bytes_per_heartbeat",
                        json_real(k->r.live_bytes_per_period));
    return o;
}

/* ---- --calibrate ---- */

static double jnum(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* A finished run's measured compute: each site's tokens/s (summary.json) into the config, and
 * its compute time step by step (SITE/metrics.jsonl: compute_utilization x time, every
 * run.log_every steps, then summary.json's exact total) into in. Returns 0 or -1 (said why). */
static int load_run(const char *dir, json_t *sum, gt_topo_config_t *cfg, inputs_t *in)
{
    json_t *sites = json_object_get(sum, "sites");
    for (uint32_t s = 0; s < cfg->n_sites; s++) {
        json_t *x = json_object_get(sites, cfg->sites[s].name);
        double comp = jnum(x, "compute_s"), tok = jnum(x, "tokens"), steps = jnum(x, "steps");
        if (!(comp > 0) || !(tok > 0) || !(steps > 0)) {
            fprintf(stderr, "geotrain plan: %s/summary.json has no finished site %s\n", dir,
                    cfg->sites[s].name);
            return -1;
        }
        cfg->sites[s].tokens_per_s = tok / comp;
        if (!in) continue;
        char path[4200], line[1024];
        snprintf(path, sizeof path, "%s/%s/metrics.jsonl", dir, cfg->sites[s].name);
        FILE *f = fopen(path, "r");
        if (!f) {
            fprintf(stderr, "geotrain plan: cannot read %s\n", path);
            return -1;
        }
        size_t n = 0, cap = 0;
        double *st = NULL, *cp = NULL;
        int ok = 1;
        while (ok && fgets(line, sizeof line, f)) {
            json_t *o = json_loads(line, 0, NULL);
            double k = jnum(o, "step"), c = jnum(o, "compute_utilization") * jnum(o, "time");
            json_decref(o);
            if (!(k > 0 && k < steps && c >= 0) || (n && (k <= st[n - 1] || c < cp[n - 1])))
                continue; /* a resumed run's repeats, the last line (the summary has it) */
            if (n + 2 > cap) {
                cap = cap ? 2 * cap : 256;
                double *a = realloc(st, cap * sizeof *a),
                       *b = a ? realloc(cp, cap * sizeof *b) : NULL;
                if (a) st = a;
                if (b) cp = b;
                ok = a && b;
            }
            if (ok) st[n] = k, cp[n++] = c;
        }
        fclose(f);
        if (!ok) {
            free(st);
            free(cp);
            return -1;
        }
        if (!st) { /* no metric lines: the summary's total alone */
            st = malloc(sizeof *st);
            cp = malloc(sizeof *cp);
            if (!st || !cp) {
                free(st);
                free(cp);
                return -1;
            }
        }
        double last = n ? cp[n - 1] : 0;
        st[n] = steps;
        cp[n] = fmax(comp, last);
        n++;
        in->trace_step[s] = st;
        in->trace_compute[s] = cp;
        in->trace_n[s] = n;
    }
    return 0;
}

static int calibrate(const char *dir, int json, const char *const *sets, size_t n_sets)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    json_t *sum = json_load_file(path, 0, NULL);
    if (!sum) {
        fprintf(stderr, "geotrain plan: cannot read %s\n", path);
        return 2;
    }
    snprintf(path, sizeof path, "%s/config.yaml", dir);
    gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;
    lp.sets = sets;
    lp.n_sets = n_sets;
    gt_topo_config_t *cfg = NULL;
    if (gt_topo_load(path, &lp, &cfg) != GT_OK) {
        json_decref(sum);
        return 2;
    }
    int rc = 2;
    inputs_t in;
    memset(&in, 0, sizeof in);
    codec_t codec;
    gt_plan_chunk_t *chunks = NULL;
    json_t *sites = json_object_get(sum, "sites"), *out = json_object();
    double H = cfg->inner.steps, local_sum = 0, wait_meas = 0;
    uint32_t n = 0;
    /* The run's compute rates first (the model needs them to resolve), then its compute
     * step by step: the wait the hop must explain is what the replayed compute leaves. */
    if (load_run(dir, sum, cfg, NULL) != 0) goto out;
    double P = jnum(json_object_get(sites, cfg->sites[0].name), "params");
    if (P > 0) cfg->plan.params = (uint64_t)P;
    cfg->plan.apply_gbps = 0;
    cfg->plan.hop_ms = 0;
    if (resolve(cfg, 1, &in) != 0 || load_run(dir, sum, cfg, &in) != 0 ||
        codec_setup(cfg, cfg->codec.name, &codec) != 0)
        goto out;
    double t_enc = 4.0 * in.P / (codec.enc_gbps * in.encoders);
    for (uint32_t s = 0; s < cfg->n_sites; s++) {
        json_t *x = json_object_get(sites, cfg->sites[s].name);
        double rounds = jnum(x, "steps") / H;
        double other = jnum(x, "train_s") - jnum(x, "compute_s") - jnum(x, "wait_s");
        local_sum += other / rounds - t_enc;
        wait_meas += jnum(x, "wait_s");
        n++;
    }
    double local = local_sum / n; /* the round's local work besides encoding, seconds */
    double apply_gbps = local > 0 ? 4.0 * in.P / (local * in.encoders) / 1e9 : 0;
    in.apply_Bps = apply_gbps * 1e9;
    cfg->plan.apply_gbps = apply_gbps;
    wait_meas /= n;
    /* hop: the per-message delay that makes the model's mean wait equal the measured one
     * (bisection; the wait grows with it). */
    chunks = calloc(in.layout->n_chunks, sizeof *chunks);
    if (!chunks) goto out;
    double lo = 0, hi = 1.0, hop = 0;
    for (int it = 0; it < 40; it++) {
        hop = 0.5 * (lo + hi);
        gt_plan_model_t m;
        gt_plan_result_t r;
        if (build(&in, &codec, cfg->inner.steps, cfg->outer.overlap_steps, chunks, &m) != 0)
            goto out;
        m.hop_s = hop;
        if (gt_plan_simulate(&m, &r) != 0) goto out;
        double w = 0;
        for (uint32_t s = 0; s < in.S; s++) w += r.sites[s].wait_s / in.S;
        if (w > wait_meas)
            hi = hop;
        else
            lo = hop;
    }
    if (lo == 0) hop = 0;
    if (json) {
        json_t *tps = json_object();
        for (uint32_t s = 0; s < cfg->n_sites; s++)
            json_object_set_new(tps, cfg->sites[s].name, json_real(cfg->sites[s].tokens_per_s));
        json_object_set_new(out, "tokens_per_s", tps);
        json_object_set_new(out, "apply_gbps", json_real(apply_gbps));
        json_object_set_new(out, "hop_ms", json_real(hop * 1e3));
        json_object_set_new(out, "encode_gbps", json_real(codec.enc_gbps / 1e9));
        json_object_set_new(out, "measured_wait_s", json_real(wait_meas));
        char *txt = json_dumps(out, JSON_COMPACT);
        if (txt) puts(txt);
        free(txt);
    } else {
        for (uint32_t s = 0; s < cfg->n_sites; s++)
            printf("--set sites.%s.tokens_per_s=%.6g ", cfg->sites[s].name,
                   cfg->sites[s].tokens_per_s);
        printf("--set plan.apply_gbps=%.6g --set plan.hop_ms=%.6g\n", apply_gbps, hop * 1e3);
    }
    rc = 0;
out:
    free(chunks);
    inputs_free(&in);
    json_decref(out);
    json_decref(sum);
    gt_topo_destroy(cfg);
    return rc;
}

/* ---- the command ---- */

int gt_cmd_plan(int argc, char **argv)
{
    static const struct option opts[] = {{"set", required_argument, NULL, 's'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"h", required_argument, NULL, 'H'},
                                         {"codecs", required_argument, NULL, 'c'},
                                         {"overlap", required_argument, NULL, 'o'},
                                         {"window", required_argument, NULL, 'w'},
                                         {"calibrate", required_argument, NULL, 'k'},
                                         {"replay", required_argument, NULL, 'r'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *sets[256], *h_list = NULL, *codec_list = NULL, *ov_list = NULL, *calib = NULL,
                           *replay = NULL;
    size_t n_sets = 0;
    int json = 0, c;
    long window = 64;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            if (n_sets == 256) {
                fprintf(stderr, "geotrain plan: more than 256 --set flags\n");
                return 2;
            }
            sets[n_sets++] = optarg;
            break;
        case 'j': json = 1; break;
        case 'H': h_list = optarg; break;
        case 'c': codec_list = optarg; break;
        case 'o': ov_list = optarg; break;
        case 'w': {
            char *end = NULL;
            window = strtol(optarg, &end, 10);
            if (end == optarg || *end || window < 4) {
                fprintf(stderr, "geotrain plan: --window %s: allowed: an integer >= 4\n", optarg);
                return 2;
            }
            break;
        }
        case 'k': calib = optarg; break;
        case 'r': replay = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        usage(stderr);
        return 2;
    }
    gt_log_set_level(GT_LOG_WARN);
    if (calib) return calibrate(calib, json, sets, n_sets);
    gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;
    lp.sets = sets;
    lp.n_sets = n_sets;
    gt_topo_config_t *cfg = NULL;
    if (gt_topo_load(argv[optind], &lp, &cfg) != GT_OK) return 2;
    int rc = 2;
    inputs_t in;
    memset(&in, 0, sizeof in);
    codec_t codecs[8], dp_codec;
    int n_codecs = 0;
    cand_t *cands = NULL;
    gt_plan_chunk_t *chunks = NULL;
    json_t *out = NULL, *replay_sum = NULL;
    if (replay) {
        char path[4200];
        snprintf(path, sizeof path, "%s/summary.json", replay);
        if (!(replay_sum = json_load_file(path, 0, NULL))) {
            fprintf(stderr, "geotrain plan: cannot read %s\n", path);
            goto out;
        }
        if (load_run(replay, replay_sum, cfg, NULL) != 0) goto out;
    }
    if (resolve(cfg, 0, &in) != 0) goto out;
    if (replay && load_run(replay, replay_sum, cfg, &in) != 0) goto out;
    in.window = (uint64_t)window;
    /* Codec candidates. */
    {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", codec_list ? codec_list : "");
        if (!codec_list) {
            const char *dflt[] = {cfg->codec.name, "int8", "int4", "fp4"};
            for (int i = 0; i < 4; i++) {
                int dup = 0;
                for (int j = 0; j < i; j++) dup |= strcmp(dflt[i], dflt[j]) == 0;
                if (!dup && codec_setup(cfg, dflt[i], &codecs[n_codecs++]) != 0) goto out;
            }
        } else {
            for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && n_codecs < 8;
                 t = strtok_r(NULL, ",", &save))
                if (codec_setup(cfg, t, &codecs[n_codecs++]) != 0) goto out;
        }
        if (codec_setup(cfg, "bf16", &dp_codec) != 0) goto out;
        dp_codec.cp.error_feedback = 0; /* sync-dp sends plain bf16 gradients */
        dp_codec.cp.zstd = GT_CMP_ZSTD_OFF;
    }
    double hs[32], ovs[16];
    int n_h = 0, n_ov = parse_list(ov_list ? ov_list : "0,0.5", ovs, 16);
    if (h_list) {
        n_h = parse_list(h_list, hs, 32);
    } else {
        double dflt[] = {cfg->inner.steps, 25, 50, 100, 250, 500, 1000};
        for (int i = 0; i < 7; i++) {
            int dup = 0;
            for (int j = 0; j < n_h; j++) dup |= hs[j] == dflt[i];
            if (!dup && dflt[i] <= in.total_steps) hs[n_h++] = dflt[i];
        }
    }
    if (n_h <= 0 || n_ov <= 0) {
        fprintf(stderr, "geotrain plan: bad --h or --overlap list; allowed: up to 32 H and 16 "
                        "overlap values, comma-separated\n");
        goto out;
    }
    for (int i = 0; i < n_h; i++)
        if (!(hs[i] >= 1 && hs[i] == floor(hs[i]))) {
            fprintf(stderr, "geotrain plan: --h %g: allowed: whole numbers >= 1\n", hs[i]);
            goto out;
        }
    for (int i = 0; i < n_ov; i++)
        if (!(ovs[i] >= 0 && ovs[i] < 1)) {
            fprintf(stderr, "geotrain plan: --overlap %g: allowed: fractions in [0, 1)\n", ovs[i]);
            goto out;
        }
    chunks = calloc(in.layout->n_chunks, sizeof *chunks);
    cands = calloc(MAX_CANDIDATES, sizeof *cands);
    if (!chunks || !cands) goto out;
    size_t n_c = 0;
    double target = cfg->plan.target_utilization;
    for (int h = 0; h < n_h; h++) {
        if (!(hs[h] >= 1) || hs[h] > in.total_steps) continue;
        for (int k = 0; k < n_codecs; k++)
            for (int o = 0; o < n_ov; o++)
                cand_add(cands, &n_c, (uint64_t)hs[h], (uint64_t)floor(ovs[o] * hs[h]), &codecs[k]);
    }
    /* With the default lists, the config's own choice is always a candidate (codecs[0] is
     * codec.name then). */
    if (!h_list && !codec_list && !ov_list && cfg->outer.overlap_steps < cfg->inner.steps &&
        cfg->inner.steps <= in.total_steps) {
        cand_t *x = cand_add(cands, &n_c, cfg->inner.steps, cfg->outer.overlap_steps, &codecs[0]);
        if (x) x->is_config = 1;
    }
    qsort(cands, n_c, sizeof *cands, cand_cmp);
    for (size_t i = 0; i < n_c; i++) {
        if (evaluate(&in, &cands[i], chunks, target) != 0) {
            fprintf(stderr, "geotrain plan: the model failed for H=%llu, %s\n",
                    (unsigned long long)cands[i].H, cands[i].codec->name);
            goto out;
        }
    }
    if (n_c == 0) {
        fprintf(stderr, "geotrain plan: no candidate H fits the run's %.0f steps\n",
                in.total_steps);
        goto out;
    }
    /* sync-dp: every step a round of bf16 gradients through the same owners, applied at once. */
    cand_t dp = {0};
    dp.H = 1;
    dp.codec = &dp_codec;
    if (evaluate(&in, &dp, chunks, target) != 0) goto out;
    size_t best = 0;
    for (size_t i = 1; i < n_c; i++)
        if (better(&cands[i], &cands[best], target)) best = i;
    const cand_t *b = &cands[best];
    char why[512];
    if (b->r.utilization_mean >= target)
        snprintf(why, sizeof why,
                 "the smallest H (fewest local steps between synchronisations), then the most "
                 "precise codec and the least overlap, that keeps the sites %.0f%% busy "
                 "(plan.target_utilization)",
                 100 * target);
    else
        snprintf(why, sizeof why,
                 "no candidate reaches %.0f%% utilization; this one comes closest. Binding "
                 "limit: %s",
                 100 * target, b->limit);

    if (json) {
        out = json_object();
        json_t *inp = json_pack("{s:f,s:f,s:f,s:f,s:I,s:f,s:f,s:I,s:I}", "params", in.P, "tokens",
                                in.tokens, "batch_tokens_per_site", in.batch_tokens, "total_steps",
                                in.total_steps, "sites", (json_int_t)in.S, "apply_gbps",
                                in.apply_Bps / 1e9, "hop_ms", cfg->plan.hop_ms, "encoders",
                                (json_int_t)in.encoders, "window", (json_int_t)in.window);
        json_t *rates = json_object(), *tps = json_object();
        for (int k = 0; k < n_codecs; k++)
            json_object_set_new(rates, codecs[k].name,
                                json_pack("{s:f,s:f}", "encode_gbps", codecs[k].enc_gbps / 1e9,
                                          "decode_gbps", codecs[k].dec_gbps / 1e9));
        for (uint32_t s = 0; s < in.S; s++)
            json_object_set_new(tps, cfg->sites[s].name, json_real(in.tokens_per_s[s]));
        json_object_set_new(inp, "codec_rates", rates);
        json_object_set_new(inp, "tokens_per_s", tps);
        json_object_set_new(out, "inputs", inp);
        json_t *arr = json_array();
        for (size_t i = 0; i < n_c; i++)
            json_array_append_new(arr, cand_json(&in, &cands[i], dp.r.bytes_total));
        json_object_set_new(out, "candidates", arr);
        json_object_set_new(out, "sync_dp",
                            json_pack("{s:f,s:f,s:f,s:f,s:f}", "wan_bytes", dp.r.bytes_total,
                                      "wan_ack_bytes", dp.r.ack_bytes_total, "compute_utilization",
                                      dp.r.utilization_mean, "wall_s", dp.r.wall_s,
                                      "max_link_bytes_per_step", dp.r.max_link_round_bytes));
        json_t *rec = cand_json(&in, b, dp.r.bytes_total);
        json_object_set_new(rec, "why", json_string(why));
        json_object_set_new(out, "recommended", rec);
        char *txt = json_dumps(out, JSON_COMPACT);
        if (!txt) goto out;
        puts(txt);
        free(txt);
    } else {
        char t1[32], t2[32];
        printf("plan for %s: %u sites, %.3g parameters, %.3g tokens (%.0f steps of %.3g tokens "
               "per site)\n",
               argv[optind], in.S, in.P, in.tokens, in.total_steps, in.batch_tokens);
        for (uint32_t s = 0; s < in.S; s++)
            printf("  site %-12s %.4g tokens/s (%s per step)\n", cfg->sites[s].name,
                   in.tokens_per_s[s], human_time(in.t_step[s], t1, sizeof t1));
        for (int k = 0; k < n_codecs; k++)
            printf("  codec %-16s encode %.3g GB/s, decode %.3g GB/s per encoder (x%u)%s\n",
                   codecs[k].name, codecs[k].enc_gbps / 1e9, codecs[k].dec_gbps / 1e9, in.encoders,
                   cfg->plan.encode_gbps > 0 ? "" : " (measured here)");
        printf("\n%6s %6s %-16s %7s %7s %10s %11s %11s %10s %9s  %s\n", "H", "tau", "codec", "util",
               "min", "wall", "WAN bytes", "link/round", "hide Gb/s", "saving", "binding limit");
        for (size_t i = 0; i < n_c; i++) {
            const cand_t *k = &cands[i];
            printf("%6llu %6llu %-16s %6.1f%% %6.1f%% %10s %11.3g %11.3g %10.3g %8.0fx  %s%s%s\n",
                   (unsigned long long)k->H, (unsigned long long)k->tau, k->codec->name,
                   100 * k->r.utilization_mean, 100 * k->r.utilization_min,
                   human_time(k->r.wall_s, t1, sizeof t1), k->r.bytes_total,
                   k->r.max_link_round_bytes, k->hide_gbps, dp.r.bytes_total / k->r.bytes_total,
                   k->limit, i == best ? "  <- recommended" : "", k->is_config ? "  (config)" : "");
        }
        printf("\nsync-dp (bf16 gradients every step, same WAN): utilization %.1f%%, wall %s, "
               "WAN bytes %.3g (%.3g per step on the busiest link)\n",
               100 * dp.r.utilization_mean, human_time(dp.r.wall_s, t2, sizeof t2),
               dp.r.bytes_total, dp.r.max_link_round_bytes);
        printf("recommended: H=%llu, tau=%llu, %s: %.1f%% utilization, %.3g WAN bytes (%.0fx "
               "less than sync-dp), wall %s.\n  why: %s\n",
               (unsigned long long)b->H, (unsigned long long)b->tau, b->codec->name,
               100 * b->r.utilization_mean, b->r.bytes_total, dp.r.bytes_total / b->r.bytes_total,
               human_time(b->r.wall_s, t1, sizeof t1), why);
        printf("  per link, each way (bytes per round): ");
        double rounds = ceil(in.total_steps / (double)b->H);
        for (uint32_t x = 0; x < in.S; x++)
            for (uint32_t y = 0; y < in.S; y++)
                if (x != y && b->r.link_bytes[x][y] > 0)
                    printf("%s->%s %.3g  ", cfg->sites[x].name, cfg->sites[y].name,
                           b->r.link_bytes[x][y] / rounds);
        printf("\n");
    }
    rc = 0;
out:
    json_decref(out);
    free(cands);
    free(chunks);
    inputs_free(&in);
    json_decref(replay_sum);
    gt_topo_destroy(cfg);
    return rc;
}
