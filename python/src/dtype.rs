//! `rx.DataType`: an element type, equal to (and hashing like) its name.

use pyo3::basic::CompareOp;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};
use relaxvm::DataType;

/// An element data type such as `DataType("float32")`.
#[pyclass(module = "relaxvm", name = "DataType", frozen)]
#[derive(Clone, Copy)]
pub struct PyDataType(pub DataType);

/// Parses a dtype-like object: `rx.DataType`, a name (`"float32"`, `"f32"`), or anything
/// `numpy.dtype` accepts (`np.float32`, `np.dtype("int64")`).
pub fn extract_dtype(ob: &Bound<'_, PyAny>) -> PyResult<DataType> {
    if let Ok(d) = ob.cast::<PyDataType>() {
        return Ok(d.get().0);
    }
    if let Ok(s) = ob.cast::<PyString>() {
        return s.to_cow()?.parse().map_err(|e: relaxvm::Error| PyValueError::new_err(e.to_string()));
    }
    if ob.is_none() {
        return Err(PyTypeError::new_err("expected a dtype, got None"));
    }
    let np = ob.py().import(pyo3::intern!(ob.py(), "numpy"))?;
    let name: String = np
        .call_method1(pyo3::intern!(ob.py(), "dtype"), (ob,))
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "cannot interpret {} as a dtype",
                ob.repr().map(|r| r.to_string()).unwrap_or_default()
            ))
        })?
        .getattr(pyo3::intern!(ob.py(), "name"))?
        .extract()?;
    name.parse().map_err(|e: relaxvm::Error| PyTypeError::new_err(e.to_string()))
}

#[pymethods]
impl PyDataType {
    /// `DataType("float32")`; accepts names, short names (`"f32"`) and numpy dtypes.
    #[new]
    fn new(dtype: &Bound<'_, PyAny>) -> PyResult<Self> {
        extract_dtype(dtype).map(PyDataType)
    }

    /// Width of one element in bits (`bool` counts 8).
    #[getter]
    fn bits(&self) -> u8 {
        self.0.bits()
    }

    /// Vector lanes (always 1).
    #[getter]
    fn lanes(&self) -> u16 {
        1
    }

    /// The DLPack type code (0 int, 1 uint, 2 float, 4 bfloat, 6 bool).
    #[getter]
    fn type_code(&self) -> u8 {
        self.0.dlpack_code()
    }

    /// Size of one element in bytes.
    #[getter]
    fn itemsize(&self) -> usize {
        self.0.itemsize()
    }

    /// The canonical name, e.g. `"float32"`.
    #[getter]
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn __str__(&self) -> &'static str {
        self.0.name()
    }

    fn __repr__(&self) -> String {
        format!("DataType({:?})", self.0.name())
    }

    fn __hash__(&self, py: Python<'_>) -> PyResult<isize> {
        PyString::new(py, self.0.name()).hash()
    }

    fn __richcmp__(&self, other: &Bound<'_, PyAny>, op: CompareOp) -> Py<PyAny> {
        let py = other.py();
        let equal = match other.cast::<PyDataType>() {
            Ok(d) => Some(d.get().0 == self.0),
            Err(_) => match other.cast::<PyString>() {
                Ok(s) => Some(s.to_cow().ok().and_then(|s| s.parse::<DataType>().ok()) == Some(self.0)),
                Err(_) => None,
            },
        };
        match (equal, op) {
            (Some(e), CompareOp::Eq) => crate::richcmp::py_bool(py, e),
            (Some(e), CompareOp::Ne) => crate::richcmp::py_bool(py, !e),
            _ => py.NotImplemented(),
        }
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let name = slf.get().0.name();
        Ok((slf.get_type().into_any(), PyTuple::new(slf.py(), [name])?))
    }
}
