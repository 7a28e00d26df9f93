/* frame_internal.h — the WAN wire frame header (docs/design.md §5).
 *
 * Every frame on the wire is a fixed 80-byte little-endian header followed by `payload_len`
 * bytes (the sealed payload: ciphertext + AEAD tag, or plaintext with `security: none`). The
 * header is the AEAD associated data, so no field can be altered in flight. A message larger
 * than one frame is cut into frames that share type/epoch/round/lane/fragment/chunk and carry
 * `msg_len` (the whole message) and `msg_off` (this frame's offset in it).
 */
#ifndef GT_WAN_FRAME_INTERNAL_H
#define GT_WAN_FRAME_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gt_wan.h"

#define GT_WAN_FRAME_MAGIC       0x46577447u /* "GtWF" read as little-endian bytes */
/* 2: JOIN, FIN and PULL are message types of their own; 3: so are PROBE, PROBE_INFO and START,
 * and the fragment is a header field of its own */
#define GT_WAN_FRAME_VERSION     3u
#define GT_WAN_FRAME_HDR_LEN     80u
/* Upper bound on one frame's payload; a message is pipelined in frames of at most this. */
#define GT_WAN_FRAME_MAX_PAYLOAD (64u << 20)
/* Upper bound on a whole message (a frame claiming more is rejected as oversized). */
#define GT_WAN_FRAME_MAX_MSG     (1ull << 40)

#define GT_WAN_FRAME_FLAG_PLAIN 0x01u /* payload is not sealed (security: none) */

typedef struct {
    uint8_t type;    /* gt_wan_msg_type_t */
    uint8_t flags;   /* GT_WAN_FRAME_FLAG_* */
    uint32_t sender; /* site id of the sender */
    uint32_t lane;
    uint16_t fragment; /* the caller's sub-stream of the lane (gt_wan_msg_t.fragment) */
    uint32_t chunk;
    uint64_t run_id;
    uint64_t view_epoch;
    uint64_t round;
    uint32_t payload_len; /* plaintext bytes of this frame (the wire adds the tag) */
    uint64_t seq;         /* per-direction frame counter (the AEAD nonce counter) */
    uint64_t msg_len;     /* plaintext length of the whole message */
    uint64_t msg_off;     /* plaintext offset of this frame's payload in the message */
} gt_wan_frame_hdr_t;

/* Writes the 80-byte encoding of h into out. */
void gt_wan_frame_encode(const gt_wan_frame_hdr_t *h, uint8_t out[GT_WAN_FRAME_HDR_LEN]);

/* Decodes and checks the header at the start of `len` received bytes: at least a header,
 * magic, version, a known message type and flags, zero reserved bytes (GT_ERR_CORRUPT
 * otherwise), payload_len
 * <= GT_WAN_FRAME_MAX_PAYLOAD and msg_len <= GT_WAN_FRAME_MAX_MSG (GT_ERR_OVERFLOW), and
 * the frame's place inside its message, msg_off + payload_len <= msg_len (GT_ERR_CORRUPT).
 * Whether the bytes after the header match payload_len is the caller's check (the secure
 * session counts it as a truncation). */
GT_MUST_USE gt_status_t gt_wan_frame_decode(const uint8_t *buf, size_t len,
                                            gt_wan_frame_hdr_t *h_p);

/* True for the message types of gt_wan_msg_type_t. */
int gt_wan_msg_type_valid(unsigned type);

#endif /* GT_WAN_FRAME_INTERNAL_H */
