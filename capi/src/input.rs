//! What C passes in: strings and arrays, checked before use.

use crate::error::CError;
use std::ffi::{c_char, CStr};

/// The most elements an array argument may have (2^32): larger counts are refused before any
/// pointer is read (a negative `int` cast to `size_t` lands far above it).
pub const RVM_MAX_ARRAY_ELEMENTS: u64 = 4_294_967_296;
const MAX_ELEMENTS: usize = RVM_MAX_ARRAY_ELEMENTS as usize;

/// The NUL-terminated UTF-8 string `p`, borrowed; `what` names the argument in errors.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that outlives the borrow.
pub unsafe fn str_arg<'a>(p: *const c_char, what: &str) -> Result<&'a str, CError> {
    if p.is_null() {
        return Err(CError::invalid(format!("{what}: expected a string, found NULL")));
    }
    // SAFETY: non-null and NUL-terminated, as the caller guarantees.
    let bytes = unsafe { CStr::from_ptr(p) }.to_bytes();
    std::str::from_utf8(bytes).map_err(|e| {
        CError::invalid(format!(
            "{what}: not valid UTF-8 (byte {} of {:?})",
            e.valid_up_to(),
            String::from_utf8_lossy(bytes)
        ))
    })
}

/// `len` elements from `p`, borrowed; NULL is allowed only with `len == 0`.
///
/// # Safety
/// `p` points to `len` initialized elements that outlive the borrow (or `len` is 0).
pub unsafe fn slice_arg<'a, T>(p: *const T, len: usize, what: &str) -> Result<&'a [T], CError> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(CError::invalid(format!("{what}: expected {len} elements, found NULL")));
    }
    if len > MAX_ELEMENTS || len.checked_mul(std::mem::size_of::<T>()).is_none_or(|b| b > isize::MAX as usize) {
        return Err(CError::invalid(format!("{what}: {len} elements is more than the {MAX_ELEMENTS} allowed")));
    }
    if !(p as usize).is_multiple_of(std::mem::align_of::<T>()) {
        return Err(CError::invalid(format!("{what}: pointer {p:?} is not aligned")));
    }
    // SAFETY: non-null, aligned, and the caller guarantees `len` initialized elements.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// Writes `value` to the out-parameter `out`, which must not be NULL.
///
/// # Safety
/// `out` is NULL or valid for a write of `T`.
pub unsafe fn write_out<T>(out: *mut T, value: T, what: &str) -> Result<(), CError> {
    check_out(out, what)?;
    // SAFETY: non-null and valid for writes, as the caller guarantees.
    unsafe { out.write(value) };
    Ok(())
}

/// Checks that the out-parameter `out` is not NULL (before work whose result it receives).
pub fn check_out<T>(out: *mut T, what: &str) -> Result<(), CError> {
    if out.is_null() {
        return Err(CError::invalid(format!("{what}: the output pointer is NULL")));
    }
    Ok(())
}
