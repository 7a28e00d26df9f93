/* test_trainer.c — the inner loop's reproducibility and checkpoints: same seed → the same
 * loss bits; N straight steps = N/2 + save + resume + N/2, bit for bit (losses, parameters,
 * AdamW moments); a checkpoint's model.safetensors holds exactly the parameters; a resume
 * under changed settings is refused; a damaged checkpoint (flipped byte, NaN, torn or
 * truncated file) is caught and the previous one used; initialisation files are validated by name
 * and shape, and Hugging Face's extra buffers and "transformer." prefix are accepted. */
#include "gt_local.h"
#include "gt_test.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

static char dir[512];

static const char *yaml_fmt = "run: {name: t, seed: %d, rounds: 4, checkpoint_every: 1}\n"
                              "model: {preset: tiny, vocab_size: 64, d_model: 32, n_layer: 1,"
                              " seq_len: 16}\n"
                              "data: {kind: synthetic, synthetic_branching: 4,"
                              " synthetic_tokens: 20000}\n"
                              "inner: {steps: 5, lr: %s, warmup_steps: 3, grad_clip: 1.0}\n"
                              "sites: [{name: solo, address: \"127.0.0.1:47001\"}]\n";

static gt_topo_config_t *load_cfg(int seed, const char *lr)
{
    char text[1024];
    snprintf(text, sizeof text, yaml_fmt, seed, lr);
    gt_topo_config_t *cfg = NULL;
    gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;
    lp.use_env = 0;
    CHECK_EQ_INT(gt_topo_load_string(text, strlen(text), "test.yaml", &lp, &cfg), GT_OK);
    return cfg;
}

static gt_local_trainer_t *make(const gt_topo_config_t *cfg)
{
    gt_local_trainer_params_t p = GT_LOCAL_TRAINER_PARAMS_INIT;
    p.cfg = cfg;
    gt_local_trainer_t *tr = NULL;
    CHECK_EQ_INT(gt_local_trainer_create(&p, &tr), GT_OK);
    return tr;
}

static size_t arena_len(gt_local_trainer_t *tr)
{
    return gt_gpt_arena_len(&gt_gpt_get_params(gt_local_trainer_model(tr))->model);
}

static int same_arena(gt_local_trainer_t *a, gt_local_trainer_t *b, gt_gpt_arena_t which)
{
    return memcmp(gt_gpt_arena(gt_local_trainer_model(a), which),
                  gt_gpt_arena(gt_local_trainer_model(b), which),
                  arena_len(a) * sizeof(float)) == 0;
}

static void run_steps(gt_local_trainer_t *tr, int n, float *losses)
{
    gt_local_step_stats_t st;
    for (int i = 0; i < n; i++) {
        CHECK_EQ_INT(gt_local_trainer_step(tr, &st), GT_OK);
        if (losses) losses[i] = st.loss;
    }
}

/* Flips one byte of a file at `off` (negative: from the end), or truncates it to `keep`. */
static void damage(const char *path, long off, long keep)
{
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL);
    if (!f) return;
    if (keep >= 0) {
        CHECK(ftruncate(fileno(f), keep) == 0);
    } else {
        CHECK(fseek(f, off, off < 0 ? SEEK_END : SEEK_SET) == 0);
        int c = fgetc(f);
        CHECK(fseek(f, -1, SEEK_CUR) == 0);
        fputc(c ^ 0x10, f);
    }
    fclose(f);
}

/* What can happen to a checkpoint after it was written — a flipped byte in tensor data, a torn
 * state.json, a truncated file — is caught before anything is loaded, and resume falls back to
 * the previous checkpoint; with none intact it fails (GT_ERR_CORRUPT), never training on wrong
 * weights. root holds step 10 (= `at10`'s state) and step 20. */
