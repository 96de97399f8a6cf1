//! Feeds arbitrary bytes to the readers of TVM-compiled models: the ELF validator and symbol
//! reader, the module tree of `__tvm_ffi__library_bin`, and the `relax.VMExecutable` decoder.
//! Each must return an error or a result, never panic, hang or allocate without bound; a
//! program that decodes must round-trip through relaxvm's own format. Nothing here opens a
//! library: no foreign code runs. The check is shared with `tvm/tests/fuzz_replay.rs`.
#![no_main]

#[path = "../../tvm/tests/support/tvm_import_check.rs"]
mod tvm_import_check;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tvm_import_check::check(data);
});
