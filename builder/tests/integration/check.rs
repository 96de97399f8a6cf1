//! The check through the builder: each error kind, warnings, and errors naming function and
//! instruction.

use crate::common::func;
use relaxvm::{Arg::*, FuncKind, Value};
use relaxvm_builder::{BuildError, CheckError, CheckErrorKind, ExecBuilder};

fn check_err(e: BuildError) -> CheckError {
    match e {
        BuildError::Check(c) => c,
        other => panic!("expected a check error, got {other}"),
    }
}

#[test]
fn reading_an_unexpected_register_as_input() {
    // TVM's example: r(3) used as an input while num_inputs is 2.
    let mut ib = ExecBuilder::new();
    let e = func(&mut ib, "main", 2, |ib| {
        ib.emit_call("vm.op.add", &[Reg(0), Reg(3)], Some(4))?;
        ib.emit_ret(4)
    })
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "function \"main\", instruction 0 (call  vm.op.add  in: %0, %3  dst: %4): reads %3, which is neither an input (the function has 2 inputs) nor written by any instruction"
    );
    // the error is sticky: get() reports it again
    assert_eq!(ib.get().unwrap_err().to_string(), e.to_string());
}

#[test]
fn reading_a_register_written_on_one_path_only() {
    let mut ib = ExecBuilder::new();
    let e = func(&mut ib, "main", 1, |ib| {
        ib.emit_if(0, 3)?;
        ib.emit_call("f", &[], Some(5))?;
        ib.emit_goto(1)?;
        ib.emit_ret(5)
    })
    .unwrap_err();
    let c = check_err(e);
    assert_eq!((c.func.as_str(), c.pc), ("main", Some(3)));
    assert_eq!(c.kind, CheckErrorKind::MaybeUnassigned { reg: 5 });
    assert_eq!(c.instr.as_deref(), Some("ret  %5"));
}

#[test]
fn jumps_outside_and_running_off_the_end() {
    let mut ib = ExecBuilder::new();
    let c = check_err(
        func(&mut ib, "a", 1, |ib| {
            ib.emit_goto(5)?;
            ib.emit_ret(0)
        })
        .unwrap_err(),
    );
    assert_eq!(c.kind, CheckErrorKind::JumpOutside { offset: 5, target: 5, len: 2 });
    let c = check_err(func(&mut ib, "b", 1, |ib| ib.emit_if(0, -1)).unwrap_err());
    assert_eq!(c.kind, CheckErrorKind::RunsOffEnd);
    let c = check_err(func(&mut ib, "c", 1, |ib| ib.emit_call("f", &[Reg(0)], Some(1))).unwrap_err());
    assert_eq!((c.pc, &c.kind), (Some(0), &CheckErrorKind::RunsOffEnd));
    let c = check_err(func(&mut ib, "d", 1, |_| Ok(())).unwrap_err());
    assert_eq!((c.pc, &c.kind), (None, &CheckErrorKind::Empty));
}

#[test]
fn constant_and_function_indices() {
    let mut ib = ExecBuilder::new();
    ib.convert_constant(Value::Int(1)).unwrap();
    let c = check_err(
        func(&mut ib, "a", 0, |ib| {
            ib.emit_call("f", &[Const(1)], Some(0))?;
            ib.emit_ret(0)
        })
        .unwrap_err(),
    );
    assert_eq!(c.kind, CheckErrorKind::ConstOutOfRange { index: 1, len: 1 });
    let c = check_err(
        func(&mut ib, "b", 0, |ib| {
            ib.emit_call("f", &[Func(99)], Some(0))?;
            ib.emit_ret(0)
        })
        .unwrap_err(),
    );
    assert_eq!(c.kind, CheckErrorKind::FuncOutOfRange { index: 99, len: 3 });
    assert_eq!(c.instr.as_deref(), Some("call  f  in: f[#99]  dst: %0"));
}

