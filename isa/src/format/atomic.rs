//! Atomic file replacement, shared by `save_file`, `Trace::save` and the CLI's outputs.
//!
//! What may be replaced: a missing file or a regular file. Anything else already at the path
//! (a fifo, a device such as `/dev/null`, a directory, a socket) is refused with an error
//! rather than replaced by a regular file, which as root would replace `/dev/null` itself. A
//! symbolic link is followed, as a shell's `>` follows it: the file it points to (which must
//! be a regular file, or missing in an existing folder) is replaced, next to its real path,
//! and the link stays a link. To write to standard output, the CLI takes `-o -`.
//!
//! The check runs before the temporary file is made, so a special file that someone who can
//! write the output folder puts at the path between the check and the rename is still
//! replaced: it guards against paths that name special files, not against a concurrent writer
//! of the folder (which could replace the file itself anyway).

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Writes a file at `path` through `fill`, replacing it atomically: the bytes go to a
/// temporary file in the same folder (`tempfile`), flushed to disk and renamed over `path`
/// once complete, so a failure (a full disk, Ctrl-C, an error from `fill`) never leaves half
/// a file, and readers that hold the old file open keep seeing the old bytes.
///
/// `path` must not name anything but a regular file ([`output_target`]); `fill` is not called
/// otherwise. Every I/O error names `path` (and, for a symbolic link, the file it points to),
/// never the temporary file; errors from `fill` are returned as they are.
///
/// Permissions: a file that replaces an existing one gets that file's permission bits
/// (`rwx` for owner, group and others; set-id and sticky bits are dropped), as `open(path,
/// "w")`, `cp` or `numpy.save` keep them, so a private file stays private. A new file gets
/// those `File::create` would give (0o666 less the umask), not `tempfile`'s private 0o600.
pub fn write_atomically<E: From<std::io::Error>>(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> Result<(), E>,
) -> Result<(), E> {
    let target = output_target(path)?;
    let named = |e: std::io::Error| at_output(path, &target, e);
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut builder = tempfile::Builder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let tmp = builder.tempfile_in(dir).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound && !dir.is_dir() {
            named(std::io::Error::new(
                e.kind(),
                format!("cannot create the output: folder {} does not exist", dir.display()),
            ))
        } else {
            named(std::io::Error::new(e.kind(), format!("cannot create the output in folder {}: {e}", dir.display())))
        }
    })?;
    keep_mode_of_replaced(&target, tmp.as_file()).map_err(named)?;
    let mut out = NamedWriter { out: BufWriter::new(tmp), path, target: &target };
    fill(&mut out)?;
    let tmp = out.out.into_inner().map_err(|e| named(e.into_error()))?;
    tmp.as_file().sync_all().map_err(named)?;
    tmp.persist(&target).map_err(|e| named(e.error))?;
    Ok(())
}

/// The temporary file's writer, whose errors (a full disk) name the output path, not the
/// temporary file: `fill` passes them on as they are.
struct NamedWriter<'a> {
    out: BufWriter<tempfile::NamedTempFile>,
    path: &'a Path,
    target: &'a Path,
}

impl Write for NamedWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.out.write(buf).map_err(|e| at_output(self.path, self.target, e))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush().map_err(|e| at_output(self.path, self.target, e))
    }
}

/// Gives `tmp` the permission bits of the regular file at `target`, if there is one.
#[cfg(unix)]
fn keep_mode_of_replaced(target: &Path, tmp: &std::fs::File) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(target) {
        // fchmod on the descriptor (not the temporary file's path, which another process could
        // replace): only the rwx bits, never set-id bits a new file should not inherit.
        Ok(old) if old.is_file() => {
            tmp.set_permissions(std::fs::Permissions::from_mode(old.permissions().mode() & 0o777))
        }
        _ => Ok(()),
    }
}

#[cfg(not(unix))]
fn keep_mode_of_replaced(_target: &Path, _tmp: &std::fs::File) -> std::io::Result<()> {
    Ok(())
}

/// `e` (its kind kept: a missing folder stays "not found") naming the output path `path`, and
/// the file `target` it resolved to when that differs (a symbolic link).
fn at_output(path: &Path, target: &Path, e: std::io::Error) -> std::io::Error {
    let place = if target == path {
        path.display().to_string()
    } else {
        format!("{} (a symbolic link to {})", path.display(), target.display())
    };
    std::io::Error::new(e.kind(), format!("{place}: {e}"))
}

/// The path [`write_atomically`] replaces for `path`: `path` itself when nothing or a regular
/// file is there, the real path of the file a symbolic link points to (a regular file, or a
/// missing one), and an `InvalidInput` error naming what is there otherwise.
pub fn output_target(path: &Path) -> std::io::Result<PathBuf> {
    let refuse = |what: String| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{}: {what}, not a regular file; an output only replaces regular files (remove it, or write \
                 elsewhere; the command-line tool writes to standard output with -o -)",
                path.display()
            ),
        )
    };
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(path.to_path_buf()),
        Err(e) => return Err(at_output(path, path, e)),
    };
    if meta.file_type().is_file() {
        return Ok(path.to_path_buf());
    }
    if !meta.file_type().is_symlink() {
        return Err(refuse(format!("there is {}", kind(&meta))));
    }
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => std::fs::canonicalize(path).map_err(|e| at_output(path, path, e)),
        Ok(m) => Err(refuse(format!("a symbolic link to {}", kind(&m)))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // A dangling link: its target is created, if its folder exists.
            let link = std::fs::read_link(path).map_err(|e| at_output(path, path, e))?;
            let target = match path.parent() {
                Some(dir) if link.is_relative() => dir.join(&link),
                _ => link,
            };
            match std::fs::symlink_metadata(&target) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    let dir = target.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
                    let name = target.file_name().ok_or_else(|| refuse("a symbolic link to no file".into()))?;
                    let real = std::fs::canonicalize(dir).map_err(|e| {
                        let why = match e.kind() {
                            std::io::ErrorKind::NotFound => format!("folder {} does not exist", dir.display()),
                            _ => format!("folder {}: {e}", dir.display()),
                        };
                        at_output(
                            path,
                            &target,
                            std::io::Error::new(e.kind(), format!("cannot create the output: {why}")),
                        )
                    })?;
                    Ok(real.join(name))
                }
                // A chain that ends nowhere, or a loop.
                _ => Err(refuse("a symbolic link that does not end at a file".into())),
            }
        }
        Err(e) => Err(at_output(path, path, e)),
    }
}

