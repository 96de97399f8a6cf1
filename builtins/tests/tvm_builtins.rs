//! The TVM-compatibility builtins: `relax.run.*` and the rarer `vm.builtin.*` of TVM's runtime
//! (the tensor cache: `tvm_builtins_tensor_cache.rs`). Expected values come from Apache TVM 0.27
//! (numpy 2.4) run on the same inputs — the literal tables below.

#[path = "support/tvm_compat.rs"]
mod tvm_compat;

use half::{bf16, f16};
use relaxvm::{CallCtx, DataType, PackedFunc, Shape, Storage, Tensor, Value};
use std::sync::Mutex;
use tvm_compat::{call, err, i64s, parts, registry, t};

// ---------------------------------------------------------------- relax.run.nonzero

#[test]
fn nonzero_matches_numpy() {
    let n = "relax.run.nonzero";
    // TVM: [[0, 1.5], [nan, 0]] -> [[0, 1], [1, 0]] (NaN is non-zero).
    let out = call(n, &[t(&[2, 2], vec![0.0f32, 1.5, f32::NAN, 0.0])]).unwrap();
    assert_eq!(i64s(&out), (vec![2, 2], vec![0, 1, 1, 0]));
    // 0-d inputs are 1-D (np.atleast_1d): 5.0 -> [[0]], 0 -> shape (1, 0).
    assert_eq!(i64s(&call(n, &[Value::Tensor(Tensor::scalar(5.0f32))]).unwrap()), (vec![1, 1], vec![0]));
    assert_eq!(i64s(&call(n, &[Value::Tensor(Tensor::scalar(0i32))]).unwrap()), (vec![1, 0], vec![]));
    assert_eq!(i64s(&call(n, &[t(&[2, 0, 3], Vec::<i32>::new())]).unwrap()), (vec![3, 0], vec![]));
    // -0.0 is zero; every dtype.
    assert_eq!(i64s(&call(n, &[t(&[3], vec![-0.0f64, 2.0, 0.0])]).unwrap()).1, vec![1]);
    assert_eq!(i64s(&call(n, &[t(&[3], vec![false, true, true])]).unwrap()).1, vec![1, 2]);
    assert_eq!(i64s(&call(n, &[t(&[2], vec![u64::MAX, 0])]).unwrap()).1, vec![0]);
    assert_eq!(i64s(&call(n, &[t(&[2], vec![f16::ZERO, f16::NEG_ONE])]).unwrap()).1, vec![1]);
    assert_eq!(i64s(&call(n, &[t(&[2], vec![bf16::NAN, bf16::ZERO])]).unwrap()).1, vec![0]);
    // Strided (a transpose) and misaligned views read the logical elements.
    let base = Tensor::from_vec([2, 3], vec![0i64, 1, 0, 2, 0, 3]).unwrap();
    let tt = Tensor::from_parts(base.storage().clone(), 0, [3, 2].into(), Some(vec![1, 3]), DataType::I64).unwrap();
    // tt = [[0, 2], [1, 0], [0, 3]]
    assert_eq!(i64s(&call(n, &[Value::Tensor(tt)]).unwrap()), (vec![2, 3], vec![0, 1, 2, 1, 0, 1]));
    let s = Storage::alloc(16, Default::default()).unwrap();
    s.write(2, &7i32.to_ne_bytes()).unwrap();
    let mis = Tensor::from_parts(s, 2, [2].into(), None, DataType::I32).unwrap();
    assert_eq!(i64s(&call(n, &[Value::Tensor(mis)]).unwrap()).1, vec![0]);
    assert!(err(n, &[Value::Int(1)]).contains(n));
    assert!(err(n, &[]).contains(n));
}

// ---------------------------------------------------------------- relax.run.unique

fn unique(x: Value, flags: [i64; 4], axis: Option<i64>) -> Value {
    let mut args = vec![x];
    args.extend(flags.iter().map(|f| Value::Bool(*f != 0)));
    if let Some(a) = axis {
        args.push(Value::Int(a));
    }
    call("relax.run.unique", &args).unwrap()
}

