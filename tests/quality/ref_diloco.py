#!/usr/bin/python3
"""ref_diloco.py — a geotrain run's whole experiment redone by an independent PyTorch
implementation: the same initial parameters and the same batches, everything else written here.

Reads a run made with `--set run.dump=data` (or `rounds`; one rank a site; SITE/dump/, see
docs/training.md#dumps): meta.json (the settings), init.f32 (the initial parameters, Hugging
Face GPT-2 layout) and, per site, train.i32 and eval.i32 (each inner step's batch, and the
held-out batches). Then trains one worker per site, in lockstep:

  inner   a GPT-2 (torch.nn.functional; tied LM head, LayerNorm eps 1e-5, tanh GELU),
          torch.nn.utils.clip_grad_norm_, torch.optim.AdamW (weight decay on 2-D tensors
          only), learning rate: linear warmup then cosine to min_lr_ratio x lr
  outer   DiLoCo (arXiv 2311.08105, Algorithm 1) every H steps: Delta_s = theta_a - theta_s,
          g = token-weighted mean of the Delta_s, theta_a <- one torch.optim.SGD(lr, momentum,
          nesterov=True) step with g as gradient (outer.optimizer average: theta_a <- theta_a - g);
          with overlap tau the result is applied tau steps after the send and each worker
          keeps what it trained meanwhile: theta_s <- theta_a + (theta_s - theta_s_at_send);
          after the last round every worker holds theta_a
  sync-dp every step's gradients averaged over the workers before clipping and AdamW
  eval    the final parameters' mean cross-entropy over each site's held-out batches, averaged
          over sites (what geotrain reports as eval_loss)

--own-init SEED and --own-data SEED replace geotrain's initial parameters (by GPT-2's: normal
0.02, the residual projections 0.02 / sqrt(2 L), LayerNorm gains 1 and biases 0, drawn by
torch) and batches (a Markov corpus of the same statistics drawn by numpy: synthetic_tokens
tokens, every token followed by one of synthetic_branching successors fixed per token, uniformly;
cut into one contiguous share per site, each batch B windows of T + 1 tokens at random offsets
in the site's share, the held-out batches drawn the same way after training), for an
experiment that shares nothing with geotrain but the settings.

Prints one JSON line: {"eval_loss": ..., "geotrain_eval_loss": ... (summary.json), ...}.
Usage: ref_diloco.py RUN_DIR [--dtype float64|float32] [--threads N]
Exit: 0 (the caller compares), 1 a bad dump, 77 PyTorch not installed.
"""
import argparse
import json
import math
import os
import sys

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except ModuleNotFoundError:
    print("SKIP: PyTorch is not installed for this interpreter (Debian: python3-torch)")
    sys.exit(77)

MODE_DILOCO, MODE_SYNC_DP = 0, 1  # outer.mode in the trainer's config JSON
OPT_NESTEROV, OPT_AVERAGE = 0, 1  # outer.optimizer


def gpt_loss(prm, L, C, NH, ids, tgt):
    B, T = ids.shape
    hs = C // NH
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    x = prm["wte.weight"][ids] + prm["wpe.weight"][:T]
    for i in range(L):
        p = lambda s: prm[f"h.{i}.{s}"]
        h = F.layer_norm(x, (C,), p("ln_1.weight"), p("ln_1.bias"), eps=1e-5)
        q, k, v = (h @ p("attn.c_attn.weight") + p("attn.c_attn.bias")).split(C, dim=2)
        q, k, v = (z.view(B, T, NH, hs).transpose(1, 2) for z in (q, k, v))
        att = ((q @ k.transpose(-2, -1)) / math.sqrt(hs)).masked_fill(~mask, float("-inf"))
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ p("attn.c_proj.weight") + p("attn.c_proj.bias")
        h = F.layer_norm(x, (C,), p("ln_2.weight"), p("ln_2.bias"), eps=1e-5)
        h = F.gelu(h @ p("mlp.c_fc.weight") + p("mlp.c_fc.bias"), approximate="tanh")
        x = x + h @ p("mlp.c_proj.weight") + p("mlp.c_proj.bias")
    x = F.layer_norm(x, (C,), prm["ln_f.weight"], prm["ln_f.bias"], eps=1e-5)
    logits = x @ prm["wte.weight"].T
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))


