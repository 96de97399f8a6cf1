"""Function signatures (the IREE ABI): types, checks at the call boundary, conversion of
arguments and results, reflection, introspection, and persistence."""

import inspect
import json
import pydoc

import numpy as np
import pytest

import relaxvm as rx
from relaxvm import types as T


def sig_vm(sig, body=None, name="main"):
    """A VM whose ``name`` has signature ``sig`` and returns its first input (or runs ``body``)."""
    ib = rx.ExecBuilder()
    with ib.function(name, signature=sig):
        if body is None:
            ib.emit_ret(ib.r(0))
        else:
            body(ib)
    ex = ib.get() if body is not None else _get_quiet(ib)
    return rx.VirtualMachine(ex)


def _get_quiet(ib):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # inputs other than the first are unused
        return ib.get()


def one(t):
    """A VM whose ``main(x: t) -> t`` returns ``x``."""
    return sig_vm(f"(x: {t}) -> {t}")


# --------------------------------------------------------------------------------------------
# rx.types renders the text form
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "t, text",
    [
        (T.Any(), "any"),
        (T.Object(), "object"),
        (T.Str(), "str"),
        (T.int64, "i64"),
        (T.Scalar("float32"), "f32"),
        (T.Scalar(np.uint8), "u8"),
        (T.bool_, "bool"),
        (T.Tensor((None, 16), "float32"), "tensor<[?, 16], f32>"),
        (T.Tensor(("n", "m"), "f64"), "tensor<[n, m], f64>"),
        (T.Tensor(), "tensor<*, ?>"),
        (T.Tensor((), "int32"), "tensor<[], i32>"),
        (T.Tensor((4,), "float32", contiguous=True), "tensor<[4], f32, contiguous>"),
        (T.Shape(2), "shape<2>"),
        (T.Shape(), "shape<?>"),
        (T.Tuple(T.int64, T.Str()), "tuple<i64, str>"),
        (T.Tuple(), "tuple<>"),
        (T.List(T.float32), "list<f32>"),
        (T.Dict({"name": T.Str(), "depth": T.int64}), "dict<{depth: i64, name: str}>"),
        (T.Dict({"a b": T.int64}), 'dict<{"a b": i64}>'),
        (T.List("tensor<*, f32>"), "list<tensor<*, f32>>"),
    ],
)
def test_types_render_the_text_form(t, text):
    assert str(t) == text
    assert repr(t) == f"<relaxvm.types {text}>"
    # The VM parses it back to the same text.
    ex = _get_quiet(_builder(f"(x: {text}) -> {text}"))
    assert ex.signature_text("main") == f"(x: {text}) -> {text}"


def _builder(sig):
    ib = rx.ExecBuilder()
    with ib.function("main", signature=sig):
        ib.emit_ret(ib.r(0))
    return ib


@pytest.mark.parametrize(
    "make, exc",
    [
        (lambda: T.Scalar("complex64"), ValueError),
        (lambda: T.Tensor(16, "float32"), TypeError),
        (lambda: T.Tensor((-1,), "float32"), ValueError),
        (lambda: T.Tensor(("1n",), "float32"), ValueError),
        (lambda: T.Shape(-1), ValueError),
        (lambda: T.Tuple(3), TypeError),
        (lambda: T.Signature([("x", T.int64), ("x", T.int64)], T.int64), ValueError),
    ],
)
def test_types_reject_malformed(make, exc):
    with pytest.raises(exc):
        make()


def test_signature_object_and_text_are_interchangeable():
    sig = T.Signature(
        [("x", T.Tensor(("n", 16), "float32")), ("k", T.float32), ("cfg", T.Dict({"name": T.Str(), "depth": T.int64}))],
        T.Tuple(T.Tensor(None, "float32"), T.int64),
    )
    text = "(x: tensor<[n, 16], f32>, k: f32, cfg: dict<{depth: i64, name: str}>) -> tuple<tensor<*, f32>, i64>"
    assert str(sig) == text
    assert sig.param_names == ["x", "k", "cfg"]
    for s in (sig, text):
        ib = rx.ExecBuilder()
        with ib.function("main", signature=s):
            ib.emit_call("vm.builtin.make_tuple", args=[ib.r(0), ib.r(1), ib.r(2)], dst=ib.r(3))
            ib.emit_ret(ib.r(3))
        ex = ib.get()
        assert ex.signature_text("main") == text
        assert ex.num_inputs("main") == 3 and ex.param_names("main") == ["x", "k", "cfg"]


