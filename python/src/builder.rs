//! `rx.ExecBuilder`: emits bytecode the way TVM's `relax.ExecBuilder` does.

use crate::convert::to_value;
use crate::errors::build_error;
use crate::executable::PyExecutable;
use crate::int_arg::{extract_i64, extract_int, extract_opt, int_out_of_range};
use crate::shape::extract_shape;
use crate::signature::parse_signature;
use crate::tensor::copy_tensor;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyList, PyString, PyTuple};
use relaxvm::{Arg, FuncKind, Location, RegIdx, Value};
use relaxvm_builder as rb;
use std::sync::Arc;

/// An instruction argument: a register `r(i)`, an immediate `imm(v)`, a constant `c(i)`, a
/// function `f(name)`, the VM-state register or the void register. Handles are hashable and
/// compare equal when they denote the same argument.
#[pyclass(module = "relaxvm", name = "Arg", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyArg {
    pub arg: Arg,
    /// The function's name, for `f(...)` handles (repr only).
    pub func_name: Option<String>,
}

impl PyArg {
    fn new(arg: Arg) -> Self {
        PyArg { arg, func_name: None }
    }
}

/// `v` with every tensor in it (inside tuples too) copied, so that the constant never aliases
/// the caller's memory and freezing it never freezes the caller's tensor.
fn owned_constant(py: Python<'_>, v: &Value) -> PyResult<Value> {
    Ok(match v {
        Value::Tensor(t) => Value::Tensor(copy_tensor(py, t)?),
        Value::Tuple(items) => Value::tuple(items.iter().map(|x| owned_constant(py, x)).collect::<PyResult<Vec<_>>>()?),
        other => other.clone(),
    })
}

#[pymethods]
impl PyArg {
    /// `"reg"`, `"imm"`, `"const"`, `"func"`, `"vm_state"` or `"void"`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.arg.kind().name()
    }

    /// The register, immediate, constant or function index (`None` for the special registers).
    #[getter]
    fn value(&self) -> Option<i64> {
        match self.arg {
            Arg::Reg(r) => Some(r.into()),
            Arg::Imm(i) => Some(i),
            Arg::Const(c) => Some(c.into()),
            Arg::Func(f) => Some(f.into()),
            Arg::VmState | Arg::Void => None,
        }
    }

    fn __repr__(&self) -> String {
        match (&self.arg, &self.func_name) {
            (Arg::Reg(r), _) => format!("r({r})"),
            (Arg::Imm(i), _) => format!("imm({i})"),
            (Arg::Const(c), _) => format!("c({c})"),
            (Arg::Func(_), Some(n)) => format!("f({n:?})"),
            (Arg::Func(i), None) => format!("f({i})"),
            (Arg::VmState, _) => "vm_state()".into(),
            (Arg::Void, _) => "void_arg()".into(),
        }
    }
}

/// A source location for `loc=`: `Location.file("m.py", 3, 1)`, `Location.name("add")`,
/// `Location.callsite(callee, caller)`, `Location.fused([...])`.
#[pyclass(module = "relaxvm", name = "Location", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyLocation(pub Location);

#[pymethods]
impl PyLocation {
    /// A file, line and column.
    #[staticmethod]
    #[pyo3(signature = (file, line = 1, col = 1))]
    fn file(file: String, line: u32, col: u32) -> Self {
        PyLocation(Location::File { file, line, col })
    }

    /// A name, e.g. of the operator an instruction lowers.
    #[staticmethod]
    fn name(name: String) -> Self {
        PyLocation(Location::Name(name))
    }

    /// `callee` inlined at `caller`.
    #[staticmethod]
    fn callsite(callee: &PyLocation, caller: &PyLocation) -> Self {
        PyLocation(Location::CallSite { callee: Box::new(callee.0.clone()), caller: Box::new(caller.0.clone()) })
    }

    /// Several locations fused into one instruction.
    #[staticmethod]
    fn fused(locations: Vec<PyRef<'_, PyLocation>>) -> Self {
        PyLocation(Location::Fused(locations.iter().map(|l| l.0.clone()).collect()))
    }

    fn __str__(&self) -> String {
        self.0.to_string()
    }

    fn __repr__(&self) -> String {
        format!("Location({})", self.0)
    }
}

/// The scope of one function being emitted; returned by `ExecBuilder.function`. Leaving the
/// `with` block ends the function.
#[pyclass(module = "relaxvm", name = "FunctionScope")]
pub struct FunctionScope {
    builder: Py<PyExecBuilder>,
    name: String,
    open: bool,
}

