/* test_certs.c — cli/certs.c: a CA and the certificates it signs, checked with libcrypto as a
 * TLS peer would check them: each verifies against the CA and not against another CA, carries
 * the key usage etcd needs (a member's serverAuth and clientAuth, a client's clientAuth only)
 * and the member's addresses; keys are 0600; nothing existing is replaced. */
#include "gt_test.h"

#include "certs.h"

#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static X509 *load(const char *path)
{
    FILE *f = fopen(path, "r");
    X509 *x = f ? PEM_read_X509(f, NULL, NULL, NULL) : NULL;
    if (f) fclose(f);
    return x;
}

/* 1 when crt verifies against the CA certificate ca as a chain of one, for `purpose`. */
static int verifies(X509 *crt, X509 *ca, int purpose)
{
    X509_STORE *store = X509_STORE_new();
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    int ok = store && ctx && X509_STORE_add_cert(store, ca) &&
             X509_STORE_CTX_init(ctx, store, crt, NULL) &&
             X509_STORE_CTX_set_purpose(ctx, purpose) && X509_verify_cert(ctx) == 1;
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);
    return ok;
}

static unsigned mode_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (unsigned)(st.st_mode & 0777) : 0u;
}

int main(void)
{
    char tmpl[] = "/tmp/gt-certs-XXXXXX", other_tmpl[] = "/tmp/gt-certs-XXXXXX";
    char *dir = mkdtemp(tmpl), *other = mkdtemp(other_tmpl);
    CHECK(dir && other);
    char crt[256], key[256];

    CHECK_EQ_INT(gt_certs_issue(dir, "x", "x", GT_CERT_CLIENT, NULL, 0, 1), GT_ERR_NOT_FOUND);
    CHECK_EQ_INT(gt_certs_make_ca(dir, "test CA", 1), GT_OK);
    CHECK_EQ_INT(gt_certs_make_ca(dir, "test CA", 1), GT_ERR_EXISTS);
    gt_certs_paths(dir, "ca", crt, key, sizeof crt);
    CHECK_EQ_INT(mode_of(key), 0600);
    CHECK_EQ_INT(mode_of(crt), 0644);

    const char *sans[] = {"10.1.2.3", "::1", "etcd.example"};
    CHECK_EQ_INT(gt_certs_issue(dir, "m0", "m0", GT_CERT_MEMBER, sans, 3, 1), GT_OK);
    CHECK_EQ_INT(gt_certs_issue(dir, "site-a", "site a", GT_CERT_CLIENT, NULL, 0, 1), GT_OK);
    CHECK_EQ_INT(gt_certs_issue(dir, "site-a", "site a", GT_CERT_CLIENT, NULL, 0, 1),
                 GT_ERR_EXISTS);
    gt_certs_paths(dir, "site-a", crt, key, sizeof crt);
    CHECK_EQ_INT(mode_of(key), 0600);

    CHECK_EQ_INT(gt_certs_make_ca(other, "another CA", 1), GT_OK);
    char path[256];
    snprintf(path, sizeof path, "%s/ca.crt", dir);
    X509 *ca = load(path);
    snprintf(path, sizeof path, "%s/ca.crt", other);
    X509 *ca2 = load(path);
    snprintf(path, sizeof path, "%s/m0.crt", dir);
    X509 *m0 = load(path);
    snprintf(path, sizeof path, "%s/site-a.crt", dir);
    X509 *a = load(path);
    CHECK(ca && ca2 && m0 && a);
    if (ca && ca2 && m0 && a) {
        CHECK(verifies(m0, ca, X509_PURPOSE_SSL_SERVER));
        CHECK(verifies(m0, ca, X509_PURPOSE_SSL_CLIENT)); /* it dials its peers */
        CHECK(verifies(a, ca, X509_PURPOSE_SSL_CLIENT));
        CHECK(!verifies(a, ca, X509_PURPOSE_SSL_SERVER)); /* a client cannot serve */
        CHECK(!verifies(a, ca2, X509_PURPOSE_SSL_CLIENT));
        CHECK(!verifies(m0, ca2, X509_PURPOSE_SSL_SERVER));
        CHECK_EQ_INT(X509_check_ip_asc(m0, "10.1.2.3", 0), 1);
        CHECK_EQ_INT(X509_check_ip_asc(m0, "::1", 0), 1);
        CHECK_EQ_INT(X509_check_host(m0, "etcd.example", 0, 0, NULL), 1);
        CHECK(X509_check_ip_asc(m0, "10.1.2.4", 0) != 1);
        CHECK(X509_check_ca(ca) >= 1);
        CHECK_EQ_INT(X509_check_ca(a), 0);
    }
    X509_free(ca);
    X509_free(ca2);
    X509_free(m0);
    X509_free(a);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s %s", dir, other);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return GT_TEST_DONE();
}
