/* mesh.c — a site's endpoints to its peers: see the mesh section of gt_wan.h.
 *
 * Reliability lives here, above the channel and below the outer-round protocol: the channel
 * ends a connection at the first frame it cannot accept (a connection is disposable), and the
 * mesh makes sure no message is lost or delivered twice across connections. Wire additions:
 * every message's payload starts with a 24-byte mesh header (magic, version, the sender's
 * incarnation, the message id), and GT_WAN_MSG_ACK messages carry a cumulative acknowledgement
 * (the incarnation and the last id delivered from it). A new connection carries nothing from a
 * peer until that peer's first ACK has arrived on it, so the re-send starts exactly after what
 * was delivered (the receiver drops anything older anyway).
 */

#include "gt_wan.h"

#include "channel_internal.h"
#include "emu_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECVS_PER_PEER 2
#define REDIAL_NS      300000000ull
#define MINUTE_NS      60000000000ull
#define HDR_BYTES      24u
#define HDR_MAGIC      0x714d7447u /* "GtMq" as little-endian bytes */
#define ACK_MAGIC      0x614d7447u /* "GtMa" */
#define ACK_BYTES      32u
#define MESH_VERSION   1u

typedef struct out_msg {
    struct out_msg *next;
    gt_wan_req_t req;
    gt_wan_msg_t msg;
    uint64_t id;
    size_t len; /* bytes of data: the mesh header and the payload */
    int posted; /* on the current endpoint */
    int sent;   /* posted once before (a later post is a re-send) */
    uint8_t data[];
} out_msg_t;

typedef struct {
    gt_wan_ep_t *ep;
    int in_view;
    int ready, was_ready;
    int synced; /* the peer's first ACK on this endpoint arrived: sends may go */
    uint64_t next_dial_ns;
    char host[GT_TOPO_ADDR_MAX];
    uint16_t port;
    out_msg_t *head, *tail;   /* not acknowledged, in id order; posted ones first */
    uint64_t next_id;         /* the id of our next message to this peer (from 1) */
    uint64_t acked;           /* the last id of ours the peer acknowledged */
    uint64_t rx_inc, rx_last; /* the peer's incarnation and the last id delivered from it */
    int ack_due, ack_sent_here, ack_posted;
    gt_wan_req_t ack_req;
    uint8_t ack_buf[ACK_BYTES];
    gt_wan_req_t recv[RECVS_PER_PEER];
    uint8_t *recv_buf[RECVS_PER_PEER];
    int recv_posted[RECVS_PER_PEER];
    int recv_next;   /* the receive posted first: it completes first */
    uint64_t *fails; /* ring of the last max_link_failures failure times */
    uint32_t n_fails, fail_pos;
    uint64_t cut_until_ns;
    int refused; /* our last dial was refused (ECONNREFUSED), no connection since */
    uint64_t gone_sent, gone_received; /* payload bytes of its endpoints closed so far */
} peer_t;

struct gt_wan_mesh {
    gt_wan_mesh_params_t p;
    gt_wan_net_t *net;
    gt_wan_emu_t *emu;
    uint64_t emu_start_ns; /* where its cut windows count from */
    gt_wan_keypair_t keypair;
    gt_wan_pinned_key_t *pins;
    char address[GT_TOPO_ADDR_MAX + 8];
    peer_t *peers; /* cfg->n_sites entries; ours unused */
    uint64_t inc;  /* this mesh's incarnation */
    uint32_t max_fails;
    int health_logged;
    gt_wan_mesh_stats_t st;
};

/* What peers dial (published in etcd): sites[].advertise where set — a 1:1 NAT's public
 * address, a container's published port — with the rank's offset added to a port given there
 * (port 0: the one we listen on), else the address we bound; an IPv6 host in brackets. */
