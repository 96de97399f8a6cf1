//! `rx.VirtualMachine`: runs an executable with the GIL released.
//!
//! The VM sits behind a mutex, so one VM shared by several Python threads serialises their
//! calls. The lock is taken after the GIL is released (a thread waiting for the VM never blocks
//! one that needs the GIL to finish a callback). A callback that re-enters the VM it was called
//! from gets a clear error instead of a deadlock.

use crate::convert::{args_to_values, push_args, to_py, to_value, values_to_tuple, Args};
use crate::device::extract_device;
use crate::errors::{from_pyerr, IntoPyResult};
use crate::executable::PyExecutable;
use crate::registry::{is_builtin, is_python_backed};
use crate::signature::{inspect_signature, inspect_untyped, param_path, reflection, typed_to_py, typed_to_value};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use relaxvm::{
    Callable, Error, Executable, FuncKind, Instruction, InstrumentAction, InterruptHandle, Signature, Value,
    VirtualMachine, VmConfig,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::Instant;

/// A number unique to the calling (attached) thread while it lives: its Python thread state.
#[inline]
fn thread_id(_py: Python<'_>) -> usize {
    // SAFETY: the thread is attached (we hold a `Python` token), so it has a thread state.
    unsafe { pyo3::ffi::PyThreadState_Get() as usize }
}

/// The thread that imported the module: CPython runs signal handlers only in the main thread,
/// which is where `import` almost always happens.
static MAIN_THREAD: std::sync::OnceLock<std::thread::ThreadId> = std::sync::OnceLock::new();

/// Records the calling thread as the one that receives signals (called at module import).
pub fn note_main_thread() {
    MAIN_THREAD.get_or_init(|| std::thread::current().id());
}

/// The VM's poll hook: on the main thread, runs Python's signal handlers (briefly taking the
/// GIL), so Ctrl-C stops a long native run with `KeyboardInterrupt`.
fn deliver_signals() -> relaxvm::Result<()> {
    if MAIN_THREAD.get() != Some(&std::thread::current().id()) {
        return Ok(());
    }
    Python::attach(|py| py.check_signals()).map_err(from_pyerr)
}

/// A VM and the thread that holds it.
pub struct Shared {
    vm: Mutex<VirtualMachine>,
    holder: AtomicUsize,
    interrupt: InterruptHandle,
}

struct Held<'a> {
    guard: MutexGuard<'a, VirtualMachine>,
    holder: &'a AtomicUsize,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.holder.store(0, Ordering::Release);
    }
}

enum TryHold<'a> {
    Held(Held<'a>),
    Busy,
    Reentrant,
}

impl Shared {
    /// Takes the VM if it is free, without blocking.
    #[inline]
    fn try_hold(&self, me: usize) -> TryHold<'_> {
        let guard = match self.vm.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => {
                return if self.holder.load(Ordering::Acquire) == me { TryHold::Reentrant } else { TryHold::Busy };
            }
        };
        self.holder.store(me, Ordering::Release);
        TryHold::Held(Held { guard, holder: &self.holder })
    }

    /// Waits for the VM. Only ever called with the GIL released: the holder may need the GIL
    /// for a callback before it can let go.
    fn hold_blocking(&self, me: usize) -> Held<'_> {
        let guard = self.vm.lock().unwrap_or_else(|p| p.into_inner());
        self.holder.store(me, Ordering::Release);
        Held { guard, holder: &self.holder }
    }

    /// Runs `f` on the VM. With `release`, the GIL is released while it runs; without, it is
    /// kept (worthwhile when `f` is short or only calls back into Python), unless the VM is busy
    /// in another thread, in which case we release it while we wait.
    #[inline]
    fn run<R: Send>(
        &self,
        py: Python<'_>,
        release: bool,
        f: impl FnOnce(&mut VirtualMachine) -> relaxvm::Result<R> + Send,
    ) -> PyResult<R> {
        let me = thread_id(py);
        if !release {
            match self.try_hold(me) {
                TryHold::Held(mut held) => return f(&mut held.guard).py_err(py),
                TryHold::Reentrant => return Err(reentrant_error()),
                TryHold::Busy => {}
            }
        }
        let r = py.detach(|| match self.try_hold(me) {
            TryHold::Held(mut held) => Ok(f(&mut held.guard)),
            TryHold::Busy => Ok(f(&mut self.hold_blocking(me).guard)),
            TryHold::Reentrant => Err(()),
        });
        match r {
            Ok(res) => res.py_err(py),
            Err(()) => Err(reentrant_error()),
        }
    }

    /// Runs `f` on the VM's tables (no bytecode runs, so no callbacks).
    fn with<R: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut VirtualMachine) -> R + Send) -> PyResult<R> {
        self.run(py, false, |vm| Ok(f(vm)))
    }
}

