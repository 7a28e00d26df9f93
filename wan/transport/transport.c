/* transport.c — backend selection and the helpers both backends share (request completion,
 * request lists, "host:port" parsing). */
#include "transport_internal.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ifaddrs.h>
#include <link.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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

static int wildcard_ip(const struct sockaddr *a)
{
    if (a->sa_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr == htonl(INADDR_ANY);
    if (a->sa_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &in6addr_any, 16) == 0;
    return 0;
}

gt_status_t gt_wan_tp_host_ifname(const char *host, char *name, size_t cap)
{
    if (!host || !*host || !name || !cap) return GT_ERR_INVALID;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    if (getaddrinfo(host, NULL, &hints, &res) != 0 || !res) return GT_ERR_NOT_FOUND;
    gt_status_t st = GT_ERR_NOT_FOUND;
    if (wildcard_ip(res->ai_addr)) {
        freeaddrinfo(res);
        return GT_ERR_INVALID;
    }
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) == 0) {
        for (struct ifaddrs *i = ifs; i && st != GT_OK; i = i->ifa_next)
            for (struct addrinfo *a = res; a && i->ifa_addr && st != GT_OK; a = a->ai_next)
                /* the comparison reads the family, then the address of that family only */
                if (gt_wan_tp_same_ip((const struct sockaddr_storage *)i->ifa_addr,
                                      (const struct sockaddr_storage *)a->ai_addr) &&
                    strlen(i->ifa_name) < cap) {
                    snprintf(name, cap, "%s", i->ifa_name);
                    st = GT_OK;
                }
        freeifaddrs(ifs);
    }
    freeaddrinfo(res);
    return st;
}

gt_status_t gt_wan_tp_random(void *buf, size_t len)
{
    uint8_t *p = buf;
    while (len) {
        ssize_t n = getrandom(p, len, 0);
        if (n < 0) return GT_ERR_IO;
        p += n;
        len -= (size_t)n;
    }
    return GT_OK;
}

/* ---- listening sockets a library opens for itself ------------------------------------ */

static pthread_mutex_t g_listen_lock = PTHREAD_MUTEX_INITIALIZER;

void gt_wan_tp_listen_lock(void)
{
    pthread_mutex_lock(&g_listen_lock);
}

void gt_wan_tp_listen_unlock(void)
{
    pthread_mutex_unlock(&g_listen_lock);
}

size_t gt_wan_tp_listeners(int *fds, size_t cap)
{
    DIR *d = opendir("/proc/self/fd");
    size_t n = 0;
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char *end = NULL;
        long fd = strtol(e->d_name, &end, 10);
        if (!end || *end || fd < 0 || fd == dirfd(d)) continue;
        struct stat sb;
        int on = 0, type = 0, dom = 0;
        socklen_t l1 = sizeof on, l2 = sizeof type, l3 = sizeof dom;
        if (fstat((int)fd, &sb) != 0 || !S_ISSOCK(sb.st_mode)) continue;
        if (getsockopt((int)fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &l1) != 0 || !on) continue;
        if (getsockopt((int)fd, SOL_SOCKET, SO_TYPE, &type, &l2) != 0 || type != SOCK_STREAM)
            continue;
        if (getsockopt((int)fd, SOL_SOCKET, SO_DOMAIN, &dom, &l3) != 0 ||
            (dom != AF_INET && dom != AF_INET6))
            continue;
        if (n < cap) fds[n] = (int)fd;
        n++;
    }
    closedir(d);
    return n;
}

/* Classic BPF, run by the kernel on every segment that reaches the socket (a listener's SYNs
 * and handshake ACKs included; accepted sockets inherit the program): accept (return all
 * bytes) the segments whose source address is in the list, drop (return 0) the rest. */
int gt_wan_tp_same_ip(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family) return 0;
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (a->ss_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                      &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0;
    return 0;
}

int gt_wan_tp_same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (!gt_wan_tp_same_ip(a, b)) return 0;
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_port ==
               ((const struct sockaddr_in *)b)->sin_port;
    return ((const struct sockaddr_in6 *)a)->sin6_port ==
           ((const struct sockaddr_in6 *)b)->sin6_port;
}

