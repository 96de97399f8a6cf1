//! The `interp` fuzz target's check in `cargo test`: replays its corpus (`fuzz/corpus/interp/`:
//! seeds, inputs the fuzzer kept, and every input that ever failed) and runs a few hundred
//! more generated programs, through the same generator (`support/gen_program.rs`).

#[path = "support/gen_program.rs"]
mod gen_program;

use arbitrary::Unstructured;
use relaxvm::Executable;
use std::path::PathBuf;

#[test]
fn interp_corpus_replays_without_panics() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/interp");
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    assert!(entries.len() >= 10, "the corpus lost its seeds ({} files)", entries.len());
    for path in entries {
        let data = std::fs::read(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        std::panic::catch_unwind(|| gen_program::run(&data))
            .unwrap_or_else(|_| panic!("{name} fails the interp fuzz check (replay: cargo fuzz run interp {name})"));
    }
}

/// The generator's promise: nearly every input becomes a program the verifier accepts (else
/// the fuzzer would spend its time on rejected programs), and running them finds no failure.
#[test]
fn generated_programs_pass_the_verifier_and_run() {
    let total = 400;
    let mut passed = 0;
    for seed in 0..total {
        let data = gen_program::noise(seed, 64 + (seed as usize % 7) * 128);
        let program = gen_program::generate(&mut Unstructured::new(&data)).expect("generation never fails");
        passed += usize::from(Executable::from_parts(program.parts).is_ok());
        gen_program::run(&data);
    }
    assert!(passed * 100 >= total as usize * 95, "only {passed} of {total} generated programs pass the verifier");
}

/// Saved inputs keep their meaning: the generator's builtin table is pinned, append-only, and
/// covers every registered builtin (but those it skips on purpose).
#[test]
fn pinned_builtins_match_the_registry() {
    let registered = relaxvm_builtins::builtin_names();
    let pinned = gen_program::PINNED_BUILTINS;
    let not_registered: Vec<_> = pinned.iter().filter(|n| !registered.contains(n)).collect();
    assert!(
        not_registered.is_empty(),
        "the pinned fuzz table names builtins that are not registered: {not_registered:?}; saved fuzz inputs \
         that call them change meaning, so regenerate fuzz/corpus/interp when removing one"
    );
    let mut unique = pinned.to_vec();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), pinned.len(), "the pinned fuzz table names a builtin twice");
    let missing: Vec<_> =
        registered.iter().filter(|n| !pinned.contains(n) && !gen_program::UNPINNED_BUILTINS.contains(n)).collect();
    assert!(
        missing.is_empty(),
        "builtins the interp fuzz target never calls: {missing:?}; append them at the end of \
         PINNED_BUILTINS in builtins/tests/support/gen_program.rs (never reorder it)"
    );
}
