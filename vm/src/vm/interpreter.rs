//! The interpreter loop: runs decoded ops (`crate::code`) frame by frame, with the helpers
//! its hot path inlines (register writes, borrowed argument lists; the int operations, jumps
//! and operand reads are `super::int_ops`).
//!
//! Register and op indices are read without bounds checks: the verifier proves every register
//! operand below its function's register-file size and every jump inside its function, no
//! function runs off its end, and `enter_frame` sizes each frame's registers to that size
//! before its first op runs. The helpers that rely on it are `unsafe fn`s whose contract is
//! "an operand of a decoded op of the running frame"; `run_loop` is where that holds.

use super::arg_list::ArgList;
use super::cursor::{prefetch_ahead, At, Ops, Regs};
use super::int_ops::{src, Operand};
use super::registers::{set_reg, truncate_regs};
use super::VirtualMachine;
use crate::bytecode::Instruction;
use crate::code::{BinarySite, CallSite, Callee, DecodedProgram, Op, SelectSite, VOID};
use crate::error::{Error, ErrorKind, Result};
use crate::int_op::IntOp;
use crate::packed::{panic_error, CallCtx};
use crate::value::{Selected, Value};
use smallvec::SmallVec;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

impl VirtualMachine {
    /// Runs frames until the one at `depth` returns. `INSTRUMENTED`: with the instrument hook
    /// around every call (one installed by a callback meanwhile takes effect at the next entry
    /// into the VM); without it, the loop has no instrumentation code at all.
    ///
    /// Both copies run each op with the same code: an instrumented call is the plain call (the
    /// same specialised function, site cache and inline int operations) with the hook before
    /// and after it, so a profiled or traced run executes what a plain run executes. The one
    /// difference: a fused op (an int operation and the `if` or `goto` after it) runs as its
    /// two ops, so that the hook sees the call end before the branch.
    ///
    /// # Safety
    /// `start` and `base` are the first op of the function of the frame on top of the frame
    /// stack, just entered (its registers sized by `enter_frame` or the entry), and that
    /// frame's first register: what `run_frames_at`'s callers know already.
    #[inline(never)]
    pub(super) unsafe fn run_loop<const INSTRUMENTED: bool>(
        &mut self,
        depth: usize,
        start: u32,
        base: usize,
    ) -> Result<Value> {
        // SAFETY: `self.code` is set once, in the constructor, and never replaced or mutated, so
        // the `DecodedProgram` it points to lives as long as `self`; packed functions reach the VM only
        // through `CallCtx`, which cannot replace it either. Borrowing it through the pointer
        // (instead of cloning the `Arc`) spares two atomic operations per invocation.
        let code: &DecodedProgram = unsafe { &*Arc::as_ptr(&self.code) };
        // The running op is a pointer (`ip`), not an index: the next op is one add away, and
        // its index (`pc`), which only errors, instruments and frames need, is computed from it.
        let ops = Ops(code.ops.as_ptr());
        // SAFETY: `start` is the first op of a function (the contract), inside `code.ops`.
        let mut ip = unsafe { ops.at(start as usize) };
        let mut base = base;
        let mut fp = self.frame_regs(base);
        // One argument list for the packed calls of this entry into the loop (its room on the
        // stack is taken once per re-entry, not once per arm).
        let mut list = ArgList::new();
        loop {
            // SAFETY: every index below comes from the decoded op at `ip` of the running frame,
            // whose registers start at `base`: `ip` points to an op the verifier lets run (see
            // `Ops::at`), the op's operands, callees and lists are what `decode_op` made of a
            // verified instruction, and `enter_frame` sized the frame to its function's register
            // file (the contracts of `Ops`, `callee`, `call_fn`, `arg_list`,
            // `ArgList::fill`, `Regs`, `src` and the int helpers). Frames pushed by calls and
            // re-entries only truncate the register stack back to their own base, above this
            // frame; `base`, `fp` and `ip` change together when a frame is entered or left, and
            // `fp` is taken afresh after every op that can grow the register stack (a packed
            // call, which may call back into the VM, or the instrument hook).
            unsafe {
                // The plain copy runs the ops that need no call out of the VM (register moves,
                // int operations, jumps) in a loop of their own, apart from the large arms of
                // calls, frames and hooks: its few live values (`ip`, `fp`) then keep registers
                // across its arms instead of being spilled as the calls' arms need. Any other
                // op leaves it for the `match` below, which comes back here after that op.
                if !INSTRUMENTED {
                    loop {
                        let at = At { ops, ip };
                        ip = match *ip {
                            Op::IntBinary { op, a, b, dst } => {
                                self.int_into(code, op, a, b, dst, fp, at)?;
                                ip.add(1)
                            }
                            Op::IntAdd { a, b, dst } => {
                                self.int_add(code, a, b, dst, fp, at)?;
                                ip.add(1)
                            }
                            Op::IntBranch { op, a, b, dst } => self.int_branch(code, op, a, b, dst, fp, at)?,
                            Op::IntLtBranch { a, b, dst } => self.int_lt_branch(code, a, b, dst, fp, at)?,
                            Op::IntJump { op, a, b, dst } => {
                                self.int_into(code, op, a, b, dst, fp, at)?;
                                self.jump_fused(ops, ip.add(1))?
                            }
                            Op::IntAddJump { a, b, dst } => {
                                self.int_add(code, a, b, dst, fp, at)?;
                                self.jump_fused(ops, ip.add(1))?
                            }
                            Op::IntAddJumpImm { a, imm, to } => {
                                self.int_add_imm(code, a, imm, fp, at)?;
                                self.jump_back(ops, ip.add(1), to)?
                            }
                            Op::Move { a, dst } => {
                                prefetch_ahead(ip);
                                let v = fp.reg(a);
                                // The destination often holds this very value already (a copy
                                // in a loop): then there is nothing to do, not even reference
                                // counting.
                                if !v.same_object(fp.reg(dst)) {
                                    let v = v.clone();
                                    set_reg(fp.reg_mut(dst), v);
                                }
                                ip.add(1)
                            }
                            Op::Goto { target } => self.jump(ops, ip, target)?,
                            Op::If { cond, false_target } => self.branch_if(ops, ip, cond, false_target, fp)?,
                            _ => break,
                        };
                    }
                }
                // Where the op is, for errors: its index is computed only when one is made.
                let at = At { ops, ip };
                // The instrument hook before the call at `at`: the call's arguments for the
                // hook after it, or, when the hook skips the call, null to its destination and
                // on to the next op. Nothing in the plain copy.
                macro_rules! hook_before {
                    () => {
                        if INSTRUMENTED {
                            let before = self.hook_before_call(code, at.pc(), base);
                            fp = self.frame_regs(base);
                            match before? {
                                Some(args) => Some(args),
                                None => {
                                    ip = ip.add(1);
                                    continue;
                                }
                            }
                        } else {
                            None
                        }
                    };
                }
                // The hook after the call: `$ret` is what the call returned; the hook sees it
                // (or that the call failed), and the call's result goes on unchanged.
                // In the plain copy the arguments are always `None` (`hook_before!` makes them
                // only when `INSTRUMENTED`, a constant of this copy): forgotten, not dropped, as
                // the test of a drop that never runs cost every call three instructions. Were
                // they ever `Some` here, the values would leak (never be freed), not be misused;
                // debug builds (every `cargo test`) assert it.
                macro_rules! hook_after {
                    ($args:expr, $ret:expr) => {
                        if INSTRUMENTED {
                            let ret = self.hook_after_call(code, at.pc(), $args.as_deref(), $ret);
                            fp = self.frame_regs(base);
                            ret
                        } else {
                            debug_assert!($args.is_none());
                            std::mem::forget($args);
                            $ret
                        }
                    };
                }
                // An int operation (`$run` writes its result to `$dst`), with the hook around it
                // when instrumented (the hook sees the result written). The arms then go on:
                // instrumented, always to the next op (a fused branch's `if` or `goto` runs as
                // its own op).
                // (The plain copy has no hook code at all here: an unused `None` of arguments
                // cost each int op three instructions, a store and a test of its drop.)
                macro_rules! int_op {
                    ($dst:expr, $run:expr) => {{
                        let args = hook_before!();
                        let ret = $run.map(|()| $dst.slot(fp).clone());
                        hook_after!(args, ret).map(drop)?;
                    }};
                }
                match *ip {
                    // The plain copy ran these in its loop above (never here: it leaves that
                    // loop only for the other ops); the instrumented copy runs each as its plain
                    // form with the hook around it, a fused op as its two ops.
                    Op::IntBinary { .. }
                    | Op::IntAdd { .. }
                    | Op::IntBranch { .. }
                    | Op::IntLtBranch { .. }
                    | Op::IntJump { .. }
                    | Op::IntAddJump { .. }
                    | Op::IntAddJumpImm { .. }
                    | Op::Move { .. }
                    | Op::Goto { .. }
                    | Op::If { .. }
                        if !INSTRUMENTED =>
                    {
                        continue
                    }
                    Op::IntBinary { op, a, b, dst }
                    | Op::IntBranch { op, a, b, dst }
                    | Op::IntJump { op, a, b, dst } => {
                        int_op!(dst, self.int_into(code, op, a, b, dst, fp, at));
                        ip = ip.add(1);
                    }
                    Op::IntAdd { a, b, dst } | Op::IntAddJump { a, b, dst } => {
                        int_op!(dst, self.int_add(code, a, b, dst, fp, at));
                        ip = ip.add(1);
                    }
                    Op::IntLtBranch { a, b, dst } => {
                        int_op!(dst, self.int_into(code, IntOp::Lt, a, b, dst, fp, at));
                        ip = ip.add(1);
                    }
                    Op::IntAddJumpImm { a, imm, .. } => {
                        int_op!(a, self.int_add_imm(code, a, imm, fp, at));
                        ip = ip.add(1);
                    }
                    Op::CallBinary { site } => {
                        prefetch_ahead(ip);
                        let args = hook_before!();
                        let BinarySite { f, a, b, dst } = *code.binary_site(site);
                        let ret = self.call_binary(f, src(code, a, fp), src(code, b, fp), at);
                        let ret = hook_after!(args, ret)?;
                        if dst != VOID {
                            set_reg(fp.get_mut(dst), ret);
                        }
                        ip = ip.add(1);
                    }
                    Op::CallPacked { site, dst } => {
                        prefetch_ahead(ip);
                        let hooked = hook_before!();
                        let CallSite { func, args, nargs, patches, npatches } = *code.site(site);
                        let f = code.call_fn(func);
                        // Borrowed copies of the arguments, on the stack: no allocation and no
                        // reference-count traffic per call.
                        let argv = list.fill(code, (args, nargs, patches, npatches), |r| fp.get(r));
                        let ret = f.call(&mut CallCtx::calling(self, func), argv).map_err(|e| self.locate_at(at, e));
                        // A call back into the VM may have grown (moved) the register stack.
                        fp = self.frame_regs(base);
                        let ret = hook_after!(hooked, ret)?;
                        if dst != VOID {
                            set_reg(fp.get_mut(dst), ret);
                        }
                        ip = ip.add(1);
                    }
                    Op::CallSelect1 { site, a, dst } => {
                        prefetch_ahead(ip);
                        let hooked = hook_before!();
                        // The one argument is passed in place: no argument list to build.
                        let SelectSite { f, func } = *code.select_site(site);
                        let p = code.call_fn(func);
                        let arg = std::slice::from_ref(fp.reg(a));
                        let picked = match catch_unwind(AssertUnwindSafe(|| f(p.name(), arg))) {
                            Ok(r) => r,
                            Err(payload) => Err(panic_error(p.name(), payload)),
                        };
                        if INSTRUMENTED {
                            // The hook is given the result (a clone: the hook may keep it).
                            let ret = picked.map(Selected::to_value).map_err(|e| self.locate_at(at, e));
                            let ret = hook_after!(hooked, ret)?;
                            set_reg(fp.reg_mut(dst), ret);
                        } else {
                            // `None` here (see `hook_after`): forgotten, not dropped.
                            std::mem::forget(hooked);
                            // `dst` is a register: a select without one is decoded as `CallSelect`.
                            match picked {
                                Ok(v) if v.is_held_by(fp.reg(dst)) => {}
                                Ok(v) => {
                                    let v = v.to_value();
                                    set_reg(fp.reg_mut(dst), v);
                                }
                                Err(e) => return Err(self.locate_at(at, e)),
                            }
                        }
                        ip = ip.add(1);
                    }
                    Op::Move { a, dst } => {
                        prefetch_ahead(ip);
                        // The hook sees the call, and is given its result (a clone: the hook may
                        // keep it).
                        let hooked = hook_before!();
                        let ret = hook_after!(hooked, Ok(fp.reg(a).clone()))?;
                        set_reg(fp.reg_mut(dst), ret);
                        ip = ip.add(1);
                    }
                    Op::CallSelect { site, dst } => {
                        prefetch_ahead(ip);
                        let hooked = hook_before!();
                        let CallSite { func, args, nargs, patches, npatches } = *code.site(site);
                        let p = code.call_fn(func);
                        let select = p.as_select().expect("decoded as select");
                        let argv = list.fill(code, (args, nargs, patches, npatches), |r| fp.get(r));
                        let picked = catch_unwind(AssertUnwindSafe(|| select(p.name(), argv)));
                        let picked = picked.unwrap_or_else(|payload| Err(panic_error(p.name(), payload)));
                        if INSTRUMENTED {
                            let ret = picked.map(Selected::to_value).map_err(|e| self.locate_at(at, e));
                            let ret = hook_after!(hooked, ret)?;
                            if dst != VOID {
                                set_reg(fp.get_mut(dst), ret);
                            }
                        } else {
                            std::mem::forget(hooked); // `None` (see `hook_after`)
                            let picked = picked.map(|v| {
                                // A result the destination already holds needs no write (and no
                                // reference-count traffic); anything else is cloned out of the
                                // borrow.
                                (dst != VOID && !v.is_held_by(fp.get(dst))).then(|| v.to_value())
                            });
                            if let Some(v) = picked.map_err(|e| self.locate_at(at, e))? {
                                set_reg(fp.get_mut(dst), v);
                            }
                        }
                        ip = ip.add(1);
                    }
                    Op::CallBytecode { site, dst } => {
                        if INSTRUMENTED {
                            // The hook runs before; `Ret` runs it after (the callee's frame is on
                            // the frame stack like any other, no native recursion).
                            let next;
                            (base, next) = self.instrumented_bytecode_call(code, at.pc(), base)?;
                            ip = ops.at(next);
                            fp = self.frame_regs(base);
                            continue;
                        }
                        self.count_step().map_err(|e| self.locate_at(at, e))?;
                        let CallSite { func, args, nargs, .. } = *code.site(site);
                        let Callee::Bytecode { start, .. } = *code.callee(func) else {
                            unreachable!("decoded as bytecode")
                        };
                        // The arguments go straight into the callee's registers: no allocation once
                        // the register stack has grown to the program's depth.
                        let new_base = self.regs.len();
                        // Room first: a push that moved the stack would leave `fp` dangling.
                        super::reserve_regs(&mut self.regs, nargs as usize).map_err(|e| self.locate_at(at, e))?;
                        let caller = self.frame_regs(base);
                        for &s in code.arg_list(args, nargs) {
                            let v = src(code, s, caller).clone();
                            self.regs.push(v);
                        }
                        self.enter_frame(func, at.pc(), dst, new_base).map_err(|e| self.locate_at(at, e))?;
                        base = new_base;
                        fp = self.frame_regs(base);
                        ip = ops.at(start as usize);
                    }
                    Op::Ret { result } => {
                        let value = std::mem::take(fp.get_mut(result));
                        let returning = self.frames.len();
                        let done = self.frames.pop().expect("a frame is running");
                        truncate_regs(&mut self.regs, done.base);
                        if INSTRUMENTED && self.instrumented.last().is_some_and(|f| f.depth == returning) {
                            self.instrument_after(&value)?;
                        }
                        if self.frames.len() == depth {
                            return Ok(value);
                        }
                        let caller = *self.frames.last().expect("a caller frame");
                        base = caller.base;
                        fp = self.frame_regs(base);
                        ip = ops.at(caller.pc + 1);
                        if caller.dst != VOID {
                            set_reg(fp.get_mut(caller.dst), value);
                        }
                    }
                    Op::Goto { target } => ip = self.jump(ops, ip, target)?,
                    Op::If { cond, false_target } => ip = self.branch_if(ops, ip, cond, false_target, fp)?,
                }
            }
        }
    }

