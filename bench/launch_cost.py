#!/usr/bin/python3
"""What gpudiag.so adds to a step launch, against the plugins an admin already loads
(issue 34): no plugin, the smallest SPANK plugin, NVIDIA pyxis, and gpudiag.so as built,
interleaved launch by launch (each round in a new random order) on the 3-node test cluster (tests/e2e/multinode_cluster.py),
then the goal check and what each part of gpudiag costs.

Usage: bench/launch_cost.py [--build build] [--launches 40] [--old OLD/gpudiag.so]
                            [--runs 5] [--lines 1000000] [--host-runs 15] [--relay-only]
       bench/launch_cost.py --split-only [--old OLD/gpudiag.so] [--host-runs 15]

Launch rows (wall time of `srun -N3 -nN true` from the login node, median of --launches):
  none          empty plugstack
  empty C       ../shared/anchors/empty_spank.c, built here: what any plugin costs
  pyxis         ../shared/anchors/pyxis, built here with `make` against the installed headers
  C++ libs      the empty plugin linked to the libraries gpudiag.so names (readelf -d)
  gpudiag       gpudiag.so of --build with etc/gpudiag.yaml
  old gpudiag   --old, the same config (e.g. main's build): old against new in one run
  gpudiag --diag
  no relay      gpudiag with `plugin.prefix: never` (no relay thread, no handoff)
  no IB auto    gpudiag without `NCCL_IB_HCA: auto` (no IB scan)
  env floor     bench/env_floor_spank.c setting in each task the variables gpudiag gave task 0
                of the same step, and nothing else: what any plugin pays Slurm for them
at -n12 and -n48 (C++ libs and no IB auto at -n12 only). Goal: gpudiag's added wall time at most
max(3 ms, 2x pyxis's) at -n12 and max(6 ms, 2x pyxis's) at -n48; the relay (srun -N3 -n6,
--lines numbered lines per task, interleaved with plain srun and --old, each round in a new
random order, median of --runs) at least 90 % of plain srun's throughput. A third relay row,
plain srun writing lines as long as the tagged ones (7 bytes more), shows what Slurm's own
carrying of the tags' bytes costs; the goal is still against plain srun. --relay-only runs
just the relay rows (and checks just the relay's goal).

The per-part split runs bench/spank_host.c, a stand-in slurmstepd that dlopens a plugin
and times each callback for one node's share (4 tasks), --host-runs fresh processes each,
with one part taken away at a time (config switches, or no nodelist for the rendezvous check),
and with a numeric MASTER_ADDR (a NodeAddr that is an address: no lookup thread).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from multinode_bench import (NOIB, NORELAY, ROOT, MultiNodeBench, build_env_floor, mean_ms, median_ms, plugin_path,
                             write_config)
from plugin_relay import WRITER

ANCHORS = os.path.join(ROOT, "..", "shared", "anchors")
# What the relay puts before each line on the test cluster (hosts n1..n3, ranks 0..5), and a
# row of plain srun whose lines are that much longer: Slurm carrying the tags' bytes, no relay.
TAG = "[n1:0] "
TAGGED_LENGTH = "none, lines as long as tagged"


def sh(argv, **kw):
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, **kw)


def needed_libs(plugin):
    """The shared libraries the plugin names (DT_NEEDED) beyond the C runtime."""
    text = subprocess.run(["readelf", "-d", plugin], capture_output=True, text=True, check=True).stdout
    libs = [line.split("[", 1)[1].split("]", 1)[0] for line in text.splitlines() if "(NEEDED)" in line]
    return [lib for lib in libs if not lib.startswith(("libc.so", "libm.so", "libgcc_s.so", "ld-linux"))]


def build_contenders(tmp, anchors, plugin, with_pyxis=True):
    """The plugins gpudiag is measured against, and the stand-in slurmstepd."""
    out = {}
    empty = os.path.join(anchors, "empty_spank.c")
    out["empty"] = os.path.join(tmp, "empty_spank.so")
    sh(["gcc", "-shared", "-fPIC", "-O2", "-o", out["empty"], empty])
    # The empty plugin with the libraries gpudiag.so loads: what loading them costs.
    out["libs"] = os.path.join(tmp, "cxx_libs_spank.so")
    sh(["gcc", "-shared", "-fPIC", "-O2", "-o", out["libs"], empty, "-Wl,--no-as-needed",
        *(f"-l:{lib}" for lib in needed_libs(plugin))])
    if with_pyxis:
        pyxis = os.path.join(tmp, "pyxis")
        shutil.copytree(os.path.join(anchors, "pyxis"), pyxis)
        sh(["make", "-s", "-C", pyxis], stderr=subprocess.DEVNULL)
        out["pyxis"] = os.path.join(pyxis, "spank_pyxis.so")
    out["host"] = os.path.join(tmp, "spank_host")
    sh(["gcc", "-O2", "-Wall", "-rdynamic", "-o", out["host"], os.path.join(ROOT, "bench", "spank_host.c"), "-ldl"])
    for f in out.values():
        os.chmod(f, 0o755)
    return out


def host_split(host, plugin, configs, runs, tasks=4):
    """name -> {field: median} of spank_host over `runs` fresh processes, interleaved round by
    round so that every contender runs under the same load."""
    rows = {name: [] for name in configs}
    for _ in range(runs):
        for name, (path, args, env) in configs.items():
            p = subprocess.run([host, path or plugin, str(tasks), *args], env={**os.environ, **env},
                               capture_output=True, text=True, check=True)
            rows[name].append(dict((k, float(v)) for k, v in (f.split("=") for f in p.stdout.split())))
    return {name: {k: statistics.median(r[k] for r in got) for k in got[0]} for name, got in rows.items()}


def split_configs(cfg_dir, bins, old):
    """The stand-in's contenders: gpudiag.so with one part taken away at a time (configs
    written by write_config into cfg_dir), the empty plugins, and --old with the same config."""
    here = {"GPUDIAG_HOST_NODELIST": "localhost"}
    return {
        "gpudiag": (None, [f"config={cfg_dir}/gpudiag.yaml"], here),
        "no relay": (None, [f"config={cfg_dir}/norelay.yaml"], here),
        "no IB auto": (None, [f"config={cfg_dir}/noib.yaml"], here),
        "no rendezvous": (None, [f"config={cfg_dir}/gpudiag.yaml"], {"GPUDIAG_HOST_NODELIST": ""}),
        "numeric addr": (None, [f"config={cfg_dir}/gpudiag.yaml"], {"GPUDIAG_HOST_NODELIST": "127.0.0.1"}),
        "no config": (None, [], here),
        "cache off": (None, [f"config={cfg_dir}/gpudiag.yaml", "config_cache=off"], here),
        "empty C": (bins["empty"], [], {}),
        "C++ libs": (bins["libs"], [], {}),
        **({"old gpudiag": (os.path.abspath(old), [f"config={cfg_dir}/gpudiag.yaml"], here)} if old else {}),
    }


def settle():
    """Root caches a config only once its file is 2 s old (config/config_cache.h): measure
    the steady state a site runs in, not the first step after an edit."""
    time.sleep(2.1)


# The configs the bench compares: each (old, new) applied to etc/gpudiag.yaml.


def split_only(a):
    """--split-only: the stand-in's per-part split alone, no cluster (about a minute)."""
    tmp = tempfile.mkdtemp(prefix="gpudiag-bench-split-")
    os.chmod(tmp, 0o755)
    try:
        bins = build_contenders(tmp, os.path.abspath(a.anchors), plugin_path(a.build), with_pyxis=False)
        write_config(tmp, "gpudiag")
        write_config(tmp, "norelay", NORELAY)
        write_config(tmp, "noib", NOIB)
        settle()
        with open("/proc/loadavg") as f:
            load_before = f.read().split()[:3]
        split = host_split(bins["host"], plugin_path(a.build), split_configs(tmp, bins, a.old), a.host_runs)
        show_split(split, a.host_runs, needed_libs(plugin_path(a.build)))
        with open("/proc/loadavg") as f:
            load_after = f.read().split()[:3]
        print(f"\nload average before {' '.join(load_before)}, after {' '.join(load_after)} (nproc {os.cpu_count()})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--old", help="another gpudiag.so to measure in the same rounds (e.g. main's)")
    ap.add_argument("--anchors", default=ANCHORS)
    ap.add_argument("--launches", type=int, default=40)
    # A million lines (about 4 s a run): throughput, not the launch (measured above), which
    # was a quarter of each run at 200,000 lines and moved the figure by +-5 points.
    ap.add_argument("--lines", type=int, default=1000000, help="lines per task of the relay run (6 tasks)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--host-runs", type=int, default=15)
    ap.add_argument("--split-only", action="store_true", help="only the stand-in's per-part split (no cluster)")
    ap.add_argument("--relay-only", action="store_true", help="only the relay's throughput rows")
    a = ap.parse_args()
    if a.split_only:
        return split_only(a)
    tmp = tempfile.mkdtemp(prefix="gpudiag-bench-anchors-")
    os.chmod(tmp, 0o755)
    try:
        plugin = plugin_path(a.build)
        bins = {} if a.relay_only else build_contenders(tmp, os.path.abspath(a.anchors), plugin)
        with open("/proc/loadavg") as f:
            load_before = f.read().split()[:3]
        with MultiNodeBench(a.build, "launch") as b:
            full = b.config("gpudiag")
            norelay = b.config("norelay", NORELAY)
            noib = b.config("noib", NOIB)
            settle()
            other = lambda path: f"required {path}\n"  # noqa: E731
            old = f"required {os.path.abspath(a.old)} config={os.path.join(b.dir, 'gpudiag.yaml')}\n" if a.old else None
            ways = {}
            floor_so = None if a.relay_only else build_env_floor(tmp)
            for n, split in () if a.relay_only else ((12, True), (48, False)):
                step = ["srun", "-N3", f"-n{n}", "true"]
                floor, count = b.env_floor(floor_so, full, step[:-1])
                print(f"env floor -n{n}: the {count} variables gpudiag gives task 0")
                ways[f"none -n{n}"] = (None, step)
                ways[f"empty C -n{n}"] = (other(bins["empty"]), step)
                ways[f"pyxis -n{n}"] = (other(bins["pyxis"]), step)
                if split:
                    ways[f"C++ libs -n{n}"] = (other(bins["libs"]), step)
                ways[f"gpudiag -n{n}"] = (full, step)
                if old:
                    ways[f"old gpudiag -n{n}"] = (old, step)
                ways[f"gpudiag --diag -n{n}"] = (full, ["srun", "-N3", f"-n{n}", "--diag", "true"])
                ways[f"no relay -n{n}"] = (norelay, step)
                ways[f"env floor -n{n}"] = (floor, step)
                if split:
                    ways[f"no IB auto -n{n}"] = (noib, step)
            added = None
            if not a.relay_only:
                launch = b.interleave(ways, a.launches, shuffle=True)
                added = show_launch(launch, a.launches)
            relay_cmd = ["srun", "-N3", "-n6", "/usr/bin/python3", "-c", WRITER, str(a.lines)]
            relay_ways = {"gpudiag": (full, relay_cmd), "none": (None, relay_cmd),
                          TAGGED_LENGTH: (None, relay_cmd + [str(len(TAG))])}
            if old:
                relay_ways["old gpudiag"] = (old, relay_cmd)
            try:
                relay = b.interleave(relay_ways, a.runs, warmup=0, shuffle=True)
                throughput = show_relay(relay, a.lines, a.runs)
            except RuntimeError as e:  # a failed run is a finding: say so, then go on
                print(f"\nrelay across nodes: a run failed: {e}")
                throughput = 0.0
            if a.relay_only:
                return relay_verdict(throughput, load_before)
            cfg_dir = b.dir
            split = host_split(bins["host"], b.plugin, split_configs(cfg_dir, bins, a.old), a.host_runs)
            show_split(split, a.host_runs, needed_libs(b.plugin))
        with open("/proc/loadavg") as f:
            load_after = f.read().split()[:3]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"\nload average before {' '.join(load_before)}, after {' '.join(load_after)} (nproc {os.cpu_count()})")
    print("goal (issue 34):")
    ok = True
    for n, floor in ((12, 3.0), (48, 6.0)):
        limit = max(floor, 2 * added[("pyxis", n)])
        got = added[("gpudiag", n)]
        ok = ok and got <= limit
        print(f"  -n{n}: gpudiag adds {got:+.1f} ms, pyxis {added[('pyxis', n)]:+.1f} ms: limit {limit:.1f} ms: "
              f"{'PASS' if got <= limit else 'FAIL'} (the env floor, its variables alone: "
              f"{added[('env floor', n)]:+.1f} ms)")
    ok = ok and throughput >= 90
    print(f"  relay: {throughput:.0f} % of plain srun's throughput (at least 90 %): {'PASS' if throughput >= 90 else 'FAIL'}")
    print(f"overall: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


def relay_verdict(throughput, load_before):
    with open("/proc/loadavg") as f:
        load_after = f.read().split()[:3]
    print(f"\nload average before {' '.join(load_before)}, after {' '.join(load_after)} (nproc {os.cpu_count()})")
    ok = throughput >= 90
    print(f"goal (issue 34): relay {throughput:.0f} % of plain srun's throughput (at least 90 %): "
          f"{'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


def show_launch(launch, launches):
    """Prints the launch tables; returns (row, n) -> added ms against none."""
    added = {}
    for n in (12, 48):
        base = median_ms(launch[f"none -n{n}"])
        # The machine's CPU is counted in clock ticks (10 ms): a median of such counts moves
        # only in whole ticks, so this column is a mean.
        cpu_base = mean_ms(launch[f"none -n{n}"], 1)
        print(f"\nstep launch, srun -N3 -n{n} true, median of {launches} interleaved (CPU: the machine's, mean):")
        print(f"  {'row':16} {'wall':>8} {'added':>9} {'min/max':>13} {'CPU':>8} {'added CPU':>10}")
        for w, rows in launch.items():
            if not w.endswith(f" -n{n}"):
                continue
            name = w[: -len(f" -n{n}")]
            wall, cpu = median_ms(rows), mean_ms(rows, 1)
            added[(name, n)] = wall - base
            walls = [r[0] * 1000 for r in rows]
            print(f"  {name:16} {wall:6.0f} ms {wall - base:+6.1f} ms {min(walls):5.0f}/{max(walls):<5.0f} ms "
                  f"{cpu:5.1f} ms {cpu - cpu_base:+7.1f} ms")
    sys.stdout.flush()
    return added


def show_relay(relay, lines, runs):
    print(f"\nrelay across nodes (srun -N3 -n6, {lines} lines per task), median of {runs} interleaved runs:")
    med = {m: statistics.median(r[0] for r in rows) for m, rows in relay.items()}
    for m in ("none", "gpudiag", "old gpudiag", TAGGED_LENGTH):
        if m in med:
            walls = " ".join(f"{r[0]:.2f}" for r in relay[m])
            print(f"  {m:29} {med[m]:6.2f} s  {6 * lines / med[m] / 1e6:5.2f} Mlines/s  "
                  f"{100 * med['none'] / med[m]:4.0f} % of plain srun  (each run: {walls} s)")
    throughput = 100 * med["none"] / med["gpudiag"]
    if TAGGED_LENGTH in med:
        print(f"  gpudiag against plain srun carrying the same bytes ({TAGGED_LENGTH!r}): "
              f"{100 * med[TAGGED_LENGTH] / med['gpudiag']:.0f} %")
    sys.stdout.flush()
    return throughput


def show_split(split, runs, libs):
    print(f"\nper part, one node's share (4 tasks) in a stand-in slurmstepd (bench/spank_host.c), "
          f"median of {runs} fresh processes, ms:")
    g = split["gpudiag"]
    print(f"  {'':14} {'dlopen':>7} {'init':>7} {'post_opt':>8} {'user_init':>9} {'task CPU':>8} {'faults':>7} "
          f"{'fork CPU':>8} {'exit':>6}")
    for name, r in split.items():
        print(f"  {name:14} {r['dlopen']:7.2f} {r['init']:7.2f} {r['init_post_opt']:8.3f} {r['user_init']:9.2f} "
              f"{r['task_cpu'] - r['bare_after_cpu']:+8.3f} {r['task_faults'] - r['bare_task_faults']:+7.1f} "
              f"{r['bare_after_cpu'] - r['bare_task_cpu']:+8.3f} {r['exit']:6.2f}")
    print("  (task CPU, faults: per task, both sides of fork + task_init + _exit + wait, beyond fork + _exit + wait\n"
          "   of the same process; fork CPU: what fork + _exit + wait costs more once the plugin is loaded)")
    cpu = lambda r: r["task_cpu"] - r["bare_after_cpu"]  # noqa: E731
    parts = [
        (f"dlopen of {', '.join(libs)}", split["C++ libs"]["dlopen"] - split["empty C"]["dlopen"]),
        ("dlopen of gpudiag.so itself", g["dlopen"] - split["C++ libs"]["dlopen"]),
        ("config from root's cache (init)", g["init"] - split["no config"]["init"]),
        ("config from the YAML, cache off (init)", split["cache off"]["init"] - split["no config"]["init"]),
        ("IB scan (NCCL_IB_HCA auto)", g["user_init"] - split["no IB auto"]["user_init"]),
        ("rendezvous check", g["user_init"] - split["no rendezvous"]["user_init"]),
        ("rendezvous check, numeric MASTER_ADDR", split["numeric addr"]["user_init"] - split["no rendezvous"]["user_init"]),
        ("relay thread start", g["user_init"] - split["no relay"]["user_init"]),
        ("all of user_init", g["user_init"]),
        ("per task: task_init, CPU", cpu(g)),
        ("per task: relay handoff, CPU", cpu(g) - cpu(split["no relay"])),
        ("per task: a bigger slurmstepd's fork, CPU", g["bare_after_cpu"] - g["bare_task_cpu"]),
        ("per task: task_exit", g["task_exit"]),
        ("relay thread stop (exit)", g["exit"]),
    ]
    print("  the parts, each by difference:")
    for name, ms in parts:
        print(f"    {name:44} {ms:+7.3f} ms")
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
