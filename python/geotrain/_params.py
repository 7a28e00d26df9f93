"""_params.py — the model's parameters and the library's float32 host vector θ_s.

The library works on one flat float32 vector in host memory (gt_diloco.h: params[]). A model's
parameters may be anywhere (CPU, CUDA), in any floating dtype (fp32, bf16, fp16, fp64), mixed;
and a rank may hold all of them (DDP replicas) or a contiguous shard of the site's flat vector
(ZeRO-3 / FSDP style). So:

- a CPU float32 parameter becomes a view into the host vector (its .data is replaced once, at
  create): the library reads and writes it in place, nothing is copied;
- any other parameter is copied into the host vector when the library is about to read it
  (before_read: a submit, and an apply's rebase) and back when it has written it (after_write:
  an apply, a join) — once a round, never per inner step; on CUDA from and to pinned host memory
  with non-blocking copies, one synchronisation for the whole pass;
- a rank holding a shard fills the rest of the vector from the site's other ranks at
  before_read (one broadcast per rank over the site's process group), and takes back only its
  own part at after_write.

Each hook first checks that the parameters are still the ones handed in: the same tensors, at
the same addresses, of the same dtype, on the same device, of the same shape. A model moved
(`model.cuda()`), re-typed (`model.to(torch.float64)`) or otherwise re-allocated after
`DiLoCo()` would silently stop receiving the outer updates; it is an error instead, naming the
parameter and what changed.
"""
import torch

_FLOATING = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


class MisuseError(Exception):
    """A parameter changed under the package's feet (raised inside a hook)."""


def _describe(t):
    return "%s %s on %s" % (tuple(t.shape), str(t.dtype).replace("torch.", ""), t.device)


class Flat:
    """The host vector and the map from the model's parameters to it."""

    def __init__(self, named, shard=None, dist_ctx=None):
        # named: [(name, Parameter)] in the order of model.parameters()
        if not named:
            raise ValueError("the model has no parameters")
        for name, p in named:
            if p.dtype not in _FLOATING:
                raise ValueError("parameter %s is %s: only floating-point parameters (%s) can be "
                                 "trained across sites" % (name, _describe(p), ", ".join(
                                     str(d).replace("torch.", "") for d in _FLOATING)))
        self.named = list(named)
        self.count = sum(p.numel() for _, p in named)  # this rank's elements
        self.offset, self.total = 0, self.count
        if shard is not None:
            self.offset, self.total = int(shard[0]), int(shard[1])
            if self.offset < 0 or self.offset + self.count > self.total:
                raise ValueError("shard=(%d, %d): this rank's %d elements do not fit in a vector "
                                 "of %d from offset %d" % (self.offset, self.total, self.count,
                                                           self.total, self.offset))
        self.sharded = shard is not None
        self.dist = dist_ctx  # _dist.SiteComm or None
        self.shards = [(self.offset, self.count)]  # every rank's (offset, count): set by check
        cuda = any(p.device.type == "cuda" for _, p in named)
        self.host = torch.empty(self.total, dtype=torch.float32, pin_memory=cuda)
        self.views, self.copies = [], []  # (index, Parameter, flat offset)
        off = self.offset
        with torch.no_grad():
            for i, (name, p) in enumerate(self.named):
                k = p.numel()
                dst = self.host[off:off + k]
                if p.dtype == torch.float32 and p.device.type == "cpu":
                    dst.copy_(p.data.reshape(-1))
                    p.data = dst.view_as(p)
                    self.views.append((i, p, off))
                else:
                    dst.copy_(p.data.reshape(-1))
                    self.copies.append((i, p, off))
                off += k
        self._record()
        self.reads = self.writes = 0  # hook calls, for the tests and the docs' claim

    def _record(self):
        self.meta = [(id(p), p.data_ptr(), p.dtype, p.device, tuple(p.shape))
                     for _, p in self.named]

    def check(self, model_params):
        """Raises MisuseError when a parameter was re-allocated, re-typed, moved or replaced."""
        now = list(model_params) if model_params is not None else None
        if now is not None and [id(p) for p in now] != [m[0] for m in self.meta]:
            raise MisuseError(
                "the model's parameters changed after geotrain.DiLoCo() (%d then, %d now, or "
                "replaced): create the DiLoCo after the model is final" %
                (len(self.meta), len(now)))
        for (name, p), (_, ptr, dtype, device, shape) in zip(self.named, self.meta):
            what = []
            if p.device != device:
                what.append("moved from %s to %s" % (device, p.device))
            if p.dtype != dtype:
                what.append("re-typed from %s to %s" % (str(dtype).replace("torch.", ""),
                                                        str(p.dtype).replace("torch.", "")))
            if tuple(p.shape) != shape:
                what.append("re-shaped from %s to %s" % (shape, tuple(p.shape)))
            if not what and p.data_ptr() != ptr:
                what.append("re-allocated (its storage is not the one handed in)")
            if what:
                raise MisuseError(
                    "parameter %s was %s after geotrain.DiLoCo(): the outer updates would no "
                    "longer reach the model. Move, cast or re-allocate the model before "
                    "creating the DiLoCo" % (name, " and ".join(what)))

    def pull(self, model_params):
        """before_read: the model's parameters into the host vector (and the other ranks'
        shards)."""
        self.check(model_params)
        self.reads += 1
        cuda = False
        with torch.no_grad():
            for _, p, off in self.copies:
                k = p.numel()
                src = p.detach().reshape(-1)
                if src.device.type == "cuda":
                    cuda = True
                    self.host[off:off + k].copy_(src, non_blocking=True)
                else:
                    self.host[off:off + k].copy_(src)
        if cuda:
            torch.cuda.synchronize()
        if self.sharded and self.dist is not None and self.dist.size > 1:
            for r, (o, c) in enumerate(self.shards):
                if c:
                    self.dist.broadcast_from(self.host[o:o + c], r)

    def push(self, model_params):
        """after_write: this rank's part of the host vector back into the model."""
        self.check(model_params)
        self.writes += 1
        cuda = False
        with torch.no_grad():
            for _, p, off in self.copies:
                k = p.numel()
                src = self.host[off:off + k].view(p.shape)
                if p.device.type == "cuda":
                    cuda = True
                    p.data.copy_(src, non_blocking=True)
                else:
                    p.data.copy_(src)
        if cuda:
            torch.cuda.synchronize()

    def layout_text(self):
        if not self.sharded:
            return "unsharded (%d parameters on every rank)" % self.total
        return "%d shards [%s] of %d" % (len(self.shards), ", ".join(
            "%d:%d" % (o, o + c) for o, c in self.shards), self.total)
