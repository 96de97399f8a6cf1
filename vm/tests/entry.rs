//! Entry points (`VirtualMachine::entry` / `call_entry` / `call_entry_with`): a function resolved once is called as
//! `invoke` calls it — the same results, errors, limits, budget and recovery — and an entry
//! that cannot be one (signature, captured values, packed, another VM's) is refused.

use relaxvm::registry::register_global;
use relaxvm::{
    Arg, Closure, ErrorKind, Executable, ExecutableParts, FuncInfo, Instruction, InstrumentAction, PackedFunc,
    Signature, Value, VirtualMachine,
};
use std::sync::{Arc, Once};

fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let reg = |f| register_global(f, true).unwrap();
        reg(PackedFunc::typed("entry.lt", |a: i64, b: i64| a < b));
        reg(PackedFunc::typed("entry.sub", |a: i64, b: i64| a - b));
        reg(PackedFunc::typed("entry.add", |a: i64, b: i64| a + b));
        reg(PackedFunc::from_fn("entry.fail", |_| Err(relaxvm::Error::value("boom"))));
    });
}

fn call(func: u32, args: Vec<Arg>, dst: Option<u32>) -> Instruction {
    Instruction::Call { func, args, dst }
}

/// `fib(n)` (recursive), `fail(x)` (an error from a packed call), `spin()` (an endless loop),
/// `id(x)`, `typed(x)` with a signature, `first(x, y)`, `blank(x)` (returns its second
/// register, never written: null) and `second(x, y)` (returns `y`, in a frame of 3 registers).
fn exe() -> Arc<Executable> {
    use Arg::*;
    setup();
    let sig: Signature = "(x: i64) -> i64".parse().unwrap();
    Arc::new(
        Executable::from_parts(ExecutableParts {
            funcs: vec![
                FuncInfo::bytecode("fib", 0, 9, 1, 5),
                FuncInfo::packed("entry.lt"),
                FuncInfo::packed("entry.sub"),
                FuncInfo::packed("entry.add"),
                FuncInfo::bytecode("fail", 9, 11, 1, 2),
                FuncInfo::packed("entry.fail"),
                FuncInfo::bytecode("spin", 11, 12, 0, 0),
                FuncInfo::bytecode("id", 12, 13, 1, 1),
                FuncInfo::bytecode("typed", 13, 14, 1, 1).with_signature(sig),
                FuncInfo::bytecode("first", 14, 15, 2, 2),
                FuncInfo::bytecode("blank", 15, 16, 1, 2),
                FuncInfo::bytecode("second", 16, 17, 2, 3),
            ],
            instrs: vec![
                call(1, vec![Reg(0), Imm(2)], Some(1)),
                Instruction::If { cond: 1, false_offset: 2 },
                Instruction::Ret { result: 0 },
                call(2, vec![Reg(0), Imm(1)], Some(2)),
                call(0, vec![Reg(2)], Some(3)),
                call(2, vec![Reg(0), Imm(2)], Some(2)),
                call(0, vec![Reg(2)], Some(4)),
                call(3, vec![Reg(3), Reg(4)], Some(1)),
                Instruction::Ret { result: 1 },
                call(5, vec![Reg(0)], Some(1)),
                Instruction::Ret { result: 1 },
                Instruction::Goto { offset: 0 },
                Instruction::Ret { result: 0 },
                Instruction::Ret { result: 0 },
                Instruction::Ret { result: 0 },
                Instruction::Ret { result: 1 },
                Instruction::Ret { result: 1 },
            ],
            ..Default::default()
        })
        .unwrap(),
    )
}

fn vm() -> VirtualMachine {
    VirtualMachine::new(exe()).unwrap()
}

fn entry(vm: &VirtualMachine, name: &str) -> relaxvm::Entry {
    vm.entry(&vm.get_function(name).unwrap()).unwrap_or_else(|| panic!("{name} has an entry"))
}

#[test]
fn an_entry_call_is_an_invoke() {
    let mut m = vm();
    let fib = entry(&m, "fib");
    for n in 0..15 {
        let want = m.invoke("fib", &[Value::Int(n)]).unwrap().as_int().unwrap();
        assert_eq!(m.call_entry(&fib, &[Value::Int(n)]).unwrap().as_int().unwrap(), want);
    }
    let id = entry(&m, "id");
    let t = Value::tuple(vec![Value::Int(1)]);
    assert!(m.call_entry(&id, std::slice::from_ref(&t)).unwrap().same_object(&t));
}