class Worker:
    """One site: its own parameters, AdamW and batches."""

    def __init__(self, theta0, layout, inner, dtype):
        self.names = [t[0] for t in layout]
        self.prm = {}
        for name, off, shape in layout:
            n = int(np.prod(shape))
            self.prm[name] = torch.nn.Parameter(
                torch.tensor(theta0[off:off + n].reshape(shape), dtype=dtype))
        decay = [self.prm[n] for n in self.names if self.prm[n].dim() == 2]
        rest = [self.prm[n] for n in self.names if self.prm[n].dim() != 2]
        self.opt = torch.optim.AdamW(
            [{"params": decay, "weight_decay": inner["weight_decay"]},
             {"params": rest, "weight_decay": 0.0}],
            lr=inner["lr"], betas=(inner["beta1"], inner["beta2"]), eps=inner["eps"])

    def params(self):
        return [self.prm[n] for n in self.names]

    def flat(self):
        return torch.cat([p.detach().reshape(-1) for p in self.params()])

    def set_flat(self, v):
        o = 0
        with torch.no_grad():
            for p in self.params():
                p.copy_(v[o:o + p.numel()].view_as(p))
                o += p.numel()


def lr_at(inner, total, step):
    """Linear warmup over warmup_steps ((step + 1) / warmup), then cosine from lr to
    min_lr_ratio x lr at the last step."""
    top, low, wu = inner["lr"], inner["min_lr_ratio"] * inner["lr"], inner["warmup_steps"]
    if step < wu:
        return top * (step + 1) / wu
    if step >= total or total <= wu:
        return low
    return low + 0.5 * (1 + math.cos(math.pi * (step - wu) / (total - wu))) * (top - low)


def gpt2_init(layout, n, L, seed):
    gen = torch.Generator().manual_seed(seed)
    theta = np.zeros(n)
    for name, off, shape in layout:
        k = int(np.prod(shape))
        if len(shape) == 1:
            theta[off:off + k] = 1.0 if name.endswith(".weight") else 0.0
        else:
            std = 0.02 / math.sqrt(2 * L) if name.endswith("c_proj.weight") else 0.02
            theta[off:off + k] = (torch.randn(k, generator=gen, dtype=torch.float64) * std).numpy()
    return theta


def own_batches(cfg, S, total, B, T, seed):
    V, k, n = cfg["model"]["V"], cfg["data"]["synthetic_branching"], cfg["data"]["synthetic_tokens"]
    rng = np.random.default_rng(seed)
    succ = np.stack([rng.choice(V, size=k, replace=False) for _ in range(V)])
    picks = rng.integers(0, k, size=n)
    tok = np.empty(n, dtype=np.int64)
    tok[0] = rng.integers(0, V)
    for t in range(1, n):
        tok[t] = succ[tok[t - 1], picks[t]]
    share = n // S
    train, evals = [], []
    for s in range(S):
        part = tok[s * share:(s + 1) * share]
        offs = rng.integers(0, share - T - 1, size=(total + 8, B))
        win = np.stack([np.stack([part[o:o + T + 1] for o in row]) for row in offs])
        b = torch.tensor(np.stack([win[:, :, :-1], win[:, :, 1:]], axis=1), dtype=torch.long)
        train.append(b[:total])
        evals.append(b[total:])
    return train, evals


class DumpError(Exception):
    pass


