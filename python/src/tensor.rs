//! `rx.Tensor` and its exchange with numpy.
//!
//! A numpy array passed to the VM is viewed in place when its layout allows, else copied
//! (`crate::from_numpy`). `Tensor.numpy()` returns an array viewing the tensor's
//! storage whose `base` is the tensor, so the memory lives as long as either side needs it.

pub(crate) mod export;

use crate::device::{extract_device, PyDevice};
use crate::dtype::extract_dtype;
use crate::errors::IntoPyResult;
use crate::from_numpy::tensor_from_numpy;
use crate::int_arg::extract_int;
use crate::richcmp::py_bool;
use crate::shape::extract_shape;
use numpy::npyffi::{self, npy_intp, NPY_ARRAY_WRITEABLE, PY_ARRAY_API};
use numpy::PyUntypedArray;
use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict, PyTuple};
use pyo3::PyTypeInfo;
use relaxvm::{DataType, Device, DeviceType, Tensor};
use std::ffi::{c_int, c_void};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, Ordering};

/// An n-dimensional array on a device (TVM's `NDArray`/`runtime.Tensor`).
///
/// One Python object per tensor: [`PyTensor::wrap`] hands back the live object already wrapping
/// a tensor (its address is kept in [`Tensor::binding_slot`]), so a tensor taken out of a tuple
/// `is` the one put in. Build objects only through `wrap`.
#[pyclass(module = "relaxvm", name = "Tensor", frozen)]
pub struct PyTensor(pub Tensor, Me);

/// The address of the Python object holding a [`PyTensor`], set once it exists; what its drop
/// compares with the tensor's slot before clearing it.
#[derive(Default)]
pub struct Me(AtomicPtr<c_void>);

impl Drop for PyTensor {
    fn drop(&mut self) {
        // Clear the slot only if it names this object: another live object may hold it.
        let me = self.1 .0.load(Ordering::Relaxed);
        if !me.is_null() {
            let _ = self.0.binding_slot().compare_exchange(me, null_mut(), Ordering::AcqRel, Ordering::Relaxed);
        }
    }
}

/// The numpy type number of a data type (`None` for bfloat16, which numpy lacks).
fn numpy_typenum(d: DataType) -> Option<c_int> {
    Some(match d {
        DataType::Bool => 0,
        DataType::I8 => 1,
        DataType::U8 => 2,
        DataType::I16 => 3,
        DataType::U16 => 4,
        DataType::I32 => 5,
        DataType::U32 => 6,
        DataType::I64 => 9,
        DataType::U64 => 10,
        DataType::F32 => 11,
        DataType::F64 => 12,
        DataType::F16 => 23,
        DataType::BF16 => return None,
    })
}

/// A contiguous tensor allocated by the runtime holding a copy of `bytes`.
fn tensor_from_raw(
    py: Python<'_>,
    bytes: &[u8],
    shape: relaxvm::Shape,
    dtype: DataType,
    device: Device,
) -> PyResult<Tensor> {
    let t = Tensor::zeros(shape, dtype, device).py_err(py)?;
    if bytes.len() != t.nbytes() {
        return Err(PyValueError::new_err(format!(
            "{} bytes cannot fill a tensor of shape {} and dtype {} ({} bytes)",
            bytes.len(),
            t.shape(),
            dtype,
            t.nbytes()
        )));
    }
    t.storage().write(0, bytes).py_err(py)?;
    Ok(t)
}

/// What writing a read-only tensor says (Python's writes: `t[...] = `, `copyfrom`, writable
/// buffers); the VM's builtins say the same through `relaxvm::Storage::write`.
pub(crate) const READ_ONLY: &str =
    "this tensor is read-only (a constant of an executable, or memory imported read-only through DLPack)";

/// A copy of `t` in fresh runtime-owned contiguous storage (one pass over the bytes).
pub fn copy_tensor(py: Python<'_>, t: &Tensor) -> PyResult<Tensor> {
    let storage = relaxvm::Storage::alloc_filled(t.nbytes(), t.device(), |dst| {
        t.with_contiguous_bytes(|src| dst.copy_from_slice(src))
    })
    .py_err(py)?;
    Tensor::from_parts(storage, 0, t.shape().clone(), None, t.dtype()).py_err(py)
}