/// A call that returns at once gives the register it names (an argument, or null past them)
/// and leaves the registers where they were (each argument's reference dropped), plain or
/// instrumented, as invoke does.
#[test]
fn a_leaf_call_returns_its_register_and_leaves_no_register_behind() {
    let mut m = vm();
    let (id, blank, second, fib) = (entry(&m, "id"), entry(&m, "blank"), entry(&m, "second"), entry(&m, "fib"));
    let t = Value::tuple(vec![Value::Int(1)]);
    let Value::Tuple(ref arc) = t else { panic!("a tuple") };
    let before = Arc::strong_count(arc);
    for instrumented in [false, true] {
        if instrumented {
            m.set_instrument(Some(Box::new(|_| Ok(InstrumentAction::Continue))));
        }
        assert!(matches!(m.call_entry(&blank, std::slice::from_ref(&t)).unwrap(), Value::Null));
        assert!(matches!(m.invoke("blank", std::slice::from_ref(&t)).unwrap(), Value::Null));
        let got = m.call_entry(&second, &[Value::Int(5), t.clone()]).unwrap();
        assert!(got.same_object(&t), "the second argument comes back");
        drop(got);
        let got = m.call_entry_with(&id, 1, |_| Some(t.clone())).unwrap().unwrap();
        assert!(got.same_object(&t));
        drop(got);
        assert_eq!(Arc::strong_count(arc), before, "no register keeps an argument");
        // The registers are back where they were: a deeper call after them runs as before.
        assert_eq!(m.call_entry(&fib, &[Value::Int(7)]).unwrap().as_int().unwrap(), 13);
    }
}

#[test]
fn errors_are_those_of_invoke_and_the_vm_recovers() {
    let mut m = vm();
    let fail = entry(&m, "fail");
    let want = format!("{:?}", m.invoke("fail", &[Value::Int(1)]).unwrap_err());
    assert!(want.contains("boom") && want.contains("\"fail\""), "{want}");
    assert_eq!(format!("{:?}", m.call_entry(&fail, &[Value::Int(1)]).unwrap_err()), want);
    // Arity: the same error as invoke's, checked before anything runs.
    let fib = entry(&m, "fib");
    let want = m.invoke("fib", &[]).unwrap_err().to_string();
    let e = m.call_entry(&fib, &[]).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Arity { .. }), "{e}");
    assert_eq!(e.to_string(), want);
    // A call stack that overflows part-way unwinds, and the next call starts clean.
    m.limits_mut().max_call_depth = 5;
    let want = format!("{:?}", m.invoke("fib", &[Value::Int(10)]).unwrap_err());
    assert_eq!(format!("{:?}", m.call_entry(&fib, &[Value::Int(10)]).unwrap_err()), want);
    assert_eq!(m.call_entry(&fib, &[Value::Int(4)]).unwrap().as_int().unwrap(), 3);
}

#[test]
fn limits_that_refuse_the_first_frame_are_reported_as_by_invoke() {
    let mut m = vm();
    let fib = entry(&m, "fib");
    m.limits_mut().max_stack_registers = 3; // fib's frame has 5
    let want = m.invoke("fib", &[Value::Int(3)]).unwrap_err().to_string();
    let e = m.call_entry(&fib, &[Value::Int(3)]).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::Alloc { .. }), "{e}");
    assert_eq!(e.to_string(), want);
    m.limits_mut().max_stack_registers = 1 << 20;
    m.limits_mut().max_call_depth = 0;
    let e = m.call_entry(&fib, &[Value::Int(3)]).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::StackOverflow(0)), "{e}");
    m.limits_mut().max_call_depth = 1000;
    m.limits_mut().max_reentry = 0;
    let e = m.call_entry(&fib, &[Value::Int(3)]).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::StackOverflow(0)), "{e}");
    m.limits_mut().max_reentry = 10;
    assert_eq!(m.call_entry(&fib, &[Value::Int(6)]).unwrap().as_int().unwrap(), 8);
}

