"""A packed function from ``rx.get_global_func`` is called through CPython's vectorcall entry
(python/src/convert/closure.rs); calling its ``__call__`` (``tp_call``, with a tuple) must behave
the same: results, conversion refusals naming the argument, keywords refused, exceptions of
Python callbacks carried through, re-entry from a callback."""

import numpy as np
import pytest

import relaxvm as rx


def both(f):
    """The two ways into a Closure: vectorcall (``f(...)``) and ``tp_call`` (``f.__call__``)."""
    return [f, f.__call__]


def test_results_match_the_tuple_path():
    copy = rx.get_global_func("vm.builtin.copy")
    for call in both(copy):
        assert call(3) == 3
        assert call(2.5) == 2.5
        assert call(None) is None
        assert call(rx.Shape([4, 5])) == (4, 5)
        t = call(rx.tensor(np.arange(3, dtype="float32")))
        assert t.numpy().tolist() == [0.0, 1.0, 2.0]


def test_opaque_object_and_shape_arguments_convert():
    # An rx.Object (storage) and rx.Shape take the exact-type conversion of convert/closure.rs.
    alloc = rx.get_global_func("vm.builtin.alloc_storage")
    tensor = rx.get_global_func("vm.builtin.alloc_tensor")
    ident = rx.get_global_func("vm.builtin.copy")
    storage = None
    for call in both(alloc):
        storage = call(None, rx.Shape([16]), 0, rx.DataType("uint8"), "global")
        assert isinstance(storage, rx.Object) and storage.type_name == "storage"
    assert ident(storage) is not None
    for call in both(tensor):
        t = call(storage, 0, rx.Shape([4]), rx.DataType("float32"))
        assert t.shape == (4,) and t.dtype == "float32"


def test_refusal_names_the_argument_on_both_paths():
    copy = rx.get_global_func("vm.builtin.copy")
    refusals = []
    for call in both(copy):
        with pytest.raises(TypeError) as e:
            call(object())
        refusals.append(str(e.value))
        with pytest.raises(OverflowError, match="argument 1 of vm.builtin.copy: int"):
            call(0, 1 << 70)
    assert refusals[0] == refusals[1] and "cannot pass a object to the VM" in refusals[0]


def test_keywords_are_refused_as_tp_call_refuses_them():
    copy = rx.get_global_func("vm.builtin.copy")
    messages = []
    for call in both(copy):
        with pytest.raises(TypeError) as e:
            call(x=1)
        messages.append(str(e.value))
    assert messages[0] == messages[1]
    assert "x" in messages[0]


def test_python_callback_exception_and_reentry():
    calls = []

    def inner(x):
        calls.append(x)
        if x < 0:
            raise KeyError("negative")
        # Re-entry: a registered function called from inside a call of one.
        return rx.get_global_func("vm.builtin.copy")(x + 1)

    rx.register_func("test.closure_vectorcall.inner", inner, override=True)
    try:
        f = rx.get_global_func("test.closure_vectorcall.inner")
        assert isinstance(f, rx.Closure)
        for call in both(f):
            assert call(1) == 2
            with pytest.raises(KeyError, match="negative"):
                call(-1)
        assert calls == [1, -1, 1, -1]
    finally:
        rx.remove_global_func("test.closure_vectorcall.inner")


def test_threads_call_one_closure():
    import threading

    copy = rx.get_global_func("vm.builtin.copy")
    out = []

    def work(k):
        out.append(sum(copy(i) for i in range(k * 100, k * 100 + 100)))

    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert sorted(out) == sorted(sum(range(k * 100, k * 100 + 100)) for k in range(4))


def test_recursion_through_global_functions_is_an_error_not_a_crash():
    # Attack finding perfpy/01: each vectorcall of a Closure counts a level of Python recursion
    # (as tp_call did), so a recursion through registered functions on a 2 MiB thread stack
    # raises RecursionError before the native stack runs out (a crash before the count).
    # Up to 3.11 a level's C call and its Python frame count against the one recursion limit.
    # 3.12+ counts C calls against a limit of their own, and only Python frames against
    # `sys.getrecursionlimit()`: on 3.12.1 the C limit still comes first (RecursionError), on
    # 3.13.0, whose C limit is larger, the stack runs low first and the VM's own check of the
    # native stack left ends the recursion with a VMError saying so. An error either way.
    import subprocess
    import sys

    child = """
import threading, relaxvm as rx
f = rx.get_global_func
@rx.register_func("test.closure_vectorcall.deep", override=True)
def d(n):
    return 0 if n == 0 else f("test.closure_vectorcall.deep")(n - 1) + 1
out = []
def run():
    try:
        out.append(f("test.closure_vectorcall.deep")(2000))
    except BaseException as e:
        out.append(type(e).__name__ + (" (native stack)" if "native stack" in str(e) else ""))
threading.stack_size(2 << 20)
t = threading.Thread(target=run); t.start(); t.join()
print(out)
"""
    r = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    allowed = ["['RecursionError']"]
    if sys.version_info >= (3, 12):
        allowed.append("['VMError (native stack)']")
    assert r.stdout.strip() in allowed, r.stdout
