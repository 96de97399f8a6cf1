//! The private copy of a library's bytes that the dynamic loader maps.
//!
//! relaxvm never hands the dynamic loader the user's file itself, for two reasons:
//!
//! - **One mapping per runtime.** The loader maps a file only once per process: a second
//!   `dlopen` of the same file (by any name) returns the first mapping. A TVM library keeps
//!   state in its globals — the service slots and the function handles its kernels cache on
//!   first use — so if TVM's runtime and relaxvm shared a mapping (Python code that loads the
//!   same `.so` with both, to compare them), each would run the kernels with the other's
//!   handles and crash. A copy in a memory file is a distinct file to the loader.
//! - **What was validated is what is mapped.** The copy holds exactly the bytes that
//!   [`crate::elf::validate`] checked, so a file replaced or truncated after validation cannot
//!   reach the loader.
//!
//! The `__tvm_ffi__library_bin` blob (the program and its constants, read by the importer from
//! the file's bytes, never by the kernels) is left out of the copy as a hole, so the copy costs
//! about the size of the code, not of the weights.

use std::fs::File;
use std::ops::Range;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::FileExt;

/// A memory file holding `bytes`, with `hole` (if any) left unwritten (reads as zeros) and the
/// byte at each of `renamed` (outside the hole) replaced by `R` (see `rebind.rs`).
pub fn create(bytes: &[u8], hole: Option<Range<usize>>, renamed: &[usize]) -> std::io::Result<File> {
    // SAFETY: memfd_create takes a NUL-terminated name and flags; it returns a new descriptor
    // or -1.
    let fd = unsafe { libc::memfd_create(c"relaxvm-tvm-library".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    let file = unsafe { File::from_raw_fd(fd) };
    let hole = hole.filter(|h| h.start <= h.end && h.end <= bytes.len()).unwrap_or(bytes.len()..bytes.len());
    file.write_all_at(&bytes[..hole.start], 0)?;
    file.write_all_at(&bytes[hole.end..], hole.end as u64)?;
    file.set_len(bytes.len() as u64)?;
    for &at in renamed.iter().filter(|at| **at < bytes.len() && !hole.contains(at)) {
        file.write_all_at(b"R", at as u64)?;
    }
    Ok(file)
}

/// The name under which the loader opens `file` (its descriptor in `/proc/self/fd`).
pub fn proc_path(file: &File) -> String {
    format!("/proc/self/fd/{}", file.as_raw_fd())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_holds_the_bytes_with_the_hole_zeroed() {
        let bytes: Vec<u8> = (0..10_000u32).map(|i| (i % 251 + 1) as u8).collect();
        let copy = create(&bytes, Some(100..9000), &[]).unwrap();
        let read = std::fs::read(proc_path(&copy)).unwrap();
        assert_eq!(read.len(), bytes.len());
        assert_eq!(&read[..100], &bytes[..100]);
        assert!(read[100..9000].iter().all(|b| *b == 0));
        assert_eq!(&read[9000..], &bytes[9000..]);
        // No hole, or one that does not fit: everything is copied.
        for hole in [None, Some(5..20_000)] {
            assert_eq!(std::fs::read(proc_path(&create(&bytes, hole, &[]).unwrap())).unwrap(), bytes);
        }
        // Renamed bytes become `R`, except in the hole or past the end.
        let read =
            std::fs::read(proc_path(&create(&bytes, Some(100..9000), &[3, 500, 9500, 20_000]).unwrap())).unwrap();
        assert_eq!((read[3], read[500], read[9500], read.len()), (b'R', 0, b'R', bytes.len()));
    }
}