#[pymethods]
impl FunctionScope {
    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (exc_type = None, _exc = None, _tb = None))]
    fn __exit__(
        &mut self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if !self.open {
            return Ok(false);
        }
        self.open = false;
        let mut b = self.builder.bind(py).borrow_mut();
        b.in_function = false;
        let r = b.inner.end_function();
        if exc_type.is_some_and(|e| !e.is_none()) {
            return Ok(false); // the body's exception wins
        }
        r.map_err(|e| build_error(py, e))?;
        Ok(false)
    }

    /// The function's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }
}

/// Emits instructions and builds an `Executable` (TVM's `relax.ExecBuilder`):
///
/// ```python
/// ib = ExecBuilder()
/// with ib.function("main", num_inputs=2):
///     ib.emit_call("vm.op.add", args=[ib.r(0), ib.r(1)], dst=ib.r(2))
///     ib.emit_ret(ib.r(2))
/// ex = ib.get()
/// ```
#[pyclass(module = "relaxvm", name = "ExecBuilder")]
pub struct PyExecBuilder {
    inner: rb::ExecBuilder,
    in_function: bool,
}

fn reg_of(py: Python<'_>, ob: &Bound<'_, PyAny>, what: &str) -> PyResult<RegIdx> {
    if let Ok(a) = ob.cast::<PyArg>() {
        if let Arg::Reg(r) = a.get().arg {
            return Ok(r);
        }
        return Err(PyTypeError::new_err(format!(
            "{what} must be a register such as ib.r(2), got {}",
            a.get().__repr__()
        )));
    }
    if ob.is_instance_of::<PyInt>() && !ob.is_instance_of::<PyBool>() {
        return extract_int::<u32>(ob, &|| format!("{what} (a register index)"));
    }
    let _ = py;
    Err(PyTypeError::new_err(format!("{what} must be a register such as ib.r(2)")))
}

impl PyExecBuilder {
    fn check_scope(&self) -> PyResult<()> {
        if !self.in_function {
            return Err(PyValueError::new_err("emit should happen in a function scope (with ib.function(...):)"));
        }
        Ok(())
    }

    fn constant(&mut self, py: Python<'_>, v: Value) -> PyResult<PyArg> {
        // Constants never alias the caller's memory: a later write to the array must not change
        // the program. An equal constant already in the pool is shared without a copy.
        let i = self.inner.convert_constant_with(&v, |v| owned_constant(py, v))?.map_err(|e| build_error(py, e))?;
        Ok(PyArg::new(Arg::Const(i)))
    }

    /// The argument `ob` of a call; `place()` names it in a refusal.
    fn arg_of(&mut self, py: Python<'_>, ob: &Bound<'_, PyAny>, place: &dyn Fn() -> String) -> PyResult<Arg> {
        if let Ok(a) = ob.cast::<PyArg>() {
            return Ok(a.get().arg);
        }
        if ob.is_none() {
            return Ok(Arg::Void);
        }
        if ob.is_instance_of::<PyInt>() {
            let i: i64 = ob.extract().map_err(|_| int_out_of_range(ob, &format!("immediate {}", place())))?;
            return Ok(Arg::Imm(i));
        }
        if ob.is_instance_of::<PyTuple>() {
            let shape = extract_shape(ob)?;
            return Ok(self.constant(py, Value::Shape(shape))?.arg);
        }
        if ob.is_instance_of::<PyList>() {
            return Err(PyTypeError::new_err(
                "a list is not an instruction argument: use a tuple for a shape, or ib.convert_constant",
            ));
        }
        Ok(self.constant(py, to_value(ob)?)?.arg)
    }

    fn with_loc<R>(
        &mut self,
        loc: Option<&PyLocation>,
        f: impl FnOnce(&mut rb::ExecBuilder) -> Result<R, rb::BuildError>,
    ) -> Result<R, rb::BuildError> {
        if let Some(l) = loc {
            self.inner.set_location(Some(l.0.clone()));
        }
        let r = f(&mut self.inner);
        if loc.is_some() {
            self.inner.set_location(None);
        }
        r
    }
}

#[pymethods]
impl PyExecBuilder {
    #[new]
    fn new() -> Self {
        PyExecBuilder { inner: rb::ExecBuilder::new(), in_function: false }
    }

    /// Register `idx` of the current frame; the first `num_inputs` registers hold the inputs.
    fn r(&self, idx: &Bound<'_, PyAny>) -> PyResult<PyArg> {
        Ok(PyArg::new(Arg::Reg(extract_int(idx, &|| "ExecBuilder.r".to_string())?)))
    }

    /// An immediate (inline 64-bit integer).
    fn imm(&self, value: &Bound<'_, PyAny>) -> PyResult<PyArg> {
        let v = extract_i64(value, &|| "ExecBuilder.imm".to_string())?;
        Ok(PyArg::new(Arg::Imm(v)))
    }

    /// Constant number `idx` of the constant pool.
    fn c(&self, idx: &Bound<'_, PyAny>) -> PyResult<PyArg> {
        Ok(PyArg::new(Arg::Const(extract_int(idx, &|| "ExecBuilder.c".to_string())?)))
    }

