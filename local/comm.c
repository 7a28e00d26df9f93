/* comm.c — the in-site communicator: the ranks of one site, over MPI (docs/design.md §4).
 *
 * A site of R ranks is one MPI job (mpirun/srun); a site of one rank needs no MPI, so the world
 * communicator is MPI only when a launcher started this process (its environment says so)
 * and a plain one-rank communicator otherwise — MPI_Init is never called for a one-rank run.
 *
 * Collectives are non-blocking MPI operations completed by a polite wait: MPI_Test with a yield
 * between tests for the first 2 ms, then with short sleeps. Sites on one machine run more ranks
 * than cores (a demo of three sites of two ranks on two cores), and OpenMPI's blocking calls spin
 * at full speed, taking the core from the rank the others are waiting for. Every wait has a
 * deadline; a rank that dies is OpenMPI's business: the launcher takes the whole job down (the
 * site's failure).
 *
 * Counts above INT_MAX are split into pieces, so any arena fits.
 */
#include "gt_local.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef GT_HAVE_MPI
#include <mpi.h>
#endif

struct gt_local_comm {
    int rank, size, local_rank;
    int is_world;
#ifdef GT_HAVE_MPI
    int mpi; /* 1: comm is an MPI communicator */
    MPI_Comm comm;
#endif
};

/* Deadline of one collective wait: a peer rank that stops answering is a dead site anyway;
 * this bound turns a hang into an error if the launcher has not taken the job down. */
#define GT_COMM_WAIT_S 600
/* How long a wait keeps testing (yielding the core between tests) before it sleeps. */
#define SPIN_NS        2000000ull

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

int gt_local_comm_launched(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE",
                                       "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

#ifdef GT_HAVE_MPI
static void comm_finalize_atexit(void)
{
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Finalize();
}
#endif

gt_status_t gt_local_comm_world(gt_local_comm_t **comm_p)
{
    gt_local_comm_t *c = calloc(1, sizeof *c);
    if (!c) return GT_ERR_NOMEM;
    c->size = 1;
    c->is_world = 1;
    if (!gt_local_comm_launched()) {
        *comm_p = c;
        return GT_OK;
    }
#ifdef GT_HAVE_MPI
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided = 0;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
            GT_ERROR("comm: MPI_Init_thread failed");
            free(c);
            return GT_ERR_IO;
        }
        atexit(comm_finalize_atexit);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    c->mpi = 1;
    c->comm = MPI_COMM_WORLD;
    MPI_Comm_rank(c->comm, &c->rank);
    MPI_Comm_size(c->comm, &c->size);
    c->local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", env_int("SLURM_LOCALID", c->rank));
    *comm_p = c;
    return GT_OK;
#else
    GT_ERROR("comm: started by an MPI launcher, but this geotrain was built without MPI "
             "(install libopenmpi-dev and rebuild)");
    free(c);
    return GT_ERR_UNSUPPORTED;
#endif
}

gt_status_t gt_local_comm_split(gt_local_comm_t *c, int color, int key, gt_local_comm_t **sub_p)
{
    if (!c || !sub_p) return GT_ERR_INVALID;
    gt_local_comm_t *s = calloc(1, sizeof *s);
    if (!s) return GT_ERR_NOMEM;
    s->size = 1;
    s->local_rank = c->local_rank;
#ifdef GT_HAVE_MPI
    if (c->mpi) {
        if (MPI_Comm_split(c->comm, color, key, &s->comm) != MPI_SUCCESS) {
            GT_ERROR("comm: MPI_Comm_split failed");
            free(s);
            return GT_ERR_IO;
        }
        MPI_Comm_set_errhandler(s->comm, MPI_ERRORS_RETURN);
        s->mpi = 1;
        MPI_Comm_rank(s->comm, &s->rank);
        MPI_Comm_size(s->comm, &s->size);
    }
#else
    (void)color;
    (void)key;
#endif
    *sub_p = s;
    return GT_OK;
}

void gt_local_comm_destroy(gt_local_comm_t *c)
{
    if (!c) return;
#ifdef GT_HAVE_MPI
    if (c->mpi && !c->is_world) MPI_Comm_free(&c->comm);
#endif
    free(c);
}

int gt_local_comm_rank(const gt_local_comm_t *c)
{
    return c ? c->rank : 0;
}
int gt_local_comm_size(const gt_local_comm_t *c)
{
    return c ? c->size : 1;
}
int gt_local_comm_local_rank(const gt_local_comm_t *c)
{
    return c ? c->local_rank : 0;
}

void gt_local_comm_abort(gt_local_comm_t *c, int code)
{
#ifdef GT_HAVE_MPI
    if (c && c->mpi) MPI_Abort(MPI_COMM_WORLD, code);
#else
    (void)c;
    (void)code;
#endif
}

