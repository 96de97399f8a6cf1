//! Tests of signatures: text, reflection, argument checks.

use super::*;
use crate::tensor::Tensor;
use crate::value::Value;

const SIG: &str = "(x: tensor<[n, 16], f32>, y: tensor<[n, ?], f32, contiguous>, k: f32, s: str, \
    t: tuple<i64, bool>, l: list<u8>, d: dict<{b: i32, a: shape<2>}>, o: object, z: any, w: tensor<*, ?>) \
    -> tuple<tensor<*, f32>, i64>";

fn f32s(shape: &[i64]) -> Value {
    Value::Tensor(Tensor::zeros(shape, DataType::F32, Default::default()).unwrap())
}

#[test]
fn text_round_trips() {
    let sig: Signature = SIG.parse().unwrap();
    let text = sig.to_string();
    assert_eq!(text.parse::<Signature>().unwrap(), sig);
    assert!(text.contains("dict<{a: shape<2>, b: i32}>"), "keys sorted: {text}");
    for t in ["any", "bf16", "u64", "tensor<[], i8>", "tuple<>", "list<list<f64>>", "dict<{}>", "shape<?>"] {
        assert_eq!(t.parse::<Type>().unwrap().to_string(), t);
    }
    // Booleans print as `bool` in tensors as in scalars (`relaxvm.types` prints through this).
    for t in ["tensor<[2], bool>", "tensor<[2], i1>"] {
        assert_eq!(t.parse::<Type>().unwrap().to_string(), "tensor<[2], bool>");
    }
    // Names with control characters print with \u{..} escapes, which parse back.
    let odd: Signature = "(\"a\\u{7f}\\n\\u{1F600}\": dict<{\"\\u{0}\": i64}>) -> any".parse().unwrap();
    assert_eq!(odd.params[0].0, "a\u{7f}\n\u{1F600}");
    assert_eq!(odd.to_string().parse::<Signature>().unwrap(), odd);
    for bad in [
        "(\"\\u{}\": i64) -> any",
        "(\"\\u{110000}\": i64) -> any",
        "(\"\\u{41\": i64) -> any",
        "(x: shape<4294967296>) -> any",
    ] {
        assert!(format!("{:?}", bad.parse::<Signature>().expect_err("an error")).starts_with(r#"Value("#), "{bad}");
    }
}

#[test]
fn parse_errors_say_where_and_what() {
    for bad in [
        "(x: tensr<*, f32>) -> any",
        "(x: tensor<[1], f99>) -> any",
        "(x: i64",
        "(x: i64) -> any junk",
        "(: i64) -> any",
    ] {
        let e = bad.parse::<Signature>().unwrap_err().to_string();
        assert!(e.contains("expected") && e.contains("column"), "{bad}: {e}");
    }
    let deep = format!("{}i64{}", "list<".repeat(100), ">".repeat(100));
    assert_eq!(
        format!("{:?}", deep.parse::<Type>().expect_err("an error")),
        r#"Value("signature: expected types nested at most 64 deep at column 321, found \"list<list<li\"")"#
    );
}

#[test]
fn reflection_records() {
    let sig: Signature =
        "(a: tensor<[?, 16], f32>, b: tensor<*, i8>, c: tuple<i32, str>, d: dict<{k: f64}>) -> bf16".parse().unwrap();
    assert_eq!(
        sig.reflection(),
        r#"{"a": [["ndarray", "f32", 2, null, 16], ["ndarray", "i8", null], ["stuple", "i32", "str"], ["sdict", ["k", "f64"]]], "r": ["bf16"]}"#
    );
}

fn args() -> Vec<Value> {
    vec![
        f32s(&[3, 16]),
        f32s(&[3, 5]),
        Value::Int(2),
        Value::str("s"),
        Value::tuple(vec![Value::Int(1), Value::Bool(true)]),
        Value::tuple(vec![Value::Int(255)]),
        Value::tuple(vec![Value::Shape([1, 2].into()), Value::Int(7)]),
        Value::Null,
        Value::Null,
        Value::Tensor(Tensor::scalar(1i32)),
    ]
}

#[test]
fn accepts_matching_arguments_and_coerces() {
    let sig: Signature = SIG.parse().unwrap();
    let out = sig.prepare_args("f", &args()).unwrap();
    assert!(matches!(out[2], Value::Float(x) if x == 2.0));
}

#[test]
fn rejects_each_kind_of_mismatch_naming_the_parameter() {
    let sig: Signature = SIG.parse().unwrap();
    let cases: Vec<(usize, Value, &str, bool)> = vec![
        (0, Value::Int(1), "expected tensor", true),
        (
            0,
            Value::Tensor(Tensor::zeros([3, 16], DataType::F64, Default::default()).unwrap()),
            "tensor of float32",
            true,
        ),
        (0, f32s(&[3]), "rank 2", false),
        (0, f32s(&[3, 15]), "must be 16", false),
        (1, f32s(&[4, 5]), "symbol n is 3", false),
        (2, Value::str("x"), "float32", true),
        (3, Value::Int(1), "str", true),
        (4, Value::tuple(vec![Value::Int(1)]), "tuple of 2 items", false),
        (4, Value::tuple(vec![Value::Int(1), Value::Int(1)]), "bool", true),
        (5, Value::tuple(vec![Value::Int(256)]), "does not fit in uint8", false),
        (6, Value::tuple(vec![Value::Shape([1].into()), Value::Int(7)]), "shape of 2", false),
        (6, Value::Int(3), "dict", true),
    ];
    for (i, v, msg, is_type) in cases {
        let mut a = args();
        a[i] = v;
        let e = sig.check_args("f", &a).unwrap_err();
        let s = e.to_string();
        assert!(s.contains(msg) && s.contains(&format!("{:?}", sig.params[i].0)), "{i}: {s}");
        assert_eq!(matches!(e.kind(), crate::ErrorKind::Type { .. }), is_type, "{s}");
    }
    assert_eq!(
        format!("{:?}", sig.check_args("f", &[]).expect_err("an error")),
        r#"Arity { func: "f", expected: "10", got: 0 }"#
    );
}

#[test]
fn reflection_escapes_as_it_always_has() {
    // Dict keys may be any string: quotes and backslashes get backslashes, control characters
    // \u00XX (the format's escape from before serde_json wrote it), everything else itself.
    let t = Type::dict(vec![("a\"b\\c\nd\u{1}\u{7f}é/".to_string(), Type::Scalar(DataType::I64))]);
    assert_eq!(t.reflection(), "[\"sdict\", [\"a\\\"b\\\\c\\u000ad\\u0001\u{7f}é/\", \"i64\"]]");
    let t = Type::tensor(Some(vec![Dim::Symbolic("n".into()), Dim::Unknown, Dim::Static(-0)]), None);
    assert_eq!(t.reflection(), "[\"ndarray\", null, 3, \"n\", null, 0]");
    assert_eq!(Type::Shape(None).reflection(), "[\"shape\", null]");
    assert_eq!(Type::List(Box::new(Type::Any)).reflection(), "[\"slist\", \"unknown\"]");
    let sig: Signature = "() -> object".parse().unwrap();
    assert_eq!(sig.reflection(), "{\"a\": [], \"r\": [\"object\"]}");
}

#[test]
fn shared_tuples_are_checked_and_coerced_once() {
    // `v = (v, v)` nested 40 deep: 2^40 leaves unfolded, 41 tuples.
    let t: Type = format!("{}f64{}", "list<".repeat(40), ">".repeat(40)).parse().unwrap();
    let mut v = Value::Int(1);
    for _ in 0..40 {
        v = Value::tuple(vec![v.clone(), v]);
    }
    t.check(&v, "x", &mut Default::default()).unwrap();
    let c = t.coerce(v).unwrap();
    let mut at = &c;
    for _ in 0..40 {
        at = &at.as_tuple().unwrap()[0];
    }
    assert!(matches!(at, Value::Float(x) if *x == 1.0), "ints became floats: {at:?}");
    let Value::Tuple(items) = &c else { panic!("a tuple") };
    assert!(items[0].same_object(&items[1]), "the conversion is shared as the argument was");
    // A failure inside a shared tuple is still found, naming its first place.
    let mut bad = Value::str("s");
    for _ in 0..40 {
        bad = Value::tuple(vec![bad.clone(), bad]);
    }
    let e = t.check(&bad, "x", &mut Default::default()).unwrap_err().to_string();
    assert!(e.contains(&format!("x{}", "[0]".repeat(40))), "{e}");
}

#[test]
fn an_int_outside_a_declared_type_is_refused_with_the_types_range() {
    use crate::dtype::DataType;
    let msg = |d, i: i64| Type::Scalar(d).check(&Value::Int(i), "p", &mut Default::default()).unwrap_err().to_string();
    assert!(
        msg(DataType::I8, 128).ends_with("p: 128 does not fit in int8 (-2^7..2^7-1)"),
        "{}",
        msg(DataType::I8, 128)
    );
    assert!(msg(DataType::U16, -1).ends_with("p: -1 does not fit in uint16 (0..2^16-1)"), "{}", msg(DataType::U16, -1));
    assert!(msg(DataType::U64, -1).ends_with("p: -1 does not fit in uint64 (0..2^63-1, the VM's ints being int64)"));
    // int64 holds every VM int; the binding refuses one past it with the same message.
    assert!(Type::Scalar(DataType::I64).check(&Value::Int(i64::MIN), "p", &mut Default::default()).is_ok());
    let past = int_outside(DataType::I32, "18446744073709551616", "parameter \"a\" of f").to_string();
    assert!(
        past.ends_with("parameter \"a\" of f: 18446744073709551616 does not fit in int32 (-2^31..2^31-1)"),
        "{past}"
    );
}

#[test]
fn a_float_past_a_declared_float_type_is_refused_with_its_largest_value() {
    use crate::dtype::DataType;
    let check = |d, v: Value| Type::Scalar(d).check(&v, "p", &mut Default::default());
    let msg = |d, v| check(d, v).unwrap_err().to_string();
    assert_eq!(msg(DataType::F32, Value::Float(1e300)), "p: 1e300 does not fit in float32 (|x| <= 3.4028235e38)");
    assert_eq!(msg(DataType::F32, Value::Float(-1e39)), "p: -1e39 does not fit in float32 (|x| <= 3.4028235e38)");
    assert_eq!(msg(DataType::F16, Value::Int(65505)), "p: 65505 does not fit in float16 (|x| <= 65504.0)");
    assert!(msg(DataType::BF16, Value::Float(1e39)).ends_with("does not fit in bfloat16 (|x| <= 3.3895314e38)"));
    // The largest finite value, inf and nan are values of the type; float64 holds every f64.
    for v in [f64::from(f32::MAX), -f64::from(f32::MAX), f64::INFINITY, f64::NEG_INFINITY, f64::NAN] {
        assert!(check(DataType::F32, Value::Float(v)).is_ok(), "{v}");
    }
    assert!(check(DataType::F16, Value::Int(65504)).is_ok());
    assert!(check(DataType::F64, Value::Float(f64::MAX)).is_ok());
    assert!(float_fits(DataType::F16, 65504.0) && !float_fits(DataType::F16, 65504.5));
}

#[test]
fn a_declared_result_is_checked_and_converted() {
    let sig = |r: &str| format!("(x: i64) -> {r}").parse::<Signature>().unwrap();
    let err = |r: &str, v: Value| sig(r).prepare_result("main", v).unwrap_err().to_string();
    assert_eq!(err("bool", Value::Int(1)), "type mismatch: expected bool for result of main, found int 1");
    assert!(err("str", Value::Int(3)).contains("expected str for result of main"));
    assert!(err("tensor<[2], f32>", Value::Int(7)).contains("expected tensor for result of main"));
    assert!(err("tensor<[2], f32>", f32s(&[3])).contains("result of main: dimension 0 must be 2"));
    let three = Value::tuple(vec![Value::Int(1), Value::Int(1), Value::Int(1)]);
    assert!(err("dict<{a: i64, b: i64}>", three).contains("result of main: expected a structure of 2 slots, got 3"));
    assert!(err("f32", Value::Float(1e300)).contains("result of main: 1e300 does not fit in float32"));
    // An int for a float result becomes a float, nested too; matching results pass unchanged.
    assert!(matches!(sig("f64").prepare_result("main", Value::Int(4)).unwrap(), Value::Float(f) if f == 4.0));
    let pair = sig("tuple<f32, i64>").prepare_result("main", Value::tuple(vec![Value::Int(2), Value::Int(3)])).unwrap();
    let Value::Tuple(ref items) = pair else { panic!("a tuple") };
    assert!(matches!((&items[0], &items[1]), (Value::Float(f), Value::Int(3)) if *f == 2.0));
    for (r, v) in
        [("any", Value::Int(1)), ("bool", Value::Bool(true)), ("i64", Value::Int(5)), ("tensor<*, ?>", f32s(&[3]))]
    {
        assert!(sig(r).prepare_result("main", v).is_ok(), "{r}");
    }
    assert!(sig("i8")
        .prepare_result("main", Value::Int(300))
        .unwrap_err()
        .to_string()
        .contains("does not fit in int8"));
    // Tensors: the quick path (dtype and static dimensions) and the full one (symbols).
    assert!(sig("tensor<[3], f32>").prepare_result("main", f32s(&[3])).is_ok());
    assert!(sig("tensor<[?, 2], f32>").prepare_result("main", f32s(&[5, 2])).is_ok());
    assert!(sig("tensor<[n, n], f32>").prepare_result("main", f32s(&[2, 2])).is_ok());
    assert!(err("tensor<[n, n], f32>", f32s(&[2, 3])).contains("result of main: dimension 1 is 3, but symbol n is 2"));
    assert!(err("tensor<[3], f64>", f32s(&[3]))
        .contains("expected tensor of float64 for result of main, found tensor of float32"));
    assert!(err("tensor<[3, 1], f32>", f32s(&[3])).contains("result of main: expected a tensor of rank 2"));
}
