#!/usr/bin/python3
"""`srun --diag=fabric` on the multi-node test cluster (3 slurmd nodes in their own
namespaces on this machine's cores): what the fabric test adds to a step, its rounds, how
often a healthy cluster is called slow, and the TCP figure against iperf3 between the
same namespaces in the same run.

Usage: bench/fabric.py [--build build] [--runs 10] [--iperf 3] [--rdma-fake]

--rdma-fake: fabric.rdma_library points at the fake libibverbs (tests/fakes), so every
step also runs the RDMA rounds; the RDMA figures are the fake's (RC writes carried over
TCP between the namespaces), printed beside TCP's.

Added time: `srun -N3 -n3 --diag=preflight true` against `--diag=fabric` (the barrier
alone against the barrier and the fabric test), interleaved run by run, medians.
Accuracy: iperf3 -c n2 from n1 (2 s, one stream) interleaved with fabric steps; the
fabric's n1->n2 figure over iperf3's, median of the pairs of runs.
"""
import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from multinode_bench import ROOT, MultiNodeBench


def step(b, item):
    work = os.path.join(b.dir, "w")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work, 0o755)
    argv = ["srun", "-N3", "-n3", f"--diag={item}", "true"]
    t0 = time.monotonic()
    r = subprocess.run(b.cluster.enter(b.cluster.login, argv, cwd=work), env=b.cluster.env, capture_output=True,
                       text=True, timeout=120)
    wall = time.monotonic() - t0
    rep = None
    paths = glob.glob(os.path.join(work, "gpudiag-*", "fabric.json"))
    if paths:
        with open(paths[0]) as f:
            rep = json.load(f)
    return wall, r, rep


def iperf(b, seconds=2):
    server = subprocess.Popen(b.cluster.enter("n2", ["iperf3", "-s", "-1", "-p", "5201"]), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        r = subprocess.run(b.cluster.enter("n1", ["iperf3", "-J", "-c", b.cluster.addr["n2"], "-p", "5201", "-t",
                                                  str(seconds)]), capture_output=True, text=True, timeout=60)
        return json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"] / 1e9
    finally:
        if server.poll() is None:
            server.kill()
        server.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--iperf", type=int, default=3)
    ap.add_argument("--rdma-fake", action="store_true")
    a = ap.parse_args()
    fake = os.path.join(os.path.abspath(a.build), "tests", "fakes", "libfake_ibverbs.so")
    with MultiNodeBench(a.build, "fabric") as b:
        b.use(b.config("fabric", [("    memlock: true ", "    memlock: false ")],
                       f"\nfabric:\n  rdma_library: {fake}\n" if a.rdma_fake else ""))
        for _ in range(2):  # warm-up
            step(b, "preflight")
        pre, fab, rounds, inner, called_slow, rdma = [], [], [], [], 0, []
        for _ in range(a.runs):
            pre.append(step(b, "preflight")[0])
            wall, r, rep = step(b, "fabric")
            fab.append(wall)
            if r.returncode != 0 or not rep or rep["verdict"] != "ok":
                called_slow += 1
                print(r.stderr, file=sys.stderr)
            if rep:
                rounds.append(rep["rounds"])
                inner.append(rep["seconds"])
                rdma += [t["gbps"] for t in rep["tests"] if t.get("transport") == "rdma" and "gbps" in t]
        ratios = []
        for _ in range(a.iperf):
            ref = iperf(b)
            _, _, rep = step(b, "fabric")
            ours = [t["gbps"] for t in (rep or {}).get("tests", []) if t["from"] == "n1" and t["to"] == "n2"
                    and "gbps" in t and t.get("transport", "tcp") == "tcp"]
            if ours:
                ratios.append((max(ours) / ref, max(ours), ref))
        print(f"steps: {a.runs} healthy fabric steps, called slow: {called_slow}")
        print(f"srun -N3 -n3 true, median wall: preflight {statistics.median(pre):.2f} s, fabric "
              f"{statistics.median(fab):.2f} s, added {statistics.median(fab) - statistics.median(pre):.2f} s "
              f"(max added {max(f - p for f, p in zip(fab, pre)):.2f} s)")
        print(f"fabric test as srun saw it: median {statistics.median(inner):.2f} s, rounds {sorted(set(rounds))}")
        if rdma:
            print(f"RDMA (fake) per direction: median {statistics.median(rdma):.2f} Gb/s, "
                  f"{min(rdma):.2f}-{max(rdma):.2f} over {len(rdma)} directions")
        for ratio, ours, ref in ratios:
            print(f"n1->n2: fabric {ours:.2f} Gb/s, iperf3 {ref:.2f} Gb/s, ratio {ratio:.2f}")
        if ratios:
            print(f"median ratio fabric/iperf3: {statistics.median(r[0] for r in ratios):.2f}")


if __name__ == "__main__":
    main()
