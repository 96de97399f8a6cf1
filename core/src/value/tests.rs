use super::*;

#[test]
fn only_scalars_skip_drop() {
    let scalars = [Value::Null, Value::Int(1), Value::Float(1.0), Value::Bool(true), Value::VmState];
    assert!(scalars.iter().all(|v| !v.owns_heap()));
    assert!(!Value::DType(DataType::F32).owns_heap() && !Value::Device(Device::cpu(0)).owns_heap());
    let t = Tensor::zeros([2], DataType::F32, Device::cpu(0)).unwrap();
    let owning = [Value::str("s"), Value::Shape([1].into()), Value::Tensor(t), Value::tuple(vec![])];
    assert!(owning.iter().all(Value::owns_heap));
}

/// `v = (v, v)` nested `n` deep around `leaf`: 2^n leaves unfolded, n + 1 tuples.
fn doubled(n: usize, leaf: Value) -> Value {
    (0..n).fold(leaf, |v, _| Value::tuple(vec![v.clone(), v]))
}

#[test]
fn content_eq_is_linear_in_shared_tuples() {
    // Two separately built values (no tuple shared between them) 2^40 leaves each: only a
    // walk that compares each pair of tuples once finishes.
    let (a, b) = (doubled(40, Value::Int(1)), doubled(40, Value::Int(1)));
    assert!(a.content_eq(&b) && a.content_eq(&a));
    assert!(!a.content_eq(&doubled(40, Value::Int(2))));
    assert!(!a.content_eq(&doubled(39, Value::Int(1))));
    // A difference in one leaf deep inside, where every other leaf agrees, is still found.
    let t = |x: i64| Tensor::from_vec([1], vec![x]).unwrap();
    let odd = doubled(39, Value::tuple(vec![Value::Tensor(t(1)), Value::Tensor(t(2))]));
    let even = doubled(39, Value::tuple(vec![Value::Tensor(t(1)), Value::Tensor(t(1))]));
    assert!(!odd.content_eq(&even) && odd.content_eq(&odd));
}

#[test]
fn value_is_two_words() {
    assert_eq!(std::mem::size_of::<Value>(), 16);
    assert_eq!(std::mem::size_of::<Result<Value>>(), 16);
}

#[test]
fn accessors_report_expected_and_found() {
    let e = Value::str("x").as_int().unwrap_err().to_string();
    assert!(e.contains("expected int") && e.contains("found str"), "{e}");
    assert_eq!(Value::Bool(true).as_int().unwrap(), 1);
    assert_eq!(Value::Int(2).as_float().unwrap(), 2.0);
    assert_eq!(
        format!("{:?}", Value::Null.as_tensor().expect_err("an error")),
        r#"Type { expected: "tensor", found: "null" }"#
    );
    assert_eq!(
        format!("{:?}", Value::Null.as_shape().expect_err("an error")),
        r#"Type { expected: "shape", found: "null" }"#
    );
    assert_eq!(
        format!("{:?}", Value::Null.as_tuple().expect_err("an error")),
        r#"Type { expected: "tuple", found: "null" }"#
    );
    assert_eq!(
        format!("{:?}", Value::Null.as_func().err().expect("an error")),
        r#"Type { expected: "function", found: "null" }"#
    );
    assert_eq!(Value::str("int8").as_dtype().unwrap(), DataType::I8);
}

#[test]
fn same_object_is_identity_for_shared_payloads() {
    let t = Value::Tensor(Tensor::scalar(1i32));
    assert!(t.same_object(&t.clone()));
    assert!(!t.same_object(&Value::Tensor(Tensor::scalar(1i32))));
    let s = Value::str("a");
    assert!(s.same_object(&s.clone()) && !s.same_object(&Value::str("a")));
    assert!(Value::Int(3).same_object(&Value::Int(3)) && !Value::Int(3).same_object(&Value::Float(3.0)));
    let sh = Value::Shape([1, 2].into());
    assert!(sh.same_object(&sh.clone()) && !sh.same_object(&Value::Shape([1, 2].into())));
}

#[test]
fn truthiness() {
    assert!(Value::Int(3).truthy().unwrap());
    assert!(!Value::Bool(false).truthy().unwrap());
    assert!(Value::Tensor(Tensor::scalar(1i32)).truthy().unwrap());
    assert!(!Value::Tensor(Tensor::from_vec([1], vec![0.0f32]).unwrap()).truthy().unwrap());
    assert_eq!(
        format!(
            "{:?}",
            Value::Tensor(Tensor::from_vec([2], vec![0.0f32, 1.0]).unwrap()).truthy().expect_err("an error")
        ),
        r#"Type { expected: "int, bool or one-element tensor", found: "tensor of shape (2,)" }"#
    );
    assert_eq!(
        format!("{:?}", Value::str("x").truthy().expect_err("an error")),
        r#"Type { expected: "int, bool or one-element tensor", found: "str" }"#
    );
}

#[test]
fn display_and_equality() {
    let t = Value::tuple(vec![Value::Int(1), Value::Float(2.0), Value::Null]);
    assert_eq!(t.to_string(), "(1, 2.0, None)");
    assert!(t.content_eq(&t.clone()));
    assert!(!Value::Int(1).content_eq(&Value::Float(1.0)));
    assert_eq!(Value::tuple(vec![Value::Int(1)]).to_string(), "(1,)");
}
