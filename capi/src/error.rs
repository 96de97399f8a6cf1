//! Errors as objects: `rvm_error` carries a code and a message. Every entry point returns
//! one (or NULL on success) and catches every panic, so nothing unwinds into C and nothing
//! exits the process.

use crate::handle::{self, publish, Handle, Kind};
use relaxvm::{Error, ErrorKind};
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::Arc;

/// What went wrong, as `rvm_error_get_code` returns it.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum rvm_error_code {
    /// No error (never the code of an error object; `rvm_error_get_code(NULL)` returns it).
    RVM_OK = 0,
    /// A C API misuse: a NULL or wrong handle, a freed handle, invalid UTF-8, a size too large,
    /// an unknown option value.
    RVM_ERROR_INVALID_ARGUMENT = 1,
    /// A value of the wrong type.
    RVM_ERROR_TYPE = 2,
    /// A value of the right type but unacceptable.
    RVM_ERROR_VALUE = 3,
    /// An index out of range.
    RVM_ERROR_INDEX = 4,
    /// A call with the wrong number of arguments.
    RVM_ERROR_ARITY = 5,
    /// Memory that could not be allocated.
    RVM_ERROR_ALLOC = 6,
    /// Integer overflow or division by zero.
    RVM_ERROR_ARITHMETIC = 7,
    /// A function that neither the executable, its libraries nor the registry provides.
    RVM_ERROR_UNKNOWN_FUNCTION = 8,
    /// Functions a native library would provide, which was not opened (no consent).
    RVM_ERROR_LIBRARY_NOT_LOADED = 9,
    /// An error raised by a kernel of a native library, with its own kind in the message.
    RVM_ERROR_RAISED = 10,
    /// A function name registered twice without permission to override.
    RVM_ERROR_ALREADY_REGISTERED = 11,
    /// Calls nested too deep (bytecode frames or native stack).
    RVM_ERROR_STACK_OVERFLOW = 12,
    /// The call was interrupted (`rvm_vm_interrupt`).
    RVM_ERROR_INTERRUPTED = 13,
    /// The VM's step budget ran out.
    RVM_ERROR_STEP_BUDGET = 14,
    /// An executable that fails verification.
    RVM_ERROR_INVALID_EXECUTABLE = 15,
    /// A file that is not a valid executable, model or library.
    RVM_ERROR_FORMAT = 16,
    /// An I/O failure.
    RVM_ERROR_IO = 17,
    /// A panic inside the runtime or a packed function, caught.
    RVM_ERROR_PANIC = 18,
    /// The VM is running a call on another thread (or this call would re-enter it).
    RVM_ERROR_BUSY = 19,
    /// What this build of the library does not provide.
    RVM_ERROR_UNSUPPORTED = 20,
    /// Any other error (a registered C function may return this code).
    RVM_ERROR_OTHER = 21,
}

use rvm_error_code::*;

/// Every code, in number order: the one table the numbers and names below derive from (the
/// enum above is what cbindgen writes into relaxvm.h; the assertion after the table checks the
/// two agree: the codes are numbered 0, 1, 2... and the table holds each number once, in order).
const CODES: [rvm_error_code; 22] = [
    RVM_OK,
    RVM_ERROR_INVALID_ARGUMENT,
    RVM_ERROR_TYPE,
    RVM_ERROR_VALUE,
    RVM_ERROR_INDEX,
    RVM_ERROR_ARITY,
    RVM_ERROR_ALLOC,
    RVM_ERROR_ARITHMETIC,
    RVM_ERROR_UNKNOWN_FUNCTION,
    RVM_ERROR_LIBRARY_NOT_LOADED,
    RVM_ERROR_RAISED,
    RVM_ERROR_ALREADY_REGISTERED,
    RVM_ERROR_STACK_OVERFLOW,
    RVM_ERROR_INTERRUPTED,
    RVM_ERROR_STEP_BUDGET,
    RVM_ERROR_INVALID_EXECUTABLE,
    RVM_ERROR_FORMAT,
    RVM_ERROR_IO,
    RVM_ERROR_PANIC,
    RVM_ERROR_BUSY,
    RVM_ERROR_UNSUPPORTED,
    RVM_ERROR_OTHER,
];

// Entry i is code i, and the last is the enum's last: with numbers that distinct variants
// cannot share, every variant is in the table.
const _: () = {
    let mut i = 0;
    while i < CODES.len() {
        assert!(CODES[i] as usize == i, "CODES must list the codes in number order");
        i += 1;
    }
    assert!(RVM_ERROR_OTHER as usize == CODES.len() - 1, "a code after RVM_ERROR_OTHER is missing from CODES");
};

