//! Replays the `tvm_import` fuzz corpus (`fuzz/corpus/tvm_import/`: seeds and every input the
//! fuzzer kept) through the fuzz target's checks, so that what the fuzzer found stays fixed: no
//! reader may panic, and a program that decodes passes the verifier and round-trips through
//! relaxvm's format.

#[path = "support/tvm_import_check.rs"]
mod tvm_import_check;

use std::path::PathBuf;
use tvm_import_check::check;

#[test]
fn tvm_import_corpus_replays_without_panics() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/tvm_import");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    let (mut decoded, mut failed) = (0, Vec::new());
    for path in &paths {
        let data = std::fs::read(path).unwrap();
        match std::panic::catch_unwind(|| check(&data)) {
            Ok(d) => decoded += usize::from(d),
            Err(_) => failed.push(path.file_name().unwrap().to_string_lossy().into_owned()),
        }
    }
    println!("{} inputs, {decoded} decoded to a program", paths.len());
    assert!(paths.len() >= 2, "the corpus holds at least its seeds");
    assert!(failed.is_empty(), "inputs that panicked: {failed:?}");
}
