//! Numpy arrays as tensors: viewed in place (the tensor's storage owns a reference to the
//! array) when aligned, writeable, in native byte order and with non-negative strides that are
//! whole elements; copied otherwise.

use crate::errors::IntoPyResult;
use numpy::npyffi::{self, NPY_ARRAY_WRITEABLE};
use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use relaxvm::dtype::TypeClass;
use relaxvm::{DataType, Device, Storage, Tensor};
use std::ptr::NonNull;

/// The data type of a numpy dtype, from its kind and size (`DataType::ALL` is the one table;
/// numpy has no bfloat16 kind).
fn numpy_dtype(kind: u8, itemsize: usize) -> Option<DataType> {
    let class = match kind {
        b'b' => TypeClass::Bool,
        b'i' => TypeClass::Int,
        b'u' => TypeClass::UInt,
        b'f' => TypeClass::Float,
        _ => return None,
    };
    DataType::ALL.into_iter().find(|d| d.class() == class && d.itemsize() == itemsize)
}

/// Keeps a numpy array alive for as long as a storage views its memory.
struct ArrayOwner(#[allow(dead_code)] Py<PyAny>);

/// Converts a numpy array to a tensor: a view when the layout allows, else a copy.
pub fn tensor_from_numpy(a: &Bound<'_, PyUntypedArray>) -> PyResult<Tensor> {
    numpy_to_tensor(a).map(|(t, _)| t)
}

/// [`tensor_from_numpy`], and whether the tensor views `a` itself (`false`: a copy).
pub fn numpy_to_tensor(a: &Bound<'_, PyUntypedArray>) -> PyResult<(Tensor, bool)> {
    let py = a.py();
    let descr = a.dtype();
    let itemsize = descr.itemsize();
    let dtype = numpy_dtype(descr.kind(), itemsize).ok_or_else(|| {
        PyTypeError::new_err(format!(
            "numpy dtype {} has no relaxvm equivalent",
            descr.str().map(|s| s.to_string()).unwrap_or_default()
        ))
    })?;
    if descr.is_native_byteorder() == Some(false) {
        let native = a.call_method1(pyo3::intern!(py, "astype"), (dtype.name(),))?;
        return Ok((tensor_from_numpy(native.cast::<PyUntypedArray>()?)?, false));
    }
    // SAFETY: `a` is a live ndarray (type-checked by the cast that produced it); we only read
    // its header fields while holding a reference to it.
    let (data, flags) = unsafe {
        let raw = &*a.as_array_ptr();
        (raw.fields.data, raw.fields.flags)
    };
    let shape = a.shape();
    let byte_strides = a.strides();
    let viewable = flags & NPY_ARRAY_WRITEABLE != 0
        && (data as usize).is_multiple_of(itemsize)
        && byte_strides.iter().all(|s| *s >= 0 && (*s as usize).is_multiple_of(itemsize));
    if !viewable {
        let copy = a.call_method1(pyo3::intern!(py, "copy"), ("C",))?;
        return Ok((tensor_from_numpy(copy.cast::<PyUntypedArray>()?)?, false));
    }
    // No strides for a C-contiguous array: the tensor computes them only when asked.
    // Built on the stack: the shape's own storage is its one allocation.
    let dims: smallvec::SmallVec<[i64; 8]> = shape.iter().map(|d| *d as i64).collect();
    let strides: Option<Vec<i64>> = if flags & npyffi::NPY_ARRAY_C_CONTIGUOUS != 0 {
        None
    } else {
        Some(byte_strides.iter().map(|s| (*s as usize / itemsize) as i64).collect())
    };
    let numel: usize = shape.iter().product();
    let extent = if numel == 0 {
        0
    } else {
        shape.iter().zip(byte_strides).map(|(d, s)| (d - 1) * (*s as usize)).sum::<usize>() + itemsize
    };
    let ptr = NonNull::new(data.cast::<u8>()).unwrap_or(NonNull::<u64>::dangling().cast());
    let owner = ArrayOwner(a.clone().into_any().unbind());
    // SAFETY: numpy guarantees `extent` bytes from `data` belong to the array (every element
    // offset is sum((dim - 1) * stride) with non-negative strides, checked above) and it is
    // writeable; the array object is kept alive by `owner`, which the storage holds until its
    // last tensor is dropped, so the memory is not freed before.
    let storage = unsafe { Storage::from_external(ptr, extent, Device::cpu(0), Box::new(owner)) };
    // A numpy bool view of other bytes (`uint8_array.view(bool)`) may hold 2..255: read as true.
    // Callers pass arrays of the same few shapes: a recent equal shape saves an allocation.
    Tensor::from_parts(storage, 0, relaxvm::Shape::interned(&dims), strides, dtype)
        .and_then(Tensor::with_normalized_bools)
        .map(|t| {
            // A bool array holding other bytes than 0 and 1 was copied, normalised.
            let viewed = t.data_ptr() == data.cast::<u8>();
            (t, viewed)
        })
        .py_err(py)
}
