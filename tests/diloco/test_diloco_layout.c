/* test_diloco_layout.c — a rank's share of the lane/chunk layout (gt_topo_layout_rank), the one
 * cut diloco/ packs lanes with and wan/'s outer engine aggregates on: for many shapes, rank k's
 * share holds exactly the full layout's lanes whose rank is k, in order, packed without gaps,
 * with the same chunk sizes and owners; the shares of all ranks add up to the vector; with one
 * rank the share is the full layout. */
#include "gt_test.h"
#include "gt_topology.h"

#include <stdlib.h>

static void check(size_t n, uint32_t lanes, uint32_t sites, uint32_t ranks, size_t align)
{
    gt_topo_layout_params_t p = GT_TOPO_LAYOUT_PARAMS_INIT;
    p.n_elems = n;
    p.n_lanes = lanes;
    p.n_sites = sites;
    p.ranks = ranks;
    p.align = align;
    gt_topo_layout_t *full = NULL;
    if (gt_topo_layout_create(&p, &full) != GT_OK) return; /* shapes the layout refuses */
    size_t covered = 0;
    for (uint32_t k = 0; k < ranks; k++) {
        gt_topo_layout_t *sub = NULL;
        gt_status_t st = gt_topo_layout_rank(full, k, &sub);
        if (k >= lanes) { /* a rank with no lane is refused */
            CHECK_EQ_INT(st, GT_ERR_INVALID);
            continue;
        }
        CHECK_EQ_INT(st, GT_OK);
        if (st != GT_OK) continue;
        size_t pos = 0, c = 0;
        uint32_t sl = 0;
        for (uint32_t l = 0; l < full->n_lanes; l++) {
            const gt_topo_lane_t *fl = &full->lanes[l];
            if (fl->rank != k) continue;
            const gt_topo_lane_t *ln = &sub->lanes[sl++];
            CHECK(ln->offset == pos && ln->count == fl->count && ln->rank == k);
            CHECK(ln->n_chunks == fl->n_chunks && ln->first_chunk == c);
            for (uint32_t j = 0; j < fl->n_chunks; j++) {
                const gt_topo_chunk_t *a = &full->chunks[fl->first_chunk + j];
                const gt_topo_chunk_t *b = &sub->chunks[c + j];
                CHECK(b->count == a->count && b->owner == a->owner);
                CHECK(b->offset - ln->offset == a->offset - fl->offset);
            }
            c += fl->n_chunks;
            pos += fl->count;
        }
        CHECK(sl == sub->n_lanes && c == sub->n_chunks && pos == sub->n_elems);
        covered += sub->n_elems;
        if (ranks == 1) {
            CHECK(sub->n_elems == n && sub->n_chunks == full->n_chunks);
            CHECK(memcmp(sub->chunks, full->chunks, full->n_chunks * sizeof *sub->chunks) == 0);
        }
        gt_topo_layout_destroy(sub);
    }
    CHECK_MSG(covered == n || lanes < ranks, "shares cover %zu of %zu", covered, n);
    gt_topo_layout_destroy(full);
}

int main(void)
{
    const size_t ns[] = {1, 64, 1000, 123457, 1 << 20};
    const uint32_t lanes[] = {1, 2, 3, 4, 7, 16};
    const uint32_t sites[] = {1, 2, 3, 5};
    const uint32_t ranks[] = {1, 2, 3, 8};
    const size_t aligns[] = {1, 64};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (size_t l = 0; l < sizeof lanes / sizeof lanes[0]; l++)
            for (size_t s = 0; s < sizeof sites / sizeof sites[0]; s++)
                for (size_t r = 0; r < sizeof ranks / sizeof ranks[0]; r++)
                    for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++)
                        check(ns[i], lanes[l], sites[s], ranks[r], aligns[a]);
    gt_topo_layout_t *sub = NULL;
    CHECK_EQ_INT(gt_topo_layout_rank(NULL, 0, &sub), GT_ERR_INVALID);
    return GT_TEST_DONE();
}