static void test_corrupt_checkpoints(const gt_topo_config_t *cfg, const char *root,
                                     gt_local_trainer_t *at10)
{
    char p[800], cmd[2048];
    /* state.json edited by hand (one digit of its token count): its own checksum catches it,
     * and resume falls back to step 10; then put back. */
    snprintf(cmd, sizeof cmd, "cp %s/step-00000020/state.json %s/state.keep", root, root);
    CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof cmd,
             "sed -i 's/\\(\"tokens\": *\\)\\([0-9]\\)/\\19\\2/' %s/step-00000020/state.json",
             root);
    CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof cmd, "! cmp -s %s/step-00000020/state.json %s/state.keep", root, root);
    CHECK_MSG(system(cmd) == 0, "the edit of state.json did not change it");
    gt_local_trainer_t *e = make(cfg);
    CHECK_EQ_INT(gt_local_trainer_resume(e, root), GT_OK);
    CHECK_EQ_INT(gt_local_trainer_steps_done(e), 10);
    gt_local_trainer_destroy(e);
    snprintf(cmd, sizeof cmd, "mv %s/state.keep %s/step-00000020/state.json", root, root);
    CHECK(system(cmd) == 0);
    /* A folder copied to a larger step's name: it would be the newest; its state says step 10,
     * so it is refused and step 20 is taken. */
    snprintf(cmd, sizeof cmd, "cp -r %s/step-00000010 %s/step-99999999", root, root);
    CHECK(system(cmd) == 0);
    e = make(cfg);
    CHECK_EQ_INT(gt_local_trainer_resume(e, root), GT_OK);
    CHECK_EQ_INT(gt_local_trainer_steps_done(e), 20);
    gt_local_trainer_destroy(e);
    snprintf(cmd, sizeof cmd, "rm -r %s/step-99999999", root);
    CHECK(system(cmd) == 0);

    /* A byte flipped well inside the newest model.safetensors' data (its last byte). */
    snprintf(p, sizeof p, "%s/step-00000020/model.safetensors", root);
    damage(p, -1, -1);
    e = make(cfg);
    CHECK_EQ_INT(gt_local_trainer_resume(e, root), GT_OK);
    CHECK_EQ_INT(gt_local_trainer_steps_done(e), 10);
    CHECK(same_arena(at10, e, GT_GPT_PARAMS));
    CHECK(same_arena(at10, e, GT_GPT_ADAM_V));
    gt_local_trainer_destroy(e);

    /* A NaN in a tensor file whose checksum was recomputed (a diverged or tampered state that
     * passes the checksum) is still refused by name: copy step 10 as step 30 and write NaN. */
    snprintf(cmd, sizeof cmd, "cp -r %s/step-00000010 %s/step-00000030", root, root);
    CHECK(system(cmd) == 0);
    snprintf(p, sizeof p, "%s/step-00000030/model.safetensors", root);
    gt_local_st_t *st = NULL;
    CHECK_EQ_INT(gt_local_st_open(p, &st), GT_OK);
    size_t n_tensors = st ? gt_local_st_count(st) : 0;
    gt_local_st_close(st);
    CHECK(n_tensors > 0);
    FILE *f = fopen(p, "r+b");
    CHECK(f != NULL);
    if (f) {
        const float nan = NAN;
        CHECK(fseek(f, -4, SEEK_END) == 0); /* the last float of the last tensor */
        fwrite(&nan, sizeof nan, 1, f);
        fclose(f);
    }
    gt_local_trainer_t *g = make(cfg);
    CHECK_EQ_INT(gt_local_trainer_init_from(g, p), GT_ERR_CORRUPT);
    gt_local_trainer_destroy(g);

    /* A torn state.json: skipped too. */
    snprintf(p, sizeof p, "%s/step-00000030/state.json", root);
    gt_test_write_file(p, "{\"format\": \"geotrain-checkpoint\", \"step\": ");
    e = make(cfg);
    CHECK_EQ_INT(gt_local_trainer_resume(e, root), GT_OK);
    CHECK_EQ_INT(gt_local_trainer_steps_done(e), 10);
    gt_local_trainer_destroy(e);

    /* The older one truncated as well: nothing intact is left, and resume says so. */
    snprintf(p, sizeof p, "%s/step-00000010/optimizer.safetensors", root);
    damage(p, 0, 100);
    e = make(cfg);
    CHECK_EQ_INT(gt_local_trainer_resume(e, root), GT_ERR_CORRUPT);
    gt_local_trainer_destroy(e);
}

