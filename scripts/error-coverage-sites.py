#!/usr/bin/env python3
"""The call sites of message-building helpers, and which of them a test causes (a report).

scripts/error-coverage.py counts a message as tested when a test causes its text; a message
built by one helper from the name its caller passes (``c.u32("start instruction")`` builds
``"{what} {v} does not fit in 32 bits"``) is then tested as soon as one caller is, and the
others stay unseen. This script finds such helpers (functions with a ``&str`` parameter whose
name is a placeholder of a message they build, or that pass it on to such a helper), every call
of one in the crate's code that passes a string literal there, and prints each site's message
with the literal filled in: tested when a test string of a crate that can run it holds the whole
of it (its placeholders filled with anything on one line), as error-coverage.py's templates.

It is a report for sweeps, not a CI check: a site counts as reached by its literal alone (the
parsing is by pattern: a call of another function of the same name, with a literal at that
position, is listed too), and many sites can only be reached by crafting a file byte by byte.

Usage: ``scripts/error-coverage-sites.py [--untested]`` (only the sites no test causes).
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import signal
import sys
from dataclasses import dataclass
from pathlib import Path


def _coverage():
    path = Path(__file__).resolve().parent / "error-coverage.py"
    spec = importlib.util.spec_from_file_location("error_coverage", path)
    ec = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("error_coverage", ec)
    spec.loader.exec_module(ec)
    return ec


EC = _coverage()
FN = re.compile(r"\bfn\s+(\w+)\s*(?:<[^>{]*>)?\s*\(")
SELF = re.compile(r"(?:&(?:'\w+\s+)?)?(?:mut\s+)?self")
STR_PARAM = re.compile(r"^(\w+)\s*:\s*&(?:'\w+\s+)?str$")
LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Helper:
    """A function that puts its `param`-th argument (after `self`) into `text`'s `{name}`."""

    crate: str
    function: str
    param: int
    name: str
    text: str


@dataclass(frozen=True)
class Site:
    """A call of a helper with a literal: the message it builds there."""

    path: str
    line: int
    text: str
    helper: Helper


def split_args(args: str) -> list[str]:
    """The top-level comma-separated pieces of an argument or parameter list."""
    out, depth, cur, i = [], 0, "", 0
    while i < len(args):
        c = args[i]
        m = EC.STRING.match(args, i) if c == '"' else None
        if m:
            cur, i = cur + m.group(0), m.end()
            continue
        depth += c in "([{<"
        depth -= c in ")]}>"
        if c == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += c
        i += 1
    return out + ([cur.strip()] if cur.strip() else [])


@dataclass
class Function:
    crate: str
    path: str
    name: str
    #: The `&str` parameters (index after `self`, name).
    strs: list[tuple[int, str]]
    body: str
    lines: range


def functions(path: str, crate: str, code: str) -> list[Function]:
    out = []
    for f in FN.finditer(code):
        params_text = EC.call_args(code, f.end() - 1)
        params = split_args(params_text)
        if params and SELF.fullmatch(params[0]):
            params = params[1:]
        strs = [(i, m.group(1)) for i, p in enumerate(params) if (m := STR_PARAM.match(p))]
        open_at = code.find("{", f.end() + len(params_text))
        if not strs or open_at < 0:
            continue
        body = EC.call_args(code, open_at)
        first = code.count("\n", 0, open_at) + 1
        out.append(Function(crate, path, f.group(1), strs, body, range(first, first + body.count("\n") + 1)))
    return out


def calls(code: str, function: str):
    """Each call of `function` in `code` (not its definition): where, and its arguments."""
    for c in re.finditer(rf"\b{function}\s*\(", code):
        if re.search(r"\bfn\s*$", code[max(0, c.start() - 8) : c.start()]):
            continue
        yield c.start(), split_args(EC.call_args(code, c.end() - 1))


def helpers_and_sites(sources: dict[str, str], messages: list) -> tuple[set[Helper], list[Site]]:
    """`sources`: the non-test code of each file (path from the root -> text)."""
    fns = [f for path, code in sources.items() for f in functions(path, path.split("/", 1)[0], code)]
    helpers: set[Helper] = set()
    for f in fns:
        for m in messages:
            if m.path == f.path and m.line in f.lines:
                helpers |= {Helper(f.crate, f.name, i, n, m.text) for i, n in f.strs if "{" + n + "}" in m.text}
    # A function passing its own parameter on to a helper's is a helper too.
    while True:
        more = set()
        for f in fns:
            for h in helpers:
                if h.crate != f.crate:
                    continue
                for _, args in calls(f.body, h.function):
                    for i, n in f.strs:
                        if h.param < len(args) and args[h.param] == n:
                            more.add(Helper(f.crate, f.name, i, n, h.text))
        if more <= helpers:
            break
        helpers |= more
    sites = []
    for path, code in sources.items():
        for h in helpers:
            if path.split("/", 1)[0] != h.crate:
                continue
            for at, args in calls(code, h.function):
                lit = LITERAL.fullmatch(args[h.param]) if h.param < len(args) else None
                if lit:
                    text = h.text.replace("{" + h.name + "}", lit.group(1).replace("{", "{{").replace("}", "}}"))
                    sites.append(Site(path, code.count("\n", 0, at) + 1, text, h))
    return helpers, sorted(set(sites), key=lambda s: (s.path, s.line, s.text))


def main() -> int:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--untested", action="store_true", help="list only the sites no test causes")
    opts = ap.parse_args()
    messages, tests, reach = EC.collect_grouped()
    sources = {}
    for crate in EC.CRATES:
        for p in sorted((EC.ROOT / crate / "src").rglob("*.rs")):
            if not EC.is_test_file(p):
                sources[str(p.relative_to(EC.ROOT))] = EC.split_tests(p.read_text())[0]
    helpers, sites = helpers_and_sites(sources, messages)
    untested = 0
    for s in sites:
        crate = s.path.split("/", 1)[0]
        m = EC.Message(s.path, s.line, s.text, max(EC.fragments(s.text), key=len), [])
        tested = any(EC.template(m).search(tests[w]) for w in tests if crate in reach[w])
        untested += not tested
        if not (opts.untested and tested):
            print(f"{s.path}:{s.line}: {'tested' if tested else 'UNTESTED'}: {s.text!r}")
    print(f"helpers: {len(helpers)}, call sites with a literal: {len(sites)}, not caused by a test: {untested}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
