//! VM TIR functions: the Relax functions of a model TVM compiled with `exec_mode="compiled"`.
//!
//! TVM lowers each such function to machine code, `__vmtir__NAME` in the model's `.so` (a
//! safe-call function exported as `__tvm_ffi___vmtir__NAME`), that its VM calls with four
//! pointers: the VM context, the register list, the constant list and the function list (TVM's
//! `vm.cc`, `GetClosureInternal`). Each list is an array of `TVMFFIAny`; the function's inputs
//! are registers `0..num_args`, its result is left in register `num_args`. The code reads the
//! lists and writes the registers through three runtime functions (`TVMBackendAnyList*`,
//! [`frame`]), calls builtins by name and closures of the function list through
//! `TVMFFIFunctionCall` (with the context pointer where bytecode passes the VM state), and calls
//! the model's kernels directly.
//!
//! How relaxvm runs one: the importer ([`wrap_functions`]) gives each VM TIR function a
//! two-instruction bytecode body,
//!
//! ```text
//! @main inputs=2 regs=3:
//!   call  __vmtir__main  in: %0, %1, i9  dst: %2
//!   ret  %2
//! ```
//!
//! whose packed function `__vmtir__main` the library provides ([`adapter`]): the registers (the
//! inputs), then the register count. So a compiled function is an ordinary bytecode function to
//! the VM — its argument checks, the errors located in it, its step, re-entry and native-stack
//! limits, and the instrument hook around its call. The constant and function lists are the
//! VM's own constants and function values as tvm-ffi values, made once per VM on first use and
//! kept in the VM ([`relaxvm::CallCtx::program_lists`]), shared by all its compiled functions:
//! what loading and running cost stays proportional to the program, whatever its number of
//! functions and constants. Every call the native code makes through its
//! function table goes through the VM ([`relaxvm::CallCtx::call_named`]): a step, polled for
//! Ctrl-C, seen by the profiler and the tracer. Kernels it calls directly (`call_cpacked`) are
//! part of the function's own time, as in TVM's profiler.

mod cells;
pub mod frame;
mod handles;
mod sites;

use crate::ffi::abi::{type_index, SafeCall, TVMFFIAny};
use crate::ffi::{guard, kernel, pool, raised};
use cells::Prepared;
use frame::{Entered, Frame, Parts};
use relaxvm::{Arg, Error, FuncInfo, Instruction, PackedFunc, Result, Value};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

/// The prefix TVM gives the machine code of VM TIR function `NAME`.
pub const PREFIX: &str = "__vmtir__";

/// A VM TIR function of the table being read.
#[derive(Clone, Copy, Debug)]
pub struct Compiled {
    /// Its index in the function table.
    pub index: usize,
    /// Its inputs.
    pub num_args: u32,
    /// Its register list's length (inputs, result and temporaries).
    pub registers: u32,
}

/// The most registers a VM TIR function may declare: its register list is allocated at each
/// call, sized by this number from the file (TVM's functions use a few hundred).
pub const MAX_REGISTERS: u32 = 1 << 22;

/// Gives each VM TIR function of `funcs` its bytecode body (see the module's note): appends
/// the `__vmtir__NAME` packed entries to the table and the bodies to `instrs`.
pub fn wrap_functions(funcs: &mut Vec<FuncInfo>, instrs: &mut Vec<Instruction>, compiled: &[Compiled]) -> Result<()> {
    let names: std::collections::HashSet<String> = funcs.iter().map(|f| f.name.clone()).collect();
    for c in compiled {
        let name = funcs[c.index].name.clone();
        if c.registers > MAX_REGISTERS {
            return Err(Error::format(format!(
                "VM TIR function {name:?} declares {} registers; at most {MAX_REGISTERS} are supported",
                c.registers
            )));
        }
        let native = format!("{PREFIX}{name}");
        if names.contains(&native) {
            return Err(Error::format(format!(
                "the function table holds both VM TIR function {name:?} and a function named {native:?}, the name of its machine code"
            )));
        }
        let native_index =
            u32::try_from(funcs.len()).map_err(|_| Error::format("a function table beyond 2^32 entries"))?;
        funcs.push(FuncInfo::packed(&native));
        let mut args: Vec<Arg> = (0..c.num_args).map(Arg::Reg).collect();
        args.push(Arg::Imm(i64::from(c.registers)));
        let start = u32::try_from(instrs.len()).map_err(|_| Error::format("a program beyond 2^32 instructions"))?;
        instrs.push(Instruction::Call { func: native_index, args, dst: Some(c.num_args) });
        instrs.push(Instruction::Ret { result: c.num_args });
        let params = std::mem::take(&mut funcs[c.index].param_names);
        funcs[c.index] =
            FuncInfo::bytecode(&name, start, start + 2, c.num_args, c.num_args + 1).with_param_names(params);
    }
    Ok(())
}

