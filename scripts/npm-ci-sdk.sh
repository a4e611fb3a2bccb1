#!/usr/bin/env bash
# Install sdk/typescript's pinned dependencies (openapi-typescript, openapi-fetch, typescript, @types/node) exactly
# as sdk/typescript/package-lock.json says, unless node_modules already matches that lock file.
set -euo pipefail
cd "$(dirname "$0")/../sdk/typescript"
stamp=node_modules/.gpuplane-lock.sha256
want=$(sha256sum package.json package-lock.json | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "sdk: npm ci in sdk/typescript"
  npm ci --no-audit --no-fund --loglevel=error >/dev/null
  echo "$want" >"$stamp"
fi
