/* certs.h — X.509 certificates for etcd's TLS (certs.c): a certificate authority and the
 * certificates it signs, for the etcd members (server and peer) and their clients (sites, the
 * operator). `geotrain launch` makes a throwaway set per run for its local etcd; `geotrain
 * certs` makes them for a real deployment (docs/deploy.md). Part of the CLI: the library only
 * reads the files, through membership.tls.
 *
 * Keys are ECDSA P-256, signatures SHA-256; private keys are written mode 0600 and never over
 * an existing file, certificates 0644; every file is written crash-safely (base/).
 */
#ifndef GT_CLI_CERTS_H
#define GT_CLI_CERTS_H

#include <stddef.h>

#include "gt_base.h"

/* What a certificate is for: an etcd member serves clients and dials its peers (serverAuth and
 * clientAuth), a client only dials (clientAuth). */
typedef enum { GT_CERT_MEMBER = 0, GT_CERT_CLIENT = 1 } gt_cert_kind_t;

/* Makes a certificate authority in dir: dir/ca.crt and dir/ca.key, subject CN=`cn`, valid
 * for `days` days (from an hour ago, for clocks a little behind). GT_ERR_EXISTS when either
 * file is there already: a CA is never replaced under certificates it signed. */
gt_status_t gt_certs_make_ca(const char *dir, const char *cn, unsigned days) GT_MUST_USE;

/* Signs a certificate with the CA in dir: dir/NAME.crt and dir/NAME.key, subject CN=`cn`,
 * subjectAltName from `sans` (each an IPv4/IPv6 address or a DNS name; a member needs the
 * addresses and names its clients and peers dial), valid for `days` days. GT_ERR_EXISTS when
 * NAME.key is there already, GT_ERR_NOT_FOUND without the CA's files. */
gt_status_t gt_certs_issue(const char *dir, const char *name, const char *cn, gt_cert_kind_t kind,
                           const char *const *sans, size_t n_sans, unsigned days) GT_MUST_USE;

/* The paths of NAME's files in dir, as gt_certs_issue writes them; "ca" names the CA's. */
void gt_certs_paths(const char *dir, const char *name, char *crt, char *key, size_t cap);

#endif /* GT_CLI_CERTS_H */
