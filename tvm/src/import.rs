//! The entry points: open a TVM-compiled model, or a relaxvm executable that references one.
//!
//! | file | what happens |
//! |---|---|
//! | a `.so` from `export_library` | the program is read from `__tvm_ffi__library_bin` in the file's bytes, then the library is validated and opened for its kernels |
//! | a standalone `relax.VMExecutable` (`write_to_file`) | the program alone; its kernels must come from a registry |
//! | a `.rvx` saved from an imported model | the program; the libraries it references are opened again (by path, checked by hash) only with the caller's consent ([`NativeLibraries`]) |
//!
//! [`inspect_module`] reads a `.so` without opening it, so `relaxvm dis`/`stats`/`verify` never
//! run a library's code. Every file is read through [`relaxvm::input_file`] (regular files
//! within a size limit). The trust model is in `docs/tvm.md`.

use crate::ffi::{Library as NativeLib, KERNEL_PREFIX};
use crate::{elf, library_bin, vmexec};
use relaxvm::executable::Library;
use relaxvm::format::{LoadOptions, NativeLibraries};
use relaxvm::input_file::ReadOptions;
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
    inspect_module_with(path, &LoadOptions::default())
}

/// [`inspect_module`] with load options (the read limits; a `.rvx` is read as `opts` says).
/// [`LoadOptions::native_libraries`] does not apply: nothing is opened.
pub fn inspect_module_with(path: impl AsRef<Path>, opts: &LoadOptions) -> Result<Executable> {
    let path = path.as_ref();
    if FileKind::sniff(&head(path, &opts.read)?, path)? == FileKind::Relaxvm {
        return relaxvm::format::load_file_with(path, opts);
    }
    let bytes = read(path, &opts.read)?;
    match FileKind::sniff(&bytes, path)? {
        FileKind::Elf => {
            let exe = program_of_elf(&bytes, path)?;
            let reference = LibraryRef { path: absolute(path)?, content_hash: content_hash(&bytes) };
            Ok(exe.with_libraries(vec![Library { reference, loaded: None }]))
        }
        FileKind::VmExec => vmexec::read(&bytes).map_err(|e| in_file(path, e)),
        FileKind::Relaxvm => relaxvm::format::load_bytes_with(&bytes, opts).map_err(|e| in_file(path, e)),
    }
}

/// Loads a TVM model: a `.so` written by `export_library` (program and kernels), or a
/// standalone `relax.VMExecutable` (program only: its kernels must be registered). Opening a
/// `.so` runs its code (its initializers), as TVM's loader does: naming a `.so` here is the
/// consent to open that file, and only that file. A `.rvx` is loaded as [`load_executable`]
/// loads it, so it opens the libraries it references only with consent, which this function
/// (default options) does not give: see [`load_module_with`].
pub fn load_module(path: impl AsRef<Path>) -> Result<Executable> {
    load_module_with(path, &LoadOptions::default())
}

/// [`load_module`] with load options: the read limits for every file, and, for a `.rvx`, which
/// libraries it may open ([`LoadOptions::native_libraries`]).
pub fn load_module_with(path: impl AsRef<Path>, opts: &LoadOptions) -> Result<Executable> {
    let path = path.as_ref();
    if FileKind::sniff(&head(path, &opts.read)?, path)? == FileKind::Relaxvm {
        return load_executable_with(path, opts);
    }
    let bytes = read(path, &opts.read)?;
    match FileKind::sniff(&bytes, path)? {
        FileKind::Elf => {
            let exe = program_of_elf(&bytes, path)?;
            // The library is loaded from the bytes just read (and validated), under its real
            // path, which a saved executable records.
            let real = std::fs::canonicalize(path)
                .map_err(|e| Error::value(format!("cannot resolve {}: {e}", path.display())))?;
            let lib = NativeLib::open_bytes(&real, &bytes)?;
            Ok(exe.with_libraries(vec![Library::opened(lib)]))
        }
        FileKind::VmExec => vmexec::read(&bytes).map_err(|e| in_file(path, e)),
        // Replaced since the first look: loaded as the kind it is now.
        FileKind::Relaxvm => load_executable_with(path, opts),
    }
}

/// Loads a relaxvm executable (read into memory, every byte checked) and, with the caller's
/// consent ([`LoadOptions::native_libraries`]; refused by default), opens the native libraries
/// it references; see [`open_libraries`].
pub fn load_executable(path: impl AsRef<Path>) -> Result<Executable> {
    load_executable_with(path, &LoadOptions::default())
}

