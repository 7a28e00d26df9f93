/* frame.c — encode/decode of the WAN frame header (frame_internal.h).
 *
 * Decoding treats input as hostile: every length is checked against what was received and
 * against fixed bounds before anyone uses it to index memory. Fields are written byte by
 * byte in little-endian order so the format does not depend on the host.
 */
#include "frame_internal.h"

#include <string.h>

/* Layout (offsets in bytes):
 *  0 magic u32 | 4 version u16 | 6 type u8 | 7 flags u8 | 8 sender u32 | 12 lane u32
 * 16 run_id u64 | 24 view_epoch u64 | 32 round u64 | 40 chunk u32 | 44 payload_len u32
 * 48 seq u64 | 56 msg_len u64 | 64 msg_off u64 | 72 fragment u16 | 74 reserved, zero (6 bytes)
 * 80 end
 * Fields are only ever added at the end (magic and version stay where they are, so a frame of
 * another version is recognised as one). */
#define RESERVED_AT    74u
#define RESERVED_BYTES (GT_WAN_FRAME_HDR_LEN - RESERVED_AT)
void gt_wan_frame_encode(const gt_wan_frame_hdr_t *h, uint8_t out[GT_WAN_FRAME_HDR_LEN])
{
    gt_le_put32(out + 0, GT_WAN_FRAME_MAGIC);
    gt_le_put16(out + 4, GT_WAN_FRAME_VERSION);
    out[6] = h->type;
    out[7] = h->flags;
    gt_le_put32(out + 8, h->sender);
    gt_le_put32(out + 12, h->lane);
    gt_le_put64(out + 16, h->run_id);
    gt_le_put64(out + 24, h->view_epoch);
    gt_le_put64(out + 32, h->round);
    gt_le_put32(out + 40, h->chunk);
    gt_le_put32(out + 44, h->payload_len);
    gt_le_put64(out + 48, h->seq);
    gt_le_put64(out + 56, h->msg_len);
    gt_le_put64(out + 64, h->msg_off);
    gt_le_put16(out + 72, h->fragment);
    memset(out + RESERVED_AT, 0, RESERVED_BYTES);
}

int gt_wan_msg_type_valid(unsigned type)
{
    return type >= GT_WAN_MSG_HELLO && type <= GT_WAN_MSG_START;
}

gt_status_t gt_wan_frame_decode(const uint8_t *buf, size_t len, gt_wan_frame_hdr_t *h_p)
{
    if (!buf || len < GT_WAN_FRAME_HDR_LEN) return GT_ERR_CORRUPT;
    if (gt_le_get32(buf) != GT_WAN_FRAME_MAGIC || gt_le_get16(buf + 4) != GT_WAN_FRAME_VERSION)
        return GT_ERR_CORRUPT;
    gt_wan_frame_hdr_t h;
    memset(&h, 0, sizeof h);
    h.type = buf[6];
    h.flags = buf[7];
    h.sender = gt_le_get32(buf + 8);
    h.lane = gt_le_get32(buf + 12);
    h.run_id = gt_le_get64(buf + 16);
    h.view_epoch = gt_le_get64(buf + 24);
    h.round = gt_le_get64(buf + 32);
    h.chunk = gt_le_get32(buf + 40);
    h.payload_len = gt_le_get32(buf + 44);
    h.seq = gt_le_get64(buf + 48);
    h.msg_len = gt_le_get64(buf + 56);
    h.msg_off = gt_le_get64(buf + 64);
    h.fragment = gt_le_get16(buf + 72);
    if (!gt_wan_msg_type_valid(h.type)) return GT_ERR_CORRUPT;
    for (size_t i = RESERVED_AT; i < GT_WAN_FRAME_HDR_LEN; i++) /* one encoding per header */
        if (buf[i]) return GT_ERR_CORRUPT;
    if ((h.flags & ~GT_WAN_FRAME_FLAG_PLAIN) != 0) return GT_ERR_CORRUPT;
    if (h.payload_len > GT_WAN_FRAME_MAX_PAYLOAD) return GT_ERR_OVERFLOW;
    if (h.msg_len > GT_WAN_FRAME_MAX_MSG) return GT_ERR_OVERFLOW;
    if (h.msg_off > h.msg_len || h.payload_len > h.msg_len - h.msg_off) return GT_ERR_CORRUPT;
    *h_p = h;
    return GT_OK;
}
