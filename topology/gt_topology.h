/* gt_topology.h — the run's configuration (sites.yaml) and the WAN layout (docs/design.md §4,
 * docs/config.md).
 *
 * gt_topo_load() reads sites.yaml, applies GT_* environment variables and then `key=value`
 * overrides from the command line (precedence: file < environment < flags), validates every
 * value against the schema and returns one resolved, immutable gt_topo_config_t. Every error
 * is printed as `FILE:LINE:COLUMN: key 'a.b': <what is wrong>; allowed: <what is allowed>`
 * (environment and flag errors use `env:GT_X:` and `flag:--set a.b=...:` in place of the
 * file position), every error in the file is reported, and nothing partial is returned.
 * Hostile files are bounded: at most GT_TOPO_FILE_MAX bytes and GT_TOPO_DEPTH_MAX levels, one
 * YAML document, no tags or aliases, values cut to 64 bytes in messages; the work done is
 * linear in the file's size.
 *
 * The layout cuts a flat parameter vector of N floats into L contiguous lanes, and each lane
 * into one chunk per live site; chunk ownership rotates so every site aggregates an equal
 * share. It is a pure function of (N, L, live sites, ranks, alignment).
 */
#ifndef GT_TOPOLOGY_H
#define GT_TOPOLOGY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gt_base.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GT_TOPO_NAME_MAX      64   /* site names, presets, run names (including the NUL) */
#define GT_TOPO_PATH_MAX      1024 /* file paths (including the NUL) */
#define GT_TOPO_ADDR_MAX      256  /* host:port (including the NUL) */
#define GT_TOPO_MAX_SITES     64
#define GT_TOPO_MAX_ENDPOINTS 16
#define GT_TOPO_MAX_CUTS      16
/* Bounds on a config file, so a hostile one costs little (the loader is linear in its size):
 * a sites.yaml of 64 sites and every one of their 2,016 links fits in a tenth of this. */
#define GT_TOPO_FILE_MAX      (1u << 20) /* bytes of YAML text */
#define GT_TOPO_DEPTH_MAX     32         /* nested mappings and lists (the schema needs 5) */

typedef enum { GT_DATA_TEXT = 0, GT_DATA_SHARDS = 1, GT_DATA_SYNTHETIC = 2 } gt_topo_data_kind_t;
typedef enum { GT_OUTER_DILOCO = 0, GT_OUTER_SYNC_DP = 1 } gt_topo_outer_mode_t;
typedef enum {
    GT_OUTER_NESTEROV = 0,
    GT_OUTER_AVERAGE = 1,
    GT_OUTER_SPARSELOCO = 2 /* theta_a -= lr * g, no momentum: a decaying error feedback instead */
} gt_topo_outer_opt_t;
typedef enum { GT_LATE_FOLD = 0, GT_LATE_DROP = 1 } gt_topo_late_t;
/* run.dump: what a site writes to SITE/dump/ for reference checks (docs/training.md). */
typedef enum { GT_DUMP_NONE = 0, GT_DUMP_DATA = 1, GT_DUMP_ROUNDS = 2 } gt_topo_dump_t;
typedef enum { GT_SPLIT_BANDWIDTH = 0, GT_SPLIT_EQUAL = 1 } gt_topo_chunk_split_t;
typedef enum { GT_TRANSPORT_UCX = 0, GT_TRANSPORT_LIBFABRIC = 1 } gt_topo_transport_t;
typedef enum { GT_SECURITY_ENCRYPTED = 0, GT_SECURITY_NONE = 1 } gt_topo_security_t;
typedef enum {
    GT_CIPHER_AUTO = 0,
    GT_CIPHER_AES256GCM = 1,
    GT_CIPHER_XCHACHA20POLY1305 = 2
} gt_topo_cipher_t;
typedef enum { GT_BACKEND_CPU = 0, GT_BACKEND_CUDA = 1 } gt_topo_backend_t;
typedef enum { GT_REDUCE_FP32 = 0, GT_REDUCE_BF16 = 1 } gt_topo_reduce_t;
typedef enum { GT_ZSTD_AUTO = 0, GT_ZSTD_ON = 1, GT_ZSTD_OFF = 2 } gt_topo_zstd_t;

