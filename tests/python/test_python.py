#!/usr/bin/env python3
"""test_python.py — the Python package (python/geotrain) end to end: a PyTorch model trained
through geotrain.DiLoCo by `geotrain launch CONFIG -- python3 trainer.py`, with a real etcd,
real site processes and the encrypted WAN stack on loopback.

  two_sites   2 sites: both finish, the loss falls, the anchors are identical after every
              round (hash checks > 0, no mismatch), every contribution was aggregated
  kill        the same with one site SIGKILLed after round 2: the other finishes alone
  join        3 sites, one started only once the others applied 2 rounds: it joins, trains
              the rest, and its anchors equal the others' for every round it logged
  resume      2 sites of a deterministic config, every site SIGKILLed after round 3, then
              `launch --resume RUN_DIR -- trainer`: the sites resume at the newest step both
              saved, load model and AdamW from it, and every round's anchor equals that of the
              same run left alone, bit for bit
  errors      no config, an unknown site, and a model with one parameter more at one site:
              a geotrain.GeotrainError with the library's message, at start, not a hang

Needs Debian's python3-torch (skipped, exit 77, without it). Environment (set by CTest):
GT_CLI (the geotrain binary), GT_LIBRARY (its libgeotrain.so), PYTHONPATH (python/).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import torch  # noqa: F401
except ImportError:
    print("python3-torch is not installed: skipped")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.environ.get("GT_CLI", "geotrain")
TRAINER = [sys.executable, os.path.join(HERE, "trainer.py")]
FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what, flush=True)


CONFIG = """run: {name: py-test, rounds: %(rounds)d, log_every: 5}
inner: {steps: %(H)d}
outer: {overlap_steps: 3, deadline_min_ms: 500, deadline_max_ms: 5000}
codec: {name: int8, block_size: 32}
wan: {transport: ucx, lanes: 2, connect_timeout_ms: 20000, peer_timeout_ms: 5000}
membership: {lease_ttl_s: 3, heartbeat_ms: 500}
security: {mode: encrypted}
sites:
%(sites)s"""


def write_config(tmp, name, n_sites, rounds, H):
    sites = "".join('  - {name: %s, address: "127.0.0.1:0"}\n' % chr(ord("a") + i)
                    for i in range(n_sites))
    path = os.path.join(tmp, name + ".yaml")
    with open(path, "w") as f:
        f.write(CONFIG % {"rounds": rounds, "H": H, "sites": sites})
    return path


def launch(tmp, name, config, extra=(), trainer_args=(), expect_rc=0, timeout=240):
    run = os.path.join(tmp, name)
    cmd = [CLI, "launch", config, "--run-dir", run, "--etcd-members", "1", *extra, "--",
           *TRAINER, *trainer_args]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    took = time.time() - t0
    print("---- %s (%.1f s, exit %d)\n%s" % (" ".join(cmd), took, p.returncode, p.stdout[-1500:]),
          flush=True)
    if expect_rc is not None:
        check(p.returncode == expect_rc, "%s: launch exited %d\n%s\n%s" % (name, p.returncode,
                                                                         p.stdout, p.stderr))
    return run, took


def load(path):
    with open(path) as f:
        return json.load(f)


def anchors(run, site):
    out = {}
    path = os.path.join(run, site, "anchors.jsonl")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                j = json.loads(line)
                if j["round"] in out:  # logged twice (a site that came back): must agree
                    check(out[j["round"]] == j["anchor_hash"], "%s logged round %d twice" %
                          (site, j["round"]))
                out[j["round"]] = j["anchor_hash"]
    return out


def first_metrics_loss(run, site):
    with open(os.path.join(run, site, "metrics.jsonl")) as f:
        return json.loads(f.readline())["loss"]


def test_two_sites(tmp):
    rounds, H = 6, 20
    run, _ = launch(tmp, "two", write_config(tmp, "two", 2, rounds, H))
    s = load(os.path.join(run, "summary.json"))
    a, b = anchors(run, "a"), anchors(run, "b")
    check(len(a) == rounds and a == b, "two: anchors differ or missing: %s %s" % (a, b))
    for name in "ab":
        site = s["sites"][name]
        check(site["status"] == "finished" and site["rounds_applied"] == rounds,
              "two: site %s %s" % (name, site))
        first, last = first_metrics_loss(run, name), site["final_loss"]
        print("site %s: loss %.4f -> %.4f, %.2f param passes per round" %
              (name, first, last, site["param_passes_per_round"]))
        check(last < 0.5 * first, "two: site %s loss %.4f -> %.4f" % (name, first, last))
        check(site["tokens"] == rounds * H * 32, "two: site %s tokens %s" % (name, site["tokens"]))
    c = s["contributions"]
    # every round: 2 lanes x 2 chunks, each with both sites' contributions
    check(c["on_time"] == rounds * 4 * 2 and c["late"] == 0 and c["dropped"] == 0,
          "two: contributions %s" % c)
    check(s["hash_checks"] > 0 and s["hash_mismatches"] == 0,
          "two: hash checks %d, mismatches %d" % (s["hash_checks"], s["hash_mismatches"]))


def test_catch_up(tmp):
    """outer.catch_up through the Python package: b, 4x slower, ends its rounds once a's
    contribution has arrived; the trainer loops `while not diloco.done`."""
    rounds, H = 6, 20
    run, _ = launch(tmp, "catchup", write_config(tmp, "catchup", 2, rounds, H),
                    extra=("--slow", "b=4", "--set", "outer.catch_up=true",
                           "--set", "inner.emulated_step_ms=10"))
    s = load(os.path.join(run, "summary.json"))
    a, b = anchors(run, "a"), anchors(run, "b")
    check(len(a) == rounds and a == b, "catchup: anchors differ or missing: %s %s" % (a, b))
    for name in "ab":
        site = s["sites"][name]
        check(site["status"] == "finished" and site["rounds_applied"] == rounds,
              "catchup: site %s %s" % (name, site))
        check(site["steps_trained"] + site["steps_skipped"] == rounds * H and
              site["tokens"] == site["steps_trained"] * 32,
              "catchup: site %s trained %d, skipped %d, tokens %d" %
              (name, site["steps_trained"], site["steps_skipped"], site["tokens"]))
    sb = s["sites"]["b"]
    print("catchup: b trained %d steps, skipped %d in %d rounds cut short" %
          (sb["steps_trained"], sb["steps_skipped"], sb["rounds_cut"]))
    check(sb["rounds_cut"] >= rounds // 2 and sb["steps_skipped"] > 0,
          "catchup: b cut %d rounds" % sb["rounds_cut"])


DETERMINISTIC = """run: {name: py-resume, rounds: 6, log_every: 5, seed: 5}
inner: {steps: 10}
outer: {overlap_steps: 2, late: drop, quorum: 1, deadline_min_ms: 60000, deadline_max_ms: 120000}
codec: {name: int8, block_size: 32}
wan: {transport: ucx, lanes: 2, connect_timeout_ms: 30000, peer_timeout_ms: 10000,
      emulation: {enabled: true, latency_ms: 5, jitter_ms: 0}}
