#!/usr/bin/env bash
# What registering an agent waits for while it looks for launchers: the queries the agent ran before (one import
# of torch per Python launcher, `--version` of each console script) against the ones it runs now (one metadata
# read per interpreter, crates/gpuplane-agent/src/launchers.rs), side by side in one run, idle and with both
# cores busy. Usage: scripts/measure-launcher-queries.sh [VENV] (default: the runtime's, /opt/gpuplane/venv-runtime)
set -euo pipefail
venv=${1:-/opt/gpuplane/venv-runtime}
py="$venv/bin/python3"
query=$(sed -n '/^const METADATA_QUERY: &str = "/,/^";$/p' "$(dirname "$0")/../crates/gpuplane-agent/src/launchers.rs" \
  | sed '1s/^const METADATA_QUERY: &str = "//; $d')
before() {
  "$py" --version >/dev/null
  "$py" -c 'import torch; print(torch.__version__)' >/dev/null
  "$py" -c "import gpuplane_runtime; print(getattr(gpuplane_runtime, '__version__', ''))" >/dev/null
  for s in torchrun accelerate; do [ -x "$venv/bin/$s" ] && { "$venv/bin/$s" --version >/dev/null 2>&1 || true; }; done
}
after() {
  # One process for the interpreter: its modules and the console scripts whose #! names it (torchrun, accelerate).
  "$py" -c "$query" torch:torch gpuplane_runtime:gpuplane-runtime torch:torch accelerate:accelerate >/dev/null
}
seconds() {
  local t0 t1
  t0=$(date +%s%N); "$@"; t1=$(date +%s%N)
  printf '%d.%02d' $(((t1 - t0) / 1000000000)) $(((t1 - t0) / 10000000 % 100))
}
report() {
  for run in 1 2 3; do
    printf '%s run %s: before %6s s   after %6s s\n' "$1" "$run" "$(seconds before)" "$(seconds after)"
  done
}
report idle
busy=()
for _ in $(seq "$(nproc)"); do (while :; do :; done) & busy+=($!); done
trap 'kill "${busy[@]}" 2>/dev/null || true' EXIT
report busy
