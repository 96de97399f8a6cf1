//! Ints that fit in one digit, to and from Python without CPython's general conversions: a
//! call's int arguments and results are almost always small, and `PyLong_AsLongLongAndOverflow`
//! and `PyLong_FromLongLong` (out-of-line calls with their own type checks and digit loops)
//! were a tenth of a short call.
//!
//! Reading: an exact `int` whose magnitude fits in one digit ("compact", as CPython calls it) is
//! its sign times that digit, read from the object as CPython's own inline
//! `_PyLong_CompactValue` reads it. Where the layout is not the one this reads — the limited API,
//! free-threaded builds, other interpreters, a build whose digits are not 30 bits (checked once,
//! at import, from `sys.int_info`) — every int takes the general path.
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

/// Whether ints are stored as this module reads them (set by [`init`]).
static COMPACT_LAYOUT: AtomicBool = AtomicBool::new(false);

/// Takes CPython's small-int objects and checks the int layout (at import).
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
    let digits = info.getattr("bits_per_digit")?.eq(30)? && info.getattr("sizeof_digit")?.eq(4)?;
    COMPACT_LAYOUT.store(LAYOUT_READABLE && digits, Ordering::Relaxed);
    Ok(())
}

/// Whether this build's int layout is one [`compact`] knows.
const LAYOUT_READABLE: bool =
    cfg!(all(not(Py_LIMITED_API), not(Py_GIL_DISABLED), not(PyPy), not(GraalPy), target_pointer_width = "64"));

/// The value of the exact int `ob` when it fits in one digit, else `None`.
///
/// # Safety
/// `ob` is a live exact `int` (not a subclass) and the thread is attached.
#[inline(always)]
#[allow(unused_variables)]
unsafe fn compact(ob: *mut ffi::PyObject) -> Option<i64> {
    #[cfg(all(not(Py_LIMITED_API), not(Py_GIL_DISABLED), not(PyPy), not(GraalPy), target_pointer_width = "64"))]
    {
        // The object's fields after its `PyObject` header: a size word and the first digit.
        // SAFETY: every int has at least one digit slot (CPython allocates one even for 0),
        // and both reads stay inside the object; `COMPACT_LAYOUT` (checked by the caller) says
        // the digits are 30-bit values in `u32`s.
        let (word, digit) = unsafe {
            let fields = ob.cast::<u8>().add(std::mem::size_of::<ffi::PyObject>());
            (fields.cast::<isize>().read(), i64::from(fields.add(8).cast::<u32>().read()))
        };
        #[cfg(not(Py_3_12))]
        {
            // `ob_size`: the digit count, negated for a negative int (0 for 0).
            return match word {
                0 => Some(0),
                1 => Some(digit),
                -1 => Some(-digit),
                _ => None,
            };
        }
        #[cfg(Py_3_12)]
        {
            // `lv_tag`: the digit count above 3 flag bits, whose low two are the sign (0
            // positive, 1 zero, 2 negative); compact means fewer than two digits.
            let tag = word as usize;
            return (tag < (2 << 3)).then(|| (1 - (tag & 3) as i64) * digit);
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
        if let Some(v) = unsafe { compact(ob) } {
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
