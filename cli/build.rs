//! The `relaxvm` CLI (and its tests) open TVM libraries, whose copies bind relaxvm's
//! `RVMFFIErrorSetRaisedFromCStrParts` from the global scope: the executable must export it
//! (see tvm/src/ffi/rebind.rs and visibility.rs).

fn main() {
    // The error setter kernels call, and the AnyList functions compiled functions
    // (exec_mode="compiled") call.
    for symbol in [
        "RVMFFIErrorSetRaisedFromCStrParts",
        "RVMBackendAnyListSetPackedArg",
        "RVMBackendAnyListMoveFromPackedReturn",
        "RVMBackendAnyListResetItem",
    ] {
        println!("cargo:rustc-link-arg-bins=-Wl,--export-dynamic-symbol={symbol}");
        println!("cargo:rustc-link-arg-tests=-Wl,--export-dynamic-symbol={symbol}");
    }
}
