#!/usr/bin/env bash
# CI: the SDKs' types are honest where a tenant meets them, in the READMEs' examples.
# Python, under a pinned `mypy --strict` (configuration: [tool.mypy] of sdk/python/pyproject.toml):
#   1. the ```python blocks of sdk/python/README.md, extracted in order into one module (they build on each other:
#      the first makes `client` and `pool`, the last uses them), tests/journey/journey.py (run by
#      scripts/run-journey.sh) and the hand-written gpuplane_client_ext type-check without an error;
#   2. negative checks: that module plus one deliberate mistake each (an attribute a model lacks, a wrong argument
#      type, the wrong type for raise_for_problem's result) fails with exactly that mistake's error, so values are
#      typed (not Any) and the check can fail.
# TypeScript, with the pinned tsc of sdk/typescript/package-lock.json (strict, as sdk/typescript/tsconfig.json):
#   3. the ```ts blocks of sdk/typescript/README.md, extracted in order into one ES module importing
#      "@gpuplane/client" (mapped to sdk/typescript/src/index.ts), type-check; the same mistakes fail.
# Writes nothing into the repository (mypy's cache and the extracted modules live in a scratch directory).
#
#   SDK_TYPES_VENV=DIR   where mypy is installed (default ~/.cache/gpuplane/sdk-types-mypy-<version>)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

MYPY_VERSION=1.18.2 # the runtime's mypy (runtime/requirements-ci.txt): one mypy for the project
# The SDK's runtime dependencies (sdk/python/pyproject.toml), pinned so the stubs mypy reads are the same everywhere.
pins="mypy==$MYPY_VERSION httpx==0.28.1 attrs==26.1.0"
venv=${SDK_TYPES_VENV:-$HOME/.cache/gpuplane/sdk-types-mypy-$MYPY_VERSION}
if [ "$(cat "$venv/.stamp" 2>/dev/null)" != "$pins" ]; then
  echo "sdk-types: installing $pins into $venv"
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check $pins
  echo "$pins" >"$venv/.stamp"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/gpuplane-sdk-types.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The README's Python blocks, in order, each headed by where it comes from.
python3 - "$root/sdk/python/README.md" "$work/readme_examples.py" <<'EOF'
import re
import sys

readme, out = sys.argv[1], sys.argv[2]
text = open(readme, encoding="utf-8").read()
blocks = [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in re.finditer(r"^```python\n(.*?)^```$", text, re.S | re.M)]
if not blocks:
    sys.exit(f"sdk-types: no ```python block in {readme}")
with open(out, "w", encoding="utf-8") as f:
    for line, code in blocks:
        f.write(f"# sdk/python/README.md, the block at line {line}\n{code}\n")
print(f"sdk-types: {len(blocks)} Python blocks from sdk/python/README.md")
EOF

mypy() {
  MYPYPATH="$root/sdk/python" "$venv/bin/mypy" --config-file "$root/sdk/python/pyproject.toml" \
    --cache-dir "$work/mypy-cache" --no-error-summary --no-pretty --hide-error-context "$@"
}

echo "sdk-types: mypy $MYPY_VERSION --strict on the README's examples, tests/journey/journey.py, gpuplane_client_ext"
if ! mypy "$work/readme_examples.py" tests/journey/journey.py sdk/python/gpuplane_client_ext >"$work/positive.log" 2>&1; then
  sed "s|$work/readme_examples.py|README examples (extracted)|" "$work/positive.log" >&2
  echo "sdk-types: FAILED: the above does not type-check under mypy --strict" >&2
  echo "          (README examples: the line numbers are of the extracted module; its comments name the block)" >&2
  exit 1
fi

