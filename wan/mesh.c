/* mesh.c — a site's endpoints to its peers: see the mesh section of gt_wan.h. */

#include "gt_wan.h"

#include "emu_internal.h"

#include <stdlib.h>
#include <string.h>

#define RECVS_PER_PEER 2
#define REDIAL_NS      300000000ull

typedef struct out_msg {
    struct out_msg *next;
    gt_wan_req_t req;
    gt_wan_msg_t msg;
    size_t len;
    int posted;
    uint8_t data[]; /* len bytes */
} out_msg_t;

typedef struct {
    gt_wan_ep_t *ep;
    int in_view;
    int ready;
    uint64_t next_dial_ns;
    char host[GT_TOPO_ADDR_MAX];
    uint16_t port;
    out_msg_t *head, *tail; /* in order; posted ones first */
    gt_wan_req_t recv[RECVS_PER_PEER];
    uint8_t *recv_buf[RECVS_PER_PEER];
    int recv_posted[RECVS_PER_PEER];
} peer_t;

struct gt_wan_mesh {
    gt_wan_mesh_params_t p;
    gt_wan_net_t *net;
    gt_wan_emu_t *emu;
    gt_wan_keypair_t keypair;
    gt_wan_pinned_key_t *pins;
    char address[GT_TOPO_ADDR_MAX + 8];
    peer_t *peers; /* cfg->n_sites entries; ours unused */
    gt_wan_mesh_stats_t st;
};

static int split_addr(const char *addr, char *host, size_t hn, uint16_t *port)
{
    const char *colon = strrchr(addr, ':');
    if (!colon) return -1;
    size_t n = (size_t)(colon - addr);
    if (addr[0] == '[' && n >= 2 && addr[n - 1] == ']') {
        addr++;
        n -= 2;
    }
    if (n == 0 || n >= hn) return -1;
    memcpy(host, addr, n);
    host[n] = '\0';
    long p = strtol(colon + 1, NULL, 10);
    if (p < 0 || p > 65535) return -1;
    *port = (uint16_t)p;
    return 0;
}

