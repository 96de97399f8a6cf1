"""Compiled mode (VM TIR) reuses each allocation site's storage as its last run left it, not
zeroed (docs/memory.md, "Allocation and reuse"): TVM's pooled allocator gives the machine code
recycled blocks uninitialised, so the kernels TVM builds write what they allocate before reading
it. Each compiled-mode case of TVM's test_vm_build.py (tests/tvm_vm_suite.py) is run three times
in one pooled VM, so the later runs get the blocks the earlier ones wrote: every run's result
must still be the one TVM recorded, bit for bit."""

from __future__ import annotations

import pytest
import tvm_vm_suite as suite

import relaxvm as rx

pytestmark = pytest.mark.skipif(not suite.AVAILABLE, reason=suite.SKIP_REASON)
CASES = [
    (m["name"], k)
    for m in suite.models("test_vm_build.py")
    if m["exec_mode"] == "compiled"
    for k, entry in enumerate(m["cases"])
    if "error" not in entry and entry.get("memory_cfg") in (None, "pooled")
]


@pytest.mark.parametrize("name,k", CASES, ids=[f"{n}-{k}" for n, k in CASES])
def test_a_compiled_case_gives_tvm_s_result_on_reused_storage(name: str, k: int) -> None:
    m = next(m for m in suite.MANIFEST["models"] if m["name"] == name)
    entry = m["cases"][k]
    vm = rx.VirtualMachine(suite.executable(m), rx.cpu())
    assert vm.memory_allocator == "pooled"
    for run in range(3):
        # Fresh inputs each run: some cases write into theirs.
        args, want = suite.corpus.load_case(suite.SUITE, entry)
        try:
            got = suite.run(vm, entry, args)
        except suite.MultiDevice:
            return
        suite.assert_same(suite.to_plain_recorded(got), want, f"{name} case {k}, run {run}")


def test_there_are_compiled_cases() -> None:
    assert len(CASES) >= 10