gt_status_t gt_wan_tp_filter_sources(int fd, const struct sockaddr_storage *allow, size_t n)
{
    /* Per address: up to 4 word loads and compares, then a port load and compare. */
    enum { MAX_INS = 6 + GT_WAN_TP_FILTER_MAX * 10 + 4 };
    struct sock_filter prog[MAX_INS];
    size_t k = 0, n4 = 0, n6 = 0;
    uint32_t v4[GT_WAN_TP_FILTER_MAX], v6[GT_WAN_TP_FILTER_MAX][4];
    uint16_t p4[GT_WAN_TP_FILTER_MAX], p6[GT_WAN_TP_FILTER_MAX];
    for (size_t i = 0; i < n && n4 + n6 < GT_WAN_TP_FILTER_MAX; i++) {
        if (allow[i].ss_family == AF_INET) {
            const struct sockaddr_in *a4 = (const struct sockaddr_in *)&allow[i];
            p4[n4] = ntohs(a4->sin_port);
            v4[n4++] = ntohl(a4->sin_addr.s_addr);
        } else if (allow[i].ss_family == AF_INET6) {
            const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)&allow[i];
            const uint8_t *a = a6->sin6_addr.s6_addr;
            static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
            if (memcmp(a, mapped, 12) == 0) { /* an IPv4 peer on a dual-stack socket */
                p4[n4] = ntohs(a6->sin6_port);
                v4[n4++] =
                    (uint32_t)a[12] << 24 | (uint32_t)a[13] << 16 | (uint32_t)a[14] << 8 | a[15];
                continue;
            }
            for (int w = 0; w < 4; w++)
                v6[n6][w] = (uint32_t)a[4 * w] << 24 | (uint32_t)a[4 * w + 1] << 16 |
                            (uint32_t)a[4 * w + 2] << 8 | a[4 * w + 3];
            p6[n6++] = ntohs(a6->sin6_port);
        }
    }
    /* Layout: [0] load protocol, [1] IPv4?, [2] IPv6?, [3] drop, IPv4 block, drop, IPv6 block,
     * drop, accept. Jumps are relative and forward; `ACCEPT` is patched at the end. A socket
     * filter on a TCP socket sees the segment from its TCP header on (offset 0: the source
     * port); the IP header is reached through SKF_NET_OFF. An entry with a port matches only
     * that source port: on a mismatch it skips to the next entry's first load. */
    const uint8_t ACCEPT = 0xff; /* placeholder */
    prog[k++] =
        (struct sock_filter)BPF_STMT(BPF_LD | BPF_H | BPF_ABS, SKF_AD_OFF + SKF_AD_PROTOCOL);
    size_t j4 = k++, j6 = k++;
    prog[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0);
    size_t b4 = k;
    for (size_t i = 0; i < n4; i++) {
        prog[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SKF_NET_OFF + 12);
        if (!p4[i]) {
            prog[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, v4[i], ACCEPT, 0);
            continue;
        }
        prog[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, v4[i], 0, 2);
        prog[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 0);
        prog[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, p4[i], ACCEPT, 0);
    }
    prog[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0);
    size_t b6 = k;
    for (size_t i = 0; i < n6; i++) {
        /* Four words of the source address (IPv6 header bytes 8..23), then the port; a
         * mismatch skips to the next address's first load (or the drop after the last). */
        int np = p6[i] ? 2 : 0;
        for (int w = 0; w < 4; w++) {
            prog[k++] =
                (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SKF_NET_OFF + 8 + 4 * w);
            uint8_t skip = (uint8_t)(2 * (3 - w) + np); /* to the next address block */
            prog[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, v6[i][w],
                                                     w == 3 && !np ? ACCEPT : 0, skip);
        }
        if (np) {
            prog[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 0);
            prog[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, p6[i], ACCEPT, 0);
        }
    }
    prog[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0);
    size_t acc = k;
    prog[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0xffffffffu);
    prog[j4] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ETH_P_IP,
                                            (uint8_t)(b4 - j4 - 1), 0);
    prog[j6] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ETH_P_IPV6,
                                            (uint8_t)(b6 - j6 - 1), 0);
    for (size_t i = b4 + 1; i < acc; i++)
        if (BPF_CLASS(prog[i].code) == BPF_JMP && prog[i].jt == ACCEPT)
            prog[i].jt = (uint8_t)(acc - i - 1);
    struct sock_fprog fp = {.len = (unsigned short)k, .filter = prog};
    if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &fp, sizeof fp) != 0) {
        GT_ERROR("wan: cannot filter a listening socket (SO_ATTACH_FILTER): %s", strerror(errno));
        return GT_ERR_IO;
    }
    return GT_OK;
}