def run(run_dir, dtype="float64", threads=1, own_init=None, own_data=None):
    """The experiment of run_dir's dump redone here; returns the result as a dict."""
    a = argparse.Namespace(run_dir=run_dir, dtype=dtype, threads=threads, own_init=own_init,
                           own_data=own_data)
    torch.set_num_threads(a.threads)
    dtype = getattr(torch, a.dtype)
    meta = json.load(open(os.path.join(a.run_dir, "a", "dump", "meta.json")))
    cfg, total = meta["config"], meta["total_steps"]
    m, inner, outer = cfg["model"], cfg["inner"], cfg["outer"]
    if m["Vp"] not in (0, m["V"]):
        raise DumpError("a padded vocabulary (Vp > V) is not handled here")
    B, T, L, C, NH = m["B"], m["T"], m["L"], m["C"], m["NH"]
    layout = [(t["name"], t["offset"], tuple(t["shape"])) for t in meta["tensors"]]
    sites = [s["name"] for s in cfg["sites"]]
    dump = [os.path.join(a.run_dir, s, "dump") for s in sites]
    theta0 = np.fromfile(os.path.join(dump[0], "init.f32"), dtype=np.float32).astype(np.float64)
    if theta0.size != meta["n"]:
        raise DumpError(f"init.f32 holds {theta0.size} floats, meta.json says {meta['n']}")

    def batches(path):
        v = np.fromfile(path, dtype=np.int32).reshape(-1, 2, B, T)
        return torch.tensor(v, dtype=torch.long)

    if a.own_init is not None:
        theta0 = gpt2_init(layout, meta["n"], L, a.own_init)
    if a.own_data is not None:
        train, evals = own_batches(cfg, len(sites), total, B, T, a.own_data)
    else:
        train = [batches(os.path.join(d, "train.i32")) for d in dump]
        evals = [batches(os.path.join(d, "eval.i32")) for d in dump]
    if any(t.shape[0] != total for t in train):
        raise DumpError(f"a site's train.i32 does not hold {total} batches")
    W = [Worker(theta0, layout, inner, dtype) for _ in sites]
    S, H, tau = len(W), inner["steps"], outer["overlap_steps"]
    sync_dp = outer["mode"] == MODE_SYNC_DP
    tokens = float(B * T)  # every site trains the same tokens a step: equal weights
    anchor = torch.nn.Parameter(torch.tensor(theta0, dtype=dtype))
    nesterov = outer["optimizer"] == OPT_NESTEROV
    if outer["optimizer"] not in (OPT_NESTEROV, OPT_AVERAGE):
        raise DumpError(f"outer.optimizer {outer['optimizer']} has no reference here")
    outer_opt = torch.optim.SGD([anchor], lr=outer["lr"] if nesterov else 1.0,
                                momentum=outer["momentum"] if nesterov else 0.0,
                                nesterov=nesterov)
    snaps, deltas, pending = [None] * S, [None] * S, None

    def apply_round(final):
        g = sum(d * tokens for d in deltas) / (tokens * S)
        outer_opt.zero_grad()
        anchor.grad = g
        outer_opt.step()
        for w, snap in zip(W, snaps):
            w.set_flat(anchor.detach().clone() if final else anchor.detach() + (w.flat() - snap))

    for step in range(total):
        lr = lr_at(inner, total, step)
        for s, w in enumerate(W):
            for grp in w.opt.param_groups:
                grp["lr"] = lr
            w.opt.zero_grad()
            ids, tgt = train[s][step, 0], train[s][step, 1]
            gpt_loss(w.prm, L, C, NH, ids, tgt).backward()
        if sync_dp:
            with torch.no_grad():
                for ps in zip(*[w.params() for w in W]):
                    mean = sum(p.grad for p in ps) / S
                    for p in ps:
                        p.grad.copy_(mean)
        for w in W:
            if inner["grad_clip"] > 0:
                torch.nn.utils.clip_grad_norm_(w.params(), inner["grad_clip"])
            w.opt.step()
        k = step + 1  # steps done
        if sync_dp:
            continue
        if k % H == 0:  # submit round k / H - 1 (the previous one is applied by now: tau < H)
            for s, w in enumerate(W):
                snaps[s] = w.flat()
                deltas[s] = anchor.detach() - snaps[s]
            pending = k // H - 1
            if tau == 0 or k == total:
                apply_round(k == total)
                pending = None
        elif pending is not None and k == (pending + 1) * H + tau:
            apply_round(False)
            pending = None
    losses = []
    with torch.no_grad():
        for s, w in enumerate(W):
            bl = [gpt_loss(w.prm, L, C, NH, b[0], b[1]).item() for b in evals[s]]
            losses.append(sum(bl) / len(bl))
    summary = os.path.join(a.run_dir, "summary.json")
    gt = json.load(open(summary)).get("eval_loss") if os.path.exists(summary) else None
    return {"eval_loss": sum(losses) / len(losses), "geotrain_eval_loss": gt,
            "site_eval_loss": losses, "mode": "sync-dp" if sync_dp else "diloco",
            "optimizer": outer["optimizer"], "overlap_steps": tau, "dtype": a.dtype,
            "own_init": a.own_init, "own_data": a.own_data}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--own-init", type=int, default=None, metavar="SEED")
    ap.add_argument("--own-data", type=int, default=None, metavar="SEED")
    a = ap.parse_args()
    try:
        print(json.dumps(run(a.run_dir, a.dtype, a.threads, a.own_init, a.own_data)))
    except (DumpError, OSError, KeyError, ValueError) as e:
        print(f"ref_diloco: {a.run_dir}: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
