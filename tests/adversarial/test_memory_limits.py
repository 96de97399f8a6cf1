"""Allocations the memory refuses, in a child process with a memory cap (see attack.py): the
VM's register stack growing past what the allocator gives (limits set above the machine) is a
VMMemoryError naming what could not grow, never an abort."""

from attack import run_attack

#: `deep(x)` recurses without end; each frame holds 2^20 registers (16 MiB), so the register
#: stack outgrows the 1 GiB cap after a few dozen frames, long before the limits set here.
DEEP = """
import relaxvm as rx
ib = rx.ExecBuilder()
with ib.function("deep", num_inputs=1):
    ib.emit_call("vm.builtin.copy", args=[ib.r(0)], dst=ib.r((1 << 20) - 1))
    ib.emit_call("deep", args=[ib.r(0)], dst=ib.r(1))
    ib.emit_ret(ib.r(1))
vm = rx.VirtualMachine(ib.get(), max_stack_registers=1 << 40, max_call_depth=1 << 30)
vm["deep"](1)
"""


def test_a_register_stack_the_allocator_cannot_grow_is_a_memory_error():
    run_attack(DEEP, memory=1 << 30).assert_raises(
        "VMMemoryError", r"cannot allocate \d+ bytes: the register stack cannot grow \(out of memory\)"
    )