/// The tuple's items as (shape, values) pairs.
fn items(v: &Value) -> Vec<(Vec<i64>, Vec<f64>)> {
    v.as_tuple().unwrap().iter().map(|i| (parts(i).0, parts(i).2)).collect()
}

fn sv(shape: &[i64], v: &[f64]) -> (Vec<i64>, Vec<f64>) {
    (shape.to_vec(), v.to_vec())
}

#[test]
fn unique_flattened_matches_tvm() {
    // x = [[3, 1, 3], [2, 1, 0]] int32; expectations printed by TVM's relax.run.unique.
    let x = || t(&[2, 3], vec![3i32, 1, 3, 2, 1, 0]);
    let one = unique(x(), [1, 0, 0, 0], None);
    assert_eq!(parts(&one), (vec![4], DataType::I32, vec![0.0, 1.0, 2.0, 3.0]));
    assert_eq!(parts(&unique(x(), [0, 0, 0, 0], None)).2, vec![3.0, 1.0, 2.0, 0.0]);
    assert_eq!(
        items(&unique(x(), [1, 1, 1, 1], None)),
        vec![
            sv(&[4], &[0., 1., 2., 3.]),
            sv(&[4], &[5., 1., 3., 0.]),
            sv(&[2, 3], &[3., 1., 3., 2., 1., 0.]),
            sv(&[4], &[1., 2., 1., 2.])
        ]
    );
    assert_eq!(
        items(&unique(x(), [0, 1, 1, 1], None)),
        vec![
            sv(&[4], &[3., 1., 2., 0.]),
            sv(&[4], &[0., 1., 3., 5.]),
            sv(&[2, 3], &[0., 1., 0., 2., 1., 3.]),
            sv(&[4], &[2., 2., 1., 1.])
        ]
    );
    assert_eq!(
        items(&unique(x(), [0, 0, 1, 1], None)),
        vec![sv(&[4], &[3., 1., 2., 0.]), sv(&[2, 3], &[0., 1., 0., 2., 1., 3.]), sv(&[4], &[2., 2., 1., 1.])]
    );
    assert_eq!(
        items(&unique(x(), [1, 0, 1, 0], None)),
        vec![sv(&[4], &[0., 1., 2., 3.]), sv(&[2, 3], &[3., 1., 3., 2., 1., 0.])]
    );
    // Index outputs are int64.
    let tup = unique(x(), [1, 1, 1, 1], None);
    assert!(tup.as_tuple().unwrap()[1..].iter().all(|v| v.as_tensor().unwrap().dtype() == DataType::I64));
}

#[test]
fn unique_along_an_axis_matches_tvm() {
    let x = || t(&[2, 3], vec![3i32, 1, 3, 2, 1, 0]);
    assert_eq!(parts(&unique(x(), [1, 0, 0, 0], Some(1))).2, vec![1., 3., 3., 1., 0., 2.]);
    assert_eq!(parts(&unique(x(), [1, 0, 0, 0], Some(0))).2, vec![2., 1., 0., 3., 1., 3.]);
    assert_eq!(parts(&unique(x(), [0, 0, 0, 0], Some(1))).2, vec![3., 1., 3., 2., 1., 0.]);
    assert_eq!(
        items(&unique(x(), [1, 1, 1, 1], Some(1))),
        vec![
            sv(&[2, 3], &[1., 3., 3., 1., 0., 2.]),
            sv(&[3], &[1., 2., 0.]),
            sv(&[3], &[2., 0., 1.]),
            sv(&[3], &[1., 1., 1.])
        ]
    );
    assert_eq!(
        items(&unique(x(), [1, 1, 1, 1], Some(0))),
        vec![sv(&[2, 3], &[2., 1., 0., 3., 1., 3.]), sv(&[2], &[1., 0.]), sv(&[2], &[1., 0.]), sv(&[2], &[1., 1.])]
    );
    assert_eq!(
        items(&unique(x(), [0, 1, 1, 1], Some(1))),
        vec![
            sv(&[2, 3], &[3., 1., 3., 2., 1., 0.]),
            sv(&[3], &[0., 1., 2.]),
            sv(&[3], &[0., 1., 2.]),
            sv(&[3], &[1., 1., 1.])
        ]
    );
    // Negative axis; equal columns collapse.
    assert_eq!(
        items(&unique(t(&[2, 2], vec![1i8, 1, 2, 2]), [1, 1, 1, 1], Some(-1))),
        vec![sv(&[2, 1], &[1., 2.]), sv(&[1], &[0.]), sv(&[2], &[0., 0.]), sv(&[1], &[2.])]
    );
    // Zero-size slices are all equal: (3, 0) -> one unique row.
    assert_eq!(
        items(&unique(t(&[3, 0], Vec::<i8>::new()), [1, 1, 1, 1], Some(0))),
        vec![sv(&[1, 0], &[]), sv(&[1], &[0.]), sv(&[3], &[0., 0., 0.]), sv(&[1], &[3.])]
    );
    assert_eq!(parts(&unique(t(&[0, 2], Vec::<i8>::new()), [1, 0, 0, 0], Some(0))).0, vec![0, 2]);
    let e = err("relax.run.unique", &[t(&[1], vec![3i8]), 1.into(), 0.into(), 0.into(), 0.into(), 2.into()]);
    assert!(e.contains("axis 2 is out of bounds for array of dimension 1"), "{e}");
    let e = err(
        "relax.run.unique",
        &[Value::Tensor(Tensor::scalar(3i8)), 1.into(), 0.into(), 0.into(), 0.into(), 0.into()],
    );
    assert!(e.contains("axis 0 is out of bounds for array of dimension 0"), "{e}");
}

