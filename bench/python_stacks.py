#!/usr/bin/python3
"""How long reading a Python process's stacks pauses it, and how long the reading takes:
gpudiag's reader (stacks/pyframes/, process_vm_readv) against eu-stack (ptrace, which
stops every thread while it unwinds), on 6 busy CPython processes.

Usage: bench/python_stacks.py [--build build] [--seconds 2] [--rounds 3]

Each target runs a Python loop on its main thread that sleeps 1 ms per turn (busy targets
would only measure the 2 cores' contention) and records every gap between two turns
longer than 5 ms, with its CLOCK_MONOTONIC time; three more threads sit in
time.sleep, Event.wait and a nested function. The script then runs windows of equal
length, interleaved: reading all 6 targets with gpudiag's reader, then 50 ms of rest, over
and over; doing nothing; and (when elfutils is installed) `eu-stack -p` on each target in
turn, then 50 ms of rest. A pause
caused by the reader shows as gaps inside its windows beyond those of the idle ones (the
machine's own noise). The driver that calls read_python_stacks is compiled by this
script against the build's libgpudiag_pyframes.a.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PYTHON = "/usr/bin/python3"

TARGET = r'''
import json, sys, threading, time
def sleeper(): time.sleep(3600)
def waiter(): threading.Event().wait()
def nested(n):
    if n: return nested(n - 1)
    time.sleep(3600)
for f, a in ((sleeper, ()), (waiter, ()), (nested, (20,))):
    threading.Thread(target=f, args=a, daemon=True).start()
end = time.monotonic() + float(sys.argv[1])
gaps, last, n = [], time.monotonic(), 0
print("ready", flush=True)
while last < end:
    now = time.monotonic()
    if now - last > 0.005: gaps.append((last, now - last))
    last = now
    n += 1
    time.sleep(0.001)
print(json.dumps({"iterations": n, "gaps": gaps}), flush=True)
'''

DRIVER = r'''
#include "stacks/pyframes/python_stacks.h"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>
int main(int argc, char** argv) {
  using C = std::chrono::steady_clock;
  double seconds = atof(argv[1]);
  std::vector<int> pids;
  for (int i = 2; i < argc; ++i) pids.push_back(atoi(argv[i]));
  auto mono = [] { return std::chrono::duration<double>(C::now().time_since_epoch()).count(); };
  double start = mono(), end = start + seconds;
  std::printf("{\"start\": %.6f, \"reads\": [", start);
  bool first = true;
  int bad = 0;
  while (mono() < end) {
    double t0 = mono();
    for (int pid : pids) {
      double a = mono();
      auto s = gpudiag::read_python_stacks(pid, std::chrono::milliseconds(2000));
      double b = mono();
      if (!s.why_none.empty() || s.threads.size() != 4) ++bad;
      std::printf("%s%.1f", first ? "" : ", ", (b - a) * 1e6);
      first = false;
    }
    std::printf(", -%.1f", (mono() - t0) * 1e6);  // negative: one round over all targets
    // Paced: reading back to back would only measure the 2 cores' contention.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::printf("], \"end\": %.6f, \"bad\": %d}\n", mono(), bad);
}
'''


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--seconds", type=float, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    lib = os.path.join(a.build, "stacks/pyframes/libgpudiag_pyframes.a")
    if not os.path.exists(lib):
        sys.exit(f"bench: build {lib} first (scripts/build build --target gpudiag_pyframes)")
    tmp = tempfile.mkdtemp(prefix="gpudiag-bench-pyframes-")
    try:
        src, drv, tgt = (os.path.join(tmp, n) for n in ("driver.cpp", "driver", "target.py"))
        open(src, "w").write(DRIVER)
        open(tgt, "w").write(TARGET)
        subprocess.run(["g++", "-std=c++20", "-O2", "-I", ROOT, src, lib, "-o", drv], check=True)
        eu = shutil.which("eu-stack")
        kinds = ["gpudiag", "idle"] + (["eu-stack"] if eu else [])
        total = a.rounds * len(kinds) * (a.seconds + 0.3) + 3
        procs = [subprocess.Popen([PYTHON, tgt, str(total)], stdout=subprocess.PIPE, text=True) for _ in range(6)]
        for p in procs:
            p.stdout.readline()
        pids = [str(p.pid) for p in procs]
        time.sleep(0.5)
        windows, per_read, per_round, bad = [], [], [], 0
        for _ in range(a.rounds):
            for kind in kinds:
                if kind == "gpudiag":
                    out = json.loads(subprocess.run([drv, str(a.seconds)] + pids, capture_output=True, text=True,
                                                    check=True).stdout)
                    per_read += [x for x in out["reads"] if x >= 0]
                    per_round += [-x for x in out["reads"] if x < 0]
                    bad += out["bad"]
                    windows.append((kind, out["start"], out["end"]))
                elif kind == "idle":
                    s = time.monotonic()
                    time.sleep(a.seconds)
                    windows.append((kind, s, time.monotonic()))
                else:
                    s = time.monotonic()
                    while time.monotonic() - s < a.seconds:
                        for pid in pids:
                            subprocess.run([eu, "-p", pid], capture_output=True, timeout=30)
                        time.sleep(0.05)
                    windows.append((kind, s, time.monotonic()))
                time.sleep(0.3)
        results = [json.loads(p.stdout.readline()) for p in procs]
        for p in procs:
            p.wait()
        print(f"6 CPython {sys.version.split()[0]} targets, {a.rounds} rounds of {a.seconds:g} s windows per kind")
        print(f"gpudiag reader: {len(per_read)} reads, {bad} without all 4 threads; per process: median "
              f"{statistics.median(per_read):.0f} us, p99 {pct(per_read, 99):.0f} us; all 6 processes: median "
              f"{statistics.median(per_round) / 1000:.2f} ms, p99 {pct(per_round, 99) / 1000:.2f} ms")
        print("| window | length (s, all) | target gaps > 5 ms (count) | longest gap (ms) | time lost in gaps (ms per target-second) |")
        print("|---|---|---|---|---|")
        for kind in kinds:
            ws = [(s, e) for k, s, e in windows if k == kind]
            length = sum(e - s for s, e in ws)
            gaps = [g for r in results for (t, g) in r["gaps"] if any(s <= t < e for s, e in ws)]
            longest = max(gaps) * 1000 if gaps else 0
            lost = sum(gaps) * 1000 / (length * 6) if length else 0
            print(f"| {kind} | {length:.1f} | {len(gaps)} | {longest:.2f} | {lost:.2f} |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
