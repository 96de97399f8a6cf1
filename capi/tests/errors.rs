//! Every error path of the C API, called as C calls it: each failure is an error object with
//! the right code and a message naming what was wrong, never a crash, and frees or takes
//! nothing it should not.

use relaxvm_capi::callback::rvm_register_func;
use relaxvm_capi::dlpack::*;
use relaxvm_capi::error::rvm_error_code::*;
use relaxvm_capi::error::*;
use relaxvm_capi::executable::*;
use relaxvm_capi::string::rvm_string_free;
use relaxvm_capi::value::*;
use relaxvm_capi::vm::*;
use relaxvm_tvm::ffi::abi::{DLDataType, DLDevice, DLManagedTensorVersioned, DLPackVersion, DLTensor};
use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

mod support;
use support::*;

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
