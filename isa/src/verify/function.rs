//! The checks of one bytecode function: every operand against the tables around it, every
//! jump and fall-through against the function's bounds, and (at [`Depth::DataFlow`]) every
//! register read against the paths that reach it.

use super::error::{VerifyError, VerifyErrorDetail, VerifyErrorKind};
use super::flow;
use crate::bytecode::{Instruction, Operand, Slot};
use crate::instr_text::instr_to_text_with;
use crate::location::Location;

/// What the verifier needs to know about the program around one function. Implemented by
/// [`FuncTable`](super::FuncTable) (an executable or its parts) and by the builder, whose table is
/// still growing when a function closes.
pub trait Tables {
    /// The name of function-table entry `index`, if it exists.
    fn func_name(&self, index: u32) -> Option<&str>;
    /// The size of the function table.
    fn num_funcs(&self) -> usize;
    /// The number of inputs of entry `index` when it is a bytecode function (known so far).
    fn bytecode_arity(&self, index: u32) -> Option<u32>;
    /// The size of the constant pool.
    fn num_constants(&self) -> usize;
}

/// How far to verify.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Depth {
    /// What the interpreter relies on to never index out of bounds: operands in range, jumps
    /// inside the function, no fall-off, bytecode calls with their number of inputs. The loader
    /// and the assembler verify this much.
    Structure,
    /// Structure, and every register read written on every path that reaches it (or an input).
    /// The builder's check verifies this much.
    DataFlow,
}

/// One function to verify.
#[derive(Clone, Copy, Debug)]
pub struct FunctionCode<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its number of inputs (registers `0..num_inputs`).
    pub num_inputs: u32,
    /// Its register-file size, when already fixed (the builder numbers registers only after
    /// the check).
    pub registers: Option<u32>,
    /// Its instructions.
    pub instrs: &'a [Instruction],
    /// One location per instruction, or empty.
    pub locations: &'a [Option<Location>],
}

/// Verifies `f` to `depth`; returns the warnings (inputs never read, at
/// [`Depth::DataFlow`]) or the first error: structural errors first, then register errors,
/// each the earliest in instruction order.
pub fn verify_function(tables: &dyn Tables, f: FunctionCode<'_>, depth: Depth) -> Result<Vec<String>, VerifyError> {
    let fail = |pc: usize, slot: Option<Slot>, kind: VerifyErrorKind| -> VerifyError {
        VerifyErrorDetail {
            origin: None,
            func: f.name.to_string(),
            pc: Some(pc),
            instr: Some(instr_to_text_with(&f.instrs[pc], |i| tables.func_name(i))),
            slot,
            location: f.locations.get(pc).cloned().flatten(),
            kind,
        }
        .into()
    };
    if f.instrs.is_empty() {
        return Err(VerifyError::function(f.name, VerifyErrorKind::Empty));
    }
    for pc in 0..f.instrs.len() {
        verify_instr(tables, &f, pc).map_err(|(slot, kind)| fail(pc, slot, kind))?;
    }
    if depth == Depth::Structure {
        return Ok(Vec::new());
    }
    flow::definitely_assigned(f.num_inputs, f.instrs).map_err(|(pc, slot, kind)| fail(pc, Some(slot), kind))?;
    Ok(flow::unused_input_warnings(f.name, f.num_inputs, f.instrs))
}

