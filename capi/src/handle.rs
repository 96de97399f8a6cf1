//! Handles: the objects C holds, and the checks every entry point makes on them.
//!
//! Every handle this library gives out is recorded, with its type, in one process-wide table
//! until it is freed. A pointer is used only after the table confirms it is a live handle of
//! the expected type, so a null pointer, a pointer of another handle type, a freed handle
//! (double free, use after free) or a pointer that never was a handle is an error object,
//! never undefined behaviour — except when the address has since been reused by a new handle
//! of the same type, which no table can tell apart.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// The handle types, as the table records them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `rvm_error`.
    Error,
    /// `rvm_executable`.
    Executable,
    /// `rvm_vm`.
    Vm,
    /// `rvm_value`.
    Value,
    /// A string this library allocated (`char*`, freed with `rvm_string_free`).
    String,
}

impl Kind {
    fn c_name(self) -> &'static str {
        match self {
            Kind::Error => "rvm_error",
            Kind::Executable => "rvm_executable",
            Kind::Vm => "rvm_vm",
            Kind::Value => "rvm_value",
            Kind::String => "string (from relaxvm)",
        }
    }
}

/// A pointer C passed that is not a live handle of the expected type: what was expected, what
/// was found, and the argument (`crate::error` makes it an error object, so this file needs no
/// error objects of its own: error objects are themselves handles).
#[derive(Debug)]
pub struct HandleError(pub String);

impl std::fmt::Display for HandleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A Rust type handed to C as a handle.
pub trait Handle: Sized {
    /// Its type in the table.
    const KIND: Kind;
}

fn live() -> MutexGuard<'static, HashMap<usize, Kind>> {
    static LIVE: OnceLock<Mutex<HashMap<usize, Kind>>> = OnceLock::new();
    // A panic while the lock is held cannot leave the map half-updated (each operation is one
    // insert or remove), so a poisoned lock is still sound to use.
    LIVE.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner())
}

/// Gives `value` to C: the returned pointer is live until [`take`] frees it.
pub fn publish<T: Handle>(value: T) -> *mut T {
    let p = Box::into_raw(Box::new(value));
    live().insert(p as usize, T::KIND);
    p
}

fn check(p: usize, kind: Kind, what: &str) -> Result<(), HandleError> {
    check_in(&live(), p, kind, what)
}

fn check_in(table: &HashMap<usize, Kind>, p: usize, kind: Kind, what: &str) -> Result<(), HandleError> {
    if p == 0 {
        return Err(HandleError(format!("{what}: expected an {} handle, found NULL", kind.c_name())));
    }
    match table.get(&p) {
        Some(k) if *k == kind => Ok(()),
        Some(k) => {
            Err(HandleError(format!("{what}: expected an {} handle, found an {} handle", kind.c_name(), k.c_name())))
        }
        None => Err(HandleError(format!(
            "{what}: {p:#x} is not a live {} handle (freed already, or not made by relaxvm)",
            kind.c_name()
        ))),
    }
}

/// The live handle `p` of type `T`, borrowed.
///
/// # Safety
/// The caller must not free `p` (on any thread) while the reference is used: the table proves
/// `p` was live when checked, not that it stays live.
pub unsafe fn borrow<'a, T: Handle>(p: *const T, what: &str) -> Result<&'a T, HandleError> {
    check(p as usize, T::KIND, what)?;
    // SAFETY: the table holds `p` with `T`'s kind: it came from `Box::into_raw` of a `T` in
    // `publish` and has not been taken back; the caller keeps it alive while borrowed.
    Ok(unsafe { &*p })
}

/// Takes the live handle `p` back from C (it is no longer live afterwards).
///
/// # Safety
/// No other thread may be using `p`.
pub unsafe fn take<T: Handle>(p: *mut T, what: &str) -> Result<Box<T>, HandleError> {
    let mut table = live();
    check_in(&table, p as usize, T::KIND, what)?;
    table.remove(&(p as usize));
    drop(table);
    // SAFETY: as in `borrow`; removing it from the table made this the only owner.
    Ok(unsafe { Box::from_raw(p) })
}

/// Records `p` (a string this library allocated) as live until [`forget`] removes it.
pub fn publish_raw(p: usize, kind: Kind) {
    live().insert(p, kind);
}

/// Removes the live record of `p`, which must be of `kind`: an error otherwise (double free).
pub fn forget(p: usize, kind: Kind, what: &str) -> Result<(), HandleError> {
    let mut table = live();
    check_in(&table, p, kind, what)?;
    table.remove(&p);
    Ok(())
}

/// Whether `p` is a live handle of type `T`.
pub fn is_live<T: Handle>(p: *const T) -> bool {
    !p.is_null() && live().get(&(p as usize)) == Some(&T::KIND)
}

/// How many handles and strings this library gave out are still live (see
/// `rvm_live_handle_count`).
pub fn live_count() -> usize {
    live().len()
}