typedef struct {
    char name[GT_TOPO_NAME_MAX];    /* run.name: label of the run directory */
    uint64_t seed;                  /* run.seed: all randomness derives from it */
    uint32_t rounds;                /* run.rounds: outer rounds to train */
    char run_dir[GT_TOPO_PATH_MAX]; /* run.run_dir: parent folder of run directories */
    uint32_t checkpoint_every;      /* run.checkpoint_every: rounds; 0 = only at the end */
    uint32_t log_every;             /* run.log_every: inner steps between metrics lines */
    int dump;                       /* run.dump: gt_topo_dump_t */
} gt_topo_run_t;

/* Model dimensions; 0 in a field means "take it from the preset". */
typedef struct {
    char preset[GT_TOPO_NAME_MAX]; /* model.preset: tiny | small | gpt2-124m */
    uint32_t vocab_size;           /* model.vocab_size (V) */
    uint32_t context_length;       /* model.context_length (maxT) */
    uint32_t n_layer;              /* model.n_layer (L) */
    uint32_t n_head;               /* model.n_head (NH) */
    uint32_t d_model;              /* model.d_model (C) */
    uint32_t batch_size;           /* model.batch_size (B, per rank) */
    uint32_t seq_len;              /* model.seq_len (T) */
} gt_topo_model_t;

typedef struct {
    gt_topo_data_kind_t kind;     /* data.kind: text | shards | synthetic */
    char path[GT_TOPO_PATH_MAX];  /* data.path: a text file, or a glob of llm.c shards */
    uint32_t synthetic_branching; /* data.synthetic_branching: successors per state */
    uint64_t synthetic_tokens;    /* data.synthetic_tokens: corpus length */
} gt_topo_data_t;

typedef struct {
    uint32_t steps;          /* inner.steps: H, inner steps per outer round */
    double lr;               /* inner.lr: peak AdamW learning rate */
    double min_lr_ratio;     /* inner.min_lr_ratio: cosine floor as a fraction of lr */
    uint32_t warmup_steps;   /* inner.warmup_steps */
    double weight_decay;     /* inner.weight_decay */
    double beta1, beta2;     /* inner.beta1, inner.beta2 */
    double eps;              /* inner.eps */
    double grad_clip;        /* inner.grad_clip: global norm; 0 = off */
    double emulated_step_ms; /* inner.emulated_step_ms: a step takes at least this long */
} gt_topo_inner_t;

typedef struct {
    gt_topo_outer_mode_t mode;         /* outer.mode: diloco | sync-dp */
    gt_topo_outer_opt_t optimizer;     /* outer.optimizer: nesterov | average */
    double lr;                         /* outer.lr: η */
    double momentum;                   /* outer.momentum: μ */
    uint32_t overlap_steps;            /* outer.overlap_steps: τ; 0 = synchronous DiLoCo */
    gt_topo_late_t late;               /* outer.late: fold | drop */
    double quorum;                     /* outer.quorum: fraction of live sites to close early */
    uint32_t deadline_min_ms;          /* outer.deadline_min_ms */
    uint32_t deadline_max_ms;          /* outer.deadline_max_ms */
    double deadline_mad_k;             /* outer.deadline_mad_k: deadline = median + k·MAD */
    double clip_k;                     /* outer.clip_k: clip norms to k × median; 0 = off */
    uint32_t fragments;                /* outer.fragments: streaming fragments (1 = whole) */
    gt_topo_chunk_split_t chunk_split; /* outer.chunk_split: bandwidth | equal */
    int catch_up;              /* outer.catch_up: end a round once a peer has submitted it */
    uint32_t carry_max_rounds; /* outer.carry_max_rounds: a removed site's work kept that long */
    uint32_t site_slots; /* outer.site_slots: sites the layout is cut for (0: the configured) */
} gt_topo_outer_t;

typedef struct {
    char name[GT_TOPO_NAME_MAX];        /* codec.name: fp32|bf16|int8|int4|fp4|topk */
    uint32_t block_size;                /* codec.block_size: elements per scale block */
    double topk_fraction;               /* codec.topk_fraction */
    char topk_values[GT_TOPO_NAME_MAX]; /* codec.topk_values: fp32|bf16|int8|int4|fp4 */
    int error_feedback;                 /* codec.error_feedback */
    gt_topo_zstd_t zstd;                /* codec.zstd: auto | on | off */
    int zstd_level;                     /* codec.zstd_level */
} gt_topo_codec_t;

