//! Which thread a task works for.
//!
//! A launch's launcher blocks until every task has finished, so a task running on a worker is
//! part of the launcher's work: anything the launcher holds while it waits (a VM, a lock) is
//! held on the task's behalf too, and a task that waits for it waits for itself. Locks that
//! detect re-entry by thread (the Python package's VM lock) ask [`is_me_or_my_launcher`]
//! instead of comparing thread ids, so that a callback on a worker that re-enters what its
//! launcher holds gets the re-entry error, as it would on the launching thread, instead of a
//! deadlock.
//!
//! Launches from inside a task run inline (see the pool's documentation), so a worker works
//! for at most one launcher and the lineage is one link deep.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// The next thread key to hand out (0 means "none").
static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// This thread's key, assigned on first use.
    static KEY: Cell<u64> = const { Cell::new(0) };
    /// The key of the thread whose launch this thread runs a task of (0: none).
    static LAUNCHER: Cell<u64> = const { Cell::new(0) };
}

/// A number naming the calling thread for the life of the process: never 0, never reused by
/// another thread (unlike an OS thread id or a Python thread state's address).
#[inline]
pub fn thread_key() -> u64 {
    KEY.with(|k| match k.get() {
        0 => {
            let key = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
            k.set(key);
            key
        }
        key => key,
    })
}

/// The key of the thread that launched the task this thread is running on a pool worker; 0
/// when it runs none (or runs a task of its own launch, on itself).
#[inline]
pub fn launcher() -> u64 {
    LAUNCHER.with(Cell::get)
}

/// True when `key` names the calling thread, or the thread waiting in the launch whose task
/// the calling thread runs: either way, a wait of this thread for something `key` holds would
/// never end.
#[inline]
pub fn is_me_or_my_launcher(key: u64) -> bool {
    key != 0 && (key == thread_key() || key == launcher())
}

/// While alive, the calling thread runs a task for the thread `launcher`.
pub(super) struct WorkingFor {
    previous: u64,
}

impl WorkingFor {
    /// Marks the calling thread as working for `launcher` until the guard drops.
    pub(super) fn enter(launcher: u64) -> WorkingFor {
        WorkingFor { previous: LAUNCHER.with(|l| l.replace(launcher)) }
    }
}

impl Drop for WorkingFor {
    fn drop(&mut self) {
        LAUNCHER.with(|l| l.set(self.previous));
    }
}
