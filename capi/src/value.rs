//! `rvm_value`: one relaxvm value (int, float, bool, string, shape, tensor, tuple, function...)
//! held by C.

use crate::error::{guard, guard_value, rvm_error, CError};
use crate::handle::{self, publish, Handle, Kind};
use crate::input::{slice_arg, write_out};
use relaxvm::{ArcString, Shape, Value};
use std::ffi::c_char;
use std::ptr;
use std::sync::{Arc, OnceLock};

/// A value held by C. Values are immutable: a tensor's elements may change (it shares memory),
/// the value itself does not.
#[allow(non_camel_case_types)]
pub struct rvm_value {
    /// The value.
    pub value: Value,
    /// A string value's bytes followed by a NUL, made on the first `rvm_value_get_str`.
    text: OnceLock<Vec<u8>>,
}

impl Handle for rvm_value {
    const KIND: Kind = Kind::Value;
}

/// Publishes `value` as a new handle owned by the caller.
pub fn new_value(value: Value) -> *mut rvm_value {
    publish(rvm_value { value, text: OnceLock::new() })
}

/// The value of live handle `p`.
///
/// # Safety
/// As [`handle::borrow`].
pub unsafe fn value_arg<'a>(p: *const rvm_value, what: &str) -> Result<&'a Value, CError> {
    // SAFETY: forwarded to the caller.
    Ok(&unsafe { handle::borrow(p, what) }?.value)
}

/// The values of an argument array of `n` handles.
///
/// # Safety
/// `args` points to `n` handle pointers (or `n` is 0); none is freed during the borrow.
pub unsafe fn values_arg(args: *const *const rvm_value, n: usize, what: &str) -> Result<Vec<Value>, CError> {
    // SAFETY: forwarded to the caller.
    let handles = unsafe { slice_arg(args, n, what) }?;
    let mut out = Vec::new();
    out.try_reserve_exact(handles.len()).map_err(|_| CError::invalid(format!("{what}: too many values")))?;
    for (i, h) in handles.iter().enumerate() {
        // SAFETY: forwarded to the caller.
        out.push(unsafe { value_arg(*h, &format!("{what}[{i}]")) }?.clone());
    }
    Ok(out)
}

/// What kind of value an `rvm_value` holds.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum rvm_value_kind {
    /// Not a live value handle.
    RVM_VALUE_INVALID = -1,
    /// No value (None).
    RVM_VALUE_NULL = 0,
    /// A 64-bit signed integer.
    RVM_VALUE_INT = 1,
    /// A 64-bit float.
    RVM_VALUE_FLOAT = 2,
    /// A boolean.
    RVM_VALUE_BOOL = 3,
    /// A UTF-8 string.
    RVM_VALUE_STR = 4,
    /// A shape (a tuple of int64 dimensions).
    RVM_VALUE_SHAPE = 5,
    /// A tensor (exchanged as DLPack).
    RVM_VALUE_TENSOR = 6,
    /// A tuple of values.
    RVM_VALUE_TUPLE = 7,
    /// A function or closure (from `rvm_vm_get_function`, or returned by a call).
    RVM_VALUE_FUNCTION = 8,
    /// Another object (a data type, a device, raw storage...), opaque to C.
    RVM_VALUE_OTHER = 9,
}

fn kind_of(v: &Value) -> rvm_value_kind {
    use rvm_value_kind::*;
    match v {
        Value::Null => RVM_VALUE_NULL,
        Value::Int(_) => RVM_VALUE_INT,
        Value::Float(_) => RVM_VALUE_FLOAT,
        Value::Bool(_) => RVM_VALUE_BOOL,
        Value::Str(_) => RVM_VALUE_STR,
        Value::Shape(_) => RVM_VALUE_SHAPE,
        Value::Tensor(_) => RVM_VALUE_TENSOR,
        Value::Tuple(_) => RVM_VALUE_TUPLE,
        Value::Func(_) => RVM_VALUE_FUNCTION,
        _ => RVM_VALUE_OTHER,
    }
}

