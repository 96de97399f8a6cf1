"""The models of TVM 0.27's ``test_vm_alloc_storage_with_scope.py``, ``test_vm_callback_function.py``,
``test_vm_codegen_only.py``, ``test_vm_codegen_tir.py`` and ``test_vm_multi_device.py`` for the suite
``vm_suite`` (see build_vm_suite.py)."""

from __future__ import annotations

import os
import sys

import numpy as np
import tvm.relax.testing.vm  # noqa: F401 - registers the test.vm.* functions TVM's tests call
from tvm.script import ir as I  # noqa: E741
from tvm.script import relax as R
from tvm.script import tirx as T

import tvm
from tvm import relax

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from vm_suite_common import model, rand  # noqa: E402
from vm_suite_operators import _function_module  # noqa: E402

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
