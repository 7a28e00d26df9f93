/* test_safetensors.c — safetensors round trip, BF16/F16 reading, hostile files rejected,
 * atomic replacement leaves no temporary files. */
#include "gt_local.h"
#include "gt_test.h"

#include <dirent.h>
#include <stdint.h>

static char dir[512];

static void path_in(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", dir, name);
}

/* Writes a raw safetensors file: header JSON text, then `data`. */
static void write_raw(const char *name, const char *json, const void *data, size_t len,
                      uint64_t hlen_override)
{
    char p[600];
    path_in(p, sizeof p, name);
    FILE *f = fopen(p, "wb");
    uint64_t hlen = hlen_override ? hlen_override : strlen(json);
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(hlen >> (8 * i));
    fwrite(b, 1, 8, f);
    fwrite(json, 1, strlen(json), f);
    if (len) fwrite(data, 1, len, f);
    fclose(f);
}

static gt_status_t open_named(const char *name)
{
    char p[600];
    path_in(p, sizeof p, name);
    gt_local_st_t *st = NULL;
    gt_status_t s = gt_local_st_open(p, &st);
    gt_local_st_close(st);
    return s;
}

static void test_round_trip(void)
{
    float scalar = 3.25f, vec[5] = {1, -2, 3.5f, 1e-30f, -0.0f}, mat[6];
    for (int i = 0; i < 6; i++) mat[i] = (float)i / 7.0f;
    gt_local_st_entry_t e[3] = {
        {"loss", &scalar, 0, {0}}, {"h.0.ln_1.bias", vec, 1, {5}}, {"wte.weight", mat, 2, {2, 3}}};
    const char *mk[] = {"format", "step"}, *mv[] = {"pt", "42"};
    char p[600];
    path_in(p, sizeof p, "a.safetensors");
    CHECK_EQ_INT(gt_local_st_write(p, e, 3, mk, mv, 2), GT_OK);
    /* Overwrite once more: the atomic replacement must work over an existing file. */
    CHECK_EQ_INT(gt_local_st_write(p, e, 3, mk, mv, 2), GT_OK);
    gt_local_st_t *st = NULL;
    CHECK_EQ_INT(gt_local_st_open(p, &st), GT_OK);
    if (!st) return;
    CHECK_EQ_INT(gt_local_st_count(st), 3);
    CHECK(gt_local_st_metadata(st, "step") && strcmp(gt_local_st_metadata(st, "step"), "42") == 0);
    CHECK(gt_local_st_metadata(st, "nope") == NULL);
    size_t idx;
    CHECK_EQ_INT(gt_local_st_find(st, "wte.weight", &idx), GT_OK);
    gt_local_st_info_t info;
    gt_local_st_info(st, idx, &info);
    CHECK_EQ_INT(info.ndim, 2);
    CHECK_EQ_INT(info.shape[0], 2);
    CHECK_EQ_INT(info.shape[1], 3);
    CHECK_EQ_INT(info.numel, 6);
    CHECK_EQ_INT(info.dtype, GT_LOCAL_ST_F32);
    float back[6];
    CHECK_EQ_INT(gt_local_st_read_f32(st, idx, back, 6), GT_OK);
    CHECK(memcmp(back, mat, sizeof mat) == 0);
    CHECK_EQ_INT(gt_local_st_read_f32(st, idx, back, 5), GT_ERR_INVALID);
    CHECK_EQ_INT(gt_local_st_find(st, "loss", &idx), GT_OK);
    gt_local_st_info(st, idx, &info);
    CHECK_EQ_INT(info.ndim, 0);
    CHECK_EQ_INT(info.numel, 1);
    CHECK_EQ_INT(gt_local_st_read_f32(st, idx, back, 1), GT_OK);
    CHECK(back[0] == 3.25f);
    CHECK_EQ_INT(gt_local_st_find(st, "h.0.ln_1.bias", &idx), GT_OK);
    CHECK_EQ_INT(gt_local_st_read_f32(st, idx, back, 5), GT_OK);
    CHECK(memcmp(back, vec, sizeof vec) == 0);
    CHECK_EQ_INT(gt_local_st_find(st, "missing", &idx), GT_ERR_NOT_FOUND);
    gt_local_st_close(st);
    /* Header is padded to 8 bytes, so the data area is aligned. */
    FILE *f = fopen(p, "rb");
    uint8_t b[8];
    CHECK(fread(b, 1, 8, f) == 8);
    fclose(f);
    CHECK_EQ_INT(b[0] % 8, 0);
    /* Duplicate names are refused. */
    gt_local_st_entry_t dup[2] = {{"x", vec, 1, {5}}, {"x", vec, 1, {5}}};
    path_in(p, sizeof p, "dup.safetensors");
    CHECK_EQ_INT(gt_local_st_write(p, dup, 2, NULL, NULL, 0), GT_ERR_INVALID);
}

