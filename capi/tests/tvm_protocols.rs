//! TVM's protocols in the C API: the stateful calls (`rvm_vm_set_input`,
//! `rvm_vm_invoke_stateful`, `rvm_vm_get_outputs`) and the allocator choice of `memory_cfg`
//! (`rvm_vm_options`), with relaxvm's rules and errors (those the Python API applies), and the
//! options' `struct_size`, which tells a caller of another header's layout from a current one.

use relaxvm_capi::callback::rvm_register_py_func;
use relaxvm_capi::dlpack::*;
use relaxvm_capi::error::rvm_error_code::{self, *};
use relaxvm_capi::error::rvm_live_handle_count;
use relaxvm_capi::error::*;
use relaxvm_capi::executable::*;
use relaxvm_capi::stateful::*;
use relaxvm_capi::value::rvm_value_kind::*;
use relaxvm_capi::value::*;
use relaxvm_capi::vm::*;
use relaxvm_capi::vm_options::*;
use std::ffi::{c_char, c_void, CStr};
use std::mem::size_of;
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicUsize, Ordering};

mod support;
use support::*;

/// `pair(n: i64, x: any)` returns `(n, x)`; `add(a, b)` adds two ints (no signature); `py(x)`
/// is `R.call_py_func("rust.c_twice", (x,))`.
const PROGRAM: &str = r#"@pair regs=3 sig=(n: i64, x: any) -> any:
  call  vm.builtin.make_tuple  in: %0, %1  dst: %2
  ret  %2
@add inputs=2 regs=3 params=(a, b):
  call  vm.builtin.int.add  in: %0, %1  dst: %2
  ret  %2
.packed vm.builtin.make_tuple
.packed vm.builtin.int.add
.const c[0] = str "rust.c_twice"
@py inputs=1 regs=3:
  call  vm.builtin.make_tuple  in: %0  dst: %1
  call  vm.builtin.make_tuple  in: c[0], %1  dst: %2
  call  vm.builtin.call_py_func  in: %2  dst: %1
  ret  %1
.packed vm.builtin.call_py_func
"#;

fn exe() -> *mut rvm_executable {
    exe_of(PROGRAM)
}

/// A VM of [`PROGRAM`] made with `opts`, or the error.
fn vm_with(opts: *const rvm_vm_options) -> Result<*mut rvm_vm, (rvm_error_code, String)> {
    let exe = exe();
    let mut vm = null_mut();
    // SAFETY: a live executable; `opts` as the test made it.
    let r = outcome(unsafe { rvm_vm_create(exe, opts, &mut vm) });
    // SAFETY: live, freed once (the VM keeps the program).
    ok(unsafe { rvm_executable_free(exe) });
    r.map_or(Ok(vm), Err)
}

fn options() -> rvm_vm_options {
    let mut opts = std::mem::MaybeUninit::<rvm_vm_options>::uninit();
    // SAFETY: a writable struct of the size passed.
    ok(unsafe { rvm_vm_options_init_sized(opts.as_mut_ptr(), size_of::<rvm_vm_options>()) });
    // SAFETY: filled on success.
    unsafe { opts.assume_init() }
}

fn allocator_of(vm: *const rvm_vm) -> i64 {
    let mut kind = 0;
    // SAFETY: a live VM, a valid out pointer.
    ok(unsafe { rvm_vm_get_allocator(vm, &mut kind) });
    kind
}

fn free(vm: *mut rvm_vm) {
    // SAFETY: a live VM, freed once.
    ok(unsafe { rvm_vm_free(vm) });
}

fn kind_of(v: *const rvm_value) -> rvm_value_kind {
    // SAFETY: a live value.
    unsafe { rvm_value_get_kind(v) }
}

fn item(t: *const rvm_value, i: usize) -> *mut rvm_value {
    let mut out = null_mut();
    // SAFETY: a live tuple, a valid out pointer.
    ok(unsafe { rvm_value_tuple_get(t, i, &mut out) });
    out
}

