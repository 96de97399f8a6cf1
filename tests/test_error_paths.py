"""Error paths a user can reach that no other test caused: each test causes one and checks the
exception's class and the message's fields (what was expected, what was found, where)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import relaxvm as rx


def one_function_vm() -> rx.VirtualMachine:
    ib = rx.ExecBuilder()
    with ib.function("one", num_inputs=0):
        ib.emit_call("vm.builtin.int.add", args=[ib.imm(0), ib.imm(1)], dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    return rx.VirtualMachine(ib.get())


def test_time_evaluator_takes_cpu_devices_only():
    # python/src/vm.rs's "cannot time on DEVICE: this VM runs on the CPU" cannot be reached:
    # relaxvm's Device holds the CPU only, so another device is refused where it is made.
    vm = one_function_vm()
    with pytest.raises(ValueError, match=r'^unknown device type "cuda": only "cpu" is available$'):
        vm.time_evaluator("one", rx.device("cuda", 0))
    with pytest.raises(ValueError, match=r"^unsupported device type code 2: only cpu \(1\) is available$"):
        rx.Device(2, 0)
    # Not a device at all: a TypeError naming the class expected.
    with pytest.raises(TypeError, match="Device"):
        vm.time_evaluator("one", "cuda:0")
    # The CPU (any id) and no device are fine.
    assert len(vm.time_evaluator("one", rx.cpu(1), number=1)().results) == 1
    assert len(vm.time_evaluator("one", None, number=1)().results) == 1


class Capsule:
    """An object with ``__dlpack__`` returning a given capsule (one use)."""

    def __init__(self, capsule: object) -> None:
        self.capsule = capsule

    def __dlpack__(self, **_: object) -> object:
        return self.capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


#: Offset of ``dl_tensor.dtype.lanes`` in a legacy ``DLManagedTensor`` (``dl_tensor`` comes
#: first: data pointer, DLDevice of two int32, int32 ndim, then dtype: uint8 code, uint8 bits,
#: uint16 lanes).
LANES_OFFSET = 8 + 8 + 4 + 2


@pytest.mark.parametrize("lanes", [0, 4, 65535])
def test_dlpack_tensors_with_lanes_are_refused(lanes):
    t = rx.tensor(np.arange(4, dtype="float32"))
    capsule = t.__dlpack__()  # legacy "dltensor" (no max_version asked)
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    managed = get(capsule, b"dltensor")
    ctypes.c_uint16.from_address(managed + LANES_OFFSET).value = lanes
    with pytest.raises(TypeError, match=rf"^DLPack tensors with {lanes} lanes are not supported$"):
        rx.from_dlpack(Capsule(capsule))
    # The refused capsule was released (not touched again here: it may be freed); the producer's
    # tensor is intact and still shares out.
    assert t.numpy().tolist() == [0.0, 1.0, 2.0, 3.0]
    assert rx.from_dlpack(t).numpy().tolist() == [0.0, 1.0, 2.0, 3.0]


def _nested_functions() -> None:
    ib = rx.ExecBuilder()
    with ib.function("a", num_inputs=0):
        with ib.function("b", num_inputs=0):
            pass


class NotACapsule:
    def __dlpack__(self, **_: object) -> object:
        return 3

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


def _identity_vm() -> rx.VirtualMachine:
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=1):
        ib.emit_ret(ib.r(0))
    return rx.VirtualMachine(ib.get())


#: (what is done, the exception class, the whole message) of errors found by the sweep of error
#: constructors in python/src that no other test caused.
REFUSALS = [
    (_nested_functions, ValueError, "functions cannot nest: end the current one first"),
    (
        lambda: rx.ExecBuilder().declare_function("f", kind="foo"),
        ValueError,
        'kind must be "packed" or "bytecode", got "foo"',
    ),
    (
        lambda: rx.ExecBuilder().function("m", signature="(x: i64) ->"),
        ValueError,
        'invalid signature "(x: i64) ->": signature: expected a type at column 12, found end of input',
    ),
    (lambda: rx.device(1.5), TypeError, 'device type must be a name such as "cpu" or a DLPack code'),
    (lambda: rx.DataType(None), TypeError, "expected a dtype, got None"),
    (lambda: rx.load_executable(b"xx", mmap=True), ValueError, "mmap=True needs a path, not bytes"),
    (lambda: rx.link([]), ValueError, "link: no executables given"),
    (lambda: rx.link([3]), TypeError, "link: a module is an Executable or a (name, Executable) pair, got int"),
    (lambda: rx.register_func(3), TypeError, "register_func expects a name (str) and optionally a callable"),
    (lambda: rx.Shape(3), TypeError, "a shape is a sequence of ints, not an int: write (n,)"),
    (lambda: len(rx.tensor(np.float32(1))), TypeError, "len() of a 0-d tensor"),
    (
        lambda: rx.tensor(np.zeros(2), rx.cpu(), device=rx.cpu()),
        TypeError,
        "rx.tensor got a device twice (second argument and device=)",
    ),
    (lambda: rx.tensor(np.zeros(2)).__dlpack__(stream=1), BufferError, "relaxvm CPU tensors take stream=None"),
    (
        lambda: rx.tensor(np.zeros(2)).copyto(rx.tensor(np.zeros(3))),
        ValueError,
        "copyto: the target has shape (3,) and dtype float64, the tensor shape (2,) and dtype float64",
    ),
    (lambda: rx.from_dlpack(NotACapsule()), TypeError, "__dlpack__ did not return a capsule"),
    (lambda: _identity_vm().set_instrument(3), TypeError, "set_instrument expects a callable or None"),
]


@pytest.mark.parametrize("act, cls, message", REFUSALS, ids=[m[:40] for _, _, m in REFUSALS])
def test_refusals_say_what_was_expected(act, cls, message):
    with pytest.raises(cls) as info:
        act()
    assert str(info.value) == message


def test_a_consumed_dlpack_capsule_is_refused():
    capsule = rx.tensor(np.zeros(2, "float32")).__dlpack__()
    assert rx.from_dlpack(Capsule(capsule)).numpy().tolist() == [0.0, 0.0]
    with pytest.raises(TypeError) as info:
        rx.from_dlpack(Capsule(capsule))
    assert (
        str(info.value)
        == 'expected a DLPack capsule named "dltensor" or "dltensor_versioned" that was not consumed yet'
    )
