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

A site counts as reached by its literal alone (the parsing is by pattern: a call of another
function of the same name, with a literal at that position, is listed too). The byte-level
fields of the file readers are caused by table-driven tests that break each field a reader
records (tvm/tests/vmexec_fields.rs); their tables hold each message's literal text, so this
report attributes them without running them.

With ``--check`` it is a CI rule (a section of scripts/test.sh): it fails on a site no test
causes unless ``scripts/error-coverage-sites-exempt.txt`` lists it (``path | "text" | reason``,
the text as a JSON string) with a reason: "internal: ..." (reached only by a bug, or a message
the function discards) or "limit: ..." (a condition the machine cannot make: memory running
out for an allocation the bytes already read bound, a platform CI does not run). A listed site
that a test now causes, or that no longer exists, fails the check too (delete its line), and so
does a line whose reason is still "not yet tested" (what ``--update`` writes for a new site:
give it a test, or a reason). A text built at several sites of one crate is credited with any
test that causes it, so the check fails on such a group when its text is tested, unless every
file's line says why its sites may share that test ("same text: ..."); a file reader's sites
(``READERS``) may not: each field must be named apart.

Usage: ``scripts/error-coverage-sites.py [--untested] [--check] [--update]`` (``--untested``:
only the sites no test causes; ``--update``: rewrite the list, stale lines dropped and new
untested sites added as "not yet tested", the other reasons kept).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
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
    #: The file that defines it.
    path: str
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


def without_comment_lines(code: str) -> str:
    """`code` with its comment lines (`//`, `///`, `//!`: doc examples hold calls) blanked, the
    line numbers kept."""
    return re.sub(r"(?m)^[ \t]*//[^\n]*", "", code)


def defines_own(code: str, function: str) -> bool:
    """Whether `code` defines a function or closure named `function` itself: its calls of that
    name are of its own (`paged_kv_cache/attention.rs`'s `err(msg)`, not `attention_kv_cache`'s
    `err(op, msg)`)."""
    return re.search(rf"\bfn\s+{function}\b|\blet\s+{function}\s*=", code) is not None


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
                helpers |= {Helper(f.crate, f.path, f.name, i, n, m.text) for i, n in f.strs if "{" + n + "}" in m.text}
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
                            more.add(Helper(f.crate, f.path, f.name, i, n, h.text))
        if more <= helpers:
            break
        helpers |= more
    sites = []
    for path, code in sources.items():
        for h in helpers:
            if path.split("/", 1)[0] != h.crate:
                continue
            # A file that defines a function of the helper's name calls its own (which, if it
            # is a helper too, `helpers` holds with its own text).
            if path != h.path and defines_own(code, h.function):
                continue
            for at, args in calls(code, h.function):
                lit = LITERAL.fullmatch(args[h.param]) if h.param < len(args) else None
                if lit:
                    text = h.text.replace("{" + h.name + "}", lit.group(1).replace("{", "{{").replace("}", "}}"))
                    sites.append(Site(path, code.count("\n", 0, at) + 1, text, h))
    return helpers, sorted(set(sites), key=lambda s: (s.path, s.line, s.text))


EXEMPT = Path(__file__).resolve().parent / "error-coverage-sites-exempt.txt"
#: `path | "text" | reason`.
EXEMPT_LINE = re.compile(r'^(\S+) \| ("(?:[^"\\]|\\.)*") \| (\S.*)$')
#: The reasons a site may go untested (see the module's doc), and the placeholder `--update`
#: writes for a new one, which the check refuses.
REASONS = ("internal: ", "limit: ")
NOT_YET = "not yet tested"
#: The reason that lets the sites of one text outside the readers share the tests of that text.
SAME = "same text: "


def read_exemptions(text: str) -> dict[tuple[str, str], str]:
    """The exemption lines of `text` (`#` comments), by (path, site text); an error for a line
    of another form or a reason of no known kind."""
    out = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = EXEMPT_LINE.match(line)
        if not m:
            raise ValueError(f"{EXEMPT.name}:{n}: expected 'path | \"text\" | reason', found {line!r}")
        if not m.group(3).startswith((*REASONS, NOT_YET, SAME)):
            raise ValueError(f"{EXEMPT.name}:{n}: the reason must start with one of {REASONS}, found {m.group(3)!r}")
        out[(m.group(1), json.loads(m.group(2)))] = m.group(3)
    return out


def check(
    status: list[tuple[Site, bool]], exempt: dict[tuple[str, str], str]
) -> tuple[list[Site], list[tuple[str, str]]]:
    """The sites no test causes that no exemption lists, and the exemptions that list no such
    site (a site a test now causes, or one that is gone)."""
    untested = [s for s, tested in status if not tested]
    # An untested site needs an internal or limit reason of its own.
    missing = [s for s in untested if not exempt.get((s.path, s.text), NOT_YET).startswith(REASONS)]
    listed = {(s.path, s.text) for s in untested}
    shared = {(s.path, s.text) for g in same_text_sites([s for s, _ in status]) for s in g}
    stale = [k for k, why in exempt.items() if k not in listed and not (why.startswith(SAME) and k in shared)]
    return missing, stale


