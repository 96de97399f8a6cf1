#!/usr/bin/env python3
"""Every error message the Rust crates can return is caused by a test, or exempted with a reason.

The messages are the format strings given to the error constructors (``Error::value``,
``value_err``, pyo3's ``new_err``, the C API's ``CError::new``/``CError::invalid``,
``#[error("...")]`` of the error enums, ...) in the crates' non-test source. A message counts as
tested when a string of a test holds the whole of it (its literal with the longest fragment, the
placeholders filled in with anything on one line), or a distinctive piece of it: ``WINDOW``
consecutive characters of its longest fragment (the text between ``{...}`` placeholders) when
that is at least ``WINDOW`` long, else the whole of one of its fragments of at least
``MIN_FRAGMENT`` characters, and in either case a piece that no message of another text contains
(a piece two messages share identifies neither). Tests are Rust tests (``tests/`` folders,
``tests.rs``/``*_tests.rs`` files and ``#[cfg(test)]`` modules, and the expected outputs kept
beside them), the C programs in those folders (the C API's), and Python tests (``tests/``, their
comments left out). Tests assert messages with their values filled in (``"alignment 0x1003 is
not a power of two"``), so a whole fragment would be too strict. Messages whose fragments are all
shorter than ``MIN_FRAGMENT`` are built from parts that carry the meaning (``"{name}: {msg}"``)
and are not tracked on their own. A test counts only for
the messages of crates it can run (its own crate, that crate's dependencies; for Python tests,
the extension's crates, and the C API for those that build C programs): the C API and the Python
extension hold copies of some messages, and a test of one copy says nothing of the other.
A test string counts only for the message it identifies: where the literal words of two
messages cover the same place of a test, the one whose words include the other's and more is
the one the test caused ("register 7 does not fit in 32 bits" is the message "register {v} does
not fit in 32 bits", not "{what} {v} does not fit in 32 bits", whose words it also holds); at an
equal cover a whole match (every literal of the message) wins over a partial one, and a place
two messages cover just as well tests neither and is reported. Pieces a test lists together
(``&["DT_HASH: symbol", "is in no bucket's chain"]``) are one string, a value between them.
A message whose text appears at several sites of one crate is a finding of its own: a test
that causes the text cannot tell which site it reached (give each site its context in the text,
or build the message in one function the sites call).

A message no test causes must be listed in ``scripts/error-coverage-exempt.txt`` with why: an
internal error that no input reaches, or one left to the owner of code being changed. A listed
fragment that no longer names an untested message is an error too, so the list stays true.

The list also holds the messages not yet tested when this check was introduced (reason
"not yet tested"): CI fails on any new untested message, and on a listed one that a test now
causes (remove its line), so the list only shrinks.

Usage: ``scripts/error-coverage.py [--list] [--update]`` (``--list`` prints every message and
its status; ``--update`` rewrites the list: stale lines dropped, new untested messages added as
"not yet tested", the reasons of the others kept). Exits 1 when a message is neither tested nor
exempted, an exemption is stale, or one text is the message of several sites of a crate.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import signal
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CRATES = ["threads", "core", "isa", "tools", "vm", "builtins", "builder", "cli", "tvm", "python", "capi"]
EXEMPT = ROOT / "scripts" / "error-coverage-exempt.txt"

#: A fragment shorter than this says too little to find a message by.
MIN_FRAGMENT = 12
#: How many consecutive characters of a fragment a test must contain.
WINDOW = 24

#: Calls whose arguments hold a message (matched just before their opening parenthesis).
CONSTRUCTORS = re.compile(
    r"(?:\b(?:Error|ErrorKind)::(?:value|type_mismatch|index|arity|alloc|arithmetic|format|Value|Format)"
    r"|\b(?:value_err|type_err|kind_err|err_at|value_error|type_error|check_error)"
    r"|\.err"
    r"|\bPy\w*(?:Error|Exception)::new_err"
    r"|\bCliError::new"
    r"|\bCError::(?:new|invalid)"
    r"|\bio::Error::(?:new|other)"
    r"|\bVerifyError::(?:program|function)"
    r"|\bCheckError::function"
    r"|\bErr)\s*\("
)
#: thiserror's message attribute.
ATTRIBUTE = re.compile(r"#\[error\(")
#: A Rust string literal: plain (with escapes) or raw.
STRING = re.compile(r'r(#*)"(.*?)"\1|"((?:[^"\\]|\\.)*)"', re.S)
PLACEHOLDER = re.compile(r"\{[^{}]*\}")


@dataclass
class Message:
    path: str
    line: int
    text: str
    #: The longest fragment, which names the message in the exemptions.
    fragment: str
    #: Every fragment long enough to find the message by.
    pieces: list[str]
    tested: bool = False
    exempt: str | None = None


def unescape(s: str) -> str:
    """A Rust string literal's escapes, as the message prints them."""
    s = re.sub(r"\\\n\s*", "", s)  # line continuation
    return s.replace(r"\"", '"').replace(r"\n", "\n").replace(r"\t", "\t").replace(r"\'", "'").replace("\\\\", "\\")


