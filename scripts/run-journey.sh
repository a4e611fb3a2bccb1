#!/usr/bin/env bash
# The tenant journey through the generated SDKs, against the real server and real agents on simulated GPUs:
#   1. cargo build; a fresh database `gpuplane_journey` on the server of DATABASE_URL (dropped and created);
#   2. `gpuplane serve --bind 127.0.0.1:0` with short heartbeat/liveness timings; `gpuplane bootstrap`;
#   3. tests/journey/journey.py (the Python SDK, installed from sdk/python into a scratch venv): the whole journey;
#   4. tests/journey/ts (the TypeScript SDK): type-checked with tsc --strict, then run with node.
# The server and every agent are stopped on exit, whatever happens. Prints `journey: ...` and `journey-ts: ...`.
#
#   DATABASE_URL    the PostgreSQL server to use (default postgres://postgres@127.0.0.1:5432/postgres)
#   JOURNEY_KEEP=1  keep the scratch directory (logs, agent state) and the database afterwards
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# shellcheck source=scripts/lib/server.sh
. "$root/scripts/lib/server.sh"

base_url=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
db_name=gpuplane_journey
journey_url="${base_url%/*}/$db_name"
admin_url=$base_url

work=$(mktemp -d "${TMPDIR:-/tmp}/gpuplane-journey.XXXXXX")
server_pid=""
py_pid=""
cleanup() {
  local rc=$?
  if [ -n "$py_pid" ]; then kill -TERM "$py_pid" 2>/dev/null || true; fi
  # Agents (started by journey.py, which records their pids) first, then the server; only our own processes.
  if [ -f "$work/py/agents.pids" ]; then
    while read -r pid; do
      [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null || true
    done <"$work/py/agents.pids"
  fi
  stop_server
  if [ -f "$work/py/agents.pids" ]; then
    sleep 0.5
    while read -r pid; do
      [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
    done <"$work/py/agents.pids"
  fi
  if [ "$rc" -ne 0 ]; then
    echo "journey: FAILED (exit $rc); server log: $work/server.log" >&2
    tail -n 40 "$work/server.log" 2>/dev/null >&2 || true
  fi
  if [ "${JOURNEY_KEEP:-0}" = 1 ] || [ "$rc" -ne 0 ]; then
    echo "journey: scratch directory kept: $work" >&2
  else
    rm -rf "$work"
    psql -q "$admin_url" -c "DROP DATABASE IF EXISTS $db_name WITH (FORCE)" >/dev/null 2>&1 || true
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "journey: cargo build"
cargo build --quiet
bin="$root/target/debug/gpuplane"

echo "journey: fresh database $db_name"
fresh_database "$admin_url" "$db_name"

# The Python SDK, installed as a tenant would (pip install ./sdk/python), into a scratch venv (built meanwhile).
(
  python3 -m venv "$work/venv"
  "$work/venv/bin/pip" install -q --disable-pip-version-check "$root/sdk/python"
) >"$work/pip.log" 2>&1 &
pip_pid=$!

echo "journey: starting gpuplane serve"
start_server journey "$bin" "$journey_url" "$work" \
  GPUPLANE_HEARTBEAT_INTERVAL_SECS=1 GPUPLANE_UNREACHABLE_AFTER_SECS=5 GPUPLANE_OFFLINE_AFTER_SECS=30

operator_key=$(DATABASE_URL="$journey_url" RUST_LOG=warn "$bin" bootstrap --name journey 2>/dev/null)

if ! wait "$pip_pid"; then
  cat "$work/pip.log" >&2
  echo "journey: pip install ./sdk/python failed" >&2
  exit 1
fi

echo "journey: Python SDK"
py_rc=0
# In the background and waited for, so that a signal to this script runs the cleanup at once.
"$work/venv/bin/python" "$root/tests/journey/journey.py" \
  --url "$url" --operator-key "$operator_key" --binary "$bin" --work-dir "$work/py" &
py_pid=$!
wait "$py_pid" || py_rc=$?
py_pid=""

echo "journey: TypeScript SDK"
ts_rc=0
"$root/scripts/npm-ci-sdk.sh"
(cd "$root/sdk/typescript" && npm run --silent build) || ts_rc=$?
if [ "$ts_rc" -eq 0 ]; then
  # The check imports "@gpuplane/client" as a tenant would: link it to the freshly built package.
  ts_dir="$root/tests/journey/ts"
  mkdir -p "$ts_dir/node_modules/@gpuplane"
  ln -sfn ../../../../../sdk/typescript "$ts_dir/node_modules/@gpuplane/client"
  rm -rf "$ts_dir/out"
  tsc="$root/sdk/typescript/node_modules/.bin/tsc"
  { "$tsc" -p "$ts_dir/tsconfig.json" --noEmit --strict &&
    "$tsc" -p "$ts_dir/tsconfig.json" &&
    GPUPLANE_URL="$url" GPUPLANE_API_KEY="$operator_key" node "$ts_dir/out/main.js"; } || ts_rc=$?
fi
if [ "$ts_rc" -ne 0 ]; then
  echo "journey-ts: FAILED (exit $ts_rc)"
fi

[ "$py_rc" -eq 0 ] && [ "$ts_rc" -eq 0 ]
