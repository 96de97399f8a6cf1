"""Refusals of the Python binding that no other test caused (scripts/error-coverage.py): VM
options, set_input and time_evaluator arguments, invoke_closure, the builder's operands, values
and shapes of the wrong kind, DLPack imports the VM cannot take, and the call_py_func builtin
called with the wrong arguments. Each test checks the exception's class and its whole message."""

from __future__ import annotations

import re

import numpy as np
import pytest

import relaxvm as rx


def raises(cls: type[BaseException], message: str, f, *args, **kwargs) -> None:
    """`f(*args, **kwargs)` raises exactly `cls` with exactly `message`."""
    with pytest.raises(cls) as e:
        f(*args, **kwargs)
    assert type(e.value) is cls and str(e.value) == message


def identity(**function_kwargs) -> rx.Executable:
    """`f(x) = x`, built with `function_kwargs` (num_inputs=1 unless a signature says)."""
    ib = rx.ExecBuilder()
    with ib.function("f", **(function_kwargs or {"num_inputs": 1})):
        ib.emit_ret(ib.r(0))
    return ib.get()


# Each message whole (scripts/error-coverage-sites.py finds each option's text here).
@pytest.mark.parametrize(
    "option, message",
    [
        ("max_call_depth", "max_call_depth must be at least 1, found 0"),
        ("max_reentry", "max_reentry must be at least 1, found 0"),
        ("step_budget", "step_budget must be at least 1, found 0"),
        ("max_stack_registers", "max_stack_registers must be at least 1, found 0"),
    ],
)
def test_vm_limits_below_one(option, message):
    raises(ValueError, message, rx.VirtualMachine, identity(), **{option: 0})


def test_a_branch_condition_must_be_a_register():
    ib = rx.ExecBuilder()
    with ib.function("f", num_inputs=1):
        raises(
            TypeError, "emit_if's condition must be a register such as ib.r(2), got imm(1)", ib.emit_if, ib.imm(1), 2
        )
        raises(TypeError, "emit_if's condition must be a register such as ib.r(2)", ib.emit_if, "x", 2)
        # dst: an object that is no Arg (the branch after the Arg one, errs/02).
        add = ("vm.builtin.int.add", [ib.r(0), ib.r(0)])
        raises(TypeError, "dst must be a register such as ib.r(2)", lambda: ib.emit_call(*add, dst="x"))
        ib.emit_ret(ib.r(0))


def test_a_vm_on_several_devices():
    raises(
        ValueError,
        "relaxvm runs a VM on one device, but 2 were given ([cpu(0), cpu(1)]): pass one CPU device "
        "(programs placing tensors on several virtual devices are not supported)",
        rx.VirtualMachine,
        identity(),
        [rx.cpu(0), rx.cpu(1)],
    )


def test_set_input_of_an_int_past_int32():
    vm = rx.VirtualMachine(identity())
    raises(
        OverflowError,
        "set_input: 4294967296 does not fit in int32 (what TVM makes of an int)",
        vm.set_input,
        "f",
        1 << 32,
    )
    raises(
        OverflowError,
        "set_input: -2147483649 does not fit in int32 (what TVM makes of an int)",
        vm.set_input,
        "f",
        (-(1 << 31) - 1,),
    )


def test_invoke_closure_of_something_else():
    vm = rx.VirtualMachine(identity())
    raises(TypeError, "invoke_closure expects a closure, got int", vm.invoke_closure, 3)
    raises(TypeError, "invoke_closure expects a closure, got str", vm.invoke_closure, "f")


def test_time_evaluator_arguments():
    vm = rx.VirtualMachine(identity())
    message = "number, repeat and repeats_to_cooldown must be at least 1"
    for zero in ("number", "repeat", "repeats_to_cooldown"):
        raises(ValueError, message, vm.time_evaluator, "f", **{zero: 0})
    raises(
        ValueError,
        'f_preproc="cache_flush_cpu_non_first_arg" is not supported: relaxvm runs no preprocessing function '
        "between repeats",
        vm.time_evaluator,
        "f",
        f_preproc="cache_flush_cpu_non_first_arg",
    )
    stateful = vm.time_evaluator("invoke_stateful", number=1)
    expected = (
        "a time_evaluator of invoke_stateful takes one argument, the function's name; "
        "got {} positional and {} keyword arguments"
    )
    raises(TypeError, expected.format(2, 0), stateful, "f", "g")
    raises(TypeError, expected.format(0, 1), stateful, func_name="f")


