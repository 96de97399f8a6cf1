//! The interpreter's specialised forms of `call`: int operations run inline (and fused with the
//! `if` that tests them or the `goto` after them — the loops below end with `add; goto`),
//! one-argument selects, and the step counter that checks budget, interrupts and the poll hook
//! every `POLL_INTERVAL` steps. Each must behave exactly as the plain call it stands for.

use relaxvm::registry::register_global;
use relaxvm::{
    Arg, Error, ErrorKind, Executable, ExecutableParts, FuncInfo, Instruction, IntOp, PackedFunc, Value,
    VirtualMachine, POLL_INTERVAL,
};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Once};

thread_local! {
    /// Counts calls of the int builtins' own function (the slow path the interpreter falls back
    /// to), per thread: each test runs on its own, and the VM calls builtins on the calling thread.
    static SLOW_CALLS: Cell<usize> = const { Cell::new(0) };
}

fn slow_calls() -> usize {
    SLOW_CALLS.with(Cell::get)
}

fn int_fn(op: IntOp) -> fn(&Value, &Value) -> relaxvm::Result<Value> {
    fn slow(op: IntOp, x: &Value, y: &Value) -> relaxvm::Result<Value> {
        SLOW_CALLS.with(|c| c.set(c.get() + 1));
        let int = |v: &Value| match v {
            Value::Int(i) => Ok(*i),
            Value::Bool(b) => Ok(i64::from(*b)),
            other => Err(Error::type_mismatch("int", other.describe())),
        };
        op.apply(int(x)?, int(y)?).ok_or_else(|| Error::arithmetic(format!("{} overflows", op.symbol())))
    }
    match op {
        IntOp::Add => |x, y| slow(IntOp::Add, x, y),
        IntOp::Lt => |x, y| slow(IntOp::Lt, x, y),
        IntOp::Sub => |x, y| slow(IntOp::Sub, x, y),
        IntOp::Gt => |x, y| slow(IntOp::Gt, x, y),
        _ => unreachable!("only these are registered"),
    }
}

fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for (name, op) in [("d.add", IntOp::Add), ("d.lt", IntOp::Lt), ("d.sub", IntOp::Sub), ("d.gt", IntOp::Gt)] {
            register_global(PackedFunc::binary(name, int_fn(op)).with_int_op(op), true).unwrap();
        }
        register_global(
            PackedFunc::select("d.first", |name, a| {
                a.first().map(relaxvm::Selected::Value).ok_or_else(|| Error::arity(name, "1", a.len()))
            }),
            true,
        )
        .unwrap();
        register_global(PackedFunc::select("d.boom", |_, _| panic!("select panicked")), true).unwrap();
        register_global(PackedFunc::from_fn("d.list", |a| Ok(Value::tuple(a.to_vec()))), true).unwrap();
        // An int operation whose builtin answers anything but two ints with a string.
        register_global(PackedFunc::binary("d.odd_lt", |_, _| Ok(Value::str("odd"))).with_int_op(IntOp::Lt), true)
            .unwrap();
        register_global(
            PackedFunc::select("d.last", |name, a| {
                a.last().map(relaxvm::Selected::Value).ok_or_else(|| Error::arity(name, "1+", a.len()))
            }),
            true,
        )
        .unwrap();
        // Calls the function it is given with the rest of its arguments: a re-entry that runs
        // other calls (with their own argument lists) while this one's list is borrowed.
        register_global(PackedFunc::new("d.apply", |ctx, a| ctx.call(&a[0], &a[1..])), true).unwrap();
    });
}

fn call(func: u32, args: Vec<Arg>, dst: Option<u32>) -> Instruction {
    Instruction::Call { func, args, dst }
}

fn vm(funcs: Vec<FuncInfo>, instrs: Vec<Instruction>) -> VirtualMachine {
    setup();
    let exe = Executable::from_parts(ExecutableParts { funcs, instrs, ..Default::default() }).unwrap();
    VirtualMachine::new(Arc::new(exe)).unwrap()
}

