"""rx.Tensor: construction, numpy interop (zero-copy both ways), DLPack, pickling."""

import gc
import pickle
import sys

import numpy as np
import pytest

import relaxvm as rx
from conftest import identity_vm

DTYPES = [
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
]


@pytest.mark.parametrize("dtype", DTYPES)
def test_tensor_from_numpy_all_dtypes(dtype):
    a = (np.arange(6) % 2 if dtype == "bool" else np.arange(6)).astype(dtype).reshape(2, 3)
    t = rx.tensor(a)
    assert t.dtype == dtype
    assert t.shape == (2, 3)
    assert t.ndim == 2 and t.size == 6 and t.nbytes == a.nbytes
    assert t.device == rx.cpu(0)
    np.testing.assert_array_equal(t.numpy(), a)
    assert t.numpy().dtype == a.dtype


def test_tensor_from_list_and_scalar():
    t = rx.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert t.dtype == "float64" and t.shape == (2, 2)
    s = rx.tensor(3)
    assert s.shape == () and s.numpy() == 3
    with pytest.raises(TypeError):
        len(s)
    assert len(t) == 2


@pytest.mark.parametrize("dtype", ["float32", rx.DataType("float32"), np.float32, np.dtype("float32")])
def test_tensor_dtype_argument_forms(dtype):
    t = rx.tensor([1, 2, 3], dtype=dtype)
    assert t.dtype == "float32"


def test_tensor_copies_its_input():
    a = np.zeros(3)
    t = rx.tensor(a)
    a[0] = 5
    assert t.numpy()[0] == 0


def test_tensor_of_tensor_copies_and_converts():
    t = rx.tensor(np.arange(3, dtype="int32"))
    u = rx.tensor(t)
    assert not u.same_storage(t)
    v = rx.tensor(t, dtype="float64")
    assert v.dtype == "float64"
    np.testing.assert_array_equal(v.numpy(), [0.0, 1.0, 2.0])


def test_unknown_dtype_is_an_error():
    with pytest.raises(ValueError, match="unknown dtype"):
        rx.tensor([1], dtype="float7")
    with pytest.raises(ValueError, match="unknown dtype"):
        rx.tensor([1], dtype="complex64")
    with pytest.raises(TypeError, match="no relaxvm dtype|unknown dtype|interpret"):
        rx.tensor([1], dtype=np.complex64)
    with pytest.raises(TypeError, match="got None"):
        rx.DataType(None)


def test_numpy_view_is_zero_copy_and_keeps_tensor_alive():
    t = rx.tensor(np.arange(4, dtype="float32"))
    a = t.numpy()
    assert a.base is t
    a[0] = 42  # writes through to the tensor
    assert t.numpy()[0] == 42
    del t
    gc.collect()
    assert a[0] == 42 and a.tolist() == [42, 1, 2, 3]


def test_array_protocol():
    t = rx.tensor(np.arange(3, dtype="int64"))
    a = np.asarray(t)
    assert np.shares_memory(a, t.numpy())
    assert t.numpy().base is t
    np.testing.assert_array_equal(np.asarray(t, dtype="float32"), [0.0, 1.0, 2.0])
    assert np.asarray(t, dtype="float32").dtype == np.float32
    assert np.add(t, 1).tolist() == [1, 2, 3]


def test_numpy_input_is_zero_copy_through_the_vm():
    """A numpy array passed in and a tensor read out share memory both ways."""
    vm = identity_vm()
    a = np.arange(8, dtype="float32")
    out = vm["id"](a)
    view = out.numpy()
    assert np.shares_memory(view, a)
    a[3] = -1.0  # mutate through the input...
    assert out.numpy()[3] == -1.0  # ...read through the output
    view[5] = 99.0  # and the other way round
    assert a[5] == 99.0


def test_numpy_input_keeps_the_array_alive():
    vm = identity_vm()
    a = np.arange(1000, dtype="int64")
    refs = sys.getrefcount(a)
    out = vm["id"](a)
    assert sys.getrefcount(a) == refs + 1  # the tensor's storage owns a reference
    del a
    gc.collect()
    assert out.numpy()[999] == 999
    del out
    gc.collect()


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.arange(12.0).reshape(3, 4)[:, ::2],  # strided: viewed in place
        lambda: np.arange(12.0).reshape(3, 4).T,  # transposed: viewed in place
        lambda: np.broadcast_to(np.arange(3.0), (4, 3)),  # read-only: copied
        lambda: np.arange(12.0)[::-1],  # negative stride: copied
        lambda: np.frombuffer(b"\x00" * 33, dtype="float64", offset=1),  # unaligned, read-only: copied
        lambda: np.arange(4, dtype=">i4"),  # big-endian: converted
    ],
)
def test_awkward_layouts_round_trip(make):
    a = make()
    out = identity_vm()["id"](a)
    np.testing.assert_array_equal(out.numpy(), a)
    assert out.shape == a.shape


def test_strided_view_is_zero_copy():
    base = np.arange(12.0).reshape(3, 4)
    a = base[:, ::2]
    out = identity_vm()["id"](a)
    assert not out.is_contiguous
    assert out.strides == (4, 2)
    base[1, 2] = -5
    assert out.numpy()[1, 1] == -5


