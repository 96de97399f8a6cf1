//! The TVM model reader and loader, on a model TVM 0.27 compiled (tests/data, made by
//! make_fixtures.py): program decoding, end-to-end runs, and malformed files.

mod common;

use relaxvm::format::{LoadOptions, NativeLibraries};
use relaxvm::{Executable, Tensor, Value, VirtualMachine};
use relaxvm_tvm::import::{
    check_libraries, inspect_module, load_executable, load_executable_with, load_module, LibraryState,
};
use relaxvm_tvm::vmexec;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

fn f32s(name: &str) -> Vec<f32> {
    std::fs::read(data(name)).unwrap().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn run_mlp(exe: Executable) -> Vec<f32> {
    relaxvm_builtins::ensure_registered();
    let mut vm = VirtualMachine::new(Arc::new(exe)).unwrap();
    let x = Tensor::from_vec([3, 8], f32s("mlp_x.bin")).unwrap();
    let y = vm.invoke("main", &[Value::Tensor(x)]).unwrap();
    let y = y.as_tensor().unwrap();
    assert_eq!(y.shape().dims(), &[3, 4]);
    y.to_vec::<f32>().unwrap()
}

#[test]
fn the_program_of_a_vmexec_file() {
    let exe = vmexec::read(&std::fs::read(data("mlp.vmexec")).unwrap()).unwrap();
    assert_eq!(exe.bytecode_function_names(), vec!["main"]);
    let main = exe.func("main").unwrap();
    assert_eq!((main.num_args, main.param_names.clone()), (1, vec!["x".to_string()]));
    for kernel in ["matmul", "add", "relu", "shape_func", "vm.builtin.check_tensor_info", "vm.builtin.match_shape"] {
        assert!(exe.packed_function_names().contains(&kernel), "{kernel} in {:?}", exe.packed_function_names());
    }
    let text = exe.as_text();
    assert!(text.contains("call  vm.builtin.alloc_shape_heap  in: %vm, i"), "{text}");
    assert!(text.contains("expect") || text.contains("ErrorContext(fn=main"), "{text}");
    // The program survives relaxvm's own format unchanged.
    let again = through_rvx(&exe);
    assert_eq!(again, text);
}

/// Saving and loading through relaxvm's format keeps the program (the text form is identical).
fn through_rvx(exe: &Executable) -> String {
    relaxvm::format::load_bytes(&exe.save_to_bytes()).unwrap().as_text()
}

#[test]
fn the_program_inside_the_so_is_the_vmexec() {
    let from_so = inspect_module(data("mlp.so")).unwrap();
    let from_vmexec = inspect_module(data("mlp.vmexec")).unwrap();
    assert_eq!(from_so.as_text(), from_vmexec.as_text());
    // Inspecting opens nothing: the library is only referenced.
    assert_eq!(from_so.libraries().len(), 1);
    assert!(from_so.libraries()[0].loaded.is_none());
    assert!(from_vmexec.libraries().is_empty());
}

#[test]
fn runs_bit_identically_to_tvm() {
    assert_eq!(run_mlp(load_module(data("mlp.so")).unwrap()), f32s("mlp_y.bin"));
}

#[test]
fn an_rvx_references_the_library_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    let exe = load_module(data("mlp.so")).unwrap();
    let rvx = dir.path().join("mlp.rvx");
    exe.save(&rvx, &Default::default()).unwrap();
    assert_eq!(run_mlp(load_executable_with(&rvx, &any()).unwrap()), f32s("mlp_y.bin"));
    // The core loader reads it but opens no library: the VM names what is missing and why.
    relaxvm_builtins::ensure_registered();
    let plain = relaxvm::format::load_file(&rvx).unwrap();
    let e = VirtualMachine::new(Arc::new(plain)).err().unwrap().to_string();
    assert!(e.contains("matmul") && e.contains("mlp.so") && e.contains("not loaded"), "{e}");
}

#[test]
fn an_rvx_finds_its_library_beside_it_and_refuses_a_changed_one() {
    let dir = tempfile::tempdir().unwrap();
    let so = dir.path().join("model.so");
    std::fs::copy(data("mlp.so"), &so).unwrap();
    let rvx = dir.path().join("model.rvx");
    load_module(&so).unwrap().save(&rvx, &Default::default()).unwrap();
    // Move both: the recorded path no longer exists, the file beside the .rvx is found.
    let moved = tempfile::tempdir().unwrap();
    std::fs::rename(&so, moved.path().join("model.so")).unwrap();
    std::fs::rename(&rvx, moved.path().join("model.rvx")).unwrap();
    assert_eq!(run_mlp(load_executable_with(moved.path().join("model.rvx"), &any()).unwrap()), f32s("mlp_y.bin"));
    // A different library under the same name is refused by its hash.
    let mut bytes = std::fs::read(moved.path().join("model.so")).unwrap();
    let recorded = relaxvm_tvm::import::content_hash(&bytes);
    let last = bytes.len() - 1;
    bytes[last] ^= 0xFF;
    std::fs::write(moved.path().join("model.so"), &bytes).unwrap();
    let e = load_executable_with(moved.path().join("model.rvx"), &any()).err().unwrap();
    assert!(matches!(e.root().kind(), relaxvm::ErrorKind::Value(_)), "{e:?}");
    let (e, found) = (e.to_string(), relaxvm_tvm::import::content_hash(&bytes));
    let hashes = format!(
        "its contents hash to {found:#018x}, but the executable was saved with a library hashing to {recorded:#018x}"
    );
    assert!(e.contains(&hashes) && e.contains("model.so"), "{e}");
    std::fs::remove_file(moved.path().join("model.so")).unwrap();
    let e = load_executable_with(moved.path().join("model.rvx"), &any()).err().unwrap().to_string();
    assert!(e.contains("not found") && e.contains("model.so"), "{e}");
}

