//! Opening an input file: the one function every file relaxvm reads goes through (executables,
//! the native libraries they reference, TVM models, traces, `.npy` files, the CLI's inputs).
//!
//! What a path names is not trusted: it may be a fifo (an `open` that blocks until a writer
//! comes, forever), a device (`/dev/zero` never ends), a directory, or a procfs file that
//! reports a size of 0 and then yields gigabytes (`/proc/self/pagemap`). So [`open`]:
//!
//! 1. opens with `O_NONBLOCK` (a fifo's open returns at once; the flag is cleared afterwards,
//!    so later reads behave as usual) and `O_NOCTTY` (a terminal never becomes ours);
//! 2. `fstat`s the opened descriptor — not the path, which another process could swap between
//!    a check and the open — and refuses anything but a regular file;
//! 3. checks the size it reports against a limit ([`ReadOptions::max_bytes`]) before reading
//!    a byte, and probes a file that reports 0 bytes (procfs files do, whatever they hold): one
//!    that yields bytes is refused.
//!
//! [`InputFile::read_exact_into`] then reads exactly the reported size, in chunks, calling the
//! caller's poll hook between chunks (the Python package turns Ctrl-C into `KeyboardInterrupt`
//! there), and reads a few bytes more to prove the end: a file longer than it said (procfs) is
//! refused after at most `size + 8` bytes, and one that shrank is an error, never a short read.

use crate::error::{Error, Result};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A hook the VM calls every `POLL_INTERVAL` steps while it runs; an error it returns stops
/// the run. Embedders deliver signals with it (the Python package turns Ctrl-C into
/// `KeyboardInterrupt` this way).
pub type PollHook = Arc<dyn Fn() -> Result<()> + Send + Sync>;

/// The default size limit of an input file: 16 GiB, far above any model relaxvm runs, far
/// below what reading a device by mistake would take.
pub const DEFAULT_MAX_INPUT: u64 = 16 << 30;

/// How many bytes are read between two calls of the poll hook.
pub const CHUNK: usize = 4 << 20;

/// Limits on reading an input file.
#[derive(Clone)]
pub struct ReadOptions {
    /// The largest file to read, in bytes ([`DEFAULT_MAX_INPUT`] by default); a larger file is
    /// refused before it is read.
    pub max_bytes: u64,
    /// Called between chunks of a read (and once after it); an error it returns stops the read
    /// with that error. Embedders deliver signals with it.
    pub poll: Option<PollHook>,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions { max_bytes: DEFAULT_MAX_INPUT, poll: None }
    }
}

impl std::fmt::Debug for ReadOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadOptions")
            .field("max_bytes", &self.max_bytes)
            .field("poll", &self.poll.as_ref().map(|_| "hook"))
            .finish()
    }
}

impl PartialEq for ReadOptions {
    /// Equal limits and the same hook (by identity).
    fn eq(&self, other: &Self) -> bool {
        self.max_bytes == other.max_bytes
            && match (&self.poll, &other.poll) {
                (None, None) => true,
                (Some(a), Some(b)) => std::sync::Arc::ptr_eq(a, b),
                _ => false,
            }
    }
}

impl Eq for ReadOptions {}

/// An opened regular file within the size limit.
#[derive(Debug)]
pub struct InputFile {
    file: File,
    len: u64,
    path: PathBuf,
    identity: Option<FileIdentity>,
}

/// What makes two opened files the same file whatever paths reached them (links, `..`): on
/// Unix, the device and inode numbers the descriptor reported when it was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileIdentity {
    device: u64,
    inode: u64,
}

/// Opens `path` for reading as described in the [module documentation](self): a regular file
/// of at most `max_bytes` bytes (as its descriptor reports), else an error naming the path and
/// what it is.
pub fn open(path: &Path, max_bytes: u64) -> Result<InputFile> {
    let file = open_nonblocking(path).map_err(|e| io_at(path, e))?;
    let meta = file.metadata().map_err(|e| io_at(path, e))?;
    if let Some(kind) = not_regular(&meta) {
        return Err(Error::value(format!("{}: expected a regular file, found {kind}", path.display())));
    }
    if meta.len() > max_bytes {
        return Err(Error::value(format!(
            "{}: the file is {} bytes, more than the input size limit of {max_bytes} bytes (raise it with \
             max_input_size= in Python, --max-input-size on the command line)",
            path.display(),
            meta.len()
        )));
    }
    let mut opened = InputFile { file, len: meta.len(), path: path.to_path_buf(), identity: identity(&meta) };
    if opened.len == 0 {
        // procfs and sysfs files report 0 bytes whatever they hold: whoever reads this file
        // (a memory map, a zip reader) must not meet gigabytes behind a size of 0.
        opened.read_exact_into(&mut [], None)?;
    }
    Ok(opened)
}

