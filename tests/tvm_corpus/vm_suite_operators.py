"""The models of TVM 0.27's ``test_relax_operators.py`` for the suite ``vm_suite`` (see build_vm_suite.py)."""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np
import tvm.relax.testing.vm  # noqa: F401 - registers the test.vm.* functions TVM's tests call
from tvm.script import ir as I  # noqa: E741
from tvm.script import relax as R
from tvm.script import tirx as T

import tvm
from tvm import relax

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import corpus  # noqa: E402
from vm_suite_common import MODELS, RNG, model, rand  # noqa: E402

OPS = "test_relax_operators.py"


def _function_module(func: Any) -> tuple[Any, str]:
    """TVM's run_cpu: a relax.Function becomes a module of that one function."""
    return tvm.IRModule.from_expr(func), func.attrs["global_symbol"]


@model(OPS)
def test_unique():
    @I.ir_module
    class Mod:
        @R.function
        def foo(x: R.Tensor(("m", "n"), "int64")):
            y = R.unique(x, sorted=False)
            y_sorted = R.unique(x)
            return y, y_sorted

    return Mod, [("call", "foo", [RNG.integers(0, 16, (16, 16)).astype("int64")])]


@model(OPS)
def test_print():
    @I.ir_module
    class Mod:
        @R.function(pure=False)
        def foo(x: R.Tensor((), "int32")):
            p1 = R.print(x)  # noqa: F841
            p2 = R.print(x, format="Number: {}")  # noqa: F841
            t = (x, x)
            p3 = R.print(t, format="Tuple: {}")  # noqa: F841
            p4 = R.print(x, t)  # noqa: F841
            p5 = R.print(x, x, format="Custom print: {} {}")  # noqa: F841
            p6 = R.print(x, t, format="Another print: {} {}")  # noqa: F841
            return x

    return Mod, [("call", "foo", [np.array(1, "int32")], {"stdout": True})]


def _assert_function(kind: str) -> tuple[Any, list]:
    """The functions of TVM's assert tests: (module, cases)."""
    one = [np.array(1, "int32")]
    if kind == "passes":

        @R.function(pure=False)
        def func(x: R.Tensor((), "int32")):
            _ = R.assert_op(relax.const(True))
            return x

        args, error = one, None
    elif kind == "passes_with_format_args":

        @R.function(pure=False)
        def func(x: R.Tensor((), "int32")):
            _ = R.assert_op(relax.const(True), x, format="You won't see me")
            return x

        args, error = one, None
    elif kind == "fails":

        @R.function(pure=False)
        def func(x: R.Tensor((), "int32")):
            _ = R.assert_op(relax.const(False))
            return x

        args, error = one, "AssertionError"
    elif kind == "fails_with_message":

        @R.function(pure=False)
        def func(x: R.Tensor((), "int32")):
            _ = R.assert_op(relax.const(False), format="I failed...")
            return x

        args, error = one, "AssertionError"
    elif kind == "fails_with_args":

        @R.function(pure=False)
        def func(x: R.Tensor((), "int32")):
            _ = R.assert_op(relax.const(False), [x, x])
            return x

        args, error = [np.array(5, "int32")], "AssertionError"
    elif kind == "fails_with_formatted_args":

        @R.function(pure=False)
        def func(x: R.Tensor((), "int32")):
            _ = R.assert_op(relax.const(False), x, format="Number: {}")
            return x

        args, error = [np.array(6, "int32")], "AssertionError"
    elif kind.startswith("on_argument"):

        @R.function(pure=False)
        def func(condition: R.Tensor((), "bool"), x: R.Tensor((), "int32")):
            _ = R.assert_op(condition)
            return x

        passes = kind == "on_argument_passes"
        args, error = [np.array(passes), np.array(5, "int32")], None if passes else "AssertionError"
    else:

        @R.function(pure=False)
        def func(x: R.Tensor(["N"], "int32")):
            N = T.int64()
            _ = R.assert_op(R.prim_value(N % 8 == 0))
            return x

        passes = kind == "on_symbolic_var_passes"
        args, error = [np.arange(8 if passes else 10, dtype="int32")], None if passes else "AssertionError"
    mod, name = _function_module(func)
    return mod, [("call", name, args, {"error": error} if error else {})]


