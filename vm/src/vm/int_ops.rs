//! The interpreter's int operations and jumps: what the loop (`super::interpreter`) inlines for
//! the int ops and their fused `if` and `goto`, with their fall-backs to the builtin, and the
//! operand reads they share with the loop.

use super::cursor::{At, Ops, Regs};
use super::registers::{set_reg, set_scalar};
use super::VirtualMachine;
use crate::bytecode::Instruction;
use crate::code::{Callee, DecodedProgram, Op, Reg, Src, CONST_BIT};
use crate::error::Result;
use crate::int_op::IntOp;
use crate::packed::BinaryFn;
use crate::value::Value;
use std::panic::{catch_unwind, AssertUnwindSafe};

impl VirtualMachine {
    /// The op after a jump from the op at `from` to the one at index `target`: a backward (or
    /// zero) jump closes a loop and counts a step (see `count_step`), located at `from`.
    ///
    /// # Safety
    /// `from` is an op of `ops` and `target` the index of an op of the same function (a jump
    /// target of a decoded op: JumpOutside).
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(super) unsafe fn jump(&mut self, ops: Ops, from: *const Op, target: u32) -> Result<*const Op> {
        // SAFETY: the caller's contract.
        let to = unsafe { ops.at(target as usize) };
        if to <= from {
            self.count_step().map_err(|e| self.locate_at(At { ops, ip: from }, e))?;
        }
        Ok(to)
    }

    /// Runs the `if` at `ip` (on register `cond`, jumping to the op at index `false_target` when
    /// false) and returns the next op; its error (a condition neither int, bool nor a
    /// one-element tensor) is located at the `if`.
    ///
    /// # Safety
    /// As for [`Self::jump`] (`from` is `ip`), and `cond` is a register operand of the `if`, a
    /// decoded op of the frame `fp` holds (see [`Regs::get`]).
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(super) unsafe fn branch_if(
        &mut self,
        ops: Ops,
        ip: *const Op,
        cond: u32,
        false_target: u32,
        fp: Regs,
    ) -> Result<*const Op> {
        // SAFETY: the caller's contract (and the `if` is not its function's last op:
        // RunsOffEnd).
        unsafe {
            let taken = fp.get(cond).truthy().map_err(|e| self.locate_at(At { ops, ip }, e))?;
            // A backward `if` closes a loop as a backward `goto` does.
            if taken {
                Ok(ip.add(1))
            } else {
                self.jump(ops, ip, false_target)
            }
        }
    }

