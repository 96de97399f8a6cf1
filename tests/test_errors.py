"""Errors: VM failures, Python exceptions through the VM, and recovery afterwards."""

import sys
import threading

import pytest

import relaxvm as rx
from conftest import build, call_packed_vm


def test_exception_classes():
    assert issubclass(rx.VMError, RuntimeError)
    assert issubclass(rx.CheckError, RuntimeError)
    for sub, builtin in [
        (rx.VMTypeError, TypeError),
        (rx.VMKeyError, KeyError),
        (rx.VMIndexError, IndexError),
        (rx.VMValueError, ValueError),
        (rx.VMMemoryError, MemoryError),
    ]:
        assert issubclass(sub, rx.VMError) and issubclass(sub, builtin)
        assert sub.__module__ == "relaxvm"


def failing_vm():
    """main(x): y = vm.builtin.int.add(x, 1); ret y — fails when x is not an int."""

    def body(ib):
        ib.emit_call("vm.builtin.move", args=[ib.r(0)], dst=ib.r(1))
        ib.emit_call(
            "vm.builtin.int.add", args=[ib.r(1), ib.imm(1)], dst=ib.r(2), loc=rx.Location.file("model.py", 7, 3)
        )
        ib.emit_ret(ib.r(2))

    return rx.VirtualMachine(build(body))


def test_runtime_failure_names_function_instruction_and_location():
    vm = failing_vm()
    with pytest.raises(rx.VMError) as info:
        vm["main"]("not an int")
    msg = str(info.value)
    assert '"main"' in msg and "instruction 1" in msg
    assert "call  vm.builtin.int.add  in: %1, i1  dst: %2" in msg
    assert '"model.py":7:3' in msg
    assert isinstance(info.value, TypeError)  # a type mismatch is also a TypeError
    assert info.value.func == "main" and info.value.pc == 1
    assert info.value.instr.startswith("call  vm.builtin.int.add")
    assert info.value.location == '"model.py":7:3'


def test_vm_works_after_an_error():
    vm = failing_vm()
    for _ in range(3):
        with pytest.raises(rx.VMTypeError, match="vm.builtin.int.add"):
            vm["main"]("x")
        assert vm["main"](41) == 42


def test_wrong_argument_count_is_a_type_error():
    vm = failing_vm()
    with pytest.raises(TypeError, match="expected 1 argument"):
        vm["main"]()
    with pytest.raises(TypeError):
        vm["main"](1, 2)
    assert vm["main"](1) == 2


def test_unknown_function_is_a_key_error():
    vm = failing_vm()
    with pytest.raises(KeyError, match="nope") as info:
        vm["nope"]
    assert isinstance(info.value, rx.VMError)
    assert info.value.func is None and info.value.pc is None and info.value.location is None
    with pytest.raises(KeyError):
        vm.save_function("nope", "saved")


def test_missing_packed_function_is_a_key_error():
    def body(ib):
        ib.emit_call("test.errors.never_registered", args=[ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))

    with pytest.raises(KeyError, match="test.errors.never_registered"):
        rx.VirtualMachine(build(body))


def test_allocation_failure_is_a_memory_error():
    def body(ib):
        ib.emit_call(
            "vm.builtin.alloc_storage",
            args=[ib.vm_state(), ib.r(0), ib.convert_constant(0), rx.DataType("uint8"), "global"],
            dst=ib.r(1),
        )
        ib.emit_ret(ib.r(1))

    vm = rx.VirtualMachine(build(body))
    with pytest.raises(MemoryError):
        vm["main"](rx.Shape([1 << 55]))
    assert vm["main"](rx.Shape([8])).type_name == "storage"


class CustomError(Exception):
    pass


