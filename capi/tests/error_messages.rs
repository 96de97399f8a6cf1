//! The whole message of the C API's errors (tests/errors*.rs check each path's code and a piece
//! of its message; this checks what each says: the function and argument, what was expected,
//! what was found).

use relaxvm_capi::callback::rvm_register_func;
use relaxvm_capi::dlpack::*;
use relaxvm_capi::error::rvm_error_code::{self, *};
use relaxvm_capi::error::*;
use relaxvm_capi::executable::*;
use relaxvm_capi::value::*;
use relaxvm_capi::vm::*;
use relaxvm_tvm::ffi::abi::{DLDevice, DLManagedTensorVersioned};
use std::ffi::{c_char, c_void, CStr};
use std::ptr::{null, null_mut};

/// The code and message of error `e` (freed); panics on success.
#[track_caller]
fn error_of(e: *mut rvm_error) -> (rvm_error_code, String) {
    assert!(!e.is_null(), "expected an error, got success");
    // SAFETY: an error object the API returned; freed once here.
    unsafe {
        let r = (rvm_error_get_code(e), CStr::from_ptr(rvm_error_message(e)).to_string_lossy().into_owned());
        rvm_error_free(e);
        r
    }
}

#[track_caller]
fn is(e: *mut rvm_error, code: rvm_error_code, message: &str) {
    assert_eq!(error_of(e), (code, message.to_string()));
}

mod support;
use support::{exe_of, ok, ADD};

fn vm_of(text: &str) -> *mut rvm_vm {
    support::vm_of(text, None)
}

#[test]
fn strings_and_output_pointers() {
    let mut v = null_mut();
    // SAFETY: the pointers are NULL or valid, as each case says.
    unsafe {
        let bad = [b'a', 0xff, b'b'];
        is(
            rvm_value_new_str(bad.as_ptr().cast::<c_char>(), 3, &mut v),
            RVM_ERROR_INVALID_ARGUMENT,
            "rvm_value_new_str: not valid UTF-8 (byte 1 of 3)",
        );
        is(
            rvm_value_new_str(c"x".as_ptr(), 1, null_mut()),
            RVM_ERROR_INVALID_ARGUMENT,
            "rvm_value_new_str: the output pointer is NULL",
        );
        is(
            rvm_value_new_str(c"x".as_ptr(), usize::MAX / 2, &mut v),
            RVM_ERROR_INVALID_ARGUMENT,
            &format!("rvm_value_new_str: data: {} elements is more than the {} allowed", usize::MAX / 2, 1u64 << 32),
        );
        let exe_name = [b'p', 0xfe, 0];
        let mut exe = null_mut();
        let bytes = relaxvm_builder::assemble(ADD).unwrap().save_to_bytes();
        is(
            rvm_executable_load_bytes(bytes.as_ptr(), bytes.len(), exe_name.as_ptr().cast(), null(), &mut exe),
            RVM_ERROR_INVALID_ARGUMENT,
            "rvm_executable_load_bytes: name: not valid UTF-8 (byte 1 of \"p\u{fffd}\")",
        );
        is(
            rvm_executable_load_file(null(), null(), &mut exe),
            RVM_ERROR_INVALID_ARGUMENT,
            "rvm_executable_load_file: path: expected a string, found NULL",
        );
        let i = rvm_value_new_int(3);
        let mut x = 0.0f64;
        is(
            rvm_value_get_float(i, null_mut()),
            RVM_ERROR_INVALID_ARGUMENT,
            "rvm_value_get_float: the output pointer is NULL",
        );
        let s = {
            let mut s = null_mut();
            ok(rvm_value_new_str(c"t".as_ptr(), 1, &mut s));
            s
        };
        is(rvm_value_get_float(s, &mut x), RVM_ERROR_TYPE, "rvm_value_get_float: expected a float, found a string");
        let mut b = false;
        is(rvm_value_get_bool(i, &mut b), RVM_ERROR_TYPE, "rvm_value_get_bool: expected a bool, found the int 3");
        let mut n = 0usize;
        is(rvm_value_tuple_size(i, &mut n), RVM_ERROR_TYPE, "rvm_value_tuple_size: expected a tuple, found the int 3");
        ok(rvm_value_free(s));
        ok(rvm_value_free(i));
        // A freed handle.
        let addr = i as usize;
        let e = error_of(rvm_value_get_bool(i, &mut b));
        assert_eq!(e.0, RVM_ERROR_INVALID_ARGUMENT);
        assert_eq!(
            e.1,
            format!(
                "rvm_value_get_bool: {addr:#x} is not a live rvm_value handle (freed already, or not made by relaxvm)"
            )
        );
    }
}

