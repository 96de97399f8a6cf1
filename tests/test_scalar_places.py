"""The scalar and str conversions at the Python boundary name their place and the declared type
(attack findings perfpy/01-05): a str UTF-8 cannot hold, an int for a float parameter past
int64, a float past a declared float type (as a scalar and in a list for a tensor), an int past
int64 in a list for an int tensor, and a result that is not of the declared type."""

from __future__ import annotations

import warnings

import pytest

import relaxvm as rx


def identity(signature: str | None = None, **kw):
    """`main` returning its one argument, declared `signature` (or untyped with `kw`)."""
    ib = rx.ExecBuilder()
    with ib.function("main", signature=signature) if signature else ib.function("main", **kw):
        ib.emit_ret(ib.r(0))
    return rx.VirtualMachine(ib.get())["main"]


def refusal(f, *args) -> str:
    with warnings.catch_warnings():
        # numpy warns of the overflow the conversion then refuses.
        warnings.simplefilter("ignore")
        with pytest.raises(rx.VMError) as e:
            f(*args)
    return str(e.value)


def test_a_lone_surrogate_names_the_parameter_the_item_and_the_callback() -> None:
    f = identity(num_inputs=1, param_names=["x"])
    assert refusal(f, "a\ud800b") == (
        'parameter "x" of main: str is not valid UTF-8 (a lone surrogate \\ud800 at position 1)'
    )
    assert refusal(f, ("ok", "a\udfffb")) == (
        'parameter "x" of main[1]: str is not valid UTF-8 (a lone surrogate \\udfff at position 1)'
    )
    with pytest.raises(rx.VMValueError, match="str is not valid UTF-8"):
        f("\ud800")
    rx.register_func("test.scalar_places.surrogate", lambda: "x\ud800", override=True)
    ib = rx.ExecBuilder()
    with ib.function("g", num_inputs=0):
        ib.emit_call("test.scalar_places.surrogate", args=[], dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    g = rx.VirtualMachine(ib.get())["g"]
    assert "result of test.scalar_places.surrogate: str is not valid UTF-8 (a lone surrogate \\ud800" in refusal(g)
    assert f("ok \u00e9\U0001f600") == "ok \u00e9\U0001f600"


def test_an_int_past_int64_for_a_float_parameter_becomes_the_float() -> None:
    f = identity("(x: f64) -> any")
    assert f(2**63) == 2.0**63 and type(f(2**63)) is float
    assert f(-(2**70)) == -(2.0**70)
    assert identity("(x: tuple<i64, f64>) -> any")((1, 2**64)) == (1, 2.0**64)
    assert (
        refusal(f, 2**1100)
        == 'parameter "x" of main: (1101 bits) does not fit in float64 (|x| <= 1.7976931348623157e308)'
    )
    # Past float32 once a float: the float32 rule.
    assert refusal(identity("(x: f32) -> any"), 2**200).endswith("does not fit in float32 (|x| <= 3.4028235e38)")


def test_a_float_past_a_declared_float_type_is_refused() -> None:
    f = identity("(x: f32) -> any")
    assert refusal(f, 1e300) == 'parameter "x" of main: 1e300 does not fit in float32 (|x| <= 3.4028235e38)'
    with pytest.raises(rx.VMValueError, match='"x" of main: -1e39 does not fit in float32'):
        f(x=-1e39)
    assert refusal(identity("(x: f16) -> any"), 70000) == (
        'parameter "x" of main: 70000 does not fit in float16 (|x| <= 65504.0)'
    )
    # inf, nan and the largest float32 are float32 values.
    assert f(float("inf")) == float("inf")
    assert f(3.4028234663852886e38) == 3.4028234663852886e38


def test_a_list_element_past_the_tensors_dtype_is_named() -> None:
    assert refusal(identity("(x: tensor<[2], f32>) -> any"), [1.0, 1e300]) == (
        'parameter "x" of main, element [1]: 1e300 does not fit in float32 (|x| <= 3.4028235e38)'
    )
    assert refusal(identity("(x: tensor<[2, 1], f16>) -> any"), [[1], [100000]]) == (
        'parameter "x" of main, element [1, 0]: 100000 does not fit in float16 (|x| <= 65504.0)'
    )
    assert refusal(identity("(x: tensor<[], f32>) -> any"), 1e300).startswith('parameter "x" of main: 1e300 does not')
    # inf given stays inf.
    assert identity("(x: tensor<[2], f32>) -> any")([float("inf"), 1.0]).numpy().tolist() == [float("inf"), 1.0]
    assert refusal(identity("(x: tensor<[1], i64>) -> any"), [2**70]) == (
        'parameter "x" of main, element [0]: 1180591620717411303424 does not fit in int64 (-2^63..2^63-1)'
    )
    assert refusal(identity("(x: tensor<[2, 1], i8>) -> any"), [[1], [-(2**70)]]) == (
        'parameter "x" of main, element [1, 0]: -1180591620717411303424 does not fit in int8 (-2^7..2^7-1)'
    )
    assert refusal(identity("(x: tensor<*, ?>) -> any"), [2**70]).endswith("does not fit in int64 (-2^63..2^63-1)")
    # A float tensor takes big ints as floats; other objects are still not numbers.
    assert identity("(x: tensor<[1], f64>) -> any")([2**70]).numpy().tolist() == [2.0**70]
    assert "not numbers" in refusal(identity("(x: tensor<[1], i64>) -> any"), ["a"])


def test_a_result_not_of_the_declared_type_is_refused() -> None:
    def returning(result: str, body=None):
        ib = rx.ExecBuilder()
        with ib.function("main", signature=f"(x: i64) -> {result}"):
            if body:
                body(ib)
            else:
                ib.emit_ret(ib.r(0))
        return rx.VirtualMachine(ib.get())["main"]

    assert refusal(returning("bool"), 1) == "type mismatch: expected bool for result of main, found int 1"
    with pytest.raises(rx.VMTypeError, match="expected str for result of main, found int"):
        returning("str")(3)
    with pytest.raises(rx.VMTypeError, match="expected tensor for result of main"):
        returning("tensor<[2], f32>")(7)

    def three(ib):
        ib.emit_call("vm.builtin.make_tuple", args=[ib.r(0), ib.r(0), ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))

    assert refusal(returning("dict<{a: i64, b: i64}>", three), 1) == (
        "result of main: expected a structure of 2 slots, got 3"
    )
    assert refusal(returning("i8"), 300) == "result of main: 300 does not fit in int8 (-2^7..2^7-1)"
    # An int for a float result is the float; a matching result is itself.
    assert returning("f64")(4) == 4.0 and type(returning("f64")(4)) is float
    assert returning("any")(5) == 5 and returning("i64")(5) == 5
    assert returning("tuple<i64, i64, i64>", three)(2) == (2, 2, 2)
