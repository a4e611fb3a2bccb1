#!/usr/bin/env bash
# The API contract under generated input: schemathesis (pinned) with every check on, over the whole committed
# OpenAPI document, against the real server on a seeded database, as operator, tenant admin, tenant member and
# node agent. Exits non-zero on any failure.
#
#   1. cargo build; a fresh database `gpuplane_contract` on the server of DATABASE_URL (dropped and created);
#   2. `gpuplane serve --bind 127.0.0.1:0`; `gpuplane bootstrap`; scripts/schemathesis/seed.py seeds a tenant
#      with a balance (admin and member keys), a pool, a registered agent, a lease and a job;
#   3. schemathesis runs once per role, with the seeded ids as path parameters (scripts/schemathesis/config.toml).
#
#   DATABASE_URL              PostgreSQL server to use (default postgres://postgres@127.0.0.1:5432/postgres)
#   CONTRACT_MAX_EXAMPLES     test cases per operation and role (default 10; the CI runtime grows with it)
#   CONTRACT_SEED             hypothesis seed (default 1), for reproducible runs
#   CONTRACT_KEEP=1           keep the scratch directory (server log, reports) and the database
#   SCHEMATHESIS_VENV         where schemathesis is installed (default ~/.cache/gpuplane/schemathesis-<version>)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# shellcheck source=scripts/lib/server.sh
. "$root/scripts/lib/server.sh"

SCHEMATHESIS_VERSION=4.32.5
venv=${SCHEMATHESIS_VENV:-$HOME/.cache/gpuplane/schemathesis-$SCHEMATHESIS_VERSION}
max_examples=${CONTRACT_MAX_EXAMPLES:-10}
seed=${CONTRACT_SEED:-1}

base_url=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
db_name=gpuplane_contract
contract_url="${base_url%/*}/$db_name"

work=$(mktemp -d "${TMPDIR:-/tmp}/gpuplane-contract.XXXXXX")
server_pid=""
cleanup() {
  local rc=$?
  stop_server
  if [ "$rc" -ne 0 ]; then
    echo "contract: FAILED (exit $rc); server log: $work/server.log" >&2
    grep -E "ERROR|panicked" "$work/server.log" 2>/dev/null | tail -n 20 >&2 || true
  fi
  if [ "${CONTRACT_KEEP:-0}" = 1 ] || [ "$rc" -ne 0 ]; then
    echo "contract: scratch directory kept: $work" >&2
  else
    rm -rf "$work"
    psql -q "$base_url" -c "DROP DATABASE IF EXISTS $db_name WITH (FORCE)" >/dev/null 2>&1 || true
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ "$("$venv/bin/schemathesis" --version 2>/dev/null | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' || true)" != "$SCHEMATHESIS_VERSION" ]; then
  echo "contract: installing schemathesis $SCHEMATHESIS_VERSION into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi

echo "contract: cargo build"
cargo build --quiet
bin="$root/target/debug/gpuplane"

fresh_database "$base_url" "$db_name"

# Generous credential throttling: the run exchanges many keys from one address (the 429 is tested in Rust).
start_server contract "$bin" "$contract_url" "$work" \
  GPUPLANE_AUTH_RATE_PER_MINUTE=100000 GPUPLANE_AUTH_RATE_BURST=100000 GPUPLANE_TOKEN_TTL_SECS=3600

operator_key=$(DATABASE_URL="$contract_url" RUST_LOG=warn "$bin" bootstrap --name contract 2>/dev/null)
python3 "$root/scripts/schemathesis/seed.py" "$url" "$operator_key" >"$work/seed.env"
# shellcheck disable=SC1091
. "$work/seed.env"

# Path parameters: the seeded objects, so operations reach their handlers instead of stopping at 404.
sed -e "s/@TENANT_ID@/$TENANT_ID/g" -e "s/@POOL_ID@/$POOL_ID/g" -e "s/@NODE_ID@/$NODE_ID/g" \
  -e "s/@LEASE_ID@/$LEASE_ID/g" -e "s/@JOB_ID@/$JOB_ID/g" \
  "$root/scripts/schemathesis/config.toml" >"$work/schemathesis.toml"

failed=0
# Readers first, the operator last: its run suspends tenants and terminates leases, which would turn the
# other roles' runs into a series of 403s and 409s.
roles="member agent admin operator"
for role in $roles; do
  case "$role" in
    operator) token=$OPERATOR_TOKEN ;;
    admin) token=$ADMIN_TOKEN ;;
    member) token=$MEMBER_TOKEN ;;
    agent) token=$AGENT_TOKEN ;;
  esac
  echo "contract: schemathesis as $role"
  (cd "$work" && "$venv/bin/schemathesis" --config-file "$work/schemathesis.toml" run "$root/openapi/openapi.json" \
      --url "$url" -H "Authorization: Bearer $token" --checks all --max-examples "$max_examples" --seed "$seed" \
      --workers 1 --no-color --report junit --report-dir "$work/report-$role") >"$work/$role.log" 2>&1 || failed=1
  grep -E "generated|^=+ .* in [0-9.]+s =+$" "$work/$role.log" | sed "s/^/contract: $role: /"
done
if [ "$failed" -ne 0 ]; then
  for role in $roles; do
    echo "---- $role ----"
    sed -n '/FAILURES/,$p' "$work/$role.log" | head -n 400
  done
  exit 1
fi
echo "contract: 0 failures"
