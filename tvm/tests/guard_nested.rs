//! A kernel that faults inside a callback of another kernel (a guard inside a guard): the
//! fault is the inner kernel's error, the outer kernel fails with it, the thread's signal mask
//! is as it was, and both kernels work again afterwards, many times (tests/c/kernels.c).

mod common;

use common::signals::blocked;
use common::{compile, kernels_source};
use relaxvm::storage::read_only::ReadOnlyPages;
use relaxvm::{registry, CallCtx, DataType, Device, NativeLibrary, PackedFunc, Shape, Storage, Tensor, Value};
use relaxvm_tvm::ffi::Library;
use std::sync::{Arc, OnceLock};

fn kernels() -> &'static Arc<Library> {
    static LIB: OnceLock<Arc<Library>> = OnceLock::new();
    LIB.get_or_init(|| Library::open(&compile("kernels", &kernels_source())).unwrap())
}

fn call(name: &str, args: &[Value]) -> relaxvm::Result<Value> {
    kernels().get_function(name).unwrap().call(&mut CallCtx::detached(), args)
}

fn f32s(v: &[f32]) -> Tensor {
    let t = Tensor::zeros([v.len() as i64], DataType::F32, Device::cpu(0)).unwrap();
    t.storage().write(0, &v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>()).unwrap();
    t
}

#[test]
fn a_fault_inside_a_callback_inside_a_kernel_is_the_inner_kernels_error() {
    // A constant in read-only pages (zeroed), where `add` is told to write.
    let pages = Arc::new(ReadOnlyPages::filled(64, |_| Ok(())).unwrap());
    let constant = Storage::from_read_only_pages(pages, 0, 8).unwrap();
    let constant = Tensor::from_parts(constant, 0, Shape::from(&[2][..]), None, DataType::F32).unwrap();
    // `callback(x, out, name)` calls the function `name` with (x, out, "hi"): it runs `add`
    // into the constant, which faults.
    let target = constant.clone();
    registry::register_global(
        PackedFunc::from_fn("test.guard.nested_fault", move |args| {
            let x = args[0].as_tensor()?.clone();
            call("add", &[Value::Tensor(x.clone()), Value::Tensor(x), Value::Tensor(target.clone())])
        }),
        true,
    )
    .unwrap();
    let name = c"test.guard.nested_fault";
    let before = blocked();
    for _ in 0..3 {
        let out = f32s(&[0.0, 0.0]);
        let e =
            call("callback", &[Value::Tensor(f32s(&[1.0, 2.0])), Value::Tensor(out), Value::Int(name.as_ptr() as i64)])
                .unwrap_err()
                .to_string();
        assert!(e.contains("kernel \"add\" wrote to read-only memory at 0x"), "{e}");
        assert_eq!(blocked(), before, "the signal mask is as it was");
        // The constant is unchanged, and the kernels work again.
        assert_eq!(constant.to_vec::<f32>().unwrap(), [0.0, 0.0]);
        let out = f32s(&[0.0, 0.0]);
        call("add", &[Value::Tensor(f32s(&[1.0, 2.0])), Value::Tensor(f32s(&[3.0, 4.0])), Value::Tensor(out.clone())])
            .unwrap();
        assert_eq!(out.to_vec::<f32>().unwrap(), [4.0, 6.0]);
    }
    assert!(!before.contains(&libc::SIGSEGV) && !before.contains(&libc::SIGBUS));
}
