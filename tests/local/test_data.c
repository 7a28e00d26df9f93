/* test_data.c — data sources: the synthetic chain's construction, llm.c shard validation,
 * disjoint shares that cover the corpus, and exact restore of a data position. */
#include "gt_local.h"
#include "gt_test.h"

#include <stdint.h>

static char dir[512];

static void test_synthetic(void)
{
    enum { V = 64, K = 4, N = 200000 };
    uint16_t *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    CHECK_EQ_INT(gt_local_synthetic_generate(V, K, 7, N, a), GT_OK);
    CHECK_EQ_INT(gt_local_synthetic_generate(V, K, 7, N, b), GT_OK);
    CHECK(memcmp(a, b, N * sizeof *a) == 0);
    CHECK_EQ_INT(gt_local_synthetic_generate(V, K, 8, N, b), GT_OK);
    CHECK(memcmp(a, b, N * sizeof *a) != 0);
    /* Every state has exactly K distinct successors, used about equally often, so the
     * empirical conditional entropy is close to ln K. */
    static unsigned count[V][V];
    memset(count, 0, sizeof count);
    for (size_t t = 0; t + 1 < N; t++) count[a[t]][a[t + 1]]++;
    double h = 0, total = N - 1;
    int bad = 0;
    for (int x = 0; x < V; x++) {
        unsigned row = 0, distinct = 0;
        for (int y = 0; y < V; y++) {
            row += count[x][y];
            distinct += count[x][y] > 0;
        }
        if (distinct != K) bad++;
        for (int y = 0; y < V; y++)
            if (count[x][y]) h -= count[x][y] / total * log((double)count[x][y] / row);
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_CLOSE(h, gt_local_synthetic_entropy_rate(K), 0.01, 0);
    CHECK_CLOSE(gt_local_synthetic_entropy_rate(4), 1.3862943611198906, 1e-12, 0);
    CHECK_EQ_INT(gt_local_synthetic_generate(V, V + 1, 7, 10, a), GT_ERR_INVALID);
    CHECK_EQ_INT(gt_local_synthetic_generate(V, 0, 7, 10, a), GT_ERR_INVALID);
    free(a);
    free(b);
}

/* Two shards of distinct token values (token = position mod 60000 in a global numbering), so
 * every window is identified by its first token. */
static void write_shards(size_t n1, size_t n2)
{
    uint16_t *t = malloc((n1 + n2) * sizeof *t);
    for (size_t i = 0; i < n1 + n2; i++) t[i] = (uint16_t)i;
    char p[600];
    snprintf(p, sizeof p, "%s/shard_000.bin", dir);
    CHECK_EQ_INT(gt_local_shard_write(p, t, n1), GT_OK);
    snprintf(p, sizeof p, "%s/shard_001.bin", dir);
    CHECK_EQ_INT(gt_local_shard_write(p, t + n1, n2), GT_OK);
    free(t);
}

static void test_shares(void)
{
    enum { B = 2, T = 8, BT = B * T, W = 3 };
    const size_t n1 = 1000, n2 = 700; /* 62 + 43 = 105 windows, 35 per worker */
    write_shards(n1, n2);
    char glob[600];
    snprintf(glob, sizeof glob, "%s/shard_*.bin", dir);
    static unsigned seen[2000];
    memset(seen, 0, sizeof seen);
    int32_t in[BT], tg[BT], shift_bad = 0, boundary_bad = 0;
    for (uint32_t w = 0; w < W; w++) {
        gt_local_data_params_t p = GT_LOCAL_DATA_PARAMS_INIT;
        p.kind = GT_DATA_SHARDS;
        p.path = glob;
        p.vocab_size = 65536;
        p.seed = 1;
        p.batch_size = B;
        p.seq_len = T;
        p.worker = w;
        p.workers = W;
        gt_local_data_t *d = NULL;
        CHECK_EQ_INT(gt_local_data_create(&p, &d), GT_OK);
        if (!d) return;
        CHECK_EQ_INT(gt_local_data_tokens(d), n1 + n2);
        CHECK_EQ_INT(gt_local_data_batches_per_epoch(d), 35);
        for (int i = 0; i < 35; i++) {
            CHECK_EQ_INT(gt_local_data_next(d, in, tg), GT_OK);
            seen[in[0]]++;
            for (int k = 0; k < BT; k++) {
                if (tg[k] != in[k] + 1) shift_bad++;
                /* a window never straddles the two files: inputs and targets in one shard */
                if ((in[0] < (int)n1) != (tg[BT - 1] < (int)n1)) boundary_bad++;
            }
        }
        gt_local_data_destroy(d);
    }
    CHECK_EQ_INT(shift_bad, 0);
    CHECK_EQ_INT(boundary_bad, 0);
    int distinct = 0, dup = 0;
    for (int i = 0; i < 2000; i++) {
        distinct += seen[i] > 0;
        dup += seen[i] > 1;
    }
    CHECK_EQ_INT(distinct, 105); /* all windows, each by one worker once */
    CHECK_EQ_INT(dup, 0);
}

static gt_local_data_t *open_synth(uint64_t seed, uint32_t worker)
{
    gt_local_data_params_t p = GT_LOCAL_DATA_PARAMS_INIT;
    p.kind = GT_DATA_SYNTHETIC;
    p.vocab_size = 64;
    p.synthetic_branching = 4;
    p.synthetic_tokens = 5000;
    p.seed = seed;
    p.batch_size = 4;
    p.seq_len = 16;
    p.worker = worker;
    p.workers = 2;
    gt_local_data_t *d = NULL;
    CHECK_EQ_INT(gt_local_data_create(&p, &d), GT_OK);
    return d;
}

static void test_position(void)
{
    enum { BT = 64 };
    int32_t in[BT], tg[BT], in2[BT], tg2[BT];
    gt_local_data_t *a = open_synth(5, 1), *b = open_synth(5, 1);
    if (!a || !b) return;
    size_t per = gt_local_data_batches_per_epoch(a); /* 78 windows / 2 workers = 39 */
    CHECK_EQ_INT(per, 39);
    for (size_t i = 0; i < per + 5; i++) CHECK_EQ_INT(gt_local_data_next(a, in, tg), GT_OK);
    gt_local_data_pos_t pos;
    gt_local_data_get_pos(a, &pos);
    CHECK_EQ_INT(pos.epoch, 1);
    CHECK_EQ_INT(pos.index, 5);
    CHECK_EQ_INT(gt_local_data_set_pos(b, &pos), GT_OK);
    int diff = 0;
    for (size_t i = 0; i < 2 * per; i++) { /* across the next epoch boundary too */
        CHECK_EQ_INT(gt_local_data_next(a, in, tg), GT_OK);
        CHECK_EQ_INT(gt_local_data_next(b, in2, tg2), GT_OK);
        diff += memcmp(in, in2, sizeof in) != 0 || memcmp(tg, tg2, sizeof tg) != 0;
    }
    CHECK_EQ_INT(diff, 0);
    pos.index = per + 1;
    CHECK_EQ_INT(gt_local_data_set_pos(b, &pos), GT_ERR_INVALID);
    gt_local_data_destroy(a);
    gt_local_data_destroy(b);
    /* Epochs are shuffled: the first batches of epoch 0 and 1 differ in order. */
    gt_local_data_t *c = open_synth(5, 0);
    int32_t first0[BT];
    CHECK_EQ_INT(gt_local_data_next(c, first0, tg), GT_OK);
    for (size_t i = 1; i < per; i++) CHECK_EQ_INT(gt_local_data_next(c, in, tg), GT_OK);
    int same = 1;
    for (int r = 0; r < 3 && same; r++) { /* three epochs all starting alike: not shuffled */
        CHECK_EQ_INT(gt_local_data_next(c, in, tg), GT_OK);
        same = memcmp(in, first0, sizeof in) == 0;
        for (size_t i = 1; i < per; i++) CHECK_EQ_INT(gt_local_data_next(c, in, tg), GT_OK);
    }
    CHECK(!same);
    gt_local_data_destroy(c);
}

static gt_status_t open_shard_file(const char *name, uint32_t vocab)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    gt_local_data_params_t dp = GT_LOCAL_DATA_PARAMS_INIT;
    dp.kind = GT_DATA_SHARDS;
    dp.path = p;
    dp.vocab_size = vocab;
    dp.batch_size = 1;
    dp.seq_len = 4;
    gt_local_data_t *d = NULL;
    gt_status_t st = gt_local_data_create(&dp, &d);
    for (size_t i = 0; st == GT_OK && i < gt_local_data_batches_per_epoch(d); i++) {
        int32_t in[4], tg[4];
        st = gt_local_data_next(d, in, tg);
    }
    gt_local_data_destroy(d);
    return st;
}

