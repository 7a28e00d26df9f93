/* schema.c — every sites.yaml key: type, range, default and meaning (docs/config.md).
 *
 * The loader validates against these rows, gt_topo_print writes them back, and
 * `geotrain config reference` turns them into docs/config.md, so the documentation, the
 * defaults and the checks cannot drift apart.
 */
#include "topology_internal.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CFG(field) offsetof(gt_topo_config_t, field)
#define TXT(field) CFG(field), sizeof(((gt_topo_config_t *)0)->field)
#define NUM(field) CFG(field), 0
#define SEC(path, doc)                                          \
    {                                                           \
        path, GT_KEY_SECTION, 0, 0, 0, 0, 0, 0, NULL, NULL, doc \
    }
#define INF 1e300

/* clang-format off */
const gt_key_t gt_topo_keys[] = {
    SEC("run", "the run as a whole"),
    {"run.name", GT_KEY_NAME, TXT(run.name), 0, 0, 0, 0, NULL, "geotrain",
     "label of the run; run directories are RUN_DIR/NAME-<time>"},
    {"run.seed", GT_KEY_U64, NUM(run.seed), 0, 18446744073709551615.0, 0, 0, NULL, "1234",
     "seed from which all randomness derives (init, data order, emulated jitter)"},
    {"run.rounds", GT_KEY_U32, NUM(run.rounds), 1, 10000000, 0, 0, NULL, "30",
     "outer rounds to train; total inner steps = rounds x inner.steps"},
    {"run.run_dir", GT_KEY_PATH, TXT(run.run_dir), 0, 0, 0, 0, NULL, "runs",
     "folder under which each run writes its run directory"},
    {"run.checkpoint_every", GT_KEY_U32, NUM(run.checkpoint_every), 0, 10000000, 0, 0, NULL, "10",
     "write a checkpoint every this many rounds; 0 = only at the end"},
    {"run.log_every", GT_KEY_U32, NUM(run.log_every), 1, 1000000, 0, 0, NULL, "10",
     "inner steps between metrics lines"},
    {"run.dump", GT_KEY_ENUM, NUM(run.dump), 0, 0, 0, 0, "none|data|rounds", "none",
     "debugging and reference checks (one rank a site, fragments 1): data writes SITE/dump/ "
     "with meta.json, the initial parameters and every batch trained and evaluated; rounds adds "
     "every round's pseudo-gradient, result, anchor, momentum and parameters around the apply "
     "(float32 files, docs/training.md#dumps)"},

    SEC("model", "the GPT-2 model; 0 in a dimension means: take it from the preset"),
    {"model.preset", GT_KEY_WORD, TXT(model.preset), 0, 0, 0, 0, "tiny|small|gpt2-124m", "small",
     "model preset: tiny (tests), small (V=256, T=128, L=4, C=256, NH=4, B=16), gpt2-124m"},
    {"model.vocab_size", GT_KEY_U32, NUM(model.vocab_size), 0, 10000000, 0, 0, NULL, "0",
     "vocabulary size V (byte-level text needs 256)"},
    {"model.context_length", GT_KEY_U32, NUM(model.context_length), 0, 1048576, 0, 0, NULL, "0",
     "maximum context maxT (learned position embeddings)"},
    {"model.n_layer", GT_KEY_U32, NUM(model.n_layer), 0, 1024, 0, 0, NULL, "0",
     "transformer blocks L"},
    {"model.n_head", GT_KEY_U32, NUM(model.n_head), 0, 1024, 0, 0, NULL, "0",
     "attention heads NH (must divide d_model)"},
    {"model.d_model", GT_KEY_U32, NUM(model.d_model), 0, 65536, 0, 0, NULL, "0",
     "channels C"},
    {"model.batch_size", GT_KEY_U32, NUM(model.batch_size), 0, 65536, 0, 0, NULL, "0",
     "sequences per inner step per rank B"},
    {"model.seq_len", GT_KEY_U32, NUM(model.seq_len), 0, 1048576, 0, 0, NULL, "0",
     "tokens per sequence T (at most context_length)"},

    SEC("data", "the training data"),
    {"data.kind", GT_KEY_ENUM, NUM(data.kind), 0, 0, 0, 0, "text|shards|synthetic", "synthetic",
     "text: byte-level file; shards: llm.c token shards; synthetic: seeded Markov corpus"},
    {"data.path", GT_KEY_PATH, TXT(data.path), 0, 0, 0, 0, NULL, "\"\"",
     "text file (kind text) or glob of .bin shards (kind shards)"},
    {"data.synthetic_branching", GT_KEY_U32, NUM(data.synthetic_branching), 1, 65536, 0, 0, NULL,
     "4", "synthetic corpus: successors per token; entropy rate = ln(branching) nats/token"},
    {"data.synthetic_tokens", GT_KEY_U64, NUM(data.synthetic_tokens), 1024, 1099511627776.0, 0, 0,
     NULL, "1000000", "synthetic corpus length in tokens"},

    SEC("inner", "the inner optimizer (AdamW, every site, every step)"),
    {"inner.steps", GT_KEY_U32, NUM(inner.steps), 1, 1000000, 0, 0, NULL, "50",
     "H: inner steps per outer round"},
    {"inner.lr", GT_KEY_F64, NUM(inner.lr), 0, 1, 1, 0, NULL, "6e-4", "peak learning rate"},
    {"inner.min_lr_ratio", GT_KEY_F64, NUM(inner.min_lr_ratio), 0, 1, 0, 0, NULL, "0.1",
     "cosine decay floor as a fraction of lr"},
    {"inner.warmup_steps", GT_KEY_U32, NUM(inner.warmup_steps), 0, 10000000, 0, 0, NULL, "20",
     "linear warmup steps"},
    {"inner.weight_decay", GT_KEY_F64, NUM(inner.weight_decay), 0, 1, 0, 0, NULL, "0.1",
     "decoupled weight decay (not on biases and norm gains)"},
    {"inner.beta1", GT_KEY_F64, NUM(inner.beta1), 0, 1, 0, 1, NULL, "0.9", "AdamW beta1"},
    {"inner.beta2", GT_KEY_F64, NUM(inner.beta2), 0, 1, 0, 1, NULL, "0.95", "AdamW beta2"},
    {"inner.eps", GT_KEY_F64, NUM(inner.eps), 0, 1, 1, 1, NULL, "1e-8", "AdamW epsilon"},
    {"inner.grad_clip", GT_KEY_F64, NUM(inner.grad_clip), 0, 1e6, 0, 0, NULL, "1.0",
     "clip the global gradient norm to this; 0 = off"},
    {"inner.emulated_step_ms", GT_KEY_F64, NUM(inner.emulated_step_ms), 0, 600000, 0, 0, NULL,
     "0",
     "emulation (multi-site runs): every inner step takes at least this many ms, the rest slept, "
     "as on an accelerator that fast; sets the compute/WAN ratio whatever the machine; --slow "
     "multiplies it; 0 = off"},

    SEC("outer", "the outer optimizer and the cross-site round protocol"),
    {"outer.mode", GT_KEY_ENUM, NUM(outer.mode), 0, 0, 0, 0, "diloco|sync-dp", "diloco",
     "diloco: outer rounds every inner.steps; sync-dp: gradient all-reduce every step (baseline)"},
    {"outer.optimizer", GT_KEY_ENUM, NUM(outer.optimizer), 0, 0, 0, 0,
     "nesterov|average|sparseloco", "nesterov",
     "outer step: Nesterov momentum; plain averaging of the sites' parameters; or sparseloco: "
     "theta_a -= lr x g, no momentum, the error-feedback residual decayed by outer.momentum "
     "each round standing in for it (needs codec.error_feedback)"},
    {"outer.lr", GT_KEY_F64, NUM(outer.lr), 0, 10, 1, 0, NULL, "0.7", "outer learning rate eta"},
    {"outer.momentum", GT_KEY_F64, NUM(outer.momentum), 0, 1, 0, 1, NULL, "0.9",
     "outer Nesterov momentum mu (sparseloco: the error-feedback decay beta)"},
    {"outer.overlap_steps", GT_KEY_U32, NUM(outer.overlap_steps), 0, 1000000, 0, 0, NULL, "0",
     "tau: apply round r's result at step r*H + tau (0 = synchronous DiLoCo); < inner.steps"},
    {"outer.late", GT_KEY_ENUM, NUM(outer.late), 0, 0, 0, 0, "fold|drop", "fold",
     "a contribution after its round closed: fold into the next round (weight w/(1+staleness)) or drop"},
    {"outer.quorum", GT_KEY_F64, NUM(outer.quorum), 0, 1, 1, 0, NULL, "0.5",
     "fraction of live sites that must contribute before a deadline may close a round"},
    {"outer.deadline_min_ms", GT_KEY_U32, NUM(outer.deadline_min_ms), 0, 3600000, 0, 0, NULL,
     "1000", "lower bound of the adaptive straggler deadline"},
    {"outer.deadline_max_ms", GT_KEY_U32, NUM(outer.deadline_max_ms), 1, 3600000, 0, 0, NULL,
     "60000", "upper bound of the adaptive straggler deadline"},
    {"outer.deadline_mad_k", GT_KEY_F64, NUM(outer.deadline_mad_k), 0, 100, 0, 0, NULL, "4",
     "deadline = median arrival + k x MAD"},
    {"outer.clip_k", GT_KEY_F64, NUM(outer.clip_k), 0, 1000, 0, 0, NULL, "5",
     "robust aggregation: clip a contribution's norm to k x the median norm; 0 = off"},
    {"outer.fragments", GT_KEY_U32, NUM(outer.fragments), 1, 1024, 0, 0, NULL, "1",
     "streaming DiLoCo: F fragments (lanes l with (l div G) mod F = f, G = the run's WAN groups), "
     "each synced H/F steps after the previous; needs H mod F = 0, overlap_steps < H/F, "
     "F x G <= wan.lanes"},

    {"outer.catch_up", GT_KEY_BOOL, NUM(outer.catch_up), 0, 0, 0, 0, NULL, "false",
     "a site ends the round it trains as soon as a peer's contribution to that round (or a later "
     "one) has arrived: fewer inner steps, weighted by the tokens it trained, the skipped steps "
     "skipped (so a slower site keeps pace instead of falling rounds behind); needs "
     "outer.mode: diloco and fragments 1"},
    {"outer.carry_max_rounds", GT_KEY_U32, NUM(outer.carry_max_rounds), 0, 1000000, 0, 0, NULL,
     "4",
     "a site removed from the run (stopped past its lease, evicted, the minority of a partition) "
     "keeps what it trained since its last submit and, started again, adds it to the anchor it "
     "joins with, scaled by 1/(1+s), s the rounds between the two anchors, in its first "
     "contribution — when s is at most this (0: the work is dropped); diloco mode, fragments 1"},
    {"outer.site_slots", GT_KEY_U32, NUM(outer.site_slots), 0, GT_TOPO_MAX_SITES, 0, 0, NULL, "0",
     "sites the chunk layout is cut for, so that sites never in this file can be added while the "
     "run goes on (`geotrain sites add`): each takes a free slot; 0 = the configured sites (none "
     "can be added). A slot nobody holds has its chunks aggregated by the next site; with slots "
     "set the chunks are split equally (outer.chunk_split is not used)"},
    {"outer.chunk_split", GT_KEY_ENUM, NUM(outer.chunk_split), 0, 0, 0, 0, "bandwidth|equal",
     "bandwidth", "chunk ownership: each site aggregates a share that follows its link capacity "
     "(links:, wan.emulation; a thin site owns less), or equal shares"},

    SEC("codec", "how pseudo-gradients are compressed before they cross the WAN"),
    {"codec.name", GT_KEY_WORD, TXT(codec.name), 0, 0, 0, 0, "fp32|bf16|int8|int4|fp4|topk", "int8",
     "codec: fp32, bf16, block-scaled int8/int4/fp4 (e2m1), or topk"},
    {"codec.block_size", GT_KEY_U32, NUM(codec.block_size), 16, 4096, 0, 0, NULL, "128",
     "elements per scale block (a power of two)"},
    {"codec.topk_fraction", GT_KEY_F64, NUM(codec.topk_fraction), 0, 1, 1, 0, NULL, "0.01",
     "topk: fraction of elements kept"},
    {"codec.topk_values", GT_KEY_WORD, TXT(codec.topk_values), 0, 0, 0, 0,
     "fp32|bf16|int8|int4|fp4|int2", "int8",
     "topk: format of the kept values; int2: 2 bits a value, sign and one of two magnitudes "
     "fitted per block of kept values (SparseLoCo-style)"},
    {"codec.error_feedback", GT_KEY_BOOL, NUM(codec.error_feedback), 0, 0, 0, 0, NULL, "true",
     "carry each round's quantization error into the next"},
    {"codec.zstd", GT_KEY_ENUM, NUM(codec.zstd), 0, 0, 0, 0, "auto|on|off", "auto",
     "zstd stage after the codec: auto = where it pays"},
    {"codec.zstd_level", GT_KEY_INT, NUM(codec.zstd_level), 1, 19, 0, 0, NULL, "3",
     "zstd compression level"},

    SEC("wan", "the cross-site network layer"),
    {"wan.transport", GT_KEY_ENUM, NUM(wan.transport), 0, 0, 0, 0, "ucx|libfabric", "ucx",
     "transport backend: ucx (UCP) or libfabric (tcp provider)"},
    {"wan.lanes", GT_KEY_U32, NUM(wan.lanes), 1, 4096, 0, 0, NULL, "4",
     "L: the parameter vector is cut into this many lanes, spread over a site's ranks; at least "
     "the run's WAN groups G = lcm of the sites' ranks (group g: lanes l mod G = g)"},
    {"wan.connect_timeout_ms", GT_KEY_U32, NUM(wan.connect_timeout_ms), 100, 3600000, 0, 0, NULL,
     "10000", "give up connecting to a peer after this long"},
    {"wan.peer_timeout_ms", GT_KEY_U32, NUM(wan.peer_timeout_ms), 100, 3600000, 0, 0, NULL,
     "10000", "a silent peer is declared lost after this long"},
    {"wan.preauth_timeout_ms", GT_KEY_U32, NUM(wan.preauth_timeout_ms), 100, 600000, 0, 0, NULL,
     "2000", "an incoming connection must complete the handshake within this long"},
    {"wan.preauth_max", GT_KEY_U32, NUM(wan.preauth_max), 1, 65536, 0, 0, NULL, "64",
     "incoming connections handshaking at once; at the cap the listener stops accepting"},
    {"wan.preauth_max_per_source", GT_KEY_U32, NUM(wan.preauth_max_per_source), 1, 65536, 0, 0,
     NULL, "8", "of those, from one source address (more are closed at once)"},
    {"wan.max_link_failures", GT_KEY_U32, NUM(wan.max_link_failures), 1, 1000000, 0, 0, NULL, "10",
     "a peer whose frames or handshakes are rejected this often in a minute is cut off "
     "(resets and timeouts are re-dialled without limit)"},
    {"wan.ucx_relay", GT_KEY_BOOL, NUM(wan.ucx_relay), 0, 0, 0, 0, NULL, "true",
     "UCX's TCP data connections run through geotrain's sealed relay, so every byte is "
     "authenticated before UCX parses it (needs security: encrypted); false: UCX's own TCP "
     "framing on the wire, where one altered byte can abort a site"},
    {"wan.data_port_min", GT_KEY_U32, NUM(wan.data_port_min), 0, 65535, 0, 0, NULL, "0",
     "libfabric: the passive endpoint each incoming connection gets takes a port in "
     "[data_port_min, data_port_max] instead of an ephemeral one, so one firewall rule (or NAT "
     "port range) covers it; 0 = any free port"},
    {"wan.data_port_max", GT_KEY_U32, NUM(wan.data_port_max), 0, 65535, 0, 0, NULL, "0",
     "the range's last port (at least data_port_min; as many ports as connections may be "
     "accepted at once)"},
    SEC("wan.emulation", "WAN emulation inside geotrain (defaults for every link)"),
    {"wan.emulation.enabled", GT_KEY_BOOL, NUM(wan.emulation.enabled), 0, 0, 0, 0, NULL, "false",
     "delay, shape and cut messages as the link settings say"},
    {"wan.emulation.latency_ms", GT_KEY_F64, NUM(wan.emulation.link.latency_ms), 0, 60000, 0, 0,
     NULL, "0", "one-way latency"},
    {"wan.emulation.jitter_ms", GT_KEY_F64, NUM(wan.emulation.link.jitter_ms), 0, 60000, 0, 0,
     NULL, "0", "uniform jitter +- this much (at most latency_ms)"},
    {"wan.emulation.bandwidth_mbps", GT_KEY_F64, NUM(wan.emulation.link.bandwidth_mbps), 0, 1e7, 0,
     0, NULL, "0", "per site pair and direction, megabits/s; 0 = unlimited"},
    {"wan.emulation.loss", GT_KEY_F64, NUM(wan.emulation.link.loss), 0, 1, 0, 1, NULL, "0",
     "packet loss probability, emulated as retransmission delay"},
    {"wan.emulation.seed", GT_KEY_U64, NUM(wan.emulation.seed), 0, 18446744073709551615.0, 0, 0,
     NULL, "1", "seed of the emulator's jitter and loss"},

    SEC("membership", "the etcd cluster that holds the membership view"),
    {"membership.endpoints", GT_KEY_URLLIST, 0, 0, 0, 0, 0, 0, NULL, "[]",
     "etcd v3 gateway URLs (https://host:port with membership.tls; http:// only with "
     "membership.plain_http); empty: `geotrain launch` starts a local etcd (TLS)"},
    {"membership.lease_ttl_s", GT_KEY_U32, NUM(membership.lease_ttl_s), 1, 3600, 0, 0, NULL, "5",
     "a site whose lease is not renewed for this long is removed from the view"},
    {"membership.heartbeat_ms", GT_KEY_U32, NUM(membership.heartbeat_ms), 50, 600000, 0, 0, NULL,
     "1000", "lease keep-alive period (less than half the TTL)"},
    {"membership.evict_after_ms", GT_KEY_U32, NUM(membership.evict_after_ms), 0, 3600000, 0, 0,
     NULL, "0",
     "a site that renews its lease but that a majority of the view cannot reach is evicted once "
     "it has answered none of their liveness probes (one a heartbeat) for this long while they "
     "miss a result it owns (0: the lease TTL)"},
    {"membership.stuck_after_s", GT_KEY_U32, NUM(membership.stuck_after_s), 0, 86400, 0, 0, NULL,
     "300",
     "a site whose training thread has not come back into geotrain for this long since its last "
     "step (stuck in the trainer, a library, or out of memory) gives up its lease and its "
     "process exits with status 3, so the others see an ordinary site loss (0: never)"},
    {"membership.prefix", GT_KEY_STR, TXT(membership.prefix), 0, 0, 0, 0, NULL, "/geotrain",
     "etcd key prefix of this run's keys (starts with /)"},
    {"membership.plain_http", GT_KEY_BOOL, NUM(membership.plain_http), 0, 0, 0, 0, NULL, "false",
     "accept http:// endpoints: the membership travels in the clear and any host on the way "
     "can read and rewrite it (a trusted loopback or lab network only; docs/security.md)"},
    SEC("membership.tls", "TLS to the etcd members (https:// endpoints; docs/deploy.md)"),
    {"membership.tls.ca", GT_KEY_PATH, TXT(membership.tls_ca), 0, 0, 0, 0, NULL, "\"\"",
     "CA certificate (PEM) that signed the members' certificates; empty: the system's CAs"},
    {"membership.tls.cert", GT_KEY_PATH, TXT(membership.tls_cert), 0, 0, 0, 0, NULL, "\"\"",
     "this site's client certificate (PEM), for members started with --client-cert-auth; "
     "with membership.tls.key"},
    {"membership.tls.key", GT_KEY_PATH, TXT(membership.tls_key), 0, 0, 0, 0, NULL, "\"\"",
     "the client certificate's private key (PEM; keep it mode 0600)"},

    SEC("security", "the authenticated, encrypted WAN channel"),
    {"security.mode", GT_KEY_ENUM, NUM(security.mode), 0, 0, 0, 0, "encrypted|none", "encrypted",
     "encrypted (default) or none (explicit, prints a warning)"},
    {"security.cipher", GT_KEY_ENUM, NUM(security.cipher), 0, 0, 0, 0,
     "auto|aes256gcm|xchacha20poly1305", "auto",
     "AEAD: auto = AES-256-GCM where the CPU has it, else XChaCha20-Poly1305"},
    {"security.key_dir", GT_KEY_PATH, TXT(security.key_dir), 0, 0, 0, 0, NULL, "keys",
     "folder of the sites' secret keys (NAME.key, from `geotrain keygen`)"},
    {"security.admin_key", GT_KEY_STR, TXT(security.admin_key), 0, 0, 0, 0, NULL, "\"\"",
     "the operator's Ed25519 public key in base64 (`geotrain keygen --admin`): a site added "
     "mid-run (`geotrain sites add`) is admitted only with this key's signature over its "
     "description; required with outer.site_slots when encrypted"},

    SEC("local", "inside a site"),
    {"local.threads", GT_KEY_U32, NUM(local.threads), 1, 1024, 0, 0, NULL, "1",
     "compute threads per rank"},
    {"local.tensor_parallel", GT_KEY_U32, NUM(local.tensor_parallel), 1, 64, 0, 0, NULL, "1",
     "tensor-parallel degree t (the same at every site; divides every site's ranks)"},
    {"local.grad_reduce", GT_KEY_ENUM, NUM(local.grad_reduce), 0, 0, 0, 0, "fp32|bf16", "fp32",
     "precision of the data-parallel gradient all-reduce on GPU sites (NCCL); CPU: fp32"},
    {"local.overlap_grad_reduce", GT_KEY_BOOL, NUM(local.overlap_grad_reduce), 0, 0, 0, 0, NULL,
     "true", "CPU sites: all-reduce each block's gradients while backward goes on"},

    SEC("metrics", "what an operator scrapes: Prometheus' text format over HTTP (docs/deploy.md)"),
    {"metrics.listen", GT_KEY_ADDR, TXT(metrics.listen), 0, 0, 0, 0, NULL, "\"\"",
     "host:port of every site's GET /metrics where sites[].metrics is not set: site i (its "
     "place in sites) listens on port + i x R + k for its rank k, R the most ranks of any site, "
     "so the sites of one host never collide; port 0 or empty: no metrics"},

    SEC("plan", "inputs of `geotrain plan` only (docs/plan.md); 0 = derived as documented"),
    {"plan.params", GT_KEY_U64, NUM(plan.params), 0, 1e15, 0, 0, NULL, "0",
     "parameters N; 0 = the model of model.*"},
    {"plan.tokens", GT_KEY_F64, NUM(plan.tokens), 0, 1e18, 0, 0, NULL, "0",
     "training tokens of the whole run (all sites); 0 = run.rounds x inner.steps x batch x sites"},
    {"plan.batch_tokens", GT_KEY_F64, NUM(plan.batch_tokens), 0, 1e12, 0, 0, NULL, "0",
     "tokens per inner step at one site; 0 = model.batch_size x seq_len x replicas"},
    {"plan.flops_per_token", GT_KEY_F64, NUM(plan.flops_per_token), 0, 1e18, 0, 0, NULL, "0",
     "training FLOPs per token; 0 = 6 x N (forward 2N + backward 4N)"},
    {"plan.accelerator_flops", GT_KEY_F64, NUM(plan.accelerator_flops), 0, 1e18, 0, 0, NULL, "0",
     "peak FLOP/s of one accelerator (stated); used when tokens_per_s is 0"},
    {"plan.mfu", GT_KEY_F64, NUM(plan.mfu), 0, 1, 0, 0, NULL, "0",
     "model FLOPs utilization of the inner steps (stated); used with accelerator_flops"},
    {"plan.accelerators", GT_KEY_U32, NUM(plan.accelerators), 0, 100000000, 0, 0, NULL, "0",
     "accelerators per site; 0 = the site's ranks"},
    {"plan.tokens_per_s", GT_KEY_F64, NUM(plan.tokens_per_s), 0, 1e15, 0, 0, NULL, "0",
     "measured tokens/s of one site's inner steps; 0 = accelerators x FLOP/s x MFU / FLOPs per token"},
    {"plan.encode_gbps", GT_KEY_F64, NUM(plan.encode_gbps), 0, 1e6, 0, 0, NULL, "0",
     "codec encode rate per encoder, GB/s of fp32 (`bench codec`); 0 = measured when plan runs"},
    {"plan.decode_gbps", GT_KEY_F64, NUM(plan.decode_gbps), 0, 1e6, 0, 0, NULL, "0",
     "codec decode rate per encoder, GB/s of fp32; 0 = measured when plan runs"},
    {"plan.apply_gbps", GT_KEY_F64, NUM(plan.apply_gbps), 0, 1e6, 0, 0, NULL, "0",
     "a round's other local work (delta, outer step, rebase, hash) per encoder, GB/s of fp32; "
     "0 = free (`plan --calibrate` measures it)"},
    {"plan.encoders", GT_KEY_U32, NUM(plan.encoders), 0, 100000000, 0, 0, NULL, "0",
     "ranks of a site that encode and decode in parallel; 0 = min(ranks, wan.lanes)"},
    {"plan.hop_ms", GT_KEY_F64, NUM(plan.hop_ms), 0, 60000, 0, 0, NULL, "0",
     "delay a WAN message adds beside its link (scheduling, progress); `plan --calibrate` measures it"},
    {"plan.target_utilization", GT_KEY_F64, NUM(plan.target_utilization), 0, 1, 1, 0, NULL, "0.95",
     "compute utilization the recommended candidate must reach"},

    {"sites", GT_KEY_SITES, 0, 0, 0, 0, 0, 0, NULL, NULL,
     "the sites (at least one); see the per-site keys"},
    {"links", GT_KEY_LINKS, 0, 0, 0, 0, 0, 0, NULL, "[]",
     "per-link overrides of wan.emulation; see the per-link keys"},
    {NULL, GT_KEY_SECTION, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};

#define SITE(field) offsetof(gt_topo_site_t, field)
const gt_key_t gt_topo_site_keys[] = {
    {"name", GT_KEY_NAME, SITE(name), sizeof(((gt_topo_site_t *)0)->name), 0, 0, 0, 0, NULL, NULL,
     "unique site name (letters, digits, '_', '-', '.'; not starting with '.')"},
    {"address", GT_KEY_ADDR, SITE(address), sizeof(((gt_topo_site_t *)0)->address), 0, 0, 0, 0,
     NULL, NULL, "host:port where the site listens for WAN peers (port 0: any free port)"},
    {"advertise", GT_KEY_ADDR, SITE(advertise), sizeof(((gt_topo_site_t *)0)->advertise), 0, 0, 0,
     0, NULL, "\"\"",
     "host:port its peers dial, when that is not `address` (a 1:1 NAT, a container's published "
     "port); port 0: the port it listens on; rank k of the site adds k, as to the listener's; "
     "required when address binds a wildcard (0.0.0.0, [::]); empty: address"},
    {"metrics", GT_KEY_ADDR, SITE(metrics), sizeof(((gt_topo_site_t *)0)->metrics), 0, 0, 0, 0,
     NULL, "\"\"",
     "host:port where the site serves Prometheus metrics (GET /metrics); rank k adds k to the "
     "port; empty: metrics.listen"},
    {"ranks", GT_KEY_U32, SITE(ranks), 0, 1, 65536, 0, 0, NULL, "1",
     "processes (ranks) in the site; more than 1 runs under mpirun; sites may differ (rank k "
     "runs the WAN groups g mod ranks = k; lcm of all sites' ranks <= 64)"},
    {"backend", GT_KEY_ENUM, SITE(backend), 0, 0, 0, 0, 0, "cpu|cuda", "cpu",
     "compute backend of the site's ranks"},
    {"public_key", GT_KEY_B64KEY, SITE(public_key), 0, 0, 0, 0, 0, NULL, "\"\"",
     "the site's X25519 public key in base64 (`geotrain keygen`); required when encrypted"},
    {"secret_key", GT_KEY_PATH, SITE(secret_key), sizeof(((gt_topo_site_t *)0)->secret_key), 0, 0,
     0, 0, NULL, "\"\"", "path of the site's secret key; default security.key_dir/NAME.key"},
    {"tokens_per_s", GT_KEY_F64, SITE(tokens_per_s), 0, 0, 1e15, 0, 0, NULL, "0",
     "`geotrain plan`: this site's measured tokens/s; 0 = plan.tokens_per_s"},
    {"accelerators", GT_KEY_U32, SITE(accelerators), 0, 0, 100000000, 0, 0, NULL, "0",
     "`geotrain plan`: this site's accelerators; 0 = plan.accelerators"},
    {NULL, GT_KEY_SECTION, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};

#define LINK(field) offsetof(gt_topo_link_params_t, field)
const gt_key_t gt_topo_link_keys[] = {
    {"between", GT_KEY_PAIR, 0, 0, 0, 0, 0, 0, NULL, NULL, "the two site names, e.g. [us, eu]"},
    {"latency_ms", GT_KEY_F64, LINK(latency_ms), 0, 0, 60000, 0, 0, NULL, NULL,
     "one-way latency (default: wan.emulation.latency_ms)"},
    {"jitter_ms", GT_KEY_F64, LINK(jitter_ms), 0, 0, 60000, 0, 0, NULL, NULL,
     "jitter (default: wan.emulation.jitter_ms)"},
    {"bandwidth_mbps", GT_KEY_F64, LINK(bandwidth_mbps), 0, 0, 1e7, 0, 0, NULL, NULL,
     "megabits/s each way, 0 = unlimited (default: wan.emulation.bandwidth_mbps)"},
    {"loss", GT_KEY_F64, LINK(loss), 0, 0, 1, 0, 1, NULL, NULL,
     "loss probability (default: wan.emulation.loss)"},
    {"cuts", GT_KEY_CUTS, 0, 0, 0, 0, 0, 0, NULL, "[]",
     "time windows the link is cut: [{start_s: S, duration_s: D}, ...]"},
    {NULL, GT_KEY_SECTION, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL},
};
/* clang-format on */

size_t gt_topo_key_count(const gt_key_t *rows)
{
    size_t n = 0;
    while (rows[n].path) n++;
    return n;
}

static void fmt_num(double v, char *buf, size_t len)
{
    if (v >= 1e15)
        snprintf(buf, len, "%.4g", v);
    else if (v == floor(v))
        snprintf(buf, len, "%.0f", v);
    else
        snprintf(buf, len, "%g", v);
}

void gt_topo_key_allowed(const gt_key_t *k, char *buf, size_t len)
{
    char lo[32], hi[32];
    fmt_num(k->min, lo, sizeof lo);
    fmt_num(k->max, hi, sizeof hi);
    switch (k->type) {
    case GT_KEY_SECTION: snprintf(buf, len, "a mapping of keys"); break;
    case GT_KEY_STR: snprintf(buf, len, "a string"); break;
    case GT_KEY_NAME:
        snprintf(buf, len,
                 "a name of letters, digits, '_', '-' and '.', not starting with '.' (1-%zu "
                 "characters)",
                 k->size ? k->size - 1 : (size_t)63);
        break;
    case GT_KEY_PATH: snprintf(buf, len, "a path"); break;
    case GT_KEY_ADDR: snprintf(buf, len, "host:port with port 0-65535"); break;
    case GT_KEY_U64:
        if (k->max >= 1.8e19) {
            snprintf(buf, len, "an integer in [%s, 2^64 - 1]", lo);
            break;
        }
        /* fall through */
    case GT_KEY_U32:
    case GT_KEY_INT: snprintf(buf, len, "an integer in [%s, %s]", lo, hi); break;
    case GT_KEY_F64:
        snprintf(buf, len, "a number in %c%s, %s%c", k->min_open ? '(' : '[', lo, hi,
                 k->max_open ? ')' : ']');
        break;
    case GT_KEY_BOOL: snprintf(buf, len, "true or false"); break;
    case GT_KEY_ENUM:
    case GT_KEY_WORD: {
        size_t o = (size_t)snprintf(buf, len, "one of: ");
        for (const char *w = k->words; *w && o + 2 < len; w++) {
            if (*w == '|') {
                if (o + 2 < len) {
                    buf[o++] = ',';
                    buf[o++] = ' ';
                }
            } else {
                buf[o++] = *w;
            }
        }
        buf[o < len ? o : len - 1] = '\0';
        break;
    }
    case GT_KEY_B64KEY: snprintf(buf, len, "44 characters of base64 (a 32-byte X25519 key)"); break;
    case GT_KEY_URLLIST: snprintf(buf, len, "a list of https://host:port (or http://) URLs"); break;
    case GT_KEY_SITES: snprintf(buf, len, "a list of site mappings"); break;
    case GT_KEY_LINKS: snprintf(buf, len, "a list of link mappings"); break;
    case GT_KEY_PAIR: snprintf(buf, len, "a list of two different site names"); break;
    case GT_KEY_CUTS: snprintf(buf, len, "a list of {start_s, duration_s} mappings"); break;
    }
}

void gt_topo_key_env_name(const gt_key_t *k, char *buf, size_t len)
{
    size_t o = (size_t)snprintf(buf, len, "GT_");
    for (const char *p = k->path; *p && o + 1 < len; p++)
        buf[o++] = (*p == '.') ? '_' : (char)toupper((unsigned char)*p);
    buf[o] = '\0';
}

/* Nth word of "a|b|c", copied into buf. */
static void enum_word(const char *words, int index, char *buf, size_t len)
{
    const char *w = words;
    for (int i = 0; i < index && w; i++) {
        w = strchr(w, '|');
        if (w) w++;
    }
    size_t n = w ? strcspn(w, "|") : 0;
    if (n >= len) n = len - 1;
    memcpy(buf, w ? w : "", n);
    buf[n] = '\0';
}

void gt_topo_format_double(double v, char *buf, size_t len)
{
    /* The shortest %g that reads back as the same double. */
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) return;
    }
}

