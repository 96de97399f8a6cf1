//! The error a kernel raises: the tvm-ffi C functions that set it, and the thread-local slot
//! the runtime takes it from after a kernel returns non-zero.
//!
//! Kernels import `TVMFFIErrorSetRaisedFromCStrParts` (an undefined symbol of every TVM
//! library) and reach `TVMFFIErrorSetRaisedFromCStr` through a pointer slot; both are defined
//! here with C linkage so that the dynamic loader can bind them (see `visibility.rs`).
//!
//! When TVM's own runtime (`libtvm_ffi.so`) sits in the process's global scope ahead of
//! relaxvm's definition (Python code that imported `tvm` first), the loader binds kernels to
//! TVM's function instead, and the error lands in TVM's thread-local slot: it is then taken from
//! there with TVM's C API (`TVMFFIErrorMoveFromRaised`), see `ForeignErrors`.

use super::abi::{type_index, TVMFFIByteArray, TVMFFIErrorCell, TVMFFIObject};
use relaxvm::{Error, ErrorKind};
use std::cell::RefCell;
use std::ffi::{c_char, c_void, CStr};
use std::sync::{Arc, OnceLock};

thread_local! {
    static RAISED: RefCell<Option<(String, String)>> = const { RefCell::new(None) };
    /// The embedder's own error behind the one in `RAISED`, when it must pass through kernels
    /// unchanged (see [`pass_through`]); cleared whenever `RAISED` changes otherwise.
    static CARRIED: RefCell<Option<Foreign>> = const { RefCell::new(None) };
}

/// An embedder's error value (e.g. a Python exception), as [`ErrorKind::External`] holds it.
pub type Foreign = Arc<dyn std::error::Error + Send + Sync>;

/// Which embedder errors pass through a kernel unchanged: see [`pass_through`].
static PASSES_THROUGH: OnceLock<fn(&Foreign) -> bool> = OnceLock::new();

/// Makes embedder errors that `passes` accepts pass through kernels unchanged: when a
/// function a kernel calls back fails with one, the kernel is told an error happened (as with
/// any error) and, when it returns, the caller gets that very error back instead of a
/// [`ErrorKind::Raised`] describing it. Python uses it for `KeyboardInterrupt` and
/// `SystemExit`, which must reach the interpreter as themselves. The first call wins.
pub fn pass_through(passes: fn(&Foreign) -> bool) {
    let _ = PASSES_THROUGH.set(passes);
}

/// A failed task's error, taken on the thread that ran it to be raised on another.
#[derive(Debug)]
pub struct Pending {
    kind: String,
    message: String,
    carried: Option<Foreign>,
}

/// Takes this thread's error with the embedder's error behind it, if any.
pub fn take_pending() -> Option<Pending> {
    let carried = CARRIED.with(|c| c.borrow_mut().take());
    take_raw().map(|(kind, message)| Pending { kind, message, carried })
}

/// Raises `p` on this thread (taken on another by [`take_pending`]).
pub fn restore(p: Pending) {
    set(p.kind, p.message);
    CARRIED.with(|c| *c.borrow_mut() = p.carried);
}

impl Pending {
    /// A task's failure that left no error of its own, e.g. a panic.
    pub fn new(kind: String, message: String) -> Self {
        Pending { kind, message, carried: None }
    }
}

