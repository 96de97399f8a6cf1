//! TVM's stateful calling protocol: `rvm_vm_set_input` gives a function its inputs,
//! `rvm_vm_invoke_stateful` runs it on them and keeps the result, `rvm_vm_get_outputs` returns
//! that result. The rules are relaxvm's (`relaxvm::tvm_inputs`, `VirtualMachine::set_input`),
//! the same the Python API applies.

use crate::error::{guard, rvm_error, rvm_error_code::*, CError};
use crate::input::{check_out, str_arg, write_out};
use crate::value::{new_value, rvm_value, values_arg};
use crate::vm::{lock_vm, rvm_vm, unknown, with_context};
use relaxvm::tvm_inputs::{declared_signature, numbers_as_tensors};
use std::ffi::c_char;

/// Sets the inputs of function `name` for a later `rvm_vm_invoke_stateful(vm, name)`: the
/// `nargs` values at `args`, one per parameter. As TVM's `set_input` does, numbers become 0-d
/// tensors (an int or a bool an int32 tensor, a float a float32 one), also inside tuples,
/// except where the function's signature declares a scalar; an int outside int32 is
/// `RVM_ERROR_VALUE`. A wrong count is `RVM_ERROR_ARITY`, an unknown function
/// `RVM_ERROR_UNKNOWN_FUNCTION` (listing the functions there are). Setting them again replaces
/// them.
///
/// Ownership: borrows everything passed (the VM keeps its own references to the values: they
/// may be freed after this returns). Thread safety: as `rvm_vm_call`.
#[no_mangle]
pub unsafe extern "C" fn rvm_vm_set_input(
    vm: *const rvm_vm,
    name: *const c_char,
    args: *const *const rvm_value,
    nargs: usize,
) -> *mut rvm_error {
    guard(|| {
        const WHAT: &str = "rvm_vm_set_input";
        // SAFETY: the caller passes a NUL-terminated name, `nargs` live values and a live VM.
        let (name, args) =
            unsafe { (str_arg(name, "rvm_vm_set_input: name")?, values_arg(args, nargs, "rvm_vm_set_input: args")?) };
        // SAFETY: as above.
        let mut vm = unsafe { lock_vm(vm, WHAT) }?;
        vm.get_function(name).map_err(|e| unknown(&vm, WHAT, name, e))?;
        let inputs = numbers_as_tensors(args, declared_signature(vm.executable(), name))
            .map_err(|e| CError::new(RVM_ERROR_VALUE, format!("{WHAT}: {name:?}: {e}")))?;
        vm.set_input(name, inputs).map_err(|e| with_context(&format!("{WHAT}: {name:?}"), e))
    })
}

/// Runs function `name` of `vm` on the inputs `rvm_vm_set_input` gave it, and keeps the result
/// for `rvm_vm_get_outputs` (replacing the last one). No inputs set for `name` is
/// `RVM_ERROR_VALUE`; the call's own error is this function's (its code kept, its message
/// after `"rvm_vm_invoke_stateful: "`).
///
/// Ownership: borrows `vm` and `name`. Thread safety: as `rvm_vm_call`.
#[no_mangle]
pub unsafe extern "C" fn rvm_vm_invoke_stateful(vm: *const rvm_vm, name: *const c_char) -> *mut rvm_error {
    guard(|| {
        const WHAT: &str = "rvm_vm_invoke_stateful";
        // SAFETY: the caller passes a NUL-terminated name and a live VM.
        let name = unsafe { str_arg(name, "rvm_vm_invoke_stateful: name") }?;
        // SAFETY: as above.
        let mut vm = unsafe { lock_vm(vm, WHAT) }?;
        vm.get_function(name).map_err(|e| unknown(&vm, WHAT, name, e))?;
        vm.invoke_stateful(name).map_err(|e| with_context(WHAT, e))
    })
}

/// The result of the last `rvm_vm_invoke_stateful(vm, name)`, in `*out`; none yet is
/// `RVM_ERROR_VALUE`.
///
/// Ownership: borrows `vm` and `name`; on success `*out` is a new value the caller owns (the
/// VM keeps the result too: each call returns a new handle to it). Thread safety: as
/// `rvm_vm_call`.
#[no_mangle]
pub unsafe extern "C" fn rvm_vm_get_outputs(
    vm: *const rvm_vm,
    name: *const c_char,
    out: *mut *mut rvm_value,
) -> *mut rvm_error {
    guard(|| {
        const WHAT: &str = "rvm_vm_get_outputs";
        check_out(out, WHAT)?;
        // SAFETY: the caller passes a NUL-terminated name and a live VM.
        let name = unsafe { str_arg(name, "rvm_vm_get_outputs: name") }?;
        // SAFETY: as above.
        let vm = unsafe { lock_vm(vm, WHAT) }?;
        vm.get_function(name).map_err(|e| unknown(&vm, WHAT, name, e))?;
        let result = vm.get_outputs(name).map_err(|e| with_context(WHAT, e))?;
        drop(vm);
        // SAFETY: checked non-null above.
        unsafe { write_out(out, new_value(result), WHAT) }
    })
}
