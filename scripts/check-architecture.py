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

Each rule is a module of scripts/architecture/ (``workspace.py`` reads what they share); this
file runs them and reads the manifests.

Usage: ``scripts/check-architecture.py [--root DIR]``. Prints every violation and exits 1 if
there is one.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from architecture import circles, docs, layers, lengths, state, unsafe_ffi, wildcards  # noqa: E402
from architecture.workspace import Crate, read_crates  # noqa: E402, F401 (tests use them here)

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    try:
        import tomli as tomllib
    except ModuleNotFoundError:
        tomllib = None


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


CHECKS = {
    # The manifest reader is this module's, so that a test can take tomllib away here.
    "layers": lambda root, crates: layers.check_layers(root, crates, load_toml),
    "circles": circles.check_circles,
    "unsafe": unsafe_ffi.check_unsafe_and_ffi,
    "wildcard": wildcards.check_wildcards,
    "length": lengths.check_lengths,
    "docs": docs.check_docs,
    "state": state.check_state,
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
