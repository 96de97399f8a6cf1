//! VirtualMachine::trace from Rust: every call in order with copies, outputs of
//! destination-passing calls, the byte budget, first_difference, save/load, and errors.

use crate::common::looping;
use relaxvm::trace::{Opaque, Tolerance, Trace, TraceOptions};
use relaxvm::{
    Arg, CallCtx, DataType, ErrorKind, Executable, ExecutableParts, FuncInfo, Instruction, PackedFunc, Registry,
    Tensor, Value, VirtualMachine,
};
use std::sync::{Arc, Mutex};

/// Every builtin, plus `test.double_into(x, out)`: writes 2x into `out` and returns nothing,
/// as a TVM kernel does.
fn registry() -> Registry {
    let mut r = Registry::new();
    relaxvm_builtins::register_all(&mut r).unwrap();
    let double_into = PackedFunc::new("test.double_into", |_: &mut CallCtx<'_>, args: &[Value]| {
        let doubled: Vec<f32> = args[0].as_tensor()?.to_vec::<f32>()?.iter().map(|v| v * 2.0).collect();
        let bytes: Vec<u8> = doubled.iter().flat_map(|v| v.to_ne_bytes()).collect();
        args[1].as_tensor()?.storage().write(0, &bytes)?;
        Ok(Value::Null)
    });
    r.register(double_into, true).unwrap();
    r
}

/// main(x, out): test.double_into(x, out); ret out + out.
fn destination_passing() -> Arc<Executable> {
    Arc::new(
        Executable::from_parts(ExecutableParts {
            funcs: vec![
                FuncInfo::bytecode("main", 0, 3, 2, 4),
                FuncInfo::packed("test.double_into"),
                FuncInfo::packed("vm.op.add"),
            ],
            instrs: vec![
                Instruction::Call { func: 1, args: vec![Arg::Reg(0), Arg::Reg(1)], dst: None },
                Instruction::Call { func: 2, args: vec![Arg::Reg(1), Arg::Reg(1)], dst: Some(2) },
                Instruction::Ret { result: 2 },
            ],
            ..Default::default()
        })
        .unwrap(),
    )
}

fn vm(exe: Arc<Executable>) -> VirtualMachine {
    relaxvm_builtins::ensure_registered();
    VirtualMachine::with_overrides(exe, &registry()).unwrap()
}

fn f32s(data: &[f32]) -> Value {
    Value::Tensor(Tensor::from_vec([data.len() as i64], data.to_vec()).unwrap())
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_tensor().unwrap().to_vec::<f32>().unwrap()
}

fn trace_loop(x: &[f32], n: i64) -> Trace {
    vm(looping()).trace("main", &[f32s(x), Value::Int(n)], TraceOptions::default()).unwrap()
}

#[test]
fn steps_in_order_with_copies_at_the_time() {
    let trace = trace_loop(&[1.0, 2.0], 3);
    let places: Vec<_> =
        trace.steps.iter().map(|s| (s.function.to_string(), s.pc, s.callee.to_string(), s.depth)).collect();
    let one = [
        ("main".to_string(), 1, "twice".to_string(), 0),
        ("twice".to_string(), 0, "vm.op.add".to_string(), 1),
        ("main".to_string(), 2, "vm.builtin.int.sub".to_string(), 0),
    ];
    assert_eq!(places, one.iter().cycle().take(9).cloned().collect::<Vec<_>>());
    assert_eq!(trace.steps.iter().map(|s| s.index).collect::<Vec<_>>(), (0..9).collect::<Vec<_>>());
    // twice (step 0) returns after its add (step 1) started: end counts the steps started.
    assert_eq!((trace.steps[0].end, trace.steps[1].end, trace.steps[2].end), (2, 2, 3));
    let adds: Vec<_> = trace.find("vm.op.add").map(|s| floats(&s.values.as_ref().unwrap().result)).collect();
    assert_eq!(adds, vec![vec![2.0, 4.0], vec![4.0, 8.0], vec![8.0, 16.0]], "each copy holds its own moment");
    let sub = trace.step(2).unwrap().values.as_ref().unwrap();
    assert_eq!((sub.args[0].as_int().unwrap(), sub.result.as_int().unwrap()), (3, 2));
    assert_eq!(floats(&trace.result), vec![8.0, 16.0]);
    assert_eq!((trace.total_steps(), trace.skipped, trace.dropped()), (9, 0, 0));
}

