#!/usr/bin/env python3
"""trainer.py — the PyTorch trainer the Python tests run under `geotrain launch -- CMD`: a small
MLP regression on synthetic data (each site its own stream), wrapped in geotrain.DiLoCo exactly
as the package documents. Everything about the run comes from the environment launch sets
(for a site of several ranks also torchrun's: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).

    --extra-param-site NAME   that site's model has one parameter more (an error at start)
    --config/--site           passed to DiLoCo instead of the environment
    --save-every N            diloco.save() after every N-th round it applies (a resume,
                              under `launch --resume`, comes from GT_RESUME)
    --dtype D                 float32, bfloat16, float16 or mixed (fp32 and bf16 layers)
    --tiny                    a model of 17 parameters (Linear(16, 1))
    --ddp                     a site of several ranks: gloo process group, DDP-wrapped model
    --shard                   a site of several ranks, each holding a contiguous part of the
                              flat parameter vector by hand (ZeRO-3 style): gathered for the
                              forward pass, gradients all-reduced, each rank steps its part
    --split-site NAME=K       that site's rank 0 holds the first K elements (else half)
    --compute-s X             report X seconds of compute per step (diloco.step(compute_s=))
    --misuse SITE=KIND        at that site, retype: model.double() after 2 rounds; thread:
                              step() from a second thread
    --log-params              after every step that applied a round, append the rank's
                              hash of the library's host vector and of its parameters to
                              RUN_DIR/SITE/params-rankK.jsonl

Exit status: 0 done, 5 a geotrain.GeotrainError (its message on stderr, prefixed
"GeotrainError:"; 3 when it says the site was removed from the run, which launch restarts as a
joiner), 4 stopped (geotrain.Stopped).
"""
import argparse
import hashlib
import json
import os
import sys
import threading

import torch
import torch.nn as nn

import geotrain

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def digest(t):
    return hashlib.sha256(t.detach().to(torch.float32).contiguous().numpy().tobytes()).hexdigest()[:16]


class Sharded(nn.Module):
    """The MLP's 577 parameters as one flat vector cut at `split`: this rank holds its part."""

    SHAPES = [(32, 16), (32,), (1, 32), (1,)]

    def __init__(self, full, rank, split):
        super().__init__()
        self.total = full.numel()
        self.bounds = [(0, split), (split, self.total)]
        o, e = self.bounds[rank]
        self.offset = o
        self.part = nn.Parameter(full[o:e].clone())
        self.rank = rank

    def full(self):
        import torch.distributed as dist
        flat = torch.empty(self.total)
        for r, (o, e) in enumerate(self.bounds):
            if r == self.rank:
                flat[o:e] = self.part.detach()
            dist.broadcast(flat[o:e], src=r)
        return flat

    def loss(self, x, y):
        import torch.distributed as dist
        flat = self.full().requires_grad_(True)
        ws, o = [], 0
        for shape in self.SHAPES:
            k = 1
            for d in shape:
                k *= d
            ws.append(flat[o:o + k].view(*shape))
            o += k
        h = torch.tanh(x @ ws[0].t() + ws[1])
        loss = nn.functional.mse_loss(h @ ws[2].t() + ws[3], y)
        loss.backward()
        g = flat.grad
        dist.all_reduce(g)
        g /= dist.get_world_size()
        o, e = self.bounds[self.rank]
        self.part.grad = g[o:e].clone()
        return loss


class Net(nn.Sequential):
    """Layers in any dtypes: each Linear gets its input in its own dtype; the output in fp32."""

    def forward(self, x):
        for layer in self:
            if isinstance(layer, nn.Linear):
                x = x.to(layer.weight.dtype)
            x = layer(x)
        return x.float()


def build(args, site, rank):
    """The model (and for --shard its shard spec) every rank of every site builds alike."""
    torch.manual_seed(1)
    if args.tiny:
        model = Net(nn.Linear(16, 1))
    else:
        model = Net(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1))
    if args.extra_param_site and site == args.extra_param_site:
        model.register_parameter("extra", nn.Parameter(torch.zeros(1)))
    if args.shard:
        full = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        split = full.numel() // 2
        for spec in args.split_site or []:
            name, k = spec.split("=")
            if name == site:
                split = int(k)
        m = Sharded(full, rank, split)
        return m, (m.offset, m.total)
    if args.dtype == "mixed":
        model[0].to(torch.bfloat16)
    elif args.dtype != "float32":
        model.to(DTYPES[args.dtype])
    return model, None


