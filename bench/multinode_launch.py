#!/usr/bin/python3
"""Step launch and output relay across nodes, with and without gpudiag.so, on the
multi-node test cluster (tests/e2e/multinode_cluster.py: 3 slurmd nodes and a login
node, each in its own namespaces, talking over a bridge).

Usage: bench/multinode_launch.py [--build build] [--launches 20] [--lines 200000] [--runs 3] [--ntasks 12]

Launch: wall time of `srun -N3 -n12 true` run on the login node, plugin and none
interleaved launch by launch (the plugstack file is rewritten between launches; srun and
slurmstepd read it at every launch); median of --launches each.
Relay: `srun -N3 -n6`, each task writing --lines numbered lines; srun's stdout on the
login node is read and counted here. Plugin and none interleaved run by run, median of
--runs. CPU is the whole machine's (every node shares it).
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
from plugin_relay import WRITER, timed  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--launches", type=int, default=20)
    ap.add_argument("--lines", type=int, default=200000, help="lines per task (6 tasks on 3 nodes)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--ntasks", type=int, default=12, help="tasks of the launched step (on 3 nodes)")
    a = ap.parse_args()
    plugin = os.path.abspath(os.path.join(a.build, "spank", "gpudiag.so"))
    if not os.path.exists(plugin):
        sys.exit(f"bench: {plugin} not found: build first (./scripts/build)")
    tmp = tempfile.mkdtemp(prefix="gpudiag-bench-multinode-")
    os.chmod(tmp, 0o755)
    plugstack = os.path.join(tmp, "plugstack.conf")
    stacks = {"plugin": f"required {plugin} config={os.path.join(ROOT, 'etc', 'gpudiag.yaml')}\n", "none": ""}

    def use(mode):
        with open(plugstack, "w") as f:
            f.write(stacks[mode])

    use("none")
    py = "/usr/bin/python3"
    launch = {m: [] for m in stacks}
    relay = {m: [] for m in stacks}
    try:
        with MultiNodeCluster(nodes=3, extra_conf=[f"PlugStackConfig={plugstack}"]) as c:
            on_login = lambda argv: c.enter(c.login, argv, cwd=tmp)  # noqa: E731
            for _ in range(2):  # warm-up: first launches load plugins and page in binaries
                for m in stacks:
                    use(m)
                    timed(c, on_login(["srun", "-N3", f"-n{a.ntasks}", "true"]))
            for _ in range(a.launches):
                for m in stacks:
                    use(m)
                    launch[m].append(timed(c, on_login(["srun", "-N3", f"-n{a.ntasks}", "true"]))[:2])
            for _ in range(a.runs):
                for m in stacks:
                    use(m)
                    relay[m].append(timed(c, on_login(["srun", "-N3", "-n6", py, "-c", WRITER, str(a.lines)])))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    cp, cn = (statistics.median(c for _, c in launch[m]) for m in ("plugin", "none"))
    launch = {m: [w for w, _ in rows] for m, rows in launch.items()}
    lp, ln = statistics.median(launch["plugin"]), statistics.median(launch["none"])
    print(f"step launch (srun -N3 -n{a.ntasks} true from the login node), median of {a.launches} interleaved:")
    print(f"  plugin {lp * 1000:.0f} ms, none {ln * 1000:.0f} ms, overhead {100 * (lp / ln - 1):+.1f} % "
          f"({(lp - ln) * 1000:+.0f} ms)")
    print(f"  plugin min/max {min(launch['plugin']) * 1000:.0f}/{max(launch['plugin']) * 1000:.0f} ms, "
          f"none min/max {min(launch['none']) * 1000:.0f}/{max(launch['none']) * 1000:.0f} ms")
    print(f"  CPU per launch (whole machine, median): plugin {cp * 1000:.0f} ms, none {cn * 1000:.0f} ms "
          f"({(cp - cn) * 1000 / a.ntasks:+.1f} ms per task)")
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
