//! The interpreter on hand-built executables: every instruction, calls, recursion, loops,
//! closures, errors and unwinding.

use relaxvm::registry::register_global;
use relaxvm::{
    Arg, CallCtx, ErrorKind, Executable, ExecutableParts, FuncInfo, Instruction, InstrumentAction, Location,
    PackedFunc, Registry, Value, VirtualMachine,
};
use std::sync::{Arc, Mutex, Once};

fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let reg = |f| register_global(f, true).unwrap();
        reg(PackedFunc::typed("t.add", |a: i64, b: i64| a + b));
        reg(PackedFunc::typed("t.sub", |a: i64, b: i64| a - b));
        reg(PackedFunc::typed("t.lt", |a: i64, b: i64| a < b));
        reg(PackedFunc::from_fn("t.fail", |_| Err(relaxvm::Error::value("boom"))));
        reg(PackedFunc::from_fn("t.tuple", |a| Ok(Value::tuple(a.to_vec()))));
        reg(PackedFunc::select("t.second", |name, a| {
            a.get(1).map(relaxvm::Selected::Value).ok_or_else(|| relaxvm::Error::arity(name, "2", a.len()))
        }));
        reg(PackedFunc::new("t.call", |ctx: &mut CallCtx<'_>, a: &[Value]| {
            assert!(matches!(a[0], Value::VmState));
            ctx.call(&a[1], &a[2..])
        }));
        reg(PackedFunc::from_fn("t.closure", |a| {
            let f = a[0].as_func()?;
            Ok(Value::Func(Arc::new(relaxvm::Closure { callable: f.callable.clone(), captured: a[1..].to_vec() })))
        }));
    });
}

fn func(name: &str, range: (u32, u32), num_args: u32, regs: u32) -> FuncInfo {
    FuncInfo::bytecode(name, range.0, range.1, num_args, regs)
}

fn call(func: u32, args: Vec<Arg>, dst: Option<u32>) -> Instruction {
    Instruction::Call { func, args, dst }
}

fn vm(funcs: Vec<FuncInfo>, instrs: Vec<Instruction>, constants: Vec<Value>) -> VirtualMachine {
    setup();
    let exe = Executable::from_parts(ExecutableParts { funcs, instrs, constants, ..Default::default() }).unwrap();
    VirtualMachine::new(Arc::new(exe)).unwrap()
}

/// sum(n) = 0 + 1 + ... + (n-1), with a loop of lt / if / add / add / goto.
#[test]
fn loops_with_if_and_goto() {
    use Arg::*;
    let mut m = vm(
        vec![func("sum", (0, 8), 1, 4), FuncInfo::packed("t.lt"), FuncInfo::packed("t.add")],
        vec![
            call(2, vec![Imm(0), Imm(0)], Some(1)),
            call(2, vec![Imm(0), Imm(0)], Some(2)),
            call(1, vec![Reg(2), Reg(0)], Some(3)),
            Instruction::If { cond: 3, false_offset: 4 },
            call(2, vec![Reg(1), Reg(2)], Some(1)),
            call(2, vec![Reg(2), Imm(1)], Some(2)),
            Instruction::Goto { offset: -4 },
            Instruction::Ret { result: 1 },
        ],
        vec![],
    );
    assert_eq!(m.invoke("sum", &[Value::Int(10)]).unwrap().as_int().unwrap(), 45);
    assert_eq!(m.invoke("sum", &[Value::Int(0)]).unwrap().as_int().unwrap(), 0);
}

fn fib_vm() -> VirtualMachine {
    use Arg::*;
    // fib(n) = n < 2 ? n : fib(n-1) + fib(n-2)
    vm(
        vec![func("fib", (0, 9), 1, 5), FuncInfo::packed("t.lt"), FuncInfo::packed("t.sub"), FuncInfo::packed("t.add")],
        vec![
            call(1, vec![Reg(0), Imm(2)], Some(1)),
            Instruction::If { cond: 1, false_offset: 2 },
            Instruction::Ret { result: 0 },
            call(2, vec![Reg(0), Imm(1)], Some(2)),
            call(0, vec![Reg(2)], Some(3)),
            call(2, vec![Reg(0), Imm(2)], Some(2)),
            call(0, vec![Reg(2)], Some(4)),
            call(3, vec![Reg(3), Reg(4)], Some(1)),
            Instruction::Ret { result: 1 },
        ],
        vec![],
    )
}

#[test]
fn recursion() {
    let mut m = fib_vm();
    assert_eq!(m.invoke("fib", &[Value::Int(15)]).unwrap().as_int().unwrap(), 610);
}

