/* layout.c — lanes and owner chunks over the flat parameter vector (DESIGN.md §3).
 *
 * The vector [0, N) is cut into L lanes whose sizes differ by at most one alignment unit;
 * rank k of every site carries lanes {l : l mod R = k}. Each lane is cut into one chunk per
 * live site (sizes again within one unit) and chunk j of lane l is owned by live site
 * (l + j) mod S: the rotation gives every site exactly L chunks over all lanes when every
 * lane has S chunks, so aggregation work is balanced to within one chunk.
 *
 * This is the one place lanes and chunks are cut: diloco/ packs and unpacks a rank's lanes
 * with the full layout, and the outer engine (wan/outer.c) works on the same rank's share
 * (gt_topo_layout_rank), so both see the same boundaries.
 */
#include "gt_topology.h"

#include <stdlib.h>

/* Splits `units` alignment units into `parts` contiguous pieces; piece i gets units*i/parts
 * boundaries, so sizes differ by at most one unit. */
static size_t split_at(size_t units, size_t parts, size_t i)
{
    /* units * i / parts without overflow for any realistic vector (units < 2^48). */
    return (size_t)(((unsigned __int128)units * i) / parts);
}

gt_status_t gt_topo_layout_create(const gt_topo_layout_params_t *p, gt_topo_layout_t **layout_p)
{
    if (!p || !layout_p || p->n_elems == 0 || p->n_lanes == 0 || p->n_sites == 0 || p->ranks == 0 ||
        p->align == 0) {
        GT_ERROR("layout: N, lanes, sites, ranks and alignment must all be positive");
        return GT_ERR_INVALID;
    }
    size_t units = (p->n_elems + p->align - 1) / p->align;
    if (units < p->n_lanes) {
        GT_ERROR("layout: %zu elements in units of %zu cannot fill %u lanes", p->n_elems, p->align,
                 p->n_lanes);
        return GT_ERR_INVALID;
    }
    gt_topo_layout_t *lay = calloc(1, sizeof *lay);
    if (!lay) return GT_ERR_NOMEM;
    lay->n_elems = p->n_elems;
    lay->n_sites = p->n_sites;
    lay->n_lanes = p->n_lanes;
    lay->lanes = calloc(p->n_lanes, sizeof *lay->lanes);
    lay->chunks = calloc((size_t)p->n_lanes * p->n_sites, sizeof *lay->chunks);
    if (!lay->lanes || !lay->chunks) {
        gt_topo_layout_destroy(lay);
        return GT_ERR_NOMEM;
    }
    size_t nc = 0;
    for (uint32_t l = 0; l < p->n_lanes; l++) {
        size_t u0 = split_at(units, p->n_lanes, l), u1 = split_at(units, p->n_lanes, l + 1);
        gt_topo_lane_t *lane = &lay->lanes[l];
        lane->offset = u0 * p->align;
        size_t end = u1 * p->align < p->n_elems ? u1 * p->align : p->n_elems;
        lane->count = end - lane->offset;
        lane->rank = l % p->ranks;
        lane->first_chunk = nc;
        size_t lane_units = u1 - u0;
        uint32_t n_chunks = lane_units < p->n_sites ? (uint32_t)lane_units : p->n_sites;
        lane->n_chunks = n_chunks;
        for (uint32_t j = 0; j < n_chunks; j++) {
            size_t c0 = u0 + split_at(lane_units, n_chunks, j);
            size_t c1 = u0 + split_at(lane_units, n_chunks, j + 1);
            gt_topo_chunk_t *ch = &lay->chunks[nc++];
            ch->offset = c0 * p->align;
            size_t cend = c1 * p->align < p->n_elems ? c1 * p->align : p->n_elems;
            ch->count = cend - ch->offset;
            ch->owner = (uint32_t)((l + j) % p->n_sites);
        }
    }
    lay->n_chunks = nc;
    *layout_p = lay;
    return GT_OK;
}

void gt_topo_layout_destroy(gt_topo_layout_t *layout)
{
    if (!layout) return;
    free(layout->lanes);
    free(layout->chunks);
    free(layout);
}

gt_status_t gt_topo_layout_rank(const gt_topo_layout_t *full, uint32_t rank,
                                gt_topo_layout_t **sub_p)
{
    if (!full || !sub_p) return GT_ERR_INVALID;
    uint32_t nl = 0;
    size_t nc = 0;
    for (uint32_t l = 0; l < full->n_lanes; l++)
        if (full->lanes[l].rank == rank) {
            nl++;
            nc += full->lanes[l].n_chunks;
        }
    if (nl == 0) {
        GT_ERROR("layout: rank %u carries no lane of %u", rank, full->n_lanes);
        return GT_ERR_INVALID;
    }
    gt_topo_layout_t *sub = calloc(1, sizeof *sub);
    if (!sub) return GT_ERR_NOMEM;
    sub->n_sites = full->n_sites;
    sub->n_lanes = nl;
    sub->lanes = calloc(nl, sizeof *sub->lanes);
    sub->chunks = calloc(nc, sizeof *sub->chunks);
    if (!sub->lanes || !sub->chunks) {
        gt_topo_layout_destroy(sub);
        return GT_ERR_NOMEM;
    }
    size_t pos = 0, c = 0;
    uint32_t k = 0;
    for (uint32_t l = 0; l < full->n_lanes; l++) {
        const gt_topo_lane_t *fl = &full->lanes[l];
        if (fl->rank != rank) continue;
        gt_topo_lane_t *sl = &sub->lanes[k++];
        *sl = *fl;
        sl->offset = pos;
        sl->first_chunk = c;
        for (uint32_t j = 0; j < fl->n_chunks; j++) {
            gt_topo_chunk_t ch = full->chunks[fl->first_chunk + j];
            ch.offset = ch.offset - fl->offset + pos;
            sub->chunks[c++] = ch;
        }
        pos += fl->count;
    }
    sub->n_elems = pos;
    sub->n_chunks = nc;
    *sub_p = sub;
    return GT_OK;
}
