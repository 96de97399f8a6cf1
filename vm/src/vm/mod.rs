//! The virtual machine: runs an executable's bytecode functions.
//!
//! Bytecode-to-bytecode calls push a frame on a heap-allocated stack and jump; they do not
//! recurse on the native stack. The native stack grows only when a packed function re-enters
//! the VM (e.g. `vm.builtin.invoke_closure`), and that nesting is bounded separately.

use crate::allocator::Allocator;
use crate::code::{Callee, DecodedProgram, VOID};
use crate::device::Device;
use crate::error::{Error, ErrorKind, Result};
use crate::executable::{Executable, FuncKind};
use crate::packed::{CallCtx, PackedFunc, VmHandle};
use crate::registry::Registry;
use crate::types::Signature;
use crate::value::{Callable, Closure, Value};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::Arc;

mod arg_list;
mod cursor;
mod deprecated_config;
mod entry;
mod instrument;
mod int_ops;
mod interpreter;
mod limits;
mod native_calls;
mod recording;
mod registers;
#[allow(deprecated)]
pub use deprecated_config::{ConfigMut, VmConfig};
pub use entry::{CallingThread, Entry};
use instrument::InstrumentedFrame;
pub use instrument::{Instrument, InstrumentAction, InstrumentCall};
pub use limits::{check_native_stack, InterruptHandle, Limits, PollHook, MIN_NATIVE_STACK, POLL_INTERVAL};
use registers::set_reg;

#[derive(Clone, Copy)]
struct Frame {
    func: u32,
    base: usize,
    /// The caller's `call` instruction, where execution resumes (+1) on return.
    pc: usize,
    /// The caller's destination register for this frame's result.
    dst: u32,
}

/// A virtual machine bound to one executable.
pub struct VirtualMachine {
    exe: Arc<Executable>,
    code: Arc<DecodedProgram>,
    device: Device,
    limits: Limits,
    /// Whether [`VirtualMachine::profile`] may run ([`VirtualMachine::set_profiling_enabled`]).
    profiling: bool,
    frames: Vec<Frame>,
    regs: Vec<Value>,
    reentry: usize,
    /// The native-stack limit of the thread that last called through an entry.
    stack_limit: entry::StackLimit,
    /// What a plain call through an entry may skip, worked out from the limits at the first
    /// such call after they changed (see `entry::EntryLimits`).
    entry_limits: entry::EntryLimits,
    /// Steps the budget allows beyond those issued as fuel.
    steps_left: u64,
    /// Steps until the next check (see `count_step`), and how many were issued at the last.
    fuel: u32,
    issued: u32,
    interrupt: InterruptHandle,
    instrument: Option<Instrument>,
    /// Instrumented bytecode calls in progress, innermost last: their "after" hook runs when
    /// the frame at `depth` returns (they run on the frame stack, not nested natively).
    instrumented: Vec<InstrumentedFrame>,
    /// The sites (index within the caller) of the instrumented packed calls in progress,
    /// innermost last: a call a builtin makes through the VM ([`CallCtx::call_named`]) is
    /// attributed to the instruction of the builtin that made it.
    packed_sites: Vec<usize>,
    poll: Option<PollHook>,
    /// Per entry of [`DecodedProgram::call_fns`], what its calls keep between calls
    /// ([`CallCtx::site_cache`]).
    site_caches: Vec<Value>,
    /// Whether allocating builtins reuse their sites' blocks ([`Allocator`]).
    allocator: Allocator,
    saved: HashMap<String, Value>,
    /// What native code the VM runs keeps per VM ([`VmHandle::program_lists`]): a compiled
    /// model's constant and function lists.
    native_state: Value,
    inputs: HashMap<String, Vec<Value>>,
    outputs: HashMap<String, Value>,
}

impl VirtualMachine {
    /// A VM whose packed functions come from the process-wide registry.
    pub fn new(exe: Arc<Executable>) -> Result<Self> {
        VirtualMachine::with_overrides(exe, &Registry::new())
    }

