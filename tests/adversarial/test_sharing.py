"""Exponential sharing, inbound (#31 class 8): a Python value whose objects are shared, such as
`v = (v, v)` nested 40 deep (41 objects, 2**40 leaves unfolded), was converted into 2**40 VM
values and aborted. Conversion is linear in the distinct objects: an object met again becomes
the same shared VM tuple, for untyped arguments, typed (signature) arguments and typed results.
Each runs in a child process with a memory cap and a timeout (see attack.py)."""

import pytest
from attack import run_attack

#: `id(x) = x` untyped, and `typed(x)` with the signature given as SIG.
PROGRAMS = """
import relaxvm as rx
ib = rx.ExecBuilder()
with ib.function("id", num_inputs=1):
    ib.emit_ret(ib.r(0))
with ib.function("typed", signature=SIG):
    ib.emit_ret(ib.r(0))
vm = rx.VirtualMachine(ib.get())

def depth_and_sharing(r, n):
    # Walks the first items down n levels, checking each level's two items are one object
    # (but for the leaves: a float converts to a new Python float each time).
    shared = True
    for _ in range(n):
        shared = shared and (r[0] is r[1] or not isinstance(r[0], (tuple, list)))
        r = r[0]
    return shared, r
"""

NESTINGS = {
    "tuples": "v = (v, v)",
    "lists": "v = [v, v]",
    "mixed": "v = [v, v] if i % 2 else (v, v)",
}


@pytest.mark.parametrize("nesting", NESTINGS)
def test_a_value_shared_2_to_the_40_ways_converts_in_linear_time(nesting):
    run_attack(
        "SIG = '(x: any) -> any'\n"
        + PROGRAMS
        + f"""
v = 1
for i in range(40):
    {NESTINGS[nesting]}
r = vm["id"](v)
print(depth_and_sharing(r, 40))
""",
        timeout=30,
    ).assert_ok("(True, 1)")


def test_a_shared_value_through_a_typed_signature_converts_in_linear_time():
    # list<list<...<f64>>> 40 deep: the argument's ints are coerced to floats once per shared
    # object, and the result comes back as shared lists.
    run_attack(
        "SIG = '(x: ' + 'list<' * 40 + 'f64' + '>' * 40 + ') -> ' + 'list<' * 40 + 'f64' + '>' * 40\n"
        + PROGRAMS
        + """
v = 1
for i in range(40):
    v = [v, v] if i % 2 else (v, v)
r = vm["typed"](v)
print(type(r).__name__, depth_and_sharing(r, 40))
""",
        timeout=30,
    ).assert_ok("list (True, 1.0)")


def test_a_shared_value_in_a_typed_dict_converts_in_linear_time():
    sig = "(x: dict<{a: " + "list<" * 39 + "i64" + ">" * 39 + ", b: any}>) -> any"
    run_attack(
        f"SIG = {sig!r}\n"
        + PROGRAMS
        + """
v = 1
for i in range(39):
    v = (v, v)
r = vm["typed"]({"a": v, "b": v})
print(depth_and_sharing(r[0], 39), depth_and_sharing(r[1], 39))
""",
        timeout=30,
    ).assert_ok("(True, 1) (True, 1)")


def test_cycles_and_too_deep_values_are_still_refused_with_sharing():
    run_attack(
        "SIG = '(x: any) -> any'\n"
        + PROGRAMS
        + """
a = [1]
shared = (a, a)
a.append(shared)
try:
    vm["id"](shared)
except ValueError as e:
    print("cycle:", "self-referential" in str(e) and "contains itself" in str(e))
v = 1
for i in range(2000):
    v = (v, v)
try:
    vm["id"](v)
except RecursionError as e:
    print("deep:", "nested more than 1000 deep" in str(e))
""",
        timeout=30,
    ).assert_ok("cycle: True\ndeep: True")


#: `show(fmt, x)` prints x with relax.run.print; `check(x)` fails relax.run.assert_op on it.
RENDERERS = """
import numpy as np
import relaxvm as rx
ib = rx.ExecBuilder()
with ib.function("show", num_inputs=2):
    ib.emit_call("relax.run.print", args=[ib.r(0), ib.r(1)], dst=None)
    ib.emit_ret(ib.r(1))
with ib.function("check", num_inputs=1):
    ib.emit_call("relax.run.assert_op", args=[False, "{}", ib.r(0)], dst=None)
    ib.emit_ret(ib.r(0))
vm = rx.VirtualMachine(ib.get())
"""


def test_printing_a_value_shared_2_to_the_40_ways_is_bounded():
    # The text would be terabytes: the rendering stops at its budget with an error, in time
    # linear in that budget (each distinct short tuple is rendered once).
    run_attack(
        RENDERERS
        + """
v = np.array([1.5, 2.0], "float32")
for i in range(40):
    v = (v, v)
for f, args in (("show", ("{}", v)), ("check", (v,))):
    try:
        vm[f](*args)
    except ValueError as e:
        print(f, "bytes of text" in str(e))
""",
        timeout=60,
    ).assert_ok("show True\ncheck True")


def test_printing_a_shared_value_that_fits_prints_every_item():
    o = run_attack(
        RENDERERS
        + """
v = 7
for i in range(16):
    v = (v, v)
vm["show"]("{}", v)
""",
        timeout=60,
    )
    o.assert_ok()
    assert o.stdout.count("7") == 1 << 16


def test_set_input_converts_a_shared_value_once():
    # TVM's set_input rule (numbers become 0-d tensors, relaxvm::tvm_inputs) walked every place
    # of the value: 2**40 steps for `v = (v, v)` nested 40 deep. Each shared tuple is converted
    # once, and the result keeps the sharing.
    run_attack(
        "SIG = '(x: any) -> any'\n"
        + PROGRAMS
        + """
v = 1
for i in range(40):
    v = (v, v)
vm.set_input("id", v)
vm.invoke_stateful("id")
r = vm.get_outputs("id")
shared, leaf = depth_and_sharing(r, 40)
print(shared, type(leaf).__name__, int(leaf.numpy()), leaf.dtype)
""",
        timeout=30,
    ).assert_ok("True Tensor 1 int32")
