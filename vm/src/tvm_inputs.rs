//! TVM's `set_input` rule for numbers: TVM's stateful calls take tensors, so the numbers given
//! to `set_input` become 0-d tensors (an int or a bool an int32 tensor, a float a float32 one),
//! inside tuples too, except where the function's signature declares a scalar. A binding
//! converts its user's values and calls [`numbers_as_tensors`] before
//! [`VirtualMachine::set_input`](crate::VirtualMachine::set_input), which takes values as they
//! are.

use crate::{Executable, FuncKind, Signature, Tensor, Type, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// An int that TVM's rule cannot make a tensor of: it makes an int32 of an int.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("set_input: {0} does not fit in int32 (what TVM makes of an int)")]
pub struct IntOutOfRange(pub i64);

impl From<IntOutOfRange> for crate::Error {
    fn from(e: IntOutOfRange) -> Self {
        crate::Error::value(e.to_string())
    }
}

/// The signature TVM's rule reads for function `name` of `exe`: the one a bytecode function
/// declares (a packed or native function has none the rule could use).
pub fn declared_signature<'a>(exe: &'a Executable, name: &str) -> Option<&'a Signature> {
    exe.func(name).filter(|f| f.kind == FuncKind::Bytecode).and_then(|f| f.signature.as_ref())
}

/// `inputs` of a function with `signature` (if it has one) by TVM's `set_input` rule (see the
/// module's documentation): parameter `i` is converted against the signature's type of it.
pub fn numbers_as_tensors(inputs: Vec<Value>, signature: Option<&Signature>) -> Result<Vec<Value>, IntOutOfRange> {
    let mut converted = Converted::new();
    inputs
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let declared = signature.and_then(|s| s.params.get(i)).map(|(_, t)| t);
            convert(v, declared, &mut converted)
        })
        .collect()
}

/// Tuples converted so far, by the tuple and the type it was converted against: a tuple shared
/// in several places (`v = (v, v)` nested 40 deep) is converted once, and its copies stay
/// shared, where walking each place would take 2^40 steps.
/// Each entry keeps its tuple alive, so that no other tuple can take its address meanwhile.
type Converted = HashMap<(*const Vec<Value>, *const Type), (Arc<Vec<Value>>, Value)>;