    /// A VM that looks packed functions up in `overrides` first, then in the process-wide
    /// registry. Every name that neither provides is reported in one error.
    pub fn with_overrides(exe: Arc<Executable>, overrides: &Registry) -> Result<Self> {
        let code = Arc::new(DecodedProgram::decode(&exe, overrides)?);
        let site_caches = vec![Value::Null; code.call_fns.len()];
        Ok(VirtualMachine {
            exe,
            code,
            device: Device::cpu(0),
            limits: Limits::default(),
            profiling: false,
            frames: Vec::new(),
            regs: Vec::new(),
            reentry: 0,
            stack_limit: entry::StackLimit::default(),
            entry_limits: entry::EntryLimits::default(),
            steps_left: u64::MAX,
            fuel: POLL_INTERVAL,
            issued: POLL_INTERVAL,
            interrupt: InterruptHandle::default(),
            instrument: None,
            instrumented: Vec::new(),
            packed_sites: Vec::new(),
            poll: None,
            site_caches,
            allocator: Allocator::default(),
            saved: HashMap::new(),
            native_state: Value::Null,
            inputs: HashMap::new(),
            outputs: HashMap::new(),
        })
    }

    /// The executable this VM runs.
    pub fn executable(&self) -> &Arc<Executable> {
        &self.exe
    }

    /// The default device builtins allocate on.
    pub fn set_device(&mut self, device: Device) {
        self.device = device;
    }

    /// Chooses how allocating builtins get their memory (TVM's `memory_cfg`; [`Allocator`],
    /// pooled unless set). Switching to [`Allocator::Naive`] drops what the sites kept.
    pub fn set_allocator(&mut self, allocator: Allocator) {
        self.allocator = allocator;
        if allocator == Allocator::Naive {
            self.drop_pooled();
        }
    }

    /// Drops the storages and tensor headers the allocation sites keep.
    fn drop_pooled(&mut self) {
        for c in &mut self.site_caches {
            if matches!(c, Value::Storage(_) | Value::Tensor(_)) {
                *c = Value::Null;
            }
        }
        // Native code's call sites keep their caches in its state (a compiled model's lists),
        // which is made again at its next use.
        self.native_state = Value::Null;
    }

    /// The allocator chosen by [`set_allocator`](Self::set_allocator).
    pub fn allocator(&self) -> Allocator {
        self.allocator
    }

    /// A handle that interrupts this VM from another thread.
    pub fn interrupt_handle(&self) -> InterruptHandle {
        self.interrupt.clone()
    }

    /// Installs (or with `None` removes) the hook called every [`POLL_INTERVAL`] steps.
    pub fn set_poll_hook(&mut self, hook: Option<PollHook>) {
        self.poll = hook;
    }

    /// Installs (or with `None` removes) the hook called before and after every `call`.
    pub fn set_instrument(&mut self, instrument: Option<Instrument>) {
        self.instrument = instrument;
    }

    /// The function named `name` (a bytecode function or a saved function) as a value.
    pub fn get_function(&self, name: &str) -> Result<Value> {
        if let Some(v) = self.saved.get(name) {
            return Ok(v.clone());
        }
        match self.exe.func_index(name) {
            Some(i) if self.exe.funcs()[i as usize].kind == FuncKind::Bytecode => {
                Ok(self.code.func_values[i as usize].clone())
            }
            _ => Err(ErrorKind::UnknownFunction(name.to_string()).into()),
        }
    }

    /// Calls the function named `name` (bytecode or saved) with `args`. When the function has a
    /// signature the arguments are checked and converted first; see
    /// [`invoke_closure`](Self::invoke_closure).
    pub fn invoke(&mut self, name: &str, args: &[Value]) -> Result<Value> {
        let f = self.get_function(name)?;
        self.invoke_closure(&f, args)
    }

