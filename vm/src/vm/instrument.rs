//! The instrument hook: what it sees of each call, what it may ask, and how the interpreter
//! calls it — around packed calls directly, and around bytecode calls at their frame's entry
//! and `ret` (instrumented bytecode calls run on the heap frame stack like the others).

use super::{set_reg, VirtualMachine};
use crate::bytecode::Instruction;
use crate::code::{Callee, DecodedProgram, Op};
use crate::error::Result;
pub use crate::instrument::{Instrument, InstrumentAction, InstrumentCall};
use crate::packed::panic_error;
use crate::value::Value;
use smallvec::SmallVec;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// An instrumented bytecode call whose frame is running.
pub(super) struct InstrumentedFrame {
    /// The frame count while the callee's frame is on the stack.
    pub(super) depth: usize,
    /// The calling instruction.
    pub(super) pc: usize,
    pub(super) args: SmallVec<[Value; 8]>,
}

impl VirtualMachine {
    /// An instrumented bytecode call at `pc`: the hook runs before, the callee gets a frame
    /// like any other bytecode call (no native recursion), and `Ret` runs the hook after.
    /// Returns the base and pc to go on with: the callee's, or the next instruction's when the
    /// hook skips the call.
    #[cold]
    #[inline(never)]
    pub(super) fn instrumented_bytecode_call(
        &mut self,
        code: &DecodedProgram,
        pc: usize,
        base: usize,
    ) -> Result<(usize, usize)> {
        let Op::CallBytecode { site, dst } = code.ops[pc] else { unreachable!("a bytecode call") };
        let func = code.sites[site as usize].func;
        self.count_step().map_err(|e| self.locate(pc, e))?;
        let Some(args) = self.hook_before_call(code, pc, base)? else { return Ok((base, pc + 1)) };
        let Callee::Bytecode { start, .. } = code.callees[func as usize] else { unreachable!("decoded as bytecode") };
        let new_base = self.regs.len();
        super::reserve_regs(&mut self.regs, args.len()).map_err(|e| self.locate(pc, e))?;
        self.regs.extend(args.iter().cloned());
        // Pushed first, so that a failure to enter unwinds it (the hook hears of every call it
        // saw start).
        self.instrumented.push(InstrumentedFrame { depth: self.frames.len() + 1, pc, args });
        self.enter_frame(func, pc, dst, new_base).map_err(|e| self.locate(pc, e))?;
        Ok((new_base, start as usize))
    }

    /// The instrument hook after the innermost instrumented bytecode call returned `ret`.
    #[cold]
    #[inline(never)]
    pub(super) fn instrument_after(&mut self, ret: &Value) -> Result<()> {
        let frame = self.instrumented.pop().expect("checked by the caller");
        let (caller, at) = site_in(&self.exe, self.frames.last(), frame.pc);
        // The callee's frame is gone: the error is located at the caller's call.
        let call = Site { exe: &self.exe, code: &self.code, pc: frame.pc, caller, at };
        let after = call.hook_after(&mut self.instrument, &frame.args, Some(ret));
        after.map_err(|e| self.locate(frame.pc, e))
    }

    /// The instrument hook after each instrumented bytecode call whose frame an error unwinds
    /// (those above `depth` frames), innermost first, while their frames are still there.
    #[cold]
    #[inline(never)]
    pub(super) fn instrument_unwind(&mut self, depth: usize) {
        while self.instrumented.last().is_some_and(|f| f.depth > depth) {
            let frame = self.instrumented.pop().expect("checked above");
            // The caller's frame is the one below the callee's.
            let below = frame.depth.checked_sub(2).and_then(|i| self.frames.get(i));
            let (caller, at) = site_in(&self.exe, below, frame.pc);
            let call = Site { exe: &self.exe, code: &self.code, pc: frame.pc, caller, at };
            // The run's error is what the caller sees; the hook's own is dropped.
            let _ = call.hook_after(&mut self.instrument, &frame.args, None);
        }
    }

