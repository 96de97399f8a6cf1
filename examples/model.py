"""The model the scale-out examples run: ``main(x, w)`` multiplies ``x`` by ``w`` ``steps``
times in a bytecode loop (compute-bound, one core per call), built with rx.ExecBuilder."""

from __future__ import annotations

import numpy as np

import relaxvm as rx

SIZE = 128


def build(steps: int) -> rx.Executable:
    """``main(x, w)``: ``x @ w``, ``steps`` times."""
    ib = rx.ExecBuilder()
    with ib.function("main", num_inputs=2, param_names=["x", "w"]):
        ib.emit_call("vm.builtin.int.add", args=[ib.imm(0), ib.imm(0)], dst=ib.r(2))  # i = 0
        ib.emit_call("vm.builtin.int.lt", args=[ib.r(2), ib.imm(steps)], dst=ib.r(3))  # loop head
        ib.emit_if(ib.r(3), 4)
        ib.emit_call("vm.op.matmul", args=[ib.r(0), ib.r(1)], dst=ib.r(0))
        ib.emit_call("vm.builtin.int.add", args=[ib.r(2), ib.imm(1)], dst=ib.r(2))
        ib.emit_goto(-4)
        ib.emit_ret(ib.r(0))
    return ib.get()


def inputs(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``x`` and an orthogonal ``w``, so that repeated products stay of order one."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((SIZE, SIZE)))
    return rng.standard_normal((SIZE, SIZE)).astype("float32"), q.astype("float32")


def reference(x: np.ndarray, w: np.ndarray, steps: int) -> np.ndarray:
    """What ``main`` computes, with numpy (float64), to check a worker's result against."""
    y = x.astype("float64")
    for _ in range(steps):
        y = y @ w
    return y