#[test]
fn unbounded_recursion_is_an_error_and_vm_recovers() {
    use Arg::*;
    let mut m =
        vm(vec![func("f", (0, 2), 1, 2)], vec![call(0, vec![Reg(0)], Some(1)), Instruction::Ret { result: 1 }], vec![]);
    m.limits_mut().max_call_depth = 1000;
    let e = m.invoke("f", &[Value::Int(1)]).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::StackOverflow(1000)), "{e}");
    let mut fib = fib_vm();
    fib.limits_mut().max_call_depth = 5;
    assert_eq!(
        format!("{:?}", fib.invoke("fib", &[Value::Int(10)]).expect_err("an error")),
        r#"At { func: "fib", pc: 4, instr: "call  fib  in: %2  dst: %3", location: None, source: StackOverflow(5) }"#
    );
    assert_eq!(fib.invoke("fib", &[Value::Int(3)]).unwrap().as_int().unwrap(), 2);
}

#[test]
fn errors_name_function_instruction_and_location() {
    use Arg::*;
    setup();
    let exe = Executable::from_parts(ExecutableParts {
        funcs: vec![func("main", (0, 2), 1, 2), FuncInfo::packed("t.fail")],
        instrs: vec![call(1, vec![Reg(0), Imm(3)], Some(1)), Instruction::Ret { result: 1 }],
        constants: vec![],
        locations: vec![Some(Location::File { file: "m.py".into(), line: 7, col: 3 }), None],
        entry: None,
        libraries: vec![],
    })
    .unwrap();
    let mut m = VirtualMachine::new(Arc::new(exe)).unwrap();
    let e = m.invoke("main", &[Value::Int(1)]).unwrap_err().to_string();
    assert!(e.contains("boom") && e.contains("\"main\"") && e.contains("instruction 0"), "{e}");
    assert!(e.contains("call  t.fail  in: %0, i3  dst: %1") && e.contains("m.py\":7:3"), "{e}");
}

#[test]
fn wrong_arity_and_unknown_function() {
    let mut m = fib_vm();
    let e = m.invoke("fib", &[]).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Arity { .. }), "{e}");
    let e = m.invoke("nope", &[]).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::UnknownFunction(_)), "{e}");
}

#[test]
fn missing_packed_functions_are_all_named_at_construction() {
    let exe = Executable::from_parts(ExecutableParts {
        funcs: vec![func("main", (0, 1), 1, 1), FuncInfo::packed("no.such.a"), FuncInfo::packed("no.such.b")],
        instrs: vec![Instruction::Ret { result: 0 }],
        ..Default::default()
    })
    .unwrap();
    let e = VirtualMachine::new(Arc::new(exe.clone())).unwrap_err().to_string();
    assert!(e.contains("no.such.a") && e.contains("no.such.b"), "{e}");
    let mut over = Registry::new();
    over.register_typed("no.such.a", || 1i64).unwrap();
    over.register_typed("no.such.b", || 2i64).unwrap();
    assert!(VirtualMachine::with_overrides(Arc::new(exe), &over).is_ok());
}

#[test]
fn if_rejects_non_scalar_condition() {
    let mut m = vm(
        vec![func("main", (0, 3), 1, 1)],
        vec![
            Instruction::If { cond: 0, false_offset: 2 },
            Instruction::Ret { result: 0 },
            Instruction::Ret { result: 0 },
        ],
        vec![],
    );
    assert_eq!(
        format!("{:?}", m.invoke("main", &[Value::str("x")]).expect_err("an error")),
        r#"At { func: "main", pc: 0, instr: "if  %0  2", location: None, source: Type { expected: "int, bool or one-element tensor", found: "str" } }"#
    );
    assert_eq!(m.invoke("main", &[Value::Bool(false)]).unwrap().as_int().unwrap(), 0);
}

#[test]
fn constants_void_and_functions_as_arguments() {
    use Arg::*;
    let mut m = vm(
        vec![func("main", (0, 2), 0, 1), FuncInfo::packed("t.tuple")],
        vec![call(1, vec![Const(0), Void, Func(0), Imm(-5)], Some(0)), Instruction::Ret { result: 0 }],
        vec![Value::str("hello")],
    );
    let out = m.invoke("main", &[]).unwrap();
    let t = out.as_tuple().unwrap();
    assert_eq!(t[0].as_str().unwrap(), "hello");
    assert!(matches!(t[1], Value::Null));
    assert_eq!(t[2].as_func().unwrap().name(), "main");
    assert_eq!(t[3].as_int().unwrap(), -5);
}