/* One link's emulated behaviour. Values < 0 in a per-link override mean "inherit". */
typedef struct {
    double start_s;    /* seconds after the run starts */
    double duration_s; /* how long the link is cut */
} gt_topo_cut_t;

typedef struct {
    double latency_ms;     /* one-way */
    double jitter_ms;      /* uniform ± jitter added to each message */
    double bandwidth_mbps; /* megabits/s; 0 = unlimited */
    double loss;           /* probability in [0, 1), emulated as retransmission delay */
    uint32_t n_cuts;
    gt_topo_cut_t cuts[GT_TOPO_MAX_CUTS];
} gt_topo_link_params_t;

typedef struct {
    int enabled;                /* wan.emulation.enabled */
    gt_topo_link_params_t link; /* wan.emulation.{latency_ms,jitter_ms,bandwidth_mbps,loss} */
    uint64_t seed;              /* wan.emulation.seed */
} gt_topo_emulation_t;

typedef struct {
    gt_topo_transport_t transport;   /* wan.transport: ucx | libfabric */
    uint32_t lanes;                  /* wan.lanes: L */
    uint32_t connect_timeout_ms;     /* wan.connect_timeout_ms */
    uint32_t peer_timeout_ms;        /* wan.peer_timeout_ms: silence before a peer is lost */
    uint32_t preauth_timeout_ms;     /* wan.preauth_timeout_ms: handshake deadline, incoming */
    uint32_t preauth_max;            /* wan.preauth_max: incoming connections handshaking */
    uint32_t preauth_max_per_source; /* wan.preauth_max_per_source */
    uint32_t max_link_failures;      /* wan.max_link_failures: per peer per minute */
    int ucx_relay;                   /* wan.ucx_relay: UCX's TCP through the sealed relay */
    uint32_t data_port_min;          /* wan.data_port_min: libfabric's data ports (0: any) */
    uint32_t data_port_max;          /* wan.data_port_max */
    gt_topo_emulation_t emulation;   /* wan.emulation.* */
} gt_topo_wan_t;

typedef struct {
    uint32_t n_endpoints;                                    /* membership.endpoints */
    char endpoints[GT_TOPO_MAX_ENDPOINTS][GT_TOPO_ADDR_MAX]; /* http://host:port */
    uint32_t lease_ttl_s;                                    /* membership.lease_ttl_s */
    uint32_t heartbeat_ms;                                   /* membership.heartbeat_ms */
    uint32_t evict_after_ms;         /* membership.evict_after_ms (0: the lease TTL) */
    uint32_t stuck_after_s;          /* membership.stuck_after_s (0: never) */
    char prefix[GT_TOPO_NAME_MAX];   /* membership.prefix */
    char tls_ca[GT_TOPO_PATH_MAX];   /* membership.tls.ca: PEM ("": the system's CAs) */
    char tls_cert[GT_TOPO_PATH_MAX]; /* membership.tls.cert: client certificate ("": none) */
    char tls_key[GT_TOPO_PATH_MAX];  /* membership.tls.key: its private key */
    int plain_http;                  /* membership.plain_http: http:// endpoints accepted */
} gt_topo_membership_t;

typedef struct {
    gt_topo_security_t mode;        /* security.mode: encrypted | none */
    gt_topo_cipher_t cipher;        /* security.cipher */
    char key_dir[GT_TOPO_PATH_MAX]; /* security.key_dir: where NAME.key files live */
    char admin_key[64]; /* security.admin_key: base64 Ed25519 key that signs added sites */
} gt_topo_security_cfg_t;

typedef struct {
    uint32_t threads;             /* local.threads: compute threads per rank */
    uint32_t tensor_parallel;     /* local.tensor_parallel: t (same at every site) */
    gt_topo_reduce_t grad_reduce; /* local.grad_reduce: fp32 | bf16 (NCCL) */
    int overlap_grad_reduce;      /* local.overlap_grad_reduce */
} gt_topo_local_t;

typedef struct {
    char listen[GT_TOPO_ADDR_MAX]; /* metrics.listen: host:port ("" or port 0: none) */
} gt_topo_metrics_t;

