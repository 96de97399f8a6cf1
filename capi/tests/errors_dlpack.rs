//! The C API's DLPack exchange: no copies either way, errors that leave the tensor with the
//! caller, read-only tensors kept read-only.

use relaxvm_capi::dlpack::*;
use relaxvm_capi::error::rvm_error_code::*;
use relaxvm_capi::value::*;
use relaxvm_capi::vm::*;
use relaxvm_tvm::ffi::abi::DLManagedTensorVersioned;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicUsize, Ordering};

mod support;
use support::*;

#[test]
fn dlpack_in_and_out_without_copies() {
    let _serial = serial();
    static DELETED: AtomicUsize = AtomicUsize::new(0);
    let m = owned(vec![1.0, 2.0, 3.0], 0, &DELETED);
    // SAFETY: `m` is a valid managed tensor; the handles are live.
    unsafe {
        let data = (*m).dl_tensor.data;
        let mut v = null_mut();
        ok(rvm_value_from_dlpack(m, &mut v));
        let mut view = null_mut::<DLManagedTensorVersioned>();
        ok(rvm_value_to_dlpack(v, &mut view));
        assert_eq!((*view).dl_tensor.data, data, "the same memory both ways");
        assert_eq!((*view).flags & RVM_DLPACK_FLAG_READ_ONLY, 0);
        ok(rvm_value_free(v));
        assert_eq!(DELETED.load(Ordering::SeqCst), 0, "the exported view keeps the memory alive");
        ((*view).deleter.unwrap())(view);
        assert_eq!(DELETED.load(Ordering::SeqCst), 1, "released with the last view");
    }
}

#[test]
fn dlpack_errors_leave_the_tensor_with_the_caller() {
    let _serial = serial();
    static DELETED: AtomicUsize = AtomicUsize::new(0);
    type Corrupt = fn(*mut DLManagedTensorVersioned);
    // SAFETY (every closure below): each is called once, on a live tensor this test made, to
    // change one field of it before the import it tests.
    let cases: [(&str, Corrupt); 6] = [
        ("DLPack version 2.1 is not supported", |m| unsafe { (*m).version.major = 2 }),
        ("device type 2", |m| unsafe { (*m).dl_tensor.device.device_type = 2 }),
        ("NULL shape pointer", |m| unsafe { (*m).dl_tensor.shape = null_mut() }),
        ("shape[0] is -3", |m| unsafe { *(*m).dl_tensor.shape = -3 }),
        ("4 lanes", |m| unsafe { (*m).dl_tensor.dtype.lanes = 4 }),
        ("overflows the address space", |m| unsafe { (*m).dl_tensor.byte_offset = u64::MAX - 2 }),
    ];
    for (needle, corrupt) in cases {
        let m = owned(vec![1.0, 2.0, 3.0], 0, &DELETED);
        corrupt(m);
        let mut v = null_mut();
        // SAFETY: a managed tensor whose header the API checks before use.
        unsafe {
            fails(rvm_value_from_dlpack(m, &mut v), RVM_ERROR_VALUE, needle);
            assert_eq!(DELETED.load(Ordering::SeqCst), 0, "{needle}: not taken");
            // Restore what the deleter reads and release it as its owner.
            (*m).dl_tensor.shape = (*(*m).manager_ctx.cast::<Owned>()).shape.as_mut_ptr();
            ((*m).deleter.unwrap())(m);
            DELETED.store(0, Ordering::SeqCst);
        }
    }
    let mut v = null_mut();
    // SAFETY: NULL inputs the API checks.
    unsafe {
        fails(rvm_value_from_dlpack(null_mut(), &mut v), RVM_ERROR_INVALID_ARGUMENT, "found NULL");
        let i = rvm_value_new_int(3);
        let mut view = null_mut();
        fails(rvm_value_to_dlpack(i, &mut view), RVM_ERROR_TYPE, "expected a tensor, found the int 3");
        ok(rvm_value_free(i));
    }
}

#[test]
fn read_only_tensors_stay_read_only() {
    let _serial = serial();
    static DELETED: AtomicUsize = AtomicUsize::new(0);
    let m = owned(vec![1.0, 2.0], RVM_DLPACK_FLAG_READ_ONLY, &DELETED);
    // SAFETY: a valid managed tensor; live handles.
    unsafe {
        let mut v = null_mut();
        ok(rvm_value_from_dlpack(m, &mut v));
        let mut view = null_mut::<DLManagedTensorVersioned>();
        ok(rvm_value_to_dlpack(v, &mut view));
        assert_ne!((*view).flags & RVM_DLPACK_FLAG_READ_ONLY, 0, "exported with the read-only flag");
        ((*view).deleter.unwrap())(view);
        ok(rvm_value_free(v));
    }
    assert_eq!(DELETED.load(Ordering::SeqCst), 1);
    // A constant of the program comes out read-only.
    let vm = vm_of(
        "@main inputs=0 regs=1:\n  call  vm.builtin.copy  in: c[0]  dst: %0\n  ret  %0\n.packed vm.builtin.copy\n\
         .const c[0] = tensor float32 (2,) [1.0, 2.0]\n",
        None,
    );
    let r = call(vm, c"main", &[]).unwrap();
    // SAFETY: live handles.
    unsafe {
        let mut view = null_mut::<DLManagedTensorVersioned>();
        ok(rvm_value_to_dlpack(r, &mut view));
        assert_ne!((*view).flags & RVM_DLPACK_FLAG_READ_ONLY, 0, "a constant is read-only");
        ((*view).deleter.unwrap())(view);
        free(r);
        ok(rvm_vm_free(vm));
    }
}
