//! The loader's refusals with their whole messages: what was expected, what was found, and the
//! byte where (the section or header, and its offset).

use super::common::*;
use relaxvm::format::{reseal, CURRENT_VERSION, MAGIC};

#[test]
fn header_and_section_table_refusals() {
    let mut producer = MAGIC.to_vec();
    producer.extend(vint(2));
    producer.extend(vint(2));
    producer.extend_from_slice(&[0xFF, 0xFE]);
    producer.extend(craft(2, &minimal())[MAGIC.len() + 1 + 1 + 5..].iter());
    let _ = reseal(&mut producer);
    let mut dup = minimal();
    dup.push(dup[0].clone());
    let got = [
        load_err(b"\x00"),
        load_err(&craft(u64::from(CURRENT_VERSION) + 1, &minimal())),
        load_err(&producer),
        load_err(&craft(2, &dup)),
        load_err(&craft(2, &minimal()[..3])),
    ];
    let v = CURRENT_VERSION;
    let want = [
        "malformed executable file: header at byte 0: file too short for the magic number".to_string(),
        format!(
            "malformed executable file: header at byte 4: unsupported format version {}: this build reads versions 1 to {v}",
            v + 1
        ),
        "malformed executable file: header at byte 6: the producer string is not UTF-8".into(),
        "malformed executable file: section header at byte 37: a second strings section".into(),
        "malformed executable file: section table at byte 11: the file has no instructions section".into(),
    ];
    assert_eq!(got, want);
}
