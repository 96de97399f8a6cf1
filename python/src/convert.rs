//! Conversion between Python objects and VM values, both ways, with the Python faces of VM
//! values that have no Python counterpart (`rx.Object`, `rx.Closure`) and Python callables as
//! packed functions: converting a function value one way needs the conversion of its arguments
//! the other way, so they live in one file.
//!
//! | Python                          | VM value            | back to Python        |
//! |---------------------------------|---------------------|-----------------------|
//! | `None`, `bool`, `int`, `float`, `str` | Null, Bool, Int, Float, Str | the same type |
//! | `rx.Tensor`, `numpy.ndarray`, DLPack objects | Tensor (zero-copy when possible) | `rx.Tensor` |
//! | `rx.Shape`                      | Shape               | `rx.Shape`            |
//! | `rx.DataType`, `rx.Device`      | DType, Device       | the same classes      |
//! | `tuple`, `list`                 | Tuple               | `tuple`               |
//! | `rx.Closure`, any callable      | Func                | `rx.Closure`          |
//! | numpy scalars                   | Bool, Int, Float    | Python scalars        |
//! | `rx.Object`                     | Storage, VmState, Object | `rx.Object`      |

use crate::device::PyDevice;
use crate::dtype::PyDataType;
use crate::errors::from_pyerr;
use crate::int_arg::int_out_of_range;
use crate::recent_arrays;
use crate::shape::PyShape;
use crate::tensor::PyTensor;
use numpy::PyUntypedArray;
use pyo3::exceptions::{PyMemoryError, PyRecursionError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyFloat, PyInt, PyList, PyString, PyTuple, PyType};
use pyo3::PyTypeInfo;
use relaxvm::{Callable, Closure, PackedFunc, Value};
use smallvec::SmallVec;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

mod closure;
pub use closure::PyClosure;
pub(crate) use closure::{enable_type, new_closure};

/// How deeply tuples and lists passed to the VM may nest. Conversion itself is iterative and
/// would take any depth; the limit keeps what reaches Rust code that walks values within the
/// stack of any thread (Python's own default recursion limit is the same).
pub const MAX_NESTING: usize = 1000;

/// How many items a conversion handles between two checks for Ctrl-C.
const SIGNAL_CHECK_EVERY: usize = 1 << 14;

/// Arguments as the VM takes them: up to 8 without a heap allocation.
pub type Args = SmallVec<[Value; 8]>;

/// A VM value that Python sees as an opaque handle: storage, the VM-state marker, or any
/// other object a builtin returns. It goes back into the VM as the same value.
#[pyclass(module = "relaxvm", name = "Object", frozen)]
pub struct PyOpaque(pub Value);

#[pymethods]
impl PyOpaque {
    /// The VM's name for the value's type (`"storage"`, `"vm_state"`, `"object"`).
    #[getter]
    fn type_name(&self) -> &'static str {
        self.0.type_name()
    }

    fn __repr__(&self) -> String {
        match self.0.as_named() {
            // A named object (e.g. a KV cache) says what it holds.
            Some(n) => format!("<relaxvm.Object {}: {}>", n.type_key(), n.describe()),
            None => format!("<relaxvm.Object {}: {}>", self.0.type_name(), self.0),
        }
    }
}

struct NumpyScalarTypes {
    bool_: Py<PyType>,
    integer: Py<PyType>,
    floating: Py<PyType>,
}

static NUMPY_SCALARS: PyOnceLock<Option<NumpyScalarTypes>> = PyOnceLock::new();

