//! Calls made by native code the VM runs: a VM TIR function of a TVM model compiled with
//! `exec_mode="compiled"` is machine code that calls builtins and closures through its
//! function table instead of through `call` instructions. Each such call goes through
//! [`VirtualMachine::native_call`], so that it is what a `call` instruction is to the VM: a
//! step (the step budget, `interrupt()`, Ctrl-C through the poll hook) and an event the
//! instrument hook — the profiler, the tracer — sees before and after.
//!
//! Kept apart from the interpreter loops: this path never runs inside them (the native code
//! was entered from a packed call, and calls back through [`crate::CallCtx::call_named`]).

use super::instrument::{call_hook, InstrumentCall};
use super::{InstrumentAction, VirtualMachine};
use crate::error::Result;
use crate::packed::CallCtx;
use crate::value::{Callable, Closure, Value};
use smallvec::SmallVec;
use std::sync::Arc;

impl VirtualMachine {
    /// Calls `f` (named `name`) for native code running in this VM's innermost frame, or for a
    /// builtin: the instrument hook sees it. The caller counts the step, if it is one.
    /// `site` is the call site's own cache, when native code keeps one per site;
    /// `from_native_code` says the call is compiled-mode machine code's (see [`Self::call_plain`]).
    pub(super) fn native_call(
        &mut self,
        name: &str,
        f: &Closure,
        args: &[Value],
        site: Option<&mut Value>,
        from_native_code: bool,
    ) -> Result<Value> {
        if self.instrument.is_none() {
            return self.call_plain(f, args, site, from_native_code);
        }
        // The caller is the bytecode function whose packed call entered the native code (a
        // compiled function's wrapper, whose one call is its instruction 0) or the builtin
        // making this call (a KV cache running its kernels): the call belongs to that packed
        // call's instruction.
        let caller = self.frames.last().map(|fr| self.exe.funcs()[fr.func as usize].name.clone()).unwrap_or_default();
        let pc = self.packed_site();
        let fval = Value::Func(Arc::new(f.clone()));
        let all: SmallVec<[Value; 8]> = args.iter().chain(&f.captured).cloned().collect();
        let before = InstrumentCall { func: &fval, name, before: true, args: &all, ret: None, caller: &caller, pc };
        if self.hook(&before)? == InstrumentAction::Skip {
            return Ok(Value::Null);
        }
        let result = self.call_plain(f, args, site, from_native_code);
        let after = |ret| InstrumentCall { func: &fval, name, before: false, args: &all, ret, caller: &caller, pc };
        match result {
            Ok(ret) => {
                let call = after(Some(&ret));
                self.hook(&call)?;
                Ok(ret)
            }
            Err(e) => {
                // The call's error is what the caller sees; the hook's own is dropped.
                let _ = self.hook(&after(None));
                Err(e)
            }
        }
    }

    /// Calls `f` without the hook: a packed function directly, a bytecode function on a frame.
    /// `from_native_code`: the call is compiled-mode machine code's
    /// ([`crate::packed::VmHandle::call_native_code_at`]), which its context says
    /// ([`CallCtx::from_native_site`]).
    fn call_plain(
        &mut self,
        f: &Closure,
        args: &[Value],
        site: Option<&mut Value>,
        from_native_code: bool,
    ) -> Result<Value> {
        match &f.callable {
            // Native code calls builtins, which capture nothing: their arguments go as they are.
            Callable::Packed(p) if f.captured.is_empty() => match site {
                Some(site) if from_native_code => p.call(&mut CallCtx::at_native_code_site(self, site), args),
                Some(site) => p.call(&mut CallCtx::at_site(self, site), args),
                None => p.call(&mut CallCtx::new(self), args),
            },
            Callable::Packed(p) => {
                let all: SmallVec<[Value; 8]> = args.iter().chain(&f.captured).cloned().collect();
                p.call(&mut CallCtx::new(self), &all)
            }
            Callable::Bytecode { .. } => crate::packed::VmHandle::call_closure(self, f, args),
        }
    }

    /// Runs the instrument hook, if one is still installed, on `call`.
    fn hook(&mut self, call: &InstrumentCall<'_>) -> Result<InstrumentAction> {
        let Some(mut hook) = self.instrument.take() else { return Ok(InstrumentAction::Continue) };
        let out = call_hook(&mut hook, call);
        self.instrument = Some(hook);
        out
    }
}