#[test]
fn bytecode_calls_with_the_wrong_arity() {
    // callee defined first: caught when the caller closes
    let mut ib = ExecBuilder::new();
    func(&mut ib, "callee", 2, |ib| ib.emit_ret(1)).unwrap();
    let c = check_err(
        func(&mut ib, "main", 1, |ib| {
            ib.emit_call("callee", &[Reg(0)], Some(1))?;
            ib.emit_ret(1)
        })
        .unwrap_err(),
    );
    assert_eq!(c.kind, CheckErrorKind::Arity { callee: "callee".into(), expected: 2, got: 1 });

    // callee defined later: caught at get()
    let mut ib = ExecBuilder::new();
    func(&mut ib, "main", 1, |ib| {
        ib.emit_call("later", &[Reg(0)], Some(1))?;
        ib.emit_ret(1)
    })
    .unwrap();
    func(&mut ib, "later", 0, |ib| {
        ib.emit_call("k", &[], Some(0))?;
        ib.emit_ret(0)
    })
    .unwrap();
    let c = check_err(ib.get().unwrap_err());
    assert_eq!((c.func.as_str(), c.pc), ("main", Some(0)));

    // recursion checks against the open function itself
    let mut ib = ExecBuilder::new();
    let c = check_err(
        func(&mut ib, "rec", 1, |ib| {
            ib.emit_call("rec", &[], Some(1))?;
            ib.emit_ret(1)
        })
        .unwrap_err(),
    );
    assert_eq!(c.kind, CheckErrorKind::Arity { callee: "rec".into(), expected: 1, got: 0 });
}

#[test]
fn declared_bytecode_that_is_never_defined() {
    let mut ib = ExecBuilder::new();
    ib.declare_function("ghost", FuncKind::Bytecode).unwrap();
    let c = check_err(ib.get().unwrap_err());
    assert_eq!(c.to_string(), "function \"ghost\": declared as a bytecode function but never defined with function()");
}

#[test]
fn unused_inputs_are_warnings() {
    // TVM's example: three inputs, only r(0) and r(2) used.
    let mut ib = ExecBuilder::new();
    func(&mut ib, "main", 3, |ib| {
        ib.emit_call("vm.op.add", &[Reg(0), Reg(2)], Some(3))?;
        ib.emit_ret(3)
    })
    .unwrap();
    assert_eq!(ib.warnings(), ["function \"main\": input %1 is never used"]);
    let out = ib.get().unwrap();
    assert_eq!(out.warnings, vec!["function \"main\": input %1 is never used".to_string()]);
    // get() reports each warning once however many times it runs
    assert_eq!(ib.get().unwrap().warnings.len(), 1);
}

#[test]
fn loops_pass_the_check() {
    // sum(n) = 0 + 1 + ... + (n-1)
    let mut ib = ExecBuilder::new();
    func(&mut ib, "sum", 1, |ib| {
        ib.emit_call("t.add", &[Imm(0), Imm(0)], Some(1))?;
        ib.emit_call("t.add", &[Imm(0), Imm(0)], Some(2))?;
        ib.emit_call("t.lt", &[Reg(2), Reg(0)], Some(3))?;
        ib.emit_if(3, 4)?;
        ib.emit_call("t.add", &[Reg(1), Reg(2)], Some(1))?;
        ib.emit_call("t.add", &[Reg(2), Imm(1)], Some(2))?;
        ib.emit_goto(-4)?;
        ib.emit_ret(1)
    })
    .unwrap();
    assert!(ib.get().unwrap().warnings.is_empty());
}

#[test]
fn unreachable_code_is_fine() {
    let mut ib = ExecBuilder::new();
    func(&mut ib, "main", 1, |ib| {
        ib.emit_ret(0)?;
        ib.emit_call("f", &[Reg(42)], Some(7))?;
        ib.emit_ret(7)
    })
    .unwrap();
    let exe = ib.get().unwrap().executable;
    assert_eq!(exe.func("main").unwrap().register_file_size, 3);
}

