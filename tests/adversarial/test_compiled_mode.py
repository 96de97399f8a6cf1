"""Hostile uses of models compiled with ``exec_mode="compiled"`` (VM TIR functions, issue 33):
a missing machine-code symbol, programs whose VM TIR entries claim what their code cannot be,
no consent for the library, Ctrl-C inside the native code, and re-entry from a callback.

The models are the corpus suite ``vm_suite`` (tests/tvm_corpus/build_vm_suite.py), built by TVM
in compiled mode. Every attack runs in a child process with a memory cap and a timeout.
"""

from __future__ import annotations

import os
import struct
import sys

import pytest
from attack import run_attack

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tvm_corpus"))
import located  # noqa: E402

SUITE = located.suite_dir("vm_suite")
pytestmark = pytest.mark.skipif(SUITE is None, reason=located.SKIP_REASON)


def model(test: str, source: str = "test_vm_build") -> str:
    return os.path.join(SUITE or "", source, test, "compiled", "model.so")


#: relax_func(callback) = callback(), compiled.
CALLBACK = ("test_catch_exception_with_full_stack_trace", "test_vm_callback_function")
#: main(x, y) = test.vm.add(x, y), compiled.
ADD = ("test_time_evaluator", "test_vm_build")

PRELUDE = """
import numpy as np, relaxvm as rx
@rx.register_func("test.vm.add", override=True)
def _add(a, b):
    return rx.tensor(a.numpy() + b.numpy())
"""


def test_a_missing_machine_code_symbol_is_named(tmp_path) -> None:
    with open(model(*ADD), "rb") as f:
        data = bytearray(f.read())
    name = b"__tvm_ffi___vmtir__main\x00"
    at = data.find(name)
    assert at > 0
    data[at : at + len(name) - 1] = b"__tvm_ffi___vmtir__MAIN"
    bad = tmp_path / "renamed.so"
    bad.write_bytes(bytes(data))
    out = run_attack(
        PRELUDE
        + f"""
vm = rx.VirtualMachine(rx.load_module({str(bad)!r}))
vm["main"](rx.tensor(np.ones(1, "float32")), rx.tensor(np.ones(1, "float32")))
"""
    )
    # The ELF checks find the renamed symbol first, or the VM names the machine code it lacks.
    out.assert_raises(("VMValueError", "VMKeyError"), r"__vmtir__MAIN|__vmtir__main")


def _vmexec(kind: int, num_args: int, registers: int) -> bytes:
    """A relax.VMExecutable declaring one function `main` of `kind` (2: VM TIR)."""

    def string(s: str) -> bytes:
        return struct.pack("<Q", len(s)) + s.encode()

    out = struct.pack("<Q", 0xD225_DE2F_4214_151E) + string("0.14")
    out += struct.pack("<Q", 1) + struct.pack("<i", kind) + string("main")
    out += struct.pack("<qqqq", 0, 0, num_args, registers) + struct.pack("<Q", 1) + string("x")
    out += struct.pack("<Q", 0) + struct.pack("<Q", 0)  # memory scopes, constants
    out += struct.pack("<Q", 0) + struct.pack("<Q", 0)  # no code
    return out


def test_vm_tir_entries_that_cannot_be_are_refused(tmp_path) -> None:
    # Too few registers for the inputs and the result.
    short = tmp_path / "short.vmexec"
    short.write_bytes(_vmexec(2, 1, 1))
    run_attack(f"import relaxvm as rx; rx.load_module({str(short)!r})").assert_raises(
        "VMValueError", r"1 registers for 1 inputs"
    )
    # A VM TIR function without a library: its machine code is named when the VM is built.
    alone = tmp_path / "alone.vmexec"
    alone.write_bytes(_vmexec(2, 1, 2))
    run_attack(f"import relaxvm as rx; rx.VirtualMachine(rx.load_module({str(alone)!r}))").assert_raises(
        "VMKeyError", r"__vmtir__main"
    )


def test_a_saved_compiled_model_needs_consent(tmp_path) -> None:
    rvx = tmp_path / "add.rvx"
    code = (
        PRELUDE
        + f"""
rx.load_module({model(*ADD)!r}).save({str(rvx)!r})
x = rx.tensor(np.ones(1, "float32"))
try:
    rx.load_executable({str(rvx)!r})
except rx.VMValueError as e:
    assert "native_libraries=" in str(e), e
else:
    raise AssertionError("opened without consent")
vm = rx.VirtualMachine(rx.load_executable({str(rvx)!r}, native_libraries=[{os.path.dirname(model(*ADD))!r}]))
print(vm["main"](x, x).numpy().tolist())
"""
    )
    run_attack(code).assert_ok("[2.0]")


