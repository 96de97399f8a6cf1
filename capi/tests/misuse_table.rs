//! Every entry point of the C API called with each of its pointer arguments broken the ways C
//! can break them: a NULL, a handle of another kind, an address relaxvm never made, an output
//! pointer that is NULL, a string that is not UTF-8, an array that is NULL, misaligned or longer
//! than allowed. One row per call: the whole message the API must give, which names the function
//! and the argument (`scripts/error-coverage-sites.py` matches these texts against each call
//! site of the argument checks; `{bogus}` and `{odd}` are filled with the pointers passed).

use relaxvm_capi::callback::{rvm_register_func, rvm_register_py_func};
use relaxvm_capi::dlpack::*;
use relaxvm_capi::error::rvm_error_code::{self, *};
use relaxvm_capi::error::*;
use relaxvm_capi::executable::*;
use relaxvm_capi::stateful::*;
use relaxvm_capi::string::rvm_string_free;
use relaxvm_capi::value::*;
use relaxvm_capi::vm::*;
use std::ffi::{c_char, CStr};
use std::ptr::{null, null_mut};

/// The live handles and the broken pointers the rows pass.
struct Fx {
    value: *mut rvm_value,
    exe: *mut rvm_executable,
    vm: *mut rvm_vm,
    /// The VM's function `main`.
    func: *mut rvm_value,
    /// The address of an object relaxvm never made (a static of this test).
    bogus: usize,
    /// An array of handle pointers at an odd address.
    odd: *const *const rvm_value,
}

static NOT_A_HANDLE: [u64; 4] = [0; 4];
/// "m", an invalid byte, "n".
const BAD_NAME: &[u8] = b"m\xffn\0";

impl Fx {
    fn new() -> Fx {
        let bytes = relaxvm_builder::assemble(ADD).unwrap().save_to_bytes();
        let (mut exe, mut vm, mut func) = (null_mut(), null_mut(), null_mut());
        // SAFETY: valid bytes, name and out pointers.
        unsafe {
            ok(rvm_executable_load_bytes(bytes.as_ptr(), bytes.len(), c"test".as_ptr(), null(), &mut exe));
            ok(rvm_vm_create(exe, null(), &mut vm));
            ok(rvm_vm_get_function(vm, c"main".as_ptr(), &mut func));
        }
        let odd = NOT_A_HANDLE.as_ptr().cast::<u8>().wrapping_add(1).cast();
        Fx { value: rvm_value_new_int(3), exe, vm, func, bogus: NOT_A_HANDLE.as_ptr() as usize, odd }
    }
    fn bogus<T>(&self) -> *mut T {
        self.bogus as *mut T
    }
    fn bad_name(&self) -> *const c_char {
        BAD_NAME.as_ptr().cast()
    }
    /// One live value, as an argument array.
    fn args(&self) -> [*const rvm_value; 1] {
        [self.value]
    }
}

impl Drop for Fx {
    fn drop(&mut self) {
        // SAFETY: the live handles made in `new`, freed once.
        unsafe {
            ok(rvm_value_free(self.value));
            ok(rvm_value_free(self.func));
            ok(rvm_vm_free(self.vm));
            ok(rvm_executable_free(self.exe));
        }
    }
}

const ADD: &str = "@main inputs=2 regs=3 params=(a, b):\n  call  vm.builtin.int.add  in: %0, %1  dst: %2\n  ret  %2\n.packed vm.builtin.int.add\n";

/// More elements than any array argument may have (`MAX_ELEMENTS` is 2^32).
const TOO_MANY: usize = 1 << 33;

#[track_caller]
fn ok(e: *mut rvm_error) {
    if !e.is_null() {
        // SAFETY: an error object the API returned.
        let msg = unsafe { CStr::from_ptr(rvm_error_message(e)) }.to_string_lossy().into_owned();
        panic!("expected success, got {msg}");
    }
}

/// Default VM options, filled by the library.
fn options() -> rvm_vm_options {
    // SAFETY: a writable struct of the size passed.
    unsafe {
        let mut o = std::mem::zeroed::<rvm_vm_options>();
        ok(rvm_vm_options_init_sized(&mut o, std::mem::size_of::<rvm_vm_options>()));
        o
    }
}

type Call = fn(&Fx) -> *mut rvm_error;