/// What `meta` describes, for messages.
fn kind(meta: &std::fs::Metadata) -> &'static str {
    let t = meta.file_type();
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a fifo";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_dir() {
        "a directory"
    } else {
        "a special file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        write_atomically::<std::io::Error>(&path, |w| w.write_all(b"first")).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
        let err = write_atomically::<std::io::Error>(&path, |w| {
            w.write_all(b"half")?;
            Err(std::io::Error::other("stopped"))
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "stopped");
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
        // No temporary file is left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[cfg(unix)]
    #[test]
    fn permissions_follow_the_umask_like_file_create() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let made = dir.path().join("made");
        std::fs::File::create(&made).unwrap();
        let ours = dir.path().join("ours");
        write_atomically::<std::io::Error>(&ours, |w| w.write_all(b"x")).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&ours), mode(&made));
    }

    fn write(path: &Path) -> std::io::Result<()> {
        write_atomically::<std::io::Error>(path, |w| w.write_all(b"new"))
    }

    #[test]
    fn directories_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let e = write(&sub).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("sub: there is a directory, not a regular file"), "{e}");
        assert!(sub.is_dir());
    }

    #[cfg(unix)]
    #[test]
    fn fifos_and_links_to_special_files_are_refused_and_left_alone() {
        use std::os::unix::fs::FileTypeExt;
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::from_raw_mode(0o600)).unwrap();
        let e = write(&fifo).unwrap_err().to_string();
        assert!(e.contains("fifo: there is a fifo, not a regular file"), "{e}");
        assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
        let link = dir.path().join("null");
        std::os::unix::fs::symlink("/dev/null", &link).unwrap();
        let e = write(&link).unwrap_err().to_string();
        assert!(e.contains("null: a symbolic link to a character device, not a regular file"), "{e}");
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert!(std::fs::metadata("/dev/null").unwrap().file_type().is_char_device());
        // Nothing was left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[cfg(unix)]
    #[test]
    fn a_link_to_a_regular_file_replaces_the_target_and_stays_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("models");
        std::fs::create_dir(&sub).unwrap();
        let target = sub.join("v3.rvx");
        std::fs::write(&target, b"old").unwrap();
        let link = dir.path().join("current.rvx");
        std::os::unix::fs::symlink("models/v3.rvx", &link).unwrap();
        write(&link).unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        // A dangling link creates its target.
        let dangling = dir.path().join("next.rvx");
        std::os::unix::fs::symlink("models/v4.rvx", &dangling).unwrap();
        write(&dangling).unwrap();
        assert_eq!(std::fs::read(sub.join("v4.rvx")).unwrap(), b"new");
        // A loop is refused.
        let a = dir.path().join("a");
        std::os::unix::fs::symlink("b", &a).unwrap();
        std::os::unix::fs::symlink("a", dir.path().join("b")).unwrap();
        // The loader's ELOOP (error 40 on Linux), named by the path written.
        let e = write(&a).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}: ", a.display())) && e.ends_with("(os error 40)"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn a_replaced_file_keeps_its_permission_bits() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("private.rvx");
        std::fs::write(&path, b"old").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        for old in [0o600, 0o640, 0o755, 0o4700] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(old)).unwrap();
            write(&path).unwrap();
            assert_eq!(mode(&path), old & 0o777, "{old:o}: rwx kept, set-id dropped");
        }
        // Through a link, the target's mode is the one kept.
        let link = dir.path().join("link.rvx");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        write(&link).unwrap();
        assert_eq!(mode(&path), 0o600);
    }

    #[cfg(unix)]
    #[test]
    fn errors_name_the_path_given_and_the_link_target() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nowhere").join("out.rvx");
        let e = write(&missing).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
        let text = e.to_string();
        assert!(text.starts_with(&format!("{}: cannot create the output: folder ", missing.display())), "{text}");
        assert!(text.contains("nowhere does not exist"), "{text}");
        // Not the temporary file's name (tempfile's ".tmpXXXXXX" inside the output folder).
        assert!(!text.contains("nowhere/.tmp"), "{text}");
        let link = dir.path().join("dangling.rvx");
        std::os::unix::fs::symlink(&missing, &link).unwrap();
        let e = write(&link).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
        let text = e.to_string();
        assert!(
            text.starts_with(&format!("{} (a symbolic link to {}): ", link.display(), missing.display())),
            "{text}"
        );
        assert!(text.contains("folder") && text.contains("nowhere does not exist"), "{text}");
    }
}
