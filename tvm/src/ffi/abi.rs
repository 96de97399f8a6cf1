//! The C types of the tvm-ffi ABI and DLPack that kernels exchange with the runtime, laid out
//! as `tvm/ffi/c_api.h` and `dlpack.h` declare them (sizes checked at compile time).

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

/// `DLDevice`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDevice {
    /// `kDLCPU` = 1.
    pub device_type: i32,
    /// The device ordinal.
    pub device_id: i32,
}

/// `DLDataType`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDataType {
    /// `kDLInt` 0, `kDLUInt` 1, `kDLFloat` 2, `kDLBfloat` 4, `kDLBool` 6.
    pub code: u8,
    /// Bits per lane.
    pub bits: u8,
    /// Lanes (1 for scalars).
    pub lanes: u16,
}

/// `DLTensor`: a borrowed view of tensor memory.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DLTensor {
    /// The data pointer (relaxvm passes the element at the view's origin).
    pub data: *mut c_void,
    /// Where the memory lives.
    pub device: DLDevice,
    /// The number of dimensions.
    pub ndim: i32,
    /// The element type.
    pub dtype: DLDataType,
    /// `ndim` extents.
    pub shape: *mut i64,
    /// `ndim` strides in elements, or null for a compact row-major tensor.
    pub strides: *mut i64,
    /// Bytes from `data` to the first element.
    pub byte_offset: u64,
}

/// `DLPackVersion`: the DLPack ABI version a managed tensor follows.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLPackVersion {
    /// Incompatible changes bump it (1 for DLPack 1.x).
    pub major: u32,
    /// Compatible additions bump it.
    pub minor: u32,
}

/// `DLManagedTensorVersioned` (DLPack 1.x): a tensor handed from a producer to a consumer, who
/// calls `deleter` once when done with it.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    /// The DLPack version of this structure.
    pub version: DLPackVersion,
    /// The producer's context (what keeps the memory alive).
    pub manager_ctx: *mut c_void,
    /// Frees the tensor and its context; null when nothing is to be freed.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    /// Bit flags: [`DLPACK_FLAG_BITMASK_READ_ONLY`], [`DLPACK_FLAG_BITMASK_IS_COPIED`].
    pub flags: u64,
    /// The tensor.
    pub dl_tensor: DLTensor,
}

/// `DLPACK_FLAG_BITMASK_READ_ONLY`: the consumer must not write the tensor's memory.
pub const DLPACK_FLAG_BITMASK_READ_ONLY: u64 = 1 << 0;
/// `DLPACK_FLAG_BITMASK_IS_COPIED`: the producer copied the data for this tensor.
pub const DLPACK_FLAG_BITMASK_IS_COPIED: u64 = 1 << 1;
/// The DLPack major version these declarations follow.
pub const DLPACK_MAJOR_VERSION: u32 = 1;
/// The DLPack minor version these declarations follow.
pub const DLPACK_MINOR_VERSION: u32 = 1;

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
const _: () = assert!(std::mem::size_of::<DLDataType>() == 4);
const _: () = assert!(std::mem::size_of::<DLDevice>() == 8);
const _: () = assert!(std::mem::size_of::<DLTensor>() == 48);
const _: () = assert!(std::mem::size_of::<TVMParallelGroupEnv>() == 16);
const _: () = assert!(std::mem::size_of::<DLManagedTensorVersioned>() == 80);

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