#[test]
fn shapes_and_tuples() {
    let mut v = null_mut();
    // SAFETY: valid pointers.
    unsafe {
        let dims = [2i64, -1];
        is(
            rvm_value_new_shape(dims.as_ptr(), 2, &mut v),
            RVM_ERROR_VALUE,
            "rvm_value_new_shape: dims[1] is -1; dimensions must be >= 0",
        );
        // A tuple nested to the limit, then one level more.
        let mut t = rvm_value_new_int(1);
        for _ in 0..RVM_MAX_TUPLE_NESTING {
            let items = [t as *const rvm_value];
            let mut outer = null_mut();
            ok(rvm_value_new_tuple(items.as_ptr(), 1, &mut outer));
            ok(rvm_value_free(t));
            t = outer;
        }
        let items = [t as *const rvm_value];
        is(
            rvm_value_new_tuple(items.as_ptr(), 1, &mut v),
            RVM_ERROR_VALUE,
            &format!("rvm_value_new_tuple: tuples would nest more than {RVM_MAX_TUPLE_NESTING} levels deep"),
        );
        ok(rvm_value_free(t));
    }
}

#[test]
fn registration_and_calls() {
    // SAFETY: valid pointers and live handles.
    unsafe {
        is(
            rvm_register_func(c"errsb.none".as_ptr(), None, null_mut(), None, false),
            RVM_ERROR_INVALID_ARGUMENT,
            "rvm_register_func: f is NULL",
        );
        let vm = vm_of(ADD);
        let a = rvm_value_new_int(1);
        let args = [a as *const rvm_value, a];
        let mut out = null_mut();
        is(
            rvm_vm_call(vm, c"mian".as_ptr(), args.as_ptr(), 2, &mut out),
            RVM_ERROR_UNKNOWN_FUNCTION,
            "rvm_vm_call: no function \"mian\" in the executable; its functions are: main",
        );
        is(
            rvm_vm_invoke(vm, a, args.as_ptr(), 2, &mut out),
            RVM_ERROR_TYPE,
            "rvm_vm_invoke: func: expected a function, found the int 1",
        );
        let mut report = null_mut();
        is(
            rvm_vm_profile(vm, c"main".as_ptr(), args.as_ptr(), 2, 7, &mut report),
            RVM_ERROR_INVALID_ARGUMENT,
            "rvm_vm_profile: format is 7; expected RVM_PROFILE_TABLE (0), _CSV (1), _JSON (2) or _CHROME_TRACE (3)",
        );
        ok(rvm_vm_free(vm));
        ok(rvm_value_free(a));
    }
}

/// A C function that returns a pointer that is not an error object as its error.
unsafe extern "C" fn returns_a_bogus_error(
    _: *mut c_void,
    _: *const *const rvm_value,
    _: usize,
    _: *mut *mut rvm_value,
) -> *mut rvm_error {
    std::ptr::without_provenance_mut(0x1000)
}

#[test]
fn a_c_function_returning_a_pointer_that_is_no_error() {
    // SAFETY: a valid name and function; live handles.
    unsafe {
        ok(rvm_register_func(c"errsb.bogus".as_ptr(), Some(returns_a_bogus_error), null_mut(), None, true));
        let vm = vm_of("@main inputs=0 regs=1:\n  call  errsb.bogus  dst: %0\n  ret  %0\n.packed errsb.bogus\n");
        let mut out = null_mut();
        let (code, msg) = error_of(rvm_vm_call(vm, c"main".as_ptr(), null(), 0, &mut out));
        assert_eq!(code, RVM_ERROR_INVALID_ARGUMENT, "{msg}");
        assert!(
            msg.contains("errsb.bogus returned an invalid error: errsb.bogus: 0x1000 is not a live rvm_error handle"),
            "{msg}"
        );
        ok(rvm_vm_free(vm));
    }
}

