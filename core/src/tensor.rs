//! N-dimensional tensors: a typed, strided view of a [`Storage`].

use crate::device::Device;
use crate::dispatch_dtype;
use crate::dtype::DataType;
pub use crate::element::Element;
use crate::error::{Error, Result};
use crate::shape::{numel, Shape};
use crate::storage::{Storage, StorageRead};
use ndarray::{ArrayD, ArrayViewD, IxDyn, ShapeBuilder};
use std::ffi::c_void;
use std::fmt;
use std::sync::atomic::AtomicPtr;
use std::sync::Arc;

/// A tensor: shared storage, a byte offset, a dtype, a shape and strides. Cloning shares it.
#[derive(Clone)]
pub struct Tensor(Arc<Inner>);

struct Inner {
    storage: Storage,
    byte_offset: usize,
    dtype: DataType,
    shape: Shape,
    /// Strides in elements; `None` means C-contiguous.
    strides: Option<Arc<[i64]>>,
    /// See [`Tensor::binding_slot`].
    binding: AtomicPtr<c_void>,
}

/// C-contiguous strides (in elements) for `dims`.
pub fn contiguous_strides(dims: &[i64]) -> Vec<i64> {
    let mut strides = vec![1i64; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1].saturating_mul(dims[i + 1].max(1));
    }
    strides
}

impl Tensor {
    /// A view of `storage`: checks that every element lies inside it.
    pub fn from_parts(
        storage: Storage,
        byte_offset: usize,
        shape: Shape,
        strides: Option<Vec<i64>>,
        dtype: DataType,
    ) -> Result<Self> {
        let strides = check_view(&storage, byte_offset, &shape, strides, dtype)?;
        Ok(Tensor(Arc::new(Inner {
            storage,
            byte_offset,
            dtype,
            shape,
            strides: strides.map(Into::into),
            binding: AtomicPtr::new(std::ptr::null_mut()),
        })))
    }

    /// A new zero-filled contiguous tensor.
    pub fn zeros(shape: impl Into<Shape>, dtype: DataType, device: Device) -> Result<Self> {
        let shape = shape.into();
        let n = numel(&shape).ok_or_else(|| Error::value(format!("invalid tensor shape {shape}")))?;
        let bytes = (n as u128) * dtype.itemsize() as u128;
        let storage = Storage::alloc_checked(bytes as i128, device)?;
        Tensor::from_parts(storage, 0, shape, None, dtype)
    }

    /// Takes an ndarray array, without copying when it is in standard layout.
    pub fn from_array<T: Element>(a: ArrayD<T>) -> Self {
        let dims: Vec<i64> = a.shape().iter().map(|d| *d as i64).collect();
        let a = if a.is_standard_layout() { a } else { a.as_standard_layout().into_owned() };
        let (vec, offset) = a.into_raw_vec_and_offset();
        let offset = offset.unwrap_or(0) * std::mem::size_of::<T>();
        Tensor::from_parts(Storage::from_vec(vec), offset, dims.into(), None, T::DTYPE)
            .expect("a standard-layout ndarray fits its own buffer")
    }

    /// A contiguous tensor from a vector and a shape.
    pub fn from_vec<T: Element>(shape: impl Into<Shape>, data: Vec<T>) -> Result<Self> {
        let shape = shape.into();
        if numel(&shape) != Some(data.len()) {
            return Err(Error::value(format!("{} elements cannot have shape {shape}", data.len())));
        }
        Tensor::from_parts(Storage::from_vec(data), 0, shape, None, T::DTYPE)
    }

