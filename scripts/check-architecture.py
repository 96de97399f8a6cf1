#!/usr/bin/env python3
"""Checks the rules docs/architecture.md states, so that they stay true.

The crates, their layers and what each may contain come from the table under "## Crates" of
docs/architecture.md (columns: layer, crate, directory, concern, unsafe, foreign code); the
rules are those of its "Rules" section:

1. ``layers``: a crate depends (``[dependencies]``, ``[build-dependencies]``) only on crates
   of lower layers. Dev-dependencies may go up (a doc test builds its program with the builder).
2. ``circles``: within every module, its submodules use each other without circles (a use from
   anywhere inside a submodule counts for it; a module using its own parent or child is not a
   circle). Uses are ``use`` declarations and paths starting with ``crate::``, ``super::`` or
   ``self::``, followed through the ``use`` imports of the module they name.
3. ``unsafe``: only crates whose ``unsafe`` column says yes contain the keyword; every
   ``unsafe`` block and ``unsafe impl`` has a ``// SAFETY:`` comment at most a few lines above
   it (or on its line).
4. ``ffi``: only crates whose foreign-code column says yes declare ``extern "ABI"`` functions
   or blocks, ``#[no_mangle]`` or ``#[link]``.
5. ``wildcard``: no ``_`` arm in a ``match`` over the instruction set's enums (``Instruction``,
   ``Opcode``, ``ArgKind``): adding an instruction must be a compile error wherever it needs
   handling.
6. ``length``: no source file longer than ``MAX_LINES``, except those listed in
   ``scripts/long-files.txt`` with their current length and why; a listed file may not grow,
   and a listed file that is short enough again, or gone, must be removed from the list.
7. ``docs``: every crate's root says ``#![deny(missing_docs)]`` (public items documented),
   except those whose row says ``(no public API)`` in its concern.
8. ``state``: a crate whose row says ``(conversions only)`` in its concern (the Python binding)
   keeps no process-wide tables: no ``static`` (``thread_local!`` ones included) whose type holds
   a collection (``HashMap``, ``Vec``, ...). A registry or a table by name there is logic Rust
   and C users miss; it belongs in a crate below. Exceptions are listed in
   ``scripts/binding-state.txt`` as ``path | NAME | why``; a listed static that is gone must be
   removed from the list.

Usage: ``scripts/check-architecture.py [--root DIR]``. Prints every violation and exits 1 if
there is one.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    try:
        import tomli as tomllib
    except ModuleNotFoundError:
        tomllib = None

MAX_LINES = 600
INSTRUCTION_ENUMS = ("Instruction", "Opcode", "ArgKind")
#: Code lines a `// SAFETY:` comment may sit above the `unsafe` it covers (a statement spanning
#: lines, or one note for the branches of an `if`).
SAFETY_REACH = 8


def load_toml(text: str) -> dict:
    """A manifest's tables: with tomllib when there is one, else the little of TOML the checks
    read (section headers, `key = ...` lines, and `members = [...]` on one or more lines)."""
    if tomllib is not None:
        return tomllib.loads(text)
    out: dict = {}
    table: dict = out
    text = re.sub(r"\[([^\[\]]*)\]", lambda m: "[" + m.group(1).replace("\n", " ") + "]", text)
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        header = re.fullmatch(r"\[([\w.-]+)\]", line)
        if header:
            table = out
            for part in header.group(1).split("."):
                table = table.setdefault(part, {})
        elif "=" in line:
            key, value = (x.strip() for x in line.split("=", 1))
            key = key.split(".", 1)[0].strip('"')  # `relaxvm.workspace = true` names relaxvm
            if key in table and "." in line.split("=", 1)[0]:
                continue
            if value.startswith("["):
                table[key] = re.findall(r'"([^"]*)"', value)
            else:
                table[key] = value.strip('"')
    return out


@dataclass
class Crate:
    layer: int
    name: str
    directory: str
    concern: str
    unsafe: bool
    ffi: bool


def read_crates(root: Path) -> list[Crate]:
    """The table of crates in docs/architecture.md."""
    text = (root / "docs" / "architecture.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("|")]
    header = next((i for i, r in enumerate(rows) if re.match(r"\|\s*layer\s*\|\s*crate\s*\|", r)), None)
    if header is None:
        raise SystemExit("docs/architecture.md: no table of crates (| layer | crate | ...)")
    crates = []
    for row in rows[header + 2 :]:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) != 6 or not cells[0].isdigit():
            break
        layer, name, directory, concern, unsafe, ffi = cells
        crates.append(
            Crate(
                int(layer),
                name.strip("`"),
                directory.strip("`").rstrip("/"),
                concern,
                unsafe.lower().startswith("yes"),
                ffi.lower().startswith("yes"),
            )
        )
    return crates


def strip_comments_and_strings(src: str) -> str:
    """`src` with comments and the contents of string and char literals blanked (same length,
    same line breaks), so that keywords in them are not counted."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', src[i:]) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r'r(#*)"', src[i:])
            end = src.find('"' + m.group(1), i + len(m.group(0)))
            j = n if end < 0 else end + 1 + len(m.group(1))
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append('"' + re.sub(r"[^\n]", " ", src[i + 1 : j]) + '"')
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'|'\\u\{[0-9a-fA-F]+\}'|'\\x[0-9a-fA-F]{2}'", src[i:]):
            m = re.match(r"'(\\.|[^\\'])'|'\\u\{[0-9a-fA-F]+\}'|'\\x[0-9a-fA-F]{2}'", src[i:])
            out.append("' '" + " " * (len(m.group(0)) - 3))
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def rust_files(root: Path, crate: Crate) -> list[Path]:
    src = root / crate.directory / "src"
    return sorted(p for p in src.rglob("*.rs")) if src.is_dir() else []


