"""Event ordering for tests that interrupt a long native call: another thread waits until the
calling thread is *inside* the call (its Python frame is executing the call instruction of
``call_native``), instead of sleeping and hoping the call has started and not yet ended.

The watcher reads the calling thread's frame, which needs the GIL: it sees the caller inside a
VM call once the VM releases the GIL to run (argument conversion holds it), so an interrupt sent
then lands while the VM runs."""

from __future__ import annotations

import dis
import sys
import threading
import time
from typing import Any, Callable


def call_native(f: Callable[..., Any], *args: Any) -> Any:
    """Calls ``f(*args)``: the frame ``wait_until_inside`` looks for."""
    return f(*args)


#: The offset of call_native's call instruction (f_lasti of its frame while ``f`` runs).
_CALL = max(i.offset for i in dis.get_instructions(call_native) if i.opname.startswith("CALL"))


def inside(thread_id: int) -> bool:
    """Whether the thread's innermost Python frame is call_native's, running its call: the
    thread is in native code that call_native called (a Python callee would be the innermost
    frame instead)."""
    frame = sys._current_frames().get(thread_id)
    return frame is not None and frame.f_code is call_native.__code__ and frame.f_lasti == _CALL


def wait_until_inside(thread_id: int, give_up: threading.Event | None = None) -> bool:
    """Polls (every millisecond) until ``inside(thread_id)``; False if ``give_up`` is set first
    (the call returned before the watcher saw it: the caller sets it after the call)."""
    while not inside(thread_id):
        if give_up is not None and give_up.is_set():
            return False
        time.sleep(0.001)
    return True


def watch(thread_id: int, act: Callable[[], None], repeat: bool = False) -> Callable[[], bool]:
    """Starts a thread that waits until ``thread_id`` is inside call_native's call, then runs
    ``act`` once, or (``repeat``) every millisecond while the thread stays inside — for acts a
    VM may discard when they come before its run starts, such as ``vm.interrupt()``. Returns a
    function to call after the call returned: it stops the watcher and says whether it acted."""
    done = threading.Event()
    acted: list[bool] = []

    def run() -> None:
        if not wait_until_inside(thread_id, done):
            return
        act()
        acted.append(True)
        while repeat and not done.wait(0.001):
            if inside(thread_id):
                act()

    t = threading.Thread(target=run, daemon=True)
    t.start()

    def finish() -> bool:
        done.set()
        t.join()
        return bool(acted)

    return finish
