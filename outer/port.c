/* port.c — a WAN group's outer engines on one mesh (gt_outer_port_*). A site's WAN group runs
 * one engine per streaming fragment; they share the group's mesh. Going out, an engine's
 * message leaves with its fragment in the header's fragment field; coming in, the mesh hands
 * every message to the port, which gives the outer protocol's (DELTA, RESULT, JOIN, FIN, PULL)
 * to the engine of their fragment and any other (the state transfer, probes) to its owner's
 * handler. So a contribution crosses each layer boundary once each way: diloco → outer → wan
 * going out, wan → outer → diloco coming in. */
#include "outer_internal.h"

#include <stdlib.h>
#include <string.h>

struct port_io {
    gt_outer_port_t *port;
    uint32_t f;
};

struct gt_outer_port {
    gt_wan_mesh_t *mesh;
    uint32_t n_fragments;
    gt_outer_t *engines[GT_OUTER_MAX_FRAGMENTS];
    struct port_io io[GT_OUTER_MAX_FRAGMENTS];
    gt_outer_other_fn other;
    void *other_ctx;
    uint64_t epoch_seen; /* the latest view epoch an outer message carried (atomic) */
    uint64_t bad;        /* outer messages for a fragment this port does not run (atomic) */
};

gt_status_t gt_outer_port_create(uint32_t n_fragments, gt_outer_other_fn other, void *other_ctx,
                                 gt_outer_port_t **port_p)
{
    if (!port_p || n_fragments == 0 || n_fragments > GT_OUTER_MAX_FRAGMENTS || !other)
        return GT_ERR_INVALID;
    gt_outer_port_t *p = calloc(1, sizeof *p);
    if (!p) return GT_ERR_NOMEM;
    p->n_fragments = n_fragments;
    p->other = other;
    p->other_ctx = other_ctx;
    for (uint32_t f = 0; f < n_fragments; f++) p->io[f] = (struct port_io){p, f};
    *port_p = p;
    return GT_OK;
}

void gt_outer_port_destroy(gt_outer_port_t *p)
{
    free(p);
}

static gt_status_t port_send(void *ctx, uint32_t dst, const gt_wan_msg_t *msg, const void *buf,
                             size_t len)
{
    const struct port_io *io = ctx;
    if (!io->port->mesh) return GT_ERR_CLOSED; /* not connected yet: counted by the engine */
    gt_wan_msg_t m = *msg;
    m.fragment = (uint16_t)io->f;
    return gt_wan_mesh_send(io->port->mesh, dst, &m, buf, len);
}

static int port_reachable(void *ctx, uint32_t site)
{
    const struct port_io *io = ctx;
    return io->port->mesh && gt_wan_mesh_peer_ready(io->port->mesh, site);
}

gt_outer_io_t gt_outer_port_io(gt_outer_port_t *p, uint32_t fragment)
{
    gt_outer_io_t io = {NULL, NULL, NULL};
    if (!p || fragment >= p->n_fragments) return io;
    io.ctx = &p->io[fragment];
    io.send = port_send;
    io.reachable = port_reachable;
    return io;
}

gt_status_t gt_outer_port_attach(gt_outer_port_t *p, uint32_t fragment, gt_outer_t *engine)
{
    if (!p || fragment >= p->n_fragments) return GT_ERR_INVALID;
    p->engines[fragment] = engine;
    return GT_OK;
}

void gt_outer_port_set_mesh(gt_outer_port_t *p, gt_wan_mesh_t *mesh)
{
    if (p) p->mesh = mesh;
}

static int outer_type(uint8_t type)
{
    return type == GT_WAN_MSG_DELTA || type == GT_WAN_MSG_RESULT || type == GT_WAN_MSG_JOIN ||
           type == GT_WAN_MSG_FIN || type == GT_WAN_MSG_PULL;
}

void gt_outer_port_on_message(void *ctx, const gt_wan_msg_t *msg, const void *buf, size_t len)
{
    gt_outer_port_t *p = ctx;
    if (!outer_type(msg->type)) {
        p->other(p->other_ctx, msg, buf, len);
        return;
    }
    gt_outer_t *o = msg->fragment < p->n_fragments ? p->engines[msg->fragment] : NULL;
    if (!o) {
        __atomic_add_fetch(&p->bad, 1, __ATOMIC_RELAXED);
        GT_WARN("outer: rejected a message from site %u: fragment %u, this run has %u", msg->sender,
                (unsigned)msg->fragment, p->n_fragments);
        return;
    }
    if (msg->type == GT_WAN_MSG_DELTA || msg->type == GT_WAN_MSG_RESULT) {
        uint64_t seen = __atomic_load_n(&p->epoch_seen, __ATOMIC_RELAXED);
        while (msg->view_epoch > seen &&
               !__atomic_compare_exchange_n(&p->epoch_seen, &seen, msg->view_epoch, 1,
                                            __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        }
    }
    (void)gt_outer_deliver(o, msg, buf, len, gt_time_ns());
}

uint64_t gt_outer_port_epoch_seen(const gt_outer_port_t *p)
{
    return p ? __atomic_load_n(&p->epoch_seen, __ATOMIC_RELAXED) : 0;
}

uint64_t gt_outer_port_bad(const gt_outer_port_t *p)
{
    return p ? __atomic_load_n(&p->bad, __ATOMIC_RELAXED) : 0;
}