/// Reads the regular file `path` whole ([`open`], then [`InputFile::read_to_vec`]).
pub fn read(path: &Path, opts: &ReadOptions) -> Result<Vec<u8>> {
    open(path, opts.max_bytes)?.read_to_vec(opts.poll.as_ref())
}

impl InputFile {
    /// The size the file's descriptor reported when it was opened.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the file reported a size of 0.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The file's identity, as its descriptor reported it (None where the platform has no
    /// such notion), so that a reader can tell two paths naming one file apart from two files.
    pub fn identity(&self) -> Option<FileIdentity> {
        self.identity
    }

    /// The path it was opened as.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The first bytes of the file, at most `n` and at most its reported size (enough to tell
    /// its kind by a magic number). Consumes the file: open it again to read it whole.
    pub fn head(mut self, n: usize) -> Result<Vec<u8>> {
        let mut head = Vec::with_capacity(n);
        (&mut self.file).take(self.len.min(n as u64)).read_to_end(&mut head).map_err(|e| io_at(&self.path, e))?;
        Ok(head)
    }

    /// The real path of the file this descriptor holds (no symbolic link, `.` or `..` in it),
    /// found from the descriptor, never by resolving [`path`](Self::path) again: on Linux the
    /// target of `/proc/self/fd/N`, elsewhere the path resolved and then proven to name the
    /// descriptor's file. Either way the result is checked to name, now, the same file
    /// (device and inode) as the descriptor, so a decision taken on this path (such as the
    /// consent to open a native library) is about the bytes this descriptor reads, however the
    /// path that was opened is changed afterwards. A file deleted or moved since it was opened
    /// is an error.
    #[cfg(unix)]
    pub fn real_path(&self) -> Result<PathBuf> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::MetadataExt;
        let by_descriptor = std::fs::read_link(format!("/proc/self/fd/{}", self.file.as_raw_fd()));
        let real = match by_descriptor {
            Ok(p) if p.is_absolute() => p,
            // No procfs: resolve the path, then prove it names the descriptor's file below.
            _ => std::fs::canonicalize(&self.path).map_err(|e| io_at(&self.path, e))?,
        };
        // Unix descriptors always report one (see `identity`).
        let held = self.identity.ok_or_else(|| Error::value(format!("{}: no file identity", self.path.display())))?;
        let named = std::fs::symlink_metadata(&real).ok().filter(|m| m.is_file());
        match named {
            Some(m) if (FileIdentity { device: m.dev(), inode: m.ino() }) == held => Ok(real),
            _ => Err(Error::value(format!(
                "{}: the file was moved, replaced or deleted while it was opened (it is no longer at {})",
                self.path.display(),
                real.display()
            ))),
        }
    }

    /// The open file (a regular file; blocking reads), e.g. to memory-map or to seek in.
    pub fn into_file(self) -> File {
        self.file
    }

    /// Reads the whole file into `buf`, whose length must be [`len`](Self::len): in chunks of
    /// [`CHUNK`] bytes with `poll` called between them and once at the end, then up to eight bytes more,
    /// which must not exist.
    pub fn read_exact_into(&mut self, buf: &mut [u8], poll: Option<&PollHook>) -> Result<()> {
        if buf.len() as u64 != self.len {
            return Err(Error::value(format!(
                "{}: a buffer of {} bytes for a file of {} bytes",
                self.path.display(),
                buf.len(),
                self.len
            )));
        }
        for chunk in buf.chunks_mut(CHUNK) {
            if let Some(poll) = poll {
                poll()?;
            }
            self.file.read_exact(chunk).map_err(|e| match e.kind() {
                std::io::ErrorKind::UnexpectedEof => {
                    Error::value(format!("{}: the file shrank while it was read", self.path.display()))
                }
                _ => io_at(&self.path, e),
            })?;
        }
        // Eight bytes: some procfs files (pagemap) refuse reads of fewer.
        let mut more = [0u8; 8];
        loop {
            match self.file.read(&mut more) {
                Ok(0) => break,
                Ok(_) => {
                    return Err(Error::value(format!(
                        "{}: the file holds more than the {} bytes it reports (a file that grows, or a \
                         special file such as one of /proc); only regular files of a fixed size are read",
                        self.path.display(),
                        self.len
                    )))
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_at(&self.path, e)),
            }
        }
        if let Some(poll) = poll {
            poll()?;
        }
        Ok(())
    }

    /// Reads the whole file into a new vector ([`read_exact_into`](Self::read_exact_into)),
    /// allocated fallibly.
    pub fn read_to_vec(mut self, poll: Option<&PollHook>) -> Result<Vec<u8>> {
        let len = usize::try_from(self.len)
            .map_err(|_| Error::alloc(u128::from(self.len), format!("reading {}", self.path.display())))?;
        let mut out = Vec::new();
        out.try_reserve_exact(len)
            .map_err(|_| Error::alloc(len as u128, format!("reading {}", self.path.display())))?;
        out.resize(len, 0);
        self.read_exact_into(&mut out, poll)?;
        Ok(out)
    }
}

