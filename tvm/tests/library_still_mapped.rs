//! A library that cannot be unloaded (linked with `-z nodelete`) stays mapped under the name of
//! its private copy (`/proc/self/fd/N`) after it is dropped; the next library whose copy gets
//! the same descriptor number is refused instead of being handed the old one by the loader.
//! (In its own test binary: no other test opens descriptors in between.)

use relaxvm::ErrorKind;
use relaxvm_tvm::ffi::Library;
use std::process::Command;

fn build(dir: &std::path::Path, name: &str, source: &str, flags: &[&str]) -> std::path::PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, source).unwrap();
    let so = dir.join(format!("{name}.so"));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc).args(["-shared", "-fPIC", "-O1"]).args(flags).arg("-o").arg(&so).arg(&c).output();
    let out = out.unwrap_or_else(|e| panic!("the C compiler {cc:?} is needed for this test: {e}"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    so
}

#[test]
fn a_library_still_mapped_under_the_copy_name_is_not_reused() {
    let dir = tempfile::tempdir().unwrap();
    let sticky = build(dir.path(), "sticky", "int f(int x) { return x + 1; }\n", &["-Wl,-z,nodelete"]);
    let other = build(dir.path(), "other", "int g(int x) { return x + 2; }\n", &[]);
    drop(Library::open(&sticky).unwrap());
    let e = Library::open(&other).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::Value(_)), "{e:?}");
    let e = e.to_string();
    assert!(
        e.starts_with(&format!("{}: a library loaded earlier as /proc/self/fd/", other.display()))
            && e.ends_with(" is still mapped; the loader would return it instead"),
        "{e}"
    );
}