membership: {lease_ttl_s: 3, heartbeat_ms: 500}
security: {mode: encrypted}
sites:
  - {name: a, address: "127.0.0.1:0"}
  - {name: b, address: "127.0.0.1:0"}
"""


def test_resume(tmp):
    # Deterministic (test_launch_resume's recipe): a fixed seed, no jitter, every round closed
    # with both sites (quorum 1, a long deadline), late contributions dropped.
    config = os.path.join(tmp, "resume.yaml")
    with open(config, "w") as f:
        f.write(DETERMINISTIC)
    straight, _ = launch(tmp, "resume-straight", config, trainer_args=["--save-every", "1"])
    cut, _ = launch(tmp, "resume-cut", config, ["--kill", "a@3", "--kill", "b@3"],
                    trainer_args=["--save-every", "1"], expect_rc=None)
    for name in "ab":
        ck = os.path.join(cut, name, "checkpoints")
        torch_files = sorted(f for f in os.listdir(ck) if f.startswith("torch-"))
        outer = sorted(os.listdir(os.path.join(ck, "outer")))
        print("site %s kept %s and %s" % (name, torch_files, outer))
        check(len(torch_files) == 2, "resume: site %s keeps %s" % (name, torch_files))
    cmd = [CLI, "launch", "--resume", cut, "--", *TRAINER, "--save-every", "1"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    print("---- %s (exit %d)\n%s" % (" ".join(cmd), p.returncode, p.stdout[-1500:]), flush=True)
    check(p.returncode == 0, "resume: launch --resume exited %d\n%s\n%s" %
          (p.returncode, p.stdout, p.stderr))
    for name in "ab":
        with open(os.path.join(cut, "logs", name + ".log")) as f:
            log = f.read()
        # saved at r*H + tau = 12 and 22; killed right after applying round 3, before its save
        check("resumed_step 22\n" in log,
              "resume: site %s did not resume at step 22:\n%s" % (name, log[-2000:]))
        a, b = anchors(straight, name), anchors(cut, name)
        check(len(a) == 6 and a == b, "resume: site %s anchors %s, uninterrupted %s" %
              (name, b, a))


def test_kill(tmp):
    rounds = 6
    run, _ = launch(tmp, "kill", write_config(tmp, "kill", 2, rounds, 20), ["--kill", "b@2"])
    s = load(os.path.join(run, "summary.json"))
    check(s["sites"]["a"].get("status") == "finished", "kill: a %s" % s["sites"]["a"])
    check(s["sites"]["b"].get("killed") is True, "kill: b %s" % s["sites"]["b"])
    a, b = anchors(run, "a"), anchors(run, "b")
    check(len(a) == rounds, "kill: a logged %d rounds" % len(a))
    # b dies right after applying its second round; the result of a chunk it aggregated for
    # that round may still have been queued for a when it died, and then a aggregates that chunk
    # again without b: the survivors agree (I1), b's last anchor may not. Every earlier one does.
    last = max(b) if b else -1
    check(len(b) >= 2 and all(a[r] == b[r] for r in b if r < last),
          "kill: b's anchors %s vs %s" % (b, a))


def test_join(tmp):
    rounds = 14
    run, _ = launch(tmp, "join", write_config(tmp, "join", 3, rounds, 20),
                    ["--join", "c@2", "--slow", "a=15", "--slow", "b=15", "--slow", "c=15"])
    s = load(os.path.join(run, "summary.json"))
    h = {x: anchors(run, x) for x in "abc"}
    sc = s["sites"]["c"]
    R = sc.get("joined_round", 0)
    print("c joined for round %d, trained %s steps (a: %s)" %
          (R, sc.get("steps_trained"), s["sites"]["a"].get("steps_trained")))
    for name in "abc":
        check(s["sites"][name].get("status") == "finished", "join: %s %s" % (name, s["sites"][name]))
    check(1 <= R < rounds, "join: c's first round %d" % R)
    check(len(h["a"]) == rounds and h["a"] == h["b"], "join: a and b anchors differ")
    check(len(h["c"]) >= rounds - R and all(h["a"].get(r) == v for r, v in h["c"].items()),
          "join: c's anchors %s, a's %s" % (h["c"], h["a"]))
    check(sc.get("rounds_applied") == rounds - R, "join: c applied %s" % sc.get("rounds_applied"))
    check(s["hash_mismatches"] == 0, "join: %d hash mismatches" % s["hash_mismatches"])
    c = s["contributions"]
    accounted = c["on_time"] + c["late"] + c["open_at_end"] + c["dropped"] + c["unreceived"]
    want = 6 * (2 * rounds + (rounds - R))  # 2 lanes x 3 chunks: a and b always, c from R on
    check(accounted == want and c["dropped"] <= 6, "join: contributions %s, want %d" % (c, want))


def test_errors(tmp):
    config = write_config(tmp, "errors", 2, 2, 5)
    env = dict(os.environ)
    for k in ("GT_CONFIG", "GT_SITE", "GT_SET", "GT_RUN_DIR"):
        env.pop(k, None)
    cases = [
        ("no config", [], "no configuration"),
        ("missing file", ["--config", os.path.join(tmp, "nope.yaml"), "--site", "a"], "nope.yaml"),
        ("unknown site", ["--config", config, "--site", "nowhere"],
         "'nowhere' is not a site of the config (its sites: a, b)"),
    ]
    for what, args, msg in cases:
        t0 = time.time()
        p = subprocess.run(TRAINER + args, capture_output=True, text=True, timeout=60, env=env)
        print("%s: exit %d in %.1f s: %s" % (what, p.returncode, time.time() - t0,
                                             p.stderr.strip().splitlines()[-1:]))
        check(p.returncode == 5 and "GeotrainError:" in p.stderr and msg in p.stderr,
              "%s: exit %d, stderr:\n%s" % (what, p.returncode, p.stderr))
    # One site's model has a parameter more: both sites refuse at start, saying so.
    run, took = launch(tmp, "mismatch", config, trainer_args=["--extra-param-site", "b"],
                       expect_rc=None, timeout=120)
    for name, mine, theirs in (("a", 577, 578), ("b", 578, 577)):
        with open(os.path.join(run, "logs", name + ".log")) as f:
            log = f.read()
        want = "site %s has %d parameters but site %s has %d" % (name, mine,
                                                                "b" if name == "a" else "a", theirs)
        check("GeotrainError:" in log and want in log, "mismatch: %s's log:\n%s" % (name, log))
    check(took < 60, "mismatch: took %.1f s" % took)


def main():
    tmp = tempfile.mkdtemp(prefix="gt-python-")
    only = os.environ.get("GT_PYTHON_ONLY")
    for name, fn in (("two_sites", test_two_sites), ("kill", test_kill), ("join", test_join),
                     ("catch_up", test_catch_up), ("resume", test_resume), ("errors", test_errors)):
        if not only or name in only:
            fn(tmp)
    if FAILURES:
        print("%d checks failed; run directories kept in %s" % (len(FAILURES), tmp))
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    print("python package tests passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
