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

Options: --data FILES (default: the fortunes files sites.yaml uses), --batch, --seq, --lr.
The run's length is the config's: run.rounds x inner.steps (shorten it with --set on the
launch command, e.g. --set run.rounds=4 --set inner.steps=50).
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
    args = ap.parse_args()
    torch.set_num_threads(1)  # several sites share this machine's cores
    torch.manual_seed(0)
    paths = args.data or [p for n in FORTUNES for p in glob.glob("/usr/share/games/fortunes/" + n)]
    text = load_text(paths)
    held_out = int(len(text) * 0.95)  # the last 5%: every site evaluates the final model on it

    model = TinyGPT(ctx=args.seq)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
    with geotrain.DiLoCo(model, opt) as diloco:
        # This site's share of the training text; batches drawn from the run's step number, so
        # a site that joins late does not repeat what it would have seen.
        share = held_out // diloco.n_sites
        lo, hi = diloco.site_index * share, (diloco.site_index + 1) * share
        t0 = time.time()
        for k in range(diloco.total_steps):
            step = diloco.first_step + k
            gen = torch.Generator().manual_seed(1000003 * diloco.site_index + step)
            x, y = batch(text, lo, hi, args.batch, args.seq, gen)
            loss = F.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            diloco.step(tokens=x.numel(), loss=loss.item())
            if (k + 1) % 100 == 0:
                print("step %d/%d round %d loss %.4f (%.1f steps/s)"
                      % (step + 1, diloco.first_step + diloco.total_steps, diloco.round,
                         loss.item(), (k + 1) / (time.time() - t0)), flush=True)
        # The parameters now hold the final anchor, the same at every site.
        model.eval()
        gen = torch.Generator().manual_seed(7)
        with torch.no_grad():
            losses = [F.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1)).item()
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
