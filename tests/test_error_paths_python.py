"""Refusals of the Python binding that no other test caused (found by scripts/error-coverage.py):
the builder used out of its scope or with a wrong operand or signature, values the VM cannot
take, devices, dtypes, paths and tensors of the wrong kind, and indexes past a trace. Each test
checks the exception's class and its whole message."""

from __future__ import annotations

import numpy as np
import pytest

import relaxvm as rx


def raises(cls: type[BaseException], message: str, f, *args, **kwargs) -> None:
    """`f(*args, **kwargs)` raises exactly `cls` with exactly `message`."""
    with pytest.raises(cls) as e:
        f(*args, **kwargs)
    assert type(e.value) is cls and str(e.value) == message


def in_function(emit) -> None:
    ib = rx.ExecBuilder()
    with ib.function("f", num_inputs=1):
        emit(ib)


def test_the_builder_outside_and_inside_a_function_scope():
    ib = rx.ExecBuilder()
    raises(
        ValueError,
        "emit should happen in a function scope (with ib.function(...):)",
        ib.emit_call,
        "vm.builtin.copy",
        args=[ib.imm(1)],
        dst=ib.r(0),
    )
    raises(
        ValueError,
        "get() inside a function scope: leave the `with ib.function(...)` block first",
        in_function,
        lambda b: b.get(),
    )
    raises(
        ValueError,
        "import_executable inside a function scope: leave the `with ib.function(...)` block first",
        in_function,
        lambda b: b.import_executable(rx.ExecBuilder().get()),
    )


def test_the_builder_wants_registers_where_results_go():
    raises(
        TypeError,
        "dst must be a register such as ib.r(2), got imm(3)",
        in_function,
        lambda b: b.emit_call("vm.builtin.copy", args=[b.r(0)], dst=b.imm(3)),
    )
    raises(
        TypeError,
        "emit_ret's argument must be a register such as ib.r(2), got imm(3)",
        in_function,
        lambda b: b.emit_ret(b.imm(3)),
    )


def test_a_signature_that_disagrees_with_the_function():
    def function(**kwargs) -> None:
        ib = rx.ExecBuilder()
        with ib.function("f", signature="(x: i64) -> i64", **kwargs):
            pass

    raises(ValueError, "num_inputs=2 but the signature (x: i64) -> i64 has 1 parameters", function, num_inputs=2)
    raises(
        ValueError,
        'param_names=["y"] but the signature (x: i64) -> i64 names ["x"]',
        function,
        num_inputs=1,
        param_names=["y"],
    )


def test_values_the_vm_cannot_take():
    copy = rx.get_global_func("vm.builtin.copy")
    in_range = "does not fit in int64 (-2^63..2^63-1)"
    raises(OverflowError, f"argument 0 of vm.builtin.copy: int 1180591620717411303424 {in_range}", copy, 1 << 70)
    raises(OverflowError, f"argument 0 of vm.builtin.copy: int -9223372036854775809 {in_range}", copy, -(1 << 63) - 1)
    cycle: list = []
    cycle.append(cycle)
    raises(
        ValueError,
        "cannot pass a self-referential list to the VM: it contains itself (at nesting depth 1)",
        copy,
        cycle,
    )
    deep: list = []
    for _ in range(1001):
        deep = [deep]
    raises(RecursionError, "cannot pass tuples or lists nested more than 1000 deep to the VM", copy, deep)
    raises(TypeError, 'register_func("t.not_callable"): int is not callable', rx.register_func, "t.not_callable", 3)


def identity_function() -> rx.Executable:
    ib = rx.ExecBuilder()
    with ib.function("f", num_inputs=1):
        ib.emit_ret(ib.r(0))
    return ib.get()


def test_devices_dtypes_and_paths_of_the_wrong_kind():
    raises(TypeError, "expected a device such as rx.cpu(0), got int", rx.VirtualMachine, identity_function(), 3)
    raises(TypeError, "cannot interpret 3.5 as a dtype", rx.DataType, 3.5)
    raises(TypeError, "cannot interpret 3 as a dtype", rx.tensor, np.zeros(2), dtype=3)
    raises(TypeError, "load_module expects a path (str or os.PathLike), not int", rx.load_module, 3)
    raises(
        ValueError,
        "export_library: fcompile does not apply: relaxvm writes its own binary format and compiles nothing",
        identity_function().export_library,
        "x.so",
        fcompile=1,
    )


def test_keywords_for_a_function_without_parameter_names():
    vm = rx.VirtualMachine(identity_function())
    raises(TypeError, "f() has no parameter names: pass its arguments by position", vm["f"], x=1)


def test_tensors_of_the_wrong_size_dtype_or_device():
    raises(
        ValueError,
        "3 bytes cannot fill a tensor of shape (2,) and dtype float32 (8 bytes)",
        rx.tensor_from_bytes,
        b"\0" * 3,
        (2,),
        "float32",
    )
    bf16 = rx.tensor_from_bytes(b"\0\0", (1,), "bfloat16")
    raises(TypeError, "numpy has no bfloat16 dtype; convert the tensor to float32 first", bf16.numpy)
    raises(
        TypeError, "rx.tensor cannot make bfloat16 tensors from numpy data", rx.tensor, np.zeros(2), dtype="bfloat16"
    )
    t = rx.tensor(np.zeros(2))
    raises(TypeError, "copyto takes a Tensor or a Device, not int", t.copyto, 3)
    raises(BufferError, "cannot export to device type 2: only CPU (1)", t.__dlpack__, dl_device=(2, 0))


def test_a_trace_step_past_the_end():
    trace = rx.VirtualMachine(identity_function()).trace("f", 1)
    raises(IndexError, "step position 5 out of range for a trace of 0 kept steps", trace.__getitem__, 5)


def test_arguments_a_signature_refuses():
    ib = rx.ExecBuilder()
    with ib.function("f", num_inputs=1, signature="(x: i64) -> i64"):
        ib.emit_ret(ib.r(0))
    with ib.function("g", num_inputs=1, signature="(x: dict<{a: i64}>) -> i64"):
        ib.emit_ret(ib.r(0))
    vm = rx.VirtualMachine(ib.get())
    raises(rx.VMTypeError, 'type mismatch: expected int64 for parameter "x" of f, found float 2.5', vm["f"], 2.5)
    raises(
        rx.VMValueError,
        'parameter "x" of g: expected a dict with keys "a"; missing key(s) "a"; unexpected key(s) \'b\'',
        vm["g"],
        {"b": 1},
    )
    raises(rx.VMTypeError, 'type mismatch: expected dict for parameter "x" of g, found int 3', vm["g"], 3)
