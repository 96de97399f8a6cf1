//! `rx.Closure`: a VM function value (bytecode or packed, with captured arguments).

use crate::convert::{args_to_values, to_py};
use crate::errors::IntoPyResult;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use relaxvm::{CallCtx, Callable, Closure, Value};
use std::sync::Arc;

/// A function value from the VM: a bytecode function (callable through
/// `VirtualMachine.invoke_closure`) or a packed function (callable directly), with the values it
/// captured.
#[pyclass(module = "relaxvm", name = "Closure", frozen)]
pub struct PyClosure(pub Arc<Closure>);

#[pymethods]
impl PyClosure {
    /// The function's name.
    #[getter]
    fn name(&self) -> &str {
        self.0.name()
    }

    /// True for a bytecode function (which needs a VM to run).
    #[getter]
    fn is_bytecode(&self) -> bool {
        matches!(self.0.callable, Callable::Bytecode { .. })
    }

    /// How many values it captured (passed after each call's own arguments).
    #[getter]
    fn num_captured(&self) -> usize {
        self.0.captured.len()
    }

    /// Calls a packed function with `args` followed by the captured values. Bytecode closures
    /// need a VM: use `vm.invoke_closure(closure, *args)`.
    #[pyo3(signature = (*args))]
    fn __call__<'py>(&self, py: Python<'py>, args: &Bound<'py, PyTuple>) -> PyResult<Bound<'py, PyAny>> {
        let argv = args_to_values(args)?;
        let f = Value::Func(Arc::clone(&self.0));
        let ret = py.detach(|| CallCtx::detached().call(&f, &argv)).py_err(py)?;
        to_py(py, &ret)
    }

    fn __repr__(&self) -> String {
        let kind = if self.is_bytecode() { "bytecode" } else { "packed" };
        format!("<relaxvm.Closure {kind} {:?} captured={}>", self.0.name(), self.0.captured.len())
    }
}