fn values_free(vs: &[*mut rvm_value]) {
    for v in vs {
        // SAFETY: live values, each freed once.
        ok(unsafe { rvm_value_free(*v) });
    }
}

#[test]
fn set_input_then_invoke_stateful_then_get_outputs_by_tvms_rule() {
    let _s = serial();
    let before = rvm_live_handle_count();
    let vm = vm_with(null()).unwrap();
    let (n, x) = (rvm_value_new_int(5), rvm_value_new_int(7));
    // SAFETY: live handles and valid pointers throughout.
    unsafe {
        ok(rvm_vm_set_input(vm, c"pair".as_ptr(), [n, x].as_ptr().cast(), 2));
        // The VM keeps its own references: the caller's values may go.
        values_free(&[n, x]);
        ok(rvm_vm_invoke_stateful(vm, c"pair".as_ptr()));
        let mut out = null_mut();
        ok(rvm_vm_get_outputs(vm, c"pair".as_ptr(), &mut out));
        // The declared scalar stays a number; the `any` parameter's int became a 0-d int32
        // tensor, as TVM's set_input makes it.
        let (a, b) = (item(out, 0), item(out, 1));
        assert_eq!(kind_of(a), RVM_VALUE_INT);
        assert_eq!(kind_of(b), RVM_VALUE_TENSOR);
        let mut view = null_mut();
        ok(relaxvm_capi::dlpack::rvm_value_to_dlpack(b, &mut view));
        let t = &(*view).dl_tensor;
        assert_eq!((t.ndim, t.dtype.code, t.dtype.bits, *t.data.cast::<i32>()), (0, 0, 32, 7), "int32 7");
        ((*view).deleter.unwrap())(view);
        values_free(&[a, b, out]);
        // Each get_outputs is a new handle to the kept result.
        let mut again = null_mut();
        ok(rvm_vm_get_outputs(vm, c"pair".as_ptr(), &mut again));
        values_free(&[again]);
    }
    free(vm);
    assert_eq!(rvm_live_handle_count(), before);
}

