//! Arguments against types at the call boundary: counts, types, dtypes, ranks, static and
//! symbolic dimensions, and the conversions the callee expects.

use super::{Dim, Signature, Type};
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::value::Value;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

impl Type {
    /// Checks `v` against this type, recording symbolic dimensions in `dims`; `path` names the
    /// parameter (and slot) in errors. Type and dtype mismatches are type errors; rank and
    /// dimension mismatches are value errors.
    pub fn check(&self, v: &Value, path: &str, dims: &mut HashMap<String, (i64, String)>) -> Result<()> {
        self.check_in(v, path, dims, &mut HashSet::new())
    }

    /// [`check`](Self::check), skipping a tuple already checked against the same type: a tuple
    /// shared in several places (`v = (v, v)` nested 40 deep: 2^40 leaves unfolded) is checked
    /// once per type, in time linear in the distinct tuples. Checking it again would bind the
    /// same dimensions to the same values and pass again.
    fn check_in(&self, v: &Value, path: &str, dims: &mut Dims, passed: &mut Passed) -> Result<()> {
        if let Value::Tuple(items) = v {
            let key = (Arc::as_ptr(items), self as *const Type);
            if passed.contains(&key) {
                return Ok(());
            }
            self.check_one(v, path, dims, passed)?;
            passed.insert(key);
            return Ok(());
        }
        self.check_one(v, path, dims, passed)
    }

    fn check_one(&self, v: &Value, path: &str, dims: &mut Dims, passed: &mut Passed) -> Result<()> {
        let wrong = |expected: &str| Err(Error::type_mismatch(format!("{expected} for {path}"), v.describe()));
        match (self, v) {
            (Type::Any, _) | (Type::Object, _) => Ok(()),
            (Type::Scalar(DataType::Bool), Value::Bool(_)) => Ok(()),
            (Type::Scalar(d), Value::Int(i)) if !d.is_float() && *d != DataType::Bool => check_int_range(*d, *i, path),
            (Type::Scalar(d), Value::Float(f)) if d.is_float() => check_float_range(*d, *f, || format!("{f:?}"), path),
            (Type::Scalar(d), Value::Int(i)) if d.is_float() => {
                check_float_range(*d, *i as f64, || i.to_string(), path)
            }
            (Type::Scalar(d), _) => wrong(d.name()),
            (Type::Str, Value::Str(_)) => Ok(()),
            (Type::Str, _) => wrong("str"),
            (Type::Tensor { dtype, dims: want, .. }, Value::Tensor(t)) => {
                if let Some(d) = dtype {
                    if *d != t.dtype() {
                        return Err(Error::type_mismatch(
                            format!("tensor of {d} for {path}"),
                            format!("tensor of {}", t.dtype()),
                        ));
                    }
                }
                match want {
                    None => Ok(()),
                    Some(want) => check_dims(want, t.shape(), path, dims),
                }
            }
            (Type::Tensor { .. }, _) => wrong("tensor"),
            (Type::Shape(n), Value::Shape(s)) => match n {
                Some(n) if *n as usize != s.len() => {
                    Err(Error::value(format!("{path}: expected a shape of {n} dimensions, got {s}")))
                }
                _ => Ok(()),
            },
            (Type::Shape(_), _) => wrong("shape"),
            (Type::Tuple(slots), Value::Tuple(items)) => {
                if slots.len() != items.len() {
                    return Err(Error::value(format!(
                        "{path}: expected a tuple of {} items, got {}",
                        slots.len(),
                        items.len()
                    )));
                }
                slots
                    .iter()
                    .zip(items.iter())
                    .enumerate()
                    .try_for_each(|(i, (t, v))| t.check_in(v, &format!("{path}[{i}]"), dims, passed))
            }
            (Type::List(item), Value::Tuple(items)) => {
                items.iter().enumerate().try_for_each(|(i, v)| item.check_in(v, &format!("{path}[{i}]"), dims, passed))
            }
            (Type::Dict(slots), Value::Tuple(items)) => {
                if slots.len() != items.len() {
                    return Err(Error::value(format!(
                        "{path}: expected a structure of {} slots, got {}",
                        slots.len(),
                        items.len()
                    )));
                }
                slots
                    .iter()
                    .zip(items.iter())
                    .try_for_each(|((k, t), v)| t.check_in(v, &format!("{path}[{k:?}]"), dims, passed))
            }
            (Type::Tuple(_), _) => wrong("tuple"),
            (Type::List(_), _) => wrong("list"),
            (Type::Dict(_), _) => wrong("dict"),
        }
    }

