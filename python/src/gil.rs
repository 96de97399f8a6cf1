//! When a call releases the GIL: releasing and re-taking it costs about as much as running a
//! few instructions, so a function that only moves values, calls constant-time builtins and
//! calls Python keeps it; anything that may run long releases it. Builtins declare their cost
//! where they are registered (`relaxvm::Cost`, set in the builtins crate's tables); this file
//! only reads it.

use crate::registry::is_python_backed;
use relaxvm::{Cost, Executable, FuncKind, Instruction};

/// What a function-table entry costs to call with the GIL held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GilCost {
    /// A bytecode function: judged by what it runs.
    Bytecode,
    /// A Python function: it needs the GIL, and while it runs Python hands the GIL to other
    /// threads and handles signals as usual.
    Python,
    /// A builtin declared constant-time.
    Constant,
    /// Anything else: it may run long.
    Long,
}

/// Per function-table entry of `exe`, its [`GilCost`].
pub fn gil_costs(exe: &Executable) -> Vec<GilCost> {
    let registry = relaxvm::registry::global();
    exe.funcs()
        .iter()
        .map(|f| match f.kind {
            FuncKind::Bytecode => GilCost::Bytecode,
            FuncKind::Packed if is_python_backed(&f.name) => GilCost::Python,
            FuncKind::Packed if registry.get(&f.name).is_some_and(|p| p.cost() == Cost::Constant) => GilCost::Constant,
            FuncKind::Packed => GilCost::Long,
        })
        .collect()
}

/// Whether calling bytecode function `start` should release the GIL: yes when it may reach
/// a packed function that can take long, or loops; no when it only moves values around, calls
/// constant-time builtins and calls Python (releasing and re-taking the GIL would cost more
/// than the call). Calls of Python functions do not count toward the instruction budget: each
/// runs Python, which hands the GIL to other threads as usual, and with the GIL released every
/// one of them would take it back (a function of many callbacks cost twice as much per
/// callback).
pub fn needs_release(exe: &Executable, costs: &[GilCost], start: usize) -> bool {
    /// Beyond this many instructions that do not call Python, a call may run long enough that
    /// other threads should get the GIL (releasing it costs about as much as running a few
    /// instructions).
    const MAX_INSTRUCTIONS_WITH_GIL: usize = 256;
    let mut seen = vec![false; exe.funcs().len()];
    let mut stack = vec![start];
    let mut instructions = 0;
    while let Some(i) = stack.pop() {
        let f = &exe.funcs()[i];
        match costs[i] {
            GilCost::Long => return true,
            GilCost::Python | GilCost::Constant => continue,
            GilCost::Bytecode => {}
        }
        // A bytecode function reached twice may be recursion: its run time is unbounded.
        if std::mem::replace(&mut seen[i], true) {
            return true;
        }
        let calls_python = |ins: &Instruction| matches!(ins, Instruction::Call { func, .. } if costs[*func as usize] == GilCost::Python);
        instructions += exe.instrs()[f.instr_range()].iter().filter(|ins| !calls_python(ins)).count();
        if instructions > MAX_INSTRUCTIONS_WITH_GIL {
            return true;
        }
        for ins in &exe.instrs()[f.instr_range()] {
            if let Instruction::Call { func, .. } = ins {
                stack.push(*func as usize);
            }
            // A backward (or zero) jump is a loop: its run time is unbounded.
            if ins.successors().iter().any(|&offset| offset <= 0) {
                return true;
            }
        }
    }
    false
}