    /// A contiguous tensor of `dtype` and `shape` holding a copy of `bytes` (native byte order,
    /// row-major). Fails when the byte count does not match or a `bool` byte is not 0 or 1.
    pub fn from_bytes(dtype: DataType, shape: impl Into<Shape>, bytes: &[u8]) -> Result<Self> {
        let shape = shape.into();
        let numel = numel(&shape).ok_or_else(|| {
            Error::value(format!("invalid tensor shape {shape}: dimensions must be non-negative and fit in memory"))
        })?;
        let expected = numel.checked_mul(dtype.itemsize()).ok_or_else(|| too_large(&shape))?;
        if bytes.len() != expected {
            return Err(Error::value(format!(
                "a {dtype} tensor of shape {shape} needs {expected} bytes of data, found {}",
                bytes.len()
            )));
        }
        if let Some(b) = bytes.iter().find(|b| dtype == DataType::Bool && **b > 1) {
            return Err(Error::value(format!("bool tensor data must be 0 or 1 bytes, found {b}")));
        }
        let storage = Storage::alloc(bytes.len(), Device::cpu(0))?;
        storage.write(0, bytes)?;
        Tensor::from_parts(storage, 0, shape, None, dtype)
    }

    /// A zero-dimensional tensor holding `x`.
    pub fn scalar<T: Element>(x: T) -> Self {
        Tensor::from_vec(Shape::from([]), vec![x]).expect("one element fits shape ()")
    }

    /// The element type.
    pub fn dtype(&self) -> DataType {
        self.0.dtype
    }

    /// The shape. A builtin that returns it by reference (`vm.builtin.shape_of`, a
    /// `SelectFn` returning `Selected::Shape`) lets the interpreter skip the reference counting
    /// when the destination register already holds this very shape.
    pub fn shape(&self) -> &Shape {
        &self.0.shape
    }

    /// The number of dimensions.
    pub fn ndim(&self) -> usize {
        self.shape().len()
    }

    /// The number of elements.
    pub fn numel(&self) -> usize {
        numel(self.shape()).expect("checked at construction")
    }

    /// Strides in elements (computed for contiguous tensors).
    pub fn strides(&self) -> Vec<i64> {
        match &self.0.strides {
            Some(s) => s.to_vec(),
            None => contiguous_strides(self.shape()),
        }
    }

    /// True when the elements are laid out C-contiguously.
    pub fn is_contiguous(&self) -> bool {
        self.0.strides.is_none()
    }

    /// The byte offset into the storage.
    pub fn byte_offset(&self) -> usize {
        self.0.byte_offset
    }

    /// The underlying storage.
    pub fn storage(&self) -> &Storage {
        &self.0.storage
    }

    /// The device.
    pub fn device(&self) -> Device {
        self.0.storage.device()
    }

    /// The size in bytes of the elements (contiguous size).
    pub fn nbytes(&self) -> usize {
        self.numel() * self.dtype().itemsize()
    }

    /// Pointer to the first element.
    pub fn data_ptr(&self) -> *mut u8 {
        // SAFETY: `from_parts` checked byte_offset (plus the extent) lies inside the storage.
        unsafe { self.0.storage.as_ptr().add(self.0.byte_offset) }
    }

    /// True when this is the only handle to this tensor object (its storage may be shared by
    /// other tensors: see [`Storage::is_sole`]); a cache holding it may then hand it out again.
    pub fn is_sole(&self) -> bool {
        crate::storage::sole(&self.0)
    }

    /// How many handles this tensor object has (for a site's cache to tell a header only it
    /// keeps: see `value/site_views.rs`).
    pub(crate) fn handle_count(&self) -> usize {
        Arc::strong_count(&self.0)
    }