    /// Converts `v` to what the callee expects once it has passed [`Type::check`]: ints become
    /// floats for float scalars, strided tensors become contiguous where that is declared (an
    /// allocation error when the copy does not fit in memory). A tuple shared in several places
    /// is converted once per type and its conversion shared the same way.
    pub fn coerce(&self, v: Value) -> Result<Value> {
        self.coerce_in(v, &mut HashMap::new())
    }

    fn coerce_in(&self, v: Value, done: &mut Coerced) -> Result<Value> {
        let Value::Tuple(items) = &v else { return self.coerce_one(v, done) };
        let key = (Arc::as_ptr(items), self as *const Type);
        if let Some(c) = done.get(&key) {
            return Ok(c.clone());
        }
        // `v` holds the tuple until the end of this call and the caller holds its parent, so
        // no address in `done` is reused while it is in use.
        let c = self.coerce_one(v.clone(), done)?;
        done.insert(key, c.clone());
        Ok(c)
    }

    fn coerce_one(&self, v: Value, done: &mut Coerced) -> Result<Value> {
        Ok(match (self, &v) {
            (Type::Scalar(d), Value::Int(i)) if d.is_float() => Value::Float(*i as f64),
            (Type::Tensor { contiguous: true, .. }, Value::Tensor(t)) => Value::Tensor(t.contiguous()?),
            (Type::Tuple(slots), Value::Tuple(items)) => Value::tuple(
                slots
                    .iter()
                    .zip(items.iter())
                    .map(|(t, v)| t.coerce_in(v.clone(), done))
                    .collect::<Result<Vec<_>>>()?,
            ),
            (Type::Dict(slots), Value::Tuple(items)) => Value::tuple(
                slots
                    .iter()
                    .zip(items.iter())
                    .map(|((_, t), v)| t.coerce_in(v.clone(), done))
                    .collect::<Result<Vec<_>>>()?,
            ),
            (Type::List(item), Value::Tuple(items)) => {
                Value::tuple(items.iter().map(|v| item.coerce_in(v.clone(), done)).collect::<Result<Vec<_>>>()?)
            }
            _ => v,
        })
    }
}

impl Type {
    /// True when tensor `t` is of this tensor type by its dtype, contiguity and static
    /// dimensions alone (no symbolic dimension to bind, no string made): the common typed
    /// result passes with a few comparisons; anything else takes the full check.
    fn holds_at_once(&self, t: &crate::tensor::Tensor) -> bool {
        let Type::Tensor { dtype, dims, contiguous } = self else { return false };
        let fits = |want: &Vec<Dim>| {
            want.len() == t.shape().len()
                && want.iter().zip(t.shape().iter()).all(|(w, g)| match w {
                    Dim::Unknown => true,
                    Dim::Static(n) => n == g,
                    Dim::Symbolic(_) => false,
                })
        };
        dtype.is_none_or(|d| d == t.dtype()) && (!contiguous || t.is_contiguous()) && dims.as_ref().is_none_or(fits)
    }
}

/// Symbolic dimensions bound so far: name -> (value, where it was bound).
type Dims = HashMap<String, (i64, String)>;
/// Tuples (by the address of their items) that passed a check against a type.
type Passed = HashSet<(*const Vec<Value>, *const Type)>;
/// Tuples (by the address of their items) converted for a type, and their conversions.
type Coerced = HashMap<(*const Vec<Value>, *const Type), Value>;

fn check_int_range(d: DataType, i: i64, path: &str) -> Result<()> {
    let bits = u32::from(d.bits());
    let ok = match d.class() {
        crate::dtype::TypeClass::UInt => i >= 0 && (bits >= 64 || i < (1i64 << bits)),
        _ => bits >= 64 || (i >= -(1i64 << (bits - 1)) && i < (1i64 << (bits - 1))),
    };
    if ok {
        Ok(())
    } else {
        Err(int_outside(d, &i.to_string(), path))
    }
}

/// The refusal of an int (`shown`: its text) outside integer type `d` at `path`, with `d`'s
/// range: the one message for an int outside a declared type, whether the VM finds it or the
/// Python binding does (an int past int64 never becomes a VM value).
pub fn int_outside(d: DataType, shown: &str, path: &str) -> Error {
    let bits = u32::from(d.bits());
    let range = match d.class() {
        // The VM holds ints as int64, so a uint64 parameter takes the non-negative half.
        crate::dtype::TypeClass::UInt if bits >= 64 => "0..2^63-1, the VM's ints being int64".to_string(),
        crate::dtype::TypeClass::UInt => format!("0..2^{bits}-1"),
        _ => format!("-2^{}..2^{}-1", bits - 1, bits - 1),
    };
    Error::value(format!("{path}: {shown} does not fit in {d} ({range})"))
}

