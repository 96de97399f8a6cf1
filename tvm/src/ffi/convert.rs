//! Conversions between relaxvm values and tvm-ffi's `TVMFFIAny`, both ways: arguments of
//! kernels (tensors become DLTensor views of relaxvm's memory) and arguments of packed
//! functions that kernels call back (DLTensors become relaxvm tensors holding *copies* of the
//! kernel's elements, whose changes are written back when the call returns: [`CallbackArgs`]).

use super::abi::{type_index, DLDataType, DLDevice, DLTensor, TVMFFIAny};
use relaxvm::{DataType, Device, DeviceType, Error, Result, Shape, Storage, Tensor, Value};
use std::ffi::{c_char, CStr};

/// The DLPack type of a relaxvm dtype, as TVM's kernels check it: one load from a table built
/// at compile time from [`DataType::dlpack_code`] and [`DataType::bits`] (the single source of
/// both), since every tensor argument of every kernel call asks and their two matches cost
/// about 12 instructions a tensor.
#[inline]
pub fn dl_dtype(d: DataType) -> DLDataType {
    DL_DTYPES[d as usize]
}

/// [`dl_dtype`]'s table, indexed by discriminant.
const DL_DTYPES: [DLDataType; DataType::ALL.len()] = {
    let mut table = [DLDataType { code: 0, bits: 0, lanes: 0 }; DataType::ALL.len()];
    let mut i = 0;
    while i < table.len() {
        let d = DataType::ALL[i];
        // Checked when this compiles: `DataType::ALL` lists every dtype in declaration order,
        // so a discriminant is an index (and a dtype missing from the list fails here too).
        assert!(d as usize == i, "DataType::ALL must list the dtypes in declaration order");
        table[i] = DLDataType { code: d.dlpack_code(), bits: d.bits(), lanes: 1 };
        i += 1;
    }
    table
};

/// The relaxvm dtype of a DLPack type (TVM's `bool` may arrive as `uint1`).
pub fn from_dl_dtype(d: DLDataType) -> Result<DataType> {
    crate::vmexec::dtype_of(d.code, d.bits, d.lanes)
}

/// A DLTensor viewing `t` (contiguous: null strides). `shape` and `strides` must outlive the
/// returned struct's use; `t`'s data is passed at the view's first element.
#[inline]
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

/// A kernel's (or callback's) result as a relaxvm value. Inline: every kernel call ends here.
#[inline]
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

/// The arguments a kernel passes to a packed function it calls back (`TVMFFIFunctionCall`).
///
/// A DLTensor a kernel passes views memory the kernel owns — often a workspace it frees as soon
/// as the call returns — yet the function it calls may keep what it is given: a Python override
/// storing the tensor, a numpy view of it, a DLPack capsule, a closure or tuple capturing it.
/// None of those can be revoked later (a numpy view holds the raw pointer), so no value handed
/// to the function views the kernel's memory at all: each tensor argument is an owned copy of
/// the DLTensor's elements ([`CallbackArgs::value`]), and when the call returns the elements the
/// function changed are written back into the kernel's memory ([`CallbackArgs::write_back`]).
/// The function may write its outputs any way it likes (in place through builtins, numpy views,
/// the buffer protocol, DLPack, `copyfrom`, `t[:] = ...`); whatever it keeps afterwards holds
/// the values as they were when it returned, in memory that lives as long as it is referenced.
///
/// The same DLTensor passed twice (the same memory, type and layout) becomes one tensor, so
/// the function sees their aliasing. Only changed elements are written back, so memory the
/// function did not write — an input that may be read-only — is never written, and overlapping
/// arguments give back what the function changed through either.
#[derive(Default)]
pub struct CallbackArgs {
    copies: Vec<Copied>,
}

/// One DLTensor's elements copied for a callback.
struct Copied {
    layout: Layout,
    copy: Tensor,
}

/// Where a DLTensor's elements lie: the first element's address and, per element in C order,
/// its byte offset from it (computed from the shape and strides).
#[derive(PartialEq)]
struct Layout {
    base: usize,
    /// The bytes from the first element to one past the last.
    len: usize,
    dtype: DataType,
    dims: Vec<i64>,
    /// In elements; `None` when compact.
    strides: Option<Vec<i64>>,
}

