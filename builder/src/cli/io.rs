//! Executable files: the one place the CLI reads and writes them. A file is either the binary
//! format (`.rvx`, recognised by its magic number) or the text form `as_text()` prints.

use super::error::CliError;
use crate::{assemble, AsmError};
use relaxvm::Executable;
use std::path::Path;

/// The first bytes of a binary executable (`relaxvm::format::MAGIC`).
const MAGIC: [u8; 4] = [0x89, b'R', b'V', b'X'];

/// Reads an executable from a binary or text file.
pub fn read_executable(path: &Path) -> Result<Executable, CliError> {
    let bytes = read(path)?;
    if bytes.starts_with(&MAGIC) {
        return decode_binary(&bytes).map_err(|e| CliError::new(format!("{}: {e}", path.display())));
    }
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| CliError::new(format!("{}: neither a binary executable nor UTF-8 text", path.display())))?;
    assemble(text).map_err(|e| asm_error(path, &e))
}

/// An assembler error prefixed with the file: `prog.txt:3:5: expected ...`.
pub fn asm_error(path: &Path, e: &AsmError) -> CliError {
    if e.line == 0 {
        CliError::new(format!("{}: {e}", path.display()))
    } else {
        CliError::new(format!("{}:{e}", path.display()))
    }
}

/// Reads a text file.
pub fn read_text(path: &Path) -> Result<String, CliError> {
    String::from_utf8(read(path)?).map_err(|_| CliError::new(format!("{}: not UTF-8 text", path.display())))
}

/// Writes `exe` to `path` in the binary format.
pub fn write_executable(exe: &Executable, path: &Path) -> Result<(), CliError> {
    let bytes = encode_binary(exe).map_err(|e| CliError::new(format!("{}: {e}", path.display())))?;
    write(path, &bytes)
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

fn decode_binary(_bytes: &[u8]) -> Result<Executable, String> {
    Err("this build cannot read binary executables yet (relaxvm::format is missing)".into())
}

fn encode_binary(_exe: &Executable) -> Result<Vec<u8>, String> {
    Err("this build cannot write binary executables yet (relaxvm::format is missing)".into())
}
