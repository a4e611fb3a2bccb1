#!/usr/bin/env bash
# Every committed benchmark, in a short mode: each runs end to end (its database seeded, its service started, its
# load driven, its report made) on a few nodes for a second or two, built in the test profile. The figures are
# not judged and no page is written (BENCH_DOC empty): this is so that no bench can break unseen between the
# sessions that run it for real (`cargo bench --bench <name>`, which rewrites its page in docs/benchmarks/).
#
#   scripts/bench-smoke.sh          CI: every bench
#   scripts/bench-smoke.sh NAME...  those benches only
set -euo pipefail
cd "$(dirname "$0")/.."
export BENCH_DOC="" BENCH_SECONDS=1 BENCH_WARMUP_SECONDS=0 BENCH_RUNS=2 BENCH_PGBENCH=0 \
  BENCH_NODES=4 BENCH_CLIENTS=2 BENCH_DB_CONNECTIONS=2 BENCH_TENANTS=2 BENCH_RAW_HOURS=1 \
  BENCH_LEASES_PER_TENANT=2 BENCH_ITERATIONS=2 BENCH_EVENTS=20 BENCH_ENDPOINTS=1 BENCH_WORKERS=1 BENCH_ROWS=1000 \
  BENCH_KEYS=4 BENCH_SESSIONS_PER_KEY=2 BENCH_PAIRS=20 BENCH_EXPLAINS=2 BENCH_ROUNDS=2 BENCH_ROUND_SECS=1
# The bench targets as Cargo.toml lists them.
mapfile -t all < <(sed -n '/^\[\[bench\]\]/{n;s/^name = "\(.*\)"/\1/p}' Cargo.toml)
benches=("${@:-${all[@]}}")
[ "${#benches[@]}" -gt 0 ] || { echo "bench-smoke: no benches found in Cargo.toml" >&2; exit 1; }
args=()
for bench in "${benches[@]}"; do args+=(--bench "$bench"); done
start=$(date +%s)
# One build, then each bench's main in turn (harness = false: cargo runs it as it is).
cargo test -q "${args[@]}"
echo "bench-smoke: ${#benches[@]} benches ran in short mode ($(( $(date +%s) - start )) s): ${benches[*]}"
