//! How a tensor hands its memory to other Python code without copying: the buffer protocol
//! (`memoryview(t)`), numpy's `__array_interface__`, and pickling with protocol 5, whose
//! out-of-band buffers let a pickler with a `buffer_callback` (Ray's, Dask's) move a tensor's
//! bytes outside the pickle (numpy's behaviour; without a callback, and with protocols below 5,
//! the bytes are copied into the pickle).

use crate::dtype::extract_dtype;
use crate::errors::IntoPyResult;
use crate::from_numpy::tensor_from_numpy;
use crate::shape::extract_shape;
use crate::tensor::PyTensor;
use numpy::PyUntypedArray;
use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use relaxvm::{DataType, Tensor};
use std::ffi::{c_int, c_void, CStr};

/// The struct-module format of an element type (PEP 3118), in native byte order as numpy gives.
/// bfloat16 has none.
fn buffer_format(d: DataType) -> Option<&'static CStr> {
    Some(match d {
        DataType::Bool => c"?",
        DataType::I8 => c"b",
        DataType::U8 => c"B",
        DataType::I16 => c"h",
        DataType::U16 => c"H",
        DataType::I32 => c"i",
        DataType::U32 => c"I",
        DataType::I64 => c"q",
        DataType::U64 => c"Q",
        DataType::F16 => c"e",
        DataType::F32 => c"f",
        DataType::F64 => c"d",
        DataType::BF16 => return None,
    })
}

/// numpy's type string of an element type (`__array_interface__`'s `typestr`).
fn typestr(d: DataType) -> Option<&'static str> {
    Some(match d {
        DataType::Bool => "|b1",
        DataType::I8 => "|i1",
        DataType::U8 => "|u1",
        DataType::I16 => "<i2",
        DataType::U16 => "<u2",
        DataType::I32 => "<i4",
        DataType::U32 => "<u4",
        DataType::I64 => "<i8",
        DataType::U64 => "<u8",
        DataType::F16 => "<f2",
        DataType::F32 => "<f4",
        DataType::F64 => "<f8",
        DataType::BF16 => return None,
    })
}

/// Shape and strides in bytes, kept alive for a buffer view in its `internal` field.
struct Layout {
    shape: Vec<ffi::Py_ssize_t>,
    strides: Vec<ffi::Py_ssize_t>,
}

/// Fills `view` for `obj` (the buffer protocol's getbuffer).
///
/// # Safety
/// `view` must point to a `Py_buffer` the caller owns (as CPython passes to `bf_getbuffer`).
pub unsafe fn get_buffer(obj: &Bound<'_, PyTensor>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
    let t = &obj.get().0;
    let format = buffer_format(t.dtype()).ok_or_else(|| {
        PyBufferError::new_err("a bfloat16 tensor has no buffer format; view it as uint16 with t.numpy() after a cast")
    })?;
    let read_only = t.storage().is_frozen();
    if read_only && flags & ffi::PyBUF_WRITABLE != 0 {
        return Err(PyBufferError::new_err(crate::tensor::READ_ONLY));
    }
    let strided = !t.is_contiguous();
    if strided && flags & ffi::PyBUF_STRIDES != ffi::PyBUF_STRIDES {
        return Err(PyBufferError::new_err("this tensor is not contiguous: request strides, or copy it"));
    }
    // A consumer asking for contiguous memory reads `len` bytes straight from `buf`: give it that
    // layout or nothing. A C-contiguous tensor is also Fortran-contiguous when at most one of its
    // dimensions exceeds 1.
    let c_order = flags & ffi::PyBUF_C_CONTIGUOUS == ffi::PyBUF_C_CONTIGUOUS;
    let f_order = flags & ffi::PyBUF_F_CONTIGUOUS == ffi::PyBUF_F_CONTIGUOUS;
    let any_order = flags & ffi::PyBUF_ANY_CONTIGUOUS == ffi::PyBUF_ANY_CONTIGUOUS;
    let also_fortran = t.shape().iter().filter(|d| **d > 1).count() <= 1;
    if (c_order || f_order || any_order) && (strided || (f_order && !c_order && !any_order && !also_fortran)) {
        return Err(PyBufferError::new_err(
            "this tensor is not laid out as the requested contiguous buffer: copy it (t.numpy().copy(order=...))",
        ));
    }
    let item = t.dtype().itemsize() as ffi::Py_ssize_t;
    let layout = Box::new(Layout {
        shape: t.shape().iter().map(|d| *d as ffi::Py_ssize_t).collect(),
        strides: t.strides().iter().map(|s| *s as ffi::Py_ssize_t * item).collect(),
    });
    // SAFETY: `view` is ours to fill (the caller's contract). `buf` points at the first element,
    // which with `shape` and `strides` describes memory inside the storage (checked when the
    // tensor was made); `obj` gets a new reference that keeps the tensor, hence the storage,
    // alive until `release_buffer` frees `layout` and CPython drops the reference.
    unsafe {
        let v = &mut *view;
        v.buf = t.data_ptr().cast::<c_void>();
        v.obj = obj.clone().into_any().into_ptr();
        v.len = (t.numel() * t.dtype().itemsize()) as ffi::Py_ssize_t;
        v.itemsize = item;
        v.readonly = c_int::from(read_only);
        v.ndim = t.ndim() as c_int;
        v.format = if flags & ffi::PyBUF_FORMAT != 0 { format.as_ptr().cast_mut() } else { std::ptr::null_mut() };
        v.shape = if flags & ffi::PyBUF_ND != 0 { layout.shape.as_ptr().cast_mut() } else { std::ptr::null_mut() };
        v.strides = if flags & ffi::PyBUF_STRIDES == ffi::PyBUF_STRIDES {
            layout.strides.as_ptr().cast_mut()
        } else {
            std::ptr::null_mut()
        };
        v.suboffsets = std::ptr::null_mut();
        v.internal = Box::into_raw(layout).cast::<c_void>();
    }
    Ok(())
}

