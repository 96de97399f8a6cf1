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

/// Refusals whose tests held only a part of the message that another message shares (attack
/// finding other/02), each with its whole message and the byte where.
#[test]
fn section_contents_refusals() {
    use relaxvm::DataType;
    let mut magic = craft(2, &minimal());
    magic[1] = b'X';
    // A constant of 2 float32 elements that says it has 4 bytes of data.
    let tensor = cat(&[&vint(1), &[9, DataType::F32.tag()], &vint(1), &vint(2), &vint(0), &vint(4)]);
    // A constants section with one byte after its last constant.
    let trailing = cat(&[&vint(0), &[0x00]]);
    // A float constant (tag 2) with 3 of its 8 bytes.
    let short = cat(&[&vint(1), &[2, 0, 0, 0]]);
    // A version 1 call whose destination register is 2^32.
    let v1_call = cat(&[&[0x00], &vint(1), &vint(0), &vint((1 << 32) + 1), &[0x01, 0x00]]);
    let got = [
        load_err(&magic),
        load_err(&craft(2, &minimal_with(1, &[0x40], 1, tensor))),
        load_err(&craft(2, &minimal_with(1, &[0x40], 1, trailing))),
        load_err(&craft(2, &minimal_with(1, &[0x40], 1, short))),
        load_err(&craft(1, &minimal_with(1, &v1_call, 2, vint(0)))),
    ];
    let want = [
        format!(
            "malformed executable file: header at byte 0: bad magic number {:02x?}: not a relaxvm executable (expected {MAGIC:02x?})",
            &magic[..MAGIC.len()]
        ),
        "malformed executable file: constants section at byte 38: tensor of 2 float32 elements with 4 bytes of data"
            .into(),
        "malformed executable file: constants section at byte 33: 1 unexpected bytes at the end of the section".into(),
        "malformed executable file: constants section at byte 34: 8 bytes needed, 3 left in the section".into(),
        "malformed executable file: instructions section at byte 39: register does not fit in 32 bits".into(),
    ];
    assert_eq!(got, want);
}

#[test]
fn a_save_into_a_folder_that_takes_no_files_names_the_folder() {
    // procfs takes no new files, even from root (which a permission-less folder would not stop).
    let e = sample().save("/proc/relaxvm-test.rvx", &Default::default()).unwrap_err();
    assert!(matches!(e.kind(), relaxvm::ErrorKind::Io(_)), "{e:?}");
    // The temporary file's name (random) ends the message.
    let e = e.to_string();
    let want =
        "I/O error: /proc/relaxvm-test.rvx: cannot create the output in folder /proc: No such file or directory \
                (os error 2) at path \"/proc/.tmp";
    assert!(e.starts_with(want) && e.ends_with('"'), "{e}");
}
