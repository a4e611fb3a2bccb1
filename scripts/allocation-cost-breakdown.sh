#!/usr/bin/env bash
# Where the database time of one allocation cycle goes.
#
# For each variant below, a scratch database is migrated and seeded like the allocation bench (one pool of
# 1,000 nodes x 8 GPUs, one tenant with a key and a balance), the variant's change is applied, and pgbench
# calls allocate_lease_fast + release_lease_fast (the two statements the service sends per cycle) for
# SECONDS after a 3 s warm-up and an ANALYZE, with `nodes` vacuumed every 5 s as the service does. The
# figure is leases created per second, counted in the database; the baseline runs first and last, so the
# spread between its two figures shows the noise. The variants are diagnostics, not options:
# the service runs the baseline.
#
#   scripts/allocation-cost-breakdown.sh            # RUN_SECONDS=15 CLIENTS=32 (the service's pool size)
#
# Needs PostgreSQL on 127.0.0.1:5432 (user postgres, trust auth), pgbench and psql on PATH; builds the
# release binary for its `migrate` command. Creates and drops the database gpuplane_cost_breakdown.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_RUN=${RUN_SECONDS:-15}
CLIENTS=${CLIENTS:-32}
HOST=${PGHOST:-127.0.0.1}
DB=gpuplane_cost_breakdown
PSQL=(psql -h "$HOST" -U postgres -X -q -v ON_ERROR_STOP=1)
POOL=00000000-0000-7000-8000-000000000001
TENANT=00000000-0000-7000-8000-0000000000a1
KEY=00000000-0000-7000-8000-0000000000b1

cargo build --release --quiet
SCRIPT=benches/allocation_cycle.sql
trap '"${PSQL[@]}" -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true' EXIT
CYCLE=(-D "key_id=$KEY" -D "tenant_id=$TENANT" -D "pool_id=$POOL" -D gpus=8 -f "$SCRIPT")

run() {
    local label=$1 change=$2
    "${PSQL[@]}" -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1
    target/release/gpuplane migrate --database-url "postgres://postgres@$HOST:5432/$DB" >/dev/null 2>&1
    "${PSQL[@]}" -d "$DB" <<SQL
INSERT INTO pools (id, name, gpu_model, region, price_per_gpu_hour_minor, currency)
    VALUES ('$POOL', 'h100-cost', 'h100', 'bench', 249, 'USD');
INSERT INTO pool_prices (id, pool_id, effective_from, price_per_gpu_hour_minor)
    VALUES (gen_random_uuid(), '$POOL', now() - interval '1 day', 249);
INSERT INTO nodes (id, pool_id, hostname, address, intra_link, intra_link_gbps, network_gbps, rdma, free_gpus, gpu_count)
    SELECT gen_random_uuid(), '$POOL', 'cost-node-' || i, '10.0.' || (i / 256) || '.' || (i % 256),
           'nvlink', 900, 400, true, 8, 8
    FROM generate_series(1, 1000) AS i;
INSERT INTO gpus (id, node_id, idx, uuid)
    SELECT gen_random_uuid(), n.id, g, 'GPU-' || n.hostname || '-' || g FROM nodes n CROSS JOIN generate_series(0, 7) AS g;
INSERT INTO tenants (id, name) VALUES ('$TENANT', 'cost');
INSERT INTO tenant_balances (tenant_id, currency, balance_minor) VALUES ('$TENANT', 'USD', 1000000000000);
INSERT INTO api_keys (id, tenant_id, name, role, prefix, secret_hash)
    VALUES ('$KEY', '$TENANT', 'cost', 'tenant_admin', 'gpk_cost', '\x00');
SQL
    if [ -n "$change" ]; then "${PSQL[@]}" -d "$DB" -c "$change"; fi
    pgbench -h "$HOST" -U postgres -n -M prepared -c "$CLIENTS" -j 2 -T 3 "${CYCLE[@]}" "$DB" >/dev/null 2>&1
    "${PSQL[@]}" -d "$DB" -c "VACUUM ANALYZE"
    (while sleep 5; do "${PSQL[@]}" -d "$DB" -c "VACUUM (SKIP_LOCKED) nodes" 2>/dev/null || true; done) &
    local vacuum=$!
    local before after
    before=$("${PSQL[@]}" -d "$DB" -Atc "SELECT count(*) FROM leases")
    local started
    started=$(date +%s.%N)
    pgbench -h "$HOST" -U postgres -n -M prepared -c "$CLIENTS" -j 2 -T "$SECONDS_PER_RUN" "${CYCLE[@]}" "$DB" >/dev/null
    local elapsed
    elapsed=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
    kill "$vacuum" 2>/dev/null || true
    after=$("${PSQL[@]}" -d "$DB" -Atc "SELECT count(*) FROM leases")
    printf '| %s | %s |\n' "$label" "$(awk -v n=$((after - before)) -v t="$elapsed" 'BEGIN { printf "%.0f", n / t }')"
}

echo "| variant ($CLIENTS clients, ${SECONDS_PER_RUN} s) | allocations/s |"
echo "|---|---:|"
run "baseline (what the service runs)" ""
run "without the foreign keys of lease_gpus and lease_events" \
    "ALTER TABLE lease_gpus DROP CONSTRAINT lease_gpus_gpu_id_fkey, DROP CONSTRAINT lease_gpus_node_id_fkey,
         DROP CONSTRAINT lease_gpus_lease_id_fkey;
     ALTER TABLE lease_events DROP CONSTRAINT lease_events_lease_id_fkey"
run "without the secondary indexes of leases" \
    "DROP INDEX leases_tenant_idx, leases_tenant_live_idx, leases_active_ends_idx, leases_metering_idx"
run "synchronous_commit = off" "ALTER DATABASE $DB SET synchronous_commit = off"
run "all three together" \
    "ALTER TABLE lease_gpus DROP CONSTRAINT lease_gpus_gpu_id_fkey, DROP CONSTRAINT lease_gpus_node_id_fkey,
         DROP CONSTRAINT lease_gpus_lease_id_fkey;
     ALTER TABLE lease_events DROP CONSTRAINT lease_events_lease_id_fkey;
     DROP INDEX leases_tenant_idx, leases_tenant_live_idx, leases_active_ends_idx, leases_metering_idx;
     ALTER DATABASE $DB SET synchronous_commit = off"
run "baseline again (run-to-run spread)" ""