/* `geotrain plan` (docs/plan.md): what a run needs; every field 0 = derive it as documented. */
typedef struct {
    uint64_t params;     /* plan.params: N; 0 = the model of model.* */
    double tokens;       /* plan.tokens: whole run, all sites; 0 = run.rounds x H x batch */
    double batch_tokens; /* plan.batch_tokens: tokens per inner step per site; 0 = B x T x ranks */
    double flops_per_token;    /* plan.flops_per_token: training FLOPs per token; 0 = 6 N */
    double accelerator_flops;  /* plan.accelerator_flops: peak FLOP/s of one accelerator */
    double mfu;                /* plan.mfu: model FLOPs utilization of the inner steps */
    uint32_t accelerators;     /* plan.accelerators: per site; 0 = the site's ranks */
    double tokens_per_s;       /* plan.tokens_per_s: per site, measured; 0 = from FLOP/s x MFU */
    double encode_gbps;        /* plan.encode_gbps: codec encode, GB/s of fp32 per encoder */
    double decode_gbps;        /* plan.decode_gbps: codec decode, GB/s of fp32 per encoder */
    double apply_gbps;         /* plan.apply_gbps: the rest of a round's local work, GB/s */
    uint32_t encoders;         /* plan.encoders: parallel encoders per site; 0 = min(ranks, L) */
    double hop_ms;             /* plan.hop_ms: delay each WAN message adds beside its link */
    double target_utilization; /* plan.target_utilization: what the recommendation aims for */
} gt_topo_plan_t;

typedef struct {
    char name[GT_TOPO_NAME_MAX];       /* sites[].name: unique */
    char address[GT_TOPO_ADDR_MAX];    /* sites[].address: host:port of rank 0's listener */
    uint32_t ranks;                    /* sites[].ranks */
    gt_topo_backend_t backend;         /* sites[].backend: cpu | cuda */
    int has_public_key;                /* sites[].public_key given */
    uint8_t public_key[32];            /* sites[].public_key: base64 X25519 key */
    char secret_key[GT_TOPO_PATH_MAX]; /* sites[].secret_key: default key_dir/NAME.key */
    uint32_t line;                     /* where the site entry starts in the file */
    double tokens_per_s;               /* sites[].tokens_per_s: plan input; 0 = plan.* */
    uint32_t accelerators;             /* sites[].accelerators: plan input; 0 = plan.* */
    char advertise[GT_TOPO_ADDR_MAX];  /* sites[].advertise: host:port peers dial ("": address) */
    char metrics[GT_TOPO_ADDR_MAX];    /* sites[].metrics: its /metrics ("": metrics.listen) */
    /* Sites added mid-run (outer.site_slots, `geotrain sites add`; docs/diloco.md#adding-a-site):
     * `vacant` marks a slot of gt_topo_open_slots that no site has taken yet (no name; read it
     * with gt_topo_site_vacant, as another thread may be taking it), `added` a site that was not
     * in the run's first sites.yaml (taken at run time, or listed in a file that names it after
     * the add). Neither comes from a file: the loader leaves both 0. */
    int vacant;
    int added;
} gt_topo_site_t;

typedef struct {
    uint32_t a, b;                /* site indices; the link is symmetric */
    gt_topo_link_params_t params; /* fully resolved (inherits wan.emulation) */
} gt_topo_link_t;

typedef struct gt_topo_config {
    char source[GT_TOPO_PATH_MAX]; /* the file it was loaded from */
    gt_topo_run_t run;
    gt_topo_model_t model;
    gt_topo_data_t data;
    gt_topo_inner_t inner;
    gt_topo_outer_t outer;
    gt_topo_codec_t codec;
    gt_topo_wan_t wan;
    gt_topo_membership_t membership;
    gt_topo_security_cfg_t security;
    gt_topo_local_t local;
    gt_topo_metrics_t metrics;
    gt_topo_plan_t plan;
    uint32_t n_sites;
    gt_topo_site_t *sites; /* n_sites entries */
    uint32_t n_links;
    gt_topo_link_t *links; /* explicit overrides only; see gt_topo_link_params() */
} gt_topo_config_t;

