//! `vm["name"]`: a VM function resolved once, called like a Python function.

pub(crate) mod vectorcall;

use crate::call_args::{assign_args, convert_arg, Params};
use crate::convert::{held_value, quick_value, to_py, Args};
use crate::signature::{inspect_signature, inspect_untyped, typed_to_py};
use crate::tensor::PyTensor;
use crate::vm_lock::VmLock;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use pyo3::Borrowed;
use relaxvm::{Entry, Signature, Value, VirtualMachine};
use std::sync::Arc;

/// A bytecode (or saved) function of a VM, resolved once; call it like a Python function.
/// `inspect.signature(f)` and `help(f)` show its parameters (typed when it has a signature).
#[pyclass(module = "relaxvm", name = "VMFunction", frozen, dict)]
pub struct PyVmFunction {
    pub(crate) shared: Arc<VmLock>,
    pub(crate) func: Value,
    /// `func` resolved once, when it can be (see [`relaxvm::Entry`]).
    pub(crate) entry: Option<Entry>,
    /// Whether calls release the GIL (see [`crate::gil`]), unless `short` says the last one
    /// with the same argument shapes ran short.
    pub(crate) release: bool,
    /// How long the last call took, for functions that `release`.
    pub(crate) short: relaxvm::short_calls::ShortRecord,
    pub(crate) name: String,
    pub(crate) params: Vec<String>,
    pub(crate) sig: Option<Arc<Signature>>,
    /// The entry CPython's vectorcall protocol calls (see [`vectorcall`]).
    pub(crate) vectorcall: vectorcall::VectorcallFn,
    /// The argument count of a call that may take the direct path of
    /// [`call_positional`](Self::call_positional) (`entry` resolved, no signature, the GIL
    /// kept), `usize::MAX` when none may: the three conditions folded into one comparison.
    pub(crate) direct_arity: usize,
}

/// Sets `e` as the current Python error and returns null, as a C entry point reports it.
#[cold]
#[inline(never)]
pub fn raise(py: Python<'_>, e: PyErr) -> *mut ffi::PyObject {
    e.restore(py);
    std::ptr::null_mut()
}