impl rvm_error_code {
    /// The code of C value `code`, if it names one.
    pub fn from_u32(code: u32) -> Option<rvm_error_code> {
        CODES.get(usize::try_from(code).ok()?).copied()
    }

    /// Its name as C writes it (`RVM_ERROR_TYPE`), NUL-terminated: the variant's name.
    fn c_name(self) -> &'static std::ffi::CStr {
        static NAMES: std::sync::OnceLock<Vec<CString>> = std::sync::OnceLock::new();
        let names = NAMES.get_or_init(|| {
            CODES.iter().map(|c| CString::new(format!("{c:?}")).expect("a Rust identifier has no NUL")).collect()
        });
        &names[self as usize]
    }
}

/// An error on the Rust side, before it becomes an `rvm_error` object.
#[derive(Debug, Clone)]
pub struct CError {
    /// Its code.
    pub code: rvm_error_code,
    /// Its message.
    pub message: String,
}

impl CError {
    /// An error of `code`.
    pub fn new(code: rvm_error_code, message: impl Into<String>) -> Self {
        CError { code, message: message.into() }
    }

    /// A misuse of the C API.
    pub fn invalid(message: impl Into<String>) -> Self {
        CError::new(RVM_ERROR_INVALID_ARGUMENT, message)
    }
}

impl std::fmt::Display for CError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CError {}

/// An error a registered C function returned, carried through the VM as an
/// [`ErrorKind::External`] so that its code comes back out unchanged.
impl From<handle::HandleError> for CError {
    fn from(e: handle::HandleError) -> Self {
        CError::invalid(e.0)
    }
}

impl From<CError> for Error {
    fn from(e: CError) -> Error {
        ErrorKind::External(Arc::new(e)).into()
    }
}

impl From<Error> for CError {
    fn from(e: Error) -> CError {
        let code = match e.root().kind() {
            ErrorKind::Type { .. } => RVM_ERROR_TYPE,
            ErrorKind::Value(_) => RVM_ERROR_VALUE,
            ErrorKind::Index { .. } => RVM_ERROR_INDEX,
            ErrorKind::Arity { .. } => RVM_ERROR_ARITY,
            ErrorKind::Alloc { .. } => RVM_ERROR_ALLOC,
            ErrorKind::Arithmetic(_) => RVM_ERROR_ARITHMETIC,
            ErrorKind::UnknownFunction(_) | ErrorKind::MissingFunctions(_) => RVM_ERROR_UNKNOWN_FUNCTION,
            ErrorKind::LibraryNotLoaded { .. } => RVM_ERROR_LIBRARY_NOT_LOADED,
            ErrorKind::Raised { .. } => RVM_ERROR_RAISED,
            ErrorKind::AlreadyRegistered(_) => RVM_ERROR_ALREADY_REGISTERED,
            ErrorKind::StackOverflow(_) | ErrorKind::NativeStack { .. } => RVM_ERROR_STACK_OVERFLOW,
            ErrorKind::Interrupted => RVM_ERROR_INTERRUPTED,
            ErrorKind::StepBudget(_) => RVM_ERROR_STEP_BUDGET,
            ErrorKind::Invalid(_) => RVM_ERROR_INVALID_EXECUTABLE,
            ErrorKind::Format(_) => RVM_ERROR_FORMAT,
            ErrorKind::Io(_) => RVM_ERROR_IO,
            ErrorKind::Panic(_) => RVM_ERROR_PANIC,
            ErrorKind::External(inner) => inner.downcast_ref::<CError>().map_or(RVM_ERROR_OTHER, |c| c.code),
            // `root` never returns a location wrapper; if a new kind appears, it is "other".
            _ => RVM_ERROR_OTHER,
        };
        let message = match e.root().kind() {
            // The kind a kernel named (`ValueError`...) is part of what the caller needs.
            ErrorKind::Raised { kind, .. } if !kind.is_empty() => format!("{kind}: {e}"),
            _ => e.to_string(),
        };
        CError { code, message }
    }
}

/// An error object: its code and message, owned by whoever holds the handle.
#[allow(non_camel_case_types)]
pub struct rvm_error {
    code: rvm_error_code,
    message: CString,
}

impl Handle for rvm_error {
    const KIND: Kind = Kind::Error;
}

impl rvm_error {
    /// Its code.
    pub fn code(&self) -> rvm_error_code {
        self.code
    }

    /// Its message.
    pub fn message(&self) -> std::borrow::Cow<'_, str> {
        self.message.to_string_lossy()
    }
}

/// `message` as a C string: a NUL inside it is written as `\0`.
pub fn c_string(message: &str) -> CString {
    CString::new(message.replace('\0', "\\0")).expect("NULs were replaced")
}

/// Publishes `e` as an error object.
pub fn publish_error(e: CError) -> *mut rvm_error {
    publish(rvm_error { code: e.code, message: c_string(&e.message) })
}

