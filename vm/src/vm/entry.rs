//! Entry points: a bytecode function resolved once for repeated calls from outside the VM
//! (what `vm["main"]` keeps), so that each call skips what [`VirtualMachine::invoke_closure`]
//! works out again every time — that the value is a function, which table entry it is, whether
//! it has a signature, its arity and its frame size.

use super::limits::check_native_stack;
use super::{Frame, VirtualMachine};
use crate::code::{Callee, DecodedProgram, VOID};
use crate::error::{Error, Result};
use crate::value::Value;
use std::sync::Arc;

/// A bytecode function of one VM that takes its arguments as they are (no signature to check
/// them against, no captured values), resolved by [`VirtualMachine::entry`] for
/// [`VirtualMachine::call_entry`] and [`VirtualMachine::call_entry_with`].
#[derive(Clone)]
pub struct Entry {
    /// The decoded code of the VM that resolved it: a call through another VM is refused. Held
    /// (not only compared by address) so that no other VM's code can ever have its address.
    code: Arc<DecodedProgram>,
    index: u32,
    num_args: u32,
    /// The function's register-file size.
    regs: u32,
}

impl Entry {
    /// How many arguments the function takes.
    pub fn num_args(&self) -> usize {
        self.num_args as usize
    }
}

/// Truncates `regs` to `mark` when dropped.
struct Truncate<'a> {
    regs: &'a mut Vec<Value>,
    mark: usize,
}

impl Drop for Truncate<'_> {
    fn drop(&mut self) {
        self.regs.truncate(self.mark);
    }
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("index", &self.index)
            .field("num_args", &self.num_args)
            .field("regs", &self.regs)
            .finish_non_exhaustive()
    }
}

impl VirtualMachine {
    /// `f` resolved for [`call_entry`](Self::call_entry): `None` when calls of it need what
    /// [`invoke_closure`](Self::invoke_closure) does — it has a signature, captured values, or
    /// is a packed or saved function — or when it is not a function of this VM.
    pub fn entry(&self, f: &Value) -> Option<Entry> {
        let Value::Func(closure) = f else { return None };
        if !closure.captured.is_empty() {
            return None;
        }
        let index = self.bytecode_index(closure).ok()??;
        let info = &self.exe.funcs()[index as usize];
        let Callee::Bytecode { regs, .. } = self.code.callees[index as usize] else { return None };
        info.signature.is_none().then(|| Entry { code: Arc::clone(&self.code), index, num_args: info.num_args, regs })
    }

    /// Calls the function `e` resolved with `args`: what
    /// [`invoke_closure`](Self::invoke_closure) does for it, with the checks that depend only
    /// on the function done once by [`entry`](Self::entry). An entry of another VM is an
    /// [`ErrorKind::Value`](crate::ErrorKind::Value) error.
    #[inline]
    pub fn call_entry(&mut self, e: &Entry, args: &[Value]) -> Result<Value> {
        match self.call_entry_with(e, args.len(), |i| Some(args[i].clone()))? {
            Some(result) => Ok(result),
            // Not a plain call from outside (or one a limit refuses): the general entry, which
            // counts, checks and reports as usual.
            None => {
                if self.reentry == 0 {
                    self.start_counting();
                    self.release_kept_views();
                }
                self.run(e.index, args, &[])
            }
        }
    }

    /// [`call_entry`](Self::call_entry) with its `nargs` arguments made by `arg(0)`,
    /// `arg(1)`, ... in turn, straight into the new frame's registers (a caller converting
    /// them from another representation needs no list of them in between). Another VM's entry,
    /// a wrong `nargs` and too little native stack are errors before `arg` is asked.
    ///
    /// `Ok(None)` when the call is declined before any bytecode ran, the VM as it was: when
    /// `arg` gave `None` (the values it made before are dropped), or when the call is not a
    /// plain one from outside (a callback's, or one a limit would refuse), which needs the
    /// arguments as a list: the caller then makes them so and calls
    /// [`call_entry`](Self::call_entry).
    #[inline]
    pub fn call_entry_with(
        &mut self,
        e: &Entry,
        nargs: usize,
        mut arg: impl FnMut(usize) -> Option<Value>,
    ) -> Result<Option<Value>> {
        if !Arc::ptr_eq(&e.code, &self.code) {
            return Err(Error::value(format!(
                "call_entry: the entry of {:?} was resolved by another VirtualMachine (an entry is called through the VM that resolved it)",
                self.exe.funcs().get(e.index as usize).map_or("?", |f| f.name.as_str())
            )));
        }
        if nargs != e.num_args as usize {
            let info = &self.exe.funcs()[e.index as usize];
            return Err(Error::arity(&info.name, info.num_args.to_string(), nargs));
        }
        let mark = self.regs.len();
        let top = mark + e.regs as usize;
        if self.reentry != 0 || !self.frames.is_empty() || !self.fits_top_level(top) {
            return Ok(None);
        }
        check_native_stack()?;
        // What `run` and `enter_frame` do for the first frame, with the limits checked above.
        super::reserve_regs(&mut self.regs, e.regs as usize)?;
        super::reserve_frame(&mut self.frames)?;
        // Until every argument is made, the registers go back to `mark` on the way out, also
        // when `arg` panics (the next call would otherwise start above values no frame owns).
        let made = Truncate { regs: &mut self.regs, mark };
        for i in 0..nargs {
            match arg(i) {
                Some(v) => made.regs.push(v),
                None => return Ok(None),
            }
        }
        std::mem::forget(made);
        self.start_counting();
        self.release_kept_views();
        self.reentry = 1;
        // A plain loop: `resize_with` is an out-of-line call here.
        for _ in nargs..e.regs as usize {
            self.regs.push(Value::Null);
        }
        self.frames.push(Frame { func: e.index, base: mark, pc: 0, dst: VOID });
        let result = self.run_frames(0);
        self.reentry = 0;
        if result.is_err() {
            self.unwind(0, mark);
        }
        result.map(Some)
    }

    /// Whether a first frame reaching register `top` is within the limits (the rare cases —
    /// limits of zero, a frame larger than the register stack allows — take the general entry,
    /// which reports them).
    #[inline]
    fn fits_top_level(&self, top: usize) -> bool {
        top <= self.limits.max_stack_registers && self.limits.max_call_depth > 0 && self.limits.max_reentry > 0
    }
}