/// A tiny deterministic generator (xorshift).
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// The first instruction reading a register that some execution reaches unwritten, found by
/// exploring every (pc, written registers) state; `None` when there is none.
fn exhaustive_first_bad_read(num_inputs: u32, prog: &[relaxvm::Instruction]) -> Option<usize> {
    use relaxvm::Instruction;
    let start: u32 = (1 << num_inputs) - 1;
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![(0usize, start)];
    let mut bad: Option<usize> = None;
    while let Some((pc, mask)) = stack.pop() {
        if !seen.insert((pc, mask)) {
            continue;
        }
        let instr = &prog[pc];
        if instr.reads().iter().any(|r| mask & (1 << r) == 0) {
            bad = Some(bad.map_or(pc, |b| b.min(pc)));
        }
        let mask = instr.writes().map_or(mask, |d| mask | (1 << d));
        let succ: Vec<i64> = match instr {
            Instruction::Call { .. } => vec![1],
            Instruction::Ret { .. } => vec![],
            Instruction::Goto { offset } => vec![*offset],
            Instruction::If { false_offset, .. } => vec![1, *false_offset],
        };
        for off in succ {
            stack.push(((pc as i64 + off) as usize, mask));
        }
    }
    bad
}

#[test]
fn dataflow_agrees_with_exhaustive_search() {
    use relaxvm::Instruction;
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let (mut compared, mut flagged) = (0, 0);
    for _ in 0..4000 {
        let n = 1 + rng.below(8) as i64;
        let num_inputs = rng.below(3) as u32;
        let reg = |rng: &mut Rng| rng.below(5) as u32;
        let mut prog = Vec::new();
        for pc in 0..n {
            let off = |rng: &mut Rng| rng.below(n as u64) as i64 - pc;
            prog.push(match rng.below(6) {
                0..=2 => {
                    let args = (0..rng.below(3)).map(|_| Reg(reg(&mut rng))).collect();
                    let dst = if rng.below(4) == 0 { None } else { Some(reg(&mut rng)) };
                    Instruction::Call { func: 0, args, dst }
                }
                3 => Instruction::Ret { result: reg(&mut rng) },
                4 => Instruction::Goto { offset: off(&mut rng) },
                _ => Instruction::If { cond: reg(&mut rng), false_offset: off(&mut rng) },
            });
        }
        if pc_falls_off(&prog) {
            continue;
        }
        let mut ib = ExecBuilder::new();
        ib.func_ref("f");
        ib.function("main", num_inputs, None).unwrap();
        for i in &prog {
            match i {
                Instruction::Call { args, dst, .. } => ib.emit_call("f", args, *dst).unwrap(),
                Instruction::Ret { result } => ib.emit_ret(*result).unwrap(),
                Instruction::Goto { offset } => ib.emit_goto(*offset).unwrap(),
                Instruction::If { cond, false_offset } => ib.emit_if(*cond, *false_offset).unwrap(),
            }
        }
        let got = match ib.end_function() {
            Ok(()) => None,
            Err(BuildError::Check(c)) => {
                assert!(
                    matches!(c.kind, CheckErrorKind::MaybeUnassigned { .. } | CheckErrorKind::UndefinedRegister { .. }),
                    "{c}"
                );
                c.pc
            }
            Err(e) => panic!("{e}"),
        };
        assert_eq!(got, exhaustive_first_bad_read(num_inputs, &prog), "{prog:?} with {num_inputs} inputs");
        if got.is_none() {
            // and what passes the check builds, renumbers and round-trips
            crate::common::build(&mut ib);
        }
        compared += 1;
        flagged += usize::from(got.is_some());
    }
    assert!(compared > 1000 && flagged > 100 && compared - flagged > 100, "{compared} {flagged}");
}

/// True when some call or if is the last instruction (control would fall off the end).
fn pc_falls_off(prog: &[relaxvm::Instruction]) -> bool {
    matches!(prog.last(), Some(relaxvm::Instruction::Call { .. } | relaxvm::Instruction::If { .. }))
}
