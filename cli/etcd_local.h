/* etcd_local.h — etcd on free loopback ports (etcd_local.c), for `geotrain launch` when
 * sites.yaml names no membership endpoints, for `bench scale`, and for tests that need a real
 * etcd server. Part of the CLI, not of the library: a library user brings their own etcd.
 */
#ifndef GT_CLI_ETCD_LOCAL_H
#define GT_CLI_ETCD_LOCAL_H

#include <stddef.h>
#include <stdint.h>

#include "gt_base.h"

typedef struct {
    int pid; /* 0 when not running */
    int client_port, peer_port;
    char url[64]; /* http://127.0.0.1:PORT */
} gt_etcd_local_t;

/* Starts Debian's etcd on free loopback ports with its data and log (etcd.log) under `dir`,
 * and waits until it answers /health (GT_ERR_TIMEOUT after timeout_ms). */
gt_status_t gt_etcd_local_start(const char *dir, uint32_t timeout_ms,
                                gt_etcd_local_t *etcd_p) GT_MUST_USE;
/* Freezes (SIGSTOP; returns once the whole process is stopped, at most 2 s) or thaws it: a
 * frozen server accepts connections and never answers. */
void gt_etcd_local_pause(gt_etcd_local_t *e, int paused);
/* Stops it (SIGTERM, then SIGKILL after 5 s). Accepts NULL or a stopped one. */
void gt_etcd_local_stop(gt_etcd_local_t *e);
/* A TCP port on 127.0.0.1 that was free a moment ago; -1 if none. */
int gt_etcd_free_port(void);

/* A local etcd cluster of n members (Raft: it keeps working while a majority is up), each
 * member on its own free loopback ports with data and log under DIR/mI/. `endpoints` lists
 * every member's client URL, comma-separated, as membership.endpoints takes them. */
#define GT_ETCD_MAX_MEMBERS 7
typedef struct {
    size_t n_members;
    char tls_dir[1024]; /* "" for plain HTTP; else the CA and certificates (certs.h) */
    gt_etcd_local_t members[GT_ETCD_MAX_MEMBERS]; /* pid 0: not running */
    char endpoints[GT_ETCD_MAX_MEMBERS * 64];
    char initial_cluster[GT_ETCD_MAX_MEMBERS * 64];
    char dir[1024];
} gt_etcd_cluster_t;

/* Starts n (1..GT_ETCD_MAX_MEMBERS) members and waits until every one answers /health. */
gt_status_t gt_etcd_cluster_start(const char *dir, size_t n, uint32_t timeout_ms,
                                  gt_etcd_cluster_t *cl_p) GT_MUST_USE;
/* The same with client and peer TLS and certificates required of both (etcd's
 * --client-cert-auth, --peer-client-cert-auth), https:// endpoints. tls_dir holds a CA
 * (ca.crt, ca.key) or gets a new one; each member gets mI.crt/mI.key (127.0.0.1 and localhost,
 * server and client use) and the health check dials with GT_ETCD_TLS_ADMIN.crt/.key, made
 * there when absent. A site dials with a client certificate of the same CA (gt_certs_issue). */
#define GT_ETCD_TLS_ADMIN "admin"
gt_status_t gt_etcd_cluster_start_tls(const char *dir, size_t n, uint32_t timeout_ms,
                                      const char *tls_dir, gt_etcd_cluster_t *cl_p) GT_MUST_USE;
/* Chaos: SIGKILLs member i (no-op when it is not running). */
void gt_etcd_cluster_kill(gt_etcd_cluster_t *c, size_t i);
/* Starts member i again on its ports and data (it rejoins the cluster); GT_OK if running. */
gt_status_t gt_etcd_cluster_restart(gt_etcd_cluster_t *c, size_t i) GT_MUST_USE;
/* Stops every member. Accepts NULL. */
void gt_etcd_cluster_stop(gt_etcd_cluster_t *c);

#endif /* GT_CLI_ETCD_LOCAL_H */
