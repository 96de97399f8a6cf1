"""The rule that every int a Python entry point reads goes through the one extractor
(python/src/int_arg.rs), so an out-of-range int is refused naming its place and range (attack
finding other/11): a grep-level check of python/src, with no build needed.

Two ways to bypass it are caught:
- a parameter of a `#[pyfunction]` or a `#[pymethods]` method typed as a Rust integer (pyo3 then
  converts it, with its bare "Python int too large to convert to C long" and no place);
- an `.extract::<i64>()` (or any integer type) outside int_arg.rs whose line does not map the
  error to `int_out_of_range`, unless a comment `// int probe: <why>` just above says it only asks
  whether a value is an int (a probe never reports an overflow of its own).
"""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "python" / "src"
INT = r"(?:i|u)(?:8|16|32|64|128|size)"
INT_PARAM = re.compile(rf"^(?:Option<)?{INT}>?$")
EXTRACT = re.compile(rf"extract::<{INT}>\(\)|:\s*{INT}\s*=\s*[^;]*\.extract\(\)")

#: Entry points whose int parameters keep pyo3's conversion, each with the reason.
EXEMPT = {
    # pyo3 writes a literal default (`dev_id = 0`, `line = 1`) only for a Rust int parameter,
    # and the stub (checked by stubtest) shows it; a `&PyAny` parameter cannot have one.
    ("device.rs", "cpu", "dev_id"),
    ("builder.rs", "file", "line"),
    ("builder.rs", "file", "col"),
    ("vm.rs", "time_evaluator", "number"),
    ("vm.rs", "time_evaluator", "repeat"),
    ("vm.rs", "time_evaluator", "repeats_to_cooldown"),
    ("vm.rs", "trace", "max_bytes"),
}


def _strip(text: str) -> str:
    """`text` with comments, string and char literals blanked (their braces and parens do not
    count), scanned left to right as the Rust lexer does; lifetimes (`'py`) stay."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
        elif text.startswith("/*", i):
            i = text.index("*/", i) + 2
        elif (m := re.compile(r'b?r(#*)"').match(text, i)) and not (
            text[i - 1 : i].isalnum() or text[i - 1 : i] == "_"
        ):
            end = text.index('"' + m.group(1), m.end())
            out.append('""')
            i = end + 1 + len(m.group(1))
        elif c == '"':
            j = i + 1
            while text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""')
            i = j + 1
        elif m := re.compile(r"'(?:\\(?:x..|u\{[^}]*\}|.)|[^'\\])'").match(text, i):
            out.append("' '")
            i = m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _matching(text: str, start: int, open_: str, close: str) -> int:
    """The index of the `close` matching the `open_` at `start`."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_:
            depth += 1
        elif text[i] == close:
            depth -= 1
            if depth == 0:
                return i
    raise AssertionError(f"unbalanced {open_}{close} from offset {start}")


def _params(sig: str) -> list[tuple[str, str]]:
    """(name, type) of each parameter in a parameter list, split at top-level commas."""
    out, depth, cur = [], 0, ""
    for ch in sig + ",":
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == "," and depth == 0:
            if ":" in cur:
                name, ty = cur.split(":", 1)
                out.append((name.strip().removeprefix("mut "), " ".join(ty.split())))
            cur = ""
        else:
            cur += ch
    return out


def _exposed_fns(text: str) -> list[tuple[str, str]]:
    """(name, parameter list) of each function Python can call: `#[pyfunction]`s and the
    methods of `#[pymethods]` blocks."""
    fns = []
    for m in re.finditer(r"#\[pyfunction\]", text):
        f = re.compile(r"\bfn\s+(\w+)\s*(?:<[^(]*>)?\(").search(text, m.end())
        assert f, "a #[pyfunction] with no fn"
        fns.append((f.group(1), text[f.end() : _matching(text, f.end() - 1, "(", ")")]))
    for m in re.finditer(r"#\[pymethods\]", text):
        body_start = text.index("{", m.end())
        body = text[body_start + 1 : _matching(text, body_start, "{", "}")]
        depth = 0
        i = 0
        while i < len(body):
            if body[i] == "{":
                depth += 1
            elif body[i] == "}":
                depth -= 1
            elif depth == 0:
                f = re.compile(r"\bfn\s+(\w+)\s*(?:<[^(]*>)?\(").match(body, i)
                if f:
                    end = _matching(body, f.end() - 1, "(", ")")
                    fns.append((f.group(1), body[f.end() : end]))
                    i = end
            i += 1
    return fns


def violations(file: str, text: str) -> list[str]:
    """Every bypass of the extractor in the Rust source `text` of python/src/`file`."""
    found = []
    code = _strip(text)
    for fn, sig in _exposed_fns(code):
        for name, ty in _params(sig):
            if INT_PARAM.match(ty) and (file, fn, name) not in EXEMPT:
                found.append(f"{file}: fn {fn}: parameter {name}: {ty} (read it with int_arg::extract_int)")
    if file == "int_arg.rs":
        return found
    lines = text.splitlines()
    for n, line in enumerate(lines):
        if not EXTRACT.search(line) or "int_out_of_range" in line:
            continue
        if n > 0 and "// int probe:" in lines[n - 1]:
            continue
        found.append(f"{file}:{n + 1}: {line.strip()} (use int_arg::extract_int, or say `// int probe: why`)")
    return found


def test_no_entry_point_reads_an_int_without_the_extractor() -> None:
    found = [v for p in sorted(SRC.glob("*.rs")) for v in violations(p.name, p.read_text())]
    assert found == []


def test_the_rule_catches_each_bypass() -> None:
    src = """
#[pyfunction]
#[pyo3(signature = (n, m = None))]
pub fn f(n: u32, m: Option<i64>, s: &str) -> u32 { n }

#[pymethods]
impl X {
    fn g(&self, py: Python<'_>, k: &Bound<'_, PyAny>,
         idx: usize) -> PyResult<()> {
        let a = k.extract::<i64>()?;
        let b: u32 = k.extract()?;
        // int probe: only asks whether k is an int
        let c = k.extract::<i64>().is_ok();
        let d = k.extract::<i64>().map_err(|_| int_out_of_range(k, "k"))?;
        let s = "{ ( not code";
        Ok(())
    }
}
fn helper(n: u32) {}
"""
    assert violations("x.rs", src) == [
        "x.rs: fn f: parameter n: u32 (read it with int_arg::extract_int)",
        "x.rs: fn f: parameter m: Option<i64> (read it with int_arg::extract_int)",
        "x.rs: fn g: parameter idx: usize (read it with int_arg::extract_int)",
        "x.rs:10: let a = k.extract::<i64>()?; (use int_arg::extract_int, or say `// int probe: why`)",
        "x.rs:11: let b: u32 = k.extract()?; (use int_arg::extract_int, or say `// int probe: why`)",
    ]
