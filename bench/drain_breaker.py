#!/usr/bin/python3
"""What the drain breaker costs a drain (issue 33): `gpudiag-health --quick --drain` of a
sick node with the breaker (count, drain, re-count; jitter 0) against `--drain --force`
(this node's record, drain), interleaved, median of N.

  1. on the multi-node test cluster (real slurmctld, 3 nodes; root, build first);
  2. against a stand-in scontrol that prints a table of 4,000 nodes (the real 22.05 record
     of the test cluster, renamed) and accepts every update: the parse at a large
     cluster's size, without a slurmctld of that size.

  GPUDIAG_BUILD_DIR=build bench/drain_breaker.py [N]
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(SOURCE, "tests", "e2e"))
from multinode_cluster import MultiNodeCluster  # noqa: E402

BUILD = os.path.abspath(os.environ.get("GPUDIAG_BUILD_DIR", os.path.join(SOURCE, "build")))
HEALTH = os.path.join(BUILD, "healthcheck", "gpudiag-health")
FIXTURE = os.path.join(BUILD, "fixtures", "port-down")
SEED = os.path.join(SOURCE, "fuzz", "seeds", "scontrol_node", "real_22.05_every_node")


def timed(argv, env):
    t0 = time.perf_counter()
    r = subprocess.run(argv, env=env, capture_output=True, text=True)
    return time.perf_counter() - t0, r


def compare(label, run, reset, n):
    times = {"breaker": [], "force": []}
    for _ in range(n):
        for kind in ("breaker", "force"):
            t, r = run(kind)
            if r.returncode != 2 or " drained: gpudiag:" not in r.stdout:
                raise RuntimeError(f"{label} {kind}: exit {r.returncode}: {r.stdout[-500:]} {r.stderr[-500:]}")
            times[kind].append(t)
            reset()
    b, f = statistics.median(times["breaker"]), statistics.median(times["force"])
    print(f"{label}: --drain {b * 1000:.1f} ms, --drain --force {f * 1000:.1f} ms, breaker +{(b - f) * 1000:.1f} ms "
          f"(median of {n})")


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    tmp = tempfile.mkdtemp(prefix="gpudiag-bench-breaker-")
    config = os.path.join(tmp, "gpudiag.yaml")
    with open(os.path.join(SOURCE, "etc", "gpudiag.yaml")) as f:
        text = f.read()
    with open(config, "w") as f:
        f.write(text.replace("  jitter: 2s\n", "  jitter: 0\n").replace("  max_nodes: 16\n", "  max_nodes: 5000\n")
                .replace("  max_share: 10%\n", "  max_share: 100%\n"))
    quiet = {"GPUDIAG_SYSLOG_SOCKET": os.path.join(tmp, "no-syslog")}

    # 2. 4,000 nodes through a stand-in scontrol.
    with open(SEED) as f:
        record = f.read().split("\n\n")[1].strip("\n")  # n2, in service
    table = os.path.join(tmp, "table")
    with open(table, "w") as f:
        for i in range(1, 4001):
            f.write(record.replace("n2", f"gpu{i:04d}") + "\n\n")
    stub = os.path.join(tmp, "bin")
    os.makedirs(stub)
    with open(os.path.join(stub, "scontrol"), "w") as f:
        f.write("#!/bin/sh\n"
                f'[ "$1 $2" = "show node" ] || exit 0\n'
                f'if [ $# -eq 3 ]; then sed -n "/^NodeName=$3 /,/^$/p" {table}; else cat {table}; fi\n')
    os.chmod(os.path.join(stub, "scontrol"), 0o755)
    env = dict(os.environ, PATH=stub + ":" + os.environ["PATH"], **quiet)
    print(f"table of 4,000 nodes: {os.path.getsize(table) / 1e6:.1f} MB")

    def run_stub(kind):
        extra = ["--force"] if kind == "force" else []
        return timed([HEALTH, "--quick", "--fs-root", FIXTURE, "--config", config, "--node", "gpu2000", "--drain",
                      *extra], env)
    compare("4,000 nodes, stand-in scontrol", run_stub, lambda: None, n)

    # 1. The real cluster.
    with MultiNodeCluster(nodes=3, return_to_service=1) as c:
        def run_real(kind):
            extra = ["--force"] if kind == "force" else []
            return timed(c.enter("n1", [HEALTH, "--quick", "--fs-root", FIXTURE, "--config", config, "--node", "n1",
                                        "--drain", *extra]), dict(c.env, **quiet))

        def reset():
            c.run(["scontrol", "update", "NodeName=n1", "State=RESUME"], check=False)
            c.wait_for(lambda: c.node_state("n1") == "IDLE", "n1 idle", timeout=30)
        compare("3-node test cluster, real slurmctld", run_real, reset, n)


if __name__ == "__main__":
    main()
