#!/usr/bin/python3
"""NCCL's own figures beside the probe's: the same out-of-place all_reduce (float32 sum,
one communicator per local GPU from ncclCommInitAll, grouped calls, CUDA events around
`iters` calls after `warmup`), called through CuPy's NCCL binding instead of the probe, and
a device-to-device copy of the same bytes. Bandwidth as nccl-tests: algbw = bytes / time,
busbw = algbw x 2(n-1)/n.

torch.distributed is not used for the comparison: its all_reduce is in place, and with one
rank NCCL returns at once without touching the data (about 16 us at any size on an H100),
so its "bandwidth" grows with the size and means nothing.

Usage: python3 bench/nccl_reference.py [--sizes 8M,...,4G] [--iters 20] [--warmup 5]
Needs CuPy with NCCL (on the GPU machine, plain `python3`).
"""
import argparse

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(s):
    return int(s[:-1]) * UNITS[s[-1]] if s[-1] in UNITS else int(s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="8M,16M,32M,64M,128M,256M,512M,1G,2G,4G")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    try:
        import cupy
        from cupy.cuda import nccl
    except ImportError as e:
        print(f"no CuPy with NCCL here ({e}): nothing to compare")
        return
    n = cupy.cuda.runtime.getDeviceCount()
    if n == 0:
        print("no CUDA device: nothing to compare")
        return
    comms = nccl.NcclCommunicator.initAll(list(range(n)))
    name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"NCCL {nccl.get_version()} through CuPy {cupy.__version__}, {n} x {name}")
    print(f"{'bytes':>12} {'time_us':>10} {'algbw GB/s':>11} {'busbw GB/s':>11} {'copy GB/s':>10} correct")
    for size in (parse_size(s) for s in args.sizes.split(",")):
        count = size // 4
        send, recv, streams = [], [], []
        for d in range(n):
            with cupy.cuda.Device(d):
                send.append(cupy.full(count, d + 1, dtype=cupy.float32))
                recv.append(cupy.empty(count, dtype=cupy.float32))
                streams.append(cupy.cuda.Stream(non_blocking=True))

        def all_reduce():
            nccl.groupStart()
            for d in range(n):
                with cupy.cuda.Device(d):
                    comms[d].allReduce(send[d].data.ptr, recv[d].data.ptr, count, nccl.NCCL_FLOAT32,
                                       nccl.NCCL_SUM, streams[d].ptr)
            nccl.groupEnd()

        for _ in range(args.warmup):
            all_reduce()
        for d in range(n):
            streams[d].synchronize()
        with cupy.cuda.Device(0):
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            start.record(streams[0])
        for _ in range(args.iters):
            all_reduce()
        with cupy.cuda.Device(0):
            stop.record(streams[0])
            stop.synchronize()
            sec = cupy.cuda.get_elapsed_time(start, stop) / 1e3 / args.iters
        want = n * (n + 1) / 2
        correct = all(bool((recv[d][:1024] == want).all()) and bool((recv[d][-1024:] == want).all()) for d in range(n))
        algbw = size / sec / 1e9
        busbw = algbw * 2 * (n - 1) / n if n > 1 else float("nan")
        with cupy.cuda.Device(0):
            s = streams[0]
            recv[0].data.copy_from_device_async(send[0].data, size, s)
            start.record(s)
            for _ in range(10):
                recv[0].data.copy_from_device_async(send[0].data, size, s)
            stop.record(s)
            stop.synchronize()
            copy = size * 10 / (cupy.cuda.get_elapsed_time(start, stop) / 1e3) / 1e9
        print(f"{size:>12} {sec * 1e6:>10.1f} {algbw:>11.2f} {busbw:>11.2f} {copy:>10.1f} {correct}", flush=True)
        del send, recv


if __name__ == "__main__":
    main()