/// `sum(n)`: lt / if / add / add / goto, the lt and if fused; returns the sum and, through the
/// condition register, that the fused op wrote it.
fn sum_vm() -> VirtualMachine {
    use Arg::*;
    vm(
        vec![FuncInfo::bytecode("sum", 0, 9, 1, 4), FuncInfo::packed("d.lt"), FuncInfo::packed("d.add")],
        vec![
            call(2, vec![Imm(0), Imm(0)], Some(1)),
            call(2, vec![Imm(0), Imm(0)], Some(2)),
            call(1, vec![Reg(2), Reg(0)], Some(3)),
            Instruction::If { cond: 3, false_offset: 4 },
            call(2, vec![Reg(1), Reg(2)], Some(1)),
            call(2, vec![Reg(2), Imm(1)], Some(2)),
            Instruction::Goto { offset: -4 },
            call(2, vec![Reg(1), Reg(3)], Some(1)),
            Instruction::Ret { result: 1 },
        ],
    )
}

#[test]
fn int_ops_run_inline_and_fall_back_to_the_builtin() {
    let mut m = sum_vm();
    let before = slow_calls();
    assert_eq!(m.invoke("sum", &[Value::Int(100)]).unwrap().as_int().unwrap(), 4950);
    // The final add reads the condition register (false): int + bool is the builtin's case.
    assert_eq!(slow_calls() - before, 1, "only int + bool leaves the inline path");
    // A bool bound: every comparison is the builtin's (bool < int), with the same answer.
    assert_eq!(m.invoke("sum", &[Value::Bool(true)]).unwrap().as_int().unwrap(), 0);
    let e = m.invoke("sum", &[Value::Float(1.0)]).unwrap_err();
    let ErrorKind::At { func, pc, source, .. } = e.kind() else { panic!("located: {e}") };
    assert_eq!((func.as_str(), *pc), ("sum", 2));
    assert!(matches!(source.kind(), ErrorKind::Type { .. }), "{e}");
}

/// The loop of `sum_vm` counting down: its test (`gt`) and step (`sub`) are fused ops of
/// operations without ops of their own (the sum's `lt` and `add` have them), which run the same.
#[test]
fn fused_ops_of_every_operation_run_alike() {
    use Arg::*;
    let mut m = vm(
        vec![
            FuncInfo::bytecode("down", 0, 7, 1, 3),
            FuncInfo::packed("d.gt"),
            FuncInfo::packed("d.add"),
            FuncInfo::packed("d.sub"),
        ],
        vec![
            call(2, vec![Imm(0), Imm(0)], Some(1)),
            call(1, vec![Reg(0), Imm(0)], Some(2)),
            Instruction::If { cond: 2, false_offset: 4 },
            call(2, vec![Reg(1), Reg(0)], Some(1)),
            call(3, vec![Reg(0), Imm(1)], Some(0)),
            Instruction::Goto { offset: -4 },
            Instruction::Ret { result: 1 },
        ],
    );
    let before = slow_calls();
    assert_eq!(m.invoke("down", &[Value::Int(100)]).unwrap().as_int().unwrap(), 5050);
    assert_eq!(slow_calls() - before, 0, "all inline");
    // Bools go to the builtins, which agree.
    assert_eq!(m.invoke("down", &[Value::Bool(true)]).unwrap().as_int().unwrap(), 1);
    // The second add overflows: the builtin's error, at the add.
    let e = m.invoke("down", &[Value::Int(i64::MAX)]).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::At { pc: 3, .. }) && e.to_string().contains("+ overflows"), "{e}");
}

/// The ops of their own for `add` and `lt` read registers only: the same operations with a
/// constant operand take the general fused forms, inline all the same, and fail the same.
#[test]
fn int_ops_with_constant_operands_run_alike() {
    use Arg::*;
    let mut m = vm(
        vec![FuncInfo::bytecode("thrice", 0, 7, 1, 3), FuncInfo::packed("d.lt"), FuncInfo::packed("d.add")],
        vec![
            call(2, vec![Imm(0), Imm(0)], Some(1)),
            call(1, vec![Imm(0), Reg(0)], Some(2)),
            Instruction::If { cond: 2, false_offset: 4 },
            call(2, vec![Imm(3), Reg(1)], Some(1)),
            call(2, vec![Imm(-1), Reg(0)], Some(0)),
            Instruction::Goto { offset: -4 },
            Instruction::Ret { result: 1 },
        ],
    );
    let before = slow_calls();
    assert_eq!(m.invoke("thrice", &[Value::Int(100)]).unwrap().as_int().unwrap(), 300);
    assert_eq!(slow_calls() - before, 0, "all inline");
    // A bool bound: the test and the step on it are the builtins' (bool < int, int + bool).
    let before = slow_calls();
    assert_eq!(m.invoke("thrice", &[Value::Bool(true)]).unwrap().as_int().unwrap(), 3);
    assert_eq!(slow_calls() - before, 2);
    let e = m.invoke("thrice", &[Value::Float(2.0)]).unwrap_err();
    let ErrorKind::At { pc, source, .. } = e.kind() else { panic!("located: {e}") };
    assert_eq!(*pc, 1);
    assert!(matches!(source.kind(), ErrorKind::Type { .. }), "{e}");
}

