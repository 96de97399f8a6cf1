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

use crate::ffi::Library as NativeLib;
use crate::{elf, library_bin, vmexec};
use relaxvm::executable::Library;
use relaxvm::format::{LoadOptions, NativeLibraries};
use relaxvm::input_file::ReadOptions;
use relaxvm::{Error, ErrorKind, Executable, LibraryRef, NativeLibrary, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod check;
mod reference;

pub use check::{check_libraries, hash_streaming, LibraryCheck, LibraryState};
pub use reference::content_hash;
use reference::{candidates, describe};

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
            let real = canonical(path)?;
            let lib = NativeLib::open_bytes(&real, &bytes)?;
            Ok(exe.with_libraries(vec![Library::opened(lib)]))
        }
        FileKind::VmExec => vmexec::read(&bytes).map_err(|e| in_file(path, e)),
        // Replaced since the first look: loaded as the kind it is now.
        FileKind::Relaxvm => load_executable_with(path, opts),
    }
}

/// [`load_module_with`] of bytes in memory: a `.so` (validated, then opened from these bytes:
/// passing them is the consent to run that library's code; `name` stands for its path in
/// messages and in the reference an executable saved from it records), a `.vmexec`, or a
/// `.rvx`, whose library references resolve against the current directory and open only as
/// `opts.native_libraries` allows (see [`open_libraries`]).
pub fn load_module_bytes(bytes: &[u8], name: &Path, opts: &LoadOptions) -> Result<Executable> {
    match FileKind::sniff(bytes, name)? {
        FileKind::Elf => {
            let exe = program_of_elf(bytes, name)?;
            let lib = NativeLib::open_bytes(name, bytes)?;
            Ok(exe.with_libraries(vec![Library::opened(lib)]))
        }
        FileKind::VmExec => vmexec::read(bytes).map_err(|e| in_file(name, e)),
        FileKind::Relaxvm => {
            let exe = relaxvm::format::load_bytes_with(bytes, opts).map_err(|e| in_file(name, e))?;
            open_libraries(exe, None, opts)
        }
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
///
/// What is admitted is what is loaded: each library file is opened once, the consent judges
/// the real path of that open descriptor ([`relaxvm::input_file::InputFile::real_path`]), and
/// the bytes hashed and loaded are read through the same descriptor. No path is resolved again
/// between the consent and the load, so a symbolic link swapped meanwhile changes nothing.
///
/// References to one file (the same recorded path, or files with the same device and inode)
/// are read, checked and opened once and share the opened library: a file that repeats a
/// reference costs nothing more.
pub fn open_libraries(exe: Executable, dir: Option<&Path>, opts: &LoadOptions) -> Result<Executable> {
    let pending: Vec<&LibraryRef> =
        exe.libraries().iter().filter(|l| l.loaded.is_none()).map(|l| &l.reference).collect();
    if pending.is_empty() {
        return Ok(exe);
    }
    if !opts.native_libraries.allows_any() {
        let mut distinct: Vec<&LibraryRef> = Vec::new();
        for r in &pending {
            if !distinct.contains(r) {
                distinct.push(r);
            }
        }
        return Err(Error::value(format!(
            "the executable references {}: {}. Opening a native library runs its code, so relaxvm opens \
             one only when the caller allows it: in Python, load_executable(..., native_libraries=PATH or \
             [PATHS]) (files, or folders whose files are allowed) or native_libraries=True (any library the \
             file references); on the command line, --allow-native PATH or --allow-native-any",
            relaxvm::error::counted(distinct.len(), "native library"),
            distinct.iter().map(|r| describe(r)).collect::<Vec<_>>().join(", ")
        )));
    }
    let checked = check_pending(&pending, dir, opts)?;
    let opened = checked
        .files
        .iter()
        .map(|f| NativeLib::open_bytes(&f.real, &f.bytes).map(|l| l as Arc<dyn NativeLibrary>))
        .collect::<Result<Vec<_>>>()?;
    let mut file_of = checked.file_of.into_iter();
    let libs = exe
        .libraries()
        .iter()
        .map(|lib| match &lib.loaded {
            Some(_) => lib.clone(),
            None => {
                let k = file_of.next().expect("one checked file per pending library");
                // Saved again (or pickled), the executable names the file it was opened from.
                let reference = LibraryRef {
                    path: checked.files[k].real.to_string_lossy().into_owned(),
                    content_hash: lib.reference.content_hash,
                };
                Library { reference, loaded: Some(opened[k].clone()) }
            }
        })
        .collect();
    Ok(exe.with_libraries(libs))
}

/// A library file admitted and read, ready to open.
struct CheckedFile {
    /// The real path of the descriptor it was read through, which the consent admitted.
    real: PathBuf,
    /// `None` where the platform reports no identity (the file is then not shared).
    identity: Option<relaxvm::input_file::FileIdentity>,
    bytes: Vec<u8>,
    hash: u64,
}

/// The distinct files the pending references name, and which file each reference is.
struct Checked {
    files: Vec<CheckedFile>,
    file_of: Vec<usize>,
}

/// Locates, opens (once), admits, reads and hash-checks the file of every pending reference,
/// opening none.
fn check_pending(pending: &[&LibraryRef], dir: Option<&Path>, opts: &LoadOptions) -> Result<Checked> {
    let mut files: Vec<CheckedFile> = Vec::new();
    let mut file_of = Vec::with_capacity(pending.len());
    let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for reference in pending {
        let k = match seen.get(reference.path.as_str()) {
            // The same recorded path: the file found for it before.
            Some(&k) => k,
            None => {
                let k = admit_and_read(reference, dir, opts, &mut files)?;
                seen.insert(&reference.path, k);
                k
            }
        };
        let file = &files[k];
        if file.hash != reference.content_hash {
            return Err(Error::value(format!(
                "native library {}: its contents hash to {:#018x}, but the executable was saved with a library hashing to {:#018x} (recompiled or replaced since?)",
                file.real.display(),
                file.hash,
                reference.content_hash
            )));
        }
        file_of.push(k);
    }
    Ok(Checked { files, file_of })
}

/// Opens the file `reference` names, admits the real path of that descriptor and reads it
/// through the same descriptor (unless a file read before is the same file); the index of its
/// entry in `files`.
fn admit_and_read(
    reference: &LibraryRef,
    dir: Option<&Path>,
    opts: &LoadOptions,
    files: &mut Vec<CheckedFile>,
) -> Result<usize> {
    let found = locate(reference, dir)?;
    let file = relaxvm::input_file::open(&found, opts.read.max_bytes)?;
    let real = file.real_path()?;
    if !opts.native_libraries.admits_real(&real) {
        return Err(Error::value(format!(
            "native library {}, found at {}{}, is not among the allowed native libraries ({}); allow that \
             file or its folder to open it",
            describe(reference),
            found.display(),
            if real == found { String::new() } else { format!(" (the file {})", real.display()) },
            allowed_list(&opts.native_libraries)
        )));
    }
    let identity = file.identity();
    if let Some(k) = files.iter().position(|f| identity.is_some() && f.identity == identity) {
        return Ok(k);
    }
    before_read_hook(&found);
    let bytes = file.read_to_vec(opts.read.poll.as_ref())?;
    let hash = content_hash(&bytes);
    files.push(CheckedFile { real, identity, bytes, hash });
    Ok(files.len() - 1)
}

/// Test-only: called between a library's admission and the read of its bytes, so a test can
/// swap the path it was found at exactly there and show that the admitted file is read.
#[cfg(test)]
fn before_read_hook(found: &Path) {
    if let Some(hook) = tests::BEFORE_READ.with(|h| h.borrow().clone()) {
        hook(found);
    }
}

#[cfg(not(test))]
fn before_read_hook(_found: &Path) {}

fn allowed_list(consent: &NativeLibraries) -> String {
    match consent {
        NativeLibraries::Allow(paths) => paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "),
        NativeLibraries::Refuse => "none".into(),
        NativeLibraries::AnyReferenced => "any".into(),
    }
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
    Ok(canonical(path)?.to_string_lossy().into_owned())
}

/// `path` made absolute with its links resolved: a library is recorded, and loaded, by its real
/// path. It can fail after the file was read (removed or renamed in between, or a path that names
/// no file, as `/proc/self/fd/N` of a deleted file does).
fn canonical(path: &Path) -> Result<std::path::PathBuf> {
    std::fs::canonicalize(path).map_err(|e| Error::value(format!("cannot resolve {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// A hook called with the path a library was found at.
    type Hook = Rc<dyn Fn(&Path)>;

    thread_local! {
        /// The hook [`before_read_hook`] calls, set by a test on its own thread.
        pub(super) static BEFORE_READ: RefCell<Option<Hook>> = const { RefCell::new(None) };
    }

    fn model_so() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/mlp.so")
    }

    fn referencing(paths: &[&Path], hash: u64) -> Executable {
        let exe = inspect_module(model_so()).unwrap();
        let libs = paths
            .iter()
            .map(|p| Library {
                reference: LibraryRef { path: p.to_string_lossy().into_owned(), content_hash: hash },
                loaded: None,
            })
            .collect();
        exe.with_libraries(libs)
    }

    fn allow(paths: &[&Path]) -> LoadOptions {
        LoadOptions {
            native_libraries: NativeLibraries::Allow(paths.iter().map(|p| p.to_path_buf()).collect()),
            ..Default::default()
        }
    }

    /// The attack of a symbolic link swapped after the consent judged it: the link points
    /// into the allowed folder when it is admitted and at another library when it is read.
    /// The swap happens exactly between the two (the hook), so the order is certain.
    #[test]
    fn the_admitted_descriptor_is_what_is_read_whatever_the_link_becomes() {
        let base = tempfile::tempdir().unwrap();
        let base_real = std::fs::canonicalize(base.path()).unwrap();
        let (allowed, attacker) = (base_real.join("allowed"), base_real.join("attacker"));
        std::fs::create_dir(&allowed).unwrap();
        std::fs::create_dir(&attacker).unwrap();
        let good = allowed.join("good.so");
        std::fs::copy(model_so(), &good).unwrap();
        // Another library (other bytes) outside the allowed folder.
        let evil = attacker.join("evil.so");
        let mut bytes = std::fs::read(model_so()).unwrap();
        bytes.extend_from_slice(b"evil");
        std::fs::write(&evil, &bytes).unwrap();
        let (good_hash, evil_hash) = (content_hash(&std::fs::read(&good).unwrap()), content_hash(&bytes));
        let link = attacker.join("lib.so");
        let swapped = Rc::new(RefCell::new(0));
        let count = swapped.clone();
        let (l, e) = (link.clone(), evil.clone());
        BEFORE_READ.with(|h| {
            *h.borrow_mut() = Some(Rc::new(move |found: &Path| {
                assert_eq!(found, l.as_path());
                std::fs::remove_file(&l).unwrap();
                std::os::unix::fs::symlink(&e, &l).unwrap();
                *count.borrow_mut() += 1;
            }))
        });
        let restore = |target: &Path| {
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(target, &link).unwrap();
        };
        // The file records the other library's hash: what is read is still the admitted file,
        // whose hash differs, so nothing is opened.
        restore(&good);
        let err = open_libraries(referencing(&[&link], evil_hash), None, &allow(&[&allowed])).err().unwrap();
        let err = err.to_string();
        assert_eq!(*swapped.borrow(), 1, "the link was swapped between admission and read");
        assert!(err.contains(&format!("{}: its contents hash to {good_hash:#018x}", good.display())), "{err}");
        // Recording the admitted library's hash, the admitted library's bytes are what would be
        // opened (this test binary cannot open libraries: tests/import.rs opens them), under
        // its real path, although the link names the other one by then.
        restore(&good);
        let r = LibraryRef { path: link.to_string_lossy().into(), content_hash: good_hash };
        let checked = check_pending(&[&r], None, &allow(&[&allowed])).unwrap();
        assert_eq!(*swapped.borrow(), 2);
        assert_eq!(checked.files.len(), 1);
        assert_eq!(checked.files[0].real, good);
        assert_eq!(checked.files[0].bytes, std::fs::read(&good).unwrap());
        // Without the swap, the link to the other library is refused by the consent.
        BEFORE_READ.with(|h| *h.borrow_mut() = None);
        restore(&evil);
        let err = open_libraries(referencing(&[&link], evil_hash), None, &allow(&[&allowed])).err().unwrap();
        let err = err.to_string();
        assert!(err.contains("is not among the allowed native libraries"), "{err}");
        assert!(err.contains(&format!("(the file {})", evil.display())), "{err}");
    }

    #[test]
    fn references_to_one_file_are_read_and_opened_once_and_shared() {
        let dir = tempfile::tempdir().unwrap();
        let real_dir = std::fs::canonicalize(dir.path()).unwrap();
        let so = real_dir.join("model.so");
        std::fs::copy(model_so(), &so).unwrap();
        let link = real_dir.join("link.so");
        std::os::unix::fs::symlink(&so, &link).unwrap();
        let hash = content_hash(&std::fs::read(&so).unwrap());
        let reads = Rc::new(RefCell::new(0));
        let count = reads.clone();
        BEFORE_READ.with(|h| *h.borrow_mut() = Some(Rc::new(move |_: &Path| *count.borrow_mut() += 1)));
        let refs: Vec<LibraryRef> = [&so, &so, &link, &so, &link]
            .iter()
            .map(|p| LibraryRef { path: p.to_string_lossy().into(), content_hash: hash })
            .collect();
        let refs: Vec<&LibraryRef> = refs.iter().collect();
        let checked = check_pending(&refs, None, &allow(&[&real_dir])).unwrap();
        BEFORE_READ.with(|h| *h.borrow_mut() = None);
        assert_eq!(*reads.borrow(), 1, "one read for the one file");
        // One file to open (open_libraries opens each file once and shares it).
        assert_eq!(checked.files.len(), 1);
        assert_eq!(checked.file_of, vec![0; 5]);
        assert_eq!(checked.files[0].real, so);
        // Refused, the message counts the distinct libraries.
        let refs: Vec<&Path> = vec![&so, &so, &so];
        let err = open_libraries(referencing(&refs, hash), None, &LoadOptions::default()).err().unwrap().to_string();
        assert!(err.contains("references 1 native library:"), "{err}");
        // A repeated reference with another hash is still checked.
        let exe = referencing(&[&so], hash);
        let mut libs = exe.libraries().to_vec();
        libs.push(Library {
            reference: LibraryRef { path: so.to_string_lossy().into(), content_hash: 7 },
            loaded: None,
        });
        let err = open_libraries(exe.with_libraries(libs), None, &allow(&[&real_dir])).err().unwrap().to_string();
        assert!(err.contains("was saved with a library hashing to 0x0000000000000007"), "{err}");
    }
}