/// A VM's constant and function lists as native code reads them, and the site caches of its
/// VM TIR functions' calls.
struct Lists {
    consts: Arc<Prepared>,
    funcs: Arc<Prepared>,
    sites: sites::SiteCaches,
    /// A finished run's frame parts, for the next run (a nested or concurrent run meanwhile
    /// makes its own).
    parts: std::sync::Mutex<Option<Parts>>,
}

impl Lists {
    /// Frame parts for a run: the kept ones, or new ones.
    fn take_parts(&self) -> Parts {
        self.parts.lock().unwrap_or_else(|p| p.into_inner()).take().unwrap_or_default()
    }

    /// Keeps the parts of finished frame `frame` for the next run (emptied first, outside the
    /// lock: dropping the run's values may run any code, a Python finalizer calling this VM).
    fn keep_parts(&self, frame: Frame) {
        let parts = Parts::recycled(frame);
        let mut slot = self.parts.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(parts);
        }
    }
}

/// The lists of the VM `ctx` calls from, made on first use and kept in the VM.
fn lists_of(ctx: &mut relaxvm::CallCtx<'_>, name: &str) -> Result<Arc<Lists>> {
    let (consts, funcs, slot) = ctx
        .program_lists()
        .ok_or_else(|| Error::value(format!("VM TIR function {name:?} runs only inside a VirtualMachine")))?;
    if let Value::Object(o) = &*slot {
        if let Some(lists) = o.downcast_ref::<Arc<Lists>>() {
            return Ok(Arc::clone(lists));
        }
    }
    let lists = Arc::new(Lists {
        consts: Arc::new(Prepared::new(consts)?),
        funcs: Arc::new(Prepared::new(funcs)?),
        sites: sites::SiteCaches::default(),
        parts: std::sync::Mutex::new(None),
    });
    *slot = Value::Object(Arc::new(Box::new(Arc::clone(&lists))));
    Ok(lists)
}

/// The packed function `__vmtir__NAME` for machine code `f` of a library (`keep` keeps the
/// library loaded), called with the function's inputs followed by its register count.
pub fn adapter(native_name: &str, f: SafeCall, keep: Arc<dyn std::any::Any + Send + Sync>) -> PackedFunc {
    let name: Arc<str> = native_name.into();
    let short: Arc<str> = native_name.strip_prefix(PREFIX).unwrap_or(native_name).into();
    // Names the function's site caches in each VM's lists (a library's functions are made
    // once per load, so ids never repeat while a VM lives).
    static NEXT_ID: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    PackedFunc::new(native_name, move |ctx, args| {
        let _loaded = &keep;
        let registers = match args.last() {
            Some(Value::Int(r)) => usize::try_from(*r).ok(),
            _ => None,
        };
        let registers = registers.ok_or_else(|| {
            Error::value(format!(
                "{name}: expected the function's inputs followed by its register count (the call relaxvm's importer writes)"
            ))
        })?;
        let lists = lists_of(ctx, &name)?;
        let mut sites = lists.sites.take(id);
        let out = invoke(&short, f, ctx, &args[..args.len() - 1], registers, &lists, &mut sites);
        lists.sites.put(id, sites);
        out
    })
}