gt_status_t gt_wan_mesh_create(const gt_wan_mesh_params_t *p, gt_wan_mesh_t **mesh_p)
{
    gt_status_t st = GT_OK;
    const gt_topo_config_t *cfg = p ? p->cfg : NULL;
    if (!cfg || p->site >= cfg->n_sites || !p->on_message || p->max_message == 0) {
        GT_ERROR("mesh: invalid parameters");
        return GT_ERR_INVALID;
    }
    int secure = cfg->security.mode == GT_SECURITY_ENCRYPTED;
    if (secure && !p->keypair) {
        GT_ERROR("mesh: security.mode is encrypted but site %s has no key pair",
                 cfg->sites[p->site].name);
        return GT_ERR_INVALID;
    }
    gt_wan_mesh_t *m = calloc(1, sizeof *m);
    if (!m) return GT_ERR_NOMEM;
    m->p = *p;
    m->peers = calloc(cfg->n_sites, sizeof *m->peers);
    m->pins = calloc(cfg->n_sites, sizeof *m->pins);
    GT_REQUIRE_GOTO(m->peers && m->pins, st, GT_ERR_NOMEM, fail, "mesh: out of memory");
    size_t n_pins = 0;
    for (uint32_t i = 0; i < cfg->n_sites && secure; i++) {
        if (i == p->site) continue;
        GT_REQUIRE_GOTO(cfg->sites[i].has_public_key, st, GT_ERR_CONFIG, fail,
                        "mesh: site %s has no public_key in %s, and security.mode is encrypted "
                        "(make one with `geotrain keygen`)",
                        cfg->sites[i].name, cfg->source);
        m->pins[n_pins].site_id = i;
        m->pins[n_pins].name = cfg->sites[i].name;
        memcpy(m->pins[n_pins].public_key, cfg->sites[i].public_key, GT_WAN_KEY_BYTES);
        n_pins++;
    }
    if (secure) m->keypair = *p->keypair;
    if (cfg->wan.emulation.enabled)
        GT_CHECK_GOTO(gt_wan_emu_create_from_config(cfg, p->start_ns ? p->start_ns : gt_time_ns(),
                                                    (double)cfg->wan.peer_timeout_ms, &m->emu),
                      st, fail);
    static const char *ciphers[] = {NULL, "aes256gcm", "xchacha20poly1305"};
    gt_wan_net_params_t np = GT_WAN_NET_PARAMS_INIT;
    np.transport = cfg->wan.transport == GT_TRANSPORT_LIBFABRIC ? GT_WAN_TRANSPORT_LIBFABRIC
                                                                : GT_WAN_TRANSPORT_UCX;
    np.security = secure ? GT_WAN_SECURITY_ENCRYPTED : GT_WAN_SECURITY_NONE;
    np.cipher = ciphers[cfg->security.cipher];
    np.site_id = p->site;
    np.site_name = cfg->sites[p->site].name;
    np.run_id = p->run_id;
    np.keypair = secure ? &m->keypair : NULL;
    np.peers = m->pins;
    np.n_peers = n_pins;
    np.connect_timeout_ms = cfg->wan.connect_timeout_ms;
    np.io_timeout_ms = cfg->wan.peer_timeout_ms;
    np.emu = m->emu;
    GT_CHECK_GOTO(gt_wan_net_create(&np, &m->net), st, fail);
    char host[GT_TOPO_ADDR_MAX];
    uint16_t port = 0, actual = 0;
    GT_REQUIRE_GOTO(split_addr(cfg->sites[p->site].address, host, sizeof host, &port) == 0, st,
                    GT_ERR_CONFIG, fail, "mesh: bad address '%s'", cfg->sites[p->site].address);
    if (port && p->port_offset) {
        GT_REQUIRE_GOTO(port + p->port_offset <= 65535u, st, GT_ERR_CONFIG, fail,
                        "mesh: port %u + rank %u is past 65535", (unsigned)port,
                        (unsigned)p->port_offset);
        port = (uint16_t)(port + p->port_offset);
    }
    GT_CHECK_GOTO(gt_wan_net_listen(m->net, host, port, &actual), st, fail);
    snprintf(m->address, sizeof m->address, "%s:%u", host, (unsigned)actual);
    for (uint32_t i = 0; i < cfg->n_sites; i++) {
        for (int k = 0; k < RECVS_PER_PEER && i != p->site; k++) {
            m->peers[i].recv_buf[k] = malloc(p->max_message);
            GT_REQUIRE_GOTO(m->peers[i].recv_buf[k], st, GT_ERR_NOMEM, fail, "mesh: out of memory");
        }
    }
    GT_INFO("mesh: site %s listening on %s (%s, %s%s)", cfg->sites[p->site].name, m->address,
            gt_wan_transport_name(np.transport), secure ? "encrypted" : "NOT encrypted",
            m->emu ? ", emulated WAN" : "");
    *mesh_p = m;
    return GT_OK;
fail:
    gt_wan_mesh_destroy(m);
    return st;
}

static void drop_queue(gt_wan_mesh_t *m, peer_t *pe, int count_failures)
{
    out_msg_t *o = pe->head;
    while (o) {
        out_msg_t *next = o->next;
        if (count_failures) m->st.send_failures++;
        free(o);
        o = next;
    }
    pe->head = pe->tail = NULL;
}

static void close_peer(gt_wan_mesh_t *m, uint32_t i, int failed)
{
    peer_t *pe = &m->peers[i];
    if (pe->ep) {
        gt_wan_ep_close(pe->ep); /* completes our requests with GT_ERR_CLOSED */
        pe->ep = NULL;
    }
    for (int k = 0; k < RECVS_PER_PEER; k++) pe->recv_posted[k] = 0;
    /* Unposted messages stay queued for a new endpoint; posted ones died with this one. */
    out_msg_t **pp = &pe->head, *last = NULL;
    while (*pp) {
        out_msg_t *o = *pp;
        if (o->posted) {
            *pp = o->next;
            m->st.send_failures++;
            free(o);
        } else {
            last = o;
            pp = &o->next;
        }
    }
    pe->tail = last;
    if (failed && pe->ready) m->st.peers_lost++;
    pe->ready = 0;
    pe->next_dial_ns = gt_time_ns() + REDIAL_NS;
}

