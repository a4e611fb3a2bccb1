#!/usr/bin/env bash
# Check that the committed OpenAPI document is accepted by the client generators tenants use:
# openapi-python-client (Python; any warning, i.e. a skipped endpoint or schema, fails) and openapi-typescript
# (TypeScript types, then type-checked with tsc --strict). Uses the pinned tools of scripts/generate-sdks.sh
# (sdk/.tools/, sdk/typescript/node_modules/, both ignored by git) and writes into a scratch directory only.
# scripts/check-sdks.sh goes further: the committed SDKs must equal what the document generates.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

env -u OPENAPI_SPEC -u ALLOW_GENERATOR_WARNINGS scripts/generate-sdks.sh --out "$work"
sdk/typescript/node_modules/.bin/tsc --noEmit --strict "$work/typescript/src/schema.d.ts"
echo "openapi: python and typescript generators accept the document"
