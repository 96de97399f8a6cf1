//! The entry points: open a TVM-compiled model, or a relaxvm executable that references one.
//!
//! | file | what happens |
//! |---|---|
//! | a `.so` from `export_library` | the program is read from `__tvm_ffi__library_bin` in the file's bytes, then the library is validated and opened for its kernels |
//! | a standalone `relax.VMExecutable` (`write_to_file`) | the program alone; its kernels must come from a registry |
//! | a `.rvx` saved from an imported model | the program, and the libraries it references are opened again (by path, checked by hash) |
//!
//! [`inspect_module`] reads a `.so` without opening it, so `relaxvm dis`/`stats`/`verify` never
//! run a library's code.

use crate::ffi::{Library as NativeLib, KERNEL_PREFIX};
use crate::{elf, library_bin, vmexec};
use relaxvm::executable::Library;
use relaxvm::{Error, ErrorKind, Executable, LibraryRef, NativeLibrary, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The data symbol that holds the module tree in a library written by `export_library`.
pub const LIBRARY_BIN_SYMBOL: &str = "__tvm_ffi__library_bin";

/// What kind of file a path holds, from its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// An ELF shared library.
    Elf,
    /// A serialized `relax.VMExecutable`.
    VmExec,
    /// A relaxvm executable (`.rvx`).
    Relaxvm,
}

impl FileKind {
    /// The kind of a file that starts with `bytes`; an error naming what was found otherwise.
    pub fn sniff(bytes: &[u8], path: &Path) -> Result<FileKind> {
        if bytes.starts_with(b"\x7fELF") {
            Ok(FileKind::Elf)
        } else if bytes.starts_with(&vmexec::MAGIC.to_le_bytes()) {
            Ok(FileKind::VmExec)
        } else if bytes.starts_with(&relaxvm::format::MAGIC) {
            Ok(FileKind::Relaxvm)
        } else {
            let head: Vec<String> = bytes.iter().take(8).map(|b| format!("{b:02x}")).collect();
            Err(Error::format(format!(
                "{}: not an ELF shared library, a TVM relax.VMExecutable or a relaxvm executable (the file starts with bytes {})",
                path.display(),
                if head.is_empty() { "(empty file)".to_string() } else { head.join(" ") }
            )))
        }
    }
}

