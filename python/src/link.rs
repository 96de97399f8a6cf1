//! `rx.link`: merges executables into one (see `relaxvm_builder::link`).

use crate::executable::PyExecutable;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use relaxvm::Executable;
use relaxvm_builder as rb;
use std::sync::Arc;

/// Links executables into one. Function tables merge by name: a function one module declares
/// (a packed entry, e.g. `ib.f("helper")` or `declare_function`) and another defines becomes a
/// direct call; names no module defines stay packed functions for the registry to provide when
/// a VM is built; a name two modules define raises `ValueError` naming both. Equal constants are
/// stored once; every index is remapped; parameter names, signatures and locations are kept.
///
/// `modules`: executables, or `(name, executable)` pairs (the name appears in errors).
/// `entry`: the entry function of the result (default: the one the modules declare, or
/// `main`). `drop_unreachable`: leave out functions the entry (and `keep`) cannot reach, and
/// constants only they use.
#[pyfunction]
#[pyo3(signature = (modules, entry = None, drop_unreachable = false, keep = None))]
pub fn link(
    py: Python<'_>,
    modules: &Bound<'_, PyAny>,
    entry: Option<String>,
    drop_unreachable: bool,
    keep: Option<Vec<String>>,
) -> PyResult<PyExecutable> {
    let mut mods: Vec<(String, Arc<Executable>)> = Vec::new();
    for item in modules.try_iter()? {
        let item = item?;
        if let Ok(e) = item.cast::<PyExecutable>() {
            mods.push((String::new(), Arc::clone(&e.get().0)));
        } else if let Ok(t) = item.cast::<PyTuple>() {
            let (name, e): (String, PyRef<'_, PyExecutable>) = t
                .extract()
                .map_err(|_| PyTypeError::new_err("link: a module is an Executable or a (name, Executable) pair"))?;
            mods.push((name, Arc::clone(&e.0)));
        } else {
            return Err(PyTypeError::new_err(format!(
                "link: a module is an Executable or a (name, Executable) pair, got {}",
                item.get_type().name()?
            )));
        }
    }
    if mods.is_empty() {
        return Err(PyValueError::new_err("link: no executables given"));
    }
    let options = rb::LinkOptions { entry, drop_unreachable, keep: keep.unwrap_or_default() };
    let linked = py.detach(|| {
        let refs: Vec<(&str, &Executable)> = mods.iter().map(|(n, e)| (n.as_str(), &**e)).collect();
        rb::link(&refs, &options)
    });
    linked.map(|e| PyExecutable(Arc::new(e))).map_err(|e| PyValueError::new_err(e.to_string()))
}