/// `x + 1` then a `goto`: the int held in the op, inline for an int, the builtin's for
/// anything else (a bool, an overflow), and the arguments an instrument sees.
#[test]
fn a_step_by_an_immediate_runs_as_the_call_it_stands_for() {
    use Arg::*;
    let mut m = vm(
        vec![FuncInfo::bytecode("inc", 0, 3, 1, 1), FuncInfo::packed("d.add")],
        vec![call(1, vec![Reg(0), Imm(1)], Some(0)), Instruction::Goto { offset: 1 }, Instruction::Ret { result: 0 }],
    );
    let before = slow_calls();
    assert_eq!(m.invoke("inc", &[Value::Int(41)]).unwrap().as_int().unwrap(), 42);
    assert_eq!(slow_calls(), before, "inline");
    assert_eq!(m.invoke("inc", &[Value::Bool(true)]).unwrap().as_int().unwrap(), 2);
    assert_eq!(slow_calls(), before + 1, "a bool is the builtin's");
    let e = m.invoke("inc", &[Value::Int(i64::MAX)]).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::At { pc: 0, .. }) && e.to_string().contains("+ overflows"), "{e}");
    let e = m.invoke("inc", &[Value::str("x")]).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::At { pc: 0, .. }), "{e}");
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    m.set_instrument(Some(Box::new(move |c| {
        if c.before {
            log.lock().unwrap().push(c.args.iter().map(|v| format!("{v:?}")).collect::<Vec<_>>());
        }
        Ok(relaxvm::InstrumentAction::Continue)
    })));
    assert_eq!(m.invoke("inc", &[Value::Int(7)]).unwrap().as_int().unwrap(), 8);
    assert_eq!(*seen.lock().unwrap(), vec![vec![format!("{:?}", Value::Int(7)), format!("{:?}", Value::Int(1))]]);
}

/// `count(x)`: `while x < limit { x = x + step }; return x`, the step a call into the loop's
/// own register before a backward `goto`.
fn step_loop_vm(step: i64, limit: i64) -> VirtualMachine {
    use Arg::*;
    vm(
        vec![FuncInfo::bytecode("count", 0, 5, 1, 2), FuncInfo::packed("d.lt"), FuncInfo::packed("d.add")],
        vec![
            call(1, vec![Reg(0), Imm(limit)], Some(1)),
            Instruction::If { cond: 1, false_offset: 3 },
            call(2, vec![Reg(0), Imm(step)], Some(0)),
            Instruction::Goto { offset: -3 },
            Instruction::Ret { result: 0 },
        ],
    )
}

