#!/usr/bin/python3
"""The GPU probe on this machine: NCCL all_reduce algbw (and busbw with 2+ GPUs) from
8 MiB to 4 GiB per rank, the device-to-device copy bandwidth of the same run for
scale, whether every result was correct, and the wall time of the probe and of
`gpudiag-health --checks gpu,p2p,nccl`.

Usage: bench/gpu_allreduce.py [--build build] [--sizes 8M,...,4G] [--iters 20] [--fakes]

Without a GPU it says why and times the clean UNKNOWN path instead. --fakes runs the
same through the fake NVML, CUDA driver and NCCL of tests/fakes (8 simulated GPUs):
the probe's own cost, not a GPU's; the bandwidths are the fakes' simulated ones.
"""
import argparse
import json
import os
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SIZES = "8M,16M,32M,64M,128M,256M,512M,1G,2G,4G"


def timed(argv):
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True)
    return time.monotonic() - t0, p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--sizes", default=SIZES)
    ap.add_argument("--iters", default="20")
    ap.add_argument("--fakes", action="store_true", help="load the fake libraries from tests/fakes")
    args = ap.parse_args()
    probe = os.path.join(args.build, "libexec/gpudiag/gpudiag-gpu-probe")
    health = os.path.join(args.build, "healthcheck/gpudiag-health")
    libraries = {}
    if args.fakes:
        fakes = os.path.join(args.build, "tests/fakes")
        libraries = {k: os.path.join(fakes, f"libfake_{k}.so") for k in ("nvml", "cuda", "nccl")}
        probe_argv = [probe] + [a for k, v in libraries.items() for a in (f"--{k}", v)]
        if args.sizes == SIZES:
            args.sizes = "1M,8M"  # the fakes reduce in host memory, on the CPU
    else:
        probe_argv = [probe]

    wall, p = timed(probe_argv + ["devices"])
    devices = json.loads(p.stdout)
    if "error" in devices:
        print(f"no usable GPU: {devices['error']['message']}")
        wall, p = timed([health, "--checks", "gpu,p2p,nccl", "--format", "json"])
        print(f"gpudiag-health --checks gpu,p2p,nccl without a GPU: exit {p.returncode} in {wall * 1000:.0f} ms")
        return
    print(f"driver {devices.get('driver_version')}, GPUs: " + ", ".join(g.get("name", "?") for g in devices["gpus"]))
    print(f"probe devices: {wall * 1000:.0f} ms")

    wall, p = timed(probe_argv + ["allreduce", "--sizes", args.sizes, "--iters", args.iters, "--warmup", "5"])
    out = json.loads(p.stdout)
    if "error" in out:
        print(f"all_reduce failed: {out['error']}")
        return
    print(f"NCCL {out['nccl_version']}, {out['ranks']} rank(s); probe allreduce wall time {wall:.2f} s")
    print(f"{'bytes':>12} {'time_us':>10} {'algbw GB/s':>11} {'busbw GB/s':>11} correct")
    for r in out["results"]:
        busbw = r.get("busbw_gbps")
        print(f"{r['bytes']:>12} {r['time_us']:>10.1f} {r['algbw_gbps']:>11.2f} "
              f"{'-' if busbw is None else format(busbw, '.2f'):>11} {r['correct']}")
    for c in out.get("device_copy", []):
        print(f"GPU{c['gpu']} device-to-device copy: {c['gbps']:.1f} GB/s ({c['bytes']} bytes x {c['iters']})")

    wall, p = timed(probe_argv + ["p2p"])
    print(f"probe p2p: {wall * 1000:.0f} ms")
    cfg = os.path.join("/tmp", f"gpudiag-bench-{os.getpid()}.yaml")
    with open(cfg, "w") as f:
        if libraries:
            # The fixture tree with 8 H100s on PCI stands in for this machine's /sys.
            f.write(f"gpu: {{count: {len(devices['gpus'])}, probe: {probe}, libraries: {json.dumps(libraries)}}}\n"
                    "nccl: {bytes: 8M}\n")
        else:
            f.write(f"gpu: {{count: {len(devices['gpus'])}}}\n")
    root = ["--fs-root", os.path.join(args.build, "fixtures/healthy")] if libraries else []
    wall, p = timed([health, "--config", cfg, "--checks", "gpu,p2p,nccl"] + root)
    os.unlink(cfg)
    print(f"gpudiag-health --checks gpu,p2p,nccl: exit {p.returncode} in {wall:.2f} s")
    print(p.stdout)


if __name__ == "__main__":
    main()
