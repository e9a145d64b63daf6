#!/bin/bash
# Tests etc/nhc/gpudiag.nhc the way NHC's own tests do: source the module into bash
# with a stub `die`, call the check, and look at its return code and message.
set -u
SOURCE=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${GPUDIAG_BUILD_DIR:-$SOURCE/build}
FIX=$BUILD/fixtures
CONF=$SOURCE/etc/gpudiag.yaml
fails=0 passes=0

DIED_RC= DIED_MSG=
die() { DIED_RC=$1; DIED_MSG=$2; return 1; }

GPUDIAG_HEALTH=$BUILD/healthcheck/gpudiag-health
# shellcheck source=../../etc/nhc/gpudiag.nhc
. "$SOURCE/etc/nhc/gpudiag.nhc"

expect() {  # name, want_rc, want_message_substring, check args...
  local name=$1 want_rc=$2 want_msg=$3; shift 3
  DIED_RC= DIED_MSG=
  check_gpudiag "$@"
  local rc=$?
  if [[ $rc -eq $want_rc && ( -z $want_msg && -z $DIED_MSG || -n $want_msg && $DIED_MSG == *"$want_msg"* ) ]]; then
    echo "ok: $name"; passes=$((passes + 1))
  else
    echo "FAIL: $name: rc=$rc (want $want_rc) die='$DIED_MSG' (want '*$want_msg*')"; fails=$((fails + 1))
  fi
}

expect "healthy passes" 0 "" --fs-root "$FIX/healthy" --config "$CONF" --quick
expect "warning passes" 0 "" --fs-root "$FIX/iommu-translated" --config "$CONF" --quick
expect "down port dies" 1 "check_gpudiag:  mlx5_3 port 1 is DOWN (phys_state Polling)" \
  --fs-root "$FIX/port-down" --config "$CONF" --quick
expect "acs dies" 1 "ACS ReqRedir|CmpltRedir is enabled on switch downstream port 0000:32:00.0" \
  --fs-root "$FIX/acs-redirect" --config "$CONF"
expect "unknown dies with the reason" 1 "only the first 64 bytes" --fs-root "$FIX/nonroot-config" --config "$CONF"
expect "bad config dies naming the file" 1 "/nonexistent.yaml" --config /nonexistent.yaml
# With --drain, a node the drain breaker holds back (here: Slurm cannot be counted, as
# scontrol fails) stays in service: exit 4 passes.
STUB=$(mktemp -d)
trap 'rm -rf "$STUB"' EXIT
printf '#!/bin/sh\necho "slurm_load_node error: Unable to contact slurm controller" >&2\nexit 1\n' > "$STUB/scontrol"
chmod +x "$STUB/scontrol"
cat "$CONF" > "$STUB/gpudiag.yaml"
printf 'drain:\n  jitter: 0\n' >> "$STUB/gpudiag.yaml"
PATH="$STUB:$PATH" GPUDIAG_SYSLOG_SOCKET="$STUB/no-syslog" \
  expect "held back by the breaker passes" 0 "" --fs-root "$FIX/port-down" --config "$STUB/gpudiag.yaml" --quick --drain
GPUDIAG_HEALTH=/nonexistent/gpudiag-health
expect "missing binary dies" 1 "/nonexistent/gpudiag-health is missing" --quick

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]
