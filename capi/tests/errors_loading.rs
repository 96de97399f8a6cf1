//! The C API's loading errors: each names the file and the problem, and a saved TVM model
//! opens its library only with the caller's consent.

use relaxvm_capi::dlpack::*;
use relaxvm_capi::error::rvm_error_code::*;
use relaxvm_capi::executable::*;
use relaxvm_capi::vm::*;
use relaxvm_tvm::ffi::abi::DLManagedTensorVersioned;
use std::ffi::CString;
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicUsize, Ordering};

mod support;
use support::*;

#[test]
fn loading_errors_name_the_file_and_the_problem() {
    let _serial = serial();
    let mut exe = null_mut();
    // SAFETY: valid pointers; the files and bytes are what is being checked.
    unsafe {
        fails(
            rvm_executable_load_file(c"/nonexistent/model.rvx".as_ptr(), null(), &mut exe),
            RVM_ERROR_IO,
            "/nonexistent/model.rvx",
        );
        let junk = b"not an executable at all";
        fails(
            rvm_executable_load_bytes(junk.as_ptr(), junk.len(), c"junk.bin".as_ptr(), null(), &mut exe),
            RVM_ERROR_FORMAT,
            "junk.bin",
        );
        fails(
            rvm_executable_load_bytes(null(), 10, null(), null(), &mut exe),
            RVM_ERROR_INVALID_ARGUMENT,
            "found NULL",
        );
        let mut opts = std::mem::zeroed::<rvm_load_options>();
        ok(rvm_load_options_init(&mut opts));
        opts.native_libraries = 7;
        let bytes = relaxvm_builder::assemble(ADD).unwrap().save_to_bytes();
        fails(
            rvm_executable_load_bytes(bytes.as_ptr(), bytes.len(), null(), &opts, &mut exe),
            RVM_ERROR_INVALID_ARGUMENT,
            "native_libraries is 7",
        );
        opts.native_libraries = RVM_NATIVE_ALLOW_LISTED;
        opts.num_allowed_paths = 1;
        fails(
            rvm_executable_load_bytes(bytes.as_ptr(), bytes.len(), null(), &opts, &mut exe),
            RVM_ERROR_INVALID_ARGUMENT,
            "allowed_paths: expected 1 elements, found NULL",
        );
        ok(rvm_load_options_init(&mut opts));
        opts.max_input_size = 8;
        fails(
            rvm_executable_load_bytes(bytes.as_ptr(), bytes.len(), null(), &opts, &mut exe),
            RVM_ERROR_VALUE,
            "more than max_input_size (8)",
        );
        assert!(exe.is_null(), "no output on failure");
        // A bytecode program calling a function nothing provides fails when the VM is made.
        let exe = exe_of("@main inputs=0 regs=1:\n  call  no.such.fn  dst: %0\n  ret  %0\n.packed no.such.fn\n");
        let mut vm = null_mut();
        fails(rvm_vm_create(exe, null(), &mut vm), RVM_ERROR_UNKNOWN_FUNCTION, "no.such.fn");
        ok(rvm_executable_free(exe));
        fails(rvm_executable_free(exe), RVM_ERROR_INVALID_ARGUMENT, "not a live rvm_executable");
    }
}

#[test]
fn a_saved_tvm_model_opens_its_library_only_with_consent() {
    let _serial = serial();
    let Some(so) = corpus_model("mlp") else { return };
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("model.so");
    std::fs::copy(&so, &lib).unwrap();
    let rvx = dir.path().join("model.rvx");
    relaxvm_tvm::import::load_module(&lib).unwrap().save(&rvx, &Default::default()).unwrap();
    let rvx_c = CString::new(rvx.to_str().unwrap()).unwrap();
    let mut exe = null_mut();
    // SAFETY: valid pointers and options.
    unsafe {
        fails(rvm_executable_load_file(rvx_c.as_ptr(), null(), &mut exe), RVM_ERROR_VALUE, "model.so");
        let mut opts = std::mem::zeroed::<rvm_load_options>();
        ok(rvm_load_options_init(&mut opts));
        let other = CString::new("/nonexistent-folder").unwrap();
        let allowed = [other.as_ptr()];
        opts.native_libraries = RVM_NATIVE_ALLOW_LISTED;
        opts.allowed_paths = allowed.as_ptr();
        opts.num_allowed_paths = 1;
        fails(rvm_executable_load_file(rvx_c.as_ptr(), &opts, &mut exe), RVM_ERROR_VALUE, "model.so");
        let folder = CString::new(dir.path().to_str().unwrap()).unwrap();
        let allowed = [folder.as_ptr()];
        opts.allowed_paths = allowed.as_ptr();
        ok(rvm_executable_load_file(rvx_c.as_ptr(), &opts, &mut exe));
        ok(rvm_executable_free(exe));
    }
}

#[test]
fn a_tvm_model_runs_from_a_path_and_from_bytes_as_in_rust() {
    let _serial = serial();
    let Some(so) = corpus_model("mlp") else { return };
    static DELETED: AtomicUsize = AtomicUsize::new(0);
    let input: Vec<f32> = (0..784).map(|i| (i % 13) as f32 / 13.0).collect();
    // The same model run directly in Rust.
    relaxvm_builtins::ensure_registered();
    let mut direct =
        relaxvm::VirtualMachine::new(std::sync::Arc::new(relaxvm_tvm::import::load_module(&so).unwrap())).unwrap();
    let x = relaxvm::Tensor::from_vec(vec![1, 784], input.clone()).unwrap();
    let want = direct.invoke("main", &[relaxvm::Value::Tensor(x)]).unwrap();
    let want = want.as_tensor().unwrap().to_vec::<f32>().unwrap();
    let path = CString::new(so.to_str().unwrap()).unwrap();
    let bytes = std::fs::read(&so).unwrap();
    for from_bytes in [false, true] {
        let mut exe = null_mut();
        // SAFETY: valid pointers; live handles.
        unsafe {
            if from_bytes {
                ok(rvm_executable_load_bytes(bytes.as_ptr(), bytes.len(), path.as_ptr(), null(), &mut exe));
            } else {
                ok(rvm_executable_load_file(path.as_ptr(), null(), &mut exe));
            }
            let mut vm = null_mut();
            ok(rvm_vm_create(exe, null(), &mut vm));
            ok(rvm_executable_free(exe));
            let m = owned(input.clone(), 0, &DELETED);
            (*m).dl_tensor.ndim = 2;
            let ctx = (*m).manager_ctx.cast::<Owned>();
            (*ctx).shape = vec![1, 784];
            (*m).dl_tensor.shape = (*ctx).shape.as_mut_ptr();
            let mut x = null_mut();
            ok(rvm_value_from_dlpack(m, &mut x));
            let y = call(vm, c"main", &[x]).unwrap();
            let mut view = null_mut::<DLManagedTensorVersioned>();
            ok(rvm_value_to_dlpack(y, &mut view));
            let t = &(*view).dl_tensor;
            assert_eq!(std::slice::from_raw_parts(t.shape, t.ndim as usize), &[1, 10]);
            let got = std::slice::from_raw_parts(t.data.cast::<f32>(), 10);
            assert_eq!(got, &want[..], "bit-identical to the Rust run");
            ((*view).deleter.unwrap())(view);
            free(x);
            free(y);
            ok(rvm_vm_free(vm));
        }
    }
    assert_eq!(DELETED.load(Ordering::SeqCst), 2, "each input released once");
}
