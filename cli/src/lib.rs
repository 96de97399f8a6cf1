//! The `relaxvm` command-line tool: assemble, disassemble, inspect, verify, link and run
//! executables.
//!
//! Every command that reads an executable accepts the binary format (`.rvx`) or the text form
//! (`relaxvm dis` output, see `docs/text-format.md`). Failures print `error: MESSAGE` on one
//! line to standard error and exit with status 1 (2 for usage errors).
//!
//! The crate is the binary and what the Python package's `python -m relaxvm` runs
//! ([`main_from`]); it builds on the builder (assembler, linker, check), the builtins and the
//! TVM loader.
#![deny(missing_docs)]

mod error;
mod io;
mod profile;
mod progress;
mod run;
mod show;
mod trace;

pub use error::CliError;

// The builder's items and the .npy files, under the paths this crate's files name them by.
use relaxvm::npy;
use relaxvm_builder::{assemble, check_executable, AsmError, CheckError, LinkOptions};

use clap::{Args, Parser, Subcommand};
use relaxvm::error::counted;
use relaxvm::{FuncKind, VirtualMachine};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// Assemble, inspect, verify and run relaxvm executables.
///
/// PROG is an executable: a binary file (.rvx), its text form, or a model compiled by Apache
/// TVM 0.27 (a .so written by export_library, or a relax.VMExecutable from write_to_file).
/// Only run, profile and trace open a .so (run its code); dis, stats and verify read it as
/// data. A .rvx that references native libraries has them opened only with --allow-native
/// PATH or --allow-native-any (see docs/tvm.md, "Trust model").
#[derive(Debug, Parser)]
#[command(name = "relaxvm", version, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
    /// The largest input file to read, in bytes: a guard against reading a huge file (or a
    /// device) by mistake.
    #[arg(long, global = true, value_name = "BYTES", default_value_t = io::DEFAULT_MAX_INPUT)]
    max_input_size: u64,
    /// Memory-map binary executables instead of reading them: loading no longer reads the
    /// tensor data, but the file must not change while the command runs (trusted files only;
    /// truncating a mapped file crashes the reader).
    #[arg(long, global = true)]
    mmap: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Assemble the text form into a binary executable.
    ///
    /// Example: relaxvm asm prog.txt -o prog.rvx
    Asm(AsmArgs),
    /// Print an executable in the text form (or as Python that rebuilds it).
    Dis(DisArgs),
    /// Print a summary: constants, functions, packed functions, instruction count, the native
    /// libraries it references (path and hash) and, for a binary file, its format version and
    /// sections.
    Stats(StatsArgs),
    /// Check an executable: its checksums and structure, that every register is written before
    /// it is read on every path, which packed functions the builtins do not provide, and the
    /// native libraries it references (each listed with its path and hash; read as data, never
    /// opened; one missing or hashing differently fails the check).
    ///
    /// Prints "PROG: ok" and any warnings; exits with status 1 when the check fails.
    Verify(VerifyArgs),
    /// Run a function of an executable with the builtins and print its result.
    ///
    /// PROG may be a model compiled by Apache TVM (a .so written by export_library): its
    /// kernels are loaded from it (this runs the library's native code). The libraries a
    /// .rvx references are opened only with --allow-native or --allow-native-any.
    ///
    /// Without FUNC, runs the entry function (set by .entry or link --entry; main by default).
    /// Arguments: integers (5, -3), floats (2.5), .npy files (tensors) and strings; a prefix
    /// forces the type: int:5, float:2, bool:true, str:5, npy:PATH, shape:32,16. When the
    /// function has a signature, arguments are read as its parameter types say (a str
    /// parameter takes 5 as a string) and checked against it before anything runs.
    ///
    /// Examples: relaxvm run prog.rvx main x.npy 10 -o out.npy;
    /// relaxvm run model.so --input x.npy
    #[command(allow_negative_numbers = true)]
    Run(RunArgs),
    /// Run a function once and print where its time went, per builtin, kernel and bytecode
    /// function (see docs/profiling.md).
    ///
    /// Example: relaxvm profile model.so --function main --input x.npy --repeat 5 --trace t.json
    Profile(profile::ProfileArgs),
    /// Run a function once and print every call it made, in order, with the types and shapes
    /// of its values; save the copies as .npz, or compare them with a saved trace to find the
    /// first step whose result differs (see docs/profiling.md).
    ///
    /// Example: relaxvm trace model.so --input x.npy --save run.npz;
    /// relaxvm trace model.so --input x.npy --compare run.npz --rtol 1e-4
    Trace(trace::TraceArgs),
    /// Link executables into one: merge their function tables and constant pools, so that a
    /// function declared in one and defined in another becomes a direct call.
    ///
    /// Two definitions of one name are an error; a name no input defines stays a packed
    /// function for the host to provide.
    ///
    /// Example: relaxvm link a.rvx b.rvx -o out.rvx --entry main --drop-unreachable
    Link(LinkArgs),
}

