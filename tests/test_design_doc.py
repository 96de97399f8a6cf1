"""The Relax VM design document's examples, run through Python (builtins renamed vm.builtin.* /
vm.op.*)."""

import numpy as np

import relaxvm as rx


def test_builder_example():
    @rx.register_func("test.vm.move", override=True)
    def move(src):
        return src

    @rx.register_func("vm.add", override=True)
    def add(a, b):
        ret = a.numpy() + b.numpy()
        return rx.tensor(ret)

    @rx.register_func("vm.mul", override=True)
    def mul(a, b):
        ret = a.numpy() * b.numpy()
        return rx.tensor(ret)

    ib = rx.ExecBuilder()
    ten = ib.convert_constant(rx.tensor(np.full(3, 10.0)))
    assert ten == ib.c(0)
    with ib.function("main", num_inputs=1):
        ib.emit_call("test.vm.move", [ib.c(0)], dst=ib.r(1))
        ib.emit_call("vm.add", [ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_call("vm.mul", [ib.r(2), ib.r(1)], dst=ib.r(3))
        ib.emit_ret(ib.r(3))
    executable = ib.get()
    vm = rx.VirtualMachine(executable, rx.cpu())
    res = vm["main"](rx.tensor(np.arange(3.0)))
    np.testing.assert_allclose(res.numpy(), (np.arange(3.0) + 10) * 10)


def test_text_format_example():
    ib = rx.ExecBuilder()
    with ib.function("func0", num_inputs=2):
        ib.emit_call("vm.op.add", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_call("vm.builtin.move", args=[ib.r(2)], dst=ib.r(3))
        ib.emit_call("vm.builtin.print", args=[ib.r(3)])
        ib.emit_ret(ib.r(3))
    exec0 = ib.get()
    stats = exec0.stats()
    assert "Globals (#1): [func0]" in stats
    assert "Packed functions (#3): [vm.op.add, vm.builtin.move, vm.builtin.print]" in stats
    text = exec0.as_text()
    start = text.splitlines().index("@func0 inputs=2 regs=4:")
    assert text.splitlines()[start : start + 5] == [
        "@func0 inputs=2 regs=4:",
        "  call  vm.op.add  in: %0, %1  dst: %2",
        "  call  vm.builtin.move  in: %2  dst: %3",
        "  call  vm.builtin.print  in: %3  dst: void",
        "  ret  %3",
    ]


def test_python_dump_example():
    ib = rx.ExecBuilder()
    with ib.function("func0", num_inputs=2):
        ib.emit_call("vm.op.add", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_call("vm.builtin.move", args=[ib.r(2)], dst=ib.r(3))
        ib.emit_call("vm.builtin.print", args=[ib.r(3)])
        ib.emit_ret(ib.r(3))
    exec0 = ib.get()
    src = exec0.as_python()
    assert 'with ib.function("func0", num_inputs=2):' in src
    assert 'ib.emit_call("vm.op.add", args=[ib.r(0), ib.r(1)], dst=ib.r(2))' in src
    scope = {}
    exec(src, scope)
    assert scope["ex"].as_text() == exec0.as_text()


def test_two_functions_example():
    @rx.register_func("test.vm.add", override=True)
    def add(a, b):
        return rx.tensor(a.numpy() + b.numpy())

    @rx.register_func("test.vm.mul", override=True)
    def mul(a, b):
        return rx.tensor(a.numpy() * b.numpy())

    ib = rx.ExecBuilder()
    with ib.function("func0", num_inputs=2):
        ib.emit_call("test.vm.add", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    with ib.function("func1", num_inputs=2):
        ib.emit_call("test.vm.mul", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    ex = ib.get()
    vm = rx.VirtualMachine(ex)
    a = rx.tensor(np.random.rand(4))
    b = rx.tensor(np.random.rand(4))
    mul_res = vm["func1"](a, b)
    add_res = vm["func0"](a, b)
    np.testing.assert_allclose(add_res.numpy(), a.numpy() + b.numpy())
    np.testing.assert_allclose(mul_res.numpy(), a.numpy() * b.numpy())


def test_same_two_functions_with_builtin_ops():
    ib = rx.ExecBuilder()
    with ib.function("func0", num_inputs=2):
        ib.emit_call("vm.op.add", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    with ib.function("func1", num_inputs=2):
        ib.emit_call("vm.op.mul", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    vm = rx.VirtualMachine(ib.get())
    a, b = np.random.rand(4), np.random.rand(4)
    np.testing.assert_allclose(vm["func0"](a, b).numpy(), a + b)
    np.testing.assert_allclose(vm["func1"](a, b).numpy(), a * b)


def test_vm_state_alloc_storage():
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=0):
        ib.emit_call(
            "vm.builtin.alloc_storage",
            args=[ib.vm_state(), (64,), ib.convert_constant(0), rx.DataType("float32"), "global"],
            dst=ib.r(0),
        )
        ib.emit_call("vm.builtin.alloc_tensor", args=[ib.r(0), ib.imm(0), (4, 4), rx.DataType("float32")], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    t = rx.VirtualMachine(ib.get())["main"]()
    assert t.shape == (4, 4) and t.dtype == "float32"


def test_shape_heap_example():
    ib = rx.ExecBuilder()
    shape = (32, 16)
    x = rx.tensor(np.random.rand(*shape))
    with ib.function("main", num_inputs=0):
        # alloc a shape heap of size 2, and store it in r(0)
        ib.emit_call("vm.builtin.alloc_shape_heap", args=[ib.imm(2)], dst=ib.r(0))
        # get the shape of tensor x, and store the ShapeTuple to r(1)
        ib.emit_call("vm.builtin.shape_of", args=[x], dst=ib.r(1))
        # store the shape of x to index 0 and index 1 of the shape heap
        ib.emit_call("vm.builtin.store_shape", args=[ib.r(1), ib.r(0), ib.imm(0), ib.imm(1)])
        # construct a ShapeTuple from the values in index 0 and index 1 of the shape heap
        ib.emit_call("vm.builtin.load_shape", args=[ib.r(0), ib.imm(0), ib.imm(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    ex = ib.get()
    vm = rx.VirtualMachine(ex)
    res = vm["main"]()
    assert isinstance(res, rx.Shape)
    assert res == (32, 16)
    assert tuple(res) == shape
