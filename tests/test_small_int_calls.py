"""Ints through a short call's direct path (python/src/small_int.rs): an int argument that fits
in one of CPython's digits is read from the object, a result in -5..=256 is CPython's shared
object; every other int goes through CPython's general conversion. Each edge of both ranges,
both signs, and the ints the direct path must not take (subclasses, bools, ints past int64).

The direct read's decoding is checked for both CPython layouts (3.11's ``ob_size``, 3.12+'s
``lv_tag``) on hand-made words, whichever one this interpreter has, and so is the import-time
check that turns the direct read off when this interpreter's ints do not read right. CI runs this
file on 3.11 and on the newest CPython >= 3.12 (scripts/test-python-versions.sh): there
``test_the_import_check_passes_for_this_interpreters_layout`` shows that the direct read is on,
reading real ints of each layout, so a fast path turned off by a failing check fails CI."""

from __future__ import annotations

import sys
import sysconfig

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
    # The identity holds for any correct conversion (`PyLong_FromLongLong` returns the shared
    # object too), so it does not show that the direct path was taken; the reference count
    # below is what `to_py` could get wrong. A shared object is handed out with a reference of
    # its own: dropping results many times over must not free it (a missing reference would
    # crash here or later; on 3.12+ small ints are immortal and this cannot fail).
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


# The direct read, by hand-made size words and digits (python/src/small_int.rs `decode`).
_decode = rx._relaxvm._small_int_decode
_self_check = rx._relaxvm._small_int_self_check
D = 1 << 30  # the digit base of the layout read directly
THIS_LAYOUT_TAGGED = sys.version_info >= (3, 12)


def _tag(ndigits, sign, immortal=False):
    """3.12+'s `lv_tag`: the digit count above 3 flag bits (sign: 0 positive, 1 zero, 2
    negative; 4: 3.14's immortal ints)."""
    return ndigits << 3 | (4 if immortal else 0) | {1: 0, 0: 1, -1: 2}[sign]


# (word, digit) -> (value or None, whether the digit was read)
OB_SIZE_WORDS = [
    ((0, 0xDEAD), (0, False)),  # zero: its digit may be uninitialised or absent, never read
    ((1, 1), (1, True)),
    ((-1, 1), (-1, True)),
    ((1, 256), (256, True)),
    ((1, D - 1), (D - 1, True)),
    ((-1, D - 1), (-(D - 1), True)),
    ((2, 5), (None, False)),  # two digits: the general path
    ((-2, 5), (None, False)),
    ((3, 0), (None, False)),
    ((sys.maxsize, 1), (None, False)),
    ((-sys.maxsize - 1, 1), (None, False)),
    ((1, D), (None, True)),  # not a 30-bit digit: not this layout
    ((-1, 0xFFFFFFFF), (None, True)),
]
LV_TAG_WORDS = [
    ((_tag(0, 0), 0xDEAD), (0, False)),
    ((_tag(0, 0, immortal=True), 0xDEAD), (0, False)),
    ((_tag(1, 1), 1), (1, True)),
    ((_tag(1, -1), 1), (-1, True)),
    ((_tag(1, 1, immortal=True), 256), (256, True)),
    ((_tag(1, -1, immortal=True), 5), (-5, True)),
    ((_tag(1, 1), D - 1), (D - 1, True)),
    ((_tag(1, -1), D - 1), (-(D - 1), True)),
    ((_tag(2, 1), 5), (None, False)),  # two digits
    ((_tag(2, -1), 5), (None, False)),
    ((_tag(2, 1, immortal=True), 5), (None, False)),
    ((_tag(1 << 40, 1), 5), (None, False)),
    ((_tag(1, 1), D), (None, True)),  # not a 30-bit digit
    # Words no normalised int has: sign bits 3, a zero sign with a digit, a digit with no
    # count, a negative word (a count past 2^60).
    ((1 << 3 | 3, 1), (None, False)),
    ((3, 1), (None, False)),
    ((_tag(1, 0), 1), (None, False)),
    ((0, 1), (None, False)),
    ((2, 1), (None, False)),
    ((-1, 1), (None, False)),
]


@pytest.mark.parametrize(("word_digit", "want"), OB_SIZE_WORDS)
def test_an_ob_size_word_decodes_as_cpython_3_11_reads_it(word_digit, want):
    assert _decode(*word_digit, False) == want


@pytest.mark.parametrize(("word_digit", "want"), LV_TAG_WORDS)
def test_an_lv_tag_word_decodes_as_cpython_3_12_to_3_14_read_it(word_digit, want):
    assert _decode(*word_digit, True) == want


def test_the_two_layouts_read_the_same_word_differently():
    # 1 is the int 1 as `ob_size`, zero as `lv_tag` (size 0, sign "zero"): the layout flag matters.
    assert _decode(1, 7, False) == (7, True)
    assert _decode(1, 7, True) == (0, False)


def _direct_read_expected():
    """Whether this interpreter's ints are laid out as the direct read reads them."""
    return (
        sys.implementation.name == "cpython"
        and not sysconfig.get_config_var("Py_GIL_DISABLED")
        and sys.maxsize > 2**32
        and sys.int_info.bits_per_digit == 30
        and sys.int_info.sizeof_digit == 4
    )


def test_the_import_check_passes_for_this_interpreters_layout():
    wrong, direct = _self_check(THIS_LAYOUT_TAGGED)
    if not _direct_read_expected():
        assert not direct
        return
    assert wrong == []
    # The check passing is what turned the direct read on at import.
    assert direct


@pytest.mark.skipif(not _direct_read_expected(), reason="ints are not read directly here")
def test_the_import_check_fails_for_the_other_layout():
    # Read as the other layout, the one-digit ints come out wrong or not at all: the check
    # reports them, which at import would have left every int to the general path.
    wrong, _ = _self_check(not THIS_LAYOUT_TAGGED)
    assert {1, -1, D - 1, -(D - 1)} <= set(wrong), wrong
    assert set(wrong) <= {0, 1, -1, D - 1, -(D - 1), D, -D, D * D}, wrong