#[test]
fn destination_passing_calls_show_what_they_wrote() {
    let out = f32s(&[0.0, 0.0]);
    let trace = vm(destination_passing()).trace("main", &[f32s(&[1.5, -2.0]), out], TraceOptions::default()).unwrap();
    let kernel = trace.steps[0].values.as_ref().unwrap();
    assert!(matches!(kernel.result, Value::Null));
    assert_eq!(floats(&kernel.args[1]), vec![0.0, 0.0], "arguments are copied before the call");
    assert_eq!(kernel.outputs.len(), 1);
    assert_eq!((kernel.outputs[0].0, floats(&kernel.outputs[0].1)), (1, vec![3.0, -4.0]));
    assert!(trace.steps[1].values.as_ref().unwrap().outputs.is_empty(), "an add writes no argument");
}

#[test]
fn over_the_budget_old_values_then_old_steps_are_dropped() {
    let x = vec![1.0f32; 1024]; // 4 KiB per tensor
    let n = 20;
    let full = trace_loop(&x, n);
    let small = vm(looping()).trace("main", &[f32s(&x), Value::Int(n)], TraceOptions { max_bytes: 64 << 10 }).unwrap();
    assert_eq!(small.total_steps(), full.total_steps());
    assert_eq!(small.skipped, 0);
    assert!(small.dropped() > 0 && small.steps.last().unwrap().values.is_some(), "the newest values are kept");
    let kept = small.steps.iter().position(|s| s.values.is_some()).unwrap();
    assert!(small.steps[..kept].iter().all(|s| s.values.is_none() || s.callee.as_str() == "vm.builtin.int.sub"));
    let tiny = vm(looping()).trace("main", &[f32s(&x), Value::Int(n)], TraceOptions { max_bytes: 1000 }).unwrap();
    assert!(tiny.skipped > 0 && tiny.steps.iter().all(|s| s.index >= tiny.skipped));
    assert_eq!(tiny.total_steps(), full.total_steps());
    assert!(tiny.steps.iter().all(|s| s.values.is_none() || s.callee.as_str() == "vm.builtin.int.sub"));
    // Steps whose values were dropped still compare by place; steps only one trace kept were
    // compared with nothing, which is said rather than "no difference".
    assert!(small.first_difference(&full, Tolerance::default()).is_none());
    let d = tiny.first_difference(&full, Tolerance::default()).unwrap();
    assert_eq!((d.index, d.what.as_str()), (0, "skipped"), "{d}");
}