def fragments(template: str) -> list[str]:
    """The literal pieces of a format string between its placeholders."""
    t = template.replace("{{", "\x00").replace("}}", "\x01")
    return [p.replace("\x00", "{").replace("\x01", "}").strip() for p in PLACEHOLDER.split(t)]


def call_args(src: str, open_at: int) -> str:
    """The text between the parenthesis at `open_at` and its match (strings skipped)."""
    depth, i = 0, open_at
    while i < len(src):
        c = src[i]
        if c == '"' or (c == "r" and src[i + 1 : i + 2] in ('"', "#") and not src[i - 1].isalnum()):
            m = STRING.match(src, i)
            if m:
                i = m.end()
                continue
        elif c == "/" and src[i + 1 : i + 2] == "/":
            i = src.find("\n", i)
            if i < 0:
                break
            continue
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return src[open_at + 1 : i]
        i += 1
    return src[open_at + 1 :]


def is_test_file(path: Path) -> bool:
    parts = path.relative_to(ROOT).parts
    return "tests" in parts or path.name == "tests.rs" or path.name.endswith("_tests.rs")


def split_tests(src: str) -> tuple[str, str]:
    """A source file's code and its `#[cfg(test)]` modules (which end each file by custom)."""
    m = re.search(r"^\s*#\[cfg\(test\)\]\s*\n\s*(?:pub(?:\(crate\))?\s+)?mod\s+\w+\s*\{", src, re.M)
    if not m:
        return src, ""
    return src[: m.start()], src[m.start() :]


def messages_of(path: Path, code: str) -> list[Message]:
    rel = str(path.relative_to(ROOT))
    found = []
    for rx in (CONSTRUCTORS, ATTRIBUTE):
        for m in rx.finditer(code):
            args = call_args(code, m.end() - 1)
            found_literals = list(STRING.finditer(args))
            literals = [unescape(s.group(2) if s.group(2) is not None else s.group(3)) for s in found_literals]
            pieces = [p for lit in literals for p in fragments(lit)]
            if not pieces:
                continue
            best = max(pieces, key=len)
            if len(best) < MIN_FRAGMENT:
                continue
            line = code.count("\n", 0, m.start()) + 1
            # The longest fragment when it is long enough to be distinctive on its own
            # ("numpy has no" would find every message that starts so); else each one that is.
            usable = [best] if len(best) >= WINDOW else [p for p in pieces if len(p) >= MIN_FRAGMENT]
            # Where its first literal starts in the file: one message however many calls wrap it.
            at = m.end() + found_literals[0].start()
            found.append((at, Message(rel, line, " | ".join(literals), best, usable)))
    # `Err(Error::value(...))` is one message, matched twice (on one line or two): the call that
    # holds its first literal nearest is kept.
    unique = {}
    for at, msg in sorted(found, key=lambda f: (f[0], -f[1].line)):
        unique.setdefault(at, msg)
    return sorted(unique.values(), key=lambda m: m.line)


#: A string literal of a test: Rust (plain or raw) or Python (any quote, any prefix).
TEST_STRING = re.compile(
    r'r(#*)"(.*?)"\1|"""(.*?)"""|\'\'\'(.*?)\'\'\'|"((?:[^"\\\n]|\\.)*)"|\'((?:[^\'\\\n]|\\.)*)\'', re.S
)


