//! Checks against tables generated with numpy 2.4 (`tests/data/gen_numpy_cases.py`):
//! `np.promote_types` for every pair of numpy's twelve dtypes, and the `vm.op.*` operators on
//! every dtype pair, broadcast shapes, weak Python scalars, reductions and matmul — result
//! dtype, shape and values, or an error where numpy raises.

use crate::common::{call, show};
use relaxvm::{dispatch_dtype, DataType, Element, Shape, Tensor, Value};
use relaxvm_builtins::tensor_ops::promote::promote_types;

#[test]
fn promote_types_matches_numpy_for_every_pair() {
    let table = include_str!("../data/numpy_promote_types.txt");
    let mut checked = 0;
    for line in table.lines().filter(|l| !l.trim().is_empty()) {
        let parts: Vec<DataType> = line.split_whitespace().map(|n| n.parse().unwrap()).collect();
        let [a, b, want] = parts[..] else { panic!("bad line {line:?}") };
        assert_eq!(promote_types(a, b), want, "np.promote_types({a}, {b})");
        checked += 1;
    }
    assert_eq!(checked, 144);
}

/// A number as numpy's generator printed it (`nan`, `inf`, `-0.0`, `12`).
fn number(s: &str) -> f64 {
    s.parse().unwrap_or_else(|_| panic!("bad number {s:?}"))
}

fn dims(s: &str) -> Vec<i64> {
    s.split(',').filter(|d| !d.is_empty()).map(|d| d.parse().unwrap()).collect()
}

/// A tensor of `dtype` from its printed form.
fn tensor(dtype: DataType, shape: &str, values: &str) -> Tensor {
    let vals: Vec<f64> = values.split_whitespace().map(number).collect();
    dispatch_dtype!(dtype, T => Tensor::from_vec(Shape::from(dims(shape)), vals.iter().map(|v| T::from_f64(*v)).collect::<Vec<T>>()).unwrap())
}

fn operand(s: &str) -> Value {
    let mut parts = s.splitn(3, ';');
    let (kind, shape, values) = (parts.next().unwrap(), parts.next().unwrap(), parts.next().unwrap());
    match kind {
        "py_int" => Value::Int(values.parse().unwrap()),
        "py_float" => Value::Float(number(values)),
        "py_bool" => Value::Bool(values == "1"),
        "keepdims" => Value::Bool(values == "1"),
        "axis" if values.contains(',') => Value::Shape(Shape::from(dims(values))),
        "axis" => Value::Int(values.parse().unwrap()),
        dtype => Value::Tensor(tensor(dtype.parse().unwrap(), shape, values)),
    }
}

/// How close two elements of `dtype` must be.
fn close(dtype: DataType, got: f64, want: f64) -> bool {
    if got.is_nan() || want.is_nan() {
        return got.is_nan() && want.is_nan();
    }
    if got.is_infinite() || want.is_infinite() {
        return got == want;
    }
    let tol = match dtype {
        DataType::F16 | DataType::BF16 => 2e-3,
        DataType::F32 => 2e-5,
        DataType::F64 => 1e-12,
        _ => 0.0,
    };
    (got - want).abs() <= tol * (1.0 + want.abs())
}

fn elements(t: &Tensor) -> Vec<f64> {
    dispatch_dtype!(t.dtype(), T => t.to_vec::<T>().unwrap().into_iter().map(Element::to_f64).collect())
}

#[test]
fn operators_match_numpy() {
    let table = include_str!("../data/numpy_cases.txt");
    let mut failures = Vec::new();
    let mut checked = 0;
    for line in table.lines().filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split('|').collect();
        let (op, want) = (fields[0], fields[fields.len() - 1]);
        let args: Vec<Value> = fields[1..fields.len() - 1].iter().map(|f| operand(f)).collect();
        let name = format!("vm.op.{op}");
        let got = call(&name, &args);
        checked += 1;
        let problem = match (want, &got) {
            ("ERR", Err(_)) => None,
            ("ERR", Ok(v)) => Some(format!("numpy raises, got {}", v.describe())),
            (_, Err(e)) => Some(format!("error: {e}")),
            (w, Ok(v)) => {
                let mut parts = w.splitn(3, ';');
                let (dt, shape, values) = (parts.next().unwrap(), parts.next().unwrap(), parts.next().unwrap());
                let dt: DataType = dt.parse().unwrap();
                let expect = tensor(dt, shape, values);
                let t = v.as_tensor().unwrap();
                if t.dtype() != dt || t.shape() != expect.shape() {
                    Some(format!("got {} {}, numpy {} {}", t.dtype(), t.shape(), dt, expect.shape()))
                } else {
                    let (g, e) = (elements(t), elements(&expect));
                    let bad: Vec<String> = g
                        .iter()
                        .zip(&e)
                        .enumerate()
                        .filter(|(_, (a, b))| !close(dt, **a, **b))
                        .map(|(i, (a, b))| format!("[{i}] {a} vs numpy {b}"))
                        .collect();
                    (!bad.is_empty()).then(|| bad.join(", "))
                }
            }
        };
        if let Some(p) = problem {
            failures.push(format!("{name}({}): {p}", show(&args)));
        }
    }
    assert!(checked > 1500, "{checked}");
    assert!(failures.is_empty(), "{} of {checked} cases differ from numpy:\n{}", failures.len(), failures.join("\n"));
}