def test_function_signature_must_agree_with_num_inputs_and_names():
    ib = rx.ExecBuilder()
    with pytest.raises(ValueError, match="num_inputs"):
        ib.function("main", num_inputs=2, signature="(x: i64) -> i64")
    with pytest.raises(ValueError, match="param_names"):
        ib.function("main", param_names=["y"], signature="(x: i64) -> i64")
    with pytest.raises(ValueError, match="signature"):
        ib.function("main", signature="(x: tensr<*, f32>) -> i64")
    # Agreeing values are fine.
    with ib.function("main", num_inputs=1, param_names=["x"], signature="(x: i64) -> i64"):
        ib.emit_ret(ib.r(0))
    assert ib.get().signature_text("main") == "(x: i64) -> i64"


# --------------------------------------------------------------------------------------------
# Each kind of type, accepted and rejected at the call boundary
# --------------------------------------------------------------------------------------------

ACCEPTED = [
    ("any", None),
    ("object", rx.cpu()),
    ("str", "hello"),
    ("bool", True),
    ("i64", 7),
    ("i8", -128),
    ("u8", 255),
    ("f32", 1.5),
    ("f64", 3),  # ints are accepted for floats
    ("tensor<*, ?>", np.zeros((2, 3), "int8")),
    ("tensor<[2, 3], f32>", np.zeros((2, 3), "float32")),
    ("tensor<[?, 3], f32>", np.zeros((5, 3), "float32")),
    ("tensor<[n, n], f64>", np.zeros((4, 4))),
    ("tensor<*, i32>", rx.tensor(np.arange(3, dtype="int32"))),
    ("shape<2>", rx.Shape([2, 3])),
    ("shape<?>", rx.Shape([1, 2, 3])),
    ("tuple<i64, str>", (1, "a")),
    ("tuple<i64, str>", [1, "a"]),
    ("list<f32>", [1.0, 2.0, 3.0]),
    ("list<f32>", ()),
]


def assert_same_value(out, value):
    """``out`` (what ``main`` returned of ``value``) holds ``value``'s value: arrays as tensors
    of the same dtype, shape and elements, sequences item by item, scalars equal and of the
    declared kind (an int given for a float comes back a float of its value)."""
    if isinstance(value, (np.ndarray, rx.Tensor)):
        want = value.numpy() if isinstance(value, rx.Tensor) else value
        assert isinstance(out, rx.Tensor), type(out)
        assert out.numpy().dtype == want.dtype and out.numpy().shape == want.shape
        np.testing.assert_array_equal(out.numpy(), want)
    elif isinstance(value, rx.Shape):
        assert isinstance(out, rx.Shape) and tuple(out) == tuple(value)
    elif isinstance(value, (tuple, list)):
        assert isinstance(out, (tuple, list)) and len(out) == len(value), out
        for o, v in zip(out, value):
            assert_same_value(o, v)
    else:
        assert out == value, (out, value)
        if isinstance(value, (bool, str, rx.Device)) or value is None:
            assert type(out) is type(value), (type(out), type(value))


@pytest.mark.parametrize("t, value", ACCEPTED, ids=[f"{t}-{i}" for i, (t, _) in enumerate(ACCEPTED)])
def test_accepted(t, value):
    vm = one(t)
    out = vm["main"](value)
    assert_same_value(out, value)
    if t in ("f32", "f64"):
        assert isinstance(out, float), type(out)
    if t.startswith(("i", "u")) and "<" not in t:
        assert type(out) is int, type(out)
    if t.startswith("tuple"):
        assert isinstance(out, tuple), type(out)
    if t.startswith("list"):
        assert isinstance(out, list), type(out)


