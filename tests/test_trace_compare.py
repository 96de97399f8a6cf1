"""Trace.first_difference compares floats as numpy's isclose(equal_nan=True) does (#31 finding
11: +inf and -inf, and float16's largest value and inf, were called equal). The table below is
the one tools/src/trace/close_tests.rs holds: numpy is checked against it here, and relaxvm
against numpy, for float16, float32 and float64."""

import numpy as np
import pytest

import relaxvm as rx

INF, NAN = np.inf, np.nan
TOLS = [(1e-5, 1e-8), (0.0, 0.0), (0.5, 0.0), (0.0, 1.5)]
T, F = True, False
TABLE = [
    (INF, INF, [T, T, T, T]),
    (-INF, -INF, [T, T, T, T]),
    (INF, -INF, [F, F, F, F]),
    (-INF, INF, [F, F, F, F]),
    (65504.0, INF, [F, F, F, F]),
    (INF, 65504.0, [F, F, F, F]),
    (1.0, INF, [F, F, F, F]),
    (-INF, -1.0, [F, F, F, F]),
    (0.0, INF, [F, F, F, F]),
    (NAN, NAN, [T, T, T, T]),
    (NAN, 1.0, [F, F, F, F]),
    (1.0, NAN, [F, F, F, F]),
    (NAN, INF, [F, F, F, F]),
    (INF, NAN, [F, F, F, F]),
    (0.0, 0.0, [T, T, T, T]),
    (0.0, -0.0, [T, T, T, T]),
    (1.0, 1.0, [T, T, T, T]),
    (1.0, 1.00001, [T, F, T, T]),
    (1.0, 1.001, [F, F, T, T]),
    (1e-9, 0.0, [T, F, F, T]),
    (0.0, 1e-7, [F, F, F, T]),
    (1e300, -1e300, [F, F, F, F]),
    (np.finfo(np.float64).max, -np.finfo(np.float64).max, [F, F, F, F]),
    (3.0, 2.0, [F, F, T, T]),
]


def test_the_table_is_numpys():
    for a, b, expected in TABLE:
        with np.errstate(over="ignore", invalid="ignore"):
            got = [bool(np.isclose(a, b, rtol=r, atol=t, equal_nan=True)) for r, t in TOLS]
        assert got == expected, (a, b)


@pytest.fixture(scope="module")
def vm():
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=1):
        ib.emit_call("vm.builtin.make_tuple", args=[ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    return rx.VirtualMachine(ib.get())


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_first_difference_agrees_with_numpy_isclose(vm, dtype):
    checked = 0
    with np.errstate(over="ignore", invalid="ignore"):
        for a, b, _ in TABLE:
            x, y = np.array([a], dtype), np.array([b], dtype)
            # Only the rows the dtype holds exactly (numpy then computes as relaxvm, in float64).
            if not (
                np.array_equal(x.astype("float64"), [a], equal_nan=True)
                and np.array_equal(y.astype("float64"), [b], equal_nan=True)
            ):
                continue
            checked += 1
            ta, tb = vm.trace("main", x), vm.trace("main", y)
            for rtol, atol in TOLS:
                want = bool(np.isclose(x, y, rtol=rtol, atol=atol, equal_nan=True)[0])
                d = rx.Trace.first_difference(ta, tb, rtol=rtol, atol=atol)
                assert (d is None) == want, (dtype, a, b, rtol, atol, d)
    assert checked >= 14


def test_infinities_of_opposite_sign_differ_with_the_default_tolerances(vm):
    d = rx.Trace.first_difference(vm.trace("main", np.array([np.inf])), vm.trace("main", np.array([-np.inf])))
    assert d is not None and d.what == "result"
    assert "1 of 1 elements differ" in d.detail
