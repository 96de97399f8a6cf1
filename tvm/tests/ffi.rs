//! The FFI against hand-written C kernels (tests/c/kernels.c, compiled here with the system C
//! compiler): every argument conversion, errors, workspace, parallel launch, callbacks into
//! the registry, and libraries the loader must refuse.

mod common;

use common::{compile, kernels_source};
use relaxvm::{registry, DataType, Device, NativeLibrary, PackedFunc, Shape, Storage, Tensor, Value};
use relaxvm_tvm::elf;
use relaxvm_tvm::ffi::Library;
use std::process::Command;
use std::sync::{Arc, OnceLock};

fn kernels() -> &'static Arc<Library> {
    static LIB: OnceLock<Arc<Library>> = OnceLock::new();
    LIB.get_or_init(|| Library::open(&compile("kernels", &kernels_source())).unwrap())
}

fn call(name: &str, args: &[Value]) -> relaxvm::Result<Value> {
    let f = kernels().get_function(name).unwrap_or_else(|| panic!("no kernel {name}"));
    f.call(&mut relaxvm::CallCtx::detached(), args)
}

fn f32s(v: &[f32]) -> Value {
    Value::Tensor(Tensor::from_vec([v.len() as i64], v.to_vec()).unwrap())
}

#[test]
fn kernels_are_found_and_runtime_names_are_not_kernels() {
    let mut names: Vec<&str> = kernels().kernel_names().collect();
    names.sort();
    assert_eq!(
        names,
        [
            "add",
            "callback",
            "counter",
            "echo",
            "exp",
            "fail_cstr",
            "fail_kernel",
            "kinds",
            "ndinfo",
            "parallel",
            "parallel_fail",
            "workspace"
        ]
    );
    assert!(kernels().get_function("library_bin").is_none() && kernels().get_function("nothing").is_none());
}

#[test]
fn tensors_are_passed_as_dltensors_and_written_in_place() {
    let out = Tensor::zeros([3], DataType::F32, Device::cpu(0)).unwrap();
    call("add", &[f32s(&[1.0, 2.0, 3.0]), f32s(&[10.0, 20.0, 30.0]), Value::Tensor(out.clone())]).unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![11.0, 22.0, 33.0]);
    let info = |t: Tensor| call("ndinfo", &[Value::Tensor(t)]).unwrap().as_int().unwrap();
    // ndim 2, float (code 2), compact: null strides.
    assert_eq!(info(Tensor::zeros([2, 3], DataType::F32, Device::cpu(0)).unwrap()), 220);
    assert_eq!(info(Tensor::scalar(5i64)), 0);
    assert_eq!(info(Tensor::scalar(true)), 60);
}