#: What stands between two literals that are pieces of one expected message.
LIST_SEPARATOR = re.compile(r"[ \t]*,[ \t\n]*")
#: How such pieces are joined: a character no message holds, which a placeholder matches.
PIECE_GAP = "\x1f"


def test_strings(text: str) -> str:
    """The string literals of test sources, with the escapes of Rust strings and Python regexes
    removed, one per line; text files (expected outputs) whole."""
    out, end = [], -1
    for m in TEST_STRING.finditer(text):
        s = next(g for g in m.groups()[1:] if g is not None) if any(g is not None for g in m.groups()[1:]) else ""
        s = re.sub(r"\\\n\s*", "", s)
        s = re.sub(r"\\([^\w\s])", r"\1", s).replace(r"\n", "\n")
        # Literals listed one after another (`&["DT_HASH: symbol", "is in no bucket's chain"]`,
        # the pieces one check expects of one message) are one line, a value between them.
        if out and text[end : m.start()].isspace():
            out[-1] += s  # Python's implicit concatenation: one string written on two lines
        elif out and LIST_SEPARATOR.fullmatch(text, end, m.start()):
            out[-1] += PIECE_GAP + s
        else:
            out.append(s)
        end = m.end()
    return "\n".join(out)


def without_comments(python: str) -> str:
    """Python source without its comments: a message quoted in a comment (say, one explaining
    why it cannot be reached) is not a test of it."""
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(python).readline) if t.type != tokenize.COMMENT]
        return tokenize.untokenize(tokens)
    except (tokenize.TokenError, SyntaxError):
        return python


def distinctive_windows(messages: list[Message]) -> dict[str, set[str]]:
    """For each message text, the windows of its pieces that no message of another text has in
    any of its fragments (copies of one text at several sites share theirs)."""
    texts = {m.text: m for m in messages}
    # Each text's fragments once (its copies at several sites share them), every text counted:
    # a fragment two texts hold is shared, though it is one string.
    everything = "\x00".join(p for m in texts.values() for p in set(fragments_of(m)))
    own = {}
    for text, m in texts.items():
        mine = "\x00".join(set(fragments_of(m)))
        # Compared without the spaces at a window's ends: a fragment ends where a placeholder
        # begins, so " does not fit" in one message and "does not fit" in another are shared.
        own[text] = {w for p in m.pieces for w in windows(p) if everything.count(w.strip()) == mine.count(w.strip())}
    return own


def template(m: Message) -> re.Pattern[str]:
    """The literal holding the message's longest fragment, its placeholders as wildcards within
    one line: a test that holds the whole message, values filled in."""
    literal = next(lit for lit in m.text.split(" | ") if m.fragment in fragments(lit))
    parts = [re.escape(p) for p in fragments(literal)]
    return re.compile(r"[^\n]{0,200}?".join(p for p in parts if p))


def fragments_of(m: Message) -> list[str]:
    """Every literal fragment of a message (long or short)."""
    return [p for lit in m.text.split(" | ") for p in fragments(lit) if p]


def windows(fragment: str) -> list[str]:
    if len(fragment) <= WINDOW:
        return [fragment]
    return [fragment[i : i + WINDOW] for i in range(len(fragment) - WINDOW + 1)]


@dataclass
class Evidence:
    """Where a test's text holds one message text: the characters its literal parts cover (a
    template match, or the message's distinctive windows that overlap one another)."""

    text: str
    covered: set[int]
    #: Whether all of a literal's parts matched in order (its template), not windows only.
    whole: bool
    #: The covered letters, digits and spaces: punctuation (": ") says nothing of which message,
    #: a space does (the one between "register" and "does" in "register does not fit ...").
    sig: frozenset[int] = frozenset()

    @property
    def span(self) -> tuple[int, int]:
        return min(self.covered), max(self.covered) + 1

    def beaten_by(self, other: Evidence) -> bool:
        """Whether `other` explains this place: its literal characters include all of ours, and
        more (then our text is a piece of its text: "does not fit in 32 bits" inside "register
        {v} does not fit in 32 bits"), or the same ones as a whole match where ours is a
        partial one (a shared phrase found by windows)."""
        return other.sig >= self.sig and (other.sig != self.sig or (other.whole and not self.whole))

    def tied_with(self, other: Evidence) -> bool:
        """Whether `other` covers the same characters in the same way: the place tests neither."""
        return other.sig == self.sig and other.whole == self.whole


