/* test_layout.c — properties of the lane/chunk layout over many shapes: lanes cover the
 * vector exactly once and in order, chunks tile their lane, boundaries are aligned (in a
 * smaller unit, or with empty lanes, for a vector too short for the lanes), sizes are
 * balanced, ownership is balanced within one chunk per site, ranks get lanes round-robin,
 * and the same parameters give the same layout. Bandwidth-aware shares (outer.chunk_split):
 * weighted chunks keep every one of those properties but balance, follow the shares within
 * two units a lane, give equal shares the equal split exactly, and gt_topo_chunk_shares gives
 * the shares worked out by hand for a few link sets. */
#include "gt_test.h"
#include "gt_topology.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void check_layout(size_t n, uint32_t lanes, uint32_t sites, uint32_t ranks, size_t align)
{
    gt_topo_layout_params_t p = GT_TOPO_LAYOUT_PARAMS_INIT;
    p.n_elems = n;
    p.n_lanes = lanes;
    p.n_sites = sites;
    p.ranks = ranks;
    p.align = align;
    gt_topo_layout_t *a = NULL, *b = NULL;
    /* Every shape is cut: a vector with fewer units than lanes in the largest unit that gives
     * every lane one (n / L), one with fewer elements than lanes in single elements. */
    if ((n + align - 1) / align < lanes) align = n / lanes ? n / lanes : 1;
    CHECK_EQ_INT(gt_topo_layout_create(&p, &a), GT_OK);
    if (!a) return;
    CHECK_EQ_INT(gt_topo_layout_create(&p, &b), GT_OK);

    /* Lanes: contiguous, in order, covering [0, n) exactly once. */
    size_t pos = 0, min_lane = (size_t)-1, max_lane = 0;
    size_t *owned = calloc(sites, sizeof *owned), *owned_chunks = calloc(sites, sizeof(size_t));
    for (uint32_t l = 0; l < a->n_lanes; l++) {
        const gt_topo_lane_t *lane = &a->lanes[l];
        CHECK_MSG(lane->offset == pos, "lane %u starts at %zu, expected %zu", l, lane->offset, pos);
        /* empty only when there are too few elements, and then only the last ones */
        CHECK(lane->count > 0 || (n < lanes && l >= n));
        CHECK(lane->n_chunks > 0 || lane->count == 0);
        CHECK(lane->offset % align == 0 || lane->offset == n);
        CHECK_EQ_INT(lane->rank, l % ranks);
        pos += lane->count;
        if (l + 1 < a->n_lanes) { /* the last lane may be cut short by n */
            if (lane->count < min_lane) min_lane = lane->count;
            if (lane->count > max_lane) max_lane = lane->count;
        }
        /* Chunks tile the lane; owners rotate. */
        size_t cpos = lane->offset, cmin = (size_t)-1, cmax = 0;
        for (uint32_t j = 0; j < lane->n_chunks; j++) {
            const gt_topo_chunk_t *ch = &a->chunks[lane->first_chunk + j];
            CHECK(ch->offset == cpos);
            CHECK(ch->offset % align == 0);
            CHECK_EQ_INT(ch->owner, (l + j) % sites);
            cpos += ch->count;
            owned[ch->owner] += ch->count;
            owned_chunks[ch->owner]++;
            if (j + 1 < lane->n_chunks || l + 1 < a->n_lanes) {
                if (ch->count < cmin) cmin = ch->count;
                if (ch->count > cmax) cmax = ch->count;
            }
        }
        CHECK(cpos == lane->offset + lane->count);
        if (cmax >= cmin) CHECK_MSG(cmax - cmin <= align, "chunks %zu..%zu", cmin, cmax);
        CHECK(lane->n_chunks == sites || lane->count < sites * align);
    }
    CHECK_MSG(pos == n, "lanes cover %zu of %zu elements", pos, n);
    if (a->n_lanes > 1 && max_lane >= min_lane)
        CHECK_MSG(max_lane - min_lane <= align, "lanes %zu..%zu", min_lane, max_lane);

    /* Ownership balanced: chunk counts within one; elements within one chunk. */
    size_t omin = (size_t)-1, omax = 0, cmin = (size_t)-1, cmax = 0;
    size_t biggest_chunk = 0;
    for (size_t c = 0; c < a->n_chunks; c++)
        if (a->chunks[c].count > biggest_chunk) biggest_chunk = a->chunks[c].count;
    for (uint32_t s = 0; s < sites; s++) {
        if (owned[s] < omin) omin = owned[s];
        if (owned[s] > omax) omax = owned[s];
        if (owned_chunks[s] < cmin) cmin = owned_chunks[s];
        if (owned_chunks[s] > cmax) cmax = owned_chunks[s];
    }
    if (n >= (size_t)lanes * sites * align) {
        CHECK_MSG(cmax - cmin <= 1, "chunks per site %zu..%zu", cmin, cmax);
        CHECK_MSG(omax - omin <= biggest_chunk, "elements per site %zu..%zu (chunk %zu)", omin,
                  omax, biggest_chunk);
    }

    /* Deterministic. */
    CHECK(a->n_chunks == b->n_chunks);
    CHECK(memcmp(a->lanes, b->lanes, a->n_lanes * sizeof *a->lanes) == 0);
    CHECK(memcmp(a->chunks, b->chunks, a->n_chunks * sizeof *a->chunks) == 0);
    free(owned);
    free(owned_chunks);
    gt_topo_layout_destroy(a);
    gt_topo_layout_destroy(b);
}

