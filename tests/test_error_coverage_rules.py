"""The rules of scripts/error-coverage.py, on made-up sources: a message text at two sites of one
crate is a finding (a test causing it cannot tell which site it reached), a message wrapped in
two constructor calls is one message, and copies in two crates are not a finding (each crate's
tests prove their own copy)."""

from __future__ import annotations

import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _script():
    spec = importlib.util.spec_from_file_location("error_coverage", os.path.join(ROOT, "scripts", "error-coverage.py"))
    ec = importlib.util.module_from_spec(spec)
    sys.modules["error_coverage"] = ec
    spec.loader.exec_module(ec)
    return ec


EC = _script()


def _messages(path: str, code: str):
    return EC.messages_of(EC.ROOT / path, code)


# The texts are built from halves: written whole here, they would count as tests of themselves.
TEXT = "the widget " + "frobnicator {n} is out of alignment"


def test_one_text_at_two_sites_of_a_crate_is_a_finding() -> None:
    code = f"""
fn a(n: u32) -> Result<()> {{ Err(Error::value(format!("{TEXT}"))) }}
fn b(n: u32) -> Result<()> {{ Err(Error::value(format!("{TEXT}"))) }}
"""
    messages = _messages("core/src/fake.rs", code)
    assert [(m.line, m.text) for m in messages] == [(2, TEXT), (3, TEXT)]
    (group,) = EC.same_text_sites(messages)
    assert [m.line for m in group] == [2, 3]


def test_the_sites_may_be_in_two_files_of_one_crate() -> None:
    one = _messages("isa/src/a.rs", f'fn a() -> E {{ value_err(format!("{TEXT}")) }}')
    two = _messages("isa/src/b/c.rs", f'fn b() -> E {{ value_err(format!("{TEXT}")) }}')
    (group,) = EC.same_text_sites(one + two)
    assert sorted(m.path for m in group) == ["isa/src/a.rs", "isa/src/b/c.rs"]


def test_copies_in_two_crates_are_not_a_finding() -> None:
    one = _messages("python/src/a.rs", f'fn a() -> E {{ value_err(format!("{TEXT}")) }}')
    two = _messages("capi/src/a.rs", f'fn a() -> E {{ value_err(format!("{TEXT}")) }}')
    assert EC.same_text_sites(one + two) == []


def test_one_site_made_a_function_is_not_a_finding() -> None:
    code = f"""
fn misaligned(n: u32) -> Error {{ Error::value(format!("{TEXT}")) }}
fn a(n: u32) -> Result<()> {{ Err(misaligned(n)) }}
fn b(n: u32) -> Result<()> {{ Err(misaligned(n + 1)) }}
"""
    messages = _messages("core/src/fake.rs", code)
    assert [m.text for m in messages] == [TEXT]
    assert EC.same_text_sites(messages) == []


def test_a_message_in_two_nested_calls_over_two_lines_is_one_message() -> None:
    # `Err(` on one line and the constructor holding the literal on the next were two sites.
    code = f"""
fn a(c: &Cursor, n: u32) -> Result<()> {{
    return Err(
        c.err_at(0, format!("{TEXT}"))
    );
}}
"""
    messages = _messages("isa/src/fake.rs", code)
    assert [(m.line, m.text) for m in messages] == [(4, TEXT)]
    assert EC.same_text_sites(messages) == []


def test_two_texts_that_differ_only_in_a_placeholder_are_one_text() -> None:
    # The values filled in at run time do not tell sites apart, nor do the placeholders' names.
    other = TEXT.replace("{n}", "{count:?}")
    code = f"""
fn a(n: u32) -> Error {{ Error::value(format!("{TEXT}")) }}
fn b(n: u32) -> Error {{ Error::value(format!("{TEXT}", n = n + 1)) }}
fn c(count: u32) -> Error {{ Error::value(format!("{other}")) }}
"""
    (group,) = EC.same_text_sites(_messages("core/src/fake.rs", code))
    assert [m.line for m in group] == [2, 3, 4]


def test_the_tree_has_no_text_at_two_sites_of_a_crate() -> None:
    messages, _, _ = EC.collect_grouped()
    found = [[f"{m.path}:{m.line}" for m in g] for g in EC.same_text_sites(messages)]
    assert found == []


def test_a_phrase_shared_after_a_placeholder_identifies_neither_message() -> None:
    # Y's fragment starts where its placeholder ends ("{n} does not fit ..."), so it has no space
    # before "does"; X has the phrase after a word. Windows are compared without their end
    # spaces: " does not fit in the fro" of X is shared with Y, and a test causing Y (its value
    # filled in) is no test of X.
    tail = "does not fit in the " + "frobnicator table"
    x = _messages("core/src/x.rs", f'fn a() -> E {{ value_err("widget count {tail}") }}')
    y = _messages("core/src/y.rs", f'fn b(n: u32) -> E {{ value_err(format!("{{n}} {tail}")) }}')
    own = EC.distinctive_windows(x + y)
    caused_y = f"5 {tail}"
    assert not [w for w in own[x[0].text] if w in caused_y]
    # X's own words still identify it.
    assert any(w in f"widget count {tail}" for w in own[x[0].text])