static void write_bad(const char *name, int32_t magic, int32_t version, int32_t count, size_t ntok,
                      size_t header_ints)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    int32_t h[256] = {magic, version, count};
    fwrite(h, sizeof(int32_t), header_ints, f);
    for (size_t i = 0; i < ntok; i++) {
        uint16_t t = (uint16_t)(i % 50);
        fwrite(&t, 2, 1, f);
    }
    fclose(f);
}

static void test_hostile_shards(void)
{
    write_bad("good.bin", 20240520, 1, 20, 20, 256);
    CHECK_EQ_INT(open_shard_file("good.bin", 50), GT_OK);
    write_bad("magic.bin", 20240521, 1, 20, 20, 256);
    CHECK_EQ_INT(open_shard_file("magic.bin", 50), GT_ERR_CORRUPT);
    write_bad("version.bin", 20240520, 2, 20, 20, 256);
    CHECK_EQ_INT(open_shard_file("version.bin", 50), GT_ERR_CORRUPT);
    write_bad("short_header.bin", 20240520, 1, 20, 0, 100);
    CHECK_EQ_INT(open_shard_file("short_header.bin", 50), GT_ERR_CORRUPT);
    write_bad("empty.bin", 0, 0, 0, 0, 0); /* found by fuzz_local */
    CHECK_EQ_INT(open_shard_file("empty.bin", 50), GT_ERR_CORRUPT);
    write_bad("beyond.bin", 20240520, 1, 1000000, 20, 256);
    CHECK_EQ_INT(open_shard_file("beyond.bin", 50), GT_ERR_CORRUPT);
    write_bad("negative.bin", 20240520, 1, -5, 20, 256);
    CHECK_EQ_INT(open_shard_file("negative.bin", 50), GT_ERR_CORRUPT);
    /* tokens up to 49 with a vocabulary of 10: the batch read reports it */
    CHECK_EQ_INT(open_shard_file("good.bin", 10), GT_ERR_CORRUPT);
    CHECK_EQ_INT(open_shard_file("nothing-*.bin", 50), GT_ERR_NOT_FOUND);
    /* too few windows for the workers */
    write_bad("small.bin", 20240520, 1, 3, 3, 256);
    CHECK_EQ_INT(open_shard_file("small.bin", 50), GT_ERR_INVALID);
    int32_t out[8];
    char p[600];
    snprintf(p, sizeof p, "%s/good.bin", dir);
    CHECK_EQ_INT(gt_local_shard_read_prefix(p, 8, out), GT_OK);
    CHECK_EQ_INT(out[7], 7);
    CHECK_EQ_INT(gt_local_shard_read_prefix(p, 21, out), GT_ERR_INVALID);
}

