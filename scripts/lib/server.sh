# Shared by the scripts that run the real service (run-journey.sh, contract-test.sh, browser-test.sh): a fresh
# database, `gpuplane serve` on a free port, and stopping it. Source it; the functions set `server_pid` and `url`.

# fresh_database ADMIN_URL NAME: drop the database NAME on the server of ADMIN_URL and create it empty.
fresh_database() {
  psql -q -v ON_ERROR_STOP=1 "$1" -c "DROP DATABASE IF EXISTS $2 WITH (FORCE)" >/dev/null
  psql -q -v ON_ERROR_STOP=1 "$1" -c "CREATE DATABASE $2" >/dev/null
}

# start_server TAG BIN DATABASE_URL WORK [NAME=VALUE ...]: `BIN serve --bind 127.0.0.1:0` on DATABASE_URL with a
# random signing secret, a random secrets key (key id TAG) and the given extra environment; stderr to WORK/server.log, stdout (drained, so the server
# can never block on a full pipe) to WORK/server.stdout. Sets `server_pid`, and `url` from its listening line.
start_server() {
  local tag=$1 bin=$2 database_url=$3 work=$4 line=""
  shift 4
  mkfifo "$work/server.out"
  env -u GPUPLANE_SECRETS_KEY_FILE DATABASE_URL="$database_url" \
    GPUPLANE_JWT_SECRET="$tag-secret-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')" \
    GPUPLANE_SECRETS_KEY="$tag:$(head -c 32 /dev/urandom | base64)" \
    RUST_LOG="${RUST_LOG:-warn}" "$@" \
    "$bin" serve --bind 127.0.0.1:0 >"$work/server.out" 2>"$work/server.log" &
  server_pid=$!
  exec 3<"$work/server.out"
  if ! read -r -t 60 line <&3; then
    echo "$tag: the server printed no listening line within 60 s" >&2
    return 1
  fi
  cat <&3 >"$work/server.stdout" &
  exec 3<&-
  case "$line" in
    "gpuplane listening on "*) url=${line#gpuplane listening on } ;;
    *) echo "$tag: unexpected server output: $line" >&2; return 1 ;;
  esac
  echo "$tag: server at $url"
}

# stop_server: SIGTERM (graceful shutdown), SIGKILL after 10 s.
stop_server() {
  if [ -n "${server_pid:-}" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$server_pid" 2>/dev/null || true
  fi
}
