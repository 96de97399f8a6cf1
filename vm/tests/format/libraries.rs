//! References to native libraries (format version 4).

use super::common::*;
use relaxvm::format::{self, inspect, load_bytes, SaveOptions, VERSION_3};

#[test]
fn library_references_round_trip_in_version_4_only() {
    let exe = with_library(sample());
    let bytes = exe.save_to_bytes();
    let info = inspect(&bytes).unwrap();
    assert!(section(&info, "libraries").is_some());
    let back = load_bytes(&bytes).unwrap();
    assert_eq!(back.libraries().len(), 1);
    assert_eq!(back.libraries()[0].reference, exe.libraries()[0].reference);
    assert!(back.libraries()[0].loaded.is_none());
    assert_eq!(back.save_to_bytes(), bytes);
    assert!(back.stats().contains("Native libraries (#1): [/models/kernels.so]"), "{}", back.stats());
    // Older versions have no place for them: an error, not a file that silently lost them.
    let e = format::try_save_to_bytes(&exe, &SaveOptions { version: VERSION_3, ..Default::default() })
        .unwrap_err()
        .to_string();
    assert!(e.contains("version 3 cannot record the native libraries"), "{e}");
    // Without a library, no such section.
    assert!(section(&inspect(&sample().save_to_bytes()).unwrap(), "libraries").is_none());
}
