//! The tests open TVM libraries, whose copies bind relaxvm's `RVMFFIErrorSetRaisedFromCStrParts`
//! from the global scope, and compiled-mode models the three `RVMBackendAnyList*` functions (see relaxvm-tvm's build.rs): the test executables export them. The shared library exports them itself; a program linking the
//! static library passes the same arguments (docs/c-api.md).

fn main() {
    for symbol in [
        "RVMFFIErrorSetRaisedFromCStrParts",
        "RVMBackendAnyListSetPackedArg",
        "RVMBackendAnyListMoveFromPackedReturn",
        "RVMBackendAnyListResetItem",
    ] {
        println!("cargo:rustc-link-arg-tests=-Wl,--export-dynamic-symbol={symbol}");
    }
}
