//! `rx.get_global_func(name)(...)` — any packed `rx.Closure` called from Python — through
//! CPython's vectorcall protocol (PEP 590), as `vm["name"](...)` is (`crate::vm_function::vectorcall`).
//!
//! pyo3's `__call__` goes through `tp_call`: CPython packs the positional arguments into a new
//! tuple for every call, and pyo3 unpacks them again through its argument parser. A Closure
//! instead carries a vectorcall entry in its object, called with the caller's own argument
//! array; its arguments are converted from that array (the KV cache's handle and shapes by one
//! type comparison each, before the general conversion's chain of checks). `tp_call` stays for
//! callers holding a tuple (and for keywords, which it refuses with pyo3's message).

use super::{args_to_values, quick_value, to_py, to_value_in, Args, PyOpaque};
use crate::errors::IntoPyResult;
use crate::shape::PyShape;
use pyo3::exceptions::PyRuntimeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use pyo3::Borrowed;
use relaxvm::{CallCtx, Callable, Closure, Value};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};

/// Hands `e` to Python as the pending exception: what a vectorcall entry returns on failure.
fn raise(py: Python<'_>, e: PyErr) -> *mut ffi::PyObject {
    e.restore(py);
    std::ptr::null_mut()
}

/// A function value from the VM: a bytecode function (callable through
/// `VirtualMachine.invoke_closure`) or a packed function (callable directly), with the values it
/// captured. Made by [`new_closure`] (which gives it its vectorcall entry,
/// the third field).
#[pyclass(module = "relaxvm", name = "Closure", frozen)]
pub struct PyClosure(pub Arc<Closure>, pub(crate) relaxvm::short_calls::ShortRecord, pub(crate) ffi::vectorcallfunc);

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
    /// (Calls from Python come through the vectorcall entry, [`call`]; this is
    /// for callers holding a tuple.)
    fn __call__<'py>(&self, py: Python<'py>, args: &Bound<'py, PyTuple>) -> PyResult<Bound<'py, PyAny>> {
        let argv = args_to_values(args, self.0.name())?;
        self.call_values(py, &argv)
    }

    fn __repr__(&self) -> String {
        let kind = if self.is_bytecode() { "bytecode" } else { "packed" };
        format!("<relaxvm.Closure {kind} {:?} captured={}>", self.0.name(), self.0.captured.len())
    }
}

impl PyClosure {
    /// Calls it with the converted arguments `argv` (followed by its captured values); the
    /// result converted for Python.
    pub(crate) fn call_values<'py>(&self, py: Python<'py>, argv: &[Value]) -> PyResult<Bound<'py, PyAny>> {
        // A registered function may call this closure back through Python, nesting on the
        // native stack outside any VM entry's check: on a small thread stack the recursion
        // limit alone comes too late (attack finding perfpy/01 at 1 MiB).
        relaxvm::check_native_stack().py_err(py)?;
        let call = |keep: bool| {
            if keep {
                CallCtx::detached().call_closure(&self.0, argv)
            } else {
                py.detach(|| CallCtx::detached().call_closure(&self.0, argv))
            }
        };
        // Kept as `keeps_gil_always` (gil.rs) says, else as `relaxvm::short_calls` records.
        let ret = if self.keeps_gil_always() { call(true) } else { self.1.run(argv, call) }.py_err(py)?;
        to_py(py, &ret)
    }
}

/// Tells the type of `obj` (once, through `offset_of`) that its objects hold their vectorcall
/// entry at `field`'s place, and checks every later object holds it at the same place: what
/// VMFunction (vm_function/vectorcall.rs) and Closure share.
///
/// # Safety
/// The type of `obj` is final (no subclass can move the field), `field` points into `obj`,
/// and every object of the type stores a valid `vectorcallfunc` there from its construction,
/// which is what CPython requires of a type with `Py_TPFLAGS_HAVE_VECTORCALL`.
pub(crate) unsafe fn enable_type(
    obj: &Bound<'_, PyAny>,
    field: *const u8,
    offset_of: &OnceLock<isize>,
    name: &str,
) -> PyResult<()> {
    let offset = field as isize - obj.as_ptr() as isize;
    let set = *offset_of.get_or_init(|| {
        let tp = obj.get_type().as_type_ptr();
        // SAFETY: `tp` is the type object, alive for the interpreter's life; we hold the GIL
        // (the module declares `gil_used`), so no other thread reads it while the two fields
        // change; the caller's contract makes `offset` a valid entry's place in every object.
        // `PyType_Modified` drops what CPython cached about the type.
        unsafe {
            (*tp).tp_vectorcall_offset = offset;
            (*tp).tp_flags |= ffi::Py_TPFLAGS_HAVE_VECTORCALL;
            ffi::PyType_Modified(tp);
        }
        offset
    });
    if set != offset {
        return Err(PyRuntimeError::new_err(format!(
            "internal error: {name}'s vectorcall entry moved from offset {set} to {offset}"
        )));
    }
    Ok(())
}

/// Where in a Closure object its vectorcall entry is, once the type has been told.
static OFFSET: OnceLock<isize> = OnceLock::new();

/// A new Python `rx.Closure` for `c`, callable through vectorcall.
pub fn new_closure<'py>(py: Python<'py>, c: Arc<Closure>) -> PyResult<Bound<'py, PyClosure>> {
    let f = Bound::new(py, PyClosure(c, Default::default(), call as ffi::vectorcallfunc))?;
    // SAFETY: Closure is final and this, its one constructor, stores a valid entry in field 2.
    unsafe { enable_type(f.as_any(), std::ptr::from_ref(&f.get().2).cast(), &OFFSET, "Closure")? };
    Ok(f)
}

