/* channel_internal.h — test hooks of the secure channel (channel.c). Not for production use:
 * they exist so the security tests can tamper with frames on a real transport. */
#ifndef GT_WAN_CHANNEL_INTERNAL_H
#define GT_WAN_CHANNEL_INTERNAL_H

#include "gt_wan.h"

/* Called on every sealed data frame (header + ciphertext + tag, after sealing, before the
 * emulator and the transport) of an encrypted endpoint. It may change the bytes in place,
 * shorten *len_p, and call gt_wan_ep_send_raw to inject extra frames. */
typedef void (*gt_wan_tamper_fn)(void *arg, gt_wan_ep_t *ep, uint8_t *frame, size_t *len_p);
void gt_wan_ep_set_tamper(gt_wan_ep_t *ep, gt_wan_tamper_fn fn, void *arg);

/* Sends len raw bytes as one transport message, now (no sealing, no emulation). */
gt_status_t gt_wan_ep_send_raw(gt_wan_ep_t *ep, const void *bytes, size_t len);

#endif /* GT_WAN_CHANNEL_INTERNAL_H */
