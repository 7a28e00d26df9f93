/* certs.c — a certificate authority and the certificates it signs, with OpenSSL's libcrypto
 * (Debian's libssl-dev), for etcd's client and peer TLS (certs.h).
 *
 * Shaped after what etcd checks: a member's certificate is both a server's (clients and peers
 * dial it: serverAuth, with the addresses they dial in subjectAltName) and a client's (it dials
 * its peers: clientAuth, required by --peer-client-cert-auth); a site's is a client's only. The
 * CA's key signs them and is needed for nothing else, so a deployment keeps it offline; a
 * `launch` run's is thrown away with the run directory.
 */
#include "certs.h"

#include <arpa/inet.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void gt_certs_paths(const char *dir, const char *name, char *crt, char *key, size_t cap)
{
    snprintf(crt, cap, "%s/%s.crt", dir, name);
    snprintf(key, cap, "%s/%s.key", dir, name);
}

/* libcrypto's reason for the last failure, for the log line. */
static const char *ssl_why(void)
{
    static char buf[256];
    unsigned long e = ERR_get_error();
    if (!e) return "unknown error";
    ERR_error_string_n(e, buf, sizeof buf);
    ERR_clear_error();
    return buf;
}

/* One v3 extension, as the openssl tool's config would write it ("critical,CA:TRUE"). */
static int add_ext(X509 *x, X509V3_CTX *ctx, int nid, const char *value)
{
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
    if (!ext) return 0;
    int ok = X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    return ok;
}

/* subjectAltName text: IP:a for an address, DNS:n for a name. */
static int sans_text(const char *const *sans, size_t n, char *out, size_t cap)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        unsigned char addr[16];
        int ip = inet_pton(AF_INET, sans[i], addr) == 1 || inet_pton(AF_INET6, sans[i], addr) == 1;
        int w =
            snprintf(out + used, cap - used, "%s%s:%s", i ? "," : "", ip ? "IP" : "DNS", sans[i]);
        if (w < 0 || (size_t)w >= cap - used) return 0;
        used += (size_t)w;
    }
    return 1;
}

/* PEM of a certificate or a private key, written crash-safely with the given mode. */
static gt_status_t write_pem(const char *path, X509 *crt, EVP_PKEY *key, unsigned mode)
{
    BIO *bio = BIO_new(BIO_s_mem());
    if (!bio) return GT_ERR_NOMEM;
    int ok = crt ? PEM_write_bio_X509(bio, crt)
                 : PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL);
    gt_status_t st = GT_ERR_IO;
    char *data = NULL;
    long len = ok ? BIO_get_mem_data(bio, &data) : 0;
    if (len > 0) {
        gt_afile_t *af = NULL;
        st = gt_afile_open(path, mode, GT_AFILE_NO_REPLACE | GT_AFILE_MODE_EXACT, &af);
        if (st == GT_OK) st = gt_afile_write(af, data, (size_t)len);
        if (st == GT_OK) {
            st = gt_afile_commit(af);
        } else if (af) {
            gt_afile_abort(af);
        }
    } else {
        GT_ERROR("certs: cannot encode %s: %s", path, ssl_why());
    }
    BIO_free(bio);
    return st;
}

static EVP_PKEY *read_key(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    EVP_PKEY *k = PEM_read_PrivateKey(f, NULL, NULL, NULL);
    fclose(f);
    return k;
}

static X509 *read_crt(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    X509 *x = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    return x;
}

/* A certificate for `key`, subject CN=cn, signed by (issuer, issuer_key), or self-signed when
 * issuer is NULL; `exts` are (nid, value) pairs. */
static X509 *make_crt(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *issuer_key,
                      unsigned days, const int *nids, const char *const *values, size_t n_ext)
{
    X509 *x = X509_new();
    BIGNUM *serial = BN_new();
    int ok =
        x && serial && X509_set_version(x, 2) &&
        BN_rand(serial, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) &&
        BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(x)) &&
        X509_gmtime_adj(X509_getm_notBefore(x), -3600) &&
        X509_gmtime_adj(X509_getm_notAfter(x), (long)days * 86400L) && X509_set_pubkey(x, key) &&
        X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_UTF8,
                                   (const unsigned char *)cn, -1, -1, 0) &&
        X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : X509_get_subject_name(x));
    BN_free(serial);
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, issuer ? issuer : x, x, NULL, NULL, 0);
    for (size_t i = 0; ok && i < n_ext; i++) ok = add_ext(x, &ctx, nids[i], values[i]);
    if (ok) ok = X509_sign(x, issuer ? issuer_key : key, EVP_sha256()) > 0;
    if (!ok) {
        GT_ERROR("certs: cannot make the certificate of %s: %s", cn, ssl_why());
        X509_free(x);
        return NULL;
    }
    return x;
}