#[test]
fn misaligned_and_strided_tensors_go_through_aligned_copies() {
    // A view starting 4 bytes into its storage: misaligned for the kernel.
    let storage = Storage::alloc(4 * 8, Device::cpu(0)).unwrap();
    storage.write(4, &[1.0f32, 2.0, 3.0].iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
    let view = |s: &Storage| Tensor::from_parts(s.clone(), 4, Shape::new(vec![3]), None, DataType::F32).unwrap();
    let a = view(&storage);
    assert_ne!(a.data_ptr() as usize % 64, 0);
    let out_storage = Storage::alloc(4 * 8, Device::cpu(0)).unwrap();
    let out = view(&out_storage);
    call("add", &[Value::Tensor(a.clone()), Value::Tensor(a), Value::Tensor(out.clone())]).unwrap();
    // The result was copied back into the misaligned output.
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![2.0, 4.0, 6.0]);
    // A strided view reaches the kernel as a compact copy.
    let base = Tensor::from_vec([2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let column =
        Tensor::from_parts(base.storage().clone(), 0, Shape::new(vec![2]), Some(vec![2]), DataType::F32).unwrap();
    assert!(!column.is_contiguous());
    let out = Tensor::zeros([2], DataType::F32, Device::cpu(0)).unwrap();
    call("add", &[Value::Tensor(column.clone()), Value::Tensor(column.clone()), Value::Tensor(out.clone())]).unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![2.0, 6.0]);
    // A strided output: the results land at its elements, and nothing else of the storage moves.
    call("add", &[Value::Tensor(out.clone()), Value::Tensor(out), Value::Tensor(column)]).unwrap();
    assert_eq!(base.to_vec::<f32>().unwrap(), vec![4.0, 2.0, 12.0, 4.0]);
}

#[test]
fn scalars_round_trip_and_unsupported_values_are_type_errors() {
    assert_eq!(call("echo", &[Value::Int(-7)]).unwrap().as_int().unwrap(), -7);
    assert_eq!(call("echo", &[Value::Float(2.5)]).unwrap().as_float().unwrap(), 2.5);
    assert!(matches!(call("echo", &[Value::Bool(true)]).unwrap(), Value::Bool(true)));
    assert!(matches!(call("echo", &[Value::Null]).unwrap(), Value::Null));
    // DataType float32: code 2, bits 32 -> 5 * 1000 + (32 << 8 | 2).
    assert_eq!(call("echo", &[Value::DType(DataType::F32)]).unwrap().as_int().unwrap(), 5000 + (32 << 8 | 2));
    assert_eq!(call("echo", &[Value::Device(Device::cpu(0))]).unwrap().as_int().unwrap(), 6001);
    let e = call("echo", &[Value::str("x")]).unwrap_err().to_string();
    assert!(e.contains("argument 0 of kernel \"echo\"") && e.contains("str"), "{e}");
}

#[test]
fn libm_is_available_to_kernels_that_do_not_name_it() {
    // This test program does not link libm itself; TVM's libraries call expf, tanhf... without
    // a DT_NEEDED entry, counting on the runtime to have loaded it.
    // (No `f32::exp` here: that would link libm into this program.) expf(1) is e rounded to f32.
    assert_eq!(call("exp", &[Value::Float(1.0)]).unwrap().as_float().unwrap(), f64::from(std::f32::consts::E));
}

#[test]
fn kernel_errors_keep_their_kind_and_message() {
    let e = call("fail_kernel", &[]).unwrap_err();
    assert!(matches!(e.kind(), relaxvm::ErrorKind::Raised { kind, .. } if kind == "ValueError"), "{e:?}");
    assert_eq!(e.to_string(), "kernel \"fail_kernel\" raised ValueError: Check failed: the kernel refuses");
    let e = call("fail_cstr", &[]).unwrap_err();
    assert!(matches!(e.kind(), relaxvm::ErrorKind::Raised { kind, .. } if kind == "IndexError"), "{e:?}");
    assert!(e.to_string().contains("index out of bounds"));
    // The error is taken once: a later success is not confused by it.
    assert_eq!(call("echo", &[Value::Int(1)]).unwrap().as_int().unwrap(), 1);
}

#[test]
fn workspace_is_aligned_and_freed() {
    for n in [0i64, 1, 63, 64, 1 << 20] {
        assert_eq!(call("workspace", &[Value::Int(n)]).unwrap().as_int().unwrap(), n);
    }
    let e = call("workspace", &[Value::Int(-1)]).unwrap_err().to_string();
    assert!(e.contains("cannot allocate a workspace"), "{e}");
}

fn parallel(len: usize, num_task: i64, nested: bool) -> (i64, Vec<i64>) {
    let out = Tensor::zeros([len as i64], DataType::I64, Device::cpu(0)).unwrap();
    let bad = call("parallel", &[Value::Tensor(out.clone()), Value::Int(num_task), Value::Int(nested as i64)]).unwrap();
    (bad.as_int().unwrap(), out.to_vec::<i64>().unwrap())
}

/// Held by tests that need the pool to themselves (a launch while another one runs goes inline).
static POOL_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn parallel_launch_runs_tasks_concurrently_with_a_barrier() {
    let _alone = POOL_TESTS.lock().unwrap_or_else(|p| p.into_inner());
    let threads = relaxvm_tvm::ffi::pool::global().threads() as i64;
    // num_task 0: every thread; each task saw all others' writes after the barrier.
    let (bad, out) = parallel(64, 0, false);
    assert_eq!(bad, 0);
    for (i, v) in out.iter().enumerate().take(threads as usize) {
        assert_eq!(*v, i as i64 + 1000 * threads);
    }
    // More tasks than threads: capped at the pool's width.
    let (bad, out) = parallel(64, 64, false);
    assert_eq!((bad, out[0]), (0, 1000 * threads));
    // One task.
    assert_eq!(parallel(4, 1, false), (0, vec![1000, 0, 0, 0]));
    // Nested launches run inline as one task each.
    let (bad, out) = parallel(64, 0, true);
    assert_eq!(bad, 0);
    assert!(out.iter().take(threads as usize).all(|v| *v == 1000), "{out:?}");
}

#[test]
fn an_error_raised_by_a_task_on_a_worker_reaches_the_caller() {
    let _alone = POOL_TESTS.lock().unwrap_or_else(|p| p.into_inner());
    let threads = relaxvm_tvm::ffi::pool::global().threads();
    for (asked, ran) in [(0, threads), (1, 1), (2, threads.min(2))] {
        let e = call("parallel_fail", &[Value::Int(asked)]).unwrap_err();
        assert!(matches!(e.kind(), relaxvm::ErrorKind::Raised { kind, .. } if kind == "ValueError"), "{e:?}");
        let want = format!("kernel \"parallel_fail\" raised ValueError: failed in task {} of {ran}", ran - 1);
        assert_eq!(e.to_string(), want);
    }
}

#[test]
fn concurrent_launches_from_many_threads_do_not_deadlock() {
    let _alone = POOL_TESTS.lock().unwrap_or_else(|p| p.into_inner());
    let handles: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(|| {
                for _ in 0..200 {
                    let (bad, _) = parallel(64, 0, false);
                    assert_eq!(bad, 0);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn kernels_call_registered_functions_by_name() {
    registry::register_global(
        PackedFunc::from_fn("test.ffi.negate", |args| {
            // (x, out, "hi"): out = -x; returns the string's length.
            let (x, out) = (args[0].as_tensor()?, args[1].as_tensor()?);
            let neg: Vec<f32> = x.to_vec::<f32>()?.iter().map(|v| -v).collect();
            out.storage().write(out.byte_offset(), &neg.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())?;
            Ok(Value::Int(args[2].as_str()?.len() as i64))
        }),
        true,
    )
    .unwrap();
    let out = Tensor::zeros([2], DataType::F32, Device::cpu(0)).unwrap();
    let r = call("callback", &[f32s(&[1.5, -2.0]), Value::Tensor(out.clone())]).unwrap();
    assert_eq!(r.as_int().unwrap(), 2);
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![-1.5, 2.0]);
    // The cached handle is reused on the second call.
    call("callback", &[f32s(&[1.0, 1.0]), Value::Tensor(out.clone())]).unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![-1.0, -1.0]);
}

#[test]
fn every_kind_of_value_a_kernel_passes_reaches_the_function_and_errors_keep_their_kind() {
    registry::register_global(
        PackedFunc::from_fn("test.ffi.kinds", |args| {
            let text = format!(
                "{}|{}|{:?}|{:?}|{:?}|{:?}|{:?}",
                args[0].as_str()?,
                args[1].as_dtype()?,
                args[2],
                args[3],
                args[4],
                args[5],
                args[6]
            );
            assert_eq!(text, "raw text|float32|cpu:0|True|0.5|-7|None");
            let view = args[7].as_tensor()?;
            // A compact copy of the kernel's strided view (callbacks never see kernel memory).
            assert_eq!((view.strides(), view.to_vec::<f32>()?), (vec![1i64], vec![2.0, 4.0]));
            assert_eq!(args[8].as_tensor()?.to_vec::<i64>()?, vec![42]);
            Ok(Value::Float(1.5))
        }),
        true,
    )
    .unwrap();
    registry::register_global(
        PackedFunc::from_fn("test.ffi.fails", |_| Err(relaxvm::Error::index("the table", 5, 2))),
        true,
    )
    .unwrap();
    assert_eq!(call("kinds", &[Value::Int(0)]).unwrap().as_float().unwrap(), 1.5);
    let e = call("kinds", &[Value::Int(1)]).unwrap_err();
    assert!(matches!(e.kind(), relaxvm::ErrorKind::Raised { kind, .. } if kind == "IndexError"), "{e:?}");
    assert_eq!(e.to_string(), "kernel \"kinds\" raised IndexError: index 5 out of range for the table of length 2");
}

#[test]
fn a_kernel_calling_an_unregistered_function_gets_an_error() {
    let name = std::ffi::CString::new("test.ffi.nothing").unwrap();
    let out = Tensor::zeros([1], DataType::F32, Device::cpu(0)).unwrap();
    // The raw string pointer passed as an opaque argument: only the C side reads it.
    let e = call("callback", &[f32s(&[1.0]), Value::Tensor(out), Value::Int(name.as_ptr() as i64)]);
    // An int is not a pointer type for our converter; the kernel reads the payload as a pointer.
    let e = e.unwrap_err().to_string();
    assert!(e.contains("test.ffi.nothing") && e.contains("not registered"), "{e}");
}

#[test]
fn each_open_maps_its_own_copy_apart_from_other_runtimes() {
    let path = compile("kernels_twice", &kernels_source());
    let count = |lib: &Library| {
        let f = lib.get_function("counter").unwrap();
        f.call(&mut relaxvm::CallCtx::detached(), &[]).unwrap().as_int().unwrap()
    };
    let (a, b) = (Library::open(&path).unwrap(), Library::open(&path).unwrap());
    assert_eq!((count(&a), count(&a), count(&b)), (1, 2, 1));
    // Another runtime (TVM's loader) opening the file itself gets its own mapping too: its
    // globals (slots, cached handles) are not relaxvm's.
    // SAFETY: the library's only initializers are the C runtime's; the symbol has the
    // safe-call signature of tests/c/kernels.c.
    unsafe {
        let other = libloading::Library::new(&path).unwrap();
        let f = other.get::<relaxvm_tvm::ffi::abi::SafeCall>(b"__tvm_ffi_counter").unwrap();
        let mut result = relaxvm_tvm::ffi::abi::TVMFFIAny::NONE;
        assert_eq!(f(std::ptr::null_mut(), std::ptr::null(), 0, &mut result), 0);
        assert_eq!(result.payload, 1);
        let slot = other.get::<*const usize>(b"__TVMBackendParallelLaunch").unwrap();
        assert_eq!(**slot, 0, "relaxvm's slots are filled in its own copy only");
    }
    assert_eq!(count(&a), 3);
}

#[test]
fn the_elf_reader_finds_symbols_without_running_code() {
    let bytes = std::fs::read(compile("kernels_read", &kernels_source())).unwrap();
    let blob = elf::exported_symbol_bytes(&bytes, "__tvm_ffi__library_bin").unwrap().unwrap();
    assert_eq!(&blob[8..], b"relaxvm!");
    assert!(elf::exported_symbol_bytes(&bytes, "no_such_symbol").unwrap().is_none());
    assert!(elf::exported_functions(&bytes).unwrap().iter().any(|f| f == "__tvm_ffi_add"));
    assert!(elf::exported_data(&bytes).unwrap().iter().any(|f| f == "__TVMBackendParallelLaunch"));
    // The blob is not a module tree: the importer says so.
    let e = relaxvm_tvm::library_bin::modules(blob).unwrap_err().to_string();
    assert!(e.contains("__tvm_ffi__library_bin"), "{e}");
}

#[test]
fn truncated_and_corrupted_libraries_are_errors_not_crashes() {
    let bytes = std::fs::read(compile("kernels_cut", &kernels_source())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for i in 0..20 {
        let cut = bytes.len() * i / 20;
        let p = dir.path().join(format!("cut{i}.so"));
        std::fs::write(&p, &bytes[..cut]).unwrap();
        assert!(
            format!("{:?}", Library::open(&p).expect_err("an error")).starts_with(r#"Value("#),
            "truncated to {cut} bytes"
        );
    }
    // Every header byte flipped: an error or a loadable file, never a crash of the process.
    for i in 0..64 {
        let mut bad = bytes.clone();
        bad[i] ^= 0xFF;
        let _ = elf::validate(&bad);
    }
    // A 32-bit class.
    let mut bad = bytes.clone();
    bad[4] = 1;
    assert!(elf::validate(&bad).unwrap_err().to_string().contains("ELF class 1"));
    // A loadable segment past the end of the file: find the first PT_LOAD and grow its size.
    let phoff = u64::from_le_bytes(bytes[32..40].try_into().unwrap()) as usize;
    let mut bad = bytes.clone();
    let filesz_at = phoff + 32;
    let big = (bytes.len() as u64 * 4).to_le_bytes();
    let is_load = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) == 1;
    let first_load = (0..16).map(|i| phoff + i * 56).find(|at| is_load(&bytes, *at)).unwrap();
    bad[first_load + 32..first_load + 40].copy_from_slice(&big);
    bad[first_load + 40..first_load + 48].copy_from_slice(&big);
    let _ = filesz_at;
    let e = elf::validate(&bad).unwrap_err().to_string();
    assert!(e.contains("file has") && e.contains("truncated"), "{e}");
}

#[test]
fn a_library_with_an_unresolvable_symbol_or_unknown_slot_is_refused() {
    let p = compile(
        "unresolved",
        "void relaxvm_test_no_such_function(void);\nint __tvm_ffi_k(void* s, void* a, int n, void* r) { relaxvm_test_no_such_function(); return 0; }\n",
    );
    let e = Library::open(&p).unwrap_err().to_string();
    assert!(e.contains("dynamic loader refused") && e.contains("relaxvm_test_no_such_function"), "{e}");
    assert!(e.starts_with(&format!("{}: ", p.display())) && !e.contains("/proc/self/fd"), "{e}");
    let p = compile(
        "new_slot",
        "void* __TVMBackendSomethingNew = 0;\nint __tvm_ffi_k(void* s, void* a, int n, void* r) { return 0; }\n",
    );
    let e = Library::open(&p).unwrap_err().to_string();
    assert!(e.contains("__TVMBackendSomethingNew") && e.contains("does not provide"), "{e}");
}

/// Run in a child process by `the_pool_size_follows_relaxvm_num_threads` (it prints the width
/// of a full launch); does nothing in a normal run.
#[test]
fn pool_width_probe() {
    if std::env::var_os("RELAXVM_TEST_PROBE").is_none() {
        return;
    }
    match Library::open(&compile("probe", &kernels_source())) {
        Ok(lib) => {
            let out = Tensor::zeros([64], DataType::I64, Device::cpu(0)).unwrap();
            let f = lib.get_function("parallel").unwrap();
            let bad = f
                .call(&mut relaxvm::CallCtx::detached(), &[Value::Tensor(out.clone()), Value::Int(0), Value::Int(0)])
                .unwrap();
            let failed = lib.get_function("parallel_fail").unwrap();
            let e = failed.call(&mut relaxvm::CallCtx::detached(), &[Value::Int(0)]).unwrap_err();
            let width = out.to_vec::<i64>().unwrap()[0] / 1000;
            println!("PROBE width={width} bad={} error={e}", bad.as_int().unwrap());
        }
        Err(e) => println!("PROBE error={e}"),
    }
}

#[test]
fn the_pool_size_follows_relaxvm_num_threads() {
    let probe = |value: &str| {
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "pool_width_probe", "--nocapture", "--test-threads=1"])
            .env("RELAXVM_TEST_PROBE", "1")
            .env("RELAXVM_NUM_THREADS", value)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        // The harness prints "test NAME ... " on the same line before the probe's output.
        text.lines().find_map(|l| l.split_once("PROBE ").map(|(_, v)| v.to_string())).unwrap_or(text)
    };
    // The last task of a full launch fails on a worker thread (task 0 runs on the caller); its
    // error reaches the caller.
    let expect = |n: usize| {
        format!("width={n} bad=0 error=kernel \"parallel_fail\" raised ValueError: failed in task {} of {n}", n - 1)
    };
    assert_eq!(probe("1"), expect(1));
    assert_eq!(probe("3"), expect(3));
    assert_eq!(probe("4"), expect(4));
    for bad in ["0", "many", "-2"] {
        let e = probe(bad);
        assert!(e.contains("RELAXVM_NUM_THREADS") && e.contains("positive integer"), "{bad}: {e}");
    }
}

#[test]
fn two_libraries_with_the_same_kernel_names_stay_apart() {
    let kernel = |v: i64| {
        format!("#include <stdint.h>\ntypedef struct {{ int32_t t; uint32_t s; int64_t v; }} Any;\nint __tvm_ffi_k(void* s, const Any* a, int n, Any* r) {{ r->t = 1; r->v = {v}; return 0; }}\n")
    };
    let one = Library::open(&compile("same_one", &kernel(1))).unwrap();
    let two = Library::open(&compile("same_two", &kernel(2))).unwrap();
    let run = |lib: &Arc<Library>| {
        lib.get_function("k").unwrap().call(&mut relaxvm::CallCtx::detached(), &[]).unwrap().as_int().unwrap()
    };
    assert_eq!((run(&one), run(&two)), (1, 2));
    // Dropping one keeps the other's kernels working, and reopening gives the first again.
    drop(one);
    assert_eq!(run(&two), 2);
    let again = Library::open(&compile("same_one", &kernel(1))).unwrap();
    assert_eq!((run(&again), run(&two)), (1, 2));
}
