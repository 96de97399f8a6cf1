//! `CallCtx::from_native_site` is an explicit flag that only compiled mode's calls set (review
//! R-perfcomp-2): a builtin that keeps its own site cache and calls through the public
//! `CallCtx::call_named_at` does not get it (and so gets zeroed storage at a reused site).

use super::{call_by_name, lists, vm_with};
use crate::ffi::abi::TVMFFIAny;
use crate::vmtir::frame::RVMBackendAnyListMoveFromPackedReturn;
use relaxvm::{Callable, Closure, PackedFunc, Value};
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

/// Which function `named_fn` calls.
static NAME: Mutex<&str> = Mutex::new("");

/// Register 1 = the function `NAME` names, called with no arguments.
unsafe extern "C" fn named_fn(_: *mut c_void, args: *const TVMFFIAny, _: i32, _: *mut TVMFFIAny) -> i32 {
    // SAFETY: the adapter passes 4 values.
    let (_, r, _, _) = unsafe { lists(args) };
    let name = *NAME.lock().unwrap();
    let mut stack = [TVMFFIAny::NONE];
    let rc = call_by_name(name, &[], &mut stack[0]);
    if rc != 0 {
        return rc;
    }
    // SAFETY: the result is at offset 0.
    unsafe { RVMBackendAnyListMoveFromPackedReturn(r, 1, stack.as_mut_ptr(), 0) }
}

#[test]
fn only_a_call_of_compiled_code_is_from_a_native_site() {
    let flag = PackedFunc::new("test.vmtir.native_flag", |ctx, _| Ok(Value::Bool(ctx.from_native_site())));
    let forwarded = flag.clone();
    // A builtin keeping its own site cache, calling through the public API.
    let forward = PackedFunc::new("test.vmtir.forward_at_site", move |ctx, _| {
        let f = Value::Func(Arc::new(Closure { callable: Callable::Packed(forwarded.clone()), captured: Vec::new() }));
        let mut site = Value::Null;
        ctx.call_named_at("test.vmtir.native_flag", &f, &[], &mut site)
    });
    for f in [flag, forward] {
        relaxvm::registry::register_global(f, true).unwrap();
    }
    let mut one = NAME.lock().unwrap();
    *one = "test.vmtir.native_flag";
    drop(one);
    let direct = vm_with(named_fn).invoke("f", &[super::tensor()]).unwrap();
    *NAME.lock().unwrap() = "test.vmtir.forward_at_site";
    let forwarded = vm_with(named_fn).invoke("f", &[super::tensor()]).unwrap();
    assert!(matches!(direct, Value::Bool(true)), "the machine code's own call: {direct:?}");
    assert!(matches!(forwarded, Value::Bool(false)), "a builtin's call at its own site: {forwarded:?}");
    // Outside compiled mode, never.
    let mut ctx = relaxvm::CallCtx::detached();
    assert!(!ctx.from_native_site());
    let mut site = Value::Null;
    let f = Value::Func(Arc::new(Closure {
        callable: Callable::Packed(PackedFunc::new("t", |ctx, _| Ok(Value::Bool(ctx.from_native_site())))),
        captured: Vec::new(),
    }));
    assert!(matches!(ctx.call_named_at("t", &f, &[], &mut site).unwrap(), Value::Bool(false)));
}
