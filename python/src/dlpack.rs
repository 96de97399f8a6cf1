//! The DLPack exchange protocol, both ways, on the C structures of `dlpack.h`.
//!
//! Export (`Tensor.__dlpack__`): a capsule named `"dltensor"` (or `"dltensor_versioned"` when
//! the consumer asks for DLPack 1.x) holding a heap-allocated managed tensor whose context
//! keeps our tensor alive. A consumer renames the capsule to `"used_..."` and later calls the
//! deleter; a capsule that was never consumed runs the deleter from its own destructor.
//!
//! Import (`rx.from_dlpack(x)`): we call `x.__dlpack__()`, take ownership of the managed
//! tensor (renaming the capsule), and wrap its memory in a storage whose owner calls the
//! producer's deleter when the last tensor viewing it is dropped. A tensor the producer flags
//! read-only (`DLPACK_FLAG_BITMASK_READ_ONLY`: numpy's read-only arrays, our constants) is
//! imported frozen: every write through relaxvm is refused, numpy views of it are not writeable,
//! and native kernels get a private copy (docs/memory.md).
//!
//! Export of a read-only tensor: the versioned capsule carries the read-only flag; a DLPack 0.x
//! consumer cannot be told, so it gets a copy (see `Tensor.__dlpack__`).

use crate::errors::IntoPyResult;
use pyo3::exceptions::{PyBufferError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use relaxvm::dlpack::{
    checked_layout, DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor, Layout,
    LayoutError, DLPACK_FLAG_BITMASK_READ_ONLY,
};
use relaxvm::{Device, DeviceType, Storage, Tensor};
use std::ffi::{c_void, CStr};
use std::ptr::NonNull;

const DLTENSOR: &CStr = c"dltensor";
const USED_DLTENSOR: &CStr = c"used_dltensor";
const DLTENSOR_VERSIONED: &CStr = c"dltensor_versioned";
const USED_DLTENSOR_VERSIONED: &CStr = c"used_dltensor_versioned";

/// What an exported managed tensor points at: our tensor and the arrays its header uses.
struct ExportCtx {
    _tensor: Tensor,
    shape: Vec<i64>,
    strides: Vec<i64>,
}

fn export_header(t: &Tensor, ctx: &mut ExportCtx) -> DLTensor {
    DLTensor {
        data: t.data_ptr().cast(),
        device: DLDevice { device_type: t.device().device_type.code(), device_id: t.device().device_id },
        ndim: ctx.shape.len() as i32,
        dtype: DLDataType { code: t.dtype().dlpack_code(), bits: t.dtype().bits(), lanes: 1 },
        shape: ctx.shape.as_mut_ptr(),
        strides: ctx.strides.as_mut_ptr(),
        byte_offset: 0,
    }
}

unsafe extern "C" fn delete_legacy(m: *mut DLManagedTensor) {
    if m.is_null() {
        return;
    }
    // SAFETY: `m` was made by `Box::into_raw` in `to_capsule` and its context by
    // `Box::into_raw` of an `ExportCtx`; DLPack calls the deleter exactly once.
    unsafe {
        let m = Box::from_raw(m);
        drop(Box::from_raw(m.manager_ctx.cast::<ExportCtx>()));
    }
}

unsafe extern "C" fn delete_versioned(m: *mut DLManagedTensorVersioned) {
    if m.is_null() {
        return;
    }
    // SAFETY: as `delete_legacy`.
    unsafe {
        let m = Box::from_raw(m);
        drop(Box::from_raw(m.manager_ctx.cast::<ExportCtx>()));
    }
}

/// Destructor of an exported capsule: frees the managed tensor unless a consumer took it.
unsafe extern "C" fn capsule_destructor(capsule: *mut ffi::PyObject) {
    // SAFETY: called by Python with the capsule being destroyed and the GIL held. A consumed
    // capsule has been renamed, so `PyCapsule_IsValid` is false for it and we leave the tensor
    // to its consumer. IsValid sets no exception.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, DLTENSOR.as_ptr()) == 1 {
            let p = ffi::PyCapsule_GetPointer(capsule, DLTENSOR.as_ptr()).cast::<DLManagedTensor>();
            delete_legacy(p);
        } else if ffi::PyCapsule_IsValid(capsule, DLTENSOR_VERSIONED.as_ptr()) == 1 {
            let p = ffi::PyCapsule_GetPointer(capsule, DLTENSOR_VERSIONED.as_ptr()).cast::<DLManagedTensorVersioned>();
            delete_versioned(p);
        }
    }
}