@pytest.mark.filterwarnings("ignore:function .f.. input %1 is never used")
def test_a_missing_argument_names_the_parameter():
    vm = rx.VirtualMachine(identity(num_inputs=2, param_names=["a", "b"]))
    raises(TypeError, "f() missing argument 'b'", vm["f"], a=1)
    typed = rx.VirtualMachine(identity(signature="(a: i64, b: f32) -> i64"))
    raises(TypeError, "f() missing argument 'b' (f32)", typed["f"], a=1)


def test_floats_for_an_integer_tensor_parameter():
    vm = rx.VirtualMachine(identity(signature="(x: tensor<[2], i32>) -> any"))
    raises(
        rx.VMTypeError,
        'type mismatch: expected tensor of int32 for parameter "x" of f, found list (floats, which would be truncated)',
        vm["f"],
        [1.5, 2.0],
    )


def test_builder_operands_of_the_wrong_kind():
    ib = rx.ExecBuilder()
    with pytest.raises(OverflowError) as e, ib.function("f", num_inputs=1):
        ib.emit_ret(1 << 40)
    assert str(e.value) == (
        "emit_ret's argument (a register index): int 1099511627776 does not fit in uint32 (0..2^32-1)"
    )
    ib = rx.ExecBuilder()
    with pytest.raises(TypeError) as e, ib.function("f", num_inputs=1):
        ib.emit_call("vm.builtin.copy", args=[[1, 2]], dst=ib.r(0))
    assert str(e.value) == "a list is not an instruction argument: use a tuple for a shape, or ib.convert_constant"


def test_values_and_shapes_the_vm_cannot_take():
    copy = rx.get_global_func("vm.builtin.copy")
    raises(
        TypeError,
        "cannot pass a object to the VM: expected None, bool, int, float, str, a tensor (rx.Tensor, numpy array or "
        "DLPack object), rx.Shape, rx.DataType, rx.Device, a tuple or list of those, or a callable",
        copy,
        object(),
    )
    raises(TypeError, "expected a shape (a sequence of ints), got float", rx.Shape, 2.5)
    raises(ValueError, "a shape may have at most 1048576 dimensions", rx.Shape, range((1 << 20) + 1))
    raises(TypeError, "numpy dtype <U1 has no relaxvm equivalent", rx.tensor, np.array(["a"]))


class Exported:
    """Something that only speaks DLPack, for a numpy array and a claimed device."""

    def __init__(self, array: np.ndarray, device: tuple[int, int] = (1, 0)) -> None:
        self.array, self.device = array, device

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.device


def test_dlpack_tensors_the_vm_cannot_take():
    raises(
        BufferError,
        "cannot import a tensor from device type 2: only CPU (1) is supported",
        rx.from_dlpack,
        Exported(np.zeros(2, np.float32), (2, 0)),
    )
    reversed_ = np.arange(4, dtype=np.float32)[::-1]
    raises(
        BufferError,
        "DLPack strides[0] is -1: relaxvm takes tensors whose strides are all >= 0",
        rx.from_dlpack,
        Exported(reversed_),
    )


def test_call_py_func_with_the_wrong_arguments():
    call = rx.get_global_func("vm.builtin.call_py_func")
    with pytest.raises(rx.VMError) as e:
        call(("f", ()), 2)
    assert re.fullmatch(
        r"vm.builtin.call_py_func: expected 1 \(a tuple of the name and the arguments\) arguments?, got 2", str(e.value)
    ), str(e.value)
    raises(
        rx.VMValueError,
        "vm.builtin.call_py_func: expected a tuple (name, arguments), got 3 items",
        call,
        ("f", (), 3),
    )
