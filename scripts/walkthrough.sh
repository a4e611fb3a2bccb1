#!/usr/bin/env bash
# docs/walkthrough.md, run as written: its ```sh blocks, in order, in one bash shell, then its end state checked.
#   1. cargo build; a fresh database `gpuplane_walkthrough` on the server of DATABASE_URL (dropped and created);
#   2. the blocks, extracted with their line numbers kept, run by `bash -eu` (traced; no pipefail, as in a reader's
#      shell, where `... | grep -q` may stop reading early) in a clean environment (env -i: PATH, HOME). Only this
#      differs from a reader's shell: the working directory is a scratch one whose ./target/release/gpuplane is
#      the debug build just made, DATABASE_URL names the fresh database, GPUPLANE_BIND a free port (8080 may be
#      busy) and TMPDIR the scratch directory (the agent's). The document itself waits for what is asynchronous
#      (the server, the agent's registration, the job, metering), with the loops a reader runs too;
#   3. tests/walkthrough/check_end_state.py, with the shell's API, OP, TOKEN, POOL, LEASE and JOB: the job
#      succeeded, the lease is released, and the month's draft invoice, the ledger and the balance hold the
#      lease's exact price (docs/billing.md's rounding rule).
# Whatever happens, what the document started in the background (the server, the agent) is stopped on exit and
# the database dropped; the scratch directory goes too unless the run failed. Prints `ok ...` per check and
# `walkthrough: ...`; on failure, the ends of the run's log (the trace and the answers) and of the document's logs.
#
#   DATABASE_URL          the PostgreSQL server to use (default postgres://postgres@127.0.0.1:5432/postgres)
#   WALKTHROUGH_KEEP=1    keep the scratch directory (the run's log, the server's and agent's) and the database
#   WALKTHROUGH_TIMEOUT   seconds the document may take (default 240)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# shellcheck source=scripts/lib/server.sh
. "$root/scripts/lib/server.sh"

base_url=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
db_name=gpuplane_walkthrough
walk_url="${base_url%/*}/$db_name"
doc=docs/walkthrough.md

work=$(mktemp -d "${TMPDIR:-/tmp}/gpuplane-walkthrough.XXXXXX")
run_pid=""
cleanup() {
  local rc=$?
  # The document's shell stops what it started (its EXIT trap); on a signal, it gets one.
  if [ -n "$run_pid" ]; then
    kill -TERM "$run_pid" 2>/dev/null || true
    wait "$run_pid" 2>/dev/null || true
  fi
  if [ "$rc" -ne 0 ]; then
    [ "$rc" -ne 124 ] || echo "walkthrough: the document did not finish within ${WALKTHROUGH_TIMEOUT:-240} s" >&2
    echo "walkthrough: FAILED (exit $rc); the end of the run's log ($work/run.log: the trace, the answers, the checks):" >&2
    tail -n 30 "$work/run.log" >&2 2>/dev/null || true
    grep -E '^FAILED ' "$work/run.log" >&2 2>/dev/null || true
    # The logs the document writes into its own scratch directory (made by mktemp -d under TMPDIR).
    for log in "$work"/tmp.*/*.log; do
      [ -f "$log" ] || continue
      echo "walkthrough: the end of $log:" >&2
      tail -n 15 "$log" >&2
    done
  fi
  if [ "${WALKTHROUGH_KEEP:-0}" = 1 ]; then
    echo "walkthrough: kept the scratch directory $work and the database $db_name" >&2
    exit "$rc"
  fi
  psql -q "$base_url" -c "DROP DATABASE IF EXISTS $db_name WITH (FORCE)" >/dev/null 2>&1 || true
  if [ "$rc" -ne 0 ]; then
    echo "walkthrough: scratch directory kept (logs): $work" >&2
  else
    rm -rf "$work"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "walkthrough: cargo build"
cargo build --quiet
bin="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import sys, json; print(json.load(sys.stdin)["target_directory"])')/debug/gpuplane"

echo "walkthrough: fresh database $db_name"
fresh_database "$base_url" "$db_name"

# The document's ```sh blocks; every other line blank but the first (never a command: a heading or a fence), which
# turns the trace on, so that the trace's line numbers are the document's.
awk 'NR == 1 { print "set -x"; inside = /^```sh$/; next }
  /^```sh$/ { inside = 1; print ""; next } /^```/ && inside { inside = 0 } { print inside ? $0 : "" }' \
  "$doc" >"$work/walkthrough.sh"
blocks=$(grep -c '^```sh$' "$doc" || true)
[ "$blocks" -gt 0 ] || { echo "walkthrough: no \`\`\`sh block in $doc" >&2; exit 1; }

# The shell the document runs in: the blocks (traced), then the checks with the variables the blocks left. However
# it exits, it then stops the document's background jobs, newest first (the agent, then the server).
cat >"$work/shell.sh" <<'EOF'
. "$WALKTHROUGH_ROOT/scripts/lib/server.sh"
stop_started() {
  local pid
  # shellcheck disable=SC2034 # server_pid is stop_server's argument
  for pid in $(jobs -p | tac); do server_pid=$pid; stop_server; done
}
trap stop_started EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
PS4='+ walkthrough.md:${LINENO}: '
. "$WALKTHROUGH_WORK/walkthrough.sh"
{ set +x; } 2>/dev/null
echo "walkthrough: the document ran; checking the end state"
API=$API OP=$OP TOKEN=$TOKEN POOL=$POOL LEASE=$LEASE JOB=$JOB python3 -u "$WALKTHROUGH_ROOT/tests/walkthrough/check_end_state.py"
EOF

mkdir -p "$work/run/target/release"
ln -s "$bin" "$work/run/target/release/gpuplane"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

echo "walkthrough: running the $blocks sh blocks of $doc (server on 127.0.0.1:$port)"
started=$SECONDS
# timeout signals its own process group (the shell, the server, the agent); the shell's trap then stops the rest.
(
  cd "$work/run"
  exec env -i PATH="$PATH" HOME="$HOME" WALKTHROUGH_ROOT="$root" WALKTHROUGH_WORK="$work" TMPDIR="$work" \
    DATABASE_URL="$walk_url" GPUPLANE_BIND="127.0.0.1:$port" \
    timeout "${WALKTHROUGH_TIMEOUT:-240}" bash -eu "$work/shell.sh"
) >"$work/run.log" 2>&1 &
run_pid=$!
wait "$run_pid"
run_pid=""
grep -E '^(ok|walkthrough:) ' "$work/run.log"
echo "walkthrough: passed in $((SECONDS - started)) s"
