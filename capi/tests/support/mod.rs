//! Helpers the C API's test files share: calling the API as C does and reading its errors.

// Each test file is its own crate and uses only some of these.
#![allow(dead_code)]

use relaxvm_capi::error::rvm_error_code;
use relaxvm_capi::error::*;
use relaxvm_capi::executable::*;
use relaxvm_capi::value::*;
use relaxvm_capi::vm::*;
use relaxvm_tvm::ffi::abi::{DLDataType, DLDevice, DLManagedTensorVersioned, DLPackVersion, DLTensor};
use std::ffi::{CStr, CString};
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The tests of a file run one at a time: `rvm_live_handle_count` counts the handles of the
/// whole process, so a test that checks it must not see another test's handles come and go.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The code and message of `e` (freed), or None for success.
pub fn outcome(e: *mut rvm_error) -> Option<(rvm_error_code, String)> {
    if e.is_null() {
        return None;
    }
    // SAFETY: `e` is an error object the API returned; freed once here.
    unsafe {
        let r = (rvm_error_get_code(e), CStr::from_ptr(rvm_error_message(e)).to_string_lossy().into_owned());
        rvm_error_free(e);
        Some(r)
    }
}

pub fn ok(e: *mut rvm_error) {
    if let Some((code, msg)) = outcome(e) {
        panic!("expected success, got {code:?}: {msg}");
    }
}

#[track_caller]
pub fn fails(e: *mut rvm_error, code: rvm_error_code, needle: &str) -> String {
    let (c, msg) = outcome(e).expect("expected an error, got success");
    assert_eq!(c, code, "{msg}");
    assert!(msg.contains(needle), "{msg:?} does not contain {needle:?}");
    msg
}

pub fn exe_of(text: &str) -> *mut rvm_executable {
    let bytes = relaxvm_builder::assemble(text).unwrap().save_to_bytes();
    let mut exe = null_mut();
    // SAFETY: valid bytes, a valid out pointer.
    ok(unsafe { rvm_executable_load_bytes(bytes.as_ptr(), bytes.len(), c"test".as_ptr(), null(), &mut exe) });
    exe
}

pub fn vm_of(text: &str, opts: Option<rvm_vm_options>) -> *mut rvm_vm {
    let exe = exe_of(text);
    let mut vm = null_mut();
    let o = opts.as_ref().map_or(null(), |o| o as *const _);
    // SAFETY: live handles, valid pointers.
    unsafe {
        ok(rvm_vm_create(exe, o, &mut vm));
        ok(rvm_executable_free(exe));
    }
    vm
}

pub const ADD: &str = "@main inputs=2 regs=3 params=(a, b):\n  call  vm.builtin.int.add  in: %0, %1  dst: %2\n  ret  %2\n.packed vm.builtin.int.add\n";

pub fn call(
    vm: *const rvm_vm,
    name: &CStr,
    args: &[*mut rvm_value],
) -> Result<*mut rvm_value, (rvm_error_code, String)> {
    let mut out = null_mut();
    // SAFETY: live handles, valid pointers.
    match outcome(unsafe { rvm_vm_call(vm, name.as_ptr(), args.as_ptr().cast(), args.len(), &mut out) }) {
        None => Ok(out),
        Some(e) => Err(e),
    }
}

/// The error of a call expected to fail (as an error object, for `fails`).
pub fn call_err(vm: *const rvm_vm, name: &CStr, args: &[*mut rvm_value]) -> *mut rvm_error {
    match call(vm, name, args) {
        Ok(v) => {
            free(v);
            null_mut()
        }
        Err((c, m)) => err(c, &m),
    }
}

pub fn free(v: *mut rvm_value) {
    // SAFETY: a live value, freed once.
    ok(unsafe { rvm_value_free(v) });
}

/// The corpus model `name`'s `.so`, when the corpus is built (`RELAXVM_TVM_CORPUS`).
pub fn corpus_model(name: &str) -> Option<std::path::PathBuf> {
    // Without a corpus (the first `cargo test` of scripts/test.sh, before it is built) these
    // tests have nothing to run; scripts/test.sh runs them again with it.
    let root = std::env::var_os("RELAXVM_TVM_CORPUS")?;
    let p = std::path::Path::new(&root).join("hand").join(name).join("model.so");
    assert!(p.exists(), "RELAXVM_TVM_CORPUS is set but has no {}", p.display());
    Some(p)
}

/// An error object made again from a code and message (to reuse `fails`).
pub fn err(code: rvm_error_code, msg: &str) -> *mut rvm_error {
    let m = CString::new(msg).unwrap();
    // SAFETY: a valid string.
    unsafe { rvm_error_new(code as u32, m.as_ptr()) }
}

/// A float32 vector owned by the test, as a DLPack managed tensor; `deleted` counts deleter calls.
pub struct Owned {
    pub managed: DLManagedTensorVersioned,
    pub shape: Vec<i64>,
    _data: Vec<f32>,
    deleted: &'static AtomicUsize,
}

pub unsafe extern "C" fn delete_owned(m: *mut DLManagedTensorVersioned) {
    // SAFETY: made by `Box::into_raw` in `owned`; called once.
    let b = unsafe { Box::from_raw((*m).manager_ctx.cast::<Owned>()) };
    b.deleted.fetch_add(1, Ordering::SeqCst);
}

pub fn owned(data: Vec<f32>, flags: u64, deleted: &'static AtomicUsize) -> *mut DLManagedTensorVersioned {
    let mut b = Box::new(Owned {
        managed: DLManagedTensorVersioned {
            version: DLPackVersion { major: 1, minor: 1 },
            manager_ctx: null_mut(),
            deleter: Some(delete_owned),
            flags,
            dl_tensor: DLTensor {
                data: null_mut(),
                device: DLDevice { device_type: 1, device_id: 0 },
                ndim: 1,
                dtype: DLDataType { code: 2, bits: 32, lanes: 1 },
                shape: null_mut(),
                strides: null_mut(),
                byte_offset: 0,
            },
        },
        shape: vec![data.len() as i64],
        _data: data,
        deleted,
    });
    b.managed.dl_tensor.data = b._data.as_mut_ptr().cast();
    b.managed.dl_tensor.shape = b.shape.as_mut_ptr();
    let p = Box::into_raw(b);
    // SAFETY: `p` is valid; the managed tensor is its first field's address.
    unsafe {
        (*p).managed.manager_ctx = p.cast();
        &mut (*p).managed
    }
}

/// A float32 DLPack tensor over `data` with the dims in `shape`, no deleter: borrowed memory
/// that must outlive every value made from it.
pub fn borrowed_f32(data: &mut [f32], shape: &mut [i64]) -> DLManagedTensorVersioned {
    DLManagedTensorVersioned {
        version: DLPackVersion { major: 1, minor: 1 },
        manager_ctx: null_mut(),
        deleter: None,
        flags: 0,
        dl_tensor: DLTensor {
            data: data.as_mut_ptr().cast(),
            device: DLDevice { device_type: 1, device_id: 0 },
            ndim: shape.len() as i32,
            dtype: DLDataType { code: 2, bits: 32, lanes: 1 },
            shape: shape.as_mut_ptr(),
            strides: null_mut(),
            byte_offset: 0,
        },
    }
}