#[derive(Debug, Args)]
struct AsmArgs {
    /// The text form to assemble.
    input: PathBuf,
    /// Where to write the binary executable [default: INPUT with the extension .rvx]; `-` is
    /// standard output.
    #[arg(short, long, value_name = "PROG")]
    output: Option<PathBuf>,
    /// Also run the check (registers written before read, unused inputs) and fail on errors.
    #[arg(long)]
    check: bool,
    /// Leave out debug information (instruction locations, and the parameter names of functions
    /// without a signature).
    #[arg(long)]
    strip: bool,
    /// Write this version of the binary format, for older readers [default: the current one].
    #[arg(long, value_name = "N")]
    format_version: Option<u32>,
}

#[derive(Debug, Args)]
struct DisArgs {
    /// The executable.
    input: PathBuf,
    /// Print Python source that rebuilds the executable with relaxvm's ExecBuilder.
    #[arg(long)]
    python: bool,
    /// Write to this file instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct StatsArgs {
    /// The executable.
    input: PathBuf,
}

#[derive(Debug, Args)]
struct VerifyArgs {
    /// The executable.
    input: PathBuf,
    /// Treat warnings as errors.
    #[arg(long)]
    strict: bool,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// The executable.
    input: PathBuf,
    /// The function to run [default: the entry function]. Name it to pass arguments.
    func: Option<String>,
    /// The function's arguments.
    args: Vec<String>,
    /// A .npy file passed as the next argument after ARGS (repeatable, in order).
    #[arg(long = "input", value_name = "FILE")]
    inputs: Vec<PathBuf>,
    /// Save the result: as .npy (a tensor, shape or scalar) or, for a path ending in .json, as
    /// JSON (any result). `-o -` writes the .npy to standard output instead of the printed
    /// result. An existing file is replaced; a fifo, device or directory is refused.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Print the result as JSON (tensors as {"dtype", "shape", "data"}) instead of as text.
    #[arg(long)]
    json: bool,
    /// Stop with an error after N steps, where a step is a call of a bytecode function or a
    /// backward jump (what every long or endless run repeats; straight-line code is not
    /// counted).
    #[arg(long, value_name = "N")]
    max_steps: Option<u64>,
    #[command(flatten)]
    native: run::NativeArgs,
}

#[derive(Debug, Args)]
struct LinkArgs {
    /// The executables to link (binary or text), in order.
    #[arg(required = true, num_args = 1..)]
    inputs: Vec<PathBuf>,
    /// Where to write the linked executable.
    #[arg(short, long, value_name = "PROG")]
    output: PathBuf,
    /// The entry function of the result [default: the one the inputs declare].
    #[arg(long, value_name = "FUNC")]
    entry: Option<String>,
    /// Leave out the functions the entry function cannot reach, and their constants.
    #[arg(long)]
    drop_unreachable: bool,
    /// With --drop-unreachable, also keep this function (and what it reaches); repeatable.
    #[arg(long, value_name = "FUNC")]
    keep: Vec<String>,
    /// Leave out debug information (instruction locations, and the parameter names of functions
    /// without a signature).
    #[arg(long)]
    strip: bool,
    /// Write this version of the binary format, for older readers [default: the current one].
    #[arg(long, value_name = "N")]
    format_version: Option<u32>,
}

/// Parses the process's arguments, runs the command and reports the outcome.
pub fn main() -> ExitCode {
    ExitCode::from(main_from(std::env::args_os()))
}

/// Runs the command line `args` (the program's name first), printing what the tool prints, and
/// returns its exit status: 0, 1 when the command failed, 2 for a usage error (as `main`; the
/// Python package's `relaxvm` script calls this).
pub fn main_from<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version are "errors" that print to stdout and succeed.
            let _ = e.print();
            return u8::try_from(e.exit_code()).unwrap_or(2);
        }
    };
    match run(cli) {
        Ok(()) => 0,
        Err(e) => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "error: {e}");
            1
        }
    }
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> Result<(), CliError> {
    io::set_max_input(cli.max_input_size);
    io::set_mmap(cli.mmap);
    // The builtins are registered before anything is assembled: a text program may call them
    // without declaring each with `.packed`.
    relaxvm_builtins::ensure_registered();
    match cli.command {
        Command::Asm(a) => asm(a),
        Command::Dis(a) => {
            if let Some(out) = &a.output {
                io::check_output(out, &[&a.input])?;
            }
            let exe = io::read_executable(&a.input, false, io::Native::Inspect)?;
            let text = if a.python { exe.try_as_python()? } else { exe.try_as_text()? };
            io::write_output(a.output.as_deref(), &text)
        }
        Command::Stats(a) => {
            let exe = io::read_executable(&a.input, false, io::Native::Inspect)?;
            let text = exe.stats() + &io::library_lines(&exe) + &io::file_info(&a.input)?.unwrap_or_default();
            io::write_output(None, &text)
        }
        Command::Verify(a) => verify(a),
        Command::Run(a) => run_function(a),
        Command::Profile(a) => profile::profile(a),
        Command::Trace(a) => trace::trace(a),
        Command::Link(a) => link(a),
    }
}

