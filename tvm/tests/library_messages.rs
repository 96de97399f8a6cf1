//! The whole message of the errors of opening a native library and of loading a model that
//! references one: a runtime service relaxvm lacks, a library the dynamic loader refuses, a
//! `.so` that is no TVM model, a referenced library that is missing or not allowed.

mod common;

use common::compile;
use relaxvm::format::{LoadOptions, NativeLibraries};
use relaxvm::ErrorKind;
use relaxvm_tvm::ffi::Library;
use relaxvm_tvm::import::{content_hash, inspect_module, load_executable, load_executable_with, load_module};
use std::path::Path;

fn value_error(e: relaxvm::Error) -> String {
    assert!(matches!(e.root().kind(), ErrorKind::Value(_)), "{e:?}");
    e.to_string()
}

#[test]
fn a_runtime_service_of_another_tvm_version_is_named() {
    let so = compile("future_service", "void *__TVMFutureRuntimeService = 0;\nint f(int x) { return x; }\n");
    let e = value_error(Library::open(&so).unwrap_err());
    assert_eq!(
        e,
        format!(
            "{}: the library expects runtime service \"__TVMFutureRuntimeService\", which relaxvm does not provide (a library from another TVM version?)",
            so.display()
        )
    );
}

#[test]
fn a_library_the_dynamic_loader_refuses_is_named() {
    let so = compile(
        "unresolved",
        "extern int errsb_no_such_function(int);\nint f(int x) { return errsb_no_such_function(x); }\n",
    );
    let e = value_error(Library::open(&so).unwrap_err());
    assert!(
        e.starts_with(&format!("{}: the dynamic loader refused it: ", so.display()))
            && e.contains("undefined symbol: errsb_no_such_function"),
        "{e}"
    );
}

#[test]
fn a_so_that_is_no_tvm_model_says_so() {
    let so = compile("not_a_model", "int g(int x) { return x * 2; }\n");
    let e = inspect_module(&so).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::Format(_)), "{e:?}");
    assert!(
        e.to_string().ends_with(&format!(
            "{}: the library exports no __tvm_ffi__library_bin symbol; it is not a model written by TVM's export_library",
            so.display()
        )),
        "{e}"
    );
}

#[test]
fn a_referenced_library_missing_or_not_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let so = dir.path().join("model.so");
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/mlp.so"), &so).unwrap();
    let rvx = dir.path().join("model.rvx");
    load_module(&so).unwrap().save(&rvx, &Default::default()).unwrap();
    let hash = content_hash(&std::fs::read(&so).unwrap());
    let e = value_error(load_executable(&rvx).unwrap_err());
    assert!(
        e.contains(&format!("{} (content hash {hash:#018x})", so.canonicalize().unwrap().display()))
            || e.contains(&format!("{hash:#018x}")),
        "{e}"
    );
    assert!(
        e.contains(
            ". Opening a native library runs its code, so relaxvm opens one only when the caller allows it: in Python, \
             load_executable(..., native_libraries=PATH or [PATHS]) (files, or folders whose files are allowed) or \
             native_libraries=True (any library the file references); on the command line, --allow-native PATH or \
             --allow-native-any"
        ),
        "{e}"
    );
    std::fs::remove_file(&so).unwrap();
    let any = LoadOptions { native_libraries: NativeLibraries::AnyReferenced, ..Default::default() };
    let e = value_error(load_executable_with(&rvx, &any).unwrap_err());
    assert!(
        e.contains(&format!(
            "the executable calls into native library {:?}, which was not found (looked at {}",
            so.canonicalize().unwrap_or(so.clone()).display().to_string(),
            so.display()
        )),
        "{e}"
    );
}

