"""Models compiled by Apache TVM 0.27 (the "hand" suite of the corpus, tests/tvm_corpus/build_hand.py),
run on relaxvm in this environment, where TVM is not installed, and compared bit for bit with
the outputs TVM's own VM produced for the same .so."""

from __future__ import annotations

import os
import pickle
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import relaxvm as rx

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "tvm_corpus"))
import corpus  # noqa: E402
import located  # noqa: E402

SUITE = located.suite_dir("hand")
AVAILABLE = SUITE is not None
pytestmark = pytest.mark.skipif(not AVAILABLE, reason=located.SKIP_REASON)
MODELS = corpus.load_manifest(SUITE)["models"] if AVAILABLE else []
CASES = [(m["name"], k) for m in MODELS for k in range(len(m["cases"]))]


def model(name: str) -> dict:
    return next(m for m in MODELS if m["name"] == name)


_loaded: dict[str, rx.Executable] = {}


def executable(name: str) -> rx.Executable:
    if name not in _loaded:
        _loaded[name] = rx.load_module(os.path.join(SUITE, model(name)["library"]))
    return _loaded[name]


def to_rx(v):
    return rx.tensor(v) if isinstance(v, np.ndarray) else v


def assert_same(got, want, where: str) -> None:
    """Bit-identical: same kind, dtype, shape and bytes (NaNs in the same places)."""
    if isinstance(want, np.ndarray):
        assert isinstance(got, rx.Tensor), f"{where}: {got!r} is not a tensor"
        g = got.numpy()
        assert g.dtype == want.dtype and g.shape == want.shape, (
            f"{where}: {g.dtype}{g.shape} vs {want.dtype}{want.shape}"
        )
        assert g.tobytes() == want.tobytes(), f"{where}: values differ"
    elif isinstance(want, corpus.ShapeValue):
        assert tuple(got) == tuple(want), f"{where}: {got} vs {want}"
    elif isinstance(want, tuple):
        assert len(got) == len(want), f"{where}: {len(got)} items vs {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{where}[{i}]")
    else:
        assert type(got) is type(want) and got == want, f"{where}: {got!r} vs {want!r}"


@pytest.mark.parametrize("name,k", CASES, ids=[f"{n}-{k}" for n, k in CASES])
def test_case_matches_tvm(name: str, k: int) -> None:
    entry = model(name)["cases"][k]
    args, want = corpus.load_case(SUITE, entry)
    vm = rx.VirtualMachine(executable(name), rx.cpu())
    if "error" in entry:
        with pytest.raises(rx.VMError, match=_escape(entry["error"])):
            vm[entry["function"]](*[to_rx(a) for a in args])
        # The VM keeps working after the error.
        ok = next((c for c in model(name)["cases"] if "error" not in c), None)
        if ok is not None:
            ok_args, ok_want = corpus.load_case(SUITE, ok)
            assert_same(vm[ok["function"]](*[to_rx(a) for a in ok_args]), ok_want, f"{name} after error")
        return
    assert_same(vm[entry["function"]](*[to_rx(a) for a in args]), want, f"{name} case {k}")


def _escape(text: str) -> str:
    return re.escape(text)


def test_tvm_is_not_installed_here(tmp_path) -> None:
    # In a child started elsewhere: the repository's tvm/ (a Rust crate) would otherwise pass
    # for a namespace package.
    for module in ("tvm", "tvm_ffi"):
        code = f"import {module}"
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60)
        assert proc.returncode == 1 and "ModuleNotFoundError" in proc.stderr, (module, proc.stderr)


def test_text_form_names_the_kernels() -> None:
    text = executable("mlp").as_text()
    assert "@main" in text and "call  matmul" in text and "vm.builtin.match_shape" in text


