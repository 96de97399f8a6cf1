//! Making the runtime's C symbols resolvable by the libraries it opens (and the C math
//! library, which TVM's libraries use without naming it).
//!
//! Every TVM library imports `TVMFFIErrorSetRaisedFromCStrParts`, which the copy relaxvm loads
//! imports as `RVMFFIErrorSetRaisedFromCStrParts` (`rebind.rs`), and the dynamic loader binds
//! it from the global scope when the library is opened. relaxvm defines it (`raised.rs`), but
//! where that definition is visible depends on the program:
//!
//! - a shared object loaded privately (Python loads extension modules with `RTLD_LOCAL`): we
//!   promote that object to the global scope with `dlopen(path, RTLD_NOLOAD | RTLD_GLOBAL)`;
//! - an executable (the `relaxvm` CLI, tests): it must export the symbol dynamically, which
//!   the crates' build scripts arrange (`-Wl,--export-dynamic-symbol=...`).
//!
//! Either way, the definition the loader will bind is checked before a library is opened, so a
//! program that cannot provide it gets an error, never a library that fails later. What the
//! global scope gains this way are relaxvm's names only (`RVM...`): no library Apache TVM opens
//! in the same process binds them.

use super::raised::RVMFFIErrorSetRaisedFromCStrParts;
use relaxvm::{Error, Result};
use std::ffi::{c_void, CStr};
use std::sync::Once;

const SYMBOL: &CStr = c"RVMFFIErrorSetRaisedFromCStrParts";

/// Ensures kernels can bind `RVMFFIErrorSetRaisedFromCStrParts`: relaxvm's definition is
/// promoted to the global scope once per process, then the definition the loader binds is
/// checked at every call (another copy of relaxvm loaded later may change it).
pub fn ensure_runtime_symbols() -> Result<()> {
    static PROMOTE: Once = Once::new();
    PROMOTE.call_once(promote);
    check_binding().map_err(Error::value)
}

/// The loaded object (shared library or executable) that holds `addr`, by path.
fn object_of(addr: *const c_void) -> Option<*const std::ffi::c_char> {
    // SAFETY: `info` is plain data that dladdr fills.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the loader's tables for `addr`.
    let found = unsafe { libc::dladdr(addr, &mut info) } != 0;
    (found && !info.dli_fname.is_null()).then_some(info.dli_fname)
}

/// A private (never exported) item of this object: its address, unlike that of an exported
/// function, cannot be interposed by another object's definition, so `dladdr` on it names the
/// object that holds relaxvm's code.
static ANCHOR: u8 = 0;

/// The path of the object (executable or shared library) that holds relaxvm's code.
fn our_object() -> Option<*const std::ffi::c_char> {
    object_of((&ANCHOR as *const u8).cast())
}

/// Whether two `dladdr` paths name the same object.
fn same_object(a: *const std::ffi::c_char, b: *const std::ffi::c_char) -> bool {
    // SAFETY: both are NUL-terminated paths returned by dladdr for loaded objects.
    a == b || unsafe { CStr::from_ptr(a) == CStr::from_ptr(b) }
}

/// The C math library: TVM's libraries call it (`expf`, `tanhf`, `powf`...) without naming it
/// (no DT_NEEDED entry), counting on TVM's runtime, which links it, to be loaded.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const LIBM: Option<&CStr> = Some(c"libm.so.6");
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
const LIBM: Option<&CStr> = None; // musl: the math functions are in libc.