def forward_loss(model, args, x, y):
    if args.shard:
        return model.loss(x, y)
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--extra-param-site")
    ap.add_argument("--config")
    ap.add_argument("--site")
    ap.add_argument("--save-every", type=int, default=0)
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16",
                                                           "mixed"])
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--ddp", action="store_true")
    ap.add_argument("--shard", action="store_true")
    ap.add_argument("--split-site", action="append")
    ap.add_argument("--compute-s", type=float)
    ap.add_argument("--misuse", action="append", default=[])
    ap.add_argument("--log-params", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    site = args.site or os.environ.get("GT_SITE", "")
    misuse = {k: v for k, v in (m.split("=") for m in args.misuse)}.get(site)
    rank = 0
    if args.ddp or args.shard:
        import torch.distributed as dist
        dist.init_process_group("gloo")  # RANK, WORLD_SIZE, MASTER_ADDR/PORT from launch
        rank = dist.get_rank()
    model, shard = build(args, site, rank)
    if args.ddp:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    w_true = torch.linspace(-1, 1, 16)
    log = None
    try:
        with geotrain.DiLoCo(model, opt, config=args.config, site=args.site,
                             shard=shard) as diloco:
            if args.log_params:
                log = open(os.path.join(os.environ["GT_RUN_DIR"], site,
                                        "params-rank%d.jsonl" % diloco.rank), "a")
            first = None
            while not diloco.done:  # (with outer.catch_up a round may end early)
                step = diloco.step_count
                g = torch.Generator().manual_seed(7919 * diloco.site_index + 104729 * rank + step)
                x = torch.randn(32, 16, generator=g)
                y = torch.tanh(0.3 * (x @ w_true)).unsqueeze(1)
                opt.zero_grad()
                loss = forward_loss(model, args, x, y)
                opt.step()
                if misuse == "thread" and diloco.rounds_applied >= 1:
                    caught = []

                    def other():
                        try:
                            diloco.step(tokens=1)
                        except geotrain.GeotrainError as e:
                            caught.append(e)
                    t = threading.Thread(target=other)
                    t.start()
                    t.join()
                    raise caught[0] if caught else RuntimeError("a second thread's step passed")
                if misuse == "retype" and diloco.rounds_applied >= 2:
                    model.double()
                    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
                    x, y = x.double(), y.double()
                diloco.step(tokens=x.shape[0], loss=loss.item(), compute_s=args.compute_s)
                if log and diloco.applied:
                    log.write(json.dumps({"round": diloco.rounds_applied, "step": diloco.step_count,
                                          "host": digest(diloco.parameters),
                                          "params": digest(torch.cat([
                                              p.detach().float().reshape(-1)
                                              for p in model.parameters()]))}) + "\n")
                    log.flush()
                if args.save_every and diloco.applied and \
                        diloco.rounds_applied % args.save_every == 0 and \
                        diloco.step_count < diloco.run_steps:
                    diloco.save()
                first = loss.item() if first is None else first
            s = diloco.summary()
            st = diloco.status()
            print("trainer: site %s rank %d steps %d round %d rounds_applied %d first_loss %s "
                  "state %s hash_checks %d layout %s hook_reads %d hook_writes %d "
                  "resumed_step %d" %
                  (site, diloco.rank, st["step"], diloco.round, s["rounds_applied"], first,
                   st["state"], s["hash_checks"], diloco.layout, diloco._flat.reads,
                   diloco._flat.writes, diloco.resumed_step), flush=True)
    except geotrain.Stopped as e:
        print("Stopped: %s" % e, file=sys.stderr, flush=True)
        return 4
    except geotrain.GeotrainError as e:
        print("GeotrainError: %s" % e, file=sys.stderr, flush=True)
        return 3 if e.code == -11 else 5  # 3: removed from the run (launch restarts it)
    return 0


if __name__ == "__main__":
    sys.exit(main())
