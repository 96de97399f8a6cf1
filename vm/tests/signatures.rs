//! Signatures at the call boundary: every type kind accepted and rejected by `invoke`, symbolic
//! dimensions, structured arguments, conversions, closures and saved functions, reflection, the
//! entry function, and what the verifier refuses.

use relaxvm::registry::register_global;
use relaxvm::{
    Arg, DataType, ErrorKind, Executable, ExecutableParts, FuncInfo, Instruction, PackedFunc, Signature, Tensor, Value,
    VirtualMachine,
};
use std::sync::{Arc, Once};

fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        register_global(PackedFunc::from_fn("sig.pack", |a| Ok(Value::tuple(a.to_vec()))), true).unwrap();
    });
}

/// `f` with signature `sig`, returning its arguments as a tuple, and `g(x) = x` without one.
fn exe(sig: &str) -> Executable {
    let sig: Signature = sig.parse().unwrap();
    let n = sig.params.len() as u32;
    let args = (0..n).map(Arg::Reg).collect();
    Executable::from_parts(ExecutableParts {
        funcs: vec![
            FuncInfo::bytecode("f", 0, 2, n, n + 1).with_signature(sig),
            FuncInfo::packed("sig.pack"),
            FuncInfo::bytecode("g", 2, 3, 1, 1),
        ],
        instrs: vec![
            Instruction::Call { func: 1, args, dst: Some(n) },
            Instruction::Ret { result: n },
            Instruction::Ret { result: 0 },
        ],
        ..Default::default()
    })
    .unwrap()
}

fn vm(sig: &str) -> VirtualMachine {
    setup();
    VirtualMachine::new(Arc::new(exe(sig))).unwrap()
}

fn f32s(shape: &[i64]) -> Value {
    Value::Tensor(Tensor::zeros(shape, DataType::F32, Default::default()).unwrap())
}