static gt_status_t advertised(const gt_topo_config_t *cfg, const gt_wan_mesh_params_t *p,
                              const char *bound_host, uint16_t actual, char *out, size_t len)
{
    const gt_topo_site_t *me = &cfg->sites[p->site];
    char host[GT_TOPO_ADDR_MAX];
    uint16_t port = actual;
    snprintf(host, sizeof host, "%s", bound_host);
    if (me->advertise[0]) {
        uint16_t aport = 0;
        if (gt_topo_addr_split(me->advertise, host, sizeof host, &aport) != GT_OK) {
            GT_ERROR("mesh: site %s: bad advertised address '%s'", me->name, me->advertise);
            return GT_ERR_CONFIG;
        }
        if (aport && aport + p->port_offset > 65535u) {
            GT_ERROR("mesh: site %s: advertised port %u + rank %u is past 65535", me->name,
                     (unsigned)aport, (unsigned)p->port_offset);
            return GT_ERR_CONFIG;
        }
        if (aport) port = (uint16_t)(aport + p->port_offset);
    }
    int v6 = strchr(host, ':') != NULL;
    snprintf(out, len, "%s%s%s:%u", v6 ? "[" : "", host, v6 ? "]" : "", (unsigned)port);
    return GT_OK;
}

/* A site whose secret key is not the one sites.yaml pins for it would start, listen, and be
 * refused by every peer: refuse to start instead, naming both keys. */
