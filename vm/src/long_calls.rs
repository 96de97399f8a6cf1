//! Which calls may run long: a static analysis of an executable for a caller that holds a lock
//! others wait for (Python's GIL) while the VM runs, and must decide per function whether
//! releasing it first is worth its own cost. Builtins declare their [`Cost`] where they are
//! registered; callbacks into the embedding language are named by the embedder.

use crate::cost::Cost;
use crate::executable::{Executable, FuncKind};
use crate::registry::Registry;
use crate::Instruction;

/// What calling one function-table entry costs, for [`may_run_long`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CalleeCost {
    /// A bytecode function: judged by what it runs.
    Bytecode,
    /// A function of the embedding language (a Python callable): it needs the lock, and while
    /// it runs that language hands the lock to other threads as usual.
    Callback,
    /// A builtin declared [`Cost::Constant`].
    Constant,
    /// Anything else: it may run long.
    Long,
}

/// Beyond this many instructions that do not call back, a call may run long enough that
/// other threads should get the lock (releasing it costs about as much as running a few
/// instructions).
pub const MAX_SHORT_INSTRUCTIONS: usize = 256;

/// Per function-table entry of `exe`, its [`CalleeCost`]: packed functions named by
/// `is_callback` are callbacks, the others are looked up in `registry` for their declared cost
/// (a function it lacks is [`CalleeCost::Long`]).
pub fn callee_costs(exe: &Executable, registry: &Registry, is_callback: impl Fn(&str) -> bool) -> Vec<CalleeCost> {
    exe.funcs()
        .iter()
        .map(|f| match f.kind {
            FuncKind::Bytecode => CalleeCost::Bytecode,
            FuncKind::Packed if is_callback(&f.name) => CalleeCost::Callback,
            FuncKind::Packed if registry.get(&f.name).is_some_and(|p| p.cost() == Cost::Constant) => {
                CalleeCost::Constant
            }
            FuncKind::Packed => CalleeCost::Long,
        })
        .collect()
}

/// Whether a call of function-table entry `start` may run long: yes when it may reach a
/// packed function that can take long, loops, recurses, or runs more than
/// [`MAX_SHORT_INSTRUCTIONS`] instructions that do not call back; no when it only moves values
/// around, calls constant-time builtins and calls back. Callbacks do not count toward the
/// instruction budget: each runs the embedding language, which hands the lock to other threads
/// as usual (with the lock released, every callback would take it back: a function of many
/// callbacks cost twice as much per callback). `costs` is [`callee_costs`] of `exe`.
pub fn may_run_long(exe: &Executable, costs: &[CalleeCost], start: usize) -> bool {
    let mut seen = vec![false; exe.funcs().len()];
    let mut stack = vec![start];
    let mut instructions = 0;
    while let Some(i) = stack.pop() {
        let f = &exe.funcs()[i];
        match costs[i] {
            CalleeCost::Long => return true,
            CalleeCost::Callback | CalleeCost::Constant => continue,
            CalleeCost::Bytecode => {}
        }
        // A bytecode function reached twice may be recursion: its run time is unbounded.
        if std::mem::replace(&mut seen[i], true) {
            return true;
        }
        let calls_back = |ins: &Instruction| matches!(ins, Instruction::Call { func, .. } if costs[*func as usize] == CalleeCost::Callback);
        instructions += exe.instrs()[f.instr_range()].iter().filter(|ins| !calls_back(ins)).count();
        if instructions > MAX_SHORT_INSTRUCTIONS {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytecode::Arg;
    use crate::executable::{ExecutableParts, FuncInfo};
    use crate::value::Value;
    use crate::PackedFunc;

    fn call(func: u32) -> Instruction {
        Instruction::Call { func, args: vec![Arg::Reg(0)], dst: Some(0) }
    }

    /// Functions: 0 `short` (calls 4, 5), 1 `loops`, 2 `long` (calls 6), 3 `many` (300
    /// constant-time calls), then packed 4 `t.const`, 5 `t.callback`, 6 `t.long`, and 7 `rec`
    /// (calls itself), 8 `callbacks` (300 callbacks).
    fn exe() -> Executable {
        let mut instrs = vec![call(4), call(5), Instruction::Ret { result: 0 }];
        instrs.extend([Instruction::Goto { offset: 0 }]);
        instrs.extend([call(6), Instruction::Ret { result: 0 }]);
        let many = instrs.len() as u32;
        instrs.extend((0..300).map(|_| call(4)));
        instrs.push(Instruction::Ret { result: 0 });
        let rec = instrs.len() as u32;
        instrs.extend([call(7), Instruction::Ret { result: 0 }]);
        let cbs = instrs.len() as u32;
        instrs.extend((0..300).map(|_| call(5)));
        instrs.push(Instruction::Ret { result: 0 });
        let end = instrs.len() as u32;
        let funcs = vec![
            FuncInfo::bytecode("short", 0, 3, 1, 1),
            FuncInfo::bytecode("loops", 3, 4, 1, 1),
            FuncInfo::bytecode("long", 4, 6, 1, 1),
            FuncInfo::bytecode("many", many, rec, 1, 1),
            FuncInfo::packed("t.const"),
            FuncInfo::packed("t.callback"),
            FuncInfo::packed("t.long"),
            FuncInfo::bytecode("rec", rec, cbs, 1, 1),
            FuncInfo::bytecode("callbacks", cbs, end, 1, 1),
        ];
        Executable::from_parts(ExecutableParts { funcs, instrs, ..Default::default() }).unwrap()
    }

    #[test]
    fn short_functions_are_those_that_only_call_constant_builtins_and_back() {
        let exe = exe();
        let mut reg = Registry::new();
        reg.register(PackedFunc::from_fn("t.const", |_| Ok(Value::Null)).with_cost(Cost::Constant), true).unwrap();
        reg.register(PackedFunc::from_fn("t.long", |_| Ok(Value::Null)), true).unwrap();
        let costs = callee_costs(&exe, &reg, |n| n == "t.callback");
        assert_eq!(costs[4..7], [CalleeCost::Constant, CalleeCost::Callback, CalleeCost::Long]);
        let long: Vec<bool> = (0..9).map(|i| may_run_long(&exe, &costs, i)).collect();
        assert_eq!(long, [false, true, true, true, false, false, true, true, false]);
    }
}
