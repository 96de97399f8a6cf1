//! Opening a library when the process may open no more files: the private copy the loader maps
//! (a memfd) cannot be made, and the error says so, naming the library. Run in a child process
//! (this test program again) whose file-descriptor limit is lowered to zero after the library's
//! bytes were read.

mod common;

use common::compile;
use relaxvm::ErrorKind;
use relaxvm_tvm::ffi::Library;
use std::path::Path;
use std::process::Command;

const LIBRARY: &str = "RELAXVM_FD_LIMIT_LIBRARY";

#[test]
#[ignore = "run by a_library_opened_without_file_descriptors_left_is_refused, in a child process"]
fn child_opens_a_library_with_no_descriptor_left() {
    let library = std::env::var(LIBRARY).expect("run by the parent test");
    let bytes = std::fs::read(&library).unwrap();
    let none = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: setrlimit reads the struct; lowering the limit is always allowed.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &none) }, 0);
    let e = Library::open_bytes(Path::new(&library), &bytes).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::Value(_)), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!("{library}: cannot make a private copy to load: Too many open files (os error 24)")
    );
}

#[test]
fn a_library_opened_without_file_descriptors_left_is_refused() {
    let library = compile("fd_limit", "int f(int x) { return x; }\n");
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_opens_a_library_with_no_descriptor_left", "--ignored", "--test-threads=1"])
        .env(LIBRARY, &library)
        // Under AddressSanitizer (CI), LeakSanitizer's check at the child's exit needs to open
        // /proc, which the child's limit forbids: it would fail the child, not the test.
        .env("ASAN_OPTIONS", asan_options_without_leak_check())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The parent's `ASAN_OPTIONS` (ignored without the sanitizer) with the leak check off.
fn asan_options_without_leak_check() -> String {
    match std::env::var("ASAN_OPTIONS") {
        Ok(o) if !o.is_empty() => format!("{o}:detect_leaks=0"),
        _ => "detect_leaks=0".to_string(),
    }
}
