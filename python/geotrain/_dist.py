"""_dist.py — a site of several ranks: the library's in-site collectives through torch.distributed.

A site of R ranks is one torch.distributed job (torchrun, srun, or `geotrain launch -- CMD`,
which sets torchrun's variables). Every rank creates geotrain.DiLoCo after
init_process_group; the library then calls, collectively on every rank, the two collectives of
gt_diloco_comm_t, which this file implements over the site's process group:

- allreduce_u64 (MAX or SUM of a uint64 vector): an int64 all_reduce (SUM wraps modulo 2^64 as
  uint64 arithmetic does; MAX flips the sign bit first, so unsigned order is signed order);
- allgatherv (rank k's counts[k] floats at displs[k], then on every rank): one broadcast per rank,
  in place, straight into the library's buffer.

The library's buffers are host memory, so the collectives run on a gloo group: the site's own if
its backend is gloo, else one made for the purpose (NCCL jobs keep NCCL for their training and
give the library a gloo group beside it). A Python exception inside a collective is kept and
re-raised by the call into the library that led to it; the library sees an error status.
"""
import ctypes

import torch

from . import _lib

_SIGN = -(1 << 63)


def _tensor_at(addr, n, ctype, dtype):
    if n == 0:
        return torch.empty(0, dtype=dtype)
    return torch.frombuffer((ctype * n).from_address(addr), dtype=dtype)


class SiteComm:
    """The site's ranks as torch.distributed sees them, and the gt_diloco_comm_t over them."""

    def __init__(self, group=None):
        import torch.distributed as dist
        self.dist = dist
        self.group = group
        self.rank = dist.get_rank(group)
        self.size = dist.get_world_size(group)
        self.ranks = [dist.get_global_rank(group, r) if group is not None and
                      hasattr(dist, "get_global_rank") else r for r in range(self.size)]
        if dist.get_backend(group) != "gloo":
            # host buffers: a gloo group beside the user's (collective: every rank makes it)
            self.group = dist.new_group(ranks=self.ranks, backend="gloo")
        self.error = None
        self._allreduce = _lib.ALLREDUCE(self._allreduce_cb)
        self._allgatherv = _lib.ALLGATHERV(self._allgatherv_cb)

    def fill(self, comm):
        comm.ctx = None
        comm.rank = self.rank
        comm.size = self.size
        comm.allreduce_u64 = self._allreduce
        comm.allgatherv = self._allgatherv

    # ---- what the package itself needs ----

    def broadcast_from(self, tensor, rank):
        self.dist.broadcast(tensor, src=self.ranks[rank], group=self.group)

    def allgather_ints(self, values):
        """Every rank's list of ints (all the same length)."""
        t = torch.tensor(values, dtype=torch.int64)
        out = [torch.empty_like(t) for _ in range(self.size)]
        self.dist.all_gather(out, t, group=self.group)
        return [o.tolist() for o in out]

    # ---- the library's collectives ----

    def _allreduce_cb(self, ctx, v, n, op):
        try:
            t = _tensor_at(ctypes.addressof(v.contents), n, ctypes.c_uint64, torch.int64)
            if op == 0:  # GT_DILOCO_OP_MAX
                t.add_(_SIGN)  # x - 2^63 (mod 2^64): unsigned order becomes signed order
                self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX, group=self.group)
                t.sub_(_SIGN)
            else:
                self.dist.all_reduce(t, op=self.dist.ReduceOp.SUM, group=self.group)
            return 0
        except BaseException as e:  # noqa: B902 — must not unwind through C
            self.error = self.error or e
            return -15

    def _allgatherv_cb(self, ctx, all_, counts, displs):
        try:
            base = ctypes.addressof(all_.contents)
            for r in range(self.size):
                c = counts[r]
                if c:
                    part = _tensor_at(base + 4 * displs[r], c, ctypes.c_float, torch.float32)
                    self.dist.broadcast(part, src=self.ranks[r], group=self.group)
            return 0
        except BaseException as e:  # noqa: B902
            self.error = self.error or e
            return -15
