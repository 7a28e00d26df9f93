/* keys.c — site key pairs: generation, files, base64 (and base64_internal.h's helpers).
 *
 * Secret key file (mode 0600):      Public key file (mode 0644):
 *   geotrain-x25519-secret v1         geotrain-x25519-public v1
 *   <base64 of 32 bytes>              <base64 of 32 bytes>
 *                                     site <name>
 * Both files are written to a temporary name, fsynced and linked into place (gt_afile_t with
 * GT_AFILE_NO_REPLACE), so a key is never silently replaced and a crash leaves no half key.
 */
#include "gt_wan.h"
#include "base64_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SECRET_MAGIC "geotrain-x25519-secret v1"
#define PUBLIC_MAGIC "geotrain-x25519-public v1"

static gt_status_t sodium_ready(void)
{
    if (sodium_init() < 0) {
        GT_ERROR("libsodium failed to initialise");
        return GT_ERR_INTERNAL;
    }
    return GT_OK;
}

gt_status_t gt_wan_keypair_generate(gt_wan_keypair_t *kp_p)
{
    gt_status_t st = sodium_ready();
    if (st != GT_OK) return st;
    gt_wan_keypair_t kp;
    crypto_box_keypair(kp.public_key, kp.secret_key); /* X25519 */
    *kp_p = kp;
    sodium_memzero(&kp, sizeof kp);
    return GT_OK;
}

void gt_wan_key_to_base64(const uint8_t key[GT_WAN_KEY_BYTES], char *out)
{
    sodium_bin2base64(out, GT_WAN_KEY_B64_LEN + 1, key, GT_WAN_KEY_BYTES,
                      sodium_base64_VARIANT_ORIGINAL);
}

gt_status_t gt_wan_key_from_base64(const char *b64, uint8_t key_p[GT_WAN_KEY_BYTES])
{
    uint8_t key[GT_WAN_KEY_BYTES];
    size_t len = 0;
    const char *end = NULL;
    if (!b64 || sodium_init() < 0) return GT_ERR_INVALID;
    if (strlen(b64) != GT_WAN_KEY_B64_LEN) return GT_ERR_INVALID;
    if (sodium_base642bin(key, sizeof key, b64, GT_WAN_KEY_B64_LEN, NULL, &len, &end,
                          sodium_base64_VARIANT_ORIGINAL) != 0 ||
        len != GT_WAN_KEY_BYTES || *end != '\0')
        return GT_ERR_INVALID;
    memcpy(key_p, key, sizeof key);
    return GT_OK;
}

char *gt_wan_base64_encode(const void *bin, size_t n)
{
    size_t cap = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
    char *out = malloc(cap);
    if (!out) return NULL;
    sodium_bin2base64(out, cap, bin, n, sodium_base64_VARIANT_ORIGINAL);
    return out;
}

int gt_wan_base64_decode(const char *b64, size_t n, void *bin, size_t cap, size_t *len_p)
{
    return sodium_base642bin(bin, cap, b64, n, NULL, len_p, NULL, sodium_base64_VARIANT_ORIGINAL);
}

/* Writes `text` to a new `path` with exactly `mode`, crash-safe (a temporary file fsynced and
 * linked into place, the directory fsynced: a crash leaves no half key), and never over a file
 * that exists (GT_ERR_EXISTS). */
static gt_status_t write_new_file(const char *path, const char *text, unsigned mode)
{
    gt_afile_t *af = NULL;
    gt_status_t st = gt_afile_open(path, mode, GT_AFILE_NO_REPLACE | GT_AFILE_MODE_EXACT, &af);
    if (st != GT_OK) return st;
    st = gt_afile_write(af, text, strlen(text));
    if (st != GT_OK) {
        gt_afile_abort(af);
        return st;
    }
    return gt_afile_commit(af);
}

