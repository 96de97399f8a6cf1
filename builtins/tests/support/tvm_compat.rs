//! Helpers of the TVM-compatibility builtin tests (`tvm_builtins.rs`,
//! `tvm_builtins_tensor_cache.rs`): the builtins in a registry of their own, called outside any
//! VM, and tensors as plain vectors.
#![allow(dead_code)] // each test binary uses some

use relaxvm::{CallCtx, DataType, ErrorKind, Registry, Result, Shape, Tensor, Value};
use std::sync::OnceLock;

pub fn registry() -> &'static Registry {
    static REG: OnceLock<Registry> = OnceLock::new();
    REG.get_or_init(|| {
        let mut r = Registry::new();
        relaxvm_builtins::register_all(&mut r).unwrap();
        r
    })
}

/// Calls builtin `name` outside any VM; what it prints is captured (and dropped).
pub fn call(name: &str, args: &[Value]) -> Result<Value> {
    let f = registry().get(name).unwrap_or_else(|| panic!("{name} not registered"));
    relaxvm_builtins::output::capture(|| f.call(&mut CallCtx::detached(), args)).0
}

/// The error message of a call that must fail cleanly (not a caught panic).
pub fn err(name: &str, args: &[Value]) -> String {
    match call(name, args) {
        Ok(v) => panic!("{name} returned {v:?}, expected an error"),
        Err(e) => {
            assert!(!matches!(e.root().kind(), ErrorKind::Panic(_)), "{name} panicked: {e}");
            e.to_string()
        }
    }
}

pub fn t<T: relaxvm::Element>(dims: &[i64], v: Vec<T>) -> Value {
    Value::Tensor(Tensor::from_vec(Shape::from(dims), v).unwrap())
}

/// A tensor's shape, dtype and elements as f64 (bit-exact for the values used here).
pub fn parts(v: &Value) -> (Vec<i64>, DataType, Vec<f64>) {
    let t = v.as_tensor().unwrap();
    let vals = relaxvm::dispatch_dtype!(t.dtype(), T => t.to_vec::<T>().unwrap().into_iter().map(relaxvm::Element::to_f64).collect());
    (t.shape().to_vec(), t.dtype(), vals)
}

pub fn i64s(v: &Value) -> (Vec<i64>, Vec<i64>) {
    let t = v.as_tensor().unwrap();
    assert_eq!(t.dtype(), DataType::I64);
    (t.shape().to_vec(), t.to_vec::<i64>().unwrap())
}
