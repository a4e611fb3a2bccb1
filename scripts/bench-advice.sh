#!/usr/bin/env bash
# Benchmark `POST /v1/advice` over all pools: 7 pools (one per catalog GPU model) x 1,430 nodes x 8 GPUs
# (10,010 nodes, 80,080 GPUs), timed over HTTP with curl against a release build. Usage: scripts/bench-advice.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432}
DB=gpuplane_bench_advice
PORT=${PORT:-18181}
RUNS=${RUNS:-20}
cargo build --release -q
BIN=./target/release/gpuplane
psql "$PGURL/postgres" -qc "DROP DATABASE IF EXISTS $DB" 2>/dev/null
export DATABASE_URL="$PGURL/$DB"
$BIN migrate >/dev/null
OPERATOR_KEY=$($BIN bootstrap 2>/dev/null)
psql "$DATABASE_URL" -q <<'SQL'
INSERT INTO tenants (id, name) VALUES ('00000000-0000-7000-8000-0000000000aa', 'bench');
INSERT INTO pools (id, name, gpu_model, region, price_per_gpu_hour_minor, currency)
SELECT gen_random_uuid(), 'pool-' || key, key, 'r1', 100 + (row_number() OVER ())::int * 50, 'USD' FROM gpu_models;
INSERT INTO nodes (id, pool_id, hostname, address, intra_link, intra_link_gbps, network_gbps, rdma, free_gpus, gpu_count)
SELECT gen_random_uuid(), p.id, p.name || '-n' || i, '10.0.0.1', 'nvlink', 900, 400, true, 8, 8
FROM pools p, generate_series(1, 1430) i;
INSERT INTO gpus (id, node_id, idx, uuid) SELECT gen_random_uuid(), n.id, g, n.hostname || '-' || g FROM nodes n, generate_series(0, 7) g;
ANALYZE;
SQL
GPUPLANE_JWT_SECRET=bench-secret-bench-secret-bench-secret-0123 GPUPLANE_SECRETS_KEY="bench:$(head -c 32 /dev/urandom | base64)" $BIN serve --bind 127.0.0.1:$PORT >/dev/null 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null; psql "$PGURL/postgres" -qc "DROP DATABASE IF EXISTS $DB" 2>/dev/null' EXIT
API=http://127.0.0.1:$PORT
for _ in $(seq 1 50); do curl -sf $API/healthz >/dev/null && break; sleep 0.2; done
json() { python3 -c "import sys,json; print(json.load(sys.stdin)[\"$1\"])"; }
OP=$(curl -s $API/v1/auth/token -H 'content-type: application/json' -d "{\"api_key\":\"$OPERATOR_KEY\"}" | json access_token)
KEY=$(curl -s $API/v1/admin/tenants/00000000-0000-7000-8000-0000000000aa/api-keys -H "authorization: Bearer $OP" \
  -H 'content-type: application/json' -d '{"name":"bench","role":"tenant_member"}' | json api_key)
TOKEN=$(curl -s $API/v1/auth/token -H 'content-type: application/json' -d "{\"api_key\":\"$KEY\"}" | json access_token)
BODY='{"model":{"preset":"llama3-70b"},"workload":{"kind":"train","seq_len":4096,"global_batch":1024},"target":{"training_tokens":10000000000}}'
times=()
for _ in $(seq 1 "$RUNS"); do
  t=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' $API/v1/advice -H "authorization: Bearer $TOKEN" \
    -H 'content-type: application/json' -d "$BODY")
  [ "${t%% *}" = 200 ] || { echo "advice failed: $t" >&2; exit 1; }
  times+=("${t#* }")
done
printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1*1000} END {printf "POST /v1/advice, 7 pools, 10,010 nodes, 80,080 GPUs: median %.1f ms, max %.1f ms over %d runs\n", a[int((NR+1)/2)], a[NR], NR}'
