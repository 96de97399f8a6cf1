"""Reliability from Python: Ctrl-C, deep recursion, resident memory, threads, panics."""

import os
import signal
import threading

import numpy as np
import pytest
from native_call import call_native, wait_until_inside, watch

import relaxvm as rx
from conftest import counting_builder


def spin_vm(**limits) -> rx.VirtualMachine:
    ib = rx.ExecBuilder()
    with ib.function("spin", num_inputs=0):
        ib.emit_goto(0)
    with ib.function("one", num_inputs=0):
        ib.emit_call("vm.builtin.int.add", args=[ib.imm(0), ib.imm(1)], dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    return rx.VirtualMachine(ib.get(), **limits)


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals go to the main thread")
def test_ctrl_c_stops_an_endless_loop_and_the_vm_works_after():
    # Ctrl-C comes once the loop runs (native_call: ordered by the caller's frame, not by a
    # sleep); the budget only turns a Ctrl-C that is never noticed into a VMError instead of a
    # hang. How fast Ctrl-C acts is a benchmark row (scripts/bench.py).
    vm = spin_vm(step_budget=1 << 36)
    main = threading.main_thread().ident
    finish = watch(main, lambda: signal.pthread_kill(main, signal.SIGINT))
    try:
        with pytest.raises(KeyboardInterrupt):
            call_native(vm["spin"])
    finally:
        assert finish(), "the watcher never saw the loop run"
    assert vm["one"]() == 1


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals go to the main thread")
def test_ctrl_c_stops_a_loop_of_a_vm_without_a_step_budget_after_short_calls():
    # Without a step budget, a call starts counting steps without reading the limits once an
    # earlier call found them (the entry's cached limits): the poll for Ctrl-C still runs. The
    # loop is finite (long, not endless): were Ctrl-C missed, the call would return its sum
    # and the test fail, not hang.
    vm = rx.VirtualMachine(counting_builder("count").get())
    count = vm["count"]
    for _ in range(3):
        assert count(10) == 10
    main = threading.main_thread().ident
    finish = watch(main, lambda: signal.pthread_kill(main, signal.SIGINT))
    try:
        with pytest.raises(KeyboardInterrupt):
            call_native(count, 1 << 31)
    finally:
        assert finish(), "the watcher never saw the loop run"
    assert count(10) == 10


def test_unbounded_recursion_is_an_error_not_a_crash():
    ib = rx.ExecBuilder()
    with ib.function("down", num_inputs=1):
        ib.emit_call("down", args=[ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    vm = rx.VirtualMachine(ib.get())
    with pytest.raises(rx.VMError, match="depth"):
        vm["down"](1)
    with pytest.raises(rx.VMError, match="depth"):
        vm["down"](2)


def test_limits_are_set_per_vm():
    ib = rx.ExecBuilder()
    with ib.function("spin", num_inputs=0):
        ib.emit_goto(0)
    with ib.function("down", num_inputs=1):
        ib.emit_call("down", args=[ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    ex = ib.get()
    vm = rx.VirtualMachine(ex, step_budget=1000, max_call_depth=50)
    for _ in range(2):  # the budget is per call
        with pytest.raises(rx.VMError, match="step budget of 1000"):
            vm["spin"]()
    with pytest.raises(rx.VMError, match="call depth limit of 50 frames") as info:
        rx.VirtualMachine(ex, max_call_depth=50)["down"](1)
    assert info.value.func == "down"
    with pytest.raises(MemoryError, match="limited to 10 registers"):
        rx.VirtualMachine(ex, max_stack_registers=10)["down"](1)  # two registers a frame
    for bad in (0, -1):
        with pytest.raises(ValueError, match="step_budget must be at least 1"):
            rx.VirtualMachine(ex, step_budget=bad)
    with pytest.raises(TypeError):
        rx.VirtualMachine(ex, None, None, False, 10)  # the limits are keyword-only


@pytest.mark.parametrize("nbytes", [1 << 50, (1 << 62)])
def test_huge_allocations_are_memory_errors(nbytes):
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=0):
        ib.emit_call(
            "vm.builtin.alloc_storage",
            args=[ib.vm_state(), (nbytes,), ib.imm(0), rx.DataType("uint8"), "global"],
            dst=ib.r(0),
        )
        ib.emit_ret(ib.r(0))
    vm = rx.VirtualMachine(ib.get())
    with pytest.raises(MemoryError):
        vm["main"]()


def test_a_huge_tensor_is_a_memory_error_and_one_larger_than_its_storage_a_value_error():
    with pytest.raises(MemoryError):
        rx.empty((1 << 50,), "uint8")
    ib = rx.ExecBuilder()
    # alloc(n, m): a storage of n bytes, viewed as a uint8 tensor of m elements.
    with ib.function("alloc", num_inputs=2):
        ib.emit_call(
            "vm.builtin.alloc_storage", args=[ib.vm_state(), ib.r(0), ib.imm(0), rx.DataType("uint8")], dst=ib.r(2)
        )
        ib.emit_call("vm.builtin.alloc_tensor", args=[ib.r(2), ib.imm(0), ib.r(1), rx.DataType("uint8")], dst=ib.r(3))
        ib.emit_ret(ib.r(3))
    vm = rx.VirtualMachine(ib.get())
    with pytest.raises(MemoryError, match="1125899906842624 bytes"):
        vm["alloc"](rx.Shape([1 << 50]), rx.Shape([1 << 50]))
    # No allocation is asked for here: the storage is too small for the view, which is a ValueError.
    with pytest.raises(ValueError, match="needs 1125899906842624 bytes, but the storage has 8"):
        vm["alloc"](rx.Shape([8]), rx.Shape([1 << 50]))
    assert vm["alloc"](rx.Shape([8]), rx.Shape([8])).shape == (8,)


def test_a_rust_panic_in_a_native_function_is_a_vm_error_and_the_vm_keeps_working(unique_name):
    name = unique_name()
    rx._relaxvm._register_panicking_func(name, "native bug")
    ib = rx.ExecBuilder()
    with ib.function("boom", num_inputs=1):
        ib.emit_call(name, args=[ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    with ib.function("one", num_inputs=0):
        ib.emit_call("vm.builtin.int.add", args=[ib.imm(0), ib.imm(1)], dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    vm = rx.VirtualMachine(ib.get())
    for _ in range(3):
        with pytest.raises(rx.VMError, match="native bug") as info:
            vm["boom"](1)
        assert "panicked" in str(info.value) and info.value.func == "boom" and info.value.pc == 0
        assert vm["one"]() == 1


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_resident_memory_stays_flat_over_100k_calls(unique_name):
    name = unique_name()
    rx.register_func(name, lambda x, k: x)
    ib = rx.ExecBuilder()
    with ib.function("add", num_inputs=2):
        ib.emit_call("vm.builtin.int.add", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    with ib.function("main", num_inputs=2):
        ib.emit_call("vm.builtin.make_closure", args=[ib.f("add"), ib.imm(1)], dst=ib.r(2))
        ib.emit_call("vm.builtin.invoke_closure", args=[ib.vm_state(), ib.r(2), ib.r(1)], dst=ib.r(3))
        ib.emit_call(name, args=[ib.r(0), ib.r(3)], dst=ib.r(4))
        ib.emit_ret(ib.r(4))
    f = rx.VirtualMachine(ib.get())["main"]
    x = np.ones(16, "float32")

    def run(n):
        for i in range(n):
            f(x, i)

    run(20_000)  # warm up: caches and allocator pools reach their steady size
    before = rss_bytes()
    run(100_000)
    grown = rss_bytes() - before
    print(f"resident memory grew by {grown} bytes over 100,000 calls")
    assert grown < 4 << 20, f"resident memory grew by {grown} bytes over 100,000 calls"


def test_one_executable_many_threads_each_with_its_own_vm():
    ib = rx.ExecBuilder()
    with ib.function("fib", num_inputs=1):
        ib.emit_call("vm.builtin.int.lt", args=[ib.r(0), ib.imm(2)], dst=ib.r(1))
        ib.emit_if(ib.r(1), 2)
        ib.emit_ret(ib.r(0))
        ib.emit_call("vm.builtin.int.sub", args=[ib.r(0), ib.imm(1)], dst=ib.r(2))
        ib.emit_call("fib", args=[ib.r(2)], dst=ib.r(3))
        ib.emit_call("vm.builtin.int.sub", args=[ib.r(0), ib.imm(2)], dst=ib.r(4))
        ib.emit_call("fib", args=[ib.r(4)], dst=ib.r(5))
        ib.emit_call("vm.builtin.int.add", args=[ib.r(3), ib.r(5)], dst=ib.r(6))
        ib.emit_ret(ib.r(6))
    ex = ib.get()
    results = {}

    def work(k):
        vm = rx.VirtualMachine(ex)
        results[k] = [vm["fib"](n) for n in range(10, 16)]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {k: [55, 89, 144, 233, 377, 610] for k in range(8)}


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals go to the main thread")
def test_ctrl_c_stops_a_wait_for_a_vm_another_thread_runs():
    # The other thread's endless loop holds the VM; the main thread's call waits for it, and
    # Ctrl-C ends the wait. The holder is interrupted after, and the VM works again.
    vm = spin_vm(step_budget=1 << 36)
    spin, one = vm["spin"], vm["one"]
    assert spin.releases_gil and not one.releases_gil
    outcome: list[BaseException] = []

    def hold_it():
        try:
            call_native(spin)
        except rx.VMError as e:
            outcome.append(e)

    holder = threading.Thread(target=hold_it)
    holder.start()
    # The holder is inside its call (its loop runs) before the main thread asks for the VM, and
    # Ctrl-C comes once the main thread waits in its call: both ordered by frames, not sleeps.
    assert wait_until_inside(holder.ident)
    main = threading.main_thread().ident
    finish = watch(main, lambda: signal.pthread_kill(main, signal.SIGINT))
    try:
        with pytest.raises(KeyboardInterrupt):
            call_native(one)
    finally:
        assert finish(), "the watcher never saw the main thread wait"
        vm.interrupt()
        holder.join()
    assert len(outcome) == 1 and "interrupt" in str(outcome[0]).lower(), outcome
    assert one() == 1
