"""How the bench suite measures (scripts/bench.py): the two VMs as backends, the row type, the
clock, the best of rounds taken alternately for both sides, and the rows measured otherwise
(two Python threads, Ctrl-C latency).
"""

from __future__ import annotations

import signal
import threading
import time
from typing import Any, Callable

from bench_programs import emit_sum

import relaxvm as rx

try:  # the peer is optional
    import tvm
    from tvm import relax as tvm_relax
except ImportError:  # pragma: no cover - depends on the bench environment
    tvm = None


class Backend:
    """One VM implementation: how to build, load, make tensors and register functions."""

    def __init__(
        self,
        name: str,
        relax: Any,
        make_vm: Callable,
        tensor: Callable,
        register: Callable,
    ):
        self.name, self.relax, self.make_vm, self.tensor, self.register = (
            name,
            relax,
            make_vm,
            tensor,
            register,
        )

    def build(self, emit: Callable[[Any], None]) -> Any:
        ib = self.relax.ExecBuilder()
        emit(ib)
        return self.make_vm(ib.get())


def ours() -> Backend:
    return Backend("relaxvm", rx, lambda ex: rx.VirtualMachine(ex), rx.tensor, rx.register_func)


def peer() -> Backend | None:
    if tvm is None:
        return None
    return Backend(
        "tvm",
        tvm_relax,
        lambda ex: tvm_relax.VirtualMachine(ex, tvm.cpu()),
        tvm.runtime.tensor,
        lambda name, f: tvm.register_global_func(name, f, override=True),
    )


# The clock rows are timed with: wall time, or with ``--clock thread`` the CPU time of the
# measuring thread, which a loaded machine's other processes do not add to (for the rows that
# run on the calling thread only; the TVM-model rows measure in child processes either way).
clock = time.perf_counter


def set_clock(kind: str) -> None:
    """Times rows by ``"wall"`` time or by the measuring ``"thread"``'s CPU time."""
    global clock
    clock = time.thread_time if kind == "thread" else time.perf_counter


def best_time(fn: Callable[[], Any], min_seconds: float) -> float:
    """Seconds per call of `fn`, timed over enough calls to fill `min_seconds`."""
    fn()
    n = 1
    while True:
        t = clock()
        for _ in range(n):
            fn()
        dt = clock() - t
        if dt >= min_seconds:
            return dt / n
        n *= 2 if dt < min_seconds / 10 else max(2, int(min_seconds / max(dt, 1e-9)) + 1)


class Row:
    """A measured row: a label, the unit, how to set it up for a backend, and its target."""

    def __init__(
        self,
        label: str,
        unit: str,
        per: int,
        setup: Callable,
        target: str,
        peer_ok: bool = True,
        reference: tuple[str, Callable[[], Any]] | None = None,
        baseline: Callable | None = None,
    ):
        """``reference``, when given, is the same work done otherwise (``("numpy", f)``,
        ``("CPython", f)``): the row's peer column is that. ``baseline``, when given, sets up
        the same work without what the row measures (a plain run beside a profiled one): the
        row is the difference of the two, each side's best round."""
        self.label, self.unit, self.per, self.setup, self.target, self.peer_ok, self.reference = (
            label,
            unit,
            per,
            setup,
            target,
            peer_ok,
            reference,
        )
        self.baseline = baseline


def scale(unit: str) -> float:
    return {"ms": 1e3, "us": 1e6}.get(unit[:2], 1e9)


def measure_row(row: Row, backends: list[Backend], rounds: int, min_seconds: float) -> dict[str, float]:
    measure = getattr(row, "measure", None)
    if measure is not None:  # a row measured its own way (runs in child processes)
        return measure([b.name for b in backends if b.name == "relaxvm" or row.peer_ok])
    fns = {b.name: row.setup(b) for b in backends if b.name == "relaxvm" or row.peer_ok}
    if row.baseline is not None:
        fns["baseline"] = row.baseline(backends[0])
    best = {name: float("inf") for name in fns}
    # Alternate, swapping which side is timed first every round (ours, peer, peer, ours, ...),
    # over an even number of rounds (bench.py refuses an odd one) so that each side goes first
    # equally often: the side timed first measured slower in A/B runs of the same kernels either
    # way round (MLP 784-256-10: 207 vs 193 us with ours first, 188 vs 201 with the peer first).
    items = list(fns.items())
    for i in range(rounds):
        for name, fn in items if i % 2 == 0 else items[::-1]:
            best[name] = min(best[name], best_time(fn, min_seconds) / row.per * scale(row.unit))
    if row.baseline is not None:
        best["relaxvm"] -= best.pop("baseline")
    return best


def threads_ratio(min_seconds: float) -> float:
    """Throughput of 2 threads, each with its own VM, relative to one thread: the best of three
    alternating rounds of each, as the other rows take each side's best time."""
    ib = rx.ExecBuilder()
    emit_sum(ib)
    ex = ib.get()
    n = 200_000

    def work(count: list[int], stop: float) -> None:
        f = rx.VirtualMachine(ex)["sum"]
        while time.perf_counter() < stop:
            f(n)
            count[0] += 1

    def run(k: int) -> float:
        counts = [[0] for _ in range(k)]
        stop = time.perf_counter() + max(min_seconds * 10, 1.0)
        ts = [threading.Thread(target=work, args=(c, stop)) for c in counts]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return sum(c[0] for c in counts)

    ones, twos = [], []
    for _ in range(3):
        ones.append(run(1))
        twos.append(run(2))
    return max(twos) / max(max(ones), 1)


def ctrl_c_latency_ms(tries: int = 5) -> float:
    """Worst time from SIGINT to ``KeyboardInterrupt`` while the VM spins in an endless loop;
    infinity when a signal was lost (a step budget of several seconds ends the loop then)."""
    ib = rx.ExecBuilder()
    with ib.function("spin", num_inputs=0):
        ib.emit_goto(0)
    spin = rx.VirtualMachine(ib.get(), step_budget=2_000_000_000)["spin"]
    # A process started in the background by a shell inherits SIGINT ignored, and Python then
    # raises no KeyboardInterrupt: Python's own handler is put in place for the measurement.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        worst = max(_one_ctrl_c(spin) for _ in range(tries))
    finally:
        signal.signal(signal.SIGINT, previous)
    return worst * 1e3


def _one_ctrl_c(spin: Callable[[], Any]) -> float:
    """Seconds from one SIGINT to ``KeyboardInterrupt`` in ``spin`` (infinity when lost)."""
    sent: list[float] = []

    def press() -> None:
        time.sleep(0.05)
        sent.append(time.perf_counter())
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    t = threading.Thread(target=press)
    t.start()
    try:
        spin()
        took = float("inf")
    except KeyboardInterrupt:
        took = time.perf_counter() - sent[0]
    except rx.VMError:
        took = float("inf")
    t.join()
    return took
