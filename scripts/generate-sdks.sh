#!/usr/bin/env bash
# Regenerate both client SDKs from the committed OpenAPI document (openapi/openapi.json):
#   sdk/python/gpuplane_client/      openapi-python-client (pinned below), formatted by its pinned ruff
#   sdk/typescript/src/schema.d.ts   openapi-typescript (pinned in sdk/typescript/package-lock.json)
# Only those two paths are written; the hand-written parts (sdk/python/gpuplane_client_ext/, pyproject.toml,
# READMEs, sdk/typescript/src/index.ts) are never touched. The output is the same on every run: pinned tools,
# no timestamps, ruff isolated from any configuration around it.
#
#   scripts/generate-sdks.sh                 write into sdk/
#   scripts/generate-sdks.sh --out DIR       write the generated paths under DIR instead (DIR/python/..., DIR/typescript/...)
#   OPENAPI_SPEC=FILE scripts/generate-sdks.sh   generate from another document (a candidate, before committing it);
#                                            scripts/check-sdks.sh always uses the committed one
#
# The Python generator's warnings (an endpoint or schema it skipped) are fatal: the SDK would silently lack it.
# ALLOW_GENERATOR_WARNINGS=1 writes the SDKs anyway (and still prints the warnings).
# Tools live in sdk/.tools/ (ignored by git) and sdk/typescript/node_modules/ (npm ci from the lock file).
set -euo pipefail

OPENAPI_PYTHON_CLIENT_VERSION=0.29.1
RUFF_VERSION=0.17.6

root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/sdk"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) [ $# -ge 2 ] || { echo "usage: $0 [--out DIR]" >&2; exit 2; }; out=$(mkdir -p "$2" && cd "$2" && pwd); shift 2 ;;
    *) echo "usage: $0 [--out DIR]" >&2; exit 2 ;;
  esac
done
spec=$(realpath "${OPENAPI_SPEC:-$root/openapi/openapi.json}")
cd "$root"
tools="$root/sdk/.tools"
mkdir -p "$tools"

# --- tools -----------------------------------------------------------------------------------------------------
venv="$tools/venv-generator"
want="openapi-python-client==$OPENAPI_PYTHON_CLIENT_VERSION ruff==$RUFF_VERSION"
if [ "$(cat "$venv/.stamp" 2>/dev/null)" != "$want" ]; then
  echo "sdk: installing $want into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check $want
  echo "$want" >"$venv/.stamp"
fi

"$root/scripts/npm-ci-sdk.sh"

# --- Python ----------------------------------------------------------------------------------------------------
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Generated in a scratch directory (no configuration of the repository around it), then moved into place.
log=$(cd "$work" && PATH="$venv/bin:$PATH" "$venv/bin/openapi-python-client" generate --path "$spec" --meta none \
  --config "$root/sdk/python/openapi-python-client.yaml" --output-path "$work/gpuplane_client" 2>&1) || {
  echo "$log" >&2
  echo "sdk: openapi-python-client failed" >&2
  exit 1
}
if grep -qiE "warning|error|unable|skipp|will not be generated" <<<"$log"; then
  echo "$log" >&2
  if [ "${ALLOW_GENERATOR_WARNINGS:-0}" != 1 ]; then
    echo "sdk: openapi-python-client skipped parts of the document (above); fix the document (the Rust side)," >&2
    echo "     or set ALLOW_GENERATOR_WARNINGS=1 to write an incomplete SDK anyway" >&2
    exit 1
  fi
  echo "sdk: WARNING: writing a Python SDK that lacks what is listed above (ALLOW_GENERATOR_WARNINGS=1)" >&2
fi
# PEP 561: the generated package is fully typed; type checkers read its annotations only with this marker.
: >"$work/gpuplane_client/py.typed"
find "$work/gpuplane_client" \( -name __pycache__ -o -name .ruff_cache \) -prune -exec rm -rf {} +
mkdir -p "$out/python"
rm -rf "$out/python/gpuplane_client"
cp -R "$work/gpuplane_client" "$out/python/gpuplane_client"

# --- TypeScript ------------------------------------------------------------------------------------------------
mkdir -p "$out/typescript/src"
"$root/sdk/typescript/node_modules/.bin/openapi-typescript" "$spec" -o "$work/schema.d.ts" >/dev/null
cp "$work/schema.d.ts" "$out/typescript/src/schema.d.ts"

echo "sdk: generated $out/python/gpuplane_client and $out/typescript/src/schema.d.ts from ${spec#"$root/"}"