    /// Calls a function value with `args` followed by its captured values.
    ///
    /// When it is a bytecode function with a [`Signature`], the arguments (with the captured
    /// values) are checked and converted by [`Signature::prepare_args`] before any instruction
    /// runs: a wrong type or dtype is an [`ErrorKind::Type`], a wrong count an
    /// [`ErrorKind::Arity`], a wrong rank, dimension or symbolic dimension an
    /// [`ErrorKind::Value`]; each names the parameter, what was expected and what was given,
    /// and none is wrapped in [`ErrorKind::At`]. Its result is checked and converted likewise
    /// by [`Signature::prepare_result`] (the errors name `result of <function>`).
    pub fn invoke_closure(&mut self, f: &Value, args: &[Value]) -> Result<Value> {
        let closure = f.as_func()?;
        if self.reentry == 0 {
            self.start_counting();
        }
        let Some(index) = self.bytecode_index(closure)? else { return self.call_closure(closure, args) };
        // One look at the function's entry serves both checks.
        let info = &self.exe.funcs()[index as usize];
        if info.signature.is_some() {
            let exe = Arc::clone(&self.exe);
            let info = &exe.funcs()[index as usize];
            let sig = info.signature.as_ref().expect("checked above");
            let all: SmallVec<[Value; 8]> = args.iter().chain(&closure.captured).cloned().collect();
            let prepared = sig.prepare_args(&info.name, &all)?;
            let result = self.run(index, &prepared, &[])?;
            return sig.prepare_result(&info.name, result);
        }
        let got = args.len() + closure.captured.len();
        if info.num_args as usize != got {
            return Err(Error::arity(&info.name, info.num_args.to_string(), got));
        }
        self.run(index, args, &closure.captured)
    }

    /// The signature of the function named `name` (a bytecode or saved function, as
    /// [`get_function`](Self::get_function) finds it): `None` when it has none (saved functions
    /// have none); an [`ErrorKind::UnknownFunction`] when there is no such function.
    pub fn signature(&self, name: &str) -> Result<Option<&Signature>> {
        if self.saved.contains_key(name) {
            return Ok(None);
        }
        match self.exe.func(name) {
            Some(f) if f.kind == FuncKind::Bytecode => Ok(f.signature.as_ref()),
            _ => Err(ErrorKind::UnknownFunction(name.to_string()).into()),
        }
    }

