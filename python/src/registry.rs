//! The process-wide function registry seen from Python, and Python callables as packed
//! functions.

use crate::convert::{packed_from_callable, to_py, PyClosure};
use pyo3::exceptions::{PyKeyError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCFunction, PyDict, PyString, PyTuple};
use relaxvm::{registry, PackedFunc, Value};
use std::sync::Arc;

/// The origin (`PackedFunc::with_origin`) of a function `register_func` made from a Python
/// callable: the callable. The global registry is the one record of which functions call
/// Python; this is how the binding finds the callable again (to pickle it, and to keep the GIL
/// around calls of it). A type of its own rather than the bare `Py<PyAny>` that a callable
/// passed as a value carries: that one comes back to Python as itself, whereas a registered
/// function comes back from `get_global_func` as an `rx.Closure` named after its registration
/// (TVM returns a function object too).
struct Registered(Py<PyAny>);

/// The Python callable behind `f`, when `register_func` made it from one.
fn registered_callable(f: &PackedFunc) -> Option<&Py<PyAny>> {
    f.origin()?.downcast_ref::<Registered>().map(|r| &r.0)
}

/// The Python callable behind the global registry's `name`, when `register_func` registered
/// one there.
fn python_callable(py: Python<'_>, name: &str) -> Option<Py<PyAny>> {
    registered_callable(registry::global().get(name)?).map(|f| f.clone_ref(py))
}

/// True when the global registry's `name` is a Python function registered by `register_func`
/// (calling it needs the GIL, so there is no point releasing the GIL around it).
pub fn is_python_backed(name: &str) -> bool {
    registry::global().get(name).and_then(registered_callable).is_some()
}

/// The Python callable registered under `name` by `register_func` (None for a builtin, a
/// kernel, a closure or no function): what a pickled executable records to register again.
#[pyfunction]
pub fn _registered_python_func(py: Python<'_>, name: &str) -> Option<Py<PyAny>> {
    python_callable(py, name)
}

fn register(name: &str, f: &Bound<'_, PyAny>, allow_override: bool) -> PyResult<()> {
    let func = if let Ok(c) = f.cast::<PyClosure>() {
        let c = Arc::clone(&c.get().0);
        PackedFunc::new(name, move |ctx, args| ctx.call(&Value::Func(Arc::clone(&c)), args))
    } else {
        if !f.is_callable() {
            return Err(PyTypeError::new_err(format!(
                "register_func({name:?}): {} is not callable",
                f.get_type().name()?
            )));
        }
        let origin: Arc<dyn std::any::Any + Send + Sync> = Arc::new(Registered(f.clone().unbind()));
        packed_from_callable(name, f.clone().unbind()).with_origin(origin)
    };
    // A function it replaces (and so a callable's `__del__`, which may register again) is
    // dropped after the registry's lock is released.
    registry::register_global(func, allow_override).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Registers `f` in the process-wide registry under `func_name`, where every VM looks packed
/// functions up. Use as `register_func("name", f)`, as a decorator `@register_func("name")`, or
/// bare `@register_func` (the function's own name). A name registered twice without
/// `override=True` raises `ValueError`.
#[pyfunction]
#[pyo3(signature = (func_name, f = None, r#override = false))]
pub fn register_func<'py>(
    py: Python<'py>,
    func_name: &Bound<'py, PyAny>,
    f: Option<&Bound<'py, PyAny>>,
    r#override: bool,
) -> PyResult<Bound<'py, PyAny>> {
    if !func_name.is_instance_of::<PyString>() {
        // Bare decorator: @register_func
        if f.is_some() || !func_name.is_callable() {
            return Err(PyTypeError::new_err("register_func expects a name (str) and optionally a callable"));
        }
        let name: String = func_name.getattr("__name__")?.extract()?;
        register(&name, func_name, r#override)?;
        return Ok(func_name.clone());
    }
    let name: String = func_name.extract()?;
    if let Some(f) = f {
        register(&name, f, r#override)?;
        return Ok(f.clone());
    }
    let decorator = PyCFunction::new_closure(
        py,
        None,
        None,
        move |args: &Bound<'_, PyTuple>, _kw: Option<&Bound<'_, PyDict>>| -> PyResult<Py<PyAny>> {
            let f = args.get_item(0)?;
            register(&name, &f, r#override)?;
            Ok(f.unbind())
        },
    )?;
    Ok(decorator.into_any())
}

/// The function registered under `name`, as a callable `rx.Closure`; with `allow_missing`
/// returns `None` instead of raising `ValueError` (what TVM raises) when there is none.
#[pyfunction]
#[pyo3(signature = (name, allow_missing = false))]
pub fn get_global_func<'py>(py: Python<'py>, name: &str, allow_missing: bool) -> PyResult<Bound<'py, PyAny>> {
    match registry::global().get(name) {
        Some(f) => to_py(py, &Value::packed(f.clone())),
        None if allow_missing => Ok(py.None().into_bound(py)),
        None => Err(pyo3::exceptions::PyValueError::new_err(format!("no global function named {name:?}"))),
    }
}

/// Every name in the process-wide registry, in registration order.
#[pyfunction]
pub fn list_global_func_names() -> Vec<String> {
    registry::global().names().map(str::to_string).collect()
}

/// Removes `name` from the process-wide registry (`KeyError` when absent).
#[pyfunction]
pub fn remove_global_func(name: &str) -> PyResult<()> {
    // Dropped after the registry's lock is released: a `__del__` may call back in.
    registry::remove_global(name)
        .map(drop)
        .ok_or_else(|| PyKeyError::new_err(format!("cannot remove {name:?}: no global function has that name")))
}
