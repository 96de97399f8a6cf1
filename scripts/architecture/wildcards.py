"""Rule 5, ``wildcard``: no ``_`` arm in a ``match`` over the instruction set's enums."""

from __future__ import annotations

import re
from pathlib import Path

from .workspace import Crate, closing_brace, rust_files, strip_comments_and_strings

INSTRUCTION_ENUMS = ("Instruction", "Opcode", "ArgKind")


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
        yield m.start(), code[j + 1 : closing_brace(code, j)]


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
