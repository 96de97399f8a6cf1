"""Runs the cases of the corpus suite ``vm_suite`` (tests/tvm_corpus/build_vm_suite.py: TVM's
end-to-end VM tests, built and recorded by TVM in both exec modes) on relaxvm. Shared by the
``tests/test_tvm_vm_suite_*.py`` files, one per TVM source file."""

from __future__ import annotations

import contextlib
import io
import os
import sys

import numpy as np
import pytest

import relaxvm as rx

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "tvm_corpus"))
import corpus  # noqa: E402
import located  # noqa: E402

SUITE = located.suite_dir("vm_suite")
AVAILABLE = SUITE is not None
SKIP_REASON = located.SKIP_REASON
MANIFEST = corpus.load_manifest(SUITE) if AVAILABLE else {"models": [], "skipped": []}


# The packed functions TVM's tests take from tvm.relax.testing.vm, registered as a user would.
@rx.register_func("test.vm.identity", override=True)
def _identity(a, b):
    b[:] = a.numpy()


@rx.register_func("test.vm.tile", override=True)
def _tile(a, b):
    b[:] = np.tile(a.numpy(), (1, 2))


@rx.register_func("test.vm.equal_zero", override=True)
def _equal_zero(a):
    return rx.tensor(np.array(np.all(a.numpy() == 0)))


@rx.register_func("test.vm.subtract_one", override=True)
def _subtract_one(a):
    return rx.tensor(np.subtract(a.numpy(), 1))


@rx.register_func("test.vm.add", override=True)
def _add(a, b):
    return rx.tensor(a.numpy() + b.numpy())


@rx.register_func("test.vm.mul", override=True)
def _mul(a, b):
    return rx.tensor(a.numpy() * b.numpy())


@rx.register_func("test.inplace.add", override=True)
def _inplace_add(a, b):
    a.copyfrom(a.numpy() + b.numpy())
    return a


@rx.register_func("test.inplace.tuple_add", override=True)
def _inplace_tuple_add(a, b):
    c = rx.tensor(a.numpy() + b.numpy())
    a.copyfrom(a.numpy() + b.numpy())
    return (a, c)


def _flat(x) -> np.ndarray:
    """As the builder's: call_py_func passes its arguments tuple as one argument."""
    if isinstance(x, rx.Tensor):
        return x.numpy()
    return np.array([t.numpy() for t in x]).flatten()


def register_py_funcs() -> None:
    """The functions of TVM's test_op_call_py_func (numpy versions, as in the builder)."""
    register = rx.get_global_func("vm.builtin.register_py_func")
    register("torch_relu", lambda x: rx.tensor(np.maximum(_flat(x), np.float32(0))))
    register("torch_sigmoid", lambda x: rx.tensor((1 / (1 + np.exp(-_flat(x)))).astype("float32")))


@rx.register_func("test.vm.check_if_defined", override=True)
def _check_if_defined(obj):
    return obj is not None


def models(source: str) -> list[dict]:
    """The models built from TVM's test file ``source``."""
    return [m for m in MANIFEST["models"] if m["source"] == source]


def case_ids(source: str) -> list[tuple[str, int]]:
    return [(m["name"], k) for m in models(source) for k in range(len(m["cases"]))]


def skipped(source: str) -> list[tuple[str, str]]:
    """(test, reason) of the tests of ``source`` the suite does not build."""
    return [(s["test"], s["reason"]) for s in MANIFEST.get("skipped", []) if s["source"] == source]


_loaded: dict[str, rx.Executable] = {}


def executable(m: dict) -> rx.Executable:
    if m["name"] not in _loaded:
        ex = rx.load_module(os.path.join(SUITE, m["library"]))
        # A compiled-mode model runs its functions' machine code (VM TIR functions).
        assert ("call  __vmtir__" in ex.as_text()) == (m["exec_mode"] == "compiled"), m["name"]
        _loaded[m["name"]] = ex
    return _loaded[m["name"]]


def to_rx(v):
    if isinstance(v, np.ndarray):
        return rx.tensor(v)
    if isinstance(v, corpus.ShapeValue):
        return rx.Shape(list(v))
    if isinstance(v, tuple):
        return tuple(to_rx(x) for x in v)
    return v


def to_plain(v):
    """A relaxvm value as the plain value corpus.flatten stores (as the builder's to_numpy)."""
    if isinstance(v, rx.Tensor):
        return v.numpy()
    if isinstance(v, rx.Shape):
        return corpus.ShapeValue(int(d) for d in v)
    if isinstance(v, (tuple, list)):
        return tuple(to_plain(x) for x in v)
    if isinstance(v, rx.DataType):
        # TVM returns a dtype as tvm_ffi.dtype, a str.
        return str(v)
    return v


def assert_same(got, want, where: str) -> None:
    """Bit-identical: same kind, dtype, shape and bytes."""
    if isinstance(want, np.ndarray):
        assert isinstance(got, np.ndarray), f"{where}: {got!r} is not a tensor"
        assert got.dtype == want.dtype and got.shape == want.shape, (
            f"{where}: {got.dtype}{got.shape} vs {want.dtype}{want.shape}"
        )
        assert got.tobytes() == want.tobytes(), f"{where}: values differ"
    elif isinstance(want, corpus.ShapeValue):
        assert isinstance(got, corpus.ShapeValue) and tuple(got) == tuple(want), f"{where}: {got} vs {want}"
    elif isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), f"{where}: {got!r} vs {want!r}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{where}[{i}]")
    else:
        assert type(got) is type(want) and got == want, f"{where}: {got!r} vs {want!r}"


