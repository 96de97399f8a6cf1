//! Native libraries an executable calls into: compiled kernels (e.g. a TVM-compiled `.so`).
//!
//! The core crate never opens a library itself (no FFI here). A loader crate (`relaxvm-tvm`)
//! opens one and attaches it to an `Executable` (`relaxvm::Executable`) as an
//! `Arc<dyn NativeLibrary>`; a VM built from that executable resolves packed-function names in
//! its libraries before the registries, as TVM's VM resolves a module's imports first. A saved
//! executable keeps only a [`LibraryRef`] (the path and a content hash), which the loader
//! crate opens again.

use crate::packed::PackedFunc;

/// A loaded native library that provides packed functions by name.
pub trait NativeLibrary: Send + Sync {
    /// The path the library was opened from.
    fn path(&self) -> &std::path::Path;
    /// The 64-bit XXH3 hash of the library file's bytes, as recorded in a [`LibraryRef`].
    fn content_hash(&self) -> u64;
    /// The function `name`, when the library defines it.
    fn get_function(&self, name: &str) -> Option<PackedFunc>;
}

/// What a saved executable records of a native library it calls into.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LibraryRef {
    /// The library's path as recorded: absolute, or relative to the executable file's folder.
    pub path: String,
    /// The 64-bit XXH3 hash of the library file's bytes when it was recorded; a library whose
    /// bytes hash differently is refused when the reference is opened.
    pub content_hash: u64,
}
