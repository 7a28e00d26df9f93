/* transport.c — backend selection and the helpers both backends share (request completion,
 * request lists, "host:port" parsing). */
#include "transport_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const gt_wan_tp_ops_t *gt_wan_tp_ops(gt_wan_transport_t transport)
{
    const gt_wan_tp_ops_t *ops = NULL;
    switch (transport) {
    case GT_WAN_TRANSPORT_UCX: ops = &gt_wan_tp_ucx_ops; break;
    case GT_WAN_TRANSPORT_LIBFABRIC: ops = &gt_wan_tp_ofi_ops; break;
    default: return NULL;
    }
    if (ops->version != GT_WAN_TP_OPS_VERSION) {
        GT_ERROR("wan: transport %s has table version %u, expected %u", ops->name, ops->version,
                 GT_WAN_TP_OPS_VERSION);
        return NULL;
    }
    return ops;
}

const char *gt_wan_transport_name(gt_wan_transport_t transport)
{
    switch (transport) {
    case GT_WAN_TRANSPORT_UCX: return "ucx";
    case GT_WAN_TRANSPORT_LIBFABRIC: return "libfabric";
    }
    return "unknown";
}

gt_status_t gt_wan_transport_parse(const char *name, gt_wan_transport_t *transport_p)
{
    if (!name || !transport_p) return GT_ERR_INVALID;
    if (strcmp(name, "ucx") == 0) {
        *transport_p = GT_WAN_TRANSPORT_UCX;
        return GT_OK;
    }
    if (strcmp(name, "libfabric") == 0 || strcmp(name, "ofi") == 0) {
        *transport_p = GT_WAN_TRANSPORT_LIBFABRIC;
        return GT_OK;
    }
    return GT_ERR_INVALID;
}

void gt_wan_tp_req_complete(gt_wan_tp_req_t *req, gt_status_t status, size_t length)
{
    req->length = length;
    req->status = status;
    if (req->cb) req->cb(req);
}

void gt_wan_tp_list_push(gt_wan_tp_list_t *l, gt_wan_tp_req_t *r)
{
    r->next = NULL;
    r->prev = l->tail;
    if (l->tail)
        l->tail->next = r;
    else
        l->head = r;
    l->tail = r;
    l->count++;
}

void gt_wan_tp_list_remove(gt_wan_tp_list_t *l, gt_wan_tp_req_t *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        l->head = r->next;
    if (r->next)
        r->next->prev = r->prev;
    else
        l->tail = r->prev;
    r->next = r->prev = NULL;
    l->count--;
}

gt_wan_tp_req_t *gt_wan_tp_list_pop(gt_wan_tp_list_t *l)
{
    gt_wan_tp_req_t *r = l->head;
    if (r) gt_wan_tp_list_remove(l, r);
    return r;
}

gt_status_t gt_wan_tp_parse_addr(const char *addr, char *host, size_t host_cap, uint16_t *port_p)
{
    if (!addr) return GT_ERR_INVALID;
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr) return GT_ERR_INVALID;
    size_t hl = (size_t)(colon - addr);
    const char *h = addr;
    if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') { /* [v6]:port */
        h++;
        hl -= 2;
    }
    if (hl + 1 > host_cap) return GT_ERR_OVERFLOW;
    char *end = NULL;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (!end || *end != '\0' || end == colon + 1 || port > 65535) return GT_ERR_INVALID;
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port_p = (uint16_t)port;
    return GT_OK;
}