void gt_wan_mesh_destroy(gt_wan_mesh_t *m)
{
    if (!m) return;
    for (uint32_t i = 0; m->peers && i < m->p.cfg->n_sites; i++) {
        close_peer(m, i, 0);
        drop_queue(m, &m->peers[i], 0);
        for (int k = 0; k < RECVS_PER_PEER; k++) free(m->peers[i].recv_buf[k]);
    }
    gt_wan_net_destroy(m->net);
    gt_wan_emu_destroy(m->emu);
    gt_wan_keypair_wipe(&m->keypair);
    free(m->pins);
    free(m->peers);
    free(m);
}

const char *gt_wan_mesh_address(const gt_wan_mesh_t *m)
{
    return m->address;
}

gt_status_t gt_wan_mesh_set_view(gt_wan_mesh_t *m, const gt_wan_view_t *view)
{
    const gt_topo_config_t *cfg = m->p.cfg;
    for (uint32_t i = 0; i < cfg->n_sites; i++) m->peers[i].in_view = 0;
    for (uint32_t k = 0; k < view->n_members; k++) {
        uint32_t i;
        if (gt_topo_site_index(cfg, view->members[k].name, &i) != GT_OK) {
            GT_WARN("mesh: view member '%s' is not a site of %s; ignored", view->members[k].name,
                    cfg->source);
            continue;
        }
        if (i == m->p.site) continue;
        peer_t *pe = &m->peers[i];
        pe->in_view = 1;
        if (split_addr(view->members[k].address, pe->host, sizeof pe->host, &pe->port) != 0)
            GT_WARN("mesh: site %s published a bad address '%s'", cfg->sites[i].name,
                    view->members[k].address);
    }
    for (uint32_t i = 0; i < cfg->n_sites; i++) {
        if (i == m->p.site || m->peers[i].in_view) continue;
        if (m->peers[i].ep) close_peer(m, i, 0);
        drop_queue(m, &m->peers[i], 1); /* a site out of the view gets nothing more */
    }
    return GT_OK;
}

gt_status_t gt_wan_mesh_send(gt_wan_mesh_t *m, uint32_t dst, const gt_wan_msg_t *msg,
                             const void *buf, size_t len)
{
    if (dst >= m->p.cfg->n_sites || dst == m->p.site) return GT_ERR_INVALID;
    out_msg_t *o = malloc(sizeof *o + len);
    if (!o) return GT_ERR_NOMEM;
    memset(o, 0, sizeof *o);
    o->msg = *msg;
    o->len = len;
    memcpy(o->data, buf, len);
    peer_t *pe = &m->peers[dst];
    if (pe->tail)
        pe->tail->next = o;
    else
        pe->head = o;
    pe->tail = o;
    return GT_OK;
}

/* Posts what is queued on a peer whose endpoint exists. */
static void post_sends(gt_wan_mesh_t *m, uint32_t i)
{
    peer_t *pe = &m->peers[i];
    for (out_msg_t *o = pe->head; o && pe->ep; o = o->next) {
        if (o->posted) continue;
        if (gt_wan_ep_send(pe->ep, &o->msg, o->data, o->len, &o->req) != GT_OK) return;
        o->posted = 1;
    }
}

static void post_recvs(gt_wan_mesh_t *m, uint32_t i)
{
    peer_t *pe = &m->peers[i];
    for (int k = 0; k < RECVS_PER_PEER && pe->ep; k++) {
        if (pe->recv_posted[k]) continue;
        if (gt_wan_ep_recv(pe->ep, pe->recv_buf[k], m->p.max_message, &pe->recv[k]) != GT_OK)
            return;
        pe->recv_posted[k] = 1;
    }
}

static void adopt(gt_wan_mesh_t *m, uint32_t i, gt_wan_ep_t *ep)
{
    peer_t *pe = &m->peers[i];
    if (pe->ep) close_peer(m, i, 0);
    pe->ep = ep;
    post_recvs(m, i);
    post_sends(m, i);
}

