//! Hand-crafted malformed files: each must be an error naming where, never a panic or a huge allocation.

use super::common::*;
use relaxvm::format::{self, inspect, load_bytes, load_bytes_with, reseal, LoadOptions, CURRENT_VERSION, MAGIC};
use relaxvm::{ErrorKind, FuncInfo, Instruction};

#[test]
fn crafted_minimal_file_loads() {
    let exe = load_bytes(&craft(2, &minimal())).unwrap();
    assert_eq!(exe.funcs()[0].name, "main");
    assert_eq!(exe.funcs()[1], FuncInfo::packed("f"));
    assert_eq!(exe.instrs(), &[Instruction::Ret { result: 0 }]);
}

#[test]
fn bad_magic_and_future_versions_are_rejected() {
    let mut bytes = craft(2, &minimal());
    bytes[1] = b'X';
    assert!(load_err(&bytes).contains("bad magic number"));
    assert!(load_err(b"").contains("too short"));
    let future = craft(u64::from(CURRENT_VERSION) + 1, &minimal());
    let e = load_err(&future);
    assert!(
        e.contains(&format!("unsupported format version {}", CURRENT_VERSION + 1)) && e.contains("header at byte 4"),
        "{e}"
    );
    assert!(load_err(&craft(0, &minimal())).contains("unsupported format version 0"));
    assert!(load_err(&craft(u64::MAX, &minimal())).contains("unsupported format version"));
}

#[test]
fn every_truncation_is_an_error() {
    for bytes in [craft(2, &minimal()), sample().save_to_bytes(), sample_v3().save_to_bytes()] {
        for n in 0..bytes.len() {
            let e = load_err(&bytes[..n]);
            assert!(e.contains("byte"), "truncated at {n}: {e}");
        }
    }
}

