//! Loading a file into memory of our own: the default, because nothing another process does to
//! the file afterwards (truncating it, rewriting it in place) can reach a loaded executable, and
//! every byte is checked against the file's checksums before any of it is used.

use super::{located, reader, LoadOptions};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::executable::Executable;
use crate::input_file;
use crate::storage::Storage;
use std::path::Path;
use std::ptr::NonNull;

/// Reads `path` whole and decodes it; see [`super::load_file`].
pub fn load(path: &Path, opts: &LoadOptions) -> Result<Executable> {
    let at = |e: Error| located(path, e);
    // A regular file within the size limit (fifos, devices and procfs files are refused).
    let mut file = input_file::open(path, opts.read.max_bytes)?;
    if file.is_empty() {
        return Err(at(Error::format("header at byte 0: the file is empty")));
    }
    let len = usize::try_from(file.len()).map_err(|_| at(Error::alloc(u128::from(file.len()), "file too large")))?;
    let whole = Storage::alloc_filled(len, Device::cpu(0), |buf| file.read_exact_into(buf, opts.read.poll.as_ref()))?;
    let base = NonNull::new(whole.as_ptr()).expect("storage pointers are non-null");
    let bytes = whole.bytes();
    reader::read(&bytes, opts, |range| {
        // `range` lies inside the file (checked by the section scan), hence inside `whole`.
        let ptr = NonNull::new(base.as_ptr().wrapping_add(range.start)).expect("inside a non-null block");
        // SAFETY: `ptr .. ptr + range.len()` lies inside `whole`'s block, which the owner (a
        // clone of `whole`) keeps alive as long as the new storage. No safe code writes the
        // block: `whole` is private to this function, and the new storage only holds the
        // constants' bytes, which `Executable::from_parts` freezes before anyone can write.
        Ok(unsafe { Storage::from_external(ptr, range.len(), Device::cpu(0), Box::new(whole.clone())) })
    })
    .map_err(at)
}