#[test]
fn first_difference_finds_the_planted_divergence() {
    let a = trace_loop(&[1.0, 2.0], 3);
    assert!(a.first_difference(&trace_loop(&[1.0, 2.0], 3), Tolerance::default()).is_none());
    // A different input: the first add (step 1) differs, before twice (step 0), which returned later.
    let d = a.first_difference(&trace_loop(&[1.0, 2.5], 3), Tolerance::default()).unwrap();
    assert_eq!((d.index, d.what.as_str()), (1, "result"));
    assert_eq!(
        d.to_string(),
        "step 1 (twice pc 0: vm.op.add): result differs: 1 of 2 elements differ; the largest difference is 1 at (1) (4 vs 5)"
    );
    // Within tolerance it agrees.
    assert!(a.first_difference(&trace_loop(&[1.0, 2.000001], 3), Tolerance::default()).is_none());
    assert!(a.first_difference(&trace_loop(&[1.0, 2.001], 3), Tolerance { rtol: 1e-2, atol: 0.0 }).is_none());
    // Control flow: a trace that ends early, a step that calls something else.
    let mut b = a.clone();
    b.steps.truncate(6);
    let d = a.first_difference(&b, Tolerance::default()).unwrap();
    assert_eq!((d.index, d.what.as_str(), d.b.is_none()), (6, "step", true));
    assert_eq!(d.detail, "the second trace ends before step 6");
    let mut b = a.clone();
    b.steps[4].callee = "vm.op.multiply".into();
    let d = a.first_difference(&b, Tolerance::default()).unwrap();
    assert_eq!(
        d.detail,
        "twice pc 0 calls vm.op.add at depth 1 in the first trace, twice pc 0 calls vm.op.multiply at depth 1 in the second"
    );
    // The int counter differs from step 2 on when n differs, and is compared exactly.
    let d = trace_loop(&[1.0], 3).first_difference(&trace_loop(&[1.0], 4), Tolerance::default()).unwrap();
    assert_eq!((d.index, d.detail.as_str()), (2, "int 2 vs int 3"));
}

#[test]
fn first_difference_compares_nans_integers_and_positions_as_documented() {
    let a = trace_loop(&[1.0, 2.0], 3);
    // `a` with step 1's result replaced (step 1 is the first to return).
    let with = |v: Value| {
        let mut t = a.clone();
        t.steps[1].values.as_mut().unwrap().result = v;
        t
    };
    let tol = Tolerance::default();
    // NaN agrees with NaN, and with nothing else.
    let nan = with(f32s(&[f32::NAN, 4.0]));
    assert!(nan.first_difference(&with(f32s(&[f32::NAN, 4.0])), tol).is_none());
    let d = nan.first_difference(&with(f32s(&[2.0, 4.0])), tol).expect("NaN and a number differ");
    assert_eq!((d.index, d.what.as_str()), (1, "result"));
    assert!(d.detail.starts_with("1 of 2 elements differ; the largest difference is inf at (0)"), "{}", d.detail);
    // Integers compare exactly, even where the float tolerance would call them close.
    let int = |v: i64| Value::Tensor(Tensor::from_vec([1], vec![v]).unwrap());
    let d = with(int(1_000_000)).first_difference(&with(int(1_000_001)), tol).expect("the integers differ");
    assert_eq!(d.detail, "1 of 1 elements differ; the largest difference is 1 at (0) (1000000 vs 1000001)");
    // A position names every axis, the last varying fastest.
    let grid = |at: Option<usize>| {
        let mut v = vec![0f32; 6];
        if let Some(i) = at {
            v[i] = 1.0;
        }
        Value::Tensor(Tensor::from_vec([2, 3], v).unwrap())
    };
    let d = with(grid(None)).first_difference(&with(grid(Some(2))), tol).expect("one element differs");
    assert_eq!(d.detail, "1 of 6 elements differ; the largest difference is 1 at (0, 2) (0 vs 1)");
}

