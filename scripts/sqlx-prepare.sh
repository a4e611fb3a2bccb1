#!/usr/bin/env bash
# The offline data of the compile-time checked queries (`sqlx::query!` / `query_as!`): `.sqlx/`, one JSON file per
# query with its parameter and column types as PostgreSQL describes them. Builds read it (SQLX_OFFLINE=true in
# .cargo/config.toml) and need no database; this script remakes it from the migrations.
#
#   scripts/sqlx-prepare.sh           rewrite .sqlx/ (run it after changing a checked query or a migration)
#   scripts/sqlx-prepare.sh --check   CI: fail if .sqlx/ differs from what the code and migrations give
#
# It applies migrations/*.sql to a scratch database `gpuplane_sqlx` on the server of DATABASE_URL (dropped and
# made anew), then recompiles the server crate with the macros connected to it, writing into a scratch directory.
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
[ "${1:-}" = "--check" ] && check=1

server=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
server=${server%/*}
db=${SQLX_PREPARE_DB:-gpuplane_sqlx}  # another name lets two checkouts prepare at once
url="$server/$db"
PGOPTIONS="-c client_min_messages=warning" psql "$server/postgres" -qX -v ON_ERROR_STOP=1 -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db" >/dev/null
for migration in migrations/*.sql; do
  # As sqlx applies them: each in one transaction, unless it says `-- no-transaction` on its first line.
  if head -n 1 "$migration" | grep -q -- '-- no-transaction'; then
    psql "$url" -qX -v ON_ERROR_STOP=1 -f "$migration" >/dev/null
  else
    psql "$url" -qX -v ON_ERROR_STOP=1 -1 -f "$migration" >/dev/null
  fi
done

out=$(mktemp -d)
trap 'rm -rf "$out"; psql "$server/postgres" -qX -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true' EXIT
# Proc macros cannot tell cargo which variables they read: touching the crate roots makes them expand again.
touch src/lib.rs crates/gpuplane-store/src/lib.rs
SQLX_OFFLINE=false DATABASE_URL="$url" SQLX_OFFLINE_DIR="$out" cargo check --quiet --lib --tests --benches
touch src/lib.rs crates/gpuplane-store/src/lib.rs

if [ "$check" -eq 1 ]; then
  if ! diff -ru .sqlx "$out" >"$out.diff" 2>&1; then
    head -n 80 "$out.diff" >&2
    rm -f "$out.diff"
    echo "sqlx: FAILED: .sqlx/ is stale for the checked queries and the migrations (diff above)." >&2
    echo "      Run scripts/sqlx-prepare.sh and commit .sqlx/." >&2
    exit 1
  fi
  rm -f "$out.diff"
  echo "sqlx: .sqlx/ matches the checked queries ($(ls "$out" | wc -l) queries)"
else
  rm -rf .sqlx
  mkdir -p .sqlx
  cp "$out"/*.json .sqlx/ 2>/dev/null || true
  echo "sqlx: wrote .sqlx/ ($(ls .sqlx | wc -l) queries)"
fi