/// Consent to open any library the file references.
fn any() -> LoadOptions {
    LoadOptions { native_libraries: NativeLibraries::AnyReferenced, ..Default::default() }
}

fn allow(paths: &[&Path]) -> LoadOptions {
    LoadOptions {
        native_libraries: NativeLibraries::Allow(paths.iter().map(|p| p.to_path_buf()).collect()),
        ..Default::default()
    }
}

#[test]
fn an_rvx_opens_its_libraries_only_with_consent() {
    let dir = tempfile::tempdir().unwrap();
    let so = dir.path().join("model.so");
    std::fs::copy(data("mlp.so"), &so).unwrap();
    let rvx = dir.path().join("model.rvx");
    load_module(&so).unwrap().save(&rvx, &Default::default()).unwrap();
    let hash = format!("{:#018x}", relaxvm_tvm::import::content_hash(&std::fs::read(&so).unwrap()));
    // Refused by default, naming the library, its hash and how to allow it.
    for e in [load_executable(&rvx).err().unwrap(), load_module(&rvx).err().unwrap()] {
        let e = e.to_string();
        assert!(e.contains("references 1 native library") && e.contains("model.so") && e.contains(&hash), "{e}");
        assert!(e.contains("native_libraries=") && e.contains("--allow-native"), "{e}");
    }
    // An allowed folder or file admits it; another folder or file does not.
    assert_eq!(run_mlp(load_executable_with(&rvx, &allow(&[dir.path()])).unwrap()), f32s("mlp_y.bin"));
    assert_eq!(run_mlp(load_executable_with(&rvx, &allow(&[&so])).unwrap()), f32s("mlp_y.bin"));
    let other = tempfile::tempdir().unwrap();
    let e = load_executable_with(&rvx, &allow(&[other.path()])).err().unwrap().to_string();
    assert!(e.contains("is not among the allowed native libraries") && e.contains(&hash), "{e}");
    let e = load_executable_with(&rvx, &allow(&[&rvx])).err().unwrap().to_string();
    assert!(e.contains("is not among the allowed"), "{e}");
    // An allowed subfolder's parent does not admit it: folders are not recursive.
    let nested = dir.path().join("nested");
    std::fs::create_dir(&nested).unwrap();
    let e = load_executable_with(&rvx, &allow(&[&nested])).err().unwrap().to_string();
    assert!(e.contains("is not among the allowed"), "{e}");
    // The core loader never opens one.
    let plain = relaxvm::format::load_file_with(&rvx, &any()).unwrap();
    assert!(plain.libraries()[0].loaded.is_none());
}

#[test]
fn checking_libraries_reads_them_as_data_and_reports_each() {
    let dir = tempfile::tempdir().unwrap();
    let so = dir.path().join("model.so");
    std::fs::copy(data("mlp.so"), &so).unwrap();
    let exe = inspect_module(&so).unwrap();
    let checks = check_libraries(&exe, Some(dir.path()), &Default::default());
    assert!(checks[0].is_ok(), "{}", checks[0]);
    assert!(matches!(&checks[0].state, LibraryState::Matches { kernels, .. } if kernels.iter().any(|k| k == "matmul")));
    assert!(checks[0].to_string().contains("hash matches"), "{}", checks[0]);
    let mut bytes = std::fs::read(&so).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&so, &bytes).unwrap();
    let checks = check_libraries(&exe, Some(dir.path()), &Default::default());
    assert!(matches!(checks[0].state, LibraryState::HashDiffers { .. }), "{}", checks[0]);
    std::fs::remove_file(&so).unwrap();
    std::fs::create_dir(&so).unwrap();
    let checks = check_libraries(&exe, Some(dir.path()), &Default::default());
    assert!(matches!(checks[0].state, LibraryState::Unusable { .. }), "{}", checks[0]);
    assert!(checks[0].to_string().contains("expected a regular file, found a directory"), "{}", checks[0]);
    std::fs::remove_dir(&so).unwrap();
    let checks = check_libraries(&exe, Some(dir.path()), &Default::default());
    assert!(matches!(checks[0].state, LibraryState::NotFound { .. }), "{}", checks[0]);
}

