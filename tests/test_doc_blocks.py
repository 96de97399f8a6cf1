"""Every code block of README.md and docs/*.md is run or checked by the tests, so none can rot.

- Python blocks run as written, in a scratch folder, each document's blocks in order in one
  namespace (later blocks use what earlier ones defined). A block that prints shows what it
  prints in the next fenced block, a ```` ```text ```` block (only prose between), and its output
  must match it (``output_matches``): line by line, spaces collapsed, a line ``...`` standing for
  any lines; in a ```` ```text timings ```` block any number matches any number and the lines
  may come in any order (a profile's rows are sorted by times). Files they name that only a TVM build
  makes (``mlp.so``, ``transformer_block/model.so``) are copied from the corpus unless an earlier
  block of the document made them; a block that imports ``tvm`` runs in ``.venv-tvm`` in the same
  folder, so the README's compile block writes the ``mlp.so`` its next block loads.
- Rust blocks are doctests of ``relaxvm-builder`` (README.md, docs/format.md, docs/profiling.md).
- C blocks holding a whole program (``int main``) are compiled with the system's ``cc`` against
  ``include/relaxvm.h`` and the C API library (``target/debug``, built if missing), and run in a
  scratch folder like the Python blocks, with the same fixtures and output check; other C blocks
  are fragments, not run.
- Shell blocks are checked, not run (some run for hours): each ``relaxvm`` command and option
  exists in the CLI's help, each script, example and fuzz target named exists, and each option
  given to an example is one it parses.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "tvm_corpus"))
import located  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
HAND = located.suite_dir("hand")
TVM_PYTHON = ROOT / ".venv-tvm" / "bin" / "python"
#: Files the blocks open that TVM makes, and where the corpus has them.
FIXTURES = {"mlp.so": "mlp/model.so", "transformer_block/model.so": "transformer_block/model.so"}


def blocks(doc: Path, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", doc.read_text(), flags=re.S)


def shown_outputs(doc: Path) -> dict[int, tuple[str, str]]:
    """For each Python block (by index) followed by a ``text`` block: its info string and text."""
    fenced = re.findall(r"```([^\n]*)\n(.*?)```", doc.read_text(), flags=re.S)
    out, k = {}, -1
    for (info, _), (next_info, text) in zip(fenced, fenced[1:] + [("", "")]):
        if info == "python":
            k += 1
            if next_info.split()[:1] == ["text"]:
                out[k] = (next_info, text)
    return out


NUMBER = r"-?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?"


def _line_pattern(line: str, timings: bool) -> re.Pattern:
    """A shown line (spaces collapsed, as printed lines are) as a pattern; in timings, each
    number stands for any number."""
    line = " ".join(line.split())
    parts = re.split(f"({NUMBER})", line) if timings else [line]
    return re.compile("".join(NUMBER if i % 2 else re.escape(p) for i, p in enumerate(parts)) + "$")


def output_matches(info: str, shown: str, printed: str) -> str | None:
    """Why ``printed`` does not match the ``shown`` output (None when it does)."""
    timings = "timings" in info.split()
    want = [line for line in shown.strip().splitlines()]
    got = [" ".join(line.split()) for line in printed.strip().splitlines()]
    if timings:
        # Any order: each shown line matches its own printed line.
        left = list(got)
        for line in want:
            if line.strip() == "...":
                continue
            pattern = _line_pattern(line, True)
            hit = next((g for g in left if pattern.match(g)), None)
            if hit is None:
                return f"no printed line matches {line.strip()!r}"
            left.remove(hit)
        if left and not any(line.strip() == "..." for line in want):
            return f"printed lines the document does not show: {left[:3]}"
        return None
    # In order; "..." skips any lines up to the next shown line.
    i, skipping = 0, False
    for line in want:
        if line.strip() == "...":
            skipping = True
            continue
        pattern = _line_pattern(line, False)
        while i < len(got) and not pattern.match(got[i]):
            if not skipping:
                return f"printed {got[i]!r} where the document shows {line.strip()!r}"
            i += 1
        if i == len(got):
            return f"no printed line matches {line.strip()!r}"
        i, skipping = i + 1, False
    if i < len(got) and not skipping:
        return f"printed lines the document does not show: {got[i : i + 3]}"
    return None


def test_output_matching_follows_the_convention():
    assert output_matches("text", "a  b\n...\nz", "a b\nc\nd\nz") is None
    assert output_matches("text", "a b\nz", "a b\nc\nz") is not None
    assert output_matches("text", "[1. 2.]", "[1. 3.]") is not None
    assert output_matches("text timings", "x 1.5 us\ny 2 us", "y 7 us\nx 0.25 us") is None
    assert output_matches("text timings", "x 1.5 us", "x 0.25 us\ny 2 us") is not None
    assert output_matches("text timings", "x 1.5 us", "z 0.25 us") is not None


PY_DOCS = [d for d in DOCS if blocks(d, "python")]
SH_DOCS = [d for d in DOCS if blocks(d, "sh")]


def test_the_documents_have_blocks():
    assert {d.name for d in PY_DOCS} >= {"README.md", "profiling.md", "tvm.md", "deploy.md"}
    assert not [d.name for d in DOCS if re.search(r"```rust,ignore|```rust,no_run", d.read_text())]


@pytest.mark.parametrize("doc", PY_DOCS, ids=lambda d: d.name)
def test_python_blocks_run(doc, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    import relaxvm as rx

    namespace: dict = {"__name__": f"doc_{doc.stem}"}
    shown = shown_outputs(doc)
    for k, code in enumerate(blocks(doc, "python")):
        if re.search(r"^import tvm|^from tvm", code, flags=re.M):
            run_with_tvm(code, tmp_path)
            continue
        for name, rel in FIXTURES.items():
            # A file an earlier block made (the README's TVM block writes mlp.so) is used as
            # made: the blocks run as a chain.
            if f'"{name}"' in code and not (tmp_path / name).exists():
                if HAND is None:
                    pytest.skip(located.SKIP_REASON)
                (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(os.path.join(HAND, rel), tmp_path / name)
        # Blocks register functions as a reader would: once, so they may replace earlier ones.
        for name in re.findall(r'register_func\("([^"]+)"\)', code):
            if rx.get_global_func(name, allow_missing=True) is not None:
                rx.remove_global_func(name)
        capsys.readouterr()
        exec(compile(code, f"{doc.name} python block {k}", "exec"), namespace)
        printed = capsys.readouterr().out
        if "print(" in code:
            assert k in shown, f"{doc.name} python block {k} prints: show its output in a text block after it"
            why = output_matches(*shown[k], printed)
            assert why is None, f"{doc.name} python block {k}: {why}\nprinted:\n{printed}"


def run_with_tvm(code: str, tmp_path: Path) -> None:
    """Runs a block in .venv-tvm (TVMScript needs a file), then loads what it exported."""
    if not TVM_PYTHON.exists():
        pytest.skip("no .venv-tvm (scripts/tvm-corpus.sh makes it)")
    script = tmp_path / "tvm_block.py"
    script.write_text(code)
    done = subprocess.run([str(TVM_PYTHON), str(script)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    import numpy as np

    import relaxvm as rx

    if (tmp_path / "model.so").exists():
        vm = rx.VirtualMachine(rx.load_module(str(tmp_path / "model.so")))
        assert vm["main"](np.ones((3, 4), "float32"), np.ones((4, 2), "float32")).numpy().tolist() == [[4.0, 4.0]] * 3


def cli_help(*sub: str) -> str:
    done = subprocess.run([sys.executable, "-m", "relaxvm", *sub, "--help"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def check_command(words: list[str]) -> None:
    """One shell command of a block: what it names exists and takes the options given."""
    while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]) or words[:1] == ["nice"]:
        words = words[3:] if words[0] == "nice" else words[1:]  # env assignments, nice -n N
    if not words:
        return
    prog = words[0]
    flags = [w.split("=")[0] for w in words[1:] if w.startswith("--")]
    if prog == "relaxvm":
        sub = words[1]
        helps = cli_help(sub)
        for f in flags:
            assert f in helps or f in cli_help(), f"relaxvm {sub}: no option {f}"
    elif prog.startswith(("./scripts/", "scripts/")):
        assert (ROOT / prog).is_file(), prog
    elif prog.endswith("python") or prog == "python":
        example = ROOT / words[1]
        assert example.is_file(), words[1]
        for f in flags:
            assert f'"{f}"' in example.read_text(), f"{words[1]} takes no {f}"
    elif prog == "cargo" and words[1:3] == ["fuzz", "run"]:
        target = [w for w in words[3:] if not w.startswith("-") and w != "none"][0]
        assert (ROOT / "fuzz" / "fuzz_targets" / f"{target}.rs").is_file(), target
    elif prog in {"cc", "c++"}:
        for w in words[1:]:
            if w.startswith("-I"):
                assert (ROOT / w[2:]).is_dir(), f"{prog}: no include folder {w[2:]}"
    elif prog in {"cargo", "cd", "pip", "python3"}:
        return
    else:
        raise AssertionError(f"a shell block runs {prog!r}, which this test does not know how to check")


@pytest.mark.parametrize("doc", SH_DOCS, ids=lambda d: d.name)
def test_shell_blocks_name_what_exists(doc):
    for block in blocks(doc, "sh"):
        for line in block.splitlines():
            line = line.split(" #")[0].strip()
            if not line or line.startswith("#"):
                continue
            for part in re.split(r"\s*(?:&&|\|)\s*", line):
                words = shlex.split(part.split(">")[0])
                if words[:1] == ["cd"]:
                    continue
                check_command(words)


C_DOCS = [d for d in DOCS if any("int main(" in b for b in blocks(d, "c"))]


def c_library() -> Path:
    """The C API's shared library of the debug build, built when missing."""
    lib = ROOT / "target" / "debug" / "librelaxvm_capi.so"
    if not lib.exists():
        subprocess.run(["cargo", "build", "--quiet", "-p", "relaxvm-capi"], cwd=ROOT, check=True)
    return lib


