#!/usr/bin/env python3
"""Every path the project's Markdown names exists: paths of this repository written in the text (`src/...`,
`crates/...`, `docs/...`, and the other top-level folders; from the repository's root or the document's folder)
and relative links (`[text](jobs.md#anchor)`). A path in another revision is written `REV:path` and checked in
git (`00a7ba9:src/leases/allocation.sql`); one in another repository is written with its owner and name in front
(`NVIDIA/NeMo/docs/...`) and not checked. "Exists" means in git, as a clean clone has it: a tracked file or a
folder holding one, or a path git ignores (a cache or output a tool makes, such as `sdk/.tools`). Exits 1,
listing each path that is not there.

    scripts/check-doc-paths.py
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOP = "src|crates|docs|scripts|tests|migrations|deploy|runtime|sdk|examples|benches|openapi|\\.ci"
# Not after a word character, '/', '.', ':' or '-': `x/src/...` is another repository's path, `REV:src/...` a
# revision's (handled below).
PATH = re.compile(rf"(?<![\w/.:-])((?:{TOP})/[A-Za-z0-9_./{{}}<>*-]*[A-Za-z0-9_/])")
AT_REVISION = re.compile(rf"\b([0-9a-f]{{7,40}}):((?:{TOP})/[A-Za-z0-9_./-]*[A-Za-z0-9_])")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)\s]*)?\)")


def git_paths() -> set[str]:
    """Every tracked file and every folder that holds one, relative to the root."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    paths: set[str] = set()
    for name in tracked.splitlines():
        parts = name.split("/")
        paths.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    return paths


def exists(paths: set[str], doc: str, path: str) -> bool:
    """Whether `path`, from the root or from the folder of the document `doc` (both relative to the root), is
    in git or ignored by it."""
    candidates = {os.path.normpath(path), os.path.normpath(os.path.join(os.path.dirname(doc), path))}
    for candidate in candidates:
        if candidate.startswith(".."):
            continue
        if candidate in paths:
            return True
        # As a file, or as a folder (a pattern such as `.tools/` matches only a folder, which git cannot tell
        # from a name that is not there).
        for name in (candidate, candidate + "/"):
            ignored = subprocess.run(["git", "check-ignore", "-q", "--no-index", name], check=False, cwd=ROOT)
            if ignored.returncode == 0:
                return True
    return False


def main() -> int:
    listed = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True, check=True)
    paths = git_paths()
    missing = []
    for name in listed.stdout.split():
        doc = ROOT / name
        if not doc.is_file():
            continue
        text = doc.read_text(encoding="utf-8")
        for m in PATH.finditer(text):
            path = m.group(1)
            if any(c in path for c in "{}<>*"):  # a pattern (`migrations/CHECKSUMS.<version>`), not a path
                continue
            if not exists(paths, name, path):
                missing.append(f"{name}: {path}")
        for m in AT_REVISION.finditer(text):
            rev, path = m.groups()
            found = subprocess.run(["git", "cat-file", "-e", f"{rev}:{path}"], check=False, cwd=ROOT, capture_output=True)
            if found.returncode != 0:
                missing.append(f"{name}: {rev}:{path} (not in that revision)")
        for m in LINK.finditer(text):
            target = m.group(1)
            if re.match(r"^[a-z]+:", target):  # https:, mailto:
                continue
            if not exists(paths, name, target):
                missing.append(f"{name}: link {target}")
    for line in missing:
        print(f"doc-paths: missing: {line}", file=sys.stderr)
    if missing:
        print(f"doc-paths: FAILED: {len(missing)} paths named in the docs do not exist", file=sys.stderr)
        return 1
    print(f"doc-paths: every path named in the {len(listed.stdout.split())} Markdown files exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
