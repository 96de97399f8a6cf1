# Ported from Apache TVM's tests/python/relax/test_vm_execbuilder.py (Apache-2.0), with the
# renames a user moving from tvm.relax makes: tvm.relax -> relaxvm, tvm.runtime.tensor /
# tvm.nd.array -> rx.tensor, tvm.register_func -> rx.register_func, TVMError -> RuntimeError.
# The C++ test functions (test.vm.add, ...) are registered in Python in conftest.py.
"""Lowest level testing VM. Test execbuilder and execution."""

import numpy as np
import pytest

import relaxvm as rx
from conftest import check_saved_func
from relaxvm import ExecBuilder, VirtualMachine


def test_vm_execute():
    ib = ExecBuilder()
    with ib.function("func0", num_inputs=2):
        ib.emit_call("test.vm.add", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    ex = ib.get()
    vm = VirtualMachine(ex, rx.cpu())
    a = rx.tensor(np.random.rand(4))
    b = rx.tensor(np.random.rand(4))

    add_res = check_saved_func(vm, "func0", a, b)
    np.testing.assert_allclose(add_res.numpy(), a.numpy() + b.numpy(), rtol=1e-7, atol=1e-7)


def test_vm_multiple_func():
    ib = ExecBuilder()
    with ib.function("func0", num_inputs=2):
        ib.emit_call("test.vm.add", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    with ib.function("func1", num_inputs=2):
        ib.emit_call("test.vm.mul", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    ex = ib.get()
    vm = VirtualMachine(ex, rx.cpu())
    a = rx.tensor(np.random.rand(4))
    b = rx.tensor(np.random.rand(4))
    mul_res = check_saved_func(vm, "func1", a, b)
    add_res = check_saved_func(vm, "func0", a, b)
    np.testing.assert_allclose(add_res.numpy(), a.numpy() + b.numpy(), rtol=1e-7, atol=1e-7)
    np.testing.assert_allclose(mul_res.numpy(), a.numpy() * b.numpy(), rtol=1e-7, atol=1e-7)


def test_vm_checker():
    ib = ExecBuilder()
    # TVM raises RuntimeError; relaxvm's CheckError is one, and names the register and where.
    with pytest.raises(rx.CheckError, match=r'function "func0", instruction 0 .*reads %2, which is not written'):
        with ib.function("func0", num_inputs=2):
            ib.emit_call("test.vm.add", args=[ib.r(0), ib.r(2)], dst=ib.r(2))
            ib.emit_ret(ib.r(2))
        ib.get()


def test_neg_imm():
    ib = ExecBuilder()

    with ib.function("func0", num_inputs=1):
        ib.emit_call("test.vm.add_scalar", args=[ib.imm(-3), ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    ib.get()

    ex = ib.get()
    vm = VirtualMachine(ex, rx.cpu())
    assert vm["func0"](1) == -2
    assert vm["func0"](-3) == -6


def test_emit_cache():
    ib = ExecBuilder()

    with ib.function("func0", num_inputs=1):
        x0 = ib.convert_constant("str0")
        x1 = ib.convert_constant("str0")
        # cache constant str
        assert x0 == x1
        s0 = ib.convert_constant(rx.Shape([1, 2]))
        s1 = ib.convert_constant(rx.Shape([1, 2]))
        s2 = ib.convert_constant(rx.Shape([1, 3]))
        assert s0 == s1
        assert s1 != s2
        y0 = ib.convert_constant(rx.tensor(np.array([1, 2, 3]).astype("int32")))
        y1 = ib.convert_constant(rx.tensor(np.array([1, 2, 3]).astype("int32")))
        assert y0 == y1
        ib.emit_ret(ib.r(0))


def test_vm_formalize():
    ib0 = ExecBuilder()
    ib1 = ExecBuilder()
    with ib0.function("func0", num_inputs=2):
        ib0.emit_call("test.vm.add", args=[ib0.r(0), ib0.r(1)], dst=ib0.r(100))
        ib0.emit_call("test.vm.mul", args=[ib0.r(1), ib0.r(100)], dst=ib0.r(50))
        ib0.emit_ret(ib0.r(50))
    with ib1.function("func0", num_inputs=2):
        ib1.emit_call("test.vm.add", args=[ib1.r(0), ib1.r(1)], dst=ib1.r(2))
        ib1.emit_call("test.vm.mul", args=[ib1.r(1), ib1.r(2)], dst=ib1.r(3))
        ib1.emit_ret(ib1.r(3))
    exec0 = ib0.get()
    exec1 = ib1.get()
    assert exec0.as_text() == exec1.as_text()


def test_vm_operand():
    ib0 = ExecBuilder()
    with ib0.function("func0", num_inputs=2):
        ib0.emit_call("test.vm.add_scalar", args=[ib0.r(0), ib0.r(1)], dst=ib0.r(2))
        ib0.emit_ret(ib0.r(2))
    exec0 = ib0.get()
    vm = VirtualMachine(exec0, rx.cpu())
    res = vm["func0"](2, 3)
    assert res == 5

    ib1 = ExecBuilder()
    with ib1.function("func1", num_inputs=1):
        ib1.emit_call("test.vm.get_device_id", args=[ib1.r(0)], dst=ib1.r(1))
        ib1.emit_ret(ib1.r(1))
    exec1 = ib1.get()
    vm = VirtualMachine(exec1, rx.cpu())
    res = vm["func1"](rx.cpu(3))
    assert res == 3


def test_vm_shapeof():
    ib = ExecBuilder()
    shape = (32, 16)
    arr = rx.tensor(np.random.rand(*shape))
    with ib.function("main", num_inputs=0):
        ib.emit_call("vm.builtin.shape_of", args=[arr], dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    ex = ib.get()
    vm = VirtualMachine(ex, rx.cpu())
    res = vm["main"]()
    for i, s in enumerate(res):
        assert s == shape[i]


def test_vm_storage():
    dtype = rx.DataType("float32")
    shape = (4, 6)
    ib = ExecBuilder()
    with ib.function("main", num_inputs=0):
        ib.emit_call(
            "vm.builtin.alloc_storage",
            args=[
                ib.vm_state(),
                (24,),
                ib.convert_constant(0),
                dtype,
                ib.convert_constant("global"),
            ],
            dst=ib.r(1),
        )
        ib.emit_call("vm.builtin.alloc_tensor", args=[ib.r(1), ib.imm(0), shape, dtype], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    ex = ib.get()
    vm = VirtualMachine(ex, rx.cpu())
    res = vm["main"]()
    assert res.device == rx.cpu()
    assert res.shape == shape


def test_vm_goto():
    ib = ExecBuilder()
    with ib.function("main", num_inputs=2):
        ib.emit_call("test.vm.add", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_goto(2)
        ib.emit_call("test.vm.mul", args=[ib.r(2), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    ex = ib.get()
    vm = VirtualMachine(ex, rx.cpu())
    a = rx.tensor(np.random.rand(4))
    b = rx.tensor(np.random.rand(4))
    res = check_saved_func(vm, "main", a, b)
    np.testing.assert_allclose(res.numpy(), a.numpy() + b.numpy(), rtol=1e-7, atol=1e-7)


def test_vm_if():
    ib = ExecBuilder()
    with ib.function("main", num_inputs=3):
        ib.emit_if(ib.r(0), 3)
        ib.emit_call("test.vm.add", args=[ib.r(1), ib.r(2)], dst=ib.r(3))
        ib.emit_goto(2)
        ib.emit_call("test.vm.mul", args=[ib.r(1), ib.r(2)], dst=ib.r(3))
        ib.emit_ret(ib.r(3))
    ex = ib.get()
    vm = VirtualMachine(ex, rx.cpu())
    a = rx.tensor(np.random.rand(4))
    b = rx.tensor(np.random.rand(4))
    res = vm["main"](0, a, b)
    np.testing.assert_allclose(res.numpy(), a.numpy() * b.numpy(), rtol=1e-7, atol=1e-7)
    res = vm["main"](1, a, b)
    np.testing.assert_allclose(res.numpy(), a.numpy() + b.numpy(), rtol=1e-7, atol=1e-7)


def test_vm_invoke_closure():
    ib = ExecBuilder()
    with ib.function("lifted_func_1", num_inputs=4):
        ib.emit_call("test.vm.add", args=[ib.r(0), ib.r(1)], dst=ib.r(4))
        ib.emit_call("test.vm.add", args=[ib.r(2), ib.r(4)], dst=ib.r(5))
        ib.emit_call("test.vm.add", args=[ib.r(3), ib.r(5)], dst=ib.r(6))
        ib.emit_ret(ib.r(6))
    with ib.function("main", num_inputs=2):
        ib.emit_call("vm.builtin.make_closure", args=[ib.f("lifted_func_1"), ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))

    ex = ib.get()
    vm = VirtualMachine(ex, rx.cpu())
    w_inp = rx.tensor(np.random.rand(2, 3))
    x_inp = rx.tensor(np.random.rand(2, 3))
    y_inp = rx.tensor([[3.1, 4.0, 5.0], [6.0, 7.1, 9.0]])
    z_inp = rx.tensor(np.random.rand(2, 3))
    clo = vm["main"](w_inp, x_inp)
    res = vm.invoke_closure(clo, y_inp, z_inp)
    np.testing.assert_allclose(res.numpy(), w_inp.numpy() + x_inp.numpy() + y_inp.numpy() + z_inp.numpy())


def test_vm_stack_restore_after_failure():
    # TVM compiles a Relax module (R.multiply by a constant) with tvm.compile and feeds it a
    # wrongly shaped input; relax.build is out of scope, so we emit the same check by hand:
    # vm.builtin.check_tensor_info rejects the (12, 10) input, then vm.op.mul runs.
    ib = ExecBuilder()
    with ib.function("main", num_inputs=1):
        ib.emit_call("vm.builtin.alloc_shape_heap", args=[ib.imm(2)], dst=ib.r(1))
        ib.emit_call("vm.builtin.check_tensor_info", args=[ib.r(0), ib.imm(2), rx.DataType("float32"), ""])
        ib.emit_call("vm.builtin.shape_of", args=[ib.r(0)], dst=ib.r(2))
        # match_shape(shape, heap, ndim, kind, value, ...): both dimensions must be 10.
        ib.emit_call(
            "vm.builtin.match_shape",
            args=[ib.r(2), ib.r(1), ib.imm(2), ib.imm(0), ib.imm(10), ib.imm(0), ib.imm(10), ""],
        )
        ib.emit_call("vm.op.mul", args=[ib.r(0), rx.tensor(np.array(2, "float32"))], dst=ib.r(3))
        ib.emit_ret(ib.r(3))
    ex = ib.get()
    vm = VirtualMachine(ex, rx.cpu())

    correct_input = rx.tensor(np.random.normal(size=(10, 10)).astype("float32"))
    incorrect_input = rx.tensor(np.random.normal(size=(12, 10)).astype("float32"))

    # The (12, 10) input fails the shape match (TVM's test only caught a RuntimeError).
    with pytest.raises(rx.VMValueError, match=r"vm\.builtin\.match_shape: .*12") as info:
        vm["main"](incorrect_input)
    assert "10" in str(info.value), info.value

    # VM should executes correctly after encountered incorrect shape in previous invocation
    res = vm["main"](correct_input)
    np.testing.assert_allclose(res.numpy(), correct_input.numpy() * 2)
