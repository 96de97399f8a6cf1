//! Ints read from Python: the one extractor every entry point reads its int arguments with, so
//! an int out of range is refused in one form wherever it was passed: the place (API argument,
//! parameter, path), the value (read through `int`'s own methods) and the range that was
//! expected, e.g. `shape dimension 1: int 18446744073709551616 does not fit in int64
//! (-2^63..2^63-1)`. `tests/test_int_extraction_rule.py` fails when an entry point of
//! `python/src` takes an int parameter or extracts an int without it.

use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyInt, PyTuple};
use pyo3::PyTypeInfo;

/// An integer type an entry point reads from Python, with its name and range for messages.
pub trait IntTarget: TryFrom<i128> {
    /// The type's name in messages (`int32`).
    const NAME: &'static str;
    /// Its range in messages (`-2^31..2^31-1`).
    const RANGE: &'static str;
}

impl IntTarget for i64 {
    const NAME: &'static str = "int64";
    const RANGE: &'static str = "-2^63..2^63-1";
}

impl IntTarget for i32 {
    const NAME: &'static str = "int32";
    const RANGE: &'static str = "-2^31..2^31-1";
}

impl IntTarget for u32 {
    const NAME: &'static str = "uint32";
    const RANGE: &'static str = "0..2^32-1";
}

impl IntTarget for u64 {
    const NAME: &'static str = "uint64";
    const RANGE: &'static str = "0..2^64-1";
}

/// `ob` as a `T` read from a Python argument, `place()` (called only for an error) naming it:
/// an int out of `T`'s range is an `OverflowError` saying so, anything but an int a
/// `TypeError` naming the place.
pub fn extract_int<T: IntTarget>(ob: &Bound<'_, PyAny>, place: &dyn Fn() -> String) -> PyResult<T> {
    // Read as i128, which holds every target's range, then narrowed: one overflow test for all.
    let wide = ob.extract::<i128>().map_err(|e| {
        if e.is_instance_of::<PyOverflowError>(ob.py()) {
            out_of_range(ob, &place(), T::NAME, T::RANGE)
        } else if e.is_instance_of::<PyTypeError>(ob.py()) {
            PyTypeError::new_err(format!("{}: {}", place(), e.value(ob.py())))
        } else {
            e
        }
    })?;
    T::try_from(wide).map_err(|_| out_of_range(ob, &place(), T::NAME, T::RANGE))
}

/// [`extract_int`] of `Option<T>`: `None` (or the argument left out) is `None`.
pub fn extract_opt<T: IntTarget>(ob: Option<&Bound<'_, PyAny>>, place: &dyn Fn() -> String) -> PyResult<Option<T>> {
    ob.filter(|o| !o.is_none()).map(|o| extract_int::<T>(o, place)).transpose()
}

/// [`extract_int`] to int64, the VM's int.
pub fn extract_i64(ob: &Bound<'_, PyAny>, place: &dyn Fn() -> String) -> PyResult<i64> {
    extract_int::<i64>(ob, place)
}

/// The refusal of an integer (an `int`, a subclass, or a numpy integer) beyond int64 at
/// `place` (empty when the caller names none): its type, its value, and the range.
#[cold]
pub fn int_out_of_range(ob: &Bound<'_, PyAny>, place: &str) -> PyErr {
    out_of_range(ob, place, i64::NAME, i64::RANGE)
}

#[cold]
fn out_of_range(ob: &Bound<'_, PyAny>, place: &str, name: &str, range: &str) -> PyErr {
    let at = if place.is_empty() { String::new() } else { format!("{place}: ") };
    let type_name = ob.get_type().name().map_or_else(|_| "int".to_string(), |n| n.to_string());
    PyOverflowError::new_err(format!("{at}{type_name} {} does not fit in {name} ({range})", shown_int(ob)))
}

/// An integer for a message: its digits up to 128 bits; past that, its size in bits (the
/// decimal text of an int past 4300 digits raises in Python, and a long one says nothing more).
/// An `int` (or subclass) is read through `int`'s own methods, so no override of a subclass runs
/// or changes what the message says (attack finding other/12); a numpy integer (within 64 bits,
/// never past int64 unless unsigned) by its value as `u64`.
pub fn shown_int(ob: &Bound<'_, PyAny>) -> String {
    let py = ob.py();
    if !ob.is_instance_of::<PyInt>() {
        return ob.extract::<u64>().map_or_else(|_| "(unprintable)".to_string(), |v| v.to_string());
    }
    /// `int.<name>(*args)`: the method of `int` itself, whatever a subclass overrides.
    fn unbound<'py>(py: Python<'py>, name: &str, args: Vec<Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
        PyInt::type_object(py).getattr(name)?.call1(PyTuple::new(py, args)?)
    }
    let bits = unbound(py, "bit_length", vec![ob.clone()]).and_then(|b| b.extract::<u64>());
    match bits {
        Ok(b) if b > 128 => {
            let zero = match 0i64.into_pyobject(py) {
                Ok(z) => z.into_any(),
                Err(never) => match never {},
            };
            let negative = unbound(py, "__lt__", vec![ob.clone(), zero]).and_then(|r| r.extract::<bool>());
            let sign = if negative.unwrap_or(false) { "negative, " } else { "" };
            format!("({sign}{b} bits)")
        }
        _ => unbound(py, "__repr__", vec![ob.clone()])
            .and_then(|r| r.extract::<String>())
            .unwrap_or_else(|_| "(unprintable)".to_string()),
    }
}
