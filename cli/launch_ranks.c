/* launch_ranks.c — `geotrain launch CONFIG -- CMD` for a site of R ranks: CMD started R times
 * with torchrun's variables, one rendezvous per site.
 *
 * A PyTorch script written for torchrun reads RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
 * MASTER_ADDR and MASTER_PORT and calls init_process_group; Debian's torchrun cannot start
 * workers here, and on a real cluster each site is its own torchrun or srun job anyway. So the
 * launcher's child for such a site becomes the site's supervisor: it picks a free loopback port
 * for the site's rendezvous (every site its own, so their jobs never meet), forks the R ranks
 * and stands for them towards the launcher, which knows one process per site:
 *   - SIGTERM, SIGINT, SIGHUP and SIGCONT it receives are passed on to every rank;
 *   - a rank that dies of a signal (a chaos kill: the library SIGKILLs its site's last rank)
 *     takes the others with it (SIGKILL) and the supervisor dies of the same signal, as the
 *     launcher expects of a killed site; a rank that exits non-zero is given 10 s for the
 *     others to leave too, then they are killed, and the supervisor exits with its status;
 *   - the ranks die with the supervisor (PR_SET_PDEATHSIG), so a SIGKILL of the site leaves
 *     none behind.
 */
#include "launch_ranks.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 1024

static pid_t g_ranks[MAX_RANKS];
static uint32_t g_n;

static void forward(int sig)
{
    for (uint32_t k = 0; k < g_n; k++)
        if (g_ranks[k] > 0) kill(g_ranks[k], sig);
}

/* 1 when 127.0.0.1:port can be bound now (then closed), else 0; port 0 asks the kernel. */
static int bindable(int port, int *got_p)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
             getsockname(fd, (struct sockaddr *)&a, &len) == 0;
    if (ok && got_p) *got_p = ntohs(a.sin_port);
    close(fd);
    return ok;
}

/* A port on 127.0.0.1 for a site's rendezvous (torch's MASTER_PORT), free now. It is bound
 * later by the rank that hosts the rendezvous, so it is drawn below the kernel's ephemeral range
 * (ip_local_port_range): a port the kernel picked could be handed to any other process's
 * connect() or bind(0) in between (seen as "Address already in use" from torch with several
 * launches on one machine), one outside that range only to an explicit bind of the same number. */
static int free_port(void)
{
    int lo = 32768;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d", &lo) != 1) lo = 32768;
        fclose(f);
    }
    unsigned seed = (unsigned)getpid() ^ (unsigned)time(NULL) * 2654435761u;
    for (int tries = 0; lo > 12000 && tries < 64; tries++) {
        int port = 10000 + (int)(rand_r(&seed) % (unsigned)(lo - 10000));
        if (bindable(port, NULL)) return port;
    }
    int port = -1; /* the whole low range taken, or no room for it: the kernel's pick */
    return bindable(0, &port) ? port : -1;
}

static void kill_all(int sig)
{
    forward(sig);
    if (sig != SIGKILL) forward(SIGCONT); /* a stopped rank must see its SIGTERM */
}

int gt_launch_rank_env(uint32_t ranks, const char *site)
{
    int port = free_port();
    if (port <= 0) {
        fprintf(stderr, "geotrain launch: site %s: no free loopback port for its rendezvous: %s\n",
                site, strerror(errno));
        return -1;
    }
    char num[32];
    snprintf(num, sizeof num, "%d", port);
    int rc = setenv("MASTER_ADDR", "127.0.0.1", 1) | setenv("MASTER_PORT", num, 1);
    snprintf(num, sizeof num, "%u", ranks);
    rc |= setenv("WORLD_SIZE", num, 1) | setenv("LOCAL_WORLD_SIZE", num, 1) |
          setenv("GROUP_RANK", "0", 1);
    if (ranks == 1) rc |= setenv("RANK", "0", 1) | setenv("LOCAL_RANK", "0", 1);
    if (rc == 0) {
        printf("geotrain launch: site %s: %u rank%s, rendezvous 127.0.0.1:%d\n", site, ranks,
               ranks == 1 ? "" : "s", port);
        fflush(stdout);
    }
    return rc ? -1 : 0;
}

void gt_launch_ranks(char *const *argv, uint32_t ranks, const char *site)
{
    if (ranks == 0 || ranks > MAX_RANKS) {
        fprintf(stderr, "geotrain launch: site %s: %u ranks (1 to %d)\n", site, ranks, MAX_RANKS);
        _exit(126);
    }
    if (gt_launch_rank_env(ranks, site) != 0) _exit(126);
    char num[32];
    /* Signals held while the ranks are forked, so none is lost between a fork and its record. */
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    int fwd[] = {SIGTERM, SIGINT, SIGHUP, SIGCONT, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++) sigaction(fwd[i], &sa, NULL);
    pid_t self = getpid();
    for (uint32_t k = 0; k < ranks; k++) {
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "geotrain launch: site %s: cannot start rank %u: %s\n", site, k,
                    strerror(errno));
            kill_all(SIGKILL);
            _exit(126);
        }
        if (pid == 0) {
            for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++) signal(fwd[i], SIG_DFL);
            sigprocmask(SIG_SETMASK, &old, NULL);
            if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != self) _exit(125);
            snprintf(num, sizeof num, "%u", k);
            if (setenv("RANK", num, 1) != 0 || setenv("LOCAL_RANK", num, 1) != 0) _exit(126);
            execvp(argv[0], argv);
            fprintf(stderr, "cannot execute %s: %s\n", argv[0], strerror(errno));
            _exit(127);
        }
        g_ranks[g_n++] = pid;
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    int result = 0, died_of = 0;
    uint32_t left = ranks;
    struct timespec first_fail = {0, 0};
    while (left) {
        int status;
        pid_t pid = waitpid(-1, &status, first_fail.tv_sec ? WNOHANG : 0);
        if (pid < 0 && errno == EINTR) continue;
        if (pid < 0) break;
        if (pid == 0) { /* a rank failed: the others have 10 s to leave too */
            struct timespec now, ts = {0, 50000000};
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (now.tv_sec - first_fail.tv_sec >= 10) kill_all(SIGKILL);
            nanosleep(&ts, NULL);
            continue;
        }
        uint32_t k = 0;
        while (k < g_n && g_ranks[k] != pid) k++;
        if (k == g_n) continue;
        g_ranks[k] = 0;
        left--;
        if (WIFSIGNALED(status)) {
            if (!died_of) {
                died_of = WTERMSIG(status);
                printf("geotrain launch: site %s: rank %u died of signal %d; stopping its other "
                       "ranks\n",
                       site, k, died_of);
                fflush(stdout);
                kill_all(SIGKILL);
            }
        } else if (WEXITSTATUS(status) != 0 && !result) {
            result = WEXITSTATUS(status);
            if (!died_of && left) {
                printf("geotrain launch: site %s: rank %u exited %d\n", site, k, result);
                fflush(stdout);
                clock_gettime(CLOCK_MONOTONIC, &first_fail);
                if (!first_fail.tv_sec) first_fail.tv_sec = 1;
            }
        }
    }
    if (died_of) {
        signal(died_of, SIG_DFL);
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, died_of);
        sigprocmask(SIG_UNBLOCK, &one, NULL);
        raise(died_of);
        _exit(128 + died_of);
    }
    _exit(result);
}
