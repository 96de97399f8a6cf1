"""How a tensor shares its memory and identity with the rest of Python: one object per tensor,
the buffer protocol, numpy's array interface, in-place assignment, copyto, and pickling with
protocol 5 (out-of-band buffers, as numpy does)."""

import ctypes
import pickle

import numpy as np
import pytest

import relaxvm as rx
from conftest import build, identity_vm


def test_one_python_object_per_tensor():
    x, y = rx.tensor(np.zeros(3, "float32")), rx.tensor(np.ones(2, "int32"))
    getitem = rx.get_global_func("vm.builtin.tuple_getitem")
    assert getitem([x, y], 0) is x and getitem([x, y], 1) is y
    assert identity_vm()["id"](x) is x
    # Through a tuple the VM builds and returns, twice.
    vm = rx.VirtualMachine(
        build(lambda ib: (ib.emit_call("vm.builtin.make_tuple", [ib.r(0), ib.r(0)], ib.r(1)), ib.emit_ret(ib.r(1))))
    )
    a, b = vm["main"](x)
    assert a is x and b is x
    # A tensor the VM made is one object however often it comes back.
    t = vm["main"](np.arange(2))
    assert t[0] is t[1]
    assert x.same_as(x) and not x.same_as(y) and not x.same_as(3)
    assert x == x and x != rx.tensor(np.zeros(3, "float32"))
    assert hash(getitem([x], 0)) == hash(x)


def test_identity_survives_the_first_object_dying():
    """A tensor the VM still holds after its Python object is gone comes back as a new object
    with the right contents (the slot was cleared; the old address, reused, is not trusted)."""
    make_closure = rx.get_global_func("vm.builtin.make_closure")
    t = rx.tensor(np.arange(4))
    held = make_closure(lambda x: x, t)  # the closure holds the tensor on the Rust side
    first_id = id(t)
    del t
    churn = [rx.tensor(np.full(4, k)) for k in range(1000)]  # objects that may reuse the address
    back = held()
    assert back.numpy().tolist() == [0, 1, 2, 3]
    assert held() is back  # one object again from now on
    assert all(c.numpy()[0] == k for k, c in enumerate(churn))
    del first_id


def test_buffer_protocol():
    t = rx.tensor(np.arange(6, dtype="float32").reshape(2, 3))
    m = memoryview(t)
    assert (m.format, m.shape, m.strides, m.readonly, m.nbytes) == ("f", (2, 3), (12, 4), False, 24)
    assert m.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    m[1, 2] = 50.0  # writes through
    assert t.numpy()[1, 2] == 50.0
    for dtype, fmt in [
        ("bool", "?"),
        ("int8", "b"),
        ("uint16", "H"),
        ("int64", "q"),
        ("float16", "e"),
        ("float64", "d"),
    ]:
        assert memoryview(rx.tensor(np.zeros(2, dtype))).format == fmt
    with pytest.raises(BufferError, match="bfloat16"):
        memoryview(rx.tensor_from_bytes(b"\0\0", (1,), "bfloat16"))


def test_buffer_of_a_strided_view_and_of_a_constant():
    base = np.arange(12, dtype="int32").reshape(3, 4)
    t = identity_vm()["id"](base[:, ::2])  # viewed in place, strided
    m = memoryview(t)
    assert m.strides == (16, 8) and m.tolist() == [[0, 2], [4, 6], [8, 10]]
    assert not m.c_contiguous
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=0):
        ib.emit_call("vm.builtin.copy", [ib.convert_constant(np.arange(3, dtype="int64"))], ib.r(0))
        ib.emit_ret(ib.r(0))
    const = rx.VirtualMachine(ib.get())["main"]()
    assert memoryview(const).readonly
    with pytest.raises(ValueError, match="read-only"):
        const[0] = 5


class PyBuffer(ctypes.Structure):
    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("obj", ctypes.py_object),
        ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t),
        ("readonly", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p),
        ("shape", ctypes.POINTER(ctypes.c_ssize_t)),
        ("strides", ctypes.POINTER(ctypes.c_ssize_t)),
        ("suboffsets", ctypes.POINTER(ctypes.c_ssize_t)),
        ("internal", ctypes.c_void_p),
    ]


def get_buffer(obj, flags: int) -> bool:
    """Whether ``obj`` exports a buffer for ``flags`` (PyObject_GetBuffer through the C API)."""
    view = PyBuffer()
    try:
        ctypes.pythonapi.PyObject_GetBuffer(ctypes.py_object(obj), ctypes.byref(view), flags)
    except BufferError:
        return False
    ctypes.pythonapi.PyBuffer_Release(ctypes.byref(view))
    return True


def test_contiguous_buffer_requests_get_that_layout_or_an_error():
    STRIDES, C, F, ANY = 0x18, 0x20 | 0x18, 0x40 | 0x18, 0x80 | 0x18  # PyBUF_* from CPython
    strided = identity_vm()["id"](np.arange(12, dtype="int32").reshape(3, 4)[:, ::2])
    base = np.arange(3, dtype="int32")
    zero_stride = np.lib.stride_tricks.as_strided(base, shape=(1000, 3), strides=(0, 4), writeable=True)
    broadcast = identity_vm()["id"](zero_stride)  # viewed in place: stride 0
    assert broadcast.strides == (0, 1)
    for t in (strided, broadcast):
        assert get_buffer(t, STRIDES)
        assert not get_buffer(t, C) and not get_buffer(t, F) and not get_buffer(t, ANY)
    square = rx.tensor(np.arange(6, dtype="int32").reshape(2, 3))
    assert get_buffer(square, C) and get_buffer(square, ANY) and not get_buffer(square, F)
    row = rx.tensor(np.arange(3, dtype="int32").reshape(1, 3))
    assert get_buffer(row, F)  # one dimension above 1: both orders at once


