//! Every error of the ELF validator, caused by patching one field of a real library: TVM's
//! `tests/data/mlp.so` (GNU hash, PLT, init and fini arrays, full symbol table) and a library
//! built here with what that one lacks (SysV hash, version definitions and requirements, packed
//! relative relocations, thread-local data). Each case is a table row: the library, the edits
//! (file offset, new bytes) found by name from the file's own tables, and the fragments the
//! message must hold (what was expected, what was found, and where). Every error is a format
//! error.

mod cases;
mod library;
mod version_cases;

use cases::CASES;
use library::{bytes_of, Lib};
use relaxvm::ErrorKind;
use relaxvm_tvm::elf;
use version_cases::VERSION_CASES;

#[test]
fn both_libraries_validate_unchanged() {
    for lib in [Lib::Mlp, Lib::C] {
        elf::validate(bytes_of(lib)).unwrap_or_else(|e| panic!("{lib:?}: {e}"));
    }
}

#[test]
fn every_damage_is_a_format_error_naming_the_field() {
    let mut failures = Vec::new();
    for c in CASES.iter().chain(VERSION_CASES) {
        let bytes = bytes_of(c.lib);
        let mut m = bytes.to_vec();
        let edits = (c.edits)(bytes);
        for (at, new) in &edits {
            assert_ne!(&m[*at..at + new.len()], new.as_slice(), "{}: the edit changes nothing", c.what);
            m[*at..at + new.len()].copy_from_slice(new);
        }
        match elf::validate(&m) {
            Ok(_) => failures.push(format!("{}: accepted", c.what)),
            Err(e) => {
                let msg = e.to_string();
                if !matches!(e.kind(), ErrorKind::Format(_)) {
                    failures.push(format!("{}: not a format error: {e:?}", c.what));
                }
                if let Some(p) = c.expect.iter().find(|p| !msg.contains(*p)) {
                    failures.push(format!("{}: {msg:?} lacks {p:?}", c.what));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases:\n{}",
        failures.len(),
        CASES.len() + VERSION_CASES.len(),
        failures.join("\n")
    );
}

#[test]
fn not_elf_names_the_bytes_found() {
    let e = elf::validate(b"#!/bin/sh\n").unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Format(_)), "{e:?}");
    assert_eq!(
        e.to_string(),
        "malformed executable file: invalid ELF shared library: not an ELF file: it starts with bytes [23 21 2f 62], expected 7f 45 4c 46"
    );
    let e = elf::validate(b"\x7fELF").unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Format(_)), "{e:?}");
    assert_eq!(
        e.to_string(),
        "malformed executable file: invalid ELF shared library: the file ends inside the ELF identification: 4 bytes, expected at least 16"
    );
    // One byte short of the identification (its class byte present, the data byte too).
    let e = elf::validate(b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00").unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Format(_)), "{e:?}");
    assert_eq!(
        e.to_string(),
        "malformed executable file: invalid ELF shared library: the file ends inside the ELF identification: 15 bytes, expected at least 16"
    );
}