/// A DLPack tensor of 3 floats at `data`, its shape at `shape`, no deleter (borrowed).
fn tensor(data: &mut [f32; 3], shape: &mut [i64; 1]) -> DLManagedTensorVersioned {
    support::borrowed_f32(data, shape)
}

#[test]
fn dlpack_headers() {
    let (mut data, mut shape, mut strides) = ([1.0f32, 2.0, 3.0], [3i64], [-1i64]);
    let mut v = null_mut();
    /// Changes one field of a tensor (given a negative-strides array it may point to).
    type Corrupt = fn(&mut DLManagedTensorVersioned, *mut i64);
    let cases: [(Corrupt, &str); 4] = [
        (|m, _| m.version.major = 2, "rvm_value_from_dlpack: DLPack version 2.1 is not supported (expected 1.x)"),
        (
            |m, _| m.dl_tensor.device = DLDevice { device_type: 2, device_id: 3 },
            "rvm_value_from_dlpack: DLPack tensor on device type 2 (id 3): relaxvm's C API takes CPU tensors (kDLCPU = 1)",
        ),
        (|m, _| m.dl_tensor.ndim = 65, "rvm_value_from_dlpack: DLPack ndim 65 is more than the 64 supported"),
        (
            |m, strides| m.dl_tensor.strides = strides,
            "rvm_value_from_dlpack: DLPack strides[0] is -1: relaxvm takes tensors whose strides are all >= 0",
        ),
    ];
    for (corrupt, message) in cases {
        let mut m = tensor(&mut data, &mut shape);
        corrupt(&mut m, strides.as_mut_ptr());
        // SAFETY: a managed tensor whose header the API checks before using its memory.
        is(unsafe { rvm_value_from_dlpack(&mut m, &mut v) }, RVM_ERROR_VALUE, message);
    }
    // SAFETY: NULL, which the API checks.
    is(
        unsafe { rvm_value_from_dlpack(null_mut(), &mut v) },
        RVM_ERROR_INVALID_ARGUMENT,
        "rvm_value_from_dlpack: expected a DLManagedTensorVersioned, found NULL",
    );
}

#[test]
fn load_and_vm_options() {
    let bytes = relaxvm_builder::assemble(ADD).unwrap().save_to_bytes();
    // SAFETY: valid pointers; options initialised by the API.
    unsafe {
        let mut opts = std::mem::zeroed::<rvm_load_options>();
        ok(rvm_load_options_init(&mut opts));
        opts.native_libraries = 7;
        let mut exe = null_mut();
        is(
            rvm_executable_load_bytes(bytes.as_ptr(), bytes.len(), c"test".as_ptr(), &opts, &mut exe),
            RVM_ERROR_INVALID_ARGUMENT,
            "rvm_executable_load_bytes: native_libraries is 7; expected RVM_NATIVE_REFUSE (0), RVM_NATIVE_ALLOW_LISTED (1) or RVM_NATIVE_ANY (2)",
        );
        let mut vm_opts = std::mem::zeroed::<rvm_vm_options>();
        ok(rvm_vm_options_init_sized(&mut vm_opts, std::mem::size_of::<rvm_vm_options>()));
        vm_opts.num_threads = 5000;
        let exe = exe_of(ADD);
        let mut vm = null_mut();
        let (code, msg) = error_of(rvm_vm_create(exe, &vm_opts, &mut vm));
        assert_eq!(code, RVM_ERROR_VALUE, "{msg}");
        assert!(msg.starts_with("rvm_vm_create: num_threads: ") && msg.contains("5000"), "{msg}");
        ok(rvm_executable_free(exe));
    }
}

/// The VM the re-entering function calls (set before the call that runs it).
static RUNNING_VM: std::sync::atomic::AtomicPtr<rvm_vm> = std::sync::atomic::AtomicPtr::new(null_mut());

