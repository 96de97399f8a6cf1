"""The rows of the bench suite (scripts/bench.py): what each measures, its unit and target.
The TVM-model rows live in bench_tvm_models.py.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from bench_measure import Backend, Row
from bench_programs import (
    emit_binary,
    emit_callbacks,
    emit_closures,
    emit_copies,
    emit_fib,
    emit_identity,
    emit_shape_heap,
    emit_sum,
    emit_unary,
    python_sum,
)

import relaxvm as rx


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
