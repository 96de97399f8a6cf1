//! `rx.VirtualMachine`: runs an executable with the GIL released when a call may take long
//! (see [`crate::gil`]), behind a lock shared with the functions it hands out
//! ([`crate::vm_lock`]).

use crate::call_args::{assign_args, Params};
use crate::convert::{args_to_values, to_py, to_value, Args};
use crate::device::extract_device;
use crate::errors::{from_pyerr, IntoPyResult};
use crate::executable::PyExecutable;
use crate::gil;
use crate::int_arg::extract_opt;
use crate::profile::PyProfileReport;
use crate::signals::deliver_signals;
use crate::signature::reflection;
use crate::timing::{TimeEvaluator, Timed};
use crate::trace::PyTrace;
use crate::vm_function::PyVmFunction;
use crate::vm_lock::VmLock;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use relaxvm::memory_cfg::{AllocatorName, MemoryCfg, MemoryCfgError};
use relaxvm::tvm_inputs::numbers_as_tensors;
use relaxvm::{Allocator, Callable, InstrumentAction, Limits, Value, VirtualMachine};
use std::sync::Arc;

const _: () = assert!(relaxvm::trace::DEFAULT_MAX_BYTES == 268435456, "VirtualMachine.trace's default");

/// A virtual machine bound to one executable (TVM's `relax.VirtualMachine`).
#[pyclass(module = "relaxvm", name = "VirtualMachine", frozen)]
pub struct PyVirtualMachine {
    shared: Arc<VmLock>,
    exe: Py<PyExecutable>,
    /// Per function-table entry: a packed function that is cheap to call with the GIL held
    /// (it calls Python, or is a constant-time builtin).
    gil_costs: Vec<relaxvm::long_calls::CalleeCost>,
    /// `vm[name]` results by name, so that `vm["f"](x)` in a loop resolves `f` once.
    functions: Py<PyDict>,
    /// What `memory_cfg` chose at construction (fixed since): read without the VM's lock.
    allocator: Allocator,
}

