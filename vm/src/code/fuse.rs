//! Fusing decoded ops: an int operation with the `if` or `goto` after it, and the commonest of
//! those, on registers, into ops of their own (see [`DecodedProgram::fuse_pairs`]).

use super::{DecodedProgram, Op, Reg, Src, CONST_BIT};
use crate::int_op::IntOp;
use crate::value::Value;

impl DecodedProgram {
    /// Fuses each int operation followed by an `if` on its result (a loop's test) into one
    /// [`Op::IntBranch`], and each followed by a `goto` (a loop's step) into one
    /// [`Op::IntJump`] (the `if` or `goto` keeps its own op, and holds the jump target the fused
    /// op uses). Running a fused op is running the two in sequence, so it needs no
    /// condition on where they are: a jump to the second finds it unchanged. Then gives the
    /// commonest of these, on registers, their own ops ([`Op::IntAdd`], [`Op::IntLtBranch`],
    /// [`Op::IntAddJump`], [`Op::IntAddJumpImm`]).
    pub(super) fn fuse_pairs(&mut self) {
        for pc in 0..self.ops.len().saturating_sub(1) {
            let Op::IntBinary { op, a, b, dst } = self.ops[pc] else { continue };
            match self.ops[pc + 1] {
                Op::If { cond, .. } if cond == dst => self.ops[pc] = Op::IntBranch { op, a, b, dst },
                Op::Goto { .. } => self.ops[pc] = Op::IntJump { op, a, b, dst },
                _ => {}
            }
        }
        let reg = Reg::new;
        for pc in 0..self.ops.len() {
            self.ops[pc] = match self.ops[pc] {
                Op::IntBinary { op: IntOp::Add, a, b, dst } => match (reg(a), reg(b), reg(dst)) {
                    (Some(a), Some(b), Some(dst)) => Op::IntAdd { a, b, dst },
                    _ => self.ops[pc],
                },
                Op::IntBranch { op: IntOp::Lt, a, b, dst } => match (reg(a), reg(b), reg(dst)) {
                    (Some(a), Some(b), Some(dst)) => Op::IntLtBranch { a, b, dst },
                    _ => self.ops[pc],
                },
                Op::IntJump { op: IntOp::Add, a, b, dst } => {
                    // The `goto` fused with it holds the target. An add of a constant into its
                    // own operand (`i += 1`) carries the target itself: it is a loop's back edge.
                    let Op::Goto { target } = self.ops[pc + 1] else { unreachable!("fused with a goto") };
                    let imm = self.int_constant(b).and_then(|i| i32::try_from(i).ok());
                    let to = target.checked_mul(std::mem::size_of::<Op>() as u32);
                    match (reg(a), reg(b), imm, reg(dst), to) {
                        (Some(a), _, Some(imm), Some(_), Some(to)) if a.index() == dst && target as usize <= pc + 1 => {
                            Op::IntAddJumpImm { a, imm, to }
                        }
                        (Some(a), Some(b), _, Some(dst), _) => Op::IntAddJump { a, b, dst },
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
