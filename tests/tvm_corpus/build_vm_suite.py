"""Builds the suite ``vm_suite``: Apache TVM 0.27's end-to-end Relax VM tests
(``tests/python/relax/test_vm_build.py`` and neighbours), each model compiled in both exec modes
(``bytecode`` and ``compiled``: VM TIR functions), exported with ``export_library`` and run on TVM's
own VM, whose outcomes are recorded for relaxvm to reproduce (see corpus.py for the format).

Run with TVM (``.venv-tvm``): ``build_vm_suite.py OUT_DIR`` writes ``OUT_DIR/vm_suite/``. The
tests ``tests/test_tvm_vm_suite_*.py`` (one per TVM source file) run the recorded cases on relaxvm.

A model is one TVM test's module in one mode (``test_vm_build.py::test_vm_tuple[compiled]``);
its cases are what the test does with the VM, by kind:

- ``call``: ``vm[function](*args)``: the result, or the class of TVM's error; with
  ``after``, also the arguments after the call (a packed function writing into one);
- ``saved``: TVM's ``check_saved_func``: the call, then the same call through ``save_function``;
- ``stateful``: ``set_input`` (positional, or ``kwargs``), ``invoke_stateful``, ``get_outputs``,
  with which outputs are the very input tensors (``aliases``);
- ``saved_kwargs``: ``save_function`` with keyword arguments, then the saved function;
- ``set_input_then_call``, ``invoke_without_input``, ``set_input_then_get``: the misuses TVM
  refuses (the error class);
- ``time_stateful``, ``time_saved``: ``time_evaluator`` on ``invoke_stateful`` and on a saved
  function (whether it produced results).

Tests TVM runs only on a GPU, through its RPC server, or that inspect TVM's own IR are not built;
``SKIPPED`` lists each with its reason (the test files turn them into skips).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from typing import Any, Callable

import numpy as np
import tvm.relax.testing.vm  # noqa: F401 - registers the test.vm.* functions TVM's tests call
import tvm_ffi
from tvm.relax.testing import nn
from tvm.script import ir as I  # noqa: E741
from tvm.script import relax as R
from tvm.script import tirx as T

import tvm
from tvm import relax, te, tirx, topi

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import corpus  # noqa: E402
from progress import Progress  # noqa: E402

MODES = ("bytecode", "compiled")
RNG = np.random.default_rng(20261127)
TARGET = tvm.target.Target("llvm", host="llvm")


def rand(*shape: int, dtype: str = "float32") -> np.ndarray:
    return RNG.random(shape).astype(dtype)


# What is not built, and why: (source file, test, reason).
SKIPPED = [
    ("test_vm_build.py", "test_vm_emit_te_constant_param_gpu", "needs a GPU (CUDA)"),
    ("test_vm_build.py", "test_vm_to_device", "needs a GPU (CUDA)"),
    ("test_vm_build.py", "test_relax_module_with_multiple_targets", "needs a GPU (CUDA)"),
    ("test_vm_build.py", "test_save_function_kwargs_rpc", "needs TVM's RPC server"),
    ("test_vm_build.py", "test_save_function_time_evaluator_rpc", "needs TVM's RPC server"),
    ("test_vm_build.py", "test_set_input_stateless_failure_rpc", "needs TVM's RPC server"),
    ("test_vm_build.py", "test_set_input_invoke_failure_rpc", "needs TVM's RPC server"),
    ("test_vm_build.py", "test_set_input_get_failure_rpc", "needs TVM's RPC server"),
    ("test_vm_multi_device.py", "test_multi_gpu", "needs several GPUs"),
    ("test_vm_multi_device.py", "test_multi_device", "needs a GPU (CUDA)"),
]

# Models --------------------------------------------------------------------------------------
# (source file, test name) -> function of nothing returning (module, cases); a case is a tuple
# (kind, function, args[, extra]) — see the module's docstring.
MODELS: dict[tuple[str, str], Callable[[], tuple[Any, list]]] = {}


def model(source: str, name: str | None = None) -> Callable:
    def register(f: Callable) -> Callable:
        MODELS[(source, name or f.__name__)] = f
        return f

    return register


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


SCOPE = "test_vm_alloc_storage_with_scope.py"


@model(SCOPE)
def test_alloc_storage_with_scope_global():
    @I.ir_module(s_tir=True)
    class Module:
        @T.prim_func(s_tir=True)
        def add(
            arg0: T.Buffer((2, 2), "float32"),
            arg1: T.Buffer((2, 2), "float32"),
            output: T.Buffer((2, 2), "float32"),
        ):
            T.func_attr({"operator_name": "relax.add"})
            for ax0 in range(2):
                for ax1 in range(2):
                    with T.sblock("T_add"):
                        v_ax0 = T.axis.spatial(2, ax0)
                        v_ax1 = T.axis.spatial(2, ax1)
                        T.reads(arg0[v_ax0, v_ax1], arg1[v_ax0, v_ax1])
                        T.writes(output[v_ax0, v_ax1])
                        output[v_ax0, v_ax1] = arg0[v_ax0, v_ax1] + arg1[v_ax0, v_ax1]

        @R.function(pure=False)
        def main(x: R.Tensor((2, 2), dtype="float32")):
            cls = Module
            storage = R.vm.alloc_storage(
                R.shape([2 * 2]), runtime_device_index=0, dtype="float32", storage_scope="global"
            )
            alloc = R.vm.alloc_tensor(storage, offset=0, shape=R.shape([2, 2]), dtype="float32")
            _: R.Tuple = cls.add(x, x, alloc)
            out: R.Tensor((2, 2), dtype="float32") = alloc
            return out

    # TVM's test builds it in compiled mode only, at opt_level 3, and runs it with memory_cfg="naive".
    return Module, [("stateful", "main", [rand(2, 2)], {"memory_cfg": "naive"})], {"opt_level": 3}


CALLBACK = "test_vm_callback_function.py"


@model(CALLBACK)
def test_pass_tensor_to_function():
    @R.function
    def relax_func(A: R.Tensor([16], "int32"), callback: R.Callable([R.Tensor([16], "int32")], R.Tuple([]))):
        B = R.multiply(A, R.const(2))
        _ = callback(B)
        return R.tuple()

    mod, name = _function_module(relax_func)
    return mod, [("callback_store", name, [np.arange(16, dtype="int32")])]


@model(CALLBACK)
def test_generate_tensor_in_function():
    @R.function
    def relax_func(callback: R.Callable([], R.Tensor([16], "int32"))):
        A = callback()
        B = R.multiply(A, R.const(2))
        return B

    mod, name = _function_module(relax_func)
    return mod, [("callback_make", name, [np.arange(16, dtype="int32")])]


@model(CALLBACK)
def test_catch_exception_with_full_stack_trace():
    @R.function
    def relax_func(callback: R.Callable([], R.Tensor([16], "int32"))):
        A = callback()
        return A

    mod, name = _function_module(relax_func)
    return mod, [("callback_raise", name, [], {"error": "RuntimeError"})]


CODEGEN = "test_vm_codegen_only.py"
# TVM's test_vm_codegen_only lowers already-lowered Relax with the VM code generator alone
# (relax.vm_build._vmcodegen and _vmlink) instead of relax.build: {"codegen": True}.
LOWERED = {"codegen": True}


def _copy_module():
    @I.ir_module
    class TestVMMove:
        @R.function(pure=False)
        def foo(x: R.Tensor((3, 4), "float32")):
            R.func_attr({"global_symbol": "foo"})
            z = R.call_packed("vm.builtin.copy", x, ty_args=(R.Tensor((3, 4), dtype="float32")))
            return z

    return TestVMMove


@model(CODEGEN)
def test_vm_copy():
    return _copy_module(), [("saved", "foo", [rand(3, 4)])], LOWERED


@model(CODEGEN)
def test_vm_to_device():
    @I.ir_module
    class TestVMToDevice:
        @R.function(pure=False)
        def foo(x: R.Tensor((3, 4), "float32")):
            R.func_attr({"global_symbol": "foo"})
            z = R.call_packed("vm.builtin.to_device", x, 1, 0, ty_args=(R.Tensor((3, 4), dtype="float32")))
            return z

    return TestVMToDevice, [("saved", "foo", [rand(3, 4)])], LOWERED


@model(CODEGEN)
def test_if_cond_const():
    @I.ir_module
    class TestVMIfCondConst:
        @R.function
        def main(x: R.Tensor(ndim=2, dtype="float32")) -> R.Tensor(ndim=2, dtype="float32"):
            R.func_attr({"global_symbol": "main"})
            if relax.const(True, dtype="bool"):
                ret = x
            else:
                ret = x
            return ret

    return TestVMIfCondConst, [("call", "main", [rand(3, 4, dtype="float64")])], LOWERED


@model(CODEGEN)
def test_vm_exec_serialize_export_library():
    return _copy_module(), [("text_roundtrip", "foo", [])], LOWERED


@model(CODEGEN)
def test_if_cond():
    @I.ir_module
    class TestVMCompileIf:
        @R.function(pure=False)
        def ife(cond: R.Tensor((), "bool"), x: R.Tensor((3, 4), "float32")) -> R.Tensor:
            R.func_attr({"global_symbol": "ife"})
            if cond:
                w = R.call_packed("test.vm.add", x, x, ty_args=(R.Tensor))
            else:
                w = R.call_packed("test.vm.mul", x, x, ty_args=(R.Tensor))
            return w

    x = rand(3, 4, dtype="float64")
    conds = [np.array(1, "int32"), np.array(True), np.array(0, "int32"), np.array(False)]
    return TestVMCompileIf, [("call", "ife", [c, x]) for c in conds], LOWERED


@model(CODEGEN)
def test_vm_return_const_tuple():
    @I.ir_module
    class ReturnConstTuple:
        @R.function
        def main(x: R.Tensor(ndim=2, dtype="float32")):
            R.func_attr({"global_symbol": "main"})
            y = R.const([1, 2])
            z = (y, R.const([3, 4]), x)
            return z

    return ReturnConstTuple, [("call", "main", [rand(2, 3, dtype="float64")])], LOWERED


@model(CODEGEN)
def test_vm_const_as_call_arg():
    @I.ir_module
    class TestVMConstAsCallArg:
        @R.function(pure=False)
        def main(x: R.Tensor(ndim=2, dtype="float32")):
            R.func_attr({"global_symbol": "main"})
            a = R.call_packed(
                "test.vm.add", relax.const([1, 2]), relax.const([3, 4]), ty_args=(R.Tensor(ndim=2, dtype="float32"))
            )
            b = R.call_packed("test.vm.add", a, x, ty_args=(R.Tensor(ndim=2, dtype="float32")))
            return b

    return TestVMConstAsCallArg, [("call", "main", [rand(1, 2, dtype="float64")])], LOWERED


@model(CODEGEN)
def test_shape_check_builtin():
    from tvm.relax.testing.runtime_builtin import MakeShapeCode as MK
    from tvm.relax.testing.runtime_builtin import MatchShapeCode as MS

    @I.ir_module
    class TestVMShapeCheck:
        @R.function(pure=False)
        def main(x: R.Tensor(["n", "m"], "float32")) -> R.Shape(ndim=3):
            R.func_attr({"global_symbol": "main"})
            n = T.int64()  # noqa: F841
            k = T.int64()  # noqa: F841
            shape_heap = R.call_builtin_with_ctx(
                "vm.builtin.alloc_shape_heap", [R.prim_value(3)], ty_args=[R.Tensor(ndim=1, dtype="int64")]
            )
            _ = R.call_packed("vm.builtin.check_tensor_info", x, 2, R.dtype("float32"), "", ty_args=[R.Tuple()])
            _ = R.call_packed(
                "vm.builtin.match_shape",
                x,
                shape_heap,
                2,
                MS.STORE_TO_HEAP,
                0,
                MS.STORE_TO_HEAP,
                1,
                "",
                ty_args=[R.Tuple()],
            )
            s = R.call_packed(
                "vm.builtin.make_shape",
                shape_heap,
                3,
                MK.LOAD_SHAPE,
                1,
                MK.LOAD_SHAPE,
                0,
                MK.USE_IMM,
                2,
                ty_args=[R.Shape(ndim=3)],
            )
            return s

    return (
        TestVMShapeCheck,
        [
            ("call", "main", [np.zeros((1, 2), "float32")]),
            ("call", "main", [()], {"error": "TypeError"}),
            ("call", "main", [np.zeros(1, "float32")], {"error": "ValueError"}),
            ("call", "main", [np.zeros((1, 2), "int32")], {"error": "ValueError"}),
        ],
        LOWERED,
    )


@model(CODEGEN)
def test_prim_value():
    @I.ir_module
    class TestVMPrimExpr:
        @R.function
        def main():
            R.func_attr({"global_symbol": "main"})
            ret = R.prim_value(T.int64(1))
            return ret

    return TestVMPrimExpr, [("call", "main", [])], LOWERED


@model(CODEGEN)
def test_string_imm():
    @I.ir_module
    class TestVMStringImm:
        @R.function
        def main():
            R.func_attr({"global_symbol": "main"})
            ret = R.str("hello")
            return ret

    return TestVMStringImm, [("call", "main", [])], LOWERED


@model(CODEGEN)
def test_datatype_imm():
    @I.ir_module
    class TestDataTypeImm:
        @R.function
        def main():
            R.func_attr({"global_symbol": "main"})
            ret = R.dtype("float32")
            return ret

    return TestDataTypeImm, [("call", "main", [])], LOWERED


@model(CODEGEN)
def test_vm_builtin_reshape():
    @I.ir_module
    class TestVMBuiltinReshape:
        @R.function(pure=False)
        def main(x: R.Tensor((3, 4), "float32")):
            R.func_attr({"global_symbol": "main"})
            y = R.call_packed("vm.builtin.reshape", x, R.shape([6, 2]), ty_args=R.Tensor((6, 2), "float32"))
            return y

    return TestVMBuiltinReshape, [("call", "main", [rand(3, 4)])], LOWERED


@model(CODEGEN)
def test_vm_kill_object():
    @I.ir_module(s_tir=True)
    class TestKillObject:
        @T.prim_func(s_tir=True)
        def full(T_full: T.Buffer((T.int64(4),), "float32")):
            T.func_attr({"global_symbol": "full", "tirx.noalias": True})
            for ax0 in range(T.int64(4)):
                with T.sblock("T_full"):
                    v_ax0 = T.axis.spatial(T.int64(4), ax0)
                    T.reads()
                    T.writes(T_full[v_ax0])
                    T_full[v_ax0] = T.float32(0)

        @T.prim_func(s_tir=True)
        def full1(T_full: T.Buffer((T.int64(4),), "float32")):
            T.func_attr({"global_symbol": "full1", "tirx.noalias": True})
            for ax0 in range(T.int64(4)):
                with T.sblock("T_full"):
                    v_ax0 = T.axis.spatial(T.int64(4), ax0)
                    T.reads()
                    T.writes(T_full[v_ax0])
                    T_full[v_ax0] = T.float32(1)

        @R.function(pure=False)
        def main() -> R.Tensor((4,), dtype="float32"):
            R.func_attr({"global_symbol": "main"})
            cls = TestKillObject
            storage: R.Any = R.vm.alloc_storage(R.shape([16]), R.prim_value(0), R.dtype("uint8"))
            alloc: R.Tensor((4,), dtype="float32") = R.vm.alloc_tensor(
                storage, R.prim_value(0), R.shape([4]), R.dtype("float32")
            )
            _: R.Tuple = cls.full(alloc)
            __1: R.Tuple = R.vm.kill_object(alloc)
            x: R.Tensor((4,), dtype="float32") = alloc  # noqa: F841
            alloc1: R.Tensor((4,), dtype="float32") = R.vm.alloc_tensor(
                storage, R.prim_value(0), R.shape([4]), R.dtype("float32")
            )
            _1: R.Tuple = cls.full(alloc1)
            _1_1: R.Tuple = R.vm.kill_object(alloc1)
            y: R.Tensor((4,), dtype="float32") = alloc1  # noqa: F841
            storage_1: R.Any = R.vm.alloc_storage(R.shape([16]), R.prim_value(0), R.dtype("uint8"))
            alloc2: R.Tensor((4,), dtype="float32") = R.vm.alloc_tensor(
                storage_1, R.prim_value(0), R.shape([4]), R.dtype("float32")
            )
            _2: R.Tuple = cls.full1(alloc2)
            z: R.Tensor((4,), dtype="float32") = alloc2
            _2_1: R.Tuple = R.vm.kill_object(storage)
            return z

    return TestKillObject, [("call", "main", [])], LOWERED


@model(CODEGEN)
def test_preserve_trivial_bindings():
    @I.ir_module(s_tir=True)
    class Mod:
        @R.function(pure=False)
        def main():
            callback = R.ExternFunc("test.vm.check_if_defined")
            storage = R.vm.alloc_storage(R.shape([16]), R.prim_value(0), R.dtype("uint8"))
            alloc = R.vm.alloc_tensor(storage, R.prim_value(0), R.shape([4]), R.dtype("float32"))
            storage_alias = storage
            alloc_alias = alloc
            storage_before = callback(storage)
            alloc_before = callback(alloc)
            storage_alias_before = callback(storage_alias)
            alloc_alias_before = callback(alloc_alias)
            _ = R.vm.kill_object(storage)
            _ = R.vm.kill_object(alloc)
            storage_after = callback(storage)
            alloc_after = callback(alloc)
            storage_alias_after = callback(storage_alias)
            alloc_alias_after = callback(alloc_alias)
            return (
                storage_before,
                alloc_before,
                storage_alias_before,
                alloc_alias_before,
                storage_after,
                alloc_after,
                storage_alias_after,
                alloc_alias_after,
            )

    return Mod, [("call", "main", [])], LOWERED


CODEGEN_TIR = "test_vm_codegen_tir.py"
# TVM's tests compare the VM TIR code generator's output with expected TIR (TVM's own IR); what
# runs is their input modules, built here with the code generator alone and run in both modes.


@model(CODEGEN_TIR)
def test_add():
    @I.ir_module
    class Before:
        @R.function(pure=False)
        def foo(x: R.Tensor):
            R.func_attr({"global_symbol": "foo"})
            z = R.call_packed("test.vm.add", x, x, ty_args=(R.Tensor))
            return z

    return Before, [("call", "foo", [rand(3, 4)])], LOWERED


@model(CODEGEN_TIR)
def test_tir_call():
    @I.ir_module
    class Before:
        @T.prim_func(s_tir=True)
        def shape_func(H: T.Buffer(T.int64(4), "int64")):
            T.func_attr({"global_symbol": "shape_func"})
            H[T.int64(0)] = H[T.int64(0)] + T.int64(1)

        @R.function(pure=False)
        def foo(x: R.Tensor([4], "int64")):
            R.func_attr({"global_symbol": "foo"})
            _ = Before.shape_func(x)
            return x

    return Before, [("call", "foo", [np.arange(4, dtype="int64")], {"after": True})], LOWERED


@model(CODEGEN_TIR, "test_if_cond")
def tir_test_if_cond():
    @I.ir_module
    class Before:
        @R.function(pure=False)
        def ife(cond: R.Tensor((), "bool"), x: R.Tensor) -> R.Tensor:
            R.func_attr({"global_symbol": "ife"})
            if cond:
                w = R.call_packed("test.vm.add", x, x, ty_args=(R.Tensor))
            else:
                w = R.call_packed("test.vm.mul", x, x, ty_args=(R.Tensor))
            return w

    x = rand(3, 4)
    return Before, [("call", "ife", [np.array(True), x]), ("call", "ife", [np.array(False), x])], LOWERED


@model(CODEGEN_TIR)
def test_const():
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor):
            R.func_attr({"global_symbol": "main"})
            y = R.const([1, 2])
            z = (y, R.const([3, 4]), x)
            return z

    return Before, [("call", "main", [rand(2, 3)])], LOWERED


@model(CODEGEN_TIR)
def test_const_call():
    @I.ir_module
    class Before:
        @R.function(pure=False)
        def main(x: R.Tensor):
            R.func_attr({"global_symbol": "main"})
            y = R.const([1, 2])
            z = R.call_packed("test.vm.add", x, y, ty_args=(R.Tensor))
            return z

    return Before, [("call", "main", [np.array([5, 7], "int64")])], LOWERED


MULTI = "test_vm_multi_device.py"


@model(MULTI)
def test_multi_cpu():
    @I.ir_module
    class Example:
        I.module_attrs({"attr": 10})
        I.module_global_infos({"vdevice": [I.vdevice("llvm", 0), I.vdevice("llvm", 1)]})

        @R.function
        def foo(
            x: R.Tensor((2, 3), "float32"), y: R.Tensor((3, 4), "float32"), z: R.Tensor((4, 5), "float32")
        ) -> R.Tensor((2, 5), "float32"):
            with R.dataflow():
                lv0 = R.matmul(x, y)
                lv0 = R.hint_on_device(lv0, tvm.cpu(0))
                lv1: R.Tensor((2, 4), "float32", "llvm:1") = R.to_vdevice(lv0, "llvm:1")
                gv = R.matmul(lv1, z)
                R.output(gv)
            return gv

    mod = relax.transform.RealizeVDevice()(Example)
    mod = relax.transform.LegalizeOps()(mod)
    # relaxvm runs a VM on one device: TVM's result is recorded, relaxvm refuses the two devices.
    return mod, [("multi_device", "foo", [rand(2, 3), rand(3, 4), rand(4, 5)])], {"opt_level": 3}


# Recording -----------------------------------------------------------------------------------


def to_numpy(v: Any) -> Any:
    """A TVM value as the plain Python/numpy value corpus.flatten stores."""
    if isinstance(v, tvm.runtime.Tensor):
        return v.numpy()
    if isinstance(v, tvm_ffi.Shape):
        return corpus.ShapeValue(int(d) for d in v)
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if hasattr(v, "__len__") and hasattr(v, "__getitem__"):
        return tuple(to_numpy(v[i]) for i in range(len(v)))
    raise TypeError(f"cannot record a TVM value of type {type(v).__name__}")


def to_tvm(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return tvm.runtime.tensor(v)
    if isinstance(v, corpus.ShapeValue):
        return tvm_ffi.Shape(list(v))
    if isinstance(v, tuple):
        return tuple(to_tvm(x) for x in v)
    return v


def aliases(outs: Any, inputs: list) -> list[list[int]]:
    """[output index, input index] of each output (item of a tuple output) that is an input."""
    items = list(outs) if isinstance(outs, (tvm_ffi.Array, tuple, list)) else [outs]
    return [
        [i, j]
        for i, o in enumerate(items)
        for j, a in enumerate(inputs)
        if isinstance(o, tvm.runtime.Tensor) and isinstance(a, tvm.runtime.Tensor) and o.same_as(a)
    ]


def run_case(vm: Any, kind: str, function: str, args: list, extra: dict) -> tuple[Any, dict]:
    """Runs one case on TVM's VM: (the value recorded, extra manifest keys)."""
    tvm_args = [to_tvm(a) for a in args]
    kwargs = {k: to_tvm(v) for k, v in extra.get("kwargs", {}).items()}
    if kind == "call":
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            raw = vm[function](*tvm_args)
        out = to_numpy(raw)
        more = {"aliases": aliases(raw, tvm_args)}
        if extra.get("stdout"):
            more["stdout"] = printed.getvalue()
        if extra.get("after"):
            return (out, tuple(to_numpy(a) for a in tvm_args)), {**more, "after": True}
        return out, more
    if kind == "saved":
        vm.save_function(function, function + "_saved", *tvm_args)
        direct = to_numpy(vm[function](*tvm_args))
        saved = to_numpy(vm[function + "_saved"]())
        assert corpus.flatten(direct, []) == corpus.flatten(saved, []), (direct, saved)
        return direct, {}
    if kind == "stateful":
        vm.set_input(function, *tvm_args, **kwargs)
        vm.invoke_stateful(function)
        outs = vm.get_outputs(function)
        return to_numpy(outs), {"aliases": aliases(outs, tvm_args)}
    if kind == "saved_kwargs":
        vm.save_function(function, "saved_main", **kwargs)
        return to_numpy(vm["saved_main"]()), {}
    if kind == "set_input_then_call":
        vm.set_input(function, *tvm_args)
        return to_numpy(vm[function]()), {}
    if kind == "invoke_without_input":
        vm.invoke_stateful(function)
        return None, {}
    if kind == "set_input_then_get":
        vm.set_input(function, *tvm_args)
        return to_numpy(vm.get_outputs(function)), {}
    if kind == "callback_store":
        stored = []
        out = vm[function](*tvm_args, stored.append)
        return (to_numpy(out), to_numpy(stored[0])), {}
    if kind == "callback_make":
        return to_numpy(vm[function](lambda: tvm_args[0])), {}
    if kind == "callback_raise":

        def raising():
            raise RuntimeError("Error thrown from callback")

        try:
            vm[function](raising)
        except RuntimeError as err:
            stack = err.__traceback__
            while stack.tb_next is not None:
                stack = stack.tb_next
            # TVM's test: the innermost frame is the Python callback's.
            code = stack.tb_frame.f_code
            assert (code.co_filename, code.co_name) == (raising.__code__.co_filename, "raising"), code
            raise
        return None, {}
    if kind == "time_stateful":
        vm.set_input(function, *tvm_args)
        return bool(vm.time_evaluator("invoke_stateful", tvm.cpu())(function).results), {}
    if kind == "time_saved":
        vm.save_function(function, "saved_main", *tvm_args)
        return bool(vm.time_evaluator("saved_main", tvm.cpu())().results), {}
    raise ValueError(f"unknown case kind {kind!r}")