#[test]
fn each_call_has_the_whole_step_budget_and_an_instrument_sees_it() {
    let mut m = vm();
    let spin = entry(&m, "spin");
    m.limits_mut().step_budget = Some(1000);
    for _ in 0..2 {
        let e = m.call_entry(&spin, &[]).unwrap_err();
        assert!(matches!(e.root().kind(), ErrorKind::StepBudget(1000)), "{e}");
    }
    // An interrupt raised between calls is dropped at the next call's start, as by invoke.
    m.interrupt_handle().interrupt();
    let fib = entry(&m, "fib");
    assert_eq!(m.call_entry(&fib, &[Value::Int(5)]).unwrap().as_int().unwrap(), 5);
    let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = seen.clone();
    m.set_instrument(Some(Box::new(move |c| {
        if c.before {
            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(InstrumentAction::Continue)
    })));
    assert_eq!(m.call_entry(&fib, &[Value::Int(5)]).unwrap().as_int().unwrap(), 5);
    assert!(seen.load(std::sync::atomic::Ordering::Relaxed) > 0, "the instrumented loop ran");
}

#[test]
fn arguments_made_in_place_and_a_declined_call_leaves_the_vm_as_it_was() {
    let mut m = vm();
    let (fib, first, fail) = (entry(&m, "fib"), entry(&m, "first"), entry(&m, "fail"));
    // The arguments are asked for in order, once each.
    let mut asked = vec![];
    let r = m.call_entry_with(&first, 2, |i| {
        asked.push(i);
        Some(Value::Int(7 + i as i64))
    });
    assert_eq!((r.unwrap().unwrap().as_int().unwrap(), asked), (7, vec![0, 1]));
    // The maker declines the second: nothing ran, and the first value made is dropped.
    let f = m.get_function("id").unwrap();
    let Value::Func(ref arc) = f else { panic!("a function") };
    let before = Arc::strong_count(arc);
    assert!(m.call_entry_with(&first, 2, |i| (i == 0).then(|| f.clone())).unwrap().is_none());
    assert_eq!(Arc::strong_count(arc), before, "the value made was dropped");
    assert_eq!(m.call_entry_with(&fib, 1, |_| Some(Value::Int(10))).unwrap().unwrap().as_int().unwrap(), 55);
    // Arity and another VM's entry are errors before anything is asked for.
    let e = m.call_entry_with(&first, 1, |_| unreachable!("not asked")).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Arity { .. }), "{e}");
    let other = vm();
    let e = m.call_entry_with(&entry(&other, "fib"), 1, |_| unreachable!("not asked")).unwrap_err();
    assert!(e.to_string().contains("another VirtualMachine"), "{e}");
    // A call a limit refuses is declined, unasked (`call_entry` then reports it as invoke does).
    m.limits_mut().max_call_depth = 0;
    assert!(m.call_entry_with(&fib, 1, |_| unreachable!("not asked")).unwrap().is_none());
    m.limits_mut().max_call_depth = 1000;
    // An error while running unwinds as `call_entry`'s does.
    let want = format!("{:?}", m.invoke("fail", &[Value::Int(1)]).unwrap_err());
    assert_eq!(format!("{:?}", m.call_entry_with(&fail, 1, |_| Some(Value::Int(1))).unwrap_err()), want);
    assert_eq!(m.call_entry_with(&fib, 1, |_| Some(Value::Int(6))).unwrap().unwrap().as_int().unwrap(), 8);
}

#[test]
fn a_maker_that_panics_part_way_drops_what_it_made_once_and_leaves_the_vm_usable() {
    // Review R-entry-1: the values made before the panic were written past the register
    // stack's length; unwinding must drop each exactly once (a double drop would free the
    // function twice, a missed one leak it) and leave nothing above the stack for the next call.
    let mut m = vm();
    let (fib, first) = (entry(&m, "fib"), entry(&m, "first"));
    let f = m.get_function("id").unwrap();
    let Value::Func(ref arc) = f else { panic!("a function") };
    let before = Arc::strong_count(arc);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        m.call_entry_with(&first, 2, |i| if i == 0 { Some(f.clone()) } else { panic!("maker fails") })
    }));
    let payload = r.expect_err("the maker's panic reaches the caller");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"maker fails"));
    assert_eq!(Arc::strong_count(arc), before, "the value made was dropped, once");
    assert_eq!(m.call_entry_with(&fib, 1, |_| Some(Value::Int(10))).unwrap().unwrap().as_int().unwrap(), 55);
    assert_eq!(m.call_entry_with(&first, 2, |i| Some(Value::Int(3 + i as i64))).unwrap().unwrap().as_int().unwrap(), 3);
}

