"""Every long loop of a builtin polls: Ctrl-C and vm.interrupt() stop one huge elementwise op,
sum or sort — a single instruction, so the interpreter's own checks never come — on its
sequential paths (strided views) as on its parallel ones. Inputs are stride-0 views of one
element (np.broadcast_to), so only the results take memory."""

import os

from attack import run_attack

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The watcher (tests/native_call.py) acts once the calling thread is inside the VM call.
SETUP = f"""
import os, signal, sys, threading, numpy as np, relaxvm as rx
sys.path.insert(0, {TESTS!r})
from native_call import call_native, watch
def vm_of(name, n):
    ib = rx.ExecBuilder()
    with ib.function("f", num_inputs=n):
        ib.emit_call(name, args=[ib.r(i) for i in range(n)], dst=ib.r(n))
        ib.emit_ret(ib.r(n))
    return rx.VirtualMachine(ib.get())
# 2^28 float32 elements: 1 GiB of result, far more work than the millisecond the watcher takes
# to act once the call runs.
N = 1 << 28
def huge(value=1.0, n=N):
    return rx.from_dlpack(np.broadcast_to(np.float32(value), (n,)))
main = threading.get_ident()
def ctrl_c_inside():
    return watch(main, lambda: os.kill(os.getpid(), signal.SIGINT))
def interrupt_inside(vm):
    return watch(main, vm.interrupt, repeat=True)
"""


def expect_stopped(op: str, arity: int, args: str, check_after: str, want_after: str) -> None:
    """Calls `op(*args)` (an expression list) in a fresh VM and stops it, once it runs, with
    vm.interrupt() in one child process and Ctrl-C in another; then `check_after` (which prints
    `want_after`) shows that the VM still works."""
    for how, start, catch in [
        ("interrupt", "finish = interrupt_inside(vm)", "rx.VMError"),
        ("ctrl-c", "finish = ctrl_c_inside()", "KeyboardInterrupt"),
    ]:
        out = run_attack(
            SETUP
            + f"""
vm = vm_of({op!r}, {arity})
{start}
try:
    call_native(vm["f"], {args})
except {catch} as e:
    print("stopped:", {how!r}, {how!r} == "ctrl-c" or "interrupt" in str(e).lower())
else:
    print("ran to the end")
finally:
    assert finish(), "the watcher never acted"
{check_after}
"""
        )
        out.assert_ok(f"stopped: {how} True\n{want_after}\n")


def test_an_elementwise_op_of_huge_views_stops():
    # Both operands strided: the result is written on the calling thread, polling as it goes.
    expect_stopped(
        "vm.op.add",
        2,
        "huge(1.0), huge(2.0)",
        'print(vm["f"](np.ones(3, "float32"), np.float32(2)).numpy().tolist())',
        "[3.0, 3.0, 3.0]",
    )


def test_an_elementwise_op_in_pieces_stops():
    # A contiguous operand of 2^27 elements: pieces across the thread pool (the caller polls,
    # the workers stop at their next piece).
    expect_stopped(
        "vm.op.exp",
        1,
        'rx.tensor(np.zeros(1 << 27, "float32"))',
        'print(vm["f"](np.zeros(2, "float32")).numpy().tolist())',
        "[1.0, 1.0]",
    )


def test_a_sum_of_a_huge_view_stops():
    expect_stopped(
        "vm.op.sum",
        1,
        "huge(1.0)",
        'print(vm["f"](np.ones(4, "float32")).numpy().tolist())',
        "4.0",
    )


def test_a_sort_of_a_huge_view_stops():
    # One line of 2^24 equal elements: a merge sort of 24 rounds, polled inside its merges.
    expect_stopped(
        "tvm.contrib.sort.sort",
        4,
        'huge(1.0, 1 << 24), rx.tensor(np.empty(1 << 24, "float32")), 0, True',
        'out = rx.tensor(np.empty(3, "float32"))\n'
        'vm["f"](np.array([3, 1, 2], "float32"), out, 0, True)\n'
        "print(out.numpy().tolist())",
        "[1.0, 2.0, 3.0]",
    )


def test_an_argsort_of_many_short_lines_stops():
    # 2^22 lines of 8: polled between lines.
    expect_stopped(
        "tvm.contrib.sort.argsort",
        4,
        'rx.from_dlpack(np.broadcast_to(np.arange(8, dtype="float32")[::-1].copy(), (1 << 22, 8))), '
        'rx.tensor(np.empty((1 << 22, 8), "int32")), 1, True',
        'out = rx.tensor(np.empty(3, "int32"))\n'
        'vm["f"](np.array([3, 1, 2], "float32"), out, 0, True)\n'
        "print(out.numpy().tolist())",
        "[1, 2, 0]",
    )