def build(out_dir: str) -> None:
    suite = os.path.join(out_dir, "vm_suite")
    os.makedirs(suite, exist_ok=True)
    models = []
    progress = Progress(len(MODELS) * len(MODES), "vm suite")
    for (source, test), make in MODELS.items():
        mod, cases, *notes = make()
        opt_level = notes[0].get("opt_level") if notes else None
        lowered = bool(notes and notes[0].get("codegen"))
        for mode in MODES:
            name = f"{source[:-3]}/{test}/{mode}"
            progress.step(name)
            folder = os.path.join(suite, name)
            os.makedirs(folder, exist_ok=True)
            if lowered:
                builder = relax.ExecBuilder()
                tir_mod = relax.vm_build._vmcodegen(builder, mod, exec_mode=mode)
                ex = relax.vm_build._vmlink(builder, TARGET, tir_mod)
            elif test == "test_vm_compile_without_target_arg":
                ex = relax.build(mod, exec_mode=mode)
            elif opt_level is not None:
                with tvm.transform.PassContext(opt_level=opt_level):
                    ex = relax.build(mod, target="llvm", exec_mode=mode)
            else:
                ex = relax.build(mod, TARGET, exec_mode=mode)
            so = os.path.join(folder, "model.so")
            ex.export_library(so)
            loaded = tvm.runtime.load_module(so)
            shared_vm = relax.VirtualMachine(loaded, tvm.cpu())
            entries = []
            for k, case in enumerate(cases):
                kind, function, args = case[:3]
                extra = case[3] if len(case) > 3 else {}
                file = f"{name}/case{k}.npz"
                kwargs = extra.get("kwargs", {})
                stored_args = list(args) + [kwargs[key] for key in sorted(kwargs)]
                meta = {"kind": kind, "kwargs": sorted(kwargs)}
                vm = shared_vm
                if "memory_cfg" in extra:
                    vm = relax.VirtualMachine(loaded, tvm.cpu(), memory_cfg=extra["memory_cfg"])
                    meta["memory_cfg"] = extra["memory_cfg"]
                if "error" in extra:
                    try:
                        run_case(vm, kind, function, args, extra)
                    except Exception as e:  # noqa: BLE001 - TVM's error class is what we record
                        want = {
                            "RuntimeError": RuntimeError,
                            "ValueError": ValueError,
                            "TypeError": TypeError,
                            "AssertionError": AssertionError,
                        }
                        assert isinstance(e, want[extra["error"]]), f"{name}: {type(e).__name__} {e}"
                        entry = corpus.save_case(suite, file, function, stored_args, error=str(e).splitlines()[0])
                        entries.append({**entry, **meta, "error_class": extra["error"]})
                        continue
                    raise AssertionError(f"{name}: TVM accepted case {k}, expected {extra['error']}")
                if kind == "multi_device":
                    devices = [tvm.cpu(0), tvm.cpu(1)]
                    multi = relax.VirtualMachine(loaded, devices)
                    placed = [tvm.runtime.tensor(a, d) for a, d in zip(args, [devices[0], devices[0], devices[1]])]
                    value, more = to_numpy(multi[function](*placed)), {}
                elif kind == "text_roundtrip":
                    # TVM's test: the exported library's program prints as the executable did.
                    value, more = ex.as_text() == loaded["as_text"](), {}
                else:
                    value, more = run_case(vm, kind, function, args, extra)
                entry = corpus.save_case(suite, file, function, stored_args, value)
                entries.append({**entry, **meta, **more})
            models.append(
                {
                    "name": name,
                    "source": source,
                    "test": test,
                    "exec_mode": mode,
                    "library": f"{name}/model.so",
                    "cases": entries,
                }
            )
    progress.clear()
    # Python functions left in TVM's registry crash its process at exit.
    tvm.get_global_func("vm.builtin.clear_py_func_registry")()
    skipped = [{"source": s, "test": t, "reason": r} for s, t, r in SKIPPED]
    print(f"vm_suite: {len(models)} models", file=sys.stderr)
    corpus.write_manifest(
        suite, {"suite": "vm_suite", "tvm_version": tvm.__version__, "models": models, "skipped": skipped}
    )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: build_vm_suite.py OUT_DIR")
    build(sys.argv[1])