@dataclass
class Tie:
    """A test string that two or more message texts cover equally: it tests none of them."""

    where: str
    string: str
    texts: list[str]


def template_patterns(m: Message) -> list[tuple[re.Pattern[str], bool]]:
    """`template(m)` with each literal part a group (to know which characters the parts cover),
    and whether a match is of the whole message: for a message of several literals (an expected
    and a found text) only the pattern of all of them in order is."""
    literal = next(lit for lit in m.text.split(" | ") if m.fragment in fragments(lit))
    literals = m.text.split(" | ")
    out = []
    for chosen in [[literal]] + ([literals] if len(literals) > 1 else []):
        parts = [re.escape(p) for lit in chosen for p in fragments(lit) if p]
        out.append((re.compile(r"[^\n]{0,200}?".join(f"({p})" for p in parts)), len(chosen) == len(literals)))
    return out


def evidence_in(text: str, messages: list[Message], own: dict[str, set[str]]) -> list[Evidence]:
    """Every place `text` holds a message text (compared as it prints): per text, its matches
    that share a character merged into one place."""
    wanted: dict[str, list[str]] = {}
    for t, ws in own.items():
        for w in ws:
            wanted.setdefault(w, []).append(t)
    lengths = sorted({len(w) for w in wanted})
    raw: dict[str, list[tuple[set[int], bool]]] = {}
    for n in lengths:
        for i in range(len(text) - n + 1):
            for t in wanted.get(text[i : i + n], ()):
                raw.setdefault(printed(t), []).append((set(range(i, i + n)), False))
    for m in {m.text: m for m in messages}.values():
        for pattern, whole in template_patterns(m):
            for match in pattern.finditer(text):
                covered = {k for g in range(1, pattern.groups + 1) for k in range(*match.span(g))}
                if covered:
                    raw.setdefault(printed(m.text), []).append((covered, whole))
    found = []
    for t, pieces in raw.items():
        # Pieces of one text that share a character are one place (windows of one fragment,
        # and the template match around them).
        pieces.sort(key=lambda p: min(p[0]))
        merged: list[Evidence] = []
        for p, whole in pieces:
            for q in merged:
                if p & q.covered:
                    q.covered |= p
                    q.whole |= whole
                    break
            else:
                merged.append(Evidence(t, set(p), whole))
        found += merged
    for e in found:
        e.sig = frozenset(k for k in e.covered if text[k].isalnum() or text[k].isspace())
    return found


def attribute(text: str, where: str, found: list[Evidence]) -> tuple[set[str], list[Tie]]:
    """The message texts a test text identifies: a place counts for its text unless another
    text explains it (`Evidence.beaten_by`) or explains it just as well (`Evidence.tied_with`:
    then it counts for none, and is reported)."""
    found = sorted(found, key=lambda e: e.span)
    spans = [e.span for e in found]
    rivals: list[list[Evidence]] = [[] for _ in found]
    for i, e in enumerate(found):
        j = i + 1
        while j < len(found) and spans[j][0] < spans[i][1]:
            o = found[j]
            if o.text != e.text and o.covered & e.covered:
                rivals[i].append(o)
                rivals[j].append(e)
            j += 1
    winners, ties = set(), []
    for e, others in zip(found, rivals):
        if any(e.beaten_by(o) for o in others):
            continue
        tied = [o for o in others if e.tied_with(o)]
        if not tied:
            winners.add(e.text)
        elif e.text < min(o.text for o in tied):  # reported once, by the first of the texts
            lo = min(min(o.covered) for o in [e, *tied])
            hi = max(max(o.covered) for o in [e, *tied]) + 1
            ties.append(Tie(where, text[lo:hi], sorted({e.text, *(o.text for o in tied)})))
    return winners, ties