# The attribution of a test string to the message it identifies (R-errs-2). The texts are built
# from halves, as above, so that they are no test of a real message.
WIDE = "{what} {v} does not " + "frobnicate in 32 widgets"
NARROW = "register {v} does not " + "frobnicate in 32 widgets"


def _attributed(sources: dict[str, str], test: str) -> tuple[set[str], list]:
    messages = [m for path, code in sources.items() for m in _messages(path, code)]
    own = EC.distinctive_windows(messages)
    return EC.attribute(test, "core", EC.evidence_in(test, messages, own))


def test_a_string_of_a_message_holding_another_messages_words_tests_only_the_longer() -> None:
    # "register 7 does not frobnicate ..." holds all of WIDE's literal words, and more of
    # NARROW's: it is NARROW's (the rule removed, it counted for both).
    sources = {
        "core/src/a.rs": f'fn a(what: &str, v: u64) -> E {{ value_err(format!("{WIDE}")) }}',
        "core/src/b.rs": f'fn b(v: u64) -> E {{ value_err(format!("{NARROW}")) }}',
    }
    test = "sect at byte 3: register 7 does not " + "frobnicate in 32 widgets"
    winners, ties = _attributed(sources, test)
    assert winners == {EC.printed(NARROW)} and ties == []
    # A string naming another field is WIDE's alone.
    winners, _ = _attributed(sources, "start instruction 7 does not " + "frobnicate in 32 widgets")
    assert winners == {EC.printed(WIDE)}


def test_a_string_two_messages_cover_equally_tests_neither_and_is_reported() -> None:
    same = "the frobnicator " + "table is not sorted"
    sources = {
        "core/src/a.rs": f'fn a(x: u32) -> E {{ value_err(format!("{same} {{x}}")) }}',
        "core/src/b.rs": f'fn b(y: u32) -> E {{ value_err(format!("{{y}} {same}")) }}',
    }
    winners, ties = _attributed(sources, "error: " + same)
    assert winners == set()
    assert [(t.string, t.texts) for t in ties] == [(same, sorted([same + " {}", "{} " + same]))]


def test_a_whole_match_wins_over_the_same_words_of_a_message_of_several_literals() -> None:
    # B expects SAME and finds "row {n}": a string of SAME alone is A's (B's other literal is
    # missing); one that shows B's found text too is B's.
    same = "the frobnicator " + "table is not sorted"
    sources = {
        "core/src/a.rs": f'fn a() -> E {{ value_err("{same}") }}',
        "core/src/b.rs": f'fn b(n: u32) -> E {{ Error::type_mismatch("{same}", format!("row {{n}}")) }}',
    }
    winners, ties = _attributed(sources, "error: " + same + ", found str")
    assert winners == {same} and ties == []
    winners, _ = _attributed(sources, "expected " + same + ", found row 3")
    assert winners == {same + " | row {}"}


def test_pieces_listed_together_are_one_test_string() -> None:
    # `&["DT_X: symbol", "is in no frob chain"]`: the two pieces one check expects of one
    # message are one line, which the message's template (its placeholder between) matches.
    src = 'check(&["DT_FROB: symbol", "is in no ' + 'frobnicated chain"]);\nother("x");'
    lines = EC.test_strings(src).split("\n")
    assert lines == ["DT_FROB: symbol" + EC.PIECE_GAP + "is in no frobnicated chain", "x"]
    msg = "DT_FROB: symbol {i} is in no " + "frobnicated chain"
    (m,) = _messages("core/src/a.rs", f'fn a(i: u32) -> E {{ value_err(format!("{msg}")) }}')
    assert EC.template(m).search(lines[0])
    # Python's implicit concatenation is one string too, with nothing between.
    assert EC.test_strings('raises("DT_FROB: symbol 3 " "is in no frobnicated chain")') == (
        "DT_FROB: symbol 3 is in no frobnicated chain"
    )