/// [`load_executable`] with load options (e.g. memory-mapping a trusted file, or allowing
/// libraries).
pub fn load_executable_with(path: impl AsRef<Path>, opts: &LoadOptions) -> Result<Executable> {
    let path = path.as_ref();
    let exe = relaxvm::format::load_file_with(path, opts)?;
    open_libraries(exe, path.parent(), opts)
}

/// Opens the libraries `exe` references and not yet opened, as far as `opts.native_libraries`
/// consents. Each is found by its recorded path (a relative one in `dir`, or without `dir` in
/// the current directory), or, when that file does not exist, by its file name in `dir` (so a
/// model and its `.so` can move together). Every library is located, admitted by the consent,
/// read (`opts.read`) and checked against its recorded hash before any is opened: a refused,
/// missing or changed library leaves no library's code run. An opened library's reference then
/// records the real path it was opened from. Without consent, an executable
/// that references libraries is an error naming each (path and hash) and how to allow it.
pub fn open_libraries(exe: Executable, dir: Option<&Path>, opts: &LoadOptions) -> Result<Executable> {
    let pending: Vec<&LibraryRef> =
        exe.libraries().iter().filter(|l| l.loaded.is_none()).map(|l| &l.reference).collect();
    if pending.is_empty() {
        return Ok(exe);
    }
    if !opts.native_libraries.allows_any() {
        return Err(Error::value(format!(
            "the executable references {}: {}. Opening a native library runs its code, so relaxvm opens \
             one only when the caller allows it: in Python, load_executable(..., native_libraries=PATH or \
             [PATHS]) (files, or folders whose files are allowed) or native_libraries=True (any library the \
             file references); on the command line, --allow-native PATH or --allow-native-any",
            relaxvm::error::counted(pending.len(), "native library"),
            pending.iter().map(|r| describe(r)).collect::<Vec<_>>().join(", ")
        )));
    }
    let mut checked = Vec::with_capacity(pending.len());
    for reference in &pending {
        let found = locate(reference, dir)?;
        let admitted = opts
            .native_libraries
            .admits(&found)
            .map_err(|e| Error::value(format!("cannot resolve {}: {e}", found.display())))?;
        if !admitted {
            return Err(Error::value(format!(
                "native library {}, found at {}, is not among the allowed native libraries ({}); allow that \
                 file or its folder to open it",
                describe(reference),
                found.display(),
                allowed_list(&opts.native_libraries)
            )));
        }
        // The admitted real path is what is read (a link swapped afterwards changes nothing).
        let real = std::fs::canonicalize(&found)
            .map_err(|e| Error::value(format!("cannot resolve {}: {e}", found.display())))?;
        let bytes = read(&real, &opts.read)?;
        let hash = content_hash(&bytes);
        if hash != reference.content_hash {
            return Err(Error::value(format!(
                "native library {}: its contents hash to {hash:#018x}, but the executable was saved with a library hashing to {:#018x} (recompiled or replaced since?)",
                found.display(),
                reference.content_hash
            )));
        }
        checked.push((real, bytes));
    }
    let mut opened = checked.iter().map(|(real, bytes)| NativeLib::open_bytes(real, bytes));
    let libs = exe
        .libraries()
        .iter()
        .map(|lib| match &lib.loaded {
            Some(_) => Ok(lib.clone()),
            None => {
                let native = opened.next().expect("one checked file per pending library")?;
                // Saved again (or pickled), the executable names the file it was opened from.
                let reference = LibraryRef {
                    path: native.path().to_string_lossy().into_owned(),
                    content_hash: lib.reference.content_hash,
                };
                Ok(Library { reference, loaded: Some(native as Arc<dyn NativeLibrary>) })
            }
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(exe.with_libraries(libs))
}

/// A reference as messages show it: its path and hash.
fn describe(r: &LibraryRef) -> String {
    format!("{:?} (XXH3-64 {:#018x})", r.path, r.content_hash)
}

fn allowed_list(consent: &NativeLibraries) -> String {
    match consent {
        NativeLibraries::Allow(paths) => paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "),
        NativeLibraries::Refuse => "none".into(),
        NativeLibraries::AnyReferenced => "any".into(),
    }
}

/// What [`check_libraries`] found for one library reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LibraryState {
    /// A file with the recorded hash, and the kernels it exports (read from the file, not run).
    Matches {
        /// Where it was found.
        path: PathBuf,
        /// The kernels it exports.
        kernels: Vec<String>,
    },
    /// A file whose contents hash differently.
    HashDiffers {
        /// Where it was found.
        path: PathBuf,
        /// Its hash.
        hash: u64,
    },
    /// No file at the places looked at.
    NotFound {
        /// The places looked at.
        tried: Vec<PathBuf>,
    },
    /// A file that could not be read or is not a library relaxvm can load.
    Unusable {
        /// Where it was found.
        path: PathBuf,
        /// Why.
        error: String,
    },
}

/// One library reference and what [`check_libraries`] found for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LibraryCheck {
    /// The reference as recorded.
    pub reference: LibraryRef,
    /// What was found.
    pub state: LibraryState,
}

