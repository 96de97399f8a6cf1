//! `relaxvm trace`: every call of one run, with copies of its values (see `docs/profiling.md`).

use super::run::CallArgs;
use super::{io, CliError};
use clap::Args;
use relaxvm::trace::{Tolerance, Trace, TraceOptions, DEFAULT_MAX_BYTES};
use relaxvm::VirtualMachine;
use std::path::PathBuf;
use std::sync::Arc;

/// The arguments of `relaxvm trace`.
#[derive(Debug, Args)]
pub struct TraceArgs {
    #[command(flatten)]
    call: CallArgs,
    /// Keep at most this many bytes of copied values; older values are dropped past it.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_BYTES)]
    max_bytes: usize,
    /// Write the trace as a numpy .npz file (rx.Trace.load reads it).
    #[arg(long, value_name = "FILE")]
    save: Option<PathBuf>,
    /// Compare with a trace saved before: print the first step whose result differs and exit
    /// with status 1, or say that none does.
    #[arg(long, value_name = "FILE")]
    compare: Option<PathBuf>,
    /// Relative tolerance of --compare.
    #[arg(long, default_value_t = Tolerance::default().rtol, requires = "compare")]
    rtol: f64,
    /// Absolute tolerance of --compare.
    #[arg(long, default_value_t = Tolerance::default().atol, requires = "compare")]
    atol: f64,
    /// Do not print the steps.
    #[arg(short, long)]
    quiet: bool,
}

/// Traces the function, prints its steps, and saves or compares the trace.
pub fn trace(a: TraceArgs) -> Result<(), CliError> {
    let tolerance = Tolerance::new(a.rtol, a.atol)?;
    if a.save.as_deref().is_some_and(io::is_stdout) {
        return Err(CliError::new("--save writes a .npz file: give it a path (- is not one here)"));
    }
    let (exe, func, args) = a.call.prepare(&[a.save.as_deref()])?;
    // Read the reference first: a bad file is reported before the run.
    let reference = a.compare.as_deref().map(Trace::load).transpose()?;
    relaxvm_builtins::ensure_registered();
    let mut vm = VirtualMachine::new(Arc::new(exe))?;
    let (trace, error) = match vm.trace(&func, &args, TraceOptions { max_bytes: a.max_bytes }) {
        Ok(t) => (t, None),
        Err(e) => (*e.trace, Some(e.error)),
    };
    if !a.quiet {
        io::write_output(None, &format!("{trace}\n"))?;
    }
    if let Some(path) = &a.save {
        trace.save(path)?;
    }
    if let Some(error) = error {
        return Err(error.into());
    }
    if let (Some(reference), Some(path)) = (reference, &a.compare) {
        match reference.first_difference(&trace, tolerance) {
            Some(d) => return Err(CliError::new(format!("differs from {}: {d}", path.display()))),
            None => io::write_output(None, &format!("no step differs from {}\n", path.display()))?,
        }
    }
    Ok(())
}