#[test]
fn select_functions_write_only_what_changes() {
    use Arg::*;
    // main(a, b): r2 = second(a, b); r2 = second(b, b) (already there); r3 = second(a, c[0]);
    // second(a) -> void errors (one argument) only when reached through the flag.
    let mut m = vm(
        vec![func("main", (0, 6), 3, 5), FuncInfo::packed("t.second"), FuncInfo::packed("t.tuple")],
        vec![
            call(1, vec![Reg(0), Reg(1)], Some(3)),
            call(1, vec![Reg(1), Reg(3)], Some(3)),
            call(1, vec![Reg(0), Const(0)], Some(4)),
            call(1, vec![Reg(4), Reg(1)], None),
            call(2, vec![Reg(3), Reg(4)], Some(4)),
            Instruction::Ret { result: 4 },
        ],
        vec![Value::str("k")],
    );
    let b = Value::Tensor(relaxvm::Tensor::scalar(2i32));
    let out = m.invoke("main", &[Value::Int(1), b.clone(), Value::Null]).unwrap();
    let t = out.as_tuple().unwrap();
    assert!(t[0].same_object(&b), "{out}");
    assert_eq!(t[1].as_str().unwrap(), "k");
    let mut bad = vm(
        vec![func("main", (0, 2), 1, 2), FuncInfo::packed("t.second")],
        vec![call(1, vec![Reg(0)], Some(1)), Instruction::Ret { result: 1 }],
        vec![],
    );
    let e = bad.invoke("main", &[Value::Int(1)]).unwrap_err().to_string();
    assert!(e.contains("t.second") && e.contains("instruction 0"), "{e}");
}

#[test]
fn closures_capture_after_call_arguments() {
    use Arg::*;
    // main(x): c = closure(sub, 10); return call(vm, c, x)  ==  sub(x, 10)
    let mut m = vm(
        vec![
            func("main", (0, 3), 1, 3),
            func("sub", (3, 5), 2, 3),
            FuncInfo::packed("t.closure"),
            FuncInfo::packed("t.call"),
            FuncInfo::packed("t.sub"),
        ],
        vec![
            call(2, vec![Func(1), Imm(10)], Some(1)),
            call(3, vec![VmState, Reg(1), Reg(0)], Some(2)),
            Instruction::Ret { result: 2 },
            call(4, vec![Reg(0), Reg(1)], Some(2)),
            Instruction::Ret { result: 2 },
        ],
        vec![],
    );
    assert_eq!(m.invoke("main", &[Value::Int(3)]).unwrap().as_int().unwrap(), -7);
    let sub = m.get_function("sub").unwrap();
    assert_eq!(m.invoke_closure(&sub, &[Value::Int(5), Value::Int(1)]).unwrap().as_int().unwrap(), 4);
    assert_eq!(
        format!("{:?}", m.invoke_closure(&sub, &[Value::Int(5)]).expect_err("an error")),
        r#"Arity { func: "sub", expected: "2", got: 1 }"#
    );
}

#[test]
fn saved_functions_and_stateful_calls() {
    let mut m = fib_vm();
    m.save_function("fib", "fib10", vec![Value::Int(10)], true).unwrap();
    assert_eq!(m.invoke("fib10", &[]).unwrap().as_int().unwrap(), 55);
    m.save_function("fib", "fib10_noret", vec![Value::Int(10)], false).unwrap();
    assert!(matches!(m.invoke("fib10_noret", &[]).unwrap(), Value::Null));
    // A saved function saved again keeps its saved arguments (attack finding other/01), and
    // the count is checked against all of them.
    m.save_function("fib10", "fib10_again", vec![], true).unwrap();
    assert_eq!(m.invoke("fib10_again", &[]).unwrap().as_int().unwrap(), 55);
    m.save_function("fib10", "fib10_again_noret", vec![], false).unwrap();
    assert!(matches!(m.invoke("fib10_again_noret", &[]).unwrap(), Value::Null));
    assert_eq!(
        format!("{:?}", m.save_function("fib10", "bad", vec![Value::Int(3)], true).expect_err("an error")),
        r#"Arity { func: "fib", expected: "1", got: 2 }"#
    );
    assert_eq!(
        format!("{:?}", m.save_function("fib", "bad", vec![], true).expect_err("an error")),
        r#"Arity { func: "fib", expected: "1", got: 0 }"#
    );
    assert_eq!(
        format!("{:?}", m.get_outputs("fib").expect_err("an error")),
        r#"Value("no outputs for \"fib\": call invoke_stateful first")"#
    );
    assert_eq!(
        format!("{:?}", m.invoke_stateful("fib").expect_err("an error")),
        r#"Value("no inputs were set for \"fib\": call set_input first")"#
    );
    m.set_input("fib", vec![Value::Int(7)]).unwrap();
    m.invoke_stateful("fib").unwrap();
    assert_eq!(m.get_outputs("fib").unwrap().as_int().unwrap(), 13);
    assert_eq!(
        format!("{:?}", m.set_input("fib", vec![]).expect_err("an error")),
        r#"Arity { func: "fib", expected: "1", got: 0 }"#
    );
}