    /// The arguments of the call at `pc`, cloned (for instruments; read with bounds checks, as
    /// this path is cold).
    pub(super) fn load_args(&self, code: &DecodedProgram, pc: usize, base: usize) -> SmallVec<[Value; 8]> {
        let nargs = match &self.exe.instrs()[pc] {
            Instruction::Call { args, .. } => args.len(),
            Instruction::Ret { .. } | Instruction::Goto { .. } | Instruction::If { .. } => 0,
        };
        code.call_args(&code.ops[pc], nargs, |r| self.regs[base + r as usize].clone())
    }

    /// The registers of the frame whose first register is `base` (at most the stack's length),
    /// valid until the register stack next grows or shrinks.
    #[inline(always)]
    fn frame_regs(&mut self, base: usize) -> Regs {
        Regs::of(&mut self.regs, base)
    }

    /// The error for a panic in the packed function that instruction `pc` calls.
    #[cold]
    pub(super) fn panicked(&self, pc: usize, payload: Box<dyn std::any::Any + Send>) -> Error {
        let Instruction::Call { func, .. } = self.exe.instrs()[pc] else { unreachable!("a call") };
        panic_error(&self.exe.funcs()[func as usize].name, payload)
    }

    /// [`Self::locate`] at the op `at` (whose index is computed here, off the hot path).
    #[cold]
    #[inline(never)]
    pub(super) fn locate_at(&self, at: At, e: Error) -> Error {
        self.locate(at.pc(), e)
    }

    /// Adds the function, instruction and location to an error (once: the innermost wins).
    #[cold]
    pub(super) fn locate(&self, pc: usize, e: Error) -> Error {
        if matches!(e.kind(), ErrorKind::At { .. }) {
            return e;
        }
        let func = &self.exe.funcs()[self.frames.last().expect("a frame is running").func as usize];
        ErrorKind::At {
            func: func.name.clone(),
            pc: pc - func.start_instr as usize,
            instr: self.exe.instr_text(pc),
            location: self.exe.location(pc).map(|l| l.to_string()),
            source: e,
        }
        .into()
    }
}