REJECTED = [
    ("str", 1, TypeError, "str"),
    ("bool", 1, TypeError, "bool"),
    ("i64", "7", TypeError, "int64"),
    ("i64", 1.5, TypeError, "int64"),
    ("i8", 128, ValueError, "does not fit"),
    ("u8", -1, ValueError, "does not fit"),
    ("f32", "x", TypeError, "float32"),
    ("tensor<*, f32>", "x", TypeError, "tensor"),
    ("tensor<*, f32>", np.zeros(3, "float64"), TypeError, "float32"),
    ("tensor<*, f32>", rx.tensor(np.zeros(3, "int32")), TypeError, "float32"),
    ("tensor<[2, 3], f32>", np.zeros((3, 2), "float32"), ValueError, "dimension 0 must be 2"),
    ("tensor<[2, 3], f32>", np.zeros((2, 3, 1), "float32"), ValueError, "rank 2"),
    ("tensor<[n, n], f64>", np.zeros((2, 3)), ValueError, "symbol n"),
    ("shape<2>", rx.Shape([1, 2, 3]), ValueError, "2 dimensions"),
    ("shape<2>", (1, 2), TypeError, "shape"),
    ("tuple<i64, str>", (1, 2), TypeError, "str"),
    ("tuple<i64, str>", (1,), ValueError, "2 items"),
    ("tuple<i64, str>", 1, TypeError, "tuple"),
    ("list<f32>", [1.0, "x"], TypeError, "float32"),
    ("list<f32>", 1.0, TypeError, "list"),
    ("dict<{a: i64}>", 1, TypeError, "dict"),
]


@pytest.mark.parametrize("t, value, exc, fragment", REJECTED, ids=[f"{t}-{i}" for i, (t, *_) in enumerate(REJECTED)])
def test_rejected(t, value, exc, fragment):
    vm = one(t)
    with pytest.raises(exc, match=fragment) as info:
        vm["main"](value)
    assert '"x"' in str(info.value)  # the parameter is named
    assert isinstance(info.value, rx.VMError)


def test_rejected_before_any_instruction_runs(unique_name):
    calls = []
    name = unique_name()
    rx.register_func(name, lambda x: calls.append(x) or x)

    def body(ib):
        ib.emit_call(name, args=[ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))

    vm = sig_vm("(x: tensor<[2], f32>) -> tensor<[2], f32>", body)
    with pytest.raises(ValueError):
        vm["main"](np.zeros(3, "float32"))
    with pytest.raises(TypeError):
        vm["main"](np.zeros(2, "float64"))
    assert calls == []
    vm["main"](np.zeros(2, "float32"))
    assert len(calls) == 1


def test_wrong_argument_count():
    vm = one("i64")
    with pytest.raises(TypeError):
        vm["main"]()
    with pytest.raises(TypeError):
        vm["main"](1, 2)


# --------------------------------------------------------------------------------------------
# Symbolic dimensions
# --------------------------------------------------------------------------------------------


def add_vm(sig="(a: tensor<[n, k], f32>, b: tensor<[n, k], f32>) -> tensor<[n, k], f32>"):
    def body(ib):
        ib.emit_call("vm.op.add", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))

    return sig_vm(sig, body)


def test_symbolic_dimensions_agree_across_parameters():
    vm = add_vm()
    out = vm["main"](np.ones((2, 3), "float32"), np.ones((2, 3), "float32"))
    np.testing.assert_array_equal(out.numpy(), np.full((2, 3), 2, "float32"))
    # Each call binds the symbols afresh.
    vm["main"](np.ones((5, 1), "float32"), np.ones((5, 1), "float32"))


@pytest.mark.parametrize("b_shape, which", [((3, 3), "n"), ((2, 4), "k")])
def test_symbolic_dimension_disagreement_names_both(b_shape, which):
    vm = add_vm()
    with pytest.raises(ValueError) as info:
        vm["main"](np.ones((2, 3), "float32"), np.ones(b_shape, "float32"))
    msg = str(info.value)
    assert '"b"' in msg and '"a"' in msg and f"symbol {which}" in msg


def test_symbols_across_structured_arguments():
    vm = one("tuple<tensor<[n], f32>, tensor<[n], f32>>")
    vm["main"]((np.zeros(2, "float32"), np.zeros(2, "float32")))
    with pytest.raises(ValueError, match="symbol n"):
        vm["main"]((np.zeros(2, "float32"), np.zeros(3, "float32")))


