"""Refusals of a tensor's exports (python/src/tensor/export.rs): the buffer protocol asked for a
layout the tensor does not have, numpy's array interface and the buffer protocol of a dtype numpy
lacks, and a pickled tensor rebuilt from a buffer of the wrong size. Each test checks the
exception's class and its whole message."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import relaxvm as rx
from conftest import identity_vm

# CPython's buffer request flags (Include/pybuffer.h).
PyBUF_SIMPLE = 0
PyBUF_ND = 0x0008
PyBUF_STRIDES = 0x0010 | PyBUF_ND
PyBUF_C_CONTIGUOUS = 0x0020 | PyBUF_STRIDES
PyBUF_F_CONTIGUOUS = 0x0040 | PyBUF_STRIDES
PyBUF_ANY_CONTIGUOUS = 0x0080 | PyBUF_STRIDES


def get_buffer(obj: object, flags: int) -> None:
    """Asks `obj` for a buffer with exactly `flags`, as a C consumer does, and releases it."""
    view = ctypes.create_string_buffer(256)  # larger than any Py_buffer
    get = ctypes.pythonapi.PyObject_GetBuffer
    get.argtypes, get.restype = [ctypes.py_object, ctypes.c_void_p, ctypes.c_int], ctypes.c_int
    get(obj, ctypes.addressof(view), flags)  # pythonapi raises the exception the call set
    ctypes.pythonapi.PyBuffer_Release.argtypes = [ctypes.c_void_p]
    ctypes.pythonapi.PyBuffer_Release(ctypes.addressof(view))


def strided() -> rx.Tensor:
    """A (3, 2) int32 tensor viewing every other column of a numpy array, in place."""
    t = identity_vm()["id"](np.arange(12, dtype="int32").reshape(3, 4)[:, ::2])
    assert memoryview(t).strides == (16, 8)  # really strided
    return t


BF16 = "a bfloat16 tensor has no buffer format; view it as uint16 with t.numpy() after a cast"
NOT_CONTIGUOUS = "this tensor is not contiguous: request strides, or copy it"
NOT_LAID_OUT = "this tensor is not laid out as the requested contiguous buffer: copy it (t.numpy().copy(order=...))"


def test_a_bfloat16_tensor_has_no_buffer_or_array_interface():
    t = rx.tensor_from_bytes(b"\0\0", (1,), "bfloat16")
    with pytest.raises(BufferError) as e:
        memoryview(t)
    assert str(e.value) == BF16
    with pytest.raises(TypeError) as e:
        _ = t.__array_interface__
    assert str(e.value) == "numpy has no bfloat16 dtype"


@pytest.mark.parametrize("flags", [PyBUF_SIMPLE, PyBUF_ND])
def test_a_strided_tensor_refuses_a_buffer_without_strides(flags):
    with pytest.raises(BufferError) as e:
        get_buffer(strided(), flags)
    assert str(e.value) == NOT_CONTIGUOUS


@pytest.mark.parametrize("flags", [PyBUF_C_CONTIGUOUS, PyBUF_F_CONTIGUOUS, PyBUF_ANY_CONTIGUOUS])
def test_a_strided_tensor_refuses_a_contiguous_buffer(flags):
    with pytest.raises(BufferError) as e:
        get_buffer(strided(), flags)
    assert str(e.value) == NOT_LAID_OUT


def test_a_c_ordered_matrix_refuses_a_fortran_buffer_and_gives_the_others():
    t = rx.tensor(np.arange(6, dtype="float32").reshape(2, 3))
    with pytest.raises(BufferError) as e:
        get_buffer(t, PyBUF_F_CONTIGUOUS)
    assert str(e.value) == NOT_LAID_OUT
    for flags in (PyBUF_SIMPLE, PyBUF_ND, PyBUF_STRIDES, PyBUF_C_CONTIGUOUS, PyBUF_ANY_CONTIGUOUS):
        get_buffer(t, flags)
    # A row is both C- and Fortran-ordered.
    get_buffer(rx.tensor(np.arange(3, dtype="float32").reshape(1, 3)), PyBUF_F_CONTIGUOUS)


@pytest.mark.parametrize("size", [9, 12, 64])
def test_a_pickled_tensor_rebuilt_from_a_buffer_too_large_is_a_value_error(size):
    rebuild = rx._relaxvm._tensor_from_buffer
    with pytest.raises(ValueError) as e:
        rebuild(bytearray(size), (2,), "float32")
    assert str(e.value) == (f"a buffer of {size} bytes cannot hold a tensor of shape (2,) and dtype float32 (8 bytes)")
    # The right size rebuilds it.
    assert rebuild(bytearray(8), (2,), "float32").numpy().tolist() == [0.0, 0.0]


@pytest.mark.parametrize("size", [0, 5])
def test_a_pickled_tensor_rebuilt_from_a_buffer_too_small_is_a_value_error(size):
    with pytest.raises(ValueError) as e:
        rx._relaxvm._tensor_from_buffer(bytearray(size), (2,), "float32")
    assert str(e.value) == (
        f"tensor of shape (2,) and dtype float32 at byte offset 0 needs 8 bytes, but the storage has {size}"
    )


def _capsule_pointer(capsule: object) -> int:
    """The address of the managed tensor a DLPack capsule holds."""
    name = ctypes.pythonapi.PyCapsule_GetName
    name.restype, name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return get(capsule, name(capsule))


def test_dlpack_capsules_of_another_version_or_misaligned_data_are_refused():
    from test_error_paths import Capsule

    t = rx.tensor(np.arange(4, dtype="float32"))
    # A versioned capsule (DLManagedTensorVersioned starts with its major version, uint32).
    versioned = t.__dlpack__(max_version=(1, 0))
    ctypes.c_uint32.from_address(_capsule_pointer(versioned)).value = 2
    with pytest.raises(BufferError) as e:
        rx.from_dlpack(Capsule(versioned))
    assert str(e.value) == "unsupported DLPack version 2"
    # A legacy capsule whose data pointer (its first field) is one byte off a float32.
    legacy = t.__dlpack__()
    ctypes.c_uint64.from_address(_capsule_pointer(legacy)).value += 1
    with pytest.raises(BufferError) as e:
        rx.from_dlpack(Capsule(legacy))
    assert str(e.value) == "DLPack tensor data is not aligned to its element size"
    # The producer's tensor is intact.
    assert t.numpy().tolist() == [0.0, 1.0, 2.0, 3.0]
