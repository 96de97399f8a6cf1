//! `relaxvm profile`: where the time of one call goes (see `docs/profiling.md`).

use super::run::CallArgs;
use super::{io, CliError};
use clap::Args;
use relaxvm::profile::{ProfileReport, SortBy};
use relaxvm::VirtualMachine;
use std::path::PathBuf;
use std::sync::Arc;

/// The arguments of `relaxvm profile`.
#[derive(Debug, Args)]
pub struct ProfileArgs {
    #[command(flatten)]
    call: CallArgs,
    /// Run this many times and report the fastest run: the first pays one-time costs (caches,
    /// first-touch page faults, lazily resolved calls), which a single cold run would show as
    /// VM overhead.
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
    /// Also write the reported run as a Chrome trace (open it at ui.perfetto.dev).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Print CSV instead of the table.
    #[arg(long, conflicts_with = "json")]
    csv: bool,
    /// Print JSON instead of the table.
    #[arg(long)]
    json: bool,
}

/// Profiles the function and prints the report.
pub fn profile(a: ProfileArgs) -> Result<(), CliError> {
    if a.trace.as_deref().is_some_and(io::is_stdout) {
        return Err(CliError::new("--trace writes a file beside the report: give it a path (- is not one here)"));
    }
    let (exe, func, args) = a.call.prepare(&[a.trace.as_deref()])?;
    relaxvm_builtins::ensure_registered();
    let mut vm = VirtualMachine::new(Arc::new(exe))?;
    vm.set_profiling_enabled(true);
    let mut best: Option<ProfileReport> = None;
    let bar = super::progress::runs(u64::from(a.repeat), "profiling");
    for _ in 0..a.repeat {
        let report = vm.profile(&func, &args)?;
        if best.as_ref().is_none_or(|b| report.total_ns < b.total_ns) {
            best = Some(report);
        }
        if let Some(b) = &bar {
            b.inc(1);
        }
    }
    drop(bar); // cleared from the terminal before the report prints
    let report = best.expect("at least one run (--repeat is at least 1)");
    if let Some(path) = &a.trace {
        io::write(path, report.chrome_trace().as_bytes())?;
    }
    let text = if a.csv {
        report.csv()
    } else if a.json {
        report.json() + "\n"
    } else {
        report.table(SortBy::Total, None)
    };
    io::write_output(None, &text)
}