#[test]
fn the_stateful_calls_fail_with_their_errors() {
    let _s = serial();
    let vm = vm_with(null()).unwrap();
    let (one, big) = (rvm_value_new_int(1), rvm_value_new_int(1 << 40));
    let mut out = null_mut();
    // SAFETY: live handles and valid pointers, except where a test passes an invalid one.
    unsafe {
        // Out of order: nothing set, nothing run.
        fails(rvm_vm_invoke_stateful(vm, c"pair".as_ptr()), RVM_ERROR_VALUE, "no inputs were set for \"pair\"");
        fails(rvm_vm_get_outputs(vm, c"pair".as_ptr(), &mut out), RVM_ERROR_VALUE, "no outputs for \"pair\"");
        // TVM's rule: an int outside int32 cannot become its tensor.
        fails(
            rvm_vm_set_input(vm, c"pair".as_ptr(), [one, big].as_ptr().cast(), 2),
            RVM_ERROR_VALUE,
            "rvm_vm_set_input: \"pair\": set_input: 1099511627776 does not fit in int32",
        );
        fails(rvm_vm_set_input(vm, c"pair".as_ptr(), [one].as_ptr().cast(), 1), RVM_ERROR_ARITY, "pair");
        let msg = fails(
            rvm_vm_set_input(vm, c"nope".as_ptr(), [one].as_ptr().cast(), 1),
            RVM_ERROR_UNKNOWN_FUNCTION,
            "rvm_vm_set_input: no function \"nope\"",
        );
        assert!(msg.contains("pair, add"), "{msg}");
        fails(rvm_vm_invoke_stateful(vm, c"nope".as_ptr()), RVM_ERROR_UNKNOWN_FUNCTION, "rvm_vm_invoke_stateful");
        fails(rvm_vm_get_outputs(vm, c"nope".as_ptr(), &mut out), RVM_ERROR_UNKNOWN_FUNCTION, "rvm_vm_get_outputs");
        // The run's own error keeps its code: `add` has no signature, so its ints became
        // tensors, which the int builtin refuses.
        ok(rvm_vm_set_input(vm, c"add".as_ptr(), [one, one].as_ptr().cast(), 2));
        fails(rvm_vm_invoke_stateful(vm, c"add".as_ptr()), RVM_ERROR_TYPE, "rvm_vm_invoke_stateful: ");
        // NULLs, wrong handles, invalid names, huge counts.
        fails(rvm_vm_set_input(null(), c"pair".as_ptr(), null(), 0), RVM_ERROR_INVALID_ARGUMENT, "found NULL");
        fails(
            rvm_vm_set_input(one.cast(), c"pair".as_ptr(), null(), 0),
            RVM_ERROR_INVALID_ARGUMENT,
            "expected an rvm_vm handle, found an rvm_value handle",
        );
        fails(rvm_vm_set_input(vm, null(), null(), 0), RVM_ERROR_INVALID_ARGUMENT, "name: expected a string");
        fails(rvm_vm_set_input(vm, c"pair".as_ptr(), null(), 2), RVM_ERROR_INVALID_ARGUMENT, "found NULL");
        fails(
            rvm_vm_set_input(vm, c"pair".as_ptr(), [one].as_ptr().cast(), usize::MAX),
            RVM_ERROR_INVALID_ARGUMENT,
            "allowed",
        );
        let stale = [vm.cast::<rvm_value>()];
        fails(
            rvm_vm_set_input(vm, c"pair".as_ptr(), stale.as_ptr().cast(), 1),
            RVM_ERROR_INVALID_ARGUMENT,
            "expected an rvm_value handle, found an rvm_vm handle",
        );
        let bad = [0xffu8, 0];
        fails(rvm_vm_invoke_stateful(vm, bad.as_ptr().cast()), RVM_ERROR_INVALID_ARGUMENT, "UTF-8");
        fails(rvm_vm_invoke_stateful(null(), c"pair".as_ptr()), RVM_ERROR_INVALID_ARGUMENT, "found NULL");
        fails(
            rvm_vm_get_outputs(vm, c"pair".as_ptr(), null_mut()),
            RVM_ERROR_INVALID_ARGUMENT,
            "output pointer is NULL",
        );
        fails(rvm_vm_get_outputs(vm, null(), &mut out), RVM_ERROR_INVALID_ARGUMENT, "name: expected a string");
        assert!(out.is_null(), "no output is written on failure");
        values_free(&[one, big]);
    }
    free(vm);
}

fn vm_of_cfg(cfg: Option<&CStr>, devices: &[rvm_memory_cfg_entry]) -> Result<i64, (rvm_error_code, String)> {
    let mut opts = options();
    opts.memory_cfg = cfg.map_or(null(), |c| c.as_ptr());
    if !devices.is_empty() {
        opts.memory_cfg_devices = devices.as_ptr();
        opts.num_memory_cfg_devices = devices.len();
    }
    let vm = vm_with(&opts)?;
    let kind = allocator_of(vm);
    free(vm);
    Ok(kind)
}

fn entry(device_type: i32, device_id: i32, allocator: i64) -> rvm_memory_cfg_entry {
    rvm_memory_cfg_entry { device_type, device_id, allocator }
}

