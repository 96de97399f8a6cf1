//! Test aids: native functions that misbehave on purpose, so that the Python test suite can
//! show how the runtime contains them. Private (`relaxvm._relaxvm._register_panicking_func`).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use relaxvm::{registry, PackedFunc};

/// Registers, process-wide under `name`, a Rust packed function that panics with `message`
/// whenever it is called (as a buggy native extension would).
#[pyfunction]
pub fn _register_panicking_func(name: &str, message: String) -> PyResult<()> {
    let f = PackedFunc::from_fn(name, move |_| panic!("{message}"));
    registry::register_global(f, true).map_err(|e| PyValueError::new_err(e.to_string()))
}
