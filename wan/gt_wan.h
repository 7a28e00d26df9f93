/* gt_wan.h — geotrain's cross-site layer: site keys, the secure channel, transports and the
 * WAN emulator (DESIGN.md §4).
 *
 * Site keys: every site has a static X25519 key pair made by `geotrain keygen`. The secret
 * key stays in a file only its owner can read; the public key is pinned in sites.yaml as
 * base64. Key files are text: a magic line with a version, then the key in base64.
 */
#ifndef GT_WAN_H
#define GT_WAN_H

#include <stddef.h>
#include <stdint.h>

#include "gt_base.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GT_WAN_KEY_BYTES   32u
/* Base64 (original alphabet, padded) of a 32-byte key is 44 characters. */
#define GT_WAN_KEY_B64_LEN 44u

typedef struct {
    uint8_t public_key[GT_WAN_KEY_BYTES];
    uint8_t secret_key[GT_WAN_KEY_BYTES];
} gt_wan_keypair_t;

/* Makes a fresh X25519 key pair from the system CSPRNG. */
GT_API gt_status_t gt_wan_keypair_generate(gt_wan_keypair_t *kp_p);

/* Writes DIR/SITE.key (secret, mode 0600) and DIR/SITE.pub (public, mode 0644). Creates DIR
 * (mode 0700) if missing. Refuses with GT_ERR_EXISTS, and writes nothing, when either file
 * exists. */
GT_API gt_status_t gt_wan_keypair_save(const gt_wan_keypair_t *kp, const char *dir,
                                       const char *site);

/* Reads a secret key file written by gt_wan_keypair_save and derives its public key.
 * Rejects (GT_ERR_CORRUPT) a wrong magic, version or length, and warns when the file is
 * readable by group or others. */
GT_API gt_status_t gt_wan_keypair_load(const char *secret_path, gt_wan_keypair_t *kp_p);

/* Encodes a 32-byte key as base64 into out (at least GT_WAN_KEY_B64_LEN + 1 bytes). */
GT_API void gt_wan_key_to_base64(const uint8_t key[GT_WAN_KEY_BYTES], char *out);

/* Decodes a base64 public key; GT_ERR_INVALID unless it is exactly 32 bytes of base64. */
GT_API gt_status_t gt_wan_key_from_base64(const char *b64, uint8_t key_p[GT_WAN_KEY_BYTES]);

/* Wipes a key pair's secret (sodium_memzero). Accepts NULL. */
GT_API void gt_wan_keypair_wipe(gt_wan_keypair_t *kp);

#ifdef __cplusplus
}
#endif

#endif /* GT_WAN_H */
