//! What the libraries an executable references are, read as data (for `relaxvm verify`):
//! found or not, hashed as recorded or not, and the kernels they export. Nothing is opened.

use super::reference::{candidates, content_hash, describe};
use crate::elf;
use crate::ffi::KERNEL_PREFIX;
use relaxvm::input_file::ReadOptions;
use relaxvm::{Error, Executable, LibraryRef, Result};
use std::path::{Path, PathBuf};

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
/// [`open_libraries`](super::open_libraries) would look for it, in `dir`), hashes as recorded, and which kernels it
/// exports — all read from the files as data, none opened (for `relaxvm verify`).
///
/// Memory stays bounded whatever file a reference names: a file is first checked to be an
/// ELF file, then hashed streaming ([`hash_streaming`]); only a file with the recorded hash (the
/// library itself) is read whole, through the same descriptor, to list its kernels. A
/// reference repeated (the same path and hash) is checked once.
pub fn check_libraries(exe: &Executable, dir: Option<&Path>, opts: &ReadOptions) -> Vec<LibraryCheck> {
    let mut seen: std::collections::HashMap<&LibraryRef, LibraryState> = std::collections::HashMap::new();
    exe.libraries()
        .iter()
        .map(|lib| {
            let reference = lib.reference.clone();
            let state = seen.entry(&lib.reference).or_insert_with(|| check_one(&lib.reference, dir, opts)).clone();
            LibraryCheck { reference, state }
        })
        .collect()
}

fn check_one(reference: &LibraryRef, dir: Option<&Path>, opts: &ReadOptions) -> LibraryState {
    let tried = candidates(reference, dir);
    let Some(path) = tried.iter().find(|p| p.exists()).cloned() else {
        return LibraryState::NotFound { tried };
    };
    let unusable = |e: Error| LibraryState::Unusable { path: path.clone(), error: e.to_string() };
    let file = match relaxvm::input_file::open(&path, opts.max_bytes) {
        Ok(f) => f,
        Err(e) => return unusable(e),
    };
    let mut file = file.into_file();
    let hash = match hash_streaming(&mut file, &path, opts) {
        Ok(h) => h,
        Err(e) => return unusable(e),
    };
    if hash != reference.content_hash {
        return LibraryState::HashDiffers { path, hash };
    }
    let mut bytes = Vec::new();
    use std::io::{Read, Seek};
    let read = file.rewind().and_then(|_| file.read_to_end(&mut bytes));
    if let Err(e) = read {
        return unusable(Error::value(format!("{}: {e}", path.display())));
    }
    if content_hash(&bytes) != hash {
        return unusable(Error::value(format!("{}: the file changed while it was read", path.display())));
    }
    match kernels_of(&bytes) {
        Ok(kernels) => LibraryState::Matches { path, kernels },
        Err(e) => unusable(e),
    }
}

/// The XXH3-64 hash of an open file, read in chunks of at most
/// [`relaxvm::input_file::CHUNK`] bytes (the poll hook runs between them), so memory does not
/// grow with the file; an error, before more is read, when the file does not start as an ELF
/// file does (relaxvm records hashes only of ELF shared libraries).
pub fn hash_streaming(file: &mut std::fs::File, path: &Path, opts: &ReadOptions) -> Result<u64> {
    use std::io::Read;
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        if let Some(poll) = &opts.poll {
            poll()?;
        }
        let n = match file.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::value(format!("{}: {e}", path.display()))),
        };
        if total == 0 && n > 0 && !(n >= 4 && buf.starts_with(b"\x7fELF")) {
            let head: Vec<String> = buf[..n.min(8)].iter().map(|b| format!("{b:02x}")).collect();
            return Err(Error::format(format!(
                "{}: not an ELF shared library (the file starts with bytes {})",
                path.display(),
                head.join(" ")
            )));
        }
        if n == 0 {
            if total == 0 {
                return Err(Error::format(format!("{}: not an ELF shared library (an empty file)", path.display())));
            }
            return Ok(hasher.digest());
        }
        total += n as u64;
        if total > opts.max_bytes {
            return Err(Error::value(format!(
                "{}: the file holds more than the input size limit of {} bytes",
                path.display(),
                opts.max_bytes
            )));
        }
        hasher.update(&buf[..n]);
    }
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