def attributed_texts(
    messages: list[Message], tests: dict[str, str], reach: dict[str, set[str]]
) -> tuple[dict[str, set[str]], list[Tie]]:
    """Per group of tests, the message texts its strings identify (of the crates it reaches)."""
    own = distinctive_windows(messages)
    winners, ties = {}, []
    for where, text in tests.items():
        mine = [m for m in messages if m.path.split("/", 1)[0] in reach[where]]
        texts = {m.text for m in mine}
        found = evidence_in(text, mine, {t: ws for t, ws in own.items() if t in texts})
        winners[where], tied = attribute(text, where, found)
        ties += tied
    return winners, ties


#: Python tests reach the crates the extension links; those that build C programs against
#: include/relaxvm.h (the C blocks of the docs) reach the C API too.
PYTHON_CRATE = "python"
C_API_CRATE = "capi"


def crate_deps() -> dict[str, set[str]]:
    """Each crate's folder: the folders of the workspace crates its tests can run (itself, its
    dependencies of every kind, and their normal dependencies), from the Cargo.toml files."""
    names, normal, dev = {}, {}, {}
    for crate in CRATES:
        # The keys of [package] and the dependency tables (tomllib is Python 3.11+).
        section, normal[crate], dev[crate] = "", set(), set()
        for line in (ROOT / crate / "Cargo.toml").read_text().splitlines():
            header = re.match(r"^\[([^\]]+)\]", line)
            key = re.match(r"^([A-Za-z0-9_-]+)\s*[=.]", line)
            if header:
                section = header.group(1)
            elif section == "package" and key and key.group(1) == "name":
                names[line.split("=", 1)[1].strip().strip('"')] = crate
            elif section in ("dependencies", "build-dependencies") and key:
                normal[crate].add(key.group(1))
            elif section == "dev-dependencies" and key:
                dev[crate].add(key.group(1))
    normal = {crate: {names[d] for d in deps if d in names} for crate, deps in normal.items()}
    dev = {crate: {names[d] for d in deps if d in names} for crate, deps in dev.items()}
    closure = {}
    for crate in CRATES:
        seen = {crate} | normal[crate] | dev[crate]
        todo = list(seen - {crate})
        while todo:
            for d in normal[todo.pop()] - seen:
                seen.add(d)
                todo.append(d)
        closure[crate] = seen
    return closure


def collect_grouped() -> tuple[list[Message], dict[str, str], dict[str, set[str]]]:
    """The messages; the tests' text by where the tests live (a crate's folder, "py" for the
    Python tests, "py-c" for those that also build C programs); and which crates each of those
    reaches: a message is tested only by the tests of a crate that can run its code (the C API
    and the Python extension carry copies of some messages, whose tests prove nothing about the
    other copy)."""
    messages, tests = [], {}
    for crate in CRATES:
        texts = tests.setdefault(crate, [])
        for path in sorted((ROOT / crate).rglob("*.rs")):
            if "target" in path.relative_to(ROOT).parts:
                continue
            src = path.read_text()
            if is_test_file(path):
                texts.append(test_strings(src))
                continue
            code, test_part = split_tests(src)
            texts.append(test_strings(test_part))
            messages += messages_of(path, code)
        for path in sorted((ROOT / crate / "tests").rglob("*")) if (ROOT / crate / "tests").is_dir() else []:
            if path.is_file() and path.suffix in (".txt", ".stderr", ".out") and path.stat().st_size < 4 << 20:
                texts.append(path.read_text(errors="replace"))
            elif path.is_file() and path.suffix in (".c", ".cpp"):
                # The C API's C test programs (capi/tests/c/misuse.c: run by scripts/test-c-api.sh).
                texts.append(test_strings(path.read_text()))
    for path in sorted((ROOT / "tests").rglob("*.py")):
        src = path.read_text()
        tests.setdefault("py-c" if "relaxvm.h" in src else "py", []).append(test_strings(without_comments(src)))
    closure = crate_deps()
    reach = {crate: closure[crate] for crate in CRATES}
    reach["py"] = closure[PYTHON_CRATE]
    reach["py-c"] = closure[PYTHON_CRATE] | closure[C_API_CRATE]
    return messages, {where: "\n".join(texts) for where, texts in tests.items()}, reach


def collect() -> tuple[list[Message], str]:
    """The messages, and every test's text in one (whichever crates it reaches)."""
    messages, tests, _ = collect_grouped()
    return messages, "\n".join(tests.values())


