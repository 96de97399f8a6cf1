"""Rules 3 and 4, ``unsafe`` and ``ffi``: which crates may hold ``unsafe`` and foreign code, and a
``// SAFETY:`` note on every ``unsafe`` block."""

from __future__ import annotations

import re
from pathlib import Path

from .workspace import Crate, rust_files, strip_comments_and_strings

#: Code lines a `// SAFETY:` comment may sit above the `unsafe` it covers (a statement spanning
#: lines, or one note for the branches of an `if`).
SAFETY_REACH = 8

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
