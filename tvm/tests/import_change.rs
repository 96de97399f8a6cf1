//! `load_module` reads a `.so` twice: once for the program, once when the loader opens the
//! library. A file that changes between the two reads is refused (the loader compares the
//! content hash of what it opened with the bytes the program came from). A named pipe serves
//! the two reads different bytes, in order: no race, no sleep.

use relaxvm_tvm::import::load_module;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

/// A named pipe at `path` that serves `contents[0]` to its first reader, `contents[1]` to its
/// second, and so on; returns the writer thread, which ends when every content is served or a
/// reader went away.
fn serve(path: &Path, contents: Vec<Vec<u8>>) -> std::thread::JoinHandle<usize> {
    let made = std::process::Command::new("mkfifo").arg(path).status().expect("mkfifo runs");
    assert!(made.success(), "mkfifo {}", path.display());
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        let mut served = 0;
        for bytes in contents {
            // Opening for writing waits for the next reader.
            let Ok(mut pipe) = std::fs::OpenOptions::new().write(true).open(&path) else { break };
            if pipe.write_all(&bytes).is_err() {
                break;
            }
            served += 1;
        }
        served
    })
}

/// Lets a writer thread blocked in `open` go (a reader that opens and leaves at once).
fn release(path: &Path) {
    let _ = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path);
}

#[test]
fn a_library_that_changes_while_it_is_loaded_is_refused() {
    let original = std::fs::read(data("mlp.so")).unwrap();
    // The same library with bytes past its end: still a valid library, another content hash.
    let mut changed = original.clone();
    changed.extend_from_slice(&[0; 64]);
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("mlp.so");
    let writer = serve(&fifo, vec![original, changed]);
    let result = load_module(&fifo);
    release(&fifo);
    assert_eq!(writer.join().unwrap(), 2, "both reads took place: {result:?}");
    let e = result.expect_err("a changed library is refused");
    assert!(matches!(e.kind(), relaxvm::ErrorKind::Value(_)), "{e:?}");
    assert_eq!(e.to_string(), format!("{}: the file changed while it was being loaded", fifo.display()));
}

#[test]
fn the_same_bytes_read_twice_load() {
    // The control: the pipe serving the same bytes twice loads (so the refusal above is the
    // change, not the pipe).
    let original = std::fs::read(data("mlp.so")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("mlp.so");
    let writer = serve(&fifo, vec![original.clone(), original]);
    let result = load_module(&fifo);
    release(&fifo);
    assert_eq!(writer.join().unwrap(), 2);
    let exe = result.expect("the library loads");
    assert_eq!(exe.bytecode_function_names(), vec!["main"]);
}
