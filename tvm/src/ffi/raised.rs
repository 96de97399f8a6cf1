//! The error a kernel raises: the tvm-ffi C functions that set it, and the thread-local slot
//! the runtime takes it from after a kernel returns non-zero.
//!
//! Kernels import `TVMFFIErrorSetRaisedFromCStrParts` (an undefined symbol of every TVM
//! library), which the copy relaxvm loads imports as `RVMFFIErrorSetRaisedFromCStrParts`
//! (`rebind.rs`), defined here with C linkage so that the dynamic loader binds it (see
//! `visibility.rs`); they reach `TVMFFIErrorSetRaisedFromCStr` through a pointer slot. relaxvm
//! defines no function under TVM's names, so the libraries TVM's runtime opens in the same
//! process keep binding TVM's.

use super::thread_state::{self, ThreadState};
use relaxvm::{Error, ErrorKind};
use std::cell::RefCell;
use std::ffi::{c_char, CStr};
use std::sync::{Arc, OnceLock};

/// This thread's recorded error. One thread-local for both parts: [`clear`] runs before every
/// kernel call, and each thread-local costs a lookup in a dynamically loaded library.
#[derive(Default)]
struct Slot {
    raised: Option<(String, String)>,
    /// The embedder's own error behind `raised`, when it must pass through kernels unchanged
    /// (see [`pass_through`]); cleared whenever `raised` changes otherwise.
    carried: Option<Foreign>,
}

thread_local! {
    /// Its flag, false only while the slot is surely empty, is in the thread's
    /// [`ThreadState`] (shared with the kernel-call guard, one lookup a call): every access
    /// through [`with_slot`] sets it, and [`clear`] resets it once it emptied the slot. A plain
    /// flag (no destructor to register, no borrow to track) lets the [`clear`] before every
    /// kernel call skip the slot itself, about 25 instructions a call.
    static SLOT: RefCell<Slot> = const { RefCell::new(Slot { raised: None, carried: None }) };
}

/// Runs `f` on this thread's [`Slot`]. `f` must not drop an error it replaces: dropping an
/// embedder's error may run its code (a Python exception's `__del__`), which may use the slot
/// (a kernel call's [`clear`], a callback's [`set`]) while it is borrowed; [`replace_slot`]
/// and the takes hand the old contents out instead.
fn with_slot<R>(f: impl FnOnce(&mut Slot) -> R) -> R {
    thread_state::with(|state| state.set_raised_dirty(true));
    SLOT.with(|s| f(&mut s.borrow_mut()))
}

/// Puts `new` in this thread's slot; the old contents are dropped after the borrow ends (see
/// [`with_slot`]).
fn replace_slot(new: Slot) {
    let old = with_slot(|s| std::mem::replace(s, new));
    drop(old);
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
    let (raised, carried) = with_slot(|s| (s.raised.take(), s.carried.take()));
    raised.map(|(kind, message)| Pending { kind, message, carried })
}

/// Raises `p` on this thread (taken on another by [`take_pending`]).
pub fn restore(p: Pending) {
    replace_slot(Slot { raised: Some((p.kind, p.message)), carried: p.carried });
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
    replace_slot(Slot { raised: Some((kind, message)), carried: None });
}

/// Takes the error the current thread recorded, as `(kind, message)`.
pub fn take_raw() -> Option<(String, String)> {
    with_slot(|s| s.raised.take())
}

