//! The libraries section (version 4): the native libraries an executable calls into.
//!
//! ```text
//! libraries ::= count:varint (path:string-index content_hash:fixed64)*
//! ```
//!
//! Only a reference is stored — the path the library was opened from and the XXH3-64 hash of
//! its bytes — never the library itself, so reading a file never runs native code. A loader
//! crate (`relaxvm-tvm`) opens the references, only with the caller's consent
//! ([`NativeLibraries`]), and refuses a library whose bytes hash differently.

use super::cursor::Cursor;
use super::strings::{Budget, StringTable, Strings};
use super::varint;
use crate::error::Result;
use crate::executable::Library;
use crate::native::LibraryRef;
use std::path::{Path, PathBuf};

/// The section data, or `None` when the executable calls into no library.
pub fn encode<'a>(libraries: &'a [Library], strings: &mut StringTable<'a>) -> Option<Vec<u8>> {
    if libraries.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    varint::put(&mut out, libraries.len() as u64);
    for lib in libraries {
        varint::put(&mut out, strings.intern(&lib.reference.path));
        out.extend_from_slice(&lib.reference.content_hash.to_le_bytes());
    }
    Some(out)
}

/// The references the section holds, none of them opened.
pub fn decode(mut c: Cursor<'_>, strings: &Strings<'_>, budget: &mut Budget) -> Result<Vec<Library>> {
    // Each entry takes at least nine bytes: a one-byte string index and the hash.
    let n = c.count("libraries", 9)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let path = strings.read_owned(&mut c, budget)?;
        let content_hash = c.fixed64()?;
        out.push(Library { reference: LibraryRef { path, content_hash }, loaded: None });
    }
    c.finish()?;
    Ok(out)
}

/// The caller's consent to open (and so run the code of) the native libraries an executable
/// references. A reference is only a path and an unkeyed hash that whoever wrote the file
/// chose, so it proves nothing about the library: opening one is the caller's decision, never
/// the file's. The same value is the Python keyword `native_libraries` and the CLI's
/// `--allow-native`/`--allow-native-any` (see the trust model in `docs/tvm.md`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum NativeLibraries {
    /// Open none: loading an executable that references a library is an error naming each
    /// library (path and hash) and how to allow it.
    #[default]
    Refuse,
    /// Open a library only when the file it is found at is one of these files, or lies
    /// directly inside one of these directories (not in a subdirectory: allowing a folder
    /// allows the libraries in it, not a tree). Paths are compared after resolving symbolic
    /// links and `..` on both sides.
    Allow(Vec<PathBuf>),
    /// Open whatever library the executable references (still checked by hash): for files
    /// the caller trusts as much as the libraries themselves.
    AnyReferenced,
}

impl NativeLibraries {
    /// Whether this consent admits opening the library file at `located`, which must exist
    /// (it is resolved to its real path first). Allowed paths that do not exist admit nothing.
    /// A loader must not resolve a path here and read it afterwards (a link swapped between
    /// the two would change the file): it opens the file once and judges the real path of
    /// the open descriptor with [`admits_real`](Self::admits_real).
    pub fn admits(&self, located: &Path) -> std::io::Result<bool> {
        match self {
            NativeLibraries::Allow(_) => Ok(self.admits_real(&std::fs::canonicalize(located)?)),
            _ => Ok(self.admits_real(located)),
        }
    }

    /// Whether this consent admits opening the file whose real path (no symbolic link, `.` or
    /// `..` in it) is `real`, which is taken as it is, not resolved again: the loader gets it
    /// from the descriptor it reads the library through ([`crate::input_file::InputFile::real_path`]).
    /// The allowed paths are the caller's, resolved here; those that do not exist admit nothing.
    pub fn admits_real(&self, real: &Path) -> bool {
        let entries = match self {
            NativeLibraries::Refuse => return false,
            NativeLibraries::AnyReferenced => return true,
            NativeLibraries::Allow(entries) => entries,
        };
        entries.iter().filter_map(|e| std::fs::canonicalize(e).ok()).any(|allowed| {
            if allowed.is_dir() {
                real.parent() == Some(allowed.as_path())
            } else {
                real == allowed
            }
        })
    }

    /// Whether any library may be opened at all.
    pub fn allows_any(&self) -> bool {
        match self {
            NativeLibraries::Refuse => false,
            NativeLibraries::Allow(entries) => !entries.is_empty(),
            NativeLibraries::AnyReferenced => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::NativeLibraries;

    #[test]
    fn consent_admits_listed_files_and_files_directly_in_listed_folders() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let a = dir.path().join("a.so");
        let b = sub.join("b.so");
        std::fs::write(&a, b"a").unwrap();
        std::fs::write(&b, b"b").unwrap();
        assert!(!NativeLibraries::Refuse.admits(&a).unwrap());
        assert!(NativeLibraries::AnyReferenced.admits(&a).unwrap());
        let folder = NativeLibraries::Allow(vec![dir.path().to_path_buf()]);
        assert!(folder.admits(&a).unwrap());
        assert!(!folder.admits(&b).unwrap(), "not recursive");
        assert!(folder.admits(&sub.join("..").join("a.so")).unwrap(), "compared as real paths");
        let file = NativeLibraries::Allow(vec![b.clone()]);
        assert!(file.admits(&b).unwrap() && !file.admits(&a).unwrap());
        #[cfg(unix)]
        {
            // A link inside the allowed folder to a file outside it is judged by its target.
            let link = sub.join("link.so");
            std::os::unix::fs::symlink(&a, &link).unwrap();
            assert!(!NativeLibraries::Allow(vec![sub.clone()]).admits(&link).unwrap());
            assert!(folder.admits(&link).unwrap());
        }
        assert!(!NativeLibraries::Allow(vec![dir.path().join("missing")]).admits(&a).unwrap());
        assert!(NativeLibraries::Refuse.admits(&dir.path().join("missing")).is_ok());
    }
}