/// The loop step `x += imm` (an op of its own when the immediate fits 32 bits and the result
/// goes back into `x`, which it updates in place) computes what the call computes, falls back
/// to the builtin for anything but an int, reports overflow at its instruction, and shows the
/// instrument the call's operands; a step wider than 32 bits runs as the general op, alike.
#[test]
fn a_loop_step_in_place_runs_as_the_call_it_stands_for() {
    let before = slow_calls();
    let mut m = step_loop_vm(7, 20);
    assert_eq!(m.invoke("count", &[Value::Int(0)]).unwrap().as_int().unwrap(), 21);
    assert_eq!(slow_calls(), before, "inline");
    // A bool is the builtins' (the test's and the step's): true + 7 = 8, then 15, 22.
    assert_eq!(m.invoke("count", &[Value::Bool(true)]).unwrap().as_int().unwrap(), 22);
    assert_eq!(slow_calls(), before + 2);
    let mut near_max = step_loop_vm(7, i64::MAX);
    let e = near_max.invoke("count", &[Value::Int(i64::MAX - 3)]).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::At { pc: 2, .. }) && e.to_string().contains("+ overflows"), "{e}");
    let mut wide = step_loop_vm(1 << 40, 3 << 40);
    assert_eq!(wide.invoke("count", &[Value::Int(1)]).unwrap().as_int().unwrap(), (3 << 40) + 1);
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    m.set_instrument(Some(Box::new(move |c| {
        if c.before && c.args.len() == 2 {
            log.lock().unwrap().push((c.args[0].as_int().unwrap(), c.args[1].as_int().unwrap()));
        }
        Ok(relaxvm::InstrumentAction::Continue)
    })));
    assert_eq!(m.invoke("count", &[Value::Int(10)]).unwrap().as_int().unwrap(), 24);
    // lt(10, 20), add(10, 7), lt(17, 20), add(17, 7), lt(24, 20).
    assert_eq!(*seen.lock().unwrap(), [(10, 20), (10, 7), (17, 20), (17, 7), (24, 20)]);
}

/// `add` on registers into a register holding a tuple, into its second operand and into its
/// first (the accumulator `x = x + y`, whose payload alone is written), and `lt` then `if` into
/// a register holding a tuple, on both sides of the branch: each writes what the call returns,
/// drops the tuple it replaces once, and runs the same with an instrument (as its plain call).
#[test]
fn int_ops_write_their_destination_whatever_it_held() {
    use Arg::*;
    let mut m = vm(
        vec![
            FuncInfo::bytecode("mix", 0, 5, 3, 4),
            FuncInfo::bytecode("pick", 5, 11, 3, 4),
            FuncInfo::packed("d.add"),
            FuncInfo::packed("d.lt"),
            FuncInfo::packed("d.list"),
        ],
        vec![
            // mix(x, y, t) = (2x + y, x + y, x + y)
            call(2, vec![Reg(0), Reg(1)], Some(2)),
            call(2, vec![Reg(0), Reg(1)], Some(1)),
            call(2, vec![Reg(0), Reg(1)], Some(0)),
            call(4, vec![Reg(0), Reg(1), Reg(2)], Some(3)),
            Instruction::Ret { result: 3 },
            // pick(x, y, t) = (x < y, x) if x < y else (x < y, y)
            call(3, vec![Reg(0), Reg(1)], Some(2)),
            Instruction::If { cond: 2, false_offset: 3 },
            call(4, vec![Reg(2), Reg(0)], Some(3)),
            Instruction::Ret { result: 3 },
            call(4, vec![Reg(2), Reg(1)], Some(3)),
            Instruction::Ret { result: 3 },
        ],
    );
    let t = Value::tuple(vec![Value::Int(1)]);
    let Value::Tuple(ref arc) = t else { panic!("a tuple") };
    // The elements of a tuple of ints and bools, as text (none holds an address).
    let text = |v: Value| match v {
        Value::Tuple(ref items) => items.iter().map(|x| format!("{x:?}")).collect::<Vec<_>>(),
        other => panic!("a tuple: {other:?}"),
    };
    for instrumented in [false, true] {
        if instrumented {
            m.set_instrument(Some(Box::new(|_| Ok(relaxvm::InstrumentAction::Continue))));
        }
        let before = slow_calls();
        let mix = m.invoke("mix", &[Value::Int(3), Value::Int(4), t.clone()]).unwrap();
        assert_eq!(text(mix), text(Value::tuple(vec![Value::Int(10), Value::Int(7), Value::Int(7)])));
        for (x, y, taken) in [(1, 2, true), (2, 1, false), (2, 2, false), (-5, 3, true)] {
            let got = m.invoke("pick", &[Value::Int(x), Value::Int(y), t.clone()]).unwrap();
            let want = Value::tuple(vec![Value::Bool(taken), Value::Int(if taken { x } else { y })]);
            assert_eq!(text(got), text(want), "pick({x}, {y})");
        }
        assert_eq!(slow_calls(), before, "all inline");
        assert_eq!(Arc::strong_count(arc), 1, "each tuple replaced was dropped once");
    }
    // Overflow into the second operand and into the first: the builtin's error, at the add.
    let e = m.invoke("mix", &[Value::Int(i64::MAX), Value::Int(1), Value::Null]).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::At { pc: 0, .. }) && e.to_string().contains("+ overflows"), "{e}");
    let e = m.invoke("mix", &[Value::Int(i64::MAX / 2 + 1), Value::Int(0), Value::Null]).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::At { pc: 2, .. }) && e.to_string().contains("+ overflows"), "{e}");
}

