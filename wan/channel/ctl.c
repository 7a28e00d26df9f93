/* ctl.c — a site's one listening socket and the control connection of every endpoint: the
 * handshake before anything else, then the exchange of data-path addresses (docs/security.md,
 * "Connections").
 *
 * Why our own socket: UCX's and libfabric's connection managers parse whatever reaches their
 * listening ports, and one 16-byte packet of 0xff aborted a site inside UCX. Here the only
 * port a stranger can find is a plain TCP socket of ours (bound to the configured address),
 * and what it reads is bounded before it is parsed: an 80-byte frame header, then at most
 * GT_WAN_CTL_MAX bytes, from a peer that must finish the X25519 handshake (secure.c) within
 * preauth_timeout_ms. A connection costs constant memory until it authenticates (one
 * gt_wan_ep_t without frame slots or transport state: about 4 KiB, plus the handshake state
 * once its first message is in), at most preauth_max of them exist at once and at most
 * preauth_max_per_source from one address; at the cap the listener stops accepting (the
 * kernel's backlog holds or refuses the rest) until a slot frees.
 *
 * After the handshake each side opens its transport endpoint, seals its data-path address (the
 * session's frame 0 in each direction) and sends it over this connection; the transport
 * connects with the peer's. The connection then stays open, silent: it is how each side learns
 * at once that the other closed or died. Data frames count from 1.
 *
 * Control frames are ordinary frame headers of type HELLO: the handshake's three messages
 * (payload as is, or with `security: none` the site ids), then the address frame (sealed
 * unless `security: none`). Everything is non-blocking and driven by epoll from progress().
 */
#include "channel_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#define CTL_BACKLOG      128
#define CTL_ACCEPT_BURST 64
#define CTL_EVENTS       64
#define ADDR_MAGIC       0x44417447u /* "GtAD" as little-endian bytes */
#define ADDR_VERSION     2u
#define ADDR_HEAD        12u /* magic, version, transport, our control port, 0 */
#define PLAIN_HELLO      "GTPLAIN1"
#define LISTEN_TAG       ((void *)1) /* epoll data of the listening socket */

static void source_str(const struct sockaddr_storage *sa, char *buf, size_t cap);

static int alive(const gt_wan_ep_t *ep)
{
    return ep->state == GT_OK || ep->state == GT_ERR_AGAIN;
}

/* Pre-authentication failures come by the thousand in a flood: one warning a second, with
 * the count of those not printed. */
static void gate_warn(gt_wan_net_t *net, const char *what, const gt_wan_ep_t *ep)
{
    uint64_t now = gt_time_ns();
    if (now - net->warn_ns < 1000000000ull && net->warn_ns) {
        net->warn_quiet++;
        return;
    }
    if (net->warn_quiet)
        GT_WARN("wan: site %s: %s (from %s); %llu more since the last warning", net->site_name,
                what, ep && ep->host[0] ? ep->host : "?", (unsigned long long)net->warn_quiet);
    else
        GT_WARN("wan: site %s: %s (from %s)", net->site_name, what,
                ep && ep->host[0] ? ep->host : "?");
    net->warn_ns = now;
    net->warn_quiet = 0;
}

static void watch(gt_wan_ep_t *ep, uint32_t events)
{
    if (ep->fd < 0 || ep->fd_events == events) return;
    struct epoll_event ev = {.events = events, .data.ptr = ep};
    if (epoll_ctl(ep->net->epfd, EPOLL_CTL_MOD, ep->fd, &ev) == 0) ep->fd_events = events;
}

void gt_wan_ctl_close(gt_wan_ep_t *ep)
{
    if (ep->fd < 0) return;
    epoll_ctl(ep->net->epfd, EPOLL_CTL_DEL, ep->fd, NULL);
    close(ep->fd);
    ep->fd = -1;
    ep->fd_events = 0;
}

static void preauth_end(gt_wan_ep_t *ep)
{
    gt_wan_net_t *net = ep->net;
    if (!ep->preauth) return;
    ep->preauth = 0;
    net->n_preauth--;
    net->gate.preauth_now = net->n_preauth;
    if (net->accept_paused && net->n_preauth < net->p.preauth_max && net->lfd >= 0) {
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = LISTEN_TAG};
        if (epoll_ctl(net->epfd, EPOLL_CTL_MOD, net->lfd, &ev) == 0) net->accept_paused = 0;
    }
}

