//! The refusals of the conversions between relaxvm values and tvm-ffi's `TVMFFIAny`
//! (`relaxvm_tvm::ffi::convert`): what a kernel hands back or passes to a callback that relaxvm
//! cannot take is an error naming what was expected and what was found, never a read of the
//! memory it describes. Each test builds the value a kernel would pass.

use relaxvm::{DataType, Value};
use relaxvm_tvm::ffi::abi::{type_index, DLDataType, DLDevice, DLTensor, TVMFFIAny};
use relaxvm_tvm::ffi::convert::{dl_dtype, result_from_ffi, result_to_ffi, CallbackArgs};
use std::ffi::c_void;

/// The error's kind, as `{:?}` prints it (the kind and every field).
fn kind(e: relaxvm::Error) -> String {
    format!("{:?}", e.kind())
}

#[test]
fn a_result_of_another_type_is_a_type_error_naming_its_type_index() {
    for index in [type_index::OPAQUE_PTR, type_index::DL_TENSOR_PTR, type_index::ERROR, 1000] {
        let a = TVMFFIAny { type_index: index, small_str_len: 0, payload: 0 };
        assert_eq!(
            kind(result_from_ffi(&a).expect_err("refused")),
            format!(
                r#"Type {{ expected: "a result of None, int, bool or float", found: "tvm-ffi type index {index}" }}"#
            )
        );
    }
    // The four it takes.
    assert!(matches!(result_from_ffi(&TVMFFIAny::int(-3)), Ok(Value::Int(-3))));
    assert!(matches!(result_from_ffi(&TVMFFIAny::NONE), Ok(Value::Null)));
}

#[test]
fn a_tensor_or_string_result_handed_back_to_a_kernel_is_a_type_error() {
    let t = Value::Tensor(relaxvm::Tensor::scalar(1.0f32));
    assert_eq!(
        kind(result_to_ffi(&t).expect_err("refused")),
        r#"Type { expected: "a scalar result (a kernel cannot take ownership of a tensor)", found: "tensor" }"#
    );
    assert_eq!(
        kind(result_to_ffi(&Value::str("s")).expect_err("refused")),
        r#"Type { expected: "a tensor, int, float, bool, dtype, device or None for a result returned to a kernel", found: "str" }"#
    );
}

/// A callback argument `a`, converted.
fn callback_value(a: &TVMFFIAny) -> relaxvm::Result<Value> {
    let mut args = CallbackArgs::default();
    // SAFETY: every pointer the tests put in `a` is null, or a DLTensor on the caller's stack
    // whose checks fail before its data is read (the data pointers are never dereferenced).
    unsafe { args.value(a) }
}

#[test]
fn null_pointers_are_value_errors() {
    let null_tensor = TVMFFIAny::ptr(type_index::DL_TENSOR_PTR, std::ptr::null());
    assert_eq!(kind(callback_value(&null_tensor).expect_err("refused")), r#"Value("null DLTensor pointer")"#);
    let null_str = TVMFFIAny::ptr(type_index::RAW_STR, std::ptr::null());
    assert_eq!(kind(callback_value(&null_str).expect_err("refused")), r#"Value("null string pointer")"#);
}

/// A one-dimensional f32 DLTensor of `n` elements at `data`.
fn dl(data: usize, shape: &mut [i64; 1], strides: *mut i64) -> DLTensor {
    DLTensor {
        data: data as *mut c_void,
        device: DLDevice { device_type: 1, device_id: 0 },
        ndim: 1,
        dtype: dl_dtype(DataType::F32),
        shape: shape.as_mut_ptr(),
        strides,
        byte_offset: 0,
    }
}

/// `t` passed to a callback.
fn tensor_arg(t: &DLTensor) -> relaxvm::Result<Value> {
    callback_value(&TVMFFIAny::ptr(type_index::DL_TENSOR_PTR, (t as *const DLTensor).cast()))
}

#[test]
fn dltensors_relaxvm_cannot_copy_are_value_errors_naming_the_field() {
    let mut shape = [4i64];
    let buf = [0f32; 4];
    let at = buf.as_ptr() as usize;
    // Another device.
    let mut t = dl(at, &mut shape, std::ptr::null_mut());
    t.device.device_type = 2;
    assert_eq!(
        kind(tensor_arg(&t).expect_err("refused")),
        r#"Value("a tensor on device type 2; relaxvm runs CPU kernels")"#
    );
    // A rank with no shape.
    let mut t = dl(at, &mut shape, std::ptr::null_mut());
    t.shape = std::ptr::null_mut();
    assert_eq!(kind(tensor_arg(&t).expect_err("refused")), r#"Value("a DLTensor with a null shape")"#);
    // Null data for elements.
    let t = dl(0, &mut shape, std::ptr::null_mut());
    assert_eq!(kind(tensor_arg(&t).expect_err("refused")), r#"Value("a DLTensor with null data")"#);
    // A pointer and offset past the end of the address space.
    let mut t = dl(usize::MAX - 7, &mut shape, std::ptr::null_mut());
    t.byte_offset = 4;
    assert_eq!(
        kind(tensor_arg(&t).expect_err("refused")),
        r#"Value("a DLTensor whose data pointer, byte_offset 4 and extent 16 overflow")"#
    );
    // A negative dimension: no element count.
    let mut negative = [-3i64];
    let t = dl(at, &mut negative, std::ptr::null_mut());
    assert_eq!(
        kind(tensor_arg(&t).expect_err("refused")),
        r#"Value("a DLTensor with shape (-3,): expected dimensions >= 0 whose product fits in int64")"#
    );
    // A vector dtype.
    let mut t = dl(at, &mut shape, std::ptr::null_mut());
    t.dtype = DLDataType { code: 2, bits: 32, lanes: 4 };
    assert_eq!(
        kind(tensor_arg(&t).expect_err("refused")),
        r#"Value("vector dtype with 4 lanes is not supported (code 2, 32 bits)")"#
    );
}

#[test]
fn a_broadcast_view_whose_copy_would_not_fit_in_memory_is_too_large() {
    // 2^62 elements of stride 0 span one element (4 readable bytes), but a copy of them needs
    // 2^64 bytes: refused before anything is allocated or read.
    let one = [1f32];
    let mut shape = [1i64 << 62];
    let mut strides = [0i64];
    let t = dl(one.as_ptr() as usize, &mut shape, strides.as_mut_ptr());
    assert_eq!(kind(tensor_arg(&t).expect_err("refused")), r#"Value("tensor too large")"#);
    // The same view of 4 elements is copied.
    let mut shape = [4i64];
    let t = dl(one.as_ptr() as usize, &mut shape, strides.as_mut_ptr());
    let v = tensor_arg(&t).expect("a copy");
    assert_eq!(v.as_tensor().unwrap().to_vec::<f32>().unwrap(), vec![1.0; 4]);
}
