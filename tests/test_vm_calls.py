"""How ``vm["name"]`` is called: CPython's vectorcall protocol for the common case, ``tp_call``
for callers holding a tuple and a dict, and the same argument assignment, conversion and errors either way;
and the VM's lock shared by threads."""

from __future__ import annotations

import functools
import sys
import threading

import numpy as np
import pytest

import relaxvm as rx
from conftest import counting_builder

VECTORCALL = 1 << 11  # Py_TPFLAGS_HAVE_VECTORCALL


def _vm() -> rx.VirtualMachine:
    ib = rx.ExecBuilder()
    with ib.function("pair", num_inputs=2, param_names=["a", "b"]):
        ib.emit_call("vm.builtin.make_tuple", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    with ib.function("none", num_inputs=0):
        ib.emit_call("vm.builtin.int.add", args=[ib.imm(1), ib.imm(2)], dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    return rx.VirtualMachine(ib.get(), rx.cpu())


def test_functions_are_called_through_vectorcall():
    f = _vm()["pair"]
    assert type(f).__flags__ & VECTORCALL
    assert f(1, 2.5) == (1, 2.5)


@pytest.mark.parametrize(
    "call",
    [
        lambda f: f(1, 2),
        lambda f: f(1, b=2),
        lambda f: f(a=1, b=2),
        lambda f: f(b=2, a=1),
        lambda f: f(*(1, 2)),
        lambda f: f(**{"a": 1, "b": 2}),
        lambda f: type(f).__call__(f, 1, 2),  # tp_call, with a tuple
        lambda f: f.__call__(1, b=2),
        lambda f: functools.partial(f, 1)(2),
        lambda f: functools.partial(f, b=2)(1),
    ],
)
def test_every_calling_form_binds_alike(call):
    assert call(_vm()["pair"]) == (1, 2)


def test_no_arguments_and_binding_errors_through_vectorcall():
    vm = _vm()
    assert vm["none"]() == 3
    f = vm["pair"]
    with pytest.raises(TypeError, match="unexpected keyword argument 'c'"):
        f(1, c=2)
    with pytest.raises(TypeError, match="multiple values for argument 'a'"):
        f(1, a=2)
    with pytest.raises(TypeError, match="missing argument 'b'"):
        f(a=1)
    with pytest.raises(rx.VMError, match="pair: expected 2 arguments, got 1"):
        f(1)
    with pytest.raises(TypeError, match="cannot pass a object"):
        f(1, object())
    with pytest.raises(OverflowError):
        f(1, 1 << 70)


def test_quick_conversions_match_the_general_ones():
    f = _vm()["pair"]
    t = rx.tensor(np.arange(3, dtype="float32"))
    a, b = f(t, -1)
    assert a is t and b == -1 and type(b) is int
    x, y = f(1.5, True)
    assert x == 1.5 and y is True
    # int subclasses and numpy scalars take the general path and convert as before.
    assert f(np.int64(4), np.float32(0.5)) == (4, 0.5)
    assert f(False, -(1 << 63)) == (False, -(1 << 63))


@pytest.mark.parametrize("n", [1, 8, 9, 20])
def test_argument_lists_of_any_length_and_kind_are_released(n):
    # Up to 8 arguments sit in an inline list (all-scalar lists are released without drop
    # glue), more spill to the heap; tensors among them are released by reference count.
    ib = rx.ExecBuilder()
    with ib.function("all", num_inputs=n):
        ib.emit_call("vm.builtin.make_tuple", args=[ib.r(i) for i in range(n)], dst=ib.r(n))
        ib.emit_ret(ib.r(n))
    f = rx.VirtualMachine(ib.get(), rx.cpu())["all"]
    assert f(*range(n)) == tuple(range(n))
    t = rx.tensor(np.arange(3, dtype="float32"))
    before = sys.getrefcount(t)
    for _ in range(100):
        assert f(*([1.5] * (n - 1) + [t]))[-1] is t
        assert all(x is t for x in f(*([t] * n)))
    assert sys.getrefcount(t) == before


def test_a_busy_vm_is_waited_for_and_a_reentrant_call_is_refused():
    ib = counting_builder()
    with ib.function("back", num_inputs=1):
        ib.emit_call("test.reenter", args=[ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    holder: list = []
    rx.register_func("test.reenter", lambda n: holder[0](n), override=True)
    vm = rx.VirtualMachine(ib.get(), rx.cpu())
    spin = vm["spin"]
    holder.append(spin)
    results: list[int] = []

    def worker():
        for _ in range(20):
            results.append(spin(20_000))

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [20_000] * 60
    with pytest.raises(RuntimeError, match="already running on this thread"):
        vm["back"](3)
    assert spin(5) == 5  # released after the error


def test_short_calls_that_keep_the_gil_wait_for_long_ones_that_release_it():
    # Short calls take the VM with the GIL held and keep it; long ones take it, then release
    # the GIL while they run. Threads mixing both on one VM each get their own answers, and a
    # short call that finds the VM busy waits (with the GIL released) rather than failing.
    ib = counting_builder()
    with ib.function("inc", num_inputs=1):
        ib.emit_call("vm.builtin.int.add", args=[ib.r(0), ib.imm(1)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    vm = rx.VirtualMachine(ib.get(), rx.cpu())
    spin, inc = vm["spin"], vm["inc"]
    assert spin.releases_gil and not inc.releases_gil
    errors: list[BaseException] = []
    done: list[str] = []

    def long_calls():
        try:
            for _ in range(30):
                assert spin(30_000) == 30_000
                done.append("spin")
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    def short_calls(k: int):
        try:
            for i in range(3000):
                assert inc(k * 10_000 + i) == k * 10_000 + i + 1
            done.append("inc")
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=long_calls) for _ in range(2)]
    threads += [threading.Thread(target=short_calls, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sorted(done) == ["inc"] * 3 + ["spin"] * 60


def test_a_call_with_arguments_for_the_general_path_after_plain_ones():
    # The common arguments (int, float, rx.Tensor, None, bool, a numpy array passed before) go
    # straight into the VM's registers; any other (a new numpy array, an object, a huge int)
    # sends the whole call down the general path, and the values already made are released.
    # The register stack holds exactly one frame of `pair` (3 registers): a value left behind
    # by a declined call would make every later call fail.
    ib = rx.ExecBuilder()
    with ib.function("pair", num_inputs=2):
        ib.emit_call("vm.builtin.make_tuple", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    f = rx.VirtualMachine(ib.get(), rx.cpu(), max_stack_registers=3)["pair"]
    t = rx.tensor(np.arange(3, dtype="float32"))
    a = np.arange(4, dtype="float32")
    # With no array kept on this thread, an array is not looked up while the VM is held (the
    # first look may import numpy); it is kept by the first calls and found from the third.
    rx.clear_array_cache()
    for _ in range(5):
        x, y = f(t, a)
        assert x is t and np.array_equal(np.asarray(y), a)
    assert f(None, True) == (None, True) and f(2, 0.5) == (2, 0.5)
    for i in range(20):
        x, y = f(t, np.full(2, i))
        assert x is t and np.array_equal(np.asarray(y), [i, i])
        with pytest.raises(TypeError, match="cannot pass a object"):
            f(t, object())
        with pytest.raises(OverflowError):
            f(t, 1 << 70)
        assert f(t, "s")[1] == "s"
    # A wrong count is reported after the arguments are converted, as by every other path.
    with pytest.raises(TypeError, match="cannot pass a object"):
        f(object())
    with pytest.raises(rx.VMError, match="expected 2 arguments, got 3"):
        f(1, 2, 3)
