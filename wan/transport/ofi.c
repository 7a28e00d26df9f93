/* ofi.c — the libfabric backend: connected FI_EP_MSG endpoints of the `tcp` provider.
 *
 * Why msg endpoints and not RDM: a WAN link is a connection between two sites, and the
 * connection manager's events (FI_CONNREQ/FI_CONNECTED/FI_SHUTDOWN on an event queue) are
 * exactly the liveness signal we need — a killed peer's socket closes and the endpoint
 * errors. The `sockets` provider is avoided (much slower here); FI_PROVIDER may still
 * override the choice for experiments.
 *
 * Connecting: nothing of libfabric listens on a well-known port. Once the channel has
 * authenticated the peer on its own control connection, the side that accepted that connection
 * (the responder) opens a passive endpoint for this one connection on a free port of the site's
 * address, and its address for the peer is that port and 16 random bytes; the initiator
 * connects to the port with the 16 bytes as the connect request's data. The responder accepts
 * only a request that carries them (compared in constant time; any other is rejected and
 * counted) and closes the passive endpoint once connected or at the deadline, so it exists for
 * the one exchange that needs it.
 *
 * Each endpoint owns its event queue, domain and completion queue, so an endpoint that dies
 * is torn down alone (closing its CQ guarantees no completion can later name a request the
 * caller has freed). Sends posted before the connection is up, or refused with FI_EAGAIN, wait
 * in a queue that progress() drains.
 */
#include "transport_internal.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OFI_API_VERSION FI_VERSION(1, 9)
#define OFI_CQ_BATCH    16
#define OFI_ADDR_MAGIC  0x41665447u /* "GTfA" as little-endian bytes */
#define OFI_TOKEN_BYTES 16u

typedef struct ofi_ctx ofi_ctx_t;
typedef struct ofi_ep ofi_ep_t;

struct ofi_ep {
    ofi_ctx_t *ctx;
    struct fi_info *info;
    struct fid_fabric *fabric; /* owned only when own_fabric */
    int own_fabric;
    int responder;            /* accepts the data connection on its own passive endpoint */
    struct fi_info *pep_info; /* responder, until connected: the passive endpoint */
    struct fid_eq *pep_eq;
    struct fid_pep *pep;
    uint8_t token[OFI_TOKEN_BYTES]; /* what the connect request must carry */
    struct fid_eq *eq;
    struct fid_domain *domain;
    struct fid_cq *cq;
    struct fid_ep *ep;
    gt_status_t state;        /* GT_ERR_AGAIN connecting, GT_OK up, else the error */
    uint64_t deadline_ns;     /* connect deadline */
    gt_wan_tp_list_t waiting; /* sends not yet handed to the provider */
    gt_wan_tp_list_t posted;  /* sends and receives the provider holds */
    ofi_ep_t *next;           /* ctx->eps */
};

struct ofi_ctx {
    gt_wan_tp_params_t params;
    char host[256];     /* where passive endpoints bind ("" = any) */
    uint32_t next_port; /* wan.data_ports: the offset the next search starts at */
    ofi_ep_t *eps;
    gt_wan_tp_stats_t stats;
};

static struct fi_info *ofi_hints(void)
{
    struct fi_info *h = fi_allocinfo();
    if (!h) return NULL;
    h->ep_attr->type = FI_EP_MSG;
    h->caps = FI_MSG;
    h->mode = 0;
    h->domain_attr->mr_mode = 0;
    h->domain_attr->threading = FI_THREAD_DOMAIN;
    const char *prov = getenv("FI_PROVIDER");
    h->fabric_attr->prov_name = strdup(prov && *prov ? prov : "tcp");
    if (!h->fabric_attr->prov_name) {
        fi_freeinfo(h);
        return NULL;
    }
    return h;
}

static gt_status_t ofi_err(const char *what, int rc)
{
    GT_ERROR("libfabric: %s: %s", what, fi_strerror(rc < 0 ? -rc : rc));
    return rc == -FI_ENOMEM ? GT_ERR_NOMEM : GT_ERR_IO;
}

static void ofi_fail_all(ofi_ep_t *e, gt_status_t st)
{
    gt_wan_tp_req_t *r;
    while ((r = gt_wan_tp_list_pop(&e->posted)) || (r = gt_wan_tp_list_pop(&e->waiting))) {
        free(r->bk);
        r->bk = NULL;
        gt_wan_tp_req_complete(r, st, 0);
    }
}