# --------------------------------------------------------------------------------------------
# Conversion: lists to tensors of the declared dtype, strided inputs
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["f32", "f64", "i32", "i64", "u8", "bool"])
def test_list_becomes_tensor_of_declared_dtype(dtype):
    vm = one(f"tensor<[2, 2], {dtype}>")
    out = vm["main"]([[1, 0], [1, 1]])
    assert isinstance(out, rx.Tensor)
    assert out.dtype == rx.DataType(dtype)
    np.testing.assert_array_equal(out.numpy(), np.array([[1, 0], [1, 1]]).astype(out.numpy().dtype))


def test_scalar_becomes_zero_rank_tensor():
    out = one("tensor<[], f32>")["main"](2.5)
    assert out.shape == rx.Shape([]) and out.dtype == "float32" and out.numpy() == 2.5


def test_list_conversion_is_still_checked():
    vm = one("tensor<[2], f32>")
    with pytest.raises(ValueError, match="dimension 0 must be 2"):
        vm["main"]([1, 2, 3])
    with pytest.raises(TypeError, match='"x"'):
        one("tensor<[2], i32>")["main"]([1.5, 2.5])  # would truncate
    with pytest.raises(TypeError, match='"x"'):
        vm["main"]([[1, 2], [3]])  # ragged
    with pytest.raises(TypeError, match='"x"'):
        vm["main"](["a", "b"])


def test_dtype_mismatch_is_an_error_not_a_cast():
    vm = one("tensor<[3], f32>")
    with pytest.raises(TypeError, match="float32") as info:
        vm["main"](np.arange(3, dtype="float64"))
    assert "float64" in str(info.value) and '"x"' in str(info.value)


def test_untyped_tensor_list_uses_numpy_default():
    out = one("tensor<*, ?>")["main"]([1.0, 2.0])
    assert out.dtype == "float64"


def test_non_contiguous_input_is_a_strided_view():
    base = np.arange(12, dtype="float32").reshape(3, 4)
    view = base[:, ::2]
    assert not view.flags.c_contiguous
    out = one("tensor<[3, 2], f32>")["main"](view)
    np.testing.assert_array_equal(out.numpy(), view)


def test_contiguous_parameter_gets_contiguous_data():
    base = np.arange(12, dtype="float32").reshape(3, 4)
    view = base[:, ::2]
    out = one("tensor<[3, 2], f32, contiguous>")["main"](view)
    arr = out.numpy()
    np.testing.assert_array_equal(arr, view)
    assert arr.flags.c_contiguous
    # A copy: writing to the source does not change it.
    base[0, 0] = 100
    assert out.numpy()[0, 0] == 0


# --------------------------------------------------------------------------------------------
# Structured arguments and results
# --------------------------------------------------------------------------------------------


def test_dict_argument_passed_in_sorted_key_order():
    def body(ib):
        ib.emit_call("vm.builtin.tuple_getitem", args=[ib.r(0), ib.imm(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))

    vm = sig_vm("(cfg: dict<{name: str, depth: i64}>) -> i64", body)
    assert vm["main"]({"name": "x", "depth": 3}) == 3  # depth sorts first
    assert vm["main"](cfg={"depth": 4, "name": "y"}) == 4


@pytest.mark.parametrize(
    "value, fragments",
    [
        ({"depth": 1}, ["missing", "name"]),
        ({"depth": 1, "name": "x", "extra": 2}, ["unexpected", "extra"]),
        ({"name": "x", "width": 2}, ["missing", "depth", "unexpected", "width"]),
    ],
)
def test_dict_argument_wrong_keys(value, fragments):
    vm = one("dict<{name: str, depth: i64}>")
    with pytest.raises(ValueError) as info:
        vm["main"](value)
    for f in fragments + ['"x"']:
        assert f in str(info.value)


def test_dict_slot_types_are_checked_and_converted():
    vm = one("dict<{w: tensor<[2], f32>, k: i64}>")
    out = vm["main"]({"w": [1, 2], "k": 3})
    assert out["w"].dtype == "float32" and out["k"] == 3
    with pytest.raises(TypeError, match=r'"x" of main\["k"\]'):
        vm["main"]({"w": [1, 2], "k": "3"})


def test_dict_result_comes_back_as_dict():
    vm = one("dict<{b: i64, a: tuple<str, list<i64>>}>")
    out = vm["main"]({"a": ("s", [1, 2]), "b": 2})
    assert out == {"a": ("s", [1, 2]), "b": 2}


def test_tuple_argument_from_list_and_tuple_result():
    vm = one("tuple<tensor<[2], i64>, f64>")
    out = vm["main"]([[1, 2], 3])
    assert isinstance(out, tuple)
    assert out[0].dtype == "int64" and out[1] == 3.0


def test_list_of_tensors_converts_each_item():
    vm = one("list<tensor<[n], f32>>")
    out = vm["main"]([[1, 2], [3, 4]])
    assert isinstance(out, list) and [t.dtype for t in out] == ["float32", "float32"]
    with pytest.raises(ValueError, match="symbol n"):
        vm["main"]([[1, 2], [3, 4, 5]])


# --------------------------------------------------------------------------------------------
# Keyword arguments
# --------------------------------------------------------------------------------------------


def kw_vm():
    def body(ib):
        ib.emit_call("vm.builtin.make_tuple", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))

    return sig_vm("(x: tensor<[n], f32>, k: f32) -> tuple<tensor<[n], f32>, f32>", body)


