//! Exception classes, and the one place where runtime errors become Python exceptions.
//!
//! Every runtime failure is an [`VMError`] (a `RuntimeError`); the ones that have a natural
//! builtin counterpart also derive from it, so `except TypeError` and `except rx.VMError` both
//! catch a wrong argument count. An exception raised by Python code that the VM called travels
//! through the VM inside `ErrorKind::External` and is re-raised here with its own type, with the
//! VM's location added as a note (3.11+) or as its `__cause__` (3.9, 3.10).

use pyo3::exceptions::{
    PyBaseException, PyIndexError, PyKeyError, PyMemoryError, PyRuntimeError, PyTypeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};
use pyo3::{ffi, PyTypeInfo};
use relaxvm::verify::VerifyError;
use relaxvm::{Error, ErrorKind};
use std::ffi::CStr;

/// The exception classes this module declares, created once per interpreter.
pub struct Classes {
    pub vm_error: Py<PyType>,
    pub vm_type_error: Py<PyType>,
    pub vm_key_error: Py<PyType>,
    pub vm_index_error: Py<PyType>,
    pub vm_value_error: Py<PyType>,
    pub vm_memory_error: Py<PyType>,
    pub check_error: Py<PyType>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

fn new_class(py: Python<'_>, name: &CStr, doc: &CStr, bases: &[Bound<'_, PyType>]) -> PyResult<Py<PyType>> {
    new_class_with(py, name, doc, bases, None)
}

