#!/usr/bin/env python3
"""torch_diloco.py — a small PyTorch transformer trained across the sites of a sites.yaml.

    geotrain launch sites.yaml -- /usr/bin/python3 examples/torch_diloco.py

`geotrain launch` runs this script once per site and tells it which site it is (GT_SITE,
GT_CONFIG, ...); geotrain.DiLoCo does everything across sites. The script is an ordinary
PyTorch loop: a byte-level causal transformer (2 layers, d_model 64) on the demo corpus (the
English text of Debian's `fortunes` package, as sites.yaml's data.path), AdamW, one
diloco.step() per step. Each site trains on its own share of the text; at the end every site
evaluates the final (common) model on the same held-out text and reports it in its
summary.json (eval_loss).

Options: --data FILES (default: the fortunes files sites.yaml uses), --batch, --seq, --lr,
--dtype float32|bfloat16 (the model's parameters), --device cpu|cuda (default: cuda when there
is one). The run's length is the config's: run.rounds x inner.steps (shorten it with --set on
the launch command, e.g. --set run.rounds=4 --set inner.steps=50); the loop is
`while not diloco.done` (a round may end early with outer.catch_up).

A site of several ranks (sites.NAME.ranks, or one torchrun/srun job per site on a cluster) is
data parallel: with WORLD_SIZE > 1 the script joins the job's process group (NCCL on CUDA,
else gloo), wraps the model in DistributedDataParallel, and each rank reads its own part of
the site's share.
"""
import argparse
import glob
import math
import os
import sys
import time

try:
    import geotrain
except ImportError:  # run from a source checkout: the package is in ../python
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import geotrain

import torch
import torch.nn as nn
import torch.nn.functional as F

FORTUNES = ["computers", "cookie", "definitions", "literature", "people", "science",
            "songs-poems", "wisdom", "work"]


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab=256, d=64, heads=4, layers=2, ctx=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        T = idx.shape[1]
        mask = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
        x = self.tok(idx) + self.pos(torch.arange(T))
        for b in self.blocks:
            x = b(x, mask)
        return self.head(self.ln(x))


def load_text(paths):
    data = bytearray()
    for p in paths:
        with open(p, "rb") as f:
            data += f.read()
    if len(data) < 10000:
        sys.exit("torch_diloco: too little text in %s (install Debian's fortunes package, or "
                 "give --data FILES)" % ", ".join(paths))
    return torch.tensor(list(data), dtype=torch.long)


def batch(text, lo, hi, B, T, gen):
    starts = torch.randint(lo, hi - T - 1, (B,), generator=gen)
    x = torch.stack([text[s:s + T] for s in starts])
    y = torch.stack([text[s + 1:s + T + 1] for s in starts])
    return x, y


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", nargs="*", default=None)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    torch.set_num_threads(1)  # several sites share this machine's cores
    torch.manual_seed(0)
    paths = args.data or [p for n in FORTUNES for p in glob.glob("/usr/share/games/fortunes/" + n)]
    text = load_text(paths)
    held_out = int(len(text) * 0.95)  # the last 5%: every site evaluates the final model on it

    rank, world = 0, int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:  # a site of several ranks: torchrun's variables (launch sets them too)
        import torch.distributed as dist
        dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
        rank = dist.get_rank()
        if args.device == "cuda":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dtype = getattr(torch, args.dtype)
    # gloo (torch 1.13) cannot broadcast or all-reduce bf16 tensors, so a CPU site of several
    # ranks keeps fp32 parameters and computes in bf16 under autocast instead
    autocast = dtype == torch.bfloat16 and world > 1 and args.device == "cpu"
    model = TinyGPT(ctx=args.seq).to(device=args.device, dtype=torch.float32 if autocast else dtype)
    net = nn.parallel.DistributedDataParallel(model) if world > 1 else model
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
    with geotrain.DiLoCo(net, opt) as diloco:
        # This site's share of the training text, cut again among its ranks; batches drawn from
        # the run's step number, so a site that joins late does not repeat what it would have
        # seen.
        share = held_out // diloco.n_sites // world
        lo = (diloco.site_index * world + rank) * share
        hi = lo + share
        t0, k = time.time(), 0
        while not diloco.done:
            step = diloco.step_count
            gen = torch.Generator().manual_seed(1000003 * diloco.site_index + 7919 * rank + step)
            x, y = (t.to(args.device) for t in batch(text, lo, hi, args.batch, args.seq, gen))
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                logits = net(x)
            loss = F.cross_entropy(logits.float().reshape(-1, 256), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            diloco.step(tokens=x.numel(), loss=loss.item())
            k += 1
            if k % 100 == 0 and rank == 0:
                print("step %d/%d round %d loss %.4f (%.1f steps/s)"
                      % (step + 1, diloco.run_steps, diloco.round, loss.item(),
                         k / (time.time() - t0)), flush=True)
        # The parameters now hold the final anchor, the same at every site.
        model.eval()
        gen = torch.Generator().manual_seed(7)
        with torch.no_grad():
            losses = [F.cross_entropy(model(x.to(args.device)).float().reshape(-1, 256),
                                      y.to(args.device).reshape(-1)).item()
                      for x, y in (batch(text, held_out, len(text), 16, args.seq, gen)
                                   for _ in range(8))]
        eval_loss = sum(losses) / len(losses)
        diloco.set_result("eval_loss", eval_loss)
        s = diloco.summary()
        print("final model: held-out loss %.4f nats/byte (%.3f bits); %d rounds applied, "
              "%d hash checks, %d mismatches, WAN bytes sent %d"
              % (eval_loss, eval_loss / math.log(2), s["rounds_applied"], s["hash_checks"],
                 s["hash_mismatches"], s["wan_bytes_sent"]), flush=True)


if __name__ == "__main__":
    main()
