/* port_taken_shim.c — an LD_PRELOAD library for test_etcd_port_taken: once armed
 * (shim_arm), the next getsockname() in the process reports a port that this library holds
 * open with a listening socket. So gt_etcd_free_port hands out a port that etcd then cannot
 * bind: the race between picking a free port and etcd binding it (another process taking it
 * in between), made certain. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dlsym(RTLD_NEXT) */
#endif
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

static int (*real_getsockname)(int, struct sockaddr *, socklen_t *);
static int g_held_port, g_armed;

int shim_arm(void);
int getsockname(int fd, struct sockaddr *sa, socklen_t *len);

/* Holds a loopback port open (listening) and arms the next getsockname(); returns the port. */
int shim_arm(void)
{
    if (!real_getsockname) real_getsockname = dlsym(RTLD_NEXT, "getsockname");
    if (!g_held_port) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a;
        socklen_t l = sizeof a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 1) != 0 ||
            real_getsockname(fd, (struct sockaddr *)&a, &l) != 0)
            return -1;
        g_held_port = ntohs(a.sin_port);
    }
    g_armed = 1;
    return g_held_port;
}

int getsockname(int fd, struct sockaddr *sa, socklen_t *len)
{
    if (!real_getsockname) real_getsockname = dlsym(RTLD_NEXT, "getsockname");
    int r = real_getsockname(fd, sa, len);
    if (r == 0 && g_armed && sa->sa_family == AF_INET) {
        g_armed = 0;
        ((struct sockaddr_in *)sa)->sin_port = htons((uint16_t)g_held_port);
    }
    return r;
}
