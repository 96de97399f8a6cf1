//! Another object that defines relaxvm's runtime names globally before relaxvm (a preloaded
//! library, another copy of relaxvm): opening a library is refused, naming the object that the
//! kernels would bind instead, before any kernel could call it. Each case runs this test program
//! again in a child process with `LD_PRELOAD` (the only way to put an object ahead of the
//! program in the global scope), which runs the one `#[ignore]`d test that opens the library.

mod common;

use common::compile;
use relaxvm::ErrorKind;
use relaxvm_tvm::ffi::Library;
use std::path::Path;
use std::process::Command;

/// The child's variables: the library to open and the message its opening must fail with.
const LIBRARY: &str = "RELAXVM_INTERPOSED_LIBRARY";
const WANT: &str = "RELAXVM_INTERPOSED_WANT";

/// Runs `child_opens_the_library_and_is_refused` in a child with `preload` ahead of everything.
fn run_child(preload: &Path, library: &Path, want: &str) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_opens_the_library_and_is_refused", "--ignored", "--test-threads=1"])
        .env("LD_PRELOAD", preload)
        .env(LIBRARY, library)
        .env(WANT, want)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[ignore = "run by the tests below, in a child process with LD_PRELOAD"]
fn child_opens_the_library_and_is_refused() {
    let library = std::env::var(LIBRARY).expect("run by run_child");
    let want = std::env::var(WANT).expect("run by run_child");
    let e = Library::open(Path::new(&library)).unwrap_err();
    assert!(matches!(e.root().kind(), ErrorKind::Value(_)), "{e:?}");
    assert_eq!(e.to_string(), want);
}

#[test]
fn a_preloaded_definition_of_the_error_function_is_named() {
    let preload = compile(
        "preload_raised",
        "int RVMFFIErrorSetRaisedFromCStrParts(const char *k, const char **p, int n) { return 0; }\n",
    );
    let library = compile("plain_kernel", "int f(int x) { return x; }\n");
    let want = format!(
        "{}: RVMFFIErrorSetRaisedFromCStrParts resolves to {}, not to this copy of relaxvm: errors raised by kernels could not be read",
        library.display(),
        preload.display()
    );
    run_child(&preload, &library, &want);
}

#[test]
fn a_preloaded_definition_of_an_anylist_function_is_named() {
    let preload =
        compile("preload_anylist", "int RVMBackendAnyListSetPackedArg(void *a, int i, void *s, int o) { return 0; }\n");
    // A library with a compiled function (its name has the VM TIR prefix): the AnyList functions
    // are checked before it is opened.
    let library =
        compile("compiled_function", "int __tvm_ffi___vmtir__main(void *a, void *b, int n, void *r) { return 0; }\n");
    let want = format!(
        "{}: RVMBackendAnyListSetPackedArg resolves to {}, not to relaxvm",
        library.display(),
        preload.display()
    );
    run_child(&preload, &library, &want);
}