    /// The function `name` as a value (declared as a packed function if not yet known).
    fn f(&mut self, name: &str) -> PyArg {
        let i = self.inner.func_ref(name);
        PyArg { arg: Arg::Func(i), func_name: Some(name.to_string()) }
    }

    /// The VM-state register: lets a builtin reach the VM (e.g. `vm.builtin.alloc_storage`).
    fn vm_state(&self) -> PyArg {
        PyArg::new(Arg::VmState)
    }

    /// The void register: passes `None`.
    fn void_arg(&self) -> PyArg {
        PyArg::new(Arg::Void)
    }

    /// Adds `value` to the constant pool (equal constants share one entry) and returns its
    /// handle `c(i)`. As in TVM, a tuple or list becomes a tuple (use `rx.Shape` for a shape);
    /// numpy arrays are copied.
    fn convert_constant(&mut self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<PyArg> {
        self.constant(py, to_value(value)?)
    }

    /// Declares function `name` as `"packed"` (provided by a registry) or `"bytecode"` (defined
    /// later in this builder); returns its handle `f(name)`.
    #[pyo3(signature = (name, kind = "packed"))]
    fn declare_function(&mut self, py: Python<'_>, name: &str, kind: &str) -> PyResult<PyArg> {
        let kind = match kind {
            "packed" => FuncKind::Packed,
            "bytecode" => FuncKind::Bytecode,
            other => {
                return Err(PyValueError::new_err(format!("kind must be \"packed\" or \"bytecode\", got {other:?}")))
            }
        };
        let i = self.inner.declare_function(name, kind).map_err(|e| build_error(py, e))?;
        Ok(PyArg { arg: Arg::Func(i), func_name: Some(name.to_string()) })
    }

    /// Starts bytecode function `name` taking `num_inputs` inputs (in registers `0..num_inputs`);
    /// use as `with ib.function("main", num_inputs=2):`.
    ///
    /// `signature` (the text form such as `"(x: tensor<[n], f32>, k: f32) -> f32"`, or an
    /// `rx.types.Signature`) declares the parameter and result types: calls are checked against
    /// it before any instruction runs. With a signature, `num_inputs` and `param_names` may be
    /// omitted (they come from it); given, they must agree with it. Without either,
    /// `num_inputs` defaults to the number of `param_names`.
    #[pyo3(signature = (name, num_inputs = None, param_names = None, signature = None))]
    fn function(
        slf: &Bound<'_, Self>,
        name: &str,
        num_inputs: Option<&Bound<'_, PyAny>>,
        param_names: Option<Vec<String>>,
        signature: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<FunctionScope> {
        let py = slf.py();
        let num_inputs = extract_opt::<u32>(num_inputs, &|| "ExecBuilder.function num_inputs".to_string())?;
        let mut b = slf.borrow_mut();
        if b.in_function {
            return Err(PyValueError::new_err("functions cannot nest: end the current one first"));
        }
        let sig = signature.filter(|s| !s.is_none()).map(parse_signature).transpose()?;
        match sig {
            None => {
                let n = num_inputs.unwrap_or_else(|| param_names.as_ref().map_or(0, |p| p.len() as u32));
                b.inner.function(name, n, param_names)
            }
            Some(sig) => {
                let names: Vec<String> = sig.param_names().map(str::to_string).collect();
                if let Some(n) = num_inputs.filter(|n| *n as usize != names.len()) {
                    return Err(PyValueError::new_err(format!(
                        "num_inputs={n} but the signature {sig} has {} parameters",
                        names.len()
                    )));
                }
                if let Some(p) = param_names.filter(|p| *p != names) {
                    return Err(PyValueError::new_err(format!(
                        "param_names={p:?} but the signature {sig} names {names:?}"
                    )));
                }
                b.inner.function_with_signature(name, sig)
            }
        }
        .map_err(|e| build_error(py, e))?;
        b.in_function = true;
        Ok(FunctionScope { builder: slf.clone().unbind(), name: name.to_string(), open: true })
    }

    /// Emits `call name(args...) -> dst`. In `args`, handles pass through, plain ints become
    /// immediates, tuples become shape constants, `None` is the void register, and tensors,
    /// numpy arrays, dtypes, shapes, strings and floats become constants.
    #[pyo3(signature = (name, args = None, dst = None, loc = None))]
    fn emit_call(
        &mut self,
        py: Python<'_>,
        name: &str,
        args: Option<&Bound<'_, PyAny>>,
        dst: Option<&Bound<'_, PyAny>>,
        loc: Option<PyRef<'_, PyLocation>>,
    ) -> PyResult<()> {
        self.check_scope()?;
        let mut argv = Vec::new();
        if let Some(a) = args.filter(|a| !a.is_none()) {
            for (i, item) in a.try_iter()?.enumerate() {
                argv.push(self.arg_of(py, &item?, &|| format!("argument {i} of the call of {name:?}"))?);
            }
        }
        let dst = match dst {
            Some(d) if !d.is_none() => {
                if let Ok(a) = d.cast::<PyArg>() {
                    if a.get().arg == Arg::Void {
                        None
                    } else {
                        Some(reg_of(py, d, "dst")?)
                    }
                } else {
                    Some(reg_of(py, d, "dst")?)
                }
            }
            _ => None,
        };
        self.with_loc(loc.as_deref(), |b| b.emit_call(name, &argv, dst)).map_err(|e| build_error(py, e))
    }

    /// Emits `ret result`.
    #[pyo3(signature = (result, loc = None))]
    fn emit_ret(
        &mut self,
        py: Python<'_>,
        result: &Bound<'_, PyAny>,
        loc: Option<PyRef<'_, PyLocation>>,
    ) -> PyResult<()> {
        self.check_scope()?;
        let r = reg_of(py, result, "emit_ret's argument")?;
        self.with_loc(loc.as_deref(), |b| b.emit_ret(r)).map_err(|e| build_error(py, e))
    }

    /// Emits `goto offset` (relative to this instruction; negative loops back).
    #[pyo3(signature = (offset, loc = None))]
    fn emit_goto(
        &mut self,
        py: Python<'_>,
        offset: &Bound<'_, PyAny>,
        loc: Option<PyRef<'_, PyLocation>>,
    ) -> PyResult<()> {
        self.check_scope()?;
        let offset = extract_i64(offset, &|| "ExecBuilder.emit_goto offset".to_string())?;
        self.with_loc(loc.as_deref(), |b| b.emit_goto(offset)).map_err(|e| build_error(py, e))
    }

    /// Emits `if cond false_offset`: falls through when `cond` is non-zero, else jumps.
    #[pyo3(signature = (cond, false_offset, loc = None))]
    fn emit_if(
        &mut self,
        py: Python<'_>,
        cond: &Bound<'_, PyAny>,
        false_offset: &Bound<'_, PyAny>,
        loc: Option<PyRef<'_, PyLocation>>,
    ) -> PyResult<()> {
        self.check_scope()?;
        let false_offset = extract_i64(false_offset, &|| "ExecBuilder.emit_if false_offset".to_string())?;
        let c = reg_of(py, cond, "emit_if's condition")?;
        self.with_loc(loc.as_deref(), |b| b.emit_if(c, false_offset)).map_err(|e| build_error(py, e))
    }

    /// Makes `name` the executable's entry function (`Executable.entry`; by default `main`).
    /// It may be defined later, but `get()` fails unless it is a bytecode function by then.
    fn set_entry(&mut self, py: Python<'_>, name: &str) -> PyResult<()> {
        self.inner.set_entry(name).map_err(|e| build_error(py, e))
    }

    /// The entry function set with `set_entry` (`None` when none is).
    #[getter]
    fn entry(&self) -> Option<&str> {
        self.inner.entry()
    }

    /// Imports every function of `ex`, as `rx.link` does: its bytecode functions become this
    /// builder's (with parameter names, signatures and locations), its constants join the pool
    /// (equal constants stored once), and every index is remapped. A name `ex` defines that the
    /// builder only declared or referenced (e.g. with `f(name)`) becomes a direct call; a name
    /// both define raises `CheckError`. Without an entry, the builder takes `ex`'s. Not inside a
    /// function scope.
    fn import_executable(&mut self, py: Python<'_>, ex: &PyExecutable) -> PyResult<()> {
        if self.in_function {
            return Err(PyValueError::new_err(
                "import_executable inside a function scope: leave the `with ib.function(...)` block first",
            ));
        }
        self.inner.import_executable(&ex.0).map_err(|e| build_error(py, e))
    }

    /// Checks, renumbers registers and returns the executable. Raises `CheckError` when a
    /// function reads a register that is neither an input nor written before; warns about
    /// unused inputs.
    fn get(&mut self, py: Python<'_>) -> PyResult<PyExecutable> {
        if self.in_function {
            return Err(PyValueError::new_err(
                "get() inside a function scope: leave the `with ib.function(...)` block first",
            ));
        }
        let out = self.inner.get().map_err(|e| build_error(py, e))?;
        if !out.warnings.is_empty() {
            let warnings = py.import("warnings")?;
            for w in &out.warnings {
                warnings.call_method1(
                    "warn",
                    (PyString::new(py, w), py.get_type::<pyo3::exceptions::PyUserWarning>(), 1),
                )?;
            }
        }
        Ok(PyExecutable(Arc::new(out.executable)))
    }
}