static gt_status_t check_own_key(const gt_topo_config_t *cfg, uint32_t site,
                                 const gt_wan_keypair_t *kp)
{
    const gt_topo_site_t *me = &cfg->sites[site];
    if (!me->has_public_key || memcmp(me->public_key, kp->public_key, GT_WAN_KEY_BYTES) == 0)
        return GT_OK;
    char held[GT_WAN_KEY_B64_LEN + 1], pinned[GT_WAN_KEY_B64_LEN + 1];
    gt_wan_key_to_base64(kp->public_key, held);
    gt_wan_key_to_base64(me->public_key, pinned);
    const char *other = NULL;
    for (uint32_t i = 0; i < cfg->n_sites; i++)
        if (i != site && cfg->sites[i].has_public_key &&
            memcmp(cfg->sites[i].public_key, kp->public_key, GT_WAN_KEY_BYTES) == 0)
            other = cfg->sites[i].name;
    GT_ERROR("mesh: site %s holds the secret key of public key %s, but %s pins %s for it%s%s%s; "
             "no peer would authenticate it, so it does not start (secret key file: %s)",
             me->name, held, cfg->source, pinned, other ? " (that is site " : "",
             other ? other : "", other ? "'s key)" : "", me->secret_key[0] ? me->secret_key : "?");
    return GT_ERR_AUTH;
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
    if (secure && (st = check_own_key(cfg, p->site, p->keypair)) != GT_OK) return st;
    gt_wan_mesh_t *m = calloc(1, sizeof *m);
    if (!m) return GT_ERR_NOMEM;
    m->p = *p;
    m->max_fails = cfg->wan.max_link_failures ? cfg->wan.max_link_failures : 10;
    m->peers = calloc(cfg->n_sites, sizeof *m->peers);
    m->pins = calloc(cfg->n_sites, sizeof *m->pins);
    GT_REQUIRE_GOTO(m->peers && m->pins, st, GT_ERR_NOMEM, fail, "mesh: out of memory");
    do {
        uint8_t b[8];
        GT_CHECK_GOTO(gt_wan_tp_random(b, sizeof b), st, fail);
        m->inc = gt_le_get64(b);
    } while (m->inc == 0);
    size_t n_pins = 0;
    for (uint32_t i = 0; i < cfg->n_sites && secure; i++) {
        if (i == p->site || gt_topo_site_vacant(&cfg->sites[i])) continue; /* gt_wan_mesh_pin */
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
    m->emu_start_ns = p->start_ns ? p->start_ns : gt_time_ns();
    if (cfg->wan.emulation.enabled)
        GT_CHECK_GOTO(gt_wan_emu_create_from_config(cfg, m->emu_start_ns,
                                                    (double)cfg->wan.peer_timeout_ms, &m->emu),
                      st, fail);
    char host[GT_TOPO_ADDR_MAX];
    uint16_t port = 0, actual = 0;
    GT_REQUIRE_GOTO(gt_topo_addr_split(cfg->sites[p->site].address, host, sizeof host, &port) ==
                        GT_OK,
                    st, GT_ERR_CONFIG, fail, "mesh: bad address '%s'", cfg->sites[p->site].address);
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
    np.local_host = host;
    np.preauth_timeout_ms = cfg->wan.preauth_timeout_ms;
    np.preauth_max = cfg->wan.preauth_max;
    np.preauth_max_per_source = cfg->wan.preauth_max_per_source;
    np.ucx_relay_off = !cfg->wan.ucx_relay;
    np.data_port_min = (uint16_t)cfg->wan.data_port_min;
    np.data_port_max = (uint16_t)cfg->wan.data_port_max;
    np.n_site_ids = cfg->n_sites; /* vacant slots included: sites added later are pinned then */
    GT_CHECK_GOTO(gt_wan_net_create(&np, &m->net), st, fail);
    if (port && p->port_offset) {
        GT_REQUIRE_GOTO(port + p->port_offset <= 65535u, st, GT_ERR_CONFIG, fail,
                        "mesh: port %u + rank %u is past 65535", (unsigned)port,
                        (unsigned)p->port_offset);
        port = (uint16_t)(port + p->port_offset);
    }
    GT_CHECK_GOTO(gt_wan_net_listen(m->net, host, port, &actual), st, fail);
    GT_CHECK_GOTO(advertised(cfg, p, host, actual, m->address, sizeof m->address), st, fail);
    for (uint32_t i = 0; i < cfg->n_sites; i++) {
        if (i == p->site) continue;
        m->peers[i].next_id = 1;
        m->peers[i].fails = calloc(m->max_fails, sizeof *m->peers[i].fails);
        GT_REQUIRE_GOTO(m->peers[i].fails, st, GT_ERR_NOMEM, fail, "mesh: out of memory");
        for (int k = 0; k < RECVS_PER_PEER; k++) {
            m->peers[i].recv_buf[k] = malloc(p->max_message + HDR_BYTES);
            GT_REQUIRE_GOTO(m->peers[i].recv_buf[k], st, GT_ERR_NOMEM, fail, "mesh: out of memory");
        }
    }
    int v6 = strchr(host, ':') != NULL;
    GT_INFO("mesh: site %s listening on %s%s%s:%u%s%s (%s, %s%s)", cfg->sites[p->site].name,
            v6 ? "[" : "", host, v6 ? "]" : "", (unsigned)actual,
            cfg->sites[p->site].advertise[0] ? ", advertised as " : "",
            cfg->sites[p->site].advertise[0] ? m->address : "", gt_wan_transport_name(np.transport),
            secure ? "encrypted" : "NOT encrypted", m->emu ? ", emulated WAN" : "");
    *mesh_p = m;
    return GT_OK;
fail:
    gt_wan_mesh_destroy(m);
    return st;
}

static void free_msg(gt_wan_mesh_t *m, out_msg_t *o, int count_failure)
{
    if (count_failure) m->st.send_failures++;
    free(o);
}

static void drop_queue(gt_wan_mesh_t *m, peer_t *pe, int count_failures)
{
    out_msg_t *o = pe->head;
    while (o) {
        out_msg_t *next = o->next;
        free_msg(m, o, count_failures);
        o = next;
    }
    pe->head = pe->tail = NULL;
}

/* A connection failure of peer i: counted against wan.max_link_failures a minute. */
static void note_failure(gt_wan_mesh_t *m, uint32_t i)
{
    peer_t *pe = &m->peers[i];
    uint64_t now = gt_time_ns();
    pe->fails[pe->fail_pos] = now;
    pe->fail_pos = (pe->fail_pos + 1) % m->max_fails;
    if (pe->n_fails < m->max_fails) pe->n_fails++;
    /* The ring is full and its oldest entry is within the minute: too many. */
    uint64_t oldest = pe->fails[pe->fail_pos % m->max_fails];
    if (pe->n_fails == m->max_fails && now - oldest < MINUTE_NS) {
        pe->cut_until_ns = oldest + MINUTE_NS;
        m->st.peers_cut++;
        GT_ERROR("mesh: site %s: the connection to %s failed %u times within a minute; cut off "
                 "for %.0f s (a lost peer until then)",
                 m->p.cfg->sites[m->p.site].name, m->p.cfg->sites[i].name, m->max_fails,
                 (pe->cut_until_ns - now) * 1e-9);
    }
}

/* The bytes of a peer's endpoint about to close, kept for gt_wan_mesh_peer_bytes. */
static void keep_bytes(peer_t *pe)
{
    if (!pe->ep) return;
    gt_wan_ep_stats_t es;
    gt_wan_ep_stats(pe->ep, &es);
    pe->gone_sent += es.bytes_sent;
    pe->gone_received += es.bytes_received;
}

/* Closes peer i's endpoint. Messages stay queued (not acknowledged) for the next one. */
static void close_peer(gt_wan_mesh_t *m, uint32_t i, int failed)
{
    peer_t *pe = &m->peers[i];
    keep_bytes(pe);
    if (pe->ep) {
        gt_wan_ep_close(pe->ep); /* completes our requests with GT_ERR_CLOSED */
        pe->ep = NULL;
    }
    for (int k = 0; k < RECVS_PER_PEER; k++) pe->recv_posted[k] = 0;
    pe->recv_next = 0;
    for (out_msg_t *o = pe->head; o; o = o->next) o->posted = 0;
    pe->ack_posted = 0;
    pe->ack_sent_here = 0;
    pe->synced = 0;
    if (failed && pe->ready) m->st.peers_lost++;
    pe->ready = 0;
    pe->next_dial_ns = gt_time_ns() + REDIAL_NS;
}

/* A site out of the view (or all of them, when we leave) gets nothing more: its connection is
 * closed by force and its queue dropped. Nothing to flush — and a flush to a site removed
 * because it froze (SIGSTOP, a VM pause: its lease ran out, its connection did not) waited until
 * it thawed or the close deadline passed, under the caller's lock: the training thread of every
 * survivor stood still for 0.9-1.7 s at each such removal in a chaos run. */
static void drop_peer(gt_wan_mesh_t *m, uint32_t i)
{
    peer_t *pe = &m->peers[i];
    keep_bytes(pe);
    if (pe->ep) {
        gt_wan_ep_abort(pe->ep);
        pe->ep = NULL;
    }
    close_peer(m, i, 0);
    drop_queue(m, pe, 1);
}

void gt_wan_mesh_destroy(gt_wan_mesh_t *m)
{
    if (!m) return;
    for (uint32_t i = 0; m->peers && i < m->p.cfg->n_sites; i++) {
        close_peer(m, i, 0);
        drop_queue(m, &m->peers[i], 0);
        for (int k = 0; k < RECVS_PER_PEER; k++) free(m->peers[i].recv_buf[k]);
        free(m->peers[i].fails);
    }
    gt_wan_net_destroy(m->net);
    gt_wan_emu_destroy(m->emu);
    gt_wan_keypair_wipe(&m->keypair);
    free(m->pins);
    free(m->peers);
    free(m);
}

gt_status_t gt_wan_mesh_cut(gt_wan_mesh_t *m, uint32_t a, uint32_t b, double start_s,
                            double duration_s)
{
    if (!m || !m->emu || a == b || a >= m->p.cfg->n_sites || b >= m->p.cfg->n_sites ||
        !(start_s >= 0) || !(duration_s > 0) || !isfinite(start_s + duration_s))
        return GT_ERR_INVALID;
    double now_s = (double)(gt_time_ns() - m->emu_start_ns) * 1e-9;
    for (int dir = 0; dir < 2; dir++) {
        uint32_t src = dir ? b : a, dst = dir ? a : b;
        gt_wan_emu_link_params_t l;
        gt_status_t st = gt_wan_emu_link_get(m->emu, src, dst, &l);
        if (st != GT_OK) return st;
        /* windows over for a second make room (what met them has its arrival time already) */
        uint32_t kept = 0;
        for (uint32_t k = 0; k < l.n_cuts; k++)
            if (l.cuts[k].start_s + l.cuts[k].duration_s + 1.0 > now_s) l.cuts[kept++] = l.cuts[k];
        l.n_cuts = kept;
        if (l.n_cuts >= GT_WAN_EMU_MAX_CUTS) return GT_ERR_OVERFLOW;
        l.cuts[l.n_cuts++] = (gt_wan_emu_cut_t){start_s, duration_s};
        if ((st = gt_wan_emu_link_set(m->emu, src, dst, &l)) != GT_OK) return st;
    }
    return GT_OK;
}

gt_status_t gt_wan_mesh_pin(gt_wan_mesh_t *m, uint32_t site)
{
    const gt_topo_config_t *cfg = m ? m->p.cfg : NULL;
    if (!cfg || site >= cfg->n_sites || site == m->p.site || gt_topo_site_vacant(&cfg->sites[site]))
        return GT_ERR_INVALID;
    if (cfg->security.mode != GT_SECURITY_ENCRYPTED) return GT_OK;
    if (!cfg->sites[site].has_public_key) {
        GT_ERROR("mesh: site %s was added without a public key, and security.mode is encrypted",
                 cfg->sites[site].name);
        return GT_ERR_CONFIG;
    }
    gt_wan_pinned_key_t k;
    k.site_id = site;
    k.name = cfg->sites[site].name;
    memcpy(k.public_key, cfg->sites[site].public_key, GT_WAN_KEY_BYTES);
    return gt_wan_net_pin(m->net, &k);
}

void gt_wan_mesh_leave(gt_wan_mesh_t *m)
{
    if (!m) return;
    for (uint32_t i = 0; i < m->p.cfg->n_sites; i++) {
        m->peers[i].in_view = 0;
        drop_peer(m, i);
    }
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
        char old_host[sizeof pe->host];
        uint16_t old_port = pe->port;
        memcpy(old_host, pe->host, sizeof old_host);
        if (gt_topo_addr_split(view->members[k].address, pe->host, sizeof pe->host, &pe->port) !=
            GT_OK)
            GT_WARN("mesh: site %s published a bad address '%s'", cfg->sites[i].name,
                    view->members[k].address);
        else
            gt_wan_net_set_peer_host(m->net, i, pe->host);
        /* a refused dial says nothing about an address published since (a new process) */
        if (pe->port != old_port || strcmp(pe->host, old_host) != 0) pe->refused = 0;
    }
    for (uint32_t i = 0; i < cfg->n_sites; i++) {
        if (i == m->p.site || m->peers[i].in_view) continue;
        drop_peer(m, i);
        m->peers[i].refused = 0;
    }
    return GT_OK;
}