fn numpy_scalars(py: Python<'_>) -> Option<&'static NumpyScalarTypes> {
    NUMPY_SCALARS
        .get_or_init(py, || {
            let np = py.import("numpy").ok()?;
            let get = |n: &str| np.getattr(n).ok()?.cast_into::<PyType>().ok().map(Bound::unbind);
            Some(NumpyScalarTypes { bool_: get("bool_")?, integer: get("integer")?, floating: get("floating")? })
        })
        .as_ref()
}

fn type_error(ob: &Bound<'_, PyAny>) -> PyErr {
    let name = ob.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
    PyTypeError::new_err(format!(
        "cannot pass a {name} to the VM: expected None, bool, int, float, str, a tensor (rx.Tensor, numpy array or DLPack object), rx.Shape, rx.DataType, rx.Device, a tuple or list of those, or a callable"
    ))
}

/// The common arguments — an exact `int` that fits, an exact `float`, a relaxvm tensor, `None`,
/// a `bool`, a numpy array passed before and unchanged since (`crate::recent_arrays`) —
/// converted inline in the caller (`None` for everything else, which [`to_value`] handles):
/// the general path's arguments then reach the VM without a function call each.
#[inline(always)]
pub fn quick_value(ob: &Bound<'_, PyAny>) -> Option<Value> {
    if let Some(v) = quick_plain_value(ob) {
        return Some(v);
    }
    // A numpy array passed before, unchanged: its kept view (others take the general path).
    recent_arrays::kept(ob.cast_exact::<PyUntypedArray>().ok()?).map(Value::Tensor)
}

/// [`quick_value`] for the arguments whose conversion runs no Python code and makes no Python
/// object, so that it may run while the VM is held: the plain ones, and a numpy array whose
/// kept view has its Python object made already (from the third call with it on: the second
/// makes the object).
#[inline(always)]
pub fn held_value(ob: &Bound<'_, PyAny>) -> Option<Value> {
    if let Some(v) = quick_plain_value(ob) {
        return Some(v);
    }
    held_array(ob)
}

/// [`held_value`]'s numpy array, out of line: inlined, its thread-local lookup was hoisted
/// out of the caller's loop over the arguments and paid by every call, ints and tensors too.
#[inline(never)]
fn held_array(ob: &Bound<'_, PyAny>) -> Option<Value> {
    recent_arrays::kept_made(ob).map(Value::Tensor)
}

/// An exact `int` that fits, an exact `float`, a relaxvm tensor, `None` or a `bool`, converted.
#[inline(always)]
fn quick_plain_value(ob: &Bound<'_, PyAny>) -> Option<Value> {
    if PyInt::is_exact_type_of(ob) {
        // SAFETY: `ob` is a live exact int, and the thread is attached (`ob`'s lifetime).
        return unsafe { crate::small_int::read(ob.as_ptr()) }.map(Value::Int);
    }
    if PyFloat::is_exact_type_of(ob) {
        return Some(Value::Float(ob.cast::<PyFloat>().ok()?.value()));
    }
    if let Ok(t) = ob.cast_exact::<PyTensor>() {
        return Some(Value::Tensor(t.get().0.clone()));
    }
    if ob.is_none() {
        return Some(Value::Null);
    }
    ob.cast_exact::<PyBool>().ok().map(|b| Value::Bool(b.is_true()))
}

/// Converts a Python object into a VM value. Numpy arrays are viewed without copying when
/// their layout allows; callables become packed functions that call back into Python.
pub fn to_value(ob: &Bound<'_, PyAny>) -> PyResult<Value> {
    to_value_in(ob, &String::new)
}

/// [`to_value`] of a value whose place the caller knows: `place()` (called only for an error)
/// names it, e.g. `parameter "y" of main`; refusals inside tuples add the path (`[1][0]`).
pub fn to_value_in(ob: &Bound<'_, PyAny>, place: &dyn Fn() -> String) -> PyResult<Value> {
    let py = ob.py();
    // Exact builtin types first: the common scalar arguments cost one pointer comparison.
    if PyInt::is_exact_type_of(ob) {
        return ob.extract::<i64>().map(Value::Int).map_err(|_| int_out_of_range(ob, &place()));
    }
    if let Ok(t) = ob.cast::<PyTensor>() {
        return Ok(Value::Tensor(t.get().0.clone()));
    }
    if PyFloat::is_exact_type_of(ob) {
        // SAFETY-free: exact float.
        return Ok(Value::Float(ob.cast::<PyFloat>().expect("checked").value()));
    }
    if ob.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = ob.cast_exact::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if let Ok(a) = ob.cast::<PyUntypedArray>() {
        return recent_arrays::tensor_of(a).map(Value::Tensor);
    }
    if let Ok(s) = ob.cast::<PyString>() {
        return match s.to_cow() {
            Ok(text) => Ok(Value::Str(relaxvm::ArcString::from(&*text))),
            Err(e) => Err(str_not_utf8(s, e, &place())),
        };
    }
    if ob.cast::<PyTuple>().is_ok() || ob.cast::<PyList>().is_ok() {
        return sequence_value(ob, place);
    }
    if let Ok(s) = ob.cast::<PyShape>() {
        return Ok(Value::Shape(s.get().0.clone()));
    }
    if let Ok(d) = ob.cast::<PyDataType>() {
        return Ok(Value::DType(d.get().0));
    }
    if let Ok(d) = ob.cast::<PyDevice>() {
        return Ok(Value::Device(d.get().0));
    }
    if let Ok(c) = ob.cast::<PyClosure>() {
        return Ok(Value::Func(c.get().0.clone()));
    }
    if let Ok(o) = ob.cast::<PyOpaque>() {
        return Ok(o.get().0.clone());
    }
    if PyInt::is_type_of(ob) {
        return ob.extract::<i64>().map(Value::Int).map_err(|_| int_out_of_range(ob, &place()));
    }
    if PyFloat::is_type_of(ob) {
        return Ok(Value::Float(ob.extract()?));
    }
    if let Some(np) = numpy_scalars(py) {
        if ob.is_instance(np.bool_.bind(py))? {
            return Ok(Value::Bool(ob.is_truthy()?));
        }
        if ob.is_instance(np.integer.bind(py))? {
            return ob.extract::<i64>().map(Value::Int).map_err(|_| int_out_of_range(ob, &place()));
        }
        if ob.is_instance(np.floating.bind(py))? {
            return Ok(Value::Float(ob.extract()?));
        }
    }
    if ob.hasattr(pyo3::intern!(py, "__dlpack__"))? {
        return crate::tensor::from_dlpack_object(ob).map(Value::Tensor);
    }
    if ob.is_callable() {
        return Ok(Value::packed(python_packed_func(ob)?));
    }
    Err(type_error(ob))
}

/// The refusal of a `str` that UTF-8 cannot hold (a lone surrogate, e.g. `"a\ud800"`: the VM's
/// strings are UTF-8) at `place`, naming the place, the code point and its position as the
/// int refusals do, as a value error; `e` is the codec's error, whose `start` is the position.
#[cold]
fn str_not_utf8(s: &Bound<'_, PyString>, e: PyErr, place: &str) -> PyErr {
    let py = s.py();
    let at = if place.is_empty() { String::new() } else { format!("{place}: ") };
    // int probe: the codec error's position (a str index), not an int the caller passed.
    let start = e.value(py).getattr(pyo3::intern!(py, "start")).and_then(|v| v.extract::<usize>());
    // The code point through `ord` (a lone surrogate is no Rust `char`).
    let ord = |start: usize| -> PyResult<u32> {
        let c = s.get_item(start)?;
        py.import(pyo3::intern!(py, "builtins"))?.getattr(pyo3::intern!(py, "ord"))?.call1((c,))?.extract()
    };
    let what = match start {
        Ok(start) => match ord(start) {
            Ok(c) if (0xd800..0xe000).contains(&c) => format!("a lone surrogate \\u{c:04x} at position {start}"),
            _ => format!("at position {start}"),
        },
        // Not the codec's error: its own words.
        Err(_) => e.value(py).to_string(),
    };
    crate::errors::to_pyerr(py, relaxvm::Error::value(format!("{at}str is not valid UTF-8 ({what})")))
}

/// A tuple or list, converted with a heap stack of the sequences being filled: nesting never
/// recurses natively, a sequence that contains itself is an error (not a hang), and nesting
/// deeper than [`MAX_NESTING`] is a `RecursionError`. A sequence met again (the same object,
/// e.g. `v = (v, v)` nested 40 deep) becomes the same shared VM tuple, converted once: the work
/// and the memory are linear in the distinct sequences, not in the unfolded value (2^40 items
/// there), the mirror of [`tuple_to_py`]. A list changed while it is converted (by Python code
/// a `__dlpack__` method runs) is the same tuple wherever it appears.
fn sequence_value(root: &Bound<'_, PyAny>, place: &dyn Fn() -> String) -> PyResult<Value> {
    struct Frame<'py> {
        seq: Bound<'py, PyAny>,
        /// The length read when the sequence was first met: it may shrink while it is
        /// converted, but not grow past this (a `__getitem__` that appends would otherwise
        /// convert until memory runs out).
        len: usize,
        items: Vec<Value>,
    }
    fn frame(seq: Bound<'_, PyAny>) -> PyResult<Frame<'_>> {
        let len = seq.len()?;
        let mut items = Vec::new();
        items.try_reserve(len.min(1 << 16)).map_err(|_| out_of_memory(len))?;
        Ok(Frame { seq, len, items })
    }
    let py = root.py();
    // Sequences on the path from the root: one seen again is a cycle. The root is compared
    // apart, so that a flat tuple or list (the common argument) allocates no set.
    let root_at = root.as_ptr() as usize;
    let mut on_path: HashSet<usize> = HashSet::new();
    let mut stack = vec![frame(root.clone())?];
    // The sequences converted so far, by identity, holding the object so that its address is
    // not reused by another object during the conversion.
    let mut done: HashMap<usize, (Bound<'_, PyAny>, Value)> = HashMap::new();
    let mut converted = 0usize;
    loop {
        let top = stack.last_mut().expect("the root frame stays until the end");
        // A list may change while we read it (a `__dlpack__` or `__getitem__` method can run
        // Python code), so its length is read at every step: it may shrink, but growth past
        // the length first read is refused (conversion is bounded by what was there).
        let next = top.items.len();
        let now = top.seq.len()?;
        if now > top.len {
            return Err(PyValueError::new_err(format!(
                "cannot pass a {} that grows while it is converted: it had {} items, and {now} after converting {next}",
                top.seq.get_type().name()?,
                top.len
            )));
        }
        if next < now {
            let item = top.seq.get_item(next)?;
            // Every Rust allocation below is fallible: running out of memory is a MemoryError.
            top.items.try_reserve(1).map_err(|_| out_of_memory(next + 1))?;
            converted += 1;
            if converted.is_multiple_of(SIGNAL_CHECK_EVERY) {
                py.check_signals()?;
            }
            if item.cast::<PyTuple>().is_ok() || item.cast::<PyList>().is_ok() {
                if let Some((_, value)) = done.get(&(item.as_ptr() as usize)) {
                    top.items.push(value.clone());
                    continue;
                }
                on_path.try_reserve(1).map_err(|_| out_of_memory(stack.len()))?;
                if item.as_ptr() as usize == root_at || !on_path.insert(item.as_ptr() as usize) {
                    return Err(PyValueError::new_err(format!(
                        "cannot pass a self-referential {} to the VM: it contains itself (at nesting depth {})",
                        item.get_type().name()?,
                        stack.len()
                    )));
                }
                done.try_reserve(1).map_err(|_| out_of_memory(done.len() + 1))?;
                stack.try_reserve(1).map_err(|_| out_of_memory(stack.len() + 1))?;
                if stack.len() >= MAX_NESTING {
                    return Err(PyRecursionError::new_err(format!(
                        "cannot pass tuples or lists nested more than {MAX_NESTING} deep to the VM"
                    )));
                }
                stack.push(frame(item)?);
            } else {
                // The item's path: its index in each sequence from the root (a sequence's
                // index in its parent is the parent's count of items converted so far).
                let path = || {
                    let indices: String = stack.iter().map(|f| format!("[{}]", f.items.len())).collect();
                    format!("{}{indices}", place())
                };
                let value = to_value_in(&item, &path)?;
                stack.last_mut().expect("the frame converting the item").items.push(value);
            }
            continue;
        }
        let frame = stack.pop().expect("checked above");
        if stack.is_empty() {
            // The root: nothing converts after it, so it is not recorded (no map is made for
            // a flat sequence).
            return Ok(Value::Tuple(frame.items.into()));
        }
        on_path.remove(&(frame.seq.as_ptr() as usize));
        let value = Value::Tuple(frame.items.into());
        done.insert(frame.seq.as_ptr() as usize, (frame.seq, value.clone()));
        match stack.last_mut() {
            Some(parent) => parent.items.push(value),
            None => return Ok(value),
        }
    }
}

/// An empty vector with room for `n` items, or a MemoryError.
fn reserved<T>(n: usize) -> PyResult<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| out_of_memory(n))?;
    Ok(v)
}

