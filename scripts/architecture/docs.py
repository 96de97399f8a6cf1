"""Rule 7, ``docs``: every crate with a public API denies missing docs."""

from __future__ import annotations

import re
from pathlib import Path

from .workspace import Crate


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