gt_status_t gt_wan_mesh_send(gt_wan_mesh_t *m, uint32_t dst, const gt_wan_msg_t *msg,
                             const void *buf, size_t len)
{
    if (dst >= m->p.cfg->n_sites || dst == m->p.site || msg->type == GT_WAN_MSG_ACK)
        return GT_ERR_INVALID;
    out_msg_t *o = malloc(sizeof *o + HDR_BYTES + len);
    if (!o) return GT_ERR_NOMEM;
    memset(o, 0, sizeof *o);
    peer_t *pe = &m->peers[dst];
    o->msg = *msg;
    o->id = pe->next_id++;
    o->len = HDR_BYTES + len;
    gt_le_put32(o->data, HDR_MAGIC);
    gt_le_put16(o->data + 4, MESH_VERSION);
    gt_le_put16(o->data + 6, 0);
    gt_le_put64(o->data + 8, m->inc);
    gt_le_put64(o->data + 16, o->id);
    if (len) memcpy(o->data + HDR_BYTES, buf, len);
    if (pe->tail)
        pe->tail->next = o;
    else
        pe->head = o;
    pe->tail = o;
    return GT_OK;
}

/* Posts what is queued (after the peer's first ACK on this endpoint), oldest first. */
static void post_sends(gt_wan_mesh_t *m, uint32_t i)
{
    peer_t *pe = &m->peers[i];
    if (!pe->ep || !pe->synced) return;
    for (out_msg_t *o = pe->head; o; o = o->next) {
        if (o->posted) continue;
        if (gt_wan_ep_send(pe->ep, &o->msg, o->data, o->len, &o->req) != GT_OK) return;
        o->posted = 1;
        if (o->sent) m->st.resent++;
        o->sent = 1;
    }
}