/* Weighted chunks: tile, aligned, rotated owners, non-empty, and each site's elements within
 * two alignment units per lane of its share of n. */
static void check_weighted(size_t n, uint32_t lanes, uint32_t sites, size_t align,
                           const double *shares)
{
    gt_topo_layout_params_t p = GT_TOPO_LAYOUT_PARAMS_INIT;
    p.n_elems = n;
    p.n_lanes = lanes;
    p.n_sites = sites;
    p.align = align;
    p.shares = shares;
    gt_topo_layout_t *a = NULL;
    if (gt_topo_layout_create(&p, &a) != GT_OK) return;
    size_t owned[16] = {0};
    double tot = 0;
    for (uint32_t s = 0; s < sites; s++) tot += shares[s];
    for (uint32_t l = 0; l < a->n_lanes; l++) {
        const gt_topo_lane_t *lane = &a->lanes[l];
        size_t cpos = lane->offset;
        for (uint32_t j = 0; j < lane->n_chunks; j++) {
            const gt_topo_chunk_t *ch = &a->chunks[lane->first_chunk + j];
            CHECK(ch->offset == cpos);
            CHECK(ch->offset % align == 0);
            CHECK(ch->count > 0);
            CHECK_EQ_INT(ch->owner, (l + j) % sites);
            cpos += ch->count;
            owned[ch->owner] += ch->count;
        }
        CHECK(cpos == lane->offset + lane->count);
    }
    if (n >= (size_t)lanes * sites * align)
        for (uint32_t s = 0; s < sites; s++) {
            double want = shares[s] / tot * (double)n, got = (double)owned[s];
            CHECK_MSG(got >= want - 2.0 * lanes * align && got <= want + 2.0 * lanes * align,
                      "site %u owns %zu of %zu, share %.3f (L=%u S=%u align %zu)", s, owned[s], n,
                      shares[s] / tot, lanes, sites, align);
        }
    /* Equal shares cut exactly as no shares do. */
    double eq[16];
    for (uint32_t s = 0; s < sites; s++) eq[s] = 0.25;
    gt_topo_layout_t *e = NULL, *z = NULL;
    p.shares = eq;
    CHECK_EQ_INT(gt_topo_layout_create(&p, &e), GT_OK);
    p.shares = NULL;
    CHECK_EQ_INT(gt_topo_layout_create(&p, &z), GT_OK);
    CHECK(e->n_chunks == z->n_chunks &&
          memcmp(e->chunks, z->chunks, e->n_chunks * sizeof *e->chunks) == 0);
    gt_topo_layout_destroy(a);
    gt_topo_layout_destroy(e);
    gt_topo_layout_destroy(z);
}