/// A C function that calls the VM running it: relaxvm refuses, and the function returns that
/// error as its own.
unsafe extern "C" fn reenters(
    _: *mut c_void,
    _: *const *const rvm_value,
    _: usize,
    _: *mut *mut rvm_value,
) -> *mut rvm_error {
    let vm = RUNNING_VM.load(std::sync::atomic::Ordering::SeqCst);
    let mut out = null_mut();
    // SAFETY: a live VM (the one running this call), a valid name and out pointer.
    unsafe { rvm_vm_call(vm, c"main".as_ptr(), null(), 0, &mut out) }
}

#[test]
fn a_c_function_calling_the_vm_that_runs_it_is_refused() {
    // SAFETY: a valid name and function; live handles.
    unsafe {
        ok(rvm_register_func(c"errsb.reenters".as_ptr(), Some(reenters), null_mut(), None, true));
        let vm = vm_of("@main inputs=0 regs=1:\n  call  errsb.reenters  dst: %0\n  ret  %0\n.packed errsb.reenters\n");
        RUNNING_VM.store(vm, std::sync::atomic::Ordering::SeqCst);
        let mut out = null_mut();
        let (code, msg) = error_of(rvm_vm_call(vm, c"main".as_ptr(), null(), 0, &mut out));
        assert_eq!(code, RVM_ERROR_BUSY, "{msg}");
        assert!(
            msg.starts_with(
                "errsb.reenters: rvm_vm_call: the VM is running a call on another thread, or this call comes from inside one of its own calls (a packed function calling the VM that runs it); use one VM per thread"
            ),
            "{msg}"
        );
        ok(rvm_vm_free(vm));
    }
}

#[test]
fn getters_of_the_wrong_kind_and_null_handles() {
    // SAFETY: live handles or NULL, which the API checks; valid out pointers.
    unsafe {
        let f = rvm_value_new_float(1.5);
        let (mut i, mut p, mut n, mut dims, mut item) = (0i64, null::<c_char>(), 0usize, null::<i64>(), null_mut());
        is(rvm_value_get_int(f, &mut i), RVM_ERROR_TYPE, "rvm_value_get_int: expected an int, found the float 1.5");
        is(
            rvm_value_get_str(f, &mut p, &mut n),
            RVM_ERROR_TYPE,
            "rvm_value_get_str: expected a string, found the float 1.5",
        );
        is(
            rvm_value_get_shape(f, &mut dims, &mut n),
            RVM_ERROR_TYPE,
            "rvm_value_get_shape: expected a shape or a tensor, found the float 1.5",
        );
        is(
            rvm_value_tuple_get(f, 0, &mut item),
            RVM_ERROR_TYPE,
            "rvm_value_tuple_get: expected a tuple, found the float 1.5",
        );
        is(
            rvm_value_get_int(null(), &mut i),
            RVM_ERROR_INVALID_ARGUMENT,
            "rvm_value_get_int: expected an rvm_value handle, found NULL",
        );
        ok(rvm_value_free(f));
        let exe = exe_of(ADD);
        let mut name = null::<c_char>();
        is(
            rvm_executable_function_name(exe, 5, &mut name),
            RVM_ERROR_INDEX,
            "rvm_executable_function_name: index 5 out of range for 1 functions",
        );
        ok(rvm_executable_free(exe));
        // A dims array at an odd address.
        let raw = [0u8; 24];
        let odd = raw.as_ptr().wrapping_add(1).cast::<i64>();
        let mut v = null_mut();
        is(
            rvm_value_new_shape(odd, 2, &mut v),
            RVM_ERROR_INVALID_ARGUMENT,
            &format!("rvm_value_new_shape: dims: pointer {odd:?} is not aligned"),
        );
    }
}

/// A C function for the registration test; never called.
unsafe extern "C" fn unused(
    _: *mut c_void,
    _: *const *const rvm_value,
    _: usize,
    _: *mut *mut rvm_value,
) -> *mut rvm_error {
    null_mut()
}

#[test]
fn a_name_registered_twice_without_override_is_refused() {
    // SAFETY: valid names and functions.
    unsafe {
        ok(rvm_register_func(c"errsb.twice".as_ptr(), Some(unused), null_mut(), None, true));
        is(
            rvm_register_func(c"errsb.twice".as_ptr(), Some(unused), null_mut(), None, false),
            RVM_ERROR_ALREADY_REGISTERED,
            "rvm_register_func: function \"errsb.twice\" is already registered (pass allow_override to replace it)",
        );
    }
}