static void post_recvs(gt_wan_mesh_t *m, uint32_t i)
{
    peer_t *pe = &m->peers[i];
    for (int n = 0; n < RECVS_PER_PEER && pe->ep; n++) {
        int k = (pe->recv_next + n) % RECVS_PER_PEER; /* ring order: oldest first */
        if (pe->recv_posted[k]) continue;
        if (gt_wan_ep_recv(pe->ep, pe->recv_buf[k], m->p.max_message + HDR_BYTES, &pe->recv[k]) !=
            GT_OK)
            return;
        pe->recv_posted[k] = 1;
    }
}

/* Sends our acknowledgement of what peer i delivered (one in flight at a time; the first on a
 * new endpoint is what lets the peer start sending). */
static void post_ack(gt_wan_mesh_t *m, uint32_t i)
{
    peer_t *pe = &m->peers[i];
    if (!pe->ep || !pe->ready || pe->ack_posted || (!pe->ack_due && pe->ack_sent_here)) return;
    gt_le_put32(pe->ack_buf, ACK_MAGIC);
    gt_le_put16(pe->ack_buf + 4, MESH_VERSION);
    gt_le_put16(pe->ack_buf + 6, 0);
    gt_le_put64(pe->ack_buf + 8, m->inc);
    gt_le_put64(pe->ack_buf + 16, pe->rx_inc);
    gt_le_put64(pe->ack_buf + 24, pe->rx_last);
    gt_wan_msg_t am = {.type = GT_WAN_MSG_ACK};
    if (gt_wan_ep_send(pe->ep, &am, pe->ack_buf, ACK_BYTES, &pe->ack_req) != GT_OK) return;
    pe->ack_posted = 1;
    pe->ack_sent_here = 1;
    pe->ack_due = 0;
}

