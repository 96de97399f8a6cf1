//! The check of the `tvm_import` fuzz target, shared with its replay test (included with
//! `#[path]` by both): no reader of TVM models may panic, and a program that decodes passes the
//! verifier and round-trips through relaxvm's format.
//!
//! Each input is also read as edits of a real model's dynamic-linking structures (see
//! [`patched`]), so that small inputs reach the deep checks of the ELF validator (relocations,
//! symbols, hash and version tables), which random bytes never do.

use relaxvm_tvm::{elf, library_bin, vmexec};
use std::sync::OnceLock;

/// A model written by TVM's export_library, and the file ranges its dynamic loader reads.
fn model() -> &'static (Vec<u8>, Vec<std::ops::Range<usize>>) {
    static MODEL: OnceLock<(Vec<u8>, Vec<std::ops::Range<usize>>)> = OnceLock::new();
    MODEL.get_or_init(|| {
        let bytes = include_bytes!("../data/mlp.so").to_vec();
        let regions = elf::loader_regions(&bytes).expect("the fixture is valid").into_iter().map(|r| r.1).collect();
        (bytes, regions)
    })
}

/// The model with `data` applied as edits of its loader structures: each 3 bytes are a
/// position (little-endian `u16`, modulo the total size of the structures) and a byte to XOR
/// there. `None` when `data` holds no edit.
pub fn patched(data: &[u8]) -> Option<Vec<u8>> {
    let (bytes, regions) = model();
    let total: usize = regions.iter().map(|r| r.len()).sum();
    let mut out = bytes.clone();
    let mut any = false;
    for edit in data.chunks_exact(3).take(64) {
        let mut at = usize::from(u16::from_le_bytes([edit[0], edit[1]])) % total;
        let region = regions.iter().find(|r| {
            let hit = at < r.len();
            if !hit {
                at -= r.len();
            }
            hit
        })?;
        out[region.start + at] ^= edit[2];
        any = true;
    }
    any.then_some(out)
}

/// Runs every reader on `data`; true when a program decoded.
pub fn check(data: &[u8]) -> bool {
    let decoded = match vmexec::read(data) {
        Ok(exe) => {
            let bytes = exe.save_to_bytes();
            let again = relaxvm::format::load_bytes(&bytes).expect("a verified program saves and loads");
            assert_eq!(again.save_to_bytes(), bytes, "save/load/save is stable");
            true
        }
        Err(_) => false,
    };
    if let Ok(modules) = library_bin::modules(data) {
        let _ = library_bin::vm_executable(&modules);
    }
    read_elf(data);
    if let Some(mutant) = patched(data) {
        read_elf(&mutant);
    }
    decoded
}

fn read_elf(data: &[u8]) {
    if elf::validate(data).is_ok() {
        let _ = elf::exported_functions(data);
        let _ = elf::exported_data(data);
        let _ = elf::loader_regions(data).expect("a valid library has loader regions");
        if let Ok(Some(blob)) = elf::exported_symbol_bytes(data, "__tvm_ffi__library_bin") {
            let _ = library_bin::modules(blob);
        }
    }
}
