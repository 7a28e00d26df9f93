/* test_wan_frame.c — the wire frame header: round trip, and every malformed or oversized
 * header rejected before its lengths are used. Also "host:port" parsing and transport names. */
#include "frame_internal.h"
#include "gt_test.h"
#include "transport_internal.h"

static gt_wan_frame_hdr_t sample(void)
{
    gt_wan_frame_hdr_t h = {.type = GT_WAN_MSG_RESULT,
                            .flags = 0,
                            .sender = 0x01020304u,
                            .lane = 17,
                            .fragment = 0x0A0B,
                            .chunk = 3,
                            .run_id = 0x1122334455667788ull,
                            .view_epoch = 9,
                            .round = 123456789012ull,
                            .payload_len = 4096,
                            .seq = 77,
                            .msg_len = 10000,
                            .msg_off = 4096};
    return h;
}

int main(void)
{
    uint8_t buf[GT_WAN_FRAME_HDR_LEN + 16];
    gt_wan_frame_hdr_t h = sample(), d;
    gt_wan_frame_encode(&h, buf);
    CHECK_EQ_INT(buf[0], 'G'); /* magic reads "GtWF" on the wire */
    CHECK_EQ_INT(buf[1], 't');
    CHECK_EQ_INT(gt_wan_frame_decode(buf, sizeof buf, &d), GT_OK);
    CHECK(memcmp(&h, &d, sizeof h) == 0 ||
          (h.type == d.type && h.sender == d.sender && h.lane == d.lane &&
           h.fragment == d.fragment && h.chunk == d.chunk && h.run_id == d.run_id &&
           h.round == d.round && h.seq == d.seq && h.msg_len == d.msg_len &&
           h.msg_off == d.msg_off));
    CHECK_EQ_INT(d.round, 123456789012ull);
    CHECK_EQ_INT(d.fragment, 0x0A0B);
    CHECK_EQ_INT(buf[72], 0x0B); /* the fragment: after every field of version 2 */
    CHECK_EQ_INT(buf[73], 0x0A);
    CHECK_EQ_INT(d.run_id == 0x1122334455667788ull, 1);

    /* Short input, wrong magic, version, type, flags, reserved bytes. */
    CHECK_EQ_INT(gt_wan_frame_decode(buf, GT_WAN_FRAME_HDR_LEN - 1, &d), GT_ERR_CORRUPT);
    CHECK_EQ_INT(gt_wan_frame_decode(NULL, 100, &d), GT_ERR_CORRUPT);
    uint8_t bad[GT_WAN_FRAME_HDR_LEN];
    memcpy(bad, buf, sizeof bad);
    bad[0] ^= 1;
    CHECK_EQ_INT(gt_wan_frame_decode(bad, sizeof bad, &d), GT_ERR_CORRUPT);
    memcpy(bad, buf, sizeof bad);
    bad[4] = 1; /* version 1: JOIN, FIN and PULL rode in DELTA then */
    CHECK_EQ_INT(gt_wan_frame_decode(bad, sizeof bad, &d), GT_ERR_CORRUPT);
    bad[4] = 2; /* version 2: probes rode in STATE_REQ, the fragment in the lane */
    CHECK_EQ_INT(gt_wan_frame_decode(bad, sizeof bad, &d), GT_ERR_CORRUPT);
    bad[4] = 4;
    CHECK_EQ_INT(gt_wan_frame_decode(bad, sizeof bad, &d), GT_ERR_CORRUPT);
    CHECK_EQ_INT(GT_WAN_MSG_PROBE, 11); /* the numbers are the wire's */
    CHECK_EQ_INT(GT_WAN_MSG_PROBE_INFO, 12);
    CHECK_EQ_INT(GT_WAN_MSG_START, 13);
    for (unsigned t = 0; t < 256; t++) {
        memcpy(bad, buf, sizeof bad);
        bad[6] = (uint8_t)t;
        gt_status_t want =
            (t >= GT_WAN_MSG_HELLO && t <= GT_WAN_MSG_START) ? GT_OK : GT_ERR_CORRUPT;
        CHECK_EQ_INT(gt_wan_frame_decode(bad, sizeof bad, &d), want);
    }
    memcpy(bad, buf, sizeof bad);
    bad[7] = 0x80;
    CHECK_EQ_INT(gt_wan_frame_decode(bad, sizeof bad, &d), GT_ERR_CORRUPT);
    for (size_t i = 74; i < GT_WAN_FRAME_HDR_LEN; i++) { /* reserved: zero, one encoding */
        memcpy(bad, buf, sizeof bad);
        bad[i] = 1;
        CHECK_EQ_INT(gt_wan_frame_decode(bad, sizeof bad, &d), GT_ERR_CORRUPT);
    }
    CHECK_EQ_INT(GT_WAN_FRAME_HDR_LEN, 80);

    /* Oversized lengths. */
    h = sample();
    h.payload_len = GT_WAN_FRAME_MAX_PAYLOAD + 1;
    h.msg_len = 1ull << 30;
    h.msg_off = 0;
    gt_wan_frame_encode(&h, bad);
    CHECK_EQ_INT(gt_wan_frame_decode(bad, sizeof bad, &d), GT_ERR_OVERFLOW);
    h = sample();
    h.msg_len = GT_WAN_FRAME_MAX_MSG + 1;
    gt_wan_frame_encode(&h, bad);
    CHECK_EQ_INT(gt_wan_frame_decode(bad, sizeof bad, &d), GT_ERR_OVERFLOW);
    /* A frame that does not fit in its message, including offset overflow. */
    h = sample();
    h.msg_off = 8000; /* 8000 + 4096 > 10000 */
    gt_wan_frame_encode(&h, bad);
    CHECK_EQ_INT(gt_wan_frame_decode(bad, sizeof bad, &d), GT_ERR_CORRUPT);
    h = sample();
    h.msg_off = UINT64_MAX;
    gt_wan_frame_encode(&h, bad);
    CHECK_EQ_INT(gt_wan_frame_decode(bad, sizeof bad, &d), GT_ERR_CORRUPT);
    /* Every single-byte corruption of a header decodes to OK only with the same bounds. */
    h = sample();
    gt_wan_frame_encode(&h, buf);
    for (size_t i = 0; i < GT_WAN_FRAME_HDR_LEN; i++)
        for (int b = 0; b < 8; b++) {
            memcpy(bad, buf, sizeof bad);
            bad[i] ^= (uint8_t)(1u << b);
            if (gt_wan_frame_decode(bad, sizeof bad, &d) == GT_OK) {
                CHECK(d.payload_len <= GT_WAN_FRAME_MAX_PAYLOAD);
                CHECK(d.msg_off + d.payload_len <= d.msg_len);
            }
        }

    char host[64];
    uint16_t port = 0;
    CHECK_EQ_INT(gt_topo_addr_split("127.0.0.1:4567", host, sizeof host, &port), GT_OK);
    CHECK(strcmp(host, "127.0.0.1") == 0);
    CHECK_EQ_INT(port, 4567);
    CHECK_EQ_INT(gt_topo_addr_split("[::1]:80", host, sizeof host, &port), GT_OK);
    CHECK(strcmp(host, "::1") == 0);
    CHECK_EQ_INT(gt_topo_addr_split("host:99999", host, sizeof host, &port), GT_ERR_INVALID);
    CHECK_EQ_INT(gt_topo_addr_split("nohost", host, sizeof host, &port), GT_ERR_INVALID);
    CHECK_EQ_INT(gt_topo_addr_split("h:", host, sizeof host, &port), GT_ERR_INVALID);
    CHECK_EQ_INT(gt_topo_addr_split("h:80x", host, sizeof host, &port), GT_ERR_INVALID);
    CHECK_EQ_INT(gt_topo_addr_split("h:+80", host, sizeof host, &port), GT_ERR_INVALID);
    CHECK_EQ_INT(gt_topo_addr_split("[]:80", host, sizeof host, &port), GT_ERR_INVALID);
    CHECK_EQ_INT(gt_topo_addr_split(":80", host, sizeof host, &port), GT_ERR_INVALID);
    CHECK_EQ_INT(gt_topo_addr_split("h:0", host, sizeof host, &port), GT_OK);
    CHECK_EQ_INT(port, 0);
    CHECK_EQ_INT(gt_topo_addr_split("[fe80::1]:65535", host, sizeof host, &port), GT_OK);
    CHECK(strcmp(host, "fe80::1") == 0);
    CHECK_EQ_INT(port, 65535);
    char small[4];
    port = 7;
    CHECK_EQ_INT(gt_topo_addr_split("abcd:1", small, sizeof small, &port), GT_ERR_OVERFLOW);
    CHECK_EQ_INT(port, 7); /* outputs only on success */
    gt_wan_transport_t t;
    CHECK_EQ_INT(gt_wan_transport_parse("ucx", &t), GT_OK);
    CHECK_EQ_INT(t, GT_WAN_TRANSPORT_UCX);
    CHECK_EQ_INT(gt_wan_transport_parse("libfabric", &t), GT_OK);
    CHECK_EQ_INT(t, GT_WAN_TRANSPORT_LIBFABRIC);
    CHECK_EQ_INT(gt_wan_transport_parse("tcp", &t), GT_ERR_INVALID);
    CHECK(gt_wan_tp_ops(GT_WAN_TRANSPORT_UCX) != NULL);
    CHECK(gt_wan_tp_ops(GT_WAN_TRANSPORT_LIBFABRIC) != NULL);
    return GT_TEST_DONE();
}
