"""The C API (librelaxvm_capi.so, through ctypes) attacked as a careless or hostile C caller
would: pointers that are not handles, handles of the wrong type or already freed, counts that
would overflow, and one VM shared by threads. Each misuse must come back as an error object
(RVM_ERROR_INVALID_ARGUMENT, or RVM_ERROR_BUSY for a VM in use), never a crash; each attack runs
in a child process with a memory cap and a timeout (attack.py). The Rust tests of every error
path are capi/tests/errors*.rs; scripts/test-c-api.sh runs C programs under AddressSanitizer.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from attack import run_attack

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "target" / "debug" / "librelaxvm_capi.so"


@pytest.fixture(scope="module", autouse=True)
def library():
    if not LIB.exists():
        subprocess.run(["cargo", "build", "--quiet", "-p", "relaxvm-capi"], cwd=ROOT, check=True)


PRE = rf"""
import ctypes, threading, relaxvm as rx
lib = ctypes.CDLL({str(LIB)!r})
P = ctypes.c_void_p
for name, args in {{
    "rvm_error_get_code": [P], "rvm_error_message": [P], "rvm_error_free": [P],
    "rvm_executable_load_bytes": [P, ctypes.c_size_t, ctypes.c_char_p, P, ctypes.POINTER(P)],
    "rvm_executable_free": [P], "rvm_executable_function_count": [P, ctypes.POINTER(ctypes.c_size_t)],
    "rvm_executable_function_name": [P, ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p)],
    "rvm_executable_as_text": [P, ctypes.POINTER(P)],
    "rvm_vm_create": [P, P, ctypes.POINTER(P)], "rvm_vm_free": [P], "rvm_vm_interrupt": [P],
    "rvm_vm_call": [P, ctypes.c_char_p, P, ctypes.c_size_t, ctypes.POINTER(P)],
    "rvm_vm_get_function": [P, ctypes.c_char_p, ctypes.POINTER(P)],
    "rvm_vm_invoke": [P, P, P, ctypes.c_size_t, ctypes.POINTER(P)],
    "rvm_vm_set_input": [P, ctypes.c_char_p, P, ctypes.c_size_t], "rvm_vm_invoke_stateful": [P, ctypes.c_char_p],
    "rvm_vm_get_outputs": [P, ctypes.c_char_p, ctypes.POINTER(P)],
    "rvm_vm_get_allocator": [P, ctypes.POINTER(ctypes.c_int64)],
    "rvm_value_new_int": [ctypes.c_int64], "rvm_value_free": [P], "rvm_value_clone": [P, ctypes.POINTER(P)],
    "rvm_value_get_int": [P, ctypes.POINTER(ctypes.c_int64)], "rvm_value_get_kind": [P],
    "rvm_value_get_str": [P, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_size_t)],
    "rvm_value_get_shape": [P, ctypes.POINTER(P), ctypes.POINTER(ctypes.c_size_t)],
    "rvm_value_new_shape": [P, ctypes.c_size_t, ctypes.POINTER(P)],
    "rvm_value_new_tuple": [P, ctypes.c_size_t, ctypes.POINTER(P)],
    "rvm_value_new_str": [P, ctypes.c_size_t, ctypes.POINTER(P)],
    "rvm_value_tuple_get": [P, ctypes.c_size_t, ctypes.POINTER(P)],
    "rvm_value_to_dlpack": [P, ctypes.POINTER(P)], "rvm_value_to_string": [P, ctypes.POINTER(P)],
    "rvm_string_free": [P], "rvm_live_handle_count": [],
}}.items():
    f = getattr(lib, name)
    f.argtypes = args
    f.restype = ctypes.c_int if name in ("rvm_error_get_code", "rvm_value_get_kind") else P
lib.rvm_error_message.restype = ctypes.c_char_p
lib.rvm_live_handle_count.restype = ctypes.c_size_t

def code(err):
    c = lib.rvm_error_get_code(err)
    lib.rvm_error_free(err)
    return c