#ifdef GT_HAVE_MPI
/* Completes requests politely (see the top of the file), within the deadline. */
static gt_status_t wait_all(MPI_Request *reqs, int n, const char *what)
{
    uint64_t t0 = gt_time_ns();
    for (;;) {
        int done = 0;
        if (MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
            GT_ERROR("comm: %s failed", what);
            return GT_ERR_PEER_LOST;
        }
        if (done) return GT_OK;
        uint64_t waited = gt_time_ns() - t0;
        if (waited < SPIN_NS) { /* test often at first: MPI progresses only inside calls */
            sched_yield();
            continue;
        }
        if (waited > (uint64_t)GT_COMM_WAIT_S * 1000000000ull) {
            GT_ERROR("comm: %s did not complete in %d s: a rank of this site is gone", what,
                     GT_COMM_WAIT_S);
            return GT_ERR_TIMEOUT;
        }
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
}

#define PIECE    ((size_t)1 << 28) /* elements per MPI call: far below INT_MAX */
#define MAX_REQS 64
#endif

gt_status_t gt_local_comm_allreduce(gt_local_comm_t *c, void *buf, size_t n,
                                    gt_local_comm_dtype_t dtype, gt_local_comm_op_t op)
{
    if (!c || (!buf && n)) return GT_ERR_INVALID;
#ifdef GT_HAVE_MPI
    if (!c->mpi || c->size == 1 || n == 0) return GT_OK;
    MPI_Datatype t = dtype == GT_COMM_FLOAT    ? MPI_FLOAT
                     : dtype == GT_COMM_DOUBLE ? MPI_DOUBLE
                                               : MPI_UINT64_T;
    size_t esz = dtype == GT_COMM_FLOAT ? 4 : 8;
    MPI_Op o = op == GT_COMM_SUM ? MPI_SUM : op == GT_COMM_MAX ? MPI_MAX : MPI_MIN;
    gt_status_t st = GT_OK;
    for (size_t off = 0; off < n && st == GT_OK;) {
        MPI_Request reqs[MAX_REQS];
        int k = 0;
        for (; k < MAX_REQS && off < n; k++) {
            size_t cnt = n - off < PIECE ? n - off : PIECE;
            if (MPI_Iallreduce(MPI_IN_PLACE, (char *)buf + off * esz, (int)cnt, t, o, c->comm,
                               &reqs[k]) != MPI_SUCCESS) {
                GT_ERROR("comm: MPI_Iallreduce failed");
                return GT_ERR_PEER_LOST;
            }
            off += cnt;
        }
        st = wait_all(reqs, k, "all-reduce");
    }
    return st;
#else
    (void)dtype;
    (void)op;
    return GT_OK; /* one rank: the reduction of one contribution is itself */
#endif
}

gt_status_t gt_local_comm_agree(gt_local_comm_t *c, gt_status_t st)
{
    if (!c || c->size == 1) return st;
    uint64_t v = (uint64_t)(-(int64_t)st); /* 0 for GT_OK, else the error's magnitude */
    gt_status_t e = gt_local_comm_allreduce(c, &v, 1, GT_COMM_U64, GT_COMM_MAX);
    return e != GT_OK ? e : (gt_status_t)(-(int64_t)v);
}

gt_status_t gt_local_comm_allreduce_uniform(gt_local_comm_t *c, float *buf, size_t n)
{
    if (!c || (!buf && n)) return GT_ERR_INVALID;
#ifdef GT_HAVE_MPI
    if (!c->mpi || c->size == 1 || n == 0) return GT_OK;
    /* Reduced at rank 0 in MPI's order, then the same bits broadcast to everyone. */
    gt_status_t st = GT_OK;
    for (size_t off = 0; off < n && st == GT_OK;) {
        size_t cnt = n - off < PIECE ? n - off : PIECE;
        MPI_Request r;
        void *send = c->rank == 0 ? MPI_IN_PLACE : (void *)(buf + off);
        if (MPI_Ireduce(send, buf + off, (int)cnt, MPI_FLOAT, MPI_SUM, 0, c->comm, &r) !=
            MPI_SUCCESS) {
            GT_ERROR("comm: MPI_Ireduce failed");
            return GT_ERR_PEER_LOST;
        }
        st = wait_all(&r, 1, "reduce");
        if (st == GT_OK) st = gt_local_comm_bcast(c, buf + off, cnt * sizeof(float), 0);
        off += cnt;
    }
    return st;
#else
    return GT_OK;
#endif
}

gt_status_t gt_local_comm_iallreduce_sum(gt_local_comm_t *c, float *buf, size_t n,
                                         gt_local_comm_req_t *req_p)
{
    if (!c || !req_p || (!buf && n)) return GT_ERR_INVALID;
    memset(req_p, 0, sizeof *req_p);
#ifdef GT_HAVE_MPI
    if (!c->mpi || c->size == 1 || n == 0) return GT_OK;
    if (n > PIECE) return gt_local_comm_allreduce(c, buf, n, GT_COMM_FLOAT, GT_COMM_SUM);
    MPI_Request *r = malloc(sizeof *r);
    if (!r) return GT_ERR_NOMEM;
    if (MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, c->comm, r) != MPI_SUCCESS) {
        free(r);
        GT_ERROR("comm: MPI_Iallreduce failed");
        return GT_ERR_PEER_LOST;
    }
    req_p->impl = r;
#endif
    return GT_OK;
}

