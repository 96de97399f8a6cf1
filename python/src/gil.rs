//! When a call releases the GIL: releasing and re-taking it costs about as much as running a
//! few instructions, so a function that only moves values, calls constant-time builtins and
//! calls Python keeps it; anything that may run long releases it. The analysis is
//! `relaxvm::long_calls` (Rust embedders holding a lock of their own use it too); this file
//! names the Python callables and the process-wide registry. Functions the analysis cannot
//! bound (kernels whose cost depends on symbolic input shapes) keep the GIL when their last
//! call with the same shapes ran short ([`relaxvm::short_calls::ShortRecord`]); such a call
//! runs marked ([`kept`]), so that the VM's poll hook hands the GIL to other threads if it
//! turns out long ([`yield_if_kept`]).

use crate::registry::is_python_backed;
use pyo3::Python;
use relaxvm::long_calls::{callee_costs, may_run_long, CalleeCost};
use relaxvm::Executable;
use std::cell::Cell;
use std::collections::HashSet;

/// Per function-table entry of `exe`, what calling it costs with the GIL held (Python
/// functions are callbacks).
pub fn gil_costs(exe: &Executable) -> Vec<CalleeCost> {
    // Found before the registry is locked for reading: `is_python_backed` reads it too, and a
    // second read lock on one thread can wait for a writer queued behind the first.
    let python: HashSet<&str> = exe.packed_function_names().into_iter().filter(|n| is_python_backed(n)).collect();
    callee_costs(exe, &relaxvm::registry::global(), |n| python.contains(n))
}

/// Whether calling bytecode function `start` should release the GIL (see
/// [`relaxvm::long_calls::may_run_long`]).
pub fn needs_release(exe: &Executable, costs: &[CalleeCost], start: usize) -> bool {
    may_run_long(exe, costs, start)
}

thread_local! {
    /// Whether this thread runs a call that keeps the GIL only because it ran short last time
    /// (`KEPT`), and whether that call reached the VM's poll hook since (`POLLED`).
    static KEPT: Cell<u8> = const { Cell::new(0) };
}

const KEPT_CALL: u8 = 1;
const POLLED: u8 = 2;

/// Runs `f` marked as a kept call (see [`yield_if_kept`]): its result, and whether it ran
/// long (reached the VM's poll hook).
pub fn kept<R>(f: impl FnOnce() -> R) -> (R, bool) {
    struct Restore(u8);
    impl Drop for Restore {
        fn drop(&mut self) {
            KEPT.with(|k| k.set(self.0));
        }
    }
    let outer = Restore(KEPT.with(|k| k.replace(KEPT_CALL)));
    let out = f();
    let polled = KEPT.with(|k| k.replace(outer.0)) & POLLED != 0;
    std::mem::forget(outer);
    (out, polled)
}

/// Runs `f`, a run with the GIL released, as not kept: a call nested in a kept call (from its
/// callback) that releases the GIL must never take it at its polls (attack finding perf/12:
/// a thread holding the GIL while it waits for that call would wait forever).
pub fn released<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(u8);
    impl Drop for Restore {
        fn drop(&mut self) {
            KEPT.with(|k| k.set(self.0));
        }
    }
    let _outer = Restore(KEPT.with(|k| k.replace(0)));
    f()
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
