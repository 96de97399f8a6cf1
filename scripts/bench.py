"""The relaxvm benchmark suite, side by side with Apache TVM's Relax VM when it is installed.

Run with ``./scripts/bench.sh`` (sets up ``.venv-bench`` with apache-tvm) or directly with any
Python that has ``relaxvm`` (peer rows are skipped without ``tvm``). Each row is measured
alternately for both VMs over several rounds in one run, and the best round of each is kept, so
machine noise affects both sides alike. Prints a Markdown table: ours, the peer's, and the ratio
(peer time / our time: above 1 means we are faster).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import threading
import time
from typing import Any, Callable

import numpy as np

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


# Programs ------------------------------------------------------------------------------------


def emit_identity(ib: Any) -> None:
    with ib.function("id", num_inputs=1):
        ib.emit_ret(ib.r(0))


def emit_copies(n: int) -> Callable[[Any], None]:
    def emit(ib: Any) -> None:
        with ib.function("main", num_inputs=1):
            for _ in range(n):
                ib.emit_call("vm.builtin.copy", args=[ib.r(0)], dst=ib.r(1))
            ib.emit_ret(ib.r(1))

    return emit


def emit_callbacks(n: int) -> Callable[[Any], None]:
    def emit(ib: Any) -> None:
        with ib.function("main", num_inputs=1):
            for _ in range(n):
                ib.emit_call("bench.py_identity", args=[ib.r(0)], dst=ib.r(1))
            ib.emit_ret(ib.r(1))

    return emit


def emit_shape_heap(n: int) -> Callable[[Any], None]:
    def emit(ib: Any) -> None:
        err_ctx = ib.convert_constant("bench")
        with ib.function("main", num_inputs=1):
            ib.emit_call(
                "vm.builtin.alloc_shape_heap",
                args=[ib.vm_state(), ib.imm(2)],
                dst=ib.r(1),
            )
            for _ in range(n):
                ib.emit_call("vm.builtin.shape_of", args=[ib.r(0)], dst=ib.r(2))
                ib.emit_call(
                    "vm.builtin.match_shape",
                    args=[
                        ib.r(2),
                        ib.r(1),
                        ib.imm(2),
                        ib.imm(1),
                        ib.imm(0),
                        ib.imm(1),
                        ib.imm(1),
                        err_ctx,
                    ],
                )
                ib.emit_call(
                    "vm.builtin.make_shape",
                    args=[
                        ib.r(1),
                        ib.imm(2),
                        ib.imm(1),
                        ib.imm(0),
                        ib.imm(1),
                        ib.imm(1),
                    ],
                    dst=ib.r(3),
                )
            ib.emit_ret(ib.r(3))

    return emit


def emit_sum(ib: Any) -> None:
    with ib.function("sum", num_inputs=1):
        ib.emit_call("vm.builtin.int.add", args=[ib.imm(0), ib.imm(0)], dst=ib.r(1))
        ib.emit_call("vm.builtin.int.add", args=[ib.imm(0), ib.imm(0)], dst=ib.r(2))
        ib.emit_call("vm.builtin.int.lt", args=[ib.r(2), ib.r(0)], dst=ib.r(3))
        ib.emit_if(ib.r(3), 4)
        ib.emit_call("vm.builtin.int.add", args=[ib.r(1), ib.r(2)], dst=ib.r(1))
        ib.emit_call("vm.builtin.int.add", args=[ib.r(2), ib.imm(1)], dst=ib.r(2))
        ib.emit_goto(-4)
        ib.emit_ret(ib.r(1))


def python_sum(n: int) -> int:
    """The counting loop of ``emit_sum`` in CPython (the reference its row is measured against)."""
    total, i = 0, 0
    while i < n:
        total += i
        i += 1
    return total


def emit_fib(ib: Any) -> None:
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


def emit_closures(n: int) -> Callable[[Any], None]:
    def emit(ib: Any) -> None:
        with ib.function("add1", num_inputs=2):
            ib.emit_call("vm.builtin.int.add", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
            ib.emit_ret(ib.r(2))
        with ib.function("main", num_inputs=1):
            ib.emit_call("vm.builtin.make_closure", args=[ib.f("add1"), ib.imm(1)], dst=ib.r(1))
            for _ in range(n):
                ib.emit_call(
                    "vm.builtin.invoke_closure",
                    args=[ib.vm_state(), ib.r(1), ib.r(0)],
                    dst=ib.r(2),
                )
            ib.emit_ret(ib.r(2))

    return emit


def emit_unary(op: str) -> Callable[[Any], None]:
    def emit(ib: Any) -> None:
        with ib.function("main", num_inputs=1):
            ib.emit_call(op, args=[ib.r(0)], dst=ib.r(1))
            ib.emit_ret(ib.r(1))

    return emit


def emit_binary(op: str) -> Callable[[Any], None]:
    def emit(ib: Any) -> None:
        with ib.function("main", num_inputs=2):
            ib.emit_call(op, args=[ib.r(0), ib.r(1)], dst=ib.r(2))
            ib.emit_ret(ib.r(2))

    return emit


# Rows ----------------------------------------------------------------------------------------


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


def rows(quick: bool) -> list[Row]:
    straight = 10_000 if quick else 100_000
    loop_n = 100_000 if quick else 1_000_000
    x4 = np.ones(4, "float32")
    big_a = np.arange(1 << 20, dtype="float32")
    big_b = np.ones(1 << 20, dtype="float32")
    mat = (np.arange(512 * 512, dtype="float32") % 13).reshape(512, 512)
    mat1k = (np.arange(1024 * 1024, dtype="float32") % 13).reshape(1024, 1024)

    def call(emit, name, *args_np, scalar=None):
        def setup(b: Backend) -> Callable[[], Any]:
            vm = b.build(emit)
            f = vm[name]
            # A tuple: `f(*args)` hands its items to the call as they are, where a list would
            # be copied into a new tuple first, on every call (about 30 ns of the harness's
            # own time on either side, a fifth of a short relaxvm call).
            args = tuple(b.tensor(a) for a in args_np) if scalar is None else (scalar,)
            return lambda: f(*args)

        return setup

    def identity_numpy(b: Backend) -> Callable[[], Any]:
        # relaxvm views the numpy array in place; TVM's VM is called with its own tensor.
        f = b.build(emit_identity)["id"]
        arg = x4 if b.name == "relaxvm" else b.tensor(x4)
        return lambda: f(arg)

    def dedup(b: Backend) -> Callable[[], Any]:
        # The second and later conversions of an equal array find the first (hash, compare).
        weights = np.random.default_rng(0).random((64 if quick else 256) << 17)  # 64/256 MiB
        ib = b.relax.ExecBuilder()
        ib.convert_constant(weights)
        return lambda: ib.convert_constant(weights)

    profiled_calls = 1000

    def copies() -> Any:
        ib = rx.ExecBuilder()
        emit_copies(profiled_calls)(ib)
        return ib.get()

    def profiled(b: Backend) -> Callable[[], Any]:
        # relaxvm only: TVM's profiler (`vm.profile`) reports per-op times of its own kind.
        vm = rx.VirtualMachine(copies(), profile=True)
        return lambda: vm.profile("main", x4)

    def unprofiled(b: Backend) -> Callable[[], Any]:
        f = rx.VirtualMachine(copies())["main"]
        return lambda: f(x4)

    def callbacks(b: Backend) -> Callable[[], Any]:
        b.register("bench.py_identity", lambda x: x)
        return call(emit_callbacks(1000), "main", x4)(b)

    return [
        Row(
            "Python -> VM call, identity on a tensor",
            "ns/call",
            1,
            call(emit_identity, "id", x4),
            "<= 1/5 peer",
        ),
        Row(
            "Python -> VM call, identity on a numpy array (peer: its tensor)",
            "ns/call",
            1,
            identity_numpy,
            "<= 1/4 peer",
        ),
        Row(
            "Python -> VM call, identity on an int",
            "ns/call",
            1,
            call(emit_identity, "id", scalar=7),
            "<= 1/4 peer",
        ),
        Row(
            "VM -> registered Python function",
            "ns/call",
            1000,
            callbacks,
            "<= 1/3 peer",
        ),
        Row(
            "dispatch, call vm.builtin.copy",
            "ns/instr",
            straight,
            call(emit_copies(straight), "main", x4),
            "<= 1/40 peer",
        ),
        Row(
            "shape-heap triple",
            "ns/triple",
            1000,
            call(emit_shape_heap(1000), "main", np.ones((32, 16), "float32")),
            "<= 1/7 peer",
        ),
        Row(
            "counting loop (5 instr/iter)",
            "ns/iter",
            loop_n,
            call(emit_sum, "sum", scalar=loop_n),
            "<= 1/10 CPython",
            False,
            ("CPython", lambda: python_sum(loop_n)),
        ),
        Row(
            "profiler cost per call (vm.profile less a plain run)",
            "ns/call",
            profiled_calls,
            profiled,
            "<= 150",
            False,
            baseline=unprofiled,
        ),
        Row(
            "fib(25), bytecode calls",
            "ns/call",
            242_785,
            call(emit_fib, "fib", scalar=25),
            "",
            False,
        ),
        Row(
            "closure invocation",
            "ns/call",
            1000,
            call(emit_closures(1000), "main", scalar=3),
            "",
            False,
        ),
        Row(
            "vm.op.add 1M float32",
            "us/op",
            1,
            call(emit_binary("vm.op.add"), "main", big_a, big_b),
            "<= numpy",
            False,
            ("numpy", lambda: np.add(big_a, big_b)),
        ),
        Row(
            "vm.op.sum 1M float32",
            "us/op",
            1,
            call(emit_unary("vm.op.sum"), "main", big_a),
            "<= numpy",
            False,
            ("numpy", lambda: np.sum(big_a)),
        ),
        Row(
            "vm.op.matmul 512x512 float32",
            "us/op",
            1,
            call(emit_binary("vm.op.matmul"), "main", mat, mat),
            "",
            False,
        ),
        Row(
            "vm.op.matmul 1024x1024 float32",
            "us/op",
            1,
            call(emit_binary("vm.op.matmul"), "main", mat1k, mat1k),
            "<= numpy",
            False,
            ("numpy", lambda: np.matmul(mat1k, mat1k)),
        ),
        Row(
            f"convert_constant dedup, {64 if quick else 256} MiB float64",
            "ms/op",
            1,
            dedup,
            "<= 50 ms",
            False,
        ),
    ]


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
    for _ in range(rounds):  # alternate: ours, peer, ours, peer...
        for name, fn in fns.items():
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


README_START = "<!-- bench table: written by scripts/bench.py --update-readme -->"
README_END = "<!-- end of bench table -->"


def replace_table(readme: str, table: list[str]) -> str:
    """``readme`` with the lines between the bench-table markers replaced by ``table``."""
    start, end = readme.index(README_START), readme.index(README_END)
    return readme[: start + len(README_START)] + "\n" + "\n".join(table) + "\n" + readme[end:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer rounds and shorter programs")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--update-readme", action="store_true", help="also write the table into README.md")
    ap.add_argument("--only", metavar="REGEX", help="run only the rows whose label matches (and no thread rows)")
    ap.add_argument(
        "--clock",
        choices=("wall", "thread"),
        default="wall",
        help="time rows by wall time (default) or by the measuring thread's CPU time (on a loaded machine)",
    )
    args = ap.parse_args()
    global clock
    clock = time.thread_time if args.clock == "thread" else time.perf_counter
    if args.only and args.update_readme:
        ap.error("--update-readme writes the whole table: run it without --only")
    rounds = args.rounds or (2 if args.quick else 5)
    min_seconds = 0.05 if args.quick else 0.2
    backends = [b for b in (ours(), peer()) if b is not None]
    print(f"relaxvm {rx.__version__}; peer: {'Apache TVM ' + tvm.__version__ if tvm else 'not installed'}")
    print()
    table = ["| row | unit | relaxvm | peer | peer / relaxvm | target |", "| --- | --- | ---: | ---: | ---: | --- |"]
    print("\n".join(table))
    import bench_tvm_models  # beside this file; needs TVM, so only the bench venv has its rows
    from progress import Progress  # beside this file

    all_rows = rows(args.quick) + bench_tvm_models.rows(Row, args.quick)
    if args.only:
        all_rows = [r for r in all_rows if re.search(args.only, r.label)]
    progress = Progress(len(all_rows) + 2, "bench")

    def emit(line: str) -> None:
        progress.clear()
        table.append(line)
        print(line, flush=True)

    for row in all_rows:
        progress.step(row.label)
        best = measure_row(row, backends, rounds, min_seconds)
        ours_v, peer_v = best["relaxvm"], best.get("tvm")
        peer_s = f"{peer_v:.1f}" if peer_v is not None else "-"
        ratio = f"{peer_v / ours_v:.1f}x" if peer_v is not None else "-"
        if row.reference is not None:
            who, fn = row.reference
            ref = min(best_time(fn, min_seconds) for _ in range(rounds)) / row.per * scale(row.unit)
            peer_s, ratio = f"{who} {ref:.1f}", f"{ref / ours_v:.2f}x"
        emit(f"| {row.label} | {row.unit} | {ours_v:.1f} | {peer_s} | {ratio} | {row.target} |")
    if args.only:
        return
    progress.step("2 Python threads")
    threads = threads_ratio(min_seconds)
    progress.step("Ctrl-C latency")
    ctrl_c = ctrl_c_latency_ms()
    emit(f"| 2 Python threads, each its own VM | throughput | {threads:.2f}x one thread | - | - | >= 1.9x |")
    emit(f"| Ctrl-C in an endless loop to KeyboardInterrupt | ms, worst of 5 | {ctrl_c:.2f} | - | - | <= 100 |")
    if args.update_readme:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "README.md")
        with open(path) as f:
            readme = f.read()
        with open(path, "w") as f:
            f.write(replace_table(readme, table))


if __name__ == "__main__":
    main()