gt_status_t gt_wan_keypair_save(const gt_wan_keypair_t *kp, const char *dir, const char *site)
{
    char sec_path[4096], pub_path[4096];
    char b64[GT_WAN_KEY_B64_LEN + 1];
    char text[512];
    struct stat sb;
    gt_status_t st = sodium_ready();
    if (st != GT_OK) return st;
    if (!site || !*site || strchr(site, '/')) {
        GT_ERROR("invalid site name '%s' for a key file", site ? site : "");
        return GT_ERR_INVALID;
    }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        GT_ERROR("cannot create key directory %s: %s", dir, strerror(errno));
        return GT_ERR_IO;
    }
    snprintf(sec_path, sizeof sec_path, "%s/%s.key", dir, site);
    snprintf(pub_path, sizeof pub_path, "%s/%s.pub", dir, site);
    if (stat(sec_path, &sb) == 0 || stat(pub_path, &sb) == 0) {
        GT_ERROR("a key for site '%s' already exists in %s; refusing to overwrite it", site, dir);
        return GT_ERR_EXISTS;
    }

    gt_wan_key_to_base64(kp->secret_key, b64);
    snprintf(text, sizeof text, "%s\n%s\n", SECRET_MAGIC, b64);
    st = write_new_file(sec_path, text, 0600);
    sodium_memzero(b64, sizeof b64);
    sodium_memzero(text, sizeof text);
    if (st != GT_OK) return st;

    gt_wan_key_to_base64(kp->public_key, b64);
    snprintf(text, sizeof text, "%s\n%s\nsite %s\n", PUBLIC_MAGIC, b64, site);
    st = write_new_file(pub_path, text, 0644);
    if (st != GT_OK) unlink(sec_path);
    return st;
}

gt_status_t gt_wan_keypair_load(const char *secret_path, gt_wan_keypair_t *kp_p)
{
    char text[512] = {0};
    char b64[GT_WAN_KEY_B64_LEN + 1];
    gt_wan_keypair_t kp;
    struct stat sb;
    gt_status_t st = sodium_ready();
    if (st != GT_OK) return st;
    FILE *f = fopen(secret_path, "r");
    if (!f) {
        GT_ERROR("cannot open secret key %s: %s", secret_path, strerror(errno));
        return errno == ENOENT ? GT_ERR_NOT_FOUND : GT_ERR_IO;
    }
    if (fstat(fileno(f), &sb) == 0 && (sb.st_mode & 077))
        GT_WARN("secret key %s is readable by group or others (mode %03o); chmod 600 it",
                secret_path, (unsigned)(sb.st_mode & 0777));
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    st = GT_ERR_CORRUPT;
    size_t mlen = strlen(SECRET_MAGIC);
    if (n < mlen + 1 + GT_WAN_KEY_B64_LEN || memcmp(text, SECRET_MAGIC, mlen) != 0 ||
        text[mlen] != '\n') {
        GT_ERROR("%s is not a geotrain secret key (expected first line '%s')", secret_path,
                 SECRET_MAGIC);
        goto out;
    }
    memcpy(b64, text + mlen + 1, GT_WAN_KEY_B64_LEN);
    b64[GT_WAN_KEY_B64_LEN] = '\0';
    if (gt_wan_key_from_base64(b64, kp.secret_key) != GT_OK) {
        GT_ERROR("%s: the key line is not 32 bytes of base64", secret_path);
        goto out;
    }
    crypto_scalarmult_base(kp.public_key, kp.secret_key);
    *kp_p = kp;
    st = GT_OK;
out:
    sodium_memzero(text, sizeof text);
    sodium_memzero(b64, sizeof b64);
    sodium_memzero(&kp, sizeof kp);
    return st;
}

void gt_wan_keypair_wipe(gt_wan_keypair_t *kp)
{
    if (kp) sodium_memzero(kp, sizeof *kp);
}

/* ---- the operator's signing key: sites added mid-run (`geotrain sites add`) ---- */

#define ADMIN_SECRET_MAGIC "geotrain-ed25519-admin-secret v1"
#define ADMIN_PUBLIC_MAGIC "geotrain-ed25519-admin-public v1"
#define ADD_CONTEXT        "geotrain sites add v1\n" /* what a signature is for */

gt_status_t gt_wan_admin_keygen(const char *dir, uint8_t public_key[GT_WAN_KEY_BYTES])
{
    char sec_path[4096], pub_path[4096], b64[GT_WAN_KEY_B64_LEN + 1], text[512];
    uint8_t seed[crypto_sign_SEEDBYTES], sk[crypto_sign_SECRETKEYBYTES];
    struct stat sb;
    gt_status_t st = sodium_ready();
    if (st != GT_OK) return st;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        GT_ERROR("cannot create key directory %s: %s", dir, strerror(errno));
        return GT_ERR_IO;
    }
    snprintf(sec_path, sizeof sec_path, "%s/admin.key", dir);
    snprintf(pub_path, sizeof pub_path, "%s/admin.pub", dir);
    if (stat(sec_path, &sb) == 0 || stat(pub_path, &sb) == 0) {
        GT_ERROR("an admin key already exists in %s; refusing to overwrite it", dir);
        return GT_ERR_EXISTS;
    }
    randombytes_buf(seed, sizeof seed);
    crypto_sign_seed_keypair(public_key, sk, seed);
    gt_wan_key_to_base64(seed, b64);
    snprintf(text, sizeof text, "%s\n%s\n", ADMIN_SECRET_MAGIC, b64);
    st = write_new_file(sec_path, text, 0600);
    sodium_memzero(seed, sizeof seed);
    sodium_memzero(sk, sizeof sk);
    sodium_memzero(b64, sizeof b64);
    sodium_memzero(text, sizeof text);
    if (st != GT_OK) return st;
    gt_wan_key_to_base64(public_key, b64);
    snprintf(text, sizeof text, "%s\n%s\n", ADMIN_PUBLIC_MAGIC, b64);
    st = write_new_file(pub_path, text, 0644);
    if (st != GT_OK) unlink(sec_path);
    return st;
}

