/* addr_internal.h — "host:port" addresses of the WAN layer (internal to wan/).
 */
#ifndef GT_WAN_ADDR_INTERNAL_H
#define GT_WAN_ADDR_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* Splits "host:port" or "[v6]:port" into host (NUL-terminated, at most hn bytes with the NUL)
 * and port. 0, or -1 when it does not parse. */
int gt_wan_split_addr(const char *addr, char *host, size_t hn, uint16_t *port);

#endif /* GT_WAN_ADDR_INTERNAL_H */
