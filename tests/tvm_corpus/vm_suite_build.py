"""The models of TVM 0.27's ``test_vm_build.py`` for the suite ``vm_suite`` (see build_vm_suite.py)."""

from __future__ import annotations

import os
import sys

import numpy as np
import tvm.relax.testing.vm  # noqa: F401 - registers the test.vm.* functions TVM's tests call
from tvm.relax.testing import nn
from tvm.script import ir as I  # noqa: E741
from tvm.script import relax as R
from tvm.script import tirx as T

import tvm
from tvm import relax, te, tirx, topi

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import corpus  # noqa: E402
from vm_suite_common import model, rand  # noqa: E402

BUILD = "test_vm_build.py"


def _identity_module():
    @I.ir_module
    class Mod:
        @R.function
        def foo(x: R.Tensor((3, 4), "float32"), y: R.Tensor((3, 4), "float32")):
            z = R.call_pure_packed("test.vm.identity", x, y, ty_args=(R.Tensor(ndim=2, dtype="float32")))  # noqa: F841
            return y

    return Mod


@model(BUILD)
def test_vm_compile_simple():
    return _identity_module(), [("call", "foo", [rand(3, 4), rand(3, 4)], {"after": True})]


@model(BUILD)
def test_vm_compile_without_target_arg():
    # TVM builds it without a target (the default, llvm): see build().
    return _identity_module(), [("call", "foo", [rand(3, 4), rand(3, 4)], {"after": True})]


@model(BUILD)
def test_match_check():
    @I.ir_module
    class Mod:
        @R.function
        def foo(x: R.Tensor(["n", "m"], "int32"), y: R.Any) -> R.Tensor(["m", "n"], dtype=None):
            return y

    x0 = np.zeros((1, 2), "int32")
    return Mod, [
        ("call", "foo", [x0, np.zeros((2, 1), "float32")]),
        ("call", "foo", [x0, np.zeros((1, 2), "float32")], {"error": "RuntimeError"}),
        ("call", "foo", [x0, np.zeros((2, 1, 1), "float32")], {"error": "ValueError"}),
    ]


@model(BUILD)
def test_vm_compile_stage2():
    @I.ir_module
    class Mod:
        @R.function
        def foo(x: R.Tensor(dtype="float32")) -> R.Shape:
            n, m = T.int64(), T.int64()
            _ = R.match_cast(x, R.Tensor((n, m), "float32"))
            return R.shape([n * 2, m * 3])

    return Mod, [
        ("call", "foo", [rand(32, 16)]),
        ("call", "foo", [np.zeros((1, 2), "int32")], {"error": "ValueError"}),
        ("call", "foo", [np.zeros((1,), "float32")], {"error": "ValueError"}),
        ("call", "foo", [()], {"error": "TypeError"}),
    ]


@model(BUILD)
def test_vm_compile_stage3():
    @I.ir_module
    class Mod:
        @R.function
        def foo(x: R.Tensor((32, 16), "float32")) -> R.Tensor:
            with R.dataflow():
                y = R.call_dps_packed("test.vm.identity", (x), R.Tensor((32, 16), dtype="float32"))
                R.output(y)
            return y

    return Mod, [("call", "foo", [rand(32, 16)])]


@model(BUILD)
def test_vm_compile_e2e():
    @I.ir_module
    class Mod:
        @R.function
        def foo(x: R.Tensor(dtype="float32")) -> R.Tensor:
            with R.dataflow():
                n, m = T.int64(), T.int64()
                _ = R.match_cast(x, R.Tensor((n, m), "float32"))
                y = R.call_dps_packed("test.vm.tile", (x), R.Tensor((n, m * 2), dtype="float32"))
                R.output(y)
            return y

    return Mod, [("saved", "foo", [rand(32, 16)])]