/// The checks that concern one instruction alone, in the order the error is reported: the
/// callee and its arity, the operands in text order, fall-off, then the jump.
fn verify_instr(tables: &dyn Tables, f: &FunctionCode<'_>, pc: usize) -> Result<(), (Option<Slot>, VerifyErrorKind)> {
    let instr = &f.instrs[pc];
    let nargs = match instr {
        Instruction::Call { args, .. } => args.len(),
        Instruction::Ret { .. } | Instruction::Goto { .. } | Instruction::If { .. } => 0,
    };
    let mut first: Option<(Option<Slot>, VerifyErrorKind)> = None;
    let mut jump = None;
    instr.operands(|slot, op| {
        if first.is_some() {
            return;
        }
        first = match op {
            Operand::Read(reg) | Operand::Write(reg) => match f.registers {
                Some(size) if reg >= size => Some((Some(slot), VerifyErrorKind::RegisterOutside { reg, size })),
                _ => None,
            },
            Operand::Func(&index) if index as usize >= tables.num_funcs() => {
                Some((Some(slot), VerifyErrorKind::FuncOutOfRange { index, len: tables.num_funcs() }))
            }
            Operand::Func(&index) if slot == Slot::Callee => match tables.bytecode_arity(index) {
                Some(expected) if nargs != expected as usize => {
                    let callee = tables.func_name(index).unwrap_or_default().to_string();
                    Some((None, VerifyErrorKind::Arity { callee, expected, got: nargs }))
                }
                _ => None,
            },
            Operand::Const(index) if index as usize >= tables.num_constants() => {
                Some((Some(slot), VerifyErrorKind::ConstOutOfRange { index, len: tables.num_constants() }))
            }
            Operand::Jump(offset) => {
                jump = Some(offset);
                None
            }
            Operand::Func(_) | Operand::Const(_) | Operand::Plain => None,
        };
    });
    if let Some(e) = first {
        return Err(e);
    }
    let len = f.instrs.len();
    if instr.falls_through() && pc + 1 >= len {
        return Err((None, VerifyErrorKind::RunsOffEnd));
    }
    if let Some(offset) = jump {
        let target = pc as i128 + i128::from(offset);
        if target < 0 || target >= len as i128 {
            return Err((Some(Slot::Offset), VerifyErrorKind::JumpOutside { offset, target, len }));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytecode::Arg::{self, *};

    struct Ctx;
    impl Tables for Ctx {
        fn func_name(&self, index: u32) -> Option<&str> {
            ["main", "f", "g2"].get(index as usize).copied()
        }
        fn num_funcs(&self) -> usize {
            3
        }
        fn bytecode_arity(&self, index: u32) -> Option<u32> {
            (index == 2).then_some(2)
        }
        fn num_constants(&self) -> usize {
            1
        }
    }

    fn call(args: Vec<Arg>, dst: Option<u32>) -> Instruction {
        Instruction::Call { func: 1, args, dst }
    }
    fn ret(r: u32) -> Instruction {
        Instruction::Ret { result: r }
    }
    fn check(num_inputs: u32, instrs: &[Instruction]) -> Result<Vec<String>, VerifyError> {
        let f = FunctionCode { name: "main", num_inputs, registers: None, instrs, locations: &[] };
        verify_function(&Ctx, f, Depth::DataFlow)
    }
    fn kind(num_inputs: u32, instrs: &[Instruction]) -> (Option<usize>, VerifyErrorKind) {
        let e = check(num_inputs, instrs).unwrap_err();
        (e.pc, e.kind.clone())
    }

    #[test]
    fn straight_line_reads_after_writes() {
        assert_eq!(check(1, &[call(vec![Reg(0)], Some(5)), ret(5)]).unwrap(), Vec::<String>::new());
        let (pc, k) = kind(2, &[call(vec![Reg(0), Reg(1)], Some(4)), call(vec![Reg(3)], Some(4)), ret(4)]);
        assert_eq!((pc, k), (Some(1), VerifyErrorKind::UndefinedRegister { reg: 3, num_inputs: 2 }));
        // reads happen before the write of the same instruction
        let (pc, k) = kind(0, &[call(vec![Reg(0)], Some(0)), ret(0)]);
        assert_eq!((pc, k), (Some(0), VerifyErrorKind::MaybeUnassigned { reg: 0 }));
    }

    #[test]
    fn a_write_on_one_branch_only_is_not_enough() {
        // 0: if %0 2 ; 1: %1 = f() ; 2: ret %1   -- the false branch skips the write
        let prog = [Instruction::If { cond: 0, false_offset: 2 }, call(vec![], Some(1)), ret(1)];
        assert_eq!(kind(1, &prog), (Some(2), VerifyErrorKind::MaybeUnassigned { reg: 1 }));
        // both branches write: fine
        let prog = [
            Instruction::If { cond: 0, false_offset: 3 },
            call(vec![], Some(1)),
            Instruction::Goto { offset: 2 },
            call(vec![Imm(1)], Some(1)),
            ret(1),
        ];
        assert!(check(1, &prog).is_ok());
    }

    #[test]
    fn loops_and_back_edges() {
        // %1 = 0; loop: if %1 exit; %1 = f(%1); goto loop; exit: ret %1
        let prog = [
            call(vec![Imm(0)], Some(1)),
            Instruction::If { cond: 1, false_offset: 3 },
            call(vec![Reg(1)], Some(1)),
            Instruction::Goto { offset: -2 },
            ret(1),
        ];
        assert!(check(0, &prog).is_ok());
        // a register written only inside the loop body and read after it
        let prog = [
            Instruction::If { cond: 0, false_offset: 3 },
            call(vec![], Some(2)),
            Instruction::Goto { offset: -2 },
            ret(2),
        ];
        assert_eq!(kind(1, &prog), (Some(3), VerifyErrorKind::MaybeUnassigned { reg: 2 }));
        // a jump back to the entry: nothing is assigned there
        let prog = [call(vec![Reg(1)], Some(1)), Instruction::Goto { offset: -1 }];
        assert_eq!(kind(0, &prog), (Some(0), VerifyErrorKind::MaybeUnassigned { reg: 1 }));
        // textual order does not matter: written before the read on every path
        let prog = [
            Instruction::Goto { offset: 3 },
            call(vec![Reg(7)], Some(8)),
            ret(8),
            call(vec![], Some(7)),
            Instruction::Goto { offset: -3 },
        ];
        assert!(check(0, &prog).is_ok());
    }

    #[test]
    fn unreachable_code_is_not_checked_for_registers() {
        let prog = [ret(0), call(vec![Reg(9)], Some(1)), ret(1)];
        assert!(check(1, &prog).is_ok());
    }

    #[test]
    fn structure_errors() {
        assert_eq!(kind(0, &[call(vec![], Some(0))]), (Some(0), VerifyErrorKind::RunsOffEnd));
        assert_eq!(
            kind(1, &[Instruction::If { cond: 0, false_offset: -1 }, ret(0)]).1,
            VerifyErrorKind::JumpOutside { offset: -1, target: -1, len: 2 }
        );
        assert_eq!(
            kind(1, &[Instruction::Goto { offset: 1 }]).1,
            VerifyErrorKind::JumpOutside { offset: 1, target: 1, len: 1 }
        );
        assert_eq!(kind(1, &[Instruction::If { cond: 0, false_offset: -1 }]).1, VerifyErrorKind::RunsOffEnd);
        assert_eq!(kind(1, &[Instruction::Goto { offset: i64::MIN }, ret(0)]).0, Some(0));
        assert_eq!(
            kind(0, &[call(vec![Const(1)], None), ret(0)]).1,
            VerifyErrorKind::ConstOutOfRange { index: 1, len: 1 }
        );
        assert_eq!(
            kind(0, &[call(vec![Func(3)], None), ret(0)]).1,
            VerifyErrorKind::FuncOutOfRange { index: 3, len: 3 }
        );
        let far = Instruction::Call { func: 7, args: vec![], dst: None };
        assert_eq!(kind(0, &[far, ret(0)]).1, VerifyErrorKind::FuncOutOfRange { index: 7, len: 3 });
        let g2 = Instruction::Call { func: 2, args: vec![Imm(1)], dst: Some(0) };
        let e = check(0, &[g2, ret(0)]).unwrap_err();
        assert_eq!(e.kind, VerifyErrorKind::Arity { callee: "g2".into(), expected: 2, got: 1 });
        assert_eq!(
            e.to_string(),
            "function \"main\", instruction 0 (call  g2  in: i1  dst: %0): calls \"g2\" with 1 argument, but it takes 2"
        );
        let e = check(0, &[]).unwrap_err();
        assert_eq!((e.pc, &e.kind), (None, &VerifyErrorKind::Empty));
    }

    #[test]
    fn unused_inputs_warn() {
        let w = check(3, &[call(vec![Reg(0)], Some(3)), ret(3)]).unwrap();
        assert_eq!(w, vec!["function \"main\": input %1 is never used", "function \"main\": input %2 is never used"]);
        let w = check(40, &[ret(39)]).unwrap();
        assert_eq!(w.len(), 16 + 1);
        assert_eq!(w.last().unwrap(), "function \"main\": 23 more inputs are never used");
    }

    #[test]
    fn many_blocks_and_registers() {
        // 200 diamonds, each writing a fresh register on both arms, then reading it.
        let mut prog = Vec::new();
        for i in 0..200u32 {
            let r = 1 + i;
            prog.push(Instruction::If { cond: 0, false_offset: 3 });
            prog.push(call(vec![], Some(r)));
            prog.push(Instruction::Goto { offset: 2 });
            prog.push(call(vec![], Some(r)));
            prog.push(call(vec![Reg(r)], None));
        }
        prog.push(ret(200));
        assert!(check(1, &prog).is_ok());
        // remove one write on one arm: the read after it fails
        prog[5 * 150 + 3] = call(vec![], None);
        assert_eq!(kind(1, &prog), (Some(5 * 150 + 4), VerifyErrorKind::MaybeUnassigned { reg: 151 }));
    }
}
