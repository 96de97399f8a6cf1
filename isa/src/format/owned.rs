//! Loading a file into memory of our own: the default, because nothing another process does to
//! the file afterwards (truncating it, rewriting it in place) can reach a loaded executable, and
//! every byte is checked against the file's checksums before any of it is used.

use super::{empty_file, located, reader, LoadOptions};
use crate::error::{Error, Result};
use crate::executable::Executable;
use crate::input_file;
use crate::storage::read_only::ReadOnlyPages;
use crate::storage::Storage;
use std::path::Path;
use std::sync::Arc;

/// Reads `path` whole and decodes it; see [`super::load_file`].
pub fn load(path: &Path, opts: &LoadOptions) -> Result<Executable> {
    let at = |e: Error| located(path, e);
    // A regular file within the size limit (fifos, devices and procfs files are refused).
    let mut file = input_file::open(path, opts.read.max_bytes)?;
    if file.is_empty() {
        return Err(empty_file(path));
    }
    let len = usize::try_from(file.len()).map_err(|_| at(Error::alloc(u128::from(file.len()), "file too large")))?;
    // Read straight into pages that become read-only once filled: the tensor constants view
    // them in place, already sealed (see `storage::read_only`), with no second copy.
    let whole = ReadOnlyPages::filled(len, |buf| file.read_exact_into(buf, opts.read.poll.as_ref())).map_err(at)?;
    let base = whole.as_ptr();
    let whole = Arc::new(whole);
    // SAFETY: `base` points to the `len` bytes of `whole`, which lives for this whole function,
    // and nothing can write them (read-only pages).
    let bytes: &[u8] = unsafe { std::slice::from_raw_parts(base.as_ptr(), len) };
    reader::read(bytes, opts, |range| {
        // `range` lies inside the file (checked by the section scan), hence inside `whole`; the
        // storage keeps the pages mapped for as long as it lives.
        Storage::from_read_only_pages(whole.clone(), range.start, range.len())
    })
    .map_err(at)
}