/// Runs the body of an entry point: its error, or a panic caught in it, becomes an error object;
/// success is NULL.
pub fn guard(f: impl FnOnce() -> Result<(), CError>) -> *mut rvm_error {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => ptr::null_mut(),
        Ok(Err(e)) => publish_error(e),
        Err(payload) => publish_error(CError::new(
            RVM_ERROR_PANIC,
            format!("relaxvm panicked (a bug; please report it): {}", relaxvm::packed::panic_message(&*payload)),
        )),
    }
}

/// Runs an entry point that returns a plain value: `fallback` when it panics.
pub fn guard_value<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fallback)
}

/// The code of `error`; `RVM_OK` for NULL, `RVM_ERROR_INVALID_ARGUMENT` for a pointer that is
/// not a live error object.
///
/// Ownership: borrows `error`. Thread safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn rvm_error_get_code(error: *const rvm_error) -> rvm_error_code {
    guard_value(RVM_ERROR_INVALID_ARGUMENT, || {
        if error.is_null() {
            return RVM_OK;
        }
        // SAFETY: the handle table confirms `error` is live; the caller does not free it
        // during this call.
        match unsafe { handle::borrow(error, "rvm_error_get_code") } {
            Ok(e) => e.code,
            Err(_) => RVM_ERROR_INVALID_ARGUMENT,
        }
    })
}

/// The message of `error`, NUL-terminated UTF-8: what was expected, what was found, and where.
/// A static text for NULL (`"no error"`) or a pointer that is not a live error object.
///
/// Ownership: the string belongs to `error` and lives until `rvm_error_free(error)`.
/// Thread safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn rvm_error_message(error: *const rvm_error) -> *const c_char {
    guard_value(c"relaxvm: panic while reading an error message".as_ptr(), || {
        if error.is_null() {
            return c"no error".as_ptr();
        }
        // SAFETY: as in `rvm_error_get_code`.
        match unsafe { handle::borrow(error, "rvm_error_message") } {
            Ok(e) => e.message.as_ptr(),
            Err(_) => {
                c"rvm_error_message: not a live rvm_error handle (freed already, or not made by relaxvm)".as_ptr()
            }
        }
    })
}

/// The name of `code` (`"RVM_ERROR_TYPE"`...), a static string; `"RVM_ERROR_UNKNOWN_CODE"` for
/// a number that is no code.
#[no_mangle]
pub extern "C" fn rvm_error_code_name(code: u32) -> *const c_char {
    guard_value(c"RVM_ERROR_UNKNOWN_CODE".as_ptr(), || match rvm_error_code::from_u32(code) {
        Some(c) => c.c_name().as_ptr(),
        None => c"RVM_ERROR_UNKNOWN_CODE".as_ptr(),
    })
}

/// Frees `error`. NULL is allowed (nothing happens); so is a pointer that is not a live error
/// object (nothing happens: a double free is detected and ignored).
///
/// Ownership: takes `error`. Thread safety: any thread, not concurrently with other uses of
/// `error`.
#[no_mangle]
pub unsafe extern "C" fn rvm_error_free(error: *mut rvm_error) {
    guard_value((), || {
        if !error.is_null() {
            // SAFETY: `take` frees only a live error handle; the caller uses it nowhere else.
            drop(unsafe { handle::take(error, "rvm_error_free") });
        }
    })
}

/// A new error object, for a registered C function to return: `code` (an `rvm_error_code`;
/// another number becomes `RVM_ERROR_OTHER`) and `message` (NUL-terminated; invalid UTF-8 is
/// replaced, NULL becomes an empty message). Returns NULL only if relaxvm itself panicked
/// while making it (out of memory, say).
///
/// Ownership: the caller owns the result (returning it from a packed function hands it to
/// relaxvm). Thread safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn rvm_error_new(code: u32, message: *const c_char) -> *mut rvm_error {
    let make = || {
        let code = rvm_error_code::from_u32(code).filter(|c| *c != RVM_OK).unwrap_or(RVM_ERROR_OTHER);
        let message = if message.is_null() {
            String::new()
        } else {
            // SAFETY: the caller passes a NUL-terminated string (documented).
            unsafe { CStr::from_ptr(message) }.to_string_lossy().into_owned()
        };
        publish_error(CError::new(code, message))
    };
    guard_value(ptr::null_mut(), make)
}

/// How many handles and strings this library gave out are still live (not freed): a program
/// that freed everything it received sees 0 — a leak check that LeakSanitizer cannot make, since
/// the handle table keeps every live handle reachable.
///
/// Thread safety: any thread.
#[no_mangle]
pub extern "C" fn rvm_live_handle_count() -> usize {
    guard_value(usize::MAX, handle::live_count)
}
