//! `rx.Executable`: the immutable program a VM runs.

use crate::errors::IntoPyResult;
use crate::int_arg::extract_opt;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use relaxvm::format::{self, SaveOptions};
use relaxvm::Executable;
use std::path::PathBuf;
use std::sync::Arc;

/// An executable: function table, constant pool and bytecode. Build one with
/// `ExecBuilder.get()` or load one with `load_executable`.
#[pyclass(module = "relaxvm", name = "Executable", frozen)]
pub struct PyExecutable(pub Arc<Executable>);

#[pymethods]
impl PyExecutable {
    /// A summary: constants, bytecode functions, packed functions, instruction count.
    fn stats(&self) -> String {
        self.0.stats()
    }

    /// The text form, which the assembler can parse back.
    fn as_text<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::py_bytes::new_str(py, &self.0.try_as_text().py_err(py)?)
    }

    /// Python source that rebuilds this executable with `ExecBuilder` (its last line binds
    /// `ex = ib.get()`).
    fn as_python<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::py_bytes::new_str(py, &self.0.try_as_python().py_err(py)?)
    }

    /// Old TVM spelling of `as_text()`.
    fn astext<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::py_bytes::new_str(py, &self.0.try_as_text().py_err(py)?)
    }

    /// Old TVM spelling of `as_python()`.
    fn aspython(&self, py: Python<'_>) -> PyResult<String> {
        self.0.try_as_python().py_err(py)
    }

    /// Names of the bytecode functions, in table order.
    #[getter]
    fn function_names<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.0.bytecode_function_names())
    }

    /// Names of the packed functions the executable calls, in table order.
    #[getter]
    fn packed_function_names<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.0.packed_function_names())
    }

    /// The parameter names of bytecode function `name` (empty when it was built without them).
    fn param_names(&self, name: &str) -> PyResult<Vec<String>> {
        self.0.func(name).map(|f| f.param_names.clone()).ok_or_else(|| no_function(name))
    }

    /// The IREE reflection record of function `name`'s signature: `{"a": [...], "r": [...]}`
    /// with one entry per argument (e.g. `["ndarray", "f32", 2, "n", 16]`, `"i64"`,
    /// `["sdict", ["k", "i64"]]`) and the result; `None` when it has no signature. Unknown names
    /// raise `KeyError`.
    fn signature<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
        let sig = self.0.signature(name).py_err(py)?;
        sig.map(|s| crate::signature::reflection(py, s)).transpose()
    }

    /// The text form of function `name`'s signature, e.g. `(x: tensor<[n], f32>) -> f32`
    /// (`None` when it has none).
    fn signature_text(&self, py: Python<'_>, name: &str) -> PyResult<Option<String>> {
        Ok(self.0.signature(name).py_err(py)?.map(|s| s.to_string()))
    }

    /// The entry function: the one set when the executable was built or linked, else `main`
    /// when there is such a bytecode function, else `None`.
    #[getter]
    fn entry(&self) -> Option<&str> {
        self.0.entry()
    }

    /// The number of inputs of bytecode function `name`.
    fn num_inputs(&self, name: &str) -> PyResult<u32> {
        self.0.func(name).map(|f| f.num_args).ok_or_else(|| no_function(name))
    }

    /// The executable in the binary `.rvx` format (without locations and parameter names when
    /// `strip_debug`).
    #[pyo3(signature = (strip_debug = false))]
    fn save_to_bytes<'py>(&self, py: Python<'py>, strip_debug: bool) -> PyResult<Bound<'py, PyBytes>> {
        let exe = Arc::clone(&self.0);
        let opts = SaveOptions { strip_debug, ..Default::default() };
        let bytes = py.detach(|| format::try_save_to_bytes(&exe, &opts)).py_err(py)?;
        crate::py_bytes::new_bytes(py, &bytes)
    }

    /// Writes the binary format to `path` (replacing the file atomically).
    #[pyo3(signature = (path, strip_debug = false))]
    fn save(&self, py: Python<'_>, path: PathBuf, strip_debug: bool) -> PyResult<()> {
        let exe = Arc::clone(&self.0);
        let opts = SaveOptions { strip_debug, ..Default::default() };
        py.detach(|| format::save_file(&exe, &path, &opts)).py_err(py)
    }

    /// Pickling: the binary format, plus the import path of each Python function registered
    /// with `register_func` that the executable calls, so that loading it in another process
    /// registers them there (see `relaxvm._pickling`).
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let pickling = py.import("relaxvm._pickling")?;
        let bytes = self.save_to_bytes(py, false)?;
        let names: Vec<String> = self.0.packed_function_names().iter().map(|n| n.to_string()).collect();
        let refs = pickling.call_method1("function_refs", (names,))?;
        Ok((pickling.getattr("load")?, (bytes.into_any(), refs).into_pyobject(py)?))
    }

    /// TVM's `export_library`: writes relaxvm's binary format to `path` (whatever its suffix;
    /// `load_module` and `load_executable` read it back). relaxvm compiles nothing, so the
    /// compiler options must be left unset.
    #[pyo3(signature = (file_name, fcompile = None, addons = None, workspace_dir = None, **kwargs))]
    fn export_library(
        &self,
        py: Python<'_>,
        file_name: PathBuf,
        fcompile: Option<&Bound<'_, PyAny>>,
        addons: Option<&Bound<'_, PyAny>>,
        workspace_dir: Option<&Bound<'_, PyAny>>,
        kwargs: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<()> {
        let given = [("fcompile", fcompile), ("addons", addons), ("workspace_dir", workspace_dir)];
        if let Some((name, _)) = given.iter().find(|(_, v)| v.is_some_and(|v| !v.is_none())) {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "export_library: {name} does not apply: relaxvm writes its own binary format and compiles nothing"
            )));
        }
        if let Some(k) = kwargs.and_then(|k| k.keys().iter().next()) {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "export_library got an unexpected keyword argument {k} (compiler options do not apply to relaxvm)"
            )));
        }
        self.save(py, file_name, false)
    }

    /// TVM's module lookup for the functions an executable module exposes: `ex["as_text"]()`
    /// is `ex.as_text()` (also `as_python` and `stats`).
    fn __getitem__<'py>(slf: &Bound<'py, Self>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        match name {
            "as_text" | "as_python" | "stats" => slf.getattr(name),
            _ => Err(pyo3::exceptions::PyKeyError::new_err(format!(
                "an executable exposes as_text, as_python and stats, not {name:?}; run functions with VirtualMachine(ex)[name]"
            ))),
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "<relaxvm.Executable functions={:?} constants={} instructions={}>",
            self.0.bytecode_function_names(),
            self.0.constants().len(),
            self.0.instrs().len()
        )
    }
}

