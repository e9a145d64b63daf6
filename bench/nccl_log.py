#!/usr/bin/python3
"""Throughput of `gpudiag nccl-log` on a generated NCCL log (default 1 GiB), side by
side with `grep -c 'NCCL WARN'` over the same file, with each one's peak memory.

Usage: bench/nccl_log.py [--size-mb 1024] [--runs 3] [--build build] [--keep FILE]

The log is what 64 ranks on 8 hosts write at INFO level with SUBSYS=INIT,COLL: init
lines, channels, then collective calls (most of the bytes), and a few WARN lines.
Runs are interleaved (analyzer, grep, analyzer, grep, ...); the median is reported.
"""
import argparse
import os
import statistics
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def generate(path, size):
    ranks = 64
    heads = []
    for r in range(ranks):
        host, pid = f"gpu{r // 8:03d}", 40000 + r
        o = f"{host}:{pid}:{pid} [{r % 8}] NCCL INFO "
        init = (f"ncclCommInitRank comm 0x55d0{r:04x} rank {r} nranks {ranks} cudaDev {r % 8} nvmlDev {r % 8} "
                f"busId 18000 commId 0x6c7e1b41c2dc5f6c")
        heads.append("".join([
            o + "NCCL version 2.21.5+cuda12.4\n",
            o + "Bootstrap : Using eth0:10.0.0.1<0>\n",
            o + "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB [RO]; OOB eth0:10.0.0.1<0>\n",
            o + "Using network IB\n",
            o + init + " - Init START\n",
            *(o + f"Channel {c:02d}/0 : {r}[{r % 8}] -> {(r + 1) % ranks}[{(r + 1) % 8}] via P2P/IPC/read\n" for c in range(16)),
            o + init + " - Init COMPLETE\n"]))
    written = 0
    with open(path, "w") as f:
        for h in heads:
            f.write(h)
            written += len(h)
        op = 0
        while written < size:
            block = []
            for r in range(ranks):
                host, pid = f"gpu{r // 8:03d}", 40000 + r
                block.append(f"{host}:{pid}:{pid} [{r % 8}] NCCL INFO AllReduce: opCount {op:x} sendbuff 0x7f4c1c000000 "
                             f"recvbuff 0x7f4c1c000000 count 262144 datatype 7 op 0 root 0 comm 0x55d0{r:04x} "
                             f"[nranks={ranks}] stream 0x5600aa00\n")
            if op % 5000 == 0:
                block.append(f"gpu001:40009:40016 [1] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from "
                             f"peer 10.0.0.2<40000> with status=5 opcode=0 len=0 vendor err 249 (Recv)\n")
            text = "".join(block)
            f.write(text)
            written += len(text)
            op += 1
    return written


def run(argv):
    t0 = time.monotonic()
    # A pipe, not /dev/null: GNU grep stops at the first match when output is discarded.
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    return time.monotonic() - t0, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--keep")
    args = ap.parse_args()
    gpudiag = os.path.join(args.build, "cli", "gpudiag")
    path = args.keep or os.path.join(tempfile.gettempdir(), f"gpudiag-bench-nccl-{os.getpid()}.log")
    size = os.path.getsize(path) if args.keep and os.path.exists(path) else generate(path, args.size_mb << 20)
    mb = size / 1e6
    print(f"log: {path}, {mb:.0f} MB")
    try:
        subprocess.run(["cat", path], stdout=subprocess.DEVNULL)  # page cache warm for both
        a_times, g_times, a_rss, g_rss = [], [], [], []
        for _ in range(args.runs):
            t, rss, code = run([gpudiag, "nccl-log", path])
            a_times.append(t)
            a_rss.append(rss)
            t, rss, _ = run(["grep", "-c", "NCCL WARN", path])
            g_times.append(t)
            g_rss.append(rss)
        a, g = statistics.median(a_times), statistics.median(g_times)
        print(f"{'contender':<28} {'median s':>9} {'MB/s':>8} {'peak RSS MiB':>13}")
        print(f"{'gpudiag nccl-log':<28} {a:>9.2f} {mb / a:>8.0f} {max(a_rss):>13.1f}   (exit {code})")
        label = 'grep -c "NCCL WARN"'
        print(f"{label:<28} {g:>9.2f} {mb / g:>8.0f} {max(g_rss):>13.1f}")
        print(f"ratio analyzer/grep time: {a / g:.2f}x")
    finally:
        if not args.keep:
            os.unlink(path)


if __name__ == "__main__":
    main()
