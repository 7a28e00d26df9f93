/* test_kernels_tp.c — tensor parallelism (Megatron) of the CPU model against tp_size 1.
 *
 * A TP group of t ranks is emulated in one process: t threads, each with its own gt_gpt_t
 * (tp_rank j), whose allreduce_sum meets at a pthread barrier and sums the t buffers in rank
 * order (so every rank gets the same bits, as the API requires). Checked: the segment map
 * tiles the full arena (sharded pieces once over the ranks, replicated ones on every rank),
 * init_weights of the shards equals the full init bit for bit, the loss and every gathered
 * gradient equal tp_size 1 within tolerance after one backward, the replicated gradients are
 * bit-identical across ranks, the gradient norm is the full model's and the same bits on every
 * rank, parameters still match after AdamW steps with clipping active, grad_ready covers the
 * local arena exactly once in the documented order, and the error paths.
 */
#include "gt_kernels.h"
#include "gt_test.h"

#include <pthread.h>
#include <stdint.h>

#define MAXT  4
#define STEPS 3
#define SEED  7

/* ---- the emulated TP group ---------------------------------------------------------------- */

typedef struct {
    pthread_barrier_t bar;
    size_t t;
    float *bufs[MAXT];
    size_t ns[MAXT];
    float *sum;
    size_t cap;
    int mismatch; /* ranks called with different n, or n above cap */
    size_t calls;
} group_t;

typedef struct {
    group_t *g;
    size_t rank;
} member_t;

static gt_status_t group_allreduce(void *ctx, float *buf, size_t n)
{
    member_t *m = ctx;
    group_t *g = m->g;
    g->bufs[m->rank] = buf;
    g->ns[m->rank] = n;
    pthread_barrier_wait(&g->bar);
    if (m->rank == 0) {
        g->calls++;
        for (size_t j = 0; j < g->t; j++)
            if (g->ns[j] != n || n > g->cap) g->mismatch = 1;
        if (!g->mismatch)
            for (size_t i = 0; i < n; i++) {
                float s = g->bufs[0][i];
                for (size_t j = 1; j < g->t; j++) s += g->bufs[j][i];
                g->sum[i] = s;
            }
    }
    pthread_barrier_wait(&g->bar);
    if (!g->mismatch) memcpy(buf, g->sum, n * sizeof(float));
    pthread_barrier_wait(&g->bar); /* nobody reuses sum before everyone copied it */
    return g->mismatch ? GT_ERR_INTERNAL : GT_OK;
}

static gt_status_t failing_allreduce(void *ctx, float *buf, size_t n)
{
    (void)ctx, (void)buf, (void)n;
    return GT_ERR_PEER_LOST;
}

/* ---- one model's run: init, STEPS x (forward, backward, clip, AdamW) ---------------------- */

typedef struct {
    gt_gpt_params_t p;
    const int32_t *tok;
    member_t member;
    /* results */
    gt_status_t st;
    float losses[STEPS], norms[STEPS];
    float *grads0; /* local gradients after the first backward */
    float *params; /* local parameters after the last step */
    size_t n;
    size_t roff[256], rlen[256], nranges; /* grad_ready calls of the first backward */
    int recording;
} run_t;

static void on_ready(void *ctx, size_t offset, size_t n)
{
    run_t *r = ctx;
    if (!r->recording || r->nranges >= 256) return;
    r->roff[r->nranges] = offset;
    r->rlen[r->nranges++] = n;
}

