//! Function signatures at the Python boundary (the IREE ABI): parsing `signature=`, the JSON
//! reflection, `inspect.signature`, and the type-directed conversion of arguments and results.
//!
//! The VM checks arguments against the signature before any instruction runs
//! ([`relaxvm::Signature::prepare_args`]); what happens here is only what Python needs first:
//!
//! - a list or scalar given for a tensor parameter becomes a tensor of the declared dtype
//!   (`numpy.asarray(v, dtype)`; floats for an integer tensor are refused, not truncated; an
//!   element past the dtype's range is refused naming it, with the VM's int or float message);
//!   arrays and tensors pass unchanged, so a different dtype is an error, not a cast;
//! - an int past int64 (how the VM holds ints) is refused against the declared int type, and
//!   becomes a float for a float parameter;
//! - a dict given for a `dict<{...}>` parameter becomes the tuple of its values in sorted key
//!   order (missing or unexpected keys are an error naming them);
//! - a result typed `dict<{...}>` comes back as a dict, `list<...>` as a list (the VM has
//!   checked it against the declared type: [`relaxvm::Signature::prepare_result`]).

use crate::convert::{to_py, to_value, to_value_in};
use crate::errors::to_pyerr;
use crate::int_arg::shown_int;
use crate::tensor::PyTensor;
use numpy::PyUntypedArray;
use pyo3::exceptions::PyOverflowError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyModule, PyString, PyTuple};
use pyo3::PyTypeInfo;
use relaxvm::dtype::TypeClass;
use relaxvm::{DataType, Error, Signature, Type, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// Parses `signature=`: the text form, or anything whose `str()` is (e.g. `rx.types.Signature`).
pub fn parse_signature(ob: &Bound<'_, PyAny>) -> PyResult<Signature> {
    let text =
        if let Ok(s) = ob.cast::<PyString>() { s.to_cow()?.into_owned() } else { ob.str()?.to_cow()?.into_owned() };
    text.parse::<Signature>()
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("invalid signature {text:?}: {e}")))
}

/// The IREE reflection record `{"a": [...], "r": [...]}` as a Python dict.
pub fn reflection<'py>(py: Python<'py>, sig: &Signature) -> PyResult<Bound<'py, PyAny>> {
    py.import(pyo3::intern!(py, "json"))?.call_method1(pyo3::intern!(py, "loads"), (sig.reflection(),))
}

/// An `inspect.Signature` whose annotations are the types' text forms.
pub fn inspect_signature<'py>(py: Python<'py>, sig: &Signature) -> PyResult<Bound<'py, PyAny>> {
    let inspect = py.import(pyo3::intern!(py, "inspect"))?;
    let parameter = inspect.getattr("Parameter")?;
    let kind = parameter.getattr("POSITIONAL_OR_KEYWORD")?;
    let params = sig
        .params
        .iter()
        .map(|(name, t)| {
            let kw = PyDict::new(py);
            kw.set_item("annotation", t.to_string())?;
            parameter.call((name, &kind), Some(&kw))
        })
        .collect::<PyResult<Vec<_>>>()?;
    let kw = PyDict::new(py);
    kw.set_item("return_annotation", sig.result.to_string())?;
    inspect.getattr("Signature")?.call((params,), Some(&kw))
}

/// An `inspect.Signature` with untyped parameters named `names`.
pub fn inspect_untyped<'py>(py: Python<'py>, names: &[String]) -> PyResult<Bound<'py, PyAny>> {
    let inspect = py.import(pyo3::intern!(py, "inspect"))?;
    let parameter = inspect.getattr("Parameter")?;
    let kind = parameter.getattr("POSITIONAL_OR_KEYWORD")?;
    let params = names.iter().map(|n| parameter.call1((n, &kind))).collect::<PyResult<Vec<_>>>()?;
    inspect.getattr("Signature")?.call1((params,))
}