/* ---- Redirecting a library's connect() (the sealed relay, relay.c) ---- */

typedef struct {
    const char *lib, *sym;
    void *fn;
    size_t patched;
    int failed;
} got_hook_t;

static uintptr_t dyn_ptr(const struct dl_phdr_info *info, ElfW(Addr) v)
{
    /* glibc relocates the pointers of .dynamic in place on most architectures; where it does
     * not (a read-only .dynamic), they are offsets from the load address. */
    return v < info->dlpi_addr ? info->dlpi_addr + v : v;
}

static void got_patch_rela(got_hook_t *h, const struct dl_phdr_info *info, const ElfW(Rela) * rel,
                           size_t n, const ElfW(Sym) * symtab, const char *strtab,
                           uintptr_t relro_lo, uintptr_t relro_hi)
{
    long page = sysconf(_SC_PAGESIZE);
    for (size_t i = 0; i < n; i++) {
        size_t si = ELF64_R_SYM(rel[i].r_info);
        if (!si || strcmp(strtab + symtab[si].st_name, h->sym) != 0) continue;
        void **slot = (void **)(info->dlpi_addr + rel[i].r_offset);
        uintptr_t pg = (uintptr_t)slot & ~(uintptr_t)(page - 1);
        int relro = (uintptr_t)slot >= relro_lo && (uintptr_t)slot < relro_hi;
        if (relro && mprotect((void *)pg, (size_t)page, PROT_READ | PROT_WRITE) != 0) {
            h->failed = 1;
            continue;
        }
        __atomic_store_n(slot, h->fn, __ATOMIC_SEQ_CST);
        if (relro) mprotect((void *)pg, (size_t)page, PROT_READ);
        h->patched++;
    }
}

static int got_hook_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    got_hook_t *h = arg;
    (void)size;
    if (!info->dlpi_name || !strstr(info->dlpi_name, h->lib)) return 0;
    const ElfW(Dyn) *dyn = NULL;
    uintptr_t relro_lo = 0, relro_hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn) *)(info->dlpi_addr + ph->p_vaddr);
        if (ph->p_type == PT_GNU_RELRO) {
            relro_lo = info->dlpi_addr + ph->p_vaddr;
            relro_hi = relro_lo + ph->p_memsz;
        }
    }
    if (!dyn) return 0;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const ElfW(Rela) *jmprel = NULL, *rela = NULL;
    size_t jmprel_sz = 0, rela_sz = 0;
    int pltrel_rela = 1;
    for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_SYMTAB: symtab = (const ElfW(Sym) *)dyn_ptr(info, d->d_un.d_ptr); break;
        case DT_STRTAB: strtab = (const char *)dyn_ptr(info, d->d_un.d_ptr); break;
        case DT_JMPREL: jmprel = (const ElfW(Rela) *)dyn_ptr(info, d->d_un.d_ptr); break;
        case DT_PLTRELSZ: jmprel_sz = d->d_un.d_val; break;
        case DT_PLTREL: pltrel_rela = d->d_un.d_val == DT_RELA; break;
        case DT_RELA: rela = (const ElfW(Rela) *)dyn_ptr(info, d->d_un.d_ptr); break;
        case DT_RELASZ: rela_sz = d->d_un.d_val; break;
        default: break;
        }
    }
    if (!symtab || !strtab || !pltrel_rela) {
        h->failed = 1;
        return 1;
    }
    if (jmprel)
        got_patch_rela(h, info, jmprel, jmprel_sz / sizeof *jmprel, symtab, strtab, relro_lo,
                       relro_hi);
    if (rela)
        got_patch_rela(h, info, rela, rela_sz / sizeof *rela, symtab, strtab, relro_lo, relro_hi);
    return 1;
}

gt_status_t gt_wan_tp_hook_got(const char *lib, const char *sym, void *fn, size_t *patched_p)
{
    got_hook_t h = {.lib = lib, .sym = sym, .fn = fn};
    dl_iterate_phdr(got_hook_cb, &h);
    if (patched_p) *patched_p = h.patched;
    if (h.failed) return GT_ERR_IO;
    return h.patched ? GT_OK : GT_ERR_NOT_FOUND;
}
