//! Kernels and read-only memory: a constant (in read-only pages) at a kernel's output position
//! is an error of the call and stays unchanged — written by the kernel, by a parallel task on
//! any thread, or by a packed function the kernel calls back; read-only foreign memory reaches
//! kernels as a private copy, and a kernel that changes the copy gets an error; faults that are
//! not writes to constants still end the process.

mod common;

use common::{compile, kernels_source};
use relaxvm::{registry, DataType, Device, NativeLibrary, PackedFunc, Storage, Tensor, Value};
use relaxvm_tvm::ffi::Library;
use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::sync::{Arc, OnceLock};

fn kernels() -> &'static Arc<Library> {
    static LIB: OnceLock<Arc<Library>> = OnceLock::new();
    LIB.get_or_init(|| Library::open(&compile("kernels_ro", &kernels_source())).unwrap())
}

fn call(name: &str, args: &[Value]) -> relaxvm::Result<Value> {
    let f = kernels().get_function(name).unwrap_or_else(|| panic!("no kernel {name}"));
    f.call(&mut relaxvm::CallCtx::detached(), args)
}

fn f32s(v: &[f32]) -> Tensor {
    Tensor::from_vec([v.len() as i64], v.to_vec()).unwrap()
}

/// `t` as an executable's constant: its bytes moved into read-only pages.
fn constant(t: Tensor) -> Tensor {
    let mut c = [Value::Tensor(t)];
    relaxvm::value::seal::seal_constants(&mut c).unwrap();
    let t = c[0].as_tensor().unwrap().clone();
    assert!(t.storage().is_sealed());
    t
}

#[test]
fn a_constant_as_a_kernels_output_is_an_error_and_stays_unchanged() {
    let weight = constant(f32s(&[5.0, 6.0, 7.0]));
    let (a, b) = (f32s(&[1.0, 2.0, 3.0]), f32s(&[10.0, 20.0, 30.0]));
    for _ in 0..3 {
        let e = call("add", &[Value::Tensor(a.clone()), Value::Tensor(b.clone()), Value::Tensor(weight.clone())])
            .unwrap_err();
        assert!(e.to_string().starts_with("kernel \"add\" wrote to read-only memory at 0x"), "{e}");
        assert!(e.to_string().contains("a constant of the executable"), "{e}");
        assert_eq!(weight.to_vec::<f32>().unwrap(), [5.0, 6.0, 7.0]);
        // The constant as an input is fine, and the kernel works normally afterwards.
        let out = Tensor::zeros([3], DataType::F32, Device::cpu(0)).unwrap();
        call("add", &[Value::Tensor(weight.clone()), Value::Tensor(b.clone()), Value::Tensor(out.clone())]).unwrap();
        assert_eq!(out.to_vec::<f32>().unwrap(), [15.0, 26.0, 37.0]);
    }
}

#[test]
fn a_constant_written_by_parallel_tasks_is_an_error_on_every_thread() {
    let table = constant(Tensor::from_vec([64], vec![9i64; 64]).unwrap());
    for num_task in [0, 1, 2] {
        // (This test kernel reports a failed launch with an error of its own; the task's error
        // is checked in the guard's unit tests.)
        call("parallel", &[Value::Tensor(table.clone()), Value::Int(num_task)]).unwrap_err();
        assert!(table.to_vec::<i64>().unwrap().iter().all(|v| *v == 9));
    }
    // The pool still runs launches.
    let out = Tensor::zeros([64], DataType::I64, Device::cpu(0)).unwrap();
    assert_eq!(call("parallel", &[Value::Tensor(out.clone()), Value::Int(1)]).unwrap().as_int().unwrap(), 0);
    assert_eq!(out.to_vec::<i64>().unwrap()[0], 1000);
}

#[test]
fn a_constant_a_kernel_hands_to_a_packed_function_is_read_only_there() {
    registry::register_global(
        PackedFunc::from_fn("test.ffi.negate", |args| {
            let (x, out) = (args[0].as_tensor()?, args[1].as_tensor()?);
            let neg: Vec<u8> = x.to_vec::<f32>()?.iter().flat_map(|v| (-v).to_le_bytes()).collect();
            out.storage().write(out.byte_offset(), &neg)?;
            Ok(Value::Int(0))
        }),
        true,
    )
    .unwrap();
    let weight = constant(f32s(&[1.0, 2.0]));
    let e = call("callback", &[Value::Tensor(f32s(&[3.0, 4.0])), Value::Tensor(weight.clone())]).unwrap_err();
    assert!(e.to_string().contains("read-only storage"), "{e}");
    assert_eq!(weight.to_vec::<f32>().unwrap(), [1.0, 2.0]);
    let out = Tensor::zeros([2], DataType::F32, Device::cpu(0)).unwrap();
    call("callback", &[Value::Tensor(weight.clone()), Value::Tensor(out.clone())]).unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), [-1.0, -2.0]);
}