/// A numpy array viewing `t`'s memory, with `base` set to `owner` (which keeps it alive).
fn numpy_view<'py>(py: Python<'py>, t: &Tensor, owner: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let typenum = numpy_typenum(t.dtype()).ok_or_else(|| {
        PyTypeError::new_err(format!("numpy has no {} dtype; convert the tensor to float32 first", t.dtype()))
    })?;
    let itemsize = t.dtype().itemsize() as npy_intp;
    let mut dims: Vec<npy_intp> = t.shape().iter().map(|d| *d as npy_intp).collect();
    let mut strides: Vec<npy_intp> = t.strides().iter().map(|s| *s as npy_intp * itemsize).collect();
    // SAFETY: the descriptor is a new reference that PyArray_NewFromDescr steals; `dims` and
    // `strides` have `ndim` entries and describe elements inside the tensor's storage (checked
    // when the tensor was made); numpy does not free `data` because we pass it in; the base
    // object (the tensor, which owns the storage) is a new reference that SetBaseObject steals,
    // so the memory outlives the array.
    unsafe {
        let descr = PY_ARRAY_API.PyArray_DescrFromType(py, typenum);
        if descr.is_null() {
            return Err(PyErr::fetch(py));
        }
        let subtype = <PyUntypedArray as PyTypeInfo>::type_object_raw(py);
        let arr = PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            subtype,
            descr,
            dims.len() as c_int,
            dims.as_mut_ptr(),
            strides.as_mut_ptr(),
            t.data_ptr().cast(),
            // Read-only memory (constants, read-only imports: docs/memory.md): numpy refuses writes.
            if t.storage().is_frozen() { 0 } else { NPY_ARRAY_WRITEABLE },
            std::ptr::null_mut(),
        );
        let arr = Bound::from_owned_ptr_or_err(py, arr)?;
        if PY_ARRAY_API.PyArray_SetBaseObject(py, arr.as_ptr().cast::<npyffi::PyArrayObject>(), owner.into_ptr()) != 0 {
            return Err(PyErr::fetch(py));
        }
        Ok(arr)
    }
}

impl PyTensor {
    /// The live Python object already wrapping `t` (a new reference), if there is one: what
    /// [`wrap`](Self::wrap) hands back before making one. Inline: a call's tensor result is
    /// most often a tensor Python holds already (an argument, a kept output).
    #[inline(always)]
    pub fn live_object<'py>(py: Python<'py>, t: &Tensor) -> Option<Bound<'py, PyTensor>> {
        let known = t.binding_slot().load(Ordering::Acquire);
        if known.is_null() {
            return None;
        }
        // SAFETY: a non-null slot holds the address of a live `Tensor` object wrapping this
        // tensor: `wrap` stores it once the object exists, and the object's drop (which runs
        // in tp_dealloc with the GIL held, before the memory is freed, and with no Python code
        // in between since the class has no weakrefs or finalizer) clears it. We hold the GIL
        // (`py`), so the object cannot be freed before the new reference is taken.
        Some(unsafe { Bound::from_borrowed_ptr(py, known.cast()).cast_into_unchecked() })
    }

    /// The Python object for `t`: the live one already wrapping it, else a new one.
    pub fn wrap(py: Python<'_>, t: Tensor) -> PyResult<Bound<'_, PyTensor>> {
        if let Some(known) = Self::live_object(py, &t) {
            return Ok(known);
        }
        let obj = Bound::new(py, PyTensor(t, Me::default()))?;
        let me = obj.as_ptr().cast::<c_void>();
        obj.get().1 .0.store(me, Ordering::Relaxed);
        obj.get().0.binding_slot().store(me, Ordering::Release);
        Ok(obj)
    }
}

