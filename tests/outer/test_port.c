/* test_port.c — the port (outer/port.c), no network: the outer protocol's messages go to the
 * engine of their fragment, any other to the owner's handler; an outer message for a fragment
 * the port does not run is rejected and counted; the latest view epoch a DELTA or RESULT
 * carried is kept; an engine's io sends nothing before the port has a mesh. */
#include "gt_outer.h"
#include "gt_test.h"

#include <string.h>

static int g_other;
static uint8_t g_other_type;

static void on_other(void *ctx, const gt_wan_msg_t *msg, const void *buf, size_t len)
{
    (void)buf;
    (void)len;
    g_other += ctx == &g_other;
    g_other_type = msg->type;
}

static gt_outer_t *engine(gt_outer_port_t *port, uint32_t f)
{
    gt_outer_params_t p;
    memset(&p, 0, sizeof p);
    p.site_id = 0;
    p.n_sites = 2;
    p.n_params = 4096;
    p.n_lanes = 2;
    gt_cmp_params_t cp = GT_CMP_PARAMS_INIT;
    cp.codec = GT_CMP_FP32;
    cp.block_size = 64;
    p.codec = cp;
    p.quorum = 1.0;
    p.deadline_min_ms = p.deadline_max_ms = 100;
    p.deadline_mad_k = 4;
    p.late_fold = 1;
    p.ranks = 2; /* fragment f's lanes, as diloco/ cuts them */
    p.rank = f;
    p.io = gt_outer_port_io(port, f);
    gt_outer_t *o = NULL;
    CHECK_EQ_INT(gt_outer_create(&p, &o), GT_OK);
    return o;
}

static uint64_t bad_of(const gt_outer_t *o)
{
    gt_outer_stats_t st;
    gt_outer_stats(o, &st);
    return st.bad_messages;
}

int main(void)
{
    gt_outer_port_t *port = NULL;
    CHECK_EQ_INT(gt_outer_port_create(0, on_other, &g_other, &port), GT_ERR_INVALID);
    CHECK_EQ_INT(gt_outer_port_create(2, NULL, &g_other, &port), GT_ERR_INVALID);
    CHECK_EQ_INT(gt_outer_port_create(2, on_other, &g_other, &port), GT_OK);
    gt_outer_t *e0 = engine(port, 0), *e1 = engine(port, 1);
    CHECK_EQ_INT(gt_outer_port_attach(port, 0, e0), GT_OK);
    CHECK_EQ_INT(gt_outer_port_attach(port, 1, e1), GT_OK);
    CHECK_EQ_INT(gt_outer_port_attach(port, 2, e1), GT_ERR_INVALID);

    /* no mesh yet: an engine's send fails (it counts it; the view change re-sends) */
    gt_outer_io_t io = gt_outer_port_io(port, 1);
    gt_wan_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = GT_WAN_MSG_DELTA;
    CHECK(io.send && io.send(io.ctx, 1, &m, "", 0) == GT_ERR_CLOSED);
    CHECK(io.reachable && io.reachable(io.ctx, 1) == 0);
    CHECK(gt_outer_port_io(port, 2).send == NULL);

    /* not the outer protocol's: the owner's handler */
    m.type = GT_WAN_MSG_STATE_REQ;
    gt_outer_port_on_message(port, &m, "", 0);
    m.type = GT_WAN_MSG_PROBE;
    gt_outer_port_on_message(port, &m, "", 0);
    CHECK_EQ_INT(g_other, 2);
    CHECK_EQ_INT(g_other_type, GT_WAN_MSG_PROBE);

    /* the outer protocol's: fragment 1's engine (a payload that is no DELTA: its engine
     * rejects it and counts it, the other engine sees nothing) */
    m.type = GT_WAN_MSG_DELTA;
    m.sender = 1;
    m.fragment = 1;
    m.view_epoch = 7;
    static const uint8_t junk[40] = {1, 2, 3};
    gt_outer_port_on_message(port, &m, junk, sizeof junk);
    CHECK_EQ_INT(bad_of(e1), 1);
    CHECK_EQ_INT(bad_of(e0), 0);
    CHECK_EQ_INT(g_other, 2);
    CHECK_EQ_INT(gt_outer_port_epoch_seen(port), 7);
    m.view_epoch = 5; /* an older view's message does not move it back */
    m.fragment = 0;
    gt_outer_port_on_message(port, &m, junk, sizeof junk);
    CHECK_EQ_INT(bad_of(e0), 1);
    CHECK_EQ_INT(gt_outer_port_epoch_seen(port), 7);

    /* a fragment this port does not run: rejected, counted, no engine sees it */
    m.fragment = 2;
    m.type = GT_WAN_MSG_RESULT;
    gt_outer_port_on_message(port, &m, junk, sizeof junk);
    CHECK_EQ_INT(gt_outer_port_bad(port), 1);
    CHECK_EQ_INT(bad_of(e0) + bad_of(e1), 2);

    gt_outer_destroy(e0);
    gt_outer_destroy(e1);
    gt_outer_port_destroy(port);
    return GT_TEST_DONE();
}
