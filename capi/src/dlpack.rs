//! Tensors in and out as DLPack 1.x `DLManagedTensorVersioned`, without copying.
//!
//! In (`rvm_value_from_dlpack`): relaxvm takes the managed tensor and wraps its memory; the
//! producer's deleter runs when the last relaxvm tensor viewing it is dropped (on whichever
//! thread drops it). A tensor flagged `DLPACK_FLAG_BITMASK_READ_ONLY` is imported frozen: every
//! write through relaxvm is refused and kernels get a private copy (docs/memory.md).
//!
//! Out (`rvm_value_to_dlpack`): a new managed tensor viewing the tensor's memory, keeping it
//! alive until the consumer calls its deleter. A read-only tensor (a constant of the program,
//! sealed or frozen) is exported with the read-only flag: the consumer must not write it.

use crate::error::{guard, rvm_error, rvm_error_code::*, CError};
use crate::input::{check_out, write_out};
use crate::value::{new_value, rvm_value, value_arg};
use relaxvm::dlpack::{
    checked_layout, DLDataType, DLDevice, DLManagedTensorVersioned, DLPackVersion, DLTensor, Layout, LayoutError,
    DLPACK_FLAG_BITMASK_READ_ONLY, DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION,
};
use relaxvm::{Device, Storage, Tensor, Value};
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// `DLPACK_FLAG_BITMASK_READ_ONLY` of dlpack.h, for C (the same as
/// `relaxvm::dlpack::DLPACK_FLAG_BITMASK_READ_ONLY`, checked when compiling).
pub const RVM_DLPACK_FLAG_READ_ONLY: u64 = 1;
const _: () = assert!(RVM_DLPACK_FLAG_READ_ONLY == DLPACK_FLAG_BITMASK_READ_ONLY);
/// The DLPack major version relaxvm exchanges (`DLManagedTensorVersioned.version.major`).
pub const RVM_DLPACK_MAJOR_VERSION: u32 = 1;
const _: () = assert!(RVM_DLPACK_MAJOR_VERSION == DLPACK_MAJOR_VERSION);
/// `kDLCPU`, the one device type relaxvm's C API exchanges.
pub const RVM_DLPACK_CPU: i32 = 1;

/// `kDLCPU`.
const DL_CPU: i32 = RVM_DLPACK_CPU;

/// An imported managed tensor: dropping it calls the producer's deleter, once, unless the
/// import failed (`armed` false), when the caller keeps ownership.
struct Imported {
    tensor: *mut DLManagedTensorVersioned,
    armed: Arc<AtomicBool>,
}

// SAFETY: DLPack requires deleters to be callable from any thread; the pointer is owned
// exclusively by this value.
unsafe impl Send for Imported {}
// SAFETY: `&Imported` exposes nothing.
unsafe impl Sync for Imported {}

impl Drop for Imported {
    fn drop(&mut self) {
        if !self.armed.load(Ordering::Acquire) {
            return;
        }
        // SAFETY: relaxvm owns the managed tensor (the import succeeded), so calling its
        // deleter once, here, is what the protocol asks.
        unsafe {
            if let Some(d) = (*self.tensor).deleter {
                d(self.tensor)
            }
        }
    }
}

fn bad(msg: String) -> CError {
    CError::new(RVM_ERROR_VALUE, msg)
}

/// Wraps `m`'s memory as a tensor. On error nothing was taken: the caller still owns `m`.
///
/// # Safety
/// `m` points to a valid managed tensor whose memory lives until its deleter is called.
unsafe fn import(m: *mut DLManagedTensorVersioned) -> Result<Tensor, CError> {
    // SAFETY: valid, as the caller guarantees.
    let mt = unsafe { &*m };
    if mt.version.major != DLPACK_MAJOR_VERSION {
        return Err(bad(format!(
            "DLPack version {}.{} is not supported (expected {DLPACK_MAJOR_VERSION}.x)",
            mt.version.major, mt.version.minor
        )));
    }
    let dl = &mt.dl_tensor;
    if dl.device.device_type != DL_CPU {
        return Err(bad(format!(
            "DLPack tensor on device type {} (id {}): relaxvm's C API takes CPU tensors (kDLCPU = 1)",
            dl.device.device_type, dl.device.device_id
        )));
    }
    // SAFETY: the producer's promise, as the caller guarantees.
    let Layout { dtype, shape, strides, extent } = unsafe { checked_layout(dl) }.map_err(|e| match e {
        LayoutError::DType(e) => CError::from(e),
        LayoutError::Lanes(m) | LayoutError::Invalid(m) => bad(m),
    })?;
    let read_only = mt.flags & DLPACK_FLAG_BITMASK_READ_ONLY != 0;
    // `wrapping_add` keeps the producer's provenance; `checked_layout` proved the sum does not wrap.
    let start = dl.data.cast::<u8>().wrapping_add(dl.byte_offset as usize);
    let ptr = NonNull::new(start).unwrap_or(NonNull::<u64>::dangling().cast());
    let armed = Arc::new(AtomicBool::new(false));
    let owner = Imported { tensor: m, armed: Arc::clone(&armed) };
    // SAFETY: the producer keeps `extent` bytes from `start` alive until its deleter runs, which
    // `owner` calls (once armed) only when the storage and every tensor viewing it are dropped.
    let storage = unsafe { Storage::from_external(ptr, extent, Device::cpu(0), Box::new(owner)) };
    if read_only {
        storage.freeze();
    }
    // Any failure below drops the storage while `owner` is unarmed: the caller keeps `m`.
    let t = Tensor::from_parts(storage, 0, shape.into(), strides, dtype)?;
    // A bool tensor with bytes other than 0 and 1 becomes a normalized copy.
    let normalized = t.clone().with_normalized_bools()?;
    // relaxvm owns `m` from here on; when `normalized` is a copy, dropping `t` (the last view of
    // the producer's memory) releases it now.
    armed.store(true, Ordering::Release);
    drop(t);
    if read_only {
        normalized.storage().freeze();
    }
    Ok(normalized)
}

