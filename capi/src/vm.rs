//! `rvm_vm`: a virtual machine running one executable; calls, interrupts, profiles.

use crate::error::{guard, rvm_error, rvm_error_code::*, CError};
use crate::executable::{exe_arg, rvm_executable};
use crate::handle::{self, publish, Handle, Kind};
use crate::input::{check_out, str_arg, write_out};
use crate::value::{new_value, rvm_value, value_arg, values_arg};
use crate::vm_options::{read_options, VM_DEVICE};
use relaxvm::memory_cfg::allocator_kind;
// The options were declared here before they had a module of their own: their path stays.
pub use crate::vm_options::{rvm_vm_options, rvm_vm_options_init_sized};
use relaxvm::{InterruptHandle, Value, VirtualMachine};
use std::ffi::c_char;
use std::sync::{Mutex, MutexGuard, TryLockError};

/// A VM: registers, frames and limits of its own, sharing the executable's program and
/// constants. One call runs on it at a time.
#[allow(non_camel_case_types)]
pub struct rvm_vm {
    vm: Mutex<VirtualMachine>,
    interrupt: InterruptHandle,
}

impl Handle for rvm_vm {
    const KIND: Kind = Kind::Vm;
}

/// A VM running `exe` on CPU 0, with `opts` (NULL: the defaults; else filled by
/// `rvm_vm_options_init_sized`, whose `struct_size` is checked first). Registers relaxvm's builtins first;
/// every packed function the program calls must be found now (in the executable's libraries or
/// the registry: register C functions before), or this fails naming them.
///
/// Ownership: borrows `exe` (the VM keeps the program alive: `exe` may be freed first) and
/// `opts`; on success `*out` is a new VM the caller owns (`rvm_vm_free`). Thread safety: any
/// thread.
#[no_mangle]
pub unsafe extern "C" fn rvm_vm_create(
    exe: *const rvm_executable,
    opts: *const rvm_vm_options,
    out: *mut *mut rvm_vm,
) -> *mut rvm_error {
    guard(|| {
        check_out(out, "rvm_vm_create")?;
        // SAFETY: the handle table checks `exe`; the caller keeps it alive during the call.
        let exe = std::sync::Arc::clone(&unsafe { exe_arg(exe, "rvm_vm_create") }?.exe);
        // SAFETY: `opts` is NULL or points to options the caller filled (their size is checked
        // before anything else is read).
        let settings = unsafe { read_options(opts) }?;
        if settings.num_threads != 0 {
            relaxvm::pool::init_global(settings.num_threads as usize).map_err(|e| {
                CError::new(RVM_ERROR_VALUE, format!("rvm_vm_create: num_threads: {}", CError::from(e).message))
            })?;
        }
        relaxvm_builtins::ensure_registered();
        let mut vm = VirtualMachine::new(exe)?;
        *vm.limits_mut() = settings.limits;
        vm.set_profiling_enabled(settings.profile);
        vm.set_device(VM_DEVICE);
        vm.set_allocator(settings.allocator);
        let interrupt = vm.interrupt_handle();
        // SAFETY: checked non-null above.
        unsafe { write_out(out, publish(rvm_vm { vm: Mutex::new(vm), interrupt }), "rvm_vm_create") }
    })
}

/// Frees `vm`. NULL is allowed (nothing happens); a pointer that is not a live VM (a double
/// free) is an error object. Values it returned stay valid.
///
/// Ownership: takes `vm`. Thread safety: not while a call runs on it (wait for the call to
/// return, after `rvm_vm_interrupt` if need be).
#[no_mangle]
pub unsafe extern "C" fn rvm_vm_free(vm: *mut rvm_vm) -> *mut rvm_error {
    guard(|| {
        if vm.is_null() {
            return Ok(());
        }
        // SAFETY: `take` frees only a live VM handle; the caller uses it nowhere else.
        let h = unsafe { handle::take(vm, "rvm_vm_free") }?;
        if matches!(h.vm.try_lock(), Err(TryLockError::WouldBlock)) {
            // Freed while running: leak it rather than free memory the running call uses.
            std::mem::forget(h);
            return Err(CError::new(RVM_ERROR_BUSY, "rvm_vm_free: the VM is running a call; it was leaked, not freed"));
        }
        drop(h);
        Ok(())
    })
}

/// The VM of live handle `p`, locked for one call.
///
/// # Safety
/// As [`handle::borrow`].
pub(crate) unsafe fn lock_vm<'a>(p: *const rvm_vm, what: &str) -> Result<MutexGuard<'a, VirtualMachine>, CError> {
    // SAFETY: forwarded to the caller.
    let h = unsafe { handle::borrow(p, what) }?;
    match h.vm.try_lock() {
        Ok(g) => Ok(g),
        // A panic during an earlier call was caught at that call's entry point; the VM resets
        // its frames at the next top-level call.
        Err(TryLockError::Poisoned(p)) => Ok(p.into_inner()),
        Err(TryLockError::WouldBlock) => Err(CError::new(
            RVM_ERROR_BUSY,
            format!(
                "{what}: the VM is running a call on another thread, or this call comes from inside one of its own calls \
                 (a packed function calling the VM that runs it); use one VM per thread"
            ),
        )),
    }
}

