"""The TVM-compatibility builtins (relax.run.*, the tensor cache, call_tir_dyn...) called from
bytecode built with rx.ExecBuilder, compared with TVM's Python implementations (numpy_unique and
numpy_nonzero from tvm/relax/op/set.py, reproduced below) on numpy 2.x."""

from __future__ import annotations

import builtins
import os

import numpy as np
import pytest

import relaxvm as rx
from conftest import build, call_packed_vm

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "builtins", "tests", "data", "tensor_cache")


def tvm_unique(x, sorted_, ri, rinv, rc, axis=None):
    """TVM 0.27's numpy_unique, minus the tvm.runtime.tensor wrapping."""
    res = np.unique(x, return_index=bool(ri), return_inverse=bool(rinv), return_counts=bool(rc), axis=axis)
    if not (ri or rinv or rc):
        if not sorted_:
            idx = np.unique(x, return_index=True, axis=axis)[1]
            return np.take(x, builtins.sorted(idx), axis=axis)
        return res
    vals, out, k = res[0], [], 1
    _, first = np.unique(x, return_index=True, axis=axis)
    order = np.argsort(first)
    if not sorted_:
        vals = np.take(vals, order, axis=axis)
    out.append(vals)
    if ri:
        out.append(np.sort(res[k]) if not sorted_ else res[k])
        k += 1
    if rinv:
        inv = res[k]
        if not sorted_:
            mapping = np.empty_like(order)
            mapping[order] = np.arange(len(order))
            inv = mapping[inv]
        out.append(inv)
        k += 1
    if rc:
        out.append(res[k][order] if not sorted_ else res[k])
    return tuple(out)


@pytest.fixture(scope="module")
def unique_vm():
    return call_packed_vm("relax.run.unique", 6)


CASES = [
    np.array([[3, 1, 3], [2, 1, 0]], dtype="int32"),
    np.array([np.nan, 1.0, 2.0, np.nan, 1.0], dtype="float32"),
    np.array([[1, 1], [2, 2], [1, 1]], dtype="uint8"),
    np.array([True, False, True]),
    np.array([0.5, -0.5, 0.5], dtype="float16"),
]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("flags", [(1, 0, 0, 0), (0, 0, 0, 0), (1, 1, 1, 1), (0, 1, 1, 1), (0, 0, 1, 1)])
@pytest.mark.parametrize("axis", [None, 0, -1])
def test_unique_matches_tvm(unique_vm, case, flags, axis):
    x = CASES[case]
    expected = tvm_unique(x, *flags, axis=axis)
    got = unique_vm["main"](rx.tensor(x), *[bool(f) for f in flags], axis)
    if isinstance(expected, tuple):
        assert len(got) == len(expected)
        pairs = zip(got, expected)
    else:
        pairs = [(got, expected)]
    for g, e in pairs:
        g = g.numpy()
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_array_equal(g, e)


def test_nonzero_matches_tvm():
    vm = call_packed_vm("relax.run.nonzero", 1)
    for x in [np.array([[0, 1.5], [np.nan, 0]], "float32"), np.array(3, "int8"), np.zeros((2, 0), "int32")]:
        expected = np.stack(np.atleast_1d(x).nonzero(), axis=0)
        got = vm["main"](rx.tensor(x)).numpy()
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, expected)
    strided = np.arange(12, dtype="int64").reshape(3, 4)[:, ::2] % 3
    np.testing.assert_array_equal(vm["main"](rx.tensor(strided)).numpy(), np.stack(strided.nonzero()))


def test_shape_to_tensor():
    def body(ib):
        ib.emit_call("vm.builtin.shape_of", args=[ib.r(0)], dst=ib.r(1))
        ib.emit_call("relax.run.shape_to_tensor", args=[ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))

    vm = rx.VirtualMachine(build(body))
    out = vm["main"](rx.tensor(np.zeros((2, 5), "float32"))).numpy()
    assert out.dtype == np.int64 and out.tolist() == [2, 5]


def test_print_and_assert(capfd):
    pr = call_packed_vm("relax.run.print", 3)
    pr["main"]("x={} y={}", 1, rx.tensor(np.array([1.5, 2.0], "float32")))
    assert capfd.readouterr().out == "x=1 y=[1.5 2. ]\n"
    asrt = call_packed_vm("relax.run.assert_op", 3)
    assert asrt["main"](True, "", 1) is None
    # TVM raises AssertionError from its Python implementation; so does relaxvm.
    with pytest.raises(AssertionError, match="Assertion Failed"):
        call_packed_vm("relax.run.assert_op", 2)["main"](False, "")
    with pytest.raises(AssertionError, match="value is 7"):
        asrt["main"](False, "value is {}", 7)


def test_tensor_cache_loads_tvm_fixture():
    load = call_packed_vm("vm.builtin.tensor_cache.load", 3)
    get = call_packed_vm("vm.builtin.tensor_cache.get", 1)
    load["main"](os.path.join(FIXTURES, "bf16"), 1, 0)
    with open(os.path.join(FIXTURES, "expected_bf16.txt")) as f:
        lines = f.read().splitlines()
    for line in lines:
        name, dtype, _, hexdata = line.split()
        t = get["main"](name)
        assert str(t.dtype) == dtype
        # numpy has no bfloat16: compare the raw bytes the tensor pickles as.
        assert t.tobytes().hex() == hexdata
    params = call_packed_vm("vm.builtin.param_array_from_cache", 2)["main"]("param", -1)
    assert len(params) == 6
    assert get["main"]("no_such_param") is None
    with pytest.raises(ValueError, match="tensor-cache.json"):
        load["main"]("/nonexistent/dir", 1, 0)


def test_call_tir_dyn_appends_shape():
    @rx.register_func("test.tvm_builtins.cat", override=True)
    def _cat(*args):
        return len(args) * 100 + args[-1]

    def body(ib):
        ib.emit_call("vm.builtin.shape_of", args=[ib.r(0)], dst=ib.r(1))
        ib.emit_call("vm.builtin.call_tir_dyn", args=[ib.r(2), ib.r(0), ib.r(1)], dst=ib.r(3))
        ib.emit_ret(ib.r(3))

    ex = build(body, num_inputs=3)
    vm = rx.VirtualMachine(ex)
    f = rx.get_global_func("test.tvm_builtins.cat")
    assert vm["main"](rx.tensor(np.zeros((4, 9), "float32")), None, f) == 309
