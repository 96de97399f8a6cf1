//! How `relaxvm run` shows a result: as text naming every tensor's dtype and shape (the way
//! numpy's repr does), or as JSON for programs to read.

use super::error::CliError;
use relaxvm::{dispatch_dtype, Element, Tensor, Value};
use serde_json::{json, Map, Number};
use std::fmt::Write;

/// How deeply nested tuples are shown before the rest is elided (text) or refused (JSON).
const MAX_DEPTH: usize = 64;
/// How many tuple items, at all depths, are shown before the rest is elided or refused: a
/// tuple shared many times over would otherwise unfold to exponential size.
const MAX_ITEMS: usize = 100_000;

/// The text of a result: tensors as `tensor([...], dtype=float32, shape=(2, 3))`, tuples as
/// `(a, b)`, anything else as the VM prints it.
pub fn text(v: &Value) -> String {
    let mut out = String::new();
    let mut budget = MAX_ITEMS;
    write_text(&mut out, v, 0, &mut budget);
    out
}

fn write_text(out: &mut String, v: &Value, depth: usize, budget: &mut usize) {
    match v {
        Value::Tensor(t) => {
            const OPEN: &str = "tensor(";
            let body = t.to_string().replace('\n', &format!("\n{:w$}", "", w = OPEN.len()));
            let dims: Vec<String> = t.shape().iter().map(i64::to_string).collect();
            let comma = if dims.len() == 1 { "," } else { "" };
            let _ = write!(out, "{OPEN}{body}, dtype={}, shape=({}{comma}))", t.dtype(), dims.join(", "));
        }
        Value::Tuple(_) if depth >= MAX_DEPTH => out.push_str("(...)"),
        Value::Tuple(items) => {
            out.push('(');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                if *budget == 0 {
                    out.push_str("...");
                    break;
                }
                *budget -= 1;
                write_text(out, item, depth + 1, budget);
            }
            out.push_str(if items.len() == 1 { ",)" } else { ")" });
        }
        other => {
            let _ = write!(out, "{other}");
        }
    }
}

/// The JSON of a result: tensors as `{"dtype", "shape", "data"}` with the elements as nested
/// lists, shapes as `{"shape": [...]}`, tuples as lists, scalars and strings as themselves,
/// `None` as null; a float that JSON cannot hold as `"nan"`, `"inf"` or `"-inf"`.
pub fn json(v: &Value) -> Result<serde_json::Value, CliError> {
    let mut budget = MAX_ITEMS;
    to_json(v, 0, &mut budget)
}

fn to_json(v: &Value, depth: usize, budget: &mut usize) -> Result<serde_json::Value, CliError> {
    Ok(match v {
        Value::Null => serde_json::Value::Null,
        Value::Int(i) => json!(i),
        Value::Float(x) => float(*x),
        Value::Bool(b) => json!(b),
        Value::Str(s) => json!(&**s),
        Value::DType(d) => json!(d.name()),
        Value::Device(d) => json!(d.to_string()),
        Value::Shape(s) => json!({ "shape": s.dims() }),
        Value::Tensor(t) => {
            let mut m = Map::new();
            m.insert("dtype".into(), json!(t.dtype().name()));
            m.insert("shape".into(), json!(t.shape().dims()));
            m.insert("data".into(), tensor_data(t)?);
            serde_json::Value::Object(m)
        }
        Value::Tuple(items) => {
            if depth >= MAX_DEPTH || items.len() > *budget {
                return Err(CliError::new(format!(
                    "the result is nested deeper than {MAX_DEPTH} tuples or holds more than {MAX_ITEMS} items: too large for JSON"
                )));
            }
            *budget -= items.len();
            serde_json::Value::Array(items.iter().map(|x| to_json(x, depth + 1, budget)).collect::<Result<_, _>>()?)
        }
        Value::Func(c) => json!({ "function": c.name() }),
        other => {
            return Err(CliError::new(format!("the result is a {}, which has no JSON form", other.type_name())));
        }
    })
}

fn float(x: f64) -> serde_json::Value {
    match Number::from_f64(x) {
        Some(n) => serde_json::Value::Number(n),
        None if x.is_nan() => json!("nan"),
        None => json!(if x > 0.0 { "inf" } else { "-inf" }),
    }
}

/// The most tensor elements `--json` writes (each becomes a JSON value): past it, save `.npy`.
const MAX_JSON_ELEMENTS: usize = 1 << 24;
/// The most dimensions a tensor may have to be written as nested lists (numpy allows 64).
const MAX_JSON_DIMS: usize = 64;