void gt_topo_key_format(const gt_key_t *k, const void *base, char *buf, size_t len)
{
    const char *p = (const char *)base + k->offset;
    switch (k->type) {
    case GT_KEY_STR:
    case GT_KEY_NAME:
    case GT_KEY_PATH:
    case GT_KEY_ADDR:
    case GT_KEY_WORD: {
        /* Double-quoted YAML with the two characters that need escaping escaped. */
        size_t o = 0;
        buf[o++] = '"';
        for (; *p && o + 3 < len; p++) {
            if (*p == '"' || *p == '\\') buf[o++] = '\\';
            buf[o++] = *p;
        }
        buf[o++] = '"';
        buf[o] = '\0';
        break;
    }
    case GT_KEY_U32: snprintf(buf, len, "%" PRIu32, *(const uint32_t *)p); break;
    case GT_KEY_U64: snprintf(buf, len, "%" PRIu64, *(const uint64_t *)p); break;
    case GT_KEY_INT: snprintf(buf, len, "%d", *(const int *)p); break;
    case GT_KEY_F64: gt_topo_format_double(*(const double *)p, buf, len); break;
    case GT_KEY_BOOL: snprintf(buf, len, "%s", *(const int *)p ? "true" : "false"); break;
    case GT_KEY_ENUM: enum_word(k->words, *(const int *)p, buf, len); break;
    default: snprintf(buf, len, "~"); break;
    }
}
