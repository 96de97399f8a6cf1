//! The tests of this crate open TVM libraries, whose copies bind relaxvm's
//! `RVMFFIErrorSetRaisedFromCStrParts` (and, compiled-mode ones, the `RVMBackendAnyList*`
//! functions) from the global scope: their executables must export them (see
//! src/ffi/rebind.rs and src/ffi/visibility.rs). A
//! program of another crate that opens TVM libraries needs the same link arguments in its own
//! build script (as cli/build.rs has for the CLI). Cargo refuses the `-examples` and
//! `-benches` forms for a package without such targets; add them here with the first one.
//!
//! It also compiles the C side of the kernel-call guard (`csrc/guard.c`, see
//! `src/ffi/guard.rs`): a setjmp cannot be armed from Rust, and the jump out of a faulting
//! kernel must skip kernel frames only.

fn main() {
    println!("cargo:rerun-if-changed=csrc/guard.c");
    cc::Build::new().file("csrc/guard.c").compile("relaxvm_guard");
    for symbol in [
        "RVMFFIErrorSetRaisedFromCStrParts",
        "RVMBackendAnyListSetPackedArg",
        "RVMBackendAnyListMoveFromPackedReturn",
        "RVMBackendAnyListResetItem",
    ] {
        println!("cargo:rustc-link-arg-tests=-Wl,--export-dynamic-symbol={symbol}");
    }
}
