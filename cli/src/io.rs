//! Executable files: the one place the CLI reads and writes them. A file is the binary format
//! (`.rvx`, recognised by its magic number), a model compiled by Apache TVM (a `.so` from
//! `export_library`, or a `relax.VMExecutable` from `write_to_file`), or the text form
//! `as_text()` prints.

use super::error::CliError;
use crate::{assemble, AsmError};
use relaxvm::format::{self, LoadOptions, NativeLibraries, SaveOptions};
use relaxvm::input_file::{self, ReadOptions};
use relaxvm::Executable;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The default of `--max-input-size`: the largest input file a command reads, in bytes.
pub const DEFAULT_MAX_INPUT: u64 = relaxvm::input_file::DEFAULT_MAX_INPUT;

static MAX_INPUT: AtomicU64 = AtomicU64::new(DEFAULT_MAX_INPUT);
static MMAP: AtomicBool = AtomicBool::new(false);

/// Memory-maps binary inputs instead of reading them (`--mmap`, for trusted files).
pub fn set_mmap(on: bool) {
    MMAP.store(on, Ordering::Relaxed);
}

/// Sets the input size limit for this process (`--max-input-size`).
pub fn set_max_input(bytes: u64) {
    MAX_INPUT.store(bytes, Ordering::Relaxed);
}

/// How every input is read: within the size limit (the CLI ends on Ctrl-C, so no poll hook).
pub fn read_options() -> ReadOptions {
    ReadOptions { max_bytes: MAX_INPUT.load(Ordering::Relaxed), poll: None }
}

/// Opens `path` as every input is opened ([`relaxvm::input_file::open`]: without blocking on
/// a fifo, a regular file within the input size limit, as its descriptor says).
pub fn open_input(path: &Path) -> Result<input_file::InputFile, CliError> {
    // The reader's messages name the file.
    input_file::open(path, MAX_INPUT.load(Ordering::Relaxed)).map_err(|e| CliError::new(e.to_string()))
}

/// The path that means standard output for `-o`.
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Refuses to write `output` when it is one of the `inputs` (say `asm x.txt -o x.txt`): the
/// command would destroy what it reads. Checked before anything is written.
pub fn check_output(output: &Path, inputs: &[&Path]) -> Result<(), CliError> {
    if is_stdout(output) {
        return Ok(());
    }
    // A fifo, a device or a directory is refused before the command runs.
    relaxvm::format::output_target(output).map_err(|e| CliError::new(e.to_string()))?;
    let Ok(out) = std::fs::metadata(output) else { return Ok(()) };
    for input in inputs {
        if std::fs::metadata(input).is_ok_and(|m| m.dev() == out.dev() && m.ino() == out.ino()) {
            return Err(CliError::new(format!(
                "{}: the output is the input file {}; write to another path",
                output.display(),
                input.display()
            )));
        }
    }
    Ok(())
}

/// Writes a warning to standard error (a closed stderr is not worth a crash).
pub fn warn(msg: impl std::fmt::Display) {
    let _ = writeln!(std::io::stderr(), "warning: {msg}");
}

/// How far to open an executable's native libraries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Native {
    /// Read the program only: no library is opened, so no native code runs (dis, stats, verify).
    Inspect,
    /// Open the libraries the program calls into, as far as the consent allows (run, profile,
    /// trace): a `.so` named on the command line is consent for itself; the libraries a `.rvx`
    /// references need `--allow-native`.
    Open(NativeLibraries),
}

/// Reads an executable from a binary file (read whole and every byte checked; with `--mmap`
/// memory-mapped, the metadata checked and, with `verify_data`, the tensor data too), a
/// TVM-compiled model, or a text file.
pub fn read_executable(path: &Path, verify_data: bool, native: Native) -> Result<Executable, CliError> {
    let located = |e: relaxvm::Error| CliError::new(format!("{}: {e}", path.display()));
    let file = open_input(path)?;
    let _spinner = super::progress::loading(path); // cleared when it drops, however this returns
    let head = head(file)?;
    let mut opts = match MMAP.load(Ordering::Relaxed) {
        // Mapped, data checked for verify.
        true => LoadOptions { verify_data_checksum: verify_data, ..LoadOptions::trusted_mmap() },
        false => LoadOptions::default(),
    };
    opts.read = read_options();
    if let Native::Open(consent) = &native {
        opts.native_libraries = consent.clone();
    }
    if head.starts_with(&format::MAGIC) {
        // The loader's errors already name the file.
        let exe = format::load_file_with(path, &opts).map_err(|e| CliError::new(e.to_string()))?;
        return match native {
            Native::Inspect => Ok(exe),
            Native::Open(_) => relaxvm_tvm::import::open_libraries(exe, path.parent(), &opts).map_err(located),
        };
    }
    if relaxvm_tvm::import::FileKind::sniff(&head, path).is_ok() {
        // The TVM reader names the file in its errors.
        let exe = match native {
            Native::Inspect => relaxvm_tvm::import::inspect_module_with(path, &opts),
            Native::Open(_) => relaxvm_tvm::import::load_module_with(path, &opts),
        };
        return exe.map_err(|e| CliError::new(e.to_string()));
    }
    let not_ours = |why: &str| CliError::new(format!("{}: not a relaxvm executable ({why})", path.display()));
    if path.extension().is_some_and(|e| e == "rvx") {
        return Err(not_ours("a .rvx file starts with the bytes 0x89 R V X"));
    }
    let bytes = read(path)?;
    let text = std::str::from_utf8(&bytes)
        .ok()
        .filter(|t| !t.contains('\0'))
        .ok_or_else(|| not_ours("neither the binary format, a model compiled by TVM, nor UTF-8 text"))?;
    assemble(text).map_err(|e| asm_error(path, &e))
}

