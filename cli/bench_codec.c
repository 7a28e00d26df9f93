/* bench_codec.c — `geotrain bench codec`: throughput and compression ratio of every codec on
 * synthetic pseudo-gradients (gaussian and heavy-tailed) and, given two checkpoints of a
 * training run (--anchor, --params), on a real one; with plain zstd on the raw fp32 bytes as
 * the baseline row, all in one run so the ratios compare like with like.
 *
 * One thread (GB/s per core), GB/s counted in fp32 input bytes, the median of --repeats
 * timed runs after one untimed warm-up run. Each run starts from a zeroed residual, so every repeat
 * must give the same frame: the `deterministic` column checks that, and `rel_err` (||decode - x|| /
 * ||x||) is the correctness column beside the speeds.
 */
#include "cli.h"
#include "gt_compress.h"
#include "gt_local.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zstd.h>

typedef struct {
    size_t n;
    int repeats;
    int json;
    gt_cmp_params_t p;
    const char *codecs;
    const char *data;
    const char *anchor, *params; /* --anchor/--params: the pseudograd data set */
} bench_opts_t;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: geotrain bench codec [--json] [options]\n\n"
            "Encodes and decodes synthetic pseudo-gradients with each codec on one core and\n"
            "prints, per codec and data set: encode_gbps and decode_gbps (GB/s of fp32 input,\n"
            "median of the repeats; the _cpu_ twins divide by this thread's CPU time instead of\n"
            "wall time, for shared machines), ratio (fp32 bytes / frame bytes), rel_err and\n"
            "whether repeats gave identical frames. The `zstd` row is plain zstd on the raw fp32\n"
            "bytes: the baseline.\n\n"
            "Options:\n"
            "  --json               one JSON object per line (default: a table)\n"
            "  --n N                elements per vector (default 8388608: 32 MiB of fp32)\n"
            "  --repeats R          timed runs per row, median reported (default 5)\n"
            "  --codecs LIST        comma list of fp32 bf16 int8 int4 fp4 topk topk:VALUES zstd\n"
            "                       (VALUES: fp32 bf16 int8 int4 fp4 int2; default fp32,bf16,\n"
            "                       int8,int4,fp4,topk:int8,topk:int4,topk:int2,zstd)\n"
            "  --data LIST          gaussian,heavy,pseudograd: N(0, 1e-3^2), Student-t with 3\n"
            "                       degrees of freedom at the same scale, and a real pseudo-\n"
            "                       gradient (default: the first two, all three with --anchor)\n"
            "  --anchor A.safetensors  --params B.safetensors\n"
            "                       pseudograd = A - B over every float tensor of A (same\n"
            "                       names and shapes in B), in A's order: e.g. two checkpoints\n"
            "                       of `geotrain run`, H inner steps apart\n"
            "  --block-size B       codec.block_size (default 128)\n"
            "  --topk-fraction F    codec.topk_fraction (default 0.01)\n"
            "  --error-feedback 0|1 codec.error_feedback (default 1)\n"
            "  --zstd auto|on|off   codec.zstd (default auto)\n"
            "  --zstd-level L       codec.zstd_level, also the baseline's level (default 3)\n"
            "  -h, --help           this text\n\n"
            "GT_CMP_ISA=scalar forces the portable kernels (same bytes, for comparison).\n");
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_gauss(uint64_t *s)
{
    double u1 = ((double)(rng_next(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    double u2 = (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static void fill(float *x, size_t n, const char *data)
{
    uint64_t s = 12345;
    const double sigma = 1e-3;
    int heavy = strcmp(data, "heavy") == 0;
    for (size_t i = 0; i < n; i++) {
        double g = rng_gauss(&s);
        if (heavy) { /* Student-t, nu = 3: g / sqrt(chi2_3 / 3) */
            double c = 0;
            for (int k = 0; k < 3; k++) {
                double z = rng_gauss(&s);
                c += z * z;
            }
            g /= sqrt(c / 3.0);
        }
        x[i] = (float)(sigma * g);
    }
}

/* This thread's CPU time: on a shared machine, wall time also counts time spent descheduled. */
static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* x = anchor - params over every float tensor of the anchor file, in its order. */
static int load_pseudograd(const char *anchor, const char *params, float **x_p, size_t *n_p)
{
    gt_local_st_t *a = NULL, *b = NULL;
    float *x = NULL, *tmp = NULL;
    int rc = -1;
    if (gt_local_st_open(anchor, &a) != GT_OK || gt_local_st_open(params, &b) != GT_OK) goto out;
    size_t n = 0, biggest = 0;
    for (size_t i = 0; i < gt_local_st_count(a); i++) {
        gt_local_st_info_t ia;
        gt_local_st_info(a, i, &ia);
        if (ia.dtype == GT_LOCAL_ST_OTHER) continue;
        n += ia.numel;
        biggest = ia.numel > biggest ? ia.numel : biggest;
    }
    x = malloc((n ? n : 1) * sizeof(float));
    tmp = malloc((biggest ? biggest : 1) * sizeof(float));
    if (!x || !tmp || n == 0) {
        fprintf(stderr, "geotrain bench codec: %s: no float tensors, or out of memory\n", anchor);
        goto out;
    }
    size_t off = 0;
    for (size_t i = 0; i < gt_local_st_count(a); i++) {
        gt_local_st_info_t ia, ib;
        size_t j;
        gt_local_st_info(a, i, &ia);
        if (ia.dtype == GT_LOCAL_ST_OTHER) continue;
        if (gt_local_st_find(b, ia.name, &j) != GT_OK) {
            fprintf(stderr, "geotrain bench codec: %s has no tensor %s\n", params, ia.name);
            goto out;
        }
        gt_local_st_info(b, j, &ib);
        if (ib.numel != ia.numel || gt_local_st_read_f32(a, i, x + off, ia.numel) != GT_OK ||
            gt_local_st_read_f32(b, j, tmp, ib.numel) != GT_OK) {
            fprintf(stderr, "geotrain bench codec: tensor %s differs in size or is unreadable\n",
                    ia.name);
            goto out;
        }
        for (size_t k = 0; k < ia.numel; k++) x[off + k] -= tmp[k];
        off += ia.numel;
    }
    *x_p = x;
    *n_p = n;
    x = NULL;
    rc = 0;
out:
    free(x);
    free(tmp);
    gt_local_st_close(a);
    gt_local_st_close(b);
    return rc;
}

typedef struct {
    double enc_gbps, dec_gbps, ratio, rel_err;
    double enc_cpu_gbps, dec_cpu_gbps; /* per second of this thread's CPU time */
    size_t frame_bytes;
    int deterministic, zstd_used;
} row_t;

static double rel_err(const float *x, const float *y, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)y[i] - x[i];
        num += d * d;
        den += (double)x[i] * x[i];
    }
    return den > 0 ? sqrt(num / den) : 0;
}

static int run_codec(const bench_opts_t *o, const gt_cmp_params_t *p, const float *x, size_t n,
                     row_t *r)
{
    gt_cmp_ctx_t *ctx = NULL;
    if (gt_cmp_create(p, &ctx) != GT_OK) return -1;
    size_t cap = gt_cmp_bound(ctx, n), len = 0, len0 = 0;
    uint8_t *frame = malloc(cap), *first = malloc(cap);
    float *e = p->error_feedback ? calloc(n, sizeof(float)) : NULL;
    float *y = malloc(n * sizeof(float));
    /* wall and thread-CPU nanoseconds of each repeat: encode, decode */
    double *te = malloc(sizeof(double) * 4 * (size_t)o->repeats);
    double *td = te ? te + o->repeats : NULL, *ce = te ? te + 2 * o->repeats : NULL;
    double *cd = te ? te + 3 * o->repeats : NULL;
    int rc = -1;
    if (!frame || !first || (p->error_feedback && !e) || !y || !te || !td) goto out;
    r->deterministic = 1;
    /* One untimed run first: page faults of fresh buffers are not the codec's cost. */
    if (gt_cmp_encode(ctx, x, n, e, frame, cap, &len) != GT_OK ||
        gt_cmp_decode(ctx, frame, len, y, n) != GT_OK)
        goto out;
    for (int k = 0; k < o->repeats; k++) {
        if (e) memset(e, 0, n * sizeof(float));
        uint64_t c0 = cpu_ns(), t0 = gt_time_ns();
        if (gt_cmp_encode(ctx, x, n, e, frame, cap, &len) != GT_OK) goto out;
        uint64_t c1 = cpu_ns(), t1 = gt_time_ns();
        if (gt_cmp_decode(ctx, frame, len, y, n) != GT_OK) goto out;
        uint64_t c2 = cpu_ns(), t2 = gt_time_ns();
        te[k] = (double)(t1 - t0);
        td[k] = (double)(t2 - t1);
        ce[k] = (double)(c1 - c0);
        cd[k] = (double)(c2 - c1);
        if (k == 0) {
            memcpy(first, frame, len);
            len0 = len;
        } else if (len != len0 || memcmp(first, frame, len) != 0) {
            r->deterministic = 0;
        }
    }
    gt_cmp_frame_info_t info;
    if (gt_cmp_frame_info(frame, len, &info) != GT_OK) goto out;
    r->zstd_used = info.zstd;
    r->enc_gbps = 4.0 * (double)n / gt_cli_median(te, o->repeats);
    r->dec_gbps = 4.0 * (double)n / gt_cli_median(td, o->repeats);
    r->enc_cpu_gbps = 4.0 * (double)n / gt_cli_median(ce, o->repeats);
    r->dec_cpu_gbps = 4.0 * (double)n / gt_cli_median(cd, o->repeats);
    r->frame_bytes = len;
    r->ratio = 4.0 * (double)n / (double)len;
    r->rel_err = rel_err(x, y, n);
    rc = 0;
out:
    free(frame);
    free(first);
    free(e);
    free(y);
    free(te);
    gt_cmp_destroy(ctx);
    return rc;
}

static int run_zstd(const bench_opts_t *o, const float *x, size_t n, row_t *r)
{
    size_t cap = ZSTD_compressBound(4 * n), len = 0;
    uint8_t *frame = malloc(cap);
    float *y = malloc(n * sizeof(float));
    /* wall and thread-CPU nanoseconds of each repeat: encode, decode */
    double *te = malloc(sizeof(double) * 4 * (size_t)o->repeats);
    double *td = te ? te + o->repeats : NULL, *ce = te ? te + 2 * o->repeats : NULL;
    double *cd = te ? te + 3 * o->repeats : NULL;
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    ZSTD_DCtx *dc = ZSTD_createDCtx();
    int rc = -1;
    if (!frame || !y || !te || !td || !cc || !dc) goto out;
    len = ZSTD_compressCCtx(cc, frame, cap, x, 4 * n, o->p.zstd_level); /* untimed warm-up */
    if (ZSTD_isError(len) || ZSTD_isError(ZSTD_decompressDCtx(dc, y, 4 * n, frame, len))) goto out;
    for (int k = 0; k < o->repeats; k++) {
        uint64_t c0 = cpu_ns(), t0 = gt_time_ns();
        len = ZSTD_compressCCtx(cc, frame, cap, x, 4 * n, o->p.zstd_level);
        uint64_t c1 = cpu_ns(), t1 = gt_time_ns();
        if (ZSTD_isError(len)) goto out;
        size_t got = ZSTD_decompressDCtx(dc, y, 4 * n, frame, len);
        uint64_t c2 = cpu_ns(), t2 = gt_time_ns();
        if (ZSTD_isError(got) || got != 4 * n) goto out;
        te[k] = (double)(t1 - t0);
        td[k] = (double)(t2 - t1);
        ce[k] = (double)(c1 - c0);
        cd[k] = (double)(c2 - c1);
    }
    r->enc_gbps = 4.0 * (double)n / gt_cli_median(te, o->repeats);
    r->dec_gbps = 4.0 * (double)n / gt_cli_median(td, o->repeats);
    r->enc_cpu_gbps = 4.0 * (double)n / gt_cli_median(ce, o->repeats);
    r->dec_cpu_gbps = 4.0 * (double)n / gt_cli_median(cd, o->repeats);
    r->frame_bytes = len;
    r->ratio = 4.0 * (double)n / (double)len;
    r->rel_err = rel_err(x, y, n);
    r->deterministic = 1;
    r->zstd_used = 1;
    rc = 0;
out:
    free(frame);
    free(y);
    free(te);
    ZSTD_freeCCtx(cc);
    ZSTD_freeDCtx(dc);
    return rc;
}

static void print_row(const bench_opts_t *o, const char *label, const gt_cmp_params_t *p,
                      const char *data, size_t n, const row_t *r, int baseline)
{
    const char *isa = gt_cmp_isa();
    if (!o->json) {
        printf("%-10s %-10s %8.2f %8.2f %8.2f %8.2f %9.2f %11.3e %6zu%s %s\n", label, data,
               r->enc_gbps, r->enc_cpu_gbps, r->dec_gbps, r->dec_cpu_gbps, r->ratio, r->rel_err,
               r->frame_bytes >> 10, r->zstd_used ? "+z" : "  ", r->deterministic ? "yes" : "NO");
        return;
    }
    printf("{\"bench\":\"codec\",\"codec\":\"%s\",\"data\":\"%s\",\"n\":%zu,",
           baseline ? "zstd" : gt_cmp_codec_name(p->codec), data, n);
    if (baseline) {
        printf("\"baseline\":true,\"zstd_level\":%d,", o->p.zstd_level);
    } else {
        printf("\"block_size\":%u,\"error_feedback\":%s,\"zstd\":\"%s\",\"zstd_level\":%d,",
               p->block_size, p->error_feedback ? "true" : "false", gt_cmp_zstd_name(p->zstd),
               p->zstd_level);
        if (p->codec == GT_CMP_TOPK)
            printf("\"topk_fraction\":%g,\"topk_values\":\"%s\",", p->topk_fraction,
                   gt_cmp_codec_name(p->topk_values));
    }
    printf("\"zstd_used\":%s,\"isa\":\"%s\",\"repeats\":%d,\"encode_gbps\":%.3f,"
           "\"decode_gbps\":%.3f,\"encode_cpu_gbps\":%.3f,\"decode_cpu_gbps\":%.3f,"
           "\"ratio\":%.3f,\"frame_bytes\":%zu,\"rel_err\":%.4e,\"deterministic\":%s}\n",
           r->zstd_used ? "true" : "false", isa, o->repeats, r->enc_gbps, r->dec_gbps,
           r->enc_cpu_gbps, r->dec_cpu_gbps, r->ratio, r->frame_bytes, r->rel_err,
           r->deterministic ? "true" : "false");
    fflush(stdout);
}

static int parse_size(const char *s, size_t *v)
{
    char *end;
    unsigned long long x = strtoull(s, &end, 10);
    if (end == s || *end || x == 0) return -1;
    *v = (size_t)x;
    return 0;
}

int gt_bench_codec(int argc, char **argv)
{
    static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                         {"n", required_argument, NULL, 'n'},
                                         {"repeats", required_argument, NULL, 'r'},
                                         {"codecs", required_argument, NULL, 'c'},
                                         {"data", required_argument, NULL, 'd'},
                                         {"anchor", required_argument, NULL, 'A'},
                                         {"params", required_argument, NULL, 'P'},
                                         {"block-size", required_argument, NULL, 'b'},
                                         {"topk-fraction", required_argument, NULL, 'f'},
                                         {"error-feedback", required_argument, NULL, 'e'},
                                         {"zstd", required_argument, NULL, 'z'},
                                         {"zstd-level", required_argument, NULL, 'l'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    bench_opts_t o = {.n = 8u << 20,
                      .repeats = 5,
                      .json = 0,
                      .p = GT_CMP_PARAMS_INIT,
                      .codecs = "fp32,bf16,int8,int4,fp4,topk:int8,topk:int4,topk:int2,zstd",
                      .data = "gaussian,heavy"};
    int c, data_given = 0;
    size_t v;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'j': o.json = 1; break;
        case 'n':
            if (parse_size(optarg, &o.n)) goto bad;
            break;
        case 'r':
            if (parse_size(optarg, &v) || v > 1000) goto bad;
            o.repeats = (int)v;
            break;
        case 'c': o.codecs = optarg; break;
        case 'd':
            o.data = optarg;
            data_given = 1;
            break;
        case 'A': o.anchor = optarg; break;
        case 'P': o.params = optarg; break;
        case 'b':
            if (parse_size(optarg, &v) || v > UINT32_MAX) goto bad;
            o.p.block_size = (uint32_t)v;
            break;
        case 'f': o.p.topk_fraction = atof(optarg); break;
        case 'e':
            if (strcmp(optarg, "0") && strcmp(optarg, "1")) goto bad;
            o.p.error_feedback = optarg[0] == '1';
            break;
        case 'z':
            if (gt_cmp_zstd_from_name(optarg, &o.p.zstd) != GT_OK) goto bad;
            break;
        case 'l': o.p.zstd_level = atoi(optarg); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc || !o.anchor != !o.params) goto bad;
    if (o.anchor && !data_given) o.data = "gaussian,heavy,pseudograd";
    char why[160];
    if (gt_cmp_params_check(&o.p, why, sizeof(why)) != GT_OK) {
        fprintf(stderr, "geotrain bench codec: %s\n", why);
        return 2;
    }

    if (!o.json)
        printf("%-10s %-10s %8s %8s %8s %8s %9s %11s %8s %s\n", "codec", "data", "enc GB/s",
               "enc/cpu", "dec GB/s", "dec/cpu", "ratio", "rel_err", "KiB", "determ.");
    int failed = 0;
    char dbuf[256], cbuf[256];
    snprintf(dbuf, sizeof(dbuf), "%s", o.data);
    for (char *ds = NULL, *data = strtok_r(dbuf, ",", &ds); data; data = strtok_r(NULL, ",", &ds)) {
        float *x = NULL;
        size_t n = o.n;
        if (strcmp(data, "pseudograd") == 0) {
            if (!o.anchor || !o.params) {
                fprintf(stderr, "geotrain bench codec: data 'pseudograd' needs --anchor and "
                                "--params\n");
                return 2;
            }
            if (load_pseudograd(o.anchor, o.params, &x, &n) != 0) return 1;
        } else if (strcmp(data, "gaussian") == 0 || strcmp(data, "heavy") == 0) {
            x = malloc(n * sizeof(float));
            if (!x) {
                fprintf(stderr, "geotrain bench codec: cannot allocate %zu floats\n", n);
                return 1;
            }
            fill(x, n, data);
        } else {
            fprintf(stderr,
                    "geotrain bench codec: unknown data '%s' (gaussian, heavy, "
                    "pseudograd)\n",
                    data);
            return 2;
        }
        snprintf(cbuf, sizeof(cbuf), "%s", o.codecs);
        for (char *cs = NULL, *name = strtok_r(cbuf, ",", &cs); name;
             name = strtok_r(NULL, ",", &cs)) {
            row_t r;
            memset(&r, 0, sizeof(r));
            if (strcmp(name, "zstd") == 0) {
                if (run_zstd(&o, x, n, &r) != 0) {
                    fprintf(stderr, "geotrain bench codec: zstd baseline failed\n");
                    failed = 1;
                    continue;
                }
                print_row(&o, "zstd", NULL, data, n, &r, 1);
                continue;
            }
            gt_cmp_params_t p = o.p;
            char *colon = strchr(name, ':');
            if (colon) *colon = '\0';
            if (gt_cmp_codec_from_name(name, &p.codec) != GT_OK || p.codec == GT_CMP_INT2 ||
                (colon && (p.codec != GT_CMP_TOPK ||
                           gt_cmp_codec_from_name(colon + 1, &p.topk_values) != GT_OK ||
                           p.topk_values == GT_CMP_TOPK))) {
                fprintf(stderr, "geotrain bench codec: unknown codec '%s'\n", name);
                free(x);
                return 2;
            }
            if (run_codec(&o, &p, x, n, &r) != 0) {
                fprintf(stderr, "geotrain bench codec: %s failed\n", name);
                failed = 1;
                continue;
            }
            char label[32];
            snprintf(label, sizeof(label), "%s", gt_cmp_codec_name(p.codec));
            if (p.codec == GT_CMP_TOPK)
                snprintf(label, sizeof(label), "topk:%s", gt_cmp_codec_name(p.topk_values));
            print_row(&o, label, &p, data, n, &r, 0);
            if (!r.deterministic) failed = 1;
        }
        free(x);
    }
    return failed;
bad:
    fprintf(stderr, "geotrain bench codec: bad option or value\n");
    usage(stderr);
    return 2;
}
