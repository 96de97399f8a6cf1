//! Executable files: the one place the CLI reads and writes them. A file is either the binary
//! format (`.rvx`, recognised by its magic number) or the text form `as_text()` prints.

use super::error::CliError;
use crate::{assemble, AsmError};
use relaxvm::format::{self, LoadOptions, SaveOptions};
use relaxvm::Executable;
use std::io::Read;
use std::path::Path;

/// Reads an executable from a binary file (memory-mapped, metadata checksum checked; with
/// `verify_data` the tensor-data checksum too) or from a text file.
pub fn read_executable(path: &Path, verify_data: bool) -> Result<Executable, CliError> {
    let located = |e: relaxvm::Error| CliError::new(format!("{}: {e}", path.display()));
    if is_binary(path)? {
        let opts = LoadOptions { verify_checksum: true, verify_data_checksum: verify_data };
        return format::load_file_with(path, &opts).map_err(located);
    }
    let bytes = read(path)?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| CliError::new(format!("{}: neither a binary executable nor UTF-8 text", path.display())))?;
    assemble(text).map_err(|e| asm_error(path, &e))
}

/// True when the file starts with the binary format's magic number.
fn is_binary(path: &Path) -> Result<bool, CliError> {
    let mut head = Vec::with_capacity(format::MAGIC.len());
    std::fs::File::open(path)
        .and_then(|f| f.take(format::MAGIC.len() as u64).read_to_end(&mut head))
        .map_err(|e| CliError::new(format!("{}: {e}", path.display())))?;
    Ok(head == format::MAGIC)
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
