"""Apache TVM 0.27's ``tests/python/relax/test_relax_operators.py`` (its VM runs), built and recorded by TVM in both
exec modes (``bytecode`` and ``compiled``) by tests/tvm_corpus/build_vm_suite.py, run on relaxvm:
one test per recorded case (``test_relax_operators/TEST/MODE-K``), bit-exact results and the same error
classes (tests/tvm_vm_suite.py). Every test of the file is
ported; TVM's test_op_call_py_func computes with torch, the port with numpy (on both sides)."""

from __future__ import annotations

import pytest
import tvm_vm_suite as suite

SOURCE = "test_relax_operators.py"
pytestmark = pytest.mark.skipif(not suite.AVAILABLE, reason=suite.SKIP_REASON)
CASES = suite.case_ids(SOURCE)


@pytest.mark.parametrize("name,k", CASES, ids=[f"{n}-{k}" for n, k in CASES])
def test_case_matches_tvm(name: str, k: int) -> None:
    suite.check_case(name, k)


def test_both_modes_are_built() -> None:
    modes = {m["exec_mode"] for m in suite.models(SOURCE)}
    assert modes == {"bytecode", "compiled"}


@pytest.fixture(autouse=True)
def _py_funcs():
    """TVM's test_op_call_py_func registers its functions for R.call_py_func, and clears them."""
    suite.register_py_funcs()
    yield
    suite.rx.get_global_func("vm.builtin.clear_py_func_registry")()


def test_call_py_func_registry() -> None:
    get = suite.rx.get_global_func("vm.builtin.get_py_func")
    assert callable(get("torch_relu"))
    suite.rx.get_global_func("vm.builtin.clear_py_func_registry")()
    with pytest.raises(ValueError, match="torch_relu"):
        get("torch_relu")
