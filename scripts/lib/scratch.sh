# Shared by the SQL micro-benchmarks (bench-hostname-check.sh, bench-webhook-audience.sh): a scratch database
# and a scratch folder, both removed when the calling shell exits, and pgbench's latency of a script. Source it.

# scratch_database ADMIN_URL NAME: create the empty database NAME (dropping one of that name first) and a scratch
# folder; set `dburl` to the database's URL and `scratch_dir` to the folder; remove both on exit.
scratch_database() {
  export PGOPTIONS="-c client_min_messages=warning"
  psql "$1" -qc "DROP DATABASE IF EXISTS $2" -c "CREATE DATABASE $2"
  scratch_dir=$(mktemp -d)
  trap "rm -rf '$scratch_dir'; psql '$1' -qc 'DROP DATABASE IF EXISTS $2'" EXIT
  dburl="${1%/*}/$2"
}

# latency SCRIPT SECONDS: pgbench's average latency of the SQL file SCRIPT on `dburl`, one client, prepared
# statements, without waiting for the WAL flush (the flush would hide the CPU cost).
latency() {
  PGOPTIONS="$PGOPTIONS -c synchronous_commit=off" pgbench -n -M prepared -c 1 -T "$2" -f "$1" "$dburl" 2>&1 \
    | sed -n 's/^latency average = //p'
}