fn expected(what: &str, want: &str, v: &Value) -> CError {
    CError::new(crate::error::rvm_error_code::RVM_ERROR_TYPE, format!("{what}: expected {want}, found {}", describe(v)))
}

/// `v` described for an error message ("the int 3", "a tensor"...).
pub fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Int(i) => format!("the int {i}"),
        Value::Float(x) => format!("the float {x}"),
        Value::Bool(b) => format!("the bool {b}"),
        Value::Str(_) => "a string".into(),
        Value::Shape(_) => "a shape".into(),
        Value::Tensor(_) => "a tensor".into(),
        Value::Tuple(t) => format!("a tuple of {}", t.len()),
        Value::Func(_) => "a function".into(),
        _ => "an object".into(),
    }
}

/// A new null value. Never NULL.
///
/// Ownership: the caller owns the result (`rvm_value_free`). Thread safety: any thread.
#[no_mangle]
pub extern "C" fn rvm_value_new_null() -> *mut rvm_value {
    guard_value(ptr::null_mut(), || new_value(Value::Null))
}

/// A new int value. Never NULL.
///
/// Ownership: the caller owns the result (`rvm_value_free`). Thread safety: any thread.
#[no_mangle]
pub extern "C" fn rvm_value_new_int(x: i64) -> *mut rvm_value {
    guard_value(ptr::null_mut(), || new_value(Value::Int(x)))
}

/// A new float value. Never NULL.
///
/// Ownership: the caller owns the result (`rvm_value_free`). Thread safety: any thread.
#[no_mangle]
pub extern "C" fn rvm_value_new_float(x: f64) -> *mut rvm_value {
    guard_value(ptr::null_mut(), || new_value(Value::Float(x)))
}

/// A new bool value (`x != 0`). Never NULL.
///
/// Ownership: the caller owns the result (`rvm_value_free`). Thread safety: any thread.
#[no_mangle]
pub extern "C" fn rvm_value_new_bool(x: bool) -> *mut rvm_value {
    guard_value(ptr::null_mut(), || new_value(Value::Bool(x)))
}

/// A new string value from `len` bytes at `data`, which must be UTF-8 (they may contain NUL).
///
/// Ownership: `data` is copied; on success `*out` is a new value the caller owns.
/// Thread safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn rvm_value_new_str(
    data: *const c_char,
    len: usize,
    out: *mut *mut rvm_value,
) -> *mut rvm_error {
    guard(|| {
        crate::input::check_out(out, "rvm_value_new_str")?;
        // SAFETY: the caller passes `len` readable bytes at `data`.
        let bytes = unsafe { slice_arg(data.cast::<u8>(), len, "rvm_value_new_str: data") }?;
        let s = std::str::from_utf8(bytes).map_err(|e| {
            CError::invalid(format!("rvm_value_new_str: not valid UTF-8 (byte {} of {len})", e.valid_up_to()))
        })?;
        // SAFETY: `out` was checked non-null; the caller passes a writable pointer.
        unsafe { write_out(out, new_value(Value::Str(ArcString::from(s))), "rvm_value_new_str") }
    })
}

/// A new shape value of `ndim` dimensions at `dims` (each >= 0).
///
/// Ownership: `dims` is copied; on success `*out` is a new value the caller owns.
/// Thread safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn rvm_value_new_shape(
    dims: *const i64,
    ndim: usize,
    out: *mut *mut rvm_value,
) -> *mut rvm_error {
    guard(|| {
        crate::input::check_out(out, "rvm_value_new_shape")?;
        // SAFETY: the caller passes `ndim` dimensions at `dims`.
        let dims = unsafe { slice_arg(dims, ndim, "rvm_value_new_shape: dims") }?;
        if let Some((i, d)) = dims.iter().enumerate().find(|(_, d)| **d < 0) {
            return Err(CError::new(
                crate::error::rvm_error_code::RVM_ERROR_VALUE,
                format!("rvm_value_new_shape: dims[{i}] is {d}; dimensions must be >= 0"),
            ));
        }
        // SAFETY: as above.
        unsafe { write_out(out, new_value(Value::Shape(Shape::new(dims.to_vec()))), "rvm_value_new_shape") }
    })
}

