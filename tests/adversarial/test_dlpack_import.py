"""Malformed DLPack tensors handed to ``rx.from_dlpack``, attacked (issue 31 class 5):

a NULL ``data`` pointer with elements to read, a ``byte_offset`` (or an extent) that runs past
the end of the address space, a negative dimension, a NULL ``shape``: each is a ``BufferError``
naming the field, never a tensor whose first read faults. A NULL ``data`` with no element
(shape ``(0,)``) is a valid empty tensor.
"""

from __future__ import annotations

import pytest
from attack import run_attack

# A hand-made DLPack 0.x capsule over a 16-float buffer, with every field settable.
PRE = r"""
import ctypes, relaxvm as rx
class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]
class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]
class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]
class DLManagedTensor(ctypes.Structure):
    pass
DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]
deleted = []
@DELETER
def deleter(p):
    deleted.append(1)
buf = (ctypes.c_float * 16)(*range(16))
keep = []
def capsule(data, offset=0, dims=(4,), null_shape=False):
    shape = (ctypes.c_int64 * len(dims))(*dims)
    m = DLManagedTensor()
    m.dl_tensor.data = data
    m.dl_tensor.device = DLDevice(1, 0)
    m.dl_tensor.ndim = len(dims)
    m.dl_tensor.dtype = DLDataType(2, 32, 1)
    if not null_shape:
        m.dl_tensor.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    m.dl_tensor.byte_offset = offset
    m.deleter = deleter
    keep.append((m, shape))
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(ctypes.addressof(m), b"dltensor", None)
BUF = ctypes.addressof(buf)
"""


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("capsule(None)", "DLPack tensor of 4 elements has a NULL data pointer"),
        ("capsule(BUF, 2**63)", "DLPack byte_offset 9223372036854775808 overflows the address space"),
        ("capsule(BUF, 2**64 - 8)", "DLPack byte_offset 18446744073709551608 overflows the address space"),
        ("capsule(2**64 - 16, 8)", "DLPack data + byte_offset 8 + extent 16 overflows the address space"),
        ("capsule(BUF, 0, (2**62,))", "DLPack tensor of shape [4611686018427387904] overflows the address space"),
        ("capsule(BUF, 0, (2, -1))", "DLPack shape[1] is -1; dimensions must be >= 0"),
        ("capsule(BUF, 0, (4,), True)", "DLPack tensor of ndim 1 has a NULL shape pointer"),
    ],
)
def test_a_malformed_dlpack_tensor_is_a_buffer_error_naming_the_field(call: str, message: str) -> None:
    run_attack(
        PRE
        + f"""
try:
    t = rx.from_dlpack({call})
    print(t.numpy().tolist())
except BufferError as e:
    print(str(e))
"""
    ).assert_ok(message)


def test_valid_and_empty_tensors_still_import() -> None:
    run_attack(
        PRE
        + """
print(rx.from_dlpack(capsule(BUF, 8)).numpy().tolist())
print(rx.from_dlpack(capsule(None, 0, (0,))).numpy().tolist())
"""
    ).assert_ok("[2.0, 3.0, 4.0, 5.0]\n[]")