gt_status_t gt_wan_mesh_progress(gt_wan_mesh_t *m)
{
    const gt_topo_config_t *cfg = m->p.cfg;
    uint64_t now = gt_time_ns();
    gt_wan_net_progress(m->net);
    /* Incoming connections (from higher-indexed sites). */
    for (;;) {
        gt_wan_ep_t *ep = NULL;
        if (gt_wan_net_accept(m->net, &ep) != GT_OK || !ep) break;
        uint32_t peer = gt_wan_ep_peer(ep);
        if (peer >= cfg->n_sites || peer == m->p.site) {
            gt_wan_ep_close(ep);
            continue;
        }
        GT_INFO("mesh: %s accepted %s", cfg->sites[m->p.site].name, cfg->sites[peer].name);
        adopt(m, peer, ep);
    }
    for (uint32_t i = 0; i < cfg->n_sites; i++) {
        if (i == m->p.site) continue;
        peer_t *pe = &m->peers[i];
        /* Dial lower-indexed sites in the view. */
        if (!pe->ep && pe->in_view && i < m->p.site && pe->port && now >= pe->next_dial_ns) {
            gt_wan_ep_t *ep = NULL;
            pe->next_dial_ns = now + REDIAL_NS;
            if (gt_wan_net_connect(m->net, pe->host, pe->port, i, &ep) == GT_OK) adopt(m, i, ep);
        }
        if (!pe->ep) continue;
        gt_status_t es = gt_wan_ep_state(pe->ep);
        if (es == GT_OK && !pe->ready) {
            pe->ready = 1;
            GT_INFO("mesh: %s <-> %s ready", cfg->sites[m->p.site].name, cfg->sites[i].name);
        }
        if (es != GT_OK && es != GT_ERR_AGAIN) {
            if (pe->ready || pe->in_view)
                GT_WARN("mesh: endpoint to %s failed: %s", cfg->sites[i].name, gt_status_str(es));
            close_peer(m, i, 1);
            continue;
        }
        /* Completed sends leave the queue in order. */
        while (pe->head && pe->head->posted) {
            gt_status_t rs = gt_wan_req_test(&pe->head->req);
            if (rs == GT_ERR_AGAIN) break;
            out_msg_t *o = pe->head;
            pe->head = o->next;
            if (!pe->head) pe->tail = NULL;
            if (rs == GT_OK) {
                m->st.msgs_sent++;
            } else {
                m->st.send_failures++;
            }
            free(o);
        }
        post_sends(m, i);
        /* Completed receives, delivered in order. */
        for (int k = 0; k < RECVS_PER_PEER && pe->ep; k++) {
            if (!pe->recv_posted[k]) continue;
            gt_status_t rs = gt_wan_req_test(&pe->recv[k]);
            if (rs == GT_ERR_AGAIN) continue;
            pe->recv_posted[k] = 0;
            if (rs == GT_OK) {
                m->st.msgs_received++;
                m->p.on_message(m->p.ctx, &pe->recv[k].msg, pe->recv_buf[k], pe->recv[k].length);
            } else if (rs != GT_ERR_CLOSED) {
                GT_WARN("mesh: a receive from %s failed: %s", cfg->sites[i].name,
                        gt_status_str(rs));
            }
            if (pe->ep) post_recvs(m, i);
        }
    }
    return GT_OK;
}

int gt_wan_mesh_peer_ready(const gt_wan_mesh_t *m, uint32_t site)
{
    return site < m->p.cfg->n_sites && m->peers[site].ready;
}

size_t gt_wan_mesh_pending(const gt_wan_mesh_t *m)
{
    size_t n = 0;
    for (uint32_t i = 0; i < m->p.cfg->n_sites; i++)
        for (const out_msg_t *o = m->peers[i].head; o; o = o->next) n++;
    return n;
}

void gt_wan_mesh_stats(const gt_wan_mesh_t *m, gt_wan_mesh_stats_t *stats_p)
{
    gt_wan_ep_stats_t es;
    gt_wan_net_stats(m->net, &es);
    gt_wan_mesh_stats_t s = m->st;
    s.bytes_sent = es.bytes_sent;
    s.bytes_received = es.bytes_received;
    s.rejected = es.rejected_auth + es.rejected_replay + es.rejected_truncated +
                 es.rejected_oversized + es.rejected_malformed;
    *stats_p = s;
}