#[test]
fn unique_nan_and_signed_zero_match_tvm() {
    let f = || t(&[6], vec![f32::NAN, 1.0, -0.0, 0.0, f32::NAN, 1.0]);
    // sorted + all outputs: [-0.0, 1, nan], index [2, 1, 0], inverse [2,1,0,0,2,1], counts [2,2,2].
    let out = unique(f(), [1, 1, 1, 1], None);
    let it = out.as_tuple().unwrap();
    let vals = it[0].as_tensor().unwrap().to_vec::<f32>().unwrap();
    assert_eq!(vals[0].to_bits(), (-0.0f32).to_bits());
    assert_eq!(vals[1], 1.0);
    assert!(vals[2].is_nan());
    assert_eq!(i64s(&it[1]).1, vec![2, 1, 0]);
    assert_eq!(i64s(&it[2]).1, vec![2, 1, 0, 0, 2, 1]);
    assert_eq!(i64s(&it[3]).1, vec![2, 2, 2]);
    // unsorted: [nan, 1, -0.0], index [0, 1, 2], inverse [0,1,2,2,0,1].
    let out = unique(f(), [0, 1, 1, 1], None);
    let it = out.as_tuple().unwrap();
    let vals = it[0].as_tensor().unwrap().to_vec::<f32>().unwrap();
    assert!(vals[0].is_nan() && vals[1] == 1.0 && vals[2].to_bits() == (-0.0f32).to_bits());
    assert_eq!(i64s(&it[2]).1, vec![0, 1, 2, 2, 0, 1]);
    // Along an axis, rows holding NaN never collapse: [[nan,1],[nan,1],[0,2],[-0,2]].
    let x = t(&[4, 2], vec![f32::NAN, 1.0, f32::NAN, 1.0, 0.0, 2.0, -0.0, 2.0]);
    let out = unique(x, [1, 1, 1, 1], Some(0));
    let it = items(&out);
    assert_eq!(it[0].0, vec![3, 2]);
    assert_eq!(&it[0].1[..2], &[0.0, 2.0]);
    assert!(it[0].1[2].is_nan() && it[0].1[4].is_nan());
    assert_eq!(it[1].1, vec![2., 0., 1.]);
    assert_eq!(it[2].1, vec![1., 2., 0., 0.]);
    assert_eq!(it[3].1, vec![2., 1., 1.]);
    // float16 with NaN: [1, 2, nan], index [2, 0, 1], inverse [1,2,0,2,1], counts [1,2,2].
    let h = |x: f32| f16::from_f32(x);
    let out = unique(t(&[5], vec![h(2.0), f16::NAN, h(1.0), f16::NAN, h(2.0)]), [1, 1, 1, 1], None);
    let it = items(&out);
    assert_eq!(&it[0].1[..2], &[1.0, 2.0]);
    assert!(it[0].1[2].is_nan());
    assert_eq!(
        (it[1].1.clone(), it[2].1.clone(), it[3].1.clone()),
        (vec![2., 0., 1.], vec![1., 2., 0., 2., 1.], vec![1., 2., 2.])
    );
}

