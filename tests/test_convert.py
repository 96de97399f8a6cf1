"""Every conversion between Python and VM values, both ways."""

import numpy as np
import pytest

import relaxvm as rx
from conftest import identity_vm


@pytest.fixture(scope="module")
def ident():
    return identity_vm()["id"]


@pytest.mark.parametrize(
    "value, expected_type",
    [
        (None, type(None)),
        (True, bool),
        (False, bool),
        (0, int),
        (-(2**63), int),
        (2**63 - 1, int),
        (1.5, float),
        (float("inf"), float),
        ("", str),
        ("héllo ✓", str),
    ],
)
def test_scalars_round_trip(ident, value, expected_type):
    out = ident(value)
    assert type(out) is expected_type
    assert out == value


def test_nan_round_trips(ident):
    assert np.isnan(ident(float("nan")))


@pytest.mark.parametrize(
    "value, expected",
    [
        (np.int32(7), 7),
        (np.uint8(255), 255),
        (np.int64(-3), -3),
        (np.float32(0.5), 0.5),
        (np.float64(2.25), 2.25),
        (np.bool_(True), True),
    ],
)
def test_numpy_scalars_become_python_scalars(ident, value, expected):
    out = ident(value)
    assert out == expected
    assert type(out) is type(expected)


def test_int_overflow_is_an_error(ident):
    with pytest.raises(OverflowError):
        ident(2**63)


def test_shape_round_trip(ident):
    out = ident(rx.Shape([32, 16]))
    assert isinstance(out, rx.Shape)
    assert out == (32, 16)


def test_dtype_and_device_round_trip(ident):
    d = ident(rx.DataType("float16"))
    assert isinstance(d, rx.DataType) and d == "float16"
    dev = ident(rx.cpu(2))
    assert isinstance(dev, rx.Device) and dev == rx.cpu(2)


@pytest.mark.parametrize("container", [tuple, list])
def test_tuples_and_lists_become_tuples(ident, container):
    value = container([1, 2.0, "x", None, (True, [3])])
    out = ident(value)
    assert out == (1, 2.0, "x", None, (True, (3,)))
    assert type(out) is tuple


def test_tensor_round_trip_keeps_identity_of_storage(ident):
    t = rx.tensor(np.arange(6, dtype="int32").reshape(2, 3))
    out = ident(t)
    assert isinstance(out, rx.Tensor)
    assert out.same_storage(t)


def test_numpy_array_becomes_tensor(ident):
    a = np.arange(4, dtype="float32")
    out = ident(a)
    assert isinstance(out, rx.Tensor)
    assert out.dtype == "float32" and out.shape == (4,)
    np.testing.assert_array_equal(out.numpy(), a)


def test_callable_goes_in_as_function_and_comes_back_as_itself(ident):
    def f(x):
        return x + 1

    out = ident(f)
    assert out is f  # one object per function, as per tensor (tests/test_tensor_protocols.py)
    assert out(41) == 42


def test_closure_round_trips(ident):
    clo = rx.get_global_func("test.vm.add_scalar")
    out = ident(clo)
    assert isinstance(out, rx.Closure)
    assert out(2, 3) == 5


def test_unsupported_object_is_a_type_error(ident):
    with pytest.raises(TypeError, match="cannot pass a object"):
        ident(object())


def test_unsupported_numpy_dtype_is_a_type_error(ident):
    with pytest.raises(TypeError, match="no relaxvm equivalent"):
        ident(np.zeros(2, dtype=np.complex64))


def test_opaque_values_round_trip():
    # vm.builtin.alloc_storage returns storage, which Python sees as an opaque rx.Object.
    ib = rx.ExecBuilder()
    with ib.function("alloc", num_inputs=0):
        ib.emit_call(
            "vm.builtin.alloc_storage",
            args=[ib.vm_state(), (16,), ib.convert_constant(0), rx.DataType("uint8"), "global"],
            dst=ib.r(0),
        )
        ib.emit_ret(ib.r(0))
    with ib.function("view", num_inputs=1):
        ib.emit_call("vm.builtin.alloc_tensor", args=[ib.r(0), ib.imm(0), (4,), rx.DataType("float32")], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    vm = rx.VirtualMachine(ib.get())
    storage = vm["alloc"]()
    assert isinstance(storage, rx.Object)
    assert storage.type_name == "storage"
    assert "storage" in repr(storage)
    t = vm["view"](storage)
    assert t.shape == (4,) and t.dtype == "float32"


def test_registered_function_sees_converted_values(unique_name):
    seen = []
    name = unique_name()

    @rx.register_func(name)
    def record(*args):
        seen.append(args)
        return None

    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=1):
        ib.emit_call(name, args=[ib.r(0), ib.imm(3), 1.5, "s", (2, 3), rx.DataType("int8"), ib.void_arg()], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    vm = rx.VirtualMachine(ib.get())
    assert vm["main"](np.ones(2)) is None
    (args,) = seen
    t, i, f, s, shape, dt, none = args
    assert isinstance(t, rx.Tensor) and t.shape == (2,)
    assert (i, f, s, none) == (3, 1.5, "s", None)
    assert isinstance(shape, rx.Shape) and shape == (2, 3)
    assert isinstance(dt, rx.DataType) and dt == "int8"


@pytest.mark.parametrize(
    "ret, check",
    [
        (np.arange(3.0), lambda r: isinstance(r, rx.Tensor) and r.numpy().tolist() == [0.0, 1.0, 2.0]),
        ((1, "a"), lambda r: r == (1, "a")),
        ([1, [2]], lambda r: r == (1, (2,))),
        (None, lambda r: r is None),
        (np.float32(2.5), lambda r: r == 2.5),
        (rx.Shape([1]), lambda r: r == (1,)),
    ],
)
def test_registered_function_results_convert(unique_name, ret, check):
    name = unique_name()
    rx.register_func(name, lambda: ret)
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=0):
        ib.emit_call(name, dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    assert check(rx.VirtualMachine(ib.get())["main"]())


def test_registered_function_returning_unconvertible_value_raises(unique_name):
    name = unique_name()
    rx.register_func(name, lambda: object())
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=0):
        ib.emit_call(name, dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    with pytest.raises(TypeError, match="cannot pass"):
        rx.VirtualMachine(ib.get())["main"]()


def test_python_callable_argument_is_called_by_the_vm():
    ib = rx.ExecBuilder()
    with ib.function("apply", num_inputs=2):
        ib.emit_call("vm.builtin.invoke_closure", args=[ib.vm_state(), ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    vm = rx.VirtualMachine(ib.get())
    assert vm["apply"](lambda x: x * 10, 4) == 40