#[test]
fn save_and_load_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.npz");
    let a = trace_loop(&[1.0, f32::NAN], 2);
    a.save(&path).unwrap();
    let b = Trace::load(&path).unwrap();
    assert_eq!((b.function.as_str(), b.total_steps(), b.skipped), ("main", 6, 0));
    assert!(a.first_difference(&b, Tolerance::default()).is_none(), "NaN agrees with NaN");
    assert_eq!(floats(&b.steps[1].values.as_ref().unwrap().result)[0], 2.0);

    // Values numpy cannot hold as themselves: bfloat16, tuples, floats, opaque objects.
    let mut t = a.clone();
    let bf =
        Tensor::from_vec([2], vec![relaxvm::half::bf16::from_f32(1.5), relaxvm::half::bf16::from_f32(-2.0)]).unwrap();
    let func = Value::packed(PackedFunc::typed("test.f", |a: i64| a));
    let values = t.steps[2].values.as_mut().unwrap();
    values.result = Value::tuple(vec![Value::Tensor(bf.clone()), Value::Float(f64::INFINITY), func, Value::str("s")]);
    t.save(&path).unwrap();
    let back = Trace::load(&path).unwrap();
    let r = back.steps[2].values.as_ref().unwrap().result.as_tuple().unwrap().to_vec();
    assert_eq!(r[0].as_tensor().unwrap().dtype(), DataType::BF16);
    assert!(r[0].as_tensor().unwrap().content_eq(&bf));
    assert_eq!(r[1].as_float().unwrap(), f64::INFINITY);
    let Value::Object(o) = &r[2] else { panic!("{:?}", r[2]) };
    assert_eq!(o.downcast_ref::<Opaque>().unwrap().kind, "function");
    assert_eq!(r[3].as_str().unwrap(), "s");
    assert!(t.first_difference(&back, Tolerance::default()).is_none());
}

#[test]
fn load_rejects_what_is_not_a_trace() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.npz");
    std::fs::write(&path, b"PK\x03\x04 not a zip").unwrap();
    let e = Trace::load(&path).unwrap_err().to_string();
    assert!(e.starts_with(&format!("cannot read trace {}", path.display())), "{e}");
    let e = Trace::load(dir.path().join("missing.npz")).unwrap_err().to_string();
    assert!(e.contains("No such file"), "{e}");
    // A zip without the JSON.
    let a = trace_loop(&[1.0], 1);
    a.save(&path).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    let mut renamed = 0;
    for i in 0..bytes.len() - 9 {
        if &bytes[i..i + 9] == b"__trace__" {
            bytes[i..i + 9].copy_from_slice(b"__other__");
            renamed += 1;
        }
    }
    assert_eq!(renamed, 2, "the local header and the central directory name it");
    std::fs::write(&path, &bytes).unwrap();
    let e = Trace::load(&path).unwrap_err().to_string();
    assert!(e.contains("__trace__"), "{e}");
}

#[test]
fn a_failing_run_returns_its_trace_and_the_vm_works() {
    let mut vm = vm(looping());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    vm.set_instrument(Some(Box::new(move |c| {
        log.lock().unwrap().push((c.name.to_string(), c.before, c.ret.is_some()));
        Ok(relaxvm::InstrumentAction::Continue)
    })));
    let e = vm.trace("main", &[Value::str("x"), Value::Int(2)], TraceOptions::default()).unwrap_err();
    assert!(matches!(e.error.root().kind(), ErrorKind::Type { .. }), "{e}");
    let places: Vec<_> = e.trace.steps.iter().map(|s| (s.callee.to_string(), s.failed)).collect();
    assert_eq!(places, vec![("twice".to_string(), true), ("vm.op.add".to_string(), true)]);
    assert_eq!(e.trace.steps[1].values.as_ref().unwrap().args[0].as_str().unwrap(), "x");
    assert!(seen.lock().unwrap().is_empty(), "the user's hook was set aside during the run");
    // The user's hook now hears of failures too: a failing call ends with no result.
    let e = vm.invoke("main", &[Value::str("x"), Value::Int(1)]).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::Type { .. }), "{e}");
    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            ("twice".to_string(), true, false),
            ("vm.op.add".to_string(), true, false),
            ("vm.op.add".to_string(), false, false),
            ("twice".to_string(), false, false),
        ]
    );
    let t = vm.trace("main", &[f32s(&[1.0]), Value::Int(1)], TraceOptions::default()).unwrap();
    assert_eq!(t.total_steps(), 3);
    let e = vm.trace("nope", &[], TraceOptions::default()).unwrap_err();
    assert!(e.to_string().contains("nope") && e.trace.steps.is_empty(), "{e}");
}
