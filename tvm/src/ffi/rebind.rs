//! The imports a library binds to relaxvm under relaxvm's own names.
//!
//! TVM's libraries import a few functions of the runtime that loads them by name: the error
//! setter every kernel may call (`TVMFFIErrorSetRaisedFromCStrParts`) and, in compiled-mode
//! models, the three AnyList functions. relaxvm never defines TVM's names: a definition of them
//! in the global scope (where the libraries relaxvm opens find relaxvm's) would also be bound
//! by the libraries Apache TVM opens in the same process, whose kernels would then report
//! errors to relaxvm and crash TVM (attack compiled/03). Instead, in the private copy relaxvm
//! loads (see `private_copy.rs`), every reference to those names is renamed to relaxvm's own,
//! of the same length (`TVM...` becomes `RVM...`), which no other runtime defines.

use std::ops::Range;

/// The imports renamed, each to the same name with its first letter `R`.
pub const REBOUND_IMPORTS: [&str; 4] = [
    "TVMFFIErrorSetRaisedFromCStrParts",
    "TVMBackendAnyListSetPackedArg",
    "TVMBackendAnyListMoveFromPackedReturn",
    "TVMBackendAnyListResetItem",
];

/// The offsets, in a library's `bytes`, of the first letter of every NUL-terminated occurrence
/// of a [`REBOUND_IMPORTS`] name, outside `hole` (the program blob, which is not loaded): the
/// bytes the copy changes to `R`. The names occur only in the symbol string tables.
pub fn renamed_offsets(bytes: &[u8], hole: Option<Range<usize>>) -> Vec<usize> {
    let hole = hole.filter(|h| h.start <= h.end && h.end <= bytes.len()).unwrap_or(bytes.len()..bytes.len());
    let mut found = Vec::new();
    for name in REBOUND_IMPORTS {
        let pattern = [name.as_bytes(), b"\0"].concat();
        let finder = memchr::memmem::Finder::new(&pattern);
        found.extend(finder.find_iter(&bytes[..hole.start]));
        found.extend(finder.find_iter(&bytes[hole.end..]).map(|at| at + hole.end));
    }
    found.sort_unstable();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `bytes` with the names at `offsets` renamed (what the private copy holds).
    fn renamed(bytes: &[u8], offsets: &[usize]) -> Vec<u8> {
        let mut copy = bytes.to_vec();
        for &at in offsets {
            copy[at] = b'R';
        }
        copy
    }

    #[test]
    fn every_import_outside_the_blob_is_renamed_to_relaxvms_name() {
        let bytes = b"\0TVMBackendAnyListResetItem\0xTVMFFIErrorSetRaisedFromCStrParts\0TVMBackendAnyListResetItemZ\0";
        let at = renamed_offsets(bytes, None);
        assert_eq!(
            renamed(bytes, &at),
            b"\0RVMBackendAnyListResetItem\0xRVMFFIErrorSetRaisedFromCStrParts\0TVMBackendAnyListResetItemZ\0"
        );
        // Nothing inside the program blob is touched; what follows it is.
        let blob = b"TVMBackendAnyListResetItem\0TVMBackendAnyListResetItem\0";
        assert_eq!(renamed_offsets(blob, Some(0..27)), [27]);
        // A hole that does not fit is ignored.
        assert_eq!(renamed_offsets(blob, Some(5..100)), [0, 27]);
    }
}