fn promote() {
    if let Some(libm) = LIBM {
        // SAFETY: loading the system math library (or taking a new reference to it when already
        // loaded) runs only its own initializers; RTLD_GLOBAL makes its functions visible to
        // the libraries opened later. The handle is deliberately never closed. Failure leaves
        // the kernels' math imports unresolved, which dlopen then reports by name.
        unsafe { libc::dlopen(libm.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    }
    if let Some(path) = our_object() {
        // SAFETY: dladdr returned a NUL-terminated path of an already loaded object; with
        // RTLD_NOLOAD nothing new is loaded, the object's scope just becomes global (for the
        // main program the call returns its handle or null, both fine). The handle is
        // deliberately not closed: the object must stay global while libraries may bind to it.
        unsafe { libc::dlopen(path, libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_GLOBAL) };
    }
}

fn check_binding() -> std::result::Result<(), String> {
    let name = SYMBOL.to_string_lossy();
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only reads the loader's tables.
    let bound = unsafe { libc::dlsym(libc::RTLD_DEFAULT, SYMBOL.as_ptr()) }.cast_const();
    if bound.is_null() {
        return Err(format!(
            "this program does not export {name} for TVM kernels to bind: link it with -Wl,--export-dynamic-symbol={name} (see relaxvm-tvm's build.rs)"
        ));
    }
    // Compared by object, not by address: inside a shared library the address of an exported
    // function is itself resolved through the global scope, so it may be the other definition.
    let path = object_of(bound);
    let ours = match (path, our_object()) {
        (Some(bound_in), Some(ours_in)) => same_object(bound_in, ours_in),
        _ => bound == RVMFFIErrorSetRaisedFromCStrParts as *const c_void,
    };
    if ours {
        return Ok(());
    }
    // Another copy of relaxvm, global before this one: kernels' errors would go to its slot.
    let shown = path
        // SAFETY: dladdr's path is a NUL-terminated string of a loaded object.
        .map(|p| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
        .unwrap_or_else(|| "an unknown object".into());
    Err(format!("{name} resolves to {shown}, not to this copy of relaxvm: errors raised by kernels could not be read"))
}

/// relaxvm's AnyList functions, which the libraries it opens bind under these names
/// (`super::rebind`), with their definitions.
fn anylist_symbols() -> [(&'static CStr, *const c_void); 3] {
    use crate::vmtir::frame;
    type Move = unsafe extern "C" fn(*mut c_void, i32, *mut super::abi::TVMFFIAny, i32) -> i32;
    type Reset = unsafe extern "C" fn(*mut c_void, i32) -> i32;
    [
        (c"RVMBackendAnyListSetPackedArg", frame::RVMBackendAnyListSetPackedArg as Move as *const c_void),
        (
            c"RVMBackendAnyListMoveFromPackedReturn",
            frame::RVMBackendAnyListMoveFromPackedReturn as Move as *const c_void,
        ),
        (c"RVMBackendAnyListResetItem", frame::RVMBackendAnyListResetItem as Reset as *const c_void),
    ]
}

/// Ensures the compiled functions of the libraries relaxvm opens will bind relaxvm's AnyList
/// functions: the program exports them (an error naming the link argument otherwise), and the
/// definition found is relaxvm's (an error naming the object that defines the name otherwise).
pub fn ensure_anylist_symbols() -> Result<()> {
    for (symbol, ours) in anylist_symbols() {
        let name = symbol.to_string_lossy();
        // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only reads the loader's tables.
        let bound = unsafe { libc::dlsym(libc::RTLD_DEFAULT, symbol.as_ptr()) }.cast_const();
        if bound.is_null() {
            return Err(Error::value(format!(
                "this program does not export {name}, which compiled functions (exec_mode=\"compiled\") call: link it with -Wl,--export-dynamic-symbol={name} (see relaxvm-tvm's build.rs)"
            )));
        }
        // Compared by object, as in `check_binding`: inside a shared library the address of
        // our exported function is itself resolved through the global scope, so it may be the
        // other definition (a preloaded one was taken for ours before).
        let same = match (object_of(bound), our_object()) {
            (Some(b), Some(o)) => same_object(b, o),
            _ => bound == ours,
        };
        if !same {
            let shown = object_of(bound)
                // SAFETY: dladdr's path is a NUL-terminated string of a loaded object.
                .map(|p| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
                .unwrap_or_else(|| "an unknown object".into());
            return Err(Error::value(format!("{name} resolves to {shown}, not to relaxvm")));
        }
    }
    Ok(())
}
