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
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
sys.path.insert(0, HERE)
from multinode_cluster import MultiNodeCluster  # noqa: E402
from plugin_relay import timed  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--launches", type=int, default=20)
    ap.add_argument("--ntasks", type=int, default=12, help="tasks of the launched step (on 3 nodes)")
    a = ap.parse_args()
    plugin = os.path.abspath(os.path.join(a.build, "spank", "gpudiag.so"))
    if not os.path.exists(plugin):
        sys.exit(f"bench: {plugin} not found: build first (./scripts/build)")
    tmp = tempfile.mkdtemp(prefix="gpudiag-bench-barrier-")
    os.chmod(tmp, 0o755)
    config = os.path.join(tmp, "gpudiag.yaml")
    with open(os.path.join(ROOT, "etc", "gpudiag.yaml")) as f:
        # Tasks here run without RLIMIT_MEMLOCK raised (as in test_multinode_plugin.py).
        text = f.read().replace("    memlock: true ", "    memlock: false ")
    with open(config, "w") as f:
        f.write(text)
    plugstack = os.path.join(tmp, "plugstack.conf")
    with open(plugstack, "w") as f:
        f.write(f"required {plugin} config={config}\n")
    step = ["-N3", f"-n{a.ntasks}"]
    ways = {
        "barrier": ["srun", *step, "--diag=preflight", "true"],
        "no barrier": ["prlimit", "--nofile=200:200", "srun", *step, "--diag=preflight", "true"],
        "nopreflight": ["srun", *step, "--diag=nopreflight", "true"],
    }
    wall = {w: [] for w in ways}
    try:
        with MultiNodeCluster(nodes=3, extra_conf=[f"PlugStackConfig={plugstack}"]) as c:
            on_login = lambda argv: c.enter(c.login, argv, cwd=tmp)  # noqa: E731
            for _ in range(2):  # warm-up
                for argv in ways.values():
                    timed(c, on_login(argv))
            for _ in range(a.launches):
                for w, argv in ways.items():
                    wall[w].append(timed(c, on_login(argv))[0])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"srun -N3 -n{a.ntasks} true from the login node, median of {a.launches} interleaved launches:")
    base = statistics.median(wall["no barrier"])
    for w, rows in wall.items():
        m = statistics.median(rows)
        print(f"  {w:12} {m * 1000:6.0f} ms  (min/max {min(rows) * 1000:.0f}/{max(rows) * 1000:.0f} ms)"
              f"  {(m - base) * 1000:+.0f} ms vs no barrier")


if __name__ == "__main__":
    main()