typedef struct {
    const char *const *sets; /* "key=value" overrides (flags), applied last */
    size_t n_sets;
    int use_env; /* apply GT_<SECTION>_<KEY> environment variables */
    FILE *err;   /* where error messages go; NULL = stderr */
} gt_topo_load_params_t;

#define GT_TOPO_LOAD_PARAMS_INIT \
    {                            \
        NULL, 0, 1, NULL         \
    }

/* Loads, overrides and validates sites.yaml. On any error, prints every problem found to
 * params->err and returns GT_ERR_CONFIG (GT_ERR_NOT_FOUND/GT_ERR_IO when the file cannot be
 * read); *cfg_p is set only on success. Free with gt_topo_destroy(). */
GT_API gt_status_t gt_topo_load(const char *path, const gt_topo_load_params_t *params,
                                gt_topo_config_t **cfg_p) GT_MUST_USE;

/* Same, from a string in memory; `name` is used in messages in place of the file name. The
 * same bounds apply (len at most GT_TOPO_FILE_MAX). */
GT_API gt_status_t gt_topo_load_string(const char *text, size_t len, const char *name,
                                       const gt_topo_load_params_t *params,
                                       gt_topo_config_t **cfg_p) GT_MUST_USE;

/* Frees a configuration. Accepts NULL. */
GT_API void gt_topo_destroy(gt_topo_config_t *cfg);

/* ---- Sites added mid-run (outer.site_slots; docs/diloco.md#adding-a-site) ---- */

/* The sites the chunk layout is cut for: outer.site_slots, or the configured sites when that is
 * 0 or fewer. Every site of a run cuts its layout (and sizes its per-site tables) for this many. */
GT_API uint32_t gt_topo_site_slots(const gt_topo_config_t *cfg);
/* A copy of cfg with gt_topo_site_slots(cfg) sites: the configured ones, then vacant slots (no
 * name, no key, ranks 0) for sites added while the run goes on. Free with gt_topo_destroy. */
GT_API gt_status_t gt_topo_open_slots(const gt_topo_config_t *cfg,
                                      gt_topo_config_t **copy_p) GT_MUST_USE;
/* Whether site slot s is vacant (a slot of gt_topo_open_slots not taken yet). Safe beside
 * gt_topo_take_slot on another thread. */
GT_API int gt_topo_site_vacant(const gt_topo_site_t *s);
/* Gives vacant slot `index` to site `name` (`ranks` ranks, X25519 `public_key`, NULL: none) and
 * marks it added. Its fields are written before it stops being vacant, so a thread that finds
 * it by name (gt_topo_site_index) or sees it not vacant sees them whole. GT_ERR_INVALID when
 * the slot is not vacant or the name is empty, too long or already a site's. */
GT_API gt_status_t gt_topo_take_slot(gt_topo_config_t *cfg, uint32_t index, const char *name,
                                     uint32_t ranks, const uint8_t *public_key) GT_MUST_USE;

/* Prints the resolved configuration as YAML that gt_topo_load accepts back, every key with
 * where its value came from (file, env, flag or default) as a comment. */
GT_API gt_status_t gt_topo_print(const gt_topo_config_t *cfg, FILE *out);

/* Prints the reference of every config key: type, default, allowed values and meaning, as
 * Markdown (docs/config.md is generated from it). */
GT_API void gt_topo_print_reference(FILE *out);

/* Index of the site named `name`; GT_ERR_NOT_FOUND when there is none (vacant slots have no
 * name). */
GT_API gt_status_t gt_topo_site_index(const gt_topo_config_t *cfg, const char *name,
                                      uint32_t *index_p);

/* Splits "host:port" or "[v6]:port" (the brackets dropped) into host, NUL-terminated in at most
 * host_cap bytes, and port (0 to 65535, digits only, nothing after them). GT_ERR_INVALID when it
 * does not parse, GT_ERR_OVERFLOW when the host does not fit; the outputs only on success. Every
 * address a site reads — its own from sites.yaml, a peer's from etcd — is split by this. */
GT_API gt_status_t gt_topo_addr_split(const char *addr, char *host, size_t host_cap,
                                      uint16_t *port_p) GT_MUST_USE;

/* The host:port a site's peers dial: sites[].advertise, else sites[].address (rank 0's; rank k
 * adds k to the port, port 0 the port it listens on). */
