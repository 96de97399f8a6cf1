"""Ctrl-C and vm.interrupt() stop every long operation: a benchmark asked to run for ages, and a
single huge matmul (one instruction, so the interpreter's own checks never come)."""

import os

from attack import run_attack

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SETUP = f"""
import os, signal, sys, threading, numpy as np, relaxvm as rx
sys.path.insert(0, {TESTS!r})
from native_call import call_native, watch
ib = rx.ExecBuilder()
with ib.function("one", num_inputs=0):
    ib.emit_call("vm.builtin.int.add", args=[ib.imm(1), ib.imm(2)], dst=ib.r(0))
    ib.emit_ret(ib.r(0))
with ib.function("mm", num_inputs=2):
    ib.emit_call("vm.op.matmul", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
    ib.emit_ret(ib.r(2))
vm = rx.VirtualMachine(ib.get())
# About 2 s on two AVX-512 cores; the signal comes once the call runs (native_call orders it by
# the caller's frame, not by a sleep), which a matmul of this size outlasts on any machine.
big = np.ones((6000, 6000), "float32")
main = threading.get_ident()
def ctrl_c_inside():
    return watch(main, lambda: os.kill(os.getpid(), signal.SIGINT))
def interrupt_inside():
    return watch(main, vm.interrupt, repeat=True)
"""


def test_time_evaluator_arguments_are_checked():
    for call, match in [
        ("min_repeat_ms=1e300", "min_repeat_ms must be a number of milliseconds"),
        ("min_repeat_ms=float('nan')", "min_repeat_ms"),
        ("cooldown_interval_ms=-1", "cooldown_interval_ms"),
        ("f_preproc='cache_flush_cpu_non_first_arg'", "f_preproc"),
        ("repeats_to_cooldown=0", "at least 1"),
    ]:
        run_attack(SETUP + f"vm.time_evaluator('one', rx.cpu(), {call})").assert_raises("ValueError", match)
    run_attack(
        SETUP
        + "r = vm.time_evaluator('one', rx.cpu(), number=2, repeat=3, cooldown_interval_ms=1)(); print(len(r.results))"
    ).assert_ok("3")


def test_ctrl_c_stops_an_hour_long_benchmark():
    run_attack(
        SETUP
        + """
finish = ctrl_c_inside()
try:
    call_native(vm.time_evaluator('one', rx.cpu(), min_repeat_ms=3.6e6))
finally:
    assert finish(), "the signal was never sent"
"""
    ).assert_raises("KeyboardInterrupt")


def test_interrupt_stops_an_hour_long_benchmark():
    run_attack(
        SETUP
        + """
finish = interrupt_inside()
try:
    call_native(vm.time_evaluator('one', min_repeat_ms=3.6e6))
finally:
    assert finish(), "the interrupt was never sent"
"""
    ).assert_raises("VMError", "interrupt")


def test_ctrl_c_stops_one_huge_matmul_and_the_vm_works_after():
    run_attack(
        SETUP
        + """
finish = ctrl_c_inside()
try:
    call_native(vm["mm"], big, big)
except KeyboardInterrupt:
    print("interrupted")
assert finish(), "the signal was never sent"
print(vm["mm"](np.eye(2, dtype="float32"), np.eye(2, dtype="float32")).numpy().tolist())
"""
    ).assert_ok("interrupted\n[[1.0, 0.0], [0.0, 1.0]]")


def test_interrupt_stops_one_huge_matmul():
    run_attack(
        SETUP
        + """
finish = interrupt_inside()
try:
    call_native(vm["mm"], big, big)
finally:
    assert finish(), "the interrupt was never sent"
"""
    ).assert_raises("VMError", "interrupt")
