#!/usr/bin/env python3
"""Every path the project's Markdown names exists: paths of this repository written in the text (`src/...`,
`crates/...`, `docs/...`, and the other top-level folders; from the repository's root or the document's folder)
and relative links (`[text](jobs.md#anchor)`). A path in another revision is written `REV:path` and checked in
git (`00a7ba9:src/leases/allocation.sql`); one in another repository is written with its owner and name in front
(`NVIDIA/NeMo/docs/...`) and not checked. Exits 1, listing each path that is not there.

    scripts/check-doc-paths.py
"""

from __future__ import annotations

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


def main() -> int:
    listed = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True, check=True)
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
            if not ((ROOT / path).exists() or (doc.parent / path).exists()):
                missing.append(f"{name}: {path}")
        for m in AT_REVISION.finditer(text):
            rev, path = m.groups()
            found = subprocess.run(["git", "cat-file", "-e", f"{rev}:{path}"], cwd=ROOT, capture_output=True)
            if found.returncode != 0:
                missing.append(f"{name}: {rev}:{path} (not in that revision)")
        for m in LINK.finditer(text):
            target = m.group(1)
            if re.match(r"^[a-z]+:", target):  # https:, mailto:
                continue
            if not (doc.parent / target).exists():
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
