"""Ints through a short call's direct path (python/src/small_int.rs): an int argument that fits
in one of CPython's digits is read from the object, a result in -5..=256 is CPython's shared
object; every other int goes through CPython's general conversion. Each edge of both ranges,
both signs, and the ints the direct path must not take (subclasses, bools, ints past int64)."""

from __future__ import annotations

import sys

import pytest

import relaxvm as rx

DIGIT = 1 << sys.int_info.bits_per_digit


def _identity():
    ib = rx.ExecBuilder()
    with ib.function("id", num_inputs=1):
        ib.emit_ret(ib.r(0))
    with ib.function("neg", num_inputs=1):
        ib.emit_call("vm.builtin.int.sub", args=[ib.imm(0), ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    vm = rx.VirtualMachine(ib.get())
    return vm["id"], vm["neg"]


EDGES = [
    0,
    1,
    -1,
    7,
    -5,
    -6,
    255,
    256,
    257,
    DIGIT - 1,
    -(DIGIT - 1),
    DIGIT,
    -DIGIT,
    DIGIT + 1,
    DIGIT * DIGIT,
    -(DIGIT * DIGIT) - 3,
    2**62,
    2**63 - 1,
    -(2**63),
]


@pytest.mark.parametrize("v", EDGES)
def test_ints_cross_both_ways_unchanged(v):
    ident, neg = _identity()
    got = ident(v)
    assert type(got) is int and got == v
    if v != -(2**63):
        assert neg(v) == -v


def test_small_results_are_cpythons_shared_objects():
    ident, neg = _identity()
    for v in range(-5, 257):
        # A new int object of the same value (not the literal's shared one) comes back as the
        # shared one, as `int(...)` arithmetic would give it.
        fresh = int(str(v))
        assert ident(fresh) is v
    assert neg(5) is -5
    # A shared object is handed out with a reference of its own: dropping results many times
    # over must not free it (a missing reference would crash here or later).
    before = sys.getrefcount(200)
    for _ in range(1000):
        ident(200)
    assert sys.getrefcount(200) >= before


def test_ints_past_int64_are_refused_as_before():
    ident, _ = _identity()
    for v in (2**63, -(2**63) - 1, 2**100):
        with pytest.raises(OverflowError, match="does not fit in int64"):
            ident(v)


def test_int_subclasses_and_bools_take_their_own_paths():
    class MyInt(int):
        pass

    ident, _ = _identity()
    assert ident(MyInt(7)) == 7
    assert ident(MyInt(-(DIGIT + 5))) == -(DIGIT + 5)
    assert ident(True) is True and ident(False) is False
