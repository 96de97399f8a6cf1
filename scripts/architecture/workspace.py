"""The workspace as the rules read it: the crates of docs/architecture.md's table, their Rust
files with comments and strings blanked, and the allow-lists of scripts/."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


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


def closing_brace(code: str, open_at: int) -> int:
    """The index of the `}` closing the `{` at `open_at` (counting nested braces), or
    `len(code)` when the code ends first."""
    depth, j = 0, open_at
    while j < len(code):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                break
        j += 1
    return j
