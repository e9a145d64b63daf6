#!/usr/bin/python3
"""What the preflight's cross-node barrier costs a step, on the multi-node test cluster
(tests/e2e/multinode_cluster.py: 3 slurmd nodes and a login node in namespaces).

Usage: bench/preflight_barrier.py [--build build] [--launches 20] [--ntasks 12]

Wall time of `srun -N3 -nNTASKS --diag=preflight true` from the login node, three ways
interleaved launch by launch, median of --launches each:
  barrier     the preflight with its barrier (srun holds every task until all passed);
  no barrier  the same preflight, srun started under `prlimit --nofile=200`, below the
              barrier's need (one connection per task + 256), so srun runs it without
              the barrier (and says so on stderr);
  nopreflight --diag=nopreflight, for scale.
"""
import argparse
import os

from multinode_bench import ROOT, MultiNodeBench, median_ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--launches", type=int, default=20)
    ap.add_argument("--ntasks", type=int, default=12, help="tasks of the launched step (on 3 nodes)")
    a = ap.parse_args()
    step = ["-N3", f"-n{a.ntasks}"]
    with MultiNodeBench(a.build, "barrier") as b:
        # Tasks here run without RLIMIT_MEMLOCK raised (as in test_multinode_plugin.py).
        mode = b.config("gpudiag", [("    memlock: true ", "    memlock: false ")])
        rows = b.interleave({
            "barrier": (mode, ["srun", *step, "--diag=preflight", "true"]),
            "no barrier": (mode, ["prlimit", "--nofile=200:200", "srun", *step, "--diag=preflight", "true"]),
            "nopreflight": (mode, ["srun", *step, "--diag=nopreflight", "true"]),
        }, a.launches)
    print(f"srun -N3 -n{a.ntasks} true from the login node, median of {a.launches} interleaved launches:")
    base = median_ms(rows["no barrier"])
    for w, r in rows.items():
        walls = [x[0] * 1000 for x in r]
        m = median_ms(r)
        print(f"  {w:12} {m:6.0f} ms  (min/max {min(walls):.0f}/{max(walls):.0f} ms)  {m - base:+.0f} ms vs no barrier")


if __name__ == "__main__":
    main()
