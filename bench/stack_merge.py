#!/usr/bin/python3
"""The step's stack merge (issue 31.2) at scale: `gpudiag hang DIR` over a diag dir holding
the hang reports of N synthetic ranks, 8 per node, with each node's report as large as a
real one (every rank's native stacks, ~60 lines each, then the rank lines the merge reads).
Most ranks wait in one all_reduce; one rank in every 500 is elsewhere, alone in its class.
Reports the median wall time and the peak RSS of the command for each rank count, so that
linear growth (and bounded memory) shows.

Usage: bench/stack_merge.py [--ranks 1024,4096,16384] [--runs 5] [--build build]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WAIT = ["all_reduce (distributed_c10d.py:1536)", "wrapper (c10d_logger.py:47)", "sync_grads (train.py:30)",
        "train_step (train.py:61)", "main (train.py:90)", "<module> (train.py:99)"]
FILLER = "".join(f"    #{i:<2} 0x00007f460a{i:06x} c10d::ProcessGroupGloo::AsyncWork::execute - /usr/lib/libtorch_cpu.so\n"
                 for i in range(60))


def write_step(d, ranks):
    per_node = 8
    for n in range(0, ranks, per_node):
        node = f"gpu{n // per_node:05d}"
        parts = [f"gpudiag hang report: step 1.0 on {node}, no output from any task for 20s\n"]
        lines = []
        for r in range(n, min(n + per_node, ranks)):
            frames = [f"spin_{r} (data.py:12)"] + WAIT[2:] if r % 500 == 7 else WAIT
            parts.append(f"\n== task rank {r}: program pid {1000 + r}, 1 process(es)\n  eu-stack:\n" + FILLER)
            lines.append("\t".join(["gpudiag-rank-stack", str(r), node, "python", ""] + frames) + "\n")
        parts.append("\nrank stacks for the step's merge (one line per rank):\n")
        with open(os.path.join(d, f"hang.{node}.txt"), "w") as f:
            f.write("".join(parts + lines))


def run_once(binary, d):
    """(seconds, peak RSS in MiB, stdout) of one run, the RSS from wait4 for this child alone."""
    with tempfile.TemporaryFile() as out:
        start = time.monotonic()
        p = subprocess.Popen([binary, "hang", d], stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(p.pid, 0)
        took = time.monotonic() - start
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            raise SystemExit(f"gpudiag hang exited {p.returncode}")
        out.seek(0)
        return took, usage.ru_maxrss / 1024, out.read().decode()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="1024,4096,16384")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    a = ap.parse_args()
    binary = os.path.join(a.build, "cli", "gpudiag")
    print(f"{'ranks':>6} {'nodes':>6} {'report MiB':>10} {'median s':>9} {'max s':>7} {'peak RSS MiB':>12}")
    for ranks in (int(x) for x in a.ranks.split(",")):
        d = tempfile.mkdtemp(prefix="gpudiag-merge-bench-")
        try:
            write_step(d, ranks)
            size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)) / 2**20
            times, rss = [], []
            for _ in range(a.runs):
                took, peak, out = run_once(binary, d)
                times.append(took)
                rss.append(peak)
            first = out.splitlines()[0]
            print(f"{ranks:>6} {(ranks + 7) // 8:>6} {size:>10.1f} {statistics.median(times):>9.3f} {max(times):>7.3f} "
                  f"{max(rss):>12.1f}")
            print(f"       {first[:150]}")
        finally:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
