#!/usr/bin/python3
"""ref_outer.py — geotrain's outer step replayed by an independent float64 implementation.

Reads a run made with `--set run.dump=rounds` (one rank a site, fragments 1; SITE/dump/, see
docs/training.md#dumps) and, round by round, recomputes from the sites' own pseudo-gradients
Delta_s (what each submitted, before the codec) what the textbook outer step makes of them
(DiLoCo, arXiv 2311.08105, Algorithm 1):

    g   = sum_s w_s Delta_s / sum_s w_s            (w_s: the tokens the site trained)
    theta_a, m <- torch.optim.SGD(lr=eta, momentum=mu, nesterov=True) step with g as gradient
    theta_s <- theta_a + (theta_s - theta_s_at_send)   (the rebase; theta_s = theta_a at tau 0)

and compares it with what geotrain did: the result it applied (g), its anchor and momentum
after the step (a, m), every site's parameters after the rebase (x), and that the sites' anchors
agree. The reference keeps its own anchor and momentum from the initial parameters on (it never
copies geotrain's), so a difference that grows round over round shows. The first round where a
quantity differs beyond float32 rounding names the cause.

Usage: ref_outer.py RUN_DIR [--tol 2e-5] [--quiet]
Exit: 0 every round agrees, 1 a difference (the first one printed), 77 PyTorch not installed.
Tolerance: max |geotrain - ref| <= tol * max |ref| per vector (geotrain computes in float32).
With a lossy codec (int8, ...) g differs from the mean of the Delta_s by the quantization
error: then g is compared with its own tolerance (--gtol) and the step replayed on geotrain's g.
"""
import argparse
import json
import os
import sys

import numpy as np

try:
    import torch
except ModuleNotFoundError:
    print("SKIP: PyTorch is not installed for this interpreter (Debian: python3-torch)")
    sys.exit(77)

OPT_NESTEROV, OPT_AVERAGE = 0, 1  # outer.optimizer as the trainer's config JSON numbers it


def load(site_dir, what, r=None):
    name = f"{what}.f32" if r is None else f"{what}.r{r:06d}.f32"
    return np.fromfile(os.path.join(site_dir, "dump", name), dtype=np.float32).astype(np.float64)


def rel(got, ref):
    return float(np.abs(got - ref).max() / (np.abs(ref).max() + 1e-30))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("--tol", type=float, default=2e-5)
    ap.add_argument("--gtol", type=float, default=None,
                    help="tolerance on g against the mean of the deltas (default: --tol with "
                         "fp32, 0.05 with a lossy codec)")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args()
    torch.set_default_dtype(torch.float64)
    meta = json.load(open(os.path.join(a.run_dir, "a", "dump", "meta.json")))
    cfg = meta["config"]
    sites = [s["name"] for s in cfg["sites"]]
    dirs = [os.path.join(a.run_dir, s) for s in sites]
    eta, mu, opt = cfg["outer"]["lr"], cfg["outer"]["momentum"], cfg["outer"]["optimizer"]
    lossless = cfg["codec"]["name"] == "fp32"
    gtol = a.gtol if a.gtol is not None else (a.tol if lossless else 0.05)
    if opt not in (OPT_NESTEROV, OPT_AVERAGE):
        print(f"ref_outer: outer.optimizer {opt} has no reference here")
        return 1
    events = {}
    for s, d in zip(sites, dirs):
        for line in open(os.path.join(d, "dump", "rounds.jsonl")):
            e = json.loads(line)
            events.setdefault((s, e["event"]), {})[e["round"]] = e
    rounds = sorted(events[(sites[0], "apply")])
    theta0 = load(dirs[0], "init")
    for d in dirs[1:]:
        if not np.array_equal(load(d, "init"), theta0):
            print(f"FAIL: {d}: initial parameters differ from site {sites[0]}'s")
            return 1
    p = torch.nn.Parameter(torch.tensor(theta0))
    # SGD's momentum buffer starts as g itself on its first step: the same as m = 0, m <- mu m + g.
    sgd = torch.optim.SGD([p], lr=eta, momentum=mu if opt == OPT_NESTEROV else 0.0,
                          nesterov=opt == OPT_NESTEROV)
    worst = {}

    def check(r, what, got, ref, tol):
        e = rel(got, ref)
        worst[what] = max(worst.get(what, 0.0), e)
        if not e <= tol:
            print(f"FAIL: round {r}: {what}: max|geotrain - ref| / max|ref| = {e:.3g} "
                  f"(tolerance {tol:g})")
            return 1
        return 0

    for r in rounds:
        deltas = [load(d, "delta", r) for d in dirs]
        w = np.array([events[(s, "submit")][r]["tokens"] for s in sites], dtype=np.float64)
        g_ref = sum(wi * di for wi, di in zip(w, deltas)) / w.sum()
        g_gt = load(dirs[0], "g", r)
        a_pre = load(dirs[0], "a_pre", r)
        fails = check(r, "a_pre (anchor before the step)", a_pre, p.detach().numpy(), a.tol)
        fails += check(r, "g (result applied vs token-weighted mean of the deltas)", g_gt, g_ref,
                       gtol)
        # The step on the textbook g when the exchange is lossless, else on the g geotrain
        # decoded (the codec's error is not the outer optimizer's).
        g_use = g_ref if lossless else g_gt
        sgd.zero_grad()
        p.grad = torch.tensor(g_use) if opt == OPT_NESTEROV else torch.tensor(g_use / eta)
        sgd.step()
        a_ref = p.detach().numpy()
        fails += check(r, "a (anchor after the step)", load(dirs[0], "a", r), a_ref, a.tol)
        if opt == OPT_NESTEROV:
            m_ref = sgd.state[p]["momentum_buffer"].numpy()
            fails += check(r, "m (outer momentum)", load(dirs[0], "m", r), m_ref, a.tol)
        for s, d, delta in zip(sites, dirs, deltas):
            if s != sites[0] and not np.array_equal(load(d, "a", r), load(dirs[0], "a", r)):
                print(f"FAIL: round {r}: site {s}'s anchor is not bit-identical to {sites[0]}'s")
                fails += 1
            # the rebase: theta_s keeps what it trained since the send (theta_s_at_send =
            # theta_a - Delta_s); after the run's last round it is the anchor
            snap = load(d, "a_pre", r) - delta
            x_ref = a_ref + (load(d, "x_pre", r) - snap)
            if r == rounds[-1]:
                x_ref = a_ref
            fails += check(r, f"x (site {s} after the rebase)", load(d, "x", r), x_ref, a.tol)
        if not a.quiet:
            print(f"round {r:3d}: |g| {np.linalg.norm(g_ref):.5g}  |m| "
                  f"{np.linalg.norm(sgd.state[p].get('momentum_buffer', torch.zeros(1))):.5g}  "
                  f"anchor moved {np.linalg.norm(a_ref - a_pre):.5g}")
        if fails:
            print(f"ref_outer: the first difference is at round {r} (above)")
            return 1
    print(f"ref_outer: {len(rounds)} rounds of {len(sites)} sites agree with the textbook outer "
          f"step; worst relative differences: " +
          ", ".join(f"{k.split(' ')[0]} {v:.2g}" for k, v in sorted(worst.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
