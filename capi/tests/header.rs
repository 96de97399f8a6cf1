//! `include/relaxvm.h` is the header cbindgen generates from this crate's source
//! (`capi/cbindgen.toml`): a stale checked-in copy fails here. `RELAXVM_UPDATE_HEADER=1`
//! rewrites it instead.

#[test]
fn checked_in_header_is_current() {
    let crate_dir = env!("CARGO_MANIFEST_DIR");
    let config = cbindgen::Config::from_file(format!("{crate_dir}/cbindgen.toml")).unwrap();
    let mut generated = Vec::new();
    cbindgen::Builder::new().with_crate(crate_dir).with_config(config).generate().unwrap().write(&mut generated);
    let generated = String::from_utf8(generated).unwrap();
    // `capi/include` links to the repository's `include/`, so that the published crate carries it.
    let path = std::path::Path::new(crate_dir).join("include/relaxvm.h");
    if std::env::var_os("RELAXVM_UPDATE_HEADER").is_some_and(|v| v == "1") {
        std::fs::write(&path, generated).unwrap();
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "{} differs from the header generated from capi/src: run `RELAXVM_UPDATE_HEADER=1 cargo test -p relaxvm-capi --test header`",
        path.display()
    );
}
