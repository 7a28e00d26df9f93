/* layout.c — lanes and owner chunks over the flat parameter vector (docs/design.md §4).
 *
 * The vector [0, N) is cut into L lanes whose sizes differ by at most one alignment unit;
 * rank k of every site carries lanes {l : l mod R = k}. Any N works with any L: a vector with
 * fewer units than lanes is cut in smaller units, and one with fewer elements than lanes leaves
 * some lanes empty (a toy model under the default wan.lanes needs no tuning). Each lane is cut into
 * one chunk per live site (sizes again within one unit) and chunk j of lane l is owned by live site
 * (l + j) mod S: the rotation gives every site exactly L chunks over all lanes when every
 * lane has S chunks, so aggregation work is balanced to within one chunk.
 *
 * Bandwidth-aware ownership (outer.chunk_split: bandwidth): a site behind thin links should
 * aggregate less, since every byte of a chunk it owns crosses its links twice more (in from
 * each peer, out to each peer). gt_topo_chunk_shares turns the links into a share per site;
 * each lane's chunk j then gets one unit plus the rest of the lane in proportion to the share
 * of its preferred owner (l + j) mod S. The rotation and the chunk count stay as they were, so
 * a lost owner's chunks move exactly as before; only the sizes follow the links.
 *
 * This is the one place lanes and chunks are cut: diloco/ packs and unpacks a rank's lanes
 * with the full layout, and the outer engine (outer/) works on the same rank's share
 * (gt_topo_layout_rank), so both see the same boundaries.
 */
#include "gt_topology.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Splits `units` alignment units into `parts` contiguous pieces; piece i gets units*i/parts
 * boundaries, so sizes differ by at most one unit. */
static size_t split_at(size_t units, size_t parts, size_t i)
{
    /* units * i / parts without overflow for any realistic vector (units < 2^48). */
    return (size_t)(((unsigned __int128)units * i) / parts);
}

/* Shares quantized to integers (2^-20 units), so the cut is integer arithmetic that every site
 * does the same way; returns 0 when they are absent or all equal (the equal split then). */
static int quantize_shares(const double *shares, uint32_t n, uint64_t *q)
{
    if (!shares) return 0;
    int equal = 1;
    uint64_t tot = 0;
    for (uint32_t i = 0; i < n; i++) {
        double x = shares[i] > 0 && isfinite(shares[i]) ? shares[i] : 0.0;
        q[i] = (uint64_t)llround(x * 1048576.0);
        tot += q[i];
        if (i && q[i] != q[0]) equal = 0;
    }
    return !equal && tot > 0;
}

