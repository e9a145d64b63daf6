#!/bin/sh
# Stands in for gpudiag-gpu-probe where there is no GPU: prints the canned answer for
# the section it is asked for from $GPUDIAG_STANDIN_DIR/<section>.json. A file that
# starts with "hang" makes it hang (with a child in its process group, which the
# checker must kill too); one that starts with "crash" makes it die by SIGSEGV.
section=
for a in "$@"; do
  case "$a" in devices|p2p|allreduce) section=$a ;; esac
done
f="$GPUDIAG_STANDIN_DIR/$section.json"
case "$(head -c 5 "$f")" in
  hang*)
    # Named after this test's dir: tests that run in parallel have sleepers of their own.
    bash -c 'exec -a "gpudiag-standin-sleeper-${GPUDIAG_STANDIN_DIR##*/}" sleep 600' &
    wait
    ;;
  crash) kill -SEGV $$ ;;
esac
printf '%s ' "$@" >"$GPUDIAG_STANDIN_DIR/$section.args"
cat "$f"