# ---------------------------------------------------------------------------------------- layers


def check_layers(root: Path, crates: list[Crate]) -> list[str]:
    errors = []
    by_name = {c.name: c for c in crates}
    for c in crates:
        manifest = root / c.directory / "Cargo.toml"
        if not manifest.is_file():
            errors.append(f"{c.directory}/Cargo.toml: missing (crate {c.name} of docs/architecture.md)")
            continue
        toml = load_toml(manifest.read_text())
        if toml.get("package", {}).get("name") != c.name:
            errors.append(f"{c.directory}/Cargo.toml: the package is not named {c.name}")
        for section in ("dependencies", "build-dependencies"):
            for dep in toml.get(section, {}):
                other = by_name.get(dep)
                if dep.startswith("relaxvm") and other is None:
                    errors.append(f"{c.directory}/Cargo.toml: [{section}] {dep} is not in docs/architecture.md's table")
                elif other is not None and other.layer >= c.layer:
                    errors.append(
                        f"{c.directory}/Cargo.toml: [{section}] {c.name} (layer {c.layer}) depends on "
                        f"{dep} (layer {other.layer}): crates depend only on lower layers"
                    )
    members = load_toml((root / "Cargo.toml").read_text()).get("workspace", {}).get("members", [])
    for m in members:
        if m.rstrip("/") not in {c.directory for c in crates}:
            errors.append(f"Cargo.toml: workspace member {m} has no row in docs/architecture.md's table of crates")
    return errors


