//! DLPack, the tensor exchange ABI of `dlpack.h`: its C structures, declared once (the TVM
//! kernel ABI, the C API and the Python package use these), and the one check of what a
//! producer's `DLTensor` describes before relaxvm wraps its memory ([`checked_layout`]).
//!
//! Taking ownership (a capsule, a C caller's pointer) and calling the producer's deleter stay
//! with each boundary, which knows who owns what; the layout check is the same everywhere.

use crate::dtype::DataType;
use crate::error::Error;
use crate::tensor::contiguous_strides;
use std::ffi::c_void;
use std::fmt;

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

/// `DLManagedTensor` (DLPack 0.x, the `"dltensor"` capsule): a tensor handed from a producer
/// to a consumer, who calls `deleter` once when done with it.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    /// The tensor.
    pub dl_tensor: DLTensor,
    /// The producer's context (what keeps the memory alive).
    pub manager_ctx: *mut c_void,
    /// Frees the tensor and its context; null when nothing is to be freed.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
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
/// The most dimensions an imported tensor may have (what the C API always allowed; far above
/// any real tensor, and a bound on what reading the shape may allocate).
pub const MAX_NDIM: usize = 64;

const _: () = assert!(std::mem::size_of::<DLDataType>() == 4);
const _: () = assert!(std::mem::size_of::<DLDevice>() == 8);
const _: () = assert!(std::mem::size_of::<DLTensor>() == 48);
const _: () = assert!(std::mem::size_of::<DLManagedTensor>() == 64);
const _: () = assert!(std::mem::size_of::<DLManagedTensorVersioned>() == 80);

/// What a checked `DLTensor` describes, ready for `Storage::from_external` and
/// `Tensor::from_parts`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The element type.
    pub dtype: DataType,
    /// The dimensions, all non-negative.
    pub shape: Vec<i64>,
    /// The strides in elements, all non-negative; `None` for a compact row-major tensor.
    pub strides: Option<Vec<i64>>,
    /// The bytes from the first element to one past the last (0 for an empty tensor).
    pub extent: usize,
}

