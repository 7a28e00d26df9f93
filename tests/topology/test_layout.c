/* test_layout.c — properties of the lane/chunk layout over many shapes: lanes cover the
 * vector exactly once and in order, chunks tile their lane, boundaries are aligned, sizes are
 * balanced, ownership is balanced within one chunk per site, ranks get lanes round-robin,
 * and the same parameters give the same layout. */
#include "gt_test.h"
#include "gt_topology.h"

#include <stdlib.h>

static void check_layout(size_t n, uint32_t lanes, uint32_t sites, uint32_t ranks, size_t align)
{
    gt_topo_layout_params_t p = GT_TOPO_LAYOUT_PARAMS_INIT;
    p.n_elems = n;
    p.n_lanes = lanes;
    p.n_sites = sites;
    p.ranks = ranks;
    p.align = align;
    gt_topo_layout_t *a = NULL, *b = NULL;
    if (gt_topo_layout_create(&p, &a) != GT_OK) {
        CHECK_MSG((n + align - 1) / align < lanes, "layout failed for n=%zu L=%u", n, lanes);
        return;
    }
    CHECK_EQ_INT(gt_topo_layout_create(&p, &b), GT_OK);

    /* Lanes: contiguous, in order, covering [0, n) exactly once. */
    size_t pos = 0, min_lane = (size_t)-1, max_lane = 0;
    size_t *owned = calloc(sites, sizeof *owned), *owned_chunks = calloc(sites, sizeof(size_t));
    for (uint32_t l = 0; l < a->n_lanes; l++) {
        const gt_topo_lane_t *lane = &a->lanes[l];
        CHECK_MSG(lane->offset == pos, "lane %u starts at %zu, expected %zu", l, lane->offset, pos);
        CHECK(lane->count > 0);
        CHECK(lane->offset % align == 0);
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

int main(void)
{
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
    CHECK_EQ_INT(gt_topo_layout_create(&p, &lay), GT_ERR_INVALID); /* more lanes than elements */
    CHECK(lay == NULL);
    gt_topo_layout_destroy(NULL);
    return GT_TEST_DONE();
}
