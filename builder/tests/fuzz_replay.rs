//! Replays the `asm` fuzz corpus (`fuzz/corpus/asm/`: hand-written seeds, inputs the fuzzer
//! kept, and every input that ever crashed the assembler) through the fuzz target's check:
//! `assemble` returns an error or an executable whose `as_text()` assembles to the same text.

use relaxvm_builder::assemble;
use std::path::PathBuf;

/// The fuzz target's check, for one input. Returns true when the input assembled.
fn check(data: &[u8]) -> bool {
    let text = String::from_utf8_lossy(data);
    let Ok(exe) = assemble(&text) else { return false };
    let printed = exe.as_text();
    let again = assemble(&printed).unwrap_or_else(|e| panic!("as_text() does not assemble: {e}\n{printed}"));
    assert_eq!(again.as_text(), printed, "assemble(as_text()) prints the same text");
    true
}

#[test]
fn asm_corpus_replays_and_round_trips() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/asm");
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    let (mut total, mut assembled) = (0, 0);
    for path in entries {
        let data = std::fs::read(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let ok = std::panic::catch_unwind(|| check(&data))
            .unwrap_or_else(|_| panic!("{name} fails the asm fuzz check (replay: cargo fuzz run asm {name})"));
        // The hand-written seeds are valid programs: they must keep assembling.
        if name.starts_with("seed-") {
            let text = String::from_utf8_lossy(&data);
            assert!(ok, "seed {name} no longer assembles: {}", assemble(&text).unwrap_err());
        }
        total += 1;
        assembled += usize::from(ok);
    }
    assert!(total >= 6, "the corpus lost its seeds ({total} files)");
    assert!(assembled >= 5, "only {assembled} of {total} corpus files assemble");
}