    /// The name and signature of the bytecode function `c` calls, when it has a signature.
    fn closure_signature<'e>(&self, exe: &'e Executable, c: &Closure) -> Result<Option<(&'e str, &'e Signature)>> {
        let Some(index) = self.bytecode_index(c)? else { return Ok(None) };
        let f = &exe.funcs()[index as usize];
        Ok(f.signature.as_ref().map(|s| (f.name.as_str(), s)))
    }

    /// Saves `func` with `args` bound under `saved_name`, callable with no arguments; with
    /// `include_return` false the saved function returns null. `func` may be a function saved
    /// before: its saved arguments follow `args` (as TVM binds the last arguments of a saved
    /// closure), and the count and signature are checked against all of them.
    pub fn save_function(
        &mut self,
        func: &str,
        saved_name: &str,
        args: Vec<Value>,
        include_return: bool,
    ) -> Result<()> {
        let target = self.get_function(func)?;
        let bound = &target.as_func()?.captured;
        let check = self.bytecode_index(target.as_func()?)?;
        self.check_arity(check, args.len() + bound.len())?;
        let exe = Arc::clone(&self.exe);
        let args = match self.closure_signature(&exe, target.as_func()?)? {
            Some((name, sig)) => {
                // The whole list is checked (the saved arguments were prepared when saved);
                // the new ones are kept.
                let n = args.len();
                let all: Vec<Value> = args.into_iter().chain(bound.iter().cloned()).collect();
                let mut prepared = sig.prepare_args(name, &all)?;
                prepared.truncate(n);
                prepared
            }
            None => args,
        };
        let saved = if include_return {
            let c = target.as_func()?;
            Closure {
                callable: c.callable.clone(),
                captured: args.into_iter().chain(c.captured.iter().cloned()).collect(),
            }
        } else {
            let call = PackedFunc::new(saved_name, move |ctx, a| ctx.call(&target, a).map(|_| Value::Null));
            Closure { callable: Callable::Packed(call), captured: args }
        };
        self.saved.insert(saved_name.to_string(), Value::Func(Arc::new(saved)));
        Ok(())
    }

    /// Sets the inputs of a later [`invoke_stateful`](Self::invoke_stateful).
    pub fn set_input(&mut self, name: &str, args: Vec<Value>) -> Result<()> {
        let f = self.get_function(name)?;
        let index = self.bytecode_index(f.as_func()?)?;
        self.check_arity(index, args.len())?;
        self.inputs.insert(name.to_string(), args);
        Ok(())
    }

    /// Runs `name` on the inputs given to [`set_input`](Self::set_input), keeping its result.
    pub fn invoke_stateful(&mut self, name: &str) -> Result<()> {
        let args = self
            .inputs
            .get(name)
            .cloned()
            .ok_or_else(|| Error::value(format!("no inputs were set for {name:?}: call set_input first")))?;
        let out = self.invoke(name, &args)?;
        self.outputs.insert(name.to_string(), out);
        Ok(())
    }

    /// The result of the last [`invoke_stateful`](Self::invoke_stateful) of `name`.
    pub fn get_outputs(&self, name: &str) -> Result<Value> {
        self.outputs
            .get(name)
            .cloned()
            .ok_or_else(|| Error::value(format!("no outputs for {name:?}: call invoke_stateful first")))
    }

    // Inline: a call's entry checks this first, and the usual answer is one pointer comparison.
    #[inline]
    fn bytecode_index(&self, c: &Closure) -> Result<Option<u32>> {
        match &c.callable {
            Callable::Packed(_) => Ok(None),
            Callable::Bytecode { index, name, program } => {
                // A function value this VM made (or a closure of one) shares its name with
                // the table entry: a pointer comparison then stands for the string comparison.
                if self
                    .code
                    .names
                    .get(*index as usize)
                    .is_some_and(|n| n.as_ref().is_some_and(|n| Arc::ptr_eq(n, name)))
                {
                    return Ok(Some(*index));
                }
                // Another VM's value: only a VM of the same executable runs it (by index).
                if let Some(p) = program {
                    if p.as_ptr() as *const u8 != Arc::as_ptr(&self.exe) as *const u8 {
                        return Err(Error::value(format!(
                            "function {name:?} is a closure of another executable: call it with the VM that made it"
                        )));
                    }
                }
                let same = self
                    .exe
                    .funcs()
                    .get(*index as usize)
                    .is_some_and(|f| *f.name == **name && f.kind == FuncKind::Bytecode);
                let found = if same {
                    Some(*index)
                } else {
                    self.exe.func_index(name).filter(|i| self.exe.funcs()[*i as usize].kind == FuncKind::Bytecode)
                };
                found.map(Some).ok_or_else(|| ErrorKind::UnknownFunction(name.to_string()).into())
            }
        }
    }

    fn check_arity(&self, index: Option<u32>, got: usize) -> Result<()> {
        if let Some(i) = index {
            let f = &self.exe.funcs()[i as usize];
            if f.num_args as usize != got {
                return Err(Error::arity(&f.name, f.num_args.to_string(), got));
            }
        }
        Ok(())
    }

    /// Runs bytecode function `func` with `args` to completion, unwinding on error.
    fn run(&mut self, func: u32, args: &[Value], captured: &[Value]) -> Result<Value> {
        if self.reentry >= self.limits.max_reentry {
            return Err(ErrorKind::StackOverflow(self.limits.max_reentry).into());
        }
        // Every entry into the interpreter — the first, and each call back from a packed
        // function — measures the native stack left.
        limits::check_native_stack()?;
        if self.reentry > 0 {
            // A call back into the VM from a packed function is a bytecode call, and counts as one.
            self.count_step()?;
        }
        let depth = self.frames.len();
        let mark = self.regs.len();
        self.reentry += 1;
        // Pushed one by one: `extend_from_slice`'s general path cost more than the clones.
        if let Err(e) = reserve_regs(&mut self.regs, args.len() + captured.len()) {
            self.reentry -= 1;
            return Err(e);
        }
        for v in args {
            self.regs.push(v.clone());
        }
        for v in captured {
            self.regs.push(v.clone());
        }
        let result = self.enter_frame(func, usize::MAX, VOID, mark).and_then(|()| self.run_frames(depth));
        self.reentry -= 1;
        if result.is_err() {
            self.unwind(depth, mark);
        }
        result
    }

    /// Drops what a run that failed left above frame `depth` and register `mark`, telling the
    /// instrument of the calls it saw start.
    fn unwind(&mut self, depth: usize, mark: usize) {
        if !self.instrumented.is_empty() {
            self.instrument_unwind(depth);
        }
        self.frames.truncate(depth);
        self.regs.truncate(mark);
    }

    /// Runs frames until the one at `depth` returns, from the start of the function of the
    /// frame on top (just entered): [`run_frames_at`](Self::run_frames_at) with its first op
    /// and registers looked up.
    fn run_frames(&mut self, depth: usize) -> Result<Value> {
        let top = *self.frames.last().expect("a frame was pushed");
        let Callee::Bytecode { start, .. } = self.code.callees[top.func as usize] else {
            unreachable!("frames run bytecode functions")
        };
        // SAFETY: `start` is the first op of the top frame's function, `top.base` its first
        // register, and every caller has just entered that frame (`run`, after `enter_frame`).
        unsafe { self.run_frames_at(depth, start, top.base) }
    }

    /// Runs frames until the one at `depth` returns, starting at op `start` (the first op of
    /// the function of the frame on top, just entered) with that frame's registers at `base`:
    /// the loop without instrumentation code or, when an instrument is installed, the loop
    /// with it.
    ///
    /// Two copies of the loop: the plain one has no instrumentation code at all, so what the
    /// instrumented one does cannot cost the plain one registers or layout. Never inlined, so
    /// that each copy is compiled once, here: an entry point built in another crate
    /// (`call_entry_with`, generic, instantiated in the Python glue) would otherwise make that
    /// crate compile a copy of its own, with a code layout of its own (the loop's speed depends
    /// on its layout).
    ///
    /// # Safety
    /// As for `run_loop`: `start` is the first op of the function of the frame on top, just
    /// entered, and `base` that frame's first register.
    #[inline(never)]
    unsafe fn run_frames_at(&mut self, depth: usize, start: u32, base: usize) -> Result<Value> {
        debug_assert!(self.frames.last().is_some_and(|f| f.base == base
            && matches!(self.code.callees[f.func as usize], Callee::Bytecode { start: s, .. } if s == start)));
        // SAFETY: this function's contract is the loop's.
        unsafe {
            match self.instrument {
                None => self.run_loop::<false>(depth, start, base),
                Some(_) => self.run_loop::<true>(depth, start, base),
            }
        }
    }

    /// Makes the arguments already pushed at `base` the start of a new frame of `func`, whose
    /// caller resumes after `ret_pc` and receives the result in `dst`.
    fn enter_frame(&mut self, func: u32, ret_pc: usize, dst: u32, base: usize) -> Result<()> {
        let Callee::Bytecode { regs, .. } = self.code.callees[func as usize] else {
            unreachable!("enter_frame is only called for bytecode functions")
        };
        if self.frames.len() >= self.limits.max_call_depth {
            self.regs.truncate(base);
            return Err(ErrorKind::StackOverflow(self.limits.max_call_depth).into());
        }
        let top = base + regs as usize;
        if top > self.limits.max_stack_registers {
            self.regs.truncate(base);
            return Err(Error::alloc(
                (top * std::mem::size_of::<Value>()) as u128,
                format!("the register stack is limited to {} registers", self.limits.max_stack_registers),
            ));
        }
        if let Some(caller) = self.frames.last_mut() {
            caller.pc = ret_pc;
            caller.dst = dst;
        }
        // The arguments are in place (`base + num_args <= top`: arity and InputsExceedRegisters
        // are verified): only the rest of the frame is filled, and not through `resize`, whose
        // general clone loop cost as much as the rest of a call's entry (`resize_with` writes
        // the nulls in a plain loop; `extend` with `repeat_n` cost a third more per call).
        let len = self.regs.len();
        debug_assert!(top >= len, "a frame's arguments exceed its registers");
        if let Err(e) =
            reserve_regs(&mut self.regs, top.saturating_sub(len)).and_then(|()| reserve_frame(&mut self.frames))
        {
            self.regs.truncate(base);
            return Err(e);
        }
        if top > len {
            self.regs.resize_with(top, || Value::Null);
        }
        self.frames.push(Frame { func, base, pc: 0, dst: VOID });
        Ok(())
    }
}

