#!/usr/bin/env bash
# CI: the committed SDKs (sdk/python/gpuplane_client/, sdk/typescript/src/schema.d.ts) must be exactly what the
# committed OpenAPI document generates, and the hand-written TypeScript wrapper must type-check against them.
# Regenerates into a scratch directory with scripts/generate-sdks.sh (which also fails when the Python generator
# skips anything) and diffs; nothing in the repository is written except the ignored tool caches.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! env -u OPENAPI_SPEC -u ALLOW_GENERATOR_WARNINGS scripts/generate-sdks.sh --out "$work" >"$work/generate.log" 2>&1; then
  cat "$work/generate.log" >&2
  echo "sdk: FAILED: the SDKs cannot be generated cleanly from openapi/openapi.json (above)" >&2
  exit 1
fi

stale=0
if ! diff -ru -x __pycache__ sdk/python/gpuplane_client "$work/python/gpuplane_client" >"$work/python.diff"; then
  stale=1
  head -n 60 "$work/python.diff" >&2
fi
if ! diff -u sdk/typescript/src/schema.d.ts "$work/typescript/src/schema.d.ts" >"$work/typescript.diff"; then
  stale=1
  head -n 60 "$work/typescript.diff" >&2
fi
if [ "$stale" -ne 0 ]; then
  echo "sdk: FAILED: the committed SDKs differ from what openapi/openapi.json generates (diff above, first lines)." >&2
  echo "     Run scripts/generate-sdks.sh and commit sdk/." >&2
  exit 1
fi

(cd sdk/typescript && npm run --silent typecheck) || {
  echo "sdk: FAILED: sdk/typescript/src/index.ts does not type-check against the generated schema.d.ts" >&2
  exit 1
}
echo "sdk: the committed SDKs match openapi/openapi.json"