#[test]
fn what_has_no_entry() {
    let m = vm();
    assert!(m.entry(&m.get_function("typed").unwrap()).is_none(), "a signature is checked by invoke");
    assert!(m.entry(&Value::Int(3)).is_none());
    let packed = Value::Func(Arc::new(Closure {
        callable: relaxvm::Callable::Packed(PackedFunc::typed("p", |a: i64| a)),
        captured: vec![],
    }));
    assert!(m.entry(&packed).is_none());
    let Value::Func(ref id) = m.get_function("id").unwrap() else { panic!("a function") };
    let bound = Value::Func(Arc::new(Closure { callable: id.callable.clone(), captured: vec![Value::Int(1)] }));
    assert!(m.entry(&bound).is_none(), "captured values are appended by invoke_closure");
}

#[test]
fn an_entry_of_another_vm_is_refused() {
    let a = vm();
    let mut b = vm();
    let e = b.call_entry(&entry(&a, "fib"), &[Value::Int(3)]).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Value(_)) && e.to_string().contains("another VirtualMachine"), "{e}");
    // Its own entry of the same function works.
    assert_eq!(b.call_entry(&entry(&b, "fib"), &[Value::Int(3)]).unwrap().as_int().unwrap(), 2);
}

#[test]
fn an_entry_measures_the_native_stack_left() {
    let outcome = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(|| {
            // Use up the thread's stack until less than the minimum is left, then call in.
            fn deep(m: &mut VirtualMachine, e: &relaxvm::Entry) -> relaxvm::Result<Value> {
                let pad = [0u8; 1024];
                std::hint::black_box(&pad);
                if stacker::remaining_stack().expect("known") < relaxvm::vm::MIN_NATIVE_STACK - (8 << 10) {
                    m.call_entry(e, &[Value::Int(3)])
                } else {
                    deep(m, e)
                }
            }
            let mut m = vm();
            let fib = entry(&m, "fib");
            deep(&mut m, &fib)
        })
        .unwrap()
        .join()
        .expect("the thread ended by itself");
    let e = outcome.unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::NativeStack { .. }), "{e}");
}

#[test]
fn a_function_value_runs_only_in_vms_of_its_own_executable() {
    let exe = exe();
    let (mut a, b) = (VirtualMachine::new(exe.clone()).unwrap(), VirtualMachine::new(exe).unwrap());
    // Another VM of the same executable runs B's value (by index).
    let id = b.get_function("id").unwrap();
    assert_eq!(a.invoke_closure(&id, &[Value::Int(4)]).unwrap().as_int().unwrap(), 4);
    // A VM of another executable, with a function of the same name, refuses it.
    let e = vm().invoke_closure(&id, &[Value::Int(4)]).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::Value(_)), "{e:?}");
    assert!(
        e.to_string().contains("function \"id\" is a closure of another executable: call it with the VM that made it"),
        "{e}"
    );
}

/// The stack's limit an entry finds once per thread (`CallingThread`) is the limit of the
/// thread that calls: a VM called on one thread, then moved to a thread with a small stack,
/// measures the small one; and on that thread, the limit kept from a shallow call still
/// refuses a deep one.
/// Recurses until less than the VM's native-stack margin is left, then calls `e`: the call
/// the stack check must refuse.
fn deep(m: &mut VirtualMachine, e: &relaxvm::Entry) -> relaxvm::Result<Option<Value>> {
    let pad = [0u8; 1024];
    std::hint::black_box(&pad);
    if stacker::remaining_stack().expect("known") < relaxvm::vm::MIN_NATIVE_STACK - (8 << 10) {
        m.call_entry_on(relaxvm::CallingThread::current(), e, 1, |_| Some(Value::Int(3)))
    } else {
        deep(m, e)
    }
}

