"""Apache TVM 0.27's ``tests/python/relax/test_vm_codegen_tir.py``, built and recorded by TVM in both
exec modes (``bytecode`` and ``compiled``) by tests/tvm_corpus/build_vm_suite.py, run on relaxvm:
one test per recorded case (``test_vm_codegen_tir/TEST/MODE-K``), bit-exact results and the same error
classes (tests/tvm_vm_suite.py). TVM's tests compare generated TIR with expected TIR (TVM's own
IR, which is not ported); what runs is their input modules, built by the code generator alone."""

from __future__ import annotations

import pytest
import tvm_vm_suite as suite

SOURCE = "test_vm_codegen_tir.py"
pytestmark = pytest.mark.skipif(not suite.AVAILABLE, reason=suite.SKIP_REASON)
CASES = suite.case_ids(SOURCE)


@pytest.mark.parametrize("name,k", CASES, ids=[f"{n}-{k}" for n, k in CASES])
def test_case_matches_tvm(name: str, k: int) -> None:
    suite.check_case(name, k)


def test_both_modes_are_built() -> None:
    modes = {m["exec_mode"] for m in suite.models(SOURCE)}
    assert modes == {"bytecode", "compiled"}