gt_status_t gt_certs_make_ca(const char *dir, const char *cn, unsigned days)
{
    char crt_path[1200], key_path[1200];
    gt_certs_paths(dir, "ca", crt_path, key_path, sizeof crt_path);
    if (access(crt_path, F_OK) == 0 || access(key_path, F_OK) == 0) {
        GT_ERROR("certs: %s holds a CA already (ca.crt, ca.key): it is not replaced", dir);
        return GT_ERR_EXISTS;
    }
    gt_status_t st = gt_mkdirs(dir);
    if (st != GT_OK) return st;
    EVP_PKEY *key = EVP_EC_gen("P-256");
    if (!key) {
        GT_ERROR("certs: cannot make a key: %s", ssl_why());
        return GT_ERR_IO;
    }
    static const int nids[] = {NID_basic_constraints, NID_key_usage, NID_subject_key_identifier};
    static const char *const values[] = {"critical,CA:TRUE,pathlen:0",
                                         "critical,keyCertSign,cRLSign", "hash"};
    X509 *crt = make_crt(key, cn, NULL, NULL, days, nids, values, 3);
    st = crt ? write_pem(key_path, NULL, key, 0600) : GT_ERR_IO;
    if (st == GT_OK) st = write_pem(crt_path, crt, NULL, 0644);
    X509_free(crt);
    EVP_PKEY_free(key);
    return st;
}

gt_status_t gt_certs_issue(const char *dir, const char *name, const char *cn, gt_cert_kind_t kind,
                           const char *const *sans, size_t n_sans, unsigned days)
{
    char ca_crt[1200], ca_key[1200], crt_path[1200], key_path[1200], san[2048];
    gt_certs_paths(dir, "ca", ca_crt, ca_key, sizeof ca_crt);
    gt_certs_paths(dir, name, crt_path, key_path, sizeof crt_path);
    if (access(key_path, F_OK) == 0 || access(crt_path, F_OK) == 0) {
        GT_ERROR("certs: %s has a certificate or key for %s already: it is not replaced", dir,
                 name);
        return GT_ERR_EXISTS;
    }
    if (!sans_text(sans, n_sans, san, sizeof san)) return GT_ERR_OVERFLOW;
    X509 *issuer = read_crt(ca_crt);
    EVP_PKEY *issuer_key = read_key(ca_key);
    if (!issuer || !issuer_key) {
        GT_ERROR("certs: no usable CA in %s (ca.crt and ca.key, as `geotrain certs` makes them)",
                 dir);
        ERR_clear_error();
        X509_free(issuer);
        EVP_PKEY_free(issuer_key);
        return GT_ERR_NOT_FOUND;
    }
    EVP_PKEY *key = EVP_EC_gen("P-256");
    int nids[5] = {NID_basic_constraints, NID_key_usage, NID_ext_key_usage,
                   NID_authority_key_identifier, NID_subject_alt_name};
    const char *values[5] = {"critical,CA:FALSE", "critical,digitalSignature,keyEncipherment",
                             kind == GT_CERT_MEMBER ? "serverAuth,clientAuth" : "clientAuth",
                             "keyid:always", san};
    X509 *crt =
        key ? make_crt(key, cn, issuer, issuer_key, days, nids, values, n_sans ? 5 : 4) : NULL;
    gt_status_t st = crt ? write_pem(key_path, NULL, key, 0600) : GT_ERR_IO;
    if (st == GT_OK) st = write_pem(crt_path, crt, NULL, 0644);
    X509_free(crt);
    EVP_PKEY_free(key);
    X509_free(issuer);
    EVP_PKEY_free(issuer_key);
    return st;
}
