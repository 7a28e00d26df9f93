#!/usr/bin/env python3
"""test_torch_sites.py — PyTorch sites as users run them, through `geotrain launch CONFIG --
/usr/bin/python3 trainer.py`: real site processes, a real etcd, the encrypted WAN stack on
loopback, torch.distributed (gloo) inside the sites.

  ddp        2 sites x 2 ranks, DDP: both finish, the loss falls, the anchors are identical at
             both sites every round, every contribution aggregated on time, and after every
             apply both ranks of a site hold the same host vector and the same parameters
             (which are that vector: the rebase reached the model)
  ddp_kill   the same with site b SIGKILLed after round 2 (one rank killed, the other taken
             down with it): a finishes alone
  ddp_join   sites a (2 ranks) and b (1 rank) start; c (2 ranks) joins after round 1: everyone
             finishes, c's anchors equal a's for every round it logged, c's ranks equal
  shard      2 sites x 2 ranks, each rank holding half of the flat vector by hand (ZeRO-3
             style): the ddp checks; then a site cutting its shards elsewhere: both sites fail
             at create, quickly, with a message naming both layouts
  bf16       2 sites, a bf16 model, each step reporting compute_s = 5 s (more than the wall
             time): loss falls, anchors equal, goodput within [0, 1]; the hooks copy the
             parameters in at each submit and again before each apply's rebase, out after it
  mixed      2 sites, fp32 and bf16 layers in one model: loss falls, anchors equal
  tiny       a model of 17 parameters under wan.lanes 4, with outer.catch_up and a 4x slower
             site, in the README's loop (`while not diloco.done`): both finish every round
  misuse     a's model re-typed to float64 after 2 rounds, b's step() called from a second
             thread: each site fails with the message saying so (not exit 0)

Environment (set by CTest): GT_CLI, GT_LIBRARY, PYTHONPATH (python/). GT_PYTHON_ONLY=name,...
runs a subset.
"""
import json
import os
import shutil
import sys
import tempfile

import test_python as tp  # exits 77 without torch
from test_python import check, load, anchors, first_metrics_loss

CONFIG = """run: {name: py-%(name)s, rounds: %(rounds)d, log_every: 5}
inner: {steps: %(H)d}
outer: {overlap_steps: 3, deadline_min_ms: 500, deadline_max_ms: 5000%(outer)s}
codec: {name: int8, block_size: 32}
wan: {transport: ucx, lanes: %(lanes)d, connect_timeout_ms: 20000, peer_timeout_ms: 5000}
membership: {lease_ttl_s: 3, heartbeat_ms: 500}
security: {mode: encrypted}
sites:
%(sites)s"""


def config(tmp, name, ranks, rounds=5, H=10, lanes=2, outer=""):
    sites = "".join('  - {name: %s, address: "127.0.0.1:0", ranks: %d}\n' % (chr(97 + i), r)
                    for i, r in enumerate(ranks))
    path = os.path.join(tmp, name + ".yaml")
    with open(path, "w") as f:
        f.write(CONFIG % {"name": name, "rounds": rounds, "H": H, "lanes": lanes,
                          "outer": outer, "sites": sites})
    return path


def rank_log(run, site, rank):
    path = os.path.join(run, site, "params-rank%d.jsonl" % rank)
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return {j["round"]: j for j in map(json.loads, f)}


def check_ranks(name, run, site, ranks, rounds_min, keys=("round", "step", "host", "params")):
    """Every rank of the site logged the same `keys` after every apply (the host vector, and
    the parameters unless sharded)."""
    logs = [{r: {k: j[k] for k in keys} for r, j in rank_log(run, site, k).items()}
            for k in range(ranks)]
    check(len(logs[0]) >= rounds_min, "%s: site %s rank 0 logged %d applies" %
          (name, site, len(logs[0])))
    for k in range(1, ranks):
        check(logs[k] == logs[0], "%s: site %s rank %d differs from rank 0:\n%s\n%s" %
              (name, site, k, logs[k], logs[0]))
    return logs[0]