def _sites_script():
    spec = importlib.util.spec_from_file_location(
        "error_coverage_sites", os.path.join(ROOT, "scripts", "error-coverage-sites.py")
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules["error_coverage_sites"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_the_sites_report_names_each_literal_caller_of_a_helper_through_a_pass_through() -> None:
    # `wide` builds the message from `what`; `field` passes its own `what` on; two callers pass
    # literals to `field`, one directly to `wide`: three sites, each with its literal filled in.
    tail = " does not " + "frobnicate in 32 widgets"
    code = f"""
impl C {{
    fn wide(&self, at: usize, what: &str, v: u64) -> Error {{
        self.err_at(at, format!("{{what}} {{v}}{tail}"))
    }}
    fn field(&mut self, what: &str) -> Result<u32> {{
        let v = self.varint()?;
        u32::try_from(v).map_err(|_| self.wide(0, what, v))
    }}
}}
fn decode(c: &mut C) -> Result<()> {{
    c.field("start widget")?;
    c.field("widget count")?;
    Err(c.wide(3, "lone widget", 5))
}}
"""
    sites_mod = _sites_script()
    messages = _messages("isa/src/fake.rs", code)
    helpers, sites = sites_mod.helpers_and_sites({"isa/src/fake.rs": code}, messages)
    assert {h.function for h in helpers} == {"wide", "field"}
    assert [(s.line, s.text) for s in sites] == [
        (12, "start widget {v}" + tail),
        (13, "widget count {v}" + tail),
        (14, "lone widget {v}" + tail),
    ]


def _sites_script():
    spec = importlib.util.spec_from_file_location(
        "error_coverage_sites", os.path.join(ROOT, "scripts", "error-coverage-sites.py")
    )
    es = importlib.util.module_from_spec(spec)
    sys.modules["error_coverage_sites"] = es  # dataclasses look their module up
    spec.loader.exec_module(es)
    return es


ES = _sites_script()

# A helper that builds its message from the name its callers pass, and two callers; the texts are
# built from halves, as above.
HELPER = 'fn need(c: &C, what: &str) -> Error { Error::format(format!("{what} ' + 'is beyond the frobnicator")) }\n'
CALLERS = 'fn a(c: &C) { need(c, "alpha"); }\nfn b(c: &C) { need(c, "beta"); }\n'


def _sites(sources: dict[str, str]):
    messages = [m for path, code in sources.items() for m in _messages(path, code)]
    return ES.helpers_and_sites(sources, messages)[1]


def test_each_literal_passed_to_a_helper_is_a_site() -> None:
    sites = _sites({"tvm/src/fake.rs": HELPER + CALLERS})
    assert [s.text for s in sites] == ["alpha " + "is beyond the frobnicator", "beta " + "is beyond the frobnicator"]


def test_a_file_calling_its_own_function_of_the_name_is_no_site() -> None:
    # paged_kv_cache's `err(msg)` is not attention_kv_cache's `err(op, msg)`.
    own = 'fn need(x: u32) -> u32 { x }\nfn c() { need(3, "gamma"); }\n'
    sites = _sites({"tvm/src/fake.rs": HELPER + CALLERS, "tvm/src/other.rs": own})
    assert {s.path for s in sites} == {"tvm/src/fake.rs"}


def test_a_call_in_a_comment_is_no_site() -> None:
    code = ES.without_comment_lines(HELPER + '/// need(c, "delta");\n' + CALLERS)
    assert len(_sites({"tvm/src/fake.rs": code})) == 2


def test_the_check_fails_on_an_untested_site_not_listed_and_on_a_stale_line() -> None:
    alpha, beta = _sites({"tvm/src/fake.rs": HELPER + CALLERS})
    status = [(alpha, True), (beta, False)]
    missing, stale = ES.check(status, {})
    assert (missing, stale) == ([beta], [])
    listed = {(beta.path, beta.text): "internal: reached only by a bug"}
    assert ES.check(status, listed) == ([], [])
    # The line of a site a test now causes is stale.
    assert ES.check([(alpha, True), (beta, True)], listed) == ([], [(beta.path, beta.text)])
    # A line --update wrote for a new site gives no reason: the site is still missing one.
    assert ES.check(status, {(beta.path, beta.text): ES.NOT_YET}) == ([beta], [])


def test_an_exemption_needs_a_reason_of_a_known_kind() -> None:
    text = ES.json.dumps("beta " + "is beyond the frobnicator")
    assert ES.read_exemptions(f"tvm/src/fake.rs | {text} | limit: 2^32 entries\n")
    for bad in (f"tvm/src/fake.rs | {text} | because\n", f"tvm/src/fake.rs {text}\n"):
        try:
            ES.read_exemptions(bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad!r}")


def test_ci_runs_the_site_rule() -> None:
    # The rule is a section of scripts/test.sh: removing the line fails here.
    with open(os.path.join(ROOT, "scripts", "test.sh")) as f:
        sections = [line.split() for line in f if line.startswith("section ")]
    assert any('error-coverage-sites.py"' in " ".join(s) and "--check" in s for s in sections), sections


def test_one_text_at_two_sites_needs_its_own_text_or_a_reason() -> None:
    # errs/01, errs/02: a test of a text two sites build is credited to both. A reader's two
    # reads must be named apart; elsewhere a "same text" line may say why they share it.
    code = HELPER + 'fn a(c: &C) { need(c, "alpha"); }\nfn b(c: &C) { need(c, "alpha"); }\n'
    (group,) = ES.same_text_sites(_sites({"isa/src/format/fake.rs": code}))
    assert [s.line for s in group] == [2, 3]
    assert ES.same_text_sites(_sites({"isa/src/format/fake.rs": HELPER + CALLERS})) == []
    for path, excusable in (("isa/src/format/fake.rs", False), ("capi/src/fake.rs", True)):
        groups = ES.same_text_sites(_sites({path: code}))
        key = (path, groups[0][0].text)
        assert ES.unexcused(groups, {key}, {}) == groups, "a tested group without a reason"
        same = {key: ES.SAME + "the later site cannot fail"}
        assert (ES.unexcused(groups, {key}, same) == []) == excusable, path
        assert ES.unexcused(groups, set(), {}) == [], "untested: each site needs its own reason anyway"
