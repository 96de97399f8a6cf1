//! Assigning a Python call's positional and keyword arguments to a VM function's parameters, and
//! converting each to a VM value (by its parameter's type when the function has a signature).

use crate::convert::{to_value_in, Args};
use crate::signature::{param_path, typed_to_value};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use relaxvm::{Signature, Value};

/// What is known of a function's parameters.
#[derive(Clone, Copy)]
pub enum Params<'a> {
    /// A signature: names and types.
    Typed(&'a Signature),
    /// Names only (possibly none: then arguments go by position only).
    Named(&'a [String]),
}

/// Converts argument `i` of a call of function `name`, by its parameter's type when known.
#[inline]
pub fn convert_arg(name: &str, params: Params<'_>, i: usize, ob: &Bound<'_, PyAny>) -> PyResult<Value> {
    match params {
        Params::Typed(sig) => match sig.params.get(i) {
            Some((p, t)) => typed_to_value(ob, t, &param_path(name, p)),
            None => to_value_in(ob, &|| arg_place(name, None, i)),
        },
        Params::Named(names) => to_value_in(ob, &|| arg_place(name, names.get(i).map(String::as_str), i)),
    }
}

/// Where argument `i` of a call of `func` goes, for its errors: the parameter when named.
fn arg_place(func: &str, param: Option<&str>, i: usize) -> String {
    match param {
        Some(p) => param_path(func, p),
        None => format!("argument {i} of {func}"),
    }
}

/// Assigns `args` and `kwargs` to the parameters of function `name` into `argv`. Keyword
/// arguments go by parameter name, after the positional ones; extra or missing positional
/// arguments without keywords are left for the VM's count check.
pub fn assign_args(
    name: &str,
    params: Params<'_>,
    args: &Bound<'_, PyTuple>,
    kwargs: Option<&Bound<'_, PyDict>>,
    argv: &mut Args,
) -> PyResult<()> {
    let convert = |i: usize, ob: &Bound<'_, PyAny>| convert_arg(name, params, i, ob);
    let Some(kw) = kwargs.filter(|k| !k.is_empty()) else {
        return match params {
            Params::Typed(_) => {
                for (i, a) in args.iter().enumerate() {
                    argv.push(convert(i, &a)?);
                }
                Ok(())
            }
            Params::Named(_) => {
                for (i, a) in args.iter_borrowed().enumerate() {
                    argv.push(convert(i, &a)?);
                }
                Ok(())
            }
        };
    };
    let names: Vec<&str> = match params {
        Params::Typed(sig) => sig.param_names().collect(),
        Params::Named([]) => {
            return Err(PyTypeError::new_err(format!(
                "{name}() has no parameter names: pass its arguments by position"
            )))
        }
        Params::Named(names) => names.iter().map(String::as_str).collect(),
    };
    let mut slots: Vec<Option<Bound<'_, PyAny>>> = vec![None; names.len().max(args.len())];
    for (i, a) in args.iter().enumerate() {
        slots[i] = Some(a);
    }
    for (k, v) in kw.iter() {
        let k: String = k.extract()?;
        let i = names
            .iter()
            .position(|p| *p == k)
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
                let what = match params {
                    Params::Typed(sig) => format!("'{}' ({})", sig.params[i].0, sig.params[i].1),
                    Params::Named(_) => format!("'{}'", names.get(i).copied().unwrap_or("?")),
                };
                return Err(PyTypeError::new_err(format!("{name}() missing argument {what}")));
            }
        }
    }
    Ok(())
}
