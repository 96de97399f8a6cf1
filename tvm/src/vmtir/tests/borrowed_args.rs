//! An argument a call of native code passes from a cell stays alive while the call runs, even
//! when its register lets go of it meanwhile and a nested call into the same frame follows.

use super::{call_by_name, lists, vm_with_registers};
use crate::ffi::abi::TVMFFIAny;
use crate::vmtir::frame::{
    RVMBackendAnyListMoveFromPackedReturn, RVMBackendAnyListResetItem, RVMBackendAnyListSetPackedArg,
};
use relaxvm::{PackedFunc, Value};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// The register list of the running `borrow_fn` (for `test.vmtir.borrow.reenter`).
static REGS: AtomicUsize = AtomicUsize::new(0);

/// Sets its flag when dropped.
struct Dropped(Arc<AtomicBool>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Register 2 = `test.vmtir.borrow.make()`; register 1 = `test.vmtir.borrow.reenter(register 2)`.
unsafe extern "C" fn borrow_fn(_: *mut c_void, args: *const TVMFFIAny, _: i32, _: *mut TVMFFIAny) -> i32 {
    // SAFETY: the adapter passes 4 values.
    let (_, r, _, _) = unsafe { lists(args) };
    REGS.store(r as usize, Ordering::SeqCst);
    let mut stack = [TVMFFIAny::NONE; 2];
    let rc = call_by_name("test.vmtir.borrow.make", &[], &mut stack[0]);
    if rc != 0 {
        return rc;
    }
    // SAFETY: `r` is the register list; one value at offset 0, the result at 1.
    unsafe {
        assert_eq!(RVMBackendAnyListMoveFromPackedReturn(r, 2, stack.as_mut_ptr(), 0), 0);
        assert_eq!(RVMBackendAnyListSetPackedArg(r, 2, stack.as_mut_ptr(), 0), 0);
        let (head, tail) = stack.split_at_mut(1);
        let rc = call_by_name("test.vmtir.borrow.reenter", head, &mut tail[0]);
        if rc != 0 {
            return rc;
        }
        RVMBackendAnyListMoveFromPackedReturn(r, 1, stack.as_mut_ptr(), 1)
    }
}

#[test]
fn a_borrowed_argument_outlives_its_register_and_a_nested_call_into_the_frame() {
    let flag = Arc::new(AtomicBool::new(false));
    let made = Arc::clone(&flag);
    let make = PackedFunc::from_fn("test.vmtir.borrow.make", move |_| {
        let d: Box<dyn std::any::Any + Send + Sync> = Box::new(Dropped(Arc::clone(&made)));
        Ok(Value::Object(Arc::new(d)))
    });
    let seen = Arc::clone(&flag);
    let reenter = PackedFunc::from_fn("test.vmtir.borrow.reenter", move |args| {
        // The register holding the argument lets go of it (as a hostile kernel the callee
        // runs could), then a nested call of the same frame (which drops released values,
        // unless a call borrows them).
        let r = REGS.load(Ordering::SeqCst) as *mut c_void;
        // SAFETY: the register list of the running frame, which has 3 registers.
        assert_eq!(unsafe { RVMBackendAnyListResetItem(r, 2) }, 0);
        let mut ret = TVMFFIAny::NONE;
        assert_eq!(call_by_name("test.vmtir.borrow.noop", &[], &mut ret), 0);
        let alive = !seen.load(Ordering::SeqCst);
        let intact = matches!(&args[0], Value::Object(o) if o.downcast_ref::<Dropped>().is_some());
        Ok(Value::Bool(alive && intact))
    });
    let noop = PackedFunc::from_fn("test.vmtir.borrow.noop", |_| Ok(Value::Null));
    for f in [make, reenter, noop] {
        relaxvm::registry::register_global(f, true).unwrap();
    }
    let mut vm = vm_with_registers(borrow_fn, 3);
    let out = vm.invoke("f", &[super::tensor()]).unwrap();
    assert!(matches!(out, Value::Bool(true)), "the borrowed argument was dropped during its call: {out:?}");
    // Released, and dropped at the latest with the run.
    assert!(flag.load(Ordering::SeqCst), "the value is dropped once its run ends");
}