/* Closes the provider objects of an endpoint (not the struct). */
static void ofi_pep_close(ofi_ep_t *e)
{
    if (e->pep) fi_close(&e->pep->fid);
    if (e->pep_eq) fi_close(&e->pep_eq->fid);
    if (e->pep_info) fi_freeinfo(e->pep_info);
    e->pep = NULL;
    e->pep_eq = NULL;
    e->pep_info = NULL;
}

static void ofi_ep_teardown(ofi_ep_t *e)
{
    ofi_pep_close(e);
    if (e->ep) fi_close(&e->ep->fid);
    if (e->cq) fi_close(&e->cq->fid);
    if (e->eq) fi_close(&e->eq->fid);
    if (e->domain) fi_close(&e->domain->fid);
    if (e->own_fabric && e->fabric) fi_close(&e->fabric->fid);
    if (e->info) fi_freeinfo(e->info);
    e->ep = NULL;
    e->cq = NULL;
    e->eq = NULL;
    e->domain = NULL;
    e->fabric = NULL;
    e->info = NULL;
}

/* The endpoint is dead: tear it down first so no completion can name a request, then fail
 * every request it held. */
static void ofi_ep_fail(ofi_ep_t *e, gt_status_t st)
{
    if (e->state != GT_OK && e->state != GT_ERR_AGAIN) return;
    e->state = st;
    ofi_ep_teardown(e);
    ofi_fail_all(e, st);
}

/* Opens eq/domain/cq/ep for `info` on `fabric` and enables it. */
static gt_status_t ofi_ep_open(ofi_ep_t *e)
{
    struct fi_eq_attr eq_attr = {.size = 16, .wait_obj = FI_WAIT_NONE};
    struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_MSG, .wait_obj = FI_WAIT_NONE};
    int rc;
    cq_attr.size = e->info->tx_attr->size + e->info->rx_attr->size;
    if ((rc = fi_eq_open(e->fabric, &eq_attr, &e->eq, NULL))) return ofi_err("fi_eq_open", rc);
    if ((rc = fi_domain(e->fabric, e->info, &e->domain, NULL))) return ofi_err("fi_domain", rc);
    if ((rc = fi_cq_open(e->domain, &cq_attr, &e->cq, NULL))) return ofi_err("fi_cq_open", rc);
    if ((rc = fi_endpoint(e->domain, e->info, &e->ep, e))) return ofi_err("fi_endpoint", rc);
    if ((rc = fi_ep_bind(e->ep, &e->eq->fid, 0))) return ofi_err("fi_ep_bind eq", rc);
    if ((rc = fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV)))
        return ofi_err("fi_ep_bind cq", rc);
    if ((rc = fi_enable(e->ep))) return ofi_err("fi_enable", rc);
    return GT_OK;
}

static gt_status_t ofi_create(const gt_wan_tp_params_t *params, void **ctx_p)
{
    ofi_ctx_t *c = calloc(1, sizeof *c);
    if (!c) return GT_ERR_NOMEM;
    c->params = *params;
    if (params->local_host) snprintf(c->host, sizeof c->host, "%s", params->local_host);
    c->params.local_host = c->host;
    *ctx_p = c;
    return GT_OK;
}

static void ofi_close(void *ep, int force);

static void ofi_destroy(void *ctx)
{
    ofi_ctx_t *c = ctx;
    if (!c) return;
    while (c->eps) ofi_close(c->eps, 1);
    free(c);
}

static ofi_ep_t *ofi_ep_new(ofi_ctx_t *c)
{
    ofi_ep_t *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->ctx = c;
    e->state = GT_ERR_AGAIN;
    e->deadline_ns = gt_time_ns() + c->params.connect_timeout_ns;
    e->next = c->eps;
    c->eps = e;
    return e;
}

static void ofi_ep_unlink(ofi_ep_t *e)
{
    ofi_ctx_t *c = e->ctx;
    for (ofi_ep_t **pp = &c->eps; *pp; pp = &(*pp)->next)
        if (*pp == e) {
            *pp = e->next;
            break;
        }
}

