//! Feeds arbitrary bytes to the readers of TVM-compiled models: the ELF validator and symbol
//! reader, the module tree of `__tvm_ffi__library_bin`, and the `relax.VMExecutable` decoder.
//! Each must return an error or a result, never panic, hang or allocate without bound; a
//! program that decodes must pass the verifier (the reader goes through it) and round-trip
//! through relaxvm's own format. Nothing here opens a library: no foreign code runs.
#![no_main]

use libfuzzer_sys::fuzz_target;
use relaxvm_tvm::{elf, library_bin, vmexec};

fuzz_target!(|data: &[u8]| {
    if let Ok(exe) = vmexec::read(data) {
        let bytes = exe.save_to_bytes();
        let again = relaxvm::format::load_bytes(&bytes).expect("a verified program saves and loads");
        assert_eq!(again.save_to_bytes(), bytes);
    }
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
});
