//! Generates `relaxvm.h` from this crate's source into `OUT_DIR` (the `header` test compares it
//! with `include/relaxvm.h`, which it rewrites when `RELAXVM_UPDATE_HEADER=1`).

fn main() {
    let crate_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("relaxvm.h");
    let config = cbindgen::Config::from_file(format!("{crate_dir}/cbindgen.toml")).expect("reading cbindgen.toml");
    cbindgen::Builder::new()
        .with_crate(&crate_dir)
        .with_config(config)
        .generate()
        .expect("generating relaxvm.h")
        .write_to_file(out);
    // The tests open TVM libraries, which bind these from the global scope (see relaxvm-tvm's
    // build.rs). The shared library exports them itself; a program linking the static library
    // passes the same arguments (docs/c-api.md).
    for symbol in ["TVMFFIErrorSetRaisedFromCStrParts", "TVMFFIErrorSetRaisedFromCStr"] {
        println!("cargo:rustc-link-arg-tests=-Wl,--export-dynamic-symbol={symbol}");
    }
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
}