/// The error for a conversion that could not allocate room for `n` items.
#[cold]
fn out_of_memory(n: usize) -> PyErr {
    PyMemoryError::new_err(format!("out of memory converting a tuple or list of {n} items"))
}

/// Converts the items of a tuple of arguments of a call of `func` (which names them in errors).
#[inline]
pub fn args_to_values(args: &Bound<'_, PyTuple>, func: &str) -> PyResult<Args> {
    let mut out = Args::new();
    for (i, a) in args.iter_borrowed().enumerate() {
        out.push(to_value_in(&a, &|| format!("argument {i} of {func}"))?);
    }
    Ok(out)
}

/// The Python callable a function value was made from, when it is one with nothing captured.
fn python_origin(c: &Closure) -> Option<&Py<PyAny>> {
    match &c.callable {
        Callable::Packed(f) if c.captured.is_empty() => f.origin()?.downcast_ref::<Py<PyAny>>(),
        _ => None,
    }
}

/// Converts a VM value into a Python object. Inline for the scalars, the commonest results
/// of short calls (a call each would cost as much as the conversion); the rest is converted
/// out of line.
#[inline]
pub fn to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Int(i) => i.into_pyobject(py)?.into_any(),
        Value::Float(x) => PyFloat::new(py, *x).into_any(),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        other => object_to_py(py, other)?,
    })
}

