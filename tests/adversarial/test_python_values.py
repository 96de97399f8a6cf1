"""Attacks on the conversion of Python values into VM values and back: deep, self-referential
and exponentially shared structures, and sizes beyond memory. Each runs in a child process
with a memory cap (see attack.py): before the fixes each one died by SIGSEGV or SIGABRT, hung,
or ate memory."""

from attack import run_attack

#: Builds `vm` with `id(x) = x` and `deep(n, pair)`: a loop wrapping a tuple `n` times, in
#: `(t,)` or, when `pair` is true, `(t, t)` (sharing each level twice: 2**n leaves unfolded).
PROGRAMS = """
import relaxvm as rx
ib = rx.ExecBuilder()
with ib.function("id", num_inputs=1):
    ib.emit_ret(ib.r(0))
for name, width in (("deep", 1), ("shared", 2)):
    with ib.function(name, num_inputs=1):
        ib.emit_call("vm.builtin.make_tuple", args=[], dst=ib.r(1))
        ib.emit_call("vm.builtin.int.gt", args=[ib.r(0), ib.imm(0)], dst=ib.r(2))
        ib.emit_if(ib.r(2), 4)
        ib.emit_call("vm.builtin.make_tuple", args=[ib.r(1)] * width, dst=ib.r(1))
        ib.emit_call("vm.builtin.int.sub", args=[ib.r(0), ib.imm(1)], dst=ib.r(0))
        ib.emit_goto(-4)
        ib.emit_ret(ib.r(1))
vm = rx.VirtualMachine(ib.get())
"""


def test_a_deeply_nested_list_argument_is_a_recursion_error():
    run_attack(
        PROGRAMS
        + """
x = []
for _ in range(200_000):
    x = [x]
vm["id"](x)
"""
    ).assert_raises("RecursionError", "nested more than 1000 deep")


def test_nesting_up_to_the_limit_round_trips():
    run_attack(
        PROGRAMS
        + """
x = ()
for _ in range(999):
    x = (x,)
y, depth = vm["id"](x), 0
while y:
    (y,) = y
    depth += 1
print(depth)
"""
    ).assert_ok("999")


def test_self_referential_lists_and_tuples_are_value_errors():
    run_attack(
        PROGRAMS
        + """
x = [1]
x.append(x)
vm["id"](x)
"""
    ).assert_raises("ValueError", "contains itself")
    run_attack(
        PROGRAMS
        + """
x = [1]
x.append((2, [x]))
vm["id"]((x,))
"""
    ).assert_raises("ValueError", "self-referential list")


def test_the_same_list_twice_is_not_a_cycle():
    run_attack(
        PROGRAMS
        + """
inner = [1, 2]
print(vm["id"]([inner, inner, (inner,)]))
"""
    ).assert_ok("((1, 2), (1, 2), ((1, 2),))")


def test_a_20000_deep_tuple_returned_by_the_vm_converts_and_drops():
    run_attack(
        PROGRAMS
        + """
t = vm["deep"](20_000)
depth = 0
while t:
    (t,) = t
    depth += 1
print(depth)
"""
    ).assert_ok("20000")


def test_a_tuple_shared_2_to_the_100_ways_converts_in_linear_time():
    # Unfolded it has 2**100 leaves; each shared tuple converts once and is shared in Python too.
    run_attack(
        PROGRAMS
        + """
t = vm["shared"](100)
assert t[0] is t[1]
n = 0
while t:
    t = t[0]
    n += 1
print(n)
""",
        timeout=30,
    ).assert_ok("100")


def test_a_shape_of_2_to_the_62_dimensions_is_a_value_error():
    run_attack("import relaxvm as rx; rx.Shape(range(2**62))").assert_raises("ValueError", "at most 1048576 dimensions")
    run_attack("import relaxvm as rx; print(len(rx.Shape(range(1000))))").assert_ok("1000")


def test_the_text_of_a_constant_too_large_for_memory_is_a_memory_error():
    # 512 MiB of data is 1 GiB of hex: past the cap, a MemoryError instead of an abort.
    code = """
import numpy as np, relaxvm as rx
ib = rx.ExecBuilder()
c = ib.convert_constant(np.zeros(1 << 26, "float64"))
with ib.function("g", num_inputs=0):
    ib.emit_call("vm.builtin.make_tuple", args=[c], dst=ib.r(0))
    ib.emit_ret(ib.r(0))
exe = ib.get()
exe.{method}()
"""
    for method in ("as_text", "as_python"):
        run_attack(code.replace("{method}", method), memory=3 << 29).assert_raises(
            ("MemoryError", "VMMemoryError"), "out of memory"
        )