/// How deeply tuples made with `rvm_value_new_tuple` may nest (Python's `MAX_NESTING` too): Rust
/// code that walks values (printing, signature checks, builtins) recurses per level, and the
/// limit keeps that within any thread's stack.
pub const RVM_MAX_TUPLE_NESTING: usize = 1000;

/// Whether tuples nest more than `limit` levels deep in `items`, the items of a new tuple. Walks
/// level by level, each distinct tuple once per level, so a shared value (`v = (v, v)` nested)
/// costs its distinct tuples, not its paths.
fn nests_deeper_than(items: &[Value], limit: usize) -> bool {
    let mut level: Vec<&Arc<Vec<Value>>> =
        items.iter().filter_map(|v| if let Value::Tuple(t) = v { Some(t) } else { None }).collect();
    let mut depth = 1;
    while !level.is_empty() {
        depth += 1;
        if depth > limit {
            return true;
        }
        let mut seen = std::collections::HashSet::new();
        level = level
            .iter()
            .flat_map(|t| t.iter())
            .filter_map(|v| if let Value::Tuple(t) = v { Some(t) } else { None })
            .filter(|t| seen.insert(Arc::as_ptr(t)))
            .collect();
    }
    false
}

/// A new tuple of the `n` values at `items` (each a live value; NULL only when `n` is 0). Tuples
/// may nest at most `RVM_MAX_TUPLE_NESTING` levels (`RVM_ERROR_VALUE` past it).
///
/// Ownership: the items are borrowed (the tuple shares them: freeing an item afterwards does not
/// change the tuple); on success `*out` is a new value the caller owns. Thread safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn rvm_value_new_tuple(
    items: *const *const rvm_value,
    n: usize,
    out: *mut *mut rvm_value,
) -> *mut rvm_error {
    guard(|| {
        crate::input::check_out(out, "rvm_value_new_tuple")?;
        // SAFETY: the caller passes `n` live handles.
        let items = unsafe { values_arg(items, n, "rvm_value_new_tuple: items") }?;
        if nests_deeper_than(&items, RVM_MAX_TUPLE_NESTING) {
            return Err(CError::new(
                crate::error::rvm_error_code::RVM_ERROR_VALUE,
                format!("rvm_value_new_tuple: tuples would nest more than {RVM_MAX_TUPLE_NESTING} levels deep"),
            ));
        }
        // SAFETY: as above.
        unsafe { write_out(out, new_value(Value::Tuple(Arc::new(items))), "rvm_value_new_tuple") }
    })
}

/// A new handle to the same value as `v` (a tensor's memory is shared, not copied).
///
/// Ownership: borrows `v`; on success `*out` is a new value the caller owns.
/// Thread safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn rvm_value_clone(v: *const rvm_value, out: *mut *mut rvm_value) -> *mut rvm_error {
    guard(|| {
        crate::input::check_out(out, "rvm_value_clone")?;
        // SAFETY: the handle table checks `v`; the caller keeps it alive during the call.
        let v = unsafe { value_arg(v, "rvm_value_clone") }?.clone();
        // SAFETY: checked non-null above.
        unsafe { write_out(out, new_value(v), "rvm_value_clone") }
    })
}

/// Frees `v`. NULL is allowed (nothing happens); a pointer that is not a live value (a double
/// free) is an error object and frees nothing. A tensor's memory lives on while other values,
/// the VM or DLPack consumers use it.
///
/// Ownership: takes `v`. Thread safety: any thread, not concurrently with other uses of `v`.
#[no_mangle]
pub unsafe extern "C" fn rvm_value_free(v: *mut rvm_value) -> *mut rvm_error {
    guard(|| {
        if v.is_null() {
            return Ok(());
        }
        // SAFETY: `take` frees only a live value handle; the caller uses it nowhere else.
        drop(unsafe { handle::take(v, "rvm_value_free") }?);
        Ok(())
    })
}