/// The largest finite value of float type `d`, or `None` when every finite f64 is one
/// (float64) or `d` is not a float.
fn float_max(d: DataType) -> Option<f32> {
    match d {
        DataType::F16 => Some(half::f16::MAX.to_f32()),
        DataType::BF16 => Some(half::bf16::MAX.to_f32()),
        DataType::F32 => Some(f32::MAX),
        _ => None,
    }
}

/// True when `v` is a value of float type `d`: inf and nan are (every float type holds them);
/// a finite value is when its magnitude is at most `d`'s largest finite value (past it, storing
/// it as `d` would make it inf).
pub fn float_fits(d: DataType, v: f64) -> bool {
    float_max(d).is_none_or(|max| !v.is_finite() || v.abs() <= f64::from(max))
}

fn check_float_range(d: DataType, v: f64, shown: impl FnOnce() -> String, path: &str) -> Result<()> {
    if float_fits(d, v) {
        Ok(())
    } else {
        Err(float_outside(d, &shown(), path))
    }
}

/// The refusal of a finite number (`shown`: its text) past the range of float type `d` at
/// `path`, in [`int_outside`]'s form: the one message for a value no `d` holds, whether the VM
/// finds it (a scalar) or the Python binding does (an element of a list for a tensor).
pub fn float_outside(d: DataType, shown: &str, path: &str) -> Error {
    let max = float_max(d).map_or_else(|| format!("{:?}", f64::MAX), |m| format!("{m:?}"));
    Error::value(format!("{path}: {shown} does not fit in {d} (|x| <= {max})"))
}

fn check_dims(want: &[Dim], got: &[i64], path: &str, bound: &mut HashMap<String, (i64, String)>) -> Result<()> {
    if want.len() != got.len() {
        return Err(Error::value(format!(
            "{path}: expected a tensor of rank {}, got shape {:?} (rank {})",
            want.len(),
            got,
            got.len()
        )));
    }
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        match w {
            Dim::Unknown => {}
            Dim::Static(n) if n == g => {}
            Dim::Static(n) => {
                return Err(Error::value(format!("{path}: dimension {i} must be {n}, got {g} (shape {got:?})")))
            }
            Dim::Symbolic(s) => match bound.get(s) {
                Some((v, _)) if v == g => {}
                Some((v, at)) => {
                    return Err(Error::value(format!("{path}: dimension {i} is {g}, but symbol {s} is {v} from {at}")))
                }
                None => {
                    bound.insert(s.clone(), (*g, format!("{path} dimension {i}")));
                }
            },
        }
    }
    Ok(())
}

impl Signature {
    /// Checks arguments against the parameters: count, types, dtypes, ranks, static and symbolic
    /// dimensions. The error names the parameter, what was expected and what was given.
    pub fn check_args(&self, func: &str, args: &[Value]) -> Result<()> {
        if args.len() != self.params.len() {
            return Err(Error::arity(func, self.params.len().to_string(), args.len()));
        }
        let mut dims = HashMap::new();
        for ((name, t), v) in self.params.iter().zip(args) {
            t.check(v, &format!("parameter {name:?} of {func}"), &mut dims)?;
        }
        Ok(())
    }

    /// Checks a function's result against the declared result type and converts it as
    /// arguments are (an int for a float scalar becomes a float), where the VM returns to its
    /// caller: a result of another type is an [`ErrorKind::Type`](crate::error::ErrorKind)
    /// error naming the function, the declared type and what was returned (`type mismatch:
    /// expected bool for result of main, found int 1`), a wrong shape or arity an
    /// [`ErrorKind::Value`](crate::error::ErrorKind) one. `-> any` and the common results of
    /// their declared kind cost one comparison of tags.
    #[inline]
    pub fn prepare_result(&self, func: &str, v: Value) -> Result<Value> {
        let at_once = matches!(
            (&self.result, &v),
            (Type::Any | Type::Object, _)
                | (Type::Str, Value::Str(_))
                | (Type::Scalar(DataType::Bool), Value::Bool(_))
                | (Type::Scalar(DataType::I64), Value::Int(_))
                | (Type::Scalar(DataType::F64), Value::Float(_))
        ) || matches!((&self.result, &v), (t @ Type::Tensor { .. }, Value::Tensor(x)) if t.holds_at_once(x));
        if at_once {
            return Ok(v);
        }
        self.check_result(func, v)
    }

    fn check_result(&self, func: &str, v: Value) -> Result<Value> {
        self.result.check(&v, &format!("result of {func}"), &mut HashMap::new())?;
        self.result.coerce(v)
    }

    /// Checks and converts arguments (see [`Type::coerce`]).
    pub fn prepare_args(&self, func: &str, args: &[Value]) -> Result<Vec<Value>> {
        self.check_args(func, args)?;
        self.params.iter().zip(args).map(|((_, t), v)| t.coerce(v.clone())).collect()
    }
}