#define RUN_CHECK(expr)                          \
    do {                                         \
        gt_status_t s_ = (expr);                 \
        if (s_ != GT_OK && r->st == GT_OK) {     \
            r->st = s_;                          \
            fprintf(stderr, "run: %s\n", #expr); \
        }                                        \
    } while (0)

static void *run_model(void *arg)
{
    run_t *r = arg;
    gt_gpt_t *g = NULL;
    r->p.grad_ready = on_ready;
    r->p.grad_ready_ctx = r;
    RUN_CHECK(gt_gpt_create(&r->p, &g));
    if (!g) return NULL;
    r->n = gt_gpt_local_len(&r->p);
    r->grads0 = malloc(r->n * sizeof(float));
    r->params = malloc(r->n * sizeof(float));
    RUN_CHECK(gt_gpt_init_weights(g, SEED));
    /* eps 1e-6, not 1e-8: gradients agree to ~1e-7 of the largest one (summation order), and
     * AdamW divides by |g| per element, so with eps 1e-8 an element whose gradient is at that
     * noise floor (|g| ~ 1e-8, e.g. 3e-8 here) would turn the noise into a full-size update in
     * either run; eps 1e-6 damps those and leaves the others as they are. */
    gt_adamw_params_t ap = GT_ADAMW_PARAMS_INIT;
    ap.lr = 1e-3f;
    ap.eps = 1e-6f;
    size_t N = r->p.B * r->p.T;
    for (int s = 0; s < STEPS; s++) {
        const int32_t *in = r->tok + (size_t)s * 3, *tg = in + 1; /* a new batch each step */
        RUN_CHECK(gt_gpt_forward(g, in, tg, &r->losses[s]));
        RUN_CHECK(gt_gpt_grad_zero(g));
        r->recording = s == 0;
        RUN_CHECK(gt_gpt_backward(g, 1.0f));
        r->recording = 0;
        if (s == 0) RUN_CHECK(gt_gpt_arena_read(g, GT_GPT_GRADS, 0, r->n, r->grads0));
        RUN_CHECK(gt_gpt_grad_clip(g, 0.5f, &r->norms[s])); /* the norms here are > 0.5 */
        RUN_CHECK(gt_gpt_adamw_step(g, &ap, (uint64_t)s + 1));
    }
    (void)N;
    RUN_CHECK(gt_gpt_arena_read(g, GT_GPT_PARAMS, 0, r->n, r->params));
    gt_gpt_destroy(g);
    return NULL;
}

static int32_t *make_tokens(size_t n, size_t V)
{
    int32_t *tok = malloc(n * sizeof(int32_t));
    uint64_t s = 99;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (int32_t)((s >> 33) % V);
    }
    return tok;
}

static int close_to(double a, double ref, double atol, double rtol)
{
    return fabs(a - ref) <= atol + rtol * fabs(ref);
}

/* Every grad_ready range list covers [0, n) exactly once; ln_f first, embeddings last. */
static void check_ranges(const run_t *r, size_t C)
{
    unsigned char *seen = calloc(r->n, 1);
    int once = 1;
    for (size_t i = 0; i < r->nranges; i++)
        for (size_t e = r->roff[i]; e < r->roff[i] + r->rlen[i] && e < r->n; e++)
            once &= seen[e]++ == 0;
    size_t covered = 0;
    for (size_t e = 0; e < r->n; e++) covered += seen[e] == 1;
    CHECK_MSG(once && covered == r->n, "grad_ready ranges cover %zu of %zu floats (once: %d)",
              covered, r->n, once);
    CHECK_EQ_INT(r->nranges, r->p.model.L + 2);
    if (r->nranges) {
        CHECK_EQ_INT(r->roff[0], r->n - 2 * C);
        CHECK_EQ_INT(r->roff[r->nranges - 1], 0);
        for (size_t i = 2; i < r->nranges; i++) CHECK(r->roff[i] < r->roff[i - 1]);
    }
    free(seen);
}

/* ---- TP = t against TP = 1 ---------------------------------------------------------------- */

/* FNV-1a over bytes: fingerprints of the gathered results for the thread-count check. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* Runs t ranks and tp_size 1 with `threads` kernel threads each; returns a fingerprint of the
 * TP run's gathered gradients and parameters (0 on failure). */