for _kind in (
    "passes",
    "passes_with_format_args",
    "fails",
    "fails_with_message",
    "fails_with_args",
    "fails_with_formatted_args",
    "on_argument_passes",
    "on_argument_fails",
    "on_symbolic_var_passes",
    "on_symbolic_var_fails",
):
    MODELS[(OPS, f"test_assert_{_kind}")] = lambda k=_kind: _assert_function(k)


@model(OPS)
def test_op_shape_of():
    @I.ir_module
    class Mod:
        @R.function
        def get_shape(t: R.Tensor(ndim=-1, dtype="int32")) -> R.Shape(ndim=-1):
            return R.shape_of(t)

        @R.function
        def get_constrained_shape(t: R.Tensor(ndim=1, dtype="int32")) -> R.Shape(ndim=1):
            return R.shape_of(t)

        @R.function
        def get_scalar_shape() -> R.Shape(()):
            x: R.Tensor((), "int32") = R.const(1, dtype="int32")
            return R.shape_of(x)

        @R.function
        def get_constant_shape() -> R.Shape((2, 2)):
            x: R.Tensor((2, 2), "int32") = R.const(np.array([[1, 2], [3, 4]], dtype="int32"), dtype="int32")
            return R.shape_of(x)

    return Mod, [
        ("call", "get_scalar_shape", []),
        ("call", "get_constant_shape", []),
        ("call", "get_shape", [np.array(1, "int32")]),
        ("call", "get_shape", [np.zeros((1, 2, 3), "int32")]),
        ("call", "get_constrained_shape", [np.zeros((1,), "int32")]),
    ]


@model(OPS)
def test_op_shape_to_tensor():
    @I.ir_module
    class Mod:
        @R.function
        def const_shape(shape: R.Shape(ndim=-1)) -> R.Tensor(ndim=-1):
            return R.shape_to_tensor(shape)

        @R.function
        def symbolic_shape(shape: R.Shape(("m", "n"))) -> R.Tensor(ndim=-1):
            m = T.int64()  # noqa: F841
            n = T.int64()  # noqa: F841
            return R.shape_to_tensor(shape)

    shape = corpus.ShapeValue
    return Mod, [
        ("call", "const_shape", [shape([3, 2])]),
        ("call", "const_shape", [shape([3, 3, 2])]),
        ("call", "const_shape", [shape([3, 3, 2, 2])]),
        ("call", "symbolic_shape", [shape([3, 2])]),
    ]


@model(OPS)
def test_op_call_pure_packed():
    @I.ir_module
    class Mod:
        @R.function
        def pure_copy(x: R.Tensor((3, 4), "float32")):
            z = R.call_pure_packed("vm.builtin.copy", x, ty_args=(R.Tensor((3, 4), dtype="float32")))
            return z

    return Mod, [("call", "pure_copy", [rand(3, 4)])]


@tvm.register_global_func("test.inplace.add", override=True)
def _inplace_add(a, b):
    a.copyfrom(a.numpy() + b.numpy())
    return a


@tvm.register_global_func("test.inplace.tuple_add", override=True)
def _inplace_tuple_add(a, b):
    c = tvm.runtime.tensor(a.numpy() + b.numpy())
    a.copyfrom(a.numpy() + b.numpy())
    return tvm.runtime.convert([a, c])


@model(OPS)
def test_op_call_inplace_packed():
    @I.ir_module
    class Mod:
        @R.function
        def pure_copy(x: R.Tensor((3, 4), "float32")):
            z = R.call_inplace_packed(
                "vm.builtin.copy", x, inplace_indices=0, ty_args=(R.Tensor((3, 4), dtype="float32"))
            )
            return z

        @R.function
        def inplace_add(x: R.Tensor((3, 4), "float32"), y: R.Tensor((3, 4), "float32")):
            z = R.call_inplace_packed(
                "test.inplace.add", x, y, inplace_indices=0, ty_args=(R.Tensor((3, 4), dtype="float32"))
            )
            return z

        @R.function
        def inplace_tuple(x: R.Tensor((3, 4), "float32"), y: R.Tensor((3, 4), "float32")):
            z = R.call_inplace_packed(
                "test.inplace.tuple_add",
                x,
                y,
                inplace_indices=[0, -1],
                ty_args=(R.Tensor((3, 4), dtype="float32"), R.Tensor((3, 4), dtype="float32")),
            )
            return z

    return Mod, [
        ("call", "pure_copy", [rand(3, 4)]),
        ("call", "inplace_add", [rand(3, 4), rand(3, 4)], {"after": True}),
        ("call", "inplace_tuple", [rand(3, 4), rand(3, 4)], {"after": True}),
    ]


