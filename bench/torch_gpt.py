#!/usr/bin/python3
"""torch_gpt.py — the same GPT-2 as kernels/ in PyTorch, timed the same way as
`geotrain bench kernels`: full training steps (forward, backward, global-norm clipping at 1.0,
AdamW with decay on 2-D tensors only) on a fixed random batch, median of the timed steps after
warmup. Prints one JSON object. Run with Debian's /usr/bin/python3 (python3-torch).

usage: torch_gpt.py [--preset small|tiny] [--threads 2] [--warmup 3] [--steps 10]
"""
import argparse
import json
import math
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {  # V, maxT, L, C, NH, B, T  (kernels/config.c)
    "tiny": (128, 32, 2, 64, 4, 4, 32),
    "small": (256, 128, 4, 256, 4, 16, 128),
}


class Block(nn.Module):
    def __init__(self, C, NH, maxT):
        super().__init__()
        self.NH = NH
        self.ln_1 = nn.LayerNorm(C, eps=1e-5)
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)
        self.register_buffer("mask", torch.tril(torch.ones(maxT, maxT, dtype=torch.bool)))

    def attn(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        hs = C // self.NH
        q = q.view(B, T, self.NH, hs).transpose(1, 2)
        k = k.view(B, T, self.NH, hs).transpose(1, 2)
        v = v.view(B, T, self.NH, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(~self.mask[:T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, V, maxT, L, C, NH):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(maxT, C)
        self.h = nn.ModuleList([Block(C, NH, maxT) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C, eps=1e-5)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for blk in self.h:
            x = blk(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # tied LM head
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="small", choices=sorted(PRESETS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    V, maxT, L, C, NH, B, T = PRESETS[a.preset]
    model = GPT(V, maxT, L, C, NH)
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-4, betas=(0.9, 0.95), eps=1e-8)
    tok = torch.randint(0, V, (B * T + 1,))
    x, y = tok[:-1].view(B, T), tok[1:].view(B, T)
    times, cpus, losses = [], [], []
    for i in range(a.warmup + a.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        lv = loss.item()
        t1, c1 = time.perf_counter(), time.process_time()
        if i >= a.warmup:
            times.append(t1 - t0)
            cpus.append(c1 - c0)
            losses.append(lv)
    med, cpu_med = statistics.median(times), statistics.median(cpus)
    params = sum(p.numel() for p in model.parameters())
    fpt = 6.0 * (L * 12.0 * C * C + V * C) + 12.0 * L * T * C  # gt_gpt_train_flops_per_token
    print(json.dumps({
        "bench": "torch_gpt", "preset": a.preset, "threads": torch.get_num_threads(),
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"), "torch": torch.__version__,
        "B": B, "T": T, "params": params, "step_ms_median": round(med * 1e3, 3),
        "tokens_per_s": round(B * T / med, 1),
        "cpu_ms_median": round(cpu_med * 1e3, 3), "tokens_per_cpu_s": round(B * T / cpu_med, 1), "gflops": round(B * T / med * fpt / 1e9, 2),
        "loss_first": round(losses[0], 5), "loss_last": round(losses[-1], 5)}))


if __name__ == "__main__":
    main()