/* Frees acknowledged messages from the head (not while the endpoint still reads them). */
static void prune_acked(gt_wan_mesh_t *m, peer_t *pe)
{
    while (pe->head && pe->head->id <= pe->acked &&
           (!pe->head->posted || gt_wan_req_test(&pe->head->req) != GT_ERR_AGAIN)) {
        out_msg_t *o = pe->head;
        pe->head = o->next;
        if (!pe->head) pe->tail = NULL;
        m->st.msgs_sent++;
        free_msg(m, o, 0);
    }
}

static void on_ack(gt_wan_mesh_t *m, uint32_t i, const uint8_t *b, size_t len)
{
    peer_t *pe = &m->peers[i];
    if (len != ACK_BYTES || gt_le_get32(b) != ACK_MAGIC || gt_le_get16(b + 4) != MESH_VERSION) {
        m->st.malformed++;
        GT_WARN("mesh: a malformed acknowledgement from %s; dropped", m->p.cfg->sites[i].name);
        return;
    }
    uint64_t inc = gt_le_get64(b + 16), last = gt_le_get64(b + 24);
    if (inc == m->inc && last > pe->acked) pe->acked = last < pe->next_id ? last : pe->next_id - 1;
    if (!pe->synced) {
        /* Every message not acknowledged goes out again on this endpoint, in order. */
        pe->synced = 1;
        for (out_msg_t *o = pe->head; o; o = o->next) o->posted = 0;
    }
}