#: The file readers, whose sites name fields: each field's site must build a text of its own (the
#: field tables tell reads apart by name), so no "same text" reason is accepted there.
READERS = ("isa/src/format/", "tvm/src/vmexec/", "tvm/src/library_bin.rs", "tvm/src/elf/")


def same_text_sites(sites: list[Site]) -> list[list[Site]]:
    """The groups of sites of one crate that build one text at several places: a test that
    causes the text is credited to each of them (errs/01, errs/02)."""
    groups: dict[tuple[str, str], dict[tuple[str, int], Site]] = {}
    for s in sites:
        groups.setdefault((s.path.split("/", 1)[0], s.text), {})[(s.path, s.line)] = s
    return [sorted(g.values(), key=lambda s: (s.path, s.line)) for g in groups.values() if len(g) > 1]


def unexcused(groups: list[list[Site]], tested: set[tuple[str, str]], exempt: dict[tuple[str, str], str]):
    """The groups whose sites are credited with one test (their text is tested) without every
    file's line saying why they may share it (a "same text" reason; never in a reader)."""
    out = []
    for g in groups:
        keys = {(s.path, s.text) for s in g}
        if not keys <= tested:
            continue  # untested: each site needs its own reason anyway
        if any(s.path.startswith(READERS) for s in g) or not all(exempt.get(k, "").startswith(SAME) for k in keys):
            out.append(g)
    return out


def site_status() -> tuple[set[Helper], list[tuple[Site, bool]]]:
    """Every site, and whether a test of a crate that can run it causes its message."""
    messages, tests, reach = EC.collect_grouped()
    sources = {}
    for crate in EC.CRATES:
        for p in sorted((EC.ROOT / crate / "src").rglob("*.rs")):
            if not EC.is_test_file(p):
                sources[str(p.relative_to(EC.ROOT))] = without_comment_lines(EC.split_tests(p.read_text())[0])
    helpers, sites = helpers_and_sites(sources, messages)
    status = []
    for s in sites:
        crate = s.path.split("/", 1)[0]
        m = EC.Message(s.path, s.line, s.text, max(EC.fragments(s.text), key=len), [])
        status.append((s, any(EC.template(m).search(tests[w]) for w in tests if crate in reach[w])))
    return helpers, status


def write_exemptions(status: list[tuple[Site, bool]], exempt: dict[tuple[str, str], str]) -> None:
    header = [line for line in EXEMPT.read_text().splitlines() if line.startswith("#")] if EXEMPT.exists() else []
    keys = {(s.path, s.text) for s, tested in status if not tested}
    shared = {(s.path, s.text) for g in same_text_sites([s for s, _ in status]) for s in g}
    keys |= {k for k, why in exempt.items() if why.startswith(SAME) and k in shared}
    body = [f"{p} | {json.dumps(t, ensure_ascii=False)} | {exempt.get((p, t), NOT_YET)}" for p, t in sorted(keys)]
    EXEMPT.write_text("\n".join(header + body) + "\n")


def main() -> int:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--untested", action="store_true", help="list only the sites no test causes")
    ap.add_argument("--check", action="store_true", help="fail on an untested site not exempted, or a stale exemption")
    ap.add_argument("--update", action="store_true", help="rewrite the exemptions (see above)")
    opts = ap.parse_args()
    helpers, status = site_status()
    untested = sum(not tested for _, tested in status)
    if not opts.check:
        for s, tested in status:
            if not (opts.untested and tested):
                print(f"{s.path}:{s.line}: {'tested' if tested else 'UNTESTED'}: {s.text!r}")
    print(f"helpers: {len(helpers)}, call sites with a literal: {len(status)}, not caused by a test: {untested}")
    try:
        exempt = read_exemptions(EXEMPT.read_text()) if EXEMPT.exists() else {}
    except ValueError as e:
        print(e)
        return 1
    if opts.update:
        write_exemptions(status, exempt)
        print(f"rewrote {EXEMPT.relative_to(EC.ROOT)}")
        return 0
    if not opts.check:
        return 0
    missing, stale = check(status, exempt)
    kinds = {r: sum(v.startswith(r) for v in exempt.values()) for r in (*REASONS, NOT_YET)}
    print("exempt: " + ", ".join(f"{n} {r.rstrip(': ')}" for r, n in kinds.items()))
    for s in missing:
        print(f"  untested, and no reason given: {s.path}:{s.line}: {s.text!r}")
    for path, text in stale:
        print(f"  stale exemption (no untested site of {path} has this text): {text!r}")
    tested = {(s.path, s.text) for s, t in status if t}
    repeated = unexcused(same_text_sites([s for s, _ in status]), tested, exempt)
    for group in repeated:
        where = ", ".join(f"{s.path}:{s.line}" for s in group)
        print(f"  one text at {len(group)} sites ({where}): {group[0].text!r}: a test of it is credited to each;")
        print("    give each site its own text, or (outside the readers) a 'same text: ...' line saying why")
    return 1 if missing or stale or repeated else 0


if __name__ == "__main__":
    sys.exit(main())