/// Text of a C string, or a placeholder for null.
///
/// # Safety
/// `p` is null or points to a NUL-terminated string.
unsafe fn text(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: the caller guarantees a NUL-terminated string.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// Records an error of `kind` with `message` for the current thread.
pub fn set(kind: String, message: String) {
    RAISED.with(|r| *r.borrow_mut() = Some((kind, message)));
    CARRIED.with(|c| c.borrow_mut().take());
}

/// Takes the error the current thread recorded, as `(kind, message)`: relaxvm's own slot
/// first, then TVM's when kernels are bound to TVM's runtime (see `ForeignErrors`).
pub fn take_raw() -> Option<(String, String)> {
    RAISED.with(|r| r.borrow_mut().take()).or_else(take_foreign)
}

/// Takes the error the current thread recorded, as a relaxvm error about `what` (e.g. `kernel
/// "matmul"`). A non-zero return without a recorded error is reported as such.
pub fn take(what: &str) -> Error {
    let carried = CARRIED.with(|c| c.borrow_mut().take());
    let raw = take_raw();
    if let (Some(carried), Some(_)) = (carried, &raw) {
        // The embedder's own error, which must pass through unchanged.
        return ErrorKind::External(carried).into();
    }
    let (kind, message) =
        raw.unwrap_or_else(|| ("RuntimeError".to_string(), "failed without setting an error message".to_string()));
    let message = format!("{what} raised {kind}: {message}");
    ErrorKind::Raised { kind, message }.into()
}

/// Records `e`, an error of relaxvm code called by a kernel, with the tvm-ffi kind that fits it
/// (a kernel's own error keeps its kind), so that it reaches the caller as TVM would report it.
pub fn set_error(e: &Error) {
    let root = e.root();
    let kind = match root.kind() {
        ErrorKind::Raised { kind, message } => return set(kind.clone(), message.clone()),
        ErrorKind::External(inner) if PASSES_THROUGH.get().is_some_and(|passes| passes(inner)) => {
            set("RuntimeError".to_string(), e.to_string());
            CARRIED.with(|c| *c.borrow_mut() = Some(inner.clone()));
            return;
        }
        ErrorKind::Type { .. } | ErrorKind::Arity { .. } => "TypeError",
        ErrorKind::Value(_) | ErrorKind::Format(_) | ErrorKind::Invalid(_) => "ValueError",
        ErrorKind::Index { .. } => "IndexError",
        ErrorKind::Alloc { .. } => "MemoryError",
        ErrorKind::UnknownFunction(_) | ErrorKind::MissingFunctions(_) => "KeyError",
        _ => "RuntimeError",
    };
    set(kind.to_string(), e.to_string());
}

/// Forgets any error recorded on this thread (before a call, so a stale one is never reported).
pub fn clear() {
    RAISED.with(|r| r.borrow_mut().take());
    CARRIED.with(|c| c.borrow_mut().take());
}

/// TVM's error functions, used when the dynamic loader binds kernels'
/// `TVMFFIErrorSetRaisedFromCStrParts` to a tvm-ffi runtime already in the process instead of
/// relaxvm's definition.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ForeignErrors {
    /// `TVMFFIErrorMoveFromRaised(TVMFFIObjectHandle* result)`.
    move_from_raised: unsafe extern "C" fn(*mut *mut c_void),
    /// `TVMFFIObjectDecRef(TVMFFIObjectHandle obj)`.
    dec_ref: unsafe extern "C" fn(*mut c_void) -> i32,
}

static FOREIGN: OnceLock<ForeignErrors> = OnceLock::new();

impl ForeignErrors {
    /// The error functions at these addresses.
    ///
    /// # Safety
    /// `move_from_raised` and `dec_ref` are non-null addresses of tvm-ffi's
    /// `TVMFFIErrorMoveFromRaised` and `TVMFFIObjectDecRef` (those signatures), in a library
    /// that stays loaded for the rest of the process.
    pub(crate) unsafe fn new(move_from_raised: *const c_void, dec_ref: *const c_void) -> Self {
        // SAFETY: the caller's contract: functions with exactly these C signatures.
        unsafe {
            ForeignErrors {
                move_from_raised: std::mem::transmute::<*const c_void, unsafe extern "C" fn(*mut *mut c_void)>(
                    move_from_raised,
                ),
                dec_ref: std::mem::transmute::<*const c_void, unsafe extern "C" fn(*mut c_void) -> i32>(dec_ref),
            }
        }
    }

    /// Makes [`take`] read errors from this runtime too (the first registration wins: a process
    /// has one tvm-ffi runtime).
    pub(crate) fn install(self) {
        let _ = FOREIGN.set(self);
    }

    /// Whether a foreign runtime is installed.
    pub(crate) fn installed() -> bool {
        FOREIGN.get().is_some()
    }
}

/// Text of borrowed bytes.
///
/// # Safety
/// `b.data` is null or valid for `b.size` bytes.
unsafe fn byte_text(b: TVMFFIByteArray) -> String {
    if b.data.is_null() {
        return String::new();
    }
    // SAFETY: the caller's contract.
    String::from_utf8_lossy(unsafe { std::slice::from_raw_parts(b.data, b.size) }).into_owned()
}