def test_the_c_api_guide_has_a_program():
    assert [d.name for d in C_DOCS] == ["c-api.md"]


@pytest.mark.parametrize("doc", C_DOCS, ids=lambda d: d.name)
def test_c_programs_compile_and_run(doc, tmp_path):
    fenced = re.findall(r"```([^\n]*)\n(.*?)```", doc.read_text(), flags=re.S)
    lib = c_library()
    for k, ((info, code), (next_info, shown)) in enumerate(zip(fenced, fenced[1:] + [("", "")])):
        if info != "c" or "int main(" not in code:
            continue
        for name, rel in FIXTURES.items():
            if f'"{name}"' in code:
                if HAND is None:
                    pytest.skip(located.SKIP_REASON)
                shutil.copy(os.path.join(HAND, rel), tmp_path / name)
        source = tmp_path / f"block{k}.c"
        source.write_text(code)
        exe = tmp_path / f"block{k}"
        cc = ["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", f"-I{ROOT / 'include'}", str(source)]
        cc += [f"-L{lib.parent}", "-lrelaxvm_capi", f"-Wl,-rpath,{lib.parent}", "-o", str(exe)]
        done = subprocess.run(cc, capture_output=True, text=True)
        assert done.returncode == 0, f"{doc.name} C block {k} does not compile:\n{done.stderr}"
        done = subprocess.run([str(exe)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{doc.name} C block {k} failed:\n{done.stdout}{done.stderr}"
        assert next_info.split()[:1] == ["text"], f"{doc.name} C block {k}: show its output in a text block"
        why = output_matches(next_info, shown, done.stdout)
        assert why is None, f"{doc.name} C block {k}: {why}\nprinted:\n{done.stdout}"


def test_the_readme_tvm_example_is_a_chain():
    """The README compiles mlp.so with TVM, then loads that file: nothing in between is missing."""
    code = blocks(ROOT / "README.md", "python")
    made = [k for k, b in enumerate(code) if 'export_library("mlp.so")' in b and "import tvm" in b]
    used = [k for k, b in enumerate(code) if 'load_module("mlp.so")' in b]
    assert made and used and made[0] < used[0], (made, used)
    text = (ROOT / "README.md").read_text()
    assert "scripts/setup-venv-tvm.sh" in text and "tests/tvm_corpus/requirements.txt" in text
