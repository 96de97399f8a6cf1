//! Ints that fit in one digit, to and from Python without CPython's general conversions: a
//! call's int arguments and results are almost always small, and `PyLong_AsLongLongAndOverflow`
//! and `PyLong_FromLongLong` (out-of-line calls with their own type checks and digit loops)
//! were a tenth of a short call.
//!
//! Reading: an exact `int` whose magnitude fits in one digit ("compact", as CPython calls it) is
//! its sign times that digit, read from the object as CPython's own inline
//! `_PyLong_CompactValue` reads it ([`decode`], a pure function compiled in every build, so the
//! tests check both CPython layouts whichever one this build has). Where the layout is not the
//! one this reads — the limited API, free-threaded builds, other interpreters, a build whose
//! digits are not 30 bits (from `sys.int_info`), or one whose ints [`self_check`] reads wrongly
//! (both checked once, at import) — every int takes the general path.
//!
//! Writing: CPython shares one object per int in -5..=256; the module keeps a reference to each
//! (taken at import, through `PyLong_FromLong`, so they are CPython's own) and a small result is
//! that object with one more reference, what `PyLong_FromLongLong` returns for it.

use pyo3::ffi;
use pyo3::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

/// The smallest and largest ints CPython shares one object for.
const SMALL_MIN: i64 = -5;
const SMALL_MAX: i64 = 256;
const SMALL_COUNT: usize = (SMALL_MAX - SMALL_MIN + 1) as usize;

/// CPython's objects for -5..=256 (null until [`init`]), each holding a reference of ours.
static SMALL: [AtomicPtr<ffi::PyObject>; SMALL_COUNT] = [const { AtomicPtr::new(std::ptr::null_mut()) }; SMALL_COUNT];

/// Whether ints are read directly (set by [`init`] when the layout checks pass).
static COMPACT_LAYOUT: AtomicBool = AtomicBool::new(false);

/// Whether this build's size word is CPython 3.12+'s `lv_tag` (else 3.11's `ob_size`).
const TAGGED: bool = cfg!(Py_3_12);

/// A digit's bits in the layout read directly (`sys.int_info.bits_per_digit`).
const DIGIT_BITS: u32 = 30;

/// Takes CPython's small-int objects and decides whether ints are read directly (at import):
/// only when the build's layout is one [`compact`] knows, the digits are 30-bit `u32`s, and
/// [`self_check`] reads every int it tries as CPython's own conversion does. A later CPython
/// that lays ints out otherwise thus gets the general path, not wrong values.
pub fn init(py: Python<'_>) -> PyResult<()> {
    for (slot, i) in SMALL.iter().zip(SMALL_MIN..=SMALL_MAX) {
        if slot.load(Ordering::Relaxed).is_null() {
            // SAFETY: attached (`py`); a new reference, or null with an error set.
            let ob = unsafe { ffi::PyLong_FromLong(i as std::ffi::c_long) };
            if ob.is_null() {
                return Err(PyErr::fetch(py));
            }
            slot.store(ob, Ordering::Relaxed);
        }
    }
    let info = py.import("sys")?.getattr("int_info")?;
    let digits = info.getattr("bits_per_digit")?.eq(DIGIT_BITS)? && info.getattr("sizeof_digit")?.eq(4)?;
    let direct = LAYOUT_READABLE && digits && self_check(py, TAGGED)?.is_empty();
    COMPACT_LAYOUT.store(direct, Ordering::Relaxed);
    Ok(())
}

/// Whether ints are read directly in this process (the import-time checks passed).
pub fn direct() -> bool {
    COMPACT_LAYOUT.load(Ordering::Relaxed)
}

/// The ints [`self_check`] reads: zero, one digit's edges of both signs, and the smallest
/// two-digit magnitudes (which the direct read must leave to the general path).
const CHECKED: [i64; 8] = [
    0,
    1,
    -1,
    (1 << DIGIT_BITS) - 1,
    -((1 << DIGIT_BITS) - 1),
    1 << DIGIT_BITS,
    -(1 << DIGIT_BITS),
    1 << (2 * DIGIT_BITS),
];

/// The ints of [`CHECKED`] that the direct read, taking the size word as `tagged` says,
/// reads otherwise than `PyLong_AsLongLong` does (a value for a two-digit int, or none for a
/// one-digit one, counts as otherwise). Empty when the direct read is right for them.
pub fn self_check(py: Python<'_>, tagged: bool) -> PyResult<Vec<i64>> {
    let mut wrong = Vec::new();
    for v in CHECKED {
        // SAFETY: attached (`py`); a new reference or null with an error set, which
        // `from_owned_ptr_or_err` turns into the owned object or the error.
        let ob = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyLong_FromLongLong(v)) }?;
        // SAFETY: `ob` is a live exact int; the call only reads it (every value of `CHECKED`
        // fits in a `long long`, so no error is set).
        let general = unsafe { ffi::PyLong_AsLongLong(ob.as_ptr()) };
        let want = (general.unsigned_abs() < 1 << DIGIT_BITS).then_some(general);
        // SAFETY: `ob` is a live exact int and the thread is attached.
        if general != v || unsafe { compact(ob.as_ptr(), tagged) } != want {
            wrong.push(v);
        }
    }
    Ok(wrong)
}