def test_ctrl_c_inside_a_compiled_function(tmp_path) -> None:
    code = f"""
import os, signal, numpy as np, relaxvm as rx
vm = rx.VirtualMachine(rx.load_module({model(*CALLBACK)!r}))
def raising():
    raise KeyboardInterrupt
try:
    vm["relax_func"](raising)
except KeyboardInterrupt:
    print("raised")
def signalling():
    os.kill(os.getpid(), signal.SIGINT)
    return rx.tensor(np.zeros(16, "int32"))
try:
    vm["relax_func"](signalling)
except KeyboardInterrupt:
    print("signalled")
# The VM works on after both.
print(vm["relax_func"](lambda: rx.tensor(np.arange(16, dtype="int32"))).numpy()[:3].tolist())
"""
    run_attack(code).assert_ok("raised\nsignalled\n[0, 1, 2]")


def test_reentry_from_a_callback_is_refused(tmp_path) -> None:
    code = f"""
import numpy as np, relaxvm as rx
vm = rx.VirtualMachine(rx.load_module({model(*CALLBACK)!r}))
def again():
    return vm["relax_func"](again)
try:
    vm["relax_func"](again)
except RuntimeError as e:
    assert "already running on this thread" in str(e), e
    print("refused")
# Another VM of the same executable may be called from the callback.
other = rx.VirtualMachine(vm.executable)
out = vm["relax_func"](lambda: other["relax_func"](lambda: rx.tensor(np.ones(16, "int32"))))
print(int(out.numpy().sum()))
"""
    run_attack(code).assert_ok("refused\n16")


def test_deep_recursion_through_compiled_functions_is_bounded() -> None:
    # test_recursion's model calls itself once per unit of its input: a large input reaches
    # the VM's re-entry limit as an error, not a native stack overflow.
    code = f"""
import numpy as np, relaxvm as rx
@rx.register_func("test.vm.equal_zero", override=True)
def _eq(a):
    return rx.tensor(np.array(np.all(a.numpy() == 0)))
@rx.register_func("test.vm.subtract_one", override=True)
def _sub(a):
    return rx.tensor(np.subtract(a.numpy(), 1))
@rx.register_func("test.vm.add", override=True)
def _add(a, b):
    return rx.tensor(a.numpy() + b.numpy())
vm = rx.VirtualMachine(rx.load_module({model("test_recursion")!r}), max_reentry=50)
print(vm["recursion"](rx.tensor(np.full(1, 5, "float32"))).numpy().tolist())
vm["recursion"](rx.tensor(np.full(1, 10_000, "float32")))
"""
    out = run_attack(code)
    out.assert_raises("VMError", r"call depth limit of 50 frames exceeded.*in function \"recursion\"")
    assert out.stdout.startswith("32.0"), out.describe()


def _vmexec_of(so: str) -> tuple[bytearray, int]:
    """The bytes of `so` and the offset of its embedded relax.VMExecutable's first function's
    register_file_size field."""
    with open(so, "rb") as f:
        data = bytearray(f.read())
    p = data.find(struct.pack("<Q", 0xD225_DE2F_4214_151E)) + 8
    p += 8 + struct.unpack_from("<Q", data, p)[0]  # version
    p += 8  # function count
    p += 4
    p += 8 + struct.unpack_from("<Q", data, p)[0]  # kind, name
    return data, p + 24  # start, end, num_args, then the register count


def test_many_vm_tir_functions_cost_what_the_file_holds(tmp_path) -> None:
    # compiled/01: 30,000 VM TIR functions (1.7 MB) once made 9e8 wrapper operands and aborted.
    def string(s: str) -> bytes:
        return struct.pack("<Q", len(s)) + s.encode()

    n = 30_000
    out = struct.pack("<Q", 0xD225_DE2F_4214_151E) + string("0.14") + struct.pack("<Q", n)
    for i in range(n):
        out += struct.pack("<i", 2) + string(f"f{i}") + struct.pack("<qqqq", 0, 0, 0, 1) + struct.pack("<Q", 0)
    out += struct.pack("<QQQQ", 0, 0, 0, 0)
    path = tmp_path / "many.vmexec"
    path.write_bytes(out)
    code = f"import relaxvm as rx; print(len(rx.load_module({str(path)!r}).as_text()) > 0)"
    run_attack(code, memory=1 << 30).assert_ok("True")