def test_keyword_arguments_with_signature():
    vm = kw_vm()
    x, k = vm["main"](k=2, x=[1, 2])
    assert x.dtype == "float32" and k == 2.0 and isinstance(k, float)
    x, k = vm["main"]([1], k=0.5)
    assert k == 0.5


@pytest.mark.parametrize(
    "args, kwargs, fragment",
    [
        ((), {"x": [1.0]}, "missing argument 'k'"),
        ((), {"x": [1.0], "k": 1, "z": 2}, "unexpected keyword argument 'z'"),
        (([1.0],), {"x": [1.0], "k": 1}, "multiple values for argument 'x'"),
    ],
)
def test_keyword_argument_errors(args, kwargs, fragment):
    with pytest.raises(TypeError, match=fragment):
        kw_vm()["main"](*args, **kwargs)


def test_set_input_converts_with_the_signature():
    vm = kw_vm()
    vm.set_input("main", k=1, x=[1, 2])
    vm.invoke_stateful("main")
    x, k = vm.get_outputs("main")
    assert x.dtype == "float32"


# --------------------------------------------------------------------------------------------
# Reflection, introspection, text form, persistence
# --------------------------------------------------------------------------------------------

SIG = "(x: tensor<[n, 16], f32>, k: f32, cfg: dict<{name: str, depth: i64}>) -> tuple<tensor<*, f32>, f32, i64>"


def sig_ex():
    ib = rx.ExecBuilder()
    with ib.function("main", signature=SIG):
        # (x, k, cfg's first slot): the declared result.
        ib.emit_call("vm.builtin.tuple_getitem", args=[ib.r(2), ib.imm(0)], dst=ib.r(3))
        ib.emit_call("vm.builtin.make_tuple", args=[ib.r(0), ib.r(1), ib.r(3)], dst=ib.r(4))
        ib.emit_ret(ib.r(4))
    with ib.function("plain", num_inputs=1):
        ib.emit_ret(ib.r(0))
    return ib.get()


REFLECTION = {
    "a": [["ndarray", "f32", 2, "n", 16], "f32", ["sdict", ["depth", "i64"], ["name", "str"]]],
    "r": [["stuple", ["ndarray", "f32", None], "f32", "i64"]],
}


def test_json_reflection():
    ex = sig_ex()
    assert ex.signature("main") == REFLECTION
    assert json.loads(json.dumps(ex.signature("main"))) == REFLECTION
    assert ex.signature("plain") is None
    with pytest.raises(KeyError):
        ex.signature("nope")
    vm = rx.VirtualMachine(ex)
    assert vm.signature("main") == REFLECTION
    assert vm.signature("plain") is None
    with pytest.raises(KeyError):
        vm.signature("nope")


def test_reflection_of_every_kind():
    ex = _get_quiet(
        _builder("(a: any, b: str, c: object, d: shape<2>, e: list<bool>, f: tensor<*, ?>, g: u8) -> shape<?>")
    )
    assert ex.signature("main") == {
        "a": ["unknown", "str", "object", ["shape", 2], ["slist", "i1"], ["ndarray", None, None], "u8"],
        "r": [["shape", None]],
    }


