//! Conversions between relaxvm values and tvm-ffi's `TVMFFIAny`, both ways: arguments of
//! kernels (tensors become DLTensor views of relaxvm's memory) and arguments of packed
//! functions that kernels call back (DLTensors become relaxvm tensors viewing the kernel's
//! memory, for the duration of the call).

use super::abi::{type_index, DLDataType, DLDevice, DLTensor, TVMFFIAny};
use relaxvm::{DataType, Device, DeviceType, Error, Result, Shape, Storage, Tensor, Value};
use std::ffi::{c_char, CStr};
use std::ptr::NonNull;

/// The DLPack type of a relaxvm dtype, as TVM's kernels check it.
pub fn dl_dtype(d: DataType) -> DLDataType {
    DLDataType { code: d.dlpack_code(), bits: d.bits(), lanes: 1 }
}

/// The relaxvm dtype of a DLPack type (TVM's `bool` may arrive as `uint1`).
pub fn from_dl_dtype(d: DLDataType) -> Result<DataType> {
    crate::vmexec::dtype_of(d.code, d.bits, d.lanes)
}

/// A DLTensor viewing `t` (contiguous: null strides). `shape` and `strides` must outlive the
/// returned struct's use; `t`'s data is passed at the view's first element.
pub fn dl_tensor(t: &Tensor, strides: Option<&mut Vec<i64>>) -> DLTensor {
    let device = t.device();
    DLTensor {
        data: t.data_ptr().cast(),
        device: DLDevice { device_type: device.device_type.code(), device_id: device.device_id },
        ndim: t.ndim() as i32,
        dtype: dl_dtype(t.dtype()),
        shape: t.shape().dims().as_ptr().cast_mut(),
        strides: strides.map_or(std::ptr::null_mut(), |s| s.as_mut_ptr()),
        byte_offset: 0,
    }
}

/// A scalar argument of a kernel; `None` for tensors (the caller makes their DLTensor) and an
/// error naming the argument for values kernels cannot take.
pub fn scalar_to_ffi(v: &Value, what: &dyn Fn() -> String) -> Result<Option<TVMFFIAny>> {
    Ok(Some(match v {
        Value::Tensor(_) => return Ok(None),
        Value::Null => TVMFFIAny::NONE,
        Value::Int(i) => TVMFFIAny::int(*i),
        Value::Float(f) => TVMFFIAny::float(*f),
        Value::Bool(b) => TVMFFIAny::bool(*b),
        Value::DType(d) => TVMFFIAny::dtype(dl_dtype(*d)),
        Value::Device(d) => TVMFFIAny::device(DLDevice { device_type: d.device_type.code(), device_id: d.device_id }),
        other => {
            return Err(Error::type_mismatch(
                format!("a tensor, int, float, bool, dtype, device or None for {}", what()),
                other.describe(),
            ))
        }
    }))
}

/// A kernel's (or callback's) result as a relaxvm value.
pub fn result_from_ffi(a: &TVMFFIAny) -> Result<Value> {
    match a.type_index {
        type_index::NONE => Ok(Value::Null),
        type_index::INT => Ok(Value::Int(a.payload as i64)),
        type_index::BOOL => Ok(Value::Bool(a.payload != 0)),
        type_index::FLOAT => Ok(Value::Float(f64::from_bits(a.payload))),
        other => {
            Err(Error::type_mismatch("a result of None, int, bool or float", format!("tvm-ffi type index {other}")))
        }
    }
}

/// A packed function's result handed back to a kernel.
pub fn result_to_ffi(v: &Value) -> Result<TVMFFIAny> {
    scalar_to_ffi(v, &|| "a result returned to a kernel".to_string())?
        .ok_or_else(|| Error::type_mismatch("a scalar result (a kernel cannot take ownership of a tensor)", "tensor"))
}

