"""Every registered builtin, called through Python with wrong argument counts, wrong types and
extreme values: each call returns or raises an ordinary exception, never a crash, and never a
caught Rust panic (which would read "panicked"). The Rust twin is
``builtins/tests/integration/robustness.rs``; this one goes through the conversions of the
Python binding too.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

import relaxvm as rx

BUILTINS = sorted(n for n in rx.list_global_func_names() if n.startswith(("vm.builtin.", "vm.op.")))
MAX_ARGS = 5
#: Builtins that take any number of arguments of any type: no call is wrong for them.
TAKES_ANYTHING = {"vm.builtin.make_tuple", "vm.builtin.print"}
DRAWS = 20  # argument lists drawn per (builtin, argument count, placement of %vm)


def pool() -> list[object]:
    """Values of every kind the VM takes from Python, many of them at an edge."""
    strided = np.arange(12.0, dtype="float32")[::2]
    return [
        None,
        0,
        -1,
        3,
        2**62,
        -(2**63),
        math.nan,
        math.inf,
        -0.0,
        True,
        "float32",
        "global",
        "no such thing",
        rx.DataType("int8"),
        rx.cpu(),
        rx.Shape([2, 3]),
        rx.Shape([]),
        rx.Shape([0, 4]),
        rx.Shape([1 << 40, 1 << 40]),
        np.zeros((0,), "float32"),
        np.array(1.5, "float32"),
        np.arange(6, dtype="float32").reshape(2, 3),
        np.arange(6, dtype="int64").reshape(3, 2),
        np.array([math.nan, -math.inf], "float64"),
        np.array([True, False]),
        strided,
        (1, (2, 3)),
        rx.get_global_func("vm.builtin.int.add"),
    ]


def program(name: str) -> rx.VirtualMachine:
    """``f{n}`` calls ``name`` with its ``n`` inputs; ``g{n}`` with ``%vm`` first, then them."""
    ib = rx.ExecBuilder()
    for n in range(MAX_ARGS + 1):
        for prefix, lead in (("f", []), ("g", [ib.vm_state()])):
            with ib.function(f"{prefix}{n}", num_inputs=n):
                ib.emit_call(name, args=lead + [ib.r(i) for i in range(n)], dst=ib.r(n))
                ib.emit_ret(ib.r(n))
    with ib.function("ok", num_inputs=0):
        ib.emit_call("vm.builtin.int.add", args=[ib.imm(40), ib.imm(2)], dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    return rx.VirtualMachine(ib.get())


def test_the_builtins_are_all_registered():
    assert len(BUILTINS) >= 60
    assert {"vm.builtin.alloc_storage", "vm.builtin.match_shape", "vm.op.matmul"} <= set(BUILTINS)


@pytest.mark.parametrize("name", BUILTINS)
def test_builtin_survives_bad_arguments(name):
    vm = program(name)
    values = pool()
    rng = random.Random(name)  # deterministic per builtin
    raised = 0
    for n in range(MAX_ARGS + 1):
        for prefix in ("f", "g"):
            for _ in range(DRAWS if n else 1):
                args = [rng.choice(values) for _ in range(n)]
                try:
                    vm[f"{prefix}{n}"](*args)
                except Exception as e:  # noqa: BLE001 - any ordinary exception is a fine outcome
                    assert "panicked" not in str(e), f"{name}{tuple(args)}: {e}"
                    raised += 1
    if name not in TAKES_ANYTHING:
        assert raised > 0, f"{name} accepted every wrong call"
    assert vm["ok"]() == 42
