//! The `relax.run.*` functions that Apache TVM implements in Python and Relax programs call by
//! name (`R.call_pure_packed("relax.run.unique", ...)`, and the lowering of `R.print`,
//! `R.assert_op`, `R.nonzero`, `R.unique`).
//!
//! | function | arguments | result |
//! |---|---|---|
//! | `relax.run.nonzero` | `(x)` | int64 `(max(ndim, 1), count)`: `np.stack(np.atleast_1d(x).nonzero())` |
//! | `relax.run.unique` | `(x, sorted, return_index, return_inverse, return_counts, [axis])` | see [`unique`](self) below |
//! | `relax.run.shape_to_tensor` | `(shape)` | a 1-D int64 tensor of the dimensions (float64 `(0,)` for `()`, as numpy makes it) |
//! | `relax.run.print` | `(format_str, x...)` | null; prints `format_str.format(*rendered)`, or the rendered values space-separated when `format_str` is empty |
//! | `relax.run.assert_op` | `(cond, format_str, x...)` | null, or an error `"Assertion Failed"` / the formatted message |
//!
//! `relax.run.unique` follows TVM's `numpy_unique` with numpy 2.x: the unique values alone when
//! no flag is set, else a tuple `(values, [index], [inverse], [counts])` with int64 index
//! outputs; NaNs collapse (flattened input); `sorted=False` orders by first occurrence.
//!
//! A failed assertion is an `AssertionError` (as in TVM, which raises it from Python) whose
//! message starts with the function's name and ends with TVM's text.

mod elements;
mod render;
mod unique;

use crate::args::{self, in_builtin, type_err, value_err};
use crate::table::{builtin, Builtin};
use elements::{elements, elements_polled, Raw};
use relaxvm::{dispatch_dtype, CallCtx, DataType, Error, ErrorKind, Result, Tensor, Value};

/// The builtins of this module.
pub(crate) const BUILTINS: &[Builtin] = &[
    builtin!("relax.run.nonzero", ctx nonzero),
    builtin!("relax.run.unique", ctx unique::unique),
    builtin!("relax.run.shape_to_tensor", shape_to_tensor),
    builtin!("relax.run.print", print),
    builtin!("relax.run.assert_op", assert_op),
];

/// `nonzero(x)`: the coordinates of the non-zero elements (NaN counts as non-zero), one row per
/// dimension; a 0-d input is treated as 1-D (`np.atleast_1d`).
fn nonzero(name: &'static str, ctx: &mut CallCtx<'_>, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 1)?;
    let x = args::tensor(name, args, 0, "x")?;
    let poll = &mut || ctx.check_interrupt();
    let flags = dispatch_dtype!(x.dtype(), T => nonzero_flags::<T>(name, x, &mut *poll)?);
    let dims: Vec<usize> = if x.ndim() == 0 { vec![1] } else { x.shape().iter().map(|d| *d as usize).collect() };
    let hits: Vec<usize> = flags.iter().enumerate().filter(|(_, f)| **f).map(|(i, _)| i).collect();
    let count = hits.len();
    let mut out = vec![0i64; dims.len() * count];
    for (k, &flat) in hits.iter().enumerate() {
        let mut rest = flat;
        for d in (0..dims.len()).rev() {
            out[d * count + k] = (rest % dims[d]) as i64;
            rest /= dims[d];
        }
    }
    let t = Tensor::from_vec([dims.len() as i64, count as i64], out).map_err(|e| in_builtin(name, e))?;
    Ok(Value::Tensor(t))
}

/// Whether each element (row-major) is non-zero: `x != 0` in `f64`, exact for every type
/// (no non-zero integer converts to 0.0, and NaN != 0).
fn nonzero_flags<T: Raw>(name: &str, x: &Tensor, poll: &mut dyn FnMut() -> Result<()>) -> Result<Vec<bool>> {
    Ok(elements_polled::<T>(name, x, poll)?.into_iter().map(|v| v.to_f64() != 0.0).collect())
}

/// `shape_to_tensor(shape)`: TVM's `tvm.runtime.tensor([int(v) for v in shape])`, which numpy
/// types int64 — except for an empty list, which numpy makes float64.
fn shape_to_tensor(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity(name, args, 1)?;
    let s = args::shape(name, args, 0, "shape")?;
    let t = if s.is_empty() {
        Tensor::zeros([0], DataType::F64, Default::default())
    } else {
        Tensor::from_vec([s.len() as i64], s.to_vec())
    };
    Ok(Value::Tensor(t.map_err(|e| in_builtin(name, e))?))
}

/// Argument `i` as the format string (TVM: a `str`; anything else is a `ValueError`).
fn format_arg<'a>(name: &str, args: &'a [Value], i: usize) -> Result<&'a str> {
    match args.get(i) {
        Some(Value::Str(s)) => Ok(s),
        Some(other) => Err(type_err(name, i, "format string", "str", other)),
        None => Err(Error::arity(name, format!("at least {}", i + 1), args.len())),
    }
}

/// The rendered values, formatted: `format_str.format(*rendered)`, or `sep`-joined when the
/// format string is empty.
fn message(name: &str, fmt: &str, values: &[Value], sep: &str) -> Result<String> {
    let rendered = values.iter().map(|v| render::render(name, v)).collect::<Result<Vec<_>>>()?;
    if fmt.is_empty() {
        Ok(rendered.join(sep))
    } else {
        render::py_format(name, fmt, &rendered)
    }
}

/// `print(format_str, x...)`: one line where prints go ([`crate::output`]).
fn print(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity_at_least(name, args, 1)?;
    let fmt = format_arg(name, args, 0)?;
    let line = message(name, fmt, &args[1..], " ")?;
    crate::output::write_line(&line).map_err(|e| in_builtin(name, Error::from(e)))?;
    Ok(Value::Null)
}

/// `assert_op(cond, format_str, x...)`: nothing when `cond` holds; else an error carrying
/// "Assertion Failed", or the values formatted by `format_str`, or comma-joined without one.
fn assert_op(name: &'static str, args: &[Value]) -> Result<Value> {
    args::arity_at_least(name, args, 2)?;
    let fmt = format_arg(name, args, 1)?;
    let holds = match &args[0] {
        Value::Bool(b) => *b,
        Value::Int(i) => *i != 0,
        Value::Tensor(t) => {
            // TVM's checks and texts.
            if t.dtype() != DataType::Bool {
                return Err(value_err(
                    name,
                    format!("The condition must be a bool scalar, but given a {} tensor", t.dtype()),
                ));
            }
            if t.ndim() != 0 {
                return Err(value_err(
                    name,
                    format!("The condition must be a scalar, but it has a shape of {}", t.shape()),
                ));
            }
            elements::<bool>(name, t)?[0]
        }
        other => return Err(type_err(name, 0, "condition", "bool, int or 0-d bool tensor", other)),
    };
    if holds {
        return Ok(Value::Null);
    }
    let values = &args[2..];
    let msg = if values.is_empty() && fmt.is_empty() {
        "Assertion Failed".to_string()
    } else {
        message(name, fmt, values, ", ")?
    };
    Err(ErrorKind::Raised { kind: "AssertionError".into(), message: format!("{name}: {msg}") }.into())
}
