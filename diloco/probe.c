/* probe.c — the small questions sites ask each other outside the outer rounds, each a message
 * type of its own (formats in diloco_internal.h), between two sites' ends of one WAN group:
 * - START: at the start of a run every site tells every peer its parameter count and the hash
 *   of its initial vector (dl_start_check, state.c, acts on them); no answer.
 * - PROBE and its answer PROBE_INFO: the probe's kind says what it is for. A joiner asks where a
 *   peer is (PROBE_JOIN: the answer carries the round it submits next, its parameter count, its
 *   table of first rounds and its step; dl_fetch_state waits for it as for a fetch); the liveness
 *   watch (PROBE_LIVE) and the partition rule (PROBE_REACH, outer_step.c) need only an answer.
 * The library packs and unpacks the layouts here only. A payload of the wrong size, magic or
 * kind is rejected before a field of it is used, counted and logged (dl_bad_message), and
 * changes no state (only a joiner's probe waiting on that peer ends at once, as with no answer);
 * an answer that is well formed but not to a question we asked (an old fetch id) is dropped
 * quietly, as it is no fault of the peer's.
 */
#include "diloco_internal.h"

#include <string.h>

void dl_bad_message(gt_diloco_t *d, const gt_wan_msg_t *m, const char *why)
{
    static const char *const names[] = {[GT_WAN_MSG_DELTA] = "DELTA",
                                        [GT_WAN_MSG_RESULT] = "RESULT",
                                        [GT_WAN_MSG_STATE_REQ] = "STATE_REQ",
                                        [GT_WAN_MSG_STATE_CHUNK] = "STATE_CHUNK",
                                        [GT_WAN_MSG_JOIN] = "JOIN",
                                        [GT_WAN_MSG_FIN] = "FIN",
                                        [GT_WAN_MSG_PULL] = "PULL",
                                        [GT_WAN_MSG_PROBE] = "PROBE",
                                        [GT_WAN_MSG_PROBE_INFO] = "PROBE_INFO",
                                        [GT_WAN_MSG_START] = "START"};
    const char *name = m->type < sizeof names / sizeof *names ? names[m->type] : NULL;
    d->bad_messages++;
    GT_WARN("site %s: rejected a message from site %u (%s, round %llu, fragment %u): %s", d->name,
            m->sender, name ? name : "unknown type", (unsigned long long)m->round,
            (unsigned)m->fragment, why);
}

gt_status_t dl_probe_send(gt_diloco_t *d, uint32_t i, uint32_t peer, uint32_t kind, uint64_t id)
{
    uint8_t b[PROBE_BYTES];
    gt_le_put32(b, PROBE_MAGIC);
    gt_le_put32(b + 4, kind);
    gt_le_put64(b + 8, id);
    gt_wan_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = GT_WAN_MSG_PROBE;
    return gt_wan_mesh_send(d->grp[i].mesh, peer, &m, b, sizeof b);
}

gt_status_t dl_start_send(gt_diloco_t *d, uint32_t i, uint32_t peer, uint64_t hash)
{
    uint8_t b[START_BYTES];
    gt_le_put32(b, START_MAGIC);
    gt_le_put32(b + 4, 0);
    gt_le_put64(b + 8, d->n);
    gt_le_put64(b + 16, hash);
    gt_wan_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = GT_WAN_MSG_START;
    return gt_wan_mesh_send(d->grp[i].mesh, peer, &m, b, sizeof b);
}

static int kind_valid(uint32_t kind)
{
    return kind == PROBE_JOIN || kind == PROBE_LIVE || kind == PROBE_REACH;
}

/* A peer's START: its parameter count and initial hash, for dl_start_check. */
static void take_start(struct dl_group *gr, const gt_wan_msg_t *m, const uint8_t *b, size_t len)
{
    gt_diloco_t *d = gr->d;
    if (len != START_BYTES || gt_le_get32(b) != START_MAGIC) {
        dl_bad_message(d, m, "not a START payload");
        return;
    }
    if (m->sender >= d->cfg->n_sites || m->sender >= GT_OUTER_MAX_SITES || m->sender == d->site) {
        dl_bad_message(d, m, "a START from no peer");
        return;
    }
    d->hello_params[m->sender] = gt_le_get64(b + 8);
    d->hello_hash[m->sender] = gt_le_get64(b + 16);
    d->hello_got[m->sender] = 1;
}

