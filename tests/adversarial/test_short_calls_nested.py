"""A call nested in a kept call's Python callback that releases the GIL (a releasing VM call, a
global function, the command-line tool) sees the outer call's kept mark; its polls must not
take the GIL (attack finding perf/12): a thread that holds the GIL while it waits for that nested
call would wait forever. The poll hook hands the GIL over only when its thread holds it."""

from __future__ import annotations

from pathlib import Path

from attack import run_attack

NESTED = r"""
import ctypes, os, tempfile, threading
import relaxvm as rx

ib = rx.ExecBuilder()
with ib.function("spin_then_open", num_inputs=2):
    # Loops r0 times (polls every 1024 steps), then opens r1/tensor-cache.json (a fifo).
    ib.emit_call("vm.builtin.int.add", args=[ib.imm(0), ib.imm(0)], dst=ib.r(2))
    ib.emit_call("vm.builtin.int.lt", args=[ib.r(2), ib.r(0)], dst=ib.r(3))
    ib.emit_if(ib.r(3), 3)
    ib.emit_call("vm.builtin.int.add", args=[ib.r(2), ib.imm(1)], dst=ib.r(2))
    ib.emit_goto(-3)
    ib.emit_call("vm.builtin.tensor_cache.load", args=[ib.r(1), ib.imm(1), ib.imm(0)], dst=ib.r(4))
    ib.emit_ret(ib.r(2))
g = rx.VirtualMachine(ib.get())["spin_then_open"]
assert g.releases_gil
# Everything the final call's Python side does is done once before (lazy imports need the GIL).
try:
    g(0, tempfile.gettempdir() + "/no-such-dir-short-calls")
except rx.VMError:
    pass
d = DIR
fifo = os.path.join(d, "tensor-cache.json")
os.mkfifo(fifo)
started = threading.Event()
final = [False]
def cb():
    if not final[0]:
        return 0
    started.set()            # the main thread takes the GIL once g releases it
    try:
        # ~9M steps, run without the GIL on this (non-main) thread; long enough for the main
        # thread to be waiting in open first.
        g(3_000_000, d)
    except rx.VMError:
        pass                 # the fifo is no regular file: refused, as expected
    return 0
rx.register_func("short_calls.nested", cb)
ib = rx.ExecBuilder()
with ib.function("outer", num_inputs=0):
    ib.emit_call("short_calls.nested", args=[], dst=ib.r(0))
    ib.emit_call("vm.builtin.int.lt", args=[ib.r(0), ib.imm(0)], dst=ib.r(1))
    ib.emit_if(ib.r(1), 2)
    ib.emit_goto(-2)
    ib.emit_ret(ib.r(0))
exe = ib.get()
outer = rx.VirtualMachine(exe)["outer"]
assert outer.releases_gil
result = {}
def worker():
    outer()  # everything the final call's Python side does is done once before
    # Records `outer` short through the test hook (not through wall time), so the next call
    # keeps the GIL; checked, so the test cannot pass on the releasing path.
    rx._relaxvm._note_short_call(outer)
    if not rx._relaxvm._keeps_gil_next(outer):
        result["error"] = "the next call would not keep the GIL"
        started.set()
        return
    final[0] = True
    result["value"] = outer()
    result["kept_call_recorded_long"] = not rx._relaxvm._keeps_gil_next(outer)
t = threading.Thread(target=worker, daemon=True)
t.start()
started.wait()
if "error" not in result:
    # Holds the GIL (PyDLL) until g, running without it, opens the fifo for reading.
    libc = ctypes.PyDLL(None)
    fd = libc.open(fifo.encode(), os.O_WRONLY)
    os.close(fd)
t.join()
print(result)
"""


def test_a_released_call_nested_in_a_kept_call_never_waits_for_the_gil(tmp_path: Path) -> None:
    # The main thread holds the GIL in `open` of a fifo until the nested call, which polls ~9k
    # times on the way, opens it for reading: were its polls to take the GIL, the child would
    # hang (killed at the timeout). The outer call is recorded long (it ran the nested one).
    out = run_attack(f"DIR = {str(tmp_path)!r}\n" + NESTED, timeout=20)
    out.assert_ok("{'value': 0, 'kept_call_recorded_long': True}")
