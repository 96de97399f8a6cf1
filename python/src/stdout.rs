//! `vm.builtin.print` from Python writes through `sys.stdout`, as Python's `print` does, so
//! Jupyter, `contextlib.redirect_stdout` and pytest's capture see it.

use pyo3::prelude::*;
use std::sync::Arc;

/// Installs the sink (see `relaxvm_builtins::output`).
pub fn install() {
    relaxvm_builtins::output::set_sink(Some(Arc::new(write_line)));
}

/// Writes `line` and a newline to `sys.stdout` (nothing when it is `None`, as `print` does).
fn write_line(line: &str) -> std::io::Result<()> {
    Python::attach(|py| -> PyResult<()> {
        let stdout = py.import("sys")?.getattr("stdout")?;
        if stdout.is_none() {
            return Ok(());
        }
        stdout.call_method1("write", (format!("{line}\n"),))?;
        Ok(())
    })
    .map_err(|e| std::io::Error::other(format!("sys.stdout: {e}")))
}