def _flat(x: Any) -> np.ndarray:
    """What TVM's test functions make of their argument: TVM's lowering passes the arguments
    tuple as one argument, so a function receives ``(x,)``."""
    if isinstance(x, tvm.runtime.Tensor):
        return x.numpy()
    return np.array([t.numpy() for t in x]).flatten()


def _relu(x):
    return tvm.runtime.tensor(np.maximum(_flat(x), np.float32(0)))


def _sigmoid(x):
    return tvm.runtime.tensor((1 / (1 + np.exp(-_flat(x)))).astype("float32"))


@model(OPS)
def test_op_call_py_func():
    # TVM's test computes with torch; the port with numpy, on both sides (tests/tvm_vm_suite.py).
    register = tvm.get_global_func("vm.builtin.register_py_func")
    register("torch_relu", _relu)
    register("torch_sigmoid", _sigmoid)

    @I.ir_module
    class Mod:
        @R.function
        def simple_call(x: R.Tensor((3,), "float32")):
            result = R.call_py_func(R.str("torch_relu"), (x,), out_ty=R.Tensor((3,), "float32"))
            return result

        @R.function
        def multiple_calls(x: R.Tensor((2,), "float32")):
            y = R.call_py_func(R.str("torch_relu"), (x,), out_ty=R.Tensor((2,), "float32"))
            z = R.call_py_func(R.str("torch_sigmoid"), (y,), out_ty=R.Tensor((2,), "float32"))
            return z

    return Mod, [
        ("call", "simple_call", [np.array([-1.0, 0.0, 1.0], "float32")]),
        ("call", "multiple_calls", [np.array([-0.5, 0.5], "float32")]),
    ]


@model(OPS)
def test_op_to_device():
    @I.ir_module
    class Mod:
        @R.function
        def to_dev(x: R.Tensor((3, 4), "float32")):
            z = R.call_pure_packed("vm.builtin.to_device", x, 1, 0, ty_args=(R.Tensor((3, 4), dtype="float32")))
            return z

    return Mod, [("call", "to_dev", [rand(3, 4)])]


@model(OPS)
def test_op_to_vdevice():
    @I.ir_module
    class Mod:
        I.module_global_infos({"vdevice": [I.vdevice("llvm")]})

        @R.function
        def to_vdev(x: R.Tensor((3, 4), "float32")):
            ret = R.to_vdevice(x, "llvm")
            return ret

    return Mod, [("call", "to_vdev", [rand(3, 4)])]


@model(OPS)
def test_scalar_tensor_as_branch_condition():
    @R.function
    def func(condition: R.Tensor((), "bool")):
        if condition:
            out = R.prim_value(5)
        else:
            out = R.prim_value(10)
        return out

    mod, name = _function_module(func)
    return mod, [("call", name, [np.array(True)]), ("call", name, [np.array(False)])]


@model(OPS)
def test_prim_value_as_branch_condition():
    @R.function
    def func(condition: R.Prim("bool")):
        if condition:
            out = R.prim_value(5)
        else:
            out = R.prim_value(10)
        return out

    mod, name = _function_module(func)
    return mod, [("call", name, [True]), ("call", name, [False])]


@model(OPS)
def test_computed_prim_value_as_branch_condition():
    @R.function
    def func(x: R.Tensor(["N"], "int64")):
        N = T.int64()
        if R.prim_value(N % 16 == 0):
            out = R.prim_value(5)
        else:
            out = R.prim_value(10)
        return out

    mod, name = _function_module(func)
    return mod, [("call", name, [np.arange(16)]), ("call", name, [np.arange(20)])]