/// Frees what [`get_buffer`] allocated for `view`.
///
/// # Safety
/// `view` must be a view [`get_buffer`] filled, released once (CPython's contract).
pub unsafe fn release_buffer(view: *mut ffi::Py_buffer) {
    // SAFETY: `internal` is the `Box<Layout>` get_buffer leaked for this view, freed only here.
    unsafe {
        let internal = (*view).internal;
        if !internal.is_null() {
            drop(Box::from_raw(internal.cast::<Layout>()));
            (*view).internal = std::ptr::null_mut();
        }
    }
}

/// numpy's array interface (version 3): the tensor's address, type string, shape and strides.
pub fn array_interface<'py>(obj: &Bound<'py, PyTensor>) -> PyResult<Bound<'py, PyDict>> {
    let py = obj.py();
    let t = &obj.get().0;
    let typestr =
        typestr(t.dtype()).ok_or_else(|| pyo3::exceptions::PyTypeError::new_err("numpy has no bfloat16 dtype"))?;
    let d = PyDict::new(py);
    d.set_item("version", 3)?;
    d.set_item("shape", PyTuple::new(py, t.shape().dims())?)?;
    d.set_item("typestr", typestr)?;
    d.set_item("data", (t.data_ptr() as usize, t.storage().is_frozen()))?;
    let item = t.dtype().itemsize() as i64;
    let strides = if t.is_contiguous() {
        py.None().into_bound(py)
    } else {
        PyTuple::new(py, t.strides().iter().map(|s| s * item))?.into_any()
    };
    d.set_item("strides", strides)?;
    Ok(d)
}

/// `__reduce_ex__`: with protocol 5, the bytes travel as a `pickle.PickleBuffer` (out of band
/// when the pickler takes buffers); below 5, as `bytes` inside the pickle.
pub fn reduce_ex<'py>(obj: &Bound<'py, PyTensor>, protocol: i64) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
    let py = obj.py();
    let t = &obj.get().0;
    let module = py.import("relaxvm._relaxvm")?;
    let shape = PyTuple::new(py, t.shape().dims())?;
    if protocol < 5 {
        let bytes = t.with_contiguous_bytes(|b| crate::py_bytes::new_bytes(py, b)).py_err(py)??;
        return Ok((module.getattr("tensor_from_bytes")?, (bytes, shape, t.dtype().name()).into_pyobject(py)?));
    }
    // The buffer is a contiguous uint8 view of the bytes (bfloat16 has no buffer format).
    let contiguous = if t.is_contiguous() { t.clone() } else { t.contiguous().py_err(py)? };
    let bytes = Tensor::from_parts(
        contiguous.storage().clone(),
        contiguous.byte_offset(),
        [contiguous.nbytes() as i64].into(),
        None,
        DataType::U8,
    )
    .py_err(py)?;
    let holder = PyTensor::wrap(py, bytes)?;
    let buffer = py.import("pickle")?.getattr("PickleBuffer")?.call1((holder,))?;
    Ok((module.getattr("_tensor_from_buffer")?, (buffer, shape, t.dtype().name()).into_pyobject(py)?))
}

/// Rebuilds a pickled tensor from a buffer of its bytes: viewed in place when the buffer is
/// writeable (an out-of-band buffer), else copied.
#[pyfunction]
pub fn _tensor_from_buffer<'py>(
    py: Python<'py>,
    buffer: &Bound<'py, PyAny>,
    shape: &Bound<'py, PyAny>,
    dtype: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyTensor>> {
    let shape = extract_shape(shape)?;
    let dtype = extract_dtype(dtype)?;
    let np = py.import(pyo3::intern!(py, "numpy"))?;
    let raw = np.call_method1(pyo3::intern!(py, "frombuffer"), (buffer, "uint8"))?;
    let mut raw = tensor_from_numpy(raw.cast::<PyUntypedArray>()?)?;
    if !(raw.data_ptr() as usize).is_multiple_of(dtype.itemsize()) {
        // Elements must be aligned to be read in place: a buffer inside a pickle may not be.
        raw = crate::tensor::copy_tensor(py, &raw)?;
    }
    let t = Tensor::from_parts(raw.storage().clone(), raw.byte_offset(), shape, None, dtype).py_err(py)?;
    if t.nbytes() != raw.nbytes() {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "a buffer of {} bytes cannot hold a tensor of shape {} and dtype {} ({} bytes)",
            raw.nbytes(),
            t.shape(),
            dtype,
            t.nbytes()
        )));
    }
    PyTensor::wrap(py, t.with_normalized_bools().py_err(py)?)
}