/// Room for `n` more registers, or an allocation error: the limits bound what a program may
/// use, but the allocator may give less (a memory cap, limits set above the machine), and a
/// failed growth must be an error, not an abort (capi/02).
#[inline]
fn reserve_regs(regs: &mut Vec<Value>, n: usize) -> Result<()> {
    regs.try_reserve(n).map_err(|_| {
        Error::alloc(
            (regs.len() as u128 + n as u128) * std::mem::size_of::<Value>() as u128,
            "the register stack cannot grow (out of memory)",
        )
    })
}

/// Room for one more frame, or an allocation error (as [`reserve_regs`]).
#[inline]
fn reserve_frame(frames: &mut Vec<Frame>) -> Result<()> {
    frames.try_reserve(1).map_err(|_| {
        Error::alloc(
            (frames.len() as u128 + 1) * std::mem::size_of::<Frame>() as u128,
            "the frame stack cannot grow (out of memory)",
        )
    })
}

impl VmHandle for VirtualMachine {
    fn poll(&mut self) -> Result<()> {
        VirtualMachine::poll(self)
    }

    fn call_closure(&mut self, f: &Closure, args: &[Value]) -> Result<Value> {
        match self.bytecode_index(f)? {
            Some(index) => {
                let got = args.len() + f.captured.len();
                self.check_arity(Some(index), got)?;
                self.run(index, args, &f.captured)
            }
            None => {
                let Callable::Packed(p) = &f.callable else { unreachable!("bytecode_index said packed") };
                let all: SmallVec<[Value; 8]> = args.iter().chain(&f.captured).cloned().collect();
                p.call(&mut CallCtx::new(self), &all)
            }
        }
    }