#[test]
fn other_magic_and_versions_are_refused_by_name() {
    let good = std::fs::read(data("mlp.vmexec")).unwrap();
    let mut bad = good.clone();
    bad[0] ^= 1;
    let e = vmexec::read(&bad).err().unwrap().to_string();
    assert!(e.contains("magic number") && e.contains("0xd225de2f4214151e"), "{e}");
    let mut old = good.clone();
    // The version string follows the magic and its u64 length: "0.14" -> "0.13".
    assert_eq!(&old[16..20], b"0.14");
    old[19] = b'3';
    let e = vmexec::read(&old).err().unwrap().to_string();
    assert!(e.contains("\"0.13\"") && e.contains("0.14"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("model.so");
    std::fs::write(&text, "not a model").unwrap();
    let e = load_module(&text).err().unwrap().to_string();
    assert!(e.contains("not an ELF") && e.contains("6e 6f 74"), "{e}");
}

#[test]
fn every_truncation_and_many_corruptions_of_a_vmexec_are_errors() {
    let good = std::fs::read(data("mlp.vmexec")).unwrap();
    for n in 0..good.len() {
        assert!(
            format!("{:?}", vmexec::read(&good[..n]).expect_err("an error")).starts_with(r#"Format("#),
            "truncated at {n}"
        );
    }
    // Flip each byte in turn: an error or a verified executable, never a panic.
    let mut loaded = 0;
    for i in 0..good.len() {
        let mut bad = good.clone();
        bad[i] ^= 0x5A;
        if vmexec::read(&bad).is_ok() {
            loaded += 1;
        }
    }
    // Flips inside strings and constant data still load; structural ones do not.
    assert!(loaded < good.len() / 2, "{loaded} of {} corrupted files loaded", good.len());
}

#[test]
fn a_so_without_the_program_or_not_a_so_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let so = std::fs::read(data("mlp.so")).unwrap();
    // A valid library that exports no blob. (Renaming the symbol in the file is a corruption
    // the ELF checks refuse: its name no longer matches its hash.)
    let path = common::compile("no_blob", "int f(int x) { return x + 1; }\n");
    let e = inspect_module(&path).err().unwrap().to_string();
    assert!(e.contains("__tvm_ffi__library_bin") && e.contains("export_library"), "{e}");
    for cut in [10, 64, 1000, so.len() / 2, so.len() - 1] {
        let path = dir.path().join(format!("cut{cut}.so"));
        std::fs::write(&path, &so[..cut]).unwrap();
        assert!(
            format!("{:?}", inspect_module(&path).expect_err("an error")).starts_with(r#"Format("#),
            "truncated at {cut}"
        );
        assert!(
            format!("{:?}", load_module(&path).expect_err("an error")).starts_with(r#"Format("#),
            "truncated at {cut}"
        );
    }
}

#[test]
fn a_missing_kernel_is_named_when_the_vm_is_built() {
    // The standalone program has no library: every kernel is missing, and named.
    relaxvm_builtins::ensure_registered();
    let exe = load_module(data("mlp.vmexec")).unwrap();
    let e = VirtualMachine::new(Arc::new(exe)).err().unwrap().to_string();
    assert!(e.contains("matmul") && e.contains("relu") && !e.contains("vm.builtin.match_shape"), "{e}");
    // Each is named with where the program first calls it.
    assert!(e.contains("relu (called by \"main\" at instruction "), "{e}");
}

#[test]
fn library_references_to_special_files_are_refused_before_reading_them() {
    let dir = tempfile::tempdir().unwrap();
    let exe = inspect_module(data("mlp.so")).unwrap();
    for (path, why) in [
        ("/proc/self/pagemap", "holds more than the 0 bytes it reports"),
        ("/dev/zero", "expected a regular file, found a character device"),
    ] {
        let reference = relaxvm::LibraryRef { path: path.into(), content_hash: 0 };
        let crafted = exe.clone().with_libraries(vec![relaxvm::executable::Library { reference, loaded: None }]);
        let rvx = dir.path().join("crafted.rvx");
        crafted.save(&rvx, &Default::default()).unwrap();
        // Even with consent to open anything, the reference is read as every input is.
        if std::path::Path::new(path).exists() {
            let e = load_executable_with(&rvx, &any()).err().unwrap().to_string();
            assert!(e.contains(path.rsplit('/').next().unwrap()) && e.contains(why), "{e}");
            let checks = check_libraries(&crafted, Some(dir.path()), &Default::default());
            assert!(
                matches!(&checks[0].state, LibraryState::Unusable { error, .. } if error.contains(why)),
                "{}",
                checks[0]
            );
        }
    }
}