fn instrument_hook(callback: Py<PyAny>) -> relaxvm::vm::Instrument {
    Box::new(move |call| {
        // TVM calls an instrument after a call only when it returned: the event after a
        // call that raised is not passed on.
        if !call.before && call.ret.is_none() {
            return Ok(InstrumentAction::Continue);
        }
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
                // TVM hands an instrument dtype arguments as strings (tvm_ffi's dtype is a str).
                for a in call.args {
                    items.push(match a {
                        Value::DType(d) => PyString::new(py, &d.to_string()).into_any(),
                        other => to_py(py, other)?,
                    });
                }
                let ret = callback.bind(py).call1(PyTuple::new(py, items)?)?;
                if ret.is_none() {
                    return Ok(InstrumentAction::Continue);
                }
                // int probe: anything but 0 or 1 is refused below, naming the value.
                match ret.extract::<i64>() {
                    Ok(0) => Ok(InstrumentAction::Continue),
                    Ok(1) => Ok(InstrumentAction::Skip),
                    _ => Err(PyValueError::new_err(format!(
                        "an instrument returns None, VMInstrumentReturnKind.NO_OP (0) or SKIP_RUN (1), got {}",
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
                    exe.func_index(n).is_none_or(|i| gil::needs_release(exe, &self.gil_costs, i as usize))
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
        let entry = self.shared.with(py, |vm| vm.entry(&func))?;
        let direct_arity = PyVmFunction::direct_arity(entry.as_ref(), sig.as_deref(), release);
        Ok(PyVmFunction {
            direct_arity,
            shared: Arc::clone(&self.shared),
            func,
            entry,
            release,
            short: Default::default(),
            name: name.to_string(),
            params,
            sig,
            vectorcall: crate::vectorcall::call,
        })
    }

    /// `name` as a Python callable (`vm[name]`), called through vectorcall.
    fn function_object<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyVmFunction>> {
        let f = Bound::new(py, self.resolve(py, name)?)?;
        crate::vectorcall::enable(&f)?;
        Ok(f)
    }

    /// The arguments of a call to `name`, assigned as `vm[name](*args, **kwargs)` assigns them.
    fn call_args(
        &self,
        py: Python<'_>,
        name: &str,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Args> {
        let mut argv = Args::new();
        self.resolve(py, name)?.bind_args(args, kwargs, &mut argv)?;
        Ok(argv)
    }
}

/// A limit given from Python: at least 1 (`None` keeps the default).
fn limit(name: &str, value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<usize>> {
    match extract_opt::<i64>(value, &|| format!("VirtualMachine {name}"))? {
        None => Ok(None),
        Some(n) if n >= 1 => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
        Some(n) => Err(PyValueError::new_err(format!("{name} must be at least 1, found {n}"))),
    }
}

/// `memory_cfg` as the Python object gave it, in the Rust form whose rules
/// ([`MemoryCfg::allocator_for`]) and errors are `relaxvm::memory_cfg`'s: a string, a dict
/// from devices to names or kind numbers (what is neither is kept as its `repr`, for the
/// error), or another type (kept as its type's name).
fn memory_cfg(cfg: Option<&Bound<'_, PyAny>>) -> PyResult<MemoryCfg> {
    let Some(cfg) = cfg.filter(|c| !c.is_none()) else { return Ok(MemoryCfg::Default) };
    let name = |v: &Bound<'_, PyAny>| -> PyResult<AllocatorName> {
        Ok(match v.extract::<String>() {
            Ok(s) => AllocatorName::Name(s),
            // int probe: a kind number, else kept as its repr for the allocator error.
            Err(_) => match v.extract::<i64>() {
                Ok(k) => AllocatorName::Kind(k),
                Err(_) => AllocatorName::Other(v.repr()?.to_string()),
            },
        })
    };
    if cfg.is_instance_of::<PyString>() {
        return Ok(MemoryCfg::All(name(cfg)?));
    }
    let Ok(dict) = cfg.cast::<PyDict>() else {
        return Ok(MemoryCfg::Unsupported(cfg.get_type().name()?.to_string()));
    };
    // A snapshot of the items: reading a kind or a device can run Python code (`__index__`,
    // `__repr__`) that changes the dict, which a live iteration of it would not survive.
    let mut entries = Vec::with_capacity(dict.len());
    for item in dict.items().iter() {
        let (key, value): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
        entries.push((extract_device(Some(&key))?, name(&value)?));
    }
    Ok(MemoryCfg::PerDevice(entries))
}

/// [`MemoryCfg::allocator_for`] with its errors as TVM's Python exceptions.
fn allocator_for(cfg: &MemoryCfg, device: relaxvm::Device) -> PyResult<Allocator> {
    cfg.allocator_for(device).map_err(|e| match e {
        MemoryCfgError::NotStringOrDict(_) => PyTypeError::new_err(e.to_string()),
        _ => PyValueError::new_err(e.to_string()),
    })
}

#[pymethods]
impl PyVirtualMachine {
    /// TVM's naive allocator kind, for `memory_cfg` dicts.
    #[classattr]
    const NAIVE_ALLOCATOR: i64 = relaxvm::memory_cfg::NAIVE_ALLOCATOR;

    /// TVM's pooled allocator kind, for `memory_cfg` dicts.
    #[classattr]
    const POOLED_ALLOCATOR: i64 = relaxvm::memory_cfg::POOLED_ALLOCATOR;

    /// The allocator `memory_cfg` chose for the VM's device: `"pooled"` (TVM's default: each
    /// allocation site hands out its last block again once nothing holds it) or `"naive"`.
    #[getter]
    fn memory_allocator(&self) -> &'static str {
        relaxvm::memory_cfg::allocator_name(self.allocator)
    }

    /// A VM for `exec` whose builtins allocate on `device` (default `rx.cpu()`). Every packed
    /// function the executable calls must be registered: missing ones raise `KeyError`. The
    /// keyword-only limits are those of `relaxvm::Limits` (`None` keeps its default).
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
        max_call_depth: Option<&Bound<'_, PyAny>>,
        max_reentry: Option<&Bound<'_, PyAny>>,
        step_budget: Option<&Bound<'_, PyAny>>,
        max_stack_registers: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        // Checked first, as TVM does (the VM's device is known below).
        let memory_cfg = self::memory_cfg(memory_cfg)?;
        allocator_for(&memory_cfg, relaxvm::Device::cpu(0))?;
        let defaults = Limits::default();
        let limits = Limits {
            max_call_depth: limit("max_call_depth", max_call_depth)?.unwrap_or(defaults.max_call_depth),
            max_reentry: limit("max_reentry", max_reentry)?.unwrap_or(defaults.max_reentry),
            step_budget: limit("step_budget", step_budget)?.map(|n| n as u64),
            max_stack_registers: limit("max_stack_registers", max_stack_registers)?
                .unwrap_or(defaults.max_stack_registers),
        };
        let device = match device {
            Some(d) if d.is_instance_of::<PyList>() || d.is_instance_of::<PyTuple>() => {
                // TVM numbers its virtual devices by position in the list; relaxvm's VM has one
                // device, so a longer list is refused rather than cut to its first device.
                let n = d.len()?;
                if n != 1 {
                    return Err(PyValueError::new_err(format!(
                        "relaxvm runs a VM on one device, but {n} were given ({}): pass one CPU device \
                         (programs placing tensors on several virtual devices are not supported)",
                        d.repr()?
                    )));
                }
                extract_device(Some(&d.get_item(0)?))?
            }
            other => extract_device(other)?,
        };
        let allocator = allocator_for(&memory_cfg, device)?;
        let exe = Arc::clone(&exec.get().0);
        let gil_costs = gil::gil_costs(&exe);
        let mut vm = VirtualMachine::new(exe).py_err(py)?;
        *vm.limits_mut() = limits;
        vm.set_profiling_enabled(profile);
        vm.set_device(device);
        vm.set_allocator(allocator);
        vm.set_poll_hook(Some(Arc::new(deliver_signals)));
        let shared = Arc::new(VmLock::new(vm));
        Ok(PyVirtualMachine { shared, exe: exec, gil_costs, functions: PyDict::new(py).unbind(), allocator })
    }

    /// The function `name` (bytecode or saved) as a callable taking positional arguments, or
    /// keyword arguments by parameter name. Unknown names raise `KeyError`.
    fn __getitem__<'py>(&self, key: &Bound<'py, PyString>) -> PyResult<Bound<'py, PyVmFunction>> {
        let py = key.py();
        let cache = self.functions.bind(py);
        if let Some(f) = cache.get_item(key)? {
            return Ok(f.cast_into::<PyVmFunction>()?);
        }
        let f = self.function_object(py, &key.to_cow()?)?;
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
        // A function object of this very VM (`vm["main"]`) is its function value: converted as
        // a Python callable it would call back into this VM, which `invoke_closure` holds.
        let own = closure
            .cast::<crate::vm_function::PyVmFunction>()
            .ok()
            .filter(|f| Arc::ptr_eq(&f.get().shared, &self.shared))
            .map(|f| f.get().value().clone());
        let f = match own {
            Some(v) => v,
            None => to_value(closure)?,
        };
        let Value::Func(c) = &f else {
            return Err(PyTypeError::new_err(format!(
                "invoke_closure expects a closure, got {}",
                closure.get_type().name()?
            )));
        };
        let argv = args_to_values(args, c.name())?;
        let ret = self.shared.run(py, true, |vm| vm.invoke_closure(&f, &argv))?;
        to_py(py, &ret)
    }

    /// Saves `func_name` with `args` bound as `saved_name`, callable with no arguments through
    /// `vm[saved_name]()`; with `include_return=False` it returns `None`. Keyword arguments go
    /// by parameter name, as in a call.
    #[pyo3(signature = (func_name, saved_name, *args, include_return = true, **kwargs))]
    fn save_function(
        &self,
        py: Python<'_>,
        func_name: &str,
        saved_name: &str,
        args: &Bound<'_, PyTuple>,
        include_return: bool,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        let argv = match kwargs.filter(|k| !k.is_empty()) {
            None => args_to_values(args, func_name)?.into_vec(),
            Some(_) => self.call_args(py, func_name, args, kwargs)?.into_vec(),
        };
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
    /// parameter name. As TVM's `set_input` does, Python numbers become 0-d tensors (int and
    /// bool as int32, float as float32), also inside tuples — except where a signature declares
    /// a scalar (a parameter, or an item of a tuple, list or dict parameter).
    #[pyo3(signature = (func_name, *args, **kwargs))]
    fn set_input(
        &self,
        py: Python<'_>,
        func_name: &str,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        let exe = &self.exe.get().0;
        let sig = relaxvm::tvm_inputs::declared_signature(exe, func_name);
        let mut argv = Args::new();
        let names = exe.func(func_name).map(|f| f.param_names.as_slice()).unwrap_or_default();
        let params = match sig {
            Some(sig) => Params::Typed(sig),
            None => Params::Named(names),
        };
        assign_args(func_name, params, args, kwargs, &mut argv)?;
        let inputs = numbers_as_tensors(argv.into_vec(), sig)
            .map_err(|e| pyo3::exceptions::PyOverflowError::new_err(e.to_string()))?;
        self.shared.with(py, |vm| vm.set_input(func_name, inputs))?.py_err(py)
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
        // TVM's VM module method `invoke_stateful` is found before the program's functions.
        let timed = if func_name == "invoke_stateful" {
            Timed::Stateful(Arc::clone(&self.shared))
        } else {
            Timed::Function(self.function_object(py, func_name)?.unbind())
        };
        let cooldown = std::time::Duration::from_secs_f64(cooldown_interval_ms / 1e3);
        Ok(TimeEvaluator { timed, number, repeat, min_repeat_ms, cooldown, repeats_to_cooldown })
    }

    /// Runs `func_name` once with the arguments (assigned as a call assigns them) and returns
    /// where its time went, per callee (`rx.ProfileReport`). Needs `profile=True` when the VM
    /// was made. The run's result is discarded; an error is raised as the call would raise it.
    #[pyo3(signature = (func_name, *args, **kwargs))]
    fn profile(
        &self,
        py: Python<'_>,
        func_name: &str,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyProfileReport> {
        let argv = self.call_args(py, func_name, args, kwargs)?;
        let report = self.shared.run(py, true, |vm| vm.profile(func_name, &argv))?;
        Ok(PyProfileReport::new(report))
    }

    /// Runs `func_name` once with the arguments and returns every call it made, in order, with
    /// copies of their arguments, results and written arguments (`rx.Trace`), keeping at most
    /// `max_bytes` of copies (older values are dropped past it). An error is raised as the call
    /// would raise it, with the trace up to it as the exception's `trace` attribute.
    // The default is written out so that Python's signature shows it; it is the Rust default.
    #[pyo3(signature = (func_name, *args, max_bytes = 268435456, **kwargs))]
    fn trace(
        &self,
        py: Python<'_>,
        func_name: &str,
        args: &Bound<'_, PyTuple>,
        max_bytes: usize,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyTrace> {
        let argv = self.call_args(py, func_name, args, kwargs)?;
        let options = relaxvm::trace::TraceOptions { max_bytes };
        match self.shared.run(py, true, |vm| Ok(vm.trace(func_name, &argv, options)))? {
            Ok(trace) => Ok(PyTrace::new(trace)),
            Err(failed) => {
                let err = Err::<(), _>(failed.error).py_err(py).expect_err("an error stays one");
                err.value(py).setattr("trace", PyTrace::new(*failed.trace))?;
                Err(err)
            }
        }
    }

    /// Stops the running call (from another thread) with a `VMError` at its next backward jump
    /// or call; calls waiting for the VM, busy in another thread, raise `VMError` at once.
    fn interrupt(&self) {
        self.shared.interrupt();
    }

    fn __repr__(&self) -> String {
        format!("<relaxvm.VirtualMachine functions={:?}>", self.exe.get().0.bytecode_function_names())
    }
}
