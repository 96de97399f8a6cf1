//! Every error path of the C API, called as C calls it: each failure is an error object with
//! the right code and a message naming what was wrong, never a crash, and frees or takes
//! nothing it should not.

use relaxvm_capi::callback::rvm_register_func;
use relaxvm_capi::dlpack::*;
use relaxvm_capi::error::rvm_error_code::{self, *};
use relaxvm_capi::error::*;
use relaxvm_capi::executable::*;
use relaxvm_capi::string::rvm_string_free;
use relaxvm_capi::value::*;
use relaxvm_capi::vm::*;
use relaxvm_tvm::ffi::abi::{DLDataType, DLDevice, DLManagedTensorVersioned, DLPackVersion, DLTensor};
use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The tests of this file run one at a time: `rvm_live_handle_count` counts the handles of the
/// whole process, so a test that checks it must not see another test's handles come and go.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The code and message of `e` (freed), or None for success.
fn outcome(e: *mut rvm_error) -> Option<(rvm_error_code, String)> {
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

fn ok(e: *mut rvm_error) {
    if let Some((code, msg)) = outcome(e) {
        panic!("expected success, got {code:?}: {msg}");
    }
}

#[track_caller]
fn fails(e: *mut rvm_error, code: rvm_error_code, needle: &str) -> String {
    let (c, msg) = outcome(e).expect("expected an error, got success");
    assert_eq!(c, code, "{msg}");
    assert!(msg.contains(needle), "{msg:?} does not contain {needle:?}");
    msg
}

fn exe_of(text: &str) -> *mut rvm_executable {
    let bytes = relaxvm_builder::assemble(text).unwrap().save_to_bytes();
    let mut exe = null_mut();
    // SAFETY: valid bytes, a valid out pointer.
    ok(unsafe { rvm_executable_load_bytes(bytes.as_ptr(), bytes.len(), c"test".as_ptr(), null(), &mut exe) });
    exe
}

fn vm_of(text: &str, opts: Option<rvm_vm_options>) -> *mut rvm_vm {
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

const ADD: &str = "@main inputs=2 regs=3 params=(a, b):\n  call  vm.builtin.int.add  in: %0, %1  dst: %2\n  ret  %2\n.packed vm.builtin.int.add\n";

fn call(vm: *const rvm_vm, name: &CStr, args: &[*mut rvm_value]) -> Result<*mut rvm_value, (rvm_error_code, String)> {
    let mut out = null_mut();
    // SAFETY: live handles, valid pointers.
    match outcome(unsafe { rvm_vm_call(vm, name.as_ptr(), args.as_ptr().cast(), args.len(), &mut out) }) {
        None => Ok(out),
        Some(e) => Err(e),
    }
}

/// The error of a call expected to fail (as an error object, for `fails`).
fn call_err(vm: *const rvm_vm, name: &CStr, args: &[*mut rvm_value]) -> *mut rvm_error {
    match call(vm, name, args) {
        Ok(v) => {
            free(v);
            null_mut()
        }
        Err((c, m)) => err(c, &m),
    }
}

fn free(v: *mut rvm_value) {
    // SAFETY: a live value, freed once.
    ok(unsafe { rvm_value_free(v) });
}

#[test]
fn calls_succeed_and_return_owned_values() {
    let _serial = serial();
    let vm = vm_of(ADD, None);
    let (a, b) = (rvm_value_new_int(2), rvm_value_new_int(40));
    let r = call(vm, c"main", &[a, b]).unwrap();
    let mut x = 0;
    // SAFETY: live handles.
    unsafe {
        ok(rvm_value_get_int(r, &mut x));
        assert_eq!(rvm_value_get_kind(r), rvm_value_kind::RVM_VALUE_INT);
    }
    assert_eq!(x, 42);
    for v in [a, b, r] {
        free(v);
    }
    // SAFETY: a live VM, freed once.
    ok(unsafe { rvm_vm_free(vm) });
}

#[test]
fn null_and_wrong_handles_are_errors() {
    let _serial = serial();
    let vm = vm_of(ADD, None);
    let v = rvm_value_new_int(1);
    let mut out = null_mut();
    let mut x = 0i64;
    // SAFETY: each call passes pointers the API must check before use: NULL, a handle of
    // another type, a freed handle, an address that never was a handle.
    unsafe {
        fails(rvm_vm_call(null(), c"main".as_ptr(), null(), 0, &mut out), RVM_ERROR_INVALID_ARGUMENT, "found NULL");
        fails(rvm_vm_call(vm, null(), null(), 0, &mut out), RVM_ERROR_INVALID_ARGUMENT, "name: expected a string");
        fails(
            rvm_vm_call(vm, c"main".as_ptr(), null(), 0, null_mut()),
            RVM_ERROR_INVALID_ARGUMENT,
            "output pointer is NULL",
        );
        fails(
            rvm_vm_call(vm, c"main".as_ptr(), null(), 2, &mut out),
            RVM_ERROR_INVALID_ARGUMENT,
            "expected 2 elements, found NULL",
        );
        fails(
            rvm_vm_call(v.cast::<rvm_vm>(), c"main".as_ptr(), null(), 0, &mut out),
            RVM_ERROR_INVALID_ARGUMENT,
            "expected an rvm_vm handle, found an rvm_value handle",
        );
        fails(
            rvm_value_get_int(vm.cast(), &mut x),
            RVM_ERROR_INVALID_ARGUMENT,
            "expected an rvm_value handle, found an rvm_vm",
        );
        let stack = 7u64;
        fails(
            rvm_value_get_int((&stack as *const u64).cast(), &mut x),
            RVM_ERROR_INVALID_ARGUMENT,
            "is not a live rvm_value handle",
        );
        fails(rvm_value_get_int(v, null_mut()), RVM_ERROR_INVALID_ARGUMENT, "output pointer is NULL");
        // Huge counts are refused before any pointer is read.
        let args = [v];
        fails(
            rvm_vm_call(vm, c"main".as_ptr(), args.as_ptr().cast(), usize::MAX, &mut out),
            RVM_ERROR_INVALID_ARGUMENT,
            "more than the 4294967296 allowed",
        );
        assert_eq!(rvm_value_get_kind(vm.cast()), rvm_value_kind::RVM_VALUE_INVALID);
        ok(rvm_value_free(v));
        // Use after free and double free.
        fails(rvm_value_get_int(v, &mut x), RVM_ERROR_INVALID_ARGUMENT, "freed already");
        fails(rvm_value_free(v), RVM_ERROR_INVALID_ARGUMENT, "not a live rvm_value handle");
        ok(rvm_value_free(null_mut()));
        ok(rvm_vm_free(vm));
        fails(rvm_vm_free(vm), RVM_ERROR_INVALID_ARGUMENT, "not a live rvm_vm handle");
        // The error accessors on NULL and on a non-error.
        assert_eq!(rvm_error_get_code(null()), RVM_OK);
        assert_eq!(CStr::from_ptr(rvm_error_message(null())).to_str().unwrap(), "no error");
        assert_eq!(rvm_error_get_code(vm.cast()), RVM_ERROR_INVALID_ARGUMENT);
        rvm_error_free(vm.cast()); // not an error: ignored
    }
}

#[test]
fn strings_are_checked_and_freed_once() {
    let _serial = serial();
    let mut v = null_mut();
    // SAFETY: valid or deliberately invalid inputs the API checks.
    unsafe {
        fails(rvm_value_new_str(b"\xff\xfe".as_ptr().cast(), 2, &mut v), RVM_ERROR_INVALID_ARGUMENT, "not valid UTF-8");
        fails(rvm_value_new_str(null(), 3, &mut v), RVM_ERROR_INVALID_ARGUMENT, "found NULL");
        ok(rvm_value_new_str(b"a\0b".as_ptr().cast(), 3, &mut v));
        let (mut p, mut n): (*const c_char, usize) = (null(), 0);
        ok(rvm_value_get_str(v, &mut p, &mut n));
        assert_eq!(std::slice::from_raw_parts(p.cast::<u8>(), n + 1), b"a\0b\0");
        let mut i = 0;
        fails(rvm_value_get_int(v, &mut i), RVM_ERROR_TYPE, "expected an int, found a string");
        let mut text = null_mut();
        ok(rvm_value_to_string(v, &mut text));
        ok(rvm_string_free(text));
        fails(rvm_string_free(text), RVM_ERROR_INVALID_ARGUMENT, "not a live string");
        ok(rvm_value_free(v));
        let vm = vm_of(ADD, None);
        let bad = CString::from_vec_unchecked(b"ma\xffin".to_vec());
        let mut out = null_mut();
        fails(rvm_vm_call(vm, bad.as_ptr(), null(), 0, &mut out), RVM_ERROR_INVALID_ARGUMENT, "not valid UTF-8");
        fails(
            rvm_executable_load_file(bad.as_ptr(), null(), &mut null_mut()),
            RVM_ERROR_INVALID_ARGUMENT,
            "path: not valid UTF-8",
        );
        ok(rvm_vm_free(vm));
    }
}

#[test]
fn shapes_and_tuples() {
    let _serial = serial();
    let mut s = null_mut();
    let mut t = null_mut();
    // SAFETY: valid inputs and live handles, or inputs the API checks.
    unsafe {
        fails(rvm_value_new_shape([2i64, -1].as_ptr(), 2, &mut s), RVM_ERROR_VALUE, "dims[1] is -1");
        ok(rvm_value_new_shape([2i64, 3].as_ptr(), 2, &mut s));
        let items = [s as *const rvm_value, s];
        ok(rvm_value_new_tuple(items.as_ptr(), 2, &mut t));
        let mut n = 0;
        ok(rvm_value_tuple_size(t, &mut n));
        assert_eq!(n, 2);
        let mut item = null_mut();
        fails(rvm_value_tuple_get(t, 2, &mut item), RVM_ERROR_INDEX, "index 2 out of range for a tuple of 2");
        ok(rvm_value_tuple_get(t, 1, &mut item));
        let (mut dims, mut nd): (*const i64, usize) = (null(), 0);
        ok(rvm_value_get_shape(item, &mut dims, &mut nd));
        assert_eq!(std::slice::from_raw_parts(dims, nd), &[2, 3]);
        fails(rvm_value_tuple_size(item, &mut n), RVM_ERROR_TYPE, "expected a tuple, found a shape");
        for v in [s, t, item] {
            ok(rvm_value_free(v));
        }
    }
}

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

/// The corpus model `name`'s `.so`, when the corpus is built (`RELAXVM_TVM_CORPUS`).
fn corpus_model(name: &str) -> Option<std::path::PathBuf> {
    // Without a corpus (the first `cargo test` of scripts/test.sh, before it is built) these
    // tests have nothing to run; scripts/test.sh runs them again with it.
    let root = std::env::var_os("RELAXVM_TVM_CORPUS")?;
    let p = std::path::Path::new(&root).join("hand").join(name).join("model.so");
    assert!(p.exists(), "RELAXVM_TVM_CORPUS is set but has no {}", p.display());
    Some(p)
}

#[test]
fn unknown_functions_list_the_functions() {
    let _serial = serial();
    let vm = vm_of(ADD, None);
    let msg = fails(call_err(vm, c"mian", &[]), RVM_ERROR_UNKNOWN_FUNCTION, "its functions are: main");
    assert!(msg.contains("\"mian\""), "{msg}");
    let a = rvm_value_new_int(1);
    fails(call_err(vm, c"main", &[a]), RVM_ERROR_ARITY, "main");
    free(a);
    // SAFETY: a live VM, freed once.
    ok(unsafe { rvm_vm_free(vm) });
}

/// An error object made again from a code and message (to reuse `fails`).
fn err(code: rvm_error_code, msg: &str) -> *mut rvm_error {
    let m = CString::new(msg).unwrap();
    // SAFETY: a valid string.
    unsafe { rvm_error_new(code as u32, m.as_ptr()) }
}

const SPIN: &str = "@spin inputs=0 regs=1:\n  call  test.spinning  dst: void\n  goto  -1\n.packed test.spinning\n";

static SPINNING: AtomicBool = AtomicBool::new(false);

unsafe extern "C" fn spinning(
    _: *mut c_void,
    _: *const *const rvm_value,
    _: usize,
    _: *mut *mut rvm_value,
) -> *mut rvm_error {
    SPINNING.store(true, Ordering::SeqCst);
    null_mut()
}

#[test]
fn a_step_budget_and_an_interrupt_stop_endless_loops() {
    let _serial = serial();
    // SAFETY: a valid name and function.
    ok(unsafe { rvm_register_func(c"test.spinning".as_ptr(), Some(spinning), null_mut(), None, true) });
    let mut opts = unsafe { std::mem::zeroed::<rvm_vm_options>() };
    // SAFETY: a valid pointer.
    ok(unsafe { rvm_vm_options_init_sized(&mut opts, std::mem::size_of::<rvm_vm_options>()) });
    opts.step_budget = 5000;
    let vm = vm_of(SPIN, Some(opts));
    fails(call_err(vm, c"spin", &[]), RVM_ERROR_STEP_BUDGET, "5000");
    // SAFETY: a live VM, freed once.
    ok(unsafe { rvm_vm_free(vm) });

    let vm = vm_of(SPIN, None);
    let vm_addr = vm as usize;
    let runner = std::thread::spawn(move || call(vm_addr as *const rvm_vm, c"spin", &[]).map(|v| v as usize));
    // Interrupt once the loop runs (each call starts uninterrupted), and again until it ends:
    // an interrupt is seen at the next check, whatever the scheduling.
    while !SPINNING.load(Ordering::SeqCst) {
        std::thread::yield_now();
    }
    while !runner.is_finished() {
        // SAFETY: the VM lives until the runner is joined.
        ok(unsafe { rvm_vm_interrupt(vm) });
        std::thread::yield_now();
    }
    let (code, msg) = runner.join().unwrap().unwrap_err();
    assert_eq!(code, RVM_ERROR_INTERRUPTED, "{msg}");
    // SAFETY: a live VM, no call running.
    ok(unsafe { rvm_vm_free(vm) });
}

/// The VM `test.reenter` calls.
static TARGET: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn reenter(
    _: *mut c_void,
    _: *const *const rvm_value,
    _: usize,
    out: *mut *mut rvm_value,
) -> *mut rvm_error {
    // SAFETY: TARGET holds a VM handle (or a stale one, which the API detects).
    unsafe { rvm_vm_call(TARGET.load(Ordering::SeqCst) as *const rvm_vm, c"one".as_ptr(), null(), 0, out) }
}

unsafe extern "C" fn failing(
    _: *mut c_void,
    _: *const *const rvm_value,
    _: usize,
    out: *mut *mut rvm_value,
) -> *mut rvm_error {
    // A result written as well as an error: the error wins, the result is released.
    // SAFETY: `out` is the runtime's result slot.
    unsafe {
        *out = rvm_value_new_int(5);
        rvm_error_new(RVM_ERROR_ARITHMETIC as u32, c"custom failure".as_ptr())
    }
}

unsafe extern "C" fn bad_result(
    _: *mut c_void,
    _: *const *const rvm_value,
    _: usize,
    out: *mut *mut rvm_value,
) -> *mut rvm_error {
    // SAFETY: `out` is the runtime's result slot; the value is not a handle.
    unsafe { *out = 16usize as *mut rvm_value };
    null_mut()
}

static FREED: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn count_free(_: *mut c_void) {
    FREED.fetch_add(1, Ordering::SeqCst);
}

#[test]
fn registered_c_functions_report_their_errors() {
    let _serial = serial();
    // SAFETY: valid names, functions and handles.
    unsafe {
        fails(
            rvm_register_func(c"test.none".as_ptr(), None, null_mut(), None, false),
            RVM_ERROR_INVALID_ARGUMENT,
            "f is NULL",
        );
        fails(
            rvm_register_func(c"vm.builtin.int.add".as_ptr(), Some(failing), null_mut(), None, false),
            RVM_ERROR_ALREADY_REGISTERED,
            "vm.builtin.int.add",
        );
        ok(rvm_register_func(c"test.failing".as_ptr(), Some(failing), null_mut(), Some(count_free), true));
        ok(rvm_register_func(c"test.bad_result".as_ptr(), Some(bad_result), null_mut(), None, true));
        let text = "@main inputs=0 regs=1:\n  call  test.failing  dst: %0\n  ret  %0\n.packed test.failing\n\
                    @bad inputs=0 regs=1:\n  call  test.bad_result  dst: %0\n  ret  %0\n.packed test.bad_result\n\
                    @again inputs=0 regs=1:\n  call  test.reenter  dst: %0\n  ret  %0\n.packed test.reenter\n\
                    @one inputs=0 regs=1:\n  call  vm.builtin.null_value  dst: %0\n  ret  %0\n.packed vm.builtin.null_value\n";
        ok(rvm_register_func(c"test.reenter".as_ptr(), Some(reenter), null_mut(), None, true));
        let vm = vm_of(text, None);
        let before = relaxvm_capi::error::rvm_live_handle_count();
        let (code, msg) = call(vm, c"main", &[]).unwrap_err();
        assert_eq!(code, RVM_ERROR_ARITHMETIC, "{msg}");
        assert!(msg.contains("test.failing: custom failure"), "{msg}");
        let (code, msg) = call(vm, c"bad", &[]).unwrap_err();
        assert_eq!(code, RVM_ERROR_INVALID_ARGUMENT, "{msg}");
        assert!(msg.contains("test.bad_result returned an invalid result"), "{msg}");
        assert_eq!(relaxvm_capi::error::rvm_live_handle_count(), before, "arguments and results were released");
        // A callback calling the VM that runs it is refused at once, not a deadlock.
        TARGET.store(vm as usize, Ordering::SeqCst);
        let (code, msg) = call(vm, c"again", &[]).unwrap_err();
        assert_eq!(code, RVM_ERROR_BUSY, "{msg}");
        // Calling another VM from a callback works.
        let other = vm_of(text, None);
        free(call(other, c"again", &[]).unwrap());
        ok(rvm_vm_free(vm));
        // A callback using a VM freed meanwhile gets an error object.
        let (code, msg) = call(other, c"again", &[]).unwrap_err();
        assert_eq!(code, RVM_ERROR_INVALID_ARGUMENT, "{msg}");
        assert!(msg.contains("not a live rvm_vm handle"), "{msg}");
        ok(rvm_vm_free(other));
        // Replacing a function releases its user data.
        ok(rvm_register_func(c"test.failing".as_ptr(), Some(failing), null_mut(), None, true));
        assert_eq!(FREED.load(Ordering::SeqCst), 1);
        // Error codes made by C: an unknown code becomes RVM_ERROR_OTHER.
        fails(rvm_error_new(999, c"odd".as_ptr()), RVM_ERROR_OTHER, "odd");
        fails(rvm_error_new(RVM_OK as u32, null()), RVM_ERROR_OTHER, "");
    }
}

/// A float32 vector owned by the test, as a DLPack managed tensor; `deleted` counts deleter calls.
struct Owned {
    managed: DLManagedTensorVersioned,
    shape: Vec<i64>,
    _data: Vec<f32>,
    deleted: &'static AtomicUsize,
}

unsafe extern "C" fn delete_owned(m: *mut DLManagedTensorVersioned) {
    // SAFETY: made by `Box::into_raw` in `owned`; called once.
    let b = unsafe { Box::from_raw((*m).manager_ctx.cast::<Owned>()) };
    b.deleted.fetch_add(1, Ordering::SeqCst);
}

fn owned(data: Vec<f32>, flags: u64, deleted: &'static AtomicUsize) -> *mut DLManagedTensorVersioned {
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

#[test]
fn profiling_needs_the_option_and_a_known_format() {
    let _serial = serial();
    let a = rvm_value_new_int(1);
    let args = [a, a];
    let mut report = null_mut();
    let vm = vm_of(ADD, None);
    // SAFETY: live handles, valid pointers.
    unsafe {
        fails(
            rvm_vm_profile(vm, c"main".as_ptr(), args.as_ptr().cast(), 2, RVM_PROFILE_TABLE, &mut report),
            RVM_ERROR_VALUE,
            "built without profiling",
        );
        ok(rvm_vm_free(vm));
        let mut opts = std::mem::zeroed::<rvm_vm_options>();
        ok(rvm_vm_options_init_sized(&mut opts, std::mem::size_of::<rvm_vm_options>()));
        opts.profile = true;
        let vm = vm_of(ADD, Some(opts));
        fails(
            rvm_vm_profile(vm, c"main".as_ptr(), args.as_ptr().cast(), 2, 9, &mut report),
            RVM_ERROR_INVALID_ARGUMENT,
            "format is 9",
        );
        for format in [RVM_PROFILE_TABLE, RVM_PROFILE_CSV, RVM_PROFILE_JSON, RVM_PROFILE_CHROME_TRACE] {
            ok(rvm_vm_profile(vm, c"main".as_ptr(), args.as_ptr().cast(), 2, format, &mut report));
            let text = CStr::from_ptr(report).to_str().unwrap().to_string();
            assert!(text.contains("vm.builtin.int.add"), "{text}");
            ok(rvm_string_free(report));
        }
        ok(rvm_vm_free(vm));
        ok(rvm_value_free(a));
    }
}

#[test]
fn vm_options_are_checked() {
    let _serial = serial();
    // SAFETY: valid pointers.
    unsafe {
        let mut opts = std::mem::zeroed::<rvm_vm_options>();
        // (NULL and a wrong size: tests/tvm_protocols.rs.)
        ok(rvm_vm_options_init_sized(&mut opts, std::mem::size_of::<rvm_vm_options>()));
        opts.num_threads = 5000;
        let exe = exe_of(ADD);
        let mut vm = null_mut();
        fails(rvm_vm_create(exe, &opts, &mut vm), RVM_ERROR_VALUE, "num_threads");
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

#[test]
fn tuples_nest_at_most_the_limit() {
    let _serial = serial();
    let mut v = rvm_value_new_int(0);
    // SAFETY: live handles, valid pointers.
    unsafe {
        for _ in 0..relaxvm_capi::value::RVM_MAX_TUPLE_NESTING - 1 {
            let mut t = null_mut();
            let items = [v as *const rvm_value];
            ok(rvm_value_new_tuple(items.as_ptr(), 1, &mut t));
            ok(rvm_value_free(v));
            v = t;
        }
        let mut t = null_mut();
        let items = [v as *const rvm_value];
        ok(rvm_value_new_tuple(items.as_ptr(), 1, &mut t));
        let deeper = [t as *const rvm_value];
        let mut over = null_mut();
        fails(rvm_value_new_tuple(deeper.as_ptr(), 1, &mut over), RVM_ERROR_VALUE, "more than 1000 levels");
        // Sharing is cheap to check: (v, v) nested 60 deep has 2^60 paths but 60 tuples.
        let mut s = rvm_value_new_int(1);
        for _ in 0..60 {
            let mut n = null_mut();
            let items = [s as *const rvm_value, s];
            ok(rvm_value_new_tuple(items.as_ptr(), 2, &mut n));
            ok(rvm_value_free(s));
            s = n;
        }
        let mut text = null_mut();
        ok(rvm_value_to_string(t, &mut text));
        ok(rvm_string_free(text));
        for h in [v, t, s] {
            ok(rvm_value_free(h));
        }
    }
}

/// capi/01: a `free_user_data` that calls the API (here: registers again) must not find the
/// registry locked; nor may a DLPack deleter that calls the API find the handle table locked.
unsafe extern "C" fn free_by_reregistering(_: *mut c_void) {
    // SAFETY: a valid name and function.
    let e = unsafe { rvm_register_func(c"test.reentrant_free_other".as_ptr(), Some(spinning), null_mut(), None, true) };
    assert!(e.is_null());
    REENTRANT_FREES.fetch_add(1, Ordering::SeqCst);
}

static REENTRANT_FREES: AtomicUsize = AtomicUsize::new(0);

#[test]
fn destructors_that_call_the_api_find_no_lock_held() {
    let _serial = serial();
    // SAFETY: valid names and functions.
    unsafe {
        ok(rvm_register_func(
            c"test.reentrant_free".as_ptr(),
            Some(spinning),
            null_mut(),
            Some(free_by_reregistering),
            true,
        ));
        ok(rvm_register_func(c"test.reentrant_free".as_ptr(), Some(spinning), null_mut(), None, true));
    }
    assert_eq!(REENTRANT_FREES.load(Ordering::SeqCst), 1);

    unsafe extern "C" fn delete_calling_api(m: *mut DLManagedTensorVersioned) {
        // SAFETY: the API is callable here; `m` is the tensor made below, released once.
        unsafe {
            let v = rvm_value_new_int(1);
            assert!(rvm_value_free(v).is_null());
            drop(Box::from_raw((*m).manager_ctx.cast::<(Vec<f32>, Vec<i64>)>()));
            drop(Box::from_raw(m));
        }
    }
    let ctx = Box::into_raw(Box::new((vec![1.0f32, 2.0], vec![2i64])));
    // SAFETY: `ctx` is valid until the deleter frees it.
    let m = unsafe {
        Box::into_raw(Box::new(DLManagedTensorVersioned {
            version: DLPackVersion { major: 1, minor: 0 },
            manager_ctx: ctx.cast(),
            deleter: Some(delete_calling_api),
            flags: 0,
            dl_tensor: DLTensor {
                data: (*ctx).0.as_mut_ptr().cast(),
                device: DLDevice { device_type: 1, device_id: 0 },
                ndim: 1,
                dtype: DLDataType { code: 2, bits: 32, lanes: 1 },
                shape: (*ctx).1.as_mut_ptr(),
                strides: null_mut(),
                byte_offset: 0,
            },
        }))
    };
    let mut v = null_mut();
    // SAFETY: a valid managed tensor; the value is freed once, which runs the deleter.
    unsafe {
        ok(rvm_value_from_dlpack(m, &mut v));
        ok(rvm_value_free(v));
    }
}