def printed(text: str) -> str:
    """A message text as it prints: "{name}" and "{sym}" are both a value filled in."""
    return PLACEHOLDER.sub("{}", text)


def same_text_sites(messages: list[Message]) -> list[list[Message]]:
    """Messages of one text at several sites of one crate: a test that causes the text cannot
    tell which site it reached, so each site must name its context or the sites share one source
    (a function that builds the message)."""
    sites: dict[tuple[str, str], list[Message]] = {}
    for m in messages:
        # Compared as they print: "{name}" and "{sym}" are both a value filled in.
        sites.setdefault((m.path.split("/", 1)[0], printed(m.text)), []).append(m)
    return [group for group in sites.values() if len(group) > 1]


#: An exemption: the file, the message's longest fragment as a JSON string, and why.
EXEMPT_LINE = re.compile(r'^(\S+) \| ("(?:[^"\\]|\\.)*") \| (\S.*)$')


def read_exemptions() -> dict[tuple[str, str], str]:
    """`path | "fragment" | reason` lines (`#` comments)."""
    out = {}
    for n, line in enumerate(EXEMPT.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = EXEMPT_LINE.match(line)
        if not m:
            sys.exit(f"{EXEMPT.name}:{n}: expected 'path | \"fragment\" | reason', found {line!r}")
        out[(m.group(1), json.loads(m.group(2)))] = m.group(3)
    return out


def main() -> int:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the listing quietly
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="print every message and its status")
    ap.add_argument("--update", action="store_true", help="rewrite the exemptions (see above)")
    opts = ap.parse_args()
    messages, tests, reach = collect_grouped()
    exempt = read_exemptions()
    winners, ambiguous = attributed_texts(messages, tests, reach)
    used = set()
    for m in messages:
        crate = m.path.split("/", 1)[0]
        m.tested = any(printed(m.text) in winners[where] for where in tests if crate in reach[where])
        key = (m.path, m.fragment)
        if key in exempt and not m.tested:
            m.exempt = exempt[key]
            used.add(key)
    untested = [m for m in messages if not m.tested and m.exempt is None]
    stale = [k for k in exempt if k not in used]
    repeated = same_text_sites(messages)
    if opts.list:
        for m in messages:
            status = "tested" if m.tested else ("exempt: " + m.exempt if m.exempt else "UNTESTED")
            print(f"{m.path}:{m.line}: {m.fragment!r}: {status}")
    n_tested = sum(m.tested for m in messages)
    n_exempt = sum(m.exempt is not None for m in messages)
    print(f"error messages: {len(messages)}, tested: {n_tested}, exempt: {n_exempt}, untested: {len(untested)}")
    for m in untested:
        print(f"  untested: {m.path}:{m.line}: {m.fragment!r}  (message: {m.text!r})")
    for path, frag in stale:
        print(f"  stale exemption (no untested message at {path} has this fragment): {frag!r}")
    for group in repeated:
        where = ", ".join(f"{m.path}:{m.line}" for m in group)
        print(f"  one message at {len(group)} sites of a crate ({where}): {group[0].text!r}")
    for tie in ambiguous:
        print(f"  a test string that identifies no message ({tie.where}): {tie.string!r} matches equally {tie.texts}")
    if opts.update:
        write_exemptions(messages, exempt)
        print(f"rewrote {EXEMPT.relative_to(ROOT)}")
        return 0
    return 1 if untested or stale or repeated else 0


#: The reason given to a message added by `--update`.
NOT_YET = "not yet tested"


def write_exemptions(messages: list[Message], exempt: dict[tuple[str, str], str]) -> None:
    header = [line for line in EXEMPT.read_text().splitlines() if line.startswith("#")]
    lines = []
    for m in messages:
        key = (m.path, m.fragment)
        if not m.tested and all(k != key for k, _ in lines):
            lines.append((key, exempt.get(key, NOT_YET)))
    body = [f"{path} | {json.dumps(frag, ensure_ascii=False)} | {reason}" for (path, frag), reason in sorted(lines)]
    EXEMPT.write_text("\n".join(header + body) + "\n")


if __name__ == "__main__":
    sys.exit(main())
