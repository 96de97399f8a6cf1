//! The `.npy` reader's and writer's refusals (`relaxvm::npy`): a truncated file, a header it
//! cannot parse (what it expected and at which byte), a header without a required key, and a
//! dtype numpy has not. Each test checks the error's kind and whole message.

use relaxvm::npy::{from_bytes, to_bytes, NpyError};
use relaxvm::{DataType, Shape, Tensor};

/// A version-1 `.npy` file with `header` (padded as numpy pads it) and `data`.
fn npy(header: &str, data: &[u8]) -> Vec<u8> {
    let mut h = header.to_string();
    while !(10 + h.len() + 1).is_multiple_of(64) {
        h.push(' ');
    }
    h.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(data);
    out
}

/// The error reading `bytes`, as `{:?}` prints it (kind and message).
fn err(bytes: &[u8]) -> String {
    format!("{:?}", from_bytes(bytes).expect_err("refused"))
}

#[test]
fn a_truncated_file_is_a_format_error() {
    let good = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", &[0; 4]);
    assert!(from_bytes(&good).is_ok());
    for cut in [6, 7, 9] {
        assert_eq!(err(&good[..cut]), r#"Format("truncated header")"#, "cut at {cut}");
    }
    // The header's declared length runs past the file.
    assert_eq!(err(&good[..20]), r#"Format("truncated header")"#);
    let e = from_bytes(&good[..7]).expect_err("refused");
    assert!(matches!(e, NpyError::Format(_)));
    assert_eq!(e.to_string(), "invalid .npy data: truncated header");
}

#[test]
fn a_header_that_does_not_parse_says_what_was_expected_and_where() {
    let cases = [
        ("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}", r#"unexpected header key \"extra\""#),
        ("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } x", "text after the header dictionary"),
        ("{'descr': '<f4', 'shape': (1,), }", "the header needs 'descr', 'fortran_order' and 'shape'"),
        ("{'descr': 4, 'fortran_order': False, 'shape': (1,), }", "expected a string at byte 10 of the header"),
        (
            "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }",
            "expected True or False at byte 34 of the header",
        ),
        ("['descr': '<f4']", "expected '{' at byte 0 of the header"),
        ("{'descr' '<f4'}", "expected ':' at byte 9 of the header"),
    ];
    for (header, want) in cases {
        assert_eq!(err(&npy(header, &[0; 4])), format!("Format(\"{want}\")"), "{header}");
    }
}

#[test]
fn bfloat16_cannot_be_saved_as_npy() {
    let t = Tensor::from_bytes(DataType::BF16, Shape::from([1i64]), &[0, 0]).unwrap();
    let e = to_bytes(&t).expect_err("refused");
    assert_eq!(format!("{e:?}"), r#"Dtype("bfloat16 has no numpy dtype")"#);
    assert_eq!(e.to_string(), "unsupported .npy dtype: bfloat16 has no numpy dtype");
}

#[test]
fn a_dtype_relaxvm_has_not_names_the_descr_and_what_it_takes() {
    // complex64: numpy has it, relaxvm does not.
    let e =
        from_bytes(&npy("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", &[0; 8])).expect_err("refused");
    assert!(matches!(e, NpyError::Dtype(_)), "{e:?}");
    assert_eq!(
        e.to_string(),
        "unsupported .npy dtype: \"<c8\": expected bool, int8..int64, uint8..uint64, float16, float32 or float64"
    );
}