fn type_error(path: &str, expected: String, given: &Bound<'_, PyAny>, why: &str) -> PyErr {
    let name = given.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
    let why = if why.is_empty() { String::new() } else { format!(" ({why})") };
    to_pyerr(given.py(), Error::type_mismatch(format!("{expected} for {path}"), format!("{name}{why}")))
}

fn value_error(py: Python<'_>, msg: String) -> PyErr {
    to_pyerr(py, Error::value(msg))
}

fn is_array_like(ob: &Bound<'_, PyAny>) -> bool {
    ob.cast::<PyTensor>().is_ok() || ob.cast::<PyUntypedArray>().is_ok()
}

/// A list, tuple or Python scalar given for a tensor parameter, as a numpy array of `dtype`.
fn list_to_tensor(ob: &Bound<'_, PyAny>, dtype: Option<DataType>, path: &str) -> PyResult<Value> {
    let py = ob.py();
    let np = py.import(pyo3::intern!(py, "numpy"))?;
    let expected = match dtype {
        Some(d) => format!("tensor of {d}"),
        None => "tensor".to_string(),
    };
    let inferred = np
        .call_method1(pyo3::intern!(py, "asarray"), (ob,))
        .map_err(|e| type_error(path, expected.clone(), ob, &e.value(py).to_string()))?;
    let kind: String = inferred.getattr("dtype")?.getattr("kind")?.extract()?;
    if kind == "O" {
        if let Some(e) = int_past_int64_element(&inferred, dtype, path)? {
            return Err(e);
        }
    }
    let floats_from_big_ints = kind == "O" && dtype.is_some_and(DataType::is_float);
    if !matches!(kind.as_str(), "b" | "i" | "u" | "f" | "c") && !floats_from_big_ints {
        return Err(type_error(path, expected, ob, "not numbers"));
    }
    let arr = match dtype {
        None => inferred,
        Some(d) => {
            if matches!(kind.as_str(), "f" | "c") && !d.is_float() {
                return Err(type_error(path, expected, ob, "floats, which would be truncated"));
            }
            let arr = np
                .call_method1(pyo3::intern!(py, "asarray"), (ob, d.name()))
                .map_err(|e| type_error(path, expected.clone(), ob, &e.value(py).to_string()))?;
            if d.is_float() && d != DataType::F64 {
                check_float_elements(&np, &inferred, &arr, d, path)?;
            }
            arr
        }
    };
    to_value(&arr)
}

/// An element's place in errors: `parameter "x" of main, element [1, 0]` (the parameter alone
/// for a scalar given for a tensor).
fn element_path(path: &str, index: &[usize]) -> String {
    if index.is_empty() {
        return path.to_string();
    }
    let index: Vec<String> = index.iter().map(usize::to_string).collect();
    format!("{path}, element [{}]", index.join(", "))
}

/// Refuses a list for a float tensor of `d` holding a finite number that became inf in `d`
/// (past its range: numpy only warns), with the VM's message for a float scalar past `d`
/// (attack finding perfpy/02); `inferred` is the list as numpy read it, `arr` the same as `d`.
fn check_float_elements(
    np: &Bound<'_, PyModule>,
    inferred: &Bound<'_, PyAny>,
    arr: &Bound<'_, PyAny>,
    d: DataType,
    path: &str,
) -> PyResult<()> {
    let py = np.py();
    let inf = np.call_method1(pyo3::intern!(py, "isinf"), (arr,))?;
    if !inf.call_method0(pyo3::intern!(py, "any"))?.is_truthy()? {
        return Ok(());
    }
    let finite = np.call_method1(pyo3::intern!(py, "isfinite"), (inferred,))?;
    let over = inf.call_method1(pyo3::intern!(py, "__and__"), (finite,))?;
    let hits = np.call_method1(pyo3::intern!(py, "argwhere"), (over,))?;
    if hits.len()? == 0 {
        return Ok(());
    }
    let index: Vec<usize> = hits.get_item(0)?.call_method0(pyo3::intern!(py, "tolist"))?.extract()?;
    let item = inferred.get_item(PyTuple::new(py, &index)?)?;
    let shown = match item.call_method0(pyo3::intern!(py, "item"))?.extract::<f64>() {
        Ok(f) if item.getattr("dtype")?.getattr("kind")?.extract::<String>()? == "f" => format!("{f:?}"),
        _ => item.str()?.to_string(),
    };
    Err(to_pyerr(py, relaxvm::types::float_outside(d, &shown, &element_path(path, &index))))
}

