//! `rx.Executable`: the immutable program a VM runs.

use pyo3::prelude::*;
use pyo3::types::PyList;
use relaxvm::Executable;
use std::sync::Arc;

/// An executable: function table, constant pool and bytecode. Build one with
/// `ExecBuilder.get()` or load one with `load_executable`.
#[pyclass(module = "relaxvm", name = "Executable", frozen)]
pub struct PyExecutable(pub Arc<Executable>);

#[pymethods]
impl PyExecutable {
    /// A summary: constants, bytecode functions, packed functions, instruction count.
    fn stats(&self) -> String {
        self.0.stats()
    }

    /// The text form, which the assembler can parse back.
    fn as_text(&self) -> String {
        self.0.as_text()
    }

    /// Python source that rebuilds this executable with `ExecBuilder` (its last line binds
    /// `ex = ib.get()`).
    fn as_python(&self) -> String {
        self.0.as_python()
    }

    /// Old TVM spelling of `as_text()`.
    fn astext(&self) -> String {
        self.0.as_text()
    }

    /// Old TVM spelling of `as_python()`.
    fn aspython(&self) -> String {
        self.0.as_python()
    }

    /// Names of the bytecode functions, in table order.
    #[getter]
    fn function_names<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.0.bytecode_function_names())
    }

    /// Names of the packed functions the executable calls, in table order.
    #[getter]
    fn packed_function_names<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.0.packed_function_names())
    }

    /// The parameter names of bytecode function `name` (empty when it was built without them).
    fn param_names(&self, name: &str) -> PyResult<Vec<String>> {
        self.0
            .func(name)
            .map(|f| f.param_names.clone())
            .ok_or_else(|| pyo3::exceptions::PyKeyError::new_err(format!("no function named {name:?}")))
    }

    /// The number of inputs of bytecode function `name`.
    fn num_inputs(&self, name: &str) -> PyResult<u32> {
        self.0
            .func(name)
            .map(|f| f.num_args)
            .ok_or_else(|| pyo3::exceptions::PyKeyError::new_err(format!("no function named {name:?}")))
    }

    fn __repr__(&self) -> String {
        format!(
            "<relaxvm.Executable functions={:?} constants={} instructions={}>",
            self.0.bytecode_function_names(),
            self.0.constants().len(),
            self.0.instrs().len()
        )
    }
}