/// `e` with the path in front, keeping its kind (a missing file stays "not found").
fn io_at(path: &Path, e: std::io::Error) -> Error {
    std::io::Error::new(e.kind(), format!("{}: {e}", path.display())).into()
}

#[cfg(unix)]
fn open_nonblocking(path: &Path) -> std::io::Result<File> {
    use rustix::fs::{fcntl_getfl, fcntl_setfl, OFlags};
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlags::NONBLOCK | OFlags::NOCTTY).bits() as i32)
        .open(path)?;
    // Reads of a regular file never block anyway, but whoever gets the file (a zip reader, a
    // memory map) should find an ordinary descriptor.
    let flags = fcntl_getfl(&file)?;
    fcntl_setfl(&file, flags - OFlags::NONBLOCK)?;
    Ok(file)
}

#[cfg(not(unix))]
fn open_nonblocking(path: &Path) -> std::io::Result<File> {
    File::open(path)
}

#[cfg(unix)]
fn identity(meta: &std::fs::Metadata) -> Option<FileIdentity> {
    use std::os::unix::fs::MetadataExt;
    Some(FileIdentity { device: meta.dev(), inode: meta.ino() })
}

#[cfg(not(unix))]
fn identity(_: &std::fs::Metadata) -> Option<FileIdentity> {
    None
}

