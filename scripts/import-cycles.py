#!/usr/bin/env python3
"""Import cycles between the server's source files (src/): which files sit in a cycle of `use`s.

A file's module path comes from where it lies (src/leases/lifecycle.rs is crate::leases::lifecycle, src/leases/mod.rs
is crate::leases). Every path it names (`crate::a::b::Item`, `super::x`, `self::y`, and `use` trees such as
`crate::a::{b, c::d}`) is resolved to the deepest module file of it; an edge runs from the file to that module's
file, and so does a path that starts with the name of one of its child modules (`routes::router()` in a mod.rs;
declaring `mod routes;` is not a use). The files in a strongly connected component of two or more are the files
in cycles: a parent and a child that use each other count, as any two modules do.
Comments and literals are skipped (a string may hold `crate::` or `//`), and so are inline `#[cfg(test)] mod x {}`
blocks: nothing imports a test module, so it sits in no cycle, and what it uses is not its parent's.

    scripts/import-cycles.py              list the cycles, one component a line, and the count
    scripts/import-cycles.py --max N      exit 1 when more than N files sit in cycles (CI's ratchet)
    scripts/import-cycles.py --src DIR    another crate's source directory (default: the server's src/)
    scripts/import-cycles.py --modules    pairs of top-level modules (domains) that import each other, each with
                                          the files that make its two arrows; with --max N, fail above N pairs
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
# Comments, string literals (escapes, line continuations and raw strings included) and char literals, in one
# left-to-right pass, so that neither a `//` inside a string nor a `"` inside a comment or a char is misread.
LITERAL_OR_COMMENT = re.compile(
    r"""//[^\n]*|/\*.*?\*/|(?<!\w)b?r(#*)".*?"\1|b?"(?:\\.|[^"\\])*"|b?'(?:\\[^']{1,10}|[^'\\\n])'""", re.DOTALL
)


def code_only(text: str) -> str:
    """The text with comments removed and every literal emptied."""

    def blank(m: re.Match[str]) -> str:
        token = m.group(0)
        if token.startswith("/"):
            return ""
        return "' '" if token.lstrip("b").startswith("'") else '""'

    return without_test_modules(LITERAL_OR_COMMENT.sub(blank, text))


