//! Loading from a memory-mapped file: tensor constants view the mapping in place, so a large
//! constant costs neither a copy nor resident memory until its pages are read. The mapping is
//! read-only, so the constants are sealed as they are (no copy into other read-only pages).

use super::{empty_file, located, reader, LoadOptions};
use crate::error::{Error, Result};
use crate::executable::Executable;
use crate::input_file;
use crate::storage::read_only::ReadOnlyPages;
use crate::storage::Storage;
use memmap2::MmapOptions;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::Arc;

/// Maps `path` and decodes it; see [`super::load_file`].
pub fn load(path: &Path, opts: &LoadOptions) -> Result<Executable> {
    let with_path = |e: Error| located(path, e);
    // A regular file within the size limit: a device or a procfs file is never mapped.
    let opened = input_file::open(path, opts.read.max_bytes)?;
    if opened.is_empty() {
        return Err(empty_file(path));
    }
    let file = opened.into_file();
    // SAFETY: `map_copy_read_only` maps the file privately without write access: tensor
    // constants view it in place, and a write to them (by native code: safe writes to constants
    // are refused) faults instead of changing them (see `storage::read_only`). The mapping stays
    // valid until the `Mmap` is dropped, which `pages` below delays until the last tensor
    // viewing it is gone. What no code can rule out is another process truncating or rewriting
    // the file while it is mapped (reads would fault or change); the format documentation
    // requires files to be replaced, not modified in place, and `Executable::save` replaces
    // them atomically by renaming.
    let map = unsafe { MmapOptions::new().map_copy_read_only(&file) }.map_err(|e| with_path(e.into()))?;
    let base = NonNull::new(map.as_ptr().cast_mut()).ok_or_else(|| with_path(Error::format("empty mapping")))?;
    let map_len = map.len();
    // SAFETY: `base` points to the `map_len` bytes of the mapping, mapped without write
    // permission and kept mapped by the owner `map`.
    let pages = Arc::new(unsafe { ReadOnlyPages::from_mapping(Box::new(map), base, map_len) });
    // SAFETY: `base` points to `map_len` readable bytes kept alive by `pages` for this whole
    // function, and nothing can write them (read-only pages).
    let bytes: &[u8] = unsafe { std::slice::from_raw_parts(base.as_ptr(), map_len) };
    reader::read(bytes, opts, |range| {
        // `range` lies inside the file (checked by the section scan), hence inside the mapping;
        // the storage keeps the pages mapped for as long as it lives.
        Storage::from_read_only_pages(pages.clone(), range.start, range.len())
    })
    .map_err(with_path)
}