GT_API const char *gt_topo_site_advertised(const gt_topo_site_t *site);

/* Where rank `rank` of site `site` serves GET /metrics, as host:port into buf: sites[].metrics
 * with the rank added to its port, else metrics.listen with site x R + rank added (R: the most
 * ranks of any site); "" when neither is set or the port is 0. GT_ERR_CONFIG past port 65535. */
GT_API gt_status_t gt_topo_metrics_address(const gt_topo_config_t *cfg, uint32_t site,
                                           uint32_t rank, char *buf, size_t len) GT_MUST_USE;

/* The emulated parameters of the link between sites a and b: the per-link override where
 * `links:` has one, else wan.emulation. */
GT_API void gt_topo_link_params(const gt_topo_config_t *cfg, uint32_t a, uint32_t b,
                                gt_topo_link_params_t *params_p);

/* ---- What every site of a run must hold alike (docs/diloco.md#what-sites-must-agree-on) ---- */

/* The values of every key that must be equal at every site of a run, as canonical text: one
 * "key=value\n" line per key, in schema order, values formatted as gt_topo_print writes them
 * ("codec.name=\"int8\"", "outer.lr=0.7"); the sites as "sites=a,b,c" (their order is their
 * ids), then "sites.NAME.ranks=..." and "sites.NAME.public_key=..." — sites added mid-run and
 * vacant slots left out (`geotrain sites add` checks an added site's own); each link whose resolved
 * emulation is not wan.emulation's as one line "links[A,B]=latency_ms: ..., cuts: ...". The
 * per-site keys (addresses, local paths, timeouts, local compute, plan inputs: marked in
 * `geotrain config reference`) are left out. Two configs give the same text exactly when they
 * agree. malloc'd: free() it. */
GT_API gt_status_t gt_topo_shared_text(const gt_topo_config_t *cfg, char **text_p) GT_MUST_USE;

/* One key that differs between two such texts; a NULL value: the key is missing from it. */
typedef void (*gt_topo_shared_diff_fn)(void *ctx, const char *key, const char *ours,
                                       const char *theirs);
/* Compares two texts of gt_topo_shared_text key by key: calls `each` (if not NULL) for every
 * key whose values differ, in `ours`'s order, then for the keys only `theirs` has; returns how
 * many keys differ (0: the configs agree). NULL texts count as empty. */
GT_API size_t gt_topo_shared_diff(const char *ours, const char *theirs, gt_topo_shared_diff_fn each,
                                  void *ctx);

/* ---- Lane and chunk layout (docs/design.md §4) ---- */

typedef struct {
    size_t offset;  /* first element, in the flat parameter vector */
    size_t count;   /* elements */
    uint32_t owner; /* index into the live-site list given to gt_topo_layout_create */
} gt_topo_chunk_t;

typedef struct {
    size_t offset;      /* first element */
    size_t count;       /* elements */
    uint32_t rank;      /* rank inside every site that carries this lane: lane mod ranks */
    size_t first_chunk; /* index of its first chunk in gt_topo_layout_t.chunks */
    uint32_t n_chunks;  /* one per live site (fewer if the lane is shorter than that) */
} gt_topo_lane_t;

typedef struct {
    size_t n_elems;   /* length of the flat parameter vector */
    uint32_t n_sites; /* live sites the chunks are owned by */
    uint32_t n_lanes;
    gt_topo_lane_t *lanes; /* n_lanes entries, in vector order */
    size_t n_chunks;
    gt_topo_chunk_t *chunks; /* lanes' chunks in vector order */
} gt_topo_layout_t;

typedef struct {
    size_t n_elems;   /* N: parameters in the flat vector (> 0) */
    uint32_t n_lanes; /* L (> 0): any L for any N (lanes may be short, or empty if N < L) */
    uint32_t n_sites; /* S: live sites (> 0) */
    uint32_t ranks;   /* R: ranks per site (> 0) */
    size_t align;     /* lane and chunk boundaries are multiples of this (>= 1); when N has
                         fewer such units than L, of the largest unit N / L that fills every
                         lane (1 if N < L) */
    /* Each site's share of the aggregation (n_sites entries, >= 0, not all 0; e.g. from
     * gt_topo_chunk_shares), or NULL: equal shares. Read by create only. */
    const double *shares;
} gt_topo_layout_params_t;

