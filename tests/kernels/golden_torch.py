#!/usr/bin/python3
"""golden_torch.py — geotrain's CPU GPT against an independent float64 PyTorch GPT-2 written
from the Hugging Face layout (Conv1D weights (in, out), tied LM head): the loss and every
gradient tensor must agree. usage: golden_torch.py GOLDEN_DUMP_BINARY"""
import math
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
d = tempfile.mkdtemp(prefix="gt_golden_")
subprocess.run([sys.argv[1], d], check=True)
meta = [l.split() for l in open(f"{d}/meta.txt")]
V, maxT, L, C, NH, B, T = map(int, meta[0][1:])
loss_c = float(meta[1][1])
P = np.fromfile(f"{d}/params.bin", dtype=np.float32).astype(np.float64)
G = np.fromfile(f"{d}/grads.bin", dtype=np.float32).astype(np.float64)
tok = np.fromfile(f"{d}/tok.bin", dtype=np.int32)
tensors = [(m[1], int(m[2]), int(m[3]), int(m[4])) for m in meta[2:]]
shutil.rmtree(d)
prm = {}
for nm, off, r, c in tensors:
    shape = (r, c) if c != 1 else (r,)
    prm[nm] = torch.tensor(P[off:off + r * c].reshape(shape), requires_grad=True)

ids = torch.tensor(tok[:-1].reshape(B, T), dtype=torch.long)
tgt = torch.tensor(tok[1:].reshape(B, T), dtype=torch.long)
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
loss = F.cross_entropy((x @ prm["wte.weight"].T).view(-1, V), tgt.view(-1))
loss.backward()

fails = 0
print(f"loss: torch {loss.item():.9f} geotrain {loss_c:.9f}")
if not abs(loss.item() - loss_c) <= 1e-6 + 1e-6 * abs(loss.item()):
    print("FAIL: loss differs")
    fails += 1
worst = 0.0
for nm, off, r, c in tensors:
    ref = prm[nm].grad.numpy().reshape(-1)
    got = G[off:off + r * c]
    rel = np.abs(ref - got).max() / (np.abs(ref).max() + 1e-30)
    worst = max(worst, rel)
    if not rel <= 1e-4:
        print(f"FAIL: {nm}: max |diff| / max |ref| = {rel:.3g}")
        fails += 1
print(f"{len(tensors)} gradient tensors, worst max|diff|/max|ref| {worst:.3g}; {fails} failed")
sys.exit(1 if fails else 0)