/// What an exported managed tensor keeps alive: the tensor and the arrays its header points to.
struct ExportCtx {
    _tensor: Tensor,
    shape: Vec<i64>,
    strides: Vec<i64>,
}

unsafe extern "C" fn delete_exported(m: *mut DLManagedTensorVersioned) {
    if m.is_null() {
        return;
    }
    // A deleter must not unwind into its C caller.
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: `m` and its context were made by `Box::into_raw` in `export`, and DLPack
        // calls the deleter exactly once.
        unsafe {
            let m = Box::from_raw(m);
            drop(Box::from_raw(m.manager_ctx.cast::<ExportCtx>()));
        }
    });
}

/// A new managed tensor viewing `t`'s memory.
fn export(t: &Tensor) -> *mut DLManagedTensorVersioned {
    let ctx =
        Box::into_raw(Box::new(ExportCtx { _tensor: t.clone(), shape: t.shape().to_vec(), strides: t.strides() }));
    // SAFETY: `ctx` is a valid, uniquely owned pointer until the deleter frees it; the vectors'
    // buffers do not move while it lives.
    let (shape, strides, ndim) =
        unsafe { ((*ctx).shape.as_mut_ptr(), (*ctx).strides.as_mut_ptr(), (*ctx).shape.len()) };
    let device = t.device();
    let header = DLTensor {
        data: t.data_ptr().cast::<c_void>(),
        device: DLDevice { device_type: device.device_type.code(), device_id: device.device_id },
        ndim: ndim as i32,
        dtype: DLDataType { code: t.dtype().dlpack_code(), bits: t.dtype().bits(), lanes: 1 },
        shape,
        strides,
        byte_offset: 0,
    };
    Box::into_raw(Box::new(DLManagedTensorVersioned {
        version: DLPackVersion { major: DLPACK_MAJOR_VERSION, minor: DLPACK_MINOR_VERSION },
        manager_ctx: ctx.cast(),
        deleter: Some(delete_exported),
        // Constants are read-only (docs/memory.md): the consumer is told so.
        flags: if t.storage().is_frozen() { DLPACK_FLAG_BITMASK_READ_ONLY } else { 0 },
        dl_tensor: header,
    }))
}

/// A tensor value viewing the memory of DLPack tensor `tensor` (CPU, one lane, any dtype
/// relaxvm knows, non-negative strides), without copying. Flagged read-only, it is imported
/// read-only: relaxvm never writes it.
///
/// Ownership: on success relaxvm takes `tensor` and calls its deleter (from any thread) when the
/// last value, VM register or exported view using the memory is gone; `*out` is a new value the
/// caller owns. On error nothing is taken: the caller still owns `tensor`.
/// Thread safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn rvm_value_from_dlpack(
    tensor: *mut DLManagedTensorVersioned,
    out: *mut *mut rvm_value,
) -> *mut rvm_error {
    guard(|| {
        check_out(out, "rvm_value_from_dlpack")?;
        if tensor.is_null() {
            return Err(CError::invalid("rvm_value_from_dlpack: expected a DLManagedTensorVersioned, found NULL"));
        }
        // SAFETY: the caller passes a valid managed tensor whose memory lives until its deleter.
        let t = unsafe { import(tensor) }
            .map_err(|e| CError::new(e.code, format!("rvm_value_from_dlpack: {}", e.message)))?;
        // SAFETY: checked non-null above.
        unsafe { write_out(out, new_value(Value::Tensor(t)), "rvm_value_from_dlpack") }
    })
}

/// A DLPack view of tensor value `v`, without copying: `(*out)->flags` has
/// `DLPACK_FLAG_BITMASK_READ_ONLY` when the memory must not be written (the program's constants).
///
/// Ownership: borrows `v`; on success the caller owns `*out` and must call `(*out)->deleter(*out)`
/// once (from any thread), which keeps the memory alive until then, also after `v` is freed.
/// Thread safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn rvm_value_to_dlpack(
    v: *const rvm_value,
    out: *mut *mut DLManagedTensorVersioned,
) -> *mut rvm_error {
    guard(|| {
        check_out(out, "rvm_value_to_dlpack")?;
        // SAFETY: the handle table checks `v`; the caller keeps it alive during the call.
        let t = match unsafe { value_arg(v, "rvm_value_to_dlpack") }? {
            Value::Tensor(t) => t.clone(),
            other => {
                return Err(CError::new(
                    RVM_ERROR_TYPE,
                    format!("rvm_value_to_dlpack: expected a tensor, found {}", crate::value::describe(other)),
                ))
            }
        };
        // SAFETY: checked non-null above.
        unsafe { write_out(out, export(&t), "rvm_value_to_dlpack") }
    })
}
