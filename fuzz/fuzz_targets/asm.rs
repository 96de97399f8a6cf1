//! Feeds arbitrary text to the assembler: it must return an error or an executable, never
//! panic or hang; what assembles must print (`as_text()`) a text that assembles again to the
//! very same text.
//!
//! Bytes that are not UTF-8 are decoded lossily (invalid sequences become U+FFFD), so every
//! input reaches the parser. `builder/tests/fuzz_replay.rs` replays `corpus/asm/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(exe) = relaxvm_builder::assemble(&text) {
        let printed = exe.as_text();
        let again = relaxvm_builder::assemble(&printed)
            .unwrap_or_else(|e| panic!("as_text() does not assemble: {e}\n{printed}"));
        assert_eq!(again.as_text(), printed, "assemble(as_text()) prints the same text");
    }
});