/// [`new_class`] with `attrs` as the class's namespace.
fn new_class_with(
    py: Python<'_>,
    name: &CStr,
    doc: &CStr,
    bases: &[Bound<'_, PyType>],
    attrs: Option<&Bound<'_, PyDict>>,
) -> PyResult<Py<PyType>> {
    let bases = PyTuple::new(py, bases)?;
    let attrs = attrs.map_or(std::ptr::null_mut(), |d| d.as_ptr());
    // SAFETY: the name and doc are NUL-terminated strings that outlive the call; `bases` is a
    // tuple of exception classes; `attrs` is null or a dict that outlives the call (it is
    // copied into the class); the call returns a new reference or NULL with an exception set.
    unsafe {
        Bound::from_owned_ptr_or_err(
            py,
            ffi::PyErr_NewExceptionWithDoc(name.as_ptr(), doc.as_ptr(), bases.as_ptr(), attrs),
        )
        .map(|t| t.cast_into_unchecked::<PyType>().unbind())
    }
}

/// The exception classes (created on first use).
pub fn classes(py: Python<'_>) -> &'static Classes {
    CLASSES
        .get_or_try_init(py, || -> PyResult<Classes> {
            let vm_error = new_class(
                py,
                c"relaxvm.VMError",
                c"A failure while running bytecode. The message names the function, the instruction and its text.",
                &[PyRuntimeError::type_object(py)],
            )?;
            let vm = vm_error.bind(py).clone();
            let sub =
                |name: &CStr, doc: &CStr, builtin: Bound<'_, PyType>| new_class(py, name, doc, &[vm.clone(), builtin]);
            Ok(Classes {
                vm_type_error: sub(
                    c"relaxvm.VMTypeError",
                    c"A VM failure that is also a TypeError: a wrong argument type or count.",
                    PyTypeError::type_object(py),
                )?,
                vm_key_error: {
                    // KeyError shows its message as a repr, in quotes (it is meant for a key);
                    // this one carries a sentence, shown as it is.
                    let attrs = PyDict::new(py);
                    attrs.set_item("__str__", PyBaseException::type_object(py).getattr("__str__")?)?;
                    new_class_with(
                        py,
                        c"relaxvm.VMKeyError",
                        c"A VM failure that is also a KeyError: an unknown function.",
                        &[vm.clone(), PyKeyError::type_object(py)],
                        Some(&attrs),
                    )?
                },
                vm_index_error: sub(
                    c"relaxvm.VMIndexError",
                    c"A VM failure that is also an IndexError.",
                    PyIndexError::type_object(py),
                )?,
                vm_value_error: sub(
                    c"relaxvm.VMValueError",
                    c"A VM failure that is also a ValueError.",
                    PyValueError::type_object(py),
                )?,
                vm_memory_error: sub(
                    c"relaxvm.VMMemoryError",
                    c"A VM failure that is also a MemoryError: an allocation that could not be made.",
                    PyMemoryError::type_object(py),
                )?,
                check_error: new_class(
                    py,
                    c"relaxvm.CheckError",
                    c"The builder's check of an executable failed (e.g. a register read before it is written).",
                    &[PyRuntimeError::type_object(py)],
                )?,
                vm_error,
            })
        })
        .expect("creating the exception classes cannot fail")
}

fn raise(py: Python<'_>, class: &Py<PyType>, msg: String) -> PyErr {
    PyErr::from_type(class.bind(py).clone(), msg)
}

/// A `CheckError` with `msg` and, when it comes from the verifier, its detail as attributes.
fn check_error(py: Python<'_>, msg: String, detail: Option<&VerifyError>) -> PyErr {
    let err = raise(py, &classes(py).check_error, msg);
    set_verify_detail(py, &err, detail);
    err
}

/// The builder's error as a `CheckError`, structured when the verifier found it.
pub fn build_error(py: Python<'_>, e: relaxvm_builder::error::BuildError) -> PyErr {
    use relaxvm_builder::error::BuildError;
    let detail = match &e {
        BuildError::Check(v) => Some(v),
        BuildError::Invalid(inner) => inner.as_invalid(),
        _ => None,
    };
    check_error(py, e.to_string(), detail)
}

/// Sets `func` (also as `function`), `pc`, `instr`, `location` and `kind` (the verifier's name
/// for what is wrong, e.g. `"maybe_unassigned"`) on `err`; all None without detail.
fn set_verify_detail(py: Python<'_>, err: &PyErr, detail: Option<&VerifyError>) {
    let v = err.value(py);
    let func = detail.filter(|d| !d.func.is_empty()).map(|d| d.func.as_str());
    let location = detail.and_then(|d| d.location.as_ref()).map(ToString::to_string);
    let _ = v.setattr("func", func);
    let _ = v.setattr("function", func);
    let _ = v.setattr("pc", detail.and_then(|d| d.pc));
    let _ = v.setattr("instr", detail.and_then(|d| d.instr.as_deref()));
    let _ = v.setattr("location", location);
    let _ = v.setattr("kind", detail.map(|d| d.kind.name()));
}

/// A plain `VMError` with `msg`.
pub fn vm_error(py: Python<'_>, msg: String) -> PyErr {
    raise(py, &classes(py).vm_error, msg)
}

/// The Python exception carried by `e`, if it is a foreign error holding one.
fn carried_pyerr(e: &Error) -> Option<&PyErr> {
    match e.kind() {
        ErrorKind::External(inner) => {
            let inner: &(dyn std::error::Error + 'static) = &**inner;
            inner.downcast_ref::<PyErr>()
        }
        _ => None,
    }
}

/// Converts a runtime error into the Python exception it stands for.
pub fn to_pyerr(py: Python<'_>, e: Error) -> PyErr {
    let root = e.root();
    if let Some(original) = carried_pyerr(root) {
        let err = original.clone_ref(py);
        if !std::ptr::eq(root, &e) {
            annotate(py, &err, &location_note(&e));
        }
        return err;
    }
    let c = classes(py);
    let class = match root.kind() {
        ErrorKind::Type { .. } | ErrorKind::Arity { .. } => &c.vm_type_error,
        ErrorKind::UnknownFunction(_) | ErrorKind::MissingFunctions(_) | ErrorKind::LibraryNotLoaded { .. } => {
            &c.vm_key_error
        }
        // An error a kernel raised keeps the Python type its kind names (TVM's convention).
        ErrorKind::Raised { kind, .. } => match kind.as_str() {
            "ValueError" => &c.vm_value_error,
            "TypeError" => &c.vm_type_error,
            "IndexError" => &c.vm_index_error,
            "KeyError" => &c.vm_key_error,
            "MemoryError" => &c.vm_memory_error,
            // Builtin exceptions with no VMError counterpart are raised as themselves.
            "AssertionError" => return pyo3::exceptions::PyAssertionError::new_err(e.to_string()),
            "AttributeError" => return pyo3::exceptions::PyAttributeError::new_err(e.to_string()),
            "NotImplementedError" => return pyo3::exceptions::PyNotImplementedError::new_err(e.to_string()),
            _ => &c.vm_error,
        },
        ErrorKind::Index { .. } => &c.vm_index_error,
        ErrorKind::Format(_) | ErrorKind::Invalid(_) | ErrorKind::Value(_) => &c.vm_value_error,
        ErrorKind::Io(io) if std::ptr::eq(root, &e) => {
            return PyErr::from(std::io::Error::new(io.kind(), io.to_string()));
        }
        ErrorKind::Alloc { .. } => &c.vm_memory_error,
        ErrorKind::AlreadyRegistered(_) => return PyValueError::new_err(e.to_string()),
        _ => &c.vm_error,
    };
    let err = raise(py, class, e.to_string());
    if let Some(detail) = root.as_invalid() {
        set_verify_detail(py, &err, Some(detail));
        return err;
    }
    // Machine-readable detail for tools (None when the failure was not at an instruction); the
    // message already says all of it.
    let v = err.value(py);
    let (func, pc, instr, location) = match e.kind() {
        ErrorKind::At { func, pc, instr, location, .. } => {
            (Some(func.as_str()), Some(*pc), Some(instr.as_str()), location.as_deref())
        }
        _ => (None, None, None, None),
    };
    let _ = v.setattr("func", func);
    let _ = v.setattr("pc", pc);
    let _ = v.setattr("instr", instr);
    let _ = v.setattr("location", location);
    let _ = v.setattr("kind", None::<&str>);
    err
}

/// "in function "main", instruction 2: call ..." for every `At` layer, innermost first.
fn location_note(e: &Error) -> String {
    let mut lines = Vec::new();
    let mut cur = e;
    while let ErrorKind::At { func, pc, instr, location, source } = cur.kind() {
        let loc = location.as_ref().map(|l| format!(" at {l}")).unwrap_or_default();
        lines.push(format!("in relaxvm function {func:?}, instruction {pc}: {instr}{loc}"));
        cur = source;
    }
    lines.reverse();
    lines.join("\n")
}

/// Adds `note` to `err`: `add_note` on 3.11+, else a chained `VMError` cause.
fn annotate(py: Python<'_>, err: &PyErr, note: &str) {
    let value = err.value(py);
    if value.hasattr(pyo3::intern!(py, "add_note")).unwrap_or(false) {
        let _ = value.call_method1(pyo3::intern!(py, "add_note"), (note,));
    } else if err.cause(py).is_none() {
        err.set_cause(py, Some(vm_error(py, note.to_string())));
    }
}

/// Whether `e`, a callback's error, must pass through the kernel that called back unchanged:
/// a Python exception that is no `Exception` (`KeyboardInterrupt`, `SystemExit`), which the
/// interpreter must see as itself. Takes the GIL (called on the error path only).
pub fn passes_through_kernels(e: &relaxvm_tvm::ffi::raised::Foreign) -> bool {
    let inner: &(dyn std::error::Error + 'static) = &**e;
    inner
        .downcast_ref::<PyErr>()
        .is_some_and(|err| Python::attach(|py| !err.is_instance_of::<pyo3::exceptions::PyException>(py)))
}

/// Wraps a Python exception so that it can travel through the VM.
pub fn from_pyerr(err: PyErr) -> Error {
    Error::external(err)
}

/// `Result<T, relaxvm::Error>` → `PyResult<T>`.
pub trait IntoPyResult<T> {
    /// Converts the error, if any.
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for relaxvm::Result<T> {
    #[inline]
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_pyerr(py, e))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let c = classes(py);
    m.add("VMError", c.vm_error.bind(py))?;
    m.add("VMTypeError", c.vm_type_error.bind(py))?;
    m.add("VMKeyError", c.vm_key_error.bind(py))?;
    m.add("VMIndexError", c.vm_index_error.bind(py))?;
    m.add("VMValueError", c.vm_value_error.bind(py))?;
    m.add("VMMemoryError", c.vm_memory_error.bind(py))?;
    m.add("CheckError", c.check_error.bind(py))?;
    Ok(())
}