@pytest.mark.parametrize("exc_type", [CustomError, ValueError, KeyError, ZeroDivisionError])
def test_python_exception_keeps_its_type(unique_name, exc_type):
    name = unique_name()

    def boom(x):
        raise exc_type("boom from python")

    rx.register_func(name, boom)
    vm = call_packed_vm(name, 1)
    with pytest.raises(exc_type, match="boom from python") as info:
        vm["main"](1)
    assert type(info.value) is exc_type
    # The traceback still reaches the line that raised, inside the callback.
    assert info.traceback[-1].name == "boom"
    assert "raise exc_type" in str(info.traceback[-1].statement)
    if sys.version_info >= (3, 11):
        notes = "\n".join(info.value.__notes__)
        assert '"main"' in notes and "instruction 0" in notes and name in notes
    else:
        assert '"main"' in str(info.value.__cause__)
    # the VM recovers
    rx.register_func(name, lambda x: x, override=True)
    assert call_packed_vm(name, 1)["main"](5) == 5


def test_base_exceptions_are_not_swallowed(unique_name):
    name = unique_name()

    def interrupt(x):
        raise KeyboardInterrupt

    rx.register_func(name, interrupt)
    vm = call_packed_vm(name, 1)
    with pytest.raises(KeyboardInterrupt):
        vm["main"](1)

    def exit_(x):
        raise SystemExit(3)

    rx.register_func(name, exit_, override=True)
    with pytest.raises(SystemExit):
        call_packed_vm(name, 1)["main"](1)


def test_exception_through_nested_vms(unique_name):
    """An exception raised in Python, under a VM called from Python under another VM."""
    inner_name, outer_name = unique_name("inner"), unique_name("outer")

    def inner(x):
        raise CustomError("deep")

    rx.register_func(inner_name, inner)
    inner_vm = call_packed_vm(inner_name, 1)
    rx.register_func(outer_name, lambda x: inner_vm["main"](x))
    outer_vm = call_packed_vm(outer_name, 1)
    with pytest.raises(CustomError, match="deep"):
        outer_vm["main"](1)


def test_reentering_the_same_vm_from_a_callback_is_an_error(unique_name):
    name = unique_name()
    holder = {}
    rx.register_func(name, lambda x: holder["vm"]["main"](x))
    vm = call_packed_vm(name, 1)
    holder["vm"] = vm
    with pytest.raises(RuntimeError, match="already running on this thread"):
        vm["main"](1)


def test_exception_in_callback_argument():
    ib = rx.ExecBuilder()
    with ib.function("apply", num_inputs=2):
        ib.emit_call("vm.builtin.invoke_closure", args=[ib.vm_state(), ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    vm = rx.VirtualMachine(ib.get())

    def bad(x):
        return 1 / x

    with pytest.raises(ZeroDivisionError):
        vm["apply"](bad, 0)
    assert vm["apply"](bad, 4) == 0.25


def test_errors_from_many_threads_are_independent(unique_name):
    name = unique_name()

    def maybe_fail(x):
        if x % 2:
            raise CustomError(str(x))
        return x

    rx.register_func(name, maybe_fail)
    vm = call_packed_vm(name, 1)
    failures = []

    def work(k):
        for i in range(50):
            try:
                assert vm["main"](k * 1000 + i) == k * 1000 + i
            except CustomError as e:
                assert int(str(e)) % 2 == 1
                failures.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(failures) == 4 * 25


def test_bytecode_closure_needs_a_vm():
    ib = rx.ExecBuilder()
    with ib.function("f", num_inputs=0):
        ib.emit_call("vm.builtin.null_value", dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    with ib.function("get", num_inputs=0):
        ib.emit_call("vm.builtin.make_closure", args=[ib.f("f")], dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    vm = rx.VirtualMachine(ib.get())
    clo = vm["get"]()
    assert clo.is_bytecode and clo.name == "f"
    with pytest.raises(rx.VMError, match="inside a VM"):
        clo()
    assert vm.invoke_closure(clo) is None
    with pytest.raises(TypeError, match="expects a closure"):
        vm.invoke_closure(3)


def test_malformed_file_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="malformed"):
        rx.load_executable(b"\x89RVX garbage")
    with pytest.raises(FileNotFoundError):
        rx.load_executable(tmp_path / "missing.rvx")
    with pytest.raises(TypeError):
        rx.load_executable(3.5)
