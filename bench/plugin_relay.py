#!/usr/bin/python3
"""The cost of gpudiag.so's output relay and of loading the plugin, side by side on one
throwaway Slurm (tests/e2e/slurm_cluster.py).

Usage: bench/plugin_relay.py [--build build] [--lines 1000000] [--runs 3] [--launches 20]

Contenders, interleaved round by round on the same cluster (the plugstack file is
rewritten between runs; srun and slurmstepd read it at every launch):
  plugin     gpudiag.so loaded, so every line goes through the relay and gets [host:rank]
  none       empty plugstack: srun's own I/O path
  label      empty plugstack, srun --label (Slurm's own per-line tagging)
Throughput: `srun -n4` where each task writes LINES numbered lines; srun's stdout is
read and counted by this script. CPU is the whole machine's (user+system from
/proc/stat) during the run, so it includes srun, slurmstepd, the relay and the writer.
Launch: median wall time of `srun -n4 true`, with and without the plugin.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
from slurm_cluster import SlurmCluster  # noqa: E402

# argv: LINES [PAD]: PAD more bytes on each line (launch_cost.py: lines as long as tagged ones).
WRITER = r'''
import os, sys
n = int(sys.argv[1])
pad = b"." * int(sys.argv[2]) if len(sys.argv) > 2 else b""
out = sys.stdout.buffer
for start in range(0, n, 100000):
    out.write(b"".join(b"line %d of the benchmark%s\n" % (i, pad) for i in range(start, min(n, start + 100000))))
'''


def cpu_seconds():
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    ticks = os.sysconf("SC_CLK_TCK")
    user, nice, system = int(fields[0]), int(fields[1]), int(fields[2])
    irq, softirq = int(fields[5]), int(fields[6])
    return (user + nice + system + irq + softirq) / ticks


def timed(cluster, argv):
    c0, t0 = cpu_seconds(), time.monotonic()
    p = subprocess.Popen(argv, env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cluster.dir)
    nbytes = 0
    while True:
        chunk = p.stdout.read(1 << 20)
        if not chunk:
            break
        nbytes += len(chunk)
    err = p.stderr.read()
    if p.wait() != 0:
        raise RuntimeError(f"{argv} failed: {err.decode(errors='replace')}")
    return time.monotonic() - t0, cpu_seconds() - c0, nbytes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--lines", type=int, default=1000000, help="lines per task (4 tasks)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--launches", type=int, default=20)
    a = ap.parse_args()
    plugin = os.path.abspath(os.path.join(a.build, "spank", "gpudiag.so"))
    if not os.path.exists(plugin):
        sys.exit(f"bench: {plugin} not found: build first (./scripts/build)")
    tmp = tempfile.mkdtemp(prefix="gpudiag-bench-")
    plugstack = os.path.join(tmp, "plugstack.conf")
    loaded = f"required {plugin} config={os.path.join(ROOT, 'etc', 'gpudiag.yaml')}\n"

    def use(text):
        with open(plugstack, "w") as f:
            f.write(text)

    use("")
    py = "/usr/bin/python3"
    modes = {"plugin": (loaded, []), "none": ("", []), "label": ("", ["--label"])}
    res = {m: [] for m in modes}
    launch = {"plugin": [], "none": []}
    try:
        with SlurmCluster(extra_conf=[f"PlugStackConfig={plugstack}"]) as c:
            for _ in range(a.runs):
                for m, (stack, extra) in modes.items():
                    use(stack)
                    res[m].append(timed(c, ["srun", "-n4", *extra, py, "-c", WRITER, str(a.lines)]))
            for _ in range(a.launches):
                for m in launch:
                    use(modes[m][0])
                    launch[m].append(timed(c, ["srun", "-n4", "true"])[0])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    lines = 4 * a.lines
    print(f"relay throughput: srun -n4, {a.lines} lines per task, median of {a.runs} interleaved runs")
    print(f"{'mode':8} {'wall s':>8} {'Mlines/s':>9} {'MB/s out':>9} {'CPU s':>7} {'CPU us/line':>12}")
    med = {}
    for m, rows in res.items():
        wall = statistics.median(r[0] for r in rows)
        cpu = statistics.median(r[1] for r in rows)
        out = statistics.median(r[2] for r in rows)
        med[m] = (wall, cpu)
        print(f"{m:8} {wall:8.2f} {lines / wall / 1e6:9.2f} {out / wall / 1e6:9.1f} {cpu:7.2f} {cpu / lines * 1e6:12.3f}")
    for m in ("plugin", "label"):
        print(f"ratio {m}/none: wall {med[m][0] / med['none'][0]:.2f}x, CPU {med[m][1] / med['none'][1]:.2f}x")
    print(f"ratio plugin/label: wall {med['plugin'][0] / med['label'][0]:.2f}x, "
          f"CPU {med['plugin'][1] / med['label'][1]:.2f}x")
    lp, ln = statistics.median(launch["plugin"]), statistics.median(launch["none"])
    print(f"step launch (srun -n4 true), median of {a.launches}: plugin {lp * 1000:.0f} ms, "
          f"none {ln * 1000:.0f} ms, ratio {lp / ln:.2f}x (+{(lp - ln) * 1000:.0f} ms)")


if __name__ == "__main__":
    main()