#[test]
fn memory_cfg_chooses_the_allocator_by_tvms_rules() {
    let _s = serial();
    const NAIVE: i64 = RVM_NAIVE_ALLOCATOR;
    const POOLED: i64 = RVM_POOLED_ALLOCATOR;
    // TVM's default, with NULL options and with initialized ones.
    let vm = vm_with(null()).unwrap();
    assert_eq!(allocator_of(vm), POOLED);
    free(vm);
    assert_eq!(vm_of_cfg(None, &[]), Ok(POOLED));
    assert_eq!(vm_of_cfg(Some(c"naive"), &[]), Ok(NAIVE));
    assert_eq!(vm_of_cfg(Some(c"pooled"), &[]), Ok(POOLED));
    // The map: the VM's device (CPU 0) takes its entry; another device's entry is not its.
    assert_eq!(vm_of_cfg(None, &[entry(1, 0, NAIVE)]), Ok(NAIVE));
    assert_eq!(vm_of_cfg(None, &[entry(1, 3, NAIVE)]), Ok(POOLED));
    assert_eq!(vm_of_cfg(None, &[entry(1, 0, NAIVE), entry(1, 0, NAIVE)]), Ok(NAIVE));

    let err = |r: Result<i64, (rvm_error_code, String)>| r.expect_err("expected an error");
    let (code, msg) = err(vm_of_cfg(Some(c"arena"), &[]));
    assert_eq!(code, RVM_ERROR_VALUE);
    assert_eq!(msg, r#"rvm_vm_create: opts->memory_cfg: memory_cfg must be "naive" or "pooled", found "arena""#);
    // Every entry is checked, the VM's device or not.
    let (code, msg) = err(vm_of_cfg(None, &[entry(1, 0, NAIVE), entry(1, 3, 7)]));
    assert_eq!(code, RVM_ERROR_VALUE);
    assert!(
        msg.contains("memory_cfg[cpu:3] must be VirtualMachine.NAIVE_ALLOCATOR (1)") && msg.ends_with("found 7"),
        "{msg}"
    );
    let (code, msg) = err(vm_of_cfg(None, &[entry(1, 0, NAIVE), entry(1, 0, POOLED)]));
    assert_eq!(code, RVM_ERROR_VALUE);
    assert!(msg.ends_with("memory_cfg names cpu:0 twice: 1 and 2"), "{msg}");
    let (code, msg) = err(vm_of_cfg(None, &[entry(2, 0, NAIVE)]));
    assert_eq!(code, RVM_ERROR_VALUE);
    assert!(msg.contains("opts->memory_cfg_devices[0]: unsupported device type code 2"), "{msg}");
    let (code, msg) = err(vm_of_cfg(None, &[entry(1, 0, NAIVE), entry(1, -1, NAIVE)]));
    assert_eq!(code, RVM_ERROR_VALUE);
    assert!(msg.contains("opts->memory_cfg_devices[1]: device_id is -1; a device id is not negative"), "{msg}");
    let (code, msg) = err(vm_of_cfg(Some(c"naive"), &[entry(1, 0, NAIVE)]));
    assert_eq!(code, RVM_ERROR_INVALID_ARGUMENT);
    assert!(msg.contains("both set"), "{msg}");

    let mut opts = options();
    opts.num_memory_cfg_devices = 3;
    let (code, msg) = vm_with(&opts).unwrap_err();
    assert_eq!(code, RVM_ERROR_INVALID_ARGUMENT);
    assert!(msg.contains("opts->memory_cfg_devices: expected 3 elements, found NULL"), "{msg}");
    let bad = [0xffu8, 0];
    opts = options();
    opts.memory_cfg = bad.as_ptr().cast::<c_char>();
    let (code, msg) = vm_with(&opts).unwrap_err();
    assert_eq!(code, RVM_ERROR_INVALID_ARGUMENT);
    assert!(msg.contains("opts->memory_cfg: not valid UTF-8"), "{msg}");

    let mut kind = 0;
    // SAFETY: invalid handles and pointers on purpose; each is checked.
    unsafe {
        fails(rvm_vm_get_allocator(null(), &mut kind), RVM_ERROR_INVALID_ARGUMENT, "found NULL");
        let vm = vm_with(null()).unwrap();
        fails(rvm_vm_get_allocator(vm, null_mut()), RVM_ERROR_INVALID_ARGUMENT, "output pointer is NULL");
        free(vm);
        fails(rvm_vm_get_allocator(vm, &mut kind), RVM_ERROR_INVALID_ARGUMENT, "not a live rvm_vm");
    }
}

/// `rvm_vm_options` as relaxvm.h declared it before `struct_size` (and `memory_cfg`) were added.
#[repr(C)]
struct OptionsBeforeStructSize {
    max_call_depth: u64,
    max_reentry: u64,
    step_budget: u64,
    max_stack_registers: u64,
    profile: bool,
    num_threads: u32,
}

#[test]
fn options_of_another_headers_layout_are_refused_before_any_other_field_is_read() {
    let _s = serial();
    // A program compiled against the earlier header, which filled the struct itself (its init
    // took no size): the new library reads the first field as the size and refuses it.
    let old = OptionsBeforeStructSize {
        max_call_depth: 100_000,
        max_reentry: 200,
        step_budget: 0,
        max_stack_registers: 1 << 24,
        profile: false,
        num_threads: 0,
    };
    let (code, msg) = vm_with((&old as *const OptionsBeforeStructSize).cast()).unwrap_err();
    assert_eq!(code, RVM_ERROR_INVALID_ARGUMENT);
    let size = size_of::<rvm_vm_options>();
    assert!(msg.contains("rvm_vm_create: opts->magic is 0x186a0, expected RVM_VM_OPTIONS_MAGIC"), "{msg}");
    assert!(msg.contains("expected RVM_VM_OPTIONS_MAGIC (0x4f4d5652): "), "{msg}");
    assert!(
        msg.ends_with(
            "the program was compiled against another relaxvm.h (recompile it), or did not fill the options with rvm_vm_options_init_sized(&opts, sizeof opts)"
        ),
        "{msg}"
    );
    // Attack finding layers/11: an old struct whose max_call_depth equals today's struct size
    // (72) is refused too (its high half, where `struct_size` is, holds 0 for any value below
    // 2^32), and nothing past its 40 bytes is read.
    #[repr(C)]
    struct OldThenGarbage {
        old: OptionsBeforeStructSize,
        after: [u64; 8],
    }
    let framed = OldThenGarbage {
        old: OptionsBeforeStructSize { max_call_depth: size as u64, ..old },
        after: [0x4141_4141_4141_4141; 8],
    };
    let (code, msg) = vm_with((&framed as *const OldThenGarbage).cast()).unwrap_err();
    assert_eq!(code, RVM_ERROR_INVALID_ARGUMENT);
    assert!(msg.contains(&format!("opts->magic is {size:#x}")), "{msg}");
    // Options zeroed by hand, never initialized; a newer header's larger struct.
    let mut opts = options();
    opts.magic = 0;
    assert!(vm_with(&opts).unwrap_err().1.contains("opts->magic is 0x0"));
    opts = options();
    opts.struct_size = 0;
    let msg = vm_with(&opts).unwrap_err().1;
    assert!(msg.contains(&format!("rvm_vm_create: opts->struct_size is 0, expected {size} (sizeof(rvm_vm_options) in this library's relaxvm.h): ")), "{msg}");
    opts.struct_size = size as u32 + 8;
    assert!(vm_with(&opts).unwrap_err().1.contains(&format!("struct_size is {}", size + 8)));

    // A misaligned pointer is refused before anything is read through it.
    let mut raw = [0u8; 2 * size_of::<rvm_vm_options>()];
    let at = raw.as_ptr().align_offset(8) + 1;
    let (code, msg) = vm_with(raw[at..].as_mut_ptr().cast::<rvm_vm_options>()).unwrap_err();
    assert_eq!(code, RVM_ERROR_INVALID_ARGUMENT);
    assert!(msg.contains("rvm_vm_create: opts pointer") && msg.ends_with("is not aligned"), "{msg}");

    // `rvm_vm_options_init_sized` with another size writes nothing.
    let mut buffer = [0xa5u8; 128];
    // SAFETY: a writable buffer (larger than the struct), aligned for it below.
    unsafe {
        let p = buffer.as_mut_ptr().add(buffer.as_ptr().align_offset(8)).cast::<rvm_vm_options>();
        let msg = fails(rvm_vm_options_init_sized(p, 40), RVM_ERROR_INVALID_ARGUMENT, "struct_size is 40");
        assert!(msg.contains(&format!("expected {size}")), "{msg}");
        fails(rvm_vm_options_init_sized(p, size * 2), RVM_ERROR_INVALID_ARGUMENT, "compiled against another relaxvm.h");
        fails(rvm_vm_options_init_sized(null_mut(), size), RVM_ERROR_INVALID_ARGUMENT, "output pointer is NULL");
    }
    assert!(buffer.iter().all(|b| *b == 0xa5), "nothing was written");
    let opts = options();
    assert_eq!((opts.magic, opts.struct_size as usize), (RVM_VM_OPTIONS_MAGIC, size));
    assert!(opts.memory_cfg.is_null() && opts.memory_cfg_devices.is_null() && opts.num_memory_cfg_devices == 0);
}

#[test]
fn a_profile_flag_byte_other_than_0_or_1_is_read_as_true() {
    let _s = serial();
    /// The options' bytes, as C code that stored 2 in the `bool` holds them (a Rust `bool`
    /// holding 2 would be undefined behaviour: the bytes stay bytes here, and the library reads
    /// the field as a byte).
    #[repr(C, align(8))]
    struct Bytes([u8; size_of::<rvm_vm_options>()]);
    let opts = options();
    let mut bytes = Bytes([0; size_of::<rvm_vm_options>()]);
    // SAFETY: copies the struct's bytes into a buffer of its size.
    unsafe {
        std::ptr::copy_nonoverlapping(
            (&opts as *const rvm_vm_options).cast::<u8>(),
            bytes.0.as_mut_ptr(),
            bytes.0.len(),
        )
    };
    bytes.0[std::mem::offset_of!(rvm_vm_options, profile)] = 2;
    let vm = vm_with((&bytes as *const Bytes).cast()).unwrap();
    let mut report = null_mut();
    let (a, b) = (rvm_value_new_int(1), rvm_value_new_int(2));
    // SAFETY: live handles and valid pointers.
    unsafe {
        ok(rvm_vm_profile(vm, c"add".as_ptr(), [a, b].as_ptr().cast(), 2, RVM_PROFILE_TABLE, &mut report));
        ok(relaxvm_capi::string::rvm_string_free(report));
    }
    values_free(&[a, b]);
    free(vm);
}

unsafe extern "C" fn c_twice(
    _: *mut c_void,
    args: *const *const rvm_value,
    nargs: usize,
    result: *mut *mut rvm_value,
) -> *mut rvm_error {
    assert_eq!(nargs, 1);
    let mut x = 0;
    // SAFETY: relaxvm passes `nargs` live values and a writable result.
    unsafe {
        let e = rvm_value_get_int(*args, &mut x);
        if !e.is_null() {
            return e;
        }
        *result = rvm_value_new_int(2 * x);
    }
    null_mut()
}

static FREED: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn count_freed(_: *mut c_void) {
    FREED.fetch_add(1, Ordering::SeqCst);
}

#[test]
fn a_c_function_registered_for_call_py_func_is_called_by_name() {
    let _s = serial();
    let vm = vm_with(null()).unwrap();
    let x = rvm_value_new_int(21);
    let mut out = null_mut();
    // SAFETY: valid names, functions and handles, except where a test passes NULL.
    unsafe {
        fails(rvm_register_py_func(null(), Some(c_twice), null_mut(), None), RVM_ERROR_INVALID_ARGUMENT, "name");
        fails(
            rvm_register_py_func(c"rust.c_twice".as_ptr(), None, null_mut(), None),
            RVM_ERROR_INVALID_ARGUMENT,
            "rvm_register_py_func: f is NULL",
        );
        fails(
            rvm_vm_call(vm, c"py".as_ptr(), [x].as_ptr().cast(), 1, &mut out),
            RVM_ERROR_VALUE,
            "not found in the call_py_func registry",
        );
        // Registered after the VM was made: the table is read at each call.
        ok(rvm_register_py_func(c"rust.c_twice".as_ptr(), Some(c_twice), null_mut(), Some(count_freed)));
        ok(rvm_vm_call(vm, c"py".as_ptr(), [x].as_ptr().cast(), 1, &mut out));
        let mut got = 0;
        ok(rvm_value_get_int(out, &mut got));
        assert_eq!(got, 42);
        values_free(&[out]);
        // Replacing it frees the first one's data (the same table the Rust API fills).
        assert_eq!(FREED.load(Ordering::SeqCst), 0);
        ok(rvm_register_py_func(c"rust.c_twice".as_ptr(), Some(c_twice), null_mut(), Some(count_freed)));
        assert_eq!(FREED.load(Ordering::SeqCst), 1);
        relaxvm_builtins::py_funcs::clear_py_func_registry();
        assert_eq!(FREED.load(Ordering::SeqCst), 2);
    }
    values_free(&[x]);
    free(vm);
}

/// The repository's TVM model (`tvm/tests/data/mlp.so`: `main(x: (n, 8) f32)`, a perceptron)
/// through the stateful calls, on a VM with TVM's naive allocator: the same result as a plain
/// call, run after run.
#[test]
fn a_tvm_model_runs_through_set_input_with_the_naive_allocator() {
    use relaxvm_tvm::ffi::abi::DLManagedTensorVersioned;
    let _s = serial();
    let so = std::ffi::CString::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../tvm/tests/data/mlp.so")).unwrap();
    let mut pixels: Vec<f32> = (0..16).map(|i| (i % 10) as f32 / 10.0).collect();
    let mut shape = [2i64, 8];
    // Static-like memory of this test, lent without a deleter (it outlives the VM).
    let mut input = borrowed_f32(&mut pixels, &mut shape);

    let mut opts = options();
    opts.memory_cfg = c"naive".as_ptr();
    let read = |v: *const rvm_value| -> Vec<f32> {
        let mut view = null_mut::<DLManagedTensorVersioned>();
        // SAFETY: a live tensor value; the view is released once read.
        unsafe {
            ok(rvm_value_to_dlpack(v, &mut view));
            let t = &(*view).dl_tensor;
            let dims = std::slice::from_raw_parts(t.shape, t.ndim as usize);
            assert_eq!((t.dtype.code, t.dtype.bits, dims[0]), (2, 32, 2), "f32, one row per input row");
            let n = dims.iter().product::<i64>() as usize;
            let got = std::slice::from_raw_parts(t.data.cast::<f32>(), n).to_vec();
            ((*view).deleter.unwrap())(view);
            got
        }
    };
    // SAFETY: valid pointers and live handles throughout.
    unsafe {
        let (mut exe, mut vm, mut x, mut y) = (null_mut(), null_mut(), null_mut(), null_mut());
        ok(rvm_executable_load_file(so.as_ptr(), null(), &mut exe));
        ok(rvm_vm_create(exe, &opts, &mut vm));
        ok(rvm_executable_free(exe));
        assert_eq!(allocator_of(vm), RVM_NAIVE_ALLOCATOR);
        ok(rvm_value_from_dlpack(&mut input, &mut x));
        ok(rvm_vm_call(vm, c"main".as_ptr(), [x].as_ptr().cast(), 1, &mut y));
        let want = read(y);
        ok(rvm_vm_set_input(vm, c"main".as_ptr(), [x].as_ptr().cast(), 1));
        for _ in 0..2 {
            ok(rvm_vm_invoke_stateful(vm, c"main".as_ptr()));
            let mut out = null_mut();
            ok(rvm_vm_get_outputs(vm, c"main".as_ptr(), &mut out));
            assert_eq!(read(out), want);
            values_free(&[out]);
        }
        values_free(&[x, y]);
        free(vm);
    }
}