fn reentrant_error() -> PyErr {
    PyRuntimeError::new_err(
        "this VirtualMachine is already running on this thread (a callback re-entered it); use another VirtualMachine for nested calls",
    )
}

/// A virtual machine bound to one executable (TVM's `relax.VirtualMachine`).
#[pyclass(module = "relaxvm", name = "VirtualMachine", frozen)]
pub struct PyVirtualMachine {
    shared: Arc<Shared>,
    exe: Py<PyExecutable>,
    /// Per function-table entry: a packed function that is cheap to call with the GIL held
    /// (it calls Python, or is a constant-time builtin).
    keeps_gil: Vec<bool>,
    /// `vm[name]` results by name, so that `vm["f"](x)` in a loop resolves `f` once.
    functions: Py<PyDict>,
}

/// Builtins that take constant time (no loops over tensor data, no allocation proportional to
/// their input, no calls to other functions): running them with the GIL held costs less than
/// releasing and re-taking it.
fn is_constant_time_builtin(name: &str) -> bool {
    matches!(
        name,
        "vm.builtin.move"
            | "vm.builtin.copy"
            | "vm.builtin.null_value"
            | "vm.builtin.make_tuple"
            | "vm.builtin.tuple_getitem"
            | "vm.builtin.read_if_cond"
            | "vm.builtin.make_closure"
            | "vm.builtin.shape_of"
            | "vm.builtin.make_shape"
            | "vm.builtin.load_shape"
            | "vm.builtin.store_shape"
            | "vm.builtin.match_shape"
            | "vm.builtin.make_prim_value"
            | "vm.builtin.match_prim_value"
            | "vm.builtin.check_tensor_info"
            | "vm.builtin.check_shape_info"
            | "vm.builtin.check_prim_value_info"
            | "vm.builtin.check_func_info"
    ) || name.starts_with("vm.builtin.int.")
        || name.starts_with("vm.builtin.float.")
}

/// Whether calling bytecode function `start` should release the GIL: yes when it may reach
/// a packed function that can take long, or loops; no when it only moves values around, calls
/// constant-time builtins and calls Python (releasing and re-taking the GIL would cost more
/// than the call).
fn needs_release(exe: &Executable, keeps_gil: &[bool], start: usize) -> bool {
    /// Beyond this many instructions a call may run long enough that other threads should get
    /// the GIL (releasing it costs about as much as running a few instructions).
    const MAX_INSTRUCTIONS_WITH_GIL: usize = 256;
    let mut seen = vec![false; exe.funcs().len()];
    let mut stack = vec![start];
    let mut instructions = 0;
    while let Some(i) = stack.pop() {
        let f = &exe.funcs()[i];
        if f.kind == FuncKind::Packed {
            if !keeps_gil[i] {
                return true;
            }
            continue;
        }
        // A bytecode function reached twice may be recursion: its run time is unbounded.
        if std::mem::replace(&mut seen[i], true) {
            return true;
        }
        instructions += f.instr_range().len();
        if instructions > MAX_INSTRUCTIONS_WITH_GIL {
            return true;
        }
        for ins in &exe.instrs()[f.instr_range()] {
            match ins {
                Instruction::Call { func, .. } => stack.push(*func as usize),
                Instruction::Goto { offset } | Instruction::If { false_offset: offset, .. } if *offset <= 0 => {
                    return true
                }
                _ => {}
            }
        }
    }
    false
}

/// A bytecode (or saved) function of a VM, resolved once; call it like a Python function.
/// `inspect.signature(f)` and `help(f)` show its parameters (typed when it has a signature).
#[pyclass(module = "relaxvm", name = "VMFunction", frozen, dict)]
pub struct PyVmFunction {
    shared: Arc<Shared>,
    func: Value,
    release: bool,
    name: String,
    params: Vec<String>,
    sig: Option<Arc<Signature>>,
}