/// The kind of value `v` holds; `RVM_VALUE_INVALID` when `v` is not a live value handle.
///
/// Ownership: borrows `v`. Thread safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn rvm_value_get_kind(v: *const rvm_value) -> rvm_value_kind {
    guard_value(rvm_value_kind::RVM_VALUE_INVALID, || {
        // SAFETY: the handle table checks `v`; the caller keeps it alive during the call.
        unsafe { value_arg(v, "rvm_value_get_kind") }.map_or(rvm_value_kind::RVM_VALUE_INVALID, kind_of)
    })
}

/// The int in `v` (a bool reads as 0 or 1); `RVM_ERROR_TYPE` for another kind.
///
/// Ownership: borrows `v`. Thread safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn rvm_value_get_int(v: *const rvm_value, out: *mut i64) -> *mut rvm_error {
    guard(|| {
        // SAFETY: the handle table checks `v`; the caller keeps it alive during the call.
        let x = match unsafe { value_arg(v, "rvm_value_get_int") }? {
            Value::Int(i) => *i,
            Value::Bool(b) => i64::from(*b),
            other => return Err(expected("rvm_value_get_int", "an int", other)),
        };
        // SAFETY: `write_out` checks `out` for NULL; the caller passes a writable pointer.
        unsafe { write_out(out, x, "rvm_value_get_int") }
    })
}

/// The float in `v` (an int converts); `RVM_ERROR_TYPE` for another kind.
///
/// Ownership: borrows `v`. Thread safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn rvm_value_get_float(v: *const rvm_value, out: *mut f64) -> *mut rvm_error {
    guard(|| {
        // SAFETY: as `rvm_value_get_int`.
        let x = match unsafe { value_arg(v, "rvm_value_get_float") }? {
            Value::Float(x) => *x,
            Value::Int(i) => *i as f64,
            other => return Err(expected("rvm_value_get_float", "a float", other)),
        };
        // SAFETY: as `rvm_value_get_int`.
        unsafe { write_out(out, x, "rvm_value_get_float") }
    })
}

/// The bool in `v`; `RVM_ERROR_TYPE` for another kind.
///
/// Ownership: borrows `v`. Thread safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn rvm_value_get_bool(v: *const rvm_value, out: *mut bool) -> *mut rvm_error {
    guard(|| {
        // SAFETY: as `rvm_value_get_int`.
        let x = match unsafe { value_arg(v, "rvm_value_get_bool") }? {
            Value::Bool(b) => *b,
            other => return Err(expected("rvm_value_get_bool", "a bool", other)),
        };
        // SAFETY: as `rvm_value_get_int`.
        unsafe { write_out(out, x, "rvm_value_get_bool") }
    })
}

/// The string in `v`: `*data` points to its UTF-8 bytes followed by a NUL, `*len` (if not NULL)
/// is its length in bytes without the NUL (the string may contain NULs).
///
/// Ownership: `*data` belongs to `v` and lives until `v` is freed. Thread safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn rvm_value_get_str(
    v: *const rvm_value,
    data: *mut *const c_char,
    len: *mut usize,
) -> *mut rvm_error {
    guard(|| {
        // SAFETY: the handle table checks `v`; the caller keeps it alive during the call.
        let h = unsafe { handle::borrow(v, "rvm_value_get_str") }?;
        let Value::Str(s) = &h.value else { return Err(expected("rvm_value_get_str", "a string", &h.value)) };
        let text = h.text.get_or_init(|| {
            let mut t = Vec::with_capacity(s.len() + 1);
            t.extend_from_slice(s.as_bytes());
            t.push(0);
            t
        });
        // SAFETY: `write_out` checks for NULL; the caller passes a writable pointer. It runs
        // first, so that a NULL `data` leaves `*len` unwritten (outputs only on success).
        unsafe { write_out(data, text.as_ptr().cast::<c_char>(), "rvm_value_get_str") }?;
        if !len.is_null() {
            // SAFETY: non-null, and the caller passes a writable pointer.
            unsafe { len.write(s.len()) };
        }
        Ok(())
    })
}