/// The first eight bytes of the file (fewer when it is shorter): enough for every magic number.
fn head(file: input_file::InputFile) -> Result<Vec<u8>, CliError> {
    file.head(8).map_err(|e| CliError::new(e.to_string()))
}

/// True when the file starts with the binary format's magic number.
fn is_binary(path: &Path) -> Result<bool, CliError> {
    Ok(head(open_input(path)?)?.starts_with(&format::MAGIC))
}

/// An assembler error prefixed with the file: `prog.txt:3:5: expected ...`.
pub fn asm_error(path: &Path, e: &AsmError) -> CliError {
    if e.line == 0 {
        CliError::new(format!("{}: {e}", path.display()))
    } else {
        CliError::new(format!("{}:{e}", path.display()))
    }
}

/// The header and sections of a binary file, for `stats`; `None` for the text form.
pub fn file_info(path: &Path) -> Result<Option<String>, CliError> {
    if !is_binary(path)? {
        return Ok(None);
    }
    let bytes = read(path)?;
    let info = format::inspect(&bytes).map_err(|e| CliError::new(format!("{}: {e}", path.display())))?;
    let sections: Vec<String> = info
        .sections
        .iter()
        .map(|s| format!("{} ({} bytes)", s.name.unwrap_or("unknown"), s.data.end - s.data.start))
        .collect();
    Ok(Some(format!(
        "File: {} bytes, format version {}, written by {:?}\n  Sections (#{}): [{}]\n",
        bytes.len(),
        info.version,
        info.producer,
        sections.len(),
        sections.join(", ")
    )))
}

/// Reads a text file.
pub fn read_text(path: &Path) -> Result<String, CliError> {
    String::from_utf8(read(path)?).map_err(|e| {
        CliError::new(format!(
            "{}: expected UTF-8 text, found a byte that is not UTF-8 at offset {}",
            path.display(),
            e.utf8_error().valid_up_to()
        ))
    })
}

/// Writes `exe` to `path` in the binary format (atomically: a temporary file renamed over
/// `path`). `version` selects an older format version for older readers (warning when that
/// drops signatures or the entry function).
pub fn write_executable(
    exe: &Executable,
    path: &Path,
    strip_debug: bool,
    version: Option<u32>,
) -> Result<(), CliError> {
    let opts = SaveOptions { strip_debug, version: version.unwrap_or(format::CURRENT_VERSION), ..Default::default() };
    if opts.version < format::VERSION_3 && (exe.has_signatures() || exe.declared_entry().is_some()) {
        warn(format!(
            "format version {} has no place for signatures or the entry function: {} leaves them out",
            opts.version,
            path.display()
        ));
    }
    if is_stdout(path) {
        let bytes = format::try_save_to_bytes(exe, &opts)?;
        return write_stdout(&bytes);
    }
    format::save_file(exe, path, &opts).map_err(|e| CliError::new(format!("{}: {e}", path.display())))
}

/// Writes `data` to `path` (atomically), or to standard output without a path. A closed
/// standard output (`relaxvm dis x | head -1`) ends the output quietly, as `cat` and ripgrep
/// do; any other failure (a full disk) is an error.
pub fn write_output(path: Option<&Path>, data: &str) -> Result<(), CliError> {
    match path {
        Some(p) => write(p, data.as_bytes()),
        None => write_stdout(data.as_bytes()),
    }
}

/// Writes `data` to standard output; a closed one ends the output quietly.
fn write_stdout(data: &[u8]) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    match out.write_all(data).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(CliError::new(format!("standard output: {e}"))),
        _ => Ok(()),
    }
}

/// Reads an input file whole ([`relaxvm::input_file::read`]: a regular file within the input
/// size limit).
pub fn read(path: &Path) -> Result<Vec<u8>, CliError> {
    input_file::read(path, &read_options()).map_err(|e| CliError::new(e.to_string()))
}

/// Writes `data` to `path` atomically ([`relaxvm::format::write_atomically`]), so a failure
/// (a full disk, Ctrl-C) never leaves half a file and a fifo, a device or a directory at
/// `path` is refused; `-` is standard output, written as a stream.
pub fn write(path: &Path, data: &[u8]) -> Result<(), CliError> {
    if is_stdout(path) {
        return write_stdout(data);
    }
    // The writer's errors name the path already (and a link's target).
    relaxvm::format::write_atomically(path, |out| out.write_all(data)).map_err(|e| CliError::new(e.to_string()))
}

/// The libraries an executable references, one line each (path and hash), for `stats`.
pub fn library_lines(exe: &Executable) -> String {
    let libs = exe.libraries();
    if libs.is_empty() {
        return String::new();
    }
    let mut out = "  Library references (opened only by run, profile and trace, with --allow-native):\n".to_string();
    for lib in libs {
        out += &format!("    {:?} XXH3-64 {:#018x}\n", lib.reference.path, lib.reference.content_hash);
    }
    out
}