    /// The instrument hook before the call at `pc`: the call's arguments, for the hook after it
    /// (or, for a bytecode call, to run it with), or `None` when the hook skips the call, whose
    /// destination then receives null. The call itself is the loop's, the same as in a plain
    /// run (see `run_loop`).
    #[cold]
    #[inline(never)]
    pub(super) fn hook_before_call(
        &mut self,
        code: &DecodedProgram,
        pc: usize,
        base: usize,
    ) -> Result<Option<CallArgs>> {
        let Instruction::Call { func, .. } = self.exe.instrs()[pc] else { unreachable!("a call") };
        let args = self.load_args(code, pc, base);
        // The names are borrowed from the executable, a field apart from the hook's.
        let exe = &*self.exe;
        let (caller, at) = site_in(exe, self.frames.last(), pc);
        // A packed call's site, for the calls it makes through the VM; `hook_after_call` pops
        // it (a bytecode call's callee has its own frame).
        let packed = !matches!(code.ops[pc], Op::CallBytecode { .. });
        let Some(mut hook) = self.instrument.take() else {
            if packed {
                self.packed_sites.push(at);
            }
            return Ok(Some(args));
        };
        let call = InstrumentCall {
            func: &code.func_values[func as usize],
            name: &exe.funcs()[func as usize].name,
            before: true,
            args: &args,
            ret: None,
            caller,
            pc: at,
        };
        let before = call_hook(&mut hook, &call);
        self.instrument = Some(hook);
        if before.map_err(|e| self.locate(pc, e))? == InstrumentAction::Skip {
            if let Some(dst) = self.exe.instrs()[pc].writes() {
                set_reg(&mut self.regs[base + dst as usize], Value::Null);
            }
            return Ok(None);
        }
        if packed {
            self.packed_sites.push(at);
        }
        Ok(Some(args))
    }

    /// The instrument hook after the call at `pc`, made with `args` (what
    /// [`Self::hook_before_call`] returned), which returned `ret`: the call's result or error
    /// goes on, unless the hook fails after a call that succeeded.
    #[cold]
    #[inline(never)]
    pub(super) fn hook_after_call(
        &mut self,
        code: &DecodedProgram,
        pc: usize,
        args: Option<&[Value]>,
        ret: Result<Value>,
    ) -> Result<Value> {
        // Borrowed, not moved: the arguments stay in the loop's frame (a move of the inline
        // list is a copy of its whole buffer).
        let args = args.unwrap_or_default();
        self.packed_sites.pop();
        let (caller, at) = site_in(&self.exe, self.frames.last(), pc);
        let call = Site { exe: &self.exe, code, pc, caller, at };
        match ret {
            Ok(v) => {
                let after = call.hook_after(&mut self.instrument, args, Some(&v));
                after.map_err(|e| self.locate(pc, e))?;
                Ok(v)
            }
            Err(e) => {
                // The call's error is what the caller sees; the hook's own is dropped.
                let _ = call.hook_after(&mut self.instrument, args, None);
                Err(e)
            }
        }
    }
}

/// A call the hook is told about after it: the instruction at `pc`, made by `caller` at its
/// index `at`. Borrowed from the VM's fields apart from its hook, so the names the hook sees
/// are lent, not copied or reference-counted, at each call.
struct Site<'a> {
    exe: &'a crate::executable::Executable,
    code: &'a DecodedProgram,
    pc: usize,
    caller: &'a str,
    at: usize,
}

impl Site<'_> {
    /// Calls the hook, if one is still installed (a callback may have removed it), after the
    /// call with `args` returned `ret` (`None`: it raised).
    fn hook_after(&self, instrument: &mut Option<Instrument>, args: &[Value], ret: Option<&Value>) -> Result<()> {
        let Instruction::Call { func, .. } = self.exe.instrs()[self.pc] else { unreachable!("a call") };
        let Some(mut hook) = instrument.take() else { return Ok(()) };
        let call = InstrumentCall {
            func: &self.code.func_values[func as usize],
            name: &self.exe.funcs()[func as usize].name,
            before: false,
            args,
            ret,
            caller: self.caller,
            pc: self.at,
        };
        let after = call_hook(&mut hook, &call);
        *instrument = Some(hook);
        after.map(|_| ())
    }
}

/// The arguments of an instrumented call, cloned for the hook.
pub(super) type CallArgs = SmallVec<[Value; 8]>;

impl VirtualMachine {
    /// The site (index within its caller) of the innermost instrumented packed call in
    /// progress: where a call that a builtin makes through the VM is attributed.
    pub(super) fn packed_site(&self) -> usize {
        self.packed_sites.last().copied().unwrap_or(0)
    }
}

/// The name of `frame`'s function and the index within it of instruction `pc` (the whole
/// program's index and no name without a frame).
fn site_in<'e>(exe: &'e crate::executable::Executable, frame: Option<&super::Frame>, pc: usize) -> (&'e str, usize) {
    match frame {
        Some(frame) => {
            let f = &exe.funcs()[frame.func as usize];
            (&f.name, pc - f.start_instr as usize)
        }
        None => ("", pc),
    }
}

/// Calls the instrument hook; a panic in it becomes an error, and the hook stays installed.
pub(super) fn call_hook(hook: &mut Instrument, call: &InstrumentCall<'_>) -> Result<InstrumentAction> {
    catch_unwind(AssertUnwindSafe(|| hook(call))).unwrap_or_else(|p| Err(panic_error("instrument hook", p)))
}