/// Loads an executable from a `.rvx` file or from bytes (any buffer), and, only when
/// `native_libraries` allows it, opens the native libraries it references (a model imported
/// from TVM keeps its kernels' `.so` by path and hash; opening one runs its code).
/// `native_libraries` is `None` (open none: an executable that references libraries is an
/// error naming them), a path or a list of paths (library files, or folders whose files are
/// allowed, not recursively), or `True` (any library the file references). Relative references
/// are looked for beside the file, or, for bytes, in the current directory. A file is read
/// into memory and every byte checked against its checksums, so nothing done to the file later
/// reaches the executable; `mmap=True` maps a trusted file instead (loading skips the tensor
/// data, but the file must not change while the executable lives). Files larger than
/// `max_input_size` bytes (16 GiB by default) are refused before reading; Ctrl-C stops a long
/// read with `KeyboardInterrupt`.
#[pyfunction]
#[pyo3(signature = (path_or_bytes, *, mmap = false, native_libraries = None, max_input_size = None))]
pub fn load_executable(
    py: Python<'_>,
    path_or_bytes: &Bound<'_, PyAny>,
    mmap: bool,
    native_libraries: Option<&Bound<'_, PyAny>>,
    max_input_size: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyExecutable> {
    let mut opts = if mmap { format::LoadOptions::trusted_mmap() } else { format::LoadOptions::default() };
    opts.read = read_options(extract_opt::<u64>(max_input_size, &|| "load_executable max_input_size".to_string())?);
    opts.native_libraries = consent(native_libraries)?;
    if let Some(path) = as_path(path_or_bytes)? {
        let exe = py.detach(|| relaxvm_tvm::import::load_executable_with(&path, &opts)).py_err(py)?;
        return Ok(PyExecutable(Arc::new(exe)));
    }
    if mmap {
        return Err(pyo3::exceptions::PyValueError::new_err("mmap=True needs a path, not bytes"));
    }
    let load = |bytes: &[u8]| {
        format::load_bytes_with(bytes, &opts).and_then(|e| relaxvm_tvm::import::open_libraries(e, None, &opts))
    };
    if let Ok(b) = path_or_bytes.cast::<PyBytes>() {
        let exe = load(b.as_bytes()).py_err(py)?;
        return Ok(PyExecutable(Arc::new(exe)));
    }
    // Any other buffer (bytearray, memoryview, a numpy array of bytes...): its bytes. Not
    // `bytes(x)`, which turns an int into that many zero bytes.
    let view = py.get_type::<pyo3::types::PyMemoryView>().call1((path_or_bytes,)).map_err(|_| {
        pyo3::exceptions::PyTypeError::new_err(format!(
            "load_executable expects a path (str or os.PathLike) or a bytes-like object, not {}",
            type_name(path_or_bytes)
        ))
    })?;
    let bytes = view.call_method0("tobytes")?;
    let exe = load(bytes.cast::<PyBytes>()?.as_bytes()).py_err(py)?;
    Ok(PyExecutable(Arc::new(exe)))
}

/// Loads a model compiled by Apache TVM 0.27: a shared library written by `export_library`
/// (program and kernels), or a `relax.VMExecutable` written by `write_to_file` (program only).
/// Opening a `.so` runs its native code, as TVM's `load_module` does: naming it here is the
/// consent to open that file (and only it). A `.rvx` loads as `load_executable` loads it,
/// opening the libraries it references only as `native_libraries` allows.
#[pyfunction]
#[pyo3(signature = (path, *, native_libraries = None, max_input_size = None))]
pub fn load_module(
    py: Python<'_>,
    path: &Bound<'_, PyAny>,
    native_libraries: Option<&Bound<'_, PyAny>>,
    max_input_size: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyExecutable> {
    let max_input_size = extract_opt::<u64>(max_input_size, &|| "load_module max_input_size".to_string())?;
    let path = as_path(path)?.ok_or_else(|| {
        pyo3::exceptions::PyTypeError::new_err(format!(
            "load_module expects a path (str or os.PathLike), not {}",
            type_name(path)
        ))
    })?;
    let opts = format::LoadOptions {
        read: read_options(max_input_size),
        native_libraries: consent(native_libraries)?,
        ..Default::default()
    };
    let exe = py.detach(|| relaxvm_tvm::import::load_module_with(&path, &opts)).py_err(py)?;
    Ok(PyExecutable(Arc::new(exe)))
}

/// A path from a `str` or an `os.PathLike` (not bytes: bytes are data here).
fn as_path(obj: &Bound<'_, PyAny>) -> PyResult<Option<PathBuf>> {
    if obj.is_instance_of::<pyo3::types::PyString>() || obj.hasattr("__fspath__")? {
        return Ok(Some(obj.extract::<PathBuf>()?));
    }
    Ok(None)
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "this object".into())
}

/// How the Python API reads files: the size limit, and Ctrl-C delivered between chunks.
fn read_options(max_input_size: Option<u64>) -> relaxvm::input_file::ReadOptions {
    relaxvm::input_file::ReadOptions {
        max_bytes: max_input_size.unwrap_or(relaxvm::input_file::DEFAULT_MAX_INPUT),
        poll: Some(Arc::new(crate::signals::deliver_signals)),
    }
}

/// The `native_libraries` keyword as the loader's consent: `None` (or `False`) refuses, `True`
/// allows any referenced library, a path or a list of paths allows those files and folders.
fn consent(arg: Option<&Bound<'_, PyAny>>) -> PyResult<format::NativeLibraries> {
    use format::NativeLibraries;
    let Some(arg) = arg.filter(|a| !a.is_none()) else { return Ok(NativeLibraries::Refuse) };
    if let Ok(b) = arg.cast::<pyo3::types::PyBool>() {
        return Ok(if b.is_true() { NativeLibraries::AnyReferenced } else { NativeLibraries::Refuse });
    }
    let bad = || {
        pyo3::exceptions::PyTypeError::new_err(format!(
            "native_libraries must be None, True, a path, or a list of paths (library files or folders), not {}",
            type_name(arg)
        ))
    };
    if let Some(p) = as_path(arg)? {
        return Ok(NativeLibraries::Allow(vec![p]));
    }
    if arg.is_instance_of::<pyo3::types::PyList>() || arg.is_instance_of::<pyo3::types::PyTuple>() {
        let mut paths = Vec::new();
        for item in arg.try_iter()? {
            paths.push(as_path(&item?)?.ok_or_else(bad)?);
        }
        return Ok(NativeLibraries::Allow(paths));
    }
    Err(bad())
}

/// The `KeyError` of a query about a bytecode function the executable does not have.
fn no_function(name: &str) -> PyErr {
    pyo3::exceptions::PyKeyError::new_err(format!("no function named {name:?}"))
}
