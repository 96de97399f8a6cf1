# Ported from Apache TVM 0.27's tests/python/relax/test_vm_codegen_only.py (Apache-2.0). TVM's
# tests write Relax functions in TVMScript and lower them with relax.vm_build._vmcodegen; the
# port emits with rx.ExecBuilder the bytecode that lowering produces (the same calls, registers
# and constants), so each test checks what the VM does with it. The "compiled" exec mode (VM
# TIR functions) has no relaxvm equivalent: relaxvm runs bytecode (docs/tvm-compat.md). The
# two TIR kernels of test_vm_kill_object are registered here as Python functions.
"""TVM's codegen-only VM tests, run on relaxvm."""

import numpy as np
import pytest

import relaxvm as rx
from relaxvm.testing import MakeShapeCode, MatchShapeCode, check_saved_func


@rx.register_func("test.codegen_only.full", override=True)
def _full(out):
    out[:] = 0


@rx.register_func("test.codegen_only.full1", override=True)
def _full1(out):
    out[:] = 1


def build_copy():
    ib = rx.ExecBuilder()
    with ib.function("foo", num_inputs=1):
        ib.emit_call("vm.builtin.copy", args=[ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    return ib.get()


def test_vm_copy():
    vm = rx.VirtualMachine(build_copy(), rx.cpu())
    inp = rx.tensor(np.random.rand(3, 4).astype(np.float32))
    res = check_saved_func(vm, "foo", inp)
    np.testing.assert_allclose(res.numpy(), inp.numpy(), rtol=1e-7, atol=1e-7)


def test_if_cond_const():
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=1):
        # Codegen copies a constant into a register for `if` and `ret`, which take registers.
        ib.emit_call("vm.builtin.copy", args=[ib.convert_constant(rx.tensor(np.array(True)))], dst=ib.r(2))
        ib.emit_if(ib.r(2), 3)
        ib.emit_call("vm.builtin.copy", args=[ib.r(0)], dst=ib.r(1))
        ib.emit_goto(2)
        ib.emit_call("vm.builtin.copy", args=[ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    vm = rx.VirtualMachine(ib.get(), rx.cpu())
    inp = rx.tensor(np.random.rand(3, 4))
    np.testing.assert_allclose(vm["main"](inp).numpy(), inp.numpy())


def test_vm_exec_serialize_export_library(tmp_path):
    ex = build_copy()
    path = str(tmp_path / "exec.so")
    ex.export_library(path)
    loaded = rx.load_module(path)
    assert ex.as_text() == loaded["as_text"]()


def test_if_cond():
    ib = rx.ExecBuilder()
    with ib.function("ife", num_inputs=2):
        ib.emit_if(ib.r(0), 3)
        ib.emit_call("test.vm.add", args=[ib.r(1), ib.r(1)], dst=ib.r(2))
        ib.emit_goto(2)
        ib.emit_call("test.vm.mul", args=[ib.r(1), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    vm = rx.VirtualMachine(ib.get(), rx.cpu())
    inp = rx.tensor(np.random.rand(3, 4))
    for cond, want in [(1, inp.numpy() * 2), (True, inp.numpy() * 2), (0, inp.numpy() ** 2), (False, inp.numpy() ** 2)]:
        res = vm["ife"](rx.tensor(np.array(cond)), inp)
        np.testing.assert_allclose(res.numpy(), want, rtol=1e-7, atol=1e-7)


def test_vm_return_const_tuple():
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=1):
        y = ib.convert_constant(rx.tensor(np.array([1, 2])))
        z = ib.convert_constant(rx.tensor(np.array([3, 4])))
        ib.emit_call("vm.builtin.make_tuple", args=[y, z, ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    vm = rx.VirtualMachine(ib.get(), rx.cpu())
    inp = rx.tensor(np.random.rand(2, 3))
    res0, res1, res2 = vm["main"](inp)
    np.testing.assert_allclose(res0.numpy(), np.array([1, 2]))
    np.testing.assert_allclose(res1.numpy(), np.array([3, 4]))
    np.testing.assert_allclose(res2.numpy(), inp.numpy())


def test_vm_const_as_call_arg():
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=1):
        a, b = ib.convert_constant(rx.tensor(np.array([1, 2]))), ib.convert_constant(rx.tensor(np.array([3, 4])))
        ib.emit_call("test.vm.add", args=[a, b], dst=ib.r(1))
        ib.emit_call("test.vm.add", args=[ib.r(1), ib.r(0)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    vm = rx.VirtualMachine(ib.get(), rx.cpu())
    inp = rx.tensor(np.random.rand(1, 2))
    np.testing.assert_allclose(vm["main"](inp).numpy(), np.array([4, 6]) + inp.numpy())


def test_shape_check_builtin():
    MS, MK = MatchShapeCode, MakeShapeCode
    n, m = 0, 1  # shape-heap slots
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=1):
        ib.emit_call("vm.builtin.alloc_shape_heap", args=[ib.vm_state(), ib.imm(3)], dst=ib.r(1))
        ib.emit_call(
            "vm.builtin.check_tensor_info",
            args=[ib.r(0), ib.imm(2), ib.convert_constant(rx.DataType("float32")), ib.convert_constant("")],
        )
        ib.emit_call(
            "vm.builtin.match_shape",
            args=[
                ib.r(0),
                ib.r(1),
                ib.imm(2),
                ib.imm(MS.STORE_TO_HEAP),
                ib.imm(n),
                ib.imm(MS.STORE_TO_HEAP),
                ib.imm(m),
                ib.convert_constant(""),
            ],
        )
        ib.emit_call(
            "vm.builtin.make_shape",
            args=[
                ib.r(1),
                ib.imm(3),
                ib.imm(MK.LOAD_SHAPE),
                ib.imm(m),
                ib.imm(MK.LOAD_SHAPE),
                ib.imm(n),
                ib.imm(MK.USE_IMM),
                ib.imm(2),
            ],
            dst=ib.r(2),
        )
        ib.emit_ret(ib.r(2))
    vm = rx.VirtualMachine(ib.get(), rx.cpu())
    x = rx.tensor(np.zeros((1, 2)).astype("float32"))
    assert vm["main"](x) == rx.Shape([2, 1, 2])
    with pytest.raises(TypeError):  # wrong input type
        vm["main"]([])
    with pytest.raises(ValueError, match=r".*ndim.*"):
        vm["main"](rx.tensor(np.zeros(1).astype("float32")))
    with pytest.raises(ValueError, match=r".*dtype.*"):
        vm["main"](rx.tensor(np.zeros((1, 2)).astype("int32")))


def test_prim_value():
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=0):
        ib.emit_call("vm.builtin.copy", args=[ib.convert_constant(1)], dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    assert rx.VirtualMachine(ib.get(), rx.cpu())["main"]() == 1


def test_string_imm():
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=0):
        ib.emit_call("vm.builtin.copy", args=[ib.convert_constant("hello")], dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    assert rx.VirtualMachine(ib.get(), rx.cpu())["main"]() == "hello"


def test_datatype_imm():
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=0):
        ib.emit_call("vm.builtin.copy", args=[ib.convert_constant(rx.DataType("float32"))], dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    assert rx.VirtualMachine(ib.get(), rx.cpu())["main"]() == "float32"


def test_vm_builtin_reshape():
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=1):
        ib.emit_call("vm.builtin.reshape", args=[ib.r(0), ib.convert_constant(rx.Shape([6, 2]))], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    vm = rx.VirtualMachine(ib.get(), rx.cpu())
    input_np = np.random.rand(3, 4).astype("float32")
    res = vm["main"](rx.tensor(input_np, rx.cpu()))
    np.testing.assert_allclose(res.numpy(), input_np.reshape(6, 2), rtol=1e-7, atol=1e-7)


def test_vm_kill_object():
    f32, s16, s4 = rx.DataType("float32"), rx.Shape([16]), rx.Shape([4])
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=0):
        c = ib.convert_constant
        ib.emit_call(
            "vm.builtin.alloc_storage", args=[ib.vm_state(), c(s16), ib.imm(0), c(f32), c("global")], dst=ib.r(0)
        )
        ib.emit_call("vm.builtin.alloc_tensor", args=[ib.r(0), ib.imm(0), c(s4), c(f32)], dst=ib.r(1))
        ib.emit_call("test.codegen_only.full", args=[ib.r(1)])
        ib.emit_call("vm.builtin.null_value", args=[], dst=ib.r(1))  # R.vm.kill_object(alloc)
        ib.emit_call("vm.builtin.alloc_tensor", args=[ib.r(0), ib.imm(0), c(s4), c(f32)], dst=ib.r(2))
        ib.emit_call("test.codegen_only.full", args=[ib.r(2)])
        ib.emit_call("vm.builtin.null_value", args=[], dst=ib.r(2))
        ib.emit_call(
            "vm.builtin.alloc_storage", args=[ib.vm_state(), c(s16), ib.imm(0), c(f32), c("global")], dst=ib.r(3)
        )
        ib.emit_call("vm.builtin.alloc_tensor", args=[ib.r(3), ib.imm(0), c(s4), c(f32)], dst=ib.r(4))
        ib.emit_call("test.codegen_only.full1", args=[ib.r(4)])
        ib.emit_call("vm.builtin.null_value", args=[], dst=ib.r(0))  # R.vm.kill_object(storage)
        ib.emit_ret(ib.r(4))
    res = rx.VirtualMachine(ib.get(), rx.cpu())["main"]()
    np.testing.assert_allclose(res.numpy(), np.ones((4,), "float32"))