fn link(a: LinkArgs) -> Result<(), CliError> {
    io::check_output(&a.output, &a.inputs.iter().map(PathBuf::as_path).collect::<Vec<_>>())?;
    let exes =
        a.inputs.iter().map(|p| io::read_executable(p, false, io::Native::Inspect)).collect::<Result<Vec<_>, _>>()?;
    let names: Vec<String> = a.inputs.iter().map(|p| p.display().to_string()).collect();
    let modules: Vec<(&str, &relaxvm::Executable)> = names.iter().map(String::as_str).zip(&exes).collect();
    let options = crate::LinkOptions { entry: a.entry, drop_unreachable: a.drop_unreachable, keep: a.keep };
    let linked = relaxvm_builder::link(&modules, &options).map_err(|e| CliError::new(e.to_string()))?;
    io::write_executable(&linked, &a.output, a.strip, a.format_version)
}

fn asm(a: AsmArgs) -> Result<(), CliError> {
    let output = match a.output {
        Some(o) => o,
        None if a.input.extension().is_some_and(|e| e == "rvx") => {
            return Err(CliError::new(format!("{} already ends in .rvx: pass -o OUTPUT", a.input.display())))
        }
        None => a.input.with_extension("rvx"),
    };
    io::check_output(&output, &[&a.input])?;
    let text = io::read_text(&a.input)?;
    let exe = crate::assemble(&text).map_err(|e| io::asm_error(&a.input, &e))?;
    if a.check {
        for w in crate::check_executable(&exe)? {
            io::warn(w);
        }
    }
    io::write_executable(&exe, &output, a.strip, a.format_version)
}

fn verify(a: VerifyArgs) -> Result<(), CliError> {
    let exe = io::read_executable(&a.input, true, io::Native::Inspect)?;
    let mut warnings = crate::check_executable(&exe)?;
    let mut builtins = relaxvm::Registry::new();
    relaxvm_builtins::register_all(&mut builtins)?;
    // The native libraries the program calls into, read from the files as data (not run):
    // each is listed, and one that is missing or hashes differently fails the check.
    // A reference repeated in the file is one library: checked, listed and counted once.
    let mut checks = relaxvm_tvm::import::check_libraries(&exe, a.input.parent(), &io::read_options());
    let mut seen = std::collections::HashSet::new();
    checks.retain(|c| seen.insert(c.reference.clone()));
    let mut kernels = Vec::new();
    for check in &checks {
        if let relaxvm_tvm::import::LibraryState::Matches { kernels: k, .. } = &check.state {
            kernels.extend(k.iter().cloned());
        }
    }
    let known = |name: &str| builtins.contains(name) || kernels.iter().any(|k| k == name);
    for f in exe.funcs().iter().filter(|f| f.kind == FuncKind::Packed && !known(&f.name)) {
        let provider = if exe.libraries().is_empty() { "a builtin" } else { "a builtin or a kernel of the library" };
        warnings.push(format!("packed function {:?} is not {provider}: the host must register it", f.name));
    }
    let mut report = String::new();
    for check in &checks {
        report += &format!("{}: {check}\n", a.input.display());
    }
    io::write_output(None, &report)?;
    if let Some(bad) = checks.iter().find(|c| !c.is_ok()) {
        return Err(CliError::new(format!("{}: {bad}", a.input.display())));
    }
    for w in &warnings {
        io::warn(w);
    }
    if a.strict && !warnings.is_empty() {
        return Err(CliError::new(format!(
            "{}: {} with --strict",
            a.input.display(),
            counted(warnings.len(), "warning")
        )));
    }
    let native = match checks.len() {
        0 => String::new(),
        n => format!(
            ", calls into {} (run, profile and trace open them only with --allow-native)",
            counted(n, "native library")
        ),
    };
    let summary = format!(
        "{}: ok ({}, {}, {}, {}{native})\n",
        a.input.display(),
        counted(exe.bytecode_function_names().len(), "function"),
        counted(exe.packed_function_names().len(), "packed function"),
        counted(exe.constants().len(), "constant"),
        counted(exe.instrs().len(), "instruction")
    );
    io::write_output(None, &summary)
}

fn run_function(a: RunArgs) -> Result<(), CliError> {
    let (exe, func, args) =
        run::prepare_call(&a.input, a.func.as_deref(), &a.args, &a.inputs, &[a.output.as_deref()], &a.native)?;
    relaxvm_builtins::ensure_registered();
    let mut vm = VirtualMachine::new(Arc::new(exe))?;
    vm.limits_mut().step_budget = a.max_steps;
    let result = vm.invoke(&func, &args)?;
    // With -o -, standard output carries the saved result alone.
    if !a.output.as_deref().is_some_and(io::is_stdout) {
        let shown = if a.json { show::json(&result)?.to_string() } else { show::text(&result) };
        io::write_output(None, &(shown + "\n"))?;
    }
    match &a.output {
        Some(out) if out.extension().is_some_and(|e| e.eq_ignore_ascii_case("json")) => {
            io::write(out, (show::json(&result)?.to_string() + "\n").as_bytes())
        }
        Some(out) => run::save_result(&result, out),
        None => Ok(()),
    }
}
