"""A function the static analysis cannot bound (a loop, a kernel whose cost depends on symbolic
shapes) releases the GIL, except for a call whose last call with the same argument shapes and
scalars ran short: that one keeps it. Such a call may still turn out long (same arguments, but a
callback or data that makes it loop longer); then the VM's poll hook hands the GIL to other
threads while it runs, so that they, and Ctrl-C, keep working."""

from __future__ import annotations

import signal
import threading

import pytest
from native_call import call_native, watch

import relaxvm as rx


def _counted_spin(unique_name, count: list[int]) -> rx.VirtualMachine:
    """A VM whose `spin()` loops `count[0]` times, read through a callback at its start: calls
    with the same (no) arguments, of lengths the test chooses. The step budget turns a call the
    watcher never sees (the GIL never handed over) into a VMError instead of a hang."""
    name = unique_name()
    rx.register_func(name, lambda: count[0])
    ib = rx.ExecBuilder()
    with ib.function("spin", num_inputs=0):
        ib.emit_call(name, args=[], dst=ib.r(0))
        ib.emit_call("vm.builtin.int.add", args=[ib.imm(0), ib.imm(0)], dst=ib.r(1))
        ib.emit_call("vm.builtin.int.lt", args=[ib.r(1), ib.r(0)], dst=ib.r(2))
        ib.emit_if(ib.r(2), 3)
        ib.emit_call("vm.builtin.int.add", args=[ib.r(1), ib.imm(1)], dst=ib.r(1))
        ib.emit_goto(-3)
        ib.emit_ret(ib.r(1))
    return rx.VirtualMachine(ib.get(), step_budget=1 << 28)


def _record_short(f: rx.VMFunction, count: list[int]) -> None:
    """Calls `f` short twice: the first releases the GIL (no record yet), the second keeps it."""
    count[0] = 10
    assert f() == 10 and f() == 10
    assert f.releases_gil  # statically: it loops


def test_a_kept_call_that_runs_long_hands_the_gil_to_other_threads(unique_name):
    # The watcher needs the GIL to see the call running; were it never handed over, the loop
    # would end in its step budget (a VMError without "interrupted").
    count = [10]
    vm = _counted_spin(unique_name, count)
    f = vm["spin"]
    _record_short(f, count)
    count[0] = 1 << 40
    finish = watch(threading.get_ident(), vm.interrupt, repeat=True)
    try:
        with pytest.raises(rx.VMError, match="interrupted"):
            call_native(f)
    finally:
        assert finish(), "the watcher never saw the call run"
    # The record now says long; short calls keep working.
    count[0] = 3
    assert f() == 3


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals go to the main thread")
def test_ctrl_c_stops_a_kept_call_that_runs_long(unique_name):
    count = [10]
    vm = _counted_spin(unique_name, count)
    f = vm["spin"]
    _record_short(f, count)
    count[0] = 1 << 40
    main = threading.main_thread().ident
    finish = watch(main, lambda: signal.pthread_kill(main, signal.SIGINT))
    try:
        with pytest.raises(KeyboardInterrupt):
            call_native(f)
    finally:
        assert finish(), "the watcher never saw the call run"
    count[0] = 4
    assert f() == 4


def test_a_global_function_keeps_working_whether_it_keeps_the_gil_or_not(unique_name):
    # Global functions called from Python record their calls the same way: the answers do
    # not depend on which way a call went, including a call whose key cannot be made (a str).
    name = unique_name()
    rx.register_func(name, lambda *a: len(a))
    g = rx.get_global_func("vm.builtin.int.add")
    assert [g(i, 1) for i in range(4)] == [1, 2, 3, 4]
    py = rx.get_global_func(name)
    assert [py(1, "s"), py(1, "s"), py(2.0), py(2.0)] == [2, 2, 1, 1]