static void ofi_put(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t ofi_get(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* A passive endpoint on `service` (a port) of the site's address; GT_ERR_EXISTS when that port is
 * taken (the caller tries the next of wan.data_ports), its objects closed again. */
static gt_status_t ofi_pep_try(ofi_ep_t *e, const char *service)
{
    ofi_ctx_t *c = e->ctx;
    int rc;
    struct fi_info *hints = ofi_hints();
    if (!hints) return GT_ERR_NOMEM;
    const char *host = c->host[0] ? c->host : NULL;
    rc = fi_getinfo(OFI_API_VERSION, host, service, FI_SOURCE, hints, &e->pep_info);
    fi_freeinfo(hints);
    if (rc) {
        GT_ERROR("libfabric: no tcp msg provider for %s: %s", host ? host : "*", fi_strerror(-rc));
        return GT_ERR_UNSUPPORTED;
    }
    struct fi_eq_attr eq_attr = {.size = 8, .wait_obj = FI_WAIT_NONE};
    e->own_fabric = 1;
    if ((rc = fi_fabric(e->pep_info->fabric_attr, &e->fabric, NULL)))
        return ofi_err("fi_fabric", rc);
    if ((rc = fi_eq_open(e->fabric, &eq_attr, &e->pep_eq, NULL))) return ofi_err("fi_eq_open", rc);
    int ranged = strcmp(service, "0") != 0;
    if ((rc = fi_passive_ep(e->fabric, e->pep_info, &e->pep, NULL))) {
        if (rc == -FI_EADDRINUSE && ranged) goto taken;
        return ofi_err("fi_passive_ep", rc);
    }
    gt_wan_tp_listen_lock(); /* no listener appears while UCX starts (ucx.c) */
    if (!(rc = fi_pep_bind(e->pep, &e->pep_eq->fid, 0))) rc = fi_listen(e->pep);
    gt_wan_tp_listen_unlock();
    if (rc == -FI_EADDRINUSE && ranged) goto taken;
    if (rc) return ofi_err("fi_listen", rc);
    return GT_OK;
taken:
    ofi_pep_close(e);
    fi_close(&e->fabric->fid);
    e->fabric = NULL;
    return GT_ERR_EXISTS;
}

/* Opens the responder's passive endpoint on a free port of the site's address: any
 * (ephemeral), or one of [data_port_min, data_port_max] (wan.data_ports), tried from where the
 * last search left off. */
static gt_status_t ofi_pep_open(ofi_ep_t *e, uint16_t *port_p)
{
    ofi_ctx_t *c = e->ctx;
    int rc;
    gt_status_t st;
    uint32_t lo = c->params.data_port_min, hi = c->params.data_port_max;
    if (!lo) {
        if ((st = ofi_pep_try(e, "0")) != GT_OK) return st;
    } else {
        uint32_t n = hi - lo + 1, k = 0;
        for (st = GT_ERR_EXISTS; k < n && st == GT_ERR_EXISTS; k++) {
            char service[8];
            snprintf(service, sizeof service, "%u", (unsigned)(lo + (c->next_port + k) % n));
            st = ofi_pep_try(e, service);
        }
        c->next_port = (c->next_port + k) % n;
        if (st == GT_ERR_EXISTS)
            GT_ERROR("libfabric: every port of wan.data_ports %u-%u on %s is in use", lo, hi,
                     c->host[0] ? c->host : "*");
        if (st != GT_OK) return st;
    }
    struct sockaddr_storage sa;
    size_t salen = sizeof sa;
    if ((rc = fi_getname(&e->pep->fid, &sa, &salen))) return ofi_err("fi_getname", rc);
    if (sa.ss_family == AF_INET)
        *port_p = ntohs(((struct sockaddr_in *)&sa)->sin_port);
    else
        *port_p = ntohs(((struct sockaddr_in6 *)&sa)->sin6_port);
    return GT_OK;
}

/* Address: magic u32, port u16, token (responder); magic only (initiator). */
static gt_status_t ofi_ep_open_(void *ctx, int responder, const char *peer_host, void *owner,
                                void **ep_p, void *addr, size_t cap, size_t *len_p)
{
    ofi_ctx_t *c = ctx;
    uint8_t *p = addr;
    (void)peer_host;
    (void)owner;
    if (cap < 6 + OFI_TOKEN_BYTES) return GT_ERR_OVERFLOW;
    ofi_ep_t *e = ofi_ep_new(c);
    if (!e) return GT_ERR_NOMEM;
    gt_status_t st = GT_OK;
    e->responder = responder;
    ofi_put(p, OFI_ADDR_MAGIC, 4);
    *len_p = 4;
    if (responder) {
        uint16_t port = 0;
        if ((st = gt_wan_tp_random(e->token, sizeof e->token)) != GT_OK ||
            (st = ofi_pep_open(e, &port)) != GT_OK)
            goto fail;
        ofi_put(p + 4, port, 2);
        memcpy(p + 6, e->token, OFI_TOKEN_BYTES);
        *len_p = 6 + OFI_TOKEN_BYTES;
    }
    *ep_p = e;
    return GT_OK;
fail:
    ofi_ep_teardown(e);
    ofi_ep_unlink(e);
    free(e);
    return st;
}

static gt_status_t ofi_ep_connect(void *ep, const char *peer_host, const void *addr, size_t len)
{
    ofi_ep_t *e = ep;
    const uint8_t *p = addr;
    char service[16];
    int rc;
    if (e->state != GT_ERR_AGAIN || e->ep) return GT_ERR_INVALID;
    if (len < 4 || ofi_get(p, 4) != OFI_ADDR_MAGIC) {
        GT_ERROR("libfabric: the peer's data-path address is not a libfabric one");
        return GT_ERR_CORRUPT;
    }
    if (e->responder) return GT_OK; /* the peer connects to our passive endpoint */
    if (len != 6 + OFI_TOKEN_BYTES) {
        GT_ERROR("libfabric: the peer's data-path address has %zu bytes", len);
        return GT_ERR_CORRUPT;
    }
    snprintf(service, sizeof service, "%u", (unsigned)ofi_get(p + 4, 2));
    struct fi_info *hints = ofi_hints();
    if (!hints) return GT_ERR_NOMEM;
    rc = fi_getinfo(OFI_API_VERSION, peer_host, service, 0, hints, &e->info);
    fi_freeinfo(hints);
    if (rc) {
        GT_ERROR("libfabric: cannot reach %s:%s with the tcp provider: %s", peer_host, service,
                 fi_strerror(-rc));
        return GT_ERR_NOT_FOUND;
    }
    gt_status_t st;
    e->own_fabric = 1;
    if ((rc = fi_fabric(e->info->fabric_attr, &e->fabric, NULL))) return ofi_err("fi_fabric", rc);
    if ((st = ofi_ep_open(e)) != GT_OK) return st;
    if ((rc = fi_connect(e->ep, e->info->dest_addr, p + 6, OFI_TOKEN_BYTES)))
        return ofi_err("fi_connect", rc);
    return GT_OK;
}

static int ofi_token_equal(const uint8_t *a, const uint8_t *b)
{
    uint8_t d = 0;
    for (unsigned i = 0; i < OFI_TOKEN_BYTES; i++) d |= (uint8_t)(a[i] ^ b[i]);
    return d == 0;
}

/* The responder's passive endpoint: accept the one connect request that carries our token. */
static void ofi_progress_pep(ofi_ep_t *e)
{
    struct {
        struct fi_eq_cm_entry entry;
        uint8_t data[256];
    } ev;
    uint32_t event;
    while (e->pep_eq && e->state == GT_ERR_AGAIN) {
        ssize_t rd = fi_eq_read(e->pep_eq, &event, &ev, sizeof ev, 0);
        if (rd == -FI_EAGAIN) return;
        if (rd == -FI_EAVAIL) {
            struct fi_eq_err_entry err = {0};
            fi_eq_readerr(e->pep_eq, &err, 0);
            GT_DEBUG("libfabric: passive endpoint error: %s", fi_strerror(err.err));
            continue;
        }
        if (rd < 0) return;
        if (event != FI_CONNREQ) continue;
        struct fi_info *info = ev.entry.info;
        size_t dlen = (size_t)rd > sizeof ev.entry ? (size_t)rd - sizeof ev.entry : 0;
        if (e->ep || dlen != OFI_TOKEN_BYTES || !ofi_token_equal(ev.data, e->token)) {
            e->ctx->stats.stray++;
            GT_WARN("libfabric: refused a data connection that did not carry this link's token");
            if (info && info->handle) fi_reject(e->pep, info->handle, NULL, 0);
            fi_freeinfo(info);
            continue;
        }
        e->info = info;
        int rc = 0;
        if (ofi_ep_open(e) != GT_OK || (rc = fi_accept(e->ep, NULL, 0)) != 0) {
            GT_WARN("libfabric: could not accept the data connection");
            ofi_ep_fail(e, GT_ERR_IO);
            return;
        }
    }
}
static gt_status_t ofi_ep_state(void *ep)
{
    return ((ofi_ep_t *)ep)->state;
}

/* A send's private state: its gather list and total. */
typedef struct {
    struct iovec iov[GT_WAN_TP_MAX_IOV];
    size_t iovcnt, total;
} ofi_send_bk_t;

/* Hands one request to the provider: GT_OK posted, GT_ERR_AGAIN queue full, else error. */
static gt_status_t ofi_post(ofi_ep_t *e, gt_wan_tp_req_t *r)
{
    ofi_send_bk_t *bk = r->bk;
    ssize_t rc = fi_sendv(e->ep, bk->iov, NULL, bk->iovcnt, 0, r);
    if (rc == -FI_EAGAIN) return GT_ERR_AGAIN;
    if (rc) return ofi_err("fi_sendv", (int)rc);
    return GT_OK;
}

static gt_status_t ofi_send(void *ep, const struct iovec *iov, size_t iovcnt, gt_wan_tp_req_t *req)
{
    ofi_ep_t *e = ep;
    if (iovcnt == 0 || iovcnt > GT_WAN_TP_MAX_IOV) return GT_ERR_INVALID;
    size_t total = 0;
    for (size_t i = 0; i < iovcnt; i++) total += iov[i].iov_len;
    if (total > GT_WAN_TP_MAX_MSG) return GT_ERR_OVERFLOW;
    if (e->state != GT_OK && e->state != GT_ERR_AGAIN) return e->state;
    ofi_send_bk_t *bk = malloc(sizeof *bk);
    if (!bk) return GT_ERR_NOMEM;
    memcpy(bk->iov, iov, iovcnt * sizeof *iov);
    bk->iovcnt = iovcnt;
    bk->total = total;
    req->status = GT_ERR_AGAIN;
    req->ep = e;
    req->bk = bk;
    req->length = 0;
    if (e->state == GT_OK && e->waiting.count == 0) {
        gt_status_t st = ofi_post(e, req);
        if (st == GT_OK) {
            gt_wan_tp_list_push(&e->posted, req);
            return GT_OK;
        }
        if (st != GT_ERR_AGAIN) {
            free(bk);
            req->bk = NULL;
            return st;
        }
    }
    gt_wan_tp_list_push(&e->waiting, req);
    return GT_OK;
}

static gt_status_t ofi_recv(void *ep, void *buf, size_t cap, gt_wan_tp_req_t *req)
{
    ofi_ep_t *e = ep;
    if (e->state != GT_OK && e->state != GT_ERR_AGAIN) return e->state;
    req->status = GT_ERR_AGAIN;
    req->ep = e;
    req->bk = NULL; /* marks a receive */
    ssize_t rc = fi_recv(e->ep, buf, cap, NULL, 0, req);
    if (rc == -FI_EAGAIN) return GT_ERR_AGAIN; /* receive queue full: progress, retry */
    if (rc) return ofi_err("fi_recv", (int)rc);
    gt_wan_tp_list_push(&e->posted, req);
    return GT_OK;
}

static void ofi_complete(ofi_ep_t *e, gt_wan_tp_req_t *r, gt_status_t st, size_t len)
{
    gt_wan_tp_list_remove(&e->posted, r);
    if (r->bk) { /* a send: report the bytes it carried */
        ofi_send_bk_t *bk = r->bk;
        len = st == GT_OK ? bk->total : 0;
        free(bk);
        r->bk = NULL;
    }
    gt_wan_tp_req_complete(r, st, len);
}

static void ofi_progress_cq(ofi_ep_t *e)
{
    struct fi_cq_msg_entry ent[OFI_CQ_BATCH];
    for (;;) {
        if (!e->cq) return;
        ssize_t n = fi_cq_read(e->cq, ent, OFI_CQ_BATCH);
        if (n == -FI_EAGAIN) return;
        if (n == -FI_EAVAIL) {
            struct fi_cq_err_entry err = {0};
            if (fi_cq_readerr(e->cq, &err, 0) > 0) {
                gt_wan_tp_req_t *r = err.op_context;
                GT_DEBUG("libfabric: completion error: %s", fi_strerror(err.err));
                if (r)
                    ofi_complete(e, r, err.err == FI_ETRUNC ? GT_ERR_OVERFLOW : GT_ERR_PEER_LOST,
                                 0);
            }
            ofi_ep_fail(e, GT_ERR_PEER_LOST);
            return;
        }
        if (n < 0) {
            ofi_err("fi_cq_read", (int)n);
            ofi_ep_fail(e, GT_ERR_PEER_LOST);
            return;
        }
        for (ssize_t i = 0; i < n; i++) ofi_complete(e, ent[i].op_context, GT_OK, ent[i].len);
        if (n < OFI_CQ_BATCH) return;
    }
}

static void ofi_progress_eq(ofi_ep_t *e)
{
    struct fi_eq_cm_entry entry;
    uint32_t event;
    while (e->eq) {
        ssize_t rd = fi_eq_read(e->eq, &event, &entry, sizeof entry, 0);
        if (rd == -FI_EAGAIN) return;
        if (rd == -FI_EAVAIL) {
            struct fi_eq_err_entry err = {0};
            fi_eq_readerr(e->eq, &err, 0);
            GT_WARN("libfabric: connection error: %s", fi_strerror(err.err));
            ofi_ep_fail(e, e->state == GT_ERR_AGAIN ? GT_ERR_NOT_FOUND : GT_ERR_PEER_LOST);
            return;
        }
        if (rd < 0) {
            ofi_ep_fail(e, GT_ERR_PEER_LOST);
            return;
        }
        if (event == FI_CONNECTED && e->state == GT_ERR_AGAIN) {
            e->state = GT_OK;
            ofi_pep_close(e); /* its one connection is made */
        } else if (event == FI_SHUTDOWN) {
            /* Completions the provider holds come first: a send the peer received (and
             * answered) before it closed must not be reported as lost. */
            GT_DEBUG("libfabric: peer shut the connection down");
            ofi_progress_cq(e);
            if (e->state == GT_OK || e->state == GT_ERR_AGAIN) ofi_ep_fail(e, GT_ERR_PEER_LOST);
            return;
        }
    }
}

static void ofi_drain_waiting(ofi_ep_t *e)
{
    gt_wan_tp_req_t *r;
    while (e->state == GT_OK && (r = e->waiting.head) != NULL) {
        gt_status_t st = ofi_post(e, r);
        if (st == GT_ERR_AGAIN) return;
        gt_wan_tp_list_remove(&e->waiting, r);
        if (st != GT_OK) {
            free(r->bk);
            r->bk = NULL;
            gt_wan_tp_req_complete(r, st, 0);
            ofi_ep_fail(e, st);
            return;
        }
        gt_wan_tp_list_push(&e->posted, r);
    }
}

static gt_status_t ofi_progress(void *ctx)
{
    ofi_ctx_t *c = ctx;
    uint64_t now = gt_time_ns();
    for (ofi_ep_t *e = c->eps; e; e = e->next) {
        if (e->state != GT_OK && e->state != GT_ERR_AGAIN) continue;
        ofi_progress_pep(e);
        ofi_progress_eq(e); /* drains the completions itself before an FI_SHUTDOWN */
        ofi_progress_cq(e);
        ofi_drain_waiting(e);
        if (e->state == GT_ERR_AGAIN && now > e->deadline_ns) {
            GT_WARN("libfabric: connection not established within %.1f s",
                    (double)c->params.connect_timeout_ns / 1e9);
            ofi_ep_fail(e, GT_ERR_TIMEOUT);
        }
    }
    return GT_OK;
}

static void ofi_close(void *ep, int force)
{
    ofi_ep_t *e = ep;
    if (!e) return;
    ofi_ep_unlink(e);
    /* Completed sends are in the kernel's socket buffer, which a close still delivers; an
     * unforced close only adds the orderly shutdown. */
    if (e->ep && !force) fi_shutdown(e->ep, 0);
    ofi_ep_teardown(e);
    ofi_fail_all(e, GT_ERR_CLOSED);
    free(e);
}

static void ofi_stats(void *ctx, gt_wan_tp_stats_t *stats_p)
{
    *stats_p = ((ofi_ctx_t *)ctx)->stats;
}

const gt_wan_tp_ops_t gt_wan_tp_ofi_ops = {
    .version = GT_WAN_TP_OPS_VERSION,
    .name = "libfabric",
    .create = ofi_create,
    .destroy = ofi_destroy,
    .ep_open = ofi_ep_open_,
    .ep_connect = ofi_ep_connect,
    .ep_state = ofi_ep_state,
    .send = ofi_send,
    .recv = ofi_recv,
    .progress = ofi_progress,
    .close = ofi_close,
    .stats = ofi_stats,
};
