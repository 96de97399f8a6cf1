//! Replays the `tvm_import` fuzz corpus (`fuzz/corpus/tvm_import/`: seeds and every input the
//! fuzzer kept) through the fuzz target's checks, so that what the fuzzer found stays fixed: no
//! reader may panic, and a program that decodes passes the verifier and round-trips through
//! relaxvm's format.

use relaxvm_tvm::{elf, library_bin, vmexec};
use std::path::PathBuf;

/// The fuzz target's checks for one input; true when a program decoded.
fn check(data: &[u8]) -> bool {
    let decoded = match vmexec::read(data) {
        Ok(exe) => {
            let bytes = exe.save_to_bytes();
            let again = relaxvm::format::load_bytes(&bytes).expect("a verified program saves and loads");
            assert_eq!(again.save_to_bytes(), bytes);
            true
        }
        Err(_) => false,
    };
    if let Ok(modules) = library_bin::modules(data) {
        let _ = library_bin::vm_executable(&modules);
    }
    if elf::validate(data).is_ok() {
        let _ = elf::exported_functions(data);
        let _ = elf::exported_data(data);
        if let Ok(Some(blob)) = elf::exported_symbol_bytes(data, "__tvm_ffi__library_bin") {
            let _ = library_bin::modules(blob);
        }
    }
    decoded
}

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
