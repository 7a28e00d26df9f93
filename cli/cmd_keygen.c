/* cmd_keygen.c — `geotrain keygen --site NAME --out DIR`: a site's X25519 key pair; prints the
 * `public_key:` line to paste under the site in sites.yaml. `--admin`: the operator's Ed25519
 * signing key that admits sites added mid-run; prints the `admin_key:` line for `security:`. */
#include "cli.h"
#include "gt_wan.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out, "usage: geotrain keygen --site NAME --out DIR\n"
                 "       geotrain keygen --admin --out DIR\n\n"
                 "Makes a static X25519 key pair for one site's secure WAN channel:\n"
                 "  DIR/NAME.key  the secret key (mode 0600; keep it on that site only)\n"
                 "  DIR/NAME.pub  the public key\n"
                 "and prints the line to paste under the site in sites.yaml:\n"
                 "  public_key: <base64>\n"
                 "Existing key files are never overwritten.\n\n"
                 "--admin makes the operator's Ed25519 signing key instead: DIR/admin.key\n"
                 "(secret, 0600: keep it on the machine `geotrain sites add` runs from) and\n"
                 "DIR/admin.pub, and prints the line for the security: section of sites.yaml:\n"
                 "  admin_key: <base64>\n"
                 "A run with outer.site_slots admits a site added mid-run only with this key's\n"
                 "signature (docs/diloco.md#adding-a-site).\n\n"
                 "Options:\n"
                 "  --site NAME   the site's name, as in sites.yaml\n"
                 "  --admin       the operator's signing key, not a site's\n"
                 "  --out DIR     where to write the files (created with mode 0700 if missing)\n"
                 "  -h, --help    this text\n");
}

int gt_cmd_keygen(int argc, char **argv)
{
    static const struct option opts[] = {{"site", required_argument, NULL, 's'},
                                         {"out", required_argument, NULL, 'o'},
                                         {"admin", no_argument, NULL, 'a'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *site = NULL, *dir = NULL;
    int c, admin = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 's': site = optarg; break;
        case 'o': dir = optarg; break;
        case 'a': admin = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!dir || !site == !admin || optind != argc) {
        fprintf(stderr, "geotrain keygen: --out and one of --site or --admin are required\n");
        usage(stderr);
        return 2;
    }
    if (admin) {
        uint8_t pk[GT_WAN_KEY_BYTES];
        char b64[GT_WAN_KEY_B64_LEN + 1];
        gt_status_t st = gt_wan_admin_keygen(dir, pk);
        if (st != GT_OK) {
            fprintf(stderr, "geotrain keygen: %s\n", gt_status_str(st));
            return 1;
        }
        gt_wan_key_to_base64(pk, b64);
        fprintf(stderr, "wrote %s/admin.key (secret, 0600) and %s/admin.pub\n", dir, dir);
        printf("admin_key: %s\n", b64);
        return 0;
    }
    gt_wan_keypair_t kp;
    gt_status_t st = gt_wan_keypair_generate(&kp);
    if (st == GT_OK) st = gt_wan_keypair_save(&kp, dir, site);
    if (st != GT_OK) {
        gt_wan_keypair_wipe(&kp);
        fprintf(stderr, "geotrain keygen: %s\n", gt_status_str(st));
        return 1;
    }
    char b64[GT_WAN_KEY_B64_LEN + 1];
    gt_wan_key_to_base64(kp.public_key, b64);
    gt_wan_keypair_wipe(&kp);
    fprintf(stderr, "wrote %s/%s.key (secret, 0600) and %s/%s.pub\n", dir, site, dir, site);
    printf("public_key: %s\n", b64);
    return 0;
}
