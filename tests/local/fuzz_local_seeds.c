/* fuzz_local_seeds.c — writes a seed corpus for fuzz_local into DIR: valid safetensors files
 * (F32 with metadata, a scalar) and valid llm.c token shards. Usage: fuzz_local_seeds DIR */
#include "gt_local.h"

#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_local_seeds DIR\n");
        return 2;
    }
    char p[1024];
    float v[12];
    for (int i = 0; i < 12; i++) v[i] = (float)i * 0.25f - 1.0f;
    gt_local_st_entry_t e[3] = {
        {"loss", v, 0, {0}}, {"wte.weight", v, 2, {3, 4}}, {"h.0.ln_1.bias", v + 4, 1, {8}}};
    const char *mk[] = {"format"}, *mv[] = {"pt"};
    int bad = 0;
    snprintf(p, sizeof p, "%s/seed-st-3", argv[1]);
    bad |= gt_local_st_write(p, e, 3, mk, mv, 1) != GT_OK;
    snprintf(p, sizeof p, "%s/seed-st-1", argv[1]);
    bad |= gt_local_st_write(p, e + 1, 1, NULL, NULL, 0) != GT_OK;
    uint16_t tok[40];
    for (int i = 0; i < 40; i++) tok[i] = (uint16_t)(i * 37 % 1000);
    snprintf(p, sizeof p, "%s/seed-shard-40", argv[1]);
    bad |= gt_local_shard_write(p, tok, 40) != GT_OK;
    snprintf(p, sizeof p, "%s/seed-shard-9", argv[1]);
    bad |= gt_local_shard_write(p, tok, 9) != GT_OK;
    return bad;
}
