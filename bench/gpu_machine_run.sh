#!/bin/bash
# Runs the GPU path on a machine with a real GPU and prints every figure docs/BENCHMARKS.md
# records: the probe's devices/p2p/allreduce, gpudiag-health's GPU checks (also with
# NCCL_DEBUG=INFO, whose log must not reach the probe's JSON), bench/gpu_allreduce.py, and
# torch's own all_reduce over the same sizes for comparison (bench/torch_allreduce.py).
#
# Usage: bench/gpu_machine_run.sh BUILD [OUTDIR]
# BUILD holds healthcheck/gpudiag-health, libexec/gpudiag/gpudiag-gpu-probe and, optionally,
# tests/gpudiag_gpu_cli_tests; BUILD/../lib, if present, holds the shared libraries
# gpudiag-health needs where they are not installed (a GPU machine without Debian's packages).
set -u
BUILD=$(readlink -f "$1")
OUTDIR=${2:-/tmp/gpudiag-gpu-run}
mkdir -p "$OUTDIR"
HERE=$(dirname "$(readlink -f "$0")")
[ -d "$BUILD/../lib" ] && export LD_LIBRARY_PATH="$BUILD/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# NCCL as a Python wheel installs libnccl.so.2 outside the loader's paths.
if ! ldconfig -p | grep -q 'libnccl.so.2 '; then
  nccl=$(find / -xdev -name libnccl.so.2 -path '*nvidia*' 2>/dev/null | head -1)
  [ -n "$nccl" ] && export LD_LIBRARY_PATH="$(dirname "$nccl"):$LD_LIBRARY_PATH" && echo "libnccl.so.2: $nccl"
fi
P=$BUILD/libexec/gpudiag/gpudiag-gpu-probe
H=$BUILD/healthcheck/gpudiag-health
step() { echo; echo "=== $*"; }

step machine
uname -r; nvidia-smi --query-gpu=name,driver_version,pci.bus_id,memory.total,mig.mode.current --format=csv
nvidia-smi topo -m 2>&1 | head -20
step probe devices
time "$P" devices | tee "$OUTDIR/devices.json"
step probe p2p --bandwidth
time "$P" p2p --bandwidth | tee "$OUTDIR/p2p.json"
step probe allreduce, NCCL_DEBUG=INFO
NCCL_DEBUG=INFO "$P" allreduce --sizes 8M,64M,1G 2>"$OUTDIR/allreduce_nccl_info.log" | tee "$OUTDIR/allreduce.json"
echo "stderr lines (NCCL's INFO log): $(wc -l <"$OUTDIR/allreduce_nccl_info.log")"
grep -m8 -E 'NCCL version|Channel|comm 0x|Using network|Init COMPLETE' "$OUTDIR/allreduce_nccl_info.log"

n=$(nvidia-smi -L | wc -l)
cfg=$OUTDIR/gpudiag.yaml
cat >"$cfg" <<YAML
gpu: {count: $n}
p2p: {bandwidth: true}
nccl:
  bytes: 1G
  min_bandwidth:
    - {model: "*H100*", gpus: 1, algbw: 100}
    - {model: "*H200*", gpus: 1, algbw: 100}
YAML
step gpudiag-health --checks gpu,p2p,nccl -v
time "$H" --config "$cfg" --checks gpu,p2p,nccl -v; echo "exit $?"
step same with NCCL_DEBUG=INFO in the environment
NCCL_DEBUG=INFO "$H" --config "$cfg" --checks gpu,p2p,nccl --format json >"$OUTDIR/health_nccl_debug.json"; echo "exit $?"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); [print(c["name"], c["status"], [f["message"] for f in c.get("findings",[])]) for c in r["checks"]]' "$OUTDIR/health_nccl_debug.json"
step gpudiag-health --quick
"$H" --config "$cfg" --quick; echo "exit $?"

step bench/gpu_allreduce.py
python3 "$HERE/gpu_allreduce.py" --build "$BUILD"
step "bench/nccl_reference.py (the same all_reduce through CuPy's NCCL)"
python3 "$HERE/nccl_reference.py"

# Failures a real driver gives without touching the GPU's settings.
bad=$OUTDIR/gpudiag-2gpus.yaml
sed "s/count: $n}/count: $((n + 1))}/" "$cfg" >"$bad"
step "failure: gpu.count one more than the node has"
"$H" --config "$bad" --checks gpu,nccl; echo "exit $?"
step "failure: CUDA sees no GPU (CUDA_VISIBLE_DEVICES=), NVML sees them all"
CUDA_VISIBLE_DEVICES= "$H" --config "$cfg" --checks gpu,p2p,nccl; echo "exit $?"
step "failure: CUDA sees a GPU that does not exist (CUDA_VISIBLE_DEVICES=GPU-00000000)"
CUDA_VISIBLE_DEVICES=GPU-00000000 "$P" allreduce --sizes 8M; echo " exit $?"
step "failure: more memory than the GPU has (allreduce --sizes 200G)"
time "$P" allreduce --sizes 200G; echo " exit $?"
step "failure: the wait limit expires while a kernel runs (--wait-limit 0.001, 4G x 200)"
time "$P" --wait-limit 0.001 allreduce --sizes 4G --iters 200; echo " exit $?"
step "the GPU after the failures"
"$P" devices | head -c 400; echo
"$H" --config "$cfg" --checks gpu,nccl; echo "exit $?"

if [ -x "$BUILD/tests/gpudiag_gpu_cli_tests" ]; then
  step "gpudiag_gpu_cli_tests (RealGpu.* run here)"
  "$BUILD/tests/gpudiag_gpu_cli_tests" --gtest_filter="RealGpu.*:RealProbe.*" 2>&1 | tail -25
fi
