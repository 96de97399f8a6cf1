//! The interpreter's decoded form of an executable: packed functions resolved to direct
//! references, immediates and constants materialised as values, jump targets made absolute.

use crate::bytecode::{Arg, Instruction};
use crate::error::{ErrorKind, Result};
use crate::executable::{Executable, FuncKind};
use crate::packed::{BinaryFn, PackedFunc};
use crate::registry::Registry;
use crate::value::{Callable, Closure, Value};
use std::sync::Arc;

/// Marks a `call` whose result is discarded.
pub(crate) const VOID: u32 = u32::MAX;

/// A decoded instruction; indices were proven in range by the verifier.
#[derive(Clone, Copy)]
pub(crate) enum Op {
    /// A call of a packed function; `args` indexes `operands`.
    CallPacked {
        func: u32,
        args: u32,
        nargs: u32,
        dst: u32,
    },
    /// A call of a two-argument plain function with operands `a` and `b`.
    CallBinary {
        f: BinaryFn,
        a: u32,
        b: u32,
        dst: u32,
    },
    /// A call of a packed function that selects its result from its arguments.
    CallSelect {
        func: u32,
        args: u32,
        nargs: u32,
        dst: u32,
    },
    /// A call of a bytecode function of this executable.
    CallBytecode {
        func: u32,
        args: u32,
        nargs: u32,
        dst: u32,
    },
    Ret {
        result: u32,
    },
    Goto {
        target: u32,
    },
    If {
        cond: u32,
        false_target: u32,
    },
}

/// A decoded argument: a register of the frame, or a value fixed at decode time.
pub(crate) enum Operand {
    Reg(u32),
    Val(Value),
}

/// What a function-table entry resolves to.
pub(crate) enum Callee {
    Bytecode { start: u32, regs: u32 },
    Packed(PackedFunc),
}

pub(crate) struct Code {
    pub ops: Vec<Op>,
    pub operands: Vec<Operand>,
    pub callees: Vec<Callee>,
    /// Each function-table entry as a function value (for `f[...]` arguments and instruments).
    pub func_values: Vec<Value>,
}

impl Code {
    /// Decodes `exe`, resolving packed functions from `overrides` then the process-wide registry.
    pub fn decode(exe: &Executable, overrides: &Registry) -> Result<Code> {
        let global = crate::registry::global();
        let mut missing = Vec::new();
        let mut callees = Vec::with_capacity(exe.funcs().len());
        let mut func_values = Vec::with_capacity(exe.funcs().len());
        for (i, f) in exe.funcs().iter().enumerate() {
            let (callee, callable) = match f.kind {
                FuncKind::Bytecode => (
                    Callee::Bytecode { start: f.start_instr, regs: f.register_file_size },
                    Callable::Bytecode { index: i as u32, name: f.name.as_str().into() },
                ),
                FuncKind::Packed => match overrides.get(&f.name).cloned().or_else(|| resolve(exe, &global, &f.name)) {
                    Some(p) => (Callee::Packed(p.clone()), Callable::Packed(p)),
                    None => {
                        missing.push(with_call_site(exe, i as u32, &f.name));
                        continue;
                    }
                },
            };
            callees.push(callee);
            func_values.push(Value::Func(Arc::new(Closure { callable, captured: Vec::new() })));
        }
        if !missing.is_empty() {
            if let Some(lib) = exe.libraries().iter().find(|l| l.loaded.is_none()) {
                return Err(ErrorKind::LibraryNotLoaded { path: lib.reference.path.clone(), missing }.into());
            }
            return Err(ErrorKind::MissingFunctions(missing).into());
        }
        let mut operands = Vec::new();
        let ops = exe
            .instrs()
            .iter()
            .enumerate()
            .map(|(pc, instr)| decode_op(exe, &callees, &func_values, &mut operands, pc, instr))
            .collect();
        Ok(Code { ops, operands, callees, func_values })
    }
}

/// `name` with where it is first called, e.g. `matmul (called by "main" at instruction 8)`, so
/// that a missing builtin or kernel points at the program's use of it.
fn with_call_site(exe: &Executable, index: u32, name: &str) -> String {
    let site = exe.funcs().iter().filter(|f| f.kind == FuncKind::Bytecode).find_map(|f| {
        exe.instrs()[f.instr_range()]
            .iter()
            .position(|ins| matches!(ins, Instruction::Call { func, .. } if *func == index))
            .map(|pc| (f, pc))
    });
    match site {
        Some((f, pc)) => format!("{name} (called by {:?} at instruction {pc})", f.name),
        None => name.to_string(),
    }
}

/// `name` from the executable's native libraries (TVM resolves a module's imports first), then
/// from the process-wide registry.
fn resolve(exe: &Executable, global: &Registry, name: &str) -> Option<PackedFunc> {
    exe.libraries()
        .iter()
        .filter_map(|l| l.loaded.as_ref())
        .find_map(|l| l.get_function(name))
        .or_else(|| global.get(name).cloned())
}

fn decode_op(
    exe: &Executable,
    callees: &[Callee],
    func_values: &[Value],
    operands: &mut Vec<Operand>,
    pc: usize,
    instr: &Instruction,
) -> Op {
    let rel = |off: i64| (pc as i64 + off) as u32;
    match instr {
        Instruction::Call { func, args, dst } => {
            let start = operands.len() as u32;
            operands.extend(args.iter().map(|a| match *a {
                Arg::Reg(r) => Operand::Reg(r),
                Arg::Void => Operand::Val(Value::Null),
                Arg::VmState => Operand::Val(Value::VmState),
                Arg::Imm(i) => Operand::Val(Value::Int(i)),
                Arg::Const(c) => Operand::Val(exe.constants()[c as usize].clone()),
                Arg::Func(f) => Operand::Val(func_values[f as usize].clone()),
            }));
            let (nargs, dst) = (args.len() as u32, dst.unwrap_or(VOID));
            match &callees[*func as usize] {
                Callee::Bytecode { .. } => Op::CallBytecode { func: *func, args: start, nargs, dst },
                Callee::Packed(p) => match (p.as_binary(), p.as_select()) {
                    (Some(f), _) if nargs == 2 => Op::CallBinary { f, a: start, b: start + 1, dst },
                    (_, Some(_)) => Op::CallSelect { func: *func, args: start, nargs, dst },
                    _ => Op::CallPacked { func: *func, args: start, nargs, dst },
                },
            }
        }
        Instruction::Ret { result } => Op::Ret { result: *result },
        Instruction::Goto { offset } => Op::Goto { target: rel(*offset) },
        Instruction::If { cond, false_offset } => Op::If { cond: *cond, false_target: rel(*false_offset) },
    }
}
