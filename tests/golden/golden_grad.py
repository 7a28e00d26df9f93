#!/usr/bin/env python3
"""golden_grad.py — geotrain's GPT-2 gradients against an independent PyTorch implementation.

Builds a random GPT-2 in PyTorch (its own forward pass written here from torch.nn.functional,
in float64), writes the parameters as safetensors with Hugging Face GPT-2 names and shapes and
a batch as an llm.c token shard, runs `geotrain grad`, and compares the loss and every gradient
element with |a - b| <= atol + rtol * |ref|. It also checks that `geotrain grad` accepts the
"transformer." prefix and refuses a parameter file with a wrong shape.

Usage: golden_grad.py --cli PATH/TO/geotrain [--keep DIR] [--device cpu|cuda]
                      [--shape small|gpt2-124m] [--batch B] [--seq T] [--threads N]
Exit: 0 all match, 1 a mismatch or failure, 77 PyTorch is not installed (skipped).

--device cuda checks the GPU model (`geotrain grad --device cuda`: bf16 matrix products), and
--shape gpt2-124m checks GPT-2 124M's shapes (V 50257, context 1024, 12 layers, C 768, 12 heads;
B 4 and T 1024 unless given; GPT-2's initialisation scale; the float64 reference runs on the
GPU when PyTorch has one). Both compare each tensor by its relative L2 error
|got - ref| / |ref| against a bound (CPU 1e-4, CUDA 5e-2; the loss within 1e-5 or 1e-2
relative) and print every tensor's error and the worst, instead of the elementwise tolerance
the default small CPU cases use.
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

try:
    import torch
    import torch.nn.functional as F
except ModuleNotFoundError:
    print("SKIP: PyTorch is not installed for this interpreter (Debian: python3-torch)")
    sys.exit(77)

ATOL, RTOL = 1e-6, 1e-4  # geotrain computes in float32, the reference in float64
REL_L2 = {"cpu": 1e-4, "cuda": 5e-2}  # per-tensor relative L2 bounds of the --device/--shape mode
LOSS_REL = {"cpu": 1e-5, "cuda": 1e-2}


def tensor_names(L):
    names = ["wte.weight", "wpe.weight"]
    for i in range(L):
        for n in ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                  "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                  "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"]:
            names.append(f"h.{i}.{n}")
    return names + ["ln_f.weight", "ln_f.bias"]


def random_params(V, maxT, L, C, gen, std=0.08):
    """Random values of every kind (not just GPT-2's init), so every path carries signal;
    matrices and biases with standard deviations std and std * 5 / 8."""
    shapes = {"wte.weight": (V, C), "wpe.weight": (maxT, C), "ln_f.weight": (C,), "ln_f.bias": (C,)}
    for i in range(L):
        p = f"h.{i}."
        shapes.update({p + "ln_1.weight": (C,), p + "ln_1.bias": (C,),
                       p + "attn.c_attn.weight": (C, 3 * C), p + "attn.c_attn.bias": (3 * C,),
                       p + "attn.c_proj.weight": (C, C), p + "attn.c_proj.bias": (C,),
                       p + "ln_2.weight": (C,), p + "ln_2.bias": (C,),
                       p + "mlp.c_fc.weight": (C, 4 * C), p + "mlp.c_fc.bias": (4 * C,),
                       p + "mlp.c_proj.weight": (4 * C, C), p + "mlp.c_proj.bias": (C,)})
    params = {}
    for name in tensor_names(L):
        shape = shapes[name]
        if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
            t = 1.0 + 0.1 * torch.randn(shape, generator=gen, dtype=torch.float64)
        elif len(shape) == 1:
            t = std * 0.625 * torch.randn(shape, generator=gen, dtype=torch.float64)
        else:
            t = std * torch.randn(shape, generator=gen, dtype=torch.float64)
        # round to float32 values so both sides see the same parameters
        params[name] = t.float().double().requires_grad_(True)
    return params


def forward(params, idx, targets, L, NH):
    """GPT-2 (HF layout: Conv1D y = x @ W + b), mean cross-entropy in nats."""
    B, T = idx.shape
    C = params["wte.weight"].shape[1]
    hs = C // NH
    x = params["wte.weight"][idx] + params["wpe.weight"][:T].unsqueeze(0)
    mask = torch.ones(T, T, dtype=torch.bool, device=idx.device).tril()
    for i in range(L):
        p = lambda n: params[f"h.{i}.{n}"]
        h = F.layer_norm(x, (C,), p("ln_1.weight"), p("ln_1.bias"), eps=1e-5)
        qkv = h @ p("attn.c_attn.weight") + p("attn.c_attn.bias")
        q, k, v = qkv.split(C, dim=2)
        q = q.view(B, T, NH, hs).transpose(1, 2)
        k = k.view(B, T, NH, hs).transpose(1, 2)
        v = v.view(B, T, NH, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ p("attn.c_proj.weight") + p("attn.c_proj.bias")
        h = F.layer_norm(x, (C,), p("ln_2.weight"), p("ln_2.bias"), eps=1e-5)
        h = F.gelu(h @ p("mlp.c_fc.weight") + p("mlp.c_fc.bias"), approximate="tanh")
        x = x + h @ p("mlp.c_proj.weight") + p("mlp.c_proj.bias")
    x = F.layer_norm(x, (C,), params["ln_f.weight"], params["ln_f.bias"], eps=1e-5)
    logits = x @ params["wte.weight"].t()
    return F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))


def write_safetensors(path, tensors):
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        data = t.detach().float().contiguous().numpy().tobytes() if hasattr(t, "numpy") else t
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] == "F32", (name, e["dtype"])
        b, end = e["data_offsets"]
        buf = raw[8 + n + b:8 + n + end]
        vals = torch.frombuffer(bytearray(buf), dtype=torch.float32).double()
        out[name] = vals.reshape(e["shape"]) if e["shape"] else vals.reshape(())
    return out


def write_shard(path, tokens):
    header = [20240520, 1, len(tokens)] + [0] * 253
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header) + struct.pack(f"<{len(tokens)}H", *tokens))


def compare(name, got, ref):
    if tuple(got.shape) != tuple(ref.shape):
        print(f"FAIL {name}: shape {tuple(got.shape)} vs reference {tuple(ref.shape)}")
        return False
    diff = (got - ref).abs()
    bad = diff > ATOL + RTOL * ref.abs()
    worst = (diff / (ATOL + RTOL * ref.abs())).max().item() if ref.numel() else 0.0
    if bad.any():
        i = bad.flatten().nonzero()[0].item()
        print(f"FAIL {name}: {int(bad.sum())} of {ref.numel()} elements differ; first at {i}: "
              f"{got.flatten()[i].item():.9g} vs {ref.flatten()[i].item():.9g}")
        return False
    print(f"ok   {name:28s} {ref.numel():7d} elements, max |diff|/tol {worst:.3f}, "
          f"max |ref| {ref.abs().max().item():.3g}")
    return True


def compare_rel(name, got, ref, bound):
    """Relative L2 error of a whole tensor; (ok, error)."""
    if tuple(got.shape) != tuple(ref.shape):
        print(f"FAIL {name}: shape {tuple(got.shape)} vs reference {tuple(ref.shape)}")
        return False, math.inf
    norm = ref.norm().item()
    err = (got - ref).norm().item() / (norm if norm > 0 else 1.0)
    ok = err <= bound  # NaN fails
    print(f"{'ok  ' if ok else 'FAIL'} {name:28s} {ref.numel():9d} elements, relative L2 error "
          f"{err:.3e} (bound {bound:.0e}), |ref| {norm:.3g}")
    return ok, err


def case(cli, tmp, V, maxT, L, C, NH, B, T, seed, prefix="", device="cpu", rel=False, std=0.08,
         ref_device="cpu", threads=1):
    """rel: compare tensors by relative L2 error (REL_L2[device]) instead of elementwise."""
    gen = torch.Generator().manual_seed(seed)
    params = random_params(V, maxT, L, C, gen, std)
    tokens = torch.randint(0, V, (B * T + 1,), generator=gen)
    pfile, tfile, ofile = (os.path.join(tmp, f"{seed}.{x}") for x in ("params.st", "tok.bin", "grad.st"))
    write_safetensors(pfile, {prefix + k: v for k, v in params.items()})
    write_shard(tfile, tokens.tolist() + [0] * 7)  # more tokens than needed: only B*T+1 are read
    if ref_device != "cpu":
        params = {k: v.detach().to(ref_device).requires_grad_(True) for k, v in params.items()}
    idx, targets = tokens[:-1].view(B, T).to(ref_device), tokens[1:].view(B, T).to(ref_device)
    loss = forward(params, idx, targets, L, NH)
    loss.backward()
    cmd = [cli, "grad", "--params", pfile, "--tokens", tfile, "--batch", str(B), "--seq", str(T),
           "--heads", str(NH), "--out", ofile, "--device", device, "--threads", str(threads)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"FAIL: {' '.join(cmd)} exited {r.returncode}\n{r.stderr}")
        return False
    got = read_safetensors(ofile)
    print(f"case V={V} maxT={maxT} L={L} C={C} NH={NH} B={B} T={T} on {device}"
          f"{' (prefixed names)' if prefix else ''}: loss {got['loss'].item():.6f} vs reference "
          f"{loss.item():.6f}\n     {r.stderr.strip()}")
    names = tensor_names(L)
    extra = set(got) - set(names) - {"loss"}
    if extra or set(names) - set(got):
        print(f"FAIL: gradient names differ: extra {sorted(extra)}, missing {sorted(set(names) - set(got))}")
        return False
    grads = {n: params[n].grad.cpu() for n in names}
    w = "h.0.attn.c_attn.weight"
    if rel:
        bound = REL_L2[device]
        lref = loss.item()
        ok = abs(got["loss"].item() - lref) <= LOSS_REL[device] * abs(lref)
        print(f"{'ok  ' if ok else 'FAIL'} loss: relative difference "
              f"{abs(got['loss'].item() - lref) / abs(lref):.3e} (bound {LOSS_REL[device]:.0e})")
        worst = (0.0, "")
        for n in names:
            k, e = compare_rel(n, got[n], grads[n], bound)
            ok &= k
            worst = max(worst, (e, n))
        print(f"     worst tensor: {worst[1]}, relative L2 error {worst[0]:.3e}")
        print("     (negative control: expecting one FAIL line)")
        if compare_rel(w + " x(1+3b)", got[w] * (1 + 3 * bound), grads[w], bound)[0]:
            print("FAIL: the comparison did not notice an error of 3x its bound")
            ok = False
        return ok
    ok = compare("loss", got["loss"], loss.detach().cpu())
    for n in names:
        ok &= compare(n, got[n], grads[n])
    # Negative control: the comparison must notice a 1% error in one gradient.
    print("     (negative control: expecting one FAIL line)")
    if compare(w + " x1.01", got[w] * 1.01, grads[w]):
        print("FAIL: the comparison did not notice a 1% error")
        ok = False
    return ok


def refuses_bad_shape(cli, tmp):
    gen = torch.Generator().manual_seed(3)
    params = random_params(20, 8, 1, 16, gen)
    params["h.0.attn.c_attn.weight"] = torch.zeros(48, 16)  # transposed: (3C, C), not HF's (C, 3C)
    pfile, tfile = os.path.join(tmp, "bad.st"), os.path.join(tmp, "bad.bin")
    write_safetensors(pfile, params)
    write_shard(tfile, [1] * 64)
    r = subprocess.run([cli, "grad", "--params", pfile, "--tokens", tfile, "--batch", "1", "--seq",
                        "4", "--heads", "2", "--out", os.path.join(tmp, "bad.out")],
                       capture_output=True, text=True)
    ok = r.returncode != 0 and "h.0.attn.c_attn.weight" in r.stderr
    print(("ok  " if ok else "FAIL") + " a transposed c_attn.weight is refused by name")
    if not ok:
        print(r.stderr)
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--keep", help="keep the files in this directory")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="geotrain's model")
    ap.add_argument("--shape", choices=["small", "gpt2-124m"], default="small")
    ap.add_argument("--batch", type=int, default=4, help="B of --shape gpt2-124m")
    ap.add_argument("--seq", type=int, default=1024, help="T of --shape gpt2-124m")
    ap.add_argument("--threads", type=int, default=1, help="geotrain grad --threads")
    a = ap.parse_args()
    torch.set_num_threads(1 if a.shape == "small" else max(1, os.cpu_count() or 1))
    tmp = a.keep or tempfile.mkdtemp(prefix="geotrain-golden-")
    os.makedirs(tmp, exist_ok=True)
    rel = a.device != "cpu" or a.shape != "small"
    kw = dict(device=a.device, rel=rel, threads=a.threads)
    if a.shape == "gpt2-124m":
        ref = "cuda" if torch.cuda.is_available() else "cpu"
        ok = case(a.cli, tmp, V=50257, maxT=1024, L=12, C=768, NH=12, B=a.batch, T=a.seq, seed=7,
                  std=0.02, ref_device=ref, **kw)
    else:
        ok = case(a.cli, tmp, V=50, maxT=16, L=2, C=32, NH=4, B=3, T=11, seed=1, **kw)
        ok &= case(a.cli, tmp, V=67, maxT=8, L=1, C=48, NH=3, B=2, T=8, seed=2,
                   prefix="transformer.", **kw)
        ok &= refuses_bad_shape(a.cli, tmp)
    if not a.keep:
        for f in os.listdir(tmp):
            os.remove(os.path.join(tmp, f))
        os.rmdir(tmp)
    print("all gradients match" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
