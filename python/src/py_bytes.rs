//! Python `bytes` objects made from Rust data, fallibly: pyo3's `PyBytes::new` panics when
//! CPython cannot allocate the object (a memory limit, a huge tensor), which must reach the
//! user as `MemoryError` instead.

use pyo3::exceptions::PyMemoryError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// A new `bytes` object holding a copy of `data`; `MemoryError` naming the size when it cannot
/// be allocated (CPython's own has no message).
pub fn new_bytes<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
    PyBytes::new_with(py, data.len(), |out| {
        out.copy_from_slice(data);
        Ok(())
    })
    .map_err(|e| match e.is_instance_of::<PyMemoryError>(py) {
        true => PyMemoryError::new_err(format!("cannot allocate a bytes object of {} bytes", data.len())),
        false => e,
    })
}

/// A new `str` holding `text`, fallibly: made from a `bytes` object and decoded, so that an
/// allocation CPython refuses is `MemoryError` (pyo3's `String` conversion panics instead).
pub fn new_str<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    new_bytes(py, text.as_bytes())?.call_method1("decode", ("utf-8",))
}