/// Exports `t` as a DLPack capsule (versioned when the consumer supports DLPack 1.x).
pub fn to_capsule(py: Python<'_>, t: Tensor, versioned: bool) -> PyResult<Bound<'_, PyAny>> {
    let ctx = Box::new(ExportCtx { shape: t.shape().to_vec(), strides: t.strides(), _tensor: t.clone() });
    let ctx = Box::into_raw(ctx);
    // SAFETY: `ctx` is a valid, uniquely owned pointer until a deleter frees it.
    let header = export_header(&t, unsafe { &mut *ctx });
    let (ptr, name): (*mut c_void, &CStr) = if versioned {
        let m = Box::new(DLManagedTensorVersioned {
            version: DLPackVersion { major: 1, minor: 0 },
            manager_ctx: ctx.cast(),
            deleter: Some(delete_versioned),
            // Constants are read-only (docs/memory.md): the consumer is told so.
            flags: if t.storage().is_frozen() { DLPACK_FLAG_BITMASK_READ_ONLY } else { 0 },
            dl_tensor: header,
        });
        (Box::into_raw(m).cast(), DLTENSOR_VERSIONED)
    } else {
        let m = Box::new(DLManagedTensor { dl_tensor: header, manager_ctx: ctx.cast(), deleter: Some(delete_legacy) });
        (Box::into_raw(m).cast(), DLTENSOR)
    };
    // SAFETY: `ptr` is a valid managed tensor, `name` a static C string, and the destructor
    // frees the tensor only while the capsule is unconsumed. On failure we free it ourselves.
    unsafe {
        let cap = ffi::PyCapsule_New(ptr, name.as_ptr(), Some(capsule_destructor));
        if cap.is_null() {
            if versioned {
                delete_versioned(ptr.cast());
            } else {
                delete_legacy(ptr.cast());
            }
            return Err(PyErr::fetch(py));
        }
        Ok(Bound::from_owned_ptr(py, cap))
    }
}

/// An imported managed tensor; dropping it calls the producer's deleter.
enum Imported {
    Legacy(*mut DLManagedTensor),
    Versioned(*mut DLManagedTensorVersioned),
}

// SAFETY: DLPack requires deleters to be callable from any thread (numpy's takes the GIL
// itself); the pointer is owned exclusively by this value.
unsafe impl Send for Imported {}
// SAFETY: `&Imported` exposes nothing.
unsafe impl Sync for Imported {}

impl Drop for Imported {
    fn drop(&mut self) {
        // SAFETY: we own the managed tensor (the capsule was renamed to "used_..."), so calling
        // its deleter once, here, is what the protocol asks.
        unsafe {
            match *self {
                Imported::Legacy(m) => {
                    if let Some(d) = (*m).deleter {
                        d(m)
                    }
                }
                Imported::Versioned(m) => {
                    if let Some(d) = (*m).deleter {
                        d(m)
                    }
                }
            }
        }
    }
}

/// Wraps the tensor described by `dl` (owned through `owner`) without copying; frozen (every
/// write refused) when the producer said the memory is `read_only`.
///
/// # Safety
/// `dl` must be a valid DLTensor whose memory lives as long as `owner`.
unsafe fn import_tensor(py: Python<'_>, dl: &DLTensor, owner: Imported, read_only: bool) -> PyResult<Tensor> {
    let device = Device {
        device_type: DeviceType::from_code(dl.device.device_type).py_err(py)?,
        device_id: dl.device.device_id,
    };
    // SAFETY: the producer's promise, as the caller guarantees.
    let Layout { dtype, shape, strides, extent } = unsafe { checked_layout(dl) }.map_err(|e| match e {
        LayoutError::Lanes(m) => PyTypeError::new_err(m),
        LayoutError::DType(e) => crate::errors::to_pyerr(py, e),
        LayoutError::Invalid(m) => PyBufferError::new_err(m),
    })?;
    // `wrapping_add` keeps the producer's provenance; `checked_layout` proved the sum does not wrap.
    let start = dl.data.cast::<u8>().wrapping_add(dl.byte_offset as usize);
    let ptr = NonNull::new(start).unwrap_or(NonNull::<u64>::dangling().cast());
    // SAFETY: the producer keeps `extent` bytes from `start` alive until its deleter runs,
    // which `owner` calls only when the storage (and every tensor viewing it) is dropped.
    let storage = unsafe { Storage::from_external(ptr, extent, device, Box::new(owner)) };
    if read_only {
        storage.freeze();
    }
    let t = Tensor::from_parts(storage, 0, shape.into(), strides, dtype).and_then(Tensor::with_normalized_bools);
    let t = t.py_err(py)?;
    if read_only {
        // A bool tensor with bytes other than 0 and 1 was copied: the copy is read-only too.
        t.storage().freeze();
    }
    Ok(t)
}

/// Takes the tensor out of a DLPack capsule, renaming the capsule as consumed; frozen when the
/// capsule flags it read-only.
pub fn from_capsule(py: Python<'_>, cap: &Bound<'_, PyCapsule>) -> PyResult<Tensor> {
    // SAFETY: the capsule's name tells which structure its pointer holds; after renaming it to
    // "used_*" the producer no longer frees it and `Imported` owns it.
    unsafe {
        if ffi::PyCapsule_IsValid(cap.as_ptr(), DLTENSOR_VERSIONED.as_ptr()) == 1 {
            let m =
                ffi::PyCapsule_GetPointer(cap.as_ptr(), DLTENSOR_VERSIONED.as_ptr()).cast::<DLManagedTensorVersioned>();
            if (*m).version.major > 1 {
                return Err(PyBufferError::new_err(format!("unsupported DLPack version {}", (*m).version.major)));
            }
            let read_only = (*m).flags & DLPACK_FLAG_BITMASK_READ_ONLY != 0;
            if ffi::PyCapsule_SetName(cap.as_ptr(), USED_DLTENSOR_VERSIONED.as_ptr()) != 0 {
                return Err(PyErr::fetch(py));
            }
            let dl = &(*m).dl_tensor;
            return import_tensor(py, dl, Imported::Versioned(m), read_only);
        }
        if ffi::PyCapsule_IsValid(cap.as_ptr(), DLTENSOR.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(cap.as_ptr(), DLTENSOR.as_ptr()).cast::<DLManagedTensor>();
            if ffi::PyCapsule_SetName(cap.as_ptr(), USED_DLTENSOR.as_ptr()) != 0 {
                return Err(PyErr::fetch(py));
            }
            let dl = &(*m).dl_tensor;
            // DLPack 0.x has no read-only flag: producers export only writable memory this way
            // (numpy refuses a read-only array with BufferError).
            return import_tensor(py, dl, Imported::Legacy(m), false);
        }
    }
    Err(PyTypeError::new_err(
        "expected a DLPack capsule named \"dltensor\" or \"dltensor_versioned\" that was not consumed yet",
    ))
}
