"""The closed attack findings on the out-of-range int message (other/11 in part, other/12),
each reproducer in a capped child process (tests/adversarial/attack.py)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from attack import run_attack  # noqa: E402

RANGE = "does not fit in int64 (-2^63..2^63-1)"


def test_other_12_the_message_states_the_real_size_and_sign() -> None:
    # An int subclass lying about its size and sign, and one whose __lt__ and __repr__ raise:
    # the message is built with int's own methods, so neither override runs.
    out = run_attack(
        """
import relaxvm as rx
class Lies(int):
    def bit_length(self): return 500
    def __lt__(self, o): return False
    def __repr__(self): return "small"
class Raises(int):
    def __lt__(self, o): raise RuntimeError("user code ran")
    def __repr__(self): raise RuntimeError("user code ran")
copy = rx.get_global_func("vm.builtin.copy")
for v in (Lies(-2**400), Raises(-2**400), Lies(2**70)):
    try:
        copy(v)
    except OverflowError as e:
        print(e)
"""
    )
    out.assert_ok(
        f"argument 0 of vm.builtin.copy: Lies (negative, 401 bits) {RANGE}\n"
        f"argument 0 of vm.builtin.copy: Raises (negative, 401 bits) {RANGE}\n"
        f"argument 0 of vm.builtin.copy: Lies 1180591620717411303424 {RANGE}"
    )


def test_other_11_the_builder_immediate_and_a_shape_dimension_name_their_place() -> None:
    # ExecBuilder.imm and the Shape constructor read their ints with pyo3's bare conversion
    # ("Python int too large to convert to C long"); now both go through int_arg::extract_i64,
    # with the message of every other int refusal (the other entry points: tests/test_int_places.py).
    out = run_attack(
        """
import relaxvm as rx
ib = rx.ExecBuilder()
for v in (2**64, -(2**63) - 1):
    try:
        ib.imm(v)
    except OverflowError as e:
        print(e)
print(ib.imm(-(2**63)), ib.imm(2**63 - 1))
for dims in ([1, 2**64], (3, 4, -(2**70))):
    try:
        rx.Shape(dims)
    except OverflowError as e:
        print(e)
"""
    )
    out.assert_ok(
        f"ExecBuilder.imm: int 18446744073709551616 {RANGE}\n"
        f"ExecBuilder.imm: int -9223372036854775809 {RANGE}\n"
        "imm(-9223372036854775808) imm(9223372036854775807)\n"
        f"shape dimension 1: int 18446744073709551616 {RANGE}\n"
        f"shape dimension 2: int -1180591620717411303424 {RANGE}"
    )
