"""A function the static analysis cannot bound (a loop, a kernel whose cost depends on symbolic
shapes) releases the GIL, except for a call whose last call with the same argument shapes and
scalars ran short: that one keeps it. Such a call may still turn out long (same arguments, but a
callback or data that makes it loop longer); then the VM's poll hook hands the GIL to other
threads while it runs, so that they, and Ctrl-C, keep working."""

from __future__ import annotations

import signal
import threading
import time

import pytest
from native_call import call_native, watch

import relaxvm as rx


def _counted_spin(unique_name, count: list[int], pause: list[float] | None = None) -> rx.VirtualMachine:
    """A VM whose `spin()` loops `count[0]` times, read through a callback at its start (which
    first sleeps `pause[0]` seconds, if given): calls with the same (no) arguments, of lengths
    the test chooses. The step budget turns a call the watcher never sees (the GIL never handed
    over) into a VMError instead of a hang."""
    name = unique_name()

    def read_count() -> int:
        if pause and pause[0]:
            time.sleep(pause[0])
        return count[0]

    rx.register_func(name, read_count)
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
    """Records `f`'s last call short through the test hook (wall time under load could say
    either), and checks that the next call keeps the GIL: the tests below then exercise the
    kept path for sure."""
    count[0] = 10
    assert f() == 10
    assert f.releases_gil  # statically: it loops
    rx._relaxvm._note_short_call(f)
    assert rx._relaxvm._keeps_gil_next(f)


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
    # The poll hook recorded the call long: the next one releases; short calls keep working.
    assert not rx._relaxvm._keeps_gil_next(f)
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
    assert not rx._relaxvm._keeps_gil_next(f)
    count[0] = 4
    assert f() == 4


def test_a_kept_call_that_runs_long_without_polling_makes_the_next_call_release(unique_name):
    # A kept call can turn long in its callbacks, builtins or kernels with fewer steps than the
    # poll interval (it never reaches the poll hook): the clock records it long. Here the
    # callback sleeps for 1 ms (at least that long, whatever the load) and the loop runs 10 steps.
    count, pause = [10], [0.0]
    f = _counted_spin(unique_name, count, pause)["spin"]
    _record_short(f, count)
    pause[0] = 0.001
    assert f() == 10
    assert not rx._relaxvm._keeps_gil_next(f), "a kept call that ran 1 ms is recorded long"
    pause[0] = 0.0


def test_global_functions_keep_the_gil_when_constant_time_or_recorded_short(unique_name):
    # A constant-time builtin always keeps it; a Python function keeps it once its last call
    # with arguments of the same key ran short; one whose arguments have no key (a str) never.
    g = rx.get_global_func("vm.builtin.int.add")
    assert rx._relaxvm._keeps_gil_next(g, 1, 2)
    assert [g(i, 1) for i in range(4)] == [1, 2, 3, 4]
    name = unique_name()
    rx.register_func(name, lambda *a: len(a))
    py = rx.get_global_func(name)
    assert not rx._relaxvm._keeps_gil_next(py, 2.0), "no call yet"
    rx._relaxvm._note_short_call(py, 2.0)
    assert rx._relaxvm._keeps_gil_next(py, 2.0)
    assert not rx._relaxvm._keeps_gil_next(py, 3.0), "another scalar: another key"
    assert py(2.0) == 1
    assert not rx._relaxvm._keeps_gil_next(py, 1, "s")
    with pytest.raises(ValueError, match="expected arguments of kinds a call is keyed by"):
        rx._relaxvm._note_short_call(py, 1, "s")
    assert [py(1, "s"), py(1, "s")] == [2, 2]
    # An object or a function argument (a KV cache at its begin/end_forward) keys by identity.
    other = rx.get_global_func("vm.builtin.int.lt")
    rx._relaxvm._note_short_call(py, g)
    assert rx._relaxvm._keeps_gil_next(py, g)
    assert not rx._relaxvm._keeps_gil_next(py, other)
    assert py(g) == 1
    with pytest.raises(TypeError, match="expected a relaxvm.VMFunction or relaxvm.Closure, found int"):
        rx._relaxvm._keeps_gil_next(3)