/// A fused int test whose builtin returns something an `if` cannot test: the error is the
/// `if`'s, at its own instruction, after the result was written.
#[test]
fn a_fused_test_of_an_untestable_result_fails_at_the_if() {
    use Arg::*;
    let mut m = vm(
        vec![FuncInfo::bytecode("f", 0, 4, 1, 2), FuncInfo::packed("d.odd_lt")],
        vec![
            call(1, vec![Reg(0), Imm(1)], Some(1)),
            Instruction::If { cond: 1, false_offset: 2 },
            Instruction::Ret { result: 1 },
            Instruction::Ret { result: 0 },
        ],
    );
    assert!(matches!(m.invoke("f", &[Value::Int(0)]).unwrap(), Value::Bool(true)));
    let e = m.invoke("f", &[Value::str("x")]).unwrap_err();
    let ErrorKind::At { pc, instr, source, .. } = e.kind() else { panic!("located: {e}") };
    assert_eq!(*pc, 1, "{e}");
    assert!(instr.starts_with("if"), "{e}");
    assert!(source.to_string().contains("int, bool or one-element tensor"), "{e}");
}

#[test]
fn overflow_is_the_builtins_error_at_its_instruction() {
    use Arg::*;
    let mut m = vm(
        vec![FuncInfo::bytecode("f", 0, 2, 1, 2), FuncInfo::packed("d.add")],
        vec![call(1, vec![Reg(0), Imm(1)], Some(1)), Instruction::Ret { result: 1 }],
    );
    assert_eq!(m.invoke("f", &[Value::Int(41)]).unwrap().as_int().unwrap(), 42);
    let e = m.invoke("f", &[Value::Int(i64::MAX)]).unwrap_err();
    assert!(e.to_string().contains("+ overflows"), "{e}");
    assert!(matches!(e.kind(), ErrorKind::At { pc: 0, .. }), "{e}");
}

#[test]
fn a_jump_onto_a_fused_if_runs_the_if_alone() {
    use Arg::*;
    // r1 = 0 < n; (fused) if r1 else -> ret 7 ... a goto lands on the `if` directly with r1 = 0.
    let mut m = vm(
        vec![FuncInfo::bytecode("f", 0, 7, 1, 3), FuncInfo::packed("d.lt"), FuncInfo::packed("d.add")],
        vec![
            call(1, vec![Imm(0), Reg(0)], Some(1)),
            Instruction::If { cond: 1, false_offset: 3 },
            call(1, vec![Imm(1), Imm(0)], Some(1)),
            Instruction::Goto { offset: -2 },
            call(2, vec![Imm(7), Imm(0)], Some(2)),
            Instruction::Ret { result: 2 },
            Instruction::Ret { result: 0 },
        ],
    );
    // n = 5: true, then r1 = (1 < 0) = false, jump to the if: false -> ret 7.
    assert_eq!(m.invoke("f", &[Value::Int(5)]).unwrap().as_int().unwrap(), 7);
    // n = 0: false at once.
    assert_eq!(m.invoke("f", &[Value::Int(0)]).unwrap().as_int().unwrap(), 7);
}