pub(crate) fn with_context(what: &str, e: relaxvm::Error) -> CError {
    let e = CError::from(e);
    CError::new(e.code, format!("{what}: {}", e.message))
}

/// Function `name` of `vm`'s executable, as a function value to pass to `rvm_vm_invoke` (or as
/// an argument); `RVM_ERROR_UNKNOWN_FUNCTION` naming the functions there are otherwise.
///
/// Ownership: borrows `vm` and `name`; on success `*out` is a new value the caller owns.
/// Thread safety: as `rvm_vm_call`.
#[no_mangle]
pub unsafe extern "C" fn rvm_vm_get_function(
    vm: *const rvm_vm,
    name: *const c_char,
    out: *mut *mut rvm_value,
) -> *mut rvm_error {
    guard(|| {
        check_out(out, "rvm_vm_get_function")?;
        // SAFETY: the caller passes a NUL-terminated name and a live VM it does not free now.
        let name = unsafe { str_arg(name, "rvm_vm_get_function: name") }?;
        // SAFETY: as above.
        let vm = unsafe { lock_vm(vm, "rvm_vm_get_function") }?;
        let f = vm.get_function(name).map_err(|e| unknown(&vm, "rvm_vm_get_function", name, e))?;
        // SAFETY: checked non-null above.
        unsafe { write_out(out, new_value(f), "rvm_vm_get_function") }
    })
}

/// An unknown-function error that lists the functions the executable has.
pub(crate) fn unknown(vm: &VirtualMachine, what: &str, name: &str, e: relaxvm::Error) -> CError {
    if !matches!(e.root().kind(), relaxvm::ErrorKind::UnknownFunction(_)) {
        return with_context(what, e);
    }
    let names = vm.executable().bytecode_function_names();
    CError::new(
        RVM_ERROR_UNKNOWN_FUNCTION,
        format!("{what}: no function {name:?} in the executable; its functions are: {}", names.join(", ")),
    )
}

/// Calls function `name` of `vm` with the `nargs` values at `args`; the result in `*out`.
///
/// Ownership: borrows everything passed (tensors are shared with the call, not copied); on
/// success `*out` is a new value the caller owns. Thread safety: one call per VM at a time: a
/// call on a VM that is running one (from another thread, or from a packed function it runs)
/// fails with `RVM_ERROR_BUSY` at once. VMs on different threads run in parallel.
#[no_mangle]
pub unsafe extern "C" fn rvm_vm_call(
    vm: *const rvm_vm,
    name: *const c_char,
    args: *const *const rvm_value,
    nargs: usize,
    out: *mut *mut rvm_value,
) -> *mut rvm_error {
    guard(|| {
        check_out(out, "rvm_vm_call")?;
        // SAFETY: the caller passes a NUL-terminated name, `nargs` live values and a live VM.
        let (name, args) =
            unsafe { (str_arg(name, "rvm_vm_call: name")?, values_arg(args, nargs, "rvm_vm_call: args")?) };
        // SAFETY: as above.
        let mut vm = unsafe { lock_vm(vm, "rvm_vm_call") }?;
        let f = vm.get_function(name).map_err(|e| unknown(&vm, "rvm_vm_call", name, e))?;
        let result = vm.invoke_closure(&f, &args).map_err(CError::from)?;
        drop(vm);
        // SAFETY: checked non-null above.
        unsafe { write_out(out, new_value(result), "rvm_vm_call") }
    })
}

/// Calls function value `func` (from `rvm_vm_get_function`, or a closure a call returned) on
/// `vm` with the `nargs` values at `args`.
///
/// Ownership and thread safety: as `rvm_vm_call`.
#[no_mangle]
pub unsafe extern "C" fn rvm_vm_invoke(
    vm: *const rvm_vm,
    func: *const rvm_value,
    args: *const *const rvm_value,
    nargs: usize,
    out: *mut *mut rvm_value,
) -> *mut rvm_error {
    guard(|| {
        check_out(out, "rvm_vm_invoke")?;
        // SAFETY: the caller passes live handles it does not free during the call.
        let (f, args) = unsafe {
            (value_arg(func, "rvm_vm_invoke: func")?.clone(), values_arg(args, nargs, "rvm_vm_invoke: args")?)
        };
        if !matches!(f, Value::Func(_)) {
            return Err(CError::new(
                RVM_ERROR_TYPE,
                format!("rvm_vm_invoke: func: expected a function, found {}", crate::value::describe(&f)),
            ));
        }
        // SAFETY: as above.
        let mut vm = unsafe { lock_vm(vm, "rvm_vm_invoke") }?;
        let result = vm.invoke_closure(&f, &args).map_err(CError::from)?;
        drop(vm);
        // SAFETY: checked non-null above.
        unsafe { write_out(out, new_value(result), "rvm_vm_invoke") }
    })
}

