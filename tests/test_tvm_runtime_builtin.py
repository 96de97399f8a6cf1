# Ported from Apache TVM 0.27's tests/python/relax/test_runtime_builtin.py (Apache-2.0), with
# the renames a user moving from tvm.relax makes: tvm.get_global_func -> rx.get_global_func,
# tvm.runtime.tensor -> rx.tensor, tvm_ffi.Shape -> rx.Shape, tvm.runtime.convert([...]) -> a
# Python list, tvm.relax.testing.runtime_builtin -> relaxvm.testing, tvm.runtime.empty -> rx.empty.
# Every test is ported, the three KV-cache tests of the legacy cache included (TVM's
# test_pipeline_with_kv_cache, the legacy cache driven by a compiled model, is in the suite `llm`
# of tests/test_tvm_llm.py). The tensor-cache tests load the cache TVM's own
# tvmjs.dump_tensor_cache wrote (builtins/tests/data/tensor_cache) instead of writing one.
"""TVM's runtime-builtin tests, run on relaxvm."""

import os

import numpy as np
import pytest

import relaxvm as rx
from relaxvm.testing import MakeShapeCode, MatchShapeCode

CACHE = os.path.join(os.path.dirname(__file__), "..", "builtins", "tests", "data", "tensor_cache")


def test_make_shape():
    MK = MakeShapeCode
    make_shape = rx.get_global_func("vm.builtin.make_shape")
    heap = rx.tensor(np.arange(10).astype("int64"))
    s = make_shape(heap, 3, MK.USE_IMM, 10, MK.LOAD_SHAPE, 0, MK.LOAD_SHAPE, 2)
    assert s == rx.Shape([10, 0, 2])


def test_match_shape():
    MS = MatchShapeCode
    match_shape = rx.get_global_func("vm.builtin.match_shape")
    heap = rx.tensor(np.zeros(10).astype("int64"))
    assert heap.numpy()[2] == 0

    s = rx.Shape([1, 2, 3])
    x = rx.tensor(np.zeros([1, 2, 3]))
    match_shape(s, heap, 3, MS.ASSERT_EQUAL_TO_IMM, 1, MS.STORE_TO_HEAP, 2, MS.NO_OP, 0, "")
    assert heap.numpy()[2] == 2

    match_shape(x, heap, 3, MS.ASSERT_EQUAL_TO_IMM, 1, MS.ASSERT_EQUAL_TO_LOAD, 2, MS.ASSERT_EQUAL_TO_IMM, 3, "")

    # TVM raises RuntimeError; relaxvm's VMValueError is one, with TVM's wording and the values.
    with pytest.raises(
        rx.VMValueError, match=r"shape size mismatch\. \(expected 2 dimensions, found 3 in shape \(1, 2, 3\)\)"
    ):
        match_shape(s, heap, 2, MS.ASSERT_EQUAL_TO_IMM, 1, MS.STORE_TO_HEAP, 2, "")
    with pytest.raises(rx.VMValueError, match=r"shape\[0\] mismatch to specified constant\. \(1 vs\. 2\)"):
        match_shape(s, heap, 3, MS.ASSERT_EQUAL_TO_IMM, 2, MS.STORE_TO_HEAP, 2, MS.NO_OP, 0, "")


def test_check_shape_info():
    check_shape_info = rx.get_global_func("vm.builtin.check_shape_info")
    s = rx.Shape([1, 2, 3])
    check_shape_info(s, 3, "")
    check_shape_info(s, -1, "")
    with pytest.raises(ValueError):  # wrong ndim
        check_shape_info(s, 2, "")
    with pytest.raises(TypeError):  # wrong type
        check_shape_info([], 2, "")


def test_check_tensor_info():
    check_tensor_info = rx.get_global_func("vm.builtin.check_tensor_info")
    x = rx.tensor(np.zeros((2, 3)).astype("int32"))

    check_tensor_info(x, 2, "int32", "")
    check_tensor_info(x, -1, "int32", "")
    check_tensor_info(x, 2, "", "")
    check_tensor_info(x, -1, "", "")
    # the dtype may be left out
    check_tensor_info(x, 2, "")
    check_tensor_info(x, -1, "")

    with pytest.raises(ValueError, match=r".* ndim .*"):
        check_tensor_info(x, 3, "int32", "")
    with pytest.raises(ValueError, match=r"myerror.* dtype .*"):
        check_tensor_info(x, 2, "float32", "myerror")
    with pytest.raises(ValueError, match=r".* myerror .*"):
        check_tensor_info(x, 3, "myerror")
    with pytest.raises(TypeError):
        check_tensor_info([], 2, "", "")


def test_check_tuple_info():
    check_tuple_info = rx.get_global_func("vm.builtin.check_tuple_info")
    x = rx.tensor(np.zeros((2, 3)).astype("int32"))
    t = [x, x, x]
    check_tuple_info(t, 3, "")
    with pytest.raises(ValueError, match=r".*elements.*"):
        check_tuple_info(t, 2, "")
    with pytest.raises(TypeError):
        check_tuple_info(x, 2, "")


def test_check_func_info():
    check_func_info = rx.get_global_func("vm.builtin.check_func_info")
    x = rx.tensor(np.zeros((2, 3)).astype("int32"))
    check_func_info(lambda x: x, "")
    with pytest.raises(TypeError, match=".*myerror.*"):
        check_func_info(x, "myerror")