    /// True when both handles are the same tensor object.
    pub fn ptr_eq(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// An address that identifies this tensor object while it lives (the same for every handle
    /// to it: what [`Tensor::ptr_eq`] compares).
    pub fn object_id(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// A slot where a language binding keeps the address of the object that wraps this tensor
    /// in that language, so the same tensor always comes back as the same object (a tensor put
    /// into a tuple and taken out again is the one put in), as PyTorch keeps a tensor's Python
    /// object in its `TensorImpl`. Shared by every handle to this tensor; null until a binding
    /// sets it; the VM itself never reads it.
    pub fn binding_slot(&self) -> &AtomicPtr<c_void> {
        &self.0.binding
    }

    /// The stride of `axis` in elements (0 for an axis out of range); no allocation, unlike
    /// [`Tensor::strides`].
    pub fn stride(&self, axis: usize) -> i64 {
        match &self.0.strides {
            Some(s) => s.get(axis).copied().unwrap_or(0),
            None => self.shape().get(axis + 1..).map_or(0, |rest| rest.iter().map(|d| (*d).max(1)).product()),
        }
    }

    /// True when both tensors view the same storage.
    pub fn shares_storage(&self, other: &Tensor) -> bool {
        self.0.storage.ptr_eq(&other.0.storage)
    }

    /// A read-only ndarray view of the elements, which must be of type `T`. Safe writes to the
    /// storage fail while the view lives (see [`Storage`]). A `bool` view checks that every byte
    /// is 0 or 1: any other byte is not a `bool`, and reading it as one is undefined behaviour.
    /// A view of word storage (a shape heap: see [`crate::storage::words`]) views a copy of its
    /// words, allocated and loaded on every call, not the storage's bytes in place.
    pub fn view<T: Element>(&self) -> Result<TensorView<'_, T>> {
        if T::DTYPE != self.dtype() {
            return Err(Error::type_mismatch(format!("tensor of {}", T::DTYPE), format!("tensor of {}", self.dtype())));
        }
        let ptr = self.data_ptr().cast::<T>();
        if !(ptr as usize).is_multiple_of(std::mem::align_of::<T>()) {
            return Err(Error::value(format!("tensor data at {ptr:p} is not aligned for {}", self.dtype())));
        }
        let read = self.0.storage.bytes();
        // The bytes the guard shows: the storage's own, or (word storage) a copy aligned as
        // they are, which the view must see instead (see `storage::words`).
        // SAFETY: `from_parts` checked byte_offset lies inside the storage, which `read` shows
        // in full.
        let ptr = unsafe { read.as_ptr().add(self.0.byte_offset) }.cast::<T>().cast_mut();
        let dims: Vec<usize> = self.shape().iter().map(|d| *d as usize).collect();
        let strides: Vec<usize> = self.strides().iter().map(|s| *s as usize).collect();
        let shape = IxDyn(&dims).strides(IxDyn(&strides));
        if T::DTYPE == DataType::Bool {
            // SAFETY: as below, for bytes instead of T (always aligned, same extent).
            let bytes = unsafe { ArrayViewD::<u8>::from_shape_ptr(shape.clone(), ptr.cast::<u8>()) };
            if let Some(b) = bytes.iter().find(|b| **b > 1) {
                return Err(Error::value(format!("bool tensor holds the byte {b}; bool bytes must be 0 or 1")));
            }
        }
        // SAFETY: `from_parts` proved every element (offset + sum((dim-1)*stride)) lies inside
        // the storage, strides are non-negative, the pointer is aligned (checked above on the
        // storage's own pointer; a word storage's copy is aligned as it is), bool bytes are
        // valid bools (checked above), the storage (and `read`'s copy) outlives the view because
        // the view borrows `self` and holds `read`, and `read` keeps safe writes out while the
        // view lives.
        let view = unsafe { ArrayViewD::from_shape_ptr(shape, ptr) };
        Ok(TensorView { view, _read: read })
    }

    /// The elements as an owned array in standard layout (allocation failure is an error).
    pub fn to_array<T: Element>(&self) -> Result<ArrayD<T>> {
        let dims: Vec<usize> = self.shape().iter().map(|d| *d as usize).collect();
        let data = self.to_vec::<T>()?;
        Ok(ArrayD::from_shape_vec(IxDyn(&dims), data).expect("numel elements fill the shape"))
    }

    /// The elements, in row-major order. The vector is allocated fallibly: a broadcast view of
    /// 2^40 elements (stride 0, a few bytes of storage) is an error to copy, not an abort.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        let view = self.view::<T>()?;
        let mut out = try_alloc_vec::<T>(self.numel())?;
        match view.as_slice() {
            Some(s) => out.extend_from_slice(s),
            None => out.extend(view.iter().copied()),
        }
        Ok(out)
    }