def test_a_writable_buffer_of_a_constant_is_refused():
    WRITABLE = 0x1
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=0):
        ib.emit_call("vm.builtin.copy", [ib.convert_constant(np.arange(3, dtype="int64"))], ib.r(0))
        ib.emit_ret(ib.r(0))
    const = rx.VirtualMachine(ib.get())["main"]()
    assert get_buffer(const, 0) and not get_buffer(const, WRITABLE)
    with pytest.raises(BufferError, match="read-only .a constant of an executable"):
        ctypes.pythonapi.PyObject_GetBuffer(ctypes.py_object(const), ctypes.byref(PyBuffer()), WRITABLE)


def test_array_interface():
    t = rx.tensor(np.arange(6, dtype="int16").reshape(2, 3))
    ai = t.__array_interface__
    assert ai["version"] == 3 and ai["shape"] == (2, 3) and ai["typestr"] == "<i2" and ai["strides"] is None
    assert ai["data"] == (t.data_ptr(), False)

    class Holder:
        __array_interface__ = ai

    a = np.asarray(Holder())
    assert np.shares_memory(a, t.numpy()) and a.tolist() == [[0, 1, 2], [3, 4, 5]]
    strided = identity_vm()["id"](np.arange(8, dtype="float64")[::2])
    assert strided.__array_interface__["strides"] == (16,)
    with pytest.raises(TypeError, match="bfloat16"):
        _ = rx.tensor_from_bytes(b"\0\0", (1,), "bfloat16").__array_interface__


def test_setitem_copyto_numel_tobytes():
    t = rx.tensor(np.zeros((2, 3), "float32"))
    t[:] = 7
    t[0, 1] = 1
    t[1] = [4, 5, 6]
    assert t.numpy().tolist() == [[7, 1, 7], [4, 5, 6]]
    with pytest.raises(ValueError):
        t[:] = np.ones(4)
    u = rx.empty((2, 3), "float32")
    assert t.copyto(u) is u and u.numpy().tolist() == t.numpy().tolist()
    v = t.copyto(rx.cpu())
    assert v is not t and not v.same_storage(t) and v.numpy().tolist() == t.numpy().tolist()
    with pytest.raises(ValueError, match="shape"):
        t.copyto(rx.empty((3, 2), "float32"))
    with pytest.raises(ValueError, match="dtype"):
        t.copyto(rx.empty((2, 3), "float64"))
    with pytest.raises(TypeError, match="Tensor or a Device"):
        t.copyto("cpu")
    assert t.numel() == 6 and rx.empty((0, 4)).numel() == 0
    assert t.tobytes() == t.numpy().tobytes()


@pytest.mark.parametrize(
    "make",
    [
        lambda: rx.tensor(np.arange(12, dtype="float32").reshape(3, 4)),
        lambda: rx.tensor(np.array([True, False, True])),
        lambda: rx.tensor(np.zeros((0, 3), "int64")),
        lambda: rx.tensor(np.float64(2.5)),
        lambda: identity_vm()["id"](np.arange(10, dtype="int32")[::3]),  # strided
        lambda: rx.tensor_from_bytes(bytes.fromhex("803f0040"), (2,), "bfloat16"),
    ],
)
@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_pickle_round_trips(make, protocol):
    t = make()
    back = pickle.loads(pickle.dumps(t, protocol=protocol))
    assert (back.shape, back.dtype, back.tobytes()) == (t.shape, t.dtype, t.tobytes())
    assert back is not t


def test_protocol_5_moves_the_bytes_out_of_band_without_copies():
    t = rx.tensor(np.arange(1 << 16, dtype="float64"))
    buffers = []
    data = pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    assert len(buffers) == 1 and len(data) < 1000  # the bytes are not in the pickle
    assert buffers[0].raw().nbytes == t.nbytes
    back = pickle.loads(data, buffers=buffers)
    assert back.data_ptr() == t.data_ptr()  # the same memory, as numpy's out-of-band pickles
    assert np.array_equal(back.numpy(), t.numpy())
    # In band (no buffer_callback) the bytes are copied into the pickle and out again.
    inband = pickle.loads(pickle.dumps(t, protocol=5))
    assert inband.data_ptr() != t.data_ptr() and np.array_equal(inband.numpy(), t.numpy())


def test_rebuilding_from_a_wrong_or_unaligned_buffer():
    rebuild = rx._relaxvm._tensor_from_buffer
    with pytest.raises(ValueError, match="needs 12 bytes"):
        rebuild(bytearray(10), (3,), "float32")
    with pytest.raises(ValueError, match="cannot hold"):
        rebuild(bytearray(16), (3,), "float32")
    raw = bytearray(17)
    raw[1:17] = np.array([1.0, 2.0], "float64").tobytes()
    t = rebuild(memoryview(raw)[1:], (2,), "float64")  # misaligned: copied
    assert t.numpy().tolist() == [1.0, 2.0] and t.data_ptr() % 8 == 0
    assert rebuild(bytearray(b"\x02\x00"), (2,), "bool").numpy().tolist() == [True, False]


def test_a_python_function_comes_back_as_itself():
    def f(x):
        return x

    getitem = rx.get_global_func("vm.builtin.tuple_getitem")
    assert getitem([f, 1], 0) is f
    assert identity_vm()["id"](f) is f
    # A function with captured values is a new function: it comes back as an rx.Closure.
    make_closure = rx.get_global_func("vm.builtin.make_closure")
    bound = make_closure(f, 3)
    assert isinstance(bound, rx.Closure) and bound() == 3