def test_tuple_getitem():
    tuple_getitem = rx.get_global_func("vm.builtin.tuple_getitem")
    x = rx.tensor(np.zeros((2, 3)).astype("int32"))
    y = rx.tensor(np.zeros((2, 3)).astype("int32"))
    t = [x, y]
    assert tuple_getitem(t, 0) == x
    assert tuple_getitem(t, 1) == y
    # relaxvm goes further than TVM: the very objects come back
    assert tuple_getitem(t, 0) is x
    assert tuple_getitem(t, 1) is y


def expected_cache(name):
    """What TVM's loader returned for each tensor of fixture ``name`` (see its README): name,
    dtype, shape and the bytes, in hex."""
    with open(os.path.join(CACHE, f"expected_{name}.txt")) as f:
        for line in f:
            pname, dtype, shape, data = line.split()
            dims = () if shape == "scalar" else tuple(int(d) for d in shape.split("x"))
            yield pname, dtype, dims, data


@pytest.mark.parametrize("fixture", ["raw", "bf16"])
def test_tensor_cache(fixture):
    fload = rx.get_global_func("vm.builtin.tensor_cache.load")
    fget_params = rx.get_global_func("vm.builtin.param_array_from_cache")
    fclear = rx.get_global_func("vm.builtin.tensor_cache.clear")
    fload(os.path.join(CACHE, fixture), rx.cpu().dlpack_device_type(), 0)
    try:
        res = fget_params("param", -1)
        expected = list(expected_cache(fixture))
        assert len(res) == len(expected)
        for v, (name, dtype, shape, data) in zip(res, expected):
            assert (v.dtype, v.shape, v.tobytes().hex()) == (dtype, shape, data), name
    finally:
        fclear()


def test_attention_kv_cache():
    fcreate = rx.get_global_func("vm.builtin.attention_kv_cache_create")
    fappend = rx.get_global_func("vm.builtin.attention_kv_cache_append")
    fview = rx.get_global_func("vm.builtin.attention_kv_cache_view")

    cache = fcreate(rx.empty((1, 2), dtype="int32"), rx.Shape([2, 2]), 0)
    num_steps = 2
    for i in range(num_steps):
        cache = fappend(cache, rx.tensor(i * np.ones((1, 2)).astype("int32")))

    res = fview(cache, rx.Shape((num_steps, 2))).numpy()
    for i in range(num_steps):
        assert res[i][0] == i
        assert res[i][1] == i


def test_attention_kv_cache_window_override():
    fcreate = rx.get_global_func("vm.builtin.attention_kv_cache_create")
    foverride = rx.get_global_func("vm.builtin.attention_kv_cache_window_override")
    fview = rx.get_global_func("vm.builtin.attention_kv_cache_view")

    current_pos = 4
    cache = fcreate(
        rx.tensor(np.full((16, 2), -1).astype("int32")),
        rx.Shape([16, 2]),
        current_pos,
    )
    np_all_arrays = np.zeros((0, 2)).astype("int32")

    num_steps = 10
    for i in range(1, num_steps):
        np_array = i * np.ones((i, 2)).astype("int32")
        np_all_arrays = np.concatenate((np_all_arrays, np_array), axis=0)
        cache = foverride(cache, rx.tensor(np_array), 16)
        current_pos = (current_pos + i) % 16

    res = fview(cache, rx.Shape((16, 2))).numpy()

    # unrotate cache and assert cache matches last 16 elements
    assert (
        np_all_arrays[np_all_arrays.shape[0] - 16 :, :] == np.concatenate((res[current_pos:], res[:current_pos]))
    ).all()


def test_attention_kv_cache_window_override_with_sinks():
    fcreate = rx.get_global_func("vm.builtin.attention_kv_cache_create")
    foverride = rx.get_global_func("vm.builtin.attention_kv_cache_window_override_with_sinks")
    fview = rx.get_global_func("vm.builtin.attention_kv_cache_view")

    num_attention_sinks = 2
    has_sink = False
    current_pos = 0

    cache = fcreate(
        rx.tensor(np.full((16, 2), -1).astype("int32")),
        rx.Shape([16, 2]),
        current_pos,
    )
    np_all_arrays = np.zeros((0, 2)).astype("int32")

    num_steps = 40
    for i in range(num_steps):
        np_array = i * np.ones((1, 2)).astype("int32")
        np_all_arrays = np.concatenate((np_all_arrays, np_array), axis=0)
        cache = foverride(cache, rx.tensor(np_array), 16, num_attention_sinks)

        if has_sink:
            current_pos = max((current_pos + 1) % 16, num_attention_sinks)
        else:
            current_pos += 1
            has_sink = current_pos >= num_attention_sinks

    res = fview(cache, rx.Shape((16, 2))).numpy()

    # unrotate cache and assert cache matches last 16 elements
    assert (
        np.concatenate((np_all_arrays[:num_attention_sinks, :], np_all_arrays[-16 + num_attention_sinks :, :]))
        == np.concatenate((res[:num_attention_sinks], res[current_pos:], res[num_attention_sinks:current_pos]))
    ).all()