def test_inspect_signature_and_help():
    vm = rx.VirtualMachine(sig_ex())
    f = vm["main"]
    s = inspect.signature(f)
    assert list(s.parameters) == ["x", "k", "cfg"]
    assert s.parameters["x"].annotation == "tensor<[n, 16], f32>"
    assert s.parameters["cfg"].annotation == "dict<{depth: i64, name: str}>"
    assert s.return_annotation == "tuple<tensor<*, f32>, f32, i64>"
    canonical = (
        "(x: tensor<[n, 16], f32>, k: f32, cfg: dict<{depth: i64, name: str}>) -> tuple<tensor<*, f32>, f32, i64>"
    )
    assert f.signature_text == canonical
    assert canonical in f.__doc__
    assert f.__name__ == "main"
    text = pydoc.render_doc(f, renderer=pydoc.plaintext)
    assert "main(x: 'tensor<[n, 16], f32>'" in text and canonical in text
    assert canonical in repr(f)
    # Without a signature: untyped parameters (or *args).
    p = vm["plain"]
    assert p.signature_text is None
    assert str(inspect.signature(p)) == "(*args)"
    ib = rx.ExecBuilder()
    with ib.function("named", param_names=["a", "b"]):
        ib.emit_call("vm.builtin.make_tuple", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    assert str(inspect.signature(rx.VirtualMachine(ib.get())["named"])) == "(a, b)"


def test_as_text_shows_signatures():
    text = sig_ex().as_text()
    assert "sig=(x: tensor<[n, 16], f32>, k: f32, cfg: dict<{depth: i64, name: str}>)" in text


@pytest.mark.parametrize("strip_debug", [False, True])
def test_save_load_round_trip_keeps_signatures(strip_debug, tmp_path):
    ex = sig_ex()
    for loaded in (
        rx.load_executable(ex.save_to_bytes(strip_debug=strip_debug)),
        _save_load(ex, tmp_path / "m.rvx", strip_debug),
    ):
        assert loaded.signature("main") == REFLECTION
        assert loaded.signature_text("main") == ex.signature_text("main")
        assert loaded.entry == "main"
        vm = rx.VirtualMachine(loaded)
        with pytest.raises(ValueError, match="dimension 1 must be 16"):
            vm["main"](np.zeros((2, 3), "float32"), 1.0, {"name": "a", "depth": 1})
        out = vm["main"](np.zeros((2, 16), "float32"), 1.0, {"name": "a", "depth": 1})
        assert out[2] == 1  # dict slots are passed in sorted key order: depth is the first


def _save_load(ex, path, strip_debug):
    ex.save(path, strip_debug=strip_debug)
    return rx.load_executable(path)


def test_pickle_keeps_signatures():
    import pickle

    ex = pickle.loads(pickle.dumps(sig_ex()))
    assert ex.signature("main") == REFLECTION


def test_entry():
    assert sig_ex().entry == "main"
    ib = rx.ExecBuilder()
    with ib.function("start", signature="(x: i64) -> i64"):
        ib.emit_ret(ib.r(0))
    assert ib.get().entry is None
    ib = rx.ExecBuilder()
    with ib.function("start", signature="(x: i64) -> i64"):
        ib.emit_ret(ib.r(0))
    ib.set_entry("start")
    ex = ib.get()
    assert ex.entry == "start"
    assert rx.load_executable(ex.save_to_bytes()).entry == "start"


def test_closure_over_signature_function_is_checked():
    """A closure returned by the VM is checked when invoked."""
    ib = rx.ExecBuilder()
    with ib.function("inner", signature="(a: i64, b: i64) -> i64"):
        ib.emit_call("vm.builtin.int.add", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    with ib.function("main", num_inputs=1):
        ib.emit_call("vm.builtin.make_closure", args=[ib.f("inner"), ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    vm = rx.VirtualMachine(ib.get())
    clo = vm["main"](2)
    assert vm.invoke_closure(clo, 3) == 5
    with pytest.raises(TypeError, match='"a"'):
        vm.invoke_closure(clo, "3")