static void test_determinism_and_resume(void)
{
    enum { N = 20 };
    gt_topo_config_t *cfg = load_cfg(3, "3e-3");
    if (!cfg) return;
    gt_local_trainer_t *a = make(cfg), *b = make(cfg);
    if (!a || !b) return;
    CHECK_EQ_INT(gt_local_trainer_total_steps(a), 20);
    float la[N], lb[N];
    run_steps(a, N, la);
    run_steps(b, N / 2, lb);
    CHECK(memcmp(la, lb, sizeof(float) * N / 2) == 0); /* same seed, same bits */
    CHECK(la[N - 1] < la[0]);                          /* it learns */

    char root[600];
    snprintf(root, sizeof root, "%s/ckpt", dir);
    CHECK_EQ_INT(gt_local_trainer_save(b, root, 2), GT_OK);
    gt_local_trainer_t *c = make(cfg);
    CHECK_EQ_INT(gt_local_trainer_resume(c, root), GT_OK);
    CHECK_EQ_INT(gt_local_trainer_steps_done(c), N / 2);
    CHECK(same_arena(b, c, GT_GPT_PARAMS));
    CHECK(same_arena(b, c, GT_GPT_ADAM_M));
    CHECK(same_arena(b, c, GT_GPT_ADAM_V));
    run_steps(c, N / 2, lb + N / 2);
    CHECK(memcmp(la, lb, sizeof la) == 0); /* straight == half + resume + half */
    CHECK(same_arena(a, c, GT_GPT_PARAMS));
    CHECK(same_arena(a, c, GT_GPT_ADAM_M));
    CHECK(same_arena(a, c, GT_GPT_ADAM_V));
    CHECK_EQ_INT(gt_local_trainer_steps_done(c), N);

    /* More checkpoints: only the newest two are kept; latest is the highest step. */
    CHECK_EQ_INT(gt_local_trainer_save(c, root, 2), GT_OK);
    CHECK_EQ_INT(gt_local_trainer_save(a, root, 2), GT_OK); /* same step: kept as is */
    char latest[700], p[800];
    CHECK_EQ_INT(gt_local_ckpt_latest(root, latest, sizeof latest), GT_OK);
    CHECK_STR_CONTAINS(latest, "step-00000020");
    snprintf(p, sizeof p, "%s/step-00000010/state.json", root);
    CHECK(access(p, F_OK) == 0);

    /* The checkpoint's model.safetensors is the parameters under HF names. */
    snprintf(p, sizeof p, "%s/model.safetensors", latest);
    gt_local_st_t *st = NULL;
    CHECK_EQ_INT(gt_local_st_open(p, &st), GT_OK);
    if (st) {
        const gt_gpt_config_t *mc = &gt_gpt_get_params(gt_local_trainer_model(a))->model;
        CHECK_EQ_INT(gt_local_st_count(st), gt_gpt_tensor_count(mc));
        size_t idx;
        CHECK_EQ_INT(gt_local_st_find(st, "h.0.attn.c_attn.weight", &idx), GT_OK);
        gt_local_st_info_t info;
        gt_local_st_info(st, idx, &info);
        CHECK_EQ_INT(info.shape[0], 32);
        CHECK_EQ_INT(info.shape[1], 96);
        float *buf = malloc(info.numel * sizeof *buf);
        CHECK_EQ_INT(gt_local_st_read_f32(st, idx, buf, info.numel), GT_OK);
        gt_gpt_tensor_t t;
        CHECK_EQ_INT(gt_gpt_tensor_find(mc, "h.0.attn.c_attn.weight", &t), GT_OK);
        CHECK(memcmp(buf, gt_gpt_arena(gt_local_trainer_model(a), GT_GPT_PARAMS) + t.offset,
                     t.numel * sizeof(float)) == 0);
        free(buf);
        gt_gpt_config_t inferred;
        CHECK_EQ_INT(gt_local_gpt_config_from_st(st, 4, &inferred), GT_OK);
        CHECK_EQ_INT(inferred.V, 64);
        CHECK_EQ_INT(inferred.C, 32);
        CHECK_EQ_INT(inferred.L, 1);
        CHECK_EQ_INT(inferred.maxT, 32);
        gt_local_st_close(st);
    }

    /* Different settings: refused, with the reason. */
    gt_topo_config_t *cfg2 = load_cfg(3, "1e-3");
    gt_local_trainer_t *d = make(cfg2);
    CHECK_EQ_INT(gt_local_trainer_resume(d, root), GT_ERR_CONFIG);
    snprintf(p, sizeof p, "%s/empty", dir);
    CHECK_EQ_INT(gt_local_trainer_resume(d, p), GT_ERR_NOT_FOUND);
    gt_local_trainer_destroy(d);
    gt_topo_destroy(cfg2);

    test_corrupt_checkpoints(cfg, root, b);

    gt_local_trainer_destroy(a);
    gt_local_trainer_destroy(b);
    gt_local_trainer_destroy(c);
    gt_topo_destroy(cfg);
}

