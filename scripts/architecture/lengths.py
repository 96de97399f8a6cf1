"""Rule 6, ``length``: no source file longer than ``MAX_LINES`` unless scripts/long-files.txt
lists it."""

from __future__ import annotations

from pathlib import Path

from .workspace import Crate, list_entries

MAX_LINES = 600


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
