"""Profiled and traced runs execute what plain runs execute, on every model of the TVM corpus
(the hand-written and ONNX suites): the traced run returns, bit for bit, what the plain run
returns (and what TVM's VM returned), and the profiled and traced runs call the same callees
the same number of times. (Which specialised version of a builtin runs at each call site is
compared with plain runs in builtins/tests/instrumented_runs.rs, where the builtins can be
observed without instrumenting the run.)"""

from __future__ import annotations

import os
import sys
from collections import Counter

import pytest

import relaxvm as rx

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "tvm_corpus"))
import corpus  # noqa: E402
import located  # noqa: E402
from test_tvm_models import assert_same, to_rx  # noqa: E402

SUITES = [s for s in ("hand", "onnx") if located.suite_dir(s) is not None]
pytestmark = pytest.mark.skipif(not SUITES, reason=located.SKIP_REASON)


def cases() -> list[tuple[str, str, int]]:
    out = []
    for suite in SUITES:
        for m in corpus.load_manifest(located.suite_dir(suite))["models"]:
            out += [(suite, m["name"], k) for k, c in enumerate(m["cases"]) if "error" not in c]
    return out


CASES = cases()
_loaded: dict[tuple[str, str], tuple[rx.Executable, dict]] = {}


def model(suite: str, name: str) -> tuple[rx.Executable, dict]:
    if (suite, name) not in _loaded:
        root = located.suite_dir(suite)
        m = next(m for m in corpus.load_manifest(root)["models"] if m["name"] == name)
        _loaded[suite, name] = (rx.load_module(os.path.join(root, m["library"])), m)
    return _loaded[suite, name]


@pytest.mark.parametrize("suite,name,k", CASES, ids=[f"{s}-{n}-{k}" for s, n, k in CASES])
def test_plain_profiled_and_traced_runs_agree(suite: str, name: str, k: int) -> None:
    exe, m = model(suite, name)
    entry = m["cases"][k]
    args, want = corpus.load_case(located.suite_dir(suite), entry)
    func = entry["function"]
    vm = rx.VirtualMachine(exe, rx.cpu(), profile=True)
    plain = vm[func](*[to_rx(a) for a in args])
    assert_same(plain, want, f"{name} plain")
    report = vm.profile(func, *[to_rx(a) for a in args])
    trace = vm.trace(func, *[to_rx(a) for a in args], max_bytes=1 << 20)
    assert_same(trace.result, want, f"{name} traced")
    # The same callees, as often, in both instrumented runs (the trace keeps every step here;
    # values past its byte limit are dropped, their steps kept).
    assert trace.skipped == 0
    traced = Counter(step.callee for step in trace)
    profiled = {row.name: row.count for row in report.rows if row.kind != "overhead"}
    assert dict(traced) == profiled, f"{name}: the callees of the traced and profiled runs differ"
