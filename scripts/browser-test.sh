#!/usr/bin/env bash
# The web console in a real browser: Debian's Chromium (headless) through chromium-driver, driven by Selenium
# (pinned), against the real server and a real agent on simulated GPUs:
#   1. cargo build; a fresh database `gpuplane_browser` on the server of DATABASE_URL (dropped and created);
#   2. `gpuplane serve --bind 127.0.0.1:0` with short heartbeat timings; `gpuplane bootstrap`;
#   3. tests/browser/console_test.py: seeds a tenant, a pool and an agent, then the tenant admin, member and
#      operator scenarios (see its docstring), and screenshots of the main pages.
# The server and the agent are stopped on exit, whatever happens. Prints `ok ...` per check, `browser: ...` last.
#
#   DATABASE_URL         the PostgreSQL server to use (default postgres://postgres@127.0.0.1:5432/postgres)
#   BROWSER_SCREENSHOTS  where the screenshots go (default target/browser-screenshots, so a run leaves the tree
#                        clean; empty: none)
#   SCREENSHOTS_UPDATE=1 write them over the committed ones in docs/screenshots (the README's) instead
#   BROWSER_KEEP=1       keep the scratch directory (logs, failure page) and the database afterwards
#   SELENIUM_VENV        where Selenium is installed (default ~/.cache/gpuplane/selenium-<version>)
#   CHROMIUM, CHROMEDRIVER  the browser and its driver (default /usr/bin/chromium, /usr/bin/chromedriver)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# shellcheck source=scripts/lib/server.sh
. "$root/scripts/lib/server.sh"

SELENIUM_VERSION=4.27.1
venv=${SELENIUM_VENV:-$HOME/.cache/gpuplane/selenium-$SELENIUM_VERSION}
if [ "${SCREENSHOTS_UPDATE:-0}" = 1 ]; then
  shots=docs/screenshots
else
  shots=${BROWSER_SCREENSHOTS-target/browser-screenshots}
fi

base_url=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
db_name=gpuplane_browser
browser_url="${base_url%/*}/$db_name"

for tool in "${CHROMIUM:-/usr/bin/chromium}" "${CHROMEDRIVER:-/usr/bin/chromedriver}"; do
  [ -x "$tool" ] || { echo "browser: $tool is missing (apt-get install chromium chromium-driver)" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/gpuplane-browser.XXXXXX")
server_pid=""
py_pid=""
cleanup() {
  local rc=$?
  if [ -n "$py_pid" ]; then kill -TERM "$py_pid" 2>/dev/null || true; fi
  # The agent (started by the test, which records its pid), then the server; only our own processes.
  if [ -f "$work/py/agents.pids" ]; then
    while read -r pid; do
      [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null || true
    done <"$work/py/agents.pids"
  fi
  stop_server
  if [ "$rc" -ne 0 ]; then
    echo "browser: FAILED (exit $rc); server log: $work/server.log; page: $work/py/failure.html" >&2
    tail -n 20 "$work/server.log" 2>/dev/null >&2 || true
  fi
  if [ "${BROWSER_KEEP:-0}" = 1 ] || [ "$rc" -ne 0 ]; then
    echo "browser: scratch directory kept: $work" >&2
  else
    rm -rf "$work"
    psql -q "$base_url" -c "DROP DATABASE IF EXISTS $db_name WITH (FORCE)" >/dev/null 2>&1 || true
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ "$("$venv/bin/python" -c 'import selenium; print(selenium.__version__)' 2>/dev/null || true)" != "$SELENIUM_VERSION" ]; then
  echo "browser: installing selenium $SELENIUM_VERSION into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "selenium==$SELENIUM_VERSION"
fi

echo "browser: cargo build"
cargo build --quiet
bin="$(realpath -m "${CARGO_TARGET_DIR:-target}")/debug/gpuplane"  # where cargo build put it

echo "browser: fresh database $db_name"
fresh_database "$base_url" "$db_name"

echo "browser: starting gpuplane serve"
start_server browser "$bin" "$browser_url" "$work" \
  GPUPLANE_HEARTBEAT_INTERVAL_SECS=1 GPUPLANE_UNREACHABLE_AFTER_SECS=5 GPUPLANE_OFFLINE_AFTER_SECS=30

operator_key=$(DATABASE_URL="$browser_url" RUST_LOG=warn "$bin" bootstrap --name browser 2>/dev/null)

# The test writes one closed month's draft invoice straight into the database (see console_test.py).
export BROWSER_DATABASE_URL="$browser_url"
"$venv/bin/python" "$root/tests/browser/console_test.py" \
  --url "$url" --operator-key "$operator_key" --binary "$bin" --work-dir "$work/py" --screenshots "$shots" &
py_pid=$!
wait "$py_pid"
