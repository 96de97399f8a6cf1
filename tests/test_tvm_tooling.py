"""The profiler and the tracer on a model compiled by Apache TVM (the corpus's transformer block)."""

from __future__ import annotations

import os
import sys

import pytest

import relaxvm as rx

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "tvm_corpus"))
import corpus  # noqa: E402
import located  # noqa: E402

SUITE = located.suite_dir("hand")
AVAILABLE = SUITE is not None
pytestmark = pytest.mark.skipif(not AVAILABLE, reason=located.SKIP_REASON)


@pytest.fixture(scope="module")
def block():
    entry = next(m for m in corpus.load_manifest(SUITE)["models"] if m["name"] == "transformer_block")
    args, want = corpus.load_case(SUITE, entry["cases"][0])
    ex = rx.load_module(os.path.join(SUITE, entry["library"]))
    return ex, args[0], want


def test_profile_rows_are_the_kernels_the_trace_shows(block):
    ex, x, _ = block
    vm = rx.VirtualMachine(ex, rx.cpu(), profile=True)
    report = vm.profile("main", x)
    trace = vm.trace("main", x)
    kernels = {r.name: r.count for r in report.rows if r.kind == "kernel"}
    assert "matmul" in kernels and "layer_norm" in kernels
    counted = {}
    for s in trace:
        if s.callee in kernels:
            counted[s.callee] = counted.get(s.callee, 0) + 1
    assert counted == kernels
    builtins = {r.name: r.count for r in report.rows if r.kind == "builtin"}
    assert sum(kernels.values()) + sum(builtins.values()) == trace.total_steps
    assert abs(sum(r.percent for r in report.rows if r.kind != "vm") - 100.0) < 1.0


def test_trace_holds_each_kernels_output(block):
    ex, x, want = block
    vm = rx.VirtualMachine(ex, rx.cpu())
    trace = vm.trace("main", x)
    assert trace.result.numpy().tobytes() == want.tobytes(), "tracing does not change the result"
    # Kernels return nothing and write their last argument: that is the step's output.
    kernel_steps = [s for s in trace if s.outputs]
    assert kernel_steps and all(list(s.outputs) == [len(s.args) - 1] for s in kernel_steps)
    last = kernel_steps[-1]
    assert last.callee == "layer_norm"
    assert last.outputs[len(last.args) - 1].numpy().tobytes() == want.tobytes()
    # The output buffer was copied before the kernel wrote it.
    assert last.args[-1].numpy().tobytes() != want.tobytes()


def test_first_difference_names_the_first_kernel_that_moved(block, tmp_path):
    ex, x, _ = block
    vm = rx.VirtualMachine(ex, rx.cpu())
    ref = vm.trace("main", x)
    ref.save(tmp_path / "ref.npz")
    again = rx.Trace.load(tmp_path / "ref.npz")
    assert rx.Trace.first_difference(again, vm.trace("main", x)) is None
    y = x.copy()
    y[3, 5] += 1e-3
    d = rx.Trace.first_difference(again, vm.trace("main", y))
    assert d.what.startswith("outputs[") and d.a.callee == "matmul" and d.index == 4
    assert "at (3, " in d.detail
