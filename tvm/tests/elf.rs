//! ELF validation against a library built here (tests/c/kernels.c): every kind of damage the
//! loader could trip over is an error naming what was expected and what was found, and no
//! mutation or truncation of the file makes the reader panic.

mod common;

use common::{compile, kernels_source};
use relaxvm_tvm::elf;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

fn library() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| std::fs::read(compile("elf_kernels", &kernels_source())).unwrap())
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// The file offsets of the program headers (64-bit ELF: `e_phoff` at 32, `e_phnum` at 56).
fn program_headers(b: &[u8]) -> Vec<usize> {
    let (off, num) = (u64_at(b, 32) as usize, u16_at(b, 56) as usize);
    (0..num).map(|i| off + i * 56).collect()
}

fn first_of_type(b: &[u8], p_type: u32) -> usize {
    program_headers(b).into_iter().find(|at| u32_at(b, *at) == p_type).expect("program header of that type")
}

/// Runs every reader on `bytes`; a panic is reported with `what`.
fn read_all(bytes: &[u8], what: &str) -> bool {
    let r = catch_unwind(AssertUnwindSafe(|| {
        let ok = elf::validate(bytes).is_ok();
        let _ = elf::exported_symbol_bytes(bytes, "__tvm_ffi__library_bin");
        let _ = elf::exported_functions(bytes);
        let _ = elf::exported_data(bytes);
        ok
    }));
    r.unwrap_or_else(|_| panic!("the ELF reader panicked on {what}"))
}

#[test]
fn the_library_validates_and_lists_its_exports() {
    let info = elf::validate(library()).unwrap();
    assert!(info.load_segments >= 2, "{info:?}");
    assert!(info.functions.iter().any(|f| f == "__tvm_ffi_add"), "{info:?}");
    assert!(info.data.iter().any(|d| d == "__TVMBackendAllocWorkspace"), "{info:?}");
    assert!(info.data.iter().any(|d| d == "__tvm_ffi__library_bin"), "{info:?}");
    // Undefined imports are not exports.
    assert!(!info.functions.iter().any(|f| f == "TVMFFIErrorSetRaisedFromCStrParts"));
    assert_eq!(elf::exported_functions(library()).unwrap(), info.functions);
}