/* A peer's PROBE: answered with our status, and for a joiner's with where we are. */
static void serve_probe(struct dl_group *gr, const gt_wan_msg_t *m, const uint8_t *b, size_t len)
{
    gt_diloco_t *d = gr->d;
    uint32_t kind = len == PROBE_BYTES ? gt_le_get32(b + 4) : 0;
    if (len != PROBE_BYTES || gt_le_get32(b) != PROBE_MAGIC || !kind_valid(kind)) {
        dl_bad_message(d, m, "not a PROBE payload");
        return;
    }
    uint32_t n = d->cfg->n_sites;
    uint8_t out[PROBE_INFO_HDR + PROBE_JOIN_BODY(GT_OUTER_MAX_SITES)];
    size_t len_out = PROBE_INFO_HDR;
    gt_le_put32(out, PROBE_INFO_MAGIC);
    gt_le_put32(out + 4, kind);
    gt_le_put64(out + 8, gt_le_get64(b + 8)); /* the id, echoed */
    gt_le_put32(out + 16, d->training ? PROBE_TRAINING : PROBE_BUSY);
    gt_le_put32(out + 20, 0);
    if (kind == PROBE_JOIN && n <= GT_OUTER_MAX_SITES) {
        uint8_t *body = out + PROBE_INFO_HDR;
        uint64_t first[GT_OUTER_MAX_SITES];
        gt_outer_first_rounds(d->outers[gr->i], first);
        gt_le_put64(body, d->next_submit);
        gt_le_put64(body + 8, d->n);
        gt_le_put32(body + 16, n);
        for (uint32_t i = 0; i < n; i++) gt_le_put64(body + 20 + 8 * i, first[i]);
        /* the step we are at: a joiner starts training there (dl_join) */
        gt_le_put64(body + 20 + 8 * n, __atomic_load_n(&d->step, __ATOMIC_RELAXED));
        len_out += PROBE_JOIN_BODY(n);
    }
    gt_wan_msg_t a;
    memset(&a, 0, sizeof a);
    a.type = GT_WAN_MSG_PROBE_INFO;
    if (gt_wan_mesh_send(gr->mesh, m->sender, &a, out, len_out) != GT_OK)
        GT_WARN("site %s: cannot answer site %u's probe", d->name, m->sender);
}

/* The answer to a probe of ours. */
static void take_probe_info(struct dl_group *gr, const gt_wan_msg_t *m, const uint8_t *b,
                            size_t len)
{
    gt_diloco_t *d = gr->d;
    uint32_t kind = len >= PROBE_INFO_HDR ? gt_le_get32(b + 4) : 0;
    uint32_t status = len >= PROBE_INFO_HDR ? gt_le_get32(b + 16) : UINT32_MAX;
    uint32_t n = len >= PROBE_INFO_HDR + 20 ? gt_le_get32(b + PROBE_INFO_HDR + 16) : 0;
    size_t body = kind == PROBE_JOIN ? PROBE_JOIN_BODY(n) : 0;
    if (len < PROBE_INFO_HDR || gt_le_get32(b) != PROBE_INFO_MAGIC || !kind_valid(kind) ||
        (status != PROBE_TRAINING && status != PROBE_BUSY) ||
        (kind == PROBE_JOIN && n != d->cfg->n_sites) || len != PROBE_INFO_HDR + body) {
        dl_bad_message(d, m, "not a PROBE_INFO payload");
        /* a joiner's probe to this peer now gets no answer: it ends at once, not at its limit */
        if (d->fetching && d->fetch_round == STATE_PROBE && gr->i == d->fetch_grp &&
            d->fetch_peer[0] == m->sender)
            d->fetch_status = STATE_GONE;
        return;
    }
    uint64_t id = gt_le_get64(b + 8);
    uint32_t s = m->sender;
    if (kind == PROBE_LIVE) {
        if (s < GT_OUTER_MAX_SITES && d->live_from_ns[s]) d->heard_ns[s] = gt_time_ns();
        return;
    }
    if (kind == PROBE_REACH) {
        /* any answer, even "busy" (a joiner's), shows the peer is reachable */
        if (d->reach_id && id == d->reach_id && s < GT_OUTER_MAX_SITES && d->reach_asked[s])
            d->reach_got[s] = 1;
        return;
    }
    if (!d->fetching || d->fetch_round != STATE_PROBE || gr->i != d->fetch_grp ||
        id != d->fetch_id || d->fetch_peer[0] != s)
        return;
    if (status == PROBE_BUSY) {
        d->fetch_status = STATE_BUSY;
        return;
    }
    const uint8_t *p = b + PROBE_INFO_HDR;
    d->probe_next = gt_le_get64(p);
    d->probe_params = gt_le_get64(p + 8);
    for (uint32_t i = 0; i < n && i < GT_OUTER_MAX_SITES; i++)
        d->probe_first[i] = gt_le_get64(p + 20 + 8 * i);
    d->probe_step = gt_le_get64(p + 20 + 8 * (size_t)n);
    d->probe_got = 1;
}

void dl_on_probe(struct dl_group *gr, const gt_wan_msg_t *msg, const void *buf, size_t len)
{
    if (msg->type == GT_WAN_MSG_PROBE)
        serve_probe(gr, msg, buf, len);
    else if (msg->type == GT_WAN_MSG_PROBE_INFO)
        take_probe_info(gr, msg, buf, len);
    else
        take_start(gr, msg, buf, len);
}