/// [`to_py`] of the values that are not scalars.
#[inline(never)]
fn object_to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Str(s) => PyString::new(py, s).into_any(),
        Value::Tensor(t) => PyTensor::wrap(py, t.clone())?.into_any(),
        Value::Shape(s) => Bound::new(py, PyShape(s.clone()))?.into_any(),
        Value::DType(d) => Bound::new(py, PyDataType(*d))?.into_any(),
        Value::Device(d) => Bound::new(py, PyDevice(*d))?.into_any(),
        Value::Tuple(items) => tuple_to_py(py, items)?,
        Value::Func(c) => match python_origin(c) {
            // A Python function that went into the VM comes back as itself.
            Some(f) => f.bind(py).clone(),
            None => new_closure(py, Arc::clone(c))?.into_any(),
        },
        other => Bound::new(py, PyOpaque(other.clone()))?.into_any(),
    })
}

/// A VM tuple as a Python tuple, with a heap stack instead of recursion (a VM can return a
/// tuple nested as deep as it likes). A tuple shared in several places becomes one Python
/// tuple shared the same way, so a value whose sharing makes it exponentially large when
/// unfolded converts in time linear in its distinct tuples; Ctrl-C is polled as it goes.
fn tuple_to_py<'py>(py: Python<'py>, root: &Arc<Vec<Value>>) -> PyResult<Bound<'py, PyAny>> {
    struct Frame<'v, 'py> {
        tuple: &'v Arc<Vec<Value>>,
        objs: Vec<Bound<'py, PyAny>>,
    }
    let mut done: HashMap<*const Vec<Value>, Bound<'py, PyAny>> = HashMap::new();
    // Every Rust allocation here is fallible: a tuple too large for memory is a MemoryError.
    let mut stack = vec![Frame { tuple: root, objs: reserved(root.len())? }];
    let mut converted = 0usize;
    loop {
        let top = stack.last_mut().expect("the root frame stays until the end");
        if let Some(item) = top.tuple.get(top.objs.len()) {
            converted += 1;
            if converted.is_multiple_of(SIGNAL_CHECK_EVERY) {
                py.check_signals()?;
            }
            match item {
                Value::Tuple(inner) => match done.get(&Arc::as_ptr(inner)) {
                    Some(obj) => top.objs.push(obj.clone()),
                    None => {
                        stack.try_reserve(1).map_err(|_| out_of_memory(stack.len() + 1))?;
                        done.try_reserve(1).map_err(|_| out_of_memory(done.len() + 1))?;
                        stack.push(Frame { tuple: inner, objs: reserved(inner.len())? });
                    }
                },
                other => top.objs.push(to_py(py, other)?),
            }
            continue;
        }
        let frame = stack.pop().expect("checked above");
        let obj = PyTuple::new(py, frame.objs)?.into_any();
        done.insert(Arc::as_ptr(frame.tuple), obj.clone());
        match stack.last_mut() {
            Some(parent) => parent.objs.push(obj),
            None => return Ok(obj),
        }
    }
}

