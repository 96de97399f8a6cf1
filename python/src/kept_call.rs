//! The mark of a call that keeps the GIL only because its last call with the same shapes ran
//! short (`crate::gil` decides which calls those are): the VM's poll hook reads it to hand the
//! GIL to other threads when such a call turns out long, and notes that it did so the next call
//! releases.

use pyo3::Python;
use std::cell::Cell;

thread_local! {
    /// Whether this thread runs a call that keeps the GIL only because it ran short last time
    /// (`KEPT_CALL`), and whether that call reached the VM's poll hook since (`POLLED`).
    static KEPT: Cell<u8> = const { Cell::new(0) };
}

const KEPT_CALL: u8 = 1;
const POLLED: u8 = 2;

/// Runs `f` marked as a kept call (see [`yield_if_kept`]): its result, and whether it ran
/// long (reached the VM's poll hook). The outer mark comes back whether `f` returns or unwinds;
/// an outer kept call also keeps the inner one's "ran long" (it ran at least as long).
pub fn kept<R>(f: impl FnOnce() -> R) -> (R, bool) {
    /// Puts the outer mark back (keeping the inner call's "ran long" under an outer kept call).
    struct Restore<'a>(&'a Cell<u8>, u8);
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            let inner = self.0.get();
            self.0.set(if self.1 == 0 { 0 } else { self.1 | (inner & POLLED) });
        }
    }
    // One thread-local lookup for the whole call (each is an out-of-line `__tls_get_addr` in
    // a shared library): the mark is set, read and restored through the one reference.
    KEPT.with(|k| {
        let outer = Restore(k, k.replace(KEPT_CALL));
        let out = f();
        let left = k.get();
        drop(outer);
        (out, left & POLLED != 0)
    })
}

/// Whether this thread holds the GIL now.
fn holds_gil() -> bool {
    // SAFETY: `PyGILState_Check` may be called from any thread at any time, with or without
    // the GIL or a thread state (it reads this thread's state only); the VM's poll hook runs
    // only while the interpreter that loaded this extension is alive.
    unsafe { pyo3::ffi::PyGILState_Check() == 1 }
}

/// The VM's poll hook's first step (every [`relaxvm::POLL_INTERVAL`] steps of a long run, and
/// while a parallel kernel's launch waits for its workers): in a call that keeps the GIL
/// because it ran short last time, notes that it ran long and releases and retakes the GIL,
/// so that other Python threads run meanwhile (as CPython's own loop hands the GIL over when
/// another thread asks for it) — including a pool worker whose task calls back into Python,
/// which the launching thread waits for.
///
/// Only a thread that holds the GIL hands it over: a run nested in a kept call's callback that
/// released the GIL (a releasing VM call, a global function, the command-line tool, any future
/// detach) sees the outer mark, and taking the GIL at its polls would throttle it and deadlock
/// with a thread that holds the GIL while waiting for it (attack finding perf/12). Its polls
/// still note that the outer call ran long.
pub fn yield_if_kept() {
    let kept = KEPT.with(|k| {
        k.get() != 0 && {
            k.set(KEPT_CALL | POLLED);
            true
        }
    });
    if kept && holds_gil() {
        Python::attach(|py| py.detach(|| ()));
    }
}
