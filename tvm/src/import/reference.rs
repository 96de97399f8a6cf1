//! A library reference as the importer and the checker see it: its recorded hash, how messages
//! name it, and where it is looked for.

use relaxvm::LibraryRef;
use std::path::{Path, PathBuf};

/// The 64-bit XXH3 hash relaxvm records for a library file.
pub fn content_hash(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// A reference as messages show it: its path and hash.
pub(super) fn describe(r: &LibraryRef) -> String {
    format!("{:?} (XXH3-64 {:#018x})", r.path, r.content_hash)
}

/// Where a reference is looked for, in order: its recorded path (a relative one in `dir`),
/// then its file name in `dir`.
pub(super) fn candidates(reference: &LibraryRef, dir: Option<&Path>) -> Vec<PathBuf> {
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
