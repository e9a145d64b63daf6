#!/bin/sh
# gpudiag's Python reader (stacks/pyframes/) against the Pythons of another machine,
# such as the GPU test machine (Python 3.12.3, torch 2.11), which has none of gpudiag's
# build dependencies: the reader comes as the static binary tests/tools/pyframes_dump
# (built here: scripts/build build --target pyframes_dump).
#
#   bench/pyframes_on_device.sh PATH/TO/pyframes_dump
#   PYTHON=/opt/torch/.venv/bin/python3 sh bench/pyframes_on_device.sh .gpu/pyframes_dump
#
# Starts $PYTHON (default python3) with threads blocked in C (time.sleep, Event.wait,
# socket.recv) and, where torch sees a GPU, one blocked in torch.cuda.synchronize()
# behind torch.cuda._sleep; reads each with the binary and prints what it read, then a
# PASS/FAIL/SKIP line per check, all on stdout. Exit status 1 when a check failed.
# PYFRAMES_NO_TORCH=1 skips the torch process (the ctest pyframes_dump does).
set -u
dump=${1:?usage: pyframes_on_device.sh PATH/TO/pyframes_dump}
python=${PYTHON:-python3}
work=$(mktemp -d /tmp/pyframes_on_device.XXXXXX) || exit 1
pids=
failed=0
if [ ! -x "$dump" ]; then  # carried without its mode bits
  cp "$dump" "$work/pyframes_dump" && chmod +x "$work/pyframes_dump" && dump=$work/pyframes_dump
fi
cleanup() {
  for p in $pids; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

check() {  # check NAME FILE PATTERN: PASS when the dump in FILE has a line matching PATTERN
  if grep -Eq -- "$3" "$2"; then echo "PASS $1"; else echo "FAIL $1 (no line matching: $3)"; failed=1; fi
}

# Starts a Python script in the background; waits (up to $3 s) for it to print "ready".
start_python() {  # start_python SCRIPT OUT SECONDS
  "$python" "$1" >"$2" 2>"$2.err" </dev/null &
  pid=$!
  pids="$pids $pid"
  i=0
  while ! grep -q '^ready' "$2" 2>/dev/null; do
    i=$((i + 1))
    if [ "$i" -gt $(($3 * 10)) ] || ! kill -0 "$pid" 2>/dev/null; then return 1; fi
    sleep 0.1
  done
}

echo "== machine: $(uname -srm); python: $("$python" -VV 2>&1 | tr '\n' ' ') ($(command -v "$python"))"
echo "== reader: $dump ($(file -b "$dump" 2>/dev/null || echo 'file(1) not here'))"

cat >"$work/threads.py" <<'PY'
import os, socket, sys, threading, time

def sleeper(ready):
    ready.set()
    time.sleep(3600)  # line 5

class Waiter:
    def wait_here(self, ready):
        ev = threading.Event()
        ready.set()
        ev.wait()  # line 11

def receiver(ready, sock):
    ready.set()
    sock.recv(1)  # line 15

def main():
    a, b = socket.socketpair()
    started = []
    for target, args in ((sleeper, ()), (Waiter().wait_here, ()), (receiver, (a,))):
        ready = threading.Event()
        threading.Thread(target=target, args=(ready,) + args, daemon=True).start()
        ready.wait()
        started.append(ready)
    print("ready", os.getpid(), flush=True)
    os.read(os.pipe()[0], 1)  # line 26: a read that never returns

main()  # line 28
PY

echo "== threads blocked in C"
if start_python "$work/threads.py" "$work/threads.out" 30; then
  sleep 0.5  # each thread said "ready" just before its blocking call
  "$dump" "$pid" >"$work/threads.dump" 2>&1
  echo "exit status $?" >>"$work/threads.dump"
  cat "$work/threads.dump"
  f="$work/threads.py"
  check "python threads: the version is read" "$work/threads.dump" "^pid [0-9]+: CPython 3\.[0-9]+\.[0-9]+, gpudiag "
  check "python threads: time.sleep" "$work/threads.dump" "^    sleeper \($f:5\)$"
  check "python threads: Event.wait" "$work/threads.dump" "^    Waiter\.wait_here \($f:11\)$"
  check "python threads: socket.recv" "$work/threads.dump" "^    receiver \($f:15\)$"
  check "python threads: main thread in os.read" "$work/threads.dump" "^    main \($f:26\)$"
  check "python threads: the module frame" "$work/threads.dump" "^    <module> \($f:28\)$"
  check "python threads: every PID read" "$work/threads.dump" "^exit status 0$"
else
  echo "FAIL python threads: $python did not start the script"; cat "$work/threads.out.err"; failed=1
fi

cat >"$work/torch_sync.py" <<'PY'
import os
import torch

def spin():
    while True:
        torch.cuda._sleep(int(5e9))  # line 6: about 2.5 s of GPU time a round
        torch.cuda.synchronize()     # line 7

if not torch.cuda.is_available():
    print("ready", os.getpid(), "no-cuda", torch.__version__, flush=True)
    os.read(os.pipe()[0], 1)
torch.cuda.synchronize()  # CUDA initialized before the reader looks
print("ready", os.getpid(), torch.__version__, torch.cuda.get_device_name(0), flush=True)
spin()  # line 14
PY

echo "== torch blocked in torch.cuda.synchronize()"
if [ "${PYFRAMES_NO_TORCH:-0}" = 1 ]; then
  echo "SKIP torch: PYFRAMES_NO_TORCH=1"
elif ! "$python" -c 'import torch' 2>/dev/null; then
  echo "SKIP torch: $python cannot import torch"
elif ! start_python "$work/torch_sync.py" "$work/torch.out" 180; then
  echo "FAIL torch: the script did not start"; cat "$work/torch.out.err"; failed=1
elif grep -q no-cuda "$work/torch.out"; then
  echo "SKIP torch: torch sees no GPU ($(cat "$work/torch.out"))"
else
  echo "$(cat "$work/torch.out")"
  # Three reads a second apart: each round spends all but microseconds in synchronize.
  for n in 1 2 3; do
    sleep 1
    "$dump" "$pid" >>"$work/torch.dump" 2>&1
    echo "exit status $?" >>"$work/torch.dump"
  done
  cat "$work/torch.dump"
  f="$work/torch_sync.py"
  check "torch: synchronize is the innermost frame" "$work/torch.dump" "^    synchronize \(.*torch/cuda/__init__\.py:[0-9]+\)$"
  check "torch: the script's line" "$work/torch.dump" "^    spin \($f:7\)$"
  check "torch: the module frame" "$work/torch.dump" "^    <module> \($f:14\)$"
  check "torch: every read gave frames" "$work/torch.dump" "^exit status 0$"
  if grep -q "^exit status 1$" "$work/torch.dump"; then echo "FAIL torch: a read gave no frames"; failed=1; fi
fi

[ "$failed" = 0 ] && echo "== all checks passed" || echo "== some checks FAILED"
exit "$failed"