/// The Python object for a call's tensor result, the tensor moved into it rather than cloned
/// and then dropped with `ret`: two atomic reference-count updates less per call (a signature
/// converts a tensor result as `to_py` does: only tuples follow their declared type). Out of
/// line, so that the scalar results' path compiles as it did without it.
#[inline(never)]
fn tensor_result(py: Python<'_>, ret: Value) -> PyResult<Bound<'_, PyAny>> {
    let mut ret = std::mem::ManuallyDrop::new(ret);
    match &*ret {
        Value::Tensor(t) => {
            // SAFETY: `ret` is ours and never dropped (`ManuallyDrop`, not taken out of), so
            // the tensor it holds is read out exactly once and owned by `wrap` from here.
            // `Value`'s drop does nothing for a tensor beyond dropping it, which `wrap` now
            // does (or its new object does, later).
            let t = unsafe { std::ptr::read(t) };
            PyTensor::wrap(py, t).map(Bound::into_any)
        }
        other => {
            let out = to_py(py, other);
            // SAFETY: `ret` was not read out of (not a tensor) and is dropped once, here.
            unsafe { std::mem::ManuallyDrop::drop(&mut ret) };
            out
        }
    }
}

impl PyVmFunction {
    /// Assigns a call's arguments to the parameters (see [`crate::call_args::assign_args`]).
    #[inline]
    pub fn bind_args(
        &self,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
        argv: &mut Args,
    ) -> PyResult<()> {
        assign_args(&self.name, self.params(), args, kwargs, argv)
    }

    /// [`Self::direct_arity`] of a function with these parts.
    pub fn direct_arity(entry: Option<&Entry>, sig: Option<&Signature>, release: bool) -> usize {
        match entry {
            Some(e) if sig.is_none() && !release => e.num_args(),
            _ => usize::MAX,
        }
    }

    /// Calls it with positional arguments only (the vectorcall path: no tuple is built): a new
    /// reference to the result, or null with the Python error set. The outcome travels as one
    /// pointer: a `PyResult` is 72 bytes, and moving it out of here stalled every call (its
    /// halves were stored apart and read back as one, a store-forwarding stall).
    ///
    /// The arguments are CPython's own array of them (each read by its index, straight from
    /// the array, as the VM asks for it).
    ///
    /// # Safety
    /// Each pointer of `args` is a live Python object (never null) for the whole call.
    #[inline]
    pub unsafe fn call_positional(&self, py: Python<'_>, args: &[*mut ffi::PyObject]) -> *mut ffi::PyObject {
        // SAFETY: `p` is one of `args`, live objects for the call (the contract); telling the
        // compiler it is not null spares each argument `from_ptr`'s test.
        let borrow = |p: &*mut ffi::PyObject| unsafe {
            std::hint::assert_unchecked(!p.is_null());
            Borrowed::from_ptr(py, *p)
        };
        let n = args.len();
        // With the right count (a wrong one is reported as the general path reports it, after
        // converting the arguments), the common arguments go straight into the VM's registers,
        // with no list of them in between; any other declines the call to the general path.
        if let (true, Some(e)) = (n == self.direct_arity, &self.entry) {
            let call = |vm: &mut VirtualMachine, on| vm.call_entry_on(on, e, n, |i| held_value(&borrow(&args[i])));
            match self.shared.run_attached_on(py, call) {
                Ok(Some(ret)) => return self.result_ptr(py, ret),
                Ok(None) => {}
                Err(e) => return raise(py, e),
            }
        }
        self.call_converting(py, args.iter().map(borrow))
    }

    /// [`Self::call_positional`] for the calls its direct path declines: the arguments are
    /// converted into a list first. Out of line, so that the direct path stays small enough
    /// for the compiler to inline what it calls (the registers' reserve was left out of line
    /// once it grew, about 40 instructions more per call).
    #[inline(never)]
    fn call_converting<'a, 'py: 'a>(
        &self,
        py: Python<'py>,
        args: impl ExactSizeIterator<Item = Borrowed<'a, 'py, PyAny>>,
    ) -> *mut ffi::PyObject {
        let mut argv = Args::new();
        let params = self.params();
        for (i, a) in args.enumerate() {
            let quick = if self.sig.is_none() { quick_value(&a) } else { None };
            argv.push(match quick {
                Some(v) => v,
                None => match convert_arg(&self.name, params, i, &a) {
                    Ok(v) => v,
                    Err(e) => return raise(py, e),
                },
            });
        }
        let ret = match self.run(py, &argv) {
            Ok(out) => out.into_ptr(),
            Err(e) => raise(py, e),
        };
        // Arguments that own nothing (ints, floats, ...) in the inline buffer need no drop: the
        // drop glue would visit each through an out-of-line call.
        if !argv.spilled() && argv.iter().all(|v| !v.owns_heap()) {
            std::mem::forget(argv);
        }
        ret
    }

    /// Calls it with a tuple of positional arguments and a dict of keyword arguments.
    pub fn call_bound<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut argv = Args::new();
        self.bind_args(args, kwargs, &mut argv)?;
        self.run(py, &argv)
    }

    /// Runs it on bound arguments and converts the result.
    #[inline]
    fn run<'py>(&self, py: Python<'py>, argv: &[Value]) -> PyResult<Bound<'py, PyAny>> {
        let ret = if self.release {
            let run = |keep| {
                if keep {
                    crate::kept_call::kept(|| self.run_vm(py, false, argv))
                } else {
                    (self.run_vm(py, true, argv), false)
                }
            };
            self.short.run_reporting(argv, run)?
        } else {
            self.run_vm(py, false, argv)?
        };
        self.result_to_py(py, ret)
    }

    /// Runs it on the VM, releasing the GIL meanwhile with `release`.
    #[inline]
    fn run_vm(&self, py: Python<'_>, release: bool, argv: &[Value]) -> PyResult<Value> {
        match &self.entry {
            // Kept attached, the thread named once: for the lock and the VM's stack limit.
            Some(e) if !release => self.shared.run_attached_on(py, |vm, on| vm.call_entry_as(on, e, argv)),
            Some(e) => self.shared.run(py, release, |vm| vm.call_entry(e, argv)),
            None => self.shared.run(py, release, |vm| vm.invoke_closure(&self.func, argv)),
        }
    }

    /// [`Self::result_to_py`] as a new reference, or null with the Python error set. An int
    /// (the commonest scalar result) goes straight to CPython's constructor, which is what
    /// `to_py` and a signature's conversion (a tuple's slots aside) make of it too.
    #[inline(always)]
    fn result_ptr(&self, py: Python<'_>, ret: Value) -> *mut ffi::PyObject {
        if let Value::Int(i) = ret {
            // An int owns nothing: forgotten, not dropped (see `call_positional`).
            std::mem::forget(ret);
            // SAFETY: the thread is attached (`py`); a new reference, or null with a
            // MemoryError set, which is how this entry reports an error.
            return unsafe { crate::small_int::to_py(i) };
        }
        // A tensor goes straight to its object too, as `result_to_py` sends it (one call
        // less per tensor call); inline when Python holds that object already.
        if let Value::Tensor(t) = &ret {
            if let Some(known) = PyTensor::live_object(py, t) {
                return known.into_ptr();
            }
            return tensor_result(py, ret).map_or_else(|e| raise(py, e), Bound::into_ptr);
        }
        self.result_to_py(py, ret).map_or_else(|e| raise(py, e), Bound::into_ptr)
    }

    /// The Python object for a call's result.
    #[inline]
    fn result_to_py<'py>(&self, py: Python<'py>, ret: Value) -> PyResult<Bound<'py, PyAny>> {
        if matches!(ret, Value::Tensor(_)) {
            return tensor_result(py, ret);
        }
        let out = match &self.sig {
            Some(sig) => typed_to_py(py, &ret, &sig.result),
            None => to_py(py, &ret),
        };
        // A result that owns nothing needs no drop (see `call_positional`).
        if !ret.owns_heap() {
            std::mem::forget(ret);
        }
        out
    }

    fn params(&self) -> Params<'_> {
        match &self.sig {
            Some(sig) => Params::Typed(sig),
            None => Params::Named(&self.params),
        }
    }

    /// The VM that runs it.
    pub fn shared(&self) -> &VmLock {
        &self.shared
    }

    /// The function value the VM calls.
    pub fn value(&self) -> &Value {
        &self.func
    }

    /// The text `help()` shows: the call with its parameter types and result.
    pub fn doc(&self) -> String {
        let head = match &self.sig {
            Some(sig) => format!("{}{sig}", self.name),
            None if !self.params.is_empty() => format!("{}({})", self.name, self.params.join(", ")),
            None => format!("{}(*args)", self.name),
        };
        let body = if self.sig.is_some() {
            "A relaxvm function. Arguments are checked against the signature (types, dtypes, ranks, \
             static and symbolic dimensions) before any instruction runs; lists given for tensors \
             become tensors of the declared dtype, dicts given for dict<{...}> parameters are \
             passed by key."
        } else {
            "A relaxvm function (without a signature: arguments are not checked at the call)."
        };
        format!("{head}\n\n{body}")
    }
}