/// Runs machine code `f` of VM TIR function `name` on `inputs`.
fn invoke(
    name_arc: &Arc<str>,
    f: SafeCall,
    ctx: &mut relaxvm::CallCtx<'_>,
    inputs: &[Value],
    registers: usize,
    lists: &Lists,
    sites: &mut sites::Running,
) -> Result<Value> {
    let name: &str = name_arc;
    if registers <= inputs.len() || registers > MAX_REGISTERS as usize {
        return Err(Error::value(format!(
            "VM TIR function {name:?}: {registers} registers cannot hold its {} inputs and its result (at most {MAX_REGISTERS})",
            inputs.len()
        )));
    }
    let parts = lists.take_parts();
    let mut regs = parts.regs;
    regs.try_reserve_exact(registers).map_err(|_| {
        Error::alloc(
            (registers * std::mem::size_of::<TVMFFIAny>()) as u128,
            format!("the registers of VM TIR function {name:?}"),
        )
    })?;
    regs.resize(registers, TVMFFIAny::NONE);
    let ctx_raw: *mut relaxvm::CallCtx<'_> = ctx;
    let mut frame = Frame {
        name: Arc::clone(name_arc),
        regs,
        owned: parts.owned,
        consts: Arc::clone(&lists.consts),
        funcs: Arc::clone(&lists.funcs),
        ctx: ctx_raw.cast(),
        staged: parts.staged,
        error: None,
        handles: parts.handles,
        sites: std::mem::take(sites),
    };
    let ctx_ptr = frame.ctx_ptr();
    for (i, v) in inputs.iter().enumerate() {
        let any = frame.owned.hand_out(v.clone(), ctx_ptr, &mut frame.staged)?;
        if cells::is_object(&any) {
            frame.owned.hold(&any);
        }
        frame.regs[i] = any;
    }
    let anys = [
        TVMFFIAny::ptr(type_index::OPAQUE_PTR, ctx_ptr),
        TVMFFIAny::ptr(type_index::OPAQUE_PTR, frame.regs.as_ptr().cast()),
        TVMFFIAny::ptr(type_index::OPAQUE_PTR, frame.consts.anys.as_ptr().cast()),
        TVMFFIAny::ptr(type_index::OPAQUE_PTR, frame.funcs.anys.as_ptr().cast()),
    ];
    let frame_ptr: *mut Frame = &mut frame;
    let called = {
        let _entered = Entered::enter(frame_ptr);
        // The parallel launches of the kernels it calls poll the VM through the same context.
        // SAFETY: `ctx_raw` comes from the live `ctx`, which this function does not use until
        // the scope and the frame are gone; the frame's callbacks and the launches' polls reach
        // the context only through copies of `ctx_raw`, one at a time on this thread (a
        // callback runs between the native code's steps, a poll inside a launch's wait).
        // `ctx_raw` is not null: it was made from a reference.
        let _scope = unsafe { pool::PollScope::enter_raw(std::ptr::NonNull::new_unchecked(ctx_raw)) };
        raised::clear();
        let mut result = TVMFFIAny::NONE;
        std::panic::catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: `f` is the library's safe-call function `__tvm_ffi___vmtir__NAME`, the
            // library kept loaded by the caller; its four arguments are the context (this
            // frame's address, compared, never dereferenced by native code in TVM's ABI) and
            // three lists that live in `frame` (the registers) and in the VM's program lists
            // the frame holds (the constants and functions) for the whole call and are not
            // reallocated while it runs (the registers are only written in place, by the
            // AnyList functions). Objects in them are cells owned by the frame or the program lists.
            unsafe { guard::safe_call(f, anys.as_ptr(), 4, &mut result) }
        }))
    };
    // Where a fault or a raised error happened, for either message.
    let context = || format!("VM TIR function {name:?}");
    let rc = match called {
        Ok(Ok(Ok(rc))) => rc,
        Ok(Ok(Err(fault))) => {
            raised::clear();
            return Err(fault.error(&context()));
        }
        Ok(Err(e)) => return Err(e),
        Err(_) => -1,
    };
    let outcome = if let Some(e) = frame.error.take() {
        // A callback failed: the first failure is the function's error, whatever the machine
        // code returned after it.
        raised::clear();
        Err(e)
    } else if rc != 0 {
        Err(raised::take(&context()))
    } else {
        let ret = frame.regs[inputs.len()];
        value_of_result(&frame, &ret, name)
    };
    *sites = std::mem::take(&mut frame.sites);
    let written = write_back_staged(&frame, name);
    // A tensor passed as a copy comes back as itself, as from a bytecode function.
    let outcome = outcome.map(|v| originals(v, &frame.staged));
    lists.keep_parts(frame);
    written.and(outcome)
}

/// `v` with every staged copy in it (at the top or in tuples) replaced by its original.
fn originals(v: Value, staged: &[cells::Staged]) -> Value {
    if staged.is_empty() {
        return v;
    }
    match &v {
        Value::Tensor(t) => match staged.iter().find(|s| s.copy.ptr_eq(t)) {
            Some(s) => Value::Tensor(s.original.clone()),
            None => v,
        },
        Value::Tuple(items) => Value::tuple(items.iter().map(|i| originals(i.clone(), staged)).collect::<Vec<_>>()),
        _ => v,
    }
}

/// The function's result (register `num_args`) as a value.
fn value_of_result(frame: &Frame, ret: &TVMFFIAny, name: &str) -> Result<Value> {
    if cells::is_object(ret) {
        let found = frame.owned.get(ret).or_else(|| frame.consts.cells.get(ret));
        return found
            .or_else(|| frame.funcs.cells.get(ret))
            .cloned()
            .ok_or_else(|| cells::unknown_object(ret, &format!("the result of VM TIR function {name:?}")));
    }
    cells::inline_value(ret).map_err(|e| e.context(&format!("the result of VM TIR function {name:?}")))
}

/// Writes back into the tensors passed as copies what native code changed in the copies.
fn write_back_staged(frame: &Frame, name: &str) -> Result<()> {
    for s in &frame.staged {
        if !s.original.storage().is_frozen() {
            if kernel::changed(&s.original, &s.copy)? {
                kernel::write_back(&s.original, &s.copy)?;
            }
        } else if kernel::changed(&s.original, &s.copy)? {
            return Err(Error::value(format!(
                "VM TIR function {name:?} wrote to a tensor of shape {} in read-only memory (a constant or a read-only import)",
                s.original.shape()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