# --------------------------------------------------------------------------------------- circles


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
        depth, j = 0, m.end() - 1
        while j < len(code):
            if code[j] == "{":
                depth += 1
            elif code[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        blocks.append((m.start(), j, m.group(1)))
    return blocks


TEST_MODULE = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*([;{])")


def without_test_modules(code: str) -> str:
    """`code` with its `#[cfg(test)] mod name { ... }` blocks blanked: tests may use any module."""
    for m in reversed(list(TEST_MODULE.finditer(code))):
        if m.group(2) != "{":
            continue
        depth, j = 0, m.end() - 1
        while j < len(code):
            depth += code[j] == "{"
            depth -= code[j] == "}"
            if depth == 0:
                break
            j += 1
        code = code[: m.start()] + re.sub(r"[^\n]", " ", code[m.start() : j + 1]) + code[j + 1 :]
    return code


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


def list_entries(root: Path, name: str, form: str) -> list[list[str]]:
    """The entries of the allow-list scripts/`name` (one per line, `form`: fields split on `|`,
    the last one the reason, which must be given); blank lines and `#` comments skipped. A line
    of another shape stops the check, naming it."""
    path = root / "scripts" / name
    fields = form.count("|") + 1
    entries = []
    if path.is_file():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip() or line.startswith("#"):
                continue
            parts = [x.strip() for x in line.split("|")]
            if len(parts) != fields or not parts[-1]:
                raise SystemExit(f"scripts/{name}:{n}: expected `{form}`")
            entries.append(parts)
    return entries


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


# ---------------------------------------------------------------------------------- unsafe, ffi

UNSAFE = re.compile(r"\bunsafe\b")
UNSAFE_NEEDS_NOTE = re.compile(r"\bunsafe\s*(\{|impl\b)")
# On code with string contents blanked: `extern "C"` reads `extern " "`.
FFI = re.compile(r'\bextern\s*("|\{)|#\[(unsafe\()?no_mangle\)?\]|#\[link\b')


def check_unsafe_and_ffi(root: Path, crates: list[Crate]) -> list[str]:
    errors = []
    for c in crates:
        for p in rust_files(root, c):
            raw = p.read_text().split("\n")
            code = strip_comments_and_strings("\n".join(raw)).split("\n")
            rel = p.relative_to(root)
            for i, line in enumerate(code):
                if UNSAFE.search(line) and not c.unsafe:
                    errors.append(f"{rel}:{i + 1}: `unsafe` in {c.name}, which docs/architecture.md keeps free of it")
                if FFI.search(line) and not c.ffi:
                    errors.append(
                        f"{rel}:{i + 1}: foreign code in {c.name}, which docs/architecture.md keeps free of it"
                    )
                if UNSAFE_NEEDS_NOTE.search(line) and not has_safety_note(raw, code, i):
                    errors.append(f"{rel}:{i + 1}: `unsafe` without a `// SAFETY:` comment above it")
    return errors


def has_safety_note(raw: list[str], code: list[str], i: int) -> bool:
    code_lines = 0
    for j in range(i, -1, -1):
        if "SAFETY" in raw[j][len(raw[j]) - len(raw[j].lstrip()) :] and "//" in raw[j]:
            return True
        if j < i and re.search(r"\bfn\s+\w+", code[j]):
            return False  # the start of the enclosing function: no note in it
        if code[j].strip():
            code_lines += 1
            if code_lines > SAFETY_REACH:
                return False
    return False


# -------------------------------------------------------------------------------------- wildcard


def match_bodies(code: str):
    """(offset, body) of every `match ... { body }`."""
    for m in re.finditer(r"\bmatch\b", code):
        j = m.end()
        depth = 0
        # The scrutinee ends at the first `{` outside parentheses and brackets.
        while j < len(code):
            if code[j] in "([":
                depth += 1
            elif code[j] in ")]":
                depth -= 1
            elif code[j] == "{" and depth == 0:
                break
            elif code[j] == ";" and depth == 0:
                j = -1
                break
            j += 1
        if j < 0 or j >= len(code):
            continue
        start, depth = j, 0
        while j < len(code):
            if code[j] == "{":
                depth += 1
            elif code[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        yield m.start(), code[start + 1 : j]


def top_level_arms(body: str) -> list[str]:
    """The patterns of a match body's arms (the text before each arm's `=>`)."""

    def skip_to_close(i: int) -> int:
        depth = 0
        while i < len(body):
            if body[i] in "([{":
                depth += 1
            elif body[i] in ")]}":
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        return i

    arms, i, start, depth = [], 0, 0, 0
    while i < len(body):
        ch = body[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif body.startswith("=>", i) and depth == 0:
            arms.append(body[start:i].strip())
            i += 2
            while i < len(body) and body[i].isspace():
                i += 1
            if i < len(body) and body[i] == "{":
                i = skip_to_close(i)
            else:  # an expression arm: up to the next top-level comma
                d = 0
                while i < len(body) and not (body[i] == "," and d == 0):
                    d += body[i] in "([{"
                    d -= body[i] in ")]}"
                    i += 1
            while i < len(body) and (body[i].isspace() or body[i] == ","):
                i += 1
            start = i
            continue
        i += 1
    return arms


def check_wildcards(root: Path, crates: list[Crate]) -> list[str]:
    errors = []
    enums = "|".join(INSTRUCTION_ENUMS)
    for c in crates:
        for p in rust_files(root, c):
            code = strip_comments_and_strings(p.read_text())
            for offset, body in match_bodies(code):
                patterns = [re.split(r"\sif\s", a, maxsplit=1)[0].strip() for a in top_level_arms(body)]
                over_instructions = any(re.search(rf"(^|[^\w:])({enums})::", a) for a in patterns)
                if over_instructions and "_" in patterns:
                    line = code.count("\n", 0, offset) + 1
                    errors.append(
                        f"{p.relative_to(root)}:{line}: a `_` arm in a match over {'/'.join(INSTRUCTION_ENUMS)}: "
                        "name every variant, so that a new instruction is a compile error here"
                    )
    return errors


# ---------------------------------------------------------------------------------------- length


def read_allowed_lengths(root: Path) -> dict[str, int]:
    allowed = {}
    for parts in list_entries(root, "long-files.txt", "path | lines | why"):
        if not parts[1].isdigit():
            raise SystemExit(f"scripts/long-files.txt: {parts[0]}: expected `path | lines | why`, lines a number")
        allowed[parts[0]] = int(parts[1])
    return allowed


def check_lengths(root: Path, crates: list[Crate]) -> list[str]:
    errors = []
    allowed = read_allowed_lengths(root)
    seen = set()
    for c in crates:
        base = root / c.directory
        for p in sorted(base.rglob("*.rs")):
            if "target" in p.relative_to(base).parts:
                continue
            rel = str(p.relative_to(root))
            lines = p.read_text().count("\n")
            limit = allowed.get(rel)
            if limit is not None:
                seen.add(rel)
                if lines > limit:
                    errors.append(
                        f"{rel}: {lines} lines, more than the {limit} scripts/long-files.txt allows: split it"
                    )
                elif lines <= MAX_LINES:
                    errors.append(f"{rel}: {lines} lines, short enough: remove it from scripts/long-files.txt")
            elif lines > MAX_LINES:
                errors.append(f"{rel}: {lines} lines, more than {MAX_LINES}: split it by concept")
    for rel in sorted(set(allowed) - seen):
        errors.append(f"scripts/long-files.txt: {rel} does not exist: remove its line")
    return errors


# ------------------------------------------------------------------------------------------ docs


def check_docs(root: Path, crates: list[Crate]) -> list[str]:
    errors = []
    for c in crates:
        if "(no public API)" in c.concern:
            continue
        lib = root / c.directory / "src" / "lib.rs"
        if not lib.is_file():
            continue
        if not re.search(r"^#!\[(deny|forbid)\([^)]*\bmissing_docs\b", lib.read_text(), re.M):
            errors.append(f"{lib.relative_to(root)}: no #![deny(missing_docs)]: public items must be documented")
    return errors


# ----------------------------------------------------------------------------------------- state

#: A static item: its name and its type (up to the `=`).
STATIC = re.compile(r"(?<!')\bstatic\s+(?:mut\s+)?([A-Za-z_]\w*)\s*:(?!:)\s*([^=;]*)")
COLLECTION = re.compile(r"\b(?:HashMap|HashSet|BTreeMap|BTreeSet|IndexMap|IndexSet|Vec|VecDeque|SmallVec)\b")
#: A type alias of the file (followed, so that an alias does not hide a collection).
TYPE_ALIAS = re.compile(r"\btype\s+(\w+)\b[^=;]*=\s*([^;]*);")


def holds_collection(ty: str, aliases: dict[str, str], depth: int = 0) -> bool:
    if COLLECTION.search(ty):
        return True
    names = set(re.findall(r"\b\w+\b", ty)) & set(aliases)
    return depth < 8 and any(holds_collection(aliases[n], aliases, depth + 1) for n in names)


def read_allowed_state(root: Path) -> set[tuple[str, str]]:
    entries = list_entries(root, "binding-state.txt", "path | NAME | why")
    for parts in entries:
        if not all(parts):
            raise SystemExit(f"scripts/binding-state.txt: {parts}: expected `path | NAME | why`, none empty")
    return {(parts[0], parts[1]) for parts in entries}


def check_state(root: Path, crates: list[Crate]) -> list[str]:
    errors = []
    allowed = read_allowed_state(root)
    seen = set()
    for c in crates:
        if "(conversions only)" not in c.concern:
            continue
        for p in rust_files(root, c):
            rel = str(p.relative_to(root))
            code = without_test_modules(strip_comments_and_strings(p.read_text()))
            aliases = {m.group(1): m.group(2) for m in TYPE_ALIAS.finditer(code)}
            for m in STATIC.finditer(code):
                if not holds_collection(m.group(2), aliases):
                    continue
                if (rel, m.group(1)) in allowed:
                    seen.add((rel, m.group(1)))
                    continue
                line = code.count("\n", 0, m.start()) + 1
                errors.append(
                    f"{rel}:{line}: static {m.group(1)} keeps a process-wide table in {c.name}, whose row "
                    "says (conversions only): move the table and its logic into a crate below"
                )
    for rel, name in sorted(allowed - seen):
        errors.append(f"scripts/binding-state.txt: {rel} has no static {name} holding a collection: remove its line")
    return errors


CHECKS = {
    "layers": check_layers,
    "circles": check_circles,
    "unsafe": check_unsafe_and_ffi,
    "wildcard": check_wildcards,
    "length": check_lengths,
    "docs": check_docs,
    "state": check_state,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    args = parser.parse_args(argv)
    crates = read_crates(args.root)
    errors = []
    for check in CHECKS.values():
        errors += check(args.root, crates)
    for e in errors:
        print(e)
    if not errors:
        print(f"architecture: {len(crates)} crates, every rule of docs/architecture.md holds")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