/// The error in the foreign runtime's slot for this thread, taken (and released).
fn take_foreign() -> Option<(String, String)> {
    let f = FOREIGN.get()?;
    let mut obj: *mut c_void = std::ptr::null_mut();
    // SAFETY: `move_from_raised` is tvm-ffi's TVMFFIErrorMoveFromRaised (ForeignErrors::new's
    // contract); it writes an owned error handle, or null when no error is raised.
    unsafe { (f.move_from_raised)(&mut obj) };
    if obj.is_null() {
        return None;
    }
    // SAFETY: a tvm-ffi object handle points at its TVMFFIObject header.
    let header = unsafe { &*(obj as *const TVMFFIObject) };
    let raised = if header.type_index == type_index::ERROR {
        // SAFETY: an error object's body, a TVMFFIErrorCell, follows its header
        // (TVMFFIErrorGetCellPtr in c_api.h); its byte arrays live as long as the object.
        unsafe {
            let cell = &*(obj.cast::<u8>().add(std::mem::size_of::<TVMFFIObject>()) as *const TVMFFIErrorCell);
            (byte_text(cell.kind), byte_text(cell.message))
        }
    } else {
        ("RuntimeError".to_string(), format!("raised an object of tvm-ffi type index {}", header.type_index))
    };
    // SAFETY: we own the reference TVMFFIErrorMoveFromRaised handed out; nothing uses `obj`
    // after this.
    unsafe { (f.dec_ref)(obj) };
    Some(raised)
}

/// `TVMFFIErrorSetRaisedFromCStr(kind, message)`.
///
/// # Safety
/// `kind` and `message` are null or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIErrorSetRaisedFromCStr(kind: *const c_char, message: *const c_char) {
    // SAFETY: forwarded from the caller's contract.
    let (k, m) = unsafe { (text(kind), text(message)) };
    set(k, m);
}

/// What relaxvm stores in a library's `__TVMFFIErrorSetRaisedFromCStr` slot: the same as
/// [`TVMFFIErrorSetRaisedFromCStr`], but not exported, so that taking its address inside a
/// shared library cannot yield another object's definition of the exported name.
///
/// # Safety
/// As [`TVMFFIErrorSetRaisedFromCStr`].
pub(crate) unsafe extern "C" fn set_raised_from_cstr_slot(kind: *const c_char, message: *const c_char) {
    // SAFETY: forwarded from the caller's contract.
    let (k, m) = unsafe { (text(kind), text(message)) };
    set(k, m);
}

