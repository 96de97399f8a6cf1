//! DLTensors a kernel hands back to relaxvm whose strides relaxvm cannot follow: a negative
//! stride (a view reaching before its data) and strides whose span overflows are value errors
//! naming the strides.

use relaxvm::{DataType, Value};
use relaxvm_tvm::ffi::abi::{type_index, DLDevice, DLTensor, TVMFFIAny};
use relaxvm_tvm::ffi::convert::{dl_dtype, CallbackArgs};
use std::ffi::c_void;

/// `t` passed to a callback, as a kernel passes it.
fn tensor_arg(t: &DLTensor) -> relaxvm::Result<Value> {
    let mut args = CallbackArgs::default();
    // SAFETY: `t` is a live DLTensor whose shape and strides hold `ndim` values.
    unsafe { args.value(&TVMFFIAny::ptr(type_index::DL_TENSOR_PTR, (t as *const DLTensor).cast())) }
}

#[test]
fn a_view_spanning_more_than_memory_is_too_large() {
    let buf = [0f32; 8];
    let (mut shape, mut strides) = ([4i64], [i64::MAX / 2]);
    let t = DLTensor {
        data: buf.as_ptr() as *mut c_void,
        device: DLDevice { device_type: 1, device_id: 0 },
        ndim: 1,
        dtype: dl_dtype(DataType::F32),
        shape: shape.as_mut_ptr(),
        strides: strides.as_mut_ptr(),
        byte_offset: 0,
    };
    let e = tensor_arg(&t).expect_err("refused");
    assert_eq!(format!("{:?}", e.kind()), "Value(\"a tensor of shape (4,) and dtype float32 too large\")");
}

#[test]
fn strides_relaxvm_cannot_follow_are_named() {
    let buf = [0f32; 8];
    for (strides, shown) in [([-1i64], "[-1]"), ([i64::MAX], "[9223372036854775807]")] {
        let mut shape = [4i64];
        let mut strides = strides;
        let t = DLTensor {
            data: buf.as_ptr() as *mut c_void,
            device: DLDevice { device_type: 1, device_id: 0 },
            ndim: 1,
            dtype: dl_dtype(DataType::F32),
            shape: shape.as_mut_ptr(),
            strides: strides.as_mut_ptr(),
            byte_offset: 0,
        };
        let e = tensor_arg(&t).expect_err("refused");
        assert_eq!(format!("{:?}", e.kind()), format!("Value(\"strides {shown}: negative or overflowing\")"));
    }
}