// --- Function values: VM functions as Python callables, Python callables as packed functions.

// `rx.Closure` (`PyClosure`) and its calls from Python: `closure.rs`.

/// A packed function that calls the Python callable `f` (taking the GIL for the call).
/// Arguments are converted to Python objects, the result back to a VM value; an exception is
/// carried through the VM and re-raised, with its own type, where the VM was entered.
pub fn packed_from_callable(name: &str, f: Py<PyAny>) -> PackedFunc {
    // An int out of range in the result names the function that returned it.
    let result_place = format!("result of {name}");
    PackedFunc::new(name, move |_ctx, args| {
        Python::attach(|py| {
            let call = || -> PyResult<Value> {
                let ret = vectorcall(f.bind(py), args)?;
                to_value_in(&ret, &|| result_place.clone())
            };
            call().map_err(from_pyerr)
        })
    })
}

/// Calls `f` with `args` through CPython's vectorcall protocol: the arguments go as an array
/// on the stack, with no tuple built (what `f(*args)` costs a Python function otherwise).
fn vectorcall<'py>(f: &Bound<'py, PyAny>, args: &[Value]) -> PyResult<Bound<'py, PyAny>> {
    if args.len() <= SHORT_ARGS {
        return vectorcall_short(f, args);
    }
    let py = f.py();
    let objs = args.iter().map(|v| to_py(py, v)).collect::<PyResult<SmallVec<[Bound<'py, PyAny>; 8]>>>()?;
    // A free slot before the arguments lets the callee prepend `self` without copying
    // (PY_VECTORCALL_ARGUMENTS_OFFSET), as bound methods do.
    let mut ptrs: SmallVec<[*mut pyo3::ffi::PyObject; 9]> = SmallVec::with_capacity(objs.len() + 1);
    ptrs.push(std::ptr::null_mut());
    ptrs.extend(objs.iter().map(|o| o.as_ptr()));
    let nargsf = objs.len() | pyo3::ffi::PY_VECTORCALL_ARGUMENTS_OFFSET;
    // SAFETY: `f` and every argument are live objects (`objs` holds references until after the
    // call); `ptrs[1..]` holds `objs.len()` of them, and `ptrs[0]` is the writable slot the
    // offset flag promises; no keyword names. The result is a new reference or NULL with an
    // exception set, which `from_owned_ptr_or_err` turns into a `PyErr`.
    unsafe {
        let ret = pyo3::ffi::PyObject_Vectorcall(f.as_ptr(), ptrs.as_ptr().add(1), nargsf, std::ptr::null_mut());
        Bound::from_owned_ptr_or_err(py, ret)
    }
}