/// The first element of an object array (what numpy makes of a list holding an int past
/// int64) that is an int past int64, refused as an int past the declared int type (int64 when
/// none is declared) with the one int message, naming the element (attack finding perfpy/03);
/// `None` when there is none or the declared type is a float (which takes big ints).
fn int_past_int64_element(inferred: &Bound<'_, PyAny>, dtype: Option<DataType>, path: &str) -> PyResult<Option<PyErr>> {
    let py = inferred.py();
    let d = dtype.unwrap_or(DataType::I64);
    if d.is_float() {
        return Ok(None);
    }
    let np = py.import(pyo3::intern!(py, "numpy"))?;
    for entry in np.call_method1(pyo3::intern!(py, "ndenumerate"), (inferred,))?.try_iter()? {
        let (index, item): (Vec<usize>, Bound<'_, PyAny>) = entry?.extract()?;
        // int probe: an int element that fits is numpy's to convert; one past int64 is refused.
        if item.is_instance_of::<PyInt>() && !item.is_instance_of::<PyBool>() && item.extract::<i64>().is_err() {
            let shown = shown_int(&item);
            return Ok(Some(to_pyerr(py, relaxvm::types::int_outside(d, &shown, &element_path(path, &index)))));
        }
    }
    Ok(None)
}

/// Converts argument `ob` for a parameter of type `t`; `path` names it in errors.
pub fn typed_to_value(ob: &Bound<'_, PyAny>, t: &Type, path: &str) -> PyResult<Value> {
    typed_value(ob, t, path, &mut HashMap::new())
}

/// The dicts, tuples and lists converted so far for one argument, by (object identity, slot
/// type), each holding its object so that the address is not reused meanwhile: an object met
/// again for the same type becomes the same shared VM tuple, so `v = [v, v]` nested 40 deep for
/// a `list<list<...>>` parameter costs 41 conversions, not 2^40. (The type bounds the
/// recursion: types nest at most `MAX_TYPE_DEPTH` deep.)
type Converted<'py> = HashMap<(usize, *const Type), (Bound<'py, PyAny>, Value)>;

fn typed_value<'py>(ob: &Bound<'py, PyAny>, t: &Type, path: &str, memo: &mut Converted<'py>) -> PyResult<Value> {
    if !matches!(t, Type::Dict(_) | Type::Tuple(_) | Type::List(_)) {
        return scalar_typed_value(ob, t, path);
    }
    let key = (ob.as_ptr() as usize, t as *const Type);
    if let Some((_, v)) = memo.get(&key) {
        return Ok(v.clone());
    }
    let v = structured_value(ob, t, path, memo)?;
    memo.insert(key, (ob.clone(), v.clone()));
    Ok(v)
}