/// Stops the call running on `vm` at its next check (every 1024 bytecode calls and backward
/// jumps, and in long builtins): it fails with `RVM_ERROR_INTERRUPTED`. Has no effect on a call
/// that starts after it (each call starts uninterrupted).
///
/// Ownership: borrows `vm`. Thread safety: any thread, also while a call runs on `vm` (that is
/// its purpose); not concurrently with `rvm_vm_free(vm)`.
#[no_mangle]
pub unsafe extern "C" fn rvm_vm_interrupt(vm: *const rvm_vm) -> *mut rvm_error {
    guard(|| {
        // SAFETY: the handle table checks `vm`; the caller does not free it during the call.
        unsafe { handle::borrow(vm, "rvm_vm_interrupt") }?.interrupt.interrupt();
        Ok(())
    })
}

/// `rvm_vm_profile` format: a fixed-width table, most time first.
pub const RVM_PROFILE_TABLE: u32 = 0;
/// `rvm_vm_profile` format: CSV, one row per callee, times in nanoseconds.
pub const RVM_PROFILE_CSV: u32 = 1;
/// `rvm_vm_profile` format: JSON `{"function", "total_ns", "calls": [...]}`.
pub const RVM_PROFILE_JSON: u32 = 2;
/// `rvm_vm_profile` format: the Chrome trace event format (ui.perfetto.dev).
pub const RVM_PROFILE_CHROME_TRACE: u32 = 3;

/// Runs function `name` once with `args`, timing every call it makes (builtins, kernels, C
/// functions, bytecode functions, the VM's own overhead), and writes the report in `format`
/// (`RVM_PROFILE_TABLE`, `_CSV`, `_JSON` or `_CHROME_TRACE`; the last three need the library's
/// `tooling` feature, on by default, else `RVM_ERROR_UNSUPPORTED`). The VM must have been made
/// with `profile` set. The run's result is not kept (call `rvm_vm_call` for it); its error, if it
/// fails, is this function's.
///
/// Ownership: borrows the inputs; on success `*report` is a string the caller frees with
/// `rvm_string_free`. Thread safety: as `rvm_vm_call`.
#[no_mangle]
pub unsafe extern "C" fn rvm_vm_profile(
    vm: *const rvm_vm,
    name: *const c_char,
    args: *const *const rvm_value,
    nargs: usize,
    format: u32,
    report: *mut *mut c_char,
) -> *mut rvm_error {
    guard(|| {
        check_out(report, "rvm_vm_profile: report")?;
        if !matches!(format, RVM_PROFILE_TABLE..=RVM_PROFILE_CHROME_TRACE) {
            return Err(CError::invalid(format!(
                "rvm_vm_profile: format is {format}; expected RVM_PROFILE_TABLE (0), _CSV (1), _JSON (2) or _CHROME_TRACE (3)"
            )));
        }
        if format != RVM_PROFILE_TABLE && !cfg!(feature = "tooling") {
            return Err(CError::new(
                RVM_ERROR_UNSUPPORTED,
                "rvm_vm_profile: this build of relaxvm writes the table format only (built without the `tooling` feature)",
            ));
        }
        // SAFETY: the caller passes a NUL-terminated name, `nargs` live values and a live VM.
        let (name, args) =
            unsafe { (str_arg(name, "rvm_vm_profile: name")?, values_arg(args, nargs, "rvm_vm_profile: args")?) };
        // SAFETY: as above.
        let mut vm = unsafe { lock_vm(vm, "rvm_vm_profile") }?;
        vm.get_function(name).map_err(|e| unknown(&vm, "rvm_vm_profile", name, e))?;
        let rep = vm.profile(name, &args)?;
        drop(vm);
        let text = match format {
            RVM_PROFILE_TABLE => rep.table(relaxvm::profile::SortBy::Total, None),
            #[cfg(feature = "tooling")]
            RVM_PROFILE_CSV => rep.csv(),
            #[cfg(feature = "tooling")]
            RVM_PROFILE_JSON => rep.json(),
            #[cfg(feature = "tooling")]
            RVM_PROFILE_CHROME_TRACE => rep.chrome_trace(),
            _ => unreachable!("checked above"),
        };
        // SAFETY: checked non-null above.
        unsafe { write_out(report, crate::string::new_string(&text), "rvm_vm_profile") }
    })
}

/// The allocator `vm`'s builtins use, as its options' `memory_cfg` chose it: `*kind` becomes
/// `RVM_POOLED_ALLOCATOR` (TVM's default) or `RVM_NAIVE_ALLOCATOR`.
///
/// Ownership: borrows `vm`; writes `*kind`. Thread safety: as `rvm_vm_call` (a VM running a
/// call answers `RVM_ERROR_BUSY`).
#[no_mangle]
pub unsafe extern "C" fn rvm_vm_get_allocator(vm: *const rvm_vm, kind: *mut i64) -> *mut rvm_error {
    guard(|| {
        check_out(kind, "rvm_vm_get_allocator")?;
        // SAFETY: the handle table checks `vm`; the caller does not free it during the call.
        let allocator = unsafe { lock_vm(vm, "rvm_vm_get_allocator") }?.allocator();
        // SAFETY: checked non-null above.
        unsafe { write_out(kind, allocator_kind(allocator), "rvm_vm_get_allocator") }
    })
}