# Each mistake, appended to the examples, must be reported as exactly one error of the given code on its line.
failed=0
negative() {
  local name=$1 code=$2 mistake=$3
  local file="$work/negative_$code.py"
  cp "$work/readme_examples.py" "$file"
  printf '%s\n' "$mistake" >>"$file"
  local line
  line=$(wc -l <"$file")
  mypy "$file" >"$work/negative.log" 2>&1 && true
  if [ "$(grep -c ': error: ' "$work/negative.log")" = 1 ] && grep -qE "^[^:]*:$line: error: .*\[$code\]$" "$work/negative.log"; then
    echo "sdk-types: mypy reports $name: $(grep ': error: ' "$work/negative.log" | sed 's/^[^ ]* error: //')"
  else
    echo "sdk-types: FAILED: mypy does not report $name ($mistake) as exactly one [$code] error; it said:" >&2
    cat "$work/negative.log" >&2
    failed=1
  fi
}
negative "a field a model lacks" attr-defined 'print(pool.no_such_field)'
negative "a wrong argument type" arg-type 'CreateLeaseRequest(pool_id=pool.id, gpu_count="8", duration_hours=24)'
negative "a wrong type for raise_for_problem's result" assignment \
  'not_pools: int = raise_for_problem(list_pools.sync_detailed(client=client))'
[ "$failed" = 0 ] || exit 1
echo "sdk-types: the Python SDK's types hold under mypy --strict (README examples, journey, negative checks)"

# --- TypeScript ------------------------------------------------------------------------------------------------
"$root/scripts/npm-ci-sdk.sh"
tsc="$root/sdk/typescript/node_modules/.bin/tsc"
ts="$work/ts"
mkdir -p "$ts"
python3 - "$root/sdk/typescript/README.md" "$ts/readme_examples.mts" <<'EOF'
import re
import sys

readme, out = sys.argv[1], sys.argv[2]
text = open(readme, encoding="utf-8").read()
blocks = [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in re.finditer(r"^```ts\n(.*?)^```$", text, re.S | re.M)]
if not blocks:
    sys.exit(f"sdk-types: no ```ts block in {readme}")
with open(out, "w", encoding="utf-8") as f:
    for line, code in blocks:
        f.write(f"// sdk/typescript/README.md, the block at line {line}\n{code}\n")
print(f"sdk-types: {len(blocks)} TypeScript blocks from sdk/typescript/README.md")
EOF
# .mts: an ES module (the README awaits at top level); the compiler options of sdk/typescript/tsconfig.json.
cat >"$ts/tsconfig.json" <<EOF
{
  "compilerOptions": {
    "target": "ES2022",
    "module": "NodeNext",
    "moduleResolution": "NodeNext",
    "lib": ["ES2022", "DOM"],
    "strict": true,
    "noUncheckedIndexedAccess": true,
    "noEmit": true,
    "paths": { "@gpuplane/client": ["$root/sdk/typescript/src/index.ts"] },
    "typeRoots": ["$root/sdk/typescript/node_modules/@types"],
    "types": ["node"]
  },
  "files": ["check.mts"]
}
EOF
echo "sdk-types: tsc $("$tsc" --version | sed 's/^Version //') --strict on the README's examples"
cp "$ts/readme_examples.mts" "$ts/check.mts"
if ! (cd "$ts" && "$tsc" -p tsconfig.json) >"$ts/positive.log" 2>&1; then
  cat "$ts/positive.log" >&2
  echo "sdk-types: FAILED: sdk/typescript/README.md's examples do not type-check (line numbers: the extracted module)" >&2
  exit 1
fi
ts_negative() {
  local name=$1 code=$2 mistake=$3
  cp "$ts/readme_examples.mts" "$ts/check.mts"
  printf '%s\n' "$mistake" >>"$ts/check.mts"
  local line
  line=$(wc -l <"$ts/check.mts")
  (cd "$ts" && "$tsc" -p tsconfig.json) >"$ts/negative.log" 2>&1 && true
  if [ "$(grep -c ': error TS' "$ts/negative.log")" = 1 ] && grep -q "^check.mts($line,[0-9]*): error $code:" "$ts/negative.log"; then
    echo "sdk-types: tsc reports $name: $(sed 's/^[^ ]* error //' "$ts/negative.log" | cut -c1-100)"
  else
    echo "sdk-types: FAILED: tsc does not report $name ($mistake) as exactly one $code error; it said:" >&2
    cat "$ts/negative.log" >&2
    failed=1
  fi
}
ts_negative "a field a model lacks" TS2339 'console.log(pools[0]!.no_such_field);'
ts_negative "a wrong argument type" TS2322 \
  'await createLease(client, { pool_id: pools[0]!.id, gpu_count: "8", duration_hours: 24 });'
[ "$failed" = 0 ] || exit 1
echo "sdk-types: the TypeScript SDK's README examples hold under tsc --strict (and the negative checks)"
