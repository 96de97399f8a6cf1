//! The `relaxvm` command line on a model compiled by Apache TVM (the relaxvm-tvm fixture).

use assert_cmd::Command;
use relaxvm::Tensor;
use relaxvm_builder::npy;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tvm/tests/data").join(name)
}

fn f32s(name: &str) -> Vec<f32> {
    std::fs::read(fixture(name)).unwrap().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn relaxvm(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("relaxvm").unwrap().args(args).output().unwrap()
}

#[test]
fn run_a_so_with_an_input_file() {
    let dir = tempfile::tempdir().unwrap();
    let x = dir.path().join("x.npy");
    npy::save(&Tensor::from_vec([3, 8], f32s("mlp_x.bin")).unwrap(), &x).unwrap();
    let y = dir.path().join("y.npy");
    let so = fixture("mlp.so");
    let out = relaxvm(&["run", so.to_str().unwrap(), "--input", x.to_str().unwrap(), "-o", y.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // The same kernels as TVM's VM: the very same bits.
    assert_eq!(npy::load(&y).unwrap().to_vec::<f32>().unwrap(), f32s("mlp_y.bin"));
}

#[test]
fn dis_stats_and_verify_read_a_so_as_data() {
    let so = fixture("mlp.so");
    let so = so.to_str().unwrap();
    let dis = relaxvm(&["dis", so]);
    assert!(dis.status.success(), "{}", String::from_utf8_lossy(&dis.stderr));
    let text = String::from_utf8(dis.stdout).unwrap();
    assert!(text.contains("@main inputs=1") && text.contains("call  matmul"), "{text}");
    let stats = String::from_utf8(relaxvm(&["stats", so]).stdout).unwrap();
    assert!(stats.contains("Native libraries (#1)") && stats.contains("mlp.so"), "{stats}");
    let verify = relaxvm(&["verify", so]);
    assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stderr));
    let err = String::from_utf8(verify.stderr).unwrap();
    // Kernels the library exports are not reported as missing; builtins are known.
    assert!(!err.contains("\"matmul\"") && !err.contains("vm.builtin"), "{err}");
}

#[test]
fn a_broken_so_is_one_line_of_error() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(fixture("mlp.so")).unwrap();
    let cut = dir.path().join("cut.so");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    for cmd in ["run", "dis", "verify"] {
        let out = relaxvm(&[cmd, cut.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{cmd}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.starts_with("error: ") && err.contains("cut.so") && err.lines().count() == 1, "{cmd}: {err}");
    }
}
