/* fuzz_wan_frame.c — libFuzzer target for the wire frame header decoder (wan/channel/frame.c),
 * which sees every byte a peer sends before anything else does.
 *
 * For any input: decode never reads past `len`, and when it accepts a header the lengths it
 * returns are in bounds (payload <= GT_WAN_FRAME_MAX_PAYLOAD, msg_len <= GT_WAN_FRAME_MAX_MSG,
 * the frame inside its message), and encoding the decoded header gives back exactly the
 * first 80 input bytes (the format has one encoding per header: decode and encode are
 * inverse and deterministic).
 *
 * Build and run (clang): cmake -DGT_FUZZ=ON -DGT_SANITIZE=ON ... && ninja fuzz_wan_frame &&
 *   ./tests/wan/fuzz_wan_frame -max_total_time=60 corpus/
 */
#include "frame_internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A private copy sized exactly, so ASan catches any read past the end. */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    gt_wan_frame_hdr_t h;
    if (gt_wan_frame_decode(buf, size, &h) == GT_OK) {
        if (size < GT_WAN_FRAME_HDR_LEN) abort();
        if (h.payload_len > GT_WAN_FRAME_MAX_PAYLOAD) abort();
        if (h.msg_len > GT_WAN_FRAME_MAX_MSG) abort();
        if (h.msg_off > h.msg_len || h.payload_len > h.msg_len - h.msg_off) abort();
        if (!gt_wan_msg_type_valid(h.type)) abort();
        uint8_t again[GT_WAN_FRAME_HDR_LEN];
        gt_wan_frame_encode(&h, again);
        if (memcmp(again, buf, GT_WAN_FRAME_HDR_LEN) != 0) abort();
        gt_wan_frame_hdr_t h2;
        if (gt_wan_frame_decode(again, sizeof again, &h2) != GT_OK) abort();
        if (memcmp(&h, &h2, sizeof h) != 0) abort();
    }
    free(buf);
    return 0;
}
