//! Golden files of every version, and the fuzz corpus.

use super::common::*;
use relaxvm::format::{
    self, inspect, load_bytes, load_bytes_with, LoadOptions, SaveOptions, VERSION_1, VERSION_2, VERSION_3, VERSION_4,
};
use relaxvm::{Executable, ExecutableParts};
use std::path::PathBuf;

// ---------------------------------------------------------------------------------------
// Golden files and the fuzz corpus.

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// The golden files: `sample()` in versions 1 and 2, `sample_v3()` in version 3. `RELAXVM_BLESS=1 cargo test` rewrites them
/// (only when the format deliberately changes; old versions' files should never change) and
/// the fuzz seeds.
#[test]
fn golden_files_load_and_run() {
    let bless = std::env::var_os("RELAXVM_BLESS").is_some_and(|v| v == "1");
    for version in [VERSION_1, VERSION_2, VERSION_3, VERSION_4] {
        let path = golden_dir().join(format!("v{version}.bin"));
        let opts = SaveOptions { version, producer: "relaxvm golden".into(), ..Default::default() };
        // Version 3 adds signatures and the entry, version 4 library references; older versions
        // cannot hold them.
        let expected = match version {
            VERSION_4 => with_library(sample_v3()),
            VERSION_3 => sample_v3(),
            _ => sample(),
        };
        if bless {
            std::fs::create_dir_all(golden_dir()).unwrap();
            std::fs::write(&path, format::save_to_bytes(&expected, &opts)).unwrap();
        }
        let bytes = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (generate it with RELAXVM_BLESS=1)", path.display()));
        let info = inspect(&bytes).unwrap();
        assert_eq!(info.version, version);
        let exe = format::load_file(&path).unwrap();
        assert_same(&expected, &exe);
        // The writer still produces exactly this version's bytes.
        assert_eq!(format::save_to_bytes(&exe, &SaveOptions { producer: info.producer, ..opts }), bytes);
        run(exe);
    }
    if bless {
        write_fuzz_seeds();
    }
}

/// Small valid files for the fuzzer to start from (the golden files are copied too).
fn write_fuzz_seeds() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/load");
    std::fs::create_dir_all(&dir).unwrap();
    let exe = sample();
    let stripped = SaveOptions { strip_debug: true, producer: String::new(), ..Default::default() };
    let mut tensor_only =
        minimal_with(1, &[0x40], 1, cat(&[&vint(1), &[9, 11], &vint(1), &vint(2), &vint(0), &vint(8)]));
    tensor_only.push((TENSOR_DATA, vec![0; 8]));
    let seeds: Vec<(&str, Vec<u8>)> = vec![
        ("golden-v1", std::fs::read(golden_dir().join("v1.bin")).unwrap()),
        ("golden-v2", std::fs::read(golden_dir().join("v2.bin")).unwrap()),
        ("golden-v3", std::fs::read(golden_dir().join("v3.bin")).unwrap()),
        ("sample-stripped-v1", format::save_to_bytes(&exe, &SaveOptions { version: 1, ..stripped.clone() })),
        ("sample-stripped-v2", format::save_to_bytes(&exe, &SaveOptions { version: 2, ..stripped.clone() })),
        ("sample-stripped-v3", format::save_to_bytes(&sample_v3(), &SaveOptions { version: 3, ..stripped.clone() })),
        ("golden-v4", std::fs::read(golden_dir().join("v4.bin")).unwrap()),
        ("sample-stripped-v4", format::save_to_bytes(&with_library(sample_v3()), &stripped)),
        (
            "empty",
            format::save_to_bytes(
                &Executable::from_parts(ExecutableParts::default()).unwrap(),
                &SaveOptions { version: 2, ..stripped.clone() },
            ),
        ),
        ("minimal-v1", craft(1, &minimal())),
        ("minimal-v2", craft(2, &minimal())),
        ("tensor", craft(2, &tensor_only)),
    ];
    for (name, bytes) in seeds {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}

/// Replays every input of the fuzz corpus (seeds and past crashes) through the fuzz target's
/// checks: none may panic.
#[test]
fn fuzz_corpus_replays_without_panics() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/load");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let data = std::fs::read(entry.unwrap().path()).unwrap();
        for opts in [LoadOptions::default(), LoadOptions::unchecked()] {
            if let Ok(exe) = load_bytes_with(&data, &opts) {
                let bytes = exe.save_to_bytes();
                let again = load_bytes(&bytes).expect("a saved executable loads");
                assert_eq!(again.save_to_bytes(), bytes);
                // The fuzz target's version-1 check (fuzz/fuzz_targets/load.rs), which must hold
                // on its own seeds: version 1 refuses only executables with native libraries.
                match format::try_save_to_bytes(&exe, &SaveOptions { version: 1, ..Default::default() }) {
                    Ok(v1) => assert_eq!(
                        load_bytes(&v1).expect("a version-1 file loads").save_to_bytes(),
                        exe.without_abi().save_to_bytes()
                    ),
                    Err(e) => assert!(!exe.libraries().is_empty(), "{e}"),
                }
            }
        }
        n += 1;
    }
    assert!(n > 0, "the corpus is empty");
}
