//! Fusing decoded ops: an int operation with the `if` or `goto` after it, and the commonest of
//! those, on registers, into ops of their own (see [`DecodedProgram::fuse_pairs`]).

use super::{DecodedProgram, Op, Reg, Src, CONST_BIT};
use crate::int_op::IntOp;
use crate::value::Value;

impl DecodedProgram {
    /// Fuses each int operation followed by an `if` on its result (a loop's test) into one
    /// [`Op::IntBranch`], and each followed by a `goto` (a loop's step) into one
    /// [`Op::IntJump`]. Running a fused op is running the two in sequence, so it needs no
    /// condition on where they are: a jump to the second finds it unchanged. Then gives the
    /// commonest of these, on registers, their own ops ([`Op::IntAdd`], [`Op::IntLtBranch`],
    /// [`Op::IntAddJump`], [`Op::IntAddJumpImm`]).
    pub(super) fn fuse_pairs(&mut self) {
        for pc in 0..self.ops.len().saturating_sub(1) {
            let Op::IntBinary { op, f, a, b, dst } = self.ops[pc] else { continue };
            match self.ops[pc + 1] {
                Op::If { cond, false_target } if cond == dst => {
                    self.ops[pc] = Op::IntBranch { op, f, a, b, dst, false_target };
                }
                Op::Goto { target } => self.ops[pc] = Op::IntJump { op, f, a, b, dst, target },
                _ => {}
            }
        }
        let reg = Reg::new;
        for pc in 0..self.ops.len() {
            self.ops[pc] = match self.ops[pc] {
                Op::IntBinary { op: IntOp::Add, f, a, b, dst } => match (reg(a), reg(b), reg(dst)) {
                    (Some(a), Some(b), Some(dst)) => Op::IntAdd { f, a, b, dst },
                    _ => self.ops[pc],
                },
                Op::IntBranch { op: IntOp::Lt, f, a, b, dst, false_target } => match (reg(a), reg(b), reg(dst)) {
                    (Some(a), Some(b), Some(dst)) => Op::IntLtBranch { f, a, b, dst, false_target },
                    _ => self.ops[pc],
                },
                Op::IntJump { op: IntOp::Add, f, a, b, dst, target } => {
                    match (reg(a), reg(b), self.int_constant(b), reg(dst)) {
                        (Some(a), _, Some(imm), Some(dst)) if target as usize <= pc + 1 => {
                            Op::IntAddJumpImm { f, a, imm, dst, target }
                        }
                        (Some(a), Some(b), _, Some(dst)) => Op::IntAddJump { f, a, b, dst, target },
                        _ => self.ops[pc],
                    }
                }
                other => other,
            };
        }
    }

    /// The int operand `s` is when it is one fixed at load.
    fn int_constant(&self, s: Src) -> Option<i64> {
        match self.consts.get((s & !CONST_BIT) as usize) {
            Some(Value::Int(i)) if s & CONST_BIT != 0 => Some(*i),
            _ => None,
        }
    }
}
