/* consumer.c — a program outside the tree that uses the installed libgeotrain through
 * pkg-config (what a team with its own trainer does): encode and decode a vector. */
#include <stdio.h>
#include "gt_wan.h"
#include "gt_compress.h"
int main(void)
{
    gt_cmp_params_t p = GT_CMP_PARAMS_INIT;
    gt_cmp_ctx_t *c = NULL;
    if (gt_cmp_create(&p, &c) != GT_OK) return 1;
    float x[256], y[256];
    for (int i = 0; i < 256; i++) x[i] = (float)i / 256.0f;
    float r[256] = {0};
    unsigned char f[4096];
    size_t n = 0;
    if (gt_cmp_encode(c, x, 256, r, f, sizeof f, &n) != GT_OK) return 2;
    if (gt_cmp_decode(c, f, n, y, 256) != GT_OK) return 3;
    for (int i = 0; i < 256; i++)
        if (y[i] < x[i] - 0.01f || y[i] > x[i] + 0.01f) return 4; /* int8: within a quantum */
    printf("frame %zu bytes, y[100]=%g, status: %s\n", n, y[100], gt_status_str(GT_OK));
    gt_cmp_destroy(c);
    return 0;
}
