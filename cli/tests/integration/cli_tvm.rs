//! The `relaxvm` command line on a model compiled by Apache TVM (the relaxvm-tvm fixture).

use assert_cmd::Command;
use relaxvm::npy;
use relaxvm::Tensor;
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

/// A `.rvx` saved from the model, referencing `model.so` beside it (both in `dir`).
fn saved_rvx(dir: &Path) -> (PathBuf, PathBuf) {
    let so = dir.join("model.so");
    std::fs::copy(fixture("mlp.so"), &so).unwrap();
    let rvx = dir.join("model.rvx");
    let exe = relaxvm_tvm::import::inspect_module(&so).unwrap();
    exe.save(&rvx, &Default::default()).unwrap();
    (so, rvx)
}

#[test]
fn an_rvx_runs_its_libraries_only_with_allow_native() {
    let dir = tempfile::tempdir().unwrap();
    let (so, rvx) = saved_rvx(dir.path());
    let x = dir.path().join("x.npy");
    npy::save(&Tensor::from_vec([3, 8], f32s("mlp_x.bin")).unwrap(), &x).unwrap();
    let (rvx, x, so) = (rvx.to_str().unwrap(), x.to_str().unwrap(), so.to_str().unwrap());
    for cmd in
        [vec!["run", rvx, "--input", x], vec!["profile", rvx, "--input", x], vec!["trace", rvx, "--input", x, "-q"]]
    {
        let out = relaxvm(&cmd);
        assert_eq!(out.status.code(), Some(1), "{cmd:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains("model.so") && err.contains("XXH3-64") && err.contains("--allow-native"), "{err}");
        let mut allowed = cmd.clone();
        allowed.extend(["--allow-native", dir.path().to_str().unwrap()]);
        let out = relaxvm(&allowed);
        assert!(out.status.success(), "{allowed:?}: {}", String::from_utf8_lossy(&out.stderr));
        let mut any = cmd.clone();
        any.push("--allow-native-any");
        assert!(relaxvm(&any).status.success(), "{any:?}");
    }
    // Another file is not consent for this one.
    let out = relaxvm(&["run", rvx, "--input", x, "--allow-native", rvx]);
    assert!(String::from_utf8(out.stderr).unwrap().contains("is not among the allowed native libraries"));
    // verify and stats list the reference; verify says whether it is found and matches.
    let verify = relaxvm(&["verify", rvx]);
    let shown = String::from_utf8(verify.stdout).unwrap();
    assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stderr));
    assert!(
        shown.contains("model.so") && shown.contains("hash matches") && shown.contains("1 native library"),
        "{shown}"
    );
    let stats = String::from_utf8(relaxvm(&["stats", rvx]).stdout).unwrap();
    assert!(stats.contains("Library references") && stats.contains("XXH3-64 0x"), "{stats}");
    // A changed library: verify fails, naming it.
    std::fs::write(so, b"\x7fELF, but not the library").unwrap();
    let verify = relaxvm(&["verify", rvx]);
    assert_eq!(verify.status.code(), Some(1));
    let err = String::from_utf8(verify.stderr).unwrap();
    assert!(err.contains("model.so") && err.contains("hash to"), "{err}");
    // A file that is not ELF at all is refused from its first bytes, not hashed.
    std::fs::write(so, b"not the library").unwrap();
    let err = String::from_utf8(relaxvm(&["verify", rvx]).stderr).unwrap();
    assert!(err.contains("not an ELF shared library (the file starts with bytes 6e 6f 74"), "{err}");
    std::fs::remove_file(so).unwrap();
    let err = String::from_utf8(relaxvm(&["verify", rvx]).stderr).unwrap();
    assert!(err.contains("not found"), "{err}");
}