#define GT_TOPO_LAYOUT_PARAMS_INIT \
    {                              \
        0, 1, 1, 1, 1, NULL        \
    }

/* Cuts the vector: lanes are as equal as the alignment allows and cover [0, N) exactly once;
 * lane l's chunk j is owned by live site (l + j) mod S, so over all lanes every site owns the
 * same number of chunks (within one). With equal (or no) shares the chunks of a lane are equal
 * within one alignment unit; otherwise chunk j gets one unit and the rest of the lane in
 * proportion to its owner's share (integer arithmetic on shares quantized to 2^-20, so every
 * site cuts the same). Deterministic: the same params give the same layout. */
GT_API gt_status_t gt_topo_layout_create(const gt_topo_layout_params_t *params,
                                         gt_topo_layout_t **layout_p) GT_MUST_USE;
GT_API void gt_topo_layout_destroy(gt_topo_layout_t *layout);
/* Each site's share of the aggregation for outer.chunk_split (shares_p: cfg->n_sites entries,
 * summing to 1). `equal`, outer.site_slots set, fewer than 3 sites, or no finite link bandwidth:
 * 1/S each. Else `bandwidth`: a site's capacity c_s is the sum of its links' bandwidth_mbps (links:
 * or wan.emulation; an unlimited link counts as 10x the fastest finite one); a round moves 1 + (S -
 * 2) f_s vectors through site s each way when it owns a share f_s, so the shares that make the
 * busiest site finish first solve 1 + (S - 2) f_s = t c_s (water-filling: a site too thin for any
 * share owns none). Returns GT_ERR_INVALID on NULL arguments. */
GT_API gt_status_t gt_topo_chunk_shares(const gt_topo_config_t *cfg, double *shares_p) GT_MUST_USE;
/* Rank k's share of a layout: the lanes whose rank is k, packed one after another into a
 * sub-vector (what rank k of every site exchanges over the WAN, DESIGN §3). Offsets are into
 * that sub-vector and n_elems is its length; lanes keep their chunks and chunk owners. With
 * one rank the share is the whole layout. Free with gt_topo_layout_destroy. */
GT_API gt_status_t gt_topo_layout_rank(const gt_topo_layout_t *full, uint32_t rank,
                                       gt_topo_layout_t **sub_p) GT_MUST_USE;

/* The run's WAN groups G (docs/diloco.md#lanes-across-ranks): the least common multiple of
 * every site's ranks, so every site's R divides it (G = R when all sites have R ranks). Group
 * g carries the lanes {l : l mod G = g} and has one mesh, one set of membership keys and one
 * outer engine per fragment at every site; rank k of a site of R ranks runs the groups
 * {g : g mod R = k} (G / R of them) — its lanes are still {l : l mod R = k}. 1 for a config
 * without sites; 0 when the multiple exceeds GT_TOPO_MAX_GROUPS (the loader refuses that). */
#define GT_TOPO_MAX_GROUPS 64
GT_API uint32_t gt_topo_wan_groups(const gt_topo_config_t *cfg);

/* Streaming DiLoCo (outer.fragments = F, docs/diloco.md#streaming-fragments). A layout cut for
 * G x F "ranks" (G = gt_topo_wan_groups) gives lane l the "rank" l mod (G x F): its WAN group
 * is that mod G, its fragment that div G, i.e. fragment (l div G) mod F — fragments interleave
 * across the vector (and so across the model's layers) in groups of one lane per WAN group. */
GT_API uint32_t gt_topo_lane_fragment(uint32_t lane, uint32_t groups, uint32_t fragments);
/* The inner step (within a round of H) at which fragment f syncs: fragment f submits its round
 * r at step r x H + offset and applies it overlap_steps later; offset = H - (F - 1 - f) x H/F,
 * so fragment F - 1 syncs at the round's end as one fragment would, and fragment f - 1 H/F
 * steps before fragment f. H must be a multiple of F. */
GT_API uint64_t gt_topo_fragment_offset(uint64_t H, uint32_t fragments, uint32_t f);

#ifdef __cplusplus
}
#endif

#endif /* GT_TOPOLOGY_H */