#[test]
fn every_flipped_bit_is_caught() {
    let bytes = sample_v3().save_to_bytes();
    for i in 0..bytes.len() {
        for bit in [0, 3, 7] {
            let mut bad = bytes.clone();
            bad[i] ^= 1 << bit;
            assert!(
                format!("{:?}", load_bytes(&bad).expect_err("an error")).starts_with(r#"Format("#),
                "flipping bit {bit} of byte {i} went unnoticed"
            );
        }
    }
}

#[test]
fn load_file_checks_every_byte_and_trusted_mmap_only_the_metadata() {
    let bytes = sample().save_to_bytes();
    let info = inspect(&bytes).unwrap();
    let data = section(&info, "tensor data").unwrap().data.clone();
    let mut bad = bytes.clone();
    bad[data.start as usize] ^= 1;
    assert!(load_err(&bad).contains("data checksum mismatch"));
    let path = temp_path("data-crc");
    std::fs::write(&path, &bad).unwrap();
    assert!(format::load_file_with(&path, &LoadOptions::trusted_mmap()).is_ok());
    let e = format::load_file(&path).unwrap_err().to_string();
    assert!(e.contains("tensor data section at byte") && e.contains("corrupt"), "{e}");
    std::fs::remove_file(&path).unwrap();
    // Without checksums, corrupt metadata is still decoded safely.
    let unchecked = LoadOptions::unchecked();
    assert!(load_bytes_with(&bad, &unchecked).is_ok());
}

#[test]
fn unknown_sections_are_skipped() {
    let mut sections = minimal();
    sections.insert(1, (0x21, b"from the future".to_vec()));
    sections.push((0xE2, vec![7; 100])); // aligned, bulk, unknown
    sections.push((0x00, vec![]));
    let bytes = craft(2, &sections);
    let info = inspect(&bytes).unwrap();
    assert_eq!(info.sections.iter().filter(|s| s.name.is_none()).count(), 3);
    let exe = load_bytes(&bytes).unwrap();
    assert_eq!(exe.instrs(), &[Instruction::Ret { result: 0 }]);
    // A real file with an extra section spliced in before the checksum section.
    let real = sample().save_to_bytes();
    let at = inspect(&real).unwrap().sections.last().unwrap().header_offset as usize;
    let mut spliced = real[..at].to_vec();
    spliced.extend_from_slice(&[0x30, 0x07, 1, 2, 3]);
    spliced.extend_from_slice(&real[at..]);
    reseal(&mut spliced).unwrap();
    assert_same(&sample(), &load_bytes(&spliced).unwrap());
}

#[test]
fn framing_errors() {
    // Section length past the end of the file.
    let mut bytes = craft(2, &minimal());
    let at = inspect(&bytes).unwrap().sections[0].header_offset as usize;
    let mut huge = bytes[..at + 1].to_vec();
    huge.extend(vint(1 << 62));
    huge.extend_from_slice(&bytes[at + 2..]);
    let e = load_err(&huge);
    assert!(e.contains("section length 4611686018427387904 exceeds") && e.contains("byte"), "{e}");
    // Duplicate sections, missing sections, bytes after the checksum.
    let mut dup = minimal();
    dup.push(dup[0].clone());
    expect_err(&dup, "a second strings section");
    expect_err(&minimal()[..3], "no instructions section");
    bytes.push(0);
    assert!(load_err(&bytes).contains("after the checksum section"));
    // A known section with the wrong flags.
    let mut flagged = minimal();
    flagged[0].0 |= 0x40;
    expect_err(&flagged, "strings section with id byte 0x41");
}

#[test]
fn misaligned_tensor_data_is_rejected() {
    let tensor = cat(&[&[9, 11], &vint(1), &vint(2), &vint(0), &vint(8)]); // f32 [2] at 0, 8 bytes
    let consts = cat(&[&vint(1), &tensor]);
    let ok = |blob_id: u8| {
        let mut s = minimal_with(1, &[0x40], 1, consts.clone());
        s.push((blob_id, vec![0; 8]));
        s
    };
    let exe = load_bytes(&craft(2, &ok(TENSOR_DATA))).unwrap();
    assert_eq!(exe.constants()[0].as_tensor().unwrap().to_vec::<f32>().unwrap(), vec![0.0, 0.0]);
    // Not flagged as aligned.
    expect_err(&ok(0x47), "tensor data section with id byte 0x47");
    // Aligned to only 16 bytes.
    let mut f = craft(2, &minimal_with(1, &[0x40], 1, consts.clone()));
    let at = inspect(&f).unwrap().sections.last().unwrap().header_offset as usize;
    let tail = f.split_off(at);
    f.extend_from_slice(&[TENSOR_DATA, 0x11, 0x21]);
    while !f.len().is_multiple_of(16) {
        f.push(0xCB);
    }
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(&tail);
    reseal(&mut f).unwrap_err();
    assert!(load_err(&f).contains("must be aligned to 64"));
    // Bad padding.
    let mut bytes = craft(2, &ok(TENSOR_DATA));
    let info = inspect(&bytes).unwrap();
    let data = section(&info, "tensor data").unwrap().data.start as usize;
    bytes[data - 1] = 0;
    reseal(&mut bytes).unwrap_err();
    assert!(load_err(&bytes).contains("padding byte 0x00"));
    // A tensor offset that is not a multiple of 64.
    let tensor = cat(&[&[9, 11], &vint(1), &vint(2), &vint(4), &vint(8)]);
    let mut s = minimal_with(1, &[0x40], 1, cat(&[&vint(1), &tensor]));
    s.push((TENSOR_DATA, vec![0; 16]));
    expect_err(&s, "not a multiple of 64");
}

#[test]
fn out_of_range_indices_with_valid_checksums() {
    // Function index 9 in a call.
    expect_err(&minimal_with(1, &[0x10, 0x13, 0x40], 2, vint(0)), "function index 9 out of range");
    // Constant index 0 in an empty pool: call f(c[0]) with kinds byte 0x04.
    expect_err(&minimal_with(1, &[0x01, 0x03, 0x04, 0x01, 0x40], 2, vint(0)), "constant index 0 out of range");
    // String index out of range in the function table.
    let mut s = minimal();
    s[1].1 = cat(&[&vint(1), &vint(7 << 1 | 1), &vint(0), &vint(1), &vint(1), &vint(1)]);
    expect_err(&s, "string index 7 out of range");
    // Register 5 in a frame of 1: the verifier's error.
    let e = load_bytes(&craft(2, &minimal_with(1, &[0x45], 1, vint(0)))).unwrap_err();
    let v = e.as_invalid().unwrap_or_else(|| panic!("not a verifier error: {e}"));
    assert_eq!(v.kind, relaxvm::verify::VerifyErrorKind::RegisterOutside { reg: 5, size: 1 }, "{e}");
    assert_eq!((v.func.as_str(), v.pc, v.slot), ("main", Some(0), Some(relaxvm::bytecode::Slot::Result)));
    // A jump out of the function.
    let e = load_err(&craft(2, &minimal_with(1, &[0x80 | 8], 1, vint(0))));
    assert!(e.contains("leaves the function"), "{e}");
    // Instruction range past the stream.
    let e = load_err(&craft(
        2,
        &minimal_with(1, &[0x40], 1, vint(0))
            .into_iter()
            .map(|(id, d)| if id == INSTRUCTIONS { (id, vint(0)) } else { (id, d) })
            .collect::<Vec<_>>(),
    ));
    assert!(e.contains("outside the 0 instructions"), "{e}");
    // Parameter names of a function that does not exist, and in the wrong number.
    let mut s = minimal();
    s.push((PARAMS, cat(&[&vint(1), &vint(5), &vint(0)])));
    expect_err(&s, "function index 5 out of range");
    let mut s = minimal();
    s.push((PARAMS, cat(&[&vint(1), &vint(0), &vint(2), &vint(0), &vint(1)])));
    let e = load_err(&craft(2, &s));
    assert!(e.contains("2 parameter names for 1 inputs"), "{e}");
    // Location referring forward, and a location count that disagrees with the instructions.
    let mut s = minimal();
    s.push((LOCATIONS, cat(&[&vint(1), &[2], &vint(0), &vint(0), &vint(1), &vint(1)])));
    expect_err(&s, "must refer to an earlier location");
    let mut s = minimal();
    s.push((LOCATIONS, cat(&[&vint(1), &[1], &vint(0), &vint(3), &vint(1), &vint(1), &vint(1)])));
    expect_err(&s, "locations for 3 instructions");
    // Unknown tags and opcodes.
    let mut s = minimal();
    s[2].1 = cat(&[&vint(1), &[0x55]]);
    expect_err(&s, "unknown constant tag 0x55");
    let mut s = minimal();
    s[2].1 = cat(&[&vint(1), &[7, 99]]);
    expect_err(&s, "unknown dtype tag 99");
    let e = load_err(&craft(1, &minimal_with(1, &[0x09], 1, vint(0))));
    assert!(e.contains("unknown opcode 0x09") && e.contains("instructions section at byte"), "{e}");
}

#[test]
fn huge_counts_and_lengths_are_rejected_before_allocating() {
    let huge = 1u64 << 60;
    let mut s = minimal();
    s[0].1 = cat(&[&vint(huge), &vint(1)]);
    expect_err(&s, &format!("string count {huge} cannot fit"));
    let mut s = minimal();
    s[0].1 = cat(&[&vint(1), &vint(huge), b"main"]);
    expect_err(&s, "runs past the end of the section");
    let mut s = minimal();
    s[1].1 = cat(&[&vint(u64::MAX)]);
    expect_err(&s, "function count");
    expect_err(&minimal_with(1, &[0x40], 1, vint(huge)), "constant count");
    let mut s = minimal();
    s[3].1 = cat(&[&vint(huge), &[0x40]]);
    expect_err(&s, "instruction count");
    // A call with 2^60 + 15 arguments.
    expect_err(&minimal_with(1, &cat(&[&[0x0F], &vint(huge)]), 1, vint(0)), "argument count");
    let call = cat(&[&[0x1F], &vint(huge), &vint(1)]);
    expect_err(&minimal_with(1, &call, 1, vint(0)), "argument count");
    // Shapes and tensors with absurd dimensions.
    expect_err(&minimal_with(1, &[0x40], 1, cat(&[&vint(1), &[6], &vint(huge)])), "dimension count");
    let tensor = cat(&[&[9, 11], &vint(2), &vint(1 << 62), &vint(1 << 62), &vint(0), &vint(huge)]);
    expect_err(&minimal_with(1, &[0x40], 1, cat(&[&vint(1), &tensor])), "bytes of data");
    let tensor = cat(&[&[9, 0], &vint(1), &vint(huge), &vint(0), &vint(huge)]);
    let mut s = minimal_with(1, &[0x40], 1, cat(&[&vint(1), &tensor]));
    s.push((TENSOR_DATA, vec![0; 64]));
    expect_err(&s, "outside the 64 bytes of the tensor data section");
    // Deeply nested tuples.
    let mut deep = vint(1);
    for _ in 0..100 {
        deep.extend_from_slice(&[10]);
        deep.extend(vint(1));
    }
    deep.push(0);
    expect_err(&minimal_with(1, &[0x40], 1, deep), "nest deeper than 32");
    // A producer string longer than the file.
    let mut f = MAGIC.to_vec();
    f.extend(vint(2));
    f.extend(vint(huge));
    assert!(load_err(&f).contains("producer byte count"));
}

#[test]
fn location_bombs_hit_the_memory_budget() {
    // Entry k is callsite(k-1, k-1): 3 bytes each, 2^k nodes.
    let mut locs = vint(41);
    locs.extend_from_slice(&[1]);
    locs.extend(vint(0));
    for k in 0..40 {
        locs.push(2);
        locs.extend(vint(k));
        locs.extend(vint(k));
    }
    locs.extend(vint(1));
    locs.extend(vint(41));
    let mut s = minimal();
    s.push((LOCATIONS, locs));
    let e = load_err(&craft(2, &s));
    assert!(e.contains("too much memory") || e.contains("nests deeper"), "{e}");
    // One long string named a million times by parameter names.
    let long = "p".repeat(1 << 16);
    let mut s = minimal();
    s[0].1 = strings(&["main", "f", &long]);
    let n = 200_000u64;
    s[1].1 = cat(&[&vint(1), &vint(1), &vint(0), &vint(1), &vint(n), &vint(n)]);
    let mut params = cat(&[&vint(1), &vint(0), &vint(n)]);
    params.extend(std::iter::repeat_n(vint(2), n as usize).flatten());
    s.push((PARAMS, params));
    expect_err(&s, "too much memory");
}

/// `minimal()` with `main(x: tensor<[n], f32>) -> any` and `main` as the entry, built from
/// `sig` (the signatures section) and `entry`.
fn with_signature(sig: Vec<u8>, entry: Vec<u8>) -> Vec<(u8, Vec<u8>)> {
    let mut s = minimal();
    s[0].1 = strings(&["main", "f", "x", "n", "a", "b"]);
    s.push((SIGNATURES, sig));
    s.push((ENTRY, entry));
    s
}

/// One signature for function `func` with parameter names `names` (string indices), each
/// typed by `param`, and an `any` result.
fn sig_bytes(func: u64, names: &[u64], param: &[u8]) -> Vec<u8> {
    let mut out = cat(&[&vint(1), &vint(func), &vint(names.len() as u64)]);
    for n in names {
        out.extend(vint(*n));
        out.extend_from_slice(param);
    }
    out.push(0);
    out
}

#[test]
fn crafted_signature_and_entry_sections() {
    // tensor<[n], f32>: tag 4, flags dtype|rank, f32 (11), one dim, symbol string 3 (2*3 + 2).
    let tensor_n = cat(&[&[4, 3, 11], &vint(1), &vint(8)]);
    let good = with_signature(sig_bytes(0, &[2], &tensor_n), vint(0));
    let exe = load_bytes(&craft(3, &good)).unwrap();
    assert_eq!(exe.signature("main").unwrap().unwrap().to_string(), "(x: tensor<[n], f32>) -> any");
    assert_eq!(exe.func("main").unwrap().param_names, vec!["x"]);
    assert_eq!(exe.declared_entry(), Some("main"));

    let e = load_err(&craft(2, &good));
    assert!(e.contains("a signatures section, which needs format version 3, in a version-2 file"), "{e}");
    type Sections = Vec<(u8, Vec<u8>)>;
    let cases: Vec<(Sections, &str)> = vec![
        (with_signature(sig_bytes(5, &[2], &tensor_n), vint(0)), "function index 5 out of range"),
        (with_signature(sig_bytes(0, &[2], &[0x55]), vint(0)), "unknown type tag 0x55"),
        (with_signature(sig_bytes(0, &[9], &[0]), vint(0)), "string index 9 out of range"),
        (with_signature(cat(&[&sig_bytes(0, &[2], &[0]), &[0]]), vint(0)), "unexpected bytes"),
        (with_signature(cat(&[&vint(1 << 20), &[0; 8]]), vint(0)), "cannot fit"),
        (with_signature(sig_bytes(0, &[2], &tensor_n), vint(7)), "entry function index 7 out of range"),
        (with_signature(sig_bytes(0, &[2], &tensor_n), cat(&[&vint(0), &[0]])), "unexpected bytes"),
    ];
    for (sections, needle) in cases {
        let e = load_err(&craft(3, &sections));
        assert!(e.contains(needle), "expected {needle:?} in: {e}");
        assert!(e.contains("malformed executable file") && e.contains("byte"), "{e}");
    }
    // Well-formed sections the verifier rejects.
    let mut renamed = with_signature(sig_bytes(0, &[2], &[0]), vint(0));
    renamed.push((PARAMS, cat(&[&vint(1), &vint(0), &vint(1), &vint(3)])));
    let unsorted = cat(&[&[8], &vint(2), &vint(5), &[0], &vint(4), &[0]]);
    let invalid: Vec<(Sections, &str)> = vec![
        (with_signature(sig_bytes(0, &[2, 4], &[0]), vint(0)), "the signature has 2 parameter(s) for 1 inputs"),
        (with_signature(sig_bytes(1, &[], &[]), vint(0)), "packed function \"f\" has a signature"),
        (with_signature(sig_bytes(0, &[2], &[0]), vint(1)), "the entry function \"f\" is a packed function"),
        (renamed, "parameter names (n) differ from the signature's (x)"),
        (
            with_signature(sig_bytes(0, &[2], &unsorted), vint(0)),
            "dict keys \"b\" and \"a\" are not distinct and sorted",
        ),
    ];
    for (sections, needle) in invalid {
        let e = load_bytes(&craft(3, &sections)).err().unwrap_or_else(|| panic!("{needle}: loaded"));
        assert!(matches!(e.kind(), ErrorKind::Invalid(_)), "{needle}: {e}");
        assert!(e.to_string().contains(needle), "expected {needle:?} in: {e}");
    }
}

#[test]
fn errors_name_the_section_and_offset() {
    let mut s = minimal();
    s[2].1 = cat(&[&vint(2), &[0], &[0x55]]);
    let bytes = craft(2, &s);
    let info = inspect(&bytes).unwrap();
    let at = section(&info, "constants").unwrap().data.start + 2;
    let e = load_err(&bytes);
    assert!(e.contains(&format!("constants section at byte {at}: unknown constant tag")), "{e}");
}