impl LibraryCheck {
    /// Whether the library was found with its recorded hash.
    pub fn is_ok(&self) -> bool {
        matches!(self.state, LibraryState::Matches { .. })
    }
}

impl std::fmt::Display for LibraryCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "native library {}: ", describe(&self.reference))?;
        match &self.state {
            LibraryState::Matches { path, kernels } => write!(
                f,
                "found at {}, hash matches, {}",
                path.display(),
                relaxvm::error::counted(kernels.len(), "kernel")
            ),
            LibraryState::HashDiffers { path, hash } => {
                write!(f, "found at {}, but its contents hash to {hash:#018x}", path.display())
            }
            LibraryState::NotFound { tried } => write!(
                f,
                "not found (looked at {})",
                tried.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
            ),
            LibraryState::Unusable { path, error } => write!(f, "found at {}, unusable: {error}", path.display()),
        }
    }
}

/// What the libraries `exe` references are: for each, whether it is found (as
/// [`open_libraries`] would look for it, in `dir`), hashes as recorded, and which kernels it
/// exports — all read from the files as data, none opened (for `relaxvm verify`).
pub fn check_libraries(exe: &Executable, dir: Option<&Path>, opts: &ReadOptions) -> Vec<LibraryCheck> {
    exe.libraries()
        .iter()
        .map(|lib| {
            let reference = lib.reference.clone();
            let tried = candidates(&reference, dir);
            let state = match tried.iter().find(|p| p.exists()) {
                None => LibraryState::NotFound { tried },
                Some(path) => match read(path, opts) {
                    Err(e) => LibraryState::Unusable { path: path.clone(), error: e.to_string() },
                    Ok(bytes) if content_hash(&bytes) != reference.content_hash => {
                        LibraryState::HashDiffers { path: path.clone(), hash: content_hash(&bytes) }
                    }
                    Ok(bytes) => match kernels_of(&bytes) {
                        Ok(kernels) => LibraryState::Matches { path: path.clone(), kernels },
                        Err(e) => LibraryState::Unusable { path: path.clone(), error: e.to_string() },
                    },
                },
            };
            LibraryCheck { reference, state }
        })
        .collect()
}

/// The kernels a library exports, read from its bytes.
fn kernels_of(bytes: &[u8]) -> Result<Vec<String>> {
    elf::validate(bytes)?;
    let exported = elf::exported_functions(bytes)?;
    Ok(exported
        .iter()
        .filter_map(|f| f.strip_prefix(KERNEL_PREFIX))
        .filter(|k| !k.starts_with('_'))
        .map(str::to_string)
        .collect())
}

/// Where a reference is looked for, in order: its recorded path (a relative one in `dir`),
/// then its file name in `dir`.
fn candidates(reference: &LibraryRef, dir: Option<&Path>) -> Vec<PathBuf> {
    let recorded = Path::new(&reference.path);
    let mut tried = Vec::new();
    let primary = match dir {
        Some(d) if recorded.is_relative() => d.join(recorded),
        _ => recorded.to_path_buf(),
    };
    tried.push(primary);
    if let (Some(d), Some(name)) = (dir, recorded.file_name()) {
        let beside = d.join(name);
        if !tried.contains(&beside) {
            tried.push(beside);
        }
    }
    tried
}

fn locate(reference: &LibraryRef, dir: Option<&Path>) -> Result<PathBuf> {
    let tried = candidates(reference, dir);
    tried.iter().find(|p| p.exists()).cloned().ok_or_else(|| {
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

/// The first eight bytes of a file (fewer when it is shorter), enough for every magic number,
/// from a file opened as every input is.
fn head(path: &Path, opts: &ReadOptions) -> Result<Vec<u8>> {
    relaxvm::input_file::open(path, opts.max_bytes)?.head(8)
}

/// Reads an input file as every input is read ([`relaxvm::input_file`]: a regular file within
/// the size limit, in chunks the poll hook can interrupt).
fn read(path: &Path, opts: &ReadOptions) -> Result<Vec<u8>> {
    relaxvm::input_file::read(path, opts)
}

fn absolute(path: &Path) -> Result<String> {
    let p = std::fs::canonicalize(path).map_err(|e| Error::value(format!("cannot resolve {}: {e}", path.display())))?;
    Ok(p.to_string_lossy().into_owned())
}
