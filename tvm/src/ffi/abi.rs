//! The C types of the tvm-ffi ABI that kernels exchange with the runtime, laid out as
//! `tvm/ffi/c_api.h` declares them (sizes checked at compile time); DLPack's, declared in
//! `relaxvm::dlpack`, are re-exported here.

use std::ffi::c_void;

/// `TVMFFITypeIndex` values used on the kernel path.
pub mod type_index {
    /// None / nullptr.
    pub const NONE: i32 = 0;
    /// `int64_t`.
    pub const INT: i32 = 1;
    /// `bool` (stored as int64).
    pub const BOOL: i32 = 2;
    /// `double`.
    pub const FLOAT: i32 = 3;
    /// An opaque pointer.
    pub const OPAQUE_PTR: i32 = 4;
    /// `DLDataType`.
    pub const DATA_TYPE: i32 = 5;
    /// `DLDevice`.
    pub const DEVICE: i32 = 6;
    /// `DLTensor*`.
    pub const DL_TENSOR_PTR: i32 = 7;
    /// `const char*`.
    pub const RAW_STR: i32 = 8;
    /// A string of up to 7 bytes stored in the payload.
    pub const SMALL_STR: i32 = 11;
    /// The first index of reference-counted objects.
    pub const STATIC_OBJECT_BEGIN: i32 = 64;
    /// `ffi.Error`, an object whose body is a [`TVMFFIErrorCell`](super::TVMFFIErrorCell).
    pub const ERROR: i32 = 67;
}

/// `TVMFFIAny`: a type index, a small-string length, and an 8-byte payload (int64, double,
/// pointer, DLDataType or DLDevice, by type index).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TVMFFIAny {
    /// What the payload holds (`type_index`).
    pub type_index: i32,
    /// The length of a small string; zero otherwise.
    pub small_str_len: u32,
    /// The payload's bytes, as an integer.
    pub payload: u64,
}

// DLPack's structures, declared once in the data model (the C API and the Python package use
// them too).
pub use relaxvm::dlpack::{
    DLDataType, DLDevice, DLManagedTensorVersioned, DLPackVersion, DLTensor, DLPACK_FLAG_BITMASK_IS_COPIED,
    DLPACK_FLAG_BITMASK_READ_ONLY, DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION,
};

/// `TVMParallelGroupEnv`: what a parallel task knows of its group.
#[repr(C)]
#[derive(Debug)]
pub struct TVMParallelGroupEnv {
    /// The runtime's handle for the group's barrier.
    pub sync_handle: *mut c_void,
    /// How many tasks the group has.
    pub num_task: i32,
}

/// `TVMFFISafeCallType`: how every kernel is called.
pub type SafeCall =
    unsafe extern "C" fn(handle: *mut c_void, args: *const TVMFFIAny, num_args: i32, result: *mut TVMFFIAny) -> i32;

/// `FTVMParallelLambda`: one task of a parallel launch.
pub type ParallelLambda = unsafe extern "C" fn(task_id: i32, env: *mut TVMParallelGroupEnv, cdata: *mut c_void) -> i32;

/// `TVMFFIByteArray`: borrowed bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TVMFFIByteArray {
    /// The first byte.
    pub data: *const u8,
    /// How many bytes.
    pub size: usize,
}

/// `TVMFFIObject`: the header in front of every tvm-ffi object's body.
#[repr(C)]
#[derive(Debug)]
pub struct TVMFFIObject {
    /// Strong and weak reference counts.
    pub combined_ref_count: u64,
    /// The object's type (`type_index::ERROR` for an error).
    pub type_index: i32,
    /// Padding.
    pub padding: u32,
    /// The deleter.
    pub deleter: *const c_void,
}

/// `TVMFFIErrorCell`: the body of an error object (after its [`TVMFFIObject`] header).
#[repr(C)]
#[derive(Debug)]
pub struct TVMFFIErrorCell {
    /// The error kind, e.g. `ValueError`.
    pub kind: TVMFFIByteArray,
    /// The message.
    pub message: TVMFFIByteArray,
    /// The backtrace.
    pub backtrace: TVMFFIByteArray,
    /// Updates the backtrace.
    pub update_backtrace: *const c_void,
    /// The error that caused this one.
    pub cause_chain: *mut c_void,
    /// Extra context.
    pub extra_context: *mut c_void,
}

const _: () = assert!(std::mem::size_of::<TVMFFIAny>() == 16);
const _: () = assert!(std::mem::size_of::<TVMFFIObject>() == 24);
const _: () = assert!(std::mem::size_of::<TVMFFIErrorCell>() == 72);
const _: () = assert!(std::mem::size_of::<TVMParallelGroupEnv>() == 16);

impl TVMFFIAny {
    /// None.
    pub const NONE: TVMFFIAny = TVMFFIAny { type_index: type_index::NONE, small_str_len: 0, payload: 0 };

    /// An int64.
    pub fn int(v: i64) -> Self {
        TVMFFIAny { type_index: type_index::INT, small_str_len: 0, payload: v as u64 }
    }

    /// A double.
    pub fn float(v: f64) -> Self {
        TVMFFIAny { type_index: type_index::FLOAT, small_str_len: 0, payload: v.to_bits() }
    }

    /// A bool.
    pub fn bool(v: bool) -> Self {
        TVMFFIAny { type_index: type_index::BOOL, small_str_len: 0, payload: v as u64 }
    }

    /// A pointer with the given type index.
    pub fn ptr(type_index: i32, p: *const c_void) -> Self {
        TVMFFIAny { type_index, small_str_len: 0, payload: p as usize as u64 }
    }

    /// A DLDataType.
    pub fn dtype(d: DLDataType) -> Self {
        let payload = u64::from(d.code) | (u64::from(d.bits) << 8) | (u64::from(d.lanes) << 16);
        TVMFFIAny { type_index: type_index::DATA_TYPE, small_str_len: 0, payload }
    }

    /// A DLDevice.
    pub fn device(d: DLDevice) -> Self {
        let payload = u64::from(d.device_type as u32) | (u64::from(d.device_id as u32) << 32);
        TVMFFIAny { type_index: type_index::DEVICE, small_str_len: 0, payload }
    }

    /// The payload as a pointer.
    pub fn as_ptr(&self) -> *mut c_void {
        self.payload as usize as *mut c_void
    }

    /// The payload as a DLDataType.
    pub fn as_dtype(&self) -> DLDataType {
        DLDataType { code: self.payload as u8, bits: (self.payload >> 8) as u8, lanes: (self.payload >> 16) as u16 }
    }

    /// The payload as a DLDevice.
    pub fn as_device(&self) -> DLDevice {
        DLDevice { device_type: self.payload as u32 as i32, device_id: (self.payload >> 32) as u32 as i32 }
    }
}