#[test]
fn read_only_foreign_memory_reaches_kernels_as_a_private_copy_and_a_write_to_it_is_an_error() {
    // Frozen but not in read-only pages: what a read-only DLPack import is.
    let foreign = f32s(&[5.0, 6.0, 7.0]);
    foreign.storage().freeze();
    assert!(!foreign.storage().is_sealed());
    let a = f32s(&[1.0, 2.0, 3.0]);
    let e = call("add", &[Value::Tensor(a.clone()), Value::Tensor(a.clone()), Value::Tensor(foreign.clone())]);
    let e = e.unwrap_err().to_string();
    assert!(
        e.starts_with("kernel \"add\" wrote to argument 2 (a float32 tensor of shape (3,)), which is read-only memory"),
        "{e}"
    );
    assert_eq!(foreign.to_vec::<f32>().unwrap(), [5.0, 6.0, 7.0]);
    // A kernel that writes the values already there changed nothing: no error.
    let half = f32s(&[2.5, 3.0, 3.5]);
    call("add", &[Value::Tensor(half.clone()), Value::Tensor(half), Value::Tensor(foreign.clone())]).unwrap();
    assert_eq!(foreign.to_vec::<f32>().unwrap(), [5.0, 6.0, 7.0]);
    // As an input its values are read.
    let out = Tensor::zeros([3], DataType::F32, Device::cpu(0)).unwrap();
    call("add", &[Value::Tensor(foreign), Value::Tensor(a), Value::Tensor(out.clone())]).unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), [6.0, 8.0, 10.0]);
}

/// Runs test `name` of this file in a child process with `RELAXVM_TEST_CHILD` set, and checks
/// that it died of the segmentation fault: by SIGSEGV, or, in a build under AddressSanitizer
/// (whose SIGSEGV handler the guard's chains to, as to any handler installed before it), by
/// ASan's report of the SEGV.
fn assert_child_dies_of_segv(name: &str) {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env("RELAXVM_TEST_CHILD", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let by_asan = !out.status.success() && stderr.contains("AddressSanitizer: SEGV");
    assert!(out.status.signal() == Some(libc::SIGSEGV) || by_asan, "{:?}\n{stderr}", out.status);
}

fn is_child() -> bool {
    std::env::var_os("RELAXVM_TEST_CHILD").is_some()
}

#[test]
fn a_fault_outside_a_guarded_call_still_ends_the_process() {
    if is_child() {
        let weight = constant(f32s(&[1.0]));
        // Install the guard's handler (a guarded call), then write the constant from Rust.
        call("add", &[Value::Tensor(f32s(&[1.0])), Value::Tensor(f32s(&[1.0])), Value::Tensor(f32s(&[0.0]))]).unwrap();
        // SAFETY: deliberately broken: this write to read-only pages must end the (child) process.
        unsafe { std::ptr::write_volatile(weight.data_ptr(), 1u8) };
        std::process::exit(0);
    }
    assert_child_dies_of_segv("a_fault_outside_a_guarded_call_still_ends_the_process");
}

#[test]
fn a_kernel_fault_elsewhere_than_a_constant_still_ends_the_process() {
    if is_child() {
        // A DLTensor whose data points at an unmapped address: the guard leaves that fault to the
        // default action.
        // SAFETY: deliberately broken (the address is not memory): the kernel's write there
        // must end the (child) process.
        let wild = unsafe {
            Storage::from_external(std::ptr::NonNull::new(64 as *mut u8).unwrap(), 12, Device::cpu(0), Box::new(()))
        };
        let out = Tensor::from_parts(wild, 0, [3].into(), None, DataType::F32).unwrap();
        let _ = call("add", &[Value::Tensor(f32s(&[1.0; 3])), Value::Tensor(f32s(&[1.0; 3])), Value::Tensor(out)]);
        std::process::exit(0);
    }
    assert_child_dies_of_segv("a_kernel_fault_elsewhere_than_a_constant_still_ends_the_process");
}