/// A 3x2 view of a 2x3 matrix: not contiguous.
fn transposed() -> Tensor {
    let m = Tensor::from_vec([2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    Tensor::from_parts(m.storage().clone(), 0, [3, 2].into(), Some(vec![1, 3]), DataType::F32).unwrap()
}

/// The kind of error, and that it is not wrapped in a location (no instruction ran).
fn kind_of(e: &relaxvm::Error) -> &'static str {
    match e.kind() {
        ErrorKind::Type { .. } => "type",
        ErrorKind::Value(_) => "value",
        ErrorKind::Arity { .. } => "arity",
        ErrorKind::At { .. } => panic!("a boundary error wrapped in a location: {e}"),
        _ => "other",
    }
}

#[test]
fn every_type_kind_is_accepted_and_rejected() {
    // (type, accepted value, rejected value, error kind, words the error must contain)
    let t = |v: Vec<Value>| Value::tuple(v);
    let cases: Vec<(&str, Value, Value, &str, &str)> = vec![
        ("any", Value::Null, Value::Null, "", ""),
        ("object", Value::str("x"), Value::Null, "", ""),
        ("bool", Value::Bool(true), Value::Int(1), "type", "expected bool"),
        ("i8", Value::Int(-128), Value::Int(128), "value", "128 does not fit in int8"),
        ("u16", Value::Int(65535), Value::Int(-1), "value", "-1 does not fit in uint16"),
        ("i64", Value::Int(i64::MIN), Value::Float(1.0), "type", "expected int64"),
        ("f32", Value::Float(0.5), Value::str("0.5"), "type", "expected float32"),
        ("str", Value::str("s"), Value::Int(1), "type", "expected str"),
        ("tensor<*, ?>", Value::Tensor(Tensor::scalar(1u8)), Value::Int(1), "type", "expected tensor"),
        ("tensor<*, f32>", f32s(&[2, 2, 2]), Value::Tensor(Tensor::scalar(1.0f64)), "type", "tensor of float32"),
        ("tensor<[2, ?], ?>", f32s(&[2, 9]), f32s(&[2]), "value", "rank 2"),
        ("tensor<[2, ?], ?>", f32s(&[2, 0]), f32s(&[3, 9]), "value", "dimension 0 must be 2, got 3"),
        ("shape<2>", Value::Shape([1, 2].into()), Value::Shape([1].into()), "value", "a shape of 2 dimensions"),
        ("shape<?>", Value::Shape([].into()), f32s(&[1]), "type", "expected shape"),
        ("tuple<i64, str>", t(vec![Value::Int(1), Value::str("a")]), t(vec![Value::Int(1)]), "value", "2 items"),
        ("tuple<i64, str>", t(vec![Value::Int(1), Value::str("a")]), Value::Int(1), "type", "expected tuple"),
        ("list<bool>", t(vec![]), t(vec![Value::Bool(true), Value::Int(0)]), "type", "[1]"),
        (
            "dict<{a: i64, b: str}>",
            t(vec![Value::Int(1), Value::str("b")]),
            t(vec![Value::str("b")]),
            "value",
            "2 slots",
        ),
        ("dict<{a: i64, b: str}>", t(vec![Value::Int(1), Value::str("b")]), Value::Int(1), "type", "expected dict"),
        (
            "dict<{a: i64, b: str}>",
            t(vec![Value::Int(1), Value::str("b")]),
            t(vec![Value::str("b"), Value::Int(1)]),
            "type",
            "[\"a\"]",
        ),
    ];
    for (ty, good, bad, kind, words) in cases {
        let mut m = vm(&format!("(p: {ty}) -> any"));
        let out = m.invoke("f", std::slice::from_ref(&good)).unwrap_or_else(|e| panic!("{ty} rejected {good:?}: {e}"));
        assert_eq!(out.as_tuple().unwrap().len(), 1, "{ty}");
        if kind.is_empty() {
            assert!(m.invoke("f", &[bad]).is_ok(), "{ty} accepts anything");
            continue;
        }
        let e = m.invoke("f", &[bad]).unwrap_err();
        assert_eq!(kind_of(&e), kind, "{ty}: {e}");
        let s = e.to_string();
        assert!(s.contains("parameter \"p\" of f") && s.contains(words), "{ty}: {s}");
    }
}

#[test]
fn wrong_argument_counts_are_arity_errors() {
    let mut m = vm("(a: i64, b: i64) -> any");
    let e = m.invoke("f", &[Value::Int(1)]).unwrap_err();
    assert_eq!(kind_of(&e), "arity", "{e}");
    assert!(e.to_string().contains("f: expected 2 arguments, got 1"), "{e}");
}

#[test]
fn symbolic_dimensions_must_agree_across_parameters() {
    let mut m = vm("(x: tensor<[n, 16], f32>, y: tensor<[n], f32>, z: tuple<tensor<[k, n], ?>>) -> any");
    let z = |k: i64, n: i64| Value::tuple(vec![f32s(&[k, n])]);
    assert!(m.invoke("f", &[f32s(&[3, 16]), f32s(&[3]), z(7, 3)]).is_ok());
    assert!(m.invoke("f", &[f32s(&[5, 16]), f32s(&[5]), z(0, 5)]).is_ok(), "symbols bind per call");
    let e = m.invoke("f", &[f32s(&[3, 16]), f32s(&[4]), z(7, 3)]).unwrap_err();
    assert_eq!(kind_of(&e), "value");
    let s = e.to_string();
    assert!(s.contains("parameter \"y\"") && s.contains("symbol n is 3") && s.contains("parameter \"x\""), "{s}");
    let e = m.invoke("f", &[f32s(&[3, 16]), f32s(&[3]), z(7, 2)]).unwrap_err().to_string();
    assert!(e.contains("parameter \"z\" of f[0]") && e.contains("dimension 1 is 2"), "{e}");
}

#[test]
fn arguments_are_converted_at_the_boundary() {
    let mut m = vm("(x: f64, s: tuple<f32, i64>, c: tensor<[3, 2], f32, contiguous>, v: tensor<[3, 2], f32>) -> any");
    let out = m
        .invoke(
            "f",
            &[
                Value::Int(2),
                Value::tuple(vec![Value::Int(1), Value::Int(1)]),
                Value::Tensor(transposed()),
                Value::Tensor(transposed()),
            ],
        )
        .unwrap();
    let out = out.as_tuple().unwrap();
    assert!(matches!(out[0], Value::Float(x) if x == 2.0), "ints become floats: {:?}", out[0]);
    let slots = out[1].as_tuple().unwrap();
    assert!(matches!(slots[0], Value::Float(_)) && matches!(slots[1], Value::Int(1)), "{slots:?}");
    let c = out[2].as_tensor().unwrap();
    assert!(c.is_contiguous(), "contiguous was declared");
    assert_eq!(c.to_vec::<f32>().unwrap(), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    assert!(!out[3].as_tensor().unwrap().is_contiguous(), "strided tensors pass as they are otherwise");
    // A dtype mismatch is an error, not a cast.
    let f64s = Value::Tensor(Tensor::zeros([3, 2], DataType::F64, Default::default()).unwrap());
    let e = m.invoke("f", &[Value::Int(2), Value::tuple(vec![Value::Int(1), Value::Int(1)]), f64s.clone(), f64s]);
    assert_eq!(kind_of(&e.unwrap_err()), "type");
}

#[test]
fn functions_without_signatures_are_unchecked() {
    let mut m = vm("(x: i64) -> i64");
    assert!(m.invoke("g", &[Value::str("anything")]).is_ok());
    assert!(m.signature("g").unwrap().is_none());
    assert!(matches!(m.signature("sig.pack").unwrap_err().kind(), ErrorKind::UnknownFunction(_)));
    assert!(matches!(m.signature("nope").unwrap_err().kind(), ErrorKind::UnknownFunction(_)));
}

#[test]
fn closures_and_saved_functions_are_checked_with_their_captured_values() {
    let mut m = vm("(a: i64, b: f32) -> any");
    let f = m.get_function("f").unwrap();
    let bound = Value::Func(Arc::new(relaxvm::Closure {
        callable: f.as_func().unwrap().callable.clone(),
        captured: vec![Value::Int(3)],
    }));
    let out = m.invoke_closure(&bound, &[Value::Int(1)]).unwrap();
    assert!(matches!(out.as_tuple().unwrap()[1], Value::Float(x) if x == 3.0), "captured values are converted too");
    let e = m.invoke_closure(&bound, &[Value::str("x")]).unwrap_err();
    assert!(kind_of(&e) == "type" && e.to_string().contains("parameter \"a\""), "{e}");
    // save_function checks the bound arguments when it saves them.
    let e = m.save_function("f", "saved", vec![Value::Int(1), Value::str("x")], true).unwrap_err();
    assert!(kind_of(&e) == "type" && e.to_string().contains("parameter \"b\""), "{e}");
    m.save_function("f", "saved", vec![Value::Int(1), Value::Int(2)], true).unwrap();
    let out = m.invoke("saved", &[]).unwrap();
    assert!(matches!(out.as_tuple().unwrap()[1], Value::Float(x) if x == 2.0));
    assert!(m.signature("saved").unwrap().is_none());
    m.save_function("f", "quiet", vec![Value::Int(1), Value::Int(2)], false).unwrap();
    assert!(matches!(m.invoke("quiet", &[]).unwrap(), Value::Null));
    // Saved again, with its saved arguments: the same call, checked against the signature.
    m.save_function("saved", "again", vec![], true).unwrap();
    let out = m.invoke("again", &[]).unwrap();
    assert!(matches!(out.as_tuple().unwrap()[1], Value::Float(x) if x == 2.0));
}

#[test]
fn reflection_and_accessors() {
    let sig = "(x: tensor<[n, 16], f32>, cfg: dict<{depth: i64, name: str}>) -> tuple<tensor<*, f32>, i64>";
    let exe = exe(sig);
    let s = exe.signature("f").unwrap().unwrap();
    assert_eq!(s.to_string(), sig);
    assert_eq!(
        s.reflection(),
        r#"{"a": [["ndarray", "f32", 2, "n", 16], ["sdict", ["depth", "i64"], ["name", "str"]]], "r": [["stuple", ["ndarray", "f32", null], "i64"]]}"#
    );
    assert_eq!(exe.func("f").unwrap().param_names, vec!["x", "cfg"]);
    assert!(exe.signature("sig.pack").unwrap().is_none());
    assert!(exe.signature("g").unwrap().is_none());
    assert_eq!(format!("{:?}", exe.signature("nope").expect_err("an error")), r#"UnknownFunction("nope")"#);
    assert!(exe.has_signatures());
    setup();
    let m = VirtualMachine::new(Arc::new(exe)).unwrap();
    assert_eq!(m.signature("f").unwrap().unwrap().to_string(), sig);
}

#[test]
fn the_entry_defaults_to_main() {
    let mut parts = exe("(x: i64) -> any").to_parts();
    assert_eq!(Executable::from_parts(parts.clone()).unwrap().entry(), None, "no main, no entry");
    parts.entry = Some("g".into());
    let e = Executable::from_parts(parts.clone()).unwrap();
    assert_eq!((e.entry(), e.declared_entry()), (Some("g"), Some("g")));
    parts.entry = None;
    parts.funcs[0].name = "main".into();
    let e = Executable::from_parts(parts.clone()).unwrap();
    assert_eq!((e.entry(), e.declared_entry()), (Some("main"), None));
    assert!(e.as_text().starts_with("@main inputs=1 regs=2 sig=(x: i64) -> any:\n"), "{}", e.as_text());
    parts.entry = Some("g".into());
    assert!(Executable::from_parts(parts).unwrap().as_text().starts_with(".entry g\n"));
}

#[test]
fn the_verifier_rejects_bad_signatures_and_entries() {
    let good = exe("(x: i64) -> any").to_parts();
    let with = |edit: &dyn Fn(&mut ExecutableParts)| {
        let mut p = good.clone();
        edit(&mut p);
        Executable::from_parts(p).err().map(|e| e.to_string()).unwrap_or_default()
    };
    fn sig(s: &str) -> Option<Signature> {
        Some(s.parse().unwrap())
    }
    type Edit = Box<dyn Fn(&mut ExecutableParts)>;
    let cases: Vec<(Edit, &str)> = vec![
        (Box::new(|p| p.entry = Some("nope".into())), "the entry function \"nope\" is not in the function table"),
        (Box::new(|p| p.entry = Some("sig.pack".into())), "the entry function \"sig.pack\" is a packed function"),
        (Box::new(|p| p.funcs[1].signature = sig("() -> any")), "packed function \"sig.pack\" has a signature"),
        (Box::new(|p| p.funcs[0].signature = sig("(x: i64, y: i64) -> any")), "2 parameter(s) for 1 inputs"),
        (
            Box::new(|p| p.funcs[0].param_names = vec!["y".into()]),
            "parameter names (y) differ from the signature's (x)",
        ),
        (Box::new(|p| p.funcs[0].param_names.clear()), "parameter names () differ"),
        (
            Box::new(|p| {
                p.funcs[2].signature = sig("(x: i64) -> any");
                p.funcs[2].param_names = vec!["x".into()];
                p.funcs[2].signature.as_mut().unwrap().result =
                    relaxvm::Type::Dict(vec![("b".into(), relaxvm::Type::Any), ("a".into(), relaxvm::Type::Any)]);
            }),
            "dict keys \"b\" and \"a\" are not distinct and sorted",
        ),
        (
            Box::new(|p| {
                p.funcs[0].signature.as_mut().unwrap().params[0].1 =
                    relaxvm::Type::tensor(Some(vec![relaxvm::Dim::Static(-1)]), None)
            }),
            "tensor dimension -1 is negative",
        ),
        (
            Box::new(|p| {
                p.funcs[0].signature.as_mut().unwrap().params[0].1 =
                    relaxvm::Type::tensor(Some(vec![relaxvm::Dim::Symbolic("a b".into())]), None)
            }),
            "symbolic dimension \"a b\" is not a plain name",
        ),
        (
            Box::new(|p| {
                let mut t = relaxvm::Type::Any;
                for _ in 0..65 {
                    t = relaxvm::Type::List(Box::new(t));
                }
                p.funcs[0].signature.as_mut().unwrap().result = t;
            }),
            "types nest more than 64 deep",
        ),
    ];
    for (edit, needle) in cases {
        let e = with(&*edit);
        assert!(e.contains("invalid executable") && e.contains(needle), "expected {needle:?} in: {e}");
    }
    let mut p = good.clone();
    p.funcs[0] = p.funcs[0].clone().with_signature("(x: i64, x: i64) -> any".parse().unwrap());
    p.funcs[0].num_args = 2;
    p.funcs[0].register_file_size = 3;
    let e = Executable::from_parts(p).unwrap_err().to_string();
    assert!(e.contains("two parameters are named \"x\""), "{e}");
}
