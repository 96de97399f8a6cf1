//! Packed functions specialised to a call site's fixed operands ([`PackedFunc::with_specializer`]):
//! the interpreter asks once per call site at load, calls what it was given there (in plain and
//! instrumented runs alike), and keeps the general function where the specializer declines.

use relaxvm::registry::Registry;
use relaxvm::{
    Arg, Cost, Error, ErrorKind, Executable, ExecutableParts, FuncInfo, Instruction, InstrumentAction, PackedFunc,
    Value, VirtualMachine,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// What one test's functions saw: the fixed-operand patterns the specializer was asked about,
/// and how many calls each version served.
#[derive(Default)]
struct Seen {
    asked: Mutex<Vec<Vec<Option<i64>>>>,
    general: AtomicUsize,
    special: AtomicUsize,
}

/// `sum(a, b, c)` of ints; its specializer declines unless the last operand is fixed, and the
/// specialised version adds that fixed value (parsed once) to the first two.
fn sum3(seen: &Arc<Seen>) -> PackedFunc {
    fn ints(args: &[Value]) -> relaxvm::Result<Vec<i64>> {
        args.iter().map(|v| v.as_int()).collect()
    }
    let (g, s) = (Arc::clone(seen), Arc::clone(seen));
    PackedFunc::from_fn("t.sum3", move |args| {
        g.general.fetch_add(1, Ordering::Relaxed);
        if args.len() != 3 {
            return Err(Error::arity("t.sum3", "3", args.len()));
        }
        Ok(Value::Int(ints(args)?.iter().sum()))
    })
    .with_cost(Cost::Constant)
    .with_specializer(move |fixed| {
        s.asked.lock().unwrap().push(fixed.iter().map(|v| v.map(|v| v.as_int().unwrap_or(-1))).collect());
        let c = fixed.get(2).copied().flatten()?.as_int().ok()?;
        let s = Arc::clone(&s);
        Some(PackedFunc::from_fn("whatever", move |args| {
            s.special.fetch_add(1, Ordering::Relaxed);
            Ok(Value::Int(args[0].as_int()? + args[1].as_int()? + c))
        }))
    })
}

/// `f(x)`: `sum3(x, 10, 100)` then `sum3(x, 1, x)` (not specialised: its last operand is a
/// register), returning the sum of both.
fn program(seen: &Arc<Seen>) -> VirtualMachine {
    use Arg::*;
    let funcs = vec![FuncInfo::bytecode("f", 0, 4, 1, 3), FuncInfo::packed("t.sum3")];
    let instrs = vec![
        Instruction::Call { func: 1, args: vec![Reg(0), Imm(10), Imm(100)], dst: Some(1) },
        Instruction::Call { func: 1, args: vec![Reg(0), Imm(1), Reg(0)], dst: Some(2) },
        Instruction::Call { func: 1, args: vec![Reg(1), Reg(2), Imm(0)], dst: Some(1) },
        Instruction::Ret { result: 1 },
    ];
    let exe = Executable::from_parts(ExecutableParts { funcs, instrs, ..Default::default() }).unwrap();
    let mut overrides = Registry::default();
    overrides.register(sum3(seen), true).unwrap();
    VirtualMachine::with_overrides(Arc::new(exe), &overrides).unwrap()
}

#[test]
fn specialised_call_sites_run_their_own_function() {
    let seen = Arc::new(Seen::default());
    let mut vm = program(&seen);
    assert_eq!(
        *seen.asked.lock().unwrap(),
        vec![vec![None, Some(10), Some(100)], vec![None, Some(1), None], vec![None, None, Some(0)]],
        "asked once per call site at load, with registers as None"
    );
    assert_eq!(vm.invoke("f", &[Value::Int(5)]).unwrap().as_int().unwrap(), (5 + 10 + 100) + (5 + 1 + 5));
    assert_eq!(seen.special.load(Ordering::Relaxed), 2, "the first and third sites");
    assert_eq!(seen.general.load(Ordering::Relaxed), 1, "the second site declined");
    assert_eq!(seen.asked.lock().unwrap().len(), 3, "not asked again per call");
}

#[test]
fn a_specialised_functions_errors_are_located_at_its_call() {
    let seen = Arc::new(Seen::default());
    let mut vm = program(&seen);
    let e = vm.invoke("f", &[Value::str("x")]).unwrap_err();
    let ErrorKind::At { func, pc, .. } = e.kind() else { panic!("located: {e}") };
    assert_eq!((func.as_str(), *pc), ("f", 0), "{e}");
    assert_eq!(seen.special.load(Ordering::Relaxed), 1);
}

#[test]
fn instrumented_runs_call_what_plain_runs_call() {
    let seen = Arc::new(Seen::default());
    let mut vm = program(&seen);
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    vm.set_instrument(Some(Box::new(move |c| {
        if c.before {
            counted.fetch_add(1, Ordering::Relaxed);
        }
        Ok(InstrumentAction::Continue)
    })));
    assert_eq!(vm.invoke("f", &[Value::Int(5)]).unwrap().as_int().unwrap(), 126);
    assert_eq!(calls.load(Ordering::Relaxed), 3);
    // The specialised first and third sites, as in a plain run (profiles time what runs).
    assert_eq!((seen.special.load(Ordering::Relaxed), seen.general.load(Ordering::Relaxed)), (2, 1));
}

#[test]
fn specialize_keeps_the_name_and_cost_and_declines_without_a_specializer() {
    let seen = Arc::new(Seen::default());
    let f = sum3(&seen);
    let (ten, hundred) = (Value::Int(10), Value::Int(100));
    let special = f.specialize(&[None, Some(&ten), Some(&hundred)]).expect("specialised");
    assert_eq!((special.name(), special.cost()), ("t.sum3", Cost::Constant));
    assert!(f.specialize(&[None, None, None]).is_none(), "the specializer declined");
    let plain = PackedFunc::from_fn("t.plain", |_| Ok(Value::Null));
    assert!(plain.specialize(&[Some(&ten)]).is_none());
}

#[test]
fn a_panicking_specializer_declines() {
    let f = PackedFunc::from_fn("t.p", |a| Ok(Value::Int(a.len() as i64))).with_specializer(|_| panic!("no"));
    let one = Value::Int(1);
    assert!(f.specialize(&[Some(&one)]).is_none());
    let funcs = vec![FuncInfo::bytecode("f", 0, 2, 0, 1), FuncInfo::packed("t.p")];
    let instrs =
        vec![Instruction::Call { func: 1, args: vec![Arg::Imm(1)], dst: Some(0) }, Instruction::Ret { result: 0 }];
    let exe = Executable::from_parts(ExecutableParts { funcs, instrs, ..Default::default() }).unwrap();
    let mut overrides = Registry::default();
    overrides.register(f, true).unwrap();
    let mut vm = VirtualMachine::with_overrides(Arc::new(exe), &overrides).expect("loads");
    assert_eq!(vm.invoke("f", &[]).unwrap().as_int().unwrap(), 1);
}