@model(BUILD)
def test_vm_compile_e2e_func_param_with_shape():
    @I.ir_module
    class Mod:
        @T.prim_func(s_tir=True)
        def tir_matmul(x: T.handle, y: T.handle, z: T.handle) -> None:
            T.func_attr({"global_symbol": "tir_matmul"})
            m = T.int32()
            n = T.int32()
            k = T.int32()
            A = T.match_buffer(x, (m, n))
            B = T.match_buffer(y, (n, k))
            C = T.match_buffer(z, (m, k))
            for i, j, k in T.grid(m, k, n):  # noqa: B020 - TVM's test, verbatim
                with T.sblock("matmul"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    with T.init():
                        C[vi, vj] = T.float32(0)
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

        @R.function
        def func(x: R.Tensor(("m", "n"), "float32"), w: R.Tensor(("n", "k"), "float32")) -> R.Tensor:
            m, k = T.int64(), T.int64()
            gv0 = R.call_tir(Mod.tir_matmul, (x, w), R.Tensor((m, k), dtype="float32"))
            return gv0

    return Mod, [("saved", "func", [rand(32, 16), rand(16, 32)])]


@model(BUILD)
def test_call_tir_inplace_e2e_simple():
    @I.ir_module
    class Mod:
        @T.prim_func(s_tir=True)
        def copy(
            A: T.Buffer((2, 3), "int32"),
            B: T.Buffer((2, 3), "int32"),
            C: T.Buffer((2, 3), "int32"),
            out1: T.Buffer((2, 3), "int32"),
        ):
            T.func_attr({"tirx.noalias": True})
            for i0, i1 in T.grid(T.int64(2), T.int64(3)):
                with T.sblock("T_zeros"):
                    ax0, ax1 = T.axis.remap("SS", [i0, i1])
                    T.reads(C[ax0, ax1])
                    T.writes(A[ax0, ax1], B[ax0, ax1], out1[ax0, ax1])
                    A[ax0, ax1] = C[ax0, ax1]
                    B[ax0, ax1] = C[ax0, ax1]
                    out1[ax0, ax1] = C[ax0, ax1]

        @R.function
        def main(x: R.Tensor((2, 3), "int32"), y: R.Tensor((2, 3), "int32"), z: R.Tensor((2, 3), "int32")):
            res = R.call_tir_inplace(
                Mod.copy,
                (x, y, z),
                [0, 1, -1],
                [R.Tensor((2, 3), "int32"), R.Tensor((2, 3), "int32"), R.Tensor((2, 3), "int32")],
            )
            return res

    args = [np.zeros((2, 3), "int32"), np.zeros((2, 3), "int32"), np.ones((2, 3), "int32")]
    return Mod, [("stateful", "main", args)]


@model(BUILD)
def test_call_tir_inplace_e2e_rw():
    @I.ir_module
    class Mod:
        @T.prim_func(s_tir=True)
        def inplace_add(A: T.Buffer((2, 3), "int32"), B: T.Buffer((2, 3), "int32")):
            T.func_attr({"tirx.noalias": True})
            for i0, i1 in T.grid(T.int64(2), T.int64(3)):
                with T.sblock("T_add"):
                    ax0, ax1 = T.axis.remap("SS", [i0, i1])
                    T.reads(A[ax0, ax1], B[ax0, ax1])
                    T.writes(A[ax0, ax1])
                    A[ax0, ax1] = A[ax0, ax1] + B[ax0, ax1]

        @R.function
        def main(x: R.Tensor((2, 3), "int32"), y: R.Tensor((2, 3), "int32")) -> R.Tensor((2, 3), "int32"):
            res = R.call_tir_inplace(Mod.inplace_add, (x, y), [0], R.Tensor((2, 3), "int32"))
            return res

    return Mod, [("stateful", "main", [np.ones((2, 3), "int32"), np.ones((2, 3), "int32")])]


@model(BUILD)
def test_vm_emit_te_concat():
    bb = relax.BlockBuilder()
    n, m = tirx.Var("n", "int64"), tirx.Var("m", "int64")
    x = relax.Var("x", R.Tensor([n], "float32"))
    y = relax.Var("y", R.Tensor([m], "float32"))

    def te_func(A, B):
        return te.compute((n + m), lambda i: tvm.tirx.if_then_else(i < n, A[i], B[i - n]))

    with bb.function("rx_func", [x, y]):
        bb.emit_func_output(bb.emit_te(te_func, x, y))
    return bb.get(), [("saved", "rx_func", [rand(1), rand(2)])]


@model(BUILD)
def test_vm_emit_te_dtype_change():
    bb = relax.BlockBuilder()
    n = tirx.Var("n", "int64")
    x = relax.Var("x", R.Tensor([n], "float32"))

    def te_func(A):
        return te.compute((n,), lambda i: A[i].astype("int16"))

    with bb.function("rx_func", [x]):
        bb.emit_func_output(bb.emit_te(te_func, x))
    return bb.get(), [("saved", "rx_func", [rand(1)])]


@model(BUILD)
def test_vm_emit_te_floor_symbolic_shape():
    bb = relax.BlockBuilder()
    n = tirx.Var("n", "int64")
    x = relax.Var("x", R.Tensor([n], "float32"))

    def te_func(A):
        return te.compute((tirx.floordiv(n, 2),), lambda i: A[i] + 1)

    with bb.function("rx_func", [x]):
        bb.emit_func_output(bb.emit_te(te_func, x))
    return bb.get(), [("saved", "rx_func", [rand(9)])]


@model(BUILD)
def test_vm_emit_te_constant_param_cpu():
    bb = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor((2, 2), "float32"))
    c = relax.const(rand(2, 2), "float32")
    with bb.function("main", [x]):
        with bb.dataflow():
            gv = bb.emit_output(bb.emit_te(topi.add, x, c))
        bb.emit_func_output(gv)
    return bb.get(), [("saved", "main", [rand(2, 2)])]


