//! C functions registered as packed functions.

use crate::error::{guard, rvm_error, rvm_error_code::*, CError};
use crate::handle;
use crate::input::str_arg;
use crate::value::{new_value, rvm_value};
use relaxvm::{PackedFunc, Value};
use std::ffi::{c_char, c_void};

/// A C function callable from bytecode: it reads its `nargs` arguments at `args` and either
/// writes a result to `*result` (a value it made; leaving it NULL returns null) and returns
/// NULL, or returns an error (from `rvm_error_new`).
///
/// Ownership: the arguments are borrowed for the call (do not free them; `rvm_value_clone` one
/// to keep it); the result and the error are handed to relaxvm. Thread safety: it may be called
/// on any thread (a VM's calling thread, or a pool thread for a parallel TVM kernel's callback)
/// and concurrently.
///
/// It must return: a C++ exception thrown out of it ends the process (Rust cannot unwind foreign
/// exceptions: catch everything and return `rvm_error_new(...)`, and declare it `noexcept`), and
/// a `longjmp` out of it skips relaxvm's cleanup and leaves the VM busy for good (every later
/// call `RVM_ERROR_BUSY`, `rvm_vm_free` unable to free it). The same holds for `rvm_free_fn` and
/// DLPack deleters given to relaxvm.
#[allow(non_camel_case_types)]
pub type rvm_packed_fn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        args: *const *const rvm_value,
        nargs: usize,
        result: *mut *mut rvm_value,
    ) -> *mut rvm_error,
>;

/// Releases a registered function's `user_data` when the registry drops the function.
#[allow(non_camel_case_types)]
pub type rvm_free_fn = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

/// The C function and its data, owned by the registered packed function.
struct CFunc {
    f: unsafe extern "C" fn(*mut c_void, *const *const rvm_value, usize, *mut *mut rvm_value) -> *mut rvm_error,
    user_data: *mut c_void,
    free: rvm_free_fn,
}

// SAFETY: the registering caller promises (documented on `rvm_register_func`) that the
// function and its data may be used from any thread, concurrently.
unsafe impl Send for CFunc {}
// SAFETY: as above.
unsafe impl Sync for CFunc {}

impl Drop for CFunc {
    fn drop(&mut self) {
        if let Some(free) = self.free {
            // SAFETY: the caller gave `free` to release `user_data`, once, when the function goes.
            unsafe { free(self.user_data) }
        }
    }
}

impl CFunc {
    fn call(&self, name: &str, args: &[Value]) -> relaxvm::Result<Value> {
        let handles: Vec<*mut rvm_value> = args.iter().map(|a| new_value(a.clone())).collect();
        let release = |handles: &[*mut rvm_value]| {
            for h in handles {
                // SAFETY: made just above and never given away: freed once here.
                drop(unsafe { handle::take(*h, "argument") });
            }
        };
        let mut result: *mut rvm_value = std::ptr::null_mut();
        // SAFETY: `f` is the caller's function with the documented signature; `handles` holds
        // `args.len()` live values for the duration of the call.
        let err = unsafe { (self.f)(self.user_data, handles.as_ptr().cast(), handles.len(), &mut result) };
        release(&handles);
        let take_result = || -> relaxvm::Result<Value> {
            if result.is_null() {
                return Ok(Value::Null);
            }
            // SAFETY: the callee handed `result` to us; `take` checks it is a live value.
            let v = unsafe { handle::take(result, name) }.map_err(|e| {
                CError::new(RVM_ERROR_INVALID_ARGUMENT, format!("{name} returned an invalid result: {e}"))
            })?;
            Ok(v.value)
        };
        if err.is_null() {
            return take_result();
        }
        if !result.is_null() {
            // An error wins; a result written as well is released.
            let _ = take_result();
        }
        // SAFETY: the callee handed `err` to us; `take` checks it is a live error object.
        let e = match unsafe { handle::take(err, name) } {
            Ok(e) => CError::new(e.code(), format!("{name}: {}", e.message())),
            Err(e) => CError::new(RVM_ERROR_INVALID_ARGUMENT, format!("{name} returned an invalid error: {e}")),
        };
        Err(e.into())
    }
}

/// Registers `f` in the process-wide registry as packed function `name`, for every VM created
/// afterwards (`rvm_vm_create` resolves names when the VM is made). Fails with
/// `RVM_ERROR_ALREADY_REGISTERED` if `name` exists and `allow_override` is false; overriding a
/// builtin replaces it for VMs made afterwards.
///
/// Ownership: borrows `name`; on success the registry owns `user_data` and calls
/// `free_user_data(user_data)` (if not NULL) once the function is replaced and no VM made before
/// uses it any more, holding no lock of relaxvm's (it may call the API); on error nothing is kept
/// (and `free_user_data` is not called). Thread safety: any thread; `f` must be callable
/// from any thread, concurrently.
#[no_mangle]
pub unsafe extern "C" fn rvm_register_func(
    name: *const c_char,
    f: rvm_packed_fn,
    user_data: *mut c_void,
    free_user_data: rvm_free_fn,
    allow_override: bool,
) -> *mut rvm_error {
    guard(|| {
        // SAFETY: the caller passes a NUL-terminated name.
        let name = unsafe { str_arg(name, "rvm_register_func: name") }?.to_string();
        let Some(f) = f else { return Err(CError::invalid("rvm_register_func: f is NULL")) };
        relaxvm_builtins::ensure_registered();
        if !allow_override && relaxvm::registry::global().contains(&name) {
            return Err(CError::new(
                RVM_ERROR_ALREADY_REGISTERED,
                format!(
                    "rvm_register_func: function {name:?} is already registered (pass allow_override to replace it)"
                ),
            ));
        }
        let c = CFunc { f, user_data, free: free_user_data };
        let label = name.clone();
        let packed = PackedFunc::from_fn(&name, move |args| c.call(&label, args));
        // `register_global` drops the function replaced after the registry's lock is released:
        // its `free_user_data` may call back into the API (and the registry). Registration
        // racing another thread's is refused there, not here.
        relaxvm::registry::register_global(packed, allow_override)?;
        Ok(())
    })
}

/// Registers `f` under `name` in TVM's table of host functions for `R.call_py_func` (a program
/// compiled with `R.call_py_func("name", args)` calls it with the items of `args`): the table
/// `vm.builtin.register_py_func` fills, process-wide, which every VM reads at each call (VMs
/// made before see it too). A function registered under `name` before is replaced, as TVM's
/// `register_py_func` does. `vm.builtin.clear_py_func_registry` empties the table.
///
/// Ownership: borrows `name`; on success the table owns `user_data` and calls
/// `free_user_data(user_data)` (if not NULL) once the function is replaced or cleared and no
/// running call uses it, holding no lock of relaxvm's; on error nothing is kept. Thread
/// safety: any thread; `f` must be callable from any thread, concurrently.
#[no_mangle]
pub unsafe extern "C" fn rvm_register_py_func(
    name: *const c_char,
    f: rvm_packed_fn,
    user_data: *mut c_void,
    free_user_data: rvm_free_fn,
) -> *mut rvm_error {
    guard(|| {
        // SAFETY: the caller passes a NUL-terminated name.
        let name = unsafe { str_arg(name, "rvm_register_py_func: name") }?.to_string();
        let Some(f) = f else { return Err(CError::invalid("rvm_register_py_func: f is NULL")) };
        let c = CFunc { f, user_data, free: free_user_data };
        let label = name.clone();
        let packed = PackedFunc::from_fn(&name, move |args| c.call(&label, args));
        relaxvm_builtins::py_funcs::register_py_func(&name, packed);
        Ok(())
    })
}