    /// [`Self::jump`] for the `if` or `goto` at `next` after a fused op, which holds the target
    /// ([`DecodedProgram::fused_target`]).
    ///
    /// # Safety
    /// `next` is the op after a fused op of `ops`.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(super) unsafe fn jump_fused(&mut self, ops: Ops, next: *const Op) -> Result<*const Op> {
        // SAFETY: the caller's contract; the target is one of the `if`'s or `goto`'s function.
        unsafe { self.jump(ops, next, DecodedProgram::fused_target(next)) }
    }

    /// [`Self::jump`] for a jump known at load to be backward (or to itself), to the op at
    /// byte offset `to` from the first (as [`Op::IntAddJumpImm`] holds it: no multiply to
    /// find it): it counts a step with no test of the direction.
    ///
    /// # Safety
    /// As for [`Self::jump`] with the target's index times the size of an op as `to`, and the
    /// target is at or before `from`.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(super) unsafe fn jump_back(&mut self, ops: Ops, from: *const Op, to: u32) -> Result<*const Op> {
        // SAFETY: the caller's contract.
        let to = unsafe { ops.at_offset(to as usize) };
        debug_assert!(to <= from, "a backward jump");
        self.count_step().map_err(|e| self.locate_at(At { ops, ip: from }, e))?;
        Ok(to)
    }

    /// Runs the int operation `op` (its builtin for anything but two ints) of the call at `at`
    /// and writes its result to `dst`.
    ///
    /// # Safety
    /// `a`, `b` and `dst` are operands of a decoded op of the running frame, whose registers
    /// `fp` holds (see [`src`]).
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn int_into<A: Operand, B: Operand, D: Operand>(
        &mut self,
        code: &DecodedProgram,
        op: IntOp,
        a: A,
        b: B,
        dst: D,
        fp: Regs,
        at: At,
    ) -> Result<()> {
        match int_inline(code, op, a, b, fp) {
            Some(v) => set_scalar(dst.slot(fp), v),
            None => self.int_slow(code, a, b, dst, fp, at)?,
        }
        Ok(())
    }

    /// [`Self::int_into`] of [`IntOp::Add`] on registers ([`Op::IntAdd`], [`Op::IntAddJump`]):
    /// into its first operand (an accumulator, `x = x + y`), which was just found to be an
    /// int, it writes the sum's payload alone, with no drop or test of what the register held
    /// left in the machine code (see the comment at the write).
    ///
    /// # Safety
    /// As for [`Self::int_into`].
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(super) unsafe fn int_add(
        &mut self,
        code: &DecodedProgram,
        a: Reg,
        b: Reg,
        dst: Reg,
        fp: Regs,
        at: At,
    ) -> Result<()> {
        // SAFETY: the caller's contract; the borrows of the operands end before a register is
        // written.
        unsafe {
            if let (Value::Int(x), Value::Int(y)) = (fp.reg(a), fp.reg(b)) {
                // `IntOp::Add` as `apply` defines it (an overflow is the builtin's to report).
                if let Some(sum) = x.checked_add(*y) {
                    if dst.offset() == a.offset() {
                        // The register was matched as an int just above: this second match is
                        // the safe way to reach its payload, and the compiler folds it (no test
                        // is left in the machine code). Its `else` cannot happen; it is not a
                        // path to make faster with an unchecked write (review R-loop-2).
                        if let Value::Int(x) = fp.reg_mut(a) {
                            *x = sum;
                        }
                    } else {
                        set_scalar(fp.reg_mut(dst), Value::Int(sum));
                    }
                    return Ok(());
                }
            }
            self.int_slow(code, a, b, dst, fp, at)
        }
    }

    /// An int op that [`int_inline`] left to its builtin: calls it and writes its result.
    ///
    /// # Safety
    /// As for [`Self::int_into`].
    #[cold]
    #[inline(never)]
    unsafe fn int_slow<A: Operand, B: Operand, D: Operand>(
        &mut self,
        code: &DecodedProgram,
        a: A,
        b: B,
        dst: D,
        fp: Regs,
        at: At,
    ) -> Result<()> {
        let v = self.call_binary(self.int_fn(code, at), a.read(code, fp), b.read(code, fp), at)?;
        set_reg(dst.slot(fp), v);
        Ok(())
    }

    /// The builtin of the int op at `at`, which the op does not carry (an op is 16 bytes): the
    /// binary function of its instruction's callee, as `decode_op` found it (a cold path).
    #[cold]
    fn int_fn(&self, code: &DecodedProgram, at: At) -> BinaryFn {
        let Instruction::Call { func, .. } = self.exe.instrs()[at.pc()] else { unreachable!("an int op is a call") };
        match &code.callees[func as usize] {
            Callee::Packed(p) => p.as_binary().expect("an int op's callee is a binary function"),
            Callee::Bytecode { .. } => unreachable!("an int op calls a packed function"),
        }
    }

    /// Runs an [`Op::IntBranch`] at `at` (the int operation `op`, then the `if` after it on its
    /// result, as its own op would run it) and returns the next op.
    ///
    /// # Safety
    /// As for [`Self::int_into`], and the op at `at` is a fused op (the `if` after it holds the
    /// jump's target: [`DecodedProgram::fused_target`]).
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn int_branch<A: Operand, B: Operand, D: Operand>(
        &mut self,
        code: &DecodedProgram,
        op: IntOp,
        a: A,
        b: B,
        dst: D,
        fp: Regs,
        at: At,
    ) -> Result<*const Op> {
        let taken = match int_inline(code, op, a, b, fp) {
            Some(v) => {
                // The result is written on each side of the test, not before it: written
                // before, the two paths of the write (over a scalar or not) met again and the
                // result was compared a second time.
                if matches!(v, Value::Bool(true)) || matches!(v, Value::Int(i) if i != 0) {
                    set_scalar(dst.slot(fp), v);
                    return Ok(at.ip.add(2));
                }
                set_scalar(dst.slot(fp), v);
                false
            }
            None => self.int_branch_slow(code, a, b, dst, fp, at)?,
        };
        if taken {
            Ok(at.ip.add(2))
        } else {
            let next = at.ip.add(1);
            self.jump(at.ops, next, DecodedProgram::fused_target(next))
        }
    }

    /// [`Self::int_branch`] of [`IntOp::Lt`] on registers ([`Op::IntLtBranch`], a loop's
    /// test): the compare's outcome picks the branch, on each side of which the bool it makes
    /// is written as the constant it is there (no result to make into a value and test again).
    ///
    /// # Safety
    /// As for [`Self::int_branch`].
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(super) unsafe fn int_lt_branch(
        &mut self,
        code: &DecodedProgram,
        a: Reg,
        b: Reg,
        dst: Reg,
        fp: Regs,
        at: At,
    ) -> Result<*const Op> {
        // SAFETY: the caller's contract (the `if` after the op holds the target); the borrows
        // of the operands end before the destination is written.
        unsafe {
            match (fp.reg(a), fp.reg(b)) {
                // `IntOp::Lt` as `apply` defines it.
                (Value::Int(x), Value::Int(y)) => {
                    if x < y {
                        set_scalar(fp.reg_mut(dst), Value::Bool(true));
                        return Ok(at.ip.add(2));
                    }
                    set_scalar(fp.reg_mut(dst), Value::Bool(false));
                }
                _ => {
                    if self.int_branch_slow(code, a, b, dst, fp, at)? {
                        return Ok(at.ip.add(2));
                    }
                }
            }
            let next = at.ip.add(1);
            self.jump(at.ops, next, DecodedProgram::fused_target(next))
        }
    }

    /// An [`Op::IntBranch`] that [`int_inline`] left to its builtin: calls it, writes its result
    /// and tests it as the `if` after the op at `at` would.
    ///
    /// # Safety
    /// As for [`Self::int_into`].
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn int_branch_slow<A: Operand, B: Operand, D: Operand>(
        &mut self,
        code: &DecodedProgram,
        a: A,
        b: B,
        dst: D,
        fp: Regs,
        at: At,
    ) -> Result<bool> {
        let v = self.call_binary(self.int_fn(code, at), a.read(code, fp), b.read(code, fp), at)?;
        let taken = v.truthy().map_err(|e| self.locate(at.pc() + 1, e));
        set_reg(dst.slot(fp), v);
        taken
    }

    /// `a += imm` (an [`Op::IntAddJumpImm`]'s add, into its own operand): inline for an int
    /// `a` without overflow, else by the builtin.
    ///
    /// # Safety
    /// As for [`Self::int_into`].
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(super) unsafe fn int_add_imm(
        &mut self,
        code: &DecodedProgram,
        a: Reg,
        imm: i32,
        fp: Regs,
        at: At,
    ) -> Result<()> {
        let slot = fp.reg_mut(a);
        if let Value::Int(x) = slot {
            // `IntOp::Add` as `apply` defines it (checked: an overflow is the builtin's to
            // report), without its `Option<Value>`, whose drop the compiler would not elide.
            if let Some(sum) = x.checked_add(imm.into()) {
                // An int over an int, in place: no tag to write, nothing to drop.
                *x = sum;
                return Ok(());
            }
        }
        self.int_imm_slow(a, imm, fp, at, code)
    }

    /// An [`Op::IntAddJumpImm`] left to its builtin: calls it with the int `imm` as its second
    /// argument and writes the result.
    ///
    /// # Safety
    /// As for [`Self::int_into`].
    #[cold]
    #[inline(never)]
    unsafe fn int_imm_slow(&mut self, a: Reg, imm: i32, fp: Regs, at: At, code: &DecodedProgram) -> Result<()> {
        let v = self.call_binary(self.int_fn(code, at), a.read(code, fp), &Value::Int(imm.into()), at)?;
        set_reg(fp.reg_mut(a), v);
        Ok(())
    }

    /// Calls `f`, the binary function of the call at `at`, with `x` and `y`; a panic in it and
    /// its error are located there.
    #[inline]
    pub(super) fn call_binary(&self, f: BinaryFn, x: &Value, y: &Value, at: At) -> Result<Value> {
        // A panic is caught here, not in `PackedFunc::call`, which this path skips.
        let ret = catch_unwind(AssertUnwindSafe(|| f(x, y))).unwrap_or_else(|p| Err(self.panicked(at.pc(), p)));
        ret.map_err(|e| self.locate_at(at, e))
    }
}