/// Takes the error the current thread recorded, as a relaxvm error about `what` (e.g. `kernel
/// "matmul"`). A non-zero return without a recorded error is reported as such.
pub fn take(what: &str) -> Error {
    let (raw, carried) = with_slot(|s| (s.raised.take(), s.carried.take()));
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
            let old = with_slot(|s| s.carried.replace(inner.clone()));
            drop(old);
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
// Inline: the check is what every kernel call runs; the call around it cost as much again.
#[inline]
pub fn clear() {
    thread_state::with(clear_in);
}

/// [`clear`] with this thread's state at hand (`state` is this thread's).
#[inline]
pub(crate) fn clear_in(state: &ThreadState) {
    // Usually untouched since the last clear: then the slot is not even looked at.
    if state.raised_dirty() {
        clear_slot();
    }
}

/// [`clear`]'s work when the slot may hold something.
#[inline(never)]
fn clear_slot() {
    // Usually empty: then nothing is moved or dropped.
    let old = with_slot(|s| (s.raised.is_some() || s.carried.is_some()).then(|| std::mem::take(s)));
    // Empty now. Reset before the drop, which may run an embedder's code that sets the slot
    // again (through `with_slot`, which marks it again).
    thread_state::with(|state| state.set_raised_dirty(false));
    drop(old);
}

/// What relaxvm stores in a library's `__TVMFFIErrorSetRaisedFromCStr` slot
/// (`TVMFFIErrorSetRaisedFromCStr(kind, message)`): not exported, so that taking its address
/// inside a shared library cannot yield another object's definition of an exported name.
///
/// # Safety
/// `kind` and `message` are null or NUL-terminated strings.
pub(crate) unsafe extern "C" fn set_raised_from_cstr_slot(kind: *const c_char, message: *const c_char) {
    // SAFETY: forwarded from the caller's contract.
    let (k, m) = unsafe { (text(kind), text(message)) };
    set(k, m);
}

/// `TVMFFIErrorSetRaisedFromCStrParts(kind, parts, num_parts)`, under relaxvm's name (see the
/// module's note): the message is the parts concatenated.
///
/// # Safety
/// `kind` is null or a NUL-terminated string; `parts` is null or points to `num_parts` pointers,
/// each null or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn RVMFFIErrorSetRaisedFromCStrParts(
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

    /// An embedder's error (passing through kernels) whose drop uses the slot, as a Python
    /// exception's `__del__` may (attack finding perf/11).
    #[derive(Debug)]
    struct UsesTheSlotWhenDropped;

    impl std::fmt::Display for UsesTheSlotWhenDropped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("passes: uses the slot when dropped")
        }
    }

    impl std::error::Error for UsesTheSlotWhenDropped {}

    impl Drop for UsesTheSlotWhenDropped {
        fn drop(&mut self) {
            // Panics ("already borrowed") if the slot is borrowed while this runs.
            SLOT.with(|s| drop(s.borrow_mut()));
        }
    }

    /// An embedder's error (passing through kernels) whose drop records another error.
    #[derive(Debug)]
    struct SetsAnErrorWhenDropped;

    impl std::fmt::Display for SetsAnErrorWhenDropped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("passes: sets an error when dropped")
        }
    }

    impl std::error::Error for SetsAnErrorWhenDropped {}

    impl Drop for SetsAnErrorWhenDropped {
        fn drop(&mut self) {
            set("ValueError".into(), "set while dropped".into());
        }
    }

    #[test]
    fn clear_empties_the_slot_whatever_was_recorded_meanwhile() {
        pass_through(|e| e.to_string().starts_with("passes"));
        let unset = "failed without setting an error message";
        // Nothing recorded: a clear finds nothing, and a take says so.
        clear();
        clear();
        assert!(take("k").to_string().contains(unset));
        // Recorded after a clear: the next clear removes it.
        set("ValueError".into(), "stale".into());
        clear();
        assert!(take("k").to_string().contains(unset));
        // Taken, then recorded again without a clear in between: still seen by the next one.
        set("ValueError".into(), "first".into());
        assert!(take("k").to_string().contains("first"));
        set("ValueError".into(), "second".into());
        clear();
        assert!(take("k").to_string().contains(unset));
        // The clear's own drop records an error: the next clear must still see and remove it.
        set_error(&Error::external(SetsAnErrorWhenDropped));
        clear();
        assert!(take_raw().is_some_and(|(_, m)| m == "set while dropped"));
        set_error(&Error::external(SetsAnErrorWhenDropped));
        clear();
        clear();
        assert!(take("k").to_string().contains(unset));
    }

    #[test]
    fn a_carried_error_is_dropped_after_the_slot_is_let_go_by_clear_set_and_restore() {
        pass_through(|e| e.to_string().starts_with("passes"));
        // The slot holds the last reference to the carried error each time.
        let carry = || set_error(&Error::external(UsesTheSlotWhenDropped));
        carry();
        clear();
        carry();
        set("ValueError".into(), "next".into());
        assert!(take("k").to_string().contains("next"));
        carry();
        restore(Pending::new("ValueError".into(), "restored".into()));
        assert!(take("k").to_string().contains("restored"));
        carry();
        set_error(&Error::external(UsesTheSlotWhenDropped));
        clear();
    }

    #[test]
    fn parts_are_joined_and_taken_once() {
        let parts = [c"shape ".as_ptr(), c"mismatch".as_ptr()];
        // SAFETY: static NUL-terminated strings and an array of two of them.
        unsafe { RVMFFIErrorSetRaisedFromCStrParts(c"ValueError".as_ptr(), parts.as_ptr(), 2) };
        let e = take("kernel \"k\"");
        assert!(matches!(e.kind(), ErrorKind::Raised { kind, .. } if kind == "ValueError"));
        assert!(e.to_string().contains("kernel \"k\" raised ValueError: shape mismatch"), "{e}");
        assert!(take("x").to_string().contains("without setting an error message"));
        // SAFETY: null pointers are accepted.
        unsafe { set_raised_from_cstr_slot(std::ptr::null(), std::ptr::null()) };
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
        // `clear` forgets both parts: a later failure without an error of its own says so.
        set_error(&Error::external(std::io::Error::other("passes: stale")));
        clear();
        assert!(take("k").to_string().contains("without setting an error message"));
        clear();
    }
}