/// What `meta` is, when it is not a regular file.
fn not_regular(meta: &std::fs::Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_file() {
        return None;
    }
    if t.is_dir() {
        return Some("a directory");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return Some("a fifo");
        }
        if t.is_char_device() {
            return Some("a character device");
        }
        if t.is_block_device() {
            return Some("a block device");
        }
        if t.is_socket() {
            return Some("a socket");
        }
    }
    Some("a special file")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn reads_a_regular_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"hello").unwrap();
        assert_eq!(read(&p, &ReadOptions::default()).unwrap(), b"hello");
        std::fs::write(&p, b"").unwrap();
        assert_eq!(read(&p, &ReadOptions::default()).unwrap(), b"");
    }

    #[cfg(unix)]
    #[test]
    fn identity_tells_links_to_one_file_from_two_files() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&a, b"x").unwrap();
        std::fs::write(&b, b"x").unwrap();
        std::os::unix::fs::symlink(&a, dir.path().join("sym")).unwrap();
        std::fs::hard_link(&a, dir.path().join("hard")).unwrap();
        let id = |name: &str| open(&dir.path().join(name), DEFAULT_MAX_INPUT).unwrap().identity().unwrap();
        assert_eq!(id("a"), id("sym"));
        assert_eq!(id("a"), id("hard"));
        assert_eq!(id("a"), id("./a"));
        assert_ne!(id("a"), id("b"));
    }

    #[test]
    fn a_missing_file_keeps_its_kind_and_names_the_path() {
        let e = read(Path::new("/nonexistent/x"), &ReadOptions::default()).unwrap_err();
        assert!(matches!(e.kind(), crate::ErrorKind::Io(io) if io.kind() == std::io::ErrorKind::NotFound), "{e}");
        assert!(e.to_string().contains("/nonexistent/x"), "{e}");
    }

    #[test]
    fn special_files_are_refused_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        let e = read(dir.path(), &ReadOptions::default()).unwrap_err().to_string();
        assert!(e.contains("expected a regular file, found a directory"), "{e}");
        let e = read(Path::new("/dev/zero"), &ReadOptions::default()).unwrap_err().to_string();
        assert!(e.contains("/dev/zero: expected a regular file, found a character device"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_without_a_writer_is_refused_not_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("fifo");
        rustix::fs::mkfifoat(rustix::fs::CWD, &p, rustix::fs::Mode::from_raw_mode(0o600)).unwrap();
        // A blocking open would wait here forever: no process opens the fifo for writing.
        let e = read(&p, &ReadOptions::default()).unwrap_err().to_string();
        assert!(e.contains("expected a regular file, found a fifo"), "{e}");
    }

    #[test]
    fn procfs_files_are_refused_after_one_byte_more_than_they_report() {
        // /proc/self/status reports 0 bytes and holds hundreds.
        let p = Path::new("/proc/self/status");
        if !p.exists() {
            return;
        }
        let e = read(p, &ReadOptions::default()).unwrap_err().to_string();
        assert!(e.contains("holds more than the 0 bytes it reports"), "{e}");
    }

    #[test]
    fn the_limit_is_checked_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big");
        std::fs::File::create(&p).unwrap().set_len(1 << 40).unwrap(); // sparse: costs nothing
        let e = read(&p, &ReadOptions { max_bytes: 1 << 30, poll: None }).unwrap_err().to_string();
        assert!(e.contains("1099511627776 bytes, more than the input size limit of 1073741824 bytes"), "{e}");
    }

    #[test]
    fn the_poll_hook_runs_between_chunks_and_its_error_stops_the_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, vec![7u8; 3 * CHUNK + 1]).unwrap();
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        let hook: PollHook = Arc::new(move || {
            seen.fetch_add(1, Ordering::Relaxed);
            Ok(())
        });
        let opts = ReadOptions { poll: Some(hook), ..Default::default() };
        assert_eq!(read(&p, &opts).unwrap().len(), 3 * CHUNK + 1);
        assert_eq!(calls.load(Ordering::Relaxed), 5, "once per chunk (4) and once at the end");

        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        let hook: PollHook = Arc::new(move || {
            if seen.fetch_add(1, Ordering::Relaxed) == 1 {
                return Err(Error::value("interrupted"));
            }
            Ok(())
        });
        let mut f = open(&p, DEFAULT_MAX_INPUT).unwrap();
        let mut buf = vec![0u8; f.len() as usize];
        assert_eq!(f.read_exact_into(&mut buf, Some(&hook)).unwrap_err().to_string(), "interrupted");
        assert_eq!(calls.load(Ordering::Relaxed), 2, "stopped at the second chunk");
        assert!(buf[CHUNK..].iter().all(|&b| b == 0), "nothing read after the hook's error");
    }

    #[test]
    fn a_file_that_shrinks_while_read_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, vec![1u8; 100]).unwrap();
        let mut f = open(&p, DEFAULT_MAX_INPUT).unwrap();
        std::fs::OpenOptions::new().write(true).open(&p).unwrap().set_len(50).unwrap();
        let mut buf = vec![0u8; 100];
        let e = f.read_exact_into(&mut buf, None).unwrap_err().to_string();
        assert!(e.contains("the file shrank while it was read"), "{e}");
    }

    #[test]
    fn the_descriptor_is_blocking_again() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"x").unwrap();
        let f = open(&p, DEFAULT_MAX_INPUT).unwrap().into_file();
        let flags = rustix::fs::fcntl_getfl(&f).unwrap();
        assert!(!flags.contains(rustix::fs::OFlags::NONBLOCK));
    }

    #[cfg(unix)]
    #[test]
    fn the_real_path_is_the_descriptors_whatever_the_link_points_to_later() {
        let dir = tempfile::tempdir().unwrap();
        let real_dir = std::fs::canonicalize(dir.path()).unwrap();
        let (a, b, link) = (real_dir.join("a"), real_dir.join("b"), dir.path().join("link"));
        std::fs::write(&a, b"a").unwrap();
        std::fs::write(&b, b"b").unwrap();
        std::os::unix::fs::symlink(&a, &link).unwrap();
        let f = open(&link, DEFAULT_MAX_INPUT).unwrap();
        // The link now points elsewhere: the descriptor (and its real path) is still a's.
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(&b, &link).unwrap();
        assert_eq!(f.real_path().unwrap(), a);
        let id = f.identity().unwrap();
        assert_eq!(f.read_to_vec(None).unwrap(), b"a");
        assert_eq!(open(&a, DEFAULT_MAX_INPUT).unwrap().identity().unwrap(), id, "same file, same identity");
        assert_ne!(open(&link, DEFAULT_MAX_INPUT).unwrap().identity().unwrap(), id);
        // A file replaced after it was opened has no real path to judge it by.
        let f = open(&a, DEFAULT_MAX_INPUT).unwrap();
        std::fs::rename(&b, &a).unwrap();
        let e = f.real_path().unwrap_err().to_string();
        assert!(e.contains("moved, replaced or deleted while it was opened"), "{e}");
    }
}