#[pymethods]
impl PyTensor {
    /// The shape, as a tuple of ints.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.0.shape().dims())
    }

    /// The element type's name, e.g. `"float32"`.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.0.dtype().name()
    }

    /// The device the data lives on.
    #[getter]
    fn device(&self) -> PyDevice {
        PyDevice(self.0.device())
    }

    /// The number of dimensions.
    #[getter]
    fn ndim(&self) -> usize {
        self.0.ndim()
    }

    /// The number of elements.
    #[getter]
    fn size(&self) -> usize {
        self.0.numel()
    }

    /// The size of the elements in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.0.nbytes()
    }

    /// Strides in elements.
    #[getter]
    fn strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.0.strides())
    }

    /// True when the elements are laid out C-contiguously.
    #[getter]
    fn is_contiguous(&self) -> bool {
        self.0.is_contiguous()
    }

    /// A numpy array viewing this tensor's memory (no copy; the array keeps the tensor alive).
    fn numpy<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        numpy_view(slf.py(), &slf.get().0, slf.clone().into_any())
    }

    /// numpy's array protocol: `np.asarray(tensor)` views the tensor's memory.
    #[pyo3(signature = (dtype = None, copy = None))]
    fn __array__<'py>(
        slf: &Bound<'py, Self>,
        dtype: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let mut arr = numpy_view(py, &slf.get().0, slf.clone().into_any())?;
        if let Some(d) = dtype.filter(|d| !d.is_none()) {
            arr = arr.call_method1(pyo3::intern!(py, "astype"), (d,))?;
        } else if copy == Some(true) {
            arr = arr.call_method0(pyo3::intern!(py, "copy"))?;
        }
        Ok(arr)
    }

    /// Copies `source` (a tensor or array-like of the same shape) into this tensor in place.
    fn copyfrom<'py>(slf: &Bound<'py, Self>, source: &Bound<'py, PyAny>) -> PyResult<Bound<'py, Self>> {
        let py = slf.py();
        if slf.get().0.storage().is_frozen() {
            return Err(PyValueError::new_err(READ_ONLY));
        }
        let dst = numpy_view(py, &slf.get().0, slf.clone().into_any())?;
        let np = py.import(pyo3::intern!(py, "numpy"))?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("casting", "same_kind")?;
        np.call_method("copyto", (dst, source), Some(&kwargs))?;
        Ok(slf.clone())
    }

    /// DLPack export: a capsule owning a reference to this tensor.
    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        slf: &Bound<'py, Self>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if stream.is_some_and(|s| !s.is_none()) {
            // CPU tensors have no stream; -1 and None both mean "no synchronisation".
            let s: Option<i64> = stream.unwrap().extract().ok();
            if s != Some(-1) {
                return Err(PyBufferError::new_err("relaxvm CPU tensors take stream=None"));
            }
        }
        if let Some((ty, _)) = dl_device {
            if ty != 1 {
                return Err(PyBufferError::new_err(format!("cannot export to device type {ty}: only CPU (1)")));
            }
        }
        let versioned = max_version.is_some_and(|v| v.0 >= 1);
        // A read-only tensor (a constant, a read-only import) is exported with the read-only flag
        // to a DLPack 1.x consumer; a 0.x consumer cannot be told, so it gets a copy (numpy
        // refuses with BufferError instead; a copy keeps old consumers working and the memory
        // unchanged).
        let read_only_for_legacy = slf.get().0.storage().is_frozen() && !versioned;
        if read_only_for_legacy && copy == Some(false) {
            return Err(PyBufferError::new_err(
                "this tensor is read-only (a constant of an executable, or memory imported read-only through DLPack) and a DLPack 0.x consumer cannot be told so: allow a copy",
            ));
        }
        let t = if copy == Some(true) || read_only_for_legacy {
            copy_tensor(slf.py(), &slf.get().0)?
        } else {
            slf.get().0.clone()
        };
        crate::dlpack::to_capsule(slf.py(), t, versioned)
    }

    /// `(device_type, device_id)` for DLPack: `(1, 0)` is CPU 0.
    fn __dlpack_device__(&self) -> (i32, i32) {
        let d = self.0.device();
        (d.device_type.code(), d.device_id)
    }

    /// True when both tensors view the same memory block.
    fn same_storage(&self, other: &PyTensor) -> bool {
        self.0.shares_storage(&other.0)
    }

    fn __len__(&self) -> PyResult<usize> {
        match self.0.shape().first() {
            Some(d) => Ok(*d as usize),
            None => Err(PyTypeError::new_err("len() of a 0-d tensor")),
        }
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let t = &slf.get().0;
        Ok(format!(
            "<relaxvm.Tensor shape={} dtype={} device={}>\n{}",
            t.shape(),
            t.dtype(),
            PyDevice(t.device()).repr(),
            Self::__str__(slf)?
        ))
    }

    /// The elements as numpy prints them (as TVM's `str(tensor)` does); bfloat16, which numpy
    /// lacks, in relaxvm's own numpy-like layout.
    fn __str__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let t = &slf.get().0;
        if numpy_typenum(t.dtype()).is_none() {
            return Ok(t.to_string());
        }
        numpy_view(slf.py(), t, slf.clone().into_any())?.str().map(|s| s.to_string())
    }

    /// Pickling: protocol 5 passes the bytes as an out-of-band-capable `pickle.PickleBuffer`,
    /// older protocols copy them into the pickle.
    fn __reduce_ex__<'py>(
        slf: &Bound<'py, Self>,
        protocol: &Bound<'py, PyAny>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        export::reduce_ex(slf, extract_int(protocol, &|| "Tensor.__reduce_ex__ protocol".to_string())?)
    }

    /// The buffer protocol: `memoryview(t)` views the tensor's memory (read-only for a constant).
    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut pyo3::ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        // SAFETY: CPython passes a view for us to fill (get_buffer's contract).
        unsafe { export::get_buffer(&slf, view, flags) }
    }

    unsafe fn __releasebuffer__(&self, view: *mut pyo3::ffi::Py_buffer) {
        // SAFETY: CPython releases each view __getbuffer__ filled once.
        unsafe { export::release_buffer(view) }
    }

    /// numpy's array interface (version 3), for libraries that read it instead of `__array__`.
    #[getter]
    fn __array_interface__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
        export::array_interface(slf)
    }

    /// `t[index] = value`: numpy's assignment, in place (`t[:] = x` fills the whole tensor).
    fn __setitem__<'py>(slf: &Bound<'py, Self>, index: &Bound<'py, PyAny>, value: &Bound<'py, PyAny>) -> PyResult<()> {
        let py = slf.py();
        if slf.get().0.storage().is_frozen() {
            return Err(PyValueError::new_err(READ_ONLY));
        }
        let view = numpy_view(py, &slf.get().0, slf.clone().into_any())?;
        view.set_item(index, value)
    }

    /// Copies this tensor into `target`: a tensor of the same shape and dtype (returned), or a
    /// device (a new tensor there is returned), as TVM's `Tensor.copyto`.
    fn copyto<'py>(slf: &Bound<'py, Self>, target: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let src = &slf.get().0;
        if let Ok(dst) = target.cast::<PyTensor>() {
            let d = &dst.get().0;
            if d.shape() != src.shape() || d.dtype() != src.dtype() {
                return Err(PyValueError::new_err(format!(
                    "copyto: the target has shape {} and dtype {}, the tensor shape {} and dtype {}",
                    d.shape(),
                    d.dtype(),
                    src.shape(),
                    src.dtype()
                )));
            }
            PyTensor::copyfrom(dst, slf.as_any())?;
            return Ok(dst.clone().into_any());
        }
        if target.is_instance_of::<PyDevice>() {
            let device = extract_device(Some(target))?;
            return Ok(PyTensor::wrap(
                py,
                tensor_from_raw(py, &src.contiguous_bytes().py_err(py)?, src.shape().clone(), src.dtype(), device)?,
            )?
            .into_any());
        }
        Err(PyTypeError::new_err(format!("copyto takes a Tensor or a Device, not {}", target.get_type().name()?)))
    }

    /// The elements' bytes in C order (numpy's `tobytes`); the one way to read bfloat16 data.
    fn tobytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        // Straight from the storage into the new object (one copy), fallibly.
        self.0.with_contiguous_bytes(|b| crate::py_bytes::new_bytes(py, b)).py_err(py)?
    }

    /// The number of elements (TVM's `Tensor.numel()`).
    fn numel(&self) -> usize {
        self.0.numel()
    }

    /// True when both are the same tensor object (TVM's `same_as`; with relaxvm they are then
    /// also the same Python object).
    fn same_as(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<PyTensor>().is_ok_and(|o| o.get().0.ptr_eq(&self.0))
    }

    /// The address of the first element.
    fn data_ptr(&self) -> usize {
        self.0.data_ptr() as usize
    }

    fn __eq__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> Py<PyAny> {
        // The same object, as TVM's objects compare; use numpy for element-wise comparison.
        py_bool(slf.py(), slf.get().same_as(other))
    }

    fn __hash__(&self) -> isize {
        self.0.object_id() as isize
    }
}

