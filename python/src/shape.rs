//! `rx.Shape`: a tuple of ints that the VM shares without copying.

use crate::int_arg::{extract_i64, extract_int};
use pyo3::basic::CompareOp;
use pyo3::exceptions::{PyIndexError, PyMemoryError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PySlice, PyTuple};
use relaxvm::Shape;

/// A shape tuple (TVM's `ShapeTuple`). It behaves like a tuple of ints: `len`, indexing,
/// slicing, iteration, and equality and hashing with tuples.
#[pyclass(module = "relaxvm", name = "Shape", frozen, sequence)]
#[derive(Clone)]
pub struct PyShape(pub Shape);

/// The most dimensions a shape read from Python may have. Shapes of real tensors have a few;
/// without a bound, `rx.Shape(range(2**62))` would try to allocate 32 EiB.
pub const MAX_SHAPE_DIMS: usize = 1 << 20;

/// Reads a shape from an `rx.Shape` or any iterable of ints.
pub fn extract_shape(ob: &Bound<'_, PyAny>) -> PyResult<Shape> {
    if let Ok(s) = ob.cast::<PyShape>() {
        return Ok(s.get().0.clone());
    }
    if let Ok(t) = ob.cast::<PyTuple>() {
        return collect_dims(ob.py(), t.iter().map(Ok));
    }
    if let Ok(l) = ob.cast::<PyList>() {
        return collect_dims(ob.py(), l.iter().map(Ok));
    }
    // int probe: an int where a sequence was expected gets a hint, whatever its size.
    if ob.extract::<i64>().is_ok() {
        return Err(PyTypeError::new_err("a shape is a sequence of ints, not an int: write (n,)"));
    }
    let iter = ob.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "expected a shape (a sequence of ints), got {}",
            ob.get_type().name().map(|n| n.to_string()).unwrap_or_default()
        ))
    })?;
    collect_dims(ob.py(), iter)
}

/// The ints of `items`, at most [`MAX_SHAPE_DIMS`] of them, polling for Ctrl-C as it goes.
fn collect_dims<'py>(py: Python<'py>, items: impl Iterator<Item = PyResult<Bound<'py, PyAny>>>) -> PyResult<Shape> {
    let mut dims: Vec<i64> = Vec::new();
    for item in items {
        if dims.len() == MAX_SHAPE_DIMS {
            return Err(PyValueError::new_err(format!("a shape may have at most {MAX_SHAPE_DIMS} dimensions")));
        }
        if dims.len() % 65536 == 65535 {
            py.check_signals()?;
        }
        dims.try_reserve(1).map_err(|_| PyMemoryError::new_err("out of memory reading a shape"))?;
        let at = dims.len();
        dims.push(extract_i64(&item?, &|| format!("shape dimension {at}"))?);
    }
    Ok(Shape::from(dims))
}

impl PyShape {
    fn tuple<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.0.dims())
    }
}

#[pymethods]
impl PyShape {
    /// `Shape([32, 16])`: a shape from a sequence of ints.
    #[new]
    #[pyo3(signature = (dims = None))]
    fn new(dims: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        match dims {
            None => Ok(PyShape(Shape::from(Vec::new()))),
            Some(d) => extract_shape(d).map(PyShape),
        }
    }

    fn __len__(&self) -> usize {
        self.0.len()
    }

    fn __getitem__<'py>(&self, py: Python<'py>, index: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        if let Ok(slice) = index.cast::<PySlice>() {
            let items = self.tuple(py)?.as_any().get_item(slice)?;
            return Ok(Bound::new(py, PyShape(extract_shape(&items)?))?.into_any());
        }
        let i = extract_int::<i64>(index, &|| "shape index".to_string())?;
        let n = self.0.len() as i64;
        let j = if i < 0 { i + n } else { i };
        if j < 0 || j >= n {
            return Err(PyIndexError::new_err(format!("shape index {i} out of range for {} dimensions", n)));
        }
        Ok(self.0[j as usize].into_pyobject(py)?.into_any())
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.tuple(py)?.try_iter()?.into_any())
    }

    fn __contains__(&self, item: &Bound<'_, PyAny>) -> bool {
        // int probe: what is not an int64 is in no shape (`in` never raises).
        item.extract::<i64>().is_ok_and(|d| self.0.contains(&d))
    }

    fn __hash__(&self, py: Python<'_>) -> PyResult<isize> {
        self.tuple(py)?.hash()
    }

    fn __richcmp__(&self, other: &Bound<'_, PyAny>, op: CompareOp) -> PyResult<Py<PyAny>> {
        let py = other.py();
        let other_dims: Option<Vec<i64>> = if let Ok(s) = other.cast::<PyShape>() {
            Some(s.get().0.to_vec())
        } else if other.is_instance_of::<PyTuple>() {
            other.extract::<Vec<i64>>().ok()
        } else {
            None
        };
        let Some(o) = other_dims else {
            return Ok(py.NotImplemented());
        };
        let ord = self.0.dims().cmp(&o[..]);
        Ok(crate::richcmp::py_bool(py, op.matches(ord)))
    }

    /// The dimensions as a plain tuple.
    fn to_tuple<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        self.tuple(py)
    }

    /// The number of elements a tensor of this shape holds.
    #[getter]
    fn numel(&self) -> Option<usize> {
        self.0.numel()
    }

    fn __repr__(&self) -> String {
        format!("Shape({:?})", self.0.dims())
    }

    fn __str__(&self) -> String {
        self.0.to_string()
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let list = PyList::new(slf.py(), slf.get().0.dims())?;
        Ok((slf.get_type().into_any(), PyTuple::new(slf.py(), [list])?))
    }
}
