/* cmd_certs.c — `geotrain certs`: the certificates etcd's TLS takes in a real deployment, a CA
 * and what it signs (certs.c), so an operator needs no openssl recipe. The CA is made once and
 * reused (a later call adds certificates to it); nothing existing is overwritten. */
#include "certs.h"
#include "cli.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_NAMES 64
#define MAX_HOSTS 16

static void usage(FILE *out)
{
    fprintf(out,
            "usage: geotrain certs --out DIR [--member NAME=HOST[,HOST...] ...]\n"
            "                      [--client NAME ...] [--days N]\n\n"
            "Makes the certificates for etcd with client and peer TLS (docs/deploy.md):\n"
            "  DIR/ca.crt, DIR/ca.key        a CA (made when DIR has none; keep ca.key offline)\n"
            "  DIR/NAME.crt, DIR/NAME.key    for each --member: an etcd member's certificate,\n"
            "                                for its clients and its peers (serverAuth and\n"
            "                                clientAuth), valid for the HOSTs they dial (IP\n"
            "                                addresses or DNS names)\n"
            "                                for each --client: a client's (a site, an\n"
            "                                operator's etcdctl), clientAuth only\n"
            "Keys are ECDSA P-256, written mode 0600; existing files are never overwritten.\n"
            "Then each member runs etcd with --cert-file NAME.crt --key-file NAME.key\n"
            "--trusted-ca-file ca.crt --client-cert-auth and the same three as --peer-*\n"
            "with --peer-client-cert-auth, and each site's sites.yaml (or --set) has\n"
            "membership.tls.ca: ca.crt, membership.tls.cert: NAME.crt, membership.tls.key:\n"
            "NAME.key and https:// endpoints. `geotrain launch` makes its own per run.\n\n"
            "Options:\n"
            "  --out DIR                 where the files go (created 0700 when missing)\n"
            "  --member NAME=HOST[,...]  an etcd member and the addresses it is dialled at\n"
            "  --client NAME             a client certificate (repeatable)\n"
            "  --days N                  validity (default 365)\n"
            "  -h, --help                this text\n");
}

/* NAME=HOST,HOST: the name, and up to MAX_HOSTS hosts pointing into buf (modified). */
static int split_member(char *buf, const char **hosts, size_t *n_p)
{
    char *eq = strchr(buf, '=');
    if (!eq || eq == buf || !eq[1]) return -1;
    *eq = '\0';
    size_t n = 0;
    for (char *h = strtok(eq + 1, ","); h; h = strtok(NULL, ",")) {
        if (n == MAX_HOSTS || !*h) return -1;
        hosts[n++] = h;
    }
    *n_p = n;
    return n ? 0 : -1;
}

/* A certificate's name becomes a file name: letters, digits, '-', '_', '.' (not first). */
static int safe_name(const char *s)
{
    if (!*s || *s == '.' || strlen(s) > 64) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '-' || *s == '_' || *s == '.'))
            return 0;
    return 1;
}

int gt_cmd_certs(int argc, char **argv)
{
    static const struct option opts[] = {
        {"out", required_argument, NULL, 'o'},    {"member", required_argument, NULL, 'm'},
        {"client", required_argument, NULL, 'c'}, {"days", required_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
    const char *dir = NULL, *members[MAX_NAMES], *clients[MAX_NAMES];
    size_t n_members = 0, n_clients = 0;
    long days = 365;
    char *end = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'o': dir = optarg; break;
        case 'm':
            if (n_members == MAX_NAMES) {
                fprintf(stderr, "geotrain certs: at most %d --member\n", MAX_NAMES);
                return 2;
            }
            members[n_members++] = optarg;
            break;
        case 'c':
            if (n_clients == MAX_NAMES) {
                fprintf(stderr, "geotrain certs: at most %d --client\n", MAX_NAMES);
                return 2;
            }
            clients[n_clients++] = optarg;
            break;
        case 'd':
            days = strtol(optarg, &end, 10);
            if (*end || days < 1 || days > 36500) {
                fprintf(stderr, "geotrain certs: --days %s: expected 1 to 36500\n", optarg);
                return 2;
            }
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!dir || optind != argc) {
        fprintf(stderr, "geotrain certs: --out DIR is required\n");
        usage(stderr);
        return 2;
    }
    char crt[PATH_MAX + 64], key[PATH_MAX + 64];
    gt_certs_paths(dir, "ca", crt, key, sizeof crt);
    if (access(crt, F_OK) != 0) {
        if (gt_certs_make_ca(dir, "geotrain etcd CA", (unsigned)days) != GT_OK) return 1;
        fprintf(stderr, "wrote %s and %s (the CA's key: 0600; keep it offline)\n", crt, key);
    } else {
        fprintf(stderr, "using the CA in %s\n", crt);
    }
    for (size_t i = 0; i < n_members + n_clients; i++) {
        int member = i < n_members;
        char buf[1024];
        const char *hosts[MAX_HOSTS];
        size_t n_hosts = 0;
        snprintf(buf, sizeof buf, "%s", member ? members[i] : clients[i - n_members]);
        if ((member && split_member(buf, hosts, &n_hosts) != 0) || !safe_name(buf)) {
            fprintf(stderr,
                    "geotrain certs: %s %s: expected %s, NAME of letters, digits, '-', '_', '.'\n",
                    member ? "--member" : "--client", buf, member ? "NAME=HOST[,HOST...]" : "NAME");
            return 2;
        }
        if (gt_certs_issue(dir, buf, buf, member ? GT_CERT_MEMBER : GT_CERT_CLIENT, hosts, n_hosts,
                           (unsigned)days) != GT_OK)
            return 1;
        gt_certs_paths(dir, buf, crt, key, sizeof crt);
        fprintf(stderr, "wrote %s and %s (%s)\n", crt, key,
                member ? "an etcd member's: server and peer" : "a client's");
    }
    return 0;
}