#[test]
fn an_entry_measures_the_stack_of_the_thread_that_calls() {
    let mut m = vm();
    let fib = entry(&m, "fib");
    let here = relaxvm::CallingThread::current();
    assert_eq!(here.key(), relaxvm::pool::thread_key());
    assert_eq!(m.call_entry_on(here, &fib, 1, |_| Some(Value::Int(6))).unwrap().unwrap().as_int().unwrap(), 8);
    let here_key = here.key();
    let fib_there = fib.clone();
    let (m, shallow, deep_outcome) = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || {
            // Shallow first: this thread's limit is found and kept.
            let there = relaxvm::CallingThread::current();
            assert_ne!(there.key(), here_key);
            let shallow = m.call_entry_on(there, &fib_there, 1, |_| Some(Value::Int(6))).unwrap().unwrap();
            let deep_outcome = deep(&mut m, &fib_there);
            (m, shallow, deep_outcome)
        })
        .unwrap()
        .join()
        .expect("the thread ended by itself");
    assert_eq!(shallow.as_int().unwrap(), 8);
    let e = deep_outcome.unwrap_err();
    assert!(
        matches!(e.root().kind(), ErrorKind::NativeStack { remaining, .. } if *remaining < relaxvm::vm::MIN_NATIVE_STACK),
        "{e}"
    );
    // Back on this thread, the call runs again (the other thread's limit is not applied here).
    let mut m = m;
    assert_eq!(m.call_entry_with(&fib, 1, |_| Some(Value::Int(7))).unwrap().unwrap().as_int().unwrap(), 13);
}

#[test]
fn an_entry_on_another_stack_of_the_same_thread_is_checked_against_that_stack() {
    // Review R-perfpy-1: code on one thread may run on another stack (a `stacker::grow`
    // segment, a fiber). The limit kept for the thread's own stack must not be applied there:
    // a shallow call in the segment runs (no false error), a deep one is refused (no SIGSEGV).
    let mut m = vm();
    let fib = entry(&m, "fib");
    let here = relaxvm::CallingThread::current();
    assert_eq!(m.call_entry_on(here, &fib, 1, |_| Some(Value::Int(6))).unwrap().unwrap().as_int().unwrap(), 8);
    let (shallow, deep_outcome) = stacker::grow(256 << 10, || {
        let shallow = m.call_entry_on(relaxvm::CallingThread::current(), &fib, 1, |_| Some(Value::Int(6)));
        (shallow, deep(&mut m, &fib))
    });
    assert_eq!(shallow.unwrap().unwrap().as_int().unwrap(), 8, "a shallow call in the segment runs");
    let e = deep_outcome.unwrap_err();
    assert!(
        matches!(e.root().kind(), ErrorKind::NativeStack { remaining, .. } if *remaining < relaxvm::vm::MIN_NATIVE_STACK),
        "{e}"
    );
    // Back on the thread's own stack, calls run as before.
    assert_eq!(m.call_entry_on(here, &fib, 1, |_| Some(Value::Int(7))).unwrap().unwrap().as_int().unwrap(), 13);
}

/// `call_entry_as` is `call_entry` for a caller that named its thread already: the same
/// results, the same errors, and the general entry when the call is not a plain one.
#[test]
fn call_entry_as_is_call_entry_on_a_named_thread() {
    let mut m = vm();
    let (fib, id) = (entry(&m, "fib"), entry(&m, "id"));
    let here = relaxvm::CallingThread::current();
    for n in 0..10 {
        let want = m.call_entry(&fib, &[Value::Int(n)]).unwrap().as_int().unwrap();
        assert_eq!(m.call_entry_as(here, &fib, &[Value::Int(n)]).unwrap().as_int().unwrap(), want);
    }
    let e = m.call_entry_as(here, &id, &[]).unwrap_err();
    assert_eq!(e.to_string(), m.call_entry(&id, &[]).unwrap_err().to_string());
    // A limit that refuses the fast entry sends the call down the general one, which reports it.
    m.limits_mut().max_call_depth = 0;
    let e = m.call_entry_as(here, &fib, &[Value::Int(3)]).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::StackOverflow(0)), "{e}");
}

/// The entry writes a call's arguments into the registers it reserved without checking the
/// room again, relying on every function having no more inputs than registers. Nothing can
/// build an executable that breaks that: `from_parts` (which every executable goes through)
/// refuses it (review R-pycall-3).
#[test]
fn no_executable_has_a_function_with_more_inputs_than_registers() {
    let parts = ExecutableParts {
        funcs: vec![FuncInfo::bytecode("wide", 0, 1, 2, 1)],
        instrs: vec![Instruction::Ret { result: 0 }],
        ..Default::default()
    };
    let e = Executable::from_parts(parts).unwrap_err();
    let v = e.as_invalid().unwrap_or_else(|| panic!("not a verifier error: {e}"));
    assert_eq!(v.kind, relaxvm::verify::VerifyErrorKind::InputsExceedRegisters { inputs: 2, regs: 1 }, "{e}");
}