/// Why a `DLTensor` cannot be imported.
#[derive(Debug)]
pub enum LayoutError {
    /// A vector type (`lanes` other than 1), which relaxvm has no element type for.
    Lanes(String),
    /// A data type relaxvm has no element type for.
    DType(Error),
    /// Memory the header does not describe soundly: a negative dimension or stride, a NULL
    /// pointer, an extent or address past what the address space holds, a misaligned start.
    Invalid(String),
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutError::Lanes(m) | LayoutError::Invalid(m) => f.write_str(m),
            LayoutError::DType(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for LayoutError {}

/// Checks what `dl` describes and reads its shape and strides: one lane, a known data type,
/// `0 <= ndim <=` [`MAX_NDIM`], non-negative dims and strides, an extent within `isize`,
/// non-NULL shape and data pointers where they are read, no overflow of
/// `data + byte_offset + extent`, and a first element aligned to the element size. The device
/// and the DLPack version are the caller's to check (each boundary accepts its own).
///
/// # Safety
/// `dl` comes from a producer that keeps its promise: when `shape` (or `strides`) is not NULL
/// it points to `ndim` readable `i64`s.
pub unsafe fn checked_layout(dl: &DLTensor) -> Result<Layout, LayoutError> {
    let invalid = |m: String| LayoutError::Invalid(m);
    if dl.dtype.lanes != 1 {
        return Err(LayoutError::Lanes(format!("DLPack tensors with {} lanes are not supported", dl.dtype.lanes)));
    }
    let dtype = DataType::from_dlpack(dl.dtype.code, dl.dtype.bits).map_err(LayoutError::DType)?;
    let ndim = usize::try_from(dl.ndim).map_err(|_| invalid(format!("DLPack ndim {} is negative", dl.ndim)))?;
    if ndim > MAX_NDIM {
        return Err(invalid(format!("DLPack ndim {ndim} is more than the {MAX_NDIM} supported")));
    }
    if ndim > 0 && dl.shape.is_null() {
        return Err(invalid(format!("DLPack tensor of ndim {ndim} has a NULL shape pointer")));
    }
    // SAFETY: the producer guarantees `shape` (and `strides`, when non-null) hold `ndim`
    // entries; `shape` was checked non-null above.
    let shape: Vec<i64> =
        if ndim == 0 { vec![] } else { unsafe { std::slice::from_raw_parts(dl.shape, ndim) }.to_vec() };
    let strides: Option<Vec<i64>> = if dl.strides.is_null() || ndim == 0 {
        None
    } else {
        // SAFETY: as above, `strides` is non-null here.
        Some(unsafe { std::slice::from_raw_parts(dl.strides, ndim) }.to_vec())
    };
    let extent = checked_extent(dl, &shape, strides.as_deref(), dtype.itemsize()).map_err(invalid)?;
    Ok(Layout { dtype, shape, strides, extent })
}

/// The extent in bytes of the memory `dl` describes with `shape` and `strides`, checked: see
/// [`checked_layout`].
fn checked_extent(dl: &DLTensor, shape: &[i64], strides: Option<&[i64]>, itemsize: usize) -> Result<usize, String> {
    let mut numel: usize = 1;
    for (i, d) in shape.iter().enumerate() {
        let d = usize::try_from(*d).map_err(|_| format!("DLPack shape[{i}] is {d}; dimensions must be >= 0"))?;
        numel = numel.saturating_mul(d);
    }
    let too_large = || format!("DLPack tensor of shape {shape:?} overflows the address space");
    let extent = if numel == 0 {
        0
    } else {
        let st = strides.map(<[i64]>::to_vec).unwrap_or_else(|| contiguous_strides(shape));
        if let Some((i, s)) = st.iter().enumerate().find(|(_, s)| **s < 0) {
            return Err(format!("DLPack strides[{i}] is {s}: relaxvm takes tensors whose strides are all >= 0"));
        }
        // The span from the first element to one past the last, in elements.
        let span = shape
            .iter()
            .zip(&st)
            .try_fold(1usize, |acc, (d, s)| (*d as usize - 1).checked_mul(*s as usize)?.checked_add(acc));
        span.and_then(|n| n.checked_mul(itemsize)).filter(|b| *b <= isize::MAX as usize).ok_or_else(too_large)?
    };
    if numel > 0 && dl.data.is_null() {
        return Err(format!("DLPack tensor of {numel} elements has a NULL data pointer"));
    }
    let start = (dl.data as usize)
        .checked_add(dl.byte_offset as usize)
        .filter(|_| dl.byte_offset <= isize::MAX as u64)
        .ok_or_else(|| format!("DLPack byte_offset {} overflows the address space", dl.byte_offset))?;
    if start.checked_add(extent).is_none() {
        return Err(format!(
            "DLPack data + byte_offset {} + extent {extent} overflows the address space",
            dl.byte_offset
        ));
    }
    if !start.is_multiple_of(itemsize) {
        return Err("DLPack tensor data is not aligned to its element size".into());
    }
    Ok(extent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ptr::null_mut;

    fn header(data: *mut c_void, shape: &mut [i64], strides: Option<&mut [i64]>, byte_offset: u64) -> DLTensor {
        DLTensor {
            data,
            device: DLDevice { device_type: 1, device_id: 0 },
            ndim: shape.len() as i32,
            dtype: DLDataType { code: 2, bits: 32, lanes: 1 },
            shape: shape.as_mut_ptr(),
            strides: strides.map_or(null_mut(), <[i64]>::as_mut_ptr),
            byte_offset,
        }
    }

    fn error(dl: &DLTensor) -> String {
        // SAFETY: every header here points at live arrays of `ndim` entries (or at none).
        unsafe { checked_layout(dl) }.unwrap_err().to_string()
    }

    fn refused(dl: &DLTensor) -> LayoutError {
        // SAFETY: as in `error`.
        unsafe { checked_layout(dl) }.unwrap_err()
    }

    #[test]
    fn a_sound_header_gives_its_layout() {
        let mut buf = [0f32; 6];
        let mut shape = [2, 3];
        let mut strides = [1, 2];
        let dl = header(buf.as_mut_ptr().cast(), &mut shape, Some(&mut strides), 0);
        // SAFETY: as in `error`.
        let layout = unsafe { checked_layout(&dl) }.unwrap();
        assert_eq!(layout, Layout { dtype: DataType::F32, shape: vec![2, 3], strides: Some(vec![1, 2]), extent: 24 });
    }

    #[test]
    fn each_unsound_header_is_refused_with_what_is_wrong() {
        let mut buf = [0f32; 4];
        let data = buf.as_mut_ptr().cast::<c_void>();
        // The headers built with `let` point at `four`, which outlives them.
        let mut four = [4i64];
        let mut dl = header(data, &mut four, None, 0);
        dl.dtype.lanes = 4;
        assert!(matches!(refused(&dl), LayoutError::Lanes(_)));
        let mut dl = header(data, &mut four, None, 0);
        dl.dtype.code = 9;
        assert!(matches!(refused(&dl), LayoutError::DType(_)));
        let mut dl = header(data, &mut four, None, 0);
        dl.ndim = -1;
        assert_eq!(error(&dl), "DLPack ndim -1 is negative");
        let mut big = [1i64; 65];
        assert_eq!(error(&header(data, &mut big, None, 0)), "DLPack ndim 65 is more than the 64 supported");
        let mut dl = header(data, &mut four, None, 0);
        dl.shape = null_mut();
        assert_eq!(error(&dl), "DLPack tensor of ndim 1 has a NULL shape pointer");
        assert_eq!(error(&header(data, &mut [2, -1], None, 0)), "DLPack shape[1] is -1; dimensions must be >= 0");
        assert_eq!(
            error(&header(data, &mut [2], Some(&mut [-1]), 0)),
            "DLPack strides[0] is -1: relaxvm takes tensors whose strides are all >= 0"
        );
        assert_eq!(
            error(&header(data, &mut [1 << 62], None, 0)),
            "DLPack tensor of shape [4611686018427387904] overflows the address space"
        );
        assert_eq!(
            error(&header(null_mut(), &mut [4], None, 0)),
            "DLPack tensor of 4 elements has a NULL data pointer"
        );
        assert_eq!(
            error(&header(data, &mut [4], None, 1 << 63)),
            "DLPack byte_offset 9223372036854775808 overflows the address space"
        );
        assert_eq!(
            error(&header(usize::MAX as *mut c_void, &mut [4], None, 0)),
            "DLPack data + byte_offset 0 + extent 16 overflows the address space"
        );
        assert_eq!(error(&header(data, &mut [2], None, 2)), "DLPack tensor data is not aligned to its element size");
    }

    #[test]
    fn an_empty_tensor_needs_no_data() {
        let mut shape = [0, 3];
        let dl = header(null_mut(), &mut shape, None, 0);
        // SAFETY: as in `error`.
        assert_eq!(unsafe { checked_layout(&dl) }.unwrap().extent, 0);
    }
}