/// An argument a kernel passes to a packed function, as a relaxvm value.
///
/// # Safety
/// A DLTensor or string pointer in `a` is valid for the duration of the call the value is made
/// for, and the value must not be kept beyond it (a tensor views the kernel's memory).
pub unsafe fn from_ffi(a: &TVMFFIAny) -> Result<Value> {
    match a.type_index {
        type_index::DL_TENSOR_PTR => {
            let p = a.as_ptr() as *const DLTensor;
            if p.is_null() {
                return Err(Error::value("null DLTensor pointer"));
            }
            // SAFETY: the caller's contract: a live DLTensor.
            unsafe { borrow_dl_tensor(&*p) }.map(Value::Tensor)
        }
        type_index::RAW_STR => {
            let p = a.as_ptr() as *const c_char;
            if p.is_null() {
                return Err(Error::value("null string pointer"));
            }
            // SAFETY: the caller's contract: a NUL-terminated string.
            Ok(Value::str(&unsafe { CStr::from_ptr(p) }.to_string_lossy()))
        }
        type_index::SMALL_STR => {
            let len = (a.small_str_len as usize).min(8);
            let bytes = a.payload.to_le_bytes();
            Ok(Value::str(&String::from_utf8_lossy(&bytes[..len])))
        }
        type_index::DATA_TYPE => Ok(Value::DType(from_dl_dtype(a.as_dtype())?)),
        type_index::DEVICE => {
            let d = a.as_device();
            Ok(Value::Device(Device { device_type: DeviceType::from_code(d.device_type)?, device_id: d.device_id }))
        }
        _ => result_from_ffi(a),
    }
}

/// A relaxvm tensor viewing a DLTensor's memory (no copy).
///
/// # Safety
/// `t` describes live memory, valid for reads and writes, for as long as the returned tensor is
/// used; the caller must drop the tensor before the memory goes away.
unsafe fn borrow_dl_tensor(t: &DLTensor) -> Result<Tensor> {
    if t.device.device_type != DeviceType::Cpu.code() {
        return Err(Error::value(format!(
            "a tensor on device type {}; relaxvm runs CPU kernels",
            t.device.device_type
        )));
    }
    let dtype = from_dl_dtype(t.dtype)?;
    let ndim =
        usize::try_from(t.ndim).ok().filter(|n| *n <= 64).ok_or_else(|| Error::value(format!("ndim {}", t.ndim)))?;
    if ndim > 0 && t.shape.is_null() {
        return Err(Error::value("a DLTensor with a null shape"));
    }
    // SAFETY: `shape` (and `strides` when non-null) hold `ndim` values (DLPack's contract).
    let dims: Vec<i64> =
        if ndim == 0 { Vec::new() } else { unsafe { std::slice::from_raw_parts(t.shape, ndim) }.to_vec() };
    let strides = (!t.strides.is_null() && ndim > 0)
        // SAFETY: as above.
        .then(|| unsafe { std::slice::from_raw_parts(t.strides, ndim) }.to_vec());
    let shape = Shape::new(dims);
    let elems = relaxvm::shape::numel(&shape).ok_or_else(|| Error::value(format!("invalid shape {shape}")))?;
    let span = match &strides {
        None => elems,
        Some(s) if elems == 0 => {
            let _ = s;
            0
        }
        Some(s) => s
            .iter()
            .zip(shape.dims())
            .try_fold(1usize, |acc, (st, d)| {
                usize::try_from(*st).ok()?.checked_mul((*d as usize).checked_sub(1)?)?.checked_add(acc)
            })
            .ok_or_else(|| Error::value("negative or overflowing strides"))?,
    };
    let len = span.checked_mul(dtype.itemsize()).ok_or_else(|| Error::value("tensor too large"))?;
    let base = (t.data as *mut u8).wrapping_add(t.byte_offset as usize);
    let storage = match NonNull::new(base) {
        Some(p) => {
            // SAFETY: the caller's contract: `len` bytes from `base` stay valid while the tensor
            // (and so the storage) is used; the owner is a unit, so dropping frees nothing.
            let s = unsafe { Storage::from_external(p, len, Device::cpu(0), Box::new(())) };
            // A constant the kernel was given and passes on (e.g. as a sort's output): the
            // callee's writes are refused, not faults in Rust code.
            if len > 0 && relaxvm::storage::read_only::overlaps(p.as_ptr() as usize, len) {
                s.freeze();
            }
            s
        }
        None if len == 0 => Storage::alloc(0, Device::cpu(0))?,
        None => return Err(Error::value("a DLTensor with null data")),
    };
    Tensor::from_parts(storage, 0, shape, strides, dtype)
}