    /// Calls `f` with the elements' bytes in C order: the storage's own bytes when the tensor is
    /// contiguous (no copy; safe writes wait until `f` returns), else a compact copy.
    pub fn with_contiguous_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        if self.is_contiguous() {
            let start = self.byte_offset();
            let read = self.storage().bytes();
            return Ok(f(&read[start..start + self.nbytes()]));
        }
        Ok(f(&self.contiguous()?.contiguous_bytes()?))
    }

    /// The elements as contiguous bytes (copied, through a compact copy when strided).
    pub fn contiguous_bytes(&self) -> Result<Vec<u8>> {
        if self.is_contiguous() {
            let start = self.byte_offset();
            let read = self.storage().bytes();
            let mut out = try_alloc_vec::<u8>(self.nbytes())?;
            out.extend_from_slice(&read[start..start + self.nbytes()]);
            return Ok(out);
        }
        self.contiguous()?.contiguous_bytes()
    }

    /// This tensor, or, when it is a `bool` tensor holding bytes other than 0 and 1 (numpy views
    /// of other dtypes, foreign memory), a contiguous copy with every non-zero byte made 1 — what
    /// numpy and C read such a byte as. Other dtypes are returned as they are.
    pub fn with_normalized_bools(self) -> Result<Tensor> {
        if self.dtype() != DataType::Bool {
            return Ok(self);
        }
        let bytes = Tensor::from_parts(
            self.storage().clone(),
            self.byte_offset(),
            self.shape().clone(),
            (!self.is_contiguous()).then(|| self.strides()),
            DataType::U8,
        )?;
        if bytes.view::<u8>()?.iter().all(|b| *b <= 1) {
            return Ok(self);
        }
        let normalized: Vec<bool> = bytes.view::<u8>()?.iter().map(|b| *b != 0).collect();
        Tensor::from_vec(self.shape().clone(), normalized)
    }

    /// This tensor if contiguous, else a contiguous copy (allocation failure is an error).
    pub fn contiguous(&self) -> Result<Tensor> {
        if self.is_contiguous() {
            return Ok(self.clone());
        }
        dispatch_dtype!(self.dtype(), T => Tensor::from_vec(self.shape().clone(), self.to_vec::<T>()?))
    }

    /// A tensor with the same elements and a new shape: a view when contiguous, else a copy.
    pub fn reshape(&self, shape: impl Into<Shape>) -> Result<Tensor> {
        let shape = shape.into();
        if numel(&shape) != Some(self.numel()) {
            return Err(Error::value(format!(
                "cannot reshape tensor of shape {} ({} elements) to {shape}",
                self.shape(),
                self.numel()
            )));
        }
        let base = self.contiguous()?;
        Tensor::from_parts(base.storage().clone(), base.byte_offset(), shape, None, self.dtype())
    }

    /// The value of a one-element tensor, as `i64` (bools and floats converted; `None` otherwise).
    pub fn scalar_i64(&self) -> Option<i64> {
        if self.numel() != 1 {
            return None;
        }
        Some(dispatch_dtype!(self.dtype(), T => self.view::<T>().ok()?.iter().next().map(|x| x.to_f64() as i64)?))
    }

    /// The value of a one-element tensor as `f64`.
    pub fn scalar_f64(&self) -> Option<f64> {
        if self.numel() != 1 {
            return None;
        }
        Some(dispatch_dtype!(self.dtype(), T => self.view::<T>().ok()?.iter().next().map(|x| x.to_f64())?))
    }

    /// True when both tensors have equal dtype, shape and elements.
    pub fn content_eq(&self, other: &Tensor) -> bool {
        // Compared in place when contiguous; a strided tensor too large to copy is not known
        // equal (callers only skip sharing then).
        self.dtype() == other.dtype()
            && self.shape() == other.shape()
            && self
                .with_contiguous_bytes(|a| {
                    other.with_contiguous_bytes(|b| crate::chunks::bytes_eq(a, b)).unwrap_or(false)
                })
                .unwrap_or(false)
    }
}

