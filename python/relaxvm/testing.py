"""Helpers for tests written against Apache TVM's Relax VM, under the names TVM gives them.

``MakeShapeCode`` and ``MatchShapeCode`` are the instruction codes of ``vm.builtin.make_shape``
and ``vm.builtin.match_shape`` (TVM's ``tvm.relax.testing.runtime_builtin``);
``check_saved_func`` is TVM's ``tvm.relax.testing.vm.check_saved_func``.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any


class MakeShapeCode(IntEnum):
    """How ``vm.builtin.make_shape`` computes one dimension: from the immediate that follows
    (``USE_IMM``) or from the shape-heap slot it names (``LOAD_SHAPE``)."""

    USE_IMM = 0
    LOAD_SHAPE = 1


class MatchShapeCode(IntEnum):
    """What ``vm.builtin.match_shape`` does with one dimension and the operand that follows: the
    dimension must equal the immediate (``ASSERT_EQUAL_TO_IMM``), is stored into a shape-heap
    slot (``STORE_TO_HEAP``), is not checked (``NO_OP``), or must equal a slot
    (``ASSERT_EQUAL_TO_LOAD``)."""

    ASSERT_EQUAL_TO_IMM = 0
    STORE_TO_HEAP = 1
    NO_OP = 2
    ASSERT_EQUAL_TO_LOAD = 3


def check_saved_func(vm: Any, func_name: str, *inputs: Any) -> Any:
    """Calls ``vm[func_name](*inputs)`` and the same call saved by ``vm.save_function``; the two
    results must be equal (compared as numpy arrays). Returns the first."""
    import numpy as np

    res1 = vm[func_name](*inputs)
    vm.save_function(func_name, func_name + "_saved", *inputs)
    res2 = vm[func_name + "_saved"]()
    np.testing.assert_array_equal(np.asarray(res1), np.asarray(res2))
    return res1
