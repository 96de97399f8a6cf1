//! Strings this library allocates for C (`char*`), freed with `rvm_string_free`.

use crate::error::{c_string, guard, rvm_error};
use crate::handle::{self, Kind};
use std::ffi::{c_char, CString};

/// `text` as a new C string owned by the caller (a NUL inside it is written as `\0`).
pub fn new_string(text: &str) -> *mut c_char {
    let p = c_string(text).into_raw();
    handle::publish_raw(p as usize, Kind::String);
    p
}

/// Frees a string this library returned. NULL is allowed (nothing happens); a pointer that is
/// not a live string from this library (a double free) is an error object and frees nothing.
///
/// Ownership: takes `s`. Thread safety: any thread, not concurrently with other uses of `s`.
#[no_mangle]
pub unsafe extern "C" fn rvm_string_free(s: *mut c_char) -> *mut rvm_error {
    guard(|| {
        if s.is_null() {
            return Ok(());
        }
        handle::forget(s as usize, Kind::String, "rvm_string_free")?;
        // SAFETY: `s` came from `CString::into_raw` in `new_string` and was live until `forget`
        // removed it just now, so this is its only release.
        drop(unsafe { CString::from_raw(s) });
        Ok(())
    })
}
