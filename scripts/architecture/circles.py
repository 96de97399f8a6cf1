"""Rule 2, ``circles``: no import circles between sibling modules."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from .workspace import (
    TEST_MODULE,
    Crate,
    closing_brace,
    list_entries,
    rust_files,
    strip_comments_and_strings,
    without_test_modules,
)


def module_path(src_dir: Path, file: Path) -> tuple[str, ...]:
    parts = list(file.relative_to(src_dir).with_suffix("").parts)
    if parts[-1] in ("lib", "main", "mod"):
        parts.pop()
    return tuple(parts)


def split_use_tree(tree: str) -> list[str]:
    """`a::{b, c::{d, e}}` as `a::b`, `a::c::d`, `a::c::e` (`self` in a group is its prefix)."""
    tree = re.sub(r"\s+", "", tree)
    m = re.match(r"^(.*?)\{(.*)\}$", tree)
    if not m:
        return [re.sub(r"as\w+$", "", tree) if "as" not in tree else tree.split("as")[0]]
    prefix, body = m.group(1), m.group(2)
    items, depth, tok = [], 0, ""
    for ch in body:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            items.append(tok)
            tok = ""
        else:
            tok += ch
    items.append(tok)
    out = []
    for item in filter(None, items):
        for sub in split_use_tree(item):
            out.append(prefix.rstrip(":") if sub == "self" else prefix + sub)
    return out


@dataclass
class Module:
    file: Path
    path: tuple[str, ...]
    code: str
    #: Local name -> the path it imports (as written, resolved later).
    imports: dict[str, tuple[list[str], tuple[str, ...]]]
    #: (path as written, the module it was written in) for every use.
    uses: list[tuple[list[str], tuple[str, ...]]]


def inline_module_at(code: str) -> list[tuple[int, int, str]]:
    """The inline `mod name { ... }` blocks of a file: (start, end, name)."""
    blocks = []
    for m in re.finditer(r"\bmod\s+(\w+)\s*\{", code):
        blocks.append((m.start(), closing_brace(code, m.end() - 1), m.group(1)))
    return blocks


def test_files(files: dict[tuple[str, ...], Path]) -> set[Path]:
    """The files that hold only tests: declared `#[cfg(test)] mod name;`, or named tests.rs or
    *_tests.rs, with the files below them."""
    tests = set()
    for path, file in files.items():
        for m in TEST_MODULE.finditer(strip_comments_and_strings(file.read_text())):
            if m.group(2) == ";":
                tests.add(path + (m.group(1),))
    return {
        f
        for path, f in files.items()
        if f.name == "tests.rs" or f.name.endswith("_tests.rs") or any(path[: len(t)] == t for t in tests)
    }


def parse_module(src_dir: Path, file: Path) -> Module:
    code = without_test_modules(strip_comments_and_strings(file.read_text()))
    path = module_path(src_dir, file)
    blocks = inline_module_at(code)

    def scope(pos: int) -> tuple[str, ...]:
        inner = [name for start, end, name in blocks if start < pos < end]
        return path + tuple(inner)

    imports: dict = {}
    uses = []
    for m in re.finditer(r"\buse\s+([^;]+);", code):
        here = scope(m.start())
        for full in split_use_tree(m.group(1)):
            segments = [s for s in full.split("::") if s]
            if not segments or segments[-1] == "*":
                if segments:
                    uses.append((segments[:-1], here))
                continue
            uses.append((segments, here))
            alias = re.search(r"as(\w+)$", re.sub(r"\s+", "", m.group(1))) if "{" not in m.group(1) else None
            imports[alias.group(1) if alias else segments[-1]] = (segments, here)
    for m in re.finditer(r"\b(crate|super|self)((?:::\w+)+)", code):
        if re.search(r"\buse\s+[^;]*$", code[max(0, m.start() - 200) : m.start()]):
            continue  # part of a use declaration, handled above
        uses.append(([m.group(1), *m.group(2).strip(":").split("::")], scope(m.start())))
    return Module(file, path, code, imports, uses)


def resolve(segments: list[str], here: tuple[str, ...], files: dict, modules: dict, depth: int = 0):
    """The file a path written in module `here` names (the longest module prefix), or None
    for a path outside the crate."""
    if depth > 8 or not segments:
        return None
    first, rest = segments[0], segments[1:]
    if first == "crate":
        base: tuple[str, ...] = ()
    elif first == "super":
        base = here[:-1]
        while rest and rest[0] == "super":
            base, rest = base[:-1], rest[1:]
    elif first == "self":
        base = here
    elif here + (first,) in files or any(here + (first,) == k[: len(here) + 1] for k in files):
        base, rest = here, segments
    else:
        return None  # another crate, std, or a name imported from one
    cur = base
    while cur not in files and cur:
        cur = cur[:-1]  # an inline module: its file
    for i, seg in enumerate(rest):
        nxt = cur + (seg,)
        if nxt in files:
            cur = nxt
            continue
        # An item of `cur`, maybe imported there: follow the import.
        mod = modules.get(files.get(cur))
        if mod is not None and seg in mod.imports and i == len(rest) - 1:
            target_segments, target_here = mod.imports[seg]
            target = resolve(target_segments, target_here, files, modules, depth + 1)
            if target is not None:
                return target
        break
    return files.get(cur)


def sibling_cycles(edges: dict[Path, set[Path]], mod_of: dict[Path, tuple[str, ...]]) -> list[tuple[str, str, str]]:
    """Circles among the submodules of each module, uses from anywhere inside one counting."""
    level_edges: dict[tuple[str, ...], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    examples: dict[tuple, tuple[Path, Path]] = {}
    for a, targets in edges.items():
        for b in targets:
            pa, pb = mod_of[a], mod_of[b]
            common = 0
            while common < min(len(pa), len(pb)) and pa[common] == pb[common]:
                common += 1
            if common == len(pa) or common == len(pb):
                continue  # a module and its own ancestor or descendant
            parent = pa[:common]
            level_edges[parent][pa[common]].add(pb[common])
            examples.setdefault((parent, pa[common], pb[common]), (a, b))
    found = []
    for parent, graph in sorted(level_edges.items()):
        for scc in strongly_connected(graph):
            if len(scc) < 2:
                continue
            names = sorted(scc)
            via = []
            for x in names:
                for y in sorted(graph[x] & set(names)):
                    a, b = examples[(parent, x, y)]
                    via.append(f"{x} -> {y} ({a.name} uses {b.name})")
            where = "::".join(parent) or "the crate root"
            found.append(
                (
                    "::".join(parent),
                    ", ".join(names),
                    f"circle among the modules of {where}: {', '.join(names)}: " + "; ".join(via),
                )
            )
    return found


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = set()
            while True:
                w = stack.pop()
                on.discard(w)
                scc.add(w)
                if w == v:
                    break
            out.append(scc)

    for v in sorted(set(graph) | {w for ws in graph.values() for w in ws}):
        if v not in index:
            visit(v)
    return out


def read_known_circles(root: Path) -> dict[tuple[str, str, str], str]:
    """The circles scripts/known-circles.txt lists: (crate directory, module, members) -> why."""
    known = {}
    for parts in list_entries(root, "known-circles.txt", "crate directory | module | members | why"):
        members = ", ".join(sorted(m.strip() for m in parts[2].split(",")))
        known[(parts[0].rstrip("/"), parts[1], members)] = parts[3]
    return known


def check_circles(root: Path, crates: list[Crate]) -> list[str]:
    errors = []
    known = read_known_circles(root)
    seen = set()
    for c in crates:
        src_dir = root / c.directory / "src"
        files = {module_path(src_dir, p): p for p in rust_files(root, c)}
        # src/bin/*.rs are crates of their own.
        files = {k: v for k, v in files.items() if not (k and k[0] == "bin")}
        tests = test_files(files)
        modules = {p: parse_module(src_dir, p) for p in files.values()}
        for p in tests:
            modules[p].uses = []
        edges: dict[Path, set[Path]] = defaultdict(set)
        for p, mod in modules.items():
            for segments, here in mod.uses:
                target = resolve(segments, here, files, modules)
                if target is not None and target != p:
                    edges[p].add(target)
        mod_of = {p: m.path for p, m in modules.items()}
        for parent, members, message in sibling_cycles(edges, mod_of):
            key = (c.directory, parent, members)
            if key in known:
                seen.add(key)
            else:
                errors.append(f"{c.directory}/src: {message}")
    for directory, parent, members in sorted(set(known) - seen):
        errors.append(
            f"scripts/known-circles.txt: {directory} | {parent} | {members} is no circle any more: remove its line"
        )
    return errors