#[test]
fn unique_other_dtypes_and_edges_match_tvm() {
    let it = items(&unique(t(&[3], vec![true, false, true]), [1, 1, 1, 1], None));
    assert_eq!(it, vec![sv(&[2], &[0., 1.]), sv(&[2], &[1., 0.]), sv(&[3], &[1., 0., 1.]), sv(&[2], &[1., 2.])]);
    let u = unique(t(&[3], vec![u64::MAX, 0, 1 << 63]), [1, 1, 1, 1], None);
    let tup = u.as_tuple().unwrap();
    assert_eq!(tup[0].as_tensor().unwrap().to_vec::<u64>().unwrap(), vec![0, 1 << 63, u64::MAX]);
    assert_eq!(i64s(&tup[1]).1, vec![1, 2, 0]);
    // 0-d input: values (1,), inverse 0-d.
    let it = unique(Value::Tensor(Tensor::scalar(3i32)), [1, 1, 1, 1], None);
    let tup = it.as_tuple().unwrap();
    assert_eq!(parts(&tup[0]).0, vec![1]);
    assert_eq!(i64s(&tup[2]), (vec![], vec![0]));
    // Empty input.
    assert_eq!(parts(&unique(t(&[0], Vec::<i32>::new()), [0, 0, 0, 0], None)).0, vec![0]);
    assert_eq!(items(&unique(t(&[0], Vec::<i32>::new()), [0, 1, 1, 1], None)).len(), 4);
    // NaN-free bfloat16 sorts and collapses like numpy.
    let b = |x: f32| bf16::from_f32(x);
    assert_eq!(parts(&unique(t(&[3], vec![b(2.0), b(-1.0), b(2.0)]), [1, 0, 0, 0], None)).2, vec![-1.0, 2.0]);
    // Strided input: the transpose [[0, 3], [1, 4], [2, 5]] of arange(6) mod 2 -> unique rows.
    let base = Tensor::from_vec([2, 3], vec![0i64, 1, 0, 1, 0, 1]).unwrap();
    let tt = Tensor::from_parts(base.storage().clone(), 0, [3, 2].into(), Some(vec![1, 3]), DataType::I64).unwrap();
    assert_eq!(parts(&unique(Value::Tensor(tt), [1, 0, 0, 0], Some(0))).2, vec![0., 1., 1., 0.]);
    // Argument errors name the builtin.
    let n = "relax.run.unique";
    for args in [
        vec![Value::Int(1), 1.into(), 0.into(), 0.into(), 0.into()],
        vec![t(&[1], vec![1i8]), Value::str("x"), 0.into(), 0.into(), 0.into()],
        vec![t(&[1], vec![1i8]), 1.into(), 0.into(), 0.into(), 0.into(), Value::str("0")],
        vec![t(&[1], vec![1i8])],
    ] {
        assert!(err(n, &args).contains(n));
    }
    // Null axis is the flattened case.
    let args = [t(&[2], vec![2i8, 2]), 1.into(), 0.into(), 0.into(), 0.into(), Value::Null];
    assert_eq!(parts(&call(n, &args).unwrap()).2, vec![2.0]);
}

// ---------------------------------------------------------------- shape_to_tensor, print, assert

#[test]
fn shape_to_tensor_is_int64_or_empty_float64() {
    let n = "relax.run.shape_to_tensor";
    assert_eq!(i64s(&call(n, &[Value::Shape([2, 3].into())]).unwrap()), (vec![2], vec![2, 3]));
    // TVM: tvm.runtime.tensor([]) is float64 of shape (0,).
    assert_eq!(
        parts(&call(n, &[Value::Shape(Shape::from(Vec::<i64>::new()))]).unwrap()),
        (vec![0], DataType::F64, vec![])
    );
    assert!(err(n, &[Value::Int(2)]).contains(n));
    assert!(err(n, &[]).contains(n));
}

