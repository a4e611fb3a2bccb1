#!/usr/bin/env bash
# What migration 0021 changed: webhook reads by audience (a tenant, or the operators) through the tenant
# indexes instead of `tenant_id IS NOT DISTINCT FROM $1`, which PostgreSQL cannot use as an index condition.
# A scratch database gets the migrations up to 0020 and a platform's worth of other tenants' webhook data
# (2,000 tenants with 5 endpoints and 100 events each); pgbench then measures, one client, without waiting for
# the WAL flush:
#   * emit: the outbox of one lease event (`webhook_emit`, what the trigger on lease_events calls for every
#     allocation and release) for a tenant without endpoints;
#   * page: the first page of one tenant's events, as `GET /v1/events` reads it (the tenant's id as a value, as
#     the service binds it).
# Then it applies 0021 and measures the same again.
# Usage: scripts/bench-webhook-audience.sh [seconds per run, default 5] [rounds, default 2]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/scratch.sh
seconds="${1:-5}"
rounds="${2:-2}"
scratch_database "${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}" gpuplane_bench_audience
for migration in migrations/00*.sql; do
    case "$migration" in migrations/0021_*) break ;; esac
    psql "$dburl" -q -v ON_ERROR_STOP=1 -f "$migration" > /dev/null
done
psql "$dburl" -q -v ON_ERROR_STOP=1 <<'SQL'
INSERT INTO tenants (id, name) SELECT gen_random_uuid(), 'tenant-' || g FROM generate_series(1, 2000) g;
INSERT INTO webhook_endpoints (id, tenant_id, url, event_types, secret)
SELECT gen_random_uuid(), t.id, 'https://hooks.example.com/' || t.name, '{*}', 'whsec_bench'
FROM tenants t, generate_series(1, 5);
INSERT INTO webhook_events (id, tenant_id, type, data)
SELECT webhook_uuid_v7(), t.id, 'lease.started', '{}' FROM tenants t, generate_series(1, 100);
INSERT INTO tenants (id, name) VALUES ('00000000-0000-7000-8000-000000000001', 'quiet');
VACUUM ANALYZE;
SQL
printf '%s\n' "SELECT webhook_emit(gen_random_uuid(), '00000000-0000-7000-8000-000000000001', 'lease.started', '{}');" > "$scratch_dir/emit.sql"
measure() {
    local label=$1 where=$2 tenant
    tenant=$(psql "$dburl" -qtAc "SELECT id FROM tenants WHERE name = 'tenant-1000'")
    printf '%s\n' "SELECT ev.id FROM webhook_events ev WHERE ${where//:tenant/\'$tenant\'} AND ev.id > '00000000-0000-0000-0000-000000000000' ORDER BY ev.id LIMIT 51;" > "$scratch_dir/page.sql"
    for round in $(seq "$rounds"); do
        for what in emit page; do
            echo "round $round  $label  $what  latency $(latency "$scratch_dir/$what.sql" "$seconds")"
        done
    done
}
measure "before 0021" "ev.tenant_id IS NOT DISTINCT FROM :tenant"
psql "$dburl" -q -v ON_ERROR_STOP=1 -f migrations/0021_webhook_audience_indexable.sql > /dev/null
psql "$dburl" -qc "ANALYZE"
measure "after 0021 " "webhook_in_audience(ev.tenant_id, :tenant)"
