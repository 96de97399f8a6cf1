"""Allocations the memory refuses, in a child process with a memory cap (see attack.py): the
VM's register and frame stacks, a bytes object, a shape's dimensions and a file's pages growing
past what the allocator gives (limits set above the machine) are a MemoryError naming what could
not be allocated, never an abort."""

import re

import pytest
from attack import run_attack

#: Lowers the process's address-space cap to what it maps now plus `extra` bytes, so that the
#: allocation under test fails whatever the interpreter and its libraries take.
CAP_AT = """
import resource
def cap_at(extra):
    with open("/proc/self/status") as f:
        size = next(int(line.split()[1]) << 10 for line in f if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (size + extra, size + extra))
"""

#: `deep(x)` recurses without end. With `REGS` registers per frame, the register stack (16
#: bytes a register) or the frame stack (32 bytes a frame) outgrows the 64 MiB left to it long
#: before the limits set here.
DEEP = """
import relaxvm as rx
cap_at(64 << 20)
ib = rx.ExecBuilder()
with ib.function("deep", num_inputs=1):
    ib.emit_call("vm.builtin.copy", args=[ib.r(0)], dst=ib.r(REGS - 1))
    ib.emit_call("deep", args=[ib.r(0)], dst=ib.r(0))
    ib.emit_ret(ib.r(0))
vm = rx.VirtualMachine(ib.get(), max_stack_registers=1 << 40, max_call_depth=1 << 40)
vm["deep"](1)
"""


@pytest.mark.parametrize(
    ("regs", "message"),
    [
        (1 << 20, "the register stack cannot grow (out of memory)"),
        (1, "the frame stack cannot grow (out of memory)"),
    ],
)
def test_a_stack_the_allocator_cannot_grow_is_a_memory_error(regs, message):
    run_attack(CAP_AT + f"REGS = {regs}\n" + DEEP).assert_raises(
        "VMMemoryError", r"cannot allocate \d+ bytes: " + re.escape(message)
    )


def test_a_bytes_object_python_cannot_allocate_is_a_memory_error():
    run_attack(
        CAP_AT
        + """
import numpy as np, relaxvm as rx
t = rx.tensor(np.ones(4 << 20, np.float32))
cap_at(8 << 20)
t.tobytes()
"""
    ).assert_raises("MemoryError", r"^cannot allocate a bytes object of 16777216 bytes$")


def test_a_file_too_large_for_the_memory_left_is_a_memory_error(tmp_path):
    # A valid header, then zeros to 1 GiB (a sparse file: no disk is written).
    path = tmp_path / "big.rvx"
    run_attack(
        CAP_AT
        + f"""
import os, relaxvm as rx
ib = rx.ExecBuilder()
with ib.function("f", num_inputs=1):
    ib.emit_ret(ib.r(0))
ib.get().save({str(path)!r})
os.truncate({str(path)!r}, 1 << 30)
cap_at(256 << 20)
rx.load_executable({str(path)!r})
"""
    ).assert_raises(
        "VMMemoryError", r"cannot allocate 1073741824 bytes: cannot map read-only pages: Cannot allocate memory"
    )


def test_a_shape_too_long_for_the_memory_left_is_a_memory_error():
    # 2^20 dimensions (8 MiB) with 4 MiB to spare: the dimensions' vector cannot grow.
    run_attack(
        CAP_AT
        + """
import relaxvm as rx
dims = [1] * (1 << 20)
cap_at(4 << 20)
rx.Shape(dims)
"""
    ).assert_raises("MemoryError", r"^out of memory reading a shape$")


def test_a_trace_array_larger_than_the_memory_left_is_a_memory_error(tmp_path):
    # 64 MiB of zeros deflate to some 64 KiB: within the load limit given, not within the
    # 16 MiB of memory left.
    import io
    import json
    import zipfile

    import numpy as np

    n = 64 << 20
    meta = {
        "format": "relaxvm-trace",
        "version": 1,
        "function": "main",
        "skipped": 0,
        "max_bytes": 1,
        "steps": [],
        "result": {"tensor": {"array": "z", "dtype": "uint8", "shape": [n]}},
    }
    buf = io.BytesIO()
    np.save(buf, np.frombuffer(json.dumps(meta).encode(), np.uint8))
    path = tmp_path / "t.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("__trace__.npy", buf.getvalue())
        zeros = io.BytesIO()
        np.save(zeros, np.zeros(n, np.uint8))
        z.writestr("z.npy", zeros.getvalue())
    run_attack(
        CAP_AT
        + f"""
import relaxvm as rx
cap_at(16 << 20)
rx.Trace.load({str(path)!r}, limit=1 << 30)
"""
    ).assert_raises(
        "VMMemoryError", r'^cannot allocate 67108992 bytes: cannot read trace .*/t\.npz: array "z": out of memory$'
    )
