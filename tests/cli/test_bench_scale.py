#!/usr/bin/env python3
"""test_bench_scale.py — `geotrain bench outer --params N` (cli/bench_scale.c) end to end.

Two site processes of one rank each, 8M parameters, real etcd and encrypted UCX on loopback.
Checks that every output line is strict JSON (no NaN), that both sites finished, and the
figures: the library's own count of its host memory per parameter (summary.json
outer_state_bytes_per_param) is below 52 B (57 before the Δ vector, the spare decoded result
and the DELTA frames of applied rounds went: issue 35) and above the 16 B of θ_a, m, the
snapshot and the residual; the peak RSS the sites added agrees with it within 12 B/param; the
training thread's submit and apply seconds are positive and finite; the outer step made 2 passes
a round; and each site's summary.json carries the same count.
"""
import json
import os
import subprocess
import sys
import tempfile


def strict(text):
    def no_constant(c):
        raise ValueError("not JSON: " + c)
    return json.loads(text, parse_constant=no_constant)


def main():
    cli = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="bench-scale-")
    run = os.path.join(tmp, "run")
    p = subprocess.run([cli, "bench", "outer", "--params", "8M", "--rounds", "4",
                        "--inner-steps", "10", "--overlap", "3", "--step-ms", "20", "--lanes", "4",
                        "--run-dir", run, "--json"], capture_output=True, text=True, timeout=240)
    sys.stderr.write(p.stderr[-4000:])
    fails = []

    def check(cond, what):
        if not cond:
            fails.append(what)

    check(p.returncode == 0, "exit status %d" % p.returncode)
    rows = [strict(line) for line in p.stdout.splitlines() if line.strip()]
    scale = [r for r in rows if r.get("mode") == "scale"]
    check(len(scale) == 1, "one scale row, got %d" % len(scale))
    if scale:
        r = scale[0]
        print(json.dumps(r))
        check(r["params"] == 8000000 and r["ranks"] == 1, "params/ranks %s" % r)
        check(r["sites_ok"] == 2, "sites_ok %s" % r["sites_ok"])
        lib, rss = r["lib_bytes_per_param"], r["rss_bytes_per_param"]
        check(lib is not None and 16 <= lib < 52, "library bytes/param %s not in [16, 52)" % lib)
        check(rss is not None and lib is not None and abs(rss - lib) < 12,
              "peak RSS added %s B/param vs the library's count %s" % (rss, lib))
        for k in ("submit_s", "apply_s", "memcpy_s", "exchange_s", "link_s"):
            check(r[k] is not None and r[k] > 0, "%s = %s" % (k, r[k]))
        check(r["passes"] == 2, "passes %s" % r["passes"])
        for site in ("a", "b"):
            path = os.path.join(run, "n8000000-r1", site, "summary.json")
            try:
                with open(path) as f:
                    s = strict(f.read())
            except (OSError, ValueError) as e:
                fails.append("%s: %s" % (path, e))
                continue
            for k in ("outer_state_bytes_per_param", "outer_state_bytes_peak",
                      "submit_s_per_round", "apply_s_per_round", "submit_s_median",
                      "apply_s_median", "submit_s_max", "apply_s_max"):
                check(isinstance(s.get(k), (int, float)) and s[k] > 0,
                      "%s: %s = %s" % (path, k, s.get(k)))
            check(abs(s["outer_state_bytes_peak"] - s["outer_state_bytes_per_param"] * 8e6) < 8,
                  "%s: peak bytes and bytes per param disagree" % path)
    for f in fails:
        print("FAIL:", f)
    if not fails:
        subprocess.run(["rm", "-rf", tmp])
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