/* Initialisation files: HF extras accepted, wrong or missing tensors named. */
static void test_init_files(void)
{
    gt_topo_config_t *cfg = load_cfg(5, "3e-3");
    gt_local_trainer_t *src = make(cfg), *dst = make(cfg);
    if (!src || !dst) return;
    run_steps(src, 2, NULL); /* parameters that differ from dst's fresh ones */
    gt_gpt_t *g = gt_local_trainer_model(src);
    const gt_gpt_config_t *mc = &gt_gpt_get_params(g)->model;
    const float *arena = gt_gpt_arena(g, GT_GPT_PARAMS);
    size_t nt = gt_gpt_tensor_count(mc);
    gt_local_st_entry_t *e = calloc(nt + 3, sizeof *e);
    char(*names)[96] = calloc(nt + 3, sizeof *names);
    static float mask[32 * 32], lm[64 * 32];
    size_t n = 0;
    for (size_t k = 0; k < nt; k++) {
        gt_gpt_tensor_t t;
        CHECK_EQ_INT(gt_gpt_tensor_get(mc, k, &t), GT_OK);
        snprintf(names[n], sizeof names[n], "transformer.%s", t.name);
        e[n] = (gt_local_st_entry_t){
            names[n], arena + t.offset, (size_t)t.ndim, {t.shape[0], t.shape[1]}};
        n++;
    }
    e[n++] = (gt_local_st_entry_t){"transformer.h.0.attn.bias", mask, 4, {1, 1, 32, 32}};
    e[n++] = (gt_local_st_entry_t){"lm_head.weight", lm, 2, {64, 32}};
    char p[600];
    snprintf(p, sizeof p, "%s/hf.safetensors", dir);
    CHECK_EQ_INT(gt_local_st_write(p, e, n, NULL, NULL, 0), GT_OK);
    CHECK_EQ_INT(gt_local_trainer_init_from(dst, p), GT_OK);
    CHECK(same_arena(src, dst, GT_GPT_PARAMS));

    /* An unknown tensor, a wrong shape, a missing one: each refused. */
    e[n] = (gt_local_st_entry_t){"h.7.mlp.c_fc.weight", lm, 2, {64, 32}};
    CHECK_EQ_INT(gt_local_st_write(p, e, n + 1, NULL, NULL, 0), GT_OK);
    CHECK_EQ_INT(gt_local_trainer_init_from(dst, p), GT_ERR_INVALID);
    gt_local_st_entry_t saved = e[0]; /* wte.weight (64, 32) */
    e[0].shape[0] = 32;
    CHECK_EQ_INT(gt_local_st_write(p, e, n, NULL, NULL, 0), GT_OK);
    CHECK_EQ_INT(gt_local_trainer_init_from(dst, p), GT_ERR_INVALID);
    e[0] = saved;
    CHECK_EQ_INT(gt_local_st_write(p, e + 1, n - 1, NULL, NULL, 0), GT_OK);
    CHECK_EQ_INT(gt_local_trainer_init_from(dst, p), GT_ERR_INVALID);
    /* Given twice, with and without the prefix. */
    e[n] = (gt_local_st_entry_t){"wte.weight", saved.data, 2, {64, 32}};
    CHECK_EQ_INT(gt_local_st_write(p, e, n + 1, NULL, NULL, 0), GT_OK);
    CHECK_EQ_INT(gt_local_trainer_init_from(dst, p), GT_ERR_INVALID);
    /* Only before the first step. */
    run_steps(dst, 1, NULL);
    CHECK_EQ_INT(gt_local_trainer_init_from(dst, p), GT_ERR_INVALID);
    free(e);
    free(names);
    gt_local_trainer_destroy(src);
    gt_local_trainer_destroy(dst);
    gt_topo_destroy(cfg);
}

static void test_metrics(void)
{
    char p[600];
    snprintf(p, sizeof p, "%s/metrics.jsonl", dir);
    gt_local_metrics_t *m = NULL;
    CHECK_EQ_INT(gt_local_metrics_open(p, 0, &m), GT_OK);
    for (uint64_t s = 1; s <= 6; s++) {
        gt_local_step_stats_t st = {s, 2.5f, 1e-3f, 0.5f, s * 100, 0.1 * (double)s};
        if (s == 6) st.loss = NAN;
        CHECK_EQ_INT(gt_local_metrics_write(m, &st, 1000.0), GT_OK);
    }
    gt_local_metrics_close(m);
    CHECK_EQ_INT(gt_local_metrics_open(p, 4, &m), GT_OK); /* a resume from step 4 */
    gt_local_metrics_close(m);
    FILE *f = fopen(p, "r");
    char line[512];
    int lines = 0;
    while (fgets(line, sizeof line, f)) {
        lines++;
        if (lines == 4) CHECK_STR_CONTAINS(line, "\"step\":4,");
    }
    fclose(f);
    CHECK_EQ_INT(lines, 4);
}

int main(void)
{
    char *t = gt_test_tmpdir();
    snprintf(dir, sizeof dir, "%s", t);
    test_determinism_and_resume();
    test_init_files();
    test_metrics();
    gt_test_rmtree(t);
    free(t);
    return GT_TEST_DONE();
}