/* Loads a config from text and returns its chunk shares. */
static void shares_of(const char *yaml, double *shares, uint32_t *n_p)
{
    char path[] = "/tmp/gt-test-shares-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    CHECK(write(fd, yaml, strlen(yaml)) == (ssize_t)strlen(yaml));
    close(fd);
    gt_topo_config_t *cfg = NULL;
    gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;
    gt_status_t st = gt_topo_load(path, &lp, &cfg);
    unlink(path);
    CHECK_EQ_INT(st, GT_OK);
    if (st != GT_OK) return;
    CHECK_EQ_INT(gt_topo_chunk_shares(cfg, shares), GT_OK);
    *n_p = cfg->n_sites;
    gt_topo_destroy(cfg);
}

#define SITES3                                         \
    "sites:\n  - {name: a, address: 127.0.0.1:5000}\n" \
    "  - {name: b, address: 127.0.0.1:5001}\n"         \
    "  - {name: c, address: 127.0.0.1:5002}\n"

static void check_shares(void)
{
    double f[8];
    uint32_t n = 0;
    /* One site behind links 10x thinner: 1 + f_s = t c_s with c = (22, 22, 4) leaves c out
     * (t = 1/6 would give it 4/6 - 1 < 0); then t = 3/44 and a, b get 1/2 each. */
    shares_of("wan:\n  emulation:\n    bandwidth_mbps: 20\n" SITES3
              "links:\n  - {between: [a, c], bandwidth_mbps: 2}\n"
              "  - {between: [b, c], bandwidth_mbps: 2}\n",
              f, &n);
    CHECK_EQ_INT(n, 3);
    CHECK_CLOSE(f[0], 0.5, 1e-12, 0);
    CHECK_CLOSE(f[1], 0.5, 1e-12, 0);
    CHECK_CLOSE(f[2], 0.0, 1e-12, 0);
    /* The demo's links (sites.yaml): c = (600, 700, 300): c owns nothing, t = 3/1300,
     * a 1800/1300 - 1 = 5/13, b 8/13. */
    shares_of("wan:\n  emulation:\n    bandwidth_mbps: 200\n" SITES3
              "links:\n  - {between: [a, b], bandwidth_mbps: 500}\n"
              "  - {between: [a, c], bandwidth_mbps: 100}\n",
              f, &n);
    CHECK_CLOSE(f[0], 5.0 / 13, 1e-12, 0);
    CHECK_CLOSE(f[1], 8.0 / 13, 1e-12, 0);
    CHECK_CLOSE(f[2], 0.0, 1e-12, 0);
    /* Four sites, d's links 8 against 10: c = (28, 28, 28, 24), t = 6/108, everyone keeps a
     * share: (28/18 - 1)/2 = 5/18 each for a, b, c and (24/18 - 1)/2 = 1/6 for d. */
    shares_of(
        "wan:\n  emulation:\n    bandwidth_mbps: 10\n" SITES3
        "  - {name: d, address: 127.0.0.1:5003}\n"
        "links:\n  - {between: [a, d], bandwidth_mbps: 8}\n"
        "  - {between: [b, d], bandwidth_mbps: 8}\n  - {between: [c, d], bandwidth_mbps: 8}\n",
        f, &n);
    CHECK_EQ_INT(n, 4);
    for (int s = 0; s < 3; s++) CHECK_CLOSE(f[s], 5.0 / 18, 1e-12, 0);
    CHECK_CLOSE(f[3], 1.0 / 6, 1e-12, 0);
    /* Equal shares: asked for, unlimited links only, or two sites. */
    shares_of("outer:\n  chunk_split: equal\nwan:\n  emulation:\n    bandwidth_mbps: 20\n" SITES3
              "links:\n  - {between: [a, c], bandwidth_mbps: 2}\n",
              f, &n);
    for (int s = 0; s < 3; s++) CHECK_CLOSE(f[s], 1.0 / 3, 1e-12, 0);
    shares_of(SITES3, f, &n);
    for (int s = 0; s < 3; s++) CHECK_CLOSE(f[s], 1.0 / 3, 1e-12, 0);
    shares_of("wan:\n  emulation:\n    bandwidth_mbps: 20\nsites:\n"
              "  - {name: a, address: 127.0.0.1:5000}\n  - {name: b, address: 127.0.0.1:5001}\n"
              "links:\n  - {between: [a, b], bandwidth_mbps: 2}\n",
              f, &n);
    CHECK_EQ_INT(n, 2);
    CHECK_CLOSE(f[0], 0.5, 1e-12, 0);
    CHECK_CLOSE(f[1], 0.5, 1e-12, 0);
    CHECK_EQ_INT(gt_topo_chunk_shares(NULL, f), GT_ERR_INVALID);
}