/// One value by the rule, against `declared`, its place's type in the signature.
fn convert(v: Value, declared: Option<&Type>, converted: &mut Converted) -> Result<Value, IntOutOfRange> {
    if matches!(declared, Some(Type::Scalar(_))) {
        return Ok(v);
    }
    Ok(match &v {
        Value::Int(i) => Value::Tensor(Tensor::scalar(i32::try_from(*i).map_err(|_| IntOutOfRange(*i))?)),
        Value::Bool(b) => Value::Tensor(Tensor::scalar(i32::from(*b))),
        Value::Float(x) => Value::Tensor(Tensor::scalar(*x as f32)),
        Value::Tuple(items) => {
            let key = (Arc::as_ptr(items), declared.map_or(std::ptr::null(), |t| t as *const Type));
            if let Some((_, done)) = converted.get(&key) {
                return Ok(done.clone());
            }
            let item_type = |k: usize| match declared {
                Some(Type::Tuple(types)) => types.get(k),
                Some(Type::List(t)) => Some(&**t),
                Some(Type::Dict(fields)) => fields.get(k).map(|(_, t)| t),
                _ => None,
            };
            let out = items
                .iter()
                .enumerate()
                .map(|(k, x)| convert(x.clone(), item_type(k), converted))
                .collect::<Result<Vec<_>, _>>()?;
            let out = Value::tuple(out);
            converted.insert(key, (Arc::clone(items), out.clone()));
            out
        }
        _ => v,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DataType;

    fn tensor(v: &Value) -> &Tensor {
        match v {
            Value::Tensor(t) => t,
            other => panic!("expected a tensor, found {other:?}"),
        }
    }

    #[test]
    fn numbers_become_0d_tensors_of_tvms_types() {
        let out = numbers_as_tensors(vec![Value::Int(-7), Value::Bool(true), Value::Float(0.5)], None).unwrap();
        let kinds: Vec<_> = out.iter().map(|v| (tensor(v).dtype(), tensor(v).shape().len())).collect();
        assert_eq!(kinds, [(DataType::I32, 0), (DataType::I32, 0), (DataType::F32, 0)]);
        assert_eq!(tensor(&out[0]).scalar_i64(), Some(-7));
        assert_eq!(tensor(&out[1]).scalar_i64(), Some(1));
        assert_eq!(tensor(&out[2]).scalar_f64(), Some(0.5));
        // Anything else is kept as it is.
        let out = numbers_as_tensors(vec![Value::str("s"), Value::Null], None).unwrap();
        assert!(matches!(&out[..], [Value::Str(_), Value::Null]));
    }

    #[test]
    fn an_int_outside_int32_is_an_error_saying_so() {
        for i in [i64::from(i32::MAX) + 1, i64::from(i32::MIN) - 1, i64::MAX] {
            let e = numbers_as_tensors(vec![Value::tuple(vec![Value::Int(i)])], None).unwrap_err();
            assert_eq!(e, IntOutOfRange(i));
            assert_eq!(e.to_string(), format!("set_input: {i} does not fit in int32 (what TVM makes of an int)"));
            assert_eq!(crate::Error::from(e).to_string(), e.to_string());
        }
        for i in [i64::from(i32::MAX), i64::from(i32::MIN)] {
            let out = numbers_as_tensors(vec![Value::Int(i)], None).unwrap();
            assert_eq!(tensor(&out[0]).scalar_i64(), Some(i));
        }
    }

    #[test]
    fn a_declared_scalar_stays_a_number_in_params_and_inside_tuples_lists_and_dicts() {
        let sig: Signature =
            "(a: i64, b: tuple<f32, any>, c: list<i64>, d: dict<{k: f64, t: any}>, e: any) -> any".parse().unwrap();
        let pair = |x: Value, y: Value| Value::tuple(vec![x, y]);
        let inputs = vec![
            Value::Int(1),
            pair(Value::Float(1.5), Value::Float(2.5)),
            pair(Value::Int(3), Value::Int(4)),
            pair(Value::Float(5.0), Value::Int(6)),
            Value::Int(7),
        ];
        let out = numbers_as_tensors(inputs, Some(&sig)).unwrap();
        assert!(matches!(out[0], Value::Int(1)));
        let items = |v: &Value| v.as_tuple().unwrap().to_vec();
        let b = items(&out[1]);
        assert!(matches!(b[0], Value::Float(_)) && tensor(&b[1]).dtype() == DataType::F32);
        assert!(items(&out[2]).iter().all(|v| matches!(v, Value::Int(_))));
        let d = items(&out[3]);
        assert!(matches!(d[0], Value::Float(_)) && tensor(&d[1]).dtype() == DataType::I32);
        assert!(matches!(out[4], Value::Tensor(_)), "`any` is no scalar");
        // A tensor parameter's number is made a tensor too (the signature check then judges it).
        let sig: Signature = "(x: tensor<[], f32>) -> any".parse().unwrap();
        assert!(matches!(numbers_as_tensors(vec![Value::Int(2)], Some(&sig)).unwrap()[0], Value::Tensor(_)));
    }

    #[test]
    fn a_shared_tuple_is_converted_once_and_stays_shared() {
        // 2^60 places, 61 tuples: a walk of every place would not end.
        let mut v = Value::tuple(vec![Value::Int(1)]);
        for _ in 0..60 {
            v = Value::tuple(vec![v.clone(), v]);
        }
        let out = numbers_as_tensors(vec![v], None).unwrap();
        let mut cur = out[0].clone();
        for _ in 0..60 {
            let items = cur.as_tuple().unwrap().to_vec();
            assert!(items[0].same_object(&items[1]), "the two places hold one converted tuple");
            cur = items[0].clone();
        }
        assert!(matches!(cur.as_tuple().unwrap()[0], Value::Tensor(_)));
    }
}