/* Ends a connection before or during setup. `refused`: it failed authentication or the
 * protocol (counted as a refused handshake when it came in). */
static void ctl_fail(gt_wan_ep_t *ep, gt_status_t st, const char *why)
{
    gt_wan_net_t *net = ep->net;
    if (!alive(ep)) return;
    if (ep->incoming && ep->preauth) {
        if (st == GT_ERR_TIMEOUT) {
            net->gate.handshakes_timed_out++;
            gate_warn(net, "an incoming connection did not authenticate in time; closed", ep);
        } else {
            net->gate.handshakes_refused++;
            char what[160];
            snprintf(what, sizeof what, "refused an incoming connection: %s", why);
            gate_warn(net, what, ep);
        }
    } else if (why) {
        char who[96];
        GT_WARN("wan: connection to %s: %s", gt_wan_ch_peer_label(ep, who, sizeof who), why);
    }
    preauth_end(ep);
    gt_wan_ch_ep_fail(ep, st);
}

/* Writes what is queued; EAGAIN leaves the rest for EPOLLOUT. */
static void ctl_flush(gt_wan_ep_t *ep)
{
    while (ep->fd >= 0 && ep->ctx_off < ep->ctx_len) {
        ssize_t n = send(ep->fd, ep->ctx + ep->ctx_off, ep->ctx_len - ep->ctx_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            ep->ctx_off += (size_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
        ctl_fail(ep, GT_ERR_PEER_LOST, "the control connection broke while sending");
        return;
    }
    if (ep->ctx_off == ep->ctx_len) ep->ctx_off = ep->ctx_len = 0;
    uint32_t want = EPOLLIN | EPOLLRDHUP | (ep->ctx_len ? EPOLLOUT : 0u);
    watch(ep, want);
}

/* Queues one control frame: header (seq = hello counter, or the session's for the sealed
 * address frame) and payload; sealed when `seal`. */
static gt_status_t ctl_send(gt_wan_ep_t *ep, const void *payload, size_t len, int seal)
{
    gt_wan_net_t *net = ep->net;
    size_t wire = seal ? GT_WAN_SEAL_BOUND(len) : len;
    if (GT_WAN_FRAME_HDR_LEN + wire > sizeof ep->ctx - ep->ctx_len) return GT_ERR_OVERFLOW;
    uint8_t *out = ep->ctx + ep->ctx_len;
    gt_wan_frame_hdr_t h = {.type = GT_WAN_MSG_HELLO,
                            .sender = net->p.site_id,
                            .run_id = net->run_hash,
                            .payload_len = (uint32_t)len,
                            .msg_len = len};
    if (seal) {
        h.seq = gt_wan_session_send_seq(ep->sess);
    } else {
        h.seq = ep->hello_tx++;
        if (!net->sec) h.flags = GT_WAN_FRAME_FLAG_PLAIN;
    }
    gt_wan_frame_encode(&h, out);
    if (seal) {
        size_t ct = 0;
        gt_status_t st =
            gt_wan_session_seal(ep->sess, h.seq, out, GT_WAN_FRAME_HDR_LEN, payload, len,
                                out + GT_WAN_FRAME_HDR_LEN, GT_WAN_SEAL_BOUND(len), &ct);
        if (st != GT_OK) return st;
    } else if (len) {
        memcpy(out + GT_WAN_FRAME_HDR_LEN, payload, len);
    }
    ep->ctx_len += GT_WAN_FRAME_HDR_LEN + wire;
    ctl_flush(ep);
    return GT_OK;
}

static void plain_hello_bytes(const gt_wan_net_t *net, uint8_t out[12])
{
    memcpy(out, PLAIN_HELLO, 8);
    gt_le_put32(out + 8, net->p.site_id);
}

/* Opens the transport endpoint and sends our data-path address (and our control port, where
 * the peer's relay finds us). */
static void ctl_send_addr(gt_wan_ep_t *ep)
{
    gt_wan_net_t *net = ep->net;
    gt_status_t st = gt_wan_net_tp_ensure(net, NULL);
    if (st == GT_OK && net->relay_on && net->lfd < 0) {
        /* The peer's UCX connects to ours too, through its relay, which must reach ours: a
         * net that only dials listens now, on the address this connection leaves from (the
         * same gate as any listener). */
        struct sockaddr_storage me;
        socklen_t ml = sizeof me;
        char host[64];
        uint16_t port = 0;
        if (getsockname(ep->fd, (struct sockaddr *)&me, &ml) == 0) {
            source_str(&me, host, sizeof host);
            st = gt_wan_ctl_listen(net, host, 0, &port);
        } else {
            st = GT_ERR_IO;
        }
    }
    if (st == GT_OK) st = gt_wan_ch_ep_activate(ep);
    uint8_t msg[GT_WAN_ADDR_MSG_MAX];
    size_t blob = 0;
    if (st == GT_OK)
        st = net->ops->ep_open(net->tp, ep->incoming, ep->host, ep, &ep->tp, msg + ADDR_HEAD,
                               sizeof msg - ADDR_HEAD, &blob);
    if (st != GT_OK) {
        ctl_fail(ep, st, "cannot open the data path");
        return;
    }
    gt_le_put32(msg, ADDR_MAGIC);
    gt_le_put16(msg + 4, ADDR_VERSION);
    gt_le_put16(msg + 6, (uint16_t)net->p.transport);
    gt_le_put16(msg + 8, net->ctl_port);
    gt_le_put16(msg + 10, 0);
    st = ctl_send(ep, msg, ADDR_HEAD + blob, net->sec != NULL);
    if (st != GT_OK) ctl_fail(ep, st, "cannot send the data-path address");
}

/* Authenticated. The side that dialled speaks first: its data-path address, or, for a relay
 * tunnel (relay.c), the tunnel request; the side that accepted answers an address with its
 * own (ctl_on_addr). */
static void ctl_authed(gt_wan_ep_t *ep)
{
    gt_wan_net_t *net = ep->net;
    uint64_t now = gt_time_ns();
    preauth_end(ep);
    net->gate.handshakes_ok++;
    if (ep->peer < net->n_ids) {
        net->auth_ok_ns[ep->peer] = now;
        net->refused_since_ns[ep->peer] = 0;
    }
    ep->phase = GT_WAN_PH_ADDR;
    /* The address exchange is one message each way, sent as soon as each side has
     * authenticated: as short a deadline as the handshake's, so that a lost or held message
     * costs a redial, not connect_timeout_ms. The transport's connect gets connect_timeout_ms
     * (ctl_on_addr). */
    ep->hs_deadline_ns = now + (uint64_t)net->p.preauth_timeout_ms * 1000000ull;
    if (ep->relay_dial) {
        uint8_t req[24];
        size_t n = 0;
        gt_status_t st = gt_wan_relay_request(ep, req, &n);
        if (st == GT_OK) st = ctl_send(ep, req, n, 1);
        if (st == GT_OK) st = gt_wan_relay_dialled(ep);
        if (st != GT_OK) ctl_fail(ep, st, "cannot open a relay tunnel");
        return;
    }
    if (!ep->incoming) ctl_send_addr(ep);
}

/* The peer's data-path address: connect the transport. */
static void ctl_on_addr(gt_wan_ep_t *ep, const gt_wan_frame_hdr_t *h, uint8_t *payload, size_t wire)
{
    gt_wan_net_t *net = ep->net;
    uint8_t msg[GT_WAN_ADDR_MSG_MAX];
    size_t len = 0;
    if (net->sec) {
        gt_status_t st =
            gt_wan_session_open(ep->sess, h->seq, h->payload_len, ep->crx, GT_WAN_FRAME_HDR_LEN,
                                payload, wire, msg, sizeof msg, &len);
        if (st != GT_OK) {
            ep->stats.rejected_auth++;
            ctl_fail(ep, GT_ERR_AUTH, "its data-path address failed authentication");
            return;
        }
    } else {
        if (wire > sizeof msg) {
            ctl_fail(ep, GT_ERR_CORRUPT, "an oversized data-path address");
            return;
        }
        memcpy(msg, payload, wire);
        len = wire;
    }
    if (len >= 4 && gt_le_get32(msg) == GT_WAN_TUNNEL_REQ_MAGIC && ep->incoming) {
        gt_status_t st = gt_wan_relay_accepted(ep, msg, len);
        if (st != GT_OK)
            ctl_fail(ep, st,
                     st == GT_ERR_UNSUPPORTED ? "it asked for a relay tunnel; we run without one"
                                              : "cannot open the relay tunnel it asked for");
        return;
    }
    if (len < ADDR_HEAD || gt_le_get32(msg) != ADDR_MAGIC || gt_le_get16(msg + 4) != ADDR_VERSION) {
        ctl_fail(ep, GT_ERR_CORRUPT,
                 len >= 6 && gt_le_get32(msg) == ADDR_MAGIC
                     ? "a data-path address of another protocol version (mixed geotrain versions?)"
                     : "a malformed data-path address");
        return;
    }
    if (gt_le_get16(msg + 6) != (uint16_t)net->p.transport) {
        ctl_fail(ep, GT_ERR_UNSUPPORTED, "the peer runs another wan.transport");
        return;
    }
    ep->peer_ctl_port = gt_le_get16(msg + 8);
    if (ep->incoming) { /* answer with ours */
        ctl_send_addr(ep);
        if (!alive(ep)) return;
    }
    gt_status_t st = net->ops->ep_connect(ep->tp, ep->host, msg + ADDR_HEAD, len - ADDR_HEAD);
    if (st != GT_OK) {
        ctl_fail(ep, st, "cannot connect the data path");
        return;
    }
    ep->phase = GT_WAN_PH_LINK;
    ep->hs_deadline_ns = gt_time_ns() + (uint64_t)net->p.connect_timeout_ms * 1000000ull;
}

/* One handshake message (or, without security, the site ids). */
static void ctl_on_hello(gt_wan_ep_t *ep, const gt_wan_frame_hdr_t *h, const uint8_t *msg,
                         size_t len)
{
    gt_wan_net_t *net = ep->net;
    if (h->seq != ep->hello_rx++) {
        ctl_fail(ep, GT_ERR_CORRUPT, "handshake messages out of order");
        return;
    }
    /* The frame header around a handshake message is not authenticated (the handshake
     * authenticates its own 16-byte header and everything after it), so its fields that mean
     * nothing here must be zero and its sender must be the site the handshake proves: no byte
     * of a handshake frame can then be altered without costing the handshake, and each such
     * alteration is counted once (the adversarial suite counts them exactly). */
    if (h->lane || h->fragment || h->chunk || h->view_epoch || h->round) {
        ctl_fail(ep, GT_ERR_CORRUPT, "bytes that are not a handshake");
        return;
    }
    int plain_msg = len == 12 && memcmp(msg, PLAIN_HELLO, 8) == 0;
    if (!net->sec) {
        if (!plain_msg) {
            ctl_fail(ep, GT_ERR_AUTH,
                     "the peer wants an encrypted channel and we run with security: none");
            return;
        }
        ep->peer = gt_le_get32(msg + 8);
        if (ep->incoming) {
            uint8_t out[12];
            plain_hello_bytes(net, out);
            gt_status_t st = ctl_send(ep, out, sizeof out, 0);
            if (st != GT_OK) {
                ctl_fail(ep, st, "cannot answer the handshake");
                return;
            }
        }
        ctl_authed(ep);
        return;
    }
    if (plain_msg) {
        ctl_fail(ep, GT_ERR_AUTH, "the peer runs with security: none; refusing plaintext");
        return;
    }
    uint8_t out[GT_WAN_HS_MSG_MAX];
    size_t out_len = 0;
    gt_status_t st;
    gt_wan_hs_info_t info;
    if (ep->incoming && ep->hs_step == 0) {
        if (!ep->hs) {
            st = gt_wan_hs_create(net->sec, GT_WAN_HS_RESPONDER, GT_WAN_HS_ANY_PEER, &ep->hs);
            if (st != GT_OK) goto fail;
        }
        st = gt_wan_hs_responder_read(ep->hs, msg, len, out, sizeof out, &out_len);
        if (st != GT_OK) {
            /* A first message we cannot open was sealed to a key we do not hold: the site the
             * header names does not know ours (the site that no peer authenticates: see
             * gt_wan_mesh_health). Anyone can write that header, so it counts only when the
             * connection comes from the address that site published (off the path, a TCP
             * source address cannot be forged). */
            gt_wan_hs_info(ep->hs, &info);
            if (info.reason == GT_WAN_HS_BAD_TAG && h->sender < net->n_ids &&
                h->sender != net->p.site_id && !net->refused_since_ns[h->sender] &&
                gt_wan_tp_same_ip(&ep->src, &net->peer_src[h->sender]))
                net->refused_since_ns[h->sender] = gt_time_ns();
            goto fail;
        }
        gt_wan_hs_info(ep->hs, &info);
        if (h->sender != info.peer_site_id) {
            ctl_fail(ep, GT_ERR_AUTH, "a handshake whose frame names another site");
            return;
        }
        ep->peer = info.peer_site_id;
        ep->hs_step = 1;
        st = ctl_send(ep, out, out_len, 0);
        if (st != GT_OK) goto fail;
        return;
    }
    if (h->sender != ep->peer) {
        if (!ep->incoming) net->gate.dials_refused++;
        ctl_fail(ep, GT_ERR_AUTH, "a handshake whose frame names another site");
        return;
    }
    if (ep->incoming) {
        st = gt_wan_hs_responder_confirm(ep->hs, msg, len);
        if (st != GT_OK) goto fail;
    } else {
        st = gt_wan_hs_initiator_read(ep->hs, msg, len, out, sizeof out, &out_len);
        if (st != GT_OK) {
            net->gate.dials_refused++;
            goto fail;
        }
        st = ctl_send(ep, out, out_len, 0);
        if (st != GT_OK) goto fail;
    }
    st = gt_wan_hs_finish(ep->hs, &ep->sess);
    gt_wan_hs_destroy(ep->hs);
    ep->hs = NULL;
    if (st != GT_OK) goto fail;
    ep->peer = gt_wan_session_peer_id(ep->sess);
    ctl_authed(ep);
    return;
fail: /* counted by the gate (incoming) or as a refused dial, not as a rejected frame */
    ctl_fail(ep, st,
             st == GT_ERR_AUTH ? "the handshake failed authentication" : "a malformed handshake");
}

/* The control connection ended (EOF or an error). */
static void ctl_eof(gt_wan_ep_t *ep)
{
    gt_wan_net_t *net = ep->net;
    gt_wan_ctl_close(ep);
    if (ep->phase == GT_WAN_PH_READY) {
        /* Frames the peer sent before it closed may still be on the data path: let them in
         * for a moment (progress fails the endpoint after the grace, or earlier when the
         * transport reports the loss itself). */
        if (!ep->ctl_lost_ns) ep->ctl_lost_ns = gt_time_ns();
        return;
    }
    if (!ep->incoming && ep->phase == GT_WAN_PH_HELLO && ep->hello_tx > 0 && ep->hello_rx == 0) {
        /* It closed after reading our first handshake message: it refuses our key. */
        net->gate.dials_refused++;
        if (ep->peer < net->n_ids && !net->refused_since_ns[ep->peer])
            net->refused_since_ns[ep->peer] = gt_time_ns();
        ctl_fail(ep, GT_ERR_AUTH,
                 "the peer closed the connection during the handshake "
                 "(it does not accept our key?)");
        return;
    }
    ctl_fail(ep, GT_ERR_PEER_LOST,
             ep->incoming && ep->preauth ? "closed before authenticating" : NULL);
}

/* Reads and handles whole control frames while there are any. */
static void ctl_read(gt_wan_ep_t *ep)
{
    gt_wan_net_t *net = ep->net;
    while (ep->fd >= 0 && alive(ep)) {
        size_t want = GT_WAN_FRAME_HDR_LEN;
        gt_wan_frame_hdr_t h;
        int have_hdr = ep->crx_len >= GT_WAN_FRAME_HDR_LEN;
        size_t wire = 0;
        if (have_hdr) {
            int decoded = gt_wan_frame_decode(ep->crx, GT_WAN_FRAME_HDR_LEN, &h) == GT_OK;
            if (!decoded || h.type != GT_WAN_MSG_HELLO || h.run_id != net->run_hash ||
                h.msg_off != 0 || h.msg_len != h.payload_len) {
                int other_version = gt_le_get32(ep->crx) == GT_WAN_FRAME_MAGIC &&
                                    gt_le_get16(ep->crx + 4) != GT_WAN_FRAME_VERSION;
                ctl_fail(ep, GT_ERR_CORRUPT,
                         other_version ? "a handshake in another wire version (the sites run "
                                         "different geotrain releases)"
                         : decoded && h.type == GT_WAN_MSG_HELLO && h.run_id != net->run_hash
                             ? "a handshake of another run"
                             : "bytes that are not a handshake");
                return;
            }
            int sealed_addr = net->sec && ep->phase == GT_WAN_PH_ADDR;
            wire = sealed_addr ? GT_WAN_SEAL_BOUND(h.payload_len) : h.payload_len;
            if (ep->phase >= GT_WAN_PH_LINK || GT_WAN_FRAME_HDR_LEN + wire > sizeof ep->crx) {
                ctl_fail(ep, GT_ERR_CORRUPT,
                         ep->phase >= GT_WAN_PH_LINK ? "a control message on an open connection"
                                                     : "an oversized handshake message");
                return;
            }
            want = GT_WAN_FRAME_HDR_LEN + wire;
        }
        if (ep->crx_len < want) {
            ssize_t n = recv(ep->fd, ep->crx + ep->crx_len, want - ep->crx_len, MSG_DONTWAIT);
            if (n > 0) {
                ep->crx_len += (size_t)n;
                continue;
            }
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
            ctl_eof(ep);
            return;
        }
        if (!have_hdr) continue; /* now decode it */
        uint8_t *payload = ep->crx + GT_WAN_FRAME_HDR_LEN;
        ep->crx_len = 0; /* the frame is handled from the buffer before anything is read */
        if (ep->phase == GT_WAN_PH_HELLO)
            ctl_on_hello(ep, &h, payload, wire);
        else if (ep->phase == GT_WAN_PH_ADDR)
            ctl_on_addr(ep, &h, payload, wire);
        else
            ctl_fail(ep, GT_ERR_CORRUPT, "a control message out of place");
    }
}

/* Our connect completed (or failed): start the handshake. */
static void ctl_dialled(gt_wan_ep_t *ep)
{
    gt_wan_net_t *net = ep->net;
    int err = 0;
    socklen_t el = sizeof err;
    if (getsockopt(ep->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0) err = errno;
    if (err) {
        char why[160];
        snprintf(why, sizeof why, "cannot connect to %s: %s", ep->host, strerror(err));
        ctl_fail(ep, err == ECONNREFUSED ? GT_ERR_NOT_FOUND : GT_ERR_PEER_LOST, why);
        return;
    }
    ep->phase = GT_WAN_PH_HELLO;
    /* The handshake gets what the responder gives it (it closes an unauthenticated connection
     * after preauth_timeout_ms), not connect_timeout_ms: a message lost or held by someone on
     * the path would otherwise stall this peer's reconnection for the whole connect timeout,
     * while the responder has long given up on the connection. */
    ep->hs_deadline_ns = gt_time_ns() + (uint64_t)net->p.preauth_timeout_ms * 1000000ull;
    uint8_t msg[GT_WAN_HS_MSG_MAX];
    size_t len = 0;
    gt_status_t st;
    if (net->sec) {
        st = gt_wan_hs_create(net->sec, GT_WAN_HS_INITIATOR, ep->peer, &ep->hs);
        if (st == GT_OK) st = gt_wan_hs_initiator_start(ep->hs, msg, sizeof msg, &len);
    } else {
        plain_hello_bytes(net, msg);
        len = 12;
        st = GT_OK;
    }
    if (st == GT_OK) st = ctl_send(ep, msg, len, 0);
    if (st != GT_OK) ctl_fail(ep, st, "cannot start the handshake");
}

static int nodelay(int fd)
{
    int one = 1;
    return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static gt_status_t epoll_add(gt_wan_net_t *net, int fd, uint32_t events, void *ptr)
{
    struct epoll_event ev = {.events = events, .data.ptr = ptr};
    return epoll_ctl(net->epfd, EPOLL_CTL_ADD, fd, &ev) == 0 ? GT_OK : GT_ERR_IO;
}

static void source_str(const struct sockaddr_storage *sa, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (sa->ss_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, (socklen_t)cap);
    else if (sa->ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, (socklen_t)cap);
}

/* Takes what waits on the listening socket, within the caps. */
static void ctl_accept(gt_wan_net_t *net)
{
    for (int k = 0; k < CTL_ACCEPT_BURST; k++) {
        if (net->n_preauth >= net->p.preauth_max) {
            /* At the cap: stop accepting until a slot frees (preauth_end resumes). */
            struct epoll_event ev = {.events = 0, .data.ptr = LISTEN_TAG};
            if (!net->accept_paused && epoll_ctl(net->epfd, EPOLL_CTL_MOD, net->lfd, &ev) == 0) {
                net->accept_paused = 1;
                net->gate.accept_pauses++;
                gate_warn(net, "too many connections authenticating; the listener pauses", NULL);
            }
            return;
        }
        struct sockaddr_storage sa;
        socklen_t sl = sizeof sa;
        int fd = accept4(net->lfd, (struct sockaddr *)&sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
                gate_warn(net, strerror(errno), NULL); /* EMFILE and the like: retried later */
            return;
        }
        net->gate.accepted++;
        uint32_t same = 0;
        for (gt_wan_ep_t *e = net->eps; e; e = e->next)
            same += e->preauth && gt_wan_tp_same_ip(&e->src, &sa);
        if (same >= net->p.preauth_max_per_source) {
            net->gate.connections_capped++;
            gt_wan_ep_t tmp;
            source_str(&sa, tmp.host, sizeof tmp.host);
            gate_warn(net, "too many connections from one address authenticating; closed", &tmp);
            close(fd);
            continue;
        }
        nodelay(fd);
        gt_wan_ep_t *ep = NULL;
        if (gt_wan_ch_ep_alloc(net, fd, 1, UINT32_MAX, &ep) != GT_OK) continue; /* fd closed */
        ep->src = sa;
        ep->src_len = sl;
        source_str(&sa, ep->host, sizeof ep->host);
        ep->phase = GT_WAN_PH_HELLO;
        ep->preauth = 1;
        net->n_preauth++;
        net->gate.preauth_now = net->n_preauth;
        if (net->n_preauth > net->gate.preauth_peak) net->gate.preauth_peak = net->n_preauth;
        ep->hs_deadline_ns = gt_time_ns() + (uint64_t)net->p.preauth_timeout_ms * 1000000ull;
        if (epoll_add(net, fd, EPOLLIN | EPOLLRDHUP, ep) != GT_OK) {
            ctl_fail(ep, GT_ERR_IO, "epoll");
            continue;
        }
        ep->fd_events = EPOLLIN | EPOLLRDHUP;
    }
}

gt_status_t gt_wan_ctl_listen(gt_wan_net_t *net, const char *host, uint16_t port, uint16_t *port_p)
{
    if (net->lfd >= 0) return GT_ERR_EXISTS;
    char service[8];
    snprintf(service, sizeof service, "%u", (unsigned)port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host && *host ? host : NULL, service, &hints, &res);
    if (rc != 0 || !res) {
        GT_ERROR("wan: cannot resolve %s: %s", host ? host : "*", gai_strerror(rc));
        return GT_ERR_NOT_FOUND;
    }
    gt_status_t st = GT_ERR_IO;
    gt_wan_tp_listen_lock(); /* no listener appears while UCX starts (ucx.c) */
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) goto out;
    if (bind(fd, res->ai_addr, res->ai_addrlen) != 0) {
        GT_ERROR("wan: cannot listen on %s:%u: %s", host ? host : "*", (unsigned)port,
                 strerror(errno));
        st = errno == EADDRINUSE ? GT_ERR_EXISTS : GT_ERR_IO;
        goto out;
    }
    if (listen(fd, CTL_BACKLOG) != 0) goto out;
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    if (getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) goto out;
    if (epoll_add(net, fd, EPOLLIN, LISTEN_TAG) != GT_OK) goto out;
    *port_p = ntohs(sa.ss_family == AF_INET ? ((struct sockaddr_in *)&sa)->sin_port
                                            : ((struct sockaddr_in6 *)&sa)->sin6_port);
    net->lfd = fd;
    net->ctl_port = *port_p;
    fd = -1;
    st = GT_OK;
out:;
    int err = errno;
    gt_wan_tp_listen_unlock();
    if (st == GT_ERR_IO)
        GT_ERROR("wan: cannot listen on %s:%u: %s", host ? host : "*", (unsigned)port,
                 strerror(err));
    if (fd >= 0) close(fd);
    freeaddrinfo(res);
    return st;
}

gt_status_t gt_wan_ctl_dial(gt_wan_net_t *net, const char *host, uint16_t port, uint32_t peer,
                            gt_wan_ep_t **ep_p)
{
    char service[8];
    snprintf(service, sizeof service, "%u", (unsigned)port);
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0 || !res) {
        GT_ERROR("wan: cannot resolve %s: %s", host, gai_strerror(rc));
        return GT_ERR_NOT_FOUND;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        GT_ERROR("wan: socket: %s", strerror(errno));
        freeaddrinfo(res);
        return GT_ERR_IO;
    }
    nodelay(fd);
    rc = connect(fd, res->ai_addr, res->ai_addrlen);
    int err = rc == 0 ? 0 : errno;
    freeaddrinfo(res);
    if (rc != 0 && err != EINPROGRESS) {
        GT_DEBUG("wan: cannot connect to %s:%u: %s", host, (unsigned)port, strerror(err));
        close(fd);
        return err == ECONNREFUSED ? GT_ERR_NOT_FOUND : GT_ERR_IO;
    }
    gt_wan_ep_t *ep = NULL;
    gt_status_t st = gt_wan_ch_ep_alloc(net, fd, 0, peer, &ep);
    if (st != GT_OK) return st;
    snprintf(ep->host, sizeof ep->host, "%s", host);
    ep->phase = GT_WAN_PH_DIAL;
    ep->hs_deadline_ns = gt_time_ns() + (uint64_t)net->p.connect_timeout_ms * 1000000ull;
    if (epoll_add(net, fd, EPOLLOUT | EPOLLIN | EPOLLRDHUP, ep) != GT_OK) {
        gt_wan_ch_ep_fail(ep, GT_ERR_IO);
        gt_wan_ch_ep_free(ep);
        return GT_ERR_IO;
    }
    ep->fd_events = EPOLLOUT | EPOLLIN | EPOLLRDHUP;
    *ep_p = ep;
    return GT_OK;
}

void gt_wan_ctl_progress(gt_wan_net_t *net)
{
    struct epoll_event evs[CTL_EVENTS];
    int n = epoll_wait(net->epfd, evs, CTL_EVENTS, 0);
    for (int i = 0; i < n; i++) {
        if (evs[i].data.ptr == LISTEN_TAG) {
            if (net->lfd >= 0) ctl_accept(net);
            continue;
        }
        if (gt_wan_relay_event(net, evs[i].data.ptr, evs[i].events)) continue;
        gt_wan_ep_t *ep = evs[i].data.ptr;
        /* An endpoint freed earlier in this batch was removed from epoll, but its event may
         * still be in evs: only endpoints still on the list are touched. */
        gt_wan_ep_t *e = net->eps;
        while (e && e != ep) e = e->next;
        if (!e || ep->fd < 0 || !alive(ep)) continue;
        net->activity++;
        if (ep->phase == GT_WAN_PH_DIAL) {
            if (evs[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) ctl_dialled(ep);
            continue;
        }
        if (evs[i].events & EPOLLOUT) ctl_flush(ep);
        if (ep->fd >= 0 && alive(ep) &&
            (evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP)))
            ctl_read(ep);
    }
    /* Deadlines of connections still being set up. */
    uint64_t now = gt_time_ns();
    for (gt_wan_ep_t *ep = net->eps; ep; ep = ep->next) {
        if (ep->state != GT_ERR_AGAIN || now <= ep->hs_deadline_ns) continue;
        if (ep->incoming && ep->preauth) {
            ctl_fail(ep, GT_ERR_TIMEOUT, NULL);
        } else {
            char why[160];
            snprintf(why, sizeof why, "not set up within %u ms (%s)", net->p.connect_timeout_ms,
                     ep->phase <= GT_WAN_PH_HELLO ? "handshake" : "data path");
            ctl_fail(ep, GT_ERR_TIMEOUT, why);
        }
    }
}

void gt_wan_net_peer_auth(const gt_wan_net_t *net, uint32_t id, uint64_t *ok_ns_p,
                          uint64_t *refused_since_ns_p)
{
    *ok_ns_p = id < net->n_ids ? net->auth_ok_ns[id] : 0;
    *refused_since_ns_p = id < net->n_ids ? net->refused_since_ns[id] : 0;
}

void gt_wan_net_set_peer_host(gt_wan_net_t *net, uint32_t id, const char *host)
{
    if (id >= net->n_ids) return;
    memset(&net->peer_src[id], 0, sizeof net->peer_src[id]);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    if (!host || !*host || getaddrinfo(host, NULL, &hints, &res) != 0 || !res) return;
    if (res->ai_addrlen <= sizeof net->peer_src[id])
        memcpy(&net->peer_src[id], res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
}