/// An empty vector with room for `n` elements, or an allocation error (never an abort).
fn try_alloc_vec<T>(n: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        Error::alloc((n as u128).saturating_mul(std::mem::size_of::<T>() as u128), "out of memory copying a tensor")
    })?;
    Ok(v)
}

/// A read-only view of a tensor's elements ([`Tensor::view`]): an ndarray view that also holds
/// the storage's read guard, so no safe write changes the elements while it is in use.
pub struct TensorView<'a, T> {
    view: ArrayViewD<'a, T>,
    _read: StorageRead<'a>,
}

impl<'a, T> std::ops::Deref for TensorView<'a, T> {
    type Target = ArrayViewD<'a, T>;
    fn deref(&self) -> &ArrayViewD<'a, T> {
        &self.view
    }
}

impl<T: fmt::Debug> fmt::Debug for TensorView<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.view.fmt(f)
    }
}

/// Checks that a view of `storage` at `byte_offset` with `shape`, `strides` (in elements;
/// `None` for C-contiguous) and `dtype` has every element inside the storage; the strides to
/// keep (`None` when they are the contiguous ones).
fn check_view(
    storage: &Storage,
    byte_offset: usize,
    shape: &Shape,
    strides: Option<Vec<i64>>,
    dtype: DataType,
) -> Result<Option<Vec<i64>>> {
    let n = numel(shape).ok_or_else(|| {
        Error::value(format!(
            "invalid tensor shape {shape}: dimensions must be non-negative and their product must fit in memory"
        ))
    })?;
    // ndarray (and any consumer indexing with isize) needs the product of the non-zero
    // dimensions, in bytes, to fit in isize even when the tensor is empty.
    // (Folded in place: a vector of the non-zero dimensions cost an allocation per tensor.)
    let nonzero =
        shape.iter().filter(|d| **d != 0).try_fold(1usize, |acc, d| acc.checked_mul(usize::try_from(*d).ok()?));
    let fits = nonzero.and_then(|m| m.checked_mul(dtype.itemsize())).is_some_and(|b| b <= isize::MAX as usize);
    if !fits {
        return Err(Error::value(format!("tensor shape {shape} is too large for dtype {dtype}")));
    }
    let strides = strides.filter(|s| *s != contiguous_strides(shape));
    if let Some(s) = &strides {
        if s.len() != shape.len() {
            return Err(Error::value(format!("strides {s:?} do not match shape {shape}")));
        }
        if s.iter().any(|x| *x < 0) {
            return Err(Error::value(format!("negative strides {s:?} are not supported")));
        }
    }
    let needed = if n == 0 { 0 } else { extent(shape, strides.as_deref(), dtype)? };
    let end = byte_offset.checked_add(needed);
    if end.is_none_or(|e| e > storage.len()) {
        return Err(Error::value(format!(
        "tensor of shape {shape} and dtype {dtype} at byte offset {byte_offset} needs {needed} bytes, but the storage has {}",
        storage.len()
        )));
    }
    Ok(strides)
}

/// The refusal of a shape whose bytes overflow the address space (its dimensions as a shape).
fn too_large(shape: &[i64]) -> Error {
    Error::value(format!("tensor of shape {} is too large", Shape::from(shape)))
}

/// Bytes spanned from the first to the last element, inclusive.
fn extent(shape: &[i64], strides: Option<&[i64]>, dtype: DataType) -> Result<usize> {
    let overflow = || too_large(shape);
    let last = match strides {
        None => numel(shape).ok_or_else(overflow)?.saturating_sub(1),
        Some(s) => shape
            .iter()
            .zip(s)
            .try_fold(0usize, |acc, (d, st)| {
                let span = usize::try_from((d - 1).max(0)).ok()?.checked_mul(usize::try_from(*st).ok()?)?;
                acc.checked_add(span)
            })
            .ok_or_else(overflow)?,
    };
    last.checked_add(1).and_then(|n| n.checked_mul(dtype.itemsize())).ok_or_else(overflow)
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor(shape={}, dtype={}, device={})", self.shape(), self.dtype(), self.device())
    }
}

mod pooled;
pub use pooled::TensorSlot;

#[cfg(test)]
mod tests;