impl PyVmFunction {
    #[inline]
    fn bind_args(
        &self,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
        argv: &mut Args,
    ) -> PyResult<()> {
        if let Some(sig) = &self.sig {
            return bind_typed(&self.name, sig, args, kwargs, argv);
        }
        push_args(args, argv)?;
        if let Some(kw) = kwargs.filter(|k| !k.is_empty()) {
            bind_kwargs(&self.name, &self.params, argv, kw)?;
        }
        Ok(())
    }

    /// The text `help()` shows: the call with its parameter types and result.
    fn doc(&self) -> String {
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

/// Binds positional and keyword arguments to the parameters of `sig` and converts each for its
/// parameter's type (see [`crate::signature`]). Extra or missing positional arguments are left
/// for the VM's count check.
fn bind_typed(
    name: &str,
    sig: &Signature,
    args: &Bound<'_, PyTuple>,
    kwargs: Option<&Bound<'_, PyDict>>,
    argv: &mut Args,
) -> PyResult<()> {
    let convert = |i: usize, ob: &Bound<'_, PyAny>| match sig.params.get(i) {
        Some((p, t)) => typed_to_value(ob, t, &param_path(name, p)),
        None => to_value(ob),
    };
    let Some(kw) = kwargs.filter(|k| !k.is_empty()) else {
        for (i, a) in args.iter().enumerate() {
            argv.push(convert(i, &a)?);
        }
        return Ok(());
    };
    let mut slots: Vec<Option<Bound<'_, PyAny>>> = vec![None; sig.params.len().max(args.len())];
    for (i, a) in args.iter().enumerate() {
        slots[i] = Some(a);
    }
    for (k, v) in kw.iter() {
        let k: String = k.extract()?;
        let i = sig
            .params
            .iter()
            .position(|(p, _)| *p == k)
            .ok_or_else(|| PyTypeError::new_err(format!("{name}() got an unexpected keyword argument '{k}'")))?;
        if slots[i].is_some() {
            return Err(PyTypeError::new_err(format!("{name}() got multiple values for argument '{k}'")));
        }
        slots[i] = Some(v);
    }
    for (i, s) in slots.into_iter().enumerate() {
        match s {
            Some(ob) => argv.push(convert(i, &ob)?),
            None => {
                return Err(PyTypeError::new_err(format!(
                    "{name}() missing argument '{}' ({})",
                    sig.params[i].0, sig.params[i].1
                )))
            }
        }
    }
    Ok(())
}

/// Places keyword arguments by parameter name after the positional ones.
fn bind_kwargs(name: &str, params: &[String], argv: &mut Args, kw: &Bound<'_, PyDict>) -> PyResult<()> {
    if params.is_empty() {
        return Err(PyTypeError::new_err(format!("{name}() has no parameter names: pass its arguments by position")));
    }
    let mut slots: Vec<Option<Value>> = vec![None; params.len().max(argv.len())];
    for (i, v) in argv.drain(..).enumerate() {
        slots[i] = Some(v);
    }
    for (k, v) in kw.iter() {
        let k: String = k.extract()?;
        let i = params
            .iter()
            .position(|p| *p == k)
            .ok_or_else(|| PyTypeError::new_err(format!("{name}() got an unexpected keyword argument '{k}'")))?;
        if slots[i].is_some() {
            return Err(PyTypeError::new_err(format!("{name}() got multiple values for argument '{k}'")));
        }
        slots[i] = Some(to_value(&v)?);
    }
    for (i, s) in slots.into_iter().enumerate() {
        match s {
            Some(v) => argv.push(v),
            None => {
                return Err(PyTypeError::new_err(format!(
                    "{name}() missing argument '{}'",
                    params.get(i).map(String::as_str).unwrap_or("?")
                )))
            }
        }
    }
    Ok(())
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
        let mut argv = Args::new();
        self.bind_args(args, kwargs, &mut argv)?;
        let func = &self.func;
        let ret = self.shared.run(py, self.release, |vm| vm.invoke_closure(func, &argv))?;
        match &self.sig {
            Some(sig) => typed_to_py(py, &ret, &sig.result),
            None => to_py(py, &ret),
        }
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
    /// keep it, since releasing would cost more than the call.
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

/// Timing of repeated runs (seconds), like TVM's `BenchmarkResult`.
#[pyclass(module = "relaxvm", name = "BenchmarkResult", frozen)]
pub struct BenchmarkResult {
    /// Mean seconds per run of each repeat.
    #[pyo3(get)]
    results: Vec<f64>,
    /// The mean of `results`.
    #[pyo3(get)]
    mean: f64,
    /// The median of `results`.
    #[pyo3(get)]
    median: f64,
    /// The smallest of `results`.
    #[pyo3(get)]
    min: f64,
    /// The largest of `results`.
    #[pyo3(get)]
    max: f64,
    /// The standard deviation of `results`.
    #[pyo3(get)]
    std: f64,
}

impl BenchmarkResult {
    fn new(results: Vec<f64>) -> Self {
        let n = results.len().max(1) as f64;
        let mean = results.iter().sum::<f64>() / n;
        let mut sorted = results.clone();
        sorted.sort_by(f64::total_cmp);
        let median = match sorted.len() {
            0 => 0.0,
            l if l % 2 == 1 => sorted[l / 2],
            l => (sorted[l / 2 - 1] + sorted[l / 2]) / 2.0,
        };
        let std = (results.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / n).sqrt();
        BenchmarkResult {
            min: sorted.first().copied().unwrap_or(0.0),
            max: sorted.last().copied().unwrap_or(0.0),
            results,
            mean,
            median,
            std,
        }
    }
}

#[pymethods]
impl BenchmarkResult {
    fn __repr__(&self) -> String {
        format!(
            "BenchmarkResult(mean={:.3e}, median={:.3e}, min={:.3e}, max={:.3e}, std={:.3e}, repeats={})",
            self.mean,
            self.median,
            self.min,
            self.max,
            self.std,
            self.results.len()
        )
    }
}

/// Runs a VM function `number` times per repeat and reports the mean time of each repeat.
#[pyclass(module = "relaxvm", name = "TimeEvaluator", frozen)]
pub struct TimeEvaluator {
    func: Py<PyVmFunction>,
    number: usize,
    repeat: usize,
    min_repeat_ms: f64,
    cooldown: std::time::Duration,
    repeats_to_cooldown: usize,
}

#[pymethods]
impl TimeEvaluator {
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<BenchmarkResult> {
        let f = self.func.get();
        let mut argv = Args::new();
        f.bind_args(args, kwargs, &mut argv)?;
        let func = &f.func;
        let (number, repeat, min_ms) = (self.number, self.repeat, self.min_repeat_ms);
        let (cooldown, every) = (self.cooldown, self.repeats_to_cooldown);
        let results = f.shared.run(py, true, |vm| {
            vm.invoke_closure(func, &argv)?; // warm-up
            let mut results = Vec::with_capacity(repeat);
            let mut n = number.max(1);
            for r in 0..repeat.max(1) {
                if r > 0 && r % every == 0 && !cooldown.is_zero() {
                    std::thread::sleep(cooldown);
                }
                loop {
                    let t0 = Instant::now();
                    for _ in 0..n {
                        vm.invoke_closure(func, &argv)?;
                        // A short function never reaches the interpreter's own checks.
                        vm.poll()?;
                    }
                    let dt = t0.elapsed().as_secs_f64();
                    if dt * 1e3 >= min_ms || n >= 1 << 30 {
                        results.push(dt / n as f64);
                        break;
                    }
                    n = (n * 2).max((n as f64 * min_ms / (dt * 1e3).max(1e-6)) as usize);
                }
            }
            Ok::<_, Error>(results)
        })?;
        Ok(BenchmarkResult::new(results))
    }
}

fn instrument_hook(callback: Py<PyAny>) -> relaxvm::vm::Instrument {
    Box::new(move |call| {
        Python::attach(|py| {
            let run = || -> PyResult<InstrumentAction> {
                let mut items: Vec<Bound<'_, PyAny>> = vec![
                    to_py(py, call.func)?,
                    call.name.into_pyobject(py)?.into_any(),
                    pyo3::types::PyBool::new(py, call.before).to_owned().into_any(),
                    match call.ret {
                        Some(r) => to_py(py, r)?,
                        None => py.None().into_bound(py),
                    },
                ];
                items.extend(values_to_tuple(py, call.args)?.iter());
                let ret = callback.bind(py).call1(PyTuple::new(py, items)?)?;
                if ret.is_none() {
                    return Ok(InstrumentAction::Continue);
                }
                match ret.extract::<i64>() {
                    Ok(0) => Ok(InstrumentAction::Continue),
                    Ok(1) => Ok(InstrumentAction::Skip),
                    _ => Err(PyValueError::new_err(format!(
                        "an instrument returns None, 0 (no-op) or 1 (skip the call), got {}",
                        ret.repr()?
                    ))),
                }
            };
            run().map_err(from_pyerr)
        })
    })
}

impl PyVirtualMachine {
    /// Resolves `name` to a callable, deciding once whether its calls release the GIL.
    fn resolve(&self, py: Python<'_>, name: &str) -> PyResult<PyVmFunction> {
        let func = self.shared.with(py, |vm| vm.get_function(name))?.py_err(py)?;
        let exe = &self.exe.get().0;
        let release = match &func {
            Value::Func(c) => match &c.callable {
                Callable::Bytecode { name: n, .. } => {
                    exe.func_index(n).is_none_or(|i| needs_release(exe, &self.keeps_gil, i as usize))
                }
                Callable::Packed(_) => true,
            },
            _ => true,
        };
        let sig = self.shared.with(py, |vm| vm.signature(name).ok().flatten().cloned().map(Arc::new))?;
        let params = match &sig {
            Some(s) => s.param_names().map(str::to_string).collect(),
            None => exe.func(name).map(|f| f.param_names.clone()).unwrap_or_default(),
        };
        Ok(PyVmFunction { shared: Arc::clone(&self.shared), func, release, name: name.to_string(), params, sig })
    }
}

/// A limit given from Python: at least 1 (`None` keeps the default).
fn limit(name: &str, value: Option<i64>) -> PyResult<Option<usize>> {
    match value {
        None => Ok(None),
        Some(n) if n >= 1 => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
        Some(n) => Err(PyValueError::new_err(format!("{name} must be at least 1, found {n}"))),
    }
}

#[pymethods]
impl PyVirtualMachine {
    /// A VM for `exec` whose builtins allocate on `device` (default `rx.cpu()`). Every packed
    /// function the executable calls must be registered: missing ones raise `KeyError`. The
    /// keyword-only limits are those of `relaxvm::VmConfig` (`None` keeps its default).
    #[new]
    #[pyo3(signature = (
        exec, device = None, memory_cfg = None, profile = false, *,
        max_call_depth = None, max_reentry = None, step_budget = None, max_stack_registers = None
    ))]
    #[allow(clippy::too_many_arguments)] // Python keyword arguments, each optional
    fn new(
        py: Python<'_>,
        exec: Py<PyExecutable>,
        device: Option<&Bound<'_, PyAny>>,
        memory_cfg: Option<&Bound<'_, PyAny>>,
        profile: bool,
        max_call_depth: Option<i64>,
        max_reentry: Option<i64>,
        step_budget: Option<i64>,
        max_stack_registers: Option<i64>,
    ) -> PyResult<Self> {
        let _ = (memory_cfg, profile);
        let defaults = VmConfig::default();
        let config = VmConfig {
            max_call_depth: limit("max_call_depth", max_call_depth)?.unwrap_or(defaults.max_call_depth),
            max_reentry: limit("max_reentry", max_reentry)?.unwrap_or(defaults.max_reentry),
            step_budget: limit("step_budget", step_budget)?.map(|n| n as u64),
            max_stack_registers: limit("max_stack_registers", max_stack_registers)?
                .unwrap_or(defaults.max_stack_registers),
        };
        let device = match device {
            Some(d) if d.is_instance_of::<PyList>() || d.is_instance_of::<PyTuple>() => {
                let first = d.get_item(0)?;
                extract_device(Some(&first))?
            }
            other => extract_device(other)?,
        };
        let exe = Arc::clone(&exec.get().0);
        let keeps_gil = exe
            .funcs()
            .iter()
            .map(|f| {
                f.kind == FuncKind::Packed
                    && (is_python_backed(&f.name) || (is_constant_time_builtin(&f.name) && is_builtin(&f.name)))
            })
            .collect();
        let mut vm = VirtualMachine::new(exe).py_err(py)?;
        *vm.config_mut() = config;
        vm.set_device(device);
        vm.set_poll_hook(Some(Arc::new(deliver_signals)));
        let interrupt = vm.interrupt_handle();
        let shared = Arc::new(Shared { vm: Mutex::new(vm), holder: AtomicUsize::new(0), interrupt });
        Ok(PyVirtualMachine { shared, exe: exec, keeps_gil, functions: PyDict::new(py).unbind() })
    }

    /// The function `name` (bytecode or saved) as a callable taking positional arguments, or
    /// keyword arguments by parameter name. Unknown names raise `KeyError`.
    fn __getitem__<'py>(&self, key: &Bound<'py, PyString>) -> PyResult<Bound<'py, PyVmFunction>> {
        let py = key.py();
        let cache = self.functions.bind(py);
        if let Some(f) = cache.get_item(key)? {
            return Ok(f.cast_into::<PyVmFunction>()?);
        }
        let f = Bound::new(py, self.resolve(py, &key.to_cow()?)?)?;
        let doc = f.get().doc();
        f.as_any().setattr(pyo3::intern!(py, "__doc__"), doc)?;
        cache.set_item(key, &f)?;
        Ok(f)
    }
    /// The IREE reflection record of function `name`'s signature, `{"a": [...], "r": [...]}`
    /// (one entry per argument, and the result), or `None` when it has none. Unknown names
    /// raise `KeyError`.
    fn signature<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
        let sig = self.shared.with(py, |vm| vm.signature(name).map(|s| s.cloned()))?.py_err(py)?;
        sig.map(|s| reflection(py, &s)).transpose()
    }

    /// The executable this VM runs.
    #[getter]
    fn executable(&self, py: Python<'_>) -> Py<PyExecutable> {
        self.exe.clone_ref(py)
    }

    /// Calls a closure returned by the VM (or any function value) with `args` followed by its
    /// captured values.
    #[pyo3(signature = (closure, *args))]
    fn invoke_closure<'py>(
        &self,
        py: Python<'py>,
        closure: &Bound<'py, PyAny>,
        args: &Bound<'py, PyTuple>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let f = to_value(closure)?;
        if !matches!(f, Value::Func(_)) {
            return Err(PyTypeError::new_err(format!(
                "invoke_closure expects a closure, got {}",
                closure.get_type().name()?
            )));
        }
        let argv = args_to_values(args)?;
        let ret = self.shared.run(py, true, |vm| vm.invoke_closure(&f, &argv))?;
        to_py(py, &ret)
    }

    /// Saves `func_name` with `args` bound as `saved_name`, callable with no arguments through
    /// `vm[saved_name]()`; with `include_return=False` it returns `None`.
    #[pyo3(signature = (func_name, saved_name, *args, include_return = true))]
    fn save_function(
        &self,
        py: Python<'_>,
        func_name: &str,
        saved_name: &str,
        args: &Bound<'_, PyTuple>,
        include_return: bool,
    ) -> PyResult<()> {
        let argv = args_to_values(args)?.into_vec();
        self.shared.with(py, |vm| vm.save_function(func_name, saved_name, argv, include_return))?.py_err(py)?;
        // A saved name may shadow a function resolved before.
        self.functions.bind(py).del_item(saved_name).or_else(|e| {
            if e.is_instance_of::<pyo3::exceptions::PyKeyError>(py) {
                Ok(())
            } else {
                Err(e)
            }
        })
    }

    /// Sets the inputs of a later `invoke_stateful(func_name)`; keyword arguments go by
    /// parameter name.
    #[pyo3(signature = (func_name, *args, **kwargs))]
    fn set_input(
        &self,
        py: Python<'_>,
        func_name: &str,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        let exe = &self.exe.get().0;
        let sig = exe.func(func_name).filter(|f| f.kind == FuncKind::Bytecode).and_then(|f| f.signature.as_ref());
        let mut argv = Args::new();
        if let Some(sig) = sig {
            bind_typed(func_name, sig, args, kwargs, &mut argv)?;
        } else {
            push_args(args, &mut argv)?;
            if let Some(kw) = kwargs.filter(|k| !k.is_empty()) {
                let params = exe.func(func_name).map(|f| f.param_names.clone()).unwrap_or_default();
                bind_kwargs(func_name, &params, &mut argv, kw)?;
            }
        }
        self.shared.with(py, |vm| vm.set_input(func_name, argv.into_vec()))?.py_err(py)
    }

    /// Runs `func_name` on the inputs given to `set_input`, keeping the result for
    /// `get_outputs`.
    fn invoke_stateful(&self, py: Python<'_>, func_name: &str) -> PyResult<()> {
        self.shared.run(py, true, |vm| vm.invoke_stateful(func_name))
    }

    /// The result of the last `invoke_stateful(func_name)`.
    fn get_outputs<'py>(&self, py: Python<'py>, func_name: &str) -> PyResult<Bound<'py, PyAny>> {
        let v = self.shared.with(py, |vm| vm.get_outputs(func_name))?.py_err(py)?;
        to_py(py, &v)
    }

    /// Installs `callback(func, func_symbol, before_run, ret_value, *args)`, called before and
    /// after every `call` instruction. Returning `None`/`0` continues; returning `1` before a
    /// call skips it (its destination receives `None`). `None` removes the instrument.
    fn set_instrument(&self, py: Python<'_>, callback: &Bound<'_, PyAny>) -> PyResult<()> {
        let hook = if callback.is_none() {
            None
        } else {
            if !callback.is_callable() {
                return Err(PyTypeError::new_err("set_instrument expects a callable or None"));
            }
            Some(instrument_hook(callback.clone().unbind()))
        };
        self.shared.with(py, |vm| vm.set_instrument(hook))
    }

    /// A callable that runs `func_name` `number` times per repeat, `repeat` times, and returns
    /// a `BenchmarkResult` (seconds per run: `mean`, `median`, `results`...). Each repeat runs
    /// at least `min_repeat_ms` milliseconds; every `repeats_to_cooldown` repeats it sleeps
    /// `cooldown_interval_ms`. `dev` must be a CPU device (or None); `f_preproc` must be empty
    /// (TVM's cache-flushing preprocessors do not exist here). Ctrl-C and `interrupt()` stop it.
    #[pyo3(signature = (func_name, dev = None, number = 10, repeat = 1, min_repeat_ms = 0.0, cooldown_interval_ms = 0.0, repeats_to_cooldown = 1, f_preproc = ""))]
    #[allow(clippy::too_many_arguments)]
    fn time_evaluator(
        &self,
        py: Python<'_>,
        func_name: &str,
        dev: Option<&Bound<'_, PyAny>>,
        number: usize,
        repeat: usize,
        min_repeat_ms: f64,
        cooldown_interval_ms: f64,
        repeats_to_cooldown: usize,
        f_preproc: &str,
    ) -> PyResult<TimeEvaluator> {
        if number == 0 || repeat == 0 || repeats_to_cooldown == 0 {
            return Err(PyValueError::new_err("number, repeat and repeats_to_cooldown must be at least 1"));
        }
        // An hour is far beyond any benchmark; 1e300 ms would overflow the run count.
        for (what, ms) in [("min_repeat_ms", min_repeat_ms), ("cooldown_interval_ms", cooldown_interval_ms)] {
            if !(0.0..=3.6e6).contains(&ms) {
                return Err(PyValueError::new_err(format!(
                    "{what} must be a number of milliseconds from 0 to 3600000 (one hour), got {ms}"
                )));
            }
        }
        if !f_preproc.is_empty() {
            return Err(PyValueError::new_err(format!(
                "f_preproc={f_preproc:?} is not supported: relaxvm runs no preprocessing function between repeats"
            )));
        }
        if let Some(d) = dev.filter(|d| !d.is_none()) {
            let device = d.extract::<PyRef<'_, crate::device::PyDevice>>()?.0;
            if device.device_type != relaxvm::DeviceType::Cpu {
                return Err(PyValueError::new_err(format!("cannot time on {device}: this VM runs on the CPU")));
            }
        }
        let func = Py::new(py, self.resolve(py, func_name)?)?;
        let cooldown = std::time::Duration::from_secs_f64(cooldown_interval_ms / 1e3);
        Ok(TimeEvaluator { func, number, repeat, min_repeat_ms, cooldown, repeats_to_cooldown })
    }

    /// Stops the running call (from another thread) with a `VMError` at its next backward jump
    /// or call.
    fn interrupt(&self) {
        self.shared.interrupt.interrupt();
    }

    fn __repr__(&self) -> String {
        format!("<relaxvm.VirtualMachine functions={:?}>", self.exe.get().0.bytecode_function_names())
    }
}