static uint64_t test_tp_matches(gt_gpt_config_t cfg, size_t B, size_t T, size_t t, int threads)
{
    uint64_t print = 0;
    CHECK_EQ_INT(gt_kern_set_threads(threads), GT_OK);
    size_t N = B * T, full_n = gt_gpt_arena_len(&cfg);
    int32_t *tok = make_tokens(N + 3 * STEPS + 1, cfg.V);
    run_t ref;
    memset(&ref, 0, sizeof(ref));
    gt_gpt_params_t p = GT_GPT_PARAMS_INIT;
    p.model = cfg, p.B = B, p.T = T;
    ref.p = p, ref.tok = tok;
    run_model(&ref);
    CHECK_EQ_INT(ref.st, GT_OK);
    check_ranges(&ref, cfg.C);

    group_t grp;
    memset(&grp, 0, sizeof(grp));
    grp.t = t;
    grp.cap = N * cfg.C;
    grp.sum = malloc(grp.cap * sizeof(float));
    pthread_barrier_init(&grp.bar, NULL, (unsigned)t);
    run_t rk[MAXT];
    pthread_t th[MAXT];
    memset(rk, 0, sizeof(rk));
    for (size_t j = 0; j < t; j++) {
        rk[j].p = p;
        rk[j].p.tp_size = t, rk[j].p.tp_rank = j;
        rk[j].member = (member_t){&grp, j};
        rk[j].p.tp_comm.ctx = &rk[j].member;
        rk[j].p.tp_comm.allreduce_sum = group_allreduce;
        rk[j].tok = tok;
        CHECK_EQ_INT(pthread_create(&th[j], NULL, run_model, &rk[j]), 0);
    }
    for (size_t j = 0; j < t; j++) pthread_join(th[j], NULL);
    pthread_barrier_destroy(&grp.bar);
    CHECK_EQ_INT(grp.mismatch, 0);
    /* per step: 4 all-reduces per block and one for the norm */
    CHECK_EQ_INT(grp.calls, STEPS * (4 * cfg.L + 1));

    float *g_full[MAXT], *p_full[MAXT];
    double gerr = 0, perr = 0;
    for (size_t j = 0; j < t; j++) {
        CHECK_EQ_INT(rk[j].st, GT_OK);
        if (rk[j].st != GT_OK || !rk[j].grads0) goto out;
        check_ranges(&rk[j], cfg.C);
        for (int s = 0; s < STEPS; s++) {
            CHECK_MSG(close_to(rk[j].losses[s], ref.losses[s], 1e-5, 1e-4),
                      "t=%zu rank %zu step %d: loss %.9g vs %.9g", t, j, s, rk[j].losses[s],
                      ref.losses[s]);
            CHECK(memcmp(&rk[j].losses[s], &rk[0].losses[s], sizeof(float)) == 0);
            CHECK_MSG(close_to(rk[j].norms[s], ref.norms[s], 1e-6, 1e-4),
                      "t=%zu step %d: norm %.9g vs %.9g", t, s, rk[j].norms[s], ref.norms[s]);
            CHECK(memcmp(&rk[j].norms[s], &rk[0].norms[s], sizeof(float)) == 0);
            CHECK(ref.norms[s] > 0.5f); /* clipping was active */
        }
        g_full[j] = calloc(full_n, sizeof(float));
        p_full[j] = calloc(full_n, sizeof(float));
        CHECK_EQ_INT(gt_gpt_tp_gather(&rk[j].p, rk[j].grads0, g_full[j]), GT_OK);
        CHECK_EQ_INT(gt_gpt_tp_gather(&rk[j].p, rk[j].params, p_full[j]), GT_OK);
    }
    /* the whole vectors: each rank's sharded segments, rank 0's replicated ones; replicated
     * segments must be the same bits on every rank */
    float *g_all = calloc(full_n, sizeof(float)), *p_all = calloc(full_n, sizeof(float));
    size_t rep_floats = 0, rep_diff = 0;
    for (size_t j = 0; j < t; j++) {
        size_t ns = gt_gpt_tp_segment_count(&rk[j].p);
        gt_gpt_segment_t *sg = malloc(ns * sizeof(*sg));
        size_t got = 0;
        CHECK_EQ_INT(gt_gpt_tp_segments(&rk[j].p, sg, ns, &got), GT_OK);
        for (size_t i = 0; i < got; i++) {
            size_t o = sg[i].full_offset, n = sg[i].n;
            if (sg[i].replicated) {
                rep_floats += n;
                rep_diff += memcmp(g_full[j] + o, g_full[0] + o, n * sizeof(float)) != 0;
                rep_diff += memcmp(p_full[j] + o, p_full[0] + o, n * sizeof(float)) != 0;
            }
            memcpy(g_all + o, g_full[j] + o, n * sizeof(float));
            memcpy(p_all + o, p_full[j] + o, n * sizeof(float));
        }
        free(sg);
    }
    CHECK(rep_floats > 0);
    CHECK_MSG(rep_diff == 0, "t=%zu: %zu replicated segments differ across ranks", t, rep_diff);
    /* tolerance: |a - b| <= atol + rtol |ref| with atol scaled to the gradient's size */
    double gmax = 0, pmax = 0;
    for (size_t i = 0; i < full_n; i++) {
        gmax = fmax(gmax, fabs(ref.grads0[i]));
        pmax = fmax(pmax, fabs(ref.params[i]));
    }
    size_t gbad = 0, pbad = 0;
    for (size_t i = 0; i < full_n; i++) {
        double dg = fabs(g_all[i] - ref.grads0[i]), dp = fabs(p_all[i] - ref.params[i]);
        gerr = fmax(gerr, dg / (1e-6 * gmax + 1e-4 * fabs(ref.grads0[i])));
        perr = fmax(perr, dp / (1e-6 * pmax + 1e-4 * fabs(ref.params[i])));
        gbad += !close_to(g_all[i], ref.grads0[i], 1e-6 * gmax, 1e-4);
        if (!close_to(p_all[i], ref.params[i], 1e-6 * pmax, 1e-4) && pbad++ < 5) {
            printf("param %zu: %.9g vs %.9g (grad0 %.3g vs %.3g, gmax %.3g)\n", i, p_all[i],
                   ref.params[i], g_all[i], ref.grads0[i], gmax);
        }
    }
    print = fnv(fnv(14695981039346656037ull, g_all, full_n * sizeof(float)), p_all,
                full_n * sizeof(float));
    printf("threads=%d t=%zu B=%zu T=%zu: loss %.9g vs %.9g; tolerance used (worst |d| / (atol + "
           "rtol |ref|)): gradients %.3g, parameters after %d AdamW steps %.3g\n",
           threads, t, B, T, rk[0].losses[0], ref.losses[0], gerr, STEPS, perr);
    CHECK_MSG(gbad == 0, "t=%zu: %zu of %zu gradient elements off", t, gbad, full_n);
    CHECK_MSG(pbad == 0, "t=%zu: %zu of %zu parameters off after %d steps", t, pbad, full_n, STEPS);
    free(g_all);
    free(p_all);
    for (size_t j = 0; j < t; j++) free(g_full[j]), free(p_full[j]);
out:
    for (size_t j = 0; j < t; j++) free(rk[j].grads0), free(rk[j].params);
    free(ref.grads0);
    free(ref.params);
    free(grp.sum);
    free(tok);
    return print;
}

