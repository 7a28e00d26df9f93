/* test_diloco_fetch.c — a state fetch (diloco/state.c, dl_fetch_state) ends as soon as the site
 * is removed, on the library's internals with a real mesh on loopback and no peer to answer.
 *
 * A joiner's rebase, a join and the hash vote's re-fetch each ask a peer for an anchor and wait
 * up to wan.peer_timeout_ms for it; a site removed from the run meanwhile (frozen past its
 * lease, evicted) has lost its connections, so nothing answers. It waited out the limit once per
 * peer before leaving: in a chaos run of bench/chaos.yaml (seed 13 at one failure per site per
 * 10 rounds) a joiner SIGSTOPped past its lease inside its rebase spent 16.8 s so, 12% of the
 * run's goodput. Here peer b's address has no listener and the limit is 20 s: the fetch must
 * return the removal's status within a few seconds of it, and at once when the site was removed
 * before it asked. */
#include "diloco_internal.h"
#include "gt_test.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char config[] = "run: {rounds: 2}\n"
                             "security: {mode: none}\n"
                             "wan: {transport: ucx, peer_timeout_ms: 20000}\n"
                             "sites:\n"
                             "  - {name: a, address: 127.0.0.1:0}\n"
                             "  - {name: b, address: 127.0.0.1:1}\n";

static void on_message(void *ctx, const gt_wan_msg_t *m, const void *buf, size_t len)
{
    (void)ctx, (void)m, (void)buf, (void)len; /* nothing answers */
}

/* The view thread's part: the site is removed 0.3 s into the fetch. */
static void *remove_later(void *arg)
{
    gt_diloco_t *d = arg;
    struct timespec ts = {0, 300000000};
    nanosleep(&ts, NULL);
    d->wan_error = (int)GT_ERR_PEER_LOST;
    return NULL;
}

int main(void)
{
    gt_topo_config_t *cfg = NULL;
    gt_topo_load_params_t lp = GT_TOPO_LOAD_PARAMS_INIT;
    lp.use_env = 0;
    CHECK_EQ_INT(gt_topo_load_string(config, sizeof config - 1, "fetch.yaml", &lp, &cfg), GT_OK);
    if (!cfg) return GT_TEST_DONE();
    gt_diloco_t *d = calloc(1, sizeof *d);
    struct dl_group *grp = calloc(1, sizeof *grp);
    CHECK(d && grp);
    if (!d || !grp) return GT_TEST_DONE();
    d->grp = grp;
    grp->d = d;
    d->cfg = cfg;
    d->name = "a";
    d->site = 0;
    d->F = 1;
    d->n_grp = 1;
    d->n_eng = 1;
    d->n_sub = 64;
    d->eng_off[1] = 64;
    pthread_mutex_init(&d->lock, NULL);

    gt_wan_mesh_params_t mp;
    memset(&mp, 0, sizeof mp);
    mp.cfg = cfg;
    mp.site = 0;
    mp.run_id = "test-fetch";
    mp.max_message = 1 << 16;
    mp.on_message = on_message;
    mp.ctx = d;
    CHECK_EQ_INT(gt_wan_mesh_create(&mp, &d->grp[0].mesh), GT_OK);
    if (!d->grp[0].mesh) return GT_TEST_DONE();
    gt_wan_view_t view;
    memset(&view, 0, sizeof view);
    view.epoch = 1;
    view.n_members = 2;
    snprintf(view.members[0].name, sizeof view.members[0].name, "a");
    snprintf(view.members[0].address, sizeof view.members[0].address, "%s",
             gt_wan_mesh_address(d->grp[0].mesh));
    snprintf(view.members[1].name, sizeof view.members[1].name, "b");
    snprintf(view.members[1].address, sizeof view.members[1].address, "127.0.0.1:1");
    CHECK_EQ_INT(gt_wan_mesh_set_view(d->grp[0].mesh, &view), GT_OK);

    uint32_t peer = 1;
    /* removed while it waits: the fetch ends with the removal's status, not after 20 s */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, remove_later, d) == 0);
    uint64_t t0 = gt_time_ns();
    gt_status_t st = dl_fetch_state(d, 0, 5, &peer, 1);
    double took = (gt_time_ns() - t0) * 1e-9;
    pthread_join(t, NULL);
    CHECK_EQ_INT(st, GT_ERR_PEER_LOST);
    CHECK(took >= 0.25 && took < 5.0);
    printf("removed 0.3 s into the fetch: it returned %s after %.2f s (limit 20 s)\n",
           gt_status_str(st), took);
    CHECK(!d->fetching);

    /* removed before it asks: at once */
    t0 = gt_time_ns();
    st = dl_fetch_state(d, 0, 6, &peer, 1);
    took = (gt_time_ns() - t0) * 1e-9;
    CHECK_EQ_INT(st, GT_ERR_PEER_LOST);
    CHECK(took < 1.0);

    gt_wan_mesh_destroy(d->grp[0].mesh);
    gt_mem_free(&d->mem, d->fetch);
    pthread_mutex_destroy(&d->lock);
    free(grp);
    free(d);
    gt_topo_destroy(cfg);
    return GT_TEST_DONE();
}
