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
//!   call  __vmtir__main  in: %0, %1, i9, i2, c[0], c[1], f[0], f[1], ...  dst: %2
//!   ret  %2
//! ```
//!
//! whose packed function `__vmtir__main` the library provides ([`adapter`]): the registers,
//! then the register count and constant count, then every constant and every function of the
//! table. So a compiled function is an ordinary bytecode function to the VM — its argument
//! checks, the errors located in it, its step, re-entry and native-stack limits, and the
//! instrument hook around its call — and the constant and function lists are made once per VM
//! (the call site's specialization), not per call. Every call the native code makes through its
//! function table goes through the VM ([`relaxvm::CallCtx::call_named`]): a step, polled for
//! Ctrl-C, seen by the profiler and the tracer. Kernels it calls directly (`call_cpacked`) are
//! part of the function's own time, as in TVM's profiler.

mod cells;
pub mod frame;

use crate::ffi::abi::{type_index, SafeCall, TVMFFIAny};
use crate::ffi::{guard, kernel, pool, raised};
use cells::{Cells, Prepared};
use frame::{Entered, Frame};
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

/// Gives each VM TIR function of `funcs` its bytecode body (see the module's note): appends
/// the `__vmtir__NAME` packed entries to the table and the bodies to `instrs`.
pub fn wrap_functions(
    funcs: &mut Vec<FuncInfo>,
    instrs: &mut Vec<Instruction>,
    num_constants: usize,
    compiled: &[Compiled],
) -> Result<()> {
    let table = u32::try_from(funcs.len()).map_err(|_| Error::format("a function table beyond 2^32 entries"))?;
    let consts = u32::try_from(num_constants).map_err(|_| Error::format("a constant pool beyond 2^32 entries"))?;
    for c in compiled {
        let name = funcs[c.index].name.clone();
        let native = format!("{PREFIX}{name}");
        if funcs.iter().any(|f| f.name == native) {
            return Err(Error::format(format!(
                "the function table holds both VM TIR function {name:?} and a function named {native:?}, the name of its machine code"
            )));
        }
        let native_index =
            u32::try_from(funcs.len()).map_err(|_| Error::format("a function table beyond 2^32 entries"))?;
        funcs.push(FuncInfo::packed(&native));
        let mut args: Vec<Arg> = (0..c.num_args).map(Arg::Reg).collect();
        args.push(Arg::Imm(i64::from(c.registers)));
        args.push(Arg::Imm(i64::from(consts)));
        args.extend((0..consts).map(Arg::Const));
        args.extend((0..table).map(Arg::Func));
        let start = u32::try_from(instrs.len()).map_err(|_| Error::format("a program beyond 2^32 instructions"))?;
        instrs.push(Instruction::Call { func: native_index, args, dst: Some(c.num_args) });
        instrs.push(Instruction::Ret { result: c.num_args });
        let params = std::mem::take(&mut funcs[c.index].param_names);
        funcs[c.index] =
            FuncInfo::bytecode(&name, start, start + 2, c.num_args, c.num_args + 1).with_param_names(params);
    }
    Ok(())
}

/// What one call site of a VM TIR function passes besides its registers, made once.
struct Site {
    registers: usize,
    consts: Arc<Prepared>,
    funcs: Arc<Prepared>,
}

impl Site {
    /// Reads the operands after the `n` registers: register count, constant count, constants,
    /// functions.
    fn read(name: &str, rest: &[&Value]) -> Result<Site> {
        let bad = || {
            Error::value(format!(
                "{name}: expected the registers, the register count, the constant count, the constants and the functions (the call relaxvm's importer writes)"
            ))
        };
        let int = |v: Option<&&Value>| v.and_then(|v| v.as_int().ok()).and_then(|i| usize::try_from(i).ok());
        let registers = int(rest.first()).ok_or_else(bad)?;
        let k = int(rest.get(1)).ok_or_else(bad)?;
        let tail = rest.get(2..).ok_or_else(bad)?;
        if tail.len() < k {
            return Err(bad());
        }
        let consts: Vec<Value> = tail[..k].iter().map(|v| (*v).clone()).collect();
        let funcs: Vec<Value> = tail[k..].iter().map(|v| (*v).clone()).collect();
        Ok(Site { registers, consts: Arc::new(Prepared::new(&consts)?), funcs: Arc::new(Prepared::new(&funcs)?) })
    }
}