#[test]
fn one_argument_selects_pass_their_operand_in_place() {
    use Arg::*;
    let mut m = vm(
        vec![FuncInfo::bytecode("f", 0, 4, 1, 3), FuncInfo::packed("d.first"), FuncInfo::packed("d.boom")],
        vec![
            call(1, vec![Reg(0)], Some(1)),
            call(1, vec![Imm(3)], None),
            call(1, vec![Reg(1)], Some(1)),
            Instruction::Ret { result: 1 },
        ],
    );
    let t = Value::tuple(vec![Value::Int(1)]);
    let out = m.invoke("f", std::slice::from_ref(&t)).unwrap();
    assert!(out.same_object(&t));
    let mut p = vm(
        vec![FuncInfo::bytecode("g", 0, 2, 1, 2), FuncInfo::packed("d.boom")],
        vec![call(1, vec![Reg(0)], Some(1)), Instruction::Ret { result: 1 }],
    );
    let e = p.invoke("g", &[Value::Int(1)]).unwrap_err();
    assert!(e.to_string().contains("d.boom: select panicked"), "{e}");
    assert!(matches!(e.kind(), ErrorKind::At { pc: 0, .. }), "{e}");
    // A constant operand with a destination takes the general select (an argument list).
    let mut c = vm(
        vec![FuncInfo::bytecode("k", 0, 3, 1, 2), FuncInfo::packed("d.first")],
        vec![call(1, vec![Imm(3)], Some(1)), call(1, vec![Reg(1)], Some(0)), Instruction::Ret { result: 0 }],
    );
    assert_eq!(c.invoke("k", &[Value::Null]).unwrap().as_int().unwrap(), 3);
}

/// Argument lists are prepared at load (values fixed at load in place, registers patched at
/// each call): every mix of operand kinds arrives in order, for packed and selecting calls,
/// also when a call re-enters the VM and other calls build lists meanwhile.
#[test]
fn prepared_argument_lists_hold_every_operand_in_order() {
    use Arg::*;
    let exe = Executable::from_parts(ExecutableParts {
        funcs: vec![
            FuncInfo::bytecode("f", 0, 6, 2, 6),
            FuncInfo::packed("d.list"),
            FuncInfo::packed("d.last"),
            FuncInfo::packed("d.apply"),
            FuncInfo::bytecode("g", 6, 8, 2, 3),
        ],
        instrs: vec![
            call(1, vec![Imm(7), Reg(1), Const(0), Reg(0), Func(2), Imm(-1), Void], Some(2)),
            call(2, vec![Reg(0), Imm(5), Reg(1)], Some(3)),
            call(2, vec![Reg(1), Const(0)], Some(4)),
            call(3, vec![Func(4), Reg(1), Imm(9)], Some(5)),
            call(1, vec![Reg(2), Reg(3), Reg(4), Reg(5)], Some(2)),
            Instruction::Ret { result: 2 },
            call(1, vec![Imm(1), Reg(1), Reg(0), Const(0)], Some(2)),
            Instruction::Ret { result: 2 },
        ],
        constants: vec![Value::str("k")],
        ..Default::default()
    })
    .unwrap();
    setup();
    let mut m = VirtualMachine::new(Arc::new(exe)).unwrap();
    for round in 0..3 {
        let (a, b) = (Value::Int(100 + round), Value::str("b"));
        let out = m.invoke("f", &[a.clone(), b.clone()]).unwrap();
        let show = |v: &Value| format!("{v:?}");
        let all = out.as_tuple().unwrap();
        let first = all[0].as_tuple().unwrap();
        assert_eq!(first.len(), 7);
        assert_eq!(
            [&first[0], &first[1], &first[2], &first[3], &first[5], &first[6]].map(show),
            [&Value::Int(7), &b, &Value::str("k"), &a, &Value::Int(-1), &Value::Null].map(show)
        );
        assert!(matches!(&first[4], Value::Func(_)));
        assert_eq!(show(&all[1]), show(&b), "select of the last of (reg, imm, reg)");
        assert_eq!(show(&all[2]), show(&Value::str("k")), "select of the last of (reg, const)");
        let inner = all[3].as_tuple().unwrap();
        assert_eq!(
            inner.iter().map(show).collect::<Vec<_>>(),
            [Value::Int(1), Value::Int(9), b.clone(), Value::str("k")].iter().map(show).collect::<Vec<_>>()
        );
    }
}

