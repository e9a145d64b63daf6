#!/usr/bin/python3
"""Where a step launch's added CPU goes, on the real 3-node test cluster (issue 34).

    bench/launch_profile.py [--old OLD/gpudiag.so] [--launches 25] [--tasks 48]

For each plugstack (none, gpudiag.so as built, --old) it runs `srun -N3 -nTASKS true` LAUNCHES
times under `perf record -a -g` (4999 Hz, every CPU), then again under `perf record -e
page-faults -c 1 -d` (every fault, with its address), and prints for slurmstepd, split into the
forked tasks (before their exec) and slurmstepd itself: samples by kind (page fault, exit_mmap,
fork, the rest), the samples under spank_setenv and under gpudiag.so, and the tasks' page faults
by the code that took them and the mapping they hit. A sample is 0.2 ms of one CPU.
Needs root and perf (linux-perf); gpudiag_yaml.so must sit beside each gpudiag.so.
bench/launch_cost.py is the wall-clock figure; this says why."""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from multinode_bench import MultiNodeBench  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HZ = 4999


def perf_samples(path):
    """(comm, tid, frames) per sample of a perf.data file."""
    out = subprocess.run(["perf", "script", "-i", path, "-F", "comm,tid,ip,sym,dso"], capture_output=True,
                         text=True).stdout
    for block in out.split("\n\n"):
        lines = [line for line in block.strip().split("\n") if line.strip()]
        if not lines:
            continue
        head = lines[0].split()
        yield head[0], int(head[1]), [line.strip() for line in lines[1:]]


def kind_of(text):
    for key, name in (("exc_page_fault", "page fault"), ("exit_mmap", "exit_mmap"), ("copy_process", "fork")):
        if key in text:
            return name
    return "the rest"


def cpu_profile(path):
    samples = list(perf_samples(path))
    tasks = {tid for comm, tid, _ in samples if comm == "true"}  # exec'd later: a forked task
    by = collections.Counter()
    for comm, tid, frames in samples:
        if comm != "slurmstepd":
            continue
        who = "tasks" if tid in tasks else "slurmstepd"
        text = "\n".join(frames)
        by[(who, kind_of(text))] += 1
        by[(who, "all")] += 1
        if "spank_setenv" in text:
            by[(who, "under spank_setenv")] += 1
        if "gpudiag" in text:
            by[(who, "under gpudiag.so")] += 1
    return by, len(tasks)


def fault_profile(path):
    """Page faults of the forked tasks by (mapping hit, code that took it)."""
    out = subprocess.run(["perf", "script", "-i", path, "-F", "comm,tid,addr,ip,sym,dso"], capture_output=True,
                         text=True).stdout
    lines = [line.split(None, 3) for line in out.splitlines()]
    tasks = {f[1] for f in lines if len(f) > 1 and f[0] == "true"}
    by = collections.Counter()
    for f in lines:
        if len(f) < 4 or f[0] != "slurmstepd" or f[1] not in tasks:
            continue
        maps = re.findall(r"\(([^)]*)\)", f[3])
        syms = re.findall(r"[0-9a-f]+ ([^ ]+) \(", f[3])
        by[(maps[0].split("/")[-1] if maps else "?", (syms[-1] if syms else "?")[:40])] += 1
    return by


def record(b, mode, argv, launches, out, events):
    b.use(mode)
    p = subprocess.Popen(["perf", "record", *events, "-a", "-o", out, "--", "sleep", "3600"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)
    for _ in range(launches):
        b.run(argv)
    p.send_signal(2)
    p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--old", help="another gpudiag.so to profile beside it")
    ap.add_argument("--launches", type=int, default=25)
    ap.add_argument("--tasks", type=int, default=48)
    a = ap.parse_args()
    out_dir = tempfile.mkdtemp(prefix="gpudiag-bench-profile-")
    argv = ["srun", "-N3", f"-n{a.tasks}", "true"]
    with MultiNodeBench(a.build, "profile") as b:
        cfg = b.config("gpudiag").split("config=")[1].strip()
        modes = {"none": None, "gpudiag": f"required {b.plugin} config={cfg}\n"}
        if a.old:
            modes["old gpudiag"] = f"required {os.path.abspath(a.old)} config={cfg}\n"
        time.sleep(2.1)  # root caches a config only once it is 2 s old
        for mode in modes.values():
            b.use(mode)
            for _ in range(3):
                b.run(argv)
        for name, mode in modes.items():
            slug = name.replace(" ", "_")
            record(b, mode, argv, a.launches, f"{out_dir}/{slug}.cpu", ["-g", "-F", str(HZ)])
            record(b, mode, argv, a.launches, f"{out_dir}/{slug}.faults", ["-e", "page-faults", "-c", "1", "-d"])
    cpu = {n: cpu_profile(f"{out_dir}/{n.replace(' ', '_')}.cpu") for n in modes}
    faults = {n: fault_profile(f"{out_dir}/{n.replace(' ', '_')}.faults") for n in modes}
    per = a.launches * a.tasks
    print(f"slurmstepd's CPU, srun -N3 -n{a.tasks} true x {a.launches} under perf (us per task, from samples "
          f"at {HZ} Hz):")
    rows = [(who, k) for who in ("tasks", "slurmstepd")
            for k in ("all", "page fault", "exit_mmap", "fork", "the rest", "under spank_setenv", "under gpudiag.so")]
    print(f"  {'':34s}" + "".join(f"{n:>14s}" for n in modes))
    for who, k in rows:
        print(f"  {who + ': ' + k:34s}" + "".join(f"{cpu[n][0][(who, k)] / HZ * 1e6 / per:14.1f}" for n in modes))
    print(f"\npage faults per task before its exec (of {per} tasks), the mappings and code that add most:")
    base = faults["none"]
    totals = {n: sum(f.values()) / per for n, f in faults.items()}
    print("  all: " + ", ".join(f"{n} {t:.1f}" for n, t in totals.items()))
    for n in modes:
        if n == "none":
            continue
        diff = {k: faults[n][k] - base[k] for k in set(faults[n]) | set(base)}
        print(f"  {n} against none:")
        for (where, code), v in sorted(diff.items(), key=lambda kv: -kv[1])[:10]:
            print(f"    {v / per:+6.2f}  {where:28s} {code}")
    print(f"\nperf data kept in {out_dir}")


if __name__ == "__main__":
    sys.exit(main())