impl Layout {
    /// Calls `f(i, offset)` for element `i` (C order) at byte `offset` from `base`.
    fn for_each_element(&self, mut f: impl FnMut(usize, usize)) {
        let item = self.dtype.itemsize();
        let n: usize = self.dims.iter().map(|d| *d as usize).product();
        let Some(strides) = &self.strides else {
            (0..n).for_each(|i| f(i, i * item));
            return;
        };
        let mut index = vec![0i64; self.dims.len()];
        for i in 0..n {
            // Checked when the layout was made: every offset fits (the span is in bounds).
            let offset: i64 = index.iter().zip(strides).map(|(i, s)| i * s).sum();
            f(i, offset as usize * item);
            for d in (0..self.dims.len()).rev() {
                index[d] += 1;
                if index[d] < self.dims[d] {
                    break;
                }
                index[d] = 0;
            }
        }
    }
}

impl CallbackArgs {
    /// An argument a kernel passes to a packed function, as a relaxvm value: a tensor for a
    /// DLTensor (an owned copy of its elements, see [`CallbackArgs`]), a string, a scalar.
    ///
    /// # Safety
    /// A DLTensor or string pointer in `a` is valid for the duration of the call; a DLTensor's
    /// elements are readable now and writable until [`CallbackArgs::write_back`] returns.
    pub unsafe fn value(&mut self, a: &TVMFFIAny) -> Result<Value> {
        match a.type_index {
            type_index::DL_TENSOR_PTR => {
                let p = a.as_ptr() as *const DLTensor;
                if p.is_null() {
                    return Err(Error::value("null DLTensor pointer"));
                }
                // SAFETY: the caller's contract: a live DLTensor.
                unsafe { self.copy_of(&*p) }.map(Value::Tensor)
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

    /// An owned tensor holding a copy of `t`'s elements (the one made for an identical
    /// DLTensor earlier in this call, if any).
    ///
    /// # Safety
    /// `t` describes live CPU memory, readable now.
    unsafe fn copy_of(&mut self, t: &DLTensor) -> Result<Tensor> {
        let layout = layout_of(t)?;
        if let Some(c) = self.copies.iter().find(|c| c.layout == layout) {
            return Ok(c.copy.clone());
        }
        let item = layout.dtype.itemsize();
        let n: usize = layout.dims.iter().map(|d| *d as usize).product();
        let nbytes = n.checked_mul(item).ok_or_else(|| Error::value("tensor too large"))?;
        let storage = Storage::alloc_filled(nbytes, Device::cpu(0), |dst| {
            if layout.strides.is_none() {
                // SAFETY: as below, for the compact span of `nbytes` bytes at `base`.
                unsafe { std::ptr::copy_nonoverlapping(layout.base as *const u8, dst.as_mut_ptr(), nbytes) };
                return Ok(());
            }
            layout.for_each_element(|i, offset| {
                // SAFETY: the caller's contract: the element at `offset` is readable (every
                // offset lies inside the span `layout_of` checked); `dst` has room for element
                // `i`, and is fresh memory, so the ranges do not overlap. Raw copies: no Rust
                // reference to the kernel's memory is made.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        (layout.base as *const u8).add(offset),
                        dst.as_mut_ptr().add(i * item),
                        item,
                    )
                }
            });
            Ok(())
        })?;
        let copy = Tensor::from_parts(storage, 0, Shape::new(layout.dims.clone()), None, layout.dtype)?;
        // A constant the kernel was given and passes on (e.g. as a sort's output): the copy is
        // frozen, so the callee's writes are refused and nothing is written back into the
        // constant's read-only pages.
        if layout.len > 0 && relaxvm::storage::read_only::overlaps(layout.base, layout.len) {
            copy.storage().freeze();
        }
        self.copies.push(Copied { layout, copy: copy.clone() });
        Ok(copy)
    }

    /// Writes every element the called function changed in the copies back into the kernel's
    /// memory (leaving the others untouched), and lets go of the copies: a value the function
    /// kept keeps its copy alive, and no longer reaches the kernel.
    ///
    /// # Safety
    /// The memory of every DLTensor given to [`CallbackArgs::value`] is still live and
    /// writable where the function changed it (the kernel's, while its call lasts).
    #[inline]
    pub unsafe fn write_back(self) {
        // Most calls pass no DLTensor: nothing to write back, and no call.
        if !self.copies.is_empty() {
            // SAFETY: the caller's contract.
            unsafe { self.write_back_copies() }
        }
    }

    /// [`CallbackArgs::write_back`] of a non-empty list.
    ///
    /// # Safety
    /// As [`CallbackArgs::write_back`].
    unsafe fn write_back_copies(self) {
        for c in self.copies {
            let item = c.layout.dtype.itemsize();
            // The function has returned, but a thread it started may still write the copy:
            // read it through the storage's read guard.
            let bytes = c.copy.storage().bytes();
            let base = c.layout.base as *mut u8;
            // SAFETY (both branches): the caller's contract: every element (at an offset inside
            // the span `layout_of` checked) is live; each is written only where it differs from
            // the copy, so memory the function did not change is never written.
            if c.layout.strides.is_none() {
                // Compact: compare a block at a time, then the elements of a block that differs.
                let block = item * (4096 / item).max(1);
                for (b, new) in bytes.chunks(block).enumerate() {
                    unsafe { give_back(base.wrapping_add(b * block), new, item) };
                }
            } else {
                c.layout.for_each_element(|i, offset| unsafe {
                    give_back(base.wrapping_add(offset), &bytes[i * item..(i + 1) * item], item)
                });
            }
        }
    }
}

/// Writes the elements of `new` (of `item` bytes each) that differ from the memory at `dst`.
///
/// # Safety
/// `dst` is valid for reads and writes of `new.len()` bytes and does not overlap `new`.
unsafe fn give_back(dst: *mut u8, new: &[u8], item: usize) {
    // Each comparison's view of `dst` ends before anything is written there.
    // SAFETY: the caller's contract; `at + n.len()` stays inside the range.
    let differs = |at: usize, n: &[u8]| unsafe { std::slice::from_raw_parts(dst.add(at).cast_const(), n.len()) } != n;
    if !differs(0, new) {
        return;
    }
    for (k, n) in new.chunks(item).enumerate() {
        if differs(k * item, n) {
            // SAFETY: the caller's contract; element `k` lies inside the range.
            unsafe { std::ptr::copy_nonoverlapping(n.as_ptr(), dst.add(k * item), item) };
        }
    }
}

/// Checks a DLTensor a kernel passed and says where its elements lie.
fn layout_of(t: &DLTensor) -> Result<Layout> {
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
    let shape = Shape::new(dims.clone());
    let elems = relaxvm::shape::numel(&shape).ok_or_else(|| {
        Error::value(format!("a DLTensor with shape {shape}: expected dimensions >= 0 whose product fits in int64"))
    })?;
    // The span from the first element to one past the last, in elements.
    let span = match &strides {
        _ if elems == 0 => 0,
        None => elems,
        Some(s) => s
            .iter()
            .zip(&dims)
            .try_fold(1usize, |acc, (st, d)| {
                usize::try_from(*st).ok()?.checked_mul((*d as usize).checked_sub(1)?)?.checked_add(acc)
            })
            .ok_or_else(|| Error::value(format!("strides {s:?}: negative or overflowing")))?,
    };
    let len = span.checked_mul(dtype.itemsize()).filter(|l| *l <= isize::MAX as usize);
    let len = len.ok_or_else(|| Error::value(format!("a tensor of shape {shape} and dtype {dtype} too large")))?;
    // An offset past isize::MAX is no offset into one allocation (Rust's and C's pointer rules).
    let offset = usize::try_from(t.byte_offset).ok().filter(|o| *o <= isize::MAX as usize);
    let base = offset.and_then(|o| (t.data as usize).checked_add(o)).filter(|b| b.checked_add(len).is_some());
    let base = base.ok_or_else(|| {
        Error::value(format!("a DLTensor whose data pointer, byte_offset {} and extent {len} overflow", t.byte_offset))
    })?;
    if base == 0 && len > 0 {
        return Err(Error::value("a DLTensor with null data"));
    }
    Ok(Layout { base, len, dtype, dims, strides })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dlpack_table_answers_as_the_dtype_methods_for_every_dtype() {
        for d in DataType::ALL {
            assert_eq!(dl_dtype(d), DLDataType { code: d.dlpack_code(), bits: d.bits(), lanes: 1 }, "{d}");
            assert_eq!(from_dl_dtype(dl_dtype(d)).unwrap(), d);
        }
    }
}