/// [`typed_value`] for the types that are not dicts, tuples or lists.
fn scalar_typed_value(ob: &Bound<'_, PyAny>, t: &Type, path: &str) -> PyResult<Value> {
    match t {
        Type::Tensor { dtype, .. } => {
            if is_array_like(ob) {
                return to_value_in(ob, &|| path.to_string());
            }
            let listish = ob.is_instance_of::<PyList>()
                || ob.is_instance_of::<PyTuple>()
                || ob.is_instance_of::<PyInt>()
                || ob.is_instance_of::<PyFloat>()
                || ob.is_instance_of::<PyBool>();
            if listish {
                list_to_tensor(ob, *dtype, path)
            } else {
                to_value_in(ob, &|| path.to_string())
            }
        }
        Type::Scalar(d) if matches!(d.class(), TypeClass::Int | TypeClass::UInt) => {
            to_value_in(ob, &|| path.to_string()).map_err(|e| declared_int_refusal(ob, *d, path, e))
        }
        Type::Scalar(d) if d.is_float() => {
            to_value_in(ob, &|| path.to_string()).or_else(|e| int_past_int64_as_float(ob, *d, path, e))
        }
        _ => to_value_in(ob, &|| path.to_string()),
    }
}

/// An int past int64 at a parameter declared `d` is refused as the VM refuses one past `d`
/// within int64 (attack finding other/13): a value error against the declared type, not an
/// `OverflowError` against int64, which is how the VM holds ints, not what the caller was asked
/// for. Other errors pass unchanged.
fn declared_int_refusal(ob: &Bound<'_, PyAny>, d: DataType, path: &str, e: PyErr) -> PyErr {
    let py = ob.py();
    if !e.is_instance_of::<PyOverflowError>(py) {
        return e;
    }
    to_pyerr(py, relaxvm::types::int_outside(d, &shown_int(ob), path))
}

/// An int past int64 at a parameter declared float `d` becomes the nearest float, as an int
/// within int64 does (attack finding perfpy/04: int64 is how the VM holds ints, not what the
/// caller was asked for); past float64's range it is refused naming the declared type, as a
/// value error. The float is read through `int`'s own `__float__` (no override of a subclass
/// runs); the VM then checks it against `d`'s range. Other errors pass unchanged.
fn int_past_int64_as_float(ob: &Bound<'_, PyAny>, d: DataType, path: &str, e: PyErr) -> PyResult<Value> {
    let py = ob.py();
    if !e.is_instance_of::<PyOverflowError>(py) || ob.is_instance_of::<PyBool>() {
        return Err(e);
    }
    let float = if ob.is_instance_of::<PyInt>() {
        PyInt::type_object(py).getattr(pyo3::intern!(py, "__float__"))?.call1((ob,))
    } else {
        ob.call_method0(pyo3::intern!(py, "__float__"))
    };
    match float.and_then(|f| f.extract::<f64>()) {
        Ok(f) => Ok(Value::Float(f)),
        Err(_) => Err(to_pyerr(py, relaxvm::types::float_outside(d, &shown_int(ob), path))),
    }
}

