#!/usr/bin/python3
"""Median wall time of `gpudiag-health --quick` on the base fixture, side by side with a
shell loop over the same sysfs files in the style of NHC's check_hw_ib.

Usage: bench/health_quick.py [--runs 100] [--build build] [--compare OLD_GPUDIAG_HEALTH]

The shell loops are written by this script (into a temp dir) so they read exactly the
fixture the binary reads. Runs are interleaved (A, B, A, B, ...) so that machine noise
hits every contender alike; ratios come from one run of this script.
"""
import argparse
import os
import statistics
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# What NHC's check_hw_ib does per port, with bash builtins only: read state,
# phys_state, rate and link_layer and compare them with expectations.
IB_LOOP = r'''#!/bin/bash
root=$1 bad=0 n=0
for port in "$root"/sys/class/infiniband/*/ports/*; do
  hca=${port%/ports/*}; hca=${hca##*/}
  [[ $hca == mlx5_bond_* ]] && continue
  n=$((n+1))
  read -r state < "$port/state"; read -r phys < "$port/phys_state"
  read -r rate < "$port/rate"; read -r ll < "$port/link_layer"
  [[ $state == "4: ACTIVE" ]] || { echo "$hca port ${port##*/} state $state"; bad=1; }
  [[ $phys == "5: LinkUp" ]] || { echo "$hca port ${port##*/} phys_state $phys"; bad=1; }
  [[ ${rate%% *} -ge 400 ]] || { echo "$hca port ${port##*/} rate $rate"; bad=1; }
  [[ $ll == InfiniBand ]] || { echo "$hca port ${port##*/} link_layer $ll"; bad=1; }
done
[[ $n -eq 8 ]] || { echo "found $n HCAs, expected 8"; bad=1; }
exit $((bad * 2))
'''

# The same, plus what --quick covers beyond IB: count NVIDIA GPUs from vendor/class,
# decode ACS on each bridge above a GPU or HCA (od over config space, as a shell
# must), and read the IOMMU group types.
QUICK_LOOP = IB_LOOP.replace("exit $((bad * 2))\n", "") + r'''
gpus=0
declare -A bridges
for dev in "$root"/sys/bus/pci/devices/*; do
  read -r vendor < "$dev/vendor"; read -r class < "$dev/class"
  if [[ $vendor == 0x10de && ( $class == 0x0302* || $class == 0x0300* ) ]] || [[ $vendor == 0x15b3 ]]; then
    [[ $vendor == 0x10de ]] && gpus=$((gpus+1))
    real=$(readlink -f "$dev"); path=${real#"$root"/sys/devices/}
    IFS=/ read -ra parts <<< "$path"
    for ((i=1; i<${#parts[@]}-1; i++)); do bridges[${parts[i]}]=1; done
  fi
done
[[ $gpus -eq 8 ]] || { echo "found $gpus GPUs, expected 8"; bad=1; }
for b in "${!bridges[@]}"; do
  cfg="$root/sys/bus/pci/devices/$b/config"
  off=256
  while ((off)); do
    hdr=$(od -An -t x4 -j $off -N 4 "$cfg" | tr -d ' ')
    [[ -z $hdr || $hdr == 00000000 ]] && break
    if [[ $((16#${hdr:4:4})) -eq 13 ]]; then
      ctrl=$(od -An -t x2 -j $((off + 6)) -N 2 "$cfg" | tr -d ' ')
      (( 16#$ctrl & 12 )) && { echo "ACS redirect on $b"; bad=1; }
      break
    fi
    off=$((16#${hdr:0:3}))
  done
done
for t in "$root"/sys/kernel/iommu_groups/*/type; do
  [[ -e $t ]] || continue
  read -r type < "$t"; [[ $type == DMA* ]] && { echo "IOMMU translated"; bad=1; break; }
done
exit $((bad * 2))
'''


def time_once(argv):
    t0 = time.perf_counter()
    r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t0
    if r.returncode not in (0, 1):
        raise SystemExit(f"bench: {argv[0]} exited {r.returncode}: {r.stderr.decode()[:400]}")
    return dt


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--compare-config", metavar="FILE",
                    help="the config for --compare (its own release's etc/gpudiag.yaml, when this one's has keys "
                         "it does not know)")
    ap.add_argument("--compare", metavar="BIN",
                    help="another gpudiag-health (an older build) whose --quick runs interleaved with this one's")
    args = ap.parse_args()
    health = os.path.join(args.build, "healthcheck", "gpudiag-health")
    fixture = os.path.join(args.build, "fixtures", "healthy")
    config = os.path.join(ROOT, "etc", "gpudiag.yaml")
    for need in (health, fixture):
        if not os.path.exists(need):
            raise SystemExit(f"bench: {need} is missing: run ./scripts/build first")

    with tempfile.TemporaryDirectory() as tmp:
        ib_sh, quick_sh = os.path.join(tmp, "nhc_style_ib.sh"), os.path.join(tmp, "shell_quick.sh")
        for path, text in ((ib_sh, IB_LOOP), (quick_sh, QUICK_LOOP)):
            with open(path, "w") as f:
                f.write(text)
        contenders = {
            "gpudiag-health --quick": [health, "--quick", "--config", config, "--fs-root", fixture],
            "shell loop, same files (ib+gpu+acs+iommu)": ["/bin/bash", quick_sh, fixture],
            "gpudiag-health --checks ib": [health, "--checks", "ib", "--config", config, "--fs-root", fixture],
            "NHC-style check_hw_ib shell loop": ["/bin/bash", ib_sh, fixture],
        }
        if args.compare:
            # An older build rejects checks it does not know in health.checks, which
            # --quick ignores anyway.
            old_config = args.compare_config or os.path.join(tmp, "compare.yaml")
            if not args.compare_config:
                with open(config) as src, open(old_config, "w") as dst:
                    dst.writelines(line for line in src if not line.lstrip().startswith("checks:"))
            contenders["--compare: gpudiag-health --quick"] = [args.compare, "--quick", "--config", old_config,
                                                              "--fs-root", fixture]
        # Both shells must agree with the binary that the fixture is healthy.
        for name, argv in contenders.items():
            rc = subprocess.run(argv, stdout=subprocess.DEVNULL).returncode
            if rc != 0:
                raise SystemExit(f"bench: '{name}' says the healthy fixture is not healthy (exit {rc})")
        times = {name: [] for name in contenders}
        for _ in range(args.runs):
            for name, argv in contenders.items():
                times[name].append(time_once(argv))

    med = {name: statistics.median(t) * 1000 for name, t in times.items()}
    print(f"median wall time over {args.runs} interleaved runs, base fixture (8 GPUs, 9 HCAs, 25 bridges)")
    for name, m in med.items():
        print(f"  {name:<45} {m:8.2f} ms")
    names = list(med)
    print(f"ratio shell/gpudiag, --quick scope: {med[names[1]] / med[names[0]]:.1f}x")
    print(f"ratio shell/gpudiag, ib only:       {med[names[3]] / med[names[2]]:.1f}x")
    if args.compare:
        print(f"ratio this/--compare, --quick:      {med[names[0]] / med[names[4]]:.2f}x")


if __name__ == "__main__":
    main()
