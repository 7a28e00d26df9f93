/* fuzz_local.c — libFuzzer target for the two file formats local/ reads from outside: a
 * safetensors file and an llm.c token shard. Each input is written to a file (the readers
 * take paths) and opened both ways. Whatever the bytes, the readers must return a status
 * and never read or write out of bounds (run under ASan/UBSan); what they accept must read
 * back the same twice (determinism).
 *
 * Built with -DGT_FUZZ=ON and clang; `fuzz_local_smoke` (label fuzz) runs it briefly.
 */
#include "gt_local.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static char path[256];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    snprintf(path, sizeof path, "%s/geotrain-fuzz-local-%ld.bin",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (long)getpid());
    return 0;
}

static void check_safetensors(void)
{
    gt_local_st_t *st = NULL;
    if (gt_local_st_open(path, &st) != GT_OK) return;
    for (size_t i = 0; i < gt_local_st_count(st); i++) {
        gt_local_st_info_t info;
        gt_local_st_info(st, i, &info);
        if (info.dtype == GT_LOCAL_ST_OTHER || info.numel > ((size_t)1 << 20)) continue;
        float *a = malloc((info.numel ? info.numel : 1) * sizeof *a);
        float *b = malloc((info.numel ? info.numel : 1) * sizeof *b);
        if (a && b && gt_local_st_read_f32(st, i, a, info.numel) == GT_OK) {
            if (gt_local_st_read_f32(st, i, b, info.numel) != GT_OK ||
                memcmp(a, b, info.numel * sizeof *a) != 0)
                abort(); /* the same bytes must read back the same */
        }
        free(a);
        free(b);
        size_t idx;
        if (gt_local_st_find(st, info.name, &idx) != GT_OK) abort();
    }
    (void)gt_local_st_metadata(st, "format");
    gt_local_st_close(st);
}

static void check_shard(void)
{
    int32_t tok[17];
    (void)gt_local_shard_read_prefix(path, 17, tok);
    gt_local_data_params_t p = GT_LOCAL_DATA_PARAMS_INIT;
    p.kind = GT_DATA_SHARDS;
    p.path = path;
    p.vocab_size = 1000;
    p.batch_size = 2;
    p.seq_len = 4;
    gt_local_data_t *d = NULL;
    if (gt_local_data_create(&p, &d) != GT_OK) return;
    int32_t in[8], tg[8];
    for (int i = 0; i < 4; i++)
        if (gt_local_data_next(d, in, tg) != GT_OK) break;
    gt_local_data_destroy(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    if (size && fwrite(data, 1, size, f) != size) {
        fclose(f);
        return 0;
    }
    fclose(f);
    check_safetensors();
    check_shard();
    return 0;
}
