#!/usr/bin/python3
"""Side by side: what each gpudiag.so adds to a step launch, in the machine's CPU (issue 34).

    bench/launch_ab.py NAME=PATH/gpudiag.so[@VARIANT] [NAME=PATH ...] [--tasks 48] [--rounds 150] [--counts] [--floor]

On the 3-node test cluster, `srun -N3 -nTASKS true` with no plugin and with each named
gpudiag.so (with etc/gpudiag.yaml, or a variant of it: @norelay, @noib or @notorchrun, multinode_bench.VARIANTS),
interleaved launch by launch in a new random
order each round. Prints per plugstack the median wall time and the whole machine's CPU
(srun, slurmctld, slurmd, slurmstepd, the tasks: /proc/stat, in 10 ms ticks) as a mean with
the top and bottom tenth cut (a launch that hangs in a retry would move a plain mean by tens
of ms), each against no plugin, and a 95 % interval for the CPU difference from no plugin
(two standard errors). With --counts each launch runs under `perf stat -a` (linux-perf), and
the medians of the machine's page faults and context switches per launch are printed: counts,
not times, which barely move between runs; perf's own work then inflates the times (about
+40 ms of CPU per launch), so compare those only with other --counts runs. bench/launch_cost.py says whether the goal
is met; this is for telling two builds apart, which its medians of wall time cannot do: on the
2-core VM they move by 3 to 6 ms between runs. gpudiag_yaml.so must sit beside each gpudiag.so.
--floor adds the env floor: bench/env_floor_spank.c setting, in each task, the variables the
first build gave task 0 of the same step, and nothing else (what any plugin pays Slurm for them)."""
import argparse
import math
import os
import shutil
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from multinode_bench import ROOT, MultiNodeBench, build_env_floor  # noqa: E402


def trimmed(values, cut=0.1):
    values = sorted(values)
    k = int(len(values) * cut)
    return values[k:len(values) - k]


COUNTS = ("page-faults", "context-switches")


def counted(argv, out):
    """argv under `perf stat -a`, each run's counts appended to `out`."""
    return ["perf", "stat", "-a", "-x,", "-o", out, "--append", "-e", ",".join(COUNTS), "--", *argv]


def read_counts(path):
    """Each run's counts from a file `perf stat --append` wrote, in run order."""
    runs, run = [], {}
    with open(path) as f:
        for line in f:
            if line.startswith("# started"):
                if run:
                    runs.append(run)
                run = {}
                continue
            fields = line.strip().split(",")
            if len(fields) > 2 and fields[2] in COUNTS and fields[0].isdigit():
                run[fields[2]] = int(fields[0])
    if run:
        runs.append(run)
    return runs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("plugins", nargs="+", help="NAME=PATH/gpudiag.so[@VARIANT]")
    ap.add_argument("--tasks", type=int, default=48)
    ap.add_argument("--rounds", type=int, default=150)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--counts", action="store_true", help="page faults and context switches, by perf stat -a")
    ap.add_argument("--floor", action="store_true",
                    help="also the env floor (bench/env_floor_spank.c) with the variables the first build gives a task")
    a = ap.parse_args()
    step = ["srun", "-N3", f"-n{a.tasks}", "true"]
    perf = a.counts
    if perf and not shutil.which("perf"):
        ap.error("--counts needs perf (apt-get install linux-perf)")
    with MultiNodeBench(a.build, "ab") as b:
        try:
            modes = {"none": None, **b.modes(a.plugins)}
        except ValueError as e:
            ap.error(str(e))
        if a.floor:
            first = modes[a.plugins[0].partition("=")[0]]
            modes["env floor"], count = b.env_floor(build_env_floor(b.dir), first, step[:-1])
            print(f"env floor: the {count} variables {a.plugins[0].partition('=')[0]} gives task 0, set by a plugin "
                  "that does nothing else")
        stats = {name: os.path.join(b.dir, f"{i}.stat") for i, name in enumerate(modes)}
        ways = {name: (mode, counted(step, stats[name]) if perf else step) for name, mode in modes.items()}
        time.sleep(2.1)  # root caches a config only once it is 2 s old
        with open("/proc/loadavg") as f:
            load = f.read().split()[:3]
        rows = b.interleave(ways, a.rounds, warmup=3, shuffle=True)
        # The warm-up launches come first in each file.
        counts = {name: read_counts(path)[-a.rounds:] for name, path in stats.items()} if perf else {}
    base_wall = statistics.median(r[0] for r in rows["none"])
    base = trimmed([r[1] for r in rows["none"]])
    print(f"srun -N3 -n{a.tasks} true, {a.rounds} interleaved rounds (load before: {' '.join(load)}):")
    print(f"  {'plugstack':12} {'wall':>9} {'added':>8}   {'CPU':>9} {'added':>8} {'95 % interval':>16}")
    for name, got in rows.items():
        wall = statistics.median(r[0] for r in got)
        cpu = trimmed([r[1] for r in got])
        diff = statistics.mean(cpu) - statistics.mean(base)
        se = math.sqrt(statistics.variance(cpu) / len(cpu) + statistics.variance(base) / len(base))
        print(f"  {name:12} {wall * 1e3:6.1f} ms {(wall - base_wall) * 1e3:+6.1f}   {statistics.mean(cpu) * 1e3:6.1f} ms "
              f"{diff * 1e3:+6.1f}   {(diff - 2 * se) * 1e3:+6.1f} to {(diff + 2 * se) * 1e3:+5.1f}")
    if counts:
        print("  the machine's counts per launch (perf stat -a), medians:")
        base_counts = {k: statistics.median(r.get(k, 0) for r in counts["none"]) for k in COUNTS}
        for name, got in counts.items():
            med = {k: statistics.median(r.get(k, 0) for r in got) for k in COUNTS}
            print(f"  {name:12} " + "   ".join(f"{k} {med[k]:7.0f} ({med[k] - base_counts[k]:+6.0f})" for k in COUNTS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
