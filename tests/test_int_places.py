"""Every int an entry point reads goes through one extractor (python/src/int_arg.rs, attack
finding other/11): out of range, it is an OverflowError naming the place, the value and the
range of the type read; not an int, a TypeError naming the place. An int past int64 at a
parameter declared i8..u64 is refused as one past the declared type within int64 is (finding
other/13): VMValueError, the declared type's range."""

from __future__ import annotations

import pickle

import pytest

import relaxvm as rx

pytestmark = pytest.mark.filterwarnings("ignore:function .* is never used:UserWarning")
BIG = 2**64
I64 = "does not fit in int64 (-2^63..2^63-1)"


def raises(kind: type[Exception], message: str, f, *args, **kwargs) -> None:
    """`f(*args, **kwargs)` raises exactly `kind` with exactly `message`."""
    with pytest.raises(kind) as e:
        f(*args, **kwargs)
    assert type(e.value) is kind and str(e.value) == message


@pytest.fixture
def exe() -> rx.Executable:
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=1):
        ib.emit_ret(ib.r(0))
    return ib.get()


def test_device_ids(exe) -> None:
    raises(
        OverflowError,
        "device id: int 18446744073709551616 does not fit in int32 (-2^31..2^31-1)",
        rx.device,
        "cpu",
        BIG,
    )
    raises(OverflowError, "device id: int 2147483648 does not fit in int32 (-2^31..2^31-1)", rx.Device, "cpu", 2**31)
    raises(TypeError, "device id: 'str' object cannot be interpreted as an integer", rx.device, "cpu", "0")
    assert rx.device("cpu", 1) == rx.Device("cpu", 1)


def test_virtual_machine_limits(exe) -> None:
    for name in ("max_call_depth", "max_reentry", "step_budget", "max_stack_registers"):
        raises(
            OverflowError,
            f"VirtualMachine {name}: int 18446744073709551616 {I64}",
            rx.VirtualMachine,
            exe,
            **{name: BIG},
        )
    raises(
        TypeError,
        "VirtualMachine step_budget: 'float' object cannot be interpreted as an integer",
        rx.VirtualMachine,
        exe,
        step_budget=1.5,
    )
    assert rx.VirtualMachine(exe, step_budget=10, max_call_depth=None)["main"](3) == 3


def test_builder_registers_constants_and_offsets() -> None:
    ib = rx.ExecBuilder()
    u32 = "does not fit in uint32 (0..2^32-1)"
    raises(OverflowError, f"ExecBuilder.r: int 1099511627776 {u32}", ib.r, 2**40)
    raises(OverflowError, f"ExecBuilder.r: int -1 {u32}", ib.r, -1)
    raises(OverflowError, f"ExecBuilder.c: int 18446744073709551616 {u32}", ib.c, BIG)
    raises(OverflowError, f"ExecBuilder.function num_inputs: int -1 {u32}", ib.function, "f", num_inputs=-1)
    with ib.function("f", num_inputs=1):
        raises(OverflowError, f"ExecBuilder.emit_goto offset: int 1180591620717411303424 {I64}", ib.emit_goto, 2**70)
        raises(
            OverflowError, f"ExecBuilder.emit_if false_offset: int 18446744073709551616 {I64}", ib.emit_if, ib.r(0), BIG
        )
        raises(OverflowError, f"emit_ret's argument (a register index): int 4294967296 {u32}", ib.emit_ret, 2**32)
        ib.emit_ret(ib.r(0))
    assert rx.VirtualMachine(ib.get())["f"](5) == 5


def test_a_callbacks_result_names_the_callback() -> None:
    rx.register_func("test.int_places.big", lambda: (1, (BIG,)), override=True)
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=0):
        ib.emit_call("test.int_places.big", args=[], dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    with pytest.raises(OverflowError) as e:
        rx.VirtualMachine(ib.get())["main"]()
    assert f"result of test.int_places.big[1][0]: int 18446744073709551616 {I64}" in str(e.value)


def test_indices_and_sizes() -> None:
    raises(OverflowError, f"shape index: int 18446744073709551616 {I64}", rx.Shape([1, 2]).__getitem__, BIG)
    assert rx.Shape([1, 2])[-1] == 2
    t = rx.tensor([0, 1, 2])
    raises(OverflowError, f"Tensor.__reduce_ex__ protocol: int 18446744073709551616 {I64}", t.__reduce_ex__, BIG)
    assert pickle.loads(pickle.dumps(t)).numpy().tolist() == [0, 1, 2]
    u64 = "does not fit in uint64 (0..2^64-1)"
    raises(OverflowError, f"load_executable max_input_size: int -1 {u64}", rx.load_executable, b"", max_input_size=-1)
    raises(
        OverflowError,
        f"load_module max_input_size: int 18446744073709551616 {u64}",
        rx.load_module,
        "x.so",
        max_input_size=BIG,
    )
    raises(OverflowError, f"Trace.load limit: int -1 {u64}", rx.Trace.load, "x.trace", limit=-1)


def test_past_int64_at_a_declared_int_parameter_is_refused_against_the_declared_type() -> None:
    ib = rx.ExecBuilder()
    with ib.function("f", signature="(a: i32, b: tuple<i64, i8>, c: u64) -> i32"):
        ib.emit_ret(ib.r(0))
    f = rx.VirtualMachine(ib.get())["f"]
    i32 = "does not fit in int32 (-2^31..2^31-1)"
    raises(rx.VMValueError, f'parameter "a" of f: 1099511627776 {i32}', f, 2**40, (1, 1), 0)
    raises(rx.VMValueError, f'parameter "a" of f: 18446744073709551616 {i32}', f, BIG, (1, 1), 0)
    raises(rx.VMValueError, f'parameter "a" of f: (negative, 401 bits) {i32}', f, -(2**400), (1, 1), 0)
    raises(rx.VMValueError, f'parameter "b" of f[0]: 18446744073709551616 {I64}', f, 1, (BIG, 1), 0)
    raises(rx.VMValueError, 'parameter "b" of f[1]: 300 does not fit in int8 (-2^7..2^7-1)', f, 1, (1, 300), 0)
    raises(
        rx.VMValueError,
        'parameter "b" of f[1]: 1180591620717411303424 does not fit in int8 (-2^7..2^7-1)',
        f,
        1,
        (1, 2**70),
        0,
    )
    u64 = "does not fit in uint64 (0..2^63-1, the VM's ints being int64)"
    raises(rx.VMValueError, f'parameter "c" of f: -1 {u64}', f, 1, (1, 1), -1)
    raises(rx.VMValueError, f'parameter "c" of f: 9223372036854775808 {u64}', f, 1, (1, 1), 2**63)
    assert f(7, (1, 1), 2**63 - 1) == 7