#[test]
fn print_formats_and_reports_errors() {
    let n = "relax.run.print";
    assert!(matches!(call(n, &[Value::str(""), Value::Int(1), t(&[2], vec![1.5f32, 2.0])]).unwrap(), Value::Null));
    call(n, &[Value::str("x={} y={0!r:>5}"), Value::str("a")]).unwrap_err();
    let f = registry().get(n).unwrap();
    let args = [Value::str("x={} y={:>5}"), Value::str("a"), Value::tuple(vec![Value::Int(1)])];
    let (r, printed) = relaxvm_builtins::output::capture(|| f.call(&mut CallCtx::detached(), &args));
    r.unwrap();
    assert_eq!(printed, "x=a y=  (1)\n");
    call(n, &[Value::str("")]).unwrap();
    assert!(err(n, &[Value::str("{} {}"), Value::Int(1)]).contains("index 1"));
    assert!(err(n, &[Value::str("{")]).contains(n));
    assert!(err(n, &[Value::str("}")]).contains("Single '}'"));
    assert!(err(n, &[Value::Int(1)]).contains(n));
    assert!(err(n, &[]).contains(n));
}

#[test]
fn assert_op_matches_tvm_messages() {
    let n = "relax.run.assert_op";
    // A huge field width is an error, not an allocation that aborts the process.
    for spec in ["{:>1099511627776}", "{:>18446744073709551615}"] {
        let e = err(n, &[Value::Bool(false), Value::str(spec), Value::Int(1)]);
        assert!(e.contains("format width") || e.contains("Invalid format specifier"), "{e}");
    }
    let ok = |args: &[Value]| assert!(matches!(call(n, args).unwrap(), Value::Null));
    ok(&[Value::Bool(true), Value::str("")]);
    ok(&[Value::Int(2), Value::str("{}"), Value::Int(1)]);
    ok(&[Value::Tensor(Tensor::scalar(true)), Value::str("")]);
    let e = err(n, &[Value::Bool(false), Value::str("")]);
    assert_eq!(e, "relax.run.assert_op: Assertion Failed");
    let e = err(n, &[Value::Int(0), Value::str(""), Value::Int(1), Value::str("a")]);
    assert_eq!(e, "relax.run.assert_op: 1, a");
    let e = err(
        n,
        &[
            Value::Tensor(Tensor::scalar(false)),
            Value::str("x is {}, y is {}"),
            Value::Int(3),
            Value::Shape([2].into()),
        ],
    );
    assert_eq!(e, "relax.run.assert_op: x is 3, y is (2,)");
    let e = err(n, &[Value::Bool(false), Value::str("{}"), t(&[2, 2], vec![1.5f32, 2.0, 3.0, 4.0])]);
    assert_eq!(e, "relax.run.assert_op: [[1.5 2. ]\n [3.  4. ]]");
    let e = err(n, &[Value::Tensor(Tensor::scalar(1i32)), Value::str("")]);
    assert!(e.contains("The condition must be a bool scalar, but given a int32 tensor"), "{e}");
    let e = err(n, &[t(&[1], vec![true]), Value::str("")]);
    assert!(e.contains("The condition must be a scalar, but it has a shape of (1,)"), "{e}");
    assert!(err(n, &[Value::Bool(false), Value::Int(1)]).contains(n));
    assert!(err(n, &[Value::str("x"), Value::str("")]).contains(n));
    assert!(err(n, &[Value::Bool(true)]).contains(n));
}

