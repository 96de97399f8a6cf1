"""The README's benchmark table comes from the bench script (scripts/bench.py --update-readme):
it sits between the script's markers, and each of its rows is one the script measures."""

from __future__ import annotations

import os
import re
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import bench  # noqa: E402


def readme() -> str:
    with open(os.path.join(ROOT, "README.md")) as f:
        return f.read()


def test_the_readme_table_is_the_scripts():
    text = readme()
    assert text.count(bench.README_START) == 1 and text.count(bench.README_END) == 1
    table = text[text.index(bench.README_START) : text.index(bench.README_END)].splitlines()[1:]
    labels = {line.split("|")[1].strip() for line in table[2:]}
    measured = {r.label for quick in (True, False) for r in bench.rows(quick)}
    extra = {"2 Python threads, each its own VM", "Ctrl-C in an endless loop to KeyboardInterrupt"}
    tvm_models = {label for label in labels if label.startswith("TVM ")}  # bench_tvm_models.py (needs TVM)
    assert labels - tvm_models <= measured | extra, sorted(labels - measured - extra - tvm_models)
    assert all(re.fullmatch(r"\|( [^|]* \|){6}", line) for line in table), table


def test_replace_table_swaps_only_the_table():
    text = f"before\n{bench.README_START}\n| old |\n{bench.README_END}\nafter\n"
    out = bench.replace_table(text, ["| a | b |", "| c | d |"])
    assert out == f"before\n{bench.README_START}\n| a | b |\n| c | d |\n{bench.README_END}\nafter\n"