/// The most arguments [`vectorcall_short`] takes.
const SHORT_ARGS: usize = 8;

/// [`vectorcall`] with at most [`SHORT_ARGS`] arguments, the common callback: the objects and
/// the pointer array live in fixed arrays on the stack (collecting them into vectors was a
/// tenth of a one-argument callback's instructions).
fn vectorcall_short<'py>(f: &Bound<'py, PyAny>, args: &[Value]) -> PyResult<Bound<'py, PyAny>> {
    let py = f.py();
    let mut objs: [Option<Bound<'py, PyAny>>; SHORT_ARGS] = [const { None }; SHORT_ARGS];
    // Slot 0 is free for the callee to prepend `self` (PY_VECTORCALL_ARGUMENTS_OFFSET).
    let mut ptrs = [std::ptr::null_mut::<pyo3::ffi::PyObject>(); SHORT_ARGS + 1];
    for (i, v) in args.iter().enumerate() {
        ptrs[i + 1] = objs[i].insert(to_py(py, v)?).as_ptr();
    }
    let nargsf = args.len() | pyo3::ffi::PY_VECTORCALL_ARGUMENTS_OFFSET;
    // SAFETY: as in `vectorcall`: `objs` holds a reference to each of the `args.len()` objects
    // at `ptrs[1..]` until after the call, and `ptrs[0]` is the writable slot the offset flag
    // promises; no keyword names; the result is a new reference or NULL with an exception set.
    unsafe {
        let ret = pyo3::ffi::PyObject_Vectorcall(f.as_ptr(), ptrs.as_ptr().add(1), nargsf, std::ptr::null_mut());
        Bound::from_owned_ptr_or_err(py, ret)
    }
}

fn callable_name(f: &Bound<'_, PyAny>) -> String {
    f.getattr(pyo3::intern!(f.py(), "__qualname__"))
        .or_else(|_| f.getattr(pyo3::intern!(f.py(), "__name__")))
        .and_then(|n| n.extract::<String>())
        .map(|n| format!("python.{n}"))
        .unwrap_or_else(|_| "python.callable".to_string())
}

/// A Python callable as a packed function named after it.
pub fn python_packed_func(f: &Bound<'_, PyAny>) -> PyResult<PackedFunc> {
    if !f.is_callable() {
        return Err(PyTypeError::new_err("expected a callable"));
    }
    let origin: Arc<dyn std::any::Any + Send + Sync> = Arc::new(f.clone().unbind());
    Ok(packed_from_callable(&callable_name(f), f.clone().unbind()).with_origin(origin))
}
