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

/// Runs `f` with this thread's mark set to `mark`; returns its result and the mark `f` left.
/// The outer mark comes back whether `f` returns or unwinds.
fn marked<R>(mark: u8, f: impl FnOnce() -> R) -> (R, u8) {
    struct Restore(u8);
    impl Drop for Restore {
        fn drop(&mut self) {
            KEPT.with(|k| k.set(self.0));
        }
    }
    let outer = Restore(KEPT.with(|k| k.replace(mark)));
    let out = f();
    let left = KEPT.with(|k| k.get());
    drop(outer);
    (out, left)
}

/// Runs `f` marked as a kept call (see [`yield_if_kept`]): its result, and whether it ran
/// long (reached the VM's poll hook).
pub fn kept<R>(f: impl FnOnce() -> R) -> (R, bool) {
    let (out, left) = marked(KEPT_CALL, f);
    (out, left & POLLED != 0)
}

/// Runs `f`, a run with the GIL released, as not kept: a call nested in a kept call (from its
/// callback) that releases the GIL must never take it at its polls (attack finding perf/12:
/// a thread holding the GIL while it waits for that call would wait forever).
pub fn released<R>(f: impl FnOnce() -> R) -> R {
    marked(0, f).0
}

/// The VM's poll hook's first step (every [`relaxvm::POLL_INTERVAL`] steps of a long run, and
/// while a parallel kernel's launch waits for its workers): in a call that keeps the GIL
/// because it ran short last time, notes that it ran long and releases and retakes the GIL,
/// so that other Python threads run meanwhile (as CPython's own loop hands the GIL over when
/// another thread asks for it) — including a pool worker whose task calls back into Python,
/// which the launching thread waits for.
pub fn yield_if_kept() {
    if KEPT.with(|k| {
        k.get() != 0 && {
            k.set(KEPT_CALL | POLLED);
            true
        }
    }) {
        Python::attach(|py| py.detach(|| ()));
    }
}
