/* mesh_internal.h — one site's connections to every other site, built from sites.yaml.
 *
 * The mesh owns the site's gt_wan_net (transport, secure channel, optional emulator from
 * wan.emulation/links), listens on the site's address, and keeps one endpoint per live peer:
 * the site with the higher index connects, the lower one accepts, so each pair has exactly one
 * connection. Messages are copied on send (callers may reuse their buffers), queued while a
 * peer is still connecting, and every received message is handed to the on_message callback.
 * A peer whose endpoint fails is marked down and re-dialled when the view still lists it.
 */
#ifndef GT_WAN_MESH_INTERNAL_H
#define GT_WAN_MESH_INTERNAL_H

#include "gt_topology.h"
#include "gt_wan.h"
#include "membership_internal.h"

typedef struct {
    const gt_topo_config_t *cfg;
    uint32_t site;                   /* this site's index in cfg->sites */
    const char *run_id;              /* both ends must agree */
    const gt_wan_keypair_t *keypair; /* required unless security.mode is none */
    size_t max_message;              /* largest payload a peer may send us */
    uint64_t start_ns;               /* origin of emulated link cuts */
    void (*on_message)(void *ctx, const gt_wan_msg_t *msg, const void *buf, size_t len);
    void *ctx;
} gt_wan_mesh_params_t;

typedef struct {
    uint64_t bytes_sent, bytes_received; /* payload bytes, all endpoints, closed ones too */
    uint64_t msgs_sent, msgs_received;
    uint64_t rejected;      /* frames rejected by the secure channel */
    uint64_t send_failures; /* messages lost with a failed endpoint */
    uint64_t peers_lost;    /* endpoints that failed */
} gt_wan_mesh_stats_t;

typedef struct gt_wan_mesh gt_wan_mesh_t;

gt_status_t gt_wan_mesh_create(const gt_wan_mesh_params_t *params,
                               gt_wan_mesh_t **mesh_p) GT_MUST_USE;
void gt_wan_mesh_destroy(gt_wan_mesh_t *mesh);

/* host:port peers should dial (the actual port when sites.yaml says port 0). */
const char *gt_wan_mesh_address(const gt_wan_mesh_t *mesh);

/* Dials the view's members that this site should dial and forgets endpoints of sites that
 * left the view. Members are matched to sites.yaml by name. */
gt_status_t gt_wan_mesh_set_view(gt_wan_mesh_t *mesh, const gt_wan_view_t *view) GT_MUST_USE;

/* Queues a copy of buf for site `dst`. */
gt_status_t gt_wan_mesh_send(gt_wan_mesh_t *mesh, uint32_t dst, const gt_wan_msg_t *msg,
                             const void *buf, size_t len) GT_MUST_USE;

/* Non-blocking: transport progress, accepts, completions, deliveries, re-dials. */
gt_status_t gt_wan_mesh_progress(gt_wan_mesh_t *mesh);

/* 1 while `site` has a ready endpoint. */
int gt_wan_mesh_peer_ready(const gt_wan_mesh_t *mesh, uint32_t site);

/* Messages queued or in flight (0 when every send has completed). */
size_t gt_wan_mesh_pending(const gt_wan_mesh_t *mesh);

void gt_wan_mesh_stats(const gt_wan_mesh_t *mesh, gt_wan_mesh_stats_t *stats_p);

#endif /* GT_WAN_MESH_INTERNAL_H */