#[test]
fn every_truncation_is_an_error() {
    let b = library();
    let mut cuts: Vec<usize> = (0..b.len()).step_by(61).collect();
    cuts.extend([0, 1, 4, 5, 16, 63, 64, 65, b.len() - 1]);
    for cut in cuts {
        let e = elf::validate(&b[..cut]);
        assert!(
            format!("{:?}", e.expect_err("an error")).starts_with(r#"Format("#),
            "truncated to {cut} of {} bytes",
            b.len()
        );
        read_all(&b[..cut], &format!("a file truncated to {cut} bytes"));
    }
}

#[test]
fn mutations_anywhere_never_panic() {
    let b = library();
    // Every byte of the ELF header and program headers, and bytes spread over the whole file,
    // each set to values that break sizes, offsets and counts.
    let phdrs_end = program_headers(b).last().unwrap() + 56;
    let positions = (0..phdrs_end).chain((phdrs_end..b.len()).step_by(37));
    let mut accepted = 0;
    for at in positions {
        for value in [0x00u8, 0xFF, 0x7F, 0x80] {
            if b[at] == value {
                continue;
            }
            let mut m = b.to_vec();
            m[at] = value;
            accepted += read_all(&m, &format!("byte {at} set to {value:#x}")) as usize;
        }
    }
    // Many mutations leave a valid library (padding, code bytes); many must not.
    assert!(accepted > 0);
    // Whole 8-byte fields of every program header set to huge values.
    for ph in program_headers(b) {
        for field in [8usize, 16, 24, 32, 40, 48] {
            for value in [u64::MAX, u64::MAX / 2, b.len() as u64, 1 << 40] {
                let mut m = b.to_vec();
                m[ph + field..ph + field + 8].copy_from_slice(&value.to_le_bytes());
                read_all(&m, &format!("program header at {ph}, field {field} = {value:#x}"));
            }
        }
    }
}

#[test]
fn dynamic_entries_pointing_outside_the_file_are_errors() {
    let b = library();
    let dynamic = first_of_type(b, 2); // PT_DYNAMIC
    let (off, size) = (u64_at(b, dynamic + 8) as usize, u64_at(b, dynamic + 32) as usize);
    let mut checked = 0;
    for entry in (off..off + size).step_by(16) {
        let tag = u64_at(b, entry);
        // DT_STRTAB 5, DT_SYMTAB 6, DT_RELA 7, DT_INIT_ARRAY 25, DT_FINI_ARRAY 26, DT_GNU_HASH.
        if [5, 6, 7, 25, 26, 0x6fff_fef5].contains(&tag) {
            let mut m = b.to_vec();
            m[entry + 8..entry + 16].copy_from_slice(&(1u64 << 40).to_le_bytes());
            let e = elf::validate(&m).unwrap_err().to_string();
            assert!(e.contains("lies outside the loaded file bytes"), "tag {tag:#x}: {e}");
            checked += 1;
        }
    }
    assert!(checked >= 3, "only {checked} address entries found");
}

#[test]
fn each_header_check_names_what_it_expected() {
    let b = library();
    let with = |at: usize, bytes: &[u8]| {
        let mut m = b.to_vec();
        m[at..at + bytes.len()].copy_from_slice(bytes);
        elf::validate(&m).unwrap_err().to_string()
    };
    let e = elf::validate(b"#!/bin/sh\n").unwrap_err().to_string();
    assert!(e.contains("not an ELF file") && e.contains("23 21 2f 62"), "{e}");
    let e = with(4, &[1]);
    assert!(e.contains("ELF class 1, expected 2 (64-bit)"), "{e}");
    let e = with(5, &[2]);
    assert!(e.contains("data encoding 2, expected 1 (little-endian)"), "{e}");
    let other_machine: u16 = if cfg!(target_arch = "aarch64") { 62 } else { 183 };
    let e = with(18, &other_machine.to_le_bytes());
    assert!(e.contains(&format!("built for ELF machine {other_machine}")) && e.contains("but this is"), "{e}");
    let e = with(16, &2u16.to_le_bytes()); // ET_EXEC
    assert!(e.contains("ELF type 2, expected 3 (a shared library)"), "{e}");
    // The dynamic segment's type changed to PT_NULL: no dynamic section.
    let e = with(first_of_type(b, 2), &0u32.to_le_bytes());
    assert!(e.contains("no dynamic section"), "{e}");
    // A loadable segment whose file size exceeds its memory size.
    let load = first_of_type(b, 1);
    let e = with(load + 40, &1u64.to_le_bytes());
    assert!(e.contains("exceeds memory size"), "{e}");
    // A loadable segment past the end of the file.
    let big = (b.len() as u64 * 4).to_le_bytes();
    let mut m = b.to_vec();
    m[load + 32..load + 40].copy_from_slice(&big);
    m[load + 40..load + 48].copy_from_slice(&big);
    let e = elf::validate(&m).unwrap_err().to_string();
    assert!(e.contains(&format!("the file has {} bytes (truncated?)", b.len())), "{e}");
}

#[test]
fn the_library_bin_symbol_is_read_from_the_file() {
    let b = library();
    let blob = elf::exported_symbol_bytes(b, "__tvm_ffi__library_bin").unwrap().unwrap();
    assert_eq!(blob.len(), 16);
    assert_eq!(&blob[8..], b"relaxvm!");
    // A function is found too (its code bytes); an import or an unknown name is not.
    assert!(elf::exported_symbol_bytes(b, "__tvm_ffi_add").unwrap().is_some_and(|c| !c.is_empty()));
    assert!(elf::exported_symbol_bytes(b, "TVMFFIErrorSetRaisedFromCStrParts").unwrap().is_none());
    assert!(elf::exported_symbol_bytes(b, "nothing").unwrap().is_none());
}
