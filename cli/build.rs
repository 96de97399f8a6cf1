//! The `relaxvm` CLI (and its tests) open TVM libraries, which bind `TVMFFIErrorSetRaisedFromCStrParts` from
//! the global scope: the executable must export it (see tvm/src/ffi/visibility.rs).

fn main() {
    // The AnyList functions: what compiled functions (exec_mode="compiled") call.
    for symbol in [
        "TVMFFIErrorSetRaisedFromCStrParts",
        "TVMFFIErrorSetRaisedFromCStr",
        "RVMBackendAnyListSetPackedArg",
        "RVMBackendAnyListMoveFromPackedReturn",
        "RVMBackendAnyListResetItem",
    ] {
        println!("cargo:rustc-link-arg-bins=-Wl,--export-dynamic-symbol={symbol}");
        println!("cargo:rustc-link-arg-tests=-Wl,--export-dynamic-symbol={symbol}");
    }
}