/// The elements of `t` as nested lists; integers exactly (also 64-bit ones).
fn tensor_data(t: &Tensor) -> Result<serde_json::Value, CliError> {
    if t.numel() > MAX_JSON_ELEMENTS || t.ndim() > MAX_JSON_DIMS {
        return Err(CliError::new(format!(
            "a tensor of shape {} is too large for JSON (at most {MAX_JSON_ELEMENTS} elements and {MAX_JSON_DIMS} dimensions): save it with -o result.npy",
            t.shape()
        )));
    }
    fn elem<T: Element>(x: T) -> serde_json::Value {
        let d = T::DTYPE;
        if d.is_float() {
            float(x.to_f64())
        } else if d == relaxvm::DataType::Bool {
            json!(x.to_f64() != 0.0)
        } else {
            // Display of an integer is its exact decimal form, which JSON numbers are.
            serde_json::from_str(&x.to_string()).unwrap_or(serde_json::Value::Null)
        }
    }
    fn nest<T: Element>(v: ndarray::ArrayViewD<'_, T>) -> serde_json::Value {
        if v.ndim() == 0 {
            return v.first().map_or(serde_json::Value::Null, |x| elem(*x));
        }
        serde_json::Value::Array(v.outer_iter().map(nest).collect())
    }
    dispatch_dtype!(t.dtype(), T => {
        let view = t.view::<T>()?;
        Ok(nest(view.view()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use relaxvm::{DataType, Shape};

    #[test]
    fn text_names_dtype_and_shape() {
        let t = Tensor::from_vec([2, 2], vec![1.0f32, 2.0, 3.0, 40.0]).unwrap();
        assert_eq!(
            text(&Value::Tensor(t.clone())),
            "tensor([[ 1.0,  2.0],\n        [ 3.0, 40.0]], dtype=float32, shape=(2, 2))"
        );
        let v = Tensor::from_vec([1], vec![7i64]).unwrap();
        let pair = Value::tuple(vec![Value::Tensor(v), Value::Int(3)]);
        assert_eq!(text(&pair), "(tensor([7], dtype=int64, shape=(1,)), 3)");
        assert_eq!(text(&Value::tuple(vec![Value::Float(1.0)])), "(1.0,)");
        assert_eq!(text(&Value::Tensor(Tensor::scalar(2u8))), "tensor(2, dtype=uint8, shape=())");
    }

    #[test]
    fn json_of_every_kind() {
        let t = Tensor::from_vec([2], vec![u64::MAX, 1]).unwrap();
        let v = Value::tuple(vec![
            Value::Tensor(t),
            Value::Float(f64::NAN),
            Value::Float(f64::NEG_INFINITY),
            Value::Shape(Shape::from([2, 3])),
            Value::DType(DataType::F16),
            Value::Null,
            Value::Bool(true),
            Value::str("s"),
        ]);
        assert_eq!(
            json(&v).unwrap().to_string(),
            r#"[{"data":[18446744073709551615,1],"dtype":"uint64","shape":[2]},"nan","-inf",{"shape":[2,3]},"float16",null,true,"s"]"#
        );
        let b = Tensor::from_vec([1, 2], vec![true, false]).unwrap();
        assert_eq!(json(&Value::Tensor(b)).unwrap()["data"].to_string(), "[[true,false]]");
    }

    #[test]
    fn json_refuses_huge_and_deep_tensors() {
        let one = Tensor::from_vec([1], vec![7u8]).unwrap();
        let wide = Tensor::from_parts(
            one.storage().clone(),
            0,
            [1 << 20, 1 << 20].into(),
            Some(vec![0, 0]),
            relaxvm::DataType::U8,
        )
        .unwrap();
        assert!(json(&Value::Tensor(wide)).unwrap_err().to_string().contains("too large for JSON"));
        let deep = Tensor::zeros(vec![1i64; 1000], relaxvm::DataType::U8, relaxvm::Device::cpu(0)).unwrap();
        assert!(json(&Value::Tensor(deep)).unwrap_err().to_string().contains("64 dimensions"));
    }

    #[test]
    fn json_refuses_what_would_explode() {
        let mut v = Value::Int(1);
        for _ in 0..100 {
            v = Value::tuple(vec![v.clone(), v]);
        }
        assert!(json(&v).unwrap_err().to_string().contains("too large for JSON"));
        assert!(text(&v).contains("..."), "text elides instead");
    }
}
