//! The check of the `tvm_import` fuzz target, shared with its replay test (included with
//! `#[path]` by both): no reader of TVM models may panic, and a program that decodes passes the
//! verifier and round-trips through relaxvm's format.

use relaxvm_tvm::{elf, library_bin, vmexec};

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
    if elf::validate(data).is_ok() {
        let _ = elf::exported_functions(data);
        let _ = elf::exported_data(data);
        if let Ok(Some(blob)) = elf::exported_symbol_bytes(data, "__tvm_ffi__library_bin") {
            let _ = library_bin::modules(blob);
        }
    }
    decoded
}