/* A message from peer i: its mesh header decides whether it is new. */
static void on_data(gt_wan_mesh_t *m, uint32_t i, const gt_wan_msg_t *msg, uint8_t *b, size_t len)
{
    peer_t *pe = &m->peers[i];
    if (len < HDR_BYTES || gt_le_get32(b) != HDR_MAGIC || gt_le_get16(b + 4) != MESH_VERSION) {
        m->st.malformed++;
        GT_WARN("mesh: a message from %s without a mesh header; dropped", m->p.cfg->sites[i].name);
        return;
    }
    uint64_t inc = gt_le_get64(b + 8), id = gt_le_get64(b + 16);
    if (inc != pe->rx_inc) { /* the peer (re)started: its ids start over */
        pe->rx_inc = inc;
        pe->rx_last = 0;
    }
    pe->ack_due = 1;
    if (id <= pe->rx_last) {
        m->st.duplicates++;
        return;
    }
    pe->rx_last = id;
    m->st.msgs_received++;
    m->p.on_message(m->p.ctx, msg, b + HDR_BYTES, len - HDR_BYTES);
}

static void adopt(gt_wan_mesh_t *m, uint32_t i, gt_wan_ep_t *ep)
{
    peer_t *pe = &m->peers[i];
    if (pe->ep) close_peer(m, i, 0);
    pe->ep = ep;
    post_recvs(m, i);
}

static int cut_off(const peer_t *pe, uint64_t now)
{
    return pe->cut_until_ns && now < pe->cut_until_ns;
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
        if (peer >= cfg->n_sites || peer == m->p.site || cut_off(&m->peers[peer], now)) {
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
        if (!pe->ep && pe->in_view && i < m->p.site && pe->port && now >= pe->next_dial_ns &&
            !cut_off(pe, now)) {
            gt_wan_ep_t *ep = NULL;
            pe->next_dial_ns = now + REDIAL_NS;
            if (gt_wan_net_connect(m->net, pe->host, pe->port, i, &ep) == GT_OK) adopt(m, i, ep);
        }
        if (!pe->ep) continue;
        if (cut_off(pe, now)) {
            close_peer(m, i, 1);
            continue;
        }
        gt_status_t es = gt_wan_ep_state(pe->ep);
        if (es == GT_OK && !pe->ready) {
            pe->ready = 1;
            pe->refused = 0;
            if (pe->was_ready) m->st.reconnects++;
            pe->was_ready = 1;
            GT_INFO("mesh: %s <-> %s ready", cfg->sites[m->p.site].name, cfg->sites[i].name);
        }
        if (es != GT_OK && es != GT_ERR_AGAIN) {
            if (pe->ready || pe->in_view)
                GT_WARN("mesh: connection to %s failed: %s%s", cfg->sites[i].name,
                        gt_status_str(es), pe->in_view ? "; reconnecting" : "");
            /* Counted towards wan.max_link_failures: what a hostile or broken peer causes
             * (frames or handshakes that fail authentication, malformed or oversized frames).
             * A connection that is reset or times out — a link cut, a reset on the path — is
             * re-dialled and its messages re-sent, without limit: cutting such a peer off for
             * the rest of the minute only kept a partition's minority from rejoining once the
             * link was back. */
            if (es == GT_ERR_AUTH || es == GT_ERR_CORRUPT || es == GT_ERR_OVERFLOW)
                note_failure(m, i);
            /* our dial (we dial the lower-indexed sites) met ECONNREFUSED: its host's kernel
             * says nobody listens there */
            pe->refused = es == GT_ERR_NOT_FOUND && i < m->p.site;
            close_peer(m, i, 1);
            continue;
        }
        /* Received messages, in the order the receives were posted (the channel completes
         * them in that order; the ids depend on it); acknowledgements. */
        for (int n = 0; n < RECVS_PER_PEER && pe->ep; n++) {
            int k = pe->recv_next;
            if (!pe->recv_posted[k]) break;
            gt_status_t rs = gt_wan_req_test(&pe->recv[k]);
            if (rs == GT_ERR_AGAIN) break;
            pe->recv_posted[k] = 0;
            pe->recv_next = (k + 1) % RECVS_PER_PEER;
            if (rs == GT_OK) {
                if (pe->recv[k].msg.type == GT_WAN_MSG_ACK)
                    on_ack(m, i, pe->recv_buf[k], pe->recv[k].length);
                else
                    on_data(m, i, &pe->recv[k].msg, pe->recv_buf[k], pe->recv[k].length);
            } else if (rs != GT_ERR_CLOSED) {
                GT_WARN("mesh: a receive from %s failed: %s", cfg->sites[i].name,
                        gt_status_str(rs));
            }
            if (pe->ep) post_recvs(m, i);
        }
        if (!pe->ep) continue;
        if (pe->ack_posted && gt_wan_req_test(&pe->ack_req) != GT_ERR_AGAIN) pe->ack_posted = 0;
        prune_acked(m, pe);
        post_ack(m, i);
        post_sends(m, i);
    }
    return GT_OK;
}

