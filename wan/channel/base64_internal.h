/* base64_internal.h — base64 (original alphabet, padded) for the rest of wan/, through
 * libsodium: the channel is wan/'s only libsodium user, so membership's etcd JSON (keys and
 * values travel base64 in etcd's v3 gateway) encodes through these instead of including
 * sodium.h itself. Neither needs sodium_init(). */
#ifndef GT_WAN_BASE64_INTERNAL_H
#define GT_WAN_BASE64_INTERNAL_H

#include <stddef.h>

/* The base64 of n bytes as a malloc'd NUL-terminated string; NULL when out of memory. */
char *gt_wan_base64_encode(const void *bin, size_t n);

/* Decodes n characters of base64 into bin (cap bytes) and sets *len_p to the byte count.
 * 0, or -1 when the text is not base64 or does not fit. */
int gt_wan_base64_decode(const char *b64, size_t n, void *bin, size_t cap, size_t *len_p);

#endif /* GT_WAN_BASE64_INTERNAL_H */