/// A plain call skips reading the limits once it found them allow it without a step budget;
/// every change of them (`limits_mut`, or the deprecated `config_mut`) is seen by the next call
/// all the same: a budget set later is enforced, one removed is not, and a register, depth or
/// re-entry limit set later refuses the frame as invoke does.
#[test]
fn limits_changed_after_plain_calls_apply_to_the_next_call() {
    let mut m = vm();
    let fib = entry(&m, "fib");
    let run = |m: &mut VirtualMachine, n: i64| m.call_entry(&fib, &[Value::Int(n)]);
    for _ in 0..3 {
        assert_eq!(run(&mut m, 10).unwrap().as_int().unwrap(), 55);
    }
    m.limits_mut().step_budget = Some(20);
    for _ in 0..2 {
        let e = run(&mut m, 10).unwrap_err();
        assert!(matches!(e.root().kind(), ErrorKind::StepBudget(20)), "{e}");
        assert_eq!(run(&mut m, 3).unwrap().as_int().unwrap(), 2, "each call has the whole budget");
    }
    m.limits_mut().step_budget = None;
    // Thousands of steps: the budget's count is gone, not only reset.
    for _ in 0..2 {
        assert_eq!(run(&mut m, 15).unwrap().as_int().unwrap(), 610);
    }
    m.limits_mut().max_stack_registers = 3; // fib's frame has 5
    let e = run(&mut m, 3).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::Alloc { .. }), "{e}");
    m.limits_mut().max_stack_registers = 1 << 20;
    assert_eq!(run(&mut m, 6).unwrap().as_int().unwrap(), 8);
    m.limits_mut().max_call_depth = 0;
    let e = run(&mut m, 3).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::StackOverflow(0)), "{e}");
    m.limits_mut().max_call_depth = 1000;
    assert_eq!(run(&mut m, 6).unwrap().as_int().unwrap(), 8);
    m.limits_mut().max_reentry = 0;
    let e = run(&mut m, 3).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::StackOverflow(0)), "{e}");
    m.limits_mut().max_reentry = 10;
    assert_eq!(run(&mut m, 6).unwrap().as_int().unwrap(), 8);
    #[allow(deprecated)]
    {
        m.config_mut().step_budget = Some(20);
    }
    let e = run(&mut m, 10).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::StepBudget(20)), "{e}");
}

/// A plain call without a step budget still checks every `POLL_INTERVAL` steps: the poll hook
/// (Ctrl-C in Python) runs and its error ends the call, and an interrupt from another thread
/// stops it; an interrupt raised between calls is dropped at the next call's start.
#[test]
fn a_plain_call_without_a_budget_polls_and_can_be_interrupted() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let mut m = vm();
    let (spin, fib) = (entry(&m, "spin"), entry(&m, "fib"));
    for _ in 0..2 {
        assert_eq!(m.call_entry(&fib, &[Value::Int(5)]).unwrap().as_int().unwrap(), 5);
    }
    let polls = Arc::new(AtomicUsize::new(0));
    let seen = polls.clone();
    m.set_poll_hook(Some(Arc::new(move || {
        if seen.fetch_add(1, Ordering::Relaxed) + 1 >= 3 {
            return Err(relaxvm::Error::value("stopped by the poll hook"));
        }
        Ok(())
    })));
    // A finite call of about 21,900 steps (fib(20)'s calls), over 20 poll intervals: were the
    // polls lost, it would return its value and `unwrap_err` fail, not hang (review R-entry-2).
    let e = m.call_entry(&fib, &[Value::Int(20)]).unwrap_err();
    assert!(e.to_string().contains("stopped by the poll hook"), "{e}");
    assert_eq!(polls.load(Ordering::Relaxed), 3);
    m.set_poll_hook(None);
    m.interrupt_handle().interrupt();
    assert_eq!(m.call_entry(&fib, &[Value::Int(5)]).unwrap().as_int().unwrap(), 5, "a stale interrupt is dropped");
    // Interrupts keep coming until the endless call has stopped: one lands while it runs.
    let (handle, done) = (m.interrupt_handle(), Arc::new(AtomicBool::new(false)));
    let stop = done.clone();
    let sender = std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            handle.interrupt();
            std::thread::yield_now();
        }
    });
    let e = m.call_entry(&spin, &[]).unwrap_err();
    done.store(true, Ordering::Relaxed);
    sender.join().unwrap();
    assert!(matches!(e.root().kind(), ErrorKind::Interrupted), "{e}");
}
