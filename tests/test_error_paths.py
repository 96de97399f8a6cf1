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
