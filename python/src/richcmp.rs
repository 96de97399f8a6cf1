//! Results of rich comparisons (`__richcmp__`) as Python objects.

use pyo3::prelude::*;
use pyo3::types::PyBool;

/// `True` or `False` as an owned object.
#[inline]
pub fn py_bool(py: Python<'_>, b: bool) -> Py<PyAny> {
    PyBool::new(py, b).to_owned().into_any().unbind()
}