/// The packed function `__vmtir__NAME` for machine code `f` of a library (`keep` keeps the
/// library loaded). Called with the registers (the function's inputs) followed by what
/// [`wrap_functions`] passes; each call site is specialised once to its constant and function
/// lists, and then passes only the registers.
pub fn adapter(native_name: &str, f: SafeCall, keep: Arc<dyn std::any::Any + Send + Sync>) -> PackedFunc {
    let name: Arc<str> = native_name.into();
    let general_name = Arc::clone(&name);
    let general_keep = Arc::clone(&keep);
    PackedFunc::new(native_name, move |ctx, args| {
        let _loaded = &general_keep;
        let n = args.iter().position(|v| matches!(v, Value::Int(_))).unwrap_or(args.len());
        let rest: Vec<&Value> = args[n..].iter().collect();
        let site = Site::read(&general_name, &rest)?;
        invoke(&general_name, f, ctx, &args[..n], &site)
    })
    .with_specializer(move |fixed| {
        let n = fixed.iter().position(Option::is_some)?;
        let rest: Option<Vec<&Value>> = fixed[n..].iter().copied().collect();
        let site = Site::read(&name, &rest?).ok()?;
        let name = Arc::clone(&name);
        let keep = Arc::clone(&keep);
        let special = PackedFunc::new(&name.clone(), move |ctx, args| {
            let _loaded = &keep;
            invoke(&name, f, ctx, &args[..n.min(args.len())], &site)
        });
        Some(special.reading_first(n))
    })
}

/// Runs machine code `f` of VM TIR function `name` on `inputs`.
fn invoke(
    native_name: &str,
    f: SafeCall,
    ctx: &mut relaxvm::CallCtx<'_>,
    inputs: &[Value],
    site: &Site,
) -> Result<Value> {
    let name = native_name.strip_prefix(PREFIX).unwrap_or(native_name);
    if site.registers <= inputs.len() {
        return Err(Error::value(format!(
            "VM TIR function {name:?}: {} registers cannot hold its {} inputs and its result",
            site.registers,
            inputs.len()
        )));
    }
    let ctx_raw: *mut relaxvm::CallCtx<'_> = ctx;
    let mut frame = Frame {
        name: name.into(),
        regs: vec![TVMFFIAny::NONE; site.registers],
        owned: Cells::default(),
        consts: Arc::clone(&site.consts),
        funcs: Arc::clone(&site.funcs),
        ctx: ctx_raw.cast(),
        staged: Vec::new(),
        error: None,
    };
    let ctx_ptr = frame.ctx_ptr();
    for (i, v) in inputs.iter().enumerate() {
        frame.regs[i] = frame.owned.hand_out(v.clone(), ctx_ptr, &mut frame.staged)?;
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
        // SAFETY: `ctx_raw` comes from the live `ctx`, unused by this function until the scope
        // and the frame are gone.
        let _scope = pool::PollScope::enter(unsafe { &mut *ctx_raw });
        raised::clear();
        let mut result = TVMFFIAny::NONE;
        std::panic::catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: `f` is the library's safe-call function `__tvm_ffi___vmtir__NAME`, the
            // library kept loaded by the caller; its four arguments are the context (this
            // frame's address, compared, never dereferenced by native code in TVM's ABI) and
            // three lists that live in `frame` and `site` for the whole call and are not
            // reallocated while it runs (the registers are only written in place, by the
            // AnyList functions). Objects in them are cells owned by the frame or the site.
            unsafe { guard::safe_call(f, anys.as_ptr(), 4, &mut result) }
        }))
    };
    let rc = match called {
        Ok(Ok(Ok(rc))) => rc,
        Ok(Ok(Err(fault))) => {
            raised::clear();
            return Err(fault.error(&format!("VM TIR function {name:?}")));
        }
        Ok(Err(e)) => return Err(e),
        Err(_) => -1,
    };
    let outcome = if rc != 0 {
        let raised = raised::take(&format!("VM TIR function {name:?}"));
        Err(frame.error.take().unwrap_or(raised))
    } else {
        let ret = frame.regs[inputs.len()];
        value_of_result(&frame, &ret, name)
    };
    write_back_staged(&frame, name)?;
    // A tensor passed as a copy comes back as itself, as from a bytecode function.
    outcome.map(|v| originals(v, &frame.staged))
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
        let address = ret.payload as usize;
        let found = frame.owned.get(address).or_else(|| frame.consts.cells.get(address));
        return found
            .or_else(|| frame.funcs.cells.get(address))
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