/// Whether this build's int layout is one [`compact`] knows.
const LAYOUT_READABLE: bool =
    cfg!(all(not(Py_LIMITED_API), not(Py_GIL_DISABLED), not(PyPy), not(GraalPy), target_pointer_width = "64"));

/// The value of an int whose size word is `word` and whose first digit `digit` gives, when it
/// has at most one digit; `None` when the word says more digits, or is not one a normalised int
/// has (then CPython's general conversion reads it). `digit` is called only when the word says
/// the int has one digit: a zero's digit slot may be uninitialised, or absent (3.9, 3.10).
///
/// `tagged`: the word is 3.12+'s `lv_tag` — the digit count above 3 flag bits, whose low two
/// are the sign (0 positive, 1 zero, 2 negative) and whose third marks 3.14's immortal ints —
/// else it is 3.11's `ob_size`, the digit count negated for a negative int.
#[inline(always)]
pub fn decode(word: isize, tagged: bool, digit: impl FnOnce() -> u32) -> Option<i64> {
    let negative = if tagged {
        let tag = word as usize;
        match (tag >> 3, tag & 3) {
            (0, 1) => return Some(0),
            (1, 0) => false,
            (1, 2) => true,
            _ => return None,
        }
    } else {
        match word {
            0 => return Some(0),
            1 => false,
            -1 => true,
            _ => return None,
        }
    };
    let d = digit();
    // A digit is below 2^30; one that is not means the layout is not the one read here.
    if d >> DIGIT_BITS != 0 {
        return None;
    }
    let d = i64::from(d);
    Some(if negative { -d } else { d })
}

/// The value of the exact int `ob` when it fits in one digit, reading its size word as
/// `tagged` says ([`decode`]); `None` otherwise, and always where the layout is not readable.
///
/// # Safety
/// `ob` is a live exact `int` (not a subclass) and the thread is attached.
#[inline(always)]
#[allow(unused_variables)]
unsafe fn compact(ob: *mut ffi::PyObject, tagged: bool) -> Option<i64> {
    #[cfg(all(not(Py_LIMITED_API), not(Py_GIL_DISABLED), not(PyPy), not(GraalPy), target_pointer_width = "64"))]
    {
        // The object's fields after its `PyObject` header: a size word, then the digits.
        // SAFETY: every int of these layouts has the size word; the digit is read only when
        // the size word says there is one (`decode`), so inside the object and initialised.
        // Whether the digits are 30-bit values in `u32`s was checked at import (the caller
        // reads only when `COMPACT_LAYOUT` says so; `self_check` reads ints of known value).
        unsafe {
            let fields = ob.cast::<u8>().add(std::mem::size_of::<ffi::PyObject>());
            let word = fields.cast::<isize>().read();
            return decode(word, tagged, || fields.add(std::mem::size_of::<isize>()).cast::<u32>().read());
        }
    }
    #[allow(unreachable_code)]
    None
}

/// The exact `int` `ob` as an `i64`, or `None` when it does not fit.
///
/// # Safety
/// `ob` is a live exact `int` (not a subclass) and the thread is attached.
#[inline(always)]
pub unsafe fn read(ob: *mut ffi::PyObject) -> Option<i64> {
    if COMPACT_LAYOUT.load(Ordering::Relaxed) {
        // SAFETY: the caller's contract; the layout was checked at import.
        if let Some(v) = unsafe { compact(ob, TAGGED) } {
            return Some(v);
        }
    }
    read_general(ob)
}

/// [`read`] through CPython's conversion (a large int, or a layout not read directly).
#[inline(never)]
fn read_general(ob: *mut ffi::PyObject) -> Option<i64> {
    let mut overflow = 0;
    // SAFETY: `ob` is a live int (see `read`); the call only reads it and reports overflow in
    // `overflow` (-1 with no overflow is either -1 or an error, none for an exact int).
    let v = unsafe { ffi::PyLong_AsLongLongAndOverflow(ob, &mut overflow) };
    (overflow == 0).then_some(v)
}

/// A new reference to the Python int `i`, or null with a `MemoryError` set.
///
/// # Safety
/// The thread is attached.
#[inline(always)]
pub unsafe fn to_py(i: i64) -> *mut ffi::PyObject {
    if (SMALL_MIN..=SMALL_MAX).contains(&i) {
        let ob = SMALL[(i - SMALL_MIN) as usize].load(Ordering::Relaxed);
        if !ob.is_null() {
            // SAFETY: a live object we hold a reference to (taken in `init`, never released);
            // attached, so its count may change.
            unsafe { ffi::Py_INCREF(ob) };
            return ob;
        }
    }
    // SAFETY: attached (the caller's contract).
    unsafe { ffi::PyLong_FromLongLong(i) }
}