int gt_wan_mesh_peer_ready(const gt_wan_mesh_t *m, uint32_t site)
{
    return site < m->p.cfg->n_sites && m->peers[site].ready;
}

int gt_wan_mesh_peer_refused(const gt_wan_mesh_t *m, uint32_t site)
{
    if (!m || site >= m->p.cfg->n_sites || site == m->p.site) return 0;
    const peer_t *pe = &m->peers[site];
    return pe->refused && !pe->ep;
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
    gt_wan_net_gate_stats(m->net, &s.gate);
    for (uint32_t dst = 0; m->emu && dst < m->p.cfg->n_sites; dst++) {
        gt_wan_emu_link_stats_t ls;
        if (dst == m->p.site || gt_wan_emu_link_stats(m->emu, m->p.site, dst, &ls) != GT_OK)
            continue;
        s.emu_held_by_cut += ls.held_by_cut;
        s.emu_refused_by_cut += ls.failed;
    }
    *stats_p = s;
}

void gt_wan_mesh_peer_bytes(const gt_wan_mesh_t *m, uint32_t site, uint64_t *sent_p,
                            uint64_t *received_p)
{
    uint64_t s = 0, r = 0;
    if (m && site < m->p.cfg->n_sites && site != m->p.site) {
        const peer_t *pe = &m->peers[site];
        s = pe->gone_sent;
        r = pe->gone_received;
        if (pe->ep) {
            gt_wan_ep_stats_t es;
            gt_wan_ep_stats(pe->ep, &es);
            s += es.bytes_sent;
            r += es.bytes_received;
        }
    }
    *sent_p = s;
    *received_p = r;
}

gt_status_t gt_wan_mesh_health(gt_wan_mesh_t *m)
{
    const gt_topo_config_t *cfg = m->p.cfg;
    uint64_t now = gt_time_ns(), grace = 2ull * cfg->wan.peer_timeout_ms * 1000000ull;
    uint32_t in_view = 0, refusing = 0;
    for (uint32_t i = 0; i < cfg->n_sites; i++) {
        const peer_t *pe = &m->peers[i];
        if (i == m->p.site || !pe->in_view) continue;
        if (pe->ready) return GT_OK;
        in_view++;
        uint64_t ok = 0, since = 0;
        gt_wan_net_peer_auth(m->net, i, &ok, &since);
        refusing += since && since > ok && now - since > grace;
    }
    if (in_view == 0 || refusing < in_view) return GT_OK;
    if (!m->health_logged) {
        char b64[GT_WAN_KEY_B64_LEN + 1] = "(none)";
        if (cfg->security.mode == GT_SECURITY_ENCRYPTED)
            gt_wan_key_to_base64(m->keypair.public_key, b64);
        GT_ERROR("mesh: site %s: none of the %u peers in the view has accepted its handshake for "
                 "%.0f s (they refuse its key %s: is it the one they pin for %s?); the site "
                 "leaves the run",
                 cfg->sites[m->p.site].name, in_view, grace * 1e-9, b64,
                 cfg->sites[m->p.site].name);
        m->health_logged = 1;
    }
    return GT_ERR_AUTH;
}
