#!/usr/bin/python3
"""Where in a step launch gpudiag's time lands, on the real 3-node test cluster (issue 34).

    bench/launch_timeline.py [NAME=PATH/gpudiag.so[@VARIANT] ...] [--launches 40] [--tasks 48]

Each launch of `srun -N3 -nTASKS true` runs under `perf record -a` of the kernel's process
events (fork, exec, exit: no sampling, so it barely slows the launch), with no plugin and
with each named gpudiag.so (by default the build's, as "gpudiag"; @VARIANT as in
launch_ab.py), interleaved launch by launch. From the events it
takes, per node, when the step's slurmstepd was exec'd, when it forked its first and last
task, when the first and last task exec'd the program and when the last exited, and when
slurmstepd itself exited; then when srun exited. Printed: the medians over the launches of
each mark (the mean of the three nodes, in ms after srun's exec) and what the plugin adds.

bench/launch_cost.py says whether the goal is met and launch_ab.py what each build costs in
CPU; this says on which stretch the wall time grows: slurmstepd's start (plugin load, init,
user_init), its fork loop (a larger slurmstepd forks dearer), the tasks between the last
fork and their exec (all of them share the cores then, so the first exec waits for most of
their work), or the end. Needs root and perf (linux-perf)."""
import argparse
import collections
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from multinode_bench import MultiNodeBench  # noqa: E402

EVENTS = "sched:sched_process_exec,sched:sched_process_fork,sched:sched_process_exit"
MARKS = ("stepd exec", "first fork", "last fork", "first exec", "last exec", "last exit", "stepd exit")
LINE = re.compile(r"\s*(.+?)\s+(\d+)\s+([\d.]+):\s+\S*(sched_process_\w+):\s*(.*)")


def events(path):
    """(time s, comm, pid, kind, detail) of each process event perf recorded."""
    out = subprocess.run(["perf", "script", "-i", path, "-F", "comm,pid,time,event,trace"], capture_output=True,
                         text=True, check=True).stdout
    return [(float(m[3]), m[1].strip(), int(m[2]), m[4], m[5]) for m in map(LINE.match, out.splitlines()) if m]


def marks(ev):
    """The launch's marks (MARKS, per node, averaged over the nodes; and "srun exit"), in ms
    after srun's exec; None if the events do not hold a whole launch."""
    execs = {pid: t for t, _, pid, kind, _ in ev if kind == "sched_process_exec"}
    srun = [t for t, _, _, kind, detail in ev if kind == "sched_process_exec" and detail.startswith("filename=") and
            detail.split()[0].endswith("/srun")]
    programs = {pid for t, _, pid, kind, detail in ev if kind == "sched_process_exec" and "/true " in detail + " "}
    exits = {pid: t for t, _, pid, kind, _ in ev if kind == "sched_process_exit"}
    tasks = collections.defaultdict(list)  # slurmstepd pid -> [(fork time, task pid)]
    for t, _, _, kind, detail in ev:
        m = re.search(r"pid=(\d+) child_comm=\S+ child_pid=(\d+)", detail) if kind == "sched_process_fork" else None
        if m and int(m[2]) in programs:
            tasks[int(m[1])].append((t, int(m[2])))
    nodes = []
    for stepd, kids in tasks.items():
        if stepd not in execs or stepd not in exits:
            continue
        forks = [t for t, _ in kids]
        runs = [execs[pid] for _, pid in kids if pid in execs]
        ends = [exits[pid] for _, pid in kids if pid in exits]
        if not runs or not ends:
            continue
        nodes.append(dict(zip(MARKS, (execs[stepd], min(forks), max(forks), min(runs), max(runs), max(ends),
                                      exits[stepd]))))
    srun_exit = [t for t, comm, _, kind, _ in ev if kind == "sched_process_exit" and comm == "srun"]
    if not srun or not nodes or not srun_exit:
        return None
    t0 = min(srun)
    out = {k: (statistics.mean(n[k] for n in nodes) - t0) * 1000 for k in MARKS}
    out["srun exit"] = (max(srun_exit) - t0) * 1000
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build"))
    ap.add_argument("plugins", nargs="*", help="NAME=PATH/gpudiag.so[@VARIANT] (default: gpudiag=the build's)")
    ap.add_argument("--launches", type=int, default=40)
    ap.add_argument("--tasks", type=int, default=48)
    a = ap.parse_args()
    argv = ["srun", "-N3", f"-n{a.tasks}", "true"]
    got = collections.defaultdict(lambda: collections.defaultdict(list))
    with MultiNodeBench(a.build, "timeline") as b, tempfile.TemporaryDirectory() as tmp:
        try:
            modes = {"none": None, **b.modes(a.plugins or [f"gpudiag={b.plugin}"])}
        except ValueError as e:
            ap.error(str(e))
        time.sleep(2.1)  # root caches a config only once it is 2 s old
        for mode in modes.values():  # first launches load plugins and page in binaries
            b.use(mode)
            for _ in range(2):
                b.run(argv)
        data = os.path.join(tmp, "events.data")
        for _ in range(a.launches):
            for name, mode in modes.items():
                b.use(mode)
                perf = subprocess.Popen(["perf", "record", "-q", "-a", "-e", EVENTS, "-o", data, "--", "sleep", "60"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(0.5)  # perf is recording
                b.run(argv)
                perf.send_signal(2)
                perf.wait()
                m = marks(events(data))
                for k, v in (m or {}).items():
                    got[name][k].append(v)
    print(f"srun -N3 -n{a.tasks} true, {a.launches} interleaved launches; ms after srun's exec, medians "
          f"(per node: the mean of the three):")
    print(f"  {'mark':18}" + "".join(f"{n:>14}" for n in modes) + "".join(f"{'added ' + n:>20}" for n in modes if n != "none"))
    for k in (*MARKS, "srun exit"):
        med = {n: statistics.median(got[n][k]) for n in modes}
        label = ("node " if k in MARKS else "") + k
        print(f"  {label:18}" + "".join(f"{med[n]:14.1f}" for n in modes) +
              "".join(f"{med[n] - med['none']:+20.1f}" for n in modes if n != "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