/// Argument lists longer than the interpreter keeps on its stack, and a call back into the VM
/// that grows the register stack far enough to move it while the calling frame waits: the
/// caller's registers, its result register and its later lists are unchanged. (A frame that
/// kept reading the registers where they were before the move reads freed memory, which the
/// AddressSanitizer run of these tests reports.)
#[test]
fn long_lists_and_reentries_that_move_the_register_stack() {
    use Arg::*;
    let long: Vec<Arg> = (0..20).map(|i| if i % 3 == 0 { Reg(i % 2) } else { Imm(i64::from(i)) }).collect();
    let exe = Executable::from_parts(ExecutableParts {
        funcs: vec![
            FuncInfo::bytecode("f", 0, 5, 2, 5),
            FuncInfo::packed("d.list"),
            FuncInfo::packed("d.apply"),
            FuncInfo::bytecode("big", 5, 7, 1, 5000),
        ],
        instrs: vec![
            call(1, long.clone(), Some(2)),
            call(2, vec![Func(3), Reg(0)], Some(3)),
            call(1, vec![Reg(0), Reg(1), Reg(2), Reg(3)], Some(4)),
            call(1, long, Some(2)),
            Instruction::Ret { result: 4 },
            call(1, vec![Reg(0), Imm(1)], Some(4999)),
            Instruction::Ret { result: 4999 },
        ],
        ..Default::default()
    })
    .unwrap();
    setup();
    let mut m = VirtualMachine::new(Arc::new(exe)).unwrap();
    let show = |v: &Value| format!("{v:?}");
    for round in 0..3 {
        let (a, b) = (Value::str(&format!("a{round}")), Value::Int(round));
        let out = m.invoke("f", &[a.clone(), b.clone()]).unwrap();
        let out = out.as_tuple().unwrap();
        assert_eq!((show(&out[0]), show(&out[1])), (show(&a), show(&b)));
        let list = out[2].as_tuple().unwrap();
        let expected: Vec<String> = (0..20i64)
            .map(|i| match (i % 3, i % 2) {
                (0, 0) => show(&a),
                (0, _) => show(&b),
                _ => show(&Value::Int(i)),
            })
            .collect();
        assert_eq!(list.iter().map(show).collect::<Vec<_>>(), expected);
        let inner = out[3].as_tuple().unwrap();
        assert_eq!((show(&inner[0]), show(&inner[1])), (show(&a), show(&Value::Int(1))));
    }
}

#[test]
fn the_step_budget_is_exact_across_check_intervals() {
    let interval = u64::from(POLL_INTERVAL);
    let mut m = counted_spin_vm();
    for budget in [1, 2, 5, interval - 1, interval, interval + 1, 3 * interval + 7] {
        m.limits_mut().step_budget = Some(budget);
        let n = budget as i64;
        assert_eq!(m.invoke("spin", &[Value::Int(n)]).unwrap().as_int().unwrap(), n, "budget {budget}");
        let e = m.invoke("spin", &[Value::Int(n + 1)]).unwrap_err();
        assert!(e.to_string().contains(&format!("step budget of {budget}")), "budget {budget}: {e}");
    }
}

/// `spin(n)` with its counter starting at 0: exactly n backward jumps.
fn counted_spin_vm() -> VirtualMachine {
    use Arg::*;
    vm(
        vec![FuncInfo::bytecode("spin", 0, 6, 1, 3), FuncInfo::packed("d.lt"), FuncInfo::packed("d.add")],
        vec![
            call(2, vec![Imm(0), Imm(0)], Some(1)),
            call(1, vec![Reg(1), Reg(0)], Some(2)),
            Instruction::If { cond: 2, false_offset: 3 },
            call(2, vec![Reg(1), Imm(1)], Some(1)),
            Instruction::Goto { offset: -3 },
            Instruction::Ret { result: 1 },
        ],
    )
}

#[test]
fn the_poll_hook_runs_every_interval_and_interrupts_stop_the_run() {
    let mut m = counted_spin_vm();
    let polls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&polls);
    m.set_poll_hook(Some(Arc::new(move || {
        seen.fetch_add(1, Ordering::Relaxed);
        Ok(())
    })));
    let n = 10 * POLL_INTERVAL as i64;
    assert_eq!(m.invoke("spin", &[Value::Int(n)]).unwrap().as_int().unwrap(), n);
    assert_eq!(polls.load(Ordering::Relaxed), 10);
    // A hook that interrupts: the run stops at the next check, at most an interval later.
    let h = m.interrupt_handle();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&calls);
    m.set_poll_hook(Some(Arc::new(move || {
        c.fetch_add(1, Ordering::Relaxed);
        h.interrupt();
        Ok(())
    })));
    let e = m.invoke("spin", &[Value::Int(n)]).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::At { source, .. } if matches!(source.kind(), ErrorKind::Interrupted)), "{e}");
    assert_eq!(calls.load(Ordering::Relaxed), 1, "stopped at the check after the one that interrupted");
}
