//! When a call releases the GIL: releasing and re-taking it costs about as much as running a
//! few instructions, so a function that only moves values, calls constant-time builtins and
//! calls Python keeps it; anything that may run long releases it. Builtins declare their cost
//! where they are registered (`relaxvm::Cost`, set in the builtins crate's tables); this file
//! only reads it.

use crate::registry::is_python_backed;
use relaxvm::{Cost, Executable, FuncKind, Instruction};

/// Per function-table entry of `exe`: a packed function that is cheap to call with the GIL
/// held, because it calls Python or the registered function is declared constant-time.
pub fn keeps_gil(exe: &Executable) -> Vec<bool> {
    let registry = relaxvm::registry::global();
    exe.funcs()
        .iter()
        .map(|f| {
            f.kind == FuncKind::Packed
                && (is_python_backed(&f.name) || registry.get(&f.name).is_some_and(|p| p.cost() == Cost::Constant))
        })
        .collect()
}

/// Whether calling bytecode function `start` should release the GIL: yes when it may reach
/// a packed function that can take long, or loops; no when it only moves values around, calls
/// constant-time builtins and calls Python (releasing and re-taking the GIL would cost more
/// than the call).
pub fn needs_release(exe: &Executable, keeps_gil: &[bool], start: usize) -> bool {
    /// Beyond this many instructions a call may run long enough that other threads should get
    /// the GIL (releasing it costs about as much as running a few instructions).
    const MAX_INSTRUCTIONS_WITH_GIL: usize = 256;
    let mut seen = vec![false; exe.funcs().len()];
    let mut stack = vec![start];
    let mut instructions = 0;
    while let Some(i) = stack.pop() {
        let f = &exe.funcs()[i];
        if f.kind == FuncKind::Packed {
            if !keeps_gil[i] {
                return true;
            }
            continue;
        }
        // A bytecode function reached twice may be recursion: its run time is unbounded.
        if std::mem::replace(&mut seen[i], true) {
            return true;
        }
        instructions += f.instr_range().len();
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
