//! Loading from a memory-mapped file: tensor constants view the mapping in place, so a large
//! constant costs neither a copy nor resident memory until its pages are read.

use super::{located, reader, LoadOptions};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::executable::Executable;
use crate::input_file;
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
        return Err(with_path(Error::format("header at byte 0: the file is empty")));
    }
    let file = opened.into_file();
    // SAFETY: `map_copy` makes a private copy-on-write mapping: writes through it (tensors are
    // mutable storage) never reach the file, and pages are copied only when written. The
    // mapping stays valid until the `MmapMut` is dropped, which the `Arc` below delays until
    // the last tensor viewing it is gone. What no code can rule out is another process
    // truncating or rewriting the file while it is mapped (reads would fault or change); the
    // format documentation requires files to be replaced, not modified in place, and
    // `Executable::save` replaces them atomically by renaming.
    let mut map = unsafe { MmapOptions::new().map_copy(&file) }.map_err(|e| with_path(e.into()))?;
    let base = NonNull::new(map.as_mut_ptr()).ok_or_else(|| with_path(Error::format("empty mapping")))?;
    let map_len = map.len();
    let owner = Arc::new(map);
    // SAFETY: `base` points to `map_len` readable bytes kept alive by `owner` for this whole
    // function. Nothing writes to them while `bytes` is in use: the only writable aliases are
    // the tensor storages made below, which nobody can reach before `read` returns.
    let bytes: &[u8] = unsafe { std::slice::from_raw_parts(base.as_ptr(), map_len) };
    reader::read(bytes, opts, |range| {
        // `range` lies inside the file (checked by the section scan), hence inside the mapping.
        let ptr = base.as_ptr().wrapping_add(range.start);
        let ptr = NonNull::new(ptr).expect("an offset into a non-null mapping is non-null");
        // SAFETY: `ptr .. ptr + range.len()` lies inside the mapping, which is readable and
        // (privately) writable; `owner` keeps the mapping alive as long as the storage lives,
        // and the mapping is unmapped only when the last clone of `owner` is dropped.
        Ok(unsafe { Storage::from_external(ptr, range.len(), Device::cpu(0), Box::new(owner.clone())) })
    })
    .map_err(with_path)
}
