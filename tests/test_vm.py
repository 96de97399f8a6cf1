"""rx.VirtualMachine: calling conventions, closures, saved functions, stateful calls,
instruments, timing and threads."""

import sys
import threading
import time

import numpy as np
import pytest
from native_call import call_native, watch

import relaxvm as rx
from conftest import build, call_packed_vm


@pytest.fixture(scope="module")
def add_vm():
    """main(a, b) = a + b (ints), with parameter names."""

    def body(ib):
        ib.emit_call("vm.builtin.int.sub", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_call("vm.builtin.int.add", args=[ib.r(0), ib.r(1)], dst=ib.r(3))
        ib.emit_ret(ib.r(3))

    ex = build(body, num_inputs=2, param_names=["a", "b"])
    return rx.VirtualMachine(ex, rx.cpu())


def test_positional_and_keyword_arguments(add_vm):
    f = add_vm["main"]
    assert f.name == "main" and f.param_names == ["a", "b"]
    assert f(1, 2) == 3
    assert f(a=10, b=5) == 15
    assert f(4, b=6) == 10
    with pytest.raises(TypeError, match="unexpected keyword argument 'c'"):
        f(1, c=2)
    with pytest.raises(TypeError, match="multiple values for argument 'a'"):
        f(1, a=2)
    with pytest.raises(TypeError, match="missing argument 'b'"):
        f(a=1)


def test_keywords_need_parameter_names():
    vm = call_packed_vm("vm.builtin.int.add", 2)
    with pytest.raises(TypeError, match="no parameter names"):
        vm["main"](a=1, b=2)


def test_device_argument_forms(add_vm):
    ex = add_vm.executable
    for dev in [None, rx.cpu(), "cpu", "cpu:0", [rx.cpu(0)], rx.device("cpu", 0), rx.Device(1, 0)]:
        assert rx.VirtualMachine(ex, dev)["main"](1, 1) == 2
    with pytest.raises(ValueError):
        rx.VirtualMachine(ex, "gpu:0")
    with pytest.raises(TypeError):
        rx.VirtualMachine(ex, 3.5)


def test_vm_allocates_on_its_device():
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=0):
        ib.emit_call(
            "vm.builtin.alloc_storage",
            args=[ib.vm_state(), (8,), ib.convert_constant(0), rx.DataType("float32"), "global"],
            dst=ib.r(0),
        )
        ib.emit_call("vm.builtin.alloc_tensor", args=[ib.r(0), ib.imm(0), (2,), rx.DataType("float32")], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    ex = ib.get()
    assert rx.VirtualMachine(ex, rx.cpu(1))["main"]().device == rx.cpu(1)


def test_function_handles_are_reusable(add_vm):
    f = add_vm["main"]
    assert [f(i, i) for i in range(5)] == [0, 2, 4, 6, 8]
    assert "main" in repr(f) and "main" in repr(add_vm)


def test_save_function(add_vm):
    add_vm.save_function("main", "main_1_2", 1, 2)
    assert add_vm["main_1_2"]() == 3
    add_vm.save_function("main", "main_void", 1, 2, include_return=False)
    assert add_vm["main_void"]() is None
    with pytest.raises(TypeError):
        add_vm.save_function("main", "bad", 1)


def test_stateful_calls(add_vm):
    # set_input makes numbers 0-d int32 tensors, as TVM's does (tests/test_tvm_api.py), so the
    # int builtins get tensors: pass what the builtins take.
    with pytest.raises(rx.VMTypeError, match="found tensor of shape"):
        add_vm.set_input("main", 20, 22)
        add_vm.invoke_stateful("main")
    ib = rx.ExecBuilder()
    with ib.function("main", signature="(a: i64, b: i64) -> i64"):
        ib.emit_call("vm.builtin.int.add", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    typed = rx.VirtualMachine(ib.get())
    typed.set_input("main", 20, 22)
    typed.invoke_stateful("main")
    assert typed.get_outputs("main") == 42
    typed.set_input("main", b=1, a=2)
    typed.invoke_stateful("main")
    assert typed.get_outputs("main") == 3
    with pytest.raises(rx.VMError, match="invoke_stateful"):
        rx.VirtualMachine(add_vm.executable).get_outputs("main")
    with pytest.raises(rx.VMError, match="set_input"):
        rx.VirtualMachine(add_vm.executable).invoke_stateful("main")
    with pytest.raises(TypeError):
        add_vm.set_input("main", 1)


def test_tuple_outputs():
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=2):
        ib.emit_call("vm.builtin.make_tuple", args=[ib.r(0), ib.r(1), (3, 4)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    vm = rx.VirtualMachine(ib.get())
    out = vm["main"](np.ones(2), "s")
    assert type(out) is tuple and len(out) == 3
    assert isinstance(out[0], rx.Tensor) and out[1] == "s" and out[2] == (3, 4)


def test_invoke_closure_with_captures():
    ib = rx.ExecBuilder()
    with ib.function("add3", num_inputs=3):
        ib.emit_call("vm.builtin.int.add", args=[ib.r(0), ib.r(1)], dst=ib.r(3))
        ib.emit_call("vm.builtin.int.add", args=[ib.r(3), ib.r(2)], dst=ib.r(4))
        ib.emit_ret(ib.r(4))
    with ib.function("make", num_inputs=1):
        ib.emit_call("vm.builtin.make_closure", args=[ib.f("add3"), ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    vm = rx.VirtualMachine(ib.get())
    clo = vm["make"](100)
    assert isinstance(clo, rx.Closure) and clo.is_bytecode and clo.num_captured == 1
    assert vm.invoke_closure(clo, 1, 2) == 103
    # a packed closure from the registry
    assert vm.invoke_closure(rx.get_global_func("vm.builtin.int.mul"), 6, 7) == 42


def test_instrument_sees_every_call_and_can_skip(add_vm):
    ex = add_vm.executable
    vm = rx.VirtualMachine(ex)
    events = []

    def instrument(func, func_symbol, before_run, ret_value, *args):
        events.append((func_symbol, before_run, ret_value, args))
        assert isinstance(func, rx.Closure) and func.name == func_symbol
        if before_run and func_symbol == "vm.builtin.int.add":
            return 1  # skip: the destination receives None
        return None

    vm.set_instrument(instrument)
    assert vm["main"](5, 3) is None
    assert events == [
        ("vm.builtin.int.sub", True, None, (5, 3)),
        ("vm.builtin.int.sub", False, 2, (5, 3)),
        ("vm.builtin.int.add", True, None, (5, 3)),
    ]
    vm.set_instrument(lambda *a: 0)
    assert vm["main"](5, 3) == 8
    vm.set_instrument(None)
    assert vm["main"](5, 3) == 8


def test_instrument_errors(add_vm):
    vm = rx.VirtualMachine(add_vm.executable)
    vm.set_instrument(lambda *a: "bad")
    with pytest.raises(ValueError, match="instrument returns None, VMInstrumentReturnKind.NO_OP"):
        vm["main"](1, 2)

    def raising(*a):
        raise LookupError("from instrument")

    vm.set_instrument(raising)
    with pytest.raises(LookupError, match="from instrument"):
        vm["main"](1, 2)
    vm.set_instrument(None)
    assert vm["main"](1, 2) == 3
    with pytest.raises(TypeError):
        vm.set_instrument(5)


def test_time_evaluator(add_vm):
    timer = add_vm.time_evaluator("main", rx.cpu(), number=5, repeat=3)
    res = timer(1, 2)
    assert len(res.results) == 3
    assert all(r > 0 for r in res.results)
    assert min(res.results) <= res.median <= max(res.results)
    assert res.min <= res.mean <= res.max and res.std >= 0
    assert "BenchmarkResult" in repr(res)
    res = add_vm.time_evaluator("main", number=1, repeat=1, min_repeat_ms=5)(a=1, b=2)
    assert len(res.results) == 1
    with pytest.raises(ValueError):
        add_vm.time_evaluator("main", number=0)
    with pytest.raises(KeyError):
        add_vm.time_evaluator("nope")


def test_one_vm_from_many_threads_serialises(unique_name):
    """Calls from several threads run one at a time and all give the right answer."""
    name = unique_name()
    active = []
    overlap = []

    def slow_add(a, b):
        active.append(1)
        if len(active) > 1:
            overlap.append(1)
        time.sleep(0.0005)
        active.pop()
        return a + b

    rx.register_func(name, slow_add)
    vm = call_packed_vm(name, 2)
    results = {}

    def work(k):
        results[k] = [vm["main"](k, i) for i in range(20)]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {k: [k + i for i in range(20)] for k in range(8)}
    assert not overlap


def test_the_gil_is_released_while_native_code_runs():
    """A long native loop in one thread does not stop Python in another: a watcher thread, which
    needs the GIL to look at the caller's frame, sees the call running and interrupts it. Were
    the GIL held, the watcher would never run and the loop would end in its step budget."""
    ib = rx.ExecBuilder()
    with ib.function("spin", num_inputs=0):
        ib.emit_goto(0)
    vm = rx.VirtualMachine(ib.get(), step_budget=1 << 36)
    finish = watch(threading.get_ident(), vm.interrupt, repeat=True)
    try:
        with pytest.raises(rx.VMError, match="interrupt"):
            call_native(vm["spin"])
    finally:
        assert finish(), "the watcher never saw the call run"


def test_interrupt_from_another_thread():
    ib = rx.ExecBuilder()
    with ib.function("spin", num_inputs=0):
        ib.emit_call("vm.builtin.int.add", args=[ib.imm(0), ib.imm(1)], dst=ib.r(0))
        ib.emit_if(ib.r(0), 2)
        ib.emit_goto(-1)
        ib.emit_ret(ib.r(0))
    vm = rx.VirtualMachine(ib.get())
    done = threading.Event()

    def interrupter():
        # Repeat: a request made before the call starts is cleared when it starts.
        while not done.wait(0.01):
            vm.interrupt()

    t = threading.Thread(target=interrupter)
    t.start()
    try:
        with pytest.raises(rx.VMError, match="interrupted"):
            vm["spin"]()
    finally:
        done.set()
        t.join()
    assert vm["spin"].releases_gil


def test_function_lookup_is_cached_and_saved_functions_shadow(add_vm):
    vm = rx.VirtualMachine(add_vm.executable)
    assert vm["main"] is vm["main"]
    first = vm["main"]
    vm.save_function("main", "main", 2, 3)  # a saved function shadows the bytecode one
    assert vm["main"] is not first
    assert vm["main"]() == 5
    assert first(1, 1) == 2  # handles resolved before keep working
    with pytest.raises(TypeError):
        vm[0]


def test_which_functions_release_the_gil(unique_name):
    name = unique_name()
    rx.register_func(name, lambda x: x)
    ib = rx.ExecBuilder()
    with ib.function("id", num_inputs=1):
        ib.emit_ret(ib.r(0))
    with ib.function("scalar", num_inputs=1):
        ib.emit_call("vm.builtin.int.add", args=[ib.r(0), ib.imm(1)], dst=ib.r(1))
        ib.emit_call("vm.builtin.move", args=[ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    with ib.function("python", num_inputs=1):
        ib.emit_call(name, args=[ib.r(0)], dst=ib.r(1))
        ib.emit_call("scalar", args=[ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    with ib.function("tensor_op", num_inputs=1):
        ib.emit_call("vm.op.add", args=[ib.r(0), ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    with ib.function("loop", num_inputs=1):
        ib.emit_if(ib.r(0), 2)
        ib.emit_goto(-1)
        ib.emit_ret(ib.r(0))
    with ib.function("recursion", num_inputs=1):
        ib.emit_if(ib.r(0), 3)
        ib.emit_call("vm.builtin.int.sub", args=[ib.r(0), ib.imm(1)], dst=ib.r(1))
        ib.emit_call("recursion", args=[ib.r(1)], dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    with ib.function("long", num_inputs=1):
        for _ in range(300):
            ib.emit_call("vm.builtin.int.add", args=[ib.r(0), ib.imm(0)], dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    # Calls of Python do not count toward the budget of instructions run with the GIL: Python
    # hands the GIL to other threads while they run, and a released GIL would be taken back
    # at each one. The other instructions still count.
    with ib.function("callbacks", num_inputs=1):
        for _ in range(1000):
            ib.emit_call(name, args=[ib.r(0)], dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    with ib.function("callbacks_and_long", num_inputs=1):
        for _ in range(200):
            ib.emit_call(name, args=[ib.r(0)], dst=ib.r(0))
            ib.emit_call("vm.builtin.int.add", args=[ib.r(0), ib.imm(0)], dst=ib.r(0))
            ib.emit_call("vm.builtin.int.add", args=[ib.r(0), ib.imm(0)], dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    vm = rx.VirtualMachine(ib.get())
    names = ["id", "scalar", "python", "tensor_op", "loop", "recursion", "long", "callbacks", "callbacks_and_long"]
    releases = {f: vm[f].releases_gil for f in names}
    assert releases == {
        "id": False,
        "scalar": False,
        "python": False,
        "tensor_op": True,
        "loop": True,
        "recursion": True,
        "long": True,
        "callbacks": False,
        "callbacks_and_long": True,
    }
    assert vm["python"](1) == 2 and vm["recursion"](5) == 0 and vm["long"](3) == 3
    assert vm["callbacks"](4) == 4 and vm["callbacks_and_long"](5) == 5


def test_print_writes_through_sys_stdout(capsys):
    import contextlib
    import io

    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=1):
        ib.emit_call("vm.builtin.print", args=[ib.r(0), "hi"], dst=None)
        ib.emit_call("relax.run.print", args=["n={}", ib.r(0)], dst=None)
        ib.emit_ret(ib.r(0))
    vm = rx.VirtualMachine(ib.get())
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        vm["main"](7)
    assert buf.getvalue() == "7 hi\nn=7\n"
    vm["main"](8)
    assert capsys.readouterr().out == "8 hi\nn=8\n"


def test_print_reports_a_failing_sys_stdout(monkeypatch):
    class Broken:
        def write(self, text):
            raise OSError("the terminal went away")

    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=1):
        ib.emit_call("vm.builtin.print", args=[ib.r(0)], dst=None)
        ib.emit_ret(ib.r(0))
    vm = rx.VirtualMachine(ib.get())
    monkeypatch.setattr(sys, "stdout", Broken())
    with pytest.raises(rx.VMError, match="sys.stdout: OSError: the terminal went away") as info:
        vm["main"](1)
    assert "vm.builtin.print" in str(info.value)
    monkeypatch.setattr(sys, "stdout", None)
    assert vm["main"](2) == 2  # nothing to print to: nothing printed, as Python's print
