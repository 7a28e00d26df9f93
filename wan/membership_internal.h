/* membership_internal.h — site membership through etcd's v3 JSON gateway (DESIGN.md §4).
 *
 * Each site holds a lease (TTL lease_ttl_s, renewed every heartbeat_ms by a background
 * thread) on its member key PREFIX/RUN/members/SITE, whose value is JSON {name, address}.
 * A site that dies stops renewing; etcd deletes its key when the lease runs out. The view —
 * {epoch, sorted member list} at PREFIX/RUN/view — changes only by compare-and-swap on the
 * key's mod_revision, so when several sites notice the same change at once exactly one
 * proposal wins and everyone reads the same epoch. etcd is a Raft cluster: with members in
 * three sites the control plane survives the loss of one site; the client tries every
 * endpoint in turn, and every request has a timeout, so a dead endpoint never hangs a site.
 */
#ifndef GT_WAN_MEMBERSHIP_INTERNAL_H
#define GT_WAN_MEMBERSHIP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gt_base.h"

#define GT_WAN_MEMBER_NAME_MAX 64
#define GT_WAN_MEMBER_ADDR_MAX 256
#define GT_WAN_MAX_MEMBERS     64

typedef struct {
    const char *const *endpoints; /* etcd client URLs, http://host:port */
    size_t n_endpoints;
    const char *prefix;  /* key prefix, starts with '/' */
    const char *run_id;  /* scopes all keys of one run */
    const char *site;    /* this site's name */
    const char *address; /* what peers should connect to */
    uint32_t lease_ttl_s;
    uint32_t heartbeat_ms;
    uint32_t request_timeout_ms; /* per HTTP request, connect included */
} gt_wan_member_params_t;

#define GT_WAN_MEMBER_PARAMS_INIT                            \
    {                                                        \
        NULL, 0, "/geotrain", "run", NULL, "", 5, 1000, 2000 \
    }

typedef struct {
    char name[GT_WAN_MEMBER_NAME_MAX];
    char address[GT_WAN_MEMBER_ADDR_MAX];
} gt_wan_member_info_t;

typedef struct {
    uint64_t epoch; /* 0: no view yet */
    uint32_t n_members;
    gt_wan_member_info_t members[GT_WAN_MAX_MEMBERS]; /* sorted by name */
} gt_wan_view_t;

typedef struct gt_wan_member gt_wan_member_t;

/* Registers this site: grants a lease and creates its member key with it. Fails with
 * GT_ERR_EXISTS when a live site already holds the name, GT_ERR_TIMEOUT / GT_ERR_IO when no
 * endpoint answers. Starts the heartbeat thread. */
gt_status_t gt_wan_member_create(const gt_wan_member_params_t *params,
                                 gt_wan_member_t **member_p) GT_MUST_USE;

/* Leaves: stops the heartbeat and revokes the lease, so the others see the site go at once
 * rather than after the TTL. Accepts NULL. */
void gt_wan_member_destroy(gt_wan_member_t *m);

/* Stops heartbeats without revoking the lease: what a crash looks like to the others (for
 * tests and chaos runs). The member must still be destroyed. */
void gt_wan_member_abandon(gt_wan_member_t *m);

/* GT_OK while the lease is held; GT_ERR_PEER_LOST once it expired or could not be renewed
 * within its TTL (this site has been removed by the others and must rejoin). */
gt_status_t gt_wan_member_health(const gt_wan_member_t *m);

/* The sites whose member keys exist now (sorted by name). */
gt_status_t gt_wan_member_list(gt_wan_member_t *m, gt_wan_view_t *live_p) GT_MUST_USE;

/* The current view; epoch 0 and no members when none was agreed yet. */
gt_status_t gt_wan_member_view(gt_wan_member_t *m, gt_wan_view_t *view_p) GT_MUST_USE;

/* Moves the view to the live member set when they differ: proposes epoch + 1 by compare-and-
 * swap and, whether this proposal or another site's won, returns the view now agreed.
 * *changed_p is 1 when the returned epoch is newer than the one read first. */
gt_status_t gt_wan_member_sync_view(gt_wan_member_t *m, gt_wan_view_t *view_p,
                                    int *changed_p) GT_MUST_USE;

/* Proposes `next` (its epoch must be the current epoch + 1) against the view read at
 * `expected_revision`; GT_ERR_AGAIN when another proposal won first. Used by sync_view;
 * exposed for tests of the compare-and-swap. */
gt_status_t gt_wan_member_propose(gt_wan_member_t *m, const gt_wan_view_t *next,
                                  int64_t expected_revision) GT_MUST_USE;

/* The mod_revision of the view key as last read by gt_wan_member_view (0: no view key). */
int64_t gt_wan_member_view_revision(const gt_wan_member_t *m);

/* ---- A local one-node etcd (etcd_local.c) ---- */

typedef struct {
    int pid; /* 0 when not running */
    int client_port, peer_port;
    char url[64]; /* http://127.0.0.1:PORT */
} gt_wan_etcd_local_t;

/* Starts Debian's etcd on free loopback ports with its data and log (etcd.log) under `dir`,
 * and waits until it answers /health (GT_ERR_TIMEOUT after timeout_ms). */
gt_status_t gt_wan_etcd_local_start(const char *dir, uint32_t timeout_ms,
                                    gt_wan_etcd_local_t *etcd_p) GT_MUST_USE;
/* Freezes (SIGSTOP) or thaws it: a frozen server accepts connections and never answers. */
void gt_wan_etcd_local_pause(gt_wan_etcd_local_t *e, int paused);
/* Stops it (SIGTERM, then SIGKILL after 5 s). Accepts NULL or a stopped one. */
void gt_wan_etcd_local_stop(gt_wan_etcd_local_t *e);
/* A TCP port on 127.0.0.1 that was free a moment ago; -1 if none. */
int gt_wan_free_port(void);

#endif /* GT_WAN_MEMBERSHIP_INTERNAL_H */