/// The value operand `s` reads.
///
/// # Safety
/// `s` is an operand of a decoded op of the frame `fp` holds (a register below its
/// register-file size, or a constant `decode_op` made), as for [`Regs::get`].
#[inline(always)]
pub(super) unsafe fn src(code: &DecodedProgram, s: Src, fp: Regs) -> &Value {
    if s & CONST_BIT == 0 {
        fp.get(s)
    } else {
        code.constant(s & !CONST_BIT)
    }
}

/// An operand of an int op: any [`Src`], or a [`Reg`] (which reads with no constant test and
/// no shift). A destination is one too: a register index, or a [`Reg`].
pub(super) trait Operand: Copy {
    /// The value the operand reads.
    ///
    /// # Safety
    /// As for [`src`].
    unsafe fn read(self, code: &DecodedProgram, fp: Regs) -> &Value;

    /// The register the operand names, to write.
    ///
    /// # Safety
    /// The operand is a register (a destination) of a decoded op of the frame `fp` holds, as for
    /// [`Regs::get_mut`].
    unsafe fn slot<'a>(self, fp: Regs) -> &'a mut Value;
}

impl Operand for Src {
    #[inline(always)]
    unsafe fn read(self, code: &DecodedProgram, fp: Regs) -> &Value {
        // SAFETY: the caller's contract.
        unsafe { src(code, self, fp) }
    }

