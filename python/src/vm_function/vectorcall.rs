//! `vm["name"](...)` through CPython's vectorcall protocol (PEP 590).
//!
//! pyo3 gives a class `__call__` through `tp_call`, which makes CPython pack the positional
//! arguments into a new tuple (and keywords into a dict) for every call, then unpack them again:
//! a quarter of a short call's time. A VMFunction instead carries a vectorcall entry in its
//! object, which CPython finds through its type's `tp_vectorcall_offset` and calls with the
//! caller's own argument array — what CPython's functions, Cython's and nanobind's do. `tp_call`
//! (pyo3's `__call__`) stays for callers that hold a tuple and a dict already.

use crate::convert::enable_type;
use crate::vm_function::{raise, PyVmFunction};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use pyo3::Borrowed;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

/// The signature of a vectorcall entry (`vectorcallfunc`).
pub type VectorcallFn = unsafe extern "C" fn(
    callable: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargsf: usize,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject;

/// Where in a VMFunction object its entry is, once the type has been told.
static OFFSET: OnceLock<isize> = OnceLock::new();

/// Makes the VMFunction `f` callable through vectorcall. The first one tells the type where
/// the entry sits in its objects (the same place in every object of a class); every object
/// holds the entry from its construction, so calls go through it from the first.
pub fn enable(f: &Bound<'_, PyVmFunction>) -> PyResult<()> {
    // SAFETY: VMFunction is final and its constructor stores a valid entry in `vectorcall`.
    unsafe { enable_type(f.as_any(), std::ptr::from_ref(&f.get().vectorcall).cast(), &OFFSET, "VMFunction") }
}

/// The vectorcall entry of every VMFunction.
///
/// # Safety
/// Called by CPython only, on an attached thread, with `callable` a VMFunction (only its type
/// points here) and `args` holding `PyVectorcall_NARGS(nargsf)` positional arguments followed
/// by one value per name in `kwnames` (a tuple of str, or null).
pub unsafe extern "C" fn call(
    callable: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargsf: usize,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: CPython calls vectorcall entries on a thread attached to the interpreter.
    let py = unsafe { Python::assume_attached() };
    let run = || -> *mut ffi::PyObject {
        // SAFETY: `callable` is a live VMFunction for the duration of the call (see above).
        let f = unsafe { Borrowed::from_ptr(py, callable).cast_unchecked::<PyVmFunction>() };
        let f = f.get();
        // SAFETY: `nargsf` is CPython's count, possibly with the offset flag.
        let nargs = unsafe { ffi::PyVectorcall_NARGS(nargsf) } as usize;
        // SAFETY: CPython passes `nargs` live object pointers at `args`, followed by one per
        // keyword name (`args` may be anything when there are none).
        let array = |len: usize| if len == 0 { &[][..] } else { unsafe { std::slice::from_raw_parts(args, len) } };
        if kwnames.is_null() {
            // The common call: positional arguments only, read where CPython put them.
            // SAFETY: each is a live object CPython lends for the call.
            return unsafe { f.call_positional(py, array(nargs)) };
        }
        // SAFETY: `kwnames` is a tuple, alive for the call.
        let names = unsafe { Borrowed::from_ptr(py, kwnames).cast_unchecked::<PyTuple>() };
        let (positional, keywords) = array(nargs + names.len()).split_at(nargs);
        if keywords.is_empty() {
            // SAFETY: as above.
            return unsafe { f.call_positional(py, positional) };
        }
        call_with_keywords(f, py, positional, &names, keywords).map_or_else(|e| raise(py, e), Bound::into_ptr)
    };
    match catch_unwind(AssertUnwindSafe(run)) {
        Ok(ret) => ret,
        Err(payload) => raise(py, pyo3::panic::PanicException::new_err(relaxvm::packed::panic_message(&*payload))),
    }
}

/// A vectorcall with keywords: rare on the hot path, so assigned as `tp_call` would, out of
/// line (the positional path stays small enough for the compiler to inline what it calls).
#[cold]
#[inline(never)]
fn call_with_keywords<'py>(
    f: &PyVmFunction,
    py: Python<'py>,
    positional: &[*mut ffi::PyObject],
    names: &Bound<'py, PyTuple>,
    keywords: &[*mut ffi::PyObject],
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: each pointer is a live object CPython lends for the call (see `call`).
    let borrow = |p: &*mut ffi::PyObject| unsafe { Borrowed::from_ptr(py, *p) };
    let tuple = PyTuple::new(py, positional.iter().map(borrow))?;
    let dict = PyDict::new(py);
    for (name, value) in names.iter().zip(keywords.iter().map(borrow)) {
        dict.set_item(name, value)?;
    }
    f.call_bound(py, &tuple, Some(&dict))
}