def test_read_only_input_is_copied():
    a = np.arange(3.0)
    a.flags.writeable = False
    out = identity_vm()["id"](a)
    assert not np.shares_memory(out.numpy(), a)
    np.testing.assert_array_equal(out.numpy(), a)


def test_registered_function_returning_numpy_is_zero_copy(unique_name):
    keep = np.arange(5, dtype="int16")
    name = unique_name()
    rx.register_func(name, lambda: keep)
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=0):
        ib.emit_call(name, dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    out = rx.VirtualMachine(ib.get())["main"]()
    assert np.shares_memory(out.numpy(), keep)


def test_dlpack_export_to_numpy():
    t = rx.tensor(np.arange(6, dtype="float32").reshape(2, 3))
    a = np.from_dlpack(t)
    np.testing.assert_array_equal(a, np.arange(6).reshape(2, 3))
    a[0, 0] = 7  # shares memory
    assert t.numpy()[0, 0] == 7
    del t
    gc.collect()
    assert a[0, 0] == 7  # the capsule's context keeps the memory alive
    assert t_device(a) == (1, 0)


def t_device(a):
    return a.__dlpack_device__()


def test_dlpack_device():
    t = rx.tensor([1])
    assert t.__dlpack_device__() == (1, 0)


def test_dlpack_import_from_numpy_is_zero_copy():
    a = np.arange(4, dtype="int32")
    t = rx.from_dlpack(a)
    assert t.dtype == "int32" and t.shape == (4,)
    a[1] = 100
    assert t.numpy()[1] == 100
    del a
    gc.collect()
    assert t.numpy().tolist() == [0, 100, 2, 3]


def test_dlpack_round_trip_strided():
    a = np.arange(12.0).reshape(3, 4)[:, 1::2]
    t = rx.from_dlpack(a)
    np.testing.assert_array_equal(np.from_dlpack(t), a)


def test_dlpack_capsules():
    t = rx.tensor(np.arange(3.0))
    cap = t.__dlpack__()
    u = rx.from_dlpack(cap)
    np.testing.assert_array_equal(u.numpy(), [0.0, 1.0, 2.0])
    with pytest.raises(TypeError, match="not consumed"):
        rx.from_dlpack(cap)  # a capsule is consumed once
    # An unconsumed capsule frees its tensor when collected.
    for versioned in [None, (1, 0)]:
        c = t.__dlpack__(max_version=versioned)
        del c
        gc.collect()


def test_dlpack_versioned_and_copy():
    t = rx.tensor(np.arange(3.0))
    u = rx.from_dlpack(t.__dlpack__(copy=True))
    u.numpy()[0] = 9
    assert t.numpy()[0] == 0
    v = rx.from_dlpack(t.__dlpack__(max_version=(1, 0), dl_device=(1, 0)))
    assert np.shares_memory(v.numpy(), t.numpy())
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError):
        t.__dlpack__(stream=3)


def test_from_dlpack_of_read_only_array_is_a_read_only_view():
    a = np.arange(3.0)
    a.flags.writeable = False
    t = rx.from_dlpack(a)
    np.testing.assert_array_equal(t.numpy(), a)
    assert np.shares_memory(t.numpy(), a) and not t.numpy().flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        t[0] = 5.0
    assert a[0] == 0.0


def test_from_dlpack_rejects_non_dlpack():
    with pytest.raises(AttributeError):
        rx.from_dlpack(object())


def test_tensor_from_bytes_and_empty():
    t = rx.tensor_from_bytes(np.arange(4, dtype="<i2").tobytes(), (2, 2), "int16")
    assert t.numpy().tolist() == [[0, 1], [2, 3]]
    with pytest.raises(ValueError, match="cannot fill"):
        rx.tensor_from_bytes(b"abc", (2,), "int16")
    e = rx.empty((2, 3), "int8")
    assert e.shape == (2, 3) and e.dtype == "int8" and not e.numpy().any()
    assert rx.empty((1,)).dtype == "float32"


def test_copyfrom():
    t = rx.empty((3,), "float64")
    assert t.copyfrom(np.array([1.0, 2.0, 3.0])) is t
    assert t.numpy().tolist() == [1.0, 2.0, 3.0]
    t.copyfrom(rx.tensor([4.0, 5.0, 6.0]))
    assert t.numpy().tolist() == [4.0, 5.0, 6.0]


def test_pickle_tensor():
    t = rx.tensor(np.arange(6, dtype="uint16").reshape(3, 2))
    u = pickle.loads(pickle.dumps(t))
    assert u.dtype == "uint16" and u.shape == (3, 2)
    np.testing.assert_array_equal(u.numpy(), t.numpy())


def test_repr_and_str():
    t = rx.tensor(np.array([1, 2], dtype="int32"))
    r = repr(t)
    assert "shape=(2,)" in r and "int32" in r and "cpu(0)" in r
    assert str(t) == "[1 2]"  # numpy's str, as TVM's
    f = rx.tensor(np.arange(6, dtype="float32").reshape(2, 3))
    assert str(f) == "[[0. 1. 2.]\n [3. 4. 5.]]"
    assert str(rx.tensor_from_bytes(bytes.fromhex("803f0040"), (2,), "bfloat16")) == "[1.0, 2.0]"


def test_tensors_compare_by_identity():
    t = rx.tensor([1])
    assert t == t
    assert t != rx.tensor([1])
    assert hash(t) == hash(t)