/// The 64-bit XXH3 hash relaxvm records for a library file.
pub fn content_hash(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// Reads the program of a TVM model (`.so` or `.vmexec`) without opening any library: the
/// executable references the `.so` (not loaded), which is what `dis`, `stats` and `verify` need.
pub fn inspect_module(path: impl AsRef<Path>) -> Result<Executable> {
    let path = path.as_ref();
    let bytes = read(path)?;
    match FileKind::sniff(&bytes, path)? {
        FileKind::Elf => {
            let exe = program_of_elf(&bytes, path)?;
            let reference = LibraryRef { path: absolute(path)?, content_hash: content_hash(&bytes) };
            Ok(exe.with_libraries(vec![Library { reference, loaded: None }]))
        }
        FileKind::VmExec => vmexec::read(&bytes).map_err(|e| in_file(path, e)),
        FileKind::Relaxvm => relaxvm::format::load_bytes(&bytes).map_err(|e| in_file(path, e)),
    }
}

/// Loads a TVM model: a `.so` written by `export_library` (program and kernels), or a
/// standalone `relax.VMExecutable` (program only: its kernels must be registered). Opening a
/// `.so` runs its code (its initializers), as TVM's loader does: open only libraries you trust.
pub fn load_module(path: impl AsRef<Path>) -> Result<Executable> {
    let path = path.as_ref();
    let bytes = read(path)?;
    match FileKind::sniff(&bytes, path)? {
        FileKind::Elf => {
            let exe = program_of_elf(&bytes, path)?;
            let lib = NativeLib::open(path)?;
            if lib.content_hash() != content_hash(&bytes) {
                return Err(Error::value(format!("{}: the file changed while it was being loaded", path.display())));
            }
            Ok(exe.with_libraries(vec![Library::opened(lib)]))
        }
        FileKind::VmExec => vmexec::read(&bytes).map_err(|e| in_file(path, e)),
        FileKind::Relaxvm => load_executable(path),
    }
}

/// Loads a relaxvm executable (read into memory, every byte checked) and opens the native
/// libraries it references: each by its recorded path, or, when that file does not exist, by
/// its file name in the executable's folder (so a model and its `.so` can move together). A
/// library whose bytes hash differently from the recorded hash is refused.
pub fn load_executable(path: impl AsRef<Path>) -> Result<Executable> {
    load_executable_with(path, &relaxvm::format::LoadOptions::default())
}

/// [`load_executable`] with load options (e.g. memory-mapping a trusted file).
pub fn load_executable_with(path: impl AsRef<Path>, opts: &relaxvm::format::LoadOptions) -> Result<Executable> {
    let path = path.as_ref();
    let exe = relaxvm::format::load_file_with(path, opts)?;
    open_libraries(exe, path.parent())
}

/// Opens the libraries `exe` references and not yet opened; relative paths and the fallback
/// look in `dir`.
pub fn open_libraries(exe: Executable, dir: Option<&Path>) -> Result<Executable> {
    if exe.libraries().iter().all(|l| l.loaded.is_some()) {
        return Ok(exe);
    }
    let mut libs = Vec::with_capacity(exe.libraries().len());
    for lib in exe.libraries() {
        if lib.loaded.is_some() {
            libs.push(lib.clone());
            continue;
        }
        let found = locate(&lib.reference, dir)?;
        let opened = NativeLib::open(&found)?;
        if opened.content_hash() != lib.reference.content_hash {
            return Err(Error::value(format!(
                "native library {}: its contents hash to {:#018x}, but the executable was saved with a library hashing to {:#018x} (recompiled or replaced since?)",
                found.display(),
                opened.content_hash(),
                lib.reference.content_hash
            )));
        }
        libs.push(Library { reference: lib.reference.clone(), loaded: Some(opened as Arc<dyn NativeLibrary>) });
    }
    Ok(exe.with_libraries(libs))
}

/// The names of the kernels the libraries `exe` references export, read from the files without
/// opening them (for `relaxvm verify`); each file must still hash as recorded.
pub fn library_kernels(exe: &Executable, dir: Option<&Path>) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for lib in exe.libraries() {
        let path = locate(&lib.reference, dir)?;
        let bytes = read(&path)?;
        if content_hash(&bytes) != lib.reference.content_hash {
            return Err(Error::value(format!(
                "native library {}: its contents hash differently from the library the executable was saved with",
                path.display()
            )));
        }
        elf::validate(&bytes).map_err(|e| in_file(&path, e))?;
        let exported = elf::exported_functions(&bytes).map_err(|e| in_file(&path, e))?;
        names.extend(
            exported
                .iter()
                .filter_map(|f| f.strip_prefix(KERNEL_PREFIX))
                .filter(|k| !k.starts_with('_'))
                .map(str::to_string),
        );
    }
    Ok(names)
}

fn locate(reference: &LibraryRef, dir: Option<&Path>) -> Result<PathBuf> {
    let recorded = Path::new(&reference.path);
    let mut tried = Vec::new();
    let primary = match dir {
        Some(d) if recorded.is_relative() => d.join(recorded),
        _ => recorded.to_path_buf(),
    };
    tried.push(primary.clone());
    if let (Some(d), Some(name)) = (dir, recorded.file_name()) {
        tried.push(d.join(name));
    }
    tried.iter().find(|p| p.is_file()).cloned().ok_or_else(|| {
        Error::value(format!(
            "the executable calls into native library {:?}, which was not found (looked at {})",
            reference.path,
            tried.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        ))
    })
}

fn program_of_elf(bytes: &[u8], path: &Path) -> Result<Executable> {
    let at = |e: Error| in_file(path, e);
    elf::validate(bytes).map_err(at)?;
    let blob = elf::exported_symbol_bytes(bytes, LIBRARY_BIN_SYMBOL).map_err(at)?.ok_or_else(|| {
        Error::format(format!(
            "{}: the library exports no {LIBRARY_BIN_SYMBOL} symbol; it is not a model written by TVM's export_library",
            path.display()
        ))
    })?;
    let modules = library_bin::modules(blob).map_err(at)?;
    let program = library_bin::vm_executable(&modules).map_err(at)?;
    vmexec::read(program).map_err(at)
}

/// `e` with the file's path in front of its message.
fn in_file(path: &Path, e: Error) -> Error {
    let p = path.display();
    match e.into_kind() {
        ErrorKind::Format(m) => Error::format(format!("{p}: {m}")),
        ErrorKind::Invalid(e) => e.within(p).into(),
        ErrorKind::Value(m) => Error::value(format!("{p}: {m}")),
        other => other.into(),
    }
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::value(format!("cannot read {}: {e}", path.display())))
}

fn absolute(path: &Path) -> Result<String> {
    let p = std::fs::canonicalize(path).map_err(|e| Error::value(format!("cannot resolve {}: {e}", path.display())))?;
    Ok(p.to_string_lossy().into_owned())
}
