//! `python -m relaxvm` and the `relaxvm` console script: the command-line tool, compiled into
//! the extension so that a pip install has it.

use pyo3::prelude::*;
use std::ffi::OsString;

/// Runs the command line `argv` (the program's name first) and returns its exit status. The GIL
/// is released, and prints go to the process's standard output as the tool's own output does
/// (through `sys.stdout` they could come out after it).
#[pyfunction]
pub fn _cli_main(py: Python<'_>, argv: Vec<OsString>) -> u8 {
    let sink = relaxvm_builtins::output::set_sink(None);
    let status = py.detach(|| relaxvm_cli::main_from(argv));
    relaxvm_builtins::output::set_sink(sink);
    status
}
