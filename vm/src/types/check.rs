//! Arguments against types at the call boundary: counts, types, dtypes, ranks, static and
//! symbolic dimensions, and the conversions the callee expects.

use super::{Dim, Signature, Type};
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::value::Value;
use std::collections::HashMap;

impl Type {
    /// Checks `v` against this type, binding symbolic dimensions in `dims`; `path` names the
    /// parameter (and slot) in errors. Type and dtype mismatches are type errors; rank and
    /// dimension mismatches are value errors.
    pub fn check(&self, v: &Value, path: &str, dims: &mut HashMap<String, (i64, String)>) -> Result<()> {
        let wrong = |expected: &str| Err(Error::type_mismatch(format!("{expected} for {path}"), v.describe()));
        match (self, v) {
            (Type::Any, _) | (Type::Object, _) => Ok(()),
            (Type::Scalar(DataType::Bool), Value::Bool(_)) => Ok(()),
            (Type::Scalar(d), Value::Int(i)) if !d.is_float() && *d != DataType::Bool => check_int_range(*d, *i, path),
            (Type::Scalar(d), Value::Float(_) | Value::Int(_)) if d.is_float() => Ok(()),
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
                    .try_for_each(|(i, (t, v))| t.check(v, &format!("{path}[{i}]"), dims))
            }
            (Type::List(item), Value::Tuple(items)) => {
                items.iter().enumerate().try_for_each(|(i, v)| item.check(v, &format!("{path}[{i}]"), dims))
            }
            (Type::Dict(slots), Value::Tuple(items)) => {
                if slots.len() != items.len() {
                    return Err(Error::value(format!(
                        "{path}: expected a structure of {} slots, got {}",
                        slots.len(),
                        items.len()
                    )));
                }
                slots.iter().zip(items.iter()).try_for_each(|((k, t), v)| t.check(v, &format!("{path}[{k:?}]"), dims))
            }
            (Type::Tuple(_), _) => wrong("tuple"),
            (Type::List(_), _) => wrong("list"),
            (Type::Dict(_), _) => wrong("dict"),
        }
    }

    /// Converts `v` to what the callee expects once it has passed [`Type::check`]: ints become
    /// floats for float scalars, strided tensors become contiguous where that is declared (an
    /// allocation error when the copy does not fit in memory).
    pub fn coerce(&self, v: Value) -> Result<Value> {
        Ok(match (self, &v) {
            (Type::Scalar(d), Value::Int(i)) if d.is_float() => Value::Float(*i as f64),
            (Type::Tensor { contiguous: true, .. }, Value::Tensor(t)) => Value::Tensor(t.contiguous()?),
            (Type::Tuple(slots), Value::Tuple(items)) => Value::tuple(
                slots.iter().zip(items.iter()).map(|(t, v)| t.coerce(v.clone())).collect::<Result<Vec<_>>>()?,
            ),
            (Type::Dict(slots), Value::Tuple(items)) => Value::tuple(
                slots.iter().zip(items.iter()).map(|((_, t), v)| t.coerce(v.clone())).collect::<Result<Vec<_>>>()?,
            ),
            (Type::List(item), Value::Tuple(items)) => {
                Value::tuple(items.iter().map(|v| item.coerce(v.clone())).collect::<Result<Vec<_>>>()?)
            }
            _ => v,
        })
    }
}

fn check_int_range(d: DataType, i: i64, path: &str) -> Result<()> {
    let bits = u32::from(d.bits());
    let ok = match d.class() {
        crate::dtype::TypeClass::UInt => i >= 0 && (bits >= 64 || i < (1i64 << bits)),
        _ => bits >= 64 || (i >= -(1i64 << (bits - 1)) && i < (1i64 << (bits - 1))),
    };
    if ok {
        Ok(())
    } else {
        Err(Error::value(format!("{path}: {i} does not fit in {d}")))
    }
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

    /// Checks and converts arguments (see [`Type::coerce`]).
    pub fn prepare_args(&self, func: &str, args: &[Value]) -> Result<Vec<Value>> {
        self.check_args(func, args)?;
        self.params.iter().zip(args).map(|((_, t), v)| t.coerce(v.clone())).collect()
    }
}