#[test]
fn rendering_follows_numpy_and_python() {
    // Through assert_op's message: render_object of each kind (texts printed by TVM/numpy).
    let msg = |v: Value| {
        let e = err("relax.run.assert_op", &[Value::Bool(false), Value::str("{}"), v]);
        e.strip_prefix("relax.run.assert_op: ").unwrap().to_string()
    };
    assert_eq!(msg(Value::Tensor(Tensor::scalar(3i32))), "3");
    assert_eq!(msg(t(&[3], vec![1i64, -20, 300])), "[  1 -20 300]");
    assert_eq!(msg(t(&[3], vec![true, false, true])), "[ True False  True]");
    assert_eq!(msg(t(&[2], vec![true, true])), "[True True]");
    assert_eq!(msg(t(&[3], vec![0.1f32, 2.0, f32::NAN])), "[0.1 2.  nan]");
    assert_eq!(msg(t(&[2], vec![1e-5f64, 1.0])), "[1.e-05 1.e+00]");
    // More texts printed by numpy 2.4's str().
    assert_eq!(msg(t(&[2], vec![f64::NAN, 1.0])), "[nan  1.]");
    assert_eq!(msg(t(&[3], vec![f64::INFINITY, -1.5, 100.25])), "[   inf  -1.5  100.25]");
    assert_eq!(msg(t(&[2], vec![1e10f32, 1.0])), "[1.e+10 1.e+00]");
    assert_eq!(msg(t(&[2], vec![-0.0f64, 0.0])), "[-0.  0.]");
    assert_eq!(msg(t(&[2], vec![f16::from_f64(1.0 / 3.0), f16::from_f64(2.0 / 3.0)])), "[0.3333 0.6665]");
    assert_eq!(msg(t(&[2], vec![123456789.0f64, 1.0])), "[1.23456789e+08 1.00000000e+00]");
    assert_eq!(msg(t(&[3], vec![1e-5f64, f64::NAN, f64::NEG_INFINITY])), "[1.e-05    nan   -inf]");
    assert_eq!(msg(t(&[2, 1, 2], vec![1i8, 2, 3, 4])), "[[[1 2]]\n\n [[3 4]]]");
    assert_eq!(msg(Value::tuple(vec![Value::Int(1), Value::str("a"), Value::Shape([1].into())])), "(1, a, (1,))");
    assert_eq!(msg(Value::Float(1e16)), "1e+16");
    assert_eq!(msg(Value::Float(0.5)), "0.5");
    assert_eq!(msg(Value::Float(2.0)), "2.0");
    assert_eq!(msg(Value::Float(1.5e-5)), "1.5e-05");
    assert_eq!(msg(Value::Bool(true)), "True");
    assert_eq!(msg(Value::Null), "None");
    let big = msg(t(&[2000], vec![7u8; 2000]));
    assert_eq!(big, "[7 7 7 ... 7 7 7]");
}

// ---------------------------------------------------------------- tvm_compat

#[test]
fn call_tir_dyn_and_debug_func() {
    let f = Value::packed(PackedFunc::from_fn("cat", |a| Ok(Value::tuple(a.to_vec()))));
    let out = call("vm.builtin.call_tir_dyn", &[f, Value::Int(7), Value::Shape([3, 4].into())]).unwrap();
    assert_eq!(out.to_string(), "(7, 3, 4)");
    let seen: &'static Mutex<Vec<String>> = Box::leak(Box::new(Mutex::new(Vec::new())));
    relaxvm::registry::register_global(
        PackedFunc::from_fn("test.tvm_builtins.debug", move |a| {
            seen.lock().unwrap().push(a.iter().map(|v| v.to_string()).collect::<Vec<_>>().join("|"));
            Ok(Value::Int(5))
        }),
        true,
    )
    .unwrap();
    let n = "vm.builtin.invoke_debug_func";
    let out =
        call(n, &[Value::Null, Value::str("test.tvm_builtins.debug"), Value::str("f.py:3"), Value::Int(1)]).unwrap();
    assert!(matches!(out, Value::Null));
    assert_eq!(seen.lock().unwrap().as_slice(), ["f.py:3|1"]);
    assert!(err(n, &[Value::Int(1), Value::str("test.tvm_builtins.debug"), Value::str("")]).contains("IOEffect"));
    assert!(err(n, &[Value::Null, Value::str("no.such.func"), Value::str("")]).contains("no.such.func is not found"));
    assert!(err(n, &[Value::Null, Value::Int(1), Value::str("")]).contains(n));
    assert!(err(n, &[Value::Null, Value::str("x")]).contains(n));
}