/// `TVMFFIErrorSetRaisedFromCStrParts(kind, parts, num_parts)`: the message is the parts
/// concatenated.
///
/// # Safety
/// `kind` is null or a NUL-terminated string; `parts` is null or points to `num_parts` pointers,
/// each null or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIErrorSetRaisedFromCStrParts(
    kind: *const c_char,
    parts: *const *const c_char,
    num_parts: i32,
) {
    let mut message = String::new();
    if !parts.is_null() {
        for i in 0..usize::try_from(num_parts).unwrap_or(0) {
            // SAFETY: `parts` holds `num_parts` string pointers (the caller's contract).
            message.push_str(&unsafe { text(*parts.add(i)) });
        }
    }
    // SAFETY: `kind` is null or NUL-terminated.
    set(unsafe { text(kind) }, message);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_joined_and_taken_once() {
        let parts = [c"shape ".as_ptr(), c"mismatch".as_ptr()];
        // SAFETY: static NUL-terminated strings and an array of two of them.
        unsafe { TVMFFIErrorSetRaisedFromCStrParts(c"ValueError".as_ptr(), parts.as_ptr(), 2) };
        let e = take("kernel \"k\"");
        assert!(matches!(e.kind(), ErrorKind::Raised { kind, .. } if kind == "ValueError"));
        assert!(e.to_string().contains("kernel \"k\" raised ValueError: shape mismatch"), "{e}");
        assert!(take("x").to_string().contains("without setting an error message"));
        // SAFETY: null pointers are accepted.
        unsafe { TVMFFIErrorSetRaisedFromCStr(std::ptr::null(), std::ptr::null()) };
        clear();
        assert!(take("x").to_string().contains("without setting"));
    }

    #[test]
    fn an_embedder_error_that_passes_through_is_returned_unchanged_even_from_another_thread() {
        pass_through(|e| e.to_string().starts_with("passes"));
        let through = Error::external(std::io::Error::other("passes: an interrupt"));
        set_error(&through.context("calling back"));
        let e = take("kernel \"k\"");
        assert!(matches!(e.kind(), ErrorKind::External(inner) if inner.to_string() == "passes: an interrupt"), "{e}");
        // Any other embedder error is described, as kernels' errors are.
        set_error(&Error::external(std::io::Error::other("stays")));
        let e = take("kernel \"k\"");
        assert!(matches!(e.kind(), ErrorKind::Raised { kind, .. } if kind == "RuntimeError"), "{e}");
        // A kernel that raises its own error after the callback's replaces it.
        set_error(&Error::external(std::io::Error::other("passes")));
        set("ValueError".into(), "the kernel's own".into());
        assert!(take("k").to_string().contains("the kernel's own"));
        // Handed from a pool worker's thread to the launcher's.
        let pending = std::thread::spawn(|| {
            set_error(&Error::external(std::io::Error::other("passes: on a worker")));
            take_pending()
        });
        restore(pending.join().unwrap().unwrap());
        let e = take("k");
        assert!(matches!(e.kind(), ErrorKind::External(inner) if inner.to_string() == "passes: on a worker"), "{e}");
        clear();
    }

    /// A stand-in for TVM's runtime: its own error slot, read through its C API.
    const FAKE_RUNTIME: &str = r#"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
typedef struct { const char* data; size_t size; } ByteArray;
typedef struct { uint64_t refs; int32_t type_index; uint32_t pad; void* deleter;
                 ByteArray kind, message, backtrace; void* update; void* cause; void* extra; } Error;
static __thread Error* raised = 0;
int released = 0;
static ByteArray copy(const char* s) { ByteArray b = {strdup(s), strlen(s)}; return b; }
void fake_raise(int32_t type_index, const char* kind, const char* message) {
  Error* e = calloc(1, sizeof(Error));
  e->refs = 1; e->type_index = type_index; e->kind = copy(kind); e->message = copy(message);
  raised = e;
}
void TVMFFIErrorMoveFromRaised(void** out) { *out = raised; raised = 0; }
int TVMFFIObjectDecRef(void* obj) {
  Error* e = obj;
  free((void*)e->kind.data); free((void*)e->message.data); free(e);
  ++released;
  return 0;
}
"#;

    #[test]
    fn errors_in_a_foreign_runtime_slot_are_taken_from_it() {
        let dir = tempfile::tempdir().unwrap();
        let (c, so) = (dir.path().join("fake.c"), dir.path().join("fake.so"));
        std::fs::write(&c, FAKE_RUNTIME).unwrap();
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let out = std::process::Command::new(&cc).args(["-shared", "-fPIC", "-o"]).arg(&so).arg(&c).output();
        let out = out.unwrap_or_else(|e| panic!("the C compiler {cc:?} is needed for this test: {e}"));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        // SAFETY: a library built above, without initializers; kept loaded (leaked) because the
        // installed functions must stay valid for the process. A static holds it (LeakSanitizer
        // counts what a global reaches as live, not leaked).
        static LIB: std::sync::OnceLock<libloading::Library> = std::sync::OnceLock::new();
        let lib = LIB.get_or_init(|| unsafe { libloading::Library::new(&so) }.unwrap());
        // SAFETY: the symbols have the types the C source above declares.
        unsafe {
            let raise = *lib.get::<unsafe extern "C" fn(i32, *const c_char, *const c_char)>(b"fake_raise").unwrap();
            let take_fn = *lib.get::<unsafe extern "C" fn(*mut *mut c_void)>(b"TVMFFIErrorMoveFromRaised").unwrap();
            let dec_ref = *lib.get::<unsafe extern "C" fn(*mut c_void) -> i32>(b"TVMFFIObjectDecRef").unwrap();
            let released = *lib.get::<*const i32>(b"released").unwrap();
            ForeignErrors::new(take_fn as *const c_void, dec_ref as *const c_void).install();
            assert!(ForeignErrors::installed());
            clear();
            raise(type_index::ERROR, c"KeyError".as_ptr(), c"no such key".as_ptr());
            let e = take("kernel \"k\"");
            assert!(matches!(e.kind(), ErrorKind::Raised { kind, .. } if kind == "KeyError"), "{e:?}");
            assert_eq!(e.to_string(), "kernel \"k\" raised KeyError: no such key");
            assert_eq!(*released, 1, "the error object is released once");
            // Taken: nothing is left in either slot.
            assert!(take_raw().is_none());
            // relaxvm's own slot comes first.
            set("TypeError".into(), "ours".into());
            raise(type_index::ERROR, c"ValueError".as_ptr(), c"theirs".as_ptr());
            assert_eq!(take_raw(), Some(("TypeError".into(), "ours".into())));
            assert_eq!(take_raw(), Some(("ValueError".into(), "theirs".into())));
            // An object that is not an error is reported as such, and released.
            raise(70, c"x".as_ptr(), c"y".as_ptr());
            let (kind, message) = take_raw().unwrap();
            assert_eq!(
                (kind.as_str(), message.as_str()),
                ("RuntimeError", "raised an object of tvm-ffi type index 70")
            );
            assert_eq!(*released, 3);
        }
    }
}