static void test_half_types(void)
{
    /* 1.0, -2.0, 0.5 in bf16; 1.0, -2.0, 2^-24 (subnormal) in f16. */
    uint16_t data[6] = {0x3f80, 0xc000, 0x3f00, 0x3c00, 0xc000, 0x0001};
    const char *json = "{\"b\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,6]},"
                       "\"h\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[6,12]},"
                       "\"i\":{\"dtype\":\"I64\",\"shape\":[0],\"data_offsets\":[12,12]}}";
    write_raw("half.safetensors", json, data, sizeof data, 0);
    char p[600];
    path_in(p, sizeof p, "half.safetensors");
    gt_local_st_t *st = NULL;
    CHECK_EQ_INT(gt_local_st_open(p, &st), GT_OK);
    if (!st) return;
    size_t idx;
    float v[3];
    CHECK_EQ_INT(gt_local_st_find(st, "b", &idx), GT_OK);
    CHECK_EQ_INT(gt_local_st_read_f32(st, idx, v, 3), GT_OK);
    CHECK(v[0] == 1.0f && v[1] == -2.0f && v[2] == 0.5f);
    CHECK_EQ_INT(gt_local_st_find(st, "h", &idx), GT_OK);
    CHECK_EQ_INT(gt_local_st_read_f32(st, idx, v, 3), GT_OK);
    CHECK(v[0] == 1.0f && v[1] == -2.0f && v[2] == ldexpf(1.0f, -24));
    CHECK_EQ_INT(gt_local_st_find(st, "i", &idx), GT_OK);
    CHECK_EQ_INT(gt_local_st_read_f32(st, idx, v, 0), GT_ERR_UNSUPPORTED);
    gt_local_st_close(st);
}

static void test_hostile(void)
{
    float d[4] = {0};
    const char *ok = "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}";
    write_raw("ok.st", ok, d, 16, 0);
    CHECK_EQ_INT(open_named("ok.st"), GT_OK);
    write_raw("trunc.st", ok, d, 12, 0); /* data area shorter than the offsets */
    CHECK_EQ_INT(open_named("trunc.st"), GT_ERR_CORRUPT);
    write_raw("hlen.st", ok, d, 16, 1ull << 40); /* header length beyond the file */
    CHECK_EQ_INT(open_named("hlen.st"), GT_ERR_CORRUPT);
    write_raw("json.st", "{\"a\":{\"dtype\":\"F32\",", d, 16, 0);
    CHECK_EQ_INT(open_named("json.st"), GT_ERR_CORRUPT);
    write_raw("shape.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[5],\"data_offsets\":[0,16]}}", d,
              16, 0);
    CHECK_EQ_INT(open_named("shape.st"), GT_ERR_CORRUPT);
    write_raw("neg.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-4],\"data_offsets\":[0,16]}}", d, 16,
              0);
    CHECK_EQ_INT(open_named("neg.st"), GT_ERR_CORRUPT);
    write_raw(
        "ovf.st",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,16]}}", d,
        16, 0);
    CHECK_EQ_INT(open_named("ovf.st"), GT_ERR_CORRUPT);
    write_raw("dtype.st", "{\"a\":{\"dtype\":\"Q7\",\"shape\":[4],\"data_offsets\":[0,16]}}", d, 16,
              0);
    CHECK_EQ_INT(open_named("dtype.st"), GT_ERR_CORRUPT);
    write_raw("overlap.st",
              "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
              d, 16, 0);
    CHECK_EQ_INT(open_named("overlap.st"), GT_ERR_CORRUPT);
    write_raw("dupkey.st",
              "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
              "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
              d, 16, 0);
    CHECK_EQ_INT(open_named("dupkey.st"), GT_ERR_CORRUPT);
    write_raw("meta.st", "{\"__metadata__\":{\"k\":3}}", d, 0, 0);
    CHECK_EQ_INT(open_named("meta.st"), GT_ERR_CORRUPT);
    write_raw("array.st", "[1,2]", d, 0, 0);
    CHECK_EQ_INT(open_named("array.st"), GT_ERR_CORRUPT);
    char p[600];
    path_in(p, sizeof p, "tiny.st");
    gt_test_write_file(p, "abc");
    CHECK_EQ_INT(open_named("tiny.st"), GT_ERR_CORRUPT);
    CHECK_EQ_INT(open_named("does-not-exist.st"), GT_ERR_NOT_FOUND);
}

static void test_no_temporaries(void)
{
    DIR *dp = opendir(dir);
    struct dirent *de;
    int tmp = 0;
    while ((de = readdir(dp)))
        if (strstr(de->d_name, ".tmp.")) tmp++;
    closedir(dp);
    CHECK_EQ_INT(tmp, 0);
    char p[600];
    path_in(p, sizeof p, "plain.txt");
    CHECK_EQ_INT(gt_write_file_atomic(p, "hello", 5, 0), GT_OK);
    CHECK_EQ_INT(gt_write_file_atomic(p, "bye", 3, 0), GT_OK);
    FILE *f = fopen(p, "r");
    char buf[16] = {0};
    CHECK(fread(buf, 1, sizeof buf - 1, f) == 3);
    fclose(f);
    CHECK(strcmp(buf, "bye") == 0);
    /* A file that is aborted leaves nothing behind and the old content stays. */
    gt_afile_t *af = NULL;
    CHECK_EQ_INT(gt_afile_open(p, 0644, 0, &af), GT_OK);
    CHECK_EQ_INT(gt_afile_write(af, "partial", 7), GT_OK);
    gt_afile_abort(af);
    f = fopen(p, "r");
    memset(buf, 0, sizeof buf);
    CHECK(fread(buf, 1, sizeof buf - 1, f) == 3);
    fclose(f);
    CHECK(strcmp(buf, "bye") == 0);
    snprintf(p, sizeof p, "%s/x/y/z", dir);
    CHECK_EQ_INT(gt_mkdirs(p), GT_OK);
    CHECK_EQ_INT(gt_mkdirs(p), GT_OK);
}

int main(void)
{
    char *t = gt_test_tmpdir();
    snprintf(dir, sizeof dir, "%s", t);
    test_round_trip();
    test_half_types();
    test_hostile();
    test_no_temporaries();
    gt_test_rmtree(t);
    free(t);
    return GT_TEST_DONE();
}