/// The dimensions of a shape value `v` (or of a tensor value's shape): `*dims` points to
/// `*ndim` int64s (`*dims` may be NULL when `*ndim` is 0).
///
/// Ownership: `*dims` belongs to `v` and lives until `v` is freed. Thread safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn rvm_value_get_shape(
    v: *const rvm_value,
    dims: *mut *const i64,
    ndim: *mut usize,
) -> *mut rvm_error {
    guard(|| {
        crate::input::check_out(ndim, "rvm_value_get_shape: ndim")?;
        // SAFETY: the handle table checks `v`; the caller keeps it alive during the call.
        let d: &[i64] = match unsafe { value_arg(v, "rvm_value_get_shape") }? {
            Value::Shape(s) => s.dims(),
            Value::Tensor(t) => t.shape().dims(),
            other => return Err(expected("rvm_value_get_shape", "a shape or a tensor", other)),
        };
        // SAFETY: `write_out` checks for NULL; the caller passes writable pointers.
        unsafe {
            write_out(dims, d.as_ptr(), "rvm_value_get_shape: dims")?;
            write_out(ndim, d.len(), "rvm_value_get_shape: ndim")
        }
    })
}

/// The number of items of a tuple value `v`.
///
/// Ownership: borrows `v`. Thread safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn rvm_value_tuple_size(v: *const rvm_value, out: *mut usize) -> *mut rvm_error {
    guard(|| {
        // SAFETY: the handle table checks `v`; the caller keeps it alive during the call.
        let n = match unsafe { value_arg(v, "rvm_value_tuple_size") }? {
            Value::Tuple(t) => t.len(),
            other => return Err(expected("rvm_value_tuple_size", "a tuple", other)),
        };
        // SAFETY: `write_out` checks for NULL; the caller passes a writable pointer.
        unsafe { write_out(out, n, "rvm_value_tuple_size") }
    })
}

/// Item `index` of a tuple value `v`, as a new value; `RVM_ERROR_INDEX` past the end.
///
/// Ownership: borrows `v`; on success `*out` is a new value the caller owns.
/// Thread safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn rvm_value_tuple_get(
    v: *const rvm_value,
    index: usize,
    out: *mut *mut rvm_value,
) -> *mut rvm_error {
    guard(|| {
        crate::input::check_out(out, "rvm_value_tuple_get")?;
        // SAFETY: the handle table checks `v`; the caller keeps it alive during the call.
        let item = match unsafe { value_arg(v, "rvm_value_tuple_get") }? {
            Value::Tuple(t) => t.get(index).cloned().ok_or_else(|| {
                CError::new(
                    crate::error::rvm_error_code::RVM_ERROR_INDEX,
                    format!("rvm_value_tuple_get: index {index} out of range for a tuple of {}", t.len()),
                )
            })?,
            other => return Err(expected("rvm_value_tuple_get", "a tuple", other)),
        };
        // SAFETY: checked non-null above.
        unsafe { write_out(out, new_value(item), "rvm_value_tuple_get") }
    })
}

/// `v` as text, as relaxvm prints values (a tensor's elements, abbreviated when large).
///
/// Ownership: borrows `v`; on success `*out` is a NUL-terminated string the caller frees with
/// `rvm_string_free`. Thread safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn rvm_value_to_string(v: *const rvm_value, out: *mut *mut c_char) -> *mut rvm_error {
    guard(|| {
        crate::input::check_out(out, "rvm_value_to_string")?;
        // SAFETY: the handle table checks `v`; the caller keeps it alive during the call.
        let text = unsafe { value_arg(v, "rvm_value_to_string") }?.to_string();
        // SAFETY: checked non-null above.
        unsafe { write_out(out, crate::string::new_string(&text), "rvm_value_to_string") }
    })
}