/* ---- the segment map and the initial weights ----------------------------------------------- */

static void test_segments_and_init(gt_gpt_config_t cfg, size_t t)
{
    size_t full_n = gt_gpt_arena_len(&cfg);
    gt_gpt_params_t p = GT_GPT_PARAMS_INIT;
    p.model = cfg, p.B = 1, p.T = 1;
    gt_gpt_t *full = NULL;
    CHECK_EQ_INT(gt_gpt_create(&p, &full), GT_OK);
    if (!full) return;
    CHECK_EQ_INT(gt_gpt_init_weights(full, SEED), GT_OK);
    const float *w_full = gt_gpt_arena(full, GT_GPT_PARAMS);
    unsigned *cover = calloc(full_n, sizeof(unsigned));
    float *rebuilt = calloc(full_n, sizeof(float));
    size_t bound = cfg.L * (4 * cfg.C + 8) + 1, local_sum = 0;
    for (size_t j = 0; j < t; j++) {
        p.tp_size = t, p.tp_rank = j;
        p.tp_comm.allreduce_sum = failing_allreduce; /* init never communicates */
        size_t n = gt_gpt_local_len(&p), ns = gt_gpt_tp_segment_count(&p), got = 0;
        CHECK(n > 0 && ns > 0);
        if (t == 1) CHECK_EQ_INT(ns, 1);
        CHECK_MSG(ns <= bound, "t=%zu rank %zu: %zu segments, bound %zu", t, j, ns, bound);
        local_sum += n;
        gt_gpt_segment_t *sg = malloc(ns * sizeof(*sg));
        if (ns > 1) CHECK_EQ_INT(gt_gpt_tp_segments(&p, sg, ns - 1, &got), GT_ERR_OVERFLOW);
        CHECK_EQ_INT(gt_gpt_tp_segments(&p, sg, ns, &got), GT_OK);
        CHECK_EQ_INT(got, ns);
        /* tiles [0, n) in order; full ranges inside the arena */
        size_t at = 0;
        for (size_t i = 0; i < got; i++) {
            CHECK_EQ_INT(sg[i].local_offset, at);
            at += sg[i].n;
            CHECK(sg[i].n > 0 && sg[i].full_offset + sg[i].n <= full_n);
            if (sg[i].replicated && j > 0) continue; /* replicated: count rank 0's copy */
            for (size_t e = 0; e < sg[i].n; e++) cover[sg[i].full_offset + e]++;
        }
        CHECK_EQ_INT(at, n);
        /* init of the shard == the full init at its positions; gather/scatter round-trip */
        gt_gpt_t *g = NULL;
        CHECK_EQ_INT(gt_gpt_create(&p, &g), GT_OK);
        if (g) {
            CHECK_EQ_INT(gt_gpt_init_weights(g, SEED), GT_OK);
            const float *w = gt_gpt_arena(g, GT_GPT_PARAMS);
            size_t diff = 0;
            for (size_t i = 0; i < got; i++)
                diff += memcmp(w + sg[i].local_offset, w_full + sg[i].full_offset,
                               sg[i].n * sizeof(float)) != 0;
            CHECK_MSG(diff == 0, "t=%zu rank %zu: %zu segments differ from the full init", t, j,
                      diff);
            float *loc = malloc(n * sizeof(float));
            CHECK_EQ_INT(gt_gpt_tp_scatter(&p, w_full, loc), GT_OK);
            CHECK(memcmp(loc, w, n * sizeof(float)) == 0);
            CHECK_EQ_INT(gt_gpt_tp_gather(&p, w, rebuilt), GT_OK);
            free(loc);
            gt_gpt_destroy(g);
        }
        free(sg);
    }
    size_t wrong = 0;
    for (size_t i = 0; i < full_n; i++) wrong += cover[i] != 1;
    CHECK_MSG(wrong == 0, "t=%zu: %zu full-arena floats not covered exactly once", t, wrong);
    CHECK(memcmp(rebuilt, w_full, full_n * sizeof(float)) == 0);
    /* sharded floats split t ways, replicated ones held t times */
    if (t > 1) CHECK(local_sum > full_n);
    if (t == 1) CHECK_EQ_INT(local_sum, full_n);
    free(cover);
    free(rebuilt);
    gt_gpt_destroy(full);
}

