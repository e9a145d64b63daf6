#!/usr/bin/python3
"""Long fuzz runs: every target in build-fuzz/ (scripts/fuzz --build-only) for a fixed
number of executions, on its accumulated corpus plus the fixture seeds, under the same
ASan + UBSan build the short CI runs use. Prints, per target: executions, wall time,
executions per second, coverage, corpus size, and crashes (inputs saved in
build-fuzz/fuzz-artifacts/long/). The figures go in docs/BENCHMARKS.md.

Usage: bench/fuzz_long.py [--runs 10000000] [--jobs 2] [--max-len 2048] [--time-cap S]
                          [--build build-fuzz] [--json out.json] [target ...]
--time-cap stops a target after S seconds; the table then says it fell short.
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TARGETS = ["pci_config", "proc_stat", "ib_attrs", "sysfs_numbers", "diag_list", "scontrol_node", "plugin_args",
           "cmdline", "line_prefixer", "probe_json", "config", "nccl_log"]


def run(build, target, runs, max_len, time_cap):
    corpus = os.path.join(build, "fuzz-corpus", target)
    seeds = os.path.join(build, "fuzz-seeds", target)
    artifacts = os.path.join(build, "fuzz-artifacts", "long")
    os.makedirs(corpus, exist_ok=True)
    os.makedirs(artifacts, exist_ok=True)
    cmd = [os.path.join(build, "fuzz", "fuzz_" + target), f"-runs={runs}", f"-max_len={max_len}", "-timeout=10",
           "-rss_limit_mb=2048", "-print_final_stats=1", f"-artifact_prefix={artifacts}/{target}-"]
    if time_cap:
        cmd.append(f"-max_total_time={time_cap}")
    d = os.path.join(ROOT, "fuzz", "dict", target + ".dict")
    if os.path.exists(d):
        cmd.append("-dict=" + d)
    cmd += [corpus, seeds]
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1", UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    start = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace", env=env)
    wall = time.monotonic() - start
    err = p.stderr

    def stat(name):
        m = re.search(rf"stat::{name}:\s*(\d+)", err)
        return int(m.group(1)) if m else None

    cov = re.findall(r"cov: (\d+) ft: (\d+) corp: (\d+)", err)
    crashes = len([f for f in os.listdir(artifacts) if f.startswith(target + "-")])
    out = {"target": target, "execs": stat("number_of_executed_units"), "wall_s": round(wall, 1),
           "exec_per_s": stat("average_exec_per_sec"), "peak_rss_mb": stat("peak_rss_mb"),
           "coverage": int(cov[-1][0]) if cov else None, "features": int(cov[-1][1]) if cov else None,
           "corpus": len(os.listdir(corpus)), "exit": p.returncode, "crashes": crashes}
    if p.returncode != 0:
        out["error"] = "\n".join(l for l in err.splitlines() if "ERROR" in l or "SUMMARY" in l or "violated" in l)[:2000]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10_000_000)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--max-len", type=int, default=2048)
    ap.add_argument("--time-cap", type=int, default=0)
    ap.add_argument("--build", default=os.path.join(ROOT, "build-fuzz"))
    ap.add_argument("--json")
    ap.add_argument("targets", nargs="*")
    a = ap.parse_args()
    targets = a.targets or TARGETS
    results = []
    print(f"{'target':15} {'execs':>12} {'wall s':>8} {'exec/s':>8} {'cov':>6} {'corpus':>7} {'rss MB':>7} crashes", flush=True)
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        for r in pool.map(lambda t: run(a.build, t, a.runs, a.max_len, a.time_cap), targets):
            results.append(r)
            short = "" if (r["execs"] or 0) >= a.runs else f"  (short of {a.runs:,})"
            print(f"{r['target']:15} {r['execs'] or 0:>12,} {r['wall_s']:>8} {r['exec_per_s'] or 0:>8,} "
                  f"{r['coverage'] or 0:>6} {r['corpus']:>7} {r['peak_rss_mb'] or 0:>7} {r['crashes']}{short}", flush=True)
            if r.get("error"):
                print("   " + r["error"].replace("\n", "\n   "), flush=True)
            if a.json:
                with open(a.json, "w") as f:
                    json.dump(results, f, indent=1)
    return 1 if any(r["crashes"] or r["exit"] for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
