"""The README's Python code blocks run as written (in a scratch folder), so that they cannot rot.
The TVM block runs on the corpus's MLP (a model compiled by TVM 0.27 with the same signature)."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "tvm_corpus"))
import located  # noqa: E402

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
HAND = located.suite_dir("hand")


def test_the_readme_has_python_blocks():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("k", range(len(BLOCKS)))
def test_python_block_runs(k, tmp_path, monkeypatch, capsys):
    code = BLOCKS[k]
    if "mlp.so" in code:
        if HAND is None:
            pytest.skip(located.SKIP_REASON)
        shutil.copy(os.path.join(HAND, "mlp", "model.so"), tmp_path / "mlp.so")
    monkeypatch.chdir(tmp_path)
    # Blocks register functions as a reader would: once, so they may replace earlier tests' ones.
    import relaxvm as rx

    for name in re.findall(r'register_func\("([^"]+)"\)', code):
        if rx.get_global_func(name, allow_missing=True) is not None:
            rx.remove_global_func(name)
    exec(compile(code, f"README.md python block {k}", "exec"), {"__name__": f"readme_{k}"})
    printed = capsys.readouterr().out
    if "print(" in code:
        assert printed, "the block prints something"
