"""rx.Shape, rx.DataType and rx.Device."""

import pickle

import numpy as np
import pytest

import relaxvm as rx


def test_shape_behaves_like_a_tuple():
    s = rx.Shape([32, 16, 8])
    assert len(s) == 3
    assert s[0] == 32 and s[-1] == 8
    assert s[1:] == (16, 8) and isinstance(s[1:], rx.Shape)
    assert list(s) == [32, 16, 8]
    assert tuple(s) == (32, 16, 8) == s.to_tuple()
    assert 16 in s and 5 not in s
    assert s == (32, 16, 8) and (32, 16, 8) == s
    assert s != (32, 16) and s != [32, 16, 8]
    assert s == rx.Shape((32, 16, 8))
    assert hash(s) == hash((32, 16, 8))
    assert {s: 1}[(32, 16, 8)] == 1
    assert rx.Shape([1, 2]) < (1, 3) and rx.Shape([2]) >= (1, 9)
    assert s.numel == 32 * 16 * 8
    assert rx.Shape().to_tuple() == () and len(rx.Shape()) == 0
    assert rx.Shape(range(3)) == (0, 1, 2)
    assert repr(s) == "Shape([32, 16, 8])" and str(s) == "(32, 16, 8)"
    x, y, z = s
    assert (x, y, z) == (32, 16, 8)


def test_shape_errors():
    s = rx.Shape([1])
    with pytest.raises(IndexError):
        s[1]
    with pytest.raises(IndexError):
        s[-2]
    with pytest.raises(TypeError):
        rx.Shape(3)
    with pytest.raises(TypeError):
        rx.Shape(["a"])
    with pytest.raises(OverflowError):
        rx.Shape([2**64])


def test_dtype():
    d = rx.DataType("float32")
    assert d == "float32" and d == rx.DataType("f32") and d != "float64"
    assert str(d) == "float32" and d.name == "float32"
    assert repr(d) == 'DataType("float32")'
    assert hash(d) == hash("float32")
    assert (d.bits, d.lanes, d.type_code, d.itemsize) == (32, 1, 2, 4)
    assert rx.DataType(np.float16) == "float16"
    assert rx.DataType(np.dtype("uint8")) == "uint8"
    assert rx.DataType(rx.DataType("bool")).type_code == 6
    assert rx.DataType("bfloat16").type_code == 4
    with pytest.raises(ValueError, match="unknown dtype"):
        rx.DataType("float7")
    assert (d == 3) is False


def test_device():
    d = rx.cpu(2)
    assert d.device_type == 1 and d.device_id == 2 and d.type_name == "cpu"
    assert d == rx.cpu(2) and d != rx.cpu(0)
    assert rx.cpu() == rx.cpu(0) == rx.device("cpu") == rx.Device("cpu:0") == rx.Device(1, 0)
    assert hash(rx.cpu(1)) == hash(rx.device("cpu", 1))
    assert repr(d) == "cpu(2)" and str(d) == "cpu:2"
    assert d.dlpack_device() == (1, 2)
    with pytest.raises(ValueError):
        rx.device("cuda", 0)
    with pytest.raises(ValueError):
        rx.cpu(-1)
    with pytest.raises(TypeError):
        rx.Device(1.5)
    assert (d == "cpu:2") is False


@pytest.mark.parametrize("value", [rx.Shape([1, 2]), rx.DataType("int8"), rx.cpu(3)])
def test_values_pickle(value):
    assert pickle.loads(pickle.dumps(value)) == value