def check_run(name, run, sites, rounds, lanes=2, ranks=None, loss_factor=0.5):
    s = load(os.path.join(run, "summary.json"))
    h = {x: anchors(run, x) for x in sites}
    for x in sites:
        check(h[x] == h[sites[0]] and len(h[x]) == rounds,
              "%s: anchors of %s %s vs %s" % (name, x, h[x], h[sites[0]]))
        site = s["sites"][x]
        check(site["status"] == "finished" and site["rounds_applied"] == rounds,
              "%s: site %s %s" % (name, x, site))
        first, last = first_metrics_loss(run, x), site["final_loss"]
        print("%s: site %s loss %.4f -> %.4f" % (name, x, first, last))
        check(last < loss_factor * first, "%s: site %s loss %.4f -> %.4f" % (name, x, first, last))
    c = s["contributions"]
    want = rounds * lanes * len(sites) * len(sites)  # lanes x chunks (one a site) x senders
    check(c["on_time"] == want and c["late"] == 0 and c["dropped"] == 0,
          "%s: contributions %s, want %d on time" % (name, c, want))
    check(s["hash_checks"] > 0 and s["hash_mismatches"] == 0, "%s: hash checks %d, mismatches %d"
          % (name, s["hash_checks"], s["hash_mismatches"]))
    for x, r in (ranks or {}).items():
        log = check_ranks(name, run, x, r, rounds)
        for j in log.values():
            check(j["host"] == j["params"], "%s: site %s round %d: the parameters are not the "
                  "library's vector" % (name, x, j["round"]))
    return s


def test_ddp(tmp):
    run, took = tp.launch(tmp, "ddp", config(tmp, "ddp", [2, 2]),
                          trainer_args=["--ddp", "--log-params"])
    check_run("ddp", run, "ab", 5, ranks={"a": 2, "b": 2})


def test_ddp_kill(tmp):
    run, _ = tp.launch(tmp, "ddpkill", config(tmp, "ddpkill", [2, 2], rounds=6), ["--kill", "b@2"],
                       trainer_args=["--ddp", "--log-params"])
    s = load(os.path.join(run, "summary.json"))
    check(s["sites"]["a"].get("status") == "finished", "ddp_kill: a %s" % s["sites"]["a"])
    check(s["sites"]["b"].get("killed") is True, "ddp_kill: b %s" % s["sites"]["b"])
    a, b = anchors(run, "a"), anchors(run, "b")
    check(len(a) == 6, "ddp_kill: a logged %d rounds" % len(a))
    last = max(b) if b else -1
    check(len(b) >= 2 and all(a[r] == b[r] for r in b if r < last),
          "ddp_kill: b's anchors %s vs %s" % (b, a))
    check_ranks("ddp_kill", run, "a", 2, 6)
    with open(os.path.join(run, "logs", "b.log")) as f:
        log = f.read()
    check("died of signal 9" in log, "ddp_kill: b's log says no rank was killed:\n%s" % log[-2000:])


def test_ddp_join(tmp):
    rounds = 10
    run, _ = tp.launch(tmp, "ddpjoin", config(tmp, "ddpjoin", [2, 1, 2], rounds=rounds),
                       ["--join", "c@1", "--slow", "a=30", "--slow", "b=30", "--slow", "c=30"],
                       trainer_args=["--ddp", "--log-params"])
    s = load(os.path.join(run, "summary.json"))
    h = {x: anchors(run, x) for x in "abc"}
    sc = s["sites"]["c"]
    R = sc.get("joined_round", 0)
    print("ddp_join: c joined for round %d" % R)
    for x in "abc":
        check(s["sites"][x].get("status") == "finished", "ddp_join: %s %s" % (x, s["sites"][x]))
    check(1 <= R < rounds, "ddp_join: c's first round %d" % R)
    check(len(h["a"]) == rounds and h["a"] == h["b"], "ddp_join: a and b anchors differ")
    check(len(h["c"]) >= rounds - R and all(h["a"].get(r) == v for r, v in h["c"].items()),
          "ddp_join: c's anchors %s, a's %s" % (h["c"], h["a"]))
    check(s["hash_mismatches"] == 0, "ddp_join: %d hash mismatches" % s["hash_mismatches"])
    c = s["contributions"]
    accounted = c["on_time"] + c["late"] + c["open_at_end"] + c["dropped"] + c["unreceived"]
    want = 6 * (2 * rounds + (rounds - R))  # 2 lanes x 3 chunks: a and b always, c from R on
    check(accounted == want, "ddp_join: contributions %s, want %d" % (c, want))
    check_ranks("ddp_join", run, "a", 2, rounds)
    check_ranks("ddp_join", run, "c", 2, rounds - R)


def test_shard(tmp):
    cfg = config(tmp, "shard", [2, 2])
    run, _ = tp.launch(tmp, "shard", cfg, trainer_args=["--shard", "--log-params"])
    check_run("shard", run, "ab", 5)
    for x in "ab":  # each rank's parameters are its own half; the host vector is the site's
        check_ranks("shard", run, x, 2, 5, keys=("round", "step", "host"))
    run, took = tp.launch(tmp, "shardbad", cfg, trainer_args=["--shard", "--split-site", "b=300"],
                          expect_rc=None, timeout=120)
    for x, mine, theirs in (("a", "[0:288, 288:577]", "[0:300, 300:577]"),
                            ("b", "[0:300, 300:577]", "[0:288, 288:577]")):
        with open(os.path.join(run, "logs", x + ".log")) as f:
            log = f.read()
        want = "GeotrainError: geotrain.DiLoCo: site %s holds its parameters as 2 shards %s of " \
            "577, but site %s as 2 shards %s" % (x, mine, "b" if x == "a" else "a", theirs)
        check(log.count(want) == 2, "shardbad: %s's log (both ranks must say %r):\n%s" %
              (x, want, log[-3000:]))
    check(took < 60, "shardbad: took %.1f s" % took)