static void test_text(void)
{
    char p[600];
    snprintf(p, sizeof p, "%s/a.txt", dir);
    gt_test_write_file(p, "hello world, hello world, hello world!\n");
    snprintf(p, sizeof p, "%s/{a,b}.txt", dir);
    char b[600];
    snprintf(b, sizeof b, "%s/b.txt", dir);
    gt_test_write_file(b, "\xff\xfe bytes above 127 are tokens too");
    gt_local_data_params_t dp = GT_LOCAL_DATA_PARAMS_INIT;
    dp.kind = GT_DATA_TEXT;
    dp.path = p;
    dp.batch_size = 1;
    dp.seq_len = 8;
    gt_local_data_t *d = NULL;
    CHECK_EQ_INT(gt_local_data_create(&dp, &d), GT_OK);
    if (!d) return;
    CHECK_EQ_INT(gt_local_data_tokens(d), 39 + 33);
    CHECK_EQ_INT(gt_local_data_batches_per_epoch(d), 4 + 4);
    int32_t in[8], tg[8];
    int high = 0;
    for (int i = 0; i < 8; i++) {
        CHECK_EQ_INT(gt_local_data_next(d, in, tg), GT_OK);
        for (int k = 0; k < 8; k++) high += in[k] >= 128;
    }
    CHECK_EQ_INT(high, 2);
    gt_local_data_destroy(d);
    dp.vocab_size = 100;
    CHECK_EQ_INT(gt_local_data_create(&dp, &d), GT_ERR_INVALID);
}

int main(void)
{
    char *t = gt_test_tmpdir();
    snprintf(dir, sizeof dir, "%s", t);
    test_synthetic();
    test_shares();
    test_position();
    test_hostile_shards();
    test_text();
    gt_test_rmtree(t);
    free(t);
    return GT_TEST_DONE();
}