    fn device(&self) -> Device {
        self.device
    }

    fn site_cache(&mut self, entry: u32) -> Option<&mut Value> {
        self.site_caches.get_mut(entry as usize)
    }

    fn site_caches(&mut self) -> &mut [Value] {
        &mut self.site_caches
    }

    fn allocator(&self) -> Allocator {
        self.allocator
    }

    fn clear_pools(&mut self) {
        self.drop_pooled();
    }

    fn call_named(&mut self, name: &str, f: &Closure, args: &[Value]) -> Result<Value> {
        self.count_step()?;
        self.native_call(name, f, args, None, false)
    }

    fn call_named_at(&mut self, name: &str, f: &Closure, args: &[Value], site: &mut Value) -> Result<Value> {
        self.count_step()?;
        self.native_call(name, f, args, Some(site), false)
    }

    fn call_native_code_at(&mut self, name: &str, f: &Closure, args: &[Value], site: &mut Value) -> Result<Value> {
        self.count_step()?;
        self.native_call(name, f, args, Some(site), true)
    }

    fn call_observed(&mut self, name: &str, f: &Closure, args: &[Value]) -> Result<Value> {
        self.native_call(name, f, args, None, false)
    }

    fn program_lists(&mut self) -> Option<crate::value::ProgramLists<'_>> {
        Some((self.exe.constants(), &self.code.func_values, &mut self.native_state))
    }
}

impl std::fmt::Debug for VirtualMachine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VirtualMachine({:?})", self.exe)
    }
}
