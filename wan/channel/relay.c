/* relay.c — the sealed relay: UCX's TCP data path, authenticated byte by byte before UCX
 * parses it (docs/security.md, "The sealed relay").
 *
 * Why: our frames are sealed, but UCX's tcp transport wraps them in framing of its own (an AM
 * header, UCP's header) that nothing authenticates, and UCX trusts it: one byte changed in it
 * on the path aborted a site inside UCX (an assertion on the AM id or length) or silently lost
 * a message. UCX reads its sockets itself, so the only place to check those bytes is before
 * they reach its socket.
 *
 * How: every TCP connection UCX makes goes to the relay instead (ucx.c redirects libucs's
 * connect(): the socket connects to a loopback listener of ours, and we note where it meant to
 * go). The relay dials the peer's control port, runs the ordinary X25519 handshake there (a
 * tunnel is a control connection that asks for a tunnel instead of sending a data-path
 * address: the same pre-authentication gate, caps and deadlines), and sends, sealed, which of
 * the peer's UCX listeners the connection is for. The peer's relay checks that it is one of
 * its own and connects to it from a source its listener filter lets in for that one connect
 * (ucx.c: nothing else can reach UCX's listener). From then on each side reads what its UCX
 * writes, in chunks of at most GT_WAN_TUNNEL_CHUNK, and sends each as one frame: a u32
 * length, the bytes, and a 16-byte tag over both under the tunnel's session (the nonce is the
 * session's counter, so frames cannot be changed, dropped, replayed or reordered unnoticed).
 * The bytes are authenticated, not encrypted a second time: everything of ours in them is a
 * frame the channel has already sealed end to end (the relay runs only with security:
 * encrypted), and what is left in clear is UCX's own framing (message lengths and ids, its
 * wire-up with the addresses we published anyway). Encrypting it again doubled the AES work
 * per byte for nothing (docs/security.md, "Throughput of the sealed relay"). The other side
 * checks each frame and writes its bytes to its UCX. A frame that does not verify is counted
 * (frames_rejected) and closes the tunnel: UCX sees its connection end, as on a reset, and
 * the channel above re-dials and re-sends. Nothing unauthenticated reaches UCX.
 *
 * Flow control is TCP's: a side reads its UCX only when its last frame has gone out, and the
 * peer's relay only when the bytes of the last frame from it are all in its UCX, so a tunnel
 * holds at most one chunk in each direction (about 130 KiB of buffers). Everything runs on
 * the net's epoll, from gt_wan_net_progress, beside the control connections.
 */
#include "channel_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#define RELAY_MAX_TUNNELS 256u
#define REQ_LEN           24u /* magic, family u16, port u16 (network order), 16 address bytes */

static gt_wan_tunnel_tag_t relay_listen_tag[2] = {{GT_WAN_TUNNEL_MAGIC, NULL, 2},
                                                  {GT_WAN_TUNNEL_MAGIC, NULL, 3}};

