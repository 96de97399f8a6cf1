//! Helpers shared by the integration tests: building shared libraries from C with the system C
//! compiler (the tests fail, never skip, without one).

#![allow(dead_code)]

#[path = "../../src/ffi/test_signals.rs"]
pub mod signals;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Compiles `source` (C) into the shared library `NAME.so` in a temporary folder kept for the
/// whole test process.
pub fn compile(name: &str, source: &str) -> PathBuf {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    let dir = DIR.get_or_init(|| tempfile::tempdir().unwrap()).path();
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, source).unwrap();
    let so = dir.join(format!("{name}.so"));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc).args(["-shared", "-fPIC", "-O1", "-o"]).arg(&so).arg(&c).output();
    let out = out.unwrap_or_else(|e| panic!("the C compiler {cc:?} is needed for these tests: {e}"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    so
}

/// The hand-written kernels of tests/c/kernels.c.
pub fn kernels_source() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/kernels.c")).unwrap()
}
