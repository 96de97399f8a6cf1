//! The virtual machine: runs an executable's bytecode functions.
//!
//! Bytecode-to-bytecode calls push a frame on a heap-allocated stack and jump; they do not
//! recurse on the native stack. The native stack grows only when a packed function re-enters
//! the VM (e.g. `vm.builtin.invoke_closure`), and that nesting is bounded separately.

use crate::bytecode::Instruction;
use crate::code::{Callee, Code, Op, Src, CONST_BIT, VOID};
use crate::device::Device;
use crate::error::{Error, ErrorKind, Result};
use crate::executable::{Executable, FuncKind};
use crate::int_op::IntOp;
use crate::packed::BinaryFn;
use crate::packed::{panic_error, CallCtx, PackedFunc, VmHandle};
use crate::registry::Registry;
use crate::types::Signature;
use crate::value::{Callable, Closure, Value};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

mod instrument;
mod limits;
mod recording;
use instrument::InstrumentedFrame;
pub use instrument::{Instrument, InstrumentAction, InstrumentCall};
pub use limits::{InterruptHandle, PollHook, VmConfig, MIN_NATIVE_STACK, POLL_INTERVAL};

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
    code: Arc<Code>,
    device: Device,
    config: VmConfig,
    frames: Vec<Frame>,
    regs: Vec<Value>,
    argbuf: Vec<ManuallyDrop<Value>>,
    reentry: usize,
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
    poll: Option<PollHook>,
    saved: HashMap<String, Value>,
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
        let code = Arc::new(Code::decode(&exe, overrides)?);
        Ok(VirtualMachine {
            exe,
            code,
            device: Device::cpu(0),
            config: VmConfig::default(),
            frames: Vec::new(),
            regs: Vec::new(),
            argbuf: Vec::with_capacity(16),
            reentry: 0,
            steps_left: u64::MAX,
            fuel: POLL_INTERVAL,
            issued: POLL_INTERVAL,
            interrupt: InterruptHandle::default(),
            instrument: None,
            instrumented: Vec::new(),
            poll: None,
            saved: HashMap::new(),
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

    /// The limits.
    pub fn config(&self) -> &VmConfig {
        &self.config
    }

    /// Changes the limits.
    pub fn config_mut(&mut self) -> &mut VmConfig {
        &mut self.config
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
    /// and none is wrapped in [`ErrorKind::At`].
    pub fn invoke_closure(&mut self, f: &Value, args: &[Value]) -> Result<Value> {
        let closure = f.as_func()?;
        if self.reentry == 0 {
            self.start_counting();
        }
        let Some(index) = self.bytecode_index(closure)? else { return self.call_closure(closure, args) };
        if self.exe.funcs()[index as usize].signature.is_some() {
            let exe = Arc::clone(&self.exe);
            let info = &exe.funcs()[index as usize];
            let sig = info.signature.as_ref().expect("checked above");
            let all: SmallVec<[Value; 8]> = args.iter().chain(&closure.captured).cloned().collect();
            let prepared = sig.prepare_args(&info.name, &all)?;
            return self.run(index, &prepared, &[]);
        }
        self.check_arity(Some(index), args.len() + closure.captured.len())?;
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
    /// `include_return` false the saved function returns null.
    pub fn save_function(
        &mut self,
        func: &str,
        saved_name: &str,
        args: Vec<Value>,
        include_return: bool,
    ) -> Result<()> {
        let target = self.get_function(func)?;
        let check = self.bytecode_index(target.as_func()?)?;
        self.check_arity(check, args.len())?;
        let exe = Arc::clone(&self.exe);
        let args = match self.closure_signature(&exe, target.as_func()?)? {
            Some((name, sig)) => sig.prepare_args(name, &args)?,
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

    fn bytecode_index(&self, c: &Closure) -> Result<Option<u32>> {
        match &c.callable {
            Callable::Packed(_) => Ok(None),
            Callable::Bytecode { index, name } => {
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
        if self.reentry >= self.config.max_reentry {
            return Err(ErrorKind::StackOverflow(self.config.max_reentry).into());
        }
        // Every entry into the interpreter — the first, and each call back from a packed
        // function — measures the native stack left: a thread with a small stack (a Python
        // thread made with threading.stack_size) would otherwise overflow it, a SIGSEGV.
        if let Some(remaining) = stacker::remaining_stack() {
            if remaining < MIN_NATIVE_STACK {
                return Err(ErrorKind::NativeStack { remaining, needed: MIN_NATIVE_STACK }.into());
            }
        }
        if self.reentry > 0 {
            // A call back into the VM from a packed function is a bytecode call, and counts as one.
            self.count_step()?;
        }
        let depth = self.frames.len();
        let mark = self.regs.len();
        self.reentry += 1;
        self.regs.extend_from_slice(args);
        self.regs.extend_from_slice(captured);
        // Two copies of the loop: the plain one has no instrumentation code at all, so what
        // the instrumented one does cannot cost the plain one registers or layout.
        let result = self.enter_frame(func, usize::MAX, VOID, mark).and_then(|()| match self.instrument {
            None => self.run_loop::<true>(depth),
            Some(_) => self.run_loop::<false>(depth),
        });
        self.reentry -= 1;
        if result.is_err() {
            if !self.instrumented.is_empty() {
                self.instrument_unwind(depth);
            }
            self.frames.truncate(depth);
            self.regs.truncate(mark);
        }
        result
    }

    /// Makes the arguments already pushed at `base` the start of a new frame of `func`, whose
    /// caller resumes after `ret_pc` and receives the result in `dst`.
    fn enter_frame(&mut self, func: u32, ret_pc: usize, dst: u32, base: usize) -> Result<()> {
        let Callee::Bytecode { regs, .. } = self.code.callees[func as usize] else {
            unreachable!("enter_frame is only called for bytecode functions")
        };
        if self.frames.len() >= self.config.max_call_depth {
            self.regs.truncate(base);
            return Err(ErrorKind::StackOverflow(self.config.max_call_depth).into());
        }
        let top = base + regs as usize;
        if top > self.config.max_stack_registers {
            self.regs.truncate(base);
            return Err(Error::alloc(
                (top * std::mem::size_of::<Value>()) as u128,
                format!("the register stack is limited to {} registers", self.config.max_stack_registers),
            ));
        }
        if let Some(caller) = self.frames.last_mut() {
            caller.pc = ret_pc;
            caller.dst = dst;
        }
        self.regs.resize(top, Value::Null);
        self.frames.push(Frame { func, base, pc: 0, dst: VOID });
        Ok(())
    }

    /// Runs frames until the one at `depth` returns. `PLAIN`: no instrument hook (one installed
    /// by a callback meanwhile takes effect at the next entry into the VM).
    #[inline(never)]
    fn run_loop<const PLAIN: bool>(&mut self, depth: usize) -> Result<Value> {
        // SAFETY: `self.code` is set once, in the constructor, and never replaced or mutated, so
        // the `Code` it points to lives as long as `self`; packed functions reach the VM only
        // through `CallCtx`, which cannot replace it either. Borrowing it through the pointer
        // (instead of cloning the `Arc`) spares two atomic operations per invocation.
        let code: &Code = unsafe { &*Arc::as_ptr(&self.code) };
        let top = *self.frames.last().expect("a frame was pushed");
        let Callee::Bytecode { start, .. } = code.callees[top.func as usize] else { unreachable!() };
        let mut pc = start as usize;
        let mut base = top.base;
        loop {
            match code.ops[pc] {
                Op::IntBinary { op, f, a, b, dst } if PLAIN => {
                    let ret = self.int_result(code, op, f, a, b, base, pc)?;
                    set_reg(&mut self.regs[base + dst as usize], ret);
                    pc += 1;
                }
                Op::IntBranch { op, f, a, b, dst, false_target } if PLAIN => {
                    let ret = self.int_result(code, op, f, a, b, base, pc)?;
                    // The `if` at pc + 1, as its own op would run it.
                    let taken = match ret {
                        Value::Bool(t) => t,
                        Value::Int(i) => i != 0,
                        ref other => other.truthy().map_err(|e| self.locate(pc + 1, e))?,
                    };
                    set_reg(&mut self.regs[base + dst as usize], ret);
                    if taken {
                        pc += 2;
                    } else {
                        if (false_target as usize) <= pc + 1 {
                            self.count_step().map_err(|e| self.locate(pc + 1, e))?;
                        }
                        pc = false_target as usize;
                    }
                }
                Op::IntJump { op, f, a, b, dst, target } if PLAIN => {
                    let ret = self.int_result(code, op, f, a, b, base, pc)?;
                    set_reg(&mut self.regs[base + dst as usize], ret);
                    // The `goto` at pc + 1, as its own op would run it.
                    if (target as usize) <= pc + 1 {
                        self.count_step().map_err(|e| self.locate(pc + 1, e))?;
                    }
                    pc = target as usize;
                }
                Op::CallBinary { f, a, b, dst } if PLAIN => {
                    let ret = self.call_binary(code, f, a, b, base, pc)?;
                    if dst != VOID {
                        set_reg(&mut self.regs[base + dst as usize], ret);
                    }
                    pc += 1;
                }
                Op::CallPacked { func, args, nargs, dst } if PLAIN => {
                    let Callee::Packed(f) = &code.callees[func as usize] else { unreachable!("decoded as packed") };
                    let srcs = &code.args[args as usize..(args + nargs) as usize];
                    // One reused buffer of borrowed arguments: no allocation and no
                    // reference-count traffic per call in steady state.
                    let mut argv = std::mem::take(&mut self.argbuf);
                    self.borrow_args_into(code, srcs, base, &mut argv);
                    let ret = f.call(&mut CallCtx::new(self), as_values(&argv));
                    argv.clear();
                    self.argbuf = argv;
                    let ret = ret.map_err(|e| self.locate(pc, e))?;
                    if dst != VOID {
                        set_reg(&mut self.regs[base + dst as usize], ret);
                    }
                    pc += 1;
                }
                Op::CallSelect1 { f, func, a, dst } if PLAIN => {
                    // The one argument is passed in place: no argument list to build.
                    let Callee::Packed(p) = &code.callees[func as usize] else { unreachable!("decoded as packed") };
                    let arg = std::slice::from_ref(self.src(code, a, base));
                    let picked = match catch_unwind(AssertUnwindSafe(|| f(p.name(), arg))) {
                        Ok(Ok(v)) => {
                            (dst != VOID && !v.same_object(&self.regs[base + dst as usize])).then(|| v.clone())
                        }
                        Ok(Err(e)) => return Err(self.locate(pc, e)),
                        Err(payload) => return Err(self.locate(pc, panic_error(p.name(), payload))),
                    };
                    if let Some(v) = picked {
                        set_reg(&mut self.regs[base + dst as usize], v);
                    }
                    pc += 1;
                }
                Op::CallSelect { func, args, nargs, dst } if PLAIN => {
                    let Callee::Packed(p) = &code.callees[func as usize] else { unreachable!("decoded as packed") };
                    let select = p.as_select().expect("decoded as select");
                    let mut argv = std::mem::take(&mut self.argbuf);
                    self.borrow_args_into(code, &code.args[args as usize..(args + nargs) as usize], base, &mut argv);
                    let picked = catch_unwind(AssertUnwindSafe(|| select(p.name(), as_values(&argv))));
                    let picked = picked.unwrap_or_else(|payload| Err(panic_error(p.name(), payload))).map(|v| {
                        // A result the destination already holds needs no write (and no
                        // reference-count traffic); anything else is cloned out of the borrow.
                        (dst != VOID && !v.same_object(&self.regs[base + dst as usize])).then(|| v.clone())
                    });
                    argv.clear();
                    self.argbuf = argv;
                    if let Some(v) = picked.map_err(|e| self.locate(pc, e))? {
                        set_reg(&mut self.regs[base + dst as usize], v);
                    }
                    pc += 1;
                }
                Op::CallBytecode { func, args, nargs, dst } if PLAIN => {
                    self.count_step().map_err(|e| self.locate(pc, e))?;
                    let Callee::Bytecode { start, .. } = code.callees[func as usize] else {
                        unreachable!("decoded as bytecode")
                    };
                    // The arguments go straight into the callee's registers: no allocation once
                    // the register stack has grown to the program's depth.
                    let new_base = self.regs.len();
                    for &s in &code.args[args as usize..(args + nargs) as usize] {
                        let v = self.src(code, s, base).clone();
                        self.regs.push(v);
                    }
                    self.enter_frame(func, pc, dst, new_base).map_err(|e| self.locate(pc, e))?;
                    base = new_base;
                    pc = start as usize;
                }
                Op::CallBytecode { .. } => {
                    // Instrumented, out of line: the loop's plain arms stay as they are.
                    (base, pc) = self.instrumented_bytecode_call(code, pc, base)?;
                }
                Op::CallPacked { .. }
                | Op::CallBinary { .. }
                | Op::IntBinary { .. }
                | Op::IntBranch { .. }
                | Op::IntJump { .. }
                | Op::CallSelect { .. }
                | Op::CallSelect1 { .. } => {
                    let ret = self.instrumented_call(code, pc, base).map_err(|e| self.locate(pc, e))?;
                    if let Some(dst) = self.exe.instrs()[pc].writes() {
                        set_reg(&mut self.regs[base + dst as usize], ret);
                    }
                    pc += 1;
                }
                Op::Ret { result } => {
                    let value = std::mem::take(&mut self.regs[base + result as usize]);
                    let returning = self.frames.len();
                    let done = self.frames.pop().expect("a frame is running");
                    truncate_regs(&mut self.regs, done.base);
                    if !PLAIN && self.instrumented.last().is_some_and(|f| f.depth == returning) {
                        self.instrument_after(&value)?;
                    }
                    if self.frames.len() == depth {
                        return Ok(value);
                    }
                    let caller = *self.frames.last().expect("a caller frame");
                    base = caller.base;
                    pc = caller.pc + 1;
                    if caller.dst != VOID {
                        set_reg(&mut self.regs[base + caller.dst as usize], value);
                    }
                }
                Op::Goto { target } => {
                    if (target as usize) <= pc {
                        self.count_step().map_err(|e| self.locate(pc, e))?;
                    }
                    pc = target as usize;
                }
                Op::If { cond, false_target } => {
                    let taken = self.regs[base + cond as usize].truthy().map_err(|e| self.locate(pc, e))?;
                    if taken {
                        pc += 1;
                    } else {
                        // A backward `if` closes a loop as a backward `goto` does.
                        if (false_target as usize) <= pc {
                            self.count_step().map_err(|e| self.locate(pc, e))?;
                        }
                        pc = false_target as usize;
                    }
                }
            }
        }
    }

    /// The result of the int operation at `pc`: computed here for two ints; anything else
    /// (bools, other types, overflow) goes to the builtin `f`, which defines the result or the
    /// error.
    // Inlined into each of its three ops in optimised builds (the loop's hot path); not forced
    // in debug builds, where three inlined copies would swell the loop's stack frame, which every
    // re-entry into the VM nests.
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[allow(clippy::too_many_arguments)]
    fn int_result(&self, code: &Code, op: IntOp, f: BinaryFn, a: Src, b: Src, base: usize, pc: usize) -> Result<Value> {
        let inline = match (self.src(code, a, base), self.src(code, b, base)) {
            // The operations loops use most are tested first: a compare each instead of a jump
            // through a table (the arms are `apply` itself, specialised).
            (Value::Int(x), Value::Int(y)) => match op {
                IntOp::Add => IntOp::Add.apply(*x, *y),
                IntOp::Lt => IntOp::Lt.apply(*x, *y),
                IntOp::Sub => IntOp::Sub.apply(*x, *y),
                _ => op.apply(*x, *y),
            },
            _ => None,
        };
        match inline {
            Some(v) => Ok(v),
            None => self.call_binary(code, f, a, b, base, pc),
        }
    }

    /// Calls the binary function of the call at `pc` with operands `a` and `b`.
    #[inline]
    fn call_binary(
        &self,
        code: &Code,
        f: crate::packed::BinaryFn,
        a: Src,
        b: Src,
        base: usize,
        pc: usize,
    ) -> Result<Value> {
        // A panic is caught here, not in `PackedFunc::call`, which this path skips.
        let (x, y) = (self.src(code, a, base), self.src(code, b, base));
        let ret = catch_unwind(AssertUnwindSafe(|| f(x, y))).unwrap_or_else(|p| Err(self.panicked(pc, p)));
        ret.map_err(|e| self.locate(pc, e))
    }

    /// Fills `out` with bitwise copies of the arguments, without touching reference counts.
    #[inline]
    fn borrow_args_into(&self, code: &Code, srcs: &[Src], base: usize, out: &mut Vec<ManuallyDrop<Value>>) {
        for &s in srcs {
            let v = self.src(code, s, base);
            // SAFETY: the copy is never dropped (ManuallyDrop) and lives only for one packed call,
            // during which its source stays alive and unmodified: constants are held by `code`,
            // and the calling frame's registers are not written while the callee runs (re-entrant
            // calls only push and pop frames above it; moving the register Vec moves the handles,
            // not the objects they point to). The callee sees `&[Value]`, so keeping a value
            // requires a clone, which takes a proper reference.
            out.push(ManuallyDrop::new(unsafe { std::ptr::read(v) }));
        }
    }

    /// The arguments of the call at `pc`, cloned (for instruments).
    fn load_args(&self, code: &Code, pc: usize, base: usize) -> SmallVec<[Value; 8]> {
        code.call_srcs(&code.ops[pc]).into_iter().map(|s| self.src(code, s, base).clone()).collect()
    }

    /// The value operand `s` reads.
    #[inline(always)]
    fn src<'a>(&'a self, code: &'a Code, s: Src, base: usize) -> &'a Value {
        if s & CONST_BIT == 0 {
            &self.regs[base + s as usize]
        } else {
            &code.consts[(s & !CONST_BIT) as usize]
        }
    }

    /// The error for a panic in the packed function that instruction `pc` calls.
    #[cold]
    fn panicked(&self, pc: usize, payload: Box<dyn std::any::Any + Send>) -> Error {
        let Instruction::Call { func, .. } = self.exe.instrs()[pc] else { unreachable!("a call") };
        panic_error(&self.exe.funcs()[func as usize].name, payload)
    }

    /// Adds the function, instruction and location to an error (once: the innermost wins).
    #[cold]
    fn locate(&self, pc: usize, e: Error) -> Error {
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

/// Writes a register, moving the value as two word-sized loads and stores.
///
/// A plain move compiles to a 16-byte vector load of a value that the callee had just stored
/// as two 8-byte words, which defeats store-to-load forwarding and stalled every call; moving
/// it word by word keeps the loads the same width as the stores.
#[inline(always)]
fn set_reg(slot: &mut Value, v: Value) {
    type Word = std::mem::MaybeUninit<u64>;
    const _: () = assert!(std::mem::size_of::<Value>() == 2 * std::mem::size_of::<u64>());
    let v = ManuallyDrop::new(v);
    let src = (&*v as *const Value).cast::<Word>();
    // SAFETY: `Value` is exactly two words (asserted above) and `src` points to an initialised
    // value; reading its words as `MaybeUninit` is sound even where they hold padding. Volatile
    // keeps the two reads from being merged into one wide load.
    let (w0, w1) = unsafe { (src.read_volatile(), src.add(1).read_volatile()) };
    let old = std::mem::replace(slot, Value::Null);
    let dst = (slot as *mut Value).cast::<Word>();
    // SAFETY: `slot` holds a valid (trivially droppable) Null, which we overwrite with the bits
    // of `v`, whose ownership moves here (`v` is never dropped: ManuallyDrop).
    unsafe {
        dst.write(w0);
        dst.add(1).write(w1);
    }
    // Scalars are overwritten all the time in loops: skip the out-of-line drop glue for them.
    if old.owns_heap() {
        drop(old);
    } else {
        std::mem::forget(old);
    }
}

/// `regs.truncate(len)`, dropping out of line only the values that own something: a frame's
/// registers are mostly scalars and nulls, which need no drop call.
#[inline]
fn truncate_regs(regs: &mut Vec<Value>, len: usize) {
    while regs.len() > len {
        match regs.pop() {
            Some(v) if v.owns_heap() => drop(v),
            Some(v) => std::mem::forget(v),
            None => break,
        }
    }
}

/// Views borrowed argument copies as values.
#[inline]
fn as_values(args: &[ManuallyDrop<Value>]) -> &[Value] {
    // SAFETY: `ManuallyDrop<T>` is `repr(transparent)` over `T`, so the slices have one layout.
    unsafe { std::slice::from_raw_parts(args.as_ptr().cast::<Value>(), args.len()) }
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
}

impl std::fmt::Debug for VirtualMachine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VirtualMachine({:?})", self.exe)
    }
}