def test_saved_rvx_references_the_library(tmp_path) -> None:
    rvx = tmp_path / "mlp.rvx"
    executable("mlp").save(str(rvx))
    entry = model("mlp")["cases"][0]
    args, want = corpus.load_case(SUITE, entry)
    # Its library is opened only with consent: the folder it lies in.
    with pytest.raises(rx.VMValueError, match="native_libraries="):
        rx.load_executable(str(rvx))
    library = os.path.dirname(os.path.join(SUITE, model("mlp")["library"]))
    vm = rx.VirtualMachine(rx.load_executable(str(rvx), native_libraries=[library]))
    assert_same(vm["main"](*[to_rx(a) for a in args]), want, "mlp from .rvx")
    # Pickling keeps the reference too.
    again = pickle.loads(pickle.dumps(executable("mlp")))
    assert_same(rx.VirtualMachine(again)["main"](*[to_rx(a) for a in args]), want, "mlp pickled")


def test_standalone_vmexec_loads_without_kernels() -> None:
    ex = rx.load_module(os.path.join(SUITE, model("mlp")["vmexec"]))
    assert "matmul" in ex.as_text()
    with pytest.raises(KeyError, match=r'matmul \(called by "main" at instruction \d+\)'):
        rx.VirtualMachine(ex)


def test_the_thread_pool_and_callbacks_are_exercised() -> None:
    assert any(m.get("uses_parallel") for m in MODELS)
    assert any(m.get("uses_callbacks") for m in MODELS)


def _load_in_child(path: str) -> subprocess.CompletedProcess:
    code = f"import relaxvm as rx; rx.load_module({path!r})"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_bad_files_are_exceptions_not_crashes(tmp_path) -> None:
    so = os.path.join(SUITE, model("mlp")["library"])
    with open(so, "rb") as f:
        data = f.read()
    text = tmp_path / "text.so"
    text.write_text("not a library")
    with pytest.raises(ValueError, match="not an ELF"):
        rx.load_module(str(text))
    for cut in (1000, len(data) // 2, len(data) - 1):
        bad = tmp_path / f"cut{cut}.so"
        bad.write_bytes(data[:cut])
        # In a child process: whatever happens, this process must not be the one that dies.
        proc = _load_in_child(str(bad))
        assert proc.returncode == 1, proc.stderr
        assert "Traceback" in proc.stderr and "ValueError" in proc.stderr, proc.stderr
    # A shared library that is not a TVM model: this package's own extension module.
    ext = next(p for p in os.listdir(os.path.dirname(rx._relaxvm.__file__)) if p.endswith(".so"))
    plain = tmp_path / "plain.so"
    shutil.copyfile(os.path.join(os.path.dirname(rx._relaxvm.__file__), ext), plain)
    with pytest.raises(ValueError, match="__tvm_ffi__library_bin"):
        rx.load_module(str(plain))


def test_a_missing_kernel_is_named(tmp_path) -> None:
    # A library whose program calls a kernel the library does not export.
    src = os.path.join(SUITE, model("mlp")["library"])
    with open(src, "rb") as f:
        data = bytearray(f.read())
    name = b"__tvm_ffi_relu\x00"
    at = data.find(name)
    assert at > 0
    data[at + len(b"__tvm_ffi_") : at + len(name) - 1] = b"RELU"
    bad = tmp_path / "renamed.so"
    bad.write_bytes(bytes(data))
    # The renamed symbol no longer matches the library's hash table: the loader refuses it, or
    # the VM names the kernel nothing provides.
    with pytest.raises(rx.VMValueError) as info:
        rx.VirtualMachine(rx.load_module(str(bad)))
    # ELF validation finds it first (the dynamic symbol no longer agrees with the symbol table).
    assert f"{bad}: " in str(info.value) and "__tvm_ffi_RELU" in str(info.value), info.value
    assert "absent from the symbol table" in str(info.value), info.value


def test_kernel_errors_become_python_exceptions() -> None:
    # The kernel_assert model's kernel raises TVM's error for a negative input (recorded as an
    # error case, checked above); the exception carries the kernel's message and the VM lives on.
    vm = rx.VirtualMachine(executable("kernel_assert"))
    with pytest.raises(rx.VMError) as info:
        vm["main"](rx.tensor(np.array([-1.0, 2.0], "float32")))
    message = str(info.value)
    assert message.startswith('kernel "checked_sqrt" raised RuntimeError: input must be non-negative'), message
    assert 'in function "main", instruction 5: call  checked_sqrt' in message, message
    assert vm["main"](rx.tensor(np.array([1.0, 4.0], "float32"))).numpy().tolist() == [1.0, 2.0]