gt_status_t gt_topo_layout_create(const gt_topo_layout_params_t *p, gt_topo_layout_t **layout_p)
{
    if (!p || !layout_p || p->n_elems == 0 || p->n_lanes == 0 || p->n_sites == 0 || p->ranks == 0 ||
        p->align == 0) {
        GT_ERROR("layout: N, lanes, sites, ranks and alignment must all be positive");
        return GT_ERR_INVALID;
    }
    /* The alignment is a preference: a vector too short to give every lane one unit is cut in
     * smaller units (the largest that do), and one shorter than the lanes in single elements,
     * the last lanes then empty (no elements, no chunks). */
    size_t align = p->align, units = (p->n_elems + align - 1) / align;
    if (units < p->n_lanes) {
        align = p->n_elems / p->n_lanes ? p->n_elems / p->n_lanes : 1;
        units = (p->n_elems + align - 1) / align;
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
    uint64_t *q = calloc(p->n_sites, sizeof *q);
    if (!q) {
        gt_topo_layout_destroy(lay);
        return GT_ERR_NOMEM;
    }
    int weighted = quantize_shares(p->shares, p->n_sites, q);
    size_t nc = 0;
    for (uint32_t l = 0; l < p->n_lanes; l++) {
        /* Fewer units than lanes: one each to the first lanes (lane 0, which rank 0 of every
         * site carries, is never empty), the rest empty. */
        int few = units < p->n_lanes;
        size_t u0 = few ? (l < units ? l : units) : split_at(units, p->n_lanes, l);
        size_t u1 = few ? (l + 1 < units ? l + 1 : units) : split_at(units, p->n_lanes, l + 1);
        gt_topo_lane_t *lane = &lay->lanes[l];
        lane->offset = u0 * align < p->n_elems ? u0 * align : p->n_elems;
        size_t end = u1 * align < p->n_elems ? u1 * align : p->n_elems;
        lane->count = end - lane->offset;
        lane->rank = l % p->ranks;
        lane->first_chunk = nc;
        size_t lane_units = u1 - u0;
        uint32_t n_chunks = lane_units < p->n_sites ? (uint32_t)lane_units : p->n_sites;
        lane->n_chunks = n_chunks;
        /* Weighted: chunk j spans one unit plus its owner's part of the rest, cut at the
         * cumulative weights (so the chunks tile the lane exactly). */
        unsigned __int128 wtot = 0;
        for (uint32_t j = 0; j < n_chunks; j++) wtot += q[(l + j) % p->n_sites];
        int wl = weighted && wtot > 0;
        unsigned __int128 wcum = 0;
        size_t rest = lane_units - n_chunks;
        for (uint32_t j = 0; j < n_chunks; j++) {
            size_t c0, c1;
            if (wl) {
                c0 = u0 + j + (size_t)(rest * wcum / wtot);
                wcum += q[(l + j) % p->n_sites];
                c1 = u0 + j + 1 + (size_t)(rest * wcum / wtot);
            } else {
                c0 = u0 + split_at(lane_units, n_chunks, j);
                c1 = u0 + split_at(lane_units, n_chunks, j + 1);
            }
            gt_topo_chunk_t *ch = &lay->chunks[nc++];
            ch->offset = c0 * align;
            size_t cend = c1 * align < p->n_elems ? c1 * align : p->n_elems;
            ch->count = cend - ch->offset;
            ch->owner = (uint32_t)((l + j) % p->n_sites);
        }
    }
    free(q);
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

uint32_t gt_topo_wan_groups(const gt_topo_config_t *cfg)
{
    uint64_t G = 1;
    for (uint32_t i = 0; cfg && i < cfg->n_sites; i++) {
        uint64_t a = G, b = cfg->sites[i].ranks ? cfg->sites[i].ranks : 1;
        while (b) { /* gcd(G, R) */
            uint64_t t = a % b;
            a = b;
            b = t;
        }
        G = G / a * (cfg->sites[i].ranks ? cfg->sites[i].ranks : 1);
        if (G > GT_TOPO_MAX_GROUPS) return 0;
    }
    return (uint32_t)G;
}

uint32_t gt_topo_lane_fragment(uint32_t lane, uint32_t groups, uint32_t fragments)
{
    if (groups == 0) groups = 1;
    if (fragments == 0) fragments = 1;
    return (lane / groups) % fragments;
}

uint64_t gt_topo_fragment_offset(uint64_t H, uint32_t fragments, uint32_t f)
{
    if (fragments == 0) fragments = 1;
    return H - (uint64_t)(fragments - 1 - f) * (H / fragments);
}

gt_status_t gt_topo_chunk_shares(const gt_topo_config_t *cfg, double *shares_p)
{
    if (!cfg || !shares_p || cfg->n_sites == 0) return GT_ERR_INVALID;
    uint32_t S = cfg->n_sites;
    for (uint32_t s = 0; s < S; s++) shares_p[s] = 1.0 / S;
    /* With site slots, a site added later cuts the same layout from its own file, whose links
     * the running sites never saw: equal shares are the split both can compute. */
    if (cfg->outer.chunk_split == GT_SPLIT_EQUAL || S < 3 || cfg->outer.site_slots) return GT_OK;
    /* Capacities: the sum of each site's links; unlimited ones count as 10x the fastest. */
    double fastest = 0.0;
    for (uint32_t a = 0; a < S; a++)
        for (uint32_t b = a + 1; b < S; b++) {
            gt_topo_link_params_t lp;
            gt_topo_link_params(cfg, a, b, &lp);
            if (lp.bandwidth_mbps > fastest) fastest = lp.bandwidth_mbps;
        }
    if (fastest <= 0.0) return GT_OK;
    double *c = calloc(S, sizeof *c);
    uint8_t *on = calloc(S, 1);
    if (!c || !on) {
        free(c);
        free(on);
        return GT_ERR_NOMEM;
    }
    for (uint32_t a = 0; a < S; a++)
        for (uint32_t b = 0; b < S; b++) {
            if (a == b) continue;
            gt_topo_link_params_t lp;
            gt_topo_link_params(cfg, a, b, &lp);
            c[a] += lp.bandwidth_mbps > 0.0 ? lp.bandwidth_mbps : 10.0 * fastest;
        }
    /* Water-filling: with the sites still in, 1 + (S - 2) f_s = t c_s and sum f_s = 1 give
     * t = (n_in + S - 2) / sum c. While the thinnest site still in would get f_s < 0, it owns
     * nothing and leaves (f_s grows with c_s, so those that stay are the fastest). */
    memset(on, 1, S);
    double t = 0.0;
    for (;;) {
        double csum = 0.0;
        uint32_t n_in = 0, thin = UINT32_MAX;
        for (uint32_t s = 0; s < S; s++)
            if (on[s]) {
                csum += c[s];
                n_in++;
                if (thin == UINT32_MAX || c[s] <= c[thin]) thin = s;
            }
        t = ((double)n_in + (double)(S - 2)) / csum;
        if (n_in == 1 || t * c[thin] - 1.0 >= 0.0) break;
        on[thin] = 0;
    }
    for (uint32_t s = 0; s < S; s++) shares_p[s] = on[s] ? (t * c[s] - 1.0) / (double)(S - 2) : 0.0;
    free(c);
    free(on);
    return GT_OK;
}
