"""The programs the bench suite runs (scripts/bench.py), each an ``emit(ib)`` for either VM's
``ExecBuilder``, and the CPython loop the counting loop's row is compared with.
"""

from __future__ import annotations

from typing import Any, Callable


def emit_identity(ib: Any) -> None:
    with ib.function("id", num_inputs=1):
        ib.emit_ret(ib.r(0))


def emit_straight(callee: str, n: int) -> Callable[[Any], None]:
    """``main(x)``: ``n`` calls of ``callee`` on ``x`` in a straight line, returning the last."""

    def emit(ib: Any) -> None:
        with ib.function("main", num_inputs=1):
            for _ in range(n):
                ib.emit_call(callee, args=[ib.r(0)], dst=ib.r(1))
            ib.emit_ret(ib.r(1))

    return emit


def emit_copies(n: int) -> Callable[[Any], None]:
    """The dispatch program: ``n`` calls of ``vm.builtin.copy``."""
    return emit_straight("vm.builtin.copy", n)


def emit_callbacks(n: int) -> Callable[[Any], None]:
    """The callback program: ``n`` calls of the registered Python ``bench.py_identity``."""
    return emit_straight("bench.py_identity", n)


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
