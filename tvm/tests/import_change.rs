//! `load_module` reads a `.so` twice: once for the program, once when the loader opens the
//! library. A file that changes between the two reads is refused (the loader compares the
//! content hash of what it opened with the bytes the program came from).
//!
//! The change is ordered by events, not by timing: the model's path is a symbolic link to a
//! named pipe; the first read blocks on the pipe, and while it waits the link is switched to a
//! regular file holding the other bytes; only then does the pipe deliver the first bytes and
//! close, so the second read (which can only start after the first ended) opens the new file.

use relaxvm_tvm::import::load_module;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

/// Loads `link`, a link to a pipe that serves `first`; while the first read waits on the pipe,
/// the link is switched to a file holding `second`. Returns the outcome.
fn load_switching(dir: &Path, first: Vec<u8>, second: &[u8]) -> relaxvm::Result<relaxvm::Executable> {
    let (fifo, file, link) = (dir.join("pipe"), dir.join("second.so"), dir.join("mlp.so"));
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
    assert!(made.success(), "mkfifo {}", fifo.display());
    std::fs::write(&file, second).unwrap();
    std::os::unix::fs::symlink(&fifo, &link).unwrap();
    let writer = std::thread::spawn({
        let (fifo, file, link) = (fifo.clone(), file.clone(), link.clone());
        move || -> bool {
            // Opening the pipe for writing waits for the first reader.
            let Ok(mut pipe) = std::fs::OpenOptions::new().write(true).open(&fifo) else { return false };
            let next = link.with_extension("next");
            std::os::unix::fs::symlink(&file, &next).unwrap();
            std::fs::rename(&next, &link).unwrap();
            pipe.write_all(&first).is_ok()
        }
    });
    let result = load_module(&link);
    // Lets the writer go if the load never opened the pipe (a failure the caller reports).
    let _ = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&fifo);
    assert!(writer.join().unwrap(), "the first read took the pipe's bytes: {result:?}");
    result
}

#[test]
fn a_library_that_changes_while_it_is_loaded_is_refused() {
    let original = std::fs::read(data("mlp.so")).unwrap();
    // The same library with bytes past its end: still a valid library, another content hash.
    let mut changed = original.clone();
    changed.extend_from_slice(&[0; 64]);
    let dir = tempfile::tempdir().unwrap();
    let e = load_switching(dir.path(), original, &changed).expect_err("a changed library is refused");
    assert!(matches!(e.kind(), relaxvm::ErrorKind::Value(_)), "{e:?}");
    let link = dir.path().join("mlp.so");
    assert_eq!(e.to_string(), format!("{}: the file changed while it was being loaded", link.display()));
}

#[test]
fn the_same_bytes_read_twice_load() {
    // The control: the same switch with the same bytes loads, so the refusal above is the
    // change, not the pipe or the link.
    let original = std::fs::read(data("mlp.so")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let exe = load_switching(dir.path(), original.clone(), &original).expect("the library loads");
    assert_eq!(exe.bytecode_function_names(), vec!["main"]);
}