/// `rx.tensor(data, dtype=None, device=None)`: a new tensor holding a copy of `data` (a tensor,
/// numpy array, or anything `numpy.asarray` accepts), optionally converted to `dtype`. A device
/// as the second argument is the device, as in TVM's `tvm.runtime.tensor(arr, dev)`.
#[pyfunction]
#[pyo3(signature = (data, dtype = None, device = None))]
pub fn tensor<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    dtype: Option<&Bound<'py, PyAny>>,
    device: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyTensor>> {
    let (dtype, device) = match dtype {
        Some(d) if d.is_instance_of::<PyDevice>() => {
            if device.is_some_and(|x| !x.is_none()) {
                return Err(PyTypeError::new_err("rx.tensor got a device twice (second argument and device=)"));
            }
            (None, Some(d))
        }
        other => (other, device),
    };
    let device = extract_device(device)?;
    let dtype = dtype.filter(|d| !d.is_none()).map(extract_dtype).transpose()?;
    if let Ok(t) = data.cast::<PyTensor>() {
        let t = &t.get().0;
        if dtype.is_none_or(|d| d == t.dtype()) {
            let copy = tensor_from_raw(py, &t.contiguous_bytes().py_err(py)?, t.shape().clone(), t.dtype(), device)?;
            return PyTensor::wrap(py, copy);
        }
    }
    let np = py.import(pyo3::intern!(py, "numpy"))?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("order", "C")?;
    match dtype {
        Some(DataType::BF16) => {
            return Err(PyTypeError::new_err("rx.tensor cannot make bfloat16 tensors from numpy data"))
        }
        Some(d) => kwargs.set_item("dtype", d.name())?,
        None => {}
    }
    let arr = np.call_method(pyo3::intern!(py, "asarray"), (data,), Some(&kwargs))?;
    let src = tensor_from_numpy(arr.cast::<PyUntypedArray>()?)?;
    let bytes = src.contiguous_bytes().py_err(py)?;
    PyTensor::wrap(py, tensor_from_raw(py, &bytes, src.shape().clone(), src.dtype(), device)?)
}

