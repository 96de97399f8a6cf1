//! Feeds arbitrary bytes to the loader: it must return an error or an executable, never
//! panic, hang or allocate without bound; what loads must save and load back identically.
//!
//! Each input is tried twice: with checksums (as users load) and without (so that mutations
//! reach the section decoders instead of stopping at the checksum).
#![no_main]

use libfuzzer_sys::fuzz_target;
use relaxvm::format::{self, LoadOptions, SaveOptions, VERSION_1};

fuzz_target!(|data: &[u8]| {
    let unchecked = LoadOptions::unchecked();
    for opts in [LoadOptions::default(), unchecked] {
        if let Ok(exe) = format::load_bytes_with(data, &opts) {
            let bytes = exe.save_to_bytes();
            let again = format::load_bytes(&bytes).expect("a saved executable loads");
            assert_eq!(again.save_to_bytes(), bytes, "save/load/save is stable");
            // Version 1 cannot record native libraries (the writer says so: an error, not a
            // panic); everything else it holds but signatures and the entry.
            let v1 = format::try_save_to_bytes(&exe, &SaveOptions { version: VERSION_1, ..Default::default() });
            match v1 {
                Ok(v1) => {
                    let from_v1 = format::load_bytes(&v1).expect("a version-1 file loads");
                    // Version 1 has no signatures or entry: it upgrades to the file without them.
                    let expected = exe.without_abi().save_to_bytes();
                    assert_eq!(from_v1.save_to_bytes(), expected, "version 1 upgrades to the same file");
                }
                Err(e) => assert!(!exe.libraries().is_empty(), "only native libraries keep version 1 out: {e}"),
            }
        }
    }
});