TEST_MODULE = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{")


def without_test_modules(code: str) -> str:
    """The code without its inline `#[cfg(test)] mod x { ... }` blocks. Such a module is a child that nothing
    imports (declaring it is not a use), so it can sit in no cycle, and its uses are not its parent's."""
    while m := TEST_MODULE.search(code):
        body = braced(code, m.end() - 1)
        code = code[: m.start()] + code[m.end() + len(body) + 1 :]
    return code
CHILD = re.compile(r"(?<![:\w])([a-z_][a-z0-9_]*)::")
PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)*)(::\{)?")


def deepest(files: dict[tuple[str, ...], Path], path: tuple[str, ...]) -> tuple[str, ...]:
    """The deepest module with a file of its own that `path` lies in."""
    while path and path not in files:
        path = path[:-1]
    return path


def module_of(path: Path) -> tuple[str, ...]:
    rel = path.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "mod" or (len(parts) == 1 and parts[0] in ("lib", "main")):
        parts = parts[:-1]
    return tuple(parts)


def braced(text: str, start: int) -> str:
    """The text of the `{...}` tree that opens at `start`."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i]
    return ""


def tree_paths(prefix: tuple[str, ...], tree: str) -> list[tuple[str, ...]]:
    """The paths of a `use` tree's items, each under `prefix`."""
    out, depth, item = [], 0, ""
    for ch in tree + ",":
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            item = item.strip()
            if "{" in item:
                head, _, rest = item.partition("{")
                sub = tuple(p for p in head.strip().rstrip(":").split("::") if p)
                out.extend(tree_paths(prefix + sub, rest.rsplit("}", 1)[0]))
            elif item:
                out.append(prefix + tuple(p for p in item.split(" as ")[0].strip().split("::") if p))
            item = ""
        else:
            item += ch
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max", type=int, default=None, help="fail when more files than this sit in cycles")
    parser.add_argument("--src", type=Path, default=None, help="the crate's source directory (default: src/)")
    parser.add_argument("--modules", action="store_true", help="count pairs of top-level modules importing each other")
    args = parser.parse_args()
    global SRC
    if args.src is not None:
        SRC = args.src.resolve()

    files = {module_of(p): p for p in sorted(SRC.rglob("*.rs"))}
    edges: dict[tuple[str, ...], set[tuple[str, ...]]] = {m: set() for m in files}
    for module, path in files.items():
        text = code_only(path.read_text(encoding="utf-8"))
        for m in PATH.finditer(text):
            root, rest, brace = m.group(1), m.group(2), m.group(3)
            base = () if root == "crate" else module[:-1] if root == "super" else module
            names = tuple(p for p in rest.split("::") if p)
            while names and names[0] == "super":  # `super::super::x`
                base, names = base[:-1], names[1:]
            targets = tree_paths(base + names, braced(text, m.end() - 1)) if brace else [base + names]
            for target in targets:
                edges[module].add(deepest(files, target))
        # A path that starts with a child module's name (`routes::router()` in a mod.rs).
        for m in CHILD.finditer(text):
            if module + (m.group(1),) in files:
                edges[module].add(module + (m.group(1),))
        edges[module].discard(module)
        edges[module].discard(())  # the crate root (lib.rs) only declares the modules
    if args.modules:
        return module_pairs(files, edges, args.max)

    # Tarjan's strongly connected components.
    index: dict[tuple[str, ...], int] = {}
    low: dict[tuple[str, ...], int] = {}
    stack: list[tuple[str, ...]] = []
    on_stack: set[tuple[str, ...]] = set()
    components: list[list[tuple[str, ...]]] = []
    sys.setrecursionlimit(10_000)

    def visit(v: tuple[str, ...]) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            components.append(component)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    cycles = sorted((sorted(c) for c in components if len(c) > 1), key=len, reverse=True)
    in_cycles = sum(len(c) for c in cycles)
    for c in cycles:
        names = [str(files[m].relative_to(ROOT)) for m in c]
        print(f"cycle of {len(c)}: {' '.join(names)}")
    print(f"import-cycles: {in_cycles} of {len(files)} files in {SRC.relative_to(ROOT)}/ sit in import cycles")
    if args.max is not None and in_cycles > args.max:
        print(f"import-cycles: FAILED: more than {args.max} (a new cycle; see above)", file=sys.stderr)
        return 1
    return 0


def module_pairs(
    files: dict[tuple[str, ...], Path], edges: dict[tuple[str, ...], set[tuple[str, ...]]], most: int | None
) -> int:
    """Pairs of top-level modules where each imports the other: a file-level graph can be free of cycles while two
    folders lean on each other, which is what makes a domain impossible to read, test or move on its own."""
    arrows: dict[tuple[str, str], list[str]] = {}
    for source, targets in edges.items():
        for target in targets:
            if source and target and source[0] != target[0]:
                arrows.setdefault((source[0], target[0]), []).append(
                    f"{files[source].relative_to(ROOT)} -> {files[target].relative_to(ROOT)}"
                )
    pairs = sorted((a, b) for (a, b) in arrows if a < b and (b, a) in arrows)
    for a, b in pairs:
        print(f"pair {a} <-> {b}")
        for line in sorted(arrows[(a, b)]) + sorted(arrows[(b, a)]):
            print(f"    {line}")
    tops = {m[0] for m in files if m}
    print(f"import-cycles: {len(pairs)} pairs of the {len(tops)} top-level modules in {SRC.relative_to(ROOT)}/ import each other")
    if most is not None and len(pairs) > most:
        print(f"import-cycles: FAILED: more than {most} pairs (an arrow the wrong way; see above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