gt_status_t gt_local_comm_test(gt_local_comm_req_t *req, int *done_p)
{
    if (!req || !done_p) return GT_ERR_INVALID;
    *done_p = 1;
#ifdef GT_HAVE_MPI
    if (!req->impl) return GT_OK;
    int done = 0;
    if (MPI_Test((MPI_Request *)req->impl, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        free(req->impl);
        req->impl = NULL;
        GT_ERROR("comm: a non-blocking all-reduce failed");
        return GT_ERR_PEER_LOST;
    }
    *done_p = done;
    if (done) {
        free(req->impl);
        req->impl = NULL;
    }
#endif
    return GT_OK;
}

gt_status_t gt_local_comm_wait(gt_local_comm_req_t *req)
{
    if (!req) return GT_ERR_INVALID;
#ifdef GT_HAVE_MPI
    if (!req->impl) return GT_OK;
    gt_status_t st = wait_all((MPI_Request *)req->impl, 1, "non-blocking all-reduce");
    free(req->impl);
    req->impl = NULL;
    return st;
#else
    return GT_OK;
#endif
}

gt_status_t gt_local_comm_allgatherv(gt_local_comm_t *c, const float *mine, float *all,
                                     const size_t *counts, const size_t *displs)
{
    if (!c || !all || !counts || !displs) return GT_ERR_INVALID;
    int me = c->rank;
    if (mine && mine != all + displs[me]) memmove(all + displs[me], mine, counts[me] * 4);
#ifdef GT_HAVE_MPI
    if (!c->mpi || c->size == 1) return GT_OK;
    /* As broadcasts from each rank: counts and displacements of any size, no int overflow. */
    gt_status_t st = GT_OK;
    for (int root = 0; root < c->size && st == GT_OK; root++)
        st = gt_local_comm_bcast(c, all + displs[root], counts[root] * sizeof(float), root);
    return st;
#else
    return GT_OK;
#endif
}

gt_status_t gt_local_comm_bcast(gt_local_comm_t *c, void *buf, size_t bytes, int root)
{
    if (!c || (!buf && bytes)) return GT_ERR_INVALID;
#ifdef GT_HAVE_MPI
    if (!c->mpi || c->size == 1 || bytes == 0) return GT_OK;
    gt_status_t st = GT_OK;
    for (size_t off = 0; off < bytes && st == GT_OK;) {
        MPI_Request reqs[MAX_REQS];
        int k = 0;
        for (; k < MAX_REQS && off < bytes; k++) {
            size_t cnt = bytes - off < PIECE ? bytes - off : PIECE;
            if (MPI_Ibcast((char *)buf + off, (int)cnt, MPI_BYTE, root, c->comm, &reqs[k]) !=
                MPI_SUCCESS) {
                GT_ERROR("comm: MPI_Ibcast failed");
                return GT_ERR_PEER_LOST;
            }
            off += cnt;
        }
        st = wait_all(reqs, k, "broadcast");
    }
    return st;
#else
    (void)root;
    return GT_OK;
#endif
}

gt_status_t gt_local_comm_barrier(gt_local_comm_t *c)
{
    if (!c) return GT_ERR_INVALID;
#ifdef GT_HAVE_MPI
    if (!c->mpi || c->size == 1) return GT_OK;
    MPI_Request r;
    if (MPI_Ibarrier(c->comm, &r) != MPI_SUCCESS) return GT_ERR_PEER_LOST;
    return wait_all(&r, 1, "barrier");
#else
    return GT_OK;
#endif
}

int gt_local_comm_is_mpi(const gt_local_comm_t *c)
{
#ifdef GT_HAVE_MPI
    return c && c->mpi;
#else
    (void)c;
    return 0;
#endif
}

int gt_local_comm_have_mpi(void)
{
#ifdef GT_HAVE_MPI
    return 1;
#else
    return 0;
#endif
}