/// `rx.tensor_from_bytes(data, shape, dtype)`: a tensor from raw little-endian bytes.
#[pyfunction]
pub fn tensor_from_bytes<'py>(
    py: Python<'py>,
    data: &[u8],
    shape: &Bound<'py, PyAny>,
    dtype: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyTensor>> {
    let shape = extract_shape(shape)?;
    let dtype = extract_dtype(dtype)?;
    PyTensor::wrap(py, tensor_from_raw(py, data, shape, dtype, Device::cpu(0))?)
}

/// `rx.empty(shape, dtype="float32", device=None)`: a zero-filled tensor.
#[pyfunction]
#[pyo3(signature = (shape, dtype = None, device = None))]
pub fn empty<'py>(
    py: Python<'py>,
    shape: &Bound<'py, PyAny>,
    dtype: Option<&Bound<'py, PyAny>>,
    device: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyTensor>> {
    let shape = extract_shape(shape)?;
    let dtype = dtype.filter(|d| !d.is_none()).map(extract_dtype).transpose()?.unwrap_or(DataType::F32);
    PyTensor::wrap(py, Tensor::zeros(shape, dtype, extract_device(device)?).py_err(py)?)
}

/// Imports any object with `__dlpack__` (or a raw capsule) as a tensor, without copying; a
/// tensor the producer flags read-only is imported read-only (frozen).
pub fn from_dlpack_object(ob: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    let py = ob.py();
    if let Ok(cap) = ob.cast::<PyCapsule>() {
        return crate::dlpack::from_capsule(py, cap);
    }
    if let Ok(t) = ob.cast::<PyTensor>() {
        return Ok(t.get().0.clone());
    }
    if let Ok(dev) = ob.call_method0(pyo3::intern!(py, "__dlpack_device__")) {
        let (ty, _id): (i32, i32) = dev.extract()?;
        if ty != DeviceType::Cpu.code() {
            return Err(PyBufferError::new_err(format!(
                "cannot import a tensor from device type {ty}: only CPU (1) is supported"
            )));
        }
    }
    let kwargs = PyDict::new(py);
    kwargs.set_item("max_version", (1, 0))?;
    let cap = match ob.call_method(pyo3::intern!(py, "__dlpack__"), (), Some(&kwargs)) {
        Ok(c) => c,
        Err(e) if e.is_instance_of::<PyTypeError>(py) => ob.call_method0(pyo3::intern!(py, "__dlpack__"))?,
        Err(e) => return Err(e),
    };
    crate::dlpack::from_capsule(
        py,
        cap.cast::<PyCapsule>().map_err(|_| PyTypeError::new_err("__dlpack__ did not return a capsule"))?,
    )
}

/// `rx.from_dlpack(x)`: a tensor sharing `x`'s memory through the DLPack protocol.
#[pyfunction]
pub fn from_dlpack<'py>(py: Python<'py>, x: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTensor>> {
    PyTensor::wrap(py, from_dlpack_object(x)?)
}
