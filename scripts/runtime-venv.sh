#!/usr/bin/env bash
# A cached virtual environment with torch, transformers and the Python tools pinned in runtime/requirements-ci.txt,
# plus gpuplane_runtime itself from this checkout. Installed once per machine (about 3 GB, a few minutes), then
# reused: the venv is rebuilt only when the pins change, and the runtime package (small, no dependencies pulled)
# is reinstalled from this checkout on every call so a fresh clone tests its own code.
#
#   scripts/runtime-venv.sh            prints the venv's path on its last line of stdout
#   GPUPLANE_RUNTIME_VENV=DIR ...      put the venv somewhere else (default /opt/gpuplane/venv-runtime as root,
#                                      else ~/.cache/gpuplane/venv-runtime)
#   GPUPLANE_RUNTIME_PYTHON=PYTHON ... the interpreter to make it from (default /usr/bin/python3)
#
# Use:  venv=$(scripts/runtime-venv.sh | tail -n1); "$venv/bin/python" -m pytest runtime/tests
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# Jobs run it too, as their sandbox's unprivileged user (tests/api/torch_e2e.rs binds it into the sandbox): so by
# default it lives where any user may read it (/opt, as root; not under a 0700 home) and is made from the
# system's Python (/usr/bin/python3, Debian's python3-venv), not from an interpreter under a private home.
if [ -z "${GPUPLANE_RUNTIME_VENV:-}" ] && [ -w /opt ]; then
  venv=/opt/gpuplane/venv-runtime
else
  venv=${GPUPLANE_RUNTIME_VENV:-$HOME/.cache/gpuplane/venv-runtime}
fi
python=${GPUPLANE_RUNTIME_PYTHON:-/usr/bin/python3}
[ -x "$python" ] || python=python3
reqs="$root/runtime/requirements-ci.txt"
want="$python $(grep -v '^#' "$reqs" | sed '/^$/d' | sort | tr '\n' ' ')"
if [ "$(cat "$venv/.stamp" 2>/dev/null)" != "$want" ]; then
  echo "runtime-venv: installing $want into $venv" >&2
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  "$python" -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$reqs" >&2
  echo "$want" >"$venv/.stamp"
fi
# Requirement files added to the same environment (torch is there), each with a stamp of its own: installed again
# only when its pins change. add_requirements NAME FILE [PIP_OPTION...]
add_requirements() {
  local name=$1 file=$2
  shift 2
  local want
  want=$(grep -v '^#' "$file" | sed '/^$/d' | sort | tr '\n' ' ')
  if [ "$(cat "$venv/.stamp-$name" 2>/dev/null)" != "$want" ]; then
    echo "runtime-venv: installing $want into $venv" >&2
    "$venv/bin/pip" install -q --disable-pip-version-check "$@" -r "$file" >&2
    echo "$want" >"$venv/.stamp-$name"
  fi
}
# The frameworks whose config files gpuplane renders, to check them with their own parsers
# (scripts/check-framework-files.py). DeepSpeed builds from its sdist against the torch installed here (no ops
# compiled: DS_BUILD_OPS=0).
export DS_BUILD_OPS=0
add_requirements frameworks "$root/runtime/requirements-frameworks.txt" --no-build-isolation
# `transformers serve`'s own dependencies (the serving end-to-end test's engine).
add_requirements serving "$root/runtime/requirements-serving.txt"
# Diffusion pipelines (gpuplane_runtime.images and its test).
add_requirements diffusion "$root/runtime/requirements-diffusion.txt"
# Non-editable, no dependency resolution: the pins above are the environment.
"$venv/bin/pip" install -q --disable-pip-version-check --no-deps --force-reinstall "$root/runtime" >&2
echo "$venv"