int main(void)
{
    const double w3[] = {0.5, 0.5, 0.0}, w4[] = {0.1, 0.2, 0.3, 0.4}, w5[] = {1, 1, 1, 1, 3};
    const size_t wn[] = {1000, 4096, 123457, 1 << 20};
    const uint32_t wl[] = {1, 2, 4, 7};
    const size_t wa[] = {1, 16, 128};
    for (size_t i = 0; i < sizeof wn / sizeof wn[0]; i++)
        for (size_t l = 0; l < sizeof wl / sizeof wl[0]; l++)
            for (size_t a = 0; a < sizeof wa / sizeof wa[0]; a++) {
                check_weighted(wn[i], wl[l], 3, wa[a], w3);
                check_weighted(wn[i], wl[l], 4, wa[a], w4);
                check_weighted(wn[i], wl[l], 5, wa[a], w5);
            }
    check_shares();

    const size_t ns[] = {1, 7, 64, 1000, 4096, 123457, 1 << 20, 124439808};
    const uint32_t lanes[] = {1, 2, 3, 4, 7, 16};
    const uint32_t sites[] = {1, 2, 3, 4, 5, 16};
    const uint32_t ranks[] = {1, 2, 3, 8};
    const size_t aligns[] = {1, 16, 128};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (size_t l = 0; l < sizeof lanes / sizeof lanes[0]; l++)
            for (size_t s = 0; s < sizeof sites / sizeof sites[0]; s++)
                for (size_t r = 0; r < sizeof ranks / sizeof ranks[0]; r++)
                    for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++)
                        check_layout(ns[i], lanes[l], sites[s], ranks[r], aligns[a]);

    /* Bad parameters are refused, not guessed at. */
    gt_topo_layout_params_t p = GT_TOPO_LAYOUT_PARAMS_INIT;
    gt_topo_layout_t *lay = NULL;
    CHECK_EQ_INT(gt_topo_layout_create(&p, &lay), GT_ERR_INVALID); /* n = 0 */
    p.n_elems = 10;
    p.n_lanes = 20;
    p.align = 128; /* more lanes than elements: 10 lanes of one element, 10 empty */
    CHECK_EQ_INT(gt_topo_layout_create(&p, &lay), GT_OK);
    size_t empty = 0;
    for (uint32_t l = 0; lay && l < lay->n_lanes; l++) empty += lay->lanes[l].count == 0;
    CHECK(lay && empty == 10 && lay->n_chunks == 10);
    gt_topo_layout_destroy(lay);
    lay = NULL;
    p.n_elems = 17; /* 17 elements in units of 128 over 4 lanes: units of 4 */
    p.n_lanes = 4;
    CHECK_EQ_INT(gt_topo_layout_create(&p, &lay), GT_OK);
    for (uint32_t l = 0; lay && l < 4; l++) CHECK(lay->lanes[l].count == (l < 3 ? 4u : 5u));
    gt_topo_layout_destroy(lay);
    lay = NULL;
    p.n_elems = 0;
    CHECK_EQ_INT(gt_topo_layout_create(&p, &lay), GT_ERR_INVALID); /* n = 0 */
    CHECK(lay == NULL);
    gt_topo_layout_destroy(NULL);
    return GT_TEST_DONE();
}