def test_a_register_count_from_the_file_is_bounded_and_checked(tmp_path) -> None:
    # compiled/02: a register count of 2^32-1 sized a per-call allocation (abort); a count
    # smaller than the registers the code uses left it running on stale argument slots.
    data, at = _vmexec_of(model(*ADD))
    struct.pack_into("<q", data, at, 0xFFFF_FFFF)
    huge = tmp_path / "huge.so"
    huge.write_bytes(bytes(data))
    run_attack(f"import relaxvm as rx; rx.load_module({str(huge)!r})").assert_raises(
        "VMValueError", r"declares 4294967295 registers"
    )
    struct.pack_into("<q", data, at, 3)
    small = tmp_path / "small.so"
    small.write_bytes(bytes(data))
    code = (
        PRELUDE
        + f"""
vm = rx.VirtualMachine(rx.load_module({str(small)!r}))
x = rx.tensor(np.ones(1, "float32"))
vm["main"](x, x)
"""
    )
    # The first failure is the error, not a later one from a slot the code kept using.
    run_attack(code).assert_raises(("VMIndexError", "IndexError"), r"TVMBackendAnyList\w+: list item")


TVM_SITE = next(
    (
        os.path.join(root, d, "site-packages")
        for root in [
            os.path.join(
                os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), ".venv-tvm", "lib"
            )
        ]
        if os.path.isdir(root)
        for d in sorted(os.listdir(root))
        if os.path.isdir(os.path.join(root, d, "site-packages", "tvm"))
    ),
    None,
)


@pytest.mark.skipif(TVM_SITE is None, reason="needs TVM in .venv-tvm (scripts/setup-venv-tvm.sh)")
def test_tvm_runs_compiled_models_after_relaxvm_opened_a_library() -> None:
    # compiled/03: relaxvm's AnyList functions, global once relaxvm opened a library, bound in
    # the compiled models TVM loads later: TVM's lists reached relaxvm's functions.
    code = f"""
import sys, numpy as np
sys.path.append({TVM_SITE!r})
import relaxvm as rx
rx.load_module({model(*ADD)!r})
import tvm
from tvm import relax
import tvm.relax.testing.vm
vm = relax.VirtualMachine(tvm.runtime.load_module({model("test_vm_compile_stage3")!r}), tvm.cpu())
x = np.arange(512, dtype="float32").reshape(32, 16)
print(bool((vm["foo"](tvm.runtime.tensor(x)).numpy() == x).all()))
"""
    run_attack(code).assert_ok("True")


def test_invoke_closure_of_a_function_of_the_same_vm() -> None:
    # other/02: vm.invoke_closure(vm["main"], ...) called the VM back through the Python
    # function object and met the re-entry guard; TVM runs it.
    code = (
        PRELUDE
        + f"""
vm = rx.VirtualMachine(rx.load_module({model(*ADD)!r}))
x = rx.tensor(np.ones(1, "float32"))
print(vm.invoke_closure(vm["main"], x, x).numpy().tolist())
"""
    )
    run_attack(code).assert_ok("[2.0]")


#: foo(x) = tile(x, (1, 2)) into a tensor the machine code allocates (alloc_storage and
#: alloc_tensor through function handles), compiled.
TILE = ("test_vm_compile_e2e", "test_vm_build")


@pytest.mark.parametrize("cfg", ["pooled", "naive"])
def test_compiled_allocations_follow_memory_cfg_and_never_hand_out_a_kept_result(cfg) -> None:
    # F9: the machine code's allocation sites pool as bytecode's do. The hazard is a result,
    # a numpy view of one, or a tensor a callback stashed, handed out again while still held.
    out = run_attack(
        f"""
import numpy as np, relaxvm as rx
STASH = []
@rx.register_func("test.vm.tile", override=True)
def _tile(a, b):
    b[:] = np.tile(a.numpy(), (1, 2))
    if len(STASH) < 20:
        STASH.append((b, b.numpy().copy()))
vm = rx.VirtualMachine(rx.load_module({model(*TILE)!r}), memory_cfg={cfg!r})
f = vm["foo"]
def x(k):
    return np.full((32, 16), k, "float32")
kept = [f(rx.tensor(x(k))) for k in range(20)]
views = [np.asarray(f(rx.tensor(x(100 + k)))) for k in range(20)]
for k in range(300):
    assert f(rx.tensor(x(-k))).numpy().tolist() == np.tile(x(-k), (1, 2)).tolist()
assert all(t.numpy().tolist() == np.tile(x(k), (1, 2)).tolist() for k, t in enumerate(kept))
assert all(v.tolist() == np.tile(x(100 + k), (1, 2)).tolist() for k, v in enumerate(views))
assert all(np.array_equal(b.numpy(), copy) for b, copy in STASH)
print(vm.memory_allocator)
"""
    )
    out.assert_ok(cfg)