/// The tests of this file run one at a time: the first counts the live handles of the whole
/// process, which the other's handles would change.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// (expected code, expected message, the call). Every call breaks one argument; the others are
/// valid, so the message must name the broken one.
#[rustfmt::skip]
const ROWS: &[(rvm_error_code, &str, Call)] = &[
    // SAFETY (every row): the pointers are valid, NULL, or not relaxvm's handles, which the
    // API checks before any use; arrays are never read past a check that refuses them.
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_from_dlpack: the output pointer is NULL", |_| unsafe { rvm_value_from_dlpack(null_mut(), null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_to_dlpack: the output pointer is NULL", |f| unsafe { rvm_value_to_dlpack(f.value, null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_to_dlpack: expected an rvm_value handle, found NULL", |_| unsafe { rvm_value_to_dlpack(null(), &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_to_dlpack: expected an rvm_value handle, found an rvm_executable handle", |f| unsafe { rvm_value_to_dlpack(f.exe.cast(), &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_to_dlpack: {bogus} is not a live rvm_value handle (freed already, or not made by relaxvm)", |f| unsafe { rvm_value_to_dlpack(f.bogus(), &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_load_options_init: the output pointer is NULL", |_| unsafe { rvm_load_options_init(null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_executable_load_file: the output pointer is NULL", |_| unsafe { rvm_executable_load_file(c"x.rvx".as_ptr(), null(), null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_executable_load_file: path: not valid UTF-8 (byte 1 of \"m\u{fffd}n\")", |f| unsafe { rvm_executable_load_file(f.bad_name(), null(), &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_executable_load_file: native_libraries is 7; expected RVM_NATIVE_REFUSE (0), RVM_NATIVE_ALLOW_LISTED (1) or RVM_NATIVE_ANY (2)", |_| unsafe {
        let mut o = std::mem::zeroed::<rvm_load_options>();
        ok(rvm_load_options_init(&mut o));
        o.native_libraries = 7;
        rvm_executable_load_file(c"x.rvx".as_ptr(), &o, &mut null_mut())
    }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_executable_load_bytes: the output pointer is NULL", |_| unsafe { rvm_executable_load_bytes(b"x".as_ptr(), 1, null(), null(), null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_executable_load_bytes: data: expected 4 elements, found NULL", |_| unsafe { rvm_executable_load_bytes(null(), 4, null(), null(), &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_executable_load_bytes: data: 8589934592 elements is more than the 4294967296 allowed", |_| unsafe { rvm_executable_load_bytes(b"x".as_ptr(), TOO_MANY, null(), null(), &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_executable_free: expected an rvm_executable handle, found an rvm_value handle", |f| unsafe { rvm_executable_free(f.value.cast()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_executable_free: {bogus} is not a live rvm_executable handle (freed already, or not made by relaxvm)", |f| unsafe { rvm_executable_free(f.bogus()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_executable_function_count: expected an rvm_executable handle, found NULL", |_| unsafe { rvm_executable_function_count(null(), &mut 0) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_executable_function_count: expected an rvm_executable handle, found an rvm_vm handle", |f| unsafe { rvm_executable_function_count(f.vm.cast(), &mut 0) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_executable_function_count: {bogus} is not a live rvm_executable handle (freed already, or not made by relaxvm)", |f| unsafe { rvm_executable_function_count(f.bogus(), &mut 0) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_executable_function_count: the output pointer is NULL", |f| unsafe { rvm_executable_function_count(f.exe, null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_executable_function_name: expected an rvm_executable handle, found NULL", |_| unsafe { rvm_executable_function_name(null(), 0, &mut null()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_executable_function_name: expected an rvm_executable handle, found an rvm_value handle", |f| unsafe { rvm_executable_function_name(f.value.cast(), 0, &mut null()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_executable_function_name: {bogus} is not a live rvm_executable handle (freed already, or not made by relaxvm)", |f| unsafe { rvm_executable_function_name(f.bogus(), 0, &mut null()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_executable_function_name: the output pointer is NULL", |f| unsafe { rvm_executable_function_name(f.exe, 0, null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_executable_as_text: the output pointer is NULL", |f| unsafe { rvm_executable_as_text(f.exe, null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_executable_as_text: expected an rvm_executable handle, found NULL", |_| unsafe { rvm_executable_as_text(null(), &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_executable_as_text: expected an rvm_executable handle, found an rvm_value handle", |f| unsafe { rvm_executable_as_text(f.value.cast(), &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_executable_as_text: {bogus} is not a live rvm_executable handle (freed already, or not made by relaxvm)", |f| unsafe { rvm_executable_as_text(f.bogus(), &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_set_input: name: expected a string, found NULL", |f| unsafe { rvm_vm_set_input(f.vm, null(), f.args().as_ptr(), 1) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_set_input: name: not valid UTF-8 (byte 1 of \"m\u{fffd}n\")", |f| unsafe { rvm_vm_set_input(f.vm, f.bad_name(), f.args().as_ptr(), 1) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_set_input: args: expected 1 elements, found NULL", |f| unsafe { rvm_vm_set_input(f.vm, c"main".as_ptr(), null(), 1) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_set_input: args: pointer {odd} is not aligned", |f| unsafe { rvm_vm_set_input(f.vm, c"main".as_ptr(), f.odd, 1) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_set_input: args: 8589934592 elements is more than the 4294967296 allowed", |f| unsafe { rvm_vm_set_input(f.vm, c"main".as_ptr(), f.args().as_ptr(), TOO_MANY) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_invoke_stateful: name: expected a string, found NULL", |f| unsafe { rvm_vm_invoke_stateful(f.vm, null()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_invoke_stateful: name: not valid UTF-8 (byte 1 of \"m\u{fffd}n\")", |f| unsafe { rvm_vm_invoke_stateful(f.vm, f.bad_name()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_get_outputs: name: expected a string, found NULL", |f| unsafe { rvm_vm_get_outputs(f.vm, null(), &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_get_outputs: name: not valid UTF-8 (byte 1 of \"m\u{fffd}n\")", |f| unsafe { rvm_vm_get_outputs(f.vm, f.bad_name(), &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_string_free: expected an string (from relaxvm) handle, found an rvm_value handle", |f| unsafe { rvm_string_free(f.value.cast()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_string_free: {bogus} is not a live string (from relaxvm) handle (freed already, or not made by relaxvm)", |f| unsafe { rvm_string_free(f.bogus()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_new_str: data: expected 2 elements, found NULL", |_| unsafe { rvm_value_new_str(null(), 2, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_new_shape: the output pointer is NULL", |_| unsafe { rvm_value_new_shape([1i64].as_ptr(), 1, null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_new_shape: dims: expected 2 elements, found NULL", |_| unsafe { rvm_value_new_shape(null(), 2, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_new_shape: dims: 8589934592 elements is more than the 4294967296 allowed", |_| unsafe { rvm_value_new_shape([1i64].as_ptr(), TOO_MANY, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_new_tuple: the output pointer is NULL", |f| unsafe { rvm_value_new_tuple(f.args().as_ptr(), 1, null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_new_tuple: items: expected 1 elements, found NULL", |_| unsafe { rvm_value_new_tuple(null(), 1, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_new_tuple: items: pointer {odd} is not aligned", |f| unsafe { rvm_value_new_tuple(f.odd, 1, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_new_tuple: items: 8589934592 elements is more than the 4294967296 allowed", |f| unsafe { rvm_value_new_tuple(f.args().as_ptr(), TOO_MANY, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_clone: the output pointer is NULL", |f| unsafe { rvm_value_clone(f.value, null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_clone: expected an rvm_value handle, found NULL", |_| unsafe { rvm_value_clone(null(), &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_clone: expected an rvm_value handle, found an rvm_vm handle", |f| unsafe { rvm_value_clone(f.vm.cast(), &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_clone: {bogus} is not a live rvm_value handle (freed already, or not made by relaxvm)", |f| unsafe { rvm_value_clone(f.bogus(), &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_free: expected an rvm_value handle, found an rvm_executable handle", |f| unsafe { rvm_value_free(f.exe.cast()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_free: {bogus} is not a live rvm_value handle (freed already, or not made by relaxvm)", |f| unsafe { rvm_value_free(f.bogus()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_get_int: expected an rvm_value handle, found an rvm_executable handle", |f| unsafe { rvm_value_get_int(f.exe.cast(), &mut 0) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_get_int: {bogus} is not a live rvm_value handle (freed already, or not made by relaxvm)", |f| unsafe { rvm_value_get_int(f.bogus(), &mut 0) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_get_int: the output pointer is NULL", |f| unsafe { rvm_value_get_int(f.value, null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_get_float: expected an rvm_value handle, found NULL", |_| unsafe { rvm_value_get_float(null(), &mut 0.0) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_get_float: expected an rvm_value handle, found an rvm_vm handle", |f| unsafe { rvm_value_get_float(f.vm.cast(), &mut 0.0) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_get_float: {bogus} is not a live rvm_value handle (freed already, or not made by relaxvm)", |f| unsafe { rvm_value_get_float(f.bogus(), &mut 0.0) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_get_bool: expected an rvm_value handle, found NULL", |_| unsafe { rvm_value_get_bool(null(), &mut false) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_get_bool: expected an rvm_value handle, found an rvm_executable handle", |f| unsafe { rvm_value_get_bool(f.exe.cast(), &mut false) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_get_bool: the output pointer is NULL", |_| unsafe {
        let b = rvm_value_new_bool(true);
        let e = rvm_value_get_bool(b, null_mut());
        ok(rvm_value_free(b));
        e
    }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_get_str: expected an rvm_value handle, found NULL", |_| unsafe { rvm_value_get_str(null(), &mut null(), &mut 0) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_get_str: expected an rvm_value handle, found an rvm_vm handle", |f| unsafe { rvm_value_get_str(f.vm.cast(), &mut null(), &mut 0) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_get_str: {bogus} is not a live rvm_value handle (freed already, or not made by relaxvm)", |f| unsafe { rvm_value_get_str(f.bogus(), &mut null(), &mut 0) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_get_str: the output pointer is NULL", |_| unsafe {
        let mut s = null_mut();
        ok(rvm_value_new_str(c"t".as_ptr(), 1, &mut s));
        let e = rvm_value_get_str(s, null_mut(), &mut 0);
        ok(rvm_value_free(s));
        e
    }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_get_shape: ndim: the output pointer is NULL", |f| unsafe { rvm_value_get_shape(f.value, &mut null(), null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_get_shape: expected an rvm_value handle, found NULL", |_| unsafe { rvm_value_get_shape(null(), &mut null(), &mut 0) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_get_shape: expected an rvm_value handle, found an rvm_executable handle", |f| unsafe { rvm_value_get_shape(f.exe.cast(), &mut null(), &mut 0) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_get_shape: {bogus} is not a live rvm_value handle (freed already, or not made by relaxvm)", |f| unsafe { rvm_value_get_shape(f.bogus(), &mut null(), &mut 0) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_get_shape: dims: the output pointer is NULL", |_| unsafe {
        let mut s = null_mut();
        ok(rvm_value_new_shape([2i64].as_ptr(), 1, &mut s));
        let e = rvm_value_get_shape(s, null_mut(), &mut 0);
        ok(rvm_value_free(s));
        e
    }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_tuple_size: expected an rvm_value handle, found NULL", |_| unsafe { rvm_value_tuple_size(null(), &mut 0) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_tuple_size: expected an rvm_value handle, found an rvm_vm handle", |f| unsafe { rvm_value_tuple_size(f.vm.cast(), &mut 0) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_tuple_size: {bogus} is not a live rvm_value handle (freed already, or not made by relaxvm)", |f| unsafe { rvm_value_tuple_size(f.bogus(), &mut 0) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_tuple_size: the output pointer is NULL", |f| unsafe {
        let mut t = null_mut();
        ok(rvm_value_new_tuple(f.args().as_ptr(), 1, &mut t));
        let e = rvm_value_tuple_size(t, null_mut());
        ok(rvm_value_free(t));
        e
    }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_tuple_get: the output pointer is NULL", |f| unsafe { rvm_value_tuple_get(f.value, 0, null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_tuple_get: expected an rvm_value handle, found NULL", |_| unsafe { rvm_value_tuple_get(null(), 0, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_tuple_get: expected an rvm_value handle, found an rvm_executable handle", |f| unsafe { rvm_value_tuple_get(f.exe.cast(), 0, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_tuple_get: {bogus} is not a live rvm_value handle (freed already, or not made by relaxvm)", |f| unsafe { rvm_value_tuple_get(f.bogus(), 0, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_to_string: the output pointer is NULL", |f| unsafe { rvm_value_to_string(f.value, null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_to_string: expected an rvm_value handle, found NULL", |_| unsafe { rvm_value_to_string(null(), &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_to_string: expected an rvm_value handle, found an rvm_vm handle", |f| unsafe { rvm_value_to_string(f.vm.cast(), &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_value_to_string: {bogus} is not a live rvm_value handle (freed already, or not made by relaxvm)", |f| unsafe { rvm_value_to_string(f.bogus(), &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_create: the output pointer is NULL", |f| unsafe { rvm_vm_create(f.exe, null(), null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_create: expected an rvm_executable handle, found NULL", |_| unsafe { rvm_vm_create(null(), null(), &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_create: expected an rvm_executable handle, found an rvm_vm handle", |f| unsafe { rvm_vm_create(f.vm.cast(), null(), &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_create: {bogus} is not a live rvm_executable handle (freed already, or not made by relaxvm)", |f| unsafe { rvm_vm_create(f.bogus(), null(), &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_free: expected an rvm_vm handle, found an rvm_value handle", |f| unsafe { rvm_vm_free(f.value.cast()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_free: {bogus} is not a live rvm_vm handle (freed already, or not made by relaxvm)", |f| unsafe { rvm_vm_free(f.bogus()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_get_function: the output pointer is NULL", |f| unsafe { rvm_vm_get_function(f.vm, c"main".as_ptr(), null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_get_function: name: expected a string, found NULL", |f| unsafe { rvm_vm_get_function(f.vm, null(), &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_get_function: name: not valid UTF-8 (byte 1 of \"m\u{fffd}n\")", |f| unsafe { rvm_vm_get_function(f.vm, f.bad_name(), &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_get_function: expected an rvm_vm handle, found NULL", |_| unsafe { rvm_vm_get_function(null(), c"main".as_ptr(), &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_get_function: expected an rvm_vm handle, found an rvm_value handle", |f| unsafe { rvm_vm_get_function(f.value.cast(), c"main".as_ptr(), &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_get_function: {bogus} is not a live rvm_vm handle (freed already, or not made by relaxvm)", |f| unsafe { rvm_vm_get_function(f.bogus(), c"main".as_ptr(), &mut null_mut()) }),
    (RVM_ERROR_UNKNOWN_FUNCTION, "rvm_vm_get_function: no function \"nope\" in the executable; its functions are: main", |f| unsafe { rvm_vm_get_function(f.vm, c"nope".as_ptr(), &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_call: the output pointer is NULL", |f| unsafe { rvm_vm_call(f.vm, c"main".as_ptr(), f.args().as_ptr(), 1, null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_call: name: expected a string, found NULL", |f| unsafe { rvm_vm_call(f.vm, null(), f.args().as_ptr(), 1, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_call: name: not valid UTF-8 (byte 1 of \"m\u{fffd}n\")", |f| unsafe { rvm_vm_call(f.vm, f.bad_name(), f.args().as_ptr(), 1, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_call: args: expected 1 elements, found NULL", |f| unsafe { rvm_vm_call(f.vm, c"main".as_ptr(), null(), 1, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_call: args: pointer {odd} is not aligned", |f| unsafe { rvm_vm_call(f.vm, c"main".as_ptr(), f.odd, 1, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_call: args: 8589934592 elements is more than the 4294967296 allowed", |f| unsafe { rvm_vm_call(f.vm, c"main".as_ptr(), f.args().as_ptr(), TOO_MANY, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_call: expected an rvm_vm handle, found NULL", |f| unsafe { rvm_vm_call(null(), c"main".as_ptr(), f.args().as_ptr(), 1, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_call: expected an rvm_vm handle, found an rvm_value handle", |f| unsafe { rvm_vm_call(f.value.cast(), c"main".as_ptr(), f.args().as_ptr(), 1, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_call: {bogus} is not a live rvm_vm handle (freed already, or not made by relaxvm)", |f| unsafe { rvm_vm_call(f.bogus(), c"main".as_ptr(), f.args().as_ptr(), 1, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_invoke: the output pointer is NULL", |f| unsafe { rvm_vm_invoke(f.vm, f.value, f.args().as_ptr(), 1, null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_invoke: args: expected 1 elements, found NULL", |f| unsafe { rvm_vm_invoke(f.vm, f.value, null(), 1, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_invoke: args: pointer {odd} is not aligned", |f| unsafe { rvm_vm_invoke(f.vm, f.value, f.odd, 1, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_invoke: args: 8589934592 elements is more than the 4294967296 allowed", |f| unsafe { rvm_vm_invoke(f.vm, f.value, f.args().as_ptr(), TOO_MANY, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_invoke: func: expected an rvm_value handle, found NULL", |f| unsafe { rvm_vm_invoke(f.vm, null(), f.args().as_ptr(), 1, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_invoke: func: expected an rvm_value handle, found an rvm_vm handle", |f| unsafe { rvm_vm_invoke(f.vm, f.vm.cast(), f.args().as_ptr(), 1, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_invoke: func: {bogus} is not a live rvm_value handle (freed already, or not made by relaxvm)", |f| unsafe { rvm_vm_invoke(f.vm, f.bogus(), f.args().as_ptr(), 1, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_invoke: expected an rvm_vm handle, found NULL", |f| unsafe { rvm_vm_invoke(null(), f.func, f.args().as_ptr(), 1, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_invoke: expected an rvm_vm handle, found an rvm_value handle", |f| unsafe { rvm_vm_invoke(f.value.cast(), f.func, f.args().as_ptr(), 1, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_invoke: {bogus} is not a live rvm_vm handle (freed already, or not made by relaxvm)", |f| unsafe { rvm_vm_invoke(f.bogus(), f.func, f.args().as_ptr(), 1, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_interrupt: expected an rvm_vm handle, found NULL", |_| unsafe { rvm_vm_interrupt(null()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_interrupt: expected an rvm_vm handle, found an rvm_executable handle", |f| unsafe { rvm_vm_interrupt(f.exe.cast()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_interrupt: {bogus} is not a live rvm_vm handle (freed already, or not made by relaxvm)", |f| unsafe { rvm_vm_interrupt(f.bogus()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_profile: report: the output pointer is NULL", |f| unsafe { rvm_vm_profile(f.vm, c"main".as_ptr(), f.args().as_ptr(), 1, 0, null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_profile: name: expected a string, found NULL", |f| unsafe { rvm_vm_profile(f.vm, null(), f.args().as_ptr(), 1, 0, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_profile: name: not valid UTF-8 (byte 1 of \"m\u{fffd}n\")", |f| unsafe { rvm_vm_profile(f.vm, f.bad_name(), f.args().as_ptr(), 1, 0, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_profile: args: expected 1 elements, found NULL", |f| unsafe { rvm_vm_profile(f.vm, c"main".as_ptr(), null(), 1, 0, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_profile: args: pointer {odd} is not aligned", |f| unsafe { rvm_vm_profile(f.vm, c"main".as_ptr(), f.odd, 1, 0, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_profile: args: 8589934592 elements is more than the 4294967296 allowed", |f| unsafe { rvm_vm_profile(f.vm, c"main".as_ptr(), f.args().as_ptr(), TOO_MANY, 0, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_profile: expected an rvm_vm handle, found NULL", |f| unsafe { rvm_vm_profile(null(), c"main".as_ptr(), f.args().as_ptr(), 1, 0, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_profile: expected an rvm_vm handle, found an rvm_value handle", |f| unsafe { rvm_vm_profile(f.value.cast(), c"main".as_ptr(), f.args().as_ptr(), 1, 0, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_profile: {bogus} is not a live rvm_vm handle (freed already, or not made by relaxvm)", |f| unsafe { rvm_vm_profile(f.bogus(), c"main".as_ptr(), f.args().as_ptr(), 1, 0, &mut null_mut()) }),
    (RVM_ERROR_UNKNOWN_FUNCTION, "rvm_vm_profile: no function \"nope\" in the executable; its functions are: main", |f| unsafe { rvm_vm_profile(f.vm, c"nope".as_ptr(), f.args().as_ptr(), 1, 0, &mut null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_get_allocator: the output pointer is NULL", |f| unsafe { rvm_vm_get_allocator(f.vm, null_mut()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_get_allocator: expected an rvm_vm handle, found NULL", |_| unsafe { rvm_vm_get_allocator(null(), &mut 0) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_get_allocator: expected an rvm_vm handle, found an rvm_value handle", |f| unsafe { rvm_vm_get_allocator(f.value.cast(), &mut 0) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_get_allocator: {bogus} is not a live rvm_vm handle (freed already, or not made by relaxvm)", |f| unsafe { rvm_vm_get_allocator(f.bogus(), &mut 0) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_options_init_sized: struct_size is 3, expected {size} (sizeof(rvm_vm_options) in this library's relaxvm.h): the program was compiled against another relaxvm.h (recompile it), or did not fill the options with rvm_vm_options_init_sized(&opts, sizeof opts)", |_| unsafe {
        let mut o = std::mem::zeroed::<rvm_vm_options>();
        rvm_vm_options_init_sized(&mut o, 3)
    }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_register_func: name: expected a string, found NULL", |_| unsafe { rvm_register_func(null(), None, null_mut(), None, false) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_register_func: name: not valid UTF-8 (byte 1 of \"m\u{fffd}n\")", |f| unsafe { rvm_register_func(f.bad_name(), None, null_mut(), None, false) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_register_py_func: name: expected a string, found NULL", |_| unsafe { rvm_register_py_func(null(), None, null_mut(), None) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_register_py_func: name: not valid UTF-8 (byte 1 of \"m\u{fffd}n\")", |f| unsafe { rvm_register_py_func(f.bad_name(), None, null_mut(), None) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_options_init_sized: the output pointer is NULL", |_| unsafe { rvm_vm_options_init_sized(null_mut(), std::mem::size_of::<rvm_vm_options>()) }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_create: opts->memory_cfg: not valid UTF-8 (byte 1 of \"m\u{fffd}n\")", |f| unsafe {
        let mut o = options();
        o.memory_cfg = f.bad_name();
        rvm_vm_create(f.exe, &o, &mut null_mut())
    }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_create: opts->memory_cfg_devices: expected 1 elements, found NULL", |f| unsafe {
        let mut o = options();
        o.num_memory_cfg_devices = 1;
        rvm_vm_create(f.exe, &o, &mut null_mut())
    }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_create: opts->memory_cfg_devices: pointer {odd} is not aligned", |f| unsafe {
        let mut o = options();
        o.memory_cfg_devices = f.odd.cast();
        o.num_memory_cfg_devices = 1;
        rvm_vm_create(f.exe, &o, &mut null_mut())
    }),
    (RVM_ERROR_INVALID_ARGUMENT, "rvm_vm_create: opts->memory_cfg_devices: 8589934592 elements is more than the 4294967296 allowed", |f| unsafe {
        let mut o = options();
        o.memory_cfg_devices = f.odd.cast();
        o.num_memory_cfg_devices = TOO_MANY;
        rvm_vm_create(f.exe, &o, &mut null_mut())
    }),
];

#[test]
fn every_broken_argument_is_named_in_the_error() {
    let _serial = serial();
    let fx = Fx::new();
    let before = rvm_live_handle_count();
    let mut failures = Vec::new();
    for (code, text, call) in ROWS {
        let expected = text
            .replace("{bogus}", &format!("{:#x}", fx.bogus))
            .replace("{odd}", &format!("{:?}", fx.odd))
            .replace("{size}", &std::mem::size_of::<rvm_vm_options>().to_string());
        let e = call(&fx);
        if e.is_null() {
            failures.push(format!("succeeded, expected {expected:?}"));
            continue;
        }
        // SAFETY: an error object the API returned; freed once here.
        let got = unsafe {
            let got = (rvm_error_get_code(e), CStr::from_ptr(rvm_error_message(e)).to_string_lossy().into_owned());
            rvm_error_free(e);
            got
        };
        if got != (*code, expected.clone()) {
            failures.push(format!("expected {code:?} {expected:?}\n       got {:?} {:?}", got.0, got.1));
        }
    }
    // A refused call keeps no handle (the rows that make one free it).
    assert_eq!(rvm_live_handle_count(), before);
    assert!(failures.is_empty(), "{} of {} rows:\n{}", failures.len(), ROWS.len(), failures.join("\n"));
}

/// What the re-entering function below needs: the VM running it, one of its functions, and the
/// messages its refused calls gave.
/// (The VM runs the function on the thread that calls it: cells suffice.)
struct Reentry {
    vm: std::cell::Cell<*mut rvm_vm>,
    func: std::cell::Cell<*mut rvm_value>,
    got: std::cell::RefCell<Vec<(rvm_error_code, String)>>,
}

/// A C function that calls back into the VM running it through each entry point that locks the
/// VM, records each refusal, and returns null.
unsafe extern "C" fn reenters(
    user_data: *mut std::ffi::c_void,
    _: *const *const rvm_value,
    _: usize,
    result: *mut *mut rvm_value,
) -> *mut rvm_error {
    // SAFETY: `user_data` is the `Reentry` the test keeps alive while the VM runs; the handles
    // in it are live; the out pointers are valid.
    unsafe {
        let r = &*user_data.cast::<Reentry>();
        let mut calls = vec![
            rvm_vm_get_function(r.vm.get(), c"main".as_ptr(), &mut null_mut()),
            rvm_vm_invoke(r.vm.get(), r.func.get(), null(), 0, &mut null_mut()),
            rvm_vm_profile(r.vm.get(), c"main".as_ptr(), null(), 0, 0, &mut null_mut()),
            rvm_vm_get_allocator(r.vm.get(), &mut 0),
        ];
        for e in calls.drain(..) {
            let got = if e.is_null() {
                (RVM_OK, "succeeded".to_string())
            } else {
                let m = CStr::from_ptr(rvm_error_message(e)).to_string_lossy().into_owned();
                let code = rvm_error_get_code(e);
                rvm_error_free(e);
                (code, m)
            };
            r.got.borrow_mut().push(got);
        }
        *result = rvm_value_new_null();
    }
    null_mut()
}

#[test]
fn each_entry_point_that_locks_the_vm_refuses_a_call_from_inside_it() {
    let _serial = serial();
    let bytes = relaxvm_builder::assemble(
        "@main inputs=0 regs=1:\n  call  errs.misuse.reenters  dst: %0\n  ret  %0\n.packed errs.misuse.reenters\n",
    )
    .unwrap()
    .save_to_bytes();
    // SAFETY: valid bytes, names and out pointers; `r` outlives the call that uses it.
    unsafe {
        let (mut exe, mut vm, mut func, mut out) = (null_mut(), null_mut(), null_mut(), null_mut());
        // Registered first: a VM resolves its packed functions when it is made. The registry
        // keeps the function (and its data) for the process: leaked, never dangling.
        let r: &'static Reentry =
            Box::leak(Box::new(Reentry { vm: Default::default(), func: Default::default(), got: Default::default() }));
        let data = (r as *const Reentry).cast_mut().cast();
        ok(rvm_register_func(c"errs.misuse.reenters".as_ptr(), Some(reenters), data, None, true));
        ok(rvm_executable_load_bytes(bytes.as_ptr(), bytes.len(), c"reenter".as_ptr(), null(), &mut exe));
        ok(rvm_vm_create(exe, null(), &mut vm));
        ok(rvm_vm_get_function(vm, c"main".as_ptr(), &mut func));
        r.vm.set(vm);
        r.func.set(func);
        ok(rvm_vm_call(vm, c"main".as_ptr(), null(), 0, &mut out));
        let want = [
            "rvm_vm_get_function: the VM is running a call on another thread, or this call comes from inside one of its own calls (a packed function calling the VM that runs it); use one VM per thread",
            "rvm_vm_invoke: the VM is running a call on another thread, or this call comes from inside one of its own calls (a packed function calling the VM that runs it); use one VM per thread",
            "rvm_vm_profile: the VM is running a call on another thread, or this call comes from inside one of its own calls (a packed function calling the VM that runs it); use one VM per thread",
            "rvm_vm_get_allocator: the VM is running a call on another thread, or this call comes from inside one of its own calls (a packed function calling the VM that runs it); use one VM per thread",
        ];
        let got = r.got.borrow().clone();
        assert_eq!(got, want.iter().map(|m| (RVM_ERROR_BUSY, m.to_string())).collect::<Vec<_>>());
        ok(rvm_value_free(out));
        ok(rvm_value_free(func));
        ok(rvm_vm_free(vm));
        ok(rvm_executable_free(exe));
    }
}