@model(BUILD)
def test_vm_relax_symbolic_shape():
    bb = relax.BlockBuilder()
    n = tirx.Var("n", "int64")
    x = relax.Var("x", R.Tensor([n], "float32"))
    y = relax.Var("y", R.Tensor([(n // 2) + 1], "float32"))

    def te_func(A, B):
        return te.compute((n,), lambda i: A[i] + B[i // 2])

    with bb.function("rx_func", [x, y]):
        bb.emit_func_output(bb.emit_te(te_func, x, y))
    return bb.get(), [("saved", "rx_func", [rand(5), rand(3)])]


@model(BUILD)
def test_vm_relax_symbolic_shape_tuple():
    @I.ir_module(s_tir=True)
    class Mod:
        @R.function
        def main(shape: R.Shape(["m", "n"])):
            m = T.int64()
            n = T.int64()
            return R.shape([2 * m, 3 * n])

    return Mod, [
        ("call", "main", [corpus.ShapeValue([2, 3])]),
        ("call", "main", [corpus.ShapeValue([2, 3, 4])], {"error": "ValueError"}),
        # TVM passes R.prim_value(2), a Relax expression, which its FFI refuses as an argument.
        ("call", "main", [2], {"error": "TypeError"}),
    ]


@model(BUILD)
def test_vm_relax_dyn_tir_shape():
    bb = relax.BlockBuilder()
    n = tirx.Var("n", "int64")

    def te_func(A):
        return te.compute((n + 1), lambda i: A[i])

    with bb.function("rx_func"):
        x = nn.Placeholder((n,), dtype="float32", name="x")
        y = nn.Placeholder((n + 1,), dtype="float32", name="y")
        x1 = bb.emit_te(te_func, y)
        bb.emit_func_output(x1, params=[x, y])
    return bb.get(), [("saved", "rx_func", [rand(2), rand(3)])]


@model(BUILD)
def test_vm_tuple():
    bb = relax.BlockBuilder()
    n = tirx.Var("n", "int64")
    with bb.function("rx_func"):
        x = nn.Placeholder((n,), dtype="float32", name="x")
        y = nn.Placeholder((n,), dtype="float32", name="y")
        tup = relax.Tuple([x, y])
        bb.emit_func_output([tup, tup[0]], params=[x, y])
    return bb.get(), [("call", "rx_func", [rand(5), rand(5)])]


@model(BUILD)
def test_vm_tuplegetitem():
    @I.ir_module
    class Mod:
        @R.function
        def tuple_get_item(x: R.Tensor(ndim=2, dtype="float32"), y: R.Tensor(ndim=2, dtype="float32")):
            t = (x, y)
            a = t[0]
            b = t[1]
            c = R.call_pure_packed("test.vm.add", a, b, ty_args=(R.Tensor(ndim=2, dtype="float32")))
            return c

    return Mod, [("saved", "tuple_get_item", [rand(2, 3), rand(2, 3)])]


@model(BUILD)
def test_lower_memory_alloc_storage_tensor():
    @I.ir_module
    class Mod:
        @R.function
        def main(x: R.Tensor((2, 3), dtype="float32")):
            R.func_attr({"relax.force_pure": True})
            storage = R.memory.alloc_storage(
                R.shape([24]), virtual_device_index=0, storage_scope="global", dtype="float32"
            )
            y = R.memory.alloc_tensor(storage, 0, R.shape([2, 3]), dtype="float32")
            _ = Mod.copy(x, y)
            return y

        @T.prim_func(s_tir=True)
        def copy(A: T.Buffer((2, 3), "float32"), B: T.Buffer((2, 3), "float32")):
            for i0, i1 in T.grid(2, 3):
                with T.sblock("block"):
                    vi0, vi1 = T.axis.remap("SS", [i0, i1])
                    B[vi0, vi1] = A[vi0, vi1]

    return Mod, [("call", "main", [rand(2, 3)])]


@model(BUILD)
def test_sub_func_call():
    @I.ir_module
    class Mod:
        @T.prim_func(s_tir=True)
        def tir_matmul(x: T.handle, y: T.handle, z: T.handle) -> None:
            T.func_attr({"global_symbol": "tir_matmul"})
            m = T.int32()
            n = T.int32()
            k = T.int32()
            A = T.match_buffer(x, (m, n))
            B = T.match_buffer(y, (n, k))
            C = T.match_buffer(z, (m, k))
            for i, j, k in T.grid(m, k, n):  # noqa: B020 - TVM's test, verbatim
                with T.sblock("matmul"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    with T.init():
                        C[vi, vj] = T.float32(0)
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

        @R.function
        def relax_matmul_tir(x: R.Tensor((32, 32), "float32"), w: R.Tensor((32, 32), "float32")) -> R.Tensor(
            (32, 32), dtype="float32"
        ):
            with R.dataflow():
                gv0 = R.call_tir(Mod.tir_matmul, (x, w), R.Tensor((32, 32), dtype="float32"))
                R.output(gv0)
            return gv0

        @R.function
        def relax_matmul_packed(x: R.Tensor((32, 32), "float32"), w: R.Tensor((32, 32), "float32")) -> R.Any:
            gv0 = R.call_pure_packed("test.vm.mul", x, w, ty_args=(R.Tensor(ndim=2, dtype="float32")))
            return gv0

        @R.function
        def main(x: R.Tensor((32, 32), "float32"), w: R.Tensor((32, 32), "float32")) -> R.Any:
            gv0 = Mod.relax_matmul_tir(x, w)
            gv1 = Mod.relax_matmul_packed(gv0, gv0)
            return gv1

    return Mod, [("saved", "main", [rand(32, 32), rand(32, 32)])]


@model(BUILD)
def test_recursion():
    @I.ir_module
    class Mod:
        @R.function
        def recursion(n: R.Tensor((1,), "float32")) -> R.Tensor:
            cond = R.call_pure_packed("test.vm.equal_zero", n, ty_args=(R.Tensor(ndim=1, dtype="float32")))
            if cond:
                res = R.const(1.0)
            else:
                gv0 = R.call_pure_packed("test.vm.subtract_one", n, ty_args=(R.Tensor(ndim=1, dtype="float32")))
                tmp = Mod.recursion(gv0)
                res = R.call_pure_packed("test.vm.add", tmp, tmp, ty_args=(R.Tensor(ndim=1, dtype="float32")))
            return res

    return Mod, [("saved", "recursion", [np.full(1, 6, "float32")])]


@model(BUILD)
def test_vm_closure():
    @I.ir_module
    class Mod:
        @R.function
        def lifted_func_1(x: R.Tensor((2, 3), "float32"), env: R.Tensor((2, 3), "float32")):
            return R.call_pure_packed("test.vm.add", x, env, ty_args=(R.Tensor()))

        @R.function
        def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32")):
            clo = R.make_closure(Mod.lifted_func_1, (x,))
            res = R.invoke_pure_closure(clo, (y,), ty_args=(R.Tensor()))
            return res

    y = np.array([[3.1, 4.0, 5.0], [6.0, 7.1, 9.0]], dtype="float32")
    return Mod, [("saved", "main", [rand(2, 3), y])]


@model(BUILD)
def test_time_evaluator():
    @I.ir_module
    class Mod:
        @R.function
        def main(x: R.Tensor((1,), "float32"), y: R.Tensor((1,), "float32")):
            return R.call_pure_packed("test.vm.add", x, y, ty_args=(R.Tensor(ndim=1, dtype="float32")))

    args = [rand(1), rand(1)]
    return Mod, [("time_stateful", "main", args), ("time_saved", "main", args)]


def _set_input_module():
    @I.ir_module
    class TestVMSetInput:
        @T.prim_func(s_tir=True)
        def test_vm_mul(x: T.handle, y: T.handle, z: T.handle):
            T.func_attr({"global_symbol": "test_vm_mul"})
            m = T.int32()
            n = T.int32()
            A = T.match_buffer(x, (m, n))
            B = T.match_buffer(y, (m, n))
            C = T.match_buffer(z, (m, n))
            for i, j in T.grid(m, n):
                with T.sblock("mul"):
                    vi = T.axis.spatial(m, i)
                    vj = T.axis.spatial(n, j)
                    with T.init():
                        C[vi, vj] = T.float32(0)
                    C[vi, vj] = A[vi, vj] * B[vi, vj]

        @R.function
        def test_vm_tuple(x: R.Tensor((), "int32")) -> R.Tuple(R.Tensor((), "int32"), R.Tensor((), "int32")):
            return (x, x)

        @R.function
        def test_vm_nested_tuple(
            x: R.Tensor((), "int32"),
        ) -> R.Tuple(R.Tuple(R.Tensor((), "int32"), R.Tuple(R.Tensor((), "int32"))), R.Tensor((), "int32")):
            return ((x, (x,)), x)

        @R.function
        def main(x: R.Tensor((32, 32), "float32"), w: R.Tensor((32, 32), "float32")) -> R.Tensor:
            gv0 = R.call_tir(TestVMSetInput.test_vm_mul, (x, w), R.Tensor((32, 32), dtype="float32"))
            return gv0

    return TestVMSetInput


@model(BUILD)
def test_set_input():
    a, b = rand(32, 32), rand(32, 32)
    return _set_input_module(), [
        ("stateful", "main", [a, b]),
        ("stateful", "main", [], {"kwargs": {"x": a, "w": b}}),
        ("stateful", "test_vm_tuple", [np.array(2, "int32")]),
        ("stateful", "test_vm_nested_tuple", [np.array(1, "int32")]),
    ]


@model(BUILD)
def test_set_input_tuple():
    @I.ir_module
    class Mod:
        @R.function
        def main(x: R.Tuple([R.Tensor((32,), "float32"), R.Tensor((32,), "float32")])) -> R.Tensor:
            y = x[0]
            return y

    return Mod, [("stateful", "main", [(rand(32), rand(32))])]


@model(BUILD)
def test_save_function_kwargs():
    return _set_input_module(), [("saved_kwargs", "main", [], {"kwargs": {"x": rand(32, 32), "w": rand(32, 32)}})]


@model(BUILD)
def test_save_function_time_evaluator():
    return _set_input_module(), [("time_saved", "main", [rand(32, 32), rand(32, 32)])]


@model(BUILD)
def test_set_input_stateless_failure():
    args = [rand(32, 32), rand(32, 32)]
    return _set_input_module(), [("set_input_then_call", "main", args, {"error": "RuntimeError"})]


@model(BUILD)
def test_set_input_invoke_failure():
    return _set_input_module(), [("invoke_without_input", "main", [], {"error": "ValueError"})]


@model(BUILD)
def test_set_input_get_failure():
    args = [rand(32, 32), rand(32, 32)]
    return _set_input_module(), [("set_input_then_get", "main", args, {"error": "ValueError"})]
