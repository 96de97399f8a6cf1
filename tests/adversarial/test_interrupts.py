"""Ctrl-C and vm.interrupt() stop every long operation: a benchmark asked to run for ages, and a
single huge matmul (one instruction, so the interpreter's own checks never come)."""

from attack import run_attack

SETUP = """
import os, signal, threading, numpy as np, relaxvm as rx
ib = rx.ExecBuilder()
with ib.function("one", num_inputs=0):
    ib.emit_call("vm.builtin.int.add", args=[ib.imm(1), ib.imm(2)], dst=ib.r(0))
    ib.emit_ret(ib.r(0))
with ib.function("mm", num_inputs=2):
    ib.emit_call("vm.op.matmul", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
    ib.emit_ret(ib.r(2))
vm = rx.VirtualMachine(ib.get())
# About 2 s on two AVX-512 cores, so the signal at 0.3 s comes in the middle of it.
big = np.ones((6000, 6000), "float32")
def ctrl_c_after(seconds):
    threading.Timer(seconds, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
def interrupt_after(seconds):
    stop = threading.Event()
    def press():
        while not stop.wait(seconds):
            vm.interrupt()
    threading.Thread(target=press, daemon=True).start()
    return stop
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
    run_attack(SETUP + "ctrl_c_after(0.5)\nvm.time_evaluator('one', rx.cpu(), min_repeat_ms=3.6e6)()").assert_raises(
        "KeyboardInterrupt"
    )


def test_interrupt_stops_an_hour_long_benchmark():
    run_attack(
        SETUP
        + """
stop = interrupt_after(0.3)
try:
    vm.time_evaluator('one', min_repeat_ms=3.6e6)()
finally:
    stop.set()
"""
    ).assert_raises("VMError", "interrupt")


def test_ctrl_c_stops_one_huge_matmul_and_the_vm_works_after():
    run_attack(
        SETUP
        + """
ctrl_c_after(0.3)
try:
    vm["mm"](big, big)
except KeyboardInterrupt:
    print("interrupted")
print(vm["mm"](np.eye(2, dtype="float32"), np.eye(2, dtype="float32")).numpy().tolist())
"""
    ).assert_ok("interrupted\n[[1.0, 0.0], [0.0, 1.0]]")


def test_interrupt_stops_one_huge_matmul():
    run_attack(
        SETUP + "stop = interrupt_after(0.2)\ntry:\n    vm['mm'](big, big)\nfinally:\n    stop.set()"
    ).assert_raises("VMError", "interrupt")
