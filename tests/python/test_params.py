#!/usr/bin/env python3
"""test_params.py — the package's map from a model's parameters to the library's float32 host
vector (python/geotrain/_params.py), without the library: CPU float32 parameters are views into
the vector (a write to it is the model's), other dtypes are copied in by pull() and out by
push() (bf16 rounded to nearest, checked against torch's own cast), in the order of
model.parameters(); and every kind of misuse the hooks detect is detected, by name: a parameter
re-allocated, re-typed, re-shaped, or the model's parameters replaced. Needs torch (exit 77).
"""
import sys

try:
    import torch
    import torch.nn as nn
except ImportError:
    print("torch is not installed: skipped")
    sys.exit(77)

from geotrain import _params

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what, flush=True)


def misuse(flat, model, want):
    try:
        flat.pull(model.parameters())
    except _params.MisuseError as e:
        check(want in str(e), "misuse: %r not in %r" % (want, str(e)))
        return
    check(False, "misuse not detected (%s)" % want)


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2))
    model[1].to(torch.bfloat16)
    before = torch.cat([p.detach().float().reshape(-1) for p in model.parameters()])
    flat = _params.Flat(list(model.named_parameters()))
    check(flat.total == 15 + 8 and torch.equal(flat.host, before), "the vector holds the model")
    check([i for i, _, _ in flat.views] == [0, 1] and [i for i, _, _ in flat.copies] == [2, 3],
          "fp32 parameters are views, bf16 ones copies")
    # a write into the vector is the fp32 model's at once; the bf16 one's after push()
    new = torch.randn(flat.total)
    flat.host.copy_(new)
    check(torch.equal(model[0].weight.detach().reshape(-1), new[:12]), "views follow the vector")
    check(not torch.equal(model[1].weight.detach().float().reshape(-1), new[15:21]),
          "copies do not follow before push")
    flat.push(model.parameters())
    check(torch.equal(model[1].weight.detach().reshape(-1), new[15:21].to(torch.bfloat16)),
          "push rounds to the parameter's dtype as torch does")
    # the model trains; pull() brings its bf16 values in
    with torch.no_grad():
        model[1].bias.add_(1.0)
    flat.pull(model.parameters())
    check(torch.equal(flat.host[21:23], model[1].bias.detach().float()), "pull reads the copies")
    check(flat.reads == 1 and flat.writes == 1, "hook counts %d %d" % (flat.reads, flat.writes))
    # misuse, each kind by name
    m2 = nn.Sequential(nn.Linear(4, 3))
    f2 = _params.Flat(list(m2.named_parameters()))
    m2[0].weight.data = m2[0].weight.data.clone()
    misuse(f2, m2, "parameter 0.weight was re-allocated")
    m3 = nn.Sequential(nn.Linear(4, 3))
    f3 = _params.Flat(list(m3.named_parameters()))
    m3.double()
    misuse(f3, m3, "parameter 0.weight was re-typed from float32 to float64")
    m4 = nn.Sequential(nn.Linear(4, 3))
    f4 = _params.Flat(list(m4.named_parameters()))
    m4[0].weight.data = m4[0].weight.data.reshape(4, 3)
    misuse(f4, m4, "re-shaped from (3, 4) to (4, 3)")
    m5 = nn.Sequential(nn.Linear(4, 3))
    f5 = _params.Flat(list(m5.named_parameters()))
    m5[0].bias = nn.Parameter(torch.zeros(3))
    misuse(f5, m5, "the model's parameters changed after geotrain.DiLoCo()")
    # refused at once: a non-floating parameter; a shard that does not fit
    try:
        _params.Flat([("i", nn.Parameter(torch.zeros(2, dtype=torch.int64), requires_grad=False))])
        check(False, "an int64 parameter was accepted")
    except ValueError as e:
        check("only floating-point parameters" in str(e), str(e))
    try:
        _params.Flat(list(nn.Linear(2, 2).named_parameters()), shard=(5, 8))
        check(False, "a shard past the total was accepted")
    except ValueError as e:
        check("do not fit" in str(e), str(e))
    if FAILURES:
        print("%d checks failed" % len(FAILURES))
        return 1
    print("params tests passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
