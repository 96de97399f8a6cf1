//! The instruction set: four instructions, one of which calls a packed function.
//!
//! ```text
//! call  FUNC  in: ARG, ...  dst: %R     R[dst] := FUNC(ARG...)          (dst may be void)
//! ret   %R                              return R[r] to the caller
//! if    %C  OFFSET                      if R[c] is non-zero: pc += 1, else pc += OFFSET
//! goto  OFFSET                          pc += OFFSET (may be negative: loops)
//! ```
//!
//! `FUNC` indexes the executable's function table, whose entries are bytecode functions of the
//! same executable (called in a new frame) or packed functions (resolved by name when a VM is
//! built). An `ARG` is a register `%N`, the void register `%void` (passes null), the VM-state
//! register `%vm`, an immediate `iN`, a constant `c[N]` or a function `f[NAME]`.

/// A register index within a frame.
pub type RegIdx = u32;

/// One argument of a `call`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arg {
    /// A register of the current frame.
    Reg(RegIdx),
    /// The void register: reads as null.
    Void,
    /// The VM-state register: lets a builtin reach the VM.
    VmState,
    /// A signed 64-bit immediate.
    Imm(i64),
    /// An index into the constant pool.
    Const(u32),
    /// An index into the function table: passes the function as a value.
    Func(u32),
}

/// One instruction.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Instruction {
    /// Calls function-table entry `func` with `args`, writing the result to `dst` (or nowhere).
    Call {
        /// Index into the function table.
        func: u32,
        /// The arguments.
        args: Vec<Arg>,
        /// The destination register; `None` is the void register.
        dst: Option<RegIdx>,
    },
    /// Returns the value of a register.
    Ret {
        /// The register holding the result.
        result: RegIdx,
    },
    /// Jumps by `offset` instructions relative to this one.
    Goto {
        /// The relative jump.
        offset: i64,
    },
    /// Goes on to the next instruction when `cond` is non-zero, else jumps by `false_offset`.
    If {
        /// The condition register.
        cond: RegIdx,
        /// The relative jump taken when the condition is zero.
        false_offset: i64,
    },
}

impl Instruction {
    /// The registers this instruction reads.
    pub fn reads(&self) -> Vec<RegIdx> {
        match self {
            Instruction::Call { args, .. } => {
                args.iter().filter_map(|a| if let Arg::Reg(r) = a { Some(*r) } else { None }).collect()
            }
            Instruction::Ret { result } => vec![*result],
            Instruction::Goto { .. } => vec![],
            Instruction::If { cond, .. } => vec![*cond],
        }
    }

    /// The register this instruction writes, if any.
    pub fn writes(&self) -> Option<RegIdx> {
        match self {
            Instruction::Call { dst, .. } => *dst,
            Instruction::Ret { .. } | Instruction::Goto { .. } | Instruction::If { .. } => None,
        }
    }

    /// The relative targets control can go to after this instruction (1 is fall-through);
    /// empty for `ret`.
    pub fn successors(&self) -> Vec<i64> {
        match self {
            Instruction::Call { .. } => vec![1],
            Instruction::Ret { .. } => vec![],
            Instruction::Goto { offset } => vec![*offset],
            Instruction::If { false_offset, .. } => vec![1, *false_offset],
        }
    }

    /// The same instruction with every register renamed by `f`.
    pub fn map_regs(&self, mut f: impl FnMut(RegIdx) -> RegIdx) -> Instruction {
        match self {
            Instruction::Call { func, args, dst } => Instruction::Call {
                func: *func,
                args: args.iter().map(|a| if let Arg::Reg(r) = a { Arg::Reg(f(*r)) } else { *a }).collect(),
                dst: dst.map(&mut f),
            },
            Instruction::Ret { result } => Instruction::Ret { result: f(*result) },
            Instruction::Goto { offset } => Instruction::Goto { offset: *offset },
            Instruction::If { cond, false_offset } => Instruction::If { cond: f(*cond), false_offset: *false_offset },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_writes_successors() {
        let call = Instruction::Call { func: 0, args: vec![Arg::Reg(1), Arg::Imm(3), Arg::Reg(2)], dst: Some(4) };
        assert_eq!(call.reads(), vec![1, 2]);
        assert_eq!(call.writes(), Some(4));
        assert_eq!(call.successors(), vec![1]);
        assert_eq!(Instruction::Ret { result: 0 }.successors(), Vec::<i64>::new());
        assert_eq!(Instruction::If { cond: 0, false_offset: 3 }.successors(), vec![1, 3]);
        assert_eq!(Instruction::Goto { offset: -2 }.reads(), Vec::<u32>::new());
        let renamed = call.map_regs(|r| r + 10);
        assert_eq!(renamed.reads(), vec![11, 12]);
        assert_eq!(renamed.writes(), Some(14));
    }
}
