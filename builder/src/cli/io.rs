//! Executable files: the one place the CLI reads and writes them. A file is the binary format
//! (`.rvx`, recognised by its magic number), a model compiled by Apache TVM (a `.so` from
//! `export_library`, or a `relax.VMExecutable` from `write_to_file`), or the text form
//! `as_text()` prints.

use super::error::CliError;
use crate::{assemble, AsmError};
use relaxvm::format::{self, LoadOptions, SaveOptions};
use relaxvm::Executable;
use std::io::Read;
use std::path::Path;

/// How far to open an executable's native libraries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Native {
    /// Read the program only: no library is opened, so no native code runs (dis, stats, verify).
    Inspect,
    /// Open the libraries the program calls into (run).
    Open,
}

/// Reads an executable from a binary file (memory-mapped, metadata checksum checked; with
/// `verify_data` the tensor-data checksum too), a TVM-compiled model, or a text file.
pub fn read_executable(path: &Path, verify_data: bool, native: Native) -> Result<Executable, CliError> {
    let located = |e: relaxvm::Error| CliError::new(format!("{}: {e}", path.display()));
    let head = head(path)?;
    if head.starts_with(&format::MAGIC) {
        let opts = LoadOptions { verify_checksum: true, verify_data_checksum: verify_data };
        let exe = format::load_file_with(path, &opts).map_err(located)?;
        return match native {
            Native::Inspect => Ok(exe),
            Native::Open => relaxvm_tvm::import::open_libraries(exe, path.parent()).map_err(located),
        };
    }
    if relaxvm_tvm::import::FileKind::sniff(&head, path).is_ok() {
        // The TVM reader names the file in its errors.
        let exe = match native {
            Native::Inspect => relaxvm_tvm::import::inspect_module(path),
            Native::Open => relaxvm_tvm::import::load_module(path),
        };
        return exe.map_err(|e| CliError::new(e.to_string()));
    }
    let bytes = read(path)?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| CliError::new(format!("{}: neither a binary executable nor UTF-8 text", path.display())))?;
    assemble(text).map_err(|e| asm_error(path, &e))
}

/// The first eight bytes of the file (fewer when it is shorter): enough for every magic number.
fn head(path: &Path) -> Result<Vec<u8>, CliError> {
    let mut head = Vec::with_capacity(8);
    std::fs::File::open(path)
        .and_then(|f| f.take(8).read_to_end(&mut head))
        .map_err(|e| CliError::new(format!("{}: {e}", path.display())))?;
    Ok(head)
}

/// True when the file starts with the binary format's magic number.
fn is_binary(path: &Path) -> Result<bool, CliError> {
    Ok(head(path)?.starts_with(&format::MAGIC))
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
    String::from_utf8(read(path)?).map_err(|_| CliError::new(format!("{}: not UTF-8 text", path.display())))
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
        eprintln!(
            "warning: format version {} has no place for signatures or the entry function: {} leaves them out",
            opts.version,
            path.display()
        );
    }
    format::save_file(exe, path, &opts).map_err(|e| CliError::new(format!("{}: {e}", path.display())))
}

/// Writes `data` to `path`, or to standard output without a path.
pub fn write_output(path: Option<&Path>, data: &str) -> Result<(), CliError> {
    match path {
        Some(p) => write(p, data.as_bytes()),
        None => {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            out.write_all(data.as_bytes()).and_then(|()| out.flush()).map_err(|e| CliError::new(format!("stdout: {e}")))
        }
    }
}

fn read(path: &Path) -> Result<Vec<u8>, CliError> {
    std::fs::read(path).map_err(|e| CliError::new(format!("{}: {e}", path.display())))
}

fn write(path: &Path, data: &[u8]) -> Result<(), CliError> {
    std::fs::write(path, data).map_err(|e| CliError::new(format!("{}: {e}", path.display())))
}
