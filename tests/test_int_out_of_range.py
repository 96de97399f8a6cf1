"""An integer past int64 passed to the VM (attack finding other/02): the refusal names the
function, the parameter (or argument) and the path inside a tuple, shows the value (its size in
bits when it is too long to print), and says the range, wherever the value is converted: a
positional or keyword argument, an item of a nested tuple, set_input, a packed function's
argument, an immediate of the builder."""

from __future__ import annotations

import numpy as np
import pytest

import relaxvm as rx
from relaxvm import types as T

RANGE = "does not fit in int64 (-2^63..2^63-1)"
# The functions return one of their inputs: the builder's warning about the other is expected.
pytestmark = pytest.mark.filterwarnings("ignore:function .* is never used:UserWarning")


def raises(message: str, f, *args, **kwargs) -> None:
    """`f(*args, **kwargs)` raises exactly OverflowError with exactly `message`."""
    with pytest.raises(OverflowError) as e:
        f(*args, **kwargs)
    assert type(e.value) is OverflowError and str(e.value) == message


@pytest.fixture
def vm() -> rx.VirtualMachine:
    ib = rx.ExecBuilder()
    with ib.function("main", signature=T.Signature([("x", "any"), ("y", "any")])):
        ib.emit_ret(ib.r(1))
    return rx.VirtualMachine(ib.get())


def test_a_positional_argument(vm) -> None:
    raises(f'parameter "y" of main: int 1180591620717411303424 {RANGE}', vm["main"], 1, 2**70)


def test_an_item_of_a_nested_tuple_names_its_path(vm) -> None:
    raises(f'parameter "y" of main[1][1]: int -18446744073709551616 {RANGE}', vm["main"], 1, (3, [4, -(2**64)]))


def test_a_keyword_argument(vm) -> None:
    raises(f'parameter "y" of main: int 1267650600228229401496703205376 {RANGE}', vm["main"], x=1, y=2**100)


def test_set_input(vm) -> None:
    raises(f'parameter "y" of main[1]: int 36893488147419103232 {RANGE}', vm.set_input, "main", 1, (2, 2**65))


def test_a_value_too_long_to_print_is_shown_by_its_size(vm) -> None:
    # str() of an int past 4300 digits raises in Python: the message must not.
    raises(f'parameter "x" of main: int (33220 bits) {RANGE}', vm["main"], 10**10000, 0)
    raises(f'parameter "y" of main[0]: int (negative, 130 bits) {RANGE}', vm["main"], 0, (-(2**129),))


def test_a_function_without_signature_names_the_parameter_or_the_argument() -> None:
    ib = rx.ExecBuilder()
    with ib.function("f", num_inputs=2, param_names=["a", "b"]):
        ib.emit_ret(ib.r(0))
    with ib.function("g", num_inputs=1):
        ib.emit_ret(ib.r(0))
    vm = rx.VirtualMachine(ib.get())
    raises(f'parameter "b" of f[0]: int 9223372036854775808 {RANGE}', vm["f"], 1, [2**63])
    raises(f"argument 0 of g: int -9223372036854775809 {RANGE}", vm["g"], -(2**63) - 1)


def test_a_packed_function_names_its_argument() -> None:
    copy = rx.get_global_func("vm.builtin.copy")
    raises(f"argument 0 of vm.builtin.copy: uint64 18446744073709551615 {RANGE}", copy, np.uint64(2**64 - 1))
    raises(f"argument 0 of vm.builtin.copy[2]: int 18446744073709551616 {RANGE}", copy, (1, 2, 2**64))


def test_an_immediate_of_the_builder_names_the_call() -> None:
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=1):
        raises(
            f'immediate argument 1 of the call of "vm.builtin.copy": int 18446744073709551616 {RANGE}',
            ib.emit_call,
            "vm.builtin.copy",
            args=[ib.r(0), 2**64],
        )
        ib.emit_ret(ib.r(0))


def test_the_bounds_themselves_convert(vm) -> None:
    assert vm["main"](0, (2**63 - 1, -(2**63))) == (2**63 - 1, -(2**63))


def test_invoke_closure_and_save_function_name_the_argument(vm) -> None:
    raises(f"argument 1 of main: int 1180591620717411303424 {RANGE}", vm.invoke_closure, vm["main"], 1, 2**70)
    raises(f"argument 0 of main[0]: int 1180591620717411303424 {RANGE}", vm.save_function, "main", "s", (2**70,), 1)


def test_an_int64_outside_a_declared_narrower_dtype_names_the_dtype() -> None:
    # In int64 but not in the parameter's declared scalar type: the signature check's refusal.
    ib = rx.ExecBuilder()
    with ib.function("main", signature=T.Signature([("x", "i32"), ("y", "tuple<u8, i64>")], "any")):
        ib.emit_ret(ib.r(0))
    vm = rx.VirtualMachine(ib.get())
    with pytest.raises(rx.VMValueError) as e:
        vm["main"](2**40, (1, 2))
    assert str(e.value) == 'parameter "x" of main: 1099511627776 does not fit in int32 (-2^31..2^31-1)'
    with pytest.raises(rx.VMValueError) as e:
        vm["main"](1, (300, 2))
    assert str(e.value) == 'parameter "y" of main[0]: 300 does not fit in uint8 (0..2^8-1)'