def run(vm: rx.VirtualMachine, entry: dict, args: list):
    """Does on relaxvm what the builder's run_case did on TVM; the value to compare."""
    kind, function = entry["kind"], entry["function"]
    names = entry["kwargs"]
    positional = [to_rx(a) for a in args[: len(args) - len(names)]]
    kwargs = {k: to_rx(a) for k, a in zip(names, args[len(args) - len(names) :])}
    if kind == "call":
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            raw = vm[function](*positional)
        check_aliases(raw, positional, entry)
        if "stdout" in entry:
            assert printed.getvalue() == entry["stdout"], f"printed {printed.getvalue()!r}, TVM {entry['stdout']!r}"
        out = to_plain(raw)
        return (out, tuple(to_plain(a) for a in positional)) if entry.get("after") else out
    if kind == "saved":
        vm.save_function(function, function + "_saved", *positional)
        direct = to_plain(vm[function](*positional))
        assert_same(to_plain(vm[function + "_saved"]()), direct, "the saved function")
        return direct
    if kind == "stateful":
        vm.set_input(function, *positional, **kwargs)
        vm.invoke_stateful(function)
        outs = vm.get_outputs(function)
        check_aliases(outs, positional, entry)
        return to_plain(outs)
    if kind == "saved_kwargs":
        vm.save_function(function, "saved_main", **kwargs)
        return to_plain(vm["saved_main"]())
    if kind == "set_input_then_call":
        vm.set_input(function, *positional)
        return to_plain(vm[function]())
    if kind == "invoke_without_input":
        vm.invoke_stateful(function)
        return None
    if kind == "set_input_then_get":
        vm.set_input(function, *positional)
        return to_plain(vm.get_outputs(function))
    if kind == "text_roundtrip":
        # relaxvm's round trip: the program saved with its library reference prints the same.
        ex = vm.executable
        return ex.as_text() == rx.load_executable(ex.save_to_bytes(), native_libraries=True).as_text()
    if kind == "multi_device":
        # relaxvm runs a VM on one device (docs/tvm-compat.md): two are refused, never cut.
        with pytest.raises(ValueError, match="one device, but 2 were given"):
            rx.VirtualMachine(vm.executable, [rx.cpu(0), rx.cpu(1)])
        raise MultiDevice
    if kind == "callback_store":
        stored = []
        out = vm[function](*positional, stored.append)
        return (to_plain(out), to_plain(stored[0]))
    if kind == "callback_make":
        return to_plain(vm[function](lambda: positional[0]))
    if kind == "callback_raise":

        def raising():
            raise RuntimeError("Error thrown from callback")

        try:
            vm[function](raising)
        except RuntimeError as err:
            stack = err.__traceback__
            while stack.tb_next is not None:
                stack = stack.tb_next
            # As TVM's test asks: the innermost frame is the Python callback's.
            code = stack.tb_frame.f_code
            assert (code.co_filename, code.co_name) == (raising.__code__.co_filename, "raising"), code
            raise
        return None
    if kind == "time_stateful":
        vm.set_input(function, *positional)
        return bool(vm.time_evaluator("invoke_stateful", rx.cpu())(function).results)
    if kind == "time_saved":
        vm.save_function(function, "saved_main", *positional)
        return bool(vm.time_evaluator("saved_main", rx.cpu())().results)
    raise ValueError(f"unknown case kind {kind!r}")


def check_aliases(outs, inputs: list, entry: dict) -> None:
    """The outputs (items of a tuple output) that are input tensors are those TVM's were."""
    items = list(outs) if isinstance(outs, tuple) else [outs]
    got = [[i, j] for i, o in enumerate(items) for j, a in enumerate(inputs) if isinstance(o, rx.Tensor) and o is a]
    assert got == entry.get("aliases", []), f"outputs that are inputs: {got} vs TVM's {entry.get('aliases')}"


ERROR_CLASSES = {
    "RuntimeError": RuntimeError,
    "ValueError": ValueError,
    "TypeError": TypeError,
    "AssertionError": AssertionError,
}

# Where relaxvm raises another class than TVM, on purpose (docs/tvm-compat.md): (test, class).
DIFFERENT_ERRORS = {
    # A failed match_shape is relaxvm's ValueError (TVM: RuntimeError for a dimension mismatch).
    ("test_match_check", "RuntimeError"): ValueError,
}


class MultiDevice(Exception):
    """A case TVM ran on several devices, which relaxvm refuses (checked by `run`)."""


def check_case(name: str, k: int) -> None:
    m = next(m for m in MANIFEST["models"] if m["name"] == name)
    entry = m["cases"][k]
    args, want = corpus.load_case(SUITE, entry)
    vm = rx.VirtualMachine(executable(m), rx.cpu(), memory_cfg=entry.get("memory_cfg"))
    if "error" in entry:
        cls = DIFFERENT_ERRORS.get((m["test"], entry["error_class"]), ERROR_CLASSES[entry["error_class"]])
        with pytest.raises(cls):
            run(vm, entry, args)
        return
    try:
        got = run(vm, entry, args)
    except MultiDevice:
        return
    assert_same(to_plain_recorded(got), want, f"{name} case {k}")


def to_plain_recorded(v):
    """What the builder stores for a value: numpy scalars and lists as corpus.flatten reads them back."""
    if isinstance(v, list):
        return tuple(v)
    return v