ib = rx.ExecBuilder()
with ib.function("main", num_inputs=2):
    ib.emit_call("vm.builtin.int.add", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
    ib.emit_ret(ib.r(2))
data = ib.get().save_to_bytes()
exe, vm = P(), P()
assert lib.rvm_executable_load_bytes(data, len(data), b"add", None, ctypes.byref(exe)) is None
assert lib.rvm_vm_create(exe, None, ctypes.byref(vm)) is None
"""


def test_pointers_that_are_not_live_handles_are_errors():
    out = run_attack(
        PRE
        + r"""
freed = lib.rvm_value_new_int(3)
assert lib.rvm_value_free(freed) is None
buf = ctypes.create_string_buffer(64)
bogus = [1, 8, 0xDEADBEEF000, ctypes.addressof(buf), freed, exe.value, vm.value]
out, n, s, i = P(), ctypes.c_size_t(), ctypes.c_char_p(), ctypes.c_int64()
calls = {
    "executable_free": lambda p: lib.rvm_executable_free(p),
    "function_count": lambda p: lib.rvm_executable_function_count(p, ctypes.byref(n)),
    "function_name": lambda p: lib.rvm_executable_function_name(p, 0, ctypes.byref(s)),
    "as_text": lambda p: lib.rvm_executable_as_text(p, ctypes.byref(out)),
    "vm_create": lambda p: lib.rvm_vm_create(p, None, ctypes.byref(out)),
    "vm_call": lambda p: lib.rvm_vm_call(p, b"main", None, 0, ctypes.byref(out)),
    "vm_get_function": lambda p: lib.rvm_vm_get_function(p, b"main", ctypes.byref(out)),
    "vm_interrupt": lambda p: lib.rvm_vm_interrupt(p),
    "vm_set_input": lambda p: lib.rvm_vm_set_input(p, b"main", None, 0),
    "vm_invoke_stateful": lambda p: lib.rvm_vm_invoke_stateful(p, b"main"),
    "vm_get_outputs": lambda p: lib.rvm_vm_get_outputs(p, b"main", ctypes.byref(out)),
    "vm_get_allocator": lambda p: lib.rvm_vm_get_allocator(p, ctypes.byref(i)),
    "vm_free": lambda p: lib.rvm_vm_free(p),
    "value_free": lambda p: lib.rvm_value_free(p),
    "value_clone": lambda p: lib.rvm_value_clone(p, ctypes.byref(out)),
    "value_get_int": lambda p: lib.rvm_value_get_int(p, ctypes.byref(i)),
    "value_get_str": lambda p: lib.rvm_value_get_str(p, ctypes.byref(s), None),
    "value_get_shape": lambda p: lib.rvm_value_get_shape(p, ctypes.byref(out), ctypes.byref(n)),
    "tuple_get": lambda p: lib.rvm_value_tuple_get(p, 0, ctypes.byref(out)),
    "to_dlpack": lambda p: lib.rvm_value_to_dlpack(p, ctypes.byref(out)),
    "to_string": lambda p: lib.rvm_value_to_string(p, ctypes.byref(out)),
    "string_free": lambda p: lib.rvm_string_free(p),
}
wrong = []
for name, call in calls.items():
    for p in bogus:
        # The live executable and VM are the right handle for some calls: skip those.
        exe_ok = ("function_count", "function_name", "as_text", "vm_create", "executable_free")
        vm_ok = ("vm_call", "vm_get_function", "vm_interrupt", "vm_free", "vm_set_input", "vm_invoke_stateful")
        vm_ok += ("vm_get_outputs", "vm_get_allocator")
        if (p == exe.value and name in exe_ok) or (p == vm.value and name in vm_ok):
            continue
        c = code(call(p))
        if c != 1:
            wrong.append((name, hex(p), c))
assert not wrong, wrong
assert lib.rvm_error_get_code(12345) == 1 and lib.rvm_error_message(12345).startswith(b"rvm_error_message: not a live")
print("ok")
"""
    )
    out.assert_ok("ok")


def test_counts_that_would_overflow_are_errors():
    out = run_attack(
        PRE
        + r"""
out = P()
one = lib.rvm_value_new_int(1)
args = (P * 1)(one)
huge = [2**64 - 1, 2**63, 2**62 + 1, 2**33]
for n in huge:
    assert code(lib.rvm_vm_call(vm, b"main", args, n, ctypes.byref(out))) == 1, n
    assert code(lib.rvm_vm_invoke(vm, one, args, n, ctypes.byref(out))) == 1, n
    assert code(lib.rvm_value_new_tuple(args, n, ctypes.byref(out))) == 1, n
    assert code(lib.rvm_value_new_shape(args, n, ctypes.byref(out))) == 1, n
    assert code(lib.rvm_value_new_str(args, n, ctypes.byref(out))) == 1, n
    assert code(lib.rvm_executable_load_bytes(args, n, None, None, ctypes.byref(out))) in (1, 3), n
assert lib.rvm_value_free(one) is None
print("ok")
"""
    )
    out.assert_ok("ok")


def test_one_vm_shared_by_threads_is_busy_not_broken():
    out = run_attack(
        PRE
        + r"""
results = []
def worker():
    a, b = lib.rvm_value_new_int(2), lib.rvm_value_new_int(3)
    args = (P * 2)(a, b)
    for _ in range(300):
        out = P()
        err = lib.rvm_vm_call(vm, b"main", args, 2, ctypes.byref(out))
        if err is None:
            x = ctypes.c_int64()
            assert lib.rvm_value_get_int(out, ctypes.byref(x)) is None and x.value == 5
            assert lib.rvm_value_free(out) is None
            results.append("ok")
        else:
            results.append(code(err))
    lib.rvm_value_free(a), lib.rvm_value_free(b)
threads = [threading.Thread(target=worker) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
assert set(results) <= {"ok", 19}, set(results)  # 19: RVM_ERROR_BUSY
assert results.count("ok") > 0
assert lib.rvm_vm_free(vm) is None and lib.rvm_executable_free(exe) is None
assert lib.rvm_live_handle_count() == 0, lib.rvm_live_handle_count()
print("ok")
"""
    )
    out.assert_ok("ok")


# A function that calls itself forever: with limits above what memory allows, the stacks' growth
# fails first, which must be an error (capi/02), not an abort.
# rvm_vm_options as relaxvm.h declares it, filled by rvm_vm_options_init_sized with its size.
OPTIONS = r"""
class Options(ctypes.Structure):
    _fields_ = [("magic", ctypes.c_uint32), ("struct_size", ctypes.c_uint32), ("max_call_depth", ctypes.c_uint64),
                ("max_reentry", ctypes.c_uint64), ("step_budget", ctypes.c_uint64),
                ("max_stack_registers", ctypes.c_uint64), ("profile", ctypes.c_bool),
                ("num_threads", ctypes.c_uint32), ("memory_cfg", ctypes.c_char_p),
                ("memory_cfg_devices", ctypes.c_void_p), ("num_memory_cfg_devices", ctypes.c_size_t)]
lib.rvm_vm_options_init_sized.argtypes = [P, ctypes.c_size_t]
lib.rvm_vm_options_init_sized.restype = P
opts = Options()
assert lib.rvm_vm_options_init_sized(ctypes.byref(opts), ctypes.sizeof(opts)) is None
"""

RECURSE = r"""
ib = rx.ExecBuilder()
with ib.function("main", num_inputs=1):
    ib.emit_call("main", args=[ib.r(0)], dst=ib.r(1))
    ib.emit_ret(ib.r(1))
rec = ib.get()
"""


def test_limits_above_memory_end_in_an_allocation_error_through_c():
    out = run_attack(
        PRE
        + RECURSE
        + OPTIONS
        + r"""
opts.max_call_depth = opts.max_stack_registers = 2**64 - 1
data = rec.save_to_bytes()
rexe, rvm, out = P(), P(), P()
assert lib.rvm_executable_load_bytes(data, len(data), b"rec", None, ctypes.byref(rexe)) is None
assert lib.rvm_vm_create(rexe, ctypes.byref(opts), ctypes.byref(rvm)) is None
one = lib.rvm_value_new_int(1)
err = lib.rvm_vm_call(rvm, b"main", (P * 1)(one), 1, ctypes.byref(out))
print(lib.rvm_error_get_code(err), b"cannot grow" in lib.rvm_error_message(err))
lib.rvm_error_free(err)
"""
    )
    out.assert_ok("6 True")  # 6: RVM_ERROR_ALLOC


def test_limits_above_memory_end_in_an_allocation_error_through_python():
    out = run_attack(
        "import relaxvm as rx\n"
        + RECURSE
        + r"""
vm = rx.VirtualMachine(rec, max_call_depth=10**15, max_stack_registers=10**15)
vm["main"](1)
"""
    )
    out.assert_raises(("VMError", "MemoryError", "VMMemoryError"), "cannot grow")


def test_the_thread_pool_size_is_set_once():
    out = run_attack(
        PRE.replace("assert lib.rvm_vm_create(exe, None, ctypes.byref(vm)) is None", "")
        + OPTIONS
        + r"""
opts.num_threads = 3
vms = [P(), P(), P()]
assert lib.rvm_vm_create(exe, ctypes.byref(opts), ctypes.byref(vms[0])) is None
assert lib.rvm_vm_create(exe, ctypes.byref(opts), ctypes.byref(vms[1])) is None  # the same size
opts.num_threads = 2
err = lib.rvm_vm_create(exe, ctypes.byref(opts), ctypes.byref(vms[2]))
print(lib.rvm_error_get_code(err), b"already runs 3 threads" in lib.rvm_error_message(err))
lib.rvm_error_free(err)
"""
    )
    out.assert_ok("3 True")  # 3: RVM_ERROR_VALUE


def test_vm_options_of_another_headers_layout_are_refused_not_misread():
    """A program compiled against the header before `magic`/`struct_size` passes its 40-byte
    struct (first field max_call_depth): the library reads the first 8 bytes as those two fields
    and refuses it, whatever max_call_depth holds (layers/11: 72, today's size); an init told
    another size writes nothing."""
    out = run_attack(
        PRE
        + r"""
class Old(ctypes.Structure):
    _fields_ = [("max_call_depth", ctypes.c_uint64), ("max_reentry", ctypes.c_uint64),
                ("step_budget", ctypes.c_uint64), ("max_stack_registers", ctypes.c_uint64),
                ("profile", ctypes.c_bool), ("num_threads", ctypes.c_uint32)]
old = Old(100000, 200, 0, 1 << 24, False, 0)
lib.rvm_vm_options_init_sized.argtypes = [P, ctypes.c_size_t]
lib.rvm_vm_options_init_sized.restype = P
other = P()
err = lib.rvm_vm_create(exe, ctypes.byref(old), ctypes.byref(other))
print(lib.rvm_error_get_code(err), b"opts->magic is 0x186a0" in lib.rvm_error_message(err), other.value)
lib.rvm_error_free(err)
# Attack finding layers/11: max_call_depth equal to today's struct size, garbage after the struct.
class Framed(ctypes.Structure):
    _fields_ = [("old", Old), ("after", ctypes.c_uint64 * 8)]
fr = Framed(Old(72, 8, 1000, 1 << 20, False, 0), (ctypes.c_uint64 * 8)(*[0x4141414141414141] * 8))
err = lib.rvm_vm_create(exe, ctypes.byref(fr), ctypes.byref(other))
print(lib.rvm_error_get_code(err), b"expected RVM_VM_OPTIONS_MAGIC" in lib.rvm_error_message(err), other.value)
lib.rvm_error_free(err)
buf = ctypes.create_string_buffer(b"\xa5" * 128)
err = lib.rvm_vm_options_init_sized(buf, ctypes.sizeof(Old))
print(lib.rvm_error_get_code(err), set(buf.raw[:128]) == {0xA5})
lib.rvm_error_free(err)
"""
    )
    out.assert_ok("1 True None\n1 True None\n1 True")  # 1: RVM_ERROR_INVALID_ARGUMENT
