#!/usr/bin/python3
"""test_ref_quality.py — geotrain's DiLoCo against an independent PyTorch implementation of the
same experiment (ref_diloco.py), seed by seed.

Each case is one `geotrain launch` of tests/launch/three_sites.yaml with test_quality's setup
(15 rounds of H = 20, no emulated delay, the `tiny` GPT-2, three sites, the synthetic corpus)
and `run.dump: data`, then ref_diloco.py on the same initial parameters and batches. Both sides
see the same tokens from the same start, so what differs between their held-out losses is what
the two implementations do differently — float32 against float64 rounding, a few 1e-7 nats over
this run — not the spread between seeds (about 0.008 nats here). A difference in the outer
optimizer (the sign, scale or weighting of the pseudo-gradient, the momentum, the rebase with an
overlap, a clip of honest contributions) moves the loss by 1e-3 to 1e-1 (the difference of
plain averaging, or of a momentum of 0.8 instead of 0.9: docs/diloco.md, "The outer step
against a reference").

Cases: nesterov (outer.optimizer nesterov, lr 0.7, momentum 0.9) at tau 0 and tau 2,
sync-dp, average (lr 1, no momentum). Exchange codec fp32 unless --codec (a lossy codec's
error is geotrain's alone: the reference does not quantize).

--own init,data: the reference starts from its own initialisation and/or trains on its own
corpus (ref_diloco.py --own-init/--own-data, seeded by the run's seed): an experiment that shares
nothing with geotrain's but the settings, compared over the seeds as two samples (|Welch t| <=
--max-t per case) instead of seed by seed.

Usage: test_ref_quality.py --cli GEOTRAIN [--config YAML] [--seeds 7,8] [--cases LIST]
           [--codec fp32] [--tol 1e-3] [--own init,data] [--max-t 3] [--json OUT] [--keep DIR]
Exit: 0 every case within --tol on every seed (with --own: within --max-t), 1 a difference or a
failed run, 77 no PyTorch.
Prints, per case: geotrain's and the reference's mean +- sd over the seeds, the mean paired
difference (geotrain - reference), the largest |difference| and Welch's t of the two samples.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import ref_diloco
except ModuleNotFoundError as e:  # torch or numpy missing
    print(f"SKIP: {e} (Debian: python3-torch under /usr/bin/python3)")
    sys.exit(77)

CASES = {
    "nesterov-tau0": ["--set", "outer.overlap_steps=0"],
    "nesterov-tau2": ["--set", "outer.overlap_steps=2"],
    "sync-dp": ["--set", "outer.mode=sync-dp"],
    "average": ["--set", "outer.optimizer=average"],
}


def seeds_arg(text):
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def mean_sd(v):
    m = sum(v) / len(v)
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1)) if len(v) > 1 else 0.0
    return m, sd


def welch_t(a, b):
    (ma, sa), (mb, sb) = mean_sd(a), mean_sd(b)
    se = math.sqrt(sa * sa / len(a) + sb * sb / len(b))
    return (ma - mb) / se if se > 0 else (0.0 if ma == mb else math.inf)


def launch(cli, config, run_dir, seed, codec, extra):
    cmd = [cli, "launch", config, "--run-dir", run_dir, "--set", "run.rounds=15", "--set",
           "inner.steps=20", "--set", "wan.emulation.enabled=false", "--set",
           f"run.seed={seed}", "--set", f"codec.name={codec}", "--set", "run.dump=data",
           # every round waits for every site, however loaded the machine: a contribution
           # folded late would be another experiment than the reference's
           "--set", "outer.deadline_min_ms=30000", "--set", "outer.deadline_max_ms=60000"] + extra
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        print(f"FAIL: {' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-4000:]}")
        return None
    with open(os.path.join(run_dir, "summary.json")) as f:
        return json.load(f)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--config",
                    default=os.path.join(here, "..", "launch", "three_sites.yaml"))
    ap.add_argument("--seeds", type=seeds_arg, default=seeds_arg("7,8"))
    ap.add_argument("--cases", default="nesterov-tau0,nesterov-tau2")
    ap.add_argument("--codec", default="fp32")
    ap.add_argument("--tol", type=float, default=1e-3,
                    help="largest |geotrain - reference| held-out loss allowed on any seed")
    ap.add_argument("--own", default="", help="init, data or init,data: see above")
    ap.add_argument("--max-t", type=float, default=3.0)
    ap.add_argument("--json", help="write every run's numbers here")
    ap.add_argument("--keep", help="keep the run directories under this folder")
    a = ap.parse_args()
    cases = a.cases.split(",")
    own = set(filter(None, a.own.split(",")))
    if own - {"init", "data"}:
        ap.error("--own takes init, data or both")
    for c in cases:
        if c not in CASES:
            ap.error(f"unknown case {c} (known: {', '.join(CASES)})")
    tmp = a.keep or tempfile.mkdtemp(prefix="gt_refq_")
    rows, fails = [], 0
    for case in cases:
        for seed in a.seeds:
            run_dir = os.path.join(tmp, f"{case}-s{seed}")
            shutil.rmtree(run_dir, ignore_errors=True)
            summary = launch(a.cli, a.config, run_dir, seed, a.codec, CASES[case])
            if summary is None:
                fails += 1
                continue
            contrib = summary.get("contributions", {})
            if contrib.get("late", 0) or contrib.get("dropped", 0) or contrib.get("rejected", 0):
                # the reference averages every site's delta of every round on time
                print(f"FAIL: {case} seed {seed}: contributions late/dropped/rejected: "
                      f"{contrib}: not the experiment the reference runs")
                fails += 1
                continue
            ref = ref_diloco.run(run_dir, own_init=seed if "init" in own else None,
                                 own_data=seed if "data" in own else None)
            row = {"case": case, "seed": seed, "codec": a.codec, "own": a.own,
                   "geotrain": summary["eval_loss"], "reference": ref["eval_loss"]}
            row["diff"] = row["geotrain"] - row["reference"]
            rows.append(row)
            print(f"{case} seed {seed}: geotrain {row['geotrain']:.6f} reference "
                  f"{row['reference']:.6f} difference {row['diff']:+.2e}", flush=True)
            if not own and not abs(row["diff"]) <= a.tol:
                print(f"FAIL: {case} seed {seed}: geotrain's held-out loss differs from the "
                      f"reference's by {row['diff']:+.4g} (tolerance {a.tol:g})")
                fails += 1
            if not a.keep:
                shutil.rmtree(run_dir, ignore_errors=True)
    print(f"\n| case ({a.codec}) | geotrain | reference | mean difference | max |difference| "
          f"| Welch t |")
    print("|---|---|---|---|---|---|")
    for case in cases:
        r = [x for x in rows if x["case"] == case]
        if not r:
            continue
        g, f = [x["geotrain"] for x in r], [x["reference"] for x in r]
        (mg, sg), (mf, sf) = mean_sd(g), mean_sd(f)
        md = sum(x["diff"] for x in r) / len(r)
        t = welch_t(g, f)
        print(f"| {case} | {mg:.4f} ± {sg:.4f} | {mf:.4f} ± {sf:.4f} | {md:+.1e} | "
              f"{max(abs(x['diff']) for x in r):.1e} | {t:+.2f} |")
        if own and not abs(t) <= a.max_t:
            print(f"FAIL: {case}: geotrain and the reference (own {a.own}) differ: Welch t "
                  f"{t:+.2f} (limit {a.max_t:g})")
            fails += 1
    if a.json:
        with open(a.json, "w") as out:
            json.dump(rows, out, indent=1)
    if not a.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(rows)} runs compared, {fails} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