/// [`typed_value`] for dicts, tuples and lists.
fn structured_value<'py>(ob: &Bound<'py, PyAny>, t: &Type, path: &str, memo: &mut Converted<'py>) -> PyResult<Value> {
    match t {
        Type::Dict(slots) => {
            let Ok(d) = ob.cast::<PyDict>() else { return to_value_in(ob, &|| path.to_string()) };
            let mut missing = Vec::new();
            let mut items = Vec::with_capacity(slots.len());
            for (k, st) in slots {
                match d.get_item(k)? {
                    Some(v) => items.push(typed_value(&v, st, &format!("{path}[{k:?}]"), memo)?),
                    None => missing.push(format!("{k:?}")),
                }
            }
            let mut extra = Vec::new();
            for k in d.keys() {
                let known = k.extract::<String>().is_ok_and(|k| slots.iter().any(|(s, _)| *s == k));
                if !known {
                    extra.push(k.repr()?.to_string());
                }
            }
            if !missing.is_empty() || !extra.is_empty() {
                let mut parts = Vec::new();
                if !missing.is_empty() {
                    parts.push(format!("missing key(s) {}", missing.join(", ")));
                }
                if !extra.is_empty() {
                    parts.push(format!("unexpected key(s) {}", extra.join(", ")));
                }
                let keys: Vec<String> = slots.iter().map(|(k, _)| format!("{k:?}")).collect();
                return Err(value_error(
                    ob.py(),
                    format!("{path}: expected a dict with keys {}; {}", keys.join(", "), parts.join("; ")),
                ));
            }
            Ok(Value::tuple(items))
        }
        Type::Tuple(slots) => {
            if !(ob.is_instance_of::<PyTuple>() || ob.is_instance_of::<PyList>()) || ob.len()? != slots.len() {
                return to_value_in(ob, &|| path.to_string());
            }
            let items = ob
                .try_iter()?
                .zip(slots)
                .enumerate()
                .map(|(i, (v, st))| typed_value(&v?, st, &format!("{path}[{i}]"), memo))
                .collect::<PyResult<Vec<_>>>()?;
            Ok(Value::tuple(items))
        }
        Type::List(item) => {
            if !(ob.is_instance_of::<PyTuple>() || ob.is_instance_of::<PyList>()) {
                return to_value_in(ob, &|| path.to_string());
            }
            let items = ob
                .try_iter()?
                .enumerate()
                .map(|(i, v)| typed_value(&v?, item, &format!("{path}[{i}]"), memo))
                .collect::<PyResult<Vec<_>>>()?;
            Ok(Value::tuple(items))
        }
        _ => to_value_in(ob, &|| path.to_string()),
    }
}

/// The path of parameter `name` of `func` in errors, as the VM writes it.
pub fn param_path(func: &str, name: &str) -> String {
    format!("parameter {name:?} of {func}")
}

/// Converts a result of type `t` back to Python: dicts for `dict<{...}>`, lists for `list<...>`.
/// A VM tuple shared in several places becomes one Python object shared the same way (for the
/// same slot type), so a result whose sharing makes it exponentially large when unfolded
/// converts in time linear in its distinct tuples, as [`to_py`] does for untyped results.
pub fn typed_to_py<'py>(py: Python<'py>, v: &Value, t: &Type) -> PyResult<Bound<'py, PyAny>> {
    typed_py(py, v, t, &mut HashMap::new())
}

/// The results converted so far, by (address of the tuple's items, slot type); the value being
/// converted keeps every tuple alive, so no address is reused meanwhile.
type ConvertedBack<'py> = HashMap<(*const Vec<Value>, *const Type), Bound<'py, PyAny>>;

fn typed_py<'py>(py: Python<'py>, v: &Value, t: &Type, memo: &mut ConvertedBack<'py>) -> PyResult<Bound<'py, PyAny>> {
    let Value::Tuple(items) = v else { return to_py(py, v) };
    let key = (Arc::as_ptr(items), t as *const Type);
    if let Some(obj) = memo.get(&key) {
        return Ok(obj.clone());
    }
    let obj = match t {
        Type::Dict(slots) if slots.len() == items.len() => {
            let d = PyDict::new(py);
            for ((k, st), item) in slots.iter().zip(items.iter()) {
                d.set_item(k, typed_py(py, item, st, memo)?)?;
            }
            d.into_any()
        }
        Type::Tuple(slots) if slots.len() == items.len() => {
            let objs = slots
                .iter()
                .zip(items.iter())
                .map(|(st, item)| typed_py(py, item, st, memo))
                .collect::<PyResult<Vec<_>>>()?;
            PyTuple::new(py, objs)?.into_any()
        }
        Type::List(item_t) => {
            let objs = items.iter().map(|item| typed_py(py, item, item_t, memo)).collect::<PyResult<Vec<_>>>()?;
            PyList::new(py, objs)?.into_any()
        }
        _ => to_py(py, v)?,
    };
    memo.insert(key, obj.clone());
    Ok(obj)
}

/// True when `name` needs no quotes in the text form (the VM's rule).
#[pyfunction]
pub fn _is_plain_name(name: &str) -> bool {
    relaxvm::text::is_plain_name(name)
}
