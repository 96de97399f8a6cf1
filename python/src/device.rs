//! `rx.Device` and `rx.cpu(n)`.

use crate::int_arg::extract_opt;
use pyo3::basic::CompareOp;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyInt, PyString, PyTuple};
use relaxvm::{Device, DeviceType};

/// A device: a type (DLPack code, `1` is CPU) and an id. `rx.cpu(0) == rx.cpu(0)`.
#[pyclass(module = "relaxvm", name = "Device", frozen)]
#[derive(Clone, Copy)]
pub struct PyDevice(pub Device);

fn parse_type(ob: &Bound<'_, PyAny>) -> PyResult<DeviceType> {
    if let Ok(s) = ob.cast::<PyString>() {
        return match &*s.to_cow()? {
            "cpu" | "llvm" | "c" => Ok(DeviceType::Cpu),
            other => Err(PyValueError::new_err(format!("unknown device type {other:?}: only \"cpu\" is available"))),
        };
    }
    if let Ok(i) = ob.cast::<PyInt>() {
        return DeviceType::from_code(i.extract()?).map_err(|e| PyValueError::new_err(e.to_string()));
    }
    Err(PyTypeError::new_err("device type must be a name such as \"cpu\" or a DLPack code"))
}

/// Reads a device-like value: `rx.Device`, `"cpu"`, `"cpu:1"`, or `None` (the default CPU).
pub fn extract_device(ob: Option<&Bound<'_, PyAny>>) -> PyResult<Device> {
    match ob {
        None => Ok(Device::cpu(0)),
        Some(o) if o.is_none() => Ok(Device::cpu(0)),
        Some(o) => {
            if let Ok(d) = o.cast::<PyDevice>() {
                return Ok(d.get().0);
            }
            if let Ok(s) = o.cast::<PyString>() {
                return s.to_cow()?.parse().map_err(|e: relaxvm::Error| PyValueError::new_err(e.to_string()));
            }
            Err(PyTypeError::new_err(format!("expected a device such as rx.cpu(0), got {}", o.get_type().name()?)))
        }
    }
}

impl PyDevice {
    /// `cpu(0)`.
    pub fn repr(&self) -> String {
        format!("{}({})", self.0.device_type.name(), self.0.device_id)
    }
}

#[pymethods]
impl PyDevice {
    /// `Device("cpu", 0)`, `Device(1, 0)` or `Device("cpu:0")`.
    #[new]
    #[pyo3(signature = (device_type, device_id = None))]
    fn new(device_type: &Bound<'_, PyAny>, device_id: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let device_id = extract_opt::<i32>(device_id, &|| "device id".to_string())?;
        if let (Ok(s), None) = (device_type.cast::<PyString>(), device_id) {
            if s.to_cow()?.contains(':') {
                return extract_device(Some(device_type)).map(PyDevice);
            }
        }
        let id = device_id.unwrap_or(0);
        check_id(id)?;
        Ok(PyDevice(Device { device_type: parse_type(device_type)?, device_id: id }))
    }

    /// The DLPack device type code (`1` for CPU).
    #[getter]
    fn device_type(&self) -> i32 {
        self.0.device_type.code()
    }

    /// The index among devices of this type.
    #[getter]
    fn device_id(&self) -> i32 {
        self.0.device_id
    }

    /// The index among devices of this type (tvm_ffi's name for `device_id`).
    #[getter]
    fn index(&self) -> i32 {
        self.0.device_id
    }

    /// The device type's name (`"cpu"`).
    #[getter]
    fn type_name(&self) -> &'static str {
        self.0.device_type.name()
    }

    /// `(device_type, device_id)`, as `__dlpack_device__` returns it.
    fn dlpack_device(&self) -> (i32, i32) {
        (self.0.device_type.code(), self.0.device_id)
    }

    /// The DLPack device type code (`1` for CPU), as tvm_ffi's `Device.dlpack_device_type()`.
    fn dlpack_device_type(&self) -> i32 {
        self.0.device_type.code()
    }

    fn __repr__(&self) -> String {
        self.repr()
    }

    fn __str__(&self) -> String {
        self.0.to_string()
    }

    fn __hash__(&self) -> isize {
        (self.0.device_type.code() as isize) * 1_000_003 + self.0.device_id as isize
    }

    fn __richcmp__(&self, other: &Bound<'_, PyAny>, op: CompareOp) -> Py<PyAny> {
        let py = other.py();
        match (other.cast::<PyDevice>(), op) {
            (Ok(d), CompareOp::Eq) => crate::richcmp::py_bool(py, d.get().0 == self.0),
            (Ok(d), CompareOp::Ne) => crate::richcmp::py_bool(py, d.get().0 != self.0),
            _ => py.NotImplemented(),
        }
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let d = slf.get().0;
        Ok((slf.get_type().into_any(), (d.device_type.code(), d.device_id).into_pyobject(slf.py())?))
    }
}

/// CPU device number `dev_id`.
#[pyfunction]
#[pyo3(signature = (dev_id = 0))]
pub fn cpu(dev_id: i32) -> PyResult<PyDevice> {
    check_id(dev_id)?;
    Ok(PyDevice(Device::cpu(dev_id)))
}

/// A device by type and id: `device("cpu", 0)`, `device("cpu:1")`.
#[pyfunction]
#[pyo3(signature = (dev_type, dev_id = None))]
pub fn device(dev_type: &Bound<'_, PyAny>, dev_id: Option<&Bound<'_, PyAny>>) -> PyResult<PyDevice> {
    PyDevice::new(dev_type, dev_id)
}

/// The refusal of a negative device id (the one check of `Device(...)` and `cpu(...)`).
fn check_id(id: i32) -> PyResult<()> {
    if id < 0 {
        return Err(PyValueError::new_err(format!("device id must be non-negative, got {id}")));
    }
    Ok(())
}