def test_bf16(tmp):
    run, _ = tp.launch(tmp, "bf16", config(tmp, "bf16", [1, 1]),
                       trainer_args=["--dtype", "bfloat16", "--compute-s", "5"])
    s = check_run("bf16", run, "ab", 5, loss_factor=0.7)
    g = s.get("goodput")
    bd = s.get("goodput_breakdown", {})
    print("bf16: goodput %s, breakdown %s" % (g, bd))
    check(isinstance(g, float) and 0.0 <= g <= 1.0, "bf16: goodput %s" % g)
    check(all(v >= -1e-6 for v in bd.values()), "bf16: goodput breakdown %s" % bd)
    # The hooks: read at create, at each of the 5 submits and again at each apply but the last
    # (overlap_steps 3: the overlap's steps must reach the rebase), written after each apply.
    for x in "ab":
        with open(os.path.join(run, "logs", x + ".log")) as f:
            line = [ln for ln in f if ln.startswith("trainer:")][-1]
        reads, writes = (int(line.split(k + " ")[1].split()[0]) for k in ("hook_reads",
                                                                         "hook_writes"))
        print("bf16: site %s hook reads %d, writes %d" % (x, reads, writes))
        check(reads == 1 + 5 + 4 and writes == 5, "bf16: site %s: %d reads, %d writes of the "
              "hooks, want 10 and 5" % (x, reads, writes))


def test_mixed(tmp):
    run, _ = tp.launch(tmp, "mixed", config(tmp, "mixed", [1, 1]),
                       trainer_args=["--dtype", "mixed"])
    check_run("mixed", run, "ab", 5, loss_factor=0.7)


def test_tiny(tmp):
    rounds, H = 6, 10
    run, _ = tp.launch(tmp, "tiny", config(tmp, "tiny", [1, 1], rounds=rounds, H=H, lanes=4,
                                            outer=", catch_up: true"),
                       ["--slow", "b=4", "--set", "inner.emulated_step_ms=10"],
                       trainer_args=["--tiny"])
    s = load(os.path.join(run, "summary.json"))
    a, b = anchors(run, "a"), anchors(run, "b")
    check(len(a) == rounds and a == b, "tiny: anchors %s %s" % (a, b))
    for x in "ab":
        site = s["sites"][x]
        check(site["status"] == "finished" and site["rounds_applied"] == rounds and
              site["steps_trained"] + site["steps_skipped"] == rounds * H,
              "tiny: site %s %s" % (x, site))
    check(s["sites"]["b"]["rounds_cut"] >= 1, "tiny: b cut no round: %s" % s["sites"]["b"])


def test_misuse(tmp):
    run, took = tp.launch(tmp, "misuse", config(tmp, "misuse", [1, 1]), expect_rc=None,
                          trainer_args=["--misuse", "a=retype", "--misuse", "b=thread"],
                          timeout=120)
    logs = {}
    for x in "ab":
        with open(os.path.join(run, "logs", x + ".log")) as f:
            logs[x] = f.read()
    check("GeotrainError: DiLoCo.step: parameter 0.weight was re-typed from float32 to float64 "
          "after geotrain.DiLoCo()" in logs["a"], "misuse: a's log:\n%s" % logs["a"][-2000:])
    check("GeotrainError: DiLoCo.step: called from thread" in logs["b"],
          "misuse: b's log:\n%s" % logs["b"][-2000:])
    s = load(os.path.join(run, "summary.json"))
    for x in "ab":
        check(s["sites"][x].get("status") != "finished", "misuse: %s %s" % (x, s["sites"][x]))


def main():
    tmp = tempfile.mkdtemp(prefix="gt-torch-")
    only = os.environ.get("GT_PYTHON_ONLY")
    for name, fn in (("ddp", test_ddp), ("shard", test_shard), ("bf16", test_bf16),
                     ("mixed", test_mixed), ("tiny", test_tiny), ("misuse", test_misuse),
                     ("ddp_kill", test_ddp_kill), ("ddp_join", test_ddp_join)):
        if not only or name in only.split(","):
            fn(tmp)
    if tp.FAILURES:
        print("%d checks failed; run directories kept in %s" % (len(tp.FAILURES), tmp))
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    print("torch site tests passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
