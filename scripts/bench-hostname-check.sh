#!/usr/bin/env bash
# The cost of the nodes.hostname CHECK constraint on a row update, as migration 0020 changed it: the bounded
# pattern of 0001 (`{0,252}`) against the unbounded pattern with the length tested apart (same hostnames pass).
# PostgreSQL checks every CHECK constraint on every UPDATE of a row, and a node's row is updated by each
# heartbeat, allocation and release. Two tables, alike but for that constraint, 1,000 rows each; pgbench updates
# a random row of one, then of the other, in turns, one client, without waiting for the WAL flush (the flush
# would hide the CPU cost). Usage: scripts/bench-hostname-check.sh [seconds per run, default 5] [rounds, default 3]
set -euo pipefail
. "$(dirname "$0")/lib/scratch.sh"
seconds="${1:-5}"
rounds="${2:-3}"
scratch_database "${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}" gpuplane_bench_hostname
psql "$dburl" -q -v ON_ERROR_STOP=1 <<'SQL'
CREATE TABLE hosts_bounded (id int PRIMARY KEY, hostname text NOT NULL, seen timestamptz,
    CHECK (hostname ~ '^[A-Za-z0-9][A-Za-z0-9.-]{0,252}$'));
CREATE TABLE hosts_unbounded (id int PRIMARY KEY, hostname text NOT NULL, seen timestamptz,
    CHECK (hostname ~ '^[A-Za-z0-9][A-Za-z0-9.-]*$' AND char_length(hostname) <= 253));
INSERT INTO hosts_bounded SELECT g, 'gpu-node-' || lpad(g::text, 4, '0') || '.dc1.example' FROM generate_series(1, 1000) g;
INSERT INTO hosts_unbounded SELECT * FROM hosts_bounded;
SQL
script="$scratch_dir/update.sql"
for round in $(seq "$rounds"); do
    for table in hosts_bounded hosts_unbounded; do
        printf '\\set n random(1, 1000)\nUPDATE %s SET seen = now() WHERE id = :n;\n' "$table" > "$script"
        echo "round $round  $table  update latency $(latency "$script" "$seconds")"
    done
done
