"""Every code block of README.md and docs/*.md is run or checked by the tests, so none can rot.

- Python blocks run as written, in a scratch folder, each document's blocks in order in one
  namespace (later blocks use what earlier ones defined). Files they name that only a TVM build
  makes (``mlp.so``, ``transformer_block/model.so``) are copied from the corpus; a block that
  imports ``tvm`` runs in ``.venv-tvm``, and what it exports is then loaded by relaxvm.
- Rust blocks are doctests of ``relaxvm-builder`` (README.md, docs/format.md, docs/profiling.md).
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
    for k, code in enumerate(blocks(doc, "python")):
        if re.search(r"^import tvm|^from tvm", code, flags=re.M):
            run_with_tvm(code, tmp_path)
            continue
        for name, rel in FIXTURES.items():
            if f'"{name}"' in code:
                if HAND is None:
                    pytest.skip(located.SKIP_REASON)
                (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(os.path.join(HAND, rel), tmp_path / name)
        # Blocks register functions as a reader would: once, so they may replace earlier ones.
        for name in re.findall(r'register_func\("([^"]+)"\)', code):
            if rx.get_global_func(name, allow_missing=True) is not None:
                rx.remove_global_func(name)
        exec(compile(code, f"{doc.name} python block {k}", "exec"), namespace)
        if "print(" in code:
            assert capsys.readouterr().out, f"block {k} prints something"


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
