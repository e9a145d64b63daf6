#!/usr/bin/python3
"""Step launch and output relay across nodes, with and without gpudiag.so, on the
multi-node test cluster (tests/e2e/multinode_cluster.py: 3 slurmd nodes and a login
node, each in its own namespaces, talking over a bridge; all on this machine's cores).

Usage: bench/multinode_launch.py [--build build] [--launches 20] [--lines 200000] [--runs 3] [--ntasks 12]

Launch: wall time of `srun -N3 -nNTASKS true` run on the login node, median of --launches,
three ways interleaved launch by launch:
  none       empty plugstack
  no relay   gpudiag.so with `plugin.prefix: never`: loading, config, env, no relay process
  gpudiag    gpudiag.so as shipped (etc/gpudiag.yaml): the relay forks once per task
and the same for one node's share (`srun -N1 -n NTASKS/3`): on a real cluster each node
does its share on its own cores at the same time, here three nodes share this machine's.
Also: what one fork costs on this machine (fork + _exit + waitpid of a small process),
since the relay is one more process per task.
Relay: `srun -N3 -n6`, each task writing --lines numbered lines; srun's stdout on the
login node is read and counted here. Plugin and none interleaved run by run, median of
--runs. CPU is the whole machine's (every node shares it).
"""
import argparse
import os
import statistics
import time

from multinode_bench import ROOT, MultiNodeBench, median_ms
from plugin_relay import WRITER


def fork_cost_ms(n=200):
    """fork + _exit + waitpid of this small process, median of n."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--launches", type=int, default=20)
    ap.add_argument("--lines", type=int, default=200000, help="lines per task (6 tasks on 3 nodes)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--ntasks", type=int, default=12, help="tasks of the launched step (on 3 nodes)")
    a = ap.parse_args()
    py = "/usr/bin/python3"
    per_node = max(1, a.ntasks // 3)
    with MultiNodeBench(a.build, "multinode") as b:
        full = b.config("gpudiag")
        norelay = b.config("norelay", [("\n  prefix: auto", "\n  prefix: never")])
        step = ["srun", "-N3", f"-n{a.ntasks}", "true"]
        one = ["srun", "-N1", f"-n{per_node}", "true"]
        launch = b.interleave({"none": (None, step), "no relay": (norelay, step), "gpudiag": (full, step),
                               "1 node none": (None, one), "1 node gpudiag": (full, one)}, a.launches)
        relay = b.interleave({m: (mode, ["srun", "-N3", "-n6", py, "-c", WRITER, str(a.lines)])
                              for m, mode in (("plugin", full), ("none", None))}, a.runs, warmup=0)
    fork_ms = fork_cost_ms()

    def show(title, names, base):
        print(title)
        b_ms = median_ms(launch[base])
        cpu_base = median_ms(launch[base], 1)
        for m in names:
            walls = [r[0] * 1000 for r in launch[m]]
            w, cpu = median_ms(launch[m]), median_ms(launch[m], 1)
            print(f"  {m:15} {w:5.0f} ms  {100 * (w / b_ms - 1):+6.1f} % ({w - b_ms:+4.0f} ms)  "
                  f"min/max {min(walls):.0f}/{max(walls):.0f} ms  CPU {cpu:.0f} ms ({cpu - cpu_base:+.0f})")

    show(f"step launch (srun -N3 -n{a.ntasks} true from the login node), median of {a.launches} interleaved:",
         ("none", "no relay", "gpudiag"), "none")
    show(f"one node's share (srun -N1 -n{per_node} true), same rounds:", ("1 node none", "1 node gpudiag"),
         "1 node none")
    print(f"one fork + exit + wait on this machine (a small process, median of 200): {fork_ms:.2f} ms")
    lines = 6 * a.lines
    print(f"relay across nodes (srun -N3 -n6, {a.lines} lines per task), median of {a.runs} interleaved runs:")
    med = {}
    for m, rows in relay.items():
        wall = statistics.median(r[0] for r in rows)
        cpu = statistics.median(r[1] for r in rows)
        out = statistics.median(r[2] for r in rows)
        med[m] = wall
        print(f"  {m:6} {wall:6.2f} s  {lines / wall / 1e6:5.2f} Mlines/s  {out / wall / 1e6:6.1f} MB/s  CPU {cpu:.2f} s")
    print(f"  plugin throughput = {100 * med['none'] / med['plugin']:.0f} % of plain srun")


if __name__ == "__main__":
    main()
