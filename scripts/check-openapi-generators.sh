#!/usr/bin/env bash
# Check that the committed OpenAPI document is accepted by the client generators tenants use:
# openapi-python-client (Python) and openapi-typescript (TypeScript types, then type-checked with tsc).
# Tools are installed into a scratch directory; nothing is written into the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
spec="$PWD/openapi/openapi.json"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q "openapi-python-client==0.29.*" ruff
# Fail on any warning: a skipped endpoint or schema would silently drop it from the SDK.
out=$("$work/venv/bin/openapi-python-client" generate --path "$spec" --meta none --output-path "$work/py" 2>&1)
echo "$out"
if grep -qiE "warning|error|unable|skipp" <<<"$out"; then
  echo "openapi-python-client reported problems" >&2
  exit 1
fi

(cd "$work" && npm init -y >/dev/null && npm install -s --no-audit --no-fund openapi-typescript@7 typescript@5 >/dev/null)
"$work/node_modules/.bin/openapi-typescript" "$spec" -o "$work/schema.d.ts"
"$work/node_modules/.bin/tsc" --noEmit --strict "$work/schema.d.ts"
echo "openapi: python and typescript generators accept the document"
