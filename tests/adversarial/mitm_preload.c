/* mitm_preload.c — LD_PRELOAD shim that puts the adversarial suite's proxy on every TCP
 * connection a site opens to 127.0.0.1, data path included.
 *
 * Why a shim: after the control handshake the data path goes to addresses the sites exchange
 * sealed (UCX worker addresses, libfabric passive-endpoint ports), which no proxy configured
 * by hand can sit in front of. This shim sees every connect() the site (and UCX, libfabric,
 * libcurl inside it) makes: it binds the socket to a loopback port of its own, tells the
 * proxy "local port -> real destination" on a Unix datagram socket, and connects to the proxy
 * instead. The proxy (adversarial.py) then opens the real connection and relays, altering
 * bytes on site-to-site connections as the scenario says.
 *
 * Environment: GT_MITM_PORT (the proxy's port on 127.0.0.1), GT_MITM_REG (the proxy's Unix
 * datagram socket path). Without them, or for anything but an IPv4 stream to 127.0.0.1, the
 * real connect() runs unchanged. Test code only: never linked into geotrain.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

typedef int (*connect_fn)(int, const struct sockaddr *, socklen_t);

int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    static connect_fn real;
    if (!real) real = (connect_fn)dlsym(RTLD_NEXT, "connect");
    const char *ps = getenv("GT_MITM_PORT"), *reg = getenv("GT_MITM_REG");
    int type = 0;
    socklen_t tl = sizeof type;
    if (!ps || !reg || !addr || addr->sa_family != AF_INET || len < sizeof(struct sockaddr_in) ||
        getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_STREAM)
        return real(fd, addr, len);
    const struct sockaddr_in *dst = (const struct sockaddr_in *)addr;
    unsigned proxy_port = (unsigned)atoi(ps);
    if (dst->sin_addr.s_addr != htonl(INADDR_LOOPBACK) || ntohs(dst->sin_port) == proxy_port)
        return real(fd, addr, len);
    int saved = errno;
    struct sockaddr_in me = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t ml = sizeof me;
    if (getsockname(fd, (struct sockaddr *)&me, &ml) != 0 || me.sin_port == 0) {
        /* libfabric's tcp provider sets IP_BIND_ADDRESS_NO_PORT and binds to 127.0.0.1:0:
         * the kernel then picks the port only in connect(), and getsockname() says 0, which
         * the proxy cannot map (it closed such connections, unread: a reset, "Failed to read
         * cm header"). Without the option, a second bind() of a socket that has no port yet
         * is allowed and picks the port now. */
        int off = 0;
        (void)setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &off, sizeof off);
        me.sin_port = 0;
        me.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ml = sizeof me;
        if (bind(fd, (struct sockaddr *)&me, sizeof me) != 0 ||
            getsockname(fd, (struct sockaddr *)&me, &ml) != 0 || me.sin_port == 0) {
            fprintf(stderr,
                    "mitm_preload: no local port for a connect() to port %u; not "
                    "proxied\n",
                    (unsigned)ntohs(dst->sin_port));
            errno = saved;
            return real(fd, addr, len);
        }
    }
    char msg[64];
    int n = snprintf(msg, sizeof msg, "%u %u", (unsigned)ntohs(me.sin_port),
                     (unsigned)ntohs(dst->sin_port));
    int u = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un ua = {.sun_family = AF_UNIX};
    snprintf(ua.sun_path, sizeof ua.sun_path, "%s", reg);
    int ok = u >= 0 && sendto(u, msg, (size_t)n, 0, (struct sockaddr *)&ua, sizeof ua) == n;
    if (u >= 0) close(u);
    errno = saved;
    if (!ok) return real(fd, addr, len);
    struct sockaddr_in px = *dst;
    px.sin_port = htons((uint16_t)proxy_port);
    return real(fd, (struct sockaddr *)&px, sizeof px);
}