/* The bytes an add's signature covers: a context, the run id and the description. */
static unsigned char *add_message(const char *run_id, const char *desc, size_t *len_p)
{
    size_t n = strlen(ADD_CONTEXT) + strlen(run_id) + 1 + strlen(desc);
    unsigned char *m = malloc(n + 1);
    if (m) snprintf((char *)m, n + 1, "%s%s\n%s", ADD_CONTEXT, run_id, desc);
    *len_p = n;
    return m;
}

gt_status_t gt_wan_add_sign(const char *secret_path, const char *run_id, const char *desc,
                            char sig_b64[GT_WAN_SIG_B64_LEN + 1])
{
    char text[512] = {0}, b64[GT_WAN_KEY_B64_LEN + 1];
    uint8_t seed[crypto_sign_SEEDBYTES], pk[crypto_sign_PUBLICKEYBYTES],
        sk[crypto_sign_SECRETKEYBYTES], sig[crypto_sign_BYTES];
    gt_status_t st = sodium_ready();
    if (st != GT_OK) return st;
    FILE *f = fopen(secret_path, "r");
    if (!f) {
        GT_ERROR("cannot open the admin key %s: %s", secret_path, strerror(errno));
        return errno == ENOENT ? GT_ERR_NOT_FOUND : GT_ERR_IO;
    }
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    size_t mlen = strlen(ADMIN_SECRET_MAGIC), len = 0;
    unsigned char *m = NULL;
    st = GT_ERR_CORRUPT;
    if (n < mlen + 1 + GT_WAN_KEY_B64_LEN || memcmp(text, ADMIN_SECRET_MAGIC, mlen) != 0 ||
        text[mlen] != '\n') {
        GT_ERROR("%s is not a geotrain admin key (expected first line '%s'; `geotrain keygen "
                 "--admin` makes one)",
                 secret_path, ADMIN_SECRET_MAGIC);
        goto out;
    }
    memcpy(b64, text + mlen + 1, GT_WAN_KEY_B64_LEN);
    b64[GT_WAN_KEY_B64_LEN] = '\0';
    if (gt_wan_key_from_base64(b64, seed) != GT_OK) {
        GT_ERROR("%s: the key line is not 32 bytes of base64", secret_path);
        goto out;
    }
    crypto_sign_seed_keypair(pk, sk, seed);
    if (!(m = add_message(run_id, desc, &len))) {
        st = GT_ERR_NOMEM;
        goto out;
    }
    crypto_sign_detached(sig, NULL, m, len, sk);
    sodium_bin2base64(sig_b64, GT_WAN_SIG_B64_LEN + 1, sig, sizeof sig,
                      sodium_base64_VARIANT_ORIGINAL);
    st = GT_OK;
out:
    free(m);
    sodium_memzero(text, sizeof text);
    sodium_memzero(b64, sizeof b64);
    sodium_memzero(seed, sizeof seed);
    sodium_memzero(sk, sizeof sk);
    return st;
}

gt_status_t gt_wan_add_verify(const uint8_t public_key[GT_WAN_KEY_BYTES], const char *run_id,
                              const char *desc, const char *sig_b64)
{
    uint8_t sig[crypto_sign_BYTES];
    size_t got = 0, len = 0;
    const char *end = NULL;
    if (sodium_ready() != GT_OK || !run_id || !desc || !sig_b64 ||
        strlen(sig_b64) != GT_WAN_SIG_B64_LEN ||
        sodium_base642bin(sig, sizeof sig, sig_b64, GT_WAN_SIG_B64_LEN, NULL, &got, &end,
                          sodium_base64_VARIANT_ORIGINAL) != 0 ||
        got != sizeof sig || *end)
        return GT_ERR_AUTH;
    unsigned char *m = add_message(run_id, desc, &len);
    if (!m) return GT_ERR_NOMEM;
    int bad = crypto_sign_verify_detached(sig, m, len, public_key);
    free(m);
    return bad ? GT_ERR_AUTH : GT_OK;
}