static socklen_t relay_salen(int family)
{
    return family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

void gt_wan_relay_init(gt_wan_net_t *net)
{
    net->relay_lfd[0] = net->relay_lfd[1] = -1;
}

/* ---- Tunnels ---- */

static void t_watch(gt_wan_tunnel_t *t, int remote, uint32_t events)
{
    int fd = remote ? t->rfd : t->lfd;
    uint32_t *cur = remote ? &t->rfd_events : &t->lfd_events;
    if (fd < 0 || *cur == events) return;
    struct epoll_event ev = {.events = events, .data.ptr = remote ? &t->rtag : &t->ltag};
    if (epoll_ctl(t->net->epfd, EPOLL_CTL_MOD, fd, &ev) == 0) *cur = events;
}

static void t_close(gt_wan_tunnel_t *t, const char *why, int warn)
{
    gt_wan_net_t *net = t->net;
    for (gt_wan_tunnel_t **pp = &net->tunnels; *pp; pp = &(*pp)->next)
        if (*pp == t) {
            *pp = t->next;
            break;
        }
    if (warn)
        GT_WARN("wan: site %s: relay tunnel with site %u closed: %s", net->site_name,
                (unsigned)t->peer, why);
    else
        GT_DEBUG("wan: site %s: relay tunnel with site %u closed: %s", net->site_name,
                 (unsigned)t->peer, why);
    int fds[2] = {t->rfd, t->lfd};
    for (int i = 0; i < 2; i++) {
        if (fds[i] < 0) continue;
        epoll_ctl(net->epfd, EPOLL_CTL_DEL, fds[i], NULL);
        close(fds[i]);
    }
    gt_wan_session_destroy(t->sess);
    free(t->out);
    free(t->in);
    net->gate.tunnels_closed++;
    net->activity++;
    free(t);
}

/* A frame from the peer's relay that does not open: counted, and the tunnel ends. */
static void t_reject(gt_wan_tunnel_t *t, int oversized)
{
    if (oversized)
        t->net->closed_stats.rejected_oversized++;
    else
        t->net->closed_stats.rejected_auth++;
    t_close(t, oversized ? "a frame longer than a chunk" : "a frame failed authentication", 1);
}

/* Moves bytes both ways as far as the sockets allow. Returns 0 when the tunnel is gone. */
static int t_pump(gt_wan_tunnel_t *t)
{
    for (int round = 0; round < 16; round++) {
        int moved = 0;
        /* Our library's bytes as one frame, when the last one has gone out. */
        if (!t->lconnecting && t->out_len == 0) {
            ssize_t n = recv(t->lfd, t->out + 4, GT_WAN_TUNNEL_CHUNK, MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                t_close(t, n == 0 ? "the local side closed" : "the local side failed", 0);
                return 0;
            }
            if (n > 0) {
                /* The tag covers the length and the bytes (associated data; nothing to
                 * encrypt): the session's counter is the nonce. */
                gt_le_put32(t->out, (uint32_t)n);
                size_t tag = 0;
                if (gt_wan_session_seal(t->sess, gt_wan_session_send_seq(t->sess), t->out,
                                        4 + (size_t)n, NULL, 0, t->out + 4 + n,
                                        GT_WAN_SEAL_BOUND(0), &tag) != GT_OK) {
                    t_close(t, "cannot seal (the session's counter is spent)", 1);
                    return 0;
                }
                t->out_off = 0;
                t->out_len = 4 + (size_t)n + tag;
                moved = 1;
            }
        }
        if (t->out_off < t->out_len) {
            ssize_t n = send(t->rfd, t->out + t->out_off, t->out_len - t->out_off,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                t_close(t, "the connection to the peer's relay broke", 0);
                return 0;
            }
            if (n > 0) {
                t->out_off += (size_t)n;
                if (t->out_off == t->out_len) t->out_off = t->out_len = 0;
                moved = 1;
            }
        }
        /* The peer's frames, when what the last one held has gone to our library. */
        if (t->plain_off == t->plain_len) {
            size_t want = 4;
            if (t->in_len >= 4) {
                uint32_t declared = gt_le_get32(t->in);
                if (declared == 0 || declared > GT_WAN_TUNNEL_CHUNK) {
                    t_reject(t, 1);
                    return 0;
                }
                want = 4 + GT_WAN_SEAL_BOUND(declared);
            }
            if (t->in_len < want) {
                ssize_t n = recv(t->rfd, t->in + t->in_len, want - t->in_len, MSG_DONTWAIT);
                if (n == 0 ||
                    (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                    t_close(t, n == 0 ? "the peer's relay closed" : "the peer's relay failed", 0);
                    return 0;
                }
                if (n > 0) {
                    t->in_len += (size_t)n;
                    moved = 1;
                }
            }
            if (t->in_len >= 4 && t->in_len == 4 + GT_WAN_SEAL_BOUND(gt_le_get32(t->in))) {
                uint32_t declared = gt_le_get32(t->in);
                size_t none = 0;
                if (gt_wan_session_open(t->sess, gt_wan_session_recv_seq(t->sess), 0, t->in,
                                        4 + (size_t)declared, t->in + 4 + declared,
                                        GT_WAN_SEAL_BOUND(0), t->in, 0, &none) != GT_OK) {
                    t_reject(t, 0);
                    return 0;
                }
                t->plain_off = 0;
                t->plain_len = declared;
                moved = 1;
            }
        }
        if (!t->lconnecting && t->plain_off < t->plain_len) {
            ssize_t n = send(t->lfd, t->in + 4 + t->plain_off, t->plain_len - t->plain_off,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                t_close(t, "the local side broke", 0);
                return 0;
            }
            if (n > 0) {
                t->plain_off += (size_t)n;
                if (t->plain_off == t->plain_len) t->plain_off = t->plain_len = t->in_len = 0;
                moved = 1;
            }
        }
        if (!moved) break;
        t->net->activity++;
    }
    uint32_t lev = (t->lconnecting || t->plain_off < t->plain_len ? EPOLLOUT : 0u) |
                   (!t->lconnecting && t->out_len == 0 ? EPOLLIN : 0u);
    uint32_t rev =
        (t->out_off < t->out_len ? EPOLLOUT : 0u) | (t->plain_off == t->plain_len ? EPOLLIN : 0u);
    t_watch(t, 0, lev);
    t_watch(t, 1, rev);
    return 1;
}

/* Turns an authenticated control connection into a tunnel: its socket, session and any
 * control bytes not yet sent move over; the endpoint is left closed for its owner to free. */
static gt_status_t t_from_ep(gt_wan_ep_t *ep, int lfd, int lconnecting)
{
    gt_wan_net_t *net = ep->net;
    size_t n_tunnels = 0;
    for (gt_wan_tunnel_t *t = net->tunnels; t; t = t->next) n_tunnels++;
    if (n_tunnels >= RELAY_MAX_TUNNELS) return GT_ERR_OVERFLOW;
    gt_wan_tunnel_t *t = calloc(1, sizeof *t);
    size_t left = ep->ctx_len - ep->ctx_off;
    if (t) {
        t->out = malloc(4 + GT_WAN_SEAL_BOUND(GT_WAN_TUNNEL_CHUNK) + sizeof ep->ctx);
        t->in = malloc(4 + GT_WAN_SEAL_BOUND(GT_WAN_TUNNEL_CHUNK));
    }
    if (!t || !t->out || !t->in) {
        if (t) {
            free(t->out);
            free(t->in);
        }
        free(t);
        return GT_ERR_NOMEM;
    }
    t->net = net;
    t->peer = ep->peer;
    t->rtag = (gt_wan_tunnel_tag_t){GT_WAN_TUNNEL_MAGIC, t, 1};
    t->ltag = (gt_wan_tunnel_tag_t){GT_WAN_TUNNEL_MAGIC, t, 0};
    t->lconnecting = lconnecting;
    memcpy(t->out, ep->ctx + ep->ctx_off, left);
    t->out_len = left;
    t->rfd = ep->fd;
    t->rfd_events = ep->fd_events;
    t->lfd = lfd;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &t->rtag};
    epoll_ctl(net->epfd, EPOLL_CTL_MOD, t->rfd, &ev);
    t->rfd_events = EPOLLIN;
    ev.data.ptr = &t->ltag;
    ev.events = EPOLLOUT;
    if (epoll_ctl(net->epfd, EPOLL_CTL_ADD, lfd, &ev) != 0) {
        free(t->out);
        free(t->in);
        free(t);
        return GT_ERR_IO;
    }
    t->lfd_events = EPOLLOUT;
    t->sess = ep->sess;
    ep->sess = NULL;
    ep->fd = -1;
    ep->fd_events = 0;
    ep->tunnel_lfd = -1;
    ep->ctx_off = ep->ctx_len = 0;
    ep->state = GT_ERR_CLOSED; /* not a failure: nothing was opened on it */
    t->next = net->tunnels;
    net->tunnels = t;
    net->gate.tunnels++;
    net->activity++;
    GT_DEBUG("wan: site %s: relay tunnel with site %u open (%s)", net->site_name, (unsigned)t->peer,
             ep->incoming ? "to our UCX" : "from our UCX");
    t_pump(t);
    return GT_OK;
}

gt_status_t gt_wan_relay_request(const gt_wan_ep_t *ep, uint8_t out[24], size_t *len_p)
{
    const struct sockaddr_storage *d = &ep->tunnel_dst;
    memset(out, 0, REQ_LEN);
    gt_le_put32(out, GT_WAN_TUNNEL_REQ_MAGIC);
    gt_le_put16(out + 4, (uint16_t)d->ss_family);
    if (d->ss_family == AF_INET) {
        memcpy(out + 6, &((const struct sockaddr_in *)d)->sin_port, 2);
        memcpy(out + 8, &((const struct sockaddr_in *)d)->sin_addr, 4);
    } else if (d->ss_family == AF_INET6) {
        memcpy(out + 6, &((const struct sockaddr_in6 *)d)->sin6_port, 2);
        memcpy(out + 8, &((const struct sockaddr_in6 *)d)->sin6_addr, 16);
    } else {
        return GT_ERR_INVALID;
    }
    *len_p = REQ_LEN;
    return GT_OK;
}

gt_status_t gt_wan_relay_dialled(gt_wan_ep_t *ep)
{
    int lfd = ep->tunnel_lfd;
    gt_status_t st = t_from_ep(ep, lfd, 0);
    if (st != GT_OK) return st;
    return GT_OK;
}

gt_status_t gt_wan_relay_accepted(gt_wan_ep_t *ep, const uint8_t *req, size_t len)
{
    gt_wan_net_t *net = ep->net;
    if (!net->relay_on || !net->ops->relay_dial) return GT_ERR_UNSUPPORTED;
    if (len != REQ_LEN) return GT_ERR_CORRUPT;
    struct sockaddr_storage dst = {0};
    uint16_t fam = gt_le_get16(req + 4);
    if (fam == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&dst;
        a->sin_family = AF_INET;
        memcpy(&a->sin_port, req + 6, 2);
        memcpy(&a->sin_addr, req + 8, 4);
    } else if (fam == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&dst;
        a->sin6_family = AF_INET6;
        memcpy(&a->sin6_port, req + 6, 2);
        memcpy(&a->sin6_addr, req + 8, 16);
    } else {
        return GT_ERR_CORRUPT;
    }
    gt_status_t st = gt_wan_net_tp_ensure(net, NULL);
    int lfd = -1;
    if (st == GT_OK) st = net->ops->relay_dial(net->tp, &dst, &lfd);
    if (st != GT_OK) return st;
    st = t_from_ep(ep, lfd, 1);
    if (st != GT_OK) close(lfd);
    return st;
}

/* ---- The library's connects ---- */

static int relay_listener(gt_wan_net_t *net, int family, struct sockaddr_storage *addr)
{
    int i = family == AF_INET6;
    struct sockaddr_storage sa = {0};
    if (family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&sa;
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_loopback;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&sa;
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    }
    if (net->relay_lfd[i] < 0) {
        gt_wan_tp_listen_lock(); /* no listener of ours appears while UCX starts (ucx.c) */
        int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        int ok = fd >= 0 && bind(fd, (struct sockaddr *)&sa, relay_salen(family)) == 0 &&
                 gt_wan_tp_filter_sources(fd, NULL, 0) == GT_OK && listen(fd, 128) == 0;
        gt_wan_tp_listen_unlock();
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &relay_listen_tag[i]};
        if (!ok || epoll_ctl(net->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            GT_ERROR("wan: the relay cannot listen on loopback: %s", strerror(errno));
            if (fd >= 0) close(fd);
            return -1;
        }
        net->relay_lfd[i] = fd;
    }
    socklen_t sl = sizeof *addr;
    return getsockname(net->relay_lfd[i], (struct sockaddr *)addr, &sl) == 0 ? 0 : -1;
}

/* The relay's loopback listeners let in exactly the connects we redirected and have not
 * accepted yet (each from its one source port): nothing else on this host reaches them. */
static void relay_filter(gt_wan_net_t *net)
{
    for (int i = 0; i < 2; i++) {
        if (net->relay_lfd[i] < 0) continue;
        struct sockaddr_storage allow[GT_WAN_RELAY_PENDING];
        size_t n = 0;
        for (size_t j = 0; j < net->n_pending; j++)
            if ((net->pending[j].local.ss_family == AF_INET6) == i)
                allow[n++] = net->pending[j].local;
        gt_wan_tp_filter_sources(net->relay_lfd[i], allow, n);
    }
}

static void pending_expire(gt_wan_net_t *net, uint64_t now)
{
    size_t keep = 0;
    for (size_t i = 0; i < net->n_pending; i++)
        if (net->pending[i].deadline_ns > now) net->pending[keep++] = net->pending[i];
    if (keep != net->n_pending) {
        net->n_pending = keep;
        relay_filter(net);
    }
}

static int relay_redirect(void *arg, void *owner, int fd, const struct sockaddr *dst, socklen_t len)
{
    gt_wan_net_t *net = arg;
    gt_wan_ep_t *ep = owner;
    struct sockaddr_storage laddr;
    pending_expire(net, gt_time_ns());
    if (!ep || !ep->peer_ctl_port || net->n_pending == GT_WAN_RELAY_PENDING ||
        relay_listener(net, dst->sa_family, &laddr) != 0) {
        errno = ECONNREFUSED;
        return -1;
    }
    /* The library's socket gets its loopback port first (bind), so the listener's filter can
     * let exactly this connect in before it is made. */
    gt_wan_relay_pending_t *p = &net->pending[net->n_pending];
    memset(p, 0, sizeof *p);
    p->local.ss_family = dst->sa_family;
    if (dst->sa_family == AF_INET6)
        ((struct sockaddr_in6 *)&p->local)->sin6_addr = in6addr_loopback;
    else
        ((struct sockaddr_in *)&p->local)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof p->local;
    if ((bind(fd, (struct sockaddr *)&p->local, relay_salen(dst->sa_family)) != 0 &&
         errno != EINVAL) ||
        getsockname(fd, (struct sockaddr *)&p->local, &sl) != 0) {
        errno = ECONNREFUSED;
        return -1;
    }
    memcpy(&p->dst, dst, len < sizeof p->dst ? len : sizeof p->dst);
    p->peer = ep->peer;
    snprintf(p->host, sizeof p->host, "%s", ep->host);
    p->port = ep->peer_ctl_port;
    p->deadline_ns = gt_time_ns() + (uint64_t)net->p.connect_timeout_ms * 1000000ull;
    net->n_pending++;
    relay_filter(net);
    /* The system call itself: a connect() interposed in this process (a test's proxy shim)
     * must not see the local leg. */
    int rc = (int)syscall(SYS_connect, fd, (struct sockaddr *)&laddr, relay_salen(dst->sa_family));
    int err = rc == 0 ? 0 : errno;
    if (rc != 0 && err != EINPROGRESS) {
        net->n_pending--;
        relay_filter(net);
        errno = err;
        return -1;
    }
    errno = err;
    return rc;
}

static void relay_pump(void *arg)
{
    gt_wan_net_t *net = arg;
    gt_wan_tunnel_t *next;
    for (gt_wan_tunnel_t *t = net->tunnels; t; t = next) {
        next = t->next;
        if (!t->lconnecting) t_pump(t);
    }
}

const gt_wan_tp_relay_t *gt_wan_relay_cb(gt_wan_net_t *net)
{
    net->relay.arg = net;
    net->relay.redirect = relay_redirect;
    net->relay.pump = relay_pump;
    return &net->relay;
}

/* A connection of our library reached the relay's listener: dial the peer's relay for it. */
static void relay_accept(gt_wan_net_t *net, int i)
{
    for (int k = 0; k < 64; k++) {
        struct sockaddr_storage from;
        socklen_t fl = sizeof from;
        int fd =
            accept4(net->relay_lfd[i], (struct sockaddr *)&from, &fl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        size_t j = 0;
        while (j < net->n_pending && !gt_wan_tp_same_addr(&net->pending[j].local, &from)) j++;
        if (j == net->n_pending) { /* not a connect we redirected: someone else on this host */
            close(fd);
            continue;
        }
        gt_wan_relay_pending_t p = net->pending[j];
        net->pending[j] = net->pending[--net->n_pending];
        relay_filter(net);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        gt_wan_ep_t *ep = NULL;
        if (gt_wan_ctl_dial(net, p.host, p.port, p.peer, &ep) != GT_OK) {
            close(fd); /* our library sees its connection end, and tries again */
            continue;
        }
        ep->relay_dial = 1;
        ep->tunnel_lfd = fd;
        ep->tunnel_dst = p.dst;
    }
}

int gt_wan_relay_event(gt_wan_net_t *net, void *ptr, uint32_t events)
{
    for (int i = 0; i < 2; i++)
        if (ptr == &relay_listen_tag[i]) {
            if (net->relay_lfd[i] >= 0) relay_accept(net, i);
            return 1;
        }
    gt_wan_tunnel_t *t = net->tunnels;
    while (t && ptr != &t->rtag && ptr != &t->ltag) t = t->next;
    if (!t) return 0;
    net->activity++;
    int remote = ptr == &t->rtag;
    if (!remote && t->lconnecting && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
        int err = 0;
        socklen_t el = sizeof err;
        if (getsockopt(t->lfd, SOL_SOCKET, SO_ERROR, &err, &el) != 0) err = errno;
        if (err) {
            t_close(t, "cannot reach our UCX listener", 1);
            return 1;
        }
        t->lconnecting = 0;
    }
    if ((events & (EPOLLERR | EPOLLHUP)) && !(events & EPOLLIN)) {
        t_close(t, remote ? "the connection to the peer's relay ended" : "the local side ended", 0);
        return 1;
    }
    t_pump(t);
    return 1;
}

void gt_wan_relay_progress(gt_wan_net_t *net)
{
    gt_wan_ep_t *next;
    for (gt_wan_ep_t *ep = net->eps; ep; ep = next) {
        next = ep->next;
        if (!ep->relay_dial || ep->state == GT_ERR_AGAIN) continue;
        if (ep->tunnel_lfd >= 0) close(ep->tunnel_lfd); /* the dial failed */
        ep->tunnel_lfd = -1;
        gt_wan_ch_ep_free(ep);
    }
    if (net->n_pending) pending_expire(net, gt_time_ns());
}

void gt_wan_relay_destroy(gt_wan_net_t *net)
{
    while (net->tunnels) t_close(net->tunnels, "the site closes", 0);
    gt_wan_ep_t *next;
    for (gt_wan_ep_t *ep = net->eps; ep; ep = next) {
        next = ep->next;
        if (!ep->relay_dial) continue;
        if (ep->tunnel_lfd >= 0) close(ep->tunnel_lfd);
        ep->tunnel_lfd = -1;
        gt_wan_ch_ep_fail(ep, GT_ERR_CLOSED);
        gt_wan_ch_ep_free(ep);
    }
    for (int i = 0; i < 2; i++) {
        if (net->relay_lfd[i] < 0) continue;
        epoll_ctl(net->epfd, EPOLL_CTL_DEL, net->relay_lfd[i], NULL);
        close(net->relay_lfd[i]);
        net->relay_lfd[i] = -1;
    }
    net->n_pending = 0;
}