#[pymethods]
impl PyVmFunction {
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.call_bound(py, args, kwargs)
    }

    /// Itself: a VM function stored on a class is not bound to instances.
    fn __get__<'py>(
        slf: Bound<'py, Self>,
        _instance: Option<&Bound<'py, PyAny>>,
        _owner: Option<&Bound<'py, PyAny>>,
    ) -> Bound<'py, Self> {
        slf
    }

    /// The function's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The function's name (for `help()` and `inspect`).
    #[getter]
    fn __name__(&self) -> &str {
        &self.name
    }

    /// The parameters for `inspect.signature`, annotated with their types' text forms when the
    /// function has a signature.
    #[getter]
    fn __signature__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match &self.sig {
            Some(sig) => inspect_signature(py, sig),
            None if !self.params.is_empty() => inspect_untyped(py, &self.params),
            None => {
                let inspect = py.import("inspect")?;
                let parameter = inspect.getattr("Parameter")?;
                let args = parameter.call1(("args", parameter.getattr("VAR_POSITIONAL")?))?;
                inspect.getattr("Signature")?.call1(([args],))
            }
        }
    }

    /// The signature's text form, e.g. `(x: tensor<[n], f32>) -> f32` (`None` without one).
    #[getter]
    fn signature_text(&self) -> Option<String> {
        self.sig.as_ref().map(|s| s.to_string())
    }

    /// The parameter names (empty when the function was built without them).
    #[getter]
    fn param_names(&self) -> Vec<String> {
        self.params.clone()
    }

    /// Whether calls release the GIL while they run. Functions that may run long (loops,
    /// recursion, more than a few hundred instructions, native builtins that are not
    /// constant-time) release it; short ones that only call constant-time builtins and Python
    /// keep it, since releasing would cost more than the call. A function that releases it
    /// still keeps it for a call whose last call with the same argument shapes and scalars
    /// ran short (under 20 µs); see the GIL paragraph of docs/architecture.md.
    #[getter]
    fn releases_gil(&self) -> bool {
        self.release
    }

    fn __repr__(&self) -> String {
        match &self.sig {
            Some(sig) => format!("<relaxvm.VMFunction {:?} {sig}>", self.name),
            None => format!("<relaxvm.VMFunction {:?}>", self.name),
        }
    }
}