/// A change to one field of a DLPack tensor, and the message the import must then give.
type Damage = (fn(&mut DLManagedTensorVersioned), &'static str);

#[test]
fn dlpack_data_and_shape_pointers() {
    let (mut data, mut shape) = ([1.0f32, 2.0, 3.0], [3i64]);
    let mut v = null_mut();
    let cases: [Damage; 4] = [
        (
            |m| m.dl_tensor.data = null_mut(),
            "rvm_value_from_dlpack: DLPack tensor of 3 elements has a NULL data pointer",
        ),
        (
            |m| m.dl_tensor.byte_offset = 1,
            "rvm_value_from_dlpack: DLPack tensor data is not aligned to its element size",
        ),
        (|m| m.dl_tensor.dtype.lanes = 2, "rvm_value_from_dlpack: DLPack tensors with 2 lanes are not supported"),
        (|m| m.dl_tensor.shape = null_mut(), "rvm_value_from_dlpack: DLPack tensor of ndim 1 has a NULL shape pointer"),
    ];
    for (corrupt, message) in cases {
        let mut m = tensor(&mut data, &mut shape);
        corrupt(&mut m);
        // SAFETY: a managed tensor whose header the API checks before using its memory.
        is(unsafe { rvm_value_from_dlpack(&mut m, &mut v) }, RVM_ERROR_VALUE, message);
    }
}

/// The VM that `frees_its_vm` frees (set before the call that runs it).
static FREED_WHILE_RUNNING: std::sync::atomic::AtomicPtr<rvm_vm> = std::sync::atomic::AtomicPtr::new(null_mut());

/// A C function that frees the VM running it: relaxvm leaks the VM rather than free memory the
/// running call uses, and says so; the function returns that error as its own.
unsafe extern "C" fn frees_its_vm(
    _: *mut c_void,
    _: *const *const rvm_value,
    _: usize,
    _: *mut *mut rvm_value,
) -> *mut rvm_error {
    // SAFETY: the live VM running this call.
    unsafe { rvm_vm_free(FREED_WHILE_RUNNING.load(std::sync::atomic::Ordering::SeqCst)) }
}

/// Run by `a_vm_freed_while_it_runs_a_call_is_leaked_not_freed` in a child process: the VM it
/// leaks on purpose must not fail the sanitizer's leak check of the tests around it.
#[test]
#[ignore = "run in a child process (it leaks a VM on purpose)"]
fn child_frees_the_vm_that_runs_it() {
    // SAFETY: a valid name and function; live handles.
    unsafe {
        ok(rvm_register_func(c"errsb.frees_its_vm".as_ptr(), Some(frees_its_vm), null_mut(), None, true));
        let vm = vm_of(
            "@main inputs=0 regs=1:\n  call  errsb.frees_its_vm  dst: %0\n  ret  %0\n.packed errsb.frees_its_vm\n",
        );
        FREED_WHILE_RUNNING.store(vm, std::sync::atomic::Ordering::SeqCst);
        let mut out = null_mut();
        let (code, msg) = error_of(rvm_vm_call(vm, c"main".as_ptr(), null(), 0, &mut out));
        assert_eq!(code, RVM_ERROR_BUSY, "{msg}");
        assert_eq!(
            msg,
            "errsb.frees_its_vm: rvm_vm_free: the VM is running a call; it was leaked, not freed\n  in function \"main\", \
             instruction 0: call  errsb.frees_its_vm  dst: %0"
        );
        // The handle was taken: it is no longer a live VM.
        let e = error_of(rvm_vm_free(vm));
        assert_eq!(e.0, RVM_ERROR_INVALID_ARGUMENT, "{}", e.1);
    }
}

#[test]
fn a_vm_freed_while_it_runs_a_call_is_leaked_not_freed() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_frees_the_vm_that_runs_it", "--ignored", "--test-threads=1"])
        .env("ASAN_OPTIONS", "detect_leaks=0")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
