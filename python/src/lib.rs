//! Python bindings of relaxvm: the private module `relaxvm._relaxvm`, re-exported by the
//! `relaxvm` package. One file per concept; this file only lists them.

mod builder;
mod call_args;
mod cli;
mod convert;
mod device;
mod dlpack;
mod dtype;
mod errors;
mod executable;
mod from_numpy;
mod gil;
mod int_arg;
mod kept_call;
mod link;
mod profile;
mod py_bytes;
mod recent_arrays;
mod registry;
mod richcmp;
mod shape;
mod signals;
mod signature;
mod small_int;
mod stdout;
mod tensor;
mod testing;
mod timing;
mod trace;
mod type_text;
mod vm;
mod vm_function;
mod vm_lock;

// CPython's vectorcall entry of a VM function, by its short path.
use vm_function::vectorcall;

use pyo3::prelude::*;

// The module relies on the GIL (tensor identity, see `tensor::PyTensor::wrap`; the VM lock):
// a free-threaded interpreter re-enables the GIL when it imports the module.
#[pymodule(gil_used = true)]
fn _relaxvm(m: &Bound<'_, PyModule>) -> PyResult<()> {
    relaxvm_builtins::ensure_registered();
    signals::note_main_thread();
    // KeyboardInterrupt and SystemExit raised in a callback from a kernel reach the caller as
    // themselves, as from callbacks the VM calls directly.
    relaxvm_tvm::ffi::raised::pass_through(errors::passes_through_kernels);
    // Ctrl-C during a parallel kernel's launch ends the waits for the VMs the main thread holds.
    relaxvm_tvm::ffi::pool::on_interrupted_launch(vm_lock::interrupted_launch);
    stdout::install();
    // The Rust crates' diagnostics (the log crate) go to Python's logging, under loggers named
    // after the Rust modules ("relaxvm_tvm.ffi.kernel", ...). Levels are asked of Python each
    // time (no cache), so logging configured later applies; the log calls are off hot paths.
    if let Ok(logger) = pyo3_log::Logger::new(m.py(), pyo3_log::Caching::Nothing) {
        let _ = logger.install();
    }
    small_int::init(m.py())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    m.add_class::<builder::PyArg>()?;
    m.add_class::<builder::PyLocation>()?;
    m.add_class::<builder::FunctionScope>()?;
    m.add_class::<builder::PyExecBuilder>()?;
    m.add_class::<convert::PyClosure>()?;
    m.add_class::<convert::PyOpaque>()?;
    m.add_class::<device::PyDevice>()?;
    m.add_class::<dtype::PyDataType>()?;
    m.add_class::<executable::PyExecutable>()?;
    m.add_class::<shape::PyShape>()?;
    m.add_class::<tensor::PyTensor>()?;
    m.add_class::<profile::PyProfileReport>()?;
    m.add_class::<profile::PyProfileRow>()?;
    m.add_class::<trace::PyTrace>()?;
    m.add_class::<trace::PyTraceStep>()?;
    m.add_class::<trace::PyTraceDifference>()?;
    m.add_class::<vm::PyVirtualMachine>()?;
    m.add_class::<vm_function::PyVmFunction>()?;
    m.add_class::<timing::BenchmarkResult>()?;
    m.add_class::<timing::TimeEvaluator>()?;
    m.add_function(wrap_pyfunction!(device::cpu, m)?)?;
    m.add_function(wrap_pyfunction!(device::device, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::tensor, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::tensor_from_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::export::_tensor_from_buffer, m)?)?;
    m.add_function(wrap_pyfunction!(registry::_registered_python_func, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::empty, m)?)?;
    m.add_function(wrap_pyfunction!(recent_arrays::clear_array_cache, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::from_dlpack, m)?)?;
    m.add_function(wrap_pyfunction!(executable::load_executable, m)?)?;
    m.add_function(wrap_pyfunction!(executable::load_module, m)?)?;
    m.add_function(wrap_pyfunction!(link::link, m)?)?;
    m.add_function(wrap_pyfunction!(registry::register_func, m)?)?;
    m.add_function(wrap_pyfunction!(registry::get_global_func, m)?)?;
    m.add_function(wrap_pyfunction!(registry::list_global_func_names, m)?)?;
    m.add_function(wrap_pyfunction!(registry::remove_global_func, m)?)?;
    m.add_function(wrap_pyfunction!(testing::_register_panicking_func, m)?)?;
    m.add_function(wrap_pyfunction!(testing::_keeps_gil_next, m)?)?;
    m.add_function(wrap_pyfunction!(testing::_note_short_call, m)?)?;
    m.add_function(wrap_pyfunction!(signature::_is_plain_name, m)?)?;
    m.add_function(wrap_pyfunction!(type_text::_type_text, m)?)?;
    m.add_function(wrap_pyfunction!(type_text::_signature_text, m)?)?;
    m.add_function(wrap_pyfunction!(cli::_cli_main, m)?)?;
    Ok(())
}
