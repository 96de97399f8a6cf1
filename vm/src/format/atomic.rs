//! Atomic file replacement, shared by `save_file` and the CLI's outputs.

use std::io::{BufWriter, Write};
use std::path::Path;

/// Writes a file at `path` through `fill`, replacing it atomically: the bytes go to a
/// temporary file in the same folder (`tempfile`), flushed to disk and renamed over `path`
/// once complete, so a failure (a full disk, Ctrl-C, an error from `fill`) never leaves half
/// a file, and readers that hold the old file open keep seeing the old bytes.
///
/// The file gets the permissions `File::create` would give (0o666 less the umask), not
/// `tempfile`'s private 0o600: an executable written here is an ordinary output file.
pub fn write_atomically<E: From<std::io::Error>>(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> Result<(), E>,
) -> Result<(), E> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut builder = tempfile::Builder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let mut out = BufWriter::new(builder.tempfile_in(dir)?);
    fill(&mut out)?;
    let tmp = out.into_inner().map_err(|e| e.into_error())?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
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
}