    #[inline(always)]
    unsafe fn slot<'a>(self, fp: Regs) -> &'a mut Value {
        // SAFETY: the caller's contract.
        unsafe { fp.get_mut(self) }
    }
}

impl Operand for Reg {
    #[inline(always)]
    unsafe fn read(self, _: &DecodedProgram, fp: Regs) -> &Value {
        // SAFETY: the caller's contract (a register operand of the running frame).
        unsafe { fp.reg(self) }
    }

    #[inline(always)]
    unsafe fn slot<'a>(self, fp: Regs) -> &'a mut Value {
        // SAFETY: the caller's contract (a register destination of the running frame).
        unsafe { fp.reg_mut(self) }
    }
}

/// The result of an int operation computed here, for two ints that it maps to an int or a bool;
/// `None` for anything else (bools, other types, overflow, division by zero), which the builtin
/// defines.
///
/// # Safety
/// `a` and `b` are operands of a decoded op of the frame `fp` holds (see [`src`]).
// Inlined into each of its three ops in optimised builds (the loop's hot path); not forced in
// debug builds, where three inlined copies would swell the loop's stack frame, which every
// re-entry into the VM nests.
#[cfg_attr(not(debug_assertions), inline(always))]
unsafe fn int_inline<A: Operand, B: Operand>(code: &DecodedProgram, op: IntOp, a: A, b: B, fp: Regs) -> Option<Value> {
    match (a.read(code, fp), b.read(code, fp)) {
        // The operations loops use most are tested first: a compare each instead of a jump
        // through a table (the arms are `apply` itself, specialised).
        (Value::Int(x), Value::Int(y)) => match op {
            IntOp::Add => IntOp::Add.apply(*x, *y),
            IntOp::Lt => IntOp::Lt.apply(*x, *y),
            IntOp::Sub => IntOp::Sub.apply(*x, *y),
            _ => op.apply(*x, *y),
        },
        _ => None,
    }
}