/* ---- errors ---------------------------------------------------------------------------------- */

static void test_errors(void)
{
    gt_gpt_config_t cfg = {64, 0, 16, 2, 48, 6};
    gt_gpt_params_t p = GT_GPT_PARAMS_INIT;
    p.model = cfg, p.B = 2, p.T = 8;
    p.tp_comm.allreduce_sum = failing_allreduce;
    gt_gpt_t *g = NULL;
    p.tp_size = 4; /* NH = 6 */
    CHECK_EQ_INT(gt_gpt_create(&p, &g), GT_ERR_CONFIG);
    CHECK(g == NULL);
    CHECK_EQ_INT(gt_gpt_local_len(&p), 0);
    CHECK_EQ_INT(gt_gpt_tp_segment_count(&p), 0);
    size_t n = 0;
    CHECK_EQ_INT(gt_gpt_tp_segments(&p, NULL, 0, &n), GT_ERR_CONFIG);
    p.tp_size = 3, p.tp_rank = 3;
    CHECK_EQ_INT(gt_gpt_tp_check(&p), GT_ERR_CONFIG);
    p.tp_rank = 2;
    CHECK_EQ_INT(gt_gpt_tp_check(&p), GT_OK);
    p.tp_comm.allreduce_sum = NULL;
    CHECK_EQ_INT(gt_gpt_create(&p, &g), GT_ERR_CONFIG);
    p.tp_comm.allreduce_sum = failing_allreduce;
    p.device = GT_DEVICE_CUDA;
    CHECK_EQ_INT(gt_gpt_create(&p, &g), GT_ERR_UNSUPPORTED);
    p.device = GT_DEVICE_CPU;
    p.tp_size = 1, p.tp_rank = 1;
    CHECK_EQ_INT(gt_gpt_create(&p, &g), GT_ERR_CONFIG);
    /* a failing all-reduce ends the pass with its status */
    p.tp_size = 2, p.tp_rank = 1;
    CHECK_EQ_INT(gt_gpt_create(&p, &g), GT_OK);
    if (!g) return;
    int32_t tok[17] = {0};
    float loss = 0, norm = 0;
    CHECK_EQ_INT(gt_gpt_init_weights(g, 1), GT_OK);
    CHECK_EQ_INT(gt_gpt_forward(g, tok, tok + 1, &loss), GT_ERR_PEER_LOST);
    CHECK_EQ_INT(gt_gpt_backward(g, 1.0f), GT_ERR_INVALID); /* no complete forward */
    CHECK_EQ_INT(gt_gpt_grad_norm(g, &norm), GT_ERR_PEER_LOST);
    gt_gpt_destroy(g);
}

int main(void)
{
    gt_gpt_config_t small = {64, 72, 16, 2, 32, 4}; /* Vp > V: padding rows in the map */
    gt_gpt_config_t six = {64, 0, 32, 2, 48, 12};   /* t = 3 (an odd middle rank) and 6 */
    test_segments_and_init(small, 1);
    test_segments_and_init(small, 2);
    test_segments_and_init(small, 4);
    test_segments_and_init(six, 3);
    test_segments_and_init(six, 6);
    test_tp_matches(small, 2, 16, 2, 1);
    test_tp_matches(small, 2, 16, 4, 1);
    /* N = 300: two row blocks; the same bits with 1 and 2 kernel threads per rank */
    uint64_t one = test_tp_matches(six, 10, 30, 3, 1), two = test_tp_matches(six, 10, 30, 3, 2);
    CHECK(one != 0 && one == two);
    CHECK_EQ_INT(gt_kern_set_threads(1), GT_OK);
    test_errors();
    return GT_TEST_DONE();
}