#[test]
fn instrument_sees_and_can_skip_calls() {
    let mut m = fib_vm();
    let log = Arc::new(Mutex::new(Vec::new()));
    let l2 = log.clone();
    m.set_instrument(Some(Box::new(move |c| {
        l2.lock().unwrap().push(format!("{}:{}", c.name, c.before));
        Ok(if c.name == "t.add" && c.before { InstrumentAction::Skip } else { InstrumentAction::Continue })
    })));
    let out = m.invoke("fib", &[Value::Int(2)]).unwrap();
    assert!(matches!(out, Value::Null), "add was skipped: {out}");
    let log = log.lock().unwrap();
    assert!(log.contains(&"fib:true".to_string()) && log.contains(&"fib:false".to_string()), "{log:?}");
    assert!(log.contains(&"t.add:true".to_string()) && !log.contains(&"t.add:false".to_string()), "{log:?}");
    drop(log);
    m.set_instrument(None);
    assert_eq!(m.invoke("fib", &[Value::Int(2)]).unwrap().as_int().unwrap(), 1);
}

#[test]
fn step_budget_and_interrupt() {
    use Arg::*;
    let mut m = vm(vec![func("spin", (0, 1), 0, 0)], vec![Instruction::Goto { offset: 0 }], vec![]);
    m.limits_mut().step_budget = Some(1000);
    let e = m.invoke("spin", &[]).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::StepBudget(1000)), "{e}");
    m.limits_mut().step_budget = None;
    let h = m.interrupt_handle();
    // Ordered by events, not by a sleep: an interrupt sent before the run starts is discarded
    // as stale, so the thread interrupts again and again until the run has returned (one sent
    // once after a pause hangs the test when this thread is scheduled late).
    let finished = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let t = std::thread::spawn({
        let finished = Arc::clone(&finished);
        move || {
            while !finished.load(std::sync::atomic::Ordering::Acquire) {
                h.interrupt();
                std::thread::yield_now();
            }
        }
    });
    let e = m.invoke("spin", &[]).unwrap_err();
    finished.store(true, std::sync::atomic::Ordering::Release);
    assert!(matches!(e.root().kind(), ErrorKind::Interrupted), "{e}");
    t.join().unwrap();
    let _: relaxvm::Arg = Imm(0);
}

#[test]
fn poll_hook_can_stop_a_run() {
    let mut m = vm(vec![func("spin", (0, 1), 0, 0)], vec![Instruction::Goto { offset: 0 }], vec![]);
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let c2 = calls.clone();
    m.set_poll_hook(Some(Arc::new(move || {
        if c2.fetch_add(1, std::sync::atomic::Ordering::Relaxed) == 2 {
            Err(relaxvm::Error::value("signal"))
        } else {
            Ok(())
        }
    })));
    let e = m.invoke("spin", &[]).unwrap_err();
    assert_eq!(e.root().to_string(), "signal");
    assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), 3);
    m.set_poll_hook(None);
    m.limits_mut().step_budget = Some(5000);
    assert!(matches!(m.invoke("spin", &[]).unwrap_err().root().kind(), ErrorKind::StepBudget(_)));
}

#[test]
fn executable_is_send_sync_and_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Executable>();
    fn assert_send<T: Send>() {}
    assert_send::<VirtualMachine>();
    let m = fib_vm();
    let exe = m.executable().clone();
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let exe = exe.clone();
            std::thread::spawn(move || {
                let mut vm = VirtualMachine::new(exe).unwrap();
                vm.invoke("fib", &[Value::Int(10 + i)]).unwrap().as_int().unwrap()
            })
        })
        .collect();
    let got: Vec<i64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(got, vec![55, 89, 144, 233, 377, 610, 987, 1597]);
}

#[test]
fn text_and_python_dumps() {
    let m = fib_vm();
    let text = m.executable().as_text();
    assert!(text.contains("@fib inputs=1 regs=5:"), "{text}");
    assert!(text.contains("  call  t.lt  in: %0, i2  dst: %1\n"), "{text}");
    assert!(text.contains("  if  %1  2\n") && text.contains("  ret  %0\n"), "{text}");
    let py = m.executable().as_python();
    assert!(py.contains("with ib.function(\"fib\", num_inputs=1):"), "{py}");
    assert!(py.contains("ib.emit_if(ib.r(1), 2)"), "{py}");
    let stats = m.executable().stats();
    assert!(stats.contains("Globals (#1): [fib]") && stats.contains("Packed functions (#3)"), "{stats}");
}