/// One argument of a packed call: the common scalars and tensors inline
/// ([`quick_value`]), then the KV cache's handle and shapes by their exact types, then the
/// general conversion (which names argument `i` of `name` in its refusals).
#[inline]
fn convert(ob: &Bound<'_, PyAny>, i: usize, name: &str) -> PyResult<Value> {
    if let Some(v) = quick_value(ob) {
        return Ok(v);
    }
    if let Ok(o) = ob.cast_exact::<PyOpaque>() {
        return Ok(o.get().0.clone());
    }
    if let Ok(s) = ob.cast_exact::<PyShape>() {
        return Ok(Value::Shape(s.get().0.clone()));
    }
    to_value_in(ob, &|| format!("argument {i} of {name}"))
}

/// The vectorcall entry of every Closure.
///
/// # Safety
/// Called by CPython only, on an attached thread, with `callable` a Closure (only its type
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
        // SAFETY: `kwnames` is null or a tuple of str, alive for the call.
        if !kwnames.is_null() && unsafe { ffi::PyTuple_GET_SIZE(kwnames) } > 0 {
            // SAFETY: as this function's own contract.
            return unsafe { call_with_keywords(callable, args, nargsf, kwnames) };
        }
        // SAFETY: `callable` is a live Closure for the duration of the call (see above).
        let f = unsafe { Borrowed::from_ptr(py, callable).cast_unchecked::<PyClosure>() };
        let f = f.get();
        // SAFETY: `nargsf` is CPython's count, possibly with the offset flag.
        let nargs = unsafe { ffi::PyVectorcall_NARGS(nargsf) } as usize;
        let positional: &[*mut ffi::PyObject] = if nargs == 0 {
            &[]
        } else {
            // SAFETY: CPython passes `nargs` live object pointers at `args`.
            unsafe { std::slice::from_raw_parts(args, nargs) }
        };
        let mut argv = Args::new();
        for (i, p) in positional.iter().enumerate() {
            // SAFETY: each pointer is a live object CPython lends for the call.
            let a = unsafe { Borrowed::from_ptr(py, *p) };
            match convert(&a, i, f.0.name()) {
                Ok(v) => argv.push(v),
                Err(e) => return raise(py, e),
            }
        }
        match f.call_values(py, &argv) {
            Ok(ret) => ret.into_ptr(),
            Err(e) => raise(py, e),
        }
    };
    // Counted as a level of Python recursion, as `tp_call` counts it (attack finding
    // perfpy/01): CPython counts none for a C vectorcall entry, so a recursion through
    // registered functions would otherwise run the native stack out before RecursionError.
    // SAFETY: attached thread (above); the message is a NUL-terminated static string.
    if unsafe { ffi::Py_EnterRecursiveCall(c" while calling a Python object".as_ptr()) } != 0 {
        return std::ptr::null_mut();
    }
    let ret = match catch_unwind(AssertUnwindSafe(run)) {
        Ok(ret) => ret,
        Err(payload) => raise(py, pyo3::panic::PanicException::new_err(relaxvm::packed::panic_message(&*payload))),
    };
    // SAFETY: paired with the successful `Py_EnterRecursiveCall` above, on the same thread.
    unsafe { ffi::Py_LeaveRecursiveCall() };
    ret
}

/// A vectorcall with keywords, handed to the type's `tp_call` (pyo3's `__call__`, which refuses
/// them with its own message) with the tuple and dict it takes: out of line, being rare.
///
/// # Safety
/// As [`call`]'s; `kwnames` is a non-empty tuple.
#[cold]
#[inline(never)]
unsafe fn call_with_keywords(
    callable: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargsf: usize,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: the caller's contract: live arguments and names for the call. `_PyStack_AsDict`
    // is not public, so the tuple and dict are built here; `tp_call` is pyo3's slot for the
    // class (set, since the class defines `__call__`), called with new references we drop.
    unsafe {
        let nargs = ffi::PyVectorcall_NARGS(nargsf);
        let tuple = ffi::PyTuple_New(nargs);
        if tuple.is_null() {
            return std::ptr::null_mut();
        }
        for i in 0..nargs {
            let a = *args.offset(i);
            ffi::Py_INCREF(a);
            ffi::PyTuple_SET_ITEM(tuple, i, a);
        }
        let dict = ffi::PyDict_New();
        if dict.is_null() {
            ffi::Py_DECREF(tuple);
            return std::ptr::null_mut();
        }
        for j in 0..ffi::PyTuple_GET_SIZE(kwnames) {
            if ffi::PyDict_SetItem(dict, ffi::PyTuple_GET_ITEM(kwnames, j), *args.offset(nargs + j)) < 0 {
                ffi::Py_DECREF(tuple);
                ffi::Py_DECREF(dict);
                return std::ptr::null_mut();
            }
        }
        let ret = match (*ffi::Py_TYPE(callable)).tp_call {
            Some(tp_call) => tp_call(callable, tuple, dict),
            None => {
                ffi::PyErr_SetString(ffi::PyExc_TypeError, c"Closure takes no keyword arguments".as_ptr());
                std::ptr::null_mut()
            }
        };
        ffi::Py_DECREF(tuple);
        ffi::Py_DECREF(dict);
        ret
    }
}
