"""Rule 8, ``state``: the binding (``(conversions only)``) keeps no process-wide tables."""

from __future__ import annotations

import re
from pathlib import Path

from .workspace import Crate, list_entries, rust_files, strip_comments_and_strings, without_test_modules

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