#[test]
fn a_library_that_changes_while_it_is_checked_is_unusable() {
    use relaxvm_tvm::import::{check_libraries, LibraryState};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let so = dir.path().join("model.so");
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/mlp.so"), &so).unwrap();
    let exe = inspect_module(&so).unwrap();
    // The streaming hash polls before each read: the second poll comes after the whole file (one
    // chunk) was hashed, before the end-of-file read. The hook then changes a byte in place, so
    // the hash matches the record and the second read, which lists the kernels, sees another file.
    let polls = Arc::new(AtomicUsize::new(0));
    let (count, target) = (Arc::clone(&polls), so.clone());
    let opts = relaxvm::input_file::ReadOptions {
        poll: Some(Arc::new(move || {
            if count.fetch_add(1, Ordering::SeqCst) == 1 {
                use std::io::{Seek, SeekFrom, Write};
                let mut f = std::fs::OpenOptions::new().write(true).open(&target).unwrap();
                f.seek(SeekFrom::End(-1)).unwrap();
                f.write_all(&[0xAB]).unwrap();
            }
            Ok(())
        })),
        ..Default::default()
    };
    let checks = check_libraries(&exe, Some(dir.path()), &opts);
    assert_eq!(polls.load(Ordering::SeqCst), 2, "one chunk and the end of the file");
    match &checks[0].state {
        LibraryState::Unusable { path, error } => {
            assert_eq!(path, &so);
            assert_eq!(error, &format!("{}: the file changed while it was read", so.display()));
        }
        other => panic!("expected unusable, got {other:?}"),
    }
}

#[test]
fn files_that_are_no_library_are_named_by_their_first_bytes() {
    use relaxvm_tvm::import::{check_libraries, LibraryState};
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "not a model at all").unwrap();
    let e = load_module(&text).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::Format(_)), "{e:?}");
    assert!(
        e.to_string().ends_with(&format!(
            "{}: not an ELF shared library, a TVM relax.VMExecutable or a relaxvm executable (the file starts with bytes 6e 6f 74 20 61 20 6d 6f)",
            text.display()
        )),
        "{e}"
    );
    // A referenced library emptied: the check says so.
    let so = dir.path().join("model.so");
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/mlp.so"), &so).unwrap();
    let exe = inspect_module(&so).unwrap();
    std::fs::write(&so, b"").unwrap();
    let checks = check_libraries(&exe, Some(dir.path()), &Default::default());
    match &checks[0].state {
        LibraryState::Unusable { error, .. } => {
            assert_eq!(
                error,
                &format!("malformed executable file: {}: not an ELF shared library (an empty file)", so.display())
            )
        }
        other => panic!("expected unusable, got {other:?}"),
    }
}

#[test]
fn a_library_that_grows_past_the_limit_while_it_is_hashed_is_unusable() {
    use relaxvm_tvm::import::{check_libraries, LibraryState};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let so = dir.path().join("model.so");
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/mlp.so"), &so).unwrap();
    let exe = inspect_module(&so).unwrap();
    let size = std::fs::metadata(&so).unwrap().len();
    // The size is checked when the file is opened (exactly the limit: accepted); the first poll,
    // before the first read, appends a kilobyte, which the streaming hash then reads past the limit.
    let target = so.clone();
    let opts = relaxvm::input_file::ReadOptions {
        max_bytes: size,
        poll: Some(Arc::new(move || {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().append(true).open(&target).unwrap();
            if f.metadata().unwrap().len() == size {
                f.write_all(&[0; 1024]).unwrap();
            }
            Ok(())
        })),
    };
    let checks = check_libraries(&exe, Some(dir.path()), &opts);
    match &checks[0].state {
        LibraryState::Unusable { error, .. } => assert_eq!(
            error,
            &format!("{}: the file holds more than the input size limit of {size} bytes", so.display())
        ),
        other => panic!("expected unusable, got {other:?}"),
    }
}

/// A model read through `/proc/self/fd/N` of a file removed after it was opened: the bytes read,
/// but the path names no file, so the real path that a loaded model records cannot be had. (The
/// same refusal as a file removed between the read and the resolution, made deterministic.)
#[test]
fn a_model_whose_path_cannot_be_resolved_after_the_read_is_named() {
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("mlp.so");
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/mlp.so"), &copy).unwrap();
    let file = std::fs::File::open(&copy).unwrap();
    std::fs::remove_file(&copy).unwrap();
    let path = format!("/proc/self/fd/{}", file.as_raw_fd());
    let want = format!("cannot resolve {path}: No such file or directory (os error 2)");
    assert_eq!(value_error(inspect_module(&path).unwrap_err()), want);
    assert_eq!(value_error(load_module(&path).unwrap_err()), want);
    drop(file);
}
